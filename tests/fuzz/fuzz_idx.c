/*
 * fuzz_idx.c - libFuzzer target for the data-set loaders
 * (nn/data.c: nn_dataset_load_idx, nn_dataset_load_cifar).
 *
 * fuzz-libs: gn_nn ZLIB::ZLIB
 *
 * The loaders take paths, so the input is written to memfd files, created
 * once per process and rewritten for each input, and loaded through
 * /proc/self/fd/N (no disk, nothing to clean up). Input layout: byte 0,
 * bit 0 picks the loader (0 IDX, 1 CIFAR-10); for IDX bytes 1-2 (little
 * endian, modulo the rest's length + 1) split the rest into the image file
 * and the label file; for CIFAR the rest is one batch file. Files that
 * start with the gzip magic are inflated by the loader (zlib's gzFile).
 *
 * Oracles. Success: n >= 1, every label < classes, classes >= 10, the
 * arrays are non-NULL and owned; for a raw (not gzip) file the file length
 * is exactly header + n * sample bytes (the loaders refuse short files and
 * trailing bytes), and a sample of 1 channel (IDX) or 3x32x32 (CIFAR).
 * Failure: a negative code, a zeroed struct and a non-empty one-line
 * message that names the file.
 */
#define _GNU_SOURCE /* memfd_create */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zlib.h>

#include "base/gn_endian.h"
#include "nn/data.h"
#include "fuzz.h"

enum {
        IDX_IMAGES_HDR = 16, /* magic, n, rows, cols */
        IDX_LABELS_HDR = 8,  /* magic, n */
        CIFAR_RECORD = 1 + 3 * 32 * 32,
};

static int fz_fd[2] = {-1, -1};
static char fz_path[2][64];

static void fz_put(int i, const uint8_t *p, size_t n)
{
        if (fz_fd[i] < 0) {
                fz_fd[i] = memfd_create(i ? "fz-labels" : "fz-images", 0);
                GN_FUZZ_CHECK(fz_fd[i] >= 0);
                snprintf(fz_path[i], sizeof(fz_path[i]), "/proc/self/fd/%d",
                         fz_fd[i]);
        }
        GN_FUZZ_CHECK(ftruncate(fz_fd[i], 0) == 0);
        GN_FUZZ_CHECK(n == 0 || pwrite(fz_fd[i], p, n, 0) == (ssize_t)n);
}

static int is_gzip(const uint8_t *p, size_t n)
{
        return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

static void check_ok(const struct nn_dataset *ds)
{
        GN_FUZZ_CHECK(ds->n >= 1 && ds->owns == 1);
        GN_FUZZ_CHECK(ds->images != NULL && ds->labels != NULL);
        GN_FUZZ_CHECK(ds->classes >= 10 && ds->classes <= 256);
        for (uint32_t i = 0; i < ds->n; i++)
                GN_FUZZ_CHECK(ds->labels[i] < ds->classes);
}

static void check_fail(int rc, const struct nn_dataset *ds, const char *err)
{
        GN_FUZZ_CHECK(rc < 0);
        GN_FUZZ_CHECK(ds->n == 0 && ds->channels == 0 && ds->rows == 0 &&
                      ds->cols == 0 && ds->classes == 0 && ds->owns == 0);
        GN_FUZZ_CHECK(ds->images == NULL && ds->labels == NULL);
        GN_FUZZ_CHECK(err[0] != '\0' && strchr(err, '\n') == NULL);
        GN_FUZZ_CHECK(strstr(err, "/proc/self/fd/") != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct nn_dataset ds;
        char err[512];
        int rc;

        if (size < 3)
                return 0;
        memset(err, 0, sizeof(err));
        if (data[0] & 1) {
                const uint8_t *f = data + 1;
                size_t n = size - 1;
                const char *paths[1];

                fz_put(0, f, n);
                paths[0] = fz_path[0];
                rc = nn_dataset_load_cifar(paths, 1, &ds, err, sizeof(err));
                if (rc != 0) {
                        check_fail(rc, &ds, err);
                        return 0;
                }
                check_ok(&ds);
                GN_FUZZ_CHECK(ds.channels == 3 && ds.rows == 32 &&
                              ds.cols == 32 && ds.classes == 10);
                if (!is_gzip(f, n))
                        GN_FUZZ_CHECK((size_t)ds.n * CIFAR_RECORD == n);
        } else {
                const uint8_t *rest = data + 3;
                size_t n = size - 3;
                size_t split = (data[1] | (size_t)data[2] << 8) % (n + 1);

                fz_put(0, rest, split);
                fz_put(1, rest + split, n - split);
                rc = nn_dataset_load_idx(fz_path[0], fz_path[1], &ds, err,
                                         sizeof(err));
                if (rc != 0) {
                        check_fail(rc, &ds, err);
                        return 0;
                }
                check_ok(&ds);
                GN_FUZZ_CHECK(ds.channels == 1 && ds.rows >= 1 && ds.cols >= 1);
                if (!is_gzip(rest, split))
                        GN_FUZZ_CHECK(IDX_IMAGES_HDR +
                                          (uint64_t)ds.n * ds.rows * ds.cols ==
                                      split);
                if (!is_gzip(rest + split, n - split))
                        GN_FUZZ_CHECK(IDX_LABELS_HDR + (uint64_t)ds.n ==
                                      n - split);
        }
        nn_dataset_free(&ds);
        return 0;
}

/* gzip-compress in[0..n) into out (cap bytes); the length, or 0. */
static size_t gz(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
        z_stream z;
        size_t len = 0;

        memset(&z, 0, sizeof(z));
        if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
            Z_OK)
                return 0;
        z.next_in = (Bytef *)in;
        z.avail_in = (uInt)n;
        z.next_out = out;
        z.avail_out = (uInt)cap;
        if (deflate(&z, Z_FINISH) == Z_STREAM_END)
                len = z.total_out;
        deflateEnd(&z);
        return len;
}

/* Seeds: a tiny IDX set (3 images of 4x5), raw and gzipped, and a
 * two-record CIFAR batch, raw and gzipped. */
void gn_fuzz_seeds(gn_fuzz_add_fn add, void *ctx)
{
        static uint8_t buf[2 * CIFAR_RECORD + 64], zb[2][2 * CIFAR_RECORD];
        static uint8_t in[2 * CIFAR_RECORD + 64];
        uint8_t img[IDX_IMAGES_HDR + 60], lab[IDX_LABELS_HDR + 3];
        size_t zi, zl;

        gn_be32_put(img, 0x00000803);
        gn_be32_put(img + 4, 3);
        gn_be32_put(img + 8, 4);
        gn_be32_put(img + 12, 5);
        for (int i = 0; i < 60; i++)
                img[IDX_IMAGES_HDR + i] = (uint8_t)(i * 7);
        gn_be32_put(lab, 0x00000801);
        gn_be32_put(lab + 4, 3);
        lab[8] = 0;
        lab[9] = 9;
        lab[10] = 4;

        /* raw IDX */
        buf[0] = 0;
        buf[1] = sizeof(img) & 0xff;
        buf[2] = sizeof(img) >> 8;
        memcpy(buf + 3, img, sizeof(img));
        memcpy(buf + 3 + sizeof(img), lab, sizeof(lab));
        add(ctx, buf, 3 + sizeof(img) + sizeof(lab));

        /* gzipped IDX */
        zi = gz(img, sizeof(img), zb[0], sizeof(zb[0]));
        zl = gz(lab, sizeof(lab), zb[1], sizeof(zb[1]));
        if (zi > 0 && zl > 0 && 3 + zi + zl <= sizeof(buf)) {
                buf[1] = zi & 0xff;
                buf[2] = (uint8_t)(zi >> 8);
                memcpy(buf + 3, zb[0], zi);
                memcpy(buf + 3 + zi, zb[1], zl);
                add(ctx, buf, 3 + zi + zl);
        }

        /* CIFAR: two records, raw and gzipped */
        in[0] = 1;
        for (size_t i = 0; i < 2 * CIFAR_RECORD; i++)
                in[1 + i] = (uint8_t)(i * 31 + 5);
        in[1] = 3;
        in[1 + CIFAR_RECORD] = 9;
        add(ctx, in, 1 + 2 * CIFAR_RECORD);
        zi = gz(in + 1, 2 * CIFAR_RECORD, zb[0], sizeof(zb[0]));
        if (zi > 0) {
                buf[0] = 1;
                memcpy(buf + 1, zb[0], zi);
                add(ctx, buf, 1 + zi);
        }
}
