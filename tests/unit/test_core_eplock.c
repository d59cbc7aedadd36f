/*
 * test_core_eplock.c - the endpoint lock and its condition (core/eplock.h): mutual exclusion
 * under contention, the sleeping protocol (a waiter that cannot spin it out marks the word and
 * sleeps; the unlock wakes it), timed waits that end, broadcasts that reach every waiter, and no
 * lost wake-up over many handovers. A watchdog turns a hang into a failure. Built for TSan too.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/eplock.h"
#include "unit_check.h"

static struct omx_eplock L;
static struct omx_epcond C;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void hung(int sig)
{
	(void)sig;
	static const char m[] = "FAIL: hung (a lost wake-up or a lock never released)\n";
	(void)!write(2, m, sizeof(m) - 1);
	_exit(1);
}

/* ---- mutual exclusion: unlocked increments would lose some ---- */
#define ADDERS 4
#define ADDS 200000
static unsigned long counter;

static void *adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < ADDS; i++) {
		omx__eplock(&L);
		unsigned long v = counter;
		if ((i & 1023) == 0)
			sched_yield(); /* hold it across a yield now and then: the others must sleep */
		counter = v + 1;
		omx__epunlock(&L);
	}
	return NULL;
}

/* ---- the sleeping protocol ---- */
static int blocked_done;

static void *blocked(void *arg)
{
	(void)arg;
	omx__eplock(&L);
	blocked_done = 1;
	omx__epunlock(&L);
	return NULL;
}

/* ---- broadcasts and handovers ---- */
static int go, woken;

static void *cond_waiter(void *arg)
{
	(void)arg;
	omx__eplock(&L);
	while (!go)
		omx__epcond_wait(&C, &L, NULL);
	woken++;
	omx__epunlock(&L);
	return NULL;
}

#define HANDOVERS 100000
static int turn; /* 0: the main thread's, 1: the partner's */

static void *partner(void *arg)
{
	(void)arg;
	for (int i = 0; i < HANDOVERS; i++) {
		omx__eplock(&L);
		while (turn != 1)
			omx__epcond_wait(&C, &L, NULL);
		turn = 0;
		omx__epcond_broadcast(&C);
		omx__epunlock(&L);
	}
	return NULL;
}

int main(void)
{
	signal(SIGALRM, hung);
	alarm(120);

	/* No thread created yet: with glibc's flag the lock is a plain store (no atomic operation). */
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
	CHECK(OMX_SINGLE_THREADED());
#endif
#endif
	omx__eplock(&L);
	CHECK_EQ(L.word, 1);
	omx__epunlock(&L);
	CHECK_EQ(L.word, 0);
	/* Taken single-threaded, then a thread created: it must wait for the release, which then
	 * goes the multi-threaded way (and wakes it if it slept). */
	omx__eplock(&L);
	pthread_t late;
	pthread_create(&late, NULL, blocked, NULL);
	CHECK(!OMX_SINGLE_THREADED());
	usleep(20000);
	CHECK_EQ(__atomic_load_n(&blocked_done, __ATOMIC_RELAXED), 0);
	omx__epunlock(&L);
	pthread_join(late, NULL);
	CHECK_EQ(blocked_done, 1);
	blocked_done = 0;

	/* Mutual exclusion. */
	pthread_t t[ADDERS];
	for (int i = 0; i < ADDERS; i++)
		pthread_create(&t[i], NULL, adder, NULL);
	for (int i = 0; i < ADDERS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(counter, (unsigned long)ADDERS * ADDS);
	CHECK_EQ(__atomic_load_n(&L.word, __ATOMIC_RELAXED), 0);

	/* A try on a held lock fails and leaves it held; on a free one it takes it. */
	omx__eplock(&L);
	CHECK(omx__eplock_try(&L) != 0);
	CHECK_EQ(L.word, 1);
	omx__epunlock(&L);
	CHECK(omx__eplock_try(&L) == 0);
	omx__epunlock(&L);

	/* Held for long: the waiter spins out, marks the word 2 and sleeps; the unlock that finds 2
	 * wakes it, and it takes the lock. */
	omx__eplock(&L);
	pthread_t b;
	pthread_create(&b, NULL, blocked, NULL);
	uint64_t until = mono_ns() + 5000000000ull;
	while (__atomic_load_n(&L.word, __ATOMIC_RELAXED) != 2 && mono_ns() < until)
		usleep(1000);
	CHECK_EQ(__atomic_load_n(&L.word, __ATOMIC_RELAXED), 2);
	CHECK_EQ(__atomic_load_n(&blocked_done, __ATOMIC_RELAXED), 0);
	omx__epunlock(&L);
	pthread_join(b, NULL);
	CHECK_EQ(blocked_done, 1);

	/* A timed wait without a broadcast ends (by its deadline or spuriously), the lock held. */
	omx__eplock(&L);
	uint64_t t0 = mono_ns(), dl = t0 + 20000000ull;
	struct timespec ts = { (time_t)(dl / 1000000000ull), (long)(dl % 1000000000ull) };
	while (mono_ns() < dl)
		omx__epcond_wait(&C, &L, &ts);
	CHECK(L.word != 0);
	CHECK_EQ(C.waiters, 0);
	omx__epunlock(&L);
	/* A deadline already past returns at once. */
	omx__eplock(&L);
	struct timespec past = { 0, 1 };
	omx__epcond_wait(&C, &L, &past);
	CHECK(L.word != 0);
	omx__epunlock(&L);

	/* One broadcast reaches every waiter. */
	pthread_t w[6];
	for (int i = 0; i < 6; i++)
		pthread_create(&w[i], NULL, cond_waiter, NULL);
	until = mono_ns() + 5000000000ull;
	while (__atomic_load_n(&C.waiters, __ATOMIC_SEQ_CST) != 6 && mono_ns() < until)
		usleep(1000);
	CHECK_EQ(__atomic_load_n(&C.waiters, __ATOMIC_SEQ_CST), 6);
	omx__eplock(&L);
	go = 1;
	omx__epcond_broadcast(&C);
	omx__epunlock(&L);
	for (int i = 0; i < 6; i++)
		pthread_join(w[i], NULL);
	CHECK_EQ(woken, 6);
	CHECK_EQ(C.waiters, 0);

	/* Handovers: each side waits for its turn; a lost wake-up would hang (the watchdog). */
	pthread_t p;
	pthread_create(&p, NULL, partner, NULL);
	int handed = 0;
	for (int i = 0; i < HANDOVERS; i++) {
		omx__eplock(&L);
		while (turn != 0)
			omx__epcond_wait(&C, &L, NULL);
		turn = 1;
		handed++;
		omx__epcond_broadcast(&C);
		omx__epunlock(&L);
	}
	pthread_join(p, NULL);
	CHECK_EQ(handed, HANDOVERS);
	CHECK_EQ(turn, 0);
	return unit_finish(NULL);
}
