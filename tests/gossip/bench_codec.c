/*
 * bench_codec.c - throughput and size of the gradient payload codecs.
 *
 * Not a test: it never fails on timing. For a gradient of the MLP
 * 784-512-10 (407,050 floats, 1.6 MB) it times encode and decode of every
 * codec and, in the same run, a plain memcpy of the gradient out and back
 * (the cost of the raw path without any codec), and prints the payload
 * sizes. Times are the best of `reps` runs (argv[1], default 21): on a
 * shared machine other processes only ever add time, so the minimum is the
 * codec's own cost; the median of encode+decode is printed beside it.
 *
 *   bench_gossip_codec [reps] [seed]
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "gossip/codec.h"

enum { MODEL = 407050 }; /* 784*512 + 512 + 512*10 + 10 */

static double median(const double *v, int n)
{
        double *c = malloc((size_t)n * sizeof(double)), m;

        if (!c)
                return NAN;
        memcpy(c, v, (size_t)n * sizeof(double));
        qsort(c, (size_t)n, sizeof(double), cmp_double);
        m = c[n / 2];
        free(c);
        return m;
}

static double best(const double *v, int n)
{
        double m = v[0];

        for (int i = 1; i < n; i++)
                m = v[i] < m ? v[i] : m;
        return m;
}

/* Median over runs of encode + decode. */
static double median_sum(const double *a, const double *b, int n)
{
        double *c = malloc((size_t)n * sizeof(double)), m;

        if (!c)
                return NAN;
        for (int i = 0; i < n; i++)
                c[i] = a[i] + b[i];
        m = median(c, n);
        free(c);
        return m;
}

#include "base/gn_rng.h"

/* Gradient-like: 30% exact zeros (ReLU), the rest roughly log-uniform
 * over four decades. */
static void fill(float *g, size_t n, uint64_t seed)
{
        uint64_t s = seed;

        for (size_t i = 0; i < n; i++) {
                uint64_t r = gn_splitmix64(&s);
                float u = (float)((r >> 11) & 0xfffff) / (float)0x100000;

                if (r % 10 < 3)
                        g[i] = 0.0f;
                else
                        g[i] = ((r >> 40) & 1 ? 1.0f : -1.0f) *
                               powf(10.0f, -6.0f + 4.0f * u);
        }
}

struct row {
        const char *name;
        int id;
        uint32_t parts, k;
        int ef;
        int portable; /* fp16: the portable code, not F16C */
};

int main(int argc, char **argv)
{
        static const struct row rows[] = {
            {"fp32", GOSSIP_CODEC_FP32, 1, 0, 0, 0},
            {"fp16", GOSSIP_CODEC_FP16, 1, 0, 0, 0},
            {"fp16+ef", GOSSIP_CODEC_FP16, 1, 0, 1, 0},
            {"fp16 sw", GOSSIP_CODEC_FP16, 1, 0, 0, 1},
            {"fp16+ef sw", GOSSIP_CODEC_FP16, 1, 0, 1, 1},
            {"int8/256", GOSSIP_CODEC_INT8, 1, 0, 0, 0},
            {"int8/256+ef", GOSSIP_CODEC_INT8, 1, 0, 1, 0},
            {"topk 1%", GOSSIP_CODEC_TOPK, 1, 0, 0, 0},
            {"topk 0.1%", GOSSIP_CODEC_TOPK, 1, 407, 0, 0},
            {"fp32 P=8", GOSSIP_CODEC_FP32, 8, 0, 0, 0},
            {"int8 P=8", GOSSIP_CODEC_INT8, 8, 0, 0, 0},
        };
        int reps = argc > 1 ? atoi(argv[1]) : 21;
        uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 20261129;
        float *g = malloc(MODEL * sizeof(float));
        float *out = malloc(MODEL * sizeof(float));
        uint8_t *buf = malloc(20 + 4 * (size_t)MODEL);
        double *te = malloc((size_t)(reps > 0 ? reps : 1) * sizeof(double));
        double *td = malloc((size_t)(reps > 0 ? reps : 1) * sizeof(double));
        double base, mb = MODEL * 4.0 / 1e6;
        int rc = 1;

        if (!g || !out || !buf || !te || !td || reps < 1)
                goto out;
        fill(g, MODEL, seed);
        printf("bench_codec: %d floats (%.2f MB), best of %d, seed %" PRIu64
               "\n",
               MODEL, mb, reps, seed);
        for (int r = 0; r < reps; r++) {
                double t0 = now_s();
                memcpy(buf, g, MODEL * sizeof(float));
                te[r] = now_s() - t0;
                t0 = now_s();
                memcpy(out, buf, MODEL * sizeof(float));
                td[r] = now_s() - t0;
                if (out[MODEL / 2] != g[MODEL / 2])
                        goto out;
        }
        base = best(te, reps) + best(td, reps);
        printf("%-12s %10s %7s %8s %8s %8s %8s %8s\n", "codec", "bytes",
               "ratio", "enc ms", "dec ms", "MB/s", "x memcpy", "med ms");
        printf("%-12s %10d %7.2f %8.3f %8.3f %8.0f %8.2f %8.3f\n", "memcpy",
               MODEL * 4, 1.0, best(te, reps) * 1e3, best(td, reps) * 1e3,
               mb / base, 1.0, median_sum(te, td, reps) * 1e3);
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                struct gossip_codec_cfg cfg = {
                    .id = rows[i].id,
                    .n = MODEL,
                    .parts = rows[i].parts,
                    .k = rows[i].k,
                    .error_feedback = rows[i].ef,
                };
                struct gossip_codec c;
                struct gossip_codec_info info;
                size_t len = 0;

                gossip__codec_fp16_hw(!rows[i].portable);
                if (gossip_codec_init(&c, &cfg) != 0)
                        goto out;
                for (int r = 0; r < reps; r++) {
                        double t0 = now_s();
                        if (gossip_codec_encode(&c, (uint64_t)r, g, MODEL, buf,
                                                gossip_codec_max_size(&c),
                                                &len) != 0)
                                goto out;
                        te[r] = now_s() - t0;
                        t0 = now_s();
                        if (gossip_codec_decode(buf, len, MODEL, out, &info))
                                goto out;
                        td[r] = now_s() - t0;
                }
                {
                        double e = best(te, reps), d = best(td, reps);
                        printf("%-12s %10zu %7.2f %8.3f %8.3f %8.0f %8.2f "
                               "%8.3f\n",
                               rows[i].name, len, MODEL * 4.0 / (double)len,
                               e * 1e3, d * 1e3, mb / (e + d), (e + d) / base,
                               median_sum(te, td, reps) * 1e3);
                }
                gossip_codec_free(&c);
        }
        printf("ratio = raw bytes / payload bytes; enc/dec ms best of %d; "
               "MB/s = gradient MB per second of best encode+decode;\n"
               "x memcpy = best encode+decode / best memcpy out+back; "
               "med ms = median encode+decode.\n"
               "P=8 rows send one eighth of the gradient per step.\n",
               reps);
        rc = 0;
out:
        if (rc)
                fprintf(stderr, "bench_codec: failed\n");
        free(g);
        free(out);
        free(buf);
        free(te);
        free(td);
        return rc;
}
