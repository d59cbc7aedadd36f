/*
 * progress.c - the endpoint's asynchronous progress thread (design.md 3).
 *
 * The original needed no thread: its kernel module answered pull requests while the application
 * computed. Here a sender that stops calling the library would stall its receivers' pulls, stop
 * acking, and eventually be declared unreachable. So each endpoint has a thread that keeps out of
 * the way while the application calls in (it only checks every OMX_PROGRESS_IDLE_US), and once
 * the application has been away that long, and is not inside the library (the endpoint lock is
 * free), it becomes the endpoint's poller: it sleeps in poll() on the ring and wakes for frames
 * and timers, progressing each time. An application thread that wants to block takes the poller
 * role back (omx__wait kicks the eventfd), so blocking latency is not paid twice.
 * Each check wakes the thread on a CPU the application probably uses, and on these VMs each such
 * preemption costs the application ~30 us: so, while the application keeps coming back, the
 * checks space out (doubling up to OMX_PROGRESS_CHECK_MAX_US, 8 ms by default), except while a
 * receiver may pull one of our large sends (over the network, or a same-host receiver without
 * single copy), which must not wait for the takeover longer than OMX_PROGRESS_IDLE_US.
 * OMX_PROGRESS_THREAD=0 turns it off (then, as in the original, nothing moves outside library
 * calls; see docs/tuning.md for the trade-off).
 */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

/* Nap for ns, or until omx__progress_thread_stop, without the endpoint lock: an application thread
 * holds that lock for as long as one progress pass takes, which is long when the pass copies a
 * large same-host message (process_vm_readv of 4 MiB: ~0.4 ms here), and a thread whose timed
 * wait ends on it queues there and makes the application's unlock a wake-up system call. (Not
 * what made those copies slow: that was the preemption itself, see struct progress_sched.) */
static int nap(struct omx_endpoint *ep, uint64_t ns)
{
	struct timespec ts;
	uint64_t t = omx_now_ns() + ns;
	ts.tv_sec = (time_t)(t / 1000000000ull);
	ts.tv_nsec = (long)(t % 1000000000ull);
	__atomic_store_n(&ep->progress_nap_end_ns, t, __ATOMIC_RELAXED);
	pthread_mutex_lock(&ep->progress_nap);
	if (!ep->progress_stop)
		pthread_cond_timedwait(&ep->progress_cond, &ep->progress_nap, &ts);
	int stop = ep->progress_stop;
	pthread_mutex_unlock(&ep->progress_nap);
	__atomic_store_n(&ep->progress_nap_end_ns, 0, __ATOMIC_RELAXED);
	return stop;
}

/* While the application is around the thread only checks on it, every OMX_PROGRESS_IDLE_US, and a
 * normal thread waking for that check preempts the application on its CPU: on these VMs each
 * preemption cost the application ~30 us of work (a 4 MiB same-host copy took 10% longer,
 * docs/performance.md). Wake-ups of a SCHED_BATCH thread do not preempt (the check then runs at
 * the next tick, or at once on an idle CPU). As the poller, while the application is away, the
 * thread is a normal one again, so that frames wake it at once. Only with OMX_PROGRESS_BATCH=1:
 * when processes outnumber CPUs, the thread of a process waiting for a CPU must preempt whoever
 * runs to answer its peers in time (Open MPI, 4 ranks on 2 CPUs and a busy loop: slower, and a
 * job stalled past its 45 s limit with batch naps). Unprivileged threads may switch between the
 * two (same nice value); a thread started under another policy (real-time, say) keeps it. */
struct progress_sched {
	int can;   /* SCHED_OTHER at start and OMX_PROGRESS_BATCH */
	int batch; /* currently SCHED_BATCH */
};

static void sched_batch(struct progress_sched *ps, int batch)
{
	if (!ps->can || ps->batch == batch)
		return;
	struct sched_param sp = { 0 };
	if (pthread_setschedparam(pthread_self(), batch ? SCHED_BATCH : SCHED_OTHER, &sp) == 0)
		ps->batch = batch;
	else
		ps->can = 0;
}

/* One look at the endpoint once the application has been away for the idle time: progress, then
 * become the poller (sleep in poll() until a frame or a timer). Endpoint lock held. 0: the
 * application is there after all (or the endpoint closes), nap instead. */
static int take_over(struct omx_endpoint *ep, struct progress_sched *ps)
{
	uint64_t now = omx_now_ns();
	if (ep->closing || ep->app_waiters || ep->poller_active || ep->in_handler || ep->progression_disabled ||
	    now - __atomic_load_n(&ep->last_app_ns, __ATOMIC_RELAXED) < omx__cfg.progress_idle_ns)
		return 0;
	ep->in_thread_progress = 1;
	omx__progress(ep);
	ep->in_thread_progress = 0;
	if (ep->closing || ep->app_waiters || ep->poller_active)
		return 1;
	sched_batch(ps, 0);
	ep->poller_is_thread = 1;
	omx__sleep_as_poller(ep, omx__next_timer(ep));
	ep->poller_is_thread = 0;
	if (!ep->closing) {
		ep->in_thread_progress = 1;
		omx__progress(ep);
		ep->in_thread_progress = 0;
	}
	return 1;
}

static void *progress_main(void *arg)
{
	struct omx_endpoint *ep = arg;
	uint64_t idle = omx__cfg.progress_idle_ns;
	struct progress_sched ps = { 0, 0 };
	int policy;
	struct sched_param sp;
	if (omx__cfg.progress_batch && pthread_getschedparam(pthread_self(), &policy, &sp) == 0 && policy == SCHED_OTHER)
		ps.can = 1;
	sched_batch(&ps, 1);
	uint64_t spacing = idle; /* the checks' spacing while the application keeps coming back */
	for (;;) {
		omx__responder_refresh(ep->board_index); /* no endpoint lock held */
		/* The application progressed recently: it is here, stay out of its way (no lock). */
		uint64_t since = omx_now_ns() - __atomic_load_n(&ep->last_app_ns, __ATOMIC_RELAXED);
		if (since < idle) {
			sched_batch(&ps, 1);
			uint64_t ns = idle - since;
			if (__atomic_load_n(&ep->pullable_sends, __ATOMIC_RELAXED)) {
				spacing = idle;
			} else {
				spacing = spacing * 2 < omx__cfg.progress_check_max_ns ? spacing * 2 : omx__cfg.progress_check_max_ns;
				if (ns < spacing)
					ns = spacing;
			}
			if (ns > idle) {
				/* Against omx__progress_thread_hurry: it counts then looks at the flag. */
				__atomic_store_n(&ep->progress_long_nap, 1, __ATOMIC_SEQ_CST);
				if (__atomic_load_n(&ep->pullable_sends, __ATOMIC_SEQ_CST)) {
					spacing = idle;
					ns = idle - since;
				}
			}
			int stop = nap(ep, ns);
			__atomic_store_n(&ep->progress_long_nap, 0, __ATOMIC_RELAXED);
			if (stop)
				break;
			continue;
		}
		spacing = idle;
		/* Lock taken by someone else: an application thread is inside the library, progressing
		 * (a long copy, say), or about to. Look again later rather than queue behind it. */
		int took = 0;
		if (!omx__eplock_try(&ep->lock)) {
			took = take_over(ep, &ps);
			omx__epunlock(&ep->lock);
		}
		if (!took) {
			sched_batch(&ps, 1);
			if (nap(ep, idle))
				break;
		}
		pthread_mutex_lock(&ep->progress_nap);
		int stop = ep->progress_stop;
		pthread_mutex_unlock(&ep->progress_nap);
		if (stop)
			break;
	}
	return NULL;
}

int omx__progress_thread_start(struct omx_endpoint *ep)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ep->progress_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&ep->progress_nap, NULL);
	ep->progress_stop = 0;
	/* Set before the thread exists: its passes read it (omx__responder_progress), and a store
	 * after pthread_create would race with them (ThreadSanitizer saw it under the provider's
	 * tests). */
	ep->progress_started = 1;
	if (pthread_create(&ep->progress_tid, NULL, progress_main, ep) != 0) {
		ep->progress_started = 0;
		pthread_cond_destroy(&ep->progress_cond);
		pthread_mutex_destroy(&ep->progress_nap);
		return -1;
	}
	return 0;
}

/* A large send a receiver may pull was posted: a thread in a long nap would leave it unserved, if
 * the application now computes, for up to OMX_PROGRESS_CHECK_MAX_US. Endpoint lock held (never
 * taken under progress_nap). */
void omx__progress_thread_hurry(struct omx_endpoint *ep)
{
	if (!ep->progress_started || !__atomic_load_n(&ep->progress_long_nap, __ATOMIC_SEQ_CST))
		return;
	pthread_mutex_lock(&ep->progress_nap);
	pthread_cond_signal(&ep->progress_cond);
	pthread_mutex_unlock(&ep->progress_nap);
}

void omx__progress_thread_stop(struct omx_endpoint *ep)
{
	if (!ep->progress_started)
		return;
	pthread_mutex_lock(&ep->progress_nap);
	ep->progress_stop = 1;
	pthread_cond_signal(&ep->progress_cond);
	pthread_mutex_unlock(&ep->progress_nap);
	pthread_join(ep->progress_tid, NULL);
	pthread_cond_destroy(&ep->progress_cond);
	pthread_mutex_destroy(&ep->progress_nap);
	ep->progress_started = 0;
}
