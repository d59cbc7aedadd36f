/*
 * omx_hostname.c - show or change a board's hostname (behaviour.md 11.4).
 *
 *   omx_hostname [-b n] [-n name] [-c] [-f peers] [-v] [-h]
 *
 * There is no driver: a board's name is "<OMX_HOSTNAME or nodename>:<board index>" unless the
 * peers file (OMX_PEERS, or -f) names its MAC. -n writes the name for the board's MAC into that
 * file (processes started afterwards use it). -c has nothing to clear: peer names live in each
 * process and nameless peers are queried again by every process that starts.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "omx_tool.h"
#include "omx_peersfile.h"
#include "core/core.h"

#define PROG "omx_hostname"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: omx_hostname [options]\n"
		" -b <n>\tchange board id [0]\n"
		" -n <name>\tchange the board hostname (written to the peers file)\n"
		" -c\tclear peer names (they are queried again)\n"
		" -f <peers>\tpeers file to update with -n [$OMX_PEERS]\n"
		" -v\tverbose\n"
		" -h, --help\tshow this help\n");
}

int main(int argc, char *argv[])
{
	static const struct option longopts[] = { { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	int c, board = 0, clear = 0, verbose = 0, rc = 0;
	const char *name = NULL, *opt_file = NULL;
	char err[512], mac[OMX_BOARD_ADDR_STRLEN];

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":b:n:cf:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if ((board = tool_board_arg(PROG, optarg)) < 0)
				return TOOL_FAIL;
			break;
		case 'n': name = optarg; break;
		case 'c': clear = 1; break;
		case 'f': opt_file = optarg; break;
		case 'v': verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: return tool_bad_option(c, optopt, argv[optind - 1], usage);
		}
	}
	if (tool_no_arguments(argc, argv, usage))
		return TOOL_FAIL;
	if (name && !pf_valid_name(name)) {
		fprintf(stderr, "Failed to change hostname, invalid name '%s' (1 to %d printable characters, no space)\n",
			name, PF_NAME_MAX);
		return TOOL_FAIL;
	}
	/* The library reads the peers file (renames included) unless we are about to rewrite it. */
	const char *target = NULL;
	if (name)
		target = pf_target(opt_file);
	else if (opt_file)
		setenv("OMX_PEERS", opt_file, 1);
	if (tool_init(PROG) < 0)
		return TOOL_FAIL;
	struct omx_board *b = omx__board((uint32_t)board);
	if (!b)
		return tool_board_not_found("", board);
	tool_mac_text(b->iface.mac, mac);
	if ((!name && !clear) || verbose)
		printf("Board #%d (%s %s) hostname was %s\n", board, b->iface.name, mac, b->hostname);
	if (name) {
		if (verbose)
			printf("Changing board #%d (%s %s) hostname into %s\n", board, b->iface.name, mac, name);
		struct pf pf = { 0 };
		if (!target) {
			fprintf(stderr, "Failed to change hostname, no peers file: set OMX_PEERS or use -f <file>\n");
			rc = TOOL_FAIL;
		} else if (pf_load(target, &pf, 1, err, sizeof(err)) < 0 || pf_set(&pf, b->iface.mac, name) < 0 ||
			   pf_save(target, &pf, err, sizeof(err)) < 0) {
			fprintf(stderr, "Failed to change hostname, %s\n", err);
			rc = TOOL_FAIL;
		}
		pf_free(&pf);
	}
	if (clear && verbose)
		printf("Clearing peer names\n");
	fflush(stdout);
	omx_finalize();
	return rc;
}
