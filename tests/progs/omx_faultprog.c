/*
 * omx_faultprog.c - a peer for failure and bad-input tests, over the native API:
 *
 *   serve [-e ep] [-t secs] [-k key]  open an endpoint, receive everything for secs (or until
 *                                     SIGTERM), print "served N" and the non-zero counters
 *   idle [-e ep] [-t secs]            open an endpoint, post no receive, stay secs (or until SIGTERM):
 *                                     the library acks what arrives (its progress thread), nothing
 *                                     is matched, so large senders wait for NOTIFYs
 *   connect HOST EP [-k key] [-t ms]  omx_connect; prints "connect: <omx_strerror text>"
 *   sendloop HOST EP [-n N] [-i ms]   connect, then N sends of 64 B / 4 KiB / 100 KiB in turn, one
 *                                     at a time; prints "status <i> <text>" whenever the status
 *                                     changes, and "done"; -r: reconnect after a failure
 *   exchange EP HOST PEER_EP LEN N [both|send|recv|recvlate]
 *                                     open endpoint EP, connect to HOST:PEER_EP, then N rounds in
 *                                     which both sides send LEN bytes to each other at once
 *                                     (receive posted, send, poll both to completion), or one side
 *                                     sends and the other receives (recvlate: receives only after
 *                                     staying out of the library for 1 s, so that the sender fills
 *                                     its window and waits); each round's bytes differ, written into
 *                                     the send buffer as soon as the last send completed (a resend
 *                                     read after its completion would deliver the next round's);
 *                                     checks the data; prints
 *                                     "exchanged N", or "stalled in round I" after 30 s
 *   gather EP LEN N SENDERS SECS      open endpoint EP, stay out of the library for SECS s (its
 *                                     progress thread queues or refuses what arrives), then
 *                                     receive N messages of LEN from each of SENDERS `exchange ...
 *                                     send` peers and their end messages; checks the data; prints
 *                                     "gathered N from each of SENDERS", or "stalled after I"
 *   floodsend HOST EP N LEN CONNECTED [live] / stallrecv LEN CONNECTED GO
 *                                     a same-host sender filling a stalled receiver's ring
 *                                     (see the functions)
 *   inject IFACE DSTMAC [-n N] [-s seed]
 *                                     send N hostile frames (random bytes, truncated and mangled
 *                                     valid frames, unknown types, bad lengths, wrong sessions,
 *                                     bad peer indexes) to DSTMAC endpoint 0; prints "injected N"
 * Configuration from the environment (OMX_IFACES, OMX_PEERS, OMX_HOSTNAME), as every program.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "open-mx.h"
#include "net/net.h"
#include "wire/wire.h"

static volatile sig_atomic_t stop;
static void on_term(int s)
{
	(void)s;
	stop = 1;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static omx_endpoint_t open_ep(uint32_t index, uint32_t key)
{
	omx_endpoint_t ep;
	omx_set_error_handler(NULL, OMX_ERRORS_RETURN);
	omx_return_t r = omx_init();
	if (r == OMX_SUCCESS)
		r = omx_open_endpoint(0, index, key, NULL, 0, &ep);
	if (r != OMX_SUCCESS) {
		fprintf(stderr, "open: %s\n", omx_strerror(r));
		exit(1);
	}
	omx_set_error_handler(ep, OMX_ERRORS_RETURN);
	return ep;
}

static void print_counters(omx_endpoint_t ep)
{
	uint32_t vals[128], n = 0;
	omx_get_info(NULL, OMX_INFO_COUNTER_MAX, NULL, 0, &n, sizeof(n));
	if (omx_get_info(ep, OMX_INFO_COUNTER_VALUES, NULL, 0, vals, sizeof(vals)) != OMX_SUCCESS)
		return;
	for (uint8_t i = 0; i < n; i++) {
		char label[128];
		if (vals[i] && omx_get_info(NULL, OMX_INFO_COUNTER_LABEL, &i, 1, label, sizeof(label)) == OMX_SUCCESS)
			printf("counter %s = %u\n", label, vals[i]);
	}
}

static int serve(int argc, char **argv)
{
	uint32_t index = 0, key = 0x5EED;
	int secs = 30, c;
	while ((c = getopt(argc, argv, "e:t:k:")) != -1) {
		if (c == 'e')
			index = (uint32_t)atoi(optarg);
		else if (c == 't')
			secs = atoi(optarg);
		else if (c == 'k')
			key = (uint32_t)strtoul(optarg, NULL, 0);
	}
	signal(SIGTERM, on_term);
	omx_endpoint_t ep = open_ep(index, key);
	printf("ready\n");
	fflush(stdout);
	static uint8_t buf[1 << 20];
	omx_request_t r = NULL;
	uint64_t served = 0;
	time_t end = time(NULL) + secs;
	while (!stop && time(NULL) < end) {
		omx_status_t st;
		uint32_t res = 0;
		if (!r)
			omx_irecv(ep, buf, sizeof(buf), 0, 0, NULL, &r);
		omx_wait(ep, &r, &st, &res, 100);
		if (res)
			served++;
	}
	printf("served %llu\n", (unsigned long long)served);
	print_counters(ep);
	fflush(stdout);
	omx_close_endpoint(ep);
	return 0;
}

static int idle(int argc, char **argv)
{
	uint32_t index = 0;
	int secs = 30, c;
	while ((c = getopt(argc, argv, "e:t:")) != -1) {
		if (c == 'e')
			index = (uint32_t)atoi(optarg);
		else if (c == 't')
			secs = atoi(optarg);
	}
	signal(SIGTERM, on_term);
	omx_endpoint_t ep = open_ep(index, 0x5EED);
	printf("ready\n");
	fflush(stdout);
	for (int i = 0; i < secs * 10 && !stop; i++)
		usleep(100000);
	omx_close_endpoint(ep);
	return 0;
}

static int lookup(const char *host, uint64_t *nic)
{
	omx_return_t r = omx_hostname_to_nic_id((char *)host, nic);
	if (r != OMX_SUCCESS)
		fprintf(stderr, "lookup %s: %s\n", host, omx_strerror(r));
	return r == OMX_SUCCESS;
}

static int do_connect(int argc, char **argv)
{
	uint32_t key = 0x5EED, timeout = 5000;
	int c;
	if (argc < 3)
		return 2;
	const char *host = argv[1];
	uint32_t peer_ep = (uint32_t)atoi(argv[2]);
	optind = 3;
	while ((c = getopt(argc, argv, "k:t:")) != -1) {
		if (c == 'k')
			key = (uint32_t)strtoul(optarg, NULL, 0);
		else if (c == 't')
			timeout = (uint32_t)atoi(optarg);
	}
	omx_endpoint_t ep = open_ep(OMX_ANY_ENDPOINT, 0x5EED);
	uint64_t nic;
	if (!lookup(host, &nic))
		return 1;
	omx_endpoint_addr_t addr;
	omx_return_t r = omx_connect(ep, nic, peer_ep, key, timeout, &addr);
	printf("connect: %s\n", omx_strerror(r));
	omx_close_endpoint(ep);
	return 0;
}

static int sendloop(int argc, char **argv)
{
	int n = 100, interval = 50, reconnect = 0, c;
	if (argc < 3)
		return 2;
	const char *host = argv[1];
	uint32_t peer_ep = (uint32_t)atoi(argv[2]);
	optind = 3;
	while ((c = getopt(argc, argv, "n:i:r")) != -1) {
		if (c == 'n')
			n = atoi(optarg);
		else if (c == 'i')
			interval = atoi(optarg);
		else if (c == 'r')
			reconnect = 1;
	}
	omx_endpoint_t ep = open_ep(OMX_ANY_ENDPOINT, 0x5EED);
	uint64_t nic;
	if (!lookup(host, &nic))
		return 1;
	omx_endpoint_addr_t addr;
	omx_return_t r = omx_connect(ep, nic, peer_ep, 0x5EED, 10000, &addr);
	printf("connect: %s\n", omx_strerror(r));
	fflush(stdout);
	static uint8_t buf[100000];
	const size_t sizes[3] = { 64, 4096, sizeof(buf) };
	omx_return_t last = (omx_return_t)-1;
	int connected = r == OMX_SUCCESS;
	for (int i = 0; i < n; i++) {
		omx_request_t req;
		omx_status_t st;
		uint32_t res = 0;
		if (!connected) { /* waiting for the peer to come back */
			if (omx_connect(ep, nic, peer_ep, 0x5EED, 500, &addr) == OMX_SUCCESS) {
				connected = 1;
				printf("reconnected %d\n", i);
				fflush(stdout);
			} else {
				usleep((useconds_t)interval * 1000);
				continue;
			}
		}
		omx_return_t pr = omx_issend(ep, buf, sizes[i % 3], addr, (uint64_t)i, NULL, &req);
		if (pr != OMX_SUCCESS) {
			printf("post %d %s\n", i, omx_strerror(pr));
			return 1;
		}
		while (!res)
			omx_wait(ep, &req, &st, &res, 1000);
		if (st.code != last) {
			printf("status %d %s\n", i, omx_strerror(st.code));
			fflush(stdout);
			last = st.code;
		}
		if (st.code != OMX_SUCCESS && reconnect) {
			omx_disconnect(ep, addr);
			connected = 0;
		}
		usleep((useconds_t)interval * 1000);
	}
	printf("done\n");
	omx_close_endpoint(ep);
	return 0;
}

/* sleepsend HOST EP BYTES SECS MARKER [spin]: post one large send, sleep SECS without calling the
 * library (with "spin": compute, busy on the CPU, for SECS), create MARKER, then wait for the
 * send. recvcheck BYTES MARKER: receive it, verify the pattern, and say whether it completed
 * before MARKER existed (i.e. while the sender slept). */
static void fill_pattern(uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 2654435761u >> 24);
}

/* Round `round` of exchange: the pattern with every 61st byte changed by the round. */
static void fill_round(uint8_t *b, size_t n, long round)
{
	fill_pattern(b, n);
	for (size_t i = 0; i < n; i += 61)
		b[i] ^= (uint8_t)(round * 37 + 1);
}

/* Open any endpoint and connect it to HOST endpoint EP (30 tries of 1 s); NULL if that fails. */
static omx_endpoint_t open_connected(const char *host, const char *ep_index, omx_endpoint_addr_t *addr)
{
	omx_endpoint_t ep = open_ep(OMX_ANY_ENDPOINT, 0x5EED);
	uint64_t nic;
	if (!lookup(host, &nic))
		return NULL;
	omx_return_t r = OMX_TIMEOUT;
	for (int i = 0; i < 30 && r != OMX_SUCCESS; i++)
		r = omx_connect(ep, nic, (uint32_t)atoi(ep_index), 0x5EED, 1000, addr);
	if (r != OMX_SUCCESS) {
		printf("connect: %s\n", omx_strerror(r));
		return NULL;
	}
	return ep;
}

static int sleepsend(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	size_t n = strtoul(argv[3], NULL, 0);
	int secs = atoi(argv[4]);
	omx_endpoint_addr_t addr;
	omx_endpoint_t ep = open_connected(argv[1], argv[2], &addr);
	if (!ep)
		return 1;
	uint8_t *buf = malloc(n);
	fill_pattern(buf, n);
	omx_request_t req;
	omx_status_t st;
	uint32_t res = 0;
	omx_isend(ep, buf, n, addr, 0x51EE9, NULL, &req);
	printf("posted\n");
	fflush(stdout);
	if (argc > 6 && !strcmp(argv[6], "spin")) {
		/* computing on the CPU: the progress thread must get it from us to answer the pulls */
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		volatile uint64_t work = 0;
		do {
			for (int i = 0; i < 100000; i++)
				work += (uint64_t)i * 2654435761u;
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (t.tv_sec - t0.tv_sec < secs);
		(void)work;
	} else {
		sleep((unsigned)secs); /* computing: no library call */
	}
	FILE *f = fopen(argv[5], "w");
	if (f)
		fclose(f);
	while (!res)
		omx_wait(ep, &req, &st, &res, 1000);
	printf("send: %s\n", omx_strerror(st.code));
	omx_close_endpoint(ep);
	free(buf);
	return st.code != OMX_SUCCESS;
}

/* floodsend HOST EP N LEN CONNECTED [live]: connect, create the file CONNECTED, give the receiver
 * 0.2 s to stop calling the library, then N sends of 8 B (match 1) and one of LEN (match
 * 0x51EE9), all at once; prints "posted", then stays out of the library until killed (same-host
 * tests fill the receiver's ring with the N small ones, so that the last message is only partly
 * delivered). With "live": a 128 KiB medium (match 2: four same-host frames, one message of the
 * send window) goes first, so that the N small ones and the last message fill the ring and its
 * socket past what the window alone allows; once the last send has completed, its buffer is
 * overwritten (as an application reusing it may), and the library is called every millisecond
 * until killed, so that what the full ring refused is sent again, from the library's copy. */
static int floodsend(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	int n = atoi(argv[3]);
	size_t len = strtoul(argv[4], NULL, 0);
	omx_endpoint_addr_t addr;
	omx_endpoint_t ep = open_connected(argv[1], argv[2], &addr);
	if (!ep)
		return 1;
	FILE *f = fopen(argv[5], "w");
	if (f)
		fclose(f);
	usleep(200000);
	uint8_t small[8] = { 0 }, *buf = malloc(len);
	fill_pattern(buf, len);
	omx_return_t r;
	int live = argc > 6 && !strcmp(argv[6], "live");
	static uint8_t first[128 * 1024];
	if (live && (r = omx_isend(ep, first, sizeof(first), addr, 2, NULL, NULL)) != OMX_SUCCESS)
		return printf("send first: %s\n", omx_strerror(r)), 1;
	for (int i = 0; i < n; i++)
		if ((r = omx_isend(ep, small, sizeof(small), addr, 1, NULL, NULL)) != OMX_SUCCESS)
			return printf("send %d: %s\n", i, omx_strerror(r)), 1;
	omx_request_t req;
	if ((r = omx_isend(ep, buf, len, addr, 0x51EE9, NULL, live ? &req : NULL)) != OMX_SUCCESS)
		return printf("send: %s\n", omx_strerror(r)), 1;
	if (live) {
		omx_status_t st;
		uint32_t res = 0;
		while (!res)
			omx_wait(ep, &req, &st, &res, 1000);
		memset(buf, 0, len);
	}
	printf("posted\n");
	fflush(stdout);
	for (;;) {
		if (!live) {
			pause();
			continue;
		}
		omx_progress(ep);
		usleep(1000);
	}
}

/* Receive LEN bytes (match 0x51EE9) into buf, waiting up to secs seconds; 1 if it completed. */
static uint32_t recv_wait(omx_endpoint_t ep, void *buf, size_t len, int secs, omx_status_t *st)
{
	omx_request_t req;
	uint32_t res = 0;
	omx_irecv(ep, buf, len, 0x51EE9, ~0ull, NULL, &req);
	for (int i = 0; i < secs && !res; i++)
		omx_wait(ep, &req, st, &res, 1000);
	return res;
}

/* stallrecv LEN CONNECTED GO: open endpoint 0 and serve connections until the file CONNECTED
 * exists, then stay out of the library until the file GO exists; then post one receive of LEN
 * (match 0x51EE9) and wait for it for up to 60 s: prints "received <status text>" or "received
 * nothing". Run with OMX_PROGRESS_THREAD=0: nothing may take frames from the ring meanwhile. */
static int stallrecv(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	size_t len = strtoul(argv[1], NULL, 0);
	omx_endpoint_t ep = open_ep(0, 0x5EED);
	printf("ready\n");
	fflush(stdout);
	while (access(argv[2], F_OK) != 0) {
		omx_progress(ep);
		usleep(1000);
	}
	while (access(argv[3], F_OK) != 0)
		usleep(10000);
	uint8_t *buf = malloc(len), *ref = malloc(len);
	fill_pattern(ref, len);
	omx_status_t st;
	uint32_t res = recv_wait(ep, buf, len, 60, &st);
	int intact = res && st.code == OMX_SUCCESS && st.xfer_length == len && !memcmp(buf, ref, len);
	printf("received %s (%u of %u bytes)%s\n", res ? omx_strerror(st.code) : "nothing", res ? st.xfer_length : 0,
	       res ? st.msg_length : 0, intact ? ", data intact" : "");
	free(ref);
	omx_close_endpoint(ep);
	free(buf);
	return !res;
}

static int recvcheck(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	size_t n = strtoul(argv[1], NULL, 0);
	omx_endpoint_t ep = open_ep(0, 0x5EED);
	printf("ready\n");
	fflush(stdout);
	uint8_t *buf = malloc(n), *ref = malloc(n);
	fill_pattern(ref, n);
	omx_status_t st;
	uint32_t res = recv_wait(ep, buf, n, 120, &st);
	int asleep = access(argv[2], F_OK) != 0;
	int ok = res && st.code == OMX_SUCCESS && st.xfer_length == n && !memcmp(buf, ref, n);
	printf("received %s, data %s, %s\n", res ? omx_strerror(st.code) : "nothing", ok ? "intact" : "BAD",
	       asleep ? "while the sender slept" : "after the sender woke");
	/* stay a little so our NOTIFY is acked */
	for (int i = 0; i < 20; i++) {
		omx_progress(ep);
		usleep(100000);
	}
	omx_close_endpoint(ep);
	free(buf);
	free(ref);
	return !ok;
}

static int parse_mac(const char *s, uint8_t mac[6]);
omx_return_t omx__peer_add_or_rename(uint64_t nic_id, const char *hostname); /* core/omx_raw.h */

/* resolve MAC: add the peer by address only (as a mapper does), open an endpoint and wait for
 * its hostname to arrive by host query/reply. Prints "resolved <name>" or "unresolved". */
static int resolve(int argc, char **argv)
{
	uint8_t mac[6];
	if (argc < 2 || parse_mac(argv[1], mac) < 0)
		return 2;
	uint64_t nic = 0;
	for (int i = 0; i < 6; i++)
		nic = (nic << 8) | mac[i];
	omx_endpoint_t ep = open_ep(OMX_ANY_ENDPOINT, 0x5EED);
	char name[80] = "";
	if (omx_nic_id_to_hostname(nic, name) == OMX_SUCCESS && name[0]) {
		printf("already named %s\n", name); /* the test must start from a nameless peer */
		return 1;
	}
	omx__peer_add_or_rename(nic, NULL);
	for (int i = 0; i < 100 && !name[0]; i++) {
		omx_progress(ep);
		usleep(50000);
		omx_nic_id_to_hostname(nic, name);
	}
	printf(name[0] ? "resolved %s\n" : "unresolved%s\n", name);
	omx_close_endpoint(ep);
	return 0;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	return 0;
}

/* One valid frame of a random sequenced/control type, then mangled. */
static size_t hostile_frame(uint8_t *f, size_t cap, const uint8_t dst[6], const uint8_t src[6], const struct omx_wire_params *wp)
{
	struct omx_pkt p;
	uint8_t payload[9000];
	memset(&p, 0, sizeof(p));
	memcpy(p.dst_mac, dst, 6);
	memcpy(p.src_mac, src, 6);
	p.peer_index = (uint16_t)(rnd() % 4 ? rnd() % 4 : rnd());
	static const uint8_t types[] = { OMX_PT_TINY, OMX_PT_SMALL, OMX_PT_MEDIUM, OMX_PT_RNDV, OMX_PT_NOTIFY,
					 OMX_PT_CONNECT, OMX_PT_TRUC, OMX_PT_PULL, OMX_PT_PULL_REPLY, OMX_PT_NACK_LIB,
					 OMX_PT_NACK_MCP, OMX_PT_HOST_QUERY, OMX_PT_HOST_REPLY };
	p.ptype = types[rnd() % sizeof(types)];
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)rnd();
	p.u.msg.session = (uint32_t)rnd();
	p.u.msg.lib_seqnum = (uint16_t)rnd();
	p.u.msg.lib_piggyack = (uint16_t)rnd();
	p.u.msg.match = rnd();
	p.payload = payload;
	switch (p.ptype) {
	case OMX_PT_TINY: p.payload_len = (uint32_t)(rnd() % 33); break;
	case OMX_PT_SMALL: p.payload_len = (uint32_t)(rnd() % 128 + 1); break;
	case OMX_PT_MEDIUM:
		p.payload_len = (uint32_t)(rnd() % wp->medium_frag_max + 1);
		p.u.msg.length = p.payload_len + (uint32_t)(rnd() % 1000);
		break;
	case OMX_PT_PULL_REPLY: p.payload_len = (uint32_t)(rnd() % wp->pull_reply_max); break;
	case OMX_PT_HOST_REPLY: strcpy(p.u.host.hostname, "evil"); p.u.host.length = 5; break;
	default: p.payload = NULL; break;
	}
	size_t len = omx_wire_encode(wp, &p, f, cap);
	if (!len) {
		memcpy(f, dst, 6), memcpy(f + 6, src, 6), f[12] = 0x86, f[13] = 0xDF;
		len = 60;
	}
	switch (rnd() % 5) {
	case 0: len = 14 + rnd() % (len - 14); break;             /* truncated */
	case 1: f[16] = (uint8_t)rnd(); break;                     /* any type */
	case 2: f[16 + 4 + rnd() % 4] ^= (uint8_t)rnd(); break;    /* length fields */
	case 3: for (size_t i = 17; i < len; i++) f[i] = (uint8_t)rnd(); break; /* random body */
	default: break;                                            /* valid but foreign */
	}
	f[17] = 0; /* endpoint 0 of the target */
	return len < 15 ? 15 : len;
}

static int inject(int argc, char **argv)
{
	int n = 10000, c;
	if (argc < 3)
		return 2;
	const char *ifname = argv[1];
	uint8_t dst[6];
	if (parse_mac(argv[2], dst) < 0)
		return 2;
	optind = 3;
	while ((c = getopt(argc, argv, "n:s:")) != -1) {
		if (c == 'n')
			n = atoi(optarg);
		else if (c == 's')
			rng = strtoull(optarg, NULL, 0) | 1;
	}
	int err = 0;
	struct omx_net_opts o = { 0 };
	o.all_endpoints = 1;
	struct omx_net *net = omx_net_packet_open(ifname, 255, &o, &err);
	if (!net) {
		fprintf(stderr, "inject: cannot open %s: %s\n", ifname, strerror(-err));
		return 1;
	}
	struct omx_wire_params wp;
	omx_wire_params_init(&wp, OMX_WIRE_EXTENDED, net->mtu > 65535 ? 65535 : net->mtu);
	static uint8_t f[70000];
	int sent = 0;
	for (int i = 0; i < n; i++) {
		size_t len = hostile_frame(f, sizeof(f), dst, net->mac, &wp);
		if (len < 60) {
			memset(f + len, 0, 60 - len);
			len = rnd() % 2 ? 60 : len; /* some frames under the Ethernet minimum */
		}
		struct iovec iov = { f, len };
		if (net->ops->send(net, &iov, 1) == 0)
			sent++;
		if (i % 64 == 0)
			usleep(1000); /* do not just overflow the victim's ring */
	}
	net->ops->close(net);
	printf("injected %d\n", sent);
	return 0;
}

/* Blocking wait for up to 30 s (the one-way end handshake). */
static int wait_long(omx_endpoint_t ep, omx_request_t *req, omx_status_t *st)
{
	uint32_t res = 0;
	for (int i = 0; i < 30 && !res; i++)
		omx_wait(ep, req, st, &res, 1000);
	return res;
}

/* Poll (as MPI libraries do: a blocking wait would flush delayed acks before sleeping) for up to
 * 30 s: longer is a stall, not a slow machine. */
static int poll_long(omx_endpoint_t ep, omx_request_t *req, omx_status_t *st)
{
	uint32_t res = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (omx_test(ep, req, st, &res) != OMX_SUCCESS)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (!res && t.tv_sec - t0.tv_sec < 30);
	return res;
}

static int exchange(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	omx_endpoint_t ep = open_ep((uint32_t)atoi(argv[1]), 0x5EED);
	size_t len = strtoul(argv[4], NULL, 0);
	long rounds = atol(argv[5]);
	const char *mode = argc > 6 ? argv[6] : "both";
	int late = !strcmp(mode, "recvlate");
	if (late)
		mode = "recv";
	int sending = strcmp(mode, "recv") != 0, receiving = strcmp(mode, "send") != 0;
	uint64_t nic;
	if (!lookup(argv[2], &nic))
		return 1;
	omx_endpoint_addr_t addr;
	omx_return_t r = OMX_TIMEOUT;
	for (int i = 0; i < 100 && r != OMX_SUCCESS; i++) {
		r = omx_connect(ep, nic, (uint32_t)atoi(argv[3]), 0x5EED, 1000, &addr);
		if (r != OMX_SUCCESS)
			usleep(100000); /* the peer may not have opened its endpoint yet */
	}
	if (r != OMX_SUCCESS)
		return printf("connect: %s\n", omx_strerror(r)), 1;
	uint8_t *sbuf = malloc(len ? len : 1), *rbuf = malloc(len ? len : 1);
	if (late)
		sleep(1);
	for (long i = 0; i < rounds; i++) {
		omx_request_t sr, rr;
		omx_status_t ss = { 0 }, rs = { 0 };
		fill_round(sbuf, len, i); /* the receiver compares with the same round's */
		memset(rbuf, 0, len);
		if (receiving)
			omx_irecv(ep, rbuf, len, 0xEC4A, ~0ull, NULL, &rr);
		if (sending)
			omx_isend(ep, sbuf, len, addr, 0xEC4A, NULL, &sr);
		if ((sending && !poll_long(ep, &sr, &ss)) || (receiving && !poll_long(ep, &rr, &rs)))
			return printf("stalled in round %ld\n", i), 1;
		if ((sending && ss.code != OMX_SUCCESS) ||
		    (receiving && (rs.code != OMX_SUCCESS || rs.xfer_length != len || memcmp(rbuf, sbuf, len))))
			return printf("round %ld: send %s, receive %s, %u bytes\n", i, omx_strerror(ss.code),
				      omx_strerror(rs.code), rs.xfer_length), 1;
	}
	/* One-way: the sender tells the receiver it is done, so that the receiver stays (and acks)
	 * until then; blocking waits here. */
	omx_request_t fr;
	omx_status_t fs;
	uint8_t fin = 0;
	if (!strcmp(mode, "send"))
		omx_isend(ep, &fin, 1, addr, 0xF1, NULL, &fr);
	else if (!strcmp(mode, "recv"))
		omx_irecv(ep, &fin, 1, 0xF1, ~0ull, NULL, &fr);
	if (strcmp(mode, "both") && !wait_long(ep, &fr, &fs))
		return printf("no end handshake\n"), 1;
	printf("exchanged %ld\n", rounds);
	omx_close_endpoint(ep);
	free(sbuf);
	free(rbuf);
	return 0;
}

static int gather(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	omx_endpoint_t ep = open_ep((uint32_t)atoi(argv[1]), 0x5EED);
	size_t len = strtoul(argv[2], NULL, 0);
	long n = atol(argv[3]), senders = atol(argv[4]);
	if (senders < 1 || senders > 16)
		return 2;
	long got[16] = { 0 };
	uint32_t who[16];
	long known = 0;
	uint8_t *want = malloc(len ? len : 1), *rbuf = malloc(len ? len : 1);
	sleep((unsigned)atoi(argv[5]));
	for (long i = 0; i < n * senders; i++) {
		omx_request_t rr;
		omx_status_t rs = { 0 };
		memset(rbuf, 0, len);
		omx_irecv(ep, rbuf, len, 0xEC4A, ~0ull, NULL, &rr);
		if (!poll_long(ep, &rr, &rs))
			return printf("stalled after %ld\n", i), 1;
		uint64_t nic;
		uint32_t idx;
		omx_decompose_endpoint_addr(rs.addr, &nic, &idx);
		long k = 0;
		while (k < known && who[k] != idx)
			k++;
		if (k == known) {
			if (known == senders)
				return printf("message %ld from an unexpected endpoint %u\n", i, idx), 1;
			who[known++] = idx;
		}
		fill_round(want, len, got[k]); /* that sender's round (exchange) */
		if (rs.code != OMX_SUCCESS || rs.xfer_length != len || memcmp(rbuf, want, len))
			return printf("message %ld: %s, %u bytes\n", i, omx_strerror(rs.code), rs.xfer_length), 1;
		got[k]++;
	}
	for (long k = 0; k < senders; k++) {
		omx_request_t fr;
		omx_status_t fs;
		uint8_t fin;
		omx_irecv(ep, &fin, 1, 0xF1, ~0ull, NULL, &fr);
		if (!wait_long(ep, &fr, &fs))
			return printf("no end handshake\n"), 1;
		if (got[k] != n)
			return printf("sender %ld: %ld messages, not %ld\n", k, got[k], n), 1;
	}
	printf("gathered %ld from each of %ld\n", n, senders);
	omx_close_endpoint(ep);
	free(want);
	free(rbuf);
	return 0;
}

int main(int argc, char **argv)
{
	/* Line by line: a failing mode returns early with its reason on stdout, and a sanitizer's
	 * report at exit (a leak on that early path) must not swallow it. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: omx_faultprog serve|connect|sendloop|inject ...\n");
		return 2;
	}
	if (!strcmp(argv[1], "serve"))
		return serve(argc - 1, argv + 1);
	if (!strcmp(argv[1], "connect"))
		return do_connect(argc - 1, argv + 1);
	if (!strcmp(argv[1], "idle"))
		return idle(argc - 1, argv + 1);
	if (!strcmp(argv[1], "sendloop"))
		return sendloop(argc - 1, argv + 1);
	if (!strcmp(argv[1], "sleepsend"))
		return sleepsend(argc - 1, argv + 1);
	if (!strcmp(argv[1], "gather"))
		return gather(argc - 1, argv + 1);
	if (!strcmp(argv[1], "floodsend"))
		return floodsend(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stallrecv"))
		return stallrecv(argc - 1, argv + 1);
	if (!strcmp(argv[1], "recvcheck"))
		return recvcheck(argc - 1, argv + 1);
	if (!strcmp(argv[1], "resolve"))
		return resolve(argc - 1, argv + 1);
	if (!strcmp(argv[1], "exchange"))
		return exchange(argc - 1, argv + 1);
	if (!strcmp(argv[1], "inject"))
		return inject(argc - 1, argv + 1);
	fprintf(stderr, "omx_faultprog: unknown command %s\n", argv[1]);
	return 2;
}
