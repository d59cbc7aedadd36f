/*
 * omx_doctor.c - check the host for what omx needs or what slows it down.
 *
 *   omx_doctor [-b n] [-q] [-v] [-h]
 *
 * One line per check: "<pass|warn|fail|skip> <check>: <detail>". Exit status 255 if any check
 * failed (omx cannot work as configured), else 0. Checks: interface up, MTU for the wire mode
 * and jumbo frames, receive interrupt coalescing (ETHTOOL_GCOALESCE), NIC IRQ affinity against
 * OMX_PROCESS_BINDING, RPS/XPS steering, offloads, CAP_NET_RAW or a privilege broker, the lock
 * directory, Yama ptrace_scope (single copy), CPU idle states and frequency governor, the
 * same-host datagram queue length. OMX_PROC_DIR / OMX_SYS_DIR replace /proc and /sys (tests).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "omx_tool.h"
#include "core/core.h"
#include "core/testhooks.h"

#define PROG "omx_doctor"
#define HIGH_INTRCOAL_US 13
#define DEEP_CSTATE_US 20

static int quiet, verbose, fails, warns;
static const char *proc_dir = "/proc", *sys_dir = "/sys";

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: omx_doctor [options]\n"
		" -b <n>\tonly check board <n> [all]\n"
		" -q\tonly print warnings and failures\n"
		" -v\tverbose: more detail\n"
		" -h, --help\tshow this help\n"
		"Lines: pass|warn|fail|skip <check>: <detail>. Exit status 255 if a check failed.\n");
}

static void report(const char *level, const char *check, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(const char *level, const char *check, const char *fmt, ...)
{
	if (!strcmp(level, "fail"))
		fails++;
	else if (!strcmp(level, "warn"))
		warns++;
	else if (quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	printf("%s %s: ", level, check);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
}

/* First line of a file, trimmed; -1 if unreadable. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static int ethtool(const char *ifname, void *data)
{
	struct ifreq ifr;
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0), r;
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = data;
	r = ioctl(fd, SIOCETHTOOL, &ifr);
	int e = errno;
	close(fd);
	return r < 0 ? -e : 0;
}

static void check_mtu(const struct omx_board *b)
{
	char what[64];
	snprintf(what, sizeof(what), "mtu %s", b->iface.name);
	uint32_t mtu = b->frame_mtu;
	if (omx__cfg.mtu_override && omx__cfg.mtu_override < mtu)
		mtu = omx__cfg.mtu_override;
	struct omx_wire_params wp;
	if (omx_wire_params_init(&wp, omx__cfg.wire_mode, mtu) < 0) {
		report("fail", what, "MTU %" PRIu32 " too small for the %s wire mode (needs %u)", b->iface.mtu,
		       omx__cfg.wire_mode == OMX_WIRE_COMPAT ? "MX-compatible" : "extended",
		       omx__cfg.wire_mode == OMX_WIRE_COMPAT ? OMX_WIRE_COMPAT_MTU : OMX_WIRE_MTU_MIN);
		return;
	}
	if (b->iface.mtu < 9000)
		report("warn", what, "MTU %" PRIu32 ": works, but jumbo frames (MTU 9000) carry 6x more per frame",
		       b->iface.mtu);
	else
		report("pass", what, "MTU %" PRIu32 " (jumbo frames)", b->iface.mtu);
}

static void check_coalescing(const struct omx_board *b)
{
	char what[64];
	snprintf(what, sizeof(what), "interrupt coalescing %s", b->iface.name);
	struct ethtool_coalesce ec;
	memset(&ec, 0, sizeof(ec));
	ec.cmd = ETHTOOL_GCOALESCE;
	int r = ethtool(b->iface.name, &ec);
	if (r < 0) {
		report("skip", what, "not reported by the driver (%s)", strerror(-r));
		return;
	}
	if (ec.rx_coalesce_usecs >= HIGH_INTRCOAL_US || ec.use_adaptive_rx_coalesce)
		report("warn", what, "rx-usecs %u%s: adds latency to every message (ethtool -C %s rx-usecs 0 adaptive-rx off)",
		       ec.rx_coalesce_usecs, ec.use_adaptive_rx_coalesce ? ", adaptive" : "", b->iface.name);
	else
		report("pass", what, "rx-usecs %u", ec.rx_coalesce_usecs);
}

static void check_offloads(const struct omx_board *b)
{
	static const struct {
		uint32_t cmd;
		const char *name;
	} offs[] = { { ETHTOOL_GSG, "sg" }, { ETHTOOL_GTSO, "tso" }, { ETHTOOL_GGSO, "gso" }, { ETHTOOL_GGRO, "gro" },
		     { ETHTOOL_GRXCSUM, "rx-checksum" }, { ETHTOOL_GTXCSUM, "tx-checksum" } };
	char what[64], list[256] = "";
	snprintf(what, sizeof(what), "offloads %s", b->iface.name);
	int any = 0;
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		struct ethtool_value v = { offs[i].cmd, 0 };
		if (ethtool(b->iface.name, &v) < 0)
			continue;
		any = 1;
		size_t l = strlen(list);
		snprintf(list + l, sizeof(list) - l, "%s%s %s", l ? ", " : "", offs[i].name, v.data ? "on" : "off");
	}
	if (!any)
		report("skip", what, "not reported by the driver");
	else
		report("pass", what, "%s (0x86DF frames are not segmented or checksummed by the NIC: no effect)", list);
}

/* IRQs of the interface from /proc/interrupts (receive ones, as omx_prepare_binding). */
static int nic_irqs(const char *ifname, int *irqs, int max)
{
	char path[512], line[4096];
	snprintf(path, sizeof(path), "%s/interrupts", proc_dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int n = 0;
	while (fgets(line, sizeof(line), f) && n < max) {
		line[strcspn(line, "\n")] = 0;
		char *s = line;
		while (isspace((unsigned char)*s))
			s++;
		if (!isdigit((unsigned char)*s))
			continue;
		char *last = strrchr(line, ' ');
		last = last ? last + 1 : line;
		if (strstr(last, ifname) && !strcasestr(last, "tx"))
			irqs[n++] = atoi(s);
	}
	fclose(f);
	return n;
}

static void check_irq_binding(const struct omx_board *b)
{
	char what[64], path[512], mask[256];
	snprintf(what, sizeof(what), "irq affinity %s", b->iface.name);
	int irqs[128];
	int n = nic_irqs(b->iface.name, irqs, 128);
	if (n <= 0) {
		report("skip", what, "no interrupt of its own (virtual interface?)");
		return;
	}
	const char *bind = getenv("OMX_PROCESS_BINDING");
	if (!bind || !*bind) {
		report("warn", what, "%d receive IRQs but OMX_PROCESS_BINDING unset: processes may run far from their "
		       "queue's IRQ (omx_prepare_binding, then OMX_PROCESS_BINDING=file)", n);
		return;
	}
	if (strncmp(bind, "file", 4) != 0) {
		report("pass", what, "OMX_PROCESS_BINDING=%s (explicit CPUs)", bind);
		return;
	}
	const char *file = bind[4] == ':' ? bind + 5 : "/tmp/open-mx.bindings.dat";
	FILE *f = fopen(file, "r");
	if (!f) {
		report("fail", what, "OMX_PROCESS_BINDING=%s but %s is unreadable: %s (endpoint opens abort)", bind, file,
		       strerror(errno));
		return;
	}
	char line[512];
	int checked = 0, stale = 0;
	while (fgets(line, sizeof(line), f)) {
		char mac[32];
		int ep, irq;
		char m[128];
		if (sscanf(line, "board %31s ep %d irq %d mask %127s", mac, &ep, &irq, m) != 4)
			continue;
		snprintf(path, sizeof(path), "%s/irq/%d/smp_affinity", proc_dir, irq);
		if (read_line(path, mask, sizeof(mask)) < 0)
			continue;
		checked++;
		if (strcmp(mask, m) != 0) {
			stale++;
			if (verbose)
				printf("     irq %d: affinity now %s, binding file says %s\n", irq, mask, m);
		}
	}
	fclose(f);
	if (stale)
		report("warn", what, "%d of %d IRQ masks in %s differ from /proc/irq (irqbalance?): run omx_prepare_binding again",
		       stale, checked, file);
	else
		report("pass", what, "binding file %s matches the IRQ affinities (%d lines)", file, checked);
}

static int mask_nonzero(const char *m)
{
	for (; *m; m++)
		if (isxdigit((unsigned char)*m) && *m != '0')
			return 1;
	return 0;
}

static void check_rps_xps(const struct omx_board *b)
{
	char what[64], path[512], v[256];
	snprintf(what, sizeof(what), "rps/xps %s", b->iface.name);
	int rps = 0, xps = 0, queues = 0;
	for (int q = 0; q < 256; q++) {
		snprintf(path, sizeof(path), "%s/class/net/%s/queues/rx-%d/rps_cpus", sys_dir, b->iface.name, q);
		if (read_line(path, v, sizeof(v)) < 0)
			break;
		queues++;
		rps += mask_nonzero(v);
	}
	for (int q = 0; q < 256; q++) {
		snprintf(path, sizeof(path), "%s/class/net/%s/queues/tx-%d/xps_cpus", sys_dir, b->iface.name, q);
		if (read_line(path, v, sizeof(v)) < 0)
			break;
		xps += mask_nonzero(v);
	}
	if (!queues)
		report("skip", what, "no queue information in sysfs");
	else if (rps)
		report("warn", what, "RPS on %d of %d receive queues: frames are processed on other CPUs than the IRQ's, "
		       "check it matches the process binding", rps, queues);
	else
		report("pass", what, "RPS off on %d receive queues%s", queues, xps ? ", XPS set" : "");
}

static void check_privilege(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r"); /* always the real one */
	unsigned long long eff = 0;
	int found = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			found = 1;
	if (f)
		fclose(f);
	const int cap_net_raw = 13;
	const char *broker = getenv("OMX_BROKER");
	struct stat st;
	int broker_ok = broker && *broker && stat(broker, &st) == 0 && S_ISSOCK(st.st_mode);
	if (found && (eff >> cap_net_raw) & 1)
		report("pass", "privilege", "CAP_NET_RAW: endpoints open their own packet sockets");
	else if (broker_ok)
		report("pass", "privilege", "no CAP_NET_RAW, broker socket %s present", broker);
	else
		report("fail", "privilege", "no CAP_NET_RAW and no broker (OMX_BROKER): opening endpoints will fail "
		       "(setcap cap_net_raw+ep, or run omxd)");
}

static void check_lock_dir(void)
{
	const char *d = omx__lock_dir();
	struct stat st;
	if (stat(d, &st) < 0 || !S_ISDIR(st.st_mode))
		report("fail", "lock directory", "%s is not a directory (OMX_LOCK_DIR)", d);
	else if (access(d, W_OK | X_OK) < 0)
		report("fail", "lock directory", "%s not writable: endpoints cannot be opened", d);
	else
		report("pass", "lock directory", "%s writable", d);
}

static void check_ptrace_scope(void)
{
	char path[512], v[32];
	snprintf(path, sizeof(path), "%s/sys/kernel/yama/ptrace_scope", proc_dir);
	if (read_line(path, v, sizeof(v)) < 0) {
		report("pass", "ptrace_scope", "no Yama: single copy between same-user processes allowed");
		return;
	}
	int s = atoi(v);
	if (s == 0)
		report("pass", "ptrace_scope", "0: single copy (process_vm_readv) between same-user processes allowed");
	else
		report("warn", "ptrace_scope", "%d: single copy between unrelated processes is refused, same-host large "
		       "messages fall back to copies (sysctl kernel.yama.ptrace_scope=0)", s);
}

static void check_cpuidle(void)
{
	char path[512], name[64], v[64];
	int deep = 0, worst = 0;
	char deepest[64] = "";
	for (int st = 0; st < 16; st++) {
		snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu0/cpuidle/state%d/latency", sys_dir, st);
		if (read_line(path, v, sizeof(v)) < 0)
			break;
		int lat = atoi(v);
		snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu0/cpuidle/state%d/disable", sys_dir, st);
		int disabled = read_line(path, name, sizeof(name)) == 0 && atoi(name) != 0;
		snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu0/cpuidle/state%d/name", sys_dir, st);
		if (read_line(path, name, sizeof(name)) < 0)
			snprintf(name, sizeof(name), "state%d", st);
		if (!disabled && lat >= DEEP_CSTATE_US) {
			deep++;
			if (lat > worst)
				worst = lat, snprintf(deepest, sizeof(deepest), "%s", name);
		}
	}
	if (deep)
		report("warn", "cpu idle states", "%d enabled idle states with exit latency >= %d us (deepest %s, %d us): "
		       "sleeping waits wake up late (OMX_WAITSPIN=1, or cpupower idle-set -D %d)", deep, DEEP_CSTATE_US,
		       deepest, worst, DEEP_CSTATE_US);
	else
		report("pass", "cpu idle states", "no deep idle state enabled (or no cpuidle driver)");
	snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu0/cpufreq/scaling_governor", sys_dir);
	if (read_line(path, v, sizeof(v)) == 0) {
		if (!strcmp(v, "powersave") || !strcmp(v, "conservative"))
			report("warn", "cpu frequency", "governor %s: latency varies with load (performance)", v);
		else
			report("pass", "cpu frequency", "governor %s", v);
	}
}

static void check_unix_qlen(void)
{
	char path[512], v[32];
	snprintf(path, sizeof(path), "%s/sys/net/unix/max_dgram_qlen", proc_dir);
	if (read_line(path, v, sizeof(v)) < 0)
		return;
	if (atoi(v) < 256)
		report("warn", "same-host queue", "net.unix.max_dgram_qlen=%s: same-host bursts wait for retransmissions "
		       "(sysctl net.unix.max_dgram_qlen=1024)", v);
	else
		report("pass", "same-host queue", "net.unix.max_dgram_qlen=%s", v);
}

int main(int argc, char *argv[])
{
	static const struct option longopts[] = { { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	int c, only = -1;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":b:qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if ((only = tool_board_arg(PROG, optarg)) < 0)
				return TOOL_FAIL;
			break;
		case 'q': quiet = 1; break;
		case 'v': verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: return tool_bad_option(c, optopt, argv[optind - 1], usage);
		}
	}
	if (tool_no_arguments(argc, argv, usage))
		return TOOL_FAIL;
	const char *p = getenv("OMX_PROC_DIR");
	if (p && *p)
		proc_dir = p;
	p = getenv("OMX_SYS_DIR");
	if (p && *p)
		sys_dir = p;
	if (tool_init(PROG) < 0)
		return TOOL_FAIL;
	pthread_mutex_lock(&omx__g.lock);
	omx__config_load_open();
	pthread_mutex_unlock(&omx__g.lock);
	if (only >= 0 && !omx__board((uint32_t)only))
		return tool_board_not_found("", only);
	int boards = 0;
	for (uint32_t i = 0; i < OMX_BOARD_MAX; i++) {
		struct omx_board *b = omx__board(i);
		if (!b || (only >= 0 && (uint32_t)only != i))
			continue;
		boards++;
		char what[64];
		snprintf(what, sizeof(what), "link %s", b->iface.name);
		if (b->iface.up)
			report("pass", what, "board #%" PRIu32 " up", i);
		else
			report("fail", what, "board #%" PRIu32 " is DOWN", i);
		check_mtu(b);
		check_coalescing(b);
		check_irq_binding(b);
		check_rps_xps(b);
		check_offloads(b);
	}
	if (!boards)
		report("fail", "boards", "no interface attached (OMX_IFACES)");
	check_privilege();
	check_lock_dir();
	check_ptrace_scope();
	check_cpuidle();
	check_unix_qlen();
	printf("%d failed, %d warnings\n", fails, warns);
	fflush(stdout);
	omx_finalize();
	return fails ? TOOL_FAIL : 0;
}
