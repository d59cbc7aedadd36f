/*
 * test_core_limits.c - bounded resources under a flood (issue: hardening). Over the in-memory
 * hub, endpoint B floods endpoint A with unexpected messages far beyond A's per-partner limit
 * (OMX_UNEXP_PEER_MAX_KB) while A posts nothing: A's unexpected memory stays under both limits
 * and the refusals are counted; a third endpoint C still gets its messages through to A at
 * once; when A finally posts its receives, every one of B's messages arrives, intact and in order
 * (refused messages were retransmitted, nothing was lost), and all charges are given back.
 * Then C floods A with 3,000 connect requests: all answered, none leaves state behind in A.
 * Then C fills its send window to A (A not progressing): mediums sent after wait for it, not
 * buffered (omx_ibuffered 0) until they leave.
 * Also: the receive rings' default sizes (slots, bounded bytes), OMX_RX_RING_KB and
 * OMX_SHARED_RING_KB.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "open-mx.h"
#include "core/core.h"
#include "core/counters.h"
#include "core/testhooks.h"
#include "shm/shm.h"

#define UNIT_PUMP pump
#include "unit_check.h"

#define PEER_MAX_KB 256
#define EP_MAX_KB 1024
#define FLOOD 120     /* messages from B */
#define MSG_LEN 8000  /* a medium: 120 x 8000 B = 960 KB, almost 4x B's share */
#define OTHERS 20     /* messages from C */

static omx_endpoint_t A, B, C;

static void pump(void)
{
	omx_progress(A);
	omx_progress(B);
	omx_progress(C);
}

static void pump_ms(int ms)
{
	uint64_t end = omx_now_ns() + (uint64_t)ms * 1000000u;
	while (omx_now_ns() < end)
		pump();
}

static omx_endpoint_addr_t connect_to_a(omx_endpoint_t from)
{
	uint64_t nic_a;
	omx_request_t r;
	omx_status_t st;
	omx_endpoint_addr_t addr;
	memset(&addr, 0, sizeof(addr));
	CHECK(omx_board_number_to_nic_id(0, &nic_a) == OMX_SUCCESS);
	CHECK(omx_iconnect(from, nic_a, 0, 0x77, 0, NULL, &r) == OMX_SUCCESS);
	CHECK(wait_req(from, &r, &st, 3000) && st.code == OMX_SUCCESS);
	return st.addr;
}

static unsigned live_requests(omx_endpoint_t ep)
{
	unsigned n = 0;
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &ep->all_reqs) n++;
	return n;
}

/* A flood of connect requests costs the target nothing that lasts: each is answered from the
 * partner's state, no request is kept. */
static void connect_flood(void)
{
	enum { N = 3000, BATCH = 100 };
	uint64_t nic_a;
	CHECK(omx_board_number_to_nic_id(0, &nic_a) == OMX_SUCCESS);
	unsigned before = live_requests(A);
	int ok = 0;
	for (int b = 0; b < N / BATCH; b++) {
		omx_request_t r[BATCH];
		omx_status_t st;
		for (int i = 0; i < BATCH; i++)
			CHECK(omx_iconnect(C, nic_a, 0, 0x77, 0, NULL, &r[i]) == OMX_SUCCESS);
		for (int i = 0; i < BATCH; i++) {
			uint32_t res = 0;
			for (int k = 0; k < 100000 && !res; k++) {
				omx_test(C, &r[i], &st, &res);
				if (!res)
					pump();
			}
			ok += res && st.code == OMX_SUCCESS;
		}
	}
	printf("connect flood: %d of %d connects answered, target's live requests %u -> %u\n", ok, N, before,
	       live_requests(A));
	CHECK(ok == N);
	CHECK(live_requests(A) == before);
}

static unsigned unexp_count(omx_endpoint_t ep)
{
	unsigned n = 0;
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &ep->unexp) n++;
	return n;
}

/* Receive ring sizing: 1024 slots by default, at most 16 MiB; OMX_RX_RING_KB wins when set. */
static void ring_sizing(void)
{
	CHECK(omx__rx_ring_frames(0, 1500) == OMX_RX_RING_AUTO_SLOTS);
	CHECK(omx__rx_ring_frames(0, 9000) == OMX_RX_RING_AUTO_SLOTS);
	CHECK((uint64_t)omx__rx_ring_frames(0, 9000) * (9000 + 128) <= OMX_RX_RING_AUTO_MAX);
	unsigned big = omx__rx_ring_frames(0, 65535);
	CHECK(big < OMX_RX_RING_AUTO_SLOTS && (uint64_t)big * (65535 + 128) <= OMX_RX_RING_AUTO_MAX &&
	      (uint64_t)(big + 1) * (65535 + 128) > OMX_RX_RING_AUTO_MAX);
	CHECK(omx__rx_ring_frames(16384, 1500) == (16384u * 1024u) / (1500 + 128));
	CHECK(omx__rx_ring_frames(65536, 65535) == (65536ull * 1024u) / (65535 + 128)); /* past the auto cap */
}

/* Shared-memory ring: 64 slots by default whatever the MTU (128 until stop 46);
 * OMX_SHARED_RING_KB sets bytes. Checked on real rings (slot count as the ring made it). */
static void shared_ring_sizing(void)
{
	static const uint32_t mtus[] = { 1500, 9000, 65535 };
	static const uint32_t want[] = { 64, 64, 64 };
	uint8_t mac[6] = { 2, 0, 0, 0x5a, 0, 1 };
	for (unsigned i = 0; i < 3; i++) {
		int err = 0;
		struct omx_shm_ring *r = omx_shm_ring_create(mac, (uint8_t)i, mtus[i] + 64,
							     (uint32_t)omx__shared_ring_bytes(0, mtus[i]), 1, &err);
		CHECK(r && omx_shm_ring_slots(r) == want[i]);
		if (r)
			omx_shm_ring_close(r);
	}
	CHECK(omx__shared_ring_bytes(0, 9000) <= OMX_SHARED_RING_AUTO_MAX);
	CHECK(omx__shared_ring_bytes(8192, 9000) == 8192u * 1024u);
	int err = 0;
	struct omx_shm_ring *r = omx_shm_ring_create(mac, 3, 9000 + 64, (uint32_t)omx__shared_ring_bytes(8192, 9000), 1, &err);
	CHECK(r && omx_shm_ring_slots(r) == 512); /* the old default: 8 MiB of 9 KB slots */
	if (r)
		omx_shm_ring_close(r);
}

/* A medium send waiting for the window (its partner has acked none of a full window of sends)
 * still reads the caller's buffer: omx_ibuffered says 0 until it leaves, then 1, and what arrives
 * is the buffer as it is when the send leaves (here rewritten while it waited). A medium that
 * left at once is buffered at once (its copy for retransmission follows its transmission). */
static void throttled_medium(omx_endpoint_t from, omx_endpoint_addr_t to)
{
	enum { W = OMX_THROTTLE_WINDOW, M = 3 };
	static omx_request_t tiny[W], tiny_r[W];
	static uint8_t tiny_buf[W];
	static uint8_t mb[M][MSG_LEN], mr[M][MSG_LEN], expect[M][MSG_LEN];
	omx_request_t ms[M], mrq[M];
	omx_status_t st;
	uint32_t res = 2;
	uint8_t t = 0x5a;
	unit_fill(mb[0], MSG_LEN, 7001);
	CHECK(omx_isend(from, mb[0], MSG_LEN, to, 0xE000, NULL, &ms[0]) == OMX_SUCCESS);
	CHECK(omx_ibuffered(from, &ms[0], &res) == OMX_SUCCESS && res == 1);
	int posted = 0;
	for (int i = 0; i < W - 1; i++) /* the rest of the window; the partner does not progress */
		posted += omx_isend(from, &t, 1, to, 0xD0000 + (uint64_t)i, NULL, &tiny[i]) == OMX_SUCCESS;
	CHECK(posted == W - 1);
	/* The whole window is due for resending after the resend delay: one timer run resends at
	 * most 64 of it (OMX_RESEND_BURST_MAX), the rest goes at the next runs. */
	uint64_t rt0 = omx__counters_values(from->board)[OMX_C_X_RETRANSMIT_MSG];
	usleep(25000);
	omx_progress(from);
	uint64_t burst = omx__counters_values(from->board)[OMX_C_X_RETRANSMIT_MSG] - rt0;
	printf("resend burst: %llu of %d due messages resent by one call\n", (unsigned long long)burst, W);
	CHECK(burst > 0 && burst <= 64);
	for (int k = 1; k < M; k++) {
		unit_fill(mb[k], MSG_LEN, 7001u + (uint64_t)k);
		CHECK(omx_isend(from, mb[k], MSG_LEN, to, 0xE000 + (uint64_t)k, NULL, &ms[k]) == OMX_SUCCESS);
		omx_progress(from);
		res = 2;
		CHECK(omx_ibuffered(from, &ms[k], &res) == OMX_SUCCESS && res == 0);
		CHECK(omx_test(from, &ms[k], &st, &res) == OMX_SUCCESS && res == 0);
	}
	memcpy(expect, mb, sizeof(mb));
	unit_fill(mb[M - 1], MSG_LEN, 9999); /* allowed: not buffered yet */
	memcpy(expect[M - 1], mb[M - 1], MSG_LEN);
	posted = 0;
	for (int i = 0; i < W - 1; i++)
		posted += omx_irecv(A, &tiny_buf[i], 1, 0xD0000 + (uint64_t)i, ~0ull, NULL, &tiny_r[i]) == OMX_SUCCESS;
	CHECK(posted == W - 1);
	for (int k = 0; k < M; k++)
		CHECK(omx_irecv(A, mr[k], MSG_LEN, 0xE000 + (uint64_t)k, ~0ull, NULL, &mrq[k]) == OMX_SUCCESS);
	int ok = 0;
	for (int k = 0; k < M; k++)
		ok += wait_req(A, &mrq[k], &st, 20000) && st.code == OMX_SUCCESS && !memcmp(mr[k], expect[k], MSG_LEN);
	CHECK(ok == M);
	omx_progress(from);
	for (int k = 0; k < M; k++) { /* left: buffered (checked before omx_test collects them) */
		res = 2;
		CHECK(omx_ibuffered(from, &ms[k], &res) == OMX_SUCCESS && res == 1);
		CHECK(wait_req(from, &ms[k], &st, 5000) && st.code == OMX_SUCCESS);
	}
	int tiny_ok = 0;
	for (int i = 0; i < W - 1; i++)
		tiny_ok += wait_req(A, &tiny_r[i], &st, 5000) && st.code == OMX_SUCCESS && tiny_buf[i] == 0x5a;
	CHECK(tiny_ok == W - 1);
	for (int i = 0; i < W - 1; i++)
		(void)wait_req(from, &tiny[i], &st, 5000);
}

int main(void)
{
	ring_sizing();
	char dir[] = "/tmp/omx-test-XXXXXX";
	if (unit_lock_dir(dir) < 0)
		return 2;
	setenv("OMX_SHM_DIR", dir, 1);
	shared_ring_sizing();
	setenv("OMX_IFACES", "mem0,mem1,mem2", 1);
	setenv("OMX_HOSTNAME", "unit", 1);
	setenv("OMX_RESEND_DELAY_MS", "20", 1);
	setenv("OMX_PROGRESS_THREAD", "0", 1);
	char v[32];
	snprintf(v, sizeof(v), "%d", PEER_MAX_KB);
	setenv("OMX_UNEXP_PEER_MAX_KB", v, 1);
	snprintf(v, sizeof(v), "%d", EP_MAX_KB);
	setenv("OMX_UNEXP_MAX_KB", v, 1);
	struct omx_memnet *hub = omx_memnet_create();
	omx__test_set_memnet(hub, 9000);
	CHECK(omx_init() == OMX_SUCCESS);
	CHECK(omx_open_endpoint(0, 0, 0x77, NULL, 0, &A) == OMX_SUCCESS);
	CHECK(omx_open_endpoint(1, 0, 0x77, NULL, 0, &B) == OMX_SUCCESS);
	CHECK(omx_open_endpoint(2, 0, 0x77, NULL, 0, &C) == OMX_SUCCESS);
	omx_endpoint_addr_t b2a = connect_to_a(B), c2a = connect_to_a(C);

	/* The flood: B sends everything at once, A posts nothing. */
	static uint8_t sbuf[FLOOD][MSG_LEN], rbuf[FLOOD][MSG_LEN];
	omx_request_t sreq[FLOOD], rreq[FLOOD];
	omx_status_t st;
	for (int i = 0; i < FLOOD; i++) {
		unit_fill(sbuf[i], MSG_LEN, (uint64_t)i + 1);
		CHECK(omx_isend(B, sbuf[i], MSG_LEN, b2a, 0xB000 + (uint64_t)i, NULL, &sreq[i]) == OMX_SUCCESS);
	}
	pump_ms(400); /* many resend rounds (20 ms) */
	unsigned stored = unexp_count(A);
	uint32_t refused = (uint32_t)omx__counters_values(A->board)[OMX_C_UNEXP_QUEUE_FULL];
	printf("flood: %u of %d messages held unexpected, %llu bytes charged, %u refusals counted\n", stored, FLOOD,
	       (unsigned long long)A->unexp_bytes, refused);
	CHECK(A->unexp_bytes <= (uint64_t)PEER_MAX_KB * 1024u);
	CHECK((uint64_t)stored * MSG_LEN <= (uint64_t)PEER_MAX_KB * 1024u);
	CHECK(stored >= (PEER_MAX_KB * 1024u) / (MSG_LEN + 2048u)); /* the share is used, not just refused */
	CHECK(refused > 0);

	/* Another partner is not held up by B's flood. */
	static uint8_t cs[OTHERS][MSG_LEN], cr[OTHERS][MSG_LEN];
	omx_request_t csr[OTHERS], crr[OTHERS];
	for (int i = 0; i < OTHERS; i++) {
		unit_fill(cs[i], MSG_LEN, 1000u + (uint64_t)i);
		CHECK(omx_isend(C, cs[i], MSG_LEN, c2a, 0xC000 + (uint64_t)i, NULL, &csr[i]) == OMX_SUCCESS);
	}
	pump_ms(50);
	int c_ok = 0;
	for (int i = 0; i < OTHERS; i++) {
		CHECK(omx_irecv(A, cr[i], MSG_LEN, 0xC000 + (uint64_t)i, ~0ull, NULL, &crr[i]) == OMX_SUCCESS);
		c_ok += wait_req(A, &crr[i], &st, 2000) && st.code == OMX_SUCCESS && !memcmp(cr[i], cs[i], MSG_LEN);
	}
	CHECK(c_ok == OTHERS);
	for (int i = 0; i < OTHERS; i++)
		CHECK(wait_req(C, &csr[i], &st, 2000) && st.code == OMX_SUCCESS);

	/* A drains B's messages: all of them, intact, in order (each receive matches one exactly,
	 * and the order of completion must follow B's sends). */
	for (int i = 0; i < FLOOD; i++)
		CHECK(omx_irecv(A, rbuf[i], MSG_LEN, 0xB000 + (uint64_t)i, ~0ull, NULL, &rreq[i]) == OMX_SUCCESS);
	int b_ok = 0;
	for (int i = 0; i < FLOOD; i++)
		b_ok += wait_req(A, &rreq[i], &st, 20000) && st.code == OMX_SUCCESS && st.xfer_length == MSG_LEN &&
			!memcmp(rbuf[i], sbuf[i], MSG_LEN);
	printf("drain: %d of %d messages from the flooding partner received intact\n", b_ok, FLOOD);
	CHECK(b_ok == FLOOD);
	int sent_ok = 0;
	for (int i = 0; i < FLOOD; i++)
		sent_ok += wait_req(B, &sreq[i], &st, 5000) && st.code == OMX_SUCCESS;
	CHECK(sent_ok == FLOOD);
	CHECK(A->unexp_bytes == 0);
	CHECK(unexp_count(A) == 0);
	connect_flood();
	throttled_medium(C, c2a);

	CHECK(omx_close_endpoint(A) == OMX_SUCCESS);
	CHECK(omx_close_endpoint(B) == OMX_SUCCESS);
	CHECK(omx_close_endpoint(C) == OMX_SUCCESS);
	CHECK(omx_finalize() == OMX_SUCCESS);
	omx_memnet_destroy(hub);
	return unit_finish(dir);
}
