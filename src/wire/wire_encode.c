/*
 * wire_encode.c - struct omx_pkt -> frame (wire.md sections 2, 5 and 12).
 * The header area is zeroed first, so every pad/unused field goes out as zero; frames are
 * zero-padded to OMX_FRAME_MIN. The encoder refuses what the decoder would reject, so every
 * frame it produces decodes back to the same packet.
 * Offsets in the per-type encoders are body offsets (frame offset - 16).
 */
#include <string.h>

#include "wire/wire_int.h"
#include "hot_path.h"

static void enc_msg_common(uint8_t *b, uint8_t ptype, const struct omx_pkt_msg *m)
{
	b[0] = ptype;
	b[1] = m->dst_endpoint;
	b[2] = m->src_endpoint;
	b[3] = m->src_generation;
	omx_put16(b + 8, m->lib_seqnum);
	omx_put16(b + 10, m->lib_piggyack);
	omx_put32(b + 12, (uint32_t)(m->match >> 32));
	omx_put32(b + 16, (uint32_t)m->match);
	omx_put32(b + 20, m->session);
}

/* Every byte of a TINY/SMALL body header (plen already checked). */
static void enc_eager_body(uint8_t ptype, const struct omx_pkt_msg *m, uint8_t *b, size_t plen)
{
	enc_msg_common(b, ptype, m);
	omx_put16(b + 4, (uint16_t)plen);
	omx_put16(b + 6, m->checksum);
}

static int enc_tiny_small(const struct omx_pkt *pkt, uint8_t *b, size_t plen)
{
	const struct omx_pkt_msg *m = &pkt->u.msg;
	size_t max = pkt->ptype == OMX_PT_TINY ? OMX_TINY_MAX : OMX_SMALL_MAX;

	if (plen > max || (m->length != 0 && m->length != plen))
		return -1;
	enc_eager_body(pkt->ptype, m, b, plen);
	return 0;
}

static int enc_medium(const struct omx_wire_params *wp, const struct omx_pkt *pkt, uint8_t *b, size_t plen)
{
	const struct omx_pkt_msg *m = &pkt->u.msg;
	uint64_t frag_end = (uint64_t)m->frag_seqnum * wp->medium_frag_max + plen;

	if (m->frag_length != 0 && m->frag_length != plen)
		return -1;
	if (m->length > wp->medium_max || m->frag_seqnum >= wp->medium_frags_max ||
	    plen > wp->medium_frag_max || frag_end > m->length)
		return -1;
	enc_msg_common(b, OMX_PT_MEDIUM, m);
	if (wp->mode == OMX_WIRE_COMPAT) {
		if (m->length > 0xFFFF)
			return -1;
		omx_put16(b + 4, (uint16_t)m->length);
		b[27] = wp->frag_pipeline;
	} else {
		omx_put32(b + 4, m->length);
	}
	omx_put16(b + 24, (uint16_t)plen);
	b[26] = m->frag_seqnum;
	omx_put16(b + 28, m->checksum);
	return 0;
}

static int enc_rndv(const struct omx_pkt *pkt, uint8_t *b)
{
	const struct omx_pkt_msg *m = &pkt->u.msg;
	uint32_t length = m->length ? m->length : 8;

	if (length < 8 || length > 0xFFFF)
		return -1;
	enc_msg_common(b, OMX_PT_RNDV, m);
	omx_put16(b + 4, (uint16_t)length);
	omx_put16(b + 6, m->checksum);
	omx_put32(b + 24, m->msg_length);
	b[28] = m->rdma_id;
	b[29] = m->rdma_seqnum;
	omx_put16(b + 30, m->rdma_offset);
	return 0;
}

static int enc_pull(const struct omx_wire_params *wp, const struct omx_pkt *pkt, uint8_t *b)
{
	const struct omx_pkt_pull *p = &pkt->u.pull;

	b[0] = OMX_PT_PULL;
	b[1] = p->dst_endpoint;
	b[2] = p->src_endpoint;
	omx_put32(b + 4, p->session);
	omx_put32(b + 8, p->total_length);
	if (wp->mode != OMX_WIRE_COMPAT) {
		omx_put32(b + 12, p->rdma_id);
		b[16] = p->rdma_seqnum;
		omx_put32(b + 20, p->rdma_offset);
		omx_put32(b + 24, p->src_pull_handle);
		omx_put32(b + 28, p->src_magic);
		omx_put32(b + 32, p->first_frame_offset);
		omx_put32(b + 36, p->block_length);
		omx_put32(b + 40, p->frame_index);
		return 0;
	}
	if (p->rdma_id > 0xFF || p->rdma_offset > 0xFFFF || p->first_frame_offset > 0xFFFF ||
	    p->block_length > 0xFFFF)
		return -1;
	b[12] = (uint8_t)p->rdma_id;
	b[13] = p->rdma_seqnum;
	omx_put16(b + 14, (uint16_t)p->rdma_offset);
	omx_put32(b + 16, p->src_pull_handle);
	omx_put32(b + 20, p->src_magic);
	omx_put16(b + 24, (uint16_t)p->first_frame_offset);
	omx_put16(b + 26, (uint16_t)p->block_length);
	omx_put32(b + 28, p->frame_index);
	return 0;
}

static int enc_pull_reply(const struct omx_wire_params *wp, const struct omx_pkt *pkt, uint8_t *b, size_t plen)
{
	const struct omx_pkt_pull_reply *r = &pkt->u.pull_reply;

	if (plen > wp->pull_reply_max || plen > 0xFFFF || (r->frame_length != 0 && r->frame_length != plen))
		return -1;
	b[0] = OMX_PT_PULL_REPLY;
	b[1] = r->frame_seqnum;
	omx_put16(b + 2, (uint16_t)plen);
	omx_put32(b + 4, r->msg_offset);
	omx_put32(b + 8, r->dst_pull_handle);
	omx_put32(b + 12, r->dst_magic);
	return 0;
}

static int enc_notify(const struct omx_pkt *pkt, uint8_t *b)
{
	const struct omx_pkt_notify *n = &pkt->u.notify;

	b[0] = OMX_PT_NOTIFY;
	b[1] = n->dst_endpoint;
	b[2] = n->src_endpoint;
	omx_put32(b + 4, n->session);
	omx_put32(b + 8, n->total_length);
	b[12] = n->rdma_id;
	b[13] = n->rdma_seqnum;
	omx_put16(b + 18, n->lib_seqnum);
	omx_put16(b + 20, n->lib_piggyack);
	return 0;
}

static int enc_connect(const struct omx_pkt *pkt, uint8_t *b)
{
	const struct omx_pkt_connect *c = &pkt->u.connect;
	uint8_t length = c->length ? c->length : 16;

	if (length < 16)
		return -1;
	b[0] = OMX_PT_CONNECT;
	b[1] = c->dst_endpoint;
	b[2] = c->src_endpoint;
	b[4] = length;
	omx_put16(b + 8, c->lib_seqnum);
	omx_put16(b + 10, c->src_dst_peer_index);
	if (c->ext_present) {
		if (c->ext_mode != OMX_WIRE_EXTENDED && c->ext_mode != OMX_WIRE_COMPAT)
			return -1;
		b[12] = OMX_CONNECT_EXT_MAGIC;
		b[13] = (uint8_t)(c->ext_mode + 1);
		omx_put16(b + 14, c->ext_mtu);
	}
	omx_put32(b + 16, c->src_session_id);
	omx_put32(b + 20, c->is_reply ? c->target_session_id : c->app_key);
	omx_put16(b + 24, c->target_recv_seqnum_start);
	b[26] = c->is_reply;
	b[27] = c->connect_seqnum;
	if (c->is_reply)
		b[28] = c->status_code;
	return 0;
}

static int enc_truc(const struct omx_pkt *pkt, uint8_t *b)
{
	const struct omx_pkt_truc *t = &pkt->u.truc;
	uint8_t length = t->length ? t->length : 16;
	uint8_t type = t->type ? t->type : OMX_TRUC_TYPE_ACK;
	uint32_t session_id = t->session_id ? t->session_id : t->session;

	if (length < 16 || type != OMX_TRUC_TYPE_ACK || session_id != t->session)
		return -1;
	b[0] = OMX_PT_TRUC;
	b[1] = t->dst_endpoint;
	b[2] = t->src_endpoint;
	b[4] = length;
	omx_put32(b + 8, t->session);
	b[12] = type;
	omx_put16(b + 14, t->lib_seqnum);
	omx_put32(b + 16, session_id);
	omx_put32(b + 20, t->acknum);
	omx_put16(b + 24, t->send_seq);
	b[26] = t->resent;
	return 0;
}

static int enc_nack(const struct omx_pkt *pkt, uint8_t *b)
{
	b[0] = pkt->ptype;
	if (pkt->ptype == OMX_PT_NACK_LIB) {
		const struct omx_pkt_nack_lib *n = &pkt->u.nack_lib;

		b[1] = n->src_endpoint;
		b[3] = n->nack_type;
		b[9] = n->dst_endpoint;
		omx_put16(b + 10, n->dst_src_peer_index);
		omx_put16(b + 12, n->lib_seqnum);
	} else {
		const struct omx_pkt_nack_mcp *n = &pkt->u.nack_mcp;

		b[1] = n->src_endpoint;
		b[3] = n->nack_type;
		omx_put32(b + 8, n->src_pull_handle);
		omx_put32(b + 12, n->src_magic);
	}
	return 0;
}

static int enc_host(const struct omx_pkt *pkt, uint8_t *b)
{
	const struct omx_pkt_host *h = &pkt->u.host;

	b[0] = pkt->ptype;
	omx_put16(b + 2, h->src_dst_peer_index);
	omx_put32(b + 8, h->magic);
	if (pkt->ptype == OMX_PT_HOST_REPLY) {
		/* exactly h->length bytes: the name, then zeros (the area was cleared) */
		b[1] = h->length;
		memcpy(b + OMX_BODY_HOST_LEN, h->hostname, strnlen(h->hostname, h->length));
	}
	return 0;
}

static int enc_raw(const struct omx_pkt *pkt, uint8_t *b)
{
	if (pkt->payload_len) /* the caller supplied the whole body, ptype included */
		return (pkt->payload && pkt->payload[0] != OMX_PT_RAW) ? -1 : 0;
	b[0] = OMX_PT_RAW;
	omx_put32(b + OMX_RAW_OFF_NIC_HI, (uint32_t)(pkt->u.raw.nic_id >> 32));
	omx_put32(b + OMX_RAW_OFF_NIC_LO, (uint32_t)pkt->u.raw.nic_id);
	omx_put32(b + OMX_RAW_OFF_SERIAL, pkt->u.raw.serial);
	return 0;
}

static int enc_body(const struct omx_wire_params *wp, const struct omx_pkt *pkt, uint8_t *b, size_t plen)
{
	switch (pkt->ptype) {
	case OMX_PT_TINY:
	case OMX_PT_SMALL:
		return enc_tiny_small(pkt, b, plen);
	case OMX_PT_MEDIUM:
		return enc_medium(wp, pkt, b, plen);
	case OMX_PT_RNDV:
		return enc_rndv(pkt, b);
	case OMX_PT_PULL:
		return enc_pull(wp, pkt, b);
	case OMX_PT_PULL_REPLY:
		return enc_pull_reply(wp, pkt, b, plen);
	case OMX_PT_NOTIFY:
		return enc_notify(pkt, b);
	case OMX_PT_CONNECT:
		return enc_connect(pkt, b);
	case OMX_PT_TRUC:
		return enc_truc(pkt, b);
	case OMX_PT_NACK_LIB:
	case OMX_PT_NACK_MCP:
		return enc_nack(pkt, b);
	case OMX_PT_HOST_QUERY:
	case OMX_PT_HOST_REPLY:
		return enc_host(pkt, b);
	case OMX_PT_RAW:
		return enc_raw(pkt, b);
	default:
		return -1;
	}
}

/*
 * Header bytes written by enc_body (head included) and payload bytes appended after them.
 * HOST_REPLY's hostname and the omxoed discovery body count as header. Returns -1 if the
 * packet type cannot be encoded.
 */
static int enc_layout(const struct omx_wire_params *wp, const struct omx_pkt *pkt, size_t *hlen, size_t *plen)
{
	*hlen = omx_wire_header_len(wp, pkt->ptype);
	*plen = 0;
	if (*hlen == 0)
		return -1;
	switch (pkt->ptype) {
	case OMX_PT_TINY:
	case OMX_PT_SMALL:
	case OMX_PT_MEDIUM:
	case OMX_PT_PULL_REPLY:
		*plen = pkt->payload_len;
		break;
	case OMX_PT_HOST_REPLY:
		if (pkt->u.host.length > OMX_HOSTNAME_MAX)
			return -1;
		*hlen += pkt->u.host.length;
		break;
	case OMX_PT_RAW:
		if (pkt->payload_len)
			*plen = pkt->payload_len;
		else
			*hlen += OMX_BODY_RAW_DISCOVERY_LEN;
		break;
	default:
		break;
	}
	return 0;
}

static void enc_head(const struct omx_pkt *pkt, uint8_t *buf)
{
	memcpy(buf, pkt->dst_mac, 6);
	memcpy(buf + 6, pkt->src_mac, 6);
	omx_put16(buf + OMX_OFF_ETHERTYPE, OMX_ETHERTYPE);
	omx_put16(buf + OMX_OFF_PEER_INDEX, pkt->peer_index);
}

/* Validate, then write the head and body header into buf (cap >= need checked by the caller). */
static size_t enc_header(const struct omx_wire_params *wp, const struct omx_pkt *pkt, uint8_t *buf,
			 size_t cap, size_t *plen_out, int whole)
{
	size_t hlen, plen, need;

	if (!wp || !pkt || !buf || enc_layout(wp, pkt, &hlen, &plen) != 0)
		return 0;
	if (hlen + plen > wp->mtu)
		return 0;
	need = whole ? hlen + plen : hlen;
	if (whole && need < OMX_FRAME_MIN)
		need = OMX_FRAME_MIN;
	if (cap < need)
		return 0;
	memset(buf, 0, hlen);
	enc_head(pkt, buf);
	if (enc_body(wp, pkt, buf + OMX_HEAD_LEN, plen) != 0)
		return 0;
	*plen_out = plen;
	return hlen;
}

size_t omx_wire_encode(const struct omx_wire_params *wp, const struct omx_pkt *pkt, uint8_t *buf, size_t cap)
{
	size_t hlen, plen = 0, total;

	if (pkt && pkt->payload_len && !pkt->payload &&
	    (pkt->ptype == OMX_PT_TINY || pkt->ptype == OMX_PT_SMALL || pkt->ptype == OMX_PT_MEDIUM ||
	     pkt->ptype == OMX_PT_PULL_REPLY || pkt->ptype == OMX_PT_RAW))
		return 0;
	hlen = enc_header(wp, pkt, buf, cap, &plen, 1);
	if (hlen == 0)
		return 0;
	if (plen)
		memcpy(buf + hlen, pkt->payload, plen);
	total = hlen + plen;
	if (total < OMX_FRAME_MIN) {
		memset(buf + total, 0, OMX_FRAME_MIN - total);
		total = OMX_FRAME_MIN;
	}
	return total;
}

size_t omx_wire_frame_len(const struct omx_wire_params *wp, const struct omx_pkt *pkt)
{
	size_t hlen, plen;

	if (!wp || !pkt || enc_layout(wp, pkt, &hlen, &plen) != 0 || hlen + plen > wp->mtu)
		return 0;
	return hlen + plen;
}

size_t omx_wire_encode_eager(const struct omx_pkt *pkt, uint8_t *buf, size_t cap)
{
	size_t plen = pkt->payload_len, max = pkt->ptype == OMX_PT_TINY ? OMX_TINY_MAX : OMX_SMALL_MAX;
	size_t hlen = OMX_HEAD_LEN + OMX_BODY_MSG_LEN;

	if ((pkt->ptype != OMX_PT_TINY && pkt->ptype != OMX_PT_SMALL) || plen > max || (plen && !pkt->payload) ||
	    cap < hlen + plen)
		return 0;
	enc_head(pkt, buf);
	enc_eager_body(pkt->ptype, &pkt->u.msg, buf + OMX_HEAD_LEN, plen);
	if (plen)
		memcpy(buf + hlen, pkt->payload, plen);
	return hlen + plen;
}

_Static_assert(OMX_EAGER_HDR_LEN == OMX_HEAD_LEN + OMX_BODY_MSG_LEN, "eager template length");

/* What the template-based encoders write per message into a copy of the template's message
 * header (body b): sequence numbers and match, at the places they share. */
static inline void put_seq_match(uint8_t *b, uint16_t lib_seqnum, uint16_t lib_piggyack, uint64_t match)
{
	omx_put16(b + 8, lib_seqnum);
	omx_put16(b + 10, lib_piggyack);
	omx_put32(b + 12, (uint32_t)(match >> 32));
	omx_put32(b + 16, (uint32_t)match);
}

size_t omx_wire_eager_template(const struct omx_pkt *pkt, uint8_t tmpl[OMX_EAGER_HDR_LEN])
{
	if (pkt->ptype != OMX_PT_TINY && pkt->ptype != OMX_PT_SMALL)
		return 0;
	enc_head(pkt, tmpl);
	enc_eager_body(pkt->ptype, &pkt->u.msg, tmpl + OMX_HEAD_LEN, 0);
	return OMX_EAGER_HDR_LEN;
}

OMX_HOT_PATH size_t omx_wire_encode_eager_from(const uint8_t tmpl[OMX_EAGER_HDR_LEN], uint8_t ptype, uint16_t lib_seqnum,
				  uint16_t lib_piggyack, uint64_t match, const void *payload, size_t plen, uint8_t *buf,
				  size_t cap)
{
	size_t max = ptype == OMX_PT_TINY ? OMX_TINY_MAX : OMX_SMALL_MAX;
	if ((ptype != OMX_PT_TINY && ptype != OMX_PT_SMALL) || plen > max || (plen && !payload) ||
	    cap < OMX_EAGER_HDR_LEN + plen)
		return 0;
	uint8_t *b = buf + OMX_HEAD_LEN;
	memcpy(buf, tmpl, OMX_EAGER_HDR_LEN);
	b[0] = ptype;
	omx_put16(b + 4, (uint16_t)plen);
	put_seq_match(b, lib_seqnum, lib_piggyack, match);
	if (plen)
		memcpy(buf + OMX_EAGER_HDR_LEN, payload, plen);
	return OMX_EAGER_HDR_LEN + plen;
}

size_t omx_wire_encode_header(const struct omx_wire_params *wp, const struct omx_pkt *pkt, uint8_t *buf,
			      size_t cap)
{
	size_t plen = 0;

	return enc_header(wp, pkt, buf, cap, &plen, 0);
}

_Static_assert(OMX_HEAD_LEN + OMX_BODY_MEDIUM_LEN > OMX_EAGER_HDR_LEN, "the medium header extends the template");

size_t omx_wire_medium_whole_header_from(const struct omx_wire_params *wp, const uint8_t tmpl[OMX_EAGER_HDR_LEN],
					 uint16_t lib_seqnum, uint16_t lib_piggyack, uint64_t match, size_t plen,
					 uint8_t *buf, size_t cap)
{
	const size_t hlen = OMX_HEAD_LEN + OMX_BODY_MEDIUM_LEN;
	if (!plen || plen > wp->medium_frag_max || plen > wp->medium_max || hlen + plen > wp->mtu || cap < hlen ||
	    (wp->mode == OMX_WIRE_COMPAT && plen > 0xFFFF))
		return 0;
	uint8_t *b = buf + OMX_HEAD_LEN;
	memcpy(buf, tmpl, OMX_EAGER_HDR_LEN);
	memset(buf + OMX_EAGER_HDR_LEN, 0, hlen - OMX_EAGER_HDR_LEN);
	b[0] = OMX_PT_MEDIUM;
	if (wp->mode == OMX_WIRE_COMPAT) {
		omx_put16(b + 4, (uint16_t)plen);
		omx_put16(b + 6, 0); /* the eager checksum's place: unused here */
		b[27] = wp->frag_pipeline;
	} else {
		omx_put32(b + 4, (uint32_t)plen);
	}
	put_seq_match(b, lib_seqnum, lib_piggyack, match);
	omx_put16(b + 24, (uint16_t)plen);
	omx_put16(b + 28, omx_get16(tmpl + OMX_HEAD_LEN + 6)); /* the checksum, at its medium place */
	return hlen;
}

_Static_assert(OMX_RNDV_FRAME_LEN > OMX_EAGER_HDR_LEN && OMX_NOTIFY_FRAME_LEN == OMX_EAGER_HDR_LEN,
	       "the rendezvous frames against the template");

size_t omx_wire_rndv_from(const uint8_t tmpl[OMX_EAGER_HDR_LEN], uint16_t lib_seqnum, uint16_t lib_piggyack,
			  uint64_t match, uint32_t msg_length, uint8_t rdma_id, uint8_t rdma_seqnum, uint8_t *buf,
			  size_t cap)
{
	if (cap < OMX_RNDV_FRAME_LEN)
		return 0;
	uint8_t *b = buf + OMX_HEAD_LEN;
	memcpy(buf, tmpl, OMX_EAGER_HDR_LEN); /* the message header's fixed fields, checksum included */
	b[0] = OMX_PT_RNDV;
	omx_put16(b + 4, 8); /* the rendezvous extension's length */
	put_seq_match(b, lib_seqnum, lib_piggyack, match);
	omx_put32(b + 24, msg_length);
	b[28] = rdma_id;
	b[29] = rdma_seqnum;
	omx_put16(b + 30, 0); /* rdma offset: always 0 */
	return OMX_RNDV_FRAME_LEN;
}

size_t omx_wire_notify_from(const uint8_t tmpl[OMX_EAGER_HDR_LEN], uint16_t lib_seqnum, uint16_t lib_piggyack,
			    uint32_t total_length, uint8_t rdma_id, uint8_t rdma_seqnum, uint8_t *buf, size_t cap)
{
	if (cap < OMX_NOTIFY_FRAME_LEN)
		return 0;
	const uint8_t *t = tmpl + OMX_HEAD_LEN;
	uint8_t *b = buf + OMX_HEAD_LEN;
	memcpy(buf, tmpl, OMX_HEAD_LEN);
	memset(b, 0, OMX_BODY_NOTIFY_LEN);
	b[0] = OMX_PT_NOTIFY;
	b[1] = t[1]; /* endpoints: the template's */
	b[2] = t[2];
	memcpy(b + 4, t + 20, 4); /* the session, from the message header's place */
	omx_put32(b + 8, total_length);
	b[12] = rdma_id;
	b[13] = rdma_seqnum;
	omx_put16(b + 18, lib_seqnum);
	omx_put16(b + 20, lib_piggyack);
	return OMX_NOTIFY_FRAME_LEN;
}
