/*
 * ofx_fabric.c - the base of the omx provider: library initialisation and the settings read from
 * the environment, the domain lock, the stubs every fid shares, the domain and fabric objects,
 * fi_getinfo and the provider entry point. The design is described in ofx.h.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "ofx.h"

/* ------------------------------------------------------------------ domain lock, clock */

/* Spins before sleeping: the lock is held for one provider call (a progress pass at most), far
 * shorter than a sleep and its wake-up on these VMs. */
#define DOM_LOCK_SPINS 200

static long futex_call(uint32_t *w, int op, uint32_t val)
{
	return syscall(SYS_futex, w, op, val, NULL, NULL, 0);
}

void dom_lock_wait(struct ofx_domain *d)
{
	for (int i = 0; i < DOM_LOCK_SPINS; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		uint32_t free_word = 0;
		if (__atomic_load_n(&d->lock, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&d->lock, &free_word, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
	}
	/* 2 from here on, whoever holds it: its unlock then wakes a sleeper (one wake-up too many
	 * at worst, when the sleepers have gone meanwhile). */
	while (__atomic_exchange_n(&d->lock, 2, __ATOMIC_ACQUIRE) != 0)
		(void)futex_call(&d->lock, FUTEX_WAIT_PRIVATE, 2);
}

void dom_lock_wake(struct ofx_domain *d)
{
	(void)futex_call(&d->lock, FUTEX_WAKE_PRIVATE, 1);
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ omx library */

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int omx_ready = -1; /* -1 not tried, 0 failed, 1 ok */
/* OMX_FI_CONNECT_TIMEOUT (ms): how long the first send to a peer keeps retrying the connection. */
uint64_t connect_timeout_ns = 60ull * 1000000000ull;
int ofx_verbose; /* OMX_FI_VERBOSE: 1 endpoints, 2 refused hints, 3 all hints, 4 every operation */
/* OMX_FI_YIELD_US: after polling a CQ in vain for this long, every further empty read yields the
 * CPU. Open MPI's OFI MTL spins on fi_cq_read inside blocking sends without ever yielding, so with
 * two ranks on one CPU a rendezvous (which needs the receiver to run) cost a scheduler time slice
 * (~4 ms) per message. 0 = never yield. */
uint64_t yield_after_ns = 10000;
/* OMX_FI_RESERVE_US: how long an unexpected large message may wait in omx's queue for its receive
 * (ofx_match.c) before it is received into a buffer of ours after all. Its sender keeps the send
 * (and one of its 128 large-send slots) until it is pulled: an application that receives a batch
 * of large messages in another order than they were sent would otherwise wait for ever for one
 * the sender cannot start. 0 = never leave them there (every message buffered on arrival). */
uint64_t reserve_ns = 1000000;
/* OMX_FI_RESERVE_MAX: at most this many of an endpoint's unexpected messages wait in omx's queue;
 * past it they are buffered on arrival. It bounds how many of its senders' large-send slots one
 * receiver holds. */
unsigned reserve_max = 64;

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
		const char *rs = getenv("OMX_FI_RESERVE_US");
		if (rs)
			reserve_ns = (uint64_t)strtoull(rs, NULL, 0) * 1000ull;
		const char *rm = getenv("OMX_FI_RESERVE_MAX");
		if (rm)
			reserve_max = (unsigned)strtoul(rm, NULL, 0);
	}
	int ok = omx_ready;
	pthread_mutex_unlock(&init_lock);
	return ok;
}

int ofx_errno(omx_return_t r)
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

int ofx_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags) { return -FI_ENOSYS; }
int ofx_no_control(struct fid *fid, int command, void *arg) { return -FI_ENOSYS; }
int ofx_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	return -FI_ENOSYS;
}

/* ------------------------------------------------------------------ domain */

static int dom_close(struct fid *fid)
{
	struct ofx_domain *dom = (struct ofx_domain *)fid;
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

/* The fi_info describing board interface ifname, NULL if out of memory. */
static struct fi_info *board_info(const char *ifname, uint64_t caps, uint64_t tag_fmt, const struct fi_info *hints)
{
	struct fi_info *fi = fi_allocinfo();
	if (!fi)
		return NULL;
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
		return NULL;
	}
	return fi;
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
		struct fi_info *fi = board_info(ifname, caps, tag_fmt, hints);
		if (!fi)
			break;
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
