/*
 * share_copy.c - what each way of moving a large message between two processes of one host costs
 * on this machine, without any protocol (not a test; bench/same_host.sh's bandwidth modes put a
 * library on top of these):
 *   memfd  - a single copy in user space: the receiver memcpys from the sender's buffer, which
 *            lives in pages both processes map (a memfd). What a library could do only by
 *            moving the application's buffer into shared pages (docs/performance.md, stop 50).
 *   cma    - the kernel's single copy: process_vm_readv from the sender's private buffer, in
 *            one call (what omx's and vader's single copy do).
 *   cma-huge - the same from a private buffer in transparent huge pages (madvise MADV_HUGEPAGE
 *            before its first write): the kernel then pins 2 MiB pages instead of 4 KiB ones
 *            (what OMX_SHARED_HUGE_AFTER gives reused buffers of 1 MiB or more). Without huge
 *            pages in force (THP "never") it reads like cma.
 *   cma-coop - the kernel's single copy shared by both CPUs, as omx's cooperative copy does
 *            (docs/architecture.md, "Senders help"): huge-page buffers on both sides, the receiver
 *            reads chunks of COOP_CHUNK from the front (process_vm_readv), the sender writes
 *            chunks from the back into the receiver's buffer (process_vm_writev), both claiming
 *            them from a shared window until they meet. The ceiling of omx's default large path.
 *   memfd-coop - the same with memcpy, both buffers in memfds both processes map: the ceiling
 *            of omx's path between buffers of its shared pool (omx_shared_alloc, the shared heap).
 *   two    - two copies, pipelined: the sender copies 32 KiB chunks into a shared buffer of 16
 *            chunks while the receiver copies earlier ones out (the shape of vader's two-copy
 *            path and of omx's pulls through its rings).
 * Parent and child pinned to CPUs 0 and 1 send the message to each other in turn, as a ping-pong
 * (omx_perf's bandwidth counts both directions the same way). The modes run interleaved, round
 * after round; the median of the rounds is printed per mode.
 *
 *   share_copy <length> [iterations [rounds]]
 * Output (CSV): mode,length,iterations,rounds,MB/s_median,MB/s_min,MB/s_max
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (32u * 1024u)
#define CHUNKS 16u
#define MAX_ROUNDS 64
#define COOP_CHUNK (256u * 1024u) /* OMX_SHARED_COOP_CHUNK's default */

enum { MODE_MEMFD, MODE_CMA, MODE_TWO, MODE_CMA_HUGE, MODE_CMA_COOP, MODE_MEMFD_COOP, MODES };
static const char *const mode_name[MODES] = { "memfd", "cma", "two", "cma-huge", "cma-coop", "memfd-coop" };
#define HUGE_PAGE (2u << 20)

/* Shared by the two processes: the turn counter and the two-copy buffer's positions, each on its
 * own line. */
struct ctl {
	uint64_t turn __attribute__((aligned(64)));
	uint64_t produced __attribute__((aligned(64)));
	uint64_t consumed __attribute__((aligned(64)));
	uint64_t window __attribute__((aligned(64))); /* cooperative modes: unclaimed [low 32, high 32) */
	uint64_t done __attribute__((aligned(64)));   /* bytes both sides have copied */
	pid_t pid[2];
	double mbs[MODES][MAX_ROUNDS];
};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s) < 0) /* the figures are then not two CPUs' */
		fprintf(stderr, "share_copy: cannot pin to CPU %d, running unpinned\n", cpu);
}

static void *map_shared(size_t len, int fd)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | (fd < 0 ? MAP_ANONYMOUS : 0), fd, 0);
	if (p == MAP_FAILED) {
		perror("share_copy: mmap");
		exit(1);
	}
	return p;
}

/* len bytes of a new memfd, mapped shared (the child inherits the mapping), filled with `fill`. */
static uint8_t *memfd_buffer(size_t len, int fill)
{
	int fd = memfd_create("share_copy", 0);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0) {
		perror("share_copy: memfd");
		exit(1);
	}
	uint8_t *p = map_shared(len, fd);
	close(fd);
	memset(p, fill, len);
	return p;
}

static uint64_t load(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void store(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* The two-copy sender: len bytes of src through the shared chunks. */
static void two_send(struct ctl *c, uint8_t *chunks, const uint8_t *src, size_t len)
{
	uint64_t pos = load(&c->produced);
	for (size_t off = 0; off < len; off += CHUNK, pos++) {
		while (pos - load(&c->consumed) >= CHUNKS)
			;
		size_t n = len - off < CHUNK ? len - off : CHUNK;
		memcpy(chunks + (pos % CHUNKS) * CHUNK, src + off, n);
		store(&c->produced, pos + 1);
	}
}

static void two_recv(struct ctl *c, const uint8_t *chunks, uint8_t *dst, size_t len)
{
	uint64_t pos = load(&c->consumed);
	for (size_t off = 0; off < len; off += CHUNK, pos++) {
		while (load(&c->produced) == pos)
			;
		size_t n = len - off < CHUNK ? len - off : CHUNK;
		memcpy(dst + off, chunks + (pos % CHUNKS) * CHUNK, n);
		store(&c->consumed, pos + 1);
	}
}

/* Up to COOP_CHUNK unclaimed bytes of the window, from the front or the back: their length (0
 * when none are left), their first byte in *at. */
static uint64_t claim(struct ctl *c, int back, uint64_t *at)
{
	uint64_t w = load(&c->window), lo, hi, n;
	do {
		lo = w & 0xffffffffu;
		hi = w >> 32;
		if (lo >= hi)
			return 0;
		n = hi - lo < COOP_CHUNK ? hi - lo : COOP_CHUNK;
	} while (!__atomic_compare_exchange_n(&c->window, &w, back ? lo | (hi - n) << 32 : (lo + n) | hi << 32, 0,
					      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	*at = back ? hi - n : lo;
	return n;
}

/* One side's share of a cooperative copy: the sender (back) writes into the receiver's buffer,
 * the receiver (front) reads from the sender's; with pid 0 both are mapped here (memcpy). */
static void coop_copy(struct ctl *c, int back, pid_t pid, uint8_t *dst, uint8_t *src)
{
	uint64_t at, n;
	while ((n = claim(c, back, &at))) {
		if (!pid) {
			memcpy(dst + at, src + at, n);
		} else {
			struct iovec l = { (back ? src : dst) + at, n }, r = { (back ? dst : src) + at, n };
			ssize_t got = back ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
			if (got != (ssize_t)n) {
				perror("share_copy: process_vm_readv/writev");
				exit(1);
			}
		}
		__atomic_fetch_add(&c->done, n, __ATOMIC_ACQ_REL);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s <length> [iterations [rounds]]\n", argv[0]);
		return 2;
	}
	size_t len = strtoull(argv[1], NULL, 0);
	long iters = argc > 2 ? atol(argv[2]) : 100;
	int rounds = argc > 3 ? atoi(argv[3]) : 9;
	if (len == 0 || len > UINT32_MAX || iters <= 0 || rounds <= 0 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "share_copy: length 1..2^32-1, iterations > 0, rounds 1..%d\n", MAX_ROUNDS);
		return 2;
	}
	struct ctl *c = map_shared(sizeof(*c), -1);
	uint8_t *chunks = map_shared((size_t)CHUNK * CHUNKS, -1);
	/* Each side's send buffer, both kinds: in a memfd both map, and private (for cma); and for
	 * memfd-coop each side's receive buffer in a memfd. */
	uint8_t *shared_buf[2], *private_buf[2], *shared_recv[2];
	for (int i = 0; i < 2; i++) {
		shared_buf[i] = memfd_buffer(len, 0x11 * (i + 1));
		shared_recv[i] = memfd_buffer(len, 0x55);
	}
	/* Allocated before the fork, at the same addresses in both processes (process_vm_readv
	 * names the sender's); each side then writes its own, which gives it its own pages. */
	uint8_t *recv_buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	for (int i = 0; i < 2; i++)
		private_buf[i] = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	size_t huge_len = (len + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
	uint8_t *huge_buf[2], *huge_recv;
	for (int i = 0; i < 2; i++) {
		huge_buf[i] = aligned_alloc(HUGE_PAGE, huge_len);
		if (huge_buf[i])
			(void)madvise(huge_buf[i], huge_len, MADV_HUGEPAGE); /* a hint: cma then */
	}
	huge_recv = aligned_alloc(HUGE_PAGE, huge_len);
	if (huge_recv)
		(void)madvise(huge_recv, huge_len, MADV_HUGEPAGE);
	if (!recv_buf || !private_buf[0] || !private_buf[1] || !huge_buf[0] || !huge_buf[1] || !huge_recv)
		return 1;
	c->pid[0] = getpid();
	pid_t child = fork();
	if (child < 0) {
		perror("share_copy: fork");
		return 1;
	}
	int me = child == 0;
	pin(me);
	memset(recv_buf, 0x33, len);
	memset(private_buf[me], 0x22 * (me + 1), len);
	memset(huge_buf[me], 0x44 * (me + 1), huge_len);
	memset(huge_recv, 0x66, huge_len);
	if (!me) {
		c->pid[1] = child;
		store(&c->turn, 1);
	}
	while (load(&c->turn) == 0) /* the child waits for its pid to be known */
		;
	uint64_t turn = 2;
	if (me)
		store(&c->turn, 2);
	while (load(&c->turn) != 2)
		;
	for (int r = 0; r < rounds; r++) {
		for (int m = 0; m < MODES; m++) {
			double t0 = 0;
			for (long it = -2; it < iters; it++) { /* two warm-up round trips */
				if (it == 0)
					t0 = now_s();
				for (int sender = 0; sender < 2; sender++, turn += 2) {
					int coop = m == MODE_CMA_COOP || m == MODE_MEMFD_COOP;
					if (me == sender) {
						if (coop) {
							store(&c->done, 0);
							store(&c->window, (uint64_t)len << 32);
						}
						store(&c->turn, turn + 1); /* the message is there to be taken */
						if (m == MODE_TWO)
							two_send(c, chunks, private_buf[me], len);
						else if (m == MODE_CMA_COOP)
							coop_copy(c, 1, c->pid[!me], huge_recv, huge_buf[me]);
						else if (m == MODE_MEMFD_COOP)
							coop_copy(c, 1, 0, shared_recv[!me], shared_buf[me]);
						while (load(&c->turn) < turn + 2)
							;
						continue;
					}
					while (load(&c->turn) < turn + 1)
						;
					if (m == MODE_MEMFD) {
						memcpy(recv_buf, shared_buf[sender], len);
					} else if (m == MODE_CMA || m == MODE_CMA_HUGE) {
						uint8_t *from = m == MODE_CMA ? private_buf[sender] : huge_buf[sender];
						struct iovec l = { recv_buf, len }, rv = { from, len };
						if (process_vm_readv(c->pid[sender], &l, 1, &rv, 1, 0) != (ssize_t)len) {
							perror("share_copy: process_vm_readv");
							exit(1);
						}
					} else if (coop) {
						if (m == MODE_CMA_COOP)
							coop_copy(c, 0, c->pid[sender], huge_recv, huge_buf[sender]);
						else
							coop_copy(c, 0, 0, shared_recv[me], shared_buf[sender]);
						while (load(&c->done) < len) /* the sender's last chunk */
							;
					} else {
						two_recv(c, chunks, recv_buf, len);
					}
					store(&c->turn, turn + 2);
				}
			}
			if (!me)
				c->mbs[m][r] = 2.0 * (double)len * (double)iters / (now_s() - t0) / 1e6;
		}
	}
	free(recv_buf);
	free(private_buf[0]);
	free(private_buf[1]);
	free(huge_buf[0]);
	free(huge_buf[1]);
	free(huge_recv);
	if (me)
		return 0;
	int status;
	waitpid(child, &status, 0);
	for (int m = 0; m < MODES; m++) {
		qsort(c->mbs[m], (size_t)rounds, sizeof(double), cmp_double);
		printf("%s,%zu,%ld,%d,%.0f,%.0f,%.0f\n", mode_name[m], len, iters, rounds, c->mbs[m][rounds / 2],
		       c->mbs[m][0], c->mbs[m][rounds - 1]);
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
