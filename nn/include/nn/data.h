/*
 * data.h - image data sets, shards and shuffled batches.
 *
 * A data set lives in memory as bytes: n samples of channels*rows*cols
 * pixels each (channel-planar, row-major, as in the files) and n label
 * bytes. Floats exist only per batch, so 60000 Fashion-MNIST images cost
 * 47 MB, not 188 MB. Loaders read IDX (MNIST, Fashion-MNIST; gzipped or
 * raw, told apart by the gzip magic, not the name) and CIFAR-10 binary
 * batches. A bad file is normal input: every loader refuses it with a
 * negative NN_E* code and one line in `err` naming the file; no header
 * can make a loader allocate more than max(16 MiB, twice the bytes the
 * file really holds).
 *
 * A shard is a view: it points into its parent's arrays, owns nothing,
 * and must not outlive the parent. Shard i of k is the contiguous slice
 * [floor(i*n/k), floor((i+1)*n/k)), so the k shards are disjoint, cover
 * the set, and differ in size by at most one.
 *
 * A batcher walks a data set in epochs. The order of epoch e is a
 * Fisher-Yates shuffle of 0..n-1 driven by splitmix64 seeded from
 * (seed, e) only, so it is the same on every machine and any epoch can
 * be re-created without replaying the ones before it (resume).
 */
#ifndef NN_DATA_H
#define NN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "nn/nn_err.h"

/* Bounds on what a file header may claim. Anything beyond is refused
 * before any allocation. */
enum {
        NN_DATA_MAX_N = 100000000,          /* samples; 10^8 >> any set */
        NN_DATA_MAX_SAMPLE_BYTES = 1000000, /* channels*rows*cols: 1 MP */
        NN_DATA_MAX_CIFAR_FILES = 64,       /* batches read from one dir */
};

struct nn_dataset {
        uint32_t n;        /* samples */
        uint32_t channels; /* 1 for IDX, 3 for CIFAR-10 */
        uint32_t rows, cols;
        uint32_t classes; /* 10 for the known formats */
        uint8_t *images;  /* n * channels*rows*cols bytes */
        uint8_t *labels;  /* n bytes, each < classes */
        int owns;         /* 1: arrays are ours to free; 0: a view */
};

/* Bytes per sample (channels*rows*cols); 0 for an empty struct. */
size_t nn_dataset_sample_size(const struct nn_dataset *ds);

/* Loads an IDX image file (magic 0x00000803, u8, 3 dims) and its label
 * file (0x00000801, u8, 1 dim), gzipped or raw. On error returns a
 * negative code, writes one line naming the file into err, and leaves
 * *out zeroed. */
int nn_dataset_load_idx(const char *images_path, const char *labels_path,
                        struct nn_dataset *out, char *err, size_t errlen);

/* Loads CIFAR-10 binary batch files (records of 1 label byte + 3072
 * pixel bytes, 3x32x32) and concatenates them in the order given. Same
 * error contract as nn_dataset_load_idx. */
int nn_dataset_load_cifar(const char *const *paths, int npaths,
                          struct nn_dataset *out, char *err, size_t errlen);

/* Finds a known data set in dir and loads its training (train != 0) or
 * test part: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz], or
 * CIFAR-10's data_batch_1..5.bin / test_batch.bin (also inside a
 * cifar-10-batches-bin subdirectory). NN_EIO with a message if none. */
int nn_dataset_load_dir(const char *dir, int train, struct nn_dataset *out,
                        char *err, size_t errlen);

/* Finds the data set as nn_dataset_load_dir does and reads only what
 * tells its sample shape: an IDX image file's 16-byte header (CIFAR-10's
 * shape is fixed). Fills out's channels, rows, cols, classes (10: a
 * wider IDX set's count is known only from its labels) and n (0 for
 * CIFAR-10, counted only by reading it); images and labels stay NULL.
 * The labels file is looked for, not read. Milliseconds where the load
 * takes seconds on a slow device: enough to size a model before it.
 * Same error contract as nn_dataset_load_dir. */
int nn_dataset_probe_dir(const char *dir, int train, struct nn_dataset *out,
                         char *err, size_t errlen);

/* Frees what the data set owns (nothing for a view) and zeroes it. */
void nn_dataset_free(struct nn_dataset *ds);

/* Makes *out a view of shard index (0-based) of count over all: the
 * contiguous slice described above. No allocation. NN_EINVAL unless
 * 0 <= index < count. A shard may be empty when count > n. */
int nn_dataset_shard(const struct nn_dataset *all, int index, int count,
                     struct nn_dataset *out);

/* Converts n bytes to floats as b / 255.0f (range [0,1]); no mean or
 * std shift, so every node and every checkpoint agree on the input
 * scale. */
void nn_data_to_float(const uint8_t *in, size_t n, float *out);

struct nn_batcher {
        const struct nn_dataset *ds; /* not owned; must outlive us */
        uint32_t *order;             /* permutation of the current epoch */
        uint32_t pos;                /* next index into order */
        uint64_t seed;
        uint64_t epoch;     /* epoch that order belongs to */
        uint64_t completed; /* full passes finished */
};

/* Prepares a batcher over ds for epoch 0. NN_ENOMEM on allocation
 * failure (nothing to free then); NN_EINVAL for an empty ds. */
int nn_batcher_init(struct nn_batcher *b, const struct nn_dataset *ds,
                    uint64_t seed);

/* Frees the order array and zeroes the batcher. */
void nn_batcher_free(struct nn_batcher *b);

/* Fills up to batch samples: x gets batch*sample_size floats (see
 * nn_data_to_float), y the labels; either may be NULL. Returns how many
 * were filled (1..batch), or a negative code. A batch never spans two
 * epochs: the last one of an epoch may be short, and the next call
 * starts the next epoch with a fresh shuffle. */
int nn_batcher_next(struct nn_batcher *b, float *x, uint8_t *y, int batch);

/* Number of full passes finished so far: it increments right after the
 * call to nn_batcher_next that returned an epoch's last sample. */
uint64_t nn_batcher_epoch(const struct nn_batcher *b);

/* Repositions at sample pos of epoch epoch (as if that many calls had
 * been made), for resuming from a checkpoint. NN_EINVAL if pos > n. */
int nn_batcher_seek(struct nn_batcher *b, uint64_t epoch, uint32_t pos);

/* Writes into order[0..n) the permutation of epoch epoch for seed; the
 * batcher uses exactly this. Exposed for tests and tools. */
void nn_data_permutation(uint64_t seed, uint64_t epoch, uint32_t *order,
                         uint32_t n);

#endif
