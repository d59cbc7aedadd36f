/* list.h - intrusive circular doubly-linked lists (request queues, partner lists). */
#ifndef OMX_LIST_H
#define OMX_LIST_H

#include <stddef.h>

struct omx_list {
	struct omx_list *next, *prev;
};

#define omx_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

static inline void omx_list_init(struct omx_list *h)
{
	h->next = h->prev = h;
}

static inline int omx_list_empty(const struct omx_list *h)
{
	return h->next == h;
}

/* An element that is on no list points to itself (so removal is idempotent). */
static inline int omx_list_linked(const struct omx_list *e)
{
	return e->next != e;
}

static inline unsigned omx_list_len(const struct omx_list *h)
{
	unsigned n = 0;
	for (const struct omx_list *e = h->next; e != h; e = e->next)
		n++;
	return n;
}

static inline void omx_list_add_tail(struct omx_list *h, struct omx_list *e)
{
	e->prev = h->prev;
	e->next = h;
	h->prev->next = e;
	h->prev = e;
}

/* At the front: what is due soonest on a list kept in due order. */
static inline void omx_list_add_head(struct omx_list *h, struct omx_list *e)
{
	omx_list_add_tail(h->next, e);
}

static inline void omx_list_del(struct omx_list *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->next = e->prev = e;
}

#define omx_list_first(h, type, member) (omx_list_empty(h) ? NULL : omx_container_of((h)->next, type, member))

#define omx_list_for_each_safe(pos, tmp, h) for (pos = (h)->next, tmp = pos->next; pos != (h); pos = tmp, tmp = pos->next)

#endif
