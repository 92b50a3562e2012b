/*
 * layers.h - internal: the layer kernels model.c strings together, and
 * the seeded PRNG used for weight initialisation.  Not part of the public
 * API (tests include it to check each backward against finite differences).
 *
 * Conventions: batches are row-major, one sample per row.  Images are
 * channels-last (NHWC: [B][H][W][C]) inside the model, which makes im2col
 * rows contiguous and "flatten" a no-op on memory; only the very first conv
 * may read planar input ([B][C][H][W], as IDX/CIFAR files and PyTorch store
 * it).  Dense weights are [N][K] (out x in, as PyTorch's Linear); conv
 * weights are [F][K][K][C] so one filter is one row matching one im2col row.
 * Backward functions OVERWRITE parameter gradients (dw, db) and dx.
 */
#ifndef NN_LAYERS_H
#define NN_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "base/gn_hot.h"

/*
 * NN_HOT marks the element-wise loops that run once per activation or per
 * parameter each step: GN_HOT (base/gn_hot.h). Without it GCC's -O2 left
 * a mispredicted branch per element in the ReLU passes (measured: ~15% of
 * an MLP step).
 */
#define NN_HOT GN_HOT

/*
 * NN_HOT_WIDE: an NN_HOT loop that is compute-bound (Adam: a square root
 * and a division per parameter; the direct convolution of a first layer),
 * also built for AVX2 and AVX-512 and picked
 * at load time by CPUID (GCC's target_clones, an ifunc; the baseline is
 * SSE2).  No FMA in the clones (ISO C contracts nothing) and no reduction,
 * so every clone gives the same bits.  The memory-bound passes (SGD, bias,
 * ReLU masks) stay SSE2: their AVX2/AVX-512 clones measured no faster
 * (docs/nn.md).  aarch64's baseline has NEON, which -O3 already uses.
 * Not under ThreadSanitizer: its runtime is not up yet when the dynamic
 * loader runs an ifunc resolver, and every program then dies at start.
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&         \
    defined(__linux__) && !defined(__SANITIZE_THREAD__)
#define NN_HOT_WIDE                                                            \
        NN_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NN_HOT_WIDE NN_HOT
#endif

/* ---- PRNG: splitmix64, exact and identical on every machine ------------ */

/* Returns the next 64 random bits and advances *state. */
uint64_t nn__rand_u64(uint64_t *state);

/* Returns a float uniform in [lo, hi) (24 random bits, exact arithmetic). */
float nn__rand_uniform(uint64_t *state, float lo, float hi);

/* ---- dense: x[B,K] -> y[B,N] = x W^T + b (+ ReLU) ---------------------- */

/* y[B,N] = x[B,K] w[N,K]^T + b[N], then max(0, .) if relu. */
void nn__dense_forward(float *y, const float *x, const float *w, const float *b,
                       int batch, int k, int n, int relu);

/* Given dy[B,N] (masked in place by y > 0 when relu_y is non-NULL), writes
 * dw[N,K] = dy^T x, db[N] = column sums of dy and, if dx is non-NULL,
 * dx[B,K] = dy w. */
void nn__dense_backward(float *dx, float *dw, float *db, float *dy,
                        const float *relu_y, const float *x, const float *w,
                        int batch, int k, int n);

/* The first step of nn__dense_backward alone: masks dy[B,N] in place by
 * relu_y > 0 (if non-NULL) and writes db[N] = column sums of dy.  (The
 * threaded model computes dw of its first layer from all chunks at once.) */
void nn__dense_backward_bias(float *db, float *dy, const float *relu_y,
                             int batch, int n);

/* ---- ReLU (standalone; dense and conv fuse it) ------------------------- */

/* y[i] = max(0, x[i]); y may alias x. */
void nn__relu_forward(float *y, const float *x, size_t n);

/* dx[i] = y[i] > 0 ? dy[i] : 0; dx may alias dy. */
void nn__relu_backward(float *dx, const float *dy, const float *y, size_t n);

/* ---- softmax + cross-entropy, fused ------------------------------------ */

/*
 * For logits[B,C] and labels y[B] (< C, checked by the caller): returns the
 * mean loss -log softmax(z)_y computed as logsumexp(z - max) - (z_y - max),
 * writes dz[B,C] = (softmax(z) - onehot(y)) / B if dz is non-NULL (dz may
 * alias logits) and adds the argmax hits to *correct if non-NULL.
 */
double nn__softmax_ce(float *dz, const float *logits, const uint8_t *y,
                      int batch, int classes, int *correct);

/* The same for `rows` rows of a batch of `batch` samples (a thread's
 * chunk): dz = (softmax - onehot) / batch, bit for bit the rows the whole
 * batch would get; returns the SUM of the rows' losses. */
double nn__softmax_ce_rows(float *dz, const float *logits, const uint8_t *y,
                           int rows, int classes, int *correct, int batch);

/* ---- conv2d, stride 1, "same" zero padding: im2col + GEMM, or direct -- */

struct nn__conv {
        int c, h, w;   /* input channels, height, width */
        int f, k;      /* filters, kernel side (odd) */
        int in_planar; /* input is [B][C][H][W] instead of [B][H][W][C] */
};

/* Whether layer s is computed directly rather than by im2col + GEMM: its
 * patch K*K*C is too short for a GEMM (layers.c, "direct convolution").
 * The direct path needs no col workspace, except for dx. */
int nn__conv_direct(const struct nn__conv *s);

/* Floats of im2col workspace needed to process `samples` samples at once. */
size_t nn__conv_col_len(const struct nn__conv *s, int samples);

/* y[B,H,W,F] = conv(x) + b, then ReLU if relu.  w is [F][K][K][C], col a
 * workspace of nn__conv_col_len(s, chunk) floats, chunk >= 1 samples. */
void nn__conv_forward(float *y, const float *x, const float *w, const float *b,
                      const struct nn__conv *s, int batch, float *col,
                      int chunk, int relu);

/* Given dy[B,H,W,F] (masked in place by y > 0 when relu_y is non-NULL),
 * writes dw, db and, if dx is non-NULL, dx (in x's layout). */
void nn__conv_backward(float *dx, float *dw, float *db, float *dy,
                       const float *relu_y, const float *x, const float *w,
                       const struct nn__conv *s, int batch, float *col,
                       int chunk);

/* y[B,H/ps,W/ps,F] and idx: nn__conv_forward with ReLU, then
 * nn__maxpool_forward with size ps, in one pass that never writes the
 * conv's output (same bits, same idx).  Only for nn__conv_direct(s); for
 * a caller whose max-pool backward folds the ReLU mask (relu_y), since
 * the conv's output is then read by nobody. */
void nn__conv_pool_forward(float *y, int32_t *idx, const float *x,
                           const float *w, const float *b,
                           const struct nn__conv *s, int batch, int ps);

/* ---- max-pool s x s, stride s, NHWC ------------------------------------ */

/* y[B,H/s,W/s,C] = window maxima of x[B,H,W,C]; idx[i] = offset of the
 * winning input within its sample (for the backward pass). */
void nn__maxpool_forward(float *y, int32_t *idx, const float *x, int batch,
                         int h, int w, int c, int s);

/* dx[B,H,W,C] = dy routed to the winners recorded in idx, 0 elsewhere;
 * every entry of dx is written. relu_y: NULL, or the forward pass's y
 * when x is the output of a ReLU layer whose mask the caller wants
 * applied here: a window's winner is x's value y, so dx is then also 0
 * where x <= 0, and that layer's backward pass gets relu_y = NULL (its
 * mask pass is folded into this one). */
void nn__maxpool_backward(float *dx, const float *dy, const int32_t *idx,
                          const float *relu_y, int batch, int h, int w, int c,
                          int s);

#endif
