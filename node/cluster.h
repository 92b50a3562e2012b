/*
 * cluster.h - the node's membership in the cluster, and the exchange box
 * between the loop thread and the training thread.
 *
 * Loop side (every call marked "loop" runs on the libuv loop thread): the
 * key and peers files, the transport (node/net.h), the protocol core
 * (gossip/gossip.h) driven by one timer at gossip_next_deadline(), joins,
 * leave, SIGHUP reloads, and the application messages:
 *
 *   GRADIENT   our step-t gradient (payload codec) to the step-t partner
 *              of the GossipGraD schedule over the live view; received ones
 *              go into the merge buffer (gossip/merge.h, staleness S)
 *   PARAMS     one slice (1 of --params-parts, in turn) of our parameters
 *              to the step's partner every K steps (--params-codec); a
 *              received slice is averaged in by the trainer at its next
 *              step, against our own copy of the same step when we still
 *              have it (a ring of NODE_CLUSTER_PARAMS_RING rounds)
 *   STATE_REQ  "send me your model": answered with STATE (the checkpoint
 *              byte format) from a snapshot the trainer makes on request
 *
 * Training side (the hooks, see struct node_trainer_hooks): post the
 * gradient and merge what arrived without waiting (or at most --wait-ms),
 * average parameters, make snapshots, and at start fetch a peer's state if
 * a live peer is ahead of us.
 *
 * The two sides share only the box, under one mutex: buffers are handed
 * over by swapping pointers, so the lock is never held during encoding,
 * decoding or sending, except for the merge buffer's O(n) offer/apply and
 * the O(slice) averaging. Encoding happens on the loop: the training
 * thread's per-step cost is one copy of the gradient (if gradients are
 * exchanged) and of one parameter slice.
 */
#ifndef NODE_CLUSTER_H
#define NODE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>
#include <uv.h>

#include "options.h"
#include "trainer.h"

/* Tunables, with their reasons. */
enum {
        /* After start, wait this long for membership before deciding we
         * are alone: a SWIM join round trip on a LAN is milliseconds; on a
         * loaded Pi a second or two. */
        NODE_CLUSTER_JOIN_WAIT_MS = 3000,
        /* While alone, retry the join to every peer this often. */
        NODE_CLUSTER_JOIN_RETRY_MS = 2000,
        /* How long a joining node waits for a STATE answer before asking
         * another peer (a 3 MB state over TCP takes well under 1 s). */
        NODE_CLUSTER_STATE_WAIT_MS = 5000,
        /* STATE_REQ attempts before training from local weights. */
        NODE_CLUSTER_STATE_TRIES = 3,
        /* After gossip_leave, keep the loop running this long so the LEAVE
         * reaches a few members (several probe-period piggybacks). */
        NODE_CLUSTER_LEAVE_LINGER_MS = 600,
        /* Pending STATE_REQ answers kept at once. */
        NODE_CLUSTER_STATE_PENDING = 16,
        /* Our own parameter slices kept, one per averaging round, so that
         * a peer's copy of step s is averaged against ours of step s: 8
         * rounds absorb the loop's latency and a few steps of drift
         * between nodes (memory: 8 slices of the model). */
        NODE_CLUSTER_PARAMS_RING = 8,
        /* Received parameter slices held for the trainer's next step; a
         * node receives about one per step, a slow step may see a few. */
        NODE_CLUSTER_PARAMS_QUEUE = 4,
        /* Peers tracked for per-peer gradient counters. */
        NODE_CLUSTER_PEER_STATS = 256,
};

struct node_cluster;
struct node_evlog;

/* Per-peer gradient counters (keyed by public key). */
struct node_cluster_peer_grads {
        uint8_t key[32];
        uint64_t merged, late, dropped;
};

/* Loop: load key and peers, bind the transport, create the protocol node,
 * start the tick timer and join the peers. nparams/spec/nopt describe the
 * model (from the trainer). 0, or a negative errno / GOSSIP_E* code with one
 * line in err (peers file line, key file permission, address in use...). */
int node_cluster_open(struct node_cluster **out, uv_loop_t *loop,
                      const struct node_options *o, struct node_evlog *ev,
                      size_t nparams, size_t nopt, const char *spec, char *err,
                      size_t errlen);

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

/* Any thread: the training thread is finishing; wake any wait. */
void node_cluster_trainer_done(struct node_cluster *c);

/* Our name (from --name, the peers file, or "node"). */
const char *node_cluster_name(const struct node_cluster *c);

/* Training thread, before step 0: if a live peer is ahead of our step,
 * fetch its state into *ck and return 1; 0 to keep our weights. Waits at
 * most JOIN_WAIT + TRIES * STATE_WAIT. */
int node_cluster_initial_state(struct node_cluster *c, struct node_trainer *t,
                               struct nn_checkpoint *ck);

/* Training thread: post our gradient of `step` for the partner and merge
 * what peers sent into grads (n floats); waits at most --wait-ms. */
void node_cluster_exchange(struct node_cluster *c, struct node_trainer *t,
                           uint64_t step, float *grads, size_t n);

/* Training thread, before the optimizer step that makes `step`: the ring
 * buffer our slice of that averaging round goes to, for the optimizer to
 * fill (node_trainer_hooks.slice_dst); NULL when none is due or free. */
float *node_cluster_slice_dst(struct node_cluster *c, uint64_t step, size_t *lo,
                              size_t *count);

/* Training thread, after the optimizer step (step = new count): answer
 * snapshot requests, post our parameter slice every K steps, wait at most
 * --wait-ms for the previous round's slice, average in what arrived. */
void node_cluster_after_step(struct node_cluster *c, struct node_trainer *t,
                             uint64_t step, float *params, size_t n);

/* Loop: the control-socket commands of the cluster (members, stats, join,
 * force-leave; see docs/control.md), with the same contract as
 * node_ctl_handler. -ENOTSUP for a command it does not know. */
int node_cluster_ctl(struct node_cluster *c, struct node_trainer *t,
                     const char *cmd, const msgpack_object *args,
                     msgpack_packer *pk, char *err, size_t errlen);

struct node_metrics_buf;
/* Loop: append this node's metric families to b. */
void node_cluster_metrics(struct node_cluster *c, struct node_trainer *t,
                          struct node_metrics_buf *b);

#endif
