/*
 * ofx_send.c - the send side of the omx provider: lazy connections (omx_iconnect, retried until
 * OMX_FI_CONNECT_TIMEOUT), sends queued behind them in order, and the endpoint progress that
 * turns omx completions into fi completions.
 */
#include <stdlib.h>
#include <string.h>

#include "ofx.h"

/* The message header of a send (decoded by hdr_get, ofx_match.c). */
static void hdr_put(unsigned char *h, uint64_t data, int has_data)
{
	memset(h, 0, OFX_HDR);
	for (int i = 0; i < 8; i++)
		h[i] = (unsigned char)(data >> (8 * i));
	h[8] = has_data ? OFX_HDR_DATA : 0;
}

static struct ofx_conn *conn_get(struct ofx_ep *ep, fi_addr_t a)
{
	if (a >= ep->nconns) {
		size_t n = ep->nconns ? ep->nconns : 16;
		while (n <= a)
			n *= 2;
		struct ofx_conn *c = realloc(ep->conns, n * sizeof(*c));
		if (!c)
			return NULL;
		memset(c + ep->nconns, 0, (n - ep->nconns) * sizeof(*c));
		ep->conns = c;
		ep->nconns = n;
	}
	return &ep->conns[a];
}

static uint64_t send_flags(const struct ofx_op *s)
{
	return FI_SEND | (s->tagged ? FI_TAGGED : FI_MSG);
}

/* Complete send s with error err (an fi errno; prov_errno: the omx code, if any). */
static void send_fail(struct ofx_ep *ep, struct ofx_op *s, int err, int prov_errno)
{
	struct fi_cq_err_entry e = {.op_context = s->context, .flags = send_flags(s), .len = s->len, .buf = s->buf,
				    .tag = s->tagged ? s->match : 0, .err = err, .prov_errno = prov_errno};
	op_complete(ep, s, s->silent ? NULL : ep->txcq, &e, FI_ADDR_NOTAVAIL);
}

/* Hand a message to omx: with the data header (endpoints with FI_REMOTE_CQ_DATA) as a 2-segment
 * send whose header and segments live in hdr and seg, else as the buffer alone. */
static omx_return_t omx_post(struct ofx_ep *ep, struct ofx_conn *c, unsigned char *hdr, omx_seg_t *seg, const void *buf,
			     size_t len, uint64_t match, uint64_t data, int has_data, void *context, omx_request_t *req)
{
	if (!ep->hlen)
		return omx_isend(ep->oep, (void *)(uintptr_t)buf, len, c->addr, match, context, req);
	hdr_put(hdr, data, has_data);
	seg[0].ptr = hdr;
	seg[0].len = OFX_HDR;
	seg[1].ptr = (void *)(uintptr_t)buf;
	seg[1].len = (uint32_t)len;
	return omx_isendv(ep->oep, seg, 2, c->addr, match, context, req);
}

static void send_post(struct ofx_ep *ep, struct ofx_conn *c, struct ofx_op *s)
{
	void *b = s->inject_copy ? s->inject_copy : s->buf;
	omx_return_t r = omx_post(ep, c, s->hdr, s->seg, b, s->len, s->match, s->data, s->has_data, s, &s->req);
	if (r != OMX_SUCCESS)
		send_fail(ep, s, ofx_errno(r), (int)r);
}

/* Every state change of a connection goes here: conn_timers looks at the connections only while
 * some are connecting (it ran on every CQ read, over every address the endpoint ever used). */
static void conn_set(struct ofx_ep *ep, struct ofx_conn *c, enum ofx_conn_state state)
{
	int was = c->state == CONN_PENDING || c->state == CONN_RETRY;
	int is = state == CONN_PENDING || state == CONN_RETRY;
	ep->conns_waiting += (size_t)is - (size_t)was;
	c->state = state;
}

static void conn_start(struct ofx_ep *ep, size_t idx)
{
	struct ofx_conn *c = &ep->conns[idx];
	struct ofx_name *nm = &ep->av->tab[idx];
	struct ofx_op *cop = c->cop;
	if (!cop) {
		cop = op_new(ep, OP_CONN);
		if (!cop)
			goto retry;
		cop->conn_idx = idx;
		c->cop = cop;
	}
	if (omx_iconnect(ep->oep, nm->nic, nm->epid, nm->key, 0, cop, &cop->req) == OMX_SUCCESS) {
		conn_set(ep, c, CONN_PENDING);
		return;
	}
retry:
	conn_set(ep, c, CONN_RETRY);
	c->retry_at = now_ns() + 100000000ull;
}

static void conn_fail_all(struct ofx_ep *ep, struct ofx_conn *c, int err, int prov_errno)
{
	while (c->qhead) {
		struct ofx_op *s = c->qhead;
		c->qhead = s->next;
		send_fail(ep, s, err, prov_errno);
	}
	c->qtail = NULL;
	conn_set(ep, c, CONN_NONE);
}

static void conn_done(struct ofx_ep *ep, struct ofx_op *cop, const omx_status_t *st)
{
	struct ofx_conn *c = &ep->conns[cop->conn_idx];
	cop->req = NULL;
	if (!ep->av->valid[cop->conn_idx]) {
		conn_fail_all(ep, c, FI_EADDRNOTAVAIL, 0); /* fi_av_remove'd while connecting */
		return;
	}
	if (st->code == OMX_SUCCESS) {
		c->addr = st->addr;
		conn_set(ep, c, CONN_UP);
		while (c->qhead) {
			struct ofx_op *s = c->qhead;
			c->qhead = s->next;
			s->next = NULL;
			send_post(ep, c, s);
		}
		c->qtail = NULL;
		return;
	}
	if (now_ns() < c->deadline && st->code != OMX_REMOTE_ENDPOINT_BAD_CONNECTION_KEY &&
	    st->code != OMX_NIC_ID_NOT_FOUND && st->code != OMX_CANCELLED) {
		conn_set(ep, c, CONN_RETRY); /* peer endpoint not open yet, or no answer: try again */
		c->retry_at = now_ns() + 100000000ull;
		return;
	}
	conn_fail_all(ep, c, ofx_errno(st->code), (int)st->code);
}

/* Connection retries and deadlines. The sends queued behind a connection to an address that
 * fi_av_remove removed fail with FI_EADDRNOTAVAIL instead of retrying with its stale entry
 * (fi_av(3) leaves operations on a removed address undefined). */
static void conn_timers(struct ofx_ep *ep)
{
	uint64_t t = 0;
	for (size_t i = 0; ep->conns_waiting && i < ep->nconns; i++) {
		struct ofx_conn *c = &ep->conns[i];
		if (c->state != CONN_RETRY && c->state != CONN_PENDING)
			continue;
		if (!t)
			t = now_ns();
		int removed = !ep->av->valid[i];
		if (removed || t >= c->deadline) {
			if (c->state == CONN_PENDING && c->cop && c->cop->req) {
				uint32_t res = 0;
				omx_cancel(ep->oep, &c->cop->req, &res);
				if (!res)
					continue; /* completed meanwhile: handled at the next pass */
			}
			if (removed)
				conn_fail_all(ep, c, FI_EADDRNOTAVAIL, 0);
			else
				conn_fail_all(ep, c, ofx_errno(OMX_TIMEOUT), OMX_TIMEOUT);
		} else if (c->state == CONN_RETRY && t >= c->retry_at) {
			conn_start(ep, i);
		}
	}
}

void ep_progress(struct ofx_ep *ep)
{
	if (!ep->oep)
		return;
	pend_flush(ep); /* older completions first */
	if (ep->reserved_n)
		reserved_expire(ep);
	for (;;) {
		omx_status_t st;
		uint32_t res = 0;
		if (omx_test_any(ep->oep, 0, 0, &st, &res) != OMX_SUCCESS || !res)
			break;
		struct ofx_op *op = st.context;
		if (!op)
			continue;
		switch (op->type) {
		case OP_SEND:
			/* omx tells a large message's sender that the receiver truncated it (MX does);
			 * in libfabric truncation is the receiver's error only (fi_cq(3), FI_ETRUNC):
			 * the send itself succeeded. */
			if (st.code != OMX_SUCCESS && st.code != OMX_MESSAGE_TRUNCATED) {
				send_fail(ep, op, ofx_errno(st.code), (int)st.code);
			} else {
				struct fi_cq_err_entry e = {.op_context = op->context, .flags = send_flags(op)};
				op_complete(ep, op, op->completion ? ep->txcq : NULL, &e, FI_ADDR_NOTAVAIL);
			}
			break;
		case OP_RECV:
			recv_complete(ep, op, st.match_info, st.msg_length, st.xfer_length, st.code, op->hdr);
			break;
		case OP_UNEXP:
			op->done = 1;
			op->req = NULL;
			op->xfer = st.xfer_length;
			op->code = st.code;
			if (op->claimer)
				unexp_deliver(ep, op, op->claimer);
			else if (op->discard)
				op_free(op);
			break;
		case OP_CONN:
			conn_done(ep, op, &st);
			break;
		}
	}
	conn_timers(ep);
}

/* A send op; with FI_INJECT, on a copy of buf. Domain lock held. */
static struct ofx_op *send_new(struct ofx_ep *ep, const void *buf, size_t len, fi_addr_t dest, uint64_t match,
			       int tagged, void *context, uint64_t flags, uint64_t data, int inject_call)
{
	struct ofx_op *s = op_new(ep, OP_SEND);
	if (!s)
		return NULL;
	s->context = context;
	s->buf = (void *)(uintptr_t)buf;
	s->len = len;
	s->match = match;
	s->tagged = tagged;
	s->addr = dest;
	s->has_data = (flags & FI_REMOTE_CQ_DATA) != 0;
	s->data = s->has_data ? data : 0;
	if (flags & FI_INJECT) { /* len <= OFX_INJECT_SIZE (do_send) */
		s->inject_copy = s->inject_buf;
		if (len)
			memcpy(s->inject_copy, buf, len); /* buf may be NULL for 0 bytes */
	}
	s->silent = inject_call;
	s->completion = !inject_call && (!ep->tx_selective || (flags & FI_COMPLETION));
	return s;
}

/* omx copies a send of up to 128 bytes (the small class) into its request when it is posted, so
 * an inject to a connected peer needs no copy and no op of ours: posted with no request handle,
 * which omx forgets at once (an inject reports nothing, success or failure); an omx_forget call
 * after the post cost another lock and request lookup. */
_Static_assert(OFX_INJECT_SIZE + OFX_HDR <= 128, "inject sends must stay in omx's small class");

static void inject_now(struct ofx_ep *ep, struct ofx_conn *c, const void *buf, size_t len, uint64_t match,
		       uint64_t flags, uint64_t data)
{
	unsigned char hdr[OFX_HDR];
	omx_seg_t seg[2];
	(void)omx_post(ep, c, hdr, seg, buf, len, match, data, (flags & FI_REMOTE_CQ_DATA) != 0, NULL, NULL);
}

ssize_t do_send(struct ofx_ep *ep, const void *buf, size_t len, fi_addr_t dest, uint64_t match, int tagged,
		void *context, uint64_t flags, uint64_t data, int inject_call)
{
	if (len > OFX_MAX_MSG)
		return -FI_EMSGSIZE;
	if ((flags & FI_REMOTE_CQ_DATA) && !ep->hlen)
		return -FI_EINVAL; /* endpoint opened without FI_REMOTE_CQ_DATA */
	OFX_TRACE("send%s len %zu dest %" PRId64 " tag %016" PRIx64 " flags %" PRIx64 " data %" PRIx64 "\n",
		  tagged ? " tagged" : "", len, (int64_t)dest, match, flags, data);
	if ((flags & FI_INJECT) && len > OFX_INJECT_SIZE)
		return -FI_EMSGSIZE;
	ssize_t ret = 0;
	struct ofx_op *s = NULL;
	struct ofx_conn *c = NULL;
	dom_lock(ep->dom);
	if (!ep->enabled || !ep->av) {
		ret = -FI_EOPBADSTATE;
	} else if (dest >= ep->av->n || !ep->av->valid[dest]) {
		ret = -FI_EINVAL;
	} else if (inject_call && dest < ep->nconns && ep->conns[dest].state == CONN_UP && !ep->conns[dest].qhead) {
		inject_now(ep, &ep->conns[dest], buf, len, match, flags, data);
	} else if (!(c = conn_get(ep, dest)) ||
		   !(s = send_new(ep, buf, len, dest, match, tagged, context, flags, data, inject_call))) {
		ret = -FI_ENOMEM;
	} else if (c->state == CONN_UP && !c->qhead) {
		send_post(ep, c, s);
	} else {
		list_append(&c->qhead, &c->qtail, s);
		if (c->state == CONN_NONE) {
			c->deadline = now_ns() + connect_timeout_ns;
			conn_start(ep, dest);
		}
	}
	dom_unlock(ep->dom);
	return ret;
}
