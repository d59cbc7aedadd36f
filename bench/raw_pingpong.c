/*
 * raw_pingpong.c - raw AF_PACKET baseline (the floor) for bench/run.sh.
 *   server: raw_pingpong -i <iface> [-w] <sizes>     client: raw_pingpong -i <iface> -d <peer MAC> [-w] <sizes>
 * SOCK_RAW packet socket bound to the interface and the private EtherType 0x88B5, with
 * PACKET_QDISC_BYPASS, plain send/recv system calls (no ring). Each frame is the Ethernet header,
 * a 4-byte big-endian payload length, then up to MTU-4 payload bytes; a message of L bytes is
 * ceil(L / (MTU-4)) frames (one empty frame for L = 0), scattered straight into the user buffer
 * (recvmsg with two iovecs). No retransmission: a lost frame ends the run (receive timeout).
 * The server learns the client's MAC from its first frame. Busy mode: MSG_DONTWAIT spinning;
 * -w: blocking receives.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pp_common.h"

#define RAW_ETHERTYPE 0x88B5
#define RAW_HDR 18 /* 14 Ethernet + 4 length */
#define RAW_BUF (32 << 20)
#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

static unsigned char send_hdr[RAW_HDR];
static int have_peer;
static size_t max_payload;

static int raw_open(struct pp_conn *c, const struct pp_opts *o)
{
	if (!o->iface)
		pp_die("-i <iface> is required");
	int fd = socket(AF_PACKET, SOCK_RAW, htons(RAW_ETHERTYPE));
	if (fd < 0)
		return -1;
	c->fd = fd;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", o->iface);
	if (ioctl(fd, SIOCGIFMTU, &ifr) < 0)
		return -1;
	if (ifr.ifr_mtu <= 4)
		pp_die("MTU %d too small", ifr.ifr_mtu);
	max_payload = (size_t)ifr.ifr_mtu - 4;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		return -1;
	memcpy(send_hdr + 6, ifr.ifr_hwaddr.sa_data, 6);
	send_hdr[12] = RAW_ETHERTYPE >> 8;
	send_hdr[13] = RAW_ETHERTYPE & 0xff;
	if (o->dest) {
		if (pp_parse_mac(o->dest, send_hdr) < 0)
			pp_die("bad MAC address '%s'", o->dest);
		have_peer = 1;
	}
	int one = 1, sz = RAW_BUF;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	if (pp_set_timeout(fd) < 0)
		return -1;
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(RAW_ETHERTYPE),
				   .sll_ifindex = (int)if_nametoindex(o->iface) };
	if (sll.sll_ifindex == 0)
		return -1;
	return bind(fd, (struct sockaddr *)&sll, sizeof(sll));
}

static int raw_send(struct pp_conn *c, const void *buf, size_t len)
{
	size_t off = 0;
	if (!have_peer) {
		errno = ENOTCONN;
		return -1;
	}
	do {
		size_t n = len - off > max_payload ? max_payload : len - off;
		uint32_t be = htonl((uint32_t)n);
		memcpy(send_hdr + 14, &be, 4);
		struct iovec iov[2] = { { send_hdr, RAW_HDR }, { (char *)buf + off, n } };
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
		if (pp_sendmsg(c, &mh, 0, 1) < 0)
			return -1;
		off += n;
	} while (off < len);
	return 0;
}

static int raw_recv(struct pp_conn *c, void *buf, size_t len)
{
	size_t off = 0;
	do {
		unsigned char hdr[RAW_HDR];
		struct iovec iov[2] = { { hdr, RAW_HDR }, { (char *)buf + off, len - off } };
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
		long n = pp_recvmsg(c, &mh, 0, 1);
		if (n < 0)
			return -1;
		if (n < RAW_HDR || (mh.msg_flags & MSG_TRUNC))
			continue; /* not one of ours (or a stray): ignore */
		uint32_t be;
		memcpy(&be, hdr + 14, 4);
		if (ntohl(be) != (uint32_t)(n - RAW_HDR))
			continue;
		if (!have_peer) {
			memcpy(send_hdr, hdr + 6, 6);
			have_peer = 1;
		}
		off += (size_t)(n - RAW_HDR);
	} while (off < len);
	return 0;
}

static void raw_close(struct pp_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
}

int main(int argc, char **argv)
{
	static const struct pp_ops ops = { "raw", raw_open, NULL, raw_send, raw_recv, raw_close };
	return pp_main(argc, argv, &ops);
}
