/* crc16.c - CRC-16/XMODEM, the debug checksum of wire.md 2.3, and nic id helpers. */
#include "wire/wire.h"

uint16_t omx_wire_crc16(const uint8_t *data, size_t len, uint16_t crc)
{
	for (size_t i = 0; i < len; i++) {
		crc ^= (uint16_t)(data[i] << 8);
		for (int b = 0; b < 8; b++)
			crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
	}
	return crc;
}

uint64_t omx_mac_to_nic_id(const uint8_t mac[6])
{
	uint64_t v = 0;
	for (int i = 0; i < 6; i++)
		v = (v << 8) | mac[i];
	return v;
}

void omx_nic_id_to_mac(uint64_t nic_id, uint8_t mac[6])
{
	for (int i = 5; i >= 0; i--) {
		mac[i] = (uint8_t)(nic_id & 0xff);
		nic_id >>= 8;
	}
}
