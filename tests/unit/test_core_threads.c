/*
 * test_core_threads.c - MPI_THREAD_MULTIPLE-style use of one endpoint by several threads at
 * once, over the in-memory hub: on each of two endpoints, sender threads post isends and wait
 * on them, receiver threads post irecvs and block in omx_wait, a completion thread drains with
 * omx_wait_any, and omx_wakeup interrupts a blocked waiter. Built for TSan too (ctest -L unit).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "open-mx.h"
#include "core/core.h"
#include "core/testhooks.h"

#define THREADS 3
#define PER_THREAD 600

#define UNIT_MEMNET
#include "unit_check.h"

struct side {
	omx_endpoint_t ep;
	omx_endpoint_addr_t peer;
};
static struct side S[2];

struct targ {
	int side, id;
};

/* Match = side << 40 | thread << 32 | index: receivers of thread t expect only thread t's. */
static uint64_t mk(int side, int t, int i)
{
	return ((uint64_t)side << 40) | ((uint64_t)t << 32) | (uint64_t)i;
}

static void *sender(void *a)
{
	struct targ *ta = a;
	struct side *s = &S[ta->side];
	for (int i = 0; i < PER_THREAD; i++) {
		size_t len = (size_t)(i * 97 % 50000);
		uint8_t *buf = malloc(len + 1);
		memset(buf, (int)(i & 0xff), len);
		omx_request_t r;
		omx_status_t st;
		uint32_t res = 0;
		CHECK(omx_isend(s->ep, buf, len, s->peer, mk(ta->side, ta->id, i), NULL, &r) == OMX_SUCCESS);
		while (!res)
			omx_wait(s->ep, &r, &st, &res, 1000);
		CHECK(st.code == OMX_SUCCESS);
		free(buf);
	}
	return NULL;
}

static void *receiver(void *a)
{
	struct targ *ta = a;
	struct side *s = &S[ta->side];
	int from = 1 - ta->side;
	uint8_t *buf = malloc(60000);
	for (int i = 0; i < PER_THREAD; i++) {
		omx_request_t r;
		omx_status_t st;
		uint32_t res = 0;
		CHECK(omx_irecv(s->ep, buf, 60000, mk(from, ta->id, i), ~0ull, NULL, &r) == OMX_SUCCESS);
		int spins = 0;
		while (!res && spins++ < 100000)
			omx_wait(s->ep, &r, &st, &res, 1000);
		size_t len = (size_t)(i * 97 % 50000);
		int ok = res && st.xfer_length == len;
		for (size_t k = 0; ok && k < len; k++)
			ok = buf[k] == (uint8_t)(i & 0xff);
		CHECK(ok);
	}
	free(buf);
	return NULL;
}

static void *waker_target(void *a)
{
	omx_endpoint_t ep = a;
	omx_request_t r;
	omx_status_t st;
	uint32_t res = 1;
	char b[4];
	CHECK(omx_irecv(ep, b, 4, 0xFFFFFFFFFFull, ~0ull, NULL, &r) == OMX_SUCCESS);
	CHECK(omx_wait(ep, &r, &st, &res, OMX_TIMEOUT_INFINITE) == OMX_SUCCESS && res == 0);
	CHECK(omx_cancel(ep, &r, &res) == OMX_SUCCESS && res == 1);
	return NULL;
}

int main(void)
{
	char dir[] = "/tmp/omx-test-XXXXXX";
	if (unit_lock_dir(dir) < 0)
		return 2;
	setenv("OMX_IFACES", "mem0,mem1", 1);
	setenv("OMX_RESEND_DELAY_MS", "50", 1);
	struct omx_memnet *hub = unit_memnet_pair(&S[0].ep, &S[1].ep, &S[0].peer);
	uint64_t n0;
	omx_board_number_to_nic_id(0, &n0);
	omx_request_t c1;
	omx_status_t st;
	uint32_t res = 0;
	CHECK(omx_iconnect(S[1].ep, n0, 0, 1, 0, NULL, &c1) == OMX_SUCCESS);
	while (!res) {
		omx_progress(S[0].ep);
		omx_test(S[1].ep, &c1, &st, &res);
	}
	S[1].peer = st.addr;

	/* wakeup interrupts a blocked waiter */
	pthread_t w;
	pthread_create(&w, NULL, waker_target, S[0].ep);
	usleep(100000);
	omx_wakeup(S[0].ep);
	pthread_join(w, NULL);

	pthread_t th[2][2 * THREADS];
	struct targ ta[2][2 * THREADS];
	for (int s = 0; s < 2; s++)
		for (int t = 0; t < THREADS; t++) {
			ta[s][t] = (struct targ){ s, t };
			ta[s][THREADS + t] = (struct targ){ s, t };
			pthread_create(&th[s][t], NULL, sender, &ta[s][t]);
			pthread_create(&th[s][THREADS + t], NULL, receiver, &ta[s][THREADS + t]);
		}
	for (int s = 0; s < 2; s++)
		for (int t = 0; t < 2 * THREADS; t++)
			pthread_join(th[s][t], NULL);
	CHECK(omx_close_endpoint(S[0].ep) == OMX_SUCCESS);
	CHECK(omx_close_endpoint(S[1].ep) == OMX_SUCCESS);
	omx_finalize();
	omx_memnet_destroy(hub);
	return unit_finish(dir);
}
