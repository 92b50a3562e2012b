/*
 * test_health.c - model health's absolute criteria (nn/health.c), in
 * virtual time: a run is a sequence of evaluations (every EVAL steps) and
 * norm checks (every 10 steps), fed the figures a run would show.
 *
 * - a clean run (the figures of a 3-node loopback run, with noise) never
 *   trips a criterion;
 * - worse than chance: the verdict comes at the 3rd evaluation in a row
 *   above ln(classes), not at the 2nd; a healthy one between restarts the
 *   count; a model that never beat chance (skewed data) is not judged;
 * - norm: the bound is 2 x the largest RMS of a healthy evaluation (the
 *   starting model's before any), learned from healthy evaluations only;
 *   weights growing 5 % per 10 steps are caught at the 15th check
 *   (1.05^15 = 2.08 > 2 > 1.05^14 = 1.98);
 * - accuracy: a drop of more than 10 points below the best is a verdict
 *   after 3 healthy evaluations, not before, and not at exactly 10;
 * - a slow divergence (weights x1.25, accuracy -4 points, loss x2 per
 *   evaluation) is named at its 3rd evaluation (accuracy, -12 points),
 *   not at its 2nd, whereas the relative test it replaces follows it.
 * - a model that keeps failing after its rollbacks is not pinned: the 3rd
 *   test-set verdict in a row restarts the references from it instead;
 * - skewed data (a class under half its even share) turns the test-set
 *   criteria off: swings of 30 points and losses above chance pass, the
 *   norm is still judged.
 * Seed from GN_SEED (printed).
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

#include "nn/health.h"

static uint64_t g_seed = 20261205;

#include "base/gn_rng.h"
#include "test_seed.h"

/* Uniform in [-1, 1). */
static float noise(uint64_t *s)
{
        return (float)((double)(gn_splitmix64(s) >> 11) / 4503599627370496.0 -
                       1.0);
}

static int judge(struct nn_health *h, float loss, float acc, float rms)
{
        struct nn_health_verdict v;

        return nn_health_judge_eval(h, loss, acc, rms, &v);
}

static int judge_norm(struct nn_health *h, float rms)
{
        struct nn_health_verdict v;

        return nn_health_judge_norm(h, rms, &v);
}

/* A clean run of 1500 steps, evaluated every 50 (the figures of
 * tests/node/hostile_bench.py's clean runs at n = 3: RMS 0.0506 at start
 * to 0.0578, accuracy 74 % to 87 %, test loss 0.73 to 0.37), each figure
 * with noise (accuracy +-3 points, loss +-10 %, RMS +-2 %), 20 seeds: no
 * verdict, at evaluations or norm checks. */
static void test_clean_never(void **state)
{
        (void)state;
        for (int r = 0; r < 20; r++) {
                uint64_t s = g_seed + (uint64_t)r;
                struct nn_health h;

                nn_health_init(&h, 10, 0.0506f, 1);
                for (int step = 10; step <= 1500; step += 10) {
                        float x = (float)step / 1500.0f;
                        float rms = (0.0506f + 0.0072f * sqrtf(x)) *
                                    (1.0f + 0.02f * noise(&s));
                        float acc = 74.0f + 13.0f * sqrtf(x) + 3.0f * noise(&s);
                        float loss = (0.73f - 0.36f * sqrtf(x)) *
                                     (1.0f + 0.1f * noise(&s));

                        assert_int_equal(judge_norm(&h, rms), NN_HEALTH_OK);
                        if (step % 50 == 0 &&
                            judge(&h, loss, acc, rms) != NN_HEALTH_OK)
                                fail_msg("seed %llu: verdict at step %d "
                                         "(loss %g acc %g rms %g)",
                                         (unsigned long long)s, step,
                                         (double)loss, (double)acc,
                                         (double)rms);
                }
                assert_true(h.healthy == 30);
        }
}

static void test_chance(void **state)
{
        struct nn_health h;
        struct nn_health_verdict v;
        float ln10 = logf(10.0f);

        (void)state;
        /* skewed data: the full test set scores above chance from the
         * start (5.8 at step 100 of a classes:2 run); never judged */
        nn_health_init(&h, 10, 0.05f, 1);
        for (int k = 0; k < 10; k++)
                assert_int_equal(judge(&h, 5.8f, 30.0f, 0.05f), NN_HEALTH_OK);
        /* once below chance, three in a row above it is the verdict */
        nn_health_init(&h, 10, 0.05f, 1);
        assert_int_equal(judge(&h, 0.7f, 75.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(judge(&h, ln10 * 1.01f, 75.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(judge(&h, 3.0f, 75.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(nn_health_judge_eval(&h, 4.0f, 75.0f, 0.05f, &v),
                         NN_HEALTH_CHANCE);
        assert_int_equal(v.reason, NN_HEALTH_CHANCE);
        assert_true(v.value == 4.0f);
        assert_true(fabsf(v.limit - ln10) < 1e-6f);
        /* the count restarts after a verdict and after a healthy one;
         * exactly at chance is not worse than chance */
        assert_int_equal(judge(&h, 3.0f, 75.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(judge(&h, 3.0f, 75.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(judge(&h, ln10, 75.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(judge(&h, 3.0f, 75.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(judge(&h, 3.0f, 75.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(judge(&h, 3.0f, 75.0f, 0.05f), NN_HEALTH_CHANCE);
        /* two classes: chance is ln 2 */
        nn_health_init(&h, 2, 0.05f, 1);
        assert_true(fabsf(h.chance - logf(2.0f)) < 1e-6f);
}

static void test_norm(void **state)
{
        struct nn_health h;
        struct nn_health_verdict v;
        float rms = 0.05f;
        int k;

        (void)state;
        nn_health_init(&h, 10, 0.05f, 1);
        /* no reference before a healthy evaluation: a learning model's
         * weights outgrow the starting ones */
        assert_true(isinf(nn_health_norm_bound(&h)));
        assert_int_equal(judge_norm(&h, 0.5f), NN_HEALTH_OK);
        assert_int_equal(judge_norm(&h, NAN), NN_HEALTH_NONFINITE);
        /* the floor, once set: 2 x the starting model's RMS */
        assert_int_equal(judge(&h, 0.5f, 80.0f, 0.03f), NN_HEALTH_OK);
        assert_true(nn_health_norm_bound(&h) == 0.1f);
        assert_int_equal(judge_norm(&h, 0.1f), NN_HEALTH_OK);
        assert_int_equal(nn_health_judge_norm(&h, 0.1001f, &v), NN_HEALTH_NORM);
        assert_true(v.value == 0.1001f && v.limit == 0.1f);
        /* learned from a healthy evaluation */
        assert_int_equal(judge(&h, 0.5f, 80.0f, 0.07f), NN_HEALTH_OK);
        assert_true(fabsf(nn_health_norm_bound(&h) - 0.14f) < 1e-6f);
        /* ... not from one worse than chance (not yet a verdict) */
        assert_int_equal(judge(&h, 3.0f, 80.0f, 0.09f), NN_HEALTH_OK);
        assert_true(fabsf(nn_health_norm_bound(&h) - 0.14f) < 1e-6f);
        /* the norm is judged at an evaluation too */
        assert_int_equal(judge(&h, 0.5f, 80.0f, 0.15f), NN_HEALTH_NORM);
        /* weights growing 5 % per 10-step check from a verified 0.05 */
        nn_health_init(&h, 10, 0.05f, 1);
        assert_int_equal(judge(&h, 0.5f, 80.0f, rms), NN_HEALTH_OK);
        for (k = 1; k < 100; k++) {
                rms *= 1.05f;
                if (judge_norm(&h, rms) != NN_HEALTH_OK)
                        break;
        }
        assert_int_equal(k, 15);
}

/* A node learning fast, evaluated rarely (what rolled healthy nodes back
 * to their starting model every 20 steps: alone at --lr 0.5 the RMS went
 * from 0.0506 to 0.131 in 20 steps, evaluations every 1000): no verdict
 * before the first evaluation. After it, a model that keeps outgrowing
 * the bound with its peers refused (rolled back each time) is judged by
 * its own training on the third verdict in a row: the reference restarts,
 * and a healthy evaluation between verdicts restarts the count. */
static void test_norm_learning(void **state)
{
        struct nn_health h;
        struct nn_health_verdict v;

        (void)state;
        nn_health_init(&h, 10, 0.0506f, 1);
        for (int step = 10; step < 1000; step += 10)
                assert_int_equal(
                    judge_norm(&h, 0.0506f * (step < 20 ? 2.6f : 3.0f)),
                    NN_HEALTH_OK);
        assert_int_equal(judge(&h, 0.45f, 84.0f, 0.16f), NN_HEALTH_OK);
        assert_true(fabsf(nn_health_norm_bound(&h) - 0.32f) < 1e-6f);
        assert_int_equal(judge_norm(&h, 0.33f), NN_HEALTH_NORM);
        assert_int_equal(judge_norm(&h, 0.34f), NN_HEALTH_NORM);
        assert_int_equal(h.restarts, 0);
        assert_int_equal(nn_health_judge_norm(&h, 0.35f, &v), NN_HEALTH_OK);
        assert_int_equal(h.restarts, 1);
        assert_int_equal(h.restart_reason, NN_HEALTH_NORM);
        assert_true(h.restart_value == 0.35f &&
                    fabsf(h.restart_limit - 0.32f) < 1e-6f);
        assert_true(fabsf(nn_health_norm_bound(&h) - 0.7f) < 1e-6f);
        /* a healthy evaluation between verdicts: no restart */
        assert_int_equal(judge_norm(&h, 0.71f), NN_HEALTH_NORM);
        assert_int_equal(judge_norm(&h, 0.72f), NN_HEALTH_NORM);
        assert_int_equal(judge(&h, 0.45f, 84.0f, 0.35f), NN_HEALTH_OK);
        assert_int_equal(judge_norm(&h, 0.73f), NN_HEALTH_NORM);
        assert_int_equal(judge_norm(&h, 0.74f), NN_HEALTH_NORM);
        assert_int_equal(h.restarts, 1);
        /* at an evaluation the third in a row restarts too */
        assert_int_equal(judge(&h, 0.45f, 84.0f, 0.75f), NN_HEALTH_OK);
        assert_int_equal(h.restarts, 2);
        assert_true(fabsf(nn_health_norm_bound(&h) - 1.5f) < 1e-6f);
}

static void test_accuracy(void **state)
{
        struct nn_health h;
        struct nn_health_verdict v;

        (void)state;
        nn_health_init(&h, 10, 0.05f, 1);
        /* warm-up: a drop before 3 healthy evaluations is no verdict */
        assert_int_equal(judge(&h, 0.6f, 80.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(judge(&h, 0.9f, 50.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(judge(&h, 0.5f, 84.0f, 0.05f), NN_HEALTH_OK);
        /* 3 healthy now, best 84: 74 is not below the margin, 73.9 is */
        assert_int_equal(judge(&h, 0.6f, 74.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(nn_health_judge_eval(&h, 0.6f, 73.9f, 0.05f, &v),
                         NN_HEALTH_ACCURACY);
        assert_true(v.value == 73.9f && v.limit == 74.0f);
        /* a verdict teaches nothing: the best stays 84 */
        assert_true(h.best_acc == 84.0f);
        assert_int_equal(h.healthy, 4);
}

/* The slow divergence of issue 32: from a verified model (RMS 0.05,
 * 85 %, loss 0.4) every evaluation sees weights x1.25, accuracy -4 points
 * and loss x2. A relative rule (10 x the running median of recent losses,
 * the trainer's) never fires: each loss is 2 x the last. Here: accuracy
 * at the 3rd (85 - 12 < 75), not the 2nd (85 - 8 >= 75). */
static void test_slow_divergence(void **state)
{
        struct nn_health h;
        struct nn_health_verdict v;
        float rms = 0.05f, acc = 85.0f, loss = 0.4f;
        int k, rc = NN_HEALTH_OK;

        (void)state;
        nn_health_init(&h, 10, 0.05f, 1);
        for (k = 0; k < 3; k++)
                assert_int_equal(judge(&h, loss, acc, rms), NN_HEALTH_OK);
        for (k = 1; k < 20; k++) {
                rms *= 1.25f;
                acc -= 4.0f;
                loss *= 2.0f;
                rc = nn_health_judge_eval(&h, loss, acc, rms, &v);
                if (rc != NN_HEALTH_OK)
                        break;
        }
        assert_int_equal(k, 3);
        assert_int_equal(rc, NN_HEALTH_ACCURACY);
        assert_string_equal(nn_health_reason_name(rc), "accuracy drop");
        assert_string_equal(nn_health_reason_label(NN_HEALTH_NORM), "norm");
        assert_null(nn_health_reason_name(NN_HEALTH_REASONS));
}

static void test_restart(void **state)
{
        struct nn_health h;
        int k;

        (void)state;
        nn_health_init(&h, 10, 0.05f, 1);
        for (k = 0; k < 3; k++)
                assert_int_equal(judge(&h, 0.5f, 85.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(judge(&h, 0.7f, 70.0f, 0.05f), NN_HEALTH_ACCURACY);
        assert_int_equal(judge(&h, 0.7f, 70.0f, 0.05f), NN_HEALTH_ACCURACY);
        assert_int_equal(h.restarts, 0);
        assert_int_equal(judge(&h, 0.7f, 70.0f, 0.05f), NN_HEALTH_OK);
        assert_int_equal(h.restarts, 1);
        assert_true(h.best_acc == 70.0f);
        /* warm-up again: a drop right after is no verdict */
        assert_int_equal(judge(&h, 0.9f, 55.0f, 0.05f), NN_HEALTH_OK);
        /* a healthy evaluation between verdicts restarts the count */
        nn_health_init(&h, 10, 0.05f, 1);
        for (k = 0; k < 3; k++)
                assert_int_equal(judge(&h, 0.5f, 85.0f, 0.05f), NN_HEALTH_OK);
        for (k = 0; k < 5; k++) {
                assert_int_equal(judge(&h, 0.7f, 70.0f, 0.05f),
                                 NN_HEALTH_ACCURACY);
                assert_int_equal(judge(&h, 0.5f, 85.0f, 0.05f), NN_HEALTH_OK);
        }
        assert_int_equal(h.restarts, 0);
}

static void test_skewed(void **state)
{
        uint8_t y[1000];
        struct nn_health h;

        (void)state;
        for (int i = 0; i < 1000; i++)
                y[i] = (uint8_t)(i % 10);
        assert_int_equal(nn_health_balanced(y, 1000, 10), 1);
        /* class 9 at exactly half its share (50 of 100) still balanced */
        for (int i = 0; i < 50; i++)
                y[10 * i + 9] = 0;
        assert_int_equal(nn_health_balanced(y, 1000, 10), 1);
        y[9 * 10 + 9 + 500] = 0; /* one more taken: 49 */
        assert_int_equal(nn_health_balanced(y, 1000, 10), 0);
        assert_int_equal(nn_health_balanced(y, 0, 10), 0);
        /* classes:2 data: every swing passes, the norm does not */
        nn_health_init(&h, 10, 0.05f, 0);
        assert_int_equal(judge(&h, 0.9f, 60.0f, 0.05f), NN_HEALTH_OK);
        for (int k = 0; k < 10; k++)
                assert_int_equal(
                    judge(&h, 6.0f, 20.0f + (float)(k % 2) * 40, 0.05f),
                    NN_HEALTH_OK);
        assert_int_equal(judge(&h, 0.5f, 80.0f, 0.11f), NN_HEALTH_NORM);
        assert_int_equal(h.restarts, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_clean_never),
            cmocka_unit_test(test_chance),
            cmocka_unit_test(test_norm),
            cmocka_unit_test(test_norm_learning),
            cmocka_unit_test(test_accuracy),
            cmocka_unit_test(test_slow_divergence),
            cmocka_unit_test(test_restart),
            cmocka_unit_test(test_skewed),
        };

        g_seed = gn_test_seed("test_health", g_seed);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
