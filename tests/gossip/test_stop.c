/*
 * test_stop.c - the cluster-wide stop decision (gossip/stop.c): percent to
 * basis points, which LEAVE reasons end our run, first reason wins, and
 * the line a stopped node logs. The wire form is in test_wire.c, the
 * three-node run in tests/node/test_cluster_run.py (scenario stop).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "gossip/stop.h"

static struct gossip_stop target(uint64_t step, uint32_t acc, uint32_t tgt,
                                 const char *who)
{
        struct gossip_stop s = {0};

        s.reason = GOSSIP_STOP_TARGET;
        s.step = step;
        s.acc_bp = acc;
        s.target_bp = tgt;
        strcpy(s.origin, who);
        return s;
}

static void test_bp(void **state)
{
        (void)state;
        assert_int_equal(gossip_stop_bp(88.0), 8800);
        assert_int_equal(gossip_stop_bp(88.125), 8813); /* rounded */
        assert_int_equal(gossip_stop_bp(0.004), 0);
        assert_int_equal(gossip_stop_bp(0.005), 1);
        assert_int_equal(gossip_stop_bp(100.0), 10000);
        assert_int_equal(gossip_stop_bp(250.0), 10000);
        assert_int_equal(gossip_stop_bp(-3.0), 0);
        assert_int_equal(gossip_stop_bp(NAN), 0);
}

static void test_honoured(void **state)
{
        struct gossip_stop s = target(1400, 8812, 8800, "a");

        (void)state;
        assert_true(gossip_stop_honoured(&s, 8800));
        assert_true(gossip_stop_honoured(&s, 8812));  /* exactly ours */
        assert_false(gossip_stop_honoured(&s, 8813)); /* ours is higher */
        assert_false(gossip_stop_honoured(&s, 0));    /* we have none */
        s.reason = GOSSIP_STOP_NONE;
        assert_false(gossip_stop_honoured(&s, 8800));
        s.reason = 7; /* a later version's reason: not acted on */
        assert_false(gossip_stop_honoured(&s, 8800));
        assert_false(gossip_stop_honoured(NULL, 8800));
}

static void test_first_wins(void **state)
{
        struct gossip_stop held = {0}, a = target(100, 9000, 8800, "a"),
                           b = target(90, 9100, 8800, "b"),
                           low = target(80, 8000, 7500, "c");

        (void)state;
        assert_int_equal(gossip_stop_take(&held, &low, 8800), 0);
        assert_int_equal(held.reason, GOSSIP_STOP_NONE); /* untouched */
        assert_int_equal(gossip_stop_take(&held, &a, 8800), 1);
        assert_int_equal(gossip_stop_take(&held, &b, 8800), 0);
        assert_string_equal(held.origin, "a");
        assert_int_equal(held.step, 100);
        assert_int_equal(held.acc_bp, 9000);
}

static void test_format(void **state)
{
        struct gossip_stop s = target(1432, 8812, 8800, "pi-kitchen");
        char buf[160];
        int n;

        (void)state;
        n = gossip_stop_format(&s, buf, sizeof(buf));
        assert_string_equal(buf, "stopped: pi-kitchen reached target 88.0% "
                                 "at step 1432 (test accuracy 88.12%)");
        assert_int_equal(n, (int)strlen(buf));
        s.origin[0] = 0;
        gossip_stop_format(&s, buf, sizeof(buf));
        assert_non_null(strstr(buf, "stopped: a peer reached"));
        gossip_stop_format(&s, buf, 10); /* cut, terminated */
        assert_int_equal(strlen(buf), 9);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bp),
            cmocka_unit_test(test_honoured),
            cmocka_unit_test(test_first_wins),
            cmocka_unit_test(test_format),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
