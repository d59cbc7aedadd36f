/*
 * wire_int.h - internals shared by the wire codec files (not part of the contract).
 * Big-endian field accessors; every caller has already checked the bounds.
 */
#ifndef OMX_WIRE_INT_H
#define OMX_WIRE_INT_H

#include "wire/wire.h"

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
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void omx_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
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
