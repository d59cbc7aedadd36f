/*
 * broker.h - the protocol between the library and omxd, the privilege broker (design.md).
 * A Unix stream connection per endpoint: the client sends one request, omxd answers with a
 * reply and, on success, the packet socket as SCM_RIGHTS ancillary data. The connection stays
 * open for as long as the client uses the socket; closing it (or dying) releases the grant.
 * Both ends run on the same host and kernel: native byte order, fixed-size structs.
 */
#ifndef OMX_NET_BROKER_H
#define OMX_NET_BROKER_H

#include <net/if.h>
#include <stdint.h>
#include <linux/if_packet.h>

#define OMX_BROKER_MAGIC 0x424d584fu /* "OXMB" */
#define OMX_BROKER_VERSION 1u
#define OMX_BROKER_DEFAULT_PATH "/run/omx/omxd.sock"

/* Request flags. */
#define OMX_BROKER_F_QDISC_BYPASS 0x1u
#define OMX_BROKER_F_ALL_ENDPOINTS 0x2u  /* raw endpoints and tools: root only */
#define OMX_BROKER_F_NACK_RESPONDER 0x4u /* unlocked filter: root only */

struct omx_broker_request {
	uint32_t magic;
	uint32_t version;
	char ifname[IF_NAMESIZE];
	uint32_t endpoint;
	uint32_t flags;
	struct tpacket_req ring;
};

struct omx_broker_reply {
	uint32_t magic;
	int32_t status; /* 0 (socket attached) or -errno */
	char message[120]; /* why, for the client's error message; NUL-terminated */
};

#endif
