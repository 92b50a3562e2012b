/*
 * test_keygen.c - gossip-keygen as a user runs it: the key file is 0600 and
 * loads, the printed line is a valid peers-file line for the same key, an
 * existing key is never overwritten without --force, --show reprints the
 * line, and bad --addr/--name values are refused before anything is
 * written. The binary's path is argv[1].
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
#include <unistd.h>

#include <cmocka.h>

#include "test_proc.h"
#include "test_tmpdir.h"
#include "ident/keys.h"
#include "ident/peers.h"

static const char *g_bin;
static char g_dir[64];

/* Run gossip-keygen with a NULL-terminated argument list. */
static void keygen(struct gn_test_proc *r, ...)
{
        const char *argv[16] = {g_bin};
        int argc = 1;
        va_list ap;

        va_start(ap, r);
        while (argc < 15 && (argv[argc] = va_arg(ap, const char *)) != NULL)
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
