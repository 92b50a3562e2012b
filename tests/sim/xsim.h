/*
 * xsim.h - the exchange simulator: n trainers in virtual time, each running
 * the training thread's loop against the exchange plan (gossip/plan.h),
 * exchanging gradients and parameter slices over modelled links.
 *
 * What is modelled, and what is not:
 *  - a node's batch takes its step time (per node), an extra batch a
 *    fraction of it (extra_us); nothing else costs time on the node;
 *  - links are directed, each with bandwidth, latency, packet loss and
 *    message drop (struct xsim_link), first-class so a test sets a profile
 *    per link. A link sends one message at a time (FIFO: a message waits
 *    for the ones before it), then it arrives a latency later; each lost
 *    packet (MSS 1448 bytes) costs one retransmission timeout; delivery is
 *    in order per link, as on one TCP connection. A dropped message is lost
 *    whole (a reset connection);
 *  - the model is a small float vector; a "gradient" is one deterministic
 *    scalar (merged with gossip_merge over a 1-float buffer, as the node
 *    merges its gradient); slices are real floats, averaged with
 *    gossip_merge_average_delta / _params exactly as the node does;
 *  - membership: a node that dies stops computing, sending and receiving
 *    (what it had not finished transmitting is lost); every other node
 *    drops it from its live view detect_us (+ jitter) later and re-derives
 *    its partner schedule. A node that has trained its steps leaves: the
 *    others drop it when its goodbye arrives. Steps of peers (for the staleness
 * bound) travel like membership gossip: lossless, one link latency late;
 *  - provenance: each node keeps, per model part, the set of nodes whose
 *    slices have flowed into it (directly or through others), so
 *    dissemination is measured without relying on float values.
 *
 * Per step t (t = optimizer steps done), every node (see xsim.c):
 *   a. compute the batch gradient (step time); send it to the partner of
 *      step t when gradients are exchanged;
 *   b. GRADIENT phase: ask the plan until READY (WAIT blocks until an
 *      arrival or the deadline), merge pending gradients;
 *   c. optimizer step -> t + 1 (extra batches folded in); if due, copy our
 *      slice into the ring slot of t + 1 and send it to the partner of t + 1;
 *   d. PARAMS phase: ask the plan until READY; TRAIN_MORE runs one extra
 *      batch, folded into the next step;
 *   e. average in every slice received as gossip_plan_judge says (the
 *      rule node/train/handoff.c calls); then, at a round's end, skip to the
 *      partners' pace if every recent one is far ahead
 *      (gossip_plan_catch_up, fed with each arrival's lead).
 *
 * Virtual time is in microseconds, as the plan's clock.
 * A run is a pure function of its options and seed.
 */
#ifndef GN_XSIM_H
#define GN_XSIM_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/plan.h"
#include "gossip/wire.h"

enum {
        /* provenance sets are 64-bit masks */
        XSIM_MAX_NODES = 64,
        /* received slices held for the next apply, as the node's
         * NODE_CLUSTER_PARAMS_QUEUE (the oldest is replaced when full) */
        XSIM_INBOX_DEFAULT = 4,
        /* TCP: payload bytes per packet, and what a lost packet costs (the
         * Linux minimum retransmission timeout; slices are a few packets,
         * so a loss is usually a tail loss that waits for the timer) */
        XSIM_MSS_BYTES = 1448,
        XSIM_RTO_US = 200000,
        /* bytes of a frame besides its payload: the signed wire prefix
         * and signature, a codec header and the stream length prefix */
        XSIM_FRAME_BYTES = GOSSIP_WIRE_OVERHEAD + 16 + 4,
};

struct xsim_link {
        double bits_per_s; /* 0: unlimited */
        uint32_t latency_us;
        double loss; /* per packet; retransmitted after XSIM_RTO_US */
        double drop; /* per message; lost whole */
};

/* Named link profiles. */
enum xsim_preset {
        XSIM_LINK_LAN = 0,       /* 1 Gbit/s, 100 us */
        XSIM_LINK_10M_40MS = 1,  /* 10 Mbit/s, 40 ms: a poor Wi-Fi uplink */
        XSIM_LINK_100M_20MS = 2, /* 100 Mbit/s, 20 ms */
        XSIM_LINK_LOSS_1PCT = 3, /* 100 Mbit/s, 20 ms, 1% packet loss */
        XSIM_LINK_PRESETS = 4,
};

struct xsim_link xsim_link_preset(enum xsim_preset p);
const char *xsim_link_preset_name(enum xsim_preset p);

/* The plan's admission rule as the simulator calls it; tests may wrap it
 * (e.g. to break a bound on purpose and watch a check fail). */
typedef void (*xsim_admit_fn)(const struct gossip_plan_cfg *c,
                              const struct gossip_plan_view *v,
                              struct gossip_plan_wait *w,
                              struct gossip_plan_decision *d);

struct xsim;

struct xsim_opts {
        size_t n;       /* 2 .. XSIM_MAX_NODES */
        uint64_t seed;  /* schedule permutations, loss, detection jitter */
        uint64_t steps; /* every node trains this many steps */
        struct gossip_plan_cfg plan; /* nparams 1..; parts, lag >= 1 */
        uint32_t step_us;            /* a batch (default for every node) */
        uint32_t extra_us;           /* an extra batch; 0: step_us / 4 */
        struct xsim_link link;       /* every link, until xsim_set_link */
        uint32_t detect_us;          /* death -> dropped from views */
        uint32_t detect_jitter_us;   /* + uniform [0, this] per observer */
        uint32_t inbox_cap;          /* 0: XSIM_INBOX_DEFAULT */
        uint32_t grad_bytes;         /* a gradient on the wire; 0: 4/param */
        /* a slice on the wire: its floats x 2 (fp16) x this; 0: 1. A small
         * model can stand for a large one on the link (a scale of 100 makes
         * 4,070 floats travel as the MLP's 407,050) at a hundredth of the
         * simulator's work */
        uint32_t slice_scale;
        float avg_weight; /* 0: 0.5 */
        /* 1: never judge a slice ANSWERED (gossip_plan_judge without
         * the parts' record), as before that rule: every DELTA is
         * applied */
        int answer_twice;
        /* 1: a node behind every partner never skips to their pace
         * (gossip_plan_catch_up), as before that rule */
        int no_catch_up;
        xsim_admit_fn admit; /* NULL: gossip_plan_admit */
        /* called after every event (checks that must hold at all times) */
        void (*on_event)(struct xsim *x, void *user);
        /* called after every question to the plan, with its answer
         * (tracing a replayed seed) */
        void (*on_ask)(struct xsim *x, size_t node,
                       const struct gossip_plan_view *v,
                       const struct gossip_plan_decision *d, void *user);
        /* called for every message put on a link, as a sender's transport
         * sees it (tests/sim/test_link_sim.c feeds the link estimator
         * from it): queued now (xsim_now), its last byte leaves the
         * sender at tx_end_us, it arrives at arrive_us; not for messages
         * dropped whole */
        void (*on_send)(struct xsim *x, size_t from, size_t to, size_t bytes,
                        uint64_t tx_end_us, uint64_t arrive_us, void *user);
        void *user;
};

/* Node i's verdict on its exchange (gossip_plan_health, fed with the same
 * outcomes as node/train/handoff.c feeds it) and how often it changed. */
const struct gossip_plan_health *xsim_health(const struct xsim *x, size_t i,
                                             int *changes);

/* Per-node counters. Every received slice ends in exactly one of delta,
 * plain, stale, answered, replaced, or is still held (xsim_inbox_len). */
struct xsim_stats {
        uint64_t steps;
        uint64_t extra_trained; /* TRAIN_MORE batches computed */
        uint64_t extra_folded;  /* ... folded into an optimizer step */
        uint64_t steps_with_extra;
        uint64_t grads_sent, grads_received, grads_merged, grads_refused;
        uint64_t grad_waits, grad_timeouts; /* bound applied / timed out */
        uint64_t params_waits, params_timeouts;
        uint64_t more_in_gradient; /* TRAIN_MORE in the GRADIENT phase */
        uint64_t slices_sent, slices_received;
        uint64_t slices_delta, slices_plain, slices_stale, slices_replaced;
        uint64_t slices_answered; /* not used: ANSWERED already */
        /* received slices of a round whose copy we still held when we
         * averaged them in, and what they were used for */
        uint64_t held_delta, held_plain, held_stale;
        uint64_t late_delta;    /* held_delta with the slice's step < ours */
        uint64_t catch_ups;     /* skipped to the partners' pace ... */
        uint64_t steps_skipped; /* ... so many steps in all */
        uint64_t msgs_dropped;  /* ours, lost on the link (drop) */
        uint64_t retransmits;   /* ours, packets lost and resent */
        uint64_t wait_us;       /* blocked in WAIT */
        uint64_t done_us;       /* when the last step finished */
};

int xsim_create(const struct xsim_opts *o, struct xsim **out);
void xsim_destroy(struct xsim *x);

/* Setup, before or during a run. */
void xsim_set_step_us(struct xsim *x, size_t i, uint32_t us);
/* Node i's first batch begins at t_us instead of 0 (before xsim_run):
 * a node that starts late, or stalled, and is that far behind. */
void xsim_set_start_us(struct xsim *x, size_t i, uint64_t t_us);
void xsim_set_link(struct xsim *x, size_t from, size_t to,
                   const struct xsim_link *l);
/* Node i dies at virtual time t_us. */
int xsim_kill_at(struct xsim *x, size_t i, uint64_t t_us);

/* Run events until every live node has trained its steps (returns 1), or
 * until virtual time until_us or no event is left (returns 0). */
int xsim_run(struct xsim *x, uint64_t until_us);

uint64_t xsim_now(const struct xsim *x);
size_t xsim_n(const struct xsim *x);
const struct xsim_opts *xsim_opts(const struct xsim *x);
uint64_t xsim_step(const struct xsim *x, size_t i);
int xsim_dead(const struct xsim *x, size_t i);
int xsim_done(const struct xsim *x, size_t i);
const struct xsim_stats *xsim_stats(const struct xsim *x, size_t i);
/* Extra batches trained but not yet folded into a step. */
uint32_t xsim_extra_pending(const struct xsim *x, size_t i);
size_t xsim_inbox_len(const struct xsim *x, size_t i);
/* Provenance of node i's part p: bit j set when node j's slices have
 * reached it (bit i from the start). */
uint64_t xsim_reach(const struct xsim *x, size_t i, uint32_t part);
const float *xsim_model(const struct xsim *x, size_t i);
/* Live members in node i's view, itself included. */
size_t xsim_view_size(const struct xsim *x, size_t i);

#endif
