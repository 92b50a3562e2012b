/*
 * test_seed.h - where a test's randomness starts: GN_SEED from the
 * environment, printed so that any failure can be replayed exactly.
 * Header-only; every test that draws random numbers takes its seed here
 * and draws from it with base/gn_rng.h (or the module's own seeded API).
 */
#ifndef GN_TEST_SEED_H
#define GN_TEST_SEED_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* GN_SEED when set and not empty (decimal, or hex with 0x), else dflt.
 * Prints "<what>: seed=<n> (replay with GN_SEED=<n>)" on stderr (unbuffered,
 * so the line survives a crash) unless what is NULL. */
static inline uint64_t gn_test_seed(const char *what, uint64_t dflt)
{
        const char *e = getenv("GN_SEED");
        uint64_t seed = dflt;

        if (e && *e)
                seed = strtoull(e, NULL, 0);
        if (what)
                fprintf(stderr,
                        "%s: seed=%" PRIu64 " (replay with GN_SEED=%" PRIu64
                        ")\n",
                        what, seed, seed);
        return seed;
}

#endif
