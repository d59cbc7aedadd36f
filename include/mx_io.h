/*
 * mx_io.h - the few MX driver-interface types Open MPI's configure looks for.
 * Written from spec/mx-api.md sections 2, 3.1, 3.6.
 *
 * The spec says this header expects <stdint.h> types to be available already; including
 * <stdint.h> here as well only makes the header self-contained.
 */
#ifndef MX_IO_H
#define MX_IO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MX__INVALID_HANDLE -1

typedef int mx_endpt_handle_t;

typedef struct {
	uint32_t board_number;
	uint8_t mapper_mac[6];
	uint16_t iport;
	uint32_t map_version;
	uint32_t num_hosts;
	uint32_t network_configured;
	uint32_t routes_valid;
	uint32_t level;
	uint32_t flags;
} mx_mapper_state_t;

#ifdef __cplusplus
}
#endif

#endif /* MX_IO_H */
