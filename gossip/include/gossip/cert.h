/*
 * cert.h - the cluster authority's device certificates and revocation
 * lists: encode, decode, verify, and the rule that merges a newer list
 * (docs/protocol.md section 12, byte by byte, with test vectors).
 *
 * An authority is an Ed25519 key kept off the devices. A certificate says
 * "the device with this public key is called NAME (and may be reached at
 * ADDR) from not_before to not_after; its serial is S", signed by the
 * authority. A revocation list (CRL) is the authority's signed set of
 * revoked serials with a sequence number; a newer list replaces an older
 * one and a list never rolls back.
 *
 * Both are fixed binary layouts, not msgpack: one value has exactly one
 * encoding, so the signature covers the only form there is, a strict
 * decoder is a length check and a handful of field checks, and a third
 * party needs no msgpack library to check one (protocol.md 12.1 says why
 * at length).
 *
 * Pure like the rest of gossip/: no files, no clocks (the time is an
 * argument), no allocation. Decoded structs are views: a struct gossip_crl
 * points into the buffer it was decoded from, which must outlive it. The
 * node embeds struct gossip_cert_stats / gossip_crl_stats and counts every
 * verdict by reason.
 */
#ifndef GOSSIP_CERT_H
#define GOSSIP_CERT_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip_types.h"

enum {
        GOSSIP_CERT_VERSION = 1,
        /* name: 1..31 bytes of A-Z a-z 0-9 . _ - (the peers file's
         * characters, at the wire's length: protocol.md 3.2), + NUL */
        GOSSIP_CERT_NAME_MAX = 32,
        /* fixed part before the name: magic, version, lengths, authority
         * key id, device key, serial, not_before, not_after */
        GOSSIP_CERT_HEAD_BYTES = 72,
        GOSSIP_CERT_MIN_BYTES = GOSSIP_CERT_HEAD_BYTES + 1 + GOSSIP_SIG_BYTES,
        GOSSIP_CERT_MAX_BYTES =
            GOSSIP_CERT_HEAD_BYTES + 31 + 18 + GOSSIP_SIG_BYTES, /* 185 */
        /* Clock skew tolerated either side of the validity window, in
         * seconds: an NTP-synced board is within a second, a board with an
         * RTC drifts some seconds a month, and five minutes is what
         * Kerberos has allowed for decades without complaint. */
        GOSSIP_CERT_SKEW_S = 300,

        GOSSIP_CRL_VERSION = 1,
        GOSSIP_CRL_HEAD_BYTES = 36,
        /* Revoked serials per list: a fleet of hundreds revokes tens; 4096
         * keeps the list within 32 KiB (one stream frame, a fraction of a
         * second on the slowest link we test) and a lookup at 12 probes. */
        GOSSIP_CRL_MAX_SERIALS = 4096,
        GOSSIP_CRL_MIN_BYTES = GOSSIP_CRL_HEAD_BYTES + GOSSIP_SIG_BYTES,
        GOSSIP_CRL_MAX_BYTES = GOSSIP_CRL_HEAD_BYTES +
                               8 * GOSSIP_CRL_MAX_SERIALS + GOSSIP_SIG_BYTES,
};

/* A device certificate, decoded. addr.family 0 = no address. */
struct gossip_cert {
        uint64_t authority_id; /* key id of the signing authority */
        uint8_t pk[GOSSIP_KEY_BYTES];
        uint64_t serial;                /* != 0 */
        uint64_t not_before, not_after; /* unix seconds, inclusive */
        char name[GOSSIP_CERT_NAME_MAX];
        struct gossip_addr addr;
};

/* What a certificate is worth. The order is the order of the checks:
 * a certificate gets the first verdict that applies. */
enum gossip_cert_verdict {
        GOSSIP_CERT_OK = 0,
        GOSSIP_CERT_MALFORMED,       /* not a well-formed certificate */
        GOSSIP_CERT_WRONG_AUTHORITY, /* names another authority */
        GOSSIP_CERT_BAD_SIGNATURE,   /* does not verify under ours */
        GOSSIP_CERT_REVOKED,         /* its serial is in our list */
        GOSSIP_CERT_NOT_YET_VALID,   /* now + skew < not_before */
        GOSSIP_CERT_EXPIRED,         /* now - skew > not_after */
        GOSSIP_CERT_VERDICT_COUNT
};

/* A revocation list, decoded: a view into the buffer it came from. */
struct gossip_crl {
        uint64_t authority_id;
        uint64_t seq;       /* >= 1; higher replaces lower */
        uint64_t issued_at; /* unix seconds, by the authority's clock */
        uint32_t n_serials;
        const uint8_t *serials; /* n_serials x 8 bytes, big-endian, strictly
                                   ascending: the list's own bytes */
        const uint8_t *bytes;   /* the whole encoded list */
        size_t len;
};

/* What an offered revocation list is worth (merge and verify). */
enum gossip_crl_verdict {
        GOSSIP_CRL_OK = 0,          /* valid; merge: newer, take it */
        GOSSIP_CRL_SAME,            /* merge: the list we hold already */
        GOSSIP_CRL_OLDER,           /* merge: lower sequence, refused */
        GOSSIP_CRL_CONFLICT,        /* merge: our sequence, other content */
        GOSSIP_CRL_MALFORMED,       /* not a well-formed list */
        GOSSIP_CRL_WRONG_AUTHORITY, /* names another authority */
        GOSSIP_CRL_BAD_SIGNATURE,   /* does not verify under ours */
        GOSSIP_CRL_VERDICT_COUNT
};

/* Counters by verdict, for the node to embed and report. */
struct gossip_cert_stats {
        uint64_t n[GOSSIP_CERT_VERDICT_COUNT];
};
struct gossip_crl_stats {
        uint64_t n[GOSSIP_CRL_VERDICT_COUNT];
};

/* Counter labels: "ok", "malformed", "wrong_authority", "bad_signature",
 * "revoked", "not_yet_valid", "expired"; "ok", "same", "older",
 * "conflict", "malformed", "wrong_authority", "bad_signature". NULL for a
 * value out of range. */
const char *gossip_cert_verdict_name(int v);
const char *gossip_crl_verdict_name(int v);

/* Adds one to st's counter of v (ignored when out of range). */
void gossip_cert_stats_count(struct gossip_cert_stats *st, int v);
void gossip_crl_stats_count(struct gossip_crl_stats *st, int v);

/* Encodes c, signed by the authority whose libsodium secret key (seed ||
 * public key) is authority_sk, into buf. c->authority_id is ignored: the
 * key id of authority_sk's public half is written. Returns the length
 * (GOSSIP_CERT_MIN_BYTES..GOSSIP_CERT_MAX_BYTES), GOSSIP_EINVAL if a field
 * breaks a rule of protocol.md 12.2 (name, address, serial 0, not_after <
 * not_before), or GOSSIP_ETOOBIG if cap is too small. */
int gossip_cert_sign(const struct gossip_cert *c,
                     const uint8_t authority_sk[GOSSIP_SECRET_BYTES],
                     uint8_t *buf, size_t cap);

/* Decodes exactly len bytes into out without checking the signature.
 * GOSSIP_CERT_OK or GOSSIP_CERT_MALFORMED; then *why (if given) names the
 * rule broken, e.g. "trailing bytes" (a static string). */
enum gossip_cert_verdict gossip_cert_decode(const void *buf, size_t len,
                                            struct gossip_cert *out,
                                            const char **why);

/* Judges a certificate: decode, authority, signature, revocation, then
 * time, the first failure deciding (enum order). authority_pk is the
 * authority this node trusts. crl is the newest list of that authority
 * this node holds (gossip_crl_merge accepted it), or NULL; a list of
 * another authority is ignored.
 *
 * Time, in unix seconds, with GOSSIP_CERT_SKEW_S either way. When
 * clock_known, now is the real time: not yet valid if now + skew <
 * not_before; expired if max(now, crl->issued_at) - skew > not_after.
 * When !clock_known (a board without an RTC before its first NTP sync),
 * now is ignored: not_before is not judged, and expiry is judged only
 * against crl->issued_at, the authority's own signed word that the time
 * is at least that; without a list, not at all. The node judges again
 * once its clock is known (protocol.md 12.4).
 *
 * out (if given) receives the decoded certificate whenever it decoded,
 * whatever the verdict, so that a refusal can name what was refused. */
enum gossip_cert_verdict
gossip_cert_verify(const void *buf, size_t len,
                   const uint8_t authority_pk[GOSSIP_KEY_BYTES], uint64_t now,
                   int clock_known, const struct gossip_crl *crl,
                   struct gossip_cert *out);

/* The verdict a certificate that verified earlier (decoded into *c)
 * gets now: revocation, then time, under the same rules as
 * gossip_cert_verify() (GOSSIP_CERT_REVOKED, GOSSIP_CERT_NOT_YET_VALID,
 * GOSSIP_CERT_EXPIRED or GOSSIP_CERT_OK). No signature work: for a node
 * judging again the certificates it holds as its list and its clock move
 * on (protocol.md 12.7). crl of another authority than c's is ignored. */
enum gossip_cert_verdict gossip_cert_judge(const struct gossip_cert *c,
                                           uint64_t now, int clock_known,
                                           const struct gossip_crl *crl);

/* Encodes a list of n serials (strictly ascending, none 0, n <=
 * GOSSIP_CRL_MAX_SERIALS) with sequence seq >= 1, signed by authority_sk.
 * Returns the length, GOSSIP_EINVAL on a rule broken, GOSSIP_ETOOBIG if
 * cap is too small. */
int gossip_crl_sign(uint64_t seq, uint64_t issued_at, const uint64_t *serials,
                    uint32_t n, const uint8_t authority_sk[GOSSIP_SECRET_BYTES],
                    uint8_t *buf, size_t cap);

/* Decodes exactly len bytes into out (a view into buf) without checking
 * the signature. GOSSIP_CRL_OK or GOSSIP_CRL_MALFORMED with *why. */
enum gossip_crl_verdict gossip_crl_decode(const void *buf, size_t len,
                                          struct gossip_crl *out,
                                          const char **why);

/* Decodes and checks authority and signature: GOSSIP_CRL_OK,
 * GOSSIP_CRL_MALFORMED, GOSSIP_CRL_WRONG_AUTHORITY or
 * GOSSIP_CRL_BAD_SIGNATURE. out is a view into buf. */
enum gossip_crl_verdict
gossip_crl_verify(const void *buf, size_t len,
                  const uint8_t authority_pk[GOSSIP_KEY_BYTES],
                  struct gossip_crl *out);

/* 1 if serial is in the list, else 0 (binary search). */
int gossip_crl_has(const struct gossip_crl *crl, uint64_t serial);

/* The merge rule: given the list we hold (cur, NULL if none) and one
 * offered (buf, len), GOSSIP_CRL_OK means "take it": it verifies and its
 * sequence is higher than cur's (any valid list when cur is NULL). The
 * very bytes of cur are GOSSIP_CRL_SAME at once (cur verified when it was
 * taken: a list carried in every SYNC costs a compare, not a signature
 * check); otherwise equal sequence and identical bytes is
 * GOSSIP_CRL_SAME; equal sequence and
 * other bytes is GOSSIP_CRL_CONFLICT (the authority signed two lists with
 * one number: keep ours, and tell the operator); lower is
 * GOSSIP_CRL_OLDER; or the verify verdicts. Only on GOSSIP_CRL_OK is out
 * set (a view into buf: the caller copies buf and decodes its copy). */
enum gossip_crl_verdict
gossip_crl_merge(const struct gossip_crl *cur, const void *buf, size_t len,
                 const uint8_t authority_pk[GOSSIP_KEY_BYTES],
                 struct gossip_crl *out);

#endif
