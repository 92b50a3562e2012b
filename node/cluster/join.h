/*
 * join.h - state transfer for a live join, loop side (STATE_REQ/STATE),
 * and the step we tell in membership.
 *
 * A struct node_join is embedded in the cluster (node/cluster/cluster.c), which
 * fills it at open; the exchange (node/cluster/exchange.c) hands it the
 * STATE_REQ and STATE messages and the snapshots the trainer posts. It calls
 * the protocol core, the box and the view, never the cluster or the exchange.
 * Loop thread only.
 */
#ifndef NODE_JOIN_H
#define NODE_JOIN_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip.h"

struct node_handoff;
struct node_trainer;
struct node_view;

enum {
        /* Pending STATE_REQ answers kept at once. */
        NODE_JOIN_PENDING = 16,
};

struct node_join {
        struct gossip *g;
        struct node_handoff *h;
        struct node_view *view;
        /* peers waiting for our model (STATE_REQ answered at the next
         * snapshot) */
        uint8_t pending[NODE_JOIN_PENDING][GOSSIP_KEY_BYTES];
        size_t npending;
        uint64_t states_sent, states_received, state_reqs;
        struct node_trainer *served; /* training over: answer from here */
};

/* The step we tell in membership: the box's, or the served model's. */
uint64_t node_join_own_step(const struct node_join *j);

/* The snapshot the trainer posted (buf, len, at step): to every peer
 * waiting for it. */
void node_join_send_state(struct node_join *j, const void *buf, size_t len,
                          uint64_t step);

/* Our trainer wants a peer's model: ask the live member furthest ahead,
 * or tell the box to take its step, or that no one is ahead. */
void node_join_request_state(struct node_join *j, uint64_t local_step);

/* A peer asks for our model (STATE_REQ). */
void node_join_on_state_req(struct node_join *j,
                            const struct gossip_member_info *from);

/* A peer's model (STATE) for our trainer. */
void node_join_on_state(struct node_join *j,
                        const struct gossip_member_info *from, const void *p,
                        size_t len);

/* Training has finished: answer from t from now on (node_cluster_serve). */
void node_join_serve(struct node_join *j, struct node_trainer *t);

#endif
