/*
 * test_partition.c - the seeded splits of nn/partition.c.
 *
 * Labels are drawn here from GN_SEED (printed; set it to replay), 6000
 * samples over 10 classes, and the partition seed is derived from it.
 * Proves: parsing accepts the three schemes and refuses every malformed
 * value; a split is a function of its seed (same seed, same owners;
 * another seed, other owners); parts computed node by node are disjoint
 * and their union is every sample (iid, dirichlet) or exactly the samples
 * of the held classes (classes:K); classes:K gives each node exactly K
 * labels; iid equals --shard; skew measured as the mean total-variation
 * distance between a node's label histogram and the whole set's falls as
 * A grows (0.1 > 0.5 > 100); every Dirichlet part holds at least
 * NN_PART_MIN_SAMPLES; nn_dataset_partition moves the right images.
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "nn/partition.h"
#include "base/gn_rng.h"
#include "test_seed.h"

enum { N = 6000, C = 10, NODES = 4 };

static uint64_t g_seed;
static uint8_t g_labels[N];

static struct nn_partition part(const char *text, uint64_t seed)
{
        struct nn_partition p;

        assert_int_equal(nn_partition_parse(text, &p), 0);
        p.seed = seed;
        return p;
}

static void test_parse(void **state)
{
        static const char *bad[] = {
            "",
            "IID",
            "iid ",
            "dirichlet",
            "dirichlet:",
            "dirichlet:0",
            "dirichlet:-1",
            "dirichlet:inf",
            "dirichlet:nan",
            "dirichlet:0.5x",
            "dirichlet: 1",
            "dirichlet:1e7",
            "classes:",
            "classes:0",
            "classes:257",
            "classes:2.5",
            "classes:-2",
            "classes:+2",
            "shards:",
            "shards:0",
            "shards:257",
            "shards:2x",
            "shard:2",
            "dirichlet:0.0001",
        };
        struct nn_partition p = {.kind = NN_PART_CLASSES, .k = 77};
        char buf[64];

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                if (nn_partition_parse(bad[i], &p) != NN_EINVAL)
                        fail_msg("accepted \"%s\"", bad[i]);
                assert_int_equal(p.k, 77); /* untouched */
        }
        assert_int_equal(nn_partition_parse("iid", &p), 0);
        assert_int_equal(p.kind, NN_PART_IID);
        assert_int_equal(nn_partition_parse("dirichlet:0.5", &p), 0);
        assert_int_equal(p.kind, NN_PART_DIRICHLET);
        assert_true(p.alpha == 0.5);
        assert_int_equal(nn_partition_format(&p, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "dirichlet:0.5");
        assert_int_equal(nn_partition_parse("classes:2", &p), 0);
        assert_int_equal(p.kind, NN_PART_CLASSES);
        assert_int_equal(p.k, 2);
        assert_int_equal(nn_partition_format(&p, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "classes:2");
        assert_int_equal(nn_partition_format(&p, buf, 4), NN_EINVAL);
        assert_int_equal(nn_partition_parse("shards:2", &p), 0);
        assert_int_equal(p.kind, NN_PART_SHARDS);
        assert_int_equal(p.k, 2);
        assert_int_equal(nn_partition_format(&p, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "shards:2");
}

/* owner[] of the whole split, checked against the per-node index lists:
 * each list ascends, no sample is in two lists, and a sample is in list
 * j exactly when owner says j. Returns the per-node sizes in size[]. */
static void check_disjoint(const struct nn_partition *p, int count,
                           const int32_t *owner, uint32_t *size)
{
        int32_t *seen = malloc(N * sizeof(*seen));

        assert_non_null(seen);
        for (uint32_t i = 0; i < N; i++)
                seen[i] = -1;
        for (int j = 0; j < count; j++) {
                uint32_t *idx, m;

                assert_int_equal(
                    nn_partition_indices(p, g_labels, N, C, j, count, &idx, &m),
                    0);
                for (uint32_t t = 0; t < m; t++) {
                        assert_true(idx[t] < N);
                        assert_true(t == 0 || idx[t] > idx[t - 1]);
                        if (seen[idx[t]] != -1)
                                fail_msg("seed %" PRIu64 ": sample %u in parts "
                                         "%d and %d",
                                         g_seed, idx[t], seen[idx[t]], j);
                        seen[idx[t]] = j;
                }
                size[j] = m;
                free(idx);
        }
        for (uint32_t i = 0; i < N; i++)
                assert_int_equal(seen[i], owner[i]);
        free(seen);
}

static void assign(const struct nn_partition *p, int count, int32_t *owner)
{
        assert_int_equal(nn_partition_assign(p, g_labels, N, C, count, owner),
                         0);
}

static void test_deterministic(void **state)
{
        static const char *schemes[] = {"dirichlet:0.5", "dirichlet:0.1",
                                        "classes:2", "classes:3", "shards:2"};
        static int32_t a[N], b[N], c[N];

        (void)state;
        for (size_t s = 0; s < sizeof(schemes) / sizeof(schemes[0]); s++) {
                struct nn_partition p = part(schemes[s], g_seed);
                struct nn_partition q = part(schemes[s], g_seed + 1);

                assign(&p, NODES, a);
                assign(&p, NODES, b);
                assign(&q, NODES, c);
                assert_memory_equal(a, b, sizeof(a));
                if (memcmp(a, c, sizeof(a)) == 0)
                        fail_msg("%s: seeds %" PRIu64 " and +1 give the same "
                                 "split",
                                 schemes[s], g_seed);
        }
}

static void test_iid_is_shard(void **state)
{
        struct nn_partition p = part("iid", g_seed);
        static int32_t owner[N];
        uint32_t size[7];

        (void)state;
        assign(&p, 7, owner);
        check_disjoint(&p, 7, owner, size);
        for (int j = 0; j < 7; j++) {
                uint64_t lo = (uint64_t)j * N / 7,
                         hi = (uint64_t)(j + 1) * N / 7;

                assert_int_equal(size[j], hi - lo);
                for (uint64_t i = lo; i < hi; i++)
                        assert_int_equal(owner[i], j);
        }
}

/* Label histograms hist[node][class] of a split. */
static void histograms(const int32_t *owner, int count, uint32_t hist[][C])
{
        memset(hist, 0, sizeof(uint32_t) * C * (size_t)count);
        for (uint32_t i = 0; i < N; i++)
                if (owner[i] >= 0)
                        hist[owner[i]][g_labels[i]]++;
}

static void test_dirichlet_covers(void **state)
{
        static const char *schemes[] = {"dirichlet:0.1", "dirichlet:0.5",
                                        "dirichlet:100"};
        static int32_t owner[N];
        uint32_t size[NODES], total;

        (void)state;
        for (size_t s = 0; s < sizeof(schemes) / sizeof(schemes[0]); s++) {
                struct nn_partition p = part(schemes[s], g_seed);

                assign(&p, NODES, owner);
                total = 0;
                check_disjoint(&p, NODES, owner, size);
                for (int j = 0; j < NODES; j++) {
                        total += size[j];
                        if (size[j] < NN_PART_MIN_SAMPLES)
                                fail_msg("%s seed %" PRIu64 ": node %d holds "
                                         "%u samples",
                                         schemes[s], g_seed, j, size[j]);
                }
                assert_int_equal(total, N); /* union: every sample */
        }
}

/* At A = 0.01 over 8 nodes nearly every class lands on one node, so a
 * first draw almost always starves some node: the redraw must not. */
static void test_dirichlet_redraws(void **state)
{
        struct nn_partition p = part("dirichlet:0.01", g_seed);
        static int32_t owner[N];
        uint32_t size[6];

        (void)state;
        assign(&p, 6, owner);
        check_disjoint(&p, 6, owner, size);
        for (int j = 0; j < 6; j++)
                if (size[j] < NN_PART_MIN_SAMPLES)
                        fail_msg("seed %" PRIu64 ": node %d holds %u", g_seed,
                                 j, size[j]);
}

static void test_classes_exact(void **state)
{
        static int32_t owner[N];
        uint32_t size[10], hist[10][C], total = 0, whole[C] = {0};
        /* (K, nodes, classes used): 4*2 < 10 uses 8; 4*3 and 10*1 all */
        static const int cases[][3] = {
            {2, 4, 8}, {3, 4, 10}, {1, 10, 10}, {10, 4, 10}};

        (void)state;
        for (uint32_t i = 0; i < N; i++)
                whole[g_labels[i]]++;
        for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
                char text[32];
                int k = cases[t][0], nodes = cases[t][1], used = 0;
                struct nn_partition p;

                snprintf(text, sizeof(text), "classes:%d", k);
                p = part(text, g_seed);
                assign(&p, nodes, owner);
                check_disjoint(&p, nodes, owner, size);
                histograms(owner, nodes, hist);
                for (int j = 0; j < nodes; j++) {
                        int labels = 0;

                        for (int c = 0; c < C; c++)
                                labels += hist[j][c] > 0;
                        if (labels != k)
                                fail_msg("%s, %d nodes, seed %" PRIu64
                                         ": node %d has %d labels",
                                         text, nodes, g_seed, j, labels);
                }
                /* union: a class is used whole or not at all */
                total = 0;
                for (int c = 0; c < C; c++) {
                        uint32_t got = 0;

                        for (int j = 0; j < nodes; j++)
                                got += hist[j][c];
                        assert_true(got == 0 || got == whole[c]);
                        used += got > 0;
                        total += got;
                }
                assert_int_equal(used, cases[t][2]);
                (void)total;
        }
}

/* Mean over nodes of the total-variation distance between the node's
 * label distribution and the whole set's, averaged over `draws` seeds. */
static double skew(const char *text, int draws)
{
        static int32_t owner[N];
        uint32_t hist[NODES][C], whole[C] = {0};
        double sum = 0.0;

        for (uint32_t i = 0; i < N; i++)
                whole[g_labels[i]]++;
        for (int d = 0; d < draws; d++) {
                struct nn_partition p = part(text, g_seed * 31 + (uint64_t)d);

                assign(&p, NODES, owner);
                histograms(owner, NODES, hist);
                for (int j = 0; j < NODES; j++) {
                        uint32_t m = 0;
                        double tv = 0.0;

                        for (int c = 0; c < C; c++)
                                m += hist[j][c];
                        for (int c = 0; c < C; c++)
                                tv += fabs((double)hist[j][c] / m -
                                           (double)whole[c] / N);
                        sum += tv / 2.0;
                }
        }
        return sum / (draws * NODES);
}

/* shards:K: every sample held by exactly one node, each node holds K
 * shards (n/(N K) samples each, so K n / (N K) +- K), its labels are
 * few: a shard of L samples in label order holds whole only classes
 * between its two ends, each of at least m (the smallest class) samples,
 * so at most 2 + (L - 2) / m labels; and with 4 nodes and K = 2 all 10
 * classes are held (where classes:2 uses 8). */
static void test_shards(void **state)
{
        static int32_t owner[N];
        uint32_t size[10], hist[10][C];
        static const int cases[][2] = {{2, 4}, {1, 10}, {3, 4}, {5, 2}};
        uint32_t whole[C] = {0}, m = N;

        (void)state;
        for (uint32_t i = 0; i < N; i++)
                whole[g_labels[i]]++;
        for (int c = 0; c < C; c++)
                m = whole[c] < m ? whole[c] : m;
        for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
                char text[32];
                int k = cases[t][0], nodes = cases[t][1], covered = 0;
                int len = (N + nodes * k - 1) / (nodes * k);
                int most = k * (2 + (len - 2) / (int)m);
                struct nn_partition p;

                snprintf(text, sizeof(text), "shards:%d", k);
                p = part(text, g_seed);
                assign(&p, nodes, owner);
                check_disjoint(&p, nodes, owner, size);
                for (uint32_t i = 0; i < N; i++)
                        if (owner[i] < 0 || owner[i] >= nodes)
                                fail_msg("%s: sample %u held by %d", text, i,
                                         owner[i]);
                histograms(owner, nodes, hist);
                for (int j = 0; j < nodes; j++) {
                        int labels = 0;

                        for (int c = 0; c < C; c++)
                                labels += hist[j][c] > 0;
                        if (labels < 1 || labels > most ||
                            abs((int)size[j] - N / nodes) > k)
                                fail_msg("%s, %d nodes, seed %" PRIu64
                                         ": node %d has %d labels (<= %d), "
                                         "%u samples",
                                         text, nodes, g_seed, j, labels, most,
                                         size[j]);
                }
                for (int c = 0; c < C; c++) {
                        int held = 0;

                        for (int j = 0; j < nodes; j++)
                                held |= hist[j][c] > 0;
                        covered += held;
                }
                assert_int_equal(covered, C);
        }
        /* more shards than samples: refused */
        {
                struct nn_partition p = part("shards:256", g_seed);
                int32_t o[8];
                uint8_t l[8] = {0};

                assert_int_equal(nn_partition_assign(&p, l, 8, C, 4, o),
                                 NN_EINVAL);
        }
}

static void test_skew_falls_with_alpha(void **state)
{
        double s01 = skew("dirichlet:0.1", 10), s05 = skew("dirichlet:0.5", 10),
               s100 = skew("dirichlet:100", 10), iid = skew("iid", 1);

        (void)state;
        printf("skew (mean TV distance to the whole set): A=0.1 %.3f, "
               "A=0.5 %.3f, A=100 %.3f, iid %.3f\n",
               s01, s05, s100, iid);
        /* Dirichlet(A) over 4 nodes: E|p - 1/4| shrinks like 1/sqrt(A). At
         * A = 100 a share is 0.25 +- 0.02, so TV ~ 0.05; at 0.1 most of a
         * class sits on one node, TV > 0.5. */
        assert_true(s01 > s05 + 0.1);
        assert_true(s05 > s100 + 0.2);
        assert_true(s01 > 0.5);
        assert_true(s100 < 0.1);
}

static void test_dataset_partition(void **state)
{
        struct nn_partition p = part("classes:2", g_seed);
        struct nn_dataset all = {0}, out;
        uint32_t *idx, m;
        enum { SS = 5 };

        (void)state;
        all.n = N;
        all.channels = 1;
        all.rows = 1;
        all.cols = SS;
        all.classes = C;
        all.owns = 1;
        all.images = malloc((size_t)N * SS);
        all.labels = malloc(N);
        assert_non_null(all.images);
        assert_non_null(all.labels);
        memcpy(all.labels, g_labels, N);
        for (uint32_t i = 0; i < N; i++)
                for (int b = 0; b < SS; b++)
                        all.images[(size_t)i * SS + b] =
                            (uint8_t)(i >> (b % 4 * 8));
        assert_int_equal(
            nn_partition_indices(&p, g_labels, N, C, 1, NODES, &idx, &m), 0);
        assert_int_equal(nn_dataset_partition(&all, &p, 1, NODES, &out), 0);
        assert_int_equal(out.n, m);
        assert_int_equal(all.n, m);
        assert_int_equal(out.owns, 0);
        assert_ptr_equal(out.images, all.images);
        for (uint32_t j = 0; j < m; j++) {
                assert_int_equal(out.labels[j], g_labels[idx[j]]);
                for (int b = 0; b < SS; b++)
                        assert_int_equal(out.images[(size_t)j * SS + b],
                                         (uint8_t)(idx[j] >> (b % 4 * 8)));
        }
        free(idx);
        /* a view cannot be consumed; iid leaves all alone */
        assert_int_equal(nn_dataset_partition(&out, &p, 0, NODES, &out),
                         NN_EINVAL);
        nn_dataset_free(&all);
}

static void test_bad_args(void **state)
{
        struct nn_partition p = part("classes:11", g_seed);
        static int32_t owner[N];
        uint8_t bad[3] = {0, 10, 1};
        uint32_t *idx, m;

        (void)state;
        /* K larger than the classes there are */
        assert_int_equal(nn_partition_assign(&p, g_labels, N, C, 2, owner),
                         NN_EINVAL);
        p = part("dirichlet:1", g_seed);
        assert_int_equal(nn_partition_assign(&p, bad, 3, C, 2, owner),
                         NN_EINVAL);
        assert_int_equal(nn_partition_assign(&p, g_labels, N, C, 0, owner),
                         NN_EINVAL);
        assert_int_equal(
            nn_partition_indices(&p, g_labels, N, C, 4, 4, &idx, &m),
            NN_EINVAL);
        assert_null(idx);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse),
            cmocka_unit_test(test_deterministic),
            cmocka_unit_test(test_iid_is_shard),
            cmocka_unit_test(test_dirichlet_covers),
            cmocka_unit_test(test_dirichlet_redraws),
            cmocka_unit_test(test_classes_exact),
            cmocka_unit_test(test_shards),
            cmocka_unit_test(test_skew_falls_with_alpha),
            cmocka_unit_test(test_dataset_partition),
            cmocka_unit_test(test_bad_args),
        };
        uint64_t s;

        g_seed = gn_test_seed("test_partition", (uint64_t)time(NULL));
        s = g_seed;
        /* uneven class sizes, so "equal shares" is not an accident */
        for (uint32_t i = 0; i < N; i++) {
                uint64_t r = gn_splitmix64(&s) % 100;

                g_labels[i] = (uint8_t)(r < 19 ? 0 : r / 10 + (r % 10 < 5));
                if (g_labels[i] >= C)
                        g_labels[i] = C - 1;
        }
        return cmocka_run_group_tests(tests, NULL, NULL);
}
