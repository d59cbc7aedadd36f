/*
 * test_net_shm_publish.c - what a producer's late publication leaves in the ring (src/shm/ring.c:
 * frames past one line are published by a plain store after a look at the slot's word). A
 * producer stalled for a second right between that look and its store, whose slot was skipped
 * meanwhile, stores a word that no longer belongs there. Both outcomes are made by hand here, as such a store would leave
 * them, and the ring must go on:
 * - a wrong word in a slot not claimed yet (the slot reused and consumed since): the consumer
 *   sees no frame there, and the next producer of the slot publishes over it, by either way
 *   (one-line frames by a compare-and-swap, longer ones by a store);
 * - the word of a published frame set back to "free for this round": the consumer takes it for a
 *   claim not published yet, skips it after the stall time (counted), and the frames behind it
 *   come through.
 * Rings live in a private OMX_SHM_DIR.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "shm/ring_layout.h" /* the slots' words, set by hand */
#include "shm/shm.h"
#include "unit_check.h"

struct got {
	unsigned n;
	uint8_t first[8];
	size_t len[8];
};

static void keep(void *arg, const uint8_t *f, size_t len)
{
	struct got *g = arg;
	if (g->n < 8) {
		g->first[g->n] = len ? f[0] : 0;
		g->len[g->n] = len;
	}
	g->n++;
}

/* A frame of len bytes (at most 100): up to 48, one line of the slot (published by a
 * compare-and-swap), more, two (by a store). */
static int push_frame(struct omx_shm_ring *r, uint8_t mark, size_t len)
{
	uint8_t frame[100];
	memset(frame, mark, sizeof(frame));
	struct iovec iov = { frame, len };
	int bell = 0;
	return omx_shm_ring_push(r, &iov, 1, &bell);
}

static struct slot *slot_of(struct omx_shm_ring *r, uint64_t pos)
{
	return (struct slot *)(r->slots + (size_t)(pos & r->mask) * r->stride);
}

/* Polls until n frames in all arrived or 5 s passed. */
static void poll_for(struct omx_shm_ring *own, struct got *g, unsigned n)
{
	uint64_t until = omx_shm_now_ns() + 5000000000ull;
	while (g->n < n && omx_shm_now_ns() < until)
		(void)omx_shm_ring_poll(own, keep, g, 8);
}

/* A ring of endpoint `ep` (its owner's view) and a producer's view of it; 0 if either failed. */
static int ring_pair(uint8_t ep, struct omx_shm_ring **own, struct omx_shm_ring **prod)
{
	const uint8_t mac[6] = { 2, 0, 0, 0, 0, 20 };
	int err = 0;
	*own = omx_shm_ring_create(mac, ep, 2048, 64 << 10, 1, &err);
	*prod = *own ? omx_shm_ring_attach(mac, ep, &err) : NULL;
	CHECK(*own != NULL && *prod != NULL);
	return *own && *prod;
}

static void wrong_word_ahead(void)
{
	struct omx_shm_ring *own, *prod;
	if (!ring_pair(1, &own, &prod))
		return;
	/* A round of frames first, so that the slot has been used and consumed. */
	uint32_t slots = omx_shm_ring_slots(own);
	struct got g;
	memset(&g, 0, sizeof(g));
	for (uint32_t i = 0; i < slots; i++) {
		CHECK(push_frame(prod, 0x10, 100) == 0);
		poll_for(own, &g, i + 1);
	}
	CHECK_EQ(g.n, slots);
	/* Two rounds old, in the next two slots: one gets a two-line frame, the other a one-line one. */
	uint64_t pos = __atomic_load_n(&prod->h->tail, __ATOMIC_RELAXED);
	for (uint64_t p = pos; p < pos + 2; p++)
		__atomic_store_n(&slot_of(prod, p)->seq, p + 1 - 2 * (uint64_t)slots, __ATOMIC_RELEASE);
	memset(&g, 0, sizeof(g));
	for (int i = 0; i < 100000; i++)
		(void)omx_shm_ring_poll(own, keep, &g, 8);
	CHECK_EQ(g.n, 0); /* nothing taken from a slot nobody published */
	CHECK(push_frame(prod, 0x11, 100) == 0);
	CHECK(push_frame(prod, 0x12, 40) == 0);
	CHECK(push_frame(prod, 0x13, 40) == 0);
	poll_for(own, &g, 3);
	CHECK_EQ(g.n, 3);
	CHECK(g.first[0] == 0x11 && g.first[1] == 0x12 && g.first[2] == 0x13);
	CHECK(g.len[0] == 100 && g.len[1] == 40);
	CHECK_EQ(omx_shm_ring_skipped(own), 0);
	printf("wrong_word_ahead: a stale word in an unclaimed slot was published over\n");
	omx_shm_ring_close(prod);
	omx_shm_ring_close(own);
}

static void publication_undone(void)
{
	struct omx_shm_ring *own, *prod;
	if (!ring_pair(2, &own, &prod))
		return;
	uint64_t pos = __atomic_load_n(&prod->h->tail, __ATOMIC_RELAXED);
	CHECK(push_frame(prod, 0x21, 100) == 0);
	struct slot *s = slot_of(prod, pos);
	CHECK_EQ(__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE), pos + 1);
	/* The last round's producer of this slot, stalled since its look, stores at last. */
	__atomic_store_n(&s->seq, pos - prod->mask, __ATOMIC_RELEASE);
	CHECK(push_frame(prod, 0x22, 100) == 0);
	CHECK(omx_shm_ring_arm(own) == 1); /* a claimed, unpublished slot at the head: no sleeping */
	struct got g;
	memset(&g, 0, sizeof(g));
	poll_for(own, &g, 1);
	CHECK_EQ(g.n, 1);
	CHECK(g.first[0] == 0x22); /* the undone frame is lost, the next one delivered */
	CHECK_EQ(omx_shm_ring_skipped(own), 1);
	CHECK(push_frame(prod, 0x23, 40) == 0);
	poll_for(own, &g, 2);
	CHECK(g.n == 2 && g.first[1] == 0x23);
	printf("publication_undone: skipped after the stall time, the frames behind delivered\n");
	omx_shm_ring_close(prod);
	omx_shm_ring_close(own);
}

int main(void)
{
	char dir[] = "/tmp/omx-shm-publish.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	setenv("OMX_SHM_DIR", dir, 1);
	wrong_word_ahead();
	publication_undone();
	return unit_finish(dir);
}
