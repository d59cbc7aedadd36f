/*
 * ring_layout.h - the layout of a ring file, shared by every process that maps it (ring.c: the
 * ring; export.c: the exports and the single copy). Private to shm/.
 */
#ifndef OMX_SHM_RING_LAYOUT_H
#define OMX_SHM_RING_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "shm/shm.h"

#define RING_MAGIC 0x524d584fu /* "OXMR" */
#define RING_VERSION 4u /* 2: export entries on their own cache lines; 3: cooperative copies; 4: slots freed
			   by the consumer's head, not by rewriting them */

/* A receiver reads an entry right after the RNDV that names it, from the sender's cache: aligned,
 * the header and the first two segments (most exports) are one line, one transfer. */
struct export_ent {
	uint32_t gen; /* seqlock: odd while being rewritten */
	uint32_t valid; /* 0: pull it; 1: read it; EXPORT_POOLED: read it, from the sender's pool */
	uint32_t pid;
	uint32_t seqnum;
	uint32_t nseg;
	/* The sender's CPU + 1 when it exported (0: not known; rings of earlier libraries wrote 0
	 * here): a receiver on that same CPU reads the message alone, since the sender could not
	 * help at the same time (export.c). */
	uint32_t cpu;
	uint64_t total;
	uint64_t seg[OMX_SHM_EXPORT_SEGS][2]; /* address, length */
	/* The cooperative single copy (export.c). `coop` is (seqnum << 8) | COOP_*: the use of the
	 * export it belongs to, reset by the sender at each export; the receiver moves it from IDLE
	 * to BUSY (it fills dst) to OPEN. */
	uint32_t coop __attribute__((aligned(64)));
	uint32_t dst_pid, dst_nseg;
	uint32_t dst_pool; /* the receiver's pool id if dst lies in it (pool.c), else 0 (padding before) */
	uint64_t dst[OMX_SHM_EXPORT_SEGS][2]; /* the receiver's buffer: address, length */
	/* Message bytes [lo, hi) nobody has claimed yet (lo | hi << 32): the receiver claims chunks
	 * from the front, the sender from the back. */
	uint64_t window __attribute__((aligned(64)));
	/* The sender's: bytes of its claims it is done with (written or failed), and whether any of
	 * its writes failed. */
	uint64_t sender_done __attribute__((aligned(64)));
	uint32_t sender_err;
} __attribute__((aligned(64)));

#define EXPORT_POOLED 2u /* libraries before pool.c read any nonzero `valid` as 1 */

enum { COOP_IDLE = 0, COOP_BUSY = 1, COOP_OPEN = 2, COOP_NONE = 0xffffffffu /* no use of the export */ };

struct ring_hdr {
	uint32_t magic, version;
	uint32_t slot_bytes, slot_count, slot_stride;
	uint32_t owner_pid, session;
	uint32_t closed;
	uint64_t slots_off, file_size;
	uint64_t skipped;
	/* The id of the owner process's pool of shared buffers (pool.c), set at its first export of
	 * one; 0: none (and in rings of libraries before it: the bytes were padding). */
	uint32_t pool_id;
	/* What the owner's copies of eager mediums out of this ring take, 1/16 ns per KiB (0: not
	 * measured; rings of libraries before it: padding). Written by the owner at most once a
	 * millisecond, and only when it moved by an eighth: its producers read the line each time
	 * they choose between an eager medium and a rendezvous (calib.c, omx_copy_live_policy). */
	uint32_t copy_out_ns_kib;
	uint32_t waiting __attribute__((aligned(64)));
	uint32_t sock_hint; /* bumped by producers that sent a frame to the owner's socket instead */
	uint64_t tail __attribute__((aligned(64)));
	/* The consumer's position: slots before it are free. Written by the consumer at each take, read
	 * by a producer only when the copy it keeps says the ring is full. */
	uint64_t head __attribute__((aligned(64)));
	struct export_ent exports[OMX_SHM_EXPORTS] __attribute__((aligned(64)));
};

/* pool_id and copy_out_ns_kib went into what was padding: the lines every library version reads stay where they were. */
_Static_assert(offsetof(struct ring_hdr, pool_id) == 56 && offsetof(struct ring_hdr, copy_out_ns_kib) == 60 &&
		       offsetof(struct ring_hdr, waiting) == 64,
	       "ring header layout");

/* seq is pos + 1 once the frame of position pos is published (pos + 1 - slot count before: the
 * previous round's). owner is the producer's pid and the slot's round (SLOT_OWNER), so that a
 * consumer waiting on a claimed slot tells this round's producer from an earlier one. */
struct slot {
	uint64_t seq;
	uint32_t len;
	uint32_t owner;
	uint8_t data[];
};

/* A pid is below 2^22 on Linux (PID_MAX_LIMIT); the 10 bits above it hold the round of the
 * position (pos / slot count), modulo 1024. */
#define SLOT_PID_BITS 22u
#define SLOT_OWNER(pid, pos, shift) ((uint32_t)(pid) | (uint32_t)(((pos) >> (shift)) & 0x3ffu) << SLOT_PID_BITS)
#define SLOT_OWNER_PID(owner) ((owner) & ((1u << SLOT_PID_BITS) - 1u))

struct omx_shm_ring {
	int fd;
	int own;
	struct ring_hdr *h;
	size_t map_len;
	uint8_t *slots;
	uint32_t mask, stride, slot_bytes;
	uint32_t shift; /* log2 of the slot count */
	uint32_t pid; /* ours, written in the slots we claim */
	/* producer: the consumer's head as last read (a ring is full only if it still is after a
	 * fresh read) */
	uint64_t head_seen;
	char path[160];
	/* consumer */
	uint64_t head;
	uint64_t stall_since;
	uint32_t empty_polls;
};

#endif
