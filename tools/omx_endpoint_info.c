/*
 * omx_endpoint_info.c - which process holds which endpoint slot (behaviour.md 11.2).
 *
 *   omx_endpoint_info [-b n] [-a] [-v] [-h]
 *
 * There is no driver: a slot is open while a process holds the flock of its lock file
 * (<OMX_LOCK_DIR>/omx-<mac>-<index>.lock, "-raw.lock" for the raw endpoint); the holder comes
 * from /proc/locks and the command from the lock file (written by the opener) or /proc/<pid>/comm.
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

#define PROG "omx_endpoint_info"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: omx_endpoint_info [options]\n"
		" -b <n>\tchange board id [all boards]\n"
		" -a\tshow all boards [default]\n"
		" -v\tverbose: also list the endpoints that are not open\n"
		" -h, --help\tshow this help\n"
		"Slots are the lock files in OMX_LOCK_DIR (default /dev/shm).\n");
}

/* Owner of a slot: pid (0 if not open) and command. */
static int slot_owner(const char *path, char *comm, size_t len)
{
	int pid = omx__flock_holder(path);
	if (pid <= 0)
		return 0;
	snprintf(comm, len, "?");
	FILE *f = fopen(path, "r");
	int fpid = 0;
	char c[64] = "";
	if (f) {
		if (fscanf(f, "%d %63s", &fpid, c) == 2 && fpid == pid)
			snprintf(comm, len, "%s", c);
		fclose(f);
	}
	if (fpid != pid) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/comm", pid);
		f = fopen(p, "r");
		if (f) {
			if (fgets(c, sizeof(c), f)) {
				c[strcspn(c, "\n")] = 0;
				snprintf(comm, len, "%s", c);
			}
			fclose(f);
		}
	}
	return pid;
}

static void show_board(uint32_t i, int verbose, uint32_t endpoint_max)
{
	struct omx_board *b = omx__board(i);
	char mac[OMX_BOARD_ADDR_STRLEN], path[512], comm[64];
	const uint8_t *m = b->iface.mac;
	const char *dir = omx__lock_dir();
	uint32_t count = 0;

	printf("%s (board #%" PRIu32 " name %s addr %s)\n", b->hostname, i, b->iface.name, tool_mac_text(m, mac));
	printf("==============================================\n");
	snprintf(path, sizeof(path), "%s/omx-%02x%02x%02x%02x%02x%02x-raw.lock", dir, m[0], m[1], m[2], m[3], m[4], m[5]);
	int pid = slot_owner(path, comm, sizeof(comm));
	if (pid)
		printf("  raw\topen by pid %d (%s)\n", pid, comm);
	else if (verbose)
		printf("  raw\tnot open\n");
	for (uint32_t e = 0; e < endpoint_max; e++) {
		snprintf(path, sizeof(path), "%s/omx-%02x%02x%02x%02x%02x%02x-%" PRIu32 ".lock", dir, m[0], m[1], m[2],
			 m[3], m[4], m[5], e);
		pid = slot_owner(path, comm, sizeof(comm));
		if (pid) {
			printf("  %" PRIu32 "\topen by pid %d (%s)\n", e, pid, comm);
			count++;
		} else if (verbose) {
			printf("  %" PRIu32 "\tnot open\n", e);
		}
	}
	printf("%" PRIu32 " regular endpoints open (out of %" PRIu32 ")\n\n", count, endpoint_max);
}

int main(int argc, char *argv[])
{
	static const struct option longopts[] = { { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	int c, only = -1, verbose = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":b:avh", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if ((only = tool_board_arg(PROG, optarg)) < 0)
				return TOOL_FAIL;
			break;
		case 'a': only = -1; break;
		case 'v': verbose = 1; break;
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
	pthread_mutex_lock(&omx__g.lock);
	omx__config_load_open();
	pthread_mutex_unlock(&omx__g.lock);
	for (uint32_t i = 0; i < OMX_BOARD_MAX; i++)
		if (omx__board(i) && (only < 0 || (uint32_t)only == i))
			show_board(i, verbose, omx__cfg.endpoint_max);
	fflush(stdout);
	omx_finalize();
	return 0;
}
