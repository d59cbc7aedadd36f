/*
 * test_core_reserve.c - reserved unexpected messages (include/omx_unexp_reserve.h), over the
 * in-memory hub: a handler reserves large messages, which then stay out of every omx match until
 * omx_irecv_reserved takes them (intact, truncated, discarded); eager messages and calls outside a
 * handler are refused; a reservation the handler then finishes is ignored; a bad key is an error;
 * a message whose sender came back with a new session fails at once when taken; and a reservation
 * taken by another thread while the handler that made it has not returned yet waits for it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "open-mx.h"
#include "omx_unexp_reserve.h"

#define UNIT_MEMNET
#define UNIT_PUMP pump
#include "unit_check.h"

#define BIG (1u << 20) /* a rendezvous */

static omx_endpoint_t A, B;
static omx_return_t last_reserve_rc;
static uint64_t next_key = 1;
static int finish_next; /* the handler returns RECV_FINISHED (after reserving) */
static int handler_calls;

/* The race case: the handler reserves, then lets taker() call omx_irecv_reserved while it has not
 * returned (the message is not queued yet), and waits up to 500 ms for that call to return. */
static int race_mode;
static atomic_int race_go, race_done;
static omx_return_t race_rc = OMX_BAD_ERROR;
static omx_request_t race_req;
static uint8_t *race_buf;

static void *taker(void *arg)
{
	(void)arg;
	while (!atomic_load(&race_go))
		;
	omx_seg_t seg = {race_buf, BIG};
	race_rc = omx_irecv_reserved(B, next_key, &seg, 1, NULL, &race_req);
	atomic_store(&race_done, 1);
	return NULL;
}

static omx_unexp_handler_action_t handler(void *ctx, omx_endpoint_addr_t src, uint64_t match, uint32_t len,
					  void *data)
{
	(void)ctx, (void)src, (void)match, (void)len, (void)data;
	handler_calls++;
	last_reserve_rc = omx_unexp_reserve(B, next_key);
	if (race_mode && len == BIG) {
		race_mode = 0;
		atomic_store(&race_go, 1);
		for (uint64_t end = omx_now_ns() + 500000000ull; !atomic_load(&race_done) && omx_now_ns() < end;)
			;
	}
	if (finish_next) {
		finish_next = 0;
		return OMX_UNEXP_HANDLER_RECV_FINISHED;
	}
	return OMX_UNEXP_HANDLER_RECV_CONTINUE;
}

static void pump(void)
{
	omx_progress(A);
	omx_progress(B);
}

static void pump_ms(int ms)
{
	for (uint64_t end = omx_now_ns() + (uint64_t)ms * 1000000ull; omx_now_ns() < end;)
		pump();
}

static void fill(uint8_t *b, uint32_t n, int seed)
{
	for (uint32_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 13 + (uint32_t)seed * 7 + (i >> 9));
}

static int pattern_ok(const uint8_t *b, uint32_t n, int seed)
{
	for (uint32_t i = 0; i < n; i++)
		if (b[i] != (uint8_t)(i * 13 + (uint32_t)seed * 7 + (i >> 9)))
			return 0;
	return 1;
}

/* A sends BIG bytes (seed) with match; B's handler is shown it: returns the send. */
static omx_request_t send_big(uint8_t *s, omx_endpoint_addr_t to, uint64_t match, int seed)
{
	omx_request_t sr;
	fill(s, BIG, seed);
	int calls = handler_calls;
	CHECK(omx_isend(A, s, BIG, to, match, NULL, &sr) == OMX_SUCCESS);
	for (uint64_t end = omx_now_ns() + 5000000000ull; handler_calls == calls && omx_now_ns() < end;)
		pump();
	CHECK(handler_calls == calls + 1);
	return sr;
}

int main(void)
{
	char dir[] = "/tmp/omx-test-XXXXXX";
	if (unit_lock_dir(dir) < 0)
		return 2;
	setenv("OMX_IFACES", "mem0,mem1", 1);
	setenv("OMX_PROGRESS_THREAD", "0", 1);
	omx_endpoint_addr_t a2b;
	struct omx_memnet *hub = unit_memnet_pair(&A, &B, &a2b);
	omx_status_t st;
	uint32_t res;
	uint8_t *s = malloc(BIG), *r = calloc(1, BIG);
	omx_seg_t seg = {r, BIG};
	omx_register_unexp_handler(B, handler, NULL);

	CHECK(omx_unexp_reserve(B, 7) == OMX_NOT_IMPLEMENTED); /* outside a handler */

	/* an eager message cannot be reserved: it stays an ordinary unexpected one */
	omx_request_t sr, rr;
	uint8_t small[100];
	fill(small, sizeof(small), 1);
	CHECK(omx_isend(A, small, sizeof(small), a2b, 0x10, NULL, &sr) == OMX_SUCCESS);
	pump_ms(50);
	CHECK(last_reserve_rc == OMX_NOT_IMPLEMENTED);
	res = 0;
	CHECK(omx_iprobe(B, 0x10, ~0ull, &st, &res) == OMX_SUCCESS && res == 1);
	CHECK(omx_irecv(B, r, BIG, 0x10, ~0ull, NULL, &rr) == OMX_SUCCESS);
	CHECK(wait_req(B, &rr, &st, 5000) && st.code == OMX_SUCCESS && st.xfer_length == sizeof(small) &&
	      pattern_ok(r, sizeof(small), 1));
	CHECK(wait_req(A, &sr, &st, 5000) && st.code == OMX_SUCCESS);

	/* a large one is reserved: no probe or receive sees it, its data stays at the sender */
	next_key = 1;
	sr = send_big(s, a2b, 0x20, 2);
	CHECK(last_reserve_rc == OMX_SUCCESS);
	res = 1;
	CHECK(omx_iprobe(B, 0, 0, &st, &res) == OMX_SUCCESS && res == 0);
	omx_request_t other;
	CHECK(omx_irecv(B, r, BIG, 0x20, ~0ull, NULL, &other) == OMX_SUCCESS);
	pump_ms(100);
	res = 1;
	CHECK(omx_test(B, &other, &st, &res) == OMX_SUCCESS && res == 0);
	res = 1;
	CHECK(omx_test(A, &sr, &st, &res) == OMX_SUCCESS && res == 0); /* nothing pulled */
	CHECK(omx_cancel(B, &other, &res) == OMX_SUCCESS && res == 1);
	CHECK(omx_irecv_reserved(B, 1, &seg, 1, (void *)0x1234, &rr) == OMX_SUCCESS);
	CHECK(wait_req(B, &rr, &st, 10000) && st.code == OMX_SUCCESS && st.msg_length == BIG &&
	      st.xfer_length == BIG && st.match_info == 0x20 && st.context == (void *)0x1234 && pattern_ok(r, BIG, 2));
	CHECK(wait_req(A, &sr, &st, 10000) && st.code == OMX_SUCCESS);
	CHECK(omx_irecv_reserved(B, 1, &seg, 1, NULL, &rr) == OMX_BAD_ERROR); /* taken once */
	CHECK(omx_irecv_reserved(B, 99, &seg, 1, NULL, &rr) == OMX_BAD_ERROR);

	/* taken into a shorter buffer: truncated, as a receive would be */
	next_key = 2;
	sr = send_big(s, a2b, 0x30, 3);
	memset(r, 0, BIG);
	omx_seg_t half = {r, BIG / 2};
	CHECK(omx_irecv_reserved(B, 2, &half, 1, NULL, &rr) == OMX_SUCCESS);
	CHECK(wait_req(B, &rr, &st, 10000) && st.code == OMX_MESSAGE_TRUNCATED && st.msg_length == BIG &&
	      st.xfer_length == BIG / 2 && pattern_ok(r, BIG / 2, 3) && r[BIG / 2] == 0);
	CHECK(wait_req(A, &sr, &st, 10000));

	/* taken with no buffer: dropped, the sender told (nothing pulled) */
	next_key = 3;
	sr = send_big(s, a2b, 0x40, 4);
	CHECK(omx_irecv_reserved(B, 3, NULL, 0, NULL, &rr) == OMX_SUCCESS);
	CHECK(wait_req(B, &rr, &st, 10000) && st.xfer_length == 0);
	CHECK(wait_req(A, &sr, &st, 10000));

	/* reserved, then finished by the handler: discarded, nothing kept under the key */
	next_key = 4;
	finish_next = 1;
	sr = send_big(s, a2b, 0x50, 5);
	CHECK(last_reserve_rc == OMX_SUCCESS);
	CHECK(wait_req(A, &sr, &st, 10000));
	CHECK(omx_irecv_reserved(B, 4, &seg, 1, NULL, &rr) == OMX_BAD_ERROR);

	/* the sender's endpoint closes and comes back (a new session) while B holds a reservation:
	 * taking it then fails at once, with the error a receive under way would have got */
	next_key = 5;
	sr = send_big(s, a2b, 0x60, 6);
	CHECK(omx_close_endpoint(A) == OMX_SUCCESS);
	CHECK(omx_open_endpoint(0, 0, 1, NULL, 0, &A) == OMX_SUCCESS);
	omx_endpoint_addr_t again = unit_memnet_connect(A, B, 1);
	next_key = 6;
	CHECK(omx_isend(A, small, sizeof(small), again, 0x70, NULL, &sr) == OMX_SUCCESS);
	CHECK(wait_req(A, &sr, &st, 5000) && st.code == OMX_SUCCESS);
	CHECK(omx_irecv_reserved(B, 5, &seg, 1, NULL, &rr) == OMX_SUCCESS);
	CHECK(wait_req(B, &rr, &st, 1000) && st.code != OMX_SUCCESS && st.xfer_length == 0);
	printf("# reserved message of a sender that came back: %s\n", omx_strerror(st.code));

	/* taken by another thread before the handler that reserved it has returned: that call waits
	 * for the message to be queued (it found nothing before: a provider's probe then reported a
	 * message without its header, and its sender waited for ever) */
	next_key = 7;
	race_buf = calloc(1, BIG);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, taker, NULL) == 0);
	omx_request_t rs;
	CHECK(omx_irecv(B, small, sizeof(small), 0x70, ~0ull, NULL, &rs) == OMX_SUCCESS); /* A's last small one */
	CHECK(wait_req(B, &rs, &st, 5000) && st.code == OMX_SUCCESS);
	race_mode = 1;
	sr = send_big(s, again, 0x80, 8);
	CHECK(last_reserve_rc == OMX_SUCCESS);
	pthread_join(t, NULL);
	CHECK(race_rc == OMX_SUCCESS);
	if (race_rc == OMX_SUCCESS)
		CHECK(wait_req(B, &race_req, &st, 10000) && st.code == OMX_SUCCESS && st.xfer_length == BIG &&
		      pattern_ok(race_buf, BIG, 8));
	CHECK(wait_req(A, &sr, &st, 10000) && st.code == OMX_SUCCESS);
	free(race_buf);

	CHECK(omx_close_endpoint(A) == OMX_SUCCESS);
	CHECK(omx_close_endpoint(B) == OMX_SUCCESS);
	omx_finalize();
	omx_memnet_destroy(hub);
	free(s);
	free(r);
	return unit_finish(dir);
}
