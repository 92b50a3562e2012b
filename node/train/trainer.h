/*
 * trainer.h - the training loop of one node, on a thread of its own.
 *
 * A struct node_trainer owns everything the learning needs: the training
 * shard and the test set (from nn/data.h), the batcher, the model and its
 * optimizer (nn/nn.h), the learning-rate schedule and the checkpoint file
 * (nn/checkpoint.h). It knows nothing of sockets. It is made in two
 * halves: node_trainer_create learns only the model's size (what the
 * cluster needs to open), and the training thread loads everything else
 * first thing (node_trainer_load), while the loop already answers
 * membership. In a cluster it is
 * attached to the hand-off box (node/train/handoff.h) and runs the exchange
 * itself, asking the exchange plan (gossip/plan.h) at two points of each
 * step; nothing calls back into it:
 *
 *   x,y = next batch; grads = train_batch(x, y)   (+ extra batches folded)
 *   post grads; plan(GRADIENT): wait at most --wait-ms; merge what arrived
 *   optimizer step at lr(step); step += 1   (exactly once per update; the
 *       optimizer writes our slice of a due averaging round into the box)
 *   post our slice; plan(PARAMS): extra batches, then wait at most
 *       --wait-ms; average in the slices that arrived
 *   progress / evaluation / checkpoint / stop criteria
 *
 * Snapshots a peer asked for are made whenever the trainer asks the plan.
 * Before the first step of a run that did not resume from its own
 * checkpoint, it fetches the state of a live peer ahead of it (live join).
 *
 * Stop criteria, whichever comes first: epochs over the shard, optimizer
 * steps, wall-clock budget, target test accuracy (checked at evaluations),
 * or node_trainer_stop() (signals). At the end the trainer evaluates (if
 * the last step was not evaluated), writes the final checkpoint if a
 * directory was given, logs the final line and calls hooks.on_done.
 *
 * Invariants: the model, optimizer and batcher are touched only by the
 * training thread while it runs (hooks included); node_trainer_stats() and
 * node_trainer_stop() are safe from any thread. With one BLIS thread and no
 * peers, a run is a pure function of the options (same seed, same numbers).
 */
#ifndef NODE_TRAINER_H
#define NODE_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "nn/nn.h"
#include "config/options.h"

struct node_evlog;
struct nn_checkpoint;
struct node_trainer;

/* Checkpoint file name inside --checkpoint-dir. */
#define NODE_TRAINER_CKPT_NAME "model.ckpt"

/* Why the run ended. */
enum node_stop_reason {
        NODE_STOP_NONE = 0,
        NODE_STOP_STEPS,
        NODE_STOP_EPOCHS,
        NODE_STOP_TIME,
        NODE_STOP_TARGET,
        NODE_STOP_SIGNAL,
        NODE_STOP_ERROR,
        NODE_STOP_CLUSTER, /* a peer reached the target (gossip/stop.h) */
};

/* Observers (every one may be NULL); they run on the training thread and
 * must not call back into the trainer. */
struct node_trainer_hooks {
        /* An evaluation finished (accuracies in %). */
        void (*on_eval)(void *ctx, uint64_t step, double test_acc);
        /* The run is over (final checkpoint written); last call. */
        void (*on_done)(void *ctx, struct node_trainer *t);
        void *ctx;
};

struct node_handoff;

/* A consistent snapshot for the control socket and metrics. */
struct node_train_stats {
        uint64_t step;          /* optimizer steps taken */
        uint32_t epoch;         /* full passes over the shard finished */
        uint64_t samples;       /* training samples processed this run */
        uint64_t extra_batches; /* trained while waiting (--fill-batches) */
        uint64_t steps_skipped; /* skipped to the partners' pace, in step */
        uint64_t refetches;     /* far behind: a peer's state taken */
        double pace_ratio;      /* steps passed per step trained (a slower
                                 * device: gossip_plan_pace_ratio) */
        double loss;            /* mean over the last progress window */
        double acc;             /* train accuracy, same window, % */
        double sps;             /* samples per second, same window */
        double lr;              /* learning rate of the last step */
        double test_acc;        /* last evaluation, %; NaN before any */
        double test_loss;       /* last evaluation; NaN before any */
        uint64_t evals;         /* evaluations done */
        uint64_t params;        /* model size in floats */
        uint64_t resumed_from;  /* step the run started at */
        uint64_t rollbacks_nonfinite; /* model health: NaN/Inf loss/params */
        uint64_t rollbacks_loss;      /* loss > factor x its running median */
        /* model health's absolute criteria (nn/health.h) */
        uint64_t rollbacks_chance;     /* test loss worse than chance */
        uint64_t rollbacks_norm;       /* parameter RMS beyond its bound */
        uint64_t rollbacks_accuracy;   /* accuracy far below our best */
        uint64_t health_snapshot_step; /* step of the last good snapshot */
        /* stalls (train/stall.h): times in ms of one training step
         * (evaluations and checkpoints not in it) */
        double step_pace_ms;     /* the median of the last 128; 0: unknown */
        double step_max_ms;      /* the longest; 0: none judged yet */
        uint64_t step_max_at;    /* the step it made */
        double step_max_wait_ms; /* of it, waiting for partners */
        uint64_t steps_slow;     /* over twice the pace at their time */
        double slow_ms;          /* the slow steps' time, in all */
        double slow_wait_ms;     /* of it, waiting for partners */
        int running;             /* 1 while the thread runs */
        int loading;     /* 1 until the data, model and checkpoint are ready */
        int stop_reason; /* enum node_stop_reason, 0 while running */
};

/* Make a trainer for o: the model's size and canonical spec from its
 * spec and the sample shape in the data set's header, so that the node
 * can join before the load (node_trainer_nparams), the optimizer, and
 * the checkpoint in o->checkpoint_dir read and checked against them
 * unless o->fresh (its optimizer state taken; no data, no BLIS). o, hooks and
 * ev must outlive the trainer. 0, or a negative NN_E* / errno code with one
 * line in err (no data set found, a model that does not build for its shape, a
 * corrupt or mismatched checkpoint); *out is NULL then. */
int node_trainer_create(const struct node_options *o,
                        const struct node_trainer_hooks *hooks,
                        struct node_evlog *ev, struct node_trainer **out,
                        char *err, size_t errlen);

/* The slow half of the set-up, which node_trainer_run does first on the
 * training thread (callable before it; then the run skips it): BLIS's
 * kernel probe if main() left it pending (train/kernel.h), the data,
 * the model and optimizer, the resume from the checkpoint read at
 * create. 0, -ECANCELED (node_trainer_stop came first), or a negative
 * NN_E* code with one line in err (a corrupt data file, a data set
 * whose shape changed since create). Stats say `loading` until it has
 * succeeded. */
int node_trainer_load(struct node_trainer *t, char *err, size_t errlen);

/* Join a cluster: exchange through the box h (which must outlive the
 * run). Before node_trainer_start; without it the node trains alone. */
void node_trainer_attach(struct node_trainer *t, struct node_handoff *h);

/* Before node_trainer_start: the run does not begin its load until
 * node_trainer_release (any thread, idempotent) or node_trainer_stop
 * (then it ends unloaded). The daemon holds the load while the node
 * joins (gossip/plan.h, gossip_plan_may_load). */
void node_trainer_hold(struct node_trainer *t);
void node_trainer_release(struct node_trainer *t);

/* Start the training thread. 0 or a negative errno. */
int node_trainer_start(struct node_trainer *t);

/* Run the training on the calling thread until a stop criterion; 0, or a
 * negative code (message via node_trainer_error()). */
int node_trainer_run(struct node_trainer *t);

/* Training thread (the exchange plan said TRAIN_MORE): train one more
 * batch at the current parameters and add its gradient to the next
 * step's (which then averages over every batch it took). 0, or a
 * negative NN_E* code (no buffer: the trainer was made without
 * --fill-batches). */
int node_trainer_extra_batch(struct node_trainer *t);

/* Ask the run to stop after the current step; a wait in the exchange
 * returns at once (any thread). */
void node_trainer_stop(struct node_trainer *t);

/* Wait for the training thread; returns what node_trainer_run returned. */
int node_trainer_join(struct node_trainer *t);

/* Free everything (the thread must have been joined). NULL is fine. */
void node_trainer_free(struct node_trainer *t);

/* Copy a consistent snapshot of the counters (any thread). */
void node_trainer_stats(struct node_trainer *t, struct node_train_stats *out);

/* The last error message ("" if none). */
const char *node_trainer_error(const struct node_trainer *t);

/* "steps", "epochs", "time", "target", "signal", "error" or "none". */
const char *node_trainer_reason_name(int reason);

/* Encode the current state (params, optimizer state, step) in the
 * checkpoint byte format into a new buffer (gn_big_alloc: free it with
 * gn_big_free), for a peer (a state transfer): quasi-global momentum goes
 * as a velocity, its buffer m only. Training thread only. 0, NN_ENOMEM or
 * NN_EINVAL. */
int node_trainer_encode_state(struct node_trainer *t, void **buf, size_t *len);

/* The model (training thread only; NULL until loaded). */
struct nn_model *node_trainer_model(struct node_trainer *t);

/* Number of parameters (any thread; fixed at create). */
size_t node_trainer_nparams(const struct node_trainer *t);

/* Number of floats of optimizer state (once loaded; fixed then). */
size_t node_trainer_opt_len(const struct node_trainer *t);

/* The canonical model spec (any thread; fixed at create). */
const char *node_trainer_spec(const struct node_trainer *t);

#endif
