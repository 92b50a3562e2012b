/*
 * test_codec.c - gradient payload codecs (gossip/codec.c).
 *
 * Proves: the header bytes are what docs/learning.md says; fp32 round trips
 * bit for bit; fp16 conversion is exact on every half, rounds to nearest
 * even (checked against the compiler's _Float16 where it has one), keeps
 * the 2^-11 relative bound in the normal range and 2^-25 absolute in the
 * subnormal range, saturates at 65504; int8 error <= scale/2 per element;
 * top-k sends exactly the k largest magnitudes and residual + sent equals
 * the input; error feedback conserves mass over many steps for every codec
 * and partition count; over P rounds every element is sent exactly once;
 * the stateless encoder of one partition makes the stateful encoder's
 * payload for it and leaves a residual alone;
 * every truncation is rejected and every bit flip is rejected or decodes to
 * finite values inside the model; NaN/Inf and malformed headers are refused
 * with the documented codes. Seed from GN_SEED.
 */
#include <float.h>
#include <inttypes.h>
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
#include "base/gn_endian.h"
#include "gossip/codec.h"

static uint64_t g_seed = 20261129;

#include "base/gn_rng.h"

static float rng_float(uint64_t *s) /* in [-1, 1) */
{
        return (float)((double)(gn_splitmix64(s) >> 11) * 0x1p-52 - 1.0);
}

/* Gradient-like values: random sign, magnitudes over six decades, some
 * exact zeros. */
static void fill(float *x, size_t n, uint64_t *s)
{
        for (size_t i = 0; i < n; i++) {
                if (gn_splitmix64(s) % 10 == 0) {
                        x[i] = 0.0f;
                        continue;
                }
                x[i] = rng_float(s) *
                       powf(10.0f, (float)(gn_splitmix64(s) % 7) - 4.0f);
        }
}

static void wrf(uint8_t *p, float f)
{
        uint32_t u;

        memcpy(&u, &f, 4);
        gn_le32_put(p, u);
}

static uint32_t fbits(float f)
{
        uint32_t u;

        memcpy(&u, &f, 4);
        return u;
}

static float bitsf(uint32_t u)
{
        float f;

        memcpy(&f, &u, 4);
        return f;
}

static void codec(struct gossip_codec *c, int id, size_t n, uint32_t parts,
                  uint32_t block, uint32_t k, int ef)
{
        struct gossip_codec_cfg cfg = {
            .id = id,
            .n = n,
            .parts = parts,
            .block = block,
            .k = k,
            .error_feedback = ef,
        };

        assert_int_equal(gossip_codec_init(c, &cfg), 0);
}

static size_t enc(struct gossip_codec *c, uint64_t step, const float *g,
                  uint8_t *buf, size_t cap)
{
        size_t len = 0;

        assert_int_equal(
            gossip_codec_encode(c, step, g, c->cfg.n, buf, cap, &len), 0);
        assert_true(len <= gossip_codec_max_size(c));
        return len;
}

static void test_header_layout(void **state)
{
        struct gossip_codec c;
        float g[1000] = {0};
        uint8_t buf[8192];
        size_t len;

        (void)state;
        codec(&c, GOSSIP_CODEC_FP32, 10, 1, 0, 0, 0);
        len = enc(&c, 3, g, buf, sizeof(buf));
        assert_int_equal(len, 20 + 40);
        {
                const uint8_t want[20] = {1, 1, 0,  0, 1, 0, 0, 0, 10, 0,
                                          0, 0, 10, 0, 0, 0, 0, 0, 0,  0};
                assert_memory_equal(buf, want, 20);
        }
        gossip_codec_free(&c);
        /* int8, 3 partitions, step 4 -> partition 1 = [333, 666) */
        codec(&c, GOSSIP_CODEC_INT8, 1000, 3, 0, 0, 0);
        len = enc(&c, 4, g, buf, sizeof(buf));
        assert_int_equal(len, 20 + 4 * 2 + 333);
        {
                const uint8_t want[20] = {1, 3, 1,  0, 3, 0, 0, 0, 0xe8, 3,
                                          0, 0, 77, 1, 0, 0, 0, 1, 0,    0};
                assert_memory_equal(buf, want, 20);
        }
        gossip_codec_free(&c);
        codec(&c, GOSSIP_CODEC_TOPK, 1000, 1, 0, 5, 0);
        assert_int_equal(enc(&c, 0, g, buf, sizeof(buf)), 20 + 8 * 5);
        assert_int_equal(buf[1], 4);
        assert_int_equal(gn_le32_get(buf + 16), 5);
        gossip_codec_free(&c);
        codec(&c, GOSSIP_CODEC_FP16, 1000, 1, 0, 0, 0);
        assert_int_equal(enc(&c, 0, g, buf, sizeof(buf)), 20 + 2000);
        gossip_codec_free(&c);
        /* default top-k is 1% */
        codec(&c, GOSSIP_CODEC_TOPK, 1000, 1, 0, 0, 0);
        assert_int_equal(enc(&c, 0, g, buf, sizeof(buf)), 20 + 8 * 10);
        gossip_codec_free(&c);
}

static void test_fp32_exact(void **state)
{
        enum { N = 600 };
        uint64_t s = g_seed;
        struct gossip_codec c;
        struct gossip_codec_info info;
        float g[N], out[N];
        uint8_t buf[20 + 4 * N];
        size_t len;

        (void)state;
        for (size_t i = 0; i < N; i++)
                g[i] = bitsf((uint32_t)gn_splitmix64(&s) &
                             0xff7fffffu); /* finite */
        g[0] = -0.0f;
        g[1] = FLT_MAX;
        g[2] = -FLT_MIN;
        g[3] = bitsf(1); /* smallest subnormal */
        codec(&c, GOSSIP_CODEC_FP32, N, 1, 0, 0, 0);
        assert_null(c.residual);
        len = enc(&c, 0, g, buf, sizeof(buf));
        assert_int_equal(gossip_codec_decode(buf, len, N, out, &info), 0);
        assert_int_equal(info.count, N);
        assert_int_equal(info.lo, 0);
        assert_memory_equal(g, out, sizeof(g));
        gossip_codec_free(&c);
}

static void test_half_every_value(void **state)
{
        (void)state;
        for (uint32_t h = 0; h < 0x10000; h++) {
                float f;
                if ((h & 0x7c00) == 0x7c00)
                        continue;
                f = gossip_half_to_float((uint16_t)h);
                assert_true(isfinite(f));
                if (gossip_float_to_half(f) != h)
                        fail_msg("half 0x%04x -> %a -> 0x%04x", h, f,
                                 gossip_float_to_half(f));
        }
        assert_int_equal(gossip_float_to_half(INFINITY), 0x7c00);
        assert_int_equal(gossip_float_to_half(-INFINITY), 0xfc00);
        assert_int_equal(gossip_float_to_half(NAN), 0x7e00);
        assert_true(isinf(gossip_half_to_float(0x7c00)));
        assert_true(isnan(gossip_half_to_float(0x7e01)));
}

static void test_half_rounding(void **state)
{
        uint64_t s = g_seed;
        size_t checked = 0;

        (void)state;
        /* ties to even, in the normal and the subnormal range */
        assert_int_equal(gossip_float_to_half(1.0f + 0x1p-11f), 0x3c00);
        assert_int_equal(gossip_float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);
        assert_int_equal(gossip_float_to_half(1.0f + 0x1p-11f + 0x1p-20f),
                         0x3c01);
        assert_int_equal(gossip_float_to_half(0x1p-24f), 0x0001);
        assert_int_equal(gossip_float_to_half(0x1p-25f), 0x0000);
        assert_int_equal(gossip_float_to_half(0x1.8p-25f), 0x0001);
        assert_int_equal(gossip_float_to_half(0x1.8p-24f), 0x0002);
        assert_int_equal(gossip_float_to_half(0x1p-14f), 0x0400);
        assert_int_equal(gossip_float_to_half(0x1.ff8p-15f), 0x03ff);
        assert_int_equal(gossip_float_to_half(0x1.ffap-15f), 0x03ff);
        assert_int_equal(gossip_float_to_half(0x1.ffcp-15f), 0x0400);
        assert_int_equal(gossip_float_to_half(-0.0f), 0x8000);
        assert_int_equal(gossip_float_to_half(0.0f), 0x0000);
        assert_int_equal(gossip_float_to_half(1e-30f), 0x0000);
        /* saturation */
        assert_int_equal(gossip_float_to_half(65504.0f), 0x7bff);
        assert_int_equal(gossip_float_to_half(65519.0f), 0x7bff);
        assert_int_equal(gossip_float_to_half(1e6f), 0x7bff);
        assert_int_equal(gossip_float_to_half(-FLT_MAX), 0xfbff);
        /* error bounds over random floats of every exponent in range */
        for (int i = 0; i < 400000; i++) {
                uint32_t u = (uint32_t)gn_splitmix64(&s);
                float x = bitsf(u), y, ax;

                if (!isfinite(x) || fabsf(x) > GOSSIP_HALF_MAX)
                        x = ldexpf(rng_float(&s),
                                   (int)(gn_splitmix64(&s) % 44) - 28);
                ax = fabsf(x);
                y = gossip_half_to_float(gossip_float_to_half(x));
                if (ax >= 0x1p-14f) {
                        if (fabsf(y - x) > ax * 0x1p-11f)
                                fail_msg("%a -> %a: relative error over 2^-11",
                                         x, y);
                } else if (fabsf(y - x) > 0x1p-25f) {
                        fail_msg("%a -> %a: subnormal error over 2^-25", x, y);
                }
                if (signbit(y) != signbit(x))
                        fail_msg("%a -> %a: sign lost", x, y);
#ifdef __FLT16_MAX__
                {
                        _Float16 h = (_Float16)x;
                        uint16_t hb;
                        memcpy(&hb, &h, 2);
                        if (hb != gossip_float_to_half(x))
                                fail_msg("%a: ours 0x%04x, compiler 0x%04x", x,
                                         gossip_float_to_half(x), hb);
                        checked++;
                }
#endif
        }
        printf("fp16: %zu values checked against the compiler's _Float16\n",
               checked);
}

/* The array path (NEON FCVTN on aarch64, vectorised integer code elsewhere)
 * equals the scalar conversion bit for bit, both ways: on every half value,
 * on every midpoint between neighbours (the ties), on float subnormals, on
 * values past 65504 (saturated), and on random finite floats. */
static void test_fp16_array_matches_scalar(void **state)
{
        enum { N = 256 * 320 }; /* whole chunks, and a tail below */
        uint64_t s = g_seed ^ 0x16;
        struct gossip_codec c;
        struct gossip_codec_info info;
        static float g[N + 7], out[N + 7];
        static uint8_t buf[GOSSIP_CODEC_HEADER_BYTES + 2 * (N + 7)];
        size_t n = 0, len;

        (void)state;
        for (uint32_t h = 0; h < 0x7c00; h++) { /* every finite half, +-, */
                float f = gossip_half_to_float((uint16_t)h);
                float up = gossip_half_to_float((uint16_t)(h + 1));
                g[n++] = (h & 1) ? -f : f;
                if (h + 1 < 0x7c00)
                        g[n++] = (f + up) / 2; /* the tie */
        }
        g[n++] = 65504.0f;
        g[n++] = 65519.99f;
        g[n++] = -65520.0f;
        g[n++] = 1e38f;
        g[n++] = -0.0f;
        g[n++] = 0x1p-149f; /* float subnormals */
        g[n++] = -0x1.8p-130f;
        while (n < N + 7) { /* random finite floats, any exponent */
                uint32_t u = (uint32_t)gn_splitmix64(&s);
                if (((u >> 23) & 0xff) == 0xff)
                        u &= ~(1u << 30);
                g[n++] = bitsf(u);
        }
        codec(&c, GOSSIP_CODEC_FP16, n, 1, 0, 0, 0);
        len = enc(&c, 0, g, buf, sizeof(buf));
        assert_int_equal(len, GOSSIP_CODEC_HEADER_BYTES + 2 * n);
        for (size_t i = 0; i < n; i++) {
                const uint8_t *p = buf + GOSSIP_CODEC_HEADER_BYTES + 2 * i;
                uint16_t got = (uint16_t)(p[0] | p[1] << 8);
                uint16_t want = gossip_float_to_half(g[i]);
                if (got != want)
                        fail_msg(
                            "element %zu: %a -> 0x%04x, scalar 0x%04x (seed "
                            "%" PRIu64 ")",
                            i, (double)g[i], got, want, g_seed);
        }
        assert_int_equal(gossip_codec_decode(buf, len, n, out, &info), 0);
        for (size_t i = 0; i < n; i++) {
                float want = gossip_half_to_float(gossip_float_to_half(g[i]));
                if (memcmp(&out[i], &want, 4) != 0)
                        fail_msg("element %zu: decoded %a, scalar %a", i,
                                 (double)out[i], (double)want);
        }
        gossip_codec_free(&c);
}

static void test_fp16_codec(void **state)
{
        enum { N = 1000 };
        uint64_t s = g_seed;
        struct gossip_codec c;
        struct gossip_codec_info info;
        float g[N], out[N];
        uint8_t buf[20 + 2 * N];
        size_t len;

        (void)state;
        fill(g, N, &s);
        g[5] = 1e6f;
        g[6] = -7e4f;
        codec(&c, GOSSIP_CODEC_FP16, N, 1, 0, 0, 1);
        assert_non_null(c.residual);
        len = enc(&c, 0, g, buf, sizeof(buf));
        assert_int_equal(gossip_codec_decode(buf, len, N, out, &info), 0);
        for (size_t i = 0; i < N; i++) {
                if (i == 5 || i == 6)
                        continue;
                if (fabsf(g[i]) >= 0x1p-14f)
                        assert_true(fabsf(out[i] - g[i]) <=
                                    fabsf(g[i]) * 0x1p-11f);
                else
                        assert_true(fabsf(out[i] - g[i]) <= 0x1p-25f);
                /* error feedback keeps exactly what was lost */
                assert_float_equal(c.residual[i], g[i] - out[i], 0.0f);
        }
        assert_float_equal(out[5], 65504.0f, 0.0f);
        assert_float_equal(out[6], -65504.0f, 0.0f);
        assert_float_equal(c.residual[5], 1e6f - 65504.0f, 0.0f);
        /* decoder refuses Inf and NaN halves */
        buf[20 + 2 * 7] = 0x00;
        buf[20 + 2 * 7 + 1] = 0x7c;
        assert_int_equal(gossip_codec_decode(buf, len, N, out, &info),
                         GOSSIP_ENONFINITE);
        buf[20 + 2 * 7 + 1] = 0xfe;
        assert_int_equal(gossip_codec_decode(buf, len, N, out, &info),
                         GOSSIP_ENONFINITE);
        gossip_codec_free(&c);
}

/* x86's F16C path equals the portable one bit for bit: every finite half
 * decoded, and ~44 million floats (every 97th bit pattern of each sign,
 * the non-finite ones skipped: encode refuses them) encoded with error
 * feedback, bytes and residuals compared block by block. */
static void test_fp16_hw_matches_portable(void **state)
{
        enum { B = 1 << 16 };
        struct gossip_codec hw, sw;
        struct gossip_codec_info info;
        static float g[B], a[B], b[B];
        static uint8_t ba[20 + 2 * B], bb[20 + 2 * B];
        size_t la, lb, n = 0, blocks = 0;
        int have;

        (void)state;
        have = gossip__codec_fp16_hw(1);
        print_message("# F16C: %s\n", have ? "yes" : "no (portable twice)");
        codec(&hw, GOSSIP_CODEC_FP16, B, 1, 0, 0, 1);
        codec(&sw, GOSSIP_CODEC_FP16, B, 1, 0, 0, 1);
        for (uint32_t h = 0; h < 0x10000; h++)
                if ((h & 0x7c00) != 0x7c00)
                        g[n++] = gossip_half_to_float((uint16_t)h);
        for (uint64_t u = 0; u < 0x100000000ull; u += 97) {
                if (((uint32_t)u & 0x7f800000u) == 0x7f800000u)
                        continue;
                g[n++] = bitsf((uint32_t)u);
                if (n < B && u + 97 < 0x100000000ull)
                        continue;
                gossip__codec_fp16_hw(1);
                la = enc(&hw, blocks, g, ba, sizeof(ba));
                assert_int_equal(gossip_codec_decode(ba, la, B, a, &info), 0);
                gossip__codec_fp16_hw(0);
                lb = enc(&sw, blocks, g, bb, sizeof(bb));
                assert_int_equal(gossip_codec_decode(bb, lb, B, b, &info), 0);
                assert_int_equal(la, lb);
                if (memcmp(ba, bb, la) || memcmp(a, b, sizeof(a)) ||
                    memcmp(hw.residual, sw.residual, sizeof(float) * B)) {
                        for (size_t i = 0; i < B; i++)
                                if (ba[20 + 2 * i] != bb[20 + 2 * i] ||
                                    ba[21 + 2 * i] != bb[21 + 2 * i])
                                        fail_msg("block %zu: %a -> hw %02x%02x"
                                                 " sw %02x%02x",
                                                 blocks, g[i], ba[21 + 2 * i],
                                                 ba[20 + 2 * i], bb[21 + 2 * i],
                                                 bb[20 + 2 * i]);
                        fail_msg("block %zu: decode or residual differs",
                                 blocks);
                }
                blocks++;
                n = 0;
        }
        gossip__codec_fp16_hw(1);
        assert_true(blocks > 600);
        gossip_codec_free(&hw);
        gossip_codec_free(&sw);
}

static void check_int8(size_t n, uint32_t block)
{
        uint64_t s = g_seed + n + block;
        struct gossip_codec c;
        struct gossip_codec_info info;
        float *g = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
        size_t cap, len, nblocks = (n + block - 1) / block;
        uint8_t *buf;

        fill(g, n, &s);
        for (size_t i = 0; i < n && i < block; i++)
                g[i] = 0.0f; /* an all-zero block */
        codec(&c, GOSSIP_CODEC_INT8, n, 1, block, 0, 0);
        cap = gossip_codec_max_size(&c);
        assert_int_equal(cap, 20 + 4 * nblocks + n);
        buf = malloc(cap);
        len = enc(&c, 0, g, buf, cap);
        assert_int_equal(gossip_codec_decode(buf, len, n, out, &info), 0);
        assert_int_equal(info.param, block);
        for (size_t b = 0; b < nblocks; b++) {
                size_t lo = b * block, hi = lo + block < n ? lo + block : n;
                float maxabs = 0, scale;

                for (size_t i = lo; i < hi; i++)
                        maxabs = fmaxf(maxabs, fabsf(g[i]));
                scale = maxabs / 127.0f;
                assert_int_equal(gn_le32_get(buf + 20 + 4 * b), fbits(scale));
                for (size_t i = lo; i < hi; i++)
                        if (fabsf(out[i] - g[i]) > scale * (0.5f + 0x1p-16f))
                                fail_msg("int8 n=%zu block=%u elem %zu: %a vs "
                                         "%a, scale %a (seed %" PRIu64 ")",
                                         n, block, i, out[i], g[i], scale,
                                         g_seed);
                if (b == 0)
                        for (size_t i = lo; i < hi; i++)
                                assert_float_equal(out[i], 0.0f, 0.0f);
        }
        gossip_codec_free(&c);
        free(buf);
        free(g);
        free(out);
}

static void test_int8(void **state)
{
        /* scale 1 exactly: ties round to even, the clamp holds */
        const float g[6] = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 1.49f};
        const int8_t want[6] = {127, 2, 4, -2, 0, 1};
        struct gossip_codec c;
        struct gossip_codec_info info;
        uint8_t buf[64];
        float out[6];
        size_t len;

        (void)state;
        codec(&c, GOSSIP_CODEC_INT8, 6, 1, 0, 0, 0);
        len = enc(&c, 0, g, buf, sizeof(buf));
        assert_int_equal(len, 20 + 4 + 6);
        assert_int_equal(gn_le32_get(buf + 20), fbits(1.0f));
        for (int i = 0; i < 6; i++)
                assert_int_equal((int8_t)buf[24 + i], want[i]);
        assert_int_equal(gossip_codec_decode(buf, len, 6, out, &info), 0);
        assert_float_equal(out[2], 4.0f, 0.0f);
        gossip_codec_free(&c);
        /* a residual that would overflow saturates; payloads stay finite */
        for (int id = GOSSIP_CODEC_FP32; id <= GOSSIP_CODEC_TOPK; id++) {
                float big[6] = {3e38f, -3e38f, 1, 2, 3, 4};
                codec(&c, id, 6, 2, 0, 0, 1);
                for (uint64_t t = 0; t < 6; t++) {
                        len = enc(&c, t, big, buf, sizeof(buf));
                        assert_int_equal(
                            gossip_codec_decode(buf, len, 6, out, &info), 0);
                        for (int i = 0; i < 6; i++)
                                assert_true(isfinite(c.residual[i]));
                }
                gossip_codec_free(&c);
        }
        /* a block of subnormals: zeros on the wire, kept in the residual */
        codec(&c, GOSSIP_CODEC_INT8, 6, 1, 0, 0, 1);
        {
                float tiny[6];
                for (int i = 0; i < 6; i++)
                        tiny[i] = (i % 2 ? -1.0f : 1.0f) * 1e-40f * (float)i;
                len = enc(&c, 0, tiny, buf, sizeof(buf));
                assert_int_equal(gossip_codec_decode(buf, len, 6, out, &info),
                                 0);
                for (int i = 0; i < 6; i++) {
                        assert_float_equal(out[i], 0.0f, 0.0f);
                        assert_memory_equal(&c.residual[i], &tiny[i], 4);
                }
        }
        gossip_codec_free(&c);
        check_int8(1000, 256);
        check_int8(1000, 7);
        check_int8(5, 256);
        check_int8(4096, 1);
}

static int cmp_desc(const void *a, const void *b)
{
        float x = *(const float *)a, y = *(const float *)b;

        return (x < y) - (x > y);
}

static void test_topk_exact_k(void **state)
{
        enum { N = 1000, K = 10 };
        uint64_t s = g_seed;
        struct gossip_codec c;
        struct gossip_codec_info info;
        float g[N], out[N], mag[N], thr;
        uint8_t buf[20 + 8 * K];
        size_t len, sent = 0;

        (void)state;
        fill(g, N, &s);
        for (size_t i = 0; i < N; i++)
                mag[i] = fabsf(g[i]);
        qsort(mag, N, sizeof(float), cmp_desc);
        thr = mag[K - 1];
        assert_true(mag[K] < thr); /* distinct with this seed's data */
        codec(&c, GOSSIP_CODEC_TOPK, N, 1, 0, K, 0);
        len = enc(&c, 0, g, buf, sizeof(buf));
        assert_int_equal(len, sizeof(buf));
        assert_int_equal(gossip_codec_decode(buf, len, N, out, &info), 0);
        for (size_t i = 0; i < N; i++) {
                int big = fabsf(g[i]) >= thr;
                if (big) {
                        assert_memory_equal(&out[i], &g[i], 4);
                        assert_float_equal(c.residual[i], 0.0f, 0.0f);
                        sent++;
                } else {
                        assert_float_equal(out[i], 0.0f, 0.0f);
                        assert_memory_equal(&c.residual[i], &g[i], 4);
                }
        }
        assert_int_equal(sent, K);
        gossip_codec_free(&c);
        /* ties: all equal -> the lowest indices, deterministically */
        for (size_t i = 0; i < 50; i++)
                g[i] = (i % 2) ? 1.0f : -1.0f;
        codec(&c, GOSSIP_CODEC_TOPK, 50, 1, 0, 5, 0);
        len = enc(&c, 0, g, buf, sizeof(buf));
        for (uint32_t j = 0; j < 5; j++)
                assert_int_equal(gn_le32_get(buf + 20 + 8 * j), j);
        gossip_codec_free(&c);
}

/* Over T steps: sum of inputs == sum of decoded payloads + residual. */
static void check_conserves(int id, size_t n, uint32_t parts, uint32_t k,
                            int ef)
{
        uint64_t s = g_seed ^ (uint64_t)(id * 131 + parts * 7 + k);
        struct gossip_codec c;
        struct gossip_codec_info info;
        float *g = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
        double *in = calloc(n, sizeof(double)),
               *got = calloc(n, sizeof(double));
        size_t cap, len;
        uint8_t *buf;

        codec(&c, id, n, parts, 0, k, ef);
        cap = gossip_codec_max_size(&c);
        buf = malloc(cap);
        for (uint64_t t = 0; t < 40; t++) {
                fill(g, n, &s);
                for (size_t i = 0; i < n; i++)
                        in[i] += g[i];
                len = enc(&c, t, g, buf, cap);
                assert_int_equal(gossip_codec_decode(buf, len, n, out, &info),
                                 0);
                assert_int_equal(info.part_index, t % (parts ? parts : 1));
                for (size_t i = 0; i < info.count; i++)
                        got[info.lo + i] += out[i];
                for (size_t i = 0; i < n; i++) {
                        double have = got[i] + c.residual[i];
                        if (fabs(have - in[i]) > 1e-3 * (1 + fabs(in[i])))
                                fail_msg("%s P=%u k=%u step %" PRIu64
                                         " elem %zu: in %g, sent+residual %g "
                                         "(seed %" PRIu64 ")",
                                         gossip_codec_name(id), parts, k, t, i,
                                         in[i], have, g_seed);
                }
        }
        gossip_codec_free(&c);
        free(buf);
        free(g);
        free(out);
        free(in);
        free(got);
}

static void test_error_feedback_conserves(void **state)
{
        (void)state;
        check_conserves(GOSSIP_CODEC_TOPK, 1000, 1, 10, 0);
        check_conserves(GOSSIP_CODEC_TOPK, 1000, 4, 3, 0);
        check_conserves(GOSSIP_CODEC_FP16, 1000, 1, 0, 1);
        check_conserves(GOSSIP_CODEC_INT8, 1000, 1, 0, 1);
        check_conserves(GOSSIP_CODEC_INT8, 1003, 5, 0, 1);
        check_conserves(GOSSIP_CODEC_FP32, 1003, 7, 0, 0);
        check_conserves(GOSSIP_CODEC_FP16, 1003, 7, 0, 0);
}

/* Over P rounds each element is sent exactly once; once inputs stop, P
 * more rounds drain the residual to exactly zero and everything that went
 * in has come out. */
static void test_partitions(void **state)
{
        enum { N = 1003, P = 7 };
        uint64_t s = g_seed;
        struct gossip_codec c;
        struct gossip_codec_info info;
        static float g[N], zero[N], out[N];
        static uint8_t buf[20 + 4 * (N / P + 1)];
        double in_sum = 0, sent_sum = 0;
        int seen[N];
        size_t len;

        (void)state;
        codec(&c, GOSSIP_CODEC_FP32, N, P, 0, 0, 0);
        for (int round = 0; round < 3; round++) {
                memset(seen, 0, sizeof(seen));
                for (uint64_t t = round * P; t < (uint64_t)(round + 1) * P;
                     t++) {
                        fill(g, N, &s);
                        for (size_t i = 0; i < N; i++)
                                in_sum += g[i];
                        len = enc(&c, t, g, buf, sizeof(buf));
                        assert_int_equal(
                            gossip_codec_decode(buf, len, N, out, &info), 0);
                        for (size_t i = 0; i < info.count; i++) {
                                seen[info.lo + i]++;
                                sent_sum += out[i];
                        }
                }
                for (size_t i = 0; i < N; i++)
                        assert_int_equal(seen[i], 1);
        }
        for (uint64_t t = 3 * P; t < 4 * P; t++) {
                len = enc(&c, t, zero, buf, sizeof(buf));
                assert_int_equal(gossip_codec_decode(buf, len, N, out, &info),
                                 0);
                for (size_t i = 0; i < info.count; i++)
                        sent_sum += out[i];
        }
        for (size_t i = 0; i < N; i++)
                assert_float_equal(c.residual[i], 0.0f, 0.0f);
        if (fabs(in_sum - sent_sum) > 1e-3)
                fail_msg("inputs sum %.9g, sent sum %.9g (seed %" PRIu64 ")",
                         in_sum, sent_sum, g_seed);
        gossip_codec_free(&c);
}

/* Two int8 payloads of the same values x[0..count) in blocks of `block`:
 * a from the nearest-rounding encoder, b from the stochastic one. Same
 * header and scales; each value of b is floor or ceil of x/scale, so
 * within one scale of x, and within one step of a's. */
static void check_int8_part(const uint8_t *a, const uint8_t *b, size_t len,
                            const float *x, size_t count, size_t block)
{
        size_t nblocks = (count + block - 1) / block;
        const uint8_t *qa = a + 20 + 4 * nblocks, *qb = b + 20 + 4 * nblocks;

        assert_memory_equal(a, b, 20 + 4 * nblocks);
        assert_int_equal(len, 20 + 4 * nblocks + count);
        for (size_t i = 0; i < count; i++) {
                float scale = bitsf(gn_le32_get(b + 20 + 4 * (i / block)));
                float y = scale > 0.0f ? x[i] / scale : 0.0f;
                int q = (int8_t)qb[i];

                /* the encoder multiplies by 1/scale: 1e-3 of slack
                 * for a last bit at an integer */
                if (q < (int)floorf(y - 1e-3f) || q > (int)ceilf(y + 1e-3f))
                        fail_msg("element %zu: %g/scale = %.6g sent as %d", i,
                                 (double)x[i], (double)y, q);
                assert_true(abs(q - (int8_t)qa[i]) <= 1);
        }
}

/* The stateless encoder's int8 is stochastic rounding: the same seed
 * gives the same bytes, another seed other bytes; every value is sent as
 * floor or ceil of x/scale; and over many seeds the mean decoded value is
 * x itself, where rounding to nearest would send 0.25 as 0 every time
 * and pull an averaged model to the grid. Edges: the block maximum is
 * exact, -127 and 127 are never exceeded, an all-zero block stays 0. */
static void test_int8_stochastic(void **state)
{
        enum { N = 512, SEEDS = 2000 };
        static const float vals[4] = {0.25f, -0.7f, 3.3f, -126.9f};
        static float x[N], out[N];
        static double sum[N];
        static uint8_t a[64 + 2 * N], b[64 + 2 * N];
        struct gossip_codec c;
        struct gossip_codec_info info;
        size_t la, lb;

        (void)state;
        /* block 0: max 127 (scale 1) then the four values in turn; block
         * 1 (256..511): all zero */
        x[0] = 127.0f;
        for (size_t i = 1; i < N / 2; i++)
                x[i] = vals[i % 4];
        codec(&c, GOSSIP_CODEC_INT8, N, 1, 256, 0, 0);
        assert_int_equal(
            gossip_codec_encode_part(&c, 0, x, N, 7, a, sizeof(a), &la), 0);
        assert_int_equal(
            gossip_codec_encode_part(&c, 0, x, N, 7, b, sizeof(b), &lb), 0);
        assert_int_equal(la, lb);
        assert_memory_equal(a, b, la);
        assert_int_equal(
            gossip_codec_encode_part(&c, 0, x, N, 8, b, sizeof(b), &lb), 0);
        assert_memory_not_equal(a, b, la);
        for (uint64_t seed = 0; seed < SEEDS; seed++) {
                assert_int_equal(gossip_codec_encode_part(&c, 0, x, N,
                                                          seed * 0x100000001ull,
                                                          b, sizeof(b), &lb),
                                 0);
                assert_int_equal(gossip_codec_decode(b, lb, N, out, &info), 0);
                for (size_t i = 0; i < N; i++) {
                        float lo = floorf(x[i]), hi = ceilf(x[i]);

                        if (out[i] != lo && out[i] != hi)
                                fail_msg("seed %" PRIu64 " element %zu: %g "
                                         "decoded as %g",
                                         seed, i, (double)x[i], (double)out[i]);
                        sum[i] += out[i];
                }
        }
        assert_float_equal(sum[0] / SEEDS, 127.0, 0.0);
        for (int v = 0; v < 4; v++) {
                double m = 0.0, k = 0.0;

                for (size_t i = 1; i < N / 2; i++)
                        if (i % 4 == (size_t)v) {
                                m += sum[i] / SEEDS;
                                k++;
                        }
                /* 64 elements x 2000 seeds, variance <= 1/4 each:
                 * the standard error is under 0.0014 */
                if (fabs(m / k - vals[v]) > 0.01)
                        fail_msg("value %g: mean decoded %.5f", (double)vals[v],
                                 m / k);
        }
        for (size_t i = N / 2; i < N; i++)
                assert_float_equal(sum[i], 0.0, 0.0);
        gossip_codec_free(&c);
}

/* gossip_codec_encode_part: the stateless encoder of one partition makes
 * exactly the payload the stateful encoder makes for that partition when
 * its residual is zero (a fresh encoder), leaves a residual untouched, and
 * refuses a wrong part, count, buffer or a NaN. */
static void test_encode_part(void **state)
{
        enum { N = 1003, P = 7 };
        static const int ids[] = {GOSSIP_CODEC_FP32, GOSSIP_CODEC_FP16,
                                  GOSSIP_CODEC_INT8, GOSSIP_CODEC_TOPK};
        static float g[N], out[N];
        static uint8_t a[64 + 4 * N], b[64 + 4 * N];
        uint64_t s = g_seed;
        struct gossip_codec c, ef;
        struct gossip_codec_info info;
        size_t lo, count, la, lb;

        (void)state;
        for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
                for (uint32_t part = 0; part < P; part++) {
                        /* a fresh encoder: with P > 1 its residual (Ako:
                         * the parts not sent yet) starts at zero */
                        codec(&c, ids[k], N, P, 16, 5, 0);
                        fill(g, N, &s);
                        gossip_codec_partition(N, part, P, &lo, &count);
                        la = enc(&c, part, g, a, sizeof(a)); /* step = part */
                        assert_int_equal(
                            gossip_codec_encode_part(&c, part, g + lo, count,
                                                     part, b, sizeof(b), &lb),
                            0);
                        assert_int_equal(lb, la);
                        /* int8 rounds stochastically here (test_int8_
                         * stochastic): same header and scales, values
                         * within a scale */
                        if (ids[k] == GOSSIP_CODEC_INT8)
                                check_int8_part(a, b, la, g + lo, count, 16);
                        else
                                assert_memory_equal(a, b, la);
                        assert_int_equal(
                            gossip_codec_decode(b, lb, N, out, &info), 0);
                        assert_int_equal(info.part_index, part);
                        assert_int_equal(info.part_count, P);
                        assert_int_equal(info.lo, lo);
                        assert_int_equal(info.count, count);
                        if (ids[k] == GOSSIP_CODEC_FP32)
                                assert_memory_equal(out, g + lo,
                                                    count * sizeof(float));
                        if (part + 1 < P)
                                gossip_codec_free(&c);
                }
                assert_int_equal(gossip_codec_encode_part(&c, P, g, count, 0, b,
                                                          sizeof(b), &lb),
                                 GOSSIP_EINVAL);
                gossip_codec_partition(N, 0, P, &lo, &count);
                assert_int_equal(gossip_codec_encode_part(&c, 0, g, count + 1,
                                                          0, b, sizeof(b), &lb),
                                 GOSSIP_EMISMATCH);
                assert_int_equal(
                    gossip_codec_encode_part(&c, 0, g, count, 0, b, 10, &lb),
                    GOSSIP_ETOOBIG);
                g[3] = NAN;
                assert_int_equal(gossip_codec_encode_part(&c, 0, g, count, 0, b,
                                                          sizeof(b), &lb),
                                 GOSSIP_ENONFINITE);
                gossip_codec_free(&c);
        }
        /* with error feedback, the stateless encoder neither reads nor
         * changes the residual */
        codec(&ef, GOSSIP_CODEC_INT8, N, P, 16, 0, 1);
        fill(g, N, &s);
        enc(&ef, 0, g, a, sizeof(a)); /* residual of part 0 now nonzero */
        memcpy(out, ef.residual, sizeof(out));
        gossip_codec_partition(N, 0, P, &lo, &count);
        assert_int_equal(gossip_codec_encode_part(&ef, 0, g + lo, count, 0, b,
                                                  sizeof(b), &lb),
                         0);
        assert_memory_equal(out, ef.residual, sizeof(out));
        gossip_codec_free(&ef);
}

/* One valid payload per configuration for the hostile-input tests. */
struct sample {
        int id;
        uint32_t parts, block, k;
};

static const struct sample samples[] = {
    {GOSSIP_CODEC_FP32, 1, 0, 0},  {GOSSIP_CODEC_FP16, 1, 0, 0},
    {GOSSIP_CODEC_INT8, 1, 16, 0}, {GOSSIP_CODEC_TOPK, 1, 0, 8},
    {GOSSIP_CODEC_INT8, 3, 0, 0},  {GOSSIP_CODEC_TOPK, 2, 0, 4},
};

static size_t sample_payload(const struct sample *sm, uint8_t *buf, size_t cap,
                             uint64_t *s)
{
        struct gossip_codec c;
        float g[64];
        size_t len;

        fill(g, 64, s);
        codec(&c, sm->id, 64, sm->parts, sm->block, sm->k, 0);
        len = enc(&c, 1, g, buf, cap);
        gossip_codec_free(&c);
        return len;
}

static void check_decoded(int rc, const struct gossip_codec_info *info,
                          const float *out)
{
        if (rc)
                return;
        assert_true(info->lo + info->count <= 64);
        for (size_t i = 0; i < info->count; i++)
                assert_true(isfinite(out[i]));
}

static void test_truncation_and_bitflips(void **state)
{
        uint64_t s = g_seed;
        uint8_t buf[1024], mut[1025];
        float out[64];
        struct gossip_codec_info info;
        size_t accepted = 0, rejected = 0;

        (void)state;
        for (size_t z = 0; z < sizeof(samples) / sizeof(samples[0]); z++) {
                size_t len = sample_payload(&samples[z], buf, sizeof(buf), &s);

                assert_int_equal(gossip_codec_decode(buf, len, 64, out, &info),
                                 0);
                for (size_t cut = 0; cut < len; cut++)
                        assert_true(
                            gossip_codec_decode(buf, cut, 64, out, &info) < 0);
                memcpy(mut, buf, len);
                mut[len] = 0;
                assert_int_equal(
                    gossip_codec_decode(mut, len + 1, 64, out, &info),
                    GOSSIP_EDECODE);
                assert_int_equal(gossip_codec_decode(buf, len, 65, out, &info),
                                 GOSSIP_EMISMATCH);
                for (size_t bit = 0; bit < 8 * len; bit++) {
                        int rc;
                        memcpy(mut, buf, len);
                        mut[bit / 8] ^= (uint8_t)(1u << (bit % 8));
                        rc = gossip_codec_decode(mut, len, 64, out, &info);
                        assert_true(rc <= 0);
                        check_decoded(rc, &info, out);
                        if (rc)
                                rejected++;
                        else
                                accepted++;
                }
        }
        printf("bit flips: %zu rejected, %zu decoded within bounds\n", rejected,
               accepted);
        assert_true(rejected > 0 && accepted > 0);
}

/* Random bytes, half of them behind a consistent header of the exact
 * length (so the body checks run on random values). */
static void test_garbage(void **state)
{
        uint64_t s = g_seed;
        uint8_t buf[700];
        float out[64];
        struct gossip_codec_info info;
        size_t ok = 0;

        (void)state;
        for (int i = 0; i < 20000; i++) {
                size_t len = gn_splitmix64(&s) % sizeof(buf), lo, count;
                uint32_t parts = 1 + (uint32_t)(gn_splitmix64(&s) % 3);
                uint32_t part = (uint32_t)(gn_splitmix64(&s) % parts),
                         param = 0;
                int id = 1 + (int)(gn_splitmix64(&s) % 4), rc;

                for (size_t j = 0; j < sizeof(buf); j++)
                        buf[j] = (uint8_t)gn_splitmix64(&s);
                if (gn_splitmix64(&s) % 2) {
                        gossip_codec_partition(64, part, parts, &lo, &count);
                        if (id == GOSSIP_CODEC_INT8)
                                param = 1 + (uint32_t)(gn_splitmix64(&s) % 40);
                        if (id == GOSSIP_CODEC_TOPK)
                                param = (uint32_t)(gn_splitmix64(&s) % 4);
                        buf[0] = 1;
                        buf[1] = (uint8_t)id;
                        buf[2] = (uint8_t)part;
                        buf[3] = 0;
                        buf[4] = (uint8_t)parts;
                        buf[5] = buf[6] = buf[7] = 0;
                        gn_le32_put(buf + 8, 64);
                        gn_le32_put(buf + 12, (uint32_t)count);
                        gn_le32_put(buf + 16, param);
                        len = 20 +
                              (id == GOSSIP_CODEC_FP32   ? 4 * count
                               : id == GOSSIP_CODEC_FP16 ? 2 * count
                               : id == GOSSIP_CODEC_INT8
                                   ? 4 * ((count + param - 1) / param) + count
                                   : 8 * (size_t)param);
                        if (id == GOSSIP_CODEC_TOPK && param >= 2)
                                gn_le32_put(buf + 20,
                                            0); /* often ordered then */
                }
                rc = gossip_codec_decode(buf, len, 64, out, &info);
                assert_true(rc <= 0);
                check_decoded(rc, &info, out);
                ok += rc == 0;
        }
        printf("garbage: %zu of 20000 decoded (within bounds)\n", ok);
        assert_true(ok > 0);
}

static void test_header_rejects(void **state)
{
        uint64_t s = g_seed;
        uint8_t buf[1024], mut[1024];
        float out[64];
        struct gossip_codec_info info;
        size_t len = sample_payload(&samples[0], buf, sizeof(buf), &s);

#define MUTATE(stmt, code)                                                     \
        do {                                                                   \
                memcpy(mut, buf, len);                                         \
                stmt;                                                          \
                assert_int_equal(                                              \
                    gossip_codec_decode(mut, len, 64, out, &info), code);      \
        } while (0)

        (void)state;
        MUTATE(mut[0] = 2, GOSSIP_EVERSION);
        MUTATE(mut[1] = 0, GOSSIP_EDECODE);
        MUTATE(mut[1] = 9, GOSSIP_EDECODE);
        MUTATE(mut[2] = 1, GOSSIP_EDECODE);  /* index >= count */
        MUTATE(mut[4] = 0, GOSSIP_EDECODE);  /* zero partitions */
        MUTATE(mut[4] = 65, GOSSIP_EDECODE); /* more parts than elements */
        MUTATE(mut[6] = 1, GOSSIP_EDECODE);  /* reserved */
        MUTATE(gn_le32_put(mut + 8, 63), GOSSIP_EMISMATCH);
        MUTATE(gn_le32_put(mut + 12, 63), GOSSIP_EMISMATCH);
        MUTATE(gn_le32_put(mut + 16, 1),
               GOSSIP_EDECODE); /* fp32 has no param */
        MUTATE(wrf(mut + 20 + 4 * 9, NAN), GOSSIP_ENONFINITE);
        MUTATE(wrf(mut + 20 + 4 * 63, -INFINITY), GOSSIP_ENONFINITE);
        /* two partitions, index 1 with the count of partition 0 works only
         * if the counts match: 64/2 both 32, so this is a valid header */
        MUTATE((mut[4] = 2, mut[2] = 1, gn_le32_put(mut + 12, 32)),
               GOSSIP_EDECODE);
        assert_int_equal(gossip_codec_decode(mut, 20 + 4 * 32, 64, out, &info),
                         0);
        assert_int_equal(info.lo, 32);
        assert_int_equal(info.count, 32);
        assert_int_equal(gossip_codec_peek(buf, 10, 64, &info), GOSSIP_ESHORT);

        /* int8 (block 16): scale NaN / huge / negative, and -128 */
        len = sample_payload(&samples[2], buf, sizeof(buf), &s);
        MUTATE(wrf(mut + 20, NAN), GOSSIP_ENONFINITE);
        MUTATE((wrf(mut + 20, FLT_MAX), memset(mut + 20 + 16, 127, 16)),
               GOSSIP_ENONFINITE);
        MUTATE(wrf(mut + 20, -1.0f), GOSSIP_EDECODE);
        MUTATE(mut[20 + 16 + 3] = 0x80, GOSSIP_EDECODE);
        MUTATE(gn_le32_put(mut + 16, 0), GOSSIP_EDECODE);
        MUTATE(gn_le32_put(mut + 16, 65537), GOSSIP_EDECODE);

        /* top-k (k = 8): indices out of range, repeated, unordered; Inf */
        len = sample_payload(&samples[3], buf, sizeof(buf), &s);
        MUTATE(gn_le32_put(mut + 20 + 8 * 7, 64), GOSSIP_EDECODE);
        MUTATE(gn_le32_put(mut + 20 + 8 * 1, gn_le32_get(mut + 20)),
               GOSSIP_EDECODE);
        MUTATE((gn_le32_put(mut + 20, 5), gn_le32_put(mut + 28, 4)),
               GOSSIP_EDECODE);
        MUTATE(wrf(mut + 20 + 8 * 3 + 4, INFINITY), GOSSIP_ENONFINITE);
        MUTATE(gn_le32_put(mut + 16, 65), GOSSIP_EDECODE); /* k > count */
        MUTATE(gn_le32_put(mut + 16, 7),
               GOSSIP_EDECODE); /* length then wrong */
#undef MUTATE
}

static void test_encode_errors(void **state)
{
        enum { N = 100 };
        uint64_t s = g_seed;
        struct gossip_codec a, b;
        struct gossip_codec_cfg cfg = {.id = GOSSIP_CODEC_TOPK, .n = N};
        float g[N], bad[N];
        uint8_t buf1[2048], buf2[2048];
        size_t len1, len2, len = 0;

        (void)state;
        fill(g, N, &s);
        memcpy(bad, g, sizeof(g));
        bad[50] = NAN;
        codec(&a, GOSSIP_CODEC_TOPK, N, 2, 0, 5, 0);
        codec(&b, GOSSIP_CODEC_TOPK, N, 2, 0, 5, 0);
        assert_int_equal(
            gossip_codec_encode(&a, 0, g, N - 1, buf1, sizeof(buf1), &len),
            GOSSIP_EMISMATCH);
        assert_int_equal(
            gossip_codec_encode(&a, 0, bad, N, buf1, sizeof(buf1), &len),
            GOSSIP_ENONFINITE);
        assert_int_equal(
            gossip_codec_encode(&a, 0, g, N, buf1, 20 + 8 * 5 - 1, &len),
            GOSSIP_ETOOBIG);
        /* the failures left a exactly like the untouched b */
        len1 = enc(&a, 0, g, buf1, sizeof(buf1));
        len2 = enc(&b, 0, g, buf2, sizeof(buf2));
        assert_int_equal(len1, len2);
        assert_memory_equal(buf1, buf2, len1);
        assert_memory_equal(a.residual, b.residual, N * sizeof(float));
        gossip_codec_reset(&a);
        for (size_t i = 0; i < N; i++)
                assert_float_equal(a.residual[i], 0.0f, 0.0f);
        gossip_codec_free(&a);
        gossip_codec_free(&b);
        /* bad configurations */
        assert_int_equal(gossip_codec_init(&a, &cfg), 0);
        gossip_codec_free(&a);
        cfg.parts = N + 1;
        assert_int_equal(gossip_codec_init(&a, &cfg), GOSSIP_EINVAL);
        cfg.parts = 0;
        cfg.n = 0;
        assert_int_equal(gossip_codec_init(&a, &cfg), GOSSIP_EINVAL);
        cfg.n = 5000;
        cfg.parts = GOSSIP_CODEC_PARTS_MAX + 1;
        assert_int_equal(gossip_codec_init(&a, &cfg), GOSSIP_EINVAL);
        cfg.parts = 1;
        cfg.id = 0;
        assert_int_equal(gossip_codec_init(&a, &cfg), GOSSIP_EINVAL);
        cfg.id = GOSSIP_CODEC_INT8;
        cfg.block = GOSSIP_CODEC_INT8_BLOCK_MAX + 1;
        assert_int_equal(gossip_codec_init(&a, &cfg), GOSSIP_EINVAL);
        assert_string_equal(gossip_codec_name(GOSSIP_CODEC_INT8), "int8");
        assert_null(gossip_codec_name(0));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_header_layout),
            cmocka_unit_test(test_fp32_exact),
            cmocka_unit_test(test_half_every_value),
            cmocka_unit_test(test_half_rounding),
            cmocka_unit_test(test_fp16_array_matches_scalar),
            cmocka_unit_test(test_fp16_codec),
            cmocka_unit_test(test_fp16_hw_matches_portable),
            cmocka_unit_test(test_int8),
            cmocka_unit_test(test_topk_exact_k),
            cmocka_unit_test(test_error_feedback_conserves),
            cmocka_unit_test(test_partitions),
            cmocka_unit_test(test_encode_part),
            cmocka_unit_test(test_int8_stochastic),
            cmocka_unit_test(test_truncation_and_bitflips),
            cmocka_unit_test(test_garbage),
            cmocka_unit_test(test_header_rejects),
            cmocka_unit_test(test_encode_errors),
        };

        g_seed = gn_test_seed("test_codec", g_seed);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
