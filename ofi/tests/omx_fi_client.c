/*
 * omx_fi_client.c - libfabric-only test client for the "omx" provider (libomx-fi.so).
 *
 *   omx_fi_client getinfo                 fi_getinfo checks only (no peer needed)
 *   omx_fi_client unexpfail [back]        one endpoint sending to itself while unexpected messages
 *                                         cannot be buffered (test build, see unexpfail_run)
 *   omx_fi_client cqfail                  one endpoint sending to itself while its CQ cannot grow
 *                                         (needs the test build of the provider, see cqfail_run)
 *   omx_fi_client cqgrow                  one endpoint sending to itself while its CQ grows wrapped
 *   omx_fi_client a|b DIR [map|table] [data] [close|peekerr|avremove]
 *                                         two peers (two hosts): names are exchanged through
 *                                         DIR/name.a and DIR/name.b, then both run the checks, or
 *                                         only the scenario named (omx_fi_scenarios.c)
 * Prints "ok - ..." per check; exits 0 only if every check passed.
 */
#include "omx_fi_client.h"

#define TAG_BAR 0x7e00000000000001ULL

int fails;
static struct fid_fabric *fab;
static struct fid_domain *dom;
struct fid_ep *ep;
struct fid_av *av;
struct fid_cq *cq;
fi_addr_t peer, self;

double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void poll_cq(void)
{
	struct fi_cq_tagged_entry e[8];
	fi_addr_t src[8];
	ssize_t n = fi_cq_readfrom(cq, e, 8, src);
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry ee;
		static char err_data[32];
		memset(&ee, 0, sizeof(ee));
		ee.err_data = err_data; /* the application's buffer: not to be replaced (fi_cq(3)) */
		ee.err_data_size = sizeof(err_data);
		if (fi_cq_readerr(cq, &ee, 0) == 1 && ee.op_context) {
			struct op *o = ee.op_context;
			if (ee.err_data != err_data || ee.err_data_size != 0) /* reported only when wrong */
				CHECK(0, "error entry left the application's err_data buffer in place (size %zu)",
				      ee.err_data_size);
			o->done++; /* counted: a completion must come exactly once */
			o->err = ee.err;
			o->len = ee.len;
			o->olen = ee.olen;
			o->tag = ee.tag;
			o->flags = ee.flags;
		}
		return;
	}
	for (ssize_t i = 0; i < n; i++) {
		struct op *o = e[i].op_context;
		if (!o)
			continue;
		o->done++;
		o->err = 0;
		o->len = e[i].len;
		o->tag = e[i].tag;
		o->flags = e[i].flags;
		o->data = e[i].data;
		o->src = src[i];
	}
}

int wait_op(struct op *o, double secs)
{
	double end = now() + secs;
	while (!o->done && now() < end)
		poll_cq();
	return o->done;
}

void fill(uint8_t *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

int verify(const uint8_t *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (uint8_t)((i * 131 + seed * 7 + (i >> 8)) & 0xff))
			return 0;
	return 1;
}

static ssize_t retry(ssize_t r)
{
	return r;
}

static void tsend_wait(const void *buf, size_t len, fi_addr_t to, uint64_t tag)
{
	struct op o = {0};
	ssize_t r = retry(fi_tsend(ep, buf, len, NULL, to, tag, &o));
	if (r)
		DIE("fi_tsend: %s", fi_strerror((int)-r));
	if (!wait_op(&o, 60) || o.err)
		DIE("send tag %" PRIx64 " did not complete (err %d)", tag, o.err);
}

void barrier(void)
{
	static char junk[8];
	struct op r = {0};
	if (fi_trecv(ep, junk, sizeof(junk), NULL, peer, TAG_BAR, 0, &r))
		DIE("barrier recv");
	tsend_wait("bar", 3, peer, TAG_BAR);
	if (!wait_op(&r, 60))
		DIE("barrier timed out");
}

static int getinfo_rc(uint64_t caps, enum fi_ep_type type, enum fi_progress prog, size_t cq_data, uint64_t tagfmt)
{
	struct fi_info *h = fi_allocinfo(), *info = NULL;
	h->caps = caps;
	h->ep_attr->type = type;
	h->ep_attr->mem_tag_format = tagfmt;
	h->domain_attr->data_progress = prog;
	h->domain_attr->cq_data_size = cq_data;
	h->fabric_attr->prov_name = strdup("omx");
	int rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
	if (info)
		fi_freeinfo(info);
	fi_freeinfo(h);
	return rc;
}

static void getinfo_checks(void)
{
	CHECK(getinfo_rc(FI_TAGGED, FI_EP_RDM, FI_PROGRESS_MANUAL, 0, 0) == 0, "getinfo FI_TAGGED RDM manual");
	CHECK(getinfo_rc(FI_TAGGED | FI_MSG | FI_DIRECTED_RECV | FI_SOURCE, FI_EP_RDM, FI_PROGRESS_UNSPEC, 0, 0) == 0,
	      "getinfo TAGGED|MSG|DIRECTED_RECV|SOURCE");
	CHECK(getinfo_rc(FI_TAGGED, FI_EP_RDM, FI_PROGRESS_UNSPEC, 0, ~0ULL) == 0, "getinfo 64-bit tags (no FI_MSG)");
	CHECK(getinfo_rc(FI_TAGGED | FI_MSG, FI_EP_RDM, FI_PROGRESS_UNSPEC, 0, ~0ULL) == -FI_ENODATA,
	      "getinfo 64-bit tags with FI_MSG -> ENODATA");
	CHECK(getinfo_rc(FI_TAGGED | FI_RMA, FI_EP_RDM, FI_PROGRESS_UNSPEC, 0, 0) == -FI_ENODATA, "FI_RMA -> ENODATA");
	CHECK(getinfo_rc(FI_TAGGED | FI_REMOTE_CQ_DATA, FI_EP_RDM, FI_PROGRESS_UNSPEC, 4, 0) == 0,
	      "getinfo FI_REMOTE_CQ_DATA, cq_data_size 4");
	{
		struct fi_info *h = fi_allocinfo(), *info = NULL;
		h->caps = FI_TAGGED;
		h->ep_attr->type = FI_EP_RDM;
		h->domain_attr->cq_data_size = 4;
		h->fabric_attr->prov_name = strdup("omx");
		int rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
		CHECK(rc == 0 && (info->caps & FI_REMOTE_CQ_DATA) && info->domain_attr->cq_data_size >= 4,
		      "getinfo FI_TAGGED with cq_data_size 4 (as Open MPI asks) grants FI_REMOTE_CQ_DATA");
		if (info)
			fi_freeinfo(info);
		h->domain_attr->cq_data_size = 0;
		info = NULL;
		rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
		CHECK(rc == 0 && !(info->caps & FI_REMOTE_CQ_DATA) && info->domain_attr->cq_data_size == 0,
		      "getinfo FI_TAGGED without cq_data_size: no FI_REMOTE_CQ_DATA");
		if (info)
			fi_freeinfo(info);
		fi_freeinfo(h);
	}
	CHECK(getinfo_rc(FI_TAGGED | FI_MULTICAST, FI_EP_RDM, FI_PROGRESS_UNSPEC, 0, 0) == -FI_ENODATA,
	      "FI_MULTICAST -> ENODATA");
	CHECK(getinfo_rc(FI_TAGGED | FI_ATOMIC, FI_EP_RDM, FI_PROGRESS_UNSPEC, 0, 0) == -FI_ENODATA,
	      "FI_ATOMIC -> ENODATA");
	CHECK(getinfo_rc(FI_MSG, FI_EP_MSG, FI_PROGRESS_UNSPEC, 0, 0) == -FI_ENODATA, "FI_EP_MSG -> ENODATA");
	CHECK(getinfo_rc(FI_MSG, FI_EP_DGRAM, FI_PROGRESS_UNSPEC, 0, 0) == -FI_ENODATA, "FI_EP_DGRAM -> ENODATA");
	CHECK(getinfo_rc(FI_TAGGED, FI_EP_RDM, FI_PROGRESS_AUTO, 0, 0) == -FI_ENODATA, "FI_PROGRESS_AUTO -> ENODATA");
	CHECK(getinfo_rc(FI_TAGGED | FI_REMOTE_CQ_DATA, FI_EP_RDM, FI_PROGRESS_UNSPEC, 8, 0) == 0,
	      "getinfo cq_data_size 8");
	CHECK(getinfo_rc(FI_TAGGED | FI_REMOTE_CQ_DATA, FI_EP_RDM, FI_PROGRESS_UNSPEC, 16, 0) == -FI_ENODATA,
	      "cq_data_size 16 -> ENODATA");
}

int use_data; /* endpoints opened with FI_REMOTE_CQ_DATA */

static void open_all(const char *avtype)
{
	struct fi_info *h = fi_allocinfo(), *info = NULL;
	h->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV | FI_SOURCE | (use_data ? FI_REMOTE_CQ_DATA : 0);
	h->domain_attr->cq_data_size = use_data ? 4 : 0;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->av_type = strcmp(avtype, "table") ? FI_AV_MAP : FI_AV_TABLE;
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->fabric_attr->prov_name = strdup("omx");
	int rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
	if (rc)
		DIE("fi_getinfo: %s", fi_strerror(-rc));
	CHECK(!strcmp(info->fabric_attr->prov_name, "omx") && info->ep_attr->type == FI_EP_RDM &&
		      info->ep_attr->mem_tag_format == 0x7fffffffffffffffULL &&
		      info->domain_attr->data_progress == FI_PROGRESS_MANUAL,
	      "fi_getinfo returns the omx provider (%s), RDM, 63-bit tags, manual progress",
	      info->domain_attr->name);
	if (use_data)
		CHECK((info->caps & FI_REMOTE_CQ_DATA) && info->domain_attr->cq_data_size >= 4,
		      "FI_REMOTE_CQ_DATA granted, cq_data_size %zu", info->domain_attr->cq_data_size);
	else
		CHECK(!(info->caps & FI_REMOTE_CQ_DATA), "FI_REMOTE_CQ_DATA not granted when not asked for");
	if ((rc = fi_fabric(info->fabric_attr, &fab, NULL)))
		DIE("fi_fabric: %s", fi_strerror(-rc));
	if ((rc = fi_domain(fab, info, &dom, NULL)))
		DIE("fi_domain: %s", fi_strerror(-rc));
	struct fi_av_attr aa = {.type = h->domain_attr->av_type};
	if ((rc = fi_av_open(dom, &aa, &av, NULL)))
		DIE("fi_av_open: %s", fi_strerror(-rc));
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	if ((rc = fi_cq_open(dom, &ca, &cq, NULL)))
		DIE("fi_cq_open: %s", fi_strerror(-rc));
	if ((rc = fi_endpoint(dom, info, &ep, NULL)))
		DIE("fi_endpoint: %s", fi_strerror(-rc));
	if ((rc = fi_ep_bind(ep, &av->fid, 0)) || (rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)))
		DIE("fi_ep_bind: %s", fi_strerror(-rc));
	if ((rc = fi_enable(ep)))
		DIE("fi_enable: %s", fi_strerror(-rc));
	fi_freeinfo(info);
	fi_freeinfo(h);
}

static void exchange(const char *role, const char *dir)
{
	char me[64], other[64], path[512], tmp[520];
	size_t len = sizeof(me);
	int rc = fi_getname(&ep->fid, me, &len);
	CHECK(rc == 0 && len == 16, "fi_getname gives a 16-byte name");
	snprintf(path, sizeof(path), "%s/name.%s", dir, role);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	if (!f || fwrite(me, 1, len, f) != len || fclose(f))
		DIE("cannot write %s", tmp);
	rename(tmp, path);
	snprintf(path, sizeof(path), "%s/name.%s", dir, strcmp(role, "a") ? "a" : "b");
	double end = now() + 60;
	size_t got = 0;
	while (now() < end) {
		f = fopen(path, "rb");
		if (f) {
			got = fread(other, 1, sizeof(other), f);
			fclose(f);
			if (got == 16)
				break;
		}
		usleep(20000);
	}
	if (got != 16)
		DIE("no peer name in %s", path);
	if (!strcmp(role, "b")) {
		/* progress for a while first: a's first message arrives before b knows a's address */
		end = now() + 0.5;
		while (now() < end)
			poll_cq();
	}
	CHECK(fi_av_insert(av, other, 1, &peer, 0, NULL) == 1 && fi_av_insert(av, me, 1, &self, 0, NULL) == 1,
	      "fi_av_insert of the peer and of self");
	/* bad input: error codes, no crash */
	{
		fi_addr_t x;
		char b[64];
		size_t bl = sizeof(b), small = 4;
		struct op o = {0};
		CHECK(fi_av_insert(av, NULL, 1, &x, 0, NULL) == -FI_EINVAL, "fi_av_insert of NULL -> FI_EINVAL");
		CHECK(fi_av_insert(av, other, 1, &x, 1, NULL) == -FI_EBADFLAGS, "fi_av_insert with flags -> FI_EBADFLAGS");
		CHECK(fi_av_lookup(av, 12345, b, &bl) == -FI_EINVAL, "fi_av_lookup of an unknown fi_addr -> FI_EINVAL");
		CHECK(fi_av_straddr(av, NULL, b, &bl) == NULL, "fi_av_straddr of NULL -> NULL");
		CHECK(fi_getname(&ep->fid, b, &small) == -FI_ETOOSMALL && small == 16,
		      "fi_getname with 4 bytes -> FI_ETOOSMALL, needed length 16");
		CHECK(fi_ep_bind(ep, &av->fid, 0) == -FI_EINVAL, "second AV bind (enabled endpoint) -> FI_EINVAL");
		CHECK(fi_tsend(ep, "x", 1, NULL, 12345, 1, &o) == -FI_EINVAL, "fi_tsend to an unknown fi_addr -> FI_EINVAL");
		CHECK(fi_tsend(ep, "x", 1, NULL, peer, 1ULL << 63, &o) == -FI_EINVAL,
		      "fi_tsend with the reserved top tag bit (FI_MSG enabled) -> FI_EINVAL");
	}
	char s[80];
	size_t sl = sizeof(s);
	fi_av_straddr(av, other, s, &sl);
	printf("# peer %s\n", s);
}

static const size_t sizes[] = {0, 1, 31, 33, 128, 200, 4000, 9000, 40000, 300000, 2u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* a sends every size (tag 0x100+i); b receives, preposted or unexpected */
static void sizes_round(int is_a, int preposted, uint64_t base)
{
	uint8_t *bufs[NSIZES];
	struct op ops[NSIZES];
	memset(ops, 0, sizeof(ops));
	for (size_t i = 0; i < NSIZES; i++)
		bufs[i] = calloc(1, sizes[i] + 1);
	if (is_a) {
		barrier();
		for (size_t i = 0; i < NSIZES; i++) {
			fill(bufs[i], sizes[i], base + i);
			if (fi_tsend(ep, bufs[i], sizes[i], NULL, peer, base + i, &ops[i]))
				DIE("tsend");
		}
		int ok = 1;
		for (size_t i = 0; i < NSIZES; i++)
			ok &= wait_op(&ops[i], 60) && !ops[i].err;
		CHECK(ok, "%s: all %zu sends completed", preposted ? "preposted" : "unexpected", NSIZES);
		barrier();
	} else {
		if (preposted)
			for (size_t i = 0; i < NSIZES; i++)
				fi_trecv(ep, bufs[i], sizes[i] + 1, NULL, FI_ADDR_UNSPEC, base + i, 0, &ops[i]);
		barrier();
		if (!preposted) {
			/* let everything arrive first (tag matching against buffered messages) */
			double end = now() + 1.0;
			while (now() < end)
				poll_cq();
			for (size_t i = 0; i < NSIZES; i++)
				fi_trecv(ep, bufs[i], sizes[i] + 1, NULL, FI_ADDR_UNSPEC, base + i, 0, &ops[i]);
		}
		int ok = 1;
		for (size_t i = 0; i < NSIZES; i++) {
			int good = wait_op(&ops[i], 60) && !ops[i].err && ops[i].len == sizes[i] &&
				   ops[i].tag == base + i && (ops[i].flags & FI_TAGGED) && (ops[i].flags & FI_RECV) &&
				   ops[i].src == peer && verify(bufs[i], sizes[i], base + i);
			if (!good)
				printf("# size %zu: done %d err %d len %zu tag %" PRIx64 " src %" PRIu64 "\n", sizes[i],
				       ops[i].done, ops[i].err, ops[i].len, ops[i].tag, (uint64_t)ops[i].src);
			ok &= good;
		}
		CHECK(ok, "%s: sizes 0..2MiB received intact, tag/len/flags/source right",
		      preposted ? "preposted" : "unexpected");
		barrier();
	}
	for (size_t i = 0; i < NSIZES; i++)
		free(bufs[i]);
}

/* Remote CQ data: preposted, unexpected (small and rendezvous-sized), inject, untagged, peek. */
static void data_checks(int is_a)
{
	enum { BIG = 300000 };
	static uint8_t big[BIG];
	if (is_a) {
		fill(big, BIG, 21);
		barrier();
		struct op o1 = {0}, o2 = {0}, o3 = {0}, o4 = {0};
		CHECK(fi_tsenddata(ep, "pre", 4, NULL, 0xdeadbeefcafe0001ULL, peer, 0x21, &o1) == 0 && wait_op(&o1, 30) &&
			      !o1.err,
		      "fi_tsenddata (preposted receive) completes");
		CHECK(fi_tinjectdata(ep, "inj", 4, 0x23, peer, 0x23) == 0, "fi_tinjectdata accepted");
		CHECK(fi_senddata(ep, "msg", 4, NULL, 0x24, peer, &o2) == 0 && wait_op(&o2, 30) && !o2.err,
		      "fi_senddata completes");
		tsend_wait("nodata", 7, peer, 0x25);
		CHECK(fi_tsenddata(ep, big, BIG, NULL, 0x2600000000000026ULL, peer, 0x26, &o3) == 0 && wait_op(&o3, 60) &&
			      !o3.err,
		      "fi_tsenddata of %d bytes completes", BIG);
		CHECK(fi_tsenddata(ep, "peek", 5, NULL, 0x27, peer, 0x27, &o4) == 0 && wait_op(&o4, 30) && !o4.err,
		      "fi_tsenddata to be peeked completes");
		barrier();
	} else {
		char pre[8] = {0}, inj[8] = {0}, msg[8] = {0}, nod[8] = {0}, pk[8] = {0};
		static uint8_t rbig[BIG];
		struct op o1 = {0}, o2 = {0}, o3 = {0}, o4 = {0}, o5 = {0}, p = {0};
		fi_trecv(ep, pre, sizeof(pre), NULL, FI_ADDR_UNSPEC, 0x21, 0, &o1);
		barrier();
		CHECK(wait_op(&o1, 30) && !o1.err && !strcmp(pre, "pre") && (o1.flags & FI_REMOTE_CQ_DATA) &&
			      o1.data == 0xdeadbeefcafe0001ULL && o1.len == 4 && o1.src == peer,
		      "preposted receive: FI_REMOTE_CQ_DATA flag and 8 bytes of data (data %" PRIx64 ")", o1.data);
		/* the rest arrives unexpected: wait until the peek target is there */
		struct fi_msg_tagged m = {.addr = FI_ADDR_UNSPEC, .tag = 0x27, .context = &p};
		double end = now() + 30;
		do {
			memset(&p, 0, sizeof(p));
			fi_trecvmsg(ep, &m, FI_PEEK);
			wait_op(&p, 5);
		} while (p.err == FI_ENOMSG && now() < end);
		CHECK(p.done && !p.err && p.len == 5 && (p.flags & FI_REMOTE_CQ_DATA) && p.data == 0x27,
		      "FI_PEEK reports length and remote CQ data");
		fi_trecv(ep, inj, sizeof(inj), NULL, FI_ADDR_UNSPEC, 0x23, 0, &o2);
		fi_recv(ep, msg, sizeof(msg), NULL, FI_ADDR_UNSPEC, &o3);
		fi_trecv(ep, nod, sizeof(nod), NULL, FI_ADDR_UNSPEC, 0x25, 0, &o4);
		fi_trecv(ep, rbig, BIG, NULL, FI_ADDR_UNSPEC, 0x26, 0, &o5);
		CHECK(wait_op(&o2, 30) && !o2.err && !strcmp(inj, "inj") && (o2.flags & FI_REMOTE_CQ_DATA) && o2.data == 0x23,
		      "unexpected injected message with data");
		CHECK(wait_op(&o3, 30) && !o3.err && !strcmp(msg, "msg") && (o3.flags & FI_REMOTE_CQ_DATA) &&
			      (o3.flags & FI_MSG) && o3.data == 0x24,
		      "untagged message with data");
		CHECK(wait_op(&o4, 30) && !o4.err && !strcmp(nod, "nodata") && !(o4.flags & FI_REMOTE_CQ_DATA) &&
			      o4.len == 7,
		      "message sent without data: no FI_REMOTE_CQ_DATA flag, length without the header");
		CHECK(wait_op(&o5, 60) && !o5.err && o5.len == BIG && (o5.flags & FI_REMOTE_CQ_DATA) &&
			      o5.data == 0x2600000000000026ULL && verify(rbig, BIG, 21),
		      "unexpected %d-byte message with data, intact", BIG);
		struct op o6 = {0};
		fi_trecv(ep, pk, sizeof(pk), NULL, FI_ADDR_UNSPEC, 0x27, 0, &o6);
		CHECK(wait_op(&o6, 30) && !o6.err && !strcmp(pk, "peek") && o6.data == 0x27, "peeked message received");
		barrier();
	}
}

static void run_pair(int is_a)
{
	/* a message that arrived before its sender was in the AV: directed receive, FI_SOURCE */
	if (is_a) {
		tsend_wait("early", 6, peer, 0x77);
	} else {
		char b[8] = {0};
		struct op o = {0};
		fi_trecv(ep, b, sizeof(b), NULL, peer, 0x77, 0, &o);
		CHECK(wait_op(&o, 30) && !o.err && !strcmp(b, "early") && o.src == peer,
		      "message received before the sender was inserted in the AV: directed receive matches it");
	}
	sizes_round(is_a, 1, 0x100);
	sizes_round(is_a, 0, 0x200);

	/* ignore mask + order of equal tags */
	if (is_a) {
		uint32_t v;
		for (v = 1; v <= 3; v++)
			tsend_wait(&v, 4, peer, 0x55a0 + v);
		barrier();
	} else {
		uint32_t got[3] = {0};
		struct op o[3];
		memset(o, 0, sizeof(o));
		for (int i = 0; i < 3; i++)
			fi_trecv(ep, &got[i], 4, NULL, FI_ADDR_UNSPEC, 0x5500, 0xff, &o[i]);
		int ok = 1;
		for (int i = 0; i < 3; i++)
			ok &= wait_op(&o[i], 30) && !o[i].err && got[i] == (uint32_t)(i + 1) &&
			      o[i].tag == 0x55a0u + (uint32_t)i + 1;
		CHECK(ok, "ignore mask matches, same-peer messages delivered in order, real tag reported");
		barrier();
	}

	/* untagged vs tagged tag 0 */
	if (is_a) {
		barrier();
		tsend_wait("T", 1, peer, 0);
		struct op o = {0};
		fi_send(ep, "M", 1, NULL, peer, &o);
		CHECK(wait_op(&o, 30) && !o.err && (o.flags & FI_MSG) && (o.flags & FI_SEND), "fi_send completes");
		barrier();
	} else {
		char m = 0, t = 0;
		struct op om = {0}, ot = {0};
		fi_recv(ep, &m, 1, NULL, FI_ADDR_UNSPEC, &om);
		fi_trecv(ep, &t, 1, NULL, FI_ADDR_UNSPEC, 0, 0, &ot);
		barrier();
		CHECK(wait_op(&om, 30) && wait_op(&ot, 30) && m == 'M' && t == 'T' && (om.flags & FI_MSG) &&
			      (ot.flags & FI_TAGGED),
		      "untagged receive gets the untagged message, tag-0 receive the tagged one");
		barrier();
	}

	/* directed receive: same tag from self and from the peer */
	if (is_a) {
		barrier();
		tsend_wait("from-a", 7, peer, 9);
		barrier();
	} else {
		char fs[8] = {0}, fp[8] = {0};
		struct op os = {0}, op = {0};
		fi_trecv(ep, fs, sizeof(fs), NULL, self, 9, 0, &os);
		fi_trecv(ep, fp, sizeof(fp), NULL, peer, 9, 0, &op);
		barrier();
		CHECK(wait_op(&op, 30) && !strcmp(fp, "from-a") && op.src == peer,
		      "directed receive (src = peer) gets the peer's message");
		CHECK(!os.done, "directed receive (src = self) did not take the peer's message");
		tsend_wait("from-b", 7, self, 9);
		CHECK(wait_op(&os, 30) && !strcmp(fs, "from-b") && os.src == self, "send to self, directed receive");
		barrier();
	}

	/* truncation: an eager message and a rendezvous one (omx tells the latter's sender); in
	 * libfabric only the receive reports it, the sends succeed (tsend_wait dies on an error) */
	if (is_a) {
		static uint8_t big[1000], large[256 << 10];
		barrier();
		tsend_wait(big, sizeof(big), peer, 11);
		tsend_wait(large, sizeof(large), peer, 13);
		barrier();
	} else {
		static uint8_t small[100];
		struct op o = {0}, ol = {0};
		fi_trecv(ep, small, sizeof(small), NULL, FI_ADDR_UNSPEC, 11, 0, &o);
		fi_trecv(ep, small, sizeof(small), NULL, FI_ADDR_UNSPEC, 13, 0, &ol);
		barrier();
		CHECK(wait_op(&o, 30) && o.err == FI_ETRUNC && o.olen == 900 && o.len == 100,
		      "truncated receive: FI_ETRUNC error entry, olen 900 (err %d olen %zu)", o.err, o.olen);
		CHECK(wait_op(&ol, 30) && ol.err == FI_ETRUNC && ol.olen == (256 << 10) - 100 && ol.len == 100,
		      "truncated large receive: FI_ETRUNC error entry, olen 262044 (err %d olen %zu)", ol.err, ol.olen);
		barrier();
	}

	/* peek / claim */
	if (is_a) {
		uint8_t b[200];
		fill(b, sizeof(b), 12);
		tsend_wait(b, sizeof(b), peer, 12);
		barrier();
	} else {
		struct op p = {0};
		struct fi_msg_tagged m = {.addr = FI_ADDR_UNSPEC, .tag = 12, .context = &p};
		double end = now() + 30;
		do {
			memset(&p, 0, sizeof(p));
			fi_trecvmsg(ep, &m, FI_PEEK | FI_CLAIM);
			wait_op(&p, 5);
		} while (p.err == FI_ENOMSG && now() < end);
		CHECK(p.done && !p.err && p.len == 200 && p.tag == 12, "FI_PEEK|FI_CLAIM finds the message");
		uint8_t b[256] = {0};
		struct iovec iov = {b, sizeof(b)};
		m.msg_iov = &iov;
		m.iov_count = 1;
		p.done = 0;
		CHECK(fi_trecvmsg(ep, &m, FI_CLAIM) == 0 && wait_op(&p, 30) && !p.err && p.len == 200 &&
			      verify(b, 200, 12),
		      "FI_CLAIM receives the claimed message");
		barrier();
	}

	/* discard: FI_CLAIM|FI_DISCARD of a claimed message, FI_PEEK|FI_DISCARD */
	if (is_a) {
		tsend_wait("first", 6, peer, 0x31);
		tsend_wait("first", 6, peer, 0x32);
		barrier(); /* b discards both */
		barrier();
		tsend_wait("after", 6, peer, 0x31);
		tsend_wait("after", 6, peer, 0x32);
		barrier();
	} else {
		struct op p = {0}, d = {0};
		struct fi_msg_tagged m = {.addr = FI_ADDR_UNSPEC, .tag = 0x32, .context = &p};
		barrier();
		double end = now() + 30;
		do { /* both have arrived once 0x32 is there (same sender, in order) */
			memset(&p, 0, sizeof(p));
			fi_trecvmsg(ep, &m, FI_PEEK);
			wait_op(&p, 5);
		} while (p.err == FI_ENOMSG && now() < end);
		m.tag = 0x31;
		memset(&p, 0, sizeof(p));
		fi_trecvmsg(ep, &m, FI_PEEK | FI_CLAIM);
		int claimed = wait_op(&p, 10) && !p.err && p.len == 6;
		struct fi_msg_tagged md = {.addr = FI_ADDR_UNSPEC, .tag = 0x31, .context = &p};
		p.done = 0;
		CHECK(claimed && fi_trecvmsg(ep, &md, FI_CLAIM | FI_DISCARD) == 0 && wait_op(&p, 10) && !p.err,
		      "FI_CLAIM|FI_DISCARD of a claimed message completes");
		struct fi_msg_tagged m2 = {.addr = FI_ADDR_UNSPEC, .tag = 0x32, .context = &d};
		CHECK(fi_trecvmsg(ep, &m2, FI_PEEK | FI_DISCARD) == 0 && wait_op(&d, 10) && !d.err && d.len == 6,
		      "FI_PEEK|FI_DISCARD finds and discards");
		barrier();
		char b1[8] = {0}, b2[8] = {0};
		struct op o1 = {0}, o2 = {0};
		fi_trecv(ep, b1, sizeof(b1), NULL, FI_ADDR_UNSPEC, 0x31, 0, &o1);
		fi_trecv(ep, b2, sizeof(b2), NULL, FI_ADDR_UNSPEC, 0x32, 0, &o2);
		CHECK(wait_op(&o1, 30) && wait_op(&o2, 30) && !strcmp(b1, "after") && !strcmp(b2, "after"),
		      "discarded messages are gone: the next receives get the later messages");
		barrier();
	}

	/* cancel + inject */
	if (is_a) {
		barrier();
		CHECK(fi_tinject(ep, "injected", 9, peer, 14) == 0, "fi_tinject accepted");
		CHECK(fi_tinject(ep, sizes, 4096, peer, 14) == -FI_EMSGSIZE, "fi_tinject above inject_size refused");
		CHECK(fi_tinject(ep, NULL, 0, peer, 16) == 0, "fi_tinject of 0 bytes from a NULL buffer accepted");
		/* The FI_INJECT flag on fi_tsendmsg frees the buffer at once but, unlike fi_tinject,
		 * does not take the completion away. */
		char mb[16] = "sendmsg-inject";
		struct op os = {0};
		struct iovec iv = {mb, 15};
		struct fi_msg_tagged sm = {.msg_iov = &iv, .iov_count = 1, .addr = peer, .tag = 17, .context = &os};
		CHECK(fi_tsendmsg(ep, &sm, FI_INJECT | FI_COMPLETION) == 0, "fi_tsendmsg with FI_INJECT accepted");
		memset(mb, 'x', sizeof(mb));
		CHECK(wait_op(&os, 30) && !os.err, "fi_tsendmsg with FI_INJECT | FI_COMPLETION completes on the CQ");
		barrier();
	} else {
		char c[8];
		struct op o = {0};
		fi_trecv(ep, c, sizeof(c), NULL, FI_ADDR_UNSPEC, 13, 0, &o);
		fi_cancel(&ep->fid, &o);
		CHECK(wait_op(&o, 10) && o.err == FI_ECANCELED, "fi_cancel of a posted receive -> FI_ECANCELED");
		char ib[16] = {0};
		struct op oi = {0};
		fi_trecv(ep, ib, sizeof(ib), NULL, FI_ADDR_UNSPEC, 14, 0, &oi);
		barrier();
		CHECK(wait_op(&oi, 30) && !strcmp(ib, "injected"), "injected message received");
		struct op oz = {0};
		fi_trecv(ep, NULL, 0, NULL, FI_ADDR_UNSPEC, 16, 0, &oz);
		CHECK(wait_op(&oz, 30) && !oz.err && oz.len == 0 && oz.tag == 16, "0-byte injected message received");
		char mb[16] = {0};
		struct op om = {0};
		fi_trecv(ep, mb, sizeof(mb), NULL, FI_ADDR_UNSPEC, 17, 0, &om);
		CHECK(wait_op(&om, 30) && !strcmp(mb, "sendmsg-inject"),
		      "fi_tsendmsg with FI_INJECT: the bytes of the call, not those written after it");
		barrier();
	}

	if (use_data)
		data_checks(is_a);
	else if (is_a)
		CHECK(fi_tsenddata(ep, "x", 1, NULL, 1, peer, 15, NULL) == -FI_EINVAL,
		      "fi_tsenddata without FI_REMOTE_CQ_DATA -> FI_EINVAL");

	/* both directions at once: 500 messages each way, wildcard receives, order checked */
	{
		enum { N = 500, W = 32 };
		static uint8_t sb[W][8192], rb[W][8192];
		struct op so[W], ro[W];
		memset(so, 0, sizeof(so));
		memset(ro, 0, sizeof(ro));
		int sbusy[W] = {0}, rbusy[W] = {0};
		uint32_t sent = 0, got = 0, bad = 0, misordered = 0, nposted = 0;
		uint32_t rpost[W] = {0};
		barrier();
		double end = now() + 120;
		while ((sent < N || got < N) && now() < end) {
			poll_cq();
			for (int i = 0; i < W; i++) {
				if (sbusy[i] && so[i].done) {
					sbusy[i] = 0;
					bad += so[i].err != 0;
				}
				if (!sbusy[i] && sent < N) {
					size_t len = 8 + (sent * 977) % 8000;
					memcpy(sb[i], &sent, 4);
					fill(sb[i] + 8, len - 8, sent);
					memset(&so[i], 0, sizeof(so[i]));
					if (fi_tsend(ep, sb[i], len, NULL, peer, 0x1000000 + sent, &so[i]) == 0) {
						sbusy[i] = 1;
						sent++;
					}
				}
				if (rbusy[i] && ro[i].done) {
					rbusy[i] = 0;
					got++;
					uint32_t seq;
					memcpy(&seq, rb[i], 4);
					if (ro[i].err || ro[i].len < 8 || seq >= N || ro[i].tag != 0x1000000u + seq ||
					    !verify(rb[i] + 8, ro[i].len - 8, seq))
						bad++;
					/* receives match in the order they were posted (completions may not) */
					misordered += seq != rpost[i];
				}
				if (!rbusy[i] && got + (uint32_t)W <= N + (uint32_t)W) {
					uint32_t posted = 0;
					for (int k = 0; k < W; k++)
						posted += (uint32_t)rbusy[k];
					if (got + posted < N) {
						memset(&ro[i], 0, sizeof(ro[i]));
						fi_trecv(ep, rb[i], sizeof(rb[i]), NULL, peer, 0x1000000, 0xffffff, &ro[i]);
						rbusy[i] = 1;
						rpost[i] = nposted++;
					}
				}
			}
		}
		CHECK(sent == N && got == N && bad == 0 && misordered == 0,
		      "bidirectional stream: %u sent, %u received, %u bad, %u out of order", sent, got, bad, misordered);
		barrier();
	}
}

void close_all(void)
{
	CHECK(fi_close(&ep->fid) == 0 && fi_close(&cq->fid) == 0 && fi_close(&av->fid) == 0 &&
		      fi_close(&dom->fid) == 0 && fi_close(&fab->fid) == 0,
	      "close everything");
	ep = NULL;
}


int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "getinfo")) {
		getinfo_checks();
		printf("%s\n", fails ? "FAILED" : "PASSED");
		return fails != 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "cqfail")) {
		open_all("map");
		cqfail_run();
		close_all();
		printf("%s\n", fails ? "FAILED" : "PASSED");
		return fails != 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "cqgrow")) {
		open_all("map");
		cqgrow_run();
		close_all();
		printf("%s\n", fails ? "FAILED" : "PASSED");
		return fails != 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "unexpfail")) {
		open_all("map");
		unexpfail_run(argc >= 3 && !strcmp(argv[2], "back"));
		close_all();
		printf("%s\n", fails ? "FAILED" : "PASSED");
		return fails != 0;
	}
	if (argc < 3 || (strcmp(argv[1], "a") && strcmp(argv[1], "b")))
		DIE("usage: omx_fi_client getinfo | cqfail | cqgrow | unexpfail [back] | a|b DIR [map|table] [data] "
		    "[close|peekerr|avremove|reserve|reserveclose|reverse]");
	const char *avtype = "map", *scenario = NULL;
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "map") || !strcmp(argv[i], "table"))
			avtype = argv[i];
		else if (!strcmp(argv[i], "data"))
			use_data = 1;
		else if (!strcmp(argv[i], "close") || !strcmp(argv[i], "peekerr") || !strcmp(argv[i], "avremove") ||
			 !strcmp(argv[i], "reserve") || !strcmp(argv[i], "reserveclose") || !strcmp(argv[i], "reverse"))
			scenario = argv[i];
		else
			DIE("unknown argument %s", argv[i]);
	}
	int is_a = !strcmp(argv[1], "a");
	if (!scenario)
		getinfo_checks();
	open_all(avtype);
	exchange(argv[1], argv[2]);
	if (!scenario)
		run_pair(is_a);
	else if (!strcmp(scenario, "close"))
		close_scenario(is_a, argv[2]);
	else if (!strcmp(scenario, "peekerr"))
		peekerr_scenario(is_a, argv[2]);
	else if (!strcmp(scenario, "reserve"))
		reserve_scenario(is_a, argv[2]);
	else if (!strcmp(scenario, "reserveclose"))
		reserveclose_scenario(is_a, argv[2]);
	else if (!strcmp(scenario, "reverse"))
		reverse_scenario(is_a);
	else
		avremove_scenario(is_a);
	if (ep)
		close_all();
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails != 0;
}
