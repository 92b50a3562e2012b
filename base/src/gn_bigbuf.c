/*
 * gn_bigbuf.c - large short-lived buffers on huge pages (gn_bigbuf.h).
 *
 * Every buffer starts with a header of GN_BIG_HDR bytes just before the
 * pointer handed out: the mapping's start and length (0 for a malloc'd
 * one), so gn_big_free needs no size. A mapped buffer's data starts on a
 * GN_BIG_PAGE boundary; its header lives in the slack page before it.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, madvise */

#include "base/gn_bigbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

struct big_hdr {
        void *map;      /* the mapping's start, or the malloc'd block */
        size_t map_len; /* the mapping's length; 0: malloc'd */
};

/* A multiple of every alignment a caller may need (max_align_t). */
#define GN_BIG_HDR ((size_t)64)
_Static_assert(sizeof(struct big_hdr) <= GN_BIG_HDR, "header fits");

static size_t round_up(size_t n, size_t to)
{
        return (n + to - 1) / to * to;
}

static void *map_big(size_t len)
{
        size_t data = round_up(len, GN_BIG_PAGE);
        size_t map_len = GN_BIG_PAGE + data; /* slack: alignment + header */
        uint8_t *map, *p;
        struct big_hdr *h;

        if (len > SIZE_MAX - 2 * (size_t)GN_BIG_PAGE)
                return NULL;
        map = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED)
                return NULL;
        /* the first 2 MB boundary with room for the header before it */
        p = (uint8_t *)round_up((uintptr_t)map + GN_BIG_HDR, GN_BIG_PAGE);
#ifdef MADV_HUGEPAGE
        /* advice: a kernel without huge pages says EINVAL, and the
         * buffer works on small pages */
        (void)madvise(p, data, MADV_HUGEPAGE);
#endif
        h = (struct big_hdr *)(p - GN_BIG_HDR);
        h->map = map;
        h->map_len = map_len;
        return p;
}

void *gn_big_alloc(size_t len)
{
        uint8_t *b;

        if (len == 0)
                return NULL;
        if (len >= GN_BIG_MIN)
                return map_big(len);
        if (len > SIZE_MAX - GN_BIG_HDR || !(b = malloc(GN_BIG_HDR + len)))
                return NULL;
        ((struct big_hdr *)b)->map = b;
        ((struct big_hdr *)b)->map_len = 0;
        return b + GN_BIG_HDR;
}

void gn_big_free(void *p)
{
        struct big_hdr *h;

        if (!p)
                return;
        h = (struct big_hdr *)((uint8_t *)p - GN_BIG_HDR);
        if (h->map_len)
                munmap(h->map, h->map_len);
        else
                free(h->map);
}
