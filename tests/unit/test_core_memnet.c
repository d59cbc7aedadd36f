/*
 * test_core_memnet.c - the core's protocol over the in-memory hub: two boards ("mem0", "mem1")
 * in one process, one endpoint on each, every size class, matching rules, unexpected messages,
 * probe/peek/cancel/test_any, truncation, self, issend, vectors; then the same traffic through
 * the fault-injecting transport (drop, duplicate, reorder, delay) with payload checksums.
 * Usage: test_core_memnet [faults]   (no argument: clean link, then a lossy run)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "open-mx.h"
#include "core/core.h"
#include "core/testhooks.h"

#define UNIT_PUMP pump
#include "unit_check.h"

static omx_endpoint_t A, B;
static omx_endpoint_addr_t a2b, b2a;

static uint64_t rng_state = 42;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void pump(void)
{
	omx_progress(A);
	omx_progress(B);
}

static void fill(uint8_t *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)((seed * 2654435761u) >> 13 ^ i * 131);
}

static void test_connect(void)
{
	uint64_t nic_b, nic_a;
	CHECK(omx_board_number_to_nic_id(1, &nic_b) == OMX_SUCCESS);
	CHECK(omx_board_number_to_nic_id(0, &nic_a) == OMX_SUCCESS);
	omx_request_t ra, rb;
	CHECK(omx_iconnect(A, nic_b, 1, 0x1234, 77, NULL, &ra) == OMX_SUCCESS);
	omx_status_t st;
	CHECK(wait_req(A, &ra, &st, 2000));
	CHECK(st.code == OMX_SUCCESS && st.match_info == 77);
	a2b = st.addr;
	CHECK(omx_iconnect(B, nic_a, 0, 0x1234, 0, NULL, &rb) == OMX_SUCCESS);
	CHECK(wait_req(B, &rb, &st, 2000));
	CHECK(st.code == OMX_SUCCESS);
	b2a = st.addr;
	uint64_t nic;
	uint32_t eid, sess;
	omx_decompose_endpoint_addr_with_session(a2b, &nic, &eid, &sess);
	CHECK(nic == nic_b && eid == 1);
	/* wrong key */
	CHECK(omx_iconnect(A, nic_b, 1, 0x9999, 0, NULL, &ra) == OMX_SUCCESS);
	CHECK(wait_req(A, &ra, &st, 2000));
	CHECK(st.code == OMX_REMOTE_ENDPOINT_BAD_CONNECTION_KEY);
	/* unknown nic id */
	CHECK(omx_iconnect(A, 0x0a0b0c0d0e0full, 1, 0x1234, 0, NULL, &ra) == OMX_NIC_ID_NOT_FOUND);
}

/* One message of len bytes A->B, checksum verified; recv buffer len+extra. */
static int one_message(size_t len, int issend, int posted_first)
{
	uint8_t *s = malloc(len + 1), *r = calloc(1, len + 1);
	uint64_t match = rnd();
	fill(s, len, match);
	omx_request_t sr, rr = NULL;
	omx_status_t st;
	int ok = 1;
	if (posted_first)
		ok &= omx_irecv(B, r, len, match, ~0ull, (void *)0x55, &rr) == OMX_SUCCESS;
	ok &= (issend ? omx_issend : omx_isend)(A, s, len, a2b, match, (void *)0x66, &sr) == OMX_SUCCESS;
	if (!posted_first) {
		for (int i = 0; i < 50; i++)
			pump();
		ok &= omx_irecv(B, r, len, match, ~0ull, (void *)0x55, &rr) == OMX_SUCCESS;
	}
	int got = wait_req(B, &rr, &st, 20000);
	if (!got)
		fprintf(stderr, "  receive of %zu bytes did not complete\n", len);
	ok &= got;
	ok &= st.code == OMX_SUCCESS && st.msg_length == len && st.xfer_length == len && st.match_info == match &&
	      st.context == (void *)0x55;
	ok &= memcmp(s, r, len) == 0;
	got = wait_req(A, &sr, &st, 20000);
	if (!got || st.code)
		fprintf(stderr, "  send of %zu bytes: done %d code %d\n", len, got, got ? (int)st.code : -1);
	ok &= got;
	ok &= st.code == OMX_SUCCESS && st.context == (void *)0x66;
	free(s);
	free(r);
	if (!ok)
		fprintf(stderr, "  message len %zu issend %d posted %d failed\n", len, issend, posted_first);
	return ok;
}

static void test_sizes(void)
{
	size_t sizes[] = { 0, 1, 32, 33, 128, 129, 4096, 8191, 8192, 8193, 32768, 32769, 65536, 262144, 300000, 1 << 20,
			   (4 << 20) + 3 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		CHECK(one_message(sizes[i], 0, 1));
		CHECK(one_message(sizes[i], 0, 0));
		CHECK(one_message(sizes[i], 1, 1));
	}
}

static void test_truncation_and_vectors(void)
{
	uint8_t s[20000], r[5000];
	fill(s, sizeof(s), 9);
	omx_request_t sr, rr;
	omx_status_t st;
	omx_set_error_handler(B, OMX_ERRORS_RETURN);
	omx_set_error_handler(A, OMX_ERRORS_RETURN);
	size_t lens[] = { 20, 100, 20000 };
	for (int k = 0; k < 3; k++) {
		CHECK(omx_irecv(B, r, 10, 5, ~0ull, NULL, &rr) == OMX_SUCCESS);
		CHECK(omx_isend(A, s, lens[k], a2b, 5, NULL, &sr) == OMX_SUCCESS);
		CHECK(wait_req(B, &rr, &st, 5000));
		CHECK(st.code == OMX_MESSAGE_TRUNCATED && st.xfer_length == 10 && st.msg_length == lens[k]);
		CHECK(memcmp(r, s, 10) == 0);
		CHECK(wait_req(A, &sr, &st, 5000));
	}
	/* large issend truncated: the sender learns it */
	CHECK(omx_irecv(B, r, 3000, 6, ~0ull, NULL, &rr) == OMX_SUCCESS);
	CHECK(omx_issend(A, s, 20000, a2b, 6, NULL, &sr) == OMX_SUCCESS);
	CHECK(wait_req(B, &rr, &st, 5000));
	CHECK(st.code == OMX_MESSAGE_TRUNCATED && st.xfer_length == 3000);
	CHECK(wait_req(A, &sr, &st, 5000));
	CHECK(st.code == OMX_MESSAGE_TRUNCATED && st.xfer_length == 3000);
	/* vectors: 3 send segments (one empty) into 4 receive segments */
	omx_seg_t ss[3] = { { s, 7000 }, { NULL, 0 }, { s + 7000, 13000 } };
	static uint8_t r1[100], r2[9000], r3[5000], r4[20000];
	omx_seg_t rs[4] = { { r1, 100 }, { r2, 9000 }, { r3, 5000 }, { r4, 20000 } };
	for (int large = 0; large < 2; large++) {
		memset(r4, 0, sizeof(r4));
		CHECK(omx_irecvv(B, rs, 4, 8, ~0ull, NULL, &rr) == OMX_SUCCESS);
		CHECK((large ? omx_issendv : omx_isendv)(A, ss, 3, a2b, 8, NULL, &sr) == OMX_SUCCESS);
		CHECK(wait_req(B, &rr, &st, 5000));
		CHECK(st.code == OMX_SUCCESS && st.xfer_length == 20000);
		CHECK(memcmp(r1, s, 100) == 0 && memcmp(r2, s + 100, 9000) == 0 && memcmp(r3, s + 9100, 5000) == 0 &&
		      memcmp(r4, s + 14100, 5900) == 0);
		CHECK(wait_req(A, &sr, &st, 5000));
	}
	/* two segments each (a request keeps up to two itself: a provider's header and payload) */
	omx_seg_t s2[2] = { { s, 9 }, { s + 9, 91 } }, r2s[2] = { { r1, 40 }, { r2, 9000 } };
	memset(r2, 0, 100);
	CHECK(omx_irecvv(B, r2s, 2, 9, ~0ull, NULL, &rr) == OMX_SUCCESS);
	CHECK(omx_isendv(A, s2, 2, a2b, 9, NULL, &sr) == OMX_SUCCESS);
	CHECK(wait_req(B, &rr, &st, 5000));
	CHECK(st.code == OMX_SUCCESS && st.xfer_length == 100 && memcmp(r1, s, 40) == 0 && memcmp(r2, s + 40, 60) == 0);
	CHECK(wait_req(A, &sr, &st, 5000));
	/* more than 4 GiB in all, or no segment array: refused before anything is read or allocated
	 * (LeakSanitizer checks the latter under ASan) */
	omx_seg_t huge[3] = { { s, 0xffffffffu }, { s, 0xffffffffu }, { s, 2 } };
	CHECK(omx_isendv(A, huge, 3, a2b, 0, NULL, &sr) == OMX_SEGMENTS_BAD_COUNT);
	CHECK(omx_irecvv(B, huge, 3, 0, ~0ull, NULL, &rr) == OMX_SEGMENTS_BAD_COUNT);
	CHECK(omx_irecvv(B, huge, 2, 0, ~0ull, NULL, &rr) == OMX_SEGMENTS_BAD_COUNT);
	CHECK(omx_isendv(A, NULL, 2, a2b, 0, NULL, &sr) == OMX_SEGMENTS_BAD_COUNT);
	omx_seg_t many[257];
	CHECK(omx_isendv(A, many, 257, a2b, 0, NULL, &sr) == OMX_SEGMENTS_BAD_COUNT);
	CHECK(omx_irecv(B, r, 10, 1, 0, NULL, &rr) == OMX_BAD_MATCH_MASK);
}

static void test_matching_and_queues(void)
{
	uint8_t buf[8][64];
	omx_request_t sr[8], rr[8];
	omx_status_t st;
	uint32_t res;
	/* ordering: 8 messages with the same match are received in order */
	for (int i = 0; i < 8; i++) {
		memset(buf[i], i, 64);
		CHECK(omx_isend(A, buf[i], 40 + i, a2b, 0xAB00, NULL, &sr[i]) == OMX_SUCCESS);
	}
	for (int i = 0; i < 200; i++)
		pump();
	/* probe sees the first unexpected without consuming it */
	CHECK(omx_iprobe(B, 0xAB00, ~0ull, &st, &res) == OMX_SUCCESS && res == 1 && st.msg_length == 40);
	CHECK(omx_iprobe(B, 0xCD00, ~0ull, &st, &res) == OMX_SUCCESS && res == 0);
	uint8_t rb[8][64];
	for (int i = 0; i < 8; i++)
		CHECK(omx_irecv(B, rb[i], 64, 0xAB00, 0xFF00, NULL, &rr[i]) == OMX_SUCCESS);
	for (int i = 0; i < 8; i++) {
		CHECK(wait_req(B, &rr[i], &st, 2000));
		CHECK(st.msg_length == (uint32_t)(40 + i) && rb[i][0] == i);
	}
	for (int i = 0; i < 8; i++)
		CHECK(wait_req(A, &sr[i], &st, 2000));
	/* cancel an unmatched receive; a matched/completed one cannot be */
	CHECK(omx_irecv(B, rb[0], 64, 0x77, ~0ull, NULL, &rr[0]) == OMX_SUCCESS);
	CHECK(omx_cancel(B, &rr[0], &res) == OMX_SUCCESS && res == 1 && rr[0] == NULL);
	CHECK(omx_cancel(A, &sr[0], &res) != OMX_SUCCESS || 1); /* sends: BAD_REQUEST through handler */
	/* test_any / peek */
	CHECK(omx_irecv(B, rb[1], 64, 0x99, ~0ull, (void *)7, &rr[1]) == OMX_SUCCESS);
	CHECK(omx_isend(A, buf[1], 10, a2b, 0x99, NULL, NULL) == OMX_SUCCESS);
	omx_request_t peeked = NULL;
	uint64_t end = omx_now_ns() + 2000000000ull;
	res = 0;
	while (!res && omx_now_ns() < end) {
		pump();
		omx_ipeek(B, &peeked, &res);
	}
	CHECK(res == 1 && peeked == rr[1]);
	CHECK(omx_test_any(B, 0x99, ~0ull, &st, &res) == OMX_SUCCESS && res == 1 && st.context == (void *)7);
	CHECK(omx_test_any(B, 0x99, ~0ull, &st, &res) == OMX_SUCCESS && res == 0);
	/* wait with a timeout returns result 0, success */
	CHECK(omx_irecv(B, rb[2], 64, 0x1111, ~0ull, NULL, &rr[2]) == OMX_SUCCESS);
	CHECK(omx_wait(B, &rr[2], &st, &res, 50) == OMX_SUCCESS && res == 0);
	CHECK(omx_cancel_notest(B, &rr[2], &res) == OMX_SUCCESS && res == 1);
	CHECK(omx_wait(B, &rr[2], &st, &res, 100) == OMX_SUCCESS && res == 1 && st.code == OMX_CANCELLED);
}

static int handler_calls;
static omx_unexp_handler_action_t unexp_handler(void *ctx, omx_endpoint_addr_t src, uint64_t match, uint32_t len,
						void *data)
{
	handler_calls++;
	if (match == 0xD15CA4D)
		return OMX_UNEXP_HANDLER_RECV_FINISHED;
	if (match == 0x5E1F && data && len == 3 && !memcmp(data, "abc", 3))
		omx_irecv(B, ctx, 3, match, ~0ull, NULL, NULL);
	return OMX_UNEXP_HANDLER_RECV_CONTINUE;
}

static void test_unexp_handler_and_self(void)
{
	static char got[8];
	omx_request_t sr, rr;
	omx_status_t st;
	omx_register_unexp_handler(B, unexp_handler, got);
	CHECK(omx_isend(A, "abc", 3, a2b, 0x5E1F, NULL, &sr) == OMX_SUCCESS);
	CHECK(wait_req(A, &sr, &st, 2000));
	for (int i = 0; i < 100 && memcmp(got, "abc", 3); i++)
		pump();
	CHECK(memcmp(got, "abc", 3) == 0);
	/* a large message discarded by the handler completes the sender as truncated (0 bytes) */
	static uint8_t big[200000];
	CHECK(omx_isend(A, big, sizeof(big), a2b, 0xD15CA4D, NULL, &sr) == OMX_SUCCESS);
	CHECK(wait_req(A, &sr, &st, 5000));
	CHECK(st.code == OMX_MESSAGE_TRUNCATED && st.xfer_length == 0);
	CHECK(handler_calls >= 2);
	omx_register_unexp_handler(B, NULL, NULL);
	/* self: unexpected first, then matched; the send completes only then */
	omx_endpoint_addr_t me;
	omx_get_endpoint_addr(A, &me);
	char sb[6] = "hello", rbuf[6] = { 0 };
	CHECK(omx_isend(A, sb, 6, me, 0x5E1F5E1F, NULL, &sr) == OMX_SUCCESS);
	uint32_t res;
	CHECK(omx_test(A, &sr, &st, &res) == OMX_SUCCESS && res == 0);
	CHECK(omx_irecv(A, rbuf, 6, 0x5E1F5E1F, ~0ull, NULL, &rr) == OMX_SUCCESS);
	CHECK(wait_req(A, &rr, &st, 100) && !strcmp(rbuf, "hello"));
	CHECK(wait_req(A, &sr, &st, 100) && st.xfer_length == 6);
	/* self connect completes at once */
	uint64_t nic_a;
	omx_board_number_to_nic_id(0, &nic_a);
	omx_endpoint_addr_t self2;
	CHECK(omx_connect(A, nic_a, 0, 0x1234, 100, &self2) == OMX_SUCCESS);
}

/* A NOTIFY sent as soon as its RNDV is matched (nothing to pull: a receive buffer of 0 bytes, or
 * the unexpected handler discarded the message) must carry the ack of that RNDV: with the
 * delayed-ack and resend timers at an hour, a sender that needed either would never complete. */
/* The endpoints' progress threads read these timers under their endpoint's lock. */
static void set_ack_resend_delays(uint64_t ack, uint64_t resend)
{
	omx__eplock(&A->lock);
	omx__eplock(&B->lock);
	omx__cfg.ack_delay_ns = ack;
	omx__cfg.resend_delay_ns = resend;
	omx__epunlock(&B->lock);
	omx__epunlock(&A->lock);
}

static void test_notify_acks_rndv(void)
{
	uint64_t ack = omx__cfg.ack_delay_ns, resend = omx__cfg.resend_delay_ns;
	set_ack_resend_delays(3600ull * 1000000000ull, 3600ull * 1000000000ull);
	static uint8_t big[200000];
	omx_request_t sr, rr;
	omx_status_t st;
	CHECK(omx_irecv(B, NULL, 0, 0xA0, ~0ull, NULL, &rr) == OMX_SUCCESS);
	CHECK(omx_isend(A, big, sizeof(big), a2b, 0xA0, NULL, &sr) == OMX_SUCCESS);
	CHECK(wait_req(B, &rr, &st, 5000) && st.code == OMX_MESSAGE_TRUNCATED && st.xfer_length == 0);
	CHECK(wait_req(A, &sr, &st, 5000) && st.code == OMX_MESSAGE_TRUNCATED && st.xfer_length == 0);
	omx_register_unexp_handler(B, unexp_handler, NULL);
	CHECK(omx_isend(A, big, sizeof(big), a2b, 0xD15CA4D, NULL, &sr) == OMX_SUCCESS);
	CHECK(wait_req(A, &sr, &st, 5000) && st.code == OMX_MESSAGE_TRUNCATED && st.xfer_length == 0);
	omx_register_unexp_handler(B, NULL, NULL);
	set_ack_resend_delays(ack, resend);
}

/* Self communication for every size class, posted first and unexpected first, isend and issend. */
static void test_self_sizes(void)
{
	omx_endpoint_addr_t me;
	omx_get_endpoint_addr(A, &me);
	size_t sizes[] = { 0, 7, 32, 100, 128, 5000, 32768, 40000, 1 << 20, (4 << 20) + 1 };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (int mode = 0; mode < 4; mode++) {
			size_t n = sizes[k];
			uint8_t *s = malloc(n + 1), *r = calloc(1, n + 1);
			fill(s, n, k * 4 + (size_t)mode);
			omx_request_t sr, rr;
			omx_status_t st;
			int posted_first = mode & 1, sync = mode >> 1;
			if (posted_first)
				omx_irecv(A, r, n, 0x5E1F00 + k, ~0ull, NULL, &rr);
			CHECK((sync ? omx_issend : omx_isend)(A, s, n, me, 0x5E1F00 + k, NULL, &sr) == OMX_SUCCESS);
			if (!posted_first)
				omx_irecv(A, r, n, 0x5E1F00 + k, ~0ull, NULL, &rr);
			CHECK(wait_req(A, &rr, &st, 2000) && st.xfer_length == n && memcmp(s, r, n) == 0);
			CHECK(wait_req(A, &sr, &st, 2000) && st.code == OMX_SUCCESS && st.xfer_length == n);
			free(s);
			free(r);
		}
	}
}

/* An endpoint closed with requests in flight: posted receives, a large send nobody matched,
 * eager sends unacked, a pending connect. Nothing may leak or be touched afterwards (ASan/LSan). */
static void test_close_in_flight(void)
{
	omx_endpoint_t C;
	omx_request_t r1, r2, r3, r4;
	static uint8_t big[300000], small[100];
	CHECK(omx_open_endpoint(0, 6, 0x1234, NULL, 0, &C) == OMX_SUCCESS);
	uint64_t nic_b;
	omx_board_number_to_nic_id(1, &nic_b);
	omx_endpoint_addr_t c2b, garbage;
	omx_status_t cst;
	CHECK(omx_iconnect(C, nic_b, 1, 0x1234, 0, NULL, &r1) == OMX_SUCCESS);
	CHECK(wait_req(C, &r1, &cst, 2000) && cst.code == OMX_SUCCESS);
	c2b = cst.addr;
	/* an address that is garbage, or of another endpoint, is refused without being dereferenced */
	garbage.data[0] = 1;
	garbage.data[1] = 0x12345678;
	omx_set_error_handler(C, OMX_ERRORS_RETURN);
	CHECK(omx_isend(C, small, 1, garbage, 0, NULL, &r1) == OMX_BAD_ENDPOINT);
	CHECK(omx_isend(C, small, 1, a2b, 0, NULL, &r1) == OMX_BAD_ENDPOINT);
	CHECK(omx_irecv(C, small, sizeof(small), 1, ~0ull, NULL, &r1) == OMX_SUCCESS);
	CHECK(omx_isend(C, big, sizeof(big), c2b, 0xC105ED, NULL, &r2) == OMX_SUCCESS);
	CHECK(omx_isend(C, small, sizeof(small), c2b, 0xC105ED, NULL, &r3) == OMX_SUCCESS);
	CHECK(omx_iconnect(C, nic_b, 9, 0x1234, 0, NULL, &r4) == OMX_SUCCESS);
	for (int i = 0; i < 20; i++)
		pump();
	CHECK(omx_close_endpoint(C) == OMX_SUCCESS);
	/* B still has C's messages unexpected; drain them (the large one's pull gets no answer and is
	 * cancelled by dropping the partner) */
	omx_status_t st;
	uint32_t res;
	CHECK(omx_iprobe(B, 0xC105ED, ~0ull, &st, &res) == OMX_SUCCESS);
	omx_disconnect(B, st.addr);
}

/* A large send that its receiver acked (the RNDV) but never matched: while the receiver lives,
 * the sender's liveness probes are answered and the send keeps waiting; once the receiver is gone
 * (closed: nobody answers on the hub) the send fails unreachable after the resend budget instead
 * of waiting for its NOTIFY for ever (connect.c, omx__notify_watch). */
static void test_owed_notify(void)
{
	omx_endpoint_t D;
	omx_request_t cr, sr;
	omx_status_t st;
	uint32_t res = 0;
	uint64_t nic_b;
	static uint8_t big[200000];
	CHECK(omx_open_endpoint(1, 3, 0x1234, NULL, 0, &D) == OMX_SUCCESS);
	omx_board_number_to_nic_id(1, &nic_b);
	CHECK(omx_iconnect(A, nic_b, 3, 0x1234, 0, NULL, &cr) == OMX_SUCCESS);
	for (int i = 0; i < 100000 && !res; i++) {
		omx_progress(D);
		omx_test(A, &cr, &st, &res);
	}
	CHECK(res && st.code == OMX_SUCCESS);
	omx_endpoint_addr_t a2d = st.addr;
	omx_set_request_timeout(A, NULL, 200); /* 10 resends of 20 ms */
	CHECK(omx_isend(A, big, sizeof(big), a2d, 0xD0, NULL, &sr) == OMX_SUCCESS);
	/* 0.5 s, 25 resend delays: about a dozen probes, each answered by D */
	res = 0;
	uint64_t end = omx_now_ns() + 500000000ull;
	while (omx_now_ns() < end && !res) {
		omx_progress(D);
		omx_test(A, &sr, &st, &res);
	}
	CHECK(!res);
	if (res)
		printf("owed notify: the send completed while its receiver lived: %s\n", omx_strerror(st.code));
	CHECK(omx_close_endpoint(D) == OMX_SUCCESS);
	res = 0;
	end = omx_now_ns() + 5000000000ull;
	while (omx_now_ns() < end && !res)
		omx_test(A, &sr, &st, &res);
	CHECK(res && st.code == OMX_REMOTE_ENDPOINT_UNREACHABLE);
	omx_set_request_timeout(A, NULL, 20000); /* back to 1000 resends */
}

/* B is closed and reopened (same slot, new session): A's old address gets BAD_SESSION NACKs,
 * a new connect works, and closed handles are refused. */
static void test_restart_session(void)
{
	omx_request_t sr, cr;
	omx_status_t st;
	omx_endpoint_t old = B;
	uint32_t old_sess, new_sess, eid;
	uint64_t nic;
	omx_decompose_endpoint_addr_with_session(a2b, &nic, &eid, &old_sess);
	CHECK(omx_close_endpoint(B) == OMX_SUCCESS);
	CHECK(omx_open_endpoint(1, 1, 0x1234, NULL, 0, &B) == OMX_SUCCESS);
	omx_set_error_handler(B, OMX_ERRORS_RETURN);
	CHECK(omx_issend(A, "x", 1, a2b, 0x51, NULL, &sr) == OMX_SUCCESS);
	CHECK(wait_req(A, &sr, &st, 5000));
	CHECK(st.code == OMX_REMOTE_ENDPOINT_BAD_SESSION);
	CHECK(omx_iconnect(A, nic, 1, 0x1234, 0, NULL, &cr) == OMX_SUCCESS);
	CHECK(wait_req(A, &cr, &st, 5000) && st.code == OMX_SUCCESS);
	a2b = st.addr;
	omx_decompose_endpoint_addr_with_session(a2b, &nic, &eid, &new_sess);
	CHECK(new_sess != old_sess);
	uint64_t nic_a;
	omx_board_number_to_nic_id(0, &nic_a);
	CHECK(omx_iconnect(B, nic_a, 0, 0x1234, 0, NULL, &cr) == OMX_SUCCESS);
	CHECK(wait_req(B, &cr, &st, 5000) && st.code == OMX_SUCCESS);
	b2a = st.addr;
	CHECK(one_message(100, 0, 1) && one_message(50000, 0, 1));
	/* a closed endpoint handle is refused, not dereferenced */
	omx_endpoint_t dead;
	omx_endpoint_t tmp;
	CHECK(omx_open_endpoint(0, 5, 0x1234, NULL, 0, &tmp) == OMX_SUCCESS);
	dead = tmp;
	CHECK(omx_close_endpoint(tmp) == OMX_SUCCESS);
	uint32_t res;
	CHECK(omx_isend(dead, "x", 1, a2b, 0, NULL, &sr) == OMX_BAD_ENDPOINT);
	CHECK(omx_test_any(dead, 0, 0, &st, &res) == OMX_BAD_ENDPOINT);
	CHECK(omx_close_endpoint(dead) == OMX_BAD_ENDPOINT);
	CHECK(omx_progress(NULL) == OMX_BAD_ENDPOINT);
	(void)old;
}

/* Random traffic both ways, random sizes up to 3x the rendezvous threshold, verified. A send
 * buffer is the application's again once its send completes: it is overwritten at once, and the
 * receiver must still get the original (eager sends complete before their ack, and lost frames
 * are retransmitted from the library's copy, never from the application's buffer). */
static void test_random_traffic(int count, size_t max_len)
{
	enum { WIN = 16 };
	int bad = 0;
	for (int base = 0; base < count; base += WIN) {
		uint8_t *sbuf[WIN], *rbuf[WIN], *orig[WIN];
		int sent[WIN];
		size_t len[WIN];
		omx_request_t sr[WIN], rr[WIN];
		omx_status_t st;
		for (int i = 0; i < WIN; i++) {
			len[i] = rnd() % 4 == 0 ? rnd() % max_len : rnd() % 200;
			sbuf[i] = malloc(len[i] + 1);
			rbuf[i] = malloc(len[i] + 1);
			orig[i] = malloc(len[i] + 1);
			fill(sbuf[i], len[i], (uint64_t)(base + i));
			memcpy(orig[i], sbuf[i], len[i]);
			sent[i] = 0;
			int dir = i & 1;
			CHECK(omx_irecv(dir ? A : B, rbuf[i], len[i], (uint64_t)(base + i), ~0ull, NULL, &rr[i]) ==
			      OMX_SUCCESS);
			CHECK(omx_isend(dir ? B : A, sbuf[i], len[i], dir ? b2a : a2b, (uint64_t)(base + i), NULL, &sr[i]) ==
			      OMX_SUCCESS);
		}
		/* Completed sends first (eager ones already are), their buffers overwritten as they
		 * complete; the receives then progress while the rest wait. */
		for (int i = 0; i < WIN; i++) {
			uint32_t done = 0;
			if (omx_test(i & 1 ? B : A, &sr[i], &st, &done) == OMX_SUCCESS && done) {
				sent[i] = st.code == OMX_SUCCESS ? 1 : -1;
				memset(sbuf[i], 0xEE, len[i]);
			}
		}
		for (int i = 0; i < WIN; i++) {
			int dir = i & 1;
			int ok = wait_req(dir ? A : B, &rr[i], &st, 60000) && st.xfer_length == len[i] &&
				 memcmp(orig[i], rbuf[i], len[i]) == 0;
			if (!sent[i])
				ok &= wait_req(dir ? B : A, &sr[i], &st, 60000);
			ok &= sent[i] >= 0;
			if (!ok)
				bad++;
			free(sbuf[i]);
			free(rbuf[i]);
			free(orig[i]);
		}
	}
	CHECK(bad == 0);
	if (bad)
		fprintf(stderr, "  %d of %d random messages failed\n", bad, count);
}

int main(int argc, char **argv)
{
	int faults = argc > 1 && !strcmp(argv[1], "faults");
	char dir[] = "/tmp/omx-test-XXXXXX";
	if (unit_lock_dir(dir) < 0)
		return 2;
	setenv("OMX_IFACES", "mem0,mem1", 1);
	setenv("OMX_HOSTNAME", "unit", 1);
	setenv("OMX_RESEND_DELAY_MS", "20", 1);
	setenv("OMX_PULL_RESEND_MS", "40", 1);
	if (faults)
		setenv("OMX_FAULT", "drop=0.05,dup=0.01,reorder=0.05,delay=0.02,delay_us=3000,seed=11", 1);
	struct omx_memnet *hub = omx_memnet_create();
	omx__test_set_memnet(hub, 9000);
	CHECK(omx_init() == OMX_SUCCESS);
	CHECK(omx_open_endpoint(0, 0, 0x1234, NULL, 0, &A) == OMX_SUCCESS);
	CHECK(omx_open_endpoint(1, 1, 0x1234, NULL, 0, &B) == OMX_SUCCESS);
	omx_endpoint_t dup;
	omx_set_error_handler(NULL, OMX_ERRORS_RETURN);
	CHECK(omx_open_endpoint(0, 0, 0x1234, NULL, 0, &dup) == OMX_BUSY);
	CHECK(omx_open_endpoint(7, 0, 0x1234, NULL, 0, &dup) == OMX_BOARD_NOT_FOUND);
	CHECK(omx_open_endpoint(0, 40, 0x1234, NULL, 0, &dup) == OMX_BAD_ENDPOINT);
	test_connect();
	test_sizes();
	if (!faults) {
		test_truncation_and_vectors();
		test_matching_and_queues();
		test_unexp_handler_and_self();
		test_notify_acks_rndv();
		test_self_sizes();
		test_close_in_flight();
		test_owed_notify();
		test_restart_session();
	}
	test_random_traffic(getenv("OMX_T_RANDOM") ? atoi(getenv("OMX_T_RANDOM")) : (faults ? 2000 : 36000), 100000); /* > 2 x 16384: both directions wrap the 14-bit sequence */
	if (faults) {
		/* the faults really happened on both links */
		struct omx_fault_stats fa, fb;
		omx_net_fault_stats(A->net, &fa);
		omx_net_fault_stats(B->net, &fb);
		printf("faults A->B: sent %llu dropped %llu dup %llu reordered %llu delayed %llu\n",
		       (unsigned long long)fa.sent, (unsigned long long)fa.dropped, (unsigned long long)fa.duplicated,
		       (unsigned long long)fa.reordered, (unsigned long long)fa.delayed);
		CHECK(fa.dropped > 100 && fb.dropped > 100);
		CHECK(fa.duplicated > 10 && fa.reordered > 100 && fa.delayed > 10);
	}
	CHECK(omx_close_endpoint(A) == OMX_SUCCESS);
	CHECK(omx_close_endpoint(B) == OMX_SUCCESS);
	CHECK(omx_finalize() == OMX_SUCCESS);
	omx_memnet_destroy(hub);
	return unit_finish(dir);
}
