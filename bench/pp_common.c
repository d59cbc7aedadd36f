/* pp_common.c - shared driver of the baseline ping-pong programs; see pp_common.h. */
#include "pp_common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *prog_name = "pingpong";

void pp_die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(255);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

long pp_recvmsg(struct pp_conn *c, void *p, size_t len, int is_msghdr)
{
	int flags = c->blocking ? 0 : MSG_DONTWAIT;
	double deadline = 0;
	unsigned spins = 0;
	for (;;) {
		long n = is_msghdr ? (long)recvmsg(c->fd, p, flags) : (long)recv(c->fd, p, len, flags);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (c->blocking) { /* SO_RCVTIMEO expired */
			errno = ETIMEDOUT;
			return -1;
		}
		if ((++spins & 0xffff) == 0) {
			double t = now_us();
			if (deadline == 0) {
				deadline = t + PP_TIMEOUT_S * 1e6;
			} else if (t > deadline) {
				errno = ETIMEDOUT;
				return -1;
			}
		}
	}
}

long pp_sendmsg(struct pp_conn *c, const void *p, size_t len, int is_msghdr)
{
	int flags = c->blocking ? 0 : MSG_DONTWAIT;
	for (;;) {
		long n = is_msghdr ? (long)sendmsg(c->fd, p, flags) : (long)send(c->fd, p, len, flags);
		if (n >= 0)
			return n;
		if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
			continue;
		return -1;
	}
}

int pp_set_timeout(int fd)
{
	struct timeval tv = { PP_TIMEOUT_S, 0 };
	return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static uint64_t parse_u64(char opt, const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		pp_die("bad value '%s' for -%c", s, opt);
	return (uint64_t)v;
}

static int next_length(const struct pp_opts *o, uint64_t len, uint64_t *next)
{
	uint64_t n;
	if (len == 0)
		n = o->incr ? o->incr : 1;
	else
		n = len * o->mult + o->incr;
	if (n <= len)
		return -1;
	*next = n;
	return 0;
}

static void usage(const struct pp_ops *ops)
{
	fprintf(stderr,
		"usage: %s_pingpong [-d dest] [-i iface] [-p port] [-S start] [-E end] [-M mult] [-I incr]\n"
		"       [-N iters] [-W warmup] [-P pause_ms] [-U] [-w] [-c file.csv]\n"
		"  server without -d (same -S -E -M -I -N -W -U as the client); -w: blocking receives\n",
		ops->name);
}

static void pause_ms(uint32_t ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int pp_main(int argc, char **argv, const struct pp_ops *ops)
{
	struct pp_opts o = { .port = 52010, .start = 0, .end = 4194305, .mult = 2, .incr = 0,
			     .iters = 1000, .warmup = 10, .pause_ms = 0 };
	static char name[64];
	snprintf(name, sizeof(name), "%s_pingpong", ops->name);
	prog_name = name;
	int ch;
	while ((ch = getopt(argc, argv, "d:i:p:S:E:M:I:N:W:P:Uwc:h")) != -1) {
		switch (ch) {
		case 'd': o.dest = optarg; break;
		case 'i': o.iface = optarg; break;
		case 'p': o.port = (int)parse_u64('p', optarg); break;
		case 'S': o.start = parse_u64('S', optarg); break;
		case 'E': o.end = parse_u64('E', optarg); break;
		case 'M': o.mult = parse_u64('M', optarg); break;
		case 'I': o.incr = parse_u64('I', optarg); break;
		case 'N': o.iters = (uint32_t)parse_u64('N', optarg); break;
		case 'W': o.warmup = (uint32_t)parse_u64('W', optarg); break;
		case 'P': o.pause_ms = (uint32_t)parse_u64('P', optarg); break;
		case 'U': o.unidir = 1; break;
		case 'w': o.blocking = 1; break;
		case 'c': o.csv = optarg; break;
		case 'h': usage(ops); return 0;
		default: usage(ops); return 255;
		}
	}
	if (optind != argc || o.iters == 0 || o.start >= o.end || (o.mult < 2 && o.incr == 0))
		pp_die("bad arguments (-h for help)");
	o.largest = 1;
	for (uint64_t l = o.start; l < o.end;) {
		if (l > o.largest)
			o.largest = l;
		if (next_length(&o, l, &l) < 0)
			break;
	}
	char *sbuf = malloc(o.largest), *rbuf = malloc(o.largest);
	if (!sbuf || !rbuf)
		pp_die("cannot allocate two %" PRIu64 "-byte buffers", o.largest);
	memset(sbuf, 0x5a, o.largest);
	memset(rbuf, 0, o.largest);

	struct pp_conn c = { .fd = -1, .blocking = o.blocking, .opts = &o };
	if (ops->open(&c, &o) < 0)
		pp_die("cannot set up: %s", strerror(errno));
	if (!o.dest) {
		printf("Starting receiver...\n");
		fflush(stdout);
		if (ops->accept && ops->accept(&c) < 0)
			pp_die("accept: %s", strerror(errno));
		for (uint64_t len = o.start; len < o.end;) {
			uint64_t rounds = (uint64_t)o.iters + o.warmup;
			for (uint64_t i = 0; i < rounds; i++) {
				if (ops->recv_msg(&c, rbuf, (size_t)len) < 0)
					pp_die("length %" PRIu64 " round %" PRIu64 ": receive: %s", len, i, strerror(errno));
				if (ops->send_msg(&c, rbuf, o.unidir ? 0 : (size_t)len) < 0)
					pp_die("length %" PRIu64 " round %" PRIu64 ": send: %s", len, i, strerror(errno));
			}
			if (next_length(&o, len, &len) < 0)
				break;
		}
		ops->close(&c);
		free(sbuf);
		free(rbuf);
		return 0;
	}

	FILE *csv = NULL;
	if (o.csv) {
		csv = fopen(o.csv, "w");
		if (!csv)
			pp_die("cannot open %s: %s", o.csv, strerror(errno));
		fprintf(csv, "length,iterations,latency_us,bandwidth_MBps\n");
	}
	printf("Starting sender to '%s'...\n", o.dest);
	fflush(stdout);
	int first = 1;
	for (uint64_t len = o.start; len < o.end;) {
		uint64_t rounds = (uint64_t)o.iters + o.warmup;
		if (!first && o.pause_ms)
			pause_ms(o.pause_ms);
		first = 0;
		double start = now_us();
		for (uint64_t i = 0; i < rounds; i++) {
			if (ops->send_msg(&c, sbuf, (size_t)len) < 0)
				pp_die("length %" PRIu64 " round %" PRIu64 ": send: %s", len, i, strerror(errno));
			if (ops->recv_msg(&c, rbuf, o.unidir ? 0 : (size_t)len) < 0)
				pp_die("length %" PRIu64 " round %" PRIu64 ": receive: %s", len, i, strerror(errno));
			if (i + 1 == o.warmup)
				start = now_us();
		}
		double us = now_us() - start;
		if (us <= 0)
			us = 1e-3;
		double dirs = o.unidir ? 1.0 : 2.0;
		double lat = us / dirs / o.iters;
		double bw = dirs * o.iters * (double)len / us;
		printf("length % 9" PRId64 ":\t%.3f us\t%.2f MB/s\t %.2f MiB/s\n", (int64_t)len, lat, bw, bw / 1.048576);
		fflush(stdout);
		if (csv) {
			fprintf(csv, "%" PRIu64 ",%" PRIu32 ",%.3f,%.2f\n", len, o.iters, lat, bw);
			fflush(csv);
		}
		if (next_length(&o, len, &len) < 0)
			break;
	}
	if (csv && fclose(csv) != 0)
		pp_die("writing %s failed", o.csv);
	ops->close(&c);
	free(sbuf);
	free(rbuf);
	return 0;
}

int pp_parse_mac(const char *s, unsigned char mac[6])
{
	unsigned int b[6];
	char extra;
	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &extra) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (b[i] > 255)
			return -1;
		mac[i] = (unsigned char)b[i];
	}
	return 0;
}
