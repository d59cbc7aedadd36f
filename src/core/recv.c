/*
 * recv.c - incoming frames: validation and drop counters (wire.md 14), NACKs, receive-side
 * sequence handling with early (out-of-order) packets (wire.md 7.5), matching against posted
 * receives, the unexpected queue and handler (mx-api.md 9.5, 10.1), medium reassembly (wire.md 6).
 * Posting receives, and taking an unexpected message for one: recv_post.c.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/hop_trace.h"
#include "shm/shm.h"
#include "core/counters.h"
#include "omx_unexp_reserve.h"
#include "hot_path.h"

#define OMX_EARLY_FRAMES_MAX 1024 /* per partner; beyond, frames are dropped and retransmitted */

struct omx_early {
	struct omx_list elt;
	uint16_t seqnum;
	uint8_t frag;
	uint32_t len;
	uint8_t frame[];
};

static const int wire_err_counter[OMX_WIRE_ERR_COUNT] = {
	[OMX_WIRE_ERR_TRUNCATED_HEAD] = OMX_C_DROP_BAD_HEADER_LEN,
	[OMX_WIRE_ERR_ETHERTYPE] = OMX_C_DROP_UNKNOWN_PTYPE,
	[OMX_WIRE_ERR_UNKNOWN_PTYPE] = OMX_C_DROP_UNKNOWN_PTYPE,
	[OMX_WIRE_ERR_INVALID_PTYPE] = OMX_C_DROP_INVALID_PTYPE,
	[OMX_WIRE_ERR_SHORT_HEADER] = OMX_C_DROP_BAD_HEADER_LEN,
	[OMX_WIRE_ERR_BAD_DATA_LENGTH] = OMX_C_DROP_BAD_DATALEN,
	[OMX_WIRE_ERR_SHORT_PAYLOAD] = OMX_C_DROP_BAD_SKBLEN,
	[OMX_WIRE_ERR_BAD_TRUC] = OMX_C_DROP_BAD_DATALEN,
	[OMX_WIRE_ERR_BAD_FRAG] = OMX_C_DROP_BAD_DATALEN,
};

/* ---- matching ---- */

/* The first posted receive that takes this match, left in place (omx__medium_place looks ahead). */
static union omx_request *peek_posted(struct omx_endpoint *ep, uint64_t match)
{
	struct omx_list *pos;
	for (pos = ep->posted_recvs.next; pos != &ep->posted_recvs; pos = pos->next) {
		union omx_request *r = (union omx_request *)omx_container_of(pos, omx_req_t, queue_elt);
		if ((match & r->s.u.recv.match_mask) == r->s.u.recv.match_info)
			return r;
	}
	return NULL;
}

int omx__match_posted(struct omx_endpoint *ep, uint64_t match, union omx_request **out)
{
	union omx_request *r = peek_posted(ep, match);
	if (!r)
		return 0;
	omx_list_del(&r->s.queue_elt);
	r->s.state &= ~OMX_RS_RECV_POSTED;
	*out = r;
	return 1;
}

int omx__run_unexp_handler(struct omx_endpoint *ep, struct omx_partner *p, uint64_t match, uint32_t len,
			   const void *data, int reservable)
{
	if (!ep->unexp_handler || ep->handlers_off)
		return OMX__HANDLER_CONTINUE;
	omx_endpoint_addr_t a;
	omx__partner_to_addr(p, &a);
	ep->in_handler = 1;
	ep->handler_thread = pthread_self();
	ep->handler_reservable = reservable;
	ep->handler_reserved = 0;
	omx_unexp_handler_t h = ep->unexp_handler;
	void *ctx = ep->unexp_handler_ctx;
	omx__epunlock(&ep->lock);
	int act = (int)h(ctx, a, match, len, (void *)(uintptr_t)data);
	omx__eplock(&ep->lock);
	ep->in_handler = 0;
	ep->handler_reservable = 0;
	omx__epcond_broadcast(&ep->cond);
	if (act == OMX_UNEXP_HANDLER_RECV_FINISHED)
		return OMX__HANDLER_FINISHED;
	if (act != OMX_UNEXP_HANDLER_RECV_CONTINUE)
		omx__fatal("unexpected handler returned %d (neither RECV_CONTINUE nor RECV_FINISHED)\n", act);
	return ep->handler_reserved ? OMX__HANDLER_RESERVED : OMX__HANDLER_CONTINUE;
}

omx_return_t omx_unexp_reserve(omx_endpoint_t ep, uint64_t key)
{
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	int ok = ep->in_handler && pthread_equal(ep->handler_thread, pthread_self()) && ep->handler_reservable;
	if (ok) {
		ep->handler_reserved = 1;
		ep->handler_key = key;
	}
	omx__epunlock(&ep->lock);
	return ok ? OMX_SUCCESS : OMX_NOT_IMPLEMENTED;
}

/* Unexpected message r, just queued, was reserved by the handler: off the matched queue. */
static void reserve(struct omx_endpoint *ep, union omx_request *r)
{
	omx_list_del(&r->s.done_elt);
	omx_list_add_tail(&ep->reserved, &r->s.done_elt);
	r->s.state |= OMX_RS_RESERVED;
	r->s.u.recv.reserve_key = ep->handler_key;
}

/* ---- sequence bookkeeping ---- */

static void update_complete_seq(struct omx_partner *p)
{
	union omx_request *r = (union omx_request *)omx_list_first(&p->partial_recvs, omx_req_t, queue_elt);
	p->next_complete_seq = r ? r->s.u.recv.seqnum : p->next_match_seq;
}

/* A message became fully received: ack now or later (wire.md 7.3). */
static OMX_HOT_PATH void message_received(struct omx_partner *p)
{
	update_complete_seq(p);
	uint16_t unacked = omx_seq_diff(p->next_complete_seq, p->last_acked_recv_seq);
	if (unacked == 0)
		return;
	/* Its sender waits for this ack to complete a medium it kept no copy of (send.c,
	 * send_without_copy): sent before anything else, in a ping-pong before our answer, so that the
	 * sender has posted its receive when the answer comes. */
	if (p->ack_at_once && omx_list_empty(&p->partial_recvs)) {
		p->ack_at_once = 0;
		omx__send_ack_now(p);
		return;
	}
	omx__schedule_ack(p, unacked >= omx__cfg.notacked_max, p->ep->now_ns);
}

/* ---- delivering data ---- */

static uint32_t frag_offset(const struct omx_wire_params *wp, uint8_t frag)
{
	return wp->mode == OMX_WIRE_COMPAT ? ((uint32_t)frag << wp->frag_pipeline) : frag * wp->medium_frag_max;
}

/* All bytes of a medium are in: finish it (matched) or leave it queued (still unexpected). */
static void medium_done(union omx_request *r)
{
	struct omx_partner *p = r->s.partner;
	omx_list_del(&r->s.queue_elt);
	r->s.state &= ~OMX_RS_RECV_PARTIAL;
	r->s.ep->mediums_partial--;
	if (r->s.state & OMX_RS_UNEXPECTED)
		return;
	if (r->s.u.recv.unexp_buf) /* matched while partial: data went to our buffer */
		omx__copy_to_segs(r->s.segs, r->s.nseg, 0, r->s.u.recv.unexp_buf, r->s.status.xfer_length);
	omx__req_complete(r, r->s.status.xfer_length < r->s.status.msg_length ? OMX_MESSAGE_TRUNCATED : OMX_SUCCESS);
	(void)p;
}

/* Store one medium fragment into r (posted receive or unexpected copy). */
static void medium_add_frag(struct omx_endpoint *ep, union omx_request *r, const struct omx_pkt *pkt)
{
	uint8_t i = pkt->u.msg.frag_seqnum;
	const struct omx_wire_params *wp = omx__wp_for(ep, r->s.partner->mac);
	uint32_t off = frag_offset(wp, i);
	uint32_t n = pkt->u.msg.frag_length;
	if ((r->s.u.recv.frags_mask >> i) & 1) {
		omx__count(ep->board, OMX_C_X_DROP_DUPLICATE);
		return; /* duplicate fragment */
	}
	if (pkt->u.msg.length != r->s.status.msg_length || (uint64_t)off + n > r->s.status.msg_length) {
		omx__count(ep->board, OMX_C_DROP_BAD_DATALEN);
		return;
	}
	r->s.u.recv.frags_mask |= 1u << i;
	r->s.u.recv.received += n;
	omx__count(ep->board, OMX_C_RECV_MEDIUM_FRAG);
	/* Out of our ring, its copy may be timed: the placement of the moment (shared.c). */
	uint64_t timed = pkt->payload && wp == &ep->wp_local ? omx__shared_copy_out_timing(ep, n) : 0;
	if (!pkt->payload) {
		/* placed: the bytes are in r's buffer already (omx__medium_place) */
	} else if (r->s.u.recv.unexp_buf) {
		omx_memcpy(r->s.u.recv.unexp_buf + off, pkt->payload, n);
	} else if (off < r->s.status.xfer_length) {
		uint32_t m = r->s.status.xfer_length - off < n ? r->s.status.xfer_length - off : n;
		omx__copy_to_segs(r->s.segs, r->s.nseg, off, pkt->payload, m);
	}
	if (timed)
		omx__shared_copy_out_done(ep, n, timed);
	if (r->s.u.recv.received >= r->s.status.msg_length)
		medium_done(r);
	else
		omx__xfer_touch(ep); /* more fragments are coming: omx__wait keeps polling for them */
}

static uint32_t pkt_msg_length(const struct omx_pkt *pkt)
{
	return pkt->ptype == OMX_PT_RNDV ? pkt->u.msg.msg_length : pkt->u.msg.length;
}

/* First packet of a message (in sequence): fill r (posted receive or new unexpected). */
static OMX_HOT_PATH void deliver_first(struct omx_endpoint *ep, struct omx_partner *p, union omx_request *r,
			  const struct omx_pkt *pkt, int unexpected, union omx_request **start)
{
	uint32_t len = pkt_msg_length(pkt);
	r->s.partner = p;
	omx__partner_to_addr(p, &r->s.status.addr);
	r->s.status.match_info = pkt->u.msg.match;
	r->s.status.msg_length = len;
	r->s.status.xfer_length = unexpected ? len : (len < r->s.total_len ? len : r->s.total_len);
	if (unexpected) {
		r->s.state |= OMX_RS_UNEXPECTED;
		omx_list_add_tail(&ep->unexp, &r->s.done_elt);
	}
	switch (pkt->ptype) {
	case OMX_PT_TINY:
	case OMX_PT_SMALL:
		omx__count(ep->board, pkt->ptype == OMX_PT_TINY ? OMX_C_RECV_TINY : OMX_C_RECV_SMALL);
		if (unexpected) {
			if (len)
				omx_memcpy(r->s.u.recv.unexp_buf, pkt->payload, len);
			r->s.u.recv.received = len;
		} else {
			uint32_t n = r->s.status.xfer_length; /* at most OMX_SMALL_MAX */
			if (r->s.nseg == 1 && n)
				memcpy(r->s.segs[0].ptr, pkt->payload, n);
			else if (n)
				omx__copy_to_segs(r->s.segs, r->s.nseg, 0, pkt->payload, n);
			omx__req_complete(r, n < len ? OMX_MESSAGE_TRUNCATED : OMX_SUCCESS);
		}
		break;
	case OMX_PT_MEDIUM:
		if (len >= omx__cfg.shared_ack_complete && omx__partner_shared(p))
			p->ack_at_once = 1;
		r->s.u.recv.seqnum = pkt->u.msg.lib_seqnum;
		r->s.state |= OMX_RS_RECV_PARTIAL;
		ep->mediums_partial++;
		omx_list_add_tail(&p->partial_recvs, &r->s.queue_elt);
		ep->owed_watch = 1;
		medium_add_frag(ep, r, pkt);
		break;
	case OMX_PT_RNDV:
		omx__count(ep->board, OMX_C_RECV_RNDV);
		r->s.type = OMX_REQ_RECV_LARGE;
		r->s.u.recv.rdma_id = pkt->u.msg.rdma_id;
		r->s.u.recv.rdma_seqnum = pkt->u.msg.rdma_seqnum;
		if (!unexpected)
			*start = r; /* after the sequence bookkeeping: see recv_sequenced */
		break;
	}
}

/* Unexpected memory is bounded per endpoint and per partner: past either limit a message is not
 * taken (not acked) and its sender retransmits, so a flooding partner slows itself down while
 * others still get through. Its retransmission timer (0.5 s) used to be the only way back: eager
 * messages of up to 128 KiB fill the 16 MiB of a partner in ~130 messages, and a sender that
 * outran its receiver's posted receives then stalled half a second at a time (a two-way stream of
 * 32-128 KiB messages, 8 in flight, took 1.9 s instead of 1.4 in 2 of 5 runs). Now, once the
 * application has consumed half of what was queued, our next liback asks the partner to resend
 * at once (OMX_TRUC_RESEND_ASK). A partner refused because *other* partners filled the endpoint
 * may have nothing queued itself, so no consumption of its own would ever ask it: refused
 * partners wait on ep->unexp_refused, and the endpoint falling back to half its room asks them. */
static void refuse(struct omx_endpoint *ep, struct omx_partner *p)
{
	if (!p->unexp_refused) {
		p->unexp_refused = 1;
		omx_list_add_tail(&ep->unexp_refused, &p->refused_elt);
	}
}

/* Out-of-order frames are held against the same room, but they wait for a message before them:
 * holding it, they would keep that message out for ever (a receiver with 64 early frames of one
 * partner filling its 512 KiB stopped there, every resend of the missing message refused in turn:
 * stop 33). An in-sequence message that does not fit therefore drops early frames first, its
 * partner's, then other partners' while the endpoint's room is short; their senders are asked
 * again like any refused partner. */
static void evict_early(struct omx_endpoint *ep, struct omx_partner *q)
{
	refuse(ep, q);
	omx__count_add(ep->board, OMX_C_X_DROP_EARLY_FULL, q->early_count);
	omx__early_drop_all(q);
}

static int fits(struct omx_endpoint *ep, struct omx_partner *p, uint32_t cost)
{
	return ep->unexp_bytes + cost <= omx__cfg.unexp_max && p->unexp_bytes + cost <= omx__cfg.unexp_peer_max;
}

static int unexp_room(struct omx_endpoint *ep, struct omx_partner *p, uint32_t cost, int in_sequence)
{
	if (fits(ep, p, cost))
		return 1;
	if (in_sequence) {
		if (p->early_count)
			evict_early(ep, p);
		struct omx_partner *q;
		while (ep->unexp_bytes + cost > omx__cfg.unexp_max &&
		       (q = omx_list_first(&ep->early_partners, struct omx_partner, early_elt)))
			evict_early(ep, q);
		if (fits(ep, p, cost))
			return 1;
	}
	omx__count(ep->board, OMX_C_UNEXP_QUEUE_FULL);
	refuse(ep, p);
	return 0;
}

/* Room is back for a partner we refused: ask it to resend (with an immediate liback). Early
 * frames do not count: they give way to in-sequence messages, and they may be waiting for the
 * very message this asks for. */
static void unexp_room_back(struct omx_endpoint *ep, struct omx_partner *p)
{
	if (!p->unexp_refused || p->unexp_bytes - p->early_bytes > omx__cfg.unexp_peer_max / 2 ||
	    ep->unexp_bytes - ep->early_bytes > omx__cfg.unexp_max / 2)
		return;
	p->unexp_refused = 0;
	omx_list_del(&p->refused_elt);
	p->resend_ask = 1;
	omx__count(ep->board, OMX_C_X_RESEND_ASKED);
	omx__schedule_ack(p, 1, ep->now_ns);
}

/* The endpoint's unexpected bytes went down: once it is back to half its room, every refused
 * partner (all are on ep->unexp_refused) that is back to half its own share is asked. */
static void unexp_uncharged(struct omx_endpoint *ep)
{
	if (omx_list_empty(&ep->unexp_refused) || ep->unexp_bytes - ep->early_bytes > omx__cfg.unexp_max / 2)
		return;
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &ep->unexp_refused)
		unexp_room_back(ep, omx_container_of(pos, struct omx_partner, refused_elt));
}

void omx__early_uncharge(struct omx_partner *p, uint32_t frame_len)
{
	uint32_t c = (uint32_t)(sizeof(struct omx_early) + frame_len);
	p->ep->unexp_bytes -= c;
	p->unexp_bytes -= c;
	p->ep->early_bytes -= c;
	p->early_bytes -= c;
	unexp_uncharged(p->ep);
}

void omx__unexp_uncharge(union omx_request *r)
{
	uint32_t c = r->s.u.recv.unexp_charge;
	if (!c)
		return;
	r->s.ep->unexp_bytes -= c;
	r->s.u.recv.unexp_charge = 0;
	if (r->s.partner)
		r->s.partner->unexp_bytes -= c;
	unexp_uncharged(r->s.ep);
}

/* New in-sequence message: match it, offer it to the handler, or queue it as unexpected.
 * Returns 0 if it could not be stored (the sender will retransmit). A matched or discarded RNDV
 * is left in *start for the caller to start once the message is counted as received. */
static int new_message(struct omx_endpoint *ep, struct omx_partner *p, const struct omx_pkt *pkt,
		       union omx_request **start)
{
	union omx_request *r;
	uint32_t len = pkt_msg_length(pkt);
	if (omx__match_posted(ep, pkt->u.msg.match, &r)) {
		deliver_first(ep, p, r, pkt, 0, start);
		return 1;
	}
	/* Checked before the unexpected handler, which must see each message once. */
	uint32_t cost = (pkt->ptype == OMX_PT_RNDV ? 0 : len) + (uint32_t)sizeof(*r); /* payload copy + request */
	if (!unexp_room(ep, p, cost, 1))
		return 0;
	const void *data = NULL;
	if (pkt->ptype == OMX_PT_TINY || pkt->ptype == OMX_PT_SMALL ||
	    (pkt->ptype == OMX_PT_MEDIUM && pkt->u.msg.frag_length == len))
		data = pkt->payload;
	/* A RNDV's request is taken before the handler sees it: a handler that reserved the message,
	 * or discarded it, has done so for good, and no failure after it may make the sender resend
	 * (the handler would be shown the message twice). */
	union omx_request *pre = NULL;
	if (pkt->ptype == OMX_PT_RNDV && !(pre = omx__req_alloc(ep, OMX_REQ_RECV_LARGE)))
		return 0;
	int act = omx__run_unexp_handler(ep, p, pkt->u.msg.match, len, data, pre != NULL);
	if (act == OMX__HANDLER_FINISHED) {
		if (pre) {
			/* Discarded: tell the sender nothing was taken (an internal request carries the
			 * NOTIFY until it is acked). */
			pre->s.state |= OMX_RS_COLLECTED | OMX_RS_DONE;
			pre->s.partner = p;
			pre->s.status.msg_length = len;
			pre->s.u.recv.rdma_id = pkt->u.msg.rdma_id;
			pre->s.u.recv.rdma_seqnum = pkt->u.msg.rdma_seqnum;
			*start = pre; /* NOTIFY of length 0, after the sequence bookkeeping */
		}
		return 1;
	}
	if (act != OMX__HANDLER_RESERVED && omx__match_posted(ep, pkt->u.msg.match, &r)) {
		if (pre)
			omx__req_free(pre);
		deliver_first(ep, p, r, pkt, 0, start);
		return 1;
	}
	r = pre ? pre : omx__req_alloc(ep, OMX_REQ_RECV);
	if (!r)
		return 0;
	if (pkt->ptype != OMX_PT_RNDV && len) {
		r->s.u.recv.unexp_buf = malloc(len);
		if (!r->s.u.recv.unexp_buf) {
			omx__req_free(r);
			return 0;
		}
	}
	deliver_first(ep, p, r, pkt, 1, start);
	if (act == OMX__HANDLER_RESERVED)
		reserve(ep, r);
	r->s.u.recv.unexp_charge = cost;
	ep->unexp_bytes += cost;
	p->unexp_bytes += cost;
	return 1;
}

static union omx_request *find_partial(struct omx_partner *p, uint16_t seq)
{
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &p->partial_recvs) {
		union omx_request *r = (union omx_request *)omx_container_of(pos, omx_req_t, queue_elt);
		if (r->s.u.recv.seqnum == seq)
			return r;
	}
	return NULL;
}

/* ---- early packets ---- */

static void store_early(struct omx_partner *p, uint16_t seq, const struct omx_pkt *pkt, const uint8_t *frame,
			size_t len)
{
	uint8_t frag = pkt->ptype == OMX_PT_MEDIUM ? pkt->u.msg.frag_seqnum : 0;
	uint16_t d = omx_seq_diff(seq, p->next_complete_seq);
	struct omx_list *pos, *tmp, *before = &p->early;
	if (p->early_count >= OMX_EARLY_FRAMES_MAX) {
		omx__count(p->ep->board, OMX_C_X_DROP_EARLY_FULL);
		return;
	}
	/* Out-of-order frames are held against the same memory bounds as unexpected messages. */
	struct omx_endpoint *ep = p->ep;
	uint32_t cost = (uint32_t)(sizeof(struct omx_early) + len);
	if (!unexp_room(ep, p, cost, 0))
		return;
	omx_list_for_each_safe(pos, tmp, &p->early) {
		struct omx_early *e = omx_container_of(pos, struct omx_early, elt);
		uint16_t de = omx_seq_diff(e->seqnum, p->next_complete_seq);
		if (de == d && e->frag == frag)
			return; /* exact duplicate */
		if (de > d || (de == d && e->frag > frag)) {
			before = pos;
			break;
		}
	}
	struct omx_early *e = malloc(sizeof(*e) + len);
	if (!e)
		return; /* the sender retransmits */
	e->seqnum = seq;
	e->frag = frag;
	e->len = (uint32_t)len;
	memcpy(e->frame, frame, len);
	ep->unexp_bytes += cost;
	p->unexp_bytes += cost;
	ep->early_bytes += cost;
	p->early_bytes += cost;
	/* insert before `before` */
	e->elt.next = before;
	e->elt.prev = before->prev;
	before->prev->next = &e->elt;
	before->prev = &e->elt;
	if (!p->early_count++)
		omx_list_add_tail(&ep->early_partners, &p->early_elt);
}

static void recv_sequenced(struct omx_endpoint *ep, struct omx_partner *p, const struct omx_pkt *pkt,
			   const uint8_t *frame, size_t len, int replay);

static void drain_early(struct omx_endpoint *ep, struct omx_partner *p)
{
	struct omx_early *e;
	while ((e = omx_list_first(&p->early, struct omx_early, elt))) {
		uint16_t d = omx_seq_diff(e->seqnum, p->next_complete_seq);
		if (d > omx_seq_diff(p->next_match_seq, p->next_complete_seq))
			break;
		omx_list_del(&e->elt);
		if (!--p->early_count)
			omx_list_del(&p->early_elt);
		omx__early_uncharge(p, e->len);
		struct omx_pkt pkt;
		if (omx_wire_decode(omx__wp_for(ep, p->mac), e->frame, e->len, &pkt) == OMX_WIRE_OK)
			recv_sequenced(ep, p, &pkt, e->frame, e->len, 1);
		free(e);
	}
}

void omx__early_drop_all(struct omx_partner *p)
{
	struct omx_early *e;
	while ((e = omx_list_first(&p->early, struct omx_early, elt))) {
		omx_list_del(&e->elt);
		omx__early_uncharge(p, e->len);
		free(e);
	}
	p->early_count = 0;
	omx_list_del(&p->early_elt);
}

/* ---- sequenced packets: TINY SMALL MEDIUM RNDV NOTIFY ---- */

static void recv_sequenced(struct omx_endpoint *ep, struct omx_partner *p, const struct omx_pkt *pkt,
			   const uint8_t *frame, size_t len, int replay)
{
	int notify = pkt->ptype == OMX_PT_NOTIFY;
	union omx_request *start = NULL; /* RNDV to start after the bookkeeping */
	uint16_t s = notify ? pkt->u.notify.lib_seqnum : pkt->u.msg.lib_seqnum;
	uint16_t piggy = notify ? pkt->u.notify.lib_piggyack : pkt->u.msg.lib_piggyack;

	if (omx_seq_sesnum(s) != omx_seq_sesnum(p->next_complete_seq))
		return; /* obsolete session */
	if (p->next_send_seq == OMX_SEQ_UNCONNECTED || omx_seq_sesnum(piggy) != omx_seq_sesnum(p->next_send_seq))
		return;
	omx__ack_defer(p, piggy);

	uint16_t idx = omx_seq_diff(s, p->next_complete_seq);
	uint16_t max = omx_seq_diff(p->next_match_seq, p->next_complete_seq);
	if (idx > max) {
		if (idx <= max + OMX_EARLY_WINDOW) {
			if (!replay)
				store_early(p, s, pkt, frame, len);
		} else if (idx == OMX_SEQNUM_MASK) {
			omx__count(ep->board, OMX_C_X_DROP_DUPLICATE);
			omx__schedule_ack(p, 1, ep->now_ns); /* our last ack was probably lost */
		} else {
			omx__count(ep->board, OMX_C_X_DROP_OUT_OF_WINDOW);
		}
		return;
	}
	if (s != p->next_match_seq) {
		union omx_request *r = pkt->ptype == OMX_PT_MEDIUM ? find_partial(p, s) : NULL;
		if (r) {
			/* a later fragment of the medium being reassembled (a duplicate fragment is
			 * counted there) */
			medium_add_frag(ep, r, pkt);
			message_received(p);
			return;
		}
		omx__count(ep->board, OMX_C_X_DROP_DUPLICATE);
		return;
	}
	if (!notify && ep->refusing) {
		/* Accepted now, a message would be acked and never received: a large one's sender
		 * would wait for its NOTIFY for ever (docs/architecture.md, closing). */
		omx__count(ep->board, OMX_C_X_REFUSED_CLOSING);
		omx__send_nack_lib(ep, pkt, OMX_NACK_ENDPT_CLOSED);
		return;
	}
	if (notify) {
		omx__count(ep->board, OMX_C_RECV_NOTIFY);
		omx__handle_notify(ep, p, pkt);
	} else if (!new_message(ep, p, pkt, &start)) {
		return; /* not stored: do not advance, the sender retransmits */
	}
	p->next_match_seq = omx_seq_inc(p->next_match_seq);
	message_received(p);
	/* A matched (or discarded) RNDV starts only now, so that a NOTIFY sent at once (same-host
	 * single copy, empty or discarded message) piggybacks the ack of the RNDV itself: sent
	 * earlier, it did not, and the sender's completion waited for the delayed ack. */
	if (start) {
		if (start->s.state & OMX_RS_DONE)
			omx__send_notify(ep, start, 0);
		else
			omx__large_recv_start(start);
	}
	if (notify && ep->wp.mode == OMX_WIRE_COMPAT && omx_list_empty(&p->partial_recvs))
		omx__schedule_ack(p, 1, ep->now_ns);
	if (!replay)
		drain_early(ep, p);
}

/* ---- per-type entry points ---- */

/* Head peer index must name a present peer whose MAC is the frame's source (wire.md 3). */
static OMX_HOT_PATH struct omx_partner *find_sender(struct omx_endpoint *ep, const struct omx_pkt *pkt, uint8_t src_ep)
{
	struct omx_peer *peer = omx__peer(pkt->peer_index);
	if (!peer || !omx_wire_mac_eq(peer->mac, pkt->src_mac))
		return NULL;
	/* A known partner straight from the table; omx__partner_get creates the others. */
	struct omx_partner **row = ep->partners[pkt->peer_index];
	struct omx_partner *p = row && src_ep < omx__cfg.endpoint_max ? row[src_ep] : NULL;
	if (!p)
		p = omx__partner_get(ep, pkt->peer_index, src_ep);
	if (p)
		p->last_heard_ns = ep->now_ns;
	return p;
}

static struct omx_partner *sender_partner(struct omx_endpoint *ep, const struct omx_pkt *pkt, uint8_t src_ep)
{
	struct omx_partner *p = find_sender(ep, pkt, src_ep);
	if (!p)
		omx__count(ep->board, OMX_C_DROP_BAD_PEER_INDEX);
	return p;
}

/*
 * Split receive of mediums (pull.c, omx__recv_split): the kernel holds a large MEDIUM fragment
 * whose headers we have seen, and reads it into the place we name in one copy, instead of copying
 * it into the RX ring (on the sending CPU, under veth) for us to copy again. The place is the one
 * the ordinary path would copy the fragment to: the posted receive that matches the partner's next
 * message in sequence (the one omx__match_posted takes), or the matched receive a later fragment
 * belongs to; the fragment wholly inside one of its segments and inside what the receive keeps (not
 * truncated away), not there already. Anything else (unexpected, early, duplicate, other
 * session...) returns NULL and the frame goes the ordinary way. The endpoint lock is held from
 * here until the fragment is accepted, so the ordinary path then decides the same way.
 */
uint8_t *omx__medium_place(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	const struct omx_pkt_msg *m = &pkt->u.msg;
	if (pkt->ptype != OMX_PT_MEDIUM || !m->frag_length || m->dst_endpoint != ep->endpoint_index ||
	    m->session != ep->session)
		return NULL;
	struct omx_partner *p = find_sender(ep, pkt, m->src_endpoint);
	if (!p || p->next_send_seq == OMX_SEQ_UNCONNECTED || omx_seq_sesnum(m->lib_seqnum) != omx_seq_sesnum(p->next_complete_seq) ||
	    omx_seq_sesnum(m->lib_piggyack) != omx_seq_sesnum(p->next_send_seq))
		return NULL;
	uint16_t s = m->lib_seqnum;
	if (omx_seq_diff(s, p->next_complete_seq) > omx_seq_diff(p->next_match_seq, p->next_complete_seq))
		return NULL; /* early */
	union omx_request *r;
	uint32_t keep;
	if (s == p->next_match_seq) {
		r = peek_posted(ep, m->match);
		if (!r)
			return NULL;
		keep = m->length < r->s.total_len ? m->length : r->s.total_len;
	} else {
		r = find_partial(p, s);
		if (!r || (r->s.state & OMX_RS_UNEXPECTED) || r->s.u.recv.unexp_buf || m->length != r->s.status.msg_length ||
		    ((r->s.u.recv.frags_mask >> m->frag_seqnum) & 1))
			return NULL;
		keep = r->s.status.xfer_length;
	}
	uint32_t off = frag_offset(omx__wp_for(ep, p->mac), m->frag_seqnum);
	if ((uint64_t)off + m->frag_length > keep)
		return NULL;
	return omx__segs_place(r->s.segs, r->s.nseg, off, m->frag_length);
}

static void recv_msg(struct omx_endpoint *ep, const struct omx_pkt *pkt, const uint8_t *frame, size_t len)
{
	int notify = pkt->ptype == OMX_PT_NOTIFY;
	uint8_t dst = notify ? pkt->u.notify.dst_endpoint : pkt->u.msg.dst_endpoint;
	uint8_t src = notify ? pkt->u.notify.src_endpoint : pkt->u.msg.src_endpoint;
	uint32_t session = notify ? pkt->u.notify.session : pkt->u.msg.session;
	struct omx_partner *p = sender_partner(ep, pkt, src);
	if (!p)
		return;
	if (dst != ep->endpoint_index) {
		omx__count(ep->board, OMX_C_DROP_BAD_ENDPOINT);
		return;
	}
	if (session != ep->session) {
		omx__count(ep->board, OMX_C_DROP_BAD_SESSION);
		omx__send_nack_lib(ep, pkt, OMX_NACK_BAD_SESSION);
		return;
	}
	recv_sequenced(ep, p, pkt, frame, len, 0);
}

/* The fragment omx__medium_place named a place for, its bytes now there: accepted as any other
 * (a NULL payload tells medium_add_frag not to copy them). */
void omx__recv_medium_placed(struct omx_endpoint *ep, struct omx_pkt *pkt)
{
	pkt->payload = NULL;
	recv_msg(ep, pkt, NULL, 0);
}

static void recv_truc(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	struct omx_partner *p = sender_partner(ep, pkt, pkt->u.truc.src_endpoint);
	if (!p)
		return;
	if (pkt->u.truc.session != ep->session) {
		omx__count(ep->board, OMX_C_DROP_BAD_SESSION);
		return;
	}
	if (pkt->u.truc.acknum <= p->last_recv_acknum)
		return; /* older liback */
	p->last_recv_acknum = pkt->u.truc.acknum;
	omx__count(ep->board, OMX_C_RECV_LIBACK);
	omx__ack_received(p, pkt->u.truc.lib_seqnum);
	if (pkt->u.truc.resent == OMX_TRUC_RESEND_ASK)
		omx__resend_asked(p);
}

static void recv_frame(struct omx_endpoint *ep, const struct omx_wire_params *wp, const uint8_t *frame, size_t len);

void omx__recv_frame(void *arg, const uint8_t *frame, size_t len)
{
	struct omx_endpoint *ep = arg;
	recv_frame(ep, &ep->wp, frame, len);
}

/* Frames of the same-host transport: decoded with the same-host parameters their sender used. */
void omx__recv_frame_local(void *arg, const uint8_t *frame, size_t len)
{
	struct omx_endpoint *ep = arg;
	ep->local_seen = 1;
	recv_frame(ep, &ep->wp_local, frame, len);
}

/*
 * A ping-pong's message, in the fewest steps: a TINY or SMALL frame, or a MEDIUM frame holding a
 * whole message (up to a frame's size: 8 KiB on the same-host path), for us, from a connected
 * partner, the next message in sequence with nothing partial or early before it. The same steps
 * as recv_msg and recv_sequenced take for it (and in the same order), then new_message's (a
 * posted receive, the unexpected handler, the unexpected queue, or a refusal: the frame is
 * handled either way, 1); anything else goes the general way, nothing changed yet (0). With the
 * eager-only decoder, ~150 of the ~650 instructions a same-host hop spent on its frame
 * (bench/self_pingpong). Whole mediums took the general way until stop 44: a same-host 256 B
 * message cost ~1180 instructions more than a 128 B one, 0.70 against 0.43 us a message in
 * bench/self_pingpong (docs/performance.md).
 */
static OMX_HOT_PATH int recv_eager_in_order(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	const struct omx_pkt_msg *m = &pkt->u.msg;
	if (m->dst_endpoint != ep->endpoint_index || m->session != ep->session || ep->refusing)
		return 0;
	struct omx_partner *p = find_sender(ep, pkt, m->src_endpoint);
	if (!p || p->next_send_seq == OMX_SEQ_UNCONNECTED || m->lib_seqnum != p->next_match_seq ||
	    p->next_complete_seq != p->next_match_seq || p->early_count ||
	    omx_seq_sesnum(m->lib_piggyack) != omx_seq_sesnum(p->next_send_seq))
		return 0;
	omx__ack_defer(p, m->lib_piggyack);
	union omx_request *start = NULL; /* only a RNDV has one */
	if (new_message(ep, p, pkt, &start)) {
		p->next_match_seq = omx_seq_inc(p->next_match_seq);
		message_received(p);
	}
	return 1;
}

static void recv_frame(struct omx_endpoint *ep, const struct omx_wire_params *wp, const uint8_t *frame, size_t len)
{
	struct omx_pkt pkt;
	if (omx_wire_decode_eager(frame, len, &pkt)) {
		if (!recv_eager_in_order(ep, &pkt))
			recv_msg(ep, &pkt, frame, len);
		return;
	}
	enum omx_wire_err err = omx_wire_decode(wp, frame, len, &pkt);
	if (err != OMX_WIRE_OK) {
		if (err < OMX_WIRE_ERR_COUNT && wire_err_counter[err])
			omx__count(ep->board, wire_err_counter[err]);
		omx__count(ep->board, OMX_C_X_DROP_UNDECODABLE);
		return;
	}
	switch (pkt.ptype) {
	case OMX_PT_MEDIUM:
		/* A whole message in order takes the eager steps; decoded once (a network medium's
		 * other fragments are not worth a second, whole-only decode first). */
		if (!omx_wire_medium_whole(&pkt) || !recv_eager_in_order(ep, &pkt))
			recv_msg(ep, &pkt, frame, len);
		break;
	case OMX_PT_TINY:
	case OMX_PT_SMALL:
	case OMX_PT_RNDV:
	case OMX_PT_NOTIFY:
		recv_msg(ep, &pkt, frame, len);
		break;
	case OMX_PT_TRUC:
		recv_truc(ep, &pkt);
		break;
	case OMX_PT_CONNECT:
		omx__handle_connect(ep, &pkt);
		break;
	case OMX_PT_NACK_LIB:
		omx__handle_nack_lib(ep, &pkt);
		break;
	case OMX_PT_PULL:
		omx__handle_pull(ep, &pkt);
		break;
	case OMX_PT_PULL_REPLY:
		omx__handle_pull_reply(ep, &pkt);
		break;
	case OMX_PT_NACK_MCP:
		omx__handle_nack_mcp(ep, &pkt);
		break;
	case OMX_PT_HOST_QUERY:
		omx__handle_host_query(ep, &pkt);
		break;
	case OMX_PT_HOST_REPLY:
		omx__handle_host_reply(ep, &pkt);
		break;
	case OMX_PT_RAW:
		omx__count(ep->board, OMX_C_RECV_RAW); /* discovery frames are for the discovery daemon */
		omx__handle_discovery(ep, &pkt);
		break;
	default:
		omx__count(ep->board, OMX_C_DROP_NOT_IMPLEMENTED);
		break;
	}
}

/*
 * The receive of the calls that make a progress pass (omx__progress_fast): the frame at the head
 * of our ring, if the in-order path takes it, without the pass around it (its prelude, the
 * transports' polls, the timers): ~120 of the ~1228 instructions of a same-host hop
 * (bench/self_pingpong). The frame stays in the ring, for the pass, whenever it is not an eager
 * message in sequence.
 */
OMX_HOT_PATH int omx__recv_local_fast(struct omx_endpoint *ep)
{
	uint32_t len;
	const uint8_t *f = ep->own_ring ? omx_shm_ring_peek(ep->own_ring, &len) : NULL;
	struct omx_pkt pkt;
	if (!f)
		return -1;
	omx_hop_mark(OMX_HOP_SEEN);
	if (!omx_wire_decode_eager(f, len, &pkt) && !omx_wire_decode_medium_whole(&ep->wp_local, f, len, &pkt))
		return 0;
	/* No clock read: the coarse clock's vDSO read is ~5 ns here, on the critical path of every
	 * same-host hop. What this path stamps with ep->now_ns takes the last pass's value: a
	 * same-host partner's last_heard_ns (which omx__notify_watch does not read for same-host
	 * partners) and a delayed ack's start (stale only after the application stayed away: the
	 * ack then goes out at the next pass instead of up to 16 ms later). */
	if (!recv_eager_in_order(ep, &pkt))
		return 0;
	omx_shm_ring_take(ep->own_ring);
	omx_hop_mark(OMX_HOP_DELIVERED);
	return 1;
}
