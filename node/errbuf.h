/* errbuf.h - the one-line error messages of node/ calls that read files. */
#ifndef NODE_ERRBUF_H
#define NODE_ERRBUF_H

#include <stddef.h>

/* Format one line into a caller's error buffer (NULL or 0 bytes: nothing
 * is written). */
void node_seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
