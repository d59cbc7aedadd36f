/*
 * endpoint.c - opening and closing endpoints (the progression pass and the waits: wait.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/core.h"
#include "core/counters.h"
#include "core/testhooks.h"

/* ---- slot ownership across processes ---- */

/* One flock'd file per (board MAC, endpoint index): the slot is ours while we hold the lock, and
 * the kernel releases it if the process dies. The file also tells tools who owns the slot. */
static int slot_lock(struct omx_endpoint *ep)
{
	char path[96];
	const uint8_t *m = ep->board->iface.mac;
	snprintf(path, sizeof(path), "%s/omx-%02x%02x%02x%02x%02x%02x-%u.lock", omx__lock_dir(), m[0], m[1], m[2], m[3],
		 m[4], m[5], ep->endpoint_index);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return errno == EACCES ? -EBUSY : -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		close(fd);
		return e == EWOULDBLOCK ? -EBUSY : -e;
	}
	char comm[32] = "?", line[96];
	FILE *f = fopen("/proc/self/comm", "r");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	int n = snprintf(line, sizeof(line), "%d %s %08x\n", (int)getpid(), comm, ep->session);
	if (ftruncate(fd, 0) == 0 && n > 0)
		(void)!write(fd, line, (size_t)n);
	ep->lock_fd = fd;
	return 0;
}

/* ---- receive ring sizes ---- */

/*
 * Receive ring slots for an interface MTU (+ slot headers): a window of mediums and 4 pull blocks
 * must fit, or bursts overflow it and cost a retransmission timeout. But every frame lands in the
 * next slot, and a slot count past the TLB's reach makes each small frame a TLB (and cache) miss
 * for the kernel and for us: by default (ring_kb 0) OMX_RX_RING_AUTO_SLOTS slots, at most
 * OMX_RX_RING_AUTO_MAX bytes (MTU 1500: 2 MiB, 0-64 B half round trip 1.3-1.6 -> 1.1 us).
 */
unsigned omx__rx_ring_frames(uint32_t ring_kb, uint32_t mtu)
{
	uint64_t slot = (uint64_t)mtu + 128u;
	uint64_t bytes = ring_kb ? (uint64_t)ring_kb * 1024u : OMX_RX_RING_AUTO_SLOTS * slot;
	if (!ring_kb && bytes > OMX_RX_RING_AUTO_MAX)
		bytes = OMX_RX_RING_AUTO_MAX;
	return (unsigned)(bytes / slot);
}

/*
 * Shared-memory ring bytes (shm/ring.c makes that a power-of-two count of MTU-sized slots). Each
 * frame takes the next slot, so the ring cycles through slot count x frame size bytes: with 512
 * slots (the old 8 MiB default at MTU 9000) 4 KiB messages went through 2 MiB, out of the
 * caches, and took 1.8 us where 64 or 128 slots take 1.26 (docs/performance.md). Same-host
 * frames carry 32 KiB fragments, so larger messages cycle through slots x 32 KiB: 128 slots (4.2
 * MiB, until stop 46) put a 32 KiB eager ping-pong at 5.7-6.6 us a hop on the Zen 1 VM, 64 slots
 * (2.1 MiB) at 3.4-3.8, and 64 KiB at 9.7-11.6 against 5.4-6.4. By default (ring_kb 0)
 * OMX_SHARED_RING_AUTO_SLOTS slots (the ring's floor; it may pass OMX_SHARED_RING_AUTO_MAX at huge
 * MTUs); OMX_SHARED_RING_KB sets bytes.
 */
uint64_t omx__shared_ring_bytes(uint32_t ring_kb, uint32_t mtu)
{
	if (ring_kb)
		return (uint64_t)ring_kb * 1024u;
	uint64_t slot = (uint64_t)mtu + 256u; /* >= the ring's slot stride (frame + header, rounded) */
	uint64_t slots = OMX_SHARED_RING_AUTO_SLOTS;
	while (slots > 64 && slots * slot > OMX_SHARED_RING_AUTO_MAX)
		slots /= 2;
	return slots * slot;
}

/* ---- open / close ---- */

static omx_return_t parse_params(struct omx_endpoint *ep, omx_endpoint_param_t *params, uint32_t count)
{
	unsigned bits = omx__cfg.ctxid_bits, shift = omx__cfg.ctxid_shift;
	if (count > 0 && !params)
		return OMX_ENDPOINT_PARAMS_BAD_LIST;
	for (uint32_t i = 0; i < count; i++) {
		switch (params[i].key) {
		case OMX_ENDPOINT_PARAM_ERROR_HANDLER:
			ep->handler = params[i].val.error_handler;
			break;
		case OMX_ENDPOINT_PARAM_UNEXP_QUEUE_MAX:
			omx__verbose("unexpected queue maximum ignored (limits are documented in docs/configuration.md)\n");
			break;
		case OMX_ENDPOINT_PARAM_CONTEXT_ID:
			bits = params[i].val.context_id.bits;
			shift = params[i].val.context_id.shift;
			break;
		default:
			return OMX_ENDPOINT_PARAM_BAD_KEY;
		}
	}
	if (bits > 16 || bits + shift > 64)
		return OMX_ENDPOINT_PARAM_BAD_VALUE;
	ep->ctxid_bits = (uint8_t)bits;
	ep->ctxid_shift = (uint8_t)shift;
	return OMX_SUCCESS;
}

/* Closed endpoint structs are kept (poisoned) and reused by later opens, so a call on a closed
 * handle reads OMX_EP_DEAD and fails cleanly instead of touching freed memory. */
static struct omx_endpoint *graveyard[OMX_BOARD_MAX * 8];
static unsigned graveyard_count;
static pthread_mutex_t graveyard_lock = PTHREAD_MUTEX_INITIALIZER;

static void endpoint_free(struct omx_endpoint *ep)
{
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &ep->all_reqs)
		omx__req_free((union omx_request *)omx_container_of(pos, omx_req_t, all_elt));
	omx__req_cache_drain(ep);
	omx__shared_endpoint_free(ep);
	for (uint32_t i = 0; i < omx__g.peer_count; i++) {
		if (!ep->partners || !ep->partners[i])
			continue;
		for (uint32_t e = 0; e < omx__cfg.endpoint_max; e++) {
			struct omx_partner *p = ep->partners[i][e];
			if (!p)
				continue;
			omx_list_for_each_safe(pos, tmp, &p->early) {
				omx_list_del(pos);
				free(pos);
			}
			p->magic = 0;
			free(p);
		}
		free(ep->partners[i]);
	}
	for (int i = 0; i < OMX_PULL_SLOTS; i++)
		free(ep->pulls[i]);
	free(ep->partners);
	if (ep->net)
		ep->net->ops->close(ep->net);
	ep->own_ring = NULL;
	if (ep->local)
		ep->local->ops->close(ep->local);
	if (ep->event_fd >= 0)
		close(ep->event_fd);
	if (ep->lock_fd >= 0)
		close(ep->lock_fd);
	free(ep->txbuf);
	free(ep->batchbuf);
	free(ep->pullbuf);
	pthread_mutex_lock(&graveyard_lock);
	if (graveyard_count < sizeof(graveyard) / sizeof(graveyard[0])) {
		memset(ep, 0, sizeof(*ep));
		__atomic_store_n(&ep->magic, OMX_EP_DEAD, __ATOMIC_RELEASE);
		graveyard[graveyard_count++] = ep;
		ep = NULL;
	}
	pthread_mutex_unlock(&graveyard_lock);
	free(ep);
}

static struct omx_endpoint *endpoint_alloc(void)
{
	pthread_mutex_lock(&graveyard_lock);
	struct omx_endpoint *ep = graveyard_count ? graveyard[--graveyard_count] : NULL;
	pthread_mutex_unlock(&graveyard_lock);
	if (!ep)
		ep = malloc(sizeof(*ep));
	if (!ep)
		return NULL;
	memset(ep, 0, sizeof(*ep)); /* the lock and its condition too: free, nobody waiting */
	omx_list_init(&ep->list_elt);
	omx_list_init(&ep->posted_recvs);
	omx_list_init(&ep->unexp);
	omx_list_init(&ep->reserved);
	omx_list_init(&ep->unexp_refused);
	omx_list_init(&ep->early_partners);
	omx_list_init(&ep->done);
	omx_list_init(&ep->resend_list);
	omx_list_init(&ep->connect_list);
	omx_list_init(&ep->ack_list);
	omx_list_init(&ep->acks_deferred);
	omx_list_init(&ep->all_reqs);
	omx_list_init(&ep->self_deferred);
	omx_list_init(&ep->pull_list);
	ep->lock_fd = ep->event_fd = -1;
	ep->resends_max = omx__cfg.resends_max;
	ep->tx_retry_delay_ns = OMX_TX_RETRY_MIN_NS;
	ep->pull_timeout_ns = (uint64_t)omx__cfg.resends_max * omx__cfg.resend_delay_ns;
	for (int i = 0; i < OMX_PULL_SLOTS; i++)
		ep->pull_gen[i] = OMX_PULL_GEN_START;
	for (int i = 0; i < OMX_REGION_MAX; i++)
		ep->regions[i].seqnum = OMX_REGION_SEQNUM_START;
	return ep;
}

static omx_return_t open_transport(struct omx_endpoint *ep)
{
	int err = 0;
	ep->split_medium_min = UINT32_MAX;
	struct omx_memnet *hub = omx__test_memnet();
	if (hub) {
		ep->net = omx_net_mem_open(hub, ep->board->iface.mac, ep->board->iface.mtu, (uint8_t)ep->endpoint_index);
		err = ep->net ? 0 : -ENOMEM;
	} else {
		struct omx_net_opts o = { 0 };
		o.qdisc_bypass = 1;
		omx__broker_opts(&o);
		o.rx_ring_frames = omx__rx_ring_frames(omx__cfg.rx_ring_kb, ep->board->iface.mtu);
		o.rx_split = omx__cfg.rx_split;
		o.rx_pull_split = omx__cfg.rx_pull_split;
		/* auto: where pull replies are large enough for a split read to pay (docs/tuning.md). */
		if (omx__cfg.rx_split_auto && ep->board->iface.mtu >= OMX_RX_SPLIT_AUTO_MTU) {
			o.rx_pull_split = 256;
			o.rx_pull_adaptive = 1;
		}
		/* The filter reads the extended wire mode's 32-bit message length. */
		o.rx_medium_split = ep->wp.mode == OMX_WIRE_EXTENDED ? omx__cfg.rx_medium_split : 0;
		if (omx__cfg.rx_medium_split_auto)
			o.rx_medium_split = o.rx_pull_adaptive && ep->wp.mode == OMX_WIRE_EXTENDED &&
						    ep->wp.medium_frag_max >= OMX_WIRE_FRAG_WHOLE_MIN ?
						    OMX_RX_SPLIT_MEDIUM_AUTO : 0;
		ep->net = omx_net_packet_open(ep->board->iface.name, (uint8_t)ep->endpoint_index, &o, &err);
		ep->pkt = ep->net;
		ep->pull_lane_auto = ep->net && o.rx_pull_adaptive && omx_net_packet_pull_lane(ep->net, 0) == 0;
		ep->split_medium_min = ep->pull_lane_auto && o.rx_medium_split ? o.rx_medium_split : UINT32_MAX;
	}
	if (!ep->net) {
		if (*omx_net_broker_last_refusal())
			omx__warn("omxd refused %s endpoint %u: %s\n", ep->board->iface.name, ep->endpoint_index,
				  omx_net_broker_last_refusal());
		if (err == -EPERM || err == -EACCES)
			return OMX_ACCESS_DENIED;
		if (err == -ENODEV)
			return OMX_BOARD_NOT_FOUND;
		return OMX_NO_SYSTEM_RESOURCES;
	}
	if (!hub) {
		int lerr = 0;
		/* Ring slots (and socket frames) for the frames of this host (wire_local: 32 KiB medium
		 * fragments whatever the interface MTU in the extended mode). */
		uint32_t lmtu = ep->board->iface.mtu > ep->wp_local.mtu ? ep->board->iface.mtu : ep->wp_local.mtu;
		struct omx_net_local_opts lo = { !omx__cfg.shared_disabled,
						  (uint32_t)omx__shared_ring_bytes(omx__cfg.shared_ring_kb, lmtu),
						  ep->session, omx__cfg.shared_ring_lock };
		ep->local = omx_net_local_open(ep->board->iface.mac, lmtu, (uint8_t)ep->endpoint_index, &lo, &lerr);
		ep->own_ring = ep->local ? omx_net_local_own_ring(ep->local) : NULL;
		if (ep->own_ring)
			omx__shared_policy_resolve(); /* before the first same-host send */
		if (!ep->local) {
			omx__warn("no same-host path for endpoint %u: %s\n", ep->endpoint_index, strerror(-lerr));
		} else if (lo.shared && !omx_net_local_own_ring(ep->local)) {
			struct omx_net_local_stats ls;
			omx_net_local_stats(ep->local, &ls);
			omx__warn("no shared-memory ring for endpoint %u (%s): same-host frames over a Unix socket\n",
				  ep->endpoint_index, strerror(-ls.ring_error));
		} else if (lo.lock) {
			struct omx_net_local_stats ls;
			omx_net_local_stats(ep->local, &ls);
			if (ls.ring_lock_error)
				omx__verbose("endpoint %u: shared-memory ring not locked in memory (%s; RLIMIT_MEMLOCK?): "
					     "its pages may be reclaimed and fault back in\n",
					     ep->endpoint_index, strerror(-ls.ring_lock_error));
		}
	}
	ep->local_window = omx__shared_send_window(ep);
	if (omx__cfg.fault_enabled) {
		struct omx_fault_spec fs = omx__cfg.fault;
		fs.seed ^= ((uint64_t)ep->board_index << 40) ^ ((uint64_t)ep->endpoint_index << 32) ^ (uint64_t)getpid();
		struct omx_net *w = omx_net_fault_wrap(ep->net, &fs);
		if (!w)
			return OMX_NO_SYSTEM_RESOURCES;
		ep->net = w;
	}
	/* On the outermost transport only: a wrapper delivers split frames through its own callback. */
	ep->net->split_fn = omx__recv_split;
	return OMX_SUCCESS;
}

/* Try one (board, endpoint) slot. */
static omx_return_t try_open(struct omx_endpoint *ep, uint32_t board, uint32_t index)
{
	if (index >= omx__cfg.endpoint_max || board >= OMX_BOARD_MAX)
		return OMX_BAD_ENDPOINT;
	ep->board = omx__board(board);
	if (!ep->board)
		return OMX_BOARD_NOT_FOUND;
	ep->board_index = board;
	ep->endpoint_index = index;
	uint32_t mtu = ep->board->frame_mtu;
	if (omx__cfg.mtu_override && omx__cfg.mtu_override < mtu)
		mtu = omx__cfg.mtu_override;
	if (omx_wire_params_init(&ep->wp, omx__cfg.wire_mode, mtu) < 0) {
		omx__warn("interface %s: MTU %u too small for the %s wire mode (needs %u)\n", ep->board->iface.name, mtu,
			  omx__cfg.wire_mode == OMX_WIRE_COMPAT ? "MX-compatible" : "extended",
			  omx__cfg.wire_mode == OMX_WIRE_COMPAT ? OMX_WIRE_COMPAT_MTU : OMX_WIRE_MTU_MIN);
		return OMX_BOARD_NOT_FOUND;
	}
	omx_wire_params_local(&ep->wp, &ep->wp_local);
	if (omx__test_session_base())
		ep->session = omx__test_session_base() + board * 256u + index; /* reproducible frames (fuzzing) */
	else if (getrandom(&ep->session, sizeof(ep->session), 0) != sizeof(ep->session))
		ep->session = (uint32_t)(omx_now_ns() ^ ((uint64_t)getpid() << 16));
	int r = slot_lock(ep);
	if (r == -EBUSY)
		return OMX_BUSY;
	if (r < 0)
		return OMX_ACCESS_DENIED;
	omx_return_t ret = open_transport(ep);
	if (ret != OMX_SUCCESS) {
		close(ep->lock_fd);
		ep->lock_fd = -1;
	}
	return ret;
}

static omx_return_t search_slot(struct omx_endpoint *ep, uint32_t board, uint32_t index)
{
	uint32_t b0 = board, b1 = board + 1, e0 = index, e1 = index + 1;
	int busy = 0;
	if (index == OMX_ANY_ENDPOINT && omx__cfg.any_endpoint >= 0)
		index = (uint32_t)omx__cfg.any_endpoint, e0 = index, e1 = index + 1;
	if (board == OMX_ANY_NIC)
		b0 = 0, b1 = OMX_BOARD_MAX;
	if (index == OMX_ANY_ENDPOINT)
		e0 = 0, e1 = omx__cfg.endpoint_max;
	for (uint32_t e = e0; e < e1; e++) {
		for (uint32_t b = b0; b < b1; b++) {
			omx_return_t r = try_open(ep, b, e);
			if (r == OMX_SUCCESS)
				return r;
			if (r == OMX_BUSY)
				busy = 1;
			else if (r != OMX_BOARD_NOT_FOUND || (board != OMX_ANY_NIC && index != OMX_ANY_ENDPOINT))
				return r;
		}
	}
	return busy ? OMX_BUSY : OMX_BOARD_NOT_FOUND;
}

/* OMX_PROCESS_BINDING (behaviour.md 10): "c0,c1,..." binds the opener of endpoint n to CPU c_n,
 * "all:<cpu>" always to <cpu>, "file[:path]" reads "board <mac> ep <n> irq <irq> mask <hex>" lines
 * (default /tmp/open-mx.bindings.dat, as written by omx_prepare_binding). */
static void apply_binding(struct omx_endpoint *ep)
{
	const char *v = getenv("OMX_PROCESS_BINDING");
	cpu_set_t set;
	int have = 0;
	if (!v || !*v)
		return;
	CPU_ZERO(&set);
	if (!strncmp(v, "all:", 4)) {
		CPU_SET(atoi(v + 4), &set);
		have = 1;
	} else if (!strncmp(v, "file", 4)) {
		const char *path = v[4] == ':' ? v + 5 : "/tmp/open-mx.bindings.dat";
		FILE *f = fopen(path, "r");
		char line[256], mac[32];
		unsigned e, irq;
		unsigned long long mask;
		const uint8_t *m = ep->board->iface.mac;
		char want[32];
		snprintf(want, sizeof(want), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
		while (f && !have && fgets(line, sizeof(line), f))
			if (sscanf(line, "board %31s ep %u irq %u mask %llx", mac, &e, &irq, &mask) == 4 &&
			    !strcasecmp(mac, want) && e == ep->endpoint_index) {
				for (int c = 0; c < 64; c++)
					if (mask >> c & 1)
						CPU_SET(c, &set);
				have = 1;
			}
		if (f)
			fclose(f);
		else
			omx__warn("OMX_PROCESS_BINDING: cannot read %s\n", path);
	} else {
		unsigned idx = 0;
		for (const char *p = v; *p; idx++) {
			if (idx == ep->endpoint_index) {
				CPU_SET(atoi(p), &set);
				have = 1;
				break;
			}
			p = strchr(p, ',');
			if (!p)
				break;
			p++;
		}
	}
	if (have && sched_setaffinity(0, sizeof(set), &set) < 0)
		omx__warn("OMX_PROCESS_BINDING: cannot bind: %s\n", strerror(errno));
	else if (have)
		omx__verbose("endpoint %u: process bound as OMX_PROCESS_BINDING=%s says\n", ep->endpoint_index, v);
}

static omx_return_t endpoint_setup(struct omx_endpoint *ep)
{
	ep->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ep->txbuf_len = (ep->wp_local.mtu > ep->wp.mtu ? ep->wp_local.mtu : ep->wp.mtu) + 64;
	ep->txbuf = malloc(ep->txbuf_len);
	ep->batchbuf = malloc((size_t)OMX_NET_BATCH_MAX * OMX_BATCH_SLOT);
	ep->pullbuf = malloc(ep->wp_local.pull_reply_max > ep->wp.pull_reply_max ? ep->wp_local.pull_reply_max
										 : ep->wp.pull_reply_max);
	ep->partners = calloc(omx__cfg.peer_max, sizeof(*ep->partners));
	if (ep->event_fd < 0 || !ep->txbuf || !ep->batchbuf || !ep->pullbuf || !ep->partners)
		return OMX_NO_SYSTEM_RESOURCES;
	int self_idx = omx__peer_by_nic_id(ep->board->nic_id);
	if (self_idx < 0)
		return OMX_PEER_NOT_FOUND;
	ep->self = omx__partner_get(ep, (uint32_t)self_idx, (uint8_t)ep->endpoint_index);
	if (!ep->self)
		return OMX_NO_RESOURCES;
	ep->self->true_session = ep->self->back_session = ep->session;
	ep->self->next_send_seq = ep->self->next_acked_seq = omx_seq_first(0);
	return OMX_SUCCESS;
}

omx_return_t omx_open_endpoint(uint32_t board_index, uint32_t endpoint_index, uint32_t key,
			       omx_endpoint_param_t *param_array, uint32_t param_count, omx_endpoint_t *epp)
{
	omx_return_t ret;
	if (!omx__g.initialized)
		return omx__error_global(OMX_NOT_INITIALIZED, "Opening endpoint");
	pthread_mutex_lock(&omx__g.lock);
	omx__config_load_open();
	struct omx_endpoint *ep = endpoint_alloc();
	if (!ep) {
		pthread_mutex_unlock(&omx__g.lock);
		return omx__error_global(OMX_NO_RESOURCES, "Allocating endpoint");
	}
	ep->key = key;
	ret = parse_params(ep, param_array, param_count);
	if (ret == OMX_SUCCESS && (board_index != OMX_ANY_NIC && board_index > 255))
		ret = OMX_BAD_ENDPOINT; /* the reference truncated to 8 bits; reject instead */
	if (ret == OMX_SUCCESS)
		ret = search_slot(ep, board_index, endpoint_index);
	if (ret == OMX_SUCCESS)
		ret = endpoint_setup(ep);
	if (ret != OMX_SUCCESS) {
		endpoint_free(ep);
		pthread_mutex_unlock(&omx__g.lock);
		return omx__error_global(ret, "Opening endpoint (board %d endpoint %d)", (int)board_index,
					 (int)endpoint_index);
	}
	omx_list_add_tail(&omx__g.endpoints, &ep->list_elt);
	omx__counters_open(ep);
	__atomic_store_n(&ep->magic, OMX_EP_MAGIC, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&omx__g.lock);
	omx__verbose("opened endpoint %u on board %u (%s), session %08x, %s wire mode, frame MTU %u\n",
		     ep->endpoint_index, ep->board_index, ep->board->iface.name, ep->session,
		     ep->wp.mode == OMX_WIRE_COMPAT ? "MX-compatible" : "extended", ep->wp.mtu);
	omx__eplock(&ep->lock);
	omx__progress(ep);
	omx__epunlock(&ep->lock);
	apply_binding(ep);
	if (omx__cfg.progress_thread && omx__progress_thread_start(ep) != 0)
		omx__warn("cannot start the progress thread of endpoint %u; progress only inside calls\n",
			  ep->endpoint_index);
	*epp = ep;
	return OMX_SUCCESS;
}

int omx__endpoint_check(struct omx_endpoint *ep)
{
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &omx__g.endpoints)
		if (pos == &ep->list_elt)
			return 1;
	return 0;
}

/*
 * The unexpected handler runs without the endpoint lock, possibly on another thread (the progress
 * thread, or an application thread making progress) that returns into the endpoint afterwards:
 * closing waits for its end and lets no other call start; from inside the handler itself it is
 * refused. (It used to refuse whenever any thread was in the handler, so a close racing with the
 * progress thread failed at random.)
 */
static int close_quiesce_handler(struct omx_endpoint *ep)
{
	omx__eplock(&ep->lock);
	if (ep->in_handler && pthread_equal(ep->handler_thread, pthread_self())) {
		omx__epunlock(&ep->lock);
		return -1;
	}
	while (ep->in_handler)
		omx__epcond_wait(&ep->cond, &ep->lock, NULL);
	ep->handlers_off = 1;
	omx__epunlock(&ep->lock);
	return 0;
}

omx_return_t omx_close_endpoint(omx_endpoint_t ep)
{
	pthread_mutex_lock(&omx__g.lock);
	if (!omx__ep_live(ep) || !omx__endpoint_check(ep) || ep->close_claimed) {
		pthread_mutex_unlock(&omx__g.lock);
		return omx__error_global(OMX_BAD_ENDPOINT, "Closing endpoint");
	}
	ep->close_claimed = 1; /* a concurrent second close fails above */
	pthread_mutex_unlock(&omx__g.lock);
	if (close_quiesce_handler(ep) < 0) {
		pthread_mutex_lock(&omx__g.lock);
		ep->close_claimed = 0;
		pthread_mutex_unlock(&omx__g.lock);
		return omx__error(ep, OMX_NOT_SUPPORTED_IN_HANDLER, "Closing endpoint from the unexpected handler");
	}
	pthread_mutex_lock(&omx__g.lock);
	omx_list_del(&ep->list_elt);
	__atomic_store_n(&ep->magic, OMX_EP_DEAD, __ATOMIC_RELEASE);
	int last_on_board = 1;
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &omx__g.endpoints)
		if (omx_container_of(pos, struct omx_endpoint, list_elt)->board_index == ep->board_index)
			last_on_board = 0;
	pthread_mutex_unlock(&omx__g.lock);
	if (last_on_board)
		omx__responder_release(ep->board_index);

	omx__eplock(&ep->lock);
	ep->refusing = 1;
	/* Linger (bounded) until what we owe peers is acked: above all the NOTIFY of a large
	 * message we just received, without which its sender would wait for its whole resend
	 * budget; also early-completed eager sends. */
	uint64_t until = omx_now_ns() + omx__cfg.close_linger_ns;
	while (!omx_list_empty(&ep->resend_list) && omx_now_ns() < until) {
		omx__progress(ep);
		omx__epunlock(&ep->lock);
		struct pollfd pfd[2] = { { ep->net->fd, POLLIN, 0 }, { ep->net->fd2, POLLIN, 0 } };
		poll(pfd, 2, 1);
		omx__eplock(&ep->lock);
	}
	/* What is still unacked is abandoned: an eager send reported complete may never reach its
	 * receiver (MX semantics; the original did the same, silently). Counted, and said. */
	unsigned unacked = omx_list_len(&ep->resend_list);
	if (unacked) {
		omx__count_add(ep->board, OMX_C_X_UNACKED_AT_CLOSE, unacked);
		omx__verbose("endpoint %u closed with %u sends unacked after lingering %u ms (OMX_CLOSE_LINGER_MS)\n",
			     ep->endpoint_index, unacked, (unsigned)(omx__cfg.close_linger_ns / 1000000u));
	}
	/* Flush every owed ack so peers do not retransmit what we already have. */
	struct omx_partner *p;
	while ((p = omx_list_first(&ep->ack_list, struct omx_partner, ack_elt)))
		p->ack_state = 2, omx__send_acks(ep, UINT64_MAX);
	ep->closing = 1;
	omx__notify_waiters(ep);
	uint64_t one = 1;
	(void)!write(ep->event_fd, &one, sizeof(one));
	omx__epunlock(&ep->lock);
	omx__progress_thread_stop(ep);
	pthread_mutex_lock(&omx__g.lock);
	omx__counters_close(ep);
	pthread_mutex_unlock(&omx__g.lock);
	if (ep->local && omx__cfg.verbose) {
		struct omx_net_local_stats ls;
		uint64_t sc, sb, fb, pl, cw, cp;
		omx_net_local_stats(ep->local, &ls);
		omx__shared_stats(&sc, &sb, &fb, &pl, &cw, &cp);
		omx__verbose("endpoint %u same-host summary: %llu frames through shared memory, %llu over the socket, "
			     "%llu dead-producer slots skipped; process: %llu single copies (%llu bytes), %llu fallbacks to pull, "
			     "%llu pulled as the sender chose, %llu bytes written for receivers' single copies, "
			     "%llu pulled as we chose (faster here); %llu frames received on the fast path; "
			     "%llu idle calls without a pass; %llu single copies read from shared pools; "
			     "%llu messages sent eager to time the placement, our copies out of the ring last %.1f ns/KiB\n",
			     ep->endpoint_index, (unsigned long long)ls.ring_frames, (unsigned long long)ls.socket_frames,
			     (unsigned long long)ls.ring_skipped, (unsigned long long)sc, (unsigned long long)sb,
			     (unsigned long long)fb, (unsigned long long)pl, (unsigned long long)cw, (unsigned long long)cp,
			     (unsigned long long)ep->fast_recvs, (unsigned long long)ep->idle_skipped,
			     (unsigned long long)omx__shared_pool_copies(), (unsigned long long)omx__shared_live_looks(),
			     ep->copy_out_ns_kib / 16.0);
	}
	endpoint_free(ep);
	return OMX_SUCCESS;
}

omx_return_t omx_get_endpoint_addr(omx_endpoint_t ep, omx_endpoint_addr_t *addr)
{
	OMX_CHECK_EP(ep);
	omx__partner_to_addr(ep->self, addr);
	return OMX_SUCCESS;
}

omx_return_t omx_wakeup(omx_endpoint_t ep)
{
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	ep->wakeup_gen++;
	omx__epcond_broadcast(&ep->cond);
	uint64_t one = 1;
	(void)!write(ep->event_fd, &one, sizeof(one));
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

omx_return_t omx_progress(omx_endpoint_t ep)
{
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	omx__progress(ep);
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

omx_return_t omx_disable_progression(omx_endpoint_t ep)
{
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	while (ep->in_handler && !pthread_equal(ep->handler_thread, pthread_self()))
		omx__epcond_wait(&ep->cond, &ep->lock, NULL);
	ep->progression_disabled = 1;
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

omx_return_t omx_reenable_progression(omx_endpoint_t ep)
{
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	ep->progression_disabled = 0;
	omx__progress(ep);
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

omx_return_t omx_register_unexp_handler(omx_endpoint_t ep, omx_unexp_handler_t handler, void *context)
{
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	ep->unexp_handler = handler;
	ep->unexp_handler_ctx = context;
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}
