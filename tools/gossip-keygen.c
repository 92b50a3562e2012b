/*
 * gossip-keygen - create a node identity and print its peers-file line;
 * run a cluster authority: its key, device certificates, revocation list.
 *
 *   gossip-keygen --out FILE [--force] [--addr ADDR:PORT] [--name NAME]
 *   gossip-keygen --show FILE [--addr ADDR:PORT] [--name NAME]
 *   gossip-keygen --ca --out CA.key [--force]
 *   gossip-keygen --sign --ca-key CA.key --pub FILE|KEY --name NAME
 *                 [--addr A.B.C.D:PORT|[V6]:PORT] [--days D] [--serial HEX]
 *                 --out DEVICE.cert [--force]
 *   gossip-keygen --revoke --ca-key CA.key --serial HEX [--crl FILE]
 *   gossip-keygen --reissue --ca-key CA.key [--crl FILE]
 *   gossip-keygen --show-cert FILE [--ca-pub FILE|KEY [--crl FILE]]
 *   gossip-keygen --show-crl FILE [--ca-pub FILE|KEY]
 *
 * --out writes a fresh Ed25519 secret key to FILE (mode 0600, refused if
 * FILE exists unless --force) and the matching peers-file line to FILE.pub
 * (mode 0644: it is public). --show prints the line of an existing key.
 * The line goes to stdout alone, so `gossip-keygen ... >> peers.txt` works;
 * everything else goes to stderr. Address and name are checked with the
 * same rules as the peers file, but host names are not resolved here (the
 * device that generates a key need not resolve its own name).
 *
 * The authority (docs/protocol.md section 12): --ca writes its secret key
 * like --out and its public key to CA.pub (CA.key's name with .pub for
 * .key), and prints the public key. --sign issues a certificate for the
 * device key in FILE (a .pub file or any text whose first 44-character
 * base64 word is the key) or given as KEY, valid from now for D days
 * (default 365), serial random unless given; what was issued goes to
 * stderr. A certificate's address is numeric (it is signed bytes, not a
 * name to resolve). --revoke adds a serial to the list in FILE (default
 * CA.key's name with .crl for .key), creating it at sequence 1, else
 * raising its sequence by one, re-signs it and replaces the file
 * atomically; a list of another authority or a forged one is refused and
 * left alone. --reissue does the same with no new serial: the list's
 * signed date moves to now, raising the time floor of every board without
 * a clock that takes it (docs/protocol.md 12.4). --show-cert and --show-crl
 * print one; with --ca-pub they also judge it by this machine's clock (and
 * --crl's list).
 *
 * Exit status: 0 ok, 1 error (or, with --ca-pub, a certificate or list
 * that does not verify), 2 bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "gossip/cert.h"
#include "base/gn_endian.h"
#include "ident/authority.h"
#include "ident/keys.h"
#include "ident/peers.h"
#include "gossip/wire.h"

#ifndef GN_VERSION
#define GN_VERSION "unknown"
#endif

struct opts {
        const char *out, *show, *addr, *name;
        /* the authority's modes and their values */
        const char *ca_key, *pub, *days, *serial, *crl, *ca_pub;
        const char *show_cert, *show_crl;
        int force, ca, sign, revoke, reissue;
};

static int usage(const char *why)
{
        if (why)
                fprintf(stderr, "gossip-keygen: %s\n", why);
        fprintf(why ? stderr : stdout,
                "usage: gossip-keygen --out FILE [--force] [--addr ADDR:PORT] "
                "[--name NAME]\n"
                "       gossip-keygen --show FILE [--addr ADDR:PORT] "
                "[--name NAME]\n"
                "       gossip-keygen --ca --out CA.key [--force]\n"
                "       gossip-keygen --sign --ca-key CA.key --pub FILE|KEY "
                "--name NAME\n"
                "                     [--addr ADDR:PORT] [--days D] "
                "[--serial HEX] --out DEVICE.cert [--force]\n"
                "       gossip-keygen --revoke --ca-key CA.key --serial HEX "
                "[--crl FILE]\n"
                "       gossip-keygen --reissue --ca-key CA.key [--crl FILE]\n"
                "       gossip-keygen --show-cert FILE [--ca-pub FILE|KEY "
                "[--crl FILE]]\n"
                "       gossip-keygen --show-crl FILE [--ca-pub FILE|KEY]\n"
                "       gossip-keygen --version\n"
                "--out writes an Ed25519 secret key to FILE (mode 0600, never "
                "overwritten\n"
                "without --force), its peers-file line to FILE.pub, and "
                "prints that\n"
                "line: ADDR:PORT  PUBLIC_KEY  NAME. --ca, --sign, --revoke and "
                "--reissue "
                "run a cluster\n"
                "authority (docs/protocol.md section 12).\n");
        return why ? 2 : 0;
}

/* ADDR:PORT as in the peers file; names are checked, not resolved. */
static int addr_ok(const char *s)
{
        struct gossip_addr a;
        const char *colon = strrchr(s, ':');
        char buf[320];

        if (node_addr_parse(s, &a, 0) == 0)
                return 1;
        if (colon == NULL || s[0] == '[' || colon == s ||
            (size_t)(colon - s) > 253)
                return 0;
        /* "host:port": check the port by parsing 127.0.0.1:port */
        snprintf(buf, sizeof(buf), "127.0.0.1%s", colon);
        if (node_addr_parse(buf, &a, 0) != 0)
                return 0;
        for (const char *p = s; p < colon; p++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX"
                            "YZ0123456789.-",
                            *p))
                        return 0;
        return strspn(s, "0123456789.") < (size_t)(colon - s);
}

static int name_ok(const char *s)
{
        size_t n = strlen(s);

        return n > 0 && n < NODE_PEER_NAME_SIZE &&
               strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                         "0123456789._-") == n;
}

static void peers_line(const struct opts *o, const uint8_t pk[32], char *buf,
                       size_t len)
{
        char b64[NODE_KEY_PK_B64_SIZE];

        node_key_pk_to_base64(pk, b64);
        snprintf(buf, len, "%-21s %s%s%s\n", o->addr ? o->addr : "ADDR:PORT",
                 b64, o->name ? "  " : "", o->name ? o->name : "");
}

/* Write the public line next to the key (replacing an old one). */
static int write_pub(const char *keypath, const char *line)
{
        char path[4096];
        FILE *f;
        int rc = 0;

        if (snprintf(path, sizeof(path), "%s.pub", keypath) >=
            (int)sizeof(path))
                return -ENAMETOOLONG;
        f = fopen(path, "w");
        if (f == NULL)
                return -errno;
        fprintf(f, "# gossipnode peers-file line (public)\n%s", line);
        if (fclose(f) != 0)
                rc = -errno;
        if (rc == 0)
                chmod(path, 0644);
        return rc;
}

/* A fresh key pair, its secret saved to o->out (refused if it exists
 * unless --force); pk set. 0, or -1 after saying why. */
static int new_key(const struct opts *o, uint8_t pk[GOSSIP_KEY_BYTES])
{
        uint8_t sk[GOSSIP_SECRET_BYTES];
        char err[512];
        int rc = node_key_generate(pk, sk);

        if (rc == 0)
                rc = node_key_save(o->out, sk, o->force, err, sizeof(err));
        sodium_memzero(sk, sizeof(sk));
        if (rc < 0) {
                fprintf(stderr, "gossip-keygen: %s\n",
                        rc == -EIO ? "cannot generate a key" : err);
                return -1;
        }
        return 0;
}

static int generate(const struct opts *o)
{
        uint8_t pk[GOSSIP_KEY_BYTES];
        char line[256], id[NODE_KEY_ID_SIZE];
        int rc;

        if (new_key(o, pk) < 0)
                return 1;
        peers_line(o, pk, line, sizeof(line));
        node_key_id(pk, id);
        fprintf(stderr, "gossip-keygen: wrote secret key %s (key id %s)\n",
                o->out, id);
        rc = write_pub(o->out, line);
        if (rc < 0)
                fprintf(stderr, "gossip-keygen: %s.pub: %s\n", o->out,
                        strerror(-rc));
        fputs(line, stdout);
        return rc < 0 ? 1 : 0;
}

static int show(const struct opts *o)
{
        uint8_t pk[GOSSIP_KEY_BYTES], sk[GOSSIP_SECRET_BYTES];
        char err[512], line[256];
        int rc = node_key_load(o->show, pk, sk, err, sizeof(err));

        sodium_memzero(sk, sizeof(sk));
        if (rc < 0) {
                fprintf(stderr, "gossip-keygen: %s\n", err);
                return 1;
        }
        peers_line(o, pk, line, sizeof(line));
        fputs(line, stdout);
        return 0;
}

/* ---- the cluster authority ------------------------------------------- */

/* path with its ".key" ending replaced by ext (or ext appended). */
static int beside(const char *path, const char *ext, char *out, size_t len)
{
        size_t n = strlen(path);

        if (n > 4 && strcmp(path + n - 4, ".key") == 0)
                n -= 4;
        if (snprintf(out, len, "%.*s%s", (int)n, path, ext) >= (int)len)
                return -ENAMETOOLONG;
        return 0;
}

/* 1..16 hex digits, optionally after 0x, not all zero. */
static int parse_serial(const char *s, uint64_t *out)
{
        char *end;

        if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
                s += 2;
        if (*s == 0 || strlen(s) > 16 ||
            strspn(s, "0123456789abcdefABCDEF") != strlen(s))
                return -EINVAL;
        *out = strtoull(s, &end, 16);
        return *out ? 0 : -EINVAL;
}

static void fmt_time(uint64_t t, char *buf, size_t len)
{
        time_t tt = (time_t)t;
        struct tm tm;

        if ((uint64_t)tt != t || t > INT64_MAX / 2 || !gmtime_r(&tt, &tm) ||
            !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
                snprintf(buf, len, "%llu", (unsigned long long)t);
}

static uint64_t now_s(void)
{
        time_t t = time(NULL);

        return t > 0 ? (uint64_t)t : 0;
}

/* The authority's key pair from its key file; 1 (message printed) on
 * error. */
static int load_ca(const char *path, uint8_t pk[GOSSIP_KEY_BYTES],
                   uint8_t sk[GOSSIP_SECRET_BYTES])
{
        char err[512];

        if (node_key_load(path, pk, sk, err, sizeof(err)) < 0) {
                fprintf(stderr, "gossip-keygen: %s\n", err);
                return 1;
        }
        return 0;
}

static int make_ca(const struct opts *o)
{
        uint8_t pk[GOSSIP_KEY_BYTES];
        char pub[4096], b64[NODE_KEY_PK_B64_SIZE], id[17];
        char text[256];
        int rc, n;

        if (beside(o->out, ".pub", pub, sizeof(pub)) < 0)
                return usage("--out: name too long");
        if (new_key(o, pk) < 0)
                return 1;
        node_key_pk_to_base64(pk, b64);
        node_key_id(pk, id);
        n = snprintf(text, sizeof(text),
                     "# gossipnode cluster authority public key (key id %s)\n"
                     "%s\n",
                     id, b64);
        rc = node_file_write_atomic(pub, text, (size_t)n, 0644, 1);
        fprintf(stderr,
                "gossip-keygen: wrote authority secret key %s (key id %s; "
                "keep it off the devices)%s%s\n",
                o->out, id, rc < 0 ? "" : " and ", rc < 0 ? "" : pub);
        if (rc < 0)
                fprintf(stderr, "gossip-keygen: %s: %s\n", pub, strerror(-rc));
        printf("%s\n", b64);
        return rc < 0 ? 1 : 0;
}

/* The certificate --sign asks for, from the options; 2 on bad usage
 * (message printed). */
static int cert_from_opts(const struct opts *o, struct gossip_cert *c)
{
        unsigned long days = 365;
        char *end;

        memset(c, 0, sizeof(*c));
        if (node_authority_pub_load(o->pub, c->pk) < 0)
                return usage("bad --pub (a 44-character base64 key, or a "
                             "readable file holding one)");
        if (strlen(o->name) >= sizeof(c->name) || !name_ok(o->name))
                return usage("bad --name (1-31 chars of A-Z a-z 0-9 . _ -)");
        strcpy(c->name, o->name);
        if (o->addr && node_addr_parse(o->addr, &c->addr, 0) < 0)
                return usage("bad --addr (expected A.B.C.D:PORT or "
                             "[IPv6]:PORT, port 1-65535; a certificate's "
                             "address is numeric)");
        if (o->days) {
                errno = 0;
                days = strtoul(o->days, &end, 10);
                if (errno || *end || end == o->days || days < 1 || days > 36500)
                        return usage("bad --days (1-36500)");
        }
        if (o->serial && parse_serial(o->serial, &c->serial) < 0)
                return usage("bad --serial (1-16 hex digits, not 0)");
        while (c->serial == 0)
                randombytes_buf(&c->serial, sizeof(c->serial));
        c->not_before = now_s();
        c->not_after = c->not_before + (uint64_t)days * 86400;
        return 0;
}

static int sign_cert(const struct opts *o)
{
        uint8_t pk[GOSSIP_KEY_BYTES], sk[GOSSIP_SECRET_BYTES];
        uint8_t buf[GOSSIP_CERT_MAX_BYTES];
        char id[17], ca_id[17], from[32], to[32], addr[NODE_ADDR_STR_SIZE];
        struct gossip_cert c;
        int rc, n;

        if ((rc = cert_from_opts(o, &c)) != 0)
                return rc;
        if (load_ca(o->ca_key, pk, sk))
                return 1;
        n = gossip_cert_sign(&c, sk, buf, sizeof(buf));
        sodium_memzero(sk, sizeof(sk));
        if (n < 0) {
                fprintf(stderr, "gossip-keygen: cannot sign: %s\n",
                        gossip_strerror(n));
                return 1;
        }
        rc = node_file_write_atomic(o->out, buf, (size_t)n, 0644, o->force);
        if (rc < 0) {
                fprintf(stderr, "gossip-keygen: %s: %s\n", o->out,
                        rc == -EEXIST ? "already exists (use --force)"
                                      : strerror(-rc));
                return 1;
        }
        node_key_id(c.pk, id);
        node_key_id(pk, ca_id);
        fmt_time(c.not_before, from, sizeof(from));
        fmt_time(c.not_after, to, sizeof(to));
        if (c.addr.family == 0 ||
            node_addr_format(&c.addr, addr, sizeof(addr)) < 0)
                snprintf(addr, sizeof(addr), "no address");
        fprintf(stderr,
                "gossip-keygen: issued %s: serial %016llx for %s (key id %s, "
                "%s), valid %s to %s, authority key id %s\n",
                o->out, (unsigned long long)c.serial, c.name, id, addr, from,
                to, ca_id);
        return 0;
}

/* Inserts serial into the sorted v[0..*n); -EEXIST if there, -ENOSPC if
 * full. */
static int insert_serial(uint64_t *v, uint32_t *n, uint64_t serial)
{
        uint32_t i = 0;

        while (i < *n && v[i] < serial)
                i++;
        if (i < *n && v[i] == serial)
                return -EEXIST;
        if (*n >= GOSSIP_CRL_MAX_SERIALS)
                return -ENOSPC;
        memmove(v + i + 1, v + i, (*n - i) * sizeof(*v));
        v[i] = serial;
        (*n)++;
        return 0;
}

/* The list at path (seq 0 and no serials if there is none), verified as
 * this authority's; 1 (message printed) on error. */
static int read_crl(const char *path, const uint8_t pk[GOSSIP_KEY_BYTES],
                    uint8_t *buf, struct gossip_crl *l, uint64_t *v)
{
        long n = node_file_read(path, buf, GOSSIP_CRL_MAX_BYTES);
        int verdict;

        memset(l, 0, sizeof(*l));
        if (n == -ENOENT)
                return 0;
        if (n < 0) {
                fprintf(stderr, "gossip-keygen: %s: %s\n", path,
                        n == -EFBIG ? "too large for a revocation list"
                                    : strerror((int)-n));
                return 1;
        }
        verdict = gossip_crl_verify(buf, (size_t)n, pk, l);
        if (verdict != GOSSIP_CRL_OK) {
                fprintf(stderr,
                        "gossip-keygen: %s: not a revocation list of this "
                        "authority (%s); left as it is\n",
                        path, gossip_crl_verdict_name(verdict));
                return 1;
        }
        for (uint32_t i = 0; i < l->n_serials; i++)
                v[i] = gn_be_get(l->serials + 8 * i, 8);
        return 0;
}

/* --revoke (serial) or --reissue (no serial): the list at --crl (default
 * beside CA.key) again at the next sequence, signed now with serial added. */
static int write_crl(const struct opts *o, const uint64_t *serial)
{
        static uint8_t old[GOSSIP_CRL_MAX_BYTES], buf[GOSSIP_CRL_MAX_BYTES];
        static uint64_t v[GOSSIP_CRL_MAX_SERIALS];
        uint8_t pk[GOSSIP_KEY_BYTES], sk[GOSSIP_SECRET_BYTES];
        char path[4096], at_s[32];
        struct gossip_crl l;
        uint64_t at = now_s();
        uint32_t n;
        int rc;

        if (o->crl)
                snprintf(path, sizeof(path), "%s", o->crl);
        else if (beside(o->ca_key, ".crl", path, sizeof(path)) < 0)
                return usage("--ca-key: name too long");
        if (load_ca(o->ca_key, pk, sk))
                return 1;
        rc = read_crl(path, pk, old, &l, v) ? -EINVAL : 0;
        n = l.n_serials;
        if (rc == 0 && serial && (rc = insert_serial(v, &n, *serial)) < 0)
                fprintf(stderr, "gossip-keygen: %s: serial %016llx %s\n", path,
                        (unsigned long long)*serial,
                        rc == -EEXIST ? "is revoked already"
                                      : "does not fit: the list is full");
        if (rc == 0 && l.seq == UINT64_MAX)
                rc = -EOVERFLOW;
        if (at < l.issued_at) /* the floor a list gives never moves back */
                at = l.issued_at;
        if (rc == 0)
                rc = gossip_crl_sign(l.seq + 1, at, v, n, sk, buf, sizeof(buf));
        sodium_memzero(sk, sizeof(sk));
        if (rc < 0)
                return 1;
        rc = node_file_write_atomic(path, buf, (size_t)rc, 0644, 1);
        if (rc < 0) {
                fprintf(stderr, "gossip-keygen: %s: %s\n", path, strerror(-rc));
                return 1;
        }
        fmt_time(at, at_s, sizeof(at_s));
        if (serial)
                fprintf(stderr, "gossip-keygen: revoked %016llx: ",
                        (unsigned long long)*serial);
        else
                fprintf(stderr, "gossip-keygen: reissued: ");
        fprintf(stderr,
                "%s is now sequence %llu, issued at %s, with %u "
                "serial%s\n",
                path, (unsigned long long)(l.seq + 1), at_s, n,
                n == 1 ? "" : "s");
        return 0;
}

static int revoke(const struct opts *o)
{
        uint64_t serial;

        if (parse_serial(o->serial, &serial) < 0)
                return usage("bad --serial (1-16 hex digits, not 0)");
        return write_crl(o, &serial);
}

/* node_file_read() into buf, *n its result; 1 (message printed) if the file
 * cannot be read at all. A file longer than cap is *n = -EFBIG, 0: the
 * caller says what it is not. */
static int read_or_say(const char *path, uint8_t *buf, size_t cap, long *n)
{
        *n = node_file_read(path, buf, cap);
        if (*n < 0 && *n != -EFBIG) {
                fprintf(stderr, "gossip-keygen: %s: %s\n", path,
                        strerror((int)-*n));
                return 1;
        }
        return 0;
}

static void print_cert(const char *path, const struct gossip_cert *c)
{
        char b64[NODE_KEY_PK_B64_SIZE], id[17], from[32], to[32];
        char addr[NODE_ADDR_STR_SIZE] = "none";

        node_key_pk_to_base64(c->pk, b64);
        node_key_id(c->pk, id);
        fmt_time(c->not_before, from, sizeof(from));
        fmt_time(c->not_after, to, sizeof(to));
        if (c->addr.family)
                node_addr_format(&c->addr, addr, sizeof(addr));
        printf("certificate %s\n"
               "  name        %s\n"
               "  address     %s\n"
               "  public key  %s (key id %s)\n"
               "  serial      %016llx\n"
               "  valid       %s to %s\n"
               "  authority   key id %016llx\n",
               path, c->name, addr, b64, id, (unsigned long long)c->serial,
               from, to, (unsigned long long)c->authority_id);
}

static int show_cert(const struct opts *o)
{
        static uint8_t lb[GOSSIP_CRL_MAX_BYTES];
        uint8_t buf[GOSSIP_CERT_MAX_BYTES + 1], pk[GOSSIP_KEY_BYTES];
        long n;
        struct gossip_crl l, *lp = NULL;
        struct gossip_cert c;
        const char *why = "longer than any certificate";
        int v;

        if (read_or_say(o->show_cert, buf, sizeof(buf), &n))
                return 1;
        if (n < 0 ||
            gossip_cert_decode(buf, (size_t)n, &c, &why) != GOSSIP_CERT_OK) {
                fprintf(stderr, "gossip-keygen: %s: not a certificate: %s\n",
                        o->show_cert, why);
                return 1;
        }
        print_cert(o->show_cert, &c);
        if (!o->ca_pub)
                return 0;
        if (node_authority_pub_load(o->ca_pub, pk) < 0)
                return usage("bad --ca-pub (a 44-character base64 key, or a "
                             "readable file holding one)");
        if (o->crl) {
                long ln = node_file_read(o->crl, lb, sizeof(lb));

                if (ln < 0 || gossip_crl_verify(lb, (size_t)ln, pk, &l) !=
                                  GOSSIP_CRL_OK) {
                        fprintf(stderr,
                                "gossip-keygen: %s: not a revocation list of "
                                "this authority\n",
                                o->crl);
                        return 1;
                }
                lp = &l;
        }
        v = gossip_cert_verify(buf, (size_t)n, pk, now_s(), 1, lp, NULL);
        printf("  verdict     %s (by this machine's clock%s)\n",
               gossip_cert_verdict_name(v), lp ? " and the list" : "");
        return v == GOSSIP_CERT_OK ? 0 : 1;
}

static int show_crl(const struct opts *o)
{
        static uint8_t buf[GOSSIP_CRL_MAX_BYTES];
        const char *why = "longer than any revocation list";
        uint8_t pk[GOSSIP_KEY_BYTES];
        struct gossip_crl l;
        char at[32];
        long n;
        int v;

        if (read_or_say(o->show_crl, buf, sizeof(buf), &n))
                return 1;
        if (n < 0 ||
            gossip_crl_decode(buf, (size_t)n, &l, &why) != GOSSIP_CRL_OK) {
                fprintf(stderr,
                        "gossip-keygen: %s: not a revocation list: %s\n",
                        o->show_crl, why);
                return 1;
        }
        fmt_time(l.issued_at, at, sizeof(at));
        printf("revocation list %s\n"
               "  authority   key id %016llx\n"
               "  sequence    %llu\n"
               "  issued at   %s\n"
               "  revoked     %u\n",
               o->show_crl, (unsigned long long)l.authority_id,
               (unsigned long long)l.seq, at, l.n_serials);
        for (uint32_t i = 0; i < l.n_serials; i++)
                printf("    %016llx\n",
                       (unsigned long long)gn_be_get(l.serials + 8 * i, 8));
        if (!o->ca_pub)
                return 0;
        if (node_authority_pub_load(o->ca_pub, pk) < 0)
                return usage("bad --ca-pub (a 44-character base64 key, or a "
                             "readable file holding one)");
        v = gossip_crl_verify(buf, (size_t)n, pk, NULL);
        printf("  verdict     %s\n", gossip_crl_verdict_name(v));
        return v == GOSSIP_CRL_OK ? 0 : 1;
}

/* The value slot of option a, or NULL if a takes no value. */
static const char **opt_slot(struct opts *o, const char *a)
{
        static const struct {
                const char *name;
                size_t off;
        } opts[] = {
            {"--out", offsetof(struct opts, out)},
            {"--show", offsetof(struct opts, show)},
            {"--addr", offsetof(struct opts, addr)},
            {"--name", offsetof(struct opts, name)},
            {"--ca-key", offsetof(struct opts, ca_key)},
            {"--pub", offsetof(struct opts, pub)},
            {"--days", offsetof(struct opts, days)},
            {"--serial", offsetof(struct opts, serial)},
            {"--crl", offsetof(struct opts, crl)},
            {"--ca-pub", offsetof(struct opts, ca_pub)},
            {"--show-cert", offsetof(struct opts, show_cert)},
            {"--show-crl", offsetof(struct opts, show_crl)},
        };

        for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
                if (strcmp(a, opts[i].name) == 0)
                        return (const char **)((char *)o + opts[i].off);
        return NULL;
}

/* The flag a names, or NULL. */
static int *flag_slot(struct opts *o, const char *a)
{
        return strcmp(a, "--force") == 0     ? &o->force
               : strcmp(a, "--ca") == 0      ? &o->ca
               : strcmp(a, "--sign") == 0    ? &o->sign
               : strcmp(a, "--revoke") == 0  ? &o->revoke
               : strcmp(a, "--reissue") == 0 ? &o->reissue
                                             : NULL;
}

/* Which mode the options ask for, or a usage message in *why. */
static int pick_mode(const struct opts *o, const char **why)
{
        int modes = !!o->ca + !!o->sign + !!o->revoke + !!o->reissue +
                    !!o->show_cert + !!o->show_crl + !!o->show;

        *why = "give exactly one of --out FILE, --show FILE, --ca, --sign, "
               "--revoke, --reissue, --show-cert FILE, --show-crl FILE";
        if (modes > 1 || (modes == 0 && !o->out))
                return 0;
        if (o->show && o->out)
                return 0;
        if ((o->ca || o->sign) && !o->out)
                return *why = "--ca and --sign need --out FILE", 0;
        if ((o->sign || o->revoke || o->reissue) && !o->ca_key)
                return *why = "--sign, --revoke and --reissue need --ca-key "
                              "FILE",
                       0;
        if (o->sign && (!o->pub || !o->name))
                return *why = "--sign needs --pub FILE|KEY and --name NAME", 0;
        if (o->revoke && !o->serial)
                return *why = "--revoke needs --serial HEX", 0;
        if (o->ca_pub && !o->show_cert && !o->show_crl)
                return *why = "--ca-pub goes with --show-cert or --show-crl", 0;
        return 1;
}

int main(int argc, char **argv)
{
        struct opts o = {0};
        const char *why;

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                const char **slot = opt_slot(&o, a);
                int *flag = flag_slot(&o, a);

                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
                        return usage(NULL);
                if (strcmp(a, "--version") == 0) {
                        printf("gossip-keygen %s\n", GN_VERSION);
                        return 0;
                }
                if (flag) {
                        *flag = 1;
                        continue;
                }
                if (slot == NULL)
                        return fprintf(stderr,
                                       "gossip-keygen: unknown "
                                       "argument '%s'\n",
                                       a),
                               usage("see usage");
                if (i + 1 >= argc)
                        return usage("an option needs a value");
                *slot = argv[++i];
        }
        if (!pick_mode(&o, &why))
                return usage(why);
        if (node_key_init() < 0) {
                fprintf(stderr, "gossip-keygen: libsodium failed to start\n");
                return 1;
        }
        if (o.ca)
                return make_ca(&o);
        if (o.sign)
                return sign_cert(&o);
        if (o.revoke)
                return revoke(&o);
        if (o.reissue)
                return write_crl(&o, NULL);
        if (o.show_cert)
                return show_cert(&o);
        if (o.show_crl)
                return show_crl(&o);
        if (o.addr && !addr_ok(o.addr))
                return usage("bad --addr (expected A.B.C.D:PORT, [IPv6]:PORT "
                             "or HOST:PORT, port 1-65535)");
        if (o.name && !name_ok(o.name))
                return usage("bad --name (1-63 chars of A-Z a-z 0-9 . _ -)");
        return o.out ? generate(&o) : show(&o);
}
