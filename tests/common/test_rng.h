/*
 * test_rng.h - the tests' own deterministic generator (splitmix64), so
 * every test draws the same numbers from the same GN_SEED on every machine.
 */
#ifndef GN_TEST_RNG_H
#define GN_TEST_RNG_H

#include <stdint.h>

static inline uint64_t rng_next(uint64_t *s)
{
        uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
}

#endif
