/*
 * test_gemm.c - nn_gemm against a naive double-precision oracle: all four
 * transposition combinations, odd shapes (1, 3, 17, 33, 129), alpha/beta
 * variants, leading dimensions larger than the rows, and the promises that
 * beta == 0 ignores NaN in C and that C's padding is never written.
 * Replay with GN_SEED=<seed>.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "test_seed.h"
#include "nn/nn.h"
#include "layers.h"

static uint64_t seed;

/* The oracle: C = alpha op(A) op(B) + beta C in double; also returns in
 * mag[] the magnitude sum |alpha| sum|a||b| + |beta c| bounding rounding. */
static void ref_gemm(int ta, int tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb,
                     float beta, const float *c, int ldc, double *out,
                     double *mag)
{
        for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                        double s = 0, g = 0;
                        for (int p = 0; p < k; p++) {
                                double x = ta ? a[p * lda + i] : a[i * lda + p];
                                double y = tb ? b[j * ldb + p] : b[p * ldb + j];
                                s += x * y;
                                g += fabs(x * y);
                        }
                        double cv = beta == 0 ? 0 : beta * c[i * ldc + j];
                        out[i * n + j] = alpha * s + cv;
                        mag[i * n + j] = fabs(alpha) * g + fabs(cv);
                }
}

static void fill(float *x, size_t n, uint64_t *st)
{
        for (size_t i = 0; i < n; i++)
                x[i] = nn__rand_uniform(st, -1.0f, 1.0f);
}

/* Runs one case; returns the number of mismatching entries. */
static int check_case(int ta, int tb, int m, int n, int k, float alpha,
                      float beta, int pad, uint64_t *st)
{
        int arows = ta ? k : m, acols = ta ? m : k;
        int brows = tb ? n : k, bcols = tb ? k : n;
        int lda = acols + pad, ldb = bcols + pad, ldc = n + pad;
        float *a = malloc(sizeof(float) * arows * lda);
        float *b = malloc(sizeof(float) * brows * ldb);
        float *c = malloc(sizeof(float) * m * ldc);
        float *c0 = malloc(sizeof(float) * m * ldc);
        double *ref = malloc(sizeof(double) * m * n);
        double *mag = malloc(sizeof(double) * m * n);
        int bad = 0;

        fill(a, (size_t)arows * lda, st);
        fill(b, (size_t)brows * ldb, st);
        fill(c, (size_t)m * ldc, st);
        if (beta == 0.0f)
                for (int i = 0; i < m * ldc; i += 7)
                        c[i] = NAN; /* must be ignored */
        for (int i = 0; i < m * ldc; i++)
                c0[i] = c[i];
        ref_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc, ref,
                 mag);
        nn_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        for (int i = 0; i < m; i++) {
                for (int j = 0; j < ldc; j++) {
                        float got = c[i * ldc + j];
                        if (j >= n) { /* padding: untouched */
                                int same =
                                    (isnan(got) && isnan(c0[i * ldc + j])) ||
                                    got == c0[i * ldc + j];
                                bad += !same;
                                continue;
                        }
                        double want = ref[i * n + j];
                        double tol = 1e-5 * (mag[i * n + j] + 1e-6) * (k + 2);
                        if (!(fabs(got - want) <= tol)) {
                                if (bad < 3)
                                        print_error("ta=%d tb=%d m=%d n=%d "
                                                    "k=%d alpha=%g beta=%g "
                                                    "C[%d,%d]=%.9g want %.9g "
                                                    "seed=%llu\n",
                                                    ta, tb, m, n, k, alpha,
                                                    beta, i, j, got, want,
                                                    (unsigned long long)seed);
                                bad++;
                        }
                }
        }
        free(a);
        free(b);
        free(c);
        free(c0);
        free(ref);
        free(mag);
        return bad;
}

static void test_all_transpositions_odd_shapes(void **state)
{
        static const int dims[] = {1, 3, 17, 33};
        uint64_t st = seed;
        int bad = 0, cases = 0;

        for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                        for (int i = 0; i < 4; i++)
                                for (int j = 0; j < 4; j++)
                                        for (int l = 0; l < 4; l++) {
                                                bad += check_case(
                                                    ta, tb, dims[i], dims[j],
                                                    dims[l], 1.0f, 0.0f,
                                                    (i + j + l) % 3, &st);
                                                cases++;
                                        }
        assert_int_equal(cases, 256);
        assert_int_equal(bad, 0);
}

static void test_big_odd_shapes(void **state)
{
        uint64_t st = seed + 1;
        int bad = 0;

        for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                        bad +=
                            check_case(ta, tb, 129, 33, 17, 1.0f, 0.0f, 5, &st);
                        bad += check_case(ta, tb, 17, 129, 129, 1.0f, 0.0f, 0,
                                          &st);
                        bad += check_case(ta, tb, 100, 512, 784 / 7, 1.0f, 0.0f,
                                          1, &st);
                }
        assert_int_equal(bad, 0);
}

static void test_alpha_beta(void **state)
{
        static const float alphas[] = {1.0f, -0.5f, 2.0f, 0.0f};
        static const float betas[] = {0.0f, 1.0f, 0.3f, -2.0f};
        uint64_t st = seed + 2;
        int bad = 0;

        for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                        for (int i = 0; i < 4; i++)
                                for (int j = 0; j < 4; j++)
                                        bad += check_case(ta, tb, 17, 3, 33,
                                                          alphas[i], betas[j],
                                                          4, &st);
        assert_int_equal(bad, 0);
}

/* A tiny case with hand-known values: [1 2;3 4] [5 6;7 8] = [19 22;43 50]. */
static void test_known_values(void **state)
{
        const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
        float c[4] = {1, 1, 1, 1};

        nn_gemm(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
        assert_true(c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50);
        /* A^T B = [1 3;2 4][5 6;7 8] = [26 30;38 44], plus 2*C. */
        nn_gemm(1, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 2.0f, c, 2);
        assert_true(c[0] == 26 + 38 && c[1] == 30 + 44 && c[2] == 38 + 86 &&
                    c[3] == 44 + 100);
        /* k == 0: C = beta C. */
        nn_gemm(0, 0, 2, 2, 0, 1.0f, a, 2, b, 2, 0.5f, c, 2);
        assert_true(c[0] == 32 && c[1] == 37);
}

static void test_threads_setting(void **state)
{
        nn_threads_set(2);
        assert_int_equal(nn_threads_get(), 2);
        uint64_t st = seed + 3;
        assert_int_equal(check_case(0, 1, 129, 129, 129, 1.0f, 0.0f, 2, &st),
                         0);
        nn_threads_set(0); /* clamps */
        assert_int_equal(nn_threads_get(), 1);
}

static void test_images_to_float(void **state)
{
        const uint8_t px[] = {0, 1, 128, 255};
        float f[4];

        nn_images_to_float(px, 4, f);
        assert_true(f[0] == 0.0f && f[3] == 1.0f);
        assert_true(f[1] == 1.0f / 255.0f && f[2] == 128.0f / 255.0f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_known_values),
            cmocka_unit_test(test_all_transpositions_odd_shapes),
            cmocka_unit_test(test_big_odd_shapes),
            cmocka_unit_test(test_alpha_beta),
            cmocka_unit_test(test_threads_setting),
            cmocka_unit_test(test_images_to_float),
        };
        int rc;

        seed = gn_test_seed("test_gemm", 20261129);
        nn_lib_init();
        rc = cmocka_run_group_tests(tests, NULL, NULL);
        nn_lib_finalize();
        return rc;
}
