/*
 * wire_decode.c - frame -> struct omx_pkt (wire.md sections 2, 5, 12 and 14).
 * Every read is preceded by a length check against the body length; nothing is read past len.
 * Offsets in the per-type decoders are body offsets (frame offset - 16).
 */
#include <string.h>

#include "wire/wire_int.h"
#include "hot_path.h"

/* Fields shared by TINY, SMALL, MEDIUM and RNDV (wire.md 5.1/5.2), except length and checksum. */
static void dec_msg_common(const uint8_t *b, struct omx_pkt_msg *m)
{
	m->dst_endpoint = b[1];
	m->src_endpoint = b[2];
	m->src_generation = b[3];
	m->lib_seqnum = omx_get16(b + 8);
	m->lib_piggyack = omx_get16(b + 10);
	m->match = ((uint64_t)omx_get32(b + 12) << 32) | omx_get32(b + 16);
	m->session = omx_get32(b + 20);
}

static enum omx_wire_err dec_tiny_small(const uint8_t *b, size_t blen, uint32_t max, struct omx_pkt *out)
{
	struct omx_pkt_msg *m = &out->u.msg;

	if (blen < OMX_BODY_MSG_LEN)
		return OMX_WIRE_ERR_SHORT_HEADER;
	dec_msg_common(b, m);
	m->length = omx_get16(b + 4);
	m->checksum = omx_get16(b + 6);
	if (m->length > max)
		return OMX_WIRE_ERR_BAD_DATA_LENGTH;
	if (blen - OMX_BODY_MSG_LEN < m->length)
		return OMX_WIRE_ERR_SHORT_PAYLOAD;
	out->payload = b + OMX_BODY_MSG_LEN;
	out->payload_len = m->length;
	return OMX_WIRE_OK;
}

static enum omx_wire_err check_medium_frag(const struct omx_wire_params *wp, const struct omx_pkt_msg *m)
{
	if (m->frag_seqnum >= wp->medium_frags_max || m->frag_length > wp->medium_frag_max ||
	    m->frag_length > m->length)
		return OMX_WIRE_ERR_BAD_FRAG;
	/* the fragment must lie inside the message: [seq*F, seq*F + frag_length) */
	if ((uint64_t)m->frag_seqnum * wp->medium_frag_max + m->frag_length > m->length)
		return OMX_WIRE_ERR_BAD_FRAG;
	if (wp->frags_exact) {
		/* F bytes, or the rest of the message for the last fragment (fits: checked above) */
		uint32_t rest = m->length - (uint32_t)m->frag_seqnum * wp->medium_frag_max;
		if (m->frag_length != (rest < wp->medium_frag_max ? rest : wp->medium_frag_max))
			return OMX_WIRE_ERR_BAD_FRAG;
	}
	if (wp->mode == OMX_WIRE_COMPAT && m->frag_pipeline != wp->frag_pipeline)
		return OMX_WIRE_ERR_BAD_FRAG;
	return OMX_WIRE_OK;
}

static enum omx_wire_err dec_medium(const struct omx_wire_params *wp, const uint8_t *b, size_t blen,
				    struct omx_pkt *out)
{
	struct omx_pkt_msg *m = &out->u.msg;
	enum omx_wire_err err;

	if (blen < OMX_BODY_MEDIUM_LEN)
		return OMX_WIRE_ERR_SHORT_HEADER;
	dec_msg_common(b, m);
	if (wp->mode == OMX_WIRE_COMPAT) {
		m->length = omx_get16(b + 4); /* 6..7: pad */
		m->frag_pipeline = b[27];
	} else {
		m->length = omx_get32(b + 4); /* 27: pad1 */
	}
	m->frag_length = omx_get16(b + 24);
	m->frag_seqnum = b[26];
	m->checksum = omx_get16(b + 28);
	if (m->length > wp->medium_max)
		return OMX_WIRE_ERR_BAD_DATA_LENGTH;
	err = check_medium_frag(wp, m);
	if (err != OMX_WIRE_OK)
		return err;
	if (blen - OMX_BODY_MEDIUM_LEN < m->frag_length)
		return OMX_WIRE_ERR_SHORT_PAYLOAD;
	out->payload = b + OMX_BODY_MEDIUM_LEN;
	out->payload_len = m->frag_length;
	return OMX_WIRE_OK;
}

static enum omx_wire_err dec_rndv(const uint8_t *b, size_t blen, struct omx_pkt *out)
{
	struct omx_pkt_msg *m = &out->u.msg;

	if (blen < OMX_BODY_RNDV_LEN)
		return OMX_WIRE_ERR_SHORT_HEADER;
	dec_msg_common(b, m);
	m->length = omx_get16(b + 4);
	m->checksum = omx_get16(b + 6);
	m->msg_length = omx_get32(b + 24);
	m->rdma_id = b[28];
	m->rdma_seqnum = b[29];
	m->rdma_offset = omx_get16(b + 30);
	if (m->length < 8)
		return OMX_WIRE_ERR_BAD_DATA_LENGTH;
	return OMX_WIRE_OK;
}

static enum omx_wire_err dec_pull(const struct omx_wire_params *wp, const uint8_t *b, size_t blen,
				  struct omx_pkt *out)
{
	struct omx_pkt_pull *p = &out->u.pull;

	if (blen < (wp->mode == OMX_WIRE_COMPAT ? OMX_BODY_PULL_COMPAT_LEN : OMX_BODY_PULL_LEN))
		return OMX_WIRE_ERR_SHORT_HEADER;
	p->dst_endpoint = b[1];
	p->src_endpoint = b[2];
	p->session = omx_get32(b + 4);
	p->total_length = omx_get32(b + 8);
	if (wp->mode == OMX_WIRE_COMPAT) {
		p->rdma_id = b[12];
		p->rdma_seqnum = b[13];
		p->rdma_offset = omx_get16(b + 14);
		p->src_pull_handle = omx_get32(b + 16);
		p->src_magic = omx_get32(b + 20);
		p->first_frame_offset = omx_get16(b + 24);
		p->block_length = omx_get16(b + 26);
		p->frame_index = omx_get32(b + 28);
	} else {
		p->rdma_id = omx_get32(b + 12);
		p->rdma_seqnum = b[16];
		p->rdma_offset = omx_get32(b + 20);
		p->src_pull_handle = omx_get32(b + 24);
		p->src_magic = omx_get32(b + 28);
		p->first_frame_offset = omx_get32(b + 32);
		p->block_length = omx_get32(b + 36);
		p->frame_index = omx_get32(b + 40);
	}
	return OMX_WIRE_OK;
}

static enum omx_wire_err dec_pull_reply(const struct omx_wire_params *wp, const uint8_t *b, size_t blen,
					struct omx_pkt *out)
{
	struct omx_pkt_pull_reply *r = &out->u.pull_reply;

	if (blen < OMX_BODY_PULL_REPLY_LEN)
		return OMX_WIRE_ERR_SHORT_HEADER;
	r->frame_seqnum = b[1];
	r->frame_length = omx_get16(b + 2);
	r->msg_offset = omx_get32(b + 4);
	r->dst_pull_handle = omx_get32(b + 8);
	r->dst_magic = omx_get32(b + 12);
	if (r->frame_length > wp->pull_reply_max)
		return OMX_WIRE_ERR_BAD_DATA_LENGTH;
	if (blen - OMX_BODY_PULL_REPLY_LEN < r->frame_length)
		return OMX_WIRE_ERR_SHORT_PAYLOAD;
	out->payload = b + OMX_BODY_PULL_REPLY_LEN;
	out->payload_len = r->frame_length;
	return OMX_WIRE_OK;
}

static enum omx_wire_err dec_notify(const uint8_t *b, size_t blen, struct omx_pkt *out)
{
	struct omx_pkt_notify *n = &out->u.notify;

	if (blen < OMX_BODY_NOTIFY_LEN)
		return OMX_WIRE_ERR_SHORT_HEADER;
	n->dst_endpoint = b[1];
	n->src_endpoint = b[2];
	n->session = omx_get32(b + 4);
	n->total_length = omx_get32(b + 8);
	n->rdma_id = b[12];
	n->rdma_seqnum = b[13];
	n->lib_seqnum = omx_get16(b + 18);
	n->lib_piggyack = omx_get16(b + 20);
	return OMX_WIRE_OK;
}

static enum omx_wire_err dec_connect(const uint8_t *b, size_t blen, struct omx_pkt *out)
{
	struct omx_pkt_connect *c = &out->u.connect;

	if (blen < OMX_BODY_CONNECT_LEN)
		return OMX_WIRE_ERR_SHORT_HEADER;
	c->dst_endpoint = b[1];
	c->src_endpoint = b[2];
	c->length = b[4];
	c->lib_seqnum = omx_get16(b + 8);
	c->src_dst_peer_index = omx_get16(b + 10);
	if (b[12] == OMX_CONNECT_EXT_MAGIC && (b[13] == OMX_WIRE_EXTENDED + 1 || b[13] == OMX_WIRE_COMPAT + 1)) {
		c->ext_present = 1;
		c->ext_mode = (enum omx_wire_mode)(b[13] - 1);
		c->ext_mtu = omx_get16(b + 14);
	}
	c->src_session_id = omx_get32(b + 16);
	c->app_key = omx_get32(b + 20);
	c->target_session_id = c->app_key;
	c->target_recv_seqnum_start = omx_get16(b + 24);
	c->is_reply = b[26];
	c->connect_seqnum = b[27];
	c->status_code = c->is_reply ? b[28] : 0; /* pad in a request */
	if (c->length < 16)
		return OMX_WIRE_ERR_BAD_DATA_LENGTH;
	return OMX_WIRE_OK;
}

static enum omx_wire_err dec_truc(const uint8_t *b, size_t blen, struct omx_pkt *out)
{
	struct omx_pkt_truc *t = &out->u.truc;

	if (blen < OMX_BODY_TRUC_LEN)
		return OMX_WIRE_ERR_SHORT_HEADER;
	t->dst_endpoint = b[1];
	t->src_endpoint = b[2];
	t->length = b[4];
	t->session = omx_get32(b + 8);
	t->type = b[12];
	t->lib_seqnum = omx_get16(b + 14);
	t->session_id = omx_get32(b + 16);
	t->acknum = omx_get32(b + 20);
	t->send_seq = omx_get16(b + 24);
	t->resent = b[26];
	if (t->length < 16)
		return OMX_WIRE_ERR_BAD_DATA_LENGTH;
	if (t->type != OMX_TRUC_TYPE_ACK || t->session_id != t->session)
		return OMX_WIRE_ERR_BAD_TRUC;
	return OMX_WIRE_OK;
}

static enum omx_wire_err dec_nack_lib(const uint8_t *b, size_t blen, struct omx_pkt *out)
{
	struct omx_pkt_nack_lib *n = &out->u.nack_lib;

	if (blen < OMX_BODY_NACK_LEN)
		return OMX_WIRE_ERR_SHORT_HEADER;
	n->src_endpoint = b[1];
	n->nack_type = b[3];
	n->dst_endpoint = b[9];
	n->dst_src_peer_index = omx_get16(b + 10);
	n->lib_seqnum = omx_get16(b + 12);
	return OMX_WIRE_OK;
}

static enum omx_wire_err dec_nack_mcp(const uint8_t *b, size_t blen, struct omx_pkt *out)
{
	struct omx_pkt_nack_mcp *n = &out->u.nack_mcp;

	if (blen < OMX_BODY_NACK_LEN)
		return OMX_WIRE_ERR_SHORT_HEADER;
	n->src_endpoint = b[1];
	n->nack_type = b[3];
	n->src_pull_handle = omx_get32(b + 8);
	n->src_magic = omx_get32(b + 12);
	return OMX_WIRE_OK;
}

static enum omx_wire_err dec_host(const uint8_t *b, size_t blen, struct omx_pkt *out)
{
	struct omx_pkt_host *h = &out->u.host;

	if (blen < OMX_BODY_HOST_LEN)
		return OMX_WIRE_ERR_SHORT_HEADER;
	h->src_dst_peer_index = omx_get16(b + 2);
	h->magic = omx_get32(b + 8);
	if (b[0] == OMX_PT_HOST_QUERY)
		return OMX_WIRE_OK; /* byte 1 is a pad in a query */
	h->length = b[1];
	if (h->length > OMX_HOSTNAME_MAX)
		return OMX_WIRE_ERR_BAD_DATA_LENGTH;
	if (blen - OMX_BODY_HOST_LEN < h->length)
		return OMX_WIRE_ERR_SHORT_PAYLOAD;
	memcpy(h->hostname, b + OMX_BODY_HOST_LEN, h->length);
	h->hostname[h->length] = '\0'; /* forced termination; an inner NUL ends it earlier */
	return OMX_WIRE_OK;
}

static enum omx_wire_err dec_raw(const uint8_t *b, size_t blen, struct omx_pkt *out)
{
	out->payload = b; /* the whole body, ptype byte included */
	out->payload_len = (uint32_t)blen;
	if (blen >= OMX_BODY_RAW_DISCOVERY_LEN) {
		out->u.raw.nic_id = ((uint64_t)omx_get32(b + OMX_RAW_OFF_NIC_HI) << 32) |
				    omx_get32(b + OMX_RAW_OFF_NIC_LO);
		out->u.raw.serial = omx_get32(b + OMX_RAW_OFF_SERIAL);
	}
	return OMX_WIRE_OK;
}

/* The head of a message frame and an empty u.msg, as omx_wire_decode leaves them for its body's
 * decoder (the decoders of one type below). */
static void dec_msg_head(const uint8_t *frame, uint8_t ptype, struct omx_pkt *out)
{
	memcpy(out->dst_mac, frame, 6);
	memcpy(out->src_mac, frame + 6, 6);
	out->peer_index = omx_get16(frame + OMX_OFF_PEER_INDEX);
	out->ptype = ptype;
	memset(&out->u.msg, 0, sizeof(out->u.msg));
	out->payload = NULL;
	out->payload_len = 0;
}

OMX_HOT_PATH int omx_wire_decode_eager(const uint8_t *frame, size_t len, struct omx_pkt *out)
{
	if (!frame || len < OMX_HEAD_LEN + OMX_BODY_MSG_LEN || omx_get16(frame + OMX_OFF_ETHERTYPE) != OMX_ETHERTYPE)
		return 0;
	uint8_t ptype = frame[OMX_OFF_PTYPE];
	if (ptype != OMX_PT_TINY && ptype != OMX_PT_SMALL)
		return 0;
	dec_msg_head(frame, ptype, out);
	return dec_tiny_small(frame + OMX_HEAD_LEN, len - OMX_HEAD_LEN, ptype == OMX_PT_TINY ? OMX_TINY_MAX : OMX_SMALL_MAX,
			      out) == OMX_WIRE_OK;
}

int omx_wire_decode_medium_whole(const struct omx_wire_params *wp, const uint8_t *frame, size_t len, struct omx_pkt *out)
{
	if (!frame || len < OMX_HEAD_LEN + OMX_BODY_MEDIUM_LEN || omx_get16(frame + OMX_OFF_ETHERTYPE) != OMX_ETHERTYPE ||
	    frame[OMX_OFF_PTYPE] != OMX_PT_MEDIUM)
		return 0;
	dec_msg_head(frame, OMX_PT_MEDIUM, out);
	return dec_medium(wp, frame + OMX_HEAD_LEN, len - OMX_HEAD_LEN, out) == OMX_WIRE_OK && omx_wire_medium_whole(out);
}

enum omx_wire_err omx_wire_decode(const struct omx_wire_params *wp, const uint8_t *frame, size_t len,
				  struct omx_pkt *out)
{
	const uint8_t *b;
	size_t blen;

	memset(out, 0, sizeof(*out));
	if (!frame || len < OMX_HEAD_LEN + 1)
		return OMX_WIRE_ERR_TRUNCATED_HEAD;
	if (omx_get16(frame + OMX_OFF_ETHERTYPE) != OMX_ETHERTYPE)
		return OMX_WIRE_ERR_ETHERTYPE;
	memcpy(out->dst_mac, frame, 6);
	memcpy(out->src_mac, frame + 6, 6);
	out->peer_index = omx_get16(frame + OMX_OFF_PEER_INDEX);
	out->ptype = frame[OMX_OFF_PTYPE];
	b = frame + OMX_HEAD_LEN;
	blen = len - OMX_HEAD_LEN;
	if (blen > UINT32_MAX)
		blen = UINT32_MAX; /* payload_len is 32-bit; only RAW could see it */

	switch (out->ptype) {
	case OMX_PT_RAW:
		return dec_raw(b, blen, out);
	case OMX_PT_HOST_QUERY:
	case OMX_PT_HOST_REPLY:
		return dec_host(b, blen, out);
	case OMX_PT_TRUC:
		return dec_truc(b, blen, out);
	case OMX_PT_CONNECT:
		return dec_connect(b, blen, out);
	case OMX_PT_TINY:
		return dec_tiny_small(b, blen, OMX_TINY_MAX, out);
	case OMX_PT_SMALL:
		return dec_tiny_small(b, blen, OMX_SMALL_MAX, out);
	case OMX_PT_MEDIUM:
		return dec_medium(wp, b, blen, out);
	case OMX_PT_RNDV:
		return dec_rndv(b, blen, out);
	case OMX_PT_PULL:
		return dec_pull(wp, b, blen, out);
	case OMX_PT_PULL_REPLY:
		return dec_pull_reply(wp, b, blen, out);
	case OMX_PT_NOTIFY:
		return dec_notify(b, blen, out);
	case OMX_PT_NACK_LIB:
		return dec_nack_lib(b, blen, out);
	case OMX_PT_NACK_MCP:
		return dec_nack_mcp(b, blen, out);
	case OMX_PT_MFM_NIC_REPLY:
	case OMX_PT_ETHER_UNICAST:
	case OMX_PT_ETHER_MULTICAST:
	case OMX_PT_ETHER_NATIVE:
		return OMX_WIRE_ERR_INVALID_PTYPE;
	default:
		return OMX_WIRE_ERR_UNKNOWN_PTYPE;
	}
}
