/*
 * test_metrics.c - the Prometheus writers and the /metrics HTTP server
 * (node/service/metrics.c).
 *
 * Writers: exact output for families, labels (escaping), NaN/Inf, and the
 * errors (bad names, a counter without _total). Server: a real TCP client
 * on 127.0.0.1 (a thread with blocking sockets) scrapes /metrics; the test
 * checks the status line and headers, then parses every body line as
 * Prometheus text format 0.0.4 (a comment, or name{labels} value) and
 * finds build_info and the daemon's samples with their values; other
 * paths get 404, other methods 405, an oversize head 431, HEAD no body.
 * GN_SEED (printed) picks the counter values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "test_uv.h"
#include "test_seed.h"
#include "service/metrics.h"

static uint64_t g_seed;

/* ---- writers ---- */

static void test_writers_exact(void **state)
{
        struct node_metrics_buf b = {0};
        struct node_metrics_label l[2] = {{"peer", "pi-\"a\"\\b\nc"},
                                          {"dir", "out"}};
        node_metrics_family(&b, "bytes_total", NODE_METRICS_COUNTER,
                            "Bytes sent.\nSecond \\ line");
        node_metrics_sample(&b, "bytes_total", l, 2, 1234);
        node_metrics_gauge(&b, "loss", "Training loss.", 0.25);
        node_metrics_counter(&b, "steps_total", "Steps.",
                             18446744073709551615ull);
        node_metrics_sample(&b, "loss", NULL, 0, NAN);
        node_metrics_sample(&b, "loss", NULL, 0, INFINITY);
        node_metrics_sample(&b, "loss", NULL, 0, -INFINITY);
        node_metrics_sample(&b, "loss", NULL, 0, -3);
        assert_int_equal(b.err, 0);
        assert_string_equal(
            b.p, "# HELP gossipnode_bytes_total Bytes sent.\\nSecond \\\\ "
                 "line\n"
                 "# TYPE gossipnode_bytes_total counter\n"
                 "gossipnode_bytes_total{peer=\"pi-\\\"a\\\"\\\\b\\nc\","
                 "dir=\"out\"} 1234\n"
                 "# HELP gossipnode_loss Training loss.\n"
                 "# TYPE gossipnode_loss gauge\n"
                 "gossipnode_loss 0.25\n"
                 "# HELP gossipnode_steps_total Steps.\n"
                 "# TYPE gossipnode_steps_total counter\n"
                 "gossipnode_steps_total 18446744073709551615\n"
                 "gossipnode_loss NaN\n"
                 "gossipnode_loss +Inf\n"
                 "gossipnode_loss -Inf\n"
                 "gossipnode_loss -3\n");
        node_metrics_buf_free(&b);
}

static void test_writers_errors(void **state)
{
        struct node_metrics_buf b = {0};
        /* a counter must end in _total; the error sticks */
        node_metrics_family(&b, "bytes", NODE_METRICS_COUNTER, "x");
        assert_int_equal(b.err, -EINVAL);
        node_metrics_gauge(&b, "ok", "fine", 1);
        assert_int_equal(b.len, 0);
        node_metrics_buf_free(&b);

        node_metrics_gauge(&b, "9lives", "x", 1);
        assert_int_equal(b.err, -EINVAL);
        node_metrics_buf_free(&b);
        node_metrics_gauge(&b, "has space", "x", 1);
        assert_int_equal(b.err, -EINVAL);
        node_metrics_buf_free(&b);
        struct node_metrics_label bad = {"__reserved", "v"};
        node_metrics_sample(&b, "x", &bad, 1, 1);
        assert_int_equal(b.err, -EINVAL);
        node_metrics_buf_free(&b);
        struct node_metrics_label bad2 = {"a-b", "v"};
        node_metrics_sample(&b, "x", &bad2, 1, 1);
        assert_int_equal(b.err, -EINVAL);
        node_metrics_buf_free(&b);
}

static void fill_big(void *ctx, struct node_metrics_buf *b)
{
        for (int i = 0; i < 1000000 && !b->err; i++)
                node_metrics_gauge(b, "filler",
                                   "A long line to fill the "
                                   "buffer past its bound.",
                                   i);
}

static void test_render_bound(void **state)
{
        struct node_metrics_buf b = {0};
        assert_int_equal(node_metrics_render(&b, fill_big, NULL), -EFBIG);
        assert_true(b.len <= NODE_METRICS_BODY_MAX);
        node_metrics_buf_free(&b);
}

/* ---- a Prometheus text-format 0.0.4 line checker ---- */

static int is_name_char(int c, int first, int colon)
{
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
            (colon && c == ':'))
                return 1;
        return !first && c >= '0' && c <= '9';
}

/* Parse one sample line into name, labels text and value. 0 if valid. */
static int parse_sample(const char *line, char *name, size_t nlen, char *labels,
                        size_t llen, double *value)
{
        const char *p = line, *start = line;
        char *end;
        if (!is_name_char((unsigned char)*p, 1, 1))
                return -1;
        while (is_name_char((unsigned char)*p, 0, 1))
                p++;
        if ((size_t)(p - start) >= nlen)
                return -1;
        memcpy(name, start, (size_t)(p - start));
        name[p - start] = 0;
        labels[0] = 0;
        if (*p == '{') {
                const char *lstart = ++p;
                while (*p != '}') {
                        if (!is_name_char((unsigned char)*p, 1, 0))
                                return -1;
                        while (is_name_char((unsigned char)*p, 0, 0))
                                p++;
                        if (*p++ != '=' || *p++ != '"')
                                return -1;
                        while (*p != '"') {
                                if (*p == 0 || *p == '\n')
                                        return -1;
                                if (*p == '\\') {
                                        p++;
                                        if (*p != '\\' && *p != '"' &&
                                            *p != 'n')
                                                return -1;
                                }
                                p++;
                        }
                        p++;
                        if (*p == ',')
                                p++;
                        else if (*p != '}')
                                return -1;
                }
                if ((size_t)(p - lstart) >= llen)
                        return -1;
                memcpy(labels, lstart, (size_t)(p - lstart));
                labels[p - lstart] = 0;
                p++;
        }
        if (*p++ != ' ')
                return -1;
        if (strcmp(p, "NaN") == 0) {
                *value = NAN;
                return 0;
        }
        if (strcmp(p, "+Inf") == 0 || strcmp(p, "-Inf") == 0) {
                *value = p[0] == '+' ? INFINITY : -INFINITY;
                return 0;
        }
        *value = strtod(p, &end);
        return (end != p && *end == 0) ? 0 : -1;
}

struct parsed {
        int lines, comments, samples;
        int build_info;
        double peer_bytes, loss;
        int types_before_samples;
};

static int check_body(char *body, struct parsed *out)
{
        char name[128], labels[256];
        double v;
        char *save = NULL;
        memset(out, 0, sizeof(*out));
        out->types_before_samples = 1;
        for (char *line = strtok_r(body, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
                out->lines++;
                if (line[0] == '#') {
                        if (strncmp(line, "# HELP gossipnode_", 18) != 0 &&
                            strncmp(line, "# TYPE gossipnode_", 18) != 0)
                                return -1;
                        if (line[2] == 'T' && !strstr(line, " counter") &&
                            !strstr(line, " gauge"))
                                return -1;
                        out->comments++;
                        continue;
                }
                if (parse_sample(line, name, sizeof(name), labels,
                                 sizeof(labels), &v) != 0) {
                        print_error("bad line: %s\n", line);
                        return -1;
                }
                if (strncmp(name, "gossipnode_", 11) != 0)
                        return -1;
                out->samples++;
                if (strcmp(name, "gossipnode_build_info") == 0 &&
                    strcmp(labels, "version=\"0.1.0\"") == 0 && v == 1)
                        out->build_info++;
                if (strcmp(name, "gossipnode_peer_bytes_out_total") == 0 &&
                    strcmp(labels, "peer=\"pi-b\"") == 0)
                        out->peer_bytes = v;
                if (strcmp(name, "gossipnode_loss") == 0)
                        out->loss = v;
        }
        return 0;
}

/* ---- the server, scraped by a client thread ---- */

struct fillctx {
        uint64_t bytes;
        int calls;
};

static void fill(void *ctx, struct node_metrics_buf *b)
{
        struct fillctx *f = ctx;
        struct node_metrics_label l = {"peer", "pi-b"};
        f->calls++;
        node_metrics_family(b, "peer_bytes_out_total", NODE_METRICS_COUNTER,
                            "Bytes sent to a peer.");
        node_metrics_sample(b, "peer_bytes_out_total", &l, 1, (double)f->bytes);
        node_metrics_gauge(b, "loss", "Training loss of the last window.", 0.5);
        node_metrics_counter(b, "steps_total", "Optimizer steps.", 42);
}

struct job {
        uint16_t port;
        /* results, read by the main thread after join */
        char *resp[8];
        size_t resp_len[8];
};

static char *http_get(uint16_t port, const char *req, size_t len,
                      size_t *outlen)
{
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(port)};
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap + 1);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
                goto out;
        for (size_t off = 0; off < len;) {
                ssize_t w = write(fd, req + off, len - off);
                if (w <= 0)
                        break;
                off += (size_t)w;
        }
        for (;;) {
                if (n == cap) {
                        cap *= 2;
                        buf = realloc(buf, cap + 1);
                }
                ssize_t r = read(fd, buf + n, cap - n);
                if (r <= 0)
                        break;
                n += (size_t)r;
        }
out:
        close(fd);
        buf[n] = 0;
        *outlen = n;
        return buf;
}

static void scrapes(void *arg)
{
        struct job *j = arg;
        static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        static const char getq[] = "GET /metrics?x=1 HTTP/1.0\r\n\r\n";
        static const char other[] = "GET /other HTTP/1.1\r\n\r\n";
        static const char post[] = "POST /metrics HTTP/1.1\r\n\r\n";
        static const char head[] = "HEAD /metrics HTTP/1.1\r\n\r\n";
        static const char junk[] = "\x01\x02 garbage\r\n\r\n";
        j->resp[0] = http_get(j->port, get, sizeof(get) - 1, &j->resp_len[0]);
        j->resp[1] = http_get(j->port, getq, sizeof(getq) - 1, &j->resp_len[1]);
        j->resp[2] =
            http_get(j->port, other, sizeof(other) - 1, &j->resp_len[2]);
        j->resp[3] = http_get(j->port, post, sizeof(post) - 1, &j->resp_len[3]);
        j->resp[4] = http_get(j->port, head, sizeof(head) - 1, &j->resp_len[4]);
        j->resp[5] = http_get(j->port, junk, sizeof(junk) - 1, &j->resp_len[5]);
        /* a head bigger than the bound, never terminated */
        size_t n = NODE_METRICS_REQ_MAX + 100;
        char *big = malloc(n);
        memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
        memset(big + 26, 'a', n - 26);
        j->resp[6] = http_get(j->port, big, n, &j->resp_len[6]);
        free(big);
        /* garbage that never ends a head (a TLS hello): 400 at once, not
         * a silent close after the read timeout */
        static const char tls[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03";
        j->resp[7] = http_get(j->port, tls, sizeof(tls) - 1, &j->resp_len[7]);
}

static const char *body_of(char *resp)
{
        char *p = strstr(resp, "\r\n\r\n");
        return p ? p + 4 : NULL;
}

static int has_header(const char *resp, const char *h)
{
        const char *end = strstr(resp, "\r\n\r\n");
        const char *p = strstr(resp, h);
        return p && end && p < end;
}

static void test_server(void **state)
{
        uv_loop_t loop;
        struct node_metrics *m = NULL;
        struct gossip_addr a = {.family = 4}, bound;
        struct fillctx f = {.bytes = (g_seed % 1000000) * 1000};
        struct job j = {0};
        uv_loop_init(&loop);
        a.addr[0] = 127;
        a.addr[3] = 1;
        assert_int_equal(node_metrics_open(&m, &loop, &a, fill, &f), 0);
        assert_int_equal(node_metrics_local_addr(m, &bound), 0);
        assert_int_not_equal(bound.port, 0);
        assert_int_equal(bound.addr[0], 127);

        j.port = bound.port;
        assert_int_equal(gn_test_loop_run_thread(&loop, scrapes, &j), 0);

        /* 200 with the exposition format's content type */
        char *r = j.resp[0];
        assert_true(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
        assert_true(has_header(r, "\r\nContent-Type: text/plain; "
                                  "version=0.0.4; charset=utf-8\r\n"));
        assert_true(has_header(r, "\r\nConnection: close\r\n"));
        const char *body = body_of(r);
        assert_non_null(body);
        char cl[64];
        snprintf(cl, sizeof(cl), "\r\nContent-Length: %zu\r\n", strlen(body));
        assert_true(has_header(r, cl));
        /* build_info comes first */
        assert_true(strncmp(body, "# HELP gossipnode_build_info ", 29) == 0);
        struct parsed p;
        char *copy = strdup(body);
        assert_int_equal(check_body(copy, &p), 0);
        free(copy);
        assert_int_equal(p.build_info, 1);
        assert_int_equal(p.samples, 4);
        assert_int_equal(p.comments, 8);
        assert_true(p.peer_bytes == (double)f.bytes);
        assert_true(p.loss == 0.5);

        /* query string ignored */
        assert_true(strncmp(j.resp[1], "HTTP/1.1 200 OK\r\n", 17) == 0);
        assert_true(strncmp(j.resp[2], "HTTP/1.1 404 Not Found\r\n", 24) == 0);
        assert_true(has_header(j.resp[2], "\r\nConnection: close\r\n"));
        assert_true(strncmp(j.resp[3], "HTTP/1.1 405 ", 13) == 0);
        assert_true(has_header(j.resp[3], "\r\nAllow: GET, HEAD\r\n"));
        /* HEAD: headers only */
        assert_true(strncmp(j.resp[4], "HTTP/1.1 200 OK\r\n", 17) == 0);
        assert_string_equal(body_of(j.resp[4]), "");
        assert_true(strncmp(j.resp[5], "HTTP/1.1 400 ", 13) == 0);
        assert_true(strncmp(j.resp[6], "HTTP/1.1 431 ", 13) == 0);
        assert_true(strncmp(j.resp[7], "HTTP/1.1 400 ", 13) == 0);
        assert_int_equal(f.calls, 3);
        assert_int_equal(node_metrics_scrapes(m), 3);

        for (int i = 0; i < 8; i++)
                free(j.resp[i]);
        node_metrics_close(m);
        assert_int_equal(gn_test_loop_close(&loop), 0);
}

static void test_port_in_use(void **state)
{
        uv_loop_t loop;
        struct node_metrics *m = NULL, *m2 = NULL;
        struct gossip_addr a = {.family = 4}, bound;
        uv_loop_init(&loop);
        a.addr[0] = 127;
        a.addr[3] = 1;
        assert_int_equal(node_metrics_open(&m, &loop, &a, NULL, NULL), 0);
        node_metrics_local_addr(m, &bound);
        assert_int_equal(node_metrics_open(&m2, &loop, &bound, NULL, NULL),
                         -EADDRINUSE);
        assert_null(m2);
        node_metrics_close(m);
        assert_int_equal(gn_test_loop_close(&loop), 0);
}

int main(void)
{
        signal(SIGPIPE, SIG_IGN); /* as the daemon must: see net.h */
        g_seed = gn_test_seed("test_metrics", 0x5eed0003ull);
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_writers_exact),
            cmocka_unit_test(test_writers_errors),
            cmocka_unit_test(test_render_bound),
            cmocka_unit_test(test_server),
            cmocka_unit_test(test_port_in_use),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
