/*
 * test_net_mem.c - the in-memory hub (src/net/mem.c): routing by destination MAC and by the
 * frame's endpoint byte (omx_wire_frame_endpoint rule), broadcast, senders not seeing their own
 * frames, FIFO order, burst limits, eventfd readiness, MTU enforcement, queue overflow, re-entrant
 * sends from the receive callback, and concurrent senders.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "unit_check.h"

enum { PT_RAW = 1, PT_HOST_QUERY = 3, PT_HOST_REPLY = 4, PT_TINY = 37, PT_PULL_REPLY = 42, PT_NACK_LIB = 44 };

static const uint8_t MAC_A[6] = {0x02, 0, 0, 0, 0, 0x0a};
static const uint8_t MAC_B[6] = {0x02, 0, 0, 0, 0, 0x0b};
static const uint8_t MAC_C[6] = {0x02, 0, 0, 0, 0, 0x0c};
static const uint8_t MAC_X[6] = {0x02, 0, 0, 0, 0, 0x99};
static const uint8_t MAC_BCAST[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

/* A frame for `ep` (endpoint byte where the rule puts it for ptype), seq at bytes 40..43. */
static size_t make_frame(uint8_t *f, size_t len, const uint8_t *dst, const uint8_t *src, uint8_t ptype, uint8_t ep,
			 uint32_t seq)
{
	memset(f, 0, len);
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	f[12] = 0x86;
	f[13] = 0xDF;
	f[16] = ptype;
	f[17] = (uint8_t)(ep ^ 0x5a);
	f[25] = (uint8_t)(ep ^ 0x3c);
	f[31] = (uint8_t)(ep ^ 0x11);
	if (ptype == PT_NACK_LIB)
		f[25] = ep;
	else if (ptype == PT_PULL_REPLY)
		f[31] = (uint8_t)(ep ^ 0x80);
	else
		f[17] = ep;
	f[40] = (uint8_t)(seq >> 24);
	f[41] = (uint8_t)(seq >> 16);
	f[42] = (uint8_t)(seq >> 8);
	f[43] = (uint8_t)seq;
	for (size_t i = 44; i < len; i++)
		f[i] = (uint8_t)(seq + i);
	return len;
}

static uint32_t frame_seq(const uint8_t *f)
{
	return (uint32_t)f[40] << 24 | (uint32_t)f[41] << 16 | (uint32_t)f[42] << 8 | f[43];
}

static int send1(struct omx_net *n, const uint8_t *f, size_t len)
{
	struct iovec v = {.iov_base = (void *)f, .iov_len = len};
	return n->ops->send(n, &v, 1);
}

static int readable(struct omx_net *n)
{
	struct pollfd p = {.fd = n->fd, .events = POLLIN};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Collector: remembers the frames it is given. */
struct coll {
	unsigned count;
	uint32_t seq[256];
	size_t len[256];
	uint8_t last[2048];
	size_t last_len;
};

static void coll_rx(void *arg, const uint8_t *f, size_t len)
{
	struct coll *c = arg;
	if (c->count < 256) {
		c->seq[c->count] = len >= 44 ? frame_seq(f) : 0xFFFFFFFFu;
		c->len[c->count] = len;
	}
	c->count++;
	c->last_len = len < sizeof(c->last) ? len : sizeof(c->last);
	memcpy(c->last, f, c->last_len);
}

/* Drain n completely; returns the number of frames. */
static unsigned drain(struct omx_net *n, struct coll *c)
{
	unsigned before = c->count;
	while (n->ops->recv_burst(n, coll_rx, c, 64) > 0)
		;
	return c->count - before;
}

static void test_routing(void)
{
	struct omx_memnet *hub = omx_memnet_create();
	CHECK(hub != NULL);
	struct omx_net *a0 = omx_net_mem_open(hub, MAC_A, 1500, 0);
	struct omx_net *a1 = omx_net_mem_open(hub, MAC_A, 1500, 1);
	struct omx_net *b0 = omx_net_mem_open(hub, MAC_B, 1500, 0);
	struct omx_net *b2 = omx_net_mem_open(hub, MAC_B, 1500, 2);
	struct omx_net *c0 = omx_net_mem_open(hub, MAC_C, 9000, 0);
	CHECK(a0 && a1 && b0 && b2 && c0);
	CHECK(memcmp(a0->mac, MAC_A, 6) == 0);
	CHECK_EQ(c0->mtu, 9000);
	CHECK(a0->fd >= 0 && a0->fd != a1->fd);
	CHECK(a0->ops->next_deadline == NULL || a0->ops->next_deadline(a0) == 0);

	struct omx_net *all[5] = {a0, a1, b0, b2, c0};
	struct coll cs[5];
	uint8_t f[2048];
	memset(cs, 0, sizeof(cs));

	/* Unicast TINY for B endpoint 2: only b2, and only b2's fd becomes readable. */
	make_frame(f, 100, MAC_B, MAC_A, PT_TINY, 2, 1);
	CHECK_EQ(send1(a0, f, 100), 0);
	CHECK(readable(b2));
	CHECK(!readable(a0) && !readable(a1) && !readable(b0) && !readable(c0));
	CHECK_EQ(drain(b2, &cs[3]), 1);
	CHECK_EQ(cs[3].last_len, 100);
	CHECK(memcmp(cs[3].last, f, 100) == 0);
	CHECK(!readable(b2));

	/* NACK_LIB: endpoint at byte 25 (byte 17 says something else). */
	make_frame(f, 60, MAC_B, MAC_A, PT_NACK_LIB, 0, 2);
	CHECK_EQ(send1(a0, f, 60), 0);
	/* PULL_REPLY: endpoint = byte 31 ^ 0x80. */
	make_frame(f, 80, MAC_B, MAC_A, PT_PULL_REPLY, 2, 3);
	CHECK_EQ(send1(a0, f, 80), 0);
	CHECK_EQ(drain(b0, &cs[2]), 1);
	CHECK_EQ(cs[2].seq[0], 2);
	CHECK_EQ(drain(b2, &cs[3]), 1);
	CHECK_EQ(cs[3].seq[1], 3);

	/* HOST_QUERY unicast to B: every endpoint of B. RAW and HOST_REPLY too. */
	for (int pt = 0; pt < 3; pt++) {
		static const uint8_t pts[3] = {PT_HOST_QUERY, PT_HOST_REPLY, PT_RAW};
		make_frame(f, 60, MAC_B, MAC_A, pts[pt], 77, 10 + (uint32_t)pt);
		CHECK_EQ(send1(a1, f, 60), 0);
	}
	CHECK_EQ(drain(b0, &cs[2]), 3);
	CHECK_EQ(drain(b2, &cs[3]), 3);
	CHECK_EQ(drain(a0, &cs[0]), 0);
	CHECK_EQ(drain(c0, &cs[4]), 0);

	/* Broadcast HOST_QUERY from a0: everyone but a0 (a1 on the same board included). */
	make_frame(f, 60, MAC_BCAST, MAC_A, PT_HOST_QUERY, 0, 20);
	CHECK_EQ(send1(a0, f, 60), 0);
	CHECK_EQ(drain(a0, &cs[0]), 0);
	CHECK_EQ(drain(a1, &cs[1]), 1);
	CHECK_EQ(drain(b0, &cs[2]), 1);
	CHECK_EQ(drain(b2, &cs[3]), 1);
	CHECK_EQ(drain(c0, &cs[4]), 1);

	/* Broadcast TINY for endpoint 0 from a1: endpoint 0 of every board (a0, b0, c0). */
	make_frame(f, 60, MAC_BCAST, MAC_A, PT_TINY, 0, 21);
	CHECK_EQ(send1(a1, f, 60), 0);
	CHECK_EQ(drain(a0, &cs[0]), 1);
	CHECK_EQ(drain(a1, &cs[1]), 0);
	CHECK_EQ(drain(b0, &cs[2]), 1);
	CHECK_EQ(drain(b2, &cs[3]), 0);
	CHECK_EQ(drain(c0, &cs[4]), 1);

	/* Frames to the sender's own board reach its other endpoints, never itself. */
	make_frame(f, 60, MAC_A, MAC_A, PT_TINY, 1, 22);
	CHECK_EQ(send1(a0, f, 60), 0);
	make_frame(f, 60, MAC_A, MAC_A, PT_TINY, 0, 23);
	CHECK_EQ(send1(a0, f, 60), 0);
	CHECK_EQ(drain(a1, &cs[1]), 1);
	CHECK_EQ(drain(a0, &cs[0]), 0);

	struct omx_memnet_stats st0, st;
	omx_memnet_stats(hub, &st0);
	/* Nobody: unknown MAC, endpoint nobody has, foreign EtherType, unknown ptype. */
	make_frame(f, 60, MAC_X, MAC_A, PT_TINY, 0, 30);
	CHECK_EQ(send1(a0, f, 60), 0);
	make_frame(f, 60, MAC_B, MAC_A, PT_TINY, 5, 31);
	CHECK_EQ(send1(a0, f, 60), 0);
	make_frame(f, 60, MAC_B, MAC_A, PT_TINY, 0, 32);
	f[12] = 0x08;
	f[13] = 0x00;
	CHECK_EQ(send1(a0, f, 60), 0);
	make_frame(f, 60, MAC_B, MAC_A, 0xEE, 0, 33);
	CHECK_EQ(send1(a0, f, 60), 0);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(drain(all[i], &cs[i]), 0);
	omx_memnet_stats(hub, &st);
	CHECK_EQ(st.dropped_noroute - st0.dropped_noroute, 4);
	CHECK_EQ(st.sent - st0.sent, 4);
	CHECK_EQ(st.delivered, st0.delivered);

	/* Too short to be a frame. */
	CHECK_EQ(send1(a0, f, 10), -EINVAL);

	for (int i = 0; i < 5; i++)
		all[i]->ops->close(all[i]);
	omx_memnet_destroy(hub);
}

static void test_fifo_burst_eventfd(void)
{
	struct omx_memnet *hub = omx_memnet_create();
	struct omx_net *a = omx_net_mem_open(hub, MAC_A, 1500, 0);
	struct omx_net *b = omx_net_mem_open(hub, MAC_B, 1500, 3);
	uint8_t f[1514];
	struct coll c;
	memset(&c, 0, sizeof(c));

	for (uint32_t i = 0; i < 100; i++) {
		size_t len = 60 + (i * 37) % (1514 - 60 + 1);
		make_frame(f, len, MAC_B, MAC_A, PT_TINY, 3, i);
		/* Gather from three pieces. */
		struct iovec v[3] = {{f, 14}, {f + 14, 30}, {f + 44, len - 44}};
		CHECK_EQ(a->ops->send(a, v, 3), 0);
	}
	CHECK(readable(b));
	CHECK_EQ(b->ops->recv_burst(b, coll_rx, &c, 10), 10);
	CHECK(readable(b)); /* still frames queued */
	CHECK_EQ(b->ops->recv_burst(b, coll_rx, &c, 0), 0);
	CHECK_EQ(b->ops->recv_burst(b, coll_rx, &c, 89), 89);
	CHECK(readable(b));
	CHECK_EQ(b->ops->recv_burst(b, coll_rx, &c, 64), 1);
	CHECK(!readable(b));
	CHECK_EQ(b->ops->recv_burst(b, coll_rx, &c, 64), 0);
	int in_order = 1, lens_ok = 1;
	for (uint32_t i = 0; i < 100; i++) {
		if (c.seq[i] != i)
			in_order = 0;
		if (c.len[i] != 60 + (i * 37) % (1514 - 60 + 1))
			lens_ok = 0;
	}
	CHECK(in_order);
	CHECK(lens_ok);
	/* Content of the last one, byte for byte. */
	make_frame(f, c.len[99], MAC_B, MAC_A, PT_TINY, 3, 99);
	CHECK(memcmp(c.last, f, c.len[99]) == 0);

	/* The eventfd re-arms after being drained. */
	make_frame(f, 60, MAC_B, MAC_A, PT_TINY, 3, 200);
	CHECK_EQ(send1(a, f, 60), 0);
	CHECK(readable(b));
	CHECK_EQ(drain(b, &c), 1);
	CHECK(!readable(b));

	a->ops->close(a);
	b->ops->close(b);
	omx_memnet_destroy(hub);
}

static void test_mtu_and_overflow(void)
{
	struct omx_memnet *hub = omx_memnet_create();
	struct omx_net *a = omx_net_mem_open(hub, MAC_A, 1500, 0);
	struct omx_net *b = omx_net_mem_open(hub, MAC_B, 1500, 0);
	struct omx_net *j = omx_net_mem_open(hub, MAC_C, 9000, 0);
	static uint8_t f[9014];
	struct coll c;
	struct omx_memnet_stats st;
	memset(&c, 0, sizeof(c));

	/* Sender's own MTU: mtu + 14 is fine, one more byte is refused like the kernel does. */
	make_frame(f, 1514, MAC_B, MAC_A, PT_TINY, 0, 1);
	CHECK_EQ(send1(a, f, 1514), 0);
	make_frame(f, 1515, MAC_B, MAC_A, PT_TINY, 0, 2);
	CHECK_EQ(send1(a, f, 1515), -EMSGSIZE);
	CHECK_EQ(drain(b, &c), 1);
	CHECK_EQ(c.len[0], 1514);

	/* Jumbo sender, 1500 receiver: dropped before the receiver, counted. */
	make_frame(f, 9014, MAC_B, MAC_C, PT_TINY, 0, 3);
	CHECK_EQ(send1(j, f, 9014), 0);
	make_frame(f, 1514, MAC_B, MAC_C, PT_TINY, 0, 4);
	CHECK_EQ(send1(j, f, 1514), 0);
	CHECK_EQ(drain(b, &c), 1);
	CHECK_EQ(c.seq[1], 4);
	omx_memnet_stats(hub, &st);
	CHECK_EQ(st.dropped_mtu, 2);
	/* But a 9000 receiver takes it. */
	make_frame(f, 9014, MAC_C, MAC_B, PT_TINY, 0, 5);
	CHECK_EQ(send1(b, f, 9014), -EMSGSIZE);
	make_frame(f, 9014, MAC_C, MAC_A, PT_TINY, 0, 5);
	struct omx_net *a9 = omx_net_mem_open(hub, MAC_A, 9000, 7);
	CHECK_EQ(send1(a9, f, 9014), 0);
	CHECK_EQ(drain(j, &c), 1);
	CHECK_EQ(c.len[2], 9014);

	/* Overflow: 8192 frames per queue, the rest counted. */
	make_frame(f, 60, MAC_B, MAC_A, PT_TINY, 0, 0);
	for (int i = 0; i < 8200; i++)
		send1(a, f, 60);
	omx_memnet_stats(hub, &st);
	CHECK_EQ(st.dropped_overflow, 8);
	unsigned before = c.count;
	CHECK_EQ(drain(b, &c), 8192);
	CHECK_EQ(c.count - before, 8192);

	/* Closing with frames queued frees them (checked by ASan/LSan builds). */
	for (int i = 0; i < 10; i++)
		send1(a, f, 60);
	b->ops->close(b);
	a->ops->close(a);
	a9->ops->close(a9);
	j->ops->close(j);
	omx_memnet_destroy(hub);
}

/* The receive callback may send (an echo) without deadlocking. */
struct echo_ctx {
	struct omx_net *self;
	unsigned seen;
};

static void echo_rx(void *arg, const uint8_t *f, size_t len)
{
	struct echo_ctx *e = arg;
	uint8_t r[2048];
	memcpy(r, f, len);
	memcpy(r, f + 6, 6);
	memcpy(r + 6, e->self->mac, 6);
	r[17] = 0; /* back to endpoint 0 */
	e->seen++;
	CHECK_EQ(send1(e->self, r, len), 0);
}

static void test_reentrant_echo(void)
{
	struct omx_memnet *hub = omx_memnet_create();
	struct omx_net *a = omx_net_mem_open(hub, MAC_A, 1500, 0);
	struct omx_net *b = omx_net_mem_open(hub, MAC_B, 1500, 4);
	uint8_t f[200];
	struct coll c;
	struct echo_ctx e = {.self = b};
	memset(&c, 0, sizeof(c));

	for (uint32_t i = 0; i < 20; i++) {
		make_frame(f, 200, MAC_B, MAC_A, PT_TINY, 4, i);
		CHECK_EQ(send1(a, f, 200), 0);
	}
	CHECK_EQ(b->ops->recv_burst(b, echo_rx, &e, 64), 20);
	CHECK_EQ(e.seen, 20);
	CHECK_EQ(drain(a, &c), 20);
	CHECK_EQ(c.seq[19], 19);
	a->ops->close(a);
	b->ops->close(b);
	omx_memnet_destroy(hub);
}

/* Concurrent senders and one receiver thread sleeping on the eventfd. */
#define PER_SENDER 4000
struct sender_arg {
	struct omx_net *n;
	uint8_t tag;
};

static void *sender_thread(void *p)
{
	struct sender_arg *s = p;
	uint8_t f[128];
	for (uint32_t i = 0; i < PER_SENDER; i++) {
		make_frame(f, 128, MAC_C, s->n->mac, PT_TINY, 9, ((uint32_t)s->tag << 24) | i);
		if (send1(s->n, f, 128) != 0)
			return (void *)1;
	}
	return NULL;
}

struct order_ctx {
	uint32_t next[2];
	unsigned total, out_of_order;
};

static void order_rx(void *arg, const uint8_t *f, size_t len)
{
	struct order_ctx *o = arg;
	uint32_t s = frame_seq(f);
	unsigned tag = s >> 24;
	if (tag > 1 || (s & 0xFFFFFF) != o->next[tag])
		o->out_of_order++;
	else
		o->next[tag]++;
	o->total++;
}

static void test_threads(void)
{
	struct omx_memnet *hub = omx_memnet_create();
	struct omx_net *s0 = omx_net_mem_open(hub, MAC_A, 1500, 0);
	struct omx_net *s1 = omx_net_mem_open(hub, MAC_B, 1500, 0);
	struct omx_net *r = omx_net_mem_open(hub, MAC_C, 1500, 9);
	struct sender_arg a0 = {s0, 0}, a1 = {s1, 1};
	pthread_t t0, t1;
	struct order_ctx o;
	memset(&o, 0, sizeof(o));

	CHECK_EQ(pthread_create(&t0, NULL, sender_thread, &a0), 0);
	CHECK_EQ(pthread_create(&t1, NULL, sender_thread, &a1), 0);
	unsigned idle = 0;
	while (o.total < 2 * PER_SENDER && idle < 200) {
		struct pollfd p = {.fd = r->fd, .events = POLLIN};
		if (poll(&p, 1, 10) <= 0) {
			idle++;
			continue;
		}
		idle = 0;
		r->ops->recv_burst(r, order_rx, &o, 64);
	}
	void *ret0, *ret1;
	pthread_join(t0, &ret0);
	pthread_join(t1, &ret1);
	CHECK(ret0 == NULL && ret1 == NULL);
	CHECK_EQ(o.total, 2 * PER_SENDER);
	CHECK_EQ(o.out_of_order, 0);
	CHECK_EQ(o.next[0], PER_SENDER);
	CHECK_EQ(o.next[1], PER_SENDER);
	CHECK(!readable(r));
	s0->ops->close(s0);
	s1->ops->close(s1);
	r->ops->close(r);
	omx_memnet_destroy(hub);
}

int main(void)
{
	test_routing();
	test_fifo_burst_eventfd();
	test_mtu_and_overflow();
	test_reentrant_echo();
	test_threads();
	return unit_finish(NULL);
}
