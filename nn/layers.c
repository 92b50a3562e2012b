/*
 * layers.c - forward/backward kernels: dense (+fused bias and ReLU), ReLU,
 * fused softmax cross-entropy, conv2d via im2col + GEMM (or directly, for
 * layers with short patches), max-pool, a direct conv fused with the
 * max-pool after it; and the splitmix64 generator that seeds the weights.
 *
 * The heavy lifting is nn_gemm(); the loops here are single passes over the
 * data (bias+ReLU after a GEMM, masks, im2col/col2im), except the direct
 * convolution of short-patch layers, which does its own sums ("direct
 * convolution" below).  Shapes are given in
 * the comments as [rows, cols] of row-major arrays; see layers.h for the
 * layouts.  Nothing here allocates: callers own every buffer.
 */
#include <math.h>
#include <string.h>

#include "base/gn_rng.h"
#include "nn/nn.h"
#include "layers.h"

uint64_t nn__rand_u64(uint64_t *state)
{
        return gn_splitmix64(state);
}

float nn__rand_uniform(uint64_t *state, float lo, float hi)
{
        /* Top 24 bits -> exact float in [0, 1). */
        float u = (float)(nn__rand_u64(state) >> 40) * (1.0f / 16777216.0f);

        return lo + (hi - lo) * u;
}

/* y[B,N] += b row-wise, then ReLU if asked: the pass after each GEMM. */
NN_HOT static void bias_act(float *restrict y, const float *restrict b,
                            int rows, int n, int relu)
{
        for (int i = 0; i < rows; i++) {
                float *restrict r = y + (size_t)i * n;

                if (relu) {
                        for (int j = 0; j < n; j++) {
                                float v = r[j] + b[j];
                                r[j] = v > 0.0f ? v : 0.0f;
                        }
                } else {
                        for (int j = 0; j < n; j++)
                                r[j] += b[j];
                }
        }
}

/* Masks dy[rows,n] by y > 0 (if y) and writes db[n] = column sums. */
NN_HOT static void mask_bias_grad(float *restrict db, float *restrict dy,
                                  const float *restrict y, int rows, int n)
{
        memset(db, 0, sizeof(*db) * (size_t)n);
        for (int i = 0; i < rows; i++) {
                float *restrict r = dy + (size_t)i * n;

                if (y) {
                        const float *restrict yr = y + (size_t)i * n;
                        for (int j = 0; j < n; j++) {
                                r[j] = yr[j] > 0.0f ? r[j] : 0.0f;
                                db[j] += r[j];
                        }
                } else {
                        for (int j = 0; j < n; j++)
                                db[j] += r[j];
                }
        }
}

void nn__dense_forward(float *y, const float *x, const float *w, const float *b,
                       int batch, int k, int n, int relu)
{
        /* y[B,N] = x[B,K] w[N,K]^T */
        nn_gemm(0, 1, batch, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
        bias_act(y, b, batch, n, relu);
}

void nn__dense_backward(float *dx, float *dw, float *db, float *dy,
                        const float *relu_y, const float *x, const float *w,
                        int batch, int k, int n)
{
        mask_bias_grad(db, dy, relu_y, batch, n);
        /* dw[N,K] = dy[B,N]^T x[B,K] */
        nn_gemm(1, 0, n, k, batch, 1.0f, dy, n, x, k, 0.0f, dw, k);
        /* dx[B,K] = dy[B,N] w[N,K] */
        if (dx)
                nn_gemm(0, 0, batch, k, n, 1.0f, dy, n, w, k, 0.0f, dx, k);
}

void nn__dense_backward_bias(float *db, float *dy, const float *relu_y,
                             int batch, int n)
{
        mask_bias_grad(db, dy, relu_y, batch, n);
}

NN_HOT void nn__relu_forward(float *y, const float *x, size_t n)
{
        for (size_t i = 0; i < n; i++)
                y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

NN_HOT void nn__relu_backward(float *dx, const float *dy, const float *y,
                              size_t n)
{
        for (size_t i = 0; i < n; i++)
                dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

double nn__softmax_ce_rows(float *dz, const float *logits, const uint8_t *y,
                           int rows, int classes, int *correct, int batch)
{
        double total = 0.0;
        float inv_b = 1.0f / (float)batch;

        for (int i = 0; i < rows; i++) {
                const float *z = logits + (size_t)i * classes;
                float *d = dz ? dz + (size_t)i * classes : NULL;
                int arg = 0;
                float mx = z[0];
                double sum = 0.0;

                for (int j = 1; j < classes; j++)
                        if (z[j] > mx) {
                                mx = z[j];
                                arg = j;
                        }
                for (int j = 0; j < classes; j++)
                        sum += exp((double)(z[j] - mx));
                total += log(sum) - (double)(z[y[i]] - mx);
                if (correct && arg == y[i])
                        (*correct)++;
                if (!d)
                        continue;
                for (int j = 0; j < classes; j++) {
                        double p = exp((double)(z[j] - mx)) / sum;
                        d[j] = (float)(p - (j == y[i] ? 1.0 : 0.0)) * inv_b;
                }
        }
        return total;
}

double nn__softmax_ce(float *dz, const float *logits, const uint8_t *y,
                      int batch, int classes, int *correct)
{
        return nn__softmax_ce_rows(dz, logits, y, batch, classes, correct,
                                   batch) /
               batch;
}

size_t nn__conv_col_len(const struct nn__conv *s, int samples)
{
        return (size_t)samples * s->h * s->w * s->k * s->k * s->c;
}

/* Input strides of one image: (channel, row, column). */
static void conv_strides(const struct nn__conv *s, size_t *cs, size_t *hs,
                         size_t *ws)
{
        if (s->in_planar) {
                *cs = (size_t)s->h * s->w;
                *hs = s->w;
                *ws = 1;
        } else {
                *cs = 1;
                *hs = (size_t)s->w * s->c;
                *ws = s->c;
        }
}

/* The part of kernel row kh..: columns kw in [*lo, *hi) fall inside the
 * image for output column ow (padding p). */
static void kw_range(int ow, int p, int k, int w, int *lo, int *hi)
{
        *lo = p - ow > 0 ? p - ow : 0;
        *hi = w + p - ow < k ? w + p - ow : k;
}

/* col[n*H*W, K*K*C] = patches of n images starting at x (zero outside).
 * Channels-last input makes each kernel row one contiguous span. */
NN_HOT static void im2col(float *restrict col, const float *restrict x,
                          const struct nn__conv *s, int n)
{
        size_t cs, hs, ws, img = (size_t)s->c * s->h * s->w;
        int p = s->k / 2, kc = s->k * s->c;

        conv_strides(s, &cs, &hs, &ws);
        for (int b = 0; b < n; b++) {
                const float *xb = x + (size_t)b * img;
                for (int oh = 0; oh < s->h; oh++)
                        for (int ow = 0; ow < s->w; ow++) {
                                int lo, hi;
                                kw_range(ow, p, s->k, s->w, &lo, &hi);
                                for (int kh = 0; kh < s->k; kh++, col += kc) {
                                        int ih = oh + kh - p;
                                        if (ih < 0 || ih >= s->h) {
                                                for (int j = 0; j < kc; j++)
                                                        col[j] = 0.0f;
                                                continue;
                                        }
                                        /* row[j] is column lo of the span */
                                        const float *row =
                                            xb + ih * hs + (ow - p + lo) * ws;
                                        float *dst = col + lo * s->c;
                                        for (int j = 0; j < lo * s->c; j++)
                                                col[j] = 0.0f;
                                        for (int j = hi * s->c; j < kc; j++)
                                                col[j] = 0.0f;
                                        if (cs == 1) {
                                                for (int j = 0;
                                                     j < (hi - lo) * s->c; j++)
                                                        dst[j] = row[j];
                                                continue;
                                        }
                                        for (int kw = 0; kw < hi - lo; kw++)
                                                for (int c = 0; c < s->c; c++)
                                                        dst[kw * s->c + c] =
                                                            row[kw * ws +
                                                                c * cs];
                                }
                        }
        }
}

/* dx (n images) += col2im(dcol): the adjoint of im2col. */
NN_HOT static void col2im(float *restrict dx, const float *restrict col,
                          const struct nn__conv *s, int n)
{
        size_t cs, hs, ws, img = (size_t)s->c * s->h * s->w;
        int p = s->k / 2, kc = s->k * s->c;

        conv_strides(s, &cs, &hs, &ws);
        for (int b = 0; b < n; b++) {
                float *xb = dx + (size_t)b * img;
                for (int oh = 0; oh < s->h; oh++)
                        for (int ow = 0; ow < s->w; ow++) {
                                int lo, hi;
                                kw_range(ow, p, s->k, s->w, &lo, &hi);
                                for (int kh = 0; kh < s->k; kh++, col += kc) {
                                        int ih = oh + kh - p;
                                        if (ih < 0 || ih >= s->h)
                                                continue;
                                        float *row =
                                            xb + ih * hs + (ow - p + lo) * ws;
                                        const float *src = col + lo * s->c;
                                        if (cs == 1) {
                                                for (int j = 0;
                                                     j < (hi - lo) * s->c; j++)
                                                        row[j] += src[j];
                                                continue;
                                        }
                                        for (int kw = 0; kw < hi - lo; kw++)
                                                for (int c = 0; c < s->c; c++)
                                                        row[kw * ws + c * cs] +=
                                                            src[kw * s->c + c];
                                }
                        }
        }
}

/* ---- direct convolution, for short patches ----------------------------
 *
 * A layer whose patch K*K*C is short (a first layer on grey or RGB images:
 * 9 or 27) makes a GEMM of inner dimension 9..27, which runs far below a
 * core's peak (measured on Zen 3: 11 GFLOP/s forward and 20 for the
 * weight gradient, against ~70 for the CNN's second layer) and needs an
 * im2col copy 9..27 times the input's size.  Such layers are computed
 * directly instead, CONV_FB filters at a time: the forward pass keeps one
 * output pixel's CONV_FB sums in registers and adds each tap's input value
 * times the tap's weights (transposed once per call into [tap][CONV_FB]);
 * the weight gradient runs, two images at a time, tap by tap over the output
 * pixels the tap reaches, with each image's CONV_FB sums in registers, and
 * adds them to the batch's image by image.  Each sum is in a fixed order
 * and no multiply and add are fused, so results do not depend on the
 * vector width (the clones of NN_HOT_WIDE give the same bits) nor on the
 * pairing. */
enum { CONV_DIRECT_KKC = 32, CONV_FB = 32 };

int nn__conv_direct(const struct nn__conv *s)
{
        return s->k * s->k * s->c <= CONV_DIRECT_KKC;
}

/* CONV_FB floats as four 8-lane vectors (GCC/Clang vector extensions: one
 * AVX register each in the AVX2 and AVX-512 clones, two SSE or NEON ones
 * elsewhere), so that the sums stay in registers. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
enum { CONV_V = CONV_FB / 8 }; /* 4: direct_forward names them a0..a3 */

/* Vector loads and stores through memcpy (unaligned, no aliasing
 * questions), as macros: a function passing v8f by value would change ABI
 * between the baseline and the AVX clones (GCC's -Wpsabi). */
#define LD8(v, p) memcpy(&(v), (p), sizeof(v8f))
#define ST8(p, v) memcpy((p), &(v), sizeof(v8f))

/* y's filters [f0, f0+fb) of n images; wt = those filters' weights as
 * [kkc][CONV_FB] and bb their biases as [CONV_FB], both zero beyond fb. */
NN_HOT_WIDE static void
direct_forward(float *restrict y, const float *restrict x,
               const float *restrict wt, const float *restrict bb,
               const struct nn__conv *s, int n, int f0, int fb, int relu)
{
        size_t cs, hs, ws, img = (size_t)s->c * s->h * s->w;
        int p = s->k / 2;

        conv_strides(s, &cs, &hs, &ws);
        for (int i = 0; i < n; i++) {
                const float *xb = x + (size_t)i * img;
                for (int oh = 0; oh < s->h; oh++) {
                        int klo = p - oh > 0 ? p - oh : 0;
                        int khi = s->h + p - oh < s->k ? s->h + p - oh : s->k;
                        for (int ow = 0; ow < s->w; ow++) {
                                v8f a0, a1, a2, a3;
                                int lo, hi;
                                kw_range(ow, p, s->k, s->w, &lo, &hi);
                                LD8(a0, bb), LD8(a1, bb + 8);
                                LD8(a2, bb + 16), LD8(a3, bb + 24);
                                for (int kh = klo; kh < khi; kh++)
                                        for (int kw = lo; kw < hi; kw++) {
                                                const float *xp =
                                                    xb + (oh + kh - p) * hs +
                                                    (ow + kw - p) * ws;
                                                const float *wp =
                                                    wt +
                                                    (size_t)(kh * s->k + kw) *
                                                        s->c * CONV_FB;
                                                for (int c = 0; c < s->c;
                                                     c++, wp += CONV_FB) {
                                                        float xv = xp[c * cs];
                                                        v8f w0, w1, w2, w3;
                                                        LD8(w0, wp);
                                                        LD8(w1, wp + 8);
                                                        LD8(w2, wp + 16);
                                                        LD8(w3, wp + 24);
                                                        a0 += xv * w0;
                                                        a1 += xv * w1;
                                                        a2 += xv * w2;
                                                        a3 += xv * w3;
                                                }
                                        }
                                if (relu) { /* NaN and -0 give 0 */
                                        a0 = (v8f)((v8i)a0 & (a0 > 0.0f));
                                        a1 = (v8f)((v8i)a1 & (a1 > 0.0f));
                                        a2 = (v8f)((v8i)a2 & (a2 > 0.0f));
                                        a3 = (v8f)((v8i)a3 & (a3 > 0.0f));
                                }
                                float *yo =
                                    y +
                                    ((size_t)(i * s->h + oh) * s->w + ow) *
                                        s->f +
                                    f0;
                                if (fb == CONV_FB) {
                                        ST8(yo, a0), ST8(yo + 8, a1);
                                        ST8(yo + 16, a2), ST8(yo + 24, a3);
                                } else {
                                        float out[CONV_FB];
                                        ST8(out, a0), ST8(out + 8, a1);
                                        ST8(out + 16, a2), ST8(out + 24, a3);
                                        memcpy(yo, out, sizeof(*out) * fb);
                                }
                        }
                }
        }
}

/* Weight tap t of a direct conv, (kh, kw, c) in [K][K][C] order, and the
 * output rows [rlo, rhi) and columns [clo, chi) it reaches (the weight
 * gradient's loops over them); p is the padding. */
struct tap_reach {
        int p, kh, kw, c;
        int rlo, rhi, clo, chi;
};

static inline void tap_reach(const struct nn__conv *s, int t,
                             struct tap_reach *r)
{
        int p = s->k / 2, kh = t / (s->k * s->c), kw = t / s->c % s->k;

        r->p = p;
        r->kh = kh;
        r->kw = kw;
        r->c = t % s->c;
        r->rlo = p - kh > 0 ? p - kh : 0;
        r->rhi = s->h + p - kh < s->h ? s->h + p - kh : s->h;
        r->clo = p - kw > 0 ? p - kw : 0;
        r->chi = s->w + p - kw < s->w ? s->w + p - kw : s->w;
}

/* Tap t's part of the weight gradient from ni images (1 or 2: xb and
 * dyb, the next image img and dimg further; dy at filter f0), added to
 * dt[CONV_FB] image by image.  Each image's sum over the output pixels the
 * tap reaches runs in its own registers: two images make eight
 * independent chains of adds instead of four, which the latency of an
 * add (not the loads or the arithmetic) limited. */
static inline __attribute__((always_inline)) void
dw_tap(float *restrict dt, const float *restrict xb, const float *restrict dyb,
       size_t img, size_t dimg, const struct nn__conv *s, size_t cs, size_t hs,
       size_t ws, int t, int ni)
{
        struct tap_reach r;

        tap_reach(s, t, &r);
        v8f acc[2][CONV_V] = {{{0}}};

        for (int oh = r.rlo; oh < r.rhi; oh++) {
                /* xr[j * ws] and dr[j * F]: output column r.clo + j */
                const float *xr = xb + (oh + r.kh - r.p) * hs +
                                  (r.clo + r.kw - r.p) * ws + r.c * cs;
                const float *dr = dyb + ((size_t)oh * s->w + r.clo) * s->f;
                for (int j = 0; j < r.chi - r.clo; j++)
                        for (int m = 0; m < ni; m++) {
                                float xv = xr[m * img + j * ws];
                                for (int v = 0; v < CONV_V; v++) {
                                        v8f dv;
                                        LD8(dv, dr + m * dimg +
                                                    (size_t)j * s->f + 8 * v);
                                        acc[m][v] += xv * dv;
                                }
                        }
        }
        for (int m = 0; m < ni; m++)
                for (int v = 0; v < CONV_V; v++) {
                        v8f sum;
                        LD8(sum, dt + 8 * v);
                        sum += acc[m][v];
                        ST8(dt + 8 * v, sum);
                }
}

/* The same for the last block of filters (fb < CONV_FB) and one image:
 * rows of dt end at fb and the products go straight into dt. */
static void dw_tap_narrow(float *restrict dt, const float *restrict xb,
                          const float *restrict dyb, const struct nn__conv *s,
                          size_t cs, size_t hs, size_t ws, int t, int fb)
{
        struct tap_reach r;

        tap_reach(s, t, &r);

        for (int oh = r.rlo; oh < r.rhi; oh++) {
                const float *xr = xb + (oh + r.kh - r.p) * hs +
                                  (r.clo + r.kw - r.p) * ws + r.c * cs;
                const float *dr = dyb + ((size_t)oh * s->w + r.clo) * s->f;
                for (int j = 0; j < r.chi - r.clo; j++)
                        for (int o = 0; o < fb; o++)
                                dt[o] += xr[j * ws] * dr[(size_t)j * s->f + o];
        }
}

/* dwt[kkc][CONV_FB] = the weight gradient of filters [f0, f0+fb) over n
 * images (dy already masked); columns beyond fb are left 0.  Images go in
 * pairs (dw_tap); each tap's sums are added to dwt image by image, in
 * image order, so pairing changes no bit. */
NN_HOT_WIDE static void direct_dw(float *restrict dwt, const float *restrict x,
                                  const float *restrict dy,
                                  const struct nn__conv *s, int n, int f0,
                                  int fb)
{
        size_t cs, hs, ws, img = (size_t)s->c * s->h * s->w;
        size_t dimg = (size_t)s->h * s->w * s->f;
        int kkc = s->k * s->k * s->c;

        conv_strides(s, &cs, &hs, &ws);
        memset(dwt, 0, sizeof(*dwt) * (size_t)kkc * CONV_FB);
        for (int i = 0; i < n; i += 2) {
                const float *xb = x + (size_t)i * img;
                const float *dyb = dy + (size_t)i * dimg + f0;
                for (int t = 0; t < kkc; t++) {
                        float *dt = dwt + (size_t)t * CONV_FB;

                        if (fb < CONV_FB) {
                                dw_tap_narrow(dt, xb, dyb, s, cs, hs, ws, t,
                                              fb);
                                if (i + 1 < n)
                                        dw_tap_narrow(dt, xb + img, dyb + dimg,
                                                      s, cs, hs, ws, t, fb);
                        } else if (i + 1 < n) {
                                dw_tap(dt, xb, dyb, img, dimg, s, cs, hs, ws, t,
                                       2);
                        } else {
                                dw_tap(dt, xb, dyb, img, dimg, s, cs, hs, ws, t,
                                       1);
                        }
                }
        }
}

/* wt[kkc][CONV_FB] and bb[CONV_FB]: the weights and biases of filters
 * [f0, f0+fb), transposed, 0 beyond fb. */
static void direct_weights(float *wt, float *bb, const float *w, const float *b,
                           const struct nn__conv *s, int f0, int fb)
{
        int kkc = s->k * s->k * s->c;

        for (int j = 0; j < CONV_FB; j++) {
                bb[j] = j < fb ? b[f0 + j] : 0.0f;
                for (int t = 0; t < kkc; t++)
                        wt[t * CONV_FB + j] =
                            j < fb ? w[(size_t)(f0 + j) * kkc + t] : 0.0f;
        }
}

static void conv_forward_direct(float *y, const float *x, const float *w,
                                const float *b, const struct nn__conv *s,
                                int batch, int relu)
{
        float wt[CONV_DIRECT_KKC * CONV_FB], bb[CONV_FB];

        for (int f0 = 0; f0 < s->f; f0 += CONV_FB) {
                int fb = s->f - f0 < CONV_FB ? s->f - f0 : CONV_FB;
                direct_weights(wt, bb, w, b, s, f0, fb);
                direct_forward(y, x, wt, bb, s, batch, f0, fb, relu);
        }
}

/* ---- a direct conv and the max-pool after it, fused --------------------
 *
 * The first conv's output is the largest activation of the CNN preset
 * (10 MB at batch 100); written by the conv and read back by the pool, it
 * made those two passes memory-bound (docs/nn.md).  When the pool folds
 * the conv's ReLU mask in its backward pass nothing else reads that
 * output, so it need not exist: each pooled pixel's window of conv pixels
 * is computed in registers, as direct_forward computes them, and pooled
 * there, as nn__maxpool_forward pools (first strict maximum in row
 * order).  Same bits as the two passes. */

/* a[CONV_V] = bias + the taps of conv pixel (oh, ow) inside the image, in
 * wt's order (kh, kw, c), then ReLU: direct_forward's sums. */
static inline __attribute__((always_inline)) void
direct_sums(v8f *restrict a, const float *restrict xb, const float *restrict wt,
            const float *restrict bb, const struct nn__conv *s, size_t cs,
            size_t hs, size_t ws, int oh, int ow)
{
        int p = s->k / 2, lo, hi;
        int klo = p - oh > 0 ? p - oh : 0;
        int khi = s->h + p - oh < s->k ? s->h + p - oh : s->k;

        kw_range(ow, p, s->k, s->w, &lo, &hi);
        for (int v = 0; v < CONV_V; v++)
                LD8(a[v], bb + 8 * v);
        for (int kh = klo; kh < khi; kh++)
                for (int kw = lo; kw < hi; kw++) {
                        const float *xp =
                            xb + (oh + kh - p) * hs + (ow + kw - p) * ws;
                        const float *wp =
                            wt + (size_t)(kh * s->k + kw) * s->c * CONV_FB;
                        for (int c = 0; c < s->c; c++, wp += CONV_FB) {
                                float xv = xp[c * cs];
                                for (int v = 0; v < CONV_V; v++) {
                                        v8f wv;
                                        LD8(wv, wp + 8 * v);
                                        a[v] += xv * wv;
                                }
                        }
                }
        for (int v = 0; v < CONV_V; v++) /* NaN and -0 give 0 */
                a[v] = (v8f)((v8i)a[v] & (a[v] > 0.0f));
}

/* y[n, H/ps, W/ps, F] and idx, filters [f0, f0+fb): the ps x ps max-pool
 * of the ReLU conv, wt and bb as for direct_forward.  idx holds offsets
 * into the conv output each sample would have had ([H][W][F]). */
NN_HOT_WIDE static void
direct_forward_pool(float *restrict y, int32_t *restrict idx,
                    const float *restrict x, const float *restrict wt,
                    const float *restrict bb, const struct nn__conv *s, int n,
                    int f0, int fb, int ps)
{
        size_t cs, hs, ws, img = (size_t)s->c * s->h * s->w;
        int ph_n = s->h / ps, pw_n = s->w / ps;
        const v8i lane = {0, 1, 2, 3, 4, 5, 6, 7};

        conv_strides(s, &cs, &hs, &ws);
        for (int i = 0; i < n; i++) {
                const float *xb = x + (size_t)i * img;
                for (int ph = 0; ph < ph_n; ph++)
                        for (int pw = 0; pw < pw_n; pw++) {
                                v8f m[CONV_V], a[CONV_V];
                                v8i id[CONV_V];
                                size_t po =
                                    (((size_t)i * ph_n + ph) * pw_n + pw) *
                                        s->f +
                                    f0;

                                int32_t o0 =
                                    (ph * ps * s->w + pw * ps) * s->f + f0;

                                /* the window's first pixel seeds it */
                                direct_sums(m, xb, wt, bb, s, cs, hs, ws,
                                            ph * ps, pw * ps);
                                for (int v = 0; v < CONV_V; v++)
                                        id[v] = (o0 + 8 * v) + lane;
                                for (int t = 1; t < ps * ps; t++) {
                                        int oh = ph * ps + t / ps;
                                        int ow = pw * ps + t % ps;
                                        int32_t o =
                                            (oh * s->w + ow) * s->f + f0;

                                        direct_sums(a, xb, wt, bb, s, cs, hs,
                                                    ws, oh, ow);
                                        for (int v = 0; v < CONV_V; v++) {
                                                v8i oi = (o + 8 * v) + lane;
                                                v8i win = a[v] > m[v];
                                                m[v] =
                                                    (v8f)(((v8i)a[v] & win) |
                                                          ((v8i)m[v] & ~win));
                                                id[v] =
                                                    (oi & win) | (id[v] & ~win);
                                        }
                                }
                                float out[CONV_FB];
                                int32_t oid[CONV_FB];
                                for (int v = 0; v < CONV_V; v++) {
                                        ST8(out + 8 * v, m[v]);
                                        memcpy(oid + 8 * v, &id[v],
                                               sizeof(v8i));
                                }
                                memcpy(y + po, out, sizeof(*out) * fb);
                                memcpy(idx + po, oid, sizeof(*oid) * fb);
                        }
        }
}

void nn__conv_pool_forward(float *y, int32_t *idx, const float *x,
                           const float *w, const float *b,
                           const struct nn__conv *s, int batch, int ps)
{
        float wt[CONV_DIRECT_KKC * CONV_FB], bb[CONV_FB];

        for (int f0 = 0; f0 < s->f; f0 += CONV_FB) {
                int fb = s->f - f0 < CONV_FB ? s->f - f0 : CONV_FB;
                direct_weights(wt, bb, w, b, s, f0, fb);
                direct_forward_pool(y, idx, x, wt, bb, s, batch, f0, fb, ps);
        }
}

static void conv_dw_direct(float *dw, const float *x, const float *dy,
                           const struct nn__conv *s, int batch)
{
        int kkc = s->k * s->k * s->c;
        float dwt[CONV_DIRECT_KKC * CONV_FB];

        for (int f0 = 0; f0 < s->f; f0 += CONV_FB) {
                int fb = s->f - f0 < CONV_FB ? s->f - f0 : CONV_FB;
                direct_dw(dwt, x, dy, s, batch, f0, fb);
                for (int j = 0; j < fb; j++)
                        for (int t = 0; t < kkc; t++)
                                dw[(size_t)(f0 + j) * kkc + t] =
                                    dwt[t * CONV_FB + j];
        }
}

void nn__conv_forward(float *y, const float *x, const float *w, const float *b,
                      const struct nn__conv *s, int batch, float *col,
                      int chunk, int relu)
{
        int kkc = s->k * s->k * s->c, hw = s->h * s->w;
        size_t img = (size_t)s->c * hw;

        if (nn__conv_direct(s)) {
                conv_forward_direct(y, x, w, b, s, batch, relu);
                return;
        }
        for (int b0 = 0; b0 < batch; b0 += chunk) {
                int n = batch - b0 < chunk ? batch - b0 : chunk;
                float *yb = y + (size_t)b0 * hw * s->f;

                im2col(col, x + (size_t)b0 * img, s, n);
                /* y[n*HW, F] = col[n*HW, KKC] w[F, KKC]^T */
                nn_gemm(0, 1, n * hw, s->f, kkc, 1.0f, col, kkc, w, kkc, 0.0f,
                        yb, s->f);
                bias_act(yb, b, n * hw, s->f, relu);
        }
}

void nn__conv_backward(float *dx, float *dw, float *db, float *dy,
                       const float *relu_y, const float *x, const float *w,
                       const struct nn__conv *s, int batch, float *col,
                       int chunk)
{
        int kkc = s->k * s->k * s->c, hw = s->h * s->w;
        size_t img = (size_t)s->c * hw;
        int direct = nn__conv_direct(s);

        mask_bias_grad(db, dy, relu_y, batch * hw, s->f);
        if (direct)
                conv_dw_direct(dw, x, dy, s, batch);
        if (dx)
                memset(dx, 0, sizeof(*dx) * img * batch);
        for (int b0 = 0; b0 < batch; b0 += chunk) {
                int n = batch - b0 < chunk ? batch - b0 : chunk;
                const float *dyb = dy + (size_t)b0 * hw * s->f;

                if (direct && !dx)
                        break;
                /* dw[F, KKC] (+)= dy[n*HW, F]^T col[n*HW, KKC] */
                if (!direct) {
                        im2col(col, x + (size_t)b0 * img, s, n);
                        nn_gemm(1, 0, s->f, kkc, n * hw, 1.0f, dyb, s->f, col,
                                kkc, b0 == 0 ? 0.0f : 1.0f, dw, kkc);
                }
                if (!dx)
                        continue;
                /* dcol[n*HW, KKC] = dy[n*HW, F] w[F, KKC] */
                nn_gemm(0, 0, n * hw, kkc, s->f, 1.0f, dyb, s->f, w, kkc, 0.0f,
                        col, kkc);
                col2im(dx + (size_t)b0 * img, col, s, n);
        }
}

/* One window tap over c channels: y and idx keep the first strict maximum
 * (a later tap wins only if greater; NaN never wins).  Branch-free with
 * masks, so it vectorizes: as a float select of winners and an int select
 * of their indices, GCC 12 did not if-convert it and left a mispredicted
 * branch per value (15% of a CNN step, perf). */
static inline void pool_tap(float *restrict yo, int32_t *restrict io,
                            const float *restrict xo, int32_t o, int c)
{
        for (int ch = 0; ch < c; ch++) {
                float v = xo[ch], m = yo[ch];
                int32_t win = -(int32_t)(v > m);

                yo[ch] = v > m ? v : m;
                io[ch] = ((o + ch) & win) | (io[ch] & ~win);
        }
}

NN_HOT void nn__maxpool_forward(float *y, int32_t *idx, const float *x,
                                int batch, int h, int w, int c, int s)
{
        int oh_n = h / s, ow_n = w / s;
        size_t img = (size_t)h * w * c;

        /* Innermost loop over channels: contiguous in NHWC; the first tap
         * seeds the maximum (ties keep the first, as the oracle does). */
        for (int b = 0; b < batch; b++) {
                const float *xb = x + (size_t)b * img;
                for (int oh = 0; oh < oh_n; oh++) {
                        for (int ow = 0; ow < ow_n; ow++) {
                                int32_t o0 = (oh * s * w + ow * s) * c;

                                for (int ch = 0; ch < c; ch++) {
                                        y[ch] = xb[o0 + ch];
                                        idx[ch] = o0 + ch;
                                }
                                for (int i = 0; i < s; i++)
                                        for (int j = i ? 0 : 1; j < s; j++) {
                                                int32_t o = ((oh * s + i) * w +
                                                             ow * s + j) *
                                                            c;
                                                pool_tap(y, idx, xb + o, o, c);
                                        }
                                y += c;
                                idx += c;
                        }
                }
        }
}

/* One window tap of the backward pass over c channels: dx is dy where
 * this tap won the window (io holds the winners' offsets), 0 elsewhere;
 * with yo (the windows' maxima) also 0 where the maximum is not > 0.
 * The select is an AND of dy's bits with a mask: as a float ?: GCC 12
 * left a branch per value and did not vectorize the loop. */
static inline void unpool_tap(float *restrict dxo, const float *restrict dyo,
                              const int32_t *restrict io,
                              const float *restrict yo, int32_t o, int c)
{
        for (int ch = 0; ch < c; ch++) {
                int32_t keep = -(int32_t)(io[ch] == o + ch);
                uint32_t bits;

                if (yo)
                        keep &= -(int32_t)(yo[ch] > 0.0f);
                memcpy(&bits, &dyo[ch], sizeof(bits));
                bits &= (uint32_t)keep;
                memcpy(&dxo[ch], &bits, sizeof(bits));
        }
}

NN_HOT void nn__maxpool_backward(float *dx, const float *dy, const int32_t *idx,
                                 const float *relu_y, int batch, int h, int w,
                                 int c, int s)
{
        int oh_n = h / s, ow_n = w / s;
        size_t img = (size_t)h * w * c, out = (size_t)oh_n * ow_n * c;
        size_t tail = (size_t)(w - ow_n * s) * c;

        /* One pass writing every input of dx in order, window row by
         * window row: no memset and no scatter (which took 3.1 % of a CNN
         * step each), and with relu_y the mask pass of the layer below
         * (3.4 %) is folded in, read from the windows' maxima instead of
         * the 4x larger input. Windows do not overlap (stride s), so each
         * input is written once. */
        for (int b = 0; b < batch; b++) {
                float *dxb = dx + (size_t)b * img;
                const float *dyb = dy + (size_t)b * out;
                const int32_t *ib = idx + (size_t)b * out;
                const float *yb = relu_y ? relu_y + (size_t)b * out : NULL;

                for (int oh = 0; oh < oh_n; oh++)
                        for (int i = 0; i < s; i++) {
                                int32_t row = (oh * s + i) * w * c;

                                for (int ow = 0; ow < ow_n; ow++) {
                                        size_t po = ((size_t)oh * ow_n + ow) *
                                                    (size_t)c;

                                        for (int j = 0; j < s; j++) {
                                                int32_t o =
                                                    row + (ow * s + j) * c;

                                                unpool_tap(
                                                    dxb + o, dyb + po, ib + po,
                                                    yb ? yb + po : NULL, o, c);
                                        }
                                }
                                /* columns right of the last window */
                                memset(dxb + row + (size_t)ow_n * s * c, 0,
                                       sizeof(*dx) * tail);
                        }
                /* rows below the last window */
                memset(dxb + (size_t)oh_n * s * w * c, 0,
                       sizeof(*dx) * (size_t)(h - oh_n * s) * w * c);
        }
}
