/*
 * heap_check.c - ctest unit.test_shared_heap: run with LD_PRELOAD=libomx-shared-heap.so (the test
 * sets it), checks that a program's large mallocs come from the shared pool and behave as the C
 * library's: every allocation call, sizes around the threshold, contents kept through realloc,
 * zeroed calloc, alignments, the pool refusing (a small reservation) falling back to the C
 * library, fork giving the child private copies it can free, threads, and no pool file left
 * behind. The pool's directory is a private one (OMX_SHM_DIR, set before the first large malloc).
 */
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "omx_shared_alloc.h"

static int passed, failed;
#define CHECK(c)                                                                              \
	do {                                                                                  \
		if (c)                                                                        \
			passed++;                                                             \
		else                                                                          \
			failed++, fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
	} while (0)

static char dir[64];

static int pool_files(void)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n += strstr(e->d_name, ".pool") != NULL;
	if (d)
		closedir(d);
	return n;
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

static int same(const uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)(seed + i * 7))
			return 0;
	return 1;
}

static int zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void *churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg, bad = 0;
	for (int i = 0; i < 400; i++) {
		size_t n = 65536 + (size_t)(rand_r(&seed) % (1u << 20));
		uint8_t *p = malloc(n);
		if (!p || !omx_shared_size(p)) {
			bad++;
			continue;
		}
		fill(p, n, (uint8_t)i);
		bad += !same(p, n, (uint8_t)i);
		free(p);
	}
	return (void *)(uintptr_t)bad;
}

/* In a process with a 16 MiB reservation: what the pool cannot hold comes from the C library;
 * and a lower OMX_SHARED_HEAP_MIN, and OMX_SHARED_HEAP_MAX. */
static int small_pool(void)
{
	/* OMX_SHARED_HEAP_MAX=8 MiB (set by the parent): a page more goes to the C library, though
	 * the pool, empty yet, could hold it */
	void *over = malloc((8 << 20) + 4096);
	int ok = over && !omx_shared_size(over);
	free(over);
	uint8_t *huge = malloc(64 << 20), *fits = malloc(8 << 20);
	ok = ok && huge && !omx_shared_size(huge) && fits && omx_shared_size(fits) == 8u << 20;
	/* and OMX_SHARED_HEAP_MIN=8192 (set by the parent): 8 KiB from the pool, 8191 B not */
	void *k8 = malloc(8192), *under = malloc(8191);
	ok = ok && omx_shared_size(k8) == 8192 && !omx_shared_size(under);
	free(k8);
	free(under);
	if (huge)
		fill(huge, 64 << 20, 3), ok = ok && same(huge, 64 << 20, 3);
	free(huge);
	free(fits);
	return ok ? 0 : 1;
}

static int run_tests(void)
{

	/* around the threshold (OMX_SHARED_HEAP_MIN unset: 65536) */
	void *small = malloc(100), *below = malloc(65535);
	uint8_t *big = malloc(65536);
	CHECK(small && below && big);
	CHECK(!omx_shared_size(small) && !omx_shared_size(below));
	CHECK(omx_shared_size(big) == 65536);
	CHECK(pool_files() == 1);
	CHECK(((uintptr_t)big & 4095) == 0);
	CHECK(malloc_usable_size(big) == 65536 && malloc_usable_size(small) >= 100);
	fill(big, 65536, 1);
	CHECK(same(big, 65536, 1));
	free(small);
	free(below);

	/* realloc: grows and moves with its contents, stays while it fits, shrinks to the C library */
	uint8_t *g = realloc(big, 3 << 20);
	CHECK(g && omx_shared_size(g) == 3u << 20 && same(g, 65536, 1));
	uint8_t *h = realloc(g, 2 << 20);
	CHECK(h == g);
	uint8_t *s = realloc(h, 1000);
	CHECK(s && !omx_shared_size(s) && same(s, 1000, 1));
	uint8_t *up = realloc(s, 1 << 20); /* a C library block stays one */
	CHECK(up && !omx_shared_size(up) && same(up, 1000, 1));
	free(up);
	uint8_t *n0 = realloc(NULL, 1 << 20);
	CHECK(n0 && omx_shared_size(n0));
	CHECK(realloc(n0, 0) == NULL);
	/* freed blocks are kept for the next malloc of about their size (no system call then) */
	uint8_t *again = malloc((1 << 20) - 100);
	CHECK(again == n0);
	free(again);
	volatile size_t huge_count = SIZE_MAX / 2; /* not folded: GCC warns at a constant overflow */
	errno = 0;
	CHECK(reallocarray(NULL, huge_count, 4) == NULL && errno == ENOMEM);

	/* calloc: zeroed, also from a kept block (this one) */
	uint8_t *c = malloc(1 << 20);
	memset(c, 0xa5, 1 << 20);
	free(c);
	uint8_t *z = calloc(1024, 1024);
	CHECK(z && omx_shared_size(z) && zero(z, 1 << 20));
	free(z);
	errno = 0;
	CHECK(calloc(huge_count, 16) == NULL && errno == ENOMEM);

	/* alignments: up to a page from the pool, beyond from the C library */
	void *a1 = NULL, *a2 = NULL;
	CHECK(posix_memalign(&a1, 4096, 1 << 20) == 0 && omx_shared_size(a1) && ((uintptr_t)a1 & 4095) == 0);
	CHECK(posix_memalign(&a2, 2 << 20, 1 << 20) == 0 && !omx_shared_size(a2) && ((uintptr_t)a2 & ((2 << 20) - 1)) == 0);
	void *bad = NULL;
	CHECK(posix_memalign(&bad, 24, 1 << 20) == EINVAL);
	void *a3 = aligned_alloc(64, 1 << 20), *a4 = memalign(256, 1 << 20);
	CHECK(a3 && omx_shared_size(a3) && a4 && omx_shared_size(a4));
	free(a1);
	free(a2);
	free(a3);
	free(a4);
	free(NULL);

	/* fork: the child's copy is private, complete, and its own to free */
	uint8_t *f = malloc(4 << 20);
	fill(f, 4 << 20, 9);
	int pfd[2];
	CHECK(pipe(pfd) == 0);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int ok = same(f, 4 << 20, 9) && omx_shared_size(f) == 4u << 20;
		memset(f, 0x11, 4 << 20);
		ok = ok && write(pfd[1], "w", 1) == 1;
		uint8_t *r = realloc(f, 8 << 20); /* moves into the child's own pool */
		ok = ok && r && r[0] == 0x11 && omx_shared_size(r) == 8u << 20;
		free(r);
		uint8_t *mine = malloc(1 << 20);
		ok = ok && mine && omx_shared_size(mine);
		free(mine);
		exit(ok ? 0 : 1); /* exit, not _exit: its pool file goes with it */
	}
	char w;
	CHECK(read(pfd[0], &w, 1) == 1);
	int st = -1;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(same(f, 4 << 20, 9)); /* the child's writes stayed its own */
	free(f);
	close(pfd[0]);
	close(pfd[1]);

	/* threads */
	pthread_t t[4];
	uintptr_t bad_total = 0;
	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1)) == 0);
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad_total += (uintptr_t)r;
	}
	CHECK(bad_total == 0);

	/* the pool refusing */
	pid = fork();
	if (pid == 0) {
		char *argv[] = { "heap_check", "--small-pool", NULL };
		setenv("OMX_SHARED_POOL_MB", "16", 1);
		setenv("OMX_SHARED_HEAP_MIN", "8192", 1);
		setenv("OMX_SHARED_HEAP_MAX", "8388608", 1);
		execv("/proc/self/exe", argv);
		_exit(3);
	}
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(pool_files() == 1); /* ours: the children's went with them */
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (!getenv("LD_PRELOAD") || !strstr(getenv("LD_PRELOAD"), "omx-shared-heap")) {
		fprintf(stderr, "heap_check: run with LD_PRELOAD=libomx-shared-heap.so\n");
		return 2;
	}
	if (argc > 1 && !strcmp(argv[1], "--small-pool"))
		return small_pool();
	snprintf(dir, sizeof(dir), "/tmp/omx-heap-XXXXXX");
	if (!mkdtemp(dir))
		return perror("mkdtemp"), 2;
	setenv("OMX_SHM_DIR", dir, 1);
	/* The checks in a child, so that this process sees its pool file go at its exit. */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		exit(run_tests());
	int st = -1;
	waitpid(pid, &st, 0);
	int left = pool_files();
	if (left)
		fprintf(stderr, "FAIL: %d pool file(s) left in %s\n", left, dir);
	rmdir(dir);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 && !left ? 0 : 1;
}
