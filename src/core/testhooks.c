/* testhooks.c - see testhooks.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/testhooks.h"

static struct omx_memnet *test_hub;
static uint32_t test_mtu = 9000;

void omx__test_set_memnet(struct omx_memnet *hub, uint32_t mtu)
{
	test_hub = hub;
	test_mtu = mtu;
}

struct omx_memnet *omx__test_memnet(void)
{
	return test_hub;
}

int omx__test_iface_query(const char *name, struct omx_iface_info *out)
{
	unsigned n;
	if (!test_hub || sscanf(name, "mem%u", &n) != 1 || n > 250)
		return -ENODEV;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%.*s", (int)sizeof(out->name) - 1, name);
	out->ifindex = (int)n + 1;
	const uint8_t mac[6] = { 0x02, 0, 0, 0, 0, (uint8_t)(n + 1) };
	memcpy(out->mac, mac, 6);
	out->mtu = test_mtu;
	out->up = 1;
	out->numa_node = -1;
	return 0;
}

/* Slot lock files: OMX_LOCK_DIR, else /dev/shm (shared by every network namespace of the host,
 * which is fine: names carry the interface MAC). */
const char *omx__lock_dir(void)
{
	const char *d = getenv("OMX_LOCK_DIR");
	return d && *d ? d : "/dev/shm";
}

/* The privilege broker: OMX_BROKER names its socket ("none" disables it), OMX_BROKER_ALWAYS=1
 * asks it even with CAP_NET_RAW (tests, or to keep every socket's grant visible to omxd). */
void omx__broker_opts(struct omx_net_opts *o)
{
	const char *p = getenv("OMX_BROKER");
	const char *always = getenv("OMX_BROKER_ALWAYS");
	o->broker_path = !p || !*p ? "/run/omx/omxd.sock" : strcmp(p, "none") ? p : NULL;
	o->broker_always = always && atoi(always) > 0;
}

static uint32_t session_base;

void omx__test_set_session_base(uint32_t base)
{
	session_base = base;
}

uint32_t omx__test_session_base(void)
{
	return session_base;
}
