/*
 * test_core_env.c - environment knobs with observable effects: OMX_PROCESS_BINDING binds the
 * process that opens endpoint n, and OMX_WAITINTR=1 lets a signal end a blocking wait (which
 * otherwise resumes).
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "open-mx.h"
#include "core/testhooks.h"
#include "net/net.h"

#include "unit_check.h"

static omx_endpoint_t ep;
static atomic_int wait_returned, wait_result = -1;

static void on_usr1(int s)
{
	(void)s;
}

static void *waiter(void *a)
{
	(void)a;
	omx_request_t r;
	omx_status_t st;
	uint32_t res = 7;
	char b[4];
	omx_irecv(ep, b, 4, 0xABC, ~0ull, NULL, &r);
	omx_wait(ep, &r, &st, &res, OMX_TIMEOUT_INFINITE);
	wait_result = (int)res;
	wait_returned = 1;
	return NULL;
}

int main(void)
{
	char dir[] = "/tmp/omx-test-XXXXXX";
	if (unit_lock_dir(dir) < 0)
		return 2;
	setenv("OMX_IFACES", "mem0", 1);
	setenv("OMX_PROCESS_BINDING", "1,0", 1); /* endpoint 0 -> CPU 1, endpoint 1 -> CPU 0 */
	setenv("OMX_WAITINTR", "1", 1);
	setenv("OMX_PROGRESS_THREAD", "0", 1);
	setenv("OMX_SPIN_US", "0", 1);
	struct omx_memnet *hub = omx_memnet_create();
	omx__test_set_memnet(hub, 9000);
	CHECK(omx_init() == OMX_SUCCESS);
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	omx_endpoint_t e0;
	CHECK(omx_open_endpoint(0, 1, 1, NULL, 0, &e0) == OMX_SUCCESS);
	cpu_set_t set;
	CHECK(sched_getaffinity(0, sizeof(set), &set) == 0);
	CHECK(CPU_COUNT(&set) == 1 && CPU_ISSET(0, &set)); /* endpoint 1 -> CPU 0 */
	if (ncpu > 1) {
		CHECK(omx_open_endpoint(0, 0, 1, NULL, 0, &ep) == OMX_SUCCESS);
		CHECK(sched_getaffinity(0, sizeof(set), &set) == 0);
		CHECK(CPU_COUNT(&set) == 1 && CPU_ISSET(1, &set)); /* endpoint 0 -> CPU 1 */
	} else {
		CHECK(omx_open_endpoint(0, 0, 1, NULL, 0, &ep) == OMX_SUCCESS);
	}
	CPU_ZERO(&set);
	for (int c = 0; c < ncpu; c++)
		CPU_SET(c, &set);
	sched_setaffinity(0, sizeof(set), &set);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1; /* no SA_RESTART: poll() returns EINTR */
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t t;
	pthread_create(&t, NULL, waiter, NULL);
	usleep(100000);
	CHECK(!wait_returned);
	for (int i = 0; i < 100 && !wait_returned; i++) {
		pthread_kill(t, SIGUSR1);
		usleep(50000);
	}
	CHECK(wait_returned && wait_result == 0);
	if (!wait_returned)
		omx_wakeup(ep);
	pthread_join(t, NULL);
	omx_close_endpoint(ep);
	omx_close_endpoint(e0);
	omx_finalize();
	omx_memnet_destroy(hub);
	return unit_finish(dir);
}
