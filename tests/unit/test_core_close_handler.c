/*
 * test_core_close_handler.c - closing an endpoint while its unexpected handler runs.
 *
 * The handler runs without the endpoint lock, on whichever thread made progress (the progress
 * thread included). Closing the endpoint from another thread meanwhile used to fail with
 * OMX_NOT_SUPPORTED_IN_HANDLER (meant for a close from inside the handler), so a close racing
 * with the progress thread failed at random and left the endpoint open. Checked here:
 *   1. from inside the handler, closing its own endpoint is refused and changes nothing (the
 *      endpoint goes on working and closes normally afterwards);
 *   2. from another thread while the handler runs, the close waits for the handler's end and
 *      succeeds, and no handler call starts once the close has begun.
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

#define MATCH 0x42ull
#define HANDLER_NAP_MS 200

static omx_endpoint_t A, B;
static omx_return_t close_from_inside = OMX_SUCCESS;
static int calls_b, entered_b, returned_b;
static uint64_t returned_b_ns;

static void pump(void)
{
	omx_progress(A);
	if (B)
		omx_progress(B);
}

/* On A: try to close A from inside (must be refused), then leave the message unexpected. */
static omx_unexp_handler_action_t handler_a(void *ctx, omx_endpoint_addr_t src, uint64_t match, uint32_t len,
					    void *data)
{
	(void)ctx, (void)src, (void)match, (void)len, (void)data;
	close_from_inside = omx_close_endpoint(A);
	return OMX_UNEXP_HANDLER_RECV_CONTINUE;
}

/* On B: stay inside for a while, so that the main thread's close starts meanwhile. */
static omx_unexp_handler_action_t handler_b(void *ctx, omx_endpoint_addr_t src, uint64_t match, uint32_t len,
					    void *data)
{
	(void)ctx, (void)src, (void)match, (void)len, (void)data;
	__atomic_add_fetch(&calls_b, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&entered_b, 1, __ATOMIC_SEQ_CST);
	usleep(HANDLER_NAP_MS * 1000);
	__atomic_store_n(&returned_b_ns, omx_now_ns(), __ATOMIC_SEQ_CST);
	__atomic_store_n(&returned_b, 1, __ATOMIC_SEQ_CST);
	return OMX_UNEXP_HANDLER_RECV_CONTINUE;
}

/* Thread T: progress on B until its handler has been entered (the call that runs it returns
 * only after the handler has). */
static void *progress_b(void *arg)
{
	(void)arg;
	uint64_t end = omx_now_ns() + 10000000000ull;
	while (!__atomic_load_n(&entered_b, __ATOMIC_SEQ_CST) && omx_now_ns() < end)
		omx_progress(B);
	return NULL;
}

static void send_and_wait(omx_endpoint_t from, omx_endpoint_addr_t to, uint32_t len)
{
	static uint8_t buf[256];
	omx_request_t r;
	omx_status_t st;
	CHECK(omx_isend(from, buf, len, to, MATCH, NULL, &r) == OMX_SUCCESS);
	CHECK(wait_req(from, &r, &st, 10000) && st.code == OMX_SUCCESS);
}

int main(void)
{
	char dir[] = "/tmp/omx-test-XXXXXX";
	if (unit_lock_dir(dir) < 0)
		return 2;
	setenv("OMX_IFACES", "mem0,mem1", 1);
	setenv("OMX_PROGRESS_THREAD", "0", 1); /* the test's own threads progress */
	omx_endpoint_addr_t a2b, b2a;
	struct omx_memnet *hub = unit_memnet_pair(&A, &B, &a2b);
	omx_status_t st;
	b2a = unit_memnet_connect(B, A, 0);

	/* 1. A close from inside the handler is refused; A still works. */
	omx_register_unexp_handler(A, handler_a, NULL);
	send_and_wait(B, b2a, 16);
	for (uint64_t end = omx_now_ns() + 10000000000ull; close_from_inside == OMX_SUCCESS && omx_now_ns() < end;)
		omx_progress(A);
	CHECK(close_from_inside == OMX_NOT_SUPPORTED_IN_HANDLER);
	uint8_t rb[64];
	omx_request_t rr;
	CHECK(omx_irecv(A, rb, sizeof(rb), MATCH, ~0ull, NULL, &rr) == OMX_SUCCESS); /* takes the unexpected one */
	CHECK(wait_req(A, &rr, &st, 10000) && st.code == OMX_SUCCESS && st.xfer_length == 16);
	omx_register_unexp_handler(A, NULL, NULL);

	/* 2. A close of B from this thread while T runs B's handler. */
	omx_register_unexp_handler(B, handler_b, NULL);
	pthread_t t;
	send_and_wait(A, a2b, 32);
	pthread_create(&t, NULL, progress_b, NULL);
	for (uint64_t end = omx_now_ns() + 10000000000ull;
	     !__atomic_load_n(&entered_b, __ATOMIC_SEQ_CST) && omx_now_ns() < end;)
		usleep(100);
	CHECK(entered_b);
	/* A second message: were the handler called during or after the close, calls_b would move. */
	send_and_wait(A, a2b, 48);
	omx_endpoint_t b = B;
	uint64_t t0 = omx_now_ns();
	omx_return_t r = omx_close_endpoint(b);
	uint64_t t1 = omx_now_ns();
	CHECK(r == OMX_SUCCESS);
	CHECK(__atomic_load_n(&returned_b, __ATOMIC_SEQ_CST)); /* the close waited for the handler */
	CHECK(t1 >= __atomic_load_n(&returned_b_ns, __ATOMIC_SEQ_CST));
	CHECK(__atomic_load_n(&calls_b, __ATOMIC_SEQ_CST) == 1);
	pthread_join(t, NULL);
	B = NULL;
	printf("close waited %.1f ms for the handler\n", (double)(t1 - t0) / 1e6);
	CHECK(omx_close_endpoint(b) == OMX_BAD_ENDPOINT); /* closed once only */

	CHECK(omx_close_endpoint(A) == OMX_SUCCESS);
	omx_finalize();
	omx_memnet_destroy(hub);
	return unit_finish(dir);
}
