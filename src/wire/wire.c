/*
 * wire.c - wire parameters, header lengths, endpoint demultiplexing and error strings
 * (wire.md sections 1, 4, 5 and 14). Decoding lives in wire_decode.c, encoding in
 * wire_encode.c.
 */
#include <string.h>

#include "wire/wire_int.h"

#define COMPAT_FRAG_MAX 4096u
#define COMPAT_FRAGS_MAX 8u
#define COMPAT_MEDIUM_MAX 32768u
#define COMPAT_PULL_REPLY_MAX 4096u
#define COMPAT_BLOCK_REPLIES 8u
#define COMPAT_FRAG_PIPELINE 12u
#define EXT_FRAGS_MAX 32u
#define EXT_BLOCK_REPLIES 32u
#define EXT_FRAG_CAP 32768u
#define MEDIUM_OVERHEAD 48u     /* head + medium body header */
#define PULL_REPLY_OVERHEAD 32u /* head + pull reply body header */

/* Extended mode fragment size: P if P <= 4096, else the largest power of two <= P up to 32 KiB;
 * where P reaches 48 KiB, P rounded down to 64 bytes. wire.md defines MTUs up to 9000 only; above,
 * the rule is ours. Frames of the largest MTUs carry 64 KiB less 64 bytes (65472 at MTU 65535):
 * each frame costs a system call and a pass through veth or the NIC, and the 32 KiB of earlier
 * builds made a 128 KiB medium four frames where TCP hands the link two segments
 * (docs/performance.md stop 30). Placement multiplies by F, so F need not be a power of two. */
static uint32_t ext_frag_max(uint32_t mtu)
{
	uint32_t p = mtu - MEDIUM_OVERHEAD;
	uint32_t f = 4096;

	if (p <= 4096)
		return p;
	if (p >= OMX_WIRE_FRAG_WHOLE_MIN)
		return p & ~63u;
	while (f * 2 <= p && f * 2 <= EXT_FRAG_CAP)
		f *= 2;
	return f;
}

int omx_wire_params_init(struct omx_wire_params *p, enum omx_wire_mode mode, uint32_t mtu)
{
	if (!p || mtu < OMX_WIRE_MTU_MIN || mtu > OMX_WIRE_MTU_MAX)
		return -1;
	if (mode == OMX_WIRE_COMPAT) {
		if (mtu < OMX_WIRE_COMPAT_MTU)
			return -1;
		memset(p, 0, sizeof(*p));
		p->mode = OMX_WIRE_COMPAT;
		p->mtu = OMX_WIRE_COMPAT_MTU;
		p->medium_frag_max = COMPAT_FRAG_MAX;
		p->medium_frags_max = COMPAT_FRAGS_MAX;
		p->medium_max = COMPAT_MEDIUM_MAX;
		p->pull_reply_max = COMPAT_PULL_REPLY_MAX;
		p->pull_block_replies = COMPAT_BLOCK_REPLIES;
		p->frag_pipeline = COMPAT_FRAG_PIPELINE;
		return 0;
	}
	if (mode != OMX_WIRE_EXTENDED)
		return -1;
	memset(p, 0, sizeof(*p));
	p->mode = OMX_WIRE_EXTENDED;
	p->mtu = mtu;
	p->medium_frag_max = ext_frag_max(mtu);
	p->medium_frags_max = EXT_FRAGS_MAX;
	p->medium_max = p->medium_frag_max * EXT_FRAGS_MAX;
	p->pull_reply_max = mtu - PULL_REPLY_OVERHEAD;
	p->pull_block_replies = EXT_BLOCK_REPLIES;
	p->frag_pipeline = 0;
	return 0;
}

void omx_wire_params_local(const struct omx_wire_params *wp, struct omx_wire_params *local)
{
	*local = *wp;
	if (wp->mode != OMX_WIRE_EXTENDED || wp->medium_frag_max == OMX_WIRE_LOCAL_FRAG)
		return;
	/* Larger interface fragments (MTUs from 49200) are not for the same-host ring, whose frames
	 * were measured at 32 KiB (docs/performance.md stop 28). */
	local->frags_exact = 1;
	local->medium_frag_max = OMX_WIRE_LOCAL_FRAG;
	local->medium_max = OMX_WIRE_LOCAL_FRAG * local->medium_frags_max;
	if (local->mtu < OMX_WIRE_LOCAL_FRAG + MEDIUM_OVERHEAD)
		local->mtu = OMX_WIRE_LOCAL_FRAG + MEDIUM_OVERHEAD;
	if (local->pull_reply_max < OMX_WIRE_LOCAL_FRAG)
		local->pull_reply_max = OMX_WIRE_LOCAL_FRAG;
}

size_t omx_wire_header_len(const struct omx_wire_params *wp, uint8_t ptype)
{
	size_t body;

	switch (ptype) {
	case OMX_PT_RAW:
		return OMX_HEAD_LEN; /* the whole body is the payload */
	case OMX_PT_HOST_QUERY:
	case OMX_PT_HOST_REPLY:
		body = OMX_BODY_HOST_LEN;
		break;
	case OMX_PT_TRUC:
		body = OMX_BODY_TRUC_LEN;
		break;
	case OMX_PT_CONNECT:
		body = OMX_BODY_CONNECT_LEN;
		break;
	case OMX_PT_TINY:
	case OMX_PT_SMALL:
		body = OMX_BODY_MSG_LEN;
		break;
	case OMX_PT_MEDIUM:
		body = OMX_BODY_MEDIUM_LEN;
		break;
	case OMX_PT_RNDV:
		body = OMX_BODY_RNDV_LEN;
		break;
	case OMX_PT_PULL:
		body = (wp && wp->mode == OMX_WIRE_COMPAT) ? OMX_BODY_PULL_COMPAT_LEN : OMX_BODY_PULL_LEN;
		break;
	case OMX_PT_PULL_REPLY:
		body = OMX_BODY_PULL_REPLY_LEN;
		break;
	case OMX_PT_NOTIFY:
		body = OMX_BODY_NOTIFY_LEN;
		break;
	case OMX_PT_NACK_LIB:
	case OMX_PT_NACK_MCP:
		body = OMX_BODY_NACK_LEN;
		break;
	default:
		return 0;
	}
	return OMX_HEAD_LEN + body;
}

/* Byte that names the destination endpoint of a frame, or a negative verdict. */
int omx_wire_frame_endpoint(const uint8_t *frame, size_t len)
{
	if (!frame || len < OMX_HEAD_LEN + 1 || omx_get16(frame + OMX_OFF_ETHERTYPE) != OMX_ETHERTYPE)
		return -2;
	switch (frame[OMX_OFF_PTYPE]) {
	case OMX_PT_RAW:
	case OMX_PT_HOST_QUERY:
	case OMX_PT_HOST_REPLY:
		return -1;
	case OMX_PT_NACK_LIB:
		return len > 25 ? frame[25] : -2;
	case OMX_PT_PULL_REPLY:
		return len > 31 ? (frame[31] ^ 0x80) : -2;
	case OMX_PT_TRUC:
	case OMX_PT_CONNECT:
	case OMX_PT_TINY:
	case OMX_PT_SMALL:
	case OMX_PT_MEDIUM:
	case OMX_PT_RNDV:
	case OMX_PT_PULL:
	case OMX_PT_NOTIFY:
	case OMX_PT_NACK_MCP:
		return len > 17 ? frame[17] : -2;
	default:
		return -2;
	}
}

const char *omx_wire_strerror(enum omx_wire_err e)
{
	switch (e) {
	case OMX_WIRE_OK:
		return "ok";
	case OMX_WIRE_ERR_TRUNCATED_HEAD:
		return "frame shorter than the Open-MX head";
	case OMX_WIRE_ERR_ETHERTYPE:
		return "not an Open-MX EtherType";
	case OMX_WIRE_ERR_UNKNOWN_PTYPE:
		return "unknown packet type";
	case OMX_WIRE_ERR_INVALID_PTYPE:
		return "invalid packet type";
	case OMX_WIRE_ERR_SHORT_HEADER:
		return "frame shorter than the packet header";
	case OMX_WIRE_ERR_BAD_DATA_LENGTH:
		return "bad data length";
	case OMX_WIRE_ERR_SHORT_PAYLOAD:
		return "frame shorter than header + payload";
	case OMX_WIRE_ERR_BAD_TRUC:
		return "bad truc type or session";
	case OMX_WIRE_ERR_BAD_FRAG:
		return "bad medium fragment";
	case OMX_WIRE_ERR_COUNT:
		break;
	}
	return "unknown wire error";
}
