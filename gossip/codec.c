/*
 * codec.c - gradient payload codecs (see codec.h; format in
 * docs/learning.md).
 *
 * Invariants: bytes are read and written one at a time in little-endian
 * order, never through casts, so the format is the same on every host and
 * alignment never matters (fp32 bodies are memcpy'd on little-endian
 * hosts, which is the same bytes). The decoder computes the exact expected
 * length from the validated header before it reads a byte of the body, and
 * every count it uses is bounded by the caller's model size. The encoder
 * checks everything that can fail before it touches the residual, so a
 * failed encode changes nothing, and the residual is always finite.
 */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include "gossip/codec.h"
#include "base/gn_endian.h"
#include "base/gn_finite.h"
#include "base/gn_hot.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define CODEC_F16C 1
#else
#define CODEC_F16C 0
#endif

/* ---- little-endian helpers ---- */

/* On little-endian hosts an fp32 body is a plain copy of the floats. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_LE 1
#else
#define HOST_LE 0
#endif

static uint32_t f2u(float f)
{
        uint32_t u;

        memcpy(&u, &f, sizeof(u));
        return u;
}

static float u2f(uint32_t u)
{
        float f;

        memcpy(&f, &u, sizeof(f));
        return f;
}

/* ---- IEEE binary16 ---- */

/* m / 2^s rounded to nearest, ties to even, for 1 <= s <= 25 and
 * m < 2^31, without a data-dependent branch (gradient mantissas are
 * random, so a branch here would mispredict half the time): adding half - 1
 * plus the quotient's low bit carries into the quotient exactly when the
 * remainder is over half, or equal to it with an odd quotient. */
static uint32_t shift_rne(uint32_t m, unsigned s)
{
        return (m + (1u << (s - 1)) - 1 + ((m >> s) & 1)) >> s;
}

uint16_t gossip_float_to_half(float f)
{
        uint32_t x = f2u(f);
        uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
        uint32_t ax = x & 0x7fffffff;
        uint32_t exp = ax >> 23, mant = ax & 0x7fffff, sub, nor, s, pick;

        if (ax > 0x7f800000)
                return 0x7e00; /* NaN */
        if (ax == 0x7f800000)
                return sign | 0x7c00; /* Inf */
        if (ax > 0x477fe000)          /* > 65504: saturate */
                return sign | 0x7bff;
        /* Below 2^-14 (exp < 113) the half is subnormal: the 24-bit
         * significand in units of 2^-24. Shifts past 25 give 0 as 25 does
         * (m < 2^24 is below half of 2^25), so s is clamped to [14, 25]
         * (the upper clamp with a mask: zeros are common, and GCC turns a
         * conditional there into a branch). */
        s = 126 - (exp > 112 ? 112 : exp);
        s = 25 + ((s - 25) & ((uint32_t)0 - (uint32_t)(s < 25)));
        sub = shift_rne(mant | 0x800000, s);
        /* Normal: rebias the exponent (127 -> 15) and round away the low
         * 13 mantissa bits; a carry out of the mantissa correctly bumps the
         * exponent, never to Inf since larger values were saturated. */
        nor = shift_rne(ax - (112u << 23), 13);
        /* Both are computed and one picked with a mask: gradients mix
         * magnitudes, and a branch here would mispredict. */
        pick = (uint32_t)0 - (uint32_t)(exp < 113);
        return sign | (uint16_t)((sub & pick) | (nor & ~pick));
}

float gossip_half_to_float(uint16_t h)
{
        uint32_t sign = (uint32_t)(h & 0x8000) << 16;
        uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff, pick;
        /* subnormal: m * 2^-24, exact since m < 2^10 */
        uint32_t sub = f2u((float)m * 0x1p-24f) | sign;
        uint32_t nor = sign | ((e + 112) << 23) | (m << 13);

        if (e == 31)
                return u2f(sign | 0x7f800000 | (m << 13)); /* Inf, NaN */
        pick = (uint32_t)0 - (uint32_t)(e == 0);           /* mask, see above */
        return u2f((sub & pick) | (nor & ~pick));
}

/* ---- shapes ---- */

const char *gossip_codec_name(int id)
{
        switch (id) {
        case GOSSIP_CODEC_FP32:
                return "fp32";
        case GOSSIP_CODEC_FP16:
                return "fp16";
        case GOSSIP_CODEC_INT8:
                return "int8";
        case GOSSIP_CODEC_TOPK:
                return "topk";
        }
        return NULL;
}

void gossip_codec_partition(size_t n, uint32_t p, uint32_t parts, size_t *lo,
                            size_t *count)
{
        uint64_t a = (uint64_t)n * p / parts;
        uint64_t b = (uint64_t)n * (p + 1) / parts;

        *lo = (size_t)a;
        *count = (size_t)(b - a);
}

/* Body bytes for `count` elements; params already validated. In 64 bits
 * so that a header cannot overflow it on a 32-bit Pi. */
static uint64_t body_size(int id, uint64_t count, uint32_t param)
{
        switch (id) {
        case GOSSIP_CODEC_FP32:
                return 4 * count;
        case GOSSIP_CODEC_FP16:
                return 2 * count;
        case GOSSIP_CODEC_INT8:
                return 4 * ((count + param - 1) / param) + count;
        case GOSSIP_CODEC_TOPK:
                return 8 * (uint64_t)param;
        }
        return 0;
}

/* Top-k entries for a partition of `count` elements. */
static uint32_t topk_k(const struct gossip_codec *c, size_t count)
{
        size_t k = c->cfg.k;

        if (k == 0)
                k = count * GOSSIP_CODEC_TOPK_PERCENT_DEFAULT / 100;
        if (k == 0)
                k = 1;
        return (uint32_t)(k < count ? k : count);
}

static uint32_t codec_param(const struct gossip_codec *c, size_t count)
{
        if (c->cfg.id == GOSSIP_CODEC_INT8)
                return c->cfg.block;
        if (c->cfg.id == GOSSIP_CODEC_TOPK)
                return topk_k(c, count);
        return 0;
}

/* ---- encoder ---- */

int gossip_codec_init(struct gossip_codec *c,
                      const struct gossip_codec_cfg *cfg)
{
        struct gossip_codec_cfg k;

        if (!c || !cfg || !gossip_codec_name(cfg->id) || cfg->n == 0 ||
            (uint64_t)cfg->n > UINT32_MAX)
                return GOSSIP_EINVAL;
        k = *cfg;
        if (k.parts == 0)
                k.parts = 1;
        if (k.block == 0)
                k.block = GOSSIP_CODEC_INT8_BLOCK_DEFAULT;
        if (k.parts > GOSSIP_CODEC_PARTS_MAX || k.parts > k.n ||
            k.block > GOSSIP_CODEC_INT8_BLOCK_MAX)
                return GOSSIP_EINVAL;
        memset(c, 0, sizeof(*c));
        c->cfg = k;
        if (k.parts > 1 || k.id == GOSSIP_CODEC_TOPK ||
            (k.error_feedback && k.id != GOSSIP_CODEC_FP32)) {
                c->residual = calloc(k.n, sizeof(float));
                if (!c->residual)
                        return GOSSIP_ENOMEM;
        }
        return 0;
}

void gossip_codec_free(struct gossip_codec *c)
{
        if (!c)
                return;
        free(c->residual);
        c->residual = NULL;
}

void gossip_codec_reset(struct gossip_codec *c)
{
        if (c->residual)
                memset(c->residual, 0, c->cfg.n * sizeof(float));
}

size_t gossip_codec_max_size(const struct gossip_codec *c)
{
        size_t biggest = (c->cfg.n + c->cfg.parts - 1) / c->cfg.parts;

        return (size_t)(GOSSIP_CODEC_HEADER_BYTES +
                        body_size(c->cfg.id, biggest, codec_param(c, biggest)));
}

static void put_header(uint8_t *p, const struct gossip_codec *c, uint32_t part,
                       size_t count, uint32_t param)
{
        p[0] = GOSSIP_CODEC_VERSION;
        p[1] = (uint8_t)c->cfg.id;
        gn_le16_put(p + 2, (uint16_t)part);
        gn_le16_put(p + 4, (uint16_t)c->cfg.parts);
        gn_le16_put(p + 6, 0);
        gn_le32_put(p + 8, (uint32_t)c->cfg.n);
        gn_le32_put(p + 12, (uint32_t)count);
        gn_le32_put(p + 16, param);
}

/* The encoders below write x[0..count) and, when res is not NULL (it then
 * aliases x), leave in res what the receiver will not reconstruct. */

static void enc_fp32(uint8_t *p, float *res, const float *x, size_t count)
{
        if (HOST_LE)
                memcpy(p, x, 4 * count); /* already the wire layout */
        else
                for (size_t i = 0; i < count; i++)
                        gn_le32_put(p + 4 * i, f2u(x[i]));
        if (res)
                memset(res, 0, count * sizeof(float));
}

/* Round to nearest even for |y| < 2^22: adding and removing 1.5 * 2^23
 * leaves no fraction bits. Inline and branch-free where floats are
 * evaluated as floats (FLT_EVAL_METHOD 0: x86-64 SSE, ARM); elsewhere
 * (x87) the sum would be kept in extended precision, so libm does it.
 * The project never builds with -ffast-math, which could fold it. */
static float round_even(float y)
{
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
        return (y + 12582912.0f) - 12582912.0f;
#else
        return nearbyintf(y);
#endif
}

/* Fast paths for whole arrays, equal bit for bit to gossip_float_to_half()
 * and gossip_half_to_float() on finite values (the callers check that
 * first): no branch and no per-element shift count, so compilers
 * vectorise them with plain SSE2/NEON (the scalar functions cost 2.5 ns
 * a value, a third of a node's CPU when it averages a 407k-float model
 * every step). A half subnormal is |x| * 2^24 rounded to an integer; the
 * clamp to 2^-14 keeps that product small for the values that are not
 * picked, and makes the largest one 1024 = 0x400, the first normal half,
 * which is also the right answer when rounding carries out. */
static inline uint16_t half_from_finite(float f)
{
        /* signed 32-bit lanes: SSE2 compares those (ax < 2^31 always);
         * each clamp in a statement of its own, or GCC 12 sees control
         * flow and gives up vectorising */
        int32_t x = (int32_t)f2u(f), ax = x & 0x7fffffff, a, nor, sub, pick, as;

        ax = ax < 0x477fe000 ? ax : 0x477fe000; /* saturate at 65504 */
        a = ax - (112 << 23); /* negative only where sub is picked */
        nor = (a + 0xfff + ((a >> 13) & 1)) >> 13;
        as = ax < 0x38800000 ? ax : 0x38800000;
        sub = (int32_t)round_even(u2f((uint32_t)as) * 0x1p24f);
        pick = -(int32_t)(ax < 0x38800000);
        return (uint16_t)(((x >> 16) & 0x8000) | (sub & pick) | (nor & ~pick));
}

static inline float half_to_finite(uint16_t h)
{
        int32_t sign = (int32_t)((uint32_t)(h & 0x8000) << 16);
        int32_t e = (h >> 10) & 0x1f, m = h & 0x3ff, pick;
        int32_t sub = (int32_t)f2u((float)m * 0x1p-24f) | sign;
        int32_t nor = sign | ((e + 112) << 23) | (m << 13);

        pick = -(int32_t)(e == 0);
        return u2f((uint32_t)((sub & pick) | (nor & ~pick)));
}

/* Values converted per inner loop: a constant trip count, so GCC's -O2
 * ("very cheap") vectoriser takes the loops; the tail goes one by one. */
enum { FP16_CHUNK = 256 };

#if defined(__aarch64__) && defined(__ARM_NEON)
/* aarch64: the FPU converts (FCVTN/FCVTL, 4 lanes) with IEEE round to
 * nearest even, subnormals kept (Linux leaves FPCR.FZ16 clear); the only
 * difference from half_from_finite() is overflow, which IEEE sends to Inf
 * and we saturate, so the input is clamped to +-65504 first (-0 stays -0).
 * tests/gossip/test_codec.c checks it bit for bit against the portable
 * conversion under qemu-aarch64. */
static void chunk_to_half_neon(const float *restrict x, uint16_t *restrict h)
{
        const float32x4_t hi = vdupq_n_f32(65504.0f), lo = vnegq_f32(hi);

        for (int i = 0; i < FP16_CHUNK; i += 4) {
                float32x4_t v = vminq_f32(vmaxq_f32(vld1q_f32(x + i), lo), hi);
                vst1_u16(h + i, vreinterpret_u16_f16(vcvt_f16_f32(v)));
        }
}

static void chunk_from_half_neon(const uint16_t *restrict h,
                                 float *restrict out)
{
        for (int i = 0; i < FP16_CHUNK; i += 4)
                vst1q_f32(out + i,
                          vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + i))));
}
#endif

static void chunk_to_half_sw(const float *restrict x, uint16_t *restrict h)
{
        for (int i = 0; i < FP16_CHUNK; i++)
                h[i] = half_from_finite(x[i]);
}

static void chunk_from_half_sw(const uint16_t *restrict h, float *restrict out)
{
        for (int i = 0; i < FP16_CHUNK; i++)
                out[i] = half_to_finite(h[i]);
}

#if CODEC_F16C
/* The same conversions with x86's F16C instructions (8 values each; IEEE
 * round-to-nearest-even both ways, subnormal halves included, whatever
 * MXCSR says). The one difference from half_from_finite is overflow: the
 * hardware rounds values of 65520 and more to Inf, ours saturate to 65504,
 * so the input is clamped first (callers pass finite values only).
 * Bit-identical to the portable path: tests/gossip/test_codec.c compares
 * them on every half and on ~44 million floats. */
__attribute__((target("avx,f16c"))) static void
chunk_to_half_hw(const float *restrict x, uint16_t *restrict h)
{
        const __m256 hi = _mm256_set1_ps(65504.0f),
                     lo = _mm256_set1_ps(-65504.0f);

        for (int i = 0; i < FP16_CHUNK; i += 8) {
                __m256 v = _mm256_loadu_ps(x + i);

                v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
                _mm_storeu_si128((__m128i *)(h + i),
                                 _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        }
}

__attribute__((target("avx,f16c"))) static void
chunk_from_half_hw(const uint16_t *restrict h, float *restrict out)
{
        for (int i = 0; i < FP16_CHUNK; i += 8)
                _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                              (const __m128i *)(h + i))));
}
#endif

/* -1: not decided yet; 0: portable; 1: F16C (x86) or NEON (aarch64).
 * Decided from CPUID on
 * first use; threads racing there store the same value. */
static atomic_int fp16_hw = -1;

static int fp16_use_hw(void)
{
        int v = atomic_load_explicit(&fp16_hw, memory_order_relaxed);

        if (v < 0) {
#if CODEC_F16C
                /* AVX with the OS's support for its state, and F16C from
                 * CPUID leaf 1, ECX bit 29 (clang 14's
                 * __builtin_cpu_supports does not know "f16c") */
                unsigned a, b, c, d;

                __builtin_cpu_init();
                v = __builtin_cpu_supports("avx") &&
                    __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
#elif defined(__aarch64__) && defined(__ARM_NEON)
                v = 1; /* every aarch64 core converts halves */
#else
                v = 0;
#endif
                atomic_store_explicit(&fp16_hw, v, memory_order_relaxed);
        }
        return v;
}

int gossip__codec_fp16_hw(int on)
{
        int have;

        atomic_store(&fp16_hw, -1);
        have = fp16_use_hw();
        if (!on)
                atomic_store(&fp16_hw, 0);
        return have;
}

static void chunk_to_half(const float *restrict x, uint16_t *restrict h)
{
#if CODEC_F16C
        if (fp16_use_hw()) {
                chunk_to_half_hw(x, h);
                return;
        }
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
        if (fp16_use_hw()) {
                chunk_to_half_neon(x, h);
                return;
        }
#endif
        chunk_to_half_sw(x, h);
}

static void chunk_from_half(const uint16_t *restrict h, float *restrict out)
{
#if CODEC_F16C
        if (fp16_use_hw()) {
                chunk_from_half_hw(h, out);
                return;
        }
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
        if (fp16_use_hw()) {
                chunk_from_half_neon(h, out);
                return;
        }
#endif
        chunk_from_half_sw(h, out);
}

/* Non-zero if a half in h[0..FP16_CHUNK) is Inf or NaN. */
static unsigned chunk_nonfinite(const uint16_t *h)
{
        unsigned bad = 0;

        for (size_t i = 0; i < FP16_CHUNK; i++)
                bad |= (h[i] & 0x7c00u) == 0x7c00u;
        return bad;
}

static void enc_fp16(uint8_t *p, float *res, const float *x, size_t count)
{
        uint16_t h[FP16_CHUNK];
        float back[FP16_CHUNK];

        for (size_t i0 = 0; i0 < count; i0 += FP16_CHUNK) {
                size_t m = count - i0 < FP16_CHUNK ? count - i0 : FP16_CHUNK;

                if (m == FP16_CHUNK)
                        chunk_to_half(x + i0, h);
                else
                        for (size_t i = 0; i < m; i++)
                                h[i] = half_from_finite(x[i0 + i]);
                if (HOST_LE)
                        memcpy(p + 2 * i0, h, 2 * m);
                else
                        for (size_t i = 0; i < m; i++)
                                gn_le16_put(p + 2 * (i0 + i), h[i]);
                if (!res)
                        continue;
                if (m == FP16_CHUNK)
                        chunk_from_half(h, back);
                else
                        for (size_t i = 0; i < m; i++)
                                back[i] = half_to_finite(h[i]);
                for (size_t i = 0; i < m; i++)
                        res[i0 + i] = x[i0 + i] - back[i];
        }
}

/* A uniform variate on the grid k·2^-16 in [0, 1) for element i of the
 * stream `seed`: a counter-based hash (lowbias32), so the stream needs no
 * state and the loop over a block still vectorises. 16 bits, so that
 * n + u is exact for an integer |n| < 128: an integer x/scale, 0 above
 * all, is never rounded up to the next one. Otherwise x/scale + u rounds
 * by at most half an ulp (2^-18 below 128), the only bias left. */
static inline float dither_u(uint32_t seed, uint32_t i)
{
        uint32_t z = seed + i * 0x9e3779b9u;

        z ^= z >> 16;
        z *= 0x7feb352du;
        z ^= z >> 15;
        z *= 0x846ca68bu;
        z ^= z >> 16;
        return (float)(z >> 16) * 0x1p-16f;
}

/* q[i] = floor(x[i]·inv + u) for element i0 + i of the stream s32,
 * clamped to [-127, 127]. */
GN_HOT static void round_stochastic(uint8_t *restrict q,
                                    const float *restrict x, size_t n,
                                    float inv, uint32_t s32, uint32_t i0)
{
        for (size_t i = 0; i < n; i++) {
                /* floor(y) as truncation, one down for a negative y
                 * with a fraction: no libm call, vectorises */
                float y = x[i] * inv + dither_u(s32, i0 + (uint32_t)i);
                int32_t k = (int32_t)y;

                k -= (float)k > y;
                k = k > 127 ? 127 : k;
                k = k < -127 ? -127 : k;
                q[i] = (uint8_t)(int8_t)k;
        }
}

/* stochastic == 0: round to nearest (the stateful encoder; with error
 * feedback the error goes to res). Otherwise the stateless encoder of a
 * parameter slice, whose error nothing carries forward, so it must be
 * unbiased: q = floor(x/scale + u), u uniform in [0, 1) from the stream
 * `seed` (E[q·scale] = x, |error| < scale). Rounded to nearest, a slice
 * pulls the model averaged with it towards the grid, step after step
 * (docs/design.md, "int8 slices are rounded stochastically"). The
 * decoder is the same for both. */
GN_HOT static void enc_int8(uint8_t *p, float *res, const float *x,
                            size_t count, uint32_t block, int stochastic,
                            uint64_t seed)
{
        size_t nblocks = (count + block - 1) / block;
        uint8_t *q = p + 4 * nblocks;
        uint32_t s32;

        /* every bit of the 64-bit seed into the 32-bit stream key
         * (murmur3's fmix64) */
        seed ^= seed >> 33;
        seed *= 0xff51afd7ed558ccdull;
        seed ^= seed >> 33;
        seed *= 0xc4ceb9fe1a85ec53ull;
        s32 = (uint32_t)(seed ^ (seed >> 33));

        for (size_t b = 0; b < nblocks; b++) {
                size_t lo = b * block;
                size_t hi = lo + block < count ? lo + block : count;
                float maxabs = 0.0f, scale, inv;

                for (size_t i = lo; i < hi; i++) {
                        float a = fabsf(x[i]);
                        maxabs = a > maxabs ? a : maxabs;
                }
                /* A block below 127 * FLT_MIN (~1.5e-36) is sent as zeros
                 * (with error feedback it stays in the residual): its
                 * scale would be subnormal and 1/scale overflow. */
                scale = maxabs / 127.0f;
                if (scale < FLT_MIN)
                        scale = 0.0f;
                /* Near FLT_MAX, maxabs/127 may round up so that 127 * scale
                 * overflows, which the decoder refuses: step it down. */
                while (!isfinite(127.0f * scale))
                        scale = nextafterf(scale, 0.0f);
                /* x * (1/scale) may differ from x/scale in the last bit;
                 * that moves a rounding tie at most, the error stays
                 * scale/2 plus float rounding. */
                inv = scale > 0.0f ? 1.0f / scale : 0.0f;
                gn_le32_put(p + 4 * b, f2u(scale));
                if (!stochastic) {
                        for (size_t i = lo; i < hi; i++) {
                                float v = x[i], r = round_even(v * inv);

                                r = r > 127.0f ? 127.0f : r;
                                r = r < -127.0f ? -127.0f : r;
                                q[i] = (uint8_t)(int8_t)r;
                                if (res)
                                        res[i] = v - r * scale;
                        }
                        continue;
                }
                round_stochastic(q + lo, x + lo, hi - lo, inv, s32,
                                 (uint32_t)lo);
        }
}

/* |x| as IEEE bits: for finite values these order like the magnitudes. */
static uint32_t mag_bits(float x)
{
        return f2u(x) & 0x7fffffff;
}

/* The bits of the k-th largest |x[i]|, 1 <= k <= n. Radix select on the
 * magnitude bits, 11 + 11 + 10 bits in three passes over x: O(n) in the
 * worst case, no allocation, no data-dependent recursion (gradients are
 * full of equal values, ReLU zeros, which hurt quickselect). */
static uint32_t kth_largest_mag(const float *x, size_t n, size_t k)
{
        static const unsigned shift[3] = {21, 10, 0};
        static const uint32_t buckets[3] = {2048, 2048, 1024};
        uint32_t hist[2048], prefix = 0, pmask = 0;

        for (int pass = 0; pass < 3; pass++) {
                uint32_t b = buckets[pass] - 1;

                memset(hist, 0, sizeof(hist));
                for (size_t i = 0; i < n; i++) {
                        uint32_t u = mag_bits(x[i]);
                        if ((u & pmask) == prefix)
                                hist[(u >> shift[pass]) & b]++;
                }
                /* From the top bucket down to the one holding rank k; the
                 * prefix-matching elements number >= k, so b stays >= 0. */
                while (b > 0 && k > hist[b])
                        k -= hist[b--];
                prefix |= b << shift[pass];
                pmask |= (buckets[pass] - 1) << shift[pass];
        }
        return prefix;
}

/* Sends the k largest |x| in ascending index order; ties at the threshold
 * go to the lowest indices, so the choice is deterministic. */
static void enc_topk(uint8_t *p, float *res, const float *x, size_t count,
                     uint32_t k)
{
        size_t above = 0, ties, j = 0;
        uint32_t t;

        if (k == 0)
                return;
        t = kth_largest_mag(x, count, k);
        for (size_t i = 0; i < count; i++)
                above += mag_bits(x[i]) > t;
        ties = k - above;
        for (size_t i = 0; i < count && j < k; i++) {
                uint32_t u = mag_bits(x[i]);

                if (u > t || (u == t && ties > 0)) {
                        if (u == t)
                                ties--;
                        gn_le32_put(p + 8 * j, (uint32_t)i);
                        gn_le32_put(p + 8 * j + 4, f2u(x[i]));
                        if (res)
                                res[i] = 0.0f;
                        j++;
                }
        }
}

int gossip_codec_encode(struct gossip_codec *c, uint64_t step, const float *g,
                        size_t n, void *buf, size_t cap, size_t *len)
{
        uint32_t part, param;
        size_t lo, count;
        uint64_t need;
        uint8_t *p = buf, *body;
        const float *x = g;
        float *res = NULL;

        if (!c || !g || !buf || !len)
                return GOSSIP_EINVAL;
        if (n != c->cfg.n)
                return GOSSIP_EMISMATCH;
        if (!gn_all_finite(g, n))
                return GOSSIP_ENONFINITE;
        part = (uint32_t)(step % c->cfg.parts);
        gossip_codec_partition(n, part, c->cfg.parts, &lo, &count);
        param = codec_param(c, count);
        need = GOSSIP_CODEC_HEADER_BYTES + body_size(c->cfg.id, count, param);
        if (need > (uint64_t)cap)
                return GOSSIP_ETOOBIG;
        if (c->residual) {
                /* The residual saturates at +-FLT_MAX rather than become
                 * Inf: every payload stays finite, and so does it. */
                for (size_t i = 0; i < n; i++) {
                        float r = c->residual[i] + g[i];

                        r = r > FLT_MAX ? FLT_MAX : r; /* min/max: vectorises */
                        c->residual[i] = r < -FLT_MAX ? -FLT_MAX : r;
                }
                x = c->residual;
                res = c->residual + lo;
        }
        put_header(p, c, part, count, param);
        body = p + GOSSIP_CODEC_HEADER_BYTES;
        switch (c->cfg.id) {
        case GOSSIP_CODEC_FP32:
                enc_fp32(body, res, x + lo, count);
                break;
        case GOSSIP_CODEC_FP16:
                enc_fp16(body, res, x + lo, count);
                break;
        case GOSSIP_CODEC_INT8:
                enc_int8(body, res, x + lo, count, param, 0, 0);
                break;
        case GOSSIP_CODEC_TOPK:
                enc_topk(body, res, x + lo, count, param);
                break;
        }
        *len = (size_t)need;
        c->payloads++;
        c->bytes += need;
        return 0;
}

int gossip_codec_encode_part(const struct gossip_codec *c, uint32_t part,
                             const float *x, size_t count, uint64_t seed,
                             void *buf, size_t cap, size_t *len)
{
        size_t lo, want;
        uint32_t param;
        uint64_t need;
        uint8_t *p = buf, *body;

        if (!c || !x || !buf || !len || part >= c->cfg.parts)
                return GOSSIP_EINVAL;
        gossip_codec_partition(c->cfg.n, part, c->cfg.parts, &lo, &want);
        if (count != want)
                return GOSSIP_EMISMATCH;
        if (!gn_all_finite(x, count))
                return GOSSIP_ENONFINITE;
        param = codec_param(c, count);
        need = GOSSIP_CODEC_HEADER_BYTES + body_size(c->cfg.id, count, param);
        if (need > (uint64_t)cap)
                return GOSSIP_ETOOBIG;
        put_header(p, c, part, count, param);
        body = p + GOSSIP_CODEC_HEADER_BYTES;
        switch (c->cfg.id) {
        case GOSSIP_CODEC_FP32:
                enc_fp32(body, NULL, x, count);
                break;
        case GOSSIP_CODEC_FP16:
                enc_fp16(body, NULL, x, count);
                break;
        case GOSSIP_CODEC_INT8:
                enc_int8(body, NULL, x, count, param, 1, seed);
                break;
        case GOSSIP_CODEC_TOPK:
                enc_topk(body, NULL, x, count, param);
                break;
        }
        *len = (size_t)need;
        return 0;
}

/* ---- decoder ---- */

static int check_param(int id, size_t count, uint32_t param)
{
        switch (id) {
        case GOSSIP_CODEC_FP32:
        case GOSSIP_CODEC_FP16:
                return param == 0;
        case GOSSIP_CODEC_INT8:
                return param >= 1 && param <= GOSSIP_CODEC_INT8_BLOCK_MAX;
        case GOSSIP_CODEC_TOPK:
                return param <= count;
        }
        return 0;
}

int gossip_codec_peek(const void *buf, size_t len, size_t n_model,
                      struct gossip_codec_info *info)
{
        const uint8_t *p = buf;
        uint32_t part, parts, model, count, param;
        size_t max_parts, lo, want;
        uint64_t need;

        if (!buf || !info || n_model == 0 || (uint64_t)n_model > UINT32_MAX)
                return GOSSIP_EINVAL;
        if (len < GOSSIP_CODEC_HEADER_BYTES)
                return GOSSIP_ESHORT;
        if (p[0] != GOSSIP_CODEC_VERSION)
                return GOSSIP_EVERSION;
        part = gn_le16_get(p + 2);
        parts = gn_le16_get(p + 4);
        model = gn_le32_get(p + 8);
        count = gn_le32_get(p + 12);
        param = gn_le32_get(p + 16);
        if (!gossip_codec_name(p[1]) || gn_le16_get(p + 6) != 0)
                return GOSSIP_EDECODE;
        if (model != n_model)
                return GOSSIP_EMISMATCH;
        max_parts =
            n_model < GOSSIP_CODEC_PARTS_MAX ? n_model : GOSSIP_CODEC_PARTS_MAX;
        if (parts == 0 || parts > max_parts || part >= parts)
                return GOSSIP_EDECODE;
        gossip_codec_partition(n_model, part, parts, &lo, &want);
        if (count != want)
                return GOSSIP_EMISMATCH;
        if (!check_param(p[1], count, param))
                return GOSSIP_EDECODE;
        need = GOSSIP_CODEC_HEADER_BYTES + body_size(p[1], count, param);
        if ((uint64_t)len < need)
                return GOSSIP_ESHORT;
        if ((uint64_t)len > need)
                return GOSSIP_EDECODE; /* trailing bytes */
        info->id = (enum gossip_codec_id)p[1];
        info->part_index = part;
        info->part_count = parts;
        info->lo = lo;
        info->count = count;
        info->param = param;
        info->len = (size_t)need;
        return 0;
}

static int dec_fp32(const uint8_t *p, float *out, size_t count)
{
        if (HOST_LE)
                memcpy(out, p, 4 * count);
        else
                for (size_t i = 0; i < count; i++)
                        out[i] = u2f(gn_le32_get(p + 4 * i));
        for (size_t i = 0; i < count; i++)
                if (!isfinite(out[i]))
                        return GOSSIP_ENONFINITE;
        return 0;
}

static int dec_fp16(const uint8_t *p, float *out, size_t count)
{
        uint16_t h[FP16_CHUNK];

        for (size_t i0 = 0; i0 < count; i0 += FP16_CHUNK) {
                size_t m = count - i0 < FP16_CHUNK ? count - i0 : FP16_CHUNK;

                if (HOST_LE)
                        memcpy(h, p + 2 * i0, 2 * m);
                else
                        for (size_t i = 0; i < m; i++)
                                h[i] = gn_le16_get(p + 2 * (i0 + i));
                if (m == FP16_CHUNK) {
                        if (chunk_nonfinite(h))
                                return GOSSIP_ENONFINITE;
                        chunk_from_half(h, out + i0);
                        continue;
                }
                for (size_t i = 0; i < m; i++) {
                        if ((h[i] & 0x7c00) == 0x7c00)
                                return GOSSIP_ENONFINITE;
                        out[i0 + i] = half_to_finite(h[i]);
                }
        }
        return 0;
}

static int dec_int8(const uint8_t *p, float *out, size_t count, uint32_t block)
{
        size_t nblocks = (count + block - 1) / block;
        const uint8_t *q = p + 4 * nblocks;

        for (size_t b = 0; b < nblocks; b++) {
                float scale = u2f(gn_le32_get(p + 4 * b));
                size_t lo = b * block;
                size_t hi = lo + block < count ? lo + block : count;

                if (!isfinite(scale))
                        return GOSSIP_ENONFINITE;
                if (signbit(scale))
                        return GOSSIP_EDECODE; /* encoder never does that */
                for (size_t i = lo; i < hi; i++) {
                        if (q[i] == 0x80)
                                return GOSSIP_EDECODE; /* -128: not ours */
                        out[i] = (float)(int8_t)q[i] * scale;
                        if (!isfinite(out[i]))
                                return GOSSIP_ENONFINITE;
                }
        }
        return 0;
}

static int dec_topk(const uint8_t *p, float *out, size_t count, uint32_t k)
{
        memset(out, 0, count * sizeof(float));
        for (size_t j = 0; j < k; j++) {
                uint32_t idx = gn_le32_get(p + 8 * j);
                float v = u2f(gn_le32_get(p + 8 * j + 4));

                if (idx >= count ||
                    (j > 0 && idx <= gn_le32_get(p + 8 * (j - 1))))
                        return GOSSIP_EDECODE;
                if (!isfinite(v))
                        return GOSSIP_ENONFINITE;
                out[idx] = v;
        }
        return 0;
}

int gossip_codec_decode(const void *buf, size_t len, size_t n_model, float *out,
                        struct gossip_codec_info *info)
{
        const uint8_t *body = (const uint8_t *)buf + GOSSIP_CODEC_HEADER_BYTES;
        int rc;

        if (!out)
                return GOSSIP_EINVAL;
        rc = gossip_codec_peek(buf, len, n_model, info);
        if (rc)
                return rc;
        switch (info->id) {
        case GOSSIP_CODEC_FP32:
                return dec_fp32(body, out, info->count);
        case GOSSIP_CODEC_FP16:
                return dec_fp16(body, out, info->count);
        case GOSSIP_CODEC_INT8:
                return dec_int8(body, out, info->count, info->param);
        case GOSSIP_CODEC_TOPK:
                return dec_topk(body, out, info->count, info->param);
        }
        return GOSSIP_EDECODE;
}
