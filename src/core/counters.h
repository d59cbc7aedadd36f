/*
 * counters.h - host-visible counters (behaviour.md 12 + our own extra slots).
 *
 * Each open endpoint owns a small shared-memory file next to its slot lock:
 *   <OMX_LOCK_DIR>/omx-<mac 12 hex digits>-<endpoint index>.counters
 * created (or reset) when the slot is opened, mapped MAP_SHARED; counting is an atomic add on
 * the mapped memory. A process's counts on a board go to the file of its first still-open
 * endpoint on that board (exact per-endpoint attribution when a process opens one endpoint per
 * board, the usual case). Files survive their endpoint (state CLOSED) and their process (state
 * OPEN but nobody holds the slot lock: stale); the next opener of the slot resets the file.
 * Tools (omx_counters) read the files: docs/tools.md.
 *
 * Layout (version 1, little-endian host order, fixed offsets):
 *   0   u32 magic "OMXC" (0x43584d4f)    4  u32 version (1)
 *   8   u32 header size (offset of the values, 256)   12 u32 slots (OMX_COUNTER_SLOTS)
 *   16  u32 spec slots (85)              20 i32 pid of the opener
 *   24  u32 board index (in the opener)  28 u32 endpoint index
 *   32  u8[6] board MAC, 2 pad           40 u32 state (1 open, 2 closed)
 *   44  u32 reserved                     48 char[32] command of the opener
 *   80  char[80] board hostname          160 u64 open time (CLOCK_REALTIME ns)
 *   168 ... 255 reserved (0)             256 u64 values[slots]
 */
#ifndef OMX_COUNTERS_H
#define OMX_COUNTERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define OMX_COUNTERS_MAGIC 0x43584d4fu
#define OMX_COUNTERS_VERSION 1u
#define OMX_COUNTERS_HEADER 256u
#define OMX_COUNTER_SPEC 85
#define OMX_COUNTER_EXTRA 27
#define OMX_COUNTER_SLOTS (OMX_COUNTER_SPEC + OMX_COUNTER_EXTRA)
#define OMX_COUNTERS_FILE_SIZE 4096u

enum { OMX_COUNTERS_OPEN = 1, OMX_COUNTERS_CLOSED = 2 };

/* Extra slots (ours, after the 85 of the spec). Some are filled by the core already, the
 * others are defined for the send/receive/same-host paths to fill. */
enum {
	OMX_C_X_RETRANSMIT_MSG = 85,      /* sequenced message retransmitted (resend timer) */
	OMX_C_X_RETRANSMIT_CONNECT = 86,  /* connect request retransmitted */
	OMX_C_X_RETRANSMIT_PULL = 87,     /* pull request retransmitted */
	OMX_C_X_TX_FAILED = 88,           /* transmission failed locally (full queue, error) */
	OMX_C_X_DROP_DUPLICATE = 89,      /* duplicate message dropped */
	OMX_C_X_DROP_OUT_OF_WINDOW = 90,  /* sequence number outside the window */
	OMX_C_X_DROP_EARLY_FULL = 91,     /* out-of-order frame dropped: early queue full */
	OMX_C_X_DROP_UNDECODABLE = 92,    /* frame that does not decode (short, bad header) */
	OMX_C_X_WAIT_SPIN = 93,           /* blocking wait satisfied while spinning */
	OMX_C_X_WAIT_SLEEP = 94,          /* blocking wait satisfied after sleeping */
	OMX_C_X_SHARED_BYTES = 95,        /* payload bytes sent to same-host partners */
	OMX_C_X_SINGLE_COPY_BYTES = 96,   /* payload bytes moved by single copy */
	OMX_C_X_DISCOVERY_SENT = 97,      /* discovery broadcasts sent */
	OMX_C_X_DISCOVERY_RECV = 98,      /* discovery broadcasts received */
	OMX_C_X_DISCOVERY_ADDED = 99,     /* peers added by discovery */
	OMX_C_X_CONNECT_BAD_KEY = 100,    /* connect requests refused: wrong endpoint key */
	OMX_C_X_SPLIT_PLACED_BYTES = 101, /* pull-reply bytes read from the socket straight into place */
	OMX_C_X_COOP_WRITTEN_BYTES = 102, /* bytes we wrote into same-host receivers' buffers (single copy) */
	OMX_C_X_SPLIT_LANE_SWITCHES = 103, /* pull replies moved between whole and split receive (OMX_RX_SPLIT=auto) */
	OMX_C_X_REFUSED_CLOSING = 104,    /* messages and connect requests refused by a closing endpoint */
	OMX_C_X_NOTIFY_PROBES = 105,      /* liveness probes to silent partners owing NOTIFYs */
	OMX_C_X_SHARED_PARTNER_GONE = 106, /* same-host partners found gone while something waited for them */
	OMX_C_X_RESEND_ASKED = 107,       /* libacks asking a partner we refused to resend now */
	OMX_C_X_UNACKED_AT_CLOSE = 108,   /* sends still unacked when a closing endpoint stopped lingering */
	OMX_C_X_WAIT_SLEEP_XFER = 109,    /* blocking waits that went to sleep with a large transfer or a medium in flight */
	OMX_C_X_HUGE_COLLAPSED_BYTES = 110, /* bytes of our large same-host buffers moved to huge pages (shm/huge.c) */
	OMX_C_X_POOL_COPY_BYTES = 111,    /* single-copy bytes read from senders' shared pools (omx_shared_alloc) */
};

struct omx_counters_file {
	uint32_t magic;
	uint32_t version;
	uint32_t header_size;
	uint32_t slots;
	uint32_t spec_slots;
	int32_t pid;
	uint32_t board_index;
	uint32_t endpoint_index;
	uint8_t mac[6];
	uint8_t pad[2];
	uint32_t state;
	uint32_t reserved0;
	char comm[32];
	char hostname[80];
	uint64_t open_time_ns;
	uint8_t reserved[88];
	uint64_t values[OMX_COUNTER_SLOTS];
};

extern const char *const omx__counter_extra_labels[OMX_COUNTER_EXTRA];
/* Label of any slot (spec or extra). */
const char *omx__counter_label(int slot);

struct omx_endpoint;
struct omx_board;
/* Library side (omx__g.lock held): map/reset the endpoint's file at open, detach at close. */
void omx__counters_open(struct omx_endpoint *ep);
void omx__counters_close(struct omx_endpoint *ep);
/* This process's current values for a board (what omx__count adds to). */
const uint64_t *omx__counters_values(struct omx_board *b);

/* Tools side. */
struct omx_counters_view {
	struct omx_counters_file *f; /* mapping (read-only unless opened writable) */
	uint32_t endpoint_index;
	int holder_pid; /* pid holding the slot lock, 0 if none */
	int stale;      /* state OPEN, nobody holds the slot: the process died */
	int writable;
};
/* Map every counter file of MAC in dir (up to max), sorted by endpoint index; returns the count
 * or -errno. writable: map read-write (for clearing); EACCES files are mapped read-only. */
int omx__counters_scan(const char *dir, const uint8_t mac[6], int writable, struct omx_counters_view *out, int max);
void omx__counters_unmap(struct omx_counters_view *v, int n);
/* pid holding a flock on path (from /proc/locks), 0 if none, -errno if path is missing. */
int omx__flock_holder(const char *path);
/* One line of /proc/locks: 1 if it is a held FLOCK (not a blocked waiter), with its pid and the
 * device and inode of the locked file; else 0. */
int omx__proc_locks_flock(const char *line, int *pid, dev_t *dev, unsigned long *ino);

#endif
