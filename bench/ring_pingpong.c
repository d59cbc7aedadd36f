/*
 * ring_pingpong.c - the same-host path's shared-memory ring alone (src/shm/ring.c), for
 * bench/same_host.sh (not a test): a parent and a forked child, each owning a ring and pushing
 * frames into the other's, busy-polling their own. No protocol: what omx's same-host path costs
 * above this is the MX stack (encoding, sequence numbers, matching, completion).
 *
 *   ring_pingpong <length> <iterations> [echo|oneway] [cpuA,cpuB]
 * A message of <length> bytes is one frame of <length> + 40 bytes (the size of an omx message
 * frame's headers), so that frames fill the same cache lines of a slot as omx's do; lengths above
 * a slot (9000 bytes) are refused. oneway (default): the reply is an empty frame; echo: the reply
 * has the same length. The receiver copies every frame out of the ring, as a receive would.
 * Output (CSV), as bench/local_pingpong: ring,length,iterations,half_rtt_us,MB/s
 * RINGPP_SLOT / RINGPP_RING (bytes): another slot size and ring size than omx's defaults here
 * (9216, 8 MiB), for layout experiments (stop 44: a hop's cost against the slot stride).
 * RINGPP_PAUSE (set): a pause instruction after each empty poll, as bench/local_pingpong's flag
 * spins (stop 47: 0.141 against 0.159 us a hop, near; omx's own polls, ~25 ns apart, gained
 * nothing from one).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm/shm.h"

#define FRAME_HEAD 40
#define SLOT_BYTES 9216u

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct rx {
	int got;
	uint8_t *dst;
};

static void on_frame(void *arg, const uint8_t *frame, size_t len)
{
	struct rx *r = arg;
	memcpy(r->dst, frame, len);
	r->got = 1;
}

static void push(struct omx_shm_ring *peer, const uint8_t *frame, size_t len)
{
	struct iovec iov = { (void *)frame, len };
	int bell;
	while (omx_shm_ring_push(peer, &iov, 1, &bell) == -EAGAIN)
		;
}

static int spin_pause;

static void wait_frame(struct omx_shm_ring *own, struct rx *r)
{
	r->got = 0;
	while (!r->got)
		if (!omx_shm_ring_poll(own, on_frame, r, 1) && spin_pause) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		}
}

int main(int argc, char **argv)
{
	int cpu[2] = { -1, -1 };
	if (argc < 3) {
		fprintf(stderr, "usage: %s <length> <iterations> [echo|oneway] [cpuA,cpuB]\n", argv[0]);
		return 2;
	}
	size_t len = strtoull(argv[1], NULL, 0) + FRAME_HEAD;
	long iters = atol(argv[2]);
	int echo = argc > 3 && !strcmp(argv[3], "echo");
	if ((argc > 4 && sscanf(argv[4], "%d,%d", &cpu[0], &cpu[1]) != 2) || len > SLOT_BYTES || iters < 1) {
		fprintf(stderr, "bad arguments (lengths up to %u bytes)\n", SLOT_BYTES - FRAME_HEAD);
		return 2;
	}
	char dir[] = "/tmp/omx-ringpp.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	setenv("OMX_SHM_DIR", dir, 1);
	uint8_t *frame = calloc(1, SLOT_BYTES), *dst = calloc(1, SLOT_BYTES);
	if (!frame || !dst)
		return 1;
	memset(frame, 1, len);
	const uint8_t mac[6] = { 2, 0, 0x52, 0x50, 0x50, 0 };
	pid_t pid = fork();
	int me = pid == 0;
	if (cpu[0] >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu[me], &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0) {
			perror("sched_setaffinity");
			return 1;
		}
	}
	int err = 0;
	spin_pause = getenv("RINGPP_PAUSE") != NULL;
	uint32_t slot_b = getenv("RINGPP_SLOT") ? (uint32_t)atoi(getenv("RINGPP_SLOT")) : SLOT_BYTES;
	uint32_t ring_b = getenv("RINGPP_RING") ? (uint32_t)atoi(getenv("RINGPP_RING")) : 8u << 20;
	struct omx_shm_ring *own = omx_shm_ring_create(mac, (uint8_t)me, slot_b, ring_b, 1, &err);
	struct omx_shm_ring *peer = NULL;
	for (int i = 0; own && !peer && i < 5000; i++)
		if (!(peer = omx_shm_ring_attach(mac, (uint8_t)!me, &err)))
			usleep(1000);
	if (!own || !peer) {
		fprintf(stderr, "ring set-up failed: %s\n", strerror(-err));
		return 1;
	}
	size_t rlen = echo ? len : FRAME_HEAD;
	struct rx r = { 0, dst };
	double t0 = 0;
	/* Warm up over every slot of both rings, twice: a slot's first use faults its pages in, which
	 * 100 warm-up rounds left to the measured ones (a 20000-round run read 0.11 us per hop
	 * instead of 0.07; stop 25). */
	long warm = 100 + 2 * (long)omx_shm_ring_slots(own);
	for (long i = 0; i < iters + warm; i++) {
		if (i == warm)
			t0 = now_s();
		if (me) {
			wait_frame(own, &r);
			push(peer, frame, rlen);
		} else {
			push(peer, frame, len);
			wait_frame(own, &r);
		}
	}
	double t = now_s() - t0;
	omx_shm_ring_close(peer);
	if (me) {
		/* Our ring stays until the parent has read its last frame from it. */
		usleep(100000);
		omx_shm_ring_close(own);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	omx_shm_ring_close(own);
	free(frame);
	free(dst);
	rmdir(dir);
	len -= FRAME_HEAD;
	printf("ring,%zu,%ld,%.3f,%.1f\n", len, iters, t / (double)iters / 2 * 1e6,
	       (echo ? 2.0 : 1.0) * (double)len * (double)iters / t / 1e6);
	return 0;
}
