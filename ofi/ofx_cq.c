/*
 * ofx_cq.c - completion queues of the omx provider: a growing ring of completions and a list of
 * error completions, and the completions of operations that wait for CQ memory (see ofx.h).
 * Reading a CQ progresses the endpoints bound to it (manual progress).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ofx.h"

#ifdef OFX_TEST_HOOKS
/* TEST BUILD ONLY (ofi/testhooks/libomx-fi.so, never installed): 1 for the first N calls with the
 * counter *left, N from the environment variable var (0 when unset). */
int ofx_test_fail(const char *var, long *left)
{
	if (*left < 0) {
		const char *v = getenv(var);
		*left = v ? atol(v) : 0;
	}
	if (*left <= 0)
		return 0;
	(*left)--;
	return 1;
}

/* OMX_FI_TEST_CQ_ENOMEM=N: the first N CQ writes fail as if out of memory, so that a test can show
 * no completion is lost. */
static long cq_enomem_left = -1;
#define test_cq_enomem() ofx_test_fail("OMX_FI_TEST_CQ_ENOMEM", &cq_enomem_left)
#else
#define test_cq_enomem() 0
#endif

/* The ring's capacity is a power of two (256, doubled): an index is masked, not divided. Two
 * 64-bit divisions a message (the completion's write and its read) sat on MPI's critical path. */
static int cq_grow(struct ofx_cq *cq)
{
	size_t ncap = cq->cap ? cq->cap * 2 : 256;
	struct ofx_cq_slot *n = malloc(ncap * sizeof(*n));
	if (!n)
		return -FI_ENOMEM;
	for (size_t i = 0; i < cq->count; i++)
		n[i] = cq->ring[(cq->head + i) & (cq->cap - 1)];
	free(cq->ring);
	cq->ring = n;
	cq->cap = ncap;
	cq->head = 0;
	return 0;
}

/* Write completion e to cq: to the ring, or if e->err to the error list (src is then unused).
 * 0, or -FI_ENOMEM with nothing written. Domain lock held. */
int cq_write(struct ofx_cq *cq, const struct fi_cq_err_entry *e, fi_addr_t src)
{
	if (test_cq_enomem())
		return -FI_ENOMEM;
	if (e->err) {
		OFX_TRACE("error completion ctx %p flags %" PRIx64 " err %d olen %zu\n", e->op_context, e->flags, e->err,
			  e->olen);
		struct ofx_cq_err *n = calloc(1, sizeof(*n));
		if (!n)
			return -FI_ENOMEM;
		n->e = *e;
		if (cq->err_tail)
			cq->err_tail->next = n;
		else
			cq->err_head = n;
		cq->err_tail = n;
		return 0;
	}
	if (cq->count == cq->cap && cq_grow(cq))
		return -FI_ENOMEM;
	OFX_TRACE("completion ctx %p flags %" PRIx64 " len %zu tag %016" PRIx64 " data %" PRIx64 " src %" PRId64 "\n",
		  e->op_context, e->flags, e->len, e->tag, e->data, (int64_t)src);
	struct ofx_cq_slot *s = &cq->ring[(cq->head + cq->count) & (cq->cap - 1)];
	s->e.op_context = e->op_context;
	s->e.flags = e->flags;
	s->e.len = e->len;
	s->e.buf = e->buf;
	s->e.data = e->data;
	s->e.tag = e->tag;
	s->src = src;
	cq->count++;
	return 0;
}

/* Report op's completion e on cq (none if cq is NULL), then free op. If cq has no memory for it, op
 * keeps the completion on ep->pend_head instead, behind any already there; ep_progress retries:
 * a completion may come late, never not at all. Domain lock held. */
void op_complete(struct ofx_ep *ep, struct ofx_op *op, struct ofx_cq *cq, const struct fi_cq_err_entry *e,
		 fi_addr_t src)
{
	if (cq && (ep->pend_head || cq_write(cq, e, src))) {
		op->pend = *e;
		op->pend_cq = cq;
		op->pend_src = src;
		list_append(&ep->pend_head, &ep->pend_tail, op);
		return;
	}
	op_free(op);
}

/* Write the completions op_complete could not, in order, as far as memory allows. Domain lock held. */
void pend_flush(struct ofx_ep *ep)
{
	struct ofx_op *op;
	while ((op = ep->pend_head) && !cq_write(op->pend_cq, &op->pend, op->pend_src)) {
		list_remove(&ep->pend_head, &ep->pend_tail, NULL, op);
		op_free(op);
	}
}

static size_t cq_entry_size(enum fi_cq_format f)
{
	switch (f) {
	case FI_CQ_FORMAT_CONTEXT: return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG: return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA: return sizeof(struct fi_cq_data_entry);
	default: return sizeof(struct fi_cq_tagged_entry);
	}
}

static ssize_t cq_readfrom(struct fid_cq *fcq, void *buf, size_t count, fi_addr_t *src)
{
	struct ofx_cq *cq = (struct ofx_cq *)fcq;
	if (count && !buf)
		return -FI_EINVAL;
	dom_lock(cq->dom);
	for (int i = 0; i < cq->neps; i++)
		ep_progress(cq->eps[i]);
	ssize_t n = 0;
	if (cq->count == 0 && cq->err_head) {
		n = -FI_EAVAIL;
	} else if (cq->count == 0) {
		n = -FI_EAGAIN;
	} else {
		size_t esz = cq_entry_size(cq->fmt);
		while ((size_t)n < count && cq->count) {
			struct ofx_cq_slot *s = &cq->ring[cq->head];
			/* the formats are prefixes of fi_cq_tagged_entry */
			memcpy((char *)buf + (size_t)n * esz, &s->e, esz);
			if (src)
				src[n] = s->src;
			cq->head = (cq->head + 1) & (cq->cap - 1);
			cq->count--;
			n++;
		}
	}
	/* The clock only every 32 empty reads: reading it on each (a busy MPI wait polls in a tight
	 * loop) took a fifth of a same-host ping-pong's CPU time on the AMD VM. */
	int yield = 0;
	if (n == -FI_EAGAIN && yield_after_ns) {
		if (cq->yielding) {
			yield = 1;
		} else if (!cq->idle_since || ++cq->idle_reads >= 32) {
			uint64_t t = now_ns();
			cq->idle_reads = 0;
			if (!cq->idle_since)
				cq->idle_since = t;
			else
				yield = cq->yielding = t - cq->idle_since >= yield_after_ns;
		}
	} else {
		cq->idle_since = 0;
		cq->idle_reads = 0;
		cq->yielding = 0;
	}
	dom_unlock(cq->dom);
	if (yield)
		sched_yield();
	return n;
}

static ssize_t cq_read(struct fid_cq *fcq, void *buf, size_t count)
{
	return cq_readfrom(fcq, buf, count, NULL);
}

static ssize_t cq_readerr(struct fid_cq *fcq, struct fi_cq_err_entry *buf, uint64_t flags)
{
	struct ofx_cq *cq = (struct ofx_cq *)fcq;
	ssize_t ret = -FI_EAGAIN;
	if (!buf)
		return -FI_EINVAL;
	dom_lock(cq->dom);
	struct ofx_cq_err *e = cq->err_head;
	if (e) {
		cq->err_head = e->next;
		if (!cq->err_head)
			cq->err_tail = NULL;
		/* The provider has no error data (max_err_data 0): the application's err_data buffer
		 * stays its own, with 0 bytes written to it (fi_cq(3), API 1.5 on). */
		void *user_err_data = buf->err_data;
		*buf = e->e;
		buf->err_data = user_err_data;
		buf->err_data_size = 0;
		free(e);
		ret = 1;
	}
	dom_unlock(cq->dom);
	return ret;
}

static ssize_t cq_sreadfrom(struct fid_cq *fcq, void *buf, size_t count, fi_addr_t *src, const void *cond,
			    int timeout)
{
	uint64_t end = timeout < 0 ? UINT64_MAX : now_ns() + (uint64_t)timeout * 1000000ull;
	for (;;) {
		ssize_t n = cq_readfrom(fcq, buf, count, src);
		if (n != -FI_EAGAIN)
			return n;
		if (now_ns() >= end)
			return -FI_EAGAIN;
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
}

static ssize_t cq_sread(struct fid_cq *fcq, void *buf, size_t count, const void *cond, int timeout)
{
	return cq_sreadfrom(fcq, buf, count, NULL, cond, timeout);
}

static int cq_signal(struct fid_cq *fcq) { return -FI_ENOSYS; }

static const char *cq_strerror(struct fid_cq *fcq, int prov_errno, const void *err_data, char *buf, size_t len)
{
	const char *s = omx_strerror((omx_return_t)prov_errno);
	if (buf && len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

static int cq_close(struct fid *fid)
{
	struct ofx_cq *cq = (struct ofx_cq *)fid;
	if (cq->neps)
		return -FI_EBUSY;
	while (cq->err_head) {
		struct ofx_cq_err *e = cq->err_head;
		cq->err_head = e->next;
		free(e);
	}
	free(cq->ring);
	free(cq);
	return 0;
}

static struct fi_ops cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cq_close,
	.bind = ofx_no_bind,
	.control = ofx_no_control,
	.ops_open = ofx_no_ops_open,
};

static struct fi_ops_cq cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cq_read,
	.readfrom = cq_readfrom,
	.readerr = cq_readerr,
	.sread = cq_sread,
	.sreadfrom = cq_sreadfrom,
	.signal = cq_signal,
	.strerror = cq_strerror,
};

int dom_cq_open(struct fid_domain *fdom, struct fi_cq_attr *attr, struct fid_cq **out, void *context)
{
	struct ofx_domain *dom = (struct ofx_domain *)fdom;
	enum fi_cq_format fmt = attr ? attr->format : FI_CQ_FORMAT_UNSPEC;
	if (fmt == FI_CQ_FORMAT_UNSPEC)
		fmt = FI_CQ_FORMAT_TAGGED;
	if (fmt != FI_CQ_FORMAT_CONTEXT && fmt != FI_CQ_FORMAT_MSG && fmt != FI_CQ_FORMAT_DATA &&
	    fmt != FI_CQ_FORMAT_TAGGED)
		return -FI_ENOSYS;
	if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC)
		return -FI_ENOSYS;
	if (attr && (attr->flags & FI_AFFINITY))
		return -FI_ENOSYS;
	struct ofx_cq *cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->cq.fid.fclass = FI_CLASS_CQ;
	cq->cq.fid.context = context;
	cq->cq.fid.ops = &cq_fi_ops;
	cq->cq.ops = &cq_ops;
	cq->dom = dom;
	cq->fmt = fmt;
	*out = &cq->cq;
	return 0;
}
