/*
 * test_ctl.c - the control socket server (node/service/ctl.c) over a real Unix
 * socket.
 *
 * The server runs on the main thread's libuv loop; a client thread uses
 * the blocking helpers from ctl.h, so both sides are the real code. Shows:
 * requests round-trip (built-in "version", handler data, args passed
 * through, handler errors, unknown commands, pipelined requests on one
 * connection); malformed, hostile and oversize requests get an error
 * response or a closed connection and the server stays up; the socket file
 * is 0600, a live daemon's path is refused, a stale socket is replaced, a
 * regular file is never touched, and the file is removed on close; extra
 * clients over the bound are refused. GN_SEED (printed) drives the random
 * mutations; the socket lives in a fresh directory (test_tmpdir.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "test_uv.h"
#include "test_tmpdir.h"
#include "base/gn_rng.h"
#include "test_seed.h"
#include "service/ctl.h"

static uint64_t g_seed;
static struct node_ctl *g_ctl; /* for the "quit" command */
static char g_dir[64];
static char g_path[160];

/* ---- the daemon side: a handler with a few commands ---- */

static int handler(void *ctx, const char *cmd, const msgpack_object *args,
                   msgpack_packer *pk, char *err, size_t errlen)
{
        int *calls = ctx;
        (*calls)++;
        if (strcmp(cmd, "members") == 0) {
                msgpack_pack_array(pk, 2);
                for (int i = 0; i < 2; i++) {
                        msgpack_pack_map(pk, 2);
                        node_ctl_pack_kstr(pk, "name", i ? "pi-b" : "pi-a");
                        node_ctl_pack_ku64(pk, "step", 100 + (uint64_t)i);
                }
                return 0;
        }
        if (strcmp(cmd, "echo") == 0)
                return msgpack_pack_object(pk, *args);
        if (strcmp(cmd, "fail") == 0) {
                /* packs something, then fails: it must be discarded */
                msgpack_pack_int(pk, 1);
                snprintf(err, errlen, "it failed\non purpose");
                return -EIO;
        }
        if (strcmp(cmd, "quit") == 0) {
                /* the daemon shuts the server down from inside a handler */
                node_ctl_close(g_ctl);
                msgpack_pack_true(pk);
                return 0;
        }
        if (strcmp(cmd, "two") == 0) {
                msgpack_pack_int(pk, 1);
                msgpack_pack_int(pk, 2);
                return 0;
        }
        snprintf(err, errlen, "unknown command: %s", cmd);
        return -ENOTSUP;
}

/* ---- running a client thread against the loop ---- */

struct job {
        void (*fn)(struct job *);
        int failures; /* client-side checks that failed */
        char what[256];
};

static void job_thread(void *arg)
{
        struct job *j = arg;
        j->fn(j);
}

static void run_job(uv_loop_t *loop, void (*fn)(struct job *), struct job *j)
{
        memset(j, 0, sizeof(*j));
        j->fn = fn;
        assert_int_equal(gn_test_loop_run_thread(loop, job_thread, j), 0);
        if (j->failures)
                fail_msg("client: %s", j->what);
}

#define CHECK(j, cond)                                                         \
        do {                                                                   \
                if (!(cond) && !(j)->failures++)                               \
                        snprintf((j)->what, sizeof((j)->what), "line %d: %s",  \
                                 __LINE__, #cond);                             \
        } while (0)

/* ---- client-side helpers (blocking) ---- */

struct reply {
        void *buf;
        msgpack_unpacked u;
        const msgpack_object *ok, *data, *error;
        int rc;
};

static const msgpack_object *get(const msgpack_object *m, const char *k)
{
        if (m->type != MSGPACK_OBJECT_MAP)
                return NULL;
        for (uint32_t i = 0; i < m->via.map.size; i++) {
                const msgpack_object *key = &m->via.map.ptr[i].key;
                if (key->type == MSGPACK_OBJECT_STR &&
                    key->via.str.size == strlen(k) &&
                    memcmp(key->via.str.ptr, k, strlen(k)) == 0)
                        return &m->via.map.ptr[i].val;
        }
        return NULL;
}

static int recv_reply(int fd, struct reply *r)
{
        size_t len, off = 0;
        memset(r, 0, sizeof(*r));
        msgpack_unpacked_init(&r->u);
        r->rc = node_ctl_client_recv(fd, &r->buf, &len);
        if (r->rc)
                return r->rc;
        if (msgpack_unpack_next(&r->u, r->buf, len, &off) !=
                MSGPACK_UNPACK_SUCCESS ||
            off != len)
                return r->rc = -EBADMSG;
        r->ok = get(&r->u.data, "ok");
        r->data = get(&r->u.data, "data");
        r->error = get(&r->u.data, "error");
        return 0;
}

static void reply_free(struct reply *r)
{
        msgpack_unpacked_destroy(&r->u);
        free(r->buf);
}

static int is_true(const msgpack_object *o)
{
        return o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
}

static int is_false(const msgpack_object *o)
{
        return o && o->type == MSGPACK_OBJECT_BOOLEAN && !o->via.boolean;
}

static int str_eq(const msgpack_object *o, const char *s)
{
        return o && o->type == MSGPACK_OBJECT_STR &&
               o->via.str.size == strlen(s) &&
               memcmp(o->via.str.ptr, s, strlen(s)) == 0;
}

static int send_cmd(int fd, const char *cmd)
{
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        node_ctl_pack_request(&sb, cmd);
        int r = node_ctl_client_send(fd, sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
        return r;
}

/* ---- round trips ---- */

static void client_roundtrip(struct job *j)
{
        struct reply r;
        int fd = node_ctl_client_connect(g_path);
        CHECK(j, fd >= 0);
        if (fd < 0)
                return;

        CHECK(j, send_cmd(fd, "version") == 0);
        CHECK(j, recv_reply(fd, &r) == 0);
        CHECK(j, is_true(r.ok));
        CHECK(j, r.data && get(r.data, "protocol") &&
                     get(r.data, "protocol")->via.u64 == 1);
        CHECK(j, str_eq(get(r.data, "version"), "0.1.0"));
        reply_free(&r);

        CHECK(j, send_cmd(fd, "members") == 0);
        CHECK(j, recv_reply(fd, &r) == 0);
        CHECK(j, is_true(r.ok));
        CHECK(j, r.data && r.data->type == MSGPACK_OBJECT_ARRAY &&
                     r.data->via.array.size == 2);
        if (r.data && r.data->type == MSGPACK_OBJECT_ARRAY &&
            r.data->via.array.size == 2) {
                CHECK(j,
                      str_eq(get(&r.data->via.array.ptr[1], "name"), "pi-b"));
                CHECK(j,
                      get(&r.data->via.array.ptr[1], "step")->via.u64 == 101);
        }
        reply_free(&r);

        /* args pass through: {"cmd":"echo","args":{"addr":"10.0.0.1:7946"}} */
        {
                msgpack_sbuffer sb;
                msgpack_packer pk;
                msgpack_sbuffer_init(&sb);
                msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
                msgpack_pack_map(&pk, 2);
                node_ctl_pack_kstr(&pk, "cmd", "echo");
                node_ctl_pack_str(&pk, "args");
                msgpack_pack_map(&pk, 1);
                node_ctl_pack_kstr(&pk, "addr", "10.0.0.1:7946");
                CHECK(j, node_ctl_client_send(fd, sb.data, sb.size) == 0);
                msgpack_sbuffer_destroy(&sb);
        }
        CHECK(j, recv_reply(fd, &r) == 0);
        CHECK(j, is_true(r.ok));
        CHECK(j, r.data && str_eq(get(r.data, "addr"), "10.0.0.1:7946"));
        reply_free(&r);

        /* handler failure: its partial data is discarded, one-line error */
        CHECK(j, send_cmd(fd, "fail") == 0);
        CHECK(j, recv_reply(fd, &r) == 0);
        CHECK(j, is_false(r.ok));
        CHECK(j, r.data == NULL);
        CHECK(j, str_eq(r.error, "it failed on purpose"));
        reply_free(&r);

        /* a handler that packs two objects is an internal error */
        CHECK(j, send_cmd(fd, "two") == 0);
        CHECK(j, recv_reply(fd, &r) == 0);
        CHECK(j, is_false(r.ok));
        reply_free(&r);

        CHECK(j, send_cmd(fd, "frobnicate") == 0);
        CHECK(j, recv_reply(fd, &r) == 0);
        CHECK(j, is_false(r.ok));
        CHECK(j, str_eq(r.error, "unknown command: frobnicate"));
        reply_free(&r);

        /* pipelined: three requests, then three answers in order */
        CHECK(j, send_cmd(fd, "members") == 0);
        CHECK(j, send_cmd(fd, "fail") == 0);
        CHECK(j, send_cmd(fd, "version") == 0);
        CHECK(j, recv_reply(fd, &r) == 0);
        CHECK(j, is_true(r.ok) && r.data->type == MSGPACK_OBJECT_ARRAY);
        reply_free(&r);
        CHECK(j, recv_reply(fd, &r) == 0);
        CHECK(j, is_false(r.ok));
        reply_free(&r);
        CHECK(j, recv_reply(fd, &r) == 0);
        CHECK(j, is_true(r.ok) && get(r.data, "protocol"));
        reply_free(&r);
        close(fd);
}

static struct node_ctl *open_ctl(uv_loop_t *loop, int *calls)
{
        struct node_ctl_config cfg = {
            .path = g_path, .handler = handler, .ctx = calls};
        struct node_ctl *ctl = NULL;
        assert_int_equal(node_ctl_open(&ctl, loop, &cfg), 0);
        return ctl;
}

/* One server on a fresh loop and one client thread running fn; *calls
 * and *st are the handler's calls and the server's stats once the client
 * is done. The server is closed and the loop must close clean. */
static void serve_one(void (*fn)(struct job *), int *calls,
                      struct node_ctl_stats *st)
{
        uv_loop_t loop;
        struct job j;
        uv_loop_init(&loop);
        struct node_ctl *ctl = open_ctl(&loop, calls);
        run_job(&loop, fn, &j);
        node_ctl_stats(ctl, st);
        node_ctl_close(ctl);
        assert_int_equal(gn_test_loop_close(&loop), 0);
}

static void test_roundtrip(void **state)
{
        int calls = 0;
        struct node_ctl_stats st;
        serve_one(client_roundtrip, &calls, &st);
        assert_int_equal(calls, 7); /* "version" never reaches it */
        assert_int_equal(st.clients, 1);
        assert_int_equal(st.requests, 5);
        assert_int_equal(st.errors, 4);
        assert_int_equal(st.bad_requests, 0);
}

/* ---- bad input ---- */

static int send_raw(int fd, const void *p, size_t n)
{
        return node_ctl_client_send(fd, p, n);
}

static int contains(const char *hay, size_t n, const char *needle)
{
        size_t k = strlen(needle);
        for (size_t i = 0; i + k <= n; i++)
                if (memcmp(hay + i, needle, k) == 0)
                        return 1;
        return 0;
}

static int expect_error(struct job *j, int fd, const char *substr)
{
        struct reply r;
        int ok = recv_reply(fd, &r) == 0 && is_false(r.ok) && r.error &&
                 r.error->type == MSGPACK_OBJECT_STR;
        if (ok && substr)
                ok = contains(r.error->via.str.ptr, r.error->via.str.size,
                              substr);
        reply_free(&r);
        return ok;
}

static int expect_ok(int fd)
{
        struct reply r;
        int ok = recv_reply(fd, &r) == 0 && is_true(r.ok);
        reply_free(&r);
        return ok;
}

/* The server closed the connection (EOF, or a reset for a connection it
 * never accepted), without sending anything more. */
static int expect_eof(int fd)
{
        char c;
        ssize_t n = read(fd, &c, 1);
        return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void client_bad(struct job *j)
{
        int fd = node_ctl_client_connect(g_path);
        CHECK(j, fd >= 0);
        if (fd < 0)
                return;
        /* framing intact, body bad: error, connection stays usable */
        static const uint8_t garbage[] = {0xc1, 0xc1, 0xc1};
        CHECK(j, send_raw(fd, garbage, sizeof(garbage)) == 0);
        CHECK(j, expect_error(j, fd, "malformed"));
        static const uint8_t not_map[] = {0x93, 1, 2, 3}; /* [1,2,3] */
        CHECK(j, send_raw(fd, not_map, sizeof(not_map)) == 0);
        CHECK(j, expect_error(j, fd, "not a map"));
        static const uint8_t no_cmd[] = {0x80}; /* {} */
        CHECK(j, send_raw(fd, no_cmd, sizeof(no_cmd)) == 0);
        CHECK(j, expect_error(j, fd, "\"cmd\""));
        static const uint8_t int_cmd[] = {0x81, 0xa3, 'c', 'm', 'd', 7};
        CHECK(j, send_raw(fd, int_cmd, sizeof(int_cmd)) == 0);
        CHECK(j, expect_error(j, fd, "\"cmd\""));
        static const uint8_t bad_args[] = {0x82, 0xa3, 'c', 'm',  'd',  0xa4,
                                           'e',  'c',  'h', 'o',  0xa4, 'a',
                                           'r',  'g',  's', 0x91, 1};
        CHECK(j, send_raw(fd, bad_args, sizeof(bad_args)) == 0);
        CHECK(j, expect_error(j, fd, "\"args\""));
        /* declares 2^32-1 map entries in 5 bytes: must not allocate */
        static const uint8_t huge_map[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
        CHECK(j, send_raw(fd, huge_map, sizeof(huge_map)) == 0);
        CHECK(j, expect_error(j, fd, "malformed"));
        /* str32 claiming 4 GiB */
        static const uint8_t huge_str[] = {0x81, 0xdb, 0xff, 0xff,
                                           0xff, 0xff, 'x'};
        CHECK(j, send_raw(fd, huge_str, sizeof(huge_str)) == 0);
        CHECK(j, expect_error(j, fd, "malformed"));
        /* trailing bytes after one object */
        static const uint8_t trailing[] = {0x80, 0x80};
        CHECK(j, send_raw(fd, trailing, sizeof(trailing)) == 0);
        CHECK(j, expect_error(j, fd, "malformed"));
        /* a 40-byte command name */
        {
                uint8_t longcmd[64] = {0x81, 0xa3, 'c', 'm', 'd', 0xd9, 40};
                memset(longcmd + 7, 'x', 40);
                CHECK(j, send_raw(fd, longcmd, 7 + 40) == 0);
                CHECK(j, expect_error(j, fd, "\"cmd\""));
        }
        /* still alive and usable on the same connection */
        CHECK(j, send_cmd(fd, "version") == 0);
        CHECK(j, expect_ok(fd));

        /* oversize length prefix: error response, then closed */
        uint8_t hdr[4] = {0, 0x01, 0x00, 0x01}; /* 65537 */
        CHECK(j, write(fd, hdr, 4) == 4);
        CHECK(j, expect_error(j, fd, "too large"));
        CHECK(j, expect_eof(fd));
        close(fd);

        /* zero length: error, then closed */
        fd = node_ctl_client_connect(g_path);
        uint8_t zero[4] = {0, 0, 0, 0};
        CHECK(j, write(fd, zero, 4) == 4);
        CHECK(j, expect_error(j, fd, "empty"));
        CHECK(j, expect_eof(fd));
        close(fd);

        /* half a request, then hang up: nothing to answer, no crash */
        fd = node_ctl_client_connect(g_path);
        uint8_t half[6] = {0, 0, 0, 20, 0x82, 0xa3};
        CHECK(j, write(fd, half, 6) == 6);
        close(fd);

        /* a request of exactly the bound: answered (as malformed) */
        fd = node_ctl_client_connect(g_path);
        uint8_t *big = calloc(1, NODE_CTL_REQ_MAX);
        CHECK(j, send_raw(fd, big, NODE_CTL_REQ_MAX) == 0);
        CHECK(j, expect_error(j, fd, "malformed"));
        free(big);
        CHECK(j, send_cmd(fd, "version") == 0);
        CHECK(j, expect_ok(fd));
        close(fd);
}

static void test_bad_requests(void **state)
{
        int calls = 0;
        struct node_ctl_stats st;
        serve_one(client_bad, &calls, &st);
        assert_int_equal(calls, 0);
        assert_int_equal(st.bad_requests, 12);
        assert_int_equal(st.requests, 2);
}

/* ---- random mutations: every frame gets exactly one answer ---- */

enum { MUTATIONS = 3000 };

static void client_mutate(struct job *j)
{
        static const uint8_t base[] = {
            0x82, 0xa3, 'c', 'm',  'd', 0xa4, 'e',  'c', 'h',  'o',
            0xa4, 'a',  'r', 'g',  's', 0x82, 0xa1, 'k', 0xdc, 0,
            2,    0xcb, 1,   2,    3,   4,    5,    6,   7,    8,
            0xc0, 0xa1, 'm', 0xde, 0,   1,    0xa0, 0xc3};
        uint8_t buf[sizeof(base) + 8];
        uint64_t s = g_seed;
        int fd = node_ctl_client_connect(g_path);
        CHECK(j, fd >= 0);
        for (int i = 0; i < MUTATIONS && !j->failures; i++) {
                size_t n = sizeof(base);
                memcpy(buf, base, n);
                int flips = 1 + (int)(gn_splitmix64(&s) % 4);
                for (int k = 0; k < flips; k++)
                        buf[gn_splitmix64(&s) % n] = (uint8_t)gn_splitmix64(&s);
                if (gn_splitmix64(&s) % 4 == 0)
                        n = 1 + gn_splitmix64(&s) % n; /* truncate */
                CHECK(j, send_raw(fd, buf, n) == 0);
                struct reply r;
                int rc = recv_reply(fd, &r);
                if (rc != 0 && !j->failures++)
                        snprintf(j->what, sizeof(j->what),
                                 "mutation %d (seed %llu): no answer (%d)", i,
                                 (unsigned long long)g_seed, rc);
                CHECK(j, r.ok && r.ok->type == MSGPACK_OBJECT_BOOLEAN);
                reply_free(&r);
        }
        close(fd);
}

static void test_mutations(void **state)
{
        int calls = 0;
        struct node_ctl_stats st;
        serve_one(client_mutate, &calls, &st);
        assert_int_equal(st.requests + st.errors, MUTATIONS);
        printf("# mutations: %llu answered ok, %llu errors (%llu bad)\n",
               (unsigned long long)st.requests, (unsigned long long)st.errors,
               (unsigned long long)st.bad_requests);
}

/* ---- the socket file ---- */

static void client_ping(struct job *j)
{
        int fd = node_ctl_client_connect(g_path);
        CHECK(j, fd >= 0);
        CHECK(j, send_cmd(fd, "version") == 0);
        CHECK(j, expect_ok(fd));
        close(fd);
}

static void test_socket_file(void **state)
{
        uv_loop_t loop;
        int calls = 0;
        struct stat st;
        struct job j;
        struct node_ctl *ctl2 = NULL;
        struct node_ctl_config cfg = {
            .path = g_path, .handler = handler, .ctx = &calls};
        uv_loop_init(&loop);
        struct node_ctl *ctl = open_ctl(&loop, &calls);
        assert_int_equal(lstat(g_path, &st), 0);
        assert_true(S_ISSOCK(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0600);
        /* a live daemon answers there: refuse, leave it alone */
        assert_int_equal(node_ctl_open(&ctl2, &loop, &cfg), -EADDRINUSE);
        assert_null(ctl2);
        run_job(&loop, client_ping, &j);
        node_ctl_close(ctl);
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(lstat(g_path, &st), -1);
        assert_int_equal(errno, ENOENT);

        /* a stale socket (its process died) is replaced */
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        strcpy(sa.sun_path, g_path);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        close(fd);
        assert_int_equal(lstat(g_path, &st), 0);
        ctl = open_ctl(&loop, &calls);
        run_job(&loop, client_ping, &j);
        node_ctl_close(ctl);
        uv_run(&loop, UV_RUN_DEFAULT);

        /* a regular file is never removed */
        fd = open(g_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "keep", 4), 4);
        close(fd);
        assert_int_equal(node_ctl_open(&ctl2, &loop, &cfg), -EEXIST);
        assert_int_equal(lstat(g_path, &st), 0);
        assert_int_equal(st.st_size, 4);
        unlink(g_path);

        /* a path too long for sun_path */
        char longp[200];
        memset(longp, 'a', sizeof(longp) - 1);
        longp[sizeof(longp) - 1] = 0;
        cfg.path = longp;
        assert_int_equal(node_ctl_open(&ctl2, &loop, &cfg), -ENAMETOOLONG);
        assert_int_equal(gn_test_loop_close(&loop), 0);
}

/* ---- closing from inside a handler ---- */

static void client_quit(struct job *j)
{
        struct reply r;
        int fd = node_ctl_client_connect(g_path);
        int idle = node_ctl_client_connect(g_path);
        CHECK(j, fd >= 0 && idle >= 0);
        /* "quit", then a pipelined request that must not run; one write,
         * so the second cannot meet a closed socket */
        uint8_t two[64];
        size_t n = 0;
        const char *cmds[2] = {"quit", "members"};
        for (int i = 0; i < 2; i++) {
                msgpack_sbuffer sb;
                msgpack_sbuffer_init(&sb);
                node_ctl_pack_request(&sb, cmds[i]);
                two[n] = two[n + 1] = two[n + 2] = 0;
                two[n + 3] = (uint8_t)sb.size;
                memcpy(two + n + 4, sb.data, sb.size);
                n += 4 + sb.size;
                msgpack_sbuffer_destroy(&sb);
        }
        CHECK(j, write(fd, two, n) == (ssize_t)n);
        CHECK(j, recv_reply(fd, &r) == 0);
        CHECK(j, is_true(r.ok) && r.data &&
                     r.data->type == MSGPACK_OBJECT_BOOLEAN);
        reply_free(&r);
        CHECK(j, expect_eof(fd));
        CHECK(j, expect_eof(idle));
        close(fd);
        close(idle);
}

static void test_close_from_handler(void **state)
{
        uv_loop_t loop;
        int calls = 0;
        struct job j;
        struct stat st;
        uv_loop_init(&loop);
        g_ctl = open_ctl(&loop, &calls);
        run_job(&loop, client_quit, &j);
        assert_int_equal(calls, 1); /* "members" never ran */
        assert_int_equal(lstat(g_path, &st), -1);
        g_ctl = NULL;
        assert_int_equal(gn_test_loop_close(&loop), 0);
}

/* ---- too many clients ---- */

static void client_many(struct job *j)
{
        int fds[NODE_CTL_CLIENTS_MAX + 1];
        for (int i = 0; i <= NODE_CTL_CLIENTS_MAX; i++)
                fds[i] = node_ctl_client_connect(g_path);
        /* the first 32 each get an answer */
        for (int i = 0; i < NODE_CTL_CLIENTS_MAX; i++) {
                CHECK(j, send_cmd(fds[i], "version") == 0);
                CHECK(j, expect_ok(fds[i]));
        }
        /* the 33rd (accepted last) was closed without a word */
        CHECK(j, expect_eof(fds[NODE_CTL_CLIENTS_MAX]));
        for (int i = 0; i <= NODE_CTL_CLIENTS_MAX; i++)
                close(fds[i]);
}

static void test_too_many_clients(void **state)
{
        int calls = 0;
        struct node_ctl_stats st;
        serve_one(client_many, &calls, &st);
        assert_int_equal(st.clients, NODE_CTL_CLIENTS_MAX);
        assert_int_equal(st.clients_refused, 1);
}

/* The reply helpers, byte for byte: one map of each kind of entry. */
static void test_pack_helpers(void **state)
{
        static const uint8_t want[] = {
            0x87,                                          /* map of 7 */
            0xa1, 'k', 0xa2, 'h',  'i',                    /* "k": "hi" */
            0xa1, 'u', 0xcf, 0,    0,    0, 1, 0, 0, 0, 2, /* "u": uint64 */
            0xa1, 'd', 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, /* "d": 1.5 */
            0xa1, 'n', 0xc0,                               /* "n": NaN -> nil */
            0xa1, 'i', 0xc0, /* "i": -Inf -> nil */
            0xa1, 'b', 0xc3, /* "b": true */
            0xa1, 'f', 0xc2, /* "f": false */
        };
        msgpack_sbuffer sb;
        msgpack_packer pk;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 7);
        node_ctl_pack_kstr(&pk, "k", "hi");
        node_ctl_pack_ku64(&pk, "u", 0x100000002ull);
        node_ctl_pack_kdbl(&pk, "d", 1.5);
        node_ctl_pack_kdbl(&pk, "n", NAN);
        node_ctl_pack_kdbl(&pk, "i", -INFINITY);
        node_ctl_pack_kbool(&pk, "b", 7);
        node_ctl_pack_kbool(&pk, "f", 0);
        assert_int_equal(sb.size, sizeof(want));
        assert_memory_equal(sb.data, want, sizeof(want));
        msgpack_sbuffer_destroy(&sb);
}

int main(void)
{
        signal(SIGPIPE, SIG_IGN); /* as the daemon must: see net.h */
        g_seed = gn_test_seed("test_ctl", 0x5eed0002ull);
        if (gn_test_tmpdir(g_dir, sizeof(g_dir), "ctl-sock") != 0) {
                perror("mkdtemp");
                return 1;
        }
        snprintf(g_path, sizeof(g_path), "%s/ctl.sock", g_dir);
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_pack_helpers),
            cmocka_unit_test(test_roundtrip),
            cmocka_unit_test(test_bad_requests),
            cmocka_unit_test(test_mutations),
            cmocka_unit_test(test_socket_file),
            cmocka_unit_test(test_too_many_clients),
            cmocka_unit_test(test_close_from_handler),
        };
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        gn_test_rmtree(g_dir);
        return r;
}
