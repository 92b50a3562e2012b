/*
 * merge.h - the gradient merge buffer: what a node does with the gradients
 * its partners send.
 *
 * Received gradients (or slices of one, from the partial-exchange codec)
 * are offered into a buffer; at its optimizer step the node applies the
 * buffer to its own gradient by pairwise averaging,
 *      own[i] = (own[i] + sum of received[i]) / (1 + number received at i),
 * and the buffer starts empty again. A gradient is accepted only if it is
 * at most S steps away from the node's current step (a stale-synchronous
 * bound): late ones within S are merged and counted as late, the rest are
 * counted and dropped. Wrong length and NaN/Inf are counted and dropped:
 * the network is not trusted to be sane.
 *
 * Periodic model averaging (every K steps, with the partner) is a separate
 * pure function, gossip_merge_average_params(), so replicas do not drift.
 *
 * Threads: a struct gossip_merge is NOT thread-safe and takes no locks
 * (gossip/ knows nothing of threads). The daemon calls offer from the loop
 * thread and apply from the training thread, so it must hold one mutex
 * around every call on the same buffer. Both calls are one O(n) pass with
 * no allocation, so the critical section is short (a few hundred
 * microseconds for 407k floats on a Pi-class core).
 */
#ifndef GOSSIP_MERGE_H
#define GOSSIP_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip_types.h"

/* Tunables, with their reasons. */
enum {
        /* S: a gradient at most this many steps older (or newer) than ours
         * is merged. With one partner per step a healthy peer's gradient
         * arrives within one step; 4 absorbs a slow or briefly stalled
         * peer without letting a stale direction dominate the update. */
        GOSSIP_MERGE_STALENESS_DEFAULT = 4,
        /* Offers accepted per step before the buffer refuses more. One
         * sender per step is the norm; skipping and late arrivals add a
         * few. A flood from a buggy peer stops here. */
        GOSSIP_MERGE_MAX_PENDING = 16,
        /* K: average parameters with the partner every this many steps.
         * Gradient averaging alone lets replicas drift by rounding and by
         * dropped gradients; one exchange per 64 steps costs 1/64 of the
         * gradient traffic. */
        GOSSIP_MERGE_AVERAGE_EVERY_DEFAULT = 64,
};

/* Counters; every offer lands in exactly one of the accepted/dropped
 * buckets. */
struct gossip_merge_stats {
        uint64_t offers;         /* calls to offer */
        uint64_t accepted;       /* taken into the buffer */
        uint64_t late;           /* accepted, from an older step (<= S) */
        uint64_t merged;         /* accepted ones that an apply averaged in */
        uint64_t applies;        /* calls to apply */
        uint64_t dropped_stale;  /* older than current - S */
        uint64_t dropped_future; /* newer than current + S */
        uint64_t dropped_shape;  /* length or range does not fit the model */
        uint64_t dropped_nonfinite; /* NaN or Inf inside */
        uint64_t dropped_dup;       /* same (sender, step) already pending */
        uint64_t dropped_full;      /* GOSSIP_MERGE_MAX_PENDING reached */
};

struct gossip_merge_pending {
        uint8_t from[GOSSIP_KEY_BYTES];
        uint64_t step;
};

struct gossip_merge {
        size_t n;           /* model size (floats) */
        uint64_t staleness; /* S */
        uint64_t current;   /* our step: set by set_step / apply */
        float *sum;         /* sum of accepted values, per element */
        uint16_t *cnt;      /* how many accepted values per element */
        size_t npending;
        struct gossip_merge_pending pending[GOSSIP_MERGE_MAX_PENDING];
        struct gossip_merge_stats st;
};

/* Allocate a buffer for gradients of n floats with staleness bound S.
 * Returns 0, GOSSIP_EINVAL (n == 0) or GOSSIP_ENOMEM (nothing allocated). */
int gossip_merge_init(struct gossip_merge *m, size_t n, uint64_t staleness);

/* Free the buffer's memory. Safe on a zeroed or already freed struct. */
void gossip_merge_free(struct gossip_merge *m);

/* Tell the buffer our current step (offers are judged against it). */
void gossip_merge_set_step(struct gossip_merge *m, uint64_t step);

/* Offer a whole gradient g[0..n) computed by `from` at `step`. Returns 0 if
 * it was accepted, else the reason it was counted and dropped:
 * GOSSIP_ESTALE (more than S steps away), GOSSIP_EMISMATCH (n is not the
 * model size), GOSSIP_ENONFINITE, GOSSIP_EREPLAY (same sender and step
 * already pending), GOSSIP_ETOOBIG (buffer full). */
int gossip_merge_offer(struct gossip_merge *m,
                       const uint8_t from[GOSSIP_KEY_BYTES], uint64_t step,
                       const float *g, size_t n);

/* Offer a slice g[0..count) that belongs at [lo, lo + count) of the model
 * (one partition of a partial exchange); only those elements are averaged.
 * Same contract as gossip_merge_offer(); GOSSIP_EMISMATCH if the range does
 * not fit in the model. */
int gossip_merge_offer_range(struct gossip_merge *m,
                             const uint8_t from[GOSSIP_KEY_BYTES],
                             uint64_t step, size_t lo, const float *g,
                             size_t count);

/* Average what is buffered into own[0..n) (element-wise, own counts once),
 * empty the buffer and make current_step the buffer's step. Returns how
 * many offers were merged (0: own is unchanged), or GOSSIP_EMISMATCH if n is
 * not the model size (then nothing changes). */
int gossip_merge_apply(struct gossip_merge *m, uint64_t current_step,
                       float *own, size_t n);

/* Copy the counters. */
void gossip_merge_stats_get(const struct gossip_merge *m,
                            struct gossip_merge_stats *out);

/* mine = (1 - weight) * mine + weight * theirs, for weight in [0, 1]
 * (0.5 is the plain average). Returns 0, GOSSIP_EINVAL for a bad weight, or
 * GOSSIP_ENONFINITE if theirs holds NaN/Inf (then mine is unchanged). */
int gossip_merge_average_params(float *mine, const float *theirs, size_t n,
                                float weight);

/* Delayed model averaging: mine += weight * (theirs - mine_then), where
 * theirs is a peer's copy and mine_then ours, both from the same step s;
 * the progress mine made since s is kept (plain averaging with a stale
 * copy would halve it). All three arrays hold n floats; theirs must be
 * finite (decoded payloads are). Returns 0, or GOSSIP_EINVAL for a bad
 * weight or a NULL array (then nothing changes). */
int gossip_merge_average_delta(float *mine, const float *mine_then,
                               const float *theirs, size_t n, float weight);

/* Non-zero when periodic parameter averaging is due at step: every
 * `every` steps (K), never at step 0, never when every == 0. */
int gossip_merge_average_due(uint64_t step, uint64_t every);

#endif
