/*
 * mx_abi_link.c - an "MX application" built like a third-party one: compiled only against
 * the installed-style headers (a staged copy of include/, nothing from src/) and linked
 * with -lmyriexpress. Needs no network: init, error handlers, get_info, code texts.
 * check_symbols.sh then inspects its DT_NEEDED and version requirements.
 */
#include <stdio.h>
#include <string.h>

#include <myriexpress.h>
#include <mx_extensions.h>
#include <mx_raw.h>
#include <mx_internals/mx__driver_interface.h>

static int failures;

#define CHECK(cond) \
	do { \
		if (!(cond)) { \
			failures++; \
			fprintf(stderr, "mx_abi_link: check failed line %d: %s\n", __LINE__, #cond); \
		} \
	} while (0)

/* Reference the versioned entry points (mx-api.md 1.3) so the binary requires
 * MX_0.9, MX_0.91 and MX_0.92; they are not called (no network needed). */
static void (*const volatile versioned[])(void) = {
	(void (*)(void))mx_open_endpoint, (void (*)(void))mx_decompose_endpoint_addr,
	(void (*)(void))mx_get_info, (void (*)(void))mx_test, (void (*)(void))mx_wait,
	(void (*)(void))mx_iprobe, (void (*)(void))mx__init_api,
};

static mx_return_t counting_handler(char *str, mx_return_t ret)
{
	(void)str;
	return ret;
}

int main(void)
{
	mx_error_handler_t prev;
	uint32_t u32 = 0, count = 0;
	uint64_t ids[64];
	char text[MX_MAX_STR_LEN];

	for (size_t i = 0; i < sizeof(versioned) / sizeof(versioned[0]); i++)
		CHECK(versioned[i] != NULL);

	/* Handlers: a copy-relocated data object holding a callable function. */
	CHECK(MX_ERRORS_RETURN(NULL, MX_BUSY) == MX_BUSY);
	prev = mx_set_error_handler(MX_ERRORS_RETURN);
	CHECK(prev == MX_ERRORS_ARE_FATAL); /* before init: a fatal handler */

	CHECK(mx_init() == MX_SUCCESS);
	CHECK(mx_init() == MX_SUCCESS); /* idempotent */

	CHECK(mx_get_info(NULL, MX_NIC_COUNT, NULL, 0, &count, sizeof(count)) == MX_SUCCESS);
	if (count + 1 <= sizeof(ids) / sizeof(ids[0])) {
		memset(ids, 0xff, sizeof(ids));
		CHECK(mx_get_info(NULL, MX_NIC_IDS, NULL, 0, ids, (uint32_t)((count + 1) * 8)) == MX_SUCCESS);
		CHECK(ids[count] == 0);
	}
	CHECK(mx_get_info(NULL, MX_NATIVE_REQUESTS, NULL, 0, &u32, sizeof(u32)) == MX_SUCCESS);
	CHECK(u32 == 0xFFFFFFFFu);
	CHECK(mx_get_info(NULL, MX_COUNTERS_COUNT, NULL, 0, &u32, sizeof(u32)) == MX_SUCCESS);
	CHECK(u32 == 85);
	CHECK(mx_get_info(NULL, MX_NET_TYPE, NULL, 0, &u32, sizeof(u32)) == MX_SUCCESS);
	CHECK(u32 == MX_NET_ETHER);
	CHECK(mx_get_info(NULL, MX_PRODUCT_CODE, NULL, 0, text, sizeof(text)) == MX_SUCCESS);
	CHECK(strcmp(text, "N/A (Open-MX)") == 0);
	CHECK(mx_get_info(NULL, MX_NIC_COUNT, NULL, 0, NULL, 4) == MX_BAD_INFO_VAL);
	CHECK(mx_get_info(NULL, (mx_get_info_key_t)999, NULL, 0, &u32, 4) == MX_BAD_INFO_KEY);

	CHECK(strcmp(mx_strerror(MX_SUCCESS), "Success") == 0);
	CHECK(strcmp(mx_strerror(MX_BAD_INFO_KEY), "Bad Info Key") == 0);
	CHECK(strcmp(mx_strstatus(MX_STATUS_TRUNCATED), "Message Truncated") == 0);

	prev = mx_set_error_handler(counting_handler);
	CHECK(prev == MX_ERRORS_RETURN);
	prev = mx_set_error_handler(MX_ERRORS_RETURN);
	CHECK(prev == counting_handler);

	CHECK(mx_finalize() == MX_SUCCESS);
	if (failures) {
		fprintf(stderr, "mx_abi_link: %d failure(s)\n", failures);
		return 1;
	}
	printf("mx_abi_link: ok (%u board(s))\n", count);
	return 0;
}
