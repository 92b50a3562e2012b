/*
 * test_merge.c - the gradient merge buffer and parameter averaging
 * (gossip/merge.c).
 *
 * Proves: the staleness bound is exact (S steps away accepted, S + 1
 * dropped, both directions, counted separately, no wrap-around at the ends
 * of uint64); the average is (own + sum received) / (1 + k) element-wise,
 * also for slices; rejected offers (shape, NaN/Inf, duplicate, full) change
 * nothing but their counter; apply empties the buffer; parameter averaging
 * with weights, and delayed averaging against our copy of the same step
 * (our progress since is kept); the every-K predicate. Seed from GN_SEED.
 */
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
#include "gossip/merge.h"

static uint64_t g_seed = 20261129;

#include "base/gn_rng.h"

static float rng_float(uint64_t *s) /* in [-1, 1) */
{
        return (float)((double)(gn_splitmix64(s) >> 11) * 0x1p-52 - 1.0);
}

static const uint8_t KA[GOSSIP_KEY_BYTES] = {1};
static const uint8_t KB[GOSSIP_KEY_BYTES] = {2};

static void test_init(void **state)
{
        struct gossip_merge m;

        (void)state;
        assert_int_equal(gossip_merge_init(&m, 0, 1), GOSSIP_EINVAL);
        assert_int_equal(gossip_merge_init(&m, 4, 1), 0);
        gossip_merge_free(&m);
        gossip_merge_free(&m); /* twice is fine */
}

static void test_staleness_bound(void **state)
{
        struct gossip_merge m;
        struct gossip_merge_stats st;
        float g[4] = {1, 1, 1, 1}, own[4] = {0};

        (void)state;
        assert_int_equal(gossip_merge_init(&m, 4, 3), 0);
        gossip_merge_set_step(&m, 10);
        assert_int_equal(gossip_merge_offer(&m, KA, 10, g, 4), 0);
        assert_int_equal(gossip_merge_offer(&m, KA, 7, g, 4), 0); /* S */
        assert_int_equal(gossip_merge_offer(&m, KA, 6, g, 4), GOSSIP_ESTALE);
        assert_int_equal(gossip_merge_offer(&m, KA, 13, g, 4), 0); /* +S */
        assert_int_equal(gossip_merge_offer(&m, KA, 14, g, 4), GOSSIP_ESTALE);
        assert_int_equal(gossip_merge_offer(&m, KA, UINT64_MAX, g, 4),
                         GOSSIP_ESTALE);
        assert_int_equal(gossip_merge_offer(&m, KA, 0, g, 4), GOSSIP_ESTALE);
        gossip_merge_stats_get(&m, &st);
        assert_int_equal(st.offers, 7);
        assert_int_equal(st.accepted, 3);
        assert_int_equal(st.late, 1);
        assert_int_equal(st.dropped_stale, 2);
        assert_int_equal(st.dropped_future, 2);
        assert_int_equal(gossip_merge_apply(&m, 11, own, 4), 3);
        assert_float_equal(own[0], 3.0f / 4.0f, 0.0f);
        gossip_merge_stats_get(&m, &st);
        assert_int_equal(st.merged, 3);
        assert_int_equal(st.applies, 1);
        /* apply moved the step: 7 is now S + 1 behind */
        assert_int_equal(gossip_merge_offer(&m, KA, 7, g, 4), GOSSIP_ESTALE);
        assert_int_equal(gossip_merge_offer(&m, KA, 8, g, 4), 0);
        /* near zero: no wrap-around */
        gossip_merge_set_step(&m, 1);
        assert_int_equal(gossip_merge_offer(&m, KB, 0, g, 4), 0);
        assert_int_equal(gossip_merge_offer(&m, KB, 4, g, 4), 0);
        assert_int_equal(gossip_merge_offer(&m, KB, 5, g, 4), GOSSIP_ESTALE);
        gossip_merge_free(&m);
}

static void test_average_values(void **state)
{
        struct gossip_merge m;
        float own[4] = {1, 2, 3, 4};
        const float g1[4] = {3, 4, 5, 6}, g2[4] = {5, 0, 1, 2};
        const float part[2] = {10, 20};

        (void)state;
        assert_int_equal(gossip_merge_init(&m, 4, 0), 0);
        gossip_merge_set_step(&m, 5);
        assert_int_equal(gossip_merge_offer(&m, KA, 5, g1, 4), 0);
        assert_int_equal(gossip_merge_offer(&m, KB, 5, g2, 4), 0);
        assert_int_equal(gossip_merge_apply(&m, 5, own, 4), 2);
        assert_float_equal(own[0], 3.0f, 1e-6);
        assert_float_equal(own[1], 2.0f, 1e-6);
        assert_float_equal(own[2], 3.0f, 1e-6);
        assert_float_equal(own[3], 4.0f, 1e-6);
        /* the buffer is empty again */
        assert_int_equal(gossip_merge_apply(&m, 5, own, 4), 0);
        assert_float_equal(own[0], 3.0f, 0.0f);
        /* a slice averages only its elements */
        assert_int_equal(gossip_merge_offer_range(&m, KA, 5, 1, part, 2), 0);
        assert_int_equal(gossip_merge_offer_range(&m, KB, 5, 3, part, 1), 0);
        assert_int_equal(gossip_merge_apply(&m, 5, own, 4), 2);
        assert_float_equal(own[0], 3.0f, 0.0f);
        assert_float_equal(own[1], 6.0f, 1e-6);
        assert_float_equal(own[2], 11.5f, 1e-6);
        assert_float_equal(own[3], 7.0f, 1e-6);
        assert_int_equal(gossip_merge_offer_range(&m, KA, 5, 3, part, 2),
                         GOSSIP_EMISMATCH);
        assert_int_equal(gossip_merge_offer_range(&m, KA, 5, 5, part, 1),
                         GOSSIP_EMISMATCH);
        assert_int_equal(gossip_merge_apply(&m, 5, own, 3), GOSSIP_EMISMATCH);
        gossip_merge_free(&m);
}

static void test_rejects_change_nothing(void **state)
{
        struct gossip_merge m;
        struct gossip_merge_stats st;
        float g[4] = {1, 2, 3, 4}, own[4] = {0, 0, 0, 0};

        (void)state;
        assert_int_equal(gossip_merge_init(&m, 4, 2), 0);
        assert_int_equal(gossip_merge_offer(&m, KA, 0, g, 3), GOSSIP_EMISMATCH);
        g[2] = NAN;
        assert_int_equal(gossip_merge_offer(&m, KA, 0, g, 4),
                         GOSSIP_ENONFINITE);
        g[2] = -INFINITY;
        assert_int_equal(gossip_merge_offer(&m, KA, 0, g, 4),
                         GOSSIP_ENONFINITE);
        g[2] = 3;
        assert_int_equal(gossip_merge_apply(&m, 0, own, 4), 0);
        for (int i = 0; i < 4; i++)
                assert_float_equal(own[i], 0.0f, 0.0f);
        /* duplicates: same sender and step once; other sender or step ok */
        assert_int_equal(gossip_merge_offer(&m, KA, 0, g, 4), 0);
        assert_int_equal(gossip_merge_offer(&m, KA, 0, g, 4), GOSSIP_EREPLAY);
        assert_int_equal(gossip_merge_offer(&m, KB, 0, g, 4), 0);
        assert_int_equal(gossip_merge_offer(&m, KA, 1, g, 4), 0);
        assert_int_equal(gossip_merge_apply(&m, 0, own, 4), 3);
        assert_float_equal(own[3], 3.0f, 1e-6);
        /* full */
        for (int i = 0; i < GOSSIP_MERGE_MAX_PENDING; i++) {
                uint8_t k[GOSSIP_KEY_BYTES] = {(uint8_t)(i + 10)};
                assert_int_equal(gossip_merge_offer(&m, k, 0, g, 4), 0);
        }
        assert_int_equal(gossip_merge_offer(&m, KA, 0, g, 4), GOSSIP_ETOOBIG);
        gossip_merge_stats_get(&m, &st);
        assert_int_equal(st.dropped_shape, 1);
        assert_int_equal(st.dropped_nonfinite, 2);
        assert_int_equal(st.dropped_dup, 1);
        assert_int_equal(st.dropped_full, 1);
        assert_int_equal(st.accepted, 3 + GOSSIP_MERGE_MAX_PENDING);
        assert_int_equal(st.offers, st.accepted + 5);
        assert_int_equal(gossip_merge_apply(&m, 0, own, 4),
                         GOSSIP_MERGE_MAX_PENDING);
        gossip_merge_free(&m);
}

/* Random sizes and senders against a double-precision reference. */
static void test_random_against_reference(void **state)
{
        uint64_t s = g_seed;
        const size_t n = 1000;
        struct gossip_merge m;
        float *own = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
        double *ref = malloc(n * sizeof(double));

        (void)state;
        assert_int_equal(gossip_merge_init(&m, n, 1), 0);
        for (int round = 0; round < 20; round++) {
                int k = (int)(gn_splitmix64(&s) % 5);
                for (size_t i = 0; i < n; i++) {
                        own[i] = rng_float(&s);
                        ref[i] = own[i];
                }
                for (int j = 0; j < k; j++) {
                        uint8_t key[GOSSIP_KEY_BYTES] = {(uint8_t)j};
                        for (size_t i = 0; i < n; i++) {
                                g[i] = 100.0f * rng_float(&s);
                                ref[i] += g[i];
                        }
                        assert_int_equal(
                            gossip_merge_offer(&m, key, round, g, n), 0);
                }
                assert_int_equal(gossip_merge_apply(&m, round, own, n), k);
                for (size_t i = 0; i < n; i++)
                        if (fabs(own[i] - ref[i] / (1 + k)) > 1e-4)
                                fail_msg(
                                    "round %d elem %zu: %g vs %g (seed %" PRIu64
                                    ")",
                                    round, i, own[i], ref[i] / (1 + k), g_seed);
        }
        gossip_merge_free(&m);
        free(own);
        free(g);
        free(ref);
}

static void test_average_params(void **state)
{
        float mine[3] = {1, 2, 3};
        const float theirs[3] = {3, 6, -3};
        float bad[3] = {0, INFINITY, 0};

        (void)state;
        assert_int_equal(gossip_merge_average_params(mine, theirs, 3, 0.5f), 0);
        assert_float_equal(mine[0], 2.0f, 0.0f);
        assert_float_equal(mine[1], 4.0f, 0.0f);
        assert_float_equal(mine[2], 0.0f, 0.0f);
        assert_int_equal(gossip_merge_average_params(mine, theirs, 3, 0.25f),
                         0);
        assert_float_equal(mine[0], 2.25f, 1e-6);
        assert_float_equal(mine[1], 4.5f, 1e-6);
        assert_float_equal(mine[2], -0.75f, 1e-6);
        assert_int_equal(gossip_merge_average_params(mine, theirs, 3, 0.0f), 0);
        assert_float_equal(mine[0], 2.25f, 0.0f);
        assert_int_equal(gossip_merge_average_params(mine, theirs, 3, 1.0f), 0);
        assert_memory_equal(mine, theirs, sizeof(mine));
        assert_int_equal(gossip_merge_average_params(mine, theirs, 3, -0.1f),
                         GOSSIP_EINVAL);
        assert_int_equal(gossip_merge_average_params(mine, theirs, 3, 1.1f),
                         GOSSIP_EINVAL);
        assert_int_equal(gossip_merge_average_params(mine, theirs, 3, NAN),
                         GOSSIP_EINVAL);
        bad[1] = NAN;
        assert_int_equal(gossip_merge_average_params(mine, bad, 3, 0.5f),
                         GOSSIP_ENONFINITE);
        assert_memory_equal(mine, theirs, sizeof(mine)); /* unchanged */
}

/* mine += w * (theirs - mine_then): exact on small values; with mine =
 * then + progress and theirs = then + e the result is then + progress +
 * w * e (our progress since the common step is kept, random data); bad
 * arguments change nothing. */
static void test_average_delta(void **state)
{
        enum { N = 257 };
        float mine[3] = {1, 2, 3};
        const float then[3] = {0, 1, 2};
        const float theirs[3] = {2, 1, 0};
        static float m[N], th[N], tr[N], prog[N], e[N];
        uint64_t s = g_seed;

        (void)state;
        assert_int_equal(
            gossip_merge_average_delta(mine, then, theirs, 3, 0.5f), 0);
        assert_float_equal(mine[0], 2.0f, 0.0f);
        assert_float_equal(mine[1], 2.0f, 0.0f);
        assert_float_equal(mine[2], 2.0f, 0.0f);
        assert_int_equal(
            gossip_merge_average_delta(mine, then, theirs, 3, 0.0f), 0);
        assert_float_equal(mine[0], 2.0f, 0.0f);
        assert_int_equal(
            gossip_merge_average_delta(mine, then, theirs, 3, 1.0f), 0);
        assert_float_equal(mine[0], 4.0f, 0.0f);
        assert_float_equal(mine[1], 2.0f, 0.0f);
        assert_float_equal(mine[2], 0.0f, 0.0f);
        assert_int_equal(
            gossip_merge_average_delta(mine, then, theirs, 3, 1.5f),
            GOSSIP_EINVAL);
        assert_int_equal(gossip_merge_average_delta(mine, then, theirs, 3, NAN),
                         GOSSIP_EINVAL);
        assert_int_equal(
            gossip_merge_average_delta(NULL, then, theirs, 3, 0.5f),
            GOSSIP_EINVAL);
        assert_int_equal(
            gossip_merge_average_delta(mine, NULL, theirs, 3, 0.5f),
            GOSSIP_EINVAL);
        assert_float_equal(mine[0], 4.0f, 0.0f); /* unchanged */
        assert_int_equal(gossip_merge_average_delta(NULL, NULL, NULL, 0, 0.5f),
                         0);
        for (int round = 0; round < 20; round++) {
                float w = (float)(gn_splitmix64(&s) % 11) / 10.0f;

                for (size_t i = 0; i < N; i++) {
                        th[i] = rng_float(&s);
                        prog[i] = 0.1f * rng_float(&s);
                        e[i] = 0.1f * rng_float(&s);
                        m[i] = th[i] + prog[i];
                        tr[i] = th[i] + e[i];
                }
                assert_int_equal(gossip_merge_average_delta(m, th, tr, N, w),
                                 0);
                for (size_t i = 0; i < N; i++)
                        if (fabsf(m[i] - (th[i] + prog[i] + w * e[i])) > 1e-6f)
                                fail_msg("round %d elem %zu: %g vs %g (seed "
                                         "%" PRIu64 ")",
                                         round, i, m[i],
                                         th[i] + prog[i] + w * e[i], g_seed);
        }
}

static void test_average_due(void **state)
{
        (void)state;
        assert_false(gossip_merge_average_due(0, 4));
        assert_false(gossip_merge_average_due(3, 4));
        assert_true(gossip_merge_average_due(4, 4));
        assert_false(gossip_merge_average_due(5, 4));
        assert_true(gossip_merge_average_due(8, 4));
        assert_false(gossip_merge_average_due(8, 0));
        assert_true(
            gossip_merge_average_due(GOSSIP_MERGE_AVERAGE_EVERY_DEFAULT,
                                     GOSSIP_MERGE_AVERAGE_EVERY_DEFAULT));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_init),
            cmocka_unit_test(test_staleness_bound),
            cmocka_unit_test(test_average_values),
            cmocka_unit_test(test_rejects_change_nothing),
            cmocka_unit_test(test_random_against_reference),
            cmocka_unit_test(test_average_params),
            cmocka_unit_test(test_average_delta),
            cmocka_unit_test(test_average_due),
        };

        g_seed = gn_test_seed("test_merge", g_seed);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
