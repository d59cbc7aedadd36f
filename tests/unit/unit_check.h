/*
 * unit_check.h - what the core's unit tests share (header only: each test is one program).
 *
 * CHECK(c): counts a pass, or prints the failed condition with its place and counts a failure
 * (atomically: threaded tests check from several threads); CHECK_EQ(a, b) prints both values.
 * Checks of their own (a rate, two strings) count through unit_tally(). unit_lock_dir() makes
 * the private OMX_LOCK_DIR of a test, unit_count_files() counts the files of such a directory,
 * unit_finish() removes it, prints "N passed, M failed" and
 * gives the exit status. A test that defines UNIT_PUMP (a function progressing all its
 * endpoints) also gets wait_req(): wait for a request while pumping, single-threaded.
 */
#ifndef OMX_UNIT_CHECK_H
#define OMX_UNIT_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int passed, failed;

/* Counts one check, passed if ok; returns ok. */
static inline int unit_tally(int ok)
{
	__atomic_fetch_add(ok ? &passed : &failed, 1, __ATOMIC_RELAXED);
	return ok;
}

#define CHECK(c)                                                                                                \
	do {                                                                                                    \
		if (!unit_tally(!!(c)))                                                                         \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                            \
	} while (0)

#define CHECK_EQ(a, b)                                                                                          \
	do {                                                                                                    \
		long long va_ = (long long)(a), vb_ = (long long)(b);                                           \
		if (!unit_tally(va_ == vb_))                                                                    \
			fprintf(stderr, "FAIL %s:%d: %s = %lld, %s = %lld\n", __FILE__, __LINE__, #a, va_, #b, \
				vb_);                                                                           \
	} while (0)

/* mkdtemp into dir (a "/tmp/omx-test-XXXXXX" buffer) and export it as OMX_LOCK_DIR; 0 or -1. */
static inline int unit_lock_dir(char *dir)
{
	if (!mkdtemp(dir))
		return -1;
	setenv("OMX_LOCK_DIR", dir, 1);
	return 0;
}

/* How many names in dir match the grep pattern (basic regular expression); -1 if that fails. */
static inline int unit_count_files(const char *dir, const char *pattern)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "ls %s | grep -c -- '%s'", dir, pattern);
	FILE *f = popen(cmd, "r");
	int n = -1;
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

static inline int unit_finish(const char *dir)
{
	if (dir) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}

/* A payload that differs per message (seed) and per byte, for checking data end to end. */
static inline void unit_fill(unsigned char *b, size_t n, unsigned long long seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)((seed * 2654435761u) >> 11 ^ i * 7);
}

#ifdef UNIT_PUMP
#include <stdint.h>
#include "open-mx.h"
#include "net/net.h" /* omx_now_ns */
static void UNIT_PUMP(void);
/* Wait for a request on ep while progressing every endpoint of the test (single thread). */
static inline int wait_req(omx_endpoint_t ep, omx_request_t *req, omx_status_t *st, int max_ms)
{
	uint32_t res = 0;
	uint64_t end = omx_now_ns() + (uint64_t)max_ms * 1000000ull;
	while (omx_now_ns() < end) {
		omx_test(ep, req, st, &res);
		if (res)
			return 1;
		UNIT_PUMP();
	}
	return 0;
}
#endif

#ifdef UNIT_MEMNET
#include <stdint.h>
#include "open-mx.h"
#include "core/testhooks.h"
#include "net/net.h" /* omx_memnet_create, omx_now_ns */
/* from's address of `to`, endpoint 0 (key 1) of board `board`: connect, progressing `to`, for at
 * most 10 s; failures are counted. */
static inline omx_endpoint_addr_t unit_memnet_connect(omx_endpoint_t from, omx_endpoint_t to, uint32_t board)
{
	uint64_t nic;
	omx_board_number_to_nic_id(board, &nic);
	omx_request_t c;
	omx_status_t st;
	uint32_t res = 0;
	CHECK(omx_iconnect(from, nic, 0, 1, 0, NULL, &c) == OMX_SUCCESS);
	for (uint64_t end = omx_now_ns() + 10000000000ull; !res && omx_now_ns() < end;) {
		omx_progress(to);
		omx_test(from, &c, &st, &res);
	}
	CHECK(res && st.code == OMX_SUCCESS);
	return st.addr;
}

/* The threaded tests' set-up over the in-memory hub (configure the environment first): init,
 * endpoint 0 of board "mem0" in *a and of "mem1" in *b (key 1), errors returned, and *a2b, a's
 * address of b (unit_memnet_connect). Returns the hub (for omx_memnet_destroy); failures are
 * counted. */
static inline struct omx_memnet *unit_memnet_pair(omx_endpoint_t *a, omx_endpoint_t *b, omx_endpoint_addr_t *a2b)
{
	struct omx_memnet *hub = omx_memnet_create();
	omx__test_set_memnet(hub, 9000);
	CHECK(omx_init() == OMX_SUCCESS);
	omx_set_error_handler(NULL, OMX_ERRORS_RETURN);
	CHECK(omx_open_endpoint(0, 0, 1, NULL, 0, a) == OMX_SUCCESS);
	CHECK(omx_open_endpoint(1, 0, 1, NULL, 0, b) == OMX_SUCCESS);
	*a2b = unit_memnet_connect(*a, *b, 1);
	return hub;
}
#endif

#endif
