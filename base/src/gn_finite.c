/*
 * gn_finite.c - gn_all_finite (gn_finite.h).
 */
#include "base/gn_finite.h"

#include <stdint.h>
#include <string.h>

#include "base/gn_hot.h"

enum { GN_FINITE_BLOCK = 256 };

static inline uint32_t f2u(float f)
{
        uint32_t u;

        memcpy(&u, &f, sizeof(u));
        return u;
}

/* An exponent of all ones is Inf (mantissa 0) or NaN (not 0). */
static inline unsigned bad(float f)
{
        return (f2u(f) & 0x7f800000u) == 0x7f800000u;
}

GN_HOT int gn_all_finite(const float *x, size_t n)
{
        size_t i = 0;
        unsigned b = 0;

        for (; i + GN_FINITE_BLOCK <= n; i += GN_FINITE_BLOCK) {
                for (size_t j = 0; j < GN_FINITE_BLOCK; j++)
                        b |= bad(x[i + j]);
                if (b)
                        return 0;
        }
        for (; i < n; i++)
                b |= bad(x[i]);
        return !b;
}
