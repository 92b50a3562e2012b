/*
 * schedule.c - GossipGraD partner schedule (see schedule.h for the contract).
 *
 * Invariants: every rank computation is done modulo n in [0, n); the
 * Feistel permutation is a bijection on [0, 2^(2h)) and cycle walking keeps
 * it a bijection on [0, n) (the walk from a point < n always returns to a
 * point < n because the start itself is on its cycle). Nothing here
 * allocates, reads a clock or keeps state between calls.
 */
#include <string.h>

#include "gossip/schedule.h"
#include "base/gn_rng.h"

/* Feistel rounds. Four is the Luby-Rackoff minimum for a strong
 * pseudo-random permutation; six costs nothing measurable here. */
#define SCHED_FEISTEL_ROUNDS 6

/* A hash of x: one splitmix64 step from state x. */
static uint64_t splitmix64(uint64_t x)
{
        return gn_splitmix64(&x);
}

static uint64_t round_key(const struct gossip_sched *s, uint64_t epoch,
                          unsigned round)
{
        return splitmix64(splitmix64(s->seed ^ splitmix64(epoch)) + round);
}

static uint32_t feistel_f(uint64_t key, uint32_t x, uint32_t mask)
{
        return (uint32_t)splitmix64(key ^ x) & mask;
}

/* One pass of the Feistel network over 2*half_bits bits. */
static uint32_t feistel(const struct gossip_sched *s, uint64_t epoch,
                        uint32_t x, int inverse)
{
        unsigned h = s->half_bits;
        uint32_t mask = (1u << h) - 1;
        uint32_t l = x >> h, r = x & mask, t;

        for (unsigned i = 0; i < SCHED_FEISTEL_ROUNDS; i++) {
                if (!inverse) {
                        t = l ^ feistel_f(round_key(s, epoch, i), r, mask);
                        l = r;
                        r = t;
                } else {
                        unsigned k = SCHED_FEISTEL_ROUNDS - 1 - i;
                        t = r ^ feistel_f(round_key(s, epoch, k), l, mask);
                        r = l;
                        l = t;
                }
        }
        return (l << h) | r;
}

static size_t permute(const struct gossip_sched *s, uint64_t epoch, size_t i,
                      int inverse)
{
        uint32_t x = (uint32_t)i;

        if (s->n == 1)
                return 0;
        do
                x = feistel(s, epoch, x, inverse);
        while (x >= s->n);
        return x;
}

static unsigned ceil_log2(size_t n)
{
        unsigned b = 0;

        while (((size_t)1 << b) < n)
                b++;
        return b;
}

int gossip_sched_init(struct gossip_sched *s,
                      const uint8_t (*keys)[GOSSIP_KEY_BYTES], size_t n,
                      const uint8_t self_key[GOSSIP_KEY_BYTES], uint64_t seed,
                      enum gossip_sched_pattern pattern)
{
        size_t self = n;

        if (!s || !keys || !self_key || n == 0 || n > GOSSIP_SCHED_MAX_MEMBERS)
                return GOSSIP_EINVAL;
        if (pattern != GOSSIP_SCHED_DISSEMINATION &&
            pattern != GOSSIP_SCHED_HYPERCUBE)
                return GOSSIP_EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (i > 0 &&
                    memcmp(keys[i - 1], keys[i], GOSSIP_KEY_BYTES) >= 0)
                        return GOSSIP_EINVAL;
                if (memcmp(keys[i], self_key, GOSSIP_KEY_BYTES) == 0)
                        self = i;
        }
        if (self == n)
                return GOSSIP_EINVAL;
        s->keys = keys;
        s->n = n;
        s->self = self;
        s->seed = seed;
        s->pattern = pattern;
        s->epoch_len = ceil_log2(n);
        s->half_bits = (s->epoch_len + 1) / 2;
        if (s->half_bits == 0)
                s->half_bits = 1;
        return 0;
}

unsigned gossip_sched_epoch_len(const struct gossip_sched *s)
{
        return s->epoch_len;
}

uint64_t gossip_sched_epoch(const struct gossip_sched *s, uint64_t step)
{
        return s->epoch_len ? step / s->epoch_len : 0;
}

size_t gossip_sched_member_at(const struct gossip_sched *s, uint64_t epoch,
                              size_t rank)
{
        return permute(s, epoch, rank, 0);
}

size_t gossip_sched_rank_of(const struct gossip_sched *s, uint64_t epoch,
                            size_t member)
{
        return permute(s, epoch, member, 1);
}

enum gossip_sched_pattern
gossip_sched_effective_pattern(const struct gossip_sched *s)
{
        if (s->pattern == GOSSIP_SCHED_HYPERCUBE && (s->n & (s->n - 1)) == 0)
                return GOSSIP_SCHED_HYPERCUBE;
        return GOSSIP_SCHED_DISSEMINATION;
}

/* Nominal partner rank of rank r at step (no skipping). n > 1. */
static size_t nominal_rank(const struct gossip_sched *s, size_t r,
                           uint64_t step)
{
        size_t off = (size_t)1 << (step % s->epoch_len);

        if (gossip_sched_effective_pattern(s) == GOSSIP_SCHED_HYPERCUBE)
                return r ^ off;
        return (r + off) % s->n; /* off < n: never ourselves */
}

int gossip_sched_partner_of(const struct gossip_sched *s, size_t member,
                            uint64_t step, gossip_sched_alive_fn alive,
                            void *ctx, size_t *partner)
{
        uint64_t epoch;
        size_t r, cand;

        if (!s || !partner || member >= s->n)
                return GOSSIP_EINVAL;
        if (s->n == 1)
                return GOSSIP_ENOPEER;
        epoch = gossip_sched_epoch(s, step);
        r = gossip_sched_rank_of(s, epoch, member);
        cand = nominal_rank(s, r, step);
        for (size_t tries = 0; tries < s->n; tries++) {
                if (cand != r) {
                        size_t m = gossip_sched_member_at(s, epoch, cand);
                        if (!alive || alive(ctx, m)) {
                                *partner = m;
                                return 0;
                        }
                }
                cand = (cand + 1) % s->n;
        }
        return GOSSIP_ENOPEER;
}

int gossip_sched_partner(const struct gossip_sched *s, uint64_t step,
                         gossip_sched_alive_fn alive, void *ctx,
                         size_t *partner)
{
        if (!s)
                return GOSSIP_EINVAL;
        return gossip_sched_partner_of(s, s->self, step, alive, ctx, partner);
}

/* With everyone alive the pattern is a bijection: invert it directly. */
static size_t nominal_sender(const struct gossip_sched *s, uint64_t step)
{
        uint64_t epoch = gossip_sched_epoch(s, step);
        size_t r = gossip_sched_rank_of(s, epoch, s->self);
        size_t off = (size_t)1 << (step % s->epoch_len);
        size_t from;

        if (gossip_sched_effective_pattern(s) == GOSSIP_SCHED_HYPERCUBE)
                from = r ^ off;
        else
                from = (r + s->n - off) % s->n;
        return gossip_sched_member_at(s, epoch, from);
}

int gossip_sched_senders(const struct gossip_sched *s, uint64_t step,
                         gossip_sched_alive_fn alive, void *ctx, size_t *out,
                         size_t cap, size_t *count)
{
        size_t total = 0, p;

        if (!s || !count || (cap && !out))
                return GOSSIP_EINVAL;
        if (s->n > 1 && !alive) {
                if (cap)
                        out[0] = nominal_sender(s, step);
                *count = 1;
                return 0;
        }
        /* With skipping, a run of down members before us funnels their
         * senders to us: ask every alive member where it sends. O(n) per
         * call, fine for views of a few thousand. */
        for (size_t m = 0; m < s->n; m++) {
                if (m == s->self || !alive(ctx, m))
                        continue;
                if (gossip_sched_partner_of(s, m, step, alive, ctx, &p) == 0 &&
                    p == s->self) {
                        if (total < cap)
                                out[total] = m;
                        total++;
                }
        }
        *count = total;
        return 0;
}

const uint8_t *gossip_sched_key(const struct gossip_sched *s, size_t member)
{
        return member < s->n ? s->keys[member] : NULL;
}

/* The index of key in the schedule's view, or n when it is not there. */
static size_t member_index(const struct gossip_sched *s,
                           const uint8_t key[GOSSIP_KEY_BYTES])
{
        size_t i = 0;

        while (i < s->n && memcmp(s->keys[i], key, GOSSIP_KEY_BYTES) != 0)
                i++;
        return i;
}

int gossip_sched_view_partner(const struct gossip_sched_view *v,
                              const uint8_t key[GOSSIP_KEY_BYTES],
                              uint64_t step, gossip_sched_alive_fn alive,
                              void *ctx, uint8_t partner[GOSSIP_KEY_BYTES])
{
        struct gossip_sched s;
        size_t idx;
        int rc;

        if (!v || !partner)
                return GOSSIP_EINVAL;
        if (v->n <= 1)
                return GOSSIP_ENOPEER;
        rc = gossip_sched_init(&s, v->keys, v->n, key, v->seed, v->pattern);
        if (rc == 0)
                rc = gossip_sched_partner(&s, step, alive, ctx, &idx);
        if (rc == 0)
                memcpy(partner, s.keys[idx], GOSSIP_KEY_BYTES);
        return rc;
}

int gossip_sched_alive_flags(void *ctx, size_t member)
{
        return ((const uint8_t *)ctx)[member] != 0;
}

int gossip_sched_view_is_sender(const struct gossip_sched_view *v,
                                const uint8_t from[GOSSIP_KEY_BYTES],
                                const uint8_t to[GOSSIP_KEY_BYTES],
                                uint64_t step, gossip_sched_alive_fn alive,
                                void *ctx)
{
        struct gossip_sched s;
        size_t f, p;

        if (!v || !from || v->n <= 1 ||
            gossip_sched_init(&s, v->keys, v->n, to, v->seed, v->pattern))
                return 0;
        f = member_index(&s, from);
        if (f == s.n || f == s.self)
                return 0;
        if (gossip_sched_partner_of(&s, f, step, NULL, NULL, &p) == 0 &&
            p == s.self)
                return 1;
        return alive && alive(ctx, f) &&
               gossip_sched_partner_of(&s, f, step, alive, ctx, &p) == 0 &&
               p == s.self;
}
