/*
 * gn_endian.h - fixed byte order loads and stores, whatever the host's.
 *
 * Little-endian: the payload codecs (gossip/codec.c), the checkpoint format
 * (nn/checkpoint.c, docs/formats.md) and the trainer's metadata. Big-endian
 * ("network order"): the frame prefix of docs/protocol.md and the 4-byte
 * length in front of every control-socket message (docs/control.md).
 * Header-only and libc-only, so nn/ and gossip/ share it without including
 * each other (docs/design.md, "Modules and seams"). Byte by byte, so any
 * alignment of p is fine.
 */
#ifndef GN_ENDIAN_H
#define GN_ENDIAN_H

#include <stdint.h>

static inline void gn_le16_put(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
}

static inline uint16_t gn_le16_get(const uint8_t *p)
{
        return (uint16_t)(p[0] | p[1] << 8);
}

static inline void gn_le32_put(uint8_t *p, uint32_t v)
{
        for (int i = 0; i < 4; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t gn_le32_get(const uint8_t *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
               (uint32_t)p[3] << 24;
}

static inline void gn_le64_put(uint8_t *p, uint64_t v)
{
        gn_le32_put(p, (uint32_t)v);
        gn_le32_put(p + 4, (uint32_t)(v >> 32));
}

static inline uint64_t gn_le64_get(const uint8_t *p)
{
        return (uint64_t)gn_le32_get(p) | (uint64_t)gn_le32_get(p + 4) << 32;
}

/* The low n bytes of v (n <= 8), most significant first. */
static inline void gn_be_put(uint8_t *p, uint64_t v, int n)
{
        for (int i = n - 1; i >= 0; i--, v >>= 8)
                p[i] = (uint8_t)v;
}

/* n bytes (n <= 8), most significant first. */
static inline uint64_t gn_be_get(const uint8_t *p, int n)
{
        uint64_t v = 0;

        for (int i = 0; i < n; i++)
                v = v << 8 | p[i];
        return v;
}

static inline void gn_be32_put(uint8_t *p, uint32_t v)
{
        gn_be_put(p, v, 4);
}

static inline uint32_t gn_be32_get(const uint8_t *p)
{
        return (uint32_t)gn_be_get(p, 4);
}

#endif
