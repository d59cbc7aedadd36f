/*
 * test_core_ack_defer.c - piggybacked acks that wait for the next pass (omx__ack_defer) end where
 * taking each of them in arrival order would have: a second one while one waits keeps the later
 * of the two that omx__ack_received accepts. An older one (a replayed early frame's), one past
 * what was sent, or one of another session must not displace a valid one, nor be displaced
 * wrongly. Over the in-memory hub: A sends to B, which never progresses, so no real ack reaches
 * A; the acks are handed to A's partner of B directly, and A's unacked count says what was taken.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "open-mx.h"
#include "core/core.h"
#include "core/seqnum.h"

#define UNIT_PUMP pump
#define UNIT_MEMNET
#include "unit_check.h"

static omx_endpoint_t A, B;

static void pump(void)
{
	omx_progress(A);
}

static uint16_t seq_plus(uint16_t s, unsigned n)
{
	while (n--)
		s = omx_seq_inc(s);
	return s;
}

static uint16_t unacked(const struct omx_partner *p)
{
	return omx_seq_diff(p->next_send_seq, p->next_acked_seq);
}

/* A sends n tiny messages to B (nobody will receive them). */
static void send_some(omx_endpoint_addr_t to, unsigned n)
{
	static char msg[8] = "abcdefg";
	for (unsigned i = 0; i < n; i++)
		CHECK(omx_isend(A, msg, sizeof(msg), to, 0x42, NULL, NULL) == OMX_SUCCESS);
}

int main(void)
{
	char dir[] = "/tmp/omx-test-XXXXXX";
	if (unit_lock_dir(dir) < 0)
		return 2;
	setenv("OMX_IFACES", "mem0,mem1", 1);
	setenv("OMX_HOSTNAME", "unit", 1);
	setenv("OMX_RESEND_DELAY_MS", "3600000", 1); /* no resend reaches B meanwhile */
	setenv("OMX_PROGRESS_THREAD", "0", 1);
	omx_endpoint_addr_t a2b;
	struct omx_memnet *hub = unit_memnet_pair(&A, &B, &a2b);
	struct omx_partner *p = omx__partner_from_addr(A, &a2b);
	CHECK(p != NULL);
	if (!p)
		return unit_finish(dir);

	/* A later ack, then an older one: the later one is what is left. */
	send_some(a2b, 4);
	uint16_t s = p->next_acked_seq;
	CHECK_EQ(unacked(p), 4);
	omx__ack_defer(p, seq_plus(s, 3));
	omx__ack_defer(p, seq_plus(s, 1));
	omx__acks_deferred_take(A);
	CHECK_EQ(p->next_acked_seq, seq_plus(s, 3));
	CHECK_EQ(unacked(p), 1);

	/* An older one, then a later one. */
	send_some(a2b, 4);
	s = p->next_acked_seq;
	omx__ack_defer(p, seq_plus(s, 1));
	omx__ack_defer(p, seq_plus(s, 4));
	omx__acks_deferred_take(A);
	CHECK_EQ(p->next_acked_seq, seq_plus(s, 4));
	CHECK_EQ(unacked(p), 1);

	/* A valid one, then one past what was sent: the valid one stays. */
	send_some(a2b, 3);
	s = p->next_acked_seq;
	CHECK_EQ(unacked(p), 4);
	omx__ack_defer(p, seq_plus(s, 2));
	omx__ack_defer(p, seq_plus(s, 50));
	omx__acks_deferred_take(A);
	CHECK_EQ(p->next_acked_seq, seq_plus(s, 2));

	/* One past what was sent, then a valid one: the valid one replaces it. */
	s = p->next_acked_seq;
	omx__ack_defer(p, seq_plus(s, 60));
	omx__ack_defer(p, seq_plus(s, 1));
	omx__acks_deferred_take(A);
	CHECK_EQ(p->next_acked_seq, seq_plus(s, 1));

	/* Another session's, after a valid one: ignored. */
	send_some(a2b, 2);
	s = p->next_acked_seq;
	CHECK_EQ(unacked(p), 3);
	omx__ack_defer(p, seq_plus(s, 1));
	omx__ack_defer(p, (uint16_t)(seq_plus(s, 3) ^ OMX_SESNUM_ONE));
	omx__acks_deferred_take(A);
	CHECK_EQ(p->next_acked_seq, seq_plus(s, 1));

	/* Everything acked at last: nothing left waiting, the unacked count at zero. */
	omx__ack_defer(p, p->next_send_seq);
	omx__acks_deferred_take(A);
	CHECK_EQ(unacked(p), 0);
	CHECK(omx_list_empty(&A->acks_deferred));

	CHECK(omx_close_endpoint(A) == OMX_SUCCESS);
	CHECK(omx_close_endpoint(B) == OMX_SUCCESS);
	CHECK(omx_finalize() == OMX_SUCCESS);
	omx_memnet_destroy(hub);
	return unit_finish(dir);
}
