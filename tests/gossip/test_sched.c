/*
 * test_sched.c - the GossipGraD partner schedule (gossip/schedule.c).
 *
 * Proves: every node derives the same permutation from the same view and
 * seed; each node has exactly one partner and one sender per step (the
 * pattern is a permutation of ranks) for n = 1, 2, 3, powers of two and
 * others, both patterns; the permutation is fixed within an epoch of
 * ceil(log2 n) steps and re-drawn between epochs; skipping down members is
 * deterministic and agrees with the sender lists; the view calls answer
 * as the schedule built by hand from the same view; the test vectors of
 * docs/protocol.md 9.10-9.11 are what this code computes, and its 11.1
 * formulas give the same permutation. Seed from GN_SEED.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "test_doc.h"
#include "test_seed.h"
#include "gossip/schedule.h"

static uint64_t g_seed = 20261129;

#include "base/gn_rng.h"

static int key_cmp(const void *a, const void *b)
{
        return memcmp(a, b, GOSSIP_KEY_BYTES);
}

/* n distinct random keys, sorted. */
static uint8_t (*make_view(size_t n, uint64_t seed))[GOSSIP_KEY_BYTES]
{
        uint8_t(*k)[GOSSIP_KEY_BYTES] = malloc(n * GOSSIP_KEY_BYTES);
        uint64_t s = seed;

        assert_non_null(k);
        for (size_t i = 0; i < n; i++) {
                for (size_t j = 0; j < GOSSIP_KEY_BYTES; j += 8) {
                        uint64_t r = gn_splitmix64(&s);
                        memcpy(k[i] + j, &r, 8);
                }
        }
        qsort(k, n, GOSSIP_KEY_BYTES, key_cmp);
        for (size_t i = 1; i < n; i++)
                assert_true(memcmp(k[i - 1], k[i], GOSSIP_KEY_BYTES) < 0);
        return k;
}

/* One schedule per node of the view. */
static struct gossip_sched *make_nodes(uint8_t (*keys)[GOSSIP_KEY_BYTES],
                                       size_t n, uint64_t seed,
                                       enum gossip_sched_pattern pat)
{
        struct gossip_sched *s = calloc(n, sizeof(*s));

        assert_non_null(s);
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(gossip_sched_init(&s[i],
                                                   (const uint8_t(*)[32])keys,
                                                   n, keys[i], seed, pat),
                                 0);
                assert_int_equal(s[i].self, i);
        }
        return s;
}

static void test_init_rejects(void **state)
{
        uint8_t(*k)[GOSSIP_KEY_BYTES] = make_view(4, g_seed);
        uint8_t stranger[GOSSIP_KEY_BYTES] = {0};
        const uint8_t(*ck)[32] = (const uint8_t(*)[32])k;
        struct gossip_sched s;
        uint8_t tmp[GOSSIP_KEY_BYTES];

        (void)state;
        assert_int_equal(gossip_sched_init(&s, ck, 0, k[0], 1, 0),
                         GOSSIP_EINVAL);
        memset(stranger, 0xff, sizeof(stranger));
        assert_int_equal(gossip_sched_init(&s, ck, 4, stranger, 1, 0),
                         GOSSIP_EINVAL);
        assert_int_equal(gossip_sched_init(&s, ck, 4, k[0], 1, 7),
                         GOSSIP_EINVAL);
        /* unsorted */
        memcpy(tmp, k[1], sizeof(tmp));
        memcpy(k[1], k[2], sizeof(tmp));
        memcpy(k[2], tmp, sizeof(tmp));
        assert_int_equal(gossip_sched_init(&s, ck, 4, k[0], 1, 0),
                         GOSSIP_EINVAL);
        /* duplicate */
        memcpy(k[2], k[1], sizeof(tmp));
        assert_int_equal(gossip_sched_init(&s, ck, 4, k[0], 1, 0),
                         GOSSIP_EINVAL);
        free(k);
}

static void test_epoch_len(void **state)
{
        static const size_t n[] = {1, 2, 3, 4, 5, 8, 9, 100, 256, 257};
        static const unsigned want[] = {0, 1, 2, 2, 3, 3, 4, 7, 8, 9};
        uint8_t(*k)[GOSSIP_KEY_BYTES] = make_view(257, g_seed);
        struct gossip_sched s;

        (void)state;
        for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++) {
                assert_int_equal(gossip_sched_init(&s, (const uint8_t(*)[32])k,
                                                   n[i], k[0], g_seed, 0),
                                 0);
                assert_int_equal(gossip_sched_epoch_len(&s), want[i]);
                if (want[i])
                        assert_int_equal(
                            gossip_sched_epoch(&s, 10 * want[i] + want[i] - 1),
                            10);
        }
        free(k);
}

/* All nodes agree on the permutation; it is a bijection, and member_at and
 * rank_of are inverses. */
static void test_same_permutation(void **state)
{
        static const size_t sizes[] = {2, 3, 5, 8, 13, 64, 100, 257};

        (void)state;
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
                size_t n = sizes[z];
                uint8_t(*k)[GOSSIP_KEY_BYTES] = make_view(n, g_seed + n);
                struct gossip_sched *s = make_nodes(k, n, g_seed, 0);
                size_t *seen = calloc(n, sizeof(*seen));

                for (uint64_t e = 0; e < 6; e++) {
                        memset(seen, 0, n * sizeof(*seen));
                        for (size_t r = 0; r < n; r++) {
                                size_t m = gossip_sched_member_at(&s[0], e, r);
                                assert_true(m < n);
                                seen[m]++;
                                assert_int_equal(
                                    gossip_sched_rank_of(&s[0], e, m), r);
                                for (size_t i = 1; i < n; i++)
                                        assert_int_equal(
                                            gossip_sched_member_at(&s[i], e, r),
                                            m);
                        }
                        for (size_t m = 0; m < n; m++)
                                assert_int_equal(seen[m], 1);
                }
                free(seen);
                free(s);
                free(k);
        }
}

/* Exactly one partner and one sender per node and step; partner != self;
 * gossip_sched_senders names the node whose partner we are. */
static void check_one_to_one(size_t n, enum gossip_sched_pattern pat)
{
        uint8_t(*k)[GOSSIP_KEY_BYTES] = make_view(n, g_seed ^ n);
        struct gossip_sched *s = make_nodes(k, n, g_seed, pat);
        size_t *partner = calloc(n, sizeof(*partner));
        size_t *incoming = calloc(n, sizeof(*incoming));
        unsigned L = gossip_sched_epoch_len(&s[0]);

        for (uint64_t t = 0; t < 3 * (uint64_t)L + 1; t++) {
                memset(incoming, 0, n * sizeof(*incoming));
                for (size_t i = 0; i < n; i++) {
                        assert_int_equal(gossip_sched_partner(
                                             &s[i], t, NULL, NULL, &partner[i]),
                                         0);
                        assert_true(partner[i] < n);
                        assert_int_not_equal(partner[i], i);
                        incoming[partner[i]]++;
                }
                for (size_t i = 0; i < n; i++) {
                        size_t from[4], cnt = 99;

                        assert_int_equal(incoming[i], 1);
                        assert_int_equal(gossip_sched_senders(&s[i], t, NULL,
                                                              NULL, from, 4,
                                                              &cnt),
                                         0);
                        assert_int_equal(cnt, 1);
                        assert_int_equal(partner[from[0]], i);
                        if (gossip_sched_effective_pattern(&s[i]) ==
                            GOSSIP_SCHED_HYPERCUBE)
                                assert_int_equal(partner[partner[i]], i);
                }
        }
        free(incoming);
        free(partner);
        free(s);
        free(k);
}

static void test_one_partner_one_sender(void **state)
{
        static const size_t sizes[] = {2, 3, 4, 5, 6, 7, 8, 13, 16, 100, 256};

        (void)state;
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
                check_one_to_one(sizes[z], GOSSIP_SCHED_DISSEMINATION);
                check_one_to_one(sizes[z], GOSSIP_SCHED_HYPERCUBE);
        }
}

/* The permutation holds for L steps and changes between epochs; another
 * seed gives another permutation. */
static void test_epoch_redraw(void **state)
{
        size_t n = 16, distinct = 0;
        uint8_t(*k)[GOSSIP_KEY_BYTES] = make_view(n, g_seed);
        struct gossip_sched a, b;
        size_t perm[10][16];
        int differs = 0;

        (void)state;
        assert_int_equal(
            gossip_sched_init(&a, (const uint8_t(*)[32])k, n, k[3], g_seed, 0),
            0);
        assert_int_equal(gossip_sched_init(&b, (const uint8_t(*)[32])k, n, k[3],
                                           g_seed + 1, 0),
                         0);
        for (uint64_t e = 0; e < 10; e++)
                for (size_t r = 0; r < n; r++)
                        perm[e][r] = gossip_sched_member_at(&a, e, r);
        for (uint64_t e = 0; e < 10; e++) {
                int unique = 1;
                for (uint64_t f = 0; f < e; f++)
                        if (memcmp(perm[e], perm[f], sizeof(perm[e])) == 0)
                                unique = 0;
                distinct += unique;
        }
        assert_int_equal(distinct, 10);
        for (size_t r = 0; r < n; r++)
                differs |= gossip_sched_member_at(&b, 0, r) != perm[0][r];
        assert_true(differs);
        /* Within epoch e (steps 4e..4e+3) the partner is perm[e] at rank
         * r + 2^(t mod 4) where r is our rank in perm[e]. */
        for (uint64_t t = 0; t < 40; t++) {
                uint64_t e = t / 4;
                size_t r = 0, p;

                while (perm[e][r] != 3)
                        r++;
                assert_int_equal(gossip_sched_partner(&a, t, NULL, NULL, &p),
                                 0);
                assert_int_equal(p, perm[e][(r + (1u << (t % 4))) % n]);
        }
        free(k);
}

struct down {
        const int *dead;
};

static int alive_fn(void *ctx, size_t m)
{
        return !((const struct down *)ctx)->dead[m];
}

/* A down partner is replaced by the next alive rank after it, the same on
 * every node; sender lists agree with partners. */
static void test_skip_dead(void **state)
{
        size_t n = 11;
        uint8_t(*k)[GOSSIP_KEY_BYTES] = make_view(n, g_seed);
        struct gossip_sched *s = make_nodes(k, n, g_seed, 0);
        int dead[11] = {0};
        uint8_t flags[11];
        struct down d = {dead};
        uint64_t rs = g_seed;

        (void)state;
        dead[2] = dead[3] = dead[7] = 1;
        for (size_t i = 0; i < n; i++)
                flags[i] = !dead[i];
        for (uint64_t t = 0; t < 24; t++) {
                size_t incoming[11] = {0}, total = 0;

                for (size_t i = 0; i < n; i++) {
                        uint64_t e = gossip_sched_epoch(&s[i], t);
                        size_t r = gossip_sched_rank_of(&s[i], e, i), p, q, c;

                        if (dead[i])
                                continue;
                        assert_int_equal(
                            gossip_sched_partner(&s[i], t, alive_fn, &d, &p),
                            0);
                        assert_false(dead[p]);
                        /* the same from flags (gossip_sched_alive_flags) */
                        assert_int_equal(
                            gossip_sched_partner(
                                &s[i], t, gossip_sched_alive_flags, flags, &q),
                            0);
                        assert_int_equal(q, p);
                        assert_int_not_equal(p, i);
                        /* expected: first alive rank from the nominal one */
                        c = (r + (1u << (t % gossip_sched_epoch_len(&s[i])))) %
                            n;
                        while (c == r ||
                               dead[gossip_sched_member_at(&s[i], e, c)])
                                c = (c + 1) % n;
                        assert_int_equal(p,
                                         gossip_sched_member_at(&s[i], e, c));
                        /* every other node computes the same for i */
                        q = (size_t)(gn_splitmix64(&rs) % n);
                        assert_int_equal(gossip_sched_partner_of(
                                             &s[q], i, t, alive_fn, &d, &c),
                                         0);
                        assert_int_equal(c, p);
                        incoming[p]++;
                }
                for (size_t i = 0; i < n; i++) {
                        size_t from[11], cnt;

                        if (dead[i])
                                continue;
                        assert_int_equal(gossip_sched_senders(&s[i], t,
                                                              alive_fn, &d,
                                                              from, 11, &cnt),
                                         0);
                        assert_int_equal(cnt, incoming[i]);
                        for (size_t j = 0; j < cnt; j++) {
                                size_t p;
                                assert_int_equal(
                                    gossip_sched_partner(&s[from[j]], t,
                                                         alive_fn, &d, &p),
                                    0);
                                assert_int_equal(p, i);
                        }
                        total += cnt;
                }
                assert_int_equal(total, n - 3); /* every alive node sends */
        }
        /* everyone else down: no partner, no sender */
        for (size_t i = 0; i < n; i++)
                dead[i] = i != 5;
        {
                size_t p = 1234, cnt = 9;
                assert_int_equal(
                    gossip_sched_partner(&s[5], 0, alive_fn, &d, &p),
                    GOSSIP_ENOPEER);
                assert_int_equal(p, 1234);
                assert_int_equal(
                    gossip_sched_senders(&s[5], 0, alive_fn, &d, NULL, 0, &cnt),
                    0);
                assert_int_equal(cnt, 0);
        }
        free(s);
        free(k);
}

static void test_small_views(void **state)
{
        uint8_t(*k)[GOSSIP_KEY_BYTES] = make_view(3, g_seed);
        struct gossip_sched s;
        size_t p = 77, cnt = 5, from[2];

        (void)state;
        /* n = 1: no partner, nobody sends to us */
        assert_int_equal(gossip_sched_init(&s, (const uint8_t(*)[32])k + 1, 1,
                                           k[1], g_seed, 0),
                         0);
        assert_int_equal(gossip_sched_epoch_len(&s), 0);
        assert_int_equal(gossip_sched_partner(&s, 5, NULL, NULL, &p),
                         GOSSIP_ENOPEER);
        assert_int_equal(p, 77);
        assert_int_equal(gossip_sched_senders(&s, 5, NULL, NULL, from, 2, &cnt),
                         0);
        assert_int_equal(cnt, 0);
        /* n = 2: always the other one, both ways, both patterns */
        for (int pat = 0; pat < 2; pat++) {
                assert_int_equal(gossip_sched_init(&s, (const uint8_t(*)[32])k,
                                                   2, k[1], g_seed, pat),
                                 0);
                for (uint64_t t = 0; t < 8; t++) {
                        assert_int_equal(
                            gossip_sched_partner(&s, t, NULL, NULL, &p), 0);
                        assert_int_equal(p, 0);
                        assert_int_equal(gossip_sched_senders(&s, t, NULL, NULL,
                                                              from, 2, &cnt),
                                         0);
                        assert_int_equal(cnt, 1);
                        assert_int_equal(from[0], 0);
                }
        }
        /* n = 3: offsets 1 then 2 (= -1), so the two steps of an epoch
         * reach both others */
        assert_int_equal(
            gossip_sched_init(&s, (const uint8_t(*)[32])k, 3, k[0], g_seed, 0),
            0);
        for (uint64_t e = 0; e < 4; e++) {
                size_t p0, p1;
                assert_int_equal(
                    gossip_sched_partner(&s, 2 * e, NULL, NULL, &p0), 0);
                assert_int_equal(
                    gossip_sched_partner(&s, 2 * e + 1, NULL, NULL, &p1), 0);
                assert_int_not_equal(p0, 0);
                assert_int_not_equal(p1, 0);
                assert_int_not_equal(p0, p1);
        }
        /* hypercube falls back to dissemination off powers of two */
        assert_int_equal(gossip_sched_init(&s, (const uint8_t(*)[32])k, 3, k[0],
                                           g_seed, GOSSIP_SCHED_HYPERCUBE),
                         0);
        assert_int_equal(gossip_sched_effective_pattern(&s),
                         GOSSIP_SCHED_DISSEMINATION);
        assert_int_equal(gossip_sched_init(&s, (const uint8_t(*)[32])k, 2, k[0],
                                           g_seed, GOSSIP_SCHED_HYPERCUBE),
                         0);
        assert_int_equal(gossip_sched_effective_pattern(&s),
                         GOSSIP_SCHED_HYPERCUBE);
        assert_memory_equal(gossip_sched_key(&s, 1), k[1], GOSSIP_KEY_BYTES);
        assert_null(gossip_sched_key(&s, 2));
        free(k);
}

/* ---- the view calls against the schedule built by hand ------------------
 * The oracles below are the sequences the node and the hostile-peer test
 * ran before gossip_sched_view_*() existed: build the schedule from the
 * view, ask it, map indices back to keys. */

static int old_partner(const uint8_t (*keys)[GOSSIP_KEY_BYTES], size_t n,
                       const uint8_t *self, uint64_t seed,
                       enum gossip_sched_pattern pat, uint64_t step,
                       struct down *d, uint8_t out[GOSSIP_KEY_BYTES])
{
        struct gossip_sched s;
        size_t idx;
        int rc;

        if (n <= 1)
                return GOSSIP_ENOPEER;
        rc = gossip_sched_init(&s, keys, n, self, seed, pat);
        if (rc)
                return rc;
        rc = gossip_sched_partner(&s, step, d ? alive_fn : NULL, d, &idx);
        if (rc)
                return rc;
        memcpy(out, gossip_sched_key(&s, idx), GOSSIP_KEY_BYTES);
        return 0;
}

/* The senders with everyone alive, then with the dead skipped; the full
 * list each time (the node's copy read at most 8 of them). */
static int old_is_sender(const uint8_t (*keys)[GOSSIP_KEY_BYTES], size_t n,
                         const uint8_t *self, uint64_t seed,
                         enum gossip_sched_pattern pat, uint64_t step,
                         struct down *d, const uint8_t *key)
{
        struct gossip_sched s;
        size_t got, *idx = malloc((n ? n : 1) * sizeof(*idx));
        int hit = 0;

        assert_non_null(idx);
        if (n > 1 && gossip_sched_init(&s, keys, n, self, seed, pat) == 0)
                for (int pass = 0; pass < 2 && !hit; pass++) {
                        if (pass && !d)
                                break;
                        if (gossip_sched_senders(&s, step,
                                                 pass ? alive_fn : NULL, d, idx,
                                                 n, &got))
                                continue;
                        for (size_t i = 0; i < got; i++)
                                if (memcmp(gossip_sched_key(&s, idx[i]), key,
                                           GOSSIP_KEY_BYTES) == 0)
                                        hit = 1;
                }
        free(idx);
        return hit;
}

/* Random views (1 to 24 members, both patterns, none to most members down,
 * a stranger's key now and then): partner and sender answers agree with
 * the oracles for every member asked. */
static void test_view_calls_agree(void **state)
{
        uint64_t rs = g_seed ^ 0x5ced;
        uint8_t stranger[GOSSIP_KEY_BYTES];
        size_t asked = 0, senders = 0;

        (void)state;
        memset(stranger, 0xff, sizeof(stranger)); /* sorts after any view */
        for (int round = 0; round < 300; round++) {
                size_t n = 1 + (size_t)(gn_splitmix64(&rs) % 24);
                uint8_t(*k)[GOSSIP_KEY_BYTES] =
                    make_view(n, gn_splitmix64(&rs));
                const uint8_t(*ck)[GOSSIP_KEY_BYTES] =
                    (const uint8_t(*)[GOSSIP_KEY_BYTES])k;
                enum gossip_sched_pattern pat =
                    (enum gossip_sched_pattern)(gn_splitmix64(&rs) % 2);
                uint64_t seed = gn_splitmix64(&rs);
                unsigned down_pct = (unsigned)(gn_splitmix64(&rs) % 80);
                struct gossip_sched_view v = {ck, n, seed, pat};
                int *dead = calloc(n, sizeof(*dead));
                struct down d = {dead};

                assert_non_null(dead);
                for (size_t i = 0; i < n; i++)
                        dead[i] = gn_splitmix64(&rs) % 100 < down_pct;
                for (int q = 0; q < 20; q++) {
                        uint64_t t = gn_splitmix64(&rs) % 1000;
                        size_t me = (size_t)(gn_splitmix64(&rs) % n);
                        size_t other = (size_t)(gn_splitmix64(&rs) % n);
                        const uint8_t *from = q % 7 == 6 ? stranger : k[other];
                        struct down *dp = q % 2 ? &d : NULL;
                        uint8_t want[GOSSIP_KEY_BYTES] = {0};
                        uint8_t got[GOSSIP_KEY_BYTES] = {0};
                        int rw, rg, sw, sg;

                        rw = old_partner(ck, n, k[me], seed, pat, t, dp, want);
                        rg = gossip_sched_view_partner(
                            &v, k[me], t, dp ? alive_fn : NULL, dp, got);
                        if (rw != rg || memcmp(want, got, sizeof(got)))
                                fail_msg("partner differs: seed %" PRIu64
                                         " round %d n %zu step %" PRIu64
                                         " rc %d/%d",
                                         g_seed, round, n, t, rw, rg);
                        sw =
                            old_is_sender(ck, n, k[me], seed, pat, t, dp, from);
                        sg = gossip_sched_view_is_sender(
                            &v, from, k[me], t, dp ? alive_fn : NULL, dp);
                        if (sw != sg)
                                fail_msg("sender differs: seed %" PRIu64
                                         " round %d n %zu step %" PRIu64
                                         " old %d new %d",
                                         g_seed, round, n, t, sw, sg);
                        asked++;
                        senders += (size_t)sg;
                }
                /* a key outside the view has no partner */
                assert_int_equal(gossip_sched_view_partner(
                                     &v, stranger, 0, NULL, NULL, stranger),
                                 n <= 1 ? GOSSIP_ENOPEER : GOSSIP_EINVAL);
                free(dead);
                free(k);
        }
        /* the sample must have asked about real senders, not only misses */
        assert_true(senders > asked / 20);
}

/* ---- docs/protocol.md 9.10-9.11: the schedule's test vectors ------------
 *
 * The vectors name members A, B, C, ... by the keys of their "key" lines;
 * each row gives, at one step, the epoch, the permutation (the member at
 * rank 0, 1, ...), the partner of each member (A first) and the senders
 * each member accepts (letters, "-" for none). The round keys and the
 * permutation are also computed here straight from the document's
 * formulas (not through schedule.c), so the text and the code are each
 * checked against the other. GN_SCHED_PRINT_VECTORS=1 prints the rows
 * the code computes instead of checking them. */

enum { DOC_MAX = 8, DOC_ROUNDS = 6 };

struct doc_sched {
        uint64_t seed;
        size_t n;
        uint8_t keys[DOC_MAX][GOSSIP_KEY_BYTES]; /* by letter */
        uint8_t view[DOC_MAX][GOSSIP_KEY_BYTES]; /* sorted */
        size_t letter_of[DOC_MAX];               /* view index -> letter */
        size_t index_of[DOC_MAX];                /* letter -> view index */
        int dead[DOC_MAX];                       /* by view index */
        int have_down;
};

/* H, splitmix64 as a function of its state (protocol.md 11.1). */
static uint64_t doc_h(uint64_t x)
{
        x += 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
}

static uint64_t doc_round_key(uint64_t seed, uint64_t epoch, unsigned i)
{
        return doc_h(doc_h(seed ^ doc_h(epoch)) + i);
}

/* The member at `rank` of the epoch's permutation, by the text. */
static size_t doc_member_at(uint64_t seed, size_t n, uint64_t epoch,
                            size_t rank)
{
        unsigned len = 0, h;
        uint32_t x = (uint32_t)rank, mask;

        while (((size_t)1 << len) < n)
                len++;
        h = (len + 1) / 2 ? (len + 1) / 2 : 1;
        mask = (1u << h) - 1;
        if (n == 1)
                return 0;
        do {
                uint32_t l = x >> h, r = x & mask;

                for (unsigned i = 0; i < DOC_ROUNDS; i++) {
                        uint32_t f =
                            (uint32_t)doc_h(doc_round_key(seed, epoch, i) ^ r) &
                            mask;
                        uint32_t t = l ^ f;

                        l = r;
                        r = t;
                }
                x = (l << h) | r;
        } while (x >= n);
        return x;
}

static int doc_hex(const char *p, uint8_t *out, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                unsigned v;

                if (sscanf(p + 2 * i, "%2x", &v) != 1)
                        return -1;
                out[i] = (uint8_t)v;
        }
        return 0;
}

/* The view of the vector's keys: sorted, with each index's letter. */
static void doc_view(struct doc_sched *d)
{
        memcpy(d->view, d->keys, d->n * GOSSIP_KEY_BYTES);
        qsort(d->view, d->n, GOSSIP_KEY_BYTES, key_cmp);
        for (size_t i = 0; i < d->n; i++)
                for (size_t l = 0; l < d->n; l++)
                        if (!memcmp(d->view[i], d->keys[l], GOSSIP_KEY_BYTES)) {
                                d->letter_of[i] = l;
                                d->index_of[l] = i;
                        }
}

/* in with runs of spaces made one and leading ones dropped, into out. */
static void squeeze(const char *in, char *out)
{
        size_t o = 0;
        int sp = 0;

        for (; *in; in++) {
                if (*in == ' ') {
                        sp = o > 0;
                        continue;
                }
                if (sp)
                        out[o++] = ' ';
                sp = 0;
                out[o++] = *in;
        }
        out[o] = 0;
}

/* One row at `step` as the code computes it, in the doc's format. */
static void doc_row(const struct doc_sched *d, uint64_t step, char *out,
                    size_t cap)
{
        const uint8_t(*ck)[GOSSIP_KEY_BYTES] =
            (const uint8_t(*)[GOSSIP_KEY_BYTES])d->view;
        struct gossip_sched_view v = {ck, d->n, d->seed,
                                      GOSSIP_SCHED_DISSEMINATION};
        struct down dn = {d->dead};
        gossip_sched_alive_fn alive = d->have_down ? alive_fn : NULL;
        struct gossip_sched s;
        size_t o;

        assert_int_equal(gossip_sched_init(&s, ck, d->n, ck[0], d->seed,
                                           GOSSIP_SCHED_DISSEMINATION),
                         0);
        o = (size_t)snprintf(out, cap, "%-4" PRIu64 " %-5" PRIu64 " ", step,
                             gossip_sched_epoch(&s, step));
        for (size_t r = 0; r < d->n; r++)
                out[o++] =
                    (char)('A' + d->letter_of[gossip_sched_member_at(
                                     &s, gossip_sched_epoch(&s, step), r)]);
        out[o++] = ' ';
        for (size_t l = 0; l < d->n; l++) {
                uint8_t p[GOSSIP_KEY_BYTES];
                size_t pi = 0;

                if (gossip_sched_view_partner(&v, d->keys[l], step, alive, &dn,
                                              p) != 0) {
                        out[o++] = '-';
                        continue;
                }
                while (memcmp(d->view[pi], p, GOSSIP_KEY_BYTES))
                        pi++;
                out[o++] = (char)('A' + d->letter_of[pi]);
        }
        for (size_t l = 0; l < d->n; l++) {
                size_t o0;

                out[o++] = ' ';
                o0 = o;
                for (size_t f = 0; f < d->n; f++)
                        if (gossip_sched_view_is_sender(
                                &v, d->keys[f], d->keys[l], step, alive, &dn))
                                out[o++] = (char)('A' + f);
                if (o == o0)
                        out[o++] = '-';
        }
        out[o] = 0;
        assert_true(o < cap);
}

/* Check (or print) vector `name`; returns the rows checked. */
static int doc_check(const char *doc, const char *name, int print)
{
        struct doc_sched d = {0};
        const char *end, *p = gn_test_doc_text(doc, name, &end);
        int rows = 0;

        if (!p)
                fail_msg("vector %s: not in docs/protocol.md", name);
        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                size_t len = eol ? (size_t)(eol - p) : (size_t)(end - p);
                char line[256], want[256], got[256];
                uint8_t kseed[32], pk[crypto_sign_PUBLICKEYBYTES],
                    sk[crypto_sign_SECRETKEYBYTES];
                unsigned long long u, e;
                char c;

                if (len >= sizeof(line))
                        fail_msg("vector %s: line too long", name);
                memcpy(line, p, len);
                line[len] = 0;
                p += len + 1;
                if (sscanf(line, "seed %llu", &u) == 1) {
                        d.seed = u;
                } else if (sscanf(line, "key %c", &c) == 1) {
                        if (c != 'A' + (int)d.n || d.n == DOC_MAX ||
                            strlen(line) != 6 + 2 * GOSSIP_KEY_BYTES ||
                            doc_hex(line + 6, d.keys[d.n], GOSSIP_KEY_BYTES))
                                fail_msg("vector %s: bad key line: %s", name,
                                         line);
                        /* key L is the one of seed bytes 32 L .. 32 L + 31
                         * (protocol.md 9: A and B are the wire's) */
                        for (size_t i = 0; i < 32; i++)
                                kseed[i] = (uint8_t)(32 * d.n + i);
                        crypto_sign_seed_keypair(pk, sk, kseed);
                        if (memcmp(pk, d.keys[d.n], GOSSIP_KEY_BYTES))
                                fail_msg("vector %s: key %c is not the one of "
                                         "its seed",
                                         name, c);
                        d.n++;
                        doc_view(&d);
                } else if (!strncmp(line, "view ", 5)) {
                        for (size_t i = 0; i < d.n; i++)
                                if (line[5 + i] != 'A' + (int)d.letter_of[i])
                                        fail_msg("vector %s: view order %s, "
                                                 "not the keys' memcmp order",
                                                 name, line + 5);
                } else if (sscanf(line, "down %c", &c) == 1) {
                        if (c < 'A' || c >= 'A' + (int)d.n)
                                fail_msg("vector %s: down %c", name, c);
                        d.dead[d.index_of[c - 'A']] = 1;
                        d.have_down = 1;
                } else if (sscanf(line, "roundkeys %llu", &e) == 1) {
                        const char *k = strchr(line + 10, ' ');

                        for (unsigned i = 0; i < DOC_ROUNDS; i++) {
                                if (!k || sscanf(k, " %llx", &u) != 1 ||
                                    u != doc_round_key(d.seed, e, i))
                                        fail_msg("vector %s: round key %u of "
                                                 "epoch %llu",
                                                 name, i, e);
                                k = strchr(k + 1, ' ');
                        }
                        rows++;
                } else if (sscanf(line, "%llu", &u) == 1) {
                        struct gossip_sched s;
                        uint64_t ep;

                        /* the permutation by the text's formulas */
                        assert_int_equal(
                            gossip_sched_init(
                                &s, (const uint8_t(*)[GOSSIP_KEY_BYTES])d.view,
                                d.n, d.view[0], d.seed,
                                GOSSIP_SCHED_DISSEMINATION),
                            0);
                        ep = gossip_sched_epoch(&s, u);
                        for (size_t r = 0; r < d.n; r++)
                                assert_int_equal(
                                    doc_member_at(d.seed, d.n, ep, r),
                                    gossip_sched_member_at(&s, ep, r));
                        doc_row(&d, u, got, sizeof(got));
                        if (print) {
                                printf("%s\n", got);
                                continue;
                        }
                        squeeze(line, want);
                        squeeze(got, line);
                        if (strcmp(want, line))
                                fail_msg("vector %s, step %llu: the doc says "
                                         "\"%s\", the code \"%s\"",
                                         name, u, want, line);
                        rows++;
                }
        }
        return rows;
}

static void test_protocol_vectors(void **state)
{
        char *doc = gn_test_read_file(GN_SOURCE_DIR "/docs/protocol.md");
        int print = getenv("GN_SCHED_PRINT_VECTORS") != NULL;
        int rows;

        (void)state;
        assert_true(sodium_init() >= 0);
        assert_non_null(doc);
        /* every row of both vectors, and the round keys of epoch 0 */
        rows = doc_check(doc, "sched", print);
        if (!print)
                assert_int_equal(rows, 8 + 1);
        rows = doc_check(doc, "sched_down", print);
        if (!print)
                assert_int_equal(rows, 8);
        free(doc);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_init_rejects),
            cmocka_unit_test(test_epoch_len),
            cmocka_unit_test(test_same_permutation),
            cmocka_unit_test(test_one_partner_one_sender),
            cmocka_unit_test(test_epoch_redraw),
            cmocka_unit_test(test_skip_dead),
            cmocka_unit_test(test_small_views),
            cmocka_unit_test(test_view_calls_agree),
            cmocka_unit_test(test_protocol_vectors),
        };

        g_seed = gn_test_seed("test_sched", g_seed);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
