/*
 * rng.h - the protocol core's one generator (splitmix64). All randomness
 * in gossip/ comes from the caller's seed through this, so every node
 * computes the same schedule from the same view and tests replay exactly.
 */
#ifndef GOSSIP_RNG_H
#define GOSSIP_RNG_H

#include <stdint.h>

/* Advance *state and return the next 64 random bits. */
static inline uint64_t gossip__splitmix64(uint64_t *state)
{
        uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

#endif
