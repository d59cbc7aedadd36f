/*
 * broker.c - the client side of the omxd protocol (net/broker.h): used by omx_net_packet_open
 * when this process may not open packet sockets itself.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/broker.h"
#include "net/net.h"

/* A reply must come within this time: the broker does nothing slow per request. */
#define BROKER_REPLY_TIMEOUT_MS 5000

static _Thread_local char last_refusal[128];

const char *omx_net_broker_last_refusal(void)
{
	return last_refusal;
}

void omx_net_broker_forget_refusal(void)
{
	last_refusal[0] = 0;
}

static int broker_connect(const char *path)
{
	struct sockaddr_un a;
	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	strcpy(a.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno == ECONNREFUSED ? ENOENT : errno; /* a stale socket file: no broker */
		close(fd);
		return -e;
	}
	return fd;
}

/* One reply, with the socket as ancillary data when status is 0. */
static int broker_read_reply(int conn, struct omx_broker_reply *rep, int *sock)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = {.iov_base = rep, .iov_len = sizeof(*rep)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
	struct pollfd pfd = {.fd = conn, .events = POLLIN};
	*sock = -1;
	int pr = poll(&pfd, 1, BROKER_REPLY_TIMEOUT_MS);
	if (pr <= 0)
		return pr == 0 ? -ETIMEDOUT : -errno;
	ssize_t n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(sock, CMSG_DATA(c), sizeof(int));
	if ((size_t)n != sizeof(*rep) || rep->magic != OMX_BROKER_MAGIC) {
		if (*sock >= 0)
			close(*sock);
		*sock = -1;
		return -EPROTO;
	}
	rep->message[sizeof(rep->message) - 1] = 0;
	if (rep->status == 0 && *sock < 0)
		return -EPROTO;
	if (rep->status != 0 && *sock >= 0) {
		close(*sock);
		*sock = -1;
	}
	return rep->status;
}

int omx_net_broker_request(const char *broker_path, const char *ifname, uint8_t endpoint,
			   const struct omx_net_opts *opts, const struct tpacket_req *req, int *conn)
{
	struct omx_broker_request rq;
	struct omx_broker_reply rep;
	int sock, ret;

	*conn = -1;
	if (strlen(ifname) >= sizeof(rq.ifname))
		return -ENODEV;
	int fd = broker_connect(broker_path);
	if (fd < 0)
		return fd;
	memset(&rq, 0, sizeof(rq));
	rq.magic = OMX_BROKER_MAGIC;
	rq.version = OMX_BROKER_VERSION;
	strcpy(rq.ifname, ifname);
	rq.endpoint = endpoint;
	rq.flags = (opts->qdisc_bypass ? OMX_BROKER_F_QDISC_BYPASS : 0) |
		   (opts->all_endpoints ? OMX_BROKER_F_ALL_ENDPOINTS : 0) |
		   (opts->nack_responder ? OMX_BROKER_F_NACK_RESPONDER : 0);
	rq.ring = *req;
	if (send(fd, &rq, sizeof(rq), MSG_NOSIGNAL) != (ssize_t)sizeof(rq)) {
		ret = -errno;
		close(fd);
		return ret ? ret : -EIO;
	}
	memset(&rep, 0, sizeof(rep));
	ret = broker_read_reply(fd, &rep, &sock);
	if (ret < 0) {
		if (rep.magic == OMX_BROKER_MAGIC && rep.message[0])
			snprintf(last_refusal, sizeof(last_refusal), "%s", rep.message);
		else
			snprintf(last_refusal, sizeof(last_refusal), "%s", strerror(-ret));
		close(fd);
		return ret;
	}
	*conn = fd;
	return sock;
}
