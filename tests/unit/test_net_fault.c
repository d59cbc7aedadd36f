/*
 * test_net_fault.c - the fault-injecting wrapper (src/net/fault.c) over the in-memory hub:
 * spec parsing, drop/dup/reorder/delay rates over 100000 frames with fixed seeds, that reorder
 * really swaps neighbours, that delay really delays (and next_deadline says until when), that
 * held frames are released from send() and recv_burst(), and determinism for equal seeds.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/net.h"
#include "unit_check.h"

static double my_sqrt(double x)
{
	double r = x > 1 ? x : 1;
	for (int i = 0; i < 60; i++)
		r = 0.5 * (r + x / r);
	return r;
}

static double my_fabs(double x)
{
	return x < 0 ? -x : x;
}

/* |observed rate - p| within 5 standard deviations of a binomial(n, p) (and some slack). */
#define CHECK_RATE(count, n, p)                                                                  \
	do {                                                                                     \
		double obs_ = (double)(count) / (double)(n);                                     \
		double tol_ = 5.0 * my_sqrt((p) * (1.0 - (p)) / (double)(n)) + 1e-4;                \
		if (!unit_tally(my_fabs(obs_ - (p)) <= tol_))                                     \
			fprintf(stderr, "%s:%d: rate of %s = %.5f, expected %.5f +- %.5f\n", __FILE__,  \
				__LINE__, #count, obs_, (double)(p), tol_);                      \
	} while (0)

static const uint8_t MAC_A[6] = {0x02, 0, 0, 0, 0, 0x0a};
static const uint8_t MAC_B[6] = {0x02, 0, 0, 0, 0, 0x0b};

static void make_frame(uint8_t *f, size_t len, uint32_t seq)
{
	memset(f, 0, len);
	memcpy(f, MAC_B, 6);
	memcpy(f + 6, MAC_A, 6);
	f[12] = 0x86;
	f[13] = 0xDF;
	f[16] = 37; /* TINY */
	f[17] = 0;  /* endpoint 0 */
	f[40] = (uint8_t)(seq >> 24);
	f[41] = (uint8_t)(seq >> 16);
	f[42] = (uint8_t)(seq >> 8);
	f[43] = (uint8_t)seq;
}

static uint32_t frame_seq(const uint8_t *f)
{
	return (uint32_t)f[40] << 24 | (uint32_t)f[41] << 16 | (uint32_t)f[42] << 8 | f[43];
}

/* A sender (wrapped) and a receiver on one hub. */
struct rig {
	struct omx_memnet *hub;
	struct omx_net *tx; /* fault wrapper around a mem transport */
	struct omx_net *rx;
	uint32_t *seqs; /* received sequence numbers, in order */
	uint64_t *times; /* receive times (ns) */
	size_t n, cap;
};

static void rig_rx(void *arg, const uint8_t *f, size_t len)
{
	struct rig *r = arg;
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 1024;
		r->seqs = realloc(r->seqs, r->cap * sizeof(*r->seqs));
		r->times = realloc(r->times, r->cap * sizeof(*r->times));
	}
	r->seqs[r->n] = len >= 44 ? frame_seq(f) : 0xFFFFFFFFu;
	r->times[r->n] = omx_now_ns();
	r->n++;
}

static void rig_open(struct rig *r, const char *spec_str)
{
	struct omx_fault_spec spec;
	memset(r, 0, sizeof(*r));
	CHECK_EQ(omx_fault_spec_parse(spec_str, &spec), 0);
	r->hub = omx_memnet_create();
	struct omx_net *inner = omx_net_mem_open(r->hub, MAC_A, 1500, 0);
	r->tx = omx_net_fault_wrap(inner, &spec);
	r->rx = omx_net_mem_open(r->hub, MAC_B, 1500, 0);
	CHECK(r->tx && r->rx);
}

static void rig_drain(struct rig *r)
{
	while (r->rx->ops->recv_burst(r->rx, rig_rx, r, 256) > 0)
		;
}

/* Let held frames come due, then have the wrapper release them, then collect. */
static void rig_flush(struct rig *r)
{
	for (int i = 0; i < 1000; i++) {
		uint64_t d = r->tx->ops->next_deadline(r->tx);
		if (d == 0)
			break;
		uint64_t now = omx_now_ns();
		if (d > now) {
			struct timespec ts = {0, (long)(d - now)};
			nanosleep(&ts, NULL);
		}
		r->tx->ops->recv_burst(r->tx, rig_rx, r, 0);
	}
	rig_drain(r);
}

static void rig_send(struct rig *r, uint32_t seq)
{
	uint8_t f[64];
	make_frame(f, 64, seq);
	struct iovec v[2] = {{f, 20}, {f + 20, 44}};
	int ret = r->tx->ops->send(r->tx, v, 2);
	if (ret != 0) { /* counted as a failure only: 100000s of sends would drown the pass count */
		(void)unit_tally(0);
		fprintf(stderr, "send of frame %u failed: %d\n", seq, ret);
	}
}

static void rig_close(struct rig *r)
{
	r->tx->ops->close(r->tx);
	r->rx->ops->close(r->rx);
	omx_memnet_destroy(r->hub);
	free(r->seqs);
	free(r->times);
}

static void test_parse(void)
{
	struct omx_fault_spec s;
	CHECK_EQ(omx_fault_spec_parse("drop=0.05,dup=0.01,reorder=0.1,delay=0.02,delay_us=2000,seed=7", &s), 0);
	CHECK(s.drop == 0.05 && s.dup == 0.01 && s.reorder == 0.1 && s.delay == 0.02);
	CHECK_EQ(s.delay_us, 2000);
	CHECK_EQ(s.seed, 7);
	CHECK_EQ(omx_fault_spec_parse("", &s), 0);
	CHECK(s.drop == 0 && s.dup == 0 && s.reorder == 0 && s.delay == 0);
	CHECK_EQ(omx_fault_spec_parse(" drop = 0.5 , seed=0x10 ,", &s), 0);
	CHECK(s.drop == 0.5);
	CHECK_EQ(s.seed, 16);
	CHECK_EQ(omx_fault_spec_parse("delay=0.1", &s), 0);
	CHECK(s.delay_us > 0); /* a default hold time */
	CHECK_EQ(omx_fault_spec_parse("DROP=1,Dup=0", &s), 0);
	CHECK(s.drop == 1.0);
	CHECK_EQ(omx_fault_spec_parse("drop=1.5", &s), -EINVAL);
	CHECK_EQ(omx_fault_spec_parse("drop=-0.1", &s), -EINVAL);
	CHECK_EQ(omx_fault_spec_parse("drop=abc", &s), -EINVAL);
	CHECK_EQ(omx_fault_spec_parse("drop=0.1x", &s), -EINVAL);
	CHECK_EQ(omx_fault_spec_parse("drop", &s), -EINVAL);
	CHECK_EQ(omx_fault_spec_parse("lose=0.1", &s), -EINVAL);
	CHECK_EQ(omx_fault_spec_parse("seed=-1", &s), -EINVAL);
	CHECK_EQ(omx_fault_spec_parse("delay_us=99999999999", &s), -EINVAL);
	CHECK_EQ(omx_fault_spec_parse(NULL, &s), -EINVAL);
	/* A failed parse leaves the output alone. */
	CHECK_EQ(omx_fault_spec_parse("seed=42", &s), 0);
	CHECK_EQ(omx_fault_spec_parse("seed=43,bogus=1", &s), -EINVAL);
	CHECK_EQ(s.seed, 42);
}

#define NFRAMES 100000

static void test_drop_dup_rates(void)
{
	struct rig r;
	struct omx_fault_stats st;

	rig_open(&r, "drop=0.1,seed=11");
	for (uint32_t i = 0; i < NFRAMES; i++) {
		rig_send(&r, i);
		if (i % 1000 == 999)
			rig_drain(&r);
	}
	rig_flush(&r);
	omx_net_fault_stats(r.tx, &st);
	CHECK_EQ(st.sent, NFRAMES);
	CHECK_RATE(st.dropped, NFRAMES, 0.1);
	CHECK_EQ(r.n, NFRAMES - st.dropped);
	CHECK_EQ(st.duplicated + st.reordered + st.delayed, 0);
	int increasing = 1;
	for (size_t i = 1; i < r.n; i++)
		if (r.seqs[i] <= r.seqs[i - 1])
			increasing = 0;
	CHECK(increasing);
	printf("drop=0.1: %llu of %d dropped (%.4f)\n", (unsigned long long)st.dropped, NFRAMES,
	       (double)st.dropped / NFRAMES);
	rig_close(&r);

	rig_open(&r, "dup=0.05,seed=12");
	for (uint32_t i = 0; i < NFRAMES; i++) {
		rig_send(&r, i);
		if (i % 1000 == 999)
			rig_drain(&r);
	}
	rig_flush(&r);
	omx_net_fault_stats(r.tx, &st);
	CHECK_RATE(st.duplicated, NFRAMES, 0.05);
	CHECK_EQ(r.n, NFRAMES + st.duplicated);
	/* Duplicates follow their original; otherwise the order is kept. */
	size_t dups = 0;
	int ordered = 1;
	for (size_t i = 1; i < r.n; i++) {
		if (r.seqs[i] == r.seqs[i - 1])
			dups++;
		else if (r.seqs[i] != r.seqs[i - 1] + 1)
			ordered = 0;
	}
	CHECK_EQ(dups, st.duplicated);
	CHECK(ordered);
	printf("dup=0.05: %llu duplicated (%.4f)\n", (unsigned long long)st.duplicated,
	       (double)st.duplicated / NFRAMES);
	rig_close(&r);

	/* drop=1 drops everything, drop=0 nothing. */
	rig_open(&r, "drop=1");
	for (uint32_t i = 0; i < 100; i++)
		rig_send(&r, i);
	rig_flush(&r);
	CHECK_EQ(r.n, 0);
	rig_close(&r);
}

static void test_reorder(void)
{
	struct rig r;
	struct omx_fault_stats st;

	rig_open(&r, "reorder=0.3,seed=5");
	for (uint32_t i = 0; i < NFRAMES; i++) {
		rig_send(&r, i);
		if (i % 1000 == 999)
			rig_drain(&r);
	}
	rig_flush(&r);
	omx_net_fault_stats(r.tx, &st);
	CHECK_EQ(r.n, NFRAMES);
	/* A frame is held only when none is held already: stationary rate p / (1 + p). */
	CHECK_RATE(st.reordered, NFRAMES, 0.3 / 1.3);
	/* Every reorder is one swap of neighbours: ..., k+1, k, ... and nothing else moves. */
	size_t swaps = 0;
	int shape_ok = 1;
	for (size_t i = 0; i < r.n; i++) {
		uint32_t s = r.seqs[i];
		int swapped_fwd = i + 1 < r.n && s == i + 1 && r.seqs[i + 1] == i;
		int swapped_back = i > 0 && s + 1 == i && r.seqs[i - 1] == i;
		if (swapped_fwd)
			swaps++;
		if (s != i && !swapped_fwd && !swapped_back)
			shape_ok = 0;
	}
	CHECK(shape_ok);
	/* The last frame may be held with no successor, then released at its deadline: no swap. */
	CHECK(swaps == st.reordered || swaps + 1 == st.reordered);
	printf("reorder=0.3: %llu held, %zu neighbour swaps\n", (unsigned long long)st.reordered, swaps);
	rig_close(&r);

	/* reorder=1: the first frame is held until the second goes out, or until ~1 ms passes. */
	rig_open(&r, "reorder=1,seed=1");
	uint64_t t0 = omx_now_ns();
	rig_send(&r, 0);
	rig_drain(&r);
	CHECK_EQ(r.n, 0);
	uint64_t d = r.tx->ops->next_deadline(r.tx);
	CHECK(d > t0 && d - t0 <= 5000000ull);
	rig_send(&r, 1); /* sent at once, then 0 follows */
	rig_drain(&r);
	CHECK_EQ(r.n, 2);
	CHECK(r.n == 2 && r.seqs[0] == 1 && r.seqs[1] == 0);
	CHECK_EQ(r.tx->ops->next_deadline(r.tx), 0);
	rig_send(&r, 2); /* held: nothing after it */
	rig_drain(&r);
	CHECK_EQ(r.n, 2);
	rig_flush(&r);
	CHECK_EQ(r.n, 3);
	CHECK(r.n == 3 && r.seqs[2] == 2 && r.times[2] - t0 >= 1000000ull);
	rig_close(&r);
}

static void test_delay(void)
{
	struct rig r;
	struct omx_fault_stats st;

	/* Every frame delayed by 3 ms. */
	rig_open(&r, "delay=1,delay_us=3000");
	uint64_t t0 = omx_now_ns();
	rig_send(&r, 0);
	rig_send(&r, 1);
	rig_drain(&r);
	CHECK_EQ(r.n, 0);
	uint64_t d = r.tx->ops->next_deadline(r.tx);
	CHECK(d >= t0 + 3000000ull && d <= omx_now_ns() + 3000000ull);
	/* Poll the wrapper as a progress loop would, until both arrive. */
	for (int i = 0; i < 10000 && r.n < 2; i++) {
		r.tx->ops->recv_burst(r.tx, rig_rx, &r, 0);
		rig_drain(&r);
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
	CHECK_EQ(r.n, 2);
	if (r.n == 2) {
		CHECK(r.seqs[0] == 0 && r.seqs[1] == 1);
		CHECK(r.times[0] - t0 >= 3000000ull);
		CHECK(r.times[0] - t0 < 200000000ull);
	}
	CHECK_EQ(r.tx->ops->next_deadline(r.tx), 0);

	/* Due frames are also released by send() itself, before the new frame. */
	rig_send(&r, 2);
	struct timespec ts = {0, 4000000};
	nanosleep(&ts, NULL);
	rig_send(&r, 3); /* releases 2 (due), holds 3 */
	rig_drain(&r);
	CHECK_EQ(r.n, 3);
	CHECK(r.n == 3 && r.seqs[2] == 2);
	rig_close(&r); /* 3 is still held: freed by close (ASan checks) */

	/* Rate, with a short delay so that held frames do not pile up. */
	rig_open(&r, "delay=0.2,delay_us=100,seed=99");
	for (uint32_t i = 0; i < NFRAMES; i++) {
		rig_send(&r, i);
		if (i % 1000 == 999)
			rig_drain(&r);
	}
	rig_flush(&r);
	omx_net_fault_stats(r.tx, &st);
	CHECK_RATE(st.delayed, NFRAMES, 0.2);
	CHECK_EQ(r.n, NFRAMES);
	size_t late = 0;
	for (size_t i = 1; i < r.n; i++)
		if (r.seqs[i] < r.seqs[i - 1])
			late++;
	CHECK(late > 0); /* delayed frames arrive after later ones */
	printf("delay=0.2: %llu delayed, %zu arrived after a later frame\n", (unsigned long long)st.delayed, late);
	rig_close(&r);
}

/* Run a mixed spec and return a hash of the received sequence; stats in *st. */
static uint64_t run_mixed(const char *spec, struct omx_fault_stats *st, size_t *received)
{
	struct rig r;
	rig_open(&r, spec);
	for (uint32_t i = 0; i < 20000; i++) {
		rig_send(&r, i);
		if (i % 500 == 499)
			rig_drain(&r);
	}
	rig_flush(&r);
	omx_net_fault_stats(r.tx, st);
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < r.n; i++)
		h = (h ^ r.seqs[i]) * 1099511628211ull;
	*received = r.n;
	rig_close(&r);
	return h;
}

static void test_determinism(void)
{
	/* No delay here: the outcome of a delay depends on wall-clock timing, not on the seed. */
	const char *s1 = "drop=0.05,dup=0.05,reorder=0.2,seed=1234";
	const char *s2 = "drop=0.05,dup=0.05,reorder=0.2,seed=1235";
	struct omx_fault_stats a, b, c;
	size_t na, nb, nc;
	uint64_t ha = run_mixed(s1, &a, &na);
	uint64_t hb = run_mixed(s1, &b, &nb);
	uint64_t hc = run_mixed(s2, &c, &nc);
	CHECK(ha == hb);
	CHECK(na == nb);
	CHECK(memcmp(&a, &b, sizeof(a)) == 0);
	CHECK(ha != hc);
	CHECK(a.dropped != c.dropped || a.duplicated != c.duplicated || a.reordered != c.reordered);
	/* Conservation: received = sent - dropped + duplicated. */
	CHECK_EQ(na, a.sent - a.dropped + a.duplicated);
	CHECK_EQ(nc, c.sent - c.dropped + c.duplicated);
}

static void test_misc(void)
{
	struct omx_memnet *hub = omx_memnet_create();
	struct omx_net *plain = omx_net_mem_open(hub, MAC_A, 1500, 0);
	struct omx_fault_stats st;
	memset(&st, 0xff, sizeof(st));
	omx_net_fault_stats(plain, &st); /* not a wrapper: zeros */
	CHECK(st.sent == 0 && st.dropped == 0);
	struct omx_fault_spec spec = {0};
	struct omx_net *w = omx_net_fault_wrap(plain, &spec);
	CHECK(w != NULL);
	CHECK(memcmp(w->mac, MAC_A, 6) == 0);
	CHECK_EQ(w->mtu, 1500);
	CHECK_EQ(w->fd, plain->fd);
	CHECK_EQ(w->ops->next_deadline(w), 0);
	/* Errors of the inner transport come through. */
	uint8_t big[1515];
	make_frame(big, sizeof(big), 0);
	struct iovec v = {big, sizeof(big)};
	CHECK_EQ(w->ops->send(w, &v, 1), -EMSGSIZE);
	w->ops->close(w); /* closes plain too */
	omx_memnet_destroy(hub);
}

/* refuse: the sender is told (-EAGAIN, as from a full queue), the frame goes nowhere, and the
 * other outcomes of a seed's frames stay what they were without it. */
static void test_refuse(void)
{
	struct omx_fault_spec s;
	CHECK_EQ(omx_fault_spec_parse("refuse=0.25,seed=3", &s), 0);
	CHECK(s.refuse == 0.25);
	CHECK_EQ(omx_fault_spec_parse("refuse=2", &s), -EINVAL);
	struct rig r;
	rig_open(&r, "refuse=0.1,seed=13");
	uint64_t refused = 0;
	for (uint32_t i = 0; i < NFRAMES; i++) {
		uint8_t f[64];
		make_frame(f, 64, i);
		struct iovec v = {f, 64};
		int ret = r.tx->ops->send(r.tx, &v, 1);
		refused += ret == -EAGAIN;
		if (ret != 0 && ret != -EAGAIN)
			CHECK_EQ(ret, 0);
		if (i % 1000 == 999)
			rig_drain(&r);
	}
	rig_flush(&r);
	struct omx_fault_stats st;
	omx_net_fault_stats(r.tx, &st);
	CHECK_EQ(st.refused, refused);
	CHECK_RATE(st.refused, NFRAMES, 0.1);
	CHECK_EQ(r.n, NFRAMES - refused);
	printf("refuse=0.1: %llu of %d refused\n", (unsigned long long)refused, NFRAMES);
	rig_close(&r);
}

int main(void)
{
	test_parse();
	test_refuse();
	test_drop_dup_rates();
	test_reorder();
	test_delay();
	test_determinism();
	test_misc();
	return unit_finish(NULL);
}
