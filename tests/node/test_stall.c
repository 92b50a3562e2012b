/*
 * test_stall.c - the longest step and the slow ones (node/train/stall.c).
 *
 * Shows: no step is judged before NODE_STALL_WARMUP are timed; a step is
 * slow only above NODE_STALL_FACTOR x the median of the steps before it
 * (80.0 ms against a 40 ms pace is not, 80.1 is); the median does not
 * move with a minority of slow steps; the longest step keeps its step
 * and its wait; the progress window's figures are taken once; events
 * come NODE_STALL_EVENT_BURST at once, then one per
 * NODE_STALL_EVENT_REFILL_MS, carrying the held-back ones' count and the
 * longest of them; the median is the sorted middle (checked against a
 * sort, with random times from a printed seed, GN_SEED). Pure: times are
 * numbers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gn_rng.h"
#include "test_seed.h"
#include "train/stall.h"

static uint64_t g_seed;

/* n steps of us each, 10 ms apart in time from *now; the last answer */
static int steps(struct node_stall *s, int n, double us, uint64_t *now,
                 struct node_stall_slow *out)
{
        int r = 0;

        for (int i = 0; i < n; i++) {
                *now += 10000;
                r = node_stall_note(s, s->st.steps + 1, us, 0, *now, out);
        }
        return r;
}

static void test_warmup_and_bound(void **state)
{
        struct node_stall s;
        struct node_stall_slow sl;
        uint64_t now = 0;

        (void)state;
        node_stall_init(&s);
        /* under the warm-up nothing is judged, however long */
        assert_int_equal(steps(&s, NODE_STALL_WARMUP - 1, 40000, &now, &sl), 0);
        assert_int_equal(steps(&s, 1, 1e7, &now, &sl), 0);
        assert_int_equal(s.st.slow, 0);
        assert_true(s.st.max_us == 0);
        steps(&s, 40, 40000, &now, &sl);
        assert_true(node_stall_pace_us(&s) == 40000);
        /* exactly 2 x the pace: not yet slow; a little more: slow */
        assert_int_equal(steps(&s, 1, 80000, &now, &sl), 0);
        assert_int_equal(s.st.slow, 0);
        assert_int_equal(
            node_stall_note(&s, 777, 80100, 70000, now + 10000, &sl), 1);
        assert_int_equal(s.st.slow, 1);
        assert_int_equal(sl.step, 777);
        assert_true(sl.us == 80100 && sl.pace_us == 40000);
        assert_true(sl.wait_us == 70000 && sl.held == 0);
        assert_true(s.st.max_us == 80100);
        assert_int_equal(s.st.max_step, 777);
        assert_true(s.st.max_wait_us == 70000);
        assert_true(s.st.slow_us == 80100 && s.st.slow_wait_us == 70000);
}

static void test_median_holds(void **state)
{
        struct node_stall s;
        struct node_stall_slow sl;
        uint64_t now = 0;

        (void)state;
        node_stall_init(&s);
        steps(&s, NODE_STALL_WINDOW, 40000, &now, &sl);
        /* fewer than half the window slow: the bar stays at 2 x 40 ms */
        for (int i = 0; i < NODE_STALL_WINDOW / 2 - 1; i++) {
                now += 10000;
                node_stall_note(&s, s.st.steps + 1, 500000, 0, now, &sl);
        }
        assert_true(node_stall_pace_us(&s) == 40000);
        assert_int_equal(s.st.slow, NODE_STALL_WINDOW / 2 - 1);
        /* the old times leave the window: 128 steps of 10 ms later the
         * pace is 10 ms */
        steps(&s, NODE_STALL_WINDOW, 10000, &now, &sl);
        assert_true(node_stall_pace_us(&s) == 10000);
        assert_true(s.st.pace_us == 10000);
}

static void test_window_take(void **state)
{
        struct node_stall s;
        struct node_stall_slow sl;
        uint64_t now = 0, slow;
        double max;

        (void)state;
        node_stall_init(&s);
        steps(&s, 20, 40000, &now, &sl);
        node_stall_window_take(&s, &max, &slow);
        assert_true(max == 40000); /* steps 17-20 were judged */
        assert_int_equal(slow, 0);
        steps(&s, 1, 90000, &now, &sl);
        steps(&s, 1, 50000, &now, &sl);
        node_stall_window_take(&s, &max, &slow);
        assert_true(max == 90000);
        assert_int_equal(slow, 1);
        node_stall_window_take(&s, &max, &slow);
        assert_true(max == 0);
        assert_int_equal(slow, 0);
}

static void test_events_bucket(void **state)
{
        struct node_stall s;
        struct node_stall_slow sl;
        uint64_t now = 0;
        int told = 0;

        (void)state;
        node_stall_init(&s);
        steps(&s, NODE_STALL_WINDOW, 40000, &now, &sl);
        /* 20 slow steps 10 ms apart: the burst is told, the rest held */
        for (int i = 0; i < 20; i++) {
                now += 10000;
                told += node_stall_note(&s, 1000 + (uint64_t)i,
                                        100000 + 1000.0 * i, 0, now, &sl);
        }
        assert_int_equal(told, NODE_STALL_EVENT_BURST);
        assert_int_equal(s.held, 20 - NODE_STALL_EVENT_BURST);
        /* the bucket refills from the first slow step, 190 ms before
         * now: not yet a token 1 ms before the refill time ... */
        now += (uint64_t)NODE_STALL_EVENT_REFILL_MS * 1000 - 190000 - 1000;
        assert_int_equal(node_stall_note(&s, 2000, 100000, 0, now, &sl), 0);
        /* ... one at it, carrying the held ones and their longest */
        now += 1000;
        assert_int_equal(node_stall_note(&s, 2001, 100000, 0, now, &sl), 1);
        assert_int_equal(sl.held, 20 - NODE_STALL_EVENT_BURST + 1);
        assert_true(sl.held_max_us == 119000);
        assert_int_equal(sl.held_max_step, 1019);
        assert_int_equal(s.held, 0);
        assert_int_equal(s.st.slow, 22);
}

static int cmp_dbl(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return (x > y) - (x < y);
}

static void test_median_random(void **state)
{
        struct node_stall s;
        struct node_stall_slow sl;
        double all[1000], win[NODE_STALL_WINDOW], want;
        uint64_t rng = g_seed;

        (void)state;
        node_stall_init(&s);
        for (int i = 0; i < 1000; i++) {
                /* few distinct values: duplicates leave the window too */
                all[i] = 1000.0 * (double)(gn_splitmix64(&rng) % 50);
                node_stall_note(&s, (uint64_t)i, all[i], 0, (uint64_t)i * 10000,
                                &sl);
                if (i + 1 < NODE_STALL_WARMUP)
                        continue;
                int n = i + 1 < NODE_STALL_WINDOW ? i + 1 : NODE_STALL_WINDOW;
                memcpy(win, &all[i + 1 - n], (size_t)n * sizeof(win[0]));
                qsort(win, (size_t)n, sizeof(win[0]), cmp_dbl);
                want = n % 2 ? win[n / 2] : 0.5 * (win[n / 2 - 1] + win[n / 2]);
                if (node_stall_pace_us(&s) != want)
                        fail_msg("seed %llu, step %d: median %.0f, want "
                                 "%.0f",
                                 (unsigned long long)g_seed, i,
                                 node_stall_pace_us(&s), want);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_warmup_and_bound),
            cmocka_unit_test(test_median_holds),
            cmocka_unit_test(test_window_take),
            cmocka_unit_test(test_events_bucket),
            cmocka_unit_test(test_median_random),
        };

        g_seed = gn_test_seed("test_stall", 0x57a11ULL);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
