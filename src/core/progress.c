/*
 * progress.c - the endpoint's asynchronous progress thread (design.md 3).
 *
 * The original needed no thread: its kernel module answered pull requests while the application
 * computed. Here a sender that stops calling the library would stall its receivers' pulls, stop
 * acking, and eventually be declared unreachable. So each endpoint has a thread that keeps out of
 * the way while the application calls in (it only checks every OMX_PROGRESS_IDLE_US), and once
 * the application has been away that long it becomes the endpoint's poller: it sleeps in poll()
 * on the ring and wakes for frames and timers, progressing each time. An application thread that
 * wants to block takes the poller role back (omx__wait kicks the eventfd), so blocking latency is
 * not paid twice. OMX_PROGRESS_THREAD=0 turns it off (then, as in the original, nothing moves
 * outside library calls; see docs/tuning.md for the trade-off).
 */
#include <string.h>
#include <time.h>

#include "core/core.h"

static void idle_wait(struct omx_endpoint *ep, uint64_t ns)
{
	struct timespec ts;
	uint64_t t = omx_now_ns() + ns;
	ts.tv_sec = (time_t)(t / 1000000000ull);
	ts.tv_nsec = (long)(t % 1000000000ull);
	pthread_cond_timedwait(&ep->progress_cond, &ep->lock, &ts);
}

static void *progress_main(void *arg)
{
	struct omx_endpoint *ep = arg;
	pthread_mutex_lock(&ep->lock);
	while (!ep->closing) {
		uint64_t now = omx_now_ns();
		uint64_t idle = omx__cfg.progress_idle_ns;
		if (ep->app_waiters || ep->poller_active || ep->in_handler || ep->progression_disabled ||
		    now - ep->last_app_ns < idle) {
			/* The application is here (or asleep as poller itself): stay out of its way. */
			uint64_t left = ep->app_waiters || ep->poller_active ? idle : idle - (now - ep->last_app_ns);
			idle_wait(ep, left ? left : idle);
			continue;
		}
		ep->in_thread_progress = 1;
		omx__progress(ep);
		ep->in_thread_progress = 0;
		if (ep->closing || ep->app_waiters || ep->poller_active)
			continue;
		ep->poller_is_thread = 1;
		omx__sleep_as_poller(ep, omx__next_timer(ep));
		ep->poller_is_thread = 0;
		if (ep->closing)
			break;
		ep->in_thread_progress = 1;
		omx__progress(ep);
		ep->in_thread_progress = 0;
	}
	pthread_mutex_unlock(&ep->lock);
	return NULL;
}

int omx__progress_thread_start(struct omx_endpoint *ep)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ep->progress_cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&ep->progress_tid, NULL, progress_main, ep) != 0) {
		pthread_cond_destroy(&ep->progress_cond);
		return -1;
	}
	ep->progress_started = 1;
	return 0;
}

void omx__progress_thread_stop(struct omx_endpoint *ep)
{
	if (!ep->progress_started)
		return;
	pthread_mutex_lock(&ep->lock);
	pthread_cond_signal(&ep->progress_cond);
	pthread_mutex_unlock(&ep->lock);
	pthread_join(ep->progress_tid, NULL);
	pthread_cond_destroy(&ep->progress_cond);
	ep->progress_started = 0;
}
