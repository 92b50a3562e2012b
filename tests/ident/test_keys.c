/*
 * test_keys.c - the Ed25519 key file: round trip, 0600 on create, no silent
 * overwrite, refusal of group/other-accessible files, wrong tags, truncated
 * and corrupted files, and public-key base64.
 *
 * Keys are derived from GN_SEED (printed) so a failure can be replayed;
 * files live in a fresh mkdtemp() directory removed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "test_tmpdir.h"
#include "test_seed.h"
#include "ident/keys.h"

static uint64_t g_seed;
static char g_dir[64];

/* A deterministic key pair number i from the run's seed. */
static void seeded_pair(unsigned i, uint8_t pk[32], uint8_t sk[64])
{
        uint8_t seed[32] = {0};

        memcpy(seed, &g_seed, sizeof(g_seed));
        memcpy(seed + 8, &i, sizeof(i));
        crypto_generichash(seed, sizeof(seed), seed, sizeof(seed), NULL, 0);
        crypto_sign_seed_keypair(pk, sk, seed);
}

static void path_of(char *buf, size_t len, const char *name)
{
        snprintf(buf, len, "%s/%s", g_dir, name);
}

static void write_file(const char *path, const char *text, size_t len,
                       mode_t mode)
{
        int fd;

        unlink(path);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, len), (ssize_t)len);
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
}

static size_t read_file(const char *path, char *buf, size_t cap)
{
        FILE *f = fopen(path, "rb");
        size_t n;

        assert_non_null(f);
        n = fread(buf, 1, cap - 1, f);
        buf[n] = '\0';
        fclose(f);
        return n;
}

static void test_round_trip(void **state)
{
        uint8_t pk[32], sk[64], pk2[32], sk2[64];
        char path[256], err[256] = "";

        seeded_pair(1, pk, sk);
        path_of(path, sizeof(path), "rt.key");
        unlink(path);
        assert_int_equal(node_key_save(path, sk, 0, err, sizeof(err)), 0);
        assert_int_equal(node_key_load(path, pk2, sk2, err, sizeof(err)), 0);
        assert_memory_equal(pk, pk2, 32);
        assert_memory_equal(sk, sk2, 64);
        unlink(path);

        /* generate gives a usable pair whose public half is sk[32..64) */
        assert_int_equal(node_key_generate(pk, sk), 0);
        assert_memory_equal(pk, sk + 32, 32);
        assert_int_equal(node_key_save(path, sk, 0, err, sizeof(err)), 0);
        assert_int_equal(node_key_load(path, pk2, sk2, err, sizeof(err)), 0);
        assert_memory_equal(pk, pk2, 32);
        unlink(path);
}

static void test_format_on_disk(void **state)
{
        uint8_t pk[32], sk[64];
        char path[256], err[256], text[1024], id[NODE_KEY_ID_SIZE];
        char b64[89], want[256];

        seeded_pair(2, pk, sk);
        path_of(path, sizeof(path), "fmt.key");
        unlink(path);
        assert_int_equal(node_key_save(path, sk, 0, err, sizeof(err)), 0);
        read_file(path, text, sizeof(text));
        node_key_id(pk, id);
        assert_int_equal(strlen(id), 16);
        sodium_bin2base64(b64, sizeof(b64), sk, 64,
                          sodium_base64_VARIANT_ORIGINAL);
        snprintf(want, sizeof(want), "\n%s %s %s\n", NODE_KEY_TAG_SECRET, id,
                 b64);
        assert_non_null(strstr(text, want));
        assert_int_equal(text[0], '#');
        unlink(path);
}

static void test_mode_0600_despite_umask(void **state)
{
        uint8_t pk[32], sk[64];
        char path[256], err[256];
        struct stat st;
        mode_t old = umask(0);

        seeded_pair(3, pk, sk);
        path_of(path, sizeof(path), "mode.key");
        unlink(path);
        assert_int_equal(node_key_save(path, sk, 0, err, sizeof(err)), 0);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        /* a forced replacement is 0600 too */
        assert_int_equal(node_key_save(path, sk, 1, err, sizeof(err)), 0);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        umask(old);
        unlink(path);
}

static void test_refuse_overwrite(void **state)
{
        uint8_t pk1[32], sk1[64], pk2[32], sk2[64], pk[32], sk[64];
        char path[256], err[256] = "";

        seeded_pair(4, pk1, sk1);
        seeded_pair(5, pk2, sk2);
        path_of(path, sizeof(path), "ow.key");
        unlink(path);
        assert_int_equal(node_key_save(path, sk1, 0, err, sizeof(err)), 0);
        assert_int_equal(node_key_save(path, sk2, 0, err, sizeof(err)),
                         -EEXIST);
        assert_non_null(strstr(err, path));
        assert_non_null(strstr(err, "--force"));
        assert_int_equal(node_key_load(path, pk, sk, err, sizeof(err)), 0);
        assert_memory_equal(pk, pk1, 32); /* untouched */
        assert_int_equal(node_key_save(path, sk2, 1, err, sizeof(err)), 0);
        assert_int_equal(node_key_load(path, pk, sk, err, sizeof(err)), 0);
        assert_memory_equal(pk, pk2, 32);
        unlink(path);
}

static void test_refuse_open_modes(void **state)
{
        static const mode_t modes[] = {0640, 0604, 0644, 0660, 0602, 0610};
        uint8_t pk[32], sk[64], opk[32], osk[64];
        char path[256], err[256], want[32];

        seeded_pair(6, pk, sk);
        path_of(path, sizeof(path), "open.key");
        unlink(path);
        assert_int_equal(node_key_save(path, sk, 0, err, sizeof(err)), 0);
        for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
                assert_int_equal(chmod(path, modes[i]), 0);
                memset(opk, 0xAA, 32);
                memset(osk, 0xAA, 64);
                assert_int_equal(
                    node_key_load(path, opk, osk, err, sizeof(err)), -EACCES);
                snprintf(want, sizeof(want), "%04o", (unsigned)modes[i]);
                assert_non_null(strstr(err, want));
                assert_non_null(strstr(err, path));
                assert_null(strchr(err, '\n'));
                /* nothing leaks into the outputs on refusal */
                for (int j = 0; j < 64; j++)
                        assert_int_equal(osk[j], 0);
                for (int j = 0; j < 32; j++)
                        assert_int_equal(opk[j], 0);
        }
        assert_int_equal(chmod(path, 0400), 0);
        assert_int_equal(node_key_load(path, opk, osk, err, sizeof(err)), 0);
        assert_memory_equal(opk, pk, 32);
        unlink(path);
}

static void test_wrong_tag(void **state)
{
        uint8_t pk[32], sk[64], opk[32], osk[64];
        char path[256], err[256], text[1024], *p;
        size_t n;

        seeded_pair(7, pk, sk);
        path_of(path, sizeof(path), "tag.key");
        unlink(path);
        assert_int_equal(node_key_save(path, sk, 0, err, sizeof(err)), 0);
        n = read_file(path, text, sizeof(text));
        p = strstr(text, "-v1 ");
        assert_non_null(p);
        p[2] = '2';
        write_file(path, text, n, 0600);
        assert_int_equal(node_key_load(path, opk, osk, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, "unknown key type"));
        assert_non_null(strstr(err, "secret-v2"));

        /* a public-key line or an ssh key is not a secret key file */
        write_file(path, "ssh-ed25519 AAAA x\n", 19, 0600);
        assert_int_equal(node_key_load(path, opk, osk, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, "unknown key type"));
        write_file(path, "# only a comment\n\n", 18, 0600);
        assert_int_equal(node_key_load(path, opk, osk, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, "no key line"));
        unlink(path);
}

static void test_truncated_every_length(void **state)
{
        uint8_t pk[32], sk[64], opk[32], osk[64];
        char path[256], err[256], text[1024];
        size_t n, cut, refused = 0;

        seeded_pair(8, pk, sk);
        path_of(path, sizeof(path), "trunc.key");
        unlink(path);
        assert_int_equal(node_key_save(path, sk, 0, err, sizeof(err)), 0);
        n = read_file(path, text, sizeof(text));
        /* every strict prefix that cuts into the key line is refused; only
         * dropping the final newline keeps a valid file */
        for (cut = 0; cut < n - 1; cut++) {
                write_file(path, text, cut, 0600);
                int rc = node_key_load(path, opk, osk, err, sizeof(err));
                assert_int_equal(rc, -EINVAL);
                assert_non_null(strstr(err, path));
                refused++;
        }
        assert_int_equal(refused, n - 1);
        write_file(path, text, n - 1, 0600);
        assert_int_equal(node_key_load(path, opk, osk, err, sizeof(err)), 0);
        assert_memory_equal(opk, pk, 32);

        /* cut 4 base64 chars (3 bytes) off the key: a length complaint */
        char *nl = strrchr(text, '\n');
        memmove(nl - 4, nl, 2);
        write_file(path, text, n - 4, 0600);
        assert_int_equal(node_key_load(path, opk, osk, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, "bad secret key"));
        unlink(path);
}

static void test_corrupted(void **state)
{
        uint8_t pk[32], sk[64], other_pk[32], other_sk[64], opk[32], osk[64];
        char path[256], err[256], text[1024], b64[89], id[NODE_KEY_ID_SIZE];
        int n;

        seeded_pair(9, pk, sk);
        seeded_pair(10, other_pk, other_sk);
        path_of(path, sizeof(path), "bad.key");
        node_key_id(pk, id);

        /* public half swapped for another key's */
        memcpy(sk + 32, other_pk, 32);
        sodium_bin2base64(b64, sizeof(b64), sk, 64,
                          sodium_base64_VARIANT_ORIGINAL);
        n = snprintf(text, sizeof(text), "%s %s %s\n", NODE_KEY_TAG_SECRET, id,
                     b64);
        write_file(path, text, (size_t)n, 0600);
        assert_int_equal(node_key_load(path, opk, osk, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, "does not match"));

        /* right key, wrong key id */
        seeded_pair(9, pk, sk);
        sodium_bin2base64(b64, sizeof(b64), sk, 64,
                          sodium_base64_VARIANT_ORIGINAL);
        n = snprintf(text, sizeof(text), "%s 0000000000000000 %s\n",
                     NODE_KEY_TAG_SECRET, b64);
        write_file(path, text, (size_t)n, 0600);
        assert_int_equal(node_key_load(path, opk, osk, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, "key id"));

        /* a character outside the base64 alphabet */
        b64[10] = '!';
        n = snprintf(text, sizeof(text), "%s %s %s\n", NODE_KEY_TAG_SECRET, id,
                     b64);
        write_file(path, text, (size_t)n, 0600);
        assert_int_equal(node_key_load(path, opk, osk, err, sizeof(err)),
                         -EINVAL);
        assert_non_null(strstr(err, "bad secret key"));

        /* trailing junk field */
        b64[10] = 'A';
        n = snprintf(text, sizeof(text), "%s %s %s extra\n",
                     NODE_KEY_TAG_SECRET, id, b64);
        write_file(path, text, (size_t)n, 0600);
        assert_int_equal(node_key_load(path, opk, osk, err, sizeof(err)),
                         -EINVAL);
        unlink(path);

        /* missing file */
        assert_int_equal(node_key_load(path, opk, osk, err, sizeof(err)),
                         -ENOENT);
        assert_non_null(strstr(err, path));
}

static void test_pk_base64(void **state)
{
        uint8_t pk[32], sk[64], back[32];
        char b64[NODE_KEY_PK_B64_SIZE], bad[64];

        seeded_pair(11, pk, sk);
        node_key_pk_to_base64(pk, b64);
        assert_int_equal(strlen(b64), 44);
        assert_int_equal(b64[43], '=');
        assert_int_equal(node_key_pk_from_base64(b64, 44, back), 0);
        assert_memory_equal(back, pk, 32);
        assert_int_equal(node_key_pk_from_base64(b64, 43, back), -EINVAL);
        /* 32 zero bytes: base64 fine, not an Ed25519 point */
        assert_int_equal(
            node_key_pk_from_base64(
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", 44, back),
            -EDOM);
        memcpy(bad, b64, 44);
        bad[5] = '*';
        assert_int_equal(node_key_pk_from_base64(bad, 44, back), -EINVAL);
        memcpy(bad, b64, 44);
        bad[44] = 'A';
        assert_int_equal(node_key_pk_from_base64(bad, 45, back), -EINVAL);
        /* url-safe alphabet is a different format */
        memcpy(bad, b64, 44);
        for (int i = 0; i < 44; i++)
                if (bad[i] == '+' || bad[i] == '/')
                        bad[i] = bad[i] == '+' ? '-' : '_';
        if (memcmp(bad, b64, 44) != 0)
                assert_int_equal(node_key_pk_from_base64(bad, 44, back),
                                 -EINVAL);
}

static int setup(void **state)
{
        return gn_test_tmpdir(g_dir, sizeof(g_dir), "keys");
}

static int teardown(void **state)
{
        return rmdir(g_dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_round_trip),
            cmocka_unit_test(test_format_on_disk),
            cmocka_unit_test(test_mode_0600_despite_umask),
            cmocka_unit_test(test_refuse_overwrite),
            cmocka_unit_test(test_refuse_open_modes),
            cmocka_unit_test(test_wrong_tag),
            cmocka_unit_test(test_truncated_every_length),
            cmocka_unit_test(test_corrupted),
            cmocka_unit_test(test_pk_base64),
        };

        if (node_key_init() < 0)
                return 1;
        g_seed = gn_test_seed("test_keys", 0x6b657973ULL);
        return cmocka_run_group_tests(tests, setup, teardown);
}
