/*
 * responder.c - NACKs for frames addressed to endpoints nobody has open (wire.md 10, 14).
 *
 * The reference's kernel driver saw every frame of a board and answered for closed endpoints.
 * Here each endpoint only receives its own frames, so one process per board and host takes the
 * responder role (an flock'd role file): it holds an extra packet socket whose kernel filter
 * accepts only NACKable frames (CONNECT, TINY..PULL, NOTIFY) for endpoint indexes that are not
 * open, and answers them with NACK_LIB / NACK_MCP (BAD_ENDPT beyond the endpoint range,
 * ENDPT_CLOSED otherwise). The open set comes from the slot lock files (their flocks, read from
 * /proc/locks); the filter is refreshed every 100 ms and the set re-read before every NACK, so a
 * freshly opened endpoint is never NACKed. Reading /proc/locks takes the kernel's file-lock
 * semaphore for writing, which waits for an RCU grace period: 8-24 ms on these VMs, during which
 * the reader sleeps. Done in the progression pass it stalled the application's traffic that long
 * every 100 ms (0-64 B half round trips 10-20% slower on average, docs/performance.md stop 30), so
 * the periodic refresh belongs to the endpoints' progress threads, which hold no endpoint lock
 * (the pass only try-locks the responder); without them the pass refreshes once a second. The
 * role moves to another process when the holder closes its last endpoint on the board or dies.
 * Runs in any endpoint's progression.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "core/counters.h"
#include "core/testhooks.h"

#define NACKS_PER_SECOND 2000
#define REFRESH_NS 100000000ull           /* the filter's open set, from a progress thread or omxd */
#define REFRESH_IN_PASS_NS 1000000000ull  /* ... from the application's pass, without threads */

struct omx_responder {
	pthread_mutex_t lock;
	int role_fd;
	struct omx_net *net;
	uint8_t open[256];
	unsigned nopen;
	uint64_t next_refresh_ns, next_try_ns;
	uint64_t window_start_ns;
	unsigned nacks_in_window;
	uint8_t txbuf[256];
};

static struct omx_responder responders[OMX_BOARD_MAX];
static pthread_once_t responders_once = PTHREAD_ONCE_INIT;

static void responders_init(void)
{
	for (int i = 0; i < OMX_BOARD_MAX; i++) {
		pthread_mutex_init(&responders[i].lock, NULL);
		responders[i].role_fd = -1;
	}
}

static void slot_path(char *buf, size_t len, const struct omx_board *b, const char *what)
{
	const uint8_t *m = b->iface.mac;
	snprintf(buf, len, "%s/omx-%02x%02x%02x%02x%02x%02x-%s.lock", omx__lock_dir(), m[0], m[1], m[2], m[3], m[4], m[5],
		 what);
}

/* Endpoint indexes of board b whose slot lock file is flock'd by some process. */
static unsigned scan_open(const struct omx_board *b, uint8_t *open)
{
	static const size_t max_locks = 4096;
	struct held { dev_t dev; unsigned long ino; } *held = malloc(max_locks * sizeof(*held));
	size_t nheld = 0;
	char line[256];
	FILE *f = fopen("/proc/locks", "r"); /* read once for all slots (omx__flock_holder reads per path) */
	if (f && held) {
		int pid;
		while (fgets(line, sizeof(line), f) && nheld < max_locks)
			if (omx__proc_locks_flock(line, &pid, &held[nheld].dev, &held[nheld].ino))
				nheld++;
	}
	if (f)
		fclose(f);
	unsigned n = 0;
	for (uint32_t e = 0; e < omx__cfg.endpoint_max && held; e++) {
		char path[128], idx[16];
		struct stat st;
		snprintf(idx, sizeof(idx), "%u", e);
		slot_path(path, sizeof(path), b, idx);
		if (stat(path, &st) < 0)
			continue;
		for (size_t k = 0; k < nheld; k++)
			if (held[k].ino == (unsigned long)st.st_ino && held[k].dev == st.st_dev) {
				open[n++] = (uint8_t)e;
				break;
			}
	}
	free(held);
	return n;
}

static void refresh(struct omx_responder *r, const struct omx_board *b)
{
	uint8_t open[256];
	unsigned n = scan_open(b, open);
	if (n != r->nopen || memcmp(open, r->open, n)) {
		memcpy(r->open, open, n);
		r->nopen = n;
		omx_net_packet_set_open_endpoints(r->net, r->open, r->nopen);
	}
}

static void try_acquire(struct omx_responder *r, struct omx_board *b)
{
	char path[128];
	slot_path(path, sizeof(path), b, "nack");
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return;
	}
	struct omx_net_opts o = { 0 };
	o.nack_responder = 1;
	omx__broker_opts(&o);
	o.rx_ring_frames = 64;
	int err = 0;
	r->net = omx_net_packet_open(b->iface.name, 0, &o, &err);
	if (!r->net) {
		close(fd);
		return;
	}
	r->role_fd = fd;
	r->nopen = 0;
	refresh(r, b); /* now: until then the filter takes every NACKable frame */
	r->next_refresh_ns = omx_now_ns() + REFRESH_NS;
	omx__verbose("board %u: this process answers NACKs for closed endpoints\n", b->index);
}

struct rx_ctx {
	struct omx_responder *r;
	struct omx_board *b;
};

static void send_nack(struct omx_responder *r, struct omx_board *b, const struct omx_pkt *bad, struct omx_pkt *n)
{
	struct omx_wire_params wp;
	omx_wire_params_init(&wp, omx__cfg.wire_mode, b->frame_mtu);
	memcpy(n->dst_mac, bad->src_mac, 6);
	memcpy(n->src_mac, b->iface.mac, 6);
	int idx = omx__peer_by_mac(bad->src_mac);
	n->peer_index = idx >= 0 ? omx__g.peers[idx].reverse_index[b->index] : OMX_PEER_INDEX_UNKNOWN;
	size_t len = omx_wire_encode(&wp, n, r->txbuf, sizeof(r->txbuf));
	struct iovec iov = { r->txbuf, len };
	if (len && r->net->ops->send(r->net, &iov, 1) == 0)
		omx__count(b, n->ptype == OMX_PT_NACK_LIB ? OMX_C_SEND_NACK_LIB : OMX_C_SEND_NACK_MCP);
}

static void responder_rx(void *arg, const uint8_t *frame, size_t len)
{
	struct rx_ctx *c = arg;
	struct omx_pkt pkt, n;
	struct omx_wire_params wp;
	omx_wire_params_init(&wp, omx__cfg.wire_mode, c->b->frame_mtu);
	if (omx_wire_decode(&wp, frame, len, &pkt) != OMX_WIRE_OK)
		return;
	/* Only peers of our table are answered (wire.md 3). */
	int idx = omx__peer_by_mac(pkt.src_mac);
	if (idx < 0)
		return;
	uint8_t dst = frame[17];
	uint8_t type = dst >= omx__cfg.endpoint_max ? OMX_NACK_BAD_ENDPT : OMX_NACK_ENDPT_CLOSED;
	if (type == OMX_NACK_ENDPT_CLOSED) {
		uint8_t open[256];
		unsigned nopen = scan_open(c->b, open);
		if (memchr(open, dst, nopen)) {
			refresh(c->r, c->b); /* it just opened: stop seeing its frames */
			return;
		}
	}
	uint64_t now = omx_now_ns();
	if (now - c->r->window_start_ns > 1000000000ull) {
		c->r->window_start_ns = now;
		c->r->nacks_in_window = 0;
	}
	if (c->r->nacks_in_window++ >= NACKS_PER_SECOND)
		return; /* a flood: senders retransmit and get their NACK later */
	omx__count(c->b, OMX_C_DROP_BAD_ENDPOINT);
	memset(&n, 0, sizeof(n));
	if (pkt.ptype == OMX_PT_PULL) {
		n.ptype = OMX_PT_NACK_MCP;
		n.u.nack_mcp.src_endpoint = pkt.u.pull.src_endpoint;
		n.u.nack_mcp.nack_type = type;
		n.u.nack_mcp.src_pull_handle = pkt.u.pull.src_pull_handle;
		n.u.nack_mcp.src_magic = pkt.u.pull.src_magic;
	} else {
		n.ptype = OMX_PT_NACK_LIB;
		n.u.nack_lib.src_endpoint = dst;
		n.u.nack_lib.nack_type = type;
		n.u.nack_lib.dst_endpoint = frame[18];
		n.u.nack_lib.dst_src_peer_index = pkt.peer_index;
		n.u.nack_lib.lib_seqnum = pkt.ptype == OMX_PT_CONNECT ? 0 :
					  pkt.ptype == OMX_PT_NOTIFY ? pkt.u.notify.lib_seqnum : pkt.u.msg.lib_seqnum;
	}
	send_nack(c->r, c->b, &pkt, &n);
}

/* refresh_ns: the open set's refresh period here, 0 for none (a progress thread does it). */
/* The open set again if period_ns has passed since the last look. r->lock held. */
static void refresh_due(struct omx_responder *r, const struct omx_board *b, uint64_t now, uint64_t period_ns)
{
	if (!r->net || now < r->next_refresh_ns)
		return;
	r->next_refresh_ns = now + period_ns;
	refresh(r, b);
}

static void progress_board(struct omx_board *b, uint32_t board_index, uint64_t now, uint64_t refresh_ns)
{
	pthread_once(&responders_once, responders_init);
	struct omx_responder *r = &responders[board_index];
	if (pthread_mutex_trylock(&r->lock) != 0)
		return;
	if (!r->net && now >= r->next_try_ns) {
		r->next_try_ns = now + 1000000000ull;
		try_acquire(r, b);
	}
	if (r->net) {
		if (refresh_ns)
			refresh_due(r, b, now, refresh_ns);
		struct rx_ctx c = { r, b };
		r->net->ops->recv_burst(r->net, responder_rx, &c, 32);
	}
	pthread_mutex_unlock(&r->lock);
}

void omx__responder_progress(struct omx_endpoint *ep, uint64_t now)
{
	if (omx__test_memnet() || ep->board_index >= OMX_BOARD_MAX)
		return;
	progress_board(ep->board, ep->board_index, now, ep->progress_started ? 0 : REFRESH_IN_PASS_NS);
}

void omx__responder_refresh(uint32_t board_index)
{
	if (omx__test_memnet() || board_index >= OMX_BOARD_MAX)
		return;
	pthread_once(&responders_once, responders_init);
	struct omx_responder *r = &responders[board_index];
	struct omx_board *b = omx__board(board_index);
	uint64_t now = omx_now_ns();
	/* Held only briefly by the passes (and by a refresh elsewhere): look again at the next wake-up. */
	if (!b || pthread_mutex_trylock(&r->lock) != 0)
		return;
	refresh_due(r, b, now, REFRESH_NS);
	pthread_mutex_unlock(&r->lock);
}

unsigned omx__responder_serve(int *fds, unsigned max_fds)
{
	/* The endpoint range (what is "closed" rather than "bad") is read at the first open. */
	pthread_mutex_lock(&omx__g.lock);
	omx__config_load_open();
	pthread_mutex_unlock(&omx__g.lock);
	uint64_t now = omx_now_ns();
	unsigned n = 0;
	for (uint32_t i = 0; i < OMX_BOARD_MAX; i++) {
		struct omx_board *b = omx__board(i);
		if (!b)
			continue;
		progress_board(b, i, now, REFRESH_NS);
		struct omx_responder *r = &responders[i];
		pthread_mutex_lock(&r->lock);
		if (r->net && n < max_fds)
			fds[n++] = r->net->fd;
		pthread_mutex_unlock(&r->lock);
	}
	return n;
}

int omx__responder_fd(uint32_t board_index)
{
	if (omx__test_memnet() || board_index >= OMX_BOARD_MAX)
		return -1;
	pthread_once(&responders_once, responders_init);
	struct omx_responder *r = &responders[board_index];
	/* Held by a refresh for a /proc/locks read (milliseconds): this sleep goes without it. */
	if (pthread_mutex_trylock(&r->lock) != 0)
		return -1;
	int fd = r->net ? r->net->fd : -1;
	pthread_mutex_unlock(&r->lock);
	return fd;
}

/* The last endpoint of this process on the board is closing: give the role up. */
void omx__responder_release(uint32_t board_index)
{
	if (board_index >= OMX_BOARD_MAX)
		return;
	pthread_once(&responders_once, responders_init);
	struct omx_responder *r = &responders[board_index];
	pthread_mutex_lock(&r->lock);
	if (r->net) {
		r->net->ops->close(r->net);
		r->net = NULL;
		close(r->role_fd);
		r->role_fd = -1;
	}
	r->next_try_ns = 0;
	pthread_mutex_unlock(&r->lock);
}
