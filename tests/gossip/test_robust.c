/*
 * test_robust.c - robust merge decisions (gossip/robust.c): a table of
 * contributions (honest, 1e30, sign-flipped, N(0,1) noise, x10, NaN, Inf,
 * slightly off) judged against a trained-looking model after a warm-up of
 * honest distances; the median and the radius's band; centered clipping
 * lands exactly on the radius; liars never raise the radius; a peer is
 * suspect_model at 11 bad of its last 20 and not at 10 (clipped and
 * swayed are not bad); a peer's sway: near 1 for moves that point anywhere,
 * growing for a push one way, held at the bound (what the push adds up
 * to shrinks) while a turn that undoes it is taken whole, on the sampled
 * coordinates it says; after a health
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

/* Uniform in [0, 1) from the test generator. */
static float uniform(uint64_t *s)
{
        return (float)((double)(gn_splitmix64(s) >> 11) / 9007199254740992.0);
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
        /* clipped and swayed are judged but not evidence: nothing bad */
        for (int i = 0; i < 10; i++)
                gossip_robust_peer_note(p, GOSSIP_ROBUST_CLIPPED);
        for (int i = 0; i < 10; i++)
                gossip_robust_peer_note(p, GOSSIP_ROBUST_SWAYED);
        assert_int_equal(gossip_robust_peer_bad(p), 0);
        assert_int_equal(p->nhist, GOSSIP_ROBUST_HISTORY);
        for (int i = 0; i < 10; i++)
                gossip_robust_peer_note(p, GOSSIP_ROBUST_ACCEPTED);
        for (int i = 0; i < 10; i++)
                gossip_robust_peer_note(p, GOSSIP_ROBUST_FAR);
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
        assert_int_equal(p->count[GOSSIP_ROBUST_SWAYED], 10);
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
        assert_string_equal(gossip_robust_reason_name(GOSSIP_ROBUST_SWAYED),
                            "swayed");
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

/* ---- a peer's sway: turns over a model of SW_P parts -------------------- */

enum { SW_P = 4, SW_PART = 4096, SW_N = SW_P * SW_PART };

struct sway_sim {
        struct gossip_robust_sway s;
        float mine[SW_N], theirs[SW_N];
        size_t stride;
};

static void sway_sim_init(struct sway_sim *m)
{
        memset(m, 0, sizeof(*m));
        m->s.a = calloc(GOSSIP_ROBUST_SWAY_SAMPLES, sizeof(float));
        assert_non_null(m->s.a);
        m->stride = gossip_robust_sway_stride(SW_N);
}

/* One turn of the sender on part `part`: theirs = mine + push x u + noise
 * (u = +1 on every coordinate, noise N(0,1)); scaled by the bound when
 * bound > 0. Returns alpha; *along what the merge moved along u, per
 * coordinate (alpha x the part's mean of theirs - mine). */
static float sway_turn(struct sway_sim *m, uint64_t *rng, int part, float push,
                       float bound, double *along)
{
        size_t lo = (size_t)part * SW_PART;
        struct gossip_robust_sway_turn t;
        double sum = 0.0;
        float alpha = 1.0f;

        for (size_t i = 0; i < SW_PART; i++) {
                m->mine[lo + i] = normal(rng);
                m->theirs[lo + i] = m->mine[lo + i] + push + normal(rng);
                sum += (double)m->theirs[lo + i] - m->mine[lo + i];
        }
        gossip_robust_sway_measure(&m->s, m->stride, m->theirs + lo,
                                   m->mine + lo, NULL, lo, SW_PART, &t);
        if (bound > 0.0f)
                alpha = gossip_robust_sway_scale(&m->s, &t, bound);
        assert_true(alpha >= 0.0f && alpha <= 1.0f);
        gossip_robust_sway_add(&m->s, m->stride, m->theirs + lo, m->mine + lo,
                               lo, SW_PART, &t, alpha);
        *along += alpha * sum / SW_PART;
        return alpha;
}

/* Moves that point anywhere (an honest replica's disagreement, fresh each
 * turn) keep c near 1 and are never scaled; a push one way as large as
 * the noise (the turn still only sqrt(2) x an honest one: inside any
 * radius) grows c past the bound
 * unbounded, and with the bound c never passes it and what the push adds
 * up to over the run is cut (by a third at bound 3). */
static void test_sway_bound(void **state)
{
        static struct sway_sim honest, free_liar, held_liar;
        uint64_t rng = g_seed;
        double h_along = 0, f_along = 0, b_along = 0;
        const float bound = GOSSIP_ROBUST_SWAY_BOUND;
        int scaled = 0, turns = 600;

        (void)state;
        sway_sim_init(&honest);
        sway_sim_init(&free_liar);
        sway_sim_init(&held_liar);
        for (int k = 0; k < turns; k++) {
                int part = k % SW_P;

                assert_float_equal(
                    sway_turn(&honest, &rng, part, 0.0f, bound, &h_along), 1.0f,
                    0.0f);
                sway_turn(&free_liar, &rng, part, 1.0f, 0.0f, &f_along);
                scaled += sway_turn(&held_liar, &rng, part, 1.0f, bound,
                                    &b_along) < 1.0f;
                assert_true(gossip_robust_sway_consistency(&held_liar.s) <=
                            bound * 1.001f);
                if (k >= 100)
                        assert_true(gossip_robust_sway_consistency(&honest.s) <
                                    1.5f);
        }
        print_message("sway after %d turns: honest %.3f, liar %.2f free, %.2f "
                      "bounded (%d turns scaled); push along u %.1f free, "
                      "%.1f bounded, honest %.2f\n",
                      turns, gossip_robust_sway_consistency(&honest.s),
                      gossip_robust_sway_consistency(&free_liar.s),
                      gossip_robust_sway_consistency(&held_liar.s), scaled,
                      f_along, b_along, h_along);
        assert_true(gossip_robust_sway_consistency(&free_liar.s) >
                    1.5f * bound);
        assert_true(scaled > turns / 2);
        /* a push as large as the noise keeps about 2/3 of what it added
         * up to free (measured 0.50 at bound 2, 0.62 at 3, 0.71 at 4) */
        assert_true(b_along < 0.75 * f_along);
        assert_true(fabs(h_along) < 0.1 * f_along);
        assert_int_equal(honest.s.turns, turns);
        assert_int_equal(honest.s.scaled, 0);
        assert_int_equal(held_liar.s.scaled, scaled);
        free(honest.s.a);
        free(free_liar.s.a);
        free(held_liar.s.a);
}

/* At the bound, a turn that undoes the peer's own push is taken whole and
 * one that adds to it is cut; a zero move is taken. */
static void test_sway_direction(void **state)
{
        static struct sway_sim m;
        uint64_t rng = g_seed ^ 7;
        double along = 0;
        const float bound = GOSSIP_ROBUST_SWAY_BOUND;
        struct gossip_robust_sway_turn t;

        (void)state;
        sway_sim_init(&m);
        for (int k = 0; k < 200; k++)
                sway_turn(&m, &rng, k % SW_P, 1.0f, bound, &along);
        assert_true(gossip_robust_sway_consistency(&m.s) > 0.9f * bound);
        for (size_t i = 0; i < SW_PART; i++) {
                m.mine[i] = 0.0f;
                m.theirs[i] = -1.0f; /* against the push */
        }
        gossip_robust_sway_measure(&m.s, m.stride, m.theirs, m.mine, NULL, 0,
                                   SW_PART, &t);
        assert_true(t.ad < 0.0);
        assert_float_equal(gossip_robust_sway_scale(&m.s, &t, bound), 1.0f,
                           0.0f);
        for (size_t i = 0; i < SW_PART; i++)
                m.theirs[i] = 1.0f; /* with it */
        gossip_robust_sway_measure(&m.s, m.stride, m.theirs, m.mine, NULL, 0,
                                   SW_PART, &t);
        assert_true(gossip_robust_sway_scale(&m.s, &t, bound) < 1.0f);
        memset(&t, 0, sizeof(t));
        assert_float_equal(gossip_robust_sway_scale(&m.s, &t, bound), 1.0f,
                           0.0f);
        free(m.s.a);
}

/* The sample: every stride-th coordinate of the model, wherever a slice
 * starts; A, |A|^2 and E as the formulas say. */
static void test_sway_sample(void **state)
{
        float a[GOSSIP_ROBUST_SWAY_SAMPLES] = {0}, mine[10], theirs[10];
        struct gossip_robust_sway s = {.a = a};
        struct gossip_robust_sway_turn t;
        const double l = 1.0 - 1.0 / GOSSIP_ROBUST_SWAY_TURNS;
        size_t stride =
            gossip_robust_sway_stride(3 * GOSSIP_ROBUST_SWAY_SAMPLES);

        (void)state;
        assert_int_equal(stride, 3);
        assert_int_equal(gossip_robust_sway_stride(100), 1);
        assert_int_equal(gossip_robust_sway_stride(0), 1);
        assert_int_equal(gossip_robust_sway_first(3, 5), 6);
        assert_int_equal(gossip_robust_sway_first(3, 6), 6);
        assert_int_equal(gossip_robust_sway_first(1, 5), 5);
        assert_int_equal(
            gossip_robust_sway_stride(GOSSIP_ROBUST_SWAY_SAMPLES + 1), 2);
        for (int i = 0; i < 10; i++) {
                mine[i] = 1.0f;
                theirs[i] = 1.0f + (float)i; /* d = i at element 5 + i */
        }
        /* elements 5..14: sampled 6, 9, 12 (d 1, 4, 7) in slots 2, 3, 4 */
        gossip_robust_sway_measure(&s, stride, theirs, mine, NULL, 5, 10, &t);
        assert_float_equal(t.dd, 1 + 16 + 49, 1e-9);
        assert_float_equal(t.ad, 0, 0);
        assert_float_equal(gossip_robust_sway_consistency(&s), 0.0f, 0.0f);
        gossip_robust_sway_add(&s, stride, theirs, mine, 5, 10, &t, 0.5f);
        assert_float_equal(a[1], 0.0f, 0.0f);
        assert_float_equal(a[2], 0.5f, 1e-6);
        assert_float_equal(a[3], 2.0f, 1e-6);
        assert_float_equal(a[4], 3.5f, 1e-6);
        assert_float_equal(a[5], 0.0f, 0.0f);
        assert_float_equal(s.aa, 0.25 + 4 + 12.25, 1e-5);
        assert_float_equal(s.e, 66, 1e-9);
        assert_int_equal(s.scaled, 1);
        /* the second turn sees the first: <A, d> = 0.5 + 8 + 24.5 */
        gossip_robust_sway_measure(&s, stride, theirs, mine, NULL, 5, 10, &t);
        assert_float_equal(t.ad, 33, 1e-5);
        gossip_robust_sway_add(&s, stride, theirs, mine, 5, 10, &t, 1.0f);
        assert_float_equal(a[4], 3.5 * l + 7, 1e-5);
        assert_float_equal(s.e, l * l * 66 + 66, 1e-6);
        assert_float_equal(gossip_robust_sway_consistency(&s), s.aa / s.e,
                           1e-6);
}

/* ---- naming the liar: the evidence --------------------------------------- */

/* Feed one turn of figures (pull, push) to peer p of t. */
static void ev_turn(struct gossip_robust_peer *p, float pull, float push)
{
        const float x[GOSSIP_ROBUST_EVS] = {pull, push};

        gossip_robust_evidence_add(&p->ev, x);
}

/* Welch's t of a peer against each other peer, the least of them, computed
 * here from the raw figures; NaN figures skipped; too few turns: NaN. */
static void test_evidence_t(void **state)
{
        static struct gossip_robust_peers t;
        uint8_t k[3][GOSSIP_KEY_BYTES] = {{1}, {2}, {3}};
        struct gossip_robust_peer *p[3];
        double x[3][40], m[3] = {0}, v[3] = {0}, want = INFINITY;
        const struct gossip_robust_cfg no_margin = {.name_t = 4.5f};
        uint64_t rng = g_seed ^ 11;

        (void)state;
        memset(&t, 0, sizeof(t));
        for (int i = 0; i < 3; i++)
                p[i] = gossip_robust_peer_get(&t, k[i]);
        for (int j = 0; j < 40; j++)
                for (int i = 0; i < 3; i++) {
                        x[i][j] = 0.1 * i + 0.3 * normal(&rng);
                        ev_turn(p[i], (float)x[i][j], NAN);
                }
        for (int i = 0; i < 3; i++)
                assert_int_equal(p[i]->ev.n[GOSSIP_ROBUST_EV_PULL], 40);
        assert_int_equal(p[0]->ev.n[GOSSIP_ROBUST_EV_PUSH], 0);
        /* peer 2 against 0 and against 1, from the float figures */
        for (int i = 0; i < 3; i++) {
                for (int j = 0; j < 40; j++)
                        m[i] += (float)x[i][j] / 40.0;
                for (int j = 0; j < 40; j++)
                        v[i] += pow((float)x[i][j] - m[i], 2) / 39.0;
        }
        for (int i = 0; i < 2; i++)
                want = fmin(want, (m[2] - m[i]) / sqrt(v[2] / 40 + v[i] / 40));
        assert_float_equal(
            gossip_robust_evidence_t(&t, p[2], GOSSIP_ROBUST_EV_PULL, 0.0f),
            want, 1e-4);
        assert_true(isnan(
            gossip_robust_evidence_t(&t, p[2], GOSSIP_ROBUST_EV_PUSH, 0.0f)));
        assert_true(isnan(gossip_robust_evidence_t(&t, p[2], 7, 0.0f)));
        /* a margin: the difference beyond it, over the same error */
        want = INFINITY;
        for (int i = 0; i < 2; i++)
                want = fmin(want,
                            (m[2] - m[i] - 0.05) / sqrt(v[2] / 40 + v[i] / 40));
        assert_float_equal(
            gossip_robust_evidence_t(&t, p[2], GOSSIP_ROBUST_EV_PULL, 0.05f),
            want, 1e-4);
        /* too few turns of its own */
        memset(&p[2]->ev, 0, sizeof(p[2]->ev));
        for (int j = 0; j < GOSSIP_ROBUST_NAME_TURNS - 1; j++)
                ev_turn(p[2], 1.0f + 0.01f * (float)j, NAN);
        assert_true(isnan(
            gossip_robust_evidence_t(&t, p[2], GOSSIP_ROBUST_EV_PULL, 0.0f)));
        ev_turn(p[2], 1.0f, NAN);
        assert_true(gossip_robust_evidence_t(&t, p[2], GOSSIP_ROBUST_EV_PULL,
                                             0.0f) > 10.0f);
        /* one named at a time: the one that stands out most */
        assert_int_equal(gossip_robust_name(&t, &no_margin), 1);
        assert_true(p[2]->named);
        /* the least difference of means, shown in the leave summary */
        assert_float_equal(
            p[2]->ev_d[GOSSIP_ROBUST_EV_PULL],
            p[2]->ev.mean[0] - fmax(p[0]->ev.mean[0], p[1]->ev.mean[0]), 1e-6);
        assert_true(isnan(p[2]->ev_d[GOSSIP_ROBUST_EV_PUSH]));
        assert_false(p[0]->named || p[1]->named);
}

/* One run of test_evidence_names: n senders (the first the liar when
 * kind > 0: 1 pulls back by 0.3, 2 pushes by 0.2), honest senders with a
 * persistent difference of their own (offsets uniform in +-OFF on both
 * figures: two of them differ by up to 0.07), and, when skewed, the last
 * honest sender holding data of its own (0.07 above the other honest
 * senders' highest pull, 0.26 above their highest push: bench_mixed's
 * label-skewed device, the most measured). Named
 * after every round by c; returns the round the liar was first named
 * (-1: never) and sets *honest_named when an honest sender ever was. */
static int names_run(const struct gossip_robust_cfg *c, int kind, int n,
                     int skewed, uint64_t rng, int rounds, int *honest_named)
{
        static struct gossip_robust_peers t;
        const float OFF = 0.035f;
        float off[GOSSIP_ROBUST_PEERS][GOSSIP_ROBUST_EVS];
        int named_at = -1;

        memset(&t, 0, sizeof(t));
        for (int i = 0; i < n; i++) {
                uint8_t k[GOSSIP_KEY_BYTES] = {0};

                k[0] = (uint8_t)(i + 1);
                gossip_robust_peer_get(&t, k);
                for (int f = 0; f < GOSSIP_ROBUST_EVS; f++)
                        off[i][f] = OFF * (2.0f * uniform(&rng) - 1.0f);
        }
        for (int f = 0; skewed && f < GOSSIP_ROBUST_EVS; f++) {
                float top = -OFF;

                for (int i = kind ? 1 : 0; i < n - 1; i++)
                        top = off[i][f] > top ? off[i][f] : top;
                off[n - 1][f] =
                    top + (f == GOSSIP_ROBUST_EV_PULL ? 0.07f : 0.26f);
        }
        *honest_named = 0;
        for (int r = 0; r < rounds; r++) {
                for (int i = 0; i < n; i++) {
                        float pull = 0.35f + 0.45f * normal(&rng);
                        float push = 0.03f + 0.2f * normal(&rng);

                        if (kind && i == 0) {
                                pull += kind == 1 ? 0.3f : 0.0f;
                                push += kind == 2 ? 0.2f : 0.0f;
                        } else {
                                pull += off[i][GOSSIP_ROBUST_EV_PULL];
                                push += off[i][GOSSIP_ROBUST_EV_PUSH];
                        }
                        ev_turn(&t.p[i], pull, push);
                }
                gossip_robust_name(&t, c);
                for (int i = kind ? 1 : 0; i < n; i++)
                        *honest_named |= t.p[i].named;
                if (kind && t.p[0].named && named_at < 0) {
                        named_at = r + 1;
                        assert_true(gossip_robust_peer_suspect(&t.p[0]));
                }
        }
        return named_at;
}

/* Senders of a node, at the spreads measured on loopback (a turn's pull
 * ~ N(0.35, 0.45), push ~ N(0.03, 0.2)), honest senders differing
 * persistently by up to 0.07 on both figures (what honest devices showed
 * in the fleet lab, where the rule without a margin named one in 4 runs
 * of 6: docs/benchmarks.md), one of them in half the runs holding
 * label-skewed data (push +0.26 above the others, as measured); a liar
 * that pulls back (+0.3: echo, ipm) or pushes one way (+0.2: alie,
 * cliprider). One turn of each sender per round, named after every
 * round; over SEEDS runs at 3 (one honest sender and the liar), 4 and 8
 * nodes: no honest sender is named in 2000 rounds, with a liar or
 * without; at 3 nodes nobody is (NAME_OTHERS); a pusher is never named
 * (PUSH names nobody: it cannot be told from the skewed device); at 4
 * and 8 a puller is named in every run, within 400 of its turns in at
 * least 9 of 10 without the skewed sender (issue 32 asks 200: printed,
 * the margin costs that). The same runs judged by the rule before (4.5
 * standard errors, no margin, both figures) name an honest sender: what
 * the change is for. */
static void test_evidence_names(void **state)
{
        enum { SEEDS = 20, ROUNDS = 2000 };
        const struct gossip_robust_cfg *c = &gossip_robust_params_cfg;
        const struct gossip_robust_cfg before = {.name_t = 4.5f};
        const int senders[] = {2, 3, 7};
        int worst = 0, late[3] = {0}, later[3] = {0}, before_named = 0;
        int skew_named = 0;

        (void)state;
        assert_true(c->name_t > 0.0f);
        for (int kind = 0; kind < 3; kind++) /* 0: none, 1 pull, 2 push */
                for (int si = 0; si < 3; si++)
                        for (int seed = 0; seed < SEEDS; seed++) {
                                uint64_t rng = g_seed + 1000u * (uint64_t)seed +
                                               (uint64_t)(kind * 10 + si);
                                int n = senders[si], hn, hb;
                                int skewed = n > 2 && seed % 2;
                                int at = names_run(c, kind, n, skewed, rng,
                                                   ROUNDS, &hn);

                                if (hn)
                                        print_message("honest named: kind %d, "
                                                      "%d senders, seed %d\n",
                                                      kind, n, seed);
                                assert_false(hn);
                                if (kind == 0 && n > 2) {
                                        names_run(&before, 0, n, skewed, rng,
                                                  ROUNDS, &hb);
                                        before_named += hb;
                                }
                                if (kind == 2 ||
                                    n < 1 + GOSSIP_ROBUST_NAME_OTHERS) {
                                        /* a pusher; one honest sender */
                                        assert_int_equal(at, -1);
                                        continue;
                                }
                                if (!kind)
                                        continue;
                                if (skewed) { /* beside data that differs */
                                        skew_named += at > 0;
                                        continue;
                                }
                                assert_true(at > 0);
                                late[si] += at > 200;
                                later[si] += at > 400;
                                if (at > worst)
                                        worst = at;
                        }
        print_message("the puller named within %d of its turns at worst "
                      "(%d of %d runs beside a skewed sender); the rule "
                      "before names an honest sender in %d of %d runs\n",
                      worst, skew_named, SEEDS, before_named, 2 * SEEDS);
        assert_true(before_named > 0);
        for (int si = 1; si < 3; si++) {
                print_message("puller, %d senders: later than 200 turns in "
                              "%d of %d runs, than 400 in %d\n",
                              senders[si], late[si], SEEDS / 2, later[si]);
                assert_true(later[si] * 10 <= SEEDS / 2);
        }
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
            cmocka_unit_test(test_sway_bound),
            cmocka_unit_test(test_sway_direction),
            cmocka_unit_test(test_sway_sample),
            cmocka_unit_test(test_evidence_t),
            cmocka_unit_test(test_evidence_names),
        };

        g_seed = gn_test_seed("test_robust", g_seed);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
