/*
 * omx_prepare_binding.c - write the process binding file from the NICs' interrupt layout
 * (behaviour.md 10 and 11.7).
 *
 *   omx_prepare_binding [-v] [-h] [file]
 *
 * For each attached board: the receive IRQs of its interface in /proc/interrupts (last word
 * contains the interface name, no "tx" in it), their queue ("slice") number (first decimal
 * number after the interface name; none = 0), and each endpoint's IRQ (slice e mod N when slices
 * 0..N-1 are all present, else slice e). Output lines: "board <mac> ep <e> irq <irq> mask <mask>"
 * with the IRQ's /proc/irq/<irq>/smp_affinity. OMX_PROC_DIR replaces /proc (tests).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "omx_tool.h"
#include "core/core.h"

#define PROG "omx_prepare_binding"
#define SLICE_MAX 128
#define DEFAULT_FILE "/tmp/open-mx.bindings.dat"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: omx_prepare_binding [options] [file]\n"
		" -v\tverbose\n"
		" -h, --help\tshow this help\n"
		"Writes the binding file [" DEFAULT_FILE "] for OMX_PROCESS_BINDING=file:<file>.\n"
		"Reading /proc/irq/<n>/smp_affinity may need root.\n");
}

static int contains_tx(const char *s)
{
	for (; *s; s++)
		if (!strncasecmp(s, "tx", 2))
			return 1;
	return 0;
}

/* Fill irq_of_slice[] for interface ifname; returns the number of IRQs found, -1 on error. */
static int scan_irqs(const char *proc, const char *ifname, int irq_of_slice[SLICE_MAX], int verbose)
{
	char path[512], line[4096];
	snprintf(path, sizeof(path), "%s/interrupts", proc);
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "%s: cannot read %s: %s\n", PROG, path, strerror(errno));
		return -1;
	}
	int found = 0;
	for (int i = 0; i < SLICE_MAX; i++)
		irq_of_slice[i] = -1;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *s = line;
		while (isspace((unsigned char)*s))
			s++;
		if (!isdigit((unsigned char)*s))
			continue; /* header, NMI:, LOC:... */
		int irq = atoi(s);
		size_t n = strlen(line);
		while (n && isspace((unsigned char)line[n - 1]))
			line[--n] = 0;
		char *last = strrchr(line, ' ');
		char *tab = strrchr(line, '\t');
		if (tab > last)
			last = tab;
		last = last ? last + 1 : line;
		char *at = strstr(last, ifname);
		if (!at || contains_tx(last))
			continue;
		const char *p = at + strlen(ifname);
		while (*p && !isdigit((unsigned char)*p))
			p++;
		int slice = *p ? atoi(p) : 0;
		if (slice < 0 || slice >= SLICE_MAX)
			continue;
		if (verbose)
			printf("Found %s slice %d irq %d (%s)\n", ifname, slice, irq, last);
		if (irq_of_slice[slice] < 0)
			found++;
		irq_of_slice[slice] = irq;
	}
	fclose(f);
	return found;
}

int main(int argc, char *argv[])
{
	static const struct option longopts[] = { { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	int c, verbose = 0, rc = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'v': verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: return tool_bad_option(c, optopt, argv[optind - 1], usage);
		}
	}
	if (argc - optind > 1) {
		fprintf(stderr, "%s: too many arguments\n", PROG);
		usage(stderr);
		return TOOL_FAIL;
	}
	const char *file = optind < argc ? argv[optind] : DEFAULT_FILE;
	const char *proc = getenv("OMX_PROC_DIR");
	if (!proc || !*proc)
		proc = "/proc";
	if (tool_init(PROG) < 0)
		return TOOL_FAIL;
	pthread_mutex_lock(&omx__g.lock);
	omx__config_load_open();
	pthread_mutex_unlock(&omx__g.lock);

	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!out) {
		fprintf(stderr, "%s: cannot write %s: %s\n", PROG, file, strerror(errno));
		if (fd >= 0)
			close(fd);
		omx_finalize();
		return TOOL_FAIL;
	}
	fchmod(fd, 0644);
	for (uint32_t b = 0; b < OMX_BOARD_MAX && !rc; b++) {
		struct omx_board *bd = omx__board(b);
		if (!bd)
			continue;
		int irq_of_slice[SLICE_MAX];
		int n = scan_irqs(proc, bd->iface.name, irq_of_slice, verbose);
		if (n < 0) {
			rc = TOOL_FAIL;
			break;
		}
		int contiguous = n > 0;
		for (int i = 0; i < n; i++)
			if (irq_of_slice[i] < 0)
				contiguous = 0;
		char mac[OMX_BOARD_ADDR_STRLEN];
		tool_mac_text(bd->iface.mac, mac);
		if (verbose && n == 0)
			printf("No interrupt found for %s (board #%" PRIu32 ")\n", bd->iface.name, b);
		for (uint32_t e = 0; e < omx__cfg.endpoint_max && n > 0; e++) {
			int slice = contiguous ? (int)(e % (uint32_t)n) : (int)e;
			if (slice >= SLICE_MAX || irq_of_slice[slice] < 0)
				continue;
			int irq = irq_of_slice[slice];
			char path[512], mask[256] = "";
			snprintf(path, sizeof(path), "%s/irq/%d/smp_affinity", proc, irq);
			FILE *a = fopen(path, "r");
			if (!a || !fgets(mask, sizeof(mask), a)) {
				fprintf(stderr, "%s: cannot read %s: %s\n", PROG, path, strerror(a ? EIO : errno));
				if (a)
					fclose(a);
				rc = TOOL_FAIL;
				break;
			}
			fclose(a);
			mask[strcspn(mask, "\n")] = 0;
			fprintf(out, "board %s ep %" PRIu32 " irq %d mask %s\n", mac, e, irq, mask);
		}
	}
	if (fclose(out) != 0 && !rc) {
		fprintf(stderr, "%s: cannot write %s: %s\n", PROG, file, strerror(errno));
		rc = TOOL_FAIL;
	}
	if (!rc)
		printf("Generated bindings in %s\n", file);
	fflush(stdout);
	omx_finalize();
	return rc;
}
