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
#include <pthread.h>
#include <sched.h>
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

/*
 * What two copies cost when the lines move between two CPUs, as a medium's or a pull's do: a
 * thread on another CPU writes 64 KiB (its message, in its cache), copies it into a buffer the
 * caller last read (the ring), and the caller copies it out. An in-cache memcpy cannot see this:
 * on the Zen 1 VM of stop 44 memcpy read 27 or 45 ns/KiB from one process to the next while the
 * two copies took 95-270 ns/KiB here (three states of the host's vCPU placement) and 150-165
 * through the ring, 5-6 memcpys. The helper is pinned to another CPU even when the process is
 * bound to one (an MPI rank: its partner is elsewhere); samples where the two threads shared a
 * CPU are dropped, and so are stalls (CROSS_SAMPLE_MAX_NS). The helper's start on its CPU and
 * then the samples each have a budget (the other CPU may be busy). On the Zen 3 VM a thread took
 * 0.1-5 ms to first run on the other, idle vCPU, and its first one to four steps there often
 * stalled for 4-8 ms each before running at full speed (3-28 us a sample): the 5 ms the two
 * shared until stop 61 missed the figure in 4 of 10 unbound processes and in all 20 bound to a
 * CPU, as MPI ranks are, and the policy then ran on the guess (docs/performance.md, stop 61).
 */
#define CROSS_REPS 8   /* samples taken ... */
#define CROSS_TRIES 32 /* ... out of at most this many */
#define CROSS_START_BUDGET_NS 25000000ull
#define CROSS_BUDGET_NS 50000000ull
/* A sample longer than this is a stall (64 KiB in 4-8 ms, 60-120 us/KiB), not a copy. The
 * slowest real figure seen is ~430 ns/KiB (28 us). */
#define CROSS_SAMPLE_MAX_NS 1000000ull

struct cross {
	uint8_t *msg, *stage;
	int cpu;       /* the helper's */
	unsigned go;   /* the caller's step: odd, write the message; even, copy it to the stage */
	unsigned done; /* the helper's last step done */
	int quit, pinned; /* pinned: 1 on cpu, -1 could not be */
};

static void *cross_helper(void *arg)
{
	struct cross *x = arg;
	int pinned = sched_getcpu() == x->cpu ? 1 : -1;
	__atomic_store_n(&x->pinned, pinned, __ATOMIC_RELEASE);
	for (unsigned step = 1; pinned > 0; step++) {
		while (__atomic_load_n(&x->go, __ATOMIC_ACQUIRE) != step)
			if (__atomic_load_n(&x->quit, __ATOMIC_ACQUIRE))
				return NULL;
		if (step & 1)
			memset(x->msg, (int)step, BIG_READ);
		else
			memcpy(x->stage, x->msg, BIG_READ);
		__atomic_store_n(&x->done, step, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* Wait for the helper's step; 0 once the budget is spent. */
static int cross_wait(struct cross *x, unsigned step, uint64_t deadline)
{
	while (__atomic_load_n(&x->done, __ATOMIC_ACQUIRE) != step)
		if (omx_shm_now_ns() > deadline)
			return 0;
	return 1;
}

/* Another CPU than ours that we may run on: from our mask first, then any online. -1: none. */
static int other_cpu(int me)
{
	cpu_set_t mask;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (sched_getaffinity(0, sizeof(mask), &mask) == 0)
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (i != me && CPU_ISSET(i, &mask))
				return i;
	return n > 1 ? (me + 1) % (int)n : -1;
}

static double cross_two_copies_ns_per_kib(uint8_t *dst, int *missed)
{
	int me = sched_getcpu();
	struct cross x = { .cpu = me >= 0 ? other_cpu(me) : -1 };
	if (x.cpu < 0)
		return 0.0;
	*missed = 1; /* until a sample says otherwise */
	x.msg = aligned_alloc(4096, 2 * BIG_READ);
	if (!x.msg)
		return 0.0;
	x.stage = x.msg + BIG_READ;
	memset(x.stage, 0, BIG_READ);
	/* Started on its CPU: started on ours, it would wait for the end of our time slice while we
	 * wait for it (4 ms). */
	pthread_attr_t attr;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(x.cpu, &set);
	pthread_t t;
	int started = pthread_attr_init(&attr) == 0;
	if (started) {
		started = pthread_attr_setaffinity_np(&attr, sizeof(set), &set) == 0 &&
			  pthread_create(&t, &attr, cross_helper, &x) == 0;
		pthread_attr_destroy(&attr);
	}
	if (!started) {
		free(x.msg);
		return 0.0;
	}
	/* We stay on our CPU meanwhile: an unbound caller moved onto the helper's CPU made each step
	 * wait for the end of the other's time slice (4-8 ms), and 5 of 10 unbound processes spent
	 * the whole budget so on the Zen 3 VM. Our own mask comes back after. */
	cpu_set_t own, here;
	int bound = sched_getaffinity(0, sizeof(own), &own) == 0;
	if (bound) {
		CPU_ZERO(&here);
		CPU_SET(me, &here);
		bound = sched_setaffinity(0, sizeof(here), &here) == 0;
	}
	uint64_t start_deadline = omx_shm_now_ns() + CROSS_START_BUDGET_NS;
	int64_t best = -1;
	while (!__atomic_load_n(&x.pinned, __ATOMIC_ACQUIRE) && omx_shm_now_ns() < start_deadline)
		;
	uint64_t deadline = omx_shm_now_ns() + CROSS_BUDGET_NS;
	unsigned taken = 0;
	for (unsigned i = 0; i < CROSS_TRIES && taken < CROSS_REPS && __atomic_load_n(&x.pinned, __ATOMIC_ACQUIRE) > 0;
	     i++) {
		__atomic_store_n(&x.go, 2 * i + 1, __ATOMIC_RELEASE);
		if (!cross_wait(&x, 2 * i + 1, deadline))
			break;
		uint64_t t0 = omx_shm_now_ns();
		__atomic_store_n(&x.go, 2 * i + 2, __ATOMIC_RELEASE);
		if (!cross_wait(&x, 2 * i + 2, deadline))
			break;
		memcpy(dst, x.stage, BIG_READ);
		__asm__ volatile("" : : "r"(dst) : "memory");
		uint64_t t1 = omx_shm_now_ns();
		if (sched_getcpu() == x.cpu || t1 - t0 >= CROSS_SAMPLE_MAX_NS)
			continue;
		taken++;
		if (best < 0 || (int64_t)(t1 - t0) < best)
			best = (int64_t)(t1 - t0);
	}
	__atomic_store_n(&x.quit, 1, __ATOMIC_RELEASE);
	if (bound)
		(void)sched_setaffinity(0, sizeof(own), &own);
	pthread_join(t, NULL);
	free(x.msg);
	*missed = best <= 0;
	return best > 0 ? (double)best / (BIG_READ / 1024.0) : 0.0;
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
	else
		c->cross_ns_per_kib = cross_two_copies_ns_per_kib(dst, &c->cross_missed); /* dst: the caller's copy out */
	free(src);
	if (err)
		return err;
	c->cma_fixed_ns = (double)small;
	c->cma_ns_per_kib = big > small ? (double)(big - small) / (BIG_READ / 1024.0) : 0.0;
	c->memcpy_ns_per_kib = (double)(mem > 0 ? mem : 1) / (BIG_READ / 1024.0);
	c->ring_owns_lines = omx_shm_own_lines();
	c->ok = 1;
	return 0;
}

/*
 * A rendezvous moved by pulls through the ring costs one more exchange than a single copy (the
 * PULL and its first reply: EXCHANGE_NS, two hops of the stack) and two copies, the second
 * reading lines the other core has just written: TWO_COPY_FACTOR in-cache memcpys. Measured
 * pulls: 2.1-2.2 memcpys on the AMD VM (256 KiB in 17.5 us, 1 MiB in 64 us, memcpy 18-29 ns/KiB),
 * ~3.7 on the Intel one (256 KiB in 19 us), whose single copy took at most ~38 ns/KiB (the AMD
 * one 73-105).
 * 2.5 keeps both machines ~30% away from the boundary. The single copy wins at L bytes when
 * cma_fixed + L * cma_per_byte <= EXCHANGE + 2.5 * L * memcpy_per_byte. Until stop 29 the
 * single copy was imposed from 1 MiB (4 without senders' help) whatever the model said: past a
 * few MiB the in-cache memcpy figure no longer predicts a pull, and the single copy then won on
 * the AMD VM. Since same-host pulls carry 32 KiB replies (stop 28) they win there at every size
 * to 64 MiB, near and far apart (1 MiB 36 against 51 us near, 60 against 145 far; 64 MiB 6.3
 * against 7.1 ms near), unless the sender's buffer sits on huge pages (4 MiB: 102 us single
 * against 214 pulled). So the model's answer is only a first guess now: which of the two a
 * rendezvous takes is chosen per partner from the times both took (omx_copy_choice_single).
 */
#define EXCHANGE_NS 1000.0
#define TWO_COPY_FACTOR 2.5
#define MODEL_MAX (64u << 20) /* the largest size the model is asked about */
#define RNDV_FLOOR 4096u
/* Eager mediums through the ring against pulls, AMD VM: 8 KiB 1.27 against 2.25 us, 16 KiB 2.0
 * against 3.0 (stop 19). Since mediums leave from the caller's buffer (their copy for
 * retransmission follows the first transmission, stop 28), eager also wins at 64 KiB (2.68
 * against 4.00 us) and 128 KiB (4.81 against 5.65); 256 KiB is even (10.2 against 10.8). Past
 * 128 KiB the rendezvous wins on memory: an unexpected rendezvous buffers nothing, an
 * unexpected medium is held in a copy (bounded by OMX_UNEXP_MAX_KB). */
#define EAGER_CAP (128u * 1024u)

/* The two copies' price per KiB: TWO_COPY_FACTOR in-cache memcpys, or what they took between
 * two CPUs if that was more (stop 45: on the Zen 1 VM the memcpy figure alone chose pulls in
 * three processes out of four, and they took 1.6-1.8x the single copy's time). */
/* Where a second CPU was there but its figure could not be taken (cross_missed), it is guessed
 * at CROSS_GUESS_FACTOR in-cache memcpys, the ratio of the near state on the Zen 1 VM (95-125
 * against 27-45 ns/KiB; far apart it was 7-10x): without it the model alone chose eager mediums
 * to 128 KiB and pulls there, 1.6-1.8x the single copy's time (stop 46: 8 processes starting at
 * once on 2 CPUs measured nothing). */
#define CROSS_GUESS_FACTOR 4.0
static double two_copies_ns_per_kib(const struct omx_copy_calib *c)
{
	double model = TWO_COPY_FACTOR * c->memcpy_ns_per_kib;
	double cross = c->cross_missed && c->cross_ns_per_kib <= 0 ? CROSS_GUESS_FACTOR * c->memcpy_ns_per_kib :
								    c->cross_ns_per_kib;
	return cross > model ? cross : model;
}

static int single_copy_wins(const struct omx_copy_calib *c, uint32_t len)
{
	double kib = len / 1024.0;
	return c->cma_fixed_ns + kib * c->cma_ns_per_kib <= EXCHANGE_NS + kib * two_copies_ns_per_kib(c);
}

/* An eager message makes the same two copies as a pull, with one exchange less than a single
 * copy (the rendezvous' RNDV and NOTIFY), plus what the ring adds to them (slot claims and
 * publication, the frame's handling): RING_NS_PER_KIB, the low end of what it added on the Zen 1
 * VM (stop 45). There an eager medium's time grew by 114-190 ns per KiB with the vCPUs near,
 * where the two copies between CPUs measured 95-125 ns/KiB; far apart by 177-286 against
 * 206-289, nothing added. Single copy against eager there: 8 KiB 3.0 against
 * 1.3 us near, 3.5 against 3.3 far apart; 16 KiB 3.9 against 2.2 near, 4.4 against 5.6 far;
 * 32 KiB 5.4 against 6.5 near, 5.8 against 9.4 far. Those rings had 128 slots; with 64 (stop 46)
 * an eager hop took 103-116 ns per KiB at 32-64 KiB near, about the two copies' figure, and 333-370
 * far apart, 40-160 above the 206-290 measured there: the low end is kept. */
#define RING_NS_PER_KIB 30.0

/*
 * Where the ring's producers take their slots' lines by empty-mask stores (ring.c, stop 58), an
 * eager medium's two copies cost about the same near and far apart, and less than the cross-CPU
 * figure, which times plain copies: on the Zen 4 VM (stop 59) a 64 KiB eager medium took 3.1-4.1
 * us a half round trip near and 3.4 far apart (~53 ns/KiB), where that figure read 51-138 ns/KiB
 * from one process to the next (the vCPUs' placement of the moment) and with it the threshold
 * fell to 16-64 KiB in some processes: 64 KiB then took 5.2-10.9 us as a rendezvous. With
 * PREFETCHW instead (a CPU without AVX-512, as the Zen 1 VM of stops 45-46, or
 * OMX_SHARED_OWN_LINES=0), eager mediums far apart cost what the figure says or more (the Zen 4
 * VM with the knob at 0, 64 KiB far apart: 13.0 us eager against 6.2 as a rendezvous; near 4.2
 * against 7.1), and the figure stands. So with the stores the in-cache model prices them.
 */
static double eager_copies_ns_per_kib(const struct omx_copy_calib *c)
{
	return c->ring_owns_lines ? TWO_COPY_FACTOR * c->memcpy_ns_per_kib : two_copies_ns_per_kib(c);
}

static int single_copy_beats_eager(const struct omx_copy_calib *c, uint32_t len)
{
	double kib = len / 1024.0;
	return c->cma_fixed_ns + EXCHANGE_NS + kib * c->cma_ns_per_kib <=
	       kib * (eager_copies_ns_per_kib(c) + RING_NS_PER_KIB);
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

/* Is the model asked at all (measured, and a 16 KiB single copy dear)? Else the historical
 * defaults, whatever the figures (and the placement: omx_copy_live_useful). */
static int model_applies(const struct omx_copy_calib *c)
{
	return c->ok && c->cma_fixed_ns + 16.0 * c->cma_ns_per_kib >= CMA_DEAR_16K_NS;
}

void omx_copy_policy(const struct omx_copy_calib *c, uint32_t *rndv_threshold, uint32_t *single_copy_min)
{
	if (!model_applies(c)) { /* the historical defaults */
		*rndv_threshold = RNDV_FLOOR;
		*single_copy_min = 0;
		return;
	}
	/* The smallest power of two from which the single copy wins at every size up to MODEL_MAX;
	 * OMX_SINGLE_COPY_NEVER if it does not win there. */
	uint32_t from = OMX_SINGLE_COPY_NEVER;
	for (uint32_t len = MODEL_MAX; len >= RNDV_FLOOR && single_copy_wins(c, len); len /= 2)
		from = len;
	*single_copy_min = from <= RNDV_FLOOR ? 0 : from;
	/* Below the single copy's range eager messages beat pulls (one exchange, the same two
	 * copies), up to the size where a pull's larger frames and pipelining take over; in its
	 * range, up to where their two copies cost more than the rendezvous' exchange. */
	uint32_t rndv = from <= RNDV_FLOOR ? RNDV_FLOOR : from < EAGER_CAP ? from : EAGER_CAP;
	while (rndv < EAGER_CAP && !single_copy_beats_eager(c, rndv))
		rndv *= 2;
	*rndv_threshold = rndv;
}

/*
 * Single copy or pulls, from what each took. Per size class (a power of two, from 4 KiB), the
 * receive side's time per KiB of each, smoothed over the last few; the faster one is taken (the
 * first guess until both are known), the other on the second and fourth messages of a class (so
 * that each way's first, cold, time is soon replaced) and every OMX_COPY_EXPLORE-th after (4
 * times less often if it took more than twice as long), so that a change (the vCPUs moved
 * apart, buffers on huge pages) is seen. A faster sample is taken as it is (the first of a class
 * often pays for page faults and cold caches); a slower one moves the figure a quarter of the
 * way, counted for at most twice it: one preempted copy does not send a class to the slower way
 * for long. Pulls are timed only when no other pull ran alongside (the caller's business):
 * several at once share the two CPUs, and each would look slower than it is.
 */
#define CLASS_MIN_SHIFT 12

static unsigned copy_class(uint32_t len)
{
	unsigned log2 = len ? 31u - (unsigned)__builtin_clz(len) : 0;
	unsigned c = log2 > CLASS_MIN_SHIFT ? log2 - CLASS_MIN_SHIFT : 0;
	return c < OMX_COPY_CLASSES ? c : OMX_COPY_CLASSES - 1;
}

int omx_copy_choice_single(struct omx_copy_choice *c, uint32_t len, int guess_single)
{
	unsigned k = copy_class(len);
	uint32_t s = c->single_ns_kib[k], p = c->pull_ns_kib[k];
	unsigned n = c->uses[k];
	c->uses[k] = (uint8_t)(n == 255 ? 64 : n + 1); /* past the first four again, in step */
	int best = s && p ? s <= p : guess_single;
	/* Twice as slow or worse: looked at four times less often (its cost stays ~1-2%). */
	unsigned every = s && p && (s > 2ull * p || p > 2ull * s) ? 4 * OMX_COPY_EXPLORE : OMX_COPY_EXPLORE;
	return (n < 4 ? n & 1 : n % every == 1) ? !best : best;
}

void omx_copy_choice_record(struct omx_copy_choice *c, uint32_t len, int single, uint64_t ns)
{
	if (!len)
		return;
	uint32_t *v = single ? &c->single_ns_kib[copy_class(len)] : &c->pull_ns_kib[copy_class(len)];
	uint64_t x = ns * 16u * 1024u / len + 1; /* 1/16 ns per KiB; never 0 (unknown) */
	if (*v && x > *v)
		x = (3ull * *v + (x < 2ull * *v ? x : 2ull * *v)) / 4;
	*v = x < UINT32_MAX ? (uint32_t)x : UINT32_MAX;
}

/* ---- the boundary from the placement of the moment (shm.h, omx_copy_live) ---- */

_Static_assert(OMX_COPY_LIVE_LO == RNDV_FLOOR && OMX_COPY_LIVE_HI == EAGER_CAP, "the live band is the model's");

static uint32_t second_fastest(const uint32_t *s, uint32_t k)
{
	uint32_t a = UINT32_MAX, b = UINT32_MAX; /* a <= b: the fastest two */
	for (uint32_t i = 0; i < k; i++) {
		if (s[i] < a) {
			b = a;
			a = s[i];
		} else if (s[i] < b) {
			b = s[i];
		}
	}
	return k >= 2 ? b : a;
}

uint32_t omx_copy_live_out_add(struct omx_copy_live_out *o, uint32_t len, uint64_t ns, uint64_t now_ns)
{
	uint32_t k = o->n < OMX_COPY_LIVE_SAMPLES ? o->n : OMX_COPY_LIVE_SAMPLES;
	if (!len)
		return k ? second_fastest(o->s, k) : 0;
	if (o->n && now_ns - o->at_ns > OMX_COPY_LIVE_WINDOW_NS)
		o->n = 0; /* the last samples are from another moment */
	uint64_t x = ns * 16u * 1024u / len + 1; /* never 0 (unknown) */
	o->s[o->n % OMX_COPY_LIVE_SAMPLES] = x < UINT32_MAX ? (uint32_t)x : UINT32_MAX;
	o->n = o->n + 1 < 2 * OMX_COPY_LIVE_SAMPLES ? o->n + 1 : OMX_COPY_LIVE_SAMPLES; /* wraps in step */
	o->at_ns = now_ns;
	k = o->n < OMX_COPY_LIVE_SAMPLES ? o->n : OMX_COPY_LIVE_SAMPLES;
	return second_fastest(o->s, k);
}

int omx_copy_live_useful(const struct omx_copy_calib *c)
{
	return model_applies(c);
}

/*
 * The receiver's copy out stands for both copies (LIVE_TWO_COPIES of it): the sender's copy in
 * writes the lines the receiver last read, and moves them about as dearly. On the Zen 3 VM
 * (stop 62) the copy out of lines another thread had just written took 33-40 ns/KiB with the
 * vCPUs nearest (one core's two threads) in a probe, 45-77 near, 110-150 (to 300) far apart; in
 * the library the second fastest of four read ~35-50 near and ~100-125 far apart, where 2.5 x it
 * answers eager up to 128 KiB near and to 16-32 KiB far apart (the model's steps: 128 KiB up to
 * 120 ns/KiB for the two copies, 64 KiB to 180, 32 KiB to 280, 16 KiB to 480), what the pairs of
 * bench/side_by_side found fastest in each state (eager 2x faster near to 128 KiB; far apart the
 * rendezvous 30-70% faster at 64 KiB, 5-10% at 32 KiB, eager faster at 16 KiB). Fed the sum of the
 * sender's and the receiver's times instead, the model chose the rendezvous near: a sender's time
 * of an eager medium sent among rendezvous reads slots out of every cache (13-52 us for 64 KiB,
 * 6-20 in a stream of them).
 */
#define LIVE_TWO_COPIES 2.5

/* By more than an eighth (from or to 0, unknown, included: the difference is then the figure). */
static int moved(uint32_t now, uint32_t then)
{
	uint32_t d = now > then ? now - then : then - now;
	return d > then / 8;
}

void omx_copy_live_policy(struct omx_copy_live *l, const struct omx_copy_calib *c, uint32_t out_ns_kib)
{
	if (l->made && !moved(out_ns_kib, l->made_out))
		return;
	struct omx_copy_calib live = *c;
	if (out_ns_kib) {
		live.cross_ns_per_kib = LIVE_TWO_COPIES * out_ns_kib / 16.0;
		live.cross_missed = 0;
		live.ring_owns_lines = 0;
	}
	omx_copy_policy(&live, &l->rndv, &l->single_min);
	l->made_out = out_ns_kib;
	l->made = 1;
}
