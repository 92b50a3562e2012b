/*
 * options.h - the daemon's command line, parsed and checked in one place.
 *
 * node_options_parse() turns argv into a struct node_options. Every value is
 * checked here, before anything is opened or allocated, so that a bad
 * command line costs the user one line naming the option and nothing else.
 * Files named by options (peers, key, data, checkpoints) are only checked
 * for syntax here; their content is the business of their own loaders.
 *
 * Invariants: after a successful parse every numeric field is in its valid
 * range, every string field points into argv or at a static default (never
 * freed), and fields the user left alone hold the defaults below. The
 * parser never prints or exits; main() does both.
 */
#ifndef NODE_OPTIONS_H
#define NODE_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "nn/partition.h"

/* Defaults, with their reasons. */
#define NODE_OPT_DATA_DEFAULT     "/usr/share/datasets/fashion-mnist"
#define NODE_OPT_MODEL_DEFAULT    "784-512-10" /* the README's MLP */
#define NODE_OPT_BATCH_DEFAULT    100          /* 600 steps per F-MNIST epoch */
#define NODE_OPT_LR_SGD           0.05f /* SGD+momentum 0.9 on the MLP: stable */
#define NODE_OPT_LR_ADAM          0.001f /* Adam's usual step size */
#define NODE_OPT_MOMENTUM_DEFAULT 0.9f
/* Staleness bound S in steps. Nodes run free (no barrier), so their step
 * counters drift apart by start-up skew, state transfer time and speed;
 * measured with 3 nodes started 0.7 s apart: S = 4 merged 20% of the
 * received gradients, S = 16 merged 75%, at the same final accuracy. */
#define NODE_OPT_STALENESS_DEFAULT 16
/* Model averaging period in steps. Measured (4 nodes on 2 cores, MLP,
 * lr 0.1, docs/history/cluster-tuning.md): one fp16 slice of 1/4 of the model
 * with the partner every step, no gradients, reached 87.8-88.1% after 1500
 * steps at 7.0 ms/step, against 87.5% at 12-13 ms/step for fp32 gradients
 * every step plus fp32 parameters every 10 steps. */
#define NODE_OPT_AVG_EVERY_DEFAULT    1
#define NODE_OPT_PARAMS_PARTS_DEFAULT 4
/* Bounded wait (ms) for the averaging slice of --avg-lag rounds back: keeps the
 * replicas in step (averaging is only as good as it is fresh). 4 nodes: no wait
 * never reached 88% in 1500 steps (87.6%); 2 ms reached it in 7.7-8.4 s; 4-5 ms
 * and 20 ms were slower (waiting out scheduling jitter).
 * docs/history/cluster-tuning.md has the runs. */
#define NODE_OPT_WAIT_MS_DEFAULT 2
/* With --wait-ms, the trainer at step s waits for the slice of round
 * s - LAG * K. Measured, 4 nodes on 2 cores: with a plain 2 ms wait, lag
 * 1: 88% in 8.4 s (20-30% of the waits timed out); lag 2: 7.7 s; lag 3:
 * 8.1 s. With --fill-batches 8: lag 2 7.4-7.5 s at 6.1 ms/step, lag 3
 * 7.3-7.4 s at 5.7 ms/step (a third of the extra batches); lag 4 7.7-8.5 s
 * (staler averages). docs/history/cluster-tuning.md #42-#43. */
#define NODE_OPT_AVG_LAG_DEFAULT 3
#define NODE_OPT_AVG_LAG_MAX     6 /* below NODE_CLUSTER_PARAMS_RING */
/* While the averaging slice is missing, compute up to this many extra
 * batches into the next step's gradient before the --wait-ms wait: a node
 * ahead of its partners does useful work (a larger batch) instead of
 * idling, and the replicas stay in step. 4 nodes on 2 cores: efficiency
 * 76.7% -> 97.5% at 0.46 of DDP-4's time (history/benchmarks-log.md 3.2). */
#define NODE_OPT_FILL_DEFAULT 8
#define NODE_OPT_FILL_MAX     8
#define NODE_OPT_PROGRESS_MS  3000 /* a progress line every 3 s */
#define NODE_OPT_NAME_MAX     32   /* as GOSSIP_NAME_MAX, NUL included */

/* parse results beyond 0 / negative */
enum {
        NODE_OPT_HELP = 1,    /* --help: print node_options_help(), exit 0 */
        NODE_OPT_VERSION = 2, /* --version: print the version, exit 0 */
};

enum node_log_level {
        NODE_LOG_ERROR = 0,
        NODE_LOG_WARN = 1,
        NODE_LOG_INFO = 2,
        NODE_LOG_DEBUG = 3,
};

enum node_opt_optimizer { NODE_OPTIM_SGD = 0, NODE_OPTIM_ADAM = 1 };
/* what SGD's momentum buffer follows (nn_optim_config.quasi_global) */
enum node_opt_momentum_kind {
        NODE_MOMENTUM_AUTO = -1, /* resolved after parsing: quasi-global
                                    with --peers, local alone */
        NODE_MOMENTUM_LOCAL = 0,
        NODE_MOMENTUM_QUASI_GLOBAL = 1
};
enum node_opt_sched {
        NODE_SCHED_CONST = 0,
        NODE_SCHED_COSINE = 1,
        NODE_SCHED_STEP = 2,
};
/* What a node does once training has finished (a stop criterion): exit
 * (the command line's default: a run is a job), or stay a member and serve
 * its final model, control socket and metrics until SIGTERM (the shipped
 * unit: a service stays up for the joiners that come later). */
enum node_opt_after {
        NODE_AFTER_EXIT = 0,
        NODE_AFTER_SERVE = 1,
};
enum node_opt_codec {
        NODE_CODEC_FP32 = 0,
        NODE_CODEC_FP16 = 1,
        NODE_CODEC_INT8 = 2,
        NODE_CODEC_TOPK = 3,
        NODE_CODEC_NONE = 4, /* gradients: send none (model averaging only) */
};

/* --adapt: off, on (the link), cpu (the link and the CPU). */
enum node_opt_adapt {
        NODE_ADAPT_OFF = 0,
        NODE_ADAPT_LINK = 1,
        NODE_ADAPT_CPU = 2,
};

struct node_options {
        /* cluster */
        const char *peers_path; /* NULL: train alone */
        const char *key_path;
        const char *listen;    /* "ADDR:PORT"; NULL: our peers-file line */
        const char *advertise; /* told to peers; NULL: node_addr_advertised */
        /* the cluster authority (docs/operations.md "Adding a device with
         * the authority"): its public key, our certificate, its list; a
         * member to join through (with a certificate no peers file is
         * needed); each NULL: not given */
        const char *authority_path, *cert_path, *crl_path, *seed_addr;
        const char *name; /* NULL: the peers-file name, the certificate's,
                             else "node" */
        const char *control_path;
        const char *metrics_addr;
        /* data and model */
        const char *data_dir;
        const char *model;
        uint32_t batch;
        uint32_t shard_i, shard_n;     /* shard_n == 1: all data */
        struct nn_partition partition; /* how shards are cut; seed resolved:
                                          --partition-seed, else --seed */
        int partition_seed_set;
        /* optimizer */
        int optimizer; /* enum node_opt_optimizer */
        float lr;      /* as given, or the optimizer's default */
        float momentum;
        int momentum_kind; /* enum node_opt_momentum_kind */
        float weight_decay;
        int lr_schedule; /* enum node_opt_sched */
        uint32_t warmup; /* steps of linear warm-up */
        uint64_t seed;   /* --seed; else the authority's (seed_set 0) */
        int seed_set;
        uint32_t threads; /* training threads per batch (nn_threads_set), each
                             with serial BLIS; 1 is deterministic */
        const char
            *blis_arch; /* NULL: probed/cached; see node/train/kernel.h */
        /* stop criteria: 0 means "not set"; whichever comes first stops */
        uint32_t epochs;
        uint64_t steps;
        double time_budget_s;
        double target_acc;   /* percent */
        uint32_t eval_every; /* steps; 0: at each epoch end */
        int after_train;     /* enum node_opt_after */
        /* checkpoints */
        const char *checkpoint_dir;
        uint32_t checkpoint_every; /* steps; 0: only at exit */
        int fresh;                 /* ignore an existing checkpoint */
        /* exchange */
        int codec;     /* enum node_opt_codec */
        uint32_t topk; /* K for topk:K */
        uint32_t partitions;
        uint32_t staleness;
        uint32_t avg_every;    /* steps; 0: never */
        uint32_t wait_ms;      /* bounded wait for a partner's gradient/slice */
        uint32_t fill_batches; /* extra batches computed instead of waiting */
        uint32_t fill_size;    /* their size; 0: batch / 4 */
        uint32_t avg_lag;      /* wait for the slice of this many rounds back */
        int params_codec;      /* enum node_opt_codec: fp32, fp16 or int8 */
        uint32_t params_parts; /* a model average covers 1 of P slices */
        float avg_weight;      /* the partner's share in an average */
        int robust;            /* robust merge (gossip/robust.h); default on */
        int adapt; /* enum node_opt_adapt: K and slice codec from the
                    * link, and with NODE_ADAPT_CPU from the CPU too
                    * (gossip/adapt.h); default NODE_ADAPT_LINK ("on") */
        uint32_t shuffle_samples;   /* raw samples sent per step; 0: off */
        uint32_t shuffle_reservoir; /* received samples kept, at most */
        /* logging */
        int log_level;
        const char *event_log;
        uint32_t progress_ms;
        int check_config; /* --check-config: validate, report, exit */
};

/* Fill o with the defaults. */
void node_options_default(struct node_options *o);

/* Parse argv into o (which it first fills with defaults). 0 on success,
 * NODE_OPT_HELP or NODE_OPT_VERSION when asked, or -EINVAL with one line in
 * err naming the option and what is wrong with its value. */
int node_options_parse(int argc, char **argv, struct node_options *o, char *err,
                       size_t errlen);

/* The complete --help text. */
const char *node_options_help(void);

/* Does this node run in a cluster (--peers, or --cert)? Else it trains
 * alone. */
int node_options_clustered(const struct node_options *o);

/* Where the revocation list is kept without --crl: in --checkpoint-dir,
 * beside the checkpoints (the unit's StateDirectory, writable). */
#define NODE_OPTIONS_CRL_FILE "authority.crl"

/* The revocation list's file (--crl, else NODE_OPTIONS_CRL_FILE in
 * --checkpoint-dir) into buf: 0, -ENOENT (neither given) or
 * -ENAMETOOLONG. The node reads and saves it there; --check-config reads
 * it. */
int node_options_crl_path(const struct node_options *o, char *buf, size_t len);

/* Short names of the enum values ("sgd", "cosine", "int8", "info", ...). */
const char *node_options_optimizer_name(int v);
const char *node_options_sched_name(int v);
const char *node_options_codec_name(int v);
const char *node_options_level_name(int v);

#endif
