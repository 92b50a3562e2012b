/*
 * metrics.h - a minimal HTTP/1.1 server for Prometheus scrapes.
 *
 * It answers "GET /metrics" (a query string is ignored; HEAD too) with
 * Prometheus text exposition format 0.0.4
 * ("Content-Type: text/plain; version=0.0.4; charset=utf-8"), 404 for any
 * other path, 405 for other methods, 431 for a request head over
 * NODE_METRICS_REQ_MAX bytes, 400 for garbage. Every response carries
 * "Connection: close" and the connection is closed after it; a client that
 * sends nothing complete within NODE_METRICS_IDLE_MS is dropped. Bind to
 * 127.0.0.1 unless the operator asks otherwise: the numbers say a lot
 * about the cluster.
 *
 * The body is built per scrape: the server writes
 * gossipnode_build_info{version="..."} 1 first, then calls the daemon's
 * fill callback, which appends families with the writer helpers below.
 * Writers prefix every name with "gossipnode_", check names against the
 * Prometheus grammar, require counters to end in "_total", and escape label
 * values (backslash, double quote, newline). A writer that meets a bad name
 * or runs out of memory records the error in the buffer and writes nothing
 * more; the scrape then gets a 500.
 *
 * SIGPIPE: libuv writes with write(2), so a peer that hangs up while we
 * write raises SIGPIPE. The program must ignore it (signal(SIGPIPE,
 * SIG_IGN) in main, before the loop runs); the write then fails with EPIPE
 * and is handled here like any other error.
 * Threading: everything on the loop thread. Errors: 0 or a negative errno.
 */
#ifndef NODE_METRICS_H
#define NODE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "gossip/gossip_types.h"

enum {
        NODE_METRICS_REQ_MAX = 8 << 10,  /* bytes of request head */
        NODE_METRICS_BODY_MAX = 4 << 20, /* bytes of one scrape's body */
        NODE_METRICS_CLIENTS_MAX = 16,   /* concurrent connections */
        NODE_METRICS_IDLE_MS = 5000,     /* slow-client guard */
        NODE_METRICS_LINGER_MS = 1000,   /* wait for the client's close */
};

#define NODE_METRICS_PREFIX "gossipnode_"

/* A growing text buffer; err is 0 or the first error met. */
struct node_metrics_buf {
        char *p;
        size_t len, cap;
        int err;
};

enum node_metrics_type {
        NODE_METRICS_COUNTER = 0,
        NODE_METRICS_GAUGE = 1,
};

struct node_metrics_label {
        const char *name;  /* [a-zA-Z_][a-zA-Z0-9_]* */
        const char *value; /* any UTF-8; escaped on output */
};

/* Append printf-style text (used by the writers; raw use is discouraged). */
void node_metrics_printf(struct node_metrics_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Write the "# HELP" and "# TYPE" lines of family `name` (without the
 * prefix, e.g. "bytes_out_total"). help is one line; it is escaped. */
void node_metrics_family(struct node_metrics_buf *b, const char *name,
                         enum node_metrics_type type, const char *help);

/* Write one sample line of family `name` with nlabels labels (labels may be
 * NULL when nlabels is 0). NaN and infinities are written as Prometheus
 * spells them (NaN, +Inf, -Inf). */
void node_metrics_sample(struct node_metrics_buf *b, const char *name,
                         const struct node_metrics_label *labels,
                         size_t nlabels, double value);

/* A family with one unlabelled sample: HELP, TYPE and the value. */
void node_metrics_counter(struct node_metrics_buf *b, const char *name,
                          const char *help, uint64_t value);
void node_metrics_gauge(struct node_metrics_buf *b, const char *name,
                        const char *help, double value);

/* Fill one scrape's body after build_info; errors go into b->err. */
typedef void (*node_metrics_fill_cb)(void *ctx, struct node_metrics_buf *b);

/* Build a whole body (build_info + fill) into b, as a scrape would. b must
 * be zeroed or reused after node_metrics_buf_free. 0 or b->err. */
int node_metrics_render(struct node_metrics_buf *b, node_metrics_fill_cb fill,
                        void *ctx);

/* Free a buffer's memory and zero it. */
void node_metrics_buf_free(struct node_metrics_buf *b);

struct node_metrics;

/* Listen for HTTP on addr (port 0 = ephemeral; see node_metrics_local_addr)
 * and serve fill's output. On error nothing is left open (-EADDRINUSE...). */
int node_metrics_open(struct node_metrics **out, uv_loop_t *loop,
                      const struct gossip_addr *addr, node_metrics_fill_cb fill,
                      void *ctx);

/* The bound address, with the real port. 0 or -errno. */
int node_metrics_local_addr(const struct node_metrics *m,
                            struct gossip_addr *out);

/* Number of scrapes answered with 200 so far. */
uint64_t node_metrics_scrapes(const struct node_metrics *m);

/* Close the listener and every connection; frees itself once closed. */
void node_metrics_close(struct node_metrics *m);

#endif
