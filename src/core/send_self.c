/*
 * send_self.c - sends to our own endpoint (behaviour.md 6.1): no frame, the message matched
 * against our posted receives and copied straight from the send's segments (or held by an
 * unexpected receive until one is posted); deferred while a handler runs.
 */
#include <stdlib.h>

#include "core/core.h"

static void self_deliver(struct omx_endpoint *ep, union omx_request *r)
{
	union omx_request *recv;
	uint32_t len = r->s.total_len;
	if (!omx__match_posted(ep, r->s.status.match_info, &recv)) {
		const void *data = r->s.nseg == 1 ? r->s.segs[0].ptr : NULL;
		if (omx__run_unexp_handler(ep, ep->self, r->s.status.match_info, len, data, 0) == OMX__HANDLER_FINISHED) {
			omx__req_complete(r, OMX_SUCCESS);
			return;
		}
		if (!omx__match_posted(ep, r->s.status.match_info, &recv)) {
			/* Stored as unexpected; the send completes when a receive matches it. */
			union omx_request *u = omx__req_alloc(ep, OMX_REQ_RECV);
			uint8_t *buf = len ? malloc(len) : NULL;
			if (!u || (len && !buf)) {
				free(buf);
				if (u)
					omx__req_free(u);
				omx__req_complete(r, OMX_NO_RESOURCES);
				return;
			}
			omx__copy_from_segs(r->s.segs, r->s.nseg, 0, buf, len);
			u->s.u.recv.unexp_buf = buf;
			u->s.partner = ep->self;
			omx__partner_to_addr(ep->self, &u->s.status.addr);
			u->s.status.match_info = r->s.status.match_info;
			u->s.status.msg_length = len;
			u->s.u.recv.received = len;
			u->s.u.recv.self_send = r;
			u->s.state |= OMX_RS_UNEXPECTED;
			r->s.state |= OMX_RS_SELF_WAITING;
			omx_list_add_tail(&ep->unexp, &u->s.done_elt);
			return;
		}
	}
	uint32_t xfer = len < recv->s.total_len ? len : recv->s.total_len;
	uint8_t tmp[4096];
	for (uint32_t off = 0; off < xfer; off += sizeof(tmp)) {
		uint32_t n = xfer - off < sizeof(tmp) ? xfer - off : (uint32_t)sizeof(tmp);
		omx__copy_from_segs(r->s.segs, r->s.nseg, off, tmp, n);
		omx__copy_to_segs(recv->s.segs, recv->s.nseg, off, tmp, n);
	}
	omx__partner_to_addr(ep->self, &recv->s.status.addr);
	recv->s.status.match_info = r->s.status.match_info;
	recv->s.status.msg_length = len;
	recv->s.status.xfer_length = xfer;
	r->s.status.xfer_length = xfer;
	omx__req_complete(recv, xfer < len ? OMX_MESSAGE_TRUNCATED : OMX_SUCCESS);
	omx__req_complete(r, xfer < len ? OMX_MESSAGE_TRUNCATED : OMX_SUCCESS);
}

/* The unexpected handler runs without the endpoint lock, and shows messages one at a time: a
 * handler that posts the receive of the message it is shown (the libfabric provider does) relies
 * on no other message being matched before that one. A self send posted while a handler runs (by
 * another thread, or by the handler itself) would run the handler a second time, concurrently,
 * and its end would let progress (other messages) in while the first still ran: such sends wait
 * for the next progress pass, and so do the self sends behind them (their order). */
void omx__self_send(struct omx_endpoint *ep, union omx_request *r)
{
	if (ep->in_handler || !omx_list_empty(&ep->self_deferred)) {
		r->s.state |= OMX_RS_SELF_WAITING;
		omx_list_add_tail(&ep->self_deferred, &r->s.queue_elt);
		return;
	}
	self_deliver(ep, r);
}

void omx__self_deferred_drain(struct omx_endpoint *ep)
{
	union omx_request *r;
	while (!ep->in_handler && (r = (union omx_request *)omx_list_first(&ep->self_deferred, omx_req_t, queue_elt))) {
		omx_list_del(&r->s.queue_elt);
		r->s.state &= ~OMX_RS_SELF_WAITING;
		self_deliver(ep, r);
	}
}
