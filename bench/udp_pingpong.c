/*
 * udp_pingpong.c - UDP baseline for bench/run.sh.
 *   server: udp_pingpong [-p port] [-w] <sizes>      client: udp_pingpong -d <IPv4> [-p port] [-w] <sizes>
 * A message of L bytes goes as ceil(L / 65000) datagrams (one empty datagram for L = 0); no
 * retransmission: a lost datagram ends the run (receive timeout). The server learns the
 * client's address from its first datagram. Busy mode: MSG_DONTWAIT spinning; -w: blocking.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pp_common.h"

#define UDP_CHUNK 65000
#define UDP_BUF (32 << 20)

static int udp_open(struct pp_conn *c, const struct pp_opts *o)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o->port) };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		return -1;
	c->fd = fd;
	int sz = UDP_BUF;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	if (pp_set_timeout(fd) < 0)
		return -1;
	if (o->dest) {
		if (inet_pton(AF_INET, o->dest, &sa.sin_addr) != 1)
			pp_die("bad IPv4 address '%s'", o->dest);
		return connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	}
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	return bind(fd, (struct sockaddr *)&sa, sizeof(sa));
}

static int udp_send(struct pp_conn *c, const void *buf, size_t len)
{
	const char *p = buf;
	size_t off = 0;
	do {
		size_t n = len - off > UDP_CHUNK ? UDP_CHUNK : len - off;
		if (pp_sendmsg(c, p + off, n, 0) < 0)
			return -1;
		off += n;
	} while (off < len);
	return 0;
}

static int udp_recv(struct pp_conn *c, void *buf, size_t len)
{
	static int connected;
	char *p = buf;
	size_t off = 0;
	do {
		struct sockaddr_in from;
		struct iovec iov = { p + off, len - off };
		struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov,
				     .msg_iovlen = 1 };
		long n = pp_recvmsg(c, &mh, 0, 1);
		if (n < 0)
			return -1;
		if (mh.msg_flags & MSG_TRUNC) {
			errno = EMSGSIZE;
			return -1;
		}
		if (!connected && !c->opts->dest) {
			if (connect(c->fd, (struct sockaddr *)&from, sizeof(from)) < 0)
				return -1;
			connected = 1;
		}
		off += (size_t)n;
	} while (off < len);
	return 0;
}

static void udp_close(struct pp_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
}

int main(int argc, char **argv)
{
	static const struct pp_ops ops = { "udp", udp_open, NULL, udp_send, udp_recv, udp_close };
	return pp_main(argc, argv, &ops);
}
