/*
 * ctl.c - the control socket server and its blocking client helpers
 * (protocol in docs/control.md, contract in ctl.h).
 *
 * Each client connection reassembles length-prefixed requests; a request
 * body is first walked by ctl_msgpack_check(), which proves every declared
 * container count and string length fits in the bytes actually present,
 * before msgpack-c (which trusts declared lengths and would allocate for
 * them) ever sees it. The handler writes the "data" value into its own
 * buffer; the server checks it is exactly one object and then frames
 * {"ok": true, "data": <those bytes>}.
 *
 * Invariants: a client's pending output is bounded (a client that pipelines
 * without reading is dropped); the socket file is only unlinked by the
 * struct that created it; the struct frees itself when its last handle has
 * closed after node_ctl_close().
 */
#include "service/ctl.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "base/gn_endian.h"
#include "service/version.h"

enum {
        CTL_RBUF = 16 << 10,                 /* bytes per read */
        CTL_OUT_MAX = 2 * NODE_CTL_RESP_MAX, /* pending output per client */
};

struct ctl_client {
        uv_pipe_t pipe;
        struct node_ctl *ctl;
        int closing;
        struct ctl_client *prev, *next;
        uint8_t hdr[4];
        size_t hdr_have, want, body_have;
        uint8_t *body;
};

struct ctl_write {
        uv_write_t req;
        int close_after;
        size_t len;
        uint8_t bytes[]; /* length prefix + response */
};

struct node_ctl {
        uv_loop_t *loop;
        uv_pipe_t listener;
        char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
        node_ctl_handler handler;
        void *ctx;
        struct ctl_client *clients;
        struct ctl_client *dispatching; /* whose handler runs now */
        int nclients;
        int handles;
        int closing;
        struct node_ctl_stats st;
        uint8_t rbuf[CTL_RBUF];
};

/* ---- msgpack pre-check ---- */

/* How the size of an object with type byte 0xc0 + i is found: fix =
 * payload bytes after the type byte (-1: the unused byte 0xc1); len =
 * bytes of a big-endian payload length (ext adds its type byte); arr/map =
 * bytes of a big-endian element count. */
struct mp_form {
        int8_t fix;
        uint8_t len, ext, arr, map;
};

static const struct mp_form mp_forms[32] = {
    [0x00] = {.fix = 0},           /* nil */
    [0x01] = {.fix = -1},          /* never used */
    [0x02] = {.fix = 0},           /* false */
    [0x03] = {.fix = 0},           /* true */
    [0x04] = {.len = 1},           /* bin8 */
    [0x05] = {.len = 2},           /* bin16 */
    [0x06] = {.len = 4},           /* bin32 */
    [0x07] = {.len = 1, .ext = 1}, /* ext8 */
    [0x08] = {.len = 2, .ext = 1}, /* ext16 */
    [0x09] = {.len = 4, .ext = 1}, /* ext32 */
    [0x0a] = {.fix = 4},           /* float32 */
    [0x0b] = {.fix = 8},           /* float64 */
    [0x0c] = {.fix = 1},           /* uint8 */
    [0x0d] = {.fix = 2},           /* uint16 */
    [0x0e] = {.fix = 4},           /* uint32 */
    [0x0f] = {.fix = 8},           /* uint64 */
    [0x10] = {.fix = 1},           /* int8 */
    [0x11] = {.fix = 2},           /* int16 */
    [0x12] = {.fix = 4},           /* int32 */
    [0x13] = {.fix = 8},           /* int64 */
    [0x14] = {.fix = 2},           /* fixext1 */
    [0x15] = {.fix = 3},           /* fixext2 */
    [0x16] = {.fix = 5},           /* fixext4 */
    [0x17] = {.fix = 9},           /* fixext8 */
    [0x18] = {.fix = 17},          /* fixext16 */
    [0x19] = {.len = 1},           /* str8 */
    [0x1a] = {.len = 2},           /* str16 */
    [0x1b] = {.len = 4},           /* str32 */
    [0x1c] = {.arr = 2},           /* array16 */
    [0x1d] = {.arr = 4},           /* array32 */
    [0x1e] = {.map = 2},           /* map16 */
    [0x1f] = {.map = 4},           /* map32 */
};

/* Decode the head of the object at p (avail > 0 bytes): its header size
 * (type byte + length/count bytes), payload bytes (*skip) and number of
 * child objects (*kids). 0, or -1 if invalid or cut short. */
static int mp_head(const uint8_t *p, size_t avail, size_t *hdr, size_t *skip,
                   size_t *kids)
{
        uint8_t b = p[0];
        const struct mp_form *f;
        size_t n, lb;
        *hdr = 1;
        *skip = 0;
        *kids = 0;
        if (b <= 0x7f || b >= 0xe0) /* fixints */
                return 0;
        if (b <= 0x8f) { /* fixmap */
                *kids = 2 * (size_t)(b & 0x0f);
                return 0;
        }
        if (b <= 0x9f) { /* fixarray */
                *kids = b & 0x0f;
                return 0;
        }
        if (b <= 0xbf) { /* fixstr */
                *skip = b & 0x1f;
                return 0;
        }
        f = &mp_forms[b - 0xc0];
        if (f->fix < 0)
                return -1;
        lb = (size_t)f->len + f->arr + f->map;
        if (lb == 0) {
                *skip = (size_t)f->fix;
                return 0;
        }
        if (avail < 1 + lb)
                return -1;
        n = (size_t)gn_be_get(p + 1, (int)lb);
        *hdr = 1 + lb;
        if (f->arr)
                *kids = n;
        else if (f->map)
                *kids = 2 * n;
        else
                *skip = n + f->ext;
        return 0;
}

/* 0 if p[0..len) is exactly one msgpack object whose every declared count
 * and length fits in the bytes present; -EINVAL otherwise. */
static int ctl_msgpack_check(const uint8_t *p, size_t len)
{
        size_t need = 1, off = 0;
        while (need > 0) {
                size_t hdr, skip, kids;
                if (off >= len ||
                    mp_head(p + off, len - off, &hdr, &skip, &kids) != 0)
                        return -EINVAL;
                if (hdr > len - off || skip > len - off - hdr)
                        return -EINVAL;
                off += hdr + skip;
                need--;
                /* every child takes at least one byte */
                if (kids > len - off || need + kids > len - off)
                        return -EINVAL;
                need += kids;
        }
        return off == len ? 0 : -EINVAL;
}

/* ---- responses ---- */

static void ctl_write_done(uv_write_t *req, int status);

static void client_closed(uv_handle_t *h)
{
        struct ctl_client *c = h->data;
        struct node_ctl *ctl = c->ctl;
        if (c->prev)
                c->prev->next = c->next;
        else
                ctl->clients = c->next;
        if (c->next)
                c->next->prev = c->prev;
        ctl->nclients--;
        free(c->body);
        free(c);
        if (--ctl->handles == 0 && ctl->closing)
                free(ctl);
}

static void client_close(struct ctl_client *c)
{
        if (c->closing)
                return;
        c->closing = 1;
        uv_close((uv_handle_t *)&c->pipe, client_closed);
}

/* Frame and queue len bytes of msgpack to c. */
static void client_send(struct ctl_client *c, const void *buf, size_t len,
                        int close_after)
{
        struct ctl_write *w;
        uv_buf_t b;
        if (c->closing)
                return;
        if (c->ctl->closing)
                close_after = 1; /* the server is going away */
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) + len >
            CTL_OUT_MAX) {
                client_close(c); /* pipelines without reading */
                return;
        }
        w = malloc(sizeof(*w) + 4 + len);
        if (!w) {
                client_close(c);
                return;
        }
        w->close_after = close_after;
        w->len = 4 + len;
        gn_be32_put(w->bytes, (uint32_t)len);
        memcpy(w->bytes + 4, buf, len);
        w->req.data = c;
        b = uv_buf_init((char *)w->bytes, (unsigned)w->len);
        if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, ctl_write_done) !=
            0) {
                free(w);
                client_close(c);
        }
}

static void ctl_write_done(uv_write_t *req, int status)
{
        struct ctl_write *w = (struct ctl_write *)req;
        struct ctl_client *c = req->data;
        if (status < 0 || w->close_after)
                client_close(c);
        free(w);
}

static void client_error(struct ctl_client *c, int close_after, const char *fmt,
                         ...)
{
        char msg[NODE_CTL_ERR_MAX];
        msgpack_sbuffer sb;
        msgpack_packer pk;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        for (char *p = msg; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' '; /* one line */
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        node_ctl_pack_str(&pk, "ok");
        msgpack_pack_false(&pk);
        node_ctl_pack_str(&pk, "error");
        node_ctl_pack_str(&pk, msg);
        c->ctl->st.errors++;
        if (sb.data)
                client_send(c, sb.data, sb.size, close_after);
        else
                client_close(c);
        msgpack_sbuffer_destroy(&sb);
}

/* ---- requests ---- */

static int str_is(const msgpack_object *o, const char *s)
{
        size_t n = strlen(s);
        return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
               memcmp(o->via.str.ptr, s, n) == 0;
}

static const msgpack_object *map_get(const msgpack_object *m, const char *k)
{
        for (uint32_t i = 0; i < m->via.map.size; i++)
                if (str_is(&m->via.map.ptr[i].key, k))
                        return &m->via.map.ptr[i].val;
        return NULL;
}

static int pack_version(msgpack_packer *pk)
{
        msgpack_pack_map(pk, 2);
        node_ctl_pack_str(pk, "version");
        node_ctl_pack_str(pk, node_version());
        node_ctl_pack_str(pk, "protocol");
        return msgpack_pack_int(pk, NODE_CTL_PROTOCOL);
}

/* Run cmd and send the framed response; data is the handler's buffer. */
static void client_dispatch(struct ctl_client *c, const char *cmd,
                            const msgpack_object *args)
{
        struct node_ctl *ctl = c->ctl;
        char err[NODE_CTL_ERR_MAX] = "";
        msgpack_sbuffer data, resp;
        msgpack_packer pk;
        int r;
        msgpack_sbuffer_init(&data);
        msgpack_sbuffer_init(&resp);
        msgpack_packer_init(&pk, &data, msgpack_sbuffer_write);
        ctl->dispatching = c;
        if (strcmp(cmd, "version") == 0)
                r = pack_version(&pk);
        else if (ctl->handler)
                r = ctl->handler(ctl->ctx, cmd, args, &pk, err, sizeof(err));
        else
                r = -ENOTSUP;
        ctl->dispatching = NULL;
        if (r < 0) {
                if (!err[0])
                        snprintf(err, sizeof(err), "%s: %s", cmd, strerror(-r));
                client_error(c, 0, "%s", err);
                goto out;
        }
        if (data.size == 0)
                msgpack_pack_nil(&pk);
        if (data.size > NODE_CTL_RESP_MAX - 16) {
                client_error(c, 0, "%s: response too large", cmd);
                goto out;
        }
        if (ctl_msgpack_check((const uint8_t *)data.data, data.size) != 0) {
                client_error(c, 0, "%s: internal error (bad data)", cmd);
                goto out;
        }
        msgpack_packer_init(&pk, &resp, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        node_ctl_pack_str(&pk, "ok");
        msgpack_pack_true(&pk);
        node_ctl_pack_str(&pk, "data");
        msgpack_sbuffer_write(&resp, data.data, data.size);
        if (!resp.data || resp.size < data.size) {
                client_error(c, 0, "%s: out of memory", cmd);
                goto out;
        }
        ctl->st.requests++;
        /* a handler that closed the server still gets its answer out */
        client_send(c, resp.data, resp.size, 0);
out:
        msgpack_sbuffer_destroy(&data);
        msgpack_sbuffer_destroy(&resp);
}

static void client_request(struct ctl_client *c, const uint8_t *p, size_t len)
{
        static const msgpack_object empty = {.type = MSGPACK_OBJECT_MAP};
        msgpack_unpacked u;
        const msgpack_object *cmd, *args;
        char name[NODE_CTL_CMD_MAX];
        size_t off = 0;
        msgpack_unpacked_init(&u);
        if (ctl_msgpack_check(p, len) != 0 ||
            msgpack_unpack_next(&u, (const char *)p, len, &off) !=
                MSGPACK_UNPACK_SUCCESS ||
            off != len) {
                c->ctl->st.bad_requests++;
                client_error(c, 0,
                             "malformed request: not one msgpack "
                             "object");
                goto out;
        }
        if (u.data.type != MSGPACK_OBJECT_MAP) {
                c->ctl->st.bad_requests++;
                client_error(c, 0, "malformed request: not a map");
                goto out;
        }
        cmd = map_get(&u.data, "cmd");
        args = map_get(&u.data, "args");
        if (!cmd || cmd->type != MSGPACK_OBJECT_STR || cmd->via.str.size == 0 ||
            cmd->via.str.size >= sizeof(name) ||
            memchr(cmd->via.str.ptr, 0, cmd->via.str.size)) {
                c->ctl->st.bad_requests++;
                client_error(c, 0,
                             "malformed request: \"cmd\" must be a "
                             "string of 1..31 bytes");
                goto out;
        }
        if (args && args->type != MSGPACK_OBJECT_MAP) {
                c->ctl->st.bad_requests++;
                client_error(c, 0,
                             "malformed request: \"args\" must be a "
                             "map");
                goto out;
        }
        memcpy(name, cmd->via.str.ptr, cmd->via.str.size);
        name[cmd->via.str.size] = 0;
        client_dispatch(c, name, args ? args : &empty);
out:
        msgpack_unpacked_destroy(&u);
}

/* Feed stream bytes; complete requests are answered in order. */
static void client_feed(struct ctl_client *c, const uint8_t *p, size_t n)
{
        while (n > 0 && !c->closing && !c->ctl->closing) {
                if (c->hdr_have < 4) {
                        size_t k = 4 - c->hdr_have < n ? 4 - c->hdr_have : n;
                        memcpy(c->hdr + c->hdr_have, p, k);
                        c->hdr_have += k;
                        p += k;
                        n -= k;
                        if (c->hdr_have < 4)
                                return;
                        c->want = gn_be32_get(c->hdr);
                        c->body_have = 0;
                        if (c->want == 0 || c->want > NODE_CTL_REQ_MAX) {
                                c->ctl->st.bad_requests++;
                                client_error(c, 1,
                                             c->want ? "request too large"
                                                     : "empty request");
                                uv_read_stop((uv_stream_t *)&c->pipe);
                                return;
                        }
                        c->body = malloc(c->want);
                        if (!c->body) {
                                client_close(c);
                                return;
                        }
                        continue;
                }
                size_t k =
                    c->want - c->body_have < n ? c->want - c->body_have : n;
                memcpy(c->body + c->body_have, p, k);
                c->body_have += k;
                p += k;
                n -= k;
                if (c->body_have == c->want) {
                        uint8_t *body = c->body;
                        c->body = NULL;
                        c->hdr_have = 0;
                        client_request(c, body, c->want);
                        free(body);
                }
        }
}

static void client_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
        struct ctl_client *c = h->data;
        *buf = uv_buf_init((char *)c->ctl->rbuf, CTL_RBUF);
}

static void client_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
        struct ctl_client *c = s->data;
        if (nread < 0) {
                client_close(c);
                return;
        }
        client_feed(c, (const uint8_t *)buf->base, (size_t)nread);
}

static void ctl_accept(uv_stream_t *server, int status)
{
        struct node_ctl *ctl = server->data;
        struct ctl_client *c;
        if (status < 0 || ctl->closing)
                return;
        c = calloc(1, sizeof(*c));
        if (!c)
                return;
        if (uv_pipe_init(ctl->loop, &c->pipe, 0) != 0) {
                free(c);
                return;
        }
        c->ctl = ctl;
        c->pipe.data = c;
        c->next = ctl->clients;
        if (ctl->clients)
                ctl->clients->prev = c;
        ctl->clients = c;
        ctl->nclients++;
        ctl->handles++;
        if (uv_accept(server, (uv_stream_t *)&c->pipe) != 0) {
                client_close(c);
                return;
        }
        if (ctl->nclients > NODE_CTL_CLIENTS_MAX) {
                ctl->st.clients_refused++;
                client_close(c);
                return;
        }
        ctl->st.clients++;
        if (uv_read_start((uv_stream_t *)&c->pipe, client_alloc, client_read) !=
            0)
                client_close(c);
}

/* ---- server lifecycle ---- */

/* Decide what to do with an existing file at path: 0 if it is gone or was
 * a stale socket (now removed), else a negative errno. */
static int ctl_clear_path(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct stat st;
        int fd, r;
        if (lstat(path, &st) != 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0)
                return -errno;
        strcpy(sa.sun_path, path); /* length checked by the caller */
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        close(fd);
        if (r == 0)
                return -EADDRINUSE; /* a live daemon answers */
        if (errno != ECONNREFUSED)
                return -errno;
        return unlink(path) == 0 ? 0 : -errno;
}

static void ctl_listener_closed(uv_handle_t *h)
{
        struct node_ctl *ctl = h->data;
        if (--ctl->handles == 0)
                free(ctl);
}

int node_ctl_open(struct node_ctl **out, uv_loop_t *loop,
                  const struct node_ctl_config *cfg)
{
        struct node_ctl *ctl;
        int err, bound = 0;
        *out = NULL;
        if (!loop || !cfg || !cfg->path || !cfg->path[0])
                return -EINVAL;
        if (strlen(cfg->path) >= sizeof(ctl->path))
                return -ENAMETOOLONG;
        err = ctl_clear_path(cfg->path);
        if (err)
                return err;
        ctl = calloc(1, sizeof(*ctl));
        if (!ctl)
                return -ENOMEM;
        ctl->loop = loop;
        ctl->handler = cfg->handler;
        ctl->ctx = cfg->ctx;
        strcpy(ctl->path, cfg->path);
        err = uv_pipe_init(loop, &ctl->listener, 0);
        if (err) {
                free(ctl);
                return err;
        }
        ctl->listener.data = ctl;
        ctl->handles = 1;
        err = uv_pipe_bind(&ctl->listener, ctl->path);
        if (err)
                goto out;
        bound = 1;
        /* before listen(): nobody can connect while the mode is loose */
        if (chmod(ctl->path, 0600) != 0) {
                err = -errno;
                goto out;
        }
        err = uv_listen((uv_stream_t *)&ctl->listener, 16, ctl_accept);
out:
        if (err) {
                if (bound)
                        unlink(ctl->path);
                ctl->closing = 1;
                uv_close((uv_handle_t *)&ctl->listener, ctl_listener_closed);
                return err;
        }
        *out = ctl;
        return 0;
}

void node_ctl_close(struct node_ctl *ctl)
{
        if (!ctl || ctl->closing)
                return;
        ctl->closing = 1;
        unlink(ctl->path);
        for (struct ctl_client *c = ctl->clients; c; c = c->next) {
                if (c == ctl->dispatching) /* closed after its answer */
                        uv_read_stop((uv_stream_t *)&c->pipe);
                else
                        client_close(c);
        }
        uv_close((uv_handle_t *)&ctl->listener, ctl_listener_closed);
}

void node_ctl_stats(const struct node_ctl *ctl, struct node_ctl_stats *out)
{
        *out = ctl->st;
}

/* ---- blocking client ---- */

int node_ctl_client_connect(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd;
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
                int e = -errno;
                close(fd);
                return e;
        }
        return fd;
}

/* MSG_NOSIGNAL: a daemon that hangs up is -EPIPE here, not a SIGPIPE that
 * kills the client. */
static int write_all(int fd, const void *buf, size_t len)
{
        const uint8_t *p = buf;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
        uint8_t *p = buf;
        while (len > 0) {
                ssize_t n = read(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -ECONNRESET;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int node_ctl_client_send(int fd, const void *req, size_t len)
{
        uint8_t hdr[4];
        int err;
        if (len > UINT32_MAX)
                return -EMSGSIZE;
        gn_be32_put(hdr, (uint32_t)len);
        err = write_all(fd, hdr, 4);
        return err ? err : write_all(fd, req, len);
}

int node_ctl_client_recv(int fd, void **resp, size_t *resp_len)
{
        uint8_t hdr[4];
        size_t len;
        void *p;
        int err;
        *resp = NULL;
        *resp_len = 0;
        err = read_all(fd, hdr, 4);
        if (err)
                return err;
        len = gn_be32_get(hdr);
        if (len > NODE_CTL_RESP_MAX)
                return -EMSGSIZE;
        p = malloc(len ? len : 1);
        if (!p)
                return -ENOMEM;
        err = read_all(fd, p, len);
        if (err) {
                free(p);
                return err;
        }
        *resp = p;
        *resp_len = len;
        return 0;
}

/* ---- packing replies (handlers and this file) ---- */

void node_ctl_pack_str(msgpack_packer *pk, const char *s)
{
        size_t n = strlen(s);
        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, s, n);
}

void node_ctl_pack_kstr(msgpack_packer *pk, const char *k, const char *v)
{
        node_ctl_pack_str(pk, k);
        node_ctl_pack_str(pk, v);
}

void node_ctl_pack_ku64(msgpack_packer *pk, const char *k, uint64_t v)
{
        node_ctl_pack_str(pk, k);
        msgpack_pack_uint64(pk, v);
}

void node_ctl_pack_kdbl(msgpack_packer *pk, const char *k, double v)
{
        node_ctl_pack_str(pk, k);
        if (isfinite(v))
                msgpack_pack_double(pk, v);
        else
                msgpack_pack_nil(pk);
}

void node_ctl_pack_kbool(msgpack_packer *pk, const char *k, int v)
{
        node_ctl_pack_str(pk, k);
        if (v)
                msgpack_pack_true(pk);
        else
                msgpack_pack_false(pk);
}

int node_ctl_pack_request(msgpack_sbuffer *sbuf, const char *cmd)
{
        msgpack_packer pk;
        size_t before = sbuf->size;
        msgpack_packer_init(&pk, sbuf, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        node_ctl_pack_str(&pk, "cmd");
        node_ctl_pack_str(&pk, cmd);
        node_ctl_pack_str(&pk, "args");
        msgpack_pack_map(&pk, 0);
        return sbuf->size > before ? 0 : -ENOMEM;
}
