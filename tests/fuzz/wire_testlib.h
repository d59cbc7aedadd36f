/*
 * wire_testlib.h - helpers shared by the wire unit tests, the fuzz harness and the corpus
 * generator: a seeded PRNG, a field-by-field packet comparison and a random packet generator
 * that produces the canonical form omx_wire_decode returns. Header-only (static inline).
 */
#ifndef OMX_WIRE_TESTLIB_H
#define OMX_WIRE_TESTLIB_H

#include <stdint.h>
#include <string.h>

#include "wire/wire.h"

/* xorshift64*: deterministic for a given seed. */
struct omx_test_rng {
	uint64_t s;
};

static inline void omx_test_rng_seed(struct omx_test_rng *r, uint64_t seed)
{
	r->s = seed ? seed : 0x9E3779B97F4A7C15ull;
}

static inline uint64_t omx_test_rand64(struct omx_test_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545F4914F6CDD1Dull;
}

static inline uint32_t omx_test_rand32(struct omx_test_rng *r)
{
	return (uint32_t)(omx_test_rand64(r) >> 32);
}

static inline uint32_t omx_test_below(struct omx_test_rng *r, uint32_t n)
{
	return n ? (uint32_t)(omx_test_rand64(r) % n) : 0;
}

static inline void omx_test_fill(struct omx_test_rng *r, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)omx_test_rand32(r);
}

#define OMX_TCMP(f)                  \
	do {                         \
		if (a->f != b->f)    \
			return #f;   \
	} while (0)

static inline const char *omx_test_diff_msg(const struct omx_pkt *a, const struct omx_pkt *b)
{
	OMX_TCMP(u.msg.dst_endpoint); OMX_TCMP(u.msg.src_endpoint); OMX_TCMP(u.msg.src_generation);
	OMX_TCMP(u.msg.checksum); OMX_TCMP(u.msg.lib_seqnum); OMX_TCMP(u.msg.lib_piggyack);
	OMX_TCMP(u.msg.match); OMX_TCMP(u.msg.session); OMX_TCMP(u.msg.length);
	OMX_TCMP(u.msg.frag_length); OMX_TCMP(u.msg.frag_seqnum); OMX_TCMP(u.msg.frag_pipeline);
	OMX_TCMP(u.msg.msg_length); OMX_TCMP(u.msg.rdma_id); OMX_TCMP(u.msg.rdma_seqnum);
	OMX_TCMP(u.msg.rdma_offset);
	return NULL;
}

static inline const char *omx_test_diff_body(const struct omx_pkt *a, const struct omx_pkt *b)
{
	switch (a->ptype) {
	case OMX_PT_TINY: case OMX_PT_SMALL: case OMX_PT_MEDIUM: case OMX_PT_RNDV:
		return omx_test_diff_msg(a, b);
	case OMX_PT_PULL:
		OMX_TCMP(u.pull.dst_endpoint); OMX_TCMP(u.pull.src_endpoint); OMX_TCMP(u.pull.session);
		OMX_TCMP(u.pull.total_length); OMX_TCMP(u.pull.rdma_id); OMX_TCMP(u.pull.rdma_seqnum);
		OMX_TCMP(u.pull.rdma_offset); OMX_TCMP(u.pull.src_pull_handle); OMX_TCMP(u.pull.src_magic);
		OMX_TCMP(u.pull.first_frame_offset); OMX_TCMP(u.pull.block_length);
		OMX_TCMP(u.pull.frame_index);
		return NULL;
	case OMX_PT_PULL_REPLY:
		OMX_TCMP(u.pull_reply.frame_seqnum); OMX_TCMP(u.pull_reply.frame_length);
		OMX_TCMP(u.pull_reply.msg_offset); OMX_TCMP(u.pull_reply.dst_pull_handle);
		OMX_TCMP(u.pull_reply.dst_magic);
		return NULL;
	case OMX_PT_NOTIFY:
		OMX_TCMP(u.notify.dst_endpoint); OMX_TCMP(u.notify.src_endpoint); OMX_TCMP(u.notify.session);
		OMX_TCMP(u.notify.total_length); OMX_TCMP(u.notify.rdma_id); OMX_TCMP(u.notify.rdma_seqnum);
		OMX_TCMP(u.notify.lib_seqnum); OMX_TCMP(u.notify.lib_piggyack);
		return NULL;
	case OMX_PT_CONNECT:
		OMX_TCMP(u.connect.dst_endpoint); OMX_TCMP(u.connect.src_endpoint); OMX_TCMP(u.connect.length);
		OMX_TCMP(u.connect.lib_seqnum); OMX_TCMP(u.connect.src_dst_peer_index);
		OMX_TCMP(u.connect.src_session_id); OMX_TCMP(u.connect.app_key);
		OMX_TCMP(u.connect.target_session_id); OMX_TCMP(u.connect.target_recv_seqnum_start);
		OMX_TCMP(u.connect.is_reply); OMX_TCMP(u.connect.connect_seqnum);
		OMX_TCMP(u.connect.status_code); OMX_TCMP(u.connect.ext_present);
		OMX_TCMP(u.connect.ext_mode); OMX_TCMP(u.connect.ext_mtu);
		return NULL;
	case OMX_PT_TRUC:
		OMX_TCMP(u.truc.dst_endpoint); OMX_TCMP(u.truc.src_endpoint); OMX_TCMP(u.truc.length);
		OMX_TCMP(u.truc.session); OMX_TCMP(u.truc.type); OMX_TCMP(u.truc.lib_seqnum);
		OMX_TCMP(u.truc.session_id); OMX_TCMP(u.truc.acknum); OMX_TCMP(u.truc.send_seq);
		OMX_TCMP(u.truc.resent);
		return NULL;
	case OMX_PT_NACK_LIB:
		OMX_TCMP(u.nack_lib.src_endpoint); OMX_TCMP(u.nack_lib.nack_type);
		OMX_TCMP(u.nack_lib.dst_endpoint); OMX_TCMP(u.nack_lib.dst_src_peer_index);
		OMX_TCMP(u.nack_lib.lib_seqnum);
		return NULL;
	case OMX_PT_NACK_MCP:
		OMX_TCMP(u.nack_mcp.src_endpoint); OMX_TCMP(u.nack_mcp.nack_type);
		OMX_TCMP(u.nack_mcp.src_pull_handle); OMX_TCMP(u.nack_mcp.src_magic);
		return NULL;
	case OMX_PT_HOST_QUERY: case OMX_PT_HOST_REPLY:
		OMX_TCMP(u.host.src_dst_peer_index); OMX_TCMP(u.host.magic); OMX_TCMP(u.host.length);
		if (strcmp(a->u.host.hostname, b->u.host.hostname) != 0)
			return "u.host.hostname";
		return NULL;
	case OMX_PT_RAW:
		OMX_TCMP(u.raw.nic_id); OMX_TCMP(u.raw.serial);
		return NULL;
	default:
		return "ptype (not decodable)";
	}
}

/* NULL if a and b carry the same meaningful fields and payload bytes, else the first field. */
static inline const char *omx_test_pkt_diff(const struct omx_pkt *a, const struct omx_pkt *b)
{
	const char *d;

	if (memcmp(a->dst_mac, b->dst_mac, 6) != 0)
		return "dst_mac";
	if (memcmp(a->src_mac, b->src_mac, 6) != 0)
		return "src_mac";
	OMX_TCMP(peer_index);
	OMX_TCMP(ptype);
	d = omx_test_diff_body(a, b);
	if (d)
		return d;
	OMX_TCMP(payload_len);
	if (a->payload_len && (!a->payload || !b->payload || memcmp(a->payload, b->payload, a->payload_len) != 0))
		return "payload bytes";
	return NULL;
}
#undef OMX_TCMP

/* The packet types omx_wire_decode accepts. */
__attribute__((unused)) static const uint8_t omx_test_ptypes[] = {
	OMX_PT_RAW,     OMX_PT_HOST_QUERY, OMX_PT_HOST_REPLY, OMX_PT_TRUC,       OMX_PT_CONNECT,
	OMX_PT_TINY,    OMX_PT_SMALL,      OMX_PT_MEDIUM,     OMX_PT_RNDV,       OMX_PT_PULL,
	OMX_PT_PULL_REPLY, OMX_PT_NOTIFY,  OMX_PT_NACK_LIB,   OMX_PT_NACK_MCP,
};
#define OMX_TEST_NPTYPES (sizeof(omx_test_ptypes) / sizeof(omx_test_ptypes[0]))

static inline void omx_test_gen_msg(struct omx_test_rng *r, struct omx_pkt_msg *m)
{
	m->dst_endpoint = (uint8_t)omx_test_rand32(r);
	m->src_endpoint = (uint8_t)omx_test_rand32(r);
	m->src_generation = omx_test_below(r, 4) ? 0 : (uint8_t)omx_test_rand32(r);
	m->checksum = (uint16_t)omx_test_rand32(r);
	m->lib_seqnum = (uint16_t)omx_test_rand32(r);
	m->lib_piggyack = (uint16_t)omx_test_rand32(r);
	m->match = omx_test_rand64(r);
	m->session = omx_test_rand32(r);
}

/* Payload length biased towards the bounds. */
static inline uint32_t omx_test_gen_len(struct omx_test_rng *r, uint32_t max)
{
	switch (omx_test_below(r, 4)) {
	case 0:
		return 0;
	case 1:
		return max;
	default:
		return omx_test_below(r, max + 1);
	}
}

static inline void omx_test_gen_medium(const struct omx_wire_params *wp, struct omx_test_rng *r,
				       struct omx_pkt *p, uint8_t *pl)
{
	struct omx_pkt_msg *m = &p->u.msg;
	uint32_t nfrags, seq;

	omx_test_gen_msg(r, m);
	m->length = omx_test_gen_len(r, wp->medium_max);
	nfrags = m->length ? (m->length + wp->medium_frag_max - 1) / wp->medium_frag_max : 1;
	seq = omx_test_below(r, nfrags);
	m->frag_seqnum = (uint8_t)seq;
	m->frag_length = (uint16_t)(m->length - seq * wp->medium_frag_max < wp->medium_frag_max ?
					    m->length - seq * wp->medium_frag_max : wp->medium_frag_max);
	m->frag_pipeline = wp->frag_pipeline;
	p->payload_len = m->frag_length;
	omx_test_fill(r, pl, p->payload_len);
}

static inline void omx_test_gen_pull(const struct omx_wire_params *wp, struct omx_test_rng *r,
				     struct omx_pkt_pull *q)
{
	int compat = wp->mode == OMX_WIRE_COMPAT;

	q->dst_endpoint = (uint8_t)omx_test_rand32(r);
	q->src_endpoint = (uint8_t)omx_test_rand32(r);
	q->session = omx_test_rand32(r);
	q->total_length = omx_test_rand32(r);
	q->rdma_id = compat ? (uint8_t)omx_test_rand32(r) : omx_test_rand32(r);
	q->rdma_seqnum = (uint8_t)omx_test_rand32(r);
	q->rdma_offset = compat ? (uint16_t)omx_test_rand32(r) : omx_test_rand32(r);
	q->src_pull_handle = omx_test_rand32(r);
	q->src_magic = omx_test_rand32(r);
	q->first_frame_offset = compat ? (uint16_t)omx_test_rand32(r) : omx_test_rand32(r);
	q->block_length = compat ? (uint16_t)omx_test_rand32(r) : omx_test_rand32(r);
	q->frame_index = omx_test_rand32(r);
}

static inline void omx_test_gen_connect(struct omx_test_rng *r, struct omx_pkt_connect *c)
{
	c->dst_endpoint = (uint8_t)omx_test_rand32(r);
	c->src_endpoint = (uint8_t)omx_test_rand32(r);
	c->length = (uint8_t)(omx_test_below(r, 4) ? 16 : 16 + omx_test_below(r, 240));
	c->lib_seqnum = omx_test_below(r, 4) ? 0 : (uint16_t)omx_test_rand32(r);
	c->src_dst_peer_index = (uint16_t)omx_test_rand32(r);
	c->src_session_id = omx_test_rand32(r);
	c->app_key = omx_test_rand32(r);
	c->target_session_id = c->app_key;
	c->target_recv_seqnum_start = (uint16_t)omx_test_rand32(r);
	c->is_reply = (uint8_t)(omx_test_below(r, 8) ? omx_test_below(r, 2) : omx_test_rand32(r));
	c->connect_seqnum = (uint8_t)omx_test_rand32(r);
	c->status_code = c->is_reply ? (uint8_t)omx_test_rand32(r) : 0;
	if (omx_test_below(r, 2)) {
		c->ext_present = 1;
		c->ext_mode = omx_test_below(r, 2) ? OMX_WIRE_COMPAT : OMX_WIRE_EXTENDED;
		c->ext_mtu = (uint16_t)omx_test_rand32(r);
	}
}

static inline void omx_test_gen_truc(struct omx_test_rng *r, struct omx_pkt_truc *t)
{
	t->dst_endpoint = (uint8_t)omx_test_rand32(r);
	t->src_endpoint = (uint8_t)omx_test_rand32(r);
	t->length = (uint8_t)(omx_test_below(r, 4) ? 16 : 16 + omx_test_below(r, 240));
	t->session = omx_test_rand32(r);
	t->type = OMX_TRUC_TYPE_ACK;
	t->lib_seqnum = (uint16_t)omx_test_rand32(r);
	t->session_id = t->session;
	t->acknum = omx_test_rand32(r);
	t->send_seq = omx_test_below(r, 2) ? t->lib_seqnum : (uint16_t)omx_test_rand32(r);
	t->resent = omx_test_below(r, 4) ? 0 : (uint8_t)omx_test_rand32(r);
}

static inline void omx_test_gen_host(struct omx_test_rng *r, struct omx_pkt *p)
{
	struct omx_pkt_host *h = &p->u.host;

	h->src_dst_peer_index = (uint16_t)omx_test_rand32(r);
	h->magic = omx_test_rand32(r);
	if (p->ptype != OMX_PT_HOST_REPLY)
		return;
	h->length = (uint8_t)omx_test_gen_len(r, OMX_HOSTNAME_MAX);
	for (uint32_t i = 0; i + 1 < h->length; i++)
		h->hostname[i] = (char)('a' + omx_test_below(r, 26));
	/* hostname[length - 1] and the rest stay NUL (the struct was cleared) */
}

/* RAW with an explicit body of >= 44 bytes (so the 60-byte padding never adds to it). */
static inline void omx_test_gen_raw(const struct omx_wire_params *wp, struct omx_test_rng *r,
				    struct omx_pkt *p, uint8_t *pl)
{
	uint32_t max = (wp->mtu < OMX_RAW_FRAME_MAX ? wp->mtu : OMX_RAW_FRAME_MAX) - OMX_HEAD_LEN;

	p->payload_len = OMX_FRAME_MIN - OMX_HEAD_LEN + omx_test_below(r, max - 43);
	omx_test_fill(r, pl, p->payload_len);
	pl[0] = OMX_PT_RAW;
	if (p->payload_len >= OMX_BODY_RAW_DISCOVERY_LEN) {
		p->u.raw.nic_id = ((uint64_t)pl[16] << 56) | ((uint64_t)pl[17] << 48) | ((uint64_t)pl[18] << 40) |
				  ((uint64_t)pl[19] << 32) | ((uint64_t)pl[20] << 24) | ((uint64_t)pl[21] << 16) |
				  ((uint64_t)pl[22] << 8) | pl[23];
		p->u.raw.serial = ((uint32_t)pl[24] << 24) | ((uint32_t)pl[25] << 16) | ((uint32_t)pl[26] << 8) | pl[27];
	}
}

static inline void omx_test_gen_notify(struct omx_test_rng *r, struct omx_pkt_notify *n)
{
	n->dst_endpoint = (uint8_t)omx_test_rand32(r);
	n->src_endpoint = (uint8_t)omx_test_rand32(r);
	n->session = omx_test_rand32(r);
	n->total_length = omx_test_rand32(r);
	n->rdma_id = (uint8_t)omx_test_rand32(r);
	n->rdma_seqnum = (uint8_t)omx_test_rand32(r);
	n->lib_seqnum = (uint16_t)omx_test_rand32(r);
	n->lib_piggyack = (uint16_t)omx_test_rand32(r);
}

/*
 * A random packet of type ptype that is valid in mode wp, in the exact form omx_wire_decode
 * returns it. pl must hold 65536 bytes; it becomes the payload.
 */
static inline void omx_test_gen_pkt(const struct omx_wire_params *wp, struct omx_test_rng *r, uint8_t ptype,
				    struct omx_pkt *p, uint8_t *pl)
{
	memset(p, 0, sizeof(*p));
	omx_test_fill(r, p->dst_mac, 6);
	omx_test_fill(r, p->src_mac, 6);
	p->peer_index = (uint16_t)omx_test_rand32(r);
	p->ptype = ptype;
	p->payload = pl;
	switch (ptype) {
	case OMX_PT_TINY:
	case OMX_PT_SMALL:
		omx_test_gen_msg(r, &p->u.msg);
		p->payload_len = omx_test_gen_len(r, ptype == OMX_PT_TINY ? OMX_TINY_MAX : OMX_SMALL_MAX);
		p->u.msg.length = p->payload_len;
		omx_test_fill(r, pl, p->payload_len);
		break;
	case OMX_PT_MEDIUM:
		omx_test_gen_medium(wp, r, p, pl);
		break;
	case OMX_PT_RNDV:
		omx_test_gen_msg(r, &p->u.msg);
		p->u.msg.length = omx_test_below(r, 4) ? 8 : 8 + omx_test_below(r, 0xFFF8);
		p->u.msg.msg_length = omx_test_rand32(r);
		p->u.msg.rdma_id = (uint8_t)omx_test_rand32(r);
		p->u.msg.rdma_seqnum = (uint8_t)omx_test_rand32(r);
		p->u.msg.rdma_offset = omx_test_below(r, 2) ? 0 : (uint16_t)omx_test_rand32(r);
		break;
	case OMX_PT_PULL:
		omx_test_gen_pull(wp, r, &p->u.pull);
		break;
	case OMX_PT_PULL_REPLY:
		p->u.pull_reply.frame_seqnum = (uint8_t)omx_test_rand32(r);
		p->u.pull_reply.msg_offset = omx_test_rand32(r);
		p->u.pull_reply.dst_pull_handle = omx_test_rand32(r);
		p->u.pull_reply.dst_magic = omx_test_rand32(r);
		p->payload_len = omx_test_gen_len(r, wp->pull_reply_max);
		p->u.pull_reply.frame_length = (uint16_t)p->payload_len;
		omx_test_fill(r, pl, p->payload_len);
		break;
	case OMX_PT_NOTIFY:
		omx_test_gen_notify(r, &p->u.notify);
		break;
	case OMX_PT_CONNECT:
		omx_test_gen_connect(r, &p->u.connect);
		break;
	case OMX_PT_TRUC:
		omx_test_gen_truc(r, &p->u.truc);
		break;
	case OMX_PT_NACK_LIB:
		p->u.nack_lib.src_endpoint = (uint8_t)omx_test_rand32(r);
		p->u.nack_lib.nack_type = (uint8_t)omx_test_below(r, 5);
		p->u.nack_lib.dst_endpoint = (uint8_t)omx_test_rand32(r);
		p->u.nack_lib.dst_src_peer_index = (uint16_t)omx_test_rand32(r);
		p->u.nack_lib.lib_seqnum = (uint16_t)omx_test_rand32(r);
		break;
	case OMX_PT_NACK_MCP:
		p->u.nack_mcp.src_endpoint = (uint8_t)omx_test_rand32(r);
		p->u.nack_mcp.nack_type = (uint8_t)omx_test_below(r, 5);
		p->u.nack_mcp.src_pull_handle = omx_test_rand32(r);
		p->u.nack_mcp.src_magic = omx_test_rand32(r);
		break;
	case OMX_PT_HOST_QUERY:
	case OMX_PT_HOST_REPLY:
		omx_test_gen_host(r, p);
		break;
	case OMX_PT_RAW:
		omx_test_gen_raw(wp, r, p, pl);
		break;
	default:
		break;
	}
	if (p->payload_len == 0)
		p->payload = NULL;
}

/* Bytes of header and payload the encoded packet occupies before padding. */
static inline size_t omx_test_pkt_hlen(const struct omx_wire_params *wp, const struct omx_pkt *p)
{
	size_t h = omx_wire_header_len(wp, p->ptype);

	if (p->ptype == OMX_PT_HOST_REPLY)
		h += p->u.host.length;
	return h;
}

#endif
