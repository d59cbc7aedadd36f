/*
 * connect.c - the connection handshake (wire.md 8), NACK_LIB handling (wire.md 10), and the
 * address calls: connect, iconnect, disconnect, decompose, address contexts.
 *
 * omx extension: each CONNECT carries the sender's wire mode and frame MTU in its unused pad2
 * field; a mismatch fails the connect with a clear message instead of silently misplacing
 * fragments (the reference had no check, wire.md 16). Peers that do not send it (reference
 * Open-MX) are accepted as before.
 */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "core/counters.h"

static const char *mode_name(enum omx_wire_mode m)
{
	return m == OMX_WIRE_COMPAT ? "MX-compatible" : "extended";
}

static void fill_connect(struct omx_endpoint *ep, struct omx_partner *p, struct omx_pkt *pkt)
{
	memset(pkt, 0, sizeof(*pkt));
	memcpy(pkt->dst_mac, p->mac, 6);
	pkt->peer_index = omx__partner_reverse_index(p);
	pkt->ptype = OMX_PT_CONNECT;
	pkt->u.connect.dst_endpoint = p->endpoint_index;
	pkt->u.connect.src_endpoint = (uint8_t)ep->endpoint_index;
	pkt->u.connect.length = 16;
	pkt->u.connect.src_dst_peer_index = (uint16_t)p->peer_index;
	pkt->u.connect.ext_present = 1;
	pkt->u.connect.ext_mode = ep->wp.mode;
	pkt->u.connect.ext_mtu = (uint16_t)ep->wp.mtu;
}

static void send_connect_request(struct omx_endpoint *ep, union omx_request *r)
{
	struct omx_partner *p = r->s.partner;
	struct omx_pkt pkt;
	fill_connect(ep, p, &pkt);
	pkt.u.connect.src_session_id = ep->session;
	pkt.u.connect.app_key = r->s.u.connect.key;
	pkt.u.connect.target_recv_seqnum_start = p->next_match_seq;
	pkt.u.connect.connect_seqnum = r->s.u.connect.connect_seqnum;
	ep->tx_failed = 0;
	omx__send_frame(ep, &pkt, OMX_C_SEND_CONNECT_REQUEST);
	uint64_t now = omx_now_ns();
	omx_list_del(&r->s.timer_elt);
	if (ep->tx_failed && !(r->s.state & OMX_RS_TX_FAILED)) {
		/* Not transmitted (a full queue here, send.c "Transmissions that failed"): again in a
		 * millisecond, first in line, not counted against the request's resends. Refused again,
		 * it waits for the timer as usual (and that resend counts), so that a queue that stays
		 * full still ends in the usual budget. */
		ep->tx_failed = 0;
		r->s.state |= OMX_RS_TX_FAILED;
		uint64_t back = omx__cfg.resend_delay_ns > OMX_TX_RETRY_MIN_NS ? omx__cfg.resend_delay_ns - OMX_TX_RETRY_MIN_NS : 0;
		r->s.last_send_ns = now > back ? now - back : 0;
		omx_list_add_head(&ep->connect_list, &r->s.timer_elt);
		return;
	}
	r->s.state &= ~OMX_RS_TX_FAILED;
	r->s.last_send_ns = now;
	omx_list_add_tail(&ep->connect_list, &r->s.timer_elt);
}

/* ---- liveness of partners owing NOTIFYs or medium fragments ---- */

/*
 * A large send is acked when its RNDV arrives, then waits for the NOTIFY for as long as the
 * receiver takes to match it: no resend timer runs, and a receiver that died meanwhile left its
 * sender waiting for ever (a vanished host sends no NACK). Likewise a medium of which some
 * fragments arrived: its sender retransmits the others, unless it died, and then the receive
 * waited for ever. So a remote partner that owes NOTIFYs or fragments and has sent us nothing for
 * two resend delays gets a probe: a connect request in our current session, the handshake
 * mx_connect makes to a connected peer, which a live endpoint answers without changing its state
 * (with the key of our last connect to it; a wrong or unknown key is answered too, refused, and an
 * answer is all we need). A closed endpoint is NACKed by its host's
 * responder, a restarted one answers with its new session (the partner is then reset as for any
 * new instance), and a vanished host does not answer: after the resend budget (OMX_RESENDS_MAX x
 * OMX_RESEND_DELAY_MS) the partner is reset as unreachable. Either way the waiting sends fail
 * with that status (partial receives too). Same-host partners owing NOTIFYs are watched through
 * their rings instead (shared.c).
 */
/* A connect request that got no answer or a NACK ends with `status`; a failed probe then fails
 * everything waiting for its partner. */
static void connect_failed(union omx_request *r, omx_return_t status)
{
	struct omx_partner *p = r->s.partner;
	int probe = r->s.u.connect.probe;
	omx_list_del(&r->s.timer_elt);
	omx_list_del(&r->s.queue_elt);
	omx__req_complete(r, status);
	omx__req_clear(r, OMX_RS_NEED_REPLY); /* frees an uncollected probe */
	if (!probe)
		return;
	p->probe = NULL;
	omx__verbose("partner %012llx endpoint %u owes NOTIFYs or fragments and %s: failing what waits for it\n",
		     (unsigned long long)p->nic_id, p->endpoint_index,
		     status == OMX_REMOTE_ENDPOINT_UNREACHABLE ? "does not answer" : "refused our probe");
	omx__partner_reset(p, status, OMX_RESET_NEW_SESNUM);
}

static omx_return_t start_connect(struct omx_endpoint *ep, uint64_t nic_id, uint32_t endpoint_id, uint32_t key,
				  uint64_t match, void *context, union omx_request **out, int internal);

static void probe(struct omx_endpoint *ep, struct omx_partner *p)
{
	union omx_request *r;
	if (start_connect(ep, p->nic_id, p->endpoint_index, p->app_key, 0, NULL, &r, 1) != OMX_SUCCESS)
		return; /* no request left: tried again at the next look */
	/* Nobody collects it: freed when it completes. */
	r->s.state |= OMX_RS_COLLECTED;
	omx_list_del(&r->s.done_elt);
	if (r->s.state & OMX_RS_DONE) {
		omx__req_maybe_free(r);
		return;
	}
	r->s.u.connect.probe = 1;
	p->probe = r;
}

void omx__notify_watch(struct omx_endpoint *ep, uint64_t now)
{
	uint64_t quiet = 2 * omx__cfg.resend_delay_ns;
	int owed = 0;
	ep->next_notify_watch = now + omx__cfg.resend_delay_ns / 2;
	for (uint32_t i = 0; i < omx__g.peer_count; i++) {
		struct omx_peer *peer = omx__peer(i);
		if (!peer || !ep->partners[i])
			continue;
		for (uint32_t e = 0; e < omx__cfg.endpoint_max; e++) {
			struct omx_partner *p = ep->partners[i][e];
			if (!p || p->is_self || (omx_list_empty(&p->need_notify) && omx_list_empty(&p->partial_recvs)))
				continue;
			owed = 1;
			/* same-host partners: shared.c's check (tests over the in-memory hub have none) */
			if ((peer->local_board >= 0 && ep->local) || p->probe ||
			    (p->true_session == OMX_SESSION_UNKNOWN && p->back_session == OMX_SESSION_UNKNOWN) ||
			    now - p->last_heard_ns < quiet)
				continue;
			omx__count(ep->board, OMX_C_X_NOTIFY_PROBES);
			probe(ep, p);
		}
	}
	ep->owed_watch = owed;
}

void omx__connect_resend_due(struct omx_endpoint *ep, uint64_t now)
{
	union omx_request *r;
	while ((r = (union omx_request *)omx_list_first(&ep->connect_list, omx_req_t, timer_elt))) {
		if (now < r->s.last_send_ns + omx__cfg.resend_delay_ns)
			break;
		if (r->s.resends >= r->s.resends_max) {
			connect_failed(r, OMX_REMOTE_ENDPOINT_UNREACHABLE);
			continue;
		}
		if (!(r->s.state & OMX_RS_TX_FAILED))
			r->s.resends++;
		omx__count(ep->board, OMX_C_X_RETRANSMIT_CONNECT);
		send_connect_request(ep, r);
	}
}

/* A connect/reply from a new instance of a known peer: forget the old one first. */
static void check_new_instance(struct omx_partner *p, uint32_t session, int recv_mode)
{
	if (p->back_session != OMX_SESSION_UNKNOWN && p->back_session != session) {
		omx__verbose("partner %012llx endpoint %u restarted (session %08x -> %08x)\n",
			     (unsigned long long)p->nic_id, p->endpoint_index, p->back_session, session);
		omx__partner_reset(p, OMX_REMOTE_ENDPOINT_UNREACHABLE, recv_mode);
	}
}

static int wire_mismatch(struct omx_endpoint *ep, const struct omx_pkt_connect *c)
{
	return c->ext_present && (c->ext_mode != ep->wp.mode || c->ext_mtu != ep->wp.mtu);
}

static void handle_request(struct omx_endpoint *ep, struct omx_partner *p, const struct omx_pkt *pkt)
{
	const struct omx_pkt_connect *c = &pkt->u.connect;
	uint8_t status = c->app_key == ep->key ? OMX_CONNECT_STATUS_SUCCESS : OMX_CONNECT_STATUS_BAD_KEY;
	if (status == OMX_CONNECT_STATUS_BAD_KEY)
		omx__count(ep->board, OMX_C_X_CONNECT_BAD_KEY);
	omx__count(ep->board, OMX_C_RECV_CONNECT_REQUEST);
	if (wire_mismatch(ep, c)) {
		status = OMX_CONNECT_STATUS_WIRE_MISMATCH;
		/* Said once per endpoint and then every 1000th time: a misconfigured or hostile peer
		 * retransmitting must not flood the log. */
		if (ep->mismatch_warnings++ % 1000 == 0)
			omx__warn("refusing connection from %012llx endpoint %u: wire mode mismatch (local %s MTU %u, remote %s MTU %u)\n",
			  (unsigned long long)p->nic_id, c->src_endpoint, mode_name(ep->wp.mode), ep->wp.mtu,
			  mode_name(c->ext_mode), c->ext_mtu);
	} else {
		if (p->back_session != c->src_session_id) {
			if (p->back_session != OMX_SESSION_UNKNOWN)
				check_new_instance(p, c->src_session_id, OMX_RESET_SAME_SESNUM);
			p->next_match_seq = omx_seq_first(omx_seq_sesnum(p->next_match_seq));
			p->next_complete_seq = p->last_acked_recv_seq = p->next_match_seq;
		}
		if (p->true_session != c->src_session_id) {
			p->next_send_seq = p->next_acked_seq = c->target_recv_seqnum_start;
			omx__release_throttled(p);
		}
		p->true_session = p->back_session = c->src_session_id;
	}
	struct omx_pkt r;
	fill_connect(ep, p, &r);
	r.peer_index = c->src_dst_peer_index;
	r.u.connect.src_session_id = c->src_session_id;
	r.u.connect.target_session_id = ep->session;
	r.u.connect.target_recv_seqnum_start = p->next_match_seq;
	r.u.connect.is_reply = 1;
	r.u.connect.connect_seqnum = c->connect_seqnum;
	r.u.connect.status_code = status;
	/* A reply refused here (a full queue: send.c, "Transmissions that failed") would leave the
	 * requester to its resend timer; the reply keeps no state to retry later, so it is tried
	 * again at once, a few times. */
	for (int tries = 0; tries < 4; tries++) {
		ep->tx_failed = 0;
		omx__send_frame(ep, &r, OMX_C_SEND_CONNECT_REPLY);
		if (!ep->tx_failed)
			break;
	}
	ep->tx_failed = 0;
}

static void handle_reply(struct omx_endpoint *ep, struct omx_partner *p, const struct omx_pkt *pkt)
{
	const struct omx_pkt_connect *c = &pkt->u.connect;
	omx__count(ep->board, OMX_C_RECV_CONNECT_REPLY);
	if (c->src_session_id != ep->session)
		return;
	union omx_request *r = NULL;
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &p->connects) {
		union omx_request *q = (union omx_request *)omx_container_of(pos, omx_req_t, queue_elt);
		if (q->s.u.connect.connect_seqnum == c->connect_seqnum) {
			r = q;
			break;
		}
	}
	if (!r || (c->status_code != OMX_CONNECT_STATUS_SUCCESS && c->status_code != OMX_CONNECT_STATUS_BAD_KEY &&
		   c->status_code != OMX_CONNECT_STATUS_WIRE_MISMATCH))
		return;
	omx_list_del(&r->s.queue_elt);
	omx_list_del(&r->s.timer_elt);
	omx_return_t code = OMX_SUCCESS;
	if (c->status_code == OMX_CONNECT_STATUS_BAD_KEY) {
		code = OMX_REMOTE_ENDPOINT_BAD_CONNECTION_KEY;
	} else if (c->status_code == OMX_CONNECT_STATUS_WIRE_MISMATCH || wire_mismatch(ep, c)) {
		omx__warn("connection to %012llx endpoint %u refused: wire mode mismatch (local %s MTU %u, remote %s MTU %u)\n",
			  (unsigned long long)p->nic_id, p->endpoint_index, mode_name(ep->wp.mode), ep->wp.mtu,
			  c->ext_present ? mode_name(c->ext_mode) : "?", c->ext_mtu);
		code = OMX_BAD_LIB_ABI;
	} else {
		check_new_instance(p, c->target_session_id, OMX_RESET_KEEP_RECV_SEQ);
		if (p->true_session != c->target_session_id) {
			p->next_send_seq = p->next_acked_seq = c->target_recv_seqnum_start;
			omx__release_throttled(p);
		}
		p->true_session = c->target_session_id;
		if (p->back_session == OMX_SESSION_UNKNOWN)
			p->back_session = c->target_session_id;
		p->wire_mtu = c->ext_present ? c->ext_mtu : 0;
	}
	omx__partner_to_addr(p, &r->s.status.addr);
	if (r->s.u.connect.probe) /* answered: alive (a new instance was reset above) */
		p->probe = NULL;
	else if (code == OMX_SUCCESS)
		p->app_key = r->s.u.connect.key;
	omx__req_complete(r, code);
	omx__req_clear(r, OMX_RS_NEED_REPLY);
}

void omx__handle_connect(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	int idx = omx__peer_by_mac(pkt->src_mac);
	if (idx < 0) {
		omx__count(ep->board, OMX_C_DROP_BAD_PEER_ADDR);
		return;
	}
	if (pkt->u.connect.dst_endpoint != ep->endpoint_index) {
		omx__count(ep->board, OMX_C_DROP_BAD_ENDPOINT);
		return;
	}
	/* The sender told us our index in its table. */
	omx__g.peers[idx].reverse_index[ep->board_index] = pkt->u.connect.src_dst_peer_index;
	struct omx_partner *p = omx__partner_get(ep, (uint32_t)idx, pkt->u.connect.src_endpoint);
	if (!p)
		return;
	p->last_heard_ns = ep->now_ns;
	if (pkt->u.connect.is_reply)
		handle_reply(ep, p, pkt);
	else if (ep->refusing)
		omx__count(ep->board, OMX_C_X_REFUSED_CLOSING); /* retried; answered by the responder later */
	else
		handle_request(ep, p, pkt);
}

/* ---- NACK_LIB ---- */

static omx_return_t nack_status(uint8_t type)
{
	switch (type) {
	case OMX_NACK_BAD_ENDPT: return OMX_REMOTE_ENDPOINT_BAD_ID;
	case OMX_NACK_ENDPT_CLOSED: return OMX_REMOTE_ENDPOINT_CLOSED;
	case OMX_NACK_BAD_SESSION: return OMX_REMOTE_ENDPOINT_BAD_SESSION;
	default: return OMX_SUCCESS;
	}
}

void omx__handle_nack_lib(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	const struct omx_pkt_nack_lib *n = &pkt->u.nack_lib;
	struct omx_peer *peer = omx__peer(pkt->peer_index);
	int idx = (int)pkt->peer_index;
	omx__count(ep->board, OMX_C_RECV_NACK_LIB);
	if (!peer || !omx_wire_mac_eq(peer->mac, pkt->src_mac)) {
		idx = pkt->peer_index == OMX_PEER_INDEX_UNKNOWN ? omx__peer_by_mac(pkt->src_mac) : -1;
		if (idx < 0) {
			omx__count(ep->board, OMX_C_DROP_BAD_PEER_INDEX);
			return;
		}
	}
	omx_return_t status = nack_status(n->nack_type);
	if (n->dst_endpoint != ep->endpoint_index || status == OMX_SUCCESS)
		return;
	struct omx_partner *p = omx__partner_get(ep, (uint32_t)idx, n->src_endpoint);
	if (!p)
		return;
	struct omx_list *pos, *tmp;
	if (p->next_send_seq != OMX_SEQ_UNCONNECTED && omx_seq_sesnum(n->lib_seqnum) == omx_seq_sesnum(p->next_send_seq)) {
		omx_list_for_each_safe(pos, tmp, &p->non_acked) {
			union omx_request *r = (union omx_request *)omx_container_of(pos, omx_req_t, queue_elt);
			if (r->s.seqnum != n->lib_seqnum)
				continue;
			omx_list_del(&r->s.queue_elt);
			omx_list_del(&r->s.timer_elt);
			omx__medium_acked(p, r);
			if (r->s.type == OMX_REQ_SEND_LARGE)
				omx__region_release(ep, r);
			if (r->s.state & OMX_RS_DONE)
				omx__error(ep, status, "Send completed early was rejected by the peer");
			else
				omx__req_complete(r, status);
			omx__req_clear(r, OMX_RS_NEED_ACK | OMX_RS_NEED_REPLY);
			return;
		}
	}
	union omx_request *c = (union omx_request *)omx_list_first(&p->connects, omx_req_t, queue_elt);
	if (c)
		connect_failed(c, status);
}

/* ---- API ---- */

static omx_return_t start_connect(struct omx_endpoint *ep, uint64_t nic_id, uint32_t endpoint_id, uint32_t key,
				  uint64_t match, void *context, union omx_request **out, int internal)
{
	int idx = omx__peer_by_nic_id(nic_id);
	if (idx < 0)
		return OMX_NIC_ID_NOT_FOUND;
	union omx_request *r = omx__req_alloc(ep, OMX_REQ_CONNECT);
	if (!r)
		return OMX_NO_RESOURCES;
	if (internal)
		r->s.state |= OMX_RS_INTERNAL;
	r->s.status.match_info = match;
	r->s.status.context = context;
	r->s.u.connect.key = key;
	r->s.u.connect.nic_id = nic_id;
	r->s.u.connect.endpoint_index = endpoint_id;
	*out = r;
	struct omx_partner *p = endpoint_id <= 255 ? omx__partner_get(ep, (uint32_t)idx, (uint8_t)endpoint_id) : NULL;
	if (!p) {
		omx__req_complete(r, OMX_REMOTE_ENDPOINT_BAD_ID);
		return OMX_SUCCESS;
	}
	r->s.partner = p;
	if (p->is_self) {
		omx__partner_to_addr(p, &r->s.status.addr);
		omx__req_complete(r, OMX_SUCCESS);
		return OMX_SUCCESS;
	}
	r->s.u.connect.connect_seqnum = ++p->connect_seqnum;
	r->s.state |= OMX_RS_NEED_REPLY;
	omx_list_add_tail(&p->connects, &r->s.queue_elt);
	send_connect_request(ep, r);
	return OMX_SUCCESS;
}

omx_return_t omx_iconnect(omx_endpoint_t ep, uint64_t nic_id, uint32_t endpoint_id, uint32_t key, uint64_t match_info,
			  void *context, omx_request_t *request)
{
	union omx_request *r;
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	omx_return_t ret = start_connect(ep, nic_id, endpoint_id, key, match_info, context, &r, 0);
	if (ret == OMX_SUCCESS) {
		if (request)
			*request = r;
		else {
			r->s.state |= OMX_RS_COLLECTED;
			omx_list_del(&r->s.done_elt);
			omx__req_maybe_free(r);
		}
		omx__progress(ep);
	}
	omx__epunlock(&ep->lock);
	if (ret != OMX_SUCCESS)
		return omx__error(ep, ret, "Connecting to %012llx endpoint %u", (unsigned long long)nic_id, endpoint_id);
	return OMX_SUCCESS;
}

static int cond_connect_done(struct omx_endpoint *ep, void *arg)
{
	(void)ep;
	return (((union omx_request *)arg)->s.state & OMX_RS_DONE) != 0;
}

omx_return_t omx_connect(omx_endpoint_t ep, uint64_t nic_id, uint32_t endpoint_id, uint32_t key, uint32_t timeout,
			 omx_endpoint_addr_t *addr)
{
	union omx_request *r;
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	omx_return_t ret = start_connect(ep, nic_id, endpoint_id, key, 0, NULL, &r, 1);
	if (ret != OMX_SUCCESS) {
		omx__epunlock(&ep->lock);
		return omx__error(ep, ret, "Connecting to %012llx endpoint %u", (unsigned long long)nic_id, endpoint_id);
	}
	omx__progress(ep);
	if (omx__wait(ep, cond_connect_done, r, timeout)) {
		ret = r->s.status.code;
		if (ret == OMX_SUCCESS)
			*addr = r->s.status.addr;
		else if (ret == OMX_REMOTE_ENDPOINT_UNREACHABLE)
			ret = OMX_TIMEOUT;
	} else {
		ret = OMX_TIMEOUT;
		omx_list_del(&r->s.queue_elt);
		omx_list_del(&r->s.timer_elt);
		r->s.state &= ~OMX_RS_NEED_REPLY;
		r->s.state |= OMX_RS_DONE;
	}
	omx_list_del(&r->s.done_elt);
	r->s.state |= OMX_RS_COLLECTED;
	omx__req_maybe_free(r);
	omx__epunlock(&ep->lock);
	if (ret != OMX_SUCCESS)
		return omx__error(ep, ret, "Connecting to %012llx endpoint %u", (unsigned long long)nic_id, endpoint_id);
	return OMX_SUCCESS;
}

omx_return_t omx_disconnect(omx_endpoint_t ep, omx_endpoint_addr_t addr)
{
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	omx__progress(ep);
	struct omx_partner *p = omx__partner_from_addr(ep, &addr);
	if (p && !p->is_self) {
		/* What we received from it is acknowledged first, as at close: the peer must not
		 * retransmit (or wait on) messages we already have. */
		if (p->ack_state) {
			p->ack_state = 2;
			omx__send_acks(ep, UINT64_MAX);
		}
		/* Records are kept (not freed as in the reference): stale copies of the address are
		 * recognised by their generation instead of touching freed memory. */
		p->gen++;
		p->user_context = NULL;
		omx__partner_reset(p, OMX_REMOTE_ENDPOINT_UNREACHABLE, OMX_RESET_NEW_SESNUM);
	}
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

static struct omx_partner *addr_partner(const omx_endpoint_addr_t *a)
{
	struct omx_partner *p = (struct omx_partner *)(uintptr_t)a->data[0];
	return p && p->magic == OMX_PARTNER_MAGIC ? p : NULL;
}

omx_return_t omx_decompose_endpoint_addr(omx_endpoint_addr_t endpoint_addr, uint64_t *nic_id, uint32_t *endpoint_id)
{
	struct omx_partner *p = addr_partner(&endpoint_addr);
	*nic_id = p ? p->nic_id : 0;
	*endpoint_id = p ? p->endpoint_index : 0;
	return OMX_SUCCESS;
}

omx_return_t omx_decompose_endpoint_addr_with_session(omx_endpoint_addr_t endpoint_addr, uint64_t *nic_id,
						      uint32_t *endpoint_id, uint32_t *session_id)
{
	omx_decompose_endpoint_addr(endpoint_addr, nic_id, endpoint_id);
	*session_id = (uint32_t)(endpoint_addr.data[1] >> 32);
	return OMX_SUCCESS;
}

omx_return_t omx_set_endpoint_addr_context(omx_endpoint_addr_t endpoint_addr, void *context)
{
	struct omx_partner *p = addr_partner(&endpoint_addr);
	if (p)
		p->user_context = context;
	return OMX_SUCCESS;
}

omx_return_t omx_get_endpoint_addr_context(omx_endpoint_addr_t endpoint_addr, void **context)
{
	struct omx_partner *p = addr_partner(&endpoint_addr);
	*context = p ? p->user_context : NULL;
	return OMX_SUCCESS;
}
