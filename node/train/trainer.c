/*
 * trainer.c - one node's training loop: data, model, optimizer, schedule,
 * evaluation, checkpoints and stop criteria.
 *
 * The test set is converted to floats once at start (10000 Fashion-MNIST
 * images: 31 MB) so that evaluations cost forward passes only; the training
 * shard stays bytes and the batcher converts one batch at a time.
 *
 * Checkpoints carry, besides what nn/checkpoint.h stores, a small metadata
 * blob (struct ckpt_meta below, little-endian) with the batcher position
 * and the shard, so a resumed run continues the same epoch at the same
 * sample instead of re-reading the start of the shard.
 *
 * In a cluster the training thread owns the exchange's side of each step
 * (exchange_*() below): it posts to the hand-off box, asks the exchange
 * plan, and trains extra batches, makes snapshots or waits as the plan
 * says; nobody calls back into it.
 *
 * The counters read by other threads live under stats_lock; everything
 * else belongs to the training thread while it runs. The training thread
 * is the only writer of those counters, so it reads them without the
 * lock.
 *
 * Over 800 lines on purpose: it is one thread's whole life (set-up, the
 * step with both exchange points, evaluation, checkpoints, stop), and a
 * newcomer reads a step top to bottom here; the policy it obeys is in
 * gossip/plan.c and the box in node/train/handoff.c.
 */
#define _GNU_SOURCE 1 /* RUSAGE_THREAD */
#include "train/trainer.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "nn/checkpoint.h"
#include "nn/data.h"
#include "nn/health.h"
#include "service/evlog.h"
#include "base/gn_bigbuf.h"
#include "base/gn_endian.h"
#include "base/gn_errbuf.h"
#include "base/gn_finite.h"
#include "base/gn_rng.h"
#include "train/handoff.h"
#include "train/kernel.h"
#include "gossip/plan.h"
#include "nn/reservoir.h"
#include "gossip/robust.h"
#include "train/shuffle.h"
#include "train/stall.h"

/* Tunables. */
enum {
        /* Step-schedule decay: halve the rate every this many epochs. A
         * short run on a Pi sees few epochs; 0.1 per epoch would stall it. */
        TRAINER_STEP_EPOCHS = 1,
        /* Evaluation batch (forward only; the model is reserved for the
         * larger of this and --batch once, so no step allocates). */
        TRAINER_EVAL_BATCH = 1000,
        /* Quasi-global momentum: what averaging moved the model between
         * two steps feeds the buffer at most 3x the local step (per unit
         * rate). Unbounded, a liar's accepted slices were amplified
         * (test_hostile: 57% against 83% clean) and a cluster with
         * --avg-every 10 diverged late in its cosine schedule, where the
         * rate is small and the averaging is not (test_cluster_churn);
         * 3 passes both and learns as much on skewed data as unbounded
         * (docs/learning.md, "Momentum that follows the averaged model"). */
        TRAINER_QG_BOUND = 3,
        /* Metadata blob version (meta_encode). 2 added the optimizer
         * state's kind; a version-1 blob is still read. */
        TRAINER_META_VERSION = 2,
        TRAINER_META_LEN_V1 = 4 + 4 + 8 + 4 + 4 + 4 + 8,
        TRAINER_META_LEN = TRAINER_META_LEN_V1 + 4,
        /* Model health: an in-memory snapshot of parameters and optimizer
         * state every this many healthy steps, the one a broken model is
         * rolled back to. 10 steps: a peer that poisons every averaging
         * round (every K = 10 steps in the cluster tests) must not send us
         * back further than the progress made since; the copy (2 x the
         * model, 3 MB for the MLP) every 10 steps is under 0.1% of them. */
        TRAINER_HEALTH_SNAP_EVERY = 10,
        /* Step losses recorded before the explosion test applies. */
        TRAINER_HEALTH_WARMUP = 8,
        /* Rollbacks in a row after which the run ends with an error: the
         * snapshot itself does not train (never keep a broken model). */
        TRAINER_HEALTH_MAX_ROLLBACKS = 200,
        /* A node far behind asks for a peer's state at most this often
         * (seconds): an ask that fails costs up to NODE_HANDOFF_STATE_TRIES
         * x NODE_HANDOFF_STATE_WAIT_MS of waiting, a third of this. */
        TRAINER_REFETCH_S = 45,
        /* The pace ratio told to stats and the log is capped here: past
         * it the node is far behind and takes a peer's state instead. */
        TRAINER_PACE_MAX = 64,
        /* A state a peer asked for is sealed (its BLAKE2b digest) this
         * many bytes at a time, between steps: the whole 3.3 MB digest is
         * ~5.5 ms of CPU at lab speed, ~90 ms at a Pi-class quota, the
         * serving device's longest step when done at once; 256 kB is
         * ~0.4 ms, a fifth of a step's compute, over 13 steps at most
         * (design.md, "A state served costs one step"). */
        TRAINER_SEAL_PIECE = 256 << 10,
};
/* A step's loss above this many times the running median of recent healthy
 * step losses is an explosion: cross-entropy over 10 classes is 2.3 for a
 * uniform guess and batches of one model differ by well under 2x, while a
 * model pushed x10 or to 1e30 scores tens to Inf. */
#define TRAINER_HEALTH_LOSS_FACTOR 10.0f
/* Only losses up to this many times the median enter it, and a snapshot is
 * taken only after such a step: a model poisoned a little at a time can
 * then not raise the reference it is judged against (boiling frog). */
#define TRAINER_HEALTH_RECORD_FACTOR 2.0f
/* ... and, in units of ln(classes) (the loss of a uniform guess), what an
 * explosion must exceed besides (2x: worse than guessing) and what is
 * always a healthy reference (0.5x). Without these floors a node on skewed
 * data (2 classes of its own: losses of 0.01) called every average with
 * its peers, who know the other classes, an explosion and rolled it back
 * (1244 rollbacks in a run, nodes ending on 200 in a row; issue 14's
 * skew benchmark). */
#define TRAINER_HEALTH_FLOOR_CHANCE  2.0f
#define TRAINER_HEALTH_RECORD_CHANCE 0.5f
#define TRAINER_STEP_GAMMA           0.5f
#define TRAINER_COSINE_FLOOR         0.01f /* min_lr as a fraction of base_lr */
static const char trainer_meta_magic[4] = {'G', 'N', 'T', 'R'};

struct node_trainer {
        const struct node_options *o;
        const struct node_trainer_hooks *h;
        struct node_trainer_hooks no_hooks;
        struct node_handoff *box; /* the exchange; NULL: training alone */
        struct node_evlog *ev;

        struct nn_dataset train_all, shard, test;
        struct nn_batcher batcher;
        float *x, *test_x;
        uint8_t *y;
        struct nn_model *model;
        struct nn_optim *optim;
        struct nn_lr_schedule lr;
        char spec[NN_SPEC_MAX];
        size_t nparams, nopt;
        /* the data's sample size (bytes) and classes, from its header at
         * create (setup_shape): the shuffle is sized before the load */
        uint32_t sample_size, data_classes; /* nparams: from the spec and the
                                 data's header at create, checked at the load */
        int loaded;              /* data, model and checkpoint ready */
        struct nn_checkpoint ck; /* read at create, taken at the load */
        int has_ck;
        uint64_t steps_per_epoch;
        char ckpt_path[4096];

        uint64_t step, start_step;
        uint32_t peers_at_start;
        double refetch_after; /* monotonic s: far behind, ask again then */
        /* steps passed and trained (gossip_plan_pace), the pace ratio
         * last told to stats and the one last logged */
        struct gossip_plan_pace pace;
        double pace_r, pace_r_told;
        uint32_t batch_epoch; /* 1-based epoch of the last batch trained */
        double extra_cpu_us;  /* CPU time of the extra batches, in all */
        int resumed;
        double t_start; /* monotonic seconds at run start */
        double last_eval_acc;
        uint64_t last_eval_step;
        /* when the last evaluation ended and what it took (mono_s): a
         * peer's stop reason that waits is judged again by them */
        double eval_end_s, eval_took_s;
        /* Seconds on the training thread: train_s = every step, hooks
         * (gradient hand-off, merge, averaging) included, evaluation and
         * checkpoints excluded; compute_s = the local part of a step
         * (batch, forward/backward, optimizer). compute_s / train_s is the
         * node's compute efficiency. */
        double train_s, compute_s;
        /* stalls: the steps' times (train/stall.h) and, within the step
         * under way, the seconds spent waiting for partners (the box's
         * waits, a refetch) */
        struct node_stall stall;
        double step_wait_s;
        /* --fill-batches: the gradient sum (weighted by batch size) of
         * the extra batches trained since the last step, acc_n samples;
         * their loss and hits wait here for the next step's windows. */
        float *gacc;
        uint32_t fill_size; /* samples per extra batch */
        uint64_t acc_n;
        double acc_loss;
        uint64_t acc_correct, acc_batches;

        /* Model health (training thread): the last good snapshot and the
         * running median of healthy step losses; the absolute criteria
         * (nn/health.h) and the snapshot of the last evaluation that
         * passed them (ver_*), the one their verdicts return to. */
        float *good_params, *good_opt;
        uint64_t good_step;
        struct nn_health mh;
        float *ver_params, *ver_opt;
        uint64_t ver_step;
        int loss_ok;            /* the last step's loss was recorded */
        uint32_t rollbacks_run; /* rollbacks since the last healthy step */
        struct gossip_robust_stat losses;

        /* The state a peer asked for, being sealed a piece at a time
         * (training thread; NULL: none). Posted to the box once sealed. */
        void *seal_buf;
        size_t seal_len;
        struct nn_ckpt_seal seal;

        /* --shuffle-samples (node/train/shuffle.h; NULL: off): staging for the
         * reservoir samples of a batch and for our outgoing ones */
        struct node_shuffle *shuf;
        uint8_t *shuf_img, *shuf_lab, *shuf_out;
        uint32_t *shuf_idx;
        uint64_t shuf_rng;

        atomic_int stop_flag;
        /* node_trainer_hold: the load waits for node_trainer_release or a
         * stop (under stats_lock, signalled on gate) */
        int held;
        pthread_cond_t gate;
        pthread_t thread;
        int thread_started;
        int run_rc;

        pthread_mutex_t stats_lock;
        struct node_train_stats st;
        char errmsg[512];
};

static double mono_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *node_trainer_reason_name(int reason)
{
        static const char *names[] = {"none",   "steps",  "epochs", "time",
                                      "target", "signal", "error",  "cluster"};

        if (reason < 0 || reason > NODE_STOP_CLUSTER)
                return "none";
        return names[reason];
}

/* ---- checkpoint metadata ------------------------------------------------ */

/* magic, version, batcher epoch, pos, shard i, shard n, samples, and
 * (version 2) the kind of the optimizer state, enum nn_optim_state_kind */
static void meta_encode(const struct node_trainer *t, uint8_t *m)
{
        memcpy(m, trainer_meta_magic, 4);
        gn_le32_put(m + 4, TRAINER_META_VERSION);
        gn_le64_put(m + 8, t->batcher.epoch);
        gn_le32_put(m + 16, t->batcher.pos);
        gn_le32_put(m + 20, t->o->shard_i);
        gn_le32_put(m + 24, t->o->shard_n);
        gn_le64_put(m + 28, t->st.samples);
        gn_le32_put(m + 36, (uint32_t)nn_optim_state_kind(t->optim));
}

/* The metadata version of a checkpoint if the blob is ours, else 0. */
static uint32_t meta_version(const struct nn_checkpoint *ck)
{
        const uint8_t *m = ck->meta;
        uint32_t v;

        if (ck->meta_len < TRAINER_META_LEN_V1 ||
            memcmp(m, trainer_meta_magic, 4) != 0)
                return 0;
        v = gn_le32_get(m + 4);
        if ((v == 1 && ck->meta_len == TRAINER_META_LEN_V1) ||
            (v == 2 && ck->meta_len == TRAINER_META_LEN))
                return v;
        return 0;
}

/* The kind of a checkpoint's optimizer state: as its metadata says, or,
 * from before the field (only local momentum and Adam then), by length. */
static enum nn_optim_state_kind meta_state_kind(const struct node_trainer *t,
                                                const struct nn_checkpoint *ck)
{
        if (meta_version(ck) >= 2)
                return (enum nn_optim_state_kind)gn_le32_get(ck->meta + 36);
        if (ck->n_opt == 0)
                return NN_OPTIM_STATE_NONE;
        return ck->n_opt == t->nparams ? NN_OPTIM_STATE_VELOCITY
                                       : NN_OPTIM_STATE_ADAM;
}

/* Position the batcher from a checkpoint's metadata if it is ours and the
 * shard matches; otherwise start at the checkpoint's epoch. */
static void meta_apply(struct node_trainer *t, const struct nn_checkpoint *ck)
{
        const uint8_t *m = ck->meta;
        uint64_t epoch = ck->epoch;
        uint32_t pos = 0;

        if (meta_version(ck) != 0 && gn_le32_get(m + 20) == t->o->shard_i &&
            gn_le32_get(m + 24) == t->o->shard_n) {
                epoch = gn_le64_get(m + 8);
                pos = gn_le32_get(m + 16);
        }
        if (pos > t->shard.n)
                pos = 0;
        /* nn_batcher_seek() sets the completed-epoch count itself (one
         * more when pos is at the very end of an epoch). */
        nn_batcher_seek(&t->batcher, epoch, pos);
}

static void fill_ckpt(struct node_trainer *t, struct nn_checkpoint *ck,
                      uint8_t *meta)
{
        meta_encode(t, meta);
        memset(ck, 0, sizeof(*ck));
        ck->spec = t->spec;
        ck->step = t->step;
        ck->epoch = nn_batcher_epoch(&t->batcher);
        ck->seed = t->o->seed;
        ck->params = nn_model_params(t->model);
        ck->n_params = t->nparams;
        ck->opt = nn_optim_state(t->optim);
        ck->n_opt = t->nopt;
        ck->meta = meta;
        ck->meta_len = TRAINER_META_LEN;
}

/* The state encoded into a new gn_big_alloc buffer, the digest left to
 * seal (node_trainer_encode_state, exchange_snapshot). */
static int open_state(struct node_trainer *t, void **buf, size_t *len,
                      struct nn_ckpt_seal *seal)
{
        struct nn_checkpoint ck;
        uint8_t meta[TRAINER_META_LEN];
        size_t cap;
        void *p;
        int rc;

        if (!t->loaded) /* a request that came while the data loaded */
                return NN_EINVAL;
        fill_ckpt(t, &ck, meta);
        /* A state crosses a link to a joining peer: quasi-global momentum
         * goes as its buffer m alone, as a local-momentum velocity (the
         * receiver's last parameters are the ones it takes, which is what
         * nn_optim_load_state converts to), a third fewer bytes: 3.3 MB
         * instead of 4.9 MB for the default MLP, over a 10 Mbit/s uplink
         * 1.3 s less. The checkpoint file keeps the whole state. */
        if (nn_optim_state_kind(t->optim) == NN_OPTIM_STATE_QUASI_GLOBAL) {
                ck.n_opt = t->nparams;
                gn_le32_put(meta + 36, (uint32_t)NN_OPTIM_STATE_VELOCITY);
        }
        cap = nn_checkpoint_encoded_size(&ck);
        if (!cap)
                return NN_EINVAL;
        p = gn_big_alloc(cap); /* megabytes: on huge pages (gn_bigbuf.h) */
        if (!p)
                return NN_ENOMEM;
        rc = nn_checkpoint_encode_open(&ck, p, cap, len, seal);
        if (rc) {
                gn_big_free(p);
                return rc;
        }
        *buf = p;
        return 0;
}

int node_trainer_encode_state(struct node_trainer *t, void **buf, size_t *len)
{
        struct nn_ckpt_seal seal;
        int rc = open_state(t, buf, len, &seal);

        if (rc == 0 && (rc = nn_checkpoint_seal_some(&seal, SIZE_MAX)) < 0) {
                gn_big_free(*buf);
                *buf = NULL;
                return rc;
        }
        return rc < 0 ? rc : 0;
}

static int save_checkpoint(struct node_trainer *t)
{
        struct nn_checkpoint ck;
        uint8_t meta[TRAINER_META_LEN];
        char err[512];
        int rc;

        if (!t->o->checkpoint_dir)
                return 0;
        fill_ckpt(t, &ck, meta);
        rc = nn_checkpoint_save(t->ckpt_path, &ck, err, sizeof(err));
        if (rc)
                node_log(NODE_LOG_ERROR, "checkpoint: %s", err);
        else
                node_log(NODE_LOG_DEBUG, "checkpoint: step %llu -> %s",
                         (unsigned long long)t->step, t->ckpt_path);
        return rc;
}

/* A state kind (the optimizer it belongs to) in the log. */
static const char *state_kind_name(enum nn_optim_state_kind k)
{
        static const char *names[] = {"plain SGD", "SGD momentum",
                                      "SGD quasi-global momentum", "Adam"};

        return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k]
                                                              : "unknown";
}

/* Take over params, optimizer state and step from a decoded checkpoint
 * (ours from disk, or a peer's). It must match the model (checked). */
/* The optimizer half of adopt_state: checked and loaded (converted)
 * into t->optim; the model need not exist yet. */
static int adopt_optim(struct node_trainer *t, const struct nn_checkpoint *ck,
                       const char *name, char *err, size_t errlen)
{
        int rc;

        rc = nn_checkpoint_check(ck, t->spec, t->nparams, UINT64_MAX, name, err,
                                 errlen);
        if (rc)
                return rc;
        /* the state may be of the other SGD momentum kind (converted) */
        if (nn_optim_load_state(t->optim, meta_state_kind(t, ck), ck->opt,
                                ck->n_opt, ck->params)) {
                snprintf(err, errlen,
                         "%s: its optimizer state (%s, %llu floats) does "
                         "not fit this optimizer (%s; --optimizer, "
                         "--momentum-kind)",
                         name, state_kind_name(meta_state_kind(t, ck)),
                         (unsigned long long)ck->n_opt,
                         state_kind_name(nn_optim_state_kind(t->optim)));
                return NN_EMISMATCH;
        }
        return 0;
}

/* The parameters and the step of ck (optimizer taken: adopt_optim). */
static void adopt_params(struct node_trainer *t, const struct nn_checkpoint *ck)
{
        memcpy(nn_model_params(t->model), ck->params,
               t->nparams * sizeof(float));
        nn_optim_set_steps(t->optim, ck->step);
        t->step = t->start_step = ck->step;
}

static int adopt_state(struct node_trainer *t, const struct nn_checkpoint *ck,
                       const char *name, char *err, size_t errlen)
{
        int rc = adopt_optim(t, ck, name, err, errlen);

        if (rc == 0)
                adopt_params(t, ck);
        return rc;
}

/* ---- set-up ------------------------------------------------------------- */

/* What the cluster needs before the data is loaded (docs/design.md, "Join
 * first"): the parameter count and the canonical spec, from the spec and
 * the sample shape in the data set's header. A missing data set or a
 * spec that does not build for it is reported here, before the node
 * joins, in the words setup_data and setup_model would use. */
static int setup_shape(struct node_trainer *t, char *err, size_t errlen)
{
        const struct node_options *o = t->o;
        struct nn_dataset sh;
        int rc, c, h, w;

        rc = nn_dataset_probe_dir(o->data_dir, 1, &sh, err, errlen);
        if (rc)
                return rc;
        c = (int)sh.channels;
        h = (int)sh.rows;
        w = (int)sh.cols;
        t->sample_size = (uint32_t)(sh.channels * sh.rows * sh.cols);
        t->data_classes = sh.classes;
        rc = nn_spec_nparams(o->model, c, h, w, &t->nparams);
        if (rc == 0)
                rc = nn_spec_canonical(o->model, c, h, w, t->spec,
                                       sizeof(t->spec));
        if (rc)
                return gn_fail(err, errlen, rc,
                               "--model: '%s' does not build for %dx%dx%d "
                               "input: %s",
                               o->model, c, h, w, nn_strerror(rc));
        return 0;
}

/* The optimizer, at create: it needs only the parameter count, and a
 * checkpoint's optimizer state is checked against it before the join. */
static int setup_optim(struct node_trainer *t, char *err, size_t errlen)
{
        const struct node_options *o = t->o;
        struct nn_optim_config oc = {0};
        int rc;

        oc.kind =
            o->optimizer == NODE_OPTIM_ADAM ? NN_OPTIM_ADAM : NN_OPTIM_SGD;
        oc.lr = o->lr;
        oc.momentum = o->optimizer == NODE_OPTIM_ADAM ? 0 : o->momentum;
        oc.quasi_global = o->momentum_kind == NODE_MOMENTUM_QUASI_GLOBAL;
        oc.quasi_global_bound = TRAINER_QG_BOUND;
        oc.weight_decay = o->weight_decay;
        oc.beta1 = 0.9f;
        oc.beta2 = 0.999f;
        oc.eps = 1e-8f;
        rc = nn_optim_create(&oc, t->nparams, &t->optim);
        if (rc)
                return gn_fail(err, errlen, rc, "optimizer: %s",
                               nn_strerror(rc));
        t->nopt = nn_optim_state_len(t->optim);
        return 0;
}

/* BLIS's kernels, when main() left their probe to us (train/kernel.h;
 * a program that started BLIS itself, as the tests do, left nothing):
 * here, on the training thread, the probe's seconds pass while the node
 * is already a member. */
static int setup_kernel(struct node_trainer *t, char *err, size_t errlen)
{
        const struct node_options *o = t->o;
        struct node_kernel_req req = {
            .spec = o->model,
            .batch = (int)((o->batch + o->threads - 1) / o->threads),
            .override = o->blis_arch,
        };
        char line[512];
        int rc;

        if (!node_kernel_pending())
                return 0;
        rc = node_kernel_setup(&req, line, sizeof(line), err, errlen);
        if (rc)
                return rc == -EIO ? NN_EIO : NN_EINVAL;
        node_log(NODE_LOG_INFO, "%s", line);
        return 0;
}

static int setup_data(struct node_trainer *t, char *err, size_t errlen)
{
        const struct node_options *o = t->o;
        size_t ss;
        int rc;

        rc = nn_dataset_load_dir(o->data_dir, 1, &t->train_all, err, errlen);
        if (rc)
                return rc;
        rc = nn_dataset_load_dir(o->data_dir, 0, &t->test, err, errlen);
        if (rc)
                return rc;
        rc = nn_dataset_partition(&t->train_all, &o->partition, (int)o->shard_i,
                                  (int)o->shard_n, &t->shard);
        if (rc || t->shard.n == 0)
                return gn_fail(err, errlen, NN_EINVAL,
                               "--shard %u/%u with --partition: this node's "
                               "part of the %u samples is empty",
                               o->shard_i, o->shard_n, t->train_all.n);
        rc = nn_batcher_init(&t->batcher, &t->shard, o->seed);
        if (rc)
                return gn_fail(err, errlen, rc, "batcher: %s", nn_strerror(rc));
        ss = nn_dataset_sample_size(&t->test);
        t->x = malloc((size_t)o->batch * ss * sizeof(float));
        t->y = malloc(o->batch);
        t->test_x = malloc((size_t)t->test.n * ss * sizeof(float));
        if (!t->x || !t->y || !t->test_x)
                return gn_fail(err, errlen, NN_ENOMEM, "out of memory");
        nn_data_to_float(t->test.images, (size_t)t->test.n * ss, t->test_x);
        t->steps_per_epoch = (t->shard.n + o->batch - 1) / o->batch;
        return 0;
}

static int setup_model(struct node_trainer *t, char *err, size_t errlen)
{
        const struct node_options *o = t->o;
        int rc, c = (int)t->train_all.channels, h = (int)t->train_all.rows,
                w = (int)t->train_all.cols;

        rc = nn_model_create(o->model, c, h, w, o->seed, &t->model);
        if (rc)
                return gn_fail(err, errlen, rc,
                               "--model: '%s' does not build for %dx%dx%d "
                               "input: %s",
                               o->model, c, h, w, nn_strerror(rc));
        if ((uint32_t)nn_model_classes(t->model) < t->train_all.classes)
                return gn_fail(err, errlen, NN_EINVAL,
                               "--model: '%s' has %d outputs, the data %u "
                               "classes",
                               o->model, nn_model_classes(t->model),
                               t->train_all.classes);
        /* the cluster was opened with the size setup_shape computed; a
         * data set replaced between the two reads must not change it */
        if (nn_model_nparams(t->model) != t->nparams)
                return gn_fail(err, errlen, NN_EMISMATCH,
                               "--data %s: its shape changed while the node "
                               "started (%zu parameters, %zu at the start)",
                               o->data_dir, nn_model_nparams(t->model),
                               t->nparams);
        snprintf(t->spec, sizeof(t->spec), "%s", nn_model_spec(t->model));
        if (o->fill_batches) {
                t->fill_size = o->fill_size ? o->fill_size : o->batch / 4;
                if (t->fill_size == 0 || t->fill_size > o->batch)
                        t->fill_size = o->batch;
                t->gacc = malloc(t->nparams * sizeof(float));
                if (!t->gacc)
                        return gn_fail(err, errlen, NN_ENOMEM, "out of memory");
        }
        rc = nn_model_reserve(t->model, (int)(o->batch > TRAINER_EVAL_BATCH
                                                  ? o->batch
                                                  : TRAINER_EVAL_BATCH));
        if (rc)
                return gn_fail(err, errlen, rc, "model: %s", nn_strerror(rc));
        t->good_params = malloc(t->nparams * sizeof(float));
        t->good_opt = malloc((t->nopt ? t->nopt : 1) * sizeof(float));
        t->ver_params = malloc(t->nparams * sizeof(float));
        t->ver_opt = malloc((t->nopt ? t->nopt : 1) * sizeof(float));
        if (!t->good_params || !t->good_opt || !t->ver_params || !t->ver_opt)
                return gn_fail(err, errlen, NN_ENOMEM, "out of memory");
        return 0;
}

static void setup_schedule(struct node_trainer *t)
{
        const struct node_options *o = t->o;
        uint64_t total = 0;

        if (o->steps)
                total = o->steps;
        if (o->epochs) {
                uint64_t e = (uint64_t)o->epochs * t->steps_per_epoch;
                if (!total || e < total)
                        total = e;
        }
        if (!total) /* time or target only: anneal over 10 epochs */
                total = 10 * t->steps_per_epoch;
        t->lr.kind = o->lr_schedule == NODE_SCHED_COSINE ? NN_LR_COSINE
                     : o->lr_schedule == NODE_SCHED_STEP ? NN_LR_STEP
                                                         : NN_LR_CONST;
        t->lr.base_lr = o->lr;
        t->lr.min_lr = o->lr * TRAINER_COSINE_FLOOR;
        t->lr.warmup_steps = o->warmup;
        t->lr.total_steps = total;
        t->lr.step_every = TRAINER_STEP_EPOCHS * t->steps_per_epoch;
        t->lr.gamma = TRAINER_STEP_GAMMA;
}

/* Read DIR/model.ckpt when it exists (and not --fresh), checked against
 * the spec and size (before the join: a corrupt or foreign file is
 * refused before the node is a member); setup_resume takes it once the
 * model exists. A file that is there but unusable is an error: never
 * silently start over. */
static int setup_checkpoint(struct node_trainer *t, char *err, size_t errlen)
{
        const struct node_options *o = t->o;
        struct stat sb;
        int rc, n;

        if (!o->checkpoint_dir)
                return 0;
        if (mkdir(o->checkpoint_dir, 0700) != 0 && errno != EEXIST)
                return gn_fail(err, errlen, -errno, "--checkpoint-dir %s: %s",
                               o->checkpoint_dir, strerror(errno));
        n = snprintf(t->ckpt_path, sizeof(t->ckpt_path), "%s/%s",
                     o->checkpoint_dir, NODE_TRAINER_CKPT_NAME);
        if (n < 0 || (size_t)n >= sizeof(t->ckpt_path))
                return gn_fail(err, errlen, -ENAMETOOLONG,
                               "--checkpoint-dir: path too long");
        n = nn_checkpoint_clean_tmp(t->ckpt_path);
        if (n > 0)
                node_log(NODE_LOG_INFO,
                         "removed %d temp file(s) of interrupted saves", n);
        if (o->fresh || stat(t->ckpt_path, &sb) != 0)
                return 0;
        rc = nn_checkpoint_load_expect(t->ckpt_path, t->spec, t->nparams,
                                       UINT64_MAX, &t->ck, err, errlen);
        if (rc)
                return rc;
        t->has_ck = 1;
        return adopt_optim(t, &t->ck, t->ckpt_path, err, errlen);
}

/* Resume from the checkpoint setup_checkpoint read and checked, if any. */
static void setup_resume(struct node_trainer *t)
{
        const struct node_options *o = t->o;

        if (!t->has_ck)
                return;
        adopt_params(t, &t->ck);
        meta_apply(t, &t->ck);
        t->resumed = 1;
        if (t->ck.seed != o->seed)
                node_log(NODE_LOG_WARN,
                         "checkpoint was written with --seed %llu, "
                         "running with %llu",
                         (unsigned long long)t->ck.seed,
                         (unsigned long long)o->seed);
        nn_checkpoint_free(&t->ck);
        t->has_ck = 0;
}

int node_trainer_create(const struct node_options *o,
                        const struct node_trainer_hooks *hooks,
                        struct node_evlog *ev, struct node_trainer **out,
                        char *err, size_t errlen)
{
        struct node_trainer *t;
        int rc;

        *out = NULL;
        t = calloc(1, sizeof(*t));
        if (!t)
                return gn_fail(err, errlen, NN_ENOMEM, "out of memory");
        t->o = o;
        t->h = hooks ? hooks : &t->no_hooks;
        t->ev = ev;
        pthread_mutex_init(&t->stats_lock, NULL);
        pthread_cond_init(&t->gate, NULL);
        node_stall_init(&t->stall);
        t->pace_r = t->pace_r_told = t->st.pace_ratio = 1.0;
        atomic_init(&t->stop_flag, 0);
        t->st.test_acc = NAN;
        t->st.test_loss = NAN;
        /* nothing measured before the first progress window: reported nil */
        t->st.loss = t->st.acc = t->st.sps = NAN;
        t->last_eval_acc = NAN;
        t->st.loading = 1;
        nn_threads_set((int)o->threads);
        rc = setup_shape(t, err, errlen);
        if (rc == 0)
                rc = setup_optim(t, err, errlen);
        if (rc == 0)
                rc = setup_checkpoint(t, err, errlen);
        if (rc) {
                node_trainer_free(t);
                return rc;
        }
        t->st.params = t->nparams;
        *out = t;
        return 0;
}

/* Training thread, first thing: BLIS's kernels, the data, the model and
 * the checkpoint (node_trainer_load's contract); between the long parts
 * a stop asked meanwhile ends it (NN_ECANCELED, no message). */
static int load(struct node_trainer *t, char *err, size_t errlen)
{
        int rc;

        if (atomic_load(&t->stop_flag)) /* stopped while held, or before */
                return -ECANCELED;
        rc = setup_kernel(t, err, errlen);
        if (rc == 0 && !atomic_load(&t->stop_flag))
                rc = setup_data(t, err, errlen);
        if (rc == 0 && !atomic_load(&t->stop_flag))
                rc = setup_model(t, err, errlen);
        if (rc)
                return rc;
        if (atomic_load(&t->stop_flag))
                return -ECANCELED;
        setup_schedule(t);
        setup_resume(t);
        t->loaded = 1;
        pthread_mutex_lock(&t->stats_lock);
        t->st.loading = 0;
        t->st.step = t->step;
        t->st.resumed_from = t->step;
        t->st.epoch = (uint32_t)nn_batcher_epoch(&t->batcher);
        pthread_mutex_unlock(&t->stats_lock);
        return 0;
}

int node_trainer_load(struct node_trainer *t, char *err, size_t errlen)
{
        return t->loaded ? 0 : load(t, err, errlen);
}

/* ---- the loop ----------------------------------------------------------- */

struct window { /* progress accumulators since the last tick / eval */
        double loss_sum;
        uint64_t correct, samples, batches;
        double t0;
};

static void window_reset(struct window *w)
{
        memset(w, 0, sizeof(*w));
        w->t0 = mono_s();
}

/* "41.2k" */
static const char *human(double v, char *buf, size_t len)
{
        if (v >= 1e6)
                snprintf(buf, len, "%.1fM", v / 1e6);
        else if (v >= 1e3)
                snprintf(buf, len, "%.1fk", v / 1e3);
        else
                snprintf(buf, len, "%.0f", v);
        return buf;
}

/* The 1-based epoch of the last batch: trained in this run, else the
 * resumed model's (the batcher's position: an epoch just completed is
 * that epoch, not the next), else the first. */
static uint32_t display_epoch(struct node_trainer *t)
{
        if (t->batch_epoch)
                return t->batch_epoch;
        if (t->step == 0)
                return (uint32_t)nn_batcher_epoch(&t->batcher) + 1;
        if (t->batcher.pos == 0 && t->batcher.epoch > 0)
                return (uint32_t)t->batcher.epoch; /* index of the next */
        return (uint32_t)t->batcher.epoch + 1;
}

static void progress(struct node_trainer *t, struct window *w, double lr)
{
        double dt = mono_s() - w->t0;
        double loss = w->batches ? w->loss_sum / (double)w->batches : NAN;
        double acc =
            w->samples ? 100.0 * (double)w->correct / (double)w->samples : NAN;
        double sps = dt > 0 ? (double)w->samples / dt : 0;
        double max_us;
        uint64_t slow;
        char h[32];

        node_log(NODE_LOG_INFO,
                 "epoch %u step %llu loss %.4f acc %.1f%% %s "
                 "samples/s",
                 display_epoch(t), (unsigned long long)t->step, loss, acc,
                 human(sps, h, sizeof(h)));
        node_stall_window_take(&t->stall, &max_us, &slow);
        node_evlog_step(t->ev, t->step, display_epoch(t), loss, acc, sps, lr,
                        max_us / 1e3, slow);
        pthread_mutex_lock(&t->stats_lock);
        t->st.loss = loss;
        t->st.acc = acc;
        t->st.sps = sps;
        t->st.lr = lr;
        pthread_mutex_unlock(&t->stats_lock);
        window_reset(w);
}

/* Evaluate on the test set; ew holds the training window since the last
 * evaluation (its accuracy is the "train accuracy" reported). */
static void health_rollback(struct node_trainer *t, int why, float loss);
static void health_snapshot(struct node_trainer *t);
static int fetch_state(struct node_trainer *t);
static int health_eval(struct node_trainer *t, float test_loss, float acc);

static int evaluate(struct node_trainer *t, struct window *ew)
{
        float loss = NAN, acc = NAN;
        double train_acc =
            ew->samples ? 100.0 * (double)ew->correct / (double)ew->samples
                        : NAN;
        double train_loss =
            ew->batches ? ew->loss_sum / (double)ew->batches : NAN;
        double t0 = mono_s();
        int rc;

        rc = nn_model_evaluate(t->model, t->test_x, t->test.labels,
                               (int)t->test.n, &loss, &acc);
        t->eval_end_s = mono_s();
        t->eval_took_s = t->eval_end_s - t0;
        if (rc == 0 && health_eval(t, loss, 100.0f * acc) != 0) {
                /* never report, checkpoint or end with a broken model */
                rc = nn_model_evaluate(t->model, t->test_x, t->test.labels,
                                       (int)t->test.n, &loss, &acc);
        }
        if (rc)
                return rc;
        t->last_eval_acc = 100.0 * acc;
        t->last_eval_step = t->step;
        if (ew->batches)
                node_log(NODE_LOG_INFO,
                         "eval epoch %u step %llu train loss %.5f train acc "
                         "%.2f%% test loss %.5f test acc %.2f%%",
                         display_epoch(t), (unsigned long long)t->step,
                         train_loss, train_acc, (double)loss, 100.0 * acc);
        else /* nothing trained since the last one (a resumed, finished
              * model): no training figures to tell, not NaN */
                node_log(NODE_LOG_INFO,
                         "eval epoch %u step %llu test loss %.5f test acc "
                         "%.2f%%",
                         display_epoch(t), (unsigned long long)t->step,
                         (double)loss, 100.0 * acc);
        node_evlog_eval(t->ev, t->step, display_epoch(t), train_acc,
                        100.0 * acc, loss, t->train_s, t->compute_s,
                        t->st.steps_skipped);
        pthread_mutex_lock(&t->stats_lock);
        t->st.test_acc = 100.0 * acc;
        t->st.test_loss = loss;
        t->st.evals++;
        pthread_mutex_unlock(&t->stats_lock);
        if (t->h->on_eval)
                t->h->on_eval(t->h->ctx, t->step, 100.0 * acc);
        window_reset(ew);
        return 0;
}

/* The step's gradient (mean over its batch of n) becomes the mean over
 * every sample since the last step: the extra batches' weighted sum is in
 * gacc. */
static void fold_extra(struct node_trainer *t, int n)
{
        float *g = nn_model_grads(t->model);
        const float *a = t->gacc;
        float wn = (float)n, inv = 1.0f / (float)(t->acc_n + (uint64_t)n);

        for (size_t i = 0; i < t->nparams; i++)
                g[i] = (a[i] + wn * g[i]) * inv;
}

int node_trainer_extra_batch(struct node_trainer *t)
{
        double t0 = mono_s(), c0 = node_handoff_thread_cpu_us();
        float loss = 0, *g, *a = t->gacc, wn;
        int n, correct = 0, rc;

        if (!a)
                return NN_EINVAL;
        n = nn_batcher_next(&t->batcher, t->x, t->y, (int)t->fill_size);
        if (n <= 0)
                return n < 0 ? n : NN_EINVAL;
        rc = nn_model_train_batch(t->model, t->x, t->y, n, &loss, &correct);
        if (rc)
                return rc;
        g = nn_model_grads(t->model);
        wn = (float)n;
        if (t->acc_n == 0) {
                for (size_t i = 0; i < t->nparams; i++)
                        a[i] = wn * g[i];
        } else {
                for (size_t i = 0; i < t->nparams; i++)
                        a[i] += wn * g[i];
        }
        t->acc_n += (uint64_t)n;
        t->acc_loss += loss;
        t->acc_correct += (uint64_t)correct;
        t->acc_batches++;
        t->compute_s += mono_s() - t0;
        t->extra_cpu_us += node_handoff_thread_cpu_us() - c0;
        pthread_mutex_lock(&t->stats_lock);
        t->st.extra_batches++;
        pthread_mutex_unlock(&t->stats_lock);
        return 0;
}

/* ---- the exchange's side of a step --------------------------------------- */

/* The snapshot a peer asked for: taken at once (a copy of the
 * parameters and optimizer state), sealed TRAINER_SEAL_PIECE bytes a call
 * (one or a few calls a step, more while we wait), posted once sealed. */
static void exchange_snapshot(struct node_trainer *t)
{
        int rc;

        if (!t->seal_buf &&
            (!node_handoff_snapshot_wanted(t->box) ||
             open_state(t, &t->seal_buf, &t->seal_len, &t->seal) != 0)) {
                t->seal_buf = NULL;
                return;
        }
        rc = nn_checkpoint_seal_some(&t->seal, TRAINER_SEAL_PIECE);
        if (rc == 0)
                return;
        if (rc == 1)
                node_handoff_post_snapshot(t->box, t->seal_buf, t->seal_len);
        else
                gn_big_free(t->seal_buf);
        t->seal_buf = NULL;
}

/* Ask the plan at one point of the step and obey it until it says READY:
 * an extra batch (folded into the next step), a snapshot, or a wait. */
static void exchange_admit(struct node_trainer *t, int phase, int last)
{
        struct node_handoff_ask a;

        node_handoff_ask_begin(&a);
        for (;;) {
                exchange_snapshot(t);
                switch (node_handoff_admit(t->box, phase, t->step,
                                           atomic_load(&t->stop_flag), last,
                                           &a)) {
                case GOSSIP_PLAN_READY:
                        return;
                case GOSSIP_PLAN_TRAIN_MORE:
                        if (node_trainer_extra_batch(t)) /* none after it */
                                a.w.extra = UINT32_MAX;
                        break;
                default: {
                        double w0 = mono_s();

                        node_handoff_wait(t->box, &a);
                        t->step_wait_s += mono_s() - w0;
                }
                }
        }
}

/* A change in whether the exchange works, said once (issue 12: never
 * train alone silently). gossipctl train and /metrics show the state. */
static void say_exchange(struct node_trainer *t)
{
        struct gossip_plan_health eh;
        char why[128];

        if (!node_handoff_exchange_news(t->box, &eh))
                return;
        gossip_plan_health_say(&eh, why, sizeof(why));
        if (eh.verdict == GOSSIP_PLAN_HEALTHY)
                node_log(NODE_LOG_INFO,
                         "exchange recovered at step %llu: "
                         "%.0f%% of received slices averaged",
                         (unsigned long long)t->step, 100.0 * eh.used);
        else
                node_log(NODE_LOG_WARN,
                         "exchange %s at step %llu; this node "
                         "is training mostly alone",
                         why, (unsigned long long)t->step);
}

/* Steps passed per step trained (gossip_plan_pace_ratio), up to
 * TRAINER_PACE_MAX: told to stats when it changes, logged when it moves
 * by a quarter. */
static double pace_ratio(struct node_trainer *t)
{
        double r = gossip_plan_pace_ratio(&t->pace, TRAINER_PACE_MAX);

        if (fabs(r - t->pace_r_told) >= 0.25) {
                node_log(NODE_LOG_INFO,
                         "training %.0f%% of the steps passed (a pace ratio "
                         "of %.2f: partners step faster)%s",
                         100.0 / r, r,
                         t->shuf ? "; the sample shuffle sends as many "
                                   "times its samples per step trained"
                                 : "");
                t->pace_r_told = r;
        }
        if (r != t->pace_r) {
                t->pace_r = r;
                pthread_mutex_lock(&t->stats_lock);
                t->st.pace_ratio = r;
                pthread_mutex_unlock(&t->stats_lock);
        }
        return r;
}

/* Every recent partner is ahead (gossip_plan_catch_up): take their
 * pace, keep our model. Never skips into the run's last steps. So far
 * ahead that skipping cannot close it (gossip_plan_far_behind): take a
 * peer's state, as at join, at most once per TRAINER_REFETCH_S. */
static void catch_up(struct node_trainer *t)
{
        const struct node_options *o = t->o;
        uint64_t end = UINT64_MAX, skip, was = t->step;
        double w0;
        int ok;

        if (node_handoff_far_behind(t->box, t->step) &&
            mono_s() >= t->refetch_after) {
                node_log(NODE_LOG_INFO,
                         "far behind every recent partner at step %llu: "
                         "asking for a peer's model",
                         (unsigned long long)t->step);
                w0 = mono_s();
                t->refetch_after = w0 + TRAINER_REFETCH_S;
                ok = fetch_state(t);
                t->step_wait_s += mono_s() - w0; /* a wait for a peer */
                if (ok) {
                        /* the peer's model is the good one from now on,
                         * and our held slices are of steps we left */
                        node_handoff_forget_own(t->box);
                        health_snapshot(t);
                        pthread_mutex_lock(&t->stats_lock);
                        t->st.refetches++;
                        pthread_mutex_unlock(&t->stats_lock);
                        /* steps passed, not trained, like a skip */
                        if (t->step > was) {
                                gossip_plan_pace_note(&t->pace, t->step - was,
                                                      0);
                                pace_ratio(t);
                        }
                        node_log(NODE_LOG_INFO,
                                 "moved from step %llu to %llu on a peer's "
                                 "state",
                                 (unsigned long long)was,
                                 (unsigned long long)t->step);
                }
                return;
        }

        if (o->steps)
                end = o->steps;
        if (o->epochs && (uint64_t)o->epochs * t->steps_per_epoch < end)
                end = (uint64_t)o->epochs * t->steps_per_epoch;
        skip = node_handoff_catch_up(t->box, t->step,
                                     end > t->step ? end - t->step : 0);
        if (!skip)
                return;
        node_log(NODE_LOG_INFO,
                 "behind every recent partner at step %llu: skipping %llu "
                 "steps to theirs (our model kept)",
                 (unsigned long long)t->step, (unsigned long long)skip);
        node_evlog_catch_up(t->ev, t->step, skip);
        t->step += skip;
        gossip_plan_pace_note(&t->pace, skip, 0);
        pace_ratio(t);
        pthread_mutex_lock(&t->stats_lock);
        t->st.steps_skipped += skip;
        pthread_mutex_unlock(&t->stats_lock);
}

/* ---- model health --------------------------------------------------- */

/* Keep the current model as the last good one (it is checked first). */
static void health_snapshot(struct node_trainer *t)
{
        const float *p = nn_model_params(t->model);

        if (!t->loss_ok || !gn_all_finite(p, t->nparams))
                return;
        memcpy(t->good_params, p, t->nparams * sizeof(float));
        if (t->nopt)
                memcpy(t->good_opt, nn_optim_state(t->optim),
                       t->nopt * sizeof(float));
        t->good_step = t->step;
        pthread_mutex_lock(&t->stats_lock);
        t->st.health_snapshot_step = t->step;
        pthread_mutex_unlock(&t->stats_lock);
}

/* Why this step's loss says the model is broken: NN_HEALTH_OK,
 * _NONFINITE, or _EXPLOSION against the running median (the relative
 * criterion; the absolute ones are nn/health.h's, at evaluations and
 * 10-step snapshots). A healthy loss is recorded. */
static int health_loss(struct node_trainer *t, float loss)
{
        struct gossip_robust_verdict v = {.reason = GOSSIP_ROBUST_ACCEPTED};
        int warm = t->losses.n >= TRAINER_HEALTH_WARMUP;
        float med = gossip_robust_median(&t->losses);
        float chance = logf((float)nn_model_classes(t->model));

        t->loss_ok = 0;
        if (!isfinite(loss))
                return NN_HEALTH_NONFINITE;
        if (warm && loss > TRAINER_HEALTH_LOSS_FACTOR * med &&
            loss > TRAINER_HEALTH_FLOOR_CHANCE * chance)
                return NN_HEALTH_EXPLOSION;
        t->rollbacks_run = 0;
        if (warm && loss > TRAINER_HEALTH_RECORD_FACTOR * med &&
            loss > TRAINER_HEALTH_RECORD_CHANCE * chance)
                return 0; /* trains on, but is no reference */
        v.dist = loss;
        gossip_robust_note(&t->losses, &v);
        t->loss_ok = 1;
        return 0;
}

/* The parameters' RMS (NaN if one is not finite). */
static float params_rms(const struct node_trainer *t)
{
        return gossip_robust_rms(nn_model_params(t->model), NULL, t->nparams);
}

/* The model and optimizer state from a snapshot; what was built on the
 * model it replaces goes (extra batches, our held ring copies). */
static void health_restore(struct node_trainer *t, const float *params,
                           const float *opt)
{
        memcpy(nn_model_params(t->model), params, t->nparams * sizeof(float));
        if (t->nopt)
                memcpy(nn_optim_state(t->optim), opt, t->nopt * sizeof(float));
        t->acc_n = 0; /* extra batches of the broken model */
        t->acc_loss = 0;
        t->acc_correct = 0;
        t->acc_batches = 0;
        if (t->box)
                node_handoff_forget_own(t->box);
}

/* The model just passed an evaluation and every absolute criterion: it is
 * the snapshot their verdicts return to. */
static void health_verified(struct node_trainer *t)
{
        memcpy(t->ver_params, nn_model_params(t->model),
               t->nparams * sizeof(float));
        if (t->nopt)
                memcpy(t->ver_opt, nn_optim_state(t->optim),
                       t->nopt * sizeof(float));
        t->ver_step = t->step;
}

/* What an absolute verdict measured, in words, for its journal line. */
static void health_say(const struct nn_health *mh,
                       const struct nn_health_verdict *v, char *buf, size_t len)
{
        switch (v->reason) {
        case NN_HEALTH_CHANCE:
                snprintf(buf, len,
                         "test loss %.4g above chance (ln classes = %.4g) at "
                         "%d evaluations in a row",
                         (double)v->value, (double)v->limit,
                         NN_HEALTH_CHANCE_EVALS);
                break;
        case NN_HEALTH_NORM:
                snprintf(buf, len,
                         "parameter RMS %.4g above %.4g (%.1f x the largest "
                         "at a healthy evaluation)",
                         (double)v->value, (double)v->limit,
                         (double)NN_HEALTH_NORM_MULT);
                break;
        default:
                snprintf(buf, len,
                         "test accuracy %.2f%% below %.2f%% (best %.2f%% "
                         "less %.0f points)",
                         (double)v->value, (double)v->limit,
                         (double)mh->best_acc, (double)NN_HEALTH_ACC_MARGIN);
        }
}

/* An absolute verdict (a slow divergence): back to the model of the last
 * healthy evaluation, and refuse for a while every peer merged since it
 * (the box, gossip_robust_quarantine). One journal line names the
 * criterion and its values. */
static void health_diverged(struct node_trainer *t,
                            const struct nn_health_verdict *v)
{
        char what[160];
        size_t k = 0;

        health_restore(t, t->ver_params, t->ver_opt);
        /* the 10-step snapshot may hold the diverged model: replace it */
        memcpy(t->good_params, t->ver_params, t->nparams * sizeof(float));
        if (t->nopt)
                memcpy(t->good_opt, t->ver_opt, t->nopt * sizeof(float));
        t->good_step = t->ver_step;
        if (t->box)
                k = node_handoff_quarantine(t->box, t->ver_step, t->step);
        health_say(&t->mh, v, what, sizeof(what));
        node_log(NODE_LOG_WARN,
                 "model health: %s at step %llu: %s; rolled back to the "
                 "model of step %llu (last healthy evaluation), refusing "
                 "%zu peer(s) merged since for %d steps",
                 nn_health_reason_name(v->reason), (unsigned long long)t->step,
                 what, (unsigned long long)t->ver_step, k,
                 GOSSIP_ROBUST_QUARANTINE_STEPS);
        pthread_mutex_lock(&t->stats_lock);
        if (v->reason == NN_HEALTH_CHANCE)
                t->st.rollbacks_chance++;
        else if (v->reason == NN_HEALTH_NORM)
                t->st.rollbacks_norm++;
        else
                t->st.rollbacks_accuracy++;
        t->st.health_snapshot_step = t->good_step;
        pthread_mutex_unlock(&t->stats_lock);
}

/* The absolute criteria from the starting model (checked: it is the
 * verified snapshot). On label-skewed data the test set is no judge. */
static void health_start(struct node_trainer *t)
{
        uint32_t classes = (uint32_t)nn_model_classes(t->model);
        int bal = nn_health_balanced(t->shard.labels, t->shard.n, classes);

        nn_health_init(&t->mh, classes, params_rms(t), bal);
        health_verified(t);
        if (!bal)
                node_log(NODE_LOG_INFO,
                         "model health: our data is label-skewed (a class "
                         "under %.0f%% of an even share): judging by "
                         "parameter norm, not by test accuracy or loss",
                         100.0 * NN_HEALTH_BALANCE);
}

/* Said when a verdict came NN_HEALTH_RESTART times in a row and its
 * reference restarted from the model at hand (nn/health.h): each time
 * the model went back to the last healthy evaluation, the peers merged
 * since (if any) refused, and it crossed the line again by itself. */
static void health_say_restart(struct node_trainer *t, uint32_t before)
{
        if (t->mh.restarts == before)
                return;
        node_log(NODE_LOG_WARN,
                 "model health: %s again at step %llu (%.4g against %.4g), "
                 "%d times in a row after rolling back: our own training "
                 "does it; judging from this model on",
                 nn_health_reason_name(t->mh.restart_reason),
                 (unsigned long long)t->step, (double)t->mh.restart_value,
                 (double)t->mh.restart_limit, NN_HEALTH_RESTART);
}

/* The absolute criteria at an evaluation (nn_health_judge_eval): 0
 * healthy (the model becomes the verified snapshot), else rolled back.
 * A non-finite test loss goes back to the last 10-step snapshot, as a
 * non-finite batch loss does. Not an explosion test against the batch
 * losses' median: the test set holds every class, a node's own data may
 * hold two (skew), and a healthy model of those two then scores a test
 * loss above guessing (5.8 against ln 10 = 2.3 at step 100 of a
 * classes:2 run); the chance criterion applies only once the model has
 * beaten chance (nn/health.h). */
static int health_eval(struct node_trainer *t, float test_loss, float acc)
{
        struct nn_health_verdict v;
        uint32_t restarts = t->mh.restarts;

        switch (
            nn_health_judge_eval(&t->mh, test_loss, acc, params_rms(t), &v)) {
        case NN_HEALTH_OK:
                health_say_restart(t, restarts);
                health_verified(t);
                return 0;
        case NN_HEALTH_NONFINITE:
                health_rollback(t, NN_HEALTH_NONFINITE, test_loss);
                return 1;
        default:
                health_diverged(t, &v);
                return 1;
        }
}

/* The norm criterion between evaluations, before a 10-step snapshot: 0
 * healthy, 1 rolled back (the step is skipped, as for a broken loss). */
static int health_norm(struct node_trainer *t)
{
        struct nn_health_verdict v;
        uint32_t restarts = t->mh.restarts;

        switch (nn_health_judge_norm(&t->mh, params_rms(t), &v)) {
        case NN_HEALTH_OK:
                health_say_restart(t, restarts);
                return 0;
        case NN_HEALTH_NONFINITE:
                health_rollback(t, NN_HEALTH_NONFINITE, NAN);
                return 1;
        default:
                health_diverged(t, &v);
                return 1;
        }
}

/* Back to the last good snapshot (the step count goes on: the cluster's
 * schedule is by step), and refuse for a while every peer merged since
 * it (the box, gossip_robust_quarantine). why: NN_HEALTH_NONFINITE or
 * _EXPLOSION. */
static void health_rollback(struct node_trainer *t, int why, float loss)
{
        size_t k = 0;

        health_restore(t, t->good_params, t->good_opt);
        if (t->box)
                k = node_handoff_quarantine(t->box, t->good_step, t->step);
        node_log(NODE_LOG_WARN,
                 "model health: %s at step %llu (loss %g, running median "
                 "%g): rolled back to the snapshot of step %llu, refusing "
                 "%zu peer(s) merged since for %d steps",
                 nn_health_reason_name(why), (unsigned long long)t->step,
                 (double)loss, (double)gossip_robust_median(&t->losses),
                 (unsigned long long)t->good_step, k,
                 GOSSIP_ROBUST_QUARANTINE_STEPS);
        pthread_mutex_lock(&t->stats_lock);
        if (why == NN_HEALTH_NONFINITE)
                t->st.rollbacks_nonfinite++;
        else
                t->st.rollbacks_loss++;
        pthread_mutex_unlock(&t->stats_lock);
}

static int stop_due(struct node_trainer *t, int evaluated);

/* ---- the sample shuffle (--shuffle-samples, node/train/shuffle.h)
 * ------------- */

/* Up to R reservoir samples (at most half the batch) staged for this
 * step's batch; how many. */
static int shuffle_draw(struct node_trainer *t)
{
        uint32_t k;

        if (!t->shuf)
                return 0;
        k = node_shuffle_per_step(t->shuf);
        if (k > t->o->batch / 2)
                k = t->o->batch / 2;
        return (int)node_shuffle_draw(t->shuf, k, t->shuf_img, t->shuf_lab);
}

/* The k staged samples into the batch after its n own ones; returns k. */
static int shuffle_place(struct node_trainer *t, int n, int k)
{
        size_t ss;

        if (k <= 0)
                return 0;
        ss = node_shuffle_sample_bytes(t->shuf);
        nn_data_to_float(t->shuf_img, (size_t)k * ss, t->x + (size_t)n * ss);
        memcpy(t->y + n, t->shuf_lab, (size_t)k);
        return k;
}

/* R of our own samples times our pace ratio (at most
 * NODE_SHUFFLE_PACE_MAX, so a device that trains one step of four sends
 * its samples at its partners' rate), drawn at random from our part, for
 * the loop to send to this step's partner. */
static void shuffle_post(struct node_trainer *t)
{
        uint32_t r, ss;

        if (!t->shuf)
                return;
        r = node_shuffle_pace_count(t->shuf, t->pace_r);
        ss = node_shuffle_sample_bytes(t->shuf);
        for (uint32_t i = 0; i < r; i++)
                t->shuf_idx[i] =
                    (uint32_t)(gn_splitmix64(&t->shuf_rng) % t->shard.n);
        nn_samples_pack(t->shard.images, t->shard.labels, ss, t->shuf_idx, r,
                        t->shuf_out);
        node_shuffle_post(t->shuf, t->step, t->shuf_out,
                          nn_samples_packed_len(r, ss));
        node_handoff_wake_loop(t->box);
}

/* At attach: the shuffle's box, owned by the hand-off box. Without it
 * (out of memory) the node trains without the shuffle, and says so. */
static void shuffle_setup(struct node_trainer *t)
{
        const struct node_options *o = t->o;
        /* at attach, before the load (join first): the shape is the
         * header's, the labels checked against the data's classes */
        uint32_t r = o->shuffle_samples, ss = t->sample_size;
        struct node_shuffle *s = NULL;

        if (!r || !t->box)
                return;
        t->shuf_img = malloc((size_t)r * ss);
        t->shuf_lab = malloc(r);
        /* what we send: up to R x NODE_SHUFFLE_PACE_MAX a step */
        t->shuf_out =
            malloc(nn_samples_packed_len(node_shuffle_max_count(r), ss));
        t->shuf_idx = malloc(node_shuffle_max_count(r) * sizeof(uint32_t));
        t->shuf_rng = o->seed ^ (0x5348554646ull + o->shard_i);
        if (!t->shuf_img || !t->shuf_lab || !t->shuf_out || !t->shuf_idx ||
            node_shuffle_create(&s, r, o->shuffle_reservoir, ss,
                                t->data_classes, t->shuf_rng) != 0) {
                node_log(NODE_LOG_ERROR, "--shuffle-samples: out of memory; "
                                         "training without the shuffle");
                return;
        }
        node_handoff_set_shuffle(t->box, s);
        t->shuf = s;
        node_log(NODE_LOG_INFO,
                 "sample shuffle: sending %u raw samples (%zu bytes) per "
                 "step to the partner; reservoir of %u samples (%zu bytes)",
                 r, nn_samples_packed_len(r, ss), o->shuffle_reservoir,
                 nn_samples_packed_len(o->shuffle_reservoir, ss));
}

/* One optimizer step. 0 or a negative code. */
static int train_step(struct node_trainer *t, struct window *pw,
                      struct window *ew, double *lr_out)
{
        float loss = 0, lr, *dst = NULL, *g;
        size_t lo = 0, count = 0;
        uint64_t xn = 0, xcorrect = 0, xbatches = 0;
        double xloss = 0;
        int n, k, correct = 0, rc;
        double t0 = mono_s(), local;
        /* CPU time: c[0] start, c[1] local work done, c[2] box calls
         * before the update done, c[3] update done, c[4] the step's box
         * calls done; xc the extra batches' before the box calls */
        double c[5], xc;

        c[0] = node_handoff_thread_cpu_us();
        t->batch_epoch = (uint32_t)nn_batcher_epoch(&t->batcher) + 1;
        k = shuffle_draw(t);
        n = nn_batcher_next(&t->batcher, t->x, t->y, (int)t->o->batch - k);
        if (n <= 0)
                return n < 0 ? n : NN_EINVAL;
        n += shuffle_place(t, n, k);
        rc = nn_model_train_batch(t->model, t->x, t->y, n, &loss, &correct);
        if (rc)
                return rc;
        if ((rc = health_loss(t, loss)) != 0) {
                /* a broken model: nothing of it is posted or stepped */
                health_rollback(t, rc, loss);
                if (++t->rollbacks_run < TRAINER_HEALTH_MAX_ROLLBACKS)
                        return 0;
                snprintf(t->errmsg, sizeof(t->errmsg),
                         "model health: %u rollbacks in a row, the snapshot "
                         "of step %llu does not train either",
                         t->rollbacks_run, (unsigned long long)t->good_step);
                return NN_EINVAL;
        }
        /* the parameters that just scored a healthy loss are a good
         * snapshot (taken before this step's update and averaging) */
        if (t->step % TRAINER_HEALTH_SNAP_EVERY == 0) {
                if (health_norm(t))
                        return 0; /* diverged: nothing of it is posted */
                health_snapshot(t);
        }
        if (t->acc_n) { /* the extra batches trained since the last step */
                fold_extra(t, n);
                xn = t->acc_n;
                xloss = t->acc_loss;
                xcorrect = t->acc_correct;
                xbatches = t->acc_batches;
                t->acc_n = 0;
                t->acc_loss = 0;
                t->acc_correct = 0;
                t->acc_batches = 0;
        }
        local = mono_s() - t0;
        c[1] = node_handoff_thread_cpu_us();
        xc = t->extra_cpu_us;
        g = nn_model_grads(t->model);
        shuffle_post(t);
        if (t->box) {
                node_handoff_post_gradient(t->box, t->step, g, t->nparams);
                exchange_admit(t, GOSSIP_PLAN_GRADIENT, 0);
                node_handoff_merge_gradient(t->box, t->step, g, t->nparams);
                dst = node_handoff_slice_dst(t->box, t->step + 1, &lo, &count);
        }
        t0 = mono_s();
        c[2] = node_handoff_thread_cpu_us();
        lr = nn_lr_at(&t->lr, t->step);
        nn_model_step(t->model, t->optim, lr, lo, count, dst);
        t->compute_s += local + (mono_s() - t0);
        c[3] = node_handoff_thread_cpu_us();
        t->step++;
        gossip_plan_pace_note(&t->pace, 1, 1);
        pace_ratio(t);
        if (t->box) {
                float *params = nn_model_params(t->model);

                node_handoff_post_params(t->box, t->step, params, t->nparams);
                /* no extra batch after the last step: no step would
                 * fold it in (the wait for the partners' slices stays) */
                exchange_admit(t, GOSSIP_PLAN_PARAMS,
                               stop_due(t, 0) != NODE_STOP_NONE);
                nn_optim_moved(
                    t->optim,
                    node_handoff_average(t->box, t->step, params, t->nparams));
                say_exchange(t);
                catch_up(t);
                c[4] = node_handoff_thread_cpu_us();
                xc = t->extra_cpu_us - xc;
                node_handoff_note_cpu(t->box, c[1] - c[0] + c[3] - c[2] + xc,
                                      c[2] - c[1] + c[4] - c[3] - xc);
        }
        *lr_out = lr;
        for (struct window *w = pw; w; w = w == pw ? ew : NULL) {
                w->loss_sum += loss + xloss;
                w->correct += (uint64_t)correct + xcorrect;
                w->samples += (uint64_t)n + xn;
                w->batches += 1 + xbatches;
        }
        pthread_mutex_lock(&t->stats_lock);
        t->st.step = t->step;
        t->st.samples += (uint64_t)n + xn;
        t->st.epoch = (uint32_t)nn_batcher_epoch(&t->batcher);
        pthread_mutex_unlock(&t->stats_lock);
        return 0;
}

/* The cluster-wide stop (gossip/stop.h), after an evaluation: whether a
 * peer's reason, counted by the loop, ends our run now that we know our
 * own accuracy. A reason not honoured is logged once, at the evaluation
 * it asked for. */
static int cluster_stop_judge(struct node_trainer *t)
{
        uint32_t target_bp = gossip_stop_bp(t->o->target_acc);
        struct gossip_stop_verdict v;
        char why[160];
        int news;

        if (!t->box || !target_bp)
                return 0;
        if (node_handoff_stop_check(t->box, gossip_stop_bp(t->last_eval_acc),
                                    target_bp, &v, &news) != GOSSIP_STOP_WAIT)
                return 1;
        if (news) {
                gossip_stop_format_wait(&v, why, sizeof(why));
                node_log(NODE_LOG_INFO,
                         "a peer's stop not honoured: %s; training on", why);
        }
        return 0;
}

/* Which stop criterion (if any) holds after a step; evaluated says the
 * step was just evaluated (the target accuracy is checked only then). */
static int stop_due(struct node_trainer *t, int evaluated)
{
        const struct node_options *o = t->o;

        if (t->box && node_handoff_stop_reason(t->box, NULL) == 2)
                return NODE_STOP_CLUSTER; /* a peer reached the target */
        if (atomic_load(&t->stop_flag))
                return NODE_STOP_SIGNAL;
        /* our own target first: our LEAVE then carries our own reason,
         * a vote for the others (gossip/stop.h), not a repeat */
        if (evaluated && o->target_acc > 0 && t->last_eval_acc >= o->target_acc)
                return NODE_STOP_TARGET;
        if (evaluated && cluster_stop_judge(t))
                return NODE_STOP_CLUSTER;
        if (o->steps && t->step >= o->steps)
                return NODE_STOP_STEPS;
        /* the schedule's length in steps, so that extra batches
         * (--fill-batches), which also pass over the shard, do not cut
         * it short; without them the same as the batcher's epoch count */
        if (o->epochs && t->step >= (uint64_t)o->epochs * t->steps_per_epoch)
                return NODE_STOP_EPOCHS;
        if (o->time_budget_s > 0 && mono_s() - t->t_start >= o->time_budget_s)
                return NODE_STOP_TIME;
        return NODE_STOP_NONE;
}

/* Live join: training starts at `step` (a peer's state taken, or only its
 * step when it started with us, gossip_plan_join: then the model, the
 * same initial one from the cluster's --seed, and the optimizer's fresh
 * buffers stay ours, and our rounds line up with the peer's). */
static void start_at(struct node_trainer *t, uint64_t step)
{
        t->step = t->start_step = step;
        pthread_mutex_lock(&t->stats_lock);
        t->st.step = t->step;
        t->st.resumed_from = t->step;
        pthread_mutex_unlock(&t->stats_lock);
}

/* Take over a peer's state (checkpoint bytes); 0 or a negative code. */
static int take_state(struct node_trainer *t, void *buf, size_t len,
                      const char *from)
{
        struct nn_checkpoint ck = {0};
        char err[512];
        int rc;

        /* the largest state any optimizer keeps: 2 floats a parameter */
        rc = nn_checkpoint_decode(buf, len, 3 * (uint64_t)t->nparams, from, &ck,
                                  err, sizeof(err));
        if (rc == 0)
                rc = adopt_state(t, &ck, "peer state", err, sizeof(err));
        nn_checkpoint_free(&ck);
        if (rc) {
                node_log(NODE_LOG_WARN, "state from %s refused: %s", from, err);
                return rc;
        }
        node_log(NODE_LOG_INFO,
                 "took the model from %s at step %llu (%zu bytes)", from,
                 (unsigned long long)t->step, len);
        node_evlog_join(t->ev, from, t->step);
        start_at(t, t->step);
        return 0;
}

/* Ask the live peer furthest ahead for its state (join.c picks it) and
 * take it, or only its step when it started with us; 1 when we start
 * again at a peer's step, 0 when no one is ahead, we are stopping, or no
 * usable state came in NODE_HANDOFF_STATE_TRIES asks. */
static int fetch_state(struct node_trainer *t)
{
        char from[GOSSIP_NAME_MAX];
        uint64_t step;
        void *buf;
        size_t len;
        int rc;

        for (int tries = 0; tries < NODE_HANDOFF_STATE_TRIES; tries++) {
                rc = node_handoff_request_state(t->box, t->step, &buf, &len,
                                                from, sizeof(from), &step);
                if (rc == 0 || rc == -ECANCELED)
                        return 0; /* no one is ahead of us, or stopping */
                if (rc == 2) {
                        start_at(t, step);
                        return 1;
                }
                if (rc < 0)
                        continue;
                rc = take_state(t, buf, len, from);
                free(buf);
                if (rc == 0)
                        return 1;
        }
        node_log(NODE_LOG_WARN, "no state received: training from local "
                                "weights");
        return 0;
}

/* Live join, before step 0 of a run that did not resume from its own
 * checkpoint: take the state of the live peer furthest ahead, if any, or
 * only its step when it started with us. */
static void initial_state(struct node_trainer *t)
{
        if (t->resumed || !t->box)
                return;
        t->peers_at_start = node_handoff_await_peers(t->box);
        if (t->peers_at_start == 0) {
                node_log(NODE_LOG_INFO, "no live peer yet: training alone "
                                        "until one joins");
                return;
        }
        fetch_state(t);
}

/* Time one step (s seconds; evaluations and checkpoints come after it,
 * not in it): the stats, and a slow_step event when the bucket allows. */
static void stall_note(struct node_trainer *t, double s)
{
        struct node_stall_slow sl;
        const struct node_stall_stats *ss = &t->stall.st;
        int slow =
            node_stall_note(&t->stall, t->step, s * 1e6, t->step_wait_s * 1e6,
                            (uint64_t)(mono_s() * 1e6), &sl);

        pthread_mutex_lock(&t->stats_lock);
        t->st.step_pace_ms = ss->pace_us / 1e3;
        t->st.step_max_ms = ss->max_us / 1e3;
        t->st.step_max_at = ss->max_step;
        t->st.step_max_wait_ms = ss->max_wait_us / 1e3;
        t->st.steps_slow = ss->slow;
        t->st.slow_ms = ss->slow_us / 1e3;
        t->st.slow_wait_ms = ss->slow_wait_us / 1e3;
        pthread_mutex_unlock(&t->stats_lock);
        if (slow)
                node_evlog_slow_step(t->ev, sl.step, sl.us / 1e3,
                                     sl.pace_us / 1e3, sl.wait_us / 1e3,
                                     sl.held, sl.held_max_us / 1e3,
                                     sl.held_max_step);
}

static int run_loop(struct node_trainer *t, int *reason)
{
        const struct node_options *o = t->o;
        struct window pw, ew;
        double lr = o->lr, next_tick;
        uint64_t epoch_before;
        int rc = 0, evaluated;

        window_reset(&pw);
        window_reset(&ew);
        next_tick = mono_s() + o->progress_ms / 1000.0;
        *reason = stop_due(t, 0);
        while (*reason == NODE_STOP_NONE) {
                double s0 = mono_s();

                epoch_before = nn_batcher_epoch(&t->batcher);
                t->step_wait_s = 0;
                rc = train_step(t, &pw, &ew, &lr);
                if (rc)
                        return rc;
                t->train_s += mono_s() - s0;
                stall_note(t, mono_s() - s0);
                if (mono_s() >= next_tick) {
                        progress(t, &pw, lr);
                        next_tick = mono_s() + o->progress_ms / 1000.0;
                }
                evaluated = 0;
                /* also when a peer's stop reason asks us to judge by
                 * our own accuracy (cluster_stop_judge), and again while
                 * it waits */
                if ((o->eval_every
                         ? t->step % o->eval_every == 0
                         : nn_batcher_epoch(&t->batcher) != epoch_before) ||
                    (t->box &&
                     (node_handoff_stop_eval_wanted(t->box) ||
                      node_handoff_stop_recheck_due(
                          t->box, mono_s() - t->eval_end_s, t->eval_took_s)))) {
                        rc = evaluate(t, &ew);
                        if (rc)
                                return rc;
                        evaluated = 1;
                }
                if (o->checkpoint_every && t->step % o->checkpoint_every == 0)
                        save_checkpoint(t);
                *reason = stop_due(t, evaluated);
        }
        if (t->last_eval_step != t->step || isnan(t->last_eval_acc))
                rc = evaluate(t, &ew);
        return rc;
}

/* Where the training thread's time went: the compute share, and how
 * often it gave up its core (voluntary: it blocked on a lock or a wait;
 * involuntary: preempted). */
static void thread_report(struct node_trainer *t)
{
        struct rusage ru;

        if (getrusage(RUSAGE_THREAD, &ru))
                memset(&ru, 0, sizeof(ru));
        node_log(NODE_LOG_INFO,
                 "training thread: computing %.3f s of %.3f s (%.1f%%), "
                 "%llu extra batches while waiting, %ld voluntary and %ld "
                 "involuntary context switches",
                 t->compute_s, t->train_s,
                 t->train_s > 0 ? 100.0 * t->compute_s / t->train_s : 0.0,
                 (unsigned long long)t->st.extra_batches, ru.ru_nvcsw,
                 ru.ru_nivcsw);
}

/* The run's stalls in one line (train/stall.h). */
static void stall_report(struct node_trainer *t)
{
        const struct node_stall_stats *ss = &t->stall.st;

        if (ss->max_us <= 0) {
                node_log(NODE_LOG_INFO,
                         "steps: %llu timed, too few to judge stalls",
                         (unsigned long long)ss->steps);
                return;
        }
        node_log(NODE_LOG_INFO,
                 "steps: pace %.1f ms (median), longest %.1f ms at step "
                 "%llu (%.1f ms waiting for partners), %llu slow (over "
                 "2x the pace) of %llu: %.1f s, %.1f s of it waiting",
                 ss->pace_us / 1e3, ss->max_us / 1e3,
                 (unsigned long long)ss->max_step, ss->max_wait_us / 1e3,
                 (unsigned long long)ss->slow, (unsigned long long)ss->steps,
                 ss->slow_us / 1e6, ss->slow_wait_us / 1e6);
}

/* The cluster-wide stop (gossip/stop.h), at the end of a run: our own
 * target reached becomes the reason our LEAVE carries; a peer's is
 * reported in one line. */
static void cluster_stop_note(struct node_trainer *t, int reason)
{
        struct gossip_stop s = {0};
        char line[160];

        if (!t->box)
                return;
        if (reason == NODE_STOP_TARGET) {
                s.reason = GOSSIP_STOP_TARGET;
                s.step = t->step;
                s.acc_bp = gossip_stop_bp(t->last_eval_acc);
                s.target_bp = gossip_stop_bp(t->o->target_acc);
                if (t->o->name)
                        snprintf(s.origin, sizeof(s.origin), "%s", t->o->name);
                node_handoff_stop_own(t->box, &s);
        } else if (reason == NODE_STOP_CLUSTER &&
                   node_handoff_stop_reason(t->box, &s) == 2) {
                gossip_stop_format(&s, line, sizeof(line));
                node_log(NODE_LOG_INFO, "%s", line);
        }
}

/* The run ends before it began: the load failed or a stop came first.
 * Nothing was trained, so nothing is saved (an older checkpoint stays as
 * it was) and nothing is evaluated. */
/* The run is over (loaded or not): say so in the stats, tell the daemon;
 * returns rc. */
static int ended(struct node_trainer *t, int reason, int rc)
{
        pthread_mutex_lock(&t->stats_lock);
        t->st.running = 0;
        t->st.stop_reason = reason;
        pthread_mutex_unlock(&t->stats_lock);
        t->run_rc = rc;
        if (t->h->on_done)
                t->h->on_done(t->h->ctx, t);
        return rc;
}

static int end_unloaded(struct node_trainer *t, int rc)
{
        int reason = rc == -ECANCELED ? NODE_STOP_SIGNAL : NODE_STOP_ERROR;

        if (reason == NODE_STOP_ERROR) {
                if (!t->errmsg[0])
                        snprintf(t->errmsg, sizeof(t->errmsg), "loading: %s",
                                 nn_strerror(rc));
                node_log(NODE_LOG_ERROR, "%s", t->errmsg);
        } else {
                rc = 0;
                node_log(NODE_LOG_INFO, "done (signal) while loading");
        }
        return ended(t, reason, rc);
}

int node_trainer_run(struct node_trainer *t)
{
        int reason = NODE_STOP_NONE, rc;

        pthread_mutex_lock(&t->stats_lock);
        t->st.running = 1;
        while (t->held && !atomic_load(&t->stop_flag))
                pthread_cond_wait(&t->gate, &t->stats_lock);
        pthread_mutex_unlock(&t->stats_lock);
        rc = node_trainer_load(t, t->errmsg, sizeof(t->errmsg));
        if (rc)
                return end_unloaded(t, rc);
        t->t_start = mono_s();
        initial_state(t);
        t->loss_ok = 1;
        health_snapshot(t); /* the starting model is good: checked */
        health_start(t);
        {
                node_evlog_start(t->ev, t->spec, t->nparams, t->o->shard_i,
                                 t->o->shard_n, t->o->seed, t->step,
                                 t->peers_at_start);
                node_log(NODE_LOG_INFO,
                         "training %s (%zu params, %s) on %u samples "
                         "(shard %u/%u), %llu steps/epoch, from step %llu",
                         t->spec, t->nparams,
                         state_kind_name(nn_optim_state_kind(t->optim)),
                         t->shard.n, t->o->shard_i, t->o->shard_n,
                         (unsigned long long)t->steps_per_epoch,
                         (unsigned long long)t->step);
                rc = run_loop(t, &reason);
        }
        if (rc && !t->errmsg[0])
                snprintf(t->errmsg, sizeof(t->errmsg), "training: %s",
                         nn_strerror(rc));
        if (rc) {
                node_log(NODE_LOG_ERROR, "%s", t->errmsg);
                reason = NODE_STOP_ERROR;
        }
        if (save_checkpoint(t) && !rc) {
                rc = NN_EIO;
                snprintf(t->errmsg, sizeof(t->errmsg),
                         "the final checkpoint could not be written to %.300s "
                         "(the reason is logged above)",
                         t->ckpt_path);
        }
        cluster_stop_note(t, reason);
        node_log(NODE_LOG_INFO,
                 "done (%s) after %llu steps, epoch %u: test accuracy "
                 "%.2f%%",
                 node_trainer_reason_name(reason), (unsigned long long)t->step,
                 display_epoch(t), t->last_eval_acc);
        thread_report(t);
        stall_report(t);
        node_evlog_stop(t->ev, node_trainer_reason_name(reason), t->step,
                        display_epoch(t), t->last_eval_acc,
                        t->stall.st.max_us / 1e3, t->stall.st.slow);
        return ended(t, reason, rc);
}

static void *thread_main(void *arg)
{
        node_trainer_run(arg);
        return NULL;
}

int node_trainer_start(struct node_trainer *t)
{
        int rc = pthread_create(&t->thread, NULL, thread_main, t);

        if (rc)
                return -rc;
        t->thread_started = 1;
        return 0;
}

void node_trainer_attach(struct node_trainer *t, struct node_handoff *h)
{
        t->box = h;
        shuffle_setup(t);
}

void node_trainer_hold(struct node_trainer *t)
{
        pthread_mutex_lock(&t->stats_lock);
        t->held = 1;
        pthread_mutex_unlock(&t->stats_lock);
}

void node_trainer_release(struct node_trainer *t)
{
        pthread_mutex_lock(&t->stats_lock);
        t->held = 0;
        pthread_cond_broadcast(&t->gate);
        pthread_mutex_unlock(&t->stats_lock);
}

void node_trainer_stop(struct node_trainer *t)
{
        atomic_store(&t->stop_flag, 1);
        pthread_mutex_lock(&t->stats_lock);
        pthread_cond_broadcast(&t->gate); /* a held load ends unloaded */
        pthread_mutex_unlock(&t->stats_lock);
        if (t->box)
                node_handoff_stop(t->box);
}

int node_trainer_join(struct node_trainer *t)
{
        if (t->thread_started) {
                pthread_join(t->thread, NULL);
                t->thread_started = 0;
        }
        return t->run_rc;
}

void node_trainer_free(struct node_trainer *t)
{
        if (!t)
                return;
        node_trainer_join(t);
        if (t->has_ck)
                nn_checkpoint_free(&t->ck);
        nn_optim_free(t->optim);
        nn_model_free(t->model);
        nn_batcher_free(&t->batcher);
        nn_dataset_free(&t->test);
        nn_dataset_free(&t->train_all);
        free(t->x);
        free(t->y);
        free(t->test_x);
        free(t->gacc);
        free(t->good_params);
        free(t->good_opt);
        gn_big_free(t->seal_buf);
        free(t->ver_params);
        free(t->ver_opt);
        free(t->shuf_img);
        free(t->shuf_lab);
        free(t->shuf_out);
        free(t->shuf_idx);
        pthread_mutex_destroy(&t->stats_lock);
        pthread_cond_destroy(&t->gate);
        free(t);
}

void node_trainer_stats(struct node_trainer *t, struct node_train_stats *out)
{
        pthread_mutex_lock(&t->stats_lock);
        *out = t->st;
        pthread_mutex_unlock(&t->stats_lock);
}

const char *node_trainer_error(const struct node_trainer *t)
{
        return t->errmsg;
}

struct nn_model *node_trainer_model(struct node_trainer *t)
{
        return t->model;
}

size_t node_trainer_nparams(const struct node_trainer *t)
{
        return t->nparams;
}

size_t node_trainer_opt_len(const struct node_trainer *t)
{
        return t->nopt;
}

const char *node_trainer_spec(const struct node_trainer *t)
{
        return t->spec;
}
