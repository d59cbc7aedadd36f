/*
 * board.c - boards (attached interfaces) and the peer table (behaviour.md 8), plus hostname
 * discovery by host query/reply (wire.md 11).
 *
 * There is no kernel driver holding a host-wide table: each process builds the same table the
 * same way (local boards first, in OMX_IFACES order, then the OMX_PEERS file in file order), so
 * every process of a host agrees on the indexes it puts on the wire.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/core.h"
#include "core/counters.h"
#include "core/testhooks.h"

static void discovery_init(void);
static int discovery_add(const uint8_t mac[6]);
static void discovery_name(const struct omx_peer *p);
static void discovery_due(struct omx_endpoint *ep, uint64_t now);

struct omx_board *omx__board(uint32_t index)
{
	if (index >= OMX_BOARD_MAX || !omx__g.boards[index].attached)
		return NULL;
	return &omx__g.boards[index];
}

struct omx_peer *omx__peer(uint32_t index)
{
	if (!omx__g.peers || index >= omx__g.peer_count || !omx__g.peers[index].present)
		return NULL;
	return &omx__g.peers[index];
}

int omx__peer_by_nic_id(uint64_t nic_id)
{
	for (uint32_t i = 0; i < omx__g.peer_count; i++)
		if (omx__g.peers[i].present && omx__g.peers[i].nic_id == nic_id)
			return (int)i;
	return -1;
}

int omx__peer_by_mac(const uint8_t mac[6])
{
	return omx__peer_by_nic_id(omx_mac_to_nic_id(mac));
}

int omx__peer_by_hostname(const char *name)
{
	for (uint32_t i = 0; i < omx__g.peer_count; i++)
		if (omx__g.peers[i].present && omx__g.peers[i].hostname[0] &&
		    !strncmp(omx__g.peers[i].hostname, name, OMX_HOSTNAME_MAX))
			return (int)i;
	return -1;
}

int omx__peer_add(uint64_t nic_id, const char *hostname)
{
	int idx = omx__peer_by_nic_id(nic_id);
	struct omx_peer *p;

	if (idx < 0) {
		if (omx__g.peer_count >= omx__cfg.peer_max)
			return -1;
		idx = (int)omx__g.peer_count++;
		p = &omx__g.peers[idx];
		memset(p, 0, sizeof(*p));
		p->present = 1;
		p->nic_id = nic_id;
		omx_nic_id_to_mac(nic_id, p->mac);
		p->local_board = -1;
		for (int b = 0; b < OMX_BOARD_MAX; b++)
			p->reverse_index[b] = OMX_PEER_INDEX_UNKNOWN;
	}
	p = &omx__g.peers[idx];
	/* Adding a known address replaces its name, or clears it (then it is queried). */
	omx__strcpy(p->hostname, sizeof(p->hostname), hostname ? hostname : "");
	p->next_query_ns = 0;
	if (p->local_board >= 0 && hostname)
		omx__strcpy(omx__g.boards[p->local_board].hostname, OMX_HOSTNAME_MAX, hostname);
	return idx;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	for (int i = 0; i < 6; i++) {
		char *end;
		if (!isxdigit((unsigned char)s[0]))
			return -1;
		unsigned long v = strtoul(s, &end, 16);
		if (end - s < 1 || end - s > 2 || v > 0xff)
			return -1;
		mac[i] = (uint8_t)v;
		if (i < 5 && *end != ':')
			return -1;
		s = end + (i < 5);
		if (i == 5 && *end && !isspace((unsigned char)*end))
			return -1;
	}
	return 0;
}

/* The omx_init_peers format: "xx:xx:xx:xx:xx:xx hostname" per line, '#' comments. */
int omx__peers_load_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[256];
	int lineno = 0;

	if (!f) {
		snprintf(err, errlen, "cannot open peers file %s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		size_t n = strlen(line);
		if (n > 110 || (n == sizeof(line) - 1 && line[n - 1] != '\n')) {
			snprintf(err, errlen, "%s:%d: line longer than 110 characters", path, lineno);
			fclose(f);
			return -1;
		}
		char *s = line;
		while (isspace((unsigned char)*s))
			s++;
		if (*s == '#' || *s == '\0')
			continue;
		uint8_t mac[6];
		char name[OMX_HOSTNAME_MAX + 1];
		char mactext[64];
		if (sscanf(s, "%63s %80s", mactext, name) != 2 || parse_mac(mactext, mac) < 0 ||
		    strlen(name) >= OMX_HOSTNAME_MAX) {
			snprintf(err, errlen, "%s:%d: malformed peer line (expected 'xx:xx:xx:xx:xx:xx hostname')", path,
				 lineno);
			fclose(f);
			return -1;
		}
		if (omx__peer_add(omx_mac_to_nic_id(mac), name) < 0) {
			snprintf(err, errlen, "%s:%d: peer table full (%u entries)", path, lineno, omx__cfg.peer_max);
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	return 0;
}

static int attach_board(const char *ifname, const char *nodename, int explicit_list)
{
	struct omx_iface_info info;
	int r = omx__test_iface_query(ifname, &info);
	if (r < 0)
		r = omx_iface_query(ifname, &info);
	if (r < 0) {
		omx__warn("cannot attach interface '%s': %s\n", ifname, strerror(-r));
		return explicit_list ? -1 : 0;
	}
	if (omx__g.board_count >= OMX_BOARD_MAX)
		return 0;
	uint32_t i = omx__g.board_count++;
	struct omx_board *b = &omx__g.boards[i];
	memset(b, 0, sizeof(*b));
	b->attached = 1;
	b->index = i;
	b->iface = info;
	b->nic_id = omx_mac_to_nic_id(info.mac);
	b->frame_mtu = info.mtu > OMX_WIRE_MTU_MAX ? OMX_WIRE_MTU_MAX : info.mtu;
	if (info.loopback)
		snprintf(b->hostname, sizeof(b->hostname), "localhost");
	else
		snprintf(b->hostname, sizeof(b->hostname), "%.70s:%u", nodename, i);
	if (!info.up)
		omx__warn("interface %s is currently DOWN\n", ifname);
	int idx = omx__peer_add(b->nic_id, b->hostname);
	if (idx >= 0) {
		omx__g.peers[idx].local_board = (int)i;
		for (int k = 0; k < OMX_BOARD_MAX; k++)
			omx__g.peers[idx].reverse_index[k] = (uint16_t)idx;
	}
	return 0;
}

/* OMX_IFACES: comma-separated list, or unset/"all" for every up, non-loopback Ethernet interface. */
static int attach_all(const char *nodename)
{
	struct if_nameindex *ifs = if_nameindex();
	if (!ifs)
		return 0;
	for (struct if_nameindex *it = ifs; it->if_index; it++) {
		char path[128], type[16] = "";
		snprintf(path, sizeof(path), "/sys/class/net/%s/type", it->if_name);
		FILE *f = fopen(path, "r");
		if (f) {
			if (!fgets(type, sizeof(type), f))
				type[0] = 0;
			fclose(f);
		}
		struct omx_iface_info info;
		if (atoi(type) != 1 || omx_iface_query(it->if_name, &info) < 0 || info.loopback || !info.up)
			continue;
		attach_board(it->if_name, nodename, 0);
	}
	if_freenameindex(ifs);
	return 0;
}

omx_return_t omx__boards_init(void)
{
	struct utsname u;
	const char *nodename = getenv("OMX_HOSTNAME");
	char *list, *save = NULL;
	const char *ifaces = getenv("OMX_IFACES");

	if (!nodename) {
		nodename = uname(&u) == 0 ? u.nodename : "localhost";
	}
	omx__cfg.peer_max = OMX_PEER_MAX_DEFAULT;
	const char *pm = getenv("OMX_PEER_MAX");
	if (pm && atoi(pm) > 0)
		omx__cfg.peer_max = (uint32_t)atoi(pm) > OMX_PEER_MAX_HARD ? OMX_PEER_MAX_HARD : (uint32_t)atoi(pm);
	free(omx__g.peers);
	omx__g.peers = calloc(omx__cfg.peer_max, sizeof(*omx__g.peers));
	if (!omx__g.peers)
		return OMX_NO_SYSTEM_RESOURCES;
	omx__g.peer_count = 0;
	omx__g.board_count = 0;
	omx__g.host_query_magic = OMX_HOST_QUERY_MAGIC_START;

	if (!ifaces || !strcmp(ifaces, "all")) {
		attach_all(nodename);
	} else {
		list = strdup(ifaces);
		if (!list)
			return OMX_NO_SYSTEM_RESOURCES;
		for (char *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
			if (attach_board(tok, nodename, 1) < 0) {
				free(list);
				return OMX_BOARD_NOT_FOUND;
			}
		}
		free(list);
	}
	const char *peers = omx__getenv("OMX_PEERS", NULL);
	if (peers && *peers) {
		char err[256];
		if (omx__peers_load_file(peers, err, sizeof(err)) < 0) {
			omx__warn("%s\n", err);
			return OMX_PEER_NOT_FOUND;
		}
		omx__g.peers_configured = 1;
	}
	discovery_init();
	return OMX_SUCCESS;
}

void omx__boards_fini(void)
{
	free(omx__g.peers);
	omx__g.peers = NULL;
	omx__g.peer_count = 0;
	omx__g.board_count = 0;
	memset(omx__g.boards, 0, sizeof(omx__g.boards));
}

/* ---- host query / reply ---- */

void omx__handle_host_query(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	struct omx_board *b = ep->board;
	if (!omx_wire_mac_eq(pkt->dst_mac, b->iface.mac))
		return;
	pthread_mutex_lock(&omx__g.lock);
	int idx = omx__peer_by_mac(pkt->src_mac);
	if (idx < 0 && omx__discovery_enabled()) {
		idx = discovery_add(pkt->src_mac); /* an Open-MX host we have not heard yet */
		if (idx >= 0)
			omx__count(b, OMX_C_X_DISCOVERY_ADDED);
	}
	if (idx < 0) {
		pthread_mutex_unlock(&omx__g.lock);
		omx__count(b, OMX_C_DROP_BAD_PEER_ADDR);
		return;
	}
	omx__g.peers[idx].reverse_index[b->index] = pkt->u.host.src_dst_peer_index;
	pthread_mutex_unlock(&omx__g.lock);
	omx__count(b, OMX_C_RECV_HOST_QUERY);

	struct omx_pkt r;
	memset(&r, 0, sizeof(r));
	memcpy(r.dst_mac, pkt->src_mac, 6);
	memcpy(r.src_mac, b->iface.mac, 6);
	r.peer_index = pkt->u.host.src_dst_peer_index;
	r.ptype = OMX_PT_HOST_REPLY;
	r.u.host.src_dst_peer_index = (uint16_t)idx;
	r.u.host.magic = pkt->u.host.magic;
	omx__strcpy(r.u.host.hostname, sizeof(r.u.host.hostname), b->hostname);
	r.u.host.length = (uint8_t)(strlen(r.u.host.hostname) + 1);
	omx__send_frame(ep, &r, OMX_C_SEND_HOST_REPLY);
}

void omx__handle_host_reply(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	struct omx_board *b = ep->board;
	pthread_mutex_lock(&omx__g.lock);
	if (pkt->u.host.magic != omx__g.host_query_magic) {
		pthread_mutex_unlock(&omx__g.lock);
		omx__count(b, OMX_C_DROP_HOST_REPLY_BAD_MAGIC);
		return;
	}
	int idx = omx__peer_by_mac(pkt->src_mac);
	if (idx < 0) {
		pthread_mutex_unlock(&omx__g.lock);
		omx__count(b, OMX_C_DROP_BAD_PEER_ADDR);
		return;
	}
	struct omx_peer *p = &omx__g.peers[idx];
	int renamed = strcmp(p->hostname, pkt->u.host.hostname) != 0;
	omx__strcpy(p->hostname, sizeof(p->hostname), pkt->u.host.hostname);
	p->reverse_index[b->index] = pkt->u.host.src_dst_peer_index;
	if (renamed && omx__discovery_enabled())
		discovery_name(p);
	pthread_mutex_unlock(&omx__g.lock);
	omx__count(b, OMX_C_RECV_HOST_REPLY);
}

void omx__host_queries_due(struct omx_endpoint *ep, uint64_t now)
{
	struct omx_board *b = ep->board;
	if (pthread_mutex_trylock(&omx__g.lock) != 0)
		return; /* someone else is busy with the table; next pass */
	for (uint32_t i = 0; i < omx__g.peer_count; i++) {
		struct omx_peer *p = &omx__g.peers[i];
		if (!p->present || p->hostname[0] || p->local_board >= 0 || now < p->next_query_ns)
			continue;
		p->next_query_ns = now + omx__cfg.host_query_ns;
		struct omx_pkt q;
		memset(&q, 0, sizeof(q));
		memcpy(q.dst_mac, p->mac, 6);
		memcpy(q.src_mac, b->iface.mac, 6);
		q.peer_index = p->reverse_index[b->index];
		q.ptype = OMX_PT_HOST_QUERY;
		q.u.host.src_dst_peer_index = (uint16_t)i;
		q.u.host.magic = omx__g.host_query_magic;
		omx__send_frame(ep, &q, OMX_C_SEND_HOST_QUERY);
	}
	discovery_due(ep, now);
	pthread_mutex_unlock(&omx__g.lock);
}

/* ---- dynamic discovery (wire.md 12, in the library instead of the omxoed daemon) ----
 *
 * Every process with discovery on broadcasts the omxoed RAW frame on its boards: at the first
 * endpoint open, 8 times 1 s apart, then every 180 s, and 8 fast ones again whenever it hears an
 * unknown host or a known one with a new serial (restarted). A host heard from is added to the
 * table without a name, so host queries (wire.md 11) fetch it.
 *
 * Peer indexes go on the wire, so every process of the host must number peers alike: discovered
 * peers are kept in a host-wide append-only file, <OMX_LOCK_DIR>/omx-discovered.peers, one
 * "xx:xx:xx:xx:xx:xx" line per peer (first appearance = order of the indexes after the local
 * boards and OMX_PEERS), and "xx:xx:xx:xx:xx:xx hostname" lines when a name is learnt. A process
 * adds the file's peers, in order, before adding one itself (under flock). */

#define DISCOVERY_FAST 8
#define DISCOVERY_FAST_NS 1000000000ull
#define DISCOVERY_SLOW_NS 180000000000ull

static int discovery_mode = 0; /* 0 off, 1 on */
static uint32_t discovery_serial;
static uint32_t *peer_serial; /* last serial heard per peer index */
static uint32_t peer_serial_len;
static struct {
	int fast_left;
	uint64_t next_ns;
} bcast[OMX_BOARD_MAX];
static off_t synced_size;
static uint64_t next_sync_ns;

int omx__discovery_enabled(void)
{
	return discovery_mode && !omx__test_memnet();
}

static void discovery_path(char *buf, size_t len)
{
	snprintf(buf, len, "%s/omx-discovered.peers", omx__lock_dir());
}

static int parse_mac_word(const char *s, uint8_t mac[6], const char **rest)
{
	unsigned v[6];
	int n = 0;
	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &n) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	*rest = s + n;
	return 0;
}

/* Read the file (fd at any offset) into the table; omx__g.lock held. */
static void sync_fd(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return;
	FILE *f = fdopen(dup(fd), "r");
	if (!f)
		return;
	rewind(f);
	char line[160];
	while (fgets(line, sizeof(line), f)) {
		uint8_t mac[6];
		const char *rest;
		if (parse_mac_word(line, mac, &rest) < 0)
			continue;
		uint64_t nic = omx_mac_to_nic_id(mac);
		int idx = omx__peer_by_nic_id(nic);
		if (idx < 0) {
			idx = omx__peer_add(nic, NULL);
			if (idx < 0)
				break; /* full */
			omx__g.peers_configured = 1;
		}
		char name[OMX_HOSTNAME_MAX];
		if (sscanf(rest, " %79s", name) == 1 && omx__g.peers[idx].local_board < 0)
			omx__strcpy(omx__g.peers[idx].hostname, OMX_HOSTNAME_MAX, name);
	}
	fclose(f);
	synced_size = st.st_size;
}

static int open_locked(void)
{
	char path[512];
	discovery_path(path, sizeof(path));
	int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

void omx__discovery_sync(void)
{
	if (!omx__discovery_enabled())
		return;
	int fd = open_locked();
	if (fd < 0)
		return;
	sync_fd(fd);
	close(fd);
}

static void append(int fd, const char *line)
{
	size_t n = strlen(line);
	if (write(fd, line, n) != (ssize_t)n)
		omx__verbose("cannot record a discovered peer: %s\n", strerror(errno));
}

/* Add a discovered MAC (and the file's earlier peers); index or -1. omx__g.lock held. */
static int discovery_add(const uint8_t mac[6])
{
	int fd = open_locked();
	if (fd >= 0)
		sync_fd(fd);
	int idx = omx__peer_by_mac(mac);
	if (idx < 0) {
		idx = omx__peer_add(omx_mac_to_nic_id(mac), NULL);
		if (idx >= 0 && fd >= 0) {
			char line[32];
			snprintf(line, sizeof(line), "%02x:%02x:%02x:%02x:%02x:%02x\n", mac[0], mac[1], mac[2], mac[3],
				 mac[4], mac[5]);
			append(fd, line);
		}
		if (idx < 0)
			omx__warn("peer table full (%u entries): discovered host not added\n", omx__cfg.peer_max);
	}
	if (fd >= 0)
		close(fd);
	if (idx >= 0)
		omx__g.peers_configured = 1;
	return idx;
}

static void discovery_name(const struct omx_peer *p)
{
	if (p->local_board >= 0 || !p->hostname[0])
		return;
	int fd = open_locked();
	if (fd < 0)
		return;
	char line[128];
	snprintf(line, sizeof(line), "%02x:%02x:%02x:%02x:%02x:%02x %s\n", p->mac[0], p->mac[1], p->mac[2], p->mac[3],
		 p->mac[4], p->mac[5], p->hostname);
	append(fd, line);
	close(fd);
}

static void discovery_init(void)
{
	const char *v = omx__getenv("OMX_DISCOVERY", NULL);
	const char *peers = omx__getenv("OMX_PEERS", NULL);
	if (!v || !*v || !strcmp(v, "auto"))
		discovery_mode = !(peers && *peers);
	else
		discovery_mode = strcmp(v, "0") != 0 && strcmp(v, "off") != 0 && strcmp(v, "no") != 0;
	if (getrandom(&discovery_serial, sizeof(discovery_serial), 0) != sizeof(discovery_serial))
		discovery_serial = (uint32_t)(omx_now_ns() ^ (uint64_t)getpid());
	free(peer_serial);
	peer_serial_len = omx__cfg.peer_max;
	peer_serial = calloc(peer_serial_len, sizeof(*peer_serial));
	for (int i = 0; i < OMX_BOARD_MAX; i++)
		bcast[i].fast_left = DISCOVERY_FAST, bcast[i].next_ns = 0;
	synced_size = 0;
	next_sync_ns = 0;
	omx__discovery_sync();
}

static void send_discovery(struct omx_endpoint *ep)
{
	struct omx_pkt q;
	memset(&q, 0, sizeof(q));
	memset(q.dst_mac, 0xff, 6);
	q.peer_index = 0;
	q.ptype = OMX_PT_RAW;
	q.u.raw.nic_id = ep->board->nic_id;
	q.u.raw.serial = discovery_serial;
	omx__send_frame(ep, &q, OMX_C_X_DISCOVERY_SENT);
}

/* From omx__host_queries_due (omx__g.lock held). */
static void discovery_due(struct omx_endpoint *ep, uint64_t now)
{
	if (!omx__discovery_enabled() || ep->board_index >= OMX_BOARD_MAX)
		return;
	if (now >= next_sync_ns) {
		/* Peers other processes of the host discovered. */
		next_sync_ns = now + DISCOVERY_FAST_NS;
		char path[512];
		struct stat st;
		discovery_path(path, sizeof(path));
		if (stat(path, &st) == 0 && st.st_size != synced_size)
			omx__discovery_sync();
	}
	if (now < bcast[ep->board_index].next_ns)
		return;
	send_discovery(ep);
	if (bcast[ep->board_index].fast_left > 0)
		bcast[ep->board_index].fast_left--;
	bcast[ep->board_index].next_ns = now + (bcast[ep->board_index].fast_left ? DISCOVERY_FAST_NS : DISCOVERY_SLOW_NS);
}

void omx__handle_discovery(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	if (!omx__discovery_enabled() || !pkt->u.raw.nic_id)
		return;
	omx__count(ep->board, OMX_C_X_DISCOVERY_RECV);
	uint8_t mac[6];
	omx_nic_id_to_mac(pkt->u.raw.nic_id, mac);
	if (!omx_wire_mac_eq(mac, pkt->src_mac))
		return; /* forged or relayed: the sender must be the announced board */
	pthread_mutex_lock(&omx__g.lock);
	int idx = omx__peer_by_nic_id(pkt->u.raw.nic_id);
	int restart = 0;
	if (idx >= 0 && omx__g.peers[idx].local_board >= 0) {
		pthread_mutex_unlock(&omx__g.lock);
		return; /* one of our own boards */
	}
	if (idx < 0) {
		idx = discovery_add(mac);
		if (idx >= 0)
			omx__count(ep->board, OMX_C_X_DISCOVERY_ADDED);
		restart = 1;
	}
	if (idx >= 0 && (uint32_t)idx < peer_serial_len) {
		if (peer_serial[idx] && peer_serial[idx] != pkt->u.raw.serial)
			restart = 1;
		peer_serial[idx] = pkt->u.raw.serial;
	}
	if (restart && ep->board_index < OMX_BOARD_MAX) {
		/* Announce ourselves quickly to the newcomer. */
		bcast[ep->board_index].fast_left = DISCOVERY_FAST;
		bcast[ep->board_index].next_ns = 0;
		ep->next_host_query_check = 0;
	}
	pthread_mutex_unlock(&omx__g.lock);
}

int omx__discovery_complete(void)
{
	if (!omx__discovery_enabled())
		return 1;
	for (uint32_t i = 0; i < omx__g.peer_count; i++)
		if (omx__g.peers[i].present && !omx__g.peers[i].hostname[0])
			return 0;
	return 1;
}
