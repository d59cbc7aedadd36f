/*
 * ofx.h - "omx": an external libfabric provider (libomx-fi.so) over the native Open-MX API.
 * What the provider's files share: constants, the objects behind the fids, the domain lock, and
 * the functions one file calls in another.
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
 * that buffer, which omx then matches to the message at once; otherwise the message is queued as
 * unexpected, in arrival order: an eager one received into a provider bounce buffer, a large one
 * left in omx's queue (reserved, omx_unexp_reserve.h) until a receive takes it, so that its data
 * is pulled once, into the application's buffer. The handler runs
 * either inside an omx call made with the domain lock held, or on the omx progress thread, which
 * then takes the lock (see dom_lock).
 *
 * Remote CQ data: an endpoint opened with FI_REMOTE_CQ_DATA prefixes each message with a 16-byte
 * header (isendv / irecvv, no copy) holding the data; such endpoints use another omx endpoint key,
 * so they cannot be connected to by endpoints without the header (the send fails, FI_EACCES).
 *
 * Completions are never lost. A CQ is a ring that grows as needed, plus a list of error entries;
 * when either cannot get memory, the operation keeps its completion on the endpoint's pending list,
 * and every progress call (each CQ read) first writes what it can from that list, in order, before
 * newer completions. A call whose completion has no operation behind it (FI_PEEK, FI_CLAIM |
 * FI_DISCARD) returns -FI_EAGAIN instead, having changed nothing.
 *
 * Addresses (fi_getname / fi_av_insert): 16 bytes {nic_id u64, endpoint index u32, key u32}.
 * Connections are made lazily with omx_iconnect on the first send to a peer; sends queue behind
 * the connection and are posted in order (send-after-send ordering is kept).
 *
 * Files:
 *   ofx_fabric.c  library init (environment), domain lock, generic stubs, domain, fabric,
 *                 fi_getinfo, the provider entry point (fi_prov_ini, the only exported symbol)
 *   ofx_cq.c      completion queues
 *   ofx_av.c      address vectors
 *   ofx_match.c   receive side: the unexpected handler, posted receives, peek / claim / discard
 *   ofx_send.c    connections, sends, endpoint progress (omx completions)
 *   ofx_ep.c      endpoint fi ops (msg, tagged, cm, bind / enable / close), endpoint creation
 */
#ifndef OFX_H
#define OFX_H

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include "open-mx.h"
#include "omx_unexp_reserve.h"

#define OFX_NAME "omx"
#define OFX_VERSION FI_VERSION(0, 1)
#define OFX_MSG_BIT (1ULL << 63)
#define OFX_KEY 0x4f4d5846u /* "OMXF" */
#define OFX_INJECT_SIZE 64
/* Freed ops an endpoint keeps: no malloc/free pair per message. None under AddressSanitizer,
 * which should see uses after free. */
#if defined(__SANITIZE_ADDRESS__)
#define OFX_OP_CACHE 0u
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OFX_OP_CACHE 0u
#endif
#endif
#ifndef OFX_OP_CACHE
#define OFX_OP_CACHE 64u
#endif
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
	uint32_t idle_reads; /* empty reads since the clock was last read */
	int yielding;        /* empty for OMX_FI_YIELD_US already: every empty read yields */
};

enum ofx_op_type { OP_SEND, OP_RECV, OP_UNEXP, OP_CONN };

struct ofx_op {
	enum ofx_op_type type;
	struct ofx_ep *ep;
	struct ofx_op *next;
	struct ofx_op *live_prev, *live_next; /* ep->live: every op of ep, wherever it is (see op_new) */
	void *context;
	void *buf;
	size_t len;
	uint64_t match, ignore; /* recv: omx-level tag and ignore bits */
	fi_addr_t addr;         /* send: destination; recv: wanted source (or FI_ADDR_UNSPEC) */
	int tagged, completion;
	int silent; /* from an inject call: no completion, not even an error */
	void *inject_copy; /* FI_INJECT: inject_buf, the copy of the caller's buffer */
	unsigned char inject_buf[OFX_INJECT_SIZE];
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
	int reserved; /* left in omx's queue (omx_unexp_reserve, key: the op's address), not received yet */
	uint64_t reserved_ns; /* since when (now_ns) */
	struct ofx_op *claimer;
	/* OP_CONN */
	size_t conn_idx;
	/* a completion its CQ had no memory for, while on ep->pend_head (see op_complete) */
	struct fi_cq_err_entry pend;
	struct ofx_cq *pend_cq;
	fi_addr_t pend_src;
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
	size_t conns_waiting; /* connections CONN_PENDING or CONN_RETRY (conn_set) */
	struct ofx_op *posted_head, *posted_tail;
	struct ofx_op *unexp_head, *unexp_tail;
	struct ofx_op *live; /* every op not freed yet, also those only omx knows of: freed by ep_close */
	struct ofx_op *op_cache; /* freed ops kept for reuse (linked by next), at most OFX_OP_CACHE */
	unsigned omx_held; /* messages the handler had no memory for, left in omx's queue (ofx_match.c) */
	unsigned reserved_n; /* unexpected messages reserved in omx's queue (ofx_match.c) */
	uint64_t reserve_check_ns; /* when the oldest of them is due to be buffered (reserved_expire) */
	unsigned op_cached;
	struct ofx_op *pend_head, *pend_tail; /* completed ops whose completion waits for CQ memory */
};

struct ofx_domain {
	struct fid_domain dom;
	uint32_t lock;    /* 0 free, 1 held, 2 held and a thread may sleep on it (dom_lock) */
	pthread_t holder; /* the thread holding lock, 0 if none (dom_held) */
	uint32_t board;
	uint64_t nic;
};

struct ofx_fabric {
	struct fid_fabric fab;
};

/*
 * The domain lock serialises every provider call. The omx unexpected handler runs either inside
 * an omx call made by a provider function (the calling thread already holds the lock) or on the
 * endpoint's omx progress thread (it does not, and must take it): dom_held tells. The domain
 * records its holder (a thread-local did, but in a dlopen'ed library every access to one is a
 * __tls_get_addr call, 2-4% of a small-message MPI ping-pong's CPU samples).
 */
/*
 * MPI over the provider takes the lock at every CQ read (an idle MPI_Test makes one) and around
 * every send and receive post. glibc's mutex spent ~55 instructions a lock/unlock pair around
 * its two atomic operations (bench/mpi_shm_pingpong over omx under callgrind); here the
 * uncontended pair is a compare-and-swap and an exchange, inline, and a contended lock sleeps on
 * the word (ofx_fabric.c: dom_lock_wait, dom_lock_wake).
 */
void dom_lock_wait(struct ofx_domain *d);
void dom_lock_wake(struct ofx_domain *d);
static inline void dom_lock(struct ofx_domain *d)
{
	uint32_t free_word = 0;
	if (__builtin_expect(!__atomic_compare_exchange_n(&d->lock, &free_word, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED), 0))
		dom_lock_wait(d);
	__atomic_store_n(&d->holder, pthread_self(), __ATOMIC_RELAXED);
}

static inline void dom_unlock(struct ofx_domain *d)
{
	__atomic_store_n(&d->holder, (pthread_t)0, __ATOMIC_RELAXED);
	if (__builtin_expect(__atomic_exchange_n(&d->lock, 0, __ATOMIC_RELEASE) == 2, 0))
		dom_lock_wake(d);
}
/* Whether the calling thread holds d's lock: only it stores its own id there, so a relaxed read
 * that sees it is its own store, and one that does not cannot be. */
static inline int dom_held(struct ofx_domain *d)
{
	return pthread_equal(__atomic_load_n(&d->holder, __ATOMIC_RELAXED), pthread_self());
}

/* Settings read from the environment once, by ofx_omx_init (ofx_fabric.c, which explains them). */
extern uint64_t connect_timeout_ns; /* OMX_FI_CONNECT_TIMEOUT */
extern int ofx_verbose;             /* OMX_FI_VERBOSE */
extern uint64_t yield_after_ns;     /* OMX_FI_YIELD_US */
extern uint64_t reserve_ns;         /* OMX_FI_RESERVE_US */
extern unsigned reserve_max;        /* OMX_FI_RESERVE_MAX */

uint64_t now_ns(void);

/* Every operation, on stderr, with OMX_FI_VERBOSE=4. */
#define OFX_TRACE(...)                                                                                           \
	do {                                                                                                     \
		if (ofx_verbose >= 4) {                                                                          \
			fprintf(stderr, "omx-fi: %.6f %d ", (double)now_ns() * 1e-9, (int)getpid());             \
			fprintf(stderr, __VA_ARGS__);                                                            \
		}                                                                                                \
	} while (0)

/* ofx_fabric.c */
int ofx_errno(omx_return_t r);
int ofx_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int ofx_no_control(struct fid *fid, int command, void *arg);
int ofx_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context);

/* ofx_cq.c */
int cq_write(struct ofx_cq *cq, const struct fi_cq_err_entry *e, fi_addr_t src);
void op_complete(struct ofx_ep *ep, struct ofx_op *op, struct ofx_cq *cq, const struct fi_cq_err_entry *e,
		 fi_addr_t src);
void pend_flush(struct ofx_ep *ep);
int dom_cq_open(struct fid_domain *fdom, struct fi_cq_attr *attr, struct fid_cq **out, void *context);

/* ofx_av.c */
fi_addr_t av_find(const struct ofx_av *av, uint64_t nic, uint32_t epid);
int dom_av_open(struct fid_domain *fdom, struct fi_av_attr *attr, struct fid_av **out, void *context);

/* ofx_match.c */
void list_append(struct ofx_op **head, struct ofx_op **tail, struct ofx_op *op);
void list_remove(struct ofx_op **head, struct ofx_op **tail, struct ofx_op *prev, struct ofx_op *op);
struct ofx_op *op_new(struct ofx_ep *ep, enum ofx_op_type type);
void op_free(struct ofx_op *op);
omx_unexp_handler_action_t unexp_handler(void *context, omx_endpoint_addr_t source, uint64_t match, uint32_t msg_length,
					 void *data);
uint64_t recv_flags(const struct ofx_op *r);
void recv_complete(struct ofx_ep *ep, struct ofx_op *r, uint64_t match, uint32_t raw_len, uint32_t raw_xfer,
		   omx_return_t code, const unsigned char *hdr);
void unexp_deliver(struct ofx_ep *ep, struct ofx_op *u, struct ofx_op *r);
void reserved_expire(struct ofx_ep *ep);
ssize_t do_recv(struct ofx_ep *ep, void *buf, size_t len, fi_addr_t src, uint64_t tag, uint64_t ignore, int tagged,
		void *context, uint64_t flags);

#ifdef OFX_TEST_HOOKS
int ofx_test_fail(const char *var, long *left); /* test build only: ofx_cq.c */
#endif

/* ofx_send.c */
void ep_progress(struct ofx_ep *ep);
/* inject_call: fi_inject and its kin, which never report anything (fi_msg(3)); the FI_INJECT flag
 * alone (fi_sendmsg) only lets the caller reuse its buffer at once. */
ssize_t do_send(struct ofx_ep *ep, const void *buf, size_t len, fi_addr_t dest, uint64_t match, int tagged,
		void *context, uint64_t flags, uint64_t data, int inject_call);

/* ofx_ep.c */
int dom_endpoint(struct fid_domain *fdom, struct fi_info *info, struct fid_ep **out, void *context);

#endif
