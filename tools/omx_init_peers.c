/*
 * omx_init_peers.c - fill the peer table (behaviour.md 11.5).
 *
 *   omx_init_peers [-c|-a] [-d] [-v] [-f peers] [-h] [file | address hostname]
 *
 * There is no driver table: every process builds its table from the peers file named by
 * OMX_PEERS, so this tool edits that file (or the one given with -f) for the processes started
 * afterwards. Running processes keep their table (they still learn new peers by discovery).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "omx_tool.h"
#include "omx_peersfile.h"
#include "core/core.h"

#define PROG "omx_init_peers"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: omx_init_peers [options] [<file> | <address> <hostname>]\n"
		" -c\tclear the existing (non-local) peers first\n"
		" -a\tappend to the existing peers [default]\n"
		" -d\tmark the peer table configured (done)\n"
		" -f <peers>\tpeers file to update [$OMX_PEERS]\n"
		" -v\tverbose\n"
		" -h, --help\tshow this help\n"
		"<file>: one 'xx:xx:xx:xx:xx:xx hostname' per line, '#' comments.\n");
}

static int keep_local(const uint8_t *mac)
{
	for (uint32_t i = 0; i < OMX_BOARD_MAX; i++) {
		struct omx_board *b = omx__board(i);
		if (b && !memcmp(b->iface.mac, mac, 6))
			return 1;
	}
	return 0;
}

int main(int argc, char *argv[])
{
	static const struct option longopts[] = { { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	int c, clear = 0, done = 0, verbose = 0;
	const char *opt_file = NULL;
	char err[512];

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":cadf:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': clear = 1; break;
		case 'a': clear = 0; break;
		case 'd': done = 1; break;
		case 'f': opt_file = optarg; break;
		case 'v': verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: return tool_bad_option(c, optopt, argv[optind - 1], usage);
		}
	}
	int nargs = argc - optind;
	if (nargs > 2) {
		fprintf(stderr, "%s: too many arguments\n", PROG);
		usage(stderr);
		return TOOL_FAIL;
	}
	uint8_t mac[6];
	if (nargs == 2) {
		if (pf_parse_mac(argv[optind], mac) < 0) {
			fprintf(stderr, "%s: invalid address '%s' (expected xx:xx:xx:xx:xx:xx)\n", PROG, argv[optind]);
			return TOOL_FAIL;
		}
		if (!pf_valid_name(argv[optind + 1])) {
			fprintf(stderr, "%s: invalid hostname '%s' (1 to %d printable characters, no space)\n", PROG,
				argv[optind + 1], PF_NAME_MAX);
			return TOOL_FAIL;
		}
	}
	const char *target = pf_target(opt_file);
	if (!target) {
		fprintf(stderr, "%s: no peers file to update: set OMX_PEERS or use -f <file>\n", PROG);
		return TOOL_FAIL;
	}
	if (tool_init(PROG) < 0)
		return TOOL_FAIL;

	struct pf pf = { 0 };
	int rc = 0;
	if (pf_load(target, &pf, 1, err, sizeof(err)) < 0) {
		/* A broken file is replaced when clearing; otherwise say why and stop. */
		if (!clear) {
			fprintf(stderr, "%s: %s\n", PROG, err);
			rc = TOOL_FAIL;
			goto out;
		}
		pf_free(&pf);
	}
	if (clear) {
		printf("Clearing peers...\n");
		pf_filter(&pf, keep_local);
	}
	if (done)
		printf("Marking the peer table configured as done...\n");
	if (nargs == 2) {
		printf("Adding peer %s address %s\n", argv[optind + 1], argv[optind]);
		if (pf_set(&pf, mac, argv[optind + 1]) < 0) {
			fprintf(stderr, "%s: out of memory\n", PROG);
			rc = TOOL_FAIL;
			goto out;
		}
	} else if (nargs == 1) {
		struct pf src = { 0 };
		printf("Adding peers from file %s...\n", argv[optind]);
		if (pf_load(argv[optind], &src, 0, err, sizeof(err)) < 0) {
			fprintf(stderr, "%s: %s\n", PROG, err);
			pf_free(&src);
			rc = TOOL_FAIL;
			goto out;
		}
		for (size_t i = 0; i < src.n; i++) {
			if (!src.lines[i].is_peer)
				continue;
			if (verbose)
				printf("Adding peer %s address %02x:%02x:%02x:%02x:%02x:%02x\n", src.lines[i].text,
				       src.lines[i].mac[0], src.lines[i].mac[1], src.lines[i].mac[2], src.lines[i].mac[3],
				       src.lines[i].mac[4], src.lines[i].mac[5]);
			pf_set(&pf, src.lines[i].mac, src.lines[i].text);
		}
		pf_free(&src);
	} else {
		printf("Not adding any peer\n");
	}
	fflush(stdout);
	if ((clear || nargs) && pf_save(target, &pf, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", PROG, err);
		rc = TOOL_FAIL;
	} else if (verbose && (clear || nargs)) {
		printf("Wrote %zu lines to %s\n", pf.n, target);
	}
out:
	pf_free(&pf);
	omx_finalize();
	return rc;
}
