/*
 * metrics.c - Prometheus text-format writers and a minimal HTTP/1.1 server
 * for /metrics (contract in metrics.h).
 *
 * The writers append to a growing buffer capped at NODE_METRICS_BODY_MAX;
 * the first error (bad name, no memory, over the cap) sticks in b->err and
 * every later write is a no-op, so a fill callback needs no error checks.
 *
 * The server reads one request head (bounded), answers it, shuts the
 * write side down and closes: one request per connection, which is all a
 * Prometheus scraper needs, and keeps the parser trivial. Each connection
 * owns two handles (the socket and an idle timer) and is freed when both
 * have closed; the server frees itself when its listener and every
 * connection have closed after node_metrics_close().
 */
#include "service/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "service/version.h"

/* ---- buffer and writers ---- */

static int buf_reserve(struct node_metrics_buf *b, size_t n)
{
        size_t cap;
        char *p;
        if (b->err)
                return b->err;
        if (b->len + n + 1 <= b->cap)
                return 0;
        if (b->len + n + 1 > NODE_METRICS_BODY_MAX)
                return b->err = -EFBIG;
        cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
                cap *= 2;
        p = realloc(b->p, cap);
        if (!p)
                return b->err = -ENOMEM;
        b->p = p;
        b->cap = cap;
        return 0;
}

static void buf_put(struct node_metrics_buf *b, const char *s, size_t n)
{
        if (buf_reserve(b, n) != 0)
                return;
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = 0;
}

static void buf_puts(struct node_metrics_buf *b, const char *s)
{
        buf_put(b, s, strlen(s));
}

void node_metrics_printf(struct node_metrics_buf *b, const char *fmt, ...)
{
        va_list ap;
        int n;
        if (b->err)
                return;
        va_start(ap, fmt);
        n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0 || buf_reserve(b, (size_t)n) != 0) {
                if (!b->err)
                        b->err = -EINVAL;
                return;
        }
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t)n;
}

static int name_ok(const char *s, int colon)
{
        if (!s || !*s || (*s >= '0' && *s <= '9'))
                return 0;
        for (; *s; s++) {
                int c = (unsigned char)*s;
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '_' ||
                      (colon && c == ':')))
                        return 0;
        }
        return 1;
}

static int ends_with(const char *s, const char *suffix)
{
        size_t n = strlen(s), k = strlen(suffix);
        return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Append s escaped: backslash and newline always, '"' when quoted. */
static void buf_escaped(struct node_metrics_buf *b, const char *s, int quoted)
{
        for (; *s && !b->err; s++) {
                if (*s == '\\')
                        buf_puts(b, "\\\\");
                else if (*s == '\n')
                        buf_puts(b, "\\n");
                else if (quoted && *s == '"')
                        buf_puts(b, "\\\"");
                else
                        buf_put(b, s, 1);
        }
}

void node_metrics_family(struct node_metrics_buf *b, const char *name,
                         enum node_metrics_type type, const char *help)
{
        if (b->err)
                return;
        if (!name_ok(name, 1) ||
            (type == NODE_METRICS_COUNTER && !ends_with(name, "_total")) ||
            (type != NODE_METRICS_COUNTER && type != NODE_METRICS_GAUGE)) {
                b->err = -EINVAL;
                return;
        }
        node_metrics_printf(b, "# HELP " NODE_METRICS_PREFIX "%s ", name);
        buf_escaped(b, help ? help : "", 0);
        node_metrics_printf(b, "\n# TYPE " NODE_METRICS_PREFIX "%s %s\n", name,
                            type == NODE_METRICS_COUNTER ? "counter" : "gauge");
}

static void sample_head(struct node_metrics_buf *b, const char *name,
                        const struct node_metrics_label *labels, size_t nlabels)
{
        if (b->err)
                return;
        if (!name_ok(name, 1) || (nlabels && !labels)) {
                b->err = -EINVAL;
                return;
        }
        node_metrics_printf(b, NODE_METRICS_PREFIX "%s", name);
        for (size_t i = 0; i < nlabels && !b->err; i++) {
                if (!name_ok(labels[i].name, 0) ||
                    strncmp(labels[i].name, "__", 2) == 0 || !labels[i].value) {
                        b->err = -EINVAL;
                        return;
                }
                node_metrics_printf(b, "%s%s=\"", i ? "," : "{",
                                    labels[i].name);
                buf_escaped(b, labels[i].value, 1);
                buf_puts(b, "\"");
        }
        if (nlabels)
                buf_puts(b, "}");
}

void node_metrics_sample(struct node_metrics_buf *b, const char *name,
                         const struct node_metrics_label *labels,
                         size_t nlabels, double value)
{
        sample_head(b, name, labels, nlabels);
        if (isnan(value))
                buf_puts(b, " NaN\n");
        else if (isinf(value))
                buf_puts(b, value > 0 ? " +Inf\n" : " -Inf\n");
        else if (value == floor(value) && fabs(value) < 9007199254740992.0)
                node_metrics_printf(b, " %.0f\n", value);
        else
                node_metrics_printf(b, " %.17g\n", value);
}

void node_metrics_counter(struct node_metrics_buf *b, const char *name,
                          const char *help, uint64_t value)
{
        node_metrics_family(b, name, NODE_METRICS_COUNTER, help);
        sample_head(b, name, NULL, 0);
        node_metrics_printf(b, " %llu\n", (unsigned long long)value);
}

void node_metrics_gauge(struct node_metrics_buf *b, const char *name,
                        const char *help, double value)
{
        node_metrics_family(b, name, NODE_METRICS_GAUGE, help);
        node_metrics_sample(b, name, NULL, 0, value);
}

void node_metrics_buf_free(struct node_metrics_buf *b)
{
        free(b->p);
        memset(b, 0, sizeof(*b));
}

int node_metrics_render(struct node_metrics_buf *b, node_metrics_fill_cb fill,
                        void *ctx)
{
        struct node_metrics_label v = {"version", node_version()};
        b->len = 0;
        b->err = 0;
        node_metrics_family(b, "build_info", NODE_METRICS_GAUGE,
                            "Build information; the value is always 1.");
        node_metrics_sample(b, "build_info", &v, 1, 1);
        if (fill)
                fill(ctx, b);
        return b->err;
}

/* ---- HTTP server ---- */

struct http_conn {
        uv_tcp_t tcp;
        uv_timer_t timer;
        uv_write_t wreq;
        uv_shutdown_t sreq;
        struct node_metrics *m;
        int open;    /* handles not yet closed (0..2) */
        int closing; /* close started */
        int answered;
        size_t have;
        char *out; /* response head + body */
        char req[NODE_METRICS_REQ_MAX];
};

struct node_metrics {
        uv_loop_t *loop;
        uv_tcp_t listener;
        struct gossip_addr local;
        node_metrics_fill_cb fill;
        void *ctx;
        int nconns;
        int handles; /* listener + 2 per connection */
        int closing;
        uint64_t scrapes;
        struct http_conn *conns[NODE_METRICS_CLIENTS_MAX];
};

static void metrics_maybe_free(struct node_metrics *m)
{
        if (m->closing && m->handles == 0)
                free(m);
}

static void http_closed(uv_handle_t *h)
{
        struct http_conn *c = h->data;
        struct node_metrics *m = c->m;
        m->handles--;
        if (--c->open > 0)
                return;
        for (int i = 0; i < NODE_METRICS_CLIENTS_MAX; i++)
                if (m->conns[i] == c)
                        m->conns[i] = NULL;
        m->nconns--;
        free(c->out);
        free(c);
        metrics_maybe_free(m);
}

static void http_close(struct http_conn *c)
{
        if (c->closing)
                return;
        c->closing = 1;
        uv_close((uv_handle_t *)&c->timer, http_closed);
        uv_close((uv_handle_t *)&c->tcp, http_closed);
}

/* Our side is done. Keep reading (and discarding) until the client
 * closes or the linger timer fires: closing with unread input would send
 * a reset that can destroy the response still in flight. */
static void http_idle(uv_timer_t *t)
{
        http_close(t->data);
}

static void http_shut(uv_shutdown_t *req, int status)
{
        struct http_conn *c = req->data;
        if (status < 0 || c->closing) {
                http_close(c);
                return;
        }
        uv_timer_start(&c->timer, http_idle, NODE_METRICS_LINGER_MS, 0);
}

static void http_written(uv_write_t *req, int status)
{
        struct http_conn *c = req->data;
        c->sreq.data = c;
        if (status < 0 || c->closing ||
            uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, http_shut) != 0)
                http_close(c);
}

/* Queue a complete response and close after it is written. */
static void http_respond(struct http_conn *c, int code, const char *reason,
                         const char *ctype, const char *extra, const char *body,
                         size_t blen, int head_only)
{
        char head[512];
        int n = snprintf(head, sizeof(head),
                         "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
                         "Content-Length: %zu\r\n%sConnection: close\r\n\r\n",
                         code, reason, ctype, blen, extra ? extra : "");
        size_t total = (size_t)n + (head_only ? 0 : blen);
        uv_buf_t b;
        c->answered = 1;
        c->out = malloc(total);
        if (!c->out) {
                http_close(c);
                return;
        }
        memcpy(c->out, head, (size_t)n);
        if (!head_only && blen)
                memcpy(c->out + n, body, blen);
        c->wreq.data = c;
        b = uv_buf_init(c->out, (unsigned)total);
        if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, http_written))
                http_close(c);
}

static void http_simple(struct http_conn *c, int code, const char *reason,
                        const char *extra)
{
        char body[64];
        int n = snprintf(body, sizeof(body), "%d %s\n", code, reason);
        http_respond(c, code, reason, "text/plain; charset=utf-8", extra, body,
                     (size_t)n, 0);
}

static void http_scrape(struct http_conn *c, int head_only)
{
        struct node_metrics_buf b = {0};
        if (node_metrics_render(&b, c->m->fill, c->m->ctx) != 0) {
                http_simple(c, 500, "Internal Server Error", NULL);
        } else {
                c->m->scrapes++;
                http_respond(c, 200, "OK",
                             "text/plain; version=0.0.4; charset=utf-8", NULL,
                             b.p, b.len, head_only);
        }
        node_metrics_buf_free(&b);
}

/* Parse the request line of a complete head and answer it. */
static void http_handle(struct http_conn *c)
{
        char *line = c->req, *sp1, *sp2, *eol;
        size_t plen;
        int head;
        eol = strpbrk(line, "\r\n");
        sp1 = memchr(line, ' ', (size_t)(eol - line));
        sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
        if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0) {
                http_simple(c, 400, "Bad Request", NULL);
                return;
        }
        head = (size_t)(sp1 - line) == 4 && memcmp(line, "HEAD", 4) == 0;
        if (!head &&
            !((size_t)(sp1 - line) == 3 && memcmp(line, "GET", 3) == 0)) {
                http_simple(c, 405, "Method Not Allowed",
                            "Allow: GET, HEAD\r\n");
                return;
        }
        plen = (size_t)(sp2 - sp1 - 1);
        char *q = memchr(sp1 + 1, '?', plen);
        if (q)
                plen = (size_t)(q - sp1 - 1);
        if (plen == 8 && memcmp(sp1 + 1, "/metrics", 8) == 0)
                http_scrape(c, head);
        else
                http_simple(c, 404, "Not Found", NULL);
}

/* Can the n bytes received so far still begin an HTTP request? The
 * request line holds printable ASCII only (CR ends it) and starts with a
 * method token of capital letters. Anything else (TLS, binary, a stray
 * protocol) is answered 400 at once rather than left to time out. */
static int http_plausible(const char *p, size_t n)
{
        size_t i, method = 0;
        int in_method = 1;
        for (i = 0; i < n && p[i] != '\n'; i++) {
                unsigned char ch = (unsigned char)p[i];
                if (in_method && ch == ' ') {
                        if (method == 0)
                                return 0;
                        in_method = 0;
                } else if (in_method) {
                        if (ch < 'A' || ch > 'Z' || ++method > 16)
                                return 0;
                } else if ((ch < 0x20 || ch > 0x7e) && ch != '\r') {
                        return 0;
                }
        }
        return 1;
}

static void http_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
        struct http_conn *c = h->data;
        if (c->answered) { /* discarding: reuse the whole buffer */
                *buf = uv_buf_init(c->req, NODE_METRICS_REQ_MAX);
                return;
        }
        /* one byte kept for the NUL terminator */
        *buf = uv_buf_init(c->req + c->have,
                           (unsigned)(NODE_METRICS_REQ_MAX - 1 - c->have));
}

static void http_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
        struct http_conn *c = s->data;
        if (c->closing)
                return;
        if (c->answered) {
                if (nread < 0)
                        http_close(c);
                return;
        }
        if (nread < 0) {
                http_close(c);
                return;
        }
        c->have += (size_t)nread;
        c->req[c->have] = 0;
        if (!http_plausible(c->req, c->have))
                http_simple(c, 400, "Bad Request", NULL);
        else if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) {
                if (strlen(c->req) != c->have) /* NUL inside: garbage */
                        http_simple(c, 400, "Bad Request", NULL);
                else
                        http_handle(c);
        } else if (c->have >= NODE_METRICS_REQ_MAX - 1) {
                http_simple(c, 431, "Request Header Fields Too Large", NULL);
        }
}

static void metrics_accept(uv_stream_t *server, int status)
{
        struct node_metrics *m = server->data;
        struct http_conn *c;
        int slot = -1;
        if (status < 0 || m->closing)
                return;
        c = calloc(1, sizeof(*c));
        if (!c)
                return;
        c->m = m;
        uv_tcp_init(m->loop, &c->tcp);
        uv_timer_init(m->loop, &c->timer);
        c->tcp.data = c->timer.data = c;
        c->open = 2;
        m->handles += 2;
        m->nconns++;
        for (int i = 0; i < NODE_METRICS_CLIENTS_MAX && slot < 0; i++)
                if (!m->conns[i])
                        slot = i;
        if (slot >= 0)
                m->conns[slot] = c;
        if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || slot < 0) {
                http_close(c);
                return;
        }
        uv_timer_start(&c->timer, http_idle, NODE_METRICS_IDLE_MS, 0);
        if (uv_read_start((uv_stream_t *)&c->tcp, http_alloc, http_read))
                http_close(c);
}

static void metrics_listener_closed(uv_handle_t *h)
{
        struct node_metrics *m = h->data;
        m->handles--;
        metrics_maybe_free(m);
}

int node_metrics_open(struct node_metrics **out, uv_loop_t *loop,
                      const struct gossip_addr *addr, node_metrics_fill_cb fill,
                      void *ctx)
{
        struct node_metrics *m;
        struct sockaddr_storage ss;
        int sl = sizeof(ss), err;
        *out = NULL;
        if (!loop || !addr || node_net_addr_to_sockaddr(addr, &ss) != 0)
                return -EINVAL;
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->loop = loop;
        m->fill = fill;
        m->ctx = ctx;
        err = uv_tcp_init(loop, &m->listener);
        if (err) {
                free(m);
                return err;
        }
        m->listener.data = m;
        m->handles = 1;
        err = uv_tcp_bind(&m->listener, (struct sockaddr *)&ss, 0);
        if (!err)
                err =
                    uv_listen((uv_stream_t *)&m->listener, 16, metrics_accept);
        if (!err)
                err = uv_tcp_getsockname(&m->listener, (struct sockaddr *)&ss,
                                         &sl);
        if (err) {
                m->closing = 1;
                uv_close((uv_handle_t *)&m->listener, metrics_listener_closed);
                return err;
        }
        node_net_addr_from_sockaddr((struct sockaddr *)&ss, &m->local);
        *out = m;
        return 0;
}

int node_metrics_local_addr(const struct node_metrics *m,
                            struct gossip_addr *out)
{
        if (!m || !out)
                return -EINVAL;
        *out = m->local;
        return 0;
}

uint64_t node_metrics_scrapes(const struct node_metrics *m)
{
        return m->scrapes;
}

void node_metrics_close(struct node_metrics *m)
{
        if (!m || m->closing)
                return;
        m->closing = 1;
        for (int i = 0; i < NODE_METRICS_CLIENTS_MAX; i++)
                if (m->conns[i])
                        http_close(m->conns[i]);
        uv_close((uv_handle_t *)&m->listener, metrics_listener_closed);
}
