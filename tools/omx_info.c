/*
 * omx_info.c - show the boards, the peer table and the library configuration
 * (behaviour.md 11.1).
 *
 *   omx_info [-b n] [-q] [-v] [-h]
 *
 * There is no driver: the "driver state" is what the library builds in this process from
 * OMX_IFACES, OMX_PEERS and OMX_HOSTNAME, which is what every other process of the host with the
 * same environment builds too.
 */
#include <getopt.h>
#include <inttypes.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "open-mx.h"
#include "omx_tool.h"
#include "core/core.h" /* peer table, interface details and configuration (no public API) */

#ifndef OMX_VERSION
#define OMX_VERSION "unknown"
#endif
#ifndef OMX_BUILD_INFO
#define OMX_BUILD_INFO "unknown"
#endif

/* Receive coalescing at or above this many microseconds deserves a warning (11.1). */
#define HIGH_INTRCOAL_US 13

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: omx_info [options]\n"
		" -b <n>\tonly show board <n> [all]\n"
		" -q\tterse output (boards only)\n"
		" -v\tverbose output: version, board details, peer table, configuration [default]\n"
		" -h, --help\tshow this help\n"
		"Boards come from OMX_IFACES, peers from the OMX_PEERS file, names from OMX_HOSTNAME.\n");
}

static const char *mac_text(uint64_t nic, char buf[OMX_BOARD_ADDR_STRLEN])
{
	snprintf(buf, OMX_BOARD_ADDR_STRLEN, "%02x:%02x:%02x:%02x:%02x:%02x", (unsigned)(nic >> 40) & 0xff,
		 (unsigned)(nic >> 32) & 0xff, (unsigned)(nic >> 24) & 0xff, (unsigned)(nic >> 16) & 0xff,
		 (unsigned)(nic >> 8) & 0xff, (unsigned)nic & 0xff);
	return buf;
}

/* rx-usecs of the interface through the ethtool ioctl; -1 if unknown. */
static int rx_coalesce_us(const char *ifname)
{
	struct ethtool_coalesce ec;
	struct ifreq ifr;
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0), r;
	if (fd < 0)
		return -1;
	memset(&ec, 0, sizeof(ec));
	memset(&ifr, 0, sizeof(ifr));
	ec.cmd = ETHTOOL_GCOALESCE;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&ec;
	r = ioctl(fd, SIOCETHTOOL, &ifr);
	close(fd);
	return r < 0 ? -1 : (int)ec.rx_coalesce_usecs;
}

static uint32_t effective_mtu(const struct omx_board *b)
{
	uint32_t mtu = b->frame_mtu;
	if (omx__cfg.mtu_override && omx__cfg.mtu_override < mtu)
		mtu = omx__cfg.mtu_override;
	return mtu;
}

static int show_board(uint32_t i, int verb)
{
	uint8_t idx = (uint8_t)i;
	char hostname[OMX_HOSTNAME_MAX] = "", ifname[OMX_HOSTNAME_MAX] = "", mac[OMX_BOARD_ADDR_STRLEN];
	uint64_t nic;
	uint32_t numa = 0xFFFFFFFFu;

	if (omx_board_number_to_nic_id(i, &nic) != OMX_SUCCESS)
		return -1;
	omx_get_info(NULL, OMX_INFO_BOARD_HOSTNAME, &idx, 1, hostname, sizeof(hostname));
	omx_get_info(NULL, OMX_INFO_BOARD_IFACENAME, &idx, 1, ifname, sizeof(ifname));
	omx_get_info(NULL, OMX_INFO_BOARD_NUMA_NODE, &idx, 1, &numa, sizeof(numa));
	printf(" %s (board #%" PRIu32 " name %s addr %s)\n", hostname, i, ifname, mac_text(nic, mac));

	const struct omx_board *b = omx__board(i);
	if (!b)
		return 0;
	if (verb && b->iface.driver[0])
		printf("   managed by driver '%s'\n", b->iface.driver);
	if (verb && numa != 0xFFFFFFFFu)
		printf("   attached to numa node %" PRIu32 "\n", numa);
	struct omx_wire_params wp;
	int mtu_ok = omx_wire_params_init(&wp, omx__cfg.wire_mode, effective_mtu(b)) == 0;
	if (verb && mtu_ok) {
		uint32_t thr = omx__rndv_threshold(&wp);
		printf("   %s wire mode, frames up to %" PRIu32 " bytes, medium messages up to %" PRIu32
		       " bytes, rendezvous above %" PRIu32 " bytes\n",
		       wp.mode == OMX_WIRE_COMPAT ? "MX-compatible" : "extended", wp.mtu, wp.medium_max, thr);
	}
	fflush(stdout);
	if (!b->iface.up)
		fprintf(stderr, "   WARNING: interface is currently DOWN.\n");
	if (!mtu_ok)
		fprintf(stderr, "   WARNING: MTU=%" PRIu32 " invalid\n", b->iface.mtu);
	if (verb) {
		int us = rx_coalesce_us(b->iface.name);
		if (us >= HIGH_INTRCOAL_US)
			fprintf(stderr, "   WARNING: high interrupt-coalescing\n");
	}
	return 0;
}

static void show_peers(void)
{
	char mac[OMX_BOARD_ADDR_STRLEN];

	pthread_mutex_lock(&omx__g.lock);
	int dyn = omx__discovery_enabled();
	if (omx__g.peers_configured)
		/* static table: mapper all-ones; discovery (as omxoed): mapper 0 */
		printf("Peer table is ready, mapper is %s\n", dyn ? "00:00:00:00:00:00" : "ff:ff:ff:ff:ff:ff");
	else
		printf("Peer table is not configured yet\n");
	printf("================================================\n");
	for (uint32_t i = 0; i < omx__g.peer_count; i++) {
		const struct omx_peer *p = &omx__g.peers[i];
		if (!p->present)
			continue;
		printf("  %" PRIu32 ") %s %s\n", i, mac_text(p->nic_id, mac), p->hostname[0] ? p->hostname : "<unknown>");
	}
	int full = omx__g.peer_count >= omx__cfg.peer_max;
	uint32_t unnamed = 0;
	for (uint32_t i = 0; i < omx__g.peer_count; i++)
		if (omx__g.peers[i].present && !omx__g.peers[i].hostname[0])
			unnamed++;
	pthread_mutex_unlock(&omx__g.lock);
	if (!dyn)
		printf("Dynamic discovery is off: peers come from the peers file\n");
	else if (!unnamed)
		printf("Dynamic discovery is on: peer table complete (every peer named)\n");
	else
		printf("Dynamic discovery is on: peer table incomplete (%" PRIu32 " peers without a name yet)\n", unnamed);
	fflush(stdout);
	if (full)
		fprintf(stderr, "WARNING: peer table is full, some peers could not be added.\n");
}

static void show_config(void)
{
	const struct omx_config *c = &omx__cfg;
	printf("\nLibrary configuration (environment):\n");
	printf("  OMX_WIRE_MODE = %s\n", c->wire_mode == OMX_WIRE_COMPAT ? "compat" : "extended");
	printf("  OMX_MTU = %" PRIu32 "%s\n", c->mtu_override, c->mtu_override ? "" : " (interface MTU)");
	if (c->rndv_auto)
		printf("  OMX_RNDV_THRESHOLD = %" PRIu32 " (auto: %u over fragments of 32 KiB or more, %u of 48 KiB or more)\n",
		       c->rndv_threshold, OMX_RNDV_THRESHOLD_JUMBO, OMX_RNDV_THRESHOLD_JUMBO64);
	else
		printf("  OMX_RNDV_THRESHOLD = %" PRIu32 "\n", c->rndv_threshold);
	printf("  OMX_SHARED_RNDV_THRESHOLD = %" PRIu32 "%s\n", c->shared_rndv_threshold, c->shared_rndv_auto ? " (auto)" : "");
	if (c->shared_single_copy_min_auto) {
		char text[96];
		omx__shared_single_copy_text(text, sizeof(text));
		printf("  OMX_SHARED_SINGLE_COPY_MIN = auto: %s\n", text);
	} else {
		printf("  OMX_SHARED_SINGLE_COPY_MIN = %" PRIu32 "\n", c->shared_single_copy_min);
	}
	printf("  OMX_RESENDS_MAX = %" PRIu32 "\n", c->resends_max);
	printf("  OMX_RESEND_DELAY_MS = %" PRIu64 "\n", c->resend_delay_ns / 1000000u);
	printf("  OMX_ACK_DELAY_MS = %" PRIu64 "\n", c->ack_delay_ns / 1000000u);
	printf("  OMX_PULL_RESEND_MS = %" PRIu64 "\n", c->pull_resend_ns / 1000000u);
	printf("  OMX_NOTACKED_MAX = %" PRIu32 "\n", c->notacked_max);
	printf("  OMX_ZOMBIE_SEND = %" PRIu32 "\n", c->zombie_max);
	printf("  OMX_SPIN_US = %" PRIu32 "\n", c->spin_us);
	if (c->rx_ring_kb)
		printf("  OMX_RX_RING_KB = %" PRIu32 "\n", c->rx_ring_kb);
	else
		printf("  OMX_RX_RING_KB = auto (%u slots of the MTU, at most %llu KiB)\n", OMX_RX_RING_AUTO_SLOTS,
		       OMX_RX_RING_AUTO_MAX >> 10);
	if (c->rx_split_auto)
		printf("  OMX_RX_SPLIT = auto (pull replies read split while traffic goes both ways, on interfaces of "
		       "MTU %u or more)\n", OMX_RX_SPLIT_AUTO_MTU);
	else if (c->rx_pull_split)
		printf("  OMX_RX_SPLIT = pull\n");
	else
		printf("  OMX_RX_SPLIT = %" PRIu32 "%s\n", c->rx_split, c->rx_split ? "" : " (off)");
	if (c->rx_medium_split_auto)
		printf("  OMX_RX_SPLIT_MEDIUM = auto (%u with OMX_RX_SPLIT=auto over medium fragments of %u bytes or more, "
		       "else none)\n", OMX_RX_SPLIT_MEDIUM_AUTO, OMX_WIRE_FRAG_WHOLE_MIN);
	else
		printf("  OMX_RX_SPLIT_MEDIUM = %" PRIu32 "%s\n", c->rx_medium_split, c->rx_medium_split ? "" : " (none)");
	if (c->shared_ring_kb)
		printf("  OMX_SHARED_RING_KB = %" PRIu32 "\n", c->shared_ring_kb);
	else
		printf("  OMX_SHARED_RING_KB = auto (%u slots of the MTU, 64 at least, at most %llu KiB above that)\n",
		       OMX_SHARED_RING_AUTO_SLOTS, OMX_SHARED_RING_AUTO_MAX >> 10);
	printf("  OMX_PROGRESS_IDLE_US = %llu, OMX_PROGRESS_CHECK_MAX_US = %llu\n",
	       (unsigned long long)(c->progress_idle_ns / 1000u), (unsigned long long)(c->progress_check_max_ns / 1000u));
	printf("  OMX_PROGRESS_BATCH = %d\n", c->progress_batch);
	printf("  OMX_ENDPOINT_MAX = %" PRIu32 "\n", c->endpoint_max);
	printf("  OMX_PEER_MAX = %" PRIu32 "\n", c->peer_max);
	printf("  OMX_CTXIDS = %u,%u\n", (unsigned)c->ctxid_bits, (unsigned)c->ctxid_shift);
	printf("  OMX_DISABLE_SELF = %d\n", c->disable_self);
	printf("  OMX_FAULT = %s\n", c->fault_enabled ? "on" : "off");

	int state;
	const char *path = omx__config_file(&state);
	printf("\nEvery knob (value, source: default, file or env; configuration file %s %s):\n", path,
	       state == 2 ? "loaded" : state == 3 ? "unreadable" : "absent");
	size_t n;
	const struct omx_knob *k = omx__config_knobs(&n);
	for (size_t i = 0; i < n; i++) {
		const char *v = getenv(k[i].name);
		printf("  %s=%s (%s)\n", k[i].name, v ? v : k[i].def, omx__config_source(k[i].name));
	}
}

int main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, verb = 1, only = -1;
	uint32_t board_max = 0, endpoint_max = 0, count = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":b:qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'b': {
			char *end;
			long v = strtol(optarg, &end, 0);
			if (!*optarg || *end || v < 0 || v > 255) {
				fprintf(stderr, "omx_info: invalid board number '%s'\n", optarg);
				return 255;
			}
			only = (int)v;
			break;
		}
		case 'q': verb = 0; break;
		case 'v': verb = 1; break;
		case 'h':
			usage(stdout);
			return 0;
		case ':':
			fprintf(stderr, "Option -%c requires an argument\n", optopt);
			usage(stderr);
			return 255;
		default:
			if (optopt)
				fprintf(stderr, "Unknown option -%c\n", optopt);
			else
				fprintf(stderr, "Unknown option %s\n", argv[optind - 1]);
			usage(stderr);
			return 255;
		}
	}
	if (tool_no_arguments(argc, argv, usage))
		return TOOL_FAIL;

	if (tool_init("omx_info") < 0)
		return TOOL_FAIL;
	/* The open-time configuration (wire mode, thresholds, endpoint maximum) is normally read at
	 * the first endpoint open; read it now to show the effective values. */
	pthread_mutex_lock(&omx__g.lock);
	omx__config_load_open();
	pthread_mutex_unlock(&omx__g.lock);

	omx_get_info(NULL, OMX_INFO_BOARD_MAX, NULL, 0, &board_max, sizeof(board_max));
	omx_get_info(NULL, OMX_INFO_ENDPOINT_MAX, NULL, 0, &endpoint_max, sizeof(endpoint_max));
	omx_get_info(NULL, OMX_INFO_BOARD_COUNT, NULL, 0, &count, sizeof(count));

	if (only >= 0 && !omx__board((uint32_t)only))
		return tool_board_not_found("omx_info: ", only);

	if (verb)
		printf("Open-MX version %s\n build: %s\n\n", OMX_VERSION, OMX_BUILD_INFO);
	printf("Found %" PRIu32 " boards (%" PRIu32 " max) supporting %" PRIu32 " endpoints each:\n", count, board_max,
	       endpoint_max);
	for (uint32_t i = 0; i < board_max; i++) {
		if (only >= 0 && i != (uint32_t)only)
			continue;
		show_board(i, verb);
	}
	if (verb) {
		char shared[1280];
		printf("\n");
		show_peers();
		/* Which same-host mode is in force (single copy, or the two-copy fallback and why). */
		if (omx__shared_mode_string(shared, sizeof(shared)) >= 0)
			printf("\n%s\n", shared);
		show_config();
	}
	fflush(stdout);
	omx_finalize();
	return 0;
}
