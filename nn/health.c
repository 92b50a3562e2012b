/*
 * health.c - model health's absolute criteria (contract and reasons in
 * include/nn/health.h). Pure: numbers in, a verdict out.
 */
#include "nn/health.h"

#include <math.h>

void nn_health_init(struct nn_health *h, uint32_t classes, float rms0,
                    int judge_test)
{
        h->judge_test = judge_test;
        h->failed = 0;
        h->norm_failed = 0;
        h->restarts = 0;
        h->restart_reason = NN_HEALTH_OK;
        h->restart_value = 0.0f;
        h->restart_limit = 0.0f;
        h->chance = logf((float)(classes >= 2 ? classes : 2));
        h->norm_max = isfinite(rms0) && rms0 > 0 ? rms0 : 0.0f;
        h->best_acc = 0.0f;
        h->healthy = 0;
        h->worse = 0;
        h->beat_chance = 0;
}

int nn_health_balanced(const uint8_t *labels, size_t n, uint32_t classes)
{
        size_t count[256] = {0};

        if (classes < 2 || classes > 256 || n == 0)
                return 0;
        for (size_t i = 0; i < n; i++)
                count[labels[i]]++;
        for (uint32_t c = 0; c < classes; c++)
                if ((float)count[c] <
                    NN_HEALTH_BALANCE * (float)n / (float)classes)
                        return 0;
        return 1;
}

float nn_health_norm_bound(const struct nn_health *h)
{
        return h->norm_max > 0 && h->healthy >= NN_HEALTH_NORM_WARMUP
                   ? NN_HEALTH_NORM_MULT * h->norm_max
                   : INFINITY;
}

static int verdict(struct nn_health_verdict *v, int reason, float value,
                   float limit)
{
        v->reason = reason;
        v->value = value;
        v->limit = limit;
        return reason;
}

int nn_health_judge_norm(struct nn_health *h, float rms,
                         struct nn_health_verdict *v)
{
        float bound = nn_health_norm_bound(h);

        if (!isfinite(rms))
                return verdict(v, NN_HEALTH_NONFINITE, rms, bound);
        if (!(rms > bound))
                return verdict(v, NN_HEALTH_OK, rms, bound);
        if (++h->norm_failed < NN_HEALTH_RESTART)
                return verdict(v, NN_HEALTH_NORM, rms, bound);
        /* the model rolled back and grew past the bound again with the
         * peers merged since refused: its own training, not a liar */
        h->norm_failed = 0;
        h->restarts++;
        h->restart_reason = NN_HEALTH_NORM;
        h->restart_value = rms;
        h->restart_limit = bound;
        h->norm_max = rms;
        return verdict(v, NN_HEALTH_OK, rms, bound);
}

/* The references learn from an evaluation that passed every criterion. */
static void learn(struct nn_health *h, float loss, float acc, float rms)
{
        h->healthy++;
        h->norm_failed = 0;
        if (loss < h->chance)
                h->beat_chance = 1;
        if (acc > h->best_acc)
                h->best_acc = acc;
        if (rms > h->norm_max)
                h->norm_max = rms;
}

/* A test-set verdict, or, the RESTART-th in a row, a restart of the
 * references from this model. */
static int test_verdict(struct nn_health *h, struct nn_health_verdict *v,
                        int reason, float value, float limit, float loss,
                        float acc, float rms)
{
        if (++h->failed < NN_HEALTH_RESTART)
                return verdict(v, reason, value, limit);
        h->failed = 0;
        h->restarts++;
        h->restart_reason = reason;
        h->restart_value = value;
        h->restart_limit = limit;
        h->healthy = 0;
        h->worse = 0;
        h->best_acc = 0.0f;
        h->beat_chance = 0;
        learn(h, loss, acc, rms);
        return verdict(v, NN_HEALTH_OK, value, limit);
}

int nn_health_judge_eval(struct nn_health *h, float loss, float acc, float rms,
                         struct nn_health_verdict *v)
{
        float floor_acc = h->best_acc - NN_HEALTH_ACC_MARGIN;

        if (!isfinite(loss) || !isfinite(acc) || !isfinite(rms))
                return verdict(v, NN_HEALTH_NONFINITE, loss, h->chance);
        if (nn_health_judge_norm(h, rms, v) != NN_HEALTH_OK)
                return v->reason;
        if (!h->judge_test) {
                learn(h, loss, acc, rms);
                return verdict(v, NN_HEALTH_OK, loss, h->chance);
        }
        if (h->beat_chance && loss > h->chance) {
                if (++h->worse >= NN_HEALTH_CHANCE_EVALS) {
                        h->worse = 0;
                        return test_verdict(h, v, NN_HEALTH_CHANCE, loss,
                                            h->chance, loss, acc, rms);
                }
        } else {
                h->worse = 0;
        }
        if (h->healthy >= NN_HEALTH_ACC_WARMUP && acc < floor_acc)
                return test_verdict(h, v, NN_HEALTH_ACCURACY, acc, floor_acc,
                                    loss, acc, rms);
        if (h->worse) /* worse than chance, not yet a verdict: no lesson */
                return verdict(v, NN_HEALTH_OK, loss, h->chance);
        h->failed = 0;
        learn(h, loss, acc, rms);
        return verdict(v, NN_HEALTH_OK, loss, h->chance);
}

const char *nn_health_reason_name(int reason)
{
        static const char *names[NN_HEALTH_REASONS] = {"ok",
                                                       "non-finite model",
                                                       "loss explosion",
                                                       "worse than chance",
                                                       "parameter norm",
                                                       "accuracy drop"};

        if (reason < 0 || reason >= NN_HEALTH_REASONS)
                return 0;
        return names[reason];
}

const char *nn_health_reason_label(int reason)
{
        static const char *labels[NN_HEALTH_REASONS] = {
            "ok", "nonfinite", "loss", "chance", "norm", "accuracy"};

        if (reason < 0 || reason >= NN_HEALTH_REASONS)
                return 0;
        return labels[reason];
}
