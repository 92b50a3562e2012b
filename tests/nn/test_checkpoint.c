/*
 * test_checkpoint.c - checkpoint format, decoder and atomic save
 * (nn/checkpoint.c).
 *
 * Proves: file and memory round trips are bit-exact (including -0.0,
 * subnormals, empty optimizer state and metadata); the header bytes are
 * the documented ones; every single-byte flip and every truncation of a
 * small checkpoint is refused (checksum or header), as is trailing
 * garbage, a non-finite float under a valid digest, a lying header and
 * an over-limit size; a checkpoint sealed in pieces of any size is the
 * same bytes, its digest BLAKE2b-256 of all before it (computed here
 * directly), sealed on its last piece only; a different spec or size is
 * refused as a mismatch naming the file; a failed save (missing
 * directory, file size limit hit mid-write, read-only directory when not
 * root) leaves the previous checkpoint byte-identical and no temp file
 * behind.
 *
 * Values come from GN_SEED (printed); files live in a mkdtemp() dir.
 */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "test_tmpdir.h"
#include "base/gn_rng.h"
#include "test_seed.h"
#include "base/gn_endian.h"
#include "nn/checkpoint.h"

static uint64_t g_seed;
static char g_dir[64];
static char g_err[512];

static void path_of(char *buf, size_t len, const char *name)
{
        snprintf(buf, len, "%s/%s", g_dir, name);
}

/* A checkpoint with np params, no optimizer floats and ml meta bytes;
 * the caller owns the arrays (free with own_free). */
static void own_make(struct nn_checkpoint *ck, const char *spec, uint64_t np,
                     uint64_t no, uint32_t ml, uint64_t seed)
{
        uint64_t i;

        memset(ck, 0, sizeof(*ck));
        ck->spec = strdup(spec);
        ck->step = gn_splitmix64(&seed);
        ck->epoch = gn_splitmix64(&seed) % 1000;
        ck->seed = gn_splitmix64(&seed);
        ck->n_params = np;
        ck->n_opt = no;
        ck->meta_len = ml;
        ck->params = malloc(np * sizeof(float) + 1);
        ck->opt = malloc(no * sizeof(float) + 1);
        ck->meta = ml ? malloc(ml) : NULL;
        assert_non_null(ck->spec);
        assert_non_null(ck->params);
        assert_non_null(ck->opt);
        for (i = 0; i < np; i++)
                ck->params[i] = (float)((double)(int64_t)gn_splitmix64(&seed) /
                                        9.2e18 * 3.0);
        if (np > 2) {
                ck->params[0] = -0.0f;
                ck->params[1] = 1e-40f; /* subnormal */
        }
        for (i = 0; i < no; i++)
                ck->opt[i] = (float)(gn_splitmix64(&seed) % 100000) * 1e-6f;
        for (i = 0; i < ml; i++)
                ck->meta[i] = (uint8_t)gn_splitmix64(&seed);
}

static void own_free(struct nn_checkpoint *ck)
{
        free(ck->spec);
        free(ck->params);
        free(ck->opt);
        free(ck->meta);
        memset(ck, 0, sizeof(*ck));
}

static void expect_same(const struct nn_checkpoint *a,
                        const struct nn_checkpoint *b)
{
        assert_string_equal(a->spec, b->spec);
        assert_int_equal(a->step, b->step);
        assert_int_equal(a->epoch, b->epoch);
        assert_int_equal(a->seed, b->seed);
        assert_int_equal(a->n_params, b->n_params);
        assert_int_equal(a->n_opt, b->n_opt);
        assert_int_equal(a->meta_len, b->meta_len);
        assert_memory_equal(a->params, b->params, 4 * a->n_params + 0);
        if (a->n_opt)
                assert_memory_equal(a->opt, b->opt, 4 * a->n_opt);
        if (a->meta_len)
                assert_memory_equal(a->meta, b->meta, a->meta_len);
}

/* Encodes ck into a fresh buffer. */
static uint8_t *encode(const struct nn_checkpoint *ck, size_t *len)
{
        size_t total = nn_checkpoint_encoded_size(ck);
        uint8_t *buf;

        assert_true(total > 0);
        buf = malloc(total);
        assert_non_null(buf);
        assert_int_equal(nn_checkpoint_encode(ck, buf, total, len), 0);
        assert_int_equal(*len, total);
        return buf;
}

static int decode(const uint8_t *buf, size_t len, struct nn_checkpoint *out)
{
        g_err[0] = '\0';
        memset(out, 0x5a, sizeof(*out));
        return nn_checkpoint_decode(buf, len, 0, "peer", out, g_err,
                                    sizeof(g_err));
}

static void expect_zeroed(const struct nn_checkpoint *ck)
{
        assert_null(ck->spec);
        assert_null(ck->params);
        assert_null(ck->opt);
        assert_null(ck->meta);
}

static void test_memory_roundtrip(void **state)
{
        struct nn_checkpoint ck, out;
        uint64_t total = 0;
        uint8_t *buf;
        size_t len;

        (void)state;
        own_make(&ck, "784-512-10", 101, 202, 7, g_seed);
        buf = encode(&ck, &len);
        assert_int_equal(len, 64 + 10 + 7 + 4 * 303 + 32);
        /* The documented header bytes. */
        assert_memory_equal(buf, "GNCK\x01\0\0\0", 8);
        assert_int_equal(buf[8], len & 0xff);
        assert_int_equal(buf[9], len >> 8);
        assert_int_equal(buf[40], 10);
        assert_int_equal(buf[44], 7);
        assert_int_equal(buf[48], 101);
        assert_int_equal(buf[56], 202);
        assert_memory_equal(buf + 64, "784-512-10", 10);
        assert_memory_equal(buf + 74, ck.meta, 7);
        assert_int_equal(nn_checkpoint_peek_size(buf, 64, &total), 0);
        assert_int_equal(total, len);
        assert_int_equal(nn_checkpoint_peek_size(buf, 63, &total), NN_EFORMAT);
        assert_int_equal(decode(buf, len, &out), 0);
        expect_same(&ck, &out);
        assert_true(signbit(out.params[0]));
        assert_true(out.params[1] == 1e-40f);
        nn_checkpoint_free(&out);
        expect_zeroed(&out);
        /* Too small a buffer, limits on floats. */
        assert_int_equal(nn_checkpoint_encode(&ck, buf, len - 1, &len),
                         NN_EINVAL);
        assert_int_equal(nn_checkpoint_decode(buf, len, 302, "peer", &out,
                                              g_err, sizeof(g_err)),
                         NN_EFORMAT);
        assert_non_null(strstr(g_err, "peer: 303 floats"));
        expect_zeroed(&out);
        assert_int_equal(nn_checkpoint_decode(buf, len, 303, "peer", &out,
                                              g_err, sizeof(g_err)),
                         0);
        nn_checkpoint_free(&out);
        free(buf);
        own_free(&ck);

        /* No optimizer state, no metadata. */
        own_make(&ck, "conv", 5, 0, 0, g_seed + 1);
        buf = encode(&ck, &len);
        assert_int_equal(decode(buf, len, &out), 0);
        expect_same(&ck, &out);
        nn_checkpoint_free(&out);
        free(buf);
        own_free(&ck);
}

/* nn_checkpoint_encode_open + nn_checkpoint_seal_some in pieces of k
 * bytes: 0 for every piece but the last, which says 1; the bytes are
 * nn_checkpoint_encode's and the digest is BLAKE2b-256 of the body. */
static void test_seal_in_pieces(void **state)
{
        static const size_t pieces[] = {1, 7, 64, 1000, 4096, SIZE_MAX};
        struct nn_checkpoint ck;
        struct nn_ckpt_seal s;
        uint8_t want[NN_CKPT_DIGEST_SIZE], *one, *buf;
        size_t len, len2, body;

        (void)state;
        own_make(&ck, "784-512-10", 1001, 1001, 9, g_seed);
        one = encode(&ck, &len);
        body = len - NN_CKPT_DIGEST_SIZE;
        assert_int_equal(
            crypto_generichash(want, sizeof(want), one, body, NULL, 0), 0);
        assert_memory_equal(one + body, want, sizeof(want));
        buf = malloc(len);
        assert_non_null(buf);
        for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
                size_t k = pieces[i], calls = 0;
                int rc;

                memset(buf, 0xa5, len);
                assert_int_equal(
                    nn_checkpoint_encode_open(&ck, buf, len, &len2, &s), 0);
                assert_int_equal(len2, len);
                while ((rc = nn_checkpoint_seal_some(&s, k)) == 0)
                        calls++;
                assert_int_equal(rc, 1);
                calls++;
                /* every piece but the last was whole */
                assert_int_equal(calls, k == SIZE_MAX ? 1 : (body + k - 1) / k);
                assert_memory_equal(buf, one, len);
        }
        /* unsealed, a decoder refuses it */
        assert_int_equal(nn_checkpoint_encode_open(&ck, buf, len, &len2, &s),
                         0);
        assert_int_equal(nn_checkpoint_seal_some(&s, body - 1), 0);
        memset(buf + body, 0, NN_CKPT_DIGEST_SIZE);
        {
                struct nn_checkpoint out;

                assert_int_not_equal(decode(buf, len, &out), 0);
                expect_zeroed(&out);
        }
        free(buf);
        free(one);
        own_free(&ck);
}

static void test_bounds_on_encode(void **state)
{
        struct nn_checkpoint ck;
        char *big;

        (void)state;
        own_make(&ck, "x", 3, 0, 0, g_seed);
        ck.params[2] = NAN;
        assert_int_equal(nn_checkpoint_encoded_size(&ck), 64 + 1 + 12 + 32);
        {
                uint8_t buf[256];
                size_t len;

                assert_int_equal(
                    nn_checkpoint_encode(&ck, buf, sizeof(buf), &len),
                    NN_EINVAL);
        }
        free(ck.spec);
        ck.spec = strdup("");
        assert_int_equal(nn_checkpoint_encoded_size(&ck), 0);
        big = malloc(NN_CKPT_SPEC_MAX + 2);
        assert_non_null(big);
        memset(big, 'a', NN_CKPT_SPEC_MAX + 1);
        big[NN_CKPT_SPEC_MAX + 1] = '\0';
        free(ck.spec);
        ck.spec = big;
        assert_int_equal(nn_checkpoint_encoded_size(&ck), 0);
        own_free(&ck);
}

/* Flip every byte (one bit, then all bits): every one is refused. */
static void test_flip_every_byte(void **state)
{
        struct nn_checkpoint ck, out;
        unsigned sums = 0, heads = 0;
        uint8_t *buf, keep;
        size_t len, i;
        int rc, k;

        (void)state;
        own_make(&ck, "16-8-2", 9, 18, 3, g_seed);
        buf = encode(&ck, &len);
        for (i = 0; i < len; i++) {
                for (k = 0; k < 2; k++) {
                        keep = buf[i];
                        buf[i] ^= k ? 0xff : (uint8_t)(1u << (i % 8));
                        rc = decode(buf, len, &out);
                        buf[i] = keep;
                        if (rc != NN_ECHECKSUM && rc != NN_EFORMAT)
                                fail_msg("flip at byte %zu (k %d) gave %d: %s",
                                         i, k, rc, g_err);
                        expect_zeroed(&out);
                        assert_non_null(strstr(g_err, "peer: "));
                        sums += rc == NN_ECHECKSUM;
                        heads += rc == NN_EFORMAT;
                }
        }
        /* Body and trailer flips are caught by the digest, header ones
         * by the header checks (a flip in a reserved-free header field
         * such as step only by the digest). */
        assert_true(sums >= 2 * (len - 64));
        assert_true(heads > 0);
        assert_int_equal(decode(buf, len, &out), 0);
        nn_checkpoint_free(&out);
        free(buf);
        own_free(&ck);
}

static void test_truncate_every_length(void **state)
{
        struct nn_checkpoint ck, out;
        uint8_t *buf, *more;
        size_t len, i;
        int rc;

        (void)state;
        own_make(&ck, "16-8-2", 9, 18, 3, g_seed);
        buf = encode(&ck, &len);
        for (i = 0; i < len; i++) {
                uint8_t *cut = malloc(i ? i : 1);

                assert_non_null(cut);
                memcpy(cut, buf, i);
                rc = decode(cut, i, &out);
                free(cut);
                if (rc != NN_EFORMAT || strstr(g_err, "truncated") == NULL)
                        fail_msg("cut at %zu of %zu gave %d: %s", i, len, rc,
                                 g_err);
                expect_zeroed(&out);
        }
        more = malloc(len + 1);
        assert_non_null(more);
        memcpy(more, buf, len);
        more[len] = 0;
        assert_int_equal(decode(more, len + 1, &out), NN_EFORMAT);
        assert_non_null(strstr(g_err, "trailing"));
        free(more);
        free(buf);
        own_free(&ck);
}

/* Hostile but self-consistent bytes: a valid digest over bad content,
 * and a header promising 2^40 floats. */
static void test_hostile(void **state)
{
        struct nn_checkpoint ck, out;
        const uint32_t nan_bits = 0x7fc00000u;
        uint8_t *buf;
        size_t len;

        (void)state;
        own_make(&ck, "4-2", 4, 0, 0, g_seed);
        buf = encode(&ck, &len);
        memcpy(buf + 64 + 3 + 8, &nan_bits, 4); /* params[2], LE host */
        crypto_generichash(buf + len - 32, 32, buf, len - 32, NULL, 0);
        assert_int_equal(decode(buf, len, &out), NN_EFORMAT);
        assert_non_null(strstr(g_err, "parameter 2 is not finite"));
        expect_zeroed(&out);

        /* A NUL inside the spec. */
        free(buf);
        buf = encode(&ck, &len);
        buf[65] = 0;
        crypto_generichash(buf + len - 32, 32, buf, len - 32, NULL, 0);
        assert_int_equal(decode(buf, len, &out), NN_EFORMAT);
        assert_non_null(strstr(g_err, "NUL"));

        /* 2^40 params with a matching total: truncated, nothing
         * allocated; 2^40 + 1: out of bounds. */
        free(buf);
        buf = encode(&ck, &len);
        {
                uint64_t np = 1ull << 40, total = 64 + 3 + 4 * np + 32;

                gn_le64_put(buf + 48, np);
                gn_le64_put(buf + 8, total);
                assert_int_equal(decode(buf, len, &out), NN_EFORMAT);
                assert_non_null(strstr(g_err, "truncated"));
                np++;
                total += 4;
                gn_le64_put(buf + 48, np);
                gn_le64_put(buf + 8, total);
                assert_int_equal(decode(buf, len, &out), NN_EFORMAT);
                assert_non_null(strstr(g_err, "corrupt header"));
        }
        assert_int_equal(decode(NULL, 0, &out), NN_EFORMAT);
        free(buf);
        own_free(&ck);
}

static size_t slurp(const char *path, uint8_t *buf, size_t cap)
{
        FILE *f = fopen(path, "rb");
        size_t n;

        assert_non_null(f);
        n = fread(buf, 1, cap, f);
        fclose(f);
        return n;
}

/* Number of entries in the test dir other than . and .. */
static int dir_entries(void)
{
        struct dirent *de;
        DIR *d = opendir(g_dir);
        int n = 0;

        assert_non_null(d);
        while ((de = readdir(d)) != NULL)
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static void test_file_roundtrip_and_mismatch(void **state)
{
        struct nn_checkpoint ck, out;
        char path[256];
        uint8_t *buf;
        size_t len;

        (void)state;
        path_of(path, sizeof(path), "model.ckpt");
        own_make(&ck, "784-512-10", 1000, 2000, 16, g_seed);
        assert_int_equal(nn_checkpoint_save(path, &ck, g_err, sizeof(g_err)),
                         0);
        assert_int_equal(dir_entries(), 1);
        assert_int_equal(nn_checkpoint_load(path, &out, g_err, sizeof(g_err)),
                         0);
        expect_same(&ck, &out);
        nn_checkpoint_free(&out);
        /* The file is exactly the in-memory encoding. */
        buf = encode(&ck, &len);
        {
                uint8_t *file = malloc(len + 16);

                assert_non_null(file);
                assert_int_equal(slurp(path, file, len + 16), len);
                assert_memory_equal(file, buf, len);
                free(file);
        }
        free(buf);

        assert_int_equal(nn_checkpoint_load_expect(path, "784-512-10", 1000,
                                                   2000, &out, g_err,
                                                   sizeof(g_err)),
                         0);
        nn_checkpoint_free(&out);
        assert_int_equal(nn_checkpoint_load_expect(path, NULL, UINT64_MAX,
                                                   UINT64_MAX, &out, g_err,
                                                   sizeof(g_err)),
                         0);
        nn_checkpoint_free(&out);
        assert_int_equal(nn_checkpoint_load_expect(path, "784-256-10", 1000,
                                                   2000, &out, g_err,
                                                   sizeof(g_err)),
                         NN_EMISMATCH);
        expect_zeroed(&out);
        assert_non_null(strstr(g_err, path));
        assert_non_null(strstr(g_err, "'784-512-10'"));
        assert_non_null(strstr(g_err, "'784-256-10'"));
        assert_int_equal(nn_checkpoint_load_expect(path, "784-512-10", 999,
                                                   2000, &out, g_err,
                                                   sizeof(g_err)),
                         NN_EMISMATCH);
        assert_non_null(strstr(g_err, "1000 parameters"));
        assert_int_equal(nn_checkpoint_load_expect(path, "784-512-10", 1000, 0,
                                                   &out, g_err, sizeof(g_err)),
                         NN_EMISMATCH);
        assert_non_null(strstr(g_err, "2000 optimizer"));

        /* Overwrite with a newer one. */
        ck.step++;
        ck.params[5] = 42.0f;
        assert_int_equal(nn_checkpoint_save(path, &ck, g_err, sizeof(g_err)),
                         0);
        assert_int_equal(nn_checkpoint_load(path, &out, g_err, sizeof(g_err)),
                         0);
        expect_same(&ck, &out);
        nn_checkpoint_free(&out);
        assert_int_equal(dir_entries(), 1);

        /* A missing file. */
        path_of(path, sizeof(path), "absent.ckpt");
        assert_int_equal(nn_checkpoint_load(path, &out, g_err, sizeof(g_err)),
                         NN_EIO);
        assert_non_null(strstr(g_err, path));
        own_free(&ck);
        path_of(path, sizeof(path), "model.ckpt");
        unlink(path);
}

/* On-disk corruption: truncations, a flipped byte, appended bytes. */
static void test_file_corrupt(void **state)
{
        size_t cuts[] = {0, 10, 63, 64, 65, 200, 0};
        struct nn_checkpoint ck, out;
        char path[256];
        uint8_t *buf;
        size_t len, i;
        FILE *f;

        (void)state;
        path_of(path, sizeof(path), "c.ckpt");
        own_make(&ck, "8-4", 60, 0, 0, g_seed);
        buf = encode(&ck, &len);
        cuts[6] = len - 1;
        for (i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
                assert_int_equal(
                    nn_checkpoint_save(path, &ck, g_err, sizeof(g_err)), 0);
                assert_int_equal(truncate(path, (off_t)cuts[i]), 0);
                assert_int_equal(
                    nn_checkpoint_load(path, &out, g_err, sizeof(g_err)),
                    NN_EFORMAT);
                assert_non_null(strstr(g_err, path));
                assert_non_null(strstr(g_err, "truncated"));
                expect_zeroed(&out);
        }
        buf[100] ^= 0x10;
        f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(buf, 1, len, f), len);
        fputc(0, f);
        fclose(f);
        assert_int_equal(nn_checkpoint_load(path, &out, g_err, sizeof(g_err)),
                         NN_EFORMAT);
        assert_non_null(strstr(g_err, "trailing"));
        assert_int_equal(truncate(path, (off_t)len), 0);
        assert_int_equal(nn_checkpoint_load(path, &out, g_err, sizeof(g_err)),
                         NN_ECHECKSUM);
        assert_non_null(strstr(g_err, path));
        assert_non_null(strstr(g_err, "checksum"));
        unlink(path);
        free(buf);
        own_free(&ck);
}

/* A failed save leaves the previous checkpoint byte-identical and no
 * temp file. Failures: the file size limit hit mid-write (a full disk,
 * as root too), a missing directory, a read-only directory (non-root). */
static void test_failed_save_keeps_old(void **state)
{
        struct nn_checkpoint old, big, out;
        uint8_t *before, *after;
        char path[256], missing[256];
        size_t n1, n2;
        struct rlimit rl, keep;
        void (*oldsig)(int);

        (void)state;
        path_of(path, sizeof(path), "keep.ckpt");
        own_make(&old, "8-4", 100, 0, 0, g_seed);
        own_make(&big, "8-4", 100000, 0, 0, g_seed + 1);
        assert_int_equal(nn_checkpoint_save(path, &old, g_err, sizeof(g_err)),
                         0);
        before = malloc(1 << 20);
        after = malloc(1 << 20);
        assert_non_null(before);
        assert_non_null(after);
        n1 = slurp(path, before, 1 << 20);

        assert_int_equal(getrlimit(RLIMIT_FSIZE, &keep), 0);
        rl = keep;
        rl.rlim_cur = 64 << 10; /* the big one needs 400 KB */
        oldsig = signal(SIGXFSZ, SIG_IGN);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
        assert_int_equal(nn_checkpoint_save(path, &big, g_err, sizeof(g_err)),
                         NN_EIO);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &keep), 0);
        signal(SIGXFSZ, oldsig);
        assert_non_null(strstr(g_err, path));
        n2 = slurp(path, after, 1 << 20);
        assert_int_equal(n1, n2);
        assert_memory_equal(before, after, n1);
        assert_int_equal(dir_entries(), 1);
        assert_int_equal(nn_checkpoint_load(path, &out, g_err, sizeof(g_err)),
                         0);
        expect_same(&old, &out);
        nn_checkpoint_free(&out);

        path_of(missing, sizeof(missing), "no/such/dir/x.ckpt");
        assert_int_equal(
            nn_checkpoint_save(missing, &big, g_err, sizeof(g_err)), NN_EIO);
        assert_non_null(strstr(g_err, missing));

        if (geteuid() != 0) {
                assert_int_equal(chmod(g_dir, 0500), 0);
                assert_int_equal(
                    nn_checkpoint_save(path, &big, g_err, sizeof(g_err)),
                    NN_EIO);
                assert_int_equal(chmod(g_dir, 0700), 0);
                n2 = slurp(path, after, 1 << 20);
                assert_int_equal(n1, n2);
                assert_memory_equal(before, after, n1);
        } else {
                printf("test_checkpoint: root: read-only directory case "
                       "not meaningful, size-limit case covers it\n");
        }
        /* A non-finite model is not saved either. */
        big.params[7] = INFINITY;
        assert_int_equal(nn_checkpoint_save(path, &big, g_err, sizeof(g_err)),
                         NN_EINVAL);
        assert_non_null(strstr(g_err, "not finite"));
        n2 = slurp(path, after, 1 << 20);
        assert_memory_equal(before, after, n1);
        assert_int_equal(dir_entries(), 1);
        unlink(path);
        free(before);
        free(after);
        own_free(&old);
        own_free(&big);
}

/* Removes the flat test directory, whatever a failed test left in it. */
static void touch(const char *name)
{
        char path[256];
        FILE *f;

        path_of(path, sizeof(path), name);
        f = fopen(path, "wb");
        assert_non_null(f);
        fputs("torn", f);
        fclose(f);
}

static int exists(const char *name)
{
        char path[256];
        struct stat sb;

        path_of(path, sizeof(path), name);
        return stat(path, &sb) == 0;
}

/* Temp files of saves that died before their rename: those of dead pids
 * go (at start, and at the next save); ours, a live writer's, and names
 * that only look alike stay. */
static void test_stale_tmp_removed(void **state)
{
        struct nn_checkpoint ck;
        char path[256], mine[64], live[64];

        (void)state;
        path_of(path, sizeof(path), "model.ckpt");
        snprintf(mine, sizeof(mine), "model.ckpt.tmp.%ld", (long)getpid());
        snprintf(live, sizeof(live), "model.ckpt.tmp.%ld", (long)getppid());
        touch("model.ckpt.tmp.2147483646"); /* above any pid_max */
        touch("model.ckpt.tmp.2147483645");
        touch(mine);
        touch(live);
        touch("model.ckpt.tmp.12x");
        touch("other.ckpt.tmp.2147483646");
        assert_int_equal(nn_checkpoint_clean_tmp(path), 2);
        assert_false(exists("model.ckpt.tmp.2147483646"));
        assert_false(exists("model.ckpt.tmp.2147483645"));
        assert_true(exists(mine));
        assert_true(exists(live));
        assert_true(exists("model.ckpt.tmp.12x"));
        assert_true(exists("other.ckpt.tmp.2147483646"));
        assert_int_equal(nn_checkpoint_clean_tmp(path), 0);
        /* a save leaves the cleaning to start-up (it runs on the training
         * thread): another's temp file stays until the next start */
        touch("model.ckpt.tmp.2147483646");
        own_make(&ck, "784-10", 10, 0, 1, g_seed);
        assert_int_equal(nn_checkpoint_save(path, &ck, g_err, sizeof(g_err)),
                         0);
        own_free(&ck);
        assert_true(exists("model.ckpt.tmp.2147483646"));
        assert_int_equal(nn_checkpoint_clean_tmp(path), 1);
        assert_int_equal(nn_checkpoint_clean_tmp("/nonexistent-gn/x.ckpt"),
                         NN_EIO);
        const char *left[] = {"model.ckpt", mine, live, "model.ckpt.tmp.12x",
                              "other.ckpt.tmp.2147483646"};
        for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
                char q[256];
                path_of(q, sizeof(q), left[i]);
                unlink(q);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_memory_roundtrip),
            cmocka_unit_test(test_seal_in_pieces),
            cmocka_unit_test(test_bounds_on_encode),
            cmocka_unit_test(test_flip_every_byte),
            cmocka_unit_test(test_truncate_every_length),
            cmocka_unit_test(test_hostile),
            cmocka_unit_test(test_file_roundtrip_and_mismatch),
            cmocka_unit_test(test_file_corrupt),
            cmocka_unit_test(test_failed_save_keeps_old),
            cmocka_unit_test(test_stale_tmp_removed),
        };
        int rc;

        g_seed =
            gn_test_seed("test_checkpoint", (uint64_t)time(NULL) ^ getpid());
        if (sodium_init() < 0 ||
            gn_test_tmpdir(g_dir, sizeof(g_dir), "ckpt") != 0) {
                perror("setup");
                return 1;
        }
        rc = cmocka_run_group_tests_name("checkpoint", tests, NULL, NULL);
        gn_test_rmtree(g_dir);
        return rc;
}
