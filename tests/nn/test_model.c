/*
 * test_model.c - models end to end: spec parsing, canonical form and
 * rejected specs; parameter counts and layout round trip; gradients of a
 * whole small MLP and a small CNN against central finite differences;
 * determinism (same seed, one thread: bit-identical losses and weights);
 * gradients overwritten, not accumulated; evaluate/predict consistency;
 * that a model learns a separable synthetic problem; and data parallelism
 * (nn_threads_set 2 and 3): gradients, loss, hits, evaluate and predict
 * agree with one thread, and runs are bit-identical for a fixed count;
 * the optimizer step split over the threads (nn_model_step) gives the
 * one-thread step's bits.
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

static void fill(float *x, size_t n, uint64_t *st, float lo, float hi)
{
        for (size_t i = 0; i < n; i++)
                x[i] = nn__rand_uniform(st, lo, hi);
}

static void test_spec_canonical(void **state)
{
        char out[NN_SPEC_MAX];

        assert_int_equal(
            nn_spec_canonical("784-512-10", 0, 0, 0, out, sizeof(out)), 0);
        assert_string_equal(out, "784-512-10");
        assert_int_equal(
            nn_spec_canonical("784-512-10", 1, 28, 28, out, sizeof(out)), 0);
        assert_string_equal(out, "784-512-10");
        assert_int_equal(nn_spec_canonical("cnn", 1, 28, 28, out, sizeof(out)),
                         0);
        assert_string_equal(out, "1x28x28-" NN_PRESET_CNN);
        assert_int_equal(
            nn_spec_canonical("c8k3-p2-10", 3, 32, 32, out, sizeof(out)), 0);
        assert_string_equal(out, "3x32x32-c8k3-p2-10");
        assert_int_equal(
            nn_spec_canonical("3x32x32-c8k3-p2-10", 0, 0, 0, out, sizeof(out)),
            0);
        assert_string_equal(out, "3x32x32-c8k3-p2-10");
        assert_int_equal(
            nn_spec_canonical("784-100-100-100-10", 0, 0, 0, out, sizeof(out)),
            0);
        assert_string_equal(out, "784-100-100-100-10");
        /* Too small an output buffer. */
        assert_int_equal(nn_spec_canonical("784-512-10", 0, 0, 0, out, 5),
                         NN_EINVAL);
}

static void test_spec_rejected(void **state)
{
        static const char *bad[] = {
            "",
            "-",
            "784",
            "784-",
            "784--10",
            "-784-10",
            "784-c8k3-10",     /* conv after a flat input */
            "1x28x28-c8k4-10", /* even kernel */
            "1x28x28-p3-10",   /* 28 not divisible by 3 */
            "1x28x28-c8k3",    /* last layer not dense */
            "1x28x28-c8k3-p2", /* last layer not dense */
            "784-1",           /* one class */
            "784-300",         /* more classes than uint8 labels */
            "784-512-10x",
            "784-512-0-10",
            "abc",
            "784-99999999-10",
            "784 -512-10",
            "1x28-10",
            "1x28x28x3-10",
            "784-512-10-c8k3-10", /* conv after dense */
            "3x28x28-p2-10",      /* pool first on planar 3 channels */
            ("784-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-2-"
             "2-2-2-2-2-2-2"), /* too many layers */
        };
        struct nn_model *m = (struct nn_model *)&m, *keep = m;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int rc = nn_model_create(bad[i], 0, 0, 0, 1, &m);
                if (rc != NN_EINVAL)
                        print_error("spec \"%s\" accepted (%d)\n", bad[i], rc);
                assert_int_equal(rc, NN_EINVAL);
        }
        /* Shape arguments: needed without an input token, must agree with
         * one, and must be all given or all zero. */
        assert_int_equal(nn_model_create("c8k3-10", 0, 0, 0, 1, &m), NN_EINVAL);
        assert_int_equal(nn_model_create("784-512-10", 3, 28, 28, 1, &m),
                         NN_EINVAL);
        assert_int_equal(nn_model_create("1x28x28-c8k3-10", 1, 28, 27, 1, &m),
                         NN_EINVAL);
        assert_int_equal(nn_model_create("784-512-10", 1, 0, 0, 1, &m),
                         NN_EINVAL);
        assert_int_equal(nn_model_create(NULL, 1, 28, 28, 1, &m), NN_EINVAL);
        assert_ptr_equal(m, keep);
}

static void test_nparams_and_roundtrip(void **state)
{
        struct nn_model *m = NULL, *m2 = NULL;

        assert_int_equal(nn_model_create("784-512-10", 1, 28, 28, 1, &m), 0);
        assert_int_equal(nn_model_nparams(m), 784 * 512 + 512 + 512 * 10 + 10);
        assert_int_equal(nn_model_input_size(m), 784);
        assert_int_equal(nn_model_classes(m), 10);
        nn_model_free(m);
        assert_int_equal(nn_model_create("cnn", 1, 28, 28, 1, &m), 0);
        /* the preset expands to a canonical spec that rebuilds the layout */
        char spec[NN_SPEC_MAX];
        strcpy(spec, nn_model_spec(m));
        assert_int_equal(nn_model_input_size(m), 784);
        assert_int_equal(nn_model_create(spec, 0, 0, 0, 1, &m2), 0);
        assert_string_equal(nn_model_spec(m2), spec);
        assert_int_equal(nn_model_nparams(m2), nn_model_nparams(m));
        nn_model_free(m2);
        nn_model_free(m);
        assert_int_equal(
            nn_model_create("1x28x28-c32k5-p2-c64k5-p2-256-10", 0, 0, 0, 1, &m),
            0);
        assert_int_equal(nn_model_nparams(m),
                         (32 * 25 + 32) + (64 * 25 * 32 + 64) +
                             (3136 * 256 + 256) + (256 * 10 + 10));
        nn_model_free(m);
        nn_model_free(NULL);
}

/* Central differences of the batch loss over every parameter of spec. */
static void check_model_grads(const char *spec, int batch)
{
        struct nn_model *m = NULL;
        uint64_t st = seed + 300;
        const float h = 1e-3f;

        assert_int_equal(nn_model_create(spec, 0, 0, 0, seed, &m), 0);
        int in = nn_model_input_size(m), classes = nn_model_classes(m);
        size_t np = nn_model_nparams(m);
        float *x = malloc(sizeof(float) * in * batch);
        uint8_t *y = malloc(batch);
        float *ana = malloc(sizeof(float) * np), *p = nn_model_params(m);
        float loss, lp, lm;
        int bad = 0, kinks = 0;
        double worst = 0;

        fill(x, (size_t)in * batch, &st, 0, 1);
        /* Biases start at 0; give them values so nothing is symmetric. */
        fill(p, np, &st, -0.5f, 0.5f);
        for (int i = 0; i < batch; i++)
                y[i] = (uint8_t)(nn__rand_u64(&st) % (uint64_t)classes);
        assert_int_equal(nn_model_train_batch(m, x, y, batch, &loss, NULL), 0);
        memcpy(ana, nn_model_grads(m), sizeof(float) * np);
        for (size_t i = 0; i < np; i++) {
                float save = p[i];
                p[i] = save + h;
                nn_model_train_batch(m, x, y, batch, &lp, NULL);
                p[i] = save - h;
                nn_model_train_batch(m, x, y, batch, &lm, NULL);
                p[i] = save;
                double num = ((double)lp - lm) / (2.0 * h);
                double tol = 2e-2 * fmax(fabs(num), fabs(ana[i])) + 1e-3;
                double d = fabs(num - ana[i]);
                /* One-sided quotients that disagree: the +-h step crossed a
                 * ReLU or max-pool kink, where the central difference means
                 * nothing. Skip it (counted; too many fail the test). */
                double fwd = ((double)lp - loss) / h,
                       bwd = (loss - (double)lm) / h;
                if (fabs(fwd - bwd) > tol) {
                        kinks++;
                        continue;
                }
                if (d / tol > worst)
                        worst = d / tol;
                if (!(d <= tol)) {
                        if (bad < 3)
                                print_error("%s: param %zu analytic %.6g "
                                            "numeric %.6g seed=%llu\n",
                                            spec, i, ana[i], num,
                                            (unsigned long long)seed);
                        bad++;
                }
        }
        printf("  %s: %zu params, %d outside the bound (worst err/bound "
               "%.3f), %d kinks skipped\n",
               spec, np, bad, worst, kinks);
        assert_true(kinks <= (int)(np / 4));
        /* A ReLU kink crossed by the +-h step may spoil a rare difference
         * quotient; a wrong backward spoils most of them. */
        assert_true(bad <= (int)(np / 100) + 1);
        free(x);
        free(y);
        free(ana);
        nn_model_free(m);
}

static void test_mlp_grads(void **state)
{
        check_model_grads("6-5-4-3", 4);
}

static void test_cnn_grads(void **state)
{
        check_model_grads("2x6x6-c3k3-p2-c4k3-5-3", 3);
}

/* Trains steps SGD-momentum steps on fixed synthetic data; returns losses. */
static void train_run(const char *spec, uint64_t s, int steps, float *losses,
                      float *params_out, size_t np_max)
{
        struct nn_model *m = NULL;
        struct nn_optim *o = NULL;
        struct nn_optim_config oc = {.kind = NN_OPTIM_SGD, .momentum = 0.9f};
        uint64_t st = 77;
        enum { B = 16 };

        assert_int_equal(nn_model_create(spec, 1, 8, 8, s, &m), 0);
        assert_int_equal(nn_optim_create(&oc, nn_model_nparams(m), &o), 0);
        int in = nn_model_input_size(m);
        float *x = malloc(sizeof(float) * in * B);
        uint8_t y[B];
        for (int i = 0; i < steps; i++) {
                fill(x, (size_t)in * B, &st, 0, 1);
                for (int j = 0; j < B; j++)
                        y[j] = (uint8_t)(nn__rand_u64(&st) % 3);
                assert_int_equal(
                    nn_model_train_batch(m, x, y, B, &losses[i], NULL), 0);
                nn_optim_step(o, nn_model_params(m), nn_model_grads(m), 0.05f);
        }
        assert_true(nn_model_nparams(m) <= np_max);
        memcpy(params_out, nn_model_params(m),
               sizeof(float) * nn_model_nparams(m));
        free(x);
        nn_optim_free(o);
        nn_model_free(m);
}

static void test_determinism(void **state)
{
        static const char *specs[] = {"64-32-3", "c4k3-p2-c4k3-8-3"};
        enum { N = 30, NP = 4096 };
        float l1[N], l2[N], l3[N];
        float *p1 = malloc(sizeof(float) * NP),
              *p2 = malloc(sizeof(float) * NP);
        float *p3 = malloc(sizeof(float) * NP);

        nn_threads_set(1);
        for (int i = 0; i < 2; i++) {
                train_run(specs[i], seed, N, l1, p1, NP);
                train_run(specs[i], seed, N, l2, p2, NP);
                train_run(specs[i], seed + 1, N, l3, p3, NP);
                assert_memory_equal(l1, l2, sizeof(l1));
                assert_memory_equal(p1, p2, sizeof(float) * 64);
                assert_memory_not_equal(l1, l3, sizeof(l1));
        }
        free(p1);
        free(p2);
        free(p3);
}

static void test_grads_overwritten_and_eval(void **state)
{
        struct nn_model *m = NULL;
        uint64_t st = seed + 5;
        enum { B = 37 };
        float x[B * 10], loss, loss2, eloss, acc;
        uint8_t y[B], pred[B];
        int correct, correct2;

        assert_int_equal(nn_model_create("10-7-4", 0, 0, 0, seed, &m), 0);
        size_t np = nn_model_nparams(m);
        float *g1 = malloc(sizeof(float) * np);
        fill(x, sizeof(x) / sizeof(x[0]), &st, -1, 1);
        for (int i = 0; i < B; i++)
                y[i] = (uint8_t)(i % 4);
        assert_int_equal(nn_model_train_batch(m, x, y, B, &loss, &correct), 0);
        memcpy(g1, nn_model_grads(m), sizeof(float) * np);
        assert_int_equal(nn_model_train_batch(m, x, y, B, &loss2, &correct2),
                         0);
        assert_memory_equal(g1, nn_model_grads(m), sizeof(float) * np);
        assert_true(loss == loss2 && correct == correct2);
        /* evaluate: same loss, accuracy = correct/B, agrees with predict */
        assert_int_equal(nn_model_evaluate(m, x, y, B, &eloss, &acc), 0);
        assert_float_equal(eloss, loss, 1e-6);
        assert_float_equal(acc, (float)correct / B, 1e-7);
        assert_int_equal(nn_model_predict(m, x, B, pred), 0);
        int hits = 0;
        for (int i = 0; i < B; i++)
                hits += pred[i] == y[i];
        assert_int_equal(hits, correct);
        /* a smaller batch after a bigger one, then a bigger one: grows */
        assert_int_equal(nn_model_train_batch(m, x, y, 5, &loss, NULL), 0);
        assert_int_equal(nn_model_reserve(m, 200), 0);
        /* bad labels and sizes are refused, grads untouched */
        memcpy(g1, nn_model_grads(m), sizeof(float) * np);
        y[3] = 4;
        assert_int_equal(nn_model_train_batch(m, x, y, B, &loss, NULL),
                         NN_EINVAL);
        assert_int_equal(nn_model_evaluate(m, x, y, B, &loss, &acc), NN_EINVAL);
        assert_int_equal(nn_model_train_batch(m, x, y, 0, &loss, NULL),
                         NN_EINVAL);
        assert_memory_equal(g1, nn_model_grads(m), sizeof(float) * np);
        free(g1);
        nn_model_free(m);
}

/* Blobs: class c has mean +-1.5 on coordinate c (sign alternating). */
static void blob_batch(float *x, uint8_t *y, int n, int dim, uint64_t *st)
{
        for (int i = 0; i < n; i++) {
                int c = (int)(nn__rand_u64(st) % 3);
                y[i] = (uint8_t)c;
                for (int j = 0; j < dim; j++)
                        x[i * dim + j] = nn__rand_uniform(st, -1, 1);
                x[i * dim + c] += 1.5f;
                x[i * dim + c + 3] -= 1.5f;
        }
}

static void learn(const char *spec, int in_c, int h, int w, int steps, float lr,
                  float max_loss, float min_acc)
{
        struct nn_model *m = NULL;
        struct nn_optim *o = NULL;
        struct nn_optim_config oc = {.kind = NN_OPTIM_SGD, .momentum = 0.9f};
        uint64_t st = seed + 9;
        enum { B = 32, NT = 600 };

        assert_int_equal(nn_model_create(spec, in_c, h, w, seed, &m), 0);
        assert_int_equal(nn_optim_create(&oc, nn_model_nparams(m), &o), 0);
        int dim = nn_model_input_size(m);
        float *x = malloc(sizeof(float) * dim * NT), first = 0, loss, acc;
        uint8_t y[NT];
        for (int i = 0; i < steps; i++) {
                blob_batch(x, y, B, dim, &st);
                assert_int_equal(nn_model_train_batch(m, x, y, B, &loss, NULL),
                                 0);
                if (i == 0)
                        first = loss;
                nn_optim_step(o, nn_model_params(m), nn_model_grads(m), lr);
        }
        blob_batch(x, y, NT, dim, &st);
        assert_int_equal(nn_model_evaluate(m, x, y, NT, &loss, &acc), 0);
        printf("  %s: loss %.4f -> held-out %.4f, accuracy %.3f\n", spec, first,
               loss, acc);
        assert_true(loss < max_loss);
        assert_true(acc > min_acc);
        free(x);
        nn_optim_free(o);
        nn_model_free(m);
}

static void test_learns(void **state)
{
        learn("20-32-3", 0, 0, 0, 200, 0.05f, 0.1f, 0.97f);
        learn("c4k3-p2-16-3", 1, 6, 6, 300, 0.05f, 0.25f, 0.92f);
}

/* ---- threads --------------------------------------------------------- */

/* Relative agreement of two vectors: |a-b| <= rel * max(|a|,|b|), with an
 * absolute floor of rel * 0.1 * max|a| for entries that nearly cancel: a
 * conv weight gradient sums thousands of terms (samples x positions), and a
 * float sum's rounding error scales with the sum of |terms|, not with the
 * result, so chunked and whole sums of a small result differ by more than
 * 1e-5 of it (worst over 100 seeds: 2.6x the bound with a 1e-2 floor, 0.73
 * with this one).  Returns the worst err/bound. */
static double compare_rel(const float *a, const float *b, size_t n, double rel)
{
        double amax = 0, worst = 0;

        for (size_t i = 0; i < n; i++)
                amax = fmax(amax, fabs(a[i]));
        for (size_t i = 0; i < n; i++) {
                double bound =
                    rel * fmax(fmax(fabs(a[i]), fabs(b[i])), 0.1 * amax);
                double d = fabs((double)a[i] - b[i]);
                double r = d == 0 ? 0 : bound > 0 ? d / bound : INFINITY;
                if (!(r <= worst))
                        worst = r;
        }
        return worst;
}

/* Gradient, loss and hits of one batch with n threads equal one thread's. */
static void check_threads_grads(const char *spec, int in_c, int h, int w,
                                int batch, int n)
{
        struct nn_model *m = NULL;
        uint64_t st = seed + 1000 + (uint64_t)batch;
        float loss1, loss_n;
        int hits1, hits_n;

        assert_int_equal(nn_model_create(spec, in_c, h, w, seed, &m), 0);
        int in = nn_model_input_size(m), classes = nn_model_classes(m);
        size_t np = nn_model_nparams(m);
        float *x = malloc(sizeof(float) * in * batch);
        uint8_t *y = malloc(batch);
        float *g1 = malloc(sizeof(float) * np);
        float *p = nn_model_params(m);

        fill(x, (size_t)in * batch, &st, 0, 1);
        for (size_t i = 0; i < np; i++) /* biases non-zero too */
                p[i] += nn__rand_uniform(&st, -0.05f, 0.05f);
        for (int i = 0; i < batch; i++)
                y[i] = (uint8_t)(nn__rand_u64(&st) % (uint64_t)classes);
        nn_threads_set(1);
        assert_int_equal(nn_model_train_batch(m, x, y, batch, &loss1, &hits1),
                         0);
        memcpy(g1, nn_model_grads(m), sizeof(float) * np);
        nn_threads_set(n);
        /* Twice: the second call must overwrite, not accumulate. */
        for (int k = 0; k < 2; k++) {
                assert_int_equal(
                    nn_model_train_batch(m, x, y, batch, &loss_n, &hits_n), 0);
                double wg = compare_rel(g1, nn_model_grads(m), np, 1e-5);
                if (k == 0)
                        printf("  %s batch %d threads %d: loss %.7g vs "
                               "%.7g, grads worst err/bound %.3f\n",
                               spec, batch, n, loss1, loss_n, wg);
                if (!(wg <= 1.0))
                        print_error("%s batch %d threads %d: grads differ "
                                    "(worst err/bound %.3g) seed=%llu\n",
                                    spec, batch, n, wg,
                                    (unsigned long long)seed);
                assert_true(wg <= 1.0);
                assert_true(fabs(loss_n - loss1) <= 1e-5 * fabs(loss1));
                assert_int_equal(hits_n, hits1);
        }
        nn_threads_set(1);
        free(x);
        free(y);
        free(g1);
        nn_model_free(m);
}

static void test_threads_grads(void **state)
{
        static const int batches[] = {100, 7, 1, 2};

        for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++)
                for (int n = 2; n <= 3; n++) {
                        check_threads_grads("784-64-10", 0, 0, 0, batches[b],
                                            n);
                        check_threads_grads("c8k3-p2-c8k3-p2-32-10", 1, 16, 16,
                                            batches[b], n);
                        /* one layer: the dense first layer is the last */
                        check_threads_grads("50-10", 0, 0, 0, batches[b], n);
                }
}

/* Same seed, same data, n threads: bit-identical losses and weights over
 * 20 SGD steps (batch 16: uneven chunks for 3 threads), for MLP and CNN,
 * and close to the one-thread run. */
static void test_threads_determinism(void **state)
{
        static const char *specs[] = {"64-32-3", "c4k3-p2-c4k3-8-3"};
        enum { N = 20, NP = 4096 };
        float l1[N], l2[N], ls[N];
        float *p1 = malloc(sizeof(float) * NP),
              *p2 = malloc(sizeof(float) * NP);
        float *ps = malloc(sizeof(float) * NP);

        for (int i = 0; i < 2; i++) {
                nn_threads_set(1);
                train_run(specs[i], seed, N, ls, ps, NP);
                for (int n = 2; n <= 3; n++) {
                        nn_threads_set(n);
                        train_run(specs[i], seed, N, l1, p1, NP);
                        train_run(specs[i], seed, N, l2, p2, NP);
                        assert_memory_equal(l1, l2, sizeof(l1));
                        assert_memory_equal(p1, p2, sizeof(float) * 64);
                        /* Rounding differences grow over 20 steps but stay
                         * far below the changes training makes. */
                        for (int s = 0; s < N; s++)
                                assert_float_equal(l1[s], ls[s],
                                                   1e-3 * fabs(ls[s]));
                }
        }
        nn_threads_set(1);
        free(p1);
        free(p2);
        free(ps);
}

/* One optimizer over spec's model, trained on a batch of 16 with n
 * threads for 3 steps, stepped by nn_model_step (split over the threads)
 * while a twin optimizer steps a copy of the parameters with
 * nn_optim_step_copy on the same gradients: parameters, state and the
 * copied slice must be the same bits.  Under quasi-global momentum only
 * the first step is exact (the step's size is summed per thread); later
 * steps agree to float rounding. */
static void check_threads_step(const char *spec, int in_c, int h, int w, int n,
                               const struct nn_optim_config *oc)
{
        enum { B = 16, STEPS = 3 };
        struct nn_model *m = NULL;
        struct nn_optim *o1 = NULL, *on = NULL;
        uint64_t st = seed + 77;

        assert_int_equal(nn_model_create(spec, in_c, h, w, seed, &m), 0);
        int in = nn_model_input_size(m), classes = nn_model_classes(m);
        size_t np = nn_model_nparams(m);
        /* per step a copied slice: from the middle of layer 0 to past a
         * thread's range; one past the end (clipped to 10); none */
        const size_t los[STEPS] = {np / 7, np - 10, 0},
                     counts[STEPS] = {np / 2, 1000, 0};
        size_t count = np / 2;
        float *x = malloc(sizeof(float) * in * B);
        uint8_t *y = malloc(B);
        float *p1 = malloc(sizeof(float) * np);
        float *c1 = malloc(sizeof(float) * count),
              *cn = malloc(sizeof(float) * count);

        assert_int_equal(nn_optim_create(oc, np, &o1), 0);
        assert_int_equal(nn_optim_create(oc, np, &on), 0);
        memcpy(p1, nn_model_params(m), sizeof(float) * np);
        nn_threads_set(n);
        for (int k = 0; k < STEPS; k++) {
                size_t lo = los[k],
                       n_copied = np - lo < counts[k] ? np - lo : counts[k];

                fill(x, (size_t)in * B, &st, 0, 1);
                for (int i = 0; i < B; i++)
                        y[i] = (uint8_t)(nn__rand_u64(&st) % (uint64_t)classes);
                assert_int_equal(nn_model_train_batch(m, x, y, B, NULL, NULL),
                                 0);
                nn_optim_step_copy(o1, p1, nn_model_grads(m), 0.05f, lo,
                                   counts[k], c1);
                nn_model_step(m, on, 0.05f, lo, counts[k], cn);
                assert_int_equal(nn_optim_steps(on), (uint64_t)k + 1);
                if (k == 0 || !oc->quasi_global) {
                        assert_memory_equal(p1, nn_model_params(m),
                                            sizeof(float) * np);
                        assert_memory_equal(
                            nn_optim_state(o1), nn_optim_state(on),
                            sizeof(float) * nn_optim_state_len(o1));
                        if (n_copied)
                                assert_memory_equal(c1, cn,
                                                    sizeof(float) * n_copied);
                } else {
                        assert_true(compare_rel(p1, nn_model_params(m), np,
                                                1e-5) <= 1.0);
                }
                /* the twin follows the model, so the next gradients are
                 * its gradients too */
                memcpy(p1, nn_model_params(m), sizeof(float) * np);
        }
        nn_threads_set(1);
        nn_optim_free(o1);
        nn_optim_free(on);
        free(x);
        free(y);
        free(p1);
        free(c1);
        free(cn);
        nn_model_free(m);
}

static void test_threads_step(void **state)
{
        const struct nn_optim_config ocs[] = {
            {.kind = NN_OPTIM_SGD, .lr = 0.05f},
            {.kind = NN_OPTIM_SGD,
             .lr = 0.05f,
             .momentum = 0.9f,
             .weight_decay = 1e-4f},
            {.kind = NN_OPTIM_SGD,
             .lr = 0.05f,
             .momentum = 0.9f,
             .quasi_global = 1,
             .quasi_global_bound = 2.0f},
            {.kind = NN_OPTIM_ADAM,
             .lr = 0.05f,
             .beta1 = 0.9f,
             .beta2 = 0.999f,
             .eps = 1e-8f},
        };

        for (size_t i = 0; i < sizeof(ocs) / sizeof(ocs[0]); i++)
                for (int n = 1; n <= 3; n++) {
                        check_threads_step("784-64-10", 0, 0, 0, n, &ocs[i]);
                        check_threads_step("c4k3-p2-c4k3-8-3", 1, 12, 12, n,
                                           &ocs[i]);
                }
}

/* evaluate and predict with n threads agree with one thread, across block
 * sizes (after reserve, and with workspaces grown by a bigger batch). */
static void test_threads_evaluate(void **state)
{
        static const char *specs[] = {"256-64-10", "c8k3-p2-c8k3-p2-32-10"};
        enum { NS = 257 };
        uint64_t st = seed + 77;
        uint8_t y[NS], pred1[NS], pred_n[NS];

        for (int i = 0; i < 2; i++) {
                struct nn_model *m = NULL;
                float loss1, acc1, loss_n, acc_n, tl;
                int th;

                assert_int_equal(nn_model_create(specs[i], 1, 16, 16, seed, &m),
                                 0);
                int in = nn_model_input_size(m);
                float *x = malloc(sizeof(float) * in * NS);
                fill(x, (size_t)in * NS, &st, 0, 1);
                for (int j = 0; j < NS; j++)
                        y[j] = (uint8_t)(nn__rand_u64(&st) % 10);
                nn_threads_set(1);
                assert_int_equal(nn_model_evaluate(m, x, y, NS, &loss1, &acc1),
                                 0);
                assert_int_equal(nn_model_predict(m, x, NS, pred1), 0);
                for (int n = 2; n <= 3; n++) {
                        nn_threads_set(n);
                        for (int r = 0; r < 3; r++) {
                                /* r = 0: as is; 1: reserve(30); 2: after a
                                 * train batch of 150 grew the workspaces */
                                if (r == 1)
                                        assert_int_equal(
                                            nn_model_reserve(m, 30), 0);
                                if (r == 2)
                                        assert_int_equal(
                                            nn_model_train_batch(m, x, y, 150,
                                                                 &tl, &th),
                                            0);
                                assert_int_equal(nn_model_evaluate(m, x, y, NS,
                                                                   &loss_n,
                                                                   &acc_n),
                                                 0);
                                assert_true(fabs(loss_n - loss1) <=
                                            1e-5 * fabs(loss1));
                                assert_true(acc_n == acc1);
                                memset(pred_n, 0xff, sizeof(pred_n));
                                assert_int_equal(
                                    nn_model_predict(m, x, NS, pred_n), 0);
                                assert_memory_equal(pred_n, pred1, NS);
                        }
                        /* bad labels refused, grads untouched */
                        float *g = nn_model_grads(m);
                        float keep = g[0];
                        y[5] = 10;
                        assert_int_equal(
                            nn_model_train_batch(m, x, y, 50, &tl, NULL),
                            NN_EINVAL);
                        assert_int_equal(
                            nn_model_evaluate(m, x, y, NS, &tl, &acc_n),
                            NN_EINVAL);
                        assert_true(g[0] == keep);
                        y[5] = 1;
                        nn_threads_set(1);
                        assert_int_equal(
                            nn_model_evaluate(m, x, y, NS, &loss1, &acc1), 0);
                }
                printf("  %s: evaluate loss %.6g acc %.3f, same with 2 and 3 "
                       "threads\n",
                       specs[i], loss1, acc1);
                free(x);
                nn_model_free(m);
        }
        nn_threads_set(1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_spec_canonical),
            cmocka_unit_test(test_spec_rejected),
            cmocka_unit_test(test_nparams_and_roundtrip),
            cmocka_unit_test(test_mlp_grads),
            cmocka_unit_test(test_cnn_grads),
            cmocka_unit_test(test_determinism),
            cmocka_unit_test(test_grads_overwritten_and_eval),
            cmocka_unit_test(test_learns),
            cmocka_unit_test(test_threads_grads),
            cmocka_unit_test(test_threads_determinism),
            cmocka_unit_test(test_threads_evaluate),
            cmocka_unit_test(test_threads_step),
        };
        int rc;

        seed = gn_test_seed("test_model", 20261129);
        nn_lib_init();
        rc = cmocka_run_group_tests(tests, NULL, NULL);
        nn_lib_finalize();
        return rc;
}
