/*
 * local_pingpong.c - same-host baselines for bench/same_host.sh (not a test): half round-trip
 * latency and bandwidth between a parent and a forked child over
 *   pipe   - two pipes, blocking read/write
 *   unix   - a SOCK_STREAM socketpair, blocking
 *   shm    - a shared anonymous mapping with a busy-polled flag (the floor for any shared-memory
 *            ring) and memcpy through a 64 KiB buffer for bandwidth
 *
 *   local_pingpong <pipe|unix|shm> <length> <iterations> [echo|oneway] [cpuA,cpuB]
 * oneway (default): the reply is 1 byte (0 for shm) and MB/s counts one direction, like
 * omx_perf -U; echo: the reply has the same length and MB/s counts both directions, like
 * omx_perf's latency runs. cpuA,cpuB: pin the parent to cpuA and the child to cpuB.
 * Output (CSV): kind,length,iterations,half_rtt_us,MB/s
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void xfer(int fd, void *buf, size_t len, int wr)
{
	size_t done = 0;
	while (done < len) {
		ssize_t r = wr ? write(fd, (char *)buf + done, len - done) : read(fd, (char *)buf + done, len - done);
		if (r <= 0)
			exit(1);
		done += (size_t)r;
	}
}

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() __asm__ __volatile__("" ::: "memory")
#endif

#define CHUNK 65536
struct shm {
	volatile uint64_t turn __attribute__((aligned(64)));
	volatile uint64_t fill __attribute__((aligned(64)));
	volatile uint64_t drained __attribute__((aligned(64)));
	char buf[CHUNK] __attribute__((aligned(64)));
};

/* One direction of a message through the 64 KiB buffer (copy in, copy out). */
static void shm_send(struct shm *s, const char *src, size_t len, uint64_t *seq)
{
	for (size_t off = 0; off < len || (len == 0 && off == 0); off += CHUNK) {
		size_t n = len - off < CHUNK ? len - off : CHUNK;
		while (s->drained != *seq)
			cpu_relax();
		memcpy(s->buf, src + off, n);
		__atomic_store_n(&s->fill, ++*seq, __ATOMIC_RELEASE);
		if (len == 0)
			break;
	}
}

static void shm_recv(struct shm *s, char *dst, size_t len, uint64_t *seq)
{
	for (size_t off = 0; off < len || (len == 0 && off == 0); off += CHUNK) {
		size_t n = len - off < CHUNK ? len - off : CHUNK;
		while (__atomic_load_n(&s->fill, __ATOMIC_ACQUIRE) != *seq + 1)
			cpu_relax();
		memcpy(dst + off, s->buf, n);
		__atomic_store_n(&s->drained, ++*seq, __ATOMIC_RELEASE);
		if (len == 0)
			break;
	}
}

int main(int argc, char **argv)
{
	if (argc < 4 || argc > 6) {
		fprintf(stderr, "usage: %s <pipe|unix|shm> <length> <iterations> [echo|oneway] [cpuA,cpuB]\n", argv[0]);
		return 2;
	}
	int echo = argc > 4 && !strcmp(argv[4], "echo");
	int cpu[2] = { -1, -1 };
	if (argc > 5 && sscanf(argv[5], "%d,%d", &cpu[0], &cpu[1]) != 2)
		return 2;
	const char *kind = argv[1];
	size_t len = strtoull(argv[2], NULL, 0);
	long iters = atol(argv[3]);
	char *buf = malloc(len ? len : 1);
	memset(buf, 1, len ? len : 1);
	int a[2], b[2];
	struct shm *s = NULL;
	if (!strcmp(kind, "pipe")) {
		if (pipe(a) || pipe(b))
			return 1;
	} else if (!strcmp(kind, "unix")) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
			return 1;
		a[0] = b[1] = sv[0];
		a[1] = b[0] = sv[1];
	} else if (!strcmp(kind, "shm")) {
		s = mmap(NULL, sizeof(*s) * 2, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (s == MAP_FAILED)
			return 1;
		memset(s, 0, sizeof(*s) * 2);
	} else {
		return 2;
	}
	/* a: parent -> child, b: child -> parent; 1-byte reply */
	pid_t pid = fork();
	uint64_t seq0 = 0, seq1 = 0;
	char one = 0;
	/* the reply: the message itself (echo), or 1 byte (0 through the shared flag) */
	char *rbuf = echo ? buf : &one;
	size_t rlen = echo ? len : s ? 0 : 1;
	size_t mlen = len; /* a 0-byte message is 1 byte through pipes and sockets */
	if (!s && !len) {
		mlen = 1;
		rlen = 1;
	}
	if (cpu[0] >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(pid == 0 ? cpu[1] : cpu[0], &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0) {
			perror("sched_setaffinity");
			return 1;
		}
	}
	if (pid == 0) {
		for (long i = 0; i < iters + 10; i++) {
			if (s) {
				shm_recv(&s[0], buf, len, &seq0);
				shm_send(&s[1], rbuf, rlen, &seq1);
			} else {
				xfer(a[0], buf, mlen, 0);
				xfer(b[1], rbuf, rlen, 1);
			}
		}
		_exit(0);
	}
	double t0 = 0;
	for (long i = 0; i < iters + 10; i++) {
		if (i == 10)
			t0 = now_s();
		if (s) {
			shm_send(&s[0], buf, len, &seq0);
			shm_recv(&s[1], rbuf, rlen, &seq1);
		} else {
			xfer(a[1], buf, mlen, 1);
			xfer(b[0], rbuf, rlen, 0);
		}
	}
	double t = now_s() - t0;
	waitpid(pid, NULL, 0);
	/* Half round trip for latency; bandwidth counts the payload of one direction per trip (both
	 * with echo). */
	printf("%s,%zu,%ld,%.3f,%.1f\n", kind, len, iters, t / (double)iters / 2 * 1e6,
	       (echo ? 2.0 : 1.0) * (double)len * (double)iters / t / 1e6);
	return 0;
}
