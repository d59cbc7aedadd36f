/*
 * shm.h - intra-node building blocks (design.md 2): the shared-memory receive ring of an endpoint,
 * the table of buffers it exports for single-copy reads, the single copy itself
 * (process_vm_readv), and the copy engines. No protocol state here: the ring carries whole MXoE
 * frames, so the core's sequence numbers, acks and NACKs apply unchanged; net/local.c wraps it
 * as the same-host transport.
 *
 * Ring file: <dir>/omx-<netns inode>-<board mac>-<endpoint>.ring (dir = OMX_SHM_DIR or /dev/shm).
 * The network namespace is part of the name because the same-host path belongs to one namespace
 * (as the abstract Unix socket it complements does). The owner holds an exclusive flock on the
 * file for as long as the endpoint is open, so "nobody holds the lock" means "owner gone": such
 * files are removed by the next opener of the slot, and by any endpoint opening (sweep).
 */
#ifndef OMX_SHM_H
#define OMX_SHM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define OMX_SHM_EXPORT_SEGS 16 /* segments a single-copy export describes; more: pull instead */
#define OMX_SHM_EXPORTS 256    /* one per rendezvous region (rdma_id) */

struct omx_shm_ring; /* a mapped ring: ours (consumer) or a peer's (producer) */

/* Create the ring of (mac, endpoint): `slot_bytes` largest frame, about `ring_bytes` in total: the
 * largest power-of-two count of slots (64 to 4096) that fits, half of ring_bytes at least.
 * Replaces a stale file of a dead owner. NULL with *err = -errno (-EBUSY: a live owner has it). */
struct omx_shm_ring *omx_shm_ring_create(const uint8_t mac[6], uint8_t endpoint, uint32_t slot_bytes,
					 uint32_t ring_bytes, uint32_t session, int *err);
uint32_t omx_shm_ring_slots(const struct omx_shm_ring *r); /* its slot count */
/* Lock our ring in memory (mlock): 0, or -errno (RLIMIT_MEMLOCK, most often). */
int omx_shm_ring_lock(struct omx_shm_ring *r);
/* Attach to a peer's ring. NULL with *err: -ENOENT nobody, -ECONNREFUSED owner dead or closed,
 * -EPROTO not a ring of ours (bad header). */
struct omx_shm_ring *omx_shm_ring_attach(const uint8_t mac[6], uint8_t endpoint, int *err);
/* Unmap (and, for our own ring, mark closed and unlink). */
void omx_shm_ring_close(struct omx_shm_ring *r);

/* Producer: copy the frame gathered from iov into a slot. 0, -EMSGSIZE (bigger than a slot),
 * -EAGAIN (ring full), -ECONNREFUSED (owner closed). *doorbell set to 1 when the consumer is
 * asleep and must be woken (the caller rings its doorbell). */
int omx_shm_ring_push(struct omx_shm_ring *r, const struct iovec *iov, unsigned iovcnt, int *doorbell);
/* Is the owner of a peer ring still there? (flock probe; cheap enough every few ms). */
int omx_shm_ring_owner_alive(struct omx_shm_ring *r);
int omx_shm_ring_closed(struct omx_shm_ring *r);
uint32_t omx_shm_ring_session(struct omx_shm_ring *r); /* the owner endpoint's session */
/* The owner's copies of eager mediums out of its ring, 1/16 ns per KiB, published in the ring's
 * header for its producers (0: not measured; omx_copy_live_policy). */
void omx_shm_ring_set_copy_out(struct omx_shm_ring *own, uint32_t ns_kib);
uint32_t omx_shm_ring_copy_out(const struct omx_shm_ring *r);

/* Consumer: deliver up to max frames in order (views into the slot, valid during the call). */
typedef void (*omx_shm_rx_fn)(void *arg, const uint8_t *frame, size_t len);
int omx_shm_ring_poll(struct omx_shm_ring *r, omx_shm_rx_fn fn, void *arg, unsigned max);
/* Consumer, one frame at a time: the frame at the head if published (a view into its slot, and its
 * length), NULL otherwise; omx_shm_ring_take consumes it (frees its slot), after which the view is
 * gone. A frame peeked and not taken is the next one peeked or polled. */
const uint8_t *omx_shm_ring_peek(struct omx_shm_ring *r, uint32_t *len);
void omx_shm_ring_take(struct omx_shm_ring *r);
/* Before sleeping: announce it; returns 1 (and withdraws) if frames are already waiting. */
int omx_shm_ring_arm(struct omx_shm_ring *r);
void omx_shm_ring_disarm(struct omx_shm_ring *r);
/* Producers that had to send a frame to the owner's socket bump this hint, so that the owner
 * does not need a system call per poll to look at its socket. */
void omx_shm_ring_hint_bump(struct omx_shm_ring *r);
uint32_t omx_shm_ring_hint(struct omx_shm_ring *r);
/* Frames the consumer skipped because their producer died before publishing them. */
uint64_t omx_shm_ring_skipped(struct omx_shm_ring *r);

/* Exports (our ring): describe the buffer of rendezvous region `id` so a same-host receiver can
 * read it directly; withdraw it when the region is released. segs NULL (or more segments than an
 * export holds: -E2BIG) publishes "pull this one" for that use of the region. */
int omx_shm_export(struct omx_shm_ring *own, uint8_t id, uint8_t seqnum, const struct iovec *segs, unsigned nseg,
		   uint64_t total);
void omx_shm_unexport(struct omx_shm_ring *own, uint8_t id);

/* Single copy (receiver side): read `len` bytes of region (id, seqnum) exported in the peer ring
 * into dst. 0 on success (1: read from the sender's shared pool with memcpy, pool.c); -ENODATA exported to be pulled (too many segments, or the sender's
 * policy: smaller than its single-copy minimum); -ENOENT no such export (changed, withdrawn), -EPERM /
 * -ESRCH / -EFAULT from process_vm_readv (the caller falls back to pulling).
 * coop_chunk (0: off): from two chunks on, the sender may copy part of the message into dst
 * itself (omx_shm_coop_serve), chunk by chunk, while we read the rest (export.c); dst must then
 * stay valid until the call returns, which it does only when the sender is done with it. */
int omx_shm_single_copy(struct omx_shm_ring *peer, uint8_t id, uint8_t seqnum, const struct iovec *dst,
			unsigned ndst, uint64_t len, uint32_t coop_chunk);
/* Sender side of the cooperative copy, for export id of our ring: if its receiver opened it,
 * write chunks of `chunk` bytes from the back of the message into the receiver's buffer
 * (process_vm_writev) until the two meet, adding the bytes written to *written. 0: not opened
 * yet (look again later); 1: nothing (more) for us to do with this use of the export. */
/* Is region (id, seqnum) of the peer ring exported from its owner's shared pool (read by memcpy)? */
int omx_shm_export_pooled(struct omx_shm_ring *peer, uint8_t id, uint8_t seqnum);
int omx_shm_coop_serve(struct omx_shm_ring *own, uint8_t id, uint32_t chunk, uint64_t *written);
/* Yama's kernel.yama.ptrace_scope (read once): -1 without Yama, 3 if unreadable. */
int omx_shm_yama_scope(void);

/*
 * Shared buffers (pool.c): memory of a per-process file in the shared-memory directory that
 * same-host receivers map, so that a message exported from it is read with one memcpy.
 * alloc: page-rounded, zero-filled, from a reservation of `reserve` bytes made at the first call
 * (NULL and *err -ENOMEM when it is full, -ENOSPC when the directory's file system cannot hold
 * the pages, which are allocated at once); free: 0, or -EINVAL for a pointer alloc did not
 * return. contains: the pool's id if every segment lies in our pool, else 0.
 */
void *omx_shm_pool_alloc(size_t len, uint64_t reserve, int *err);
int omx_shm_pool_free(void *ptr);
uint32_t omx_shm_pool_contains(const struct iovec *v, unsigned n);
/* The length of the allocation that starts at ptr (of our pool, or a fork's private copy of an
 * ancestor's), else 0. */
size_t omx_shm_pool_size(const void *ptr);
/* Process pid's pool `id` mapped here (read-only, or writable), and segs (its owner's addresses,
 * all inside the pool) as our addresses in local: a handle to pass to omx_shm_pool_unmap once
 * done with them, or NULL. */
void *omx_shm_pool_map(uint32_t pid, uint32_t id, int writable, const struct iovec *segs, unsigned n,
		       struct iovec *local);
void omx_shm_pool_unmap(void *handle);
/* Bytes [off, off + len) of a message described by both lists from its byte 0, with the copy
 * engine (non-temporal past its threshold, judged on `total`); counted as read from a pool. */
int omx_shm_pool_copy_range(const struct iovec *dst, unsigned ndst, const struct iovec *src, unsigned nsrc,
			    uint64_t off, uint64_t len, uint64_t total);
void omx_shm_pool_stats(uint64_t *reserved, uint64_t *in_use, uint64_t *copied);

/* ---- huge pages for reused large buffers (huge.c) ---- */
/* Transfers and segments shorter than this are not counted (the former without a lock). */
#define OMX_SHM_HUGE_MIN (1u << 20)
/* Collapse a range into transparent huge pages at its Nth use (0: never; default 8). Forgets
 * the uses counted so far. */
void omx_shm_huge_set_after(uint32_t uses);
uint32_t omx_shm_huge_after(void);
/* A large same-host transfer reads or writes the first len bytes of these segments of ours (the
 * parts of at least OMX_SHM_HUGE_MIN bytes count: a receive buffer larger than its message
 * counts only what the message fills): returns the bytes collapsed by this call (0 nearly
 * always). */
uint64_t omx_shm_huge_use(const struct iovec *v, unsigned n, uint64_t len);
/* Bytes collapsed so far, failed requests, and whether collapsing is off (knob 0, or transparent
 * huge pages "never" or absent). */
void omx_shm_huge_stats(uint64_t *bytes, uint64_t *failed, int *off);

/* ---- copy engines ---- */
enum omx_copy_engine { OMX_COPY_CPU = 0, OMX_COPY_NT = 1, OMX_COPY_HW = 2 };
/* Copy n bytes; `total` is the size of the whole transfer this piece belongs to: from the
 * non-temporal threshold on, cache-bypassing stores are used (x86-64; plain memcpy elsewhere). */
void omx_copy(void *dst, const void *src, size_t n, uint64_t total);
/* memcpy for bulk data (the two must not overlap): avoids the relative alignments where the
 * C library's copy is 15-30x slower on some CPUs (copy.c). */
void omx_memcpy(void *dst, const void *src, size_t n);
void omx_copy_set_nt_threshold(uint64_t bytes); /* 0 = never */
uint64_t omx_copy_nt_threshold(void);
uint64_t omx_copy_llc_bytes(void); /* the last-level cache (sysfs, CPU 0); 0 if unknown */
uint64_t omx_copy_nt_auto(uint64_t llc_bytes); /* OMX_SHARED_NT_THRESHOLD=auto for that cache */
int omx_copy_nt_available(void);
/* Whether producers take their next ring slot's lines for writing with empty-mask stores (ring.c;
 * x86-64 with AVX-512 VL + BW) rather than PREFETCHW: on by default, off with 0. */
void omx_shm_set_own_lines(int on);
int omx_shm_own_lines(void); /* 1: empty-mask stores in force */
/* Hardware copy engine present (Intel DSA work queue in /sys/bus/dsa)? Never required, not used
 * for copies yet: the name is reported, "" if none. */
const char *omx_copy_hw_engine(void);

/* ---- single copy or two: measured per machine (calib.c) ---- */
struct omx_copy_calib {
	int ok;                   /* 0: process_vm_readv unusable here, nothing measured */
	double cma_fixed_ns;      /* a 64 B process_vm_readv of our own memory */
	double cma_ns_per_kib;    /* its price per KiB past that (64 KiB reads) */
	double memcpy_ns_per_kib; /* memcpy's, in cache */
	/* Two copies of 64 KiB handed from another CPU to ours (one by each, through a buffer as
	 * the ring's), per KiB; 0 where no second CPU could be used. */
	double cross_ns_per_kib;
	/* 1: a second CPU was there but the measurement got no sample (its helper thread was not
	 * scheduled in time: a busy machine, e.g. every rank of a job calibrating at once). */
	int cross_missed;
	/* 1: the ring takes its slots' lines by empty-mask stores (omx_shm_own_lines): eager mediums
	 * are priced by the in-cache model, not the cross-CPU figure (calib.c). */
	int ring_owns_lines;
};
/* Measure (~0.5 ms; fastest of several samples). 0, or -errno if process_vm_readv failed. */
int omx_copy_calibrate(struct omx_copy_calib *c);
/* From a calibration: same-host messages above *rndv_threshold use the rendezvous, and of those,
 * messages of at least *single_copy_min bytes are best read with process_vm_readv by the model
 * (0: all of them; OMX_SINGLE_COPY_NEVER: none), smaller ones pulled through the ring. In the
 * adaptive mode this is only the first guess (omx_copy_choice_single). */
#define OMX_SINGLE_COPY_NEVER UINT32_MAX
void omx_copy_policy(const struct omx_copy_calib *c, uint32_t *rndv_threshold, uint32_t *single_copy_min);
/* The adaptive choice between the single copy and pulls, per partner (calib.c). */
#define OMX_COPY_CLASSES 16 /* 4 KiB, 8 KiB, ... 128 MiB and more */
/* Timed and chosen from this size on; below, the first guess stands (shared.c). 1 MiB until stop
 * 61: the first guess follows the vCPUs' placement at the first endpoint's open only, and at
 * 256-512 KiB the timed choice took 22-29% less time than it near (pulls) and 1% more far apart,
 * 14 interleaved rounds on the Zen 3 VM (docs/performance.md, stop 61). */
#define OMX_COPY_ADAPT_MIN (128u << 10)
#define OMX_COPY_EXPLORE 16 /* the slower way is tried again every 16th message of a class (64th if 2x slower) */
struct omx_copy_choice {
	uint32_t single_ns_kib[OMX_COPY_CLASSES]; /* smoothed receive time, 1/16 ns per KiB; 0 unknown */
	uint32_t pull_ns_kib[OMX_COPY_CLASSES];
	uint8_t uses[OMX_COPY_CLASSES];
};
/* 1: read this len-byte message with the single copy, 0: pull it. guess_single: the answer while
 * neither way has been timed for its class. */
int omx_copy_choice_single(struct omx_copy_choice *c, uint32_t len, int guess_single);
/* A len-byte message took ns to arrive by the single copy (single) or by pulls. */
void omx_copy_choice_record(struct omx_copy_choice *c, uint32_t len, int single, uint64_t ns);

/*
 * The eager/rendezvous boundary from the vCPUs' placement of the moment (calib.c). On the Zen 3
 * VM the host moves the two vCPUs between near and far apart every 50-400 ms (a cache line's
 * round trip 75-130 ns against 410-500), so the boundary the calibration chose once per process
 * was right or wrong by chance. A receiver times its copies of eager mediums out of its ring (the
 * lines its producer has just written: what they cost to move here is the placement), at most
 * once a millisecond, and publishes the figure in its ring's header; a sender feeds it to the
 * calibration's model in place of the two copies between CPUs.
 */
#define OMX_COPY_LIVE_MIN 8192u          /* fragments timed from this size */
#define OMX_COPY_LIVE_EVERY_NS 1000000u  /* at most one sample a millisecond */
/* The boundary falls between these (calib.c's RNDV_FLOOR and EAGER_CAP): messages outside are
 * eager or rendezvous whatever the placement. */
#define OMX_COPY_LIVE_LO 4096u
#define OMX_COPY_LIVE_HI (128u << 10)
/* With the rendezvous chosen, no medium of the band is sent and the receiver's figure ages: after
 * this long without an eager medium of OMX_COPY_LIVE_MIN bytes or more to the partner, the next
 * message of the band goes eager, to be timed (a hundred a second at most). */
#define OMX_COPY_LIVE_STALE_NS 10000000u
struct omx_copy_live {
	uint64_t eager_at_ns;  /* when we last sent the partner an eager medium it may time */
	uint64_t looked_at_ns; /* when a message of the band last went eager for that */
	uint32_t made_out;     /* the receiver's figure rndv and single_min were made from, if made */
	int made;
	uint32_t rndv, single_min; /* as omx_copy_policy's */
};
/* The receiver's figure: the second fastest of its last OMX_COPY_LIVE_SAMPLES samples (the only
 * one while there is one), a window restarted after OMX_COPY_LIVE_WINDOW_NS without a sample. One
 * state's samples spread over 2-3x on the Zen 3 VM (near 29-117 ns/KiB, most 30-80; far apart
 * 84-240, most 100-160: the other thread's work on a shared core, a preemption, the first copies'
 * page faults), and the fastest but one holds a state where one sample would not. */
#define OMX_COPY_LIVE_SAMPLES 4
#define OMX_COPY_LIVE_WINDOW_NS 50000000u
struct omx_copy_live_out {
	uint32_t s[OMX_COPY_LIVE_SAMPLES]; /* 1/16 ns per KiB */
	uint32_t n;     /* samples taken in this window */
	uint64_t at_ns; /* the last one's time */
};
/* Take a copy of len bytes that took ns at now_ns: the figure to publish (1/16 ns per KiB, never
 * 0; the figure unchanged if len is 0). */
uint32_t omx_copy_live_out_add(struct omx_copy_live_out *o, uint32_t len, uint64_t ns, uint64_t now_ns);
/* Does the placement matter to omx_copy_policy's answer here (calibrated, and the kernel's copy
 * dear enough for the model to be asked at all)? */
int omx_copy_live_useful(const struct omx_copy_calib *c);
/* l->rndv and l->single_min from the calibration and the receiver's figure (out_ns_kib, 1/16 ns
 * per KiB; 0 unknown: the calibration's own answer). Remade only when it moved by an eighth. */
void omx_copy_live_policy(struct omx_copy_live *l, const struct omx_copy_calib *c, uint32_t out_ns_kib);

/* CLOCK_MONOTONIC in nanoseconds (this layer's clock: stall deadlines, calibration). */
uint64_t omx_shm_now_ns(void);

/* Directory of ring files (OMX_SHM_DIR or /dev/shm). */
const char *omx_shm_dir(void);

#endif
