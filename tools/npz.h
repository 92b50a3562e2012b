/*
 * npz.h - a NumPy .npz writer: a zip archive (stored, no compression) of
 * .npy arrays, enough for numpy.load() to read without pickle.
 *
 * The caller opens a writer on a path, adds arrays one by one and closes
 * it; the archive is written to path.tmp.<pid> and renamed over path only
 * by a successful close, so a failed export leaves no half file. Arrays
 * are little-endian float32, int64 or a unicode string ('<U', UCS-4);
 * each entry is one local header, the .npy bytes and, at close, one
 * central-directory record (CRC-32 from zlib). No zip64: the whole
 * archive must stay below 4 GiB (refused otherwise).
 */
#ifndef GN_NPZ_H
#define GN_NPZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { NPZ_ENTRIES_MAX = 256, NPZ_NAME_MAX = 64, NPZ_DIMS_MAX = 4 };

struct npz {
        FILE *f;
        char path[4096], tmp[4200];
        uint32_t n, off[NPZ_ENTRIES_MAX], crc[NPZ_ENTRIES_MAX],
            size[NPZ_ENTRIES_MAX];
        char name[NPZ_ENTRIES_MAX][NPZ_NAME_MAX];
        uint64_t pos;
};

/* Opens path's temp file. 0 or -errno. */
int npz_open(struct npz *z, const char *path);

/* Adds name.npy: float32 values, as many as the shape holds (ndim 0: a
 * scalar). -EINVAL if ndim > NPZ_DIMS_MAX or the name is too long or
 * taken, -EFBIG past 4 GiB, -errno on a write error. */
int npz_add_f32(struct npz *z, const char *name, const float *v,
                const size_t *shape, int ndim);

/* Adds name.npy: n int64 values, a 1-d array. */
int npz_add_i64(struct npz *z, const char *name, const int64_t *v, size_t n);

/* Adds name.npy: a 0-d unicode string array holding s (ASCII). */
int npz_add_str(struct npz *z, const char *name, const char *s);

/* Writes the central directory, fsyncs and renames over path. On any
 * error (also an earlier one) the temp file is removed. 0 or -errno. */
int npz_close(struct npz *z);

/* Drops the archive: closes and removes the temp file. */
void npz_abort(struct npz *z);

#endif
