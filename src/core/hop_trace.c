/*
 * hop_trace.c - the buffers of hop_trace.h and their dump. Each thread that marks gets a buffer of
 * OMX_HOP_TRACE_MAX marks (the ones past it are dropped); at exit the process writes
 * <OMX_HOP_TRACE_DIR>/hop.<pid>: a text line "omx-hop-trace <ticks per ns> <marks>", then the
 * marks of all its threads as little-endian 64-bit words (ticks << 4 | step). Ticks are the time
 * stamp counter where there is one (constant and synchronised across CPUs on the machines we
 * measure on; bench/hop_segments.py checks that a message is never seen before it was
 * published), else nanoseconds.
 */
#ifdef OMX_HOP_TRACE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/hop_trace.h"
#include "net/net.h"

#define OMX_HOP_TRACE_MAX (1u << 22)
#define MAX_THREADS 64

__thread struct omx_hop_buf *omx_hop_mine __attribute__((tls_model("initial-exec")));
static struct omx_hop_buf *bufs[MAX_THREADS];
static unsigned nbufs;
static pthread_mutex_t bufs_lock = PTHREAD_MUTEX_INITIALIZER;

struct omx_hop_buf *omx_hop_buf_new(void)
{
	static struct omx_hop_buf none; /* cap 0: a thread past MAX_THREADS, or out of memory */
	struct omx_hop_buf *b = NULL;
	pthread_mutex_lock(&bufs_lock);
	if (nbufs < MAX_THREADS && (b = calloc(1, sizeof(*b)))) {
		if ((b->rec = malloc(OMX_HOP_TRACE_MAX * sizeof(uint64_t)))) {
			b->cap = OMX_HOP_TRACE_MAX;
			bufs[nbufs++] = b;
		} else {
			free(b);
			b = NULL;
		}
	}
	pthread_mutex_unlock(&bufs_lock);
	omx_hop_mine = b ? b : &none;
	return omx_hop_mine;
}

/* Ticks per nanosecond, over 20 ms. */
static double ticks_per_ns(void)
{
	uint64_t t0 = omx_now_ns(), k0 = OMX_HOP_TICKS(), t1;
	do
		t1 = omx_now_ns();
	while (t1 - t0 < 20000000ull);
	return (double)(OMX_HOP_TICKS() - k0) / (double)(t1 - t0);
}

__attribute__((destructor)) static void hop_dump(void)
{
	const char *dir = getenv("OMX_HOP_TRACE_DIR");
	if (!dir || !*dir)
		return;
	pthread_mutex_lock(&bufs_lock);
	uint64_t total = 0;
	for (unsigned i = 0; i < nbufs; i++)
		total += bufs[i]->n;
	char path[4096];
	snprintf(path, sizeof(path), "%s/hop.%d", dir, (int)getpid());
	FILE *f = total ? fopen(path, "wb") : NULL;
	if (f) {
		fprintf(f, "omx-hop-trace %.6f %llu\n", ticks_per_ns(), (unsigned long long)total);
		for (unsigned i = 0; i < nbufs; i++)
			if (fwrite(bufs[i]->rec, sizeof(uint64_t), bufs[i]->n, f) != bufs[i]->n)
				break;
		fclose(f);
	}
	pthread_mutex_unlock(&bufs_lock);
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int omx_hop_trace_off;
#endif
