/*
 * codec.h - gradient payload codecs: a float gradient to bytes and back.
 *
 * Codecs: raw fp32, fp16 (IEEE half, round to nearest even, saturating at
 * +-65504), int8 with one fp32 scale per block (scale = max|x| / 127), and
 * top-k (the k largest-magnitude entries as index/value pairs). Any of them
 * can be combined with Ako-style partial exchange: the gradient is cut into
 * P contiguous partitions and the payload of step t carries partition
 * t mod P only.
 *
 * Error feedback: an encoder object may hold a residual r (one float per
 * model element). Each encode adds the new gradient to r, sends what the
 * codec can of r, and keeps in r exactly what the receiver will not
 * reconstruct (unsent partitions, entries outside the top k, and, if asked,
 * fp16/int8 rounding error). So nothing is lost: after every call
 *      sum of all inputs == sum of all decoded payloads + r
 * up to float rounding. Top-k and P > 1 always keep a residual.
 *
 * Wire format: a 20-byte little-endian header, then the body (see
 * docs/learning.md for the table). Decoding is safe on hostile bytes: the
 * total length must be exactly what the header implies, every count is
 * bounded by the model size the caller passes, indices must be strictly
 * increasing and in range, and NaN/Inf anywhere is GOSSIP_ENONFINITE.
 *
 * An encoder object is used by one thread at a time; decode is a pure
 * function.
 */
#ifndef GOSSIP_CODEC_H
#define GOSSIP_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip_types.h"

enum gossip_codec_id {
        GOSSIP_CODEC_FP32 = 1, /* 4 bytes per element, exact */
        GOSSIP_CODEC_FP16 = 2, /* 2 bytes per element, rel. error 2^-11 */
        GOSSIP_CODEC_INT8 = 3, /* 1 byte per element + 4 per block */
        GOSSIP_CODEC_TOPK = 4, /* 8 bytes (u32 index, f32 value) per entry */
};

/* Format constants and tunables, with their reasons. */
enum {
        GOSSIP_CODEC_VERSION = 1,
        GOSSIP_CODEC_HEADER_BYTES = 20,
        /* int8 block: 256 elements share a scale; 4/256 = 1.6% overhead,
         * and one outlier spoils the precision of 255 neighbours only. */
        GOSSIP_CODEC_INT8_BLOCK_DEFAULT = 256,
        GOSSIP_CODEC_INT8_BLOCK_MAX = 65536,
        /* Partitions: more than 1024 rounds to send one gradient is far
         * past the point where the accumulated parts are useful. */
        GOSSIP_CODEC_PARTS_MAX = 1024,
        /* Top-k default: 1% of the (partition's) elements, the usual point
         * where error-feedback SGD still matches dense training. */
        GOSSIP_CODEC_TOPK_PERCENT_DEFAULT = 1,
};

/* Largest finite half. */
#define GOSSIP_HALF_MAX 65504.0f

struct gossip_codec_cfg {
        enum gossip_codec_id id;
        size_t n;           /* model size (floats), 1 .. UINT32_MAX */
        uint32_t parts;     /* P, 1 .. min(n, PARTS_MAX); 0 means 1 */
        uint32_t block;     /* int8 block size; 0 = default */
        uint32_t k;         /* top-k entries per payload; 0 = 1% of it */
        int error_feedback; /* fp16/int8: keep rounding error in the residual */
};

struct gossip_codec {
        struct gossip_codec_cfg cfg;
        float *residual; /* n floats, or NULL for a stateless encoder */
        uint64_t payloads, bytes; /* encoded so far */
};

/* What a payload header says, after validation. */
struct gossip_codec_info {
        enum gossip_codec_id id;
        uint32_t part_index, part_count;
        size_t lo;      /* first model element covered */
        size_t count;   /* elements covered: [lo, lo + count) */
        uint32_t param; /* int8: block size; top-k: entries; else 0 */
        size_t len;     /* total payload bytes */
};

/* Set up an encoder. Returns 0, GOSSIP_EINVAL for a bad config, or
 * GOSSIP_ENOMEM; on error nothing stays allocated. */
int gossip_codec_init(struct gossip_codec *c,
                      const struct gossip_codec_cfg *cfg);

/* Free the encoder's memory. Safe on a zeroed or already freed struct. */
void gossip_codec_free(struct gossip_codec *c);

/* Forget the residual (e.g. after loading a model from a peer). */
void gossip_codec_reset(struct gossip_codec *c);

/* Upper bound of the bytes one gossip_codec_encode() call writes. */
size_t gossip_codec_max_size(const struct gossip_codec *c);

/* Encode gradient g[0..n) for `step` into buf (cap bytes), length in *len.
 * Returns 0; GOSSIP_EMISMATCH if n is not the model size, GOSSIP_ENONFINITE
 * if g holds NaN/Inf, GOSSIP_ETOOBIG if cap is too small; on error the
 * residual and buf are unchanged. */
int gossip_codec_encode(struct gossip_codec *c, uint64_t step, const float *g,
                        size_t n, void *buf, size_t cap, size_t *len);

/* Encode partition `part` of the model, whose values are x[0..count)
 * (count must be that partition's size), statelessly: the residual is
 * neither read nor changed (e.g. for parameters, which are not
 * accumulated). With nothing to carry a rounding error forward, int8
 * rounds stochastically (unbiased, |error| < scale) from the stream
 * `seed`: the same seed gives the same bytes; use a new one per payload
 * (e.g. the step). Same payload format and return codes as
 * gossip_codec_encode(), and GOSSIP_EINVAL for a part out of range. */
int gossip_codec_encode_part(const struct gossip_codec *c, uint32_t part,
                             const float *x, size_t count, uint64_t seed,
                             void *buf, size_t cap, size_t *len);

/* Validate the header of payload buf[0..len) against a model of n_model
 * floats and fill *info; the body is not looked at except for its length.
 * Returns 0 or GOSSIP_ESHORT / EVERSION / EDECODE / EMISMATCH. */
int gossip_codec_peek(const void *buf, size_t len, size_t n_model,
                      struct gossip_codec_info *info);

/* Decode payload buf[0..len) for a model of n_model floats: the values of
 * elements [info->lo, info->lo + info->count) are written to
 * out[0..info->count) (entries a top-k payload does not carry are 0). out
 * must hold n_model floats. Returns 0, or the codes of gossip_codec_peek()
 * and GOSSIP_ENONFINITE; on error out's contents are unspecified and
 * must not be used. */
int gossip_codec_decode(const void *buf, size_t len, size_t n_model, float *out,
                        struct gossip_codec_info *info);

/* Elements [*lo, *lo + *count) of partition p of P over n. */
void gossip_codec_partition(size_t n, uint32_t p, uint32_t parts, size_t *lo,
                            size_t *count);

/* IEEE binary16 from float, round to nearest even; finite values beyond
 * the half range saturate to +-65504, Inf stays Inf, NaN becomes 0x7e00. */
uint16_t gossip_float_to_half(float f);

/* float from IEEE binary16 (exact). */
float gossip_half_to_float(uint16_t h);

/* "fp32", "fp16", "int8", "topk", or NULL for an unknown id. */
const char *gossip_codec_name(int id);

/* Internal, for tests: fp16 arrays use x86's F16C instructions when the
 * CPU has them (the default) or the portable code (on = 0).  Returns 1 if
 * the CPU has F16C.  Both give the same bits. */
int gossip__codec_fp16_hw(int on);

#endif
