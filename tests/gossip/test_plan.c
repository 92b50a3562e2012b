/*
 * test_plan.c - the exchange plan (gossip/plan.c) as a table of
 * specifications.
 *
 * Proves: each phase's bound is off when any of its conditions is missing
 * (wait_ms 0, alone, no gradients / no averaging, t <= R*K) and then never
 * holds the node up; when on, satisfied gives READY and unsatisfied gives
 * TRAIN_MORE exactly fill_batches times (PARAMS only) and then WAIT with
 * deadline = first WAIT + wait_ms, "not yet" at deadline - 1 ms and READY
 * timed out at the deadline; stopping is always READY; the last step
 * waits but trains no extra batch; the GRADIENT phase never answers
 * TRAIN_MORE. The round, slot and slice helpers: slices of P
 * consecutive rounds tile the model exactly (also n not divisible by P and
 * n < P), slice_cap is the largest. slice_use: the stale window edge +-1,
 * DELTA only with our copy of the same step and range, PLAIN otherwise,
 * out-of-model ranges refused; a sender's larger period widens its
 * slice's window and the bound its newest slice answers. judge, as a
 * table of inboxes: every verdict, the window's edges, the last arrival
 * judged first and answering an older slice of its part (R >= P only),
 * DELTA and PLAIN marking the part, STALE and ANSWERED marking nothing,
 * no record meaning never ANSWERED. Deterministic (no randomness needed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "gossip/codec.h"
#include "gossip/plan.h"

enum { P_ = GOSSIP_PLAN_PARAMS, G_ = GOSSIP_PLAN_GRADIENT };
enum { READY = GOSSIP_PLAN_READY, MORE = GOSSIP_PLAN_TRAIN_MORE };
enum { WAIT = GOSSIP_PLAN_WAIT };

#define MS 1000ull /* the plan's clock is in microseconds */

/* K = 2, R = 2 (so the PARAMS bound starts above t = 4 and wants t - 4),
 * S = 3, 2 extra batches, 50 ms. */
static struct gossip_plan_cfg base_cfg(void)
{
        struct gossip_plan_cfg c = {
            .nparams = 100,
            .avg_every = 2,
            .avg_lag = 2,
            .parts = 4,
            .staleness = 3,
            .fill_batches = 2,
            .wait_ms = 50,
            .grads = 1,
        };
        return c;
}

/* One row: a change to the base cfg and view, and the first answer. */
struct row {
        const char *what;
        /* cfg changes (-1: keep) */
        long wait_ms, alive_cfg_k, grads, fill;
        /* view */
        int phase;
        uint64_t step, last_in, min_peer;
        size_t alive, pending;
        int stopping;
        /* expected first answer, and whether the bound applied */
        int action, bound;
        uint64_t want;
};

#define NONE UINT64_MAX
enum { JUDGE_MAX = 4 }; /* arrivals per judge row: the node's inbox */
static const struct row rows[] = {
    /* PARAMS phase, t = 10: wants a slice of step >= 6 */
    {"params satisfied", -1, -1, -1, -1, P_, 10, 6, NONE, 3, 0, 0, READY, 1, 6},
    {"params newer than needed", -1, -1, -1, -1, P_, 10, 11, NONE, 3, 0, 0,
     READY, 1, 6},
    {"params unsatisfied", -1, -1, -1, -1, P_, 10, 5, NONE, 3, 0, 0, MORE, 1,
     6},
    {"params unsatisfied, no fill", -1, -1, -1, 0, P_, 10, 5, NONE, 3, 0, 0,
     WAIT, 1, 6},
    {"params stopping", -1, -1, -1, -1, P_, 10, 0, NONE, 3, 0, 1, READY, 1, 6},
    {"params off: wait_ms 0", 0, -1, -1, -1, P_, 10, 0, NONE, 3, 0, 0, READY, 0,
     0},
    {"params off: alone", -1, -1, -1, -1, P_, 10, 0, NONE, 1, 0, 0, READY, 0,
     0},
    {"params off: K = 0", -1, 0, -1, -1, P_, 10, 0, NONE, 3, 0, 0, READY, 0, 0},
    {"params off: t = R*K", -1, -1, -1, -1, P_, 4, 0, NONE, 3, 0, 0, READY, 0,
     0},
    {"params off: t = R*K + 1 ends no round", -1, -1, -1, -1, P_, 5, 0, NONE, 3,
     0, 0, READY, 0, 0},
    {"params off: t = 11 ends no round", -1, -1, -1, -1, P_, 11, 0, NONE, 3, 0,
     0, READY, 0, 0},
    {"params on: t = R*K + K", -1, -1, -1, -1, P_, 6, 0, NONE, 3, 0, 0, MORE, 1,
     2},
    {"params on: t = R*K + K, satisfied", -1, -1, -1, -1, P_, 6, 2, NONE, 3, 0,
     0, READY, 1, 2},
    /* GRADIENT phase, t = 10, S = 3 */
    {"grad satisfied", -1, -1, -1, -1, G_, 10, 0, 7, 3, 1, 0, READY, 1, 0},
    {"grad slowest unknown", -1, -1, -1, -1, G_, 10, 0, NONE, 3, 1, 0, READY, 1,
     0},
    {"grad nothing pending", -1, -1, -1, -1, G_, 10, 0, 7, 3, 0, 0, WAIT, 1, 0},
    {"grad S + 1 ahead", -1, -1, -1, -1, G_, 10, 0, 6, 3, 2, 0, WAIT, 1, 0},
    {"grad never trains more", -1, -1, -1, 8, G_, 10, 0, 0, 3, 0, 0, WAIT, 1,
     0},
    {"grad stopping", -1, -1, -1, -1, G_, 10, 0, 0, 3, 0, 1, READY, 1, 0},
    {"grad off: no gradients", -1, -1, 0, -1, G_, 10, 0, 0, 3, 0, 0, READY, 0,
     0},
    {"grad off: wait_ms 0", 0, -1, -1, -1, G_, 10, 0, 0, 3, 0, 0, READY, 0, 0},
    {"grad off: alone", -1, -1, -1, -1, G_, 10, 0, 0, 1, 0, 0, READY, 0, 0},
    {"grad on at t <= R*K", -1, -1, -1, -1, G_, 1, 0, NONE, 3, 0, 0, WAIT, 1,
     0},
};

static struct gossip_plan_cfg row_cfg(const struct row *r)
{
        struct gossip_plan_cfg c = base_cfg();

        if (r->wait_ms >= 0)
                c.wait_ms = (uint32_t)r->wait_ms;
        if (r->alive_cfg_k >= 0)
                c.avg_every = (uint32_t)r->alive_cfg_k;
        if (r->grads >= 0)
                c.grads = (int)r->grads;
        if (r->fill >= 0)
                c.fill_batches = (uint32_t)r->fill;
        return c;
}

static struct gossip_plan_view row_view(const struct row *r, uint64_t now)
{
        struct gossip_plan_view v = {
            .phase = r->phase,
            .step = r->step,
            .alive = r->alive,
            .last_in_step = r->last_in,
            .min_peer_step = r->min_peer,
            .grads_pending = r->pending,
            .now_us = now,
            .stopping = r->stopping,
        };
        return v;
}

static void test_admit_table(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                const struct row *r = &rows[i];
                struct gossip_plan_cfg c = row_cfg(r);
                struct gossip_plan_view v = row_view(r, 1000 * MS);
                struct gossip_plan_wait w;
                struct gossip_plan_decision d;

                gossip_plan_wait_begin(&w);
                memset(&d, 0xa5, sizeof(d));
                gossip_plan_admit(&c, &v, &w, &d);
                if (d.action != r->action || w.bound != r->bound ||
                    d.want_step != r->want)
                        fail_msg("row \"%s\": action %d bound %d want %llu, "
                                 "expected %d %d %llu",
                                 r->what, d.action, w.bound,
                                 (unsigned long long)d.want_step, r->action,
                                 r->bound, (unsigned long long)r->want);
                assert_int_equal(d.timed_out, 0);
                if (d.action == WAIT)
                        assert_int_equal(d.deadline_us,
                                         (1000 + c.wait_ms) * MS);
                else
                        assert_int_equal(w.since_us, UINT64_MAX);
        }
}

/* Unsatisfied PARAMS: TRAIN_MORE exactly fill_batches times (time passing
 * meanwhile does not start the budget), then WAIT until first WAIT +
 * wait_ms: still WAIT at deadline - 1, READY timed out at the deadline. */
static void test_params_sequence(void **state)
{
        (void)state;
        for (uint32_t fill = 0; fill <= 4; fill++) {
                struct gossip_plan_cfg c = base_cfg();
                struct gossip_plan_view v = {.phase = P_,
                                             .step = 20,
                                             .alive = 4,
                                             .last_in_step = 3,
                                             .min_peer_step = NONE,
                                             .now_us = 5000 * MS};
                struct gossip_plan_wait w;
                struct gossip_plan_decision d;
                uint64_t first_wait;

                c.fill_batches = fill;
                gossip_plan_wait_begin(&w);
                for (uint32_t k = 0; k < fill; k++) {
                        gossip_plan_admit(&c, &v, &w, &d);
                        assert_int_equal(d.action, MORE);
                        assert_int_equal(w.extra, k + 1);
                        assert_int_equal(w.since_us, UINT64_MAX);
                        v.now_us += 7 * MS; /* an extra batch takes 7 ms */
                }
                first_wait = v.now_us;
                gossip_plan_admit(&c, &v, &w, &d);
                assert_int_equal(d.action, WAIT);
                assert_int_equal(d.deadline_us, first_wait + c.wait_ms * MS);
                assert_int_equal(w.extra, fill); /* no more extra batches */
                /* not yet: 1 ms, and 1 us, before the deadline */
                v.now_us = first_wait + (c.wait_ms - 1) * MS;
                gossip_plan_admit(&c, &v, &w, &d);
                assert_int_equal(d.action, WAIT);
                v.now_us = first_wait + c.wait_ms * MS - 1;
                gossip_plan_admit(&c, &v, &w, &d);
                assert_int_equal(d.action, WAIT);
                assert_int_equal(d.timed_out, 0);
                assert_int_equal(d.deadline_us, first_wait + c.wait_ms * MS);
                v.now_us = first_wait + c.wait_ms * MS; /* the deadline */
                gossip_plan_admit(&c, &v, &w, &d);
                assert_int_equal(d.action, READY);
                assert_int_equal(d.timed_out, 1);
                assert_int_equal(w.bound, 1);
                assert_int_equal(w.extra, fill);
        }
}

/* An arrival during the wait (or during the extra batches) ends it. */
static void test_params_arrival(void **state)
{
        struct gossip_plan_cfg c = base_cfg();
        struct gossip_plan_view v = {.phase = P_,
                                     .step = 20,
                                     .alive = 2,
                                     .last_in_step = 15,
                                     .min_peer_step = NONE,
                                     .now_us = 100 * MS};
        struct gossip_plan_wait w;
        struct gossip_plan_decision d;

        (void)state;
        gossip_plan_wait_begin(&w);
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, MORE);
        assert_int_equal(d.want_step, 16);
        v.last_in_step = 16; /* arrived during the extra batch */
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, READY);
        assert_int_equal(d.timed_out, 0);
        assert_int_equal(w.extra, 1);

        c.fill_batches = 0;
        v.last_in_step = 0;
        gossip_plan_wait_begin(&w);
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, WAIT);
        v.now_us += c.wait_ms * MS - 1;
        v.last_in_step = 17;
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, READY);
        assert_int_equal(d.timed_out, 0);
        /* stopping during a wait: READY at once, not timed out */
        v.last_in_step = 0;
        gossip_plan_wait_begin(&w);
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, WAIT);
        v.stopping = 1;
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, READY);
        assert_int_equal(d.timed_out, 0);
}

/* GRADIENT phase: WAIT at once whatever fill_batches is, the same
 * deadline rule, and never TRAIN_MORE on any of many asks. */
static void test_gradient_sequence(void **state)
{
        struct gossip_plan_cfg c = base_cfg();
        struct gossip_plan_view v = {.phase = G_,
                                     .step = 9,
                                     .alive = 3,
                                     .min_peer_step = 2,
                                     .grads_pending = 1,
                                     .now_us = 40 * MS};
        struct gossip_plan_wait w;
        struct gossip_plan_decision d;

        (void)state;
        c.fill_batches = 8;
        gossip_plan_wait_begin(&w);
        for (uint64_t t = 40 * MS; t < (40 + c.wait_ms) * MS; t += 250) {
                v.now_us = t;
                gossip_plan_admit(&c, &v, &w, &d);
                assert_int_equal(d.action, WAIT);
                assert_int_equal(d.deadline_us, (40 + c.wait_ms) * MS);
        }
        assert_int_equal(w.extra, 0);
        v.now_us = (40 + c.wait_ms) * MS;
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, READY);
        assert_int_equal(d.timed_out, 1);
        /* S exactly: 9 <= 6 + 3 merges */
        v.min_peer_step = 6;
        gossip_plan_wait_begin(&w);
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, READY);
}

/* The last step: no extra batch (no step would fold it in), but the wait
 * for the slice stays, with the same deadline rule. */
static void test_last_step(void **state)
{
        struct gossip_plan_cfg c = base_cfg();
        struct gossip_plan_view v = {.phase = P_,
                                     .step = 20,
                                     .alive = 3,
                                     .last_in_step = 3,
                                     .min_peer_step = NONE,
                                     .now_us = 7 * MS,
                                     .last_step = 1};
        struct gossip_plan_wait w;
        struct gossip_plan_decision d;

        (void)state;
        c.fill_batches = 4;
        gossip_plan_wait_begin(&w);
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, WAIT);
        assert_int_equal(w.extra, 0);
        assert_int_equal(d.deadline_us, 7 * MS + c.wait_ms * MS);
        v.now_us = d.deadline_us;
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, READY);
        assert_int_equal(d.timed_out, 1);
        v.last_in_step = 16;
        gossip_plan_wait_begin(&w);
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, READY);
        assert_int_equal(d.timed_out, 0);
}

/* Stopping is READY in every phase and configuration. */
static void test_stopping_always_ready(void **state)
{
        (void)state;
        for (int phase = 0; phase <= 1; phase++)
                for (uint32_t fill = 0; fill <= 2; fill++)
                        for (uint64_t t = 0; t <= 12; t++) {
                                struct gossip_plan_cfg c = base_cfg();
                                struct gossip_plan_view v = {.phase = phase,
                                                             .step = t,
                                                             .alive = 5,
                                                             .min_peer_step = 0,
                                                             .now_us = 9,
                                                             .stopping = 1};
                                struct gossip_plan_wait w;
                                struct gossip_plan_decision d;

                                c.fill_batches = fill;
                                gossip_plan_wait_begin(&w);
                                gossip_plan_admit(&c, &v, &w, &d);
                                assert_int_equal(d.action, READY);
                                assert_int_equal(d.timed_out, 0);
                        }
}

static void test_cfg_valid(void **state)
{
        struct gossip_plan_cfg c = base_cfg();

        (void)state;
        assert_true(gossip_plan_cfg_valid(&c));
        assert_false(gossip_plan_cfg_valid(NULL));
        c.parts = 0;
        assert_false(gossip_plan_cfg_valid(&c));
        c = base_cfg();
        c.avg_lag = 0;
        assert_false(gossip_plan_cfg_valid(&c));
        c.avg_lag = GOSSIP_PLAN_RING - 1;
        assert_true(gossip_plan_cfg_valid(&c));
        c.avg_lag = GOSSIP_PLAN_RING;
        assert_false(gossip_plan_cfg_valid(&c));
}

static void test_due_round_slot(void **state)
{
        struct gossip_plan_cfg c = base_cfg();

        (void)state;
        c.avg_every = 3;
        for (uint64_t t = 0; t < 100; t++) {
                assert_int_equal(gossip_plan_due(&c, t), t && t % 3 == 0);
                assert_int_equal(gossip_plan_round(&c, t), t / 3);
                assert_int_equal(gossip_plan_slot(&c, t),
                                 (t / 3) % GOSSIP_PLAN_RING);
        }
        c.avg_every = 0;
        for (uint64_t t = 0; t < 20; t++) {
                assert_false(gossip_plan_due(&c, t));
                assert_int_equal(gossip_plan_round(&c, t), t);
                assert_int_equal(gossip_plan_slot(&c, t), t % GOSSIP_PLAN_RING);
        }
        c.avg_every = 1;
        assert_false(gossip_plan_due(&c, 0));
        assert_true(gossip_plan_due(&c, 1));
}

/* The slices of P consecutive rounds cover [0, n) exactly once, in part
 * order, and none is larger than slice_cap (which one of them reaches). */
static void test_slices_tile(void **state)
{
        static const size_t ns[] = {1, 5, 64, 100, 1000, 1023, 1024};
        static const uint32_t ps[] = {1, 2, 3, 4, 7, 16};

        (void)state;
        for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
                for (size_t b = 0; b < sizeof(ps) / sizeof(ps[0]); b++) {
                        struct gossip_plan_cfg c = base_cfg();
                        size_t next = 0, biggest = 0;
                        uint64_t r0 = 5; /* start mid-cycle */

                        c.nparams = ns[a];
                        c.parts = ps[b];
                        c.avg_every = 3;
                        for (uint64_t r = r0; r < r0 + c.parts; r++) {
                                uint64_t t = r * c.avg_every + 1;
                                size_t lo, count;
                                uint32_t part =
                                    gossip_plan_slice(&c, t, &lo, &count);

                                assert_int_equal(part, r % c.parts);
                                if (count > biggest)
                                        biggest = count;
                                assert_true(lo + count <= c.nparams);
                        }
                        /* in part order: contiguous from 0 to n */
                        next = 0;
                        for (uint32_t p = 0; p < c.parts; p++) {
                                uint64_t t = (uint64_t)p * c.avg_every;
                                size_t lo, count;

                                assert_int_equal(
                                    gossip_plan_slice(&c, t, &lo, &count), p);
                                assert_int_equal(lo, next);
                                next = lo + count;
                        }
                        assert_int_equal(next, c.nparams);
                        assert_int_equal(biggest, gossip_plan_slice_cap(&c));
                }
}

/* K = 4, R = 2, S = 3: a slice of step s is usable at t while
 * s + (R + 1) * K + S = s + 15 >= t. */
static void test_slice_use(void **state)
{
        struct gossip_plan_cfg c = base_cfg();
        const uint64_t t = 40, win = 15;
        size_t lo, count, lo2, count2;

        (void)state;
        c.avg_every = 4;
        c.staleness = 3;
        c.parts = 3;
        gossip_plan_slice(&c, t - win, &lo, &count);
        /* window edge: t - win - 1 refused, t - win and t - win + 1 used */
        assert_int_equal(gossip_plan_slice_use(&c, t, t - win - 1, lo, count,
                                               t - win - 1, 0, UINT64_MAX),
                         GOSSIP_PLAN_STALE);
        assert_int_equal(gossip_plan_slice_use(&c, t, t - win, lo, count,
                                               t - win, 0, UINT64_MAX),
                         GOSSIP_PLAN_DELTA);
        assert_int_equal(gossip_plan_slice_use(&c, t, t - win, lo, count,
                                               UINT64_MAX, 0, UINT64_MAX),
                         GOSSIP_PLAN_PLAIN);
        gossip_plan_slice(&c, t - win + 1, &lo2, &count2);
        assert_int_equal(gossip_plan_slice_use(&c, t, t - win + 1, lo2, count2,
                                               t - win + 1, 0, UINT64_MAX),
                         GOSSIP_PLAN_DELTA);
        /* DELTA needs our copy of the same step ... */
        gossip_plan_slice(&c, 36, &lo, &count);
        assert_int_equal(
            gossip_plan_slice_use(&c, t, 36, lo, count, 36, 0, UINT64_MAX),
            GOSSIP_PLAN_DELTA);
        assert_int_equal(
            gossip_plan_slice_use(&c, t, 36, lo, count, 37, 0, UINT64_MAX),
            GOSSIP_PLAN_PLAIN);
        assert_int_equal(gossip_plan_slice_use(&c, t, 36, lo, count,
                                               36 + 4 * GOSSIP_PLAN_RING, 0,
                                               UINT64_MAX),
                         GOSSIP_PLAN_PLAIN); /* slot reused */
        assert_int_equal(gossip_plan_slice_use(&c, t, 36, lo, count, UINT64_MAX,
                                               0, UINT64_MAX),
                         GOSSIP_PLAN_PLAIN);
        /* ... and the same range */
        assert_int_equal(gossip_plan_slice_use(&c, t, 36, lo + 1, count - 1, 36,
                                               0, UINT64_MAX),
                         GOSSIP_PLAN_PLAIN);
        assert_int_equal(
            gossip_plan_slice_use(&c, t, 36, lo, count - 1, 36, 0, UINT64_MAX),
            GOSSIP_PLAN_PLAIN);
        /* a round ahead of us pulls us forward: plainly */
        gossip_plan_slice(&c, 44, &lo, &count);
        assert_int_equal(gossip_plan_slice_use(&c, t, 44, lo, count, UINT64_MAX,
                                               0, UINT64_MAX),
                         GOSSIP_PLAN_PLAIN);
        /* K = 0: no ring, so never DELTA */
        c.avg_every = 0;
        gossip_plan_slice(&c, 38, &lo, &count);
        assert_int_equal(
            gossip_plan_slice_use(&c, t, 38, lo, count, 38, 0, UINT64_MAX),
            GOSSIP_PLAN_PLAIN);
        c.avg_every = 4;
        /* outside the model: refused however fresh */
        assert_int_equal(
            gossip_plan_slice_use(&c, t, t, c.nparams + 1, 0, t, 0, UINT64_MAX),
            GOSSIP_PLAN_STALE);
        assert_int_equal(gossip_plan_slice_use(&c, t, t, c.nparams - 10, 11, t,
                                               0, UINT64_MAX),
                         GOSSIP_PLAN_STALE);
        assert_int_equal(
            gossip_plan_slice_use(&c, t, t, 1, SIZE_MAX, t, 0, UINT64_MAX),
            GOSSIP_PLAN_STALE);
        assert_int_equal(gossip_plan_slice_use(&c, t, t, c.nparams - 10, 10,
                                               UINT64_MAX, 0, UINT64_MAX),
                         GOSSIP_PLAN_PLAIN);
}

/* Partners at other periods (gossip/adapt.h: each node chooses its K from
 * its own link): a slice made under a sender's larger period is judged
 * with that period's window, (R + 1) * 16 + S = 51 steps here instead of
 * 15, and the PARAMS bound waits R periods of the newest arrival's
 * sender, not ours. A period smaller than ours (or 0: not told) changes
 * nothing: ours is the floor. */
static void test_other_period(void **state)
{
        struct gossip_plan_cfg c = base_cfg();
        const uint64_t t = 128;
        size_t lo, count;
        struct gossip_plan_view v = {.phase = P_,
                                     .step = t,
                                     .alive = 2,
                                     .min_peer_step = NONE,
                                     .now_us = 100 * MS};
        struct gossip_plan_wait w;
        struct gossip_plan_decision d;

        (void)state;
        c.avg_every = 4;
        c.staleness = 3;
        assert_int_equal(gossip_plan_window(&c, 0), 15);
        assert_int_equal(gossip_plan_window(&c, 2), 15);
        assert_int_equal(gossip_plan_window(&c, 4), 15);
        assert_int_equal(gossip_plan_window(&c, 16), 51);
        /* a K = 16 partner's slice of step 80, 48 steps old: refused under
         * our window alone, used under its own */
        gossip_plan_slice(&c, 80, &lo, &count);
        assert_int_equal(
            gossip_plan_slice_use(&c, t, 80, lo, count, 80, 0, UINT64_MAX),
            GOSSIP_PLAN_STALE);
        assert_int_equal(
            gossip_plan_slice_use(&c, t, 80, lo, count, 80, 2, UINT64_MAX),
            GOSSIP_PLAN_STALE);
        assert_int_equal(
            gossip_plan_slice_use(&c, t, 80, lo, count, 80, 16, UINT64_MAX),
            GOSSIP_PLAN_DELTA);
        assert_int_equal(gossip_plan_slice_use(&c, t, 80, lo, count, UINT64_MAX,
                                               16, UINT64_MAX),
                         GOSSIP_PLAN_PLAIN);
        /* the edge: t - 51 used, t - 52 refused */
        gossip_plan_slice(&c, t - 51, &lo, &count);
        assert_int_equal(gossip_plan_slice_use(&c, t, t - 51, lo, count,
                                               UINT64_MAX, 16, UINT64_MAX),
                         GOSSIP_PLAN_PLAIN);
        assert_int_equal(gossip_plan_slice_use(&c, t, t - 52, lo, count,
                                               UINT64_MAX, 16, UINT64_MAX),
                         GOSSIP_PLAN_STALE);

        /* the bound: R = 2 rounds of K = 4 want step 120; a K = 16
         * sender's newest slice (step 96) satisfies R = 2 of its rounds */
        c.fill_batches = 0;
        v.last_in_step = 96;
        v.last_in_period = 0;
        gossip_plan_wait_begin(&w);
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.want_step, 120);
        assert_int_equal(d.action, WAIT);
        v.last_in_period = 16;
        gossip_plan_wait_begin(&w);
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.want_step, 96);
        assert_int_equal(d.action, READY);
        assert_int_equal(d.timed_out, 0);
        v.last_in_step = 95;
        gossip_plan_wait_begin(&w);
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.action, WAIT);
        /* a smaller period than ours: our K */
        v.last_in_step = 119;
        v.last_in_period = 2;
        gossip_plan_wait_begin(&w);
        gossip_plan_admit(&c, &v, &w, &d);
        assert_int_equal(d.want_step, 120);
        assert_int_equal(d.action, WAIT);
}

/* A difference answered already: K = 4, P = 3, R = 3 (R >= P: the lag
 * bound admits slices older than a part's period); our copy of step 36
 * held. A DELTA of 36 is used while our last average of that slice was
 * before step 36, and ANSWERED once one was applied at step 36 or later
 * (our copy of 36 is taken before step 36's averaging). With R < P the
 * rule is off. PLAIN slices are never ANSWERED; never averaged
 * (UINT64_MAX) never is. And gossip_plan_part_of names exactly the slices
 * of our P. */
static void test_answered(void **state)
{
        struct gossip_plan_cfg c = base_cfg();
        const uint64_t t = 40;
        size_t lo, count, lo2, count2;
        uint32_t part, got;

        (void)state;
        c.avg_every = 4;
        c.staleness = 3;
        c.parts = 3;
        c.avg_lag = 3;
        part = gossip_plan_slice(&c, 36, &lo, &count);
        assert_int_equal(
            gossip_plan_slice_use(&c, t, 36, lo, count, 36, 0, UINT64_MAX),
            GOSSIP_PLAN_DELTA);
        assert_int_equal(gossip_plan_slice_use(&c, t, 36, lo, count, 36, 0, 35),
                         GOSSIP_PLAN_DELTA);
        assert_int_equal(gossip_plan_slice_use(&c, t, 36, lo, count, 36, 0, 36),
                         GOSSIP_PLAN_ANSWERED);
        assert_int_equal(gossip_plan_slice_use(&c, t, 36, lo, count, 36, 0, 40),
                         GOSSIP_PLAN_ANSWERED);
        c.avg_lag = 2; /* R < P: off */
        assert_int_equal(gossip_plan_slice_use(&c, t, 36, lo, count, 36, 0, 40),
                         GOSSIP_PLAN_DELTA);
        c.avg_lag = 3;
        /* not held: PLAIN whatever was answered */
        assert_int_equal(
            gossip_plan_slice_use(&c, t, 36, lo, count, UINT64_MAX, 0, 40),
            GOSSIP_PLAN_PLAIN);
        /* too old stays too old */
        assert_int_equal(gossip_plan_slice_use(&c, t, 20, lo, count, 20, 0, 40),
                         GOSSIP_PLAN_STALE);

        assert_int_equal(gossip_plan_part_of(&c, lo, count, &got), 1);
        assert_int_equal(got, part);
        for (uint32_t p = 0; p < c.parts; p++) {
                gossip_codec_partition(c.nparams, p, c.parts, &lo2, &count2);
                assert_int_equal(gossip_plan_part_of(&c, lo2, count2, &got), 1);
                assert_int_equal(got, p);
                assert_int_equal(gossip_plan_part_of(&c, lo2, count2 - 1, &got),
                                 0);
                assert_int_equal(
                    gossip_plan_part_of(&c, lo2 + 1, count2 - 1, &got), 0);
        }
        assert_int_equal(gossip_plan_part_of(&c, c.nparams, 0, &got), 0);
        /* a slice of P = 2 is none of our P = 3 */
        gossip_codec_partition(c.nparams, 1, 2, &lo2, &count2);
        assert_int_equal(gossip_plan_part_of(&c, lo2, count2, &got), 0);
}

/* ---- gossip_plan_judge: the inbox as a table ----
 *
 * S = 3, n = 100; K, R, P per row. A row lists what arrived (oldest
 * first) with the verdict each must get, whether our ring slot of its
 * round holds our copy of it (OWN), of another round (OTHER) or nothing,
 * and the parts' answered steps before and after. */
enum { NOT = 0, OWN = 1, OTHER = 2 };
enum { SLICE = -1 }; /* lo: the arrival is its round's own slice */
enum { ST_ = GOSSIP_PLAN_STALE, DE_ = GOSSIP_PLAN_DELTA };
enum { PL_ = GOSSIP_PLAN_PLAIN, AN_ = GOSSIP_PLAN_ANSWERED };

struct jarr {
        uint64_t s;
        long lo; /* SLICE, or [lo, lo + count) */
        size_t count;
        uint32_t period;
        int held; /* NOT, OWN, OTHER */
        int want; /* enum gossip_plan_use */
};

struct jrow {
        const char *what;
        struct {
                uint32_t k, r, p;
                uint64_t t;
                int no_record; /* answered NULL */
                size_t n;      /* arrivals */
        } at;
        uint64_t ans0[3], ans1[3]; /* per part, before and after */
        struct jarr in[JUDGE_MAX];
};

#define N_ NONE
#define NEVER3                                                                 \
        {                                                                      \
                N_, N_, N_                                                     \
        }
static const struct jrow jrows[] = {
    {"nothing arrived", {4, 2, 3, 40, 0, 0}, NEVER3, NEVER3, {{0}}},
    /* W = (R + 1) K + S = 15 */
    {"window edge: t - W - 1 refused, t - W averaged against our copy",
     {4, 2, 3, 43, 0, 2},
     NEVER3,
     {N_, 43, N_},
     {{27, SLICE, 0, 0, OWN, ST_}, {28, SLICE, 0, 0, OWN, DE_}}},
    {"window edge without our copy: plainly",
     {4, 2, 3, 43, 0, 1},
     NEVER3,
     {N_, 43, N_},
     {{28, SLICE, 0, 0, NOT, PL_}}},
    {"our slot holds another round: plainly",
     {4, 2, 3, 40, 0, 1},
     NEVER3,
     {40, N_, N_},
     {{36, SLICE, 0, 0, OTHER, PL_}}},
    {"a range not one of our P: plainly, no part marked",
     {4, 2, 3, 40, 0, 2},
     NEVER3,
     NEVER3,
     {{36, 1, 10, 0, OWN, PL_}, {36, 0, 32, 0, OWN, PL_}}},
    {"a round ahead pulls us forward",
     {4, 2, 3, 40, 0, 1},
     NEVER3,
     {N_, N_, 40},
     {{44, SLICE, 0, 0, NOT, PL_}}},
    {"outside the model: refused however fresh",
     {4, 2, 3, 40, 0, 3},
     NEVER3,
     NEVER3,
     {{40, 90, 11, 0, OWN, ST_},
      {40, 101, 0, 0, NOT, ST_},
      {40, 90, 10, 0, NOT, PL_}}},
    /* a K' = 16 sender: W = 3 * 16 + 3 = 51 */
    {"a sender's larger period widens its window",
     {4, 2, 3, 128, 0, 3},
     NEVER3,
     {N_, 128, 128},
     {{80, SLICE, 0, 16, OWN, DE_},
      {77, SLICE, 0, 16, NOT, PL_},
      {76, SLICE, 0, 16, NOT, ST_}}},
    {"a period not told or smaller than ours: our window",
     {4, 2, 3, 128, 0, 2},
     NEVER3,
     NEVER3,
     {{80, SLICE, 0, 0, OWN, ST_}, {80, SLICE, 0, 2, OWN, ST_}}},
    /* R >= P: W = 4 * 4 + 3 = 19; rounds 6 (s 24) and 9 (s 36) are part 0 */
    {"R >= P: the last arrival, judged first, answers an older one",
     {4, 3, 3, 40, 0, 2},
     NEVER3,
     {40, N_, N_},
     {{24, SLICE, 0, 0, OWN, AN_}, {36, SLICE, 0, 0, OWN, DE_}}},
    {"... by arrival, not by step: an older slice arriving last wins",
     {4, 3, 3, 40, 0, 2},
     NEVER3,
     {40, N_, N_},
     {{36, SLICE, 0, 0, OWN, AN_}, {24, SLICE, 0, 0, OWN, DE_}}},
    {"a plain average answers too",
     {4, 3, 3, 40, 0, 2},
     NEVER3,
     {40, N_, N_},
     {{24, SLICE, 0, 0, OWN, AN_}, {36, SLICE, 0, 0, NOT, PL_}}},
    {"answered before s: averaged",
     {4, 3, 3, 40, 0, 1},
     {35, N_, N_},
     {40, N_, N_},
     {{36, SLICE, 0, 0, OWN, DE_}}},
    {"answered at s: ANSWERED, the record kept",
     {4, 3, 3, 40, 0, 1},
     {36, N_, N_},
     {36, N_, N_},
     {{36, SLICE, 0, 0, OWN, AN_}}},
    {"R < P: the rule is off",
     {4, 2, 3, 38, 0, 2},
     NEVER3,
     {38, N_, N_},
     {{24, SLICE, 0, 0, OWN, DE_}, {36, SLICE, 0, 0, OWN, DE_}}},
    {"no record: never ANSWERED",
     {4, 3, 3, 40, 1, 2},
     NEVER3,
     NEVER3,
     {{24, SLICE, 0, 0, OWN, DE_}, {36, SLICE, 0, 0, OWN, DE_}}},
    /* K = 0: W = S = 3, a slice's part is its step mod P */
    {"K = 0: no copy of our own, never DELTA",
     {0, 1, 3, 40, 0, 2},
     NEVER3,
     {N_, N_, 40},
     {{36, SLICE, 0, 0, NOT, ST_}, {38, SLICE, 0, 0, OWN, PL_}}},
    {"a full inbox: every verdict",
     {4, 3, 3, 40, 0, 4},
     NEVER3,
     {40, N_, N_},
     {{36, SLICE, 0, 0, OWN, AN_},
      {20, SLICE, 0, 0, OWN, ST_},
      {32, 5, 20, 0, NOT, PL_},
      {24, SLICE, 0, 0, OWN, DE_}}},
};
#undef NEVER3
#undef N_

static void judge_row(const struct jrow *row)
{
        struct gossip_plan_cfg c = base_cfg();
        struct gossip_plan_arrival in[JUDGE_MAX];
        struct gossip_plan_judged out[JUDGE_MAX];
        uint64_t held[GOSSIP_PLAN_RING], ans[3];

        c.avg_every = row->at.k;
        c.avg_lag = row->at.r;
        c.parts = row->at.p;
        c.staleness = 3;
        assert_true(gossip_plan_cfg_valid(&c));
        for (int i = 0; i < GOSSIP_PLAN_RING; i++)
                held[i] = NONE;
        memcpy(ans, row->ans0, sizeof(ans));
        for (size_t i = 0; i < row->at.n; i++) {
                const struct jarr *a = &row->in[i];
                unsigned slot = gossip_plan_slot(&c, a->s);

                in[i].step = a->s;
                in[i].period = a->period;
                if (a->lo == SLICE) {
                        gossip_plan_slice(&c, a->s, &in[i].lo, &in[i].count);
                } else {
                        in[i].lo = (size_t)a->lo;
                        in[i].count = a->count;
                }
                if (a->held == OWN)
                        held[slot] = a->s;
                else if (a->held == OTHER)
                        held[slot] =
                            a->s - (uint64_t)GOSSIP_PLAN_RING * c.avg_every;
                out[i].use = -1;
        }
        gossip_plan_judge(&c, row->at.t, in, row->at.n, held,
                          row->at.no_record ? NULL : ans, out);
        for (size_t i = 0; i < row->at.n; i++) {
                if (out[i].use != row->in[i].want ||
                    out[i].slot != gossip_plan_slot(&c, row->in[i].s))
                        fail_msg("%s: arrival %zu (step %llu) judged %d in "
                                 "slot %u, want %d in slot %u",
                                 row->what, i, (unsigned long long)row->in[i].s,
                                 out[i].use, out[i].slot, row->in[i].want,
                                 gossip_plan_slot(&c, row->in[i].s));
        }
        for (int p = 0; p < 3; p++)
                if (ans[p] != row->ans1[p])
                        fail_msg("%s: part %d answered at %llu, want %llu",
                                 row->what, p, (unsigned long long)ans[p],
                                 (unsigned long long)row->ans1[p]);
}

/* Every row above: each arrival's verdict and slot, and each part's
 * answered step afterwards. */
static void test_judge_table(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(jrows) / sizeof(jrows[0]); i++)
                judge_row(&jrows[i]);
}

/* Note `count` outcomes; the number of verdict changes they made. */
static int note_n(struct gossip_plan_health *h, int outcome, int count)
{
        int changes = 0;

        for (int i = 0; i < count; i++)
                changes += gossip_plan_health_note(h, outcome);
        return changes;
}

/* Slices arriving too old: degraded exactly when N have been judged with
 * under half used, said in words, and healthy again only at >= 75% used. */
static void test_health_too_old(void **state)
{
        struct gossip_plan_health h;
        char buf[128];
        const int N = GOSSIP_PLAN_HEALTH_N;

        (void)state;
        gossip_plan_health_init(&h);
        assert_string_equal(gossip_plan_health_say(&h, buf, sizeof(buf)), "ok");
        /* N - 1 too old: not judged yet */
        assert_int_equal(note_n(&h, GOSSIP_PLAN_TOO_OLD, N - 1), 0);
        assert_int_equal(h.verdict, GOSSIP_PLAN_HEALTHY);
        assert_int_equal(gossip_plan_health_note(&h, GOSSIP_PLAN_TOO_OLD), 1);
        assert_int_equal(h.verdict, GOSSIP_PLAN_DEGRADED_TOO_OLD);
        gossip_plan_health_say(&h, buf, sizeof(buf));
        assert_string_equal(buf, "degraded: 100% of received slices too old "
                                 "to average");
        /* used slices pull the share up; between 50% and 75% it stays */
        int k = 0;
        while (h.used < 0.5f) {
                assert_int_equal(gossip_plan_health_note(&h, GOSSIP_PLAN_USED),
                                 0);
                k++;
        }
        assert_int_equal(h.verdict, GOSSIP_PLAN_DEGRADED_TOO_OLD);
        while (h.used < 0.75f) {
                if (gossip_plan_health_note(&h, GOSSIP_PLAN_USED))
                        break;
                k++;
        }
        assert_int_equal(h.verdict, GOSSIP_PLAN_HEALTHY);
        assert_true(h.used >= 0.75f);
        /* EWMA with weight 1/N from 0: 1 - (1 - 1/N)^k >= 0.75 needs
         * k >= ln 4 / -ln(1 - 1/N), 44 for N = 32 */
        assert_in_range(k + 1, 40, 48);
        /* a mix at 60% used never degrades a healthy node */
        gossip_plan_health_init(&h);
        for (int i = 0; i < 10 * N; i++)
                assert_int_equal(
                    gossip_plan_health_note(
                        &h, i % 5 < 3 ? GOSSIP_PLAN_USED : GOSSIP_PLAN_TOO_OLD),
                    0);
}

/* Nothing arriving: N timed-out waits in a row with no slice is starved;
 * one slice arriving ends it. Waits that are met never degrade. */
static void test_health_starved(void **state)
{
        struct gossip_plan_health h;
        char buf[128];
        const int N = GOSSIP_PLAN_HEALTH_N;

        (void)state;
        gossip_plan_health_init(&h);
        assert_int_equal(note_n(&h, GOSSIP_PLAN_WAIT_MET, 4 * N), 0);
        gossip_plan_health_init(&h);
        assert_int_equal(note_n(&h, GOSSIP_PLAN_WAIT_TIMEOUT, N - 1), 0);
        assert_int_equal(gossip_plan_health_note(&h, GOSSIP_PLAN_WAIT_TIMEOUT),
                         1);
        assert_int_equal(h.verdict, GOSSIP_PLAN_DEGRADED_STARVED);
        gossip_plan_health_say(&h, buf, sizeof(buf));
        assert_string_equal(buf, "degraded: no slice arrived in the last 32 "
                                 "averaging rounds (100% of waits timed out)");
        assert_int_equal(gossip_plan_health_note(&h, GOSSIP_PLAN_USED), 1);
        assert_int_equal(h.verdict, GOSSIP_PLAN_HEALTHY);
        /* timed-out waits while slices do arrive and are used: healthy */
        for (int i = 0; i < 8 * N; i++) {
                assert_int_equal(
                    gossip_plan_health_note(&h, GOSSIP_PLAN_WAIT_TIMEOUT), 0);
                if (i % 4 == 0)
                        assert_int_equal(
                            gossip_plan_health_note(&h, GOSSIP_PLAN_USED), 0);
        }
        assert_int_equal(gossip_plan_health_note(&h, 99), 0);
}

/* A starting node: no one ahead, started together (take the step), or a
 * live join into a running cluster (fetch the state); the edges. */
/* The load waits for the join: an answer and the greetings written, or
 * the hold's end, whichever comes first. */
static void test_may_load(void **state)
{
        const uint64_t h = GOSSIP_PLAN_LOAD_HOLD_MS;

        (void)state;
        /* no answer yet: held until the hold ends, not a ms longer */
        assert_false(gossip_plan_may_load(0, 0, 0));
        assert_false(gossip_plan_may_load(0, 0, h - 1));
        assert_true(gossip_plan_may_load(0, 0, h));
        assert_true(gossip_plan_may_load(0, 5000, h + 1));
        /* answered, greetings still queued: held */
        assert_false(gossip_plan_may_load(1, 1, 10));
        assert_false(gossip_plan_may_load(1, 3000, h - 1));
        /* answered and nothing queued: at once */
        assert_true(gossip_plan_may_load(1, 0, 0));
        assert_true(gossip_plan_may_load(1, 0, 350));
}

static void test_join(void **state)
{
        const uint64_t a = GOSSIP_PLAN_JOIN_ADOPT_STEPS;

        (void)state;
        assert_int_equal(gossip_plan_join(0, 0), GOSSIP_PLAN_JOIN_NONE);
        assert_int_equal(gossip_plan_join(7, 3), GOSSIP_PLAN_JOIN_NONE);
        assert_int_equal(gossip_plan_join(0, 1), GOSSIP_PLAN_JOIN_ADOPT);
        assert_int_equal(gossip_plan_join(0, 6), GOSSIP_PLAN_JOIN_ADOPT);
        assert_int_equal(gossip_plan_join(0, a), GOSSIP_PLAN_JOIN_ADOPT);
        assert_int_equal(gossip_plan_join(0, a + 1), GOSSIP_PLAN_JOIN_FETCH);
        assert_int_equal(gossip_plan_join(0, 300), GOSSIP_PLAN_JOIN_FETCH);
        /* the lead counts, not the step */
        assert_int_equal(gossip_plan_join(5000, 5000 + a),
                         GOSSIP_PLAN_JOIN_ADOPT);
        assert_int_equal(gossip_plan_join(5000, 5001 + a),
                         GOSSIP_PLAN_JOIN_FETCH);
        assert_int_equal(gossip_plan_join(0, UINT64_MAX),
                         GOSSIP_PLAN_JOIN_FETCH);
}

/* A join storm: 1,200 joiners with random keys over 16 members, 12 of them
 * within GOSSIP_PLAN_SOURCE_STEPS of the front: no one asks a member
 * further back, and each front member gets its share (100 expected; the
 * old rule sent all 1,200 to the furthest). A retry asks another member;
 * the edges. */
static void test_state_source(void **state)
{
        const uint64_t w = GOSSIP_PLAN_SOURCE_STEPS;
        uint64_t steps[16], s = 20261205;
        unsigned got[16] = {0};

        (void)state;
        for (size_t i = 0; i < 16; i++) /* 4 behind: 5000 - 9 .. - 300 */
                steps[i] =
                    i < 12 ? 5000 - (i % (w + 1)) : 5000 - w - 1 - i * 20;
        for (int j = 0; j < 1200; j++) {
                uint64_t key = s += 0x9e3779b97f4a7c15ULL;

                key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ULL;
                key ^= key >> 27;
                size_t a = gossip_plan_state_source(steps, NULL, 16, key);
                size_t b = gossip_plan_state_source(steps, NULL, 16, key + 1);

                assert_true(a < 12 && b < 12);
                assert_true(a != b);
                got[a]++;
        }
        for (size_t i = 0; i < 16; i++) {
                printf("member %zu (step %llu): %u askers\n", i,
                       (unsigned long long)steps[i], got[i]);
                if (i < 12)
                        assert_in_range(got[i], 60, 140);
                else
                        assert_int_equal(got[i], 0);
        }
        /* one member; all at one step; the front at exactly the edge */
        assert_int_equal(gossip_plan_state_source(steps, NULL, 1, 77), 0);
        steps[0] = steps[1] = steps[2] = 42;
        assert_int_equal(gossip_plan_state_source(steps, NULL, 3, 4), 1);
        steps[0] = 100;
        steps[1] = 100 - w;
        steps[2] = 100 - w - 1;
        assert_int_equal(gossip_plan_state_source(steps, NULL, 3, 1), 1);
        assert_int_equal(gossip_plan_state_source(steps, NULL, 3, 2), 0);
        /* steps near 0: no wrap below zero */
        steps[0] = 3;
        steps[1] = 0;
        assert_int_equal(gossip_plan_state_source(steps, NULL, 2, 1), 1);
}

/* A member still loading is asked only when every member loads: the
 * furthest one loading leaves the front to the others (its step does not
 * set the floor), and a fleet starting together still finds a source. */
static void test_state_source_loading(void **state)
{
        uint64_t steps[5] = {900, 500, 498, 495, 480};
        uint8_t loading[5] = {1, 0, 0, 0, 0};
        unsigned got[5] = {0};

        (void)state;
        for (uint64_t pick = 0; pick < 300; pick++)
                got[gossip_plan_state_source(steps, loading, 5, pick)]++;
        /* 500, 498, 495 within 8 of 500; 480 is not; 900 loads */
        assert_int_equal(got[0], 0);
        assert_int_equal(got[1], 100);
        assert_int_equal(got[2], 100);
        assert_int_equal(got[3], 100);
        assert_int_equal(got[4], 0);
        /* a loading member near the front is skipped as well */
        steps[0] = 499;
        for (uint64_t pick = 0; pick < 30; pick++)
                assert_true(gossip_plan_state_source(steps, loading, 5, pick) !=
                            0);
        /* all loading: as without the flags */
        memset(loading, 1, sizeof(loading));
        steps[0] = 900;
        for (uint64_t pick = 0; pick < 30; pick++)
                assert_int_equal(
                    gossip_plan_state_source(steps, loading, 5, pick),
                    gossip_plan_state_source(steps, NULL, 5, pick));
        assert_int_equal(gossip_plan_state_source(steps, loading, 5, 7), 0);
}

/* A node at a quarter of the schedule's pace (it trains 10 steps, then
 * the catch-up skips 30) has a pace ratio of 4; a node that never skips
 * 1 exactly; the cap holds; a node freed of its slowness
 * returns to 1.1 within a few windows (header: 1,561 steps). */
static void test_pace_ratio(void **state)
{
        struct gossip_plan_pace p = {0};
        uint64_t passed = 0;

        (void)state;
        assert_true(gossip_plan_pace_ratio(&p, 4.0) == 1.0); /* nothing */
        for (int i = 0; i < 3000; i++)
                gossip_plan_pace_note(&p, 1, 1);
        assert_true(gossip_plan_pace_ratio(&p, 4.0) == 1.0);  /* uniform */
        assert_true(p.passed <= 2 * GOSSIP_PLAN_PACE_WINDOW); /* bounded */
        memset(&p, 0, sizeof(p));
        for (int r = 0; r < 100; r++) {
                for (int i = 0; i < 10; i++)
                        gossip_plan_pace_note(&p, 1, 1);
                gossip_plan_pace_note(&p, 30, 0);
        }
        assert_true(fabs(gossip_plan_pace_ratio(&p, 8.0) - 4.0) < 0.3);
        assert_true(gossip_plan_pace_ratio(&p, 2.5) == 2.5); /* capped */
        assert_true(gossip_plan_pace_ratio(&p, 1.0) == 1.0); /* off */
        assert_true(gossip_plan_pace_ratio(&p, 0.5) == 1.0);
        /* freed: it trains every step again */
        while (gossip_plan_pace_ratio(&p, 8.0) > 1.1) {
                gossip_plan_pace_note(&p, 1, 1);
                passed++;
        }
        assert_true(passed > GOSSIP_PLAN_PACE_WINDOW / 2); /* not at once */
        assert_true(passed <= 4 * GOSSIP_PLAN_PACE_WINDOW);
        /* a trained step is a step passed: never a ratio below 1 */
        memset(&p, 0, sizeof(p));
        gossip_plan_pace_note(&p, 1, 5);
        assert_true(p.trained == 1 && gossip_plan_pace_ratio(&p, 4) == 1.0);
}

/* A node behind every recent partner skips to their pace; not when one
 * partner alone is ahead, not off a round's end, never past a window. */
static void test_catch_up(void **state)
{
        struct gossip_plan_cfg c = base_cfg();
        struct gossip_plan_leads l = {0};
        uint64_t w;

        (void)state;
        c.avg_every = 8;
        c.avg_lag = 3;
        c.staleness = 16;
        w = gossip_plan_window(&c, 0); /* 4 * 8 + 16 = 48 */
        assert_int_equal(w, 48);
        /* too few arrivals for 4 members */
        gossip_plan_leads_note(&l, 140, 100);
        gossip_plan_leads_note(&l, 142, 100);
        assert_int_equal(gossip_plan_catch_up(&c, 104, 4, &l), 0);
        /* every one of the last three ahead by 40 or more: skip 40 */
        gossip_plan_leads_note(&l, 145, 104);
        assert_int_equal(gossip_plan_catch_up(&c, 104, 4, &l), 40);
        /* not at a step that ends no round */
        assert_int_equal(gossip_plan_catch_up(&c, 105, 4, &l), 0);
        /* rounded down to a multiple of K */
        gossip_plan_leads_note(&l, 150, 104); /* last three: 42, 41, 46 */
        assert_int_equal(gossip_plan_catch_up(&c, 104, 4, &l), 40);
        /* one partner in sync among them: no skip */
        gossip_plan_leads_note(&l, 105, 104);
        assert_int_equal(gossip_plan_catch_up(&c, 104, 4, &l), 0);
        /* half a window or less is the plan working: no skip */
        memset(&l, 0, sizeof(l));
        for (int i = 0; i < 3; i++)
                gossip_plan_leads_note(&l, 124, 100);
        assert_int_equal(gossip_plan_catch_up(&c, 104, 4, &l), 0);
        gossip_plan_leads_note(&l, 125, 100);
        gossip_plan_leads_note(&l, 125, 100);
        gossip_plan_leads_note(&l, 125, 100); /* 25 > 24 */
        assert_int_equal(gossip_plan_catch_up(&c, 104, 4, &l), 24);
        /* a step of 2^64 - 1 moves us by one window at most */
        for (int i = 0; i < 3; i++)
                gossip_plan_leads_note(&l, UINT64_MAX, 100);
        assert_int_equal(gossip_plan_catch_up(&c, 104, 4, &l), 48);
        /* behind, old slices (negative leads) say we are not behind */
        for (int i = 0; i < 3; i++)
                gossip_plan_leads_note(&l, 10, UINT64_MAX);
        assert_int_equal(gossip_plan_catch_up(&c, 104, 4, &l), 0);
        /* two members: the one partner decides; alone: never */
        memset(&l, 0, sizeof(l));
        gossip_plan_leads_note(&l, 200, 100);
        assert_int_equal(gossip_plan_catch_up(&c, 104, 2, &l), 48);
        assert_int_equal(gossip_plan_catch_up(&c, 104, 1, &l), 0);
        /* no averaging of our own: never */
        c.avg_every = 0;
        assert_int_equal(gossip_plan_catch_up(&c, 104, 2, &l), 0);
        /* a large cluster looks at the last GOSSIP_PLAN_LEADS only */
        c.avg_every = 8;
        memset(&l, 0, sizeof(l));
        gossip_plan_leads_note(&l, 0, 100); /* pushed out below */
        for (int i = 0; i < GOSSIP_PLAN_LEADS; i++)
                gossip_plan_leads_note(&l, 140, 100);
        assert_int_equal(gossip_plan_catch_up(&c, 104, 20, &l), 40);
}

/* gossip_plan_far_behind: every recent partner more than 8 windows ahead
 * (window 48: 384 steps) asks for a state; skipping covers the rest. */
static void test_far_behind(void **state)
{
        struct gossip_plan_cfg c = base_cfg();
        struct gossip_plan_leads l = {0};

        (void)state;
        c.avg_every = 8;
        c.avg_lag = 3;
        c.staleness = 16;
        assert_int_equal(GOSSIP_PLAN_FAR_WINDOWS * gossip_plan_window(&c, 0),
                         384);
        for (int i = 0; i < 3; i++)
                gossip_plan_leads_note(&l, 1705, 120); /* 1585 ahead */
        assert_true(gossip_plan_far_behind(&c, 120, 4, &l));
        assert_false(gossip_plan_far_behind(&c, 121, 4, &l)); /* no round */
        /* too few arrivals for 4 members */
        assert_false(gossip_plan_far_behind(&c, 120, 5, &l));
        /* one partner near us: not far, whatever the others say */
        gossip_plan_leads_note(&l, 130, 120);
        assert_false(gossip_plan_far_behind(&c, 120, 4, &l));
        /* exactly 8 windows is still skipping's; one more step is not */
        memset(&l, 0, sizeof(l));
        for (int i = 0; i < 3; i++)
                gossip_plan_leads_note(&l, 120 + 384, 120);
        assert_false(gossip_plan_far_behind(&c, 120, 4, &l));
        gossip_plan_leads_note(&l, 120 + 385, 120);
        gossip_plan_leads_note(&l, 120 + 385, 120);
        gossip_plan_leads_note(&l, 120 + 385, 120);
        assert_true(gossip_plan_far_behind(&c, 120, 4, &l));
        /* far ahead of them (negative leads), or alone: never */
        memset(&l, 0, sizeof(l));
        for (int i = 0; i < 3; i++)
                gossip_plan_leads_note(&l, 0, 5000);
        assert_false(gossip_plan_far_behind(&c, 5000, 4, &l));
        assert_false(gossip_plan_far_behind(&c, 120, 1, &l));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_admit_table),
            cmocka_unit_test(test_may_load),
            cmocka_unit_test(test_params_sequence),
            cmocka_unit_test(test_params_arrival),
            cmocka_unit_test(test_gradient_sequence),
            cmocka_unit_test(test_last_step),
            cmocka_unit_test(test_stopping_always_ready),
            cmocka_unit_test(test_cfg_valid),
            cmocka_unit_test(test_due_round_slot),
            cmocka_unit_test(test_slices_tile),
            cmocka_unit_test(test_slice_use),
            cmocka_unit_test(test_other_period),
            cmocka_unit_test(test_answered),
            cmocka_unit_test(test_judge_table),
            cmocka_unit_test(test_join),
            cmocka_unit_test(test_state_source),
            cmocka_unit_test(test_state_source_loading),
            cmocka_unit_test(test_catch_up),
            cmocka_unit_test(test_pace_ratio),
            cmocka_unit_test(test_far_behind),
            cmocka_unit_test(test_health_too_old),
            cmocka_unit_test(test_health_starved),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
