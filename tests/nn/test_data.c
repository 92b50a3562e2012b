/*
 * test_data.c - IDX and CIFAR-10 loaders, shards, batcher (nn/data.c).
 *
 * Every file is generated here, in a fresh mkdtemp() directory removed at
 * the end, raw and gzipped, from GN_SEED (printed; set it to replay).
 * Proves: values read back exactly; gzip is detected by magic, not name;
 * each corruption (truncation at many points, wrong magic, count
 * mismatch, missing file, absurd or over-promising header, trailing
 * bytes, corrupt gzip, bad CIFAR label) is refused with the right code
 * and a message naming the file; shards are disjoint views covering the
 * set; each batcher epoch is a permutation, epochs differ, the same seed
 * gives the same order, and seeking reproduces it.
 *
 * With --fashion it instead loads the real Fashion-MNIST (label slow):
 * GN_FASHION_DIR or /usr/share/datasets/fashion-mnist; exit 77 if absent.
 */
#include <dirent.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "test_tmpdir.h"
#include "base/gn_rng.h"
#include "test_seed.h"
#include "base/gn_endian.h"
#include "nn/data.h"

static uint64_t g_seed;
static char g_dir[64];
static char g_err[512];

static void path_of(char *buf, size_t len, const char *name)
{
        snprintf(buf, len, "%s/%s", g_dir, name);
}

/* Writes len bytes to path, gzipped if gz. */
static void put_file(const char *path, const uint8_t *buf, size_t len, int gz)
{
        if (gz) {
                gzFile f = gzopen(path, "wb");

                assert_non_null(f);
                if (len)
                        assert_int_equal(gzwrite(f, buf, (unsigned)len),
                                         (int)len);
                assert_int_equal(gzclose(f), Z_OK);
        } else {
                FILE *f = fopen(path, "wb");

                assert_non_null(f);
                assert_int_equal(fwrite(buf, 1, len, f), len);
                assert_int_equal(fclose(f), 0);
        }
}

/* An IDX image set of n samples rows x cols and its labels, in memory. */
struct idx {
        uint32_t n, rows, cols;
        uint8_t *img; /* 16 + n*rows*cols bytes, header included */
        size_t img_len;
        uint8_t *lbl; /* 8 + n bytes */
        size_t lbl_len;
};

static void idx_make(struct idx *x, uint32_t n, uint32_t rows, uint32_t cols,
                     uint64_t seed)
{
        size_t i;

        x->n = n;
        x->rows = rows;
        x->cols = cols;
        x->img_len = 16 + (size_t)n * rows * cols;
        x->lbl_len = 8 + (size_t)n;
        x->img = malloc(x->img_len);
        x->lbl = malloc(x->lbl_len);
        assert_non_null(x->img);
        assert_non_null(x->lbl);
        gn_be32_put(x->img, 0x803);
        gn_be32_put(x->img + 4, n);
        gn_be32_put(x->img + 8, rows);
        gn_be32_put(x->img + 12, cols);
        gn_be32_put(x->lbl, 0x801);
        gn_be32_put(x->lbl + 4, n);
        for (i = 16; i < x->img_len; i++)
                x->img[i] = (uint8_t)gn_splitmix64(&seed);
        for (i = 0; i < n; i++)
                x->lbl[8 + i] = (uint8_t)(gn_splitmix64(&seed) % 10);
}

static void idx_free(struct idx *x)
{
        free(x->img);
        free(x->lbl);
}

static void expect_idx(const struct nn_dataset *ds, const struct idx *x)
{
        assert_int_equal(ds->n, x->n);
        assert_int_equal(ds->channels, 1);
        assert_int_equal(ds->rows, x->rows);
        assert_int_equal(ds->cols, x->cols);
        assert_int_equal(ds->classes, 10);
        assert_int_equal(nn_dataset_sample_size(ds), (size_t)x->rows * x->cols);
        assert_memory_equal(ds->images, x->img + 16, x->img_len - 16);
        assert_memory_equal(ds->labels, x->lbl + 8, x->n);
}

/* Loading must fail with code rc and a message holding name and what. */
static void expect_refused(const char *img, const char *lbl, int rc,
                           const char *name, const char *what)
{
        struct nn_dataset ds;
        int got;

        memset(&ds, 0xa5, sizeof(ds));
        g_err[0] = '\0';
        got = nn_dataset_load_idx(img, lbl, &ds, g_err, sizeof(g_err));
        if (got != rc || strstr(g_err, name) == NULL ||
            (what && strstr(g_err, what) == NULL))
                fail_msg("want rc %d naming %s (%s), got rc %d: %s", rc, name,
                         what ? what : "-", got, g_err);
        assert_null(ds.images);
        assert_null(ds.labels);
        assert_int_equal(ds.n, 0);
        assert_null(strchr(g_err, '\n'));
}

static void test_idx_roundtrip(void **state)
{
        char img[256], lbl[256];
        struct nn_dataset ds;
        struct idx x;
        int gz;

        (void)state;
        idx_make(&x, 37, 5, 7, g_seed);
        for (gz = 0; gz < 2; gz++) {
                path_of(img, sizeof(img), gz ? "i.gz" : "i");
                path_of(lbl, sizeof(lbl), gz ? "l.gz" : "l");
                put_file(img, x.img, x.img_len, gz);
                put_file(lbl, x.lbl, x.lbl_len, gz);
                assert_int_equal(
                    nn_dataset_load_idx(img, lbl, &ds, g_err, sizeof(g_err)),
                    0);
                expect_idx(&ds, &x);
                assert_int_equal(ds.owns, 1);
                nn_dataset_free(&ds);
                assert_null(ds.images);
                unlink(img);
                unlink(lbl);
        }
        idx_free(&x);
}

/* A gzip named plain and a raw file named .gz both load: magic decides. */
static void test_idx_gzip_by_magic(void **state)
{
        char img[256], lbl[256];
        struct nn_dataset ds;
        struct idx x;

        (void)state;
        idx_make(&x, 20, 28, 28, g_seed + 1);
        path_of(img, sizeof(img), "images.raw");
        path_of(lbl, sizeof(lbl), "labels.gz");
        put_file(img, x.img, x.img_len, 1);
        put_file(lbl, x.lbl, x.lbl_len, 0);
        assert_int_equal(
            nn_dataset_load_idx(img, lbl, &ds, g_err, sizeof(g_err)), 0);
        expect_idx(&ds, &x);
        nn_dataset_free(&ds);
        unlink(img);
        unlink(lbl);
        idx_free(&x);
}

/* Truncation of the image and of the label file at many points. */
static void test_idx_truncated(void **state)
{
        char img[256], lbl[256], good_img[256], good_lbl[256];
        size_t cuts[] = {0, 1, 3, 4, 8, 15, 16, 17, 0, 0, 0};
        struct idx x;
        size_t i, nc = 8;
        int gz;

        (void)state;
        idx_make(&x, 50, 6, 6, g_seed + 2);
        cuts[nc++] = 16 + 6 * 6 * 25;
        cuts[nc++] = x.img_len - 1;
        path_of(good_img, sizeof(good_img), "gi");
        path_of(good_lbl, sizeof(good_lbl), "gl");
        put_file(good_img, x.img, x.img_len, 0);
        put_file(good_lbl, x.lbl, x.lbl_len, 0);
        for (gz = 0; gz < 2; gz++) {
                path_of(img, sizeof(img), gz ? "ti.gz" : "ti");
                path_of(lbl, sizeof(lbl), gz ? "tl.gz" : "tl");
                for (i = 0; i < nc; i++) {
                        put_file(img, x.img, cuts[i], gz);
                        expect_refused(img, good_lbl, NN_EFORMAT, img,
                                       "truncated");
                        if (cuts[i] >= 16)
                                expect_refused(img, good_lbl, NN_EFORMAT,
                                               "header says 50 images of "
                                               "6x6",
                                               NULL);
                }
                for (i = 0; i < x.lbl_len; i += 7) {
                        put_file(lbl, x.lbl, i, gz);
                        expect_refused(good_img, lbl, NN_EFORMAT, lbl,
                                       "truncated");
                }
                unlink(img);
                unlink(lbl);
        }
        /* A gzip stream cut inside its compressed bytes. */
        path_of(img, sizeof(img), "cut.gz");
        put_file(img, x.img, x.img_len, 1);
        assert_int_equal(truncate(img, 40), 0);
        expect_refused(img, good_lbl, NN_EFORMAT, img, "truncated");
        unlink(img);
        unlink(good_img);
        unlink(good_lbl);
        idx_free(&x);
}

static void test_idx_bad_headers(void **state)
{
        char img[256], lbl[256], bad[256];
        struct idx x;

        (void)state;
        idx_make(&x, 12, 4, 4, g_seed + 3);
        path_of(img, sizeof(img), "hi");
        path_of(lbl, sizeof(lbl), "hl");
        path_of(bad, sizeof(bad), "bad");
        put_file(img, x.img, x.img_len, 0);
        put_file(lbl, x.lbl, x.lbl_len, 0);

        /* Wrong magic: the two files swapped, and a random word. */
        expect_refused(lbl, img, NN_EFORMAT, lbl, "magic 0x00000801");
        gn_be32_put(x.img, 0xdeadbeef);
        put_file(bad, x.img, x.img_len, 1);
        expect_refused(bad, lbl, NN_EFORMAT, bad, "magic 0xdeadbeef");
        gn_be32_put(x.img, 0x803);
        gn_be32_put(x.lbl, 0x803);
        put_file(bad, x.lbl, x.lbl_len, 0);
        expect_refused(img, bad, NN_EFORMAT, bad, "not an IDX label file");
        gn_be32_put(x.lbl, 0x801);

        /* Mismatched counts: 11 labels for 12 images. */
        gn_be32_put(x.lbl + 4, 11);
        put_file(bad, x.lbl, x.lbl_len - 1, 0);
        expect_refused(img, bad, NN_EFORMAT, bad, "11 labels");
        expect_refused(img, bad, NN_EFORMAT, img, "12 images");
        gn_be32_put(x.lbl + 4, 12);

        /* Absurd dims: refused before any allocation. */
        gn_be32_put(x.img + 4, 0x80000000u);
        put_file(bad, x.img, x.img_len, 0);
        expect_refused(bad, lbl, NN_EFORMAT, bad, "absurd");
        gn_be32_put(x.img + 4, 12);
        gn_be32_put(x.img + 8, 65536);
        gn_be32_put(x.img + 12, 65536);
        put_file(bad, x.img, x.img_len, 0);
        expect_refused(bad, lbl, NN_EFORMAT, bad, "absurd");
        gn_be32_put(x.img + 4, 0);
        gn_be32_put(x.img + 8, 4);
        gn_be32_put(x.img + 12, 4);
        put_file(bad, x.img, 16, 0);
        expect_refused(bad, lbl, NN_EFORMAT, bad, "absurd");

        /* In bounds but promising 10^14 bytes: no huge malloc, truncated. */
        gn_be32_put(x.img + 4, 100000000);
        gn_be32_put(x.img + 8, 1000);
        gn_be32_put(x.img + 12, 1000);
        put_file(bad, x.img, x.img_len, 1);
        expect_refused(bad, lbl, NN_EFORMAT, bad,
                       "header says 100000000 images of 1000x1000, file "
                       "holds 192 bytes of pixel data");
        gn_be32_put(x.img + 4, 12);
        gn_be32_put(x.img + 8, 4);
        gn_be32_put(x.img + 12, 4);

        /* Trailing bytes after the promised data. */
        {
                uint8_t *more = calloc(1, x.img_len + 3);

                assert_non_null(more);
                memcpy(more, x.img, x.img_len);
                put_file(bad, more, x.img_len + 3, 0);
                free(more);
        }
        expect_refused(bad, lbl, NN_EFORMAT, bad, "more bytes follow");

        /* Missing files. */
        path_of(bad, sizeof(bad), "nope-images");
        expect_refused(bad, lbl, NN_EIO, bad, "cannot open");
        expect_refused(img, bad, NN_EIO, bad, "cannot open");
        unlink(img);
        unlink(lbl);
        idx_free(&x);
}

/* A flipped byte inside the deflate data: inflate or the CRC refuses. */
static void test_idx_corrupt_gzip(void **state)
{
        char img[256], lbl[256];
        uint8_t *buf;
        size_t len, at;
        struct idx x;
        FILE *f;
        int k;

        (void)state;
        idx_make(&x, 30, 8, 8, g_seed + 4);
        path_of(img, sizeof(img), "ci.gz");
        path_of(lbl, sizeof(lbl), "cl");
        put_file(lbl, x.lbl, x.lbl_len, 0);
        put_file(img, x.img, x.img_len, 1);
        f = fopen(img, "rb");
        assert_non_null(f);
        buf = malloc(1 << 16);
        assert_non_null(buf);
        len = fread(buf, 1, 1 << 16, f);
        fclose(f);
        for (k = 0; k < 8; k++) {
                uint8_t keep;

                /* Past the 10-byte gzip header, before the 8-byte trailer. */
                at = 10 + (size_t)(gn_splitmix64(&g_seed) % (len - 18));
                keep = buf[at];
                buf[at] ^= (uint8_t)(1u << (k % 8));
                put_file(img, buf, len, 0);
                buf[at] = keep;
                {
                        struct nn_dataset ds;
                        int rc = nn_dataset_load_idx(img, lbl, &ds, g_err,
                                                     sizeof(g_err));

                        if (rc >= 0 || strstr(g_err, img) == NULL)
                                fail_msg("flip at %zu: rc %d: %s", at, rc,
                                         g_err);
                }
        }
        free(buf);
        unlink(img);
        unlink(lbl);
        idx_free(&x);
}

/* n CIFAR records with labels < 10, pixels from seed. */
static uint8_t *cifar_make(uint32_t n, uint64_t seed)
{
        uint8_t *b = malloc((size_t)n * 3073);
        size_t i;

        assert_non_null(b);
        for (i = 0; i < (size_t)n * 3073; i++)
                b[i] = (uint8_t)gn_splitmix64(&seed);
        for (i = 0; i < n; i++)
                b[i * 3073] = (uint8_t)(gn_splitmix64(&seed) % 10);
        return b;
}

static void expect_cifar(const struct nn_dataset *ds, uint32_t first,
                         const uint8_t *recs, uint32_t n)
{
        uint32_t i;

        for (i = 0; i < n; i++) {
                assert_int_equal(ds->labels[first + i], recs[i * 3073]);
                assert_memory_equal(ds->images + (size_t)(first + i) * 3072,
                                    recs + i * 3073 + 1, 3072);
        }
}

static void test_cifar(void **state)
{
        char p1[256], p2[256], pt[256], sub[256];
        uint8_t *a = cifar_make(3, g_seed + 5), *b = cifar_make(4, g_seed + 6);
        const char *paths[2] = {p1, p2};
        struct nn_dataset ds;

        (void)state;
        path_of(sub, sizeof(sub), "cifar-10-batches-bin");
        assert_int_equal(mkdir(sub, 0700), 0);
        path_of(p1, sizeof(p1), "cifar-10-batches-bin/data_batch_1.bin");
        path_of(p2, sizeof(p2), "cifar-10-batches-bin/data_batch_2.bin");
        path_of(pt, sizeof(pt), "cifar-10-batches-bin/test_batch.bin");
        put_file(p1, a, 3 * 3073, 0);
        put_file(p2, b, 4 * 3073, 1);
        put_file(pt, b, 2 * 3073, 0);
        assert_int_equal(
            nn_dataset_load_cifar(paths, 2, &ds, g_err, sizeof(g_err)), 0);
        assert_int_equal(ds.n, 7);
        assert_int_equal(ds.channels, 3);
        assert_int_equal(ds.rows, 32);
        assert_int_equal(ds.cols, 32);
        assert_int_equal(ds.classes, 10);
        expect_cifar(&ds, 0, a, 3);
        expect_cifar(&ds, 3, b, 4);
        nn_dataset_free(&ds);

        /* Through the directory finder (subdirectory form). */
        assert_int_equal(
            nn_dataset_load_dir(g_dir, 1, &ds, g_err, sizeof(g_err)), 0);
        assert_int_equal(ds.n, 7);
        expect_cifar(&ds, 3, b, 4);
        nn_dataset_free(&ds);
        assert_int_equal(
            nn_dataset_load_dir(g_dir, 0, &ds, g_err, sizeof(g_err)), 0);
        assert_int_equal(ds.n, 2);
        expect_cifar(&ds, 0, b, 2);
        nn_dataset_free(&ds);

        /* A cut record, a label of 10, an empty file. */
        put_file(p2, b, 4 * 3073 - 100, 0);
        assert_int_equal(
            nn_dataset_load_cifar(paths, 2, &ds, g_err, sizeof(g_err)),
            NN_EFORMAT);
        assert_non_null(strstr(g_err, p2));
        assert_non_null(strstr(g_err, "truncated: 3 whole records"));
        assert_null(ds.images);
        b[3073] = 10;
        put_file(p2, b, 4 * 3073, 1);
        assert_int_equal(
            nn_dataset_load_cifar(paths, 2, &ds, g_err, sizeof(g_err)),
            NN_EFORMAT);
        assert_non_null(strstr(g_err, p2));
        assert_non_null(strstr(g_err, "record 1 has label 10"));
        put_file(p2, b, 0, 0);
        assert_int_equal(
            nn_dataset_load_cifar(paths, 2, &ds, g_err, sizeof(g_err)),
            NN_EFORMAT);
        assert_non_null(strstr(g_err, p2));
        unlink(p2);
        assert_int_equal(
            nn_dataset_load_cifar(paths, 2, &ds, g_err, sizeof(g_err)), NN_EIO);
        assert_non_null(strstr(g_err, p2));
        unlink(p1);
        unlink(pt);
        rmdir(sub);
        free(a);
        free(b);
}

static void test_load_dir_idx(void **state)
{
        char img[256], lbl[256], empty[256];
        struct nn_dataset ds;
        struct idx tr, te;

        (void)state;
        idx_make(&tr, 9, 28, 28, g_seed + 7);
        idx_make(&te, 4, 28, 28, g_seed + 8);
        path_of(img, sizeof(img), "train-images-idx3-ubyte.gz");
        put_file(img, tr.img, tr.img_len, 1);
        path_of(lbl, sizeof(lbl), "train-labels-idx1-ubyte.gz");
        put_file(lbl, tr.lbl, tr.lbl_len, 1);
        path_of(img, sizeof(img), "t10k-images-idx3-ubyte");
        put_file(img, te.img, te.img_len, 0);
        path_of(lbl, sizeof(lbl), "t10k-labels-idx1-ubyte");
        put_file(lbl, te.lbl, te.lbl_len, 0);
        assert_int_equal(
            nn_dataset_load_dir(g_dir, 1, &ds, g_err, sizeof(g_err)), 0);
        expect_idx(&ds, &tr);
        nn_dataset_free(&ds);
        assert_int_equal(
            nn_dataset_load_dir(g_dir, 0, &ds, g_err, sizeof(g_err)), 0);
        expect_idx(&ds, &te);
        nn_dataset_free(&ds);

        /* Labels missing: the message names the file looked for. */
        unlink(lbl);
        assert_int_equal(
            nn_dataset_load_dir(g_dir, 0, &ds, g_err, sizeof(g_err)), NN_EIO);
        assert_non_null(strstr(g_err, "t10k-labels-idx1-ubyte"));
        unlink(img);
        path_of(img, sizeof(img), "train-images-idx3-ubyte.gz");
        unlink(img);
        path_of(lbl, sizeof(lbl), "train-labels-idx1-ubyte.gz");
        unlink(lbl);

        /* Nothing there at all. */
        path_of(empty, sizeof(empty), "empty");
        assert_int_equal(mkdir(empty, 0700), 0);
        assert_int_equal(
            nn_dataset_load_dir(empty, 1, &ds, g_err, sizeof(g_err)), NN_EIO);
        assert_non_null(strstr(g_err, empty));
        assert_non_null(strstr(g_err, "no data set found"));
        rmdir(empty);
        idx_free(&tr);
        idx_free(&te);
}

/* A synthetic in-memory set whose sample i encodes i in its pixels. */
static void fake_set(struct nn_dataset *ds, uint32_t n)
{
        uint32_t i;

        memset(ds, 0, sizeof(*ds));
        ds->n = n;
        ds->channels = 1;
        ds->rows = 2;
        ds->cols = 2;
        ds->classes = 10;
        ds->owns = 1;
        ds->images = malloc((size_t)n * 4 + 1);
        ds->labels = malloc((size_t)n + 1);
        assert_non_null(ds->images);
        assert_non_null(ds->labels);
        for (i = 0; i < n; i++) {
                ds->images[4 * i] = (uint8_t)i;
                ds->images[4 * i + 1] = (uint8_t)(i >> 8);
                ds->images[4 * i + 2] = (uint8_t)(i * 7);
                ds->images[4 * i + 3] = 0x5a;
                ds->labels[i] = (uint8_t)(i % 10);
        }
}

static void test_shard(void **state)
{
        uint32_t sizes[] = {0, 1, 2, 5, 6, 7, 13, 100, 7919};
        uint32_t si, k, i;
        int count, idx;

        (void)state;
        for (si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
                struct nn_dataset all;
                uint8_t *seen;

                fake_set(&all, sizes[si]);
                seen = calloc(all.n + 1, 1);
                assert_non_null(seen);
                for (count = 1; count <= 7; count++) {
                        uint32_t lo = UINT32_MAX, hi = 0, next = 0;

                        memset(seen, 0, all.n + 1);
                        for (idx = 0; idx < count; idx++) {
                                struct nn_dataset sh;
                                size_t off;

                                assert_int_equal(
                                    nn_dataset_shard(&all, idx, count, &sh), 0);
                                assert_int_equal(sh.owns, 0);
                                off = (size_t)(sh.labels - all.labels);
                                /* Contiguous, in order, no gap. */
                                assert_int_equal(off, next);
                                assert_ptr_equal(sh.images,
                                                 all.images + off * 4);
                                for (k = 0; k < sh.n; k++) {
                                        assert_int_equal(seen[off + k], 0);
                                        seen[off + k] = 1;
                                }
                                next = (uint32_t)off + sh.n;
                                lo = sh.n < lo ? sh.n : lo;
                                hi = sh.n > hi ? sh.n : hi;
                                nn_dataset_free(&sh); /* a view: no free */
                        }
                        for (i = 0; i < all.n; i++)
                                assert_int_equal(seen[i], 1);
                        assert_int_equal(next, all.n);
                        assert_true(hi - lo <= 1);
                }
                assert_int_equal(nn_dataset_shard(&all, 3, 3, NULL), NN_EINVAL);
                {
                        struct nn_dataset sh;

                        assert_int_equal(nn_dataset_shard(&all, 3, 3, &sh),
                                         NN_EINVAL);
                        assert_int_equal(nn_dataset_shard(&all, -1, 3, &sh),
                                         NN_EINVAL);
                        assert_int_equal(nn_dataset_shard(&all, 0, 0, &sh),
                                         NN_EINVAL);
                }
                free(seen);
                nn_dataset_free(&all);
        }
}

static void test_to_float(void **state)
{
        uint8_t in[4] = {0, 255, 51, 128};
        float out[4];

        (void)state;
        nn_data_to_float(in, 4, out);
        assert_true(out[0] == 0.0f);
        assert_true(out[1] == 1.0f);
        assert_true(out[2] == 0.2f);
        assert_true(out[3] == 128.0f / 255.0f);
}

/* Decodes the sample index from a batch row of fake_set. */
static uint32_t row_index(const float *x)
{
        uint32_t a = (uint32_t)(x[0] * 255.0f + 0.5f);
        uint32_t b = (uint32_t)(x[1] * 255.0f + 0.5f);

        return a | b << 8;
}

/* Runs one epoch; order[] gets the indices seen. Returns batches. */
static int run_epoch(struct nn_batcher *b, const struct nn_dataset *ds,
                     int batch, uint32_t *order)
{
        float *x = malloc((size_t)batch * 4 * sizeof(float));
        uint8_t *y = malloc((size_t)batch);
        uint64_t e0 = nn_batcher_epoch(b);
        uint32_t got = 0;
        int k, i, nb = 0;

        assert_non_null(x);
        assert_non_null(y);
        while (got < ds->n) {
                assert_int_equal(nn_batcher_epoch(b), e0);
                k = nn_batcher_next(b, x, y, batch);
                assert_true(k >= 1 && k <= batch);
                for (i = 0; i < k; i++) {
                        uint32_t idx = row_index(x + 4 * i);

                        assert_true(idx < ds->n);
                        assert_int_equal(y[i], ds->labels[idx]);
                        assert_true(x[4 * i + 3] == 0x5a / 255.0f);
                        order[got + (uint32_t)i] = idx;
                }
                got += (uint32_t)k;
                nb++;
        }
        assert_int_equal(got, ds->n);
        assert_int_equal(nn_batcher_epoch(b), e0 + 1);
        free(x);
        free(y);
        return nb;
}

static void expect_permutation(const uint32_t *order, uint32_t n)
{
        uint8_t *seen = calloc(n, 1);
        uint32_t i;

        assert_non_null(seen);
        for (i = 0; i < n; i++) {
                assert_true(order[i] < n);
                assert_int_equal(seen[order[i]], 0);
                seen[order[i]] = 1;
        }
        free(seen);
}

static void test_batcher(void **state)
{
        const uint32_t n = 103;
        uint32_t o[4][103], again[103];
        struct nn_batcher b, c;
        struct nn_dataset ds;
        int e;

        (void)state;
        fake_set(&ds, n);
        assert_int_equal(nn_batcher_init(&b, &ds, g_seed), 0);
        assert_int_equal(nn_batcher_epoch(&b), 0);
        for (e = 0; e < 4; e++) {
                assert_int_equal(run_epoch(&b, &ds, 10, o[e]), 11);
                expect_permutation(o[e], n);
                assert_int_equal(nn_batcher_epoch(&b), (uint64_t)e + 1);
        }
        assert_memory_not_equal(o[0], o[1], sizeof(o[0]));
        assert_memory_not_equal(o[1], o[2], sizeof(o[0]));
        assert_memory_not_equal(o[0], o[3], sizeof(o[0]));

        /* Same seed, other batch size: same order. */
        assert_int_equal(nn_batcher_init(&c, &ds, g_seed), 0);
        assert_int_equal(run_epoch(&c, &ds, 7, again), 15);
        assert_memory_equal(again, o[0], sizeof(again));
        assert_int_equal(run_epoch(&c, &ds, 200, again), 1);
        assert_memory_equal(again, o[1], sizeof(again));
        nn_batcher_free(&c);

        /* Another seed: another order. */
        assert_int_equal(nn_batcher_init(&c, &ds, g_seed + 1), 0);
        run_epoch(&c, &ds, 10, again);
        assert_memory_not_equal(again, o[0], sizeof(again));

        /* Seek to epoch 2, sample 0, and to the end of epoch 1. */
        assert_int_equal(nn_batcher_seek(&c, 99, n + 1), NN_EINVAL);
        nn_batcher_free(&c);
        assert_int_equal(nn_batcher_init(&c, &ds, g_seed), 0);
        assert_int_equal(nn_batcher_seek(&c, 2, 0), 0);
        assert_int_equal(nn_batcher_epoch(&c), 2);
        run_epoch(&c, &ds, 10, again);
        assert_memory_equal(again, o[2], sizeof(again));
        assert_int_equal(nn_batcher_seek(&c, 1, n), 0);
        assert_int_equal(nn_batcher_epoch(&c), 2);
        run_epoch(&c, &ds, 10, again);
        assert_memory_equal(again, o[2], sizeof(again));

        /* Labels only, mid-epoch seek. */
        {
                uint8_t y[5];

                assert_int_equal(nn_batcher_seek(&c, 3, 50), 0);
                assert_int_equal(nn_batcher_next(&c, NULL, y, 5), 5);
                for (e = 0; e < 5; e++)
                        assert_int_equal(y[e], ds.labels[o[3][50 + e]]);
                assert_int_equal(nn_batcher_next(&c, NULL, NULL, 0), NN_EINVAL);
        }
        nn_batcher_free(&c);
        nn_batcher_free(&b);
        {
                struct nn_dataset empty = {0};

                assert_int_equal(nn_batcher_init(&b, &empty, 1), NN_EINVAL);
        }
        nn_dataset_free(&ds);
}

/* The order is pinned (an independent Python model of splitmix64 +
 * Fisher-Yates gives the same): a change would break resume across
 * versions and agreement across machines. */
static void test_permutation_pinned(void **state)
{
        const uint32_t want[10] = {9, 4, 2, 8, 1, 3, 0, 6, 5, 7};
        uint32_t got[10];

        (void)state;
        nn_data_permutation(42, 0, got, 10);
        if (memcmp(got, want, sizeof(want)) != 0)
                fail_msg("seed 42 epoch 0: %u %u %u %u %u %u %u %u %u %u",
                         got[0], got[1], got[2], got[3], got[4], got[5], got[6],
                         got[7], got[8], got[9]);
}

/* All 24 orders of 4 items come up about equally often (each within
 * 1000 +- 200 of 24000 epochs, over 6 standard deviations). */
static void test_permutation_uniform(void **state)
{
        unsigned count[256] = {0};
        uint32_t o[4];
        unsigned e, k, seen = 0;

        (void)state;
        for (e = 0; e < 24000; e++) {
                nn_data_permutation(g_seed, e, o, 4);
                count[o[0] | o[1] << 2 | o[2] << 4 | o[3] << 6]++;
        }
        for (k = 0; k < 256; k++) {
                if (count[k] == 0)
                        continue;
                seen++;
                if (count[k] < 800 || count[k] > 1200)
                        fail_msg("order %u came %u times of 24000", k,
                                 count[k]);
        }
        assert_int_equal(seen, 24);
}

static void count_classes(const struct nn_dataset *ds, unsigned *per)
{
        uint32_t i;

        memset(per, 0, 10 * sizeof(*per));
        for (i = 0; i < ds->n; i++) {
                assert_true(ds->labels[i] < 10);
                per[ds->labels[i]]++;
        }
}

static const char *fashion_dir(void)
{
        const char *d = getenv("GN_FASHION_DIR");

        return d ? d : "/usr/share/datasets/fashion-mnist";
}

static void test_fashion(void **state)
{
        struct nn_dataset tr, te, sh;
        struct nn_batcher b;
        unsigned per[10], c;
        float *x;
        uint8_t y[256];
        uint64_t sum = 0;
        size_t i;
        int k;

        (void)state;
        if (nn_dataset_load_dir(fashion_dir(), 1, &tr, g_err, sizeof(g_err)) !=
            0)
                fail_msg("%s", g_err);
        assert_int_equal(tr.n, 60000);
        assert_int_equal(tr.channels, 1);
        assert_int_equal(tr.rows, 28);
        assert_int_equal(tr.cols, 28);
        assert_int_equal(tr.classes, 10);
        count_classes(&tr, per);
        for (c = 0; c < 10; c++)
                assert_int_equal(per[c], 6000);
        if (nn_dataset_load_dir(fashion_dir(), 0, &te, g_err, sizeof(g_err)) !=
            0)
                fail_msg("%s", g_err);
        assert_int_equal(te.n, 10000);
        assert_int_equal(te.rows, 28);
        assert_int_equal(te.cols, 28);
        count_classes(&te, per);
        for (c = 0; c < 10; c++)
                assert_int_equal(per[c], 1000);
        /* Real images: neither blank nor saturated on average. */
        for (i = 0; i < (size_t)tr.n * 784; i++)
                sum += tr.images[i];
        assert_true(sum / ((uint64_t)tr.n * 784) > 30);
        assert_true(sum / ((uint64_t)tr.n * 784) < 120);

        /* Node 2 of 7 walks its shard once. */
        assert_int_equal(nn_dataset_shard(&tr, 2, 7, &sh), 0);
        assert_int_equal(sh.n, 8572);
        x = malloc(256 * 784 * sizeof(float));
        assert_non_null(x);
        assert_int_equal(nn_batcher_init(&b, &sh, g_seed), 0);
        c = 0;
        while (nn_batcher_epoch(&b) == 0) {
                k = nn_batcher_next(&b, x, y, 256);
                assert_true(k > 0);
                c += (unsigned)k;
                for (i = 0; i < (size_t)k * 784; i++)
                        assert_true(x[i] >= 0.0f && x[i] <= 1.0f);
        }
        assert_int_equal(c, 8572);
        nn_batcher_free(&b);
        free(x);
        nn_dataset_free(&sh);
        nn_dataset_free(&te);
        nn_dataset_free(&tr);
}

int main(int argc, char **argv)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_idx_roundtrip),
            cmocka_unit_test(test_idx_gzip_by_magic),
            cmocka_unit_test(test_idx_truncated),
            cmocka_unit_test(test_idx_bad_headers),
            cmocka_unit_test(test_idx_corrupt_gzip),
            cmocka_unit_test(test_cifar),
            cmocka_unit_test(test_load_dir_idx),
            cmocka_unit_test(test_shard),
            cmocka_unit_test(test_to_float),
            cmocka_unit_test(test_batcher),
            cmocka_unit_test(test_permutation_pinned),
            cmocka_unit_test(test_permutation_uniform),
        };
        const struct CMUnitTest slow[] = {
            cmocka_unit_test(test_fashion),
        };
        int rc;

        g_seed = gn_test_seed("test_data", (uint64_t)time(NULL) ^ getpid());
        if (argc > 1 && strcmp(argv[1], "--fashion") == 0) {
                if (access(fashion_dir(), R_OK) != 0) {
                        printf("test_data: skipped: %s missing (install "
                               "dataset-fashion-mnist or set "
                               "GN_FASHION_DIR)\n",
                               fashion_dir());
                        return 77;
                }
                return cmocka_run_group_tests_name("data_fashion", slow, NULL,
                                                   NULL);
        }
        if (gn_test_tmpdir(g_dir, sizeof(g_dir), "data") != 0) {
                perror("mkdtemp");
                return 1;
        }
        rc = cmocka_run_group_tests_name("data", tests, NULL, NULL);
        gn_test_rmtree(g_dir);
        return rc;
}
