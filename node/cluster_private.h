/*
 * cluster_private.h - the node's cluster state, shared by the five rooms
 * of node/cluster*.c. Not for anyone else: the rest of node/ uses
 * cluster.h, and the training thread only node/handoff.h.
 *
 *   cluster.c           membership and lifecycle: key and peers files, the
 *                       transport, the protocol timer, joins, leave,
 *                       SIGHUP reloads, partner choice, member changes
 *   cluster_exchange.c  the exchange, loop side: take what the trainer
 *                       posted, encode and send it; decode what peers
 *                       sent and deliver it to the hand-off box
 *   cluster_join.c      state transfer for a live join (STATE_REQ/STATE)
 *   cluster_report.c    control-socket replies, the summary line
 *   cluster_metrics.c   the Prometheus families (/metrics)
 *
 * Every field here belongs to the loop thread, except h (the box, which
 * locks itself) and the fields fixed at open. Internal calls between the
 * rooms carry a double underscore.
 */
#ifndef NODE_CLUSTER_PRIVATE_H
#define NODE_CLUSTER_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "gossip/adapt.h"
#include "cluster.h"
#include "gossip/codec.h"
#include "gossip/gossip.h"
#include "handoff.h"
#include "net.h"
#include "ident/peers.h"

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
        struct node_handoff *h; /* the box shared with the trainer */
        /* lifecycle (cluster.c) */
        uv_timer_t tick, join_timer, linger;
        uv_async_t async; /* the trainer posted something */
        int open_handles;
        struct node_net *net;
        struct gossip *g;
        struct node_peer *peers;
        size_t npeers;
        uint8_t (*view)[GOSSIP_KEY_BYTES]; /* partner choice scratch */
        size_t view_cap;
        int leaving, closing;
        void (*leave_done)(void *);
        void *leave_arg;
        /* the exchange (cluster_exchange.c) */
        struct gossip_codec enc, penc; /* gradients (error feedback),
                                          parameter slices (stateless) */
        struct gossip_codec penc8;     /* slices in int8, when adapted */
        /* what we send for averaging, from the measured link
         * (gossip/adapt.h; cluster_exchange.c), re-chosen every 250 ms at most
         */
        struct gossip_adapt_choice adapt;
        uint64_t adapt_at_ms, adapt_changes;
        /* one period for all (gossip_adapt_agree): the K in force, the
         * largest of our own need (adapt.k) and the needs partners told
         * us, needs[i] being pg[i]'s */
        uint32_t k_force;
        struct gossip_adapt_need needs[NODE_CLUSTER_PEER_STATS];
        /* the receiver's side of each partner's link (gossip/link.h):
         * how its frames arrived here, summed until we tell it (PARAMS
         * keys 17-18), rx[i] being pg[i]'s; rx_now is the stream frame
         * being delivered (cluster.c's on_frame), rx_len its length */
        struct gossip_link_rx rx[NODE_CLUSTER_PEER_STATS];
        struct node_net_rx rx_now;
        size_t rx_len;
        uint64_t rates_told, rates_heard; /* rx samples sent, and taken */
        uint8_t *grad_buf, *params_buf;   /* encoded payloads */
        size_t grad_cap, params_cap;
        float *scratch; /* a received gradient, decoded */
        int warned_parts;
        struct node_cluster_peer_grads pg[NODE_CLUSTER_PEER_STATS];
        size_t npg;
        uint64_t grads_sent, grads_send_fail, grads_no_partner;
        uint64_t params_sent, decode_errors;
        uint64_t params_skipped_link; /* not sent: the uplink still busy */
        /* state transfer (cluster_join.c) */
        uint8_t pending[NODE_CLUSTER_STATE_PENDING][GOSSIP_KEY_BYTES];
        size_t npending;
        uint64_t states_sent, states_received, state_reqs;
        struct node_trainer *served; /* training over: answer from here */
};

/* cluster.c */
uint64_t node_cluster__unix_ms(void);
void node_cluster__arm(struct node_cluster *c);
/* The step we tell in membership: the box's, or the served model's. */
uint64_t node_cluster__own_step(struct node_cluster *c);
const char *node_cluster__member_name(const struct gossip_member_info *m);
/* A copy of every member (ours first); *n set; NULL on no memory. */
struct gossip_member_info *node_cluster__members(struct node_cluster *c,
                                                 size_t *n);
/* The step's partner per the GossipGraD schedule over the live view. */
int node_cluster__partner(struct node_cluster *c, uint64_t step,
                          uint8_t key[GOSSIP_KEY_BYTES]);
/* 1 if key is one of our scheduled senders at step (robust merge). */
int node_cluster__scheduled_sender(struct node_cluster *c, uint64_t step,
                                   const uint8_t key[GOSSIP_KEY_BYTES]);

/* cluster_metrics.c: the i-th transport refusal, its name (as in
 * rejects_total and in the stats reply's "net") and *count; NULL past the
 * last. */
const char *node_cluster__net_reject(size_t i, const struct node_net_stats *ns,
                                     uint64_t *count);

/* cluster_exchange.c */
int node_cluster__exchange_open(struct node_cluster *c, char *err,
                                size_t errlen);
void node_cluster__exchange_free(struct node_cluster *c);
void node_cluster__on_async(uv_async_t *a);
void node_cluster__on_gradient(struct node_cluster *c,
                               const struct gossip_member_info *from,
                               uint64_t step, const void *p, size_t len);
/* A PARAMS slice and what its frame tells (msg: period, need, rx_rate,
 * rx_span; 0 = not told). */
void node_cluster__on_params(struct node_cluster *c,
                             const struct gossip_member_info *from,
                             const struct gossip_app *msg);
/* The stream frame being delivered (c->rx_now) is from `from`: how it
 * arrived goes into the rate we tell from next (gossip_link_rx_frame). */
void node_cluster__heard_frame(struct node_cluster *c,
                               const struct gossip_member_info *from);
/* --shuffle-samples: a SAMPLES payload into the reservoir (refused and
 * counted when we have no shuffle or it does not fit our data). */
void node_cluster__on_samples(struct node_cluster *c,
                              const struct gossip_member_info *from,
                              const void *p, size_t len);
/* Per-peer gradient counters; NULL when the table is full. */
struct node_cluster_peer_grads *node_cluster__peer_grads(struct node_cluster *c,
                                                         const uint8_t *key);
/* Tell the box who is alive and how far the slowest peer is. */
void node_cluster__publish_members(struct node_cluster *c);

/* cluster_join.c */
void node_cluster__send_state(struct node_cluster *c, const void *buf,
                              size_t len, uint64_t step);
void node_cluster__request_state(struct node_cluster *c, uint64_t local_step);
void node_cluster__on_state_req(struct node_cluster *c,
                                const struct gossip_member_info *from);
void node_cluster__on_state(struct node_cluster *c,
                            const struct gossip_member_info *from,
                            const void *p, size_t len);

/* cluster_report.c */
void node_cluster__log_summary(struct node_cluster *c);

#endif
