/*
 * partition.h - which training samples each of `count` nodes holds, for
 * experiments with data that is not IID across devices.
 *
 * A partition is a pure function of (scheme, seed, the labels, count):
 * every node computes the whole split from the same inputs and keeps its
 * own part, so nodes agree without talking. Parts are disjoint. Schemes:
 *
 *   iid           node i of N gets the contiguous slice
 *                 [floor(i*n/N), floor((i+1)*n/N)), exactly --shard I/N.
 *   dirichlet:A   label skew: for each class c, proportions p_c over the
 *                 N nodes are drawn from Dirichlet(A, ..., A) and the
 *                 class's samples (in a seeded shuffled order) are cut at
 *                 the rounded cumulative proportions. Small A (0.1): most
 *                 of a class on one node; large A (100): close to IID.
 *                 Every sample is used. The whole draw is repeated (up to
 *                 NN_PART_MAX_DRAWS times) until every node holds at
 *                 least NN_PART_MIN_SAMPLES samples, if n allows that.
 *   classes:K     each node holds exactly K distinct labels: node i gets
 *                 the classes perm[(i*K + j) mod C], j < K, of a seeded
 *                 permutation perm of the C classes, and a class held by
 *                 h nodes is cut into h near-equal parts. If N*K < C only
 *                 N*K classes are used: their samples are the union, the
 *                 other classes' samples are nobody's.
 *   shards:K      McMahan et al.'s pathological split: all samples in
 *                 label order (each class seeded-shuffled) cut into N*K
 *                 near-equal contiguous shards, node i holding K of them
 *                 (a seeded permutation). Every sample is used, so with
 *                 N*K < C every class is still held; a node holds about
 *                 K labels (a shard may straddle a class boundary: 4
 *                 nodes, K = 2, 10 classes: 2-4 labels each).
 *
 * The draws use splitmix64 and libm's log/exp/pow/sqrt/cos; the cuts are
 * rounded to integers, so machines whose libm differs in the last bit of
 * a result could, rarely, move one sample across a cut. Nothing here
 * allocates more than n 32-bit words plus per-class counters.
 */
#ifndef NN_PARTITION_H
#define NN_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "nn/data.h"
#include "nn/nn_err.h"

enum nn_part_kind {
        NN_PART_IID = 0,
        NN_PART_DIRICHLET = 1,
        NN_PART_CLASSES = 2,
        NN_PART_SHARDS = 3,
};

enum {
        /* A Dirichlet draw that leaves a node with fewer samples than
         * this is redrawn: a node with a handful of samples would train
         * on nothing but them (the common FedAvg set-ups use 10 too). */
        NN_PART_MIN_SAMPLES = 10,
        /* Redraws before taking the last draw as it is: at A = 0.1 with
         * 4 nodes and 10 classes about 1 in 15 draws starves a node. */
        NN_PART_MAX_DRAWS = 100,
        NN_PART_K_MAX = 256, /* classes:K; labels are bytes */
};

/* Bounds on A: below 1e-3 the proportions are one-hot in doubles; above
 * 1e6 they are IID to within rounding. */
#define NN_PART_ALPHA_MIN 1e-3
#define NN_PART_ALPHA_MAX 1e6

struct nn_partition {
        enum nn_part_kind kind;
        double alpha; /* dirichlet */
        uint32_t k;   /* classes, shards */
        uint64_t seed;
};

/* Parses "iid", "dirichlet:A" (NN_PART_ALPHA_MIN <= A <= NN_PART_ALPHA_MAX),
 * "classes:K" or "shards:K" (1 <= K <= NN_PART_K_MAX) into *out (seed 0).
 * NN_EINVAL for anything else; *out is then untouched. shards:K also
 * needs count * K <= n at assignment. */
int nn_partition_parse(const char *s, struct nn_partition *out);

/* Writes the canonical text of p ("dirichlet:0.5") into buf; NN_EINVAL
 * if it does not fit or p is not valid. */
int nn_partition_format(const struct nn_partition *p, char *buf, size_t len);

/* Fills owner[0..n) with the node (0..count-1) each sample belongs to, or
 * -1 for a sample nobody holds (classes:K with count*K < classes). labels
 * are each < classes. NN_EINVAL for bad arguments (count < 1, a label out
 * of range, K > classes), NN_ENOMEM. */
int nn_partition_assign(const struct nn_partition *p, const uint8_t *labels,
                        uint32_t n, uint32_t classes, int count,
                        int32_t *owner);

/* Node index's part, as ascending sample indices in a fresh array *out
 * (free() it; NULL when *nout is 0). Same errors as nn_partition_assign,
 * and NN_EINVAL unless 0 <= index < count. */
int nn_partition_indices(const struct nn_partition *p, const uint8_t *labels,
                         uint32_t n, uint32_t classes, int index, int count,
                         uint32_t **out, uint32_t *nout);

/*
 * The node's training set in one call. For iid, *out is the view
 * nn_dataset_shard gives and all is untouched. Otherwise all is consumed:
 * the node's samples are moved to the front of all's own arrays (in
 * ascending order, no second copy of the set: a Pi holds it once),
 * all->n becomes their count, and *out is a view of all. On error all is
 * unchanged. A part may be empty (n = 0); the caller decides.
 */
int nn_dataset_partition(struct nn_dataset *all, const struct nn_partition *p,
                         int index, int count, struct nn_dataset *out);

#endif
