/*
 * test_robust.c - robust merge decisions (gossip/robust.c): a table of
 * contributions (honest, 1e30, sign-flipped, N(0,1) noise, x10, NaN, Inf,
 * slightly off) judged against a trained-looking model after a warm-up of
 * honest distances; the median and the radius's band; centered clipping
 * lands exactly on the radius; liars never raise the radius; a peer is
 * suspect_model at 11 bad of its last 20 and not at 10; after a health
 * verdict exactly the peers merged since the snapshot are refused, for
 * exactly QUARANTINE_STEPS, uncounted in the suspect history. Seed from
 * GN_SEED.
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

#include "gossip/robust.h"

static uint64_t g_seed = 20261201;

#include "base/gn_rng.h"
#include "test_seed.h"

enum { N = 4096 };

/* Standard normal (Box-Muller) from the test generator. */
static float normal(uint64_t *s)
{
        double u1 =
            ((double)(gn_splitmix64(s) >> 11) + 1.0) / 9007199254740993.0;
        double u2 = (double)(gn_splitmix64(s) >> 11) / 9007199254740992.0;

        return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static float mine[N], theirs[N];

/* mine: weights of RMS about 0.05 (a trained small net's scale). */
static void make_mine(uint64_t *s)
{
        for (size_t i = 0; i < N; i++)
                mine[i] = 0.05f * normal(s);
}

/* A warm statistic: honest distances of 1% of RMS(mine). */
static void warm(struct gossip_robust_stat *st, uint64_t *s, float ref)
{
        struct gossip_robust_verdict v;

        memset(st, 0, sizeof(*st));
        for (int k = 0; k < GOSSIP_ROBUST_MEDIAN_LEN; k++) {
                for (size_t i = 0; i < N; i++)
                        theirs[i] = mine[i] + 0.01f * ref * normal(s);
                gossip_robust_judge(&gossip_robust_params_cfg, st, theirs, mine,
                                    ref, N, &v);
                assert_int_equal(v.reason, GOSSIP_ROBUST_ACCEPTED);
                gossip_robust_note(st, &v);
        }
}

enum attack { HONEST, HUGE, FLIP, NOISE, SCALE10, NANV, INFV, OFF5 };

static void make_theirs(int a, uint64_t *s, float ref)
{
        for (size_t i = 0; i < N; i++) {
                switch (a) {
                case HONEST:
                        theirs[i] = mine[i] + 0.012f * ref * normal(s);
                        break;
                case HUGE:
                        theirs[i] = 1e30f;
                        break;
                case FLIP:
                        theirs[i] = -mine[i];
                        break;
                case NOISE:
                        theirs[i] = normal(s);
                        break;
                case SCALE10:
                        theirs[i] = 10.0f * mine[i];
                        break;
                case OFF5: /* 5x the honest distance: past 3x the median */
                        theirs[i] = mine[i] + 0.05f * ref * normal(s);
                        break;
                default:
                        theirs[i] = mine[i];
                }
        }
        if (a == NANV)
                theirs[N / 3] = NAN;
        if (a == INFV)
                theirs[N / 2] = -INFINITY;
}

static void test_table(void **state)
{
        static const struct {
                int attack;
                int want;
                const char *what;
        } cases[] = {
            {HONEST, GOSSIP_ROBUST_ACCEPTED, "honest"},
            {HUGE, GOSSIP_ROBUST_FAR, "1e30"},
            {FLIP, GOSSIP_ROBUST_FAR, "sign-flipped"},
            {NOISE, GOSSIP_ROBUST_FAR, "N(0,1) noise"},
            {SCALE10, GOSSIP_ROBUST_FAR, "x10"},
            {NANV, GOSSIP_ROBUST_NONFINITE, "NaN"},
            {INFV, GOSSIP_ROBUST_NONFINITE, "Inf"},
            {OFF5, GOSSIP_ROBUST_CLIPPED, "5x honest distance"},
        };
        uint64_t s = g_seed;
        struct gossip_robust_stat st;
        struct gossip_robust_verdict v;
        float ref;

        (void)state;
        make_mine(&s);
        ref = gossip_robust_rms(mine, NULL, N);
        warm(&st, &s, ref);
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
                make_theirs(cases[k].attack, &s, ref);
                gossip_robust_judge(&gossip_robust_params_cfg, &st, theirs,
                                    mine, ref, N, &v);
                if (v.reason != cases[k].want)
                        fail_msg("%s: verdict %s, want %s (dist %g radius %g "
                                 "seed %" PRIu64 ")",
                                 cases[k].what,
                                 gossip_robust_reason_name(v.reason),
                                 gossip_robust_reason_name(cases[k].want),
                                 (double)v.dist, (double)v.radius, g_seed);
                if (v.reason == GOSSIP_ROBUST_CLIPPED) {
                        gossip_robust_clip(theirs, mine, N, v.scale);
                        assert_float_equal(gossip_robust_rms(theirs, mine, N),
                                           v.radius, 1e-3 * v.radius);
                }
        }
}

/* The radius stays inside [floor, cap] x RMS(mine) and is the cap until
 * WARMUP distances are in. */
static void test_radius_band(void **state)
{
        const struct gossip_robust_cfg *c = &gossip_robust_params_cfg;
        struct gossip_robust_stat st = {0};
        struct gossip_robust_verdict v = {.reason = GOSSIP_ROBUST_ACCEPTED};

        (void)state;
        assert_true(isnan(gossip_robust_median(&st)));
        assert_float_equal(gossip_robust_radius(c, &st, 2.0f), 1.0f, 1e-6);
        for (int k = 0; k < GOSSIP_ROBUST_WARMUP - 1; k++) {
                v.dist = 1e-6f;
                gossip_robust_note(&st, &v);
        }
        assert_float_equal(gossip_robust_radius(c, &st, 2.0f), 1.0f, 1e-6);
        gossip_robust_note(&st, &v);
        /* tiny distances: the floor */
        assert_float_equal(gossip_robust_radius(c, &st, 2.0f), 0.04f, 1e-6);
        memset(&st, 0, sizeof(st));
        for (int k = 0; k < 5; k++) {
                v.dist = (float)(k + 1) * 0.01f; /* median 0.03 */
                gossip_robust_note(&st, &v);
        }
        assert_float_equal(gossip_robust_median(&st), 0.03f, 1e-6);
        assert_float_equal(gossip_robust_radius(c, &st, 2.0f), 0.09f, 1e-6);
        /* huge distances: the cap */
        for (int k = 0; k < GOSSIP_ROBUST_MEDIAN_LEN; k++) {
                v.dist = 50.0f;
                gossip_robust_note(&st, &v);
        }
        assert_float_equal(gossip_robust_radius(c, &st, 2.0f), 1.0f, 1e-6);
        /* nothing to compare with: no bound */
        assert_true(isinf(gossip_robust_radius(c, &st, 0.0f)));
}

/* Half of the contributions from a liar (refused or clipped) never move
 * the radius: only unclipped distances enter the median. */
static void test_liar_cannot_raise_radius(void **state)
{
        uint64_t s = g_seed ^ 0x5eed;
        struct gossip_robust_stat st;
        struct gossip_robust_verdict v;
        float ref, r0;

        (void)state;
        make_mine(&s);
        ref = gossip_robust_rms(mine, NULL, N);
        warm(&st, &s, ref);
        r0 = gossip_robust_radius(&gossip_robust_params_cfg, &st, ref);
        for (int k = 0; k < 4 * GOSSIP_ROBUST_MEDIAN_LEN; k++) {
                make_theirs(k % 2 ? OFF5 : FLIP, &s, ref);
                gossip_robust_judge(&gossip_robust_params_cfg, &st, theirs,
                                    mine, ref, N, &v);
                assert_int_not_equal(v.reason, GOSSIP_ROBUST_ACCEPTED);
                gossip_robust_note(&st, &v);
        }
        assert_float_equal(
            gossip_robust_radius(&gossip_robust_params_cfg, &st, ref), r0,
            1e-9);
}

/* Suspect at more than 10 bad of the last 20; old verdicts fall out;
 * not-partner and window refusals are counted but not judged. */
static void test_peer_suspect(void **state)
{
        static struct gossip_robust_peers t;
        uint8_t k1[GOSSIP_KEY_BYTES] = {1}, k2[GOSSIP_KEY_BYTES] = {2};
        struct gossip_robust_peer *p;

        (void)state;
        memset(&t, 0, sizeof(t));
        p = gossip_robust_peer_get(&t, k1);
        assert_non_null(p);
        assert_ptr_equal(gossip_robust_peer_get(&t, k1), p);
        assert_null(gossip_robust_peer_find(&t, k2));
        for (int i = 0; i < 10; i++)
                gossip_robust_peer_note(p, GOSSIP_ROBUST_ACCEPTED);
        for (int i = 0; i < 10; i++)
                gossip_robust_peer_note(p, GOSSIP_ROBUST_CLIPPED);
        assert_int_equal(gossip_robust_peer_bad(p), 10);
        assert_false(gossip_robust_peer_suspect(p));
        for (int i = 0; i < 50; i++)
                gossip_robust_peer_note(p, GOSSIP_ROBUST_NOT_PARTNER);
        gossip_robust_peer_note(p, GOSSIP_ROBUST_WINDOW);
        assert_false(gossip_robust_peer_suspect(p));
        gossip_robust_peer_note(p, GOSSIP_ROBUST_FAR); /* 11 of 20 */
        assert_true(gossip_robust_peer_suspect(p));
        assert_int_equal(p->count[GOSSIP_ROBUST_NOT_PARTNER], 50);
        assert_int_equal(p->count[GOSSIP_ROBUST_CLIPPED], 10);
        for (int i = 0; i < 10; i++)
                gossip_robust_peer_note(p, GOSSIP_ROBUST_ACCEPTED);
        assert_false(gossip_robust_peer_suspect(p)); /* 10 of the last 20 */
        assert_int_equal(p->nhist, GOSSIP_ROBUST_HISTORY);
        /* the table fills and then refuses new keys */
        for (int i = 1; i < GOSSIP_ROBUST_PEERS; i++) {
                uint8_t k[GOSSIP_KEY_BYTES] = {0};

                k[1] = (uint8_t)i;
                assert_non_null(gossip_robust_peer_get(&t, k));
        }
        assert_null(gossip_robust_peer_get(&t, k2));
        assert_null(gossip_robust_reason_name(GOSSIP_ROBUST_REASONS));
        assert_string_equal(gossip_robust_reason_name(GOSSIP_ROBUST_WINDOW),
                            "out_of_window");
}

/* A sender's contribution of a step and slice is taken once: its copies
 * are refused while it is among the last GOSSIP_ROBUST_SEEN, and a copy
 * is never judged (a duplicate says who and when, not what). */
static void test_peer_once(void **state)
{
        struct gossip_robust_peer p;

        (void)state;
        memset(&p, 0, sizeof(p));
        assert_true(gossip_robust_peer_once(&p, 100, 0));
        assert_false(gossip_robust_peer_once(&p, 100, 0));     /* a copy */
        assert_true(gossip_robust_peer_once(&p, 100, 101762)); /* other part */
        assert_true(gossip_robust_peer_once(&p, 101, 0));      /* other step */
        for (int i = 0; i < 7; i++)
                assert_false(gossip_robust_peer_once(&p, 100, 0));
        /* GOSSIP_ROBUST_SEEN newer ones push it out */
        for (uint64_t s = 200; s < 200 + GOSSIP_ROBUST_SEEN; s++)
                assert_true(gossip_robust_peer_once(&p, s, 0));
        assert_true(gossip_robust_peer_once(&p, 100, 0));
        assert_false(
            gossip_robust_peer_once(&p, 200 + GOSSIP_ROBUST_SEEN - 1, 0));
        gossip_robust_peer_note(&p, GOSSIP_ROBUST_DUPLICATE);
        assert_int_equal(p.count[GOSSIP_ROBUST_DUPLICATE], 1);
        assert_int_equal(p.nhist, 0);
        assert_string_equal(gossip_robust_reason_name(GOSSIP_ROBUST_DUPLICATE),
                            "duplicate");
}

/* Gradients (mine may be NULL: judged against zero with a given scale). */
static void test_against_zero(void **state)
{
        uint64_t s = g_seed ^ 0x9ad;
        struct gossip_robust_stat st = {0};
        struct gossip_robust_verdict v;

        (void)state;
        for (size_t i = 0; i < N; i++)
                theirs[i] = 0.01f * normal(&s);
        gossip_robust_judge(&gossip_robust_grads_cfg, &st, theirs, NULL, 0.01f,
                            N, &v);
        assert_int_equal(v.reason, GOSSIP_ROBUST_ACCEPTED);
        for (size_t i = 0; i < N; i++)
                theirs[i] = normal(&s);
        gossip_robust_judge(&gossip_robust_grads_cfg, &st, theirs, NULL, 0.01f,
                            N, &v);
        assert_int_equal(v.reason, GOSSIP_ROBUST_FAR);
        gossip_robust_clip(theirs, NULL, N, 0.5f);
        assert_float_equal(gossip_robust_rms(theirs, NULL, N), 0.5f * v.dist,
                           1e-3);
}

/* The one-pass RMS pair against a long-double reference, for lengths on
 * and off the lane count (8): the lane sums change the rounding of the
 * double sum only, far below a float's; a NaN or Inf anywhere, in either
 * input and in the tail, gives NaN; 1e30 stays finite; n = 0 gives 0. */
static void test_rms_both(void **state)
{
        static const size_t lens[] = {1, 7, 8, 9, 15, 16, 17, 1001};
        float a[1001], b[1001], rb;
        uint64_t s = g_seed ^ 0x7e5;

        (void)state;
        for (size_t t = 0; t < sizeof(lens) / sizeof(lens[0]); t++) {
                size_t n = lens[t];
                long double sab = 0, sb = 0;

                for (size_t i = 0; i < n; i++) {
                        a[i] = (float)((double)(gn_splitmix64(&s) >> 11) /
                                           9007199254740992.0 * 4.0 -
                                       2.0);
                        b[i] = (float)((double)(gn_splitmix64(&s) >> 11) /
                                           9007199254740992.0 * 2.0 -
                                       1.0);
                        sab += ((long double)a[i] - b[i]) *
                               ((long double)a[i] - b[i]);
                        sb += (long double)b[i] * b[i];
                }
                float want_ab = (float)sqrtl(sab / n);
                float want_b = (float)sqrtl(sb / n);
                float got = gossip_robust_rms_both(a, b, n, &rb);

                assert_float_equal(got, want_ab, 1e-6f * want_ab);
                assert_float_equal(rb, want_b, 1e-6f * want_b);
                assert_float_equal(gossip_robust_rms(a, b, n), got, 0.0f);
                assert_float_equal(gossip_robust_rms(b, NULL, n), rb, 0.0f);
                /* a non-finite value at the end (the tail past the lanes
                 * when n is not a multiple of 8) */
                a[n - 1] = NAN;
                assert_true(isnan(gossip_robust_rms_both(a, b, n, &rb)));
                assert_false(isnan(rb));
                a[n - 1] = 0.0f;
                b[0] = INFINITY;
                assert_true(isnan(gossip_robust_rms_both(a, b, n, &rb)));
                assert_true(isnan(rb));
                b[0] = 1e30f;
                assert_true(isfinite(gossip_robust_rms_both(a, b, n, &rb)));
                assert_true(isfinite(rb) &&
                            rb >= 0.999f * 1e30f / sqrtf((float)n));
        }
        assert_float_equal(gossip_robust_rms_both(a, b, 0, &rb), 0.0f, 0.0f);
        assert_float_equal(rb, 0.0f, 0.0f);
}

/* A verdict at step 300 rolls back to a snapshot holding the merges up
 * to step 250: the liar (merged at 290) and an honest peer merged at 260
 * are refused from 300 to 300 + QUARANTINE_STEPS - 1 and taken again at
 * 300 + QUARANTINE_STEPS ("not yet" one step before); a peer last merged
 * at 250 (inside the snapshot) and one never merged are not refused. A
 * second verdict never shortens a quarantine. */
static void test_quarantine(void **state)
{
        struct gossip_robust_peers t;
        struct gossip_robust_peer *liar, *honest, *old, *idle;
        uint8_t k[4][GOSSIP_KEY_BYTES];
        const uint64_t end = 300 + GOSSIP_ROBUST_QUARANTINE_STEPS;

        (void)state;
        memset(&t, 0, sizeof(t));
        for (int i = 0; i < 4; i++)
                memset(k[i], 'a' + i, GOSSIP_KEY_BYTES);
        liar = gossip_robust_peer_get(&t, k[0]);
        honest = gossip_robust_peer_get(&t, k[1]);
        old = gossip_robust_peer_get(&t, k[2]);
        idle = gossip_robust_peer_get(&t, k[3]);
        for (uint64_t s = 10; s <= 290; s += 10)
                gossip_robust_peer_merged(liar, s);
        gossip_robust_peer_merged(honest, 260);
        gossip_robust_peer_merged(honest, 240); /* older: newest kept */
        gossip_robust_peer_merged(old, 250);
        assert_int_equal(gossip_robust_quarantine(
                             &t, 250, 300, GOSSIP_ROBUST_QUARANTINE_STEPS),
                         2);
        assert_true(gossip_robust_peer_refused(liar, 300));
        assert_true(gossip_robust_peer_refused(honest, end - 1));
        assert_false(gossip_robust_peer_refused(liar, end));
        assert_false(gossip_robust_peer_refused(old, 300));
        assert_false(gossip_robust_peer_refused(idle, 300));
        /* refusals are counted but are not verdicts on content */
        for (int i = 0; i < 30; i++)
                gossip_robust_peer_note(liar, GOSSIP_ROBUST_QUARANTINED);
        assert_int_equal(liar->count[GOSSIP_ROBUST_QUARANTINED], 30);
        assert_int_equal(liar->nhist, 0);
        assert_false(gossip_robust_peer_suspect(liar));
        assert_string_equal(
            gossip_robust_reason_name(GOSSIP_ROBUST_QUARANTINED),
            "quarantined");
        /* a later verdict with a short quarantine keeps the longer end */
        assert_int_equal(gossip_robust_quarantine(&t, 0, 301, 1), 3);
        assert_true(gossip_robust_peer_refused(liar, end - 1));
        assert_true(gossip_robust_peer_refused(old, 301));
        assert_false(gossip_robust_peer_refused(old, 302));
        assert_false(gossip_robust_peer_refused(idle, 301));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_table),
            cmocka_unit_test(test_radius_band),
            cmocka_unit_test(test_liar_cannot_raise_radius),
            cmocka_unit_test(test_peer_suspect),
            cmocka_unit_test(test_peer_once),
            cmocka_unit_test(test_against_zero),
            cmocka_unit_test(test_rms_both),
            cmocka_unit_test(test_quarantine),
        };

        g_seed = gn_test_seed("test_robust", g_seed);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
