/*
 * send.c - the send side of the reliability layer (wire.md 6, 7): size classes, sequence numbers,
 * piggybacked and explicit acks, retransmission, flow control, and self sends (behaviour.md 6.1).
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/counters.h"
#include "core/hop_trace.h"
#include "hot_path.h"

OMX_HOT_PATH uint16_t omx__piggyack(struct omx_partner *p)
{
	uint16_t a = p->next_complete_seq;
	p->last_acked_recv_seq = a;
	/* a resend request travels in a liback only: that one stays due */
	if (p->ack_state && omx_list_linked(&p->ack_elt) && !p->resend_ask) {
		omx_list_del(&p->ack_elt);
		p->ack_state = 0;
	}
	return a;
}

/* A message's head fields: all that omx_wire_encode_eager (and local_refused after it) reads, so
 * the same-host eager send, whose packet never meets the generic encoder, skips clearing the rest
 * (31 of a same-host hop's ~1475 instructions, stop 36). */
void omx__fill_msg_fixed(struct omx_pkt *pkt, const struct omx_endpoint *ep, const struct omx_partner *p, uint8_t ptype)
{
	memcpy(pkt->dst_mac, p->mac, 6);
	pkt->peer_index = omx__partner_reverse_index(p);
	pkt->ptype = ptype;
	pkt->u.msg.dst_endpoint = p->endpoint_index;
	pkt->u.msg.src_endpoint = (uint8_t)ep->endpoint_index;
	pkt->u.msg.src_generation = 0;
	pkt->u.msg.checksum = 0;
	pkt->u.msg.session = p->true_session;
}

static void fill_eager_head(struct omx_pkt *pkt, struct omx_endpoint *ep, struct omx_partner *p, uint16_t seqnum,
			    uint64_t match, uint8_t ptype)
{
	omx__fill_msg_fixed(pkt, ep, p, ptype);
	pkt->u.msg.lib_seqnum = seqnum;
	pkt->u.msg.lib_piggyack = omx__piggyack(p);
	pkt->u.msg.match = match;
}

static void fill_msg_head_for(struct omx_pkt *pkt, struct omx_endpoint *ep, struct omx_partner *p, uint16_t seqnum,
			      uint64_t match, uint8_t ptype)
{
	memset(pkt, 0, sizeof(*pkt));
	fill_eager_head(pkt, ep, p, seqnum, match, ptype);
}

static void fill_msg_head(struct omx_pkt *pkt, union omx_request *r, uint8_t ptype)
{
	fill_msg_head_for(pkt, r->s.ep, r->s.partner, r->s.seqnum, r->s.status.match_info, ptype);
}

/* A sequenced message just (re)transmitted waits for its ack on the resend timer. */
static void arm_resend(union omx_request *r)
{
	r->s.last_send_ns = r->s.ep->now_ns;
	omx_list_del(&r->s.timer_elt);
	omx_list_add_tail(&r->s.ep->resend_list, &r->s.timer_elt);
}

/*
 * Transmissions that failed here: a same-host partner's ring and socket both full (its owner
 * stalled, or fed by several senders at once, or its slots taken by our acks), or a full transmit
 * queue. The frame never left, and the resend timer (OMX_RESEND_DELAY_MS, 500 ms) was the only
 * way it would: a receiver that stopped polling for a moment cost its sender half a second per
 * lost frame. A message with a frame that failed is marked (OMX_RS_TX_FAILED) and sent again
 * after OMX_TX_RETRY_MIN_NS (1 ms; omx__tx_retry_due), the delay doubling up to the resend delay
 * while the retries fail too, back to the minimum after a round that went out. Explicit acks and
 * connect requests that failed are sent again too (send_liback, connect.c). sent() (transmit.c) sets
 * ep->tx_failed; the sends of sequenced messages clear it before their frames and look at it
 * after them (tx_check).
 */
static void tx_check(union omx_request *r)
{
	struct omx_endpoint *ep = r->s.ep;
	if (__builtin_expect(!ep->tx_failed, 1)) {
		r->s.state &= ~OMX_RS_TX_FAILED;
		return;
	}
	ep->tx_failed = 0;
	r->s.state |= OMX_RS_TX_FAILED;
	if (!ep->tx_retry_ns)
		ep->tx_retry_ns = ep->now_ns + ep->tx_retry_delay_ns;
}

/* Is p an endpoint of this host whose frames go through our same-host transport and its
 * shared-memory ring? Fixed for the partner's life, so looked up once; the test of the answer
 * inline (a same-host send asks twice: ~9 instructions of a call before its frame left). */
static __attribute__((noinline)) int same_host_lookup(struct omx_partner *p)
{
	p->same_host = omx__partner_shared(p) ? 1 : 2;
	return p->same_host == 1;
}

static inline __attribute__((always_inline)) int same_host(struct omx_partner *p)
{
	return p->same_host ? p->same_host == 1 : same_host_lookup(p);
}

/* Transmit (or retransmit) every frame of a sequenced message with the current piggyack. */
void omx__send_sequenced(union omx_request *r)
{
	struct omx_endpoint *ep = r->s.ep;
	struct omx_pkt pkt;
	uint32_t len = r->s.total_len;

	ep->tx_failed = 0;
	switch (r->s.type) {
	case OMX_REQ_SEND_TINY:
	case OMX_REQ_SEND_SMALL:
		fill_msg_head(&pkt, r, r->s.type == OMX_REQ_SEND_TINY ? OMX_PT_TINY : OMX_PT_SMALL);
		pkt.u.msg.length = len;
		pkt.payload = r->s.u.send.data;
		pkt.payload_len = len;
		omx__send_frame(ep, &pkt, r->s.type == OMX_REQ_SEND_TINY ? OMX_C_SEND_TINY : OMX_C_SEND_SMALL);
		break;
	case OMX_REQ_SEND_MEDIUM: {
		/* The fragments leave together (one sendmmsg on the network, omx__send_frames). The
		 * first transmission reads the caller's buffer, and only then is the payload copied for
		 * retransmission (the send completes early, with the copy): copying first put a pass
		 * over the whole message before its first frame on the critical path (same-host 8-32
		 * KiB: 15-20% of the half round trip; over veth lost in the kernel's copies). */
		const struct omx_wire_params *wp = omx__wp_for(ep, r->s.partner->mac);
		const uint8_t *src = r->s.u.send.src ? r->s.u.send.src : r->s.u.send.data;
		uint32_t F = wp->medium_frag_max;
		struct omx_pkt frags[OMX_NET_BATCH_MAX];
		unsigned nf = 0;
		for (uint32_t i = 0, off = 0; off < len; i++, off += F) {
			struct omx_pkt *fp = &frags[nf];
			fill_msg_head(fp, r, OMX_PT_MEDIUM);
			fp->u.msg.length = len;
			fp->u.msg.frag_seqnum = (uint8_t)i;
			fp->u.msg.frag_length = (uint16_t)(len - off < F ? len - off : F);
			fp->u.msg.frag_pipeline = wp->frag_pipeline;
			fp->payload = src + off;
			fp->payload_len = fp->u.msg.frag_length;
			if (++nf == OMX_NET_BATCH_MAX) {
				omx__send_frames(ep, frags, nf, OMX_C_SEND_MEDIUMSQ_FRAG);
				nf = 0;
			}
		}
		if (nf)
			omx__send_frames(ep, frags, nf, OMX_C_SEND_MEDIUMSQ_FRAG);
		if (same_host(r->s.partner))
			omx__shared_medium_sent(ep, r->s.partner, len);
		if (len > ep->split_medium_min && wp == &ep->wp)
			omx__lane_bulk_sent(ep);
		if (r->s.u.send.src && !(r->s.state & OMX_RS_ACK_COMPLETE)) {
			memcpy(r->s.u.send.data, r->s.u.send.src, len);
			r->s.u.send.src = NULL;
		}
		break;
	}
	case OMX_REQ_RECV_LARGE:
		if (same_host(r->s.partner)) {
			omx__send_notify_partner(ep, r->s.partner, r->s.seqnum, r->s.u.recv.notify_length,
						 r->s.u.recv.rdma_id, r->s.u.recv.rdma_seqnum);
			break;
		}
		omx__build_notify(r, &pkt);
		omx__send_frame(ep, &pkt, OMX_C_SEND_NOTIFY);
		break;
	case OMX_REQ_SEND_LARGE:
		if (same_host(r->s.partner)) {
			omx__send_rndv_partner(ep, r->s.partner, r->s.seqnum, r->s.status.match_info, len,
					       (uint8_t)r->s.u.send.region, r->s.u.send.region_seqnum);
			break;
		}
		fill_msg_head(&pkt, r, OMX_PT_RNDV);
		pkt.u.msg.length = 8;
		pkt.u.msg.msg_length = len;
		pkt.u.msg.rdma_id = (uint8_t)r->s.u.send.region;
		pkt.u.msg.rdma_seqnum = r->s.u.send.region_seqnum;
		omx__send_frame(ep, &pkt, OMX_C_SEND_RNDV);
		break;
	default:
		return;
	}
	tx_check(r);
	arm_resend(r);
}

static int region_get(struct omx_endpoint *ep, union omx_request *r)
{
	if (r->s.u.send.region >= 0)
		return 0;
	if (ep->large_sends >= OMX_LARGE_SENDS_MAX)
		return -1;
	for (int i = 0; i < OMX_REGION_MAX; i++) {
		if (!ep->regions[i].req) {
			ep->regions[i].req = r;
			ep->regions[i].seqnum++;
			r->s.u.send.region = i;
			r->s.u.send.region_seqnum = ep->regions[i].seqnum;
			ep->large_sends++;
			return 0;
		}
	}
	return -1;
}

void omx__region_release(struct omx_endpoint *ep, union omx_request *r)
{
	int i = r->s.u.send.region;
	if (i < 0 || ep->regions[i].req != r)
		return;
	omx__shared_unexport(ep, i);
	if (r->s.u.send.pullable) {
		r->s.u.send.pullable = 0;
		__atomic_fetch_sub(&ep->pullable_sends, 1, __ATOMIC_RELAXED);
	}
	ep->regions[i].req = NULL;
	r->s.u.send.region = -1;
	ep->large_sends--;
}

/*
 * Sequenced messages in flight to one partner. A same-host receiver that stops calling the
 * library (computing, descheduled) cannot take more frames than its ring holds plus its socket's
 * queue (net.unix.max_dgram_qlen); every frame past that was refused and went into the
 * retransmission timer, and whole windows of duplicates then overflowed the receiver again:
 * 1024 small messages in flight to a receiver that stalled for 0.5 s took 8-10 s to get through
 * (qlen 512; 40 s with qlen 8). Keeping no more unacked messages in flight than the receiver's
 * ring has slots lets a stalled receiver hold everything sent to it, and the rest waits here
 * (throttled, not lost) until its acks come back.
 */
/* Our sequenced messages to p not acked yet. */
static inline uint16_t sends_unacked(const struct omx_partner *p)
{
	return omx_seq_diff(p->next_send_seq, p->next_acked_seq);
}

static inline __attribute__((always_inline)) uint16_t send_window(struct omx_partner *p)
{
	return same_host(p) && p->ep->local_window ? p->ep->local_window : OMX_THROTTLE_WINDOW;
}

/* The partner's next sequence number, and a place on its non_acked list until acked. */
static void track_sequenced(union omx_request *r)
{
	struct omx_partner *p = r->s.partner;
	r->s.seqnum = p->next_send_seq;
	p->next_send_seq = omx_seq_inc(p->next_send_seq);
	r->s.state |= OMX_RS_NEED_ACK;
	omx_list_add_tail(&p->non_acked, &r->s.queue_elt);
	if (r->s.type == OMX_REQ_SEND_MEDIUM)
		p->medium_unacked += r->s.total_len;
}

void omx__medium_acked(struct omx_partner *p, union omx_request *r)
{
	if (r->s.type == OMX_REQ_SEND_MEDIUM)
		p->medium_unacked -= r->s.total_len;
}

/*
 * Medium bytes in flight to one partner are bounded by half of what a receiver queues unexpected
 * for one partner (OMX_UNEXP_PEER_MAX_KB / 2: 8 MiB). Eager sends complete as they leave, so a
 * sender whose receiver refused one message for lack of room (everything after it then arrives
 * out of order, and is dropped) went on with up to OMX_ZOMBIE_SEND (512) more: 64 MiB of 128 KiB
 * mediums, to be retransmitted. With the bound, a refusal costs at most the bytes in flight, all
 * of which the receiver's resend request covers (omx__resend_asked).
 */
static int medium_room_for(const struct omx_partner *p, uint64_t len)
{
	return !p->medium_unacked || p->medium_unacked + len <= omx__cfg.unexp_peer_max / 2;
}

static int medium_room(struct omx_partner *p, union omx_request *r)
{
	return r->s.type != OMX_REQ_SEND_MEDIUM || medium_room_for(p, r->s.total_len);
}

/* Give a seqnum and transmit, or leave it throttled. Returns 0 if sent. */
static int try_send_now(union omx_request *r)
{
	struct omx_partner *p = r->s.partner;
	struct omx_endpoint *ep = r->s.ep;
	if (sends_unacked(p) >= send_window(p) || !medium_room(p, r))
		return -1;
	if (r->s.type == OMX_REQ_SEND_LARGE && region_get(ep, r) < 0)
		return -1;
	track_sequenced(r);
	if (r->s.type == OMX_REQ_SEND_LARGE) {
		r->s.state |= OMX_RS_NEED_REPLY;
		if (!omx__shared_export(r)) { /* same-host receiver: lets it copy directly */
			r->s.u.send.pullable = 1;
			if (__atomic_fetch_add(&ep->pullable_sends, 1, __ATOMIC_SEQ_CST) == 0)
				omx__progress_thread_hurry(ep);
		}
		omx__xfer_touch(ep);
	}
	omx__send_sequenced(r);
	return 0;
}

/* An eager send's payload is ours once sent: it completes before its ack ("zombie") unless
 * too many do already. Rendezvous sends, and sends not sent yet (throttled), wait. */
static void complete_early(struct omx_endpoint *ep, union omx_request *r)
{
	if (r->s.type == OMX_REQ_SEND_LARGE || (r->s.state & (OMX_RS_NEED_ACK | OMX_RS_ACK_COMPLETE)) != OMX_RS_NEED_ACK ||
	    ep->zombies >= omx__cfg.zombie_max)
		return;
	r->s.state |= OMX_RS_DONE_EARLY;
	ep->zombies++;
	omx__req_complete(r, OMX_SUCCESS);
}

/* Throttled sends leave in order as acks open the window. An eager one then completes as it would
 * have, had it left at once (complete_early): otherwise its completion waited for its own ack,
 * i.e. for the delayed ack when it was among the last few sent (a one-way sender 128 messages
 * ahead of a descheduled same-host receiver stalled for OMX_ACK_DELAY_MS per round). */
void omx__release_throttled(struct omx_partner *p)
{
	union omx_request *r;
	while ((r = (union omx_request *)omx_list_first(&p->throttled, omx_req_t, queue_elt))) {
		omx_list_del(&r->s.queue_elt);
		if (try_send_now(r) < 0) {
			/* back at the head: order is preserved */
			struct omx_list *first = p->throttled.next;
			r->s.queue_elt.next = first;
			r->s.queue_elt.prev = &p->throttled;
			first->prev = &r->s.queue_elt;
			p->throttled.next = &r->s.queue_elt;
			return;
		}
		r->s.state &= ~OMX_RS_NEED_SEQNUM;
		complete_early(r->s.ep, r);
	}
}

/* How many of our sends `ack` newly acknowledges; 0 when it takes none (not connected, another
 * session, nothing new, or past what was sent): omx__ack_received and omx__ack_defer's merge. */
static inline uint16_t ack_newly(const struct omx_partner *p, uint16_t ack)
{
	if (p->next_acked_seq == OMX_SEQ_UNCONNECTED || omx_seq_sesnum(ack) != omx_seq_sesnum(p->next_send_seq))
		return 0;
	uint16_t newly = omx_seq_diff(ack, p->next_acked_seq);
	return newly <= sends_unacked(p) ? newly : 0;
}

/* Release requests acked by `ack` (wire.md 7.2). */
void omx__ack_received(struct omx_partner *p, uint16_t ack)
{
	struct omx_endpoint *ep = p->ep;
	uint16_t newly = ack_newly(p, ack);
	if (!newly)
		return;
	union omx_request *r;
	while ((r = (union omx_request *)omx_list_first(&p->non_acked, omx_req_t, queue_elt))) {
		if (omx_seq_diff(r->s.seqnum, p->next_acked_seq) >= newly)
			break;
		omx_list_del(&r->s.queue_elt);
		omx_list_del(&r->s.timer_elt);
		if (r->s.type == OMX_REQ_RECV_LARGE) { /* our NOTIFY was acked */
			omx__req_clear(r, OMX_RS_NEED_ACK | OMX_RS_NOTIFY_PENDING);
		} else if (r->s.type == OMX_REQ_SEND_LARGE) {
			if (r->s.u.send.notified) {
				omx__region_release(ep, r);
				omx__req_complete(r, r->s.status.xfer_length < r->s.status.msg_length ?
							     OMX_MESSAGE_TRUNCATED : OMX_SUCCESS);
				omx__req_clear(r, OMX_RS_NEED_ACK | OMX_RS_NEED_REPLY);
			} else {
				omx_list_add_tail(&p->need_notify, &r->s.queue_elt);
				ep->owed_watch = 1;
				omx__req_clear(r, OMX_RS_NEED_ACK);
			}
		} else {
			omx__medium_acked(p, r);
			omx__req_complete(r, OMX_SUCCESS);
			omx__req_clear(r, OMX_RS_NEED_ACK);
		}
	}
	p->next_acked_seq = ack;
	omx__release_throttled(p);
}

/*
 * The ack a message carries frees our sends it covers (their copies, resend timers, request
 * slots) and lets throttled ones go: work nobody waits for when the message itself completes a
 * receive, as in a ping-pong, where it stood between the frame and the application's next send
 * (~250 instructions of a same-host hop, bench/self_pingpong). So it is taken at the start of
 * the next progress pass (the next omx_test, or the pass a send runs after its frame is out),
 * or at the end of this one if the pass completed nothing; omx__next_timer says "now" while one
 * waits, so no wait sleeps on it. Acks are cumulative but replayed early frames carry older
 * ones: a second one while one waits keeps whichever of the two omx__ack_received would have
 * ended with had it taken both in order (the later one it accepts), instead of taking the first
 * one now: a ping-pong's next message often comes before a pass took the last one's ack, and
 * taking it then put ~50 instructions between that message and its answer.
 */
OMX_HOT_PATH void omx__ack_defer(struct omx_partner *p, uint16_t ack)
{
	if (omx_list_linked(&p->ack_deferred_elt)) {
		if (ack_newly(p, ack) > ack_newly(p, p->ack_deferred_seq))
			p->ack_deferred_seq = ack;
		return;
	}
	if (ack == p->next_acked_seq)
		return; /* nothing new (taken now: it could not be older than this) */
	omx_list_add_tail(&p->ep->acks_deferred, &p->ack_deferred_elt);
	p->ack_deferred_seq = ack;
}

void omx__acks_deferred_take(struct omx_endpoint *ep)
{
	struct omx_partner *p;
	while ((p = omx_list_first(&ep->acks_deferred, struct omx_partner, ack_deferred_elt))) {
		omx_list_del(&p->ack_deferred_elt);
		omx__ack_received(p, p->ack_deferred_seq);
	}
}

/* The receiver refused some of our messages (its unexpected queue was full) and has room again:
 * retransmit the unacked ones now, oldest first, up to half of what a partner may queue there
 * (our own OMX_UNEXP_PEER_MAX_KB: peers normally share a configuration); what it refuses again
 * it asks for again. Not counted against the resend budget: the receiver is alive. */
void omx__resend_asked(struct omx_partner *p)
{
	uint64_t budget = omx__cfg.unexp_peer_max / 2, sent = 0;
	struct omx_list *pos, *tmp;
	(void)omx__ep_clock(p->ep);
	omx_list_for_each_safe(pos, tmp, &p->non_acked) {
		union omx_request *r = (union omx_request *)omx_container_of(pos, omx_req_t, queue_elt);
		omx__count(p->ep->board, OMX_C_X_RETRANSMIT_MSG);
		omx__send_sequenced(r);
		if ((sent += r->s.total_len) >= budget)
			break;
	}
}

/* Messages resent by one timer run at most; the others still due go at the next (the protocol
 * clock's next tick). A partner that stopped acking a window of thousands of messages had every
 * one of them resent inside a single call of the application's, and every call after it once
 * they were due again: test_core_limits' full window took seconds per send under TSan. A message
 * then goes out every resend delay or a little later, so such a partner is given up a little
 * later than OMX_RESENDS_MAX x OMX_RESEND_DELAY_MS. */
#define OMX_RESEND_BURST_MAX 64u

void omx__resend_due(struct omx_endpoint *ep, uint64_t now)
{
	union omx_request *r;
	unsigned resent = 0;
	while ((r = (union omx_request *)omx_list_first(&ep->resend_list, omx_req_t, timer_elt))) {
		if (now < r->s.last_send_ns + omx__cfg.resend_delay_ns || resent == OMX_RESEND_BURST_MAX)
			break;
		if (r->s.resends >= r->s.resends_max) {
			struct omx_partner *p = r->s.partner;
			omx__verbose("partner %012llx endpoint %u unreachable after %u resends, resetting it\n",
				     (unsigned long long)p->nic_id, p->endpoint_index, r->s.resends);
			p->gen++;
			omx__partner_reset(p, OMX_REMOTE_ENDPOINT_UNREACHABLE, OMX_RESET_NEW_SESNUM);
			continue;
		}
		r->s.resends++;
		resent++;
		omx__count(r->s.ep->board, OMX_C_X_RETRANSMIT_MSG);
		omx__send_sequenced(r);
	}
}

/* The messages marked OMX_RS_TX_FAILED, oldest transmission first, until one fails again (on a
 * full same-host ring each failure waited ~1 ms in the transport). The delay doubles only after a
 * round in which none went out. */
void omx__tx_retry_due(struct omx_endpoint *ep, uint64_t now)
{
	if (now < ep->tx_retry_ns)
		return;
	ep->tx_retry_ns = 0;
	int failed = 0, went = 0;
	struct omx_list *last = ep->resend_list.prev;
	for (struct omx_list *pos = ep->resend_list.next, *next; pos != &ep->resend_list; pos = next) {
		next = pos->next; /* a message sent again moves to the list's tail: stop at the old one */
		union omx_request *r = (union omx_request *)omx_container_of(pos, omx_req_t, timer_elt);
		if (r->s.state & OMX_RS_TX_FAILED) {
			omx__count(ep->board, OMX_C_X_RETRANSMIT_MSG);
			omx__send_sequenced(r);
			if ((failed = (r->s.state & OMX_RS_TX_FAILED) != 0))
				break;
			went++;
		}
		if (pos == last)
			break;
	}
	uint64_t d = ep->tx_retry_delay_ns * 2;
	ep->tx_retry_delay_ns = went ? OMX_TX_RETRY_MIN_NS : d < omx__cfg.resend_delay_ns ? d : omx__cfg.resend_delay_ns;
	if (failed)
		ep->tx_retry_ns = now + ep->tx_retry_delay_ns;
}

/* ---- explicit acks (TRUC liback) ---- */

void omx__schedule_ack(struct omx_partner *p, int immediate, uint64_t now)
{
	struct omx_endpoint *ep = p->ep;
	if (immediate) {
		ep->acks_now = 1;
		if (p->ack_state != 2) {
			omx_list_del(&p->ack_elt);
			omx_list_add_tail(&ep->ack_list, &p->ack_elt);
			p->ack_state = 2;
		}
	} else if (!p->ack_state) {
		p->ack_state = 1;
		p->ack_since_ns = now;
		omx_list_add_tail(&ep->ack_list, &p->ack_elt);
	}
}

static void send_liback(struct omx_endpoint *ep, struct omx_partner *p)
{
	struct omx_pkt pkt;
	memset(&pkt, 0, sizeof(pkt));
	memcpy(pkt.dst_mac, p->mac, 6);
	pkt.peer_index = omx__partner_reverse_index(p);
	pkt.ptype = OMX_PT_TRUC;
	pkt.u.truc.dst_endpoint = p->endpoint_index;
	pkt.u.truc.src_endpoint = (uint8_t)ep->endpoint_index;
	pkt.u.truc.length = 16;
	pkt.u.truc.session = p->back_session != OMX_SESSION_UNKNOWN ? p->back_session : p->true_session;
	pkt.u.truc.session_id = pkt.u.truc.session;
	pkt.u.truc.type = OMX_TRUC_TYPE_ACK;
	pkt.u.truc.lib_seqnum = p->next_complete_seq;
	pkt.u.truc.send_seq = p->next_complete_seq;
	pkt.u.truc.acknum = ++p->last_send_acknum;
	pkt.u.truc.resent = p->resend_ask ? OMX_TRUC_RESEND_ASK : 0;
	uint16_t acked_before = p->last_acked_recv_seq;
	int ask = p->resend_ask;
	p->resend_ask = 0;
	p->last_acked_recv_seq = p->next_complete_seq;
	ep->tx_failed = 0;
	omx__send_frame(ep, &pkt, OMX_C_SEND_LIBACK);
	if (ep->tx_failed) {
		/* Not transmitted ("Transmissions that failed" above): still owed, again after the ack
		 * delay. Given up, it would leave the sender of our last messages to its resend timer. */
		ep->tx_failed = 0;
		p->last_acked_recv_seq = acked_before;
		p->resend_ask = ask;
		omx__schedule_ack(p, 0, ep->now_ns);
	}
}

/* Our ack to p, now rather than at the next pass (or after the ack delay). */
void omx__send_ack_now(struct omx_partner *p)
{
	if (p->ack_state) {
		omx_list_del(&p->ack_elt);
		p->ack_state = 0;
	}
	send_liback(p->ep, p);
}

void omx__send_acks(struct omx_endpoint *ep, uint64_t now)
{
	struct omx_list *pos, *tmp, *last = ep->ack_list.prev; /* an ack that failed comes back after it */
	omx_list_for_each_safe(pos, tmp, &ep->ack_list) {
		struct omx_partner *p = omx_container_of(pos, struct omx_partner, ack_elt);
		int end = pos == last;
		if (!(p->ack_state == 1 && now < p->ack_since_ns + omx__cfg.ack_delay_ns))
			omx__send_ack_now(p);
		if (end)
			break;
	}
}

void omx__send_nack_lib(struct omx_endpoint *ep, const struct omx_pkt *bad, uint8_t nack_type)
{
	struct omx_peer *peer = omx__peer(bad->peer_index);
	struct omx_pkt pkt;
	if (!peer)
		return; /* a sender we cannot name gets no NACK (wire.md 10) */
	memset(&pkt, 0, sizeof(pkt));
	memcpy(pkt.dst_mac, bad->src_mac, 6);
	pkt.peer_index = peer->reverse_index[ep->board_index];
	pkt.ptype = OMX_PT_NACK_LIB;
	pkt.u.nack_lib.src_endpoint = bad->u.msg.dst_endpoint;
	pkt.u.nack_lib.nack_type = nack_type;
	pkt.u.nack_lib.dst_endpoint = bad->u.msg.src_endpoint;
	pkt.u.nack_lib.dst_src_peer_index = bad->peer_index;
	pkt.u.nack_lib.lib_seqnum = bad->ptype == OMX_PT_CONNECT ? 0 :
				    bad->ptype == OMX_PT_NOTIFY ? bad->u.notify.lib_seqnum : bad->u.msg.lib_seqnum;
	omx__send_frame(ep, &pkt, OMX_C_SEND_NACK_LIB);
}

/* ---- posting ---- */

/*
 * At MTU 65535 a 64 KiB message is one or two frames, and a rendezvous (RNDV, PULL, replies,
 * NOTIFY: two round trips) cost 40% of its bandwidth: omx_perf between two namespaces, median of
 * 3, 4366-4470 MB/s ping-pong at 64 KiB against 6869 as a medium, stream 4032 against 5592 (TCP:
 * 7554 / 5368). 128 KiB gained 20% (ping-pong) and 14% (stream) as a medium too; 256 KiB lost
 * 7-11% (docs/performance.md, stop 24). At MTU 9000 (8 KiB fragments) the same held by stop 32
 * (stop 12 had found ~10% at 64 KiB only, with 256 KiB): 64 KiB as a medium +47% ping-pong,
 * +26% stream, +18% blocking; 128 KiB +13% / +14% / even; 256 KiB gained nothing, and lost 11%
 * blocking. Below 8 KiB fragments the historical 32 KiB stands.
 */
uint32_t omx__rndv_threshold(const struct omx_wire_params *wp)
{
	uint32_t t = !omx__cfg.rndv_auto ? omx__cfg.rndv_threshold :
		     wp->medium_frag_max >= OMX_WIRE_FRAG_WHOLE_MIN ? OMX_RNDV_THRESHOLD_JUMBO64 :
		     wp->medium_frag_max >= 8192 ? OMX_RNDV_THRESHOLD_JUMBO : omx__cfg.rndv_threshold;
	return t < wp->medium_max ? t : wp->medium_max;
}

/* The status a send reports, from its segments (total_len set) and the caller's arguments. */
static void fill_send_status(union omx_request *r, struct omx_partner *p, omx_endpoint_addr_t dest, uint64_t match,
			     void *context)
{
	r->s.partner = p;
	r->s.status.addr = dest;
	r->s.status.match_info = match;
	r->s.status.msg_length = r->s.total_len;
	r->s.status.xfer_length = r->s.total_len;
	r->s.status.context = context;
}

/*
 * Same-host mediums from OMX_SHARED_ACK_COMPLETE bytes (128 KiB) on keep no copy for
 * retransmission: they complete when the receiver acks them, which it does at once for these
 * (recv.c, ack_at_once), and until then a resend reads the caller's buffer, as a large message's
 * pulls do. An eager medium's copy is a third pass over the message, after the ring's two, and in
 * a ping-pong its sender makes it while the answer arrives. On the Zen 3 VM near, 128 KiB half
 * round trips took 6-25% less in three interleaved series (docs/performance.md, stop 60); at 32
 * and 64 KiB the wait for the ack cost as much as the copy (+8% to -27% at 32 KiB), so smaller
 * mediums keep completing early. One segment only: gathered segments need the copy anyway.
 * Marks r so (its segments and partner set) and says whether it did.
 */
static inline int send_without_copy(union omx_request *r, uint32_t len)
{
	if (r->s.nseg != 1 || len < omx__cfg.shared_ack_complete || !same_host(r->s.partner))
		return 0;
	r->s.u.send.src = r->s.segs[0].ptr;
	r->s.state |= OMX_RS_ACK_COMPLETE;
	return 1;
}

static omx_return_t classify_and_copy(struct omx_endpoint *ep, union omx_request *r, int synchronous)
{
	uint32_t len = r->s.total_len;
	uint32_t threshold = same_host(r->s.partner) ? omx__shared_rndv_for(ep, r->s.partner, len) : omx__rndv_threshold(&ep->wp);
	/* The parameters the medium will be cut with (omx__send_sequenced): same-host mediums may be
	 * larger or smaller than the interface's (wire.c: 32 KiB fragments whatever the MTU). */
	uint32_t medium_max = omx__wp_for(ep, r->s.partner->mac)->medium_max;
	if (threshold > medium_max)
		threshold = medium_max;
	/* From our shared pool, a same-host receiver reads it with one memcpy: cheaper than the
	 * eager medium's two copies from OMX_SHARED_POOL_RNDV on. */
	if (synchronous || len > threshold ||
	    (len >= omx__cfg.shared_pool_rndv && same_host(r->s.partner) && omx__shared_pooled(r->s.segs, r->s.nseg))) {
		r->s.type = OMX_REQ_SEND_LARGE;
		return OMX_SUCCESS;
	}
	r->s.type = len <= OMX_TINY_MAX ? OMX_REQ_SEND_TINY : len <= OMX_SMALL_MAX ? OMX_REQ_SEND_SMALL : OMX_REQ_SEND_MEDIUM;
	if (len <= OMX_SMALL_MAX) {
		r->s.u.send.data = r->s.inline_data;
	} else if (send_without_copy(r, len)) {
		return OMX_SUCCESS;
	} else {
		r->s.u.send.data = omx__bounce_get(ep, len, &r->s.u.send.data_cap);
		if (!r->s.u.send.data)
			return OMX_NO_RESOURCES;
		if (r->s.nseg == 1) { /* copied after its first transmission (omx__send_sequenced) */
			r->s.u.send.src = r->s.segs[0].ptr;
			return OMX_SUCCESS;
		}
	}
	omx__copy_from_segs(r->s.segs, r->s.nseg, 0, r->s.u.send.data, len);
	return OMX_SUCCESS;
}

/* Total length of an eager send's segments (at most OMX_REQ_INLINE_SEGS: a provider's header and
 * payload), UINT32_MAX if they do not make one (too many, or a NULL buffer of non-zero length). */
static uint32_t eager_segs_len(const omx_seg_t *segs, uint32_t nseg)
{
	if (nseg > OMX_REQ_INLINE_SEGS || (nseg && !segs))
		return UINT32_MAX;
	uint32_t len = 0;
	for (uint32_t i = 0; i < nseg; i++) {
		if (segs[i].len > OMX_SMALL_MAX || (segs[i].len && !segs[i].ptr))
			return UINT32_MAX;
		len += segs[i].len;
	}
	return len;
}

/*
 * Same-host eager sends (TINY/SMALL to an endpoint of this host) leave before their request is
 * set up. Everything between the application's call and the frame reaching the receiver's ring
 * is on the critical path of a ping-pong, and the general path spent ~950 instructions there
 * (request, segments, classification, payload copy, packet clearing) of a message's ~3300
 * (bench/self_pingpong under callgrind). Here the frame is encoded from the caller's buffer
 * (its two segments gathered first when a provider puts a header before the payload, as the
 * libfabric one does for MPI) with a sequence number taken from the partner, and the request is
 * then given exactly the state the general path gives it (payload copy for retransmission,
 * non_acked, resend timer, early completion): the reliability layer cannot tell the two apart.
 * The request is allocated before the push unless a recycled one is at hand, so that a send that
 * went out is never reported as failed.
 *
 * SAME_HOST_SEND_NO_PASS: unlike the general path, these sends make no progress pass after the
 * frame is out while few of the partner's sends await their ack. In a ping-pong the pass (~400
 * instructions: the acks taken, both transports polled) sits between the send and the
 * application's next receive, and with the two processes near each other the partner's answer
 * was often there before that receive looked: the server of a same-host omx_perf found the next
 * message at its first look at the ring for 42% of them (docs/performance.md, stop 47). What the
 * pass did waits for the next one: every OMX_IDLE_PASS_EVERY-th test finding nothing, every wait,
 * the progress thread. A one-way stream, whose sender only tests its own completed sends, has
 * its acks taken by the pass once SEND_PASS_UNACKED sends await theirs (with no pass at all, a
 * 1 KiB stream ran 15% slower: its mediums' copies were freed only when the window filled).
 */
#define SEND_PASS_UNACKED 8u

static inline void pass_if_unacked(struct omx_endpoint *ep, struct omx_partner *p)
{
	if (sends_unacked(p) >= SEND_PASS_UNACKED)
		omx__progress_clocked(ep);
}

/* A same-host partner, connected, with nothing throttled before a new send and room in the
 * send window: what both same-host fast sends need (try_send_now's conditions). */
static inline __attribute__((always_inline)) int local_send_open(struct omx_partner *p)
{
	return p->next_send_seq != OMX_SEQ_UNCONNECTED && omx_list_empty(&p->throttled) && same_host(p) &&
	       sends_unacked(p) < send_window(p);
}

/* The message's length if it leaves by post_send_eager_local, UINT32_MAX otherwise. */
static uint32_t eager_local_len(struct omx_partner *p, const omx_seg_t *segs, uint32_t nseg, int synchronous)
{
	if (synchronous || p->is_self)
		return UINT32_MAX;
	uint32_t len = eager_segs_len(segs, nseg);
	if (len > OMX_SMALL_MAX || len > omx__cfg.shared_rndv_threshold)
		return UINT32_MAX;
	return local_send_open(p) ? len : UINT32_MAX;
}

static OMX_HOT_PATH omx_return_t post_send_eager_local(struct omx_endpoint *ep, struct omx_partner *p, const omx_seg_t *segs,
					  uint32_t nseg, uint32_t len, omx_endpoint_addr_t dest, uint64_t match,
					  void *context, omx_request_t *request)
{
	/* With a recycled request at hand (the steady state) the allocation waits until the frame
	 * is out: it cannot fail then. */
	union omx_request *r = ep->req_cache ? NULL : omx__req_alloc(ep, OMX_REQ_SEND_TINY);
	if (!r && !ep->req_cache) {
		omx__epunlock(&ep->lock);
		return omx__error(ep, OMX_NO_RESOURCES, "Allocating send request");
	}
	const void *payload = len ? segs[0].ptr : NULL; /* len: at most OMX_SMALL_MAX (eager_local_len) */
	uint8_t gathered[OMX_SMALL_MAX];
	if (nseg > 1) { /* a provider's header and payload (MPI over libfabric: every message); plain
			 * copies, not omx__copy_from_segs: ~100 instructions fewer for MPI's 24 bytes */
		uint32_t off = 0;
		for (uint32_t i = 0; i < nseg; off += segs[i].len, i++)
			if (segs[i].len)
				memcpy(gathered + off, segs[i].ptr, segs[i].len);
		payload = gathered;
	}
	int tiny = len <= OMX_TINY_MAX;
	uint16_t seq = p->next_send_seq;
	ep->tx_failed = 0;
	omx__send_eager_partner(ep, p, tiny ? OMX_PT_TINY : OMX_PT_SMALL, seq, match, payload, len,
				tiny ? OMX_C_SEND_TINY : OMX_C_SEND_SMALL);

	/* The request, as try_send_now and omx__send_sequenced leave it. */
	if (!r)
		r = omx__req_alloc(ep, OMX_REQ_SEND_TINY);
	(void)omx__req_set_segs(r, segs, nseg); /* at most OMX_REQ_INLINE_SEGS: cannot fail */
	r->s.type = tiny ? OMX_REQ_SEND_TINY : OMX_REQ_SEND_SMALL;
	fill_send_status(r, p, dest, match, context);
	r->s.u.send.data = r->s.inline_data;
	if (len)
		memcpy(r->s.inline_data, payload, len);
	if (!request)
		r->s.state |= OMX_RS_COLLECTED;
	else
		*request = r;
	track_sequenced(r); /* takes seq: next_send_seq did not move meanwhile */
	(void)omx__ep_clock(ep);
	tx_check(r);
	arm_resend(r);
	complete_early(ep, r);
	pass_if_unacked(ep, p); /* SAME_HOST_SEND_NO_PASS above */
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

/*
 * Same-host mediums holding a whole message (129 B up to a same-host fragment, 32 KiB in the
 * extended mode, and up to the rendezvous threshold) leave the same way: the general path spent
 * ~650 instructions a message more than a small send (classification, try_send_now, the
 * fragment loop's packets, the generic header encoder, the ring's look-up by MAC). The request
 * takes its bounce buffer first (a send that cannot keep a copy for retransmission fails
 * before anything left); the frame's header comes from the partner's template and its payload
 * straight from the caller's buffer (one segment) or from the bounce buffer the segments were
 * gathered into; the copy follows the transmission, as omx__send_sequenced does.
 */
/* The message's length if it leaves by post_send_medium_local, UINT32_MAX otherwise. */
static uint32_t medium_local_len(struct omx_endpoint *ep, struct omx_partner *p, const omx_seg_t *segs, uint32_t nseg,
				 int synchronous)
{
	if (synchronous || p->is_self || nseg == 0 || nseg > OMX_REQ_INLINE_SEGS || !segs)
		return UINT32_MAX;
	uint64_t len = 0;
	for (uint32_t i = 0; i < nseg; i++) {
		if (segs[i].len && !segs[i].ptr)
			return UINT32_MAX;
		len += segs[i].len;
	}
	const struct omx_wire_params *wp = &ep->wp_local;
	if (len <= OMX_SMALL_MAX || len > wp->medium_frag_max || len > wp->medium_max ||
	    (len >= omx__cfg.shared_pool_rndv && omx__shared_pooled(segs, nseg)) || !local_send_open(p) ||
	    !medium_room_for(p, len) || len > omx__shared_rndv_for(ep, p, (uint32_t)len))
		return UINT32_MAX;
	return (uint32_t)len;
}

static omx_return_t post_send_medium_local(struct omx_endpoint *ep, struct omx_partner *p, const omx_seg_t *segs,
					   uint32_t nseg, uint32_t len, omx_endpoint_addr_t dest, uint64_t match,
					   void *context, omx_request_t *request)
{
	union omx_request *r = omx__req_alloc(ep, OMX_REQ_SEND_MEDIUM);
	if (!r) {
		omx__epunlock(&ep->lock);
		return omx__error(ep, OMX_NO_RESOURCES, "Allocating send request");
	}
	(void)omx__req_set_segs(r, segs, nseg); /* at most OMX_REQ_INLINE_SEGS: cannot fail */
	fill_send_status(r, p, dest, match, context);
	const void *payload = segs[0].ptr;
	int acked = send_without_copy(r, len);
	if (!acked && !(r->s.u.send.data = omx__bounce_get(ep, len, &r->s.u.send.data_cap))) {
		omx__req_free(r);
		omx__epunlock(&ep->lock);
		return omx__error(ep, OMX_NO_RESOURCES, "Posting send");
	}
	if (nseg > 1) {
		omx__copy_from_segs(r->s.segs, r->s.nseg, 0, r->s.u.send.data, len);
		payload = r->s.u.send.data;
	}
	if (!request)
		r->s.state |= OMX_RS_COLLECTED;
	else
		*request = r;
	(void)omx__ep_clock(ep);
	track_sequenced(r);
	/* It fits one fragment (medium_local_len); were it refused, its retry (tx_check) or the
	 * resend timer sends it by the general path, from the copy. */
	ep->tx_failed = 0;
	(void)omx__send_medium_partner(ep, p, r->s.seqnum, match, payload, len);
	omx__shared_medium_sent(ep, p, len);
	if (nseg == 1 && !acked)
		memcpy(r->s.u.send.data, payload, len);
	tx_check(r);
	arm_resend(r);
	complete_early(ep, r);
	pass_if_unacked(ep, p); /* SAME_HOST_SEND_NO_PASS */
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

OMX_HOT_PATH omx_return_t omx__post_send(struct omx_endpoint *ep, const omx_seg_t *segs, uint32_t nseg, omx_endpoint_addr_t dest,
			    uint64_t match, void *context, omx_request_t *request, int synchronous)
{
	omx_return_t ret;
	omx_hop_mark(OMX_HOP_SEND);
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	struct omx_partner *p = omx__partner_from_addr(ep, &dest);
	if (!p) {
		omx__epunlock(&ep->lock);
		return omx__error(ep, OMX_BAD_ENDPOINT, "Sending to an invalid address (disconnected, or of another endpoint)");
	}
	uint32_t eager_len = eager_local_len(p, segs, nseg, synchronous);
	if (eager_len != UINT32_MAX)
		return post_send_eager_local(ep, p, segs, nseg, eager_len, dest, match, context, request);
	uint32_t medium_len = medium_local_len(ep, p, segs, nseg, synchronous);
	if (medium_len != UINT32_MAX)
		return post_send_medium_local(ep, p, segs, nseg, medium_len, dest, match, context, request);
	union omx_request *r = omx__req_alloc(ep, OMX_REQ_SEND_TINY);
	if (!r) {
		omx__epunlock(&ep->lock);
		return omx__error(ep, OMX_NO_RESOURCES, "Allocating send request");
	}
	ret = omx__req_set_segs(r, segs, nseg);
	fill_send_status(r, p, dest, match, context);
	if (ret == OMX_SUCCESS && p->is_self) {
		r->s.type = OMX_REQ_SEND_SELF;
	} else if (ret == OMX_SUCCESS) {
		ret = classify_and_copy(ep, r, synchronous);
	}
	if (ret != OMX_SUCCESS) {
		omx__req_free(r);
		omx__epunlock(&ep->lock);
		return omx__error(ep, ret, "Posting send");
	}
	if (!request)
		r->s.state |= OMX_RS_COLLECTED;
	else
		*request = r;

	(void)omx__ep_clock(ep); /* for the resend timer, not a whole tick stale */
	if (r->s.type == OMX_REQ_SEND_SELF) {
		omx__self_send(ep, r);
	} else if (p->next_send_seq == OMX_SEQ_UNCONNECTED) {
		omx__req_complete(r, OMX_REMOTE_ENDPOINT_UNREACHABLE);
	} else {
		if (!omx_list_empty(&p->throttled) || try_send_now(r) < 0) {
			r->s.state |= OMX_RS_NEED_SEQNUM;
			omx_list_add_tail(&p->throttled, &r->s.queue_elt);
		}
		complete_early(ep, r);
	}
	omx__progress_clocked(ep);
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

omx_return_t omx_isend(omx_endpoint_t ep, void *buffer, size_t length, omx_endpoint_addr_t dest, uint64_t match_info,
		       void *context, omx_request_t *request)
{
	if (length > UINT32_MAX)
		return omx__error(ep, OMX_SEGMENTS_BAD_COUNT, "Sending more than 4 GiB");
	omx_seg_t seg = { buffer, (uint32_t)length };
	return omx__post_send(ep, &seg, 1, dest, match_info, context, request, 0);
}

omx_return_t omx_issend(omx_endpoint_t ep, void *buffer, size_t length, omx_endpoint_addr_t dest, uint64_t match_info,
			void *context, omx_request_t *request)
{
	if (length > UINT32_MAX)
		return omx__error(ep, OMX_SEGMENTS_BAD_COUNT, "Sending more than 4 GiB");
	omx_seg_t seg = { buffer, (uint32_t)length };
	return omx__post_send(ep, &seg, 1, dest, match_info, context, request, 1);
}

omx_return_t omx_isendv(omx_endpoint_t ep, omx_seg_t *segs, uint32_t nseg, omx_endpoint_addr_t dest,
			uint64_t match_info, void *context, omx_request_t *request)
{
	return omx__post_send(ep, segs, nseg, dest, match_info, context, request, 0);
}

omx_return_t omx_issendv(omx_endpoint_t ep, omx_seg_t *segs, uint32_t nseg, omx_endpoint_addr_t dest,
			 uint64_t match_info, void *context, omx_request_t *request)
{
	return omx__post_send(ep, segs, nseg, dest, match_info, context, request, 1);
}
