/*
 * test_shuffle.c - the sample shuffle's box (node/train/shuffle.c): what a
 * node sends per step at its pace, and that a batch that large goes
 * through the box whole.
 *
 * Shows: a node at its partners' pace (ratio 1) sends R samples a step;
 * one that trains a step in X sends R times X, rounded, up to
 * NODE_SHUFFLE_PACE_MAX times R and never past NODE_SHUFFLE_MAX_R; a
 * ratio below 1 or NaN sends R; the largest such batch is posted, taken
 * by the loop and delivered into a partner's reservoir whole (every
 * sample kept, labels checked), and one past the box's cap is not posted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/reservoir.h"
#include "train/shuffle.h"

enum { SS = 16, CLASSES = 10 };

static void test_pace_count(void **state)
{
        struct node_shuffle *s = NULL;

        (void)state;
        assert_int_equal(node_shuffle_create(&s, 25, 100, SS, CLASSES, 1), 0);
        assert_int_equal(node_shuffle_pace_count(s, 1.0), 25);
        assert_int_equal(node_shuffle_pace_count(s, 4.0), 100);
        assert_int_equal(node_shuffle_pace_count(s, 2.42), 61); /* 60.5 */
        assert_int_equal(node_shuffle_pace_count(s, 8.0), 200);
        assert_int_equal(node_shuffle_pace_count(s, 64.0), 200); /* 8 R */
        assert_int_equal(node_shuffle_pace_count(s, 0.5), 25);
        assert_int_equal(node_shuffle_pace_count(s, NAN), 25);
        node_shuffle_free(s);
        /* R = 100: 8 R is past the frame's bound */
        assert_int_equal(node_shuffle_create(&s, 100, 100, SS, CLASSES, 1), 0);
        assert_int_equal(node_shuffle_pace_count(s, 4.0), NODE_SHUFFLE_MAX_R);
        node_shuffle_free(s);
        /* R at the bound: never below R */
        assert_int_equal(node_shuffle_max_count(NODE_SHUFFLE_MAX_R),
                         NODE_SHUFFLE_MAX_R);
        assert_int_equal(node_shuffle_max_count(3), 24);
}

static void test_paced_batch_whole(void **state)
{
        struct node_shuffle *a = NULL, *b = NULL;
        struct node_shuffle_stats st;
        uint32_t n = node_shuffle_max_count(25), idx[256];
        uint8_t img[256 * SS], lab[256];
        size_t len = nn_samples_packed_len(n, SS), got;
        uint8_t *packed = malloc(len + 1 + SS), *buf = malloc(len + 1 + SS);
        uint64_t step = 0;

        (void)state;
        assert_non_null(packed);
        assert_non_null(buf);
        for (uint32_t i = 0; i < 256; i++) {
                idx[i] = i;
                lab[i] = (uint8_t)(i % CLASSES);
                memset(img + (size_t)i * SS, (int)i, SS);
        }
        assert_int_equal(node_shuffle_create(&a, 25, 1000, SS, CLASSES, 1), 0);
        assert_int_equal(node_shuffle_create(&b, 25, 1000, SS, CLASSES, 2), 0);
        nn_samples_pack(img, lab, SS, idx, n, packed);
        node_shuffle_post(a, 7, packed, len);
        got = node_shuffle_take(a, buf, len, &step);
        assert_int_equal(got, len);
        assert_int_equal(step, 7);
        assert_int_equal(node_shuffle_deliver(b, buf, got), 0);
        node_shuffle_stats(b, &st);
        assert_int_equal(st.samples_received, n);
        assert_int_equal(st.samples_kept, n);
        /* one sample more than the box holds is not posted */
        nn_samples_pack(img, lab, SS, idx, n + 1, packed);
        node_shuffle_post(a, 8, packed, nn_samples_packed_len(n + 1, SS));
        assert_int_equal(node_shuffle_take(a, buf, len + 1 + SS, &step), 0);
        node_shuffle_free(a);
        node_shuffle_free(b);
        free(packed);
        free(buf);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_pace_count),
            cmocka_unit_test(test_paced_batch_whole),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
