/*
 * gn_errbuf.h - the one formatter for caller-owned error buffers.
 *
 * Calls that read files or parse user input take (char *err, size_t errlen)
 * and leave one line there naming what is wrong; the library itself never
 * prints. Every layer (nn/, gossip/, node/, tools/) formats that line here.
 * Header-only and libc-only, so the pure cores can use it without depending
 * on each other or on node/ (docs/design.md, "Errors").
 *
 * Contract: err == NULL or errlen == 0 means the caller wants no message and
 * nothing is written; otherwise the line is NUL-terminated, truncated to
 * errlen - 1 bytes.
 */
#ifndef GN_ERRBUF_H
#define GN_ERRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Format fmt/ap into err (see the contract above). */
static inline void gn_vseterr(char *err, size_t errlen, const char *fmt,
                              va_list ap)
{
        if (err == NULL || errlen == 0)
                return;
        vsnprintf(err, errlen, fmt, ap);
}

static inline void gn_seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Format one line into err. */
static inline void gn_seterr(char *err, size_t errlen, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        gn_vseterr(err, errlen, fmt, ap);
        va_end(ap);
}

static inline int gn_fail(char *err, size_t errlen, int rc, const char *fmt,
                          ...) __attribute__((format(printf, 4, 5)));

/* Format one line into err and return rc, for `return gn_fail(...)`. */
static inline int gn_fail(char *err, size_t errlen, int rc, const char *fmt,
                          ...)
{
        va_list ap;

        va_start(ap, fmt);
        gn_vseterr(err, errlen, fmt, ap);
        va_end(ap);
        return rc;
}

#endif
