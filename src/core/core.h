/*
 * core.h - protocol state owned by the core: configuration, boards and peers, endpoints,
 * partners (one per remote endpoint), requests, and the internal functions between the
 * core's files. Not installed.
 */
#ifndef OMX_CORE_H
#define OMX_CORE_H

#include <pthread.h>
#include <stdint.h>

#include "open-mx.h"
#include "core/counters.h"
#include "core/eplock.h"
#include "core/list.h"
#include "core/seqnum.h"
#include "net/net.h"
#include "shm/shm.h"
#include "wire/wire.h"

#define OMX_BOARD_MAX 32
#define OMX_ENDPOINT_MAX_DEFAULT 32
#define OMX_ENDPOINT_MAX_HARD 256
#define OMX_PEER_MAX_DEFAULT 1024
#define OMX_PEER_MAX_HARD 65536
#define OMX_COUNTER_COUNT OMX_COUNTER_SPEC /* the spec's counters, those the MX API exposes */
#define OMX_REGION_MAX 256
#define OMX_LARGE_SENDS_MAX 128
#define OMX_PULL_BLOCKS_OUTSTANDING 4
#define OMX_PULL_SLOTS 1024
#define OMX_RX_RING_AUTO_SLOTS 1024u          /* receive ring slots without OMX_RX_RING_KB */
#define OMX_RX_RING_AUTO_MAX (16ull << 20)   /* ... and its size limit */
#define OMX_SHARED_RING_AUTO_SLOTS 64u       /* shared-memory ring slots without OMX_SHARED_RING_KB */
#define OMX_SHARED_RING_AUTO_MAX (8ull << 20) /* ... and its size limit (64 slots at least) */
#define OMX_BOUNCE_CACHE_MAX 4u               /* medium payload copies kept per endpoint */
#define OMX_PULL_GEN_START 0x23u
#define OMX_REGION_SEQNUM_START 23

/* ---- configuration (process-wide; docs/configuration.md lists every knob) ---- */

struct omx_config {
	/* init time */
	int verbose;
	char verbose_prefix[64];
	int fatal_errors;
	int debug_signal;     /* OMX_DEBUG_SIGNAL: 1 dump endpoints on the signal, 2 with requests */
	int debug_signal_num; /* OMX_DEBUG_SIGNAL_NUM (SIGUSR1) */
	unsigned abort_sleeps;
	/* first endpoint open */
	int loaded;
	uint32_t rndv_threshold;        /* remote peers (with rndv_auto: the value below jumbo frames) */
	int rndv_auto;                  /* OMX_RNDV_THRESHOLD unset or "auto": omx__rndv_threshold */
	uint32_t shared_rndv_threshold; /* same-host peers */
	uint32_t shared_single_copy_min; /* same-host rendezvous from this size: process_vm_readv; below: pulls */
	int shared_rndv_auto;            /* the two above unset: measured (omx__shared_policy_resolve) */
	int shared_single_copy_min_auto;
	uint32_t shared_medium_cap;      /* the mode's largest medium: clamp of shared_rndv_threshold */
	int shared_live; /* OMX_SHARED_LIVE: with shared_rndv_auto, the boundary follows the placement (shared.c) */
	uint32_t resends_max;
	uint32_t zombie_max;
	uint32_t notacked_max;
	int waitspin, waitintr, disable_self, connect_pollall;
	uint32_t spin_us;          /* busy-poll budget of blocking calls before sleeping */
	uint64_t xfer_spin_ns;     /* ... and while a large transfer is moving (OMX_XFER_SPIN_US) */
	uint32_t rx_ring_kb;       /* receive ring per endpoint; 0 = OMX_RX_RING_AUTO_SLOTS */
	uint32_t rx_split;         /* bytes of a frame the ring keeps (longer: split receive); 0 off */
	uint32_t rx_pull_split;    /* OMX_RX_SPLIT=pull: slot bytes of the pull replies' socket; 0 off */
	uint32_t rx_medium_split;  /* with it, mediums longer than this go to that socket too; 0: none */
	int rx_medium_split_auto;  /* OMX_RX_SPLIT_MEDIUM unset or "auto": OMX_RX_SPLIT_MEDIUM_AUTO where
				    * the auto lanes exist and fragments are nearly 64 KiB, else none */
	int rx_split_auto;         /* OMX_RX_SPLIT=auto (default): pull replies split or whole, as traffic goes */
	uint64_t unexp_max;        /* bytes of unexpected messages an endpoint keeps (payload + request) */
	uint64_t unexp_peer_max;   /* ... of which one partner may use */
	int progress_thread;       /* asynchronous progress thread per endpoint */
	uint64_t close_linger_ns;  /* close waits this long for unacked messages (NOTIFYs...) */
	uint64_t progress_idle_ns; /* application idle this long -> the thread takes over */
	uint64_t progress_check_max_ns; /* longest nap while the application keeps coming back and
					   no receiver may pull from us (>= progress_idle_ns) */
	int progress_batch;        /* the thread naps under SCHED_BATCH (no wake-up preemption); off:
				      oversubscribed processes need the preemption (docs/tuning.md) */
	uint64_t resend_delay_ns;  /* 0.5 s */
	uint64_t ack_delay_ns;     /* ~15.6 ms */
	uint64_t pull_resend_ns;   /* 1 s */
	uint64_t host_query_ns;    /* 5 s */
	enum omx_wire_mode wire_mode;
	uint32_t mtu_override; /* 0 = interface MTU */
	uint8_t ctxid_bits, ctxid_shift;
	int any_endpoint; /* -1 = unset */
	uint32_t endpoint_max;
	uint32_t peer_max;
	int fault_enabled;
	struct omx_fault_spec fault;
	/* same-host path (shared.c, net/local.c, shm/) */
	int shared_disabled;          /* OMX_DISABLE_SHARED: frames over Unix sockets only */
	int shared_single_copy;       /* OMX_SHARED_SINGLE_COPY: process_vm_readv for large messages */
	uint32_t shared_coop_chunk;   /* OMX_SHARED_COOP_CHUNK: senders help single copies; 0 = never */
	uint64_t shared_nt_threshold; /* OMX_SHARED_NT_THRESHOLD: non-temporal copies from this size */
	uint32_t idle_pass_every;     /* OMX_IDLE_PASS_EVERY: full pass on every Nth call finding the ring empty */
	uint32_t shared_ring_kb;      /* OMX_SHARED_RING_KB: receive ring per endpoint; 0 = auto */
	int shared_ring_lock;         /* OMX_SHARED_RING_LOCK: mlock it (best effort) */
	uint64_t shared_pool_bytes;   /* OMX_SHARED_POOL_MB: the reservation of omx_shared_alloc's pool */
	uint32_t shared_pool_rndv;    /* OMX_SHARED_POOL_RNDV: pool buffers from this size take the single copy */
	uint32_t shared_ack_complete; /* OMX_SHARED_ACK_COMPLETE: same-host mediums from this size complete on their ack */
};
extern struct omx_config omx__cfg;

void omx__config_load_init(void);
/* Host configuration file (OMX_CONFIG, default /etc/omx.conf) into the environment; idempotent. */
void omx__config_file_apply(void);
struct omx_knob {
	const char *name;
	const char *def;
};
const struct omx_knob *omx__config_knobs(size_t *count);
const char *omx__config_source(const char *name); /* "env", "file" or "default" */
const char *omx__config_file(int *state);         /* state: 1 absent, 2 loaded, 3 unreadable */
void omx__config_load_open(void);
uint64_t omx__config_shared_pool_bytes(void); /* OMX_SHARED_POOL_MB, read now, no lock */
/* "OMX_x" with MX alias honoured unless OMX_IGNORE_MX_ENV. NULL if unset. */
const char *omx__getenv(const char *name, const char *mx_alias);

/* ---- diagnostics ---- */

void omx__verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void omx__warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void omx__fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- boards and the peer table (per process; built from OMX_IFACES + OMX_PEERS) ---- */

struct omx_board {
	int attached;
	uint32_t index;
	struct omx_iface_info iface;
	uint64_t nic_id;
	char hostname[OMX_HOSTNAME_MAX];
	uint32_t frame_mtu; /* min(interface MTU, 65535): largest frame we build, header included */
	/* counters.c: this process's counter file for the board (NULL: counters_private, every
	 * slot of the file; until stop 31 it was sized apart and slots 101-103 overran it) */
	uint64_t *counters;
	uint64_t counters_private[OMX_COUNTER_SLOTS];
};

struct omx_peer {
	int present;
	uint64_t nic_id;
	uint8_t mac[6];
	char hostname[OMX_HOSTNAME_MAX]; /* "" while unknown */
	int local_board;                 /* board index if this is one of ours, else -1 */
	uint16_t reverse_index[OMX_BOARD_MAX]; /* our board's index in the peer's table, per board */
	uint64_t next_query_ns;
};

struct omx_globals {
	pthread_mutex_t lock; /* init, endpoint list, peer table, global handler */
	int initialized;
	int handler_set_by_app;
	omx_error_handler_t handler;
	uint32_t board_count; /* attached boards (indexes 0..count-1) */
	struct omx_board boards[OMX_BOARD_MAX];
	struct omx_peer *peers;
	uint32_t peer_count; /* indexes in use: 0..peer_count-1 */
	uint32_t host_query_magic;
	int peers_configured;
	struct omx_list endpoints;
};
extern struct omx_globals omx__g;

omx_return_t omx__boards_init(void);
void omx__boards_fini(void);
struct omx_board *omx__board(uint32_t index);
/* Peer table: lookups return the index or -1; callers hold omx__g.lock or accept racy reads of
 * immutable entries (entries are never removed while endpoints are open). */
int omx__peer_by_mac(const uint8_t mac[6]);
int omx__peer_by_nic_id(uint64_t nic_id);
int omx__peer_by_hostname(const char *name);
struct omx_peer *omx__peer(uint32_t index);
int omx__peer_add(uint64_t nic_id, const char *hostname); /* index or -1 (table full) */
int omx__peers_load_file(const char *path, char *err, size_t errlen);

static inline void omx__count_add(struct omx_board *b, int counter, uint64_t n)
{
	uint64_t *c = __atomic_load_n(&b->counters, __ATOMIC_ACQUIRE);
	__atomic_fetch_add(&(c ? c : b->counters_private)[counter], n, __ATOMIC_RELAXED);
}
static inline void omx__count(struct omx_board *b, int counter)
{
	omx__count_add(b, counter, 1);
}

/* Counter indexes (behaviour.md 12) used by the core. */
enum {
	OMX_C_SEND_TINY = 0, OMX_C_SEND_SMALL = 1, OMX_C_SEND_MEDIUMSQ_FRAG = 2, OMX_C_SEND_RNDV = 4,
	OMX_C_SEND_NOTIFY = 5, OMX_C_SEND_CONNECT_REQUEST = 6, OMX_C_SEND_CONNECT_REPLY = 7,
	OMX_C_SEND_LIBACK = 8, OMX_C_SEND_NACK_LIB = 9, OMX_C_SEND_NACK_MCP = 10, OMX_C_SEND_PULL_REQ = 11,
	OMX_C_SEND_PULL_REPLY = 12, OMX_C_SEND_RAW = 13, OMX_C_SEND_HOST_QUERY = 14, OMX_C_SEND_HOST_REPLY = 15,
	OMX_C_RECV_TINY = 16, OMX_C_RECV_SMALL = 17, OMX_C_RECV_MEDIUM_FRAG = 18, OMX_C_RECV_RNDV = 19,
	OMX_C_RECV_NOTIFY = 20, OMX_C_RECV_CONNECT_REQUEST = 21, OMX_C_RECV_CONNECT_REPLY = 22,
	OMX_C_RECV_LIBACK = 23, OMX_C_RECV_NACK_LIB = 24, OMX_C_RECV_NACK_MCP = 25, OMX_C_RECV_PULL_REQ = 26,
	OMX_C_RECV_PULL_REPLY = 27, OMX_C_RECV_RAW = 28, OMX_C_RECV_HOST_QUERY = 29, OMX_C_RECV_HOST_REPLY = 30,
	OMX_C_PULL_NONFIRST_BLOCK_DONE_FIRST = 42, OMX_C_PULL_TIMEOUT_FIRST = 44, OMX_C_PULL_TIMEOUT_NONFIRST = 45,
	OMX_C_PULL_TIMEOUT_ABORT = 46,
	OMX_C_DROP_BAD_HEADER_LEN = 49, OMX_C_DROP_BAD_DATALEN = 50, OMX_C_DROP_BAD_SKBLEN = 51,
	OMX_C_DROP_BAD_PEER_ADDR = 52, OMX_C_DROP_BAD_PEER_INDEX = 53, OMX_C_DROP_BAD_ENDPOINT = 54,
	OMX_C_DROP_BAD_SESSION = 55, OMX_C_DROP_PULL_BAD_REPLIES = 56, OMX_C_DROP_PULL_BAD_REGION = 57,
	OMX_C_DROP_PULL_BAD_OFFSET_LENGTH = 58, OMX_C_DROP_PULL_REPLY_BAD_MAGIC_ENDPOINT = 59,
	OMX_C_DROP_PULL_REPLY_BAD_WIRE_HANDLE = 60, OMX_C_DROP_PULL_REPLY_BAD_SEQNUM_WRAP = 61,
	OMX_C_DROP_PULL_REPLY_BAD_SEQNUM = 62, OMX_C_DROP_PULL_REPLY_DUPLICATE = 63,
	OMX_C_DROP_NACK_MCP_BAD_MAGIC_ENDPOINT = 64, OMX_C_DROP_NACK_MCP_BAD_WIRE_HANDLE = 65,
	OMX_C_UNEXP_QUEUE_FULL = 38,
	OMX_C_DROP_HOST_REPLY_BAD_MAGIC = 66, OMX_C_DROP_NOT_IMPLEMENTED = 69, OMX_C_DROP_INVALID_PTYPE = 70,
	OMX_C_DROP_UNKNOWN_PTYPE = 71,
};
extern const char *const omx__counter_labels[OMX_COUNTER_COUNT];

/* ---- requests ---- */

enum omx_req_type {
	OMX_REQ_SEND_TINY,
	OMX_REQ_SEND_SMALL,
	OMX_REQ_SEND_MEDIUM,
	OMX_REQ_SEND_LARGE, /* rendezvous: isend above threshold, and every issend */
	OMX_REQ_SEND_SELF,
	OMX_REQ_RECV,
	OMX_REQ_RECV_LARGE,
	OMX_REQ_CONNECT,
};

/* State bits. A request is freed once COLLECTED and no BUSY bit remains. */
enum {
	OMX_RS_DONE = 1u << 0,          /* completion reported (on the done queue until collected) */
	OMX_RS_COLLECTED = 1u << 1,     /* the application no longer holds the handle */
	OMX_RS_NEED_ACK = 1u << 2,      /* sequenced message not acked yet (on partner->non_acked) */
	OMX_RS_NEED_REPLY = 1u << 3,    /* rndv waiting for notify / connect waiting for reply */
	OMX_RS_NEED_SEQNUM = 1u << 4,   /* throttled: waiting for the partner's window */
	OMX_RS_RECV_POSTED = 1u << 5,   /* on ep->posted_recvs */
	OMX_RS_RECV_PARTIAL = 1u << 6,  /* medium being reassembled (on partner->partial_recvs) */
	OMX_RS_UNEXPECTED = 1u << 7,    /* arrived, not matched (on ep->unexp) */
	OMX_RS_PULLING = 1u << 8,       /* large receive pulling data */
	OMX_RS_SELF_WAITING = 1u << 9,  /* self send waiting for a receive to match */
	OMX_RS_DONE_EARLY = 1u << 10,   /* completed before its ack (zombie when collected) */
	OMX_RS_NOTIFY_PENDING = 1u << 11, /* large receive: NOTIFY sent, not acked (receiver side) */
	OMX_RS_INTERNAL = 1u << 12,     /* library-owned (blocking connect): no error handler call */
	OMX_RS_RESERVED = 1u << 13,     /* unexpected, kept for omx_irecv_reserved (on ep->reserved) */
	OMX_RS_TX_FAILED = 1u << 14,    /* a frame of it was not transmitted locally: sent again soon (send.c) */
	OMX_RS_ACK_COMPLETE = 1u << 15, /* medium kept no copy: completes on its ack, resent from the caller's buffer */
};
#define OMX_RS_BUSY (OMX_RS_NEED_ACK | OMX_RS_NEED_REPLY | OMX_RS_NEED_SEQNUM | OMX_RS_RECV_POSTED | \
		     OMX_RS_RECV_PARTIAL | OMX_RS_UNEXPECTED | OMX_RS_PULLING | OMX_RS_SELF_WAITING)

struct omx_partner;
struct omx_endpoint;

struct omx_pull; /* large receive state (pull.c) */

#define OMX_REQ_INLINE_SEGS 2u

union omx_request {
	struct omx_request_s {
		struct omx_list queue_elt;   /* posted_recvs / unexp / partner lists */
		struct omx_list done_elt;    /* ep->done (completion order) */
		struct omx_list timer_elt;   /* ep->resend_list / ep->connect_list */
		struct omx_list all_elt;     /* ep->all_reqs: every live request, freed at close */
		enum omx_req_type type;
		uint32_t state;
		struct omx_endpoint *ep;
		struct omx_partner *partner;
		omx_status_t status;
		/* seg_in for up to OMX_REQ_INLINE_SEGS segments (a provider's header and payload are
		 * two: no allocation per message), else an allocated array */
		omx_seg_t *segs;
		omx_seg_t seg_in[OMX_REQ_INLINE_SEGS];
		uint32_t nseg;
		uint32_t total_len; /* send: message length; recv: buffer length */
		uint64_t last_send_ns;
		uint32_t resends, resends_max;
		uint16_t seqnum; /* outgoing sequenced packet: message, or NOTIFY of a large receive */
		union {
			struct {
				uint8_t *data; /* copy of the payload (eager); NULL if len == 0 */
				uint32_t data_cap; /* a medium's: bytes allocated (omx__bounce_get) */
				/* medium: the caller's buffer until data holds its copy (made right
				 * after the first transmission) */
				const uint8_t *src;
				uint32_t frags;
				/* large */
				int region;
				uint8_t region_seqnum;
				int notified;
				int pullable; /* counted in ep->pullable_sends (not single-copy exported) */
				union omx_request *self_recv; /* self: matched receive */
			} send;
			struct {
				/* ordered by size: no padding (the request's size is pinned, request.c) */
				uint64_t match_info, match_mask;
				uint8_t *unexp_buf;  /* unexpected: copy of the payload (msg_length bytes) */
				union omx_request *self_send; /* unexpected self message: the waiting send */
				struct omx_pull *pull; /* large */
				uint64_t reserve_key;  /* OMX_RS_RESERVED: the handler's key */
				uint32_t frags_mask; /* received fragments */
				uint32_t received;   /* distinct bytes received (message coordinates) */
				uint32_t unexp_charge; /* bytes charged to the endpoint and partner */
				uint32_t notify_length; /* large: bytes reported in our NOTIFY */
				omx_return_t reserve_fail; /* reserved, its sender reset: the receive's error */
				uint16_t seqnum;     /* medium being reassembled */
				uint8_t rdma_id, rdma_seqnum; /* large */
			} recv;
			struct {
				uint8_t connect_seqnum;
				uint8_t probe; /* the library's liveness probe (omx__notify_watch) */
				uint32_t key;
				uint64_t nic_id;
				uint32_t endpoint_index;
			} connect;
		} u;
		/* A small send's payload (u.send.data points here); last, so that a recycled
		 * request is cleared without it (omx__req_alloc). */
		uint8_t inline_data[OMX_SMALL_MAX];
	} s;
};
typedef struct omx_request_s omx_req_t;

/* ---- partners: one per (peer board, remote endpoint index) seen by a local endpoint ---- */

#define OMX_PARTNER_MAGIC 0x504d5850u
struct omx_partner {
	uint32_t magic;
	struct omx_endpoint *ep;
	uint32_t peer_index;
	uint8_t endpoint_index;
	uint8_t mac[6];
	uint64_t nic_id;
	int is_self;
	uint32_t gen;          /* bumped when the record is reset: stale addresses are detected */
	void *user_context;
	uint32_t true_session; /* session to put in packets to the partner (0xFFFFFFFF unknown) */
	/* same-host eager sends (omx__send_eager_partner): the way to its ring (net/local.c), and
	 * the frame's header with what stays the same between messages, valid while eager_tmpl_ok
	 * and the session and our peer index at its host are those it was made with */
	struct omx_net_local_route route;
	uint8_t eager_tmpl[OMX_EAGER_HDR_LEN];
	uint8_t eager_tmpl_ok;
	uint16_t eager_tmpl_index;
	uint32_t eager_tmpl_session;
	uint32_t back_session; /* session of the partner instance that connected to us */
	/* send direction */
	uint16_t next_send_seq;   /* 0xFFFF: not connected */
	uint16_t next_acked_seq;  /* oldest unacked */
	uint8_t connect_seqnum;
	uint32_t last_send_acknum;
	struct omx_list non_acked;   /* sends waiting for an ack, in seqnum order */
	struct omx_list throttled;   /* sends waiting for the window */
	struct omx_list connects;    /* pending connect requests */
	struct omx_list need_notify; /* large sends waiting for NOTIFY */
	uint64_t last_heard_ns;      /* ep->now_ns of its last frame to us (omx__notify_watch) */
	union omx_request *probe;    /* our liveness probe in flight, or NULL */
	uint32_t app_key;            /* the key of our last successful connect to it (0: none) */
	/* receive direction */
	uint16_t next_match_seq;    /* M */
	uint16_t next_complete_seq; /* Fq <= M */
	uint16_t last_acked_recv_seq;
	uint32_t last_recv_acknum;
	struct omx_list partial_recvs; /* mediums being reassembled, oldest seqnum first */
	struct omx_list early;         /* out-of-order frames, by seqnum */
	struct omx_list early_elt;     /* on ep->early_partners while it holds early frames */
	uint64_t early_bytes;          /* the part of unexp_bytes charged for them */
	uint32_t early_count;
	uint64_t unexp_bytes; /* charged for its messages on ep->unexp (recv.c) */
	uint64_t medium_unacked; /* bytes of our medium sends to it in flight (send.c try_send_now) */
	uint8_t unexp_refused; /* we refused a message of it (unexpected room), not asked again yet */
	struct omx_list refused_elt; /* on ep->unexp_refused while unexp_refused */
	uint8_t resend_ask;    /* our next liback asks it to resend its unacked messages now */
	uint8_t ack_at_once;   /* a medium its sender keeps no copy of is in: ack it as soon as whole */
	/* acks owed */
	int ack_state; /* 0 none, 1 delayed, 2 immediate */
	uint64_t ack_since_ns;
	struct omx_list ack_elt;
	/* acks received: a piggybacked one not taken yet (send.c, omx__ack_defer) */
	uint16_t ack_deferred_seq;
	struct omx_list ack_deferred_elt; /* on ep->acks_deferred while it waits */
	uint32_t wire_mtu; /* peer's frame MTU from the handshake (0 unknown) */
	uint8_t same_host; /* send.c's same_host(): 0 not looked yet, 1 an endpoint of this host with
			     a shared-memory ring on our side, 2 not (fixed for the partner's life) */
	struct omx_copy_choice copy_choice; /* same host: its rendezvous, single copy or pulled (shared.c) */
	struct omx_copy_live copy_live; /* same host: the eager/rendezvous boundary of the moment (shared.c) */
};

/* ---- endpoints ---- */

struct omx_region {
	union omx_request *req; /* large send owning it, NULL if free */
	uint8_t seqnum;
};

#define OMX_EP_MAGIC 0x4f4d5845u
#define OMX_EP_DEAD 0xdeadeeeeu
/* OMX_RX_SPLIT=auto: interfaces of at least this MTU get the adaptive pull-reply lanes. At 9000 a
 * read per 9 KB frame pays for ping-pongs too on the AMD VM (4 MiB +12-15% busy, even blocking;
 * one-way streams -2-5%, stop 33), where stop 24 had measured a loss on the Intel VM; below, frames of 1.5-4 KB are not
 * worth a system call each (docs/tuning.md). */
#define OMX_RX_SPLIT_AUTO_MTU 9000u
/* ...and a pull takes the split lane when this side sent pull replies this recently. */
#define OMX_LANE_RECENT_NS 10000000ull
/* OMX_RX_SPLIT_MEDIUM=auto: over fragments that fill the frame (OMX_WIRE_FRAG_WHOLE_MIN), the
 * split lane also takes the fragments of mediums longer than this (a 32 KiB medium, one frame,
 * read split cost a system call more than the copy it saved: docs/performance.md stop 30). */
#define OMX_RX_SPLIT_MEDIUM_AUTO 32768u

struct omx_endpoint {
	uint32_t magic;           /* OMX_EP_MAGIC while open; closed structs stay allocated, poisoned */
	struct omx_list list_elt; /* omx__g.endpoints */
	struct omx_eplock lock;
	struct omx_epcond cond; /* its waits end at CLOCK_MONOTONIC deadlines */
	uint32_t board_index;
	uint32_t endpoint_index;
	uint32_t key;
	uint32_t session;
	struct omx_board *board;
	struct omx_wire_params wp;
	struct omx_net *net;
	struct omx_net *local;   /* same-host partners (net/local.c); NULL in tests over the hub */
	struct omx_shm_ring *own_ring; /* ep->local's ring (NULL without one): omx__recv_local_fast */
	unsigned fast_streak; /* passes in a row that only took the fast receive (omx__progress_fast) */
	unsigned idle_skips; /* calls in a row that found the same-host ring empty and made no pass */
	uint64_t idle_skipped; /* such calls in all (the close summary) */
	int local_seen; /* a frame came through the same-host transport: the fast receive is worth a look */
	/* Our copies of eager mediums out of our ring (shared.c, omx__shared_copy_out_done): the
	 * last samples, and the figure published in its header from them. */
	struct omx_copy_live_out copy_out;
	uint32_t copy_out_ns_kib;
	uint64_t fast_recvs; /* frames omx__recv_local_fast took (the close summary, OMX_VERBOSE) */
	uint8_t local_nacks[16][OMX_FRAME_MIN]; /* NACKs for refused local sends, handled next pass */
	unsigned local_nack_count;
	int net_skipped; /* the last progress pass left the network out (progress_pass) */
	int pass_owed; /* the last pass ended after the fast receive's completions (progress_pass) */
	int lock_fd;  /* flock'd file making the (board, endpoint) slot ours */
	int event_fd; /* wakes a sleeping waiter: omx_wakeup, completions by other threads */
	struct omx_net *pkt;   /* the packet transport under any wrapper; NULL over the test hub */
	int pull_lane_auto;    /* its pull replies change lanes (OMX_RX_SPLIT=auto) */
	int lane_split;        /* ...and they (and the mediums split_medium_min) take the split one */
	uint32_t split_medium_min; /* mediums longer than this go with the pull replies; UINT32_MAX: never */
	uint64_t bulk_sent_ns; /* when we last sent pull replies or such mediums (ep->now_ns) */
	omx_error_handler_t handler; /* NULL = global */
	uint8_t ctxid_bits, ctxid_shift;
	/* partners: partners[peer_index] -> array of endpoint_max pointers */
	struct omx_partner ***partners;
	struct omx_partner *self;
	/* queues */
	struct omx_list posted_recvs;
	struct omx_list unexp;
	struct omx_list reserved; /* unexpected messages a handler reserved (omx_unexp_reserve.h) */
	uint64_t unexp_bytes; /* charged for unexpected messages (bounded by omx__cfg.unexp_max) */
	struct omx_list unexp_refused; /* partners refused for room, not asked to resend yet (recv.c) */
	struct omx_list early_partners; /* partners holding out-of-order frames (recv.c store_early) */
	uint64_t early_bytes;           /* the part of unexp_bytes charged for them */
	struct omx_list done;
	struct omx_list resend_list;  /* NEED_ACK sends by last transmission time */
	struct omx_list connect_list; /* connect requests by last transmission time */
	struct omx_list ack_list;     /* partners owing an ack */
	struct omx_list acks_deferred; /* partners whose piggybacked ack waits (omx__ack_defer) */
	struct omx_list all_reqs;
	struct omx_list self_deferred; /* self sends posted while the unexpected handler ran (send.c) */
	union omx_request *req_cache; /* freed requests kept for reuse (request.c) */
	unsigned req_cache_count;
	/* medium sends' payload copies kept for reuse (omx__bounce_get, request.c) */
	struct omx_bounce {
		uint8_t *buf;
		uint32_t cap;
	} bounce[OMX_BOUNCE_CACHE_MAX];
	unsigned bounce_count;
	uint64_t next_host_query_check;
	uint64_t next_shared_check; /* same-host partners owing NOTIFYs: still there? (shared.c) */
	/* Sequenced frames that could not be transmitted (OMX_RS_TX_FAILED), to a same-host or a
	 * remote partner: sent again at tx_retry_ns (0: none owed), after a delay that doubles
	 * while they keep failing (send.c, "Transmissions that failed"). tx_failed: set by a failed
	 * transmission, read and cleared by the send that made it. */
	uint64_t tx_retry_ns, tx_retry_delay_ns;
	int tx_failed;
	uint64_t next_notify_watch; /* remote partners owing NOTIFYs: still there? (connect.c) */
	/* Some partner may owe NOTIFYs or fragments: a sleeper wakes for the two checks above
	 * (set when one starts owing, recomputed by omx__notify_watch). */
	int owed_watch;
	uint64_t next_responder_ns; /* the board's NACK responder is polled at most this often */
	/* now_ns when the timers were last looked at: they only fall due when the clock moves
	 * (omx__progress), except acks that must leave at once (acks_now). */
	uint64_t timers_ns;
	int acks_now;
	/* The protocol's clock (omx__ep_clock): its timers are milliseconds long, a busy-polling
	 * loop calls progress every ~50 ns and a CLOCK_MONOTONIC read costs 16-35 ns here. */
	uint64_t now_ns;
	uint64_t now_coarse_ns;
	uint32_t now_polls;
	uint32_t mismatch_warnings;
	uint32_t zombies;
	uint32_t resends_max;
	uint64_t pull_timeout_ns;
	/* large messages */
	struct omx_region regions[OMX_REGION_MAX];
	uint32_t large_sends;
	uint32_t pullable_sends; /* large sends the receiver may pull from us (atomic: the progress
				    thread reads it without the lock) */
	uint64_t xfer_active_ns; /* last step of a large transfer (RNDV, PULL, reply) or fragment of a
				    medium: omx__wait */
	uint32_t mediums_partial; /* mediums being reassembled (on their partners' partial_recvs) */
	struct omx_pull *pulls[OMX_PULL_SLOTS];
	uint32_t pull_gen[OMX_PULL_SLOTS];
	struct omx_list pull_list;
	/* unexpected handler */
	omx_unexp_handler_t unexp_handler;
	void *unexp_handler_ctx;
	int in_handler;
	pthread_t handler_thread;
	int handler_reservable;  /* the message shown may be reserved (a rendezvous) */
	int handler_reserved;    /* ... and the handler reserved it, with handler_key */
	uint64_t handler_key;
	int handlers_off;  /* being closed: the handler is not called any more (lock held) */
	int close_claimed; /* omx_close_endpoint under way (omx__g.lock) */
	int progression_disabled;
	/* asynchronous progress (progress.c) */
	pthread_t progress_tid;
	pthread_cond_t progress_cond;   /* the thread's naps: not woken by every completion */
	pthread_mutex_t progress_nap;   /* guards the naps and progress_stop, not the endpoint */
	int progress_stop;              /* set under progress_nap by omx__progress_thread_stop */
	int progress_long_nap;          /* napping longer than the idle time (atomic) */
	uint64_t progress_nap_end_ns;   /* the current nap's end, 0 when not napping (atomic; the
					   debug dump and tests read it) */
	int progress_started;
	int in_thread_progress;   /* the progress thread is running a pass */
	int poller_is_thread;     /* the sleeping poller is the progress thread */
	uint32_t app_waiters;     /* application threads inside omx__wait */
	uint64_t last_app_ns;     /* last progression on behalf of the application (atomic: the
				     progress thread reads it without the lock) */
	/* blocking */
	int poller_active;
	uint64_t intr_gen;     /* bumped when OMX_WAITINTR and a signal interrupted the poller */
	uint64_t wakeup_gen;
	uint64_t completions; /* bumped at every completion; waiters compare */
	int closing;
	/* omx_close_endpoint lingers for its last acks: new messages are NACKed (closed) meanwhile,
	 * and connect requests dropped, as the board's NACK responder will once we are gone */
	int refusing;
	/* scratch frame buffer for transmissions (lock held) */
	uint8_t *txbuf;
	size_t txbuf_len;
	uint8_t *batchbuf; /* OMX_NET_BATCH_MAX frame heads for omx__send_frames */
	uint8_t *pullbuf; /* gathers multi-segment pull replies */
	struct omx_wire_params wp_local; /* frames to and from endpoints of this host (wire.c) */
	uint32_t debug_gen; /* OMX_DEBUG_SIGNAL dumps done (debug.c) */
	/* At the end, to leave the layout of the hot fields above as it was. */
	/* A slot a region in our shared pool for the small first segment of a send whose others
	 * are pooled (a libfabric provider's header): the export then names the copy, and the
	 * receiver reads the whole message from the pool (shared.c). NULL until needed. */
	uint8_t *pool_heads;
	uint32_t coop_exports; /* single-copy exports whose receiver may ask for our help (shared.c) */
	uint64_t coop_mask[OMX_REGION_MAX / 64]; /* their regions */
	uint16_t local_window; /* send.c send_window: unacked messages to a same-host partner (0: no limit) */
};

/* ---- internal functions ---- */

static inline int omx__ep_live(const struct omx_endpoint *ep)
{
	return ep && __atomic_load_n(&ep->magic, __ATOMIC_ACQUIRE) == OMX_EP_MAGIC;
}
/* Every call taking an endpoint starts with this: NULL or closed handles get OMX_BAD_ENDPOINT. */
#define OMX_CHECK_EP(ep)                                                                                       \
	do {                                                                                                   \
		if (!omx__ep_live(ep))                                                                         \
			return omx__error_global(OMX_BAD_ENDPOINT, "%s: NULL or closed endpoint", __func__);   \
	} while (0)


/* errors: route through the endpoint handler (or the global one) */
omx_return_t omx__error(struct omx_endpoint *ep, omx_return_t code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
omx_return_t omx__error_global(omx_return_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* wait.c (the pass, the waits) and endpoint.c */
void omx__progress(struct omx_endpoint *ep);
/* The same, right after the caller's omx__ep_clock: even the coarse clock's read is ~5 ns of a
 * same-host send, so a send reads it once (bench/self_pingpong). */
void omx__progress_clocked(struct omx_endpoint *ep);
/* The pass of the calls that test, probe or post receives: a same-host frame the fast receive
 * takes (omx__recv_local_fast) ends it, up to OMX_FAST_STREAK_MAX calls in a row; a full pass
 * otherwise. */
#define OMX_FAST_STREAK_MAX 8u
/*
 * Of the calls in a row that find the same-host ring empty, only every Nth makes the full pass
 * (OMX_IDLE_PASS_EVERY); the others end after the look at the ring. A busy-polling MPI rank over
 * the libfabric provider makes such a call at every CQ read, and its full pass (~400
 * instructions: the transports' polls, the timers' checks) sits between a frame's arrival and its
 * detection, and at the end of every harvest of completions. Measured with Open MPI over omx on
 * one host (docs/performance.md, stop 42): 0-64 B ping-pong 0.85-0.93x the time with a pass on
 * every call with both ranks near, 0.81-0.85x far apart (the largest set, 27 runs); N from 2 to
 * 16 alike; omx_perf within noise. The network and the timers then wait up to N-1 calls of
 * ~15 ns more.
 */
#define OMX_IDLE_PASS_EVERY_DEFAULT 4u
void omx__progress_fast(struct omx_endpoint *ep);
/* The protocol's time (ep->now_ns), for its timers: resends (500 ms), delayed acks (16 ms),
 * pulls (1 s). CLOCK_MONOTONIC is read again only when the kernel's tick moved (the coarse
 * clock, 4 ns a read against 16-35) or every OMX_CLOCK_POLLS calls: at most one tick (1-4 ms),
 * or a few microseconds of busy polling, behind. A busy-polling loop spent a fifth of its time
 * reading the clock. Code run from progress uses ep->now_ns directly. */
#define OMX_CLOCK_POLLS 16u
static inline uint64_t omx__ep_clock(struct omx_endpoint *ep)
{
	uint64_t c = omx_now_coarse_ns();
	if (c != ep->now_coarse_ns || ++ep->now_polls >= OMX_CLOCK_POLLS) {
		ep->now_coarse_ns = c;
		if (ep->local)
			ep->local->coarse_ns = c; /* its ring liveness deadlines */
		ep->now_polls = 0;
		ep->now_ns = omx_now_ns();
	}
	return ep->now_ns;
}
/* debug.c: OMX_DEBUG_SIGNAL. The handler bumps omx__debug_gen; each endpoint's next progress
 * pass sees it moved and prints its state (lock held). */
extern uint32_t omx__debug_gen;
void omx__debug_signal_install(void);
void omx__debug_dump(struct omx_endpoint *ep, uint32_t gen);
static inline void omx__debug_check(struct omx_endpoint *ep)
{
	uint32_t g = __atomic_load_n(&omx__debug_gen, __ATOMIC_RELAXED);
	if (__builtin_expect(g != ep->debug_gen, 0))
		omx__debug_dump(ep, g);
}
/* A large transfer moved (omx__wait keeps polling a while instead of sleeping between steps). */
static inline void omx__xfer_touch(struct omx_endpoint *ep)
{
	ep->xfer_active_ns = omx_now_ns();
}
int omx__endpoint_check(struct omx_endpoint *ep); /* 1 if a live endpoint of this process */
typedef int (*omx_wait_cond_fn)(struct omx_endpoint *ep, void *arg);
/* Wait (lock held) until cond is true, the timeout (ms, OMX_TIMEOUT_INFINITE) expires, or a wakeup.
 * Returns 1 if cond became true. */
int omx__wait(struct omx_endpoint *ep, omx_wait_cond_fn cond, void *arg, uint32_t timeout_ms);
void omx__notify_waiters(struct omx_endpoint *ep);
/* A TINY or SMALL frame to an endpoint of this host (ep->local): omx__send_frame without the
 * look-up of the destination. */
void omx__send_eager_local(struct omx_endpoint *ep, struct omx_pkt *pkt, int counter);
/* The fields of a message packet to p that stay the same between its messages (send.c): all but
 * sequence numbers, match, lengths and payload. */
void omx__fill_msg_fixed(struct omx_pkt *pkt, const struct omx_endpoint *ep, const struct omx_partner *p, uint8_t ptype);
/* A same-host TINY/SMALL to p (transmit.c): omx__send_eager_local's frame, from p's template. */
void omx__send_eager_partner(struct omx_endpoint *ep, struct omx_partner *p, uint8_t ptype, uint16_t seq, uint64_t match,
			     const void *payload, uint32_t len, int counter);
/* A same-host MEDIUM holding a whole message of len bytes to p, from the same template, the
 * payload gathered from the caller's buffer. -1 (nothing sent) if len does not fit one fragment. */
int omx__send_medium_partner(struct omx_endpoint *ep, struct omx_partner *p, uint16_t seq, uint64_t match,
			     const void *payload, uint32_t len);
/* A same-host rendezvous' RNDV (from the sender) and NOTIFY (from the receiver) to p, from the
 * same template: first transmissions and retransmissions (omx__send_sequenced). */
void omx__send_rndv_partner(struct omx_endpoint *ep, struct omx_partner *p, uint16_t seq, uint64_t match,
			    uint32_t msg_length, uint8_t rdma_id, uint8_t rdma_seqnum);
void omx__send_notify_partner(struct omx_endpoint *ep, struct omx_partner *p, uint16_t seq, uint32_t total_length,
			      uint8_t rdma_id, uint8_t rdma_seqnum);
void omx__send_frame(struct omx_endpoint *ep, struct omx_pkt *pkt, int counter);
/* send.c: the largest eager message to remote peers over an interface of these wire parameters:
 * OMX_RNDV_THRESHOLD, or with it unset / "auto" OMX_RNDV_THRESHOLD_JUMBO over fragments of 8 KiB
 * or more (MTU 9000 and up), OMX_RNDV_THRESHOLD_JUMBO64 over fragments that fill the frame (OMX_WIRE_FRAG_WHOLE_MIN
 * or more: at MTU 65535 a 256 KiB medium is 5 frames, and beat the rendezvous's two extra trips,
 * docs/performance.md stop 30), else 32768. */
#define OMX_RNDV_THRESHOLD_JUMBO 131072u
#define OMX_RNDV_THRESHOLD_JUMBO64 262144u
uint32_t omx__rndv_threshold(const struct omx_wire_params *wp);
/* send.c: a liback asked for a resend (OMX_TRUC_RESEND_ASK): retransmit p's unacked messages. */
void omx__resend_asked(struct omx_partner *p);
/* send.c: r leaves p's non_acked list (acked, NACKed): its bytes leave the medium bound. */
void omx__medium_acked(struct omx_partner *p, union omx_request *r);
/* pull.c: OMX_RX_SPLIT=auto, this endpoint sent bulk data (pull replies, large mediums) to the
 * network at ep->now_ns: the split lane, if not there already. */
void omx__lane_bulk_sent(struct omx_endpoint *ep);
/* ...and, from the timers, back to whole frames once it has sent none for OMX_LANE_RECENT_NS. */
void omx__lane_timer(struct omx_endpoint *ep, uint64_t now);
/* Several frames to one destination (pull replies): one system call where the transport batches. */
void omx__send_frames(struct omx_endpoint *ep, struct omx_pkt *pkts, unsigned count, int counter);
/* Payloads from this size on are not copied into the frame buffer but handed to the transport
 * as a second iovec (the kernel or the ring push copies them once anyway): one copy less per
 * byte of medium fragments and pull replies. Below it, one contiguous copy is cheaper. */
#define OMX_GATHER_MIN 512u
/* A slot of ep->batchbuf: the head of a gathered frame, or a whole frame whose payload is below
 * OMX_GATHER_MIN (padded to the Ethernet minimum by the encoder). */
#define OMX_BATCH_SLOT (OMX_GATHER_MIN + 128u)
/* Receive ring slots for an interface MTU, given OMX_RX_RING_KB (0: automatic). */
unsigned omx__rx_ring_frames(uint32_t ring_kb, uint32_t mtu);
uint64_t omx__shared_ring_bytes(uint32_t ring_kb, uint32_t mtu);
int omx__is_local_mac(const uint8_t mac[6]); /* a board of this host */
/* Frames to or from the board of that MAC go through the same-host transport, not the network. */
static inline int omx__via_local(const struct omx_endpoint *ep, const uint8_t mac[6])
{
	return ep->local && omx__is_local_mac(mac);
}
/* Wire parameters of frames exchanged with the board of that MAC (same host: ep->wp_local). */
static inline const struct omx_wire_params *omx__wp_for(const struct omx_endpoint *ep, const uint8_t mac[6])
{
	return omx__via_local(ep, mac) ? &ep->wp_local : &ep->wp;
}
uint64_t omx__next_timer(struct omx_endpoint *ep);
void omx__sleep_as_poller(struct omx_endpoint *ep, uint64_t until);

/* progress.c */
int omx__progress_thread_start(struct omx_endpoint *ep);
void omx__progress_thread_stop(struct omx_endpoint *ep); /* lock not held */
void omx__progress_thread_hurry(struct omx_endpoint *ep); /* a receiver may pull from us now */

/* partner.c */
struct omx_partner *omx__partner_get(struct omx_endpoint *ep, uint32_t peer_index, uint8_t endpoint_index);
struct omx_partner *omx__partner_from_addr(struct omx_endpoint *ep, const omx_endpoint_addr_t *addr);
void omx__partner_to_addr(const struct omx_partner *p, omx_endpoint_addr_t *addr);
/* How the receive direction restarts after a reset:
 *  SAME_SESNUM  - back to sesnum|1 (a new instance of the peer connected to us)
 *  NEW_SESNUM   - next sesnum, so stragglers of the old connection are dropped (unreachable,
 *                 disconnect)
 *  KEEP_RECV_SEQ - unchanged: we learnt of the peer's restart from its connect reply, and our
 *                 request already told it where our receive sequence stands */
enum { OMX_RESET_SAME_SESNUM = 0, OMX_RESET_NEW_SESNUM = 1, OMX_RESET_KEEP_RECV_SEQ = 2 };
void omx__partner_reset(struct omx_partner *p, omx_return_t status, int recv_mode);
uint16_t omx__partner_reverse_index(const struct omx_partner *p);

/* request.c */
union omx_request *omx__req_alloc(struct omx_endpoint *ep, enum omx_req_type type);
void omx__req_complete(union omx_request *r, omx_return_t code);
void omx__req_maybe_free(union omx_request *r);
void omx__req_free(union omx_request *r); /* unconditional (endpoint close) */
void omx__req_cache_drain(struct omx_endpoint *ep); /* free the kept requests and buffers (endpoint close) */
uint8_t *omx__bounce_get(struct omx_endpoint *ep, uint32_t len, uint32_t *cap);
void omx__req_clear(union omx_request *r, uint32_t bits); /* clear BUSY bits, free if possible */
omx_return_t omx__req_set_segs(union omx_request *r, const omx_seg_t *segs, uint32_t nseg);
void omx__copy_to_segs(const omx_seg_t *segs, uint32_t nseg, uint32_t offset, const void *src, uint32_t len);
/* Where message bytes [offset, offset + len) go if one segment holds them all, else NULL (a
 * provider's header segment before the payload: everything past the header is in one place). */
uint8_t *omx__segs_place(const omx_seg_t *segs, uint32_t nseg, uint64_t offset, uint32_t len);
void omx__copy_from_segs(const omx_seg_t *segs, uint32_t nseg, uint32_t offset, void *dst, uint32_t len);

/* send.c */
omx_return_t omx__post_send(struct omx_endpoint *ep, const omx_seg_t *segs, uint32_t nseg,
			    omx_endpoint_addr_t dest, uint64_t match, void *context, omx_request_t *request,
			    int synchronous);
void omx__ack_received(struct omx_partner *p, uint16_t ack);
/* A piggybacked ack, taken by the next progress pass (or at the end of this one if it completes
 * nothing): see send.c. */
void omx__ack_defer(struct omx_partner *p, uint16_t ack);
void omx__acks_deferred_take(struct omx_endpoint *ep);
void omx__resend_due(struct omx_endpoint *ep, uint64_t now);
void omx__tx_retry_due(struct omx_endpoint *ep, uint64_t now);
#define OMX_TX_RETRY_MIN_NS 1000000ull /* a frame that failed to leave: first retry after 1 ms */
void omx__send_acks(struct omx_endpoint *ep, uint64_t now);
void omx__send_ack_now(struct omx_partner *p);
void omx__schedule_ack(struct omx_partner *p, int immediate, uint64_t now);
uint16_t omx__piggyack(struct omx_partner *p);
void omx__release_throttled(struct omx_partner *p);
void omx__self_send(struct omx_endpoint *ep, union omx_request *r); /* send_self.c: a send to ourselves */
void omx__self_deferred_drain(struct omx_endpoint *ep); /* progress: self sends held back */
void omx__send_sequenced(union omx_request *r); /* (re)transmit a sequenced request */
void omx__send_nack_lib(struct omx_endpoint *ep, const struct omx_pkt *bad, uint8_t nack_type);
void omx__send_notify(struct omx_endpoint *ep, union omx_request *r, uint32_t total_length);
void omx__build_notify(union omx_request *r, struct omx_pkt *pkt);

/* recv.c */
void omx__recv_frame(void *arg, const uint8_t *frame, size_t len);
void omx__recv_frame_local(void *arg, const uint8_t *frame, size_t len); /* same-host transport */
/* The frame at the head of our ring, taken if it is a same-host eager message the in-order path
 * handles (1); left there for the full pass otherwise (0); -1 if there is none (the ring empty,
 * or its head slot claimed and not yet published). */
int omx__recv_local_fast(struct omx_endpoint *ep);
/* Split receive of MEDIUM fragments (recv.c): where the fragment's bytes go if it is accepted now
 * (NULL: it goes the ordinary way), and the fragment's acceptance once they are there. */
uint8_t *omx__medium_place(struct omx_endpoint *ep, const struct omx_pkt *pkt);
void omx__recv_medium_placed(struct omx_endpoint *ep, struct omx_pkt *pkt);
omx_return_t omx__post_recv(struct omx_endpoint *ep, const omx_seg_t *segs, uint32_t nseg, uint64_t match,
			    uint64_t mask, void *context, omx_request_t *request);
int omx__match_posted(struct omx_endpoint *ep, uint64_t match, union omx_request **out);
/* Give back what an unexpected message was charged (when matched or freed). */
/* Out-of-order frames held for partner p: give one's charge back / drop them all. */
void omx__early_uncharge(struct omx_partner *p, uint32_t frame_len);
void omx__early_drop_all(struct omx_partner *p);
void omx__unexp_uncharge(union omx_request *r);
/* Offer an unmatched message to the unexpected handler (recv.c); what it did: left it to omx
 * (CONTINUE), took it (FINISHED), or reserved it (omx_unexp_reserve, the key in ep->handler_key;
 * only when `reservable`, a RNDV). */
enum { OMX__HANDLER_CONTINUE, OMX__HANDLER_FINISHED, OMX__HANDLER_RESERVED };
int omx__run_unexp_handler(struct omx_endpoint *ep, struct omx_partner *p, uint64_t match, uint32_t len,
			   const void *data, int reservable);

/* connect.c */
void omx__handle_connect(struct omx_endpoint *ep, const struct omx_pkt *pkt);
void omx__connect_resend_due(struct omx_endpoint *ep, uint64_t now);
void omx__notify_watch(struct omx_endpoint *ep, uint64_t now);
void omx__handle_nack_lib(struct omx_endpoint *ep, const struct omx_pkt *pkt);

/* pull.c (large messages) */
void omx__large_recv_start(union omx_request *r);
void omx__handle_pull(struct omx_endpoint *ep, const struct omx_pkt *pkt);
void omx__handle_pull_reply(struct omx_endpoint *ep, const struct omx_pkt *pkt);
struct omx_net_split;
int omx__recv_split(void *arg, const uint8_t *head, size_t head_len, size_t frame_len, struct omx_net_split *s);
void omx__handle_nack_mcp(struct omx_endpoint *ep, const struct omx_pkt *pkt);
void omx__handle_notify(struct omx_endpoint *ep, struct omx_partner *p, const struct omx_pkt *pkt);
void omx__pull_timers(struct omx_endpoint *ep, uint64_t now);
void omx__pulls_abort_partner(struct omx_endpoint *ep, struct omx_partner *p, omx_return_t status);
void omx__region_release(struct omx_endpoint *ep, union omx_request *r);
uint64_t omx__pull_next_deadline(struct omx_endpoint *ep);

/* responder.c: NACKs for closed endpoints of a board */
void omx__responder_progress(struct omx_endpoint *ep, uint64_t now);
/* From an endpoint's progress thread (no endpoint lock held): the filter's open set every 100 ms
 * (it sleeps for an RCU grace period, responder.c). */
void omx__responder_refresh(uint32_t board_index);
/* The responder's socket when this process holds the board's role, else -1: a sleeping poller
 * watches it too, so that NACKs do not wait for its next wake-up (up to a second). */
int omx__responder_fd(uint32_t board_index);
void omx__responder_release(uint32_t board_index);
/* For a process without endpoints (omxd): take the responder role of every attached board that
 * nobody holds, answer what is pending, and give the sockets to sleep on (returns their count). */
unsigned omx__responder_serve(int *fds, unsigned max_fds);

/* shared.c: same-host partners (single copy, exports, mode line for omx_info) */
int omx__partner_shared(const struct omx_partner *p);
/* A rendezvous of len bytes from p, pulled from start_ns until now: timed for the choice
 * between the single copy and pulls. */
void omx__shared_pulled(struct omx_partner *p, uint32_t len, uint64_t start_ns);
/* Unacked messages allowed to a same-host partner (send.c send_window); 0 without a ring. */
uint16_t omx__shared_send_window(struct omx_endpoint *ep);
void omx__shared_policy_resolve(void); /* measure the machine once, fill the auto thresholds */
int omx__shared_pooled(const omx_seg_t *segs, uint32_t nseg); /* all in our pool (omx_shared_alloc)? */
int omx__shared_export(union omx_request *r); /* 1: a same-host receiver can copy it directly */
void omx__shared_endpoint_free(struct omx_endpoint *ep); /* what export kept for the endpoint */
void omx__shared_unexport(struct omx_endpoint *ep, int region);
void omx__shared_coop_serve(struct omx_endpoint *ep); /* our part of our receivers' single copies */
int omx__shared_single_copy(union omx_request *r); /* 1: data copied, NOTIFY/complete remain */
/* "Shared communication: ..." (one line, no newline) saying which same-host mode endpoints of
 * this process use; returns snprintf's count. For omx_info (forks once to probe
 * process_vm_readv between processes). */
int omx__shared_mode_string(char *buf, size_t len);
/* "single copy from N B", or (OMX_SHARED_SINGLE_COPY_MIN=auto) the guess and where the timed
 * choice starts: for omx_info and the verbose policy line. */
void omx__shared_single_copy_text(char *buf, size_t len);
/* The placement of the moment (shm.h, omx_copy_live), for same-host partners with
 * OMX_SHARED_RNDV_THRESHOLD auto: the rendezvous threshold for a len-byte message to p (len
 * itself for a message sent eager to look at the placement again), and the single copy's minimum
 * its export offers. */
uint32_t omx__shared_rndv_for(struct omx_endpoint *ep, struct omx_partner *p, uint32_t len);
uint32_t omx__shared_single_copy_min_for(struct omx_partner *p);
/* A len-byte eager medium went to p (same host): its receiver may time it. */
void omx__shared_medium_sent(struct omx_endpoint *ep, struct omx_partner *p, uint32_t len);
uint64_t omx__shared_live_looks(void); /* band messages of this process sent eager for that */
/* Time this copy of n bytes of a same-host medium out of our ring? Then its start, else 0. */
uint64_t omx__shared_copy_out_timing(struct omx_endpoint *ep, uint32_t n);
void omx__shared_copy_out_done(struct omx_endpoint *ep, uint32_t n, uint64_t start);
void omx__shared_stats(uint64_t *single_copies, uint64_t *bytes, uint64_t *fallbacks, uint64_t *pulled,
			uint64_t *coop_written, uint64_t *chosen_pulls);
uint64_t omx__shared_pool_copies(void); /* of the single copies, those read from senders' pools */
void omx__shared_check_partners(struct omx_endpoint *ep, uint64_t now);

/* board.c: host query/reply and periodic queries */
void omx__handle_host_query(struct omx_endpoint *ep, const struct omx_pkt *pkt);
void omx__handle_host_reply(struct omx_endpoint *ep, const struct omx_pkt *pkt);
void omx__host_queries_due(struct omx_endpoint *ep, uint64_t now);
/* Dynamic discovery (board.c; docs/configuration.md OMX_DISCOVERY). */
void omx__handle_discovery(struct omx_endpoint *ep, const struct omx_pkt *pkt);
int omx__discovery_enabled(void);
/* Discovered peers of the host (shared file) into this process's table; omx__g.lock held. */
void omx__discovery_sync(void);
/* 1 when discovery is off or every peer has a name. */
int omx__discovery_complete(void);

/* Bounded string copy, always NUL-terminated (no truncation warnings to silence). */
static inline void omx__strcpy(char *dst, size_t cap, const char *src)
{
	size_t i = 0;
	if (!cap)
		return;
	for (; src && src[i] && i + 1 < cap; i++)
		dst[i] = src[i];
	dst[i] = 0;
}

static inline uint64_t omx__ms_to_ns(uint32_t ms)
{
	return (uint64_t)ms * 1000000ull;
}

#define OMX_SESSION_UNKNOWN 0xFFFFFFFFu
#define OMX_SEQ_UNCONNECTED 0xFFFFu

#endif
