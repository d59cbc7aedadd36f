/*
 * stream.c - a one-way stream of same-host messages (not a test): what a sender that only tests
 * its own sends (and so takes its partner's acks only through the library's own passes) gets
 * through, for bench/stream.sh. Two processes: the receiver (endpoint 0) posts and completes one
 * receive at a time; the sender (endpoint 1) sends N messages of L bytes, completing each before
 * the next (an eager send completes as soon as it is out), then a synchronous 0-byte message
 * whose completion says the receiver has them all.
 *
 *   stream r <count> <length>     receiver (start it first)
 *   stream s <count> <length>     sender; prints "length,count,ns_per_message,Mmsg_per_s"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "open-mx.h"

#define KEY 0x5e1f

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int complete(omx_endpoint_t ep, omx_request_t *req)
{
	omx_status_t st;
	uint32_t done = 0;
	while (!done)
		if (omx_test(ep, req, &st, &done) != OMX_SUCCESS)
			return -1;
	return st.code == OMX_SUCCESS ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "r") && strcmp(argv[1], "s"))) {
		fprintf(stderr, "usage: %s r|s <count> <length>\n", argv[0]);
		return 2;
	}
	int sender = argv[1][0] == 's';
	long n = atol(argv[2]);
	size_t len = strtoul(argv[3], NULL, 0);
	char *buf = calloc(1, len + 1);
	omx_endpoint_t ep;
	uint64_t nic;
	if (!buf || n < 1 || omx_init() != OMX_SUCCESS || omx_board_number_to_nic_id(0, &nic) != OMX_SUCCESS ||
	    omx_open_endpoint(0, sender ? 1 : 0, KEY, NULL, 0, &ep) != OMX_SUCCESS) {
		fprintf(stderr, "stream: set-up failed\n");
		return 1;
	}
	omx_request_t req;
	if (!sender) {
		for (long i = 0; i <= n; i++)
			if (omx_irecv(ep, buf, len, 0, 0, NULL, &req) != OMX_SUCCESS || complete(ep, &req) < 0)
				return 1;
	} else {
		omx_endpoint_addr_t to;
		if (omx_connect(ep, nic, 0, KEY, 5000, &to) != OMX_SUCCESS) {
			fprintf(stderr, "stream: cannot connect to endpoint 0\n");
			return 1;
		}
		double t0 = now_s();
		for (long i = 0; i < n; i++)
			if (omx_isend(ep, buf, len, to, (uint64_t)i, NULL, &req) != OMX_SUCCESS || complete(ep, &req) < 0)
				return 1;
		if (omx_issend(ep, buf, 0, to, (uint64_t)n, NULL, &req) != OMX_SUCCESS || complete(ep, &req) < 0)
			return 1;
		double t = now_s() - t0;
		printf("%zu,%ld,%.1f,%.3f\n", len, n, t / (double)n * 1e9, (double)n / t / 1e6);
	}
	omx_close_endpoint(ep);
	omx_finalize();
	free(buf);
	return 0;
}
