/*
 * checkpoint.h - model state as bytes: files on disk and the state a
 * joining peer fetches over the network, in one format.
 *
 * A checkpoint is a fixed 64-byte little-endian header (magic "GNCK",
 * version, total length, step, epoch, seed, lengths), the model spec
 * string, an opaque metadata blob, the parameters and the optimizer
 * state as little-endian fp32, and a BLAKE2b-256 digest of everything
 * before it. docs/formats.md gives it byte by byte. The format knows
 * nothing of models: parameters are one flat float array, matched to a
 * model only by its spec string and counts.
 *
 * Decoding is safe on hostile bytes: the header is bounds-checked, the
 * total length must equal the buffer length exactly, the digest must
 * match, and no allocation exceeds the buffer's own size (nor the
 * caller's limit) before that. Saving is atomic: temp file, fsync,
 * rename, fsync of the directory; on any failure the old file stays.
 */
#ifndef NN_CHECKPOINT_H
#define NN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "nn/nn_err.h"

enum {
        NN_CKPT_VERSION = 1,
        NN_CKPT_HEADER_SIZE = 64, /* fixed part before the spec */
        NN_CKPT_DIGEST_SIZE = 32, /* BLAKE2b-256 trailer */
        NN_CKPT_SPEC_MAX = 1024,  /* bytes; specs are short strings */
        NN_CKPT_META_MAX = 65536, /* bytes of opaque caller metadata */
};

struct nn_checkpoint {
        char *spec;     /* model spec, NUL-terminated */
        uint64_t step;  /* optimizer steps taken */
        uint64_t epoch; /* caller's epoch counter */
        uint64_t seed;  /* caller's run seed */
        float *params;  /* n_params floats */
        uint64_t n_params;
        float *opt; /* n_opt floats of optimizer state (may be 0) */
        uint64_t n_opt;
        uint8_t *meta; /* meta_len opaque bytes (may be NULL/0) */
        uint32_t meta_len;
};

/* Size in bytes of the encoding of ck, or 0 if ck breaks a bound. */
size_t nn_checkpoint_encoded_size(const struct nn_checkpoint *ck);

/* Encodes ck into buf (cap bytes) and sets *len; NN_EINVAL if ck breaks
 * a bound or cap is too small (buf then unspecified). */
int nn_checkpoint_encode(const struct nn_checkpoint *ck, void *buf, size_t cap,
                         size_t *len);

/* A checkpoint whose digest is computed a piece at a time, so that no
 * single call pays for all of it (a state served to a joining peer is
 * sealed over several training steps: docs/design.md, "A state served
 * costs one step"). nn_checkpoint_encode_open writes everything but the
 * digest; each nn_checkpoint_seal_some then hashes at most max more
 * bytes and writes the digest when the last is hashed. The bytes are
 * those of nn_checkpoint_encode. The caller keeps buf unchanged and
 * alive until sealed. */
struct nn_ckpt_seal {
        unsigned char hash[384]; /* BLAKE2b's running state, as bytes */
        uint8_t *buf;
        size_t done, body; /* bytes hashed, bytes to hash */
};

/* As nn_checkpoint_encode, the digest left to s (bytes unspecified there
 * until sealed). 0, or NN_EINVAL as nn_checkpoint_encode. */
int nn_checkpoint_encode_open(const struct nn_checkpoint *ck, void *buf,
                              size_t cap, size_t *len, struct nn_ckpt_seal *s);

/* Hash at most max more bytes (max >= 1); 1 once the digest is written
 * (the buffer is then a whole checkpoint), 0 while bytes remain,
 * NN_EIO if the hash fails. */
int nn_checkpoint_seal_some(struct nn_ckpt_seal *s, size_t max);

/* Reads the total encoded length from the first NN_CKPT_HEADER_SIZE
 * bytes of a checkpoint (for framing a stream); checks magic, version
 * and that the lengths add up, not the digest. */
int nn_checkpoint_peek_size(const void *buf, size_t len, uint64_t *total);

/* Decodes exactly len bytes into *out (which then owns fresh copies;
 * free with nn_checkpoint_free). Refuses, with a negative code and one
 * line in err prefixed by name (may be NULL), anything malformed,
 * truncated, corrupt (NN_ECHECKSUM), holding a non-finite float, or
 * with more than max_floats floats in all (0 = no limit but len). On
 * error *out is zeroed. */
int nn_checkpoint_decode(const void *buf, size_t len, uint64_t max_floats,
                         const char *name, struct nn_checkpoint *out, char *err,
                         size_t errlen);

/* NN_EMISMATCH with a line naming name and the difference unless ck has
 * this spec (if spec != NULL), n_params (if != UINT64_MAX) and n_opt (if
 * != UINT64_MAX). */
int nn_checkpoint_check(const struct nn_checkpoint *ck, const char *spec,
                        uint64_t n_params, uint64_t n_opt, const char *name,
                        char *err, size_t errlen);

/* Writes ck to path atomically (path.tmp.<pid>, fsync, rename, fsync
 * of the directory). On error the previous file at path is untouched
 * and the temp file removed. */
int nn_checkpoint_save(const char *path, const struct nn_checkpoint *ck,
                       char *err, size_t errlen);

/* Removes what earlier saves to path left behind when they died between
 * creating and renaming their temp file: path.tmp.<pid> for any pid that
 * is not ours and names no running process. Returns how many were removed
 * (0 or more), or NN_EIO if path's directory cannot be read. A program
 * calls it once at start, before other threads run (gossipnode's trainer
 * setup); saves do not, so a training thread never scans the directory
 * while the loop thread opens and closes sockets (a DIR's descriptor
 * reusing a socket's number is what ThreadSanitizer reported). */
int nn_checkpoint_clean_tmp(const char *path);

/* Loads and verifies path into *out (see nn_checkpoint_decode). */
int nn_checkpoint_load(const char *path, struct nn_checkpoint *out, char *err,
                       size_t errlen);

/* nn_checkpoint_load, then nn_checkpoint_check against the model the
 * caller is about to run; on mismatch *out is freed and zeroed. */
int nn_checkpoint_load_expect(const char *path, const char *spec,
                              uint64_t n_params, uint64_t n_opt,
                              struct nn_checkpoint *out, char *err,
                              size_t errlen);

/* Frees what a decode/load allocated and zeroes *ck. Not for structs
 * whose arrays the caller filled in itself. */
void nn_checkpoint_free(struct nn_checkpoint *ck);

#endif
