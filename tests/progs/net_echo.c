/*
 * net_echo - test program for the AF_PACKET transport (src/net/packet.c).
 *
 *   net_echo server IFACE EP [-n MAX] [-d DURATION_MS] [-i IDLE_MS] [-a] [-x] [-r RING] [-b]
 *       Opens endpoint EP on IFACE and echoes every frame back (MACs swapped, endpoint fields
 *       rewritten for the client's endpoint). -a: all endpoints (no endpoint filter); -x: sink,
 *       count only, never echo; -n: stop after MAX frames; -d: stop after DURATION_MS;
 *       -i: stop after IDLE_MS without a frame (after the first one); SIGTERM/SIGINT: stop.
 *       Prints "ready" once open, and "server: received=R echoed=E bad=B drops=D" at the end.
 *
 *   net_echo client IFACE EP DSTMAC DSTEP [-n N] [-s SIZES] [-p PTYPE] [-w WINDOW] [-T TIMEOUT_MS]
 *                   [-L LINGER_MS] [-E] [-S] [-b] [-O]
 *       Sends N frames (sizes cycle through SIZES, a comma list, default a spread up to mtu+14),
 *       at most WINDOW outstanding, and checks each echo (length, MACs, payload). A frame not
 *       echoed within TIMEOUT_MS is lost. After the last frame it listens LINGER_MS more for late
 *       duplicates. Prints "client: sent=N unique=U dups=D lost=L bad=B".
 *       Exit 0 iff unique == N, no dup, no bad frame; -E (expect none): iff nothing came back;
 *       -S (statistics): iff no bad frame. -O: also check that an mtu+15 frame is refused
 *       (-EMSGSIZE). -p: packet type (37 TINY default; 44 NACK_LIB and 42 PULL_REPLY carry the
 *       endpoint elsewhere; 3/4/1 reach every endpoint). -b: no qdisc bypass.
 *
 *   net_echo info IFACE
 *       Prints what omx_iface_query reports: "ifindex=.. mac=.. mtu=.. up=.. loopback=.. numa=..
 *       driver=..".
 *
 * Test frame layout: the wire header bytes the packet filter looks at (16 ptype, 17, 25, 31)
 * and from byte 32: "OMXE", client endpoint, server endpoint, seq (be32), length (be32), then a
 * pattern derived from seq.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/net.h"

#define ETH_HLEN_ 14
#define HDR_END 48
#define MAX_FRAME (65536 + 64)

static uint8_t pattern_byte(uint32_t seq, size_t i)
{
	return (uint8_t)(seq * 131u + i * 7u + (i >> 8));
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Place `ep` where the packet filter looks for this packet type; the other candidate bytes get
 * a different value so that the test proves which byte is used. */
static void set_endpoint(uint8_t *f, uint8_t ptype, uint8_t ep)
{
	f[16] = ptype;
	f[17] = (uint8_t)(ep ^ 0x55);
	f[25] = (uint8_t)(ep ^ 0x33);
	f[31] = (uint8_t)(ep ^ 0x11);
	if (ptype == 44)
		f[25] = ep;
	else if (ptype == 42)
		f[31] = (uint8_t)(ep ^ 0x80);
	else
		f[17] = ep;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 255)
			return -1;
		mac[i] = (uint8_t)v[i];
	}
	return 0;
}

static int wait_readable(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int r = poll(&p, 1, timeout_ms);
	return r > 0;
}

static uint64_t now_ms(void)
{
	return omx_now_ns() / 1000000ull;
}

/* ---------------------------------------------------------------- server */

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct server {
	struct omx_net *n;
	int echo;
	uint64_t received, echoed, bad;
	uint8_t buf[MAX_FRAME];
};

static void server_rx(void *arg, const uint8_t *frame, size_t len)
{
	struct server *s = arg;
	s->received++;
	if (len < HDR_END || memcmp(frame + 32, "OMXE", 4) != 0 || len > sizeof(s->buf)) {
		s->bad++;
		return;
	}
	if (!s->echo)
		return;
	memcpy(s->buf, frame, len);
	memcpy(s->buf, frame + 6, 6);
	memcpy(s->buf + 6, s->n->mac, 6);
	uint8_t client_ep = frame[36];
	set_endpoint(s->buf, frame[16], client_ep);
	s->buf[36] = frame[37];
	s->buf[37] = client_ep;
	struct iovec v = {.iov_base = s->buf, .iov_len = len};
	/* Retry briefly on a full device queue: echo loss must come from the test's rules only. */
	for (int tries = 0; tries < 1000; tries++) {
		int r = s->n->ops->send(s->n, &v, 1);
		if (r == 0) {
			s->echoed++;
			return;
		}
		if (r != -EAGAIN && r != -ENOBUFS) {
			fprintf(stderr, "server: send: %s\n", strerror(-r));
			return;
		}
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
}

static int run_server(int argc, char **argv)
{
	struct omx_net_opts o = {.qdisc_bypass = 1};
	long max = 0, duration = 0, idle = 0;
	int echo = 1, c, err;

	while ((c = getopt(argc, argv, "n:d:i:axr:b")) != -1) {
		switch (c) {
		case 'n': max = atol(optarg); break;
		case 'd': duration = atol(optarg); break;
		case 'i': idle = atol(optarg); break;
		case 'a': o.all_endpoints = 1; break;
		case 'x': echo = 0; break;
		case 'r': o.rx_ring_frames = (unsigned)atol(optarg); break;
		case 'b': o.qdisc_bypass = 0; break;
		default: return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: net_echo server IFACE EP [options]\n");
		return 2;
	}
	struct server *s = calloc(1, sizeof(*s));
	if (!s)
		return 1;
	s->echo = echo;
	s->n = omx_net_packet_open(argv[optind], (uint8_t)atoi(argv[optind + 1]), &o, &err);
	if (!s->n) {
		fprintf(stderr, "server: open %s: %s\n", argv[optind], strerror(-err));
		free(s);
		return 1;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	printf("ready\n");
	fflush(stdout);

	uint64_t start = now_ms(), last = start;
	while (!stop_requested) {
		uint64_t t = now_ms();
		if (duration && t - start >= (uint64_t)duration)
			break;
		if (idle && s->received && t - last >= (uint64_t)idle)
			break;
		if (max && s->received >= (uint64_t)max)
			break;
		int got = s->n->ops->recv_burst(s->n, server_rx, s, 64);
		if (got > 0) {
			last = now_ms();
			continue;
		}
		wait_readable(s->n->fd, 10);
	}
	printf("server: received=%llu echoed=%llu bad=%llu drops=%llu\n", (unsigned long long)s->received,
	       (unsigned long long)s->echoed, (unsigned long long)s->bad,
	       (unsigned long long)omx_net_packet_drops(s->n));
	s->n->ops->close(s->n);
	free(s);
	return 0;
}

/* ---------------------------------------------------------------- client */

struct client {
	struct omx_net *n;
	uint8_t peer[6];
	uint8_t my_ep;
	uint32_t count;
	size_t *sizes;
	unsigned nsizes;
	uint8_t *seen;        /* per seq: echoes received */
	uint64_t *sent_at;    /* per seq: send time (ms) */
	uint64_t unique, dups, bad;
};

static size_t size_of(const struct client *c, uint32_t seq)
{
	return c->sizes[seq % c->nsizes];
}

static void build_frame(const struct client *c, uint8_t *f, uint32_t seq, uint8_t ptype, uint8_t dst_ep)
{
	size_t len = size_of(c, seq);
	memset(f, 0, HDR_END);
	memcpy(f, c->peer, 6);
	memcpy(f + 6, c->n->mac, 6);
	f[12] = 0x86;
	f[13] = 0xDF;
	set_endpoint(f, ptype, dst_ep);
	memcpy(f + 32, "OMXE", 4);
	f[36] = c->my_ep;
	f[37] = dst_ep;
	put32(f + 38, seq);
	put32(f + 42, (uint32_t)len);
	for (size_t i = HDR_END; i < len; i++)
		f[i] = pattern_byte(seq, i);
}

static void client_rx(void *arg, const uint8_t *f, size_t len)
{
	struct client *c = arg;
	if (len < HDR_END || memcmp(f + 32, "OMXE", 4) != 0) {
		c->bad++;
		return;
	}
	uint32_t seq = get32(f + 38);
	if (seq >= c->count || get32(f + 42) != len || len != size_of(c, seq) || memcmp(f, c->n->mac, 6) != 0 ||
	    (!(c->peer[0] & 1) && memcmp(f + 6, c->peer, 6) != 0) || f[37] != c->my_ep) {
		c->bad++;
		return;
	}
	for (size_t i = HDR_END; i < len; i++) {
		if (f[i] != pattern_byte(seq, i)) {
			c->bad++;
			return;
		}
	}
	if (c->seen[seq]++ == 0)
		c->unique++;
	else
		c->dups++;
}

static int parse_sizes(struct client *c, const char *spec, uint32_t mtu)
{
	static const size_t defaults[] = {60, 61, 64, 100, 128, 255, 512, 1000, 1024, 1500, 2048,
					  4000, 4096, 8192, 9000, 9014, 16384, 32768, 65535, 65549};
	size_t max = (size_t)mtu + ETH_HLEN_;
	c->sizes = calloc(64, sizeof(size_t));
	c->nsizes = 0;
	if (!spec) {
		for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
			if (defaults[i] < max)
				c->sizes[c->nsizes++] = defaults[i];
		c->sizes[c->nsizes++] = max;
		return 0;
	}
	char *dup = strdup(spec), *save = NULL;
	for (char *t = strtok_r(dup, ",", &save); t && c->nsizes < 64; t = strtok_r(NULL, ",", &save)) {
		size_t v = !strcmp(t, "max") ? max : (size_t)atol(t);
		if (v < 60 || v > max || v > MAX_FRAME) {
			fprintf(stderr, "client: size %s out of range [60, %zu]\n", t, max);
			free(dup);
			return -1;
		}
		c->sizes[c->nsizes++] = v;
	}
	free(dup);
	return c->nsizes ? 0 : -1;
}

static int run_client(int argc, char **argv)
{
	struct omx_net_opts o = {.qdisc_bypass = 1};
	const char *sizes = NULL;
	long count = 100, window = 16, timeout = 500, linger = 300;
	int ptype = 37, expect_none = 0, stats_only = 0, oversize = 0, c, err;

	while ((c = getopt(argc, argv, "n:s:p:w:T:L:ESbO")) != -1) {
		switch (c) {
		case 'n': count = atol(optarg); break;
		case 's': sizes = optarg; break;
		case 'p': ptype = atoi(optarg); break;
		case 'w': window = atol(optarg); break;
		case 'T': timeout = atol(optarg); break;
		case 'L': linger = atol(optarg); break;
		case 'E': expect_none = 1; break;
		case 'S': stats_only = 1; break;
		case 'b': o.qdisc_bypass = 0; break;
		case 'O': oversize = 1; break;
		default: return 2;
		}
	}
	if (argc - optind != 4 || count <= 0 || window <= 0) {
		fprintf(stderr, "usage: net_echo client IFACE EP DSTMAC DSTEP [options]\n");
		return 2;
	}
	struct client cl;
	memset(&cl, 0, sizeof(cl));
	cl.my_ep = (uint8_t)atoi(argv[optind + 1]);
	uint8_t dst_ep = (uint8_t)atoi(argv[optind + 3]);
	if (parse_mac(argv[optind + 2], cl.peer) < 0) {
		fprintf(stderr, "client: bad MAC %s\n", argv[optind + 2]);
		return 2;
	}
	cl.n = omx_net_packet_open(argv[optind], cl.my_ep, &o, &err);
	if (!cl.n) {
		fprintf(stderr, "client: open %s: %s\n", argv[optind], strerror(-err));
		return 1;
	}
	int rc = 1;
	uint8_t *frame = malloc(MAX_FRAME + 16);
	cl.count = (uint32_t)count;
	cl.seen = calloc((size_t)count, 1);
	cl.sent_at = calloc((size_t)count, sizeof(uint64_t));
	if (!frame || !cl.seen || !cl.sent_at || parse_sizes(&cl, sizes, cl.n->mtu) < 0)
		goto out;

	if (oversize) {
		size_t big = (size_t)cl.n->mtu + ETH_HLEN_ + 1;
		memset(frame, 0, big);
		memcpy(frame, cl.peer, 6);
		memcpy(frame + 6, cl.n->mac, 6);
		frame[12] = 0x86;
		frame[13] = 0xDF;
		struct iovec v = {.iov_base = frame, .iov_len = big};
		int r = cl.n->ops->send(cl.n, &v, 1);
		printf("client: oversize frame of %zu bytes: %s\n", big, r ? strerror(-r) : "accepted");
		if (r != -EMSGSIZE) {
			fprintf(stderr, "client: oversize frame not refused with EMSGSIZE\n");
			goto out;
		}
	}

	uint32_t next = 0, base = 0;
	uint64_t lost = 0, send_errors = 0, retries = 0;
	while (base < cl.count) {
		uint64_t t = now_ms();
		/* Retire the oldest outstanding frames: echoed, or timed out (lost). */
		while (base < next && (cl.seen[base] || t - cl.sent_at[base] >= (uint64_t)timeout)) {
			if (!cl.seen[base])
				lost++;
			base++;
		}
		if (base == cl.count)
			break;
		if (next < cl.count && next - base < (uint32_t)window) {
			build_frame(&cl, frame, next, (uint8_t)ptype, dst_ep);
			/* Two iovecs: header and payload, to exercise the gather path. */
			struct iovec v[2] = {{.iov_base = frame, .iov_len = 20},
					     {.iov_base = frame + 20, .iov_len = size_of(&cl, next) - 20}};
			int r = cl.n->ops->send(cl.n, v, 2);
			if (r == -EAGAIN || r == -ENOBUFS) {
				retries++;
				wait_readable(cl.n->fd, 1);
				cl.n->ops->recv_burst(cl.n, client_rx, &cl, 64);
				continue;
			}
			if (r < 0) {
				send_errors++;
				fprintf(stderr, "client: send seq %u: %s\n", next, strerror(-r));
				if (send_errors > 10)
					goto out;
			}
			cl.sent_at[next] = now_ms();
			next++;
			cl.n->ops->recv_burst(cl.n, client_rx, &cl, 64);
			continue;
		}
		if (cl.n->ops->recv_burst(cl.n, client_rx, &cl, 64) == 0)
			wait_readable(cl.n->fd, 5);
	}
	/* Linger for late duplicates. */
	uint64_t end = now_ms() + (uint64_t)linger;
	while (now_ms() < end) {
		if (cl.n->ops->recv_burst(cl.n, client_rx, &cl, 64) == 0)
			wait_readable(cl.n->fd, 5);
	}
	lost = cl.count - cl.unique;
	printf("client: sent=%u unique=%llu dups=%llu lost=%llu bad=%llu sizes=%u max=%zu drops=%llu retries=%llu\n", cl.count,
	       (unsigned long long)cl.unique, (unsigned long long)cl.dups, (unsigned long long)lost,
	       (unsigned long long)cl.bad, cl.nsizes, cl.sizes[cl.nsizes - 1],
	       (unsigned long long)omx_net_packet_drops(cl.n), (unsigned long long)retries);
	if (expect_none)
		rc = cl.unique == 0 && cl.dups == 0 && cl.bad == 0 ? 0 : 1;
	else if (stats_only)
		rc = cl.bad == 0 && !send_errors ? 0 : 1;
	else
		rc = cl.unique == cl.count && cl.dups == 0 && cl.bad == 0 && !send_errors ? 0 : 1;
out:
	free(frame);
	free(cl.seen);
	free(cl.sent_at);
	free(cl.sizes);
	cl.n->ops->close(cl.n);
	return rc;
}

static int run_info(int argc, char **argv)
{
	struct omx_iface_info info;
	if (argc != 2) {
		fprintf(stderr, "usage: net_echo info IFACE\n");
		return 2;
	}
	int r = omx_iface_query(argv[1], &info);
	if (r < 0) {
		printf("error=%d (%s)\n", r, strerror(-r));
		return 1;
	}
	printf("name=%s ifindex=%d mac=%02x:%02x:%02x:%02x:%02x:%02x mtu=%u up=%d loopback=%d numa=%d driver=%s\n",
	       info.name, info.ifindex, info.mac[0], info.mac[1], info.mac[2], info.mac[3], info.mac[4], info.mac[5],
	       info.mtu, info.up, info.loopback, info.numa_node, info.driver[0] ? info.driver : "-");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: net_echo server|client|info ...\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "server"))
		return run_server(argc - 1, argv + 1);
	if (!strcmp(argv[1], "client"))
		return run_client(argc - 1, argv + 1);
	if (!strcmp(argv[1], "info"))
		return run_info(argc - 1, argv + 1);
	fprintf(stderr, "unknown mode %s\n", argv[1]);
	return 2;
}
