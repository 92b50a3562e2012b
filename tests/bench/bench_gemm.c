/*
 * bench_gemm.c - GFLOP/s of nn_gemm on the six GEMM shapes of MLP
 * 784-512-10 at batch 100 (forward, weight gradients, input gradients),
 * next to the machine's peak derived from /proc/cpuinfo (flops per cycle
 * from the vector flags times the reported MHz times the thread count).
 * Usage: bench_gemm [--threads T] [--ms M]   (M: time per shape, default 300)
 * T is BLIS's own thread count for each GEMM (set directly: nn_threads_set
 * now splits batches across model threads and keeps BLIS at one thread);
 * it only matters with the pthread or openmp BLIS build.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <blis.h>

#include "nn/nn.h"
#include "bench_clock.h"

struct shape {
        const char *what;
        int ta, tb, m, n, k;
};

static const struct shape shapes[] = {
    {"fwd1  y1=x*W1^T", 0, 1, 100, 512, 784},
    {"fwd2  y2=y1*W2^T", 0, 1, 100, 10, 512},
    {"bwd2  dW2=dy2^T*y1", 1, 0, 10, 512, 100},
    {"bwd2  dy1=dy2*W2", 0, 0, 100, 512, 10},
    {"bwd1  dW1=dy1^T*x", 1, 0, 512, 784, 100},
    {"bwd1  dx=dy1*W1 (skipped)", 0, 0, 100, 784, 512},
    /* The same products with W stored [in][out] instead of [out][in]. */
    {"alt fwd1 y1=x*W1", 0, 0, 100, 512, 784},
    {"alt bwd1 dW1=x^T*dy1", 1, 0, 784, 512, 100},
};

/* Peak single-precision GFLOP/s per core: FMA width from the flags. */
static double peak_per_core(double *mhz, int *fpc)
{
        FILE *f = fopen("/proc/cpuinfo", "r");
        char line[4096];
        int avx2 = 0, fma = 0, avx512 = 0;

        *mhz = 0;
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f)) {
                if (!strncmp(line, "flags", 5)) {
                        avx2 |= strstr(line, " avx2") != NULL;
                        fma |= strstr(line, " fma") != NULL;
                        avx512 |= strstr(line, " avx512f") != NULL;
                } else if (!strncmp(line, "cpu MHz", 7) && *mhz == 0) {
                        char *c = strchr(line, ':');
                        if (c)
                                *mhz = atof(c + 1);
                }
        }
        fclose(f);
        /* 2 FMA pipes x (8 floats AVX2 | 16 AVX-512) x 2 flops.  Zen 4
         * executes AVX-512 as two 256-bit halves, so it also gets 32. */
        *fpc = fma && avx2 ? 32 : 8;
        (void)avx512;
        return *mhz * 1e-3 * *fpc;
}

int main(int argc, char **argv)
{
        int threads = 1;
        double ms = 300, mhz;
        int fpc;
        size_t big = 1 << 20;
        float *a = calloc(big, sizeof(float)), *b = calloc(big, sizeof(float));
        float *c = calloc(big, sizeof(float));

        for (int i = 1; i + 1 < argc; i += 2) {
                if (!strcmp(argv[i], "--threads"))
                        threads = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--ms"))
                        ms = atof(argv[i + 1]);
        }
        if (!a || !b || !c)
                return 1;
        for (size_t i = 0; i < big; i++) {
                a[i] = (float)(i % 17) * 0.01f;
                b[i] = (float)(i % 13) * 0.01f;
        }
        nn_lib_init();
        bli_thread_set_num_threads(threads);
        double peak = peak_per_core(&mhz, &fpc) * threads;
        printf("threads=%d peak=%.1f GFLOP/s (%.0f MHz x %d flop/cycle x %d)\n",
               threads, peak, mhz, fpc, threads);
        for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
                const struct shape *s = &shapes[i];
                int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
                long reps = 0;
                double t0 = now_s(), t;

                do {
                        for (int r = 0; r < 20; r++)
                                nn_gemm(s->ta, s->tb, s->m, s->n, s->k, 1.0f, a,
                                        lda, b, ldb, 0.0f, c, s->n);
                        reps += 20;
                        t = now_s() - t0;
                } while (t < ms * 1e-3);
                double gf = 2.0 * s->m * s->n * s->k * reps / t * 1e-9;
                printf("%-28s m=%4d n=%4d k=%4d  %7.1f GFLOP/s  %5.1f%% of "
                       "peak  %8.1f us\n",
                       s->what, s->m, s->n, s->k, gf, 100 * gf / peak,
                       t / reps * 1e6);
        }
        nn_lib_finalize();
        free(a);
        free(b);
        free(c);
        return 0;
}
