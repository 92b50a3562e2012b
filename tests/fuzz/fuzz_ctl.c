/*
 * fuzz_ctl.c - libFuzzer target for the control-socket request path
 * (node/service/ctl.c: ctl_msgpack_check, client_feed, client_request,
 * client_dispatch, client_error).
 *
 * fuzz-libs: gn_node
 *
 * Those functions are static, so this file compiles node/service/ctl.c itself
 * (as WireGuard's fuzzers do); that also gives libFuzzer coverage of ctl.c,
 * which gn_node is not instrumented for. gn_node's own ctl.o is not pulled
 * in: every symbol it defines is defined here first.
 *
 * Each input is the byte stream a client sends. It is fed, in chunks of
 * varying size, to a real client struct whose libuv pipe is one end of a
 * socketpair; the responses are read from the other end. The handler
 * answers "echo" (packs args back), "fail" (error with a two-line
 * message), "silent" (error without a message), "nil" (packs nothing),
 * "two" (packs two objects: a handler bug the server must catch); anything
 * else is -ENOTSUP.
 *
 * Oracles: (1) the pre-check is not too lax: input it accepts as one
 * object is accepted whole by msgpack-c, unless the nesting is deeper
 * than msgpack-c's stack (msgpack-c never sees unchecked bytes here: it
 * allocates whatever a header declares, which is why the check exists);
 * (2) the
 * stream gets exactly one response per complete frame (a zero or oversize
 * length prefix gets one and ends the stream); every response is framed,
 * within NODE_CTL_RESP_MAX, one msgpack map {"ok": true, "data": X} or
 * {"ok": false, "error": one non-empty line shorter than
 * NODE_CTL_ERR_MAX}; "echo" of a well-formed request gives back exactly
 * its args, "version" is answered ok; the counters add up.
 */
#include "base/gn_endian.h"
#include "../../node/service/ctl.c"

#include <fcntl.h>

#include "fuzz.h"

enum {
        FUZZ_DEPTH_LIMIT = 32, /* msgpack-c's MSGPACK_EMBED_STACK_SIZE */
};

static uv_loop_t fz_loop;
static struct node_ctl *fz_ctl;

static int fz_handler(void *ctx, const char *cmd, const msgpack_object *args,
                      msgpack_packer *data, char *err, size_t errlen)
{
        (void)ctx;
        if (strcmp(cmd, "echo") == 0)
                return msgpack_pack_object(data, *args) == 0 ? 0 : -ENOMEM;
        if (strcmp(cmd, "fail") == 0) {
                snprintf(err, errlen, "fail: on\npurpose\r");
                return -EIO;
        }
        if (strcmp(cmd, "silent") == 0)
                return -EPERM;
        if (strcmp(cmd, "nil") == 0)
                return 0;
        if (strcmp(cmd, "two") == 0) {
                msgpack_pack_nil(data);
                msgpack_pack_nil(data);
                return 0;
        }
        snprintf(err, errlen, "unknown command '%s'", cmd);
        return -ENOTSUP;
}

static void fz_setup(void)
{
        if (fz_ctl != NULL)
                return;
        GN_FUZZ_CHECK(uv_loop_init(&fz_loop) == 0);
        fz_ctl = calloc(1, sizeof(*fz_ctl));
        GN_FUZZ_CHECK(fz_ctl != NULL);
        fz_ctl->loop = &fz_loop;
        fz_ctl->handler = fz_handler;
        fz_ctl->handles = 1; /* stands for the listener: never freed */
}

/* Depth of non-empty containers of the object p[0..len) (pre-checked). */
static unsigned mp_depth(const uint8_t *p, size_t len)
{
        size_t stack[256], off = 0;
        unsigned top = 0, max = 0;

        stack[top++] = 1;
        while (top > 0 && off < len) {
                size_t hdr, skip, kids;
                if (mp_head(p + off, len - off, &hdr, &skip, &kids) != 0)
                        break;
                off += hdr + skip;
                stack[top - 1]--;
                if (kids > 0 && top < 256) {
                        stack[top++] = kids;
                        if (top - 1 > max)
                                max = top - 1;
                }
                while (top > 0 && stack[top - 1] == 0)
                        top--;
        }
        return max;
}

static void check_precheck(const uint8_t *data, size_t size)
{
        msgpack_unpacked u;
        size_t off = 0;

        /* msgpack-c allocates what a header declares: only checked input
         * may reach it (that is the point of the pre-check). */
        if (ctl_msgpack_check(data, size) != 0)
                return;
        msgpack_unpacked_init(&u);
        if (msgpack_unpack_next(&u, (const char *)data, size, &off) !=
                MSGPACK_UNPACK_SUCCESS ||
            off != size)
                GN_FUZZ_CHECK(mp_depth(data, size) >= FUZZ_DEPTH_LIMIT - 1);
        msgpack_unpacked_destroy(&u);
}

struct outbuf {
        uint8_t *p;
        size_t n, cap;
};

static void drain(int fd, struct outbuf *o)
{
        for (;;) {
                ssize_t k;
                if (o->cap - o->n < 65536) {
                        o->cap = o->cap * 2 + 65536;
                        o->p = realloc(o->p, o->cap);
                        GN_FUZZ_CHECK(o->p != NULL);
                }
                k = read(fd, o->p + o->n, o->cap - o->n);
                if (k <= 0)
                        return;
                o->n += (size_t)k;
        }
}

/* Pack o into sb (cleared first); returns sb->size. */
static size_t repack(msgpack_sbuffer *sb, const msgpack_object *o)
{
        msgpack_packer pk;

        msgpack_sbuffer_clear(sb);
        msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
        msgpack_pack_object(&pk, *o);
        return sb->size;
}

/* What the request body p[0..len) must get: -1 anything well-formed, 0
 * ok (version), 1 ok and data == its args (echo). *args_out is set then. */
static int expect_for(const uint8_t *p, size_t len, msgpack_unpacked *u,
                      const msgpack_object **args_out)
{
        static const msgpack_object empty = {.type = MSGPACK_OBJECT_MAP};
        const msgpack_object *cmd, *args;
        size_t off = 0;

        if (ctl_msgpack_check(p, len) != 0 ||
            msgpack_unpack_next(u, (const char *)p, len, &off) !=
                MSGPACK_UNPACK_SUCCESS ||
            off != len || u->data.type != MSGPACK_OBJECT_MAP)
                return -1;
        cmd = map_get(&u->data, "cmd");
        args = map_get(&u->data, "args");
        if (args && args->type != MSGPACK_OBJECT_MAP)
                return -1;
        *args_out = args ? args : &empty;
        if (cmd && str_is(cmd, "version"))
                return 0;
        if (cmd && str_is(cmd, "echo"))
                return 1;
        return -1;
}

/* Check one response body against what its request should get. */
static void check_response(const uint8_t *r, size_t rlen, const uint8_t *req,
                           size_t req_len)
{
        msgpack_unpacked u, ureq;
        msgpack_sbuffer a, b;
        const msgpack_object *ok, *val, *args = NULL;
        size_t off = 0;
        int want;

        GN_FUZZ_CHECK(rlen <= NODE_CTL_RESP_MAX);
        GN_FUZZ_CHECK(ctl_msgpack_check(r, rlen) == 0);
        msgpack_unpacked_init(&u);
        msgpack_unpacked_init(&ureq);
        msgpack_sbuffer_init(&a);
        msgpack_sbuffer_init(&b);
        GN_FUZZ_CHECK(msgpack_unpack_next(&u, (const char *)r, rlen, &off) ==
                      MSGPACK_UNPACK_SUCCESS);
        GN_FUZZ_CHECK(off == rlen && u.data.type == MSGPACK_OBJECT_MAP);
        GN_FUZZ_CHECK(u.data.via.map.size == 2);
        GN_FUZZ_CHECK(str_is(&u.data.via.map.ptr[0].key, "ok"));
        ok = &u.data.via.map.ptr[0].val;
        val = &u.data.via.map.ptr[1].val;
        GN_FUZZ_CHECK(ok->type == MSGPACK_OBJECT_BOOLEAN);
        if (ok->via.boolean) {
                GN_FUZZ_CHECK(str_is(&u.data.via.map.ptr[1].key, "data"));
        } else {
                GN_FUZZ_CHECK(str_is(&u.data.via.map.ptr[1].key, "error"));
                GN_FUZZ_CHECK(val->type == MSGPACK_OBJECT_STR);
                GN_FUZZ_CHECK(val->via.str.size > 0 &&
                              val->via.str.size < NODE_CTL_ERR_MAX);
                GN_FUZZ_CHECK(
                    !memchr(val->via.str.ptr, '\n', val->via.str.size));
                GN_FUZZ_CHECK(
                    !memchr(val->via.str.ptr, '\r', val->via.str.size));
        }
        want = req ? expect_for(req, req_len, &ureq, &args) : -1;
        if (want >= 0)
                GN_FUZZ_CHECK(ok->via.boolean);
        if (want == 1) {
                size_t na = repack(&a, args), nb = repack(&b, val);
                GN_FUZZ_CHECK(na == nb && memcmp(a.data, b.data, na) == 0);
        }
        msgpack_sbuffer_destroy(&a);
        msgpack_sbuffer_destroy(&b);
        msgpack_unpacked_destroy(&ureq);
        msgpack_unpacked_destroy(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const size_t chunks[] = {1, 3, 64, 7, 1000, 2, 65536};
        struct node_ctl_stats before;
        struct outbuf out = {0};
        struct ctl_client *c;
        size_t off = 0, limit = size, expected = 0, fed = 0, got = 0;
        size_t roff = 0, ci = 0;
        int sv[2];

        fz_setup();
        check_precheck(data, size);

        /* Frames in the input, found independently of ctl.c. */
        while (size - off >= 4) {
                uint32_t len = gn_be32_get(data + off);
                if (len == 0 || len > NODE_CTL_REQ_MAX) {
                        expected++; /* error, then the server hangs up */
                        limit = off + 4;
                        break;
                }
                if (size - off - 4 < len)
                        break;
                expected++;
                off += 4 + (size_t)len;
        }

        GN_FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
        GN_FUZZ_CHECK(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
        c = calloc(1, sizeof(*c));
        GN_FUZZ_CHECK(c != NULL);
        GN_FUZZ_CHECK(uv_pipe_init(&fz_loop, &c->pipe, 0) == 0);
        GN_FUZZ_CHECK(uv_pipe_open(&c->pipe, sv[0]) == 0);
        c->ctl = fz_ctl;
        c->pipe.data = c;
        c->next = fz_ctl->clients;
        if (fz_ctl->clients)
                fz_ctl->clients->prev = c;
        fz_ctl->clients = c;
        fz_ctl->nclients++;
        fz_ctl->handles++;
        before = fz_ctl->st;

        /* Feed as a stream would arrive; stop where the server stops.
         * c is freed once libuv has closed it (the list is then empty). */
        while (fed < limit && fz_ctl->clients != NULL && !c->closing) {
                size_t k = chunks[ci++ % (sizeof(chunks) / sizeof(chunks[0]))];
                if (k > limit - fed)
                        k = limit - fed;
                client_feed(c, data + fed, k);
                fed += k;
                uv_run(&fz_loop, UV_RUN_NOWAIT);
                drain(sv[1], &out);
        }
        while (fz_ctl->clients != NULL && !c->closing &&
               uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) > 0) {
                uv_run(&fz_loop, UV_RUN_NOWAIT);
                drain(sv[1], &out);
        }
        if (fz_ctl->clients != NULL)
                client_close(c);
        uv_run(&fz_loop, UV_RUN_DEFAULT);
        drain(sv[1], &out);
        close(sv[1]);
        GN_FUZZ_CHECK(fz_ctl->clients == NULL && fz_ctl->handles == 1);

        /* Walk requests and responses side by side. */
        off = 0;
        while (roff < out.n) {
                const uint8_t *req = NULL;
                size_t req_len = 0;
                uint32_t rlen;

                GN_FUZZ_CHECK(out.n - roff >= 4);
                rlen = gn_be32_get(out.p + roff);
                GN_FUZZ_CHECK(out.n - roff - 4 >= rlen);
                if (size - off >= 4) {
                        req_len = gn_be32_get(data + off);
                        if (req_len > 0 && req_len <= NODE_CTL_REQ_MAX &&
                            size - off - 4 >= req_len)
                                req = data + off + 4;
                        off += 4 + req_len;
                }
                check_response(out.p + roff + 4, rlen, req, req_len);
                roff += 4 + rlen;
                got++;
        }
        GN_FUZZ_CHECK(got == expected);
        GN_FUZZ_CHECK((fz_ctl->st.requests - before.requests) +
                          (fz_ctl->st.errors - before.errors) ==
                      got);
        free(out.p);
        return 0;
}

/* Seeds: streams of well-formed and malformed requests. */
void gn_fuzz_seeds(gn_fuzz_add_fn add, void *ctx)
{
        static const char *cmds[] = {"version", "echo", "fail",  "silent",
                                     "nil",     "two",  "status"};
        msgpack_sbuffer req, stream;
        msgpack_packer pk;

        msgpack_sbuffer_init(&stream);
        for (unsigned i = 0; i < 7; i++) {
                uint8_t hdr[4];
                msgpack_sbuffer_init(&req);
                msgpack_packer_init(&pk, &req, msgpack_sbuffer_write);
                msgpack_pack_map(&pk, 2);
                node_ctl_pack_str(&pk, "cmd");
                node_ctl_pack_str(&pk, cmds[i]);
                node_ctl_pack_str(&pk, "args");
                msgpack_pack_map(&pk, 3);
                node_ctl_pack_str(&pk, "n");
                msgpack_pack_int(&pk, -(int)i);
                node_ctl_pack_str(&pk, "list");
                msgpack_pack_array(&pk, 2);
                msgpack_pack_float(&pk, 1.5f);
                msgpack_pack_bin(&pk, 2);
                msgpack_pack_bin_body(&pk, "\x00\x01", 2);
                node_ctl_pack_str(&pk, "ok");
                msgpack_pack_true(&pk);
                gn_be32_put(hdr, (uint32_t)req.size);
                msgpack_sbuffer_write(&stream, (const char *)hdr, 4);
                msgpack_sbuffer_write(&stream, req.data, req.size);
                add(ctx, (const uint8_t *)stream.data, stream.size);
                add(ctx, (const uint8_t *)req.data, req.size);
                msgpack_sbuffer_destroy(&req);
        }
        msgpack_sbuffer_destroy(&stream);
        add(ctx, (const uint8_t *)"\0\0\0\x02\x81\xa3", 6);
        add(ctx, (const uint8_t *)"\0\0\0\x01\xc1\0\0\0\0", 9);
        add(ctx, (const uint8_t *)"\0\x01\0\x01", 4);
}
