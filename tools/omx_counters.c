/*
 * omx_counters.c - show (and clear) the counters of the host (behaviour.md 11.3).
 *
 *   omx_counters [-b n] [-a] [-s] [-c] [-q] [-v] [-e] [-h]
 *
 * There is no driver: every endpoint has a counter file in OMX_LOCK_DIR (src/core/counters.h).
 * A board's counters are the sum over every counter file of its MAC (endpoints open now, closed
 * ones and those of dead processes, until their slot is opened again), which is what the driver's
 * per-board counters were. The shared pseudo-board shows the same-host counters (72..84 and our
 * shared/single-copy byte counts) summed over every board; board sections leave them out.
 * -e adds, after each board, one section per endpoint file (with its owner and state).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "omx_tool.h"
#include "core/core.h"
#include "core/counters.h"
#include "core/testhooks.h"

#define PROG "omx_counters"
#define MAX_FILES OMX_ENDPOINT_MAX_HARD

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: omx_counters [options]\n"
		" -b <n>\tchange board id [all boards, after the shared pseudo-board]\n"
		" -a\tshow all boards, including the shared pseudo-board [default]\n"
		" -s\tshow the shared communication pseudo-board only\n"
		" -c\tclear counters after reading them\n"
		" -q\tonly show non-zero counters [default]\n"
		" -v\tshow all counters, including zeros\n"
		" -e\talso show each endpoint's counter file (owner pid, command, state)\n"
		" -h, --help\tshow this help\n"
		"Counters are read from the files in OMX_LOCK_DIR (default /dev/shm).\n");
}

static int is_shared_slot(int i)
{
	return (i >= 72 && i <= 84) || i == OMX_C_X_SHARED_BYTES || i == OMX_C_X_SINGLE_COPY_BYTES ||
	       i == OMX_C_X_POOL_COPY_BYTES;
}

static void print_values(const uint64_t *v, int shared, int verbose)
{
	for (int i = 0; i < OMX_COUNTER_SLOTS; i++) {
		if (is_shared_slot(i) != shared || (!verbose && !v[i]))
			continue;
		printf("%03d: % 9ld %s\n", i, (long)v[i], omx__counter_label(i));
	}
}

static void sum_files(const struct omx_counters_view *fv, int n, uint64_t *sum)
{
	for (int k = 0; k < n; k++)
		for (uint32_t i = 0; i < fv[k].f->slots && i < OMX_COUNTER_SLOTS; i++)
			sum[i] += __atomic_load_n(&fv[k].f->values[i], __ATOMIC_RELAXED);
}

/* Clear every file of the set; 0, or -1 after printing why (once). */
static int clear_files(struct omx_counters_view *fv, int n)
{
	int denied = 0;
	for (int k = 0; k < n; k++) {
		if (!fv[k].writable) {
			denied = 1;
			continue;
		}
		for (int i = 0; i < OMX_COUNTER_SLOTS; i++)
			__atomic_store_n(&fv[k].f->values[i], 0, __ATOMIC_RELAXED);
	}
	if (denied) {
		fprintf(stderr, "Clearing counters: %s\n", strerror(EACCES));
		return -1;
	}
	return 0;
}

static const char *state_text(const struct omx_counters_view *v)
{
	if (v->stale)
		return "stale (process exited)";
	return __atomic_load_n(&v->f->state, __ATOMIC_RELAXED) == OMX_COUNTERS_OPEN ? "open" : "closed";
}

static struct omx_counters_view views[MAX_FILES];

int main(int argc, char *argv[])
{
	static const struct option longopts[] = { { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	int c, only = -1, shared_only = 0, clear = 0, verbose = 0, per_ep = 0, rc = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":b:ascqveh", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if ((only = tool_board_arg(PROG, optarg)) < 0)
				return TOOL_FAIL;
			shared_only = 0;
			break;
		case 'a': only = -1; shared_only = 0; break;
		case 's': shared_only = 1; only = -1; break;
		case 'c': clear = 1; break;
		case 'q': verbose = 0; break;
		case 'v': verbose = 1; break;
		case 'e': per_ep = 1; break;
		case 'h': usage(stdout); return 0;
		default: return tool_bad_option(c, optopt, argv[optind - 1], usage);
		}
	}
	if (tool_no_arguments(argc, argv, usage))
		return TOOL_FAIL;
	if (tool_init(PROG) < 0)
		return TOOL_FAIL;
	if (only >= 0 && !omx__board((uint32_t)only))
		return tool_board_not_found("", only);
	const char *dir = omx__lock_dir();

	if (only < 0) {
		/* Shared pseudo-board: same-host counters of every board. */
		uint64_t sum[OMX_COUNTER_SLOTS] = { 0 };
		for (uint32_t b = 0; b < OMX_BOARD_MAX; b++) {
			struct omx_board *bd = omx__board(b);
			if (!bd)
				continue;
			int n = omx__counters_scan(dir, bd->iface.mac, clear, views, MAX_FILES);
			if (n < 0)
				continue;
			sum_files(views, n, sum);
			omx__counters_unmap(views, n);
		}
		printf("Shared Communication (addr 00:00:00:00:00:00)\n");
		printf("=======================================================\n");
		print_values(sum, 1, verbose);
		printf("\n");
	}
	for (uint32_t b = 0; b < OMX_BOARD_MAX && !shared_only; b++) {
		struct omx_board *bd = omx__board(b);
		if (!bd || (only >= 0 && (uint32_t)only != b))
			continue;
		char mac[OMX_BOARD_ADDR_STRLEN];
		int n = omx__counters_scan(dir, bd->iface.mac, clear, views, MAX_FILES);
		if (n < 0 && n != -ENOENT) {
			fprintf(stderr, "%s: cannot read counters in %s: %s\n", PROG, dir, strerror(-n));
			rc = TOOL_FAIL;
			continue;
		}
		if (n < 0)
			n = 0;
		uint64_t sum[OMX_COUNTER_SLOTS] = { 0 };
		sum_files(views, n, sum);
		printf("%s (board #%" PRIu32 " name %s addr %s)\n", bd->hostname, b, bd->iface.name,
		       tool_mac_text(bd->iface.mac, mac));
		printf("=======================================================\n");
		print_values(sum, 0, verbose);
		printf("\n");
		for (int k = 0; per_ep && k < n; k++) {
			const struct omx_counters_view *v = &views[k];
			printf("  endpoint %" PRIu32 " opened by pid %d (%.32s), %s\n", v->endpoint_index, (int)v->f->pid,
			       v->f->comm, state_text(v));
			uint64_t one[OMX_COUNTER_SLOTS] = { 0 };
			sum_files(v, 1, one);
			for (int i = 0; i < OMX_COUNTER_SLOTS; i++)
				if (verbose || one[i])
					printf("  %03d: % 9ld %s\n", i, (long)one[i], omx__counter_label(i));
			printf("\n");
		}
		fflush(stdout);
		if (clear && clear_files(views, n) < 0)
			rc = TOOL_FAIL;
		omx__counters_unmap(views, n);
	}
	if (clear && shared_only) {
		for (uint32_t b = 0; b < OMX_BOARD_MAX; b++) {
			struct omx_board *bd = omx__board(b);
			if (!bd)
				continue;
			int n = omx__counters_scan(dir, bd->iface.mac, 1, views, MAX_FILES);
			if (n > 0) {
				if (clear_files(views, n) < 0)
					rc = TOOL_FAIL;
				omx__counters_unmap(views, n);
			}
		}
	}
	fflush(stdout);
	omx_finalize();
	return rc;
}
