/*
 * wire_fuzz.h - the shared half of the wire decoder fuzz targets
 * (fuzz_wire_dgram.c, fuzz_wire_stream.c): a trusted key, the receiver's
 * own key (so that MAC frames, docs/protocol.md 2.2.1, can be accepted),
 * the re-signing trick, the oracles and the seed frames.
 *
 * Input byte 0 picks a mode. Mode bit 0 clear: the frame is decoded as it
 * came, so mutations exercise the prefix checks and the signature reject.
 * Set: the harness first makes the frame self-consistent (body length =
 * what is there, key id = the trusted key) and signs it with that key, so
 * (a frame with the MAC flag gets the right tag under K(A, B) instead), so
 * that mutations reach the body walker, msgpack and the schema checks —
 * the parts an attacker holding no key can never reach, but a buggy or
 * compromised peer can.
 *
 * Oracles, for every frame: the result is 0 or a known GOSSIP_E* code; an
 * accepted frame's borrowed pointers lie inside the input;
 * gossip_wire_peek_cert, which reads JOINs and SYNCs from keys nobody
 * trusts yet (before any signature: the part of the decoder an attacker
 * with no key reaches), returns 0, GOSSIP_ENOPEER or a known code, a
 * certificate inside the input within the certificate bounds, and agrees
 * with the decoder on every frame the decoder accepts; the same bytes
 * again are a replay; re-encoding the decoded message (as a MAC frame if
 * it came as one) succeeds, fits its frame bound, carries every update,
 * and decodes to the same message.
 */
#ifndef GN_WIRE_FUZZ_H
#define GN_WIRE_FUZZ_H

#include <string.h>

#include <sodium.h>

#include "fuzz.h"
#include "gossip/cert.h"
#include "gossip/wire.h"

static uint8_t wf_pk[GOSSIP_KEY_BYTES], wf_sk[GOSSIP_SECRET_BYTES];
static uint64_t wf_id;
/* The receiver is key B (self of wf_kr); wf_mac = K(A, B). */
static struct gossip_keyring *wf_kr;
static const uint8_t *wf_mac;
static struct gossip_update wf_upd[2][GOSSIP_WIRE_MAX_UPDATES];
/* Outcomes by -error code (slot 0: accepted), printed at exit when
 * GN_FUZZ_VERBOSE is set: shows how deep the inputs got. */
static uint64_t wf_outcomes[GOSSIP_WIRE_REJECT_SLOTS];
/* A seed JOIN's and SYNC's key 20 (a certificate's size, any bytes). */
static const uint8_t wf_certish[GOSSIP_CERT_MIN_BYTES + 9] = {'G', 'N', 'C'};

static void wf_report(void)
{
        fprintf(stderr, "wire fuzz outcomes:");
        for (int i = 0; i < GOSSIP_WIRE_REJECT_SLOTS; i++)
                if (wf_outcomes[i])
                        fprintf(stderr, " %s=%llu",
                                i ? gossip_strerror(-i) : "accepted",
                                (unsigned long long)wf_outcomes[i]);
        fprintf(stderr, "\n");
}

static void wf_init(void)
{
        uint8_t seed[32], pk_b[GOSSIP_KEY_BYTES], sk_b[GOSSIP_SECRET_BYTES];

        if (wf_kr)
                return;
        GN_FUZZ_CHECK(sodium_init() >= 0);
        for (int i = 0; i < 32; i++)
                seed[i] = (uint8_t)i; /* key A of docs/protocol.md */
        crypto_sign_seed_keypair(wf_pk, wf_sk, seed);
        wf_kr = gossip_keyring_new();
        GN_FUZZ_CHECK(wf_kr != NULL);
        GN_FUZZ_CHECK(gossip_keyring_add(wf_kr, wf_pk, &wf_id) == 0);
        for (int i = 0; i < 32; i++)
                seed[i] = (uint8_t)(32 + i); /* key B */
        crypto_sign_seed_keypair(pk_b, sk_b, seed);
        GN_FUZZ_CHECK(gossip_keyring_set_self(wf_kr, sk_b) == 0);
        sodium_memzero(sk_b, sizeof(sk_b));
        wf_mac = gossip_keyring_mac_key(wf_kr, wf_id);
        GN_FUZZ_CHECK(wf_mac != NULL);
        if (getenv("GN_FUZZ_VERBOSE"))
                atexit(wf_report);
}

static void wf_put_be(uint8_t *p, uint64_t v, int n)
{
        for (int i = n - 1; i >= 0; i--, v >>= 8)
                p[i] = (uint8_t)v;
}

/* Makes b[0..len) a correctly signed frame of key A (or, with the MAC
 * flag, correctly MAC'd from A to B), whatever else it is. */
static void wf_resign(uint8_t *b, size_t len)
{
        int mac = len > 4 && (b[4] & 4);
        size_t over = mac ? GOSSIP_WIRE_MAC_OVERHEAD : GOSSIP_WIRE_OVERHEAD;
        size_t body = len - over;
        size_t signed_len = GOSSIP_WIRE_PREFIX_BYTES + body;
        uint8_t d[crypto_generichash_BYTES], none[1] = {0};

        if (len < over || body > UINT32_MAX)
                return;
        wf_put_be(b + 8, wf_id, 8);
        wf_put_be(b + 40, body, 4);
        if (mac) {
                crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
                    none, b + signed_len, NULL, none, 0, b, signed_len, NULL,
                    b + 8, wf_mac);
        } else if (b[4] & 1) {
                crypto_generichash(d, sizeof(d), b, signed_len, NULL, 0);
                crypto_sign_detached(b + signed_len, NULL, d, sizeof(d), wf_sk);
        } else {
                crypto_sign_detached(b + signed_len, NULL, b, signed_len,
                                     wf_sk);
        }
}

static int wf_inside(const void *p, size_t n, const uint8_t *b, size_t len)
{
        const uint8_t *q = p;

        return n == 0 || (q >= b && n <= len && q - b <= (ptrdiff_t)(len - n));
}

static int wf_addr_same(const struct gossip_addr *a,
                        const struct gossip_addr *b)
{
        return a->family == b->family && a->port == b->port &&
               !memcmp(a->addr, b->addr, sizeof(a->addr));
}

static int wf_blob_same(const uint8_t *a, size_t an, const uint8_t *b,
                        size_t bn)
{
        return an == bn && (!an || !memcmp(a, b, an));
}

static int wf_same(const struct gossip_msg *a, const struct gossip_msg *b)
{
        if (a->kind != b->kind || a->channel != b->channel ||
            a->key_id != b->key_id || a->incarnation != b->incarnation ||
            a->seq != b->seq || a->step != b->step ||
            a->n_updates != b->n_updates)
                return 0;
        for (uint32_t i = 0; i < a->n_updates; i++) {
                const struct gossip_update *x = &a->updates[i];
                const struct gossip_update *y = &b->updates[i];

                if (x->key_id != y->key_id || x->state != y->state ||
                    x->incarnation != y->incarnation ||
                    !wf_addr_same(&x->addr, &y->addr) ||
                    strcmp(x->name, y->name))
                        return 0;
        }
        switch (a->kind) {
        case GOSSIP_MSG_PING:
                return a->u.ping.target == b->u.ping.target;
        case GOSSIP_MSG_PING_REQ:
                return a->u.ping_req.target == b->u.ping_req.target &&
                       wf_addr_same(&a->u.ping_req.addr, &b->u.ping_req.addr);
        case GOSSIP_MSG_ACK:
                return a->u.ack.ack_seq == b->u.ack.ack_seq &&
                       a->u.ack.target == b->u.ack.target &&
                       a->u.ack.nack == b->u.ack.nack;
        case GOSSIP_MSG_SYNC:
                return a->u.sync.reply == b->u.sync.reply &&
                       a->u.sync.has_view == b->u.sync.has_view &&
                       (!a->u.sync.has_view ||
                        memcmp(a->u.sync.view, b->u.sync.view,
                               GOSSIP_VIEW_DIGEST_BYTES) == 0) &&
                       wf_blob_same(a->crl, a->crl_len, b->crl, b->crl_len);
        case GOSSIP_MSG_JOIN:
                return wf_blob_same(a->crl, a->crl_len, b->crl, b->crl_len);
        case GOSSIP_MSG_GRADIENT:
        case GOSSIP_MSG_PARAMS:
        case GOSSIP_MSG_SAMPLES:
                return a->u.tensor.step == b->u.tensor.step &&
                       a->u.tensor.codec == b->u.tensor.codec &&
                       a->u.tensor.part_index == b->u.tensor.part_index &&
                       a->u.tensor.part_count == b->u.tensor.part_count &&
                       a->u.tensor.n_elems == b->u.tensor.n_elems &&
                       a->u.tensor.payload_len == b->u.tensor.payload_len &&
                       !memcmp(a->u.tensor.payload, b->u.tensor.payload,
                               a->u.tensor.payload_len);
        case GOSSIP_MSG_STATE:
                return a->u.state.step == b->u.state.step &&
                       a->u.state.req_seq == b->u.state.req_seq &&
                       a->u.state.len == b->u.state.len &&
                       !memcmp(a->u.state.data, b->u.state.data,
                               a->u.state.len);
        }
        return 1;
}

/* Re-encodes an accepted message (MAC'd if mac) and checks it decodes to
 * the same. */
static void wf_reencode(const struct gossip_msg *dec, int channel, int mac)
{
        struct gossip_msg mm = *dec;
        const struct gossip_msg *m = &mm;
        size_t bound = gossip_wire_frame_bound(m), len = 0;
        uint8_t *b = malloc(bound);
        struct gossip_msg again;
        uint32_t sent = 0;
        int err;

        GN_FUZZ_CHECK(b != NULL);
        GN_FUZZ_CHECK(dec->mac_key == NULL);
        mm.mac_key = mac ? wf_mac : NULL;
        err = gossip_wire_encode(m, wf_sk, b, bound, &len, &sent);
        GN_FUZZ_CHECK(err == 0);
        GN_FUZZ_CHECK(sent == m->n_updates);
        GN_FUZZ_CHECK(len <= bound);
        GN_FUZZ_CHECK(!(b[4] & 4) == !mac);
        memset(&again, 0, sizeof(again));
        again.updates = wf_upd[1];
        again.updates_cap = GOSSIP_WIRE_MAX_UPDATES;
        /* The canonical form may be longer than a dense input (a key
         * packed as uint8 instead of fixint...), so no channel bound. */
        struct gossip_wire_limits big = {SIZE_MAX, SIZE_MAX};

        err = gossip_wire_decode(b, len, channel, &big, wf_kr, NULL, &again,
                                 NULL);
        GN_FUZZ_CHECK(err == 0);
        GN_FUZZ_CHECK(wf_same(m, &again));
        free(b);
}

/* Decodes one frame (b is an exact-size copy) and checks the oracles. */
static void wf_check_frame(const uint8_t *b, size_t len, int channel,
                           const struct gossip_wire_limits *lim,
                           struct gossip_replay *rp)
{
        struct gossip_wire_stats st;
        struct gossip_msg m;
        const uint8_t *cert = NULL;
        size_t cert_len = 0;
        int err, peek;

        peek = gossip_wire_peek_cert(b, len, channel, lim, &cert, &cert_len);
        GN_FUZZ_CHECK(peek <= 0 && peek > -GOSSIP_WIRE_REJECT_SLOTS);
        if (peek == 0) {
                uint8_t kind = 0;

                GN_FUZZ_CHECK(
                    gossip_wire_peek_sender(b, len, NULL, &kind) == 0 &&
                    (kind == GOSSIP_MSG_JOIN || kind == GOSSIP_MSG_SYNC));
                GN_FUZZ_CHECK(wf_inside(cert, cert_len, b, len) &&
                              cert_len >= GOSSIP_CERT_MIN_BYTES &&
                              cert_len <= GOSSIP_CERT_MAX_BYTES);
        }
        memset(&st, 0, sizeof(st));
        memset(&m, 0, sizeof(m));
        m.updates = wf_upd[0];
        m.updates_cap = GOSSIP_WIRE_MAX_UPDATES;
        err = gossip_wire_decode(b, len, channel, lim, wf_kr, rp, &m, &st);
        GN_FUZZ_CHECK(err <= 0 && err > -GOSSIP_WIRE_REJECT_SLOTS);
        wf_outcomes[-err]++;
        if (err) {
                GN_FUZZ_CHECK(st.rejected[-err] == 1);
                return;
        }
        GN_FUZZ_CHECK(st.accepted[m.kind] == 1);
        GN_FUZZ_CHECK(m.key_id == wf_id && m.n_updates <= m.updates_cap);
        /* what the decoder accepts, the peek reads alike */
        if (m.kind == GOSSIP_MSG_JOIN || m.kind == GOSSIP_MSG_SYNC)
                GN_FUZZ_CHECK(m.cert_len ? peek == 0 && cert == m.cert &&
                                               cert_len == m.cert_len
                                         : peek == GOSSIP_ENOPEER);
        else
                GN_FUZZ_CHECK(peek == GOSSIP_ENOPEER);
        if (GOSSIP_WIRE_IS_TENSOR(m.kind))
                GN_FUZZ_CHECK(wf_inside(m.u.tensor.payload,
                                        m.u.tensor.payload_len, b, len));
        if (m.kind == GOSSIP_MSG_STATE)
                GN_FUZZ_CHECK(wf_inside(m.u.state.data, m.u.state.len, b, len));
        GN_FUZZ_CHECK(wf_inside(m.crl, m.crl_len, b, len));
        GN_FUZZ_CHECK(m.crl_len == 0 || (m.crl_len >= GOSSIP_CRL_MIN_BYTES &&
                                         m.crl_len <= GOSSIP_CRL_MAX_BYTES));
        wf_reencode(&m, channel, (b[4] & 4) != 0);
        struct gossip_msg dup = {.updates = wf_upd[1],
                                 .updates_cap = GOSSIP_WIRE_MAX_UPDATES};
        err = gossip_wire_decode(b, len, channel, lim, wf_kr, rp, &dup, NULL);
        GN_FUZZ_CHECK(err == GOSSIP_EREPLAY);
}

/* Seed frames: one valid frame of each kind on channel, with updates;
 * then a JOIN and a SYNC with a certificate and a revocation list (keys
 * 20 and 22: the decoder bounds them, the contents are the receiver's to
 * judge, so filler bytes will do), the SYNC with a view digest (key 23). */
static void wf_seed_frames(int channel,
                           void (*add)(void *, const uint8_t *, size_t),
                           void *ctx)
{
        static const uint8_t payload[16] = {0, 0, 0x80, 0x3f, 1, 2,  3,  4,
                                            5, 6, 7,    8,    9, 10, 11, 12};
        struct gossip_update u[3];
        uint8_t b[2048];

        wf_init();
        memset(u, 0, sizeof(u));
        for (int i = 0; i < 3; i++) {
                u[i].key_id = wf_id + (uint64_t)i;
                u[i].incarnation = (uint64_t)i * 1000;
                u[i].state = (uint8_t)i;
        }
        u[0].addr.family = 4;
        u[0].addr.port = 7946;
        strcpy(u[0].name, "pi-kitchen");
        u[1].addr.family = 6;
        u[1].addr.addr[15] = 1;
        for (int kind = 1; kind < GOSSIP_MSG_KIND_COUNT; kind++) {
                struct gossip_msg m;
                size_t len;

                memset(&m, 0, sizeof(m));
                m.kind = (uint8_t)kind;
                m.channel = (uint8_t)channel;
                m.incarnation = 1;
                m.seq = (uint64_t)kind;
                m.step = 100;
                if (kind <= GOSSIP_MSG_JOIN) {
                        m.updates = u;
                        m.n_updates = 3;
                }
                m.u.ping_req.addr = u[0].addr; /* PING_REQ's only */
                if (kind == GOSSIP_MSG_PING_REQ || kind == GOSSIP_MSG_ACK)
                        m.u.ping_req.target = wf_id;
                if (GOSSIP_WIRE_IS_TENSOR(kind)) {
                        memset(&m.u, 0, sizeof(m.u));
                        m.u.tensor.part_count = 1;
                        m.u.tensor.n_elems = 4;
                        m.u.tensor.payload = payload;
                        m.u.tensor.payload_len = sizeof(payload);
                }
                if (kind == GOSSIP_MSG_STATE) {
                        memset(&m.u, 0, sizeof(m.u));
                        m.u.state.data = payload;
                        m.u.state.len = sizeof(payload);
                }
                /* key 20: bytes of a certificate's size (the wire does
                 * not judge them; gossip/cert.c and fuzz_cert do) */
                if (kind == GOSSIP_MSG_JOIN || kind == GOSSIP_MSG_SYNC) {
                        m.cert = wf_certish;
                        m.cert_len = sizeof(wf_certish);
                }
                /* Bulk kinds on the stream: once signed, once MAC'd. */
                for (int mac = 0; mac < 2; mac++) {
                        if (mac && (channel != GOSSIP_CH_STREAM ||
                                    (!GOSSIP_WIRE_IS_TENSOR(kind) &&
                                     kind != GOSSIP_MSG_STATE)))
                                break;
                        m.mac_key = mac ? wf_mac : NULL;
                        m.seq = (uint64_t)kind + (uint64_t)mac * 100;
                        if (gossip_wire_encode(&m, wf_sk, b + 1, sizeof(b) - 1,
                                               &len, NULL))
                                continue;
                        b[0] = 0;
                        add(ctx, b, len + 1);
                        b[0] = 1;
                        add(ctx, b, len + 1);
                }
        }
        for (int kind = GOSSIP_MSG_SYNC; kind <= GOSSIP_MSG_JOIN; kind++) {
                static uint8_t cert[GOSSIP_CERT_MIN_BYTES];
                static uint8_t crl[GOSSIP_CRL_MIN_BYTES + 8];
                struct gossip_msg m;
                size_t len;

                memset(cert, 0xc7, sizeof(cert));
                memset(crl, 0xc1, sizeof(crl));
                memset(&m, 0, sizeof(m));
                m.kind = (uint8_t)kind;
                m.channel = (uint8_t)channel;
                m.incarnation = 1;
                m.seq = 200 + (uint64_t)kind;
                m.updates = u;
                m.n_updates = 1;
                m.cert = cert;
                m.cert_len = sizeof(cert);
                m.crl = crl;
                m.crl_len = sizeof(crl);
                if (kind == GOSSIP_MSG_SYNC) { /* key 23, a view digest */
                        m.u.sync.reply = 1;
                        m.u.sync.has_view = 1;
                        memset(m.u.sync.view, 0xd6, GOSSIP_VIEW_DIGEST_BYTES);
                }
                if (gossip_wire_encode(&m, wf_sk, b + 1, sizeof(b) - 1, &len,
                                       NULL))
                        continue;
                b[0] = 1;
                add(ctx, b, len + 1);
        }
}

#endif
