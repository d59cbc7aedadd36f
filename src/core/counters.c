/*
 * counters.c - host-visible counters: one shared-memory file per endpoint slot (counters.h
 * describes the layout and the attribution rule), and the helpers the tools use to read them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/counters.h"
#include "core/testhooks.h"

_Static_assert(offsetof(struct omx_counters_file, values) == OMX_COUNTERS_HEADER, "counter file header size");
_Static_assert(sizeof(struct omx_counters_file) <= OMX_COUNTERS_FILE_SIZE, "counter file size");

const char *const omx__counter_extra_labels[OMX_COUNTER_EXTRA] = {
	"Retransmit Message", "Retransmit Connect Request", "Retransmit Pull Request", "Transmit Failed",
	"Drop Duplicate Message", "Drop Out of Window", "Drop Early Queue Full", "Drop Undecodable Frame",
	"Wait Done While Spinning", "Wait Done After Sleeping", "Shared Bytes", "Single-Copy Bytes",
	"Send Discovery", "Recv Discovery", "Peers Added by Discovery", "Connect Refused (Bad Key)",
	"Split Receive Placed Bytes", "Single-Copy Bytes Written For Receivers", "Split Receive Lane Switches",
	"Refused While Closing", "Probe Partner Owing Notify", "Same-Host Partner Gone", "Resend Asked (Unexpected Room Back)",
	"Sends Unacked at Close", "Wait Slept During Transfer", "Huge-Page Bytes Collapsed",
	"Single-Copy Bytes From Shared Pools",
};

const char *omx__counter_label(int slot)
{
	if (slot >= 0 && slot < OMX_COUNTER_SPEC)
		return omx__counter_labels[slot];
	if (slot >= OMX_COUNTER_SPEC && slot < OMX_COUNTER_SLOTS)
		return omx__counter_extra_labels[slot - OMX_COUNTER_SPEC];
	return "?";
}

/* ---- library side ---- */

/* Mappings made by this process, kept until exit: a counting thread may still hold a pointer
 * loaded just before its board switched files, so mappings are never unmapped; reopening the
 * same slot reuses (and resets) its mapping. */
static struct omx_counters_file *maps[OMX_BOARD_MAX][OMX_ENDPOINT_MAX_HARD];

static void counters_path(char *buf, size_t len, const uint8_t *m, uint32_t ep_index)
{
	snprintf(buf, len, "%s/omx-%02x%02x%02x%02x%02x%02x-%u.counters", omx__lock_dir(), m[0], m[1], m[2], m[3],
		 m[4], m[5], ep_index);
}

static struct omx_counters_file *map_file(const uint8_t *mac, uint32_t ep_index)
{
	char path[160];
	counters_path(path, sizeof(path), mac, ep_index);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return NULL;
	(void)fchmod(fd, 0644); /* every user may read them; clearing needs the owner (or root) */
	struct stat st;
	if (fstat(fd, &st) < 0 || (st.st_size < (off_t)OMX_COUNTERS_FILE_SIZE &&
				   ftruncate(fd, OMX_COUNTERS_FILE_SIZE) < 0)) {
		close(fd);
		return NULL;
	}
	void *p = mmap(NULL, OMX_COUNTERS_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

void omx__counters_open(struct omx_endpoint *ep)
{
	struct omx_board *b = ep->board;
	uint32_t bi = ep->board_index, ei = ep->endpoint_index;
	if (bi >= OMX_BOARD_MAX || ei >= OMX_ENDPOINT_MAX_HARD || omx__test_memnet())
		return; /* in-memory test network: counts stay in the process */
	struct omx_counters_file *f = maps[bi][ei];
	if (!f)
		f = maps[bi][ei] = map_file(b->iface.mac, ei);
	if (!f) {
		omx__verbose("no counter file for endpoint %u: %s\n", ei, strerror(errno));
		return;
	}
	/* We hold the slot lock: nobody else writes this file. Reset, then publish the header. */
	__atomic_store_n(&f->magic, 0, __ATOMIC_RELEASE);
	for (int i = 0; i < OMX_COUNTER_SLOTS; i++)
		__atomic_store_n(&f->values[i], 0, __ATOMIC_RELAXED);
	f->version = OMX_COUNTERS_VERSION;
	f->header_size = OMX_COUNTERS_HEADER;
	f->slots = OMX_COUNTER_SLOTS;
	f->spec_slots = OMX_COUNTER_SPEC;
	f->pid = (int32_t)getpid();
	f->board_index = bi;
	f->endpoint_index = ei;
	memcpy(f->mac, b->iface.mac, 6);
	memset(f->comm, 0, sizeof(f->comm));
	FILE *c = fopen("/proc/self/comm", "r");
	if (c) {
		if (fgets(f->comm, sizeof(f->comm), c))
			f->comm[strcspn(f->comm, "\n")] = 0;
		fclose(c);
	}
	omx__strcpy(f->hostname, sizeof(f->hostname), b->hostname);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	f->open_time_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	__atomic_store_n(&f->state, OMX_COUNTERS_OPEN, __ATOMIC_RELAXED);
	__atomic_store_n(&f->magic, OMX_COUNTERS_MAGIC, __ATOMIC_RELEASE);
	if (!__atomic_load_n(&b->counters, __ATOMIC_RELAXED)) {
		/* First endpoint of this process on the board: counts from now on go to its file. */
		__atomic_store_n(&b->counters, f->values, __ATOMIC_RELEASE);
	}
}

void omx__counters_close(struct omx_endpoint *ep)
{
	uint32_t bi = ep->board_index, ei = ep->endpoint_index;
	if (bi >= OMX_BOARD_MAX || ei >= OMX_ENDPOINT_MAX_HARD || !maps[bi][ei])
		return;
	struct omx_counters_file *f = maps[bi][ei];
	__atomic_store_n(&f->state, OMX_COUNTERS_CLOSED, __ATOMIC_RELEASE);
	if (__atomic_load_n(&ep->board->counters, __ATOMIC_RELAXED) != f->values)
		return;
	/* Move the board's counting to another open endpoint of ours on it, if any. */
	struct omx_counters_file *next = NULL;
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &omx__g.endpoints) {
		struct omx_endpoint *o = omx_container_of(pos, struct omx_endpoint, list_elt);
		if (o != ep && o->board_index == bi && o->endpoint_index < OMX_ENDPOINT_MAX_HARD &&
		    maps[bi][o->endpoint_index] &&
		    __atomic_load_n(&maps[bi][o->endpoint_index]->state, __ATOMIC_RELAXED) == OMX_COUNTERS_OPEN) {
			next = maps[bi][o->endpoint_index];
			break;
		}
	}
	__atomic_store_n(&ep->board->counters, next ? next->values : NULL, __ATOMIC_RELEASE);
}

const uint64_t *omx__counters_values(struct omx_board *b)
{
	uint64_t *c = __atomic_load_n(&b->counters, __ATOMIC_ACQUIRE);
	return c ? c : b->counters_private;
}

/* ---- tools side ---- */

int omx__flock_holder(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	FILE *f = fopen("/proc/locks", "r");
	if (!f)
		return 0;
	char line[256];
	int pid = 0, p;
	dev_t dev;
	unsigned long ino;
	while (fgets(line, sizeof(line), f)) {
		if (omx__proc_locks_flock(line, &p, &dev, &ino) && ino == (unsigned long)st.st_ino && dev == st.st_dev) {
			pid = p > 0 ? p : 1;
			break;
		}
	}
	fclose(f);
	return pid;
}

int omx__proc_locks_flock(const char *line, int *pid, dev_t *dev, unsigned long *ino)
{
	char kind[16];
	unsigned maj, min;
	/* "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF" (blocked waiters have "->") */
	if (strstr(line, "->") ||
	    sscanf(line, "%*[^:]: %15s %*s %*s %d %x:%x:%lu", kind, pid, &maj, &min, ino) != 5 || strcmp(kind, "FLOCK"))
		return 0;
	*dev = makedev(maj, min);
	return 1;
}

static int view_cmp(const void *a, const void *b)
{
	const struct omx_counters_view *x = a, *y = b;
	return (x->endpoint_index > y->endpoint_index) - (x->endpoint_index < y->endpoint_index);
}

int omx__counters_scan(const char *dir, const uint8_t mac[6], int writable, struct omx_counters_view *out, int max)
{
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "omx-%02x%02x%02x%02x%02x%02x-", mac[0], mac[1], mac[2], mac[3], mac[4],
		 mac[5]);
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < max) {
		size_t pl = strlen(prefix);
		if (strncmp(de->d_name, prefix, pl) != 0)
			continue;
		char *end;
		unsigned long idx = strtoul(de->d_name + pl, &end, 10);
		if (end == de->d_name + pl || strcmp(end, ".counters") != 0 || idx >= OMX_ENDPOINT_MAX_HARD)
			continue;
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		int w = writable;
		int fd = open(path, (w ? O_RDWR : O_RDONLY) | O_CLOEXEC);
		if (fd < 0 && w && (errno == EACCES || errno == EPERM || errno == EROFS)) {
			w = 0;
			fd = open(path, O_RDONLY | O_CLOEXEC);
		}
		if (fd < 0)
			continue;
		struct stat st;
		if (fstat(fd, &st) < 0 || st.st_size < (off_t)OMX_COUNTERS_FILE_SIZE) {
			close(fd);
			continue;
		}
		void *p = mmap(NULL, OMX_COUNTERS_FILE_SIZE, PROT_READ | (w ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
		close(fd);
		if (p == MAP_FAILED)
			continue;
		struct omx_counters_file *f = p;
		if (__atomic_load_n(&f->magic, __ATOMIC_ACQUIRE) != OMX_COUNTERS_MAGIC ||
		    f->version != OMX_COUNTERS_VERSION || f->header_size != OMX_COUNTERS_HEADER ||
		    f->slots > OMX_COUNTER_SLOTS) {
			munmap(p, OMX_COUNTERS_FILE_SIZE);
			continue;
		}
		struct omx_counters_view *v = &out[n++];
		memset(v, 0, sizeof(*v));
		v->f = f;
		v->endpoint_index = (uint32_t)idx;
		v->writable = w;
		char lock[512];
		snprintf(lock, sizeof(lock), "%s/%s%lu.lock", dir, prefix, idx);
		int h = omx__flock_holder(lock);
		v->holder_pid = h > 0 ? h : 0;
		v->stale = __atomic_load_n(&f->state, __ATOMIC_RELAXED) == OMX_COUNTERS_OPEN && v->holder_pid == 0;
	}
	closedir(d);
	qsort(out, (size_t)n, sizeof(*out), view_cmp);
	return n;
}

void omx__counters_unmap(struct omx_counters_view *v, int n)
{
	for (int i = 0; i < n; i++)
		if (v[i].f)
			munmap(v[i].f, OMX_COUNTERS_FILE_SIZE);
}
