/*
 * gn_finite.h - gn_all_finite(): whether n floats hold no NaN and no Inf.
 * The one check run before a model is kept as the last good one
 * (node/train/trainer.c), a slice is encoded (gossip/codec.c) or peers'
 * floats are averaged in (gossip/merge.c). Built at -O3 (GN_HOT) in
 * gn_finite.c: a full pass is the common case, so it reads exponent bits
 * OR-reduced over fixed blocks, which vectorizes, and stops at the first
 * block holding a bad value rather than at the value.
 */
#ifndef GN_FINITE_H
#define GN_FINITE_H

#include <stddef.h>

/* 1 if x[0..n) holds no NaN and no Inf (n 0: 1); x may be NULL when n is
 * 0. */
int gn_all_finite(const float *x, size_t n);

#endif
