/*
 * wire_int.h - internals shared by the wire codec files (not part of the contract).
 * Big-endian field accessors; every caller has already checked the bounds.
 */
#ifndef OMX_WIRE_INT_H
#define OMX_WIRE_INT_H

#include "wire/wire.h"

/* Stores: one store and a byte swap each; the byte-by-byte form compiled to a store and a shift
 * per byte (a same-host TINY's encoding spent ~40 instructions on its six fields). The loads'
 * byte-by-byte form compiles to single loads already (the byte-swapped form made the eager
 * decoder no shorter, and changed its inlining). */
#include <string.h>
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define OMX_BE16(v) __builtin_bswap16(v)
#define OMX_BE32(v) __builtin_bswap32(v)
#else
#define OMX_BE16(v) (v)
#define OMX_BE32(v) (v)
#endif

static inline uint16_t omx_get16(const uint8_t *p)
{
	return (uint16_t)(((unsigned)p[0] << 8) | p[1]);
}

static inline uint32_t omx_get32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void omx_put16(uint8_t *p, uint16_t v)
{
	v = (uint16_t)OMX_BE16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void omx_put32(uint8_t *p, uint32_t v)
{
	v = OMX_BE32(v);
	memcpy(p, &v, sizeof(v));
}

/* Frame offsets of the head (wire.md 2.1). */
#define OMX_OFF_ETHERTYPE 12
#define OMX_OFF_PEER_INDEX 14
#define OMX_OFF_PTYPE 16

/* Offset of the nic id / serial inside the omxoed discovery body (wire.md 12). */
#define OMX_RAW_OFF_NIC_HI 16
#define OMX_RAW_OFF_NIC_LO 20
#define OMX_RAW_OFF_SERIAL 24

#endif
