/*
 * test_cli_options.c - the daemon's command line and event log: every
 * option's value is parsed exactly, each kind of bad value is refused with
 * one line naming the option, defaults and cross-option rules hold, and
 * the event log writes valid, complete JSON lines (checked field by field).
 * The random command lines of the fuzz case come from GN_SEED (printed).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/gn_rng.h"
#include "test_seed.h"
#include "service/evlog.h"
#include "config/options.h"

static uint64_t g_seed;

/* Parse a NULL-terminated list of arguments (argv[0] added). */
static int parse(struct node_options *o, char *err, size_t errlen, ...)
{
        char *argv[64];
        int argc = 0;
        va_list ap;
        char *a;

        argv[argc++] = "gossipnode";
        va_start(ap, errlen);
        while ((a = va_arg(ap, char *)) != NULL && argc < 63)
                argv[argc++] = a;
        va_end(ap);
        argv[argc] = NULL;
        err[0] = '\0';
        return node_options_parse(argc, argv, o, err, errlen);
}

static void test_defaults(void **state)
{
        struct node_options o;
        char err[256];

        assert_int_equal(parse(&o, err, sizeof(err), NULL), 0);
        assert_null(o.peers_path);
        assert_string_equal(o.data_dir, "/usr/share/datasets/fashion-mnist");
        assert_string_equal(o.model, "784-512-10");
        assert_int_equal(o.batch, 100);
        assert_int_equal(o.optimizer, NODE_OPTIM_SGD);
        assert_int_equal(o.lr_schedule, NODE_SCHED_COSINE);
        assert_true(fabsf(o.lr - 0.05f) < 1e-7f);
        assert_true(fabsf(o.momentum - 0.9f) < 1e-7f);
        assert_int_equal(o.momentum_kind, NODE_MOMENTUM_LOCAL); /* alone */
        assert_int_equal(o.shard_i, 0);
        assert_int_equal(o.shard_n, 1);
        assert_int_equal(o.epochs, 1); /* no stop criterion: one epoch */
        assert_int_equal(o.steps, 0);
        assert_int_equal(o.codec, NODE_CODEC_NONE);
        assert_int_equal(o.params_codec, NODE_CODEC_FP16);
        assert_int_equal(o.params_parts, 4);
        assert_int_equal(o.avg_every, 1);
        assert_int_equal(o.wait_ms, 2);
        assert_int_equal(o.fill_batches, 8);
        assert_int_equal(o.fill_size, 0); /* batch / 4 */
        assert_int_equal(o.avg_lag, 3);
        assert_int_equal(o.staleness, NODE_OPT_STALENESS_DEFAULT);
        assert_int_equal(o.log_level, NODE_LOG_INFO);
}

static void test_values(void **state)
{
        struct node_options o;
        char err[256];

        assert_int_equal(
            parse(&o, err, sizeof(err), "--batch", "32", "--lr", "0.125",
                  "--momentum", "0.5", "--weight-decay", "0.0005",
                  "--optimizer", "adam", "--lr-schedule", "cosine", "--warmup",
                  "10", "--seed", "18446744073709551615", "--threads", "2",
                  "--shard", "2/3", "--steps", "500", "--time-budget", "1.5",
                  "--target-acc", "85.5", "--eval-every", "50",
                  "--checkpoint-dir", "/tmp/x", "--checkpoint-every", "100",
                  "--codec", "topk:1000", "--partitions", "4", "--staleness",
                  "8", "--avg-every", "0", "--name", "pi-1.a_b", "--log-level",
                  "debug", "--event-log", "/tmp/ev", "--fresh", "--wait-ms",
                  "5", "--model=cnn", NULL),
            0);
        assert_int_equal(o.batch, 32);
        assert_true(o.lr == 0.125f);
        assert_true(o.momentum == 0.5f);
        assert_int_equal(o.optimizer, NODE_OPTIM_ADAM);
        assert_int_equal(o.lr_schedule, NODE_SCHED_COSINE);
        assert_int_equal(o.warmup, 10);
        assert_true(o.seed == UINT64_MAX);
        assert_int_equal(o.threads, 2);
        assert_int_equal(o.shard_i, 2);
        assert_int_equal(o.shard_n, 3);
        assert_int_equal(o.steps, 500);
        assert_int_equal(o.epochs, 0); /* a criterion was given */
        assert_true(o.time_budget_s == 1.5);
        assert_true(o.target_acc == 85.5);
        assert_int_equal(o.eval_every, 50);
        assert_string_equal(o.checkpoint_dir, "/tmp/x");
        assert_int_equal(o.checkpoint_every, 100);
        assert_int_equal(o.codec, NODE_CODEC_TOPK);
        assert_int_equal(o.topk, 1000);
        assert_int_equal(o.partitions, 4);
        assert_int_equal(o.staleness, 8);
        assert_int_equal(o.avg_every, 0);
        assert_string_equal(o.name, "pi-1.a_b");
        assert_int_equal(o.log_level, NODE_LOG_DEBUG);
        assert_int_equal(o.fresh, 1);
        assert_int_equal(o.wait_ms, 5);
        assert_string_equal(o.model, "cnn");
        /* adam's default rate when --lr is absent */
        assert_int_equal(
            parse(&o, err, sizeof(err), "--optimizer", "adam", NULL), 0);
        assert_true(o.lr == 0.001f);
}

/* --partition and its seed: the scheme parsed exactly, the seed taken
 * from --seed unless given, in either order. */
/* --shuffle-samples / --shuffle-reservoir: off and 2000 by default */
static void test_shuffle(void **state)
{
        struct node_options o;
        char err[256];

        (void)state;
        assert_int_equal(parse(&o, err, sizeof(err), NULL), 0);
        assert_int_equal(o.shuffle_samples, 0);
        assert_int_equal(o.shuffle_reservoir, 2000);
        assert_int_equal(parse(&o, err, sizeof(err), "--shuffle-samples", "4",
                               "--shuffle-reservoir", "500", NULL),
                         0);
        assert_int_equal(o.shuffle_samples, 4);
        assert_int_equal(o.shuffle_reservoir, 500);
        assert_int_equal(
            parse(&o, err, sizeof(err), "--shuffle-samples", "256", NULL), 0);
        assert_int_equal(o.shuffle_samples, 256);
}

static void test_partition(void **state)
{
        struct node_options o;
        char err[256];

        (void)state;
        assert_int_equal(parse(&o, err, sizeof(err), NULL), 0);
        assert_int_equal(o.partition.kind, NN_PART_IID);
        assert_true(o.partition.seed == 1); /* --seed's default */
        assert_int_equal(parse(&o, err, sizeof(err), "--partition",
                               "dirichlet:0.25", "--shard", "1/4", "--seed",
                               "9", NULL),
                         0);
        assert_int_equal(o.partition.kind, NN_PART_DIRICHLET);
        assert_true(o.partition.alpha == 0.25);
        assert_true(o.partition.seed == 9);
        assert_int_equal(parse(&o, err, sizeof(err), "--partition-seed", "7",
                               "--partition", "classes:3", "--seed", "9", NULL),
                         0);
        assert_int_equal(o.partition.kind, NN_PART_CLASSES);
        assert_int_equal(o.partition.k, 3);
        assert_true(o.partition.seed == 7);
        assert_int_equal(parse(&o, err, sizeof(err), "--partition=iid", NULL),
                         0);
        assert_int_equal(o.partition.kind, NN_PART_IID);
        /* --partitions (Ako) is another option, not an abbreviation */
        assert_int_equal(parse(&o, err, sizeof(err), "--partitions", "4", NULL),
                         0);
        assert_int_equal(o.partitions, 4);
        assert_int_equal(o.partition.kind, NN_PART_IID);
        assert_int_equal(parse(&o, err, sizeof(err), "--partition", "4", NULL),
                         -EINVAL);
        assert_string_equal(err, "--partition: '4' is not iid, dirichlet:A "
                                 "(0.001 <= A <= 1e6), classes:K or shards:K "
                                 "(1 <= K <= 256)");
}

/* Each bad value: -EINVAL, one line, naming the option. */
static void test_bad_values(void **state)
{
        static const char *bad[][2] = {
            {"--batch", "0"},
            {"--batch", "abc"},
            {"--batch", "-5"},
            {"--batch", "12x"},
            {"--batch", ""},
            {"--lr", "0"},
            {"--lr", "-1"},
            {"--lr", "nan"},
            {"--lr", "inf"},
            {"--lr", "1e400"},
            {"--momentum", "1"},
            {"--momentum", "-0.1"},
            {"--weight-decay", "-1"},
            {"--optimizer", "rmsprop"},
            {"--lr-schedule", "exp"},
            {"--seed", "-1"},
            {"--seed", "99999999999999999999"},
            {"--threads", "0"},
            {"--shard", "3/3"},
            {"--shard", "1"},
            {"--shard", "a/b"},
            {"--shard", "0/0"},
            {"--shard", "1/-2"},
            {"--epochs", "0"},
            {"--steps", "0"},
            {"--time-budget", "0"},
            {"--time-budget", "x"},
            {"--target-acc", "101"},
            {"--target-acc", "0"},
            {"--eval-every", "0"},
            {"--checkpoint-every", "0"},
            {"--codec", "fp8"},
            {"--codec", "topk:0"},
            {"--codec", "topk:"},
            {"--partitions", "0"},
            {"--staleness", "x"},
            {"--listen", "nohost"},
            {"--listen", "1.2.3.4:0"},
            {"--listen", "1.2.3.4:70000"},
            {"--listen", ":80"},
            {"--metrics", "x"},
            {"--log-level", "trace"},
            {"--name", "bad name"},
            {"--name", "ab\"c"},
            {"--name", ""},
            {"--wait-ms", "60001"},
            {"--fill-batches", "9"},
            {"--fill-batches", "-1"},
            {"--fill-size", "0"},
            {"--avg-lag", "0"},
            {"--avg-lag", "7"},
            {"--data", ""},
            {"--partition", ""},
            {"--partition", "skew"},
            {"--partition", "dirichlet"},
            {"--partition", "dirichlet:0"},
            {"--partition", "dirichlet:-0.5"},
            {"--partition", "dirichlet:nan"},
            {"--partition", "dirichlet:0.5,1"},
            {"--partition", "classes:0"},
            {"--partition", "classes:257"},
            {"--partition", "classes:two"},
            {"--partition-seed", "-1"},
            {"--partition-seed", "x"},
            {"--shuffle-samples", "257"},
            {"--shuffle-samples", "-1"},
            {"--shuffle-reservoir", "0"},
            {"--shuffle-reservoir", "1000001"},
        };
        struct node_options o;
        char err[256], want[64];

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int rc =
                    parse(&o, err, sizeof(err), bad[i][0], bad[i][1], NULL);
                if (rc != -EINVAL)
                        fail_msg("%s '%s' gave %d", bad[i][0], bad[i][1], rc);
                snprintf(want, sizeof(want), "%s:", bad[i][0]);
                if (strncmp(err, want, strlen(want)) != 0)
                        fail_msg("%s '%s': message '%s'", bad[i][0], bad[i][1],
                                 err);
                assert_null(strchr(err, '\n'));
        }
}

static void test_structure_errors(void **state)
{
        struct node_options o;
        char err[256];

        assert_int_equal(parse(&o, err, sizeof(err), "--bogus", NULL), -EINVAL);
        assert_non_null(strstr(err, "--bogus"));
        assert_int_equal(parse(&o, err, sizeof(err), "--batch", NULL), -EINVAL);
        assert_non_null(strstr(err, "--batch"));
        assert_int_equal(parse(&o, err, sizeof(err), "stray", NULL), -EINVAL);
        assert_non_null(strstr(err, "stray"));
        assert_int_equal(parse(&o, err, sizeof(err), "--peers", "p", NULL),
                         -EINVAL);
        assert_non_null(strstr(err, "--key"));
        assert_int_equal(
            parse(&o, err, sizeof(err), "--checkpoint-every", "5", NULL),
            -EINVAL);
        assert_non_null(strstr(err, "--checkpoint-dir"));
        /* extra batches larger than the step's own batch */
        assert_int_equal(parse(&o, err, sizeof(err), "--batch", "50",
                               "--fill-size", "51", NULL),
                         -EINVAL);
        assert_non_null(strstr(err, "--fill-size 51"));
        assert_int_equal(parse(&o, err, sizeof(err), "--batch", "50",
                               "--fill-size", "50", "--fill-batches", "0",
                               "--avg-lag", "6", NULL),
                         0);
        assert_int_equal(o.fill_size, 50);
        assert_int_equal(o.fill_batches, 0);
        assert_int_equal(o.avg_lag, 6);
        assert_int_equal(parse(&o, err, sizeof(err), "--help", NULL),
                         NODE_OPT_HELP);
        assert_int_equal(parse(&o, err, sizeof(err), "--version", NULL),
                         NODE_OPT_VERSION);
}

/* The momentum's kind: quasi-global in a cluster unless told, local
 * alone unless told; anything else is refused by name. */
static void test_momentum_kind(void **state)
{
        struct node_options o;
        char err[256];

        assert_int_equal(
            parse(&o, err, sizeof(err), "--peers", "p", "--key", "k", NULL), 0);
        assert_int_equal(o.momentum_kind, NODE_MOMENTUM_QUASI_GLOBAL);
        assert_int_equal(parse(&o, err, sizeof(err), "--peers", "p", "--key",
                               "k", "--momentum-kind", "local", NULL),
                         0);
        assert_int_equal(o.momentum_kind, NODE_MOMENTUM_LOCAL);
        assert_int_equal(parse(&o, err, sizeof(err), "--momentum-kind",
                               "quasi-global", NULL),
                         0);
        assert_int_equal(o.momentum_kind, NODE_MOMENTUM_QUASI_GLOBAL);
        assert_int_equal(
            parse(&o, err, sizeof(err), "--momentum-kind", "global", NULL),
            -EINVAL);
        assert_non_null(strstr(err, "--momentum-kind"));
        assert_non_null(strstr(err, "local or quasi-global"));
}

/* --help names every long option the parser accepts. */
static void test_help_complete(void **state)
{
        static const char *opts[] = {
            "--peers",
            "--key",
            "--listen",
            "--data",
            "--model",
            "--batch",
            "--lr ",
            "--momentum",
            "--momentum-kind",
            "--weight-decay",
            "--optimizer",
            "--lr-schedule",
            "--warmup",
            "--seed",
            "--threads",
            "--shard",
            "--epochs",
            "--steps",
            "--time-budget",
            "--target-acc",
            "--eval-every",
            "--checkpoint-dir",
            "--checkpoint-every",
            "--fresh",
            "--control",
            "--metrics",
            "--log-level",
            "--event-log",
            "--codec",
            "--partitions",
            "--staleness",
            "--avg-every",
            "--wait-ms",
            "--params-codec",
            "--params-parts",
            "--avg-weight",
            "--name",
            "--progress-every",
            "--help",
            "--version",
        };
        const char *h = node_options_help();

        for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
                if (!strstr(h, opts[i]))
                        fail_msg("--help lacks %s", opts[i]);
}

/* Random argument soup never crashes and always gives 0/help/-EINVAL with
 * a message on error. */
static void test_fuzz(void **state)
{
        static const char *words[] = {
            "--batch", "--lr",   "--shard", "--codec", "--name", "--steps",
            "1",       "0",      "1/2",     "topk:3",  "x",      "-1",
            "--",      "--seed", "1e9",     "",        "fp16",   "--fresh",
        };
        const size_t nw = sizeof(words) / sizeof(words[0]);
        uint64_t s = g_seed;
        struct node_options o;
        char err[256], *argv[12];

        for (int round = 0; round < 2000; round++) {
                int argc = 1 + (int)(gn_splitmix64(&s) % 10);
                argv[0] = "gossipnode";
                for (int i = 1; i < argc; i++)
                        argv[i] = (char *)words[gn_splitmix64(&s) % nw];
                argv[argc] = NULL;
                err[0] = '\0';
                int rc = node_options_parse(argc, argv, &o, err, sizeof(err));
                assert_true(rc == 0 || rc == NODE_OPT_HELP ||
                            rc == NODE_OPT_VERSION || rc == -EINVAL);
                if (rc == -EINVAL)
                        assert_true(err[0] != '\0');
                if (rc == 0) {
                        assert_true(o.batch >= 1);
                        assert_true(o.shard_i < o.shard_n);
                        assert_true(o.lr > 0);
                }
        }
}

/* Read the whole file into a static buffer. */
static const char *slurp(const char *path)
{
        static char buf[8192];
        FILE *f = fopen(path, "r");
        size_t n;

        assert_non_null(f);
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        return buf;
}

static void test_evlog(void **state)
{
        char path[] = "/tmp/gn-evlog-XXXXXX";
        struct node_evlog *l;
        const char *text;
        char line[1024];
        int fd = mkstemp(path), n = 0;

        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(node_evlog_open(path, "n\"1", &l), 0);
        node_evlog_start(l, "784-512-10", 407050, 1, 3, 7, 0, 2);
        node_evlog_step(l, 600, 1, 0.48, 86.1, 41200.0, 0.05, 61.25, 2);
        node_evlog_eval(l, 600, 1, 85.0, NAN, 0.4, 12.5, 12.0, 24);
        node_evlog_catch_up(l, 640, 32);
        node_evlog_member(l, "pi-2", "suspect");
        node_evlog_join(l, "pi-2", 1200);
        node_evlog_slow_step(l, 1250, 180.5, 40.25, 150.0, 3, 0, 0);
        node_evlog_stop(l, "target", 1800, 3, 88.25, 0, 0);
        node_evlog_close(l);
        node_evlog_step(NULL, 1, 1, 1, 1, 1, 1, 1, 1); /* no log: no-op */
        text = slurp(path);
        unlink(path);
        for (const char *p = text; *p; n++) {
                const char *nl = strchr(p, '\n');
                assert_non_null(nl); /* every line complete */
                memcpy(line, p, (size_t)(nl - p));
                line[nl - p] = '\0';
                assert_true(strncmp(line, "{\"t_ms\":", 8) == 0);
                assert_true(strstr(line, ",\"node\":\"n\\\"1\",") != NULL);
                assert_int_equal(line[nl - p - 1], '}');
                p = nl + 1;
        }
        assert_int_equal(n, 8);
        assert_non_null(strstr(text,
                               "\"ev\":\"start\",\"model\":\"784-512-10\","
                               "\"params\":407050,\"shard\":\"1/3\","
                               "\"seed\":7,\"step\":0,\"peers\":2}"));
        assert_non_null(strstr(text, "\"ev\":\"step\",\"step\":600,\"epoch\":1,"
                                     "\"loss\":0.48000,\"acc\":86.100,"
                                     "\"sps\":41200.0,\"lr\":0.050000,"
                                     "\"max_ms\":61.2,\"slow\":2}"));
        assert_non_null(strstr(text,
                               "\"ev\":\"slow_step\",\"step\":1250,"
                               "\"ms\":180.5,\"pace_ms\":40.2,"
                               "\"wait_ms\":150.0,\"held\":3,"
                               "\"held_max_ms\":null,\"held_max_step\":0}"));
        assert_non_null(strstr(text,
                               "\"ev\":\"eval\",\"step\":600,\"epoch\":1,"
                               "\"train_acc\":85.000,\"test_acc\":null,"
                               "\"test_loss\":0.40000,\"train_s\":12.5000,"
                               "\"compute_s\":12.0000,\"skipped\":24}"));
        assert_non_null(strstr(text, "\"ev\":\"catch_up\",\"step\":640,"
                                     "\"skipped\":32}"));
        assert_non_null(strstr(text, "\"ev\":\"member\",\"peer\":\"pi-2\","
                                     "\"state\":\"suspect\"}"));
        assert_non_null(strstr(text, "\"ev\":\"join\",\"peer\":\"pi-2\","
                                     "\"step\":1200}"));
        assert_non_null(strstr(text, "\"ev\":\"stop\",\"reason\":\"target\","
                                     "\"step\":1800,\"epoch\":3,"
                                     "\"test_acc\":88.250,\"max_ms\":null,"
                                     "\"slow\":0}"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defaults),
            cmocka_unit_test(test_values),
            cmocka_unit_test(test_partition),
            cmocka_unit_test(test_shuffle),
            cmocka_unit_test(test_bad_values),
            cmocka_unit_test(test_momentum_kind),
            cmocka_unit_test(test_structure_errors),
            cmocka_unit_test(test_help_complete),
            cmocka_unit_test(test_fuzz),
            cmocka_unit_test(test_evlog),
        };

        g_seed = gn_test_seed("test_cli_options", 0x5eed0001ULL);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
