/*
 * gossip-keygen - create a node identity and print its peers-file line.
 *
 *   gossip-keygen --out FILE [--force] [--addr ADDR:PORT] [--name NAME]
 *   gossip-keygen --show FILE [--addr ADDR:PORT] [--name NAME]
 *
 * --out writes a fresh Ed25519 secret key to FILE (mode 0600, refused if
 * FILE exists unless --force) and the matching peers-file line to FILE.pub
 * (mode 0644: it is public). --show prints the line of an existing key.
 * The line goes to stdout alone, so `gossip-keygen ... >> peers.txt` works;
 * everything else goes to stderr. Address and name are checked with the
 * same rules as the peers file, but host names are not resolved here (the
 * device that generates a key need not resolve its own name).
 *
 * Exit status: 0 ok, 1 error, 2 bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "ident/keys.h"
#include "ident/peers.h"

#ifndef GN_VERSION
#define GN_VERSION "unknown"
#endif

struct opts {
        const char *out, *show, *addr, *name;
        int force;
};

static int usage(const char *why)
{
        if (why)
                fprintf(stderr, "gossip-keygen: %s\n", why);
        fprintf(why ? stderr : stdout,
                "usage: gossip-keygen --out FILE [--force] [--addr ADDR:PORT] "
                "[--name NAME]\n"
                "       gossip-keygen --version\n"
                "       gossip-keygen --show FILE [--addr ADDR:PORT] "
                "[--name NAME]\n"
                "Writes an Ed25519 secret key to FILE (mode 0600, never "
                "overwritten\n"
                "without --force), its peers-file line to FILE.pub, and "
                "prints that\n"
                "line: ADDR:PORT  PUBLIC_KEY  NAME\n");
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

static int generate(const struct opts *o)
{
        uint8_t pk[GOSSIP_KEY_BYTES], sk[GOSSIP_SECRET_BYTES];
        char err[512], line[256], id[NODE_KEY_ID_SIZE];
        int rc;

        rc = node_key_generate(pk, sk);
        if (rc == 0)
                rc = node_key_save(o->out, sk, o->force, err, sizeof(err));
        sodium_memzero(sk, sizeof(sk));
        if (rc < 0) {
                fprintf(stderr, "gossip-keygen: %s\n",
                        rc == -EIO ? "cannot generate a key" : err);
                return 1;
        }
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

int main(int argc, char **argv)
{
        struct opts o = {0};

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                const char **slot = strcmp(a, "--out") == 0    ? &o.out
                                    : strcmp(a, "--show") == 0 ? &o.show
                                    : strcmp(a, "--addr") == 0 ? &o.addr
                                    : strcmp(a, "--name") == 0 ? &o.name
                                                               : NULL;
                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
                        return usage(NULL);
                if (strcmp(a, "--version") == 0) {
                        printf("gossip-keygen %s\n", GN_VERSION);
                        return 0;
                }
                if (strcmp(a, "--force") == 0) {
                        o.force = 1;
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
        if (!o.out == !o.show)
                return usage("give exactly one of --out FILE, --show FILE");
        if (o.addr && !addr_ok(o.addr))
                return usage("bad --addr (expected A.B.C.D:PORT, [IPv6]:PORT "
                             "or HOST:PORT, port 1-65535)");
        if (o.name && !name_ok(o.name))
                return usage("bad --name (1-63 chars of A-Z a-z 0-9 . _ -)");
        if (node_key_init() < 0) {
                fprintf(stderr, "gossip-keygen: libsodium failed to start\n");
                return 1;
        }
        return o.out ? generate(&o) : show(&o);
}
