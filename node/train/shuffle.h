/*
 * shuffle.h - GossipGraD's sample shuffle (--shuffle-samples R), the box
 * between the training thread and the loop for it.
 *
 * THIS MOVES RAW TRAINING DATA BETWEEN DEVICES: every step a node sends R
 * of its own samples (image bytes and label) to its partner of the step,
 * over the authenticated stream (a SAMPLES frame, MAC'd like a gradient:
 * docs/protocol.md 3.8). Received samples go into a bounded reservoir
 * (nn/reservoir.h) that the node trains on beside its own: up to R of
 * each batch's samples (at most half the batch) are drawn from it, the
 * rest from the node's own data, so a step costs the same compute.
 *
 * Bounds: R <= NODE_SHUFFLE_MAX_R samples per step out (R * (1 +
 * sample bytes) payload bytes, 3.1 KB per step for R = 4 on 28x28
 * images; up to NODE_SHUFFLE_PACE_MAX times that per step trained on a
 * node slower than its partners, the same bytes per second), one posted
 * batch at a time (a newer one replaces an unsent one), the reservoir's
 * fixed cap * (1 + sample bytes) bytes in.
 *
 * Who owns what: the training thread posts (node_shuffle_post) and
 * draws (node_shuffle_draw); the loop takes what was posted
 * (node_shuffle_take) and delivers what arrived (node_shuffle_deliver).
 * Everything is under one mutex, held for a copy of R samples at most.
 * The hand-off box owns the struct (node_handoff_set_shuffle).
 */
#ifndef NODE_SHUFFLE_H
#define NODE_SHUFFLE_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

/* Tunables, with their reasons. */
enum {
        /* Most samples a node sends per step: 256 is 2.5 batches of 100,
         * far past where GossipGraD's shuffle stops helping, and keeps a
         * frame of 28x28 samples at 200 KB, the size of a PARAMS slice. */
        NODE_SHUFFLE_MAX_R = 256,
        /* Default reservoir: 2000 samples, 1.6 MB of 28x28 images; a
         * partner's R = 4 per step refreshes it over 500 steps. */
        NODE_SHUFFLE_RESERVOIR_DEFAULT = 2000,
        NODE_SHUFFLE_RESERVOIR_MAX = 1000000,
        /* A node that trains one step in X of those it passes (a slower
         * device kept in the schedule by the catch-up: gossip_plan_pace_
         * ratio) sends R times X samples per step trained, up to this X
         * (and NODE_SHUFFLE_MAX_R), so its samples reach its partners at
         * their rate: per second it sends what a device at their speed
         * would. Under label skew with its classes held by it alone, one
         * of 4 nodes at a quarter speed (history/benchmarks-log.md,
         * "Mixed device classes"). 8: a Pi Zero 2 next to a Pi 5. */
        NODE_SHUFFLE_PACE_MAX = 8,
};

/* Most samples sent in one step: R times NODE_SHUFFLE_PACE_MAX, at most
 * NODE_SHUFFLE_MAX_R (and never below R). */
static inline uint32_t node_shuffle_max_count(uint32_t r)
{
        uint64_t m = (uint64_t)r * NODE_SHUFFLE_PACE_MAX;

        m = m < NODE_SHUFFLE_MAX_R ? m : NODE_SHUFFLE_MAX_R;
        return m > r ? (uint32_t)m : r;
}

struct node_shuffle;

struct node_shuffle_stats {
        uint64_t frames_sent, samples_sent, bytes_sent;
        uint64_t frames_received, samples_received, bytes_received;
        uint64_t samples_kept;    /* entered the reservoir */
        uint64_t frames_refused;  /* wrong length, label or not enabled */
        uint64_t samples_trained; /* drawn into our batches */
        uint32_t reservoir_n, reservoir_cap;
        uint64_t reservoir_bytes; /* allocated, fixed */
        uint32_t per_step;        /* R */
};

/* R samples per step of sample_bytes bytes, labels below classes, a
 * reservoir of cap samples. 0, -EINVAL, -ENOMEM. */
int node_shuffle_create(struct node_shuffle **out, uint32_t r, uint32_t cap,
                        uint32_t sample_bytes, uint32_t classes, uint64_t seed);
void node_shuffle_free(struct node_shuffle *s);
void node_shuffle_stats(struct node_shuffle *s, struct node_shuffle_stats *st);
uint32_t node_shuffle_per_step(const struct node_shuffle *s);
uint32_t node_shuffle_sample_bytes(const struct node_shuffle *s);
/* Samples to send this step at a pace ratio of `ratio` (>= 1): R x ratio
 * rounded, in [R, node_shuffle_max_count(R)]. */
uint32_t node_shuffle_pace_count(const struct node_shuffle *s, double ratio);

/* Training thread: our samples of `step`, packed (nn_samples_pack), for
 * the loop to send; replaces a batch not yet taken. */
void node_shuffle_post(struct node_shuffle *s, uint64_t step, const uint8_t *p,
                       size_t len);

/* Training thread: up to k samples from the reservoir into images (k *
 * sample bytes) and labels; returns how many (0 while it is empty). */
uint32_t node_shuffle_draw(struct node_shuffle *s, uint32_t k, uint8_t *images,
                           uint8_t *labels);

/* Loop: the posted batch, copied into buf (cap bytes); returns its
 * length (0: nothing posted) and its step. */
size_t node_shuffle_take(struct node_shuffle *s, uint8_t *buf, size_t cap,
                         uint64_t *step);

/* Loop: a batch was sent (counted). */
void node_shuffle_sent(struct node_shuffle *s, size_t len);

/* Loop: a SAMPLES payload arrived from an authenticated member. 0, or
 * -EINVAL (refused whole and counted: wrong length or label). */
int node_shuffle_deliver(struct node_shuffle *s, const uint8_t *p, size_t len);

struct node_metrics_buf;
/* Loop: a "shuffle" key and map of the counters above for gossipctl
 * stats (docs/control.md), and the gossipnode_shuffle_* metrics. */
void node_shuffle_pack_stats(struct node_shuffle *s, msgpack_packer *pk);
void node_shuffle_metrics(struct node_shuffle *s, struct node_metrics_buf *b);

#endif
