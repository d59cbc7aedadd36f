/*
 * xdp_pingpong.c - AF_XDP baseline for the question of issue 6's small-message targets: is there a
 * cheaper kernel path than AF_PACKET for a user-space Ethernet protocol on veth?
 *   server: xdp_pingpong -i <iface> <sizes>     client: xdp_pingpong -i <iface> -d <peer MAC> <sizes>
 * The same frames and protocol as raw_pingpong (Ethernet header, 4-byte big-endian payload length,
 * EtherType 0x88B5; the server learns the client's MAC from its first frame), moved by an AF_XDP
 * socket on queue 0 of the interface: a six-instruction XDP program attached in driver mode
 * (veth runs XDP natively) redirects every frame the interface receives to the socket (frames of
 * other EtherTypes are ignored by the receive loop), copy mode (veth has no zero-copy), busy
 * polling of the receive ring, one sendto() per transmitted frame to kick the copy-mode transmit.
 * No library: the BPF program, its map and its link, the socket's rings and its memory area are set
 * up with the system calls of <linux/bpf.h> and <linux/if_xdp.h>. Busy mode only (-w: poll()
 * before each receive). Frames hold at most XDP_FRAME - 256 bytes (one chunk of the area; no
 * multi-buffer frames), so messages are cut to that size whatever the MTU.
 * Needs root (CAP_BPF + CAP_NET_ADMIN + CAP_NET_RAW). The program is detached when the process
 * exits (its link is a file descriptor).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pp_common.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

#define XDP_ETHERTYPE 0x88B5
#define XDP_HDR 18 /* 14 Ethernet + 4 length */
#define XDP_FRAME 4096u
#define XDP_FRAMES 4096u /* half for receiving, half for sending */
#define XDP_RING 2048u

struct ring {
	uint32_t *producer, *consumer;
	void *desc;
	uint32_t mask;
};

static struct {
	int map_fd, prog_fd, link_fd;
	uint8_t *area;
	struct ring fill, comp, rx, tx;
	uint32_t tx_next; /* next transmit chunk (round robin over the second half) */
	uint32_t tx_inflight;
	unsigned char hdr[XDP_HDR];
	int have_peer;
	size_t max_payload;
} X;

static long sys_bpf(int cmd, union bpf_attr *a)
{
	return syscall(__NR_bpf, cmd, a, sizeof(*a));
}

/* return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS); */
static int load_program(int ifindex)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_XSKMAP;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = 64;
	if ((X.map_fd = (int)sys_bpf(BPF_MAP_CREATE, &a)) < 0)
		pp_die("BPF_MAP_CREATE (XSKMAP): %s", strerror(errno));
	struct bpf_insn insns[] = {
		{ .code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = 2, .src_reg = 1, .off = offsetof(struct xdp_md, rx_queue_index) },
		{ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = 1, .src_reg = BPF_PSEUDO_MAP_FD, .imm = X.map_fd },
		{ .code = 0 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 3, .imm = XDP_PASS },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_redirect_map },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	static char log[4096];
	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_XDP;
	/* veth refuses a program without multi-buffer support when its MTU does not fit a page
	 * (ERANGE at MTU 9000); ours never looks past the first buffer. */
	a.prog_flags = BPF_F_XDP_HAS_FRAGS;
	a.insns = (uint64_t)(uintptr_t)insns;
	a.insn_cnt = sizeof(insns) / sizeof(insns[0]);
	a.license = (uint64_t)(uintptr_t) "GPL";
	a.log_buf = (uint64_t)(uintptr_t)log;
	a.log_size = sizeof(log);
	a.log_level = 1;
	if ((X.prog_fd = (int)sys_bpf(BPF_PROG_LOAD, &a)) < 0)
		pp_die("BPF_PROG_LOAD: %s\n%s", strerror(errno), log);
	memset(&a, 0, sizeof(a));
	a.link_create.prog_fd = (uint32_t)X.prog_fd;
	a.link_create.target_ifindex = (uint32_t)ifindex;
	a.link_create.attach_type = BPF_XDP;
	a.link_create.flags = XDP_FLAGS_DRV_MODE;
	if ((X.link_fd = (int)sys_bpf(BPF_LINK_CREATE, &a)) < 0)
		pp_die("attaching the XDP program in driver mode: %s", strerror(errno));
	return 0;
}

static void *map_ring(int fd, uint64_t pgoff, const struct xdp_ring_offset *o, size_t entry, struct ring *r)
{
	size_t len = o->desc + XDP_RING * entry;
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, (off_t)pgoff);
	if (m == MAP_FAILED)
		pp_die("mmap of an XDP ring: %s", strerror(errno));
	r->producer = (uint32_t *)(m + o->producer);
	r->consumer = (uint32_t *)(m + o->consumer);
	r->desc = m + o->desc;
	r->mask = XDP_RING - 1;
	return m;
}

static int xdp_open(struct pp_conn *c, const struct pp_opts *o)
{
	if (!o->iface)
		pp_die("-i <iface> is required");
	int ifindex = (int)if_nametoindex(o->iface);
	if (!ifindex)
		pp_die("no interface %s", o->iface);
	int fd = socket(AF_XDP, SOCK_RAW, 0);
	if (fd < 0)
		pp_die("socket(AF_XDP): %s", strerror(errno));
	c->fd = fd;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", o->iface);
	int ufd = socket(AF_INET, SOCK_DGRAM, 0);
	if (ufd < 0 || ioctl(ufd, SIOCGIFMTU, &ifr) < 0)
		pp_die("MTU of %s: %s", o->iface, strerror(errno));
	size_t mtu_payload = (size_t)ifr.ifr_mtu - 4, chunk_payload = XDP_FRAME - 256 - XDP_HDR;
	X.max_payload = mtu_payload < chunk_payload ? mtu_payload : chunk_payload;
	if (ioctl(ufd, SIOCGIFHWADDR, &ifr) < 0)
		pp_die("MAC of %s: %s", o->iface, strerror(errno));
	close(ufd);
	memcpy(X.hdr + 6, ifr.ifr_hwaddr.sa_data, 6);
	X.hdr[12] = XDP_ETHERTYPE >> 8;
	X.hdr[13] = XDP_ETHERTYPE & 0xff;
	if (o->dest) {
		if (pp_parse_mac(o->dest, X.hdr) < 0)
			pp_die("bad MAC address '%s'", o->dest);
		X.have_peer = 1;
	}

	size_t area_len = (size_t)XDP_FRAMES * XDP_FRAME;
	X.area = mmap(NULL, area_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (X.area == MAP_FAILED)
		pp_die("mmap of the frame area: %s", strerror(errno));
	struct xdp_umem_reg mr = { .addr = (uint64_t)(uintptr_t)X.area, .len = area_len, .chunk_size = XDP_FRAME };
	if (setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &mr, sizeof(mr)) < 0)
		pp_die("XDP_UMEM_REG: %s", strerror(errno));
	int n = XDP_RING;
	if (setsockopt(fd, SOL_XDP, XDP_UMEM_FILL_RING, &n, sizeof(n)) < 0 ||
	    setsockopt(fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &n, sizeof(n)) < 0 ||
	    setsockopt(fd, SOL_XDP, XDP_RX_RING, &n, sizeof(n)) < 0 || setsockopt(fd, SOL_XDP, XDP_TX_RING, &n, sizeof(n)) < 0)
		pp_die("XDP ring sizes: %s", strerror(errno));
	struct xdp_mmap_offsets off;
	socklen_t olen = sizeof(off);
	if (getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &olen) < 0)
		pp_die("XDP_MMAP_OFFSETS: %s", strerror(errno));
	map_ring(fd, XDP_UMEM_PGOFF_FILL_RING, &off.fr, sizeof(uint64_t), &X.fill);
	map_ring(fd, XDP_UMEM_PGOFF_COMPLETION_RING, &off.cr, sizeof(uint64_t), &X.comp);
	map_ring(fd, XDP_PGOFF_RX_RING, &off.rx, sizeof(struct xdp_desc), &X.rx);
	map_ring(fd, XDP_PGOFF_TX_RING, &off.tx, sizeof(struct xdp_desc), &X.tx);
	/* The first half of the area receives: every chunk goes to the fill ring now. */
	uint64_t *fill = X.fill.desc;
	for (uint32_t i = 0; i < XDP_RING; i++)
		fill[i] = (uint64_t)i * XDP_FRAME;
	__atomic_store_n(X.fill.producer, XDP_RING, __ATOMIC_RELEASE);
	struct sockaddr_xdp sx = { .sxdp_family = AF_XDP, .sxdp_ifindex = (uint32_t)ifindex, .sxdp_queue_id = 0,
				   .sxdp_flags = XDP_COPY };
	if (bind(fd, (struct sockaddr *)&sx, sizeof(sx)) < 0)
		pp_die("binding the AF_XDP socket to %s queue 0 (copy mode): %s", o->iface, strerror(errno));
	load_program(ifindex);
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	uint32_t key = 0, val = (uint32_t)fd;
	a.map_fd = (uint32_t)X.map_fd;
	a.key = (uint64_t)(uintptr_t)&key;
	a.value = (uint64_t)(uintptr_t)&val;
	if (sys_bpf(BPF_MAP_UPDATE_ELEM, &a) < 0)
		pp_die("adding the socket to the XSKMAP: %s", strerror(errno));
	return 0;
}

/* Completed transmissions give their chunks back (we only count them: chunks are reused in
 * order, and at most XDP_RING - 1 are in flight). */
static void reap_completions(void)
{
	uint32_t prod = __atomic_load_n(X.comp.producer, __ATOMIC_ACQUIRE), cons = *X.comp.consumer;
	if (prod != cons) {
		X.tx_inflight -= prod - cons;
		__atomic_store_n(X.comp.consumer, prod, __ATOMIC_RELEASE);
	}
}

static int xdp_send(struct pp_conn *c, const void *buf, size_t len)
{
	size_t off = 0;
	if (!X.have_peer) {
		errno = ENOTCONN;
		return -1;
	}
	do {
		size_t n = len - off > X.max_payload ? X.max_payload : len - off;
		reap_completions();
		while (X.tx_inflight >= XDP_RING - 1) {
			(void)sendto(c->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
			reap_completions();
		}
		uint64_t addr = (uint64_t)(XDP_RING + X.tx_next) * XDP_FRAME;
		X.tx_next = (X.tx_next + 1) % (XDP_FRAMES - XDP_RING);
		uint8_t *f = X.area + addr;
		uint32_t be = htonl((uint32_t)n);
		memcpy(X.hdr + 14, &be, 4);
		memcpy(f, X.hdr, XDP_HDR);
		memcpy(f + XDP_HDR, (const char *)buf + off, n);
		size_t flen = XDP_HDR + n < 60 ? 60 : XDP_HDR + n;
		uint32_t prod = *X.tx.producer;
		struct xdp_desc *d = &((struct xdp_desc *)X.tx.desc)[prod & X.tx.mask];
		d->addr = addr;
		d->len = (uint32_t)flen;
		d->options = 0;
		__atomic_store_n(X.tx.producer, prod + 1, __ATOMIC_RELEASE);
		X.tx_inflight++;
		/* Copy mode transmits only when told to. */
		while (sendto(c->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && (errno == EAGAIN || errno == EBUSY || errno == ENOBUFS))
			reap_completions();
		off += n;
	} while (off < len);
	return 0;
}

static int xdp_recv(struct pp_conn *c, void *buf, size_t len)
{
	size_t off = 0;
	int got = 0; /* one of our frames (a 0-byte message is one empty frame) */
	do {
		uint32_t cons = *X.rx.consumer, prod;
		unsigned long spins = 0;
		while ((prod = __atomic_load_n(X.rx.producer, __ATOMIC_ACQUIRE)) == cons) {
			if (c->blocking) {
				struct pollfd p = { c->fd, POLLIN, 0 };
				if (poll(&p, 1, PP_TIMEOUT_S * 1000) == 0) {
					errno = ETIMEDOUT;
					return -1;
				}
			} else if (++spins == 4000000000ul) {
				errno = ETIMEDOUT;
				return -1;
			}
		}
		const struct xdp_desc *d = &((const struct xdp_desc *)X.rx.desc)[cons & X.rx.mask];
		const uint8_t *f = X.area + d->addr;
		size_t flen = d->len;
		if (flen >= XDP_HDR && f[12] == (XDP_ETHERTYPE >> 8) && f[13] == (XDP_ETHERTYPE & 0xff)) {
			uint32_t be, n;
			memcpy(&be, f + 14, 4);
			n = ntohl(be);
			if (n <= flen - XDP_HDR && n <= len - off) {
				memcpy((char *)buf + off, f + XDP_HDR, n);
				off += n;
				got = 1;
				if (!X.have_peer) {
					memcpy(X.hdr, f + 6, 6);
					X.have_peer = 1;
				}
			}
		}
		/* The chunk goes back to the fill ring (its base: copy mode may add headroom). */
		uint32_t fp = *X.fill.producer;
		((uint64_t *)X.fill.desc)[fp & X.fill.mask] = d->addr & ~(uint64_t)(XDP_FRAME - 1);
		__atomic_store_n(X.fill.producer, fp + 1, __ATOMIC_RELEASE);
		__atomic_store_n(X.rx.consumer, cons + 1, __ATOMIC_RELEASE);
	} while (!got || off < len);
	return 0;
}

static void xdp_close(struct pp_conn *c)
{
	if (X.link_fd > 0)
		close(X.link_fd);
	if (c->fd >= 0)
		close(c->fd);
}

int main(int argc, char **argv)
{
	static const struct pp_ops ops = { "xdp", xdp_open, NULL, xdp_send, xdp_recv, xdp_close };
	return pp_main(argc, argv, &ops);
}
