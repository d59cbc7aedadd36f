/*
 * mx_info.c - mx_get_info (mx-api.md 11, omx-native-api.md 7.6).
 *
 * Recommended deviations implemented:
 *  - NULL out_val is reported as MX_BAD_INFO_VAL for every key (the reference crashed for
 *    the constant keys);
 *  - MX_NIC_IDS fills the 0-terminated list of nic ids (native OMX_INFO_BOARD_IDS);
 *  - MX_COUNTERS_LABELS fills one NUL-terminated label per 128-byte slot (the reference
 *    passed a NULL counter index and crashed);
 *  - MX_COPY_SEND_MAX reports the configured remote rendezvous threshold even before the
 *    first endpoint open (the reference reported 0 then).
 * Keys whose output length the reference does not check (4, 11, 12, 13, 15, 16) still do
 * not check it, for compatibility; they write one uint32_t.
 */
#include "mx/mx_internal.h"

#define MX_FIXED_STRING "N/A (Open-MX)"

static mx_return_t info_u32(uint32_t value, void *out_val)
{
	memcpy(out_val, &value, sizeof(value));
	return MX_SUCCESS;
}

static mx_return_t info_string(void *out_val, uint32_t out_len)
{
	size_t n = strlen(MX_FIXED_STRING);

	if (out_len < 1)
		return mx__raise(NULL, OMX_BAD_INFO_LENGTH, "Getting info (string output)");
	if (n > out_len - 1)
		n = out_len - 1;
	memcpy(out_val, MX_FIXED_STRING, n);
	((char *)out_val)[n] = '\0';
	return MX_SUCCESS;
}

static mx_return_t info_counter_labels(mx_endpoint_t ep, void *out_val, uint32_t out_len)
{
	uint32_t count;
	omx_return_t ret = omx_get_info(mx__ep(ep), OMX_INFO_COUNTER_MAX, NULL, 0, &count, sizeof(count));

	if (ret != OMX_SUCCESS)
		return mx__ret_to_mx(ret);
	if ((uint64_t)out_len < (uint64_t)count * MX_MAX_STR_LEN)
		return mx__raise(NULL, OMX_BAD_INFO_LENGTH, "Getting counter labels (buffer too short)");
	for (uint32_t i = 0; i < count && i < 256; i++) {
		char *slot = (char *)out_val + (size_t)i * MX_MAX_STR_LEN;
		uint8_t index = (uint8_t)i;

		memset(slot, 0, MX_MAX_STR_LEN);
		ret = omx_get_info(mx__ep(ep), OMX_INFO_COUNTER_LABEL, &index, sizeof(index), slot,
				   MX_MAX_STR_LEN);
		if (ret != OMX_SUCCESS)
			return mx__ret_to_mx(ret);
		slot[MX_MAX_STR_LEN - 1] = '\0';
	}
	return MX_SUCCESS;
}

/* Keys answered by one native key with the same in/out conventions. */
static int native_key(mx_get_info_key_t key, omx_info_key_t *nkey)
{
	switch (key) {
	case MX_NIC_COUNT: *nkey = OMX_INFO_BOARD_COUNT; return 1;
	case MX_NIC_IDS: *nkey = OMX_INFO_BOARD_IDS; return 1;
	case MX_MAX_NATIVE_ENDPOINTS: *nkey = OMX_INFO_ENDPOINT_MAX; return 1;
	case MX_COUNTERS_COUNT: *nkey = OMX_INFO_COUNTER_MAX; return 1;
	case MX_COUNTERS_VALUES: *nkey = OMX_INFO_COUNTER_VALUES; return 1;
	case MX_NUMA_NODE: *nkey = OMX_INFO_BOARD_NUMA_NODE; return 1;
	default: return 0;
	}
}

mx_return_t mx_get_info(mx_endpoint_t ep, mx_get_info_key_t key, void *in_val, uint32_t in_len,
			void *out_val, uint32_t out_len)
{
	omx_info_key_t nkey;

	/* Checked first, for every key (endpoint handler if ep, else the global one). */
	if (!out_val)
		return mx__raise(ep, OMX_BAD_INFO_ADDRESS, "Getting info (NULL output buffer)");
	if (native_key(key, &nkey))
		return mx__ret_to_mx(omx_get_info(mx__ep(ep), nkey, in_val, in_len, out_val, out_len));

	switch (key) {
	case MX_NATIVE_REQUESTS:
		return info_u32(UINT32_MAX, out_val);
	case MX_COUNTERS_LABELS:
		return info_counter_labels(ep, out_val, out_len);
	case MX_PRODUCT_CODE:
	case MX_PART_NUMBER:
	case MX_SERIAL_NUMBER:
		return info_string(out_val, out_len);
	case MX_PORT_COUNT:
		return info_u32(1, out_val);
	case MX_PIO_SEND_MAX:
		return info_u32(128, out_val);
	case MX_COPY_SEND_MAX:
		return info_u32(mx__copy_send_max(), out_val);
	case MX_NET_TYPE:
		return info_u32(MX_NET_ETHER, out_val);
	case MX_LINE_SPEED:
		return info_u32(mx__wire_compat() ? MX_SPEED_10G : MX_SPEED_OPEN_MX, out_val);
	default:
		return mx__raise(NULL, OMX_BAD_INFO_KEY, "Getting info (unknown key)");
	}
}
