/* wire_check.h - tiny assertion helpers for the wire unit tests (no framework). */
#ifndef OMX_TEST_WIRE_CHECK_H
#define OMX_TEST_WIRE_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long t_pass, t_fail;

#define T_REPORT_MAX 60

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (cond) {                                                                \
			t_pass++;                                                          \
		} else {                                                                   \
			if (t_fail++ < T_REPORT_MAX)                                       \
				fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                          \
	} while (0)

#define CHECK_EQ(a, b)                                                                          \
	do {                                                                                    \
		unsigned long long va_ = (unsigned long long)(a), vb_ = (unsigned long long)(b); \
		if (va_ == vb_) {                                                               \
			t_pass++;                                                               \
		} else {                                                                        \
			if (t_fail++ < T_REPORT_MAX)                                            \
				fprintf(stderr, "%s:%d: FAILED: %s == %s (0x%llx != 0x%llx)\n",  \
					__FILE__, __LINE__, #a, #b, va_, vb_);                  \
		}                                                                               \
	} while (0)

/* A NULL diff means equal; otherwise print the differing field with some context. */
#define CHECK_SAME(diff, ctx)                                                                      \
	do {                                                                                       \
		const char *d_ = (diff);                                                           \
		if (!d_) {                                                                         \
			t_pass++;                                                                  \
		} else {                                                                           \
			if (t_fail++ < T_REPORT_MAX)                                               \
				fprintf(stderr, "%s:%d: FAILED: packets differ in %s (%s)\n", __FILE__, \
					__LINE__, d_, ctx);                                        \
		}                                                                                  \
	} while (0)

static inline int t_summary(const char *name)
{
	printf("%s: %lu passed, %lu failed\n", name, t_pass, t_fail);
	return t_fail ? 1 : 0;
}

#endif
