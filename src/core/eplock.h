/*
 * eplock.h - the endpoint lock and its condition: a futex word each.
 *
 * Every MX call takes the endpoint lock once, and a same-host ping-pong's hop takes it twice on
 * its critical path (the receiving test, the answering send). glibc's mutex spends ~32
 * instructions locking and ~22 unlocking around the one atomic operation each needs (type
 * checks, owner and user counts): ~110 of a hop's ~1400 critical instructions and ~55 of an idle
 * omx_test's (bench/self_pingpong under callgrind). Here the uncontended lock is one compare-and-
 * swap and the unlock one exchange, both inline. The word is 0 (free), 1 (held) or 2 (held, a
 * thread may sleep on it): the unlock that finds 2 wakes one sleeper.
 *
 * The condition is a sequence word that a broadcast bumps; a waiter sleeps on the value it read
 * before dropping the lock, so a broadcast between the two is never missed. Broadcasts make a
 * system call only while someone waits. Waits may end spuriously: callers loop.
 */
#ifndef OMX_CORE_EPLOCK_H
#define OMX_CORE_EPLOCK_H

#include <stdint.h>
#include <time.h>
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define OMX_SINGLE_THREADED() (__libc_single_threaded != 0)
#endif
#endif
#ifndef OMX_SINGLE_THREADED
#define OMX_SINGLE_THREADED() 0
#endif

struct omx_eplock {
	uint32_t word;
};

struct omx_epcond {
	uint32_t seq;
	uint32_t waiters;
};

void omx__eplock_wait(struct omx_eplock *l);
void omx__eplock_wake(struct omx_eplock *l);

/*
 * A process that never created a thread (glibc's __libc_single_threaded; OMX_PROGRESS_THREAD=0
 * and a single-threaded application) needs no atomic operation: a plain store takes and releases
 * the lock, as glibc's own mutex does then (with the atomics, an idle omx_test took 21.8 ns
 * instead of glibc's 17.6). A thread created while the lock is held finds the word taken; the
 * unlock then sees the flag cleared and uses the exchange that wakes it.
 */
static inline void omx__eplock(struct omx_eplock *l)
{
	if (OMX_SINGLE_THREADED()) {
		__atomic_store_n(&l->word, 1, __ATOMIC_RELAXED);
		return;
	}
	uint32_t free_word = 0;
	if (__builtin_expect(!__atomic_compare_exchange_n(&l->word, &free_word, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED), 0))
		omx__eplock_wait(l);
}

/* 0 if taken, nonzero if it is held. */
static inline int omx__eplock_try(struct omx_eplock *l)
{
	uint32_t free_word = 0;
	return !__atomic_compare_exchange_n(&l->word, &free_word, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static inline void omx__epunlock(struct omx_eplock *l)
{
	if (OMX_SINGLE_THREADED()) {
		__atomic_store_n(&l->word, 0, __ATOMIC_RELAXED);
		return;
	}
	if (__builtin_expect(__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) == 2, 0))
		omx__eplock_wake(l);
}

/* Sleep until a broadcast (or spuriously, or past abs_mono: CLOCK_MONOTONIC, NULL for none);
 * l is held on entry and on return. */
void omx__epcond_wait(struct omx_epcond *c, struct omx_eplock *l, const struct timespec *abs_mono);
void omx__epcond_broadcast(struct omx_epcond *c);

#endif
