/*
 * cluster.h - the node's membership in the cluster and the loop side of
 * the exchange. Every call here runs on the libuv loop thread.
 *
 * The key and peers files, the transport (node/net/net.h), the protocol core
 * (gossip/gossip.h) driven by one timer at gossip_next_deadline(), joins,
 * leave, SIGHUP reloads, and the application messages:
 *
 *   GRADIENT   our step-t gradient (payload codec) to the step-t partner
 *              of the GossipGraD schedule over the live view; received ones
 *              go into the merge buffer (gossip/merge.h, staleness S)
 *   PARAMS     one slice (1 of --params-parts, in turn) of our parameters
 *              to the step's partner every K steps (--params-codec); a
 *              received slice is averaged in by the trainer, against our
 *              own copy of the same step while the ring still holds it
 *              (gossip/plan.h: --avg-lag rounds of slack, a ring of
 *              GOSSIP_PLAN_RING rounds)
 *   STATE_REQ  "send me your model": answered with STATE (the checkpoint
 *              byte format) from a snapshot the trainer makes on request
 *
 * The training thread never calls in here: it meets the loop only in the
 * hand-off box (node/train/handoff.h) that node_cluster_handoff() returns, and
 * asks the exchange plan (gossip/plan.h) itself. The rooms of the
 * implementation are listed in cluster_private.h; the exchange is its own
 * object (exchange.h), the live join's state transfer too (join.h).
 */
#ifndef NODE_CLUSTER_H
#define NODE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>
#include <uv.h>

#include "config/options.h"
#include "train/trainer.h"

struct node_view;

struct node_handoff;

/* Tunables, with their reasons. */
enum {
        /* While alone, retry the join to every peer this often. */
        NODE_CLUSTER_JOIN_RETRY_MS = 2000,
        /* Alone this long with somewhere to join (peers, a seed): say
         * so, once per spell alone. A member answers a JOIN within a
         * probe period or two; 30 s is a dead seed, a firewall, or a
         * refusal that tells the refused nothing (a certificate of
         * another authority is only counted at the member). */
        NODE_CLUSTER_ALONE_WARN_MS = 30000,
        /* After gossip_leave, keep the loop running this long so the LEAVE
         * reaches a few members (several probe-period piggybacks). */
        NODE_CLUSTER_LEAVE_LINGER_MS = 600,
        /* After a member refused us (or we it) for other cluster settings,
         * wait this long for a compatible member to be alive before
         * telling the daemon: long enough for a JOIN's answer from a
         * compatible member on a LAN, short enough for issue 33's "join
         * refused within 1 s" to end a misconfigured node promptly. */
        NODE_CLUSTER_REFUSED_EXIT_MS = 1000,
        /* Refused members remembered for their line and `members` (the
         * oldest forgotten first); a cluster of 16-64 devices fits. */
        NODE_CLUSTER_REFUSED_MAX = 64,
};

struct node_cluster;
struct node_evlog;

/* Loop: load key and peers, bind the transport, create the protocol node
 * and the hand-off box, start the tick timer and join the peers. nparams
 * is the model's size (from the trainer). 0, or a negative errno / GOSSIP_E*
 * code with one line in err (peers file line, key file permission, address in
 * use...). */
int node_cluster_open(struct node_cluster **out, uv_loop_t *loop,
                      const struct node_options *o, struct node_evlog *ev,
                      size_t nparams, char *err, size_t errlen);

/* Loop: close every handle (the struct is freed when the loop has closed
 * them; run the loop to the end afterwards). NULL is fine. */
void node_cluster_close(struct node_cluster *c);

/* Loop: announce a graceful leave, keep ticking for the linger time, then
 * call done(arg). Calling it twice is harmless (done is called once). */
void node_cluster_leave(struct node_cluster *c, void (*done)(void *arg),
                        void *arg);

/* Loop: re-read the peers file and add/remove trusted keys live. 0 or a
 * negative code with the message in err (the old set stays then). */
int node_cluster_reload(struct node_cluster *c, char *err, size_t errlen);

/* Loop: re-read the revocation list file (--crl, else NODE_OPTIONS_CRL_FILE
 * in --checkpoint-dir) and offer it to the protocol core: a newer list is
 * taken, applied and sent to every live member; what happened is logged.
 * Nothing without --authority. */
void node_cluster_reload_crl(struct node_cluster *c);

/* Loop: cb(arg, why) is called once when, NODE_CLUSTER_REFUSED_EXIT_MS
 * after a member was refused for other cluster settings, no member with
 * our settings is alive: nobody can train with us. why names the
 * setting and both values. The daemon ends the run (exit 78). */
void node_cluster_on_refused(struct node_cluster *c,
                             void (*cb)(void *arg, const char *why), void *arg);

/* Loop: may the trainer begin its load? gossip_plan_may_load: a member
 * answered (one is alive in our view; at once with no one to join) and
 * every stream frame is written (the greetings), or
 * GOSSIP_PLAN_LOAD_HOLD_MS since the open. */
int node_cluster_may_load(struct node_cluster *c);

/* Our name (from --name, the peers file, or "node"). */
const char *node_cluster_name(const struct node_cluster *c);

/* The box the training thread shares with the loop (node_trainer_attach);
 * it lives as long as the cluster. */
struct node_handoff *node_cluster_handoff(struct node_cluster *c);

/* The membership as the rooms read it (members, partner choice, the
 * protocol core as view->g), for a peer that acts on the cluster itself
 * rather than through the exchange (tests/node/hostile_peer.c). After
 * calling into the protocol core directly, node_cluster_rearm() sets the
 * protocol timer for whatever that scheduled. */
struct node_view *node_cluster_view(struct node_cluster *c);
void node_cluster_rearm(struct node_cluster *c);

/* Loop: the control-socket commands of the cluster (members, stats, join,
 * force-leave; see docs/control.md), with the same contract as
 * node_ctl_handler. -ENOTSUP for a command it does not know. */
int node_cluster_ctl(struct node_cluster *c, struct node_trainer *t,
                     const char *cmd, const msgpack_object *args,
                     msgpack_packer *pk, char *err, size_t errlen);

/* Loop: training has finished and t's thread has been joined, so the model
 * is no longer changing and the loop may read it: from now on STATE_REQs
 * (and any still queued) are answered at once with t's final state, made
 * here, instead of a snapshot asked of the training thread. The node stays
 * a member until node_cluster_leave. */
void node_cluster_serve(struct node_cluster *c, struct node_trainer *t);

struct node_metrics_buf;
/* Loop: append this node's metric families to b. */
void node_cluster_metrics(struct node_cluster *c, struct node_trainer *t,
                          struct node_metrics_buf *b);

#endif
