/*
 * test_base.c - the header-only helpers of base/: byte order against
 * literal byte vectors (the wire, checkpoint and codec tests read their
 * fields through gn_endian.h, so its layout is pinned here, independently),
 * the error-buffer contract (NULL or zero length writes nothing, long
 * lines are truncated and NUL-terminated, gn_fail returns its code), and
 * the generator's published sequence; and the large-buffer allocator
 * (gn_bigbuf.c): every byte usable, aligned, a large buffer on a 2 MB
 * boundary and, where the kernel offers transparent huge pages, eligible
 * for them (its mapping's THPeligible in /proc/self/smaps); and the
 * NaN/Inf check (gn_finite.c) with a bad value at every position of
 * block-sized and odd-sized arrays.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/gn_bigbuf.h"

#include "base/gn_endian.h"
#include "base/gn_errbuf.h"
#include "base/gn_finite.h"
#include "base/gn_rng.h"

static void test_little_endian(void **state)
{
        static const uint8_t v16[2] = {0x34, 0x12};
        static const uint8_t v32[4] = {0x78, 0x56, 0x34, 0x12};
        static const uint8_t v64[8] = {0xef, 0xcd, 0xab, 0x89,
                                       0x67, 0x45, 0x23, 0x01};
        uint8_t b[9];

        memset(b, 0xaa, sizeof(b));
        gn_le16_put(b, 0x1234);
        assert_memory_equal(b, v16, 2);
        assert_int_equal(b[2], 0xaa);
        assert_int_equal(gn_le16_get(v16), 0x1234);

        memset(b, 0xaa, sizeof(b));
        gn_le32_put(b, 0x12345678u);
        assert_memory_equal(b, v32, 4);
        assert_int_equal(b[4], 0xaa);
        assert_int_equal(gn_le32_get(v32), 0x12345678u);

        memset(b, 0xaa, sizeof(b));
        gn_le64_put(b + 1, 0x0123456789abcdefull); /* unaligned */
        assert_memory_equal(b + 1, v64, 8);
        assert_int_equal(b[0], 0xaa);
        assert_true(gn_le64_get(v64) == 0x0123456789abcdefull);

        /* the top bit survives (no sign extension through int) */
        gn_le32_put(b, 0xfffffffeu);
        assert_int_equal(gn_le32_get(b), 0xfffffffeu);
        gn_le16_put(b, 0xff80);
        assert_int_equal(gn_le16_get(b), 0xff80);
}

static void test_big_endian(void **state)
{
        static const uint8_t v32[4] = {0x12, 0x34, 0x56, 0x78};
        static const uint8_t v64[8] = {0x01, 0x23, 0x45, 0x67,
                                       0x89, 0xab, 0xcd, 0xef};
        uint8_t b[8];

        memset(b, 0xaa, sizeof(b));
        gn_be32_put(b, 0x12345678u);
        assert_memory_equal(b, v32, 4);
        assert_int_equal(b[4], 0xaa);
        assert_int_equal(gn_be32_get(v32), 0x12345678u);

        gn_be_put(b, 0x0123456789abcdefull, 8);
        assert_memory_equal(b, v64, 8);
        assert_true(gn_be_get(v64, 8) == 0x0123456789abcdefull);

        /* n bytes: the low n of the value, most significant first */
        memset(b, 0xaa, sizeof(b));
        gn_be_put(b, 0xbeef1f90, 2);
        assert_int_equal(b[0], 0x1f);
        assert_int_equal(b[1], 0x90);
        assert_int_equal(b[2], 0xaa);
        assert_int_equal(gn_be_get(b, 2), 0x1f90);
        assert_int_equal(gn_be_get(v64, 1), 0x01);
        assert_int_equal(gn_be_get(v64, 0), 0);
        gn_be32_put(b, 0xfffffffeu);
        assert_int_equal(gn_be32_get(b), 0xfffffffeu);
}

static void test_errbuf(void **state)
{
        char err[8];

        gn_seterr(NULL, 0, "%s", "nothing");
        gn_seterr(NULL, 100, "%s", "nothing");
        memset(err, 'x', sizeof(err));
        gn_seterr(err, 0, "%s", "nothing");
        assert_int_equal(err[0], 'x');

        gn_seterr(err, sizeof(err), "%s:%d", "ab", 12);
        assert_string_equal(err, "ab:12");
        gn_seterr(err, sizeof(err), "%s", "0123456789");
        assert_string_equal(err, "0123456"); /* truncated, terminated */

        memset(err, 'x', sizeof(err));
        assert_int_equal(gn_fail(err, sizeof(err), -EINVAL, "bad %c", 'v'),
                         -EINVAL);
        assert_string_equal(err, "bad v");
        assert_int_equal(gn_fail(NULL, 0, -ENOENT, "x"), -ENOENT);
}

/* splitmix64's published outputs from state 0: the protocol's partner
 * schedule and every seeded run depend on exactly this sequence. */
static void test_splitmix64(void **state)
{
        uint64_t s = 0;

        assert_true(gn_splitmix64(&s) == 0xe220a8397b1dcdafull);
        assert_true(gn_splitmix64(&s) == 0x6e789e6aa1b965f4ull);
        assert_true(gn_splitmix64(&s) == 0x06c45d188009454full);
        assert_true(s == 3 * 0x9e3779b97f4a7c15ull);
}

/* Fill b[0..n) with a pattern and read it back. */
static void check_usable(uint8_t *b, size_t n)
{
        for (size_t i = 0; i < n; i++)
                b[i] = (uint8_t)(i * 131u + 7u);
        for (size_t i = 0; i < n; i += 4093)
                assert_int_equal(b[i], (uint8_t)(i * 131u + 7u));
        assert_int_equal(b[n - 1], (uint8_t)((n - 1) * 131u + 7u));
}

#ifndef GN_TEST_EMULATED /* qemu-user takes madvise and drops it */
/* 1 if the kernel hands out transparent huge pages on madvise. */
static int thp_offered(void)
{
        char line[128] = "";
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

        if (!f)
                return 0;
        if (!fgets(line, sizeof(line), f))
                line[0] = 0;
        fclose(f);
        return strstr(line, "[always]") || strstr(line, "[madvise]");
}

/* The THPeligible field of the mapping holding p; -1 if not found. */
static int thp_eligible(const void *p)
{
        char line[256];
        unsigned long lo = 0, hi = 0, a = (unsigned long)(uintptr_t)p;
        int in = 0, v = -1;
        FILE *f = fopen("/proc/self/smaps", "r");

        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f)) {
                if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
                    strchr(line, '-') < strchr(line, ' '))
                        in = a >= lo && a < hi;
                else if (in && sscanf(line, "THPeligible: %d", &v) == 1)
                        break;
        }
        fclose(f);
        return v;
}
#endif

static void test_bigbuf(void **state)
{
        size_t small = 200000, big = 3260000; /* a slice, a model's state */
        uint8_t *s = gn_big_alloc(small), *b = gn_big_alloc(big);

        assert_null(gn_big_alloc(0));
        gn_big_free(NULL);
        assert_non_null(s);
        assert_non_null(b);
        assert_int_equal((uintptr_t)s % _Alignof(max_align_t), 0);
        /* the large one is mapped on its own, on a huge page boundary */
        assert_int_equal((uintptr_t)b % GN_BIG_PAGE, 0);
        check_usable(s, small);
        check_usable(b, big);
#ifndef GN_TEST_EMULATED /* qemu-user takes madvise and drops it */
        if (thp_offered())
                assert_int_equal(thp_eligible(b), 1);
        else
                print_message("no transparent huge pages on this kernel: "
                              "the eligibility check does not apply\n");
#endif
        gn_big_free(s);
        gn_big_free(b);
        (void)state;
}

/* Every position of arrays around the check's block (256) holds in turn
 * a NaN, +Inf and -Inf: each is found, and the array is finite again
 * once it is put back; extremes that are finite pass. */
static void test_all_finite(void **state)
{
        static const size_t sizes[] = {1, 7, 255, 256, 257, 513, 1000};
        const float bad[] = {NAN, INFINITY, -INFINITY};
        const float good[] = {FLT_MAX, -FLT_MAX, FLT_MIN, 0x1p-149f, -0.0f};
        float x[1000];

        (void)state;
        assert_int_equal(gn_all_finite(NULL, 0), 1);
        for (size_t i = 0; i < 1000; i++)
                x[i] = good[i % 5] * (i % 2 ? 1.0f : -1.0f);
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                size_t n = sizes[s];

                assert_int_equal(gn_all_finite(x, n), 1);
                for (size_t i = 0; i < n; i++) {
                        float keep = x[i];

                        for (size_t b = 0; b < 3; b++) {
                                x[i] = bad[b];
                                assert_int_equal(gn_all_finite(x, n), 0);
                        }
                        x[i] = keep;
                }
                assert_int_equal(gn_all_finite(x, n), 1);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_little_endian),
            cmocka_unit_test(test_big_endian),
            cmocka_unit_test(test_errbuf),
            cmocka_unit_test(test_splitmix64),
            cmocka_unit_test(test_bigbuf),
            cmocka_unit_test(test_all_finite),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
