/*
 * test_wire.c - the wire format: round trips, rejects, replay windows, the
 * keyring, MAC frames and their pairwise keys, and the test vectors of
 * docs/protocol.md byte for byte.
 *
 * Keys come from fixed seeds (Ed25519 is deterministic), so frames are
 * reproducible; the random parts (update contents, payload bytes) come from
 * GN_SEED (printed; set it to replay a failure).
 */
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "base/gn_rng.h"
#include "test_seed.h"
#include "test_doc.h"
#include "test_frame.h"
#include "base/gn_endian.h"
#include "gossip/wire.h"
#include "keyring_private.h"

#ifndef GN_SOURCE_DIR
#define GN_SOURCE_DIR "."
#endif

static uint64_t seed;
static uint8_t pk_a[32], sk_a[64], pk_b[32], sk_b[64], pk_c[32], sk_c[64];
static uint64_t id_a, id_b, id_c;
static uint64_t rng;

static uint64_t rnd(void)
{
        return gn_splitmix64(&rng);
}

/* Seed i: bytes i*32 .. i*32+31 (the test-vector keys of protocol.md). */
static void seed_key(int i, uint8_t pk[32], uint8_t sk[64])
{
        uint8_t s[32];

        for (int j = 0; j < 32; j++)
                s[j] = (uint8_t)(i * 32 + j);
        crypto_sign_seed_keypair(pk, sk, s);
}

static int group_setup(void **state)
{
        seed = gn_test_seed("test_wire", 20261129);
        if (sodium_init() < 0)
                return -1;
        seed_key(0, pk_a, sk_a);
        seed_key(1, pk_b, sk_b);
        seed_key(2, pk_c, sk_c);
        id_a = gossip_key_id(pk_a);
        id_b = gossip_key_id(pk_b);
        id_c = gossip_key_id(pk_c);
        return 0;
}

struct fx {
        struct gossip_keyring *kr;
        struct gossip_replay *rp;
        struct gossip_wire_stats st;
        struct gossip_update upd[64], got_upd[GOSSIP_WIRE_MAX_UPDATES];
        uint8_t payload[256];
        uint8_t buf[8192];
        uint64_t next_seq; /* fresh frames for the replay window */
};

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        rng = seed;
        assert_non_null(f);
        f->kr = gossip_keyring_new();
        f->rp = gossip_replay_new();
        assert_non_null(f->kr);
        assert_non_null(f->rp);
        assert_int_equal(gossip_keyring_add(f->kr, pk_a, NULL), 0);
        assert_int_equal(gossip_keyring_add(f->kr, pk_b, NULL), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        gossip_keyring_free(f->kr);
        gossip_replay_free(f->rp);
        free(f);
        return 0;
}

static void rand_update(struct gossip_update *u, int i)
{
        memset(u, 0, sizeof(*u));
        u->key_id = rnd() | 1;
        u->incarnation = rnd() >> (rnd() % 64);
        u->state = (uint8_t)(rnd() % 4);
        switch (i % 3) {
        case 0:
                u->addr.family = 4;
                memcpy(u->addr.addr, "\x7f\x00\x00\x01", 4);
                u->addr.port = (uint16_t)rnd();
                snprintf(u->name, sizeof(u->name), "pi-%d", i);
                break;
        case 1:
                u->addr.family = 6;
                for (int j = 0; j < 16; j++)
                        u->addr.addr[j] = (uint8_t)rnd();
                u->addr.port = (uint16_t)rnd();
                memset(u->name, 'x', GOSSIP_WIRE_NAME_MAX - 1);
                break;
        default:
                break; /* no address, no name */
        }
}

/* A message of kind with random contents, on its usual channel. */
static void make_msg(struct fx *f, int kind, struct gossip_msg *m,
                     uint32_t n_upd)
{
        memset(m, 0, sizeof(*m));
        m->kind = (uint8_t)kind;
        m->incarnation = 7;
        m->seq = ++f->next_seq;
        m->step = rnd() >> 40;
        if (kind == GOSSIP_MSG_PING || kind == GOSSIP_MSG_PING_REQ ||
            kind == GOSSIP_MSG_ACK || kind == GOSSIP_MSG_SYNC ||
            kind == GOSSIP_MSG_JOIN) {
                for (uint32_t i = 0; i < n_upd; i++)
                        rand_update(&f->upd[i], (int)i);
                m->updates = f->upd;
                m->n_updates = n_upd;
        }
        for (size_t i = 0; i < sizeof(f->payload); i++)
                f->payload[i] = (uint8_t)rnd();
        switch (kind) {
        case GOSSIP_MSG_PING:
                m->u.ping.target = id_b;
                break;
        case GOSSIP_MSG_PING_REQ:
                m->u.ping_req.target = id_c;
                m->u.ping_req.addr.family = 6;
                m->u.ping_req.addr.addr[15] = 1;
                m->u.ping_req.addr.port = 7946;
                break;
        case GOSSIP_MSG_ACK:
                m->u.ack.ack_seq = rnd();
                m->u.ack.target = id_c;
                m->u.ack.nack = 1;
                break;
        case GOSSIP_MSG_SYNC:
                m->u.sync.reply = 1;
                m->u.sync.has_view = 1;
                for (int i = 0; i < GOSSIP_VIEW_DIGEST_BYTES; i++)
                        m->u.sync.view[i] = (uint8_t)(0xa0 + i);
                break;
        case GOSSIP_MSG_GRADIENT:
        case GOSSIP_MSG_PARAMS:
        case GOSSIP_MSG_SAMPLES:
                m->channel = GOSSIP_CH_STREAM;
                m->u.tensor.step = m->step - 1;
                m->u.tensor.codec = 3;
                m->u.tensor.part_index = 2;
                m->u.tensor.part_count = 5;
                m->u.tensor.n_elems = 1000000;
                m->u.tensor.payload = f->payload;
                m->u.tensor.payload_len = 48;
                break;
        case GOSSIP_MSG_STATE:
                m->channel = GOSSIP_CH_STREAM;
                m->u.state.step = m->step;
                m->u.state.req_seq = rnd();
                m->u.state.data = f->payload;
                m->u.state.len = sizeof(f->payload);
                break;
        }
}

static void assert_update_equal(const struct gossip_update *a,
                                const struct gossip_update *b)
{
        assert_int_equal(a->key_id, b->key_id);
        assert_int_equal(a->incarnation, b->incarnation);
        assert_int_equal(a->state, b->state);
        assert_int_equal(a->addr.family, b->addr.family);
        if (a->addr.family) {
                assert_memory_equal(a->addr.addr, b->addr.addr,
                                    a->addr.family == 4 ? 4 : 16);
                assert_int_equal(a->addr.port, b->addr.port);
        }
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->origin, b->origin);
}

static void assert_msg_equal(const struct gossip_msg *a,
                             const struct gossip_msg *b, uint32_t n_upd)
{
        assert_int_equal(a->kind, b->kind);
        assert_int_equal(a->channel, b->channel);
        assert_int_equal(a->incarnation, b->incarnation);
        assert_int_equal(a->seq, b->seq);
        assert_int_equal(a->step, b->step);
        assert_int_equal(b->n_updates, n_upd);
        for (uint32_t i = 0; i < n_upd; i++)
                assert_update_equal(&a->updates[i], &b->updates[i]);
        switch (a->kind) {
        case GOSSIP_MSG_PING:
                assert_int_equal(a->u.ping.target, b->u.ping.target);
                break;
        case GOSSIP_MSG_PING_REQ:
                assert_int_equal(a->u.ping_req.target, b->u.ping_req.target);
                assert_int_equal(a->u.ping_req.addr.family,
                                 b->u.ping_req.addr.family);
                assert_memory_equal(a->u.ping_req.addr.addr,
                                    b->u.ping_req.addr.addr, 16);
                assert_int_equal(a->u.ping_req.addr.port,
                                 b->u.ping_req.addr.port);
                break;
        case GOSSIP_MSG_ACK:
                assert_int_equal(a->u.ack.ack_seq, b->u.ack.ack_seq);
                assert_int_equal(a->u.ack.target, b->u.ack.target);
                assert_int_equal(a->u.ack.nack, b->u.ack.nack);
                break;
        case GOSSIP_MSG_SYNC:
                assert_int_equal(a->u.sync.reply, b->u.sync.reply);
                assert_int_equal(a->u.sync.has_view, b->u.sync.has_view);
                assert_memory_equal(a->u.sync.view, b->u.sync.view,
                                    GOSSIP_VIEW_DIGEST_BYTES);
                break;
        case GOSSIP_MSG_LEAVE:
                assert_int_equal(a->u.leave.reason, b->u.leave.reason);
                assert_int_equal(a->u.leave.step, b->u.leave.step);
                assert_int_equal(a->u.leave.acc_bp, b->u.leave.acc_bp);
                assert_int_equal(a->u.leave.target_bp, b->u.leave.target_bp);
                assert_string_equal(a->u.leave.origin, b->u.leave.origin);
                break;
        case GOSSIP_MSG_GRADIENT:
        case GOSSIP_MSG_PARAMS:
        case GOSSIP_MSG_SAMPLES:
                assert_int_equal(a->u.tensor.step, b->u.tensor.step);
                assert_int_equal(a->u.tensor.codec, b->u.tensor.codec);
                assert_int_equal(a->u.tensor.part_index,
                                 b->u.tensor.part_index);
                assert_int_equal(a->u.tensor.part_count,
                                 b->u.tensor.part_count);
                assert_int_equal(a->u.tensor.n_elems, b->u.tensor.n_elems);
                assert_int_equal(
                    a->kind == GOSSIP_MSG_PARAMS ? a->u.tensor.period : 0,
                    b->u.tensor.period);
                assert_int_equal(
                    a->kind == GOSSIP_MSG_PARAMS ? a->u.tensor.rx_rate : 0,
                    b->u.tensor.rx_rate);
                assert_int_equal(a->u.tensor.payload_len,
                                 b->u.tensor.payload_len);
                assert_memory_equal(a->u.tensor.payload, b->u.tensor.payload,
                                    a->u.tensor.payload_len);
                break;
        case GOSSIP_MSG_STATE:
                assert_int_equal(a->u.state.step, b->u.state.step);
                assert_int_equal(a->u.state.req_seq, b->u.state.req_seq);
                assert_int_equal(a->u.state.len, b->u.state.len);
                assert_memory_equal(a->u.state.data, b->u.state.data,
                                    a->u.state.len);
                break;
        }
}

static int decode(struct fx *f, const void *buf, size_t len, int channel,
                  struct gossip_msg *out)
{
        memset(out, 0, sizeof(*out));
        out->updates = f->got_upd;
        out->updates_cap = GOSSIP_WIRE_MAX_UPDATES;
        return gossip_wire_decode(buf, len, channel, NULL, f->kr, f->rp, out,
                                  &f->st);
}

static size_t encode(struct gossip_msg *m, const uint8_t *sk, uint8_t *buf,
                     size_t cap)
{
        size_t len = 0;
        uint32_t sent = 0;

        assert_int_equal(gossip_wire_encode(m, sk, buf, cap, &len, &sent), 0);
        assert_int_equal(sent, m->n_updates);
        assert_true(len <= gossip_wire_frame_bound(m));
        return len;
}

static void test_roundtrip_every_kind(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m, got;

        for (int kind = 1; kind < GOSSIP_MSG_KIND_COUNT; kind++) {
                uint32_t n = kind <= GOSSIP_MSG_JOIN ? 7 : 0;
                size_t len;

                make_msg(f, kind, &m, n);
                len = encode(&m, sk_a, f->buf, sizeof(f->buf));
                assert_int_equal(decode(f, f->buf, len, m.channel, &got), 0);
                assert_int_equal(got.key_id, id_a);
                assert_msg_equal(&m, &got, n);
                assert_int_equal(f->st.accepted[kind], 1);
                /* the payload is borrowed from the input buffer */
                if (kind == GOSSIP_MSG_GRADIENT)
                        assert_true(got.u.tensor.payload > f->buf &&
                                    got.u.tensor.payload < f->buf + len);
        }
        for (int i = 0; i < GOSSIP_WIRE_REJECT_SLOTS; i++)
                assert_int_equal(f->st.rejected[i], 0);
}

/* A PING takes as many updates as fit in 1400 bytes, in order. */
static void test_updates_fill_datagram(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m, got;
        size_t len = 0, len_more = 0;
        uint32_t sent = 0;

        make_msg(f, GOSSIP_MSG_PING, &m, 64);
        assert_int_equal(gossip_wire_encode(&m, sk_a, f->buf,
                                            GOSSIP_WIRE_DGRAM_MAX, &len, &sent),
                         0);
        assert_true(len <= GOSSIP_WIRE_DGRAM_MAX);
        assert_true(sent > 10 && sent < 64);
        fprintf(stderr, "  %u of 64 updates in a %zu-byte PING\n", sent, len);
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got), 0);
        assert_msg_equal(&m, &got, sent);
        /* one more would not have fit */
        m.n_updates = sent + 1;
        assert_int_equal(gossip_wire_encode(&m, sk_a, f->buf, sizeof(f->buf),
                                            &len_more, NULL),
                         0);
        assert_true(len_more > GOSSIP_WIRE_DGRAM_MAX);
        /* too small for even the bare message */
        assert_int_equal(gossip_wire_encode(&m, sk_a, f->buf, 100, &len, &sent),
                         GOSSIP_ETOOBIG);
}

/* For every cap, the encoder fits exactly as many updates as fit: the
 * frame is within the cap and one more update would not be. */
static void test_updates_fill_every_cap(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m;
        uint32_t prev = 0;

        make_msg(f, GOSSIP_MSG_SYNC, &m, 64);
        for (int i = 0; i < 64; i++) /* short ones: crosses 15 and beyond */
                if (i % 2)
                        f->upd[i].name[0] = 0;
        for (size_t cap = GOSSIP_WIRE_OVERHEAD; cap <= 4000; cap++) {
                size_t len = 0, more = 0;
                uint32_t sent = 0;
                int err =
                    gossip_wire_encode(&m, sk_a, f->buf, cap, &len, &sent);

                if (err == GOSSIP_ETOOBIG && prev == 0)
                        continue; /* not even the bare message fits */
                if (err)
                        fail_msg("cap %zu: %s", cap, gossip_strerror(err));
                assert_true(len <= cap);
                assert_true(sent >= prev);
                prev = sent;
                if (sent == m.n_updates)
                        continue;
                m.n_updates = sent + 1;
                assert_int_equal(gossip_wire_encode(&m, sk_a, f->buf,
                                                    sizeof(f->buf), &more,
                                                    NULL),
                                 0);
                m.n_updates = 64;
                if (more <= cap)
                        fail_msg("cap %zu: %u updates sent, %u fit (%zu)", cap,
                                 sent, sent + 1, more);
        }
        assert_int_equal(prev, 64);
}

/* Every proper prefix and every single-bit flip of a valid frame of each
 * kind is rejected; afterwards the original is still accepted (rejects
 * never advance the replay window). */
static void test_truncations_and_bit_flips(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m, got;
        uint8_t *copy = malloc(sizeof(f->buf));
        uint64_t rejects = 0;

        assert_non_null(copy);
        for (int kind = 1; kind < GOSSIP_MSG_KIND_COUNT; kind++) {
                size_t len;

                make_msg(f, kind, &m, kind <= GOSSIP_MSG_JOIN ? 2 : 0);
                len = encode(&m, sk_a, f->buf, sizeof(f->buf));
                for (size_t n = 0; n < len; n++) {
                        memcpy(copy, f->buf, n);
                        assert_int_not_equal(
                            decode(f, copy, n, m.channel, &got), 0);
                        rejects++;
                }
                for (size_t bit = 0; bit < len * 8; bit++) {
                        memcpy(copy, f->buf, len);
                        copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
                        if (decode(f, copy, len, m.channel, &got) == 0)
                                fail_msg("kind %d: flip of bit %zu accepted",
                                         kind, bit);
                        rejects++;
                }
                assert_int_equal(decode(f, f->buf, len, m.channel, &got), 0);
        }
        uint64_t sum = 0;
        for (int i = 0; i < GOSSIP_WIRE_REJECT_SLOTS; i++)
                sum += f->st.rejected[i];
        assert_int_equal(sum, rejects);
        free(copy);
}

/* Each reject reason has its own code and its own counter. */
static void expect_reject(struct fx *f, const uint8_t *buf, size_t len,
                          int channel, int err)
{
        struct gossip_msg got;
        uint64_t before = f->st.rejected[-err];

        assert_int_equal(decode(f, buf, len, channel, &got), err);
        assert_int_equal(f->st.rejected[-err], before + 1);
}

/* What the daemon does with a GRADIENT: wire decode, then the payload
 * codec (here raw little-endian fp32, standing in for gossip/codec.c, whose
 * decoder returns GOSSIP_ENONFINITE the same way), counting its verdict in
 * the wire stats. */
static int receive_fp32_gradient(struct fx *f, const uint8_t *buf, size_t len)
{
        struct gossip_msg got;
        int err = decode(f, buf, len, GOSSIP_CH_STREAM, &got);

        if (err)
                return err;
        for (size_t i = 0; i + 4 <= got.u.tensor.payload_len; i += 4) {
                float x;

                memcpy(&x, got.u.tensor.payload + i, 4);
                if (!isfinite(x)) {
                        gossip_wire_stats_count(&f->st, GOSSIP_ENONFINITE);
                        return GOSSIP_ENONFINITE;
                }
        }
        return 0;
}

static void test_reject_reasons(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m, got;
        uint8_t big[2048];
        size_t len;

        make_msg(f, GOSSIP_MSG_PING, &m, 1);
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));

        /* bad signature: last byte of the signature */
        f->buf[len - 1] ^= 0x80;
        expect_reject(f, f->buf, len, GOSSIP_CH_DGRAM, GOSSIP_EBADSIG);
        f->buf[len - 1] ^= 0x80;
        /* wrong version (checked before the signature) */
        f->buf[2] = 2;
        expect_reject(f, f->buf, len, GOSSIP_CH_DGRAM, GOSSIP_EVERSION);
        f->buf[2] = GOSSIP_WIRE_VERSION;
        /* unknown kind */
        f->buf[3] = GOSSIP_MSG_KIND_COUNT;
        expect_reject(f, f->buf, len, GOSSIP_CH_DGRAM, GOSSIP_EKIND);
        f->buf[3] = GOSSIP_MSG_PING;
        /* short */
        expect_reject(f, f->buf, GOSSIP_WIRE_OVERHEAD - 1, GOSSIP_CH_DGRAM,
                      GOSSIP_ESHORT);
        expect_reject(f, f->buf, len - 1, GOSSIP_CH_DGRAM, GOSSIP_ESHORT);
        /* exact length: one byte more is refused too */
        f->buf[len] = 0;
        expect_reject(f, f->buf, len + 1, GOSSIP_CH_DGRAM, GOSSIP_EDECODE);
        /* unknown signer */
        len = encode(&m, sk_c, f->buf, sizeof(f->buf));
        expect_reject(f, f->buf, len, GOSSIP_CH_DGRAM, GOSSIP_EUNKNOWNKEY);
        /* oversize datagram: a SYNC that needs the stream */
        make_msg(f, GOSSIP_MSG_SYNC, &m, 40);
        len = encode(&m, sk_a, big, sizeof(big));
        assert_true(len > GOSSIP_WIRE_DGRAM_MAX);
        expect_reject(f, big, len, GOSSIP_CH_DGRAM, GOSSIP_ETOOBIG);
        /* ... and a configured stream bound */
        m.channel = GOSSIP_CH_STREAM;
        len = encode(&m, sk_a, big, sizeof(big));
        struct gossip_wire_limits lim = {0, 1000};
        memset(&got, 0, sizeof(got));
        assert_int_equal(gossip_wire_decode(big, len, GOSSIP_CH_STREAM, &lim,
                                            f->kr, f->rp, &got, &f->st),
                         GOSSIP_ETOOBIG);
        assert_int_equal(f->st.rejected[-GOSSIP_ETOOBIG], 2);
        /* received on the other channel than it was signed for */
        expect_reject(f, big, len, GOSSIP_CH_DGRAM, GOSSIP_ETOOBIG);
        make_msg(f, GOSSIP_MSG_ACK, &m, 0);
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        expect_reject(f, f->buf, len, GOSSIP_CH_STREAM, GOSSIP_EREPLAY);
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got), 0);

        /* NaN / Inf in a gradient payload: the wire layer carries the
         * payload opaquely (the frame is fine), the payload codec finds the
         * non-finite value and the receiver counts it in the same stats */
        float g[4] = {1.0f, 0.0f, -2.0f, 0.5f};
        for (int bad = 0; bad < 2; bad++) {
                g[1] = bad ? INFINITY : NAN;
                make_msg(f, GOSSIP_MSG_GRADIENT, &m, 0);
                m.u.tensor.payload = (const uint8_t *)g;
                m.u.tensor.payload_len = sizeof(g);
                m.u.tensor.n_elems = 4;
                len = encode(&m, sk_a, f->buf, sizeof(f->buf));
                assert_int_equal(receive_fp32_gradient(f, f->buf, len),
                                 GOSSIP_ENONFINITE);
                assert_int_equal(f->st.rejected[-GOSSIP_ENONFINITE], bad + 1);
        }
        g[1] = 3.0f;
        make_msg(f, GOSSIP_MSG_GRADIENT, &m, 0);
        m.u.tensor.payload = (const uint8_t *)g;
        m.u.tensor.payload_len = sizeof(g);
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(receive_fp32_gradient(f, f->buf, len), 0);
        gossip_wire_stats_count(&f->st, 0);
        gossip_wire_stats_count(&f->st, -100);
        gossip_wire_stats_count(NULL, GOSSIP_ENONFINITE);
        assert_int_equal(f->st.rejected[-GOSSIP_ENONFINITE], 2);

        /* bad arguments */
        expect_reject(f, f->buf, len, 7, GOSSIP_EINVAL);
}

static void test_replay_window(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m, got;
        uint8_t frame[512];
        size_t len, flen;

        make_msg(f, GOSSIP_MSG_PING, &m, 0);
        m.incarnation = 5;
        m.seq = 1000;
        flen = encode(&m, sk_a, frame, sizeof(frame));
        assert_int_equal(decode(f, frame, flen, GOSSIP_CH_DGRAM, &got), 0);
        /* exact duplicate */
        expect_reject(f, frame, flen, GOSSIP_CH_DGRAM, GOSSIP_EREPLAY);
        /* reordered within the window: accepted once */
        m.seq = 1000 - 127;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got), 0);
        expect_reject(f, f->buf, len, GOSSIP_CH_DGRAM, GOSSIP_EREPLAY);
        /* just outside the window */
        m.seq = 1000 - 128;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        expect_reject(f, f->buf, len, GOSSIP_CH_DGRAM, GOSSIP_EREPLAY);
        /* a jump ahead slides the window */
        m.seq = 1000 + 64;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got), 0);
        m.seq = 1000 + 1;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got), 0);
        expect_reject(f, frame, flen, GOSSIP_CH_DGRAM, GOSSIP_EREPLAY);
        /* the stream has its own window: seq 1000 is new there */
        m.channel = GOSSIP_CH_STREAM;
        m.seq = 1000;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_STREAM, &got), 0);
        m.channel = GOSSIP_CH_DGRAM;
        /* older incarnation refused, even with a fresh seq */
        m.incarnation = 4;
        m.seq = 5000;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        expect_reject(f, f->buf, len, GOSSIP_CH_DGRAM, GOSSIP_EREPLAY);
        /* higher incarnation resets: seq starts over */
        m.incarnation = 6;
        m.seq = 0;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got), 0);
        expect_reject(f, frame, flen, GOSSIP_CH_DGRAM, GOSSIP_EREPLAY);
        /* another sender is independent */
        m.incarnation = 1;
        m.seq = 1000;
        len = encode(&m, sk_b, f->buf, sizeof(f->buf));
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got), 0);
        assert_int_equal(got.key_id, id_b);
        /* forgetting a removed key drops its windows */
        gossip_replay_forget(f->rp, id_a);
        assert_int_equal(decode(f, frame, flen, GOSSIP_CH_DGRAM, &got), 0);
}

/* The window against a model (a set of accepted seqs) on random orders. */
static void test_replay_window_model(void **state)
{
        struct fx *f = *state;
        static uint8_t seen[4096];
        uint64_t top = 0;
        int have = 0;

        memset(seen, 0, sizeof(seen));
        for (int i = 0; i < 20000; i++) {
                uint64_t seq = rnd() % 4096;
                int want, got;

                if (rnd() % 4)
                        seq = top + 8 - rnd() % 160; /* mostly near the top */
                seq %= 4096;
                want = !(have && (seen[seq] || seq + 128 <= top));
                got = gossip__replay_check(f->rp, 9, GOSSIP_CH_DGRAM, 1, seq) ==
                      0;
                if (want != got)
                        fail_msg("seq %llu top %llu: want %d got %d",
                                 (unsigned long long)seq,
                                 (unsigned long long)top, want, got);
                if (got) {
                        assert_int_equal(gossip__replay_commit(
                                             f->rp, 9, GOSSIP_CH_DGRAM, 1, seq),
                                         0);
                        seen[seq] = 1;
                        if (!have || seq > top)
                                top = seq;
                        have = 1;
                }
        }
}

/* Hand-made bodies, correctly signed by A: the body checks themselves. */
static size_t raw_frame(uint8_t *b, int kind, const void *body, size_t n,
                        int digest, int stream)
{
        static uint64_t seq = 1;
        uint8_t flags = (uint8_t)((kind >= GOSSIP_MSG_GRADIENT &&
                                   kind != GOSSIP_MSG_STATE_REQ) ||
                                          n > GOSSIP_WIRE_DIGEST_OVER
                                      ? 1
                                      : 0);

        if (digest >= 0)
                flags = (uint8_t)digest;
        if (stream)
                flags |= 2;
        return gn_test_raw_frame(b, kind, flags, id_a, ++seq, body, n, sk_a);
}

static void test_body_bounds(void **state)
{
        struct fx *f = *state;
        struct gossip_msg got;
        size_t len;
        const struct {
                int kind;
                const char *name;
                size_t n;
                const uint8_t *body;
                int err;
        } cases[] = {
#define B(...)                                                                 \
        sizeof((const uint8_t[]){__VA_ARGS__}), (const uint8_t[]){__VA_ARGS__}
            {GOSSIP_MSG_PING, "empty map", B(0x80), 0},
            {GOSSIP_MSG_PING, "not a map", B(0x90), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "empty body", 0, (const uint8_t *)"",
             GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "array32 of 4G",
             B(0x81, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "map32 of 4G", B(0xdf, 0xff, 0xff, 0xff, 0xff),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "bin32 of 4G",
             B(0x81, 0x63, 0xc6, 0xff, 0xff, 0xff, 0xff), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "bin32 of 4G, then more",
             B(0x82, 0x63, 0xc6, 0xff, 0xff, 0xff, 0xff, 0x02, 0x07),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "str8 past end", B(0x81, 0x63, 0xd9, 0x05, 'a'),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "ext32 of 4G",
             B(0x81, 0x63, 0xc9, 0xff, 0xff, 0xff, 0xff, 0x01), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "0xc1", B(0x81, 0x63, 0xc1), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "trailing byte", B(0x80, 0x00), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "too deep",
             B(0x81, 0x63, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91,
               0x90),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "unknown keys ignored",
             B(0x83, 0x63, 0xa1, 'x', 0xa1, 'k', 0xc0, 0x02, 0x07), 0},
            {GOSSIP_MSG_PING, "duplicate key", B(0x82, 0x02, 0x07, 0x02, 0x07),
             GOSSIP_EDECODE},
            /* protocol.md 3.4: a key the kind reads, twice, whatever the
             * values or their encodings; a key it does not read may
             * repeat; one member twice in `updates` is no error */
            {GOSSIP_MSG_PING, "duplicate key, other value",
             B(0x82, 0x02, 0x07, 0x02, 0x08), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "duplicate key, other encoding",
             B(0x82, 0x02, 0x07, 0x02, 0xd0, 0x07), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "duplicate updates",
             B(0x82, 0x01, 0x90, 0x01, 0x90), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "key not read by PING, twice",
             B(0x83, 0x0c, 0xc0, 0x0c, 0xc0, 0x02, 0x07), 0},
            {GOSSIP_MSG_PING, "unknown key twice",
             B(0x83, 0x63, 0x01, 0x63, 0x02, 0x02, 0x07), 0},
            {GOSSIP_MSG_PING, "one member twice in updates",
             B(0x81, 0x01, 0x92, 0x94, 0x07, 0x00, 0x01, 0xc0, 0x94, 0x07, 0x01,
               0x02, 0xc0),
             0},
            {GOSSIP_MSG_PING, "target as str", B(0x81, 0x02, 0xa1, 'x'),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "target as int8 7", B(0x81, 0x02, 0xd0, 0x07), 0},
            {GOSSIP_MSG_PING, "negative target", B(0x81, 0x02, 0xff),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_ACK, "missing ack_seq", B(0x81, 0x02, 0x07),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_ACK, "nack as int",
             B(0x83, 0x02, 0x07, 0x04, 0x01, 0x05, 0x01), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING_REQ, "addr of 5 bytes",
             B(0x82, 0x02, 0x07, 0x03, 0xc4, 0x05, 1, 2, 3, 4, 5),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_PING_REQ, "addr nil", B(0x82, 0x02, 0x07, 0x03, 0xc0),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "update state 4",
             B(0x81, 0x01, 0x91, 0x94, 0x07, 0x04, 0x00, 0xc0), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "update key id 0",
             B(0x81, 0x01, 0x91, 0x94, 0x00, 0x00, 0x00, 0xc0), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "update of 3 fields",
             B(0x81, 0x01, 0x91, 0x93, 0x07, 0x00, 0x00), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "update with extra field",
             B(0x81, 0x01, 0x91, 0x96, 0x07, 0x00, 0x00, 0xc0, 0xc0, 0x2a), 0},
            {GOSSIP_MSG_PING, "name with control char",
             B(0x81, 0x01, 0x91, 0x95, 0x07, 0x00, 0x00, 0xc0, 0xa2, 'a', 0x0a),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "name with NUL",
             B(0x81, 0x01, 0x91, 0x95, 0x07, 0x00, 0x00, 0xc0, 0xa2, 'a', 0x00),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_GRADIENT, "part 1 of 1",
             B(0x86, 0x07, 0x01, 0x08, 0x00, 0x09, 0x01, 0x0a, 0x01, 0x0b, 0x00,
               0x0c, 0xc4, 0x00),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_GRADIENT, "part 0 of 1",
             B(0x86, 0x07, 0x01, 0x08, 0x00, 0x09, 0x00, 0x0a, 0x01, 0x0b, 0x00,
               0x0c, 0xc4, 0x00),
             0},
            {GOSSIP_MSG_GRADIENT, "codec over 32 bits",
             B(0x86, 0x07, 0x01, 0x08, 0xcf, 1, 0, 0, 0, 0, 0, 0, 0, 0x09, 0x00,
               0x0a, 0x01, 0x0b, 0x00, 0x0c, 0xc4, 0x00),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_GRADIENT, "no payload",
             B(0x85, 0x07, 0x01, 0x08, 0x00, 0x09, 0x00, 0x0a, 0x01, 0x0b,
               0x00),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_SYNC, "view digest of 16 bytes",
             B(0x82, 0x06, 0xc3, 0x17, 0xc4, 0x10, 1, 2, 3, 4, 5, 6, 7, 8, 9,
               10, 11, 12, 13, 14, 15, 16),
             0},
            {GOSSIP_MSG_SYNC, "view digest of 15 bytes",
             B(0x82, 0x06, 0xc3, 0x17, 0xc4, 0x0f, 1, 2, 3, 4, 5, 6, 7, 8, 9,
               10, 11, 12, 13, 14, 15),
             GOSSIP_EDECODE},
            {GOSSIP_MSG_SYNC, "view digest as str",
             B(0x81, 0x17, 0xa2, 'a', 'b'), GOSSIP_EDECODE},
            {GOSSIP_MSG_PING, "view digest on a PING: not read",
             B(0x82, 0x17, 0xa2, 'a', 'b', 0x02, 0x07), 0},
#undef B
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                len = raw_frame(f->buf, cases[i].kind, cases[i].body,
                                cases[i].n, -1, 0);
                int err = decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got);
                if (err != cases[i].err)
                        fail_msg("%s: got %d (%s), want %d", cases[i].name, err,
                                 gossip_strerror(err), cases[i].err);
                /* a refused body still names its (authenticated) signer */
                assert_true(got.key_id == id_a);
        }
        /* a frame that does not authenticate leaves out as it was */
        len = raw_frame(f->buf, GOSSIP_MSG_PING, "\x80", 1, -1, 0);
        f->buf[len - 1] ^= 1;
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got),
                         GOSSIP_EBADSIG);
        assert_true(got.key_id == 0);
        /* the object budget: 65536 objects pass, 65538 do not */
        uint8_t *big = calloc(1, 70000 + GOSSIP_WIRE_OVERHEAD);
        assert_non_null(big);
        for (unsigned nils = 65533; nils <= 65535; nils += 2) {
                uint8_t *body = malloc(5 + nils);

                assert_non_null(body);
                memcpy(body, "\x81\x63\xdc", 3); /* {99: array16 of nil} */
                body[3] = (uint8_t)(nils >> 8);
                body[4] = (uint8_t)nils;
                memset(body + 5, 0xc0, nils);
                len = raw_frame(big, GOSSIP_MSG_PING, body, 5 + nils, -1, 1);
                int err = decode(f, big, len, GOSSIP_CH_STREAM, &got);
                if (err != (nils == 65533 ? 0 : GOSSIP_EDECODE))
                        fail_msg("%u nils: %s", nils, gossip_strerror(err));
                free(body);
        }
        free(big);
        /* names: 31 bytes fit (with the NUL), 32 do not */
        for (size_t n = 31; n <= 33; n++) {
                uint8_t body[64] = {0x81, 0x01, 0x91, 0x95, 0x07,
                                    0x00, 0x00, 0xc0, 0xd9, (uint8_t)n};

                memset(body + 10, 'n', n);
                len = raw_frame(f->buf, GOSSIP_MSG_PING, body, 10 + n, -1, 0);
                int err = decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got);
                assert_int_equal(err, n == 31 ? 0 : GOSSIP_EDECODE);
                if (!err)
                        assert_int_equal(strlen(got.updates[0].name), 31);
        }
        /* the digest flag must follow the rule */
        len = raw_frame(f->buf, GOSSIP_MSG_PING, "\x80", 1, 1, 0);
        expect_reject(f, f->buf, len, GOSSIP_CH_DGRAM, GOSSIP_EDECODE);
        /* updates beyond the receiver's storage */
        len = raw_frame(f->buf, GOSSIP_MSG_PING,
                        "\x81\x01\x92\x94\x07\x00\x00\xc0\x94\x08\x00\x00\xc0",
                        13, -1, 0);
        memset(&got, 0, sizeof(got));
        got.updates = f->got_upd;
        got.updates_cap = 1;
        assert_int_equal(gossip_wire_decode(f->buf, len, GOSSIP_CH_DGRAM, NULL,
                                            f->kr, f->rp, &got, &f->st),
                         GOSSIP_EDECODE);
        got.updates_cap = 2;
        assert_int_equal(gossip_wire_decode(f->buf, len, GOSSIP_CH_DGRAM, NULL,
                                            f->kr, f->rp, &got, &f->st),
                         0);
        assert_int_equal(got.n_updates, 2);
        assert_int_equal(got.updates[1].key_id, 8);
}

/* The update's origin (element 5): written only when set; an older
 * sender's 4- and 5-element updates decode with origin 0; a 7th element
 * is ignored; an origin that is not a uint is refused. */
/* Decode a PING whose body is body[0..n): the error must be err; 0 with
 * exactly one update, in upd[0] (upd holds 2). Returns the error. */
static int decode_update(struct fx *f, const char *name, const uint8_t *body,
                         size_t n, int err, struct gossip_update *upd)
{
        struct gossip_msg got = {0};
        size_t len = raw_frame(f->buf, GOSSIP_MSG_PING, body, n, -1, 0);
        int rc;

        memset(upd, 0xff, 2 * sizeof(*upd));
        got.updates = upd;
        got.updates_cap = 2;
        rc = gossip_wire_decode(f->buf, len, GOSSIP_CH_DGRAM, NULL, f->kr, NULL,
                                &got, NULL);
        if (rc != err)
                fail_msg("%s: got %d, want %d", name, rc, err);
        if (rc == 0)
                assert_int_equal(got.n_updates, 1);
        return rc;
}

#define B(...)                                                                 \
        sizeof((const uint8_t[]){__VA_ARGS__}), (const uint8_t[])              \
        {                                                                      \
                __VA_ARGS__                                                    \
        }
static void test_update_origin_compat(void **state)
{
        struct fx *f = *state;
        struct gossip_update upd[2];
        size_t len;
        const struct {
                const char *name;
                size_t n;
                const uint8_t *body;
                int err;
                uint64_t origin;
                uint8_t state;
        } cases[] = {
            /* {1: [[7, 1, 3, nil]]} - a suspect update as v1 wrote it */
            {"4 elements", B(0x81, 0x01, 0x91, 0x94, 0x07, 0x01, 0x03, 0xc0), 0,
             0, 1},
            {"5 elements, name",
             B(0x81, 0x01, 0x91, 0x95, 0x07, 0x01, 0x03, 0xc0, 0xa1, 'x'), 0, 0,
             1},
            {"6 elements, origin 9",
             B(0x81, 0x01, 0x91, 0x96, 0x07, 0x01, 0x03, 0xc0, 0xc0, 0x09), 0,
             9, 1},
            {"7 elements, the last ignored",
             B(0x81, 0x01, 0x91, 0x97, 0x07, 0x01, 0x03, 0xc0, 0xc0, 0x09, 0xa1,
               'z'),
             0, 9, 1},
            {"origin not a uint",
             B(0x81, 0x01, 0x91, 0x96, 0x07, 0x01, 0x03, 0xc0, 0xc0, 0xa1, 'x'),
             GOSSIP_EDECODE, 0, 0},
            {"origin negative",
             B(0x81, 0x01, 0x91, 0x96, 0x07, 0x01, 0x03, 0xc0, 0xc0, 0xff),
             GOSSIP_EDECODE, 0, 0},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                if (decode_update(f, cases[i].name, cases[i].body, cases[i].n,
                                  cases[i].err, upd))
                        continue;
                assert_int_equal(upd[0].state, cases[i].state);
                assert_int_equal(upd[0].origin, cases[i].origin);
        }
        /* encoder: no origin, no 6th element (v1 bytes unchanged) */
        struct gossip_update u = {.key_id = 7, .state = 1, .incarnation = 3};
        struct gossip_msg m = {.kind = GOSSIP_MSG_PING,
                               .incarnation = 1,
                               .seq = 100,
                               .updates = &u,
                               .n_updates = 1};
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44 + 3], 0x94);
        u.origin = 9;
        m.seq = 101;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44 + 3], 0x96);
        (void)len;
}
/* The update's version (element 6): an alive update with a version is 7
 * elements (name nil, origin 0 before it); an older 6-element update
 * decodes with no version; an 8th element is ignored; a version that is
 * not text, too long or with a control byte is refused, and the encoder
 * refuses to write one. */
static void test_update_version_compat(void **state)
{
        struct fx *f = *state;
        struct gossip_update upd[2];
        size_t len;
        const struct {
                const char *name;
                size_t n;
                const uint8_t *body;
                int err;
                const char *version;
        } cases[] = {
            {"6 elements, no version",
             B(0x81, 0x01, 0x91, 0x96, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00), 0,
             ""},
            {"7 elements, version 0.1",
             B(0x81, 0x01, 0x91, 0x97, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00, 0xa3,
               '0', '.', '1'),
             0, "0.1"},
            {"7 elements, version nil",
             B(0x81, 0x01, 0x91, 0x97, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00,
               0xc0),
             0, ""},
            {"8 elements, the last ignored",
             B(0x81, 0x01, 0x91, 0x98, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00, 0xa1,
               '2', 0x05),
             0, "2"},
            {"version not text",
             B(0x81, 0x01, 0x91, 0x97, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00,
               0x05),
             GOSSIP_EDECODE, NULL},
            {"version with a control byte",
             B(0x81, 0x01, 0x91, 0x97, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00, 0xa2,
               '1', 0x0a),
             GOSSIP_EDECODE, NULL},
            {"version of 16 bytes",
             B(0x81, 0x01, 0x91, 0x97, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00, 0xb0,
               '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c',
               'd', 'e', 'f'),
             GOSSIP_EDECODE, NULL},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                if (decode_update(f, cases[i].name, cases[i].body, cases[i].n,
                                  cases[i].err, upd))
                        continue;
                assert_string_equal(upd[0].version, cases[i].version);
                assert_int_equal(upd[0].origin, 0);
        }
        /* encoder: a version makes 7 elements, with nil name and origin 0 */
        struct gossip_update u = {.key_id = 7, .state = 0, .incarnation = 3};
        struct gossip_msg m = {.kind = GOSSIP_MSG_PING,
                               .incarnation = 1,
                               .seq = 200,
                               .updates = &u,
                               .n_updates = 1};
        strcpy(u.version, "0.1");
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44 + 3], 0x97);
        assert_memory_equal(f->buf + 44 + 4 + 3,
                            "\xc0\xc0\x00\xa3"
                            "0.1",
                            7);
        strcpy(u.version, "0.\x01");
        m.seq = 201;
        uint32_t sent = 0;
        assert_int_equal(
            gossip_wire_encode(&m, sk_a, f->buf, sizeof(f->buf), &len, &sent),
            GOSSIP_EINVAL);
}

/* The update's loading flag (element 8): 1 is loading, any other uint
 * (and an update without it) exchanging, anything else refused; the
 * encoder writes 9 elements only for a loading entry, the ones before
 * it nil or 0. */
static void test_update_loading(void **state)
{
        struct fx *f = *state;
        struct gossip_update upd[2];
        size_t len;
        const struct {
                const char *name;
                size_t n;
                const uint8_t *body;
                int err;
                uint8_t loading;
        } cases[] = {
            {"8 elements, not told",
             B(0x81, 0x01, 0x91, 0x98, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00, 0xc0,
               0x05),
             0, 0},
            {"9 elements, loading",
             B(0x81, 0x01, 0x91, 0x99, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00, 0xc0,
               0x00, 0x01),
             0, 1},
            {"9 elements, exchanging",
             B(0x81, 0x01, 0x91, 0x99, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00, 0xc0,
               0x00, 0x00),
             0, 0},
            {"9 elements, a later phase",
             B(0x81, 0x01, 0x91, 0x99, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00, 0xc0,
               0x00, 0xcd, 0x01, 0x01),
             0, 0},
            {"10 elements, the last ignored",
             B(0x81, 0x01, 0x91, 0x9a, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00, 0xc0,
               0x00, 0x01, 0xc0),
             0, 1},
            {"loading nil",
             B(0x81, 0x01, 0x91, 0x99, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00, 0xc0,
               0x00, 0xc0),
             GOSSIP_EDECODE, 0},
            {"loading true",
             B(0x81, 0x01, 0x91, 0x99, 0x07, 0x00, 0x03, 0xc0, 0xc0, 0x00, 0xc0,
               0x00, 0xc3),
             GOSSIP_EDECODE, 0},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                if (decode_update(f, cases[i].name, cases[i].body, cases[i].n,
                                  cases[i].err, upd))
                        continue;
                if (upd[0].loading != cases[i].loading)
                        fail_msg("%s: loading %u", cases[i].name,
                                 upd[0].loading);
        }
        /* encoder: loading makes 9 elements; not loading, the 4 needed */
        struct gossip_update u = {
            .key_id = 7, .state = 0, .incarnation = 3, .loading = 1};
        struct gossip_msg m = {.kind = GOSSIP_MSG_PING,
                               .incarnation = 1,
                               .seq = 300,
                               .updates = &u,
                               .n_updates = 1};
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44 + 3], 0x99);
        assert_memory_equal(f->buf + 44 + 4 + 3, "\xc0\xc0\x00\xc0\x00\x01", 6);
        u.loading = 0;
        m.seq = 301;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44 + 3], 0x94);
        u.loading = 2; /* the struct holds 0 or 1 */
        m.seq = 302;
        uint32_t sent = 0;
        assert_int_equal(
            gossip_wire_encode(&m, sk_a, f->buf, sizeof(f->buf), &len, &sent),
            GOSSIP_EINVAL);
}
#undef B

/* LEAVE's optional stop element (protocol.md 3.7): an old LEAVE (empty
 * map) decodes with no reason; the element round-trips with and without
 * an origin; elements past the fifth are ignored; bad types and
 * accuracies above 100% are refused, and so is encoding one. */
#define B(...)                                                                 \
        sizeof((const uint8_t[]){__VA_ARGS__}), (const uint8_t[])              \
        {                                                                      \
                __VA_ARGS__                                                    \
        }
static void test_leave_stop(void **state)
{
        struct fx *f = *state;
        struct gossip_msg got,
            m = {.kind = GOSSIP_MSG_LEAVE, .incarnation = 1, .seq = 200};
        size_t len;
        const struct {
                const char *name;
                size_t n;
                const uint8_t *body;
                int err;
                uint8_t reason;
                uint32_t acc;
                const char *origin;
        } cases[] = {
            {"v1 LEAVE, empty map", B(0x80), 0, 0, 0, ""},
            {"4 elements",
             B(0x81, 0x0e, 0x94, 0x01, 0x2a, 0xcd, 0x22, 0x6c, 0xcd, 0x22,
               0x60),
             0, 1, 8812, ""},
            {"5 elements, nil origin",
             B(0x81, 0x0e, 0x95, 0x01, 0x2a, 0x05, 0x06, 0xc0), 0, 1, 5, ""},
            {"6 elements, the last ignored",
             B(0x81, 0x0e, 0x96, 0x01, 0x2a, 0x05, 0x06, 0xa1, 'a', 0xa1, 'z'),
             0, 1, 5, "a"},
            {"unknown reason 9 kept",
             B(0x81, 0x0e, 0x94, 0x09, 0x00, 0x00, 0x00), 0, 9, 0, ""},
            {"3 elements", B(0x81, 0x0e, 0x93, 0x01, 0x2a, 0x05),
             GOSSIP_EDECODE, 0, 0, ""},
            {"accuracy over 100%",
             B(0x81, 0x0e, 0x94, 0x01, 0x2a, 0xcd, 0x27, 0x11, 0x00),
             GOSSIP_EDECODE, 0, 0, ""},
            {"reason over 255",
             B(0x81, 0x0e, 0x94, 0xcd, 0x01, 0x00, 0x2a, 0x05, 0x06),
             GOSSIP_EDECODE, 0, 0, ""},
            {"not an array", B(0x81, 0x0e, 0x01), GOSSIP_EDECODE, 0, 0, ""},
            {"origin not a str",
             B(0x81, 0x0e, 0x95, 0x01, 0x2a, 0x05, 0x06, 0x07), GOSSIP_EDECODE,
             0, 0, ""},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                len = raw_frame(f->buf, GOSSIP_MSG_LEAVE, cases[i].body,
                                cases[i].n, -1, 0);
                memset(&got, 0, sizeof(got));
                int rc = gossip_wire_decode(f->buf, len, GOSSIP_CH_DGRAM, NULL,
                                            f->kr, NULL, &got, NULL);
                if (rc != cases[i].err)
                        fail_msg("%s: got %d, want %d", cases[i].name, rc,
                                 cases[i].err);
                if (rc)
                        continue;
                assert_int_equal(got.u.leave.reason, cases[i].reason);
                assert_int_equal(got.u.leave.acc_bp, cases[i].acc);
                assert_string_equal(got.u.leave.origin, cases[i].origin);
        }
        /* encoder: no reason, no element (v1 bytes: an empty map) */
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(len, 44 + 1 + 64);
        assert_int_equal(f->buf[44], 0x80);
        m.u.leave.reason = GOSSIP_STOP_TARGET;
        m.u.leave.step = 1432;
        m.u.leave.acc_bp = 8812;
        m.u.leave.target_bp = 8800;
        for (int named = 0; named < 2; named++) {
                strcpy(m.u.leave.origin, named ? "pi-kitchen" : "");
                m.seq++;
                len = encode(&m, sk_a, f->buf, sizeof(f->buf));
                assert_int_equal(f->buf[44 + 2], named ? 0x95 : 0x94);
                assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got),
                                 0);
                assert_msg_equal(&m, &got, 0);
        }
        m.u.leave.acc_bp = 10001;
        assert_int_equal(
            gossip_wire_encode(&m, sk_a, f->buf, sizeof(f->buf), &len, NULL),
            GOSSIP_EINVAL);
}

/* A tensor body (PARAMS, GRADIENT, SAMPLES) in raw bytes, the decode
 * result it must give and, when it decodes, the optional PARAMS keys
 * 15-18 it must give (0: absent). */
struct params_case {
        const char *name;
        int kind;
        size_t n;
        const uint8_t *body;
        int err;
        uint32_t period, need, rx_rate, rx_span;
};

/* The six keys every tensor body has, a 4-byte payload. */
#define TENSOR6                                                                \
        0x07, 0x2a, 0x08, 0x00, 0x09, 0x00, 0x0a, 0x01, 0x0b, 0x01, 0x0c,      \
            0xc4, 0x04, 0x01, 0x02, 0x03, 0x04

static void check_params_cases(struct fx *f, const struct params_case *c,
                               size_t n)
{
        struct gossip_msg got;

        for (size_t i = 0; i < n; i++, c++) {
                size_t len = raw_frame(f->buf, c->kind, c->body, c->n, -1, 1);
                int rc = decode(f, f->buf, len, GOSSIP_CH_STREAM, &got);
                const struct gossip_tensor *t = &got.u.tensor;

                if (rc != c->err)
                        fail_msg("%s: got %d, want %d", c->name, rc, c->err);
                if (rc == 0 &&
                    (t->period != c->period || t->need != c->need ||
                     t->rx_rate != c->rx_rate || t->rx_span != c->rx_span))
                        fail_msg("%s: period %u need %u rx_rate %u rx_span "
                                 "%u, want %u %u %u %u",
                                 c->name, t->period, t->need, t->rx_rate,
                                 t->rx_span, c->period, c->need, c->rx_rate,
                                 c->rx_span);
        }
}

/* PARAMS' optional period (protocol.md 3.1, key 15): written only when
 * set and only for PARAMS (a v1 PARAMS without it keeps its bytes);
 * round-trips; decodes as 0 when absent; 0, a negative, a string or a
 * value over 2^32-1 are refused; other kinds ignore the key. */
static void test_params_period(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m, got;
        size_t len, plain;
        const struct params_case cases[] = {
            {"v1 PARAMS, no period", GOSSIP_MSG_PARAMS, B(0x86, TENSOR6), 0, 0,
             0, 0, 0},
            {"period 64", GOSSIP_MSG_PARAMS, B(0x87, TENSOR6, 0x0f, 0x40), 0,
             64, 0, 0, 0},
            {"period 2^32-1", GOSSIP_MSG_PARAMS,
             B(0x87, TENSOR6, 0x0f, 0xce, 0xff, 0xff, 0xff, 0xff), 0,
             UINT32_MAX, 0, 0, 0},
            {"period 0", GOSSIP_MSG_PARAMS, B(0x87, TENSOR6, 0x0f, 0x00),
             GOSSIP_EDECODE, 0, 0, 0, 0},
            {"period 2^32", GOSSIP_MSG_PARAMS,
             B(0x87, TENSOR6, 0x0f, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0),
             GOSSIP_EDECODE, 0, 0, 0, 0},
            {"period -1", GOSSIP_MSG_PARAMS, B(0x87, TENSOR6, 0x0f, 0xff),
             GOSSIP_EDECODE, 0, 0, 0, 0},
            {"period a string", GOSSIP_MSG_PARAMS,
             B(0x87, TENSOR6, 0x0f, 0xa1, '8'), GOSSIP_EDECODE, 0, 0, 0, 0},
            {"period twice", GOSSIP_MSG_PARAMS,
             B(0x88, TENSOR6, 0x0f, 0x08, 0x0f, 0x08), GOSSIP_EDECODE, 0, 0, 0,
             0},
            {"GRADIENT ignores it", GOSSIP_MSG_GRADIENT,
             B(0x87, TENSOR6, 0x0f, 0x00), 0, 0, 0, 0, 0},
            /* key 16, need: the same rules */
            {"need 32", GOSSIP_MSG_PARAMS, B(0x87, TENSOR6, 0x10, 0x20), 0, 0,
             32, 0, 0},
            {"period 16 and need 64", GOSSIP_MSG_PARAMS,
             B(0x88, TENSOR6, 0x0f, 0x10, 0x10, 0x40), 0, 16, 64, 0, 0},
            {"need 0", GOSSIP_MSG_PARAMS, B(0x87, TENSOR6, 0x10, 0x00),
             GOSSIP_EDECODE, 0, 0, 0, 0},
            {"need 2^32", GOSSIP_MSG_PARAMS,
             B(0x87, TENSOR6, 0x10, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0),
             GOSSIP_EDECODE, 0, 0, 0, 0},
            {"need twice", GOSSIP_MSG_PARAMS,
             B(0x88, TENSOR6, 0x10, 0x08, 0x10, 0x08), GOSSIP_EDECODE, 0, 0, 0,
             0},
            {"need a string", GOSSIP_MSG_PARAMS,
             B(0x87, TENSOR6, 0x10, 0xa1, '8'), GOSSIP_EDECODE, 0, 0, 0, 0},
            {"SAMPLES ignores it", GOSSIP_MSG_SAMPLES,
             B(0x87, TENSOR6, 0x10, 0x00), 0, 0, 0, 0, 0},
        };

        check_params_cases(f, cases, sizeof(cases) / sizeof(cases[0]));
        /* the encoder: no period, v1's six fields; with one, seven, and
         * the value round-trips */
        make_msg(f, GOSSIP_MSG_PARAMS, &m, 0);
        plain = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44], 0x86);
        assert_int_equal(decode(f, f->buf, plain, m.channel, &got), 0);
        assert_int_equal(got.u.tensor.period, 0);
        m.u.tensor.period = 4096;
        m.seq++;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44], 0x87);
        assert_int_equal(len, plain + 4); /* 0x0f, 0xcd, 0x10, 0x00 */
        assert_int_equal(decode(f, f->buf, len, m.channel, &got), 0);
        assert_int_equal(got.u.tensor.period, 4096);
        assert_int_equal(got.u.tensor.need, 0);
        assert_msg_equal(&m, &got, 0);
        /* with a need too, eight fields, both round-trip */
        m.u.tensor.need = 64;
        m.seq++;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44], 0x88);
        assert_int_equal(len, plain + 6); /* + 0x10, 0x40 */
        assert_int_equal(decode(f, f->buf, len, m.channel, &got), 0);
        assert_int_equal(got.u.tensor.period, 4096);
        assert_int_equal(got.u.tensor.need, 64);
        /* a GRADIENT never writes them */
        make_msg(f, GOSSIP_MSG_GRADIENT, &m, 0);
        m.u.tensor.period = 4096;
        m.u.tensor.need = 64;
        m.seq += 3;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44], 0x86);
        assert_int_equal(decode(f, f->buf, len, m.channel, &got), 0);
        assert_int_equal(got.u.tensor.period, 0);
        assert_int_equal(got.u.tensor.need, 0);
}

/* PARAMS' optional rx_rate and rx_span (protocol.md 3.1, keys 17 and 18,
 * issue 12): written only when set and only for PARAMS; round-trip;
 * decode as 0 when absent (an older PARAMS); 0, 2^32, a negative, a
 * string or a repeat are refused; other kinds ignore them. */
static void test_params_rx_rate(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m, got;
        size_t len, plain;
        const struct params_case cases[] = {
            {"old PARAMS, period and need", GOSSIP_MSG_PARAMS,
             B(0x88, TENSOR6, 0x0f, 0x08, 0x10, 0x08), 0, 8, 8, 0, 0},
            {"rate 12.5 MB/s over 40 ms", GOSSIP_MSG_PARAMS,
             B(0x88, TENSOR6, 0x11, 0xce, 0x00, 0xbe, 0xbc, 0x20, 0x12, 0xcd,
               0x9c, 0x40),
             0, 0, 0, 12500000, 40000},
            {"rate 2^32-1, span 1", GOSSIP_MSG_PARAMS,
             B(0x88, TENSOR6, 0x11, 0xce, 0xff, 0xff, 0xff, 0xff, 0x12, 0x01),
             0, 0, 0, UINT32_MAX, 1},
            {"rate alone", GOSSIP_MSG_PARAMS, B(0x87, TENSOR6, 0x11, 0x7f), 0,
             0, 0, 127, 0},
            {"rate 0", GOSSIP_MSG_PARAMS, B(0x87, TENSOR6, 0x11, 0x00),
             GOSSIP_EDECODE, 0, 0, 0, 0},
            {"rate 2^32", GOSSIP_MSG_PARAMS,
             B(0x87, TENSOR6, 0x11, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0),
             GOSSIP_EDECODE, 0, 0, 0, 0},
            {"rate -1", GOSSIP_MSG_PARAMS, B(0x87, TENSOR6, 0x11, 0xff),
             GOSSIP_EDECODE, 0, 0, 0, 0},
            {"rate a string", GOSSIP_MSG_PARAMS,
             B(0x87, TENSOR6, 0x11, 0xa1, '8'), GOSSIP_EDECODE, 0, 0, 0, 0},
            {"rate twice", GOSSIP_MSG_PARAMS,
             B(0x88, TENSOR6, 0x11, 0x08, 0x11, 0x08), GOSSIP_EDECODE, 0, 0, 0,
             0},
            {"span 0", GOSSIP_MSG_PARAMS, B(0x87, TENSOR6, 0x12, 0x00),
             GOSSIP_EDECODE, 0, 0, 0, 0},
            {"span 2^32", GOSSIP_MSG_PARAMS,
             B(0x87, TENSOR6, 0x12, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0),
             GOSSIP_EDECODE, 0, 0, 0, 0},
            {"GRADIENT ignores them", GOSSIP_MSG_GRADIENT,
             B(0x88, TENSOR6, 0x11, 0x00, 0x12, 0x00), 0, 0, 0, 0, 0},
        };

        check_params_cases(f, cases, sizeof(cases) / sizeof(cases[0]));
        /* the encoder: neither set, the bytes of before; both set, two
         * more keys in ascending order after period, and they round-trip */
        make_msg(f, GOSSIP_MSG_PARAMS, &m, 0);
        m.u.tensor.period = 8;
        plain = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44], 0x87);
        m.u.tensor.rx_rate = 12500000;
        m.u.tensor.rx_span = 40000;
        m.seq++;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44], 0x89);
        /* + 0x11, 0xce, 4 bytes, 0x12, 0xcd, 2 bytes */
        assert_int_equal(len, plain + 10);
        assert_int_equal(decode(f, f->buf, len, m.channel, &got), 0);
        assert_int_equal(got.u.tensor.period, 8);
        assert_int_equal(got.u.tensor.rx_rate, 12500000);
        assert_int_equal(got.u.tensor.rx_span, 40000);
        /* a SAMPLES frame never writes them */
        make_msg(f, GOSSIP_MSG_SAMPLES, &m, 0);
        m.u.tensor.rx_rate = 12500000;
        m.u.tensor.rx_span = 40000;
        m.seq += 2;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[44], 0x86);
        assert_int_equal(decode(f, f->buf, len, m.channel, &got), 0);
        assert_int_equal(got.u.tensor.rx_rate, 0);
        assert_int_equal(got.u.tensor.rx_span, 0);
}
#undef TENSOR6
#undef B
static void test_encode_rejects_bad_messages(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m;
        size_t len;

        make_msg(f, GOSSIP_MSG_PING, &m, 2);
        f->upd[1].state = 4;
        assert_int_equal(gossip_wire_encode(&m, sk_a, f->buf, 1400, &len, NULL),
                         GOSSIP_EINVAL);
        make_msg(f, GOSSIP_MSG_PING, &m, 2);
        f->upd[0].name[3] = '\n';
        assert_int_equal(gossip_wire_encode(&m, sk_a, f->buf, 1400, &len, NULL),
                         GOSSIP_EINVAL);
        make_msg(f, GOSSIP_MSG_PING, &m, 2);
        memset(f->upd[0].name, 'y', sizeof(f->upd[0].name));
        assert_int_equal(gossip_wire_encode(&m, sk_a, f->buf, 1400, &len, NULL),
                         GOSSIP_EINVAL);
        make_msg(f, GOSSIP_MSG_LEAVE, &m, 0);
        m.n_updates = 1;
        m.updates = f->upd;
        assert_int_equal(gossip_wire_encode(&m, sk_a, f->buf, 1400, &len, NULL),
                         GOSSIP_EINVAL);
        make_msg(f, GOSSIP_MSG_GRADIENT, &m, 0);
        m.u.tensor.part_index = 5;
        assert_int_equal(gossip_wire_encode(&m, sk_a, f->buf, 1400, &len, NULL),
                         GOSSIP_EINVAL);
        m.kind = 0;
        assert_int_equal(gossip_wire_encode(&m, sk_a, f->buf, 1400, &len, NULL),
                         GOSSIP_EINVAL);
}

static void test_keyring(void **state)
{
        struct gossip_keyring *kr = gossip_keyring_new();
        uint8_t other[32];
        uint64_t id = 0;

        assert_non_null(kr);
        assert_int_equal(gossip_keyring_add(kr, pk_a, &id), 0);
        assert_int_equal(id, id_a);
        assert_int_equal(gossip_keyring_add(kr, pk_a, NULL), 0);
        assert_int_equal(gossip_keyring_count(kr), 1);
        assert_memory_equal(gossip_keyring_find(kr, id_a), pk_a, 32);
        assert_null(gossip_keyring_find(kr, id_b));
        assert_null(gossip_keyring_find(kr, 0));
        /* a different key under an id already taken is refused */
        memcpy(other, pk_c, 32);
        assert_int_equal(gossip__keyring_add_id(kr, other, id_a),
                         GOSSIP_EINVAL);
        assert_memory_equal(gossip_keyring_find(kr, id_a), pk_a, 32);
        assert_int_equal(gossip__keyring_add_id(kr, other, 0), GOSSIP_EINVAL);
        assert_int_equal(gossip_keyring_add(kr, pk_b, NULL), 0);
        assert_int_equal(gossip_keyring_add(kr, pk_c, NULL), 0);
        assert_int_equal(gossip_keyring_count(kr), 3);
        assert_int_equal(gossip_keyring_remove(kr, id_b), 0);
        assert_int_equal(gossip_keyring_remove(kr, id_b), GOSSIP_EUNKNOWNKEY);
        assert_null(gossip_keyring_find(kr, id_b));
        assert_memory_equal(gossip_keyring_find(kr, id_c), pk_c, 32);
        assert_int_equal(gossip_keyring_count(kr), 2);
        gossip_keyring_free(kr);
}

/* Removing a key takes effect at once (SIGHUP reload). */
static void test_keyring_live_remove(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m, got;
        size_t len;

        make_msg(f, GOSSIP_MSG_LEAVE, &m, 0);
        len = encode(&m, sk_b, f->buf, sizeof(f->buf));
        assert_int_equal(gossip_keyring_remove(f->kr, id_b), 0);
        expect_reject(f, f->buf, len, GOSSIP_CH_DGRAM, GOSSIP_EUNKNOWNKEY);
        assert_int_equal(gossip_keyring_add(f->kr, pk_b, NULL), 0);
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got), 0);
}

static void test_peek_and_stream_len(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m;
        uint8_t hdr[4], kind = 0;
        uint64_t id = 0;
        uint32_t n = 0;
        size_t len;

        make_msg(f, GOSSIP_MSG_SYNC, &m, 0);
        len = encode(&m, sk_c, f->buf, sizeof(f->buf));
        assert_int_equal(gossip_wire_peek_sender(f->buf, len, &id, &kind), 0);
        assert_int_equal(id, id_c);
        assert_int_equal(kind, GOSSIP_MSG_SYNC);
        assert_int_equal(gossip_wire_peek_sender(f->buf, 15, &id, &kind),
                         GOSSIP_ESHORT);
        f->buf[0] = 'X';
        assert_int_equal(gossip_wire_peek_sender(f->buf, len, &id, &kind),
                         GOSSIP_EDECODE);

        gossip_wire_stream_put_len(hdr, 0x01020304);
        assert_memory_equal(hdr, "\x01\x02\x03\x04", 4);
        assert_int_equal(gossip_wire_stream_get_len(hdr, NULL, &n), 0);
        assert_int_equal(n, 0x01020304);
        gossip_wire_stream_put_len(hdr, 0x04000001); /* 64 MiB + 1 */
        assert_int_equal(gossip_wire_stream_get_len(hdr, NULL, &n),
                         GOSSIP_ETOOBIG);
        /* the smallest frame is a MAC frame with an empty body */
        gossip_wire_stream_put_len(hdr, GOSSIP_WIRE_MAC_OVERHEAD - 1);
        assert_int_equal(gossip_wire_stream_get_len(hdr, NULL, &n),
                         GOSSIP_ESHORT);
        gossip_wire_stream_put_len(hdr, GOSSIP_WIRE_MAC_OVERHEAD);
        assert_int_equal(gossip_wire_stream_get_len(hdr, NULL, &n), 0);
        assert_int_equal(n, GOSSIP_WIRE_MAC_OVERHEAD);
}

/* ---- MAC frames ---------------------------------------------------------- */

/* K(self, peer) by the formula of docs/protocol.md 2.2.1, straight from
 * libsodium: the oracle for the keyring. */
static void pair_key_oracle(const uint8_t *self_sk, const uint8_t *peer_pk,
                            uint8_t k[32])
{
        static const char label[] = "gossipnode v1 frame mac";
        uint8_t xsk[32], xpk[32], in[23 + 32 + 64];
        const uint8_t *self_pk = self_sk + 32;
        int lo_self = memcmp(self_pk, peer_pk, 32) < 0;

        assert_int_equal(crypto_sign_ed25519_sk_to_curve25519(xsk, self_sk), 0);
        assert_int_equal(crypto_sign_ed25519_pk_to_curve25519(xpk, peer_pk), 0);
        memcpy(in, label, 23);
        assert_int_equal(crypto_scalarmult(in + 23, xsk, xpk), 0);
        memcpy(in + 55, lo_self ? self_pk : peer_pk, 32);
        memcpy(in + 87, lo_self ? peer_pk : self_pk, 32);
        crypto_generichash(k, 32, in, sizeof(in), NULL, 0);
}

/* Rewrites the tag of MAC frame b[0..len) under key, by the formula of
 * docs/protocol.md 2.2.1 (not through wire.c). */
static void retag(uint8_t *b, size_t len, const uint8_t *key)
{
        size_t n = len - GOSSIP_WIRE_TAG_BYTES;
        uint8_t none[1] = {0};

        crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
            none, b + n, NULL, none, 0, b, n, NULL, b + 8, key);
}

/* f->kr becomes B's keyring (self B, trusts A and B); m is a MAC frame
 * of kind from A to B. */
static size_t encode_mac(struct fx *f, int kind, struct gossip_msg *m,
                         uint8_t *buf, size_t cap)
{
        assert_int_equal(gossip_keyring_set_self(f->kr, sk_b), 0);
        make_msg(f, kind, m, 0);
        m->mac_key = gossip_keyring_mac_key(f->kr, id_a);
        assert_non_null(m->mac_key);
        return encode(m, sk_a, buf, cap);
}

static void test_mac_keys(void **state)
{
        struct gossip_keyring *ka = gossip_keyring_new();
        struct gossip_keyring *kb = gossip_keyring_new();
        struct gossip_keyring *kc = gossip_keyring_new();
        /* the identity point: a valid encoding with no X25519 form */
        uint8_t ident[32] = {1};
        uint8_t k[32];
        uint64_t id_ident;

        (void)state;
        assert_non_null(ka);
        assert_non_null(kb);
        assert_non_null(kc);
        /* keys before self: computed by set_self; keys after: by add */
        assert_int_equal(gossip_keyring_add(ka, pk_b, NULL), 0);
        assert_null(gossip_keyring_mac_key(ka, id_b));
        assert_int_equal(gossip_keyring_set_self(ka, sk_a), 0);
        assert_int_equal(gossip_keyring_set_self(kb, sk_b), 0);
        assert_int_equal(gossip_keyring_add(kb, pk_a, NULL), 0);
        assert_int_equal(gossip_keyring_add(kb, pk_c, NULL), 0);
        assert_int_equal(gossip_keyring_set_self(kc, sk_c), 0);
        assert_int_equal(gossip_keyring_add(kc, pk_a, NULL), 0);
        assert_int_equal(gossip_keyring_add(kc, pk_b, NULL), 0);
        assert_non_null(gossip_keyring_mac_key(ka, id_b));
        /* K(a,b) == K(b,a), as the formula says; != K(a,c), K(b,c) */
        assert_memory_equal(gossip_keyring_mac_key(ka, id_b),
                            gossip_keyring_mac_key(kb, id_a), 32);
        pair_key_oracle(sk_a, pk_b, k);
        assert_memory_equal(gossip_keyring_mac_key(ka, id_b), k, 32);
        pair_key_oracle(sk_b, pk_a, k);
        assert_memory_equal(gossip_keyring_mac_key(ka, id_b), k, 32);
        assert_memory_not_equal(gossip_keyring_mac_key(kb, id_a),
                                gossip_keyring_mac_key(kc, id_a), 32);
        assert_memory_equal(gossip_keyring_mac_key(kb, id_c),
                            gossip_keyring_mac_key(kc, id_b), 32);
        assert_memory_not_equal(gossip_keyring_mac_key(kb, id_c),
                                gossip_keyring_mac_key(kb, id_a), 32);
        /* unknown ids, id 0, no self key: no MAC key */
        assert_null(gossip_keyring_mac_key(ka, id_c));
        assert_null(gossip_keyring_mac_key(ka, 0));
        assert_null(gossip_keyring_mac_key(NULL, id_a));
        assert_int_equal(gossip_keyring_set_self(NULL, sk_a), GOSSIP_EINVAL);
        assert_int_equal(gossip_keyring_set_self(ka, NULL), GOSSIP_EINVAL);
        /* our own key in our keyring: computed or not, no crash */
        assert_int_equal(gossip_keyring_add(kb, pk_b, NULL), 0);
        if (gossip_keyring_mac_key(kb, id_b))
                assert_memory_not_equal(gossip_keyring_mac_key(kb, id_b),
                                        gossip_keyring_mac_key(kb, id_a), 32);
        /* a key with no X25519 form is trusted (signed frames) but has
         * no MAC key */
        assert_int_equal(gossip_keyring_add(kb, ident, &id_ident), 0);
        assert_non_null(gossip_keyring_find(kb, id_ident));
        assert_null(gossip_keyring_mac_key(kb, id_ident));
        /* re-setting self recomputes every key */
        assert_int_equal(gossip_keyring_set_self(kb, sk_c), 0);
        assert_memory_equal(gossip_keyring_mac_key(kb, id_a),
                            gossip_keyring_mac_key(kc, id_a), 32);
        /* removal drops the key with the entry */
        assert_int_equal(gossip_keyring_remove(kb, id_a), 0);
        assert_null(gossip_keyring_mac_key(kb, id_a));
        assert_non_null(gossip_keyring_mac_key(kb, id_c));
        gossip_keyring_free(ka);
        gossip_keyring_free(kb);
        gossip_keyring_free(kc);
}

/* The keyring's array grows by copy (secrets are wiped, not realloc'd):
 * keys stay right across growth and removal from the middle. */
static void test_mac_keys_many(void **state)
{
        struct gossip_keyring *ka = gossip_keyring_new();
        struct gossip_keyring *kb = gossip_keyring_new();
        enum { N = 40 };
        uint8_t pk[N][32], sk[N][64];
        uint64_t id[N];

        (void)state;
        assert_int_equal(gossip_keyring_set_self(ka, sk_a), 0);
        for (int i = 0; i < N; i++) {
                uint8_t s[32] = {0xee, (uint8_t)i};

                crypto_sign_seed_keypair(pk[i], sk[i], s);
                assert_int_equal(gossip_keyring_add(ka, pk[i], &id[i]), 0);
        }
        for (int i = 0; i < N; i += 3)
                assert_int_equal(gossip_keyring_remove(ka, id[i]), 0);
        assert_int_equal(gossip_keyring_add(kb, pk_a, NULL), 0);
        for (int i = 0; i < N; i++) {
                const uint8_t *k = gossip_keyring_mac_key(ka, id[i]);

                if (i % 3 == 0) {
                        assert_null(k);
                        continue;
                }
                assert_int_equal(gossip_keyring_set_self(kb, sk[i]), 0);
                assert_non_null(k);
                assert_memory_equal(k, gossip_keyring_mac_key(kb, id_a), 32);
        }
        gossip_keyring_free(ka);
        gossip_keyring_free(kb);
}

/* A -> B round trip for each bulk kind; the frame is exactly 60 + body
 * bytes with flags MAC | STREAM and the tag of the doc's formula; the same
 * bytes again are a replay. */
static void test_mac_roundtrip(void **state)
{
        static const int bulk[] = {GOSSIP_MSG_GRADIENT, GOSSIP_MSG_STATE,
                                   GOSSIP_MSG_PARAMS, GOSSIP_MSG_SAMPLES};
        struct fx *f = *state;
        struct gossip_msg m, got;
        uint8_t copy[1024];

        for (size_t i = 0; i < 4; i++) {
                size_t len = encode_mac(f, bulk[i], &m, f->buf, sizeof(f->buf));
                uint32_t body_len = gn_be32_get(f->buf + 40);

                assert_int_equal(f->buf[4], 0x06);
                assert_int_equal(len, GOSSIP_WIRE_MAC_OVERHEAD + body_len);
                memcpy(copy, f->buf, len);
                retag(copy, len, m.mac_key);
                assert_memory_equal(copy, f->buf, len);
                assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_STREAM, &got),
                                 0);
                assert_int_equal(got.key_id, id_a);
                assert_null(got.mac_key);
                assert_msg_equal(&m, &got, 0);
                assert_int_equal(f->st.accepted[bulk[i]], 1);
                expect_reject(f, f->buf, len, GOSSIP_CH_STREAM, GOSSIP_EREPLAY);
                /* the signed form is 48 bytes longer */
                m.mac_key = NULL;
                assert_int_equal(encode(&m, sk_a, copy, sizeof(copy)),
                                 len + 48);
        }
}

/* mac_key is ignored where a MAC is not allowed: such frames are signed. */
static void test_mac_key_ignored(void **state)
{
        struct fx *f = *state;
        struct gossip_msg m, got;
        size_t len;

        len = encode_mac(f, GOSSIP_MSG_GRADIENT, &m, f->buf, sizeof(f->buf));
        m.channel = GOSSIP_CH_DGRAM;
        len = encode(&m, sk_a, f->buf, sizeof(f->buf));
        assert_int_equal(f->buf[4], 0x01);
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_DGRAM, &got), 0);
        for (int kind = 1; kind < GOSSIP_MSG_KIND_COUNT; kind++) {
                if (GOSSIP_WIRE_IS_TENSOR(kind) || kind == GOSSIP_MSG_STATE)
                        continue;
                make_msg(f, kind, &m, 1);
                m.channel = GOSSIP_CH_STREAM;
                m.mac_key = gossip_keyring_mac_key(f->kr, id_a);
                len = encode(&m, sk_a, f->buf, sizeof(f->buf));
                assert_int_equal(f->buf[4] & 0x04, 0);
                assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_STREAM, &got),
                                 0);
                assert_msg_equal(&m, &got, m.n_updates);
        }
}

/* Who may not accept a MAC frame, and why. */
static void test_mac_rejects(void **state)
{
        struct fx *f = *state;
        struct gossip_keyring *kc = gossip_keyring_new();
        struct gossip_keyring *nokey = gossip_keyring_new();
        struct gossip_msg m, got;
        uint8_t copy[1024];
        size_t len;

        len = encode_mac(f, GOSSIP_MSG_PARAMS, &m, f->buf, sizeof(f->buf));
        /* C trusts A but the frame was MAC'd for B */
        assert_int_equal(gossip_keyring_set_self(kc, sk_c), 0);
        assert_int_equal(gossip_keyring_add(kc, pk_a, NULL), 0);
        memset(&got, 0, sizeof(got));
        assert_int_equal(gossip_wire_decode(f->buf, len, GOSSIP_CH_STREAM, NULL,
                                            kc, NULL, &got, NULL),
                         GOSSIP_EBADSIG);
        /* a receiver without its own key set has no pairwise keys */
        assert_int_equal(gossip_keyring_add(nokey, pk_a, NULL), 0);
        assert_int_equal(gossip_wire_decode(f->buf, len, GOSSIP_CH_STREAM, NULL,
                                            nokey, NULL, &got, NULL),
                         GOSSIP_EBADSIG);
        /* the right tag under another key (a forger's guess) */
        memcpy(copy, f->buf, len);
        retag(copy, len, gossip_keyring_mac_key(kc, id_a));
        expect_reject(f, copy, len, GOSSIP_CH_STREAM, GOSSIP_EBADSIG);
        /* a valid MAC frame arriving on the datagram channel */
        expect_reject(f, f->buf, len, GOSSIP_CH_DGRAM, GOSSIP_EREPLAY);
        /* flag rules (check 9), even with a correct tag */
        struct {
                int off;
                uint8_t val;
        } bad[] = {
            {4, 0x04},                 /* MAC without STREAM */
            {4, 0x07},                 /* MAC with DIGEST */
            {3, GOSSIP_MSG_PING},      /* MAC on PING */
            {3, GOSSIP_MSG_STATE_REQ}, /* MAC on STATE_REQ */
            {3, GOSSIP_MSG_SYNC},      /* MAC on SYNC */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memcpy(copy, f->buf, len);
                copy[bad[i].off] = bad[i].val;
                retag(copy, len, m.mac_key);
                expect_reject(f, copy, len, GOSSIP_CH_STREAM, GOSSIP_EDECODE);
                expect_reject(f, copy, len, GOSSIP_CH_DGRAM, GOSSIP_EDECODE);
        }
        /* the MAC bit on a signed datagram frame: wrong trailer length */
        make_msg(f, GOSSIP_MSG_PING, &m, 0);
        len = encode(&m, sk_a, copy, sizeof(copy));
        copy[4] |= 0x04;
        expect_reject(f, copy, len, GOSSIP_CH_DGRAM, GOSSIP_EDECODE);
        /* sender removed from the keyring */
        len = encode_mac(f, GOSSIP_MSG_GRADIENT, &m, f->buf, sizeof(f->buf));
        assert_int_equal(gossip_keyring_remove(f->kr, id_a), 0);
        expect_reject(f, f->buf, len, GOSSIP_CH_STREAM, GOSSIP_EUNKNOWNKEY);
        assert_int_equal(gossip_keyring_add(f->kr, pk_a, NULL), 0);
        assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_STREAM, &got), 0);
        gossip_keyring_free(kc);
        gossip_keyring_free(nokey);
}

/* The code a single-bit flip at bit of a MAC frame must get (docs
 * 2.3): by field. */
static int mac_flip_code(size_t bit, const uint8_t *frame)
{
        size_t byte = bit / 8;

        if (byte < 2 || (byte >= 5 && byte < 8))
                return GOSSIP_EDECODE; /* magic, reserved */
        if (byte == 2)
                return GOSSIP_EVERSION;
        if (byte == 3) {
                unsigned k = frame[3] ^ (1u << (bit % 8));
                if (k == 0 || k >= GOSSIP_MSG_KIND_COUNT)
                        return GOSSIP_EKIND;
                /* another bulk kind may carry a MAC: the tag (over the
                 * prefix) no longer matches; any other kind may not */
                return GOSSIP_WIRE_IS_TENSOR(k) || k == GOSSIP_MSG_STATE
                           ? GOSSIP_EBADSIG
                           : GOSSIP_EDECODE;
        }
        if (byte == 4) /* MAC cleared: a 64-byte trailer that is not there;
                        * DIGEST set, STREAM cleared, unknown bits */
                return bit % 8 == 2 ? GOSSIP_ESHORT : GOSSIP_EDECODE;
        if (byte < 16)
                return GOSSIP_EUNKNOWNKEY;
        if (byte < 40)
                return GOSSIP_EBADSIG; /* incarnation, seq (nonce), step */
        if (byte < 44) /* body_len: longer than there, or trailing bytes */
                return frame[byte] & (1u << (bit % 8)) ? GOSSIP_EDECODE
                                                       : GOSSIP_ESHORT;
        return GOSSIP_EBADSIG; /* body, tag */
}

/* Every truncation and every single-bit flip of a MAC frame of each bulk
 * kind is rejected with the code its field calls for; the original is
 * accepted afterwards. */
static void test_mac_truncations_and_bit_flips(void **state)
{
        static const int bulk[] = {GOSSIP_MSG_GRADIENT, GOSSIP_MSG_STATE,
                                   GOSSIP_MSG_PARAMS, GOSSIP_MSG_SAMPLES};
        struct fx *f = *state;
        struct gossip_msg m, got;
        uint8_t *copy = malloc(sizeof(f->buf));

        assert_non_null(copy);
        for (size_t i = 0; i < 4; i++) {
                size_t len = encode_mac(f, bulk[i], &m, f->buf, sizeof(f->buf));

                for (size_t n = 0; n < len; n++) {
                        memcpy(copy, f->buf, n);
                        expect_reject(f, copy, n, GOSSIP_CH_STREAM,
                                      GOSSIP_ESHORT);
                }
                for (size_t bit = 0; bit < len * 8; bit++) {
                        int want = mac_flip_code(bit, f->buf);
                        int err;

                        memcpy(copy, f->buf, len);
                        copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
                        err = decode(f, copy, len, GOSSIP_CH_STREAM, &got);
                        if (err != want)
                                fail_msg("kind %d: flip of bit %zu: %d, want "
                                         "%d",
                                         bulk[i], bit, err, want);
                }
                assert_int_equal(decode(f, f->buf, len, GOSSIP_CH_STREAM, &got),
                                 0);
        }
        free(copy);
}

/* ---- docs/protocol.md test vectors ------------------------------------- */

/* The fixed messages of the vectors: see protocol.md for their fields. */
static void vector_msg(const char *name, struct gossip_msg *m,
                       struct gossip_update *u, const uint8_t **sk)
{
        static const uint8_t payload[16] = {
            0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, /* 1, -2 */
            0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x80, 0x3e, /* .5, .25 */
        };

        memset(m, 0, sizeof(*m));
        memset(u, 0, sizeof(*u));
        if (!strcmp(name, "ping")) {
                *sk = sk_a;
                m->kind = GOSSIP_MSG_PING;
                m->incarnation = 1;
                m->seq = 7;
                m->step = 42;
                m->u.ping.target = id_b;
                u->key_id = id_b;
                u->state = 0;
                u->incarnation = 3;
                u->addr.family = 4;
                memcpy(u->addr.addr, "\x7f\x00\x00\x01", 4);
                u->addr.port = 7946;
                strcpy(u->name, "pi-garage");
                m->updates = u;
                m->n_updates = 1;
        } else if (!strcmp(name, "ping_suspect")) {
                *sk = sk_a;
                m->kind = GOSSIP_MSG_PING;
                m->incarnation = 1;
                m->seq = 12;
                m->step = 42;
                m->u.ping.target = id_b;
                u->key_id = id_b;
                u->state = 1; /* suspect */
                u->incarnation = 3;
                u->origin = id_a;
                m->updates = u;
                m->n_updates = 1;
        } else if (!strcmp(name, "ping_version")) {
                *sk = sk_a;
                m->kind = GOSSIP_MSG_PING;
                m->incarnation = 1;
                m->seq = 14;
                m->step = 42;
                m->u.ping.target = id_b;
                u->key_id = id_a; /* ourselves, alive, telling our version */
                u->state = 0;
                u->incarnation = 1;
                strcpy(u->version, "0.1.0");
                m->updates = u;
                m->n_updates = 1;
        } else if (!strcmp(name, "ack")) {
                *sk = sk_b;
                m->kind = GOSSIP_MSG_ACK;
                m->incarnation = 3;
                m->seq = 9;
                m->step = 41;
                m->u.ack.ack_seq = 7;
                m->u.ack.target = id_b;
        } else if (!strcmp(name, "params_mac") || !strcmp(name, "gradient") ||
                   !strcmp(name, "params_period")) {
                /* params_*: the caller sets mac_key = K(A, B) */
                int period = !strcmp(name, "params_period");
                int params = period || !strcmp(name, "params_mac");

                *sk = sk_a;
                m->kind = params ? GOSSIP_MSG_PARAMS : GOSSIP_MSG_GRADIENT;
                m->channel = GOSSIP_CH_STREAM;
                m->incarnation = 1;
                m->seq = params ? 11 : 8;
                m->step = params ? 44 : 43;
                m->u.tensor.step = m->step - 1;
                m->u.tensor.codec = 0;
                m->u.tensor.part_index = 0;
                m->u.tensor.part_count = 1;
                m->u.tensor.n_elems = 4;
                m->u.tensor.payload = payload;
                m->u.tensor.payload_len = sizeof(payload);
                if (period) {
                        m->seq = 15;
                        m->step = 65;
                        m->u.tensor.step = 64;
                        m->u.tensor.period = 64;
                }
        } else if (!strcmp(name, "leave_stop")) {
                *sk = sk_a;
                m->kind = GOSSIP_MSG_LEAVE;
                m->incarnation = 1;
                m->seq = 13;
                m->step = 1432;
                m->u.leave.reason = GOSSIP_STOP_TARGET;
                m->u.leave.step = 1432;
                m->u.leave.acc_bp = 8812;
                m->u.leave.target_bp = 8800;
                strcpy(m->u.leave.origin, "pi-kitchen");
        } else {
                *sk = sk_b;
                m->kind = GOSSIP_MSG_STATE_REQ;
                m->channel = GOSSIP_CH_STREAM;
                m->incarnation = 3;
                m->seq = 10;
                m->step = 0;
        }
}

static void test_protocol_vectors(void **state)
{
        static const char *names[] = {
            "ping",       "ack",          "gradient",
            "state_req",  "params_mac",   "ping_suspect",
            "leave_stop", "ping_version", "params_period"};
        struct fx *f = *state;
        char *doc = gn_test_read_file(GN_SOURCE_DIR "/docs/protocol.md");
        int print = getenv("GN_WIRE_PRINT_VECTORS") != NULL;
        const uint8_t *kab;
        uint8_t want_k[64];

        if (!print)
                assert_non_null(doc);
        /* the receiver is B (it trusts A and B): K(A, B) */
        assert_int_equal(gossip_keyring_set_self(f->kr, sk_b), 0);
        kab = gossip_keyring_mac_key(f->kr, id_a);
        assert_non_null(kab);
        if (print)
                gn_test_print_vector("mac_key_ab", kab, 32);
        else if (gn_test_doc_vector(doc, "mac_key_ab", want_k,
                                    sizeof(want_k)) != 32)
                fail_msg("vector mac_key_ab: not 32 bytes in the doc");
        else
                assert_memory_equal(kab, want_k, 32);
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                struct gossip_msg m, got;
                struct gossip_update u;
                const uint8_t *sk;
                uint8_t want[1024];
                size_t len, n;

                vector_msg(names[i], &m, &u, &sk);
                if (!strncmp(names[i], "params_", 7))
                        m.mac_key = kab;
                len = encode(&m, sk, f->buf, sizeof(f->buf));
                if (print) {
                        gn_test_print_vector(names[i], f->buf, len);
                        continue;
                }
                n = gn_test_doc_vector(doc, names[i], want, sizeof(want));
                if (n != len)
                        fail_msg("vector %s: %zu bytes in the doc, %zu encoded",
                                 names[i], n, len);
                assert_memory_equal(f->buf, want, len);
                assert_int_equal(decode(f, want, n, m.channel, &got), 0);
                assert_msg_equal(&m, &got, m.n_updates);
        }
        free(doc);
}

/* The two entries of protocol.md's view-digest vector (3.9). */
static void view_vector(struct gossip_update u[2], struct gossip_blob c[2],
                        uint8_t cert[137])
{
        memset(u, 0, 2 * sizeof(*u));
        for (int i = 0; i < 137; i++)
                cert[i] = (uint8_t)i;
        u[0].key_id = 0x1122334455667788ull; /* listed first, sorts second */
        u[0].incarnation = 5;
        u[0].state = 1; /* suspect */
        u[0].origin = 0x0123456789abcdefull;
        u[0].addr.family = 4;
        memcpy(u[0].addr.addr, (uint8_t[]){10, 0, 0, 2}, 4);
        u[0].addr.port = 7946;
        strcpy(u[0].name, "pi-02");
        c[0] = (struct gossip_blob){cert, 137};
        u[1].key_id = 0x0123456789abcdefull;
        u[1].incarnation = 3;
        u[1].state = 0; /* alive */
        u[1].addr.family = 4;
        memcpy(u[1].addr.addr, (uint8_t[]){10, 0, 0, 1}, 4);
        u[1].addr.port = 7946;
        strcpy(u[1].name, "pi-01");
        strcpy(u[1].version, "0.1.0");
        u[1].settings = 0x70988c922c367c88ull;
        c[1] = (struct gossip_blob){NULL, 0};
}

/* The view digest: the order of the entries does not matter, every field
 * a full SYNC would tell does, and the value is protocol.md's vector. */
static void test_view_digest(void **state)
{
        struct gossip_update u[2], sw[2];
        struct gossip_blob c[2], cs[2];
        uint8_t cert[137], d[GOSSIP_VIEW_DIGEST_BYTES],
            e[GOSSIP_VIEW_DIGEST_BYTES], want[32];
        char *doc;

        (void)state;
        view_vector(u, c, cert);
        assert_int_equal(gossip_wire_view_digest(u, c, 2, d), 0);
        if (getenv("GN_WIRE_PRINT_VECTORS")) {
                gn_test_print_vector("view-digest", d, sizeof(d));
                return;
        }
        sw[0] = u[1], sw[1] = u[0], cs[0] = c[1], cs[1] = c[0];
        assert_int_equal(gossip_wire_view_digest(sw, cs, 2, e), 0);
        assert_memory_equal(d, e, sizeof(d));
        for (int f = 0; f < 10; f++) {
                view_vector(u, c, cert);
                switch (f) {
                case 0:
                        u[1].incarnation++;
                        break;
                case 1:
                        u[0].state = 2;
                        break; /* dead */
                case 2:
                        u[1].addr.port++;
                        break;
                case 3:
                        u[1].addr.addr[3] = 9;
                        break;
                case 4:
                        strcpy(u[0].name, "pi-2");
                        break;
                case 5:
                        u[0].origin = 7;
                        break;
                case 6:
                        strcpy(u[1].version, "0.1.1");
                        break;
                case 7:
                        u[1].settings++;
                        break;
                case 8:
                        cert[100] ^= 1;
                        break;
                case 9:
                        u[1].loading = 1;
                        break;
                }
                assert_int_equal(gossip_wire_view_digest(u, c, 2, e), 0);
                if (!memcmp(d, e, sizeof(d)))
                        fail_msg("field %d changed, the digest did not", f);
        }
        view_vector(u, c, cert);
        assert_int_equal(gossip_wire_view_digest(u, NULL, 2, e), 0);
        assert_memory_not_equal(d, e, sizeof(d)); /* B's certificate */
        doc = gn_test_read_file(GN_SOURCE_DIR "/docs/protocol.md");
        assert_non_null(doc);
        assert_int_equal(
            gn_test_doc_vector(doc, "view-digest", want, sizeof(want)),
            GOSSIP_VIEW_DIGEST_BYTES);
        assert_memory_equal(d, want, sizeof(d));
        free(doc);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
            T(test_roundtrip_every_kind),
            T(test_view_digest),
            T(test_updates_fill_datagram),
            T(test_updates_fill_every_cap),
            T(test_truncations_and_bit_flips),
            T(test_reject_reasons),
            T(test_replay_window),
            T(test_replay_window_model),
            T(test_body_bounds),
            T(test_update_origin_compat),
            T(test_leave_stop),
            T(test_params_period),
            T(test_params_rx_rate),
            T(test_update_version_compat),
            T(test_update_loading),
            T(test_encode_rejects_bad_messages),
            T(test_keyring),
            T(test_keyring_live_remove),
            T(test_peek_and_stream_len),
            T(test_mac_keys),
            T(test_mac_keys_many),
            T(test_mac_roundtrip),
            T(test_mac_key_ignored),
            T(test_mac_rejects),
            T(test_mac_truncations_and_bit_flips),
            T(test_protocol_vectors),
#undef T
        };

        return cmocka_run_group_tests(tests, group_setup, NULL);
}
