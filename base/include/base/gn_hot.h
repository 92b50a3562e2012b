/*
 * gn_hot.h - GN_HOT marks a loop that runs once per model parameter on
 * every step or every exchanged slice (the optimizer, bias and ReLU
 * passes in nn/; the distance, clipping and averaging passes in gossip/).
 * GCC's -O2 neither vectorizes loops of unknown trip count nor
 * if-converts `v > 0 ? v : 0`; such a function is built at -O3 instead.
 * Clang vectorizes at -O2 already. Vectorizing changes no result: ISO C
 * lets the compiler neither reorder a sum nor contract a multiply-add, so
 * a reduction vectorizes only when the code keeps independent lane sums.
 */
#ifndef GN_HOT_H
#define GN_HOT_H

#if defined(__GNUC__) && !defined(__clang__)
#define GN_HOT __attribute__((optimize("O3")))
#else
#define GN_HOT
#endif

#endif
