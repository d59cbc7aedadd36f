/* clock.c - the one time source of the library: CLOCK_MONOTONIC in nanoseconds. */
#include <time.h>

#include "net/net.h"

uint64_t omx_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
