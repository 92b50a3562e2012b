/*
 * wire.c - encode, sign or MAC, verify and decode frames (layout in wire.h
 * and docs/protocol.md).
 *
 * Decoding runs from cheap to expensive and touches msgpack last: channel
 * bound, minimum length, magic, version, kind, flags, exact length, flag
 * rules, signer, signature or tag, channel binding, replay window; then
 * our own walk over the body bounds every declared count and length
 * against the bytes that are really there (msgpack-c would otherwise
 * allocate whatever a header claims), and only then msgpack_unpack_next()
 * builds objects.
 *
 * Encoding packs straight into the caller's buffer through a bounded
 * writer (no allocation), measuring first so that it can take as many
 * piggybacked updates as fit the caller's cap.
 *
 * Invariants: the encoder writes the canonical form (map keys ascending,
 * every field of the kind present, updates only when there are some); the
 * decoder accepts any key order, ignores unknown keys, refuses duplicate
 * known keys and wrong types.
 */
#include <string.h>

#include <msgpack.h>
#include <sodium.h>

#include "base/gn_endian.h"
#include "gossip/cert.h"
#include "gossip/wire.h"
#include "keyring_private.h"

/* Prefix layout: offsets of each field (all integers big-endian). */
enum {
        OFF_MAGIC = 0,     /* 2 bytes "GN" */
        OFF_VERSION = 2,   /* 1 */
        OFF_KIND = 3,      /* 1 */
        OFF_FLAGS = 4,     /* 1 */
        OFF_RESERVED = 5,  /* 3, zero */
        OFF_KEY_ID = 8,    /* 8 */
        OFF_INC = 16,      /* 8 */
        OFF_SEQ = 24,      /* 8 */
        OFF_STEP = 32,     /* 8 */
        OFF_BODY_LEN = 40, /* 4 */
        OFF_BODY = 44,
};
_Static_assert((int)OFF_BODY == (int)GOSSIP_WIRE_PREFIX_BYTES, "prefix layout");
_Static_assert(GOSSIP_WIRE_OVERHEAD == 108, "prefix + Ed25519 signature");
_Static_assert(GOSSIP_SIG_BYTES == crypto_sign_BYTES, "Ed25519 signature");
_Static_assert(GOSSIP_KEY_BYTES == crypto_sign_PUBLICKEYBYTES, "Ed25519 pk");
_Static_assert(GOSSIP_SECRET_BYTES == crypto_sign_SECRETKEYBYTES, "sk");
_Static_assert(GOSSIP_WIRE_TAG_BYTES ==
                   crypto_aead_xchacha20poly1305_ietf_ABYTES,
               "Poly1305 tag");
_Static_assert(GOSSIP_WIRE_MAC_KEY_BYTES ==
                   crypto_aead_xchacha20poly1305_ietf_KEYBYTES,
               "XChaCha20-Poly1305 key");
/* The nonce is prefix bytes 8..31: key id || incarnation || seq. */
_Static_assert(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES == 24 &&
                   OFF_KEY_ID + 24 == OFF_STEP,
               "nonce = key id, incarnation, seq");
_Static_assert(GOSSIP_WIRE_MAC_OVERHEAD == 60, "prefix + Poly1305 tag");
_Static_assert(GOSSIP_STOP_NAME_MAX == GOSSIP_WIRE_NAME_MAX, "stop origin");

#define MAGIC0 0x47 /* 'G' */
#define MAGIC1 0x4e /* 'N' */

enum {
        FLAG_DIGEST = 1 << 0, /* signature covers BLAKE2b-256(prefix+body) */
        FLAG_STREAM = 1 << 1, /* built for the stream channel */
        FLAG_MAC = 1 << 2,    /* Poly1305 tag under the pairwise key */
        FLAGS_KNOWN = FLAG_DIGEST | FLAG_STREAM | FLAG_MAC,
};

/* Body map keys: one table for all kinds. */
enum {
        K_UPDATES = 1,
        K_TARGET = 2,
        K_ADDR = 3,
        K_ACK_SEQ = 4,
        K_NACK = 5,
        K_REPLY = 6,
        K_STEP = 7,
        K_CODEC = 8,
        K_PART_INDEX = 9,
        K_PART_COUNT = 10,
        K_N_ELEMS = 11,
        K_PAYLOAD = 12,
        K_REQ_SEQ = 13,
        K_STOP = 14,     /* LEAVE: why (gossip/stop.h), optional */
        K_PERIOD = 15,   /* PARAMS: the sender's averaging period, optional */
        K_NEED = 16,     /* PARAMS: the period the sender's link needs, opt. */
        K_RX_RATE = 17,  /* PARAMS: how fast the sender received ours, opt. */
        K_RX_SPAN = 18,  /* PARAMS: the microseconds that rate covers, opt. */
        K_SETTINGS = 19, /* JOIN, SYNC: the sender's cluster settings, opt. */
        K_CERT = 20,     /* JOIN, SYNC: the sender's certificate, optional */
        K_CERTS = 21,    /* SYNC: certificates of members it lists, opt. */
        K_CRL = 22,      /* JOIN, SYNC: the revocation list held, optional */
        K_VIEW = 23,     /* SYNC: the digest of the sender's view, optional */
        K_COUNT
};
#define BIT(k) (1u << (k))

/* Decoder bounds on the body, beyond "no count exceeds the bytes left". */
enum {
        /* Body nesting: map > updates array > update array > fields is 3;
         * room for forward-compatible additions. */
        MAX_DEPTH = 8,
        /* Objects msgpack-c may allocate for one body (24 bytes each): a
         * full SYNC is ~6 per update; 64 Ki objects is 1.5 MiB at worst. */
        MAX_OBJECTS = 1 << 16,
        ADDR4_BYTES = 6,  /* IPv4 address + port */
        ADDR6_BYTES = 18, /* IPv6 address + port */
        /* Largest encoding of one update: array hdr, 2 x uint64, state,
         * bin8 IPv6 address, str8 name, uint64 origin, fixstr version,
         * uint64 settings digest, fixint loading. */
        UPDATE_MAX_BYTES = 1 + 9 + 1 + 9 + 2 + ADDR6_BYTES + 2 +
                           GOSSIP_WIRE_NAME_MAX + 9 + GOSSIP_WIRE_VERSION_MAX +
                           9 + 1,
        /* An update's state byte in the view digest, for an alive entry
         * told loading (protocol.md 3.5): entries that are not keep the
         * digest older nodes compute. */
        DIGEST_LOADING = 0x80,
};

struct kind_info {
        unsigned allowed;  /* keys this kind reads */
        unsigned required; /* keys it must have */
        uint8_t n_fields;  /* keys the encoder writes, updates aside */
        uint8_t digest;    /* bulk: always signed through a digest, or MAC'd */
};

#define TENSOR_KEYS                                                            \
        (BIT(K_STEP) | BIT(K_CODEC) | BIT(K_PART_INDEX) | BIT(K_PART_COUNT) |  \
         BIT(K_N_ELEMS) | BIT(K_PAYLOAD))

static const struct kind_info kinds[GOSSIP_MSG_KIND_COUNT] = {
    [GOSSIP_MSG_PING] = {BIT(K_UPDATES) | BIT(K_TARGET), 0, 1, 0},
    [GOSSIP_MSG_PING_REQ] = {BIT(K_UPDATES) | BIT(K_TARGET) | BIT(K_ADDR),
                             BIT(K_TARGET) | BIT(K_ADDR), 2, 0},
    [GOSSIP_MSG_ACK] = {BIT(K_UPDATES) | BIT(K_ACK_SEQ) | BIT(K_TARGET) |
                            BIT(K_NACK),
                        BIT(K_ACK_SEQ) | BIT(K_TARGET), 3, 0},
    /* settings, cert, certs, crl, view: written if set */
    [GOSSIP_MSG_SYNC] = {BIT(K_UPDATES) | BIT(K_REPLY) | BIT(K_SETTINGS) |
                             BIT(K_CERT) | BIT(K_CERTS) | BIT(K_CRL) |
                             BIT(K_VIEW),
                         0, 1, 0},
    [GOSSIP_MSG_JOIN] = {BIT(K_UPDATES) | BIT(K_SETTINGS) | BIT(K_CERT) |
                             BIT(K_CRL),
                         0, 0, 0},
    [GOSSIP_MSG_LEAVE] = {BIT(K_STOP), 0, 0, 0}, /* stop: written if set */
    [GOSSIP_MSG_GRADIENT] = {TENSOR_KEYS, TENSOR_KEYS, 6, 1},
    [GOSSIP_MSG_STATE_REQ] = {0, 0, 0, 0},
    [GOSSIP_MSG_STATE] = {BIT(K_STEP) | BIT(K_REQ_SEQ) | BIT(K_PAYLOAD),
                          BIT(K_STEP) | BIT(K_PAYLOAD), 3, 1},
    /* period, need, rx_rate, rx_span: written if set */
    [GOSSIP_MSG_PARAMS] = {TENSOR_KEYS | BIT(K_PERIOD) | BIT(K_NEED) |
                               BIT(K_RX_RATE) | BIT(K_RX_SPAN),
                           TENSOR_KEYS, 6, 1},
    [GOSSIP_MSG_SAMPLES] = {TENSOR_KEYS, TENSOR_KEYS, 6, 1},
};

static int kind_valid(unsigned kind)
{
        return kind > 0 && kind < GOSSIP_MSG_KIND_COUNT;
}

static int has_updates(unsigned kind)
{
        return (kinds[kind].allowed & BIT(K_UPDATES)) != 0;
}

static int needs_digest(unsigned kind, size_t body_len)
{
        return kinds[kind].digest || body_len > GOSSIP_WIRE_DIGEST_OVER;
}

/* Whether a frame of kind on channel may carry a tag instead of a
 * signature: bulk kinds, point to point (the stream). */
static int mac_allowed(unsigned kind, int stream)
{
        return stream && kinds[kind].digest;
}

/* Bytes after the body: the tag or the signature. */
static size_t trailer_len(uint8_t flags)
{
        return flags & FLAG_MAC ? GOSSIP_WIRE_TAG_BYTES : GOSSIP_SIG_BYTES;
}

/* ---- encoding ---------------------------------------------------------- */

/* A bounded msgpack sink; p == NULL only counts. */
struct sink {
        uint8_t *p;
        size_t cap, len;
};

static int sink_write(void *data, const char *buf, size_t len)
{
        struct sink *s = data;

        if (len > s->cap - s->len)
                return -1;
        if (s->p)
                memcpy(s->p + s->len, buf, len);
        s->len += len;
        return 0;
}

static int addr_valid(const struct gossip_addr *a, int optional)
{
        return a->family == 4 || a->family == 6 || (optional && !a->family);
}

static int pack_addr(msgpack_packer *pk, const struct gossip_addr *a)
{
        uint8_t b[ADDR6_BYTES];
        size_t n = a->family == 4 ? 4 : 16;

        if (!a->family)
                return msgpack_pack_nil(pk);
        memcpy(b, a->addr, n);
        gn_be_put(b + n, a->port, 2);
        return msgpack_pack_bin_with_body(pk, b, n + 2);
}

/* Names travel as printable text: no NUL, no control characters. */
static int name_byte_ok(uint8_t c)
{
        return c >= 0x20 && c != 0x7f;
}

/* 1 if s is printable text shorter than max (its NUL inside). */
static int text_valid(const char *s, size_t max)
{
        size_t n = strnlen(s, max);

        if (n == max)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (!name_byte_ok((uint8_t)s[i]))
                        return 0;
        return 1;
}

static int stop_valid(const struct gossip_stop *s)
{
        return s->acc_bp <= 10000 && s->target_bp <= 10000 &&
               text_valid(s->origin, GOSSIP_WIRE_NAME_MAX);
}

/* A list the encoder may write: bounded, printable, names strictly
 * ascending (the order gossip_settings_set gives). */
static int settings_valid(const struct gossip_settings *s)
{
        if (s->n > GOSSIP_SETTINGS_MAX)
                return 0;
        for (size_t i = 0; i < s->n; i++)
                if (!s->s[i].name[0] ||
                    !text_valid(s->s[i].name, GOSSIP_SETTING_NAME_MAX) ||
                    !text_valid(s->s[i].value, GOSSIP_SETTING_VALUE_MAX) ||
                    (i && strcmp(s->s[i - 1].name, s->s[i].name) >= 0))
                        return 0;
        return 1;
}

static int update_valid(const struct gossip_update *u)
{
        return u->key_id && u->state <= GOSSIP_WIRE_STATE_MAX &&
               u->loading <= 1 && addr_valid(&u->addr, 1) &&
               text_valid(u->name, GOSSIP_WIRE_NAME_MAX) &&
               text_valid(u->version, GOSSIP_WIRE_VERSION_MAX);
}

static int pack_update(msgpack_packer *pk, const struct gossip_update *u)
{
        size_t n = strlen(u->name), v = strlen(u->version);
        int r;

        /* the shortest array that holds what is set; elements before a
         * set one are nil (name, version) or 0 (origin, settings: "not
         * given") */
        int l = u->loading != 0, d = l || u->settings != 0;

        r = msgpack_pack_array(pk, l           ? 9
                                   : d         ? 8
                                   : v         ? 7
                                   : u->origin ? 6
                                   : n         ? 5
                                               : 4);
        r = r ? r : msgpack_pack_uint64(pk, u->key_id);
        r = r ? r : msgpack_pack_uint8(pk, u->state);
        r = r ? r : msgpack_pack_uint64(pk, u->incarnation);
        r = r ? r : pack_addr(pk, &u->addr);
        if (n)
                r = r ? r : msgpack_pack_str_with_body(pk, u->name, n);
        else if (u->origin || v || d)
                r = r ? r : msgpack_pack_nil(pk);
        if (u->origin || v || d)
                r = r ? r : msgpack_pack_uint64(pk, u->origin);
        if (v)
                r = r ? r : msgpack_pack_str_with_body(pk, u->version, v);
        else if (d)
                r = r ? r : msgpack_pack_nil(pk);
        if (d)
                r = r ? r : msgpack_pack_uint64(pk, u->settings);
        if (l)
                r = r ? r : msgpack_pack_uint8(pk, 1);
        return r;
}

static size_t update_size(const struct gossip_update *u)
{
        struct sink s = {NULL, SIZE_MAX, 0};
        msgpack_packer pk;

        msgpack_packer_init(&pk, &s, sink_write);
        pack_update(&pk, u);
        return s.len;
}

static int pack_kv_u64(msgpack_packer *pk, int key, uint64_t v)
{
        int r = msgpack_pack_uint8(pk, (uint8_t)key);

        return r ? r : msgpack_pack_uint64(pk, v);
}

static int pack_kv_bool(msgpack_packer *pk, int key, int v)
{
        int r = msgpack_pack_uint8(pk, (uint8_t)key);

        if (r)
                return r;
        return v ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
}

static int pack_kv_bin(msgpack_packer *pk, int key, const void *p, size_t n)
{
        int r = msgpack_pack_uint8(pk, (uint8_t)key);

        return r ? r : msgpack_pack_bin_with_body(pk, p, n);
}

static int pack_kv_addr(msgpack_packer *pk, int key,
                        const struct gossip_addr *a)
{
        int r = msgpack_pack_uint8(pk, (uint8_t)key);

        return r ? r : pack_addr(pk, a);
}

static int pack_tensor(msgpack_packer *pk, const struct gossip_tensor *t)
{
        int r;

        r = pack_kv_u64(pk, K_STEP, t->step);
        r = r ? r : pack_kv_u64(pk, K_CODEC, t->codec);
        r = r ? r : pack_kv_u64(pk, K_PART_INDEX, t->part_index);
        r = r ? r : pack_kv_u64(pk, K_PART_COUNT, t->part_count);
        r = r ? r : pack_kv_u64(pk, K_N_ELEMS, t->n_elems);
        r = r ? r : pack_kv_bin(pk, K_PAYLOAD, t->payload, t->payload_len);
        return r;
}

/* A LEAVE's reason: [reason, step, acc_bp, target_bp, (origin)]. */
static int pack_stop(msgpack_packer *pk, const struct gossip_stop *s)
{
        size_t n = strlen(s->origin);
        int r = msgpack_pack_uint8(pk, K_STOP);

        r = r ? r : msgpack_pack_array(pk, n ? 5 : 4);
        r = r ? r : msgpack_pack_uint8(pk, s->reason);
        r = r ? r : msgpack_pack_uint64(pk, s->step);
        r = r ? r : msgpack_pack_uint32(pk, s->acc_bp);
        r = r ? r : msgpack_pack_uint32(pk, s->target_bp);
        if (n)
                r = r ? r : msgpack_pack_str_with_body(pk, s->origin, n);
        return r;
}

/* JOIN and SYNC's settings: [[name, value], ...], names ascending. */
static int pack_settings(msgpack_packer *pk, const struct gossip_settings *s)
{
        int r = msgpack_pack_uint8(pk, K_SETTINGS);

        r = r ? r : msgpack_pack_array(pk, s->n);
        for (size_t i = 0; !r && i < s->n; i++) {
                size_t a = strlen(s->s[i].name), b = strlen(s->s[i].value);

                r = msgpack_pack_array(pk, 2);
                r = r ? r : msgpack_pack_str_with_body(pk, s->s[i].name, a);
                r = r ? r : msgpack_pack_str_with_body(pk, s->s[i].value, b);
        }
        return r;
}

static int has_settings(const struct gossip_msg *m)
{
        return (m->kind == GOSSIP_MSG_JOIN || m->kind == GOSSIP_MSG_SYNC) &&
               m->settings;
}

/* JOIN and SYNC's key 20 (the sender's certificate), SYNC's key 21 (its
 * members' certificates, an array of bin) and key 22 (the revocation
 * list it holds), each when there is one. */
static int pack_certs(msgpack_packer *pk, const struct gossip_msg *m)
{
        int r = 0;

        if (m->cert_len)
                r = pack_kv_bin(pk, K_CERT, m->cert, m->cert_len);
        if (!r && m->n_certs) {
                r = msgpack_pack_uint8(pk, K_CERTS);
                r = r ? r : msgpack_pack_array(pk, m->n_certs);
                for (uint32_t i = 0; !r && i < m->n_certs; i++)
                        r = msgpack_pack_bin_with_body(pk, m->certs[i].p,
                                                       m->certs[i].len);
        }
        if (!r && m->crl_len)
                r = pack_kv_bin(pk, K_CRL, m->crl, m->crl_len);
        return r;
}

/* The certificates m carries are within the wire's bounds (their content
 * is judged by the receiver, gossip_cert_verify). */
static int certs_valid(const struct gossip_msg *m)
{
        if (m->cert_len && (!m->cert || m->cert_len < GOSSIP_CERT_MIN_BYTES ||
                            m->cert_len > GOSSIP_CERT_MAX_BYTES))
                return 0;
        if (m->n_certs && (m->kind != GOSSIP_MSG_SYNC || !m->certs ||
                           m->n_certs > GOSSIP_WIRE_MAX_UPDATES))
                return 0;
        for (uint32_t i = 0; i < m->n_certs; i++)
                if (!m->certs[i].p || m->certs[i].len < GOSSIP_CERT_MIN_BYTES ||
                    m->certs[i].len > GOSSIP_CERT_MAX_BYTES)
                        return 0;
        if (m->crl_len && (!m->crl || m->crl_len < GOSSIP_CRL_MIN_BYTES ||
                           m->crl_len > GOSSIP_CRL_MAX_BYTES))
                return 0;
        return 1;
}

/* Keys the encoder writes for m, updates aside. */
static uint32_t fields_count(const struct gossip_msg *m)
{
        if (m->kind == GOSSIP_MSG_JOIN || m->kind == GOSSIP_MSG_SYNC)
                return kinds[m->kind].n_fields + has_settings(m) +
                       (m->cert_len != 0) + (m->n_certs != 0) +
                       (m->crl_len != 0) +
                       (m->kind == GOSSIP_MSG_SYNC && m->u.sync.has_view);
        if (m->kind == GOSSIP_MSG_LEAVE)
                return m->u.leave.reason != 0;
        if (m->kind == GOSSIP_MSG_PARAMS)
                return kinds[m->kind].n_fields + (m->u.tensor.period != 0) +
                       (m->u.tensor.need != 0) + (m->u.tensor.rx_rate != 0) +
                       (m->u.tensor.rx_span != 0);
        return kinds[m->kind].n_fields;
}

/* The kind's own fields, keys ascending (K_UPDATES, the smallest key, is
 * written before them by the caller). */
static int pack_fields(msgpack_packer *pk, const struct gossip_msg *m)
{
        int r = 0;

        switch (m->kind) {
        case GOSSIP_MSG_PING:
                return pack_kv_u64(pk, K_TARGET, m->u.ping.target);
        case GOSSIP_MSG_PING_REQ:
                r = pack_kv_u64(pk, K_TARGET, m->u.ping_req.target);
                return r ? r : pack_kv_addr(pk, K_ADDR, &m->u.ping_req.addr);
        case GOSSIP_MSG_ACK:
                r = pack_kv_u64(pk, K_TARGET, m->u.ack.target);
                r = r ? r : pack_kv_u64(pk, K_ACK_SEQ, m->u.ack.ack_seq);
                return r ? r : pack_kv_bool(pk, K_NACK, m->u.ack.nack);
        case GOSSIP_MSG_SYNC:
                r = pack_kv_bool(pk, K_REPLY, m->u.sync.reply);
                r = r || !m->settings ? r : pack_settings(pk, m->settings);
                r = r ? r : pack_certs(pk, m);
                if (!r && m->u.sync.has_view)
                        r = pack_kv_bin(pk, K_VIEW, m->u.sync.view,
                                        GOSSIP_VIEW_DIGEST_BYTES);
                return r;
        case GOSSIP_MSG_JOIN:
                r = m->settings ? pack_settings(pk, m->settings) : 0;
                return r ? r : pack_certs(pk, m);
        case GOSSIP_MSG_PARAMS:
                r = pack_tensor(pk, &m->u.tensor);
                if (!r && m->u.tensor.period)
                        r = pack_kv_u64(pk, K_PERIOD, m->u.tensor.period);
                if (!r && m->u.tensor.need)
                        r = pack_kv_u64(pk, K_NEED, m->u.tensor.need);
                if (!r && m->u.tensor.rx_rate)
                        r = pack_kv_u64(pk, K_RX_RATE, m->u.tensor.rx_rate);
                if (!r && m->u.tensor.rx_span)
                        r = pack_kv_u64(pk, K_RX_SPAN, m->u.tensor.rx_span);
                return r;
        case GOSSIP_MSG_GRADIENT:
        case GOSSIP_MSG_SAMPLES:
                return pack_tensor(pk, &m->u.tensor);
        case GOSSIP_MSG_LEAVE:
                return m->u.leave.reason ? pack_stop(pk, &m->u.leave) : 0;
        case GOSSIP_MSG_STATE:
                r = pack_kv_u64(pk, K_STEP, m->u.state.step);
                r = r ? r
                      : pack_kv_bin(pk, K_PAYLOAD, m->u.state.data,
                                    m->u.state.len);
                return r ? r : pack_kv_u64(pk, K_REQ_SEQ, m->u.state.req_seq);
        }
        return 0;
}

/* The whole body with the first k updates. */
static int pack_body(msgpack_packer *pk, const struct gossip_msg *m, uint32_t k)
{
        int r = msgpack_pack_map(pk, fields_count(m) + (k > 0));

        if (!r && k > 0) {
                r = msgpack_pack_uint8(pk, K_UPDATES);
                r = r ? r : msgpack_pack_array(pk, k);
                for (uint32_t i = 0; !r && i < k; i++)
                        r = pack_update(pk, &m->updates[i]);
        }
        return r ? r : pack_fields(pk, m);
}

static int msg_valid(const struct gossip_msg *m)
{
        const struct gossip_tensor *t = &m->u.tensor;

        if (!kind_valid(m->kind) || m->channel > GOSSIP_CH_STREAM)
                return 0;
        if (m->n_updates && (!has_updates(m->kind) || !m->updates ||
                             m->n_updates > GOSSIP_WIRE_MAX_UPDATES))
                return 0;
        for (uint32_t i = 0; i < m->n_updates; i++)
                if (!update_valid(&m->updates[i]))
                        return 0;
        switch (m->kind) {
        case GOSSIP_MSG_PING_REQ:
                return addr_valid(&m->u.ping_req.addr, 0);
        case GOSSIP_MSG_ACK:
                return m->u.ack.nack <= 1;
        case GOSSIP_MSG_SYNC:
                return m->u.sync.reply <= 1 && m->u.sync.has_view <= 1 &&
                       (!m->settings || settings_valid(m->settings)) &&
                       certs_valid(m);
        case GOSSIP_MSG_JOIN:
                return (!m->settings || settings_valid(m->settings)) &&
                       certs_valid(m);
        case GOSSIP_MSG_GRADIENT:
        case GOSSIP_MSG_PARAMS:
        case GOSSIP_MSG_SAMPLES:
                return t->part_count >= 1 && t->part_index < t->part_count &&
                       (t->payload || !t->payload_len);
        case GOSSIP_MSG_STATE:
                return m->u.state.data || !m->u.state.len;
        case GOSSIP_MSG_LEAVE:
                return stop_valid(&m->u.leave);
        }
        return 1;
}

/* Header bytes of a msgpack array of k elements. */
static size_t array_hdr(uint32_t k)
{
        return k <= 15 ? 1 : k <= 0xffff ? 3 : 5;
}

/* How many updates fit in avail bytes after the base body. */
static uint32_t updates_that_fit(const struct gossip_msg *m, size_t avail)
{
        size_t sum = 0;
        uint32_t k = 0;

        for (; k < m->n_updates; k++) {
                size_t s = update_size(&m->updates[k]);

                if (1 + array_hdr(k + 1) + sum + s > avail)
                        break;
                sum += s;
        }
        return k;
}

static void sign_frame(uint8_t *b, size_t signed_len, int digest,
                       const uint8_t *sk)
{
        uint8_t d[crypto_generichash_BYTES];

        if (digest) {
                crypto_generichash(d, sizeof(d), b, signed_len, NULL, 0);
                crypto_sign_detached(b + signed_len, NULL, d, sizeof(d), sk);
        } else {
                crypto_sign_detached(b + signed_len, NULL, b, signed_len, sk);
        }
}

/* The tag of S = b[0..n) under key, written at b + n: XChaCha20-Poly1305
 * of an empty message with S as additional data and b[8..32) as nonce. */
static void mac_frame(uint8_t *b, size_t n, const uint8_t *key)
{
        uint8_t none[1] = {0};

        crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
            none, b + n, NULL, none, 0, b, n, NULL, b + OFF_KEY_ID, key);
}

static void put_prefix(uint8_t *b, const struct gossip_msg *m, uint8_t flags,
                       uint64_t key_id, size_t body_len)
{
        b[OFF_MAGIC] = MAGIC0;
        b[OFF_MAGIC + 1] = MAGIC1;
        b[OFF_VERSION] = GOSSIP_WIRE_VERSION;
        b[OFF_KIND] = m->kind;
        b[OFF_FLAGS] = flags;
        memset(b + OFF_RESERVED, 0, 3);
        gn_be_put(b + OFF_KEY_ID, key_id, 8);
        gn_be_put(b + OFF_INC, m->incarnation, 8);
        gn_be_put(b + OFF_SEQ, m->seq, 8);
        gn_be_put(b + OFF_STEP, m->step, 8);
        gn_be_put(b + OFF_BODY_LEN, body_len, 4);
}

int gossip_wire_encode(const struct gossip_msg *m,
                       const uint8_t sk[GOSSIP_SECRET_BYTES], void *buf,
                       size_t cap, size_t *out_len, uint32_t *n_sent)
{
        struct sink s = {NULL, SIZE_MAX, 0};
        msgpack_packer pk;
        uint8_t *b = buf, flags;
        size_t base, body_len, room, overhead;
        uint32_t k;

        if (!m || !sk || !buf || !out_len || !msg_valid(m))
                return GOSSIP_EINVAL;
        flags = m->channel == GOSSIP_CH_STREAM ? FLAG_STREAM : 0;
        if (m->mac_key && mac_allowed(m->kind, flags & FLAG_STREAM))
                flags |= FLAG_MAC;
        overhead = GOSSIP_WIRE_PREFIX_BYTES + trailer_len(flags);
        msgpack_packer_init(&pk, &s, sink_write);
        pack_body(&pk, m, 0);
        base = s.len;
        if (cap < overhead)
                return GOSSIP_ETOOBIG;
        /* The body length field is 32 bits. */
        room = cap - overhead;
        if (room > UINT32_MAX)
                room = UINT32_MAX;
        if (base > room)
                return GOSSIP_ETOOBIG;
        k = updates_that_fit(m, room - base);

        s = (struct sink){b + OFF_BODY, room, 0};
        if (pack_body(&pk, m, k) != 0)
                return GOSSIP_ETOOBIG; /* measured to fit: cannot happen */
        body_len = s.len;

        if (!(flags & FLAG_MAC) && needs_digest(m->kind, body_len))
                flags |= FLAG_DIGEST;
        put_prefix(b, m, flags, gossip_key_id(sk + 32), body_len);
        if (flags & FLAG_MAC)
                mac_frame(b, OFF_BODY + body_len, m->mac_key);
        else
                sign_frame(b, OFF_BODY + body_len, flags & FLAG_DIGEST, sk);
        *out_len = overhead + body_len;
        if (n_sent)
                *n_sent = k;
        return 0;
}

size_t gossip_wire_frame_bound(const struct gossip_msg *m)
{
        size_t n = GOSSIP_WIRE_OVERHEAD + 1 + 16 * 10 + 1 + 5;

        if (!m)
                return 0;
        if (GOSSIP_WIRE_IS_TENSOR(m->kind))
                n += 5 + m->u.tensor.payload_len;
        else if (m->kind == GOSSIP_MSG_STATE)
                n += 5 + m->u.state.len;
        if (has_settings(m)) /* key, array, each pair: array, 2 str8 */
                n += 1 + 3 +
                     m->settings->n * (1 + 2 + GOSSIP_SETTING_NAME_MAX + 2 +
                                       GOSSIP_SETTING_VALUE_MAX);
        /* key 20: key, bin8; key 21: key, array32, each a bin8; key 22:
         * key, bin32 */
        n += 1 + 2 + GOSSIP_CERT_MAX_BYTES + 1 + 5 +
             (size_t)m->n_certs * (2 + GOSSIP_CERT_MAX_BYTES) + 1 + 5 +
             m->crl_len;
        return n + (size_t)m->n_updates * UPDATE_MAX_BYTES;
}

/* ---- body bounds check --------------------------------------------------- */

struct walk {
        const uint8_t *p, *end;
        uint32_t objects;
};

/* Consumes n raw bytes; 0 or -1 if they are not there. */
static int walk_skip(struct walk *w, uint64_t n)
{
        if (n > (uint64_t)(w->end - w->p))
                return -1;
        w->p += n;
        return 0;
}

static int walk_obj(struct walk *w, int depth);

/* n elements follow; each needs at least one byte. */
static int walk_items(struct walk *w, uint64_t n, int depth)
{
        if (n > (uint64_t)(w->end - w->p) || depth >= MAX_DEPTH)
                return -1;
        for (uint64_t i = 0; i < n; i++)
                if (walk_obj(w, depth + 1))
                        return -1;
        return 0;
}

/* Sizes of the fixed-width formats 0xc0..0xdf: bytes after the type byte,
 * or -1 for variable formats handled in walk_obj (and 0xc1, never used). */
static const int8_t fixed_len[32] = {
    0, -1, 0, 0, -1, -1, -1, -1, -1, -1, 4,  8,  1,  2,  4,  8,
    1, 2,  4, 8, 2,  3,  5,  9,  17, -1, -1, -1, -1, -1, -1, -1,
};

/* Walks one msgpack object, checking every declared length and count
 * against the bytes left, the nesting depth and the object budget. */
static int walk_obj(struct walk *w, int depth)
{
        uint8_t t;
        uint64_t n;

        if (w->p == w->end || ++w->objects > MAX_OBJECTS)
                return -1;
        t = *w->p++;
        if (t <= 0x7f || t >= 0xe0)
                return 0;
        if (t <= 0x8f)
                return walk_items(w, 2 * (uint64_t)(t & 0x0f), depth);
        if (t <= 0x9f)
                return walk_items(w, t & 0x0f, depth);
        if (t <= 0xbf)
                return walk_skip(w, t & 0x1f);
        if (fixed_len[t - 0xc0] >= 0)
                return walk_skip(w, (uint64_t)fixed_len[t - 0xc0]);
        switch (t) {
        case 0xc4: /* bin 8/16/32, str 8/16/32 */
        case 0xd9:
        case 0xc5:
        case 0xda:
        case 0xc6:
        case 0xdb: {
                int lb = (t == 0xc4 || t == 0xd9)   ? 1
                         : (t == 0xc5 || t == 0xda) ? 2
                                                    : 4;
                if ((size_t)(w->end - w->p) < (size_t)lb)
                        return -1;
                n = gn_be_get(w->p, lb);
                w->p += lb;
                return walk_skip(w, n);
        }
        case 0xc7: /* ext 8/16/32: length, type byte, data */
        case 0xc8:
        case 0xc9: {
                int lb = t == 0xc7 ? 1 : t == 0xc8 ? 2 : 4;
                if ((size_t)(w->end - w->p) < (size_t)lb)
                        return -1;
                n = gn_be_get(w->p, lb);
                w->p += lb;
                return walk_skip(w, n + 1);
        }
        case 0xdc: /* array 16/32 */
        case 0xdd:
        case 0xde: /* map 16/32 */
        case 0xdf: {
                int lb = (t == 0xdc || t == 0xde) ? 2 : 4;
                if ((size_t)(w->end - w->p) < (size_t)lb)
                        return -1;
                n = gn_be_get(w->p, lb);
                w->p += lb;
                return walk_items(w, t >= 0xde ? 2 * n : n, depth);
        }
        }
        return -1; /* 0xc1 */
}

/* 0 if b[0..n) is exactly one well-bounded msgpack object. */
static int body_bounded(const uint8_t *b, size_t n)
{
        struct walk w = {b, b + n, 0};

        return walk_obj(&w, 0) == 0 && w.p == w.end ? 0 : -1;
}

/* ---- body decoding ----------------------------------------------------- */

static int get_u64(const msgpack_object *o, uint64_t *v)
{
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                return -1;
        *v = o->via.u64;
        return 0;
}

static int get_u32(const msgpack_object *o, uint32_t *v)
{
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
            o->via.u64 > UINT32_MAX)
                return -1;
        *v = (uint32_t)o->via.u64;
        return 0;
}

static int get_bool(const msgpack_object *o, uint8_t *v)
{
        if (o->type != MSGPACK_OBJECT_BOOLEAN)
                return -1;
        *v = o->via.boolean ? 1 : 0;
        return 0;
}

static int get_bin(const msgpack_object *o, const uint8_t **p, size_t *n)
{
        if (o->type != MSGPACK_OBJECT_BIN)
                return -1;
        *p = (const uint8_t *)o->via.bin.ptr;
        *n = o->via.bin.size;
        return 0;
}

static int get_addr(const msgpack_object *o, struct gossip_addr *a,
                    int optional)
{
        const uint8_t *p;
        size_t n;

        memset(a, 0, sizeof(*a));
        if (optional && o->type == MSGPACK_OBJECT_NIL)
                return 0;
        if (get_bin(o, &p, &n) || (n != ADDR4_BYTES && n != ADDR6_BYTES))
                return -1;
        a->family = n == ADDR4_BYTES ? 4 : 6;
        memcpy(a->addr, p, n - 2);
        a->port = (uint16_t)gn_be_get(p + n - 2, 2);
        return 0;
}

/* A name or version: nil, or printable text shorter than max. */
static int get_text(const msgpack_object *o, char *name, uint32_t max)
{
        uint32_t n;

        name[0] = 0;
        if (o->type == MSGPACK_OBJECT_NIL)
                return 0;
        if (o->type != MSGPACK_OBJECT_STR)
                return -1;
        n = o->via.str.size;
        if (n >= max)
                return -1;
        for (uint32_t i = 0; i < n; i++)
                if (!name_byte_ok((uint8_t)o->via.str.ptr[i]))
                        return -1;
        memcpy(name, o->via.str.ptr, n);
        name[n] = 0;
        return 0;
}

/* A LEAVE's stop: [reason, step, acc_bp, target_bp, (origin|nil),
 * ...ignored]; accuracies at most 10000 (100%). */
static int get_stop(const msgpack_object *o, struct gossip_stop *s)
{
        const msgpack_object *f;
        uint64_t reason;

        if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 4)
                return -1;
        f = o->via.array.ptr;
        if (get_u64(&f[0], &reason) || reason > UINT8_MAX ||
            get_u64(&f[1], &s->step) || get_u32(&f[2], &s->acc_bp) ||
            get_u32(&f[3], &s->target_bp) || s->acc_bp > 10000 ||
            s->target_bp > 10000)
                return -1;
        s->reason = (uint8_t)reason;
        if (o->via.array.size > 4 &&
            get_text(&f[4], s->origin, GOSSIP_WIRE_NAME_MAX))
                return -1;
        return 0;
}

/* [key_id, state, incarnation, addr|nil, (name|nil), (origin),
 *  (version|nil), (settings digest), (loading), ...ignored] */
static int get_update(const msgpack_object *o, struct gossip_update *u)
{
        const msgpack_object *f;
        uint64_t state;

        if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 4)
                return -1;
        f = o->via.array.ptr;
        if (get_u64(&f[0], &u->key_id) || !u->key_id ||
            get_u64(&f[1], &state) || state > GOSSIP_WIRE_STATE_MAX ||
            get_u64(&f[2], &u->incarnation) || get_addr(&f[3], &u->addr, 1))
                return -1;
        u->state = (uint8_t)state;
        u->name[0] = 0;
        u->origin = 0;
        u->version[0] = 0;
        if (o->via.array.size > 4 &&
            get_text(&f[4], u->name, GOSSIP_WIRE_NAME_MAX))
                return -1;
        if (o->via.array.size > 5 && get_u64(&f[5], &u->origin))
                return -1;
        if (o->via.array.size > 6 &&
            get_text(&f[6], u->version, GOSSIP_WIRE_VERSION_MAX))
                return -1;
        u->settings = 0;
        if (o->via.array.size > 7 && get_u64(&f[7], &u->settings))
                return -1;
        /* 1 loading; any other uint is "exchanging" (room for phases a
         * later version may tell) */
        u->loading = 0;
        if (o->via.array.size > 8) {
                uint64_t phase;

                if (get_u64(&f[8], &phase))
                        return -1;
                u->loading = phase == 1;
        }
        return 0;
}

static int get_updates(const msgpack_object *o, struct gossip_msg *m)
{
        uint32_t n;

        if (o->type != MSGPACK_OBJECT_ARRAY)
                return -1;
        n = o->via.array.size;
        if (n > GOSSIP_WIRE_MAX_UPDATES || n > m->updates_cap)
                return -1;
        for (uint32_t i = 0; i < n; i++)
                if (get_update(&o->via.array.ptr[i], &m->updates[i]))
                        return -1;
        m->n_updates = n;
        return 0;
}

/* Key 19: [[name, value], ...], at most GOSSIP_SETTINGS_MAX pairs, names
 * non-empty and strictly ascending, texts as names are. */
static int get_settings(const msgpack_object *o, struct gossip_msg *m)
{
        struct gossip_settings *s = m->settings;
        uint32_t n;

        if (o->type != MSGPACK_OBJECT_ARRAY)
                return -1;
        n = o->via.array.size;
        if (n > GOSSIP_SETTINGS_MAX)
                return -1;
        if (!s)
                return 0; /* no room asked for: checked, not kept */
        for (uint32_t i = 0; i < n; i++) {
                const msgpack_object *p = &o->via.array.ptr[i];

                if (p->type != MSGPACK_OBJECT_ARRAY || p->via.array.size != 2 ||
                    get_text(&p->via.array.ptr[0], s->s[i].name,
                             GOSSIP_SETTING_NAME_MAX) ||
                    p->via.array.ptr[0].type != MSGPACK_OBJECT_STR ||
                    !s->s[i].name[0] ||
                    p->via.array.ptr[1].type != MSGPACK_OBJECT_STR ||
                    get_text(&p->via.array.ptr[1], s->s[i].value,
                             GOSSIP_SETTING_VALUE_MAX) ||
                    (i && strcmp(s->s[i - 1].name, s->s[i].name) >= 0))
                        return -1;
        }
        s->n = n;
        s->digest = gossip_settings_digest(s->s, n);
        m->settings_told = 1;
        return 0;
}

/* A certificate's bytes: a bin of a certificate's possible lengths (what
 * it says is judged by the receiver, gossip_cert_verify). */
static int get_cert(const msgpack_object *o, struct gossip_blob *b)
{
        if (get_bin(o, &b->p, &b->len) || b->len < GOSSIP_CERT_MIN_BYTES ||
            b->len > GOSSIP_CERT_MAX_BYTES)
                return -1;
        return 0;
}

/* Key 21: an array of certificates, kept when m has room for them. */
static int get_certs(const msgpack_object *o, struct gossip_msg *m)
{
        struct gossip_blob b;
        uint32_t n;

        if (o->type != MSGPACK_OBJECT_ARRAY)
                return -1;
        n = o->via.array.size;
        if (n > GOSSIP_WIRE_MAX_UPDATES)
                return -1;
        for (uint32_t i = 0; i < n; i++) {
                if (get_cert(&o->via.array.ptr[i], &b))
                        return -1;
                if (i < m->certs_cap)
                        m->certs[i] = b;
        }
        m->n_certs = n < m->certs_cap ? n : m->certs_cap;
        return 0;
}

/* One known key of the body into m. */
static int get_field(int key, const msgpack_object *v, struct gossip_msg *m)
{
        struct gossip_tensor *t = &m->u.tensor;
        int is_state = m->kind == GOSSIP_MSG_STATE;

        switch (key) {
        case K_UPDATES:
                return get_updates(v, m);
        case K_TARGET:
                if (m->kind == GOSSIP_MSG_PING)
                        return get_u64(v, &m->u.ping.target);
                if (m->kind == GOSSIP_MSG_ACK)
                        return get_u64(v, &m->u.ack.target);
                return get_u64(v, &m->u.ping_req.target);
        case K_ADDR:
                return get_addr(v, &m->u.ping_req.addr, 0);
        case K_ACK_SEQ:
                return get_u64(v, &m->u.ack.ack_seq);
        case K_NACK:
                return get_bool(v, &m->u.ack.nack);
        case K_REPLY:
                return get_bool(v, &m->u.sync.reply);
        case K_VIEW: {
                const uint8_t *p;
                size_t len;

                if (get_bin(v, &p, &len) || len != GOSSIP_VIEW_DIGEST_BYTES)
                        return -1;
                memcpy(m->u.sync.view, p, len);
                m->u.sync.has_view = 1;
                return 0;
        }
        case K_STEP:
                return get_u64(v, is_state ? &m->u.state.step : &t->step);
        case K_CODEC:
                return get_u32(v, &t->codec);
        case K_PART_INDEX:
                return get_u32(v, &t->part_index);
        case K_PART_COUNT:
                return get_u32(v, &t->part_count);
        case K_N_ELEMS:
                return get_u64(v, &t->n_elems);
        case K_PAYLOAD:
                return is_state ? get_bin(v, &m->u.state.data, &m->u.state.len)
                                : get_bin(v, &t->payload, &t->payload_len);
        case K_REQ_SEQ:
                return get_u64(v, &m->u.state.req_seq);
        case K_STOP:
                return get_stop(v, &m->u.leave);
        case K_PERIOD:
                return get_u32(v, &t->period) || t->period == 0 ? -1 : 0;
        case K_NEED:
                return get_u32(v, &t->need) || t->need == 0 ? -1 : 0;
        case K_RX_RATE:
                return get_u32(v, &t->rx_rate) || t->rx_rate == 0 ? -1 : 0;
        case K_RX_SPAN:
                return get_u32(v, &t->rx_span) || t->rx_span == 0 ? -1 : 0;
        case K_SETTINGS:
                return get_settings(v, m);
        case K_CERT: {
                struct gossip_blob b;

                if (get_cert(v, &b))
                        return -1;
                m->cert = b.p;
                m->cert_len = b.len;
                return 0;
        }
        case K_CERTS:
                return get_certs(v, m);
        case K_CRL:
                if (get_bin(v, &m->crl, &m->crl_len) ||
                    m->crl_len < GOSSIP_CRL_MIN_BYTES ||
                    m->crl_len > GOSSIP_CRL_MAX_BYTES)
                        return -1;
                return 0;
        }
        return -1;
}

static int get_body(const msgpack_object *o, struct gossip_msg *m)
{
        const struct kind_info *ki = &kinds[m->kind];
        const struct gossip_tensor *t = &m->u.tensor;
        unsigned seen = 0;

        if (o->type != MSGPACK_OBJECT_MAP)
                return -1;
        for (uint32_t i = 0; i < o->via.map.size; i++) {
                const msgpack_object_kv *kv = &o->via.map.ptr[i];
                uint64_t key = kv->key.via.u64;

                if (kv->key.type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
                    key >= K_COUNT || !(ki->allowed & BIT(key)))
                        continue; /* unknown to this kind: ignored */
                if ((seen & BIT(key)) || get_field((int)key, &kv->val, m))
                        return -1;
                seen |= BIT(key);
        }
        if ((seen & ki->required) != ki->required)
                return -1;
        if ((ki->allowed & BIT(K_PART_COUNT)) &&
            (t->part_count == 0 || t->part_index >= t->part_count))
                return -1;
        return 0;
}

static int decode_body(const uint8_t *b, size_t n, struct gossip_msg *m)
{
        msgpack_unpacked up;
        size_t off = 0;
        int err = GOSSIP_EDECODE;

        if (body_bounded(b, n))
                return GOSSIP_EDECODE;
        msgpack_unpacked_init(&up);
        if (msgpack_unpack_next(&up, (const char *)b, n, &off) !=
                MSGPACK_UNPACK_SUCCESS ||
            off != n)
                goto out;
        if (get_body(&up.data, m) == 0)
                err = 0;
out:
        msgpack_unpacked_destroy(&up);
        return err;
}

/* ---- the view digest (protocol.md 3.9) ---------------------------------- */

static void hash_u64(crypto_generichash_state *h, uint64_t v)
{
        uint8_t b[8];

        for (int i = 0; i < 8; i++)
                b[i] = (uint8_t)(v >> (56 - 8 * i));
        crypto_generichash_update(h, b, sizeof(b));
}

static void hash_str(crypto_generichash_state *h, const char *s, size_t max)
{
        uint8_t len = (uint8_t)strnlen(s, max - 1);

        crypto_generichash_update(h, &len, 1);
        crypto_generichash_update(h, (const uint8_t *)s, len);
}

/* One entry's record: its update's fields and its certificate's hash. */
static void hash_entry(crypto_generichash_state *h,
                       const struct gossip_update *u,
                       const struct gossip_blob *cert)
{
        uint8_t b[2 + 16 + 2], ch[32];
        size_t n = 0, clen = cert ? cert->len : 0;

        hash_u64(h, u->key_id);
        hash_u64(h, u->incarnation);
        b[n++] = (uint8_t)(u->state | (u->loading ? DIGEST_LOADING : 0));
        b[n++] = u->addr.family;
        if (u->addr.family) {
                size_t alen = u->addr.family == 4 ? 4 : 16;
                memcpy(b + n, u->addr.addr, alen);
                n += alen;
                b[n++] = (uint8_t)(u->addr.port >> 8);
                b[n++] = (uint8_t)u->addr.port;
        }
        crypto_generichash_update(h, b, n);
        hash_str(h, u->name, sizeof(u->name));
        hash_u64(h, u->origin);
        hash_str(h, u->version, sizeof(u->version));
        hash_u64(h, u->settings);
        b[0] = (uint8_t)(clen >> 8);
        b[1] = (uint8_t)clen;
        crypto_generichash_update(h, b, 2);
        if (clen) {
                crypto_generichash(ch, sizeof(ch), cert->p, clen, NULL, 0);
                crypto_generichash_update(h, ch, sizeof(ch));
        }
}

struct view_ent {
        const struct gossip_update *u;
        const struct gossip_blob *cert;
};

static int by_key_id(const void *a, const void *b)
{
        uint64_t x = ((const struct view_ent *)a)->u->key_id;
        uint64_t y = ((const struct view_ent *)b)->u->key_id;

        return x < y ? -1 : x > y;
}

int gossip_wire_view_digest(const struct gossip_update *u,
                            const struct gossip_blob *certs, size_t n,
                            uint8_t out[GOSSIP_VIEW_DIGEST_BYTES])
{
        struct view_ent *v = malloc((n ? n : 1) * sizeof(*v));
        crypto_generichash_state h;

        if (!v)
                return GOSSIP_ENOMEM;
        for (size_t i = 0; i < n; i++)
                v[i] = (struct view_ent){&u[i], certs ? &certs[i] : NULL};
        qsort(v, n, sizeof(*v), by_key_id);
        crypto_generichash_init(&h, NULL, 0, GOSSIP_VIEW_DIGEST_BYTES);
        for (size_t i = 0; i < n; i++)
                hash_entry(&h, v[i].u, v[i].cert);
        crypto_generichash_final(&h, out, GOSSIP_VIEW_DIGEST_BYTES);
        free(v);
        return 0;
}

/* ---- frame decoding ---------------------------------------------------- */

static int verify(const uint8_t *b, size_t signed_len, int digest,
                  const uint8_t *pk)
{
        uint8_t d[crypto_generichash_BYTES];
        const uint8_t *sig = b + signed_len;

        if (!digest)
                return crypto_sign_verify_detached(sig, b, signed_len, pk);
        crypto_generichash(d, sizeof(d), b, signed_len, NULL, 0);
        return crypto_sign_verify_detached(sig, d, sizeof(d), pk);
}

/* 0 if the tag after b[0..n) is right for key (NULL: no key, -1). */
static int verify_mac(const uint8_t *b, size_t n, const uint8_t *key)
{
        uint8_t none[1] = {0};

        if (!key)
                return -1;
        return crypto_aead_xchacha20poly1305_ietf_decrypt_detached(
            none, NULL, none, 0, b + n, b, n, b + OFF_KEY_ID, key);
}

/* Check 9 of docs/protocol.md 2.3: MAC only on stream bulk frames and
 * never with DIGEST; otherwise DIGEST iff the kind or length asks. */
static int flags_consistent(uint8_t flags, unsigned kind, size_t body_len)
{
        if (flags & FLAG_MAC)
                return mac_allowed(kind, flags & FLAG_STREAM) &&
                       !(flags & FLAG_DIGEST);
        return !(flags & FLAG_DIGEST) == !needs_digest(kind, body_len);
}

/* Everything that can be checked without the keyring. */
static int check_prefix(const uint8_t *b, size_t len, size_t max,
                        uint64_t *body_len)
{
        size_t overhead;

        if (len > max)
                return GOSSIP_ETOOBIG;
        /* The flags byte says how long the trailer is. */
        if (len <= OFF_FLAGS)
                return GOSSIP_ESHORT;
        overhead = GOSSIP_WIRE_PREFIX_BYTES + trailer_len(b[OFF_FLAGS]);
        if (len < overhead)
                return GOSSIP_ESHORT;
        if (b[OFF_MAGIC] != MAGIC0 || b[OFF_MAGIC + 1] != MAGIC1)
                return GOSSIP_EDECODE;
        if (b[OFF_VERSION] != GOSSIP_WIRE_VERSION)
                return GOSSIP_EVERSION;
        if (!kind_valid(b[OFF_KIND]))
                return GOSSIP_EKIND;
        if ((b[OFF_FLAGS] & ~FLAGS_KNOWN) || b[OFF_RESERVED] ||
            b[OFF_RESERVED + 1] || b[OFF_RESERVED + 2])
                return GOSSIP_EDECODE;
        *body_len = gn_be_get(b + OFF_BODY_LEN, 4);
        if (overhead + *body_len > len)
                return GOSSIP_ESHORT;
        if (overhead + *body_len < len)
                return GOSSIP_EDECODE; /* trailing bytes */
        if (!flags_consistent(b[OFF_FLAGS], b[OFF_KIND], *body_len))
                return GOSSIP_EDECODE;
        return 0;
}

static size_t channel_max(const struct gossip_wire_limits *lim, int channel)
{
        if (channel == GOSSIP_CH_DGRAM)
                return lim && lim->max_dgram ? lim->max_dgram
                                             : GOSSIP_WIRE_DGRAM_MAX;
        return lim && lim->max_stream ? lim->max_stream
                                      : GOSSIP_WIRE_STREAM_MAX;
}

/* Checks 1-12 of docs/protocol.md 2.3: layout, signer, signature or tag,
 * channel. 0 and *body_len, or a GOSSIP_E* code. Reads no state but kr. */
static int authenticate(const uint8_t *b, size_t len, int channel,
                        const struct gossip_wire_limits *lim,
                        const struct gossip_keyring *kr, uint64_t *body_len)
{
        uint64_t key_id;
        const uint8_t *pk;
        int err;

        err = check_prefix(b, len, channel_max(lim, channel), body_len);
        if (err)
                return err;
        key_id = gn_be_get(b + OFF_KEY_ID, 8);
        pk = gossip_keyring_find(kr, key_id);
        if (!pk)
                return GOSSIP_EUNKNOWNKEY;
        if (b[OFF_FLAGS] & FLAG_MAC)
                err = verify_mac(b, OFF_BODY + *body_len,
                                 gossip_keyring_mac_key(kr, key_id));
        else
                err = verify(b, OFF_BODY + *body_len,
                             b[OFF_FLAGS] & FLAG_DIGEST, pk);
        if (err)
                return GOSSIP_EBADSIG;
        /* Signed for the other channel: a cross-channel replay. */
        if (!(b[OFF_FLAGS] & FLAG_STREAM) != (channel == GOSSIP_CH_DGRAM))
                return GOSSIP_EREPLAY;
        return 0;
}

static int decode_frame(const uint8_t *b, size_t len, int channel,
                        const struct gossip_wire_limits *lim,
                        const struct gossip_keyring *kr,
                        struct gossip_replay *rp, struct gossip_msg *m)
{
        struct gossip_update *upd = m->updates;
        struct gossip_settings *settings = m->settings;
        struct gossip_blob *certs = m->certs;
        uint32_t upd_cap = m->updates_cap, certs_cap = m->certs_cap;
        uint64_t body_len;
        int err;

        err = authenticate(b, len, channel, lim, kr, &body_len);
        if (err)
                return err;
        memset(m, 0, sizeof(*m));
        m->updates = upd;
        m->updates_cap = upd_cap;
        m->settings = settings;
        m->certs = certs;
        m->certs_cap = certs_cap;
        m->kind = b[OFF_KIND];
        m->channel = (uint8_t)channel;
        m->key_id = gn_be_get(b + OFF_KEY_ID, 8);
        m->incarnation = gn_be_get(b + OFF_INC, 8);
        m->seq = gn_be_get(b + OFF_SEQ, 8);
        m->step = gn_be_get(b + OFF_STEP, 8);
        if (rp && gossip__replay_check(rp, m->key_id, channel, m->incarnation,
                                       m->seq))
                return GOSSIP_EREPLAY;
        err = decode_body(b + OFF_BODY, body_len, m);
        if (err)
                return err;
        if (rp)
                err = gossip__replay_commit(rp, m->key_id, channel,
                                            m->incarnation, m->seq);
        return err;
}

int gossip_wire_authenticate(const void *buf, size_t len, int channel,
                             const struct gossip_wire_limits *lim,
                             const struct gossip_keyring *kr)
{
        uint64_t body_len;

        if (!buf || !kr ||
            (channel != GOSSIP_CH_DGRAM && channel != GOSSIP_CH_STREAM))
                return GOSSIP_EINVAL;
        return authenticate(buf, len, channel, lim, kr, &body_len);
}

int gossip_wire_decode(const void *buf, size_t len, int channel,
                       const struct gossip_wire_limits *lim,
                       const struct gossip_keyring *kr,
                       struct gossip_replay *rp, struct gossip_msg *out,
                       struct gossip_wire_stats *st)
{
        int err;

        if (!buf || !kr || !out ||
            (channel != GOSSIP_CH_DGRAM && channel != GOSSIP_CH_STREAM))
                err = GOSSIP_EINVAL;
        else
                err = decode_frame(buf, len, channel, lim, kr, rp, out);
        if (err) {
                gossip_wire_stats_count(st, err);
                return err;
        }
        if (st) {
                st->accepted[out->kind]++;
                st->rx_bytes += len;
        }
        return 0;
}

int gossip_wire_authenticate_pk(const void *buf, size_t len, int channel,
                                const struct gossip_wire_limits *lim,
                                const uint8_t pk[GOSSIP_KEY_BYTES])
{
        const uint8_t *b = buf;
        uint64_t body_len;
        int err;

        if (!buf || !pk ||
            (channel != GOSSIP_CH_DGRAM && channel != GOSSIP_CH_STREAM))
                return GOSSIP_EINVAL;
        err = check_prefix(b, len, channel_max(lim, channel), &body_len);
        if (err)
                return err;
        if (gn_be_get(b + OFF_KEY_ID, 8) != gossip_key_id(pk))
                return GOSSIP_EUNKNOWNKEY;
        if ((b[OFF_FLAGS] & FLAG_MAC) ||
            verify(b, OFF_BODY + body_len, b[OFF_FLAGS] & FLAG_DIGEST, pk))
                return GOSSIP_EBADSIG;
        if (!(b[OFF_FLAGS] & FLAG_STREAM) != (channel == GOSSIP_CH_DGRAM))
                return GOSSIP_EREPLAY;
        return 0;
}

/* Key 20 of a JOIN or SYNC body, found without msgpack-c's objects: the
 * walk that bounds the body, stopping at the top map's key 20. */
static int find_cert(const uint8_t *b, size_t n, const uint8_t **cert,
                     size_t *cert_len)
{
        struct walk w = {b, b + n, 0};
        uint64_t pairs;
        uint8_t t;

        if (body_bounded(b, n) || w.p == w.end)
                return GOSSIP_EDECODE;
        t = *w.p++;
        if (t >= 0x80 && t <= 0x8f) {
                pairs = t & 0x0f;
        } else if ((t == 0xde || t == 0xdf) &&
                   (size_t)(w.end - w.p) >= (t == 0xde ? 2u : 4u)) {
                pairs = gn_be_get(w.p, t == 0xde ? 2 : 4);
                w.p += t == 0xde ? 2 : 4;
        } else {
                return GOSSIP_EDECODE;
        }
        for (uint64_t i = 0; i < pairs; i++) {
                /* the key as a fixint or uint 8 (any longer form is
                 * not 20) */
                int key = w.p[0] <= 0x7f                       ? w.p[0]
                          : w.p[0] == 0xcc && w.end - w.p >= 2 ? w.p[1]
                                                               : -1;
                uint64_t l;

                if (walk_obj(&w, 1))
                        return GOSSIP_EDECODE;
                if (key != K_CERT) {
                        if (walk_obj(&w, 1))
                                return GOSSIP_EDECODE;
                        continue;
                }
                /* bin 8: a certificate is at most 185 bytes */
                if (w.end - w.p < 2 || w.p[0] != 0xc4)
                        return GOSSIP_EDECODE;
                l = w.p[1];
                if (l < GOSSIP_CERT_MIN_BYTES || l > GOSSIP_CERT_MAX_BYTES ||
                    l > (uint64_t)(w.end - w.p - 2))
                        return GOSSIP_EDECODE;
                *cert = w.p + 2;
                *cert_len = (size_t)l;
                return 0;
        }
        return GOSSIP_ENOPEER;
}

int gossip_wire_peek_cert(const void *buf, size_t len, int channel,
                          const struct gossip_wire_limits *lim,
                          const uint8_t **cert, size_t *cert_len)
{
        const uint8_t *b = buf;
        uint64_t body_len;
        int err;

        if (!buf || !cert || !cert_len ||
            (channel != GOSSIP_CH_DGRAM && channel != GOSSIP_CH_STREAM))
                return GOSSIP_EINVAL;
        err = check_prefix(b, len, channel_max(lim, channel), &body_len);
        if (err)
                return err;
        if (b[OFF_KIND] != GOSSIP_MSG_JOIN && b[OFF_KIND] != GOSSIP_MSG_SYNC)
                return GOSSIP_ENOPEER;
        return find_cert(b + OFF_BODY, body_len, cert, cert_len);
}

int gossip_wire_peek_sender(const void *buf, size_t len, uint64_t *key_id,
                            uint8_t *kind)
{
        const uint8_t *b = buf;

        if (!buf || len < OFF_KEY_ID + 8)
                return GOSSIP_ESHORT;
        if (b[OFF_MAGIC] != MAGIC0 || b[OFF_MAGIC + 1] != MAGIC1)
                return GOSSIP_EDECODE;
        if (key_id)
                *key_id = gn_be_get(b + OFF_KEY_ID, 8);
        if (kind)
                *kind = b[OFF_KIND];
        return 0;
}

void gossip_wire_stats_count(struct gossip_wire_stats *st, int err)
{
        if (st && err < 0 && -err < GOSSIP_WIRE_REJECT_SLOTS)
                st->rejected[-err]++;
}

void gossip_wire_stream_put_len(uint8_t hdr[4], uint32_t frame_len)
{
        gn_be_put(hdr, frame_len, 4);
}

int gossip_wire_stream_get_len(const uint8_t hdr[4],
                               const struct gossip_wire_limits *lim,
                               uint32_t *frame_len)
{
        uint32_t n = (uint32_t)gn_be_get(hdr, 4);

        if (n > channel_max(lim, GOSSIP_CH_STREAM))
                return GOSSIP_ETOOBIG;
        if (n < GOSSIP_WIRE_MAC_OVERHEAD)
                return GOSSIP_ESHORT;
        *frame_len = n;
        return 0;
}
