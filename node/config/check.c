/*
 * check.c - gossipnode --check-config (check.h): each setting judged the
 * way a start would judge it, by the same loaders (peers file, key file,
 * addresses, data set, model), one report line each.
 *
 * Single-threaded, called from main() before anything is opened; the
 * only side effects are reads (files, the data set) and name resolution.
 */
#include "config/check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "nn/data.h"
#include "base/gn_errbuf.h"
#include "gossip/gossip.h"
#include "ident/authority.h"
#include "ident/keys.h"
#include "nn/nn.h"
#include "nn/nn_err.h"
#include "nn/partition.h"
#include "ident/peers.h"
#include "train/trainer.h"

struct report {
        char *buf;
        size_t cap, used;
};

static void say(struct report *r, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Append "key  value\n" (cut to fit: the report is for reading). */
static void say(struct report *r, const char *key, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (r->used + 1 >= r->cap)
                return;
        n = snprintf(r->buf + r->used, r->cap - r->used, "%-11s ", key);
        if (n > 0)
                r->used += (size_t)n < r->cap - r->used ? (size_t)n
                                                        : r->cap - r->used - 1;
        va_start(ap, fmt);
        n = vsnprintf(r->buf + r->used, r->cap - r->used, fmt, ap);
        va_end(ap);
        if (n > 0)
                r->used += (size_t)n < r->cap - r->used ? (size_t)n
                                                        : r->cap - r->used - 1;
        if (r->used + 1 < r->cap) {
                r->buf[r->used++] = '\n';
                r->buf[r->used] = '\0';
        }
}

static int is_dir(const char *path)
{
        struct stat st;

        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* "ADDR:PORT" resolved as the daemon resolves it; 0 or -EINVAL. */
static int check_addr(const char *opt, const char *v, struct gossip_addr *a,
                      char *err, size_t errlen)
{
        int rc = node_addr_parse(v, a, 1);

        if (rc)
                return gn_fail(err, errlen, -EINVAL, "--%s: '%s': %s", opt, v,
                               rc == -EHOSTUNREACH ? "does not resolve"
                                                   : "not ADDR:PORT");
        return 0;
}

/* The peers file, the key and the address peers will be told. */
static int check_cluster(const struct node_options *o, struct report *r,
                         char *err, size_t errlen)
{
        struct node_peer *peers = NULL;
        struct gossip_addr lis, adv, out, *line = NULL;
        uint8_t pk[GOSSIP_KEY_BYTES], sk[GOSSIP_SECRET_BYTES];
        char a[NODE_ADDR_STR_SIZE];
        size_t n = 0;
        long self = -1;
        int rc, have_lis = 0;

        rc = node_peers_load(o->peers_path, &peers, &n, err, errlen);
        if (rc)
                return rc;
        say(r, "peers", "%s: %zu entries", o->peers_path, n);
        if (o->key_path) {
                rc = node_key_load(o->key_path, pk, sk, err, errlen);
                memset(sk, 0, sizeof(sk));
                if (rc)
                        goto out;
                self = node_peers_find_pk(peers, n, pk);
                if (self >= 0)
                        line = &peers[self].addr;
                say(r, "key", "%s: %s", o->key_path,
                    self >= 0 ? peers[self].name
                              : "no line in the peers file (peers that use "
                                "the same file will refuse this node)");
        } else {
                say(r, "key",
                    "not given (the unit adds --key): this node's "
                    "line is found by it at start");
        }
        if (o->listen) {
                rc = check_addr("listen", o->listen, &lis, err, errlen);
                if (rc)
                        goto out;
                have_lis = 1;
        } else if (line) {
                lis = *line;
                have_lis = 1;
        } else if (o->key_path) {
                rc = gn_fail(err, errlen, -EINVAL,
                             "--listen: not given, and %s has no line for "
                             "this node's key",
                             o->peers_path);
                goto out;
        }
        if (have_lis) {
                node_addr_format(&lis, a, sizeof(a));
                say(r, "listen", "%s", a);
        } else {
                say(r, "listen", "this node's line in %s", o->peers_path);
        }
        if (o->advertise) {
                rc = check_addr("advertise", o->advertise, &adv, err, errlen);
                if (rc)
                        goto out;
        }
        if (!o->advertise && !o->key_path) {
                say(r, "advertise",
                    "this node's line in %s (found by its "
                    "key at start)",
                    o->peers_path);
                rc = 0;
                goto out;
        }
        rc = node_addr_advertised(o->advertise ? &adv : NULL, line,
                                  have_lis ? &lis : NULL, &out);
        if (rc == -EINVAL)
                rc = gn_fail(err, errlen, rc,
                             "--advertise: '%s' is a wildcard: give the "
                             "address peers reach this node at",
                             o->advertise);
        else if (rc < 0)
                rc = gn_fail(err, errlen, rc,
                             "--listen %s is a wildcard and %s has no line "
                             "for this node's key: give --advertise "
                             "ADDR:PORT or add its line",
                             o->listen ? o->listen : "-", o->peers_path);
        if (rc < 0)
                goto out;
        node_addr_format(&out, a, sizeof(a));
        say(r, "advertise", "%s (%s)", a,
            rc == NODE_ADVERTISE_OPTION  ? "--advertise"
            : rc == NODE_ADVERTISE_PEERS ? "its peers-file line"
                                         : "--listen");
        rc = 0;
out:
        node_peers_free(peers);
        return rc;
}

/* The data set, this node's shard of it, and the model built on it. */
static int check_training(const struct node_options *o, struct report *r,
                          char *err, size_t errlen)
{
        struct nn_dataset train = {0}, test = {0}, shard = {0};
        struct nn_model *m = NULL;
        char part[64];
        int rc;

        rc = nn_dataset_load_dir(o->data_dir, 1, &train, err, errlen);
        if (rc == 0)
                rc = nn_dataset_load_dir(o->data_dir, 0, &test, err, errlen);
        if (rc)
                goto out;
        say(r, "data", "%s: %u training, %u test samples, %ux%ux%u, %u classes",
            o->data_dir, train.n, test.n, train.channels, train.rows,
            train.cols, train.classes);
        rc = nn_dataset_partition(&train, &o->partition, (int)o->shard_i,
                                  (int)o->shard_n, &shard);
        if (rc || shard.n == 0) {
                rc = gn_fail(err, errlen, -EINVAL,
                             "--shard %u/%u with --partition: this node's "
                             "part of the %u samples is empty",
                             o->shard_i, o->shard_n, train.n);
                goto out;
        }
        if (nn_partition_format(&o->partition, part, sizeof(part)) < 0)
                snprintf(part, sizeof(part), "?");
        say(r, "shard", "%u/%u (%s): %u samples", o->shard_i, o->shard_n, part,
            shard.n);
        rc = nn_model_create(o->model, (int)train.channels, (int)train.rows,
                             (int)train.cols, o->seed, &m);
        if (rc) {
                rc = gn_fail(err, errlen, -EINVAL,
                             "--model: '%s' does not build for %ux%ux%u "
                             "input: %s",
                             o->model, train.channels, train.rows, train.cols,
                             nn_strerror(rc));
                goto out;
        }
        if ((uint32_t)nn_model_classes(m) < train.classes) {
                rc = gn_fail(err, errlen, -EINVAL,
                             "--model: '%s' has %d outputs, the data %u "
                             "classes",
                             o->model, nn_model_classes(m), train.classes);
                goto out;
        }
        say(r, "model", "%s: %zu parameters", nn_model_spec(m),
            nn_model_nparams(m));
out:
        nn_model_free(m);
        nn_dataset_free(&shard);
        nn_dataset_free(&test);
        nn_dataset_free(&train);
        return rc ? (rc < 0 ? rc : -EINVAL) : 0;
}

/* The directory that will hold path, for a note when it is missing. */
static void say_file_dir(struct report *r, const char *key, const char *path)
{
        char dir[1024];
        char *slash;

        snprintf(dir, sizeof(dir), "%s", path);
        slash = strrchr(dir, '/');
        if (!slash) {
                say(r, key, "%s", path);
                return;
        }
        *slash = '\0';
        if (!dir[0] || is_dir(dir))
                say(r, key, "%s", path);
        else
                say(r, key,
                    "%s (directory %s missing now: the unit's "
                    "StateDirectory creates it at start)",
                    path, dir);
}

/* The stop criteria that are set (whichever comes first), and after. */
static void say_stop(const struct node_options *o, struct report *r)
{
        char b[160] = "";
        size_t n = 0;

        if (o->epochs)
                n += (size_t)snprintf(b + n, sizeof(b) - n, "epochs %u, ",
                                      o->epochs);
        if (o->steps && n < sizeof(b))
                n += (size_t)snprintf(b + n, sizeof(b) - n, "steps %llu, ",
                                      (unsigned long long)o->steps);
        if (o->time_budget_s > 0 && n < sizeof(b))
                n += (size_t)snprintf(b + n, sizeof(b) - n, "time %g s, ",
                                      o->time_budget_s);
        if (o->target_acc > 0 && n < sizeof(b))
                snprintf(b + n, sizeof(b) - n, "target %g%%, ", o->target_acc);
        say(r, "stop", "%sthen %s", b,
            o->after_train == NODE_AFTER_SERVE ? "serve" : "exit");
}

/* Stop criteria, checkpoints and the monitoring endpoints. */
static int check_service(const struct node_options *o, struct report *r,
                         char *err, size_t errlen)
{
        struct gossip_addr a;
        int rc;

        say_stop(o, r);
        if (o->checkpoint_dir)
                say(r, "checkpoint", "%s/%s, every %u steps (0: at exit)",
                    o->checkpoint_dir, NODE_TRAINER_CKPT_NAME,
                    o->checkpoint_every);
        else
                say(r, "checkpoint",
                    "every %u steps (0: at exit), in --checkpoint-dir (the "
                    "unit adds it)",
                    o->checkpoint_every);
        if (o->metrics_addr) {
                rc = check_addr("metrics", o->metrics_addr, &a, err, errlen);
                if (rc)
                        return rc;
                say(r, "metrics", "%s", o->metrics_addr);
        }
        if (o->control_path)
                say(r, "control", "%s", o->control_path);
        if (o->event_log)
                say_file_dir(r, "event-log", o->event_log);
        return 0;
}

/* --authority, --cert (ours, valid now), --crl, --seed-addr: what the
 * node would refuse at start. */
static int check_authority(const struct node_options *o, struct report *r,
                           char *err, size_t errlen)
{
        struct node_authority a;
        struct gossip_addr seed;
        uint8_t pk[GOSSIP_KEY_BYTES], sk[GOSSIP_SECRET_BYTES];
        char id[NODE_KEY_ID_SIZE], crl[4096];
        struct gossip_crl l;
        int rc, have_pk = 0, have_crl;

        if (o->seed_addr) {
                rc = check_addr("seed-addr", o->seed_addr, &seed, err, errlen);
                if (rc)
                        return rc;
                say(r, "seed-addr", "%s", o->seed_addr);
        }
        if (!o->authority_path)
                return 0;
        if (o->key_path) {
                rc = node_key_load(o->key_path, pk, sk, err, errlen);
                memset(sk, 0, sizeof(sk));
                if (rc)
                        return rc;
                have_pk = 1;
        }
        /* the list the node would read: --crl, or the one it saved */
        have_crl = node_options_crl_path(o, crl, sizeof(crl)) == 0;
        rc = node_authority_load(&a, o->authority_path, o->cert_path,
                                 have_crl ? crl : NULL, have_pk ? pk : NULL,
                                 (uint64_t)time(NULL), err, errlen);
        if (rc)
                return rc;
        node_key_id(a.pk, id);
        say(r, "authority", "%s: key id %s", o->authority_path, id);
        say(r, "seed", "%llu (%s)", (unsigned long long)o->seed,
            o->seed_set ? "--seed" : "the authority's");
        if (a.cert_len)
                say(r, "cert", "%s: %s, serial %016llx, until %llu (unix)%s",
                    o->cert_path, a.c.name, (unsigned long long)a.c.serial,
                    (unsigned long long)a.c.not_after,
                    have_pk ? "" : " (not matched to a key: no --key)");
        if (have_crl && a.crl_len &&
            gossip_crl_decode(a.crl, a.crl_len, &l, NULL) == GOSSIP_CRL_OK)
                say(r, "crl",
                    "%s: sequence %llu, %u serial%s revoked, "
                    "issued at %llu (unix)",
                    crl, (unsigned long long)l.seq, l.n_serials,
                    l.n_serials == 1 ? "" : "s",
                    (unsigned long long)l.issued_at);
        else if (have_crl)
                say(r, "crl", "%s: none yet (the node keeps it there)", crl);
        node_authority_free(&a);
        return 0;
}

int node_check_config(const struct node_options *o, char *out, size_t outlen,
                      char *err, size_t errlen)
{
        struct report r = {out, outlen, 0};
        int rc = 0;

        if (outlen)
                out[0] = '\0';
        if (o->peers_path)
                rc = check_cluster(o, &r, err, errlen);
        else if (!o->cert_path)
                say(&r, "peers", "none: this node trains alone");
        else
                say(&r, "peers", "none: trusted by its certificate");
        if (rc == 0)
                rc = check_authority(o, &r, err, errlen);
        if (rc == 0)
                rc = check_training(o, &r, err, errlen);
        if (rc == 0)
                rc = check_service(o, &r, err, errlen);
        if (rc == 0)
                say(&r, "config", "OK");
        return rc;
}
