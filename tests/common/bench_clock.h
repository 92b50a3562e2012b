/*
 * bench_clock.h - what every benchmark executable needs to time itself:
 * a monotonic clock in seconds and a qsort comparator for sorting samples
 * (best-of and medians). Header-only; the benchmarks are built, never
 * registered as tests (timing is noisy on shared machines).
 */
#ifndef GN_BENCH_CLOCK_H
#define GN_BENCH_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC. */
static inline double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* qsort order of doubles, ascending. */
static inline int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return (x > y) - (x < y);
}

#endif
