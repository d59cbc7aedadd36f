/*
 * ofx_ep.c - endpoints of the omx provider: the fi_ops_msg / fi_ops_tagged entry points (checks,
 * then do_send / do_recv), cancel, CM names, binding to an AV and CQs, enable, close, and
 * opening the omx endpoint behind each fi endpoint.
 */
#include <stdlib.h>
#include <string.h>

#include "ofx.h"

static int check_tag(struct ofx_ep *ep, uint64_t tag)
{
	return (tag & ~ep->tag_mask) ? -FI_EINVAL : 0;
}

static ssize_t ep_tsend(struct fid_ep *fep, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t tag,
			void *context)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_TAGGED) || check_tag(ep, tag))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, tag, 1, context, ep->tx_op_flags & ~FI_REMOTE_CQ_DATA, 0, 0);
}

static ssize_t ep_tsendv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
			 uint64_t tag, void *context)
{
	if (count > 1)
		return -FI_EINVAL;
	return ep_tsend(fep, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0, NULL, dest, tag, context);
}

static ssize_t ep_tsendmsg(struct fid_ep *fep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (msg->iov_count > 1 || !(ep->caps & FI_TAGGED) || check_tag(ep, msg->tag))
		return -FI_EINVAL;
	return do_send(ep, msg->iov_count ? msg->msg_iov[0].iov_base : NULL,
		       msg->iov_count ? msg->msg_iov[0].iov_len : 0, msg->addr, msg->tag, 1, msg->context, flags,
		       msg->data, 0);
}

static ssize_t ep_tinject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest, uint64_t tag)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_TAGGED) || check_tag(ep, tag))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, tag, 1, NULL, FI_INJECT, 0, 1);
}

static ssize_t ep_tsenddata(struct fid_ep *fep, const void *buf, size_t len, void *desc, uint64_t data,
			    fi_addr_t dest, uint64_t tag, void *context)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_TAGGED) || check_tag(ep, tag))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, tag, 1, context, ep->tx_op_flags | FI_REMOTE_CQ_DATA, data, 0);
}

static ssize_t ep_tinjectdata(struct fid_ep *fep, const void *buf, size_t len, uint64_t data, fi_addr_t dest,
			      uint64_t tag)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_TAGGED) || check_tag(ep, tag))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, tag, 1, NULL, FI_INJECT | FI_REMOTE_CQ_DATA, data, 1);
}

static ssize_t ep_trecv(struct fid_ep *fep, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
			uint64_t ignore, void *context)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_TAGGED))
		return -FI_EINVAL;
	return do_recv(ep, buf, len, src, tag, ignore, 1, context, ep->rx_op_flags);
}

static ssize_t ep_trecvv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
			 uint64_t tag, uint64_t ignore, void *context)
{
	if (count > 1)
		return -FI_EINVAL;
	return ep_trecv(fep, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0, NULL, src, tag, ignore,
			context);
}

static ssize_t ep_trecvmsg(struct fid_ep *fep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (msg->iov_count > 1 || !(ep->caps & FI_TAGGED))
		return -FI_EINVAL;
	return do_recv(ep, msg->iov_count ? msg->msg_iov[0].iov_base : NULL,
		       msg->iov_count ? msg->msg_iov[0].iov_len : 0, msg->addr, msg->tag, msg->ignore, 1, msg->context,
		       flags);
}

static ssize_t ep_send(struct fid_ep *fep, const void *buf, size_t len, void *desc, fi_addr_t dest, void *context)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_MSG))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, OFX_MSG_BIT, 0, context, ep->tx_op_flags & ~FI_REMOTE_CQ_DATA, 0, 0);
}

static ssize_t ep_sendv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
			void *context)
{
	if (count > 1)
		return -FI_EINVAL;
	return ep_send(fep, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0, NULL, dest, context);
}

static ssize_t ep_sendmsg(struct fid_ep *fep, const struct fi_msg *msg, uint64_t flags)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (msg->iov_count > 1 || !(ep->caps & FI_MSG))
		return -FI_EINVAL;
	return do_send(ep, msg->iov_count ? msg->msg_iov[0].iov_base : NULL,
		       msg->iov_count ? msg->msg_iov[0].iov_len : 0, msg->addr, OFX_MSG_BIT, 0, msg->context, flags,
		       msg->data, 0);
}

static ssize_t ep_inject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_MSG))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, OFX_MSG_BIT, 0, NULL, FI_INJECT, 0, 1);
}

static ssize_t ep_senddata(struct fid_ep *fep, const void *buf, size_t len, void *desc, uint64_t data,
			   fi_addr_t dest, void *context)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_MSG))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, OFX_MSG_BIT, 0, context, ep->tx_op_flags | FI_REMOTE_CQ_DATA, data, 0);
}

static ssize_t ep_injectdata(struct fid_ep *fep, const void *buf, size_t len, uint64_t data, fi_addr_t dest)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_MSG))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, OFX_MSG_BIT, 0, NULL, FI_INJECT | FI_REMOTE_CQ_DATA, data, 1);
}

static ssize_t ep_recv(struct fid_ep *fep, void *buf, size_t len, void *desc, fi_addr_t src, void *context)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_MSG))
		return -FI_EINVAL;
	return do_recv(ep, buf, len, src, 0, 0, 0, context, ep->rx_op_flags);
}

static ssize_t ep_recvv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
			void *context)
{
	if (count > 1)
		return -FI_EINVAL;
	return ep_recv(fep, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0, NULL, src, context);
}

static ssize_t ep_recvmsg(struct fid_ep *fep, const struct fi_msg *msg, uint64_t flags)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (msg->iov_count > 1 || !(ep->caps & FI_MSG) || (flags & (FI_PEEK | FI_CLAIM | FI_MULTI_RECV)))
		return -FI_EINVAL;
	return do_recv(ep, msg->iov_count ? msg->msg_iov[0].iov_base : NULL,
		       msg->iov_count ? msg->msg_iov[0].iov_len : 0, msg->addr, 0, 0, 0, msg->context, flags);
}

static ssize_t ep_cancel(fid_t fid, void *context)
{
	struct ofx_ep *ep = (struct ofx_ep *)fid;
	dom_lock(ep->dom);
	struct ofx_op *prev = NULL;
	for (struct ofx_op *r = ep->posted_head; r; prev = r, r = r->next) {
		if (r->context != context)
			continue;
		list_remove(&ep->posted_head, &ep->posted_tail, prev, r);
		struct fi_cq_err_entry e = {.op_context = r->context, .flags = recv_flags(r), .buf = r->buf,
					    .tag = r->tagged ? r->match : 0, .err = FI_ECANCELED, .prov_errno = OMX_CANCELLED};
		op_complete(ep, r, ep->rxcq, &e, FI_ADDR_NOTAVAIL);
		break;
	}
	dom_unlock(ep->dom);
	return 0;
}

static int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen) { return -FI_ENOPROTOOPT; }
static int ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	return -FI_ENOPROTOOPT;
}
static int ep_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr, struct fid_ep **tx, void *context)
{
	return -FI_ENOSYS;
}
static int ep_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr, struct fid_ep **rx, void *context)
{
	return -FI_ENOSYS;
}
static ssize_t ep_size_left(struct fid_ep *fep) { return 1 << 16; }

static int ep_setname(fid_t fid, void *addr, size_t addrlen) { return -FI_ENOSYS; }
static int ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct ofx_ep *ep = (struct ofx_ep *)fid;
	size_t want = sizeof(struct ofx_name);
	int ret = 0;
	if (!addrlen || (*addrlen && !addr))
		return -FI_EINVAL;
	if (*addrlen < want)
		ret = -FI_ETOOSMALL;
	else
		memcpy(addr, &ep->self, want);
	*addrlen = want;
	return ret;
}
static int ep_getpeer(struct fid_ep *fep, void *addr, size_t *addrlen) { return -FI_ENOSYS; }
static int ep_connect(struct fid_ep *fep, const void *addr, const void *param, size_t paramlen)
{
	return -FI_ENOSYS;
}
static int ep_listen(struct fid_pep *pep) { return -FI_ENOSYS; }
static int ep_accept(struct fid_ep *fep, const void *param, size_t paramlen) { return -FI_ENOSYS; }
static int ep_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen) { return -FI_ENOSYS; }
static int ep_shutdown(struct fid_ep *fep, uint64_t flags) { return -FI_ENOSYS; }
static int ep_join(struct fid_ep *fep, const void *addr, uint64_t flags, struct fid_mc **mc, void *context)
{
	return -FI_ENOSYS;
}

static int cq_attach(struct ofx_cq *cq, struct ofx_ep *ep)
{
	for (int i = 0; i < cq->neps; i++)
		if (cq->eps[i] == ep)
			return 0;
	if (cq->neps == OFX_CQ_MAX_EPS)
		return -FI_ENOSPC;
	cq->eps[cq->neps++] = ep;
	return 0;
}

static void cq_detach(struct ofx_cq *cq, struct ofx_ep *ep)
{
	for (int i = 0; i < cq->neps; i++)
		if (cq->eps[i] == ep) {
			cq->eps[i] = cq->eps[--cq->neps];
			return;
		}
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct ofx_ep *ep = (struct ofx_ep *)fid;
	int ret = 0;
	if (!bfid)
		return -FI_EINVAL;
	dom_lock(ep->dom);
	switch (bfid->fclass) {
	case FI_CLASS_AV:
		if (ep->av || ((struct ofx_av *)bfid)->dom != ep->dom || ep->enabled)
			ret = -FI_EINVAL;
		else
			ep->av = (struct ofx_av *)bfid;
		break;
	case FI_CLASS_CQ: {
		struct ofx_cq *cq = (struct ofx_cq *)bfid;
		if (cq->dom != ep->dom || ep->enabled || !(flags & (FI_TRANSMIT | FI_RECV)) ||
		    ((flags & FI_TRANSMIT) && ep->txcq) || ((flags & FI_RECV) && ep->rxcq)) {
			ret = -FI_EINVAL;
			break;
		}
		if ((ret = cq_attach(cq, ep)))
			break;
		if (flags & FI_TRANSMIT) {
			ep->txcq = cq;
			ep->tx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
		}
		if (flags & FI_RECV) {
			ep->rxcq = cq;
			ep->rx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
		}
		break;
	}
	default:
		ret = -FI_ENOSYS; /* counters, EQs, ... */
	}
	dom_unlock(ep->dom);
	return ret;
}

static int ep_control(struct fid *fid, int command, void *arg)
{
	struct ofx_ep *ep = (struct ofx_ep *)fid;
	if (command != FI_ENABLE)
		return -FI_ENOSYS;
	if (!ep->av || !ep->txcq || !ep->rxcq)
		return -FI_ENOCQ;
	dom_lock(ep->dom);
	ep->enabled = 1;
	dom_unlock(ep->dom);
	return 0;
}

static int ep_close(struct fid *fid)
{
	struct ofx_ep *ep = (struct ofx_ep *)fid;
	dom_lock(ep->dom);
	/* let eager sends already handed to omx go out (bounded), then close */
	uint64_t end = now_ns() + 2000000000ull;
	for (;;) {
		int busy = 0;
		for (size_t i = 0; i < ep->nconns; i++)
			if (ep->conns[i].qhead)
				busy = 1;
		ep_progress(ep);
		if (!busy || now_ns() > end)
			break;
	}
	/* From here the unexpected handler drops what arrives, and no CQ read progresses ep. */
	ep->closing = 1;
	if (ep->txcq)
		cq_detach(ep->txcq, ep);
	if (ep->rxcq)
		cq_detach(ep->rxcq, ep);
	/* Without the lock: the omx progress thread may be waiting for it in the handler, and the
	 * close waits for a handler running on another thread. (It is refused only from inside
	 * the handler, which an application close never is.) */
	dom_unlock(ep->dom);
	if (ep->oep)
		(void)omx_close_endpoint(ep->oep);
	/* omx has dropped its requests (without completing them) and will not run the handler again:
	 * every op left is ours alone, in a provider list or not. */
	while (ep->live)
		op_free(ep->live);
	while (ep->op_cache) {
		struct ofx_op *op = ep->op_cache;
		ep->op_cache = op->next;
		free(op);
	}
	free(ep->conns);
	free(ep);
	return 0;
}

static struct fi_ops ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ep_close,
	.bind = ep_bind,
	.control = ep_control,
	.ops_open = ofx_no_ops_open,
};

static struct fi_ops_ep ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
	.tx_ctx = ep_tx_ctx,
	.rx_ctx = ep_rx_ctx,
	.rx_size_left = ep_size_left,
	.tx_size_left = ep_size_left,
};

static struct fi_ops_cm ep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = ep_setname,
	.getname = ep_getname,
	.getpeer = ep_getpeer,
	.connect = ep_connect,
	.listen = ep_listen,
	.accept = ep_accept,
	.reject = ep_reject,
	.shutdown = ep_shutdown,
	.join = ep_join,
};

static struct fi_ops_msg ep_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = ep_recv,
	.recvv = ep_recvv,
	.recvmsg = ep_recvmsg,
	.send = ep_send,
	.sendv = ep_sendv,
	.sendmsg = ep_sendmsg,
	.inject = ep_inject,
	.senddata = ep_senddata,
	.injectdata = ep_injectdata,
};

static struct fi_ops_tagged ep_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = ep_trecv,
	.recvv = ep_trecvv,
	.recvmsg = ep_trecvmsg,
	.send = ep_tsend,
	.sendv = ep_tsendv,
	.sendmsg = ep_tsendmsg,
	.inject = ep_tinject,
	.senddata = ep_tsenddata,
	.injectdata = ep_tinjectdata,
};

int dom_endpoint(struct fid_domain *fdom, struct fi_info *info, struct fid_ep **out, void *context)
{
	struct ofx_domain *dom = (struct ofx_domain *)fdom;
	if (!info || (info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC))
		return -FI_ENOSYS;
	struct ofx_ep *ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->ep.fid.fclass = FI_CLASS_EP;
	ep->ep.fid.context = context;
	ep->ep.fid.ops = &ep_fi_ops;
	ep->ep.ops = &ep_ops;
	ep->ep.cm = &ep_cm_ops;
	ep->ep.msg = &ep_msg_ops;
	ep->ep.tagged = &ep_tagged_ops;
	ep->dom = dom;
	ep->caps = info->caps ? info->caps & OFX_CAPS : OFX_CAPS;
	ep->tag_mask = (ep->caps & FI_MSG) ? ~OFX_MSG_BIT : ~0ULL;
	ep->hlen = (ep->caps & FI_REMOTE_CQ_DATA) ? OFX_HDR : 0;
	uint32_t key = ep->hlen ? OFX_KEY_DATA : OFX_KEY; /* peers of the other kind cannot connect */
	ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
	ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags & ~(FI_MULTI_RECV | FI_PEEK | FI_CLAIM) : 0;
	uint32_t idx = OMX_ANY_ENDPOINT;
	const char *e = getenv("OMX_FI_EP_INDEX");
	if (e && *e)
		idx = (uint32_t)strtoul(e, NULL, 0);
	omx_endpoint_param_t p = {.key = OMX_ENDPOINT_PARAM_ERROR_HANDLER};
	p.val.error_handler = OMX_ERRORS_RETURN;
	dom_lock(dom);
	omx_return_t r = omx_open_endpoint(dom->board, idx, key, &p, 1, &ep->oep);
	if (r == OMX_SUCCESS) {
		omx_register_unexp_handler(ep->oep, unexp_handler, ep);
		omx_endpoint_addr_t a;
		omx_get_endpoint_addr(ep->oep, &a);
		omx_decompose_endpoint_addr(a, &ep->self.nic, &ep->self.epid);
		ep->self.key = key;
	}
	dom_unlock(dom);
	if (r != OMX_SUCCESS) {
		free(ep);
		return r == OMX_BUSY ? -FI_EBUSY : -FI_ENODEV;
	}
	const char *v = getenv("OMX_FI_VERBOSE");
	if (v && atoi(v) > 0)
		fprintf(stderr, "omx-fi: endpoint %012" PRIx64 ":%u opened, caps %s, tag mask %016" PRIx64 ", %s\n",
			ep->self.nic, ep->self.epid, fi_tostr(&ep->caps, FI_TYPE_CAPS), ep->tag_mask,
			ep->hlen ? "remote CQ data (message header)" : "no remote CQ data");
	*out = &ep->ep;
	return 0;
}
