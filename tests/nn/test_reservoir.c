/*
 * test_reservoir.c - the sample reservoir of --shuffle-samples
 * (nn/reservoir.c): it never holds more than its bound, whatever is
 * offered; it keeps a uniform sample of everything offered (algorithm R);
 * packed payloads are checked whole before anything is offered; draws
 * come from what is held; the same seed gives the same reservoir.
 * GN_SEED replays a run (the seed is printed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "nn/nn_err.h"
#include "nn/reservoir.h"
#include "test_seed.h"

enum { SB = 6 }; /* sample bytes: tiny images */

static uint64_t seed;

/* Sample number i: its bytes are i's little-endian bytes, label i % 10. */
static void sample(uint32_t i, uint8_t *img)
{
        memset(img, 0, SB);
        for (int b = 0; b < 4; b++)
                img[b] = (uint8_t)(i >> (8 * b));
}

static uint32_t sample_id(const uint8_t *img)
{
        return (uint32_t)img[0] | (uint32_t)img[1] << 8 |
               (uint32_t)img[2] << 16 | (uint32_t)img[3] << 24;
}

static void test_bound(void **state)
{
        struct nn_reservoir r;
        uint8_t img[SB];
        uint32_t kept = 0;

        (void)state;
        assert_int_equal(nn_reservoir_init(&r, 50, SB, seed), 0);
        assert_int_equal(nn_reservoir_bytes(&r), 50 * (SB + 1));
        for (uint32_t i = 0; i < 20000; i++) {
                sample(i, img);
                kept += (uint32_t)nn_reservoir_add(&r, img, (uint8_t)(i % 10));
                assert_true(r.n <= 50);
                if (i < 50)
                        assert_int_equal(r.n, i + 1); /* fills first */
        }
        assert_int_equal(r.n, 50);
        assert_int_equal(r.seen, 20000);
        /* expected kept: 50 + sum_{i=51}^{20000} 50/i ~ 50 (1 + ln 400) =
         * 350; allow 3x its spread */
        printf("kept %u of 20000 (expected ~350)\n", kept);
        assert_in_range(kept, 280, 420);
        for (uint32_t j = 0; j < r.n; j++) /* label travels with image */
                assert_int_equal(r.labels[j],
                                 sample_id(r.images + j * SB) % 10);
        nn_reservoir_free(&r);
        assert_int_equal(nn_reservoir_init(&r, 0, SB, seed), NN_EINVAL);
        assert_int_equal(nn_reservoir_init(&r, 5, 0, seed), NN_EINVAL);
}

/* Uniform over the stream: of 100 kept from 10000 offered, about half
 * from the first half (binomial, sd 5: bound at 4 sd), summed over 20
 * reservoirs of different seeds to make the test tight. */
static void test_uniform(void **state)
{
        uint32_t first_half = 0, total = 0;
        uint8_t img[SB];

        (void)state;
        for (uint64_t s = 0; s < 20; s++) {
                struct nn_reservoir r;

                assert_int_equal(nn_reservoir_init(&r, 100, SB, seed + s), 0);
                for (uint32_t i = 0; i < 10000; i++) {
                        sample(i, img);
                        nn_reservoir_add(&r, img, 0);
                }
                for (uint32_t j = 0; j < r.n; j++)
                        first_half += sample_id(r.images + j * SB) < 5000;
                total += r.n;
                nn_reservoir_free(&r);
        }
        printf("%u of %u kept from the first half\n", first_half, total);
        assert_int_equal(total, 2000);
        assert_in_range(first_half, 1000 - 90, 1000 + 90); /* sd 22 */
}

static void test_packed(void **state)
{
        struct nn_reservoir r;
        uint8_t images[4 * SB], labels[4] = {1, 2, 3, 4}, p[64], out[4 * SB],
                                out_l[4];
        uint32_t idx[3] = {3, 0, 2}, kept = 99;

        (void)state;
        for (uint32_t i = 0; i < 4; i++)
                sample(100 + i, images + i * SB);
        assert_int_equal(nn_samples_packed_len(3, SB), 3 * (SB + 1));
        nn_samples_pack(images, labels, SB, idx, 3, p);
        assert_int_equal(p[0], 4); /* sample 3's label, then its bytes */
        assert_int_equal(sample_id(p + 1), 103);
        assert_int_equal(p[SB + 1], 1);
        assert_int_equal(nn_reservoir_init(&r, 2, SB, seed), 0);
        assert_int_equal(nn_reservoir_draw(&r, 4, out, out_l), 0); /* empty */
        /* refused whole: wrong length, a label >= classes */
        assert_int_equal(
            nn_reservoir_add_packed(&r, p, 3 * (SB + 1) - 1, 10, &kept),
            NN_EINVAL);
        assert_int_equal(kept, 0);
        assert_int_equal(nn_reservoir_add_packed(&r, p, 0, 10, NULL),
                         NN_EINVAL);
        assert_int_equal(nn_reservoir_add_packed(&r, p, 3 * (SB + 1), 4, NULL),
                         NN_EINVAL); /* label 4 of 4 classes */
        assert_int_equal(r.seen, 0);
        assert_int_equal(
            nn_reservoir_add_packed(&r, p, 3 * (SB + 1), 10, &kept), 0);
        assert_int_equal(r.seen, 3);
        assert_int_equal(r.n, 2); /* bounded */
        assert_in_range(kept, 2, 3);
        assert_int_equal(nn_reservoir_draw(&r, 4, out, out_l), 4);
        for (int i = 0; i < 4; i++) {
                uint32_t id = sample_id(out + i * SB);

                assert_in_range(id, 100, 103);
                assert_int_equal(out_l[i], labels[id - 100]);
        }
        nn_reservoir_free(&r);
}

static void test_same_seed(void **state)
{
        struct nn_reservoir a, b;
        uint8_t img[SB];

        (void)state;
        assert_int_equal(nn_reservoir_init(&a, 30, SB, seed), 0);
        assert_int_equal(nn_reservoir_init(&b, 30, SB, seed), 0);
        for (uint32_t i = 0; i < 3000; i++) {
                sample(i, img);
                nn_reservoir_add(&a, img, (uint8_t)i);
                nn_reservoir_add(&b, img, (uint8_t)i);
        }
        assert_memory_equal(a.images, b.images, 30 * SB);
        assert_memory_equal(a.labels, b.labels, 30);
        nn_reservoir_free(&a);
        nn_reservoir_free(&b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bound),
            cmocka_unit_test(test_uniform),
            cmocka_unit_test(test_packed),
            cmocka_unit_test(test_same_seed),
        };

        seed = gn_test_seed("test_reservoir", 1);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
