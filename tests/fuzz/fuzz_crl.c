/*
 * fuzz_crl.c - libFuzzer target for the revocation-list decoder, its
 * lookup and the merge rule (gossip/cert.c: gossip_crl_decode,
 * gossip_crl_has, gossip_crl_merge).
 *
 * The input is a list. The fuzz authority is a fixed key; the held list
 * has sequence 5; the seeds are lists it signed at sequences 4, 5 (the
 * held one), 6, with none, one and many serials.
 *
 * Oracles. Decoded: the length is exactly 100 + 8 x count, the serials
 * are strictly ascending and nonzero, each is found by gossip_crl_has and
 * its neighbours only if listed; signing the decoded fields again gives
 * the input's bytes but for the authority key id and the signature. The
 * merge verdict is in range; malformed exactly when decoding failed; "ok"
 * only for a list that verifies with a sequence above 5, and then it is
 * byte for byte what the authority signs; "same" only for the held bytes.
 */
#include <sodium.h>
#include <stdint.h>
#include <string.h>

#include "gossip/cert.h"
#include "fuzz.h"

#define HELD_SEQ 5

static uint8_t ca_pk[32], ca_sk[64];
static uint8_t held_buf[256];
static struct gossip_crl held;
static uint64_t serials[GOSSIP_CRL_MAX_SERIALS];
static uint8_t again[GOSSIP_CRL_MAX_BYTES];

static void init(void)
{
        static int done;
        uint8_t seed[32];
        uint64_t s[2] = {3, 9};
        int n;

        if (done)
                return;
        if (sodium_init() < 0)
                abort();
        for (int i = 0; i < 32; i++)
                seed[i] = (uint8_t)(0x80 + i);
        crypto_sign_seed_keypair(ca_pk, ca_sk, seed);
        n = gossip_crl_sign(HELD_SEQ, 1000, s, 2, ca_sk, held_buf,
                            sizeof(held_buf));
        GN_FUZZ_CHECK(n > 0);
        GN_FUZZ_CHECK(gossip_crl_verify(held_buf, (size_t)n, ca_pk, &held) ==
                      GOSSIP_CRL_OK);
        done = 1;
}

/* The decode oracles; returns 1 if data decoded. */
static int check_decoded(const uint8_t *data, size_t size)
{
        struct gossip_crl l;
        const char *why = NULL;
        int k;

        if (gossip_crl_decode(data, size, &l, &why) != GOSSIP_CRL_OK) {
                GN_FUZZ_CHECK(why && *why);
                return 0;
        }
        GN_FUZZ_CHECK(why == NULL && l.bytes == data && l.len == size);
        GN_FUZZ_CHECK(l.n_serials <= GOSSIP_CRL_MAX_SERIALS);
        GN_FUZZ_CHECK(size == 100 + 8 * (size_t)l.n_serials);
        GN_FUZZ_CHECK(l.seq >= 1);
        for (uint32_t i = 0; i < l.n_serials; i++) {
                uint64_t s = 0;

                for (int j = 0; j < 8; j++)
                        s = s << 8 | l.serials[8 * i + j];
                serials[i] = s;
                GN_FUZZ_CHECK(s != 0 && (i == 0 || s > serials[i - 1]));
                GN_FUZZ_CHECK(gossip_crl_has(&l, s));
                if (i == 0 || serials[i - 1] != s - 1)
                        GN_FUZZ_CHECK(!gossip_crl_has(&l, s - 1));
        }
        k = gossip_crl_sign(l.seq, l.issued_at, serials, l.n_serials, ca_sk,
                            again, sizeof(again));
        GN_FUZZ_CHECK(k == (int)size);
        GN_FUZZ_CHECK(memcmp(again, data, 8) == 0);
        GN_FUZZ_CHECK(memcmp(again + 16, data + 16, size - 16 - 64) == 0);
        return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct gossip_crl out;
        int decoded, v;

        init();
        decoded = check_decoded(data, size);
        memset(&out, 0, sizeof(out));
        v = gossip_crl_merge(&held, data, size, ca_pk, &out);
        GN_FUZZ_CHECK(v >= 0 && v < GOSSIP_CRL_VERDICT_COUNT);
        GN_FUZZ_CHECK((v == GOSSIP_CRL_MALFORMED) == !decoded);
        if (v == GOSSIP_CRL_OK) {
                GN_FUZZ_CHECK(out.seq > HELD_SEQ && out.bytes == data);
                GN_FUZZ_CHECK(memcmp(again, data, size) == 0);
        } else {
                GN_FUZZ_CHECK(out.bytes == NULL);
        }
        if (v == GOSSIP_CRL_SAME)
                GN_FUZZ_CHECK(size == held.len &&
                              memcmp(data, held.bytes, size) == 0);
        return 0;
}

/* Seeds: lists of the fuzz authority around the held one. */
void gn_fuzz_seeds(gn_fuzz_add_fn add, void *ctx)
{
        static uint8_t b[GOSSIP_CRL_MAX_BYTES];
        uint64_t s[300];

        init();
        add(ctx, held.bytes, held.len);
        for (uint32_t i = 0; i < 300; i++)
                s[i] = UINT64_C(0x100000000) * (i + 1) + i;
        for (uint32_t seq = 4; seq <= 6; seq++) {
                uint32_t counts[] = {0, 1, 300};

                for (int c = 0; c < 3; c++) {
                        int n = gossip_crl_sign(seq, 1000 * seq, s, counts[c],
                                                ca_sk, b, sizeof(b));

                        GN_FUZZ_CHECK(n > 0);
                        add(ctx, b, (size_t)n);
                }
        }
}
