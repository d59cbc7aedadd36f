/*
 * hop_trace.h - time stamps at the steps of a same-host message's critical path, for finding
 * where a hop's time goes (bench/hop_segments.sh). Compiled in only with the CMake option
 * OMX_HOP_TRACE (never in a default build: each mark costs ~10 ns on the VMs we measure on, which
 * is why the marks are few). With it, set OMX_HOP_TRACE_DIR and each process writes its marks
 * there at exit (hop_trace.c).
 *
 * The steps, in the order a message meets them (sender, then receiver):
 *   SEND       omx__post_send entered (omx_isend and the rest)
 *   PUBLISHED  an eager frame's same-host send returned, the frame in the receiver's ring
 *              (send_partner_frame; also set by a medium's, not by a rendezvous' or a notify's)
 *   SEEN       the receiver's fast receive found it at the head of its ring
 *   DELIVERED  the fast receive is done with it (matched, copied, its receive completed)
 *   COLLECTED  omx_test returned a completed request to the application
 */
#ifndef OMX_HOP_TRACE_H
#define OMX_HOP_TRACE_H

#include <stdint.h>

enum omx_hop_step { OMX_HOP_SEND = 1, OMX_HOP_PUBLISHED, OMX_HOP_SEEN, OMX_HOP_DELIVERED, OMX_HOP_COLLECTED };

#ifdef OMX_HOP_TRACE
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define OMX_HOP_TICKS() __rdtsc()
#else
#include "net/net.h"
#define OMX_HOP_TICKS() omx_now_ns()
#endif
/* Per thread: a thread's marks need no atomics, the buffers are listed for the dump. */
struct omx_hop_buf {
	uint32_t n, cap;
	uint64_t *rec; /* ticks << 4 | step */
};
/* initial-exec: a mark must not call __tls_get_addr (the library is not meant to be dlopen'ed
 * in a measuring build). */
extern __thread struct omx_hop_buf *omx_hop_mine __attribute__((tls_model("initial-exec")));
/* This thread's buffer, registered for the dump; never NULL (one of no room past the thread limit
 * or without memory). */
struct omx_hop_buf *omx_hop_buf_new(void);
static inline void omx_hop_mark(enum omx_hop_step step)
{
	struct omx_hop_buf *b = omx_hop_mine ? omx_hop_mine : omx_hop_buf_new();
	if (b->n < b->cap)
		b->rec[b->n++] = (uint64_t)OMX_HOP_TICKS() << 4 | (uint64_t)step;
}
#else
static inline void omx_hop_mark(enum omx_hop_step step)
{
	(void)step;
}
#endif

#endif
