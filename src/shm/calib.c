/*
 * calib.c - how large a same-host message must be before the single copy pays (issue 4).
 *
 * process_vm_readv costs a fixed entry (finding the other process, pinning its pages) plus a
 * per-page price that depends on the machine far more than memcpy does. Measured on the
 * project's VMs (docs/performance.md, stop 19): on the Intel Xeon VM a 64 B read costs well
 * under a microsecond and the kernel copies about as fast as memcpy, so the single copy wins from
 * 4 KiB on; on the AMD EPYC VM the entry costs 1.2-1.7 us and the kernel copies at a quarter of
 * memcpy's speed (256 KiB: 21 us against 5 us), so eager messages through the ring win up to
 * ~32 KiB and pulls through the ring up to a few MiB. No fixed threshold suits both: the library
 * measures the machine once per process (~0.2 ms, reading its own memory) and chooses.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shm/shm.h"

#define SMALL_READ 64u
#define BIG_READ (64u * 1024u)
#define SMALL_REPS 32
#define BIG_REPS 8

/* The fastest of reps reads: a preemption or an interrupt only makes a sample slower, so the
 * minimum is what the machine can do, even on a loaded host (MPI ranks starting together). */
static int64_t min_cma_ns(pid_t self, void *dst, const void *src, size_t len, int reps)
{
	int64_t best = -1;
	for (int i = 0; i < reps; i++) {
		struct iovec l = { dst, len }, r = { (void *)src, len };
		uint64_t t0 = omx_shm_now_ns();
		ssize_t n = process_vm_readv(self, &l, 1, &r, 1, 0);
		uint64_t t1 = omx_shm_now_ns();
		if (n != (ssize_t)len)
			return -1;
		if (best < 0 || (int64_t)(t1 - t0) < best)
			best = (int64_t)(t1 - t0);
	}
	return best;
}

static int64_t min_memcpy_ns(void *dst, const void *src, size_t len, int reps)
{
	int64_t best = -1;
	for (int i = 0; i < reps; i++) {
		uint64_t t0 = omx_shm_now_ns();
		memcpy(dst, src, len);
		__asm__ volatile("" : : "r"(dst) : "memory"); /* the copy is not dead */
		uint64_t t1 = omx_shm_now_ns();
		if (best < 0 || (int64_t)(t1 - t0) < best)
			best = (int64_t)(t1 - t0);
	}
	return best;
}

int omx_copy_calibrate(struct omx_copy_calib *c)
{
	memset(c, 0, sizeof(*c));
	/* Source and destination page-aligned, as large buffers of two processes usually are (the
	 * same offset in their pages). Two mallocs put them 64 KiB + 16 bytes apart: the
	 * destination 16 bytes past the source modulo 4 KiB, where glibc's memcpy and the kernel's
	 * copy fall off their cliff on the AMD VM (copy.c): memcpy read 480-650 ns/KiB instead of
	 * ~21, process_vm_readv 600-750 instead of ~75, and the policy chose rendezvous and single
	 * copies from 4 KiB. */
	uint8_t *src = aligned_alloc(4096, 2 * BIG_READ), *dst = src ? src + BIG_READ : NULL;
	if (!src)
		return -ENOMEM;
	memset(src, 0x5a, BIG_READ);
	memset(dst, 0xa5, BIG_READ);
	pid_t self = getpid();
	int err = 0;
	int64_t small = min_cma_ns(self, dst, src, SMALL_READ, SMALL_REPS);
	int64_t big = small >= 0 ? min_cma_ns(self, dst, src, BIG_READ, BIG_REPS) : -1;
	int64_t mem = min_memcpy_ns(dst, src, BIG_READ, BIG_REPS);
	if (small < 0 || big < 0)
		err = errno ? -errno : -EIO;
	free(src);
	if (err)
		return err;
	c->cma_fixed_ns = (double)small;
	c->cma_ns_per_kib = big > small ? (double)(big - small) / (BIG_READ / 1024.0) : 0.0;
	c->memcpy_ns_per_kib = (double)(mem > 0 ? mem : 1) / (BIG_READ / 1024.0);
	c->ok = 1;
	return 0;
}

/*
 * A rendezvous moved by pulls through the ring costs one more exchange than a single copy (the
 * PULL and its first reply: PULL_EXTRA_NS, two hops of the stack) and two copies, the second
 * reading lines the other core has just written: TWO_COPY_FACTOR in-cache memcpys. Measured
 * pulls: 2.1-2.2 memcpys on the AMD VM (256 KiB in 17.5 us, 1 MiB in 64 us, memcpy 18-29 ns/KiB),
 * ~3.7 on the Intel one (256 KiB in 19 us), whose single copy took at most ~38 ns/KiB (the AMD
 * one 73-105).
 * 2.5 keeps both machines ~30% away from the boundary. The single copy wins at L bytes when
 * cma_fixed + L * cma_per_byte <= PULL_EXTRA + 2.5 * L * memcpy_per_byte. The memcpy figure is
 * in-cache: past a few MiB it no longer predicts a pull, and there the single copy (one pass over
 * the data, fewer lines evicted) was at least even on both VMs, so the answer never exceeds
 * SINGLE_COPY_CAP, or COOP_SINGLE_COPY_CAP when senders help (export.c): the cooperative copy
 * beat pulls from 1 MiB on the AMD VM with the vCPUs near each other (66 against 73 us, 2 MiB
 * 143 against 216, 8 runs each, buffers written before each send), and from 256 KiB or less
 * far apart (1 MiB 228 against 563); pulls kept 256-512 KiB near (18.6 against 29.2 us).
 */
#define PULL_EXTRA_NS 1000.0
#define TWO_COPY_FACTOR 2.5
#define SINGLE_COPY_CAP (4u << 20)
#define COOP_SINGLE_COPY_CAP (1u << 20)
#define RNDV_FLOOR 4096u
/* Eager mediums through the ring against pulls, AMD VM: 8 KiB 1.27 against 2.25 us, 16 KiB 2.0
 * against 3.0 (stop 19). Since mediums leave from the caller's buffer (their copy for
 * retransmission follows the first transmission, stop 28), eager also wins at 64 KiB (2.68
 * against 4.00 us) and 128 KiB (4.81 against 5.65); 256 KiB is even (10.2 against 10.8). Past
 * 128 KiB the rendezvous wins on memory: an unexpected rendezvous buffers nothing, an
 * unexpected medium is held in a copy (bounded by OMX_UNEXP_MAX_KB). */
#define EAGER_CAP (128u * 1024u)

static int single_copy_wins(const struct omx_copy_calib *c, uint32_t len)
{
	double kib = len / 1024.0;
	return c->cma_fixed_ns + kib * c->cma_ns_per_kib <= PULL_EXTRA_NS + TWO_COPY_FACTOR * kib * c->memcpy_ns_per_kib;
}

/*
 * The model above prices a pull from memcpy in cache, a poor proxy where moving lines between
 * cores is dear: on the Intel VM a pull of 256 KiB took 19 us, ~6 in-cache memcpys, and the
 * single copy 2x less (stop 15), while the model, with that VM's probable memcpy speed, would
 * pick pulls there. Where a single copy of a typical rendezvous (16 KiB: entry plus copy) costs
 * less than CMA_DEAR_16K_NS the historical policy stands, whatever the model says: the Intel VM
 * ~0.9 us (entry 0.2-0.3 us, stop 16), the AMD VM 1.8-2.4 us. The entry price alone decided
 * until stop 26, when the AMD VM measured 0.86-0.89 us for it (1.2-1.7 before) but still copied
 * at a seventh of memcpy's speed: the historical policy came back and 16 KiB same-host messages
 * took 3.8 us instead of 1.5 eager (64 KiB 8.7 instead of 3.6 pulled; docs/performance.md).
 */
#define CMA_DEAR_16K_NS 1300.0

void omx_copy_policy(const struct omx_copy_calib *c, int coop, uint32_t *rndv_threshold, uint32_t *single_copy_min)
{
	if (!c->ok || c->cma_fixed_ns + 16.0 * c->cma_ns_per_kib < CMA_DEAR_16K_NS) { /* the historical defaults */
		*rndv_threshold = RNDV_FLOOR;
		*single_copy_min = 0;
		return;
	}
	/* The smallest power of two from which the single copy wins at every size up to the cap. */
	uint32_t cap = coop ? COOP_SINGLE_COPY_CAP : SINGLE_COPY_CAP, from = cap;
	for (uint32_t len = cap; len >= RNDV_FLOOR && single_copy_wins(c, len); len /= 2)
		from = len;
	*single_copy_min = from <= RNDV_FLOOR ? 0 : from;
	/* Below the single copy's range eager messages beat pulls (one exchange, the same two
	 * copies), up to the size where a pull's larger frames and pipelining take over. */
	*rndv_threshold = from <= RNDV_FLOOR ? RNDV_FLOOR : from < EAGER_CAP ? from : EAGER_CAP;
}
