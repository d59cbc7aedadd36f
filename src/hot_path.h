/*
 * hot_path.h - OMX_HOT_PATH marks the definitions of the functions a same-host eager message
 * crosses between omx_isend and the receiver's omx_test (send, frame encoding, the route and the
 * ring push; the ring peek, decoding, sequence and matching, completion). They are inlined into
 * their callers, across files when link-time optimisation is on: GCC's own limits at -O2 left
 * most of these calls in place (each with its prologue and epilogue), and the profile-guided build
 * showed what inlining them gives. bench/self_pingpong: ~2060 -> ~1780 instructions a message;
 * omx / vader-cma near (bench/side_by_side.sh, three series of 6-8 interleaved rounds, medians):
 * 1.22-1.29 -> 1.19-1.20x at 0 B, 1.10-1.14 -> 1.08-1.09x at 1-8 B (docs/performance.md, stop
 * 57); the library grows by ~20% (1.35 -> 1.63 MB).
 *
 * Put it on definitions only, their prototypes (in the layer's header) staying plain: with a
 * plain declaration in scope the C11 inline definition is an external one, so callers in other
 * files link to it where they do not inline it (without link-time optimisation, e.g. the
 * sanitizer builds). Static functions take `static OMX_HOT_PATH`.
 */
#ifndef OMX_HOT_PATH_H
#define OMX_HOT_PATH_H

#define OMX_HOT_PATH inline __attribute__((always_inline))

#endif
