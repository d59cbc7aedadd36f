/*
 * self_pingpong.c - the software cost of a same-host message (not a test): two endpoints of one
 * board in one process and one thread, connected over the same-host path, exchange a message back
 * and forth. No second CPU is involved, so no cache line travels between cores and nothing waits:
 * the time per message is the library's own instructions (send, ring push, poll, decode, match,
 * copy, completion), the part of same-host latency that code changes can move. Compare builds
 * with it (PERF-style A/B) or count instructions under `perf stat` / callgrind.
 *
 *   self_pingpong [length [iterations [board]]]
 * Output (CSV): length,iterations,ns_per_message
 * Run inside a namespace with an omx interface (bench/same_host.sh shows how), with
 * OMX_PROGRESS_THREAD=0 for the steadiest figures.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "open-mx.h"

#define KEY 0x5e1f
#define MATCH 0x1234

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, omx_return_t r)
{
	fprintf(stderr, "self_pingpong: %s: %s\n", what, omx_strerror(r));
	exit(1);
}

/* Poll both endpoints until req (of endpoint `own`) completes. */
static void wait_req(omx_endpoint_t own, omx_endpoint_t other, omx_request_t *req)
{
	omx_status_t st;
	uint32_t done = 0;
	for (;;) {
		omx_return_t r = omx_test(own, req, &st, &done);
		if (r != OMX_SUCCESS)
			die("omx_test", r);
		if (done)
			break;
		(void)omx_progress(other);
	}
	if (st.code != OMX_SUCCESS)
		die("request", st.code);
}

static omx_endpoint_addr_t connect_to(omx_endpoint_t from, omx_endpoint_t to, uint64_t nic, uint32_t index)
{
	omx_request_t req;
	omx_status_t st;
	uint32_t done = 0;
	omx_return_t r = omx_iconnect(from, nic, index, KEY, 0, NULL, &req);
	if (r != OMX_SUCCESS)
		die("omx_iconnect", r);
	while (!done) {
		(void)omx_progress(to);
		if ((r = omx_test(from, &req, &st, &done)) != OMX_SUCCESS)
			die("omx_test", r);
	}
	if (st.code != OMX_SUCCESS)
		die("connect", st.code);
	return st.addr;
}

int main(int argc, char **argv)
{
	size_t len = argc > 1 ? strtoul(argv[1], NULL, 0) : 0;
	unsigned long iters = argc > 2 ? strtoul(argv[2], NULL, 0) : 200000;
	uint32_t board = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 0) : 0;
	omx_endpoint_t a = NULL, b = NULL;
	uint64_t nic;
	omx_return_t r;
	if ((r = omx_init()) != OMX_SUCCESS)
		die("omx_init", r);
	if ((r = omx_board_number_to_nic_id(board, &nic)) != OMX_SUCCESS)
		die("board", r);
	if ((r = omx_open_endpoint(board, 0, KEY, NULL, 0, &a)) != OMX_SUCCESS ||
	    (r = omx_open_endpoint(board, 1, KEY, NULL, 0, &b)) != OMX_SUCCESS)
		die("omx_open_endpoint", r);
	omx_endpoint_addr_t to_b = connect_to(a, b, nic, 1), to_a = connect_to(b, a, nic, 0);
	char *abuf = calloc(1, len + 1), *bbuf = calloc(1, len + 1);
	if (!abuf || !bbuf)
		return 1;
	unsigned long warm = iters / 10;
	uint64_t t0 = 0;
	for (unsigned long i = 0; i < warm + iters; i++) {
		if (i == warm)
			t0 = now_ns();
		omx_request_t rb, sa, ra, sb;
		if ((r = omx_irecv(b, bbuf, len, MATCH, ~0ull, NULL, &rb)) != OMX_SUCCESS ||
		    (r = omx_isend(a, abuf, len, to_b, MATCH, NULL, &sa)) != OMX_SUCCESS)
			die("a -> b", r);
		wait_req(b, a, &rb);
		wait_req(a, b, &sa);
		if ((r = omx_irecv(a, abuf, len, MATCH, ~0ull, NULL, &ra)) != OMX_SUCCESS ||
		    (r = omx_isend(b, bbuf, len, to_a, MATCH, NULL, &sb)) != OMX_SUCCESS)
			die("b -> a", r);
		wait_req(a, b, &ra);
		wait_req(b, a, &sb);
	}
	double ns = (double)(now_ns() - t0) / (2.0 * (double)iters);
	printf("%zu,%lu,%.1f\n", len, iters, ns);
	omx_close_endpoint(a);
	omx_close_endpoint(b);
	omx_finalize();
	free(abuf);
	free(bbuf);
	return 0;
}
