/*
 * reservoir.c - the bounded sample reservoir and the packed sample form
 * (see reservoir.h). One allocation at init; algorithm R on offer.
 */
#include "nn/reservoir.h"

#include <stdlib.h>
#include <string.h>

#include "base/gn_rng.h"
#include "nn/nn_err.h"

int nn_reservoir_init(struct nn_reservoir *r, uint32_t cap,
                      uint32_t sample_bytes, uint64_t seed)
{
        memset(r, 0, sizeof(*r));
        if (!cap || !sample_bytes ||
            (size_t)cap > SIZE_MAX / 2 / ((size_t)sample_bytes + 1))
                return NN_EINVAL;
        r->images = malloc((size_t)cap * sample_bytes);
        r->labels = malloc(cap);
        if (!r->images || !r->labels) {
                nn_reservoir_free(r);
                return NN_ENOMEM;
        }
        r->cap = cap;
        r->sample_bytes = sample_bytes;
        r->rng = seed;
        return 0;
}

void nn_reservoir_free(struct nn_reservoir *r)
{
        free(r->images);
        free(r->labels);
        memset(r, 0, sizeof(*r));
}

size_t nn_reservoir_bytes(const struct nn_reservoir *r)
{
        return (size_t)r->cap * ((size_t)r->sample_bytes + 1);
}

/* Uniform in [0, n), n >= 1 (the modulo bias is below 2^-32 for the
 * counts a node sees). */
static uint64_t below(struct nn_reservoir *r, uint64_t n)
{
        return gn_splitmix64(&r->rng) % n;
}

int nn_reservoir_add(struct nn_reservoir *r, const uint8_t *image,
                     uint8_t label)
{
        uint64_t j;

        r->seen++;
        if (r->n < r->cap) {
                j = r->n++;
        } else {
                j = below(r, r->seen);
                if (j >= r->cap)
                        return 0;
        }
        memcpy(r->images + j * r->sample_bytes, image, r->sample_bytes);
        r->labels[j] = label;
        return 1;
}

int nn_reservoir_add_packed(struct nn_reservoir *r, const uint8_t *p,
                            size_t len, uint32_t classes, uint32_t *kept)
{
        size_t rec = (size_t)r->sample_bytes + 1, n;
        uint32_t k = 0;

        if (kept)
                *kept = 0;
        if (!len || len % rec)
                return NN_EINVAL;
        n = len / rec;
        for (size_t i = 0; i < n; i++)
                if (p[i * rec] >= classes)
                        return NN_EINVAL;
        for (size_t i = 0; i < n; i++)
                k += (uint32_t)nn_reservoir_add(r, p + i * rec + 1, p[i * rec]);
        if (kept)
                *kept = k;
        return 0;
}

uint32_t nn_reservoir_draw(struct nn_reservoir *r, uint32_t k, uint8_t *images,
                           uint8_t *labels)
{
        if (!r->n)
                return 0;
        for (uint32_t i = 0; i < k; i++) {
                uint64_t j = below(r, r->n);

                memcpy(images + (size_t)i * r->sample_bytes,
                       r->images + j * r->sample_bytes, r->sample_bytes);
                labels[i] = r->labels[j];
        }
        return k;
}

size_t nn_samples_packed_len(uint32_t n, uint32_t sample_bytes)
{
        return (size_t)n * ((size_t)sample_bytes + 1);
}

void nn_samples_pack(const uint8_t *images, const uint8_t *labels,
                     uint32_t sample_bytes, const uint32_t *idx, uint32_t n,
                     uint8_t *out)
{
        size_t rec = (size_t)sample_bytes + 1;

        for (uint32_t i = 0; i < n; i++) {
                out[i * rec] = labels[idx[i]];
                memcpy(out + i * rec + 1,
                       images + (size_t)idx[i] * sample_bytes, sample_bytes);
        }
}
