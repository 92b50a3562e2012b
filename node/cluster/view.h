/*
 * view.h - the membership as the node's rooms read it: copies of every
 * member, a member's printable name, and the step's partner over the live
 * view (the GossipGraD schedule, gossip/schedule.h).
 *
 * A struct node_view is owned by the cluster (node/cluster/cluster.c), which
 * sets g once the protocol core exists and keeps the capacities in step with
 * the peers file (node_view_reserve); the exchange, the join and the
 * reports are handed a pointer and only read through it. It calls into
 * gossip/ and nothing in node/, so every room may use it without a
 * cycle (tests/node/test_layering.py). Loop thread only.
 */
#ifndef NODE_VIEW_H
#define NODE_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip.h"

struct node_view {
        struct gossip *g; /* NULL until the protocol core is created */
        uint8_t pk[GOSSIP_KEY_BYTES];      /* ourselves */
        uint64_t seed;                     /* the schedule's (--seed) */
        size_t npeers;                     /* lines in the peers file */
        uint8_t (*keys)[GOSSIP_KEY_BYTES]; /* partner choice scratch */
        uint8_t *alive;                    /* keys[i] is ALIVE (scratch) */
        size_t cap;                        /* of both; never shrinks */
};

/* Size the scratch for npeers peers and ourselves; on no memory the old
 * scratch stays (and the view is read cut to it). 0 or -ENOMEM. */
int node_view_reserve(struct node_view *v, size_t npeers);

/* Free the scratch. */
void node_view_free(struct node_view *v);

/* A member's name for logs and labels ("?" when it told none). */
const char *node_view_member_name(const struct gossip_member_info *m);

/* A copy of every member (ours first, at most npeers + 1); *n set; free()
 * it. NULL on no memory. */
struct gossip_member_info *node_view_members(const struct node_view *v,
                                             size_t *n);

/* The step's partner per the GossipGraD schedule over the live view. 0, or
 * GOSSIP_ENOPEER when no other member is alive. */
int node_view_partner(struct node_view *v, uint64_t step,
                      uint8_t key[GOSSIP_KEY_BYTES]);

/* 1 if `from` is one of `to`'s scheduled senders at step (robust merge:
 * to is ourselves; the hostile-peer test asks it the other way), under
 * either reading of a churning view (gossip_sched_view_is_sender()). */
int node_view_is_sender(struct node_view *v, uint64_t step,
                        const uint8_t from[GOSSIP_KEY_BYTES],
                        const uint8_t to[GOSSIP_KEY_BYTES]);

#endif
