/*
 * testhooks.h - what unit tests may change in the core: run endpoints over the in-memory hub
 * instead of AF_PACKET (boards named "memN" then get MAC 02:00:00:00:00:N+1), and where slot
 * lock files live. Not used by the shipped library unless a test calls these.
 */
#ifndef OMX_TESTHOOKS_H
#define OMX_TESTHOOKS_H

#include "net/net.h"

void omx__test_set_memnet(struct omx_memnet *hub, uint32_t mtu);
struct omx_memnet *omx__test_memnet(void);
/* Fills info for "memN" boards when a hub is set; -ENODEV otherwise. */
int omx__test_iface_query(const char *name, struct omx_iface_info *out);
const char *omx__lock_dir(void);
/* Sessions of endpoints opened from now on: base + board * 256 + index instead of random
 * (0 = random again), so that recorded frames replay against a new process (fuzzing). */
void omx__test_set_session_base(uint32_t base);
uint32_t omx__test_session_base(void);
/* Broker fields of transport options from OMX_BROKER / OMX_BROKER_ALWAYS. */
void omx__broker_opts(struct omx_net_opts *o);

#endif
