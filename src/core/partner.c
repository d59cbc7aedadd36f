/*
 * partner.c - per-(peer board, remote endpoint) protocol state and endpoint addresses.
 *
 * Address layout (opaque to applications, mx-api.md 3.2): data[0] = partner record pointer (for
 * the calls that take no endpoint: decompose, address contexts); data[1] = session id in the high
 * 32 bits (bytes 12..15 on x86-64, as in the reference), then peer index (16 bits), endpoint
 * index (8) and generation (8). Calls with an endpoint look the record up in that endpoint's own
 * table by (peer, endpoint) and compare, so a garbage or foreign address is rejected without
 * dereferencing it, and the generation rejects addresses made stale by omx_disconnect.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "hot_path.h"

static void partner_init_state(struct omx_partner *p)
{
	p->true_session = OMX_SESSION_UNKNOWN;
	p->back_session = OMX_SESSION_UNKNOWN;
	p->next_send_seq = OMX_SEQ_UNCONNECTED;
	p->next_acked_seq = OMX_SEQ_UNCONNECTED;
	p->next_match_seq = omx_seq_first(0);
	p->next_complete_seq = p->next_match_seq;
	p->last_acked_recv_seq = p->next_match_seq;
	p->last_send_acknum = 0;
	p->last_recv_acknum = 0;
	memset(&p->copy_choice, 0, sizeof(p->copy_choice)); /* timed against the process now gone */
}

struct omx_partner *omx__partner_get(struct omx_endpoint *ep, uint32_t peer_index, uint8_t endpoint_index)
{
	struct omx_peer *peer = omx__peer(peer_index);
	if (!peer || endpoint_index >= omx__cfg.endpoint_max)
		return NULL;
	if (!ep->partners[peer_index]) {
		ep->partners[peer_index] = calloc(omx__cfg.endpoint_max, sizeof(struct omx_partner *));
		if (!ep->partners[peer_index])
			return NULL;
	}
	struct omx_partner *p = ep->partners[peer_index][endpoint_index];
	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->magic = OMX_PARTNER_MAGIC;
	p->ep = ep;
	p->peer_index = peer_index;
	p->endpoint_index = endpoint_index;
	memcpy(p->mac, peer->mac, 6);
	p->nic_id = peer->nic_id;
	p->is_self = (peer->local_board == (int)ep->board_index && endpoint_index == ep->endpoint_index);
	omx_list_init(&p->non_acked);
	omx_list_init(&p->throttled);
	omx_list_init(&p->connects);
	omx_list_init(&p->need_notify);
	omx_list_init(&p->partial_recvs);
	omx_list_init(&p->early);
	omx_list_init(&p->ack_elt);
	omx_list_init(&p->ack_deferred_elt);
	omx_list_init(&p->refused_elt);
	omx_list_init(&p->early_elt);
	partner_init_state(p);
	ep->partners[peer_index][endpoint_index] = p;
	return p;
}

void omx__partner_to_addr(const struct omx_partner *p, omx_endpoint_addr_t *addr)
{
	uint32_t session = p->is_self ? p->ep->session : p->true_session;
	addr->data[0] = (uint64_t)(uintptr_t)p;
	addr->data[1] = ((uint64_t)session << 32) | ((uint64_t)(p->peer_index & 0xFFFF) << 16) |
			((uint64_t)p->endpoint_index << 8) | (p->gen & 0xFF);
}

OMX_HOT_PATH struct omx_partner *omx__partner_from_addr(struct omx_endpoint *ep, const omx_endpoint_addr_t *addr)
{
	uint32_t peer = (uint32_t)(addr->data[1] >> 16) & 0xFFFF;
	uint32_t e = (uint32_t)(addr->data[1] >> 8) & 0xFF;
	if (peer >= omx__g.peer_count || e >= omx__cfg.endpoint_max || !ep->partners[peer])
		return NULL;
	struct omx_partner *p = ep->partners[peer][e];
	if (!p || (uintptr_t)p != (uintptr_t)addr->data[0] || (p->gen & 0xFF) != (addr->data[1] & 0xFF))
		return NULL;
	return p;
}

uint16_t omx__partner_reverse_index(const struct omx_partner *p)
{
	struct omx_peer *peer = omx__peer(p->peer_index);
	return peer ? peer->reverse_index[p->ep->board_index] : OMX_PEER_INDEX_UNKNOWN;
}

/* Fail every request tied to the partner with `status` and reset its sequence state. With
 * new_sesnum the receive direction moves to the next session number so stragglers of the old
 * logical connection are dropped (wire.md 7.4, 8.3). */
void omx__partner_reset(struct omx_partner *p, omx_return_t status, int recv_mode)
{
	struct omx_endpoint *ep = p->ep;
	struct omx_list *pos, *tmp;
	union omx_request *r;

	/* First: running pulls end (their NOTIFYs are queued on non_acked and dropped below). */
	omx__pulls_abort_partner(ep, p, status);
	omx_list_for_each_safe(pos, tmp, &p->non_acked) {
		r = (union omx_request *)omx_container_of(pos, omx_req_t, queue_elt);
		omx_list_del(&r->s.queue_elt);
		omx_list_del(&r->s.timer_elt);
		if (!(r->s.state & OMX_RS_DONE))
			omx__req_complete(r, status);
		else if (r->s.type != OMX_REQ_SEND_LARGE && r->s.type != OMX_REQ_RECV_LARGE)
			omx__error(ep, status, "Send to a partner that became unreachable");
		if (r->s.type == OMX_REQ_SEND_LARGE)
			omx__region_release(ep, r);
		omx__req_clear(r, OMX_RS_NEED_ACK | OMX_RS_NEED_REPLY | OMX_RS_NOTIFY_PENDING);
	}
	omx_list_for_each_safe(pos, tmp, &p->need_notify) {
		r = (union omx_request *)omx_container_of(pos, omx_req_t, queue_elt);
		omx_list_del(&r->s.queue_elt);
		omx__region_release(ep, r);
		if (!(r->s.state & OMX_RS_DONE))
			omx__req_complete(r, status);
		omx__req_clear(r, OMX_RS_NEED_REPLY);
	}
	omx_list_for_each_safe(pos, tmp, &p->throttled) {
		r = (union omx_request *)omx_container_of(pos, omx_req_t, queue_elt);
		omx_list_del(&r->s.queue_elt);
		if (!(r->s.state & OMX_RS_DONE))
			omx__req_complete(r, status);
		omx__req_clear(r, OMX_RS_NEED_SEQNUM);
	}
	omx_list_for_each_safe(pos, tmp, &p->connects) {
		r = (union omx_request *)omx_container_of(pos, omx_req_t, queue_elt);
		omx_list_del(&r->s.queue_elt);
		omx_list_del(&r->s.timer_elt);
		omx__req_complete(r, status);
		omx__req_clear(r, OMX_RS_NEED_REPLY);
	}
	omx_list_for_each_safe(pos, tmp, &p->partial_recvs) {
		r = (union omx_request *)omx_container_of(pos, omx_req_t, queue_elt);
		omx_list_del(&r->s.queue_elt);
		ep->mediums_partial--;
		if (r->s.state & OMX_RS_UNEXPECTED) {
			omx_list_del(&r->s.done_elt); /* unexpected list link */
			omx__req_free(r);
			continue;
		}
		omx__req_complete(r, status);
		omx__req_clear(r, OMX_RS_RECV_PARTIAL);
	}
	/* Unexpected messages from this partner are dropped. */
	omx_list_for_each_safe(pos, tmp, &ep->unexp) {
		r = (union omx_request *)omx_container_of(pos, omx_req_t, done_elt);
		if (r->s.partner != p)
			continue;
		omx_list_del(&r->s.done_elt);
		omx__req_free(r);
	}
	/* A reserved one stays, for its taker to learn what became of it (omx_unexp_reserve.h): the
	 * handler's caller has a record of it and would wait for it for ever. */
	omx_list_for_each_safe(pos, tmp, &ep->reserved) {
		r = (union omx_request *)omx_container_of(pos, omx_req_t, done_elt);
		if (r->s.partner == p && !r->s.u.recv.reserve_fail)
			r->s.u.recv.reserve_fail = status != OMX_SUCCESS ? status : OMX_MESSAGE_ABORTED;
	}
	/* Early frames are dropped. */
	omx__early_drop_all(p);
	p->early_count = 0;
	omx_list_del(&p->ack_elt);
	p->ack_state = 0;
	omx_list_del(&p->ack_deferred_elt); /* of the old session: its sends are gone */
	omx_list_del(&p->refused_elt);
	p->unexp_refused = 0;
	p->medium_unacked = 0;
	p->resend_ask = 0;

	uint16_t ses = omx_seq_sesnum(p->next_match_seq);
	if (recv_mode == OMX_RESET_NEW_SESNUM)
		ses = (uint16_t)((ses + OMX_SESNUM_ONE) & OMX_SESNUM_MASK);
	p->next_send_seq = OMX_SEQ_UNCONNECTED;
	p->next_acked_seq = OMX_SEQ_UNCONNECTED;
	if (recv_mode != OMX_RESET_KEEP_RECV_SEQ)
		p->next_match_seq = omx_seq_first(ses);
	p->next_complete_seq = p->next_match_seq;
	p->last_acked_recv_seq = p->next_match_seq;
	p->true_session = OMX_SESSION_UNKNOWN;
	p->back_session = OMX_SESSION_UNKNOWN;
	p->last_send_acknum = 0;
	p->last_recv_acknum = 0;
	p->probe = NULL; /* completed with the other connects above */
}
