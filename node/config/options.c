/*
 * options.c - getopt_long over the daemon's options, with strict values.
 *
 * Each option's value goes through one of a few checked converters (whole
 * string consumed, in range, finite); the first bad one stops the parse
 * with a message "--option: 'value' is not ...". getopt's own complaints
 * (unknown option, missing argument) are silenced (opterr = 0) and
 * rephrased the same way, so that every error is exactly one line.
 */
#include "config/options.h"
#include "base/gn_errbuf.h"
#include "train/shuffle.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
        OPT_PEERS = 256,
        OPT_KEY,
        OPT_LISTEN,
        OPT_ADVERTISE,
        OPT_AUTHORITY,
        OPT_CERT,
        OPT_CRL,
        OPT_SEED_ADDR,
        OPT_DATA,
        OPT_MODEL,
        OPT_BATCH,
        OPT_LR,
        OPT_MOMENTUM,
        OPT_MOMENTUM_KIND,
        OPT_WD,
        OPT_OPTIMIZER,
        OPT_SCHED,
        OPT_WARMUP,
        OPT_SEED,
        OPT_THREADS,
        OPT_SHARD,
        OPT_EPOCHS,
        OPT_STEPS,
        OPT_TIME,
        OPT_TARGET,
        OPT_EVAL,
        OPT_AFTER,
        OPT_CKDIR,
        OPT_CKEVERY,
        OPT_FRESH,
        OPT_CONTROL,
        OPT_METRICS,
        OPT_LEVEL,
        OPT_EVLOG,
        OPT_CODEC,
        OPT_PARTS,
        OPT_STALE,
        OPT_AVG,
        OPT_WAIT,
        OPT_FILL,
        OPT_FILLSZ,
        OPT_AVGLAG,
        OPT_PCODEC,
        OPT_PPARTS,
        OPT_AVGW,
        OPT_NAME,
        OPT_PROGRESS,
        OPT_PARTITION,
        OPT_PARTSEED,
        OPT_ROBUST,
        OPT_ADAPT,
        OPT_SHUFFLE,
        OPT_SHUFRES,
        OPT_BLIS,
        OPT_CHECK,
        OPT_HELP,
        OPT_VERSION,
};

static const struct option long_opts[] = {
    {"peers", required_argument, NULL, OPT_PEERS},
    {"key", required_argument, NULL, OPT_KEY},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"advertise", required_argument, NULL, OPT_ADVERTISE},
    {"authority", required_argument, NULL, OPT_AUTHORITY},
    {"cert", required_argument, NULL, OPT_CERT},
    {"crl", required_argument, NULL, OPT_CRL},
    {"seed-addr", required_argument, NULL, OPT_SEED_ADDR},
    {"data", required_argument, NULL, OPT_DATA},
    {"model", required_argument, NULL, OPT_MODEL},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"lr", required_argument, NULL, OPT_LR},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"momentum-kind", required_argument, NULL, OPT_MOMENTUM_KIND},
    {"weight-decay", required_argument, NULL, OPT_WD},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"lr-schedule", required_argument, NULL, OPT_SCHED},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"seed", required_argument, NULL, OPT_SEED},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"partition", required_argument, NULL, OPT_PARTITION},
    {"partition-seed", required_argument, NULL, OPT_PARTSEED},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"time-budget", required_argument, NULL, OPT_TIME},
    {"target-acc", required_argument, NULL, OPT_TARGET},
    {"eval-every", required_argument, NULL, OPT_EVAL},
    {"after-train", required_argument, NULL, OPT_AFTER},
    {"checkpoint-dir", required_argument, NULL, OPT_CKDIR},
    {"checkpoint-every", required_argument, NULL, OPT_CKEVERY},
    {"fresh", no_argument, NULL, OPT_FRESH},
    {"control", required_argument, NULL, OPT_CONTROL},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"log-level", required_argument, NULL, OPT_LEVEL},
    {"event-log", required_argument, NULL, OPT_EVLOG},
    {"codec", required_argument, NULL, OPT_CODEC},
    {"partitions", required_argument, NULL, OPT_PARTS},
    {"staleness", required_argument, NULL, OPT_STALE},
    {"avg-every", required_argument, NULL, OPT_AVG},
    {"wait-ms", required_argument, NULL, OPT_WAIT},
    {"fill-batches", required_argument, NULL, OPT_FILL},
    {"fill-size", required_argument, NULL, OPT_FILLSZ},
    {"avg-lag", required_argument, NULL, OPT_AVGLAG},
    {"params-codec", required_argument, NULL, OPT_PCODEC},
    {"params-parts", required_argument, NULL, OPT_PPARTS},
    {"avg-weight", required_argument, NULL, OPT_AVGW},
    {"robust", required_argument, NULL, OPT_ROBUST},
    {"adapt", required_argument, NULL, OPT_ADAPT},
    {"shuffle-samples", required_argument, NULL, OPT_SHUFFLE},
    {"shuffle-reservoir", required_argument, NULL, OPT_SHUFRES},
    {"name", required_argument, NULL, OPT_NAME},
    {"progress-every", required_argument, NULL, OPT_PROGRESS},
    {"blis-arch", required_argument, NULL, OPT_BLIS},
    {"check-config", no_argument, NULL, OPT_CHECK},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static const char help_text[] =
    "usage: gossipnode [OPTION]...\n"
    "Train a neural network, alone or with peers (GossipGraD over SWIM).\n"
    "\n"
    "Cluster (without --peers the node trains alone):\n"
    "  --peers FILE          trusted peers: ADDR:PORT PUBKEY [NAME] per line\n"
    "  --key FILE            this node's Ed25519 key file (mode 0600)\n"
    "  --listen ADDR:PORT    UDP+TCP address to bind (default: this node's\n"
    "                        line in the peers file, found by its key)\n"
    "  --advertise ADDR:PORT address peers reach this node at, told in\n"
    "                        membership (default: its peers-file line, else\n"
    "                        --listen unless that is 0.0.0.0 or [::])\n"
    "  --authority FILE      the cluster authority's public key (ca.pub):\n"
    "                        trust members whose certificate it signed\n"
    "  --cert FILE           this node's certificate (gossip-keygen --sign);\n"
    "                        with --authority, joins without a peers file\n"
    "  --crl FILE            the authority's revocation list (optional;\n"
    "                        default: authority.crl in --checkpoint-dir);\n"
    "                        a newer one from a member is saved there\n"
    "  --seed-addr ADDR:PORT a member to join through (with --cert)\n"
    "  --name NAME           name in logs (default: from the peers file,\n"
    "                        else the certificate)\n"
    "  --control PATH        control socket for gossipctl (Unix, 0600)\n"
    "  --metrics ADDR:PORT   Prometheus /metrics endpoint\n"
    "\n"
    "Data and model:\n"
    "  --data DIR            IDX data set (default "
    "/usr/share/datasets/fashion-mnist)\n"
    "  --model SPEC          784-512-10 (MLP, the default) or cnn\n"
    "  --batch N             mini-batch size (default 100)\n"
    "  --shard I/N           train on slice I of N (0-based; default 0/1)\n"
    "  --partition P         how the N slices are cut: iid (default),\n"
    "                        dirichlet:A (label skew), classes:K (K labels\n"
    "                        per node), shards:K (K label-sorted shards\n"
    "                        per node); docs/learning.md\n"
    "  --partition-seed N    seed of the cut, same on every node (default\n"
    "                        --seed)\n"
    "  --seed N              seed for init, shuffling, gossip (default 1;\n"
    "                        with --authority, derived from its key)\n"
    "  --threads N           split each batch across N threads (default 1;\n"
    "                        deterministic for a fixed N)\n"
    "  --blis-arch NAME      BLIS kernel set (skx, zen3, haswell, ...);\n"
    "                        blis: BLIS's own choice; probe: measure again\n"
    "                        (default: the fastest measured, cached)\n"
    "\n"
    "Optimizer:\n"
    "  --optimizer sgd|adam  (default sgd with momentum)\n"
    "  --lr F                learning rate (default 0.05 sgd, 0.001 adam)\n"
    "  --momentum F          SGD momentum, 0 <= F < 1 (default 0.9)\n"
    "  --momentum-kind local|quasi-global   what the momentum follows: the\n"
    "                        local gradients (PyTorch's SGD) or the model's\n"
    "                        movement, averaging included (QG-DSGDm;\n"
    "                        default quasi-global with --peers, local\n"
    "                        alone); docs/learning.md\n"
    "  --weight-decay F      L2 decay, >= 0 (default 0)\n"
    "  --lr-schedule const|cosine|step   (default cosine: from --lr down\n"
    "                        to 1% of it over --steps/--epochs; step: halve\n"
    "                        every epoch)\n"
    "  --warmup N            linear warm-up steps (default 0)\n"
    "\n"
    "Stopping (whichever comes first; default 1 epoch if none is given):\n"
    "  --epochs N            N passes' worth of steps over this node's "
    "shard\n"
    "                        (N x shard/batch steps; extra batches do not "
    "count)\n"
    "  --steps N             optimizer steps\n"
    "  --time-budget SECONDS wall-clock budget\n"
    "  --target-acc PCT      stop when test accuracy reaches PCT (at evals)\n"
    "  --eval-every N        evaluate every N steps (default: each epoch)\n"
    "  --after-train exit|serve   when a stop criterion is met: exit, or\n"
    "                        stay a member serving the final model, gossipctl\n"
    "                        and metrics until SIGTERM (default exit)\n"
    "\n"
    "Checkpoints:\n"
    "  --checkpoint-dir DIR  resume from DIR/model.ckpt, write it there\n"
    "  --checkpoint-every N  also every N steps (default: only at exit)\n"
    "  --fresh               ignore an existing checkpoint, start over\n"
    "\n"
    "Exchange with peers:\n"
    "  --codec fp32|fp16|int8|topk:K|none   gradient payload codec; none:\n"
    "                        send no gradients, only average models (default "
    "none)\n"
    "  --partitions P        Ako partial exchange: send 1 of P parts per "
    "step\n"
    "  --staleness S         merge gradients at most S steps old (default "
    "16)\n"
    "  --avg-every K         average models with the partner every K steps\n"
    "                        (default 1; 0 = never)\n"
    "  --wait-ms N           wait up to N ms for a partner's gradient, and\n"
    "                        for the averaging slice of --avg-lag rounds\n"
    "                        back (default 2; 0: never wait, and the loop\n"
    "                        thread yields to training)\n"
    "  --fill-batches N      while that slice is missing, first train up to N\n"
    "                        extra batches into the next step instead of\n"
    "                        idling (default 8; 0: just wait)\n"
    "  --fill-size S         samples per extra batch (default --batch / 4)\n"
    "  --avg-lag R           the averaging slice waited for is R rounds "
    "back\n"
    "                        (default 3; 1..6)\n"
    "  --params-codec fp32|fp16|int8   payload codec of model averaging "
    "(default fp16)\n"
    "  --params-parts P      each model average covers 1 of P slices, in "
    "turn\n"
    "                        (default 4)\n"
    "  --avg-weight W        weight of the partner's model in an average "
    "(default 0.5)\n"
    "  --robust on|off       robust merge: take slices and gradients only "
    "from\n"
    "                        the scheduled sender, clip or refuse outliers\n"
    "                        (default on; docs/reliability.md)\n"
    "  --adapt on|off|cpu    choose the slice codec (fp16/int8) and the\n"
    "                        averaging period from the measured link;\n"
    "                        --params-codec and --avg-every are the richest\n"
    "                        choice (default on; docs/design.md); cpu: the\n"
    "                        period also keeps the exchange under 10% of\n"
    "                        the CPU\n"
    "  --shuffle-samples R   send R of our RAW samples (image + label) per\n"
    "                        step to the partner and train on received ones\n"
    "                        (GossipGraD's shuffle; default 0 = off)\n"
    "  --shuffle-reservoir N keep at most N received samples (default "
    "2000)\n"
    "\n"
    "Output:\n"
    "  --log-level error|warn|info|debug   (default info)\n"
    "  --progress-every MS   progress line period (default 3000)\n"
    "  --event-log FILE      JSON lines for plots (see docs/eventlog.md)\n"
    "  --check-config        validate the config file and options (peers,\n"
    "                        key, addresses, data, model), print the\n"
    "                        settings and 'config OK', exit 0; else one\n"
    "                        line and exit 1. --key and --checkpoint-dir\n"
    "                        may be left to the unit.\n"
    "  --help                this text\n"
    "  --version             print the version\n"
    "\n"
    "Signals: SIGTERM/SIGINT leave the cluster, checkpoint and exit 0;\n"
    "SIGHUP reloads the peers file and the revocation list. Exit status:\n"
    "0 done, 1 runtime error, 2 bad command line.\n";

int node_options_clustered(const struct node_options *o)
{
        return o->peers_path || o->cert_path;
}

int node_options_crl_path(const struct node_options *o, char *buf, size_t len)
{
        int n;

        if (o->crl_path)
                n = snprintf(buf, len, "%s", o->crl_path);
        else if (o->checkpoint_dir)
                n = snprintf(buf, len, "%s/%s", o->checkpoint_dir,
                             NODE_OPTIONS_CRL_FILE);
        else
                return -ENOENT;
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

const char *node_options_help(void)
{
        return help_text;
}

static const char *optimizer_names[] = {"sgd", "adam"};
static const char *momentum_kind_names[] = {"local", "quasi-global"};
static const char *sched_names[] = {"const", "cosine", "step"};
static const char *codec_names[] = {"fp32", "fp16", "int8", "topk", "none"};
static const char *level_names[] = {"error", "warn", "info", "debug"};
static const char *after_names[] = {"exit", "serve"};
/* enum node_opt_adapt order */
static const char *adapt_names[] = {"off", "on", "cpu"};

#define NAME_OF(tab, v)                                                        \
        ((v) >= 0 && (size_t)(v) < sizeof(tab) / sizeof(tab[0]) ? tab[v] : "?")

const char *node_options_optimizer_name(int v)
{
        return NAME_OF(optimizer_names, v);
}

const char *node_options_sched_name(int v)
{
        return NAME_OF(sched_names, v);
}

const char *node_options_codec_name(int v)
{
        return NAME_OF(codec_names, v);
}

const char *node_options_level_name(int v)
{
        return NAME_OF(level_names, v);
}

void node_options_default(struct node_options *o)
{
        memset(o, 0, sizeof(*o));
        o->data_dir = NODE_OPT_DATA_DEFAULT;
        o->model = NODE_OPT_MODEL_DEFAULT;
        o->batch = NODE_OPT_BATCH_DEFAULT;
        o->shard_i = 0;
        o->shard_n = 1;
        o->optimizer = NODE_OPTIM_SGD;
        o->lr = NAN; /* resolved after parsing, from the optimizer */
        o->momentum = NODE_OPT_MOMENTUM_DEFAULT;
        /* measured (docs/history/benchmarks-log.md 7.4): in a cluster the
         * buffer that follows the averaged model gains 0.5-5 points on skewed
         * data and reaches 88% sooner on IID; alone, with no averaging to
         * follow, it ends one epoch 0.3-0.6 points lower, so local there */
        o->momentum_kind = NODE_MOMENTUM_AUTO;
        /* cosine, measured: one epoch alone 85.3% test accuracy vs 84.5%
         * with const; three nodes end within 0.2 points of each other vs
         * 3.4 with const (the replicas settle as the rate falls) */
        o->lr_schedule = NODE_SCHED_COSINE;
        o->seed = 1;
        o->threads = 1;
        o->codec = NODE_CODEC_NONE; /* model averaging only: measured */
        o->partitions = 1;
        o->staleness = NODE_OPT_STALENESS_DEFAULT;
        o->avg_every = NODE_OPT_AVG_EVERY_DEFAULT;
        o->params_codec = NODE_CODEC_FP16; /* half the bytes, same accuracy */
        o->params_parts = NODE_OPT_PARAMS_PARTS_DEFAULT;
        o->avg_weight = 0.5f;
        o->robust = 1; /* a trusted peer may still be wrong */
        o->adapt = 1;  /* a slow link must not silence the exchange */
        o->shuffle_reservoir = NODE_SHUFFLE_RESERVOIR_DEFAULT;
        o->wait_ms = NODE_OPT_WAIT_MS_DEFAULT;
        o->fill_batches = NODE_OPT_FILL_DEFAULT;
        o->avg_lag = NODE_OPT_AVG_LAG_DEFAULT;
        o->log_level = NODE_LOG_INFO;
        o->progress_ms = NODE_OPT_PROGRESS_MS;
}

/* Unsigned integer in [lo, hi], whole string. */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
        char *end;
        unsigned long long v;

        if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
                return -1;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end || v < lo || v > hi)
                return -1;
        *out = v;
        return 0;
}

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
        uint64_t v;

        if (parse_u64(s, lo, hi, &v))
                return -1;
        *out = (uint32_t)v;
        return 0;
}

/* Finite double in [lo, hi] (hi_open: strictly below hi), whole string. */
static int parse_dbl(const char *s, double lo, double hi, int hi_open,
                     double *out)
{
        char *end;
        double v;

        if (!s || !*s || *s == ' ')
                return -1;
        errno = 0;
        v = strtod(s, &end);
        if (errno || *end || !isfinite(v) || v < lo || v > hi ||
            (hi_open && v >= hi))
                return -1;
        *out = v;
        return 0;
}

static int parse_enum(const char *s, const char **names, int n)
{
        for (int i = 0; i < n; i++)
                if (strcmp(s, names[i]) == 0)
                        return i;
        return -1;
}

/* "I/N" with 0 <= I < N <= 65536. */
static int parse_shard(const char *s, uint32_t *i, uint32_t *n)
{
        char buf[32];
        char *slash;

        if (strlen(s) >= sizeof(buf))
                return -1;
        strcpy(buf, s);
        slash = strchr(buf, '/');
        if (!slash)
                return -1;
        *slash = '\0';
        if (parse_u32(buf, 0, 65535, i) || parse_u32(slash + 1, 1, 65536, n))
                return -1;
        return *i < *n ? 0 : -1;
}

/* "fp32" | "fp16" | "int8" | "topk:K" with K >= 1. */
static int parse_codec(const char *s, int *codec, uint32_t *k)
{
        if (strncmp(s, "topk:", 5) == 0) {
                if (parse_u32(s + 5, 1, UINT32_MAX, k))
                        return -1;
                *codec = NODE_CODEC_TOPK;
                return 0;
        }
        if (strcmp(s, "none") == 0) {
                *codec = NODE_CODEC_NONE;
                return 0;
        }
        *codec = parse_enum(s, codec_names, 3);
        return *codec < 0 ? -1 : 0;
}

/* A node name: 1..31 chars of [A-Za-z0-9._-] (the peers file's alphabet,
 * and safe to embed in JSON and log lines unescaped). */
static int valid_name(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n >= NODE_OPT_NAME_MAX)
                return 0;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                      c == '-'))
                        return 0;
        }
        return 1;
}

/* "HOST:PORT" with a non-empty host and a port 1..65535 (resolution and
 * address syntax are checked where the address is used). */
static int valid_hostport(const char *s)
{
        const char *colon = strrchr(s, ':');
        uint32_t port;

        if (!colon || colon == s)
                return 0;
        return parse_u32(colon + 1, 1, 65535, &port) == 0;
}

/* Apply one option; 0 or -EINVAL with the message in err. */
static int apply(struct node_options *o, int c, const char *name, const char *v,
                 char *err, size_t errlen)
{
        double d;
        uint64_t u;
        int e;

#define BAD(what)                                                              \
        gn_fail(err, errlen, -EINVAL, "--%s: '%s' is not %s", name, v, what)
        switch (c) {
        case OPT_PEERS:
                o->peers_path = v;
                break;
        case OPT_KEY:
                o->key_path = v;
                break;
        case OPT_LISTEN:
                if (!valid_hostport(v))
                        return BAD("ADDR:PORT with a port 1..65535");
                o->listen = v;
                break;
        case OPT_ADVERTISE:
                if (!valid_hostport(v))
                        return BAD("ADDR:PORT with a port 1..65535");
                o->advertise = v;
                break;
        case OPT_AUTHORITY:
                o->authority_path = v;
                break;
        case OPT_CERT:
                o->cert_path = v;
                break;
        case OPT_CRL:
                o->crl_path = v;
                break;
        case OPT_SEED_ADDR:
                if (!valid_hostport(v))
                        return BAD("ADDR:PORT with a port 1..65535");
                o->seed_addr = v;
                break;
        case OPT_DATA:
                if (!*v)
                        return BAD("a directory");
                o->data_dir = v;
                break;
        case OPT_MODEL:
                if (!*v)
                        return BAD("a model spec");
                o->model = v;
                break;
        case OPT_BATCH:
                if (parse_u32(v, 1, 65536, &o->batch))
                        return BAD("an integer in 1..65536");
                break;
        case OPT_LR:
                if (parse_dbl(v, 0, 10, 0, &d) || d <= 0)
                        return BAD("a number in (0, 10]");
                o->lr = (float)d;
                break;
        case OPT_MOMENTUM:
                if (parse_dbl(v, 0, 1, 1, &d))
                        return BAD("a number in [0, 1)");
                o->momentum = (float)d;
                break;
        case OPT_MOMENTUM_KIND:
                if ((e = parse_enum(v, momentum_kind_names, 2)) < 0)
                        return BAD("local or quasi-global");
                o->momentum_kind = e;
                break;
        case OPT_WD:
                if (parse_dbl(v, 0, 1, 0, &d))
                        return BAD("a number in [0, 1]");
                o->weight_decay = (float)d;
                break;
        case OPT_OPTIMIZER:
                if ((e = parse_enum(v, optimizer_names, 2)) < 0)
                        return BAD("sgd or adam");
                o->optimizer = e;
                break;
        case OPT_SCHED:
                if ((e = parse_enum(v, sched_names, 3)) < 0)
                        return BAD("const, cosine or step");
                o->lr_schedule = e;
                break;
        case OPT_WARMUP:
                if (parse_u32(v, 0, UINT32_MAX, &o->warmup))
                        return BAD("a non-negative integer");
                break;
        case OPT_SEED:
                if (parse_u64(v, 0, UINT64_MAX, &o->seed))
                        return BAD("a non-negative integer");
                o->seed_set = 1;
                break;
        case OPT_THREADS:
                if (parse_u32(v, 1, 256, &o->threads))
                        return BAD("an integer in 1..256");
                break;
        case OPT_SHARD:
                if (parse_shard(v, &o->shard_i, &o->shard_n))
                        return BAD("I/N with 0 <= I < N");
                break;
        case OPT_PARTITION:
                u = o->partition.seed; /* --partition-seed may come first */
                if (nn_partition_parse(v, &o->partition))
                        return BAD("iid, dirichlet:A (0.001 <= A <= 1e6), "
                                   "classes:K or shards:K (1 <= K <= 256)");
                o->partition.seed = u;
                break;
        case OPT_PARTSEED:
                if (parse_u64(v, 0, UINT64_MAX, &o->partition.seed))
                        return BAD("a non-negative integer");
                o->partition_seed_set = 1;
                break;
        case OPT_EPOCHS:
                if (parse_u32(v, 1, 1000000, &o->epochs))
                        return BAD("an integer in 1..1000000");
                break;
        case OPT_STEPS:
                if (parse_u64(v, 1, UINT64_MAX / 2, &o->steps))
                        return BAD("a positive integer");
                break;
        case OPT_TIME:
                if (parse_dbl(v, 0, 1e9, 0, &d) || d <= 0)
                        return BAD("a positive number of seconds");
                o->time_budget_s = d;
                break;
        case OPT_TARGET:
                if (parse_dbl(v, 0, 100, 0, &d) || d <= 0)
                        return BAD("a percentage in (0, 100]");
                o->target_acc = d;
                break;
        case OPT_EVAL:
                if (parse_u32(v, 1, UINT32_MAX, &o->eval_every))
                        return BAD("a positive integer");
                break;
        case OPT_CKDIR:
                if (!*v)
                        return BAD("a directory");
                o->checkpoint_dir = v;
                break;
        case OPT_CKEVERY:
                if (parse_u32(v, 1, UINT32_MAX, &o->checkpoint_every))
                        return BAD("a positive integer");
                break;
        case OPT_FRESH:
                o->fresh = 1;
                break;
        case OPT_CHECK:
                o->check_config = 1;
                break;
        case OPT_CONTROL:
                if (!*v)
                        return BAD("a path");
                o->control_path = v;
                break;
        case OPT_METRICS:
                if (!valid_hostport(v))
                        return BAD("ADDR:PORT with a port 1..65535");
                o->metrics_addr = v;
                break;
        case OPT_LEVEL:
                if ((e = parse_enum(v, level_names, 4)) < 0)
                        return BAD("error, warn, info or debug");
                o->log_level = e;
                break;
        case OPT_EVLOG:
                if (!*v)
                        return BAD("a file name");
                o->event_log = v;
                break;
        case OPT_CODEC:
                if (parse_codec(v, &o->codec, &o->topk))
                        return BAD("fp32, fp16, int8, topk:K (K >= 1) or "
                                   "none");
                break;
        case OPT_PARTS:
                if (parse_u32(v, 1, 1024, &o->partitions))
                        return BAD("an integer in 1..1024");
                break;
        case OPT_STALE:
                if (parse_u32(v, 0, 1000000, &o->staleness))
                        return BAD("an integer in 0..1000000");
                break;
        case OPT_AVG:
                if (parse_u32(v, 0, UINT32_MAX, &o->avg_every))
                        return BAD("a non-negative integer");
                break;
        case OPT_PCODEC:
                if ((e = parse_enum(v, codec_names, 3)) < 0)
                        return BAD("fp32, fp16 or int8");
                o->params_codec = e;
                break;
        case OPT_PPARTS:
                if (parse_u32(v, 1, 1024, &o->params_parts))
                        return BAD("an integer in 1..1024");
                break;
        case OPT_AVGW:
                if (parse_dbl(v, 0, 1, 0, &d) || d <= 0)
                        return BAD("a number in (0, 1]");
                o->avg_weight = (float)d;
                break;
        case OPT_SHUFFLE:
                if (parse_u32(v, 0, NODE_SHUFFLE_MAX_R, &o->shuffle_samples))
                        return BAD("an integer in 0..256");
                break;
        case OPT_SHUFRES:
                if (parse_u32(v, 1, NODE_SHUFFLE_RESERVOIR_MAX,
                              &o->shuffle_reservoir))
                        return BAD("an integer in 1..1000000");
                break;
        case OPT_AFTER:
                if ((e = parse_enum(v, after_names, 2)) < 0)
                        return BAD("exit or serve");
                o->after_train = e;
                break;
        case OPT_ROBUST:
                if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
                        return BAD("on or off");
                o->robust = strcmp(v, "on") == 0;
                break;
        case OPT_ADAPT:
                if ((e = parse_enum(v, adapt_names, 3)) < 0)
                        return BAD("on, off or cpu");
                o->adapt = e;
                break;
        case OPT_WAIT:
                if (parse_u64(v, 0, 60000, &u))
                        return BAD("milliseconds in 0..60000");
                o->wait_ms = (uint32_t)u;
                break;
        case OPT_FILL:
                if (parse_u32(v, 0, NODE_OPT_FILL_MAX, &o->fill_batches))
                        return BAD("a count in 0..8");
                break;
        case OPT_AVGLAG:
                if (parse_u32(v, 1, NODE_OPT_AVG_LAG_MAX, &o->avg_lag))
                        return BAD("rounds in 1..6");
                break;
        case OPT_FILLSZ:
                if (parse_u32(v, 1, 65536, &o->fill_size))
                        return BAD("an integer in 1..65536");
                break;
        case OPT_NAME:
                if (!valid_name(v))
                        return BAD("1..31 chars of [A-Za-z0-9._-]");
                o->name = v;
                break;
        case OPT_BLIS:
                if (!*v)
                        return BAD("a BLIS kernel set name");
                o->blis_arch = v;
                break;
        case OPT_PROGRESS:
                if (parse_u32(v, 10, 3600000, &o->progress_ms))
                        return BAD("milliseconds in 10..3600000");
                break;
        default:
                return gn_fail(err, errlen, -EINVAL, "internal: option %d", c);
        }
#undef BAD
        return 0;
}

static const char *opt_name(int c)
{
        for (const struct option *p = long_opts; p->name; p++)
                if (p->val == c)
                        return p->name;
        return "?";
}

/* Cross-option checks, once every option is known. */
static int check_combination(struct node_options *o, char *err, size_t errlen)
{
        /* --check-config judges a config file without what the unit
         * adds on its command line (--key, --checkpoint-dir): check.h */
        if (o->peers_path && !o->key_path && !o->check_config)
                return gn_fail(err, errlen, -EINVAL,
                               "--peers needs --key FILE");
        if ((o->cert_path || o->crl_path) && !o->authority_path)
                return gn_fail(err, errlen, -EINVAL,
                               "--%s needs --authority FILE",
                               o->cert_path ? "cert" : "crl");
        if (o->cert_path && !o->key_path && !o->check_config)
                return gn_fail(err, errlen, -EINVAL, "--cert needs --key FILE");
        if (o->seed_addr && !node_options_clustered(o))
                return gn_fail(err, errlen, -EINVAL,
                               "--seed-addr needs --cert FILE or --peers FILE");
        if (o->checkpoint_every && !o->checkpoint_dir && !o->check_config)
                return gn_fail(err, errlen, -EINVAL,
                               "--checkpoint-every needs --checkpoint-dir DIR");
        if (o->fill_size > o->batch)
                return gn_fail(err, errlen, -EINVAL,
                               "--fill-size %u is larger than --batch %u",
                               o->fill_size, o->batch);
        if (!o->partition_seed_set)
                o->partition.seed = o->seed;
        if (o->momentum_kind == NODE_MOMENTUM_AUTO)
                o->momentum_kind = node_options_clustered(o)
                                       ? NODE_MOMENTUM_QUASI_GLOBAL
                                       : NODE_MOMENTUM_LOCAL;
        if (isnan(o->lr))
                o->lr = o->optimizer == NODE_OPTIM_ADAM ? NODE_OPT_LR_ADAM
                                                        : NODE_OPT_LR_SGD;
        if (!o->epochs && !o->steps && o->time_budget_s <= 0 &&
            o->target_acc <= 0)
                o->epochs = 1;
        return 0;
}

int node_options_parse(int argc, char **argv, struct node_options *o, char *err,
                       size_t errlen)
{
        int c, rc;

        node_options_default(o);
        opterr = 0;
        optind = 1; /* reset: tests parse several command lines */
        while ((c = getopt_long(argc, argv, ":", long_opts, NULL)) != -1) {
                if (c == OPT_HELP)
                        return NODE_OPT_HELP;
                if (c == OPT_VERSION)
                        return NODE_OPT_VERSION;
                if (c == ':')
                        return gn_fail(err, errlen, -EINVAL,
                                       "%s: needs a value", argv[optind - 1]);
                if (c == '?')
                        return gn_fail(err, errlen, -EINVAL,
                                       "%s: unknown option (see --help)",
                                       argv[optind - 1]);
                rc =
                    apply(o, c, opt_name(c), optarg ? optarg : "", err, errlen);
                if (rc)
                        return rc;
        }
        if (optind < argc)
                return gn_fail(err, errlen, -EINVAL,
                               "'%s': unexpected argument (see --help)",
                               argv[optind]);
        return check_combination(o, err, errlen);
}
