/*
 * cluster_private.h - the cluster's own state, shared by the files that
 * make up struct node_cluster's rooms. Not for anyone else: the rest of
 * node/ uses cluster.h, and the training thread only node/train/handoff.h.
 *
 *   cluster.c           membership and lifecycle: key and peers files, the
 *                       transport, the protocol timer, joins, leave,
 *                       SIGHUP reloads, member changes; creates and owns
 *                       the exchange, the join and the view below
 *   cluster_report.c    control-socket replies (members, stats, join,
 *                       force-leave)
 *   cluster_metrics.c   the Prometheus families (/metrics)
 *   cluster_refuse.c    members refused for other cluster settings: the
 *                       line per member life, the counter, the 1 s exit
 *                       check (node_cluster_on_refused)
 *   cluster_crl.c       the revocation list's file: its path, saving a
 *                       newer list (on_crl), re-reading it on SIGHUP
 *
 * Objects with a struct of their own, owned here and reached only
 * through their headers: the exchange (exchange.h: codecs, adaptation,
 * per-peer table, counters, the box), the state transfer of a live join
 * (join.h) and the membership as the rooms read it (view.h: member
 * copies, names, partner choice).
 *
 * Calls go one way (tests/node/test_layering.py): cluster_report.c and
 * cluster_metrics.c may call cluster.c; cluster.c calls neither; the
 * exchange, the join and the view call no cluster*.c file;
 * cluster_refuse.c and cluster_crl.c are called by the others and call
 * none. Every field
 * here belongs to the loop thread, except those fixed at open. Internal
 * calls between the rooms carry a double underscore.
 */
#ifndef NODE_CLUSTER_PRIVATE_H
#define NODE_CLUSTER_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "cluster/cluster.h"
#include "cluster/exchange.h"
#include "gossip/gossip.h"
#include "gossip/adapt.h"
#include "gossip/codec.h"
#include "train/handoff.h"
#include "cluster/join.h"
#include "net/net.h"
#include "ident/authority.h"
#include "ident/peers.h"
#include "cluster/view.h"
#include "gossip/settings.h"

/* A member refused for other cluster settings, its current life
 * (cluster_refuse.c); setting/here/there "" until its list arrives. */
struct node_refusal {
        uint8_t key[GOSSIP_KEY_BYTES];
        uint64_t incarnation;
        char member[GOSSIP_NAME_MAX];
        struct gossip_addr addr; /* where it was heard from */
        char setting[GOSSIP_SETTING_NAME_MAX];
        char here[GOSSIP_SETTING_VALUE_MAX], there[GOSSIP_SETTING_VALUE_MAX];
        int logged; /* its line was written (once per life) */
};

struct node_cluster {
        /* fixed at open */
        uv_loop_t *loop;
        const struct node_options *o;
        struct node_evlog *ev;
        uint8_t pk[GOSSIP_KEY_BYTES];
        char name[GOSSIP_NAME_MAX];
        int listed; /* our key has a line in the peers file */
        struct gossip_addr listen;
        struct gossip_addr advertised; /* told in membership, never a
                                          wildcard (node_addr_advertised) */
        size_t nparams;
        uint64_t start_ms;
        struct node_exchange *ex; /* the exchange, ours */
        struct node_handoff *h;   /* the exchange's box, shared with the
                                     trainer (node_exchange_box) */
        /* lifecycle (cluster.c) */
        uv_timer_t tick, join_timer, linger;
        uv_async_t async; /* the trainer posted something */
        int open_handles;
        struct node_net *net;
        struct gossip *g;
        struct node_peer *peers;
        size_t npeers;
        /* --authority, --cert, --crl (has_authority), --seed-addr */
        struct node_authority auth;
        int has_authority, has_seed;
        struct gossip_addr seed_addr;
        /* join retries while alone (cluster.c on_join_timer) */
        uint64_t alone_since; /* loop ms; 0: not alone */
        uint64_t opened_ms;   /* loop ms at node_cluster_open */
        int alone_said;
        int loading; /* told members we load (cluster.c tell_loaded) */
        struct node_view view; /* members and partner choice */
        struct node_join join; /* state transfer for a live join */
        int leaving, closing;
        void (*leave_done)(void *);
        void *leave_arg;
        /* cluster settings and refusals (cluster_refuse.c) */
        struct gossip_settings settings; /* ours (node_settings_build) */
        uv_timer_t refuse_timer;         /* the 1 s check after a refusal */
        struct node_refusal refused[NODE_CLUSTER_REFUSED_MAX];
        size_t nrefused;                       /* ever entered */
        const struct node_refusal *last_named; /* the last one named */
        uint64_t refusals;                     /* member lives refused */
        int refused_out;                       /* the daemon was told */
        void (*on_refused_out)(void *arg, const char *why);
        void *refused_arg;
};

/* cluster.c */
uint64_t node_cluster__unix_ms(void);
/* Set the protocol timer to gossip_next_deadline() (after anything that
 * may have moved it). */
void node_cluster__arm(struct node_cluster *c);

/* cluster_refuse.c: gossip_config.on_refused (ctx: the cluster); key's
 * refusal (its latest life), or NULL when it was never refused; the i-th
 * entry of the table (NULL past the last: a joiner refused at first
 * contact is in no gossip_members list, only here). */
void node_cluster__refused(void *ctx, const struct gossip_member_info *m,
                           const char *name, const char *ours,
                           const char *theirs);
const struct node_refusal *node_cluster__refusal(const struct node_cluster *c,
                                                 const uint8_t *key);
const struct node_refusal *
node_cluster__refusal_at(const struct node_cluster *c, size_t i);

/* cluster_crl.c (the list's file: node_options_crl_path):
 * gossip_config.on_crl (ctx: the cluster): log the list,
 * save it there unless it holds it already; read it again and offer it
 * to the core (SIGHUP; the caller re-arms the timer): 0 or a negative
 * errno, logged; why key was dropped on its certificate's word (a
 * static string), NULL if it was not. */
void node_cluster__on_crl(void *ctx, const void *bytes, size_t len,
                          uint64_t seq);
int node_cluster__crl_reload(struct node_cluster *c);
const char *node_cluster__barred_why(const struct node_cluster *c,
                                     const uint8_t *key);

/* cluster_metrics.c: the i-th transport refusal, its name (as in
 * rejects_total and in the stats reply's "net") and *count; NULL past the
 * last. */
const char *node_cluster__net_reject(size_t i, const struct node_net_stats *ns,
                                     uint64_t *count);

#endif
