/*
 * gn_bigbuf.h - memory for a large, short-lived buffer: a model's state
 * for a joining peer and the frames that carry it (megabytes, made a few
 * times a run).
 *
 * A fresh allocation that large is mapped by the kernel one 4 kB page at
 * a time when first written: 800 page faults for the 3.3 MB state, 9-10
 * ms of CPU per buffer on the lab's virtual machines (docs/design.md,
 * "A state served costs one step"), and the state took three such
 * buffers on the device that served it. At GN_BIG_MIN bytes and more a
 * buffer is mapped on its own, 2 MB-aligned, with transparent huge pages
 * asked for (MADV_HUGEPAGE: Debian's kernels default to the "madvise"
 * mode), so the kernel maps it a 2 MB page at a time; where the kernel
 * has no huge pages it is what malloc would have done. Below GN_BIG_MIN,
 * malloc.
 *
 * Release with gn_big_free, never free(). Any thread; no state.
 */
#ifndef GN_BIGBUF_H
#define GN_BIGBUF_H

#include <stddef.h>

enum {
        /* Smaller buffers come from malloc: glibc reuses its freed
         * chunks, so the per-step slices (about 200 kB) fault nothing
         * after the first steps, and a huge page would waste most of
         * itself on them. */
        GN_BIG_MIN = 1 << 20,
        /* The huge page size of x86-64 and arm64 with 4 kB pages. */
        GN_BIG_PAGE = 2 << 20,
};

/* len bytes (uninitialised), aligned for any type; NULL on failure or
 * len 0. */
void *gn_big_alloc(size_t len);

/* Release p (NULL: nothing). */
void gn_big_free(void *p);

#endif
