/*
 * ofx_av.c - address vectors of the omx provider: a table of peer names indexed by fi_addr, and a
 * hash on (nic, endpoint) to name the sender of an incoming message.
 */
#include <stdlib.h>
#include <string.h>

#include "ofx.h"

static size_t av_hash(uint64_t nic, uint32_t epid, size_t cap)
{
	uint64_t h = (nic ^ ((uint64_t)epid << 48) ^ epid) * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (cap - 1);
}

static void av_hash_put(struct ofx_av *av, size_t idx)
{
	size_t i = av_hash(av->tab[idx].nic, av->tab[idx].epid, av->hcap);
	while (av->hash[i])
		i = (i + 1) & (av->hcap - 1);
	av->hash[i] = idx + 1;
}

/* fi_addr of (nic, endpoint) in av, FI_ADDR_NOTAVAIL if absent. Domain lock held. */
fi_addr_t av_find(const struct ofx_av *av, uint64_t nic, uint32_t epid)
{
	if (!av || !av->hcap)
		return FI_ADDR_NOTAVAIL;
	for (size_t i = av_hash(nic, epid, av->hcap); av->hash[i]; i = (i + 1) & (av->hcap - 1)) {
		size_t k = av->hash[i] - 1;
		if (av->valid[k] && av->tab[k].nic == nic && av->tab[k].epid == epid)
			return k;
	}
	return FI_ADDR_NOTAVAIL;
}

static int av_insert(struct fid_av *fav, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
		     void *context)
{
	struct ofx_av *av = (struct ofx_av *)fav;
	if (flags)
		return -FI_EBADFLAGS;
	if (count && !addr)
		return -FI_EINVAL;
	if (count > ((size_t)1 << 32))
		return -FI_ENOMEM;
	dom_lock(av->dom);
	if (av->n + count > av->cap) {
		size_t ncap = av->cap ? av->cap : 64;
		while (ncap < av->n + count)
			ncap *= 2;
		struct ofx_name *t = realloc(av->tab, ncap * sizeof(*t));
		unsigned char *v = t ? realloc(av->valid, ncap) : NULL;
		if (t)
			av->tab = t;
		if (!t || !v) {
			dom_unlock(av->dom);
			return -FI_ENOMEM;
		}
		av->valid = v;
		av->cap = ncap;
	}
	if ((av->n + count) * 2 > av->hcap) {
		size_t hcap = av->hcap ? av->hcap : 128;
		while ((av->n + count) * 2 > hcap)
			hcap *= 2;
		size_t *h = calloc(hcap, sizeof(*h));
		if (!h) {
			dom_unlock(av->dom);
			return -FI_ENOMEM;
		}
		free(av->hash);
		av->hash = h;
		av->hcap = hcap;
		for (size_t k = 0; k < av->n; k++)
			av_hash_put(av, k);
	}
	for (size_t i = 0; i < count; i++) {
		memcpy(&av->tab[av->n], (const char *)addr + i * sizeof(struct ofx_name), sizeof(struct ofx_name));
		av->valid[av->n] = 1;
		av_hash_put(av, av->n);
		OFX_TRACE("av insert %012" PRIx64 ":%u key %08x -> fi_addr %zu\n", av->tab[av->n].nic, av->tab[av->n].epid,
			  av->tab[av->n].key, av->n);
		if (fi_addr)
			fi_addr[i] = av->n;
		av->n++;
	}
	dom_unlock(av->dom);
	return (int)count;
}

static int av_insertsvc(struct fid_av *fav, const char *node, const char *service, fi_addr_t *fi_addr,
			uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static int av_insertsym(struct fid_av *fav, const char *node, size_t nodecnt, const char *service,
			size_t svccnt, fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static int av_remove(struct fid_av *fav, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	struct ofx_av *av = (struct ofx_av *)fav;
	int ret = 0;
	if (count && !fi_addr)
		return -FI_EINVAL;
	dom_lock(av->dom);
	for (size_t i = 0; i < count; i++) {
		if (fi_addr[i] >= av->n)
			ret = -FI_EINVAL;
		else
			av->valid[fi_addr[i]] = 0;
	}
	dom_unlock(av->dom);
	return ret;
}

static int av_lookup(struct fid_av *fav, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
	struct ofx_av *av = (struct ofx_av *)fav;
	int ret = 0;
	if (!addrlen || (*addrlen && !addr))
		return -FI_EINVAL;
	dom_lock(av->dom);
	if (fi_addr >= av->n || !av->valid[fi_addr]) {
		ret = -FI_EINVAL;
	} else {
		size_t n = *addrlen < sizeof(struct ofx_name) ? *addrlen : sizeof(struct ofx_name);
		memcpy(addr, &av->tab[fi_addr], n);
		*addrlen = sizeof(struct ofx_name);
	}
	dom_unlock(av->dom);
	return ret;
}

static const char *av_straddr(struct fid_av *fav, const void *addr, char *buf, size_t *len)
{
	struct ofx_name nm;
	if (!addr || !len || (*len && !buf))
		return NULL;
	memcpy(&nm, addr, sizeof(nm));
	char tmp[64];
	int n = snprintf(tmp, sizeof(tmp), "omx://%012" PRIx64 ":%u:%08x", nm.nic, nm.epid, nm.key);
	if (*len > 0)
		snprintf(buf, *len, "%s", tmp);
	*len = (size_t)n + 1;
	return buf;
}

static int av_set_open(struct fid_av *fav, struct fi_av_set_attr *attr, struct fid_av_set **set, void *context)
{
	return -FI_ENOSYS;
}

static int av_close(struct fid *fid)
{
	struct ofx_av *av = (struct ofx_av *)fid;
	free(av->tab);
	free(av->valid);
	free(av->hash);
	free(av);
	return 0;
}

static struct fi_ops av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = av_close,
	.bind = ofx_no_bind,
	.control = ofx_no_control,
	.ops_open = ofx_no_ops_open,
};

static struct fi_ops_av av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = av_insert,
	.insertsvc = av_insertsvc,
	.insertsym = av_insertsym,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
	.av_set = av_set_open,
};

int dom_av_open(struct fid_domain *fdom, struct fi_av_attr *attr, struct fid_av **out, void *context)
{
	if (attr && attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE)
		return -FI_EINVAL;
	if (attr && (attr->flags & (FI_EVENT | FI_READ | FI_SYMMETRIC)))
		return -FI_ENOSYS;
	if (attr && attr->name)
		return -FI_ENOSYS; /* shared AVs */
	struct ofx_av *av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	av->av.fid.fclass = FI_CLASS_AV;
	av->av.fid.context = context;
	av->av.fid.ops = &av_fi_ops;
	av->av.ops = &av_ops;
	av->dom = (struct ofx_domain *)fdom;
	*out = &av->av;
	return 0;
}
