/*
 * exchange.h - the exchange as one object, loop side: what the trainer
 * posts in the hand-off box is encoded here and sent to the step's
 * partner; what peers send is decoded here and delivered to the box.
 *
 * Owned by the cluster (node/cluster/cluster.c), which creates it before the
 * transport and the protocol core (the box must exist first), binds them
 * to it once they exist, registers node_exchange_gossip_app as the
 * protocol's on_app (ctx: the exchange) and frees it last. The exchange
 * owns the codecs and their buffers, the adaptation and the agreed
 * period K, what partners told us of their links, the receiver's side of
 * each partner's link, the per-peer table and the counters, and the box
 * (node/train/handoff.h), which the cluster hands to the trainer. It borrows
 * the protocol core, the transport, the view (node/cluster/view.h) and the join
 * (node/cluster/join.h) and calls none of the cluster's functions: one entry
 * per event, each called by the cluster or registered by it.
 *
 * Loop thread only (the box locks itself).
 */
#ifndef NODE_EXCHANGE_H
#define NODE_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "gossip/adapt.h"
#include "gossip/gossip.h"
#include "net/net.h"

struct node_options;
struct node_handoff;
struct node_view;
struct node_join;
struct node_exchange;

enum {
        /* Peers tracked for per-peer counters, needs and link summaries. */
        NODE_EXCHANGE_PEERS = 256,
};

struct node_exchange_cfg {
        const struct node_options *o;
        size_t nparams;   /* the model's size */
        uv_async_t *wake; /* sent when the trainer posts (any thread) */
};

/* One received frame as the transport delivered it: the exchange's
 * receive information, an argument of node_exchange_on_app. */
struct node_exchange_rx {
        struct node_net_rx net; /* how a stream frame arrived ({0,0}:
                                   a datagram) */
        size_t len;             /* the frame's length, bytes */
        uint64_t now_ms;        /* the loop's time at delivery */
};

/* Per-peer gradient counters (keyed by public key). */
struct node_exchange_peer {
        uint8_t key[GOSSIP_KEY_BYTES];
        uint64_t merged, late, dropped;
};

/* The exchange's own counters and choices, for reports and metrics. */
struct node_exchange_stats {
        /* what we send for averaging as our link needs (gossip/adapt.h) */
        struct gossip_adapt_choice adapt;
        uint32_t k_force; /* the K in force (one period for all) */
        uint32_t k_cpu;   /* the K our CPU needs (--adapt cpu); 0: none */
        double cpu_pct;   /* the exchange's share of our CPU in the last
                           * window measured (gossip_adapt_cpu_pct); -1:
                           * not measured yet */
        uint64_t adapt_changes;
        uint64_t rates_told, rates_heard; /* rx samples sent, and heard
                                             (handed to the transport) */
        uint64_t grads_sent, grads_send_fail, grads_no_partner;
        uint64_t params_sent, decode_errors;
        uint64_t params_skipped_link; /* not sent: the uplink still busy */
        uint64_t samples_refused;     /* SAMPLES frames refused (3.8) */
};

/* Codecs, buffers, the adaptation and the box, from the options. 0, or a
 * negative errno / GOSSIP_E* code with one line in err; on error *out is
 * NULL and nothing is left allocated. */
int node_exchange_open(struct node_exchange **out,
                       const struct node_exchange_cfg *cfg, char *err,
                       size_t errlen);

/* What the exchange borrows, once the cluster has it (before any event). */
void node_exchange_bind(struct node_exchange *ex, struct gossip *g,
                        struct node_net *net, struct node_view *view,
                        struct node_join *join);

/* Free everything, the box included. NULL is fine. */
void node_exchange_free(struct node_exchange *ex);

/* The box shared with the training thread; lives as long as ex. */
struct node_handoff *node_exchange_box(struct node_exchange *ex);

/* A verified application message from `from`, in a frame received as rx
 * says: GRADIENT and PARAMS into the box, SAMPLES into the reservoir,
 * STATE_REQ and STATE to the join; anything else counted. A rate report
 * the frame carried is handed back in rx->net.report for the transport
 * (struct node_net_rx); rx may be NULL (no receive information, no
 * report taken). */
void node_exchange_on_app(struct node_exchange *ex,
                          const struct gossip_member_info *from,
                          const struct gossip_app *msg,
                          struct node_exchange_rx *rx);

/* gossip_config.on_app with app_ctx = ex: msg->frame is the frame's
 * struct node_exchange_rx (gossip_on_frame), NULL when none was given. */
void node_exchange_gossip_app(void *ex, const struct gossip_member_info *from,
                              const struct gossip_app *msg);

/* The trainer posted something: send it (gradient, slices, samples,
 * state), re-choose what our link can carry, ask for a state if wanted.
 * The caller re-arms the protocol timer after. */
void node_exchange_on_post(struct node_exchange *ex);

/* Members changed (or time passed): tell the box who is alive and how far
 * the slowest live peer is. */
void node_exchange_on_members(struct node_exchange *ex);

/* The counters and choices, valid until the next event. */
const struct node_exchange_stats *
node_exchange_stats(const struct node_exchange *ex);

/* key's gradient counters into *out: 0, or -ENOENT when never tracked. */
int node_exchange_peer(const struct node_exchange *ex, const uint8_t *key,
                       struct node_exchange_peer *out);

/* The exchange's lines at leave: robust merge, adaptation, link rate
 * reports, waits, the exchange counters. */
void node_exchange_log_summary(struct node_exchange *ex);

#endif
