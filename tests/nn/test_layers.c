/*
 * test_layers.c - every layer's backward pass against central finite
 * differences of its forward pass: dense (with and without fused ReLU),
 * ReLU, fused softmax cross-entropy, conv2d (planar and channels-last
 * input, with ReLU; im2col + GEMM and the direct path), max-pool; conv forward
 * against a direct convolution; and the softmax-CE value on huge logits
 * (stability).  Bit for bit: the direct conv path against float sums in
 * its documented order, and max-pool forward (maxima and winners, with
 * ties and NaN) against a scalar oracle; the fused direct conv + max-pool
 * against the two passes.
 *
 * Method: for a layer y = f(x, w), take a fixed random r and the scalar
 * L = sum(r * y).  The analytic gradients are the backward pass fed with
 * dy = r; the numeric ones are (L(t + h) - L(t - h)) / 2h, evaluated in
 * double from float forwards.  Inputs are kept away from ReLU kinks and
 * max-pool ties by more than h so the difference quotient is valid; the
 * bound is |num - ana| <= 1e-2 * max(|num|, |ana|) + 2e-3.
 * Replay with GN_SEED=<seed>.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_seed.h"
#include "nn/nn.h"
#include "layers.h"

static uint64_t seed;

#define H 1e-2f

static void fill(float *x, size_t n, uint64_t *st, float lo, float hi)
{
        for (size_t i = 0; i < n; i++)
                x[i] = nn__rand_uniform(st, lo, hi);
}

static double dot(const float *a, const float *b, size_t n)
{
        double s = 0;

        for (size_t i = 0; i < n; i++)
                s += (double)a[i] * b[i];
        return s;
}

/* Compares analytic ana[n] to numeric num[n]; returns mismatches. */
static int compare(const char *what, const float *ana, const double *num,
                   size_t n)
{
        int bad = 0;
        double worst = 0;

        for (size_t i = 0; i < n; i++) {
                if (isnan(num[i]))
                        continue; /* a kink, see numeric_conv_relu() */
                double a = ana[i], d = fabs(a - num[i]);
                double tol = 1e-2 * fmax(fabs(a), fabs(num[i])) + 2e-3;
                if (d / tol > worst)
                        worst = d / tol;
                if (!(d <= tol)) {
                        if (bad < 3)
                                print_error("%s[%zu]: analytic %.6g numeric "
                                            "%.6g seed=%llu\n",
                                            what, i, a, num[i],
                                            (unsigned long long)seed);
                        bad++;
                }
        }
        printf("  %-12s %zu grads, worst error/bound %.3f\n", what, n, worst);
        return bad;
}

/* ---- dense -------------------------------------------------------------- */

struct dense_case {
        int b, k, n, relu;
        float *x, *w, *bias, *r, *y;
};

static double dense_loss(struct dense_case *c)
{
        nn__dense_forward(c->y, c->x, c->w, c->bias, c->b, c->k, c->n, c->relu);
        return dot(c->y, c->r, (size_t)c->b * c->n);
}

/* Numeric gradient of dense_loss w.r.t. every entry of t[len]. */
static void numeric(double (*loss)(void *), void *c, float *t, size_t len,
                    double *out)
{
        for (size_t i = 0; i < len; i++) {
                float save = t[i];
                t[i] = save + H;
                double lp = loss(c);
                t[i] = save - H;
                double lm = loss(c);
                t[i] = save;
                out[i] = (lp - lm) / (2.0 * H);
        }
}

static double dense_loss_v(void *c)
{
        return dense_loss(c);
}

static void check_dense(int relu)
{
        uint64_t st = seed + (uint64_t)relu;
        struct dense_case c = {.b = 5, .k = 7, .n = 6, .relu = relu};
        size_t nx = 5 * 7, nw = 6 * 7, ny = 5 * 6;
        float x[35], w[42], bias[6], r[30], y[30], dy[30];
        float dx[35], dw[42], db[6];
        double num[64];
        int bad = 0;

        c.x = x, c.w = w, c.bias = bias, c.r = r, c.y = y;
        fill(x, nx, &st, -1, 1);
        fill(w, nw, &st, -1, 1);
        fill(bias, 6, &st, -0.5f, 0.5f);
        fill(r, ny, &st, -1, 1);
        /* Keep pre-activations away from the ReLU kink: |z| >= 0.2 is far
         * more than a step of H in any input can move them. */
        for (int tries = 0; relu && tries < 1000; tries++) {
                int near = 0;
                nn__dense_forward(y, x, w, bias, 5, 7, 6, 0);
                for (int i = 0; i < 30; i++)
                        near += fabsf(y[i]) < 0.2f;
                if (!near)
                        break;
                fill(x, nx, &st, -1, 1);
                fill(bias, 6, &st, -0.5f, 0.5f);
        }
        dense_loss(&c);
        memcpy(dy, r, sizeof(dy));
        nn__dense_backward(dx, dw, db, dy, relu ? y : NULL, x, w, 5, 7, 6);
        numeric(dense_loss_v, &c, x, nx, num);
        bad += compare(relu ? "dense+relu dx" : "dense dx", dx, num, nx);
        numeric(dense_loss_v, &c, w, nw, num);
        bad += compare(relu ? "dense+relu dw" : "dense dw", dw, num, nw);
        numeric(dense_loss_v, &c, bias, 6, num);
        bad += compare(relu ? "dense+relu db" : "dense db", db, num, 6);
        assert_int_equal(bad, 0);
}

static void test_dense(void **state)
{
        check_dense(0);
}

static void test_dense_relu(void **state)
{
        check_dense(1);
}

/* dx must be skippable (first layer) without touching dw/db results. */
static void test_dense_no_dx(void **state)
{
        uint64_t st = seed + 7;
        float x[12], w[6], dy[8], dy2[8], dw1[6], db1[2], dw2[6], db2[2],
            dx[12];

        fill(x, 12, &st, -1, 1);
        fill(w, 6, &st, -1, 1);
        fill(dy, 8, &st, -1, 1);
        memcpy(dy2, dy, sizeof(dy));
        nn__dense_backward(NULL, dw1, db1, dy, NULL, x, w, 4, 3, 2);
        nn__dense_backward(dx, dw2, db2, dy2, NULL, x, w, 4, 3, 2);
        assert_memory_equal(dw1, dw2, sizeof(dw1));
        assert_memory_equal(db1, db2, sizeof(db1));
        /* db is the column sum of dy. */
        assert_float_equal(db1[0], dy[0] + dy[2] + dy[4] + dy[6], 1e-6);
}

/* ---- relu --------------------------------------------------------------- */

static void test_relu(void **state)
{
        const float x[] = {-2.0f, -0.5f, 0.5f, 3.0f, 0.0f};
        const float dy[] = {1, 2, 3, 4, 5};
        float y[5], dx[5];

        nn__relu_forward(y, x, 5);
        assert_true(y[0] == 0 && y[1] == 0 && y[2] == 0.5f && y[3] == 3.0f &&
                    y[4] == 0);
        nn__relu_backward(dx, dy, y, 5);
        /* Derivative: 1 where x > 0, 0 elsewhere (0 at the kink). */
        assert_true(dx[0] == 0 && dx[1] == 0 && dx[2] == 3 && dx[3] == 4 &&
                    dx[4] == 0);
}

/* ---- softmax cross-entropy ---------------------------------------------- */

struct ce_case {
        float *z;
        const uint8_t *y;
        int b, c;
};

static double ce_loss_v(void *p)
{
        struct ce_case *c = p;

        return nn__softmax_ce(NULL, c->z, c->y, c->b, c->c, NULL);
}

static void test_softmax_ce_grad(void **state)
{
        uint64_t st = seed + 11;
        float z[4 * 5], dz[4 * 5];
        const uint8_t y[4] = {0, 4, 2, 2};
        struct ce_case c = {z, y, 4, 5};
        double num[20];
        int hits = 0;

        fill(z, 20, &st, -3, 3);
        double l = nn__softmax_ce(dz, z, y, 4, 5, &hits);
        assert_true(l > 0);
        numeric(ce_loss_v, &c, z, 20, num);
        assert_int_equal(compare("softmax-ce dz", dz, num, 20), 0);
        /* Each row of dz sums to 0 (softmax sums to 1, minus one-hot). */
        for (int i = 0; i < 4; i++) {
                double s = 0;
                for (int j = 0; j < 5; j++)
                        s += dz[i * 5 + j];
                assert_true(fabs(s) < 1e-6);
        }
}

static void test_softmax_ce_values(void **state)
{
        /* Uniform logits: loss = log(C).  Huge logits must not overflow. */
        const float z[2 * 3] = {0, 0, 0, 1000.0f, -1000.0f, 990.0f};
        const uint8_t y[2] = {1, 2};
        float dz[6];
        int hits = 0;
        double l = nn__softmax_ce(dz, z, y, 2, 3, &hits);
        /* row 2: -log softmax(990 | 1000, -1000, 990) = log(1 + e^-10)+10 */
        double want = (log(3.0) + (10.0 + log1p(exp(-10.0)))) / 2.0;

        assert_true(isfinite(l));
        assert_true(fabs(l - want) < 1e-5);
        assert_int_equal(hits, 0); /* row 1 ties -> class 0; row 2 -> 0 */
        for (int i = 0; i < 6; i++)
                assert_true(isfinite(dz[i]));
        assert_true(fabsf(dz[0] - (1.0f / 3.0f) / 2.0f) < 1e-6f);
        assert_true(fabsf(dz[1] - (1.0f / 3.0f - 1.0f) / 2.0f) < 1e-6f);
}

/* ---- conv2d ------------------------------------------------------------- */

struct conv_case {
        struct nn__conv s;
        int b, relu, chunk;
        float *x, *w, *bias, *r, *y, *col;
};

static size_t conv_out(const struct conv_case *c)
{
        return (size_t)c->b * c->s.h * c->s.w * c->s.f;
}

static double conv_loss_v(void *p)
{
        struct conv_case *c = p;

        nn__conv_forward(c->y, c->x, c->w, c->bias, &c->s, c->b, c->col,
                         c->chunk, c->relu);
        return dot(c->y, c->r, conv_out(c));
}

/* Direct convolution (the oracle for the forward pass), NHWC output. */
static float direct_conv(const struct conv_case *c, int b, int oh, int ow,
                         int f)
{
        const struct nn__conv *s = &c->s;
        int p = s->k / 2;
        double acc = c->bias[f];

        for (int kh = 0; kh < s->k; kh++)
                for (int kw = 0; kw < s->k; kw++)
                        for (int ch = 0; ch < s->c; ch++) {
                                int ih = oh + kh - p, iw = ow + kw - p;
                                if (ih < 0 || ih >= s->h || iw < 0 ||
                                    iw >= s->w)
                                        continue;
                                size_t xi =
                                    s->in_planar
                                        ? (((size_t)b * s->c + ch) * s->h +
                                           ih) * s->w +
                                              iw
                                        : (((size_t)b * s->h + ih) * s->w +
                                           iw) * s->c +
                                              ch;
                                acc +=
                                    (double)c->x[xi] *
                                    c->w[((f * s->k + kh) * s->k + kw) * s->c +
                                         ch];
                        }
        if (c->relu && acc < 0)
                acc = 0;
        return (float)acc;
}

/* Numeric gradient of the conv+ReLU loss w.r.t. t[len], from the forward
 * without ReLU (applied here); an entry whose +-H step moves any
 * pre-activation across 0 is a kink, not a derivative: it is set to NAN
 * and skipped by compare().  Returns the number skipped. */
static int numeric_conv_relu(struct conv_case *c, float *t, size_t len,
                             double *out)
{
        size_t ny = conv_out(c);
        float *zp = malloc(sizeof(float) * ny),
              *zm = malloc(sizeof(float) * ny);
        float *y = c->y;
        int skipped = 0;

        c->relu = 0;
        for (size_t i = 0; i < len; i++) {
                float save = t[i];
                double lp = 0, lm = 0;
                int kink = 0;
                c->y = zp;
                t[i] = save + H;
                conv_loss_v(c);
                c->y = zm;
                t[i] = save - H;
                conv_loss_v(c);
                t[i] = save;
                for (size_t j = 0; j < ny; j++) {
                        kink |= (zp[j] > 0) != (zm[j] > 0);
                        lp += zp[j] > 0 ? (double)zp[j] * c->r[j] : 0;
                        lm += zm[j] > 0 ? (double)zm[j] * c->r[j] : 0;
                }
                out[i] = kink ? NAN : (lp - lm) / (2.0 * H);
                skipped += kink;
        }
        c->y = y;
        c->relu = 1;
        free(zp);
        free(zm);
        return skipped;
}

/* One conv layer (c channels, f filters, 3x3 on 5x4 images, 3 samples)
 * through the path `direct` names (nn__conv_direct): forward against the
 * direct convolution above, backward against finite differences. */
static void check_conv(int c_in, int f, int direct, int planar, int relu,
                       int chunk)
{
        uint64_t st = seed + 100 + planar * 2 + relu + c_in * 4 + f * 16;
        struct conv_case c = {.s = {.c = c_in,
                                    .h = 5,
                                    .w = 4,
                                    .f = f,
                                    .k = 3,
                                    .in_planar = planar},
                              .b = 3,
                              .relu = relu,
                              .chunk = chunk};
        size_t nx = (size_t)3 * c_in * 5 * 4, nw = (size_t)f * 3 * 3 * c_in;
        size_t ny = conv_out(&c);
        float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw);
        float *bias = malloc(sizeof(float) * f),
              *r = malloc(sizeof(float) * ny);
        float *y = malloc(sizeof(float) * ny), *dy = malloc(sizeof(float) * ny);
        float *dx = malloc(sizeof(float) * nx),
              *dw = malloc(sizeof(float) * nw);
        float *db = malloc(sizeof(float) * f);
        double *num = malloc(sizeof(double) * (nx > nw ? nx : nw));
        float *col = malloc(sizeof(float) * nn__conv_col_len(&c.s, chunk));
        int bad = 0, skipped = 0;

        assert_int_equal(nn__conv_direct(&c.s), direct);
        c.x = x, c.w = w, c.bias = bias, c.r = r, c.y = y, c.col = col;
        fill(w, nw, &st, -0.5f, 0.5f);
        fill(r, ny, &st, -1, 1);
        fill(x, nx, &st, -1, 1);
        fill(bias, f, &st, -0.5f, 0.5f);
        conv_loss_v(&c);
        /* Forward against the direct convolution. */
        for (int b = 0; b < c.b; b++)
                for (int oh = 0; oh < c.s.h; oh++)
                        for (int ow = 0; ow < c.s.w; ow++)
                                for (int o = 0; o < f; o++) {
                                        float want =
                                            direct_conv(&c, b, oh, ow, o);
                                        float got =
                                            y[((b * c.s.h + oh) * c.s.w + ow) *
                                                  f +
                                              o];
                                        bad += !(fabsf(got - want) < 1e-5f);
                                }
        assert_int_equal(bad, 0);
        memcpy(dy, r, sizeof(float) * ny);
        nn__conv_backward(dx, dw, db, dy, relu ? y : NULL, x, w, &c.s, c.b, col,
                          chunk);
        if (relu)
                skipped += numeric_conv_relu(&c, x, nx, num);
        else
                numeric(conv_loss_v, &c, x, nx, num);
        bad += compare("conv dx", dx, num, nx);
        if (relu)
                skipped += numeric_conv_relu(&c, w, nw, num);
        else
                numeric(conv_loss_v, &c, w, nw, num);
        bad += compare("conv dw", dw, num, nw);
        if (relu)
                skipped += numeric_conv_relu(&c, bias, f, num);
        else
                numeric(conv_loss_v, &c, bias, f, num);
        bad += compare("conv db", db, num, f);
        /* Without dx (a first layer), dw must come out the same. */
        memcpy(dy, r, sizeof(float) * ny);
        conv_loss_v(&c);
        float *dw2 = malloc(sizeof(float) * nw);
        nn__conv_backward(NULL, dw2, db, dy, relu ? y : NULL, x, w, &c.s, c.b,
                          col, chunk);
        assert_memory_equal(dw, dw2, sizeof(float) * nw);
        free(dw2);
        printf("  (%d entries at a ReLU kink skipped)\n", skipped);
        assert_int_equal(bad, 0);
        /* Most entries must have been checked. */
        assert_true(skipped < (int)(nx + nw) / 4);
        free(x), free(w), free(r), free(y), free(dy), free(dx), free(dw);
        free(num), free(col), free(bias), free(db);
}

/* im2col + GEMM: a patch of 3 x 3 x 5 = 45 values. */
static void test_conv_nhwc(void **state)
{
        check_conv(5, 2, 0, 0, 0, 3);
}

static void test_conv_planar_relu(void **state)
{
        check_conv(5, 2, 0, 1, 1, 2); /* chunk 2 of 3 samples: dw accumulates */
}

static void test_conv_nhwc_relu_chunk1(void **state)
{
        check_conv(5, 2, 0, 0, 1, 1);
}

/* The direct path: patches of 27 (RGB), 9 (grey) and 18 values; filter
 * counts below, at and across the direct path's block of 32. */
static void test_conv_direct_rgb(void **state)
{
        check_conv(3, 2, 1, 1, 1, 2);
}

static void test_conv_direct_grey_blocks(void **state)
{
        check_conv(1, 33, 1, 0, 0, 1);
}

static void test_conv_direct_nhwc_32(void **state)
{
        check_conv(2, 32, 1, 0, 0, 3);
}

/* Input x[b, ih, iw, ch] of a conv case, 0 outside the image. */
static float conv_in(const struct conv_case *c, int b, int ih, int iw, int ch)
{
        const struct nn__conv *s = &c->s;

        if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w)
                return 0.0f;
        return s->in_planar
                   ? c->x[(((size_t)b * s->c + ch) * s->h + ih) * s->w + iw]
                   : c->x[(((size_t)b * s->h + ih) * s->w + iw) * s->c + ch];
}

/* The direct path's results bit for bit against float sums in the order
 * it documents: forward, the bias plus the taps inside the image in
 * (kh, kw, c) order (then ReLU); weight gradient, per image a sum from 0
 * over the output pixels in row order, added to the total image by image.
 * Sizes with several inner pixels per row, odd and even batches (the
 * weight gradient takes images in pairs); f a multiple of the block of 32. */
static void check_conv_direct_exact(int c_in, int f, int h, int w, int b,
                                    int planar)
{
        uint64_t st = seed + 400 + (uint64_t)c_in * 8 + (uint64_t)h * 64 + b;
        struct conv_case c = {.s = {.c = c_in,
                                    .h = h,
                                    .w = w,
                                    .f = f,
                                    .k = 3,
                                    .in_planar = planar},
                              .b = b,
                              .relu = 1,
                              .chunk = 1};
        const struct nn__conv *s = &c.s;
        size_t nx = (size_t)b * c_in * h * w, nw = (size_t)f * 9 * c_in;
        size_t ny = conv_out(&c);
        float *x = malloc(sizeof(float) * nx), *wt = malloc(sizeof(float) * nw);
        float *bias = malloc(sizeof(float) * f),
              *y = malloc(sizeof(float) * ny);
        float *dy = malloc(sizeof(float) * ny),
              *dw = malloc(sizeof(float) * nw);
        float *db = malloc(sizeof(float) * f);
        int bad_y = 0, bad_w = 0;

        assert_int_equal(nn__conv_direct(s), 1);
        c.x = x, c.w = wt, c.bias = bias;
        fill(x, nx, &st, -1, 1);
        fill(wt, nw, &st, -0.5f, 0.5f);
        fill(bias, f, &st, -0.5f, 0.5f);
        fill(dy, ny, &st, -1, 1);
        nn__conv_forward(y, x, wt, bias, s, b, NULL, 1, 1);
        for (size_t k = 0; k < ny; k++) {
                int o = (int)(k % f), ow = (int)(k / f % w);
                int oh = (int)(k / f / w % h), n = (int)(k / f / w / h);
                float acc = bias[o];
                for (int kh = 0; kh < 3; kh++)
                        for (int kw = 0; kw < 3; kw++)
                                for (int ch = 0; ch < c_in; ch++) {
                                        if (oh + kh - 1 < 0 ||
                                            oh + kh - 1 >= h ||
                                            ow + kw - 1 < 0 || ow + kw - 1 >= w)
                                                continue;
                                        acc +=
                                            conv_in(&c, n, oh + kh - 1,
                                                    ow + kw - 1, ch) *
                                            wt[((o * 3 + kh) * 3 + kw) * c_in +
                                               ch];
                                }
                acc = acc > 0.0f ? acc : 0.0f;
                bad_y += memcmp(&acc, &y[k], sizeof(acc)) != 0;
        }
        nn__conv_backward(NULL, dw, db, dy, NULL, x, wt, s, b, NULL, 1);
        for (size_t k = 0; k < nw; k++) {
                int o = (int)(k / (9 * c_in)), t = (int)(k % (9 * c_in));
                int kh = t / (3 * c_in), kw = t / c_in % 3, ch = t % c_in;
                float total = 0.0f;
                for (int n = 0; n < b; n++) {
                        float acc = 0.0f;
                        for (int oh = 0; oh < h; oh++)
                                for (int ow = 0; ow < w; ow++) {
                                        int ih = oh + kh - 1, iw = ow + kw - 1;
                                        if (ih < 0 || ih >= h || iw < 0 ||
                                            iw >= w)
                                                continue;
                                        acc +=
                                            conv_in(&c, n, ih, iw, ch) *
                                            dy[(((size_t)n * h + oh) * w + ow) *
                                                   f +
                                               o];
                                }
                        total += acc;
                }
                bad_w += memcmp(&total, &dw[k], sizeof(total)) != 0;
        }
        if (bad_y || bad_w)
                printf("  direct c=%d f=%d %dx%d b=%d: y %d of %zu, dw %d of "
                       "%zu differ\n",
                       c_in, f, h, w, b, bad_y, ny, bad_w, nw);
        assert_int_equal(bad_y + bad_w, 0);
        free(x), free(wt), free(bias), free(y), free(dy), free(dw), free(db);
}

static void test_conv_direct_exact(void **state)
{
        check_conv_direct_exact(1, 32, 7, 8, 3, 1);
        check_conv_direct_exact(1, 64, 6, 9, 4, 0);
        check_conv_direct_exact(3, 32, 5, 6, 1, 1); /* RGB, a batch of 1 */
        check_conv_direct_exact(2, 32, 4, 5, 2, 0);
}

/* ---- max-pool ----------------------------------------------------------- */

struct pool_case {
        float *x, *y, *r;
        int32_t *idx;
        int b, h, w, c, s;
};

static double pool_loss_v(void *p)
{
        struct pool_case *c = p;

        nn__maxpool_forward(c->y, c->idx, c->x, c->b, c->h, c->w, c->c, c->s);
        return dot(c->y, c->r,
                   (size_t)c->b * (c->h / c->s) * (c->w / c->s) * c->c);
}

/* Max-pool S = 2 over B = 2 images of hh x w x 3 (odd sizes leave a row or
 * column outside every window): forward against the first window, backward
 * against finite differences, into a dx filled with NaN first (every entry
 * must be written). relu: x stands for a ReLU layer's output and the
 * backward pass applies its mask (dx must be 0 wherever x <= 0: three
 * quarters of x are negative then, so some windows' winners are). */
static void check_pool(int hh, int w, int relu)
{
        enum { B = 2, C = 3, S = 2 };
        uint64_t st = seed + 200 + (uint64_t)hh * 16 + (uint64_t)w;
        size_t nx = (size_t)B * hh * w * C,
               ny = (size_t)B * (hh / S) * (w / S) * C;
        float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
        float *r = malloc(sizeof(float) * ny), *dx = malloc(sizeof(float) * nx);
        int32_t *idx = malloc(sizeof(int32_t) * ny);
        double *num = malloc(sizeof(double) * nx);
        struct pool_case c = {x, y, r, idx, B, hh, w, C, S};

        /* Distinct values spaced 0.05 apart (> 2H): no ties, no swaps. */
        for (size_t i = 0; i < nx; i++)
                x[i] = 0.05f * (float)i - (relu ? 8.0f : 3.0f);
        for (size_t i = nx - 1; i > 0; i--) {
                size_t j = (size_t)(nn__rand_u64(&st) % (uint64_t)(i + 1));
                float t = x[i];
                x[i] = x[j];
                x[j] = t;
        }
        fill(r, ny, &st, -1, 1);
        pool_loss_v(&c);
        /* The first window of channel 0 is x[0,0], x[0,1], x[1,0], x[1,1]. */
        float m0 = fmaxf(fmaxf(x[0], x[C]), fmaxf(x[w * C], x[w * C + C]));
        assert_true(y[0] == m0);
        for (size_t i = 0; i < nx; i++)
                dx[i] = NAN;
        nn__maxpool_backward(dx, r, idx, relu ? y : NULL, B, hh, w, C, S);
        numeric(pool_loss_v, &c, x, nx, num);
        if (relu) {
                size_t masked = 0;

                for (size_t i = 0; i < nx; i++)
                        if (!(x[i] > 0.0f)) {
                                masked += num[i] != 0.0;
                                num[i] = 0.0;
                        }
                assert_true(masked > 0); /* the case tests the mask */
        }
        assert_int_equal(compare("maxpool dx", dx, num, nx), 0);
        free(x), free(y), free(r), free(dx), free(idx), free(num);
}

static void test_maxpool(void **state)
{
        check_pool(4, 6, 0);
}

static void test_maxpool_odd(void **state)
{
        check_pool(5, 7, 0);
}

static void test_maxpool_relu(void **state)
{
        check_pool(5, 7, 1);
}

/* Max-pool forward against a scalar oracle (the first strict maximum of
 * each window, taps in row order; NaN never wins), y's bits and idx
 * exactly: channel counts that exercise the 32- and 8-channel vector
 * blocks and the leftover channels, s = 2 and 3, sizes that leave rows and
 * columns outside every window, and values from {-1, 0, 1, NaN, -0}, so
 * most windows hold ties and some a NaN (also as the first tap, which
 * then stays the maximum). */
static void check_pool_oracle(int c, int s, int hh, int w)
{
        enum { B = 2 };
        uint64_t st = seed + 300 + (uint64_t)c * 64 + (uint64_t)s * 16 + hh;
        int oh_n = hh / s, ow_n = w / s;
        size_t nx = (size_t)B * hh * w * c, ny = (size_t)B * oh_n * ow_n * c;
        float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
        int32_t *idx = malloc(sizeof(int32_t) * ny);
        const float vals[] = {-1.0f, 0.0f, 1.0f, NAN, -0.0f, 1.0f, 0.0f};
        int bad = 0, nan_first = 0;

        for (size_t i = 0; i < nx; i++)
                x[i] = vals[nn__rand_u64(&st) % 7];
        nn__maxpool_forward(y, idx, x, B, hh, w, c, s);
        for (int b = 0; b < B; b++)
                for (int oh = 0; oh < oh_n; oh++)
                        for (int ow = 0; ow < ow_n; ow++)
                                for (int ch = 0; ch < c; ch++) {
                                        const float *xb =
                                            x + (size_t)b * hh * w * c;
                                        int32_t win = -1;
                                        for (int i = 0; i < s; i++)
                                                for (int j = 0; j < s; j++) {
                                                        int32_t o =
                                                            ((oh * s + i) * w +
                                                             ow * s + j) *
                                                                c +
                                                            ch;
                                                        if (win < 0 ||
                                                            xb[o] > xb[win])
                                                                win = o;
                                                }
                                        size_t k =
                                            (((size_t)b * oh_n + oh) * ow_n +
                                             ow) *
                                                c +
                                            ch;
                                        nan_first += isnan(xb[win]);
                                        bad += idx[k] != win ||
                                               memcmp(&y[k], &xb[win],
                                                      sizeof(float)) != 0;
                                }
        if (bad)
                printf("  maxpool c=%d s=%d %dx%d: %d of %zu wrong\n", c, s, hh,
                       w, bad, ny);
        assert_int_equal(bad, 0);
        assert_true(nan_first > 0); /* the case covers a NaN first tap */
        free(x), free(y), free(idx);
}

static void test_maxpool_oracle(void **state)
{
        const int cs[] = {1, 3, 8, 11, 32, 40, 64, 75};

        for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
                check_pool_oracle(cs[i], 2, 5, 7);
                check_pool_oracle(cs[i], 3, 7, 8);
        }
}

/* The fused direct conv + ReLU + max-pool against the two passes, y's
 * bits and idx exactly: grey and RGB input, planar and NHWC, 32 filters
 * and 33 and 64 (blocks of 32, a narrow last one), pools of 2 and 3 on
 * sizes that leave conv rows and columns outside every window.  Many
 * ReLU outputs are 0, so windows hold ties; inputs include NaN (the ReLU
 * turns a NaN sum into 0).  coarse: inputs and weights from {-1, 0, 1}
 * and {-0.5, 0, 0.5}, so positive sums tie too, at any tap of a window. */
static void check_conv_pool(int c_in, int f, int h, int w, int ps, int planar,
                            int coarse)
{
        enum { B = 3 };
        uint64_t st = seed + 500 + (uint64_t)c_in * 8 + (uint64_t)f * 64 + ps;
        struct nn__conv s = {
            .c = c_in, .h = h, .w = w, .f = f, .k = 3, .in_planar = planar};
        size_t nx = (size_t)B * c_in * h * w, nw = (size_t)f * 9 * c_in;
        size_t ny = (size_t)B * h * w * f,
               np = (size_t)B * (h / ps) * (w / ps) * f;
        float *x = malloc(sizeof(float) * nx), *wt = malloc(sizeof(float) * nw);
        float *bias = malloc(sizeof(float) * f),
              *y = malloc(sizeof(float) * ny);
        float *p1 = malloc(sizeof(float) * np),
              *p2 = malloc(sizeof(float) * np);
        int32_t *i1 = malloc(sizeof(int32_t) * np),
                *i2 = malloc(sizeof(int32_t) * np);
        int bad = 0;

        fill(x, nx, &st, -1, 1);
        fill(wt, nw, &st, -0.5f, 0.5f);
        fill(bias, f, &st, -0.5f, 0.5f);
        for (size_t k = 0; coarse && k < nx; k++)
                x[k] = nearbyintf(x[k]);
        for (size_t k = 0; coarse && k < nw; k++)
                wt[k] = 0.5f * nearbyintf(2.0f * wt[k]);
        x[nx / 2] = NAN;
        nn__conv_forward(y, x, wt, bias, &s, B, NULL, 1, 1);
        nn__maxpool_forward(p1, i1, y, B, h, w, f, ps);
        nn__conv_pool_forward(p2, i2, x, wt, bias, &s, B, ps);
        for (size_t k = 0; k < np; k++)
                bad += i1[k] != i2[k] || memcmp(&p1[k], &p2[k], sizeof(float));
        if (bad)
                printf("  conv+pool c=%d f=%d %dx%d p%d coarse=%d: %d of %zu "
                       "differ\n",
                       c_in, f, h, w, ps, coarse, bad, np);
        assert_int_equal(bad, 0);
        free(x), free(wt), free(bias), free(y), free(p1), free(p2), free(i1);
        free(i2);
}

static void test_conv_pool_fused(void **state)
{
        for (int coarse = 0; coarse < 2; coarse++) {
                check_conv_pool(1, 32, 7, 9, 2, 1, coarse);
                check_conv_pool(1, 64, 8, 8, 2, 0, coarse);
                check_conv_pool(3, 33, 7, 8, 3, 1, coarse);
                check_conv_pool(2, 32, 5, 5, 2, 0, coarse);
        }
}

/* ---- PRNG -----------------------------------------------------------------
 */

static void test_prng(void **state)
{
        /* splitmix64 reference: first output for state 0. */
        uint64_t st = 0;
        assert_true(nn__rand_u64(&st) == 0xe220a8397b1dcdafULL);
        st = 1;
        for (int i = 0; i < 1000; i++) {
                float u = nn__rand_uniform(&st, -2.0f, 3.0f);
                assert_true(u >= -2.0f && u < 3.0f);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_prng),
            cmocka_unit_test(test_dense),
            cmocka_unit_test(test_dense_relu),
            cmocka_unit_test(test_dense_no_dx),
            cmocka_unit_test(test_relu),
            cmocka_unit_test(test_softmax_ce_grad),
            cmocka_unit_test(test_softmax_ce_values),
            cmocka_unit_test(test_conv_nhwc),
            cmocka_unit_test(test_conv_planar_relu),
            cmocka_unit_test(test_conv_nhwc_relu_chunk1),
            cmocka_unit_test(test_conv_direct_rgb),
            cmocka_unit_test(test_conv_direct_grey_blocks),
            cmocka_unit_test(test_conv_direct_nhwc_32),
            cmocka_unit_test(test_conv_direct_exact),
            cmocka_unit_test(test_maxpool),
            cmocka_unit_test(test_maxpool_odd),
            cmocka_unit_test(test_maxpool_relu),
            cmocka_unit_test(test_maxpool_oracle),
            cmocka_unit_test(test_conv_pool_fused),
        };
        int rc;

        seed = gn_test_seed("test_layers", 20261129);
        nn_lib_init();
        rc = cmocka_run_group_tests(tests, NULL, NULL);
        nn_lib_finalize();
        return rc;
}
