/*
 * cert.c - device certificates and revocation lists (cert.h; the layouts
 * are docs/protocol.md section 12).
 *
 * Decoding checks the exact length first, then every field, before any
 * signature work: a certificate is accepted only at exactly the length its
 * own name and address lengths give, a list only at exactly the length its
 * count gives. Signing refuses anything the decoder would refuse, so a
 * signed blob always decodes. Nothing here allocates, reads a clock or
 * keeps state; decoded lists are views into the caller's buffer.
 */
#include "gossip/cert.h"

#include <string.h>

#include <sodium.h>

#include "base/gn_endian.h"
#include "gossip/wire.h"

static const uint8_t cert_magic[4] = {'G', 'N', 'C', 'T'};
static const uint8_t crl_magic[4] = {'G', 'N', 'R', 'L'};

/* Field offsets of the certificate's fixed part (protocol.md 12.2). */
enum {
        C_VERSION = 4,
        C_NAME_LEN = 5,
        C_ADDR_LEN = 6,
        C_RESERVED = 7,
        C_AUTHORITY = 8,
        C_PK = 16,
        C_SERIAL = 48,
        C_NOT_BEFORE = 56,
        C_NOT_AFTER = 64,
        C_NAME = GOSSIP_CERT_HEAD_BYTES,
};

/* ... and of the list's (protocol.md 12.3). */
enum {
        L_VERSION = 4,
        L_RESERVED = 5, /* 3 bytes */
        L_AUTHORITY = 8,
        L_SEQ = 16,
        L_ISSUED_AT = 24,
        L_COUNT = 32,
        L_SERIALS = GOSSIP_CRL_HEAD_BYTES,
};

static const char *const cert_names[GOSSIP_CERT_VERDICT_COUNT] = {
    "ok",      "malformed",     "wrong_authority", "bad_signature",
    "revoked", "not_yet_valid", "expired",
};

static const char *const crl_names[GOSSIP_CRL_VERDICT_COUNT] = {
    "ok",
    "same",
    "older",
    "conflict",
    "malformed",
    "wrong_authority",
    "bad_signature",
};

const char *gossip_cert_verdict_name(int v)
{
        return v >= 0 && v < GOSSIP_CERT_VERDICT_COUNT ? cert_names[v] : NULL;
}

const char *gossip_crl_verdict_name(int v)
{
        return v >= 0 && v < GOSSIP_CRL_VERDICT_COUNT ? crl_names[v] : NULL;
}

void gossip_cert_stats_count(struct gossip_cert_stats *st, int v)
{
        if (v >= 0 && v < GOSSIP_CERT_VERDICT_COUNT)
                st->n[v]++;
}

void gossip_crl_stats_count(struct gossip_crl_stats *st, int v)
{
        if (v >= 0 && v < GOSSIP_CRL_VERDICT_COUNT)
                st->n[v]++;
}

/* 1 if name[0..n) is a valid certificate name. */
static int name_ok(const uint8_t *name, size_t n)
{
        static const char allowed[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "abcdefghijklmnopqrstuvwxyz"
                                      "0123456789._-";

        if (n < 1 || n >= GOSSIP_CERT_NAME_MAX)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (name[i] == 0 || !strchr(allowed, name[i]))
                        return 0;
        return 1;
}

/* The address's length on the wire (protocol.md 3.3), 0 for none, -1 if
 * it cannot be written. */
static int addr_len(const struct gossip_addr *a)
{
        if (a->family == 0)
                return 0;
        if ((a->family != 4 && a->family != 6) || a->port == 0)
                return -1;
        return a->family == 4 ? 6 : 18;
}

static void addr_put(uint8_t *p, const struct gossip_addr *a)
{
        size_t n = a->family == 4 ? 4 : 16;

        memcpy(p, a->addr, n);
        gn_be_put(p + n, a->port, 2);
}

/* Reads an address of n bytes (6 or 18); 0, or -1 on port 0. */
static int addr_get(const uint8_t *p, size_t n, struct gossip_addr *a)
{
        size_t k = n - 2;

        memset(a, 0, sizeof(*a));
        a->family = n == 6 ? 4 : 6;
        memcpy(a->addr, p, k);
        a->port = (uint16_t)gn_be_get(p + k, 2);
        return a->port ? 0 : -1;
}

static int pk_ok(const uint8_t pk[GOSSIP_KEY_BYTES])
{
        return crypto_core_ed25519_is_valid_point(pk) == 1;
}

int gossip_cert_sign(const struct gossip_cert *c,
                     const uint8_t authority_sk[GOSSIP_SECRET_BYTES],
                     uint8_t *buf, size_t cap)
{
        size_t n = strnlen(c->name, GOSSIP_CERT_NAME_MAX);
        int a = addr_len(&c->addr);
        size_t body;

        if (!name_ok((const uint8_t *)c->name, n) || a < 0 || !c->serial ||
            c->not_after < c->not_before || !pk_ok(c->pk))
                return GOSSIP_EINVAL;
        body = C_NAME + n + (size_t)a;
        if (cap < body + GOSSIP_SIG_BYTES)
                return GOSSIP_ETOOBIG;
        memcpy(buf, cert_magic, 4);
        buf[C_VERSION] = GOSSIP_CERT_VERSION;
        buf[C_NAME_LEN] = (uint8_t)n;
        buf[C_ADDR_LEN] = (uint8_t)a;
        buf[C_RESERVED] = 0;
        gn_be_put(buf + C_AUTHORITY, gossip_key_id(authority_sk + 32), 8);
        memcpy(buf + C_PK, c->pk, GOSSIP_KEY_BYTES);
        gn_be_put(buf + C_SERIAL, c->serial, 8);
        gn_be_put(buf + C_NOT_BEFORE, c->not_before, 8);
        gn_be_put(buf + C_NOT_AFTER, c->not_after, 8);
        memcpy(buf + C_NAME, c->name, n);
        if (a)
                addr_put(buf + C_NAME + n, &c->addr);
        crypto_sign_detached(buf + body, NULL, buf, body, authority_sk);
        return (int)(body + GOSSIP_SIG_BYTES);
}

/* The decode checks in order; the first that fails names the verdict. */
static const char *cert_check(const uint8_t *b, size_t len)
{
        size_t n, a;

        if (len < 4 || memcmp(b, cert_magic, 4) != 0)
                return "bad magic (not a certificate)";
        if (len < GOSSIP_CERT_MIN_BYTES)
                return "shorter than the smallest certificate";
        if (b[C_VERSION] != GOSSIP_CERT_VERSION)
                return "unknown version";
        n = b[C_NAME_LEN];
        a = b[C_ADDR_LEN];
        if (a != 0 && a != 6 && a != 18)
                return "address length not 0, 6 or 18";
        if (len < C_NAME + n + a + GOSSIP_SIG_BYTES)
                return "shorter than its lengths say";
        if (len > C_NAME + n + a + GOSSIP_SIG_BYTES)
                return "trailing bytes";
        if (b[C_RESERVED] != 0)
                return "reserved byte not zero";
        if (gn_be_get(b + C_AUTHORITY, 8) == 0)
                return "authority key id 0";
        if (!pk_ok(b + C_PK))
                return "device key is not an Ed25519 public key";
        if (gn_be_get(b + C_SERIAL, 8) == 0)
                return "serial 0";
        if (gn_be_get(b + C_NOT_AFTER, 8) < gn_be_get(b + C_NOT_BEFORE, 8))
                return "not_after before not_before";
        if (!name_ok(b + C_NAME, n))
                return "bad name (1-31 of A-Z a-z 0-9 . _ -)";
        return NULL;
}

enum gossip_cert_verdict gossip_cert_decode(const void *buf, size_t len,
                                            struct gossip_cert *out,
                                            const char **why)
{
        const uint8_t *b = buf;
        const char *bad = cert_check(b, len);
        struct gossip_cert c;
        size_t n;

        memset(&c, 0, sizeof(c));
        if (!bad) {
                n = b[C_NAME_LEN];
                if (b[C_ADDR_LEN] &&
                    addr_get(b + C_NAME + n, b[C_ADDR_LEN], &c.addr) < 0)
                        bad = "address port 0";
        }
        if (why)
                *why = bad;
        if (bad)
                return GOSSIP_CERT_MALFORMED;
        c.authority_id = gn_be_get(b + C_AUTHORITY, 8);
        memcpy(c.pk, b + C_PK, GOSSIP_KEY_BYTES);
        c.serial = gn_be_get(b + C_SERIAL, 8);
        c.not_before = gn_be_get(b + C_NOT_BEFORE, 8);
        c.not_after = gn_be_get(b + C_NOT_AFTER, 8);
        memcpy(c.name, b + C_NAME, n);
        if (out)
                *out = c;
        return GOSSIP_CERT_OK;
}

/* The time checks of gossip_cert_verify (cert.h says the rule). */
static enum gossip_cert_verdict cert_time(const struct gossip_cert *c,
                                          uint64_t now, int clock_known,
                                          const struct gossip_crl *crl)
{
        const uint64_t skew = GOSSIP_CERT_SKEW_S;
        uint64_t floor = clock_known ? now : 0;

        if (clock_known && c->not_before > skew && now < c->not_before - skew)
                return GOSSIP_CERT_NOT_YET_VALID;
        if (crl && crl->issued_at > floor)
                floor = crl->issued_at;
        if (floor > skew && floor - skew > c->not_after)
                return GOSSIP_CERT_EXPIRED;
        return GOSSIP_CERT_OK;
}

enum gossip_cert_verdict
gossip_cert_verify(const void *buf, size_t len,
                   const uint8_t authority_pk[GOSSIP_KEY_BYTES], uint64_t now,
                   int clock_known, const struct gossip_crl *crl,
                   struct gossip_cert *out)
{
        struct gossip_cert c;
        uint64_t id = gossip_key_id(authority_pk);
        size_t signed_len = len - GOSSIP_SIG_BYTES;

        if (gossip_cert_decode(buf, len, &c, NULL) != GOSSIP_CERT_OK)
                return GOSSIP_CERT_MALFORMED;
        if (out)
                *out = c;
        if (c.authority_id != id)
                return GOSSIP_CERT_WRONG_AUTHORITY;
        if (crypto_sign_verify_detached((const uint8_t *)buf + signed_len, buf,
                                        signed_len, authority_pk) != 0)
                return GOSSIP_CERT_BAD_SIGNATURE;
        return gossip_cert_judge(&c, now, clock_known, crl);
}

enum gossip_cert_verdict gossip_cert_judge(const struct gossip_cert *c,
                                           uint64_t now, int clock_known,
                                           const struct gossip_crl *crl)
{
        if (crl && crl->authority_id != c->authority_id)
                crl = NULL;
        if (crl && gossip_crl_has(crl, c->serial))
                return GOSSIP_CERT_REVOKED;
        return cert_time(c, now, clock_known, crl);
}

int gossip_crl_sign(uint64_t seq, uint64_t issued_at, const uint64_t *serials,
                    uint32_t n, const uint8_t authority_sk[GOSSIP_SECRET_BYTES],
                    uint8_t *buf, size_t cap)
{
        size_t body = L_SERIALS + 8 * (size_t)n;

        if (!seq || n > GOSSIP_CRL_MAX_SERIALS || (n && !serials))
                return GOSSIP_EINVAL;
        for (uint32_t i = 0; i < n; i++)
                if (serials[i] == 0 || (i && serials[i] <= serials[i - 1]))
                        return GOSSIP_EINVAL;
        if (cap < body + GOSSIP_SIG_BYTES)
                return GOSSIP_ETOOBIG;
        memcpy(buf, crl_magic, 4);
        buf[L_VERSION] = GOSSIP_CRL_VERSION;
        memset(buf + L_RESERVED, 0, 3);
        gn_be_put(buf + L_AUTHORITY, gossip_key_id(authority_sk + 32), 8);
        gn_be_put(buf + L_SEQ, seq, 8);
        gn_be_put(buf + L_ISSUED_AT, issued_at, 8);
        gn_be_put(buf + L_COUNT, n, 4);
        for (uint32_t i = 0; i < n; i++)
                gn_be_put(buf + L_SERIALS + 8 * (size_t)i, serials[i], 8);
        crypto_sign_detached(buf + body, NULL, buf, body, authority_sk);
        return (int)(body + GOSSIP_SIG_BYTES);
}

static const char *crl_check(const uint8_t *b, size_t len)
{
        uint64_t n, prev = 0;

        if (len < 4 || memcmp(b, crl_magic, 4) != 0)
                return "bad magic (not a revocation list)";
        if (len < GOSSIP_CRL_HEAD_BYTES + GOSSIP_SIG_BYTES)
                return "shorter than the smallest revocation list";
        if (b[L_VERSION] != GOSSIP_CRL_VERSION)
                return "unknown version";
        n = gn_be_get(b + L_COUNT, 4);
        if (n > GOSSIP_CRL_MAX_SERIALS)
                return "more serials than a list may hold";
        if (len < L_SERIALS + 8 * n + GOSSIP_SIG_BYTES)
                return "shorter than its count says";
        if (len > L_SERIALS + 8 * n + GOSSIP_SIG_BYTES)
                return "trailing bytes";
        if (b[L_RESERVED] || b[L_RESERVED + 1] || b[L_RESERVED + 2])
                return "reserved bytes not zero";
        if (gn_be_get(b + L_AUTHORITY, 8) == 0)
                return "authority key id 0";
        if (gn_be_get(b + L_SEQ, 8) == 0)
                return "sequence 0";
        for (uint64_t i = 0; i < n; i++) {
                uint64_t s = gn_be_get(b + L_SERIALS + 8 * i, 8);

                if (s <= prev)
                        return s ? "serials not strictly ascending"
                                 : "serial 0";
                prev = s;
        }
        return NULL;
}

enum gossip_crl_verdict gossip_crl_decode(const void *buf, size_t len,
                                          struct gossip_crl *out,
                                          const char **why)
{
        const uint8_t *b = buf;
        const char *bad = crl_check(b, len);

        if (why)
                *why = bad;
        if (bad)
                return GOSSIP_CRL_MALFORMED;
        if (out) {
                out->authority_id = gn_be_get(b + L_AUTHORITY, 8);
                out->seq = gn_be_get(b + L_SEQ, 8);
                out->issued_at = gn_be_get(b + L_ISSUED_AT, 8);
                out->n_serials = (uint32_t)gn_be_get(b + L_COUNT, 4);
                out->serials = b + L_SERIALS;
                out->bytes = b;
                out->len = len;
        }
        return GOSSIP_CRL_OK;
}

enum gossip_crl_verdict
gossip_crl_verify(const void *buf, size_t len,
                  const uint8_t authority_pk[GOSSIP_KEY_BYTES],
                  struct gossip_crl *out)
{
        struct gossip_crl l;
        size_t signed_len = len - GOSSIP_SIG_BYTES;

        if (gossip_crl_decode(buf, len, &l, NULL) != GOSSIP_CRL_OK)
                return GOSSIP_CRL_MALFORMED;
        if (l.authority_id != gossip_key_id(authority_pk))
                return GOSSIP_CRL_WRONG_AUTHORITY;
        if (crypto_sign_verify_detached((const uint8_t *)buf + signed_len, buf,
                                        signed_len, authority_pk) != 0)
                return GOSSIP_CRL_BAD_SIGNATURE;
        if (out)
                *out = l;
        return GOSSIP_CRL_OK;
}

int gossip_crl_has(const struct gossip_crl *crl, uint64_t serial)
{
        size_t lo = 0, hi = crl->n_serials;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                uint64_t s = gn_be_get(crl->serials + 8 * mid, 8);

                if (s == serial)
                        return 1;
                if (s < serial)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return 0;
}

enum gossip_crl_verdict
gossip_crl_merge(const struct gossip_crl *cur, const void *buf, size_t len,
                 const uint8_t authority_pk[GOSSIP_KEY_BYTES],
                 struct gossip_crl *out)
{
        struct gossip_crl l;
        enum gossip_crl_verdict v;

        if (cur && cur->len == len && !memcmp(cur->bytes, buf, len))
                return GOSSIP_CRL_SAME;
        v = gossip_crl_verify(buf, len, authority_pk, &l);
        if (v != GOSSIP_CRL_OK)
                return v;
        if (cur && l.seq < cur->seq)
                return GOSSIP_CRL_OLDER;
        if (cur && l.seq == cur->seq)
                return cur->len == len && !memcmp(cur->bytes, buf, len)
                           ? GOSSIP_CRL_SAME
                           : GOSSIP_CRL_CONFLICT;
        if (out)
                *out = l;
        return GOSSIP_CRL_OK;
}
