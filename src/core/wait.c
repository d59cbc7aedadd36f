/*
 * wait.c - the progression pass over an endpoint's rings and timers, and blocking waits.
 *
 * Waiting: among the threads blocked on one endpoint, one (the "poller") sleeps in poll() on the
 * transport's descriptors and the endpoint's eventfd, the others sleep on a condition variable.
 * Whenever the poller wakes it progresses and broadcasts; any thread whose progress completes
 * requests broadcasts too and kicks the eventfd so a sleeping poller re-checks. No call spins
 * longer than its budget (OMX_SPIN_US) unless OMX_WAITSPIN=1.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "core/counters.h"
#include "hot_path.h"

/* ---- progression ---- */

void omx__notify_waiters(struct omx_endpoint *ep)
{
	/* Completions are waited for on ep->cond only inside omx__wait (counted in app_waiters,
	 * under the lock we hold); the other waiter, omx_disable_progression, waits for the
	 * unexpected handler, whose end broadcasts itself. */
	if (ep->app_waiters)
		omx__epcond_broadcast(&ep->cond);
	if (ep->poller_active) {
		uint64_t one = 1;
		(void)!write(ep->event_fd, &one, sizeof(one));
	}
}

#define OMX_RESPONDER_POLL_NS 20000ull

static void progress_pass(struct omx_endpoint *ep, uint64_t now)
{
	uint64_t c0 = ep->completions;
	/* In-order eager messages at the head of the ring first, by the fast receive (what the
	 * calls between two passes take): a ping-pong's answer found by a pass, one call in
	 * OMX_IDLE_PASS_EVERY, then completes its receive before the acks are taken, and is not
	 * decoded and matched the general way (~200 instructions more). */
	int local_frames = 0;
	if (ep->local_seen)
		while (local_frames < 64 && omx__recv_local_fast(ep) > 0)
			local_frames++;
	/* Frames that completed a request end the pass there (pass_owed): the application has a
	 * completion to act on, and in a ping-pong the rest (the deferred acks, the polls, the
	 * timers: ~130 instructions on average, when the answer was found by a pass) stood between
	 * the message and its answer. Never two such ends in a row: the next pass runs whole, and
	 * the next call that finds the ring empty makes it at once (omx__progress_fast). */
	if (ep->completions != c0 && !ep->pass_owed) {
		ep->pass_owed = 1;
		omx__notify_waiters(ep);
		return;
	}
	ep->pass_owed = 0;
	if (!omx_list_empty(&ep->acks_deferred))
		omx__acks_deferred_take(ep);
	omx__debug_check(ep);
	if (!omx_list_empty(&ep->self_deferred))
		omx__self_deferred_drain(ep);
	if (!ep->in_thread_progress)
		__atomic_store_n(&ep->last_app_ns, now, __ATOMIC_RELAXED);
	while (ep->local_nack_count) {
		uint8_t f[OMX_FRAME_MIN];
		memcpy(f, ep->local_nacks[--ep->local_nack_count], sizeof(f));
		omx__recv_frame(ep, f, sizeof(f));
	}
	/* The same-host ring first, and a pass that found frames there leaves the network for the
	 * next one (never two passes in a row): a same-host ping-pong's answer then does not wait
	 * for a look at the packet ring (~45 of a hop's ~1445 critical instructions,
	 * bench/self_pingpong), and the network is still looked at every other pass at worst. */
	for (int i = 0; ep->local && i < 16; i++) {
		int n = ep->local->ops->recv_burst(ep->local, omx__recv_frame_local, ep, 64);
		local_frames += n;
		if (n < 64)
			break;
	}
	if (local_frames && !ep->net_skipped) {
		ep->net_skipped = 1;
	} else {
		ep->net_skipped = 0;
		for (int i = 0; i < 16; i++)
			if (ep->net->ops->recv_burst(ep->net, omx__recv_frame, ep, 64) < 64)
				break;
	}
	if (ep->coop_exports)
		omx__shared_coop_serve(ep);
	/* Every timer is milliseconds long and compared with now_ns, which moves at most every
	 * OMX_CLOCK_POLLS passes: a pass with the same now_ns as the last look finds nothing newly
	 * due (a busy-polling pass is mostly this section otherwise). */
	if (now == ep->timers_ns && !ep->acks_now)
		goto timers_done;
	ep->timers_ns = now;
	ep->acks_now = 0;
	omx__resend_due(ep, now);
	if (ep->tx_retry_ns)
		omx__tx_retry_due(ep, now);
	omx__connect_resend_due(ep, now);
	omx__pull_timers(ep, now);
	if (ep->lane_split)
		omx__lane_timer(ep, now);
	omx__send_acks(ep, now);
	if (now >= ep->next_host_query_check) {
		ep->next_host_query_check = now + 100000000ull;
		omx__host_queries_due(ep, now);
	}
	if (now >= ep->next_responder_ns) {
		/* Frames to closed endpoints of the board: not latency-critical, and a lock shared by
		 * all endpoints of the process, so not on every poll. */
		ep->next_responder_ns = now + OMX_RESPONDER_POLL_NS;
		omx__responder_progress(ep, now);
	}
	if (ep->local && now >= ep->next_shared_check)
		omx__shared_check_partners(ep, now);
	if (now >= ep->next_notify_watch)
		omx__notify_watch(ep, now);
timers_done:
	if (ep->completions != c0)
		omx__notify_waiters(ep);
	else if (!omx_list_empty(&ep->acks_deferred))
		omx__acks_deferred_take(ep);
}

OMX_HOT_PATH void omx__progress_fast(struct omx_endpoint *ep)
{
	if (ep->progression_disabled || ep->in_handler)
		return;
	/* An endpoint that never heard from a same-host partner (all its partners remote) skips the
	 * look: it made an idle omx_test 23.5 ns instead of 21.8 (22.0 with this test; stop 39). */
	if (ep->local_seen && ep->fast_streak < OMX_FAST_STREAK_MAX) {
		uint64_t c0 = ep->completions;
		int got = omx__recv_local_fast(ep);
		/* Nothing in the ring: most such calls stop here (see OMX_IDLE_PASS_EVERY_DEFAULT). */
		if (got < 0 && !ep->pass_owed && ++ep->idle_skips < omx__cfg.idle_pass_every) {
			ep->idle_skipped++;
			return;
		}
		ep->idle_skips = 0;
		if (got > 0) {
			ep->fast_streak++;
			ep->fast_recvs++;
			if (ep->completions != c0)
				omx__notify_waiters(ep);
			return;
		}
	}
	ep->fast_streak = 0;
	progress_pass(ep, omx__ep_clock(ep));
}

void omx__progress(struct omx_endpoint *ep)
{
	if (ep->progression_disabled || ep->in_handler)
		return;
	progress_pass(ep, omx__ep_clock(ep));
}

void omx__progress_clocked(struct omx_endpoint *ep)
{
	if (ep->progression_disabled || ep->in_handler)
		return;
	progress_pass(ep, ep->now_ns);
}

uint64_t omx__next_timer(struct omx_endpoint *ep)
{
	uint64_t t = UINT64_MAX;
	if (!omx_list_empty(&ep->acks_deferred))
		return 0;
	union omx_request *r;
	r = (union omx_request *)omx_list_first(&ep->resend_list, omx_req_t, timer_elt);
	if (r && r->s.last_send_ns + omx__cfg.resend_delay_ns < t)
		t = r->s.last_send_ns + omx__cfg.resend_delay_ns;
	r = (union omx_request *)omx_list_first(&ep->connect_list, omx_req_t, timer_elt);
	if (r && r->s.last_send_ns + omx__cfg.resend_delay_ns < t)
		t = r->s.last_send_ns + omx__cfg.resend_delay_ns;
	struct omx_partner *p = omx_list_first(&ep->ack_list, struct omx_partner, ack_elt);
	if (p)
		t = p->ack_state == 2 ? 0 : (p->ack_since_ns + omx__cfg.ack_delay_ns < t ? p->ack_since_ns + omx__cfg.ack_delay_ns : t);
	/* A partner that may owe us NOTIFYs or fragments is checked on (probed, or its ring looked
	 * at) on these timers: a sleeper that ignored them slept up to its one-second cap between
	 * checks, and a dead receiver's sender learnt of it up to a second late. */
	if (ep->owed_watch) {
		if (ep->next_notify_watch < t)
			t = ep->next_notify_watch;
		if (ep->local && ep->next_shared_check < t)
			t = ep->next_shared_check;
	}
	uint64_t pt = omx__pull_next_deadline(ep);
	if (pt && pt < t)
		t = pt;
	if (ep->net->ops->next_deadline) {
		uint64_t nt = ep->net->ops->next_deadline(ep->net);
		if (nt && nt < t)
			t = nt;
	}
	return t;
}

void omx__sleep_as_poller(struct omx_endpoint *ep, uint64_t until)
{
	uint64_t now = omx_now_ns();
	int ms = until == UINT64_MAX ? -1 : (until <= now ? 0 : (int)((until - now + 999999) / 1000000));
	if (ms > 1000 || ms < 0)
		ms = 1000; /* bounded: signals and changes of configuration are noticed */
	/* A responder's socket closed meanwhile (the role given up by another thread) reads
	 * POLLNVAL: a spurious wake-up, nothing more. */
	struct pollfd fds[5] = { { ep->net->fd, POLLIN, 0 }, { ep->event_fd, POLLIN, 0 },
				 { ep->local ? ep->local->fd : -1, POLLIN, 0 }, { ep->net->fd2, POLLIN, 0 },
				 { omx__responder_fd(ep->board_index), POLLIN, 0 } };
	if (ep->local && ep->local->ops->prepare_sleep && ep->local->ops->prepare_sleep(ep->local, 1, 0))
		ms = 0; /* frames already in our shared-memory ring */
	ep->poller_active = 1;
	omx__epunlock(&ep->lock);
	/* poll(), not an epoll set kept per endpoint: an epoll entry stays on each socket's wait
	 * queue, so every frame received while we are awake ran its wake-up callback (blocking
	 * 4 MiB streams lost ~8%, docs/performance.md stop 27). */
	int r = poll(fds, 5, ms);
	int intr = r < 0 && errno == EINTR;
	if (r > 0 && (fds[1].revents & POLLIN)) {
		uint64_t v;
		(void)!read(ep->event_fd, &v, sizeof(v));
	}
	/* A pending socket error (ENETDOWN after the link went down) keeps poll() returning until
	 * it is read: read it, or every later sleep would be a busy loop. */
	for (int i = 0; i < 5; i++)
		if (r > 0 && i != 1 && (fds[i].revents & POLLERR)) {
			int err = 0;
			socklen_t len = sizeof(err);
			(void)getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
			omx__verbose("endpoint %u: socket error %s\n", ep->endpoint_index, strerror(err));
		}
	omx__eplock(&ep->lock);
	ep->poller_active = 0;
	if (ep->local && ep->local->ops->prepare_sleep)
		ep->local->ops->prepare_sleep(ep->local, 0, r < 0 || (fds[2].revents & (POLLIN | POLLERR)));
	if (intr && omx__cfg.waitintr && !ep->poller_is_thread)
		ep->intr_gen++; /* OMX_WAITINTR: the signal ends the waits (as if they timed out) */
	omx__epcond_broadcast(&ep->cond);
}

static void sleep_as_follower(struct omx_endpoint *ep, uint64_t until)
{
	struct timespec ts;
	uint64_t t = until == UINT64_MAX ? omx_now_ns() + 1000000000ull : until;
	ts.tv_sec = (time_t)(t / 1000000000ull);
	ts.tv_nsec = (long)(t % 1000000000ull);
	omx__epcond_wait(&ep->cond, &ep->lock, &ts);
}

/*
 * A large message moves in steps (RNDV, PULL, blocks of replies, NOTIFY), each a frame the other
 * side answers within microseconds while it is awake. A waiter that slept between steps paid a
 * wake-up per step (30-40 us on these VMs): with OMX_SPIN_US=0 a 64 KiB ping-pong at MTU 9000 took
 * 154 us against 25 us when spinning, and TCP's 91 us. So while one of our large transfers is in
 * flight and its last step is recent, keep polling (OMX_XFER_SPIN_US, 0: off). The same while a
 * medium is being reassembled: stop 24 found nothing to gain for mediums (their fragments come
 * back to back), but at 128 KiB (16 fragments at MTU 9000, eager since stop 32) the first
 * fragment's wake-up came while the rest were still on their way, and the next ones paid a
 * second one: blocking ping-pongs of 32-128 KiB gained 24-43% with the rule (streams even).
 */
static int xfer_in_flight(const struct omx_endpoint *ep)
{
	return ep->large_sends || !omx_list_empty(&ep->pull_list) || ep->mediums_partial;
}

static int xfer_moving(struct omx_endpoint *ep, uint64_t now)
{
	return xfer_in_flight(ep) && now - ep->xfer_active_ns < omx__cfg.xfer_spin_ns;
}

int omx__wait(struct omx_endpoint *ep, omx_wait_cond_fn cond, void *arg, uint32_t timeout_ms)
{
	uint64_t start = omx_now_ns();
	uint64_t deadline = timeout_ms == OMX_TIMEOUT_INFINITE ? UINT64_MAX : start + omx__ms_to_ns(timeout_ms);
	uint64_t spin_end = start + (uint64_t)omx__cfg.spin_us * 1000u;
	uint64_t wgen = ep->wakeup_gen, igen = ep->intr_gen;
	int slept = 0;

	for (;;) {
		if (cond(ep, arg)) {
			omx__count(ep->board, slept ? OMX_C_X_WAIT_SLEEP : OMX_C_X_WAIT_SPIN);
			return 1;
		}
		if (ep->wakeup_gen != wgen || ep->intr_gen != igen || ep->closing)
			return 0;
		uint64_t now = omx_now_ns();
		if (now >= deadline)
			return 0;
		if (omx__cfg.waitspin || now < spin_end || ep->in_handler || xfer_moving(ep, now)) {
			/* Let other threads in between polls. */
			omx__epunlock(&ep->lock);
			sched_yield();
			omx__eplock(&ep->lock);
		} else {
			/* With OMX_XFER_SPIN_US longer than any gap between a transfer's steps, never. */
			if (xfer_in_flight(ep))
				omx__count(ep->board, OMX_C_X_WAIT_SLEEP_XFER);
			uint64_t until = omx__next_timer(ep);
			if (deadline < until)
				until = deadline;
			if (ep->poller_active && ep->poller_is_thread) {
				/* The progress thread sleeps in poll(): ask it to hand the role over, so
				 * the application thread wakes directly on its own frames. */
				uint64_t one = 1;
				(void)!write(ep->event_fd, &one, sizeof(one));
			}
			ep->app_waiters++;
			slept = 1;
			if (ep->poller_active)
				sleep_as_follower(ep, until);
			else
				omx__sleep_as_poller(ep, until);
			ep->app_waiters--;
		}
		omx__progress(ep);
	}
}
