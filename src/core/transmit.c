/*
 * transmit.c - frames out: encoding a packet into a frame and handing it to the network or to the
 * same-host transport (batched when the transport can), the outcome counted; a same-host
 * destination that has no endpoint gets the NACK its driver would have sent.
 */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "core/core.h"
#include "core/counters.h"
#include "core/hop_trace.h"
#include "hot_path.h"

/* Is this MAC one of our boards (a same-host destination)? */
int omx__is_local_mac(const uint8_t mac[6])
{
	for (uint32_t i = 0; i < omx__g.board_count; i++)
		if (!memcmp(omx__g.boards[i].iface.mac, mac, 6))
			return 1;
	return 0;
}

/* A local send found no endpoint: queue the NACK its driver would have sent (wire.md 10). */
static void local_refused(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	struct omx_pkt n;
	uint8_t dst;
	memset(&n, 0, sizeof(n));
	memcpy(n.dst_mac, ep->board->iface.mac, 6);
	memcpy(n.src_mac, pkt->dst_mac, 6);
	n.peer_index = OMX_PEER_INDEX_UNKNOWN; /* found by source MAC */
	switch (pkt->ptype) {
	case OMX_PT_PULL:
		dst = pkt->u.pull.dst_endpoint;
		n.ptype = OMX_PT_NACK_MCP;
		n.u.nack_mcp.src_endpoint = pkt->u.pull.src_endpoint;
		n.u.nack_mcp.src_pull_handle = pkt->u.pull.src_pull_handle;
		n.u.nack_mcp.src_magic = pkt->u.pull.src_magic;
		break;
	case OMX_PT_CONNECT:
	case OMX_PT_TINY:
	case OMX_PT_SMALL:
	case OMX_PT_MEDIUM:
	case OMX_PT_RNDV:
	case OMX_PT_NOTIFY:
		dst = pkt->ptype == OMX_PT_NOTIFY ? pkt->u.notify.dst_endpoint : pkt->u.msg.dst_endpoint;
		n.ptype = OMX_PT_NACK_LIB;
		n.u.nack_lib.src_endpoint = dst;
		n.u.nack_lib.dst_endpoint = (uint8_t)ep->endpoint_index;
		n.u.nack_lib.dst_src_peer_index = pkt->peer_index;
		n.u.nack_lib.lib_seqnum = pkt->ptype == OMX_PT_CONNECT ? 0 :
					  pkt->ptype == OMX_PT_NOTIFY ? pkt->u.notify.lib_seqnum : pkt->u.msg.lib_seqnum;
		break;
	default:
		return;
	}
	uint8_t type = dst >= omx__cfg.endpoint_max ? OMX_NACK_BAD_ENDPT : OMX_NACK_ENDPT_CLOSED;
	if (n.ptype == OMX_PT_NACK_MCP)
		n.u.nack_mcp.nack_type = type;
	else
		n.u.nack_lib.nack_type = type;
	if (ep->local_nack_count < sizeof(ep->local_nacks) / sizeof(ep->local_nacks[0]) &&
	    omx_wire_encode(&ep->wp, &n, ep->local_nacks[ep->local_nack_count], OMX_FRAME_MIN))
		ep->local_nack_count++;
}

/* Our source MAC, then the frame (or, for a gathered payload, its head) encoded into buf;
 * iov[0] is set by the caller, iov[1] here for a gathered payload. The head's length (0: cannot
 * be encoded, dropped), *iovcnt 1 or 2. */
static size_t frame_encode(struct omx_endpoint *ep, const struct omx_wire_params *wp, struct omx_pkt *pkt,
			   uint8_t *buf, size_t buf_len, struct iovec iov[2], unsigned *iovcnt)
{
	memcpy(pkt->src_mac, ep->board->iface.mac, 6);
	size_t n;
	if ((pkt->ptype == OMX_PT_MEDIUM || pkt->ptype == OMX_PT_PULL_REPLY) && pkt->payload &&
	    pkt->payload_len >= OMX_GATHER_MIN) {
		n = omx_wire_encode_header(wp, pkt, buf, buf_len);
		iov[1].iov_base = (void *)pkt->payload;
		iov[1].iov_len = pkt->payload_len;
		*iovcnt = 2;
	} else {
		n = omx_wire_encode(wp, pkt, buf, buf_len);
		*iovcnt = 1;
	}
	if (!n)
		omx__verbose("cannot encode packet type %u, dropped\n", pkt->ptype);
	return n;
}

/* The transmission's outcome, for both paths of omx__send_frame. */
static void sent(struct omx_endpoint *ep, const struct omx_pkt *pkt, int local, int r, int counter)
{
	if (local && (r == -ECONNREFUSED || r == -ENOENT)) {
		local_refused(ep, pkt);
		return;
	}
	if (r < 0) {
		/* Full transmit queue or transient error: retransmission recovers; soon for the frames
		 * of a full queue, whose senders see tx_failed (send.c, "Transmissions that failed").
		 * A link that is down (ENETDOWN...) is left to the resend timer and its budget. */
		omx__verbose("transmit failed: %s\n", strerror(-r));
		omx__count(ep->board, OMX_C_X_TX_FAILED);
		/* Sticky over a message's frames, as in omx__send_frames: a later frame's other error
		 * must not unmark an earlier refusal. */
		ep->tx_failed |= r == -EAGAIN || r == -ENOBUFS;
		return;
	}
	if (local && pkt->payload_len)
		omx__count_add(ep->board, OMX_C_X_SHARED_BYTES, pkt->payload_len);
	if (counter >= 0)
		omx__count(ep->board, counter);
}

void omx__send_eager_local(struct omx_endpoint *ep, struct omx_pkt *pkt, int counter)
{
	/* Most same-host frames: written straight from their fields and unpadded (the generic
	 * encoder and the trimming in omx__send_frame cost ~240 of a same-host message's ~3470
	 * instructions, bench/self_pingpong). */
	memcpy(pkt->src_mac, ep->board->iface.mac, 6);
	size_t n = omx_wire_encode_eager(pkt, ep->txbuf, ep->txbuf_len);
	if (!n) {
		omx__verbose("cannot encode packet type %u, dropped\n", pkt->ptype);
		return;
	}
	struct iovec iov = { ep->txbuf, n };
	sent(ep, pkt, 1, ep->local->ops->send(ep->local, &iov, 1), counter);
}

/* ~75 instructions of a same-host message's critical ~1320 went to filling a packet and encoding
 * it field by field, and ~60 to finding the peer's ring from the frame (bench/self_pingpong). */
/* The partner's frame template (its fixed header fields), made again when they changed. */
static inline __attribute__((always_inline)) const uint8_t *partner_template(struct omx_endpoint *ep,
										   struct omx_partner *p)
{
	uint16_t rindex = omx__partner_reverse_index(p);
	if (!p->eager_tmpl_ok || p->eager_tmpl_session != p->true_session || p->eager_tmpl_index != rindex) {
		struct omx_pkt t;
		memset(&t, 0, sizeof(t));
		omx__fill_msg_fixed(&t, ep, p, OMX_PT_TINY);
		memcpy(t.src_mac, ep->board->iface.mac, 6);
		p->eager_tmpl_ok = omx_wire_eager_template(&t, p->eager_tmpl) != 0;
		p->eager_tmpl_index = rindex;
		p->eager_tmpl_session = p->true_session;
	}
	return p->eager_tmpl;
}

/* Through the partner's route; then what sent() reads of the packet: its length, and on a
 * refusal what the NACK is made of. */
static inline __attribute__((always_inline)) void send_partner_frame(struct omx_endpoint *ep, struct omx_partner *p,
								    uint8_t ptype, uint16_t seq,
			       const struct iovec *iov, unsigned iovcnt, uint32_t len, int counter)
{
	int r = omx_net_local_send_routed(ep->local, &p->route, p->mac, p->endpoint_index, iov, iovcnt);
	if (!r && ptype != OMX_PT_RNDV && ptype != OMX_PT_NOTIFY)
		omx_hop_mark(OMX_HOP_PUBLISHED);
	struct omx_pkt pkt;
	if (r) {
		memset(&pkt, 0, sizeof(pkt));
		omx__fill_msg_fixed(&pkt, ep, p, ptype);
		pkt.u.msg.lib_seqnum = seq;
		if (ptype == OMX_PT_NOTIFY) { /* its own layout: what local_refused reads of it */
			pkt.u.notify.dst_endpoint = p->endpoint_index;
			pkt.u.notify.lib_seqnum = seq;
		}
	}
	pkt.payload_len = len;
	sent(ep, &pkt, 1, r, counter);
}

OMX_HOT_PATH void omx__send_eager_partner(struct omx_endpoint *ep, struct omx_partner *p, uint8_t ptype, uint16_t seq, uint64_t match,
			     const void *payload, uint32_t len, int counter)
{
	size_t n = omx_wire_encode_eager_from(partner_template(ep, p), ptype, seq, omx__piggyack(p), match, payload, len,
					      ep->txbuf, ep->txbuf_len);
	if (!n) {
		omx__verbose("cannot encode packet type %u, dropped\n", ptype);
		return;
	}
	struct iovec iov = { ep->txbuf, n };
	send_partner_frame(ep, p, ptype, seq, &iov, 1, len, counter);
}

int omx__send_medium_partner(struct omx_endpoint *ep, struct omx_partner *p, uint16_t seq, uint64_t match,
			     const void *payload, uint32_t len)
{
	size_t n = omx_wire_medium_whole_header_from(&ep->wp_local, partner_template(ep, p), seq, omx__piggyack(p), match,
						     len, ep->txbuf, ep->txbuf_len);
	if (!n)
		return -1;
	struct iovec iov[2] = { { ep->txbuf, n }, { (void *)payload, len } };
	send_partner_frame(ep, p, OMX_PT_MEDIUM, seq, iov, 2, len, OMX_C_SEND_MEDIUMSQ_FRAG);
	return 0;
}

/* The rendezvous' two frames to a same-host partner, from its template (~300 instructions each
 * fewer than the generic encoder and the ring's lookup from the frame; both are on a same-host
 * rendezvous' critical path). */
void omx__send_rndv_partner(struct omx_endpoint *ep, struct omx_partner *p, uint16_t seq, uint64_t match,
			    uint32_t msg_length, uint8_t rdma_id, uint8_t rdma_seqnum)
{
	size_t n = omx_wire_rndv_from(partner_template(ep, p), seq, omx__piggyack(p), match, msg_length, rdma_id,
				      rdma_seqnum, ep->txbuf, ep->txbuf_len);
	struct iovec iov = { ep->txbuf, n };
	if (n)
		send_partner_frame(ep, p, OMX_PT_RNDV, seq, &iov, 1, 0, OMX_C_SEND_RNDV);
}

void omx__send_notify_partner(struct omx_endpoint *ep, struct omx_partner *p, uint16_t seq, uint32_t total_length,
			      uint8_t rdma_id, uint8_t rdma_seqnum)
{
	size_t n = omx_wire_notify_from(partner_template(ep, p), seq, omx__piggyack(p), total_length, rdma_id,
					rdma_seqnum, ep->txbuf, ep->txbuf_len);
	struct iovec iov = { ep->txbuf, n };
	if (n)
		send_partner_frame(ep, p, OMX_PT_NOTIFY, seq, &iov, 1, 0, OMX_C_SEND_NOTIFY);
}

void omx__send_frame(struct omx_endpoint *ep, struct omx_pkt *pkt, int counter)
{
	struct iovec iov[2];
	unsigned iovcnt = 1;
	int local = omx__via_local(ep, pkt->dst_mac);
	const struct omx_wire_params *wp = local ? &ep->wp_local : &ep->wp;
	if (local && (pkt->ptype == OMX_PT_TINY || pkt->ptype == OMX_PT_SMALL)) {
		omx__send_eager_local(ep, pkt, counter);
		return;
	}
	size_t n = frame_encode(ep, wp, pkt, ep->txbuf, ep->txbuf_len, iov, &iovcnt);
	if (n && local && iovcnt == 1 && n == OMX_FRAME_MIN) {
		/* No Ethernet on the way: unpadded, a tiny frame fits one cache line of the ring
		 * slot (one line transfer less per frame). */
		size_t unpadded = omx_wire_frame_len(wp, pkt);
		if (unpadded && unpadded < n)
			n = unpadded;
	}
	if (!n)
		return;
	iov[0].iov_base = ep->txbuf;
	iov[0].iov_len = n;
	sent(ep, pkt, local, (local ? ep->local : ep->net)->ops->send(local ? ep->local : ep->net, iov, iovcnt), counter);
}

void omx__send_frames(struct omx_endpoint *ep, struct omx_pkt *pkts, unsigned count, int counter)
{
	const struct omx_net_ops *ops = ep->net->ops;
	if (!ops->send_batch || count < 2 || omx__via_local(ep, pkts[0].dst_mac)) {
		for (unsigned i = 0; i < count; i++)
			omx__send_frame(ep, &pkts[i], counter);
		return;
	}
	while (count) {
		struct omx_net_frame f[OMX_NET_BATCH_MAX];
		unsigned k = count < OMX_NET_BATCH_MAX ? count : OMX_NET_BATCH_MAX, n = 0;
		for (unsigned i = 0; i < k; i++) {
			uint8_t *buf = ep->batchbuf + (size_t)n * OMX_BATCH_SLOT;
			size_t len = frame_encode(ep, &ep->wp, &pkts[i], buf, OMX_BATCH_SLOT, f[n].iov, &f[n].iovcnt);
			if (!len)
				continue;
			f[n].iov[0].iov_base = buf;
			f[n].iov[0].iov_len = len;
			n++;
		}
		/* A batch stops at its first failing frame: that frame is a loss, as with send
		 * (retransmission recovers), and the ones after it get their own attempt. */
		unsigned done = 0;
		while (done < n) {
			int sent = ops->send_batch(ep->net, f + done, n - done);
			if (sent > 0) {
				if (counter >= 0)
					for (int i = 0; i < sent; i++)
						omx__count(ep->board, counter);
				done += (unsigned)sent;
				continue;
			}
			omx__verbose("transmit failed: %s\n", strerror(sent < 0 ? -sent : EAGAIN));
			omx__count(ep->board, OMX_C_X_TX_FAILED);
			ep->tx_failed |= sent == 0 || sent == -EAGAIN || sent == -ENOBUFS;
			done++;
		}
		pkts += k;
		count -= k;
	}
}
