/*
 * ofx_match.c - the receive side of the omx provider: the omx unexpected handler that matches
 * every incoming message against the posted fi receives (or buffers it as unexpected), receive
 * completion, and posting a receive (with peek / claim / discard).
 */
#include <stdlib.h>
#include <string.h>

#include "ofx.h"

#ifdef OFX_TEST_HOOKS
/* TEST BUILD ONLY (ofx_test_fail, ofx_cq.c): OMX_FI_TEST_UNEXP_ENOMEM=N, the first N buffers for
 * unexpected messages cannot be allocated. */
static long unexp_enomem_left = -1;
#define test_unexp_enomem() ofx_test_fail("OMX_FI_TEST_UNEXP_ENOMEM", &unexp_enomem_left)
#else
#define test_unexp_enomem() 0
#endif

/* fi_addr of buffered message u's sender: looked up again while not found, since a peer's first
 * message may arrive before the application inserts the peer into the AV. */
static fi_addr_t unexp_src(struct ofx_ep *ep, struct ofx_op *u)
{
	if (u->addr == FI_ADDR_NOTAVAIL)
		u->addr = av_find(ep->av, u->snic, u->sepid);
	return u->addr;
}

static int op_matches(struct ofx_ep *ep, const struct ofx_op *r, uint64_t match, fi_addr_t src)
{
	if (r->tagged) {
		if (match & ~ep->tag_mask)
			return 0;
		if ((match ^ r->match) & ~r->ignore & ep->tag_mask)
			return 0;
	} else if (match != OFX_MSG_BIT) {
		return 0;
	}
	if ((ep->caps & FI_DIRECTED_RECV) && r->addr != FI_ADDR_UNSPEC && r->addr != src)
		return 0;
	return 1;
}

void list_append(struct ofx_op **head, struct ofx_op **tail, struct ofx_op *op)
{
	op->next = NULL;
	if (*tail)
		(*tail)->next = op;
	else
		*head = op;
	*tail = op;
}

void list_remove(struct ofx_op **head, struct ofx_op **tail, struct ofx_op *prev, struct ofx_op *op)
{
	if (prev)
		prev->next = op->next;
	else
		*head = op->next;
	if (*tail == op)
		*tail = prev;
	op->next = NULL;
}

/* A new op of ep, on ep->live until op_free. Ops handed to omx are in no list of the provider, and
 * omx_close_endpoint drops them silently: ep->live is how ep_close finds them. Domain lock held. */
struct ofx_op *op_new(struct ofx_ep *ep, enum ofx_op_type type)
{
	struct ofx_op *op = ep->op_cache;
	if (op) {
		ep->op_cache = op->next;
		ep->op_cached--;
		memset(op, 0, sizeof(*op));
	} else if (!(op = calloc(1, sizeof(*op)))) {
		return NULL;
	}
	op->type = type;
	op->ep = ep;
	op->live_next = ep->live;
	if (ep->live)
		ep->live->live_prev = op;
	ep->live = op;
	return op;
}

/* Frees op, and the bounce buffer of a buffered message. Domain lock held (or ep closed). */
void op_free(struct ofx_op *op)
{
	if (!op)
		return;
	if (op->live_prev)
		op->live_prev->live_next = op->live_next;
	else
		op->ep->live = op->live_next;
	if (op->live_next)
		op->live_next->live_prev = op->live_prev;
	if (op->type == OP_UNEXP)
		free(op->buf);
#if OFX_OP_CACHE > 0
	struct ofx_ep *ep = op->ep;
	if (!ep->closing && ep->op_cached < OFX_OP_CACHE) {
		op->next = ep->op_cache;
		ep->op_cache = op;
		ep->op_cached++;
		return;
	}
#endif
	free(op);
}

/* r's buffer as omx segments (the header first if the endpoint uses one): their count. */
static uint32_t recv_segs(struct ofx_ep *ep, struct ofx_op *r)
{
	size_t len = r->len > OFX_MAX_MSG ? OFX_MAX_MSG : r->len;
	uint32_t n = 0;
	if (ep->hlen) {
		r->seg[n].ptr = r->hdr;
		r->seg[n++].len = OFX_HDR;
	}
	r->seg[n].ptr = r->buf;
	r->seg[n++].len = (uint32_t)len;
	return n;
}

/* Post the omx receive of the message matched by r (exact match_info). */
static omx_return_t post_recv(struct ofx_ep *ep, struct ofx_op *r, uint64_t match)
{
	return omx_irecvv(ep->oep, r->seg, recv_segs(ep, r), match, ~0ULL, r, &r->req);
}

static uint64_t reserve_key(const struct ofx_op *u)
{
	return (uint64_t)(uintptr_t)u;
}

/* Whether the handler leaves this large message in omx's queue (reserved under u's address). */
static int reserve(struct ofx_ep *ep, struct ofx_op *u)
{
	if (!reserve_ns || ep->reserved_n >= reserve_max ||
	    omx_unexp_reserve(ep->oep, reserve_key(u)) != OMX_SUCCESS)
		return 0;
	u->reserved = 1;
	u->reserved_ns = now_ns();
	if (!ep->reserved_n++)
		ep->reserve_check_ns = u->reserved_ns + reserve_ns;
	return 1;
}

static void reserved_end(struct ofx_ep *ep, struct ofx_op *u)
{
	u->reserved = 0;
	ep->reserved_n--;
}

/* Receive r takes reserved message u, which omx pulls straight into r's buffer; u is freed. */
static void reserved_claim(struct ofx_ep *ep, struct ofx_op *u, struct ofx_op *r)
{
	reserved_end(ep, u);
	r->addr = unexp_src(ep, u);
	uint64_t match = u->match;
	omx_return_t rc = omx_irecv_reserved(ep->oep, reserve_key(u), r->seg, recv_segs(ep, r), r, &r->req);
	op_free(u);
	if (rc != OMX_SUCCESS) /* not found: a provider bug, reported rather than waited for */
		recv_complete(ep, r, match, 0, 0, rc, NULL);
}

/* Reserved message u becomes an ordinary buffered one, received into a bounce buffer (a peek must
 * report its header's data). 0 if it is being received, -1 without memory (u stays reserved). */
static int reserved_buffer(struct ofx_ep *ep, struct ofx_op *u)
{
	void *buf = malloc(u->msg_len ? u->msg_len : 1);
	if (!buf)
		return -1;
	omx_seg_t seg = {buf, u->msg_len};
	u->buf = buf;
	reserved_end(ep, u);
	if (omx_irecv_reserved(ep->oep, reserve_key(u), &seg, 1, u, &u->req) != OMX_SUCCESS) {
		u->done = 1;
		u->code = OMX_BAD_ERROR;
	}
	return 0;
}

/* Reserved messages that waited OMX_FI_RESERVE_US for their receive are buffered (ofx_fabric.c
 * says why). Every progress call while some are reserved: one clock read until one is due. */
void reserved_expire(struct ofx_ep *ep)
{
	uint64_t t = now_ns();
	if (t < ep->reserve_check_ns)
		return;
	uint64_t oldest = t;
	for (struct ofx_op *u = ep->unexp_head; u && ep->reserved_n; u = u->next) {
		if (!u->reserved)
			continue;
		if (t - u->reserved_ns < reserve_ns)
			oldest = u->reserved_ns < oldest ? u->reserved_ns : oldest;
		else
			(void)reserved_buffer(ep, u); /* without memory: tried again a period later (oldest <= t) */
	}
	ep->reserve_check_ns = oldest + reserve_ns;
}

/* Discarded message u (FI_CLAIM | FI_DISCARD, or FI_PEEK | FI_DISCARD), off the unexpected list:
 * freed once omx has finished with it (a reserved one is taken with no buffer: nothing pulled). */
static void unexp_discard(struct ofx_ep *ep, struct ofx_op *u)
{
	if (u->reserved) {
		reserved_end(ep, u);
		if (omx_irecv_reserved(ep->oep, reserve_key(u), NULL, 0, u, &u->req) != OMX_SUCCESS) {
			op_free(u);
			return;
		}
	} else if (u->done) {
		op_free(u);
		return;
	}
	u->discard = 1;
}

/* A message omx hands over whole (one frame: tiny, small, one-fragment medium), matched by
 * posted receive r: copied to r's buffer and completed here, with no omx receive. Posting one
 * and collecting its completion from omx cost more than the rest of a small message's receive. */
static void deliver_whole(struct ofx_ep *ep, struct ofx_op *r, uint64_t match, uint32_t raw_len, const void *data)
{
	uint32_t h = raw_len < ep->hlen ? raw_len : (uint32_t)ep->hlen;
	size_t room = r->len > OFX_MAX_MSG ? OFX_MAX_MSG : r->len;
	uint32_t n = raw_len - h < room ? raw_len - h : (uint32_t)room;
	if (n)
		memcpy(r->buf, (const char *)data + h, n);
	recv_complete(ep, r, match, raw_len, h + n, OMX_SUCCESS, data);
}

static omx_unexp_handler_action_t handle_unexp(struct ofx_ep *ep, omx_endpoint_addr_t source, uint64_t match,
					       uint32_t msg_length, void *data)
{
	uint64_t snic = 0;
	uint32_t sepid = 0;
	omx_decompose_endpoint_addr(source, &snic, &sepid);
	fi_addr_t src = av_find(ep->av, snic, sepid);
	struct ofx_op *prev = NULL;
	OFX_TRACE("incoming match %016" PRIx64 " len %u from %012" PRIx64 ":%u (fi_addr %" PRId64 ")\n", match,
		  msg_length, snic, sepid, (int64_t)src);
	for (struct ofx_op *r = ep->posted_head; r; prev = r, r = r->next) {
		if (!op_matches(ep, r, match, src))
			continue;
		list_remove(&ep->posted_head, &ep->posted_tail, prev, r);
		r->addr = src;
		if (data) {
			deliver_whole(ep, r, match, msg_length, data);
			return OMX_UNEXP_HANDLER_RECV_FINISHED;
		}
		if (post_recv(ep, r, match) == OMX_SUCCESS)
			return OMX_UNEXP_HANDLER_RECV_CONTINUE;
		/* could not post: put it back and buffer the message instead */
		if (prev) {
			r->next = prev->next;
			prev->next = r;
			if (ep->posted_tail == prev)
				ep->posted_tail = r;
		} else {
			r->next = ep->posted_head;
			ep->posted_head = r;
			if (!ep->posted_tail)
				ep->posted_tail = r;
		}
		break;
	}
	/* Without memory for it here, omx keeps the message in its own unexpected queue (held), where
	 * later receives look for it (adopt_held, held_claim); and while some are held, so do the
	 * messages after them, so that ours stay older than every held one (arrival order). */
	if (ep->omx_held) {
		ep->omx_held++;
		return OMX_UNEXP_HANDLER_RECV_CONTINUE;
	}
	struct ofx_op *u = test_unexp_enomem() ? NULL : op_new(ep, OP_UNEXP);
	if (!u) {
		ep->omx_held++;
		return OMX_UNEXP_HANDLER_RECV_CONTINUE;
	}
	u->match = match;
	u->addr = src;
	u->snic = snic;
	u->sepid = sepid;
	u->msg_len = msg_length;
	/* A large message stays in omx's queue, its data at the sender, until a receive takes it:
	 * received here, it would be copied again into that receive's buffer (omx refuses eager
	 * messages, whose data is arriving already). */
	if (!data && reserve(ep, u)) {
		list_append(&ep->unexp_head, &ep->unexp_tail, u);
		return OMX_UNEXP_HANDLER_RECV_CONTINUE;
	}
	u->buf = malloc(msg_length ? msg_length : 1); /* the whole message, header included */
	if (!u->buf) {
		op_free(u);
		ep->omx_held++;
		return OMX_UNEXP_HANDLER_RECV_CONTINUE;
	}
	list_append(&ep->unexp_head, &ep->unexp_tail, u);
	if (data) {
		memcpy(u->buf, data, msg_length);
		u->xfer = msg_length;
		u->done = 1;
		return OMX_UNEXP_HANDLER_RECV_FINISHED;
	}
	if (omx_irecv(ep->oep, u->buf, msg_length, match, ~0ULL, u, &u->req) != OMX_SUCCESS) {
		u->done = 1;
		u->code = OMX_NO_RESOURCES;
	}
	return OMX_UNEXP_HANDLER_RECV_CONTINUE;
}

/* Called by omx for every incoming message (no omx receive is posted in advance). */
omx_unexp_handler_action_t unexp_handler(void *context, omx_endpoint_addr_t source, uint64_t match, uint32_t msg_length,
					 void *data)
{
	struct ofx_ep *ep = context;
	int take = !dom_held(ep->dom); /* on the omx progress thread */
	if (take)
		dom_lock(ep->dom);
	omx_unexp_handler_action_t a = OMX_UNEXP_HANDLER_RECV_FINISHED; /* closing: drop it */
	if (!ep->closing)
		a = handle_unexp(ep, source, match, msg_length, data);
	if (take)
		dom_unlock(ep->dom);
	return a;
}

uint64_t recv_flags(const struct ofx_op *r)
{
	return FI_RECV | (r->tagged ? FI_TAGGED : FI_MSG);
}

/* The header of a received message (written by hdr_put, ofx_send.c). */
static uint64_t hdr_get(const unsigned char *h, int *has_data)
{
	uint64_t d = 0;
	for (int i = 0; i < 8; i++)
		d |= (uint64_t)h[i] << (8 * i);
	*has_data = (h[8] & OFX_HDR_DATA) != 0;
	return d;
}

/* Complete receive r. raw_len / raw_xfer: length of the message and bytes received, both
 * counting the header if the endpoint uses one (then hdr is the received header). */
void recv_complete(struct ofx_ep *ep, struct ofx_op *r, uint64_t match, uint32_t raw_len, uint32_t raw_xfer,
		   omx_return_t code, const unsigned char *hdr)
{
	uint64_t tag = r->tagged ? match : 0, data = 0, flags = recv_flags(r);
	uint32_t msg_len = raw_len, xfer = raw_xfer;
	if (ep->hlen) {
		int has = 0;
		if (raw_len < ep->hlen || raw_xfer < ep->hlen) {
			if (code == OMX_SUCCESS || code == OMX_MESSAGE_TRUNCATED)
				code = OMX_BAD_ERROR; /* no header: not from an endpoint of this provider */
			msg_len = xfer = 0;
		} else {
			msg_len -= (uint32_t)ep->hlen;
			xfer -= (uint32_t)ep->hlen;
			data = hdr_get(hdr, &has);
			if (has)
				flags |= FI_REMOTE_CQ_DATA;
			else
				data = 0;
		}
	}
	if (code == OMX_SUCCESS && xfer < msg_len)
		code = OMX_MESSAGE_TRUNCATED;
	struct fi_cq_err_entry e = {
		.op_context = r->context, .flags = flags, .len = xfer, .buf = r->buf, .data = data, .tag = tag};
	if (code != OMX_SUCCESS) {
		e.olen = msg_len > xfer ? msg_len - xfer : 0;
		e.err = ofx_errno(code);
		e.prov_errno = (int)code;
	}
	op_complete(ep, r, (code != OMX_SUCCESS || r->completion) ? ep->rxcq : NULL, &e, r->addr);
}

/* Deliver buffered unexpected message u (complete) to receive r, and free u. */
void unexp_deliver(struct ofx_ep *ep, struct ofx_op *u, struct ofx_op *r)
{
	uint32_t n = u->xfer > ep->hlen ? u->xfer - (uint32_t)ep->hlen : 0;
	if (n > r->len)
		n = (uint32_t)r->len;
	if (n)
		memcpy(r->buf, (char *)u->buf + ep->hlen, n);
	r->addr = unexp_src(ep, u);
	uint32_t raw_len = u->code == OMX_SUCCESS ? u->msg_len : u->xfer;
	recv_complete(ep, r, u->match, raw_len, n + (u->xfer >= ep->hlen ? (uint32_t)ep->hlen : 0), u->code,
		      u->buf);
	op_free(u);
}

/* fi_trecvmsg with FI_PEEK (and FI_CLAIM / FI_DISCARD): report, without receiving it, the first
 * buffered message tmpl matches, or FI_ENOMSG. -FI_EAGAIN if the CQ has no memory for the report
 * (nothing claimed or discarded then), else 0. Domain lock held. */
static ssize_t recv_peek(struct ofx_ep *ep, const struct ofx_op *tmpl, void *context, uint64_t flags)
{
	struct ofx_op *u, *prev = NULL;
	for (u = ep->unexp_head; u; prev = u, u = u->next)
		if (!u->claimed && op_matches(ep, tmpl, u->match, unexp_src(ep, u)))
			break;
	struct fi_cq_err_entry e = {.op_context = context, .flags = recv_flags(tmpl), .tag = tmpl->match};
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	/* A reserved message has everything to report but the header's data: with a header, it is
	 * received now, and reported once it is here. */
	if (u && u->reserved && ep->hlen)
		(void)reserved_buffer(ep, u);
	/* a message still being received (its header may not be here yet) counts as not there */
	if (!u || !(u->done || (u->reserved && !ep->hlen)) || u->msg_len < ep->hlen) {
		e.err = FI_ENOMSG;
	} else {
		e.len = u->msg_len - ep->hlen;
		e.tag = tmpl->tagged ? u->match : 0;
		src = unexp_src(ep, u);
		/* A message that failed (its receive reports the error) may lack the header, or part of it:
		 * then there is no data to report. Still found, so that a probe does not wait for it forever. */
		if (ep->hlen && u->xfer >= ep->hlen) {
			int has = 0;
			e.data = hdr_get(u->buf, &has);
			if (has)
				e.flags |= FI_REMOTE_CQ_DATA;
			else
				e.data = 0;
		}
	}
	if (ep->rxcq && cq_write(ep->rxcq, &e, src))
		return -FI_EAGAIN;
	if (!e.err && (flags & FI_CLAIM) && context) {
		u->claimed = 1;
		((struct fi_context *)context)->internal[0] = u;
	}
	if (!e.err && (flags & FI_DISCARD)) {
		list_remove(&ep->unexp_head, &ep->unexp_tail, prev, u);
		unexp_discard(ep, u);
	}
	return 0;
}

/* Move the messages held in omx's queue into ours, oldest first, as far as memory allows (each is
 * received by an exact omx receive, which takes the oldest of that match: the one probed). */
static void adopt_held(struct ofx_ep *ep)
{
	int adopted = 0;
	while (ep->omx_held) {
		omx_status_t st;
		uint32_t found = 0;
		if (omx_iprobe(ep->oep, 0, 0, &st, &found) != OMX_SUCCESS || !found) {
			ep->omx_held = 0; /* nothing left there (dropped by omx: gone with its sender) */
			return;
		}
		struct ofx_op *u = test_unexp_enomem() ? NULL : op_new(ep, OP_UNEXP);
		if (!u)
			return;
		u->buf = malloc(st.msg_length ? st.msg_length : 1);
		if (!u->buf || omx_irecv(ep->oep, u->buf, st.msg_length, st.match_info, ~0ULL, u, &u->req) != OMX_SUCCESS) {
			op_free(u); /* frees buf: an OP_UNEXP */
			return;
		}
		u->match = st.match_info;
		omx_decompose_endpoint_addr(st.addr, &u->snic, &u->sepid);
		u->addr = av_find(ep->av, u->snic, u->sepid);
		u->msg_len = st.msg_length;
		list_append(&ep->unexp_head, &ep->unexp_tail, u);
		ep->omx_held--;
		adopted = 1;
	}
	if (adopted)
		ep_progress(ep); /* the eager ones are complete already: done before a peek looks */
}

/* A receive r that matches none of our buffered messages may match one the handler left in omx's
 * queue (no memory then): found with omx's own probe (the oldest that r matches, in arrival
 * order, as ours would be) and received by an exact omx receive, which takes that one. 1 if r is
 * now receiving it. A directed receive takes it only if it is the oldest match from anywhere. */
static int held_claim(struct ofx_ep *ep, struct ofx_op *r)
{
	uint64_t match = OFX_MSG_BIT, mask = ~0ULL;
	if (r->tagged) {
		mask = ~(r->ignore & ep->tag_mask);
		match = r->match & mask;
	}
	omx_status_t st;
	uint32_t found = 0;
	if (omx_iprobe(ep->oep, match, mask, &st, &found) != OMX_SUCCESS || !found)
		return 0;
	if (r->addr != FI_ADDR_UNSPEC) {
		uint64_t nic = 0;
		uint32_t epid = 0;
		omx_decompose_endpoint_addr(st.addr, &nic, &epid);
		if (av_find(ep->av, nic, epid) != r->addr)
			return 0;
	}
	if (post_recv(ep, r, st.match_info) != OMX_SUCCESS)
		return 0;
	ep->omx_held--;
	return 1;
}

ssize_t do_recv(struct ofx_ep *ep, void *buf, size_t len, fi_addr_t src, uint64_t tag, uint64_t ignore, int tagged,
		void *context, uint64_t flags)
{
	if (!(ep->caps & FI_DIRECTED_RECV))
		src = FI_ADDR_UNSPEC;
	OFX_TRACE("recv%s len %zu src %" PRId64 " tag %016" PRIx64 " ignore %016" PRIx64 " flags %" PRIx64 "\n",
		  tagged ? " tagged" : "", len, (int64_t)src, tag, ignore, flags);
	ssize_t ret = 0;
	dom_lock(ep->dom);
	if (!ep->enabled) {
		dom_unlock(ep->dom);
		return -FI_EOPBADSTATE;
	}
	struct ofx_op tmpl = {.tagged = tagged, .match = tag, .ignore = ignore, .addr = src};
	if (ep->omx_held)
		adopt_held(ep);
	if (flags & FI_PEEK) {
		ret = recv_peek(ep, &tmpl, context, flags);
		dom_unlock(ep->dom);
		return ret;
	}
	struct ofx_op *r = op_new(ep, OP_RECV);
	if (!r) {
		dom_unlock(ep->dom);
		return -FI_ENOMEM;
	}
	r->context = context;
	r->buf = buf;
	r->len = len;
	r->match = tag;
	r->ignore = ignore;
	r->tagged = tagged;
	r->addr = src;
	r->completion = !ep->rx_selective || (flags & FI_COMPLETION);
	struct ofx_op *u = NULL, *prev = NULL;
	if (flags & FI_CLAIM) {
		u = context ? ((struct fi_context *)context)->internal[0] : NULL;
		struct ofx_op *x;
		for (x = ep->unexp_head; x && x != u; x = x->next)
			prev = x;
		if (!u || !x) {
			op_free(r);
			dom_unlock(ep->dom);
			return -FI_EINVAL;
		}
		if (flags & FI_DISCARD) {
			struct fi_cq_err_entry e = {.op_context = context, .flags = recv_flags(r), .tag = tag};
			op_free(r);
			if (ep->rxcq && cq_write(ep->rxcq, &e, FI_ADDR_NOTAVAIL)) {
				dom_unlock(ep->dom);
				return -FI_EAGAIN; /* discard nothing without its completion */
			}
			list_remove(&ep->unexp_head, &ep->unexp_tail, prev, u);
			unexp_discard(ep, u);
			dom_unlock(ep->dom);
			return 0;
		}
	} else {
		for (u = ep->unexp_head; u; prev = u, u = u->next)
			if (!u->claimed && op_matches(ep, r, u->match, unexp_src(ep, u)))
				break;
	}
	if (u) {
		list_remove(&ep->unexp_head, &ep->unexp_tail, prev, u);
		if (u->reserved)
			reserved_claim(ep, u, r);
		else if (u->done)
			unexp_deliver(ep, u, r);
		else
			u->claimer = r;
	} else if (!(ep->omx_held && held_claim(ep, r))) {
		list_append(&ep->posted_head, &ep->posted_tail, r);
	}
	dom_unlock(ep->dom);
	return ret;
}
