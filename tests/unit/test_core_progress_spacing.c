/*
 * test_core_progress_spacing.c - OMX_PROGRESS_CHECK_MAX_US: while the application keeps calling
 * the library the progress thread's checks space out (naps doubling up to the bound), and posting
 * a large send a receiver may pull wakes a thread in such a nap, so that the pulls are answered
 * while the application then computes without calling the library.
 *
 * Over the in-memory hub, bound 60 s: A's application polls until A's thread is in a nap with more
 * than 0.8 s to go (the spacing grew), posts 4 MiB to B and stops calling the library; a thread
 * on B waits for the message. Checked: the nap grew past the idle time, and the message arrived
 * before that nap would have ended (the thread was woken and took over). Without the wake-up
 * the pulls wait for the end of the nap, after the application's pause began.
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
#include "unit_check.h"

#define LEN (4u << 20)
#define MATCH 0x5ace0ull

static omx_endpoint_t A, B;
static omx_request_t rreq;
static uint64_t t_done; /* omx_now_ns() when B's receive completed (atomic) */
static int recv_ok;

static void *receiver(void *arg)
{
	(void)arg;
	omx_status_t st;
	uint32_t res = 0;
	uint64_t end = omx_now_ns() + 60000000000ull;
	while (!res && omx_now_ns() < end)
		omx_wait(B, &rreq, &st, &res, 100);
	if (res) {
		__atomic_store_n(&t_done, omx_now_ns(), __ATOMIC_SEQ_CST);
		recv_ok = st.code == OMX_SUCCESS && st.xfer_length == LEN;
	}
	return NULL;
}

int main(void)
{
	char dir[] = "/tmp/omx-test-XXXXXX";
	if (unit_lock_dir(dir) < 0)
		return 2;
	setenv("OMX_IFACES", "mem0,mem1", 1);
	setenv("OMX_PROGRESS_CHECK_MAX_US", "60000000", 1);
	setenv("OMX_PROGRESS_IDLE_US", "1000", 1);
	omx_endpoint_addr_t a2b;
	struct omx_memnet *hub = unit_memnet_pair(&A, &B, &a2b);
	omx_status_t st;
	uint32_t res;

	uint8_t *sbuf = malloc(LEN), *rbuf = malloc(LEN);
	for (uint32_t i = 0; i < LEN; i++)
		sbuf[i] = (uint8_t)(i * 2654435761u >> 24);
	CHECK(omx_irecv(B, rbuf, LEN, MATCH, ~0ull, NULL, &rreq) == OMX_SUCCESS);
	pthread_t t;
	pthread_create(&t, NULL, receiver, NULL);

	/* The application is there: A's thread naps longer and longer. */
	uint64_t nap_end = 0, now = omx_now_ns(), end = now + 20000000000ull;
	while (now < end) {
		omx_progress(A);
		now = omx_now_ns();
		nap_end = __atomic_load_n(&A->progress_nap_end_ns, __ATOMIC_RELAXED);
		if (nap_end > now + 800000000ull)
			break;
	}
	CHECK(nap_end > now + 800000000ull); /* the spacing grew far past the 1 ms idle time */

	/* Post, then compute (no library call on A) until B has it, or the nap is long over. */
	omx_request_t sreq;
	uint64_t t_post = omx_now_ns();
	CHECK(omx_isend(A, sbuf, LEN, a2b, MATCH, NULL, &sreq) == OMX_SUCCESS);
	while (!__atomic_load_n(&t_done, __ATOMIC_SEQ_CST) && omx_now_ns() < nap_end + 2000000000ull)
		usleep(1000);
	uint64_t done = __atomic_load_n(&t_done, __ATOMIC_SEQ_CST);
	printf("nap had %.0f ms to go at the post; message received after %.1f ms\n", (nap_end - t_post) / 1e6,
	       done ? (done - t_post) / 1e6 : -1.0);
	CHECK(done != 0 && done < nap_end); /* the thread was woken: it did not sleep the nap out */

	pthread_join(t, NULL);
	CHECK(recv_ok && memcmp(sbuf, rbuf, LEN) == 0);
	res = 0;
	for (uint64_t e = omx_now_ns() + 10000000000ull; !res && omx_now_ns() < e;)
		omx_wait(A, &sreq, &st, &res, 100);
	CHECK(res && st.code == OMX_SUCCESS);
	CHECK(omx_close_endpoint(A) == OMX_SUCCESS);
	CHECK(omx_close_endpoint(B) == OMX_SUCCESS);
	omx_finalize();
	omx_memnet_destroy(hub);
	free(sbuf);
	free(rbuf);
	return unit_finish(dir);
}
