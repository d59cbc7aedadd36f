/*
 * test_core_handler.c - the unexpected handler sees one message at a time, even when another
 * thread posts a self send while it runs.
 *
 * The libfabric provider's handler posts, for the message it is shown, an exact-match receive and
 * returns RECV_CONTINUE; the library then matches the message to the first posted receive of that
 * match. If anything else is matched meanwhile (the handler runs without the endpoint lock), a
 * message of another sender with the same match takes that receive, and the message shown stays
 * unexpected for ever: an Open MPI job over the provider hung that way (4 ranks, all-to-all with
 * self sends). Here: thread T progresses B and is shown A's first message, posts its receive, then
 * waits; meanwhile the main thread posts a self send on B and progresses B, with A's second
 * message (same match, other length) waiting in B's ring. Checked: never two handlers at once,
 * and each message lands in the receive its own handler call posted.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "open-mx.h"
#include "core/core.h"
#include "core/testhooks.h"

#define UNIT_MEMNET
#define UNIT_PUMP pump
#include "unit_check.h"

#define MATCH 0x77ull
#define CALLS 3
static const uint32_t lens[CALLS] = { 100, 200, 300 }; /* A's first, A's second, B's self send */

static omx_endpoint_t A, B;
static int in_handler_now, in_handler_max, calls, first_entered, go, stop;
static uint8_t rbuf[CALLS][512];
static omx_request_t rreq[CALLS];
static int rlen_index[CALLS]; /* call k posted the receive for the message of length lens[i] */

static void fill(uint8_t *b, uint32_t n, int seed)
{
	for (uint32_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 7 + (uint32_t)seed * 31 + 1);
}

static int pattern_ok(const uint8_t *b, uint32_t n, int seed)
{
	for (uint32_t i = 0; i < n; i++)
		if (b[i] != (uint8_t)(i * 7 + (uint32_t)seed * 31 + 1))
			return 0;
	return 1;
}

/* As the provider: post the exact-match receive for the message shown, then (first call only)
 * stay inside until the main thread has done its part. */
static omx_unexp_handler_action_t handler(void *ctx, omx_endpoint_addr_t src, uint64_t match, uint32_t len,
					  void *data)
{
	(void)ctx, (void)src, (void)data;
	int now = __atomic_add_fetch(&in_handler_now, 1, __ATOMIC_SEQ_CST);
	int m = __atomic_load_n(&in_handler_max, __ATOMIC_SEQ_CST);
	while (now > m && !__atomic_compare_exchange_n(&in_handler_max, &m, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	int k = __atomic_fetch_add(&calls, 1, __ATOMIC_SEQ_CST);
	if (k < CALLS) {
		rlen_index[k] = -1;
		for (int i = 0; i < CALLS; i++)
			if (lens[i] == len)
				rlen_index[k] = i;
		CHECK(omx_irecv(B, rbuf[k], sizeof(rbuf[k]), match, ~0ull, NULL, &rreq[k]) == OMX_SUCCESS);
	}
	if (k == 0) {
		__atomic_store_n(&first_entered, 1, __ATOMIC_SEQ_CST);
		uint64_t end = omx_now_ns() + 5000000000ull;
		while (!__atomic_load_n(&go, __ATOMIC_SEQ_CST) && omx_now_ns() < end)
			usleep(1000);
	}
	__atomic_sub_fetch(&in_handler_now, 1, __ATOMIC_SEQ_CST);
	return OMX_UNEXP_HANDLER_RECV_CONTINUE;
}

static void *progress_b(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_SEQ_CST))
		omx_progress(B);
	return NULL;
}

static void pump(void) /* wait_req's, once thread T has stopped */
{
	omx_progress(A);
	omx_progress(B);
}

int main(void)
{
	char dir[] = "/tmp/omx-test-XXXXXX";
	if (unit_lock_dir(dir) < 0)
		return 2;
	setenv("OMX_IFACES", "mem0,mem1", 1);
	setenv("OMX_PROGRESS_THREAD", "0", 1); /* the test's own threads progress */
	omx_endpoint_addr_t a2b, b2b;
	struct omx_memnet *hub = unit_memnet_pair(&A, &B, &a2b);
	omx_status_t st;
	uint32_t res;
	CHECK(omx_get_endpoint_addr(B, &b2b) == OMX_SUCCESS);
	omx_register_unexp_handler(B, handler, NULL);

	/* A's two messages, same match, wait in B's ring */
	uint8_t s0[512], s1[512], s2[512];
	fill(s0, lens[0], 0);
	fill(s1, lens[1], 1);
	fill(s2, lens[2], 2);
	omx_request_t sr0, sr1, sr2;
	CHECK(omx_isend(A, s0, lens[0], a2b, MATCH, NULL, &sr0) == OMX_SUCCESS);
	CHECK(omx_isend(A, s1, lens[1], a2b, MATCH, NULL, &sr1) == OMX_SUCCESS);

	pthread_t t;
	pthread_create(&t, NULL, progress_b, NULL);
	uint64_t end = omx_now_ns() + 10000000000ull;
	while (!__atomic_load_n(&first_entered, __ATOMIC_SEQ_CST) && omx_now_ns() < end)
		usleep(100);
	CHECK(first_entered);
	/* While T's handler call runs: a self send, and progress on B from this thread. */
	CHECK(omx_isend(B, s2, lens[2], b2b, MATCH, NULL, &sr2) == OMX_SUCCESS);
	for (int i = 0; i < 1000; i++)
		omx_progress(B);
	__atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
	end = omx_now_ns() + 10000000000ull;
	while (__atomic_load_n(&calls, __ATOMIC_SEQ_CST) < CALLS && omx_now_ns() < end)
		usleep(100);
	usleep(10000);
	__atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);

	CHECK(in_handler_max == 1);
	CHECK(calls == CALLS);
	for (int k = 0; k < CALLS && k < calls; k++) {
		int i = rlen_index[k];
		CHECK(i >= 0);
		if (i < 0 || !wait_req(B, &rreq[k], &st, 10000)) {
			CHECK(!"receive posted by the handler completed");
			continue;
		}
		/* the message shown to call k is the one its receive got */
		CHECK(st.code == OMX_SUCCESS && st.msg_length == lens[i] && st.xfer_length == lens[i]);
		CHECK(pattern_ok(rbuf[k], lens[i], i));
	}
	CHECK(wait_req(A, &sr0, &st, 10000) && st.code == OMX_SUCCESS);
	CHECK(wait_req(A, &sr1, &st, 10000) && st.code == OMX_SUCCESS);
	CHECK(wait_req(B, &sr2, &st, 10000) && st.code == OMX_SUCCESS);
	res = 1;
	CHECK(omx_iprobe(B, 0, 0, &st, &res) == OMX_SUCCESS && res == 0); /* nothing left unexpected */

	CHECK(omx_close_endpoint(A) == OMX_SUCCESS);
	CHECK(omx_close_endpoint(B) == OMX_SUCCESS);
	omx_finalize();
	omx_memnet_destroy(hub);
	return unit_finish(dir);
}
