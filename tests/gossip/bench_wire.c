/*
 * bench_wire.c - what a bulk frame costs on the wire: encode + decode of a
 * PARAMS frame signed (Ed25519 over BLAKE2b-256, DIGEST) against the same
 * frame with a Poly1305 MAC under the pairwise key (docs/protocol.md
 * 2.2.1).
 *
 * Not a test: it never fails on timing (it fails only if a frame does not
 * decode). In the same run it times the primitives underneath on the same
 * bytes — one BLAKE2b-256 pass, one XChaCha20-Poly1305 tag, a memcpy — as
 * the peers the two frame paths are made of. Times are the best of `reps`
 * runs (other processes on a shared machine only ever add time); the
 * median of encode + decode is printed beside it. The payload is random
 * bytes from the seed (the wire layer does not look inside it).
 *
 *   bench_gossip_wire [reps] [payload_bytes] [seed]
 *
 * Defaults: 51 reps, 203,000 bytes (the PARAMS frame of the 4-node MLP
 * 784-512-10 cluster profile), seed 20261129.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "gossip/wire.h"
#include "bench_clock.h"

/* Best and median of v[0..n) (sorts v). */
static void stats(double *v, int n, double *best, double *med)
{
        qsort(v, (size_t)n, sizeof(double), cmp_double);
        *best = v[0];
        *med = v[n / 2];
}

struct bench {
        int reps;
        uint8_t sk_a[GOSSIP_SECRET_BYTES];
        struct gossip_keyring *kr; /* B's: self B, trusts A */
        struct gossip_msg m;
        uint8_t *frame;
        size_t cap;
        double *te, *td;
};

/* Encodes m (MAC'd if key) and decodes it at B reps times; prints a row.
 * 0, or -1 if a frame failed. */
static int run_frames(struct bench *b, const char *name, const uint8_t *key)
{
        double eb, db, med, unused;
        double *sum = malloc((size_t)b->reps * sizeof(double));
        size_t len = 0;
        int rc = -1;

        if (!sum)
                return -1;
        b->m.mac_key = key;
        for (int r = 0; r < b->reps; r++) {
                struct gossip_msg got = {0};
                double t0 = now_s();

                if (gossip_wire_encode(&b->m, b->sk_a, b->frame, b->cap, &len,
                                       NULL))
                        goto out;
                b->te[r] = now_s() - t0;
                t0 = now_s();
                if (gossip_wire_decode(b->frame, len, GOSSIP_CH_STREAM, NULL,
                                       b->kr, NULL, &got, NULL) ||
                    got.u.tensor.payload_len != b->m.u.tensor.payload_len)
                        goto out;
                b->td[r] = now_s() - t0;
                sum[r] = b->te[r] + b->td[r];
        }
        stats(b->te, b->reps, &eb, &unused);
        stats(b->td, b->reps, &db, &unused);
        stats(sum, b->reps, &unused, &med);
        printf("%-22s %9zu %9.1f %9.1f %9.1f %9.1f\n", name, len, eb * 1e6,
               db * 1e6, (eb + db) * 1e6, med * 1e6);
        rc = 0;
out:
        free(sum);
        return rc;
}

/* Times one primitive over the frame bytes; prints a row. */
static void run_prim(struct bench *b, const char *name, int which,
                     const uint8_t *key, size_t n)
{
        uint8_t out[crypto_generichash_BYTES], none[1] = {0};
        uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES] = {0};
        uint8_t *dst = which == 2 ? malloc(n) : NULL;
        double best, med;

        if (which == 2 && !dst)
                return;
        for (int r = 0; r < b->reps; r++) {
                double t0 = now_s();

                if (which == 0)
                        crypto_generichash(out, sizeof(out), b->frame, n, NULL,
                                           0);
                else if (which == 1)
                        crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
                            none, out, NULL, none, 0, b->frame, n, NULL, nonce,
                            key);
                else
                        memcpy(dst, b->frame, n);
                b->te[r] = now_s() - t0;
        }
        stats(b->te, b->reps, &best, &med);
        printf("%-22s %9zu %9s %9s %9.1f %9.1f\n", name, n, "", "", best * 1e6,
               med * 1e6);
        free(dst);
}

int main(int argc, char **argv)
{
        struct bench b = {0};
        int reps = argc > 1 ? atoi(argv[1]) : 51;
        size_t plen = argc > 2 ? strtoull(argv[2], NULL, 0) : 203000;
        uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : 20261129;
        uint8_t pk_a[GOSSIP_KEY_BYTES], pk_b[GOSSIP_KEY_BYTES];
        uint8_t sk_b[GOSSIP_SECRET_BYTES], s[32], rs[32] = {0};
        uint8_t *payload = malloc(plen ? plen : 1);
        const uint8_t *key;
        int rc = 1;

        b.reps = reps;
        b.cap = plen + 512;
        b.frame = malloc(b.cap);
        b.te = malloc((size_t)(reps > 0 ? reps : 1) * sizeof(double));
        b.td = malloc((size_t)(reps > 0 ? reps : 1) * sizeof(double));
        b.kr = gossip_keyring_new(); /* calls sodium_init() */
        if (!payload || !b.frame || !b.te || !b.td || !b.kr || reps < 1)
                goto out;
        /* the test-vector keys A and B of docs/protocol.md */
        for (int i = 0; i < 32; i++)
                s[i] = (uint8_t)i;
        crypto_sign_seed_keypair(pk_a, b.sk_a, s);
        for (int i = 0; i < 32; i++)
                s[i] = (uint8_t)(32 + i);
        crypto_sign_seed_keypair(pk_b, sk_b, s);
        if (gossip_keyring_set_self(b.kr, sk_b) ||
            gossip_keyring_add(b.kr, pk_a, NULL) ||
            !(key = gossip_keyring_mac_key(b.kr, gossip_key_id(pk_a))))
                goto out;
        for (int i = 0; i < 8; i++)
                rs[i] = (uint8_t)(seed >> (8 * i));
        randombytes_buf_deterministic(payload, plen, rs);
        b.m.kind = GOSSIP_MSG_PARAMS;
        b.m.channel = GOSSIP_CH_STREAM;
        b.m.incarnation = 1;
        b.m.seq = 1;
        b.m.u.tensor.part_count = 1;
        b.m.u.tensor.n_elems = plen / 4;
        b.m.u.tensor.payload = payload;
        b.m.u.tensor.payload_len = plen;
        printf("bench_wire: PARAMS frame, %zu-byte payload, best of %d, "
               "seed %" PRIu64 " (times in us)\n",
               plen, reps, seed);
        printf("%-22s %9s %9s %9s %9s %9s\n", "", "bytes", "enc", "dec",
               "enc+dec", "med e+d");
        if (run_frames(&b, "signed (Ed25519+B2b)", NULL) ||
            run_frames(&b, "MAC (Poly1305)", key))
                goto out;
        run_prim(&b, "  peer: BLAKE2b-256", 0, key, plen);
        run_prim(&b, "  peer: XChaCha-Poly", 1, key, plen);
        run_prim(&b, "  peer: memcpy", 2, key, plen);
        printf("enc+dec = best encode + best decode; med e+d = median of "
               "encode+decode.\nA signed frame hashes the frame twice "
               "(sender, receiver) plus one Ed25519 sign and verify; a MAC\n"
               "frame makes one Poly1305 pass on each side. Peers time one "
               "pass over the payload.\n");
        rc = 0;
out:
        if (rc)
                fprintf(stderr, "bench_wire: failed\n");
        sodium_memzero(b.sk_a, sizeof(b.sk_a));
        sodium_memzero(sk_b, sizeof(sk_b));
        gossip_keyring_free(b.kr);
        free(payload);
        free(b.frame);
        free(b.te);
        free(b.td);
        return rc;
}
