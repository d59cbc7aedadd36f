/*
 * omx_tool.h - small helpers shared by the tools (header only: every tools/omx_*.c is one
 * program). Exit status of every tool: 0 on success, 255 (-1) on failure (behaviour.md 11).
 */
#ifndef OMX_TOOL_H
#define OMX_TOOL_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "open-mx.h"

#define TOOL_FAIL 255

static inline const char *tool_mac_text(const uint8_t *m, char buf[OMX_BOARD_ADDR_STRLEN])
{
	snprintf(buf, OMX_BOARD_ADDR_STRLEN, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
	return buf;
}

static inline const char *tool_nic_text(uint64_t nic, char buf[OMX_BOARD_ADDR_STRLEN])
{
	uint8_t m[6];
	for (int i = 0; i < 6; i++)
		m[i] = (uint8_t)(nic >> (40 - 8 * i));
	return tool_mac_text(m, buf);
}

/* Board number option: 0..255, else an error line and -1. */
static inline int tool_board_arg(const char *prog, const char *arg)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 0);
	if (!*arg || *end || errno || v < 0 || v > 255) {
		fprintf(stderr, "%s: invalid board number '%s'\n", prog, arg);
		return -1;
	}
	return (int)v;
}

/* getopt's '?' / ':' cases: the spec's "Unknown option -<c>" then the usage on stderr. */
static inline int tool_bad_option(int c, int optopt_, const char *arg, void (*usage)(FILE *))
{
	if (c == ':')
		fprintf(stderr, "Option -%c requires an argument\n", optopt_);
	else if (optopt_)
		fprintf(stderr, "Unknown option -%c\n", optopt_);
	else
		fprintf(stderr, "Unknown option %s\n", arg);
	usage(stderr);
	return TOOL_FAIL;
}

/* After the options: an argument left over is an error (the line, then the usage on stderr). */
static inline int tool_no_arguments(int argc, char **argv, void (*usage)(FILE *))
{
	if (optind >= argc)
		return 0;
	fprintf(stderr, "Unexpected argument '%s'\n", argv[optind]);
	usage(stderr);
	return TOOL_FAIL;
}

/* A board number given with -b that the library does not have (after tool_init): the line,
 * the library finalized, the exit status. prefix: "" or "<tool>: ". */
static inline int tool_board_not_found(const char *prefix, int board)
{
	fprintf(stderr, "%sCannot find board #%d\n", prefix, board);
	omx_finalize();
	return TOOL_FAIL;
}

/* Initialise the library (errors returned, not fatal); prints why on failure. */
static inline int tool_init(const char *prog)
{
	omx_set_error_handler(NULL, OMX_ERRORS_RETURN);
	omx_return_t r = omx_init();
	if (r != OMX_SUCCESS) {
		fprintf(stderr, "%s: failed to initialize the library: %s\n", prog, omx_strerror(r));
		return -1;
	}
	return 0;
}

#endif
