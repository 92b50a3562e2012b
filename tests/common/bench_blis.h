/*
 * bench_blis.h - `--blis-arch NAME` for the engine benchmarks: sets
 * BLIS_ARCH_TYPE to that kernel set's number (BLIS 0.9 reads a number,
 * once, at its initialisation) so a bench can run the set gossipnode's
 * probe chose (`gossipnode --version` names it) or BLIS's own ("blis":
 * the variable is removed).  Call before nn_lib_init().
 */
#ifndef GN_BENCH_BLIS_H
#define GN_BENCH_BLIS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"

/* 0, or -1 (with a message) for a name this BLIS does not know. */
static inline int bench_blis_arch(const char *name)
{
        char v[16];
        int id;

        if (!name || !strcmp(name, "blis")) {
                unsetenv("BLIS_ARCH_TYPE");
                return 0;
        }
        id = nn_blis_arch_id(name);
        if (id < 0 || !nn_blis_arch_usable(id)) {
                fprintf(stderr, "--blis-arch: '%s' not usable here\n", name);
                return -1;
        }
        snprintf(v, sizeof(v), "%d", id);
        setenv("BLIS_ARCH_TYPE", v, 1);
        return 0;
}

#endif
