/*
 * omx_fi.c - "omx": an external libfabric provider (libomx-fi.so) over the native Open-MX API.
 *
 * One fabric ("omx"), one domain per attached omx board (named after its interface), RDM
 * endpoints only. Each fi endpoint owns one omx endpoint. Capabilities: FI_TAGGED (64-bit tags,
 * 63 when FI_MSG is enabled too), FI_MSG, FI_DIRECTED_RECV, FI_SOURCE, FI_REMOTE_CQ_DATA (8
 * bytes), FI_LOCAL_COMM / FI_REMOTE_COMM, peek/claim/discard, cancel of posted receives. Progress
 * is manual; every call is serialised by a per-domain mutex (any threading level).
 *
 * Matching is done here, not by omx: an omx unexpected-message handler sees every incoming
 * message (no omx receive is ever posted in advance). It looks for a matching posted fi receive
 * (tag, ignore mask and, for directed receives, source) and posts an exact-match omx receive into
 * that buffer, which omx then matches to the message at once; otherwise the message is received
 * into a provider bounce buffer and queued as unexpected, in arrival order. The handler runs
 * either inside an omx call made with the domain lock held, or on the omx progress thread, which
 * then takes the lock (see dom_lock).
 *
 * Remote CQ data: an endpoint opened with FI_REMOTE_CQ_DATA prefixes each message with a 16-byte
 * header (isendv / irecvv, no copy) holding the data; such endpoints use another omx endpoint key,
 * so they cannot be connected to by endpoints without the header (the send fails, FI_EACCES).
 *
 * Addresses (fi_getname / fi_av_insert): 16 bytes {nic_id u64, endpoint index u32, key u32}.
 * Connections are made lazily with omx_iconnect on the first send to a peer; sends queue behind
 * the connection and are posted in order (send-after-send ordering is kept).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include "open-mx.h"

#define OFX_NAME "omx"
#define OFX_VERSION FI_VERSION(0, 1)
#define OFX_MSG_BIT (1ULL << 63)
#define OFX_KEY 0x4f4d5846u /* "OMXF" */
#define OFX_INJECT_SIZE 64
#define OFX_KEY_DATA 0x4f4d5844u /* "OMXD": endpoints whose messages carry the data header */
/* With FI_REMOTE_CQ_DATA, every message starts with a header: remote CQ data (8 bytes, little
 * endian), flags (1 byte: OFX_HDR_DATA when the sender passed data), padding. */
#define OFX_HDR 16
#define OFX_HDR_DATA 1
#define OFX_CQ_DATA_SIZE 8
#define OFX_MAX_MSG ((size_t)UINT32_MAX - OFX_HDR)
#define OFX_CAPS                                                                                                 \
	(FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_REMOTE_COMM | FI_LOCAL_COMM |   \
	 FI_REMOTE_CQ_DATA)
#define OFX_CQ_MAX_EPS 16

struct ofx_name {
	uint64_t nic;
	uint32_t epid;
	uint32_t key;
};

struct ofx_domain;
struct ofx_ep;

struct ofx_av {
	struct fid_av av;
	struct ofx_domain *dom;
	struct ofx_name *tab;
	unsigned char *valid;
	size_t n, cap;
	size_t *hash; /* open addressing on (nic, endpoint): index + 1, 0 = empty */
	size_t hcap;
};

struct ofx_cq_slot {
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
};
struct ofx_cq_err {
	struct fi_cq_err_entry e;
	struct ofx_cq_err *next;
};

struct ofx_cq {
	struct fid_cq cq;
	struct ofx_domain *dom;
	enum fi_cq_format fmt;
	struct ofx_cq_slot *ring;
	size_t cap, head, count;
	struct ofx_cq_err *err_head, *err_tail;
	struct ofx_ep *eps[OFX_CQ_MAX_EPS];
	int neps;
	uint64_t idle_since; /* first of the current run of empty reads (0: the last one had entries) */
};

enum ofx_op_type { OP_SEND, OP_RECV, OP_UNEXP, OP_CONN };

struct ofx_op {
	enum ofx_op_type type;
	struct ofx_ep *ep;
	struct ofx_op *next;
	void *context;
	void *buf;
	size_t len;
	uint64_t match, ignore; /* recv: omx-level tag and ignore bits */
	fi_addr_t addr;         /* send: destination; recv: wanted source (or FI_ADDR_UNSPEC) */
	int tagged, completion;
	void *inject_copy;
	omx_request_t req;
	uint64_t data; /* send: remote CQ data */
	int has_data;
	unsigned char hdr[OFX_HDR]; /* send / posted receive: the message header */
	omx_seg_t seg[2];
	/* OP_UNEXP */
	uint64_t snic; /* sender, resolved to an fi_addr when needed (it may be inserted later) */
	uint32_t sepid;
	uint32_t msg_len, xfer;
	omx_return_t code;
	int done, claimed, discard;
	struct ofx_op *claimer;
	/* OP_CONN */
	size_t conn_idx;
};

enum ofx_conn_state { CONN_NONE, CONN_PENDING, CONN_RETRY, CONN_UP };

struct ofx_conn {
	enum ofx_conn_state state;
	omx_endpoint_addr_t addr;
	struct ofx_op *qhead, *qtail;
	struct ofx_op *cop;
	uint64_t deadline, retry_at;
};

struct ofx_ep {
	struct fid_ep ep;
	struct ofx_domain *dom;
	uint64_t caps, tag_mask, tx_op_flags, rx_op_flags;
	struct ofx_av *av;
	struct ofx_cq *txcq, *rxcq;
	int tx_selective, rx_selective, enabled, closing;
	size_t hlen; /* OFX_HDR with FI_REMOTE_CQ_DATA, else 0 */
	omx_endpoint_t oep;
	struct ofx_name self;
	struct ofx_conn *conns;
	size_t nconns;
	struct ofx_op *posted_head, *posted_tail;
	struct ofx_op *unexp_head, *unexp_tail;
};

struct ofx_domain {
	struct fid_domain dom;
	pthread_mutex_t lock;
	uint32_t board;
	uint64_t nic;
};

struct ofx_fabric {
	struct fid_fabric fab;
};

/*
 * The domain lock serialises every provider call. The omx unexpected handler runs either inside
 * an omx call made by a provider function (the calling thread already holds the lock) or on the
 * endpoint's omx progress thread (it does not, and must take it): a thread-local records which
 * domain the current thread holds.
 */
static _Thread_local struct ofx_domain *ofx_held;

static void dom_lock(struct ofx_domain *d)
{
	pthread_mutex_lock(&d->lock);
	ofx_held = d;
}

static void dom_unlock(struct ofx_domain *d)
{
	ofx_held = NULL;
	pthread_mutex_unlock(&d->lock);
}

static uint64_t connect_timeout_ns = 60ull * 1000000000ull;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ omx library */

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int omx_ready = -1; /* -1 not tried, 0 failed, 1 ok */
static int ofx_verbose;   /* OMX_FI_VERBOSE: 1 endpoints, 2 refused hints, 3 all hints, 4 every operation */
/* OMX_FI_YIELD_US: after polling a CQ in vain for this long, every further empty read yields the
 * CPU. Open MPI's OFI MTL spins on fi_cq_read inside blocking sends without ever yielding, so with
 * two ranks on one CPU a rendezvous (which needs the receiver to run) cost a scheduler time slice
 * (~4 ms) per message. 0 = never yield. */
static uint64_t yield_after_ns = 10000;

#define OFX_TRACE(...)                                                                                          \
	do {                                                                                                     \
		if (ofx_verbose >= 4) {                                                                          \
			fprintf(stderr, "omx-fi: %.6f %d ", (double)now_ns() * 1e-9, (int)getpid());                               \
			fprintf(stderr, __VA_ARGS__);                                                            \
		}                                                                                                \
	} while (0)

static int ofx_omx_init(void)
{
	pthread_mutex_lock(&init_lock);
	if (omx_ready < 0) {
		omx_set_error_handler(NULL, OMX_ERRORS_RETURN);
		omx_ready = omx_init() == OMX_SUCCESS;
		const char *v = getenv("OMX_FI_VERBOSE");
		ofx_verbose = v ? atoi(v) : 0;
		const char *t = getenv("OMX_FI_CONNECT_TIMEOUT");
		if (t && atoi(t) > 0)
			connect_timeout_ns = (uint64_t)atoi(t) * 1000000ull;
		const char *y = getenv("OMX_FI_YIELD_US");
		if (y)
			yield_after_ns = (uint64_t)strtoull(y, NULL, 0) * 1000ull;
	}
	int ok = omx_ready;
	pthread_mutex_unlock(&init_lock);
	return ok;
}

static int ofx_errno(omx_return_t r)
{
	switch (r) {
	case OMX_SUCCESS: return 0;
	case OMX_MESSAGE_TRUNCATED: return FI_ETRUNC;
	case OMX_CANCELLED: return FI_ECANCELED;
	case OMX_NO_RESOURCES:
	case OMX_NO_SYSTEM_RESOURCES: return FI_ENOMEM;
	case OMX_TIMEOUT: return FI_ETIMEDOUT;
	case OMX_REMOTE_ENDPOINT_UNREACHABLE:
	case OMX_REMOTE_ENDPOINT_CLOSED:
	case OMX_REMOTE_ENDPOINT_BAD_ID:
	case OMX_NIC_ID_NOT_FOUND:
	case OMX_PEER_NOT_FOUND: return FI_EHOSTUNREACH;
	case OMX_REMOTE_ENDPOINT_BAD_CONNECTION_KEY: return FI_EACCES;
	case OMX_MESSAGE_ABORTED: return FI_ECONNABORTED;
	default: return FI_EIO;
	}
}

/* ------------------------------------------------------------------ generic stubs */

static int ofx_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags) { return -FI_ENOSYS; }
static int ofx_no_control(struct fid *fid, int command, void *arg) { return -FI_ENOSYS; }
static int ofx_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	return -FI_ENOSYS;
}

/* ------------------------------------------------------------------ completion queue */

static int cq_push(struct ofx_cq *cq, void *ctx, uint64_t flags, size_t len, void *buf, uint64_t tag,
		   uint64_t data, fi_addr_t src)
{
	if (cq->count == cq->cap) {
		size_t ncap = cq->cap ? cq->cap * 2 : 256;
		struct ofx_cq_slot *n = malloc(ncap * sizeof(*n));
		if (!n)
			return -FI_ENOMEM;
		for (size_t i = 0; i < cq->count; i++)
			n[i] = cq->ring[(cq->head + i) % cq->cap];
		free(cq->ring);
		cq->ring = n;
		cq->cap = ncap;
		cq->head = 0;
	}
	OFX_TRACE("completion ctx %p flags %" PRIx64 " len %zu tag %016" PRIx64 " data %" PRIx64 " src %" PRId64 "\n",
		  ctx, flags, len, tag, data, (int64_t)src);
	struct ofx_cq_slot *s = &cq->ring[(cq->head + cq->count) % cq->cap];
	s->e.op_context = ctx;
	s->e.flags = flags;
	s->e.len = len;
	s->e.buf = buf;
	s->e.data = data;
	s->e.tag = tag;
	s->src = src;
	cq->count++;
	return 0;
}

static void cq_push_err(struct ofx_cq *cq, void *ctx, uint64_t flags, size_t len, void *buf, uint64_t tag,
			uint64_t data, size_t olen, int err, int prov_errno)
{
	OFX_TRACE("error completion ctx %p flags %" PRIx64 " err %d olen %zu\n", ctx, flags, err, olen);
	struct ofx_cq_err *e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->e.op_context = ctx;
	e->e.flags = flags;
	e->e.len = len;
	e->e.buf = buf;
	e->e.tag = tag;
	e->e.data = data;
	e->e.olen = olen;
	e->e.err = err;
	e->e.prov_errno = prov_errno;
	if (cq->err_tail)
		cq->err_tail->next = e;
	else
		cq->err_head = e;
	cq->err_tail = e;
}

static void ep_progress(struct ofx_ep *ep);

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
			cq->head = (cq->head + 1) % cq->cap;
			cq->count--;
			n++;
		}
	}
	int yield = 0;
	if (n == -FI_EAGAIN && yield_after_ns) {
		uint64_t t = now_ns();
		if (!cq->idle_since)
			cq->idle_since = t;
		else
			yield = t - cq->idle_since >= yield_after_ns;
	} else {
		cq->idle_since = 0;
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
		*buf = e->e;
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

static int dom_cq_open(struct fid_domain *fdom, struct fi_cq_attr *attr, struct fid_cq **out, void *context)
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

/* ------------------------------------------------------------------ address vector */

static size_t av_hash(uint64_t nic, uint32_t epid, size_t cap)
{
	uint64_t h = (nic ^ ((uint64_t)epid << 48) ^ epid) * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (cap - 1);
}

static void av_hash_put(struct ofx_av *av, size_t idx)
{
	size_t i = av_hash(av->tab[idx].nic, av->tab[idx].epid, av->hcap);
	while (av->hash[i])
		i = (i + 1) & (av->hcap - 1);
	av->hash[i] = idx + 1;
}

/* fi_addr of (nic, endpoint) in av, FI_ADDR_NOTAVAIL if absent. Domain lock held. */
static fi_addr_t av_find(const struct ofx_av *av, uint64_t nic, uint32_t epid)
{
	if (!av || !av->hcap)
		return FI_ADDR_NOTAVAIL;
	for (size_t i = av_hash(nic, epid, av->hcap); av->hash[i]; i = (i + 1) & (av->hcap - 1)) {
		size_t k = av->hash[i] - 1;
		if (av->valid[k] && av->tab[k].nic == nic && av->tab[k].epid == epid)
			return k;
	}
	return FI_ADDR_NOTAVAIL;
}

static int av_insert(struct fid_av *fav, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
		     void *context)
{
	struct ofx_av *av = (struct ofx_av *)fav;
	if (flags)
		return -FI_EBADFLAGS;
	if (count && !addr)
		return -FI_EINVAL;
	if (count > ((size_t)1 << 32))
		return -FI_ENOMEM;
	dom_lock(av->dom);
	if (av->n + count > av->cap) {
		size_t ncap = av->cap ? av->cap : 64;
		while (ncap < av->n + count)
			ncap *= 2;
		struct ofx_name *t = realloc(av->tab, ncap * sizeof(*t));
		unsigned char *v = t ? realloc(av->valid, ncap) : NULL;
		if (t)
			av->tab = t;
		if (!t || !v) {
			dom_unlock(av->dom);
			return -FI_ENOMEM;
		}
		av->valid = v;
		av->cap = ncap;
	}
	if ((av->n + count) * 2 > av->hcap) {
		size_t hcap = av->hcap ? av->hcap : 128;
		while ((av->n + count) * 2 > hcap)
			hcap *= 2;
		size_t *h = calloc(hcap, sizeof(*h));
		if (!h) {
			dom_unlock(av->dom);
			return -FI_ENOMEM;
		}
		free(av->hash);
		av->hash = h;
		av->hcap = hcap;
		for (size_t k = 0; k < av->n; k++)
			av_hash_put(av, k);
	}
	for (size_t i = 0; i < count; i++) {
		memcpy(&av->tab[av->n], (const char *)addr + i * sizeof(struct ofx_name), sizeof(struct ofx_name));
		av->valid[av->n] = 1;
		av_hash_put(av, av->n);
		OFX_TRACE("av insert %012" PRIx64 ":%u key %08x -> fi_addr %zu\n", av->tab[av->n].nic, av->tab[av->n].epid,
			  av->tab[av->n].key, av->n);
		if (fi_addr)
			fi_addr[i] = av->n;
		av->n++;
	}
	dom_unlock(av->dom);
	return (int)count;
}

static int av_insertsvc(struct fid_av *fav, const char *node, const char *service, fi_addr_t *fi_addr,
			uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static int av_insertsym(struct fid_av *fav, const char *node, size_t nodecnt, const char *service,
			size_t svccnt, fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static int av_remove(struct fid_av *fav, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	struct ofx_av *av = (struct ofx_av *)fav;
	int ret = 0;
	if (count && !fi_addr)
		return -FI_EINVAL;
	dom_lock(av->dom);
	for (size_t i = 0; i < count; i++) {
		if (fi_addr[i] >= av->n)
			ret = -FI_EINVAL;
		else
			av->valid[fi_addr[i]] = 0;
	}
	dom_unlock(av->dom);
	return ret;
}

static int av_lookup(struct fid_av *fav, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
	struct ofx_av *av = (struct ofx_av *)fav;
	int ret = 0;
	if (!addrlen || (*addrlen && !addr))
		return -FI_EINVAL;
	dom_lock(av->dom);
	if (fi_addr >= av->n || !av->valid[fi_addr]) {
		ret = -FI_EINVAL;
	} else {
		size_t n = *addrlen < sizeof(struct ofx_name) ? *addrlen : sizeof(struct ofx_name);
		memcpy(addr, &av->tab[fi_addr], n);
		*addrlen = sizeof(struct ofx_name);
	}
	dom_unlock(av->dom);
	return ret;
}

static const char *av_straddr(struct fid_av *fav, const void *addr, char *buf, size_t *len)
{
	struct ofx_name nm;
	if (!addr || !len || (*len && !buf))
		return NULL;
	memcpy(&nm, addr, sizeof(nm));
	char tmp[64];
	int n = snprintf(tmp, sizeof(tmp), "omx://%012" PRIx64 ":%u:%08x", nm.nic, nm.epid, nm.key);
	if (*len > 0)
		snprintf(buf, *len, "%s", tmp);
	*len = (size_t)n + 1;
	return buf;
}

static int av_set_open(struct fid_av *fav, struct fi_av_set_attr *attr, struct fid_av_set **set, void *context)
{
	return -FI_ENOSYS;
}

static int av_close(struct fid *fid)
{
	struct ofx_av *av = (struct ofx_av *)fid;
	free(av->tab);
	free(av->valid);
	free(av->hash);
	free(av);
	return 0;
}

static struct fi_ops av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = av_close,
	.bind = ofx_no_bind,
	.control = ofx_no_control,
	.ops_open = ofx_no_ops_open,
};

static struct fi_ops_av av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = av_insert,
	.insertsvc = av_insertsvc,
	.insertsym = av_insertsym,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
	.av_set = av_set_open,
};

static int dom_av_open(struct fid_domain *fdom, struct fi_av_attr *attr, struct fid_av **out, void *context)
{
	if (attr && attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE)
		return -FI_EINVAL;
	if (attr && (attr->flags & (FI_EVENT | FI_READ | FI_SYMMETRIC)))
		return -FI_ENOSYS;
	if (attr && attr->name)
		return -FI_ENOSYS; /* shared AVs */
	struct ofx_av *av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	av->av.fid.fclass = FI_CLASS_AV;
	av->av.fid.context = context;
	av->av.fid.ops = &av_fi_ops;
	av->av.ops = &av_ops;
	av->dom = (struct ofx_domain *)fdom;
	*out = &av->av;
	return 0;
}

/* ------------------------------------------------------------------ endpoint: matching */

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

static void list_append(struct ofx_op **head, struct ofx_op **tail, struct ofx_op *op)
{
	op->next = NULL;
	if (*tail)
		(*tail)->next = op;
	else
		*head = op;
	*tail = op;
}

static void list_remove(struct ofx_op **head, struct ofx_op **tail, struct ofx_op *prev, struct ofx_op *op)
{
	if (prev)
		prev->next = op->next;
	else
		*head = op->next;
	if (*tail == op)
		*tail = prev;
	op->next = NULL;
}

static void op_free(struct ofx_op *op)
{
	if (!op)
		return;
	free(op->inject_copy);
	free(op);
}

/* Post the omx receive of the message matched by r (exact match_info). */
static omx_return_t post_recv(struct ofx_ep *ep, struct ofx_op *r, uint64_t match)
{
	size_t len = r->len > OFX_MAX_MSG ? OFX_MAX_MSG : r->len;
	if (!ep->hlen)
		return omx_irecv(ep->oep, r->buf, len, match, ~0ULL, r, &r->req);
	r->seg[0].ptr = r->hdr;
	r->seg[0].len = OFX_HDR;
	r->seg[1].ptr = r->buf;
	r->seg[1].len = (uint32_t)len;
	return omx_irecvv(ep->oep, r->seg, 2, match, ~0ULL, r, &r->req);
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
	struct ofx_op *u = calloc(1, sizeof(*u));
	if (!u)
		return OMX_UNEXP_HANDLER_RECV_CONTINUE; /* omx keeps it; never matched (out of memory) */
	u->type = OP_UNEXP;
	u->ep = ep;
	u->match = match;
	u->addr = src;
	u->snic = snic;
	u->sepid = sepid;
	u->msg_len = msg_length;
	u->buf = malloc(msg_length ? msg_length : 1); /* the whole message, header included */
	if (!u->buf) {
		free(u);
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
static omx_unexp_handler_action_t unexp_handler(void *context, omx_endpoint_addr_t source, uint64_t match,
						uint32_t msg_length, void *data)
{
	struct ofx_ep *ep = context;
	int take = ofx_held != ep->dom; /* on the omx progress thread */
	if (take)
		dom_lock(ep->dom);
	omx_unexp_handler_action_t a = OMX_UNEXP_HANDLER_RECV_FINISHED; /* closing: drop it */
	if (!ep->closing)
		a = handle_unexp(ep, source, match, msg_length, data);
	if (take)
		dom_unlock(ep->dom);
	return a;
}

static uint64_t recv_flags(const struct ofx_op *r)
{
	return FI_RECV | (r->tagged ? FI_TAGGED : FI_MSG);
}

static void hdr_put(unsigned char *h, uint64_t data, int has_data)
{
	memset(h, 0, OFX_HDR);
	for (int i = 0; i < 8; i++)
		h[i] = (unsigned char)(data >> (8 * i));
	h[8] = has_data ? OFX_HDR_DATA : 0;
}

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
static void recv_complete(struct ofx_ep *ep, struct ofx_op *r, uint64_t match, uint32_t raw_len, uint32_t raw_xfer,
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
	if (code != OMX_SUCCESS) {
		if (ep->rxcq)
			cq_push_err(ep->rxcq, r->context, flags, xfer, r->buf, tag, data,
				    msg_len > xfer ? msg_len - xfer : 0, ofx_errno(code), (int)code);
	} else if (ep->rxcq && r->completion) {
		cq_push(ep->rxcq, r->context, flags, xfer, r->buf, tag, data, r->addr);
	}
	op_free(r);
}

/* Deliver buffered unexpected message u (complete) to receive r, and free u. */
static void unexp_deliver(struct ofx_ep *ep, struct ofx_op *u, struct ofx_op *r)
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
	free(u->buf);
	op_free(u);
}

/* ------------------------------------------------------------------ endpoint: connections, sends */

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

static void send_fail(struct ofx_ep *ep, struct ofx_op *s, omx_return_t code)
{
	if (ep->txcq && !s->inject_copy)
		cq_push_err(ep->txcq, s->context, FI_SEND | (s->tagged ? FI_TAGGED : FI_MSG), s->len, s->buf,
			    s->tagged ? s->match : 0, 0, 0, ofx_errno(code), (int)code);
	op_free(s);
}

static void send_post(struct ofx_ep *ep, struct ofx_conn *c, struct ofx_op *s)
{
	void *b = s->inject_copy ? s->inject_copy : s->buf;
	omx_return_t r;
	if (ep->hlen) {
		hdr_put(s->hdr, s->data, s->has_data);
		s->seg[0].ptr = s->hdr;
		s->seg[0].len = OFX_HDR;
		s->seg[1].ptr = b;
		s->seg[1].len = (uint32_t)s->len;
		r = omx_isendv(ep->oep, s->seg, 2, c->addr, s->match, s, &s->req);
	} else {
		r = omx_isend(ep->oep, b, s->len, c->addr, s->match, s, &s->req);
	}
	if (r != OMX_SUCCESS)
		send_fail(ep, s, r);
}

static void conn_start(struct ofx_ep *ep, size_t idx)
{
	struct ofx_conn *c = &ep->conns[idx];
	struct ofx_name *nm = &ep->av->tab[idx];
	struct ofx_op *cop = c->cop;
	if (!cop) {
		cop = calloc(1, sizeof(*cop));
		if (!cop)
			goto retry;
		cop->type = OP_CONN;
		cop->ep = ep;
		cop->conn_idx = idx;
		c->cop = cop;
	}
	if (omx_iconnect(ep->oep, nm->nic, nm->epid, nm->key, 0, cop, &cop->req) == OMX_SUCCESS) {
		c->state = CONN_PENDING;
		return;
	}
retry:
	c->state = CONN_RETRY;
	c->retry_at = now_ns() + 100000000ull;
}

static void conn_fail_all(struct ofx_ep *ep, struct ofx_conn *c, omx_return_t code)
{
	while (c->qhead) {
		struct ofx_op *s = c->qhead;
		c->qhead = s->next;
		send_fail(ep, s, code);
	}
	c->qtail = NULL;
	c->state = CONN_NONE;
}

static void conn_done(struct ofx_ep *ep, struct ofx_op *cop, const omx_status_t *st)
{
	struct ofx_conn *c = &ep->conns[cop->conn_idx];
	cop->req = NULL;
	if (st->code == OMX_SUCCESS) {
		c->addr = st->addr;
		c->state = CONN_UP;
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
		c->state = CONN_RETRY; /* peer endpoint not open yet, or no answer: try again */
		c->retry_at = now_ns() + 100000000ull;
		return;
	}
	conn_fail_all(ep, c, st->code);
}

static void ep_progress(struct ofx_ep *ep)
{
	if (!ep->oep)
		return;
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
			if (st.code != OMX_SUCCESS)
				send_fail(ep, op, st.code);
			else {
				if (ep->txcq && op->completion)
					cq_push(ep->txcq, op->context, FI_SEND | (op->tagged ? FI_TAGGED : FI_MSG), 0,
						NULL, 0, 0, FI_ADDR_NOTAVAIL);
				op_free(op);
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
			else if (op->discard) {
				free(op->buf);
				op_free(op);
			}
			break;
		case OP_CONN:
			conn_done(ep, op, &st);
			break;
		}
	}
	/* connection retries and deadlines */
	uint64_t t = 0;
	for (size_t i = 0; i < ep->nconns; i++) {
		struct ofx_conn *c = &ep->conns[i];
		if (c->state != CONN_RETRY && c->state != CONN_PENDING)
			continue;
		if (!t)
			t = now_ns();
		if (t >= c->deadline) {
			if (c->state == CONN_PENDING && c->cop && c->cop->req) {
				uint32_t res = 0;
				omx_cancel(ep->oep, &c->cop->req, &res);
				if (!res)
					continue; /* completed meanwhile: handled at the next pass */
			}
			conn_fail_all(ep, c, OMX_TIMEOUT);
		} else if (c->state == CONN_RETRY && t >= c->retry_at) {
			conn_start(ep, i);
		}
	}
}

static ssize_t do_send(struct ofx_ep *ep, const void *buf, size_t len, fi_addr_t dest, uint64_t match, int tagged,
		       void *context, uint64_t flags, uint64_t data)
{
	if (len > OFX_MAX_MSG)
		return -FI_EMSGSIZE;
	if ((flags & FI_REMOTE_CQ_DATA) && !ep->hlen)
		return -FI_EINVAL; /* endpoint opened without FI_REMOTE_CQ_DATA */
	OFX_TRACE("send%s len %zu dest %" PRId64 " tag %016" PRIx64 " flags %" PRIx64 " data %" PRIx64 "\n",
		  tagged ? " tagged" : "", len, (int64_t)dest, match, flags, data);
	if ((flags & FI_INJECT) && len > OFX_INJECT_SIZE)
		return -FI_EMSGSIZE;
	struct ofx_op *s = calloc(1, sizeof(*s));
	if (!s)
		return -FI_ENOMEM;
	s->type = OP_SEND;
	s->ep = ep;
	s->context = context;
	s->buf = (void *)(uintptr_t)buf;
	s->len = len;
	s->match = match;
	s->tagged = tagged;
	s->addr = dest;
	s->has_data = (flags & FI_REMOTE_CQ_DATA) != 0;
	s->data = s->has_data ? data : 0;
	if (flags & FI_INJECT) {
		s->inject_copy = malloc(len ? len : 1);
		if (!s->inject_copy) {
			free(s);
			return -FI_ENOMEM;
		}
		if (len)
			memcpy(s->inject_copy, buf, len); /* buf may be NULL for 0 bytes */
	} else {
		s->completion = !ep->tx_selective || (flags & FI_COMPLETION);
	}
	ssize_t ret = 0;
	dom_lock(ep->dom);
	if (!ep->enabled || !ep->av) {
		ret = -FI_EOPBADSTATE;
	} else if (dest >= ep->av->n || !ep->av->valid[dest]) {
		ret = -FI_EINVAL;
	} else {
		struct ofx_conn *c = conn_get(ep, dest);
		if (!c) {
			ret = -FI_ENOMEM;
		} else if (c->state == CONN_UP && !c->qhead) {
			send_post(ep, c, s);
			s = NULL;
		} else {
			list_append(&c->qhead, &c->qtail, s);
			s = NULL;
			if (c->state == CONN_NONE) {
				c->deadline = now_ns() + connect_timeout_ns;
				conn_start(ep, dest);
			}
		}
	}
	dom_unlock(ep->dom);
	if (ret)
		op_free(s);
	return ret;
}

static ssize_t do_recv(struct ofx_ep *ep, void *buf, size_t len, fi_addr_t src, uint64_t tag, uint64_t ignore,
		       int tagged, void *context, uint64_t flags)
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
	if (flags & FI_PEEK) {
		struct ofx_op *u;
		for (u = ep->unexp_head; u; u = u->next)
			if (!u->claimed && op_matches(ep, &tmpl, u->match, unexp_src(ep, u)))
				break;
		uint64_t fl = FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
		/* a message still being received (its header may not be here yet) counts as not there */
		if (!u || !u->done || u->msg_len < ep->hlen) {
			if (ep->rxcq)
				cq_push_err(ep->rxcq, context, fl, 0, NULL, tag, 0, 0, FI_ENOMSG, 0);
		} else {
			uint64_t data = 0, utag = tagged ? u->match : 0;
			size_t ulen = u->msg_len - ep->hlen;
			fi_addr_t usrc = unexp_src(ep, u);
			if (ep->hlen) {
				int has = 0;
				data = hdr_get(u->buf, &has);
				if (has)
					fl |= FI_REMOTE_CQ_DATA;
				else
					data = 0;
			}
			if ((flags & FI_CLAIM) && context) {
				u->claimed = 1;
				((struct fi_context *)context)->internal[0] = u;
			}
			if (flags & FI_DISCARD) {
				struct ofx_op *p = NULL;
				for (struct ofx_op *x = ep->unexp_head; x != u; x = x->next)
					p = x;
				list_remove(&ep->unexp_head, &ep->unexp_tail, p, u);
				free(u->buf);
				op_free(u);
			}
			if (ep->rxcq)
				cq_push(ep->rxcq, context, fl, ulen, NULL, utag, data, usrc);
		}
		dom_unlock(ep->dom);
		return 0;
	}
	struct ofx_op *r = calloc(1, sizeof(*r));
	if (!r) {
		dom_unlock(ep->dom);
		return -FI_ENOMEM;
	}
	r->type = OP_RECV;
	r->ep = ep;
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
			free(r);
			dom_unlock(ep->dom);
			return -FI_EINVAL;
		}
		if (flags & FI_DISCARD) {
			list_remove(&ep->unexp_head, &ep->unexp_tail, prev, u);
			if (u->done) {
				free(u->buf);
				op_free(u);
			} else {
				u->discard = 1;
			}
			if (ep->rxcq)
				cq_push(ep->rxcq, context, recv_flags(r), 0, NULL, tag, 0, FI_ADDR_NOTAVAIL);
			op_free(r);
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
		if (u->done)
			unexp_deliver(ep, u, r);
		else
			u->claimer = r;
	} else {
		list_append(&ep->posted_head, &ep->posted_tail, r);
	}
	dom_unlock(ep->dom);
	return ret;
}

/* ------------------------------------------------------------------ endpoint: fi ops */

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
	return do_send(ep, buf, len, dest, tag, 1, context, ep->tx_op_flags & ~FI_REMOTE_CQ_DATA, 0);
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
		       msg->data);
}

static ssize_t ep_tinject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest, uint64_t tag)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_TAGGED) || check_tag(ep, tag))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, tag, 1, NULL, FI_INJECT, 0);
}

static ssize_t ep_tsenddata(struct fid_ep *fep, const void *buf, size_t len, void *desc, uint64_t data,
			    fi_addr_t dest, uint64_t tag, void *context)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_TAGGED) || check_tag(ep, tag))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, tag, 1, context, ep->tx_op_flags | FI_REMOTE_CQ_DATA, data);
}

static ssize_t ep_tinjectdata(struct fid_ep *fep, const void *buf, size_t len, uint64_t data, fi_addr_t dest,
			      uint64_t tag)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_TAGGED) || check_tag(ep, tag))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, tag, 1, NULL, FI_INJECT | FI_REMOTE_CQ_DATA, data);
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
	return do_send(ep, buf, len, dest, OFX_MSG_BIT, 0, context, ep->tx_op_flags & ~FI_REMOTE_CQ_DATA, 0);
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
		       msg->data);
}

static ssize_t ep_inject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_MSG))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, OFX_MSG_BIT, 0, NULL, FI_INJECT, 0);
}

static ssize_t ep_senddata(struct fid_ep *fep, const void *buf, size_t len, void *desc, uint64_t data,
			   fi_addr_t dest, void *context)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_MSG))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, OFX_MSG_BIT, 0, context, ep->tx_op_flags | FI_REMOTE_CQ_DATA, data);
}

static ssize_t ep_injectdata(struct fid_ep *fep, const void *buf, size_t len, uint64_t data, fi_addr_t dest)
{
	struct ofx_ep *ep = (struct ofx_ep *)fep;
	if (!(ep->caps & FI_MSG))
		return -FI_EINVAL;
	return do_send(ep, buf, len, dest, OFX_MSG_BIT, 0, NULL, FI_INJECT | FI_REMOTE_CQ_DATA, data);
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
		if (ep->rxcq)
			cq_push_err(ep->rxcq, r->context, recv_flags(r), 0, r->buf, r->tagged ? r->match : 0, 0, 0, FI_ECANCELED,
				    OMX_CANCELLED);
		op_free(r);
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
	/* The omx progress thread may be waiting for the lock in the handler: close without it. */
	ep->closing = 1;
	dom_unlock(ep->dom);
	if (ep->oep)
		omx_close_endpoint(ep->oep); /* silently drops outstanding omx requests */
	dom_lock(ep->dom);
	if (ep->txcq)
		cq_detach(ep->txcq, ep);
	if (ep->rxcq)
		cq_detach(ep->rxcq, ep);
	for (size_t i = 0; i < ep->nconns; i++) {
		struct ofx_op *s = ep->conns[i].qhead;
		while (s) {
			struct ofx_op *n = s->next;
			op_free(s);
			s = n;
		}
		op_free(ep->conns[i].cop);
	}
	free(ep->conns);
	for (struct ofx_op *r = ep->posted_head, *n; r; r = n) {
		n = r->next;
		op_free(r);
	}
	for (struct ofx_op *u = ep->unexp_head, *n; u; u = n) {
		n = u->next;
		free(u->buf);
		op_free(u);
	}
	dom_unlock(ep->dom);
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

static int dom_endpoint(struct fid_domain *fdom, struct fi_info *info, struct fid_ep **out, void *context)
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

/* ------------------------------------------------------------------ domain */

static int dom_close(struct fid *fid)
{
	struct ofx_domain *dom = (struct ofx_domain *)fid;
	pthread_mutex_destroy(&dom->lock);
	free(dom);
	return 0;
}

static int dom_scalable_ep(struct fid_domain *d, struct fi_info *info, struct fid_ep **sep, void *context)
{
	return -FI_ENOSYS;
}
static int dom_cntr_open(struct fid_domain *d, struct fi_cntr_attr *attr, struct fid_cntr **cntr, void *context)
{
	return -FI_ENOSYS;
}
static int dom_poll_open(struct fid_domain *d, struct fi_poll_attr *attr, struct fid_poll **pollset)
{
	return -FI_ENOSYS;
}
static int dom_stx_ctx(struct fid_domain *d, struct fi_tx_attr *attr, struct fid_stx **stx, void *context)
{
	return -FI_ENOSYS;
}
static int dom_srx_ctx(struct fid_domain *d, struct fi_rx_attr *attr, struct fid_ep **rx_ep, void *context)
{
	return -FI_ENOSYS;
}
static int dom_query_atomic(struct fid_domain *d, enum fi_datatype datatype, enum fi_op op,
			    struct fi_atomic_attr *attr, uint64_t flags)
{
	return -FI_ENOSYS;
}
static int dom_query_collective(struct fid_domain *d, enum fi_collective_op coll, struct fi_collective_attr *attr,
				uint64_t flags)
{
	return -FI_ENOSYS;
}
static int dom_endpoint2(struct fid_domain *d, struct fi_info *info, struct fid_ep **ep, uint64_t flags,
			 void *context)
{
	if (flags)
		return -FI_EBADFLAGS;
	return dom_endpoint(d, info, ep, context);
}

static int mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
		  uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context)
{
	return -FI_ENOSYS;
}
static int mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access, uint64_t offset,
		   uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context)
{
	return -FI_ENOSYS;
}
static int mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr)
{
	return -FI_ENOSYS;
}

static struct fi_ops dom_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = dom_close,
	.bind = ofx_no_bind,
	.control = ofx_no_control,
	.ops_open = ofx_no_ops_open,
};

static struct fi_ops_domain dom_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = dom_av_open,
	.cq_open = dom_cq_open,
	.endpoint = dom_endpoint,
	.scalable_ep = dom_scalable_ep,
	.cntr_open = dom_cntr_open,
	.poll_open = dom_poll_open,
	.stx_ctx = dom_stx_ctx,
	.srx_ctx = dom_srx_ctx,
	.query_atomic = dom_query_atomic,
	.query_collective = dom_query_collective,
	.endpoint2 = dom_endpoint2,
};

static struct fi_ops_mr mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = mr_reg,
	.regv = mr_regv,
	.regattr = mr_regattr,
};

static int board_of_domain(const char *name, uint32_t *board)
{
	uint32_t count = 0;
	if (omx_get_info(NULL, OMX_INFO_BOARD_COUNT, NULL, 0, &count, sizeof(count)) != OMX_SUCCESS)
		return -1;
	for (uint32_t b = 0; b < 32; b++) {
		uint8_t bi = (uint8_t)b;
		char ifname[OMX_HOSTNAMELEN_MAX + 1] = {0};
		if (omx_get_info(NULL, OMX_INFO_BOARD_IFACENAME, &bi, 1, ifname, OMX_HOSTNAMELEN_MAX) != OMX_SUCCESS)
			continue;
		if (!name || !strcmp(name, ifname)) {
			*board = b;
			return 0;
		}
	}
	return -1;
}

static int fab_domain(struct fid_fabric *fab, struct fi_info *info, struct fid_domain **out, void *context)
{
	uint32_t board;
	if (!ofx_omx_init())
		return -FI_ENODEV;
	if (board_of_domain(info && info->domain_attr ? info->domain_attr->name : NULL, &board))
		return -FI_ENODEV;
	struct ofx_domain *dom = calloc(1, sizeof(*dom));
	if (!dom)
		return -FI_ENOMEM;
	dom->dom.fid.fclass = FI_CLASS_DOMAIN;
	dom->dom.fid.context = context;
	dom->dom.fid.ops = &dom_fi_ops;
	dom->dom.ops = &dom_ops;
	dom->dom.mr = &mr_ops;
	dom->board = board;
	omx_board_number_to_nic_id(board, &dom->nic);
	pthread_mutex_init(&dom->lock, NULL);
	*out = &dom->dom;
	return 0;
}

/* ------------------------------------------------------------------ fabric, getinfo, provider */

static int fab_close(struct fid *fid)
{
	free(fid);
	return 0;
}

static int fab_passive_ep(struct fid_fabric *f, struct fi_info *info, struct fid_pep **pep, void *context)
{
	return -FI_ENOSYS;
}
static int fab_eq_open(struct fid_fabric *f, struct fi_eq_attr *attr, struct fid_eq **eq, void *context)
{
	return -FI_ENOSYS;
}
static int fab_wait_open(struct fid_fabric *f, struct fi_wait_attr *attr, struct fid_wait **waitset)
{
	return -FI_ENOSYS;
}
static int fab_trywait(struct fid_fabric *f, struct fid **fids, int count) { return -FI_ENOSYS; }
static int fab_domain2(struct fid_fabric *f, struct fi_info *info, struct fid_domain **dom, uint64_t flags,
		       void *context)
{
	if (flags)
		return -FI_EBADFLAGS;
	return fab_domain(f, info, dom, context);
}

static struct fi_ops fab_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = fab_close,
	.bind = ofx_no_bind,
	.control = ofx_no_control,
	.ops_open = ofx_no_ops_open,
};

static struct fi_ops_fabric fab_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = fab_domain,
	.passive_ep = fab_passive_ep,
	.eq_open = fab_eq_open,
	.wait_open = fab_wait_open,
	.trywait = fab_trywait,
	.domain2 = fab_domain2,
};

static int ofx_fabric(struct fi_fabric_attr *attr, struct fid_fabric **out, void *context)
{
	if (attr && attr->name && strcmp(attr->name, OFX_NAME))
		return -FI_ENODATA;
	struct ofx_fabric *f = calloc(1, sizeof(*f));
	if (!f)
		return -FI_ENOMEM;
	f->fab.fid.fclass = FI_CLASS_FABRIC;
	f->fab.fid.context = context;
	f->fab.fid.ops = &fab_fi_ops;
	f->fab.ops = &fab_ops;
	*out = &f->fab;
	return 0;
}

/* 0 if the hints can be satisfied (and adjusts *caps / tag format), -FI_ENODATA otherwise. */
static int hints_ok(const struct fi_info *h, uint64_t *caps, uint64_t *tag_fmt)
{
	*caps = OFX_CAPS;
	if (!h)
		return 0;
	if (h->caps & ~OFX_CAPS)
		return -FI_ENODATA; /* RMA, atomics, multicast, multi-receive, ... */
	if (h->caps) {
		*caps = h->caps;
		if (!(*caps & (FI_MSG | FI_TAGGED)))
			*caps |= FI_TAGGED | FI_MSG;
		if (!(*caps & (FI_SEND | FI_RECV)))
			*caps |= FI_SEND | FI_RECV;
		if (!(*caps & (FI_LOCAL_COMM | FI_REMOTE_COMM)))
			*caps |= FI_LOCAL_COMM | FI_REMOTE_COMM;
	}
	*tag_fmt = (*caps & FI_MSG) ? ~OFX_MSG_BIT : ~0ULL;
	if (h->addr_format != FI_FORMAT_UNSPEC)
		return -FI_ENODATA;
	if (h->ep_attr) {
		if (h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != FI_EP_RDM)
			return -FI_ENODATA;
		if (h->ep_attr->mem_tag_format & ~*tag_fmt)
			return -FI_ENODATA;
		if (h->ep_attr->tx_ctx_cnt > 1 || h->ep_attr->rx_ctx_cnt > 1)
			return -FI_ENODATA;
		if (h->ep_attr->max_msg_size > OFX_MAX_MSG)
			return -FI_ENODATA;
		if (h->ep_attr->auth_key_size)
			return -FI_ENODATA;
	}
	if (h->domain_attr) {
		const struct fi_domain_attr *d = h->domain_attr;
		if (d->control_progress == FI_PROGRESS_AUTO || d->data_progress == FI_PROGRESS_AUTO)
			return -FI_ENODATA;
		if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_MAP && d->av_type != FI_AV_TABLE)
			return -FI_ENODATA;
		if (d->cq_data_size > OFX_CQ_DATA_SIZE)
			return -FI_ENODATA;
		/* asking for CQ data space means wanting remote CQ data (Open MPI's MTL does so) */
		if (d->cq_data_size)
			*caps |= FI_REMOTE_CQ_DATA;
		if (d->caps & ~(FI_REMOTE_COMM | FI_LOCAL_COMM))
			return -FI_ENODATA;
	}
	if (h->tx_attr) {
		if (h->tx_attr->inject_size > OFX_INJECT_SIZE || h->tx_attr->iov_limit > 1 ||
		    h->tx_attr->rma_iov_limit > 0)
			return -FI_ENODATA;
		if (h->tx_attr->caps & ~OFX_CAPS)
			return -FI_ENODATA;
	}
	if (h->rx_attr) {
		if (h->rx_attr->iov_limit > 1 || (h->rx_attr->caps & ~OFX_CAPS))
			return -FI_ENODATA;
		if (h->rx_attr->total_buffered_recv > (1u << 30))
			return -FI_ENODATA;
	}
	return 0;
}

static int ofx_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		       const struct fi_info *hints, struct fi_info **info)
{
	uint64_t caps, tag_fmt = ~0ULL;
	*info = NULL;
	const char *v = getenv("OMX_FI_VERBOSE");
	int verbose = v ? atoi(v) : 0;
	if (verbose >= 3)
		fprintf(stderr, "omx-fi: fi_getinfo hints:\n%s", hints ? fi_tostr(hints, FI_TYPE_INFO) : "(none)\n");
	if (hints_ok(hints, &caps, &tag_fmt)) {
		if (verbose >= 2)
			fprintf(stderr, "omx-fi: fi_getinfo: hints not supported:\n%s", fi_tostr(hints, FI_TYPE_INFO));
		return -FI_ENODATA;
	}
	if (hints && hints->fabric_attr && hints->fabric_attr->name && strcmp(hints->fabric_attr->name, OFX_NAME))
		return -FI_ENODATA;
	if (!ofx_omx_init())
		return -FI_ENODATA;
	struct fi_info *head = NULL, *tail = NULL;
	for (uint32_t b = 0; b < 32; b++) {
		uint8_t bi = (uint8_t)b;
		char ifname[OMX_HOSTNAMELEN_MAX + 1] = {0};
		if (omx_get_info(NULL, OMX_INFO_BOARD_IFACENAME, &bi, 1, ifname, OMX_HOSTNAMELEN_MAX) != OMX_SUCCESS)
			continue;
		if (hints && hints->domain_attr && hints->domain_attr->name &&
		    strcmp(hints->domain_attr->name, ifname))
			continue;
		struct fi_info *fi = fi_allocinfo();
		if (!fi)
			break;
		fi->caps = caps;
		fi->mode = 0;
		fi->addr_format = FI_FORMAT_UNSPEC;
		fi->tx_attr->caps = caps & (FI_MSG | FI_TAGGED | FI_SEND | FI_REMOTE_CQ_DATA);
		fi->tx_attr->op_flags = hints && hints->tx_attr ? hints->tx_attr->op_flags & FI_COMPLETION : 0;
		fi->tx_attr->msg_order = FI_ORDER_SAS;
		fi->tx_attr->comp_order = FI_ORDER_NONE;
		fi->tx_attr->inject_size = OFX_INJECT_SIZE;
		fi->tx_attr->size = 1 << 16;
		fi->tx_attr->iov_limit = 1;
		fi->rx_attr->caps = caps & (FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_REMOTE_CQ_DATA);
		fi->rx_attr->op_flags = hints && hints->rx_attr ? hints->rx_attr->op_flags & FI_COMPLETION : 0;
		fi->rx_attr->msg_order = FI_ORDER_SAS;
		fi->rx_attr->comp_order = FI_ORDER_NONE;
		fi->rx_attr->total_buffered_recv = 0;
		fi->rx_attr->size = 1 << 16;
		fi->rx_attr->iov_limit = 1;
		fi->ep_attr->type = FI_EP_RDM;
		fi->ep_attr->protocol = FI_PROTO_UNSPEC;
		fi->ep_attr->max_msg_size = OFX_MAX_MSG;
		fi->ep_attr->mem_tag_format = tag_fmt;
		fi->ep_attr->tx_ctx_cnt = 1;
		fi->ep_attr->rx_ctx_cnt = 1;
		fi->domain_attr->name = strdup(ifname);
		fi->domain_attr->threading = hints && hints->domain_attr && hints->domain_attr->threading
						     ? hints->domain_attr->threading
						     : FI_THREAD_SAFE;
		fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
		fi->domain_attr->data_progress = FI_PROGRESS_MANUAL;
		fi->domain_attr->resource_mgmt = FI_RM_ENABLED;
		fi->domain_attr->av_type = hints && hints->domain_attr ? hints->domain_attr->av_type : FI_AV_UNSPEC;
		fi->domain_attr->mr_mode = 0;
		fi->domain_attr->mr_key_size = 0;
		fi->domain_attr->cq_data_size = (caps & FI_REMOTE_CQ_DATA) ? OFX_CQ_DATA_SIZE : 0;
		fi->domain_attr->cq_cnt = 1024;
		fi->domain_attr->ep_cnt = 32;
		fi->domain_attr->tx_ctx_cnt = 32;
		fi->domain_attr->rx_ctx_cnt = 32;
		fi->domain_attr->max_ep_tx_ctx = 1;
		fi->domain_attr->max_ep_rx_ctx = 1;
		fi->domain_attr->max_err_data = 0;
		fi->domain_attr->caps = FI_REMOTE_COMM | FI_LOCAL_COMM;
		fi->fabric_attr->name = strdup(OFX_NAME);
		fi->fabric_attr->prov_version = OFX_VERSION;
		if (!fi->domain_attr->name || !fi->fabric_attr->name) {
			fi_freeinfo(fi);
			break;
		}
		if (tail)
			tail->next = fi;
		else
			head = fi;
		tail = fi;
	}
	if (!head)
		return -FI_ENODATA;
	*info = head;
	return 0;
}

static void ofx_cleanup(void)
{
}

static struct fi_provider ofx_prov = {
	.version = OFX_VERSION,
	.fi_version = FI_VERSION(1, 17),
	.name = OFX_NAME,
	.getinfo = ofx_getinfo,
	.fabric = ofx_fabric,
	.cleanup = ofx_cleanup,
};

struct fi_provider *fi_prov_ini(void);
__attribute__((visibility("default"))) struct fi_provider *fi_prov_ini(void)
{
	return &ofx_prov;
}
