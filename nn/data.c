/*
 * data.c - IDX and CIFAR-10 loaders, shards as views, seeded batches.
 *
 * Every file goes through zlib's gzFile, which reads gzip streams and,
 * transparently, raw files: the gzip magic decides, never the name. A
 * header's promise is checked against bounds before anything is
 * allocated, and the pixel buffer then grows with the bytes that really
 * arrive (doubling from NN_DATA_READ_CHUNK up to the promise), so a lying
 * header costs at most twice the file's real size. Each refusal writes
 * one line naming the file. Randomness: splitmix64 from (seed, epoch)
 * only, integer arithmetic only, so every machine draws the same order.
 */
#include "nn/data.h"
#include "base/gn_endian.h"
#include "base/gn_errbuf.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

enum {
        /* First allocation for file bodies; big enough that MNIST needs
         * two doublings, small enough that a lying header is cheap. */
        NN_DATA_READ_CHUNK = 16 << 20,
        /* zlib's input buffer: fewer read() calls than its 8 KiB
         * default. Measured on x86 here: no difference (inflate
         * dominates, ~0.2 s for Fashion-MNIST train); kept for slow
         * SD-card reads on Pi-class boards, where it is unmeasured. */
        NN_DATA_GZ_BUFFER = 256 << 10,
        /* ... but for reading a header alone (nn_dataset_probe_dir, before
         * the join): zlib fills its output, twice the input buffer, at
         * the first read, so 256 KiB inflated 512 KiB (~5 ms of CPU at
         * lab speed, ~80 ms at a Pi's quota) for 16 bytes. zlib's
         * default. */
        NN_DATA_GZ_HEAD_BUFFER = 8 << 10,
        NN_DATA_IDX_IMAGES = 0x00000803, /* u8, 3 dims */
        NN_DATA_IDX_LABELS = 0x00000801, /* u8, 1 dim */
        NN_DATA_CIFAR_SIDE = 32,
        NN_DATA_CIFAR_CHANNELS = 3,
        NN_DATA_CIFAR_RECORD = 1 + 3 * 32 * 32,
        NN_DATA_CLASSES = 10, /* MNIST, Fashion-MNIST and CIFAR-10 */
};

size_t nn_dataset_sample_size(const struct nn_dataset *ds)
{
        return (size_t)ds->channels * ds->rows * ds->cols;
}

/* Reads up to n bytes; returns the count read (short only at end of
 * data) or -1 on a gzip/read error. */
static long long gz_read_full(gzFile f, void *buf, size_t n)
{
        size_t got = 0;

        while (got < n) {
                size_t want = n - got;
                int r;

                if (want > (1u << 30))
                        want = 1u << 30;
                r = gzread(f, (uint8_t *)buf + got, (unsigned)want);
                if (r < 0)
                        return -1;
                if (r == 0)
                        break;
                got += (size_t)r;
        }
        return (long long)got;
}

/* Why the stream stopped: a zlib message or "" for a plain end. */
static const char *gz_why(gzFile f)
{
        int errnum = Z_OK;
        const char *msg = gzerror(f, &errnum);

        if (errnum == Z_OK)
                return "";
        if (errnum == Z_ERRNO)
                return strerror(errno);
        return msg;
}

static int gz_open(const char *path, unsigned buffer, gzFile *f, char *err,
                   size_t errlen)
{
        errno = 0;
        *f = gzopen(path, "rb");
        if (*f == NULL) {
                gn_seterr(err, errlen, "%s: cannot open: %s", path,
                          errno ? strerror(errno) : "out of memory");
                return errno ? NN_EIO : NN_ENOMEM;
        }
        gzbuffer(*f, buffer);
        return 0;
}

/* Reads exactly want body bytes into a fresh buffer grown as they
 * arrive. Returns 0; NN_EFORMAT with *got < want if the data ends
 * early, or with *got == want and *extra set if more bytes follow;
 * NN_EIO on a read or gzip error (*got = bytes before it). */
static int read_body(gzFile f, size_t want, uint8_t **out, size_t *got,
                     int *extra)
{
        size_t cap = want < NN_DATA_READ_CHUNK ? want : NN_DATA_READ_CHUNK;
        uint8_t *buf = malloc(cap ? cap : 1), *nb;
        uint8_t probe;
        long long r;
        int rc = 0;

        *got = 0;
        *extra = 0;
        if (buf == NULL)
                return NN_ENOMEM;
        for (;;) {
                r = gz_read_full(f, buf + *got, cap - *got);
                if (r < 0) {
                        rc = NN_EIO;
                        goto out;
                }
                *got += (size_t)r;
                if (*got < cap) {
                        rc = NN_EFORMAT;
                        goto out;
                }
                if (cap == want)
                        break;
                cap = cap > want / 2 ? want : cap * 2;
                nb = realloc(buf, cap);
                if (nb == NULL) {
                        rc = NN_ENOMEM;
                        goto out;
                }
                buf = nb;
        }
        r = gz_read_full(f, &probe, 1);
        if (r < 0) {
                rc = NN_EIO;
        } else if (r > 0) {
                *extra = 1;
                rc = NN_EFORMAT;
        }
out:
        if (rc != 0) {
                free(buf);
                buf = NULL;
        }
        *out = buf;
        return rc;
}

/* Open an IDX file and read and check its fixed header (hlen bytes, the
 * first four the magic). On success *f is open; on error it is closed and
 * err names the file. */
static int idx_open(const char *path, uint8_t *h, size_t hlen, uint32_t magic,
                    const char *what, unsigned buffer, gzFile *f, char *err,
                    size_t errlen)
{
        long long r;
        int rc;

        rc = gz_open(path, buffer, f, err, errlen);
        if (rc != 0)
                return rc;
        r = gz_read_full(*f, h, hlen);
        if (r < 0) {
                gn_seterr(err, errlen, "%s: read error: %s", path, gz_why(*f));
                rc = NN_EIO;
        } else if (r < (long long)hlen) {
                gn_seterr(err, errlen,
                          "%s: truncated: %lld of %zu IDX header bytes%s%s",
                          path, r, hlen, *gz_why(*f) ? ": " : "", gz_why(*f));
                rc = NN_EFORMAT;
        } else if (gn_be32_get(h) != magic) {
                gn_seterr(err, errlen,
                          "%s: not an IDX %s file: magic 0x%08x, want 0x%08x",
                          path, what, gn_be32_get(h), magic);
                rc = NN_EFORMAT;
        }
        if (rc != 0) {
                gzclose(*f);
                *f = NULL;
        }
        return rc;
}

/* Opens an IDX image file (zlib's input buffer of `buffer` bytes) and
 * takes n, rows, cols and channels from its 16-byte header, within the
 * bounds; on success *f is open at the first pixel, on error it is closed
 * and err names the file. */
static int idx_images_head(const char *path, unsigned buffer,
                           struct nn_dataset *ds, gzFile *f, char *err,
                           size_t errlen)
{
        uint8_t h[16];
        int rc;

        rc = idx_open(path, h, sizeof(h), NN_DATA_IDX_IMAGES, "image", buffer,
                      f, err, errlen);
        if (rc != 0)
                return rc;
        ds->n = gn_be32_get(h + 4);
        ds->rows = gn_be32_get(h + 8);
        ds->cols = gn_be32_get(h + 12);
        ds->channels = 1;
        if (ds->n == 0 || ds->n > NN_DATA_MAX_N || ds->rows == 0 ||
            ds->cols == 0 ||
            (uint64_t)ds->rows * ds->cols > NN_DATA_MAX_SAMPLE_BYTES) {
                gn_seterr(
                    err, errlen,
                    "%s: absurd header: %u images of %ux%u (limits: 1..%d "
                    "images, rows*cols <= %d)",
                    path, ds->n, ds->rows, ds->cols, NN_DATA_MAX_N,
                    NN_DATA_MAX_SAMPLE_BYTES);
                gzclose(*f);
                *f = NULL;
                return NN_EFORMAT;
        }
        return 0;
}

static int idx_images(const char *path, struct nn_dataset *ds, char *err,
                      size_t errlen)
{
        gzFile f = NULL;
        size_t want, got;
        int rc, extra;

        rc = idx_images_head(path, NN_DATA_GZ_BUFFER, ds, &f, err, errlen);
        if (rc != 0)
                return rc;
        want = (size_t)ds->n * ds->rows * ds->cols;
        rc = read_body(f, want, &ds->images, &got, &extra);
        if (rc == NN_EFORMAT && extra)
                gn_seterr(err, errlen,
                          "%s: header says %u images of %ux%u, but more bytes "
                          "follow them",
                          path, ds->n, ds->rows, ds->cols);
        else if (rc == NN_EFORMAT)
                gn_seterr(err, errlen,
                          "%s: truncated: header says %u images of %ux%u, file "
                          "holds %zu bytes of pixel data%s%s",
                          path, ds->n, ds->rows, ds->cols, got,
                          *gz_why(f) ? ": " : "", gz_why(f));
        else if (rc == NN_EIO)
                gn_seterr(err, errlen,
                          "%s: read error after %zu bytes of pixel "
                          "data: %s",
                          path, got, gz_why(f));
        else if (rc == NN_ENOMEM)
                gn_seterr(err, errlen, "%s: out of memory for %zu bytes", path,
                          want);
        gzclose(f);
        return rc;
}

static int idx_labels(const char *path, const char *images_path,
                      struct nn_dataset *ds, char *err, size_t errlen)
{
        uint8_t h[8];
        gzFile f = NULL;
        uint32_t n;
        size_t got;
        int rc, extra;

        rc = idx_open(path, h, sizeof(h), NN_DATA_IDX_LABELS, "label",
                      NN_DATA_GZ_BUFFER, &f, err, errlen);
        if (rc != 0)
                return rc;
        n = gn_be32_get(h + 4);
        if (n != ds->n) {
                gn_seterr(err, errlen, "%s: %u labels, but %s holds %u images",
                          path, n, images_path, ds->n);
                rc = NN_EFORMAT;
                goto out;
        }
        rc = read_body(f, n, &ds->labels, &got, &extra);
        if (rc == NN_EFORMAT && extra)
                gn_seterr(err, errlen,
                          "%s: header says %u labels, but more bytes follow",
                          path, n);
        else if (rc == NN_EFORMAT)
                gn_seterr(err, errlen,
                          "%s: truncated: header says %u labels, file holds %zu"
                          "%s%s",
                          path, n, got, *gz_why(f) ? ": " : "", gz_why(f));
        else if (rc == NN_EIO)
                gn_seterr(err, errlen, "%s: read error after %zu labels: %s",
                          path, got, gz_why(f));
        else if (rc == NN_ENOMEM)
                gn_seterr(err, errlen, "%s: out of memory", path);
out:
        gzclose(f);
        return rc;
}

/* Sets ds->classes: 10 (the known sets), or max label + 1 for a wider
 * IDX set such as EMNIST, so a model can be sized from it. */
static void set_classes(struct nn_dataset *ds)
{
        uint32_t i, max = 0;

        for (i = 0; i < ds->n; i++)
                if (ds->labels[i] > max)
                        max = ds->labels[i];
        ds->classes = max + 1 > NN_DATA_CLASSES ? max + 1 : NN_DATA_CLASSES;
}

int nn_dataset_load_idx(const char *images_path, const char *labels_path,
                        struct nn_dataset *out, char *err, size_t errlen)
{
        int rc;

        memset(out, 0, sizeof(*out));
        if (images_path == NULL || labels_path == NULL) {
                gn_seterr(err, errlen, "nn_dataset_load_idx: no path given");
                return NN_EINVAL;
        }
        out->owns = 1;
        rc = idx_images(images_path, out, err, errlen);
        if (rc == 0)
                rc = idx_labels(labels_path, images_path, out, err, errlen);
        if (rc == 0)
                set_classes(out);
        else
                nn_dataset_free(out);
        return rc;
}

/* Appends one CIFAR-10 batch file to ds, growing its arrays. */
static int cifar_file(const char *path, struct nn_dataset *ds, size_t *cap,
                      char *err, size_t errlen)
{
        uint8_t rec[NN_DATA_CIFAR_RECORD];
        const size_t px = NN_DATA_CIFAR_RECORD - 1;
        uint32_t start = ds->n;
        gzFile f = NULL;
        long long r;
        int rc;

        rc = gz_open(path, NN_DATA_GZ_BUFFER, &f, err, errlen);
        if (rc != 0)
                return rc;
        for (;;) {
                r = gz_read_full(f, rec, sizeof(rec));
                if (r < 0) {
                        gn_seterr(err, errlen,
                                  "%s: read error after %u records: %s", path,
                                  ds->n - start, gz_why(f));
                        rc = NN_EIO;
                        goto out;
                }
                if (r == 0)
                        break;
                if (r < (long long)sizeof(rec)) {
                        gn_seterr(err, errlen,
                                  "%s: truncated: %u whole records of %d bytes "
                                  "and %lld bytes of another%s%s",
                                  path, ds->n - start, NN_DATA_CIFAR_RECORD, r,
                                  *gz_why(f) ? ": " : "", gz_why(f));
                        rc = NN_EFORMAT;
                        goto out;
                }
                if (rec[0] >= NN_DATA_CLASSES) {
                        gn_seterr(err, errlen,
                                  "%s: record %u has label %u, CIFAR-10 has %d "
                                  "classes",
                                  path, ds->n - start, rec[0], NN_DATA_CLASSES);
                        rc = NN_EFORMAT;
                        goto out;
                }
                if (ds->n >= NN_DATA_MAX_N) {
                        gn_seterr(err, errlen, "%s: more than %d records", path,
                                  NN_DATA_MAX_N);
                        rc = NN_EFORMAT;
                        goto out;
                }
                if (ds->n == *cap) {
                        size_t nc = *cap ? *cap * 2 : 1024;
                        uint8_t *im = realloc(ds->images, nc * px);
                        uint8_t *lb;

                        if (im != NULL)
                                ds->images = im;
                        lb = im ? realloc(ds->labels, nc) : NULL;
                        if (lb == NULL) {
                                gn_seterr(err, errlen, "%s: out of memory",
                                          path);
                                rc = NN_ENOMEM;
                                goto out;
                        }
                        ds->labels = lb;
                        *cap = nc;
                }
                ds->labels[ds->n] = rec[0];
                memcpy(ds->images + (size_t)ds->n * px, rec + 1, px);
                ds->n++;
        }
        if (ds->n == start) {
                gn_seterr(err, errlen, "%s: holds no CIFAR-10 records%s%s",
                          path, *gz_why(f) ? ": " : "", gz_why(f));
                rc = NN_EFORMAT;
        }
out:
        gzclose(f);
        return rc;
}

int nn_dataset_load_cifar(const char *const *paths, int npaths,
                          struct nn_dataset *out, char *err, size_t errlen)
{
        size_t cap = 0;
        int i, rc = 0;

        memset(out, 0, sizeof(*out));
        if (paths == NULL || npaths <= 0) {
                gn_seterr(err, errlen, "nn_dataset_load_cifar: no files given");
                return NN_EINVAL;
        }
        out->owns = 1;
        out->channels = NN_DATA_CIFAR_CHANNELS;
        out->rows = NN_DATA_CIFAR_SIDE;
        out->cols = NN_DATA_CIFAR_SIDE;
        out->classes = NN_DATA_CLASSES;
        for (i = 0; i < npaths && rc == 0; i++)
                rc = cifar_file(paths[i], out, &cap, err, errlen);
        if (rc != 0)
                nn_dataset_free(out);
        return rc;
}

static int exists(const char *path)
{
        return access(path, F_OK) == 0;
}

/* Writes dir/name into buf; 0, or NN_EINVAL if it does not fit. */
static int join(char *buf, size_t len, const char *dir, const char *name)
{
        int n = snprintf(buf, len, "%s/%s", dir, name);

        return n < 0 || (size_t)n >= len ? NN_EINVAL : 0;
}

/* Finds dir/stem or dir/stem.gz; 1 if found (path in buf). */
static int find_idx(char *buf, size_t len, const char *dir, const char *stem)
{
        char name[64];

        snprintf(name, sizeof(name), "%s.gz", stem);
        if (join(buf, len, dir, name) == 0 && exists(buf))
                return 1;
        return join(buf, len, dir, stem) == 0 && exists(buf);
}

/* The CIFAR-10 batch files of dir for the training (train) or test
 * part, in order; their count (0: none here). */
static int cifar_paths(const char *dir, int train, char paths[5][PATH_MAX])
{
        char name[32];
        int i, n = 0;

        for (i = 1; i <= (train ? 5 : 1); i++) {
                if (train)
                        snprintf(name, sizeof(name), "data_batch_%d.bin", i);
                else
                        snprintf(name, sizeof(name), "test_batch.bin");
                if (join(paths[n], PATH_MAX, dir, name) == 0 &&
                    exists(paths[n]))
                        n++;
        }
        return n;
}

/* Where a known data set of dir is, as nn_dataset_load_dir looks for it:
 * IDX (1: img and lbl set), CIFAR-10 (2: cdir set to the directory that
 * holds the batches), or a negative code with err set. */
static int locate_dir(const char *dir, int train, char *img, char *lbl,
                      char *cdir, char *err, size_t errlen)
{
        const char *pre = train ? "train" : "t10k";
        char stem[64], paths[5][PATH_MAX];

        if (dir == NULL) {
                gn_seterr(err, errlen, "nn_dataset_load_dir: no directory");
                return NN_EINVAL;
        }
        snprintf(stem, sizeof(stem), "%s-images-idx3-ubyte", pre);
        if (find_idx(img, PATH_MAX, dir, stem)) {
                snprintf(stem, sizeof(stem), "%s-labels-idx1-ubyte", pre);
                if (find_idx(lbl, PATH_MAX, dir, stem))
                        return 1;
                gn_seterr(err, errlen,
                          "%s/%s[.gz]: cannot open: missing (images are in "
                          "%s)",
                          dir, stem, img);
                return NN_EIO;
        }
        snprintf(cdir, PATH_MAX, "%s", dir);
        if (cifar_paths(cdir, train, paths) > 0)
                return 2;
        if (join(cdir, PATH_MAX, dir, "cifar-10-batches-bin") == 0 &&
            cifar_paths(cdir, train, paths) > 0)
                return 2;
        gn_seterr(err, errlen,
                  "%s: no data set found (looked for %s-images-idx3-ubyte[.gz] "
                  "and %s)",
                  dir, pre, train ? "data_batch_N.bin" : "test_batch.bin");
        return NN_EIO;
}

int nn_dataset_load_dir(const char *dir, int train, struct nn_dataset *out,
                        char *err, size_t errlen)
{
        char img[PATH_MAX], lbl[PATH_MAX], cdir[PATH_MAX], paths[5][PATH_MAX];
        const char *ptrs[5];
        int rc, n;

        memset(out, 0, sizeof(*out));
        rc = locate_dir(dir, train, img, lbl, cdir, err, errlen);
        if (rc == 1)
                return nn_dataset_load_idx(img, lbl, out, err, errlen);
        if (rc < 0)
                return rc;
        n = cifar_paths(cdir, train, paths);
        for (int i = 0; i < n; i++)
                ptrs[i] = paths[i];
        return nn_dataset_load_cifar(ptrs, n, out, err, errlen);
}

int nn_dataset_probe_dir(const char *dir, int train, struct nn_dataset *out,
                         char *err, size_t errlen)
{
        char img[PATH_MAX], lbl[PATH_MAX], cdir[PATH_MAX];
        gzFile f = NULL;
        int rc;

        memset(out, 0, sizeof(*out));
        rc = locate_dir(dir, train, img, lbl, cdir, err, errlen);
        if (rc == 1) {
                rc = idx_images_head(img, NN_DATA_GZ_HEAD_BUFFER, out, &f, err,
                                     errlen);
                if (rc == 0)
                        gzclose(f);
        } else if (rc == 2) {
                out->channels = NN_DATA_CIFAR_CHANNELS;
                out->rows = out->cols = NN_DATA_CIFAR_SIDE;
                rc = 0;
        }
        if (rc == 0)
                out->classes = NN_DATA_CLASSES;
        else
                memset(out, 0, sizeof(*out));
        return rc;
}

void nn_dataset_free(struct nn_dataset *ds)
{
        if (ds == NULL)
                return;
        if (ds->owns) {
                free(ds->images);
                free(ds->labels);
        }
        memset(ds, 0, sizeof(*ds));
}

int nn_dataset_shard(const struct nn_dataset *all, int index, int count,
                     struct nn_dataset *out)
{
        uint64_t lo, hi;

        if (all == NULL || out == NULL || count <= 0 || index < 0 ||
            index >= count)
                return NN_EINVAL;
        lo = (uint64_t)index * all->n / (uint64_t)count;
        hi = (uint64_t)(index + 1) * all->n / (uint64_t)count;
        *out = *all;
        out->owns = 0;
        out->n = (uint32_t)(hi - lo);
        out->images =
            all->images ? all->images + lo * nn_dataset_sample_size(all) : NULL;
        out->labels = all->labels ? all->labels + lo : NULL;
        return 0;
}

void nn_data_to_float(const uint8_t *in, size_t n, float *out)
{
        size_t i;

        for (i = 0; i < n; i++)
                out[i] = (float)in[i] / 255.0f;
}

static uint64_t splitmix64(uint64_t *s)
{
        uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
}

/* Uniform in [0, bound), bound >= 1, without modulo bias. */
static uint64_t uniform(uint64_t *s, uint64_t bound)
{
        uint64_t threshold = (0 - bound) % bound, r;

        do
                r = splitmix64(s);
        while (r < threshold);
        return r % bound;
}

void nn_data_permutation(uint64_t seed, uint64_t epoch, uint32_t *order,
                         uint32_t n)
{
        /* Mix the epoch in through one splitmix64 step of its own so
         * neighbouring (seed, epoch) pairs start far apart. */
        uint64_t e = epoch, s;
        uint32_t i, j, t;

        s = seed ^ splitmix64(&e);
        for (i = 0; i < n; i++)
                order[i] = i;
        for (i = n; i > 1; i--) {
                j = (uint32_t)uniform(&s, i);
                t = order[i - 1];
                order[i - 1] = order[j];
                order[j] = t;
        }
}

int nn_batcher_init(struct nn_batcher *b, const struct nn_dataset *ds,
                    uint64_t seed)
{
        memset(b, 0, sizeof(*b));
        if (ds == NULL || ds->n == 0 || ds->images == NULL ||
            ds->labels == NULL)
                return NN_EINVAL;
        b->order = malloc((size_t)ds->n * sizeof(*b->order));
        if (b->order == NULL)
                return NN_ENOMEM;
        b->ds = ds;
        b->seed = seed;
        nn_data_permutation(seed, 0, b->order, ds->n);
        return 0;
}

void nn_batcher_free(struct nn_batcher *b)
{
        if (b == NULL)
                return;
        free(b->order);
        memset(b, 0, sizeof(*b));
}

int nn_batcher_next(struct nn_batcher *b, float *x, uint8_t *y, int batch)
{
        const struct nn_dataset *ds = b->ds;
        size_t ss;
        uint32_t k, i;

        if (ds == NULL || b->order == NULL || batch <= 0)
                return NN_EINVAL;
        if (b->pos == ds->n) {
                b->epoch++;
                nn_data_permutation(b->seed, b->epoch, b->order, ds->n);
                b->pos = 0;
        }
        ss = nn_dataset_sample_size(ds);
        k = ds->n - b->pos;
        if ((uint32_t)batch < k)
                k = (uint32_t)batch;
        for (i = 0; i < k; i++) {
                uint32_t idx = b->order[b->pos + i];

                if (x != NULL)
                        nn_data_to_float(ds->images + (size_t)idx * ss, ss,
                                         x + (size_t)i * ss);
                if (y != NULL)
                        y[i] = ds->labels[idx];
        }
        b->pos += k;
        if (b->pos == ds->n)
                b->completed = b->epoch + 1;
        return (int)k;
}

uint64_t nn_batcher_epoch(const struct nn_batcher *b)
{
        return b->completed;
}

int nn_batcher_seek(struct nn_batcher *b, uint64_t epoch, uint32_t pos)
{
        if (b->ds == NULL || b->order == NULL || pos > b->ds->n)
                return NN_EINVAL;
        b->epoch = epoch;
        b->pos = pos;
        b->completed = pos == b->ds->n ? epoch + 1 : epoch;
        nn_data_permutation(b->seed, epoch, b->order, b->ds->n);
        return 0;
}
