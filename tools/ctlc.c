/*
 * ctlc.c - control protocol client and msgpack helpers (see ctlc.h).
 *
 * Every socket call is blocking with SO_RCVTIMEO/SO_SNDTIMEO set, so a
 * wedged daemon costs gossipctl one timeout, never a hang. Sends use
 * MSG_NOSIGNAL: a daemon that goes away mid-request is an error message,
 * not a SIGPIPE. The JSON writer walks the msgpack object recursively; depth
 * is bounded by msgpack-c's unpacker (it refuses nesting beyond its stack).
 */
#include "ctlc.h"
#include "base/gn_endian.h"
#include "base/gn_errbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <sodium.h>

int ctlc_connect(const char *path, int timeout_ms)
{
        struct sockaddr_un sa;
        struct timeval tv;
        int fd, rc;

        if (path == NULL)
                return -EINVAL;
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0)
                return -errno;
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        tv.tv_sec = timeout_ms / 1000;
        tv.tv_usec = (timeout_ms % 1000) * 1000;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                rc = -errno;
                close(fd);
                return rc;
        }
        return fd;
}

static int send_all(int fd, const char *p, size_t len)
{
        while (len > 0) {
                ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return errno == EAGAIN || errno == EWOULDBLOCK
                                   ? -ETIMEDOUT
                                   : -errno;
                p += w;
                len -= (size_t)w;
        }
        return 0;
}

static int recv_all(int fd, char *p, size_t len)
{
        while (len > 0) {
                ssize_t r = recv(fd, p, len, 0);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return errno == EAGAIN || errno == EWOULDBLOCK
                                   ? -ETIMEDOUT
                                   : -errno;
                if (r == 0)
                        return -ECONNRESET;
                p += r;
                len -= (size_t)r;
        }
        return 0;
}

static void pack_str(msgpack_packer *pk, const char *s)
{
        size_t n = strlen(s);

        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, s, n);
}

/* Frame and send one request. */
static int send_request(int fd, const char *cmd, const char *const *keys,
                        const char *const *values, size_t nargs)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;
        uint8_t hdr[4];
        int rc;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        pack_str(&pk, "cmd");
        pack_str(&pk, cmd);
        pack_str(&pk, "args");
        msgpack_pack_map(&pk, nargs);
        for (size_t i = 0; i < nargs; i++) {
                pack_str(&pk, keys[i]);
                pack_str(&pk, values[i]);
        }
        if (sb.data == NULL || sb.size > CTLC_REQ_MAX) {
                rc = sb.data == NULL ? -ENOMEM : -EMSGSIZE;
                goto out;
        }
        gn_be32_put(hdr, (uint32_t)sb.size);
        rc = send_all(fd, (const char *)hdr, 4);
        if (rc == 0)
                rc = send_all(fd, sb.data, sb.size);
out:
        msgpack_sbuffer_destroy(&sb);
        return rc;
}

/* Check the envelope of a decoded response and fill r. */
static int decode_envelope(struct ctlc_resp *r, char *err, size_t errlen)
{
        const msgpack_object *root = &r->unp.data, *ok, *e;

        ok = ctlc_get(root, "ok");
        if (root->type != MSGPACK_OBJECT_MAP || ok == NULL ||
            ok->type != MSGPACK_OBJECT_BOOLEAN) {
                gn_seterr(err, errlen, "malformed response (no \"ok\" flag)");
                return -EBADMSG;
        }
        r->ok = ok->via.boolean;
        if (r->ok) {
                r->data = ctlc_get(root, "data");
                return 0;
        }
        e = ctlc_get(root, "error");
        ctlc_str(e, r->error, sizeof(r->error));
        if (e == NULL || e->type != MSGPACK_OBJECT_STR)
                snprintf(r->error, sizeof(r->error), "(no error message)");
        return 0;
}

int ctlc_call(int fd, const char *cmd, const char *const *keys,
              const char *const *values, size_t nargs, struct ctlc_resp *r,
              char *err, size_t errlen)
{
        uint8_t hdr[4];
        uint32_t len;
        size_t off = 0;
        int rc;

        memset(r, 0, sizeof(*r));
        msgpack_unpacked_init(&r->unp);
        rc = send_request(fd, cmd, keys, values, nargs);
        if (rc == 0)
                rc = recv_all(fd, (char *)hdr, 4);
        if (rc < 0) {
                gn_seterr(err, errlen, "%s", strerror(-rc));
                return rc;
        }
        len = gn_be32_get(hdr);
        if (len == 0 || len > CTLC_RESP_MAX) {
                gn_seterr(err, errlen, "response length %u out of bounds",
                          (unsigned)len);
                return -EMSGSIZE;
        }
        r->buf = malloc(len);
        if (r->buf == NULL)
                return -ENOMEM;
        rc = recv_all(fd, r->buf, len);
        if (rc < 0) {
                gn_seterr(err, errlen, "%s", strerror(-rc));
                return rc;
        }
        if (msgpack_unpack_next(&r->unp, r->buf, len, &off) !=
                MSGPACK_UNPACK_SUCCESS ||
            off != len) {
                gn_seterr(err, errlen,
                          "malformed response (not one msgpack "
                          "object)");
                return -EBADMSG;
        }
        return decode_envelope(r, err, errlen);
}

void ctlc_resp_free(struct ctlc_resp *r)
{
        msgpack_unpacked_destroy(&r->unp);
        free(r->buf);
        r->buf = NULL;
        r->data = NULL;
}

const msgpack_object *ctlc_get(const msgpack_object *o, const char *key)
{
        size_t n = strlen(key);

        if (o == NULL || o->type != MSGPACK_OBJECT_MAP)
                return NULL;
        for (uint32_t i = 0; i < o->via.map.size; i++) {
                const msgpack_object *k = &o->via.map.ptr[i].key;
                if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
                    memcmp(k->via.str.ptr, key, n) == 0)
                        return &o->via.map.ptr[i].val;
        }
        return NULL;
}

const char *ctlc_str(const msgpack_object *o, char *buf, size_t len)
{
        size_t n;

        if (len == 0)
                return buf;
        if (o == NULL || o->type != MSGPACK_OBJECT_STR) {
                snprintf(buf, len, "-");
                return buf;
        }
        n = o->via.str.size < len - 1 ? o->via.str.size : len - 1;
        memcpy(buf, o->via.str.ptr, n);
        buf[n] = '\0';
        /* a NUL inside the string would silently cut it: show it */
        for (size_t i = 0; i < n; i++)
                if (buf[i] == '\0' || buf[i] == '\n' || buf[i] == '\r')
                        buf[i] = '?';
        return buf;
}

double ctlc_num(const msgpack_object *o, int *ok)
{
        *ok = 1;
        if (o != NULL) {
                switch (o->type) {
                case MSGPACK_OBJECT_POSITIVE_INTEGER:
                        return (double)o->via.u64;
                case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                        return (double)o->via.i64;
                case MSGPACK_OBJECT_FLOAT32:
                case MSGPACK_OBJECT_FLOAT64:
                        return o->via.f64;
                default:
                        break;
                }
        }
        *ok = 0;
        return 0;
}

/* Length of a valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
        size_t len;
        uint32_t cp;

        if (p[0] < 0xC2 || p[0] > 0xF4)
                return 0;
        len = p[0] < 0xE0 ? 2 : p[0] < 0xF0 ? 3 : 4;
        if (n < len)
                return 0;
        cp = p[0] & (0x7F >> len);
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xC0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
                return 0;
        return len;
}

static void json_string(FILE *f, const char *s, size_t n)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0, l;

        fputc('"', f);
        while (i < n) {
                unsigned char c = p[i];
                if (c == '"' || c == '\\') {
                        fputc('\\', f);
                        fputc(c, f);
                } else if (c == '\n') {
                        fputs("\\n", f);
                } else if (c == '\t') {
                        fputs("\\t", f);
                } else if (c == '\r') {
                        fputs("\\r", f);
                } else if (c < 0x20) {
                        fprintf(f, "\\u%04x", c);
                } else if (c < 0x80) {
                        fputc(c, f);
                } else if ((l = utf8_len(p + i, n - i)) > 0) {
                        fwrite(p + i, 1, l, f);
                        i += l;
                        continue;
                } else {
                        fputs("\\ufffd", f);
                }
                i++;
        }
        fputc('"', f);
}

/* The shortest decimal that reads back as the same value (float or
 * double), written like Python's repr: positional for exponents -4..15 with
 * at least one decimal ("40.0", "0.48"), else scientific ("1e+300"). */
static void json_float(FILE *f, double v, int is32)
{
        char buf[48];
        int prec, exp;

        if (!isfinite(v)) {
                fputs("null", f);
                return;
        }
        for (prec = 1; prec < 17; prec++) {
                snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
                double back = strtod(buf, NULL);
                if (is32 ? (float)back == (float)v : back == v)
                        break;
        }
        snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
        exp = atoi(strchr(buf, 'e') + 1);
        if (exp < -4 || exp >= 16) {
                fputs(buf, f);
                return;
        }
        snprintf(buf, sizeof(buf), "%.*f",
                 prec - 1 - exp > 1 ? prec - 1 - exp : 1, v);
        fputs(buf, f);
}

static void json_base64(FILE *f, const char *p, size_t n)
{
        size_t len =
            sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
        char *b = malloc(len);

        if (b == NULL) {
                fputs("null", f);
                return;
        }
        sodium_bin2base64(b, len, (const unsigned char *)p, n,
                          sodium_base64_VARIANT_ORIGINAL);
        fprintf(f, "\"%s\"", b);
        free(b);
}

static void json_value(FILE *f, const msgpack_object *o);

/* A map key: strings as they are, anything else as its JSON text. */
static void json_key(FILE *f, const msgpack_object *k)
{
        char *text = NULL;
        size_t len = 0;
        FILE *m;

        if (k->type == MSGPACK_OBJECT_STR) {
                json_string(f, k->via.str.ptr, k->via.str.size);
                return;
        }
        m = open_memstream(&text, &len);
        if (m == NULL) {
                fputs("\"?\"", f);
                return;
        }
        json_value(m, k);
        fclose(m);
        json_string(f, text, len);
        free(text);
}

static void json_value(FILE *f, const msgpack_object *o)
{
        switch (o->type) {
        case MSGPACK_OBJECT_NIL:
                fputs("null", f);
                break;
        case MSGPACK_OBJECT_BOOLEAN:
                fputs(o->via.boolean ? "true" : "false", f);
                break;
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
                fprintf(f, "%llu", (unsigned long long)o->via.u64);
                break;
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                fprintf(f, "%lld", (long long)o->via.i64);
                break;
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
                json_float(f, o->via.f64, o->type == MSGPACK_OBJECT_FLOAT32);
                break;
        case MSGPACK_OBJECT_STR:
                json_string(f, o->via.str.ptr, o->via.str.size);
                break;
        case MSGPACK_OBJECT_BIN:
                json_base64(f, o->via.bin.ptr, o->via.bin.size);
                break;
        case MSGPACK_OBJECT_EXT:
                fprintf(f, "{\"ext\":%d,\"data\":", (int)o->via.ext.type);
                json_base64(f, o->via.ext.ptr, o->via.ext.size);
                fputc('}', f);
                break;
        case MSGPACK_OBJECT_ARRAY:
                fputc('[', f);
                for (uint32_t i = 0; i < o->via.array.size; i++) {
                        if (i)
                                fputc(',', f);
                        json_value(f, &o->via.array.ptr[i]);
                }
                fputc(']', f);
                break;
        case MSGPACK_OBJECT_MAP:
                fputc('{', f);
                for (uint32_t i = 0; i < o->via.map.size; i++) {
                        if (i)
                                fputc(',', f);
                        json_key(f, &o->via.map.ptr[i].key);
                        fputc(':', f);
                        json_value(f, &o->via.map.ptr[i].val);
                }
                fputc('}', f);
                break;
        default:
                fputs("null", f);
        }
}

int ctlc_json_write(FILE *f, const msgpack_object *o)
{
        static const msgpack_object nil = {.type = MSGPACK_OBJECT_NIL};

        json_value(f, o ? o : &nil);
        return ferror(f) ? -EIO : 0;
}

const char *ctlc_human_bytes(double v, char *buf, size_t len)
{
        static const char units[] = "KMGTP";
        int u = -1;

        if (v < 1024) {
                snprintf(buf, len, "%.0fB", v);
                return buf;
        }
        while (v >= 1024 && u < 4) {
                v /= 1024;
                u++;
        }
        snprintf(buf, len, "%.1f%c", v, units[u]);
        return buf;
}

const char *ctlc_human_ms(double ms, int ok, char *buf, size_t len)
{
        if (!ok || !isfinite(ms) || ms < 0)
                snprintf(buf, len, "-");
        else if (ms < 10)
                snprintf(buf, len, "%.1fms", ms);
        else if (ms < 1000)
                snprintf(buf, len, "%.0fms", ms);
        else if (ms < 60e3)
                snprintf(buf, len, "%.1fs", ms / 1e3);
        else if (ms < 3600e3)
                snprintf(buf, len, "%.0fm", ms / 60e3);
        else
                snprintf(buf, len, "%.0fh", ms / 3600e3);
        return buf;
}
