/*
 * eplock.c - the slow paths of the endpoint lock and its condition (eplock.h).
 */
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/eplock.h"

/* Spins before sleeping: the lock is mostly held for a progress pass (well under a microsecond),
 * and a sleep and its wake-up cost tens of microseconds on these VMs. */
#define SPINS 200

static long futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts, uint32_t bitset)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, bitset);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

void omx__eplock_wait(struct omx_eplock *l)
{
	for (int i = 0; i < SPINS; i++) {
		cpu_relax();
		uint32_t free_word = 0;
		if (__atomic_load_n(&l->word, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&l->word, &free_word, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
	}
	/* Marked 2 from here on, whoever holds it: an unlock then always wakes someone, which is
	 * only a system call too many when the sleepers have gone meanwhile. */
	while (__atomic_exchange_n(&l->word, 2, __ATOMIC_ACQUIRE) != 0)
		(void)futex(&l->word, FUTEX_WAIT_PRIVATE, 2, NULL, 0);
}

void omx__eplock_wake(struct omx_eplock *l)
{
	(void)futex(&l->word, FUTEX_WAKE_PRIVATE, 1, NULL, 0);
}

void omx__epcond_wait(struct omx_epcond *c, struct omx_eplock *l, const struct timespec *abs_mono)
{
	/* Counted before the sequence is read, a broadcast after the read sees the waiter (both
	 * sequentially consistent): it either wakes us or changed the word we sleep on. */
	__atomic_fetch_add(&c->waiters, 1, __ATOMIC_SEQ_CST);
	uint32_t seq = __atomic_load_n(&c->seq, __ATOMIC_SEQ_CST);
	omx__epunlock(l);
	(void)futex(&c->seq, FUTEX_WAIT_BITSET_PRIVATE, seq, abs_mono, FUTEX_BITSET_MATCH_ANY);
	omx__eplock(l);
	__atomic_fetch_sub(&c->waiters, 1, __ATOMIC_SEQ_CST);
}

void omx__epcond_broadcast(struct omx_epcond *c)
{
	__atomic_fetch_add(&c->seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->waiters, __ATOMIC_SEQ_CST))
		(void)futex(&c->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, 0);
}
