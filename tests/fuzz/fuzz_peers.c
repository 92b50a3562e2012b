/*
 * fuzz_peers.c - libFuzzer target for the peers-file parser
 * (ident/peers.c: node_peers_parse, node_addr_parse, node_addr_format).
 *
 * fuzz-libs: gn_ident
 *
 * The input is the text of a peers file. node_peers_parse() always resolves
 * host names (node_addr_parse(..., resolve=1) has no switch), so this file
 * compiles ident/peers.c itself with getaddrinfo/freeaddrinfo renamed to a
 * deterministic in-memory fake: no DNS query ever leaves the process, and
 * the fuzzer still reaches the host-name branches (found, not found, IPv6
 * only, IPv6 before IPv4, two names on one address). Compiling peers.c here
 * also gives libFuzzer its coverage, which gn_ident (not built with
 * -fsanitize=fuzzer-no-link) would not. gn_ident's own peers.o is not pulled
 * in: every symbol it defines is defined here first.
 *
 * Oracles. Success: at most one entry per line and NODE_PEERS_MAX in all;
 * *out is NULL exactly when *n is 0; every entry has family 4 or 6, a port
 * in 1..65535, a nonzero key, a NUL-terminated valid name (or its addr_str),
 * an addr_str that is the canonical form of addr and parses back to it; no
 * two entries share a key, a name or an address; the find functions agree.
 * Failure: a negative code, *out NULL and *n 0, and a one-line message that
 * starts with the file name given.
 */
#include <netdb.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"

static int fake_getaddrinfo(const char *node, const char *service,
                            const struct addrinfo *hints,
                            struct addrinfo **res);
static void fake_freeaddrinfo(struct addrinfo *ai);

#define getaddrinfo  fake_getaddrinfo
#define freeaddrinfo fake_freeaddrinfo
#include "../../ident/peers.c"
#undef getaddrinfo
#undef freeaddrinfo

#define FUZZ_FNAME "fz.peers"

/* One fake answer: the addrinfo and the sockaddr it points to. */
struct fake_ai {
        struct addrinfo ai;
        struct sockaddr_storage ss;
};

static struct addrinfo *fake_answer(int family, uint32_t h,
                                    struct addrinfo *next)
{
        struct fake_ai *f = calloc(1, sizeof(*f));

        if (f == NULL)
                return next;
        f->ai.ai_family = family;
        f->ai.ai_socktype = SOCK_DGRAM;
        f->ai.ai_addr = (struct sockaddr *)&f->ss;
        f->ai.ai_next = next;
        if (family == AF_INET) {
                struct sockaddr_in *sin = (struct sockaddr_in *)&f->ss;
                uint8_t ip[4] = {10, 0, 0, (uint8_t)(h >> 8 & 3)};
                sin->sin_family = AF_INET;
                memcpy(&sin->sin_addr, ip, 4);
                f->ai.ai_addrlen = sizeof(*sin);
        } else {
                struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&f->ss;
                sin6->sin6_family = AF_INET6;
                sin6->sin6_addr.s6_addr[0] = 0xfd;
                sin6->sin6_addr.s6_addr[15] = (uint8_t)(h >> 8 & 3);
                f->ai.ai_addrlen = sizeof(*sin6);
        }
        return &f->ai;
}

/* Deterministic resolver: the FNV-1a hash of the name picks the outcome.
 * Few distinct addresses, so two names often collide (duplicate check). */
static int fake_getaddrinfo(const char *node, const char *service,
                            const struct addrinfo *hints, struct addrinfo **res)
{
        uint32_t h = 2166136261u;

        (void)service;
        (void)hints;
        *res = NULL;
        for (const char *p = node; p && *p; p++)
                h = (h ^ (uint8_t)*p) * 16777619u;
        switch (h % 8) {
        case 0:
                return EAI_NONAME;
        case 1: /* IPv6 only */
                *res = fake_answer(AF_INET6, h, NULL);
                break;
        case 2: /* IPv6 listed before IPv4: IPv4 must win */
                *res = fake_answer(AF_INET6, h, fake_answer(AF_INET, h, NULL));
                break;
        case 3: /* an answer of neither family */
                *res = fake_answer(AF_INET, h, NULL);
                if (*res)
                        (*res)->ai_family = AF_UNIX;
                break;
        default:
                *res = fake_answer(AF_INET, h, NULL);
                break;
        }
        return *res ? 0 : EAI_MEMORY;
}

static void fake_freeaddrinfo(struct addrinfo *ai)
{
        while (ai != NULL) {
                struct addrinfo *next = ai->ai_next;
                free(ai); /* ai is the first member of its struct fake_ai */
                ai = next;
        }
}

static int nul_in(const char *s, size_t size)
{
        return memchr(s, '\0', size) != NULL;
}

static void check_entry(const struct node_peer *p)
{
        static const uint8_t zero[GOSSIP_KEY_BYTES];
        struct gossip_addr back;
        char canon[NODE_ADDR_STR_SIZE];

        GN_FUZZ_CHECK(p->addr.family == 4 || p->addr.family == 6);
        GN_FUZZ_CHECK(p->addr.port >= 1);
        GN_FUZZ_CHECK(memcmp(p->pk, zero, sizeof(zero)) != 0);
        GN_FUZZ_CHECK(nul_in(p->name, sizeof(p->name)));
        GN_FUZZ_CHECK(nul_in(p->addr_str, sizeof(p->addr_str)));
        GN_FUZZ_CHECK(valid_name(p->name) || strcmp(p->name, p->addr_str) == 0);
        GN_FUZZ_CHECK(node_addr_format(&p->addr, canon, sizeof(canon)) > 0);
        GN_FUZZ_CHECK(strcmp(canon, p->addr_str) == 0);
        GN_FUZZ_CHECK(node_addr_parse(p->addr_str, &back, 0) == 0);
        GN_FUZZ_CHECK(same_addr(&back, &p->addr));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct node_peer *v = (struct node_peer *)1;
        size_t n = 12345, lines = 1;
        char err[256];
        int rc;

        memset(err, 0, sizeof(err));
        rc = node_peers_parse((const char *)data, size, FUZZ_FNAME, &v, &n, err,
                              sizeof(err));
        if (rc != 0) {
                GN_FUZZ_CHECK(rc < 0);
                GN_FUZZ_CHECK(v == NULL && n == 0);
                GN_FUZZ_CHECK(err[0] != '\0' && strchr(err, '\n') == NULL);
                GN_FUZZ_CHECK(
                    strncmp(err, FUZZ_FNAME ":", strlen(FUZZ_FNAME ":")) == 0);
                return 0;
        }
        for (size_t i = 0; i < size; i++)
                lines += data[i] == '\n';
        GN_FUZZ_CHECK(n <= lines && n <= NODE_PEERS_MAX);
        GN_FUZZ_CHECK((v == NULL) == (n == 0));
        for (size_t i = 0; i < n; i++) {
                check_entry(&v[i]);
                for (size_t j = 0; j < i; j++) {
                        GN_FUZZ_CHECK(
                            memcmp(v[i].pk, v[j].pk, GOSSIP_KEY_BYTES) != 0);
                        GN_FUZZ_CHECK(strcmp(v[i].name, v[j].name) != 0);
                        GN_FUZZ_CHECK(!same_addr(&v[i].addr, &v[j].addr));
                }
                GN_FUZZ_CHECK(node_peers_find_pk(v, n, v[i].pk) == (long)i);
                GN_FUZZ_CHECK(node_peers_find_name(v, n, v[i].name) == (long)i);
        }
        node_peers_free(v);
        return 0;
}

/* Seeds: valid files using every address form, comments and blank lines,
 * and a few near misses. */
void gn_fuzz_seeds(gn_fuzz_add_fn add, void *ctx)
{
        static const char *addrs[] = {
            "127.0.0.1:7946", "[fd00::1]:7946", "[::1]:1",
            "pi-01.lan:7946", "node7:65535",    "10.1.2.3:80",
        };
        static const char *names[] = {"alpha", "", "pi.02", "", "n_7", ""};
        char text[2048];
        size_t len = 0;

        for (unsigned i = 0; i < 6; i++) {
                uint8_t pk[GOSSIP_KEY_BYTES];
                char b64[NODE_KEY_PK_B64_SIZE];
                int k;

                for (unsigned j = 0; j < sizeof(pk); j++)
                        pk[j] = (uint8_t)(i * 37 + j + 1);
                sodium_bin2base64(b64, sizeof(b64), pk, sizeof(pk),
                                  sodium_base64_VARIANT_ORIGINAL);
                k = snprintf(text + len, sizeof(text) - len, "%s%s\t%s %s\n",
                             i == 2 ? "# a comment line\n\n" : "", addrs[i],
                             b64, names[i]);
                if (k < 0 || (size_t)k >= sizeof(text) - len)
                        return;
                len += (size_t)k;
                add(ctx, (const uint8_t *)text, len); /* files of 1..6 */
        }
        add(ctx, (const uint8_t *)"1.2.3.4:0 x\n", 12);
        add(ctx, (const uint8_t *)"# only a comment\n", 17);
}
