/*
 * fuzz_cert.c - libFuzzer target for the device-certificate decoder and
 * verifier (gossip/cert.c: gossip_cert_decode, gossip_cert_verify).
 *
 * The input is a certificate. The fuzz authority is a fixed key, and the
 * seeds are certificates it signed (every address form, short and long
 * names, a revoked serial), so mutations start from inputs that verify.
 *
 * Oracles. Decode and verify agree on "malformed" and never read past len
 * (the replay driver copies each input into an exact-size block for
 * ASan). A decoded certificate is canonical: signing its fields again
 * gives the input's bytes, except the authority key id the signer writes
 * and the signature. A certificate judged anything past bad_signature
 * verified, so it is exactly what the fuzz authority signs for its fields
 * (Ed25519 is deterministic): no other bytes are accepted. The verdict is
 * in range, revoked only for the revoked serial, and never ok outside the
 * validity window widened by the skew.
 */
#include <sodium.h>
#include <stdint.h>
#include <string.h>

#include "gossip/cert.h"
#include "fuzz.h"
#include "gossip/wire.h"

#define REVOKED UINT64_C(0x5eed)
#define NOW     UINT64_C(1800000000)

static uint8_t ca_pk[32], ca_sk[64];
static uint8_t crl_buf[256];
static struct gossip_crl crl;

static void init(void)
{
        static int done;
        uint8_t seed[32];
        uint64_t s = REVOKED;
        int n;

        if (done)
                return;
        if (sodium_init() < 0)
                abort();
        for (int i = 0; i < 32; i++)
                seed[i] = (uint8_t)(0x80 + i);
        crypto_sign_seed_keypair(ca_pk, ca_sk, seed);
        n = gossip_crl_sign(1, 0, &s, 1, ca_sk, crl_buf, sizeof(crl_buf));
        GN_FUZZ_CHECK(n > 0);
        GN_FUZZ_CHECK(gossip_crl_verify(crl_buf, (size_t)n, ca_pk, &crl) ==
                      GOSSIP_CRL_OK);
        done = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct gossip_cert c, v;
        uint8_t again[GOSSIP_CERT_MAX_BYTES];
        const char *why = NULL;
        int d, r, k, known = size & 1;

        init();
        d = gossip_cert_decode(data, size, &c, &why);
        r = gossip_cert_verify(data, size, ca_pk, NOW, known, &crl, &v);
        GN_FUZZ_CHECK(r >= 0 && r < GOSSIP_CERT_VERDICT_COUNT);
        GN_FUZZ_CHECK((d == GOSSIP_CERT_MALFORMED) ==
                      (r == GOSSIP_CERT_MALFORMED));
        if (d != GOSSIP_CERT_OK) {
                GN_FUZZ_CHECK(d == GOSSIP_CERT_MALFORMED && why && *why);
                return 0;
        }
        GN_FUZZ_CHECK(why == NULL);
        GN_FUZZ_CHECK(size >= GOSSIP_CERT_MIN_BYTES &&
                      size <= GOSSIP_CERT_MAX_BYTES);
        GN_FUZZ_CHECK(memcmp(&c, &v, sizeof(c)) == 0);
        k = gossip_cert_sign(&c, ca_sk, again, sizeof(again));
        GN_FUZZ_CHECK(k == (int)size);
        GN_FUZZ_CHECK(memcmp(again, data, 8) == 0);
        GN_FUZZ_CHECK(memcmp(again + 16, data + 16, size - 16 - 64) == 0);
        if (r > GOSSIP_CERT_BAD_SIGNATURE)
                GN_FUZZ_CHECK(memcmp(again, data, size) == 0);
        GN_FUZZ_CHECK((r == GOSSIP_CERT_REVOKED) ==
                      (r > GOSSIP_CERT_BAD_SIGNATURE && c.serial == REVOKED));
        if (r == GOSSIP_CERT_OK && known)
                GN_FUZZ_CHECK(NOW + GOSSIP_CERT_SKEW_S >= c.not_before &&
                              NOW - GOSSIP_CERT_SKEW_S <= c.not_after);
        return 0;
}

/* Seeds: certificates of the fuzz authority around NOW. */
void gn_fuzz_seeds(gn_fuzz_add_fn add, void *ctx)
{
        static const char *names[] = {"pi-garage", "a",
                                      "0123456789012345678901234567890"};
        uint8_t b[GOSSIP_CERT_MAX_BYTES], dev_sk[64];
        struct gossip_cert c;

        init();
        for (int i = 0; i < 6; i++) {
                int n;

                memset(&c, 0, sizeof(c));
                crypto_sign_keypair(c.pk, dev_sk);
                c.serial = i == 5 ? REVOKED : (uint64_t)i + 1;
                c.not_before = NOW - 86400 + (i == 3 ? 172800 : 0);
                c.not_after = NOW + 86400 - (i == 4 ? 172800 : 0);
                if (c.not_after < c.not_before)
                        c.not_after = c.not_before;
                strcpy(c.name, names[i % 3]);
                c.addr.family = (uint8_t)(i % 3 == 0 ? 4 : i % 3 == 1 ? 6 : 0);
                c.addr.addr[0] = 10;
                c.addr.port = (uint16_t)(7946 + i);
                n = gossip_cert_sign(&c, ca_sk, b, sizeof(b));
                GN_FUZZ_CHECK(n > 0);
                add(ctx, b, (size_t)n);
        }
}
