/*
 * test_fill.c - extra batches trained while a node waits (--fill-batches):
 * a real trainer attached to a real hand-off box, with this test in the
 * loop thread's place (it takes what the trainer posts, answers the join
 * with "no state", and never delivers a slice, so every averaging round
 * past the lag waits). The plan then says TRAIN_MORE twice per step; the
 * next step's gradient is the sample-weighted mean over its own batch and
 * the extra ones, recomputed here independently from the same shard order
 * and parameters; the counters; --epochs still means the schedule's number
 * of steps; no extra batch after the last step; a trainer made without
 * --fill-batches refuses; and the step time the adaptation budgets in
 * leaves the waits out. Needs Fashion-MNIST (exit 77 if it is not
 * installed).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/gn_bigbuf.h"
#include "nn/data.h"
#include "train/handoff.h"
#include "nn/nn.h"
#include "config/options.h"
#include "train/trainer.h"

static const char *data_dir = "/usr/share/datasets/fashion-mnist";

/* What the loop's side saw. */
struct seen {
        struct node_handoff *h;
        float *grads;  /* the gradient posted at step 2 */
        float *params; /* our slice of step 2 (P = 1: every parameter) */
        size_t n;
        int state_asked;
};

/* The box's wake-up: do at once what the loop thread would do. */
static void take(void *ctx)
{
        struct seen *s = ctx;
        struct node_handoff_work w;

        node_handoff_take(s->h, &w);
        if (w.grad && w.grad_step == 2 && !s->grads) {
                s->grads = malloc(s->n * sizeof(float));
                assert_non_null(s->grads);
                memcpy(s->grads, w.grad, s->n * sizeof(float));
        }
        for (int i = 0; i < w.nslices; i++) {
                if (w.slice_step[i] == 2 && !s->params) {
                        s->params = malloc(s->n * sizeof(float));
                        assert_non_null(s->params);
                        memcpy(s->params, node_handoff_slot(s->h, w.slot[i]),
                               s->n * sizeof(float));
                }
                node_handoff_slot_done(s->h, w.slot[i]);
        }
        gn_big_free(w.state);
        if (w.want_state) {
                s->state_asked++;
                node_handoff_no_state(s->h, 0); /* no one is ahead of us */
        }
}

static void parse(struct node_options *o, const char *fill, const char *shard)
{
        char err[256];
        char *argv[] = {"gossipnode",     "--data",      (char *)data_dir,
                        "--batch",        "20",          "--shard",
                        (char *)shard,    "--epochs",    "1",
                        "--seed",         "7",           "--eval-every",
                        "1000",           "--fill-size", "5",
                        "--fill-batches", (char *)fill,  "--log-level",
                        "error",          NULL};
        int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;

        node_options_default(o);
        assert_int_equal(node_options_parse(argc, argv, o, err, sizeof(err)),
                         0);
}

/* A box for t with this test in the loop's place and one peer alive:
 * averaging every step, one round of slack, the whole model as the
 * slice, `fill` extra batches per wait of wait_ms, gradients if grads. */
static void attach_box(struct seen *s, struct node_trainer *t, uint32_t fill,
                       uint32_t wait_ms, int grads)
{
        struct node_handoff_cfg hc = {0};

        s->n = node_trainer_nparams(t);
        hc.plan.nparams = s->n;
        hc.plan.avg_every = 1;
        hc.plan.avg_lag = 1;
        hc.plan.parts = 1;
        hc.plan.staleness = 16;
        hc.plan.fill_batches = fill;
        hc.plan.wait_ms = wait_ms;
        hc.plan.grads = grads;
        hc.avg_weight = 0.5f;
        hc.wake_loop = take;
        hc.ctx = s;
        assert_int_equal(node_handoff_create(&s->h, &hc), 0);
        node_handoff_set_members(s->h, 2, UINT64_MAX);
        node_trainer_attach(t, s->h);
}

/* g += w * (gradient of the model at its parameters over n samples) */
static void add_grad(struct nn_model *m, struct nn_batcher *b, float *x,
                     uint8_t *y, int n, float *acc, size_t np)
{
        const float *g;

        assert_int_equal(nn_batcher_next(b, x, y, n), n);
        assert_int_equal(nn_model_train_batch(m, x, y, n, NULL, NULL), 0);
        g = nn_model_grads(m);
        for (size_t i = 0; i < np; i++)
                acc[i] += (float)n * g[i];
}

static void test_fill_gradient(void **state)
{
        struct node_options o;
        struct node_trainer *t = NULL;
        struct node_train_stats st;
        struct node_handoff_stats hs;
        struct seen s = {0};
        struct nn_dataset all = {0}, shard = {0}; /* shard: a view */
        struct nn_batcher b;
        struct nn_model *m = NULL;
        char err[512];
        float *x, *want;
        uint8_t *y;
        double maxdiff = 0, maxg = 0;
        uint64_t samples = 0;

        (void)state;
        parse(&o, "2", "0/100");
        assert_int_equal(
            node_trainer_create(&o, NULL, NULL, &t, err, sizeof(err)), 0);
        /* gradients posted too, so the test sees the folded one */
        attach_box(&s, t, 2, 1, 1);
        assert_int_equal(node_trainer_run(t), 0);
        node_trainer_stats(t, &st);
        node_handoff_stats(s.h, &hs);
        assert_int_equal(s.state_asked, 1);
        assert_non_null(s.grads);
        assert_non_null(s.params);
        /* 600 samples / 20 = 30 steps whatever the extra batches take */
        assert_int_equal(st.step, 30);
        assert_int_equal(st.stop_reason, NODE_STOP_EPOCHS);
        /* the lag bound (t > R*K = 1) applies after steps 2..30; at 2..29
         * two extra batches, then a 1 ms wait that times out; after the
         * last step only the wait (no step would fold an extra batch) */
        assert_int_equal(st.extra_batches, 2 * 28);
        assert_int_equal(hs.waits, 29);
        assert_int_equal(hs.wait_timeouts, 29);
        assert_int_equal(hs.params_busy, 0);
        assert_int_equal(hs.params_received, 0);

        /* the same order: steps 0 and 1 (20 each), the two extra batches
         * after step 2 (5 + 5), then step 2's own batch (20) */
        assert_int_equal(
            nn_dataset_load_dir(data_dir, 1, &all, err, sizeof(err)), 0);
        assert_int_equal(nn_dataset_shard(&all, 0, 100, &shard), 0);
        assert_int_equal(nn_batcher_init(&b, &shard, 7), 0);
        assert_int_equal(
            nn_model_create(node_trainer_spec(t), 1, 28, 28, 7, &m), 0);
        assert_int_equal(nn_model_reserve(m, 20), 0);
        memcpy(nn_model_params(m), s.params, s.n * sizeof(float));
        x = malloc(20 * nn_dataset_sample_size(&shard) * sizeof(float));
        y = malloc(20);
        want = calloc(s.n, sizeof(float));
        assert_non_null(x);
        assert_non_null(y);
        assert_non_null(want);
        assert_int_equal(nn_batcher_next(&b, x, y, 20), 20);
        assert_int_equal(nn_batcher_next(&b, x, y, 20), 20);
        add_grad(m, &b, x, y, 5, want, s.n);
        add_grad(m, &b, x, y, 5, want, s.n);
        add_grad(m, &b, x, y, 20, want, s.n);
        for (size_t i = 0; i < s.n; i++) {
                double d = fabs((double)want[i] / 30.0 - (double)s.grads[i]);

                maxdiff = d > maxdiff ? d : maxdiff;
                maxg =
                    fabs((double)s.grads[i]) > maxg ? fabs(s.grads[i]) : maxg;
        }
        assert_true(maxg > 1e-3); /* a real gradient, not zeros */
        assert_true(maxdiff <= 1e-5 * (1.0 + maxg));

        /* every sample the trainer counted, replayed on a fresh batcher:
         * batch 20 at steps 0..29, extra 5 + 5 after steps 2..29 (a batch
         * may come short at the end of a pass) */
        nn_batcher_free(&b);
        assert_int_equal(nn_batcher_init(&b, &shard, 7), 0);
        for (int k = 0; k < 30; k++) {
                if (k >= 2) {
                        samples += (uint64_t)nn_batcher_next(&b, x, y, 5);
                        samples += (uint64_t)nn_batcher_next(&b, x, y, 5);
                }
                samples += (uint64_t)nn_batcher_next(&b, x, y, 20);
        }
        assert_int_equal(st.samples, samples);
        free(x);
        free(y);
        free(want);
        nn_model_free(m);
        nn_batcher_free(&b);
        nn_dataset_free(&all);
        node_trainer_free(t);
        node_handoff_free(s.h);
        free(s.grads);
        free(s.params);
}

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* How many times slower than native we run (1 natively; an emulator
 * sets GN_TEST_SLOWDOWN, cmake/Emulator.cmake), at most 20 here. */
static int slowdown(void)
{
        const char *s = getenv("GN_TEST_SLOWDOWN");
        int v = s ? atoi(s) : 1;

        return v < 1 ? 1 : v > 20 ? 20 : v;
}

/* The step time the adaptation budgets in (node_handoff_step_us) leaves
 * out the time a step stands in admission: with no slice ever delivered,
 * every step from the third on waits 60 ms (times the slowdown) and times
 * out. Left out, step_us is the wall time per step less its waits; the
 * test allows up to half a wait per step on top. Measured as wall time,
 * as it was, step_us is the whole of it (failed so: 56 of 77 ms) and
 * feeds the link's stalls back into the budget. */
static void test_step_time(void **state)
{
        const uint32_t wait_ms = 60 * (uint32_t)slowdown();
        struct node_options o;
        struct node_trainer *t = NULL;
        struct node_train_stats st;
        struct node_handoff_stats hs;
        struct seen s = {0};
        char err[512];
        double t0, wall_per_step, wait_per_step;

        (void)state;
        parse(&o, "0", "0/200"); /* 300 samples: 15 steps */
        assert_int_equal(
            node_trainer_create(&o, NULL, NULL, &t, err, sizeof(err)), 0);
        attach_box(&s, t, 0, wait_ms, 0);
        t0 = now_s();
        assert_int_equal(node_trainer_run(t), 0);
        node_trainer_stats(t, &st);
        node_handoff_stats(s.h, &hs);
        assert_int_equal(st.step, 15);
        assert_int_equal(hs.wait_timeouts, 14);
        wall_per_step = (now_s() - t0) / 15 * 1e6;
        assert_true(wall_per_step > wait_ms * 1000.0 * 14 / 15);
        assert_true(hs.step_us > 0);
        assert_true(hs.wait_s > 0);
        wait_per_step = hs.wait_s / 15 * 1e6;
        printf("step time %.0f us, wall time per step %.0f us, of which "
               "waiting %.0f us\n",
               hs.step_us, wall_per_step, wait_per_step);
        /* Measured against the waits themselves, not a share of the wall
         * time: a sanitizer build computes a step in about as long as a
         * wait (TSan on a Zen 3 host: 65 ms of 146), and a share failed
         * there with the waits left out. */
        if (hs.step_us > wall_per_step - 0.5 * wait_per_step)
                fail_msg("step time %.0f us of a wall time per step of %.0f "
                         "us, %.0f us of it waiting: the waits are counted "
                         "in it",
                         hs.step_us, wall_per_step, wait_per_step);
        node_trainer_free(t);
        node_handoff_free(s.h);
        free(s.grads);
        free(s.params);
}

static void test_fill_off(void **state)
{
        struct node_options o;
        struct node_trainer *t = NULL;
        char err[512];

        (void)state;
        parse(&o, "0", "0/100");
        assert_int_equal(
            node_trainer_create(&o, NULL, NULL, &t, err, sizeof(err)), 0);
        assert_int_equal(node_trainer_extra_batch(t), NN_EINVAL);
        node_trainer_free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_fill_gradient),
            cmocka_unit_test(test_step_time),
            cmocka_unit_test(test_fill_off),
        };

        if (access(data_dir, R_OK) != 0) {
                printf("SKIP: no Fashion-MNIST at %s\n", data_dir);
                return 77;
        }
        if (nn_lib_init() != 0)
                return 1;
        return cmocka_run_group_tests(tests, NULL, NULL);
}
