/*
 * tcp_pingpong.c - TCP (TCP_NODELAY) baseline for bench/run.sh.
 *   server: tcp_pingpong [-p port] [-w] <sizes>      client: tcp_pingpong -d <IPv4> [-p port] [-w] <sizes>
 * A 0-byte message is sent as 1 byte (TCP cannot carry an empty message), answers with -U too.
 * Busy mode: non-blocking send/recv spinning on EAGAIN; -w: blocking calls.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pp_common.h"

static int listen_fd = -1;

static int set_nodelay(int fd)
{
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		return -1;
	return pp_set_timeout(fd);
}

static int tcp_open(struct pp_conn *c, const struct pp_opts *o)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o->port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (o->dest) {
		if (inet_pton(AF_INET, o->dest, &sa.sin_addr) != 1)
			pp_die("bad IPv4 address '%s'", o->dest);
		int tries = 0;
		while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			if ((errno != ECONNREFUSED && errno != EINTR) || ++tries > 100)
				return -1;
			usleep(20000);
			close(fd);
			fd = socket(AF_INET, SOCK_STREAM, 0);
			if (fd < 0)
				return -1;
		}
		c->fd = fd;
		return set_nodelay(fd);
	}
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0)
		return -1;
	listen_fd = fd;
	return 0;
}

static int tcp_accept(struct pp_conn *c)
{
	int fd = accept(listen_fd, NULL, NULL);
	if (fd < 0)
		return -1;
	close(listen_fd);
	listen_fd = -1;
	c->fd = fd;
	return set_nodelay(fd);
}

static int tcp_send(struct pp_conn *c, const void *buf, size_t len)
{
	static const char one_byte = 0;
	const char *p = len ? buf : &one_byte;
	size_t left = len ? len : 1;
	while (left) {
		long n = pp_sendmsg(c, p, left, 0);
		if (n < 0)
			return -1;
		p += n;
		left -= (size_t)n;
	}
	return 0;
}

static int tcp_recv(struct pp_conn *c, void *buf, size_t len)
{
	char one_byte;
	char *p = len ? buf : &one_byte;
	size_t left = len ? len : 1;
	while (left) {
		long n = pp_recvmsg(c, p, left, 0);
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = ECONNRESET;
			return -1;
		}
		p += n;
		left -= (size_t)n;
	}
	return 0;
}

static void tcp_close(struct pp_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
}

int main(int argc, char **argv)
{
	static const struct pp_ops ops = { "tcp", tcp_open, tcp_accept, tcp_send, tcp_recv, tcp_close };
	return pp_main(argc, argv, &ops);
}
