/*
 * test_settings_build.c - the node's cluster settings from its options
 * (node/config/settings.c): the exact list for the defaults, one option
 * changed names exactly that setting with both values, options that are
 * deliberately not settings change nothing, and a long model spec is cut
 * to fit yet still told apart from another that differs past the cut;
 * the digest of the default list is docs/protocol.md's vector; with an
 * authority and no --seed the seed is the authority's (protocol.md 11.1's
 * vector), and --seed still wins.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/options.h"
#include "config/settings.h"
#include "base/gn_endian.h"
#include "test_doc.h"

/* The settings of a command line (NULL-terminated, argv[0] added). */
static void build(struct gossip_settings *s, size_t nparams, ...)
{
        struct node_options o;
        char *argv[32], err[256];
        int argc = 0;
        va_list ap;
        char *a;

        argv[argc++] = "gossipnode";
        va_start(ap, nparams);
        while ((a = va_arg(ap, char *)) != NULL && argc < 31)
                argv[argc++] = a;
        va_end(ap);
        argv[argc] = NULL;
        assert_int_equal(node_options_parse(argc, argv, &o, err, sizeof(err)),
                         0);
        assert_int_equal(node_settings_build(&o, nparams, s), 0);
}

static void test_defaults(void **state)
{
        static const char *const want[][2] = {
            {"adapt", "on"},    {"avg_every", "1"},    {"model", "784-512-10"},
            {"params", "1234"}, {"params_parts", "4"}, {"seed", "1"}};
        struct gossip_settings s;

        (void)state;
        build(&s, 1234, NULL);
        assert_int_equal(s.n, 6);
        for (size_t i = 0; i < 6; i++) {
                assert_string_equal(s.s[i].name, want[i][0]);
                assert_string_equal(s.s[i].value, want[i][1]);
        }
        assert_true(s.digest == gossip_settings_digest(s.s, s.n));
}

/* Each option that is a setting: changed alone, the diff names it with
 * both values. */
static void test_each_setting(void **state)
{
        static const struct {
                const char *opt, *val, *name, *ours, *theirs;
                size_t nparams;
        } cases[] = {
            {"--seed", "2", "seed", "1", "2", 1234},
            {"--params-parts", "8", "params_parts", "4", "8", 1234},
            {"--avg-every", "4", "avg_every", "1", "4", 1234},
            {"--adapt", "off", "adapt", "on", "off", 1234},
            {"--model", "784-64-10", "model", "784-512-10", "784-64-10", 1234},
            {"--seed", "1", "params", "1234", "99", 99},
        };
        struct gossip_settings ours, theirs;
        const char *name, *a, *b;

        (void)state;
        build(&ours, 1234, NULL);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                build(&theirs, cases[i].nparams, cases[i].opt, cases[i].val,
                      NULL);
                assert_true(theirs.digest != ours.digest);
                assert_int_equal(
                    gossip_settings_diff(&ours, &theirs, &name, &a, &b), 1);
                assert_string_equal(name, cases[i].name);
                assert_string_equal(a, cases[i].ours);
                assert_string_equal(b, cases[i].theirs);
        }
}

/* Options left out on purpose (docs/design.md): the same digest.
 * --adapt cpu follows the agreed period as "on" does: the same value. */
static void test_not_settings(void **state)
{
        struct gossip_settings ours, theirs;

        (void)state;
        build(&ours, 1234, NULL);
        build(&theirs, 1234, "--shard", "2/5", "--params-codec", "int8",
              "--codec", "fp16", "--wait-ms", "0", "--staleness", "4", "--lr",
              "0.1", "--robust", "off", "--shuffle-samples", "8", "--adapt",
              "cpu", NULL);
        assert_true(theirs.digest == ours.digest);
}

static void test_long_spec(void **state)
{
        /* 78 bytes, canonical already; differ only past byte 44 */
        const char *a = "1x28x28-c32k3-c32k3-p2-c64k3-c64k3-p2-c64k3-c64k3-"
                        "p7-256-128-64-10";
        const char *b = "1x28x28-c32k3-c32k3-p2-c64k3-c64k3-p2-c64k3-c64k3-"
                        "p7-256-128-32-10";
        struct gossip_settings sa, sb;
        const char *name, *x, *y;

        (void)state;
        build(&sa, 1000, "--model", a, NULL);
        build(&sb, 1000, "--model", b, NULL);
        assert_int_equal(gossip_settings_diff(&sa, &sb, &name, &x, &y), 1);
        assert_string_equal(name, "model");
        assert_true(strlen(x) < GOSSIP_SETTING_VALUE_MAX);
        assert_int_equal(strncmp(x, a, 44), 0);
        assert_int_equal(x[44], '~');
        assert_int_equal(strlen(x), 44 + 1 + 16);
        assert_string_not_equal(x, y);
        assert_true(strlen(a) >= GOSSIP_SETTING_VALUE_MAX);
}

/* protocol.md 3.2: the default list with the default model's 407050
 * parameters hashes to the documented bytes (a third party's check). */
static void test_doc_vector(void **state)
{
        char *doc = gn_test_read_file(GN_SOURCE_DIR "/docs/protocol.md");
        struct gossip_settings s;
        uint8_t want[8];

        (void)state;
        assert_non_null(doc);
        assert_int_equal(gn_test_doc_vector(doc, "settings-digest", want, 8),
                         8);
        free(doc);
        build(&s, 407050, NULL);
        assert_true(s.digest == gn_le64_get(want));
}

/* protocol.md 11.1: the seed of 12.5's authority; a node with that
 * authority and no --seed takes it (and its cut follows), one with --seed
 * keeps its own, and so does --partition-seed. */
static void test_authority_seed(void **state)
{
        char *doc = gn_test_read_file(GN_SOURCE_DIR "/docs/protocol.md");
        uint8_t pk[32], want[8];
        struct node_options o;
        char *a1[] = {"gossipnode", NULL};
        char *a2[] = {"gossipnode", "--seed", "7", NULL};
        char *a3[] = {"gossipnode", "--partition-seed", "9", NULL};
        char err[256];
        uint64_t seed;

        (void)state;
        assert_non_null(doc);
        assert_int_equal(gn_test_doc_vector(doc, "authority_pk", pk, 32), 32);
        assert_int_equal(gn_test_doc_vector(doc, "authority_seed", want, 8), 8);
        free(doc);
        seed = node_settings_authority_seed(pk);
        assert_true(seed == gn_le64_get(want));

        assert_int_equal(node_options_parse(1, a1, &o, err, sizeof(err)), 0);
        node_settings_seed_from_authority(&o, pk);
        assert_true(o.seed == seed && o.partition.seed == seed);

        assert_int_equal(node_options_parse(3, a2, &o, err, sizeof(err)), 0);
        node_settings_seed_from_authority(&o, pk);
        assert_true(o.seed == 7 && o.partition.seed == 7);

        assert_int_equal(node_options_parse(3, a3, &o, err, sizeof(err)), 0);
        node_settings_seed_from_authority(&o, pk);
        assert_true(o.seed == seed && o.partition.seed == 9);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defaults),
            cmocka_unit_test(test_each_setting),
            cmocka_unit_test(test_not_settings),
            cmocka_unit_test(test_long_spec),
            cmocka_unit_test(test_doc_vector),
            cmocka_unit_test(test_authority_seed),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
