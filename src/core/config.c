/*
 * config.c - every knob of the library, read from the environment (mx-api.md 17) at init and
 * at the first endpoint open. docs/configuration.md documents each one; `omx_info -v` prints them.
 *
 * Host configuration file: OMX_CONFIG (default /etc/omx.conf), KEY=value lines, '#' comments.
 * At init, each key not set in the environment is put into it (setenv), so every reader of a
 * knob sees it and the environment overrides the file. Sources are remembered for omx_info -v.
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "shm/shm.h"

struct omx_config omx__cfg;

/* Every knob and its default, in docs/configuration.md order. */
static const struct omx_knob knobs[] = {
	{ "OMX_IFACES", "all" }, { "OMX_PEERS", "" }, { "OMX_HOSTNAME", "(kernel nodename)" },
	{ "OMX_PEER_MAX", "1024" }, { "OMX_ENDPOINT_MAX", "32" }, { "OMX_LOCK_DIR", "/dev/shm" },
	{ "OMX_DISCOVERY", "auto" }, { "OMX_DISCOVERY_WAIT_MS", "3000" },
	{ "OMX_WIRE_MODE", "extended" }, { "OMX_MTU", "0" }, { "OMX_RNDV_THRESHOLD", "auto" },
	{ "OMX_SHARED_RNDV_THRESHOLD", "auto" }, { "OMX_DISABLE_SHARED", "0" }, { "OMX_SHARED_SINGLE_COPY", "1" },
	{ "OMX_SHARED_SINGLE_COPY_MIN", "auto" }, { "OMX_SHARED_COOP_CHUNK", "262144" }, { "OMX_SHARED_NT_THRESHOLD", "auto" }, { "OMX_SHARED_HUGE_AFTER", "8" }, { "OMX_SHARED_OWN_LINES", "1" }, { "OMX_SHARED_RING_KB", "auto" }, { "OMX_SHARED_RING_LOCK", "1" }, { "OMX_SHARED_POOL_MB", "16384" }, { "OMX_SHARED_POOL_RNDV", "16384" }, { "OMX_SHARED_ACK_COMPLETE", "131072" }, { "OMX_SHM_DIR", "/dev/shm" }, { "OMX_RESEND_DELAY_MS", "500" }, { "OMX_RESENDS_MAX", "1000" },
	{ "OMX_ACK_DELAY_MS", "16" }, { "OMX_NOTACKED_MAX", "4" }, { "OMX_PULL_RESEND_MS", "1000" },
	{ "OMX_ZOMBIE_SEND", "512" }, { "OMX_SPIN_US", "100" }, { "OMX_WAITSPIN", "0" }, { "OMX_WAITINTR", "0" },
	{ "OMX_PROCESS_BINDING", "" }, { "OMX_PROGRESS_THREAD", "1" }, { "OMX_PROGRESS_IDLE_US", "1000" },
	{ "OMX_PROGRESS_CHECK_MAX_US", "8000" }, { "OMX_PROGRESS_BATCH", "0" },
	{ "OMX_CLOSE_LINGER_MS", "1000" }, { "OMX_RX_RING_KB", "auto" }, { "OMX_RX_SPLIT", "auto" },
	{ "OMX_RX_SPLIT_MEDIUM", "auto" },
	{ "OMX_UNEXP_MAX_KB", "65536" }, { "OMX_UNEXP_PEER_MAX_KB", "16384" },
	{ "OMX_BROKER", "/run/omx/omxd.sock" }, { "OMX_BROKER_ALWAYS", "0" }, { "OMX_CTXIDS", "" },
	{ "OMX_ANY_ENDPOINT", "" }, { "OMX_DISABLE_SELF", "0" }, { "OMX_CONNECT_POLLALL", "0" },
	{ "OMX_VERBOSE", "0" }, { "OMX_VERBOSE_PREFIX", "OMX: " }, { "OMX_FATAL_ERRORS", "1" },
	{ "OMX_ABORT_SLEEPS", "0" }, { "OMX_DEBUG_SIGNAL", "0" }, { "OMX_DEBUG_SIGNAL_NUM", "10 (SIGUSR1)" }, { "OMX_IGNORE_MX_ENV", "0" }, { "OMX_FAULT", "" },
};

const struct omx_knob *omx__config_knobs(size_t *count)
{
	*count = sizeof(knobs) / sizeof(knobs[0]);
	return knobs;
}

static char file_path[4096];
static int file_state; /* 0 not read, 1 absent, 2 loaded, 3 unreadable */
static char *from_file[64]; /* names we set from the file */
static unsigned from_file_count;

static int set_from_file(const char *name)
{
	for (unsigned i = 0; i < from_file_count; i++)
		if (!strcmp(from_file[i], name))
			return 1;
	return 0;
}

const char *omx__config_source(const char *name)
{
	if (!getenv(name))
		return "default";
	return set_from_file(name) ? "file" : "env";
}

const char *omx__config_file(int *state)
{
	*state = file_state;
	return file_path;
}

static int valid_key(const char *k)
{
	if (!*k || isdigit((unsigned char)*k))
		return 0;
	for (; *k; k++)
		if (!isupper((unsigned char)*k) && !isdigit((unsigned char)*k) && *k != '_')
			return 0;
	return 1;
}

void omx__config_file_apply(void)
{
	if (file_state)
		return;
	const char *p = getenv("OMX_CONFIG");
	int explicit_path = p && *p;
	snprintf(file_path, sizeof(file_path), "%s", explicit_path ? p : "/etc/omx.conf");
	FILE *f = fopen(file_path, "r");
	if (!f) {
		file_state = errno == ENOENT ? 1 : 3;
		if (explicit_path)
			omx__warn("cannot read configuration file %s: %s\n", file_path, strerror(errno));
		return;
	}
	file_state = 2;
	char line[1024];
	int lineno = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *s = line, *e;
		s[strcspn(s, "\r\n")] = 0;
		while (isspace((unsigned char)*s))
			s++;
		if (!*s || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			omx__warn("%s:%d: malformed line ignored (expected KEY=value)\n", file_path, lineno);
			continue;
		}
		*eq = 0;
		for (e = eq; e > s && isspace((unsigned char)e[-1]); e--)
			e[-1] = 0;
		char *v = eq + 1;
		while (isspace((unsigned char)*v))
			v++;
		size_t vl = strlen(v);
		while (vl && isspace((unsigned char)v[vl - 1]))
			v[--vl] = 0;
		if (vl >= 2 && (v[0] == '"' || v[0] == '\'') && v[vl - 1] == v[0]) {
			v[vl - 1] = 0;
			v++;
		}
		if (!valid_key(s) || (strncmp(s, "OMX_", 4) && strncmp(s, "MX_", 3))) {
			omx__warn("%s:%d: '%s' is not an OMX_ or MX_ variable, ignored\n", file_path, lineno, s);
			continue;
		}
		size_t n;
		int known = strncmp(s, "OMX_", 4) != 0;
		const struct omx_knob *k = omx__config_knobs(&n);
		for (size_t i = 0; i < n && !known; i++)
			known = !strcmp(k[i].name, s);
		if (!known)
			omx__warn("%s:%d: unknown knob %s (set anyway)\n", file_path, lineno, s);
		if (getenv(s))
			continue; /* the environment overrides the file */
		if (setenv(s, v, 0) == 0 && from_file_count < sizeof(from_file) / sizeof(from_file[0]))
			from_file[from_file_count++] = strdup(s);
	}
	fclose(f);
}

const char *omx__getenv(const char *name, const char *mx_alias)
{
	const char *v = getenv(name);
	if (v)
		return v;
	if (!mx_alias)
		return NULL;
	const char *ign = getenv("OMX_IGNORE_MX_ENV");
	if (ign && atoi(ign))
		return NULL;
	return getenv(mx_alias);
}

/* atoi semantics as the reference (non-numeric -> 0), but unsigned and saturated. */
static uint32_t env_u32(const char *name, const char *alias, uint32_t def)
{
	const char *v = omx__getenv(name, alias);
	if (!v)
		return def;
	long long x = atoll(v);
	if (x < 0)
		return 0;
	if (x > 0xFFFFFFFFll)
		return 0xFFFFFFFFu;
	return (uint32_t)x;
}

void omx__config_load_init(void)
{
	struct omx_config *c = &omx__cfg;
	const char *v;

	omx__config_file_apply();
	c->verbose = (int)env_u32("OMX_VERBOSE", NULL, 0);
	/* [QUIRK fixed] MX_VERBOSE alone did nothing in the reference; here it works. */
	if (!getenv("OMX_VERBOSE") && omx__getenv("OMX_VERBOSE", "MX_VERBOSE"))
		c->verbose = 1;
	v = getenv("OMX_VERBOSE_PREFIX");
	omx__strcpy(c->verbose_prefix, sizeof(c->verbose_prefix), v ? v : "OMX: ");
	c->abort_sleeps = env_u32("OMX_ABORT_SLEEPS", NULL, 0);
	c->fatal_errors = (int)env_u32("OMX_FATAL_ERRORS", "MX_ERRORS_ARE_FATAL", 1);
	c->debug_signal = (int)env_u32("OMX_DEBUG_SIGNAL", NULL, 0);
	c->debug_signal_num = (int)env_u32("OMX_DEBUG_SIGNAL_NUM", NULL, SIGUSR1);
	if (c->debug_signal_num < 1 || c->debug_signal_num >= SIGRTMAX || c->debug_signal_num == SIGKILL ||
	    c->debug_signal_num == SIGSTOP)
		c->debug_signal_num = SIGUSR1;
}

/* Unset, empty or "auto": the library chooses. */
static int env_auto(const char *name)
{
	const char *v = getenv(name);
	return !v || !*v || !strcmp(v, "auto");
}

static void load_thresholds(struct omx_config *c, uint32_t medium_max)
{
	/* Remote threshold: unset or "auto", 32768, or 131072 / 262144 on interfaces whose medium
	 * fragments carry 32 / 48 KiB or more (omx__rndv_threshold). */
	c->rndv_auto = env_auto("OMX_RNDV_THRESHOLD");
	c->rndv_threshold = c->rndv_auto ? 32768 : env_u32("OMX_RNDV_THRESHOLD", NULL, 32768);
	/* Same-host thresholds: unset or "auto", chosen by measuring the machine at the first
	 * endpoint open (shared.c); until then, and if that fails, the values of stop 18. */
	c->shared_rndv_auto = env_auto("OMX_SHARED_RNDV_THRESHOLD");
	c->shared_rndv_threshold = c->shared_rndv_auto ? 4096 : env_u32("OMX_SHARED_RNDV_THRESHOLD", NULL, 4096);
	c->shared_single_copy_min_auto = env_auto("OMX_SHARED_SINGLE_COPY_MIN");
	c->shared_single_copy_min = c->shared_single_copy_min_auto ? 0 : env_u32("OMX_SHARED_SINGLE_COPY_MIN", NULL, 0);
	c->shared_medium_cap = medium_max;
	c->shared_live = env_u32("OMX_SHARED_LIVE", NULL, 1) != 0;
	if (c->rndv_threshold < OMX_SMALL_MAX)
		c->rndv_threshold = OMX_SMALL_MAX;
	if (c->rndv_threshold > medium_max)
		c->rndv_threshold = medium_max;
	if (c->shared_rndv_threshold < OMX_SMALL_MAX)
		c->shared_rndv_threshold = OMX_SMALL_MAX;
	if (c->shared_rndv_threshold > medium_max)
		c->shared_rndv_threshold = medium_max;
}

/* Read without the library's lock: omx_shared_alloc may run inside the library's own calls (the
 * shared heap's malloc, heap/shared_heap.c, under omx_init). */
uint64_t omx__config_shared_pool_bytes(void)
{
	return (uint64_t)env_u32("OMX_SHARED_POOL_MB", NULL, 16384) << 20;
}

void omx__config_load_open(void)
{
	struct omx_config *c = &omx__cfg;
	const char *v;

	if (c->loaded)
		return;
	v = getenv("OMX_WIRE_MODE");
	c->wire_mode = (v && (!strcmp(v, "compat") || !strcmp(v, "mx"))) ? OMX_WIRE_COMPAT : OMX_WIRE_EXTENDED;
	c->mtu_override = env_u32("OMX_MTU", NULL, 0);
	/* Thresholds are clamped to the largest medium of the mode (compat 32 KiB; extended depends
	 * on the MTU, clamped again per endpoint in omx_open_endpoint). */
	load_thresholds(c, c->wire_mode == OMX_WIRE_COMPAT ? 32768 : 1u << 20);
	c->resends_max = env_u32("OMX_RESENDS_MAX", "MX_MAX_RETRIES", 1000);
	c->zombie_max = env_u32("OMX_ZOMBIE_SEND", "MX_ZOMBIE_SEND", 512);
	c->notacked_max = env_u32("OMX_NOTACKED_MAX", "MX_IMM_ACK", 4);
	if (c->notacked_max == 0)
		c->notacked_max = 1;
	c->waitspin = (int)env_u32("OMX_WAITSPIN", NULL, 0);
	c->waitintr = (int)env_u32("OMX_WAITINTR", NULL, 0);
	c->disable_self = (int)env_u32("OMX_DISABLE_SELF", "MX_DISABLE_SELF", 0);
	c->connect_pollall = (int)env_u32("OMX_CONNECT_POLLALL", NULL, 0);
	c->spin_us = env_u32("OMX_SPIN_US", NULL, 100);
	c->xfer_spin_ns = (uint64_t)env_u32("OMX_XFER_SPIN_US", NULL, 100) * 1000u;
	c->rx_ring_kb = env_u32("OMX_RX_RING_KB", NULL, 0); /* 0: OMX_RX_RING_AUTO_SLOTS slots, <= 16 MiB */
	/* OMX_RX_SPLIT: "auto" (default: pull replies split or whole as the traffic goes, at large
	 * MTUs, endpoint.c and pull.c), a slot size (every frame longer is split), or "pull": pull
	 * replies, and the fragments of mediums longer than OMX_RX_SPLIT_MEDIUM if set, on a socket
	 * of their own (docs/tuning.md: ping-pongs gain, one-way streams lose). */
	const char *sp = getenv("OMX_RX_SPLIT");
	c->rx_split_auto = !sp || !*sp || !strcmp(sp, "auto");
	c->rx_pull_split = sp && !strcmp(sp, "pull") ? 256 : 0;
	c->rx_medium_split_auto = env_auto("OMX_RX_SPLIT_MEDIUM");
	c->rx_medium_split = c->rx_medium_split_auto ? 0 : env_u32("OMX_RX_SPLIT_MEDIUM", NULL, 0);
	c->rx_split = c->rx_pull_split || c->rx_split_auto ? 0 : env_u32("OMX_RX_SPLIT", NULL, 0);
	c->unexp_max = (uint64_t)env_u32("OMX_UNEXP_MAX_KB", NULL, 65536) * 1024u;
	c->unexp_peer_max = (uint64_t)env_u32("OMX_UNEXP_PEER_MAX_KB", NULL, 16384) * 1024u;
	c->progress_thread = (int)env_u32("OMX_PROGRESS_THREAD", NULL, 1);
	c->close_linger_ns = omx__ms_to_ns(env_u32("OMX_CLOSE_LINGER_MS", NULL, 1000));
	c->progress_idle_ns = (uint64_t)env_u32("OMX_PROGRESS_IDLE_US", NULL, 1000) * 1000u;
	c->progress_check_max_ns = (uint64_t)env_u32("OMX_PROGRESS_CHECK_MAX_US", NULL, 8000) * 1000u;
	if (c->progress_check_max_ns < c->progress_idle_ns) /* 0: no spacing out */
		c->progress_check_max_ns = c->progress_idle_ns;
	c->progress_batch = (int)env_u32("OMX_PROGRESS_BATCH", NULL, 0);
	c->resend_delay_ns = omx__ms_to_ns(env_u32("OMX_RESEND_DELAY_MS", NULL, 500));
	c->ack_delay_ns = omx__ms_to_ns(env_u32("OMX_ACK_DELAY_MS", NULL, 16));
	c->pull_resend_ns = omx__ms_to_ns(env_u32("OMX_PULL_RESEND_MS", NULL, 1000));
	c->host_query_ns = 5000000000ull;
	c->endpoint_max = env_u32("OMX_ENDPOINT_MAX", NULL, OMX_ENDPOINT_MAX_DEFAULT);
	if (c->endpoint_max == 0 || c->endpoint_max > OMX_ENDPOINT_MAX_HARD)
		c->endpoint_max = OMX_ENDPOINT_MAX_DEFAULT;
	c->ctxid_bits = c->ctxid_shift = 0;
	v = getenv("OMX_CTXIDS");
	if (v) {
		unsigned bits, shift;
		if (sscanf(v, "%u,%u", &bits, &shift) == 2 && bits <= 16 && bits + shift <= 64) {
			c->ctxid_bits = (uint8_t)bits;
			c->ctxid_shift = (uint8_t)shift;
		} else {
			omx__warn("ignoring malformed OMX_CTXIDS='%s' (expected bits,shift)\n", v);
		}
	}
	v = getenv("OMX_ANY_ENDPOINT");
	c->any_endpoint = v ? atoi(v) : -1;
	c->shared_disabled = (int)env_u32("OMX_DISABLE_SHARED", "MX_DISABLE_SHMEM", 0);
	c->shared_single_copy = (int)env_u32("OMX_SHARED_SINGLE_COPY", NULL, 1);
	c->shared_coop_chunk = env_u32("OMX_SHARED_COOP_CHUNK", NULL, 256u << 10);
	if (c->shared_coop_chunk && c->shared_coop_chunk < 4096)
		c->shared_coop_chunk = 4096;
	/* auto: from the last-level cache (omx_copy_nt_auto, shm/copy.c). */
	if (env_auto("OMX_SHARED_NT_THRESHOLD")) {
		c->shared_nt_threshold = omx_copy_nt_auto(omx_copy_llc_bytes());
	} else {
		c->shared_nt_threshold = env_u32("OMX_SHARED_NT_THRESHOLD", NULL, 2u << 20);
	}
	omx_copy_set_nt_threshold(c->shared_nt_threshold);
	omx_shm_set_own_lines((int)env_u32("OMX_SHARED_OWN_LINES", NULL, 1));
	omx_shm_huge_set_after(env_u32("OMX_SHARED_HUGE_AFTER", NULL, 8));
	/* Address space and a sparse file's size: each allocation takes its pages (shm/pool.c). */
	c->shared_pool_bytes = omx__config_shared_pool_bytes();
	c->shared_ack_complete = env_u32("OMX_SHARED_ACK_COMPLETE", NULL, 131072);
	if (c->shared_ack_complete == 0)
		c->shared_ack_complete = UINT32_MAX;
	else if (c->shared_ack_complete < OMX_SMALL_MAX + 1)
		c->shared_ack_complete = OMX_SMALL_MAX + 1;
	c->shared_pool_rndv = env_u32("OMX_SHARED_POOL_RNDV", NULL, 16384);
	if (c->shared_pool_rndv < OMX_SMALL_MAX + 1)
		c->shared_pool_rndv = OMX_SMALL_MAX + 1;
	/* 1 = a pass on every call; more than 64 would leave the network and the timers waiting
	 * for too many cheap calls (docs/configuration.md). */
	c->idle_pass_every = env_u32("OMX_IDLE_PASS_EVERY", NULL, OMX_IDLE_PASS_EVERY_DEFAULT);
	if (c->idle_pass_every < 1)
		c->idle_pass_every = 1;
	if (c->idle_pass_every > 64)
		c->idle_pass_every = 64;
	c->shared_ring_kb = env_u32("OMX_SHARED_RING_KB", NULL, 0); /* 0: OMX_SHARED_RING_AUTO_SLOTS slots */
	if (c->shared_ring_kb && c->shared_ring_kb < 64)
		c->shared_ring_kb = 64;
	if (c->shared_ring_kb > 262144)
		c->shared_ring_kb = 262144;
	c->shared_ring_lock = (int)env_u32("OMX_SHARED_RING_LOCK", NULL, 1);
	v = getenv("OMX_FAULT");
	c->fault_enabled = 0;
	if (v && *v) {
		if (omx_fault_spec_parse(v, &c->fault) == 0)
			c->fault_enabled = 1;
		else
			omx__warn("ignoring malformed OMX_FAULT='%s'\n", v);
	}
	c->loaded = 1;
}
