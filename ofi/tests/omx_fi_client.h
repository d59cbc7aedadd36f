/*
 * omx_fi_client.h - what omx_fi_client.c (the checks, main) and omx_fi_scenarios.c (one scenario
 * per defect fixed in the provider) share: the endpoint of the run and the helpers around it.
 */
#ifndef OMX_FI_CLIENT_H
#define OMX_FI_CLIENT_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define CHECK(c, ...)                                                                                            \
	do {                                                                                                     \
		if (c) {                                                                                         \
			printf("ok - " __VA_ARGS__);                                                             \
			printf("\n");                                                                            \
		} else {                                                                                         \
			printf("FAIL - " __VA_ARGS__);                                                           \
			printf(" (%s:%d)\n", __FILE__, __LINE__);                                                \
			fails++;                                                                                 \
		}                                                                                                \
	} while (0)
#define DIE(...)                                                                                                 \
	do {                                                                                                     \
		fprintf(stderr, "omx_fi_client: " __VA_ARGS__);                                                  \
		fprintf(stderr, "\n");                                                                           \
		exit(1);                                                                                         \
	} while (0)

struct op {
	struct fi_context fc; /* first: FI_CLAIM uses it */
	int done, err;
	size_t len, olen;
	uint64_t tag, flags, data;
	fi_addr_t src;
};

extern int fails;
extern struct fid_ep *ep;
extern struct fid_av *av;
extern struct fid_cq *cq;
extern fi_addr_t peer, self;
extern int use_data; /* endpoints opened with FI_REMOTE_CQ_DATA */

double now(void);
void poll_cq(void);
int wait_op(struct op *o, double secs);
void barrier(void);
void close_all(void);
void fill(uint8_t *b, size_t n, uint64_t seed);
int verify(const uint8_t *b, size_t n, uint64_t seed);

/* omx_fi_scenarios.c */
void close_scenario(int is_a, const char *dir);
void peekerr_scenario(int is_a, const char *dir);
void avremove_scenario(int is_a);
void cqfail_run(void);
void cqgrow_run(void);
void unexpfail_run(int memory_back);
void settle(double secs);
void flag_set(const char *dir, const char *name);
int flag_wait(const char *dir, const char *name, double secs);
int flag_wait_polling(const char *dir, const char *name, double secs);

/* omx_fi_reserve.c */
void reserve_scenario(int is_a, const char *dir);
void reserveclose_scenario(int is_a, const char *dir);
void reverse_scenario(int is_a);

#endif
