/*
 * local.c - frames between endpoints of the same host. An AF_PACKET socket never sees frames
 * sent out of its own interface, so same-host partners cannot talk through the wire. Each endpoint
 * also binds a Unix datagram socket in the abstract namespace ("\0omx-<board mac>-<endpoint>"),
 * which belongs to the network namespace, i.e. to the host, and frames for a same-host endpoint
 * are sent there unchanged: the whole protocol (sequence numbers, acks, pulls) is reused.
 * A send to an endpoint that nobody has open fails at once (-ECONNREFUSED / -ENOENT), which
 * the core turns into the NACK a remote driver would have sent.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/net.h"
#include "wire/wire.h"

#define LOCAL_FRAME_MAX (65535 + 64)

struct omx_net_local {
	struct omx_net base;
	uint8_t buf[LOCAL_FRAME_MAX];
};

static socklen_t local_name(struct sockaddr_un *a, const uint8_t mac[6], uint8_t endpoint)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "omx-%02x%02x%02x%02x%02x%02x-%u", mac[0], mac[1],
			 mac[2], mac[3], mac[4], mac[5], endpoint);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int local_send(struct omx_net *n, const struct iovec *iov, unsigned iovcnt)
{
	const uint8_t *frame = iov[0].iov_base;
	size_t first = iov[0].iov_len;
	if (first < OMX_HEAD_LEN + 1)
		return -EINVAL;
	int ep = omx_wire_frame_endpoint(frame, first);
	if (ep < 0)
		return 0; /* host queries etc. are for the wire only */
	struct sockaddr_un a;
	struct msghdr msg;
	memset(&msg, 0, sizeof(msg));
	msg.msg_name = &a;
	msg.msg_namelen = local_name(&a, frame, (uint8_t)ep);
	msg.msg_iov = (struct iovec *)iov;
	msg.msg_iovlen = iovcnt;
	/* The receiver's queue holds net.unix.max_dgram_qlen datagrams (10 by default): when it is
	 * full, give its owner a moment to drain it rather than losing the frame at once (bounded,
	 * so two endpoints sending to each other never wait on each other for long). */
	uint64_t give_up = 0;
	for (;;) {
		ssize_t r = sendmsg(n->fd, &msg, MSG_DONTWAIT);
		if (r >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		uint64_t now = omx_now_ns();
		if (!give_up)
			give_up = now + 1000000;
		else if (now >= give_up)
			return -EAGAIN;
		sched_yield();
	}
}

static int local_recv_burst(struct omx_net *n, omx_net_rx_fn fn, void *arg, unsigned max)
{
	struct omx_net_local *l = (struct omx_net_local *)n;
	int count = 0;
	while ((unsigned)count < max) {
		ssize_t r = recv(n->fd, l->buf, sizeof(l->buf), MSG_DONTWAIT);
		if (r < 0)
			break;
		fn(arg, l->buf, (size_t)r);
		count++;
	}
	return count;
}

static void local_close(struct omx_net *n)
{
	close(n->fd);
	free(n);
}

static const struct omx_net_ops local_ops = {
	.send = local_send,
	.recv_burst = local_recv_burst,
	.next_deadline = NULL,
	.close = local_close,
};

struct omx_net *omx_net_local_open(const uint8_t mac[6], uint32_t mtu, uint8_t endpoint, int *err)
{
	struct omx_net_local *l = calloc(1, sizeof(*l));
	if (!l) {
		*err = -ENOMEM;
		return NULL;
	}
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_un a;
	socklen_t alen = local_name(&a, mac, endpoint);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, alen) < 0) {
		*err = -errno;
		if (fd >= 0)
			close(fd);
		free(l);
		return NULL;
	}
	/* Room for a window of frames; beyond the limit root may force it. */
	int sz = 16 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	l->base.ops = &local_ops;
	l->base.fd = fd;
	memcpy(l->base.mac, mac, 6);
	l->base.mtu = mtu;
	return &l->base;
}
