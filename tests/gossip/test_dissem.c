/*
 * test_dissem.c - dissemination through the GossipGraD schedule, simulated.
 *
 * A static cluster of n nodes (8, 64, 100, 256). Node i starts with the
 * one-hot vector e_i. Each step every node sends its current vector to its
 * partner (gossip/schedule.c), and every node averages what it received into
 * its own (gossip/merge.c). Proves:
 *  - after exactly ceil(log2 n) steps of one epoch every node holds every
 *    node's contribution (all entries > 0), and not one step earlier: the
 *    bound is tight (every n >= 3 here);
 *  - for n a power of two every entry is then exactly 1/n;
 *  - averaging conserves mass: each column sums to 1 at every step;
 *  - the same holds in later epochs, whose permutations differ;
 *  - started mid-epoch (the permutation changes under the spread), full
 *    coverage still comes within the rest of that epoch plus one more;
 *  - with an eighth of the members down and skipped (some nodes then get
 *    two senders, some none), the alive ones still all reach each other;
 *    observed within 2L steps over 300 seeds (2L + 1 with a quarter down,
 *    2000 seeds); asserted within 4L, a margin, not a proven bound.
 * Seed from GN_SEED.
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_seed.h"
#include "gossip/merge.h"
#include "gossip/schedule.h"

static uint64_t g_seed = 20261129;

#include "base/gn_rng.h"

static int key_cmp(const void *a, const void *b)
{
        return memcmp(a, b, GOSSIP_KEY_BYTES);
}

struct cluster {
        size_t n;
        uint8_t (*keys)[GOSSIP_KEY_BYTES];
        struct gossip_sched *sched;
        struct gossip_merge *merge;
        float *x; /* n x n: row i is node i's state */
};

static void cluster_init(struct cluster *c, size_t n,
                         enum gossip_sched_pattern pat)
{
        uint64_t s = g_seed ^ (n * 7919);

        c->n = n;
        c->keys = malloc(n * GOSSIP_KEY_BYTES);
        c->sched = calloc(n, sizeof(*c->sched));
        c->merge = calloc(n, sizeof(*c->merge));
        c->x = calloc(n * n, sizeof(float));
        assert_true(c->keys && c->sched && c->merge && c->x);
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < GOSSIP_KEY_BYTES; j += 8) {
                        uint64_t r = gn_splitmix64(&s);
                        memcpy(c->keys[i] + j, &r, 8);
                }
        qsort(c->keys, n, GOSSIP_KEY_BYTES, key_cmp);
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(
                    gossip_sched_init(&c->sched[i],
                                      (const uint8_t(*)[32])c->keys, n,
                                      c->keys[i], g_seed, pat),
                    0);
                assert_int_equal(gossip_merge_init(&c->merge[i], n, 0), 0);
        }
}

static void cluster_free(struct cluster *c)
{
        for (size_t i = 0; i < c->n; i++)
                gossip_merge_free(&c->merge[i]);
        free(c->keys);
        free(c->sched);
        free(c->merge);
        free(c->x);
}

static void one_hot(struct cluster *c)
{
        memset(c->x, 0, c->n * c->n * sizeof(float));
        for (size_t i = 0; i < c->n; i++)
                c->x[i * c->n + i] = 1.0f;
}

/* One synchronous step: everyone sends, then everyone merges. */
static void cluster_step(struct cluster *c, uint64_t t)
{
        size_t n = c->n, p;

        for (size_t i = 0; i < n; i++) {
                gossip_merge_set_step(&c->merge[i], t);
        }
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(
                    gossip_sched_partner(&c->sched[i], t, NULL, NULL, &p), 0);
                assert_int_equal(gossip_merge_offer(&c->merge[p], c->keys[i], t,
                                                    &c->x[i * n], n),
                                 0);
        }
        for (size_t i = 0; i < n; i++)
                assert_int_equal(
                    gossip_merge_apply(&c->merge[i], t, &c->x[i * n], n), 1);
}

static int all_covered(const struct cluster *c)
{
        for (size_t i = 0; i < c->n * c->n; i++)
                if (!(c->x[i] > 0.0f))
                        return 0;
        return 1;
}

static void check_mass(const struct cluster *c)
{
        for (size_t j = 0; j < c->n; j++) {
                double sum = 0;
                for (size_t i = 0; i < c->n; i++)
                        sum += c->x[i * c->n + j];
                if (fabs(sum - 1.0) > 1e-4)
                        fail_msg("column %zu sums to %.7f (seed %" PRIu64 ")",
                                 j, sum, g_seed);
        }
}

/* Steps from t0 until every node holds every contribution. */
static unsigned spread(struct cluster *c, uint64_t t0, unsigned limit)
{
        one_hot(c);
        for (unsigned k = 1; k <= limit; k++) {
                cluster_step(c, t0 + k - 1);
                check_mass(c);
                if (all_covered(c))
                        return k;
        }
        return limit + 1;
}

static void check_size(size_t n, enum gossip_sched_pattern pat)
{
        struct cluster c;
        unsigned L, k;

        cluster_init(&c, n, pat);
        L = gossip_sched_epoch_len(&c.sched[0]);
        for (uint64_t e = 0; e < 3; e++) {
                k = spread(&c, e * L, 4 * L);
                if (k != L)
                        fail_msg(
                            "n=%zu pattern=%d epoch %" PRIu64
                            ": covered after %u steps, want %u (seed %" PRIu64
                            ")",
                            n, pat, e, k, L, g_seed);
                if ((n & (n - 1)) == 0)
                        for (size_t i = 0; i < n * n; i++)
                                assert_float_equal(c.x[i], 1.0f / (float)n,
                                                   0.0f);
        }
        /* Mid-epoch start: the permutation changes under the spread. */
        if (L > 1) {
                uint64_t t0 = 5 * (uint64_t)L + L / 2;
                unsigned bound = (unsigned)(L - t0 % L) + L;

                k = spread(&c, t0, 4 * L);
                printf("n=%zu pattern=%d: aligned %u steps, mid-epoch start "
                       "%u steps (bound %u)\n",
                       n, pat, L, k, bound);
                assert_true(k <= bound);
        }
        cluster_free(&c);
}

static void test_dissemination(void **state)
{
        (void)state;
        check_size(8, GOSSIP_SCHED_DISSEMINATION);
        check_size(64, GOSSIP_SCHED_DISSEMINATION);
        check_size(100, GOSSIP_SCHED_DISSEMINATION);
        check_size(256, GOSSIP_SCHED_DISSEMINATION);
}

static void test_hypercube(void **state)
{
        (void)state;
        check_size(8, GOSSIP_SCHED_HYPERCUBE);
        check_size(64, GOSSIP_SCHED_HYPERCUBE);
        check_size(256, GOSSIP_SCHED_HYPERCUBE);
}

struct down {
        const int *dead;
};

static int alive_fn(void *ctx, size_t m)
{
        return !((const struct down *)ctx)->dead[m];
}

/* Skipping down members: alive nodes send to their first alive candidate
 * and average whatever arrives (0, 1 or more gradients). */
static void check_with_down(size_t n)
{
        struct cluster c;
        int *dead = calloc(n, sizeof(*dead));
        struct down d = {dead};
        uint64_t s = g_seed ^ 0xdeadull;
        unsigned L, steps = 0;
        size_t ndown = 0, p;

        assert_non_null(dead);
        cluster_init(&c, n, GOSSIP_SCHED_DISSEMINATION);
        L = gossip_sched_epoch_len(&c.sched[0]);
        while (ndown < n / 8) {
                size_t m = (size_t)(gn_splitmix64(&s) % n);
                ndown += !dead[m];
                dead[m] = 1;
        }
        one_hot(&c);
        for (uint64_t t = 0; t < 4 * (uint64_t)L && !steps; t++) {
                for (size_t i = 0; i < n; i++)
                        gossip_merge_set_step(&c.merge[i], t);
                for (size_t i = 0; i < n; i++) {
                        if (dead[i])
                                continue;
                        assert_int_equal(gossip_sched_partner(&c.sched[i], t,
                                                              alive_fn, &d, &p),
                                         0);
                        assert_false(dead[p]);
                        assert_int_equal(gossip_merge_offer(&c.merge[p],
                                                            c.keys[i], t,
                                                            &c.x[i * n], n),
                                         0);
                }
                for (size_t i = 0; i < n; i++)
                        assert_true(gossip_merge_apply(&c.merge[i], t,
                                                       &c.x[i * n], n) >= 0);
                steps = (unsigned)t + 1;
                for (size_t i = 0; i < n && steps; i++)
                        for (size_t j = 0; j < n && steps; j++)
                                if (!dead[i] && !dead[j] &&
                                    !(c.x[i * n + j] > 0.0f))
                                        steps = 0;
        }
        printf("n=%zu, %zu down: alive nodes covered after %u steps (L=%u)\n",
               n, ndown, steps, L);
        if (!steps)
                fail_msg("n=%zu with %zu down: not covered in %u steps (seed "
                         "%" PRIu64 ")",
                         n, ndown, 4 * L, g_seed);
        cluster_free(&c);
        free(dead);
}

static void test_with_members_down(void **state)
{
        (void)state;
        check_with_down(8);
        check_with_down(64);
        check_with_down(256);
}

/* The epochs really use different permutations (so the test above covered
 * more than one). */
static void test_epochs_differ(void **state)
{
        struct cluster c;
        int differs = 0;

        (void)state;
        cluster_init(&c, 64, GOSSIP_SCHED_DISSEMINATION);
        for (size_t r = 0; r < 64; r++)
                differs |= gossip_sched_member_at(&c.sched[0], 0, r) !=
                           gossip_sched_member_at(&c.sched[0], 1, r);
        assert_true(differs);
        cluster_free(&c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_dissemination),
            cmocka_unit_test(test_hypercube),
            cmocka_unit_test(test_with_members_down),
            cmocka_unit_test(test_epochs_differ),
        };

        g_seed = gn_test_seed("test_dissem", g_seed);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
