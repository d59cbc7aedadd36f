/*
 * debug.c - OMX_DEBUG_SIGNAL (behaviour.md 13, mx-api.md 17): on that signal (OMX_DEBUG_SIGNAL_NUM,
 * default SIGUSR1) every endpoint of the process prints its partners and request queues on
 * standard output; OMX_DEBUG_SIGNAL=2 adds every live request.
 *
 * The handler only bumps a generation counter: the state is read under the endpoint lock by the
 * endpoint's next progress pass (its progress thread looks at least once a second, an application
 * thread at its next call), never from signal context, where the lock and stdio are off limits.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "core/counters.h"

uint32_t omx__debug_gen; /* bumped by the handler, read atomically */

static void on_debug_signal(int sig)
{
	(void)sig;
	__atomic_add_fetch(&omx__debug_gen, 1, __ATOMIC_RELAXED);
}

void omx__debug_signal_install(void)
{
	static int installed;
	if (!omx__cfg.debug_signal || installed)
		return;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_debug_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(omx__cfg.debug_signal_num, &sa, NULL) == 0)
		installed = 1;
	else
		omx__warn("OMX_DEBUG_SIGNAL: cannot handle signal %d\n", omx__cfg.debug_signal_num);
}

static const char *type_name(enum omx_req_type t)
{
	static const char *const names[] = { "send-tiny", "send-small", "send-medium", "send-large",
					     "send-self", "recv",      "recv-large",  "connect" };
	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

/* ms since t (negative: in the future), for timers */
static long long age_ms(uint64_t now, uint64_t t)
{
	return t ? ((long long)now - (long long)t) / 1000000 : -1;
}

static void dump_partner(const struct omx_partner *p, uint64_t now)
{
	printf("  partner peer %u endpoint %u %02x:%02x:%02x:%02x:%02x:%02x%s gen %u\n", p->peer_index,
	       p->endpoint_index, p->mac[0], p->mac[1], p->mac[2], p->mac[3], p->mac[4], p->mac[5],
	       p->is_self ? " (self)" : "", p->gen);
	printf("    sessions: true 0x%08x back 0x%08x; connect seqnum %u, %u connect(s) pending\n", p->true_session,
	       p->back_session, p->connect_seqnum, omx_list_len(&p->connects));
	printf("    send: next seq 0x%04x, oldest unacked 0x%04x, %u not acked, %u throttled, %u waiting for "
	       "NOTIFY, last acknum %u\n",
	       p->next_send_seq, p->next_acked_seq, omx_list_len(&p->non_acked), omx_list_len(&p->throttled),
	       omx_list_len(&p->need_notify), p->last_send_acknum);
	printf("    recv: next match 0x%04x, next complete 0x%04x, last acked 0x%04x, acknum %u, %u partial, "
	       "%u early, %llu unexpected bytes; ack owed: %s%s",
	       p->next_match_seq, p->next_complete_seq, p->last_acked_recv_seq, p->last_recv_acknum,
	       omx_list_len(&p->partial_recvs), p->early_count, (unsigned long long)p->unexp_bytes,
	       p->ack_state == 0 ? "no" : p->ack_state == 1 ? "delayed" : "now",
	       omx_list_linked(&p->ack_elt) ? "" : " (not queued)");
	if (p->ack_state)
		printf(", since %lld ms", age_ms(now, p->ack_since_ns));
	printf("\n");
}

static void dump_request(const union omx_request *r, uint64_t now)
{
	const struct omx_partner *p = r->s.partner;
	printf("    req %p %s state 0x%x len %u seq 0x%04x resends %u last sent %lld ms ago", (const void *)r,
	       type_name(r->s.type), r->s.state, r->s.total_len, r->s.seqnum, r->s.resends,
	       age_ms(now, r->s.last_send_ns));
	if (p)
		printf(" partner %u:%u", p->peer_index, p->endpoint_index);
	if (r->s.type == OMX_REQ_RECV || r->s.type == OMX_REQ_RECV_LARGE)
		printf(" match 0x%016llx/0x%016llx", (unsigned long long)r->s.u.recv.match_info,
		       (unsigned long long)r->s.u.recv.match_mask);
	else
		printf(" match 0x%016llx", (unsigned long long)r->s.status.match_info);
	printf("\n");
}

static void dump_endpoint(struct omx_endpoint *ep)
{
	uint64_t now = omx_now_ns();
	printf("OMX debug: endpoint %u of board %u, session 0x%08x, key 0x%08x%s\n", ep->endpoint_index,
	       ep->board_index, ep->session, ep->key, ep->local ? ", same-host path" : "");
	printf("  queues: %u posted receives, %u unexpected (%llu bytes), %u done, %u waiting for an ack, "
	       "%u connecting, %u partners owing an ack, %u live requests, %u large sends, %u pulls, "
	       "%u self sends held back\n",
	       omx_list_len(&ep->posted_recvs), omx_list_len(&ep->unexp), (unsigned long long)ep->unexp_bytes,
	       omx_list_len(&ep->done), omx_list_len(&ep->resend_list), omx_list_len(&ep->connect_list),
	       omx_list_len(&ep->ack_list), omx_list_len(&ep->all_reqs), ep->large_sends, omx_list_len(&ep->pull_list),
	       omx_list_len(&ep->self_deferred));
	uint64_t nap_end = __atomic_load_n(&ep->progress_nap_end_ns, __ATOMIC_RELAXED);
	printf("  progress: thread %s", ep->progress_started ? "on" : "off");
	if (nap_end)
		printf(" (napping, %lld ms to go)", -age_ms(now, nap_end));
	printf(", poller %s, %u application waiter(s), application seen %lld ms ago\n",
	       ep->poller_active ? (ep->poller_is_thread ? "the thread" : "an application thread") : "none",
	       ep->app_waiters, age_ms(now, __atomic_load_n(&ep->last_app_ns, __ATOMIC_RELAXED)));
	unsigned marked = 0;
	for (struct omx_list *l = ep->resend_list.next; l != &ep->resend_list; l = l->next)
		marked += (omx_container_of(l, union omx_request, s.timer_elt)->s.state & OMX_RS_TX_FAILED) != 0;
	const uint64_t *c = omx__counters_values(ep->board);
	printf("  transmissions: %llu failed (board), %u messages marked to go again",
	       (unsigned long long)(c ? c[OMX_C_X_TX_FAILED] : 0), marked);
	if (ep->tx_retry_ns)
		printf(", in %lld ms (delay %llu ms)", -age_ms(now, ep->tx_retry_ns),
		       (unsigned long long)(ep->tx_retry_delay_ns / 1000000));
	printf("\n");
	if (ep->local) {
		/* A stalled same-host run: were frames refused (ring and socket full) or skipped? */
		struct omx_net_local_stats ls;
		omx_net_local_stats(ep->local, &ls);
		printf("  same-host: %llu frames sent through shared memory, %llu over the socket, %llu "
		       "dead-producer slots skipped in our ring\n",
		       (unsigned long long)ls.ring_frames, (unsigned long long)ls.socket_frames,
		       (unsigned long long)ls.ring_skipped);
	}
	for (uint32_t i = 0; ep->partners && i < omx__g.peer_count; i++)
		for (uint32_t e = 0; ep->partners[i] && e < omx__cfg.endpoint_max; e++)
			if (ep->partners[i][e])
				dump_partner(ep->partners[i][e], now);
	if (omx__cfg.debug_signal > 1) {
		printf("  requests:\n");
		for (struct omx_list *l = ep->all_reqs.next; l != &ep->all_reqs; l = l->next)
			dump_request(omx_container_of(l, union omx_request, s.all_elt), now);
	}
	fflush(stdout);
}

void omx__debug_dump(struct omx_endpoint *ep, uint32_t gen)
{
	ep->debug_gen = gen;
	dump_endpoint(ep);
}
