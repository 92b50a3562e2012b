/*
 * peers.c - parse the peers file and format/parse transport addresses.
 *
 * The parser works on a bounded copy of each line (no line may exceed
 * LINE_MAX_LEN), splits it into at most three fields, and checks each one
 * with a specific complaint so a person editing the file by hand can fix it
 * from the message alone. The whole file is accepted or refused: entries are
 * collected in a growing array and freed on the first error. Duplicates are
 * found with a quadratic scan: peers files list a few dozen devices, and
 * NODE_PEERS_MAX bounds the worst case.
 */
#include "base/gn_errbuf.h"
#include "ident/peers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "gossip/gossip.h"
#include "ident/keys.h"

/* Longest line we accept: address (<= 63) + key (44) + name (<= 63) and
 * generous whitespace and comments. */
#define LINE_MAX_LEN 1024

struct parser {
        const char *fname;
        char *err;
        size_t errlen;
        struct node_peer *v;
        unsigned *lines; /* line number of each entry, for duplicate notes */
        size_t n, cap;
};

/* Port: 1..65535 in plain decimal. */
static int parse_port(const char *s, uint16_t *port)
{
        unsigned long v = 0;

        if (*s == '\0' || strlen(s) > 5)
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned long)(*s - '0');
        }
        if (v == 0 || v > 65535)
                return -EINVAL;
        *port = (uint16_t)v;
        return 0;
}

static int resolve_host(const char *host, struct gossip_addr *out)
{
        struct addrinfo hints, *res = NULL, *ai, *pick = NULL;

        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_DGRAM;
        if (getaddrinfo(host, NULL, &hints, &res) != 0)
                return -EHOSTUNREACH;
        for (ai = res; ai != NULL; ai = ai->ai_next) {
                if (ai->ai_family == AF_INET) {
                        pick = ai;
                        break;
                }
                if (ai->ai_family == AF_INET6 && pick == NULL)
                        pick = ai;
        }
        if (pick == NULL) {
                freeaddrinfo(res);
                return -EHOSTUNREACH;
        }
        memset(out->addr, 0, sizeof(out->addr));
        if (pick->ai_family == AF_INET) {
                const struct sockaddr_in *sin = (const void *)pick->ai_addr;
                out->family = 4;
                memcpy(out->addr, &sin->sin_addr, 4);
        } else {
                const struct sockaddr_in6 *sin6 = (const void *)pick->ai_addr;
                out->family = 6;
                memcpy(out->addr, &sin6->sin6_addr, 16);
        }
        freeaddrinfo(res);
        return 0;
}

/* A host name is letters, digits, '-' and '.' with at least one letter;
 * anything else is a typo (all digits and dots is a bad IPv4 address, and
 * must not be sent to a resolver). */
static int is_hostname(const char *s)
{
        if (*s == '\0' || strlen(s) > 253 || s[strspn(s, "0123456789.")] == 0)
                return 0;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
                        return 0;
        return 1;
}

int node_addr_parse(const char *s, struct gossip_addr *out, int resolve)
{
        char host[256];
        const char *colon, *port;
        size_t hl;
        struct gossip_addr a;

        if (s == NULL || out == NULL)
                return -EINVAL;
        memset(&a, 0, sizeof(a));
        if (s[0] == '[') {
                const char *rb = strchr(s, ']');
                if (rb == NULL || rb[1] != ':')
                        return -EINVAL;
                hl = (size_t)(rb - s - 1);
                port = rb + 2;
                if (hl == 0 || hl >= sizeof(host))
                        return -EINVAL;
                memcpy(host, s + 1, hl);
                host[hl] = '\0';
                if (inet_pton(AF_INET6, host, a.addr) != 1)
                        return -EINVAL;
                a.family = 6;
        } else {
                colon = strrchr(s, ':');
                if (colon == NULL || memchr(s, ':', (size_t)(colon - s)))
                        return -EINVAL; /* no port, or v6 without brackets */
                hl = (size_t)(colon - s);
                port = colon + 1;
                if (hl == 0 || hl >= sizeof(host))
                        return -EINVAL;
                memcpy(host, s, hl);
                host[hl] = '\0';
                if (inet_pton(AF_INET, host, a.addr) == 1) {
                        a.family = 4;
                } else if (!resolve || !is_hostname(host)) {
                        return -EINVAL;
                } else if (parse_port(port, &a.port) < 0) {
                        return -EINVAL; /* check before a slow lookup */
                } else if (resolve_host(host, &a) < 0) {
                        return -EHOSTUNREACH;
                }
        }
        if (parse_port(port, &a.port) < 0)
                return -EINVAL;
        *out = a;
        return 0;
}

int node_addr_format(const struct gossip_addr *a, char *buf, size_t len)
{
        char ip[INET6_ADDRSTRLEN];
        int n;

        if (buf == NULL || len == 0)
                return -ENOSPC;
        buf[0] = '\0';
        if (a == NULL || (a->family != 4 && a->family != 6))
                return -EINVAL;
        if (inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->addr, ip,
                      sizeof(ip)) == NULL)
                return -EINVAL;
        n = snprintf(buf, len, a->family == 4 ? "%s:%u" : "[%s]:%u", ip,
                     (unsigned)a->port);
        if (n < 0 || (size_t)n >= len) {
                buf[0] = '\0';
                return -ENOSPC;
        }
        return n;
}

int node_addr_advertised(const struct gossip_addr *option,
                         const struct gossip_addr *peers_line,
                         const struct gossip_addr *listen,
                         struct gossip_addr *out)
{
        if (option) {
                if (!gossip_addr_usable(option))
                        return -EINVAL;
                *out = *option;
                return NODE_ADVERTISE_OPTION;
        }
        if (peers_line && gossip_addr_usable(peers_line)) {
                *out = *peers_line;
                return NODE_ADVERTISE_PEERS;
        }
        if (listen && gossip_addr_usable(listen)) {
                *out = *listen;
                return NODE_ADVERTISE_LISTEN;
        }
        return -EADDRNOTAVAIL;
}

static int valid_name(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n >= NODE_PEER_NAME_SIZE)
                return 0;
        return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                         "0123456789._-") == n;
}

static int same_addr(const struct gossip_addr *a, const struct gossip_addr *b)
{
        return a->family == b->family && a->port == b->port &&
               memcmp(a->addr, b->addr, a->family == 4 ? 4 : 16) == 0;
}

/* Refuse p if its key, name or address repeats an earlier entry. */
static int check_dup(struct parser *ps, const struct node_peer *p,
                     unsigned line)
{
        size_t i;

        for (i = 0; i < ps->n; i++) {
                const struct node_peer *q = &ps->v[i];
                const char *what = NULL;
                if (memcmp(q->pk, p->pk, GOSSIP_KEY_BYTES) == 0)
                        what = "public key";
                else if (strcmp(q->name, p->name) == 0)
                        what = "name";
                else if (same_addr(&q->addr, &p->addr))
                        what = "address";
                if (what == NULL)
                        continue;
                gn_seterr(ps->err, ps->errlen,
                          "%s:%u: duplicate %s (already on line %u)", ps->fname,
                          line, what, ps->lines[i]);
                return -EINVAL;
        }
        return 0;
}

static int push(struct parser *ps, const struct node_peer *p, unsigned line)
{
        if (ps->n == ps->cap) {
                size_t cap = ps->cap ? ps->cap * 2 : 16;
                struct node_peer *v = realloc(ps->v, cap * sizeof(*v));
                unsigned *l;
                if (v == NULL)
                        return -ENOMEM;
                ps->v = v;
                l = realloc(ps->lines, cap * sizeof(*l));
                if (l == NULL)
                        return -ENOMEM;
                ps->lines = l;
                ps->cap = cap;
        }
        ps->v[ps->n] = *p;
        ps->lines[ps->n] = line;
        ps->n++;
        return 0;
}

/* Parse the address field into p, with a specific complaint. */
static int parse_addr_field(struct parser *ps, const char *tok,
                            struct node_peer *p, unsigned line)
{
        int rc = node_addr_parse(tok, &p->addr, 1);

        if (rc == -EHOSTUNREACH) {
                gn_seterr(ps->err, ps->errlen,
                          "%s:%u: cannot resolve host in '%.64s'", ps->fname,
                          line, tok);
                return -EINVAL;
        }
        if (rc < 0) {
                gn_seterr(ps->err, ps->errlen,
                          "%s:%u: bad address '%.64s' (expected A.B.C.D:PORT, "
                          "[IPv6]:PORT or HOST:PORT, port 1-65535)",
                          ps->fname, line, tok);
                return -EINVAL;
        }
        node_addr_format(&p->addr, p->addr_str, sizeof(p->addr_str));
        return 0;
}

/* Parse one line (NUL-terminated, comment already cut). */
static int parse_line(struct parser *ps, char *s, unsigned line)
{
        char *tok[4], *save = NULL;
        struct node_peer p;
        int nt = 0, rc;

        for (char *t = strtok_r(s, " \t\r", &save); t && nt < 4;
             t = strtok_r(NULL, " \t\r", &save))
                tok[nt++] = t;
        if (nt == 0)
                return 0;
        if (nt < 2 || nt > 3) {
                gn_seterr(ps->err, ps->errlen,
                          "%s:%u: expected 'ADDR:PORT PUBKEY [NAME]', found %s "
                          "fields",
                          ps->fname, line, nt < 2 ? "1 of 2-3" : "more than 3");
                return -EINVAL;
        }
        memset(&p, 0, sizeof(p));
        /* the address last: it may need a (slow) name lookup */
        rc = node_key_pk_from_base64(tok[1], strlen(tok[1]), p.pk);
        if (rc == -EDOM) {
                gn_seterr(ps->err, ps->errlen,
                          "%s:%u: public key is not a valid Ed25519 point "
                          "(right length and base64, but no Ed25519 key "
                          "has these bytes: mistyped, or another kind of "
                          "key?)",
                          ps->fname, line);
                return -EINVAL;
        }
        if (rc < 0) {
                gn_seterr(ps->err, ps->errlen,
                          "%s:%u: bad public key (expected %d base64 chars)",
                          ps->fname, line, NODE_KEY_PK_B64_LEN);
                return -EINVAL;
        }
        if (nt == 3 && !valid_name(tok[2])) {
                gn_seterr(ps->err, ps->errlen,
                          "%s:%u: bad name '%.64s' (1-63 chars of A-Z a-z 0-9 "
                          ". _ -)",
                          ps->fname, line, tok[2]);
                return -EINVAL;
        }
        if ((rc = parse_addr_field(ps, tok[0], &p, line)) < 0)
                return rc;
        snprintf(p.name, sizeof(p.name), "%s", nt == 3 ? tok[2] : p.addr_str);
        if ((rc = check_dup(ps, &p, line)) < 0)
                return rc;
        if (ps->n >= NODE_PEERS_MAX) {
                gn_seterr(ps->err, ps->errlen, "%s:%u: more than %d peers",
                          ps->fname, line, NODE_PEERS_MAX);
                return -EINVAL;
        }
        rc = push(ps, &p, line);
        if (rc < 0)
                gn_seterr(ps->err, ps->errlen, "%s: out of memory", ps->fname);
        return rc;
}

int node_peers_parse(const char *text, size_t len, const char *fname,
                     struct node_peer **out, size_t *n, char *err,
                     size_t errlen)
{
        struct parser ps = {
            fname ? fname : "peers", err, errlen, NULL, NULL, 0, 0};
        char buf[LINE_MAX_LEN + 1];
        size_t pos = 0;
        unsigned line = 0;
        int rc = 0;

        if (out == NULL || n == NULL || (text == NULL && len > 0))
                return -EINVAL;
        *out = NULL;
        *n = 0;
        if (len > NODE_PEERS_FILE_MAX) {
                gn_seterr(err, errlen, "%s: larger than %d bytes", ps.fname,
                          NODE_PEERS_FILE_MAX);
                return -EINVAL;
        }
        while (pos < len) {
                const char *nl = memchr(text + pos, '\n', len - pos);
                size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
                line++;
                if (ll > LINE_MAX_LEN) {
                        gn_seterr(err, errlen,
                                  "%s:%u: line longer than %d bytes", ps.fname,
                                  line, LINE_MAX_LEN);
                        rc = -EINVAL;
                        goto out;
                }
                memcpy(buf, text + pos, ll);
                buf[ll] = '\0';
                pos += ll + 1;
                if (memchr(buf, '\0', ll) != NULL) {
                        gn_seterr(err, errlen, "%s:%u: NUL byte in line",
                                  ps.fname, line);
                        rc = -EINVAL;
                        goto out;
                }
                buf[strcspn(buf, "#")] = '\0';
                if ((rc = parse_line(&ps, buf, line)) < 0)
                        goto out;
        }
out:
        free(ps.lines);
        if (rc < 0) {
                free(ps.v);
                return rc;
        }
        *out = ps.v;
        *n = ps.n;
        return 0;
}

int node_peers_load(const char *path, struct node_peer **out, size_t *n,
                    char *err, size_t errlen)
{
        FILE *f;
        char *text = NULL;
        size_t len;
        int rc = 0;

        if (out == NULL || n == NULL || path == NULL)
                return -EINVAL;
        *out = NULL;
        *n = 0;
        f = fopen(path, "rb");
        if (f == NULL) {
                rc = -errno;
                gn_seterr(err, errlen, "%s: %s", path, strerror(errno));
                return rc;
        }
        text = malloc(NODE_PEERS_FILE_MAX + 1);
        if (text == NULL) {
                rc = -ENOMEM;
                gn_seterr(err, errlen, "%s: out of memory", path);
                goto out;
        }
        len = fread(text, 1, NODE_PEERS_FILE_MAX + 1, f);
        if (ferror(f)) {
                rc = -EIO;
                gn_seterr(err, errlen, "%s: read error", path);
                goto out;
        }
        rc = node_peers_parse(text, len, path, out, n, err, errlen);
out:
        free(text);
        fclose(f);
        return rc;
}

void node_peers_free(struct node_peer *peers)
{
        free(peers);
}

long node_peers_find_pk(const struct node_peer *peers, size_t n,
                        const uint8_t pk[GOSSIP_KEY_BYTES])
{
        for (size_t i = 0; i < n; i++)
                if (memcmp(peers[i].pk, pk, GOSSIP_KEY_BYTES) == 0)
                        return (long)i;
        return -1;
}

long node_peers_find_name(const struct node_peer *peers, size_t n,
                          const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(peers[i].name, name) == 0)
                        return (long)i;
        return -1;
}
