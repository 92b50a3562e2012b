/*
 * test_certjoin.c - joining with a certificate (issue 33 item 1, the
 * protocol part): wire keys 20 (the sender's certificate) and 21 (its
 * members'), then real nodes on the simulated network (tests/sim) in
 * virtual time. Two nodes that trust each other by peers file, and a
 * third that has only the authority's key, its certificate and the first
 * node's address: it is alive on both and both on it within a probe
 * period. Nodes whose certificate names another authority, is expired,
 * or carries a forged signature are refused by every member and counted
 * under their verdict.
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
#include "test_seed.h"

/* The sim's wall clock at virtual time 0 (unix seconds, 2030). */
#define T0 1900000000ULL

static uint8_t ca_pk[GOSSIP_KEY_BYTES], ca_sk[GOSSIP_SECRET_BYTES];

static void make_authority(uint64_t seed)
{
        uint8_t ks[crypto_sign_SEEDBYTES] = {0};

        memcpy(ks, &seed, sizeof(seed));
        ks[31] = 0xca;
        crypto_sign_seed_keypair(ca_pk, ca_sk, ks);
}

/* A certificate for pk, valid around T0 (or expired an hour before). */
static int make_cert(const uint8_t *pk, const uint8_t *signer_sk,
                     uint64_t serial, int expired, uint8_t *buf)
{
        struct gossip_cert c;

        memset(&c, 0, sizeof(c));
        memcpy(c.pk, pk, GOSSIP_KEY_BYTES);
        c.serial = serial;
        c.not_before = T0 - (expired ? 7200 : 10);
        c.not_after = expired ? T0 - 3600 : T0 + 86400;
        snprintf(c.name, sizeof(c.name), "dev%llu", (unsigned long long)serial);
        return gossip_cert_sign(&c, signer_sk, buf, GOSSIP_CERT_MAX_BYTES);
}

/* ---- the wire ---------------------------------------------------------- */

static void test_wire_keys_20_21(void **state)
{
        uint8_t pk[GOSSIP_KEY_BYTES], sk[GOSSIP_SECRET_BYTES];
        uint8_t other[GOSSIP_KEY_BYTES], osk[GOSSIP_SECRET_BYTES];
        uint8_t cert[GOSSIP_CERT_MAX_BYTES], c2[GOSSIP_CERT_MAX_BYTES];
        uint8_t buf[4096];
        struct gossip_blob certs[2], got[4];
        struct gossip_msg m = {0}, d = {0};
        struct gossip_keyring *kr = gossip_keyring_new();
        const uint8_t *p;
        size_t len, n;
        int cl, c2l;

        (void)state;
        make_authority(7);
        crypto_sign_keypair(pk, sk);
        crypto_sign_keypair(other, osk);
        cl = make_cert(pk, ca_sk, 1, 0, cert);
        c2l = make_cert(other, ca_sk, 2, 0, c2);
        assert_true(cl > 0 && c2l > 0);
        certs[0] = (struct gossip_blob){cert, (size_t)cl};
        certs[1] = (struct gossip_blob){c2, (size_t)c2l};
        m.kind = GOSSIP_MSG_SYNC;
        m.channel = GOSSIP_CH_STREAM;
        m.seq = 1;
        m.cert = cert;
        m.cert_len = (size_t)cl;
        m.certs = certs;
        m.n_certs = 2;
        assert_int_equal(
            gossip_wire_encode(&m, sk, buf, sizeof(buf), &len, NULL), 0);
        /* unknown key: refused by the keyring check, but its certificate
         * can be read and its signer checked with the certificate's key */
        assert_int_equal(
            gossip_wire_authenticate(buf, len, GOSSIP_CH_STREAM, NULL, kr),
            GOSSIP_EUNKNOWNKEY);
        assert_int_equal(
            gossip_wire_peek_cert(buf, len, GOSSIP_CH_STREAM, NULL, &p, &n), 0);
        assert_int_equal(n, (size_t)cl);
        assert_memory_equal(p, cert, n);
        assert_int_equal(
            gossip_wire_authenticate_pk(buf, len, GOSSIP_CH_STREAM, NULL, pk),
            0);
        assert_int_equal(gossip_wire_authenticate_pk(buf, len, GOSSIP_CH_STREAM,
                                                     NULL, other),
                         GOSSIP_EUNKNOWNKEY);
        /* one flipped body byte: the signature no longer holds */
        buf[GOSSIP_WIRE_PREFIX_BYTES + 3] ^= 1;
        assert_int_not_equal(
            gossip_wire_authenticate_pk(buf, len, GOSSIP_CH_STREAM, NULL, pk),
            0);
        buf[GOSSIP_WIRE_PREFIX_BYTES + 3] ^= 1;
        /* trusted: decoded, both keys back */
        assert_int_equal(gossip_keyring_add(kr, pk, NULL), 0);
        d.certs = got;
        d.certs_cap = 4;
        assert_int_equal(gossip_wire_decode(buf, len, GOSSIP_CH_STREAM, NULL,
                                            kr, NULL, &d, NULL),
                         0);
        assert_int_equal(d.cert_len, (size_t)cl);
        assert_memory_equal(d.cert, cert, d.cert_len);
        assert_int_equal(d.n_certs, 2);
        assert_int_equal(got[1].len, (size_t)c2l);
        assert_memory_equal(got[1].p, c2, got[1].len);
        /* a JOIN carries no key 21; a PING no certificate to peek at */
        m.kind = GOSSIP_MSG_JOIN;
        assert_int_equal(
            gossip_wire_encode(&m, sk, buf, sizeof(buf), &len, NULL),
            GOSSIP_EINVAL);
        m.kind = GOSSIP_MSG_PING;
        m.channel = GOSSIP_CH_DGRAM;
        m.cert_len = 0;
        m.n_certs = 0;
        assert_int_equal(
            gossip_wire_encode(&m, sk, buf, sizeof(buf), &len, NULL), 0);
        assert_int_equal(
            gossip_wire_peek_cert(buf, len, GOSSIP_CH_DGRAM, NULL, &p, &n),
            GOSSIP_ENOPEER);
        gossip_keyring_free(kr);
}

/* ---- on the simulated network ---------------------------------------- */

/* 0, 1: peers file (each other) and a certificate; 2: certificate only;
 * 3: certificate signed by itself (another authority); 4: expired;
 * 5: our authority's id, forged signature. */
enum {
        N = 6,
        LISTED = 2,
        JOINER = 2,
        SELF_SIGNED = 3,
        EXPIRED = 4,
        FORGED = 5
};

static uint8_t certs[N][GOSSIP_CERT_MAX_BYTES];
static size_t cert_lens[N];

static void configure(struct sim *s, size_t i, struct gossip_config *cfg)
{
        int n;

        (void)s;
        cfg->n_peers = i < LISTED ? LISTED : 0;
        cfg->authority_pk = ca_pk;
        n = make_cert(cfg->public_key,
                      i == SELF_SIGNED ? cfg->secret_key : ca_sk, 100 + i,
                      i == EXPIRED, certs[i]);
        assert_true(n > 0);
        if (i == FORGED)
                certs[i][n - 1] ^= 0x40; /* the signature's last byte */
        cert_lens[i] = (size_t)n;
        cfg->cert = certs[i];
        cfg->cert_len = cert_lens[i];
}

static int live(int st)
{
        return st == GOSSIP_ALIVE || st == GOSSIP_SUSPECT;
}

static bool pair_together(struct sim *s, void *arg)
{
        (void)arg;
        return live(sim_state(s, 0, 1)) && live(sim_state(s, 1, 0));
}

static bool three_together(struct sim *s, void *arg)
{
        (void)arg;
        for (size_t i = 0; i <= JOINER; i++)
                for (size_t j = 0; j <= JOINER; j++)
                        if (i != j && !live(sim_state(s, i, j)))
                                return false;
        return true;
}

static void test_joins_with_certificate(void **state)
{
        struct sim_opts o = {0};
        struct sim *s = NULL;
        struct gossip_member_info mi;
        struct gossip_stats st;
        uint64_t t;

        (void)state;
        o.n = N;
        o.seed = gn_test_seed(__func__, 3311);
        make_authority(o.seed);
        o.delay_ms = 2;
        o.jitter_ms = 3;
        o.configure = configure;
        o.unix_start_s = T0;
        assert_int_equal(sim_create(&o, &s), 0);

        assert_int_equal(sim_join(s, 1, 0), 0);
        assert_true(sim_run_until_pred(s, 5000, 10, pair_together, NULL));
        /* not yet: nobody knows the joiner, whose key no file lists */
        sim_run_until(s, sim_now(s) + 2000);
        assert_int_equal(sim_state(s, 0, JOINER), -1);
        assert_int_equal(sim_state(s, 1, JOINER), -1);

        /* Bound: JOIN to 0 (<= 5 ms), 0 trusts it on its certificate and
         * answers with its SYNC carrying 1's certificate (<= 5 ms), the
         * joiner trusts both and greets 1 (<= 5 ms): a few link delays,
         * well inside one probe period (1000 ms). */
        t = sim_now(s);
        assert_int_equal(sim_join(s, JOINER, 0), 0);
        assert_true(sim_run_until_pred(s, t + 1000, 5, three_together, NULL));
        printf("# joined with a certificate in %llu ms\n",
               (unsigned long long)(sim_now(s) - t));

        /* each member holds the joiner's certificate */
        for (size_t i = 0; i < LISTED; i++) {
                assert_int_equal(
                    gossip_member_get(sim_node(s, i), sim_key(s, JOINER), &mi),
                    0);
                assert_int_equal(mi.cert_serial, 100 + JOINER);
                assert_int_equal(mi.cert_not_after, T0 + 86400);
        }
        /* and names it as the certificate does ("dev102"), not as its
         * updates do (its configured "n2"), after seconds of them */
        sim_run_until(s, sim_now(s) + 3000);
        for (size_t i = 0; i < LISTED; i++) {
                assert_int_equal(
                    gossip_member_get(sim_node(s, i), sim_key(s, JOINER), &mi),
                    0);
                assert_string_equal(mi.name, "dev102");
        }

        /* the refused ones: through 0 and through 1, then 5 s of life */
        for (size_t k = SELF_SIGNED; k < N; k++)
                assert_int_equal(sim_join(s, k, k % 2), 0);
        sim_run_until(s, sim_now(s) + 5000);
        for (size_t i = 0; i <= JOINER; i++)
                for (size_t k = SELF_SIGNED; k < N; k++)
                        assert_int_equal(sim_state(s, i, k), -1);
        /* each refused at the member it asked (3, 5 through 1; 4
         * through 0), counted there under its verdict */
        gossip_stats_get(sim_node(s, 1), &st);
        assert_true(st.certs.n[GOSSIP_CERT_WRONG_AUTHORITY] >= 1);
        assert_true(st.certs.n[GOSSIP_CERT_BAD_SIGNATURE] >= 1);
        assert_true(st.rejects[-GOSSIP_EUNKNOWNKEY] >= 2);
        gossip_stats_get(sim_node(s, 0), &st);
        assert_true(st.certs.n[GOSSIP_CERT_EXPIRED] >= 1);
        assert_int_equal(st.certs.n[GOSSIP_CERT_WRONG_AUTHORITY], 0);
        /* 0 trusted the joiner on its own certificate */
        assert_true(st.certs.n[GOSSIP_CERT_OK] >= 1);
        sim_destroy(s);
}

/* Without the authority's key a certificate is worth nothing: the joiner
 * is refused as any unknown key is. */
static void configure_no_authority(struct sim *s, size_t i,
                                   struct gossip_config *cfg)
{
        configure(s, i, cfg);
        if (i < LISTED)
                cfg->authority_pk = NULL;
}

static void test_no_authority_no_admission(void **state)
{
        struct sim_opts o = {0};
        struct sim *s = NULL;
        struct gossip_stats st;

        (void)state;
        o.n = N;
        o.seed = gn_test_seed(__func__, 3312);
        make_authority(o.seed);
        o.delay_ms = 2;
        o.configure = configure_no_authority;
        o.unix_start_s = T0;
        assert_int_equal(sim_create(&o, &s), 0);
        assert_int_equal(sim_join(s, 1, 0), 0);
        assert_int_equal(sim_join(s, JOINER, 0), 0);
        sim_run_until(s, 5000);
        assert_true(live(sim_state(s, 0, 1)));
        assert_int_equal(sim_state(s, 0, JOINER), -1);
        gossip_stats_get(sim_node(s, 0), &st);
        assert_int_equal(st.certs.n[GOSSIP_CERT_OK], 0);
        assert_true(st.rejects[-GOSSIP_EUNKNOWNKEY] >= 1);
        sim_destroy(s);
}

int main(int argc, char **argv)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_wire_keys_20_21),
            cmocka_unit_test(test_joins_with_certificate),
            cmocka_unit_test(test_no_authority_no_admission),
        };

        (void)argc;
        (void)argv;
        if (sodium_init() < 0)
                return 1;
        return cmocka_run_group_tests(tests, NULL, NULL);
}
