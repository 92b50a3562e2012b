/*
 * test_settings.c - cluster settings agreed at join (gossip/settings.h):
 * the canonical list, its digest and the first difference, then real
 * nodes on the simulated network (tests/sim) in virtual time: a node
 * started with another seed is refused by every member within a second,
 * on both sides and with the setting named, stays out of every view, and
 * is taken in once it restarts with the cluster's settings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "gossip/gossip.h"
#include "gossip/settings.h"
#include "sim.h"
#include "test_seed.h"

static void set2(struct gossip_settings *s, const char *seed, const char *model)
{
        const char *names[] = {"seed", "model", "wire"};
        const char *values[] = {seed, model, "1"};

        assert_int_equal(gossip_settings_set(s, names, values, 3), 0);
}

static void test_canonical_and_digest(void **state)
{
        struct gossip_settings a, b;
        const char *n1[] = {"b", "a"}, *v1[] = {"2", "1"};
        const char *n2[] = {"a", "b"}, *v2[] = {"1", "2"};
        const char *v3[] = {"1", "3"};

        (void)state;
        assert_int_equal(gossip_settings_set(&a, n1, v1, 2), 0);
        assert_int_equal(gossip_settings_set(&b, n2, v2, 2), 0);
        /* order given does not matter: names sorted, same digest */
        assert_string_equal(a.s[0].name, "a");
        assert_string_equal(a.s[1].name, "b");
        assert_true(a.digest != 0);
        assert_true(a.digest == b.digest);
        assert_int_equal(gossip_settings_set(&b, n2, v3, 2), 0);
        assert_true(a.digest != b.digest);
        /* a value moved across the name boundary is another list */
        {
                const char *n4[] = {"a", "b"}, *v4[] = {"12", ""};
                const char *v5[] = {"1", "2"};
                struct gossip_settings c, d;

                assert_int_equal(gossip_settings_set(&c, n4, v4, 2), 0);
                assert_int_equal(gossip_settings_set(&d, n4, v5, 2), 0);
                assert_true(c.digest != d.digest);
        }
}

static void test_refused_input(void **state)
{
        struct gossip_settings s;
        const char *dup[] = {"a", "a"}, *v[] = {"1", "2"};
        const char *empty[] = {""}, *ctl[] = {"a\x01"};
        const char *names[GOSSIP_SETTINGS_MAX + 1];
        const char *vals[GOSSIP_SETTINGS_MAX + 1];
        char many[GOSSIP_SETTINGS_MAX + 1][4];
        char longv[GOSSIP_SETTING_VALUE_MAX + 1];

        (void)state;
        assert_int_equal(gossip_settings_set(&s, dup, v, 2), GOSSIP_EINVAL);
        assert_int_equal(gossip_settings_set(&s, empty, v, 1), GOSSIP_EINVAL);
        assert_int_equal(gossip_settings_set(&s, ctl, v, 1), GOSSIP_EINVAL);
        memset(longv, 'x', sizeof(longv) - 1);
        longv[sizeof(longv) - 1] = 0;
        vals[0] = longv;
        names[0] = "a";
        assert_int_equal(gossip_settings_set(&s, names, vals, 1),
                         GOSSIP_EINVAL);
        longv[GOSSIP_SETTING_VALUE_MAX - 1] = 0; /* 63 bytes: fits */
        assert_int_equal(gossip_settings_set(&s, names, vals, 1), 0);
        for (int i = 0; i <= GOSSIP_SETTINGS_MAX; i++) {
                snprintf(many[i], sizeof(many[i]), "k%d", i);
                names[i] = many[i];
                vals[i] = "v";
        }
        assert_int_equal(
            gossip_settings_set(&s, names, vals, GOSSIP_SETTINGS_MAX + 1),
            GOSSIP_EINVAL);
        assert_int_equal(
            gossip_settings_set(&s, names, vals, GOSSIP_SETTINGS_MAX), 0);
}

static void test_diff_names_first_difference(void **state)
{
        struct gossip_settings a, b;
        const char *name, *ours, *theirs;
        const char *na[] = {"model", "seed"}, *va[] = {"784-10", "1"};
        const char *nb[] = {"model", "parts", "seed"};
        const char *vb[] = {"784-10", "4", "2"};

        (void)state;
        set2(&a, "1", "784-10");
        set2(&b, "1", "784-10");
        assert_int_equal(gossip_settings_diff(&a, &b, &name, &ours, &theirs),
                         0);
        set2(&b, "2", "784-10");
        assert_int_equal(gossip_settings_diff(&a, &b, &name, &ours, &theirs),
                         1);
        assert_string_equal(name, "seed");
        assert_string_equal(ours, "1");
        assert_string_equal(theirs, "2");
        /* a setting only one side has: named, the other side's value "" */
        assert_int_equal(gossip_settings_set(&a, na, va, 2), 0);
        assert_int_equal(gossip_settings_set(&b, nb, vb, 3), 0);
        assert_int_equal(gossip_settings_diff(&a, &b, &name, &ours, &theirs),
                         1);
        assert_string_equal(name, "parts");
        assert_string_equal(ours, "");
        assert_string_equal(theirs, "4");
}

/* ---- on the simulated network ---- */

#define N 4

struct seen {
        /* refusals node i reported about node j, and the last naming */
        unsigned named[N][N], unnamed[N][N];
        uint64_t first_named_ms[N][N];
        char name[N][N][GOSSIP_SETTING_NAME_MAX];
        char ours[N][N][GOSSIP_SETTING_VALUE_MAX];
        char theirs[N][N][GOSSIP_SETTING_VALUE_MAX];
};

static struct gossip_settings cfgs[N];

static void on_refused(void *ctx, const struct gossip_member_info *m,
                       const char *name, const char *ours, const char *theirs)
{
        struct sim *s = ctx;
        struct seen *w = sim_user(s);
        long i = sim_running(s), j = sim_index_of_key(s, m->key);

        assert_true(i >= 0 && i < N && j >= 0 && j < N && i != j);
        assert_true(m->refused);
        if (!name) {
                w->unnamed[i][j]++;
                return;
        }
        if (!w->named[i][j]++)
                w->first_named_ms[i][j] = sim_now(s);
        snprintf(w->name[i][j], sizeof(w->name[i][j]), "%s", name);
        snprintf(w->ours[i][j], sizeof(w->ours[i][j]), "%s", ours);
        snprintf(w->theirs[i][j], sizeof(w->theirs[i][j]), "%s", theirs);
}

static int live(int st)
{
        return st == GOSSIP_ALIVE || st == GOSSIP_SUSPECT;
}

static bool three_together(struct sim *s, void *arg)
{
        (void)arg;
        for (size_t i = 0; i < N - 1; i++)
                for (size_t j = 0; j < N - 1; j++)
                        if (i != j && !live(sim_state(s, i, j)))
                                return false;
        return true;
}

static bool all_together(struct sim *s, void *arg)
{
        (void)arg;
        for (size_t i = 0; i < N; i++)
                for (size_t j = 0; j < N; j++)
                        if (i != j && !live(sim_state(s, i, j)))
                                return false;
        return true;
}

static void test_other_seed_refused_both_sides(void **state)
{
        struct sim_opts o = {0};
        struct sim *s = NULL;
        struct seen w;
        struct gossip_stats st;
        uint8_t keys[N][GOSSIP_KEY_BYTES];

        (void)state;
        memset(&w, 0, sizeof(w));
        for (size_t i = 0; i < N; i++)
                set2(&cfgs[i], i == N - 1 ? "2" : "1", "784-512-10");
        o.n = N;
        o.seed = gn_test_seed(__func__, 3301);
        o.delay_ms = 2;
        o.jitter_ms = 3;
        o.on_refused = on_refused;
        o.settings = cfgs;
        o.user = &w;
        assert_int_equal(sim_create(&o, &s), 0);
        /* everyone joins through node 0, node 3 (seed 2) first */
        assert_int_equal(sim_join(s, N - 1, 0), 0);
        for (size_t i = 1; i < N - 1; i++)
                assert_int_equal(sim_join(s, i, 0), 0);
        sim_run_until(s, 1000);
        /* within a second: both sides named it, with both values */
        assert_true(w.named[0][N - 1] > 0);
        assert_string_equal(w.name[0][N - 1], "seed");
        assert_string_equal(w.ours[0][N - 1], "1");
        assert_string_equal(w.theirs[0][N - 1], "2");
        assert_true(w.first_named_ms[0][N - 1] <= 1000);
        assert_true(w.named[N - 1][0] > 0);
        assert_string_equal(w.name[N - 1][0], "seed");
        assert_string_equal(w.ours[N - 1][0], "2");
        assert_string_equal(w.theirs[N - 1][0], "1");
        assert_true(w.first_named_ms[N - 1][0] <= 1000);
        /* the three agree; node 3 is in nobody's view, nobody in its */
        assert_true(sim_run_until_pred(s, 10000, 10, three_together, NULL));
        sim_run_until(s, 30000);
        for (size_t i = 0; i < N - 1; i++) {
                assert_false(live(sim_state(s, i, N - 1)));
                assert_false(live(sim_state(s, N - 1, i)));
                assert_int_equal(gossip_view(sim_node(s, i), keys, N), N - 1);
        }
        assert_int_equal(gossip_view(sim_node(s, N - 1), keys, N), 1);
        gossip_stats_get(sim_node(s, 0), &st);
        assert_true(st.rejects[-GOSSIP_ESETTINGS] > 0);
        assert_string_equal(gossip_reject_name(GOSSIP_ESETTINGS), "settings");
        /* fixed and restarted: taken in by everyone */
        set2(&cfgs[N - 1], "1", "784-512-10");
        sim_crash(s, N - 1);
        sim_run_until(s, 31000);
        assert_int_equal(sim_restart(s, N - 1), 0);
        assert_int_equal(sim_join(s, N - 1, 1), 0);
        assert_true(
            sim_run_until_pred(s, sim_now(s) + 10000, 10, all_together, NULL));
        sim_destroy(s);
}

/* Nodes that tell no settings (older ones, the simulations) refuse
 * nobody and are refused by nobody. */
static void test_no_settings_no_refusal(void **state)
{
        struct sim_opts o = {0};
        struct sim *s = NULL;
        struct seen w;
        struct gossip_settings mixed[N];

        (void)state;
        memset(&w, 0, sizeof(w));
        for (size_t i = 0; i < N; i++)
                set2(&cfgs[i], "1", "784-512-10");
        memcpy(mixed, cfgs, sizeof(mixed));
        memset(&mixed[N - 1], 0, sizeof(mixed[N - 1])); /* tells none */
        o.n = N;
        o.seed = gn_test_seed(__func__, 3301);
        o.on_refused = on_refused;
        o.settings = mixed;
        o.user = &w;
        assert_int_equal(sim_create(&o, &s), 0);
        for (size_t i = 1; i < N; i++)
                assert_int_equal(sim_join(s, i, 0), 0);
        assert_true(sim_run_until_pred(s, 10000, 10, all_together, NULL));
        for (size_t i = 0; i < N; i++)
                for (size_t j = 0; j < N; j++)
                        assert_int_equal(w.named[i][j] + w.unnamed[i][j], 0);
        sim_destroy(s);
}

int main(int argc, char **argv)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_canonical_and_digest),
            cmocka_unit_test(test_refused_input),
            cmocka_unit_test(test_diff_names_first_difference),
            cmocka_unit_test(test_other_seed_refused_both_sides),
            cmocka_unit_test(test_no_settings_no_refusal),
        };

        (void)argc;
        (void)argv;
        return cmocka_run_group_tests(tests, NULL, NULL);
}
