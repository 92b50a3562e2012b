/*
 * test_optim.c - optimizers and learning-rate schedules against values
 * computed by hand (or, for Adam's square roots, in double precision by
 * the formula in nn.h): SGD, SGD with momentum, Nesterov, L2 weight decay,
 * quasi-global momentum (and loading the other momentum kind's state),
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

#include "nn/nn.h"

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

/* A new optimizer on one parameter (1.0) at lr 0.1: a step with g[0];
 * the caller moves the parameter to `to` and reports |change|^2 =
 * sumsq; a step with g[1].  *p gets the parameter; returns the optimizer
 * (the caller frees it). */
static struct nn_optim *step_moved_step(const struct nn_optim_config *c,
                                        float to, double sumsq, const float *g,
                                        float *p)
{
        struct nn_optim *o = NULL;

        *p = 1.0f;
        assert_int_equal(nn_optim_create(c, 1, &o), 0);
        nn_optim_step(o, p, &g[0], 0.1f);
        *p = to;
        nn_optim_moved(o, sumsq);
        nn_optim_step(o, p, &g[1], 0.1f);
        return o;
}

/* Quasi-global momentum by hand (nn.h): g = 0.5, lr = 0.1, mu = 0.9.
 * The buffer m holds the local step's share already (nn.h), the caller's
 * change since is folded in at the next step.
 * Step 1: no movement yet, v = 0.5, p = 0.95, m = 0.1*0.5 = 0.05.
 * Step 2: v = 0.5 + 0.9*0.05 = 0.545, p = 0.95 - 0.0545 = 0.8955,
 *         m = 0.045 + 0.0545 = 0.0995 (the paper's m at step 2, 0.05,
 *         plus the step's own share).
 * Step 3: v = 0.5 + 0.08955 = 0.58955, p = 0.836545, m = 0.148505. */
static void test_sgd_quasi_global(void **state)
{
        struct nn_optim_config c = {
            .kind = NN_OPTIM_SGD, .momentum = 0.9f, .quasi_global = 1};
        struct nn_optim_config cn = c, cb = c;
        const float g[] = {0.5f, 0.5f, 0.5f};
        struct nn_optim *o = NULL;
        float m, p;

        assert_float_equal(run(&c, 1.0f, g, 1, 0.1f, &m), 0.95, TOL);
        assert_float_equal(m, 0.05, TOL);
        assert_float_equal(run(&c, 1.0f, g, 2, 0.1f, &m), 0.8955, TOL);
        assert_float_equal(m, 0.0995, TOL);
        assert_float_equal(run(&c, 1.0f, g, 3, 0.1f, &m), 0.836545, TOL);
        assert_float_equal(m, 0.148505, TOL);

        /* What moved the parameters between two updates (a peer's
         * average) enters the buffer: after step 1 (p = 0.95) an average
         * sets p = 0.75: + 0.1*(0.95 - 0.75)/0.1 = 0.2, m = 0.25,
         * v = 0.5 + 0.225 = 0.725, p = 0.75 - 0.0725 = 0.6775,
         * m = 0.225 + 0.0725 = 0.2975.  Local momentum: p = 0.655. */
        o = step_moved_step(&c, 0.75f, 0.0, g, &p); /* none reported */
        assert_float_equal(p, 0.6775, TOL);
        assert_float_equal(nn_optim_state(o)[0], 0.2975, TOL);
        assert_float_equal(nn_optim_state(o)[1], 0.6775, TOL); /* post */

        /* a step at another rate: nothing moved since, v = 0.5 +
         * 0.26775 = 0.76775, p = 0.6775 - 0.05*0.76775 = 0.6391125,
         * m = 0.26775 + 0.076775 = 0.344525 */
        nn_optim_step(o, &p, &g[2], 0.05f);
        assert_float_equal(p, 0.6391125, TOL);

        /* the change is per unit of the last update's rate, which after a
         * load is not known: the current one.  An average moves p by -0.1,
         * the step runs at lr 0.1 (the last update's was 0.05): m = 0.344525
         * + 0.1*0.1/0.1 = 0.444525, v = 0.9000725,
         * p = 0.5391125 - 0.09000725 = 0.44910525 */
        nn_optim_set_steps(o, 7);
        p -= 0.1f;
        nn_optim_step(o, &p, &g[0], 0.1f);
        assert_float_equal(p, 0.44910525, TOL);
        nn_optim_free(o);

        /* The bound: a reported change counts at most bound x the last
         * local step (u = 0.5 at rate 0.1: 0.05).  A change of 0.2 is
         * scaled by 0.25: m = 0.05 + 0.1*0.25*0.2/0.1 = 0.1, v = 0.59,
         * p = 0.75 - 0.059 = 0.691. */
        cb.quasi_global_bound = 1.0f;
        o = step_moved_step(&cb, 0.75f, 0.04, g, &p);
        assert_float_equal(p, 0.691, TOL);
        nn_optim_free(o);
        /* within the bound (0.01 < 0.05) it counts whole: m = 0.05 + 0.01,
         * v = 0.554, p = 0.94 - 0.0554 = 0.8846 */
        o = step_moved_step(&cb, 0.94f, 0.0001, g, &p);
        assert_float_equal(p, 0.8846, TOL);
        /* after a load the last step is not known: a reported change is
         * left out of the buffer (p moves as if nothing had moved it) */
        nn_optim_set_steps(o, 3);
        {
                float q = p, m0 = nn_optim_state(o)[0];

                p -= 0.3f;
                nn_optim_moved(o, 0.09);
                nn_optim_step(o, &p, &g[2], 0.1f);
                /* v = 0.5 + 0.9*m0, the change not in it */
                assert_float_equal(p, q - 0.3f - 0.1f * (0.5f + 0.9f * m0),
                                   TOL);
        }
        nn_optim_free(o);

        /* Nesterov on top, the step u = g + mu*v: step 1 as local
         * Nesterov (0.905, m = 0.1*0.95 = 0.095); step 2: v = 0.5855,
         * p = 0.905 - 0.1*(0.5 + 0.52695) = 0.802305, the paper's value */
        cn.nesterov = 1;
        assert_float_equal(run(&cn, 1.0f, g, 1, 0.1f, NULL), 0.905, TOL);
        assert_float_equal(run(&cn, 1.0f, g, 2, 0.1f, NULL), 0.802305, TOL);
}

/* A saved state of the other SGD momentum kind is converted; any other
 * kind, or a length that is not the kind's, is refused untouched. */
static void test_load_state(void **state)
{
        struct nn_optim_config loc = {.kind = NN_OPTIM_SGD, .momentum = 0.9f};
        struct nn_optim_config qg = loc;
        struct nn_optim_config adam = {
            .kind = NN_OPTIM_ADAM, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f};
        struct nn_optim *o = NULL, *ol = NULL, *oa = NULL;
        const float params[2] = {3, 4};
        const float vel[2] = {0.5f, -1};
        const float qgs[4] = {0.25f, 2, 7, 8};
        float *st;

        qg.quasi_global = 1;
        assert_int_equal(nn_optim_create(&qg, 2, &o), 0);
        assert_int_equal(nn_optim_create(&loc, 2, &ol), 0);
        assert_int_equal(nn_optim_create(&adam, 2, &oa), 0);
        assert_int_equal(nn_optim_state_kind(o), NN_OPTIM_STATE_QUASI_GLOBAL);
        assert_int_equal(nn_optim_state_kind(ol), NN_OPTIM_STATE_VELOCITY);
        assert_int_equal(nn_optim_state_kind(oa), NN_OPTIM_STATE_ADAM);
        assert_int_equal(nn_optim_state_len(o), 4);
        st = nn_optim_state(o);

        /* velocity -> quasi-global: m = v, prev = the parameters */
        assert_int_equal(
            nn_optim_load_state(o, NN_OPTIM_STATE_VELOCITY, vel, 2, params), 0);
        assert_true(st[0] == 0.5f && st[1] == -1 && st[2] == 3 && st[3] == 4);
        /* its own kind: as saved */
        assert_int_equal(
            nn_optim_load_state(o, NN_OPTIM_STATE_QUASI_GLOBAL, qgs, 4, params),
            0);
        assert_memory_equal(st, qgs, sizeof(qgs));
        /* quasi-global -> velocity: v = m */
        assert_int_equal(nn_optim_load_state(ol, NN_OPTIM_STATE_QUASI_GLOBAL,
                                             qgs, 4, params),
                         0);
        assert_true(nn_optim_state(ol)[0] == 0.25f &&
                    nn_optim_state(ol)[1] == 2);
        /* Adam's m and v have the quasi-global length, not its meaning */
        assert_int_equal(
            nn_optim_load_state(o, NN_OPTIM_STATE_ADAM, qgs, 4, params),
            NN_EMISMATCH);
        assert_int_equal(nn_optim_load_state(oa, NN_OPTIM_STATE_QUASI_GLOBAL,
                                             qgs, 4, params),
                         NN_EMISMATCH);
        assert_int_equal(
            nn_optim_load_state(oa, NN_OPTIM_STATE_ADAM, qgs, 4, params), 0);
        /* a length that is not the kind's, or no state for a momentum */
        assert_int_equal(
            nn_optim_load_state(o, NN_OPTIM_STATE_VELOCITY, qgs, 4, params),
            NN_EMISMATCH);
        assert_int_equal(
            nn_optim_load_state(o, NN_OPTIM_STATE_NONE, NULL, 0, params),
            NN_EMISMATCH);
        assert_memory_equal(st, qgs, sizeof(qgs)); /* untouched */
        nn_optim_free(o);
        nn_optim_free(ol);
        nn_optim_free(oa);
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
            {.kind = NN_OPTIM_SGD,
             .momentum = 0.9f,
             .quasi_global = 1,
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
            cmocka_unit_test(test_sgd_quasi_global),
            cmocka_unit_test(test_load_state),
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
