/*
 * test_core_early_room.c - out-of-order frames never keep out the message they wait for (stop 33).
 * Over the in-memory hub, B sends 400 mediums to A, four for each one A takes. A's unexpected room
 * is small (96 KiB), and A progresses a while between receives with none posted: what arrives
 * then is queued unexpected until the room is full, and a refused message's followers, arriving
 * once A has made room, are held as early frames against the same room. The refused message must
 * still come back and get in: its sender is asked for it although early frames fill the room, and
 * those frames give way to it (dropped, counted, their sender asked again). The resend timer is an
 * hour: only resend requests bring refused messages back. Before the fix A stalled at message 14
 * for good, its room full of 12 early frames waiting for it, no request sent. A must get all 400,
 * intact and in order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "open-mx.h"
#include "core/core.h"
#include "core/counters.h"
#include "core/testhooks.h"

#define UNIT_PUMP pump
#define UNIT_MEMNET
#include "unit_check.h"

#define COUNT 400
#define MSG_LEN 8000 /* one medium fragment at MTU 9000 */

static omx_endpoint_t A, B;

static void pump(void)
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
	setenv("OMX_HOSTNAME", "unit", 1);
	setenv("OMX_RESEND_DELAY_MS", "3600000", 1); /* only resend requests bring refused messages back */
	setenv("OMX_PROGRESS_THREAD", "0", 1);
	setenv("OMX_UNEXP_MAX_KB", "96", 1);
	omx_endpoint_addr_t b2a;
	struct omx_memnet *hub = unit_memnet_pair(&B, &A, &b2a); /* B on mem0 sends to A on mem1 */
	omx_request_t r;
	omx_status_t st;

	static uint8_t sbuf[COUNT][MSG_LEN], rbuf[MSG_LEN];
	int sent = 0, got = 0;
	for (int i = 0; i < COUNT; i++) {
		/* B runs ahead: four new messages for each one A takes. */
		for (int k = 0; k < 4 && sent < COUNT; k++, sent++) {
			unit_fill(sbuf[sent], MSG_LEN, (uint64_t)sent + 1);
			CHECK(omx_isend(B, sbuf[sent], MSG_LEN, b2a, 0xE000 + (uint64_t)sent, NULL, NULL) == OMX_SUCCESS);
		}
		for (int k = 0; k < 8; k++)
			pump(); /* nothing posted: arrivals wait unexpected or early */
		memset(rbuf, 0, sizeof(rbuf));
		CHECK(omx_irecv(A, rbuf, MSG_LEN, 0xE000 + (uint64_t)i, ~0ull, NULL, &r) == OMX_SUCCESS);
		if (!wait_req(A, &r, &st, 5000)) {
			fprintf(stderr, "message %d never arrived\n", i);
			omx__debug_dump(A, 1);
			break;
		}
		if (st.code == OMX_SUCCESS && st.xfer_length == MSG_LEN && !memcmp(rbuf, sbuf[i], MSG_LEN))
			got++;
	}
	const uint64_t *ca = omx__counters_values(A->board);
	printf("received %d of %d; A: %llu refused for room, %llu early frames dropped, %llu resend requests\n", got,
	       COUNT, (unsigned long long)ca[OMX_C_UNEXP_QUEUE_FULL], (unsigned long long)ca[OMX_C_X_DROP_EARLY_FULL],
	       (unsigned long long)ca[OMX_C_X_RESEND_ASKED]);
	CHECK(got == COUNT);
	CHECK(ca[OMX_C_UNEXP_QUEUE_FULL] > 0);  /* the room did run out */
	CHECK(ca[OMX_C_X_DROP_EARLY_FULL] > 0); /* ...with early frames in it, which gave way */
	CHECK(A->unexp_bytes == 0);            /* every charge given back */
	CHECK(omx_close_endpoint(A) == OMX_SUCCESS);
	CHECK(omx_close_endpoint(B) == OMX_SUCCESS);
	CHECK(omx_finalize() == OMX_SUCCESS);
	omx_memnet_destroy(hub);
	return unit_finish(dir);
}
