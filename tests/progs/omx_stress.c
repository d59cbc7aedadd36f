/*
 * omx_stress.c - integration traffic generator/checker over the native API.
 *
 * Both sides run the same program: connect to the peer, then send `-n` messages and receive
 * `-n` messages at the same time, with up to `-w` of each in flight. Sizes are log-uniform in
 * [0, -m] (so every size class appears), match values random. Each payload starts with a header
 * (sequence, length, match, checksum of the rest); the receiver checks every field, the checksum,
 * and that messages from the peer arrive in send order (MX ordering). Ends with an issend
 * handshake so neither side leaves while the other still needs it.
 *
 *   omx_stress -d peerhost:0 [-e ep] [-r peer_ep] [-n count] [-m maxlen] [-w window] [-s seed] [-t threads]
 * Exit 0 only if every message arrived intact and in order.
 *
 * Several peers (all-to-all tests): -d and -r take comma-separated lists (a single host applies
 * to every endpoint of -r), e.g. "-d node:0 -r 1,2,3" or "-d a:0,b:0 -r 1,0". Then traffic runs
 * with every peer at once, `-n` messages each way per peer; the top byte of the match value
 * carries the sender's tag (its endpoint index, or -i) so that the receives posted for a peer
 * see only its messages and per-peer order is checked. If a peer disappears (a send completes
 * with "endpoint closed", "unreachable" or "bad session"), the program reports "peer lost" and
 * exits with status 3 instead of waiting for it. -g uses tags with a single peer too (to talk to a
 * process that has several peers). -b opens the endpoint on another board than 0.
 * -p N:MS: once N messages were received, stay out of the library for MS milliseconds (a stalled
 * receiver: its peers' frames pile up until their transport refuses them, and the protocol must
 * deliver them again later).
 * -A: every buffer from omx_shared_alloc (same-host receivers read large ones from the pool).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "open-mx.h"
#include "omx_shared_alloc.h"

#define HDR 32
#define MATCH_FIN 0xF1F1F1F1F1F1F1F1ull

#define MAX_PEERS 32

struct slot {
	omx_request_t req;
	uint8_t *buf;
	uint64_t post_no; /* receives: k-th posted wildcard receive must get the peer's k-th message */
};

static uint64_t rng;
static uint64_t rnd(void)
{
	rng += 0x9E3779B97F4A7C15ull;
	uint64_t z = rng;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static size_t pick_len(size_t maxlen)
{
	if (rnd() % 16 == 0)
		return rnd() % 4 == 0 ? maxlen : (size_t)(rnd() % 64); /* edges */
	double x = (double)(rnd() >> 11) / 9007199254740992.0;
	return (size_t)(exp(x * log((double)maxlen + 1.0))) - 1;
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[128];
	long kb = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = atol(line + 6);
	if (f)
		fclose(f);
	return kb;
}

static void die(const char *what, omx_return_t r)
{
	fprintf(stderr, "omx_stress: %s: %s\n", what, omx_strerror(r));
	exit(1);
}

struct peer {
	omx_endpoint_addr_t addr;
	uint32_t tag;
	struct slot *ss, *rs;
	uint32_t sent, sdone, posted, received;
};

static int peer_gone(omx_return_t code)
{
	return code == OMX_REMOTE_ENDPOINT_CLOSED || code == OMX_REMOTE_ENDPOINT_UNREACHABLE ||
	       code == OMX_REMOTE_ENDPOINT_BAD_SESSION || code == OMX_REMOTE_ENDPOINT_BAD_ID;
}

int main(int argc, char **argv)
{
	char *hosts = NULL, *eps = NULL;
	uint32_t my_ep = 0, count = 1000, window = 32;
	int my_tag = -1;
	size_t maxlen = 65536, minlen = 0;
	size_t list[64];
	unsigned nlist = 0;
	uint64_t seed = 1;
	int c;
	char *colon = NULL;
	unsigned long long pause_after = 0;
	unsigned long pause_ms = 0;
	int force_tag = 0;
	uint32_t board = 0;
	int shared_bufs = 0;
	while ((c = getopt(argc, argv, "b:d:e:r:n:m:l:z:w:s:i:p:gAh")) != -1) {
		switch (c) {
		case 'd': hosts = optarg; break;
		case 'e': my_ep = (uint32_t)atoi(optarg); break;
		case 'r': eps = optarg; break;
		case 'n': count = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'm': maxlen = strtoul(optarg, NULL, 0); break;
		case 'l': minlen = strtoul(optarg, NULL, 0); break;
		case 'z': /* comma-separated sizes, cycled instead of random ones */
			for (char *t = strtok(optarg, ","); t && nlist < 64; t = strtok(NULL, ","))
				list[nlist++] = strtoul(t, NULL, 0);
			break;
		case 'w': window = (uint32_t)atoi(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'i': my_tag = atoi(optarg); break;
		case 'g': force_tag = 1; break;
		case 'A': shared_bufs = 1; break;
		case 'b': board = (uint32_t)atoi(optarg); break;
		case 'p':
			pause_after = strtoull(optarg, &colon, 0);
			pause_ms = *colon == ':' ? strtoul(colon + 1, NULL, 0) : 0;
			break;
		default:
			fprintf(stderr, "usage: omx_stress -d peerhost:ep[,host...] [-b board] [-e ep] [-r peer_ep[,ep...]] [-i tag] [-g] [-n count] [-m maxlen] [-w window] [-s seed] [-p N:MS] [-A]\n");
			return 2;
		}
	}
	for (unsigned i = 0; i < nlist; i++)
		if (list[i] > maxlen)
			maxlen = list[i];
	if (!hosts || window == 0 || window > 1024 || maxlen < HDR)
		return fprintf(stderr, "omx_stress: bad arguments\n"), 2;
	char *hostv[MAX_PEERS];
	uint32_t epv[MAX_PEERS];
	unsigned nh = 0, np = 0;
	for (char *t = strtok(hosts, ","); t && nh < MAX_PEERS; t = strtok(NULL, ","))
		hostv[nh++] = t;
	if (eps)
		for (char *t = strtok(eps, ","); t && np < MAX_PEERS; t = strtok(NULL, ","))
			epv[np++] = (uint32_t)atoi(t);
	if (!np)
		epv[np++] = 0;
	if (!nh || (nh != 1 && nh != np))
		return fprintf(stderr, "omx_stress: -d needs one host or one per -r endpoint\n"), 2;
	if (my_tag < 0)
		my_tag = (int)my_ep;
	rng = seed;
	omx_set_error_handler(NULL, OMX_ERRORS_RETURN);
	omx_return_t r = omx_init();
	if (r)
		die("init", r);
	omx_endpoint_t ep;
	if ((r = omx_open_endpoint(board, my_ep, 0x5EED, NULL, 0, &ep)))
		die("open endpoint", r);
	/* One peer: wildcard receives, as always; several: receives filtered by the sender's tag. */
	int tagged = np > 1 || force_tag;
	uint64_t tag_mask = tagged ? 0xFFull << 56 : 0;
	struct peer *pv = calloc(np, sizeof(*pv));
	for (unsigned k = 0; k < np; k++) {
		char host[80];
		snprintf(host, sizeof(host), "%s", hostv[nh == 1 ? 0 : k]);
		uint64_t nic;
		if ((r = omx_hostname_to_nic_id(host, &nic)))
			die("hostname lookup", r);
		for (int tries = 0;; tries++) {
			r = omx_connect(ep, nic, epv[k], 0x5EED, 1000, &pv[k].addr);
			if (r == OMX_SUCCESS)
				break;
			if (tries > 300)
				die("connect", r);
			usleep(100000); /* the peer may not have opened its endpoint yet ("closed") */
		}
		pv[k].tag = epv[k];
		pv[k].ss = calloc(window, sizeof(struct slot));
		pv[k].rs = calloc(window, sizeof(struct slot));
		for (uint32_t i = 0; i < window; i++) {
			pv[k].ss[i].buf = shared_bufs ? omx_shared_alloc(maxlen) : malloc(maxlen);
			pv[k].rs[i].buf = shared_bufs ? omx_shared_alloc(maxlen) : malloc(maxlen);
			if (!pv[k].ss[i].buf || !pv[k].rs[i].buf)
				return fprintf(stderr, "omx_stress: no memory for the buffers\n"), 1;
		}
	}
	if (tagged && np > 1)
		for (unsigned k = 0; k < np; k++)
			if (nh == 1 && pv[k].tag > 255)
				return fprintf(stderr, "omx_stress: tags are one byte\n"), 2;

	uint32_t errors = 0, all_done = 0;
	long rss_early = -1;
	uint64_t bytes = 0, total_received = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (all_done < np) {
		int progress = 0;
		all_done = 0;
		for (unsigned k = 0; k < np; k++) {
			struct peer *P = &pv[k];
			if (P->sdone >= count && P->received >= count) {
				all_done++;
				continue;
			}
			for (uint32_t i = 0; i < window; i++) {
				omx_status_t st;
				uint32_t res;
				/* sends */
				if (P->ss[i].req) {
					omx_test(ep, &P->ss[i].req, &st, &res);
					if (res) {
						P->sdone++;
						progress = 1;
						if (st.code != OMX_SUCCESS) {
							errors++;
							fprintf(stderr, "send completed with %s\n", omx_strerror(st.code));
							if (peer_gone(st.code)) {
								printf("omx_stress: peer lost (endpoint %u): %s\n", P->tag,
								       omx_strerror(st.code));
								fflush(stdout);
								_exit(3);
							}
						}
					}
				}
				if (!P->ss[i].req && P->sent < count) {
					size_t len = nlist ? list[P->sent % nlist] : pick_len(maxlen);
					if (len < minlen)
						len = minlen + (size_t)(rnd() % (maxlen - minlen + 1));
					if (len < HDR)
						len = HDR;
					uint8_t *b = P->ss[i].buf;
					for (size_t q = HDR; q < len; q++)
						b[q] = (uint8_t)rnd();
					uint64_t match = rnd();
					if (tagged)
						match = (match & ~tag_mask) | ((uint64_t)my_tag << 56);
					put64(b, P->sent);
					put64(b + 8, len);
					put64(b + 16, match);
					put64(b + 24, fnv(b + HDR, len - HDR));
					if ((r = omx_isend(ep, b, len, P->addr, match, NULL, &P->ss[i].req)))
						die("isend", r);
					P->sent++;
					progress = 1;
				}
				/* receives */
				if (P->rs[i].req) {
					omx_test(ep, &P->rs[i].req, &st, &res);
					if (res) {
						const uint8_t *b = P->rs[i].buf;
						P->received++;
						total_received++;
						progress = 1;
						uint64_t seq = get64(b), len = get64(b + 8);
						if (st.code != OMX_SUCCESS || st.xfer_length != len || st.msg_length != len ||
						    get64(b + 16) != st.match_info || fnv(b + HDR, len - HDR) != get64(b + 24) ||
						    seq != P->rs[i].post_no) {
							errors++;
							if (errors < 10000)
								fprintf(stderr,
									"bad message from endpoint %u: code %d seq %" PRIu64
									" (expected %" PRIu64 ") len %" PRIu64 " xfer %u\n",
									P->tag, st.code, seq, P->rs[i].post_no, len,
									st.xfer_length);
						}
						bytes += st.xfer_length;
					}
				}
				if (!P->rs[i].req && P->posted < count) {
					/* receives are matched in posting order, so order is observable */
					uint64_t m = tagged ? (uint64_t)P->tag << 56 : 0;
					if ((r = omx_irecv(ep, P->rs[i].buf, maxlen, m, tag_mask, NULL, &P->rs[i].req)))
						die("irecv", r);
					P->rs[i].post_no = P->posted++;
				}
			}
		}
		if (pause_ms && total_received >= pause_after) {
			struct timespec ts = { (time_t)(pause_ms / 1000), (long)(pause_ms % 1000) * 1000000L };
			while (nanosleep(&ts, &ts) < 0)
				;
			pause_ms = 0;
		}
		if (!progress)
			omx_progress(ep);
		if (rss_early < 0 && total_received >= (uint64_t)count * np / 10 && total_received > 0) {
			rss_early = rss_kb();
			/* tests that inject a fault under running traffic wait for this line */
			printf("omx_stress: 10%% received\n");
			fflush(stdout);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* fin: each side's issend completes only once the other matched it */
	for (unsigned k = 0; k < np; k++) {
		omx_request_t fs, fr;
		omx_status_t st;
		uint32_t res;
		/* From the slots' buffers (all idle now): with -A the fin too comes from the pool, and
		 * tests can require every single copy to be a pool copy. */
		uint8_t *fin_out = pv[k].ss[0].buf, *fin_in = pv[k].rs[0].buf;
		memcpy(fin_out, "fin", 4);
		uint64_t fin = tagged ? (MATCH_FIN & ~tag_mask) : MATCH_FIN;
		omx_irecv(ep, fin_in, 4, fin | (tagged ? (uint64_t)pv[k].tag << 56 : 0), ~0ull, NULL, &fr);
		omx_issend(ep, fin_out, 4, pv[k].addr, fin | (tagged ? (uint64_t)my_tag << 56 : 0), NULL, &fs);
		omx_wait(ep, &fs, &st, &res, 60000);
		if (!res || st.code)
			errors++, fprintf(stderr, "fin send to endpoint %u failed\n", pv[k].tag);
		omx_wait(ep, &fr, &st, &res, 60000);
		if (!res || st.code)
			errors++, fprintf(stderr, "fin receive from endpoint %u failed\n", pv[k].tag);
	}
	printf("omx_stress: rss_kb after 10%% %ld, at the end %ld\n", rss_early, rss_kb());
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("omx_stress: %u peer(s): sent %u received %" PRIu64 " bytes %" PRIu64 " in %.2f s (%.1f MB/s received) errors %u\n",
	       np, count * np, total_received, bytes, secs, (double)bytes / secs / 1e6, errors);
	omx_close_endpoint(ep);
	omx_finalize();
	for (unsigned k = 0; k < np; k++) {
		for (uint32_t i = 0; i < window; i++) {
			if (shared_bufs) {
				if (omx_shared_free(pv[k].ss[i].buf) != OMX_SUCCESS ||
				    omx_shared_free(pv[k].rs[i].buf) != OMX_SUCCESS)
					return fprintf(stderr, "omx_stress: omx_shared_free failed\n"), 1;
			} else {
				free(pv[k].ss[i].buf);
				free(pv[k].rs[i].buf);
			}
		}
		free(pv[k].ss);
		free(pv[k].rs);
	}
	free(pv);
	return errors ? 1 : 0;
}
