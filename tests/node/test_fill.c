/*
 * test_fill.c - extra batches trained while a node waits (--fill-batches,
 * node_trainer_extra_batch): the next step's gradient is the
 * sample-weighted mean over its own batch and the extra ones, recomputed
 * here independently from the same shard order and parameters; the
 * counters; --epochs still means the schedule's number of steps; a trainer
 * made without --fill-batches refuses. Needs Fashion-MNIST (exit 77 if it
 * is not installed).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "data.h"
#include "nn.h"
#include "options.h"
#include "trainer.h"

static const char *data_dir = "/usr/share/datasets/fashion-mnist";

/* What the hooks saw. */
struct seen {
        int extra_rc[2];
        int extra_calls;
        float *grads;  /* gradient handed to the exchange of step 1 */
        float *params; /* parameters at that point */
        size_t n;
};

static void hook_after(void *ctx, struct node_trainer *t, uint64_t step,
                       float *params, size_t n)
{
        struct seen *s = ctx;

        (void)params;
        (void)n;
        if (step == 1 && s->extra_calls == 0) {
                s->extra_rc[0] = node_trainer_extra_batch(t);
                s->extra_rc[1] = node_trainer_extra_batch(t);
                s->extra_calls = 2;
        }
}

static void hook_exchange(void *ctx, struct node_trainer *t, uint64_t step,
                          float *grads, size_t n)
{
        struct seen *s = ctx;

        if (step != 1 || s->grads)
                return;
        s->n = n;
        s->grads = malloc(n * sizeof(float));
        s->params = malloc(n * sizeof(float));
        assert_non_null(s->grads);
        assert_non_null(s->params);
        memcpy(s->grads, grads, n * sizeof(float));
        memcpy(s->params, nn_model_params(node_trainer_model(t)),
               n * sizeof(float));
}

static void parse(struct node_options *o, const char *fill)
{
        char err[256];
        char *argv[] = {"gossipnode",     "--data",      (char *)data_dir,
                        "--batch",        "20",          "--shard",
                        "0/100",          "--epochs",    "1",
                        "--seed",         "7",           "--eval-every",
                        "1000",           "--fill-size", "5",
                        "--fill-batches", (char *)fill,  "--log-level",
                        "error",          NULL};
        int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;

        node_options_default(o);
        assert_int_equal(node_options_parse(argc, argv, o, err, sizeof(err)),
                         0);
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
        struct node_trainer_hooks h = {0};
        struct node_trainer *t = NULL;
        struct node_train_stats st;
        struct seen s = {0};
        struct nn_dataset all = {0}, shard = {0}; /* shard: a view */
        struct nn_batcher b;
        struct nn_model *m = NULL;
        char err[512];
        float *x, *want;
        uint8_t *y;
        double maxdiff = 0, maxg = 0;

        (void)state;
        parse(&o, "2");
        h.after_step = hook_after;
        h.exchange = hook_exchange;
        h.ctx = &s;
        assert_int_equal(
            node_trainer_create(&o, &h, NULL, &t, err, sizeof(err)), 0);
        assert_int_equal(node_trainer_run(t), 0);
        node_trainer_stats(t, &st);
        assert_int_equal(s.extra_calls, 2);
        assert_int_equal(s.extra_rc[0], 0);
        assert_int_equal(s.extra_rc[1], 0);
        assert_non_null(s.grads);
        assert_int_equal(st.extra_batches, 2);
        /* 600 samples / 20 = 30 steps: the extra batches do not shorten
         * the epoch budget; they count as samples: 29 full batches, the
         * 10 extra samples and a last batch of the 10 left make exactly
         * one pass (590 if the extra ones were not counted) */
        assert_int_equal(st.step, 30);
        assert_int_equal(st.stop_reason, NODE_STOP_EPOCHS);
        assert_int_equal(st.samples, 600);

        /* the same order: step 0 (20), the two extra batches (5 + 5), then
         * step 1's own batch (20) */
        assert_int_equal(
            nn_dataset_load_dir(data_dir, 1, &all, err, sizeof(err)), 0);
        assert_int_equal(nn_dataset_shard(&all, 0, 100, &shard), 0);
        assert_int_equal(nn_batcher_init(&b, &shard, 7), 0);
        assert_int_equal(
            nn_model_create(node_trainer_spec(t), 1, 28, 28, 7, &m), 0);
        assert_int_equal(nn_model_reserve(m, 20), 0);
        assert_int_equal(nn_model_nparams(m), s.n);
        memcpy(nn_model_params(m), s.params, s.n * sizeof(float));
        x = malloc(20 * nn_dataset_sample_size(&shard) * sizeof(float));
        y = malloc(20);
        want = calloc(s.n, sizeof(float));
        assert_non_null(x);
        assert_non_null(y);
        assert_non_null(want);
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
        free(x);
        free(y);
        free(want);
        nn_model_free(m);
        nn_batcher_free(&b);
        nn_dataset_free(&all);
        node_trainer_free(t);
        free(s.grads);
        free(s.params);
}

static void test_fill_off(void **state)
{
        struct node_options o;
        struct node_trainer *t = NULL;
        char err[512];

        (void)state;
        parse(&o, "0");
        assert_int_equal(
            node_trainer_create(&o, NULL, NULL, &t, err, sizeof(err)), 0);
        assert_int_equal(node_trainer_extra_batch(t), NN_EINVAL);
        node_trainer_free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_fill_gradient),
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
