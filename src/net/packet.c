/*
 * packet.c - AF_PACKET transport: one SOCK_RAW socket per endpoint, bound to EtherType 0x86DF on
 * one interface, with a TPACKET_V2 RX ring (the ring is the endpoint's receive queue), a locked
 * classic BPF filter that lets through only the frames for this endpoint (plus the board-wide
 * HOST_QUERY/HOST_REPLY/RAW types), PACKET_IGNORE_OUTGOING and PACKET_QDISC_BYPASS.
 *
 * Ordering matters: the socket is created with protocol 0 (no packet hook registered, nothing
 * can be queued), the filter and the ring are set up, and only then bind() registers the hook for
 * 0x86DF on the interface. No unfiltered frame can get in; the receive queue is drained anyway.
 *
 * Not thread-safe per handle (the ring head is plain state): the core calls it under the
 * endpoint lock. send() may be called from the receive callback.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>

#include "net/net.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif
#ifndef SO_LOCK_FILTER
#define SO_LOCK_FILTER 44
#endif

#define OMX_ETH_P 0x86DF
#define OMX_ETH_HLEN 14
/* Default ring size target (bytes); at least OMX_RING_MIN_FRAMES frames in any case. */
#define OMX_RING_DEFAULT_BYTES (2u << 20)
#define OMX_RING_MIN_FRAMES 64u
#define OMX_RING_MAX_BYTES (256u << 20)

/* Packet types the filter knows (wire.md 4). */
#define PT_RAW 1
#define PT_HOST_QUERY 3
#define PT_HOST_REPLY 4
#define PT_MEDIUM 39
#define PT_PULL_REPLY 42
#define PT_NACK_LIB 44

struct omx_net_packet {
	struct omx_net base;
	int sock;
	uint8_t *ring;
	size_t ring_len;
	unsigned frame_size;
	unsigned frames_per_block;
	unsigned block_size;
	unsigned frame_nr;
	unsigned head;
	struct tpacket2_hdr *head_slot; /* pkt_slot(head): an empty poll is one load, no division */
	uint64_t drops;     /* kernel drops (PACKET_STATISTICS tp_drops), accumulated */
	uint64_t truncated; /* frames that did not fit their ring slot */
	int broker_fd;      /* connection to omxd that holds our grant, or -1 */
	struct sockaddr_ll dst;
	/* split receive (opts.rx_split) */
	int split;
	uint8_t *bounce;        /* a whole frame, for split frames the owner does not place */
	/* pull replies split (opts.rx_pull_split): a second transport of this type, with small slots,
	 * whose filter takes only our PULL_REPLY frames (ours then takes everything else whole);
	 * its socket is then base.fd2 */
	struct omx_net_packet *pull;
	/* adaptive (opts.rx_pull_adaptive): which socket takes the pull replies is switched at run
	 * time (omx_net_packet_pull_lane); the filters are rebuilt from these */
	int adaptive, lane_split;
	uint8_t endpoint;
	uint32_t medium_split;
};

struct omx_net_split {
	struct omx_net_packet *p;
	const uint8_t *head; /* the frame's head in the ring */
	size_t head_len, frame_len;
	int read;            /* 1 read, -1 failed (resync needed) */
};

static struct omx_net_packet *to_pkt(struct omx_net *n)
{
	return (struct omx_net_packet *)n;
}

static unsigned align_up(unsigned v, unsigned a)
{
	return (v + a - 1) / a * a;
}

static void pkt_stats_update(struct omx_net_packet *p)
{
	struct tpacket_stats st;
	socklen_t len = sizeof(st);
	/* Reading the statistics resets them in the kernel (and clears TP_STATUS_LOSING). */
	if (getsockopt(p->sock, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
		p->drops += st.tp_drops;
}

uint64_t omx_net_packet_drops(struct omx_net *n)
{
	struct omx_net_packet *p = to_pkt(n);
	pkt_stats_update(p);
	return p->drops + p->truncated + (p->pull ? omx_net_packet_drops(&p->pull->base) : 0);
}

static inline struct tpacket2_hdr *pkt_slot(struct omx_net_packet *p, unsigned idx)
{
	unsigned blk = idx / p->frames_per_block, in = idx % p->frames_per_block;
	return (struct tpacket2_hdr *)(p->ring + (size_t)blk * p->block_size + (size_t)in * p->frame_size);
}

/* Throw away every frame waiting in the socket (after a mismatch between ring and socket). */
static void split_resync(struct omx_net_packet *p)
{
	while (recv(p->sock, NULL, 0, MSG_DONTWAIT | MSG_TRUNC) >= 0)
		;
}

long omx_net_split_read(struct omx_net_split *s, const struct iovec *iov, unsigned iovcnt)
{
	if (s->read)
		return -EALREADY;
	struct msghdr msg;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = (struct iovec *)iov;
	msg.msg_iovlen = iovcnt;
	ssize_t n;
	do
		n = recvmsg(s->p->sock, &msg, MSG_DONTWAIT | MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	s->read = -1;
	if (n < 0)
		return -errno;
	/* The socket must hold the frame whose head the ring showed: same length, same first bytes. */
	uint8_t first[64];
	size_t k = s->head_len < sizeof(first) ? s->head_len : sizeof(first), got = 0;
	for (unsigned i = 0; i < iovcnt && got < k; i++) {
		size_t m = iov[i].iov_len < k - got ? iov[i].iov_len : k - got;
		memcpy(first + got, iov[i].iov_base, m);
		got += m;
	}
	if ((size_t)n != s->frame_len || got < k || memcmp(first, s->head, k))
		return -EPROTO;
	s->read = 1;
	return (long)n;
}

/* A split frame: offer it to the owner, or read it into the bounce buffer and deliver it. */
static int split_deliver(struct omx_net_packet *p, const uint8_t *head, size_t head_len, size_t frame_len,
			 omx_net_rx_fn fn, void *arg)
{
	struct omx_net_split s = { p, head, head_len, frame_len, 0 };
	int taken = p->base.split_fn && p->base.split_fn(arg, head, head_len, frame_len, &s);
	if (s.read == 1)
		return 1;
	if (s.read < 0) { /* a mismatch (or a failed read): start again from an empty socket */
		split_resync(p);
		return 0;
	}
	if (taken) { /* not wanted: drop it */
		(void)recv(p->sock, NULL, 0, MSG_DONTWAIT | MSG_TRUNC);
		return 1;
	}
	struct iovec iov = { p->bounce, p->base.mtu + OMX_ETH_HLEN + 4 };
	if (omx_net_split_read(&s, &iov, 1) < 0) {
		split_resync(p);
		return 0;
	}
	fn(arg, p->bounce, frame_len);
	return 1;
}

/* The kernel wrote the frame on the sending CPU (veth's receive path runs in the sender's
 * softirq): ask for all its lines as soon as the slot is seen, so their transfers overlap each
 * other and the header's decoding instead of coming one by one. Bounded: a copy-out of a large
 * frame streams by itself. */
#define PREFETCH_RX_MAX_BYTES 1024u
static inline void prefetch_frame(const uint8_t *frame, uint32_t len)
{
	uintptr_t a = (uintptr_t)frame & ~(uintptr_t)63;
	uintptr_t end = (uintptr_t)frame + (len < PREFETCH_RX_MAX_BYTES ? len : PREFETCH_RX_MAX_BYTES);
	for (; a < end; a += 64)
		__builtin_prefetch((const void *)a, 0, 3);
}

static __attribute__((noinline)) int pkt_recv_frames(struct omx_net_packet *p, omx_net_rx_fn fn, void *arg,
							 unsigned max)
{
	int count = 0, losing = 0;

	while ((unsigned)count < max) {
		struct tpacket2_hdr *h = p->head_slot;
		uint32_t status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
		if (!(status & TP_STATUS_USER))
			break;
		if (status & TP_STATUS_LOSING)
			losing = 1;
		const uint8_t *frame = (const uint8_t *)h + h->tp_mac;
		if ((size_t)h->tp_mac + h->tp_snaplen > p->frame_size) {
			p->truncated++; /* malformed slot: never expected */
		} else if (status & TP_STATUS_COPY) {
			/* Split: the head here, the whole frame in the socket. */
			if (p->split && h->tp_snaplen >= OMX_ETH_HLEN && h->tp_len <= p->base.mtu + OMX_ETH_HLEN + 4 &&
			    split_deliver(p, frame, h->tp_snaplen, h->tp_len, fn, arg))
				count++;
			else
				p->truncated++;
		} else if (h->tp_snaplen < h->tp_len) {
			/* Truncated without a copy (socket buffer full, or not splitting): lost. */
			p->truncated++;
		} else {
			prefetch_frame(frame, h->tp_snaplen);
			fn(arg, frame, h->tp_snaplen);
			count++;
		}
		/* Hand the slot back only after fn is done reading it. */
		__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
		p->head = p->head + 1 == p->frame_nr ? 0 : p->head + 1;
		p->head_slot = pkt_slot(p, p->head);
	}
	if (losing)
		pkt_stats_update(p);
	return count;
}

/* Most polls find the ring empty: that answer costs a load, not the frame loop's set-up. */
static int pkt_recv_burst(struct omx_net *n, omx_net_rx_fn fn, void *arg, unsigned max)
{
	struct omx_net_packet *p = to_pkt(n);
	int count = 0;
	if (__atomic_load_n(&p->head_slot->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER)
		count = pkt_recv_frames(p, fn, arg, max);
	if (p->pull && (unsigned)count < max) {
		p->pull->base.split_fn = p->base.split_fn;
		count += pkt_recv_burst(&p->pull->base, fn, arg, max - (unsigned)count);
	}
	return count;
}

static int pkt_send(struct omx_net *n, const struct iovec *iov, unsigned iovcnt)
{
	struct omx_net_packet *p = to_pkt(n);
	struct msghdr msg;

	memset(&msg, 0, sizeof(msg));
	msg.msg_name = &p->dst;
	msg.msg_namelen = sizeof(p->dst);
	msg.msg_iov = (struct iovec *)iov;
	msg.msg_iovlen = iovcnt;
	for (;;) {
		ssize_t r = sendmsg(p->sock, &msg, MSG_DONTWAIT);
		if (r >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

/* Pull replies leave in blocks: one sendmmsg for a block saves ~500 ns a frame on the AMD VM
 * (20-30% of a frame's kernel path there, docs/performance.md stop 19). */
static int pkt_send_batch(struct omx_net *n, const struct omx_net_frame *f, unsigned count)
{
	struct omx_net_packet *p = to_pkt(n);
	struct mmsghdr m[OMX_NET_BATCH_MAX];
	if (count > OMX_NET_BATCH_MAX)
		count = OMX_NET_BATCH_MAX;
	memset(m, 0, sizeof(m[0]) * count);
	for (unsigned i = 0; i < count; i++) {
		m[i].msg_hdr.msg_name = &p->dst;
		m[i].msg_hdr.msg_namelen = sizeof(p->dst);
		m[i].msg_hdr.msg_iov = (struct iovec *)f[i].iov;
		m[i].msg_hdr.msg_iovlen = f[i].iovcnt;
	}
	for (;;) {
		int r = sendmmsg(p->sock, m, count, MSG_DONTWAIT);
		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

static void pkt_close(struct omx_net *n)
{
	struct omx_net_packet *p = to_pkt(n);
	if (!p)
		return;
	if (p->ring && p->ring != MAP_FAILED)
		munmap(p->ring, p->ring_len);
	if (p->sock >= 0)
		close(p->sock);
	if (p->broker_fd >= 0)
		close(p->broker_fd);
	if (p->pull)
		pkt_close(&p->pull->base);
	free(p->bounce);
	free(p);
}

static const struct omx_net_ops pkt_ops = {
	.send = pkt_send,
	.recv_burst = pkt_recv_burst,
	.next_deadline = NULL,
	.close = pkt_close,
	.send_batch = pkt_send_batch,
};

/*
 * The classic BPF program. Accept (whole frame) iff EtherType 0x86DF, the frame was not for
 * another host (PACKET_OTHERHOST, e.g. a bridge flooding unknown unicast), and either
 * all_endpoints, or ptype is RAW/HOST_QUERY/HOST_REPLY, or the endpoint byte matches:
 * byte 25 for NACK_LIB, byte 31 ^ 0x80 for PULL_REPLY, byte 17 otherwise. Loads past the end of
 * the frame make the kernel return 0 (drop), which covers short frames.
 */
/*
 * The NACK responder's filter: frames of the NACKable types (CONNECT..PULL except PULL_REPLY, and
 * NOTIFY; byte 17 = destination endpoint) whose endpoint is NOT in open[0..count). Rebuilt when
 * the set of open endpoints of the board changes, so live endpoints' traffic never reaches it.
 * Needs 11 + count instructions.
 */
static unsigned build_nack_filter(struct sock_filter *f, const uint8_t *open, unsigned count)
{
	unsigned i = 0, drop = 10 + count;
#define JD(from) ((uint8_t)(drop - (from) - 1))
	f[i] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SKF_AD_OFF + SKF_AD_PKTTYPE), i++;
	f[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OTHERHOST, JD(i), 0), i++;
	f[i] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12), i++;
	f[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, OMX_ETH_P, 0, JD(i)), i++;
	f[i] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 16), i++;
	f[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 36, 0, JD(i)), i++;
	f[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 43, JD(i), 0), i++;
	f[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PT_PULL_REPLY, JD(i), 0), i++;
	f[i] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 17), i++;
	for (unsigned k = 0; k < count; k++, i++)
		f[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, open[k], JD(i), 0);
	f[i] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xFFFFFFFFu), i++;
	f[i] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0), i++;
#undef JD
	return i;
}

int omx_net_packet_set_open_endpoints(struct omx_net *n, const uint8_t *open, unsigned count)
{
	struct omx_net_packet *p = to_pkt(n);
	struct sock_filter insns[11 + 256];
	if (count > 256)
		return -EINVAL;
	struct sock_fprog prog = {.len = (unsigned short)build_nack_filter(insns, open, count), .filter = insns};
	if (setsockopt(p->sock, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0)
		return -errno;
	return 0;
}

/* mode (omx_net_opts.filter_mode): 0 every frame for ep, 1 the same but PULL_REPLY and the MEDIUM
 * fragments of messages longer than medium_split bytes (0: none), 2 only those of ep's frames,
 * 3 nothing (an adaptive pull-reply socket while the first one takes them). */
static unsigned build_filter(struct sock_filter *f, uint8_t ep, int all, int ifindex, int mode, uint32_t medium_split)
{
	unsigned i = 0;
	if (mode == 3) {
		f[0] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
		return 1;
	}
	/* Instruction indexes, fixed so that jump offsets can be computed by hand. */
	enum {
		L_PKTTYPE = 0, /* ld pkttype */
		L_OTHER,       /* jeq OTHERHOST -> drop */
		L_IFX,         /* ld ifindex */
		L_IFXCHK,      /* jeq ifindex, next, drop (a re-bound socket sees no other interface) */
		L_ETH,         /* ldh [12] */
		L_ETHCHK,      /* jeq 0x86DF, next, drop */
		L_PTYPE,       /* ldb [16] */
		L_RAW,         /* jeq 1 -> accept */
		L_HQ,          /* jeq 3 -> accept */
		L_HR,          /* jeq 4 -> accept */
		L_NL,          /* jeq 44 -> nacklib */
		L_PR,          /* jeq 42 -> pullreply */
		L_MED,         /* jeq 39 (MEDIUM) -> message length, else mode 2 drop, others [17] */
		L_MLEN,        /* ld [20] (message length, extended wire mode) */
		L_MCHK,        /* jgt medium_split: mode 2 -> [17] else drop; not: the reverse */
		L_LD17,        /* ldb [17] */
		L_CMP17,       /* jeq ep -> accept, drop */
		L_LD25,        /* nacklib: ldb [25] */
		L_CMP25,       /* jeq ep -> accept, drop */
		L_LD31,        /* pullreply: ldb [31] */
		L_CMP31,       /* jeq ep^0x80 -> accept, drop */
		L_ACCEPT,      /* ret -1 */
		L_DROP,        /* ret 0 */
		L_COUNT
	};
#define J(from, to) ((uint8_t)((to) - (from) - 1))
	if (all) {
		f[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SKF_AD_OFF + SKF_AD_PKTTYPE);
		f[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OTHERHOST, 3, 0);
		f[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12);
		f[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, OMX_ETH_P, 0, 1);
		f[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xFFFFFFFFu);
		f[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
		return i;
	}
	f[L_PKTTYPE] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SKF_AD_OFF + SKF_AD_PKTTYPE);
	f[L_OTHER] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OTHERHOST, J(L_OTHER, L_DROP), 0);
	f[L_IFX] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_IFINDEX);
	f[L_IFXCHK] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)ifindex, 0, J(L_IFXCHK, L_DROP));
	f[L_ETH] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12);
	f[L_ETHCHK] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, OMX_ETH_P, 0, J(L_ETHCHK, L_DROP));
	f[L_PTYPE] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 16);
	int only_pr = mode == 2;
	f[L_RAW] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PT_RAW, only_pr ? J(L_RAW, L_DROP) : J(L_RAW, L_ACCEPT), 0);
	f[L_HQ] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PT_HOST_QUERY, only_pr ? J(L_HQ, L_DROP) : J(L_HQ, L_ACCEPT), 0);
	f[L_HR] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PT_HOST_REPLY, only_pr ? J(L_HR, L_DROP) : J(L_HR, L_ACCEPT), 0);
	f[L_NL] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PT_NACK_LIB, only_pr ? J(L_NL, L_DROP) : J(L_NL, L_LD25), 0);
	f[L_PR] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PT_PULL_REPLY,
					       mode == 1 ? J(L_PR, L_DROP) : J(L_PR, L_LD31), 0);
	/* Large mediums go with the pull replies (mode 1 and 2 with medium_split): every other frame,
	 * and all of them in mode 0, to the endpoint check, but in mode 2. */
	int med = mode && medium_split;
	uint8_t not_med = only_pr ? J(L_MED, L_DROP) : J(L_MED, L_LD17);
	f[L_MED] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PT_MEDIUM, med ? 0 : not_med, not_med);
	f[L_MLEN] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 20);
	f[L_MCHK] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, medium_split,
						 only_pr ? J(L_MCHK, L_LD17) : J(L_MCHK, L_DROP),
						 only_pr ? J(L_MCHK, L_DROP) : J(L_MCHK, L_LD17));
	f[L_LD17] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 17);
	f[L_CMP17] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ep, J(L_CMP17, L_ACCEPT), J(L_CMP17, L_DROP));
	f[L_LD25] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 25);
	f[L_CMP25] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ep, J(L_CMP25, L_ACCEPT), J(L_CMP25, L_DROP));
	f[L_LD31] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 31);
	f[L_CMP31] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint8_t)(ep ^ 0x80), J(L_CMP31, L_ACCEPT),
						  J(L_CMP31, L_DROP));
	f[L_ACCEPT] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xFFFFFFFFu);
	f[L_DROP] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
#undef J
	return L_COUNT;
}

static int attach_filter(struct omx_net_packet *p, int sock, int mode)
{
	struct sock_filter insns[32];
	struct sock_fprog prog = { .len = (unsigned short)build_filter(insns, p->endpoint, 0, p->base.ifindex, mode,
									 p->medium_split),
				   .filter = insns };
	return setsockopt(sock, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0 ? -errno : 0;
}

int omx_net_packet_pull_lane(struct omx_net *n, int split)
{
	struct omx_net_packet *p = to_pkt(n);
	if (!p->pull || !p->adaptive)
		return -EOPNOTSUPP;
	if (!split == !p->lane_split)
		return 0;
	/* The socket that takes the pull replies over accepts them first, so that none is refused
	 * by both meanwhile; one accepted by both is a duplicate, which the pull drops. */
	int e = split ? attach_filter(p, p->pull->sock, 2) : attach_filter(p, p->sock, 0);
	if (!e)
		e = split ? attach_filter(p, p->sock, 1) : attach_filter(p, p->pull->sock, 3);
	if (e)
		return e;
	p->lane_split = !!split;
	return 1;
}

/* Choose slot and block geometry: slots hold a whole frame of mtu + header (+ a VLAN tag);
 * at least 64 slots, about 2 MiB by default, at most 256 MiB. */
int omx_net_packet_ring_req(uint32_t mtu, unsigned want_frames, struct tpacket_req *req)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned page = pg > 0 ? (unsigned)pg : 4096u;
	/* Where the kernel puts the MAC header in a V2 slot (SOCK_RAW, no reserve). */
	unsigned macoff = TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - OMX_ETH_HLEN;
	if (mtu > 65536)
		mtu = 65536;
	unsigned fsz = TPACKET_ALIGN(macoff + mtu + OMX_ETH_HLEN + 4);

	/* Frames per block: pick the count (1..16) that wastes the least of page-rounded blocks,
	 * keeping blocks small (<= 256 KiB unless one frame needs more): high-order allocations. */
	unsigned best_fpb = 1, best_bs = align_up(fsz, page);
	unsigned bs_max = best_bs > (256u << 10) ? best_bs : (256u << 10);
	double best_waste = 1.0 - (double)fsz / best_bs;
	for (unsigned k = 2; k <= 16; k++) {
		unsigned bs = align_up(fsz * k, page);
		if (bs > bs_max)
			break;
		unsigned fpb = bs / fsz;
		double waste = 1.0 - (double)(fpb * fsz) / bs;
		if (waste + 1e-9 < best_waste) {
			best_waste = waste;
			best_fpb = fpb;
			best_bs = bs;
		}
	}

	unsigned frames = want_frames ? want_frames : OMX_RING_DEFAULT_BYTES / fsz;
	if (frames < OMX_RING_MIN_FRAMES)
		frames = OMX_RING_MIN_FRAMES;
	unsigned blocks = (frames + best_fpb - 1) / best_fpb;
	if ((uint64_t)blocks * best_bs > OMX_RING_MAX_BYTES)
		blocks = OMX_RING_MAX_BYTES / best_bs; /* clamp (a frame is at most 64 KiB: >= 64 slots) */
	req->tp_block_size = best_bs;
	req->tp_block_nr = blocks;
	req->tp_frame_size = fsz;
	req->tp_frame_nr = blocks * best_fpb;
	return 0;
}

int omx_net_packet_ring_req_valid(const struct tpacket_req *req, uint32_t mtu)
{
	uint64_t bytes = (uint64_t)req->tp_block_size * req->tp_block_nr;
	if (!req->tp_block_size || !req->tp_frame_size || !req->tp_block_nr || bytes > OMX_RING_MAX_BYTES)
		return -EINVAL;
	/* Slots too small for a frame of the interface would only truncate: refuse (not a risk). */
	if (req->tp_frame_size < TPACKET_ALIGN(TPACKET2_HDRLEN + 16) + (mtu > 65536 ? 65536 : mtu))
		return -EINVAL;
	return 0;
}

int omx_net_packet_socket(int ifindex, uint8_t endpoint, const struct omx_net_opts *opts, const struct tpacket_req *req)
{
	int one = 1, ret;
	/* Protocol 0: no packet hook until bind(), so nothing unfiltered can be queued. */
	int sock = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -errno;

	struct sock_filter insns[32];
	struct sock_fprog prog = {.len = (unsigned short)build_filter(insns, endpoint, opts->all_endpoints, ifindex, opts->filter_mode,
								      opts->rx_medium_split),
				  .filter = insns};
	if (opts->nack_responder) /* no endpoint open yet: every NACKable frame; replaced later */
		prog.len = (unsigned short)build_nack_filter(insns, NULL, 0);
	if (setsockopt(sock, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0 ||
	    (!opts->nack_responder && !opts->rx_pull_adaptive &&
	     setsockopt(sock, SOL_SOCKET, SO_LOCK_FILTER, &one, sizeof(one)) < 0))
		goto fail;
	int ver = TPACKET_V2;
	if (setsockopt(sock, SOL_PACKET, PACKET_VERSION, &ver, sizeof(ver)) < 0)
		goto fail;
	/* Best effort: old kernels lack it; then our own frames are still skipped (skb->sk check). */
	(void)setsockopt(sock, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	if (opts->qdisc_bypass)
		(void)setsockopt(sock, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	struct tpacket_req r = *req;
	if (setsockopt(sock, SOL_PACKET, PACKET_RX_RING, &r, sizeof(r)) < 0)
		goto fail;
	struct sockaddr_ll sll;
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(OMX_ETH_P);
	sll.sll_ifindex = ifindex;
	if (bind(sock, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		goto fail;
	return sock;
fail:
	ret = -errno;
	close(sock);
	return ret;
}

/* A socket whose ring slots hold opts->rx_split bytes of a frame: longer frames are queued whole
 * on the socket as well (PACKET_COPY_THRESH: a reference, no copy) as long as its receive buffer
 * has room, which is sized like the ring would have been (SO_RCVBUFFORCE as root, else capped by
 * net.core.rmem_max). *req is updated to the geometry used. */
static int split_socket(int ifindex, uint8_t endpoint, const struct omx_net_opts *opts, struct tpacket_req *req,
			uint32_t mtu)
{
	struct tpacket_req sreq;
	omx_net_packet_ring_req(opts->rx_split, req->tp_frame_nr, &sreq);
	int sock = omx_net_packet_socket(ifindex, endpoint, opts, &sreq);
	if (sock < 0)
		return sock;
	int one = 1;
	int rcvbuf = (int)((uint64_t)req->tp_frame_nr * (mtu + 256u) > (1u << 30) ? (1u << 30) :
										  (uint64_t)req->tp_frame_nr * (mtu + 256u));
	if (setsockopt(sock, SOL_PACKET, PACKET_COPY_THRESH, &one, sizeof(one)) < 0) {
		close(sock);
		return -EOPNOTSUPP;
	}
	if (setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
		(void)setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	*req = sreq;
	return sock;
}

struct omx_net *omx_net_packet_open(const char *ifname, uint8_t endpoint, const struct omx_net_opts *opts,
				    int *err)
{
	struct omx_net_opts defopts = {.rx_ring_frames = 0, .qdisc_bypass = 1, .all_endpoints = 0};
	struct omx_iface_info info;
	struct omx_net_packet *p = NULL;
	struct tpacket_req req;
	int ret;

	if (!opts)
		opts = &defopts;
	omx_net_broker_forget_refusal();
	ret = omx_iface_query(ifname, &info);
	if (ret < 0)
		goto fail;
	p = calloc(1, sizeof(*p));
	if (!p) {
		ret = -ENOMEM;
		goto fail;
	}
	p->sock = -1;
	p->broker_fd = -1;
	p->ring = MAP_FAILED;
	omx_net_packet_ring_req(info.mtu, opts->rx_ring_frames, &req);
	struct omx_net_opts mine;
	if (opts->rx_pull_split >= 256 && opts->rx_pull_split < info.mtu && !opts->all_endpoints &&
	    !opts->nack_responder && !(opts->broker_path && opts->broker_always)) {
		/* Pull replies split on a socket of their own (opened directly, never through omxd);
		 * if that works, ours takes every other frame whole. */
		struct omx_net_opts po = *opts;
		po.rx_split = opts->rx_pull_split;
		po.rx_pull_split = 0;
		po.filter_mode = opts->rx_pull_adaptive ? 3 : 2; /* adaptive: the first socket's lane first */
		po.broker_path = NULL;
		struct omx_net *pn = omx_net_packet_open(ifname, endpoint, &po, NULL);
		if (pn && to_pkt(pn)->split) {
			p->pull = to_pkt(pn);
			mine = *opts;
			mine.rx_split = 0;
			mine.filter_mode = opts->rx_pull_adaptive ? 0 : 1;
			p->adaptive = opts->rx_pull_adaptive;
			p->lane_split = !p->adaptive;
			p->endpoint = endpoint;
			p->medium_split = opts->rx_medium_split;
			opts = &mine;
		} else {
			if (pn)
				pkt_close(pn);
			mine = *opts;
			mine.rx_pull_adaptive = 0; /* one socket: its filter is locked as usual */
			opts = &mine;
		}
	}

	/* Directly with CAP_NET_RAW; through the broker (omxd) without it, or always if asked. */
	if (opts->broker_path && opts->broker_always)
		ret = -EPERM;
	else if (opts->rx_split >= 256 && opts->rx_split < info.mtu &&
		 (ret = split_socket(info.ifindex, endpoint, opts, &req, info.mtu)) >= 0)
		p->split = 1;
	else
		ret = omx_net_packet_socket(info.ifindex, endpoint, opts, &req);
	/* Whole-board sockets are root's only: do not bother the broker when it would refuse. */
	int board_wide = opts->all_endpoints || opts->nack_responder;
	if ((ret == -EPERM || ret == -EACCES) && opts->broker_path && (!board_wide || geteuid() == 0)) {
		int b = omx_net_broker_request(opts->broker_path, ifname, endpoint, opts, &req, &p->broker_fd);
		if (b != -ENOENT || opts->broker_always)
			ret = b; /* no broker running: report the missing privilege, not the missing broker */
	}
	if (ret < 0)
		goto fail;
	p->sock = ret;

	p->frame_size = req.tp_frame_size;
	p->block_size = req.tp_block_size;
	p->frames_per_block = req.tp_block_size / req.tp_frame_size;
	p->frame_nr = req.tp_frame_nr;
	p->ring_len = (size_t)req.tp_block_size * req.tp_block_nr;
	p->ring = mmap(NULL, p->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, p->sock, 0);
	if (p->ring == MAP_FAILED) {
		ret = -errno;
		goto fail;
	}
	p->head_slot = pkt_slot(p, 0);
	if (p->split && !(p->bounce = malloc(info.mtu + OMX_ETH_HLEN + 4))) {
		ret = -ENOMEM;
		goto fail;
	}
	/* Belt and braces: nothing should be in the plain receive queue yet. */
	{
		uint8_t junk[64];
		while (recv(p->sock, junk, sizeof(junk), MSG_DONTWAIT | MSG_TRUNC) >= 0)
			;
	}
	pkt_stats_update(p);
	p->drops = 0;

	memset(&p->dst, 0, sizeof(p->dst));
	p->dst.sll_family = AF_PACKET;
	p->dst.sll_protocol = htons(OMX_ETH_P);
	p->dst.sll_ifindex = info.ifindex;
	p->dst.sll_halen = 6;
	p->base.ops = &pkt_ops;
	p->base.fd = p->sock;
	p->base.fd2 = p->pull ? p->pull->sock : -1;
	memcpy(p->base.mac, info.mac, 6);
	p->base.mtu = info.mtu;
	p->base.ifindex = info.ifindex;
	if (err)
		*err = 0;
	return &p->base;

fail:
	if (p)
		pkt_close(&p->base);
	if (err)
		*err = ret;
	return NULL;
}
