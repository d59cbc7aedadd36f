/*
 * omxd - the privilege broker (design.md, docs/security.md).
 *
 * Opening an AF_PACKET socket needs CAP_NET_RAW. omxd, started by the administrator, hands an
 * unprivileged process a packet socket scoped to one endpoint of one interface: the kernel
 * filter (only that endpoint's frames, only that interface) is attached and locked before the
 * socket is bound, so the process can neither widen nor replace it. The process must already
 * hold the endpoint's slot lock (the flock'd file the library takes at open, in omxd's lock
 * directory): that is what makes the endpoint "its own". Credentials come from SO_PEERCRED.
 * Everything is bounded: clients, grants per user, ring memory per socket, time to send a request.
 *
 * omxd also answers, for every board it serves, the frames sent to endpoints nobody has open
 * (the library's NACK responder, which needs a whole-board socket an unprivileged process cannot
 * have), so senders learn at once that an endpoint is closed; and it follows the host's
 * discovered-peers file so that the peers it answers are the ones the host knows (-N: do not).
 *
 *   omxd [-f] [-v] [-s socket] [-i ifaces] [-l lockdir] [-g group] [-m max] [-h]
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "open-mx.h"
#include "core/core.h"
#include "core/counters.h"
#include "net/broker.h"
#include "net/net.h"

#define MAX_CLIENTS 1024
#define REQUEST_TIMEOUT_MS 5000
#define MAX_IFACES 16

struct client {
	int fd;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int granted;
	int ifindex;
	uint32_t endpoint;
	size_t got;
	uint64_t deadline_ms;
	struct omx_broker_request rq;
};

static struct {
	const char *sock_path;
	const char *lock_dir;
	char ifaces[MAX_IFACES][IF_NAMESIZE];
	int nifaces;
	int have_group;
	gid_t group;
	unsigned max_per_user;
	int verbose;
	int no_responder;
} cfg;

static struct client clients[MAX_CLIENTS];
static int nclients;
static volatile sig_atomic_t stop;
static unsigned long n_granted, n_refused;

static __attribute__((format(printf, 1, 2))) void logmsg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("omxd: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static uint64_t now_ms(void)
{
	return omx_now_ns() / 1000000u;
}

static void on_signal(int s)
{
	(void)s;
	stop = 1;
}

static int iface_allowed(const char *name)
{
	if (!cfg.nifaces)
		return 1;
	for (int i = 0; i < cfg.nifaces; i++)
		if (!strcmp(cfg.ifaces[i], name))
			return 1;
	return 0;
}

/* Root, or the configured group as primary or supplementary group of the caller. */
static int user_allowed(const struct client *c)
{
	if (c->uid == 0 || !cfg.have_group || c->gid == cfg.group)
		return 1;
	struct passwd *pw = getpwuid(c->uid);
	if (!pw)
		return 0;
	gid_t groups[256];
	int n = 256;
	if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) < 0)
		return 0;
	for (int i = 0; i < n; i++)
		if (groups[i] == cfg.group)
			return 1;
	return 0;
}

static unsigned grants_of(uid_t uid)
{
	unsigned n = 0;
	for (int i = 0; i < nclients; i++)
		n += clients[i].granted && clients[i].uid == uid;
	return n;
}

static const struct client *grant_holder(int ifindex, uint32_t endpoint)
{
	for (int i = 0; i < nclients; i++)
		if (clients[i].granted && clients[i].ifindex == ifindex && clients[i].endpoint == endpoint)
			return &clients[i];
	return NULL;
}

static void send_reply(struct client *c, int status, int sock, const char *why)
{
	struct omx_broker_reply rep;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&rep, 0, sizeof(rep));
	memset(&ctl, 0, sizeof(ctl));
	rep.magic = OMX_BROKER_MAGIC;
	rep.status = status;
	snprintf(rep.message, sizeof(rep.message), "%s", why ? why : "");
	struct iovec iov = {.iov_base = &rep, .iov_len = sizeof(rep)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (sock >= 0) {
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &sock, sizeof(int));
	}
	(void)sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

#define REFUSE(err, ...)                                  \
	do {                                              \
		snprintf(why, whylen, __VA_ARGS__);           \
		return err;                                   \
	} while (0)

/* Checks a complete request; 0 and the socket in *sock, or -errno and the reason in why. */
static int check_and_open(struct client *c, int *sock, char *why, size_t whylen)
{
	struct omx_broker_request *rq = &c->rq;
	struct omx_iface_info info;
	*sock = -1;
	if (rq->magic != OMX_BROKER_MAGIC || rq->version != OMX_BROKER_VERSION)
		REFUSE(-EPROTO, "bad request (magic/version)");
	rq->ifname[sizeof(rq->ifname) - 1] = 0;
	if (!user_allowed(c))
		REFUSE(-EACCES, "uid %u is not in the broker's group", (unsigned)c->uid);
	if (!iface_allowed(rq->ifname) || omx_iface_query(rq->ifname, &info) < 0)
		REFUSE(-ENODEV, "interface %s is not served by this broker", rq->ifname);
	if ((rq->flags & (OMX_BROKER_F_ALL_ENDPOINTS | OMX_BROKER_F_NACK_RESPONDER)) && c->uid != 0)
		REFUSE(-EPERM, "whole-board sockets (raw endpoints, tools) are for root only");
	if (rq->endpoint > 255 || (rq->endpoint == 255 && !(rq->flags & OMX_BROKER_F_ALL_ENDPOINTS)))
		REFUSE(-EINVAL, "endpoint %u out of range", rq->endpoint);
	if (omx_net_packet_ring_req_valid(&rq->ring, info.mtu) < 0)
		REFUSE(-EINVAL, "receive ring geometry refused (at most 256 MiB)");
	if (c->uid != 0) {
		char path[PATH_MAX];
		const uint8_t *m = info.mac;
		snprintf(path, sizeof(path), "%s/omx-%02x%02x%02x%02x%02x%02x-%u.lock", cfg.lock_dir, m[0], m[1], m[2],
			 m[3], m[4], m[5], rq->endpoint);
		if (omx__flock_holder(path) != c->pid)
			REFUSE(-EACCES, "pid %d does not hold the slot lock %.100s (same OMX_LOCK_DIR as omxd?)",
					(int)c->pid, path);
		const struct client *h = grant_holder(info.ifindex, rq->endpoint);
		if (h && h != c)
			REFUSE(-EBUSY, "endpoint granted to pid %d", (int)h->pid);
		if (grants_of(c->uid) >= cfg.max_per_user)
			REFUSE(-EMFILE, "uid %u already holds %u endpoints (limit)", (unsigned)c->uid,
					cfg.max_per_user);
	}
	struct omx_net_opts o;
	memset(&o, 0, sizeof(o));
	o.qdisc_bypass = !!(rq->flags & OMX_BROKER_F_QDISC_BYPASS);
	o.all_endpoints = !!(rq->flags & OMX_BROKER_F_ALL_ENDPOINTS);
	o.nack_responder = !!(rq->flags & OMX_BROKER_F_NACK_RESPONDER);
	int s = omx_net_packet_socket(info.ifindex, (uint8_t)rq->endpoint, &o, &rq->ring);
	if (s < 0)
		REFUSE(s, "packet socket: %s", strerror(-s));
	c->ifindex = info.ifindex;
	c->endpoint = rq->endpoint;
	*sock = s;
	return 0;
}

static void drop_client(int i)
{
	if (clients[i].granted && cfg.verbose)
		logmsg("released %s endpoint %u of pid %d\n", clients[i].rq.ifname, clients[i].endpoint, (int)clients[i].pid);
	close(clients[i].fd);
	clients[i] = clients[--nclients];
}

/* Returns 0 to keep the client, -1 to drop it. */
static int client_input(struct client *c)
{
	if (c->granted) {
		char b;
		ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT);
		return n < 0 && (errno == EAGAIN || errno == EINTR) ? 0 : -1; /* EOF or junk: release */
	}
	ssize_t n = recv(c->fd, (char *)&c->rq + c->got, sizeof(c->rq) - c->got, MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (n == 0)
		return -1;
	c->got += (size_t)n;
	if (c->got < sizeof(c->rq))
		return 0;
	char why[200] = "";
	int sock;
	int r = check_and_open(c, &sock, why, sizeof(why));
	if (r < 0) {
		n_refused++;
		logmsg("refused uid %u pid %d (%s endpoint %u): %s\n", (unsigned)c->uid, (int)c->pid, c->rq.ifname,
		       c->rq.endpoint, why);
		send_reply(c, r, -1, why);
		return -1;
	}
	send_reply(c, 0, sock, NULL);
	close(sock); /* the client holds it now */
	c->granted = 1;
	n_granted++;
	if (cfg.verbose)
		logmsg("granted %s endpoint %u to uid %u pid %d\n", c->rq.ifname, c->endpoint, (unsigned)c->uid, (int)c->pid);
	return 0;
}

static void accept_client(int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (nclients >= MAX_CLIENTS || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
		if (nclients >= MAX_CLIENTS)
			logmsg("too many clients (%d): connection refused\n", MAX_CLIENTS);
		close(fd);
		return;
	}
	struct client *c = &clients[nclients++];
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->pid = cr.pid;
	c->uid = cr.uid;
	c->gid = cr.gid;
	c->deadline_ms = now_ms() + REQUEST_TIMEOUT_MS;
}

static int listen_socket(void)
{
	struct sockaddr_un a;
	if (strlen(cfg.sock_path) >= sizeof(a.sun_path)) {
		logmsg("socket path too long: %s\n", cfg.sock_path);
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	strcpy(a.sun_path, cfg.sock_path);
	/* Parent directory (e.g. /run/omx) on demand. */
	char dir[sizeof(a.sun_path)];
	strcpy(dir, cfg.sock_path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		(void)mkdir(dir, 0755);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	/* A socket file nobody answers on is stale (a previous omxd died): replace it. */
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
		logmsg("another omxd is already serving %s\n", cfg.sock_path);
		close(fd);
		return -1;
	}
	(void)unlink(cfg.sock_path);
	close(fd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
		logmsg("cannot listen on %s: %s\n", cfg.sock_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/* Everyone may connect (requests are checked); with -g only the group. */
	if (cfg.have_group) {
		if (chown(cfg.sock_path, 0, cfg.group) < 0 || chmod(cfg.sock_path, 0660) < 0)
			logmsg("warning: cannot restrict %s to the group: %s\n", cfg.sock_path, strerror(errno));
	} else if (chmod(cfg.sock_path, 0666) < 0) {
		logmsg("warning: chmod %s: %s\n", cfg.sock_path, strerror(errno));
	}
	return fd;
}

/* The library, initialised as a process with no endpoint: boards and peer table, for the NACK
 * responder. Its lock directory must be ours; it must never ask a broker (itself). */
static int responder_init(const char *ifaces)
{
	setenv("OMX_LOCK_DIR", cfg.lock_dir, 1);
	setenv("OMX_BROKER", "none", 1);
	if (ifaces && *ifaces)
		setenv("OMX_IFACES", ifaces, 1);
	setenv("OMX_FATAL_ERRORS", "0", 1);
	if (omx_init() != OMX_SUCCESS) {
		logmsg("warning: library initialisation failed: closed endpoints are not NACKed by omxd\n");
		return 0;
	}
	logmsg("answering for closed endpoints of the served boards\n");
	return 1;
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: omxd [options]\n"
		     " -f          stay in the foreground (default: detach)\n"
		     " -s <path>   listening socket [$OMX_BROKER or " OMX_BROKER_DEFAULT_PATH "]\n"
		     " -i <ifs>    comma-separated interfaces to serve [$OMX_IFACES or all]\n"
		     " -l <dir>    endpoint slot lock directory [$OMX_LOCK_DIR or /dev/shm]\n"
		     " -g <group>  only root and members of this group may use the broker\n"
		     " -m <n>      endpoints per non-root user at most [64]\n"
		     " -N          do not answer for closed endpoints (NACK responder)\n"
		     " -v          log every grant and release\n"
		     " -h          this help\n");
}

static int parse_ifaces(const char *list)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (cfg.nifaces == MAX_IFACES || strlen(t) >= IF_NAMESIZE)
			return -1;
		strcpy(cfg.ifaces[cfg.nifaces++], t);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int foreground = 0, opt;
	const char *env;
	cfg.sock_path = (env = getenv("OMX_BROKER")) && *env ? env : OMX_BROKER_DEFAULT_PATH;
	cfg.lock_dir = (env = getenv("OMX_LOCK_DIR")) && *env ? env : "/dev/shm";
	cfg.max_per_user = 64;
	const char *ifaces = getenv("OMX_IFACES");
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		}
	while ((opt = getopt(argc, argv, "fs:i:l:g:m:vNh")) != -1) {
		switch (opt) {
		case 'f': foreground = 1; break;
		case 's': cfg.sock_path = optarg; break;
		case 'i': ifaces = optarg; break;
		case 'l': cfg.lock_dir = optarg; break;
		case 'g': {
			struct group *g = getgrnam(optarg);
			if (!g) {
				fprintf(stderr, "omxd: unknown group %s\n", optarg);
				return 1;
			}
			cfg.have_group = 1;
			cfg.group = g->gr_gid;
			break;
		}
		case 'm': {
			char *end;
			unsigned long m = strtoul(optarg, &end, 0);
			if (*end || !m || m > MAX_CLIENTS) {
				fprintf(stderr, "omxd: -m wants a number of endpoints in 1..%d\n", MAX_CLIENTS);
				return 1;
			}
			cfg.max_per_user = (unsigned)m;
			break;
		}
		case 'v': cfg.verbose = 1; break;
		case 'N': cfg.no_responder = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (ifaces && *ifaces && parse_ifaces(ifaces) < 0) {
		fprintf(stderr, "omxd: bad interface list '%s'\n", ifaces);
		return 1;
	}
	if (geteuid() != 0)
		logmsg("warning: not running as root: packet sockets will probably be refused\n");
	int lfd = listen_socket();
	if (lfd < 0)
		return 1;
	if (!foreground && daemon(0, 1) < 0) {
		logmsg("daemon: %s\n", strerror(errno));
		return 1;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	logmsg("serving %s (lock dir %s, interfaces %s)\n", cfg.sock_path, cfg.lock_dir,
	       cfg.nifaces ? ifaces : "all");

	int responder = !cfg.no_responder && responder_init(ifaces);
	static struct pollfd pfds[MAX_CLIENTS + 1 + OMX_BOARD_MAX];
	uint64_t next_sync = 0;
	while (!stop) {
		pfds[0].fd = lfd;
		pfds[0].events = POLLIN;
		for (int i = 0; i < nclients; i++) {
			pfds[i + 1].fd = clients[i].fd;
			pfds[i + 1].events = POLLIN;
			pfds[i + 1].revents = 0;
		}
		nfds_t nfds = (nfds_t)nclients + 1;
		if (responder) {
			int rfds[OMX_BOARD_MAX];
			unsigned nr = omx__responder_serve(rfds, OMX_BOARD_MAX);
			for (unsigned k = 0; k < nr; k++)
				pfds[nfds++] = (struct pollfd){ .fd = rfds[k], .events = POLLIN };
			if (now_ms() >= next_sync) { /* peers that processes of the host discovered */
				next_sync = now_ms() + 1000;
				pthread_mutex_lock(&omx__g.lock);
				omx__discovery_sync();
				pthread_mutex_unlock(&omx__g.lock);
			}
		}
		/* 100 ms: the responder re-reads which endpoints are open at that pace. */
		int n = poll(pfds, nfds, responder ? 100 : 1000);
		if (n < 0 && errno != EINTR)
			break;
		uint64_t now = now_ms();
		/* Walk backwards: drop_client moves the last client into the freed slot. */
		for (int i = nclients - 1; i >= 0; i--) {
			short rev = n > 0 ? pfds[i + 1].revents : 0;
			int drop = 0;
			if (rev & (POLLIN | POLLHUP | POLLERR))
				drop = client_input(&clients[i]) < 0;
			if (!drop && !clients[i].granted && now > clients[i].deadline_ms)
				drop = 1; /* never sent a whole request */
			if (drop)
				drop_client(i);
		}
		if (n > 0 && (pfds[0].revents & POLLIN))
			accept_client(lfd);
	}
	logmsg("exiting: %lu granted, %lu refused\n", n_granted, n_refused);
	if (responder)
		omx_finalize();
	while (nclients)
		drop_client(nclients - 1);
	close(lfd);
	unlink(cfg.sock_path);
	return 0;
}
