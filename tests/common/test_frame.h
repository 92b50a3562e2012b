/*
 * test_frame.h - a frame made by hand around a hand-made body
 * (docs/protocol.md 2.1: the 44-byte prefix, then the body, then the
 * Ed25519 signature), for tests that feed the decoder bodies the encoder
 * would never write: the body checks themselves. test_wire and test_crl
 * share it. Header-only; needs libsodium and gossip/wire.h.
 */
#ifndef GN_TEST_FRAME_H
#define GN_TEST_FRAME_H

#include <stdint.h>
#include <string.h>

#include <sodium.h>

#include "gossip/wire.h"

/* Writes the frame of kind with flags (bit 0: the signature covers the
 * BLAKE2b-256 digest of prefix and body, not the bytes), key id, seq and
 * body (n bytes) into b, signed by sk; b holds at least 44 + n + 64
 * bytes. Returns the frame's length. */
static inline size_t gn_test_raw_frame(uint8_t *b, int kind, uint8_t flags,
                                       uint64_t key_id, uint64_t seq,
                                       const void *body, size_t n,
                                       const uint8_t *sk)
{
        uint8_t d[32];

        memset(b, 0, GOSSIP_WIRE_PREFIX_BYTES);
        b[0] = 'G';
        b[1] = 'N';
        b[2] = GOSSIP_WIRE_VERSION;
        b[3] = (uint8_t)kind;
        b[4] = flags;
        for (int i = 0; i < 8; i++)
                b[8 + i] = (uint8_t)(key_id >> (56 - 8 * i));
        for (int i = 0; i < 8; i++)
                b[24 + i] = (uint8_t)(seq >> (56 - 8 * i));
        for (int i = 0; i < 4; i++)
                b[40 + i] = (uint8_t)(n >> (24 - 8 * i));
        memcpy(b + 44, body, n);
        if (flags & 1) {
                crypto_generichash(d, 32, b, 44 + n, NULL, 0);
                crypto_sign_detached(b + 44 + n, NULL, d, 32, sk);
        } else {
                crypto_sign_detached(b + 44 + n, NULL, b, 44 + n, sk);
        }
        return 44 + n + 64;
}

#endif
