/*
 * test_optim.c - optimizers and learning-rate schedules against values
 * computed by hand (or, for Adam's square roots, in double precision by
 * the formula in nn.h): SGD, SGD with momentum, Nesterov, L2 weight decay,
 * Adam, AdamW; the state layout and step counter; the step that also
 * copies a slice; rejected configurations;
 * constant, step, cosine schedules with and without warm-up.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "nn.h"

#define TOL 1e-6

/* Runs steps updates of one parameter (p0) with the given gradients. */
static float run(const struct nn_optim_config *c, float p0, const float *g,
                 int steps, float lr, float *state0)
{
        struct nn_optim *o = NULL;
        float p = p0;

        assert_int_equal(nn_optim_create(c, 1, &o), 0);
        for (int i = 0; i < steps; i++)
                nn_optim_step(o, &p, &g[i], lr);
        assert_int_equal(nn_optim_steps(o), steps);
        if (state0)
                *state0 = nn_optim_state_len(o) ? nn_optim_state(o)[0] : 0;
        nn_optim_free(o);
        return p;
}

static void test_sgd_plain(void **state)
{
        struct nn_optim_config c = {.kind = NN_OPTIM_SGD};
        const float g[] = {0.5f, -1.0f};

        /* 1 - 0.1*0.5 = 0.95; 0.95 + 0.1 = 1.05 */
        assert_float_equal(run(&c, 1.0f, g, 1, 0.1f, NULL), 0.95, TOL);
        assert_float_equal(run(&c, 1.0f, g, 2, 0.1f, NULL), 1.05, TOL);
}

static void test_sgd_momentum(void **state)
{
        struct nn_optim_config c = {.kind = NN_OPTIM_SGD, .momentum = 0.9f};
        const float g[] = {0.5f, 0.5f, 0.5f};
        float v;

        /* v: 0.5, 0.95, 1.355; p: 0.95, 0.855, 0.7195 */
        assert_float_equal(run(&c, 1.0f, g, 1, 0.1f, &v), 0.95, TOL);
        assert_float_equal(v, 0.5, TOL);
        assert_float_equal(run(&c, 1.0f, g, 2, 0.1f, &v), 0.855, TOL);
        assert_float_equal(v, 0.95, TOL);
        assert_float_equal(run(&c, 1.0f, g, 3, 0.1f, &v), 0.7195, TOL);
        assert_float_equal(v, 1.355, TOL);
}

static void test_sgd_nesterov(void **state)
{
        struct nn_optim_config c = {
            .kind = NN_OPTIM_SGD, .momentum = 0.9f, .nesterov = 1};
        const float g[] = {0.5f, 0.5f};

        /* p -= lr (g + mu v): 1 - 0.1*(0.5 + 0.45) = 0.905;
         * v = 0.95: 0.905 - 0.1*(0.5 + 0.855) = 0.7695 */
        assert_float_equal(run(&c, 1.0f, g, 1, 0.1f, NULL), 0.905, TOL);
        assert_float_equal(run(&c, 1.0f, g, 2, 0.1f, NULL), 0.7695, TOL);
}

static void test_sgd_weight_decay(void **state)
{
        struct nn_optim_config c = {.kind = NN_OPTIM_SGD, .weight_decay = 0.1f};
        struct nn_optim_config cm = {
            .kind = NN_OPTIM_SGD, .momentum = 0.9f, .weight_decay = 0.1f};
        const float g[] = {0.5f, 0.5f};

        /* g' = 0.5 + 0.1*1 = 0.6 -> 0.94; g' = 0.5 + 0.094 -> 0.8806 */
        assert_float_equal(run(&c, 1.0f, g, 1, 0.1f, NULL), 0.94, TOL);
        assert_float_equal(run(&c, 1.0f, g, 2, 0.1f, NULL), 0.8806, TOL);
        /* momentum: v = 0.6 -> 0.94; v = 0.54 + 0.594 = 1.134 -> 0.8266 */
        assert_float_equal(run(&cm, 1.0f, g, 2, 0.1f, NULL), 0.8266, TOL);
}

static void test_adam(void **state)
{
        struct nn_optim_config c = {.kind = NN_OPTIM_ADAM,
                                    .beta1 = 0.9f,
                                    .beta2 = 0.999f,
                                    .eps = 1e-8f};
        const float g[] = {0.5f, -0.2f, 0.3f};

        /* Step 1: m^ = g, v^ = g^2 -> p -= lr * sign(g). */
        assert_float_equal(run(&c, 1.0f, g, 1, 0.1f, NULL), 0.9, TOL);
        /* Step 2 by hand: m = 0.025, v = 0.00028975, m^ = 0.025/0.19,
         * v^ = 0.00028975/0.001999 -> p = 0.86543942 */
        assert_float_equal(run(&c, 1.0f, g, 2, 0.1f, NULL), 0.8654394181, 2e-6);
        assert_float_equal(run(&c, 1.0f, g, 3, 0.1f, NULL), 0.8109953837, 2e-6);
}

static void test_adamw(void **state)
{
        struct nn_optim_config c = {.kind = NN_OPTIM_ADAM,
                                    .beta1 = 0.9f,
                                    .beta2 = 0.999f,
                                    .eps = 1e-8f,
                                    .weight_decay = 0.01f};
        const float g[] = {0.5f, -0.2f, 0.3f};

        /* Decoupled: p -= lr*wd*p on top: 0.9 - 0.001 = 0.899 */
        assert_float_equal(run(&c, 1.0f, g, 1, 0.1f, NULL), 0.899, TOL);
        assert_float_equal(run(&c, 1.0f, g, 3, 0.1f, NULL), 0.8082328433, 2e-6);
}

static void test_state_layout(void **state)
{
        struct nn_optim_config sgd = {.kind = NN_OPTIM_SGD, .momentum = 0.9f};
        struct nn_optim_config plain = {.kind = NN_OPTIM_SGD};
        struct nn_optim_config adam = {
            .kind = NN_OPTIM_ADAM, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f};
        struct nn_optim *o = NULL;
        float p[3] = {1, 2, 3}, g[3] = {1, -2, 4};

        assert_int_equal(nn_optim_create(&sgd, 3, &o), 0);
        assert_int_equal(nn_optim_state_len(o), 3);
        nn_optim_free(o);
        assert_int_equal(nn_optim_create(&plain, 3, &o), 0);
        assert_int_equal(nn_optim_state_len(o), 0);
        nn_optim_free(o);
        assert_int_equal(nn_optim_create(&adam, 3, &o), 0);
        assert_int_equal(nn_optim_state_len(o), 6);
        nn_optim_step(o, p, g, 0.01f);
        /* m then v, each in the parameters' layout. */
        assert_float_equal(nn_optim_state(o)[1], 0.1 * -2, TOL);
        assert_float_equal(nn_optim_state(o)[3 + 2], 0.01 * 16, TOL);
        /* Importing state and step count resumes the same trajectory. */
        struct nn_optim *o2 = NULL;
        float p2[3] = {p[0], p[1], p[2]};
        assert_int_equal(nn_optim_create(&adam, 3, &o2), 0);
        for (int i = 0; i < 6; i++)
                nn_optim_state(o2)[i] = nn_optim_state(o)[i];
        nn_optim_set_steps(o2, nn_optim_steps(o));
        nn_optim_step(o, p, g, 0.01f);
        nn_optim_step(o2, p2, g, 0.01f);
        assert_memory_equal(p, p2, sizeof(p));
        assert_int_equal(nn_optim_config(o2)->kind, NN_OPTIM_ADAM);
        nn_optim_free(o);
        nn_optim_free(o2);
}

/* xorshift32 in [-1, 1) */
static float rnd(uint32_t *x)
{
        *x ^= *x << 13;
        *x ^= *x >> 17;
        *x ^= *x << 5;
        return (float)(*x >> 8) / (float)(1u << 23) - 1.0f;
}

/* nn_optim_step_copy: the same parameters and state as nn_optim_step, and
 * the copy holds the updated slice (several blocks, a ragged end), clipped
 * to the model; no copy when the slice is empty or outside. */
static void test_step_copy(void **state)
{
        enum { N = 10007 };
        const struct nn_optim_config cfgs[] = {
            {.kind = NN_OPTIM_SGD},
            {.kind = NN_OPTIM_SGD, .momentum = 0.9f},
            {.kind = NN_OPTIM_SGD,
             .momentum = 0.9f,
             .nesterov = 1,
             .weight_decay = 1e-3f},
            {.kind = NN_OPTIM_ADAM,
             .beta1 = 0.9f,
             .beta2 = 0.999f,
             .eps = 1e-8f,
             .weight_decay = 1e-2f},
        };
        const struct {
                size_t lo, count, want;
        } cuts[] = {{1234, 7000, 7000},
                    {9000, 5000, 1007},
                    {0, N, N},
                    {5, 0, 0},
                    {N, 10, 0}};
        float *p1 = malloc(N * sizeof(float)), *p2 = malloc(N * sizeof(float));
        float *g = malloc(N * sizeof(float));
        float *copy = malloc((N + 1) * sizeof(float));
        uint32_t x = 12345;

        assert_non_null(p1);
        assert_non_null(p2);
        assert_non_null(g);
        assert_non_null(copy);
        for (size_t c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
                for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
                        struct nn_optim *o1 = NULL, *o2 = NULL;

                        assert_int_equal(nn_optim_create(&cfgs[c], N, &o1), 0);
                        assert_int_equal(nn_optim_create(&cfgs[c], N, &o2), 0);
                        for (size_t i = 0; i < N; i++)
                                p1[i] = p2[i] = rnd(&x);
                        for (int step = 0; step < 3; step++) {
                                for (size_t i = 0; i < N; i++)
                                        g[i] = rnd(&x);
                                for (size_t i = 0; i <= N; i++)
                                        copy[i] = -7.0f;
                                nn_optim_step(o1, p1, g, 0.05f);
                                nn_optim_step_copy(o2, p2, g, 0.05f, cuts[k].lo,
                                                   cuts[k].count, copy);
                                for (size_t i = 0; i < N; i++)
                                        assert_float_equal(p1[i], p2[i], 1e-6);
                                for (size_t i = 0; i < nn_optim_state_len(o1);
                                     i++)
                                        assert_float_equal(
                                            nn_optim_state(o1)[i],
                                            nn_optim_state(o2)[i], 1e-6);
                                for (size_t i = 0; i < cuts[k].want; i++)
                                        assert_true(copy[i] ==
                                                    p2[cuts[k].lo + i]);
                                /* nothing written past the clipped slice */
                                assert_true(copy[cuts[k].want] == -7.0f);
                        }
                        assert_int_equal(nn_optim_steps(o2), 3);
                        nn_optim_free(o1);
                        nn_optim_free(o2);
                }
        }
        /* no buffer: a plain step */
        {
                struct nn_optim *o = NULL;

                assert_int_equal(nn_optim_create(&cfgs[1], N, &o), 0);
                nn_optim_step_copy(o, p2, g, 0.05f, 0, N, NULL);
                assert_int_equal(nn_optim_steps(o), 1);
                nn_optim_free(o);
        }
        free(p1);
        free(p2);
        free(g);
        free(copy);
}

static void test_bad_config(void **state)
{
        struct nn_optim *o = (struct nn_optim *)&o; /* must stay untouched */
        struct nn_optim *keep = o;
        struct nn_optim_config c1 = {.kind = NN_OPTIM_SGD, .momentum = 1.0f};
        struct nn_optim_config c2 = {
            .kind = NN_OPTIM_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 0.0f};
        struct nn_optim_config c3 = {.kind = 7};
        struct nn_optim_config c4 = {.kind = NN_OPTIM_SGD, .lr = NAN};

        assert_int_equal(nn_optim_create(&c1, 4, &o), NN_EINVAL);
        assert_int_equal(nn_optim_create(&c2, 4, &o), NN_EINVAL);
        assert_int_equal(nn_optim_create(&c3, 4, &o), NN_EINVAL);
        assert_int_equal(nn_optim_create(&c4, 4, &o), NN_EINVAL);
        assert_int_equal(nn_optim_create(NULL, 4, &o), NN_EINVAL);
        assert_ptr_equal(o, keep);
}

static void test_lr_schedules(void **state)
{
        struct nn_lr_schedule k = {.kind = NN_LR_CONST, .base_lr = 0.1f};
        struct nn_lr_schedule s = {.kind = NN_LR_STEP,
                                   .base_lr = 0.1f,
                                   .step_every = 10,
                                   .gamma = 0.5f};
        struct nn_lr_schedule c = {.kind = NN_LR_COSINE,
                                   .base_lr = 0.1f,
                                   .min_lr = 0.0f,
                                   .total_steps = 100};

        assert_float_equal(nn_lr_at(&k, 0), 0.1, TOL);
        assert_float_equal(nn_lr_at(&k, 123456), 0.1, TOL);
        assert_float_equal(nn_lr_at(&s, 9), 0.1, TOL);
        assert_float_equal(nn_lr_at(&s, 10), 0.05, TOL);
        assert_float_equal(nn_lr_at(&s, 25), 0.025, TOL);
        assert_float_equal(nn_lr_at(&c, 0), 0.1, TOL);
        assert_float_equal(nn_lr_at(&c, 25), 0.0853553391, TOL);
        assert_float_equal(nn_lr_at(&c, 50), 0.05, TOL);
        assert_float_equal(nn_lr_at(&c, 100), 0.0, TOL);
        assert_float_equal(nn_lr_at(&c, 5000), 0.0, TOL);
        c.min_lr = 0.01f;
        assert_float_equal(nn_lr_at(&c, 50), 0.055, TOL);
        /* Warm-up: linear ramp base*(s+1)/W, then the schedule from W. */
        k.warmup_steps = 5;
        assert_float_equal(nn_lr_at(&k, 0), 0.02, TOL);
        assert_float_equal(nn_lr_at(&k, 4), 0.1, TOL);
        assert_float_equal(nn_lr_at(&k, 5), 0.1, TOL);
        c.min_lr = 0.0f;
        c.warmup_steps = 10;
        c.total_steps = 110;
        assert_float_equal(nn_lr_at(&c, 9), 0.1, TOL);
        assert_float_equal(nn_lr_at(&c, 10), 0.1, TOL);
        assert_float_equal(nn_lr_at(&c, 60), 0.05, TOL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sgd_plain),
            cmocka_unit_test(test_sgd_momentum),
            cmocka_unit_test(test_sgd_nesterov),
            cmocka_unit_test(test_sgd_weight_decay),
            cmocka_unit_test(test_adam),
            cmocka_unit_test(test_adamw),
            cmocka_unit_test(test_state_layout),
            cmocka_unit_test(test_step_copy),
            cmocka_unit_test(test_bad_config),
            cmocka_unit_test(test_lr_schedules),
        };

        /* No randomness here: every value is fixed by hand. */
        return cmocka_run_group_tests(tests, NULL, NULL);
}
