/*
 * test_crl.c - the revocation list while running (issue 33 item 1,
 * docs/protocol.md 12.7): wire key 22, then real nodes on the simulated
 * network (tests/sim) in virtual time. A list given to one node of six
 * reaches every other within one stream delay, each node forwarding it
 * once; every member drops the revoked device at once and refuses its
 * frames as `revoked` (signed or MAC'd), not a frame that merely names
 * its key id. An older or conflicting list is refused and counted, a
 * node that missed the flood converges at anti-entropy, a peers-file
 * member is never dropped by the authority's word, and a member whose
 * certificate expires is dropped once the clock (or, without a clock,
 * the list's date) passes not_after + skew.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "gossip/cert.h"
#include "gossip/gossip.h"
#include "gossip/keyring.h"
#include "gossip/wire.h"
#include "sim.h"
#include "test_frame.h"
#include "test_seed.h"

/* The sim's wall clock at virtual time 0 (unix seconds, 2030). */
#define T0 1900000000ULL
/* One-way delay of every link; the stream has no jitter (sim.h). */
#define DELAY_MS 2

static uint8_t ca_pk[GOSSIP_KEY_BYTES], ca_sk[GOSSIP_SECRET_BYTES];

static void make_authority(uint64_t seed)
{
        uint8_t ks[crypto_sign_SEEDBYTES] = {0};

        memcpy(ks, &seed, sizeof(seed));
        ks[31] = 0xcb;
        crypto_sign_seed_keypair(ca_pk, ca_sk, ks);
}

static int make_crl(uint64_t seq, uint64_t issued_at, const uint64_t *serials,
                    uint32_t n, uint8_t *buf)
{
        int len = gossip_crl_sign(seq, issued_at, serials, n, ca_sk, buf,
                                  GOSSIP_CRL_MAX_BYTES);

        assert_true(len > 0);
        return len;
}

/* ---- the wire ---------------------------------------------------------- */

static uint8_t w_pk[GOSSIP_KEY_BYTES], w_sk[GOSSIP_SECRET_BYTES];
static uint64_t w_id;

/* A hand-made body, correctly signed by w_sk (digest-signed when long):
 * the decoder's own checks of key 22. */
static size_t raw_frame(uint8_t *b, int kind, const uint8_t *body, size_t n)
{
        static uint64_t seq = 1;

        return gn_test_raw_frame(
            b, kind, (uint8_t)((n > GOSSIP_WIRE_DIGEST_OVER ? 1 : 0) | 2), w_id,
            ++seq, body, n, w_sk);
}

/* {22: bin of n bytes of x}, repeated `times` (bin 16 header). */
static size_t crl_body(uint8_t *body, size_t n, int times)
{
        size_t k = 0;

        body[k++] = (uint8_t)(0x80 | times);
        for (int t = 0; t < times; t++) {
                body[k++] = 22;
                body[k++] = 0xc5;
                body[k++] = (uint8_t)(n >> 8);
                body[k++] = (uint8_t)n;
                memset(body + k, 0x5a, n);
                k += n;
        }
        return k;
}

static int decode_raw(struct gossip_keyring *kr, int kind, const uint8_t *body,
                      size_t n, struct gossip_msg *m)
{
        static uint8_t frame[GOSSIP_CRL_MAX_BYTES + 4096];
        struct gossip_update upd[4];
        size_t len = raw_frame(frame, kind, body, n);

        memset(m, 0, sizeof(*m));
        m->updates = upd;
        m->updates_cap = 4;
        return gossip_wire_decode(frame, len, GOSSIP_CH_STREAM, NULL, kr, NULL,
                                  m, NULL);
}

static void test_wire_key_22(void **state)
{
        static uint8_t crl[GOSSIP_CRL_MAX_BYTES],
            body[GOSSIP_CRL_MAX_BYTES + 64];
        static uint8_t buf[GOSSIP_CRL_MAX_BYTES + 4096];
        uint64_t serials[3] = {7, 9, 1000};
        struct gossip_keyring *kr = gossip_keyring_new();
        struct gossip_msg m = {0}, d = {0};
        size_t len, n;
        int cl;

        (void)state;
        make_authority(22);
        crypto_sign_keypair(w_pk, w_sk);
        assert_int_equal(gossip_keyring_add(kr, w_pk, &w_id), 0);
        cl = make_crl(3, T0, serials, 3, crl);
        /* round trip in a SYNC and in a JOIN, byte for byte */
        for (int kind = GOSSIP_MSG_SYNC; kind <= GOSSIP_MSG_JOIN; kind++) {
                memset(&m, 0, sizeof(m));
                m.kind = (uint8_t)kind;
                m.channel = GOSSIP_CH_STREAM;
                m.seq = (uint64_t)kind;
                m.crl = crl;
                m.crl_len = (size_t)cl;
                assert_int_equal(
                    gossip_wire_encode(&m, w_sk, buf, sizeof(buf), &len, NULL),
                    0);
                assert_true(len <= gossip_wire_frame_bound(&m));
                memset(&d, 0, sizeof(d));
                assert_int_equal(gossip_wire_decode(buf, len, GOSSIP_CH_STREAM,
                                                    NULL, kr, NULL, &d, NULL),
                                 0);
                assert_int_equal(d.crl_len, (size_t)cl);
                assert_memory_equal(d.crl, crl, (size_t)cl);
                assert_true(d.crl > buf && d.crl + cl <= buf + len);
        }
        /* the encoder refuses what the decoder would */
        m.crl_len = GOSSIP_CRL_MIN_BYTES - 1;
        assert_int_equal(
            gossip_wire_encode(&m, w_sk, buf, sizeof(buf), &len, NULL),
            GOSSIP_EINVAL);
        m.crl_len = GOSSIP_CRL_MAX_BYTES + 1;
        assert_int_equal(
            gossip_wire_encode(&m, w_sk, buf, sizeof(buf), &len, NULL),
            GOSSIP_EINVAL);
        m.crl = NULL;
        m.crl_len = (size_t)cl;
        assert_int_equal(
            gossip_wire_encode(&m, w_sk, buf, sizeof(buf), &len, NULL),
            GOSSIP_EINVAL);

        /* strict decoding: the bounds, the type, once only */
        n = crl_body(body, GOSSIP_CRL_MIN_BYTES, 1);
        assert_int_equal(decode_raw(kr, GOSSIP_MSG_SYNC, body, n, &d), 0);
        assert_int_equal(d.crl_len, GOSSIP_CRL_MIN_BYTES);
        n = crl_body(body, GOSSIP_CRL_MAX_BYTES, 1);
        assert_int_equal(decode_raw(kr, GOSSIP_MSG_JOIN, body, n, &d), 0);
        assert_int_equal(d.crl_len, GOSSIP_CRL_MAX_BYTES);
        n = crl_body(body, GOSSIP_CRL_MIN_BYTES - 1, 1);
        assert_int_equal(decode_raw(kr, GOSSIP_MSG_SYNC, body, n, &d),
                         GOSSIP_EDECODE);
        n = crl_body(body, GOSSIP_CRL_MAX_BYTES + 1, 1);
        assert_int_equal(decode_raw(kr, GOSSIP_MSG_SYNC, body, n, &d),
                         GOSSIP_EDECODE);
        n = crl_body(body, GOSSIP_CRL_MIN_BYTES, 2);
        assert_int_equal(decode_raw(kr, GOSSIP_MSG_SYNC, body, n, &d),
                         GOSSIP_EDECODE);
        n = crl_body(body, GOSSIP_CRL_MIN_BYTES, 1);
        body[2] = 0xda; /* str 16 instead of bin 16 */
        assert_int_equal(decode_raw(kr, GOSSIP_MSG_SYNC, body, n, &d),
                         GOSSIP_EDECODE);
        /* another kind ignores it */
        n = crl_body(body, GOSSIP_CRL_MIN_BYTES - 1, 1);
        assert_int_equal(decode_raw(kr, GOSSIP_MSG_PING, body, n, &d), 0);
        assert_int_equal(d.crl_len, 0);
        gossip_keyring_free(kr);
}

/* ---- on the simulated network ---------------------------------------- */

/* Nodes 0 and 1 trust each other by peers file; every node has a
 * certificate (serial 100 + i) and the authority; 2.. are certificate
 * only. not_after[i] 0: a year. */
enum { N = 6, LISTED = 2, MAX_N = 8 };

static uint8_t certs[MAX_N][GOSSIP_CERT_MAX_BYTES];
static uint8_t node_sk[MAX_N][GOSSIP_SECRET_BYTES];
static uint64_t not_before[MAX_N], not_after[MAX_N];
static int on_crl_calls[MAX_N];
static long calling = -1; /* the node a test calls gossip_set_crl on */

static void on_crl(void *ctx, const void *bytes, size_t len, uint64_t seq)
{
        long i = sim_running(ctx);
        struct gossip_crl l;

        if (i < 0)
                i = calling;
        assert_true(i >= 0 && i < MAX_N);
        assert_int_equal(gossip_crl_decode(bytes, len, &l, NULL),
                         GOSSIP_CRL_OK);
        assert_int_equal(l.seq, seq);
        on_crl_calls[i]++;
}

static void configure(struct sim *s, size_t i, struct gossip_config *cfg)
{
        struct gossip_cert c;
        int n;

        (void)s;
        cfg->n_peers = i < LISTED ? LISTED : 0;
        cfg->authority_pk = ca_pk;
        cfg->on_crl = on_crl;
        memset(&c, 0, sizeof(c));
        memcpy(c.pk, cfg->public_key, GOSSIP_KEY_BYTES);
        c.serial = 100 + i;
        c.not_before = not_before[i] ? not_before[i] : T0 - 10;
        c.not_after = not_after[i] ? not_after[i] : T0 + 365 * 86400;
        snprintf(c.name, sizeof(c.name), "dev%zu", i);
        n = gossip_cert_sign(&c, ca_sk, certs[i], sizeof(certs[i]));
        assert_true(n > 0);
        cfg->cert = certs[i];
        cfg->cert_len = (size_t)n;
        memcpy(node_sk[i], cfg->secret_key, GOSSIP_SECRET_BYTES);
}

static int live(int st)
{
        return st == GOSSIP_ALIVE || st == GOSSIP_SUSPECT;
}

static size_t g_n;

static bool all_together(struct sim *s, void *arg)
{
        (void)arg;
        for (size_t i = 0; i < g_n; i++)
                for (size_t j = 0; j < g_n; j++)
                        if (i != j && !live(sim_state(s, i, j)))
                                return false;
        return true;
}

/* Every node but `gone` has dropped `gone` (and holds a list of seq). */
struct dropped_arg {
        size_t gone;
        uint64_t seq;
};

static bool all_dropped(struct sim *s, void *arg)
{
        const struct dropped_arg *a = arg;
        struct gossip_crl l;

        for (size_t i = 0; i < g_n; i++) {
                if (i == a->gone)
                        continue;
                if (sim_state(s, i, a->gone) != -1 ||
                    gossip_crl_get(sim_node(s, i), &l) != 0 || l.seq != a->seq)
                        return false;
        }
        return true;
}

/* n nodes with the certificates configure() makes, joined through 0. */
static struct sim *start(size_t n, uint64_t seed, uint64_t unix_start)
{
        struct sim_opts o = {0};
        struct sim *s = NULL;

        g_n = n;
        calling = -1;
        memset(on_crl_calls, 0, sizeof(on_crl_calls));
        make_authority(seed);
        o.n = n;
        o.seed = seed;
        o.delay_ms = DELAY_MS;
        o.jitter_ms = 3;
        o.configure = configure;
        o.unix_start_s = unix_start;
        assert_int_equal(sim_create(&o, &s), 0);
        for (size_t i = 1; i < n; i++)
                assert_int_equal(sim_join(s, i, 0), 0);
        assert_true(sim_run_until_pred(s, 5000, 10, all_together, NULL));
        return s;
}

static int set_crl(struct sim *s, size_t i, const uint8_t *crl, int len)
{
        int v;

        calling = (long)i;
        v = gossip_set_crl(sim_node(s, i), crl, (size_t)len);
        calling = -1;
        return v;
}

/* A frame from node `from` (signed, or MAC'd to `to` on the stream),
 * straight into node `to` (check_only: gossip_frame_authenticate, which
 * changes nothing). */
static int send_frame(struct sim *s, size_t from, size_t to, int mac,
                      int check_only)
{
        struct gossip_keyring *kr = gossip_keyring_new();
        static const float grad[4] = {1, 2, 3, 4};
        struct gossip_msg m = {0};
        struct gossip_addr a;
        uint8_t buf[2048];
        uint64_t id;
        size_t len;
        int rc;

        m.incarnation = 1;
        m.seq = 1000000 + (uint64_t)mac;
        if (mac) {
                assert_int_equal(gossip_keyring_set_self(kr, node_sk[from]), 0);
                assert_int_equal(gossip_keyring_add(kr, sim_key(s, to), &id),
                                 0);
                m.kind = GOSSIP_MSG_GRADIENT;
                m.channel = GOSSIP_CH_STREAM;
                m.mac_key = gossip_keyring_mac_key(kr, id);
                m.u.tensor.part_count = 1;
                m.u.tensor.n_elems = 4;
                m.u.tensor.payload = (const uint8_t *)grad;
                m.u.tensor.payload_len = sizeof(grad);
        } else {
                m.kind = GOSSIP_MSG_PING;
                m.channel = GOSSIP_CH_DGRAM;
        }
        assert_int_equal(
            gossip_wire_encode(&m, node_sk[from], buf, sizeof(buf), &len, NULL),
            0);
        assert_true(!mac || (buf[4] & 4));
        sim_addr(s, from, &a);
        rc = check_only
                 ? gossip_frame_authenticate(sim_node(s, to), buf, len,
                                             m.channel)
                 : gossip_on_message(sim_node(s, to), &a, buf, len, m.channel);
        gossip_keyring_free(kr);
        return rc;
}

static int inject(struct sim *s, size_t from, size_t to, int mac)
{
        return send_frame(s, from, to, mac, 0);
}

static void test_revocation_spreads(void **state)
{
        static uint8_t crl[GOSSIP_CRL_MAX_BYTES];
        const size_t REVOKED = 4, GIVEN = 2;
        uint64_t serial = 100 + REVOKED;
        struct dropped_arg arg = {REVOKED, 1};
        struct gossip_barred_info bi[4];
        struct sim_counters c0, c1;
        struct gossip_stats st;
        uint8_t buf[256];
        struct gossip_addr a;
        struct sim *s;
        uint64_t t;
        int cl;

        (void)state;
        s = start(N, gn_test_seed(__func__, 3301), T0);
        cl = make_crl(1, T0, &serial, 1, crl);
        for (size_t i = 0; i < N; i++) /* before: a member like any */
                if (i != REVOKED)
                        assert_int_equal(send_frame(s, REVOKED, i, 1, 1), 0);

        t = sim_now(s);
        sim_counters(s, &c0);
        assert_int_equal(set_crl(s, GIVEN, crl, cl), GOSSIP_CRL_OK);
        /* at once where it was given; not yet anywhere else */
        assert_int_equal(sim_state(s, GIVEN, REVOKED), -1);
        for (size_t i = 0; i < N; i++)
                if (i != GIVEN && i != REVOKED)
                        assert_true(live(sim_state(s, i, REVOKED)));
        /* Bound: the given node sends its SYNC to every live member at
         * once, one stream delay (2 ms, no jitter on the stream); +1 ms
         * for the pred's step. */
        assert_true(
            sim_run_until_pred(s, t + DELAY_MS + 1, 1, all_dropped, &arg));
        sim_counters(s, &c1);
        printf("# every member dropped the revoked one in %llu ms; %llu "
               "stream frames, %llu bytes sent meanwhile\n",
               (unsigned long long)(sim_now(s) - t),
               (unsigned long long)(c1.sent[GOSSIP_CH_STREAM] -
                                    c0.sent[GOSSIP_CH_STREAM]),
               (unsigned long long)(c1.bytes[GOSSIP_CH_STREAM] -
                                    c0.bytes[GOSSIP_CH_STREAM]));
        /* each node forwarded once, to every live member but the one it
         * had the list from (and the revoked one): n-2 and n-3 SYNCs */
        for (size_t i = 0; i < N; i++) {
                if (i == REVOKED)
                        continue;
                gossip_stats_get(sim_node(s, i), &st);
                assert_int_equal(st.crl_pushes, i == GIVEN ? N - 2 : N - 3);
                assert_int_equal(st.crls.n[GOSSIP_CRL_OK], 1);
                assert_int_equal(on_crl_calls[i], 1);
                assert_true(st.certs.n[GOSSIP_CERT_REVOKED] >= 1);
        }
        assert_int_equal(on_crl_calls[REVOKED], 0); /* told nothing */

        /* its frames: refused as revoked, signed or MAC'd, charged to it */
        for (size_t i = 0; i < N; i++) {
                if (i == REVOKED)
                        continue;
                assert_int_equal(send_frame(s, REVOKED, i, 1, 1),
                                 GOSSIP_EREVOKED);
                assert_int_equal(inject(s, REVOKED, i, 0), GOSSIP_EREVOKED);
                assert_int_equal(inject(s, REVOKED, i, 1), GOSSIP_EREVOKED);
                assert_int_equal(gossip_barred(sim_node(s, i), bi, 4), 1);
                assert_memory_equal(bi[0].key, sim_key(s, REVOKED),
                                    GOSSIP_KEY_BYTES);
                assert_int_equal(bi[0].serial, serial);
                assert_int_equal(bi[0].verdict, GOSSIP_CERT_REVOKED);
                assert_true(bi[0].rejects >= 2);
        }
        /* a frame that only names its key id is no revocation: anyone
         * can write 8 bytes */
        {
                struct gossip_msg m = {0};
                uint64_t id = gossip_key_id(sim_key(s, REVOKED));
                size_t len;

                m.kind = GOSSIP_MSG_PING;
                m.seq = 5;
                assert_int_equal(gossip_wire_encode(&m, node_sk[5], buf,
                                                    sizeof(buf), &len, NULL),
                                 0);
                for (int k = 0; k < 8; k++)
                        buf[8 + k] = (uint8_t)(id >> (56 - 8 * k));
                sim_addr(s, 5, &a);
                assert_int_equal(gossip_on_message(sim_node(s, 0), &a, buf, len,
                                                   GOSSIP_CH_DGRAM),
                                 GOSSIP_EUNKNOWNKEY);
                assert_int_equal(gossip_frame_authenticate(
                                     sim_node(s, 0), buf, len, GOSSIP_CH_DGRAM),
                                 GOSSIP_EUNKNOWNKEY);
        }
        /* and its own traffic: it probes its members round-robin, one a
         * second (5 of them); by 7 s each has refused some of it */
        sim_run_until(s, t + 7000);
        for (size_t i = 0; i < N; i++) {
                if (i == REVOKED)
                        continue;
                gossip_stats_get(sim_node(s, i), &st);
                assert_true(st.rejects[-GOSSIP_EREVOKED] > 2);
                assert_int_equal(sim_state(s, i, REVOKED), -1);
        }
        assert_string_equal(gossip_reject_name(GOSSIP_EREVOKED), "revoked");
        sim_destroy(s);
}

/* The merge rule at work: older and conflicting lists refused and
 * counted; a node that missed the flood (cut off) converges when it is
 * back, at anti-entropy; a newer list settles a conflict. */
static void test_older_and_conflicting(void **state)
{
        static uint8_t a2[GOSSIP_CRL_MAX_BYTES], b2[GOSSIP_CRL_MAX_BYTES],
            a1[GOSSIP_CRL_MAX_BYTES], c3[GOSSIP_CRL_MAX_BYTES];
        uint64_t one = 1, two = 2, three[2] = {2, 3};
        const size_t AWAY = 3;
        int groups[N] = {0, 0, 0, 1, 0, 0};
        struct gossip_stats st;
        struct gossip_crl l;
        struct sim *s;
        int la2, lb2, la1, lc3;
        uint64_t t;

        (void)state;
        s = start(N, gn_test_seed(__func__, 3302), T0);
        la1 = make_crl(1, T0, &one, 1, a1);
        la2 = make_crl(2, T0, &one, 1, a2);
        lb2 = make_crl(2, T0, &two, 1, b2); /* seq 2 again: a conflict */
        lc3 = make_crl(3, T0 + 1, three, 2, c3);

        /* AWAY is cut off and given B; the rest get A */
        sim_partition(s, groups);
        assert_int_equal(set_crl(s, AWAY, b2, lb2), GOSSIP_CRL_OK);
        assert_int_equal(set_crl(s, 0, a2, la2), GOSSIP_CRL_OK);
        sim_run_until(s, sim_now(s) + 100);
        assert_int_equal(set_crl(s, 1, a1, la1), GOSSIP_CRL_OLDER);
        assert_int_equal(set_crl(s, 1, a2, la2), GOSSIP_CRL_SAME);
        assert_int_equal(set_crl(s, 1, b2, lb2), GOSSIP_CRL_CONFLICT);
        assert_int_equal(gossip_crl_get(sim_node(s, 1), &l), 0);
        assert_true(l.len == (size_t)la2 && !memcmp(l.bytes, a2, l.len));
        gossip_stats_get(sim_node(s, 1), &st);
        assert_int_equal(st.crls.n[GOSSIP_CRL_OLDER], 1);
        assert_int_equal(st.crls.n[GOSSIP_CRL_CONFLICT], 1);

        /* healed: each side's SYNCs carry its list; both refuse the
         * other's as a conflict and keep their own (within two sync
         * rounds, 5/4 x 5 s each) */
        sim_partition(s, NULL);
        sim_run_until(s, sim_now(s) + 12500);
        gossip_stats_get(sim_node(s, AWAY), &st);
        assert_true(st.crls.n[GOSSIP_CRL_CONFLICT] >= 1);
        assert_int_equal(gossip_crl_get(sim_node(s, AWAY), &l), 0);
        assert_true(l.len == (size_t)lb2 && !memcmp(l.bytes, b2, l.len));
        for (size_t i = 0; i < N; i++) {
                if (i == AWAY)
                        continue;
                assert_int_equal(gossip_crl_get(sim_node(s, i), &l), 0);
                assert_true(l.len == (size_t)la2 &&
                            !memcmp(l.bytes, a2, l.len));
        }

        /* a newer list settles it, everywhere at once (its serials 2
         * and 3 are no device's) */
        t = sim_now(s);
        assert_int_equal(set_crl(s, 5, c3, lc3), GOSSIP_CRL_OK);
        sim_run_until(s, t + DELAY_MS + 1);
        for (size_t i = 0; i < N; i++) {
                assert_int_equal(gossip_crl_get(sim_node(s, i), &l), 0);
                assert_int_equal(l.seq, 3);
        }

        /* missed the flood: cut off while a fourth list went round, then
         * back; it takes the list at its first anti-entropy exchange in
         * either direction (both SYNCs carry their sender's list): at
         * the latest its own next round, within 5/4 x 5 s */
        {
                static uint8_t d4[GOSSIP_CRL_MAX_BYTES];
                uint64_t four[3] = {2, 3, 4};
                int ld4 = make_crl(4, T0 + 2, four, 3, d4);

                sim_partition(s, groups);
                assert_int_equal(set_crl(s, 0, d4, ld4), GOSSIP_CRL_OK);
                sim_run_until(s, sim_now(s) + 100);
                assert_int_equal(gossip_crl_get(sim_node(s, AWAY), &l), 0);
                assert_int_equal(l.seq, 3); /* not yet */
                sim_partition(s, NULL);
                t = sim_now(s);
                sim_run_until(s, t + 6250 + 2 * DELAY_MS);
                assert_int_equal(gossip_crl_get(sim_node(s, AWAY), &l), 0);
                assert_int_equal(l.seq, 4);
                gossip_stats_get(sim_node(s, AWAY), &st);
                assert_int_equal(st.crls.n[GOSSIP_CRL_OK], 3);
        }
        assert_true(all_together(s, NULL));
        sim_destroy(s);
}

/* The peers file outranks the authority: revoking 0's and 1's serials
 * makes the certificate-only nodes drop them, never 0 and 1 each other
 * (though each shows the other's certificate as revoked). */
static void test_peers_file_never_dropped(void **state)
{
        static uint8_t crl[GOSSIP_CRL_MAX_BYTES];
        uint64_t serials[2] = {100, 101};
        struct gossip_member_info mi;
        struct sim *s;
        int cl;

        (void)state;
        s = start(N, gn_test_seed(__func__, 3303), T0);
        cl = make_crl(1, T0, serials, 2, crl);
        assert_int_equal(set_crl(s, 0, crl, cl), GOSSIP_CRL_OK);
        sim_run_until(s, sim_now(s) + 10000);
        assert_true(live(sim_state(s, 0, 1)) && live(sim_state(s, 1, 0)));
        assert_int_equal(gossip_member_get(sim_node(s, 0), sim_key(s, 1), &mi),
                         0);
        assert_int_equal(mi.by_cert, 0);
        assert_int_equal(mi.cert_serial, 101);
        assert_int_equal(mi.cert_status, GOSSIP_CERT_REVOKED);
        for (size_t i = LISTED; i < N; i++) {
                assert_int_equal(sim_state(s, i, 0), -1);
                assert_int_equal(sim_state(s, i, 1), -1);
                for (size_t j = LISTED; j < N; j++)
                        assert_true(i == j || live(sim_state(s, i, j)));
        }
        assert_int_equal(gossip_member_get(sim_node(s, 2), sim_key(s, 3), &mi),
                         0);
        assert_int_equal(mi.by_cert, 1);
        assert_int_equal(mi.cert_status, GOSSIP_CERT_OK);
        sim_destroy(s);
}

/* Expiry by the clock: 3 (certificate only) and 1 (peers file at 0, a
 * certificate at the others) hold certificates that end 290 s before
 * T0, still within the 300 s skew at the join. */
static void test_expiry_by_clock(void **state)
{
        const size_t n = 5, EXP = 3;
        struct gossip_barred_info bi[4];
        struct gossip_stats st;
        struct sim *s;

        (void)state;
        memset(not_after, 0, sizeof(not_after));
        memset(not_before, 0, sizeof(not_before));
        not_before[EXP] = not_before[1] = T0 - 1000;
        not_after[EXP] = not_after[1] = T0 - 290;
        s = start(n, gn_test_seed(__func__, 3304), T0);
        /* Expired when T0 + floor(t / 1000) - 300 > T0 - 290, i.e. from
         * t = 11000 ms; judged again within SWIM_JUDGE_MS (1000) of it.
         * Not yet at 10999 ms. */
        sim_run_until(s, 10999);
        assert_true(all_together(s, NULL));
        sim_run_until(s, 12000);
        for (size_t i = 0; i < n; i++) {
                gossip_stats_get(sim_node(s, i), &st);
                if (i != EXP) {
                        assert_int_equal(sim_state(s, i, EXP), -1);
                        assert_true(st.certs.n[GOSSIP_CERT_EXPIRED] >= 1);
                }
                if (i >= LISTED && i != EXP)
                        assert_int_equal(sim_state(s, i, 1), -1);
        }
        assert_true(live(sim_state(s, 0, 1))); /* peers file */
        assert_int_equal(gossip_barred(sim_node(s, 0), bi, 4), 1);
        assert_int_equal(bi[0].verdict, GOSSIP_CERT_EXPIRED);
        assert_int_equal(bi[0].not_after, T0 - 290);
        /* an expired key's frames are simply unknown again */
        assert_int_equal(inject(s, EXP, 0, 0), GOSSIP_EUNKNOWNKEY);
        assert_int_equal(gossip_barred(sim_node(s, 0), bi, 4), 1);
        assert_true(bi[0].rejects >= 1);
        memset(not_after, 0, sizeof(not_after));
        memset(not_before, 0, sizeof(not_before));
        sim_destroy(s);
}

/* Without a clock (env->unix_now absent) an ancient certificate is
 * trusted until a list's date says it has run out: a list that revokes
 * nothing, issued after not_after + skew, drops it everywhere at once. */
static void test_expiry_by_list_date(void **state)
{
        static uint8_t crl[GOSSIP_CRL_MAX_BYTES];
        const size_t n = 4, OLD = 3;
        struct dropped_arg arg = {OLD, 1};
        struct sim *s;
        uint64_t t;
        int cl;

        (void)state;
        memset(not_after, 0, sizeof(not_after));
        memset(not_before, 0, sizeof(not_before));
        not_before[OLD] = 1000;
        not_after[OLD] = 2000;
        s = start(n, gn_test_seed(__func__, 3305), 0);
        assert_true(all_together(s, NULL));
        cl = make_crl(1, 2000 + 300, NULL, 0, crl);
        assert_int_equal(set_crl(s, 0, crl, cl), GOSSIP_CRL_OK);
        sim_run_until(s, sim_now(s) + 1500); /* at the skew's edge: kept */
        assert_true(all_together(s, NULL));
        cl = make_crl(2, 2000 + 301, NULL, 0, crl);
        t = sim_now(s);
        assert_int_equal(set_crl(s, 1, crl, cl), GOSSIP_CRL_OK);
        arg.seq = 2;
        assert_true(
            sim_run_until_pred(s, t + DELAY_MS + 1, 1, all_dropped, &arg));
        memset(not_after, 0, sizeof(not_after));
        memset(not_before, 0, sizeof(not_before));
        sim_destroy(s);
}

int main(int argc, char **argv)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_wire_key_22),
            cmocka_unit_test(test_revocation_spreads),
            cmocka_unit_test(test_older_and_conflicting),
            cmocka_unit_test(test_peers_file_never_dropped),
            cmocka_unit_test(test_expiry_by_clock),
            cmocka_unit_test(test_expiry_by_list_date),
        };

        (void)argc;
        (void)argv;
        if (sodium_init() < 0)
                return 1;
        return cmocka_run_group_tests(tests, NULL, NULL);
}
