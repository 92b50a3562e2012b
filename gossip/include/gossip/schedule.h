/*
 * schedule.h - the GossipGraD partner schedule: whom to send to at step t.
 *
 * Input: the membership view (the sorted keys of every live or suspect
 * member, ourselves included, as gossip_view() returns them), the cluster
 * seed and the step. Every node that holds the same view and seed derives
 * the same schedule, with no messages exchanged.
 *
 * The members are placed in a permutation that is re-drawn every epoch of
 * L = ceil(log2 n) steps (epoch = t / L). A node at rank r of that
 * permutation sends at step t to rank
 *      dissemination:  (r + 2^(t mod L)) mod n
 *      hypercube:      r XOR 2^(t mod L)       (n a power of two)
 * Both map ranks one-to-one, so every node has exactly one partner and
 * exactly one sender per step, and a value held by one node reaches all n
 * after L steps of averaging. For a hypercube with n not a power of two,
 * r XOR 2^k may fall outside [0, n) and pairs break up; in that case the
 * schedule falls back to the dissemination pattern for the whole view, which
 * keeps both properties (documented in docs/learning.md).
 *
 * The permutation is a keyed Feistel network over the smallest even-bit
 * domain that holds n, restricted to [0, n) by cycle walking. It needs no
 * memory, any epoch can be queried (so "who sent me the gradient of step
 * t-2" is answerable), and the inverse (rank of a member) is as cheap as
 * the forward direction. Round keys come from splitmix64(seed, epoch), never
 * from libc rand, so every machine computes the same permutation.
 *
 * Skipping: if the nominal partner is not alive (the caller's predicate;
 * typically "suspect or unknown"), the candidates nominal+1, nominal+2, ...
 * (mod n, ranks; ourselves excluded) are tried in order and the first
 * alive one is the partner. All nodes that agree on who is down agree on
 * the result. With dead members a node may get more than one sender; see
 * gossip_sched_senders().
 *
 * A struct gossip_sched borrows the key array: it must stay unchanged while
 * the schedule is used. Re-init it whenever the view changes. All calls on
 * an initialised schedule are const and may run on any thread.
 *
 * Callers that hold only a view (the node, its tests) ask through the
 * gossip_sched_view_*() calls at the end: they take the view as it is and
 * answer in keys, so nobody outside this file builds a schedule from a view.
 */
#ifndef GOSSIP_SCHED_H
#define GOSSIP_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip_types.h"

enum gossip_sched_pattern {
        GOSSIP_SCHED_DISSEMINATION = 0, /* (r + 2^k) mod n; default */
        GOSSIP_SCHED_HYPERCUBE = 1,     /* r XOR 2^k, pairs exchange */
};

/* Largest view the schedule accepts: ranks are computed in 32-bit Feistel
 * halves, and a cluster of Pi-class nodes is far smaller than this. */
#define GOSSIP_SCHED_MAX_MEMBERS (1u << 30)

/* Predicate: is view member `member` (index into the sorted key array) fit
 * to be sent to? Non-zero = yes. NULL stands for "everyone is alive". */
typedef int (*gossip_sched_alive_fn)(void *ctx, size_t member);

/* The predicate over an array of flags, one per view member (ctx: a
 * const uint8_t *; non-zero = alive): for a caller that knows who is
 * alive before it asks, so that the schedule never calls back into it. */
int gossip_sched_alive_flags(void *ctx, size_t member);

struct gossip_sched {
        const uint8_t (*keys)[GOSSIP_KEY_BYTES]; /* borrowed, sorted */
        size_t n;                                /* members in the view */
        size_t self;                             /* our index in keys */
        uint64_t seed;
        enum gossip_sched_pattern pattern; /* as configured */
        unsigned epoch_len;                /* L = ceil(log2 n); 0 if n == 1 */
        unsigned half_bits;                /* Feistel half width */
};

/* Set up a schedule over the view keys[0..n) (strictly ascending in memcmp
 * order) for the node whose key is self_key. Returns 0, or GOSSIP_EINVAL if
 * the keys are unsorted or duplicated, n is 0 or too big, or self_key is not
 * in the view; on error *s is unusable. */
int gossip_sched_init(struct gossip_sched *s,
                      const uint8_t (*keys)[GOSSIP_KEY_BYTES], size_t n,
                      const uint8_t self_key[GOSSIP_KEY_BYTES], uint64_t seed,
                      enum gossip_sched_pattern pattern);

/* L = ceil(log2 n), the number of steps in one epoch (0 when n == 1). */
unsigned gossip_sched_epoch_len(const struct gossip_sched *s);

/* The epoch that step belongs to (step / L; 0 when n == 1). */
uint64_t gossip_sched_epoch(const struct gossip_sched *s, uint64_t step);

/* The view member (index into keys) at `rank` of the epoch's permutation;
 * rank must be < n. */
size_t gossip_sched_member_at(const struct gossip_sched *s, uint64_t epoch,
                              size_t rank);

/* The rank of view member `member` in the epoch's permutation (the inverse
 * of gossip_sched_member_at); member must be < n. */
size_t gossip_sched_rank_of(const struct gossip_sched *s, uint64_t epoch,
                            size_t member);

/* The pattern actually used for this view (hypercube falls back to
 * dissemination when n is not a power of two). */
enum gossip_sched_pattern
gossip_sched_effective_pattern(const struct gossip_sched *s);

/* Our partner at `step`, as an index into keys, stored in *partner.
 * Returns 0, or GOSSIP_ENOPEER when n == 1 or no other member is alive
 * (then *partner is left unchanged). alive may be NULL. */
int gossip_sched_partner(const struct gossip_sched *s, uint64_t step,
                         gossip_sched_alive_fn alive, void *ctx,
                         size_t *partner);

/* The partner of view member `member` at `step` (as if we were it); same
 * contract as gossip_sched_partner(). */
int gossip_sched_partner_of(const struct gossip_sched *s, size_t member,
                            uint64_t step, gossip_sched_alive_fn alive,
                            void *ctx, size_t *partner);

/* Who sends to us at `step`: every alive member whose partner we are.
 * Stores up to cap of them (ascending view index) in out and the total in
 * *count. Exactly one when everyone is alive and n > 1; zero when n == 1;
 * possibly several when members are skipped. Returns 0 or GOSSIP_EINVAL. */
int gossip_sched_senders(const struct gossip_sched *s, uint64_t step,
                         gossip_sched_alive_fn alive, void *ctx, size_t *out,
                         size_t cap, size_t *count);

/* Key of view member `member` (borrowed from the array given to init). */
const uint8_t *gossip_sched_key(const struct gossip_sched *s, size_t member);

/* ---- questions asked of a view ------------------------------------------
 * A view as the node holds it: the sorted keys (as gossip_view() returns
 * them) and the schedule's parameters, which every node shares. Each call
 * below builds the schedule over it for that one question; the alive
 * predicate's member is an index into keys. */
struct gossip_sched_view {
        const uint8_t (*keys)[GOSSIP_KEY_BYTES]; /* borrowed, sorted */
        size_t n;                                /* members in the view */
        uint64_t seed;                           /* the cluster seed */
        enum gossip_sched_pattern pattern;
};

/* The partner of the member whose key is `key` at `step`, skipping members
 * alive() rejects (alive may be NULL), copied into partner. Returns 0,
 * GOSSIP_ENOPEER when the view has no other member (n <= 1) or none of them
 * is alive (partner unchanged), or GOSSIP_EINVAL when the keys are unsorted
 * or `key` is not in the view. */
int gossip_sched_view_partner(const struct gossip_sched_view *v,
                              const uint8_t key[GOSSIP_KEY_BYTES],
                              uint64_t step, gossip_sched_alive_fn alive,
                              void *ctx, uint8_t partner[GOSSIP_KEY_BYTES]);

/* Is `from` a scheduled sender to `to` at `step`? Views differ for a while
 * during churn (a member suspect at one node, alive at another), so the
 * answer is yes when from names `to` as its partner either with every
 * member alive or with the members alive() rejects skipped (then from
 * itself must be alive). Both keys must be in the view. Returns 1 or 0;
 * 0 also for a view of one, unsorted keys or a key outside the view. With
 * alive NULL only the first reading applies. */
int gossip_sched_view_is_sender(const struct gossip_sched_view *v,
                                const uint8_t from[GOSSIP_KEY_BYTES],
                                const uint8_t to[GOSSIP_KEY_BYTES],
                                uint64_t step, gossip_sched_alive_fn alive,
                                void *ctx);

#endif
