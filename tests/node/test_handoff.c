/*
 * test_handoff.c - the box between the loop and the training thread
 * (node/train/handoff.c), driven from both sides.
 *
 * Shows: a ring slot's state decides what a peer's slice of its round is
 * averaged against, read from the floats it leaves: FILLING (the
 * optimizer's writes are what is posted, not a later copy), POSTED (the
 * loop has it: a valid copy, never handed out or posted again, the post
 * counted busy), HELD (a valid copy that may be overwritten), FILLING again
 * (no valid copy: plainly) and FREE after a rollback (plainly). A full
 * inbox drops its oldest slices, counts each, keeps the newest and judges
 * the last arrival first; every slice received is accounted for. Across
 * two threads: a trainer blocked in a PARAMS wait (deadline 60 s) returns
 * when the loop thread delivers the slice it waits for, or when the run
 * stops, with the outcome the plan gives (READY, not timed out); a
 * trainer awaiting a peer's state returns with it when it is delivered,
 * and returns -ECANCELED well before its own timeout when the run stops.
 * The cluster-wide stop in the box: one member's reason asks the trainer
 * to evaluate and is judged by its accuracy, a second member's vote is a
 * quorum that stops the run at once, and the reason kept is the first.
 * Every wait here is bounded (WAIT_BOUND_MS) so a broken wake fails the
 * test instead of hanging it. Deterministic: no randomness.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/handoff.h"

enum {
        NPARAMS = 64, /* two slices of 32 */
        /* How long the test waits for a thread that should return at
         * once: generous for a loaded 2-core machine, far below the 60 s
         * deadline of the waits it bounds. */
        WAIT_BOUND_MS = 20000,
        /* How long a thread that should be blocked is watched ("not yet") */
        NOT_YET_MS = 50,
};

static atomic_int wakes; /* the loop was woken (wake_loop) */

static void count_wake(void *ctx)
{
        (void)ctx;
        atomic_fetch_add(&wakes, 1);
}

/* K = 2, R = 1, P = 2, S = 3 (window (R + 1) K + S = 7), no extra
 * batches, robust merge off, a weight of 0.5; two members alive. */
static struct node_handoff *box_make(uint32_t wait_ms, int robust)
{
        struct node_handoff_cfg cfg = {
            .plan = {.nparams = NPARAMS,
                     .avg_every = 2,
                     .avg_lag = 1,
                     .parts = 2,
                     .staleness = 3,
                     .fill_batches = 0,
                     .wait_ms = wait_ms,
                     .grads = 0},
            .avg_weight = 0.5f,
            .robust = robust,
            .wake_loop = count_wake,
        };
        struct node_handoff *h;

        assert_int_equal(node_handoff_create(&h, &cfg), 0);
        node_handoff_set_members(h, 2, UINT64_MAX);
        return h;
}

static struct node_handoff *box_new(uint32_t wait_ms)
{
        return box_make(wait_ms, 0);
}

static const uint8_t peer_key[GOSSIP_KEY_BYTES] = {7};

/* The loop decodes a peer's slice of step s (every float v) into the
 * spare and delivers it. */
static void deliver(struct node_handoff *h, uint64_t s, size_t lo, size_t count,
                    float v)
{
        float *spare = node_handoff_inbox_spare(h);

        for (size_t i = 0; i < count; i++)
                spare[i] = v;
        assert_int_equal(
            node_handoff_deliver_params(h, peer_key, s, 0, lo, count),
            GOSSIP_ROBUST_ACCEPTED);
}

static void fill(float *p, size_t n, float v)
{
        for (size_t i = 0; i < n; i++)
                p[i] = v;
}

static uint64_t mono_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* 1 once *flag is set, 0 if ms pass first. */
static int await_flag(atomic_int *flag, uint32_t ms)
{
        uint64_t end = mono_ms() + ms;
        struct timespec tick = {0, 1000000};

        while (!atomic_load(flag)) {
                if (mono_ms() >= end)
                        return 0;
                nanosleep(&tick, NULL);
        }
        return 1;
}

/* ---- slot states ---- */

static void test_slot_states(void **state)
{
        struct node_handoff *h = box_new(0);
        struct node_handoff_stats st;
        struct node_handoff_work w;
        float params[NPARAMS];
        size_t lo, count;
        uint32_t k;
        unsigned slot;
        float *dst;
        int wakes0;

        (void)state;
        /* step 2 ends round 1: part 1, [32, 64), ring slot 1 */
        fill(params, NPARAMS, 0.0f);
        dst = node_handoff_slice_dst(h, 2, &lo, &count);
        assert_non_null(dst);
        assert_int_equal(lo, 32);
        assert_int_equal(count, 32);
        /* FILLING: the optimizer writes our copy as it steps; posting
         * takes those floats, not the parameters passed */
        fill(dst, count, 0.5f);
        wakes0 = atomic_load(&wakes);
        node_handoff_post_params(h, 2, params, NPARAMS);
        assert_true(atomic_load(&wakes) > wakes0);
        node_handoff_take(h, &w);
        assert_int_equal(w.nslices, 1);
        assert_int_equal(w.slice_step[0], 2);
        slot = w.slot[0];
        assert_int_equal(slot, 1);
        assert_int_equal(node_handoff_slot_slice(h, slot, &lo, &count, &k), 1);
        assert_int_equal(lo, 32);
        assert_int_equal(count, 32);
        assert_int_equal(k, 2);
        assert_float_equal(node_handoff_slot(h, slot)[0], 0.5f, 0);
        assert_float_equal(node_handoff_slot(h, slot)[31], 0.5f, 0);

        /* POSTED: a valid copy; a peer's slice of step 2 (3.0) is averaged
         * as a difference against it: 0 + 0.5 (3 - 0.5) = 1.25 (plainly
         * would be 1.5). Each check below tells the two apart. */
        deliver(h, 2, 32, 32, 3.0f);
        node_handoff_average(h, 2, params, NPARAMS);
        assert_float_equal(params[32], 1.25f, 0);
        assert_float_equal(params[0], 0.0f, 0);
        /* POSTED is the loop's: round 9 (step 18) maps to the same slot
         * and gets neither the slot nor a post, counted busy */
        assert_null(node_handoff_slice_dst(h, 18, &lo, &count));
        node_handoff_post_params(h, 18, params, NPARAMS);
        node_handoff_take(h, &w);
        assert_int_equal(w.nslices, 0);
        node_handoff_stats(h, &st);
        assert_int_equal(st.params_busy, 1);
        assert_int_equal(st.params_delta, 1);

        /* HELD (the loop is done): still a valid copy of step 2 */
        node_handoff_slot_done(h, slot);
        deliver(h, 2, 32, 32, 3.0f);
        node_handoff_average(h, 4, params, NPARAMS);
        /* 1.25 + 0.5 (3 - 0.5); plainly 2.125 */
        assert_float_equal(params[32], 2.5f, 0);
        /* ... that the trainer may overwrite: FILLING holds no valid
         * copy, so step 2's slice is now averaged plainly */
        dst = node_handoff_slice_dst(h, 18, &lo, &count);
        assert_non_null(dst);
        deliver(h, 2, 32, 32, 3.0f);
        node_handoff_average(h, 4, params, NPARAMS);
        /* 2.5 + 0.5 (3 - 2.5); against our copy 3.75 */
        assert_float_equal(params[32], 2.75f, 0);
        node_handoff_stats(h, &st);
        assert_int_equal(st.params_delta, 2);
        assert_int_equal(st.params_applied, 3);

        /* POSTED again with step 18, then HELD; a rollback frees it:
         * step 18's slice is then averaged plainly */
        fill(dst, count, 1.5f);
        node_handoff_post_params(h, 18, params, NPARAMS);
        node_handoff_take(h, &w);
        assert_int_equal(w.nslices, 1);
        assert_int_equal(w.slice_step[0], 18);
        node_handoff_slot_done(h, w.slot[0]);
        node_handoff_forget_own(h);
        deliver(h, 18, 32, 32, 4.5f);
        node_handoff_average(h, 18, params, NPARAMS);
        /* 2.75 + 0.5 (4.5 - 2.75); against our copy 4.25 */
        assert_float_equal(params[32], 3.625f, 0);
        node_handoff_stats(h, &st);
        assert_int_equal(st.params_delta, 2);
        assert_int_equal(st.params_applied, 4);
        assert_int_equal(st.params_received, 4);
        node_handoff_free(h);
}

/* ---- quarantine after a model-health verdict ---- */

/* Robust merge on, our parameters all 1. Peer A's slice of step 2 (1.02)
 * is merged plainly at step 2; B has sent nothing. A verdict at step 3
 * back to a snapshot holding the merges up to step 1 refuses A only (1
 * peer). At step 4 A's slice (1.04) is refused, counted QUARANTINED
 * (not judged: no history bit), B's (1.08) is averaged: 1 + 0.5 x 0.08
 * = 1.04 (with A's too it would be 1.05). A verdict back to a snapshot
 * after A's merge refuses nobody (0). */
static void deliver_from(struct node_handoff *h, const uint8_t *key, uint64_t s,
                         size_t lo, size_t count, float v)
{
        float *spare = node_handoff_inbox_spare(h);

        for (size_t i = 0; i < count; i++)
                spare[i] = v;
        assert_int_equal(node_handoff_deliver_params(h, key, s, 0, lo, count),
                         GOSSIP_ROBUST_ACCEPTED);
}

static void test_quarantine(void **state)
{
        static const uint8_t a[GOSSIP_KEY_BYTES] = {1},
                             b[GOSSIP_KEY_BYTES] = {2};
        struct node_handoff *h = box_make(0, 1);
        struct node_handoff_stats st;
        struct gossip_robust_peer rp;
        float params[NPARAMS];

        (void)state;
        node_handoff_set_members(h, 3, UINT64_MAX);
        fill(params, NPARAMS, 1.0f);
        deliver_from(h, a, 2, 32, 32, 1.02f);
        node_handoff_average(h, 2, params, NPARAMS);
        assert_float_equal(params[32], 1.01f, 1e-6);
        assert_int_equal(node_handoff_quarantine(h, 2, 3), 0);
        assert_int_equal(node_handoff_quarantine(h, 1, 3), 1);
        fill(params, NPARAMS, 1.0f);
        deliver_from(h, a, 4, 0, 32, 1.04f);
        deliver_from(h, b, 4, 0, 32, 1.08f);
        node_handoff_average(h, 4, params, NPARAMS);
        assert_float_equal(params[0], 1.04f, 1e-6);
        node_handoff_stats(h, &st);
        assert_int_equal(st.robust[GOSSIP_ROBUST_QUARANTINED], 1);
        assert_int_equal(node_handoff_robust_peer(h, a, &rp), 0);
        assert_int_equal(rp.count[GOSSIP_ROBUST_QUARANTINED], 1);
        assert_int_equal(rp.count[GOSSIP_ROBUST_ACCEPTED], 1);
        assert_int_equal(rp.nhist, 1);
        assert_true(gossip_robust_peer_refused(&rp, 3 + 199));
        assert_false(gossip_robust_peer_refused(&rp, 3 + 200));
        /* a verdict at step 5 back to step 3: B (merged at 4) only; A
         * was refused, so nothing of it was merged since */
        assert_int_equal(node_handoff_quarantine(h, 3, 5), 1);
        node_handoff_free(h);
}

/* ---- the inbox ---- */

/* Six slices into an inbox of four (NODE_HANDOFF_INBOX): steps 2, 4, 6,
 * 8, 10, 12, each float its step; parts alternate by round (step 2: part
 * 1, 4: part 0, ...). Steps 2 and 4 are pushed out and counted. At step
 * 13 the window (7) still takes step 6, at its edge; all four are
 * averaged plainly, the last arrival first: part 0 = 0.5 * 12 = 6, then
 * 6 + 0.5 (8 - 6) = 7; part 1 = 0.5 * 10 = 5, then 5 + 0.5 (6 - 5) =
 * 5.5. Had 2 or 4 stayed, 8 gone before 12 or 6 been refused, the floats
 * would differ. A slice of step 6 at step 14 is one step too old. */
static void test_inbox_overflow(void **state)
{
        struct node_handoff *h = box_new(0);
        struct node_handoff_stats st;
        float params[NPARAMS];
        const uint64_t steps[] = {2, 4, 6, 8, 10, 12};

        (void)state;
        assert_int_equal(NODE_HANDOFF_INBOX, 4);
        fill(params, NPARAMS, 0.0f);
        for (size_t i = 0; i < 6; i++) {
                size_t lo = (steps[i] / 2) % 2 ? 32 : 0;

                deliver(h, steps[i], lo, 32, (float)steps[i]);
        }
        node_handoff_stats(h, &st);
        assert_int_equal(st.params_received, 6);
        assert_int_equal(st.params_replaced, 2);
        node_handoff_average(h, 13, params, NPARAMS);
        assert_float_equal(params[0], 7.0f, 0);
        assert_float_equal(params[32], 5.5f, 0);
        node_handoff_stats(h, &st);
        assert_int_equal(st.params_applied, 4);
        assert_int_equal(st.params_stale, 0);
        /* the inbox is empty: a second average moves nothing */
        assert_true(node_handoff_average(h, 13, params, NPARAMS) == 0.0);
        node_handoff_stats(h, &st);
        assert_int_equal(st.params_applied, 4);
        /* one step past the window: refused, counted, params untouched */
        deliver(h, 6, 32, 32, 6.0f);
        node_handoff_average(h, 14, params, NPARAMS);
        assert_float_equal(params[32], 5.5f, 0);
        node_handoff_stats(h, &st);
        assert_int_equal(st.params_stale, 1);
        assert_int_equal(st.params_answered, 0);
        /* nothing lost silently: each slice received is counted once */
        assert_int_equal(st.params_received, 7);
        assert_int_equal(st.params_received,
                         st.params_applied + st.params_stale +
                             st.params_answered + st.params_replaced);
        node_handoff_free(h);
}

/* ---- two threads: waits and what ends them ---- */

struct trainer {
        struct node_handoff *h;
        atomic_int waiting, done;
        int first, action, timed_out; /* the plan's answers */
        int rc;                       /* request_state */
        void *buf;
        size_t len;
};

/* Training thread: a PARAMS admission at step 4 (it wants a slice of
 * step >= 2 and none has come: WAIT, deadline 60 s); block once, then
 * ask again. */
static void *params_waiter(void *arg)
{
        struct trainer *t = arg;
        struct node_handoff_ask a;

        node_handoff_ask_begin(&a);
        t->first = node_handoff_admit(t->h, GOSSIP_PLAN_PARAMS, 4, 0, 0, &a);
        atomic_store(&t->waiting, 1);
        if (t->first == GOSSIP_PLAN_WAIT)
                node_handoff_wait(t->h, &a);
        t->action = node_handoff_admit(t->h, GOSSIP_PLAN_PARAMS, 4, 0, 0, &a);
        t->timed_out = a.d.timed_out;
        atomic_store(&t->done, 1);
        return NULL;
}

/* Start the waiter and see it blocked: its first answer is WAIT and it
 * has not returned NOT_YET_MS later. */
static void start_waiter(struct trainer *t, pthread_t *th, void *(*fn)(void *))
{
        assert_int_equal(pthread_create(th, NULL, fn, t), 0);
        assert_true(await_flag(&t->waiting, WAIT_BOUND_MS));
        assert_false(await_flag(&t->done, NOT_YET_MS));
}

/* Wait at most ms for the thread to finish, then join it (every wait in
 * the box has its own deadline, so the join ends even when the wake under
 * test is broken, and the thread never outlives the test's frame);
 * returns 1 if it finished within ms. */
static int finish(struct trainer *t, pthread_t th, uint32_t ms)
{
        int ok = await_flag(&t->done, ms);

        assert_int_equal(pthread_join(th, NULL), 0);
        return ok;
}

/* The loop thread (here, main) delivers the slice the trainer waits for. */
static void test_arrival_wakes_waiter(void **state)
{
        static struct trainer t; /* outlives the frame if a check fails */
        struct node_handoff_stats st;
        pthread_t th;

        (void)state;
        memset(&t, 0, sizeof(t));
        t.h = box_new(60000);
        start_waiter(&t, &th, params_waiter);
        assert_int_equal(t.first, GOSSIP_PLAN_WAIT);
        deliver(t.h, 2, 32, 32, 1.0f);
        assert_true(finish(&t, th, WAIT_BOUND_MS));
        assert_int_equal(t.action, GOSSIP_PLAN_READY);
        assert_int_equal(t.timed_out, 0);
        node_handoff_stats(t.h, &st);
        assert_int_equal(st.waits, 1);
        assert_int_equal(st.wait_timeouts, 0);
        node_handoff_free(t.h);
}

/* Any thread stops the run: the trainer's wait returns and the plan lets
 * it go (stopping), not timed out; a wait after the stop never blocks. */
static void test_stop_wakes_waiter(void **state)
{
        static struct trainer t; /* outlives the frame if a check fails */
        struct node_handoff_ask a;
        pthread_t th;

        (void)state;
        memset(&t, 0, sizeof(t));
        t.h = box_new(60000);
        start_waiter(&t, &th, params_waiter);
        assert_int_equal(t.first, GOSSIP_PLAN_WAIT);
        node_handoff_stop(t.h);
        assert_true(finish(&t, th, WAIT_BOUND_MS));
        assert_int_equal(t.action, GOSSIP_PLAN_READY);
        assert_int_equal(t.timed_out, 0);
        /* after the stop: READY at once */
        node_handoff_ask_begin(&a);
        assert_int_equal(
            node_handoff_admit(t.h, GOSSIP_PLAN_PARAMS, 6, 0, 0, &a),
            GOSSIP_PLAN_READY);
        node_handoff_free(t.h);
}

/* Training thread: a starting node asks for a peer's state. */
static void *state_waiter(void *arg)
{
        struct trainer *t = arg;
        char from[GOSSIP_NAME_MAX];
        uint64_t adopt;

        atomic_store(&t->waiting, 1);
        t->rc = node_handoff_request_state(t->h, 0, &t->buf, &t->len, from,
                                           sizeof(from), &adopt);
        atomic_store(&t->done, 1);
        return NULL;
}

/* The loop asks for a state (want_state) and delivers one: the trainer
 * gets it (1, the bytes). */
static void test_state_wakes_joiner(void **state)
{
        static struct trainer t; /* outlives the frame if a check fails */
        struct node_handoff_work w = {0};
        pthread_t th;
        uint64_t end = mono_ms() + WAIT_BOUND_MS;

        (void)state;
        memset(&t, 0, sizeof(t));
        t.h = box_new(0);
        start_waiter(&t, &th, state_waiter);
        /* the loop sees the request, then answers it */
        while (!w.want_state && mono_ms() < end)
                node_handoff_take(t.h, &w);
        assert_int_equal(w.want_state, 1);
        assert_int_equal(node_handoff_deliver_state(t.h, "state", 5, "peer"),
                         1);
        assert_true(finish(&t, th, WAIT_BOUND_MS));
        assert_int_equal(t.rc, 1);
        assert_int_equal(t.len, 5);
        assert_memory_equal(t.buf, "state", 5);
        free(t.buf);
        node_handoff_free(t.h);
}

/* The run stops while a starting node awaits a state: it returns
 * -ECANCELED before its own timeout (NODE_HANDOFF_STATE_WAIT_MS, 5 s),
 * which it would otherwise sleep out. */
static void test_stop_wakes_joiner(void **state)
{
        static struct trainer t; /* outlives the frame if a check fails */
        pthread_t th;

        (void)state;
        memset(&t, 0, sizeof(t));
        t.h = box_new(0);
        start_waiter(&t, &th, state_waiter);
        node_handoff_stop(t.h);
        assert_true(finish(&t, th, NODE_HANDOFF_STATE_WAIT_MS - 1000));
        assert_int_equal(t.rc, -ECANCELED);
        assert_null(t.buf);
        node_handoff_free(t.h);
}

static struct gossip_stop stop_reason(const char *origin)
{
        struct gossip_stop s = {0};

        s.reason = GOSSIP_STOP_TARGET;
        s.acc_bp = 9900;
        s.target_bp = 9900;
        snprintf(s.origin, sizeof(s.origin), "%s", origin);
        return s;
}

static void test_stop_peer_votes(void **state)
{
        struct node_handoff *h = box_new(0);
        struct gossip_stop a = stop_reason(""), b = stop_reason("b"), got;
        struct gossip_stop_verdict v;
        uint8_t ka[GOSSIP_KEY_BYTES] = {1}, kb[GOSSIP_KEY_BYTES] = {2};
        int news = -1;

        (void)state;
        node_handoff_set_members(h, 3, UINT64_MAX); /* us + 2 */
        /* one member: counted, the trainer asked to evaluate */
        assert_int_equal(node_handoff_stop_peer(h, ka, "a", &a, 8800, &v),
                         NODE_HANDOFF_STOP_ASKED);
        assert_int_equal(node_handoff_stop_peer(h, ka, "a", &a, 8800, &v),
                         NODE_HANDOFF_STOP_IGNORED); /* once per key */
        assert_int_equal(node_handoff_stop_eval_wanted(h), 1);
        assert_int_equal(node_handoff_stop_reason(h, NULL), 0);
        /* our accuracy far below: train on, the news told once */
        assert_int_equal(node_handoff_stop_check(h, 5000, 8800, &v, &news),
                         GOSSIP_STOP_WAIT);
        assert_int_equal(news, 1);
        assert_int_equal(v.have, 1);
        assert_int_equal(v.need, 2);
        assert_int_equal(node_handoff_stop_eval_wanted(h), 0);
        assert_int_equal(node_handoff_stop_check(h, 5000, 8800, &v, &news),
                         GOSSIP_STOP_WAIT);
        assert_int_equal(news, 0);
        /* a left: us and b alive; b's own vote: 2 of 2, stop now */
        node_handoff_set_members(h, 2, UINT64_MAX);
        assert_int_equal(node_handoff_stop_peer(h, kb, "b", &b, 8800, &v),
                         NODE_HANDOFF_STOP_NOW);
        assert_int_equal(node_handoff_stop_reason(h, &got), 2);
        assert_string_equal(got.origin, "a"); /* the first, named */
        node_handoff_free(h);
}

static void test_stop_own_accuracy(void **state)
{
        struct node_handoff *h = box_new(0);
        struct gossip_stop a = stop_reason("");
        uint8_t ka[GOSSIP_KEY_BYTES] = {1};
        int news;

        (void)state;
        node_handoff_set_members(h, 3, UINT64_MAX);
        node_handoff_stop_peer(h, ka, "a", &a, 8800, NULL);
        assert_int_equal(node_handoff_stop_check(h, 8699, 8800, NULL, &news),
                         GOSSIP_STOP_WAIT);
        assert_int_equal(node_handoff_stop_reason(h, NULL), 0);
        assert_int_equal(node_handoff_stop_check(h, 8700, 8800, NULL, &news),
                         GOSSIP_STOP_BY_OWN);
        assert_int_equal(node_handoff_stop_reason(h, NULL), 2);
        node_handoff_free(h);
}

/* Under the robust merge a slice far ahead is refused, but its lead is
 * noted: a node that far behind every partner must see that it is
 * (gossip_plan_far_behind) and ask for a peer's state. Before 2026-12-05
 * the box dropped such leads and the node stayed behind for good. */
static void test_far_ahead_noted(void **state)
{
        struct node_handoff *h = box_make(0, 1);
        struct node_handoff_stats st;
        float *spare;

        (void)state; /* one partner (box_make): m = 1 */
        /* window (1 + 1) 2 + 3 = 7: 8 windows are 56 steps; 1000 is far */
        spare = node_handoff_inbox_spare(h);
        fill(spare, 32, 1.0f);
        assert_int_equal(
            node_handoff_deliver_params(h, peer_key, 1000, 0, 0, 32),
            GOSSIP_ROBUST_WINDOW);
        node_handoff_stats(h, &st);
        assert_int_equal(st.params_stale, 1);
        assert_false(node_handoff_far_behind(h, 1)); /* no round ends */
        assert_true(node_handoff_far_behind(h, 2));
        /* the leads were cleared: asked once, not at every round */
        assert_false(node_handoff_far_behind(h, 4));
        /* a lead inside 8 windows is skipping's, not a state's */
        spare = node_handoff_inbox_spare(h);
        fill(spare, 32, 1.0f);
        node_handoff_deliver_params(h, peer_key, 40, 0, 0, 32);
        assert_false(node_handoff_far_behind(h, 2));
        assert_int_equal(node_handoff_catch_up(h, 2, 1000), 6);
        /* the robust box takes a sender's (step, slice) once */
        spare = node_handoff_inbox_spare(h);
        fill(spare, 32, 1.0f);
        assert_int_equal(node_handoff_deliver_params(h, peer_key, 3, 0, 0, 32),
                         GOSSIP_ROBUST_ACCEPTED);
        spare = node_handoff_inbox_spare(h);
        fill(spare, 32, 1.0f);
        assert_int_equal(node_handoff_deliver_params(h, peer_key, 3, 0, 0, 32),
                         GOSSIP_ROBUST_DUPLICATE);
        node_handoff_stats(h, &st);
        assert_int_equal(st.params_dup, 1);
        assert_int_equal(st.robust[GOSSIP_ROBUST_DUPLICATE], 1);
        node_handoff_free(h);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_slot_states),
            cmocka_unit_test(test_inbox_overflow),
            cmocka_unit_test(test_quarantine),
            cmocka_unit_test(test_arrival_wakes_waiter),
            cmocka_unit_test(test_stop_wakes_waiter),
            cmocka_unit_test(test_state_wakes_joiner),
            cmocka_unit_test(test_stop_wakes_joiner),
            cmocka_unit_test(test_stop_peer_votes),
            cmocka_unit_test(test_stop_own_accuracy),
            cmocka_unit_test(test_far_ahead_noted),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
