/*
 * gn_rng.h - the project's one generator, splitmix64. All randomness in
 * gossip/ (schedules, probe order), nn/ (initial weights, shuffles), node/
 * (backoff jitter) and the tests comes from a caller's seed through this,
 * so every node derives the same schedule from the same view, a run is
 * reproducible from its seed, and a test replays exactly from GN_SEED.
 * Its output is pinned by test_base (and by the nn/ and gossip/ tests that
 * pin weights and partner orders): changing it changes the protocol.
 */
#ifndef GN_RNG_H
#define GN_RNG_H

#include <stdint.h>

/* Advance *state and return the next 64 random bits. */
static inline uint64_t gn_splitmix64(uint64_t *state)
{
        uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

#endif
