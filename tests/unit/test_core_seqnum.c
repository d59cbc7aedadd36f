/*
 * test_core_seqnum.c - 16-bit library sequence numbers (wire.md 7.1-7.6): increments keep the
 * 2-bit session number and wrap the 14-bit counter; distances, the ack window test and the early
 * window behave across the wrap, for every session number.
 */
#include <stdio.h>

#include "core/seqnum.h"

#include "unit_check.h"

/* The ack rule of wire.md 7.2: value A acks sends [U, A) if 0 < A-U <= N-U. */
static int ack_accepted(uint16_t a, uint16_t u, uint16_t n)
{
	uint16_t newly = omx_seq_diff(a, u), missing = omx_seq_diff(n, u);
	return newly != 0 && newly <= missing;
}

int main(void)
{
	for (uint16_t ses = 0; ses < 4; ses++) {
		uint16_t sb = (uint16_t)(ses << 14);
		uint16_t first = omx_seq_first(sb);
		CHECK(first == (sb | 1));
		CHECK(omx_seq_sesnum(first) == sb);
		/* increment wraps within the session */
		CHECK(omx_seq_inc((uint16_t)(sb | 0x3FFF)) == sb);
		CHECK(omx_seq_inc((uint16_t)(sb | 0x3FFE)) == (sb | 0x3FFF));
		/* walking the whole space returns to the start, never leaving the session */
		uint16_t s = first;
		int stayed = 1;
		for (int i = 0; i < 16384; i++) {
			s = omx_seq_inc(s);
			stayed &= omx_seq_sesnum(s) == sb;
		}
		CHECK(stayed && s == first);
		/* distances across the wrap */
		CHECK(omx_seq_diff((uint16_t)(sb | 2), (uint16_t)(sb | 0x3FFE)) == 4);
		CHECK(omx_seq_diff((uint16_t)(sb | 0x3FFE), (uint16_t)(sb | 2)) == 0x3FFC);
		CHECK(omx_seq_diff(first, first) == 0);
		/* ack window across the wrap: U = 0x3FF0, N = 0x0010 (32 outstanding) */
		uint16_t u = (uint16_t)(sb | 0x3FF0), n = (uint16_t)(sb | 0x0010);
		CHECK(ack_accepted((uint16_t)(sb | 0x3FFF), u, n));
		CHECK(ack_accepted((uint16_t)(sb | 0x0005), u, n));
		CHECK(ack_accepted(n, u, n));
		CHECK(!ack_accepted(u, u, n));                      /* nothing new */
		CHECK(!ack_accepted((uint16_t)(sb | 0x0011), u, n)); /* beyond what was sent */
		CHECK(!ack_accepted((uint16_t)(sb | 0x3FE0), u, n)); /* old ack */
		/* early window of 255 after the expected one, across the wrap */
		uint16_t m = (uint16_t)(sb | 0x3FFA);
		CHECK(omx_seq_diff((uint16_t)(sb | 0x00F9), m) == 255);
		CHECK(omx_seq_diff((uint16_t)(sb | 0x00FA), m) == 256);
		/* the duplicate just before the expected one is at distance 0x3FFF */
		CHECK(omx_seq_diff((uint16_t)(sb | 0x3FF9), m) == OMX_SEQNUM_MASK);
		/* throttle: half the space may be in flight */
		CHECK(omx_seq_diff((uint16_t)(u + OMX_THROTTLE_WINDOW), u) == OMX_THROTTLE_WINDOW);
	}
	/* session numbers differ: 0x4001 and 0x0001 are in different sessions */
	CHECK(omx_seq_sesnum(0x4001) != omx_seq_sesnum(0x0001));
	CHECK(omx_seq_sesnum((uint16_t)((0xC000 + OMX_SESNUM_ONE) & OMX_SESNUM_MASK)) == 0);
	return unit_finish(NULL);
}
