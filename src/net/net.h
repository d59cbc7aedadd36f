/*
 * net.h - how frames move. The core only sees this interface: open a transport for
 * (interface, endpoint), send whole frames, receive bursts of frames as zero-copy views,
 * and a file descriptor to sleep on. Implementations: AF_PACKET (packet.c), an in-memory hub
 * for unit tests (mem.c), and a fault-injecting wrapper around either (fault.c).
 */
#ifndef OMX_NET_H
#define OMX_NET_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct omx_iface_info {
	char name[IF_NAMESIZE];
	int ifindex;
	uint8_t mac[6];
	uint32_t mtu; /* interface (L3) MTU as the kernel reports it */
	int up;       /* IFF_UP and IFF_RUNNING */
	int loopback; /* IFF_LOOPBACK */
	int numa_node;           /* -1 if unknown */
	char driver[32];         /* kernel driver name, "" if unknown */
};

/* Look an interface up by name (ioctl/sysfs). Returns 0 or -errno (-ENODEV if missing). */
int omx_iface_query(const char *name, struct omx_iface_info *out);

struct omx_net;

/* Receive callback: frame is a view valid only during the call (points into the RX ring). */
typedef void (*omx_net_rx_fn)(void *arg, const uint8_t *frame, size_t len);
/*
 * Split receive (AF_PACKET with opts.rx_split): a frame longer than the ring slots leaves only its
 * head in the ring and waits whole in the socket (no copy in the kernel's receive path). The
 * owner's split_fn (struct omx_net; same arg as recv_burst) is offered the head and may read the
 * frame with omx_net_split_read into buffers of its choice (a payload straight to its final
 * place) and return 1; if it returns 0 the transport reads the frame into a bounce buffer and
 * delivers it to the ordinary callback. A frame returned 1 for but not read is dropped.
 */
struct omx_net_split;
typedef int (*omx_net_split_fn)(void *arg, const uint8_t *head, size_t head_len, size_t frame_len,
				struct omx_net_split *s);
/* Read the whole frame into iov (once): its length, or -errno; -EPROTO if the frame waiting was
 * not the one the head belongs to (nothing usable was read; the transport resynchronises). */
long omx_net_split_read(struct omx_net_split *s, const struct iovec *iov, unsigned iovcnt);

/* One frame of a batch: its bytes gathered from iov[0..iovcnt). */
struct omx_net_frame {
	struct iovec iov[2];
	unsigned iovcnt;
};
#define OMX_NET_BATCH_MAX 32u

struct omx_net_ops {
	/* Send one complete frame (Ethernet header included) gathered from iov. Frames shorter than
	 * 60 bytes are padded by the caller (the wire encoder does it). 0 or -errno; -EAGAIN/-ENOBUFS
	 * mean "try again later" and the core treats it as a loss (retransmission recovers). */
	int (*send)(struct omx_net *n, const struct iovec *iov, unsigned iovcnt);
	/* Deliver up to max received frames to fn, in arrival order. Returns the count (0 if none). */
	int (*recv_burst)(struct omx_net *n, omx_net_rx_fn fn, void *arg, unsigned max);
	/* Earliest time (CLOCK_MONOTONIC ns) the transport needs recv_burst called again even with
	 * no fd activity (fault wrapper holding delayed frames); 0 if none. May be NULL. */
	uint64_t (*next_deadline)(struct omx_net *n);
	void (*close)(struct omx_net *n);
	/* May be NULL. Called with sleeping=1 just before the owner sleeps on fd (returns 1 if work
	 * is already waiting: do not sleep), and with 0 after it woke; fd_ready (when sleeping=0):
	 * whether the sleep may have found fd readable (0 only when it reported fd idle). */
	int (*prepare_sleep)(struct omx_net *n, int sleeping, int fd_ready);
	/* May be NULL (the caller then sends frame by frame). Send up to OMX_NET_BATCH_MAX frames in
	 * one system call; returns how many it sent (always the first ones), or -errno as send. */
	int (*send_batch)(struct omx_net *n, const struct omx_net_frame *f, unsigned count);
};

struct omx_net {
	const struct omx_net_ops *ops;
	int fd;          /* readable (POLLIN) when recv_burst has work */
	/* A second descriptor to poll along fd, or -1. Two descriptors, not an epoll set over them:
	 * an epoll entry stays on each socket's wait queue, so every frame received, awake or not,
	 * would run the epoll callback in the sender's softirq. */
	int fd2;
	uint8_t mac[6];  /* source MAC for frames we send */
	uint32_t mtu;    /* interface MTU (frames may be up to mtu + 14 bytes) */
	int ifindex;
	omx_net_split_fn split_fn; /* set by the owner, or NULL: split frames go through a bounce buffer */
	/* The owner's latest omx_now_coarse_ns() reading, kept current by the owner, or 0: a
	 * transport's own coarse deadlines use it instead of reading the clock on every send. */
	uint64_t coarse_ns;
};

struct omx_net_opts {
	unsigned rx_ring_frames; /* TPACKET_V2 ring slots; 0 = default */
	int qdisc_bypass;        /* PACKET_QDISC_BYPASS; default on */
	int all_endpoints;       /* receive every 0x86DF frame of the board (tools, raw endpoints) */
	int nack_responder;      /* receive NACKable frames for endpoints not open (filter not locked) */
	const char *broker_path; /* omxd socket to ask when we may not open packet sockets; NULL: none */
	int broker_always;       /* ask the broker even with CAP_NET_RAW */
	unsigned rx_split;       /* ring slots hold this many bytes of a frame (longer ones are split:
				  * see omx_net_split_fn); < 256 or >= the MTU: whole frames. Only for
				  * sockets opened directly (not through omxd) */
	unsigned rx_pull_split;  /* >= 256: PULL_REPLY frames go to a second socket whose slots hold
				  * this many bytes (split as above), every other frame whole into the
				  * first; also only directly. 0: off */
	int rx_pull_adaptive;    /* with rx_pull_split: the second socket takes the pull replies only
				  * while omx_net_packet_pull_lane says so (the first one otherwise) */
	unsigned rx_medium_split; /* with rx_pull_split: MEDIUM fragments of messages longer than this
				   * (bytes) go to the second socket too (extended wire mode only); 0: none */
	int filter_mode;         /* internal: 0 every frame for the endpoint, 1 all but those of the
				  * second socket, 2 only those (PULL_REPLY, large MEDIUM) */
};

/*
 * AF_PACKET transport for one endpoint of one interface: SOCK_RAW bound to EtherType 0x86DF on
 * ifindex, TPACKET_V2 RX ring mmapped, classic BPF filter accepting only our EtherType and frames
 * for `endpoint` (omx_wire_frame_endpoint rule) plus HOST_QUERY/HOST_REPLY/RAW, filter locked
 * (SO_LOCK_FILTER), PACKET_QDISC_BYPASS, outgoing frames not looped back.
 * Returns NULL with *err = -errno (-EPERM without CAP_NET_RAW, -ENODEV no interface).
 */
struct omx_net *omx_net_packet_open(const char *ifname, uint8_t endpoint, const struct omx_net_opts *opts,
				    int *err);

/* The pieces of omx_net_packet_open that the broker (omxd) runs on behalf of a client: ring
 * geometry for an MTU (want_frames 0 = default), its validation (bounded size, slots that fit a
 * frame), and a socket with the locked per-endpoint filter (checking the interface index too, so
 * re-binding it elsewhere shows nothing), TPACKET_V2 ring configured, bound. fd or -errno. */
struct tpacket_req;
int omx_net_packet_ring_req(uint32_t mtu, unsigned want_frames, struct tpacket_req *req);
int omx_net_packet_ring_req_valid(const struct tpacket_req *req, uint32_t mtu);
int omx_net_packet_socket(int ifindex, uint8_t endpoint, const struct omx_net_opts *opts, const struct tpacket_req *req);

/* Ask omxd at broker_path for such a socket (net/broker.c). Returns the socket or -errno:
 * -ENOENT/-ECONNREFUSED no broker, -EACCES/-EPERM refused, -EBUSY endpoint granted elsewhere.
 * *conn receives the connection, which holds the grant until closed. */
int omx_net_broker_request(const char *broker_path, const char *ifname, uint8_t endpoint,
			   const struct omx_net_opts *opts, const struct tpacket_req *req, int *conn);
/* Why the broker last refused a request of this thread ("" if it never did). */
const char *omx_net_broker_last_refusal(void);
void omx_net_broker_forget_refusal(void);

/* Frames lost by the kernel on this packet transport (ring full: PACKET_STATISTICS tp_drops) or
 * truncated in the ring, since open. Only for handles returned by omx_net_packet_open. */
uint64_t omx_net_packet_drops(struct omx_net *n);
/* With opts.rx_pull_adaptive: pull replies (and large mediums) from now on to the second socket,
 * split (split=1), or whole into the first one's ring (0). 1 switched, 0 already so, -errno
 * (-EOPNOTSUPP: not an adaptive handle). */
int omx_net_packet_pull_lane(struct omx_net *n, int split);

/* Same-host frames: a Unix datagram socket named after (board MAC, endpoint) in the abstract
 * namespace of the network namespace, plus (opts->shared) a shared-memory receive ring (shm/).
 * send() routes by the frame's destination MAC + endpoint: into the destination's ring when it
 * has one, else to its socket; an endpoint nobody has open gives -ECONNREFUSED or -ENOENT. */
struct omx_net_local_opts {
	int shared;          /* create a shared-memory ring and use peers' rings */
	uint32_t ring_bytes; /* ring size */
	uint32_t session;
	int lock;            /* lock our ring in memory (omx_shm_ring_lock) */
};
struct omx_net *omx_net_local_open(const uint8_t mac[6], uint32_t mtu, uint8_t endpoint,
				   const struct omx_net_local_opts *opts, int *err);
struct omx_shm_ring;
/* Our ring (NULL if frames go over the socket only) and a same-host peer's ring (attached on
 * demand; NULL if it has none). For single-copy exports and reads (shm/shm.h). */
struct omx_shm_ring *omx_net_local_own_ring(struct omx_net *n);
struct omx_shm_ring *omx_net_local_peer_ring(struct omx_net *n, const uint8_t mac[6], uint8_t endpoint);
/* 1 if the same-host endpoint instance `session` is certainly gone (its ring closed, its owner
 * dead or replaced, or nobody bound to its socket); 0 if it seems alive. */
int omx_net_local_peer_gone(struct omx_net *n, const uint8_t mac[6], uint8_t endpoint, uint32_t session);
/* A same-host destination's route, kept by the caller (zeroed to start): omx_net_local_send_routed
 * then finds the destination's ring without parsing the frame and looking the peer up, as long as
 * the route holds (the peer's entry not reused, its ring attached and its owner's liveness
 * checked recently); otherwise it sends as send() does and renews the route. */
struct omx_net_local_route {
	void *peer;
	uint32_t gen;
};
int omx_net_local_send_routed(struct omx_net *n, struct omx_net_local_route *rt, const uint8_t mac[6], uint8_t endpoint,
			      const struct iovec *iov, unsigned iovcnt);
/* omx_net_local_peer_ring through a route that omx_net_local_send_routed keeps (the ring's
 * lookup by address: ~45 instructions of a same-host single copy). */
struct omx_shm_ring *omx_net_local_peer_ring_routed(struct omx_net *n, const struct omx_net_local_route *rt,
						   const uint8_t mac[6], uint8_t endpoint);
struct omx_net_local_stats {
	uint64_t ring_frames, socket_frames; /* frames sent each way */
	uint64_t ring_skipped;               /* slots of dead producers skipped in our ring */
	int ring_error;                      /* -errno if our ring could not be created */
	int ring_lock_error;                 /* -errno if it could not be locked in memory */
};
void omx_net_local_stats(struct omx_net *n, struct omx_net_local_stats *out);

/* NACK responder socket: frames for endpoints in open[] are no longer delivered to it. */
int omx_net_packet_set_open_endpoints(struct omx_net *n, const uint8_t *open, unsigned count);

/*
 * In-memory hub for tests: transports attached to one hub see each other's frames, routed by
 * destination MAC (broadcast to all) and by omx_wire_frame_endpoint(). Thread-safe. Frames are
 * copied on send; each transport's fd is an eventfd readable while frames are queued.
 */
struct omx_memnet;
struct omx_memnet *omx_memnet_create(void);
void omx_memnet_destroy(struct omx_memnet *hub); /* after every transport on it is closed */
struct omx_net *omx_net_mem_open(struct omx_memnet *hub, const uint8_t mac[6], uint32_t mtu, uint8_t endpoint);
/* Hub-wide counters. A frame longer than mtu + 14 is refused by the sender's send (-EMSGSIZE, as
 * the kernel does) and silently dropped before a receiver with a smaller MTU; both count in
 * dropped_mtu. Each transport queues at most 8192 frames (more: dropped_overflow). Frames that
 * reach no transport count in dropped_noroute. delivered counts per receiving transport. */
struct omx_memnet_stats {
	uint64_t sent, delivered, dropped_mtu, dropped_overflow, dropped_noroute;
};
void omx_memnet_stats(struct omx_memnet *hub, struct omx_memnet_stats *out);
/* Calls fn for every frame sent on the hub (under the hub lock; fn must not send). NULL: off. */
void omx_memnet_set_tap(struct omx_memnet *hub, omx_net_rx_fn fn, void *arg);

/*
 * Fault injection (tests only, off by default). Applied to frames on send. Rates are
 * probabilities in [0,1]. Deterministic for a given seed.
 *   drop      - frame silently discarded
 *   dup       - frame sent twice
 *   reorder   - frame held back and sent after the next frame (or at the next deadline)
 *   delay_us  - with probability `delay`, frame held for delay_us microseconds
 * Parsed from strings like "drop=0.05,dup=0.01,reorder=0.1,delay=0.02,delay_us=2000,seed=7"
 * (the OMX_FAULT environment variable).
 */
struct omx_fault_spec {
	double drop, dup, reorder, delay;
	double refuse; /* frames refused as a full queue refuses them: send() returns -EAGAIN */
	uint32_t delay_us;
	uint64_t seed;
};
struct omx_fault_stats {
	uint64_t sent, dropped, duplicated, reordered, delayed, refused;
};
int omx_fault_spec_parse(const char *str, struct omx_fault_spec *out); /* 0 or -EINVAL */
/* Wraps inner (takes ownership; closing the wrapper closes inner). */
struct omx_net *omx_net_fault_wrap(struct omx_net *inner, const struct omx_fault_spec *spec);
void omx_net_fault_stats(struct omx_net *wrapped, struct omx_fault_stats *out);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t omx_now_ns(void);
uint64_t omx_now_coarse_ns(void); /* CLOCK_MONOTONIC_COARSE: a few ms resolution, much cheaper */

#endif
