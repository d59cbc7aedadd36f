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
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "open-mx.h"

#define HDR 32
#define MATCH_FIN 0xF1F1F1F1F1F1F1F1ull

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

int main(int argc, char **argv)
{
	const char *peer = NULL;
	uint32_t my_ep = 0, count = 1000, window = 32;
	size_t maxlen = 65536, minlen = 0;
	size_t list[64];
	unsigned nlist = 0;
	uint64_t seed = 1;
	int c;
	uint32_t peer_ep = 0;
	while ((c = getopt(argc, argv, "d:e:r:n:m:l:z:w:s:h")) != -1) {
		switch (c) {
		case 'd': peer = optarg; break;
		case 'e': my_ep = (uint32_t)atoi(optarg); break;
		case 'r': peer_ep = (uint32_t)atoi(optarg); break;
		case 'n': count = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'm': maxlen = strtoul(optarg, NULL, 0); break;
		case 'l': minlen = strtoul(optarg, NULL, 0); break;
		case 'z': /* comma-separated sizes, cycled instead of random ones */
			for (char *t = strtok(optarg, ","); t && nlist < 64; t = strtok(NULL, ","))
				list[nlist++] = strtoul(t, NULL, 0);
			break;
		case 'w': window = (uint32_t)atoi(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: omx_stress -d peerhost:ep [-e ep] [-n count] [-m maxlen] [-w window] [-s seed]\n");
			return 2;
		}
	}
	for (unsigned i = 0; i < nlist; i++)
		if (list[i] > maxlen)
			maxlen = list[i];
	if (!peer || window == 0 || window > 1024 || maxlen < HDR)
		return fprintf(stderr, "omx_stress: bad arguments\n"), 2;
	rng = seed;
	omx_set_error_handler(NULL, OMX_ERRORS_RETURN);
	omx_return_t r = omx_init();
	if (r)
		die("init", r);
	omx_endpoint_t ep;
	if ((r = omx_open_endpoint(0, my_ep, 0x5EED, NULL, 0, &ep)))
		die("open endpoint", r);
	char host[80];
	snprintf(host, sizeof(host), "%s", peer);
	uint64_t nic;
	if ((r = omx_hostname_to_nic_id(host, &nic)))
		die("hostname lookup", r);
	omx_endpoint_addr_t addr;
	for (int tries = 0;; tries++) {
		r = omx_connect(ep, nic, peer_ep, 0x5EED, 1000, &addr);
		if (r == OMX_SUCCESS)
			break;
		if (tries > 300)
			die("connect", r);
		usleep(100000); /* the peer may not have opened its endpoint yet ("closed") */
	}

	struct slot *ss = calloc(window, sizeof(*ss)), *rs = calloc(window, sizeof(*rs));
	for (uint32_t i = 0; i < window; i++) {
		ss[i].buf = malloc(maxlen);
		rs[i].buf = malloc(maxlen);
	}
	uint32_t sent = 0, sdone = 0, posted = 0, received = 0, errors = 0;
	long rss_early = -1;
	uint64_t bytes = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (sdone < count || received < count) {
		int progress = 0;
		for (uint32_t i = 0; i < window; i++) {
			omx_status_t st;
			uint32_t res;
			/* sends */
			if (ss[i].req) {
				omx_test(ep, &ss[i].req, &st, &res);
				if (res) {
					sdone++;
					progress = 1;
					if (st.code != OMX_SUCCESS) {
						errors++;
						fprintf(stderr, "send completed with %s\n", omx_strerror(st.code));
					}
				}
			}
			if (!ss[i].req && sent < count) {
				size_t len = nlist ? list[sent % nlist] : pick_len(maxlen);
				if (len < minlen)
					len = minlen + (size_t)(rnd() % (maxlen - minlen + 1));
				if (len < HDR)
					len = HDR;
				uint8_t *b = ss[i].buf;
				for (size_t k = HDR; k < len; k++)
					b[k] = (uint8_t)rnd();
				uint64_t match = rnd();
				put64(b, sent);
				put64(b + 8, len);
				put64(b + 16, match);
				put64(b + 24, fnv(b + HDR, len - HDR));
				if ((r = omx_isend(ep, b, len, addr, match, NULL, &ss[i].req)))
					die("isend", r);
				sent++;
				progress = 1;
			}
			/* receives */
			if (rs[i].req) {
				omx_test(ep, &rs[i].req, &st, &res);
				if (res) {
					const uint8_t *b = rs[i].buf;
					received++;
					progress = 1;
					uint64_t seq = get64(b), len = get64(b + 8);
					if (st.code != OMX_SUCCESS || st.xfer_length != len || st.msg_length != len ||
					    get64(b + 16) != st.match_info || fnv(b + HDR, len - HDR) != get64(b + 24) ||
					    seq != rs[i].post_no) {
						errors++;
						if (errors < 10000)
							fprintf(stderr,
								"bad message: code %d seq %" PRIu64 " (expected %" PRIu64
								") len %" PRIu64 " xfer %u\n",
								st.code, seq, rs[i].post_no, len, st.xfer_length);
					}
					bytes += st.xfer_length;
				}
			}
			if (!rs[i].req && posted < count) {
				/* wildcard receives are matched in posting order, so order is observable */
				if ((r = omx_irecv(ep, rs[i].buf, maxlen, 0, 0, NULL, &rs[i].req)))
					die("irecv", r);
				rs[i].post_no = posted++;
			}
		}
		if (!progress)
			omx_progress(ep);
		if (rss_early < 0 && received >= count / 10 && received > 0)
			rss_early = rss_kb();
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* fin: each side's issend completes only once the other matched it */
	omx_request_t fs, fr;
	omx_status_t st;
	uint32_t res;
	char fin_in[4];
	omx_irecv(ep, fin_in, sizeof(fin_in), MATCH_FIN, ~0ull, NULL, &fr);
	omx_issend(ep, "fin", 4, addr, MATCH_FIN, NULL, &fs);
	omx_wait(ep, &fs, &st, &res, 60000);
	if (!res || st.code)
		errors++, fprintf(stderr, "fin send failed\n");
	omx_wait(ep, &fr, &st, &res, 60000);
	if (!res || st.code)
		errors++, fprintf(stderr, "fin receive failed\n");
	printf("omx_stress: rss_kb after 10%% %ld, at the end %ld\n", rss_early, rss_kb());
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("omx_stress: sent %u received %u bytes %" PRIu64 " in %.2f s (%.1f MB/s received) errors %u\n", sdone,
	       received, bytes, secs, (double)bytes / secs / 1e6, errors);
	omx_close_endpoint(ep);
	omx_finalize();
	for (uint32_t i = 0; i < window; i++) {
		free(ss[i].buf);
		free(rs[i].buf);
	}
	free(ss);
	free(rs);
	return errors ? 1 : 0;
}
