/*
 * omx_perf.c - ping-pong latency/bandwidth benchmark over the native API (behaviour.md 11.6).
 *
 * Server (receiver):  omx_perf [-b n] [-e n] [-s] [-w] [-y] [-v]
 * Client (sender):    omx_perf -d <hostname> [-r n] [-S n] [-E n] [-M n] [-I n] [-N n] [-W n]
 *                              [-P ms] [-a] [-U] [-Y] [-T] [-c file.csv|-] [-b n] [-e n] [-w] [-y] [-v]
 *
 * Protocol (interoperable with the reference): the client connects with key 0x12345678 and
 * sends, with issend and match 0x1234567887654321, a 44-byte big-endian parameter block. The
 * server looks the client up, iconnects back (match 0xabcddcbaabcddcba, context 0xdeadbeef) and
 * answers with a 0-byte issend (match 0). Then, for each length, iter+warmup round trips: the
 * client sends `length` bytes, waits, posts a receive, waits; the server mirrors (0-byte replies
 * when unidirectional). Timing starts after the warmup round trips.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "open-mx.h"
#include "omx_shared_alloc.h"
#include "omx_tool.h"
#include "core/core.h" /* only to let the server linger until its last replies are acknowledged */

#define PERF_KEY 0x12345678u
#define PERF_MATCH 0x1234567887654321ull
#define PERF_CONNECT_MATCH 0xabcddcbaabcddcbaull
#define PERF_CONNECT_CONTEXT ((void *)(uintptr_t)0xdeadbeefu)
#define PERF_REPLY_MATCH 0ull
#define PARAM_LEN 44
#define CONNECT_TIMEOUT_MS 10000u
#define LINGER_MAX_NS 3000000000ull
#define ALIGNMENT 65536

static const char *prog = "omx_perf";

struct perf_params {
	uint32_t iter, warmup;
	uint64_t min, max, multiplier, increment;
	uint8_t align, unidir, sync, touch;
};

static struct {
	uint32_t board, endpoint, remote_endpoint;
	int endpoint_set;
	int slave, wait, yield, verbose;
	const char *dest;
	const char *csv;
	uint32_t pause_ms;
	struct perf_params p;
} opt = {
	.endpoint = 0,
	.pause_ms = 100,
	.p = { .iter = 1000, .warmup = 10, .min = 0, .max = 4194305, .multiplier = 2, .increment = 0 },
};

/* Where informational lines go: stdout, or stderr when the CSV rows go to stdout (-c -). */
static FILE *out;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(255);
}

static void errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void errmsg(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void verbose_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void verbose_print(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}
/* Tested here, not in the call: the ping-pong loops report each message with it, and the call of
 * a variadic function (~13 instructions) sat between a receive's completion and the answer's send. */
#define verbose(...)                                                                                           \
	do {                                                                                                   \
		if (opt.verbose)                                                                               \
			verbose_print(__VA_ARGS__);                                                            \
	} while (0)

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s [options]            (server / receiver)\n"
		"       %s -d <hostname> [options] (client / sender)\n"
		"Common options:\n"
		" -b <n>\tchange local board number [0]\n"
		" -e <n>\tchange local endpoint id [0 on the server, any on the client]\n"
		" -s\tserver: slave mode, serve clients one after the other forever\n"
		" -w\tsleep in omx_wait instead of busy polling with omx_test\n"
		" -y\tcall sched_yield between polls\n"
		" -v\tverbose (parameters and per-iteration traces on stderr)\n"
		" -h, --help\tshow this help\n"
		"Client options:\n"
		" -d <hostname>\tOpen-MX hostname of the server (e.g. node1:0); selects client mode\n"
		" -r <n>\tserver endpoint id [0]\n"
		" -a\tuse 64 KiB aligned buffers\n"
		" -H\tuse buffers of transparent huge pages (2 MiB aligned, MADV_HUGEPAGE), both sides\n"
		" -A\tuse buffers from omx_shared_alloc (same-host receivers read them with one memcpy), both sides\n"
		" -S <n>\tstart length [0]\n"
		" -E <n>\tend length, exclusive [4194305]\n"
		" -M <n>\tlength multiplier [2]\n"
		" -I <n>\tlength increment [0]\n"
		" -N <n>\titerations per length [1000]\n"
		" -W <n>\twarmup round trips per length [10]\n"
		" -P <ms>\tpause between lengths in milliseconds [100]\n"
		" -U\tunidirectional (replies are 0 bytes)\n"
		" -Y\tsynchronous sends (issend)\n"
		" -T\twrite a byte in every cache line of the send buffer before each send, both sides (as\n"
		"\tan application that produced the data: it is then in the sender's cache, not the\n"
		"\treceiver's; the stores are part of the timed round trip)\n"
		" -c <file>\talso write CSV rows 'length,iterations,latency_us,bandwidth_MBps' to <file>\n"
		"\t('-' = stdout; the other output then goes to stderr)\n"
		"Lengths: start, then length*M+I (or I, else 1, after 0) while below the end length.\n"
		"Output: 'length <L>:\\t<latency> us\\t<bw> MB/s\\t <bw> MiB/s' per length.\n",
		prog, prog);
}

static uint64_t parse_num(char o, const char *s, uint64_t max)
{
	char *end;
	unsigned long long v;
	errno = 0;
	if (!s || !*s || *s == '-' || *s == '+')
		die("invalid value '%s' for -%c (expected a non-negative integer)", s ? s : "", o);
	v = strtoull(s, &end, 0);
	if (errno || *end)
		die("invalid value '%s' for -%c (expected a non-negative integer)", s, o);
	if (v > max)
		die("value %s for -%c is too large (max %" PRIu64 ")", s, o, max);
	return v;
}

/* ---- parameter block (44 bytes, big-endian) ---- */

static void put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static void put64lh(uint8_t *b, uint64_t v)
{
	put32(b, (uint32_t)v);
	put32(b + 4, (uint32_t)(v >> 32));
}

static uint64_t get64lh(const uint8_t *b)
{
	return (uint64_t)get32(b) | (uint64_t)get32(b + 4) << 32;
}

static void params_encode(const struct perf_params *p, uint8_t b[PARAM_LEN])
{
	memset(b, 0, PARAM_LEN);
	put32(b + 0, p->iter);
	put32(b + 4, p->warmup);
	put64lh(b + 8, p->min);
	put64lh(b + 16, p->max);
	put64lh(b + 24, p->multiplier);
	put64lh(b + 32, p->increment);
	b[40] = p->align;
	b[41] = p->unidir;
	b[42] = p->sync;
	b[43] = p->touch;
}

static void params_decode(const uint8_t b[PARAM_LEN], struct perf_params *p)
{
	p->iter = get32(b + 0);
	p->warmup = get32(b + 4);
	p->min = get64lh(b + 8);
	p->max = get64lh(b + 16);
	p->multiplier = get64lh(b + 24);
	p->increment = get64lh(b + 32);
	p->align = b[40];
	p->unidir = b[41];
	p->sync = b[42];
	p->touch = b[43]; /* 0 from the reference */
}

/* ---- length sequence ---- */

/* Next length after len; returns 0 and sets *next, or -1 if the sequence would not grow. */
static int next_length(const struct perf_params *p, uint64_t len, uint64_t *next)
{
	uint64_t n;
	if (len == 0) {
		n = p->increment ? p->increment : 1;
	} else {
		if (p->multiplier && len > (UINT64_MAX - p->increment) / p->multiplier)
			n = UINT64_MAX; /* past any end length */
		else
			n = len * p->multiplier + p->increment;
	}
	if (n <= len)
		return -1;
	*next = n;
	return 0;
}

/* Checks the sequence grows and every length fits the API (32-bit lengths). Returns the largest
 * length in the sequence in *largest (0 if the sequence is empty), or an error text. */
static const char *params_check(const struct perf_params *p, uint64_t *largest)
{
	uint64_t len = p->min, last = 0;
	*largest = 0;
	while (len < p->max) {
		if (len > UINT32_MAX)
			return "message lengths above 4294967295 bytes are not supported";
		last = len;
		if (next_length(p, len, &len) < 0)
			return "the length sequence does not grow (check -S, -M and -I)";
	}
	*largest = last;
	return NULL;
}

/* ---- requests ---- */

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Wait for a request: omx_test polling (optionally yielding), or omx_wait with -w. Returns the
 * call's error, or the request's completion code. */
static omx_return_t complete(omx_endpoint_t ep, omx_request_t *req, omx_status_t *st)
{
	uint32_t result = 0;
	omx_return_t r;
	if (opt.wait) {
		do
			r = omx_wait(ep, req, st, &result, OMX_TIMEOUT_INFINITE);
		while (r == OMX_SUCCESS && !result);
	} else {
		for (;;) {
			r = omx_test(ep, req, st, &result);
			if (r != OMX_SUCCESS || result)
				break;
			if (opt.yield)
				sched_yield();
		}
	}
	return r != OMX_SUCCESS ? r : st->code;
}

/* -T: dirty every line of the message in our cache, as its producer would have. */
static void touch_lines(void *buf, size_t len, uint64_t i)
{
	volatile uint8_t *b = buf;
	for (size_t o = 0; o < len; o += 64)
		b[o] = (uint8_t)(i + o);
}

static omx_return_t do_send(omx_endpoint_t ep, void *buf, size_t len, omx_endpoint_addr_t dest, uint64_t match,
			    int sync, omx_status_t *st)
{
	omx_request_t req;
	omx_return_t r = sync ? omx_issend(ep, buf, len, dest, match, NULL, &req)
			      : omx_isend(ep, buf, len, dest, match, NULL, &req);
	if (r != OMX_SUCCESS)
		return r;
	return complete(ep, &req, st);
}

static omx_return_t do_recv(omx_endpoint_t ep, void *buf, size_t len, uint64_t match, uint64_t mask,
			    omx_status_t *st)
{
	omx_request_t req;
	omx_return_t r = omx_irecv(ep, buf, len, match, mask, NULL, &req);
	if (r != OMX_SUCCESS)
		return r;
	return complete(ep, &req, st);
}

/* align 2 (-H): transparent huge pages asked for (2 MiB aligned, MADV_HUGEPAGE before the first
 * touch): the same-host single copy (process_vm_readv) pins the other process's pages one by one,
 * and runs ~3x faster over huge pages on the AMD VM (docs/tuning.md). */
#define HUGE_ALIGNMENT (2u << 20)
static void *alloc_buffer(uint64_t len, int align)
{
	void *b = NULL;
	size_t n = len ? (size_t)len : 1;
	if (align == 2) {
		n = (n + HUGE_ALIGNMENT - 1) / HUGE_ALIGNMENT * HUGE_ALIGNMENT;
		if (posix_memalign(&b, HUGE_ALIGNMENT, n))
			return NULL;
		if (madvise(b, n, MADV_HUGEPAGE) < 0)
			verbose("madvise(MADV_HUGEPAGE): %s (buffers keep small pages)\n", strerror(errno));
	} else if (align == 3) {
		b = omx_shared_alloc(n);
	} else if (align) {
		if (posix_memalign(&b, ALIGNMENT, n))
			return NULL;
	} else {
		b = malloc(n);
	}
	if (b)
		memset(b, 0xa5, n);
	return b;
}

static void free_buffer(void *b, int align)
{
	if (align == 3)
		(void)omx_shared_free(b);
	else
		free(b);
}

static void print_params(const char *who, const struct perf_params *p)
{
	verbose("%s parameters: iter %" PRIu32 " warmup %" PRIu32 " min %" PRIu64 " max %" PRIu64
		" multiplier %" PRIu64 " increment %" PRIu64 " align %u unidir %u sync %u touch %u\n",
		who, p->iter, p->warmup, p->min, p->max, p->multiplier, p->increment, p->align, p->unidir, p->sync,
		p->touch);
}

static const char *nic_text(uint64_t nic, char buf[OMX_BOARD_ADDR_STRLEN])
{
	snprintf(buf, OMX_BOARD_ADDR_STRLEN, "%02x:%02x:%02x:%02x:%02x:%02x", (unsigned)(nic >> 40) & 0xff,
		 (unsigned)(nic >> 32) & 0xff, (unsigned)(nic >> 24) & 0xff, (unsigned)(nic >> 16) & 0xff,
		 (unsigned)(nic >> 8) & 0xff, (unsigned)nic & 0xff);
	return buf;
}

/* Keep progressing (bounded) until every send of the endpoint has been acknowledged, so that a
 * lost final reply is retransmitted instead of dropped when the endpoint closes. */
static void linger(omx_endpoint_t ep)
{
	uint64_t until = omx_now_ns() + LINGER_MAX_NS;
	for (;;) {
		omx__eplock(&ep->lock);
		int pending = !omx_list_empty(&ep->resend_list);
		omx__epunlock(&ep->lock);
		if (!pending || omx_now_ns() > until)
			return;
		omx_progress(ep);
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
}

/* ---- server ---- */

/* Serve one client. Returns 0 on success, -1 on a failure with this client. */
static int serve_one(omx_endpoint_t ep)
{
	uint8_t block[PARAM_LEN];
	struct perf_params p;
	omx_status_t st;
	omx_return_t r;
	omx_request_t req;
	uint64_t nic, largest;
	uint32_t peer_ep;
	char host[OMX_HOSTNAME_MAX] = "", mac[OMX_BOARD_ADDR_STRLEN];
	const char *bad;
	int ret = -1;

	r = do_recv(ep, block, sizeof(block), 0, 0, &st);
	if (r != OMX_SUCCESS) {
		errmsg("receiving the parameters failed: %s", omx_strerror(r));
		return -1;
	}
	omx_decompose_endpoint_addr(st.addr, &nic, &peer_ep);
	if (st.xfer_length != PARAM_LEN || st.match_info != PERF_MATCH) {
		errmsg("ignoring a %" PRIu32 "-byte message with match 0x%016" PRIx64 " from %s endpoint %" PRIu32
		       " (not a parameter block)",
		       st.xfer_length, st.match_info, nic_text(nic, mac), peer_ep);
		return -1;
	}
	params_decode(block, &p);
	if (omx_nic_id_to_hostname(nic, host) != OMX_SUCCESS || !host[0])
		snprintf(host, sizeof(host), "<unknown>");
	verbose("Got parameters from %s (%s) endpoint %" PRIu32 "\n", host, nic_text(nic, mac), peer_ep);
	print_params("Received", &p);
	bad = params_check(&p, &largest);
	if (bad) {
		errmsg("rejecting client %s endpoint %" PRIu32 ": %s", host, peer_ep, bad);
		return -1;
	}

	r = omx_iconnect(ep, nic, peer_ep, PERF_KEY, PERF_CONNECT_MATCH, PERF_CONNECT_CONTEXT, &req);
	if (r == OMX_SUCCESS)
		r = complete(ep, &req, &st);
	if (r != OMX_SUCCESS) {
		errmsg("connecting back to %s endpoint %" PRIu32 " failed: %s", host, peer_ep, omx_strerror(r));
		return -1;
	}
	if (st.context != PERF_CONNECT_CONTEXT || st.match_info != PERF_CONNECT_MATCH) {
		errmsg("connect completion carries unexpected context/match");
		return -1;
	}
	omx_endpoint_addr_t client = st.addr;
	verbose("Connected back to %s endpoint %" PRIu32 "\n", host, peer_ep);

	/* Replies leave from a buffer of their own, as the client's sends and MPI ping-pongs do:
	 * echoing the received buffer made the client's same-host single copy pull lines this
	 * process had just written from its cache (16 KiB: 2x slower on these VMs). */
	void *buf = alloc_buffer(largest, p.align), *sbuf = alloc_buffer(largest, p.align);
	if (!buf || !sbuf) {
		errmsg("cannot allocate two %" PRIu64 "-byte buffers for client %s", largest, host);
		free_buffer(buf, p.align);
		free_buffer(sbuf, p.align);
		return -1;
	}
	r = do_send(ep, NULL, 0, client, PERF_REPLY_MATCH, 1, &st);
	if (r != OMX_SUCCESS) {
		errmsg("answering the parameters of %s failed: %s", host, omx_strerror(r));
		goto out;
	}

	for (uint64_t len = p.min; len < p.max;) {
		uint64_t rounds = (uint64_t)p.iter + p.warmup;
		for (uint64_t i = 0; i < rounds; i++) {
			r = do_recv(ep, buf, (size_t)len, 0, 0, &st);
			if (r != OMX_SUCCESS) {
				errmsg("length %" PRIu64 " iteration %" PRIu64 ": receive failed: %s", len, i,
				       omx_strerror(r));
				goto out;
			}
			verbose("length %" PRIu64 " iteration %" PRIu64 ": received %" PRIu32 " bytes\n", len, i,
				st.xfer_length);
			if (p.touch && !p.unidir)
				touch_lines(sbuf, (size_t)len, i);
			r = do_send(ep, sbuf, p.unidir ? 0 : (size_t)len, client, PERF_MATCH, p.sync, &st);
			if (r != OMX_SUCCESS) {
				errmsg("length %" PRIu64 " iteration %" PRIu64 ": send failed: %s", len, i,
				       omx_strerror(r));
				goto out;
			}
			verbose("length %" PRIu64 " iteration %" PRIu64 ": replied\n", len, i);
		}
		if (next_length(&p, len, &len) < 0)
			break;
	}
	linger(ep);
	verbose("Done with client %s endpoint %" PRIu32 "\n", host, peer_ep);
	ret = 0;
out:
	free_buffer(buf, p.align);
	free_buffer(sbuf, p.align);
	return ret;
}

static int run_server(omx_endpoint_t ep)
{
	fprintf(out, "Starting receiver...\n");
	fflush(out);
	for (;;) {
		int r = serve_one(ep);
		if (!opt.slave)
			return r;
	}
}

/* ---- client ---- */

static int run_client(omx_endpoint_t ep, uint64_t dest_nic, FILE *csv)
{
	struct perf_params *p = &opt.p;
	uint8_t block[PARAM_LEN];
	omx_endpoint_addr_t server;
	omx_status_t st;
	omx_return_t r;
	uint64_t largest;
	params_check(p, &largest); /* validated in main */

	r = omx_connect(ep, dest_nic, opt.remote_endpoint, PERF_KEY, CONNECT_TIMEOUT_MS, &server);
	if (r != OMX_SUCCESS) {
		errmsg("cannot connect to '%s' endpoint %" PRIu32 ": %s", opt.dest, opt.remote_endpoint, omx_strerror(r));
		return -1;
	}
	fprintf(out, "Starting sender to '%s'...\n", opt.dest);
	fflush(out);
	print_params("Sending", p);

	void *sbuf = alloc_buffer(largest, p->align);
	void *rbuf = alloc_buffer(largest, p->align);
	if (!sbuf || !rbuf) {
		errmsg("cannot allocate two %" PRIu64 "-byte buffers", largest);
		free_buffer(sbuf, p->align);
		free_buffer(rbuf, p->align);
		return -1;
	}
	int ret = -1;
	params_encode(p, block);
	r = do_send(ep, block, sizeof(block), server, PERF_MATCH, 1, &st);
	if (r != OMX_SUCCESS) {
		errmsg("sending the parameters to '%s' failed: %s", opt.dest, omx_strerror(r));
		goto out;
	}
	r = do_recv(ep, NULL, 0, PERF_REPLY_MATCH, ~0ull, &st);
	if (r != OMX_SUCCESS) {
		errmsg("waiting for the server's answer failed: %s", omx_strerror(r));
		goto out;
	}
	verbose("Server answered, starting\n");
	if (csv) {
		fprintf(csv, "length,iterations,latency_us,bandwidth_MBps\n");
		fflush(csv);
	}

	int first = 1;
	for (uint64_t len = p->min; len < p->max;) {
		uint64_t rounds = (uint64_t)p->iter + p->warmup;
		double start = 0;
		if (!first && opt.pause_ms) {
			struct timespec ts = { opt.pause_ms / 1000, (long)(opt.pause_ms % 1000) * 1000000L };
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
		first = 0;
		if (p->warmup == 0)
			start = now_us();
		for (uint64_t i = 0; i < rounds; i++) {
			if (p->touch)
				touch_lines(sbuf, (size_t)len, i);
			r = do_send(ep, sbuf, (size_t)len, server, PERF_MATCH, p->sync, &st);
			if (r != OMX_SUCCESS) {
				errmsg("length %" PRIu64 " iteration %" PRIu64 ": send failed: %s", len, i,
				       omx_strerror(r));
				goto out;
			}
			verbose("length %" PRIu64 " iteration %" PRIu64 ": sent\n", len, i);
			r = do_recv(ep, rbuf, (size_t)len, 0, 0, &st);
			if (r != OMX_SUCCESS) {
				errmsg("length %" PRIu64 " iteration %" PRIu64 ": receive failed: %s", len, i,
				       omx_strerror(r));
				goto out;
			}
			verbose("length %" PRIu64 " iteration %" PRIu64 ": received %" PRIu32 " bytes\n", len, i,
				st.xfer_length);
			if (i + 1 == p->warmup)
				start = now_us();
		}
		double us = now_us() - start;
		if (us <= 0)
			us = 1e-3; /* clock granularity: keep the numbers finite */
		double dirs = p->unidir ? 1.0 : 2.0;
		double lat = us / dirs / p->iter;
		double bw = dirs * p->iter * (double)len / us;
		fprintf(out, "length % 9" PRId64 ":\t%.3f us\t%.2f MB/s\t %.2f MiB/s\n", (int64_t)len, lat, bw,
			bw / 1.048576);
		fflush(out);
		if (csv) {
			fprintf(csv, "%" PRIu64 ",%" PRIu32 ",%.3f,%.2f\n", len, p->iter, lat, bw);
			fflush(csv);
		}
		if (next_length(p, len, &len) < 0)
			break;
	}
	ret = 0;
out:
	free_buffer(sbuf, p->align);
	free_buffer(rbuf, p->align);
	return ret;
}

/* ---- main ---- */

int main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	omx_endpoint_t ep;
	omx_return_t r;
	FILE *csv = NULL;
	uint64_t dest_nic = 0;
	int c, client_only = 0;

	out = stdout;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":b:e:swyvd:r:aHAS:E:M:I:N:W:P:UYTc:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'b': opt.board = (uint32_t)parse_num('b', optarg, 255); break;
		case 'e':
			opt.endpoint = (uint32_t)parse_num('e', optarg, 255);
			opt.endpoint_set = 1;
			break;
		case 's': opt.slave = 1; break;
		case 'w': opt.wait = 1; break;
		case 'y': opt.yield = 1; break;
		case 'v': opt.verbose = 1; break;
		case 'd': opt.dest = optarg; break;
		case 'r': opt.remote_endpoint = (uint32_t)parse_num('r', optarg, 255); client_only = 'r'; break;
		case 'a': opt.p.align = 1; client_only = 'a'; break;
		case 'H': opt.p.align = 2; client_only = 'H'; break;
		case 'A': opt.p.align = 3; client_only = 'A'; break;
		case 'S': opt.p.min = parse_num('S', optarg, UINT64_MAX); client_only = 'S'; break;
		case 'E': opt.p.max = parse_num('E', optarg, UINT64_MAX); client_only = 'E'; break;
		case 'M': opt.p.multiplier = parse_num('M', optarg, UINT64_MAX); client_only = 'M'; break;
		case 'I': opt.p.increment = parse_num('I', optarg, UINT64_MAX); client_only = 'I'; break;
		case 'N': opt.p.iter = (uint32_t)parse_num('N', optarg, UINT32_MAX); client_only = 'N'; break;
		case 'W': opt.p.warmup = (uint32_t)parse_num('W', optarg, UINT32_MAX); client_only = 'W'; break;
		case 'P': opt.pause_ms = (uint32_t)parse_num('P', optarg, 3600000); client_only = 'P'; break;
		case 'U': opt.p.unidir = 1; client_only = 'U'; break;
		case 'Y': opt.p.sync = 1; client_only = 'Y'; break;
		case 'T': opt.p.touch = 1; client_only = 'T'; break;
		case 'c': opt.csv = optarg; client_only = 'c'; break;
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
	if (!opt.dest && client_only)
		die("option -%c is a client option (needs -d <hostname>)", client_only);
	if (opt.dest && opt.slave)
		die("option -s is a server option (not with -d)");
	if (opt.dest && opt.p.iter == 0)
		die("-N must be at least 1");
	if (opt.dest) {
		uint64_t largest;
		const char *bad = params_check(&opt.p, &largest);
		if (bad)
			die("%s", bad);
	}

	if (opt.csv) {
		if (!strcmp(opt.csv, "-")) {
			csv = stdout;
			out = stderr;
		} else {
			csv = fopen(opt.csv, "w");
			if (!csv)
				die("cannot open CSV file '%s': %s", opt.csv, strerror(errno));
		}
	}

	omx_set_error_handler(NULL, OMX_ERRORS_RETURN);
	r = omx_init();
	if (r != OMX_SUCCESS)
		die("failed to initialize the library: %s", omx_strerror(r));


	uint32_t ep_index = opt.dest && !opt.endpoint_set ? OMX_ANY_ENDPOINT : opt.endpoint;
	r = omx_open_endpoint(opt.board, ep_index, PERF_KEY, NULL, 0, &ep);
	if (r != OMX_SUCCESS) {
		uint64_t nic;
		if (r == OMX_BOARD_NOT_FOUND && omx_board_number_to_nic_id(opt.board, &nic) != OMX_SUCCESS)
			die("cannot open an endpoint on board %" PRIu32 ": %s (no such interface attached, see OMX_IFACES)",
			    opt.board, omx_strerror(r));
		if (r == OMX_BOARD_NOT_FOUND)
			die("cannot open an endpoint on board %" PRIu32 ": %s (interface MTU too small for the wire mode?)",
			    opt.board, omx_strerror(r));
		if (ep_index == OMX_ANY_ENDPOINT)
			die("cannot open any endpoint on board %" PRIu32 ": %s", opt.board, omx_strerror(r));
		die("cannot open endpoint %" PRIu32 " on board %" PRIu32 ": %s", ep_index, opt.board, omx_strerror(r));
	}
	/* After the open: with dynamic discovery, names arrive through the endpoint. */
	if (opt.dest) {
		char name[OMX_HOSTNAME_MAX];
		snprintf(name, sizeof(name), "%s", opt.dest);
		r = omx_hostname_to_nic_id(name, &dest_nic);
		if (r != OMX_SUCCESS)
			die("cannot find host '%s' in the peer table (%s)", opt.dest, omx_strerror(r));
	}
	char hostname[OMX_HOSTNAME_MAX] = "", ifname[OMX_HOSTNAME_MAX] = "";
	omx_get_info(ep, OMX_INFO_BOARD_HOSTNAME, NULL, 0, hostname, sizeof(hostname));
	omx_get_info(ep, OMX_INFO_BOARD_IFACENAME, NULL, 0, ifname, sizeof(ifname));
	if (ep_index == OMX_ANY_ENDPOINT)
		fprintf(out, "Successfully open any endpoint for hostname '%s' iface '%s'\n", hostname, ifname);
	else
		fprintf(out, "Successfully open endpoint %" PRIu32 " for hostname '%s' iface '%s'\n", ep_index, hostname,
			ifname);
	fflush(out);

	int ret = opt.dest ? run_client(ep, dest_nic, csv) : run_server(ep);

	omx_close_endpoint(ep);
	omx_finalize();
	if (csv && csv != stdout && fclose(csv) != 0) {
		errmsg("writing CSV file '%s' failed: %s", opt.csv, strerror(errno));
		ret = -1;
	}
	return ret == 0 ? 0 : 255;
}
