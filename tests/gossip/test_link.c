/*
 * test_link.c - the link estimator (gossip/link.c) against synthetic
 * write completions with known rates.
 *
 * Proves: backlogged completions at a known rate give that rate (exactly
 * without jitter; within 3% after 20 samples with up to 1 ms of seeded
 * completion jitter, GN_SEED replays); short frames are aggregated into
 * spans of at least GOSSIP_LINK_SPAN_MIN_US; frames written into an idle
 * socket, and spans cut short by an empty queue, are no samples; a
 * confident estimate needs GOSSIP_LINK_CONFIDENT samples ("not yet" at one
 * less); app-limited samples below the estimate leave it unchanged and
 * above it raise it; RTT smoothing ignores alternating spikes; after a step
 * change of the rate or of the RTT more than half of the gap is left at
 * tau / 2 ("not yet"), at most 37% + 1% at tau and at most 5% + 1% at
 * 3 tau (the EWMA in continuous time: e^-0.5, e^-1, e^-3).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gn_rng.h"
#include "link.h"
#include "test_seed.h"

#define MS 1000ull

static uint64_t seed;

/* n frames of `bytes` at rate_Bps, back to back from t0 (the queue never
 * empties); each completion observed up to jitter_us late. Returns the
 * time of the last completion without jitter. */
static uint64_t backlog(struct gossip_link *l, uint64_t t0, int n,
                        uint64_t bytes, double rate_Bps, uint64_t jitter_us,
                        uint64_t *rng)
{
        double t = (double)t0;
        for (int i = 0; i < n; i++) {
                uint64_t j = jitter_us ? gn_splitmix64(rng) % jitter_us : 0;
                t += (double)bytes * 1e6 / rate_Bps;
                gossip_link_frame_done(l, (uint64_t)t + j, bytes, bytes);
        }
        return (uint64_t)t;
}

static double est_rate(const struct gossip_link *l)
{
        struct gossip_link_estimate e;
        gossip_link_get(l, &e);
        return e.goodput_Bps;
}

static void rate_exact_and_confidence(void **state)
{
        struct gossip_link l;
        struct gossip_link_estimate e;
        uint64_t rng = seed;
        (void)state;
        gossip_link_init(&l);
        /* 10 Mbit/s, 50 KB frames: 40 ms each, one sample per frame after
         * the first completion (which only starts the span) */
        backlog(&l, 0, GOSSIP_LINK_CONFIDENT, 50000, 1.25e6, 0, &rng);
        gossip_link_get(&l, &e);
        assert_int_equal(e.samples, GOSSIP_LINK_CONFIDENT - 1);
        assert_false(e.confident); /* not yet */
        assert_true(e.goodput_Bps > 1.25e6 * 0.999 &&
                    e.goodput_Bps < 1.25e6 * 1.001);
        backlog(&l, 160 * MS, 1, 50000, 1.25e6, 0, &rng);
        gossip_link_get(&l, &e);
        assert_int_equal(e.samples, GOSSIP_LINK_CONFIDENT);
        assert_true(e.confident);
}

static void rate_converges_with_jitter(void **state)
{
        struct gossip_link l;
        uint64_t rng = seed;
        double r;
        (void)state;
        /* 100 Mbit/s, 100 KB frames (8 ms: aggregated two per span) */
        gossip_link_init(&l);
        backlog(&l, 0, 41, 100000, 12.5e6, 1 * MS, &rng);
        r = est_rate(&l);
        fprintf(stderr, "jittered 12.5 MB/s -> %.4g B/s\n", r);
        assert_true(r > 12.5e6 * 0.97 && r < 12.5e6 * 1.03);
}

static void short_frames_aggregate(void **state)
{
        struct gossip_link l;
        struct gossip_link_estimate e;
        uint64_t rng = seed;
        (void)state;
        gossip_link_init(&l);
        /* 1 KB per ms for 101 ms: spans of 10 ms -> 10 samples */
        backlog(&l, 0, 101, 1000, 1e6, 0, &rng);
        gossip_link_get(&l, &e);
        assert_int_equal(e.samples, 10);
        assert_true(e.goodput_Bps > 0.999e6 && e.goodput_Bps < 1.001e6);
}

static void idle_frames_are_no_samples(void **state)
{
        struct gossip_link l;
        struct gossip_link_estimate e;
        (void)state;
        gossip_link_init(&l);
        /* isolated frames, each into an empty queue: whatever their
         * completion times say, the link was never seen busy */
        for (int i = 1; i <= 50; i++)
                gossip_link_frame_done(&l, (uint64_t)i * 100 * MS, 200000, 0);
        /* a busy period of two frames 5 ms apart: a span shorter than
         * SPAN_MIN, cut by the empty queue */
        gossip_link_frame_done(&l, 6000 * MS, 1000, 1000);
        gossip_link_frame_done(&l, 6005 * MS, 1000, 0);
        gossip_link_get(&l, &e);
        assert_int_equal(e.samples, 0);
        assert_true(e.goodput_Bps == 0);
}

/* The kernel's rate after a small frame is no sample; after a slice it is
 * a lower bound like any other. */
static void app_samples_need_a_large_frame(void **state)
{
        struct gossip_link l;
        struct gossip_link_estimate e;
        (void)state;
        gossip_link_init(&l);
        /* the join's 1 KB frames: 0.3 Mbit/s on a 10 Mbit/s link */
        gossip_link_app_sample(&l, 100 * MS, 0.3e6 / 8, 40 * MS, 1024);
        gossip_link_app_sample(&l, 200 * MS, 0.3e6 / 8, 40 * MS,
                               GOSSIP_LINK_APP_FRAME_MIN - 1);
        gossip_link_get(&l, &e);
        assert_true(e.goodput_Bps == 0);
        assert_int_equal(e.raised, 0);
        /* a 204 KB slice: its rate is the estimate */
        gossip_link_app_sample(&l, 400 * MS, 9.5e6 / 8, 160 * MS, 203629);
        gossip_link_get(&l, &e);
        assert_int_equal(e.raised, 1);
        assert_true(e.goodput_Bps > 0.999 * 9.5e6 / 8 &&
                    e.goodput_Bps < 1.001 * 9.5e6 / 8);
        gossip_link_app_sample(&l, 500 * MS, 9.5e6 / 8, 160 * MS,
                               GOSSIP_LINK_APP_FRAME_MIN);
        gossip_link_get(&l, &e);
        assert_int_equal(e.raised, 1); /* not above: ignored, as before */
}

static void app_limited_only_raises(void **state)
{
        struct gossip_link l;
        struct gossip_link_estimate e;
        uint64_t rng = seed, t;
        (void)state;
        gossip_link_init(&l);
        t = backlog(&l, 0, 20, 50000, 1.25e6, 0, &rng);
        for (int i = 0; i < 100; i++) /* a quarter of the rate, 10 s */
                gossip_link_rate_sample(&l, t + (uint64_t)i * 100 * MS,
                                        0.3e6 * 0.1, 100 * MS, 1);
        gossip_link_get(&l, &e);
        assert_true(e.goodput_Bps > 1.25e6 * 0.999 &&
                    e.goodput_Bps < 1.25e6 * 1.001);
        assert_int_equal(e.raised, 0);
        assert_int_equal(e.samples, 19);
        /* a lower bound above what we know raises it */
        gossip_link_rate_sample(&l, t + 20000 * MS, 2.5e6 * 0.5, 500 * MS, 1);
        gossip_link_get(&l, &e);
        assert_int_equal(e.raised, 1);
        assert_true(e.goodput_Bps > 1.25e6 * 1.3);
        assert_int_equal(e.samples, 19);
        /* with no estimate yet, a lower bound is the estimate */
        gossip_link_init(&l);
        gossip_link_rate_sample(&l, 1, 1000, 1 * MS, 1);
        assert_true(est_rate(&l) > 0.999e6 && est_rate(&l) < 1.001e6);
}

/* Remaining share of the gap between a and b after a step a -> b. */
static double gap_left(double est, double a, double b)
{
        return (est - b) / (a - b);
}

static void rate_step_followed_within_tau(void **state)
{
        struct gossip_link l;
        uint64_t rng = seed, t;
        const double a = 12.5e6, b = 1.25e6;
        double half, one, three;
        (void)state;
        gossip_link_init(&l);
        /* 20 ms spans at each rate: frames of rate x 20 ms */
        t = backlog(&l, 0, 101, 250000, a, 0, &rng);
        t = backlog(&l, t, 25, 25000, b, 0, &rng); /* tau / 2 */
        half = gap_left(est_rate(&l), a, b);
        t = backlog(&l, t, 25, 25000, b, 0, &rng); /* tau */
        one = gap_left(est_rate(&l), a, b);
        backlog(&l, t, 100, 25000, b, 0, &rng); /* 3 tau */
        three = gap_left(est_rate(&l), a, b);
        fprintf(stderr, "rate step: gap left %.3f %.3f %.3f\n", half, one,
                three);
        assert_true(half > 0.55);
        assert_true(one < 0.38);
        assert_true(three < 0.06);
}

static void rtt_smoothing(void **state)
{
        struct gossip_link l;
        struct gossip_link_estimate e;
        uint64_t t = 0;
        double half, one, three;
        (void)state;
        gossip_link_init(&l);
        for (int i = 0; i < 300; i++, t += 10 * MS) /* 40 +- 10 ms */
                gossip_link_rtt_sample(&l, t, i % 2 ? 50000 : 30000);
        gossip_link_get(&l, &e);
        assert_int_equal(e.rtt_samples, 300);
        assert_true(e.rtt_us > 39000 && e.rtt_us < 41000);
        /* step 40 -> 80 ms */
        for (int i = 0; i < 50; i++)
                gossip_link_rtt_sample(&l, t += 10 * MS, 80000);
        gossip_link_get(&l, &e);
        half = gap_left(e.rtt_us, 40000, 80000);
        for (int i = 0; i < 50; i++)
                gossip_link_rtt_sample(&l, t += 10 * MS, 80000);
        gossip_link_get(&l, &e);
        one = gap_left(e.rtt_us, 40000, 80000);
        for (int i = 0; i < 200; i++)
                gossip_link_rtt_sample(&l, t += 10 * MS, 80000);
        gossip_link_get(&l, &e);
        three = gap_left(e.rtt_us, 40000, 80000);
        fprintf(stderr, "rtt step: gap left %.3f %.3f %.3f\n", half, one,
                three);
        assert_true(half > 0.55);
        assert_true(one < 0.38);
        assert_true(three < 0.06);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(rate_exact_and_confidence),
            cmocka_unit_test(rate_converges_with_jitter),
            cmocka_unit_test(short_frames_aggregate),
            cmocka_unit_test(idle_frames_are_no_samples),
            cmocka_unit_test(app_limited_only_raises),
            cmocka_unit_test(app_samples_need_a_large_frame),
            cmocka_unit_test(rate_step_followed_within_tau),
            cmocka_unit_test(rtt_smoothing),
        };
        seed = gn_test_seed("test_link", 12);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
