/*
 * health.h - model health's absolute criteria: is this model diverging,
 * whatever the recent past looked like?
 *
 * The trainer (node/train/trainer.c, "model health") rolls back on a
 * non-finite loss and on a step loss that exploded against the running
 * median of recent healthy ones. A relative test follows a slow drift: a
 * model pushed a little every round (a trusted liar inside the robust
 * merge's radius, copies of its slice, a learning rate too high) moves
 * its own median with it. The criteria here compare with fixed points
 * instead, each named in the verdict:
 *
 *   chance    the evaluation's test loss is above ln(classes), the loss of
 *             a uniform guess, at CHANCE_EVALS evaluations in a row, once
 *             the model has beaten chance at a healthy evaluation;
 *   norm      the parameters' RMS is above NORM_MULT x the largest RMS
 *             seen at healthy evaluations (at least the starting model's),
 *             once one healthy evaluation has set it: a model's weights
 *             outgrow the starting ones as it learns (a node alone at
 *             --lr 0.5 passed 2x the starting RMS in 20 steps, a Pi-class
 *             pair at K = 4 in 280, both learning well), so the
 *             starting model is no reference and, with evaluations far
 *             apart, rolled healthy nodes back to it every 20 steps;
 *   accuracy  the evaluation's accuracy is more than ACC_MARGIN points
 *             below the best this node reached, after ACC_WARMUP healthy
 *             evaluations.
 *
 * No verdict repeats forever: the RESTART-th verdict of a kind in a row
 * (no healthy evaluation between) restarts that kind's reference from the
 * model at hand instead (restarts counts it).
 *
 * The test-set criteria (chance, accuracy) apply only when our own data
 * is balanced (nn_health_balanced): a node on label-skewed data (two
 * classes of its own) sees its test accuracy swing by 20-30 points and its
 * test loss cross chance as it averages with peers who know the other
 * classes (measured: clean 4-node runs with --partition classes:2 and
 * dirichlet:0.1, docs/benchmarks.md), and judged so it was rolled back
 * dozens of times in a clean run. Such a node is judged by the norm alone.
 *
 * The references (best accuracy, largest RMS, "has beaten chance") are
 * learned only from evaluations that passed every criterion, so a model
 * poisoned a little at a time cannot raise the bar it is judged against
 * between two evaluations (boiling frog): the norm bound moves at most at
 * the pace of verified accuracy.
 *
 * Why in nn/: the criteria are about a model's numbers (loss, accuracy,
 * parameter size) and know nothing of peers; a node training alone with a
 * learning rate too high trips them the same way. Whom to stop listening
 * to after a verdict is a question about peers, answered in
 * gossip/robust.h (gossip_robust_quarantine).
 *
 * Pure: no clocks, threads or I/O; time is the sequence of calls (steps
 * and evaluations), as the trainer makes them. Not thread-safe: the
 * training thread owns it.
 */
#ifndef NN_HEALTH_H
#define NN_HEALTH_H

#include <stddef.h>
#include <stdint.h>

/* Tunables, with their reasons. */
enum {
        /* Evaluations in a row worse than chance before it is a verdict:
         * one evaluation after a bad averaging round may be worse than
         * chance and recover by the next (measured: copies of a liar's
         * slice took a node to 3.4 and back to 0.7); three in a row is a
         * model that stays broken. */
        NN_HEALTH_CHANCE_EVALS = 3,
        /* Healthy evaluations before the accuracy criterion applies: the
         * first evaluations of a run climb fast and a best reached early
         * is no reference yet. */
        NN_HEALTH_ACC_WARMUP = 3,
        /* Test-set verdicts in a row (no healthy evaluation between)
         * after which the references restart from the model at hand
         * instead of a further verdict: after a rollback the peers merged
         * since are refused, so a model that still fails its next
         * evaluations is failing by its own training (data, schedule),
         * and pinning it to an old model would stop it learning. */
        NN_HEALTH_RESTART = 3,
        /* Healthy evaluations before the norm criterion applies (the
         * first one sets its reference; see "norm" above). */
        NN_HEALTH_NORM_WARMUP = 1,
};
/* Our data is balanced when every class has at least this share of an
 * even split (half of n / classes): an IID shard of 20000 samples is
 * within a few % of even; classes:2 and dirichlet:0.1 cuts leave classes
 * empty. */
#define NN_HEALTH_BALANCE 0.5f
/* Accuracy more than this many points below the node's own best is a
 * verdict: after the first evaluations an honest node's test accuracy
 * moves by 1-3 points from one evaluation to the next (clean and
 * single-lie runs, evaluated every 50 steps, docs/benchmarks.md's
 * Robustness runs); copies of a liar's slice took nodes from 82-85 % to
 * 28-75 %. 10 points is 3x the honest movement. */
#define NN_HEALTH_ACC_MARGIN 10.0f
/* Parameter RMS above this many times the largest seen at a healthy
 * evaluation is a verdict. Measured (MLP 784-512-10, SGD, 3-node
 * loopback, 1500 steps): clean runs go from 0.0506 at start to 0.0578 at
 * the end, x1.14 over the whole run; 8 copies of drift per turn took it
 * to 0.072 (x1.4); a fixed direction that gets in unclipped every round
 * grows it geometrically. 2x leaves room for other models and optimizers
 * (Adam, a CNN: not measured) and is still reached by a geometric drift
 * within a few dozen rounds. */
#define NN_HEALTH_NORM_MULT 2.0f

enum nn_health_reason {
        NN_HEALTH_OK = 0,
        NN_HEALTH_NONFINITE = 1, /* NaN/Inf (the trainer's own check) */
        NN_HEALTH_EXPLOSION = 2, /* step loss vs its running median (idem) */
        NN_HEALTH_CHANCE = 3,
        NN_HEALTH_NORM = 4,
        NN_HEALTH_ACCURACY = 5,
        NN_HEALTH_REASONS = 6,
};

struct nn_health {
        float chance;         /* ln(classes) */
        float norm_max;       /* largest parameter RMS at a healthy evaluation
                               * (the starting model's at init) */
        float best_acc;       /* best accuracy at a healthy evaluation, % */
        uint32_t healthy;     /* healthy evaluations */
        uint32_t worse;       /* evaluations in a row worse than chance */
        int beat_chance;      /* a healthy evaluation was below chance */
        int judge_test;       /* the test-set criteria apply (balanced data) */
        uint32_t failed;      /* test-set verdicts since a healthy evaluation */
        uint32_t norm_failed; /* norm verdicts since a healthy evaluation */
        uint32_t restarts;    /* times the references restarted */
        int restart_reason;   /* the verdict the last restart replaced */
        float restart_value, restart_limit; /* ... and its figures */
};

struct nn_health_verdict {
        int reason;  /* enum nn_health_reason */
        float value; /* what was measured (loss, RMS or accuracy) */
        float limit; /* what it was compared with */
};

/* Start with the starting model's parameter RMS (the norm floor), the
 * model's class count (>= 2) and whether the test-set criteria apply
 * (judge_test: nn_health_balanced of our training labels). */
void nn_health_init(struct nn_health *h, uint32_t classes, float rms0,
                    int judge_test);

/* 1 if every class below `classes` has at least NN_HEALTH_BALANCE x
 * n / classes of the n labels, else 0. */
int nn_health_balanced(const uint8_t *labels, size_t n, uint32_t classes);

/* The parameter RMS above which the norm criterion fires (INFINITY
 * before NN_HEALTH_NORM_WARMUP healthy evaluations). */
float nn_health_norm_bound(const struct nn_health *h);

/* Between evaluations: the norm criterion alone. Returns and fills
 * v->reason: OK, NONFINITE or NORM; the NN_HEALTH_RESTART-th NORM in a
 * row is OK instead, the norm's reference restarting from rms (the only
 * thing learned here). */
int nn_health_judge_norm(struct nn_health *h, float rms,
                         struct nn_health_verdict *v);

/* At an evaluation: test loss, accuracy (%) and parameter RMS. Returns
 * and fills v->reason: OK (the references learn from it), NONFINITE,
 * NORM, CHANCE or ACCURACY (the first that fires, in that order; the
 * run of evaluations worse than chance restarts after a verdict). The
 * NN_HEALTH_RESTART-th test-set verdict in a row is OK instead: the
 * references restart from this model (restarts counts it). Without
 * judge_test only NONFINITE and NORM are judged. */
int nn_health_judge_eval(struct nn_health *h, float loss, float acc, float rms,
                         struct nn_health_verdict *v);

/* "ok", "non-finite model", "loss explosion", "worse than chance",
 * "parameter norm", "accuracy drop"; NULL for anything else. */
const char *nn_health_reason_name(int reason);

/* The short label of a reason for counters and metrics: "ok",
 * "nonfinite", "loss", "chance", "norm", "accuracy"; NULL otherwise. */
const char *nn_health_reason_label(int reason);

#endif
