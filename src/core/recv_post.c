/*
 * recv_post.c - posting receives (omx_irecv, omx_irecvv): a posted receive takes the first
 * matching unexpected message, or waits in the posted queue for recv.c to match an incoming one;
 * omx_irecv_reserved takes the message an unexpected handler reserved.
 */
#include "core/core.h"
#include "omx_unexp_reserve.h"
#include "hot_path.h"

/* A matching unexpected message becomes the application's request. */
static void take_unexpected(struct omx_endpoint *ep, union omx_request *u)
{
	omx_list_del(&u->s.done_elt);
	u->s.state &= ~OMX_RS_UNEXPECTED;
	omx__unexp_uncharge(u);
	uint32_t len = u->s.status.msg_length;
	u->s.status.xfer_length = len < u->s.total_len ? len : u->s.total_len;
	if (u->s.u.recv.reserve_fail) { /* reserved, and its sender went away before it was taken */
		u->s.status.xfer_length = 0;
		omx__req_complete(u, u->s.u.recv.reserve_fail);
		return;
	}
	if (u->s.type == OMX_REQ_RECV_LARGE) {
		omx__large_recv_start(u);
		return;
	}
	if (u->s.state & OMX_RS_RECV_PARTIAL)
		return; /* completes when the last fragment arrives */
	omx__copy_to_segs(u->s.segs, u->s.nseg, 0, u->s.u.recv.unexp_buf, u->s.status.xfer_length);
	union omx_request *self_send = u->s.u.recv.self_send;
	if (self_send) {
		self_send->s.status.xfer_length = u->s.status.xfer_length;
		omx__req_complete(self_send, u->s.status.xfer_length < len ? OMX_MESSAGE_TRUNCATED : OMX_SUCCESS);
		omx__req_clear(self_send, OMX_RS_SELF_WAITING);
		u->s.u.recv.self_send = NULL;
	}
	omx__req_complete(u, u->s.status.xfer_length < len ? OMX_MESSAGE_TRUNCATED : OMX_SUCCESS);
	(void)ep;
}

/* r becomes the caller's receive: its match, context, and handle (or none: collected). */
static void recv_own(union omx_request *r, uint64_t match, uint64_t mask, void *context, omx_request_t *request)
{
	r->s.u.recv.match_info = match;
	r->s.u.recv.match_mask = mask;
	r->s.status.context = context;
	if (!request)
		r->s.state |= OMX_RS_COLLECTED;
	else
		*request = r;
}

OMX_HOT_PATH omx_return_t omx__post_recv(struct omx_endpoint *ep, const omx_seg_t *segs, uint32_t nseg, uint64_t match,
			    uint64_t mask, void *context, omx_request_t *request)
{
	OMX_CHECK_EP(ep);
	if (match & ~mask)
		return omx__error(ep, OMX_BAD_MATCH_MASK, "Posting receive with match 0x%llx mask 0x%llx",
				  (unsigned long long)match, (unsigned long long)mask);
	if (ep->ctxid_bits) {
		uint64_t cmask = (((uint64_t)1 << ep->ctxid_bits) - 1) << ep->ctxid_shift;
		if ((mask & cmask) != cmask)
			return omx__error(ep, OMX_BAD_MATCHING_FOR_CONTEXT_ID_MASK, "Posting receive with mask 0x%llx",
					  (unsigned long long)mask);
	}
	omx__eplock(&ep->lock);
	struct omx_list *pos, *tmp;
	union omx_request *r = NULL;
	omx_list_for_each_safe(pos, tmp, &ep->unexp) {
		union omx_request *u = (union omx_request *)omx_container_of(pos, omx_req_t, done_elt);
		if ((u->s.status.match_info & mask) == match) {
			r = u;
			break;
		}
	}
	int consumed = r != NULL;
	if (!r) {
		r = omx__req_alloc(ep, OMX_REQ_RECV);
		if (!r) {
			omx__epunlock(&ep->lock);
			return omx__error(ep, OMX_NO_RESOURCES, "Allocating receive request");
		}
	}
	omx_return_t ret = omx__req_set_segs(r, segs, nseg); /* leaves r as it was if it fails */
	if (ret != OMX_SUCCESS) {
		if (!consumed)
			omx__req_free(r);
		omx__epunlock(&ep->lock);
		return omx__error(ep, ret, "Posting receive");
	}
	recv_own(r, match, mask, context, request);
	if (consumed) {
		(void)omx__ep_clock(ep); /* a NOTIFY may leave now (its resend timer) */
		take_unexpected(ep, r);
	} else {
		r->s.state |= OMX_RS_RECV_POSTED;
		omx_list_add_tail(&ep->posted_recvs, &r->s.queue_elt);
		omx__progress_fast(ep); /* a ping-pong's answer may be there already */
	}
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

omx_return_t omx_irecv(omx_endpoint_t ep, void *buffer, size_t length, uint64_t match_info, uint64_t match_mask,
		       void *context, omx_request_t *request)
{
	if (length > UINT32_MAX)
		return omx__error(ep, OMX_SEGMENTS_BAD_COUNT, "Receiving more than 4 GiB");
	omx_seg_t seg = { buffer, (uint32_t)length };
	return omx__post_recv(ep, &seg, 1, match_info, match_mask, context, request);
}

omx_return_t omx_irecvv(omx_endpoint_t ep, omx_seg_t *segs, uint32_t nseg, uint64_t match_info, uint64_t match_mask,
			void *context, omx_request_t *request)
{
	return omx__post_recv(ep, segs, nseg, match_info, match_mask, context, request);
}

omx_return_t omx_irecv_reserved(omx_endpoint_t ep, uint64_t key, omx_seg_t *segs, uint32_t nseg, void *context,
				omx_request_t *request)
{
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	/* The handler runs without the endpoint lock, and its message is queued as reserved only
	 * once it has returned: a caller on another thread that saw the reservation (the provider,
	 * whose handler already let go of its own lock) waits for that, or finds nothing. */
	while (ep->in_handler && ep->handler_reserved && ep->handler_key == key &&
	       !pthread_equal(ep->handler_thread, pthread_self()))
		omx__epcond_wait(&ep->cond, &ep->lock, NULL);
	union omx_request *u = NULL;
	struct omx_list *pos;
	for (pos = ep->reserved.next; pos != &ep->reserved; pos = pos->next) {
		union omx_request *x = (union omx_request *)omx_container_of(pos, omx_req_t, done_elt);
		if (x->s.u.recv.reserve_key == key) {
			u = x;
			break;
		}
	}
	if (!u) {
		omx__epunlock(&ep->lock);
		return omx__error(ep, OMX_BAD_ERROR, "No message reserved under key 0x%llx", (unsigned long long)key);
	}
	omx_return_t ret = omx__req_set_segs(u, segs, nseg); /* leaves u as it was if it fails */
	if (ret != OMX_SUCCESS) {
		omx__epunlock(&ep->lock);
		return omx__error(ep, ret, "Receiving a reserved message");
	}
	u->s.state &= ~OMX_RS_RESERVED;
	recv_own(u, u->s.status.match_info, ~0ULL, context, request);
	(void)omx__ep_clock(ep); /* a NOTIFY may leave now (its resend timer) */
	take_unexpected(ep, u);
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}
