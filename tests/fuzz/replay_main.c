/*
 * replay_main.c - run a libFuzzer entry point over files without libFuzzer (any compiler).
 * Usage: replay DIR_OR_FILE... ; every regular file of a directory (not recursive, dot files
 * skipped) is read into an exact-size heap buffer and passed to LLVMFuzzerTestOneInput.
 * Exits 1 if nothing was replayed or a file could not be read; a failing input aborts.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *buf;
	size_t n;

	if (!f || fstat(fileno(f), &st) != 0 || st.st_size < 0) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		if (f)
			fclose(f);
		return -1;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		fclose(f);
		return -1;
	}
	n = fread(buf, 1, (size_t)st.st_size, f);
	fclose(f);
	if (n != (size_t)st.st_size) {
		fprintf(stderr, "replay: short read on %s\n", path);
		free(buf);
		return -1;
	}
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

static int replay_dir(const char *dir, unsigned *count)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4096];
	int rc = 0;

	if (!d) {
		fprintf(stderr, "replay: cannot open %s\n", dir);
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		if (replay_file(path) != 0)
			rc = -1;
		else
			(*count)++;
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: %s: not found\n", argv[i]);
			rc = -1;
		} else if (S_ISDIR(st.st_mode)) {
			rc |= replay_dir(argv[i], &count);
		} else if (replay_file(argv[i]) == 0) {
			count++;
		} else {
			rc = -1;
		}
	}
	printf("replayed %u inputs\n", count);
	return (rc != 0 || count == 0) ? 1 : 0;
}
