/*
 * seqnum.h - 16-bit library sequence numbers (wire.md 7.1): low 14 bits count modulo 16384,
 * high 2 bits are the session number ("sesnum") chosen by the receiver of that direction.
 */
#ifndef OMX_SEQNUM_H
#define OMX_SEQNUM_H

#include <stdint.h>

#define OMX_SEQNUM_BITS 14
#define OMX_SEQNUM_MASK 0x3FFFu
#define OMX_SESNUM_MASK 0xC000u
#define OMX_SESNUM_ONE 0x4000u
#define OMX_EARLY_WINDOW 255       /* out-of-order packets kept ahead of the next expected one */
#define OMX_THROTTLE_WINDOW 0x1FFF /* unacked sends allowed in flight to one partner */

static inline uint16_t omx_seq_sesnum(uint16_t s)
{
	return (uint16_t)(s & OMX_SESNUM_MASK);
}

static inline uint16_t omx_seq_num(uint16_t s)
{
	return (uint16_t)(s & OMX_SEQNUM_MASK);
}

/* next = same sesnum, number + 1 modulo 2^14 */
static inline uint16_t omx_seq_inc(uint16_t s)
{
	return (uint16_t)((s & OMX_SESNUM_MASK) | ((s + 1) & OMX_SEQNUM_MASK));
}

/* Distance b - a modulo 2^14, ignoring sesnum bits. */
static inline uint16_t omx_seq_diff(uint16_t b, uint16_t a)
{
	return (uint16_t)((b - a) & OMX_SEQNUM_MASK);
}

/* First seqnum of a fresh connection in session `sesnum_bits` (0xC000 mask applied). */
static inline uint16_t omx_seq_first(uint16_t sesnum_bits)
{
	return (uint16_t)((sesnum_bits & OMX_SESNUM_MASK) | 1);
}

#endif
