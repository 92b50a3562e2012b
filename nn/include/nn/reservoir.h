/*
 * reservoir.h - a bounded store of training samples received from other
 * devices (GossipGraD's sample shuffle, --shuffle-samples), and the packed
 * form they travel in.
 *
 * A reservoir holds at most cap samples of sample_bytes image bytes and a
 * label each, in one allocation made at init: its memory is
 * cap * (sample_bytes + 1) bytes and never grows. When full, a new sample
 * replaces a uniformly chosen one with probability cap / seen (Vitter's
 * algorithm R), so the reservoir stays a uniform sample of everything
 * offered, old and new alike, and no sender can flush it faster than its
 * share of the traffic.
 *
 * Packed samples (the SAMPLES frame's payload, docs/protocol.md 3.8):
 * n records of 1 label byte followed by sample_bytes image bytes, nothing
 * else; a payload is valid only at exactly n * (1 + sample_bytes) bytes
 * with every label below the model's class count.
 *
 * Pure: no threads, clocks or I/O; randomness from the seed given at init.
 * Not thread-safe: the caller locks (node/train/shuffle.c).
 */
#ifndef NN_RESERVOIR_H
#define NN_RESERVOIR_H

#include <stddef.h>
#include <stdint.h>

struct nn_reservoir {
        uint32_t cap;          /* samples it can hold, >= 1 */
        uint32_t sample_bytes; /* image bytes per sample */
        uint32_t n;            /* samples held, <= cap */
        uint64_t seen;         /* samples offered since init */
        uint64_t rng;          /* splitmix64 state */
        uint8_t *images;       /* cap * sample_bytes */
        uint8_t *labels;       /* cap */
};

/* 0, NN_EINVAL (cap or sample_bytes 0, or the product over SIZE_MAX / 2),
 * NN_ENOMEM. */
int nn_reservoir_init(struct nn_reservoir *r, uint32_t cap,
                      uint32_t sample_bytes, uint64_t seed);
void nn_reservoir_free(struct nn_reservoir *r);

/* Bytes the reservoir holds allocated: cap * (sample_bytes + 1). */
size_t nn_reservoir_bytes(const struct nn_reservoir *r);

/* Offer one sample. Returns 1 if it was kept (appended or replacing
 * another), 0 if not. */
int nn_reservoir_add(struct nn_reservoir *r, const uint8_t *image,
                     uint8_t label);

/* Offer every sample of a packed payload (see above), after checking all
 * of it: *kept (may be NULL) gets how many were kept. 0, or NN_EINVAL
 * for a payload of the wrong length or with a label >= classes (then
 * nothing was offered). */
int nn_reservoir_add_packed(struct nn_reservoir *r, const uint8_t *p,
                            size_t len, uint32_t classes, uint32_t *kept);

/* Draw k samples uniformly with replacement into images (k *
 * sample_bytes) and labels (k). Returns how many were drawn: k, or 0
 * when the reservoir is empty. */
uint32_t nn_reservoir_draw(struct nn_reservoir *r, uint32_t k, uint8_t *images,
                           uint8_t *labels);

/* Bytes of n packed samples of sample_bytes each. */
size_t nn_samples_packed_len(uint32_t n, uint32_t sample_bytes);

/* Pack sample i of images/labels (n samples given by index idx[0..n))
 * into out (nn_samples_packed_len(n, sample_bytes) bytes). */
void nn_samples_pack(const uint8_t *images, const uint8_t *labels,
                     uint32_t sample_bytes, const uint32_t *idx, uint32_t n,
                     uint8_t *out);

#endif
