/* clock.c - the one time source of the library: CLOCK_MONOTONIC in nanoseconds. */
#include <time.h>

#include "net/net.h"

uint64_t omx_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The kernel's last tick (a few ms old, about 7 ns a read against 35 here): for the same-host
 * path's own coarse deadlines (peer ring liveness probes and retries, tens of ms), which are
 * checked on every send. Never mix its values with omx_now_ns()'s. */
uint64_t omx_now_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
