/*
 * omx_brokerprobe - what an unprivileged process can and cannot do with omxd (test_broker.sh).
 *   direct IFACE                 socket(AF_PACKET) must fail with EPERM: we really lack the
 *                                capability; prints "direct: refused"
 *   steal BROKER IFACE EP        ask for endpoint EP without holding its slot lock: must be
 *                                refused; prints "steal: refused <errno name>"
 *   own BROKER IFACE EP LOCKDIR SECONDS
 *                                lock EP's slot, get its socket from the broker, check that the
 *                                filter can be neither replaced nor removed, then count frames
 *                                for SECONDS: prints "own <n> other <m>" (m frames meant for
 *                                another endpoint), exit 0 iff the filter held and m == 0 < n
 *   send IFACE DSTMAC EP1 EP2 N  (root) N TINY frames to each of EP1 and EP2 at DSTMAC, paced
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/broker.h"
#include "net/net.h"
#include "wire/wire.h"

static int parse_mac(const char *s, uint8_t m[6])
{
	unsigned v[6];
	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		m[i] = (uint8_t)v[i];
	return 0;
}

static int do_direct(const char *ifname)
{
	int err = 0;
	struct omx_net_opts o = { 0 };
	struct omx_net *n = omx_net_packet_open(ifname, 1, &o, &err);
	if (n) {
		n->ops->close(n);
		printf("direct: granted (we are privileged)\n");
		return 1;
	}
	printf("direct: refused %s\n", strerror(-err));
	return err == -EPERM || err == -EACCES ? 0 : 1;
}

static int do_steal(const char *broker, const char *ifname, int ep)
{
	struct omx_net_opts o = { 0 };
	struct tpacket_req req;
	struct omx_iface_info info;
	int conn;
	if (omx_iface_query(ifname, &info) < 0)
		return 2;
	omx_net_packet_ring_req(info.mtu, 0, &req);
	int s = omx_net_broker_request(broker, ifname, (uint8_t)ep, &o, &req, &conn);
	if (s >= 0) {
		printf("steal: granted\n");
		return 1;
	}
	printf("steal: refused %s\n", strerror(-s));
	return s == -EACCES ? 0 : 1;
}

struct frame_count {
	unsigned long own, other;
	int ep;
};

static void count_frame(void *arg, const uint8_t *f, size_t len)
{
	struct frame_count *c = arg;
	int e = omx_wire_frame_endpoint(f, len);
	if (e == c->ep)
		c->own++;
	else if (e >= 0)
		c->other++;
}

static int do_own(const char *broker, const char *ifname, int ep, const char *lockdir, int seconds)
{
	struct omx_iface_info info;
	char path[512];
	if (omx_iface_query(ifname, &info) < 0)
		return 2;
	const uint8_t *m = info.mac;
	snprintf(path, sizeof(path), "%s/omx-%02x%02x%02x%02x%02x%02x-%d.lock", lockdir, m[0], m[1], m[2], m[3], m[4], m[5],
		 ep);
	int lfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB) < 0) {
		printf("own: cannot lock %s: %s\n", path, strerror(errno));
		return 2;
	}
	struct omx_net_opts o = { 0 };
	o.broker_path = broker;
	o.broker_always = 1;
	int err = 0;
	struct omx_net *n = omx_net_packet_open(ifname, (uint8_t)ep, &o, &err);
	if (!n) {
		printf("own: broker refused: %s\n", strerror(-err));
		return 1;
	}
	/* An accept-everything program must not replace the locked one, nor may it be detached. */
	struct sock_filter all[] = { BPF_STMT(BPF_RET | BPF_K, 0xFFFFFFFFu) };
	struct sock_fprog prog = { .len = 1, .filter = all };
	int attach = setsockopt(n->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
	int attach_errno = errno;
	int dummy = 0;
	int detach = setsockopt(n->fd, SOL_SOCKET, SO_DETACH_FILTER, &dummy, sizeof(dummy));
	int detach_errno = errno;
	int filter_held = attach < 0 && detach < 0;
	printf("own: replace filter %s, detach filter %s\n", attach < 0 ? strerror(attach_errno) : "ALLOWED",
	       detach < 0 ? strerror(detach_errno) : "ALLOWED");
	struct frame_count c = { 0, 0, ep };
	time_t end = time(NULL) + seconds;
	while (time(NULL) < end)
		if (!n->ops->recv_burst(n, count_frame, &c, 64))
			usleep(1000);
	n->ops->close(n);
	printf("own %lu other %lu\n", c.own, c.other);
	return filter_held && c.own > 0 && c.other == 0 ? 0 : 1;
}

static int do_send(const char *ifname, const char *dstmac, int ep1, int ep2, int n)
{
	uint8_t dst[6];
	if (parse_mac(dstmac, dst) < 0)
		return 2;
	int err = 0;
	struct omx_net_opts o = { 0 };
	o.all_endpoints = 1;
	struct omx_net *net = omx_net_packet_open(ifname, 255, &o, &err);
	if (!net) {
		fprintf(stderr, "send: %s: %s\n", ifname, strerror(-err));
		return 1;
	}
	struct omx_wire_params wp;
	omx_wire_params_init(&wp, OMX_WIRE_EXTENDED, net->mtu > 65535 ? 65535 : net->mtu);
	int sent = 0;
	for (int i = 0; i < 2 * n; i++) {
		struct omx_pkt p;
		uint8_t f[128];
		memset(&p, 0, sizeof(p));
		memcpy(p.dst_mac, dst, 6);
		memcpy(p.src_mac, net->mac, 6);
		p.ptype = OMX_PT_TINY;
		p.u.msg.dst_endpoint = (uint8_t)(i % 2 ? ep2 : ep1);
		p.u.msg.match = (uint64_t)i;
		size_t len = omx_wire_encode(&wp, &p, f, sizeof(f));
		struct iovec iov = { f, len };
		if (len && net->ops->send(net, &iov, 1) == 0)
			sent++;
		usleep(500);
	}
	net->ops->close(net);
	printf("sent %d\n", sent);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "direct"))
		return do_direct(argv[2]);
	if (argc >= 5 && !strcmp(argv[1], "steal"))
		return do_steal(argv[2], argv[3], atoi(argv[4]));
	if (argc >= 7 && !strcmp(argv[1], "own"))
		return do_own(argv[2], argv[3], atoi(argv[4]), argv[5], atoi(argv[6]));
	if (argc >= 7 && !strcmp(argv[1], "send"))
		return do_send(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
	fprintf(stderr, "usage: omx_brokerprobe direct|steal|own|send ...\n");
	return 2;
}
