/*
 * pp_common.h - shared driver of the baseline ping-pong programs (bench/): options, timing,
 * output and the busy-poll / blocking receive helpers. Each transport provides struct pp_ops.
 *
 * Protocol (both sides get the same -S -E -M -I -N -W -U options; no parameter exchange):
 * for each length L from -S (then L*M+I, or I|1 after 0) while L < -E, iters+warmup rounds of
 * "client sends L bytes, server receives them and answers L bytes (0 bytes with -U)".
 * The client times the rounds after the warmup, like omx_perf, and prints the same lines.
 */
#ifndef OMX_BENCH_PP_COMMON_H
#define OMX_BENCH_PP_COMMON_H

#include <stddef.h>
#include <stdint.h>

struct pp_opts {
	const char *dest;  /* client: server address (IPv4 or MAC); NULL on the server */
	const char *iface; /* raw: interface name */
	int port;          /* tcp/udp: port */
	uint64_t start, end, mult, incr;
	uint32_t iters, warmup, pause_ms;
	int unidir;   /* -U: answers are empty */
	int blocking; /* -w: sleep in the kernel instead of spinning */
	const char *csv;
	uint64_t largest;
};

struct pp_conn {
	int fd;
	int blocking;
	const struct pp_opts *opts;
	void *priv;
};

struct pp_ops {
	const char *name;
	/* Set up c->fd (server: ready to receive when it returns, or accepting). */
	int (*open)(struct pp_conn *c, const struct pp_opts *o);
	/* Server only, optional: wait for the client (TCP accept). */
	int (*accept)(struct pp_conn *c);
	int (*send_msg)(struct pp_conn *c, const void *buf, size_t len);
	int (*recv_msg)(struct pp_conn *c, void *buf, size_t len);
	void (*close)(struct pp_conn *c);
};

int pp_main(int argc, char **argv, const struct pp_ops *ops);

/* recv()/recvmsg() that spins with MSG_DONTWAIT in busy mode, and gives up (errno ETIMEDOUT)
 * after PP_TIMEOUT_S without data in either mode. Returns what the call returned. */
#define PP_TIMEOUT_S 10
long pp_recvmsg(struct pp_conn *c, void *msg_or_buf, size_t len, int is_msghdr);
/* send()/sendmsg() that spins on EAGAIN in busy mode. */
long pp_sendmsg(struct pp_conn *c, const void *msg_or_buf, size_t len, int is_msghdr);
/* SO_RCVTIMEO = PP_TIMEOUT_S on fd (blocking receives give up instead of hanging). */
int pp_set_timeout(int fd);
/* "aa:bb:cc:dd:ee:ff" into mac: 0, or -1 if it is not a MAC address (raw and xdp clients). */
int pp_parse_mac(const char *s, unsigned char mac[6]);
void pp_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
