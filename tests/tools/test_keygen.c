/*
 * test_keygen.c - gossip-keygen as a user runs it: the key file is 0600 and
 * loads, the printed line is a valid peers-file line for the same key, an
 * existing key is never overwritten without --force, --show reprints the
 * line, and bad --addr/--name values are refused before anything is
 * written. The cluster authority end to end: --ca, --sign (checked with
 * gossip/cert.h), --show-cert, --revoke twice and once more for a serial
 * already listed, --show-crl, and bad input refused with nothing written
 * (a forged or foreign list left as it is). The binary's path is argv[1].
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_proc.h"
#include "test_tmpdir.h"
#include "gossip/cert.h"
#include "ident/keys.h"
#include "ident/peers.h"
#include "gossip/wire.h"

static const char *g_bin;
static char g_dir[64];

/* Run gossip-keygen with a NULL-terminated argument list. */
static void keygen(struct gn_test_proc *r, ...)
{
        const char *argv[24] = {g_bin};
        int argc = 1;
        va_list ap;

        va_start(ap, r);
        while (argc < 23 && (argv[argc] = va_arg(ap, const char *)) != NULL)
                argc++;
        va_end(ap);
        argv[argc] = NULL;
        assert_int_equal(gn_test_proc_run(argv, r), 0);
}

static void test_generate_and_show(void **state)
{
        char key[200], pub[256], err[256], b64[NODE_KEY_PK_B64_SIZE];
        uint8_t pk[32], sk[64];
        struct node_peer *v;
        struct stat st;
        struct gn_test_proc r, r2;
        size_t n;

        snprintf(key, sizeof(key), "%s/a.key", g_dir);
        snprintf(pub, sizeof(pub), "%s.pub", key);
        keygen(&r, "--out", key, "--addr", "10.0.0.11:7946", "--name",
               "pi-kitchen", NULL);
        assert_int_equal(r.status, 0);
        assert_int_equal(stat(key, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(node_key_load(key, pk, sk, err, sizeof(err)), 0);

        /* stdout is exactly one peers-file line for this key */
        assert_int_equal(node_peers_parse(r.out, strlen(r.out), "stdout", &v,
                                          &n, err, sizeof(err)),
                         0);
        assert_int_equal(n, 1);
        assert_memory_equal(v[0].pk, pk, 32);
        assert_string_equal(v[0].name, "pi-kitchen");
        assert_string_equal(v[0].addr_str, "10.0.0.11:7946");
        node_peers_free(v);
        node_key_pk_to_base64(pk, b64);
        assert_non_null(strstr(r.out, b64));
        assert_non_null(strstr(r.err, "key id"));

        /* the .pub file holds the same line */
        assert_int_equal(stat(pub, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        FILE *f = fopen(pub, "r");
        char text[512];
        size_t got = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[got] = '\0';
        assert_non_null(strstr(text, r.out));

        keygen(&r2, "--show", key, "--addr", "10.0.0.11:7946", "--name",
               "pi-kitchen", NULL);
        assert_int_equal(r2.status, 0);
        assert_string_equal(r2.out, r.out);
        unlink(pub);
        unlink(key);
}

static void test_no_overwrite(void **state)
{
        char key[200], pub[256], err[256];
        uint8_t pk1[32], pk2[32], sk[64];
        struct gn_test_proc r;

        snprintf(key, sizeof(key), "%s/b.key", g_dir);
        snprintf(pub, sizeof(pub), "%s.pub", key);
        keygen(&r, "--out", key, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "ADDR:PORT"));
        assert_int_equal(node_key_load(key, pk1, sk, err, sizeof(err)), 0);

        keygen(&r, "--out", key, NULL);
        assert_int_equal(r.status, 1);
        assert_string_equal(r.out, "");
        assert_non_null(strstr(r.err, "already exists"));
        assert_int_equal(node_key_load(key, pk2, sk, err, sizeof(err)), 0);
        assert_memory_equal(pk1, pk2, 32);

        keygen(&r, "--out", key, "--force", NULL);
        assert_int_equal(r.status, 0);
        assert_int_equal(node_key_load(key, pk2, sk, err, sizeof(err)), 0);
        assert_memory_not_equal(pk1, pk2, 32);
        unlink(pub);
        unlink(key);
}

static void test_bad_arguments(void **state)
{
        char key[256];
        struct gn_test_proc r;
        struct stat st;

        snprintf(key, sizeof(key), "%s/c.key", g_dir);
        keygen(&r, "--out", key, "--addr", "10.0.0.1", NULL);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "bad --addr"));
        keygen(&r, "--out", key, "--addr", "10.0.0.1:70000", NULL);
        assert_int_equal(r.status, 2);
        keygen(&r, "--out", key, "--name", "a b", NULL);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "bad --name"));
        keygen(&r, NULL);
        assert_int_equal(r.status, 2);
        assert_int_equal(stat(key, &st), -1); /* nothing written */

        /* host names are accepted without being resolved */
        keygen(&r, "--out", key, "--addr", "pi-kitchen.lan:7946", NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "pi-kitchen.lan:7946 "));
        unlink(key);
        snprintf(key + strlen(key), 8, ".pub");
        unlink(key);

        /* --show refuses a key others can read */
        snprintf(key, sizeof(key), "%s/d.key", g_dir);
        keygen(&r, "--out", key, NULL);
        assert_int_equal(r.status, 0);
        chmod(key, 0644);
        keygen(&r, "--show", key, NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "too open"));
        unlink(key);
        snprintf(key + strlen(key), 8, ".pub");
        unlink(key);
}

/* The bytes of path into buf; returns how many (cap: not read whole). */
static size_t slurp(const char *path, uint8_t *buf, size_t cap)
{
        FILE *f = fopen(path, "rb");
        size_t n;

        assert_non_null(f);
        n = fread(buf, 1, cap, f);
        fclose(f);
        assert_true(n < cap);
        return n;
}

static void spit(const char *path, const uint8_t *buf, size_t n)
{
        FILE *f = fopen(path, "wb");

        assert_non_null(f);
        assert_int_equal(fwrite(buf, 1, n, f), n);
        fclose(f);
}

static void path_in(char *out, size_t len, const char *name)
{
        snprintf(out, len, "%s/%s", g_dir, name);
}

static void test_authority(void **state)
{
        char ca[200], capub[200], crl[200], dev[200], devpub[210], cert[200];
        char cert2[200], err[256], b64[NODE_KEY_PK_B64_SIZE];
        uint8_t ca_pk[32], dev_pk[32], sk[64], b[GOSSIP_CRL_MAX_BYTES];
        uint8_t b2[GOSSIP_CRL_MAX_BYTES];
        struct gossip_cert c;
        struct gossip_crl l;
        struct gossip_cert_stats stats = {{0}};
        struct gn_test_proc r;
        struct stat st;
        size_t n, n2;
        uint64_t now = (uint64_t)time(NULL);

        (void)state;
        path_in(ca, sizeof(ca), "ca.key");
        path_in(capub, sizeof(capub), "ca.pub");
        path_in(crl, sizeof(crl), "ca.crl");
        path_in(dev, sizeof(dev), "dev.key");
        snprintf(devpub, sizeof(devpub), "%s.pub", dev);
        path_in(cert, sizeof(cert), "dev.cert");
        path_in(cert2, sizeof(cert2), "dev2.cert");

        /* the authority: secret key 0600, public key beside it */
        keygen(&r, "--ca", "--out", ca, NULL);
        assert_int_equal(r.status, 0);
        assert_int_equal(stat(ca, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(stat(capub, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        assert_int_equal(node_key_load(ca, ca_pk, sk, err, sizeof(err)), 0);
        node_key_pk_to_base64(ca_pk, b64);
        assert_int_equal(strncmp(r.out, b64, strlen(b64)), 0);
        keygen(&r, "--ca", "--out", ca, NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "already exists"));

        /* a device certificate, checked by the library */
        keygen(&r, "--out", dev, NULL);
        assert_int_equal(r.status, 0);
        assert_int_equal(node_key_load(dev, dev_pk, sk, err, sizeof(err)), 0);
        keygen(&r, "--sign", "--ca-key", ca, "--pub", devpub, "--name", "pi-1",
               "--addr", "10.0.0.5:7946", "--days", "2", "--serial", "0xabc",
               "--out", cert, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.err, "serial 0000000000000abc for pi-1"));
        n = slurp(cert, b, sizeof(b));
        assert_int_equal(gossip_cert_verify(b, n, ca_pk, now, 1, NULL, &c),
                         GOSSIP_CERT_OK);
        assert_int_equal(c.serial, 0xabc);
        assert_string_equal(c.name, "pi-1");
        assert_memory_equal(c.pk, dev_pk, 32);
        assert_int_equal(c.addr.family, 4);
        assert_int_equal(c.addr.port, 7946);
        assert_int_equal(c.not_after - c.not_before, 2 * 86400);
        assert_true(c.not_before + 60 >= now && c.not_before <= now + 60);
        /* never overwritten without --force */
        keygen(&r, "--sign", "--ca-key", ca, "--pub", devpub, "--name", "pi-1",
               "--out", cert, NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "already exists"));
        assert_int_equal(slurp(cert, b2, sizeof(b2)), n);
        assert_memory_equal(b, b2, n);
        /* the key given as text; a random serial */
        node_key_pk_to_base64(dev_pk, b64);
        keygen(&r, "--sign", "--ca-key", ca, "--pub", b64, "--name", "pi-1",
               "--out", cert2, NULL);
        assert_int_equal(r.status, 0);
        n2 = slurp(cert2, b2, sizeof(b2));
        assert_int_equal(gossip_cert_verify(b2, n2, ca_pk, now, 1, NULL, &c),
                         GOSSIP_CERT_OK);
        assert_int_not_equal(c.serial, 0xabc);
        assert_int_equal(c.addr.family, 0);

        keygen(&r, "--show-cert", cert, "--ca-pub", capub, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "pi-1"));
        assert_non_null(strstr(r.out, "10.0.0.5:7946"));
        assert_non_null(strstr(r.out, "serial      0000000000000abc"));
        assert_non_null(strstr(r.out, "verdict     ok"));

        /* revoke: sequence 1, again refused and unchanged, then 2 */
        keygen(&r, "--revoke", "--ca-key", ca, "--serial", "abc", NULL);
        assert_int_equal(r.status, 0);
        n = slurp(crl, b, sizeof(b));
        assert_int_equal(gossip_crl_verify(b, n, ca_pk, &l), GOSSIP_CRL_OK);
        assert_int_equal(l.seq, 1);
        assert_true(gossip_crl_has(&l, 0xabc));
        keygen(&r, "--revoke", "--ca-key", ca, "--serial", "abc", NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "revoked already"));
        assert_int_equal(slurp(crl, b2, sizeof(b2)), n);
        assert_memory_equal(b, b2, n);
        keygen(&r, "--revoke", "--ca-key", ca, "--serial", "5", "--crl", crl,
               NULL);
        assert_int_equal(r.status, 0);
        n2 = slurp(crl, b2, sizeof(b2));
        assert_int_equal(gossip_crl_merge(&l, b2, n2, ca_pk, &l),
                         GOSSIP_CRL_OK);
        assert_int_equal(l.seq, 2);
        assert_int_equal(l.n_serials, 2);
        assert_true(gossip_crl_has(&l, 5) && gossip_crl_has(&l, 0xabc));
        n = slurp(cert, b, sizeof(b));
        gossip_cert_stats_count(
            &stats, gossip_cert_verify(b, n, ca_pk, now, 1, &l, NULL));
        assert_int_equal(stats.n[GOSSIP_CERT_REVOKED], 1);

        keygen(&r, "--show-cert", cert, "--ca-pub", capub, "--crl", crl, NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.out, "verdict     revoked"));
        keygen(&r, "--show-crl", crl, "--ca-pub", capub, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "sequence    2"));
        assert_non_null(strstr(r.out, "0000000000000005\n"
                                      "    0000000000000abc\n"));

        /* reissue: the next sequence, the same serials, a date never
         * earlier than the list's (here: now, or the old date if the
         * clock went back); without --ca-key it is a usage error */
        keygen(&r, "--reissue", "--ca-key", ca, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.err, "reissued"));
        {
                static uint8_t b3[GOSSIP_CRL_MAX_BYTES];
                size_t n3 = slurp(crl, b3, sizeof(b3));
                struct gossip_crl l3;
                uint64_t before = l.issued_at;

                assert_int_equal(gossip_crl_merge(&l, b3, n3, ca_pk, &l3),
                                 GOSSIP_CRL_OK);
                assert_int_equal(l3.seq, 3);
                assert_int_equal(l3.n_serials, 2);
                assert_true(gossip_crl_has(&l3, 5) &&
                            gossip_crl_has(&l3, 0xabc));
                assert_true(l3.issued_at >= before);
        }
        keygen(&r, "--reissue", NULL);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "--ca-key"));
        keygen(&r, "--show-crl", crl, "--ca-pub", capub, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "sequence    3"));

        /* bad input: refused, nothing written */
        keygen(&r, "--sign", "--ca-key", ca, "--pub", devpub, "--name", "a b",
               "--out", cert2, "--force", NULL);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "bad --name"));
        keygen(&r, "--sign", "--ca-key", ca, "--pub", devpub, "--name", "x",
               "--addr", "pi.lan:7946", "--out", cert2, "--force", NULL);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "numeric"));
        keygen(&r, "--sign", "--ca-key", ca, "--pub", ca, "--name", "x",
               "--out", cert2, "--force", NULL); /* a secret key file */
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "bad --pub"));
        keygen(&r, "--sign", "--ca-key", ca, "--pub", devpub, "--name", "x",
               "--days", "0", "--out", cert2, "--force", NULL);
        assert_int_equal(r.status, 2);
        keygen(&r, "--sign", "--pub", devpub, "--name", "x", "--out", cert2,
               NULL);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "--ca-key"));
        keygen(&r, "--revoke", "--ca-key", ca, "--serial", "0", NULL);
        assert_int_equal(r.status, 2);
        keygen(&r, "--revoke", "--ca-key", ca, "--serial", "12345678901234567",
               NULL);
        assert_int_equal(r.status, 2);
        keygen(&r, "--show-cert", crl, NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "not a certificate: bad magic"));
        /* a forged list is refused and left as it is */
        b2[n2 - 1] ^= 1;
        spit(crl, b2, n2);
        keygen(&r, "--revoke", "--ca-key", ca, "--serial", "6", NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "bad_signature"));
        assert_int_equal(slurp(crl, b, sizeof(b)), n2);
        assert_memory_equal(b, b2, n2);
        /* ... and so is another authority's */
        keygen(&r, "--revoke", "--ca-key", dev, "--serial", "6", "--crl", crl,
               NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "wrong_authority"));

        assert_int_equal(gn_test_rmtree(g_dir), 0);
        assert_int_equal(mkdir(g_dir, 0700), 0);
}

static int setup(void **state)
{
        return gn_test_tmpdir(g_dir, sizeof(g_dir), "keygen");
}

static int teardown(void **state)
{
        return rmdir(g_dir);
}

int main(int argc, char **argv)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_generate_and_show),
            cmocka_unit_test(test_no_overwrite),
            cmocka_unit_test(test_bad_arguments),
            cmocka_unit_test(test_authority),
        };

        if (argc < 2) {
                fprintf(stderr, "usage: %s PATH-TO-gossip-keygen\n", argv[0]);
                return 1;
        }
        g_bin = argv[1];
        if (node_key_init() < 0)
                return 1;
        return cmocka_run_group_tests(tests, setup, teardown);
}
