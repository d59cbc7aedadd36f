/*
 * omx_peersfile.h - reading and rewriting a peers file (behaviour.md 8.2) for omx_init_peers and
 * omx_hostname (header only). Comments and blank lines are kept; a rewrite goes through a
 * temporary file renamed over the original, so readers never see half a file.
 */
#ifndef OMX_PEERSFILE_H
#define OMX_PEERSFILE_H

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

#define PF_LINE_MAX 110
#define PF_NAME_MAX 79

struct pf_line {
	int is_peer;
	uint8_t mac[6];
	char text[PF_LINE_MAX + 2]; /* comment/blank line as read, or the hostname */
};

struct pf {
	struct pf_line *lines;
	size_t n, cap;
};

/* "xx:xx:xx:xx:xx:xx": six 1-2 digit hex bytes. */
static inline int pf_parse_mac(const char *s, uint8_t mac[6])
{
	for (int i = 0; i < 6; i++) {
		int digits = 0;
		unsigned v = 0;
		while (isxdigit((unsigned char)*s) && digits < 3) {
			v = v * 16 + (unsigned)(isdigit((unsigned char)*s) ? *s - '0' : (tolower((unsigned char)*s) - 'a' + 10));
			s++, digits++;
		}
		if (digits < 1 || digits > 2)
			return -1;
		mac[i] = (uint8_t)v;
		if (i < 5 && *s++ != ':')
			return -1;
	}
	return *s ? -1 : 0;
}

static inline int pf_valid_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > PF_NAME_MAX)
		return 0;
	for (const char *p = name; *p; p++)
		if (isspace((unsigned char)*p) || !isprint((unsigned char)*p))
			return 0;
	return 1;
}

static inline int pf_push(struct pf *pf, const struct pf_line *l)
{
	if (pf->n == pf->cap) {
		size_t cap = pf->cap ? pf->cap * 2 : 64;
		struct pf_line *nl = realloc(pf->lines, cap * sizeof(*nl));
		if (!nl)
			return -1;
		pf->lines = nl, pf->cap = cap;
	}
	pf->lines[pf->n++] = *l;
	return 0;
}

/* Load path; a missing file is an empty table if missing_ok. -1 with err set on error. */
static inline int pf_load(const char *path, struct pf *pf, int missing_ok, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char buf[512];
	int lineno = 0;
	if (!f) {
		if (errno == ENOENT && missing_ok)
			return 0;
		snprintf(err, errlen, "cannot open %.300s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(buf, sizeof(buf), f)) {
		struct pf_line l;
		lineno++;
		size_t n = strlen(buf);
		int complete = n && buf[n - 1] == '\n';
		if (complete)
			buf[--n] = 0;
		if (n > PF_LINE_MAX || (!complete && !feof(f))) {
			snprintf(err, errlen, "%.300s:%d: line longer than %d characters", path, lineno, PF_LINE_MAX);
			fclose(f);
			return -1;
		}
		memset(&l, 0, sizeof(l));
		char *s = buf;
		while (isspace((unsigned char)*s))
			s++;
		if (*s == '#' || !*s) {
			snprintf(l.text, sizeof(l.text), "%s", buf);
		} else {
			char mac[64] = "", name[128] = "", extra[8] = "";
			int k = sscanf(s, "%63s %127s %7s", mac, name, extra);
			if (k < 2 || pf_parse_mac(mac, l.mac) < 0 || !pf_valid_name(name)) {
				snprintf(err, errlen, "%.300s:%d: malformed peer line (expected 'xx:xx:xx:xx:xx:xx hostname')",
					 path, lineno);
				fclose(f);
				return -1;
			}
			l.is_peer = 1;
			snprintf(l.text, sizeof(l.text), "%s", name);
		}
		if (pf_push(pf, &l) < 0) {
			snprintf(err, errlen, "out of memory");
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	return 0;
}

/* Add a peer, or rename it if its MAC is present (keeping its position, hence its index). */
static inline int pf_set(struct pf *pf, const uint8_t mac[6], const char *name)
{
	for (size_t i = 0; i < pf->n; i++)
		if (pf->lines[i].is_peer && !memcmp(pf->lines[i].mac, mac, 6)) {
			snprintf(pf->lines[i].text, sizeof(pf->lines[i].text), "%s", name);
			return 0;
		}
	struct pf_line l;
	memset(&l, 0, sizeof(l));
	l.is_peer = 1;
	memcpy(l.mac, mac, 6);
	snprintf(l.text, sizeof(l.text), "%s", name);
	return pf_push(pf, &l);
}

/* Keep comments and the peers for which keep(mac) is true. */
static inline void pf_filter(struct pf *pf, int (*keep)(const uint8_t *mac))
{
	size_t j = 0;
	for (size_t i = 0; i < pf->n; i++)
		if (!pf->lines[i].is_peer || keep(pf->lines[i].mac))
			pf->lines[j++] = pf->lines[i];
	pf->n = j;
}

static inline int pf_save(const char *path, const struct pf *pf, char *err, size_t errlen)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%.4000s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f) {
		snprintf(err, errlen, "cannot write %.300s: %s", path, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < pf->n; i++) {
		const struct pf_line *l = &pf->lines[i];
		if (l->is_peer)
			fprintf(f, "%02x:%02x:%02x:%02x:%02x:%02x %s\n", l->mac[0], l->mac[1], l->mac[2], l->mac[3],
				l->mac[4], l->mac[5], l->text);
		else
			fprintf(f, "%s\n", l->text);
	}
	int bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		snprintf(err, errlen, "cannot write %.300s: %s", path, strerror(errno ? errno : EIO));
		unlink(tmp);
		return -1;
	}
	chmod(tmp, 0644);
	if (rename(tmp, path) < 0) {
		snprintf(err, errlen, "cannot replace %.300s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

static inline void pf_free(struct pf *pf)
{
	free(pf->lines);
	pf->lines = NULL;
	pf->n = pf->cap = 0;
}

/* The peers file a tool edits: -f, else OMX_PEERS. The library must not load it itself (a
 * malformed file would make omx_init fail): call before omx_init. */
static inline const char *pf_target(const char *opt_file)
{
	static char saved[4096];
	omx__config_file_apply(); /* OMX_PEERS may come from the host configuration file */
	const char *env = getenv("OMX_PEERS");
	if (env)
		snprintf(saved, sizeof(saved), "%s", env);
	unsetenv("OMX_PEERS");
	if (opt_file)
		return opt_file;
	return env && *saved ? saved : NULL;
}

#endif
