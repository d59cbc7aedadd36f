/*
 * test_dom_lock.c - the provider's domain lock (ofx.h: dom_lock, dom_unlock) under contention:
 * threads that outnumber the CPUs add to a plain counter under the lock, so that lockers spin,
 * then sleep on the word, and unlocks wake them. The total must be exact, dom_held must say who
 * holds the lock, and under ThreadSanitizer the lock must order the plain additions (a lock that
 * did not would be reported as a data race).
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "ofx.h"

#define THREADS 6
#define ROUNDS 200000

static struct ofx_domain dom;
static unsigned long counter;
static int held_wrong; /* set (atomically: outside the lock too) if dom_held lies */

static void *adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		dom_lock(&dom);
		if (!dom_held(&dom))
			__atomic_store_n(&held_wrong, 1, __ATOMIC_RELAXED);
		counter++;
		if (i % 1000 == 0)
			sched_yield(); /* held across a yield now and then: others must wait, some asleep */
		dom_unlock(&dom);
		if (dom_held(&dom))
			__atomic_store_n(&held_wrong, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, adder, NULL) != 0) {
			printf("FAIL - pthread_create\n");
			return 1;
		}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	int fails = 0;
	if (counter != (unsigned long)THREADS * ROUNDS) {
		printf("FAIL - %lu additions under the lock, %lu expected\n", counter, (unsigned long)THREADS * ROUNDS);
		fails++;
	} else {
		printf("ok - %d threads x %d additions under the lock: exact total\n", THREADS, ROUNDS);
	}
	if (__atomic_load_n(&held_wrong, __ATOMIC_RELAXED)) {
		printf("FAIL - dom_held wrong inside or outside the lock\n");
		fails++;
	} else {
		printf("ok - dom_held true inside the lock, false after it\n");
	}
	if (__atomic_load_n(&dom.lock, __ATOMIC_RELAXED) != 0) {
		printf("FAIL - lock word %u after every unlock\n", dom.lock);
		fails++;
	} else {
		printf("ok - lock word free at the end\n");
	}
	return fails ? 1 : 0;
}
