/*
 * ring_model.c - what each step of a shared-memory ring's hop costs (not a test; a model of
 * src/shm/ring.c, not its code): two threads pinned to CPUs 0 and 1 play ping-pong through two
 * rings of slots, one a direction, in several variants at once. The variants run in turn, in
 * bursts of BURST round trips, ROUNDS times over, and each round's time is divided by the first
 * variant's of the same round: the vCPUs of these VMs move between a near and a far placement
 * every few seconds, and a variant run a second later than another reads the placement, not the
 * variant. Ratios of neighbouring bursts keep their quartiles within a few percent.
 *
 *   ring_model V:SLOTS:STRIDE [V:SLOTS:STRIDE ...]     (up to 8 variants; the first is the base)
 * V is how much of a ring push and poll the variant does, each level adding to the one before:
 *   0  the slot's sequence word, published by a release store and polled (a flag per slot)
 *   1  + a 48-byte frame, its length and owner written before the publication, copied out after
 *   2  + the publication by a compare-and-swap (ring.c's, which detects a skipped slot)
 *   3  + the producer's claim of the position by an atomic add on the tail (ring.c's claim)
 *   4  + the consumer's head store after each take (ring.c's release of the slot)
 * SLOTS slots STRIDE bytes apart (ring.c: 64-4096 slots at a stride of the frame size + 64).
 * Output: per variant, the median ns a hop and the median ratio to the first variant [quartiles].
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_VARIANTS 8
#define BURST 20000
#define ROUNDS 40
#define FRAME 48

struct variant {
	int level;
	uint64_t slots, stride;
};

/* The producer's and the consumer's words on lines of their own, as in ring.c. */
struct ring {
	uint64_t tail __attribute__((aligned(64)));
	uint64_t head __attribute__((aligned(64)));
	uint64_t taken __attribute__((aligned(64))); /* the consumer's private position */
	uint8_t *mem;
} __attribute__((aligned(64)));

struct slot {
	uint64_t seq;
	uint32_t len, owner;
	uint8_t data[];
};

static struct variant var[MAX_VARIANTS];
static int nvar;
static struct ring rings[MAX_VARIANTS][2];
static double hop_ns[MAX_VARIANTS][ROUNDS];

static struct slot *slot_at(const struct ring *r, const struct variant *v, uint64_t pos)
{
	return (struct slot *)(r->mem + (pos % v->slots) * v->stride);
}

static void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void push(const struct variant *v, struct ring *r, const uint8_t *frame)
{
	uint64_t pos;
	if (v->level >= 3) {
		pos = __atomic_fetch_add(&r->tail, 1, __ATOMIC_RELAXED);
	} else {
		pos = r->tail;
		r->tail = pos + 1;
	}
	struct slot *s = slot_at(r, v, pos);
	if (v->level >= 1) {
		memcpy(s->data, frame, FRAME);
		s->owner = 1;
		s->len = FRAME;
	}
	if (v->level >= 2) {
		uint64_t expect = pos + 1 - v->slots;
		(void)__atomic_compare_exchange_n(&s->seq, &expect, pos + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
	} else {
		__atomic_store_n(&s->seq, pos + 1, __ATOMIC_RELEASE);
	}
}

static void take(const struct variant *v, struct ring *r, uint8_t *out)
{
	uint64_t pos = r->taken;
	struct slot *s = slot_at(r, v, pos);
	while (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != pos + 1)
		spin_pause();
	if (v->level >= 1)
		memcpy(out, s->data, s->len < FRAME ? s->len : FRAME);
	r->taken = pos + 1;
	if (v->level >= 4)
		__atomic_store_n(&r->head, pos + 1, __ATOMIC_RELEASE);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* The echoing side: takes from ring 1 of each variant, answers into ring 0. */
static void *echo(void *arg)
{
	(void)arg;
	uint8_t frame[FRAME] = { 1 }, out[FRAME];
	pin(1);
	for (int round = 0; round < ROUNDS; round++)
		for (int k = 0; k < nvar; k++)
			for (int i = 0; i < BURST; i++) {
				take(&var[k], &rings[k][1], out);
				push(&var[k], &rings[k][0], frame);
			}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc && nvar < MAX_VARIANTS; i++) {
		struct variant *v = &var[nvar];
		unsigned long long slots = 0, stride = 0;
		if (sscanf(argv[i], "%d:%llu:%llu", &v->level, &slots, &stride) != 3 || v->level < 0 || v->level > 4 ||
		    slots < 1 || slots > 4096 || stride < 64 || stride % 64 || stride > (1u << 20)) {
			fprintf(stderr, "bad variant %s: LEVEL(0-4):SLOTS(1-4096):STRIDE(multiple of 64)\n", argv[i]);
			return 2;
		}
		v->slots = slots;
		v->stride = stride;
		nvar++;
	}
	if (!nvar) {
		fprintf(stderr, "usage: %s LEVEL:SLOTS:STRIDE ...\n", argv[0]);
		return 2;
	}
	for (int k = 0; k < nvar; k++)
		for (int d = 0; d < 2; d++) {
			size_t bytes = (size_t)(var[k].slots * var[k].stride + 4095) & ~(size_t)4095;
			rings[k][d].mem = aligned_alloc(4096, bytes);
			if (!rings[k][d].mem)
				return 1;
			memset(rings[k][d].mem, 0, bytes);
			for (uint64_t j = 0; j < var[k].slots; j++) /* free for round 0, as ring.c's slots */
				slot_at(&rings[k][d], &var[k], j)->seq = j + 1 - var[k].slots;
		}
	pthread_t t;
	if (pthread_create(&t, NULL, echo, NULL))
		return 1;
	pin(0);
	uint8_t frame[FRAME] = { 2 }, out[FRAME];
	for (int round = 0; round < ROUNDS; round++)
		for (int k = 0; k < nvar; k++) {
			double t0 = now_s();
			for (int i = 0; i < BURST; i++) {
				push(&var[k], &rings[k][1], frame);
				take(&var[k], &rings[k][0], out);
			}
			hop_ns[k][round] = (now_s() - t0) / BURST / 2 * 1e9;
		}
	pthread_join(t, NULL);
	for (int k = 0; k < nvar; k++) {
		double ratio[ROUNDS], ns[ROUNDS];
		for (int r = 0; r < ROUNDS; r++) {
			ratio[r] = hop_ns[k][r] / hop_ns[0][r];
			ns[r] = hop_ns[k][r];
		}
		qsort(ratio, ROUNDS, sizeof(double), cmp_double);
		qsort(ns, ROUNDS, sizeof(double), cmp_double);
		printf("level %d, %llu slots, stride %llu: %.1f ns a hop, %.3f x the first [%.3f-%.3f]\n", var[k].level,
		       (unsigned long long)var[k].slots, (unsigned long long)var[k].stride, ns[ROUNDS / 2],
		       ratio[ROUNDS / 2], ratio[ROUNDS / 4], ratio[3 * ROUNDS / 4]);
	}
	return 0;
}
