/*
 * npz.c - the .npz writer of npz.h: .npy version 1.0 entries in a stored
 * (method 0) zip archive.
 *
 * An .npy file is the magic "\x93NUMPY", version 1.0, a 2-byte header
 * length and a Python dict literal ({'descr': '<f4', 'fortran_order':
 * False, 'shape': (3, 4), }) padded with spaces and a newline so the data
 * starts on a 64-byte boundary, then the raw little-endian values. Each
 * entry is built in memory (the largest is one layer's weights), its
 * CRC-32 taken, and written after its local header; the central directory
 * repeats the headers at close. Dates are 1980-01-01 (DOS time 0), so
 * two exports of one checkpoint are byte-identical.
 */
#include "npz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "base/gn_endian.h"

enum {
        ZIP_LOCAL = 0x04034b50,
        ZIP_CENTRAL = 0x02014b50,
        ZIP_END = 0x06054b50,
        ZIP_VERSION = 20, /* 2.0: plain stored files */
        NPY_ALIGN = 64,
};

static int put(struct npz *z, const void *buf, size_t len)
{
        if (len && fwrite(buf, 1, len, z->f) != len)
                return errno ? -errno : -EIO;
        z->pos += len;
        return 0;
}

int npz_open(struct npz *z, const char *path)
{
        int n;

        memset(z, 0, sizeof(*z));
        n = snprintf(z->path, sizeof(z->path), "%s", path);
        if (n < 0 || (size_t)n >= sizeof(z->path))
                return -ENAMETOOLONG;
        snprintf(z->tmp, sizeof(z->tmp), "%s.tmp.%ld", path, (long)getpid());
        z->f = fopen(z->tmp, "wb");
        return z->f ? 0 : -errno;
}

void npz_abort(struct npz *z)
{
        if (z->f) {
                fclose(z->f);
                unlink(z->tmp);
        }
        z->f = NULL;
}

/* Builds the .npy header for descr and shape into h (at least 256
 * bytes); returns its length, a multiple of NPY_ALIGN. */
static size_t npy_header(char *h, const char *descr, const size_t *shape,
                         int ndim)
{
        char dims[128] = "";
        size_t len, pos = 0;

        for (int i = 0; i < ndim; i++)
                pos += (size_t)snprintf(
                    dims + pos, sizeof(dims) - pos, "%zu%s", shape[i],
                    ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
        len = 10 + (size_t)snprintf(h + 10, 200,
                                    "{'descr': '%s', 'fortran_order': False, "
                                    "'shape': (%s), }",
                                    descr, dims);
        while ((len + 1) % NPY_ALIGN)
                h[len++] = ' ';
        h[len++] = '\n';
        memcpy(h, "\x93NUMPY\x01\x00", 8);
        gn_le16_put((uint8_t *)h + 8, (uint16_t)(len - 10));
        return len;
}

/* Writes one entry: local header, then body (the whole .npy file). */
static int add_entry(struct npz *z, const char *name, const uint8_t *body,
                     size_t len)
{
        uint8_t h[30] = {0};
        size_t nl;
        int rc;

        if (!z->f || z->n >= NPZ_ENTRIES_MAX ||
            strlen(name) + 4 >= NPZ_NAME_MAX)
                return -EINVAL;
        nl = (size_t)snprintf(z->name[z->n], NPZ_NAME_MAX, "%s.npy", name);
        for (uint32_t i = 0; i < z->n; i++)
                if (strcmp(z->name[i], z->name[z->n]) == 0)
                        return -EINVAL;
        if (z->pos + 30 + nl + len + 46 * (z->n + 1) + 22 >= UINT32_MAX)
                return -EFBIG;
        z->off[z->n] = (uint32_t)z->pos;
        z->size[z->n] = (uint32_t)len;
        z->crc[z->n] = (uint32_t)crc32(crc32(0, NULL, 0), body, (uInt)len);
        gn_le32_put(h, ZIP_LOCAL);
        gn_le16_put(h + 4, (uint16_t)ZIP_VERSION);
        gn_le32_put(h + 14, z->crc[z->n]);
        gn_le32_put(h + 18, (uint32_t)len);
        gn_le32_put(h + 22, (uint32_t)len);
        gn_le16_put(h + 26, (uint16_t)nl);
        rc = put(z, h, sizeof(h));
        if (!rc)
                rc = put(z, z->name[z->n], nl);
        if (!rc)
                rc = put(z, body, len);
        if (!rc)
                z->n++;
        return rc;
}

/* One .npy in memory: header for descr/shape, then len data bytes. */
static int add_npy(struct npz *z, const char *name, const char *descr,
                   const size_t *shape, int ndim, const uint8_t *data,
                   size_t len)
{
        char h[256];
        size_t hl = npy_header(h, descr, shape, ndim);
        uint8_t *body = malloc(hl + len);
        int rc;

        if (!body)
                return -ENOMEM;
        memcpy(body, h, hl);
        if (len)
                memcpy(body + hl, data, len);
        rc = add_entry(z, name, body, hl + len);
        free(body);
        return rc;
}

int npz_add_f32(struct npz *z, const char *name, const float *v,
                const size_t *shape, int ndim)
{
        size_t n = 1;
        uint8_t *b;
        int rc;

        if (ndim < 0 || ndim > NPZ_DIMS_MAX)
                return -EINVAL;
        for (int i = 0; i < ndim; i++)
                n *= shape[i];
        b = malloc(n * 4 + 1);
        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                uint32_t u;

                memcpy(&u, &v[i], 4);
                gn_le32_put(b + 4 * i, u);
        }
        rc = add_npy(z, name, "<f4", shape, ndim, b, n * 4);
        free(b);
        return rc;
}

int npz_add_i64(struct npz *z, const char *name, const int64_t *v, size_t n)
{
        uint8_t *b = malloc(n * 8 + 1);
        int rc;

        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                gn_le32_put(b + 8 * i,
                            (uint32_t)((uint64_t)v[i] & 0xffffffffu));
                gn_le32_put(b + 8 * i + 4, (uint32_t)((uint64_t)v[i] >> 32));
        }
        rc = add_npy(z, name, "<i8", &n, 1, b, n * 8);
        free(b);
        return rc;
}

int npz_add_str(struct npz *z, const char *name, const char *s)
{
        size_t n = strlen(s);
        uint8_t *b = calloc(n ? n : 1, 4);
        char descr[32];
        int rc;

        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                gn_le32_put(b + 4 * i, (uint8_t)s[i]);
        snprintf(descr, sizeof(descr), "<U%zu", n ? n : 1);
        rc = add_npy(z, name, descr, NULL, 0, b, (n ? n : 1) * 4);
        free(b);
        return rc;
}

static int central(struct npz *z)
{
        uint8_t h[46], e[22] = {0};
        uint64_t start = z->pos;
        int rc = 0;

        for (uint32_t i = 0; i < z->n && !rc; i++) {
                size_t nl = strlen(z->name[i]);

                memset(h, 0, sizeof(h));
                gn_le32_put(h, ZIP_CENTRAL);
                gn_le16_put(h + 4, (uint16_t)ZIP_VERSION);
                gn_le16_put(h + 6, (uint16_t)ZIP_VERSION);
                gn_le32_put(h + 16, z->crc[i]);
                gn_le32_put(h + 20, z->size[i]);
                gn_le32_put(h + 24, z->size[i]);
                gn_le16_put(h + 28, (uint16_t)nl);
                gn_le32_put(h + 42, z->off[i]);
                rc = put(z, h, sizeof(h));
                if (!rc)
                        rc = put(z, z->name[i], nl);
        }
        if (rc)
                return rc;
        gn_le32_put(e, ZIP_END);
        gn_le16_put(e + 8, (uint16_t)z->n);
        gn_le16_put(e + 10, (uint16_t)z->n);
        gn_le32_put(e + 12, (uint32_t)(z->pos - start));
        gn_le32_put(e + 16, (uint32_t)start);
        return put(z, e, sizeof(e));
}

int npz_close(struct npz *z)
{
        int rc;

        if (!z->f)
                return -EINVAL;
        rc = central(z);
        if (!rc && fflush(z->f))
                rc = -errno;
        if (!rc && fsync(fileno(z->f)))
                rc = -errno;
        if (fclose(z->f) && !rc)
                rc = -errno;
        z->f = NULL;
        if (!rc && rename(z->tmp, z->path))
                rc = -errno;
        if (rc)
                unlink(z->tmp);
        return rc;
}
