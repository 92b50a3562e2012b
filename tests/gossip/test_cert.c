/*
 * test_cert.c - the cluster authority's certificates and revocation lists
 * (gossip/cert.h): round trips; every verdict, each reached on purpose;
 * a flipped bit in every byte of a certificate and of a list, each field
 * refused with the verdict that field must give; the clock policy's edges
 * to the second (skew, no clock, a list's issued_at as the floor); the
 * merge rule (newer taken, same, older, conflicting and forged refused);
 * the decoders' strictness on blobs that are correctly signed but break a
 * rule; and the test vectors of docs/protocol.md section 12, byte for
 * byte, read from the document.
 *
 * Keys come from fixed seeds (Ed25519 is deterministic). The random part
 * (serials in the big-list test) comes from GN_SEED, printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "gossip/cert.h"
#include "base/gn_endian.h"
#include "base/gn_rng.h"
#include "test_doc.h"
#include "test_seed.h"
#include "gossip/wire.h"

#ifndef GN_SOURCE_DIR
#define GN_SOURCE_DIR "."
#endif

/* The vector times: 2027-01-01T00:00:00Z .. 2028-01-01T00:00:00Z. */
#define NB     UINT64_C(1798761600)
#define NA     UINT64_C(1830297600)
#define SERIAL UINT64_C(0x0123456789abcdef)
#define SKEW   ((uint64_t)GOSSIP_CERT_SKEW_S)

static uint64_t seed;
/* A = the device (key A of protocol.md 9), CA = the authority, X =
 * another authority. */
static uint8_t pk_a[32], sk_a[64], pk_ca[32], sk_ca[64], pk_x[32], sk_x[64];

/* Seed bytes first, first + 1, ..., first + 31. */
static void seed_key(int first, uint8_t pk[32], uint8_t sk[64])
{
        uint8_t s[32];

        for (int j = 0; j < 32; j++)
                s[j] = (uint8_t)(first + j);
        crypto_sign_seed_keypair(pk, sk, s);
}

static int group_setup(void **state)
{
        (void)state;
        seed = gn_test_seed("test_cert", 20261230);
        if (sodium_init() < 0)
                return -1;
        seed_key(0x00, pk_a, sk_a);
        seed_key(0x80, pk_ca, sk_ca);
        seed_key(0xa0, pk_x, sk_x);
        return 0;
}

/* The certificate of the protocol.md vector: A, "pi-garage",
 * 127.0.0.1:7946. */
static struct gossip_cert vector_cert(void)
{
        struct gossip_cert c;

        memset(&c, 0, sizeof(c));
        memcpy(c.pk, pk_a, 32);
        c.serial = SERIAL;
        c.not_before = NB;
        c.not_after = NA;
        strcpy(c.name, "pi-garage");
        c.addr.family = 4;
        c.addr.addr[0] = 127;
        c.addr.addr[3] = 1;
        c.addr.port = 7946;
        return c;
}

static size_t sign_cert(const struct gossip_cert *c, const uint8_t *sk,
                        uint8_t *buf)
{
        int n = gossip_cert_sign(c, sk, buf, GOSSIP_CERT_MAX_BYTES);

        assert_true(n >= GOSSIP_CERT_MIN_BYTES);
        return (size_t)n;
}

static size_t sign_crl(uint64_t seq, uint64_t at, const uint64_t *s, uint32_t n,
                       const uint8_t *sk, uint8_t *buf, size_t cap)
{
        int len = gossip_crl_sign(seq, at, s, n, sk, buf, cap);

        assert_true(len >= GOSSIP_CRL_HEAD_BYTES + GOSSIP_SIG_BYTES);
        return (size_t)len;
}

/* Verifies b as a certificate at a known time, no list. */
static int at(const uint8_t *b, size_t n, uint64_t now)
{
        return gossip_cert_verify(b, n, pk_ca, now, 1, NULL, NULL);
}

static void assert_cert_equal(const struct gossip_cert *a,
                              const struct gossip_cert *b)
{
        assert_int_equal(a->authority_id, b->authority_id);
        assert_memory_equal(a->pk, b->pk, 32);
        assert_int_equal(a->serial, b->serial);
        assert_int_equal(a->not_before, b->not_before);
        assert_int_equal(a->not_after, b->not_after);
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->addr.family, b->addr.family);
        assert_memory_equal(a->addr.addr, b->addr.addr, 16);
        assert_int_equal(a->addr.port, b->addr.port);
}

static void test_cert_roundtrip(void **state)
{
        struct gossip_cert c = vector_cert(), got;
        uint8_t b[GOSSIP_CERT_MAX_BYTES];
        size_t n;

        (void)state;
        c.authority_id = 12345; /* ignored: the signer's key id is written */
        for (int form = 0; form < 3; form++) {
                if (form == 1) { /* IPv6, the longest name */
                        c.addr.family = 6;
                        memset(c.addr.addr, 0xfd, 16);
                        c.addr.port = 65535;
                        memset(c.name, 'x', 31);
                        c.name[31] = 0;
                } else if (form == 2) { /* no address, one-letter name */
                        memset(&c.addr, 0, sizeof(c.addr));
                        strcpy(c.name, "a");
                }
                n = sign_cert(&c, sk_ca, b);
                assert_int_equal(n, GOSSIP_CERT_HEAD_BYTES + strlen(c.name) +
                                        (form == 0   ? 6
                                         : form == 1 ? 18
                                                     : 0) +
                                        64);
                memset(&got, 0xee, sizeof(got));
                assert_int_equal(
                    gossip_cert_verify(b, n, pk_ca, NB + 1, 1, NULL, &got),
                    GOSSIP_CERT_OK);
                c.authority_id = gossip_key_id(pk_ca);
                assert_cert_equal(&got, &c);
        }
        assert_int_equal(n, GOSSIP_CERT_MIN_BYTES);
}

static void test_cert_sign_refuses(void **state)
{
        struct gossip_cert c = vector_cert(), bad;
        uint8_t b[GOSSIP_CERT_MAX_BYTES];
        static const char *names[] = {"", "a b", "pi/1", "ä",
                                      "0123456789012345678901234567890x"};

        (void)state;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                bad = c;
                snprintf(bad.name, sizeof(bad.name), "%s", names[i]);
                if (strlen(names[i]) >= sizeof(bad.name)) /* 32: no NUL */
                        memcpy(bad.name, names[i], sizeof(bad.name));
                assert_int_equal(gossip_cert_sign(&bad, sk_ca, b, sizeof(b)),
                                 GOSSIP_EINVAL);
        }
        bad = c;
        bad.serial = 0;
        assert_int_equal(gossip_cert_sign(&bad, sk_ca, b, sizeof(b)),
                         GOSSIP_EINVAL);
        bad = c;
        bad.not_after = bad.not_before - 1;
        assert_int_equal(gossip_cert_sign(&bad, sk_ca, b, sizeof(b)),
                         GOSSIP_EINVAL);
        bad = c;
        bad.addr.port = 0;
        assert_int_equal(gossip_cert_sign(&bad, sk_ca, b, sizeof(b)),
                         GOSSIP_EINVAL);
        bad = c;
        bad.addr.family = 5;
        assert_int_equal(gossip_cert_sign(&bad, sk_ca, b, sizeof(b)),
                         GOSSIP_EINVAL);
        bad = c;
        memset(bad.pk, 0, 32); /* small order: could never verify */
        assert_int_equal(gossip_cert_sign(&bad, sk_ca, b, sizeof(b)),
                         GOSSIP_EINVAL);
        /* one byte short of room */
        assert_int_equal(gossip_cert_sign(&c, sk_ca, b, 72 + 9 + 6 + 63),
                         GOSSIP_ETOOBIG);
        assert_int_equal(gossip_cert_sign(&c, sk_ca, b, 72 + 9 + 6 + 64),
                         72 + 9 + 6 + 64);
        /* not_after == not_before is a one-second certificate, allowed */
        bad = c;
        bad.not_after = bad.not_before;
        assert_true(gossip_cert_sign(&bad, sk_ca, b, sizeof(b)) > 0);
}

/* Which verdict a flipped bit at offset i of the vector certificate must
 * give: the field it lands in decides (protocol.md 12.2). */
static int flip_expect(size_t i, size_t n, int *alt)
{
        *alt = -1;
        if (i < 8) /* magic, version, lengths, reserved */
                return GOSSIP_CERT_MALFORMED;
        if (i < 16)
                return GOSSIP_CERT_WRONG_AUTHORITY;
        if (i < 48) { /* the device key may stop being a point */
                *alt = GOSSIP_CERT_MALFORMED;
                return GOSSIP_CERT_BAD_SIGNATURE;
        }
        if (i < 72) { /* serial, times: not_after < not_before refused */
                *alt = GOSSIP_CERT_MALFORMED;
                return GOSSIP_CERT_BAD_SIGNATURE;
        }
        if (i < 72 + 9) { /* name: a character outside the set */
                *alt = GOSSIP_CERT_MALFORMED;
                return GOSSIP_CERT_BAD_SIGNATURE;
        }
        if (i < n - 64) { /* address: port 0 refused */
                *alt = GOSSIP_CERT_MALFORMED;
                return GOSSIP_CERT_BAD_SIGNATURE;
        }
        return GOSSIP_CERT_BAD_SIGNATURE;
}

static void test_cert_every_bit_flip(void **state)
{
        struct gossip_cert c = vector_cert();
        uint8_t b[GOSSIP_CERT_MAX_BYTES], m[GOSSIP_CERT_MAX_BYTES];
        size_t n = sign_cert(&c, sk_ca, b);
        unsigned seen[GOSSIP_CERT_VERDICT_COUNT] = {0};

        (void)state;
        for (size_t i = 0; i < n; i++) {
                for (int bit = 0; bit < 8; bit++) {
                        int alt, want = flip_expect(i, n, &alt), v;

                        memcpy(m, b, n);
                        m[i] ^= (uint8_t)(1u << bit);
                        v = at(m, n, NB + 1);
                        if (v != want && v != alt)
                                fail_msg("byte %zu bit %d: verdict %s, want "
                                         "%s",
                                         i, bit, gossip_cert_verdict_name(v),
                                         gossip_cert_verdict_name(want));
                        seen[v]++;
                }
        }
        assert_int_equal(seen[GOSSIP_CERT_OK], 0);
        assert_int_equal(seen[GOSSIP_CERT_WRONG_AUTHORITY], 64);
        assert_true(seen[GOSSIP_CERT_MALFORMED] > 64);
        assert_true(seen[GOSSIP_CERT_BAD_SIGNATURE] > 512);
}

static void test_cert_wrong_authority_and_forged(void **state)
{
        struct gossip_cert c = vector_cert(), got;
        uint8_t b[GOSSIP_CERT_MAX_BYTES];
        size_t n = sign_cert(&c, sk_ca, b);

        (void)state;
        /* ours, judged by a node trusting another authority */
        assert_int_equal(gossip_cert_verify(b, n, pk_x, NB, 1, NULL, &got),
                         GOSSIP_CERT_WRONG_AUTHORITY);
        assert_string_equal(got.name, "pi-garage"); /* refusal names it */
        /* signed by X but claiming our authority's key id: forged */
        n = sign_cert(&c, sk_x, b);
        assert_int_equal(at(b, n, NB), GOSSIP_CERT_WRONG_AUTHORITY);
        gn_be_put(b + 8, gossip_key_id(pk_ca), 8);
        assert_int_equal(at(b, n, NB), GOSSIP_CERT_BAD_SIGNATURE);
        /* a device signing its own certificate is the same forgery */
        n = sign_cert(&c, sk_a, b);
        gn_be_put(b + 8, gossip_key_id(pk_ca), 8);
        assert_int_equal(at(b, n, NB), GOSSIP_CERT_BAD_SIGNATURE);
}

static void test_cert_time_edges(void **state)
{
        struct gossip_cert c = vector_cert();
        uint8_t b[GOSSIP_CERT_MAX_BYTES];
        size_t n = sign_cert(&c, sk_ca, b);

        (void)state;
        /* clock known: the window, widened by the skew either side */
        assert_int_equal(at(b, n, NB - SKEW - 1), GOSSIP_CERT_NOT_YET_VALID);
        assert_int_equal(at(b, n, NB - SKEW), GOSSIP_CERT_OK);
        assert_int_equal(at(b, n, NB), GOSSIP_CERT_OK);
        assert_int_equal(at(b, n, NA), GOSSIP_CERT_OK);
        assert_int_equal(at(b, n, NA + SKEW), GOSSIP_CERT_OK);
        assert_int_equal(at(b, n, NA + SKEW + 1), GOSSIP_CERT_EXPIRED);
        assert_int_equal(at(b, n, 0), GOSSIP_CERT_NOT_YET_VALID);
        assert_int_equal(at(b, n, UINT64_MAX), GOSSIP_CERT_EXPIRED);

        /* no clock: now is ignored whatever it says */
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, 0, 0, NULL, NULL),
                         GOSSIP_CERT_OK);
        assert_int_equal(
            gossip_cert_verify(b, n, pk_ca, UINT64_MAX, 0, NULL, NULL),
            GOSSIP_CERT_OK);

        /* windows at the ends of the range do not wrap */
        c.not_before = 0;
        c.not_after = 10;
        n = sign_cert(&c, sk_ca, b);
        assert_int_equal(at(b, n, 0), GOSSIP_CERT_OK);
        assert_int_equal(at(b, n, 10 + SKEW), GOSSIP_CERT_OK);
        assert_int_equal(at(b, n, 11 + SKEW), GOSSIP_CERT_EXPIRED);
        c.not_before = UINT64_MAX - 10;
        c.not_after = UINT64_MAX;
        n = sign_cert(&c, sk_ca, b);
        assert_int_equal(at(b, n, UINT64_MAX), GOSSIP_CERT_OK);
        assert_int_equal(at(b, n, UINT64_MAX - 11 - SKEW),
                         GOSSIP_CERT_NOT_YET_VALID);
}

static void test_cert_crl_floor(void **state)
{
        struct gossip_cert c = vector_cert();
        uint8_t b[GOSSIP_CERT_MAX_BYTES], lb[256];
        uint64_t other = 7;
        struct gossip_crl l;
        size_t n = sign_cert(&c, sk_ca, b), ln;

        (void)state;
        /* a list signed at the last second the certificate is good */
        ln = sign_crl(1, NA + SKEW, &other, 1, sk_ca, lb, sizeof(lb));
        assert_int_equal(gossip_crl_verify(lb, ln, pk_ca, &l), GOSSIP_CRL_OK);
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, 0, 0, &l, NULL),
                         GOSSIP_CERT_OK);
        /* a clock behind the authority's word is overruled by it */
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, NB, 1, &l, NULL),
                         GOSSIP_CERT_OK);
        /* one second later, with or without a clock */
        ln = sign_crl(2, NA + SKEW + 1, &other, 1, sk_ca, lb, sizeof(lb));
        assert_int_equal(gossip_crl_verify(lb, ln, pk_ca, &l), GOSSIP_CRL_OK);
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, 0, 0, &l, NULL),
                         GOSSIP_CERT_EXPIRED);
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, NB, 1, &l, NULL),
                         GOSSIP_CERT_EXPIRED);
        /* the list never judges not_before: issued_at is only a floor */
        ln = sign_crl(3, 0, &other, 1, sk_ca, lb, sizeof(lb));
        assert_int_equal(gossip_crl_verify(lb, ln, pk_ca, &l), GOSSIP_CRL_OK);
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, 0, 0, &l, NULL),
                         GOSSIP_CERT_OK);
        /* another authority's list is ignored, floor and serials alike */
        ln = sign_crl(9, UINT64_MAX, &c.serial, 1, sk_x, lb, sizeof(lb));
        assert_int_equal(gossip_crl_verify(lb, ln, pk_x, &l), GOSSIP_CRL_OK);
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, NB, 1, &l, NULL),
                         GOSSIP_CERT_OK);
}

static void test_cert_revoked(void **state)
{
        struct gossip_cert c = vector_cert();
        uint8_t b[GOSSIP_CERT_MAX_BYTES], lb[256];
        uint64_t s[3] = {1, SERIAL, UINT64_MAX};
        struct gossip_crl l;
        size_t n = sign_cert(&c, sk_ca, b), ln;

        (void)state;
        ln = sign_crl(1, NB, s, 3, sk_ca, lb, sizeof(lb));
        assert_int_equal(gossip_crl_verify(lb, ln, pk_ca, &l), GOSSIP_CRL_OK);
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, NB, 1, &l, NULL),
                         GOSSIP_CERT_REVOKED);
        /* revoked outranks the time verdicts */
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, 0, 1, &l, NULL),
                         GOSSIP_CERT_REVOKED);
        assert_int_equal(
            gossip_cert_verify(b, n, pk_ca, UINT64_MAX, 1, &l, NULL),
            GOSSIP_CERT_REVOKED);
        /* neighbours of a revoked serial are not revoked */
        c.serial = SERIAL + 1;
        n = sign_cert(&c, sk_ca, b);
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, NB, 1, &l, NULL),
                         GOSSIP_CERT_OK);
        c.serial = SERIAL - 1;
        n = sign_cert(&c, sk_ca, b);
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, NB, 1, &l, NULL),
                         GOSSIP_CERT_OK);
        /* a forged certificate is counted as forged, not as revoked */
        c.serial = SERIAL;
        n = sign_cert(&c, sk_ca, b);
        b[n - 1] ^= 1;
        assert_int_equal(gossip_cert_verify(b, n, pk_ca, NB, 1, &l, NULL),
                         GOSSIP_CERT_BAD_SIGNATURE);
}

/* Signs b[0..n - 64) in place: a blob that breaks a rule yet verifies,
 * so that only the decoder can refuse it. */
static void resign(uint8_t *b, size_t n, const uint8_t *sk)
{
        crypto_sign_detached(b + n - 64, NULL, b, n - 64, sk);
}

static void test_cert_decoder_strict(void **state)
{
        struct gossip_cert c = vector_cert();
        uint8_t b[GOSSIP_CERT_MAX_BYTES + 8], m[GOSSIP_CERT_MAX_BYTES + 8];
        size_t n = sign_cert(&c, sk_ca, b);
        const char *why;

        (void)state;
        /* every truncation, and one trailing byte */
        for (size_t k = 0; k < n; k++)
                assert_int_equal(at(b, k, NB), GOSSIP_CERT_MALFORMED);
        memcpy(m, b, n);
        m[n] = 0;
        assert_int_equal(gossip_cert_decode(m, n + 1, NULL, &why),
                         GOSSIP_CERT_MALFORMED);
        assert_string_equal(why, "trailing bytes");
        assert_int_equal(gossip_cert_decode(b, n, NULL, &why), GOSSIP_CERT_OK);
        assert_null(why);

        /* correctly signed, but each breaks one rule */
        struct {
                size_t off;
                uint8_t val;
                const char *why;
        } cases[] = {
            {4, 2, "unknown version"},
            {6, 4, "address length not 0, 6 or 18"},
            {7, 1, "reserved byte not zero"},
            {72, ' ', "bad name (1-31 of A-Z a-z 0-9 . _ -)"},
            {72 + 8, 0, "bad name (1-31 of A-Z a-z 0-9 . _ -)"},
            {72 + 9 + 4, 0, NULL}, /* port 0: both bytes, below */
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                memcpy(m, b, n);
                m[cases[i].off] = cases[i].val;
                if (!cases[i].why)
                        m[cases[i].off + 1] = 0;
                resign(m, n, sk_ca);
                assert_int_equal(at(m, n, NB), GOSSIP_CERT_MALFORMED);
                gossip_cert_decode(m, n, NULL, &why);
                assert_string_equal(why, cases[i].why ? cases[i].why
                                                      : "address port 0");
        }
        /* a name length that moves the address and signature: 0 and 32 */
        memcpy(m, b, n);
        m[5] = 0;
        assert_int_equal(gossip_cert_decode(m, n, NULL, &why),
                         GOSSIP_CERT_MALFORMED);
        assert_string_equal(why, "trailing bytes");
        memcpy(m, b, n);
        m[5] = 0;
        memmove(m + 72, m + 81, n - 81);
        resign(m, n - 9, sk_ca);
        gossip_cert_decode(m, n - 9, NULL, &why);
        assert_string_equal(why, "bad name (1-31 of A-Z a-z 0-9 . _ -)");
        /* serial 0, and not_after one second before not_before */
        memcpy(m, b, n);
        memset(m + 48, 0, 8);
        resign(m, n, sk_ca);
        gossip_cert_decode(m, n, NULL, &why);
        assert_string_equal(why, "serial 0");
        memcpy(m, b, n);
        gn_be_put(m + 64, NB - 1, 8);
        resign(m, n, sk_ca);
        gossip_cert_decode(m, n, NULL, &why);
        assert_string_equal(why, "not_after before not_before");
        /* a frame is not a certificate (protocol.md 12.1: the magic) */
        memcpy(m, b, n);
        m[2] = 0x01;
        gossip_cert_decode(m, n, NULL, &why);
        assert_string_equal(why, "bad magic (not a certificate)");
}

static void test_crl_roundtrip_and_lookup(void **state)
{
        enum { N = GOSSIP_CRL_MAX_SERIALS };
        static uint64_t s[N + 1];
        static uint8_t b[GOSSIP_CRL_MAX_BYTES + 8];
        uint64_t rng = seed, x = 0;
        struct gossip_crl l;
        size_t n;

        (void)state;
        for (uint32_t i = 0; i < N + 1; i++) {
                x += 1 + (gn_splitmix64(&rng) >> 52);
                s[i] = x;
        }
        /* the most a list may hold, and not one more */
        assert_int_equal(gossip_crl_sign(1, 5, s, N + 1, sk_ca, b, sizeof(b)),
                         GOSSIP_EINVAL);
        assert_int_equal(
            gossip_crl_sign(1, 5, s, N, sk_ca, b, GOSSIP_CRL_MAX_BYTES - 1),
            GOSSIP_ETOOBIG);
        n = sign_crl(77, 5, s, N, sk_ca, b, sizeof(b));
        assert_int_equal(n, GOSSIP_CRL_MAX_BYTES);
        assert_int_equal(gossip_crl_verify(b, n, pk_ca, &l), GOSSIP_CRL_OK);
        assert_int_equal(l.seq, 77);
        assert_int_equal(l.issued_at, 5);
        assert_int_equal(l.n_serials, N);
        assert_int_equal(l.authority_id, gossip_key_id(pk_ca));
        assert_ptr_equal(l.bytes, b);
        assert_int_equal(l.len, n);
        for (uint32_t i = 0; i < N; i++) {
                assert_true(gossip_crl_has(&l, s[i]));
                if (s[i] - 1 != (i ? s[i - 1] : 0))
                        assert_false(gossip_crl_has(&l, s[i] - 1));
        }
        assert_false(gossip_crl_has(&l, s[N]));
        assert_false(gossip_crl_has(&l, 0));
        /* the empty list is a list */
        n = sign_crl(1, 0, NULL, 0, sk_ca, b, sizeof(b));
        assert_int_equal(n, GOSSIP_CRL_HEAD_BYTES + 64);
        assert_int_equal(gossip_crl_verify(b, n, pk_ca, &l), GOSSIP_CRL_OK);
        assert_false(gossip_crl_has(&l, 1));
}

static void test_crl_sign_refuses(void **state)
{
        uint8_t b[256];
        uint64_t unsorted[2] = {5, 3}, dup[2] = {5, 5}, zero[2] = {0, 5};

        (void)state;
        assert_int_equal(gossip_crl_sign(1, 0, unsorted, 2, sk_ca, b, 256),
                         GOSSIP_EINVAL);
        assert_int_equal(gossip_crl_sign(1, 0, dup, 2, sk_ca, b, 256),
                         GOSSIP_EINVAL);
        assert_int_equal(gossip_crl_sign(1, 0, zero, 2, sk_ca, b, 256),
                         GOSSIP_EINVAL);
        assert_int_equal(gossip_crl_sign(0, 0, NULL, 0, sk_ca, b, 256),
                         GOSSIP_EINVAL);
}

static void test_crl_decoder_strict(void **state)
{
        uint64_t s[3] = {3, 5, 9};
        uint8_t b[256], m[256];
        size_t n = sign_crl(4, 1000, s, 3, sk_ca, b, sizeof(b));
        const char *why;
        struct {
                size_t off;
                uint64_t val;
                int width;
                const char *why;
        } cases[] = {
            {4, 2, 1, "unknown version"},
            {6, 1, 1, "reserved bytes not zero"},
            {8, 0, 8, "authority key id 0"},
            {16, 0, 8, "sequence 0"},
            {36 + 8, 3, 8, "serials not strictly ascending"}, /* duplicate */
            {36 + 8, 2, 8, "serials not strictly ascending"},
            {36, 0, 8, "serial 0"},
        };

        (void)state;
        for (size_t k = 0; k < n; k++)
                assert_int_equal(gossip_crl_verify(b, k, pk_ca, NULL),
                                 GOSSIP_CRL_MALFORMED);
        memcpy(m, b, n);
        m[n] = 0;
        gossip_crl_decode(m, n + 1, NULL, &why);
        assert_string_equal(why, "trailing bytes");
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                memcpy(m, b, n);
                gn_be_put(m + cases[i].off, cases[i].val, cases[i].width);
                resign(m, n, sk_ca);
                assert_int_equal(gossip_crl_verify(m, n, pk_ca, NULL),
                                 GOSSIP_CRL_MALFORMED);
                gossip_crl_decode(m, n, NULL, &why);
                assert_string_equal(why, cases[i].why);
        }
        /* a count that does not match the length, either way */
        memcpy(m, b, n);
        gn_be_put(m + 32, 4, 4);
        gossip_crl_decode(m, n, NULL, &why);
        assert_string_equal(why, "shorter than its count says");
        gn_be_put(m + 32, 2, 4);
        gossip_crl_decode(m, n, NULL, &why);
        assert_string_equal(why, "trailing bytes");
        gn_be_put(m + 32, GOSSIP_CRL_MAX_SERIALS + 1, 4);
        gossip_crl_decode(m, n, NULL, &why);
        assert_string_equal(why, "more serials than a list may hold");
}

static void test_crl_every_bit_flip(void **state)
{
        uint64_t s[2] = {3, 9};
        uint8_t b[256], m[256];
        size_t n = sign_crl(4, 1000, s, 2, sk_ca, b, sizeof(b));

        (void)state;
        for (size_t i = 0; i < n; i++) {
                for (int bit = 0; bit < 8; bit++) {
                        int v;

                        memcpy(m, b, n);
                        m[i] ^= (uint8_t)(1u << bit);
                        v = gossip_crl_verify(m, n, pk_ca, NULL);
                        if (i >= 8 && i < 16)
                                assert_int_equal(v, GOSSIP_CRL_WRONG_AUTHORITY);
                        else if (i < 8 || (i >= 32 && i < 36))
                                assert_int_equal(v, GOSSIP_CRL_MALFORMED);
                        else if (v != GOSSIP_CRL_BAD_SIGNATURE &&
                                 v != GOSSIP_CRL_MALFORMED)
                                fail_msg("byte %zu bit %d: %s", i, bit,
                                         gossip_crl_verdict_name(v));
                }
        }
}

static void test_crl_merge(void **state)
{
        uint64_t s1[1] = {10}, s2[2] = {10, 20}, s3[1] = {30};
        uint8_t b1[128], b2[128], b2b[128], b3[128], bx[128];
        size_t n1 = sign_crl(1, 100, s1, 1, sk_ca, b1, sizeof(b1));
        size_t n2 = sign_crl(2, 200, s2, 2, sk_ca, b2, sizeof(b2));
        size_t n2b = sign_crl(2, 200, s3, 1, sk_ca, b2b, sizeof(b2b));
        size_t n3 = sign_crl(3, 150, s3, 1, sk_ca, b3, sizeof(b3));
        size_t nx = sign_crl(9, 900, s3, 1, sk_x, bx, sizeof(bx));
        struct gossip_crl cur, got;

        (void)state;
        /* nothing held: any valid list of our authority is taken */
        assert_int_equal(gossip_crl_merge(NULL, b1, n1, pk_ca, &cur),
                         GOSSIP_CRL_OK);
        assert_int_equal(cur.seq, 1);
        /* newer taken; older, same, conflicting refused, cur unchanged */
        assert_int_equal(gossip_crl_merge(&cur, b2, n2, pk_ca, &cur),
                         GOSSIP_CRL_OK);
        assert_int_equal(cur.seq, 2);
        assert_ptr_equal(cur.bytes, b2);
        memset(&got, 0, sizeof(got));
        assert_int_equal(gossip_crl_merge(&cur, b1, n1, pk_ca, &got),
                         GOSSIP_CRL_OLDER);
        assert_int_equal(gossip_crl_merge(&cur, b2, n2, pk_ca, &got),
                         GOSSIP_CRL_SAME);
        assert_int_equal(gossip_crl_merge(&cur, b2b, n2b, pk_ca, &got),
                         GOSSIP_CRL_CONFLICT);
        assert_null(got.bytes); /* out untouched on refusal */
        /* a newer sequence wins even with an older issued_at: the sequence
         * is the order, the time only a floor */
        assert_int_equal(gossip_crl_merge(&cur, b3, n3, pk_ca, &got),
                         GOSSIP_CRL_OK);
        /* forged: a newer sequence claimed without our signature */
        memcpy(b2b, b3, n3);
        gn_be_put(b2b + 16, 1000, 8);
        assert_int_equal(gossip_crl_merge(&cur, b2b, n3, pk_ca, &got),
                         GOSSIP_CRL_BAD_SIGNATURE);
        assert_int_equal(gossip_crl_merge(&cur, bx, nx, pk_ca, &got),
                         GOSSIP_CRL_WRONG_AUTHORITY);
        gn_be_put(bx + 8, gossip_key_id(pk_ca), 8);
        assert_int_equal(gossip_crl_merge(&cur, bx, nx, pk_ca, &got),
                         GOSSIP_CRL_BAD_SIGNATURE);
        assert_int_equal(gossip_crl_merge(&cur, b3, n3 - 1, pk_ca, &got),
                         GOSSIP_CRL_MALFORMED);
        assert_int_equal(cur.seq, 2);
}

static void test_names_and_counters(void **state)
{
        struct gossip_cert_stats cs = {{0}};
        struct gossip_crl_stats ls = {{0}};

        (void)state;
        assert_string_equal(gossip_cert_verdict_name(GOSSIP_CERT_OK), "ok");
        assert_string_equal(gossip_cert_verdict_name(GOSSIP_CERT_REVOKED),
                            "revoked");
        assert_string_equal(gossip_cert_verdict_name(GOSSIP_CERT_EXPIRED),
                            "expired");
        assert_null(gossip_cert_verdict_name(GOSSIP_CERT_VERDICT_COUNT));
        assert_null(gossip_cert_verdict_name(-1));
        assert_string_equal(gossip_crl_verdict_name(GOSSIP_CRL_CONFLICT),
                            "conflict");
        assert_null(gossip_crl_verdict_name(GOSSIP_CRL_VERDICT_COUNT));
        for (int v = 0; v < GOSSIP_CERT_VERDICT_COUNT; v++)
                assert_non_null(gossip_cert_verdict_name(v));
        gossip_cert_stats_count(&cs, GOSSIP_CERT_EXPIRED);
        gossip_cert_stats_count(&cs, GOSSIP_CERT_EXPIRED);
        gossip_cert_stats_count(&cs, GOSSIP_CERT_VERDICT_COUNT);
        gossip_cert_stats_count(&cs, -1);
        gossip_crl_stats_count(&ls, GOSSIP_CRL_OLDER);
        assert_int_equal(cs.n[GOSSIP_CERT_EXPIRED], 2);
        assert_int_equal(cs.n[GOSSIP_CERT_OK], 0);
        assert_int_equal(ls.n[GOSSIP_CRL_OLDER], 1);
}

/* protocol.md 12.5: the authority (seed 80..9f), the device (key A), the
 * vector certificate and a list revoking it; checked against the
 * document, or printed with GN_CERT_PRINT_VECTORS=1. */
static void test_protocol_vectors(void **state)
{
        uint64_t s[2] = {SERIAL, UINT64_C(0xfedcba9876543210)};
        struct gossip_cert c = vector_cert();
        uint8_t cb[GOSSIP_CERT_MAX_BYTES], lb[256], want[512], id[8];
        int print = getenv("GN_CERT_PRINT_VECTORS") != NULL;
        char *doc =
            print ? NULL : gn_test_read_file(GN_SOURCE_DIR "/docs/protocol.md");
        size_t cn = sign_cert(&c, sk_ca, cb);
        size_t ln = sign_crl(2, 1800000000, s, 2, sk_ca, lb, sizeof(lb));
        struct {
                const char *name;
                const uint8_t *b;
                size_t n;
        } v[] = {
            {"authority_pk", pk_ca, 32},
            {"authority_id", id, 8},
            {"cert", cb, cn},
            {"crl", lb, ln},
        };
        struct gossip_crl l;

        (void)state;
        gn_be_put(id, gossip_key_id(pk_ca), 8);
        if (!print)
                assert_non_null(doc);
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
                size_t n;

                if (print) {
                        gn_test_print_vector(v[i].name, v[i].b, v[i].n);
                        continue;
                }
                n = gn_test_doc_vector(doc, v[i].name, want, sizeof(want));
                if (n != v[i].n)
                        fail_msg("vector %s: %zu bytes in the doc, %zu made",
                                 v[i].name, n, v[i].n);
                assert_memory_equal(want, v[i].b, n);
        }
        free(doc);
        /* and what the document says they mean */
        assert_int_equal(at(cb, cn, NB), GOSSIP_CERT_OK);
        assert_int_equal(gossip_crl_merge(NULL, lb, ln, pk_ca, &l),
                         GOSSIP_CRL_OK);
        assert_int_equal(gossip_cert_verify(cb, cn, pk_ca, NB, 1, &l, NULL),
                         GOSSIP_CERT_REVOKED);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_cert_roundtrip),
            cmocka_unit_test(test_cert_sign_refuses),
            cmocka_unit_test(test_cert_every_bit_flip),
            cmocka_unit_test(test_cert_wrong_authority_and_forged),
            cmocka_unit_test(test_cert_time_edges),
            cmocka_unit_test(test_cert_crl_floor),
            cmocka_unit_test(test_cert_revoked),
            cmocka_unit_test(test_cert_decoder_strict),
            cmocka_unit_test(test_crl_roundtrip_and_lookup),
            cmocka_unit_test(test_crl_sign_refuses),
            cmocka_unit_test(test_crl_decoder_strict),
            cmocka_unit_test(test_crl_every_bit_flip),
            cmocka_unit_test(test_crl_merge),
            cmocka_unit_test(test_names_and_counters),
            cmocka_unit_test(test_protocol_vectors),
        };

        return cmocka_run_group_tests(tests, group_setup, NULL);
}
