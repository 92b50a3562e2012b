/*
 * fuzz.h - what every tests/fuzz/fuzz_*.c target provides.
 *
 * A target is one C file defining LLVMFuzzerTestOneInput(). Built two ways
 * by tests/fuzz/CMakeLists.txt:
 *  - with -DGN_FUZZ=ON and clang: a libFuzzer binary fuzz_<name>;
 *  - always: replay_fuzz_<name>, the same file linked with replay_main.c, a
 *    plain-C driver that runs the target over its seed corpus and a few
 *    thousand random and mutated inputs from a fixed seed (ctest, unit).
 *
 * Optional: gn_fuzz_seeds() hands the driver built-in seed inputs (valid
 * frames, say), so no binary corpus needs to be committed; `replay_fuzz_x
 * --write-corpus DIR` writes them out as a starting corpus for libFuzzer.
 * Files in tests/fuzz/corpus/<target>/ are used too when present.
 *
 * The libraries a target links come from a line in its opening comment:
 *   " * fuzz-libs: gn_gossip gn_nn"
 * (default: gn_gossip). A target aborts (abort(), or a failed assert) when
 * an oracle is violated; returning normally means "fine".
 */
#ifndef GN_FUZZ_H
#define GN_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Calls add(ctx, bytes, len) once per built-in seed input. */
typedef void (*gn_fuzz_add_fn)(void *ctx, const uint8_t *data, size_t len);
void gn_fuzz_seeds(gn_fuzz_add_fn add, void *ctx);

/* Aborts with a message if cond is false (fuzz oracles; kept in release
 * builds, unlike assert). */
#define GN_FUZZ_CHECK(cond)                                                    \
        do {                                                                   \
                if (!(cond))                                                   \
                        gn_fuzz_fail(__FILE__, __LINE__, #cond);               \
        } while (0)
static inline void gn_fuzz_fail(const char *file, int line, const char *what)
{
        fprintf(stderr, "%s:%d: fuzz oracle violated: %s\n", file, line, what);
        abort();
}

#endif
