/*
 * test_peers.c - the peers file parser and address helpers: a good file is
 * parsed exactly, every kind of malformed line is reported with its line
 * number and a specific complaint, duplicates (key, name, address) are
 * refused, and random garbage never crashes the parser (it either parses or
 * names a line). Keys and garbage come from GN_SEED (printed).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "base/gn_rng.h"
#include "test_seed.h"
#include "gossip/gossip.h"
#include "ident/keys.h"
#include "ident/peers.h"

static uint64_t g_seed;
static char g_key[8][NODE_KEY_PK_B64_SIZE];
static uint8_t g_pk[8][32];

static void make_keys(void)
{
        uint64_t s = g_seed;
        uint8_t seed[32], sk[64];

        for (int i = 0; i < 8; i++) {
                for (int j = 0; j < 4; j++) {
                        uint64_t r = gn_splitmix64(&s);
                        memcpy(seed + 8 * j, &r, 8);
                }
                crypto_sign_seed_keypair(g_pk[i], sk, seed);
                node_key_pk_to_base64(g_pk[i], g_key[i]);
        }
}

static int parse(const char *text, struct node_peer **v, size_t *n, char *err,
                 size_t errlen)
{
        return node_peers_parse(text, strlen(text), "peers.txt", v, n, err,
                                errlen);
}

static void test_good_file(void **state)
{
        char text[2048], err[256] = "";
        struct node_peer *v = NULL;
        size_t n = 99;
        uint8_t v6[16];

        snprintf(text, sizeof(text),
                 "# addr  key  name\n"
                 "\n"
                 "10.0.0.11:7946      %s     pi-kitchen\n"
                 "   \t  # indented comment\n"
                 "10.0.0.12:7946\t%s\tpi-garage   # trailing comment\n"
                 "[fd00::13]:7946     %s     pi-attic\r\n"
                 "127.0.0.1:1 %s\n"
                 "[::1]:65535 %s node_4.b-x\n"
                 "localhost:9000 %s",
                 g_key[0], g_key[1], g_key[2], g_key[3], g_key[4], g_key[5]);
        assert_int_equal(parse(text, &v, &n, err, sizeof(err)), 0);
        assert_int_equal(n, 6);

        assert_int_equal(v[0].addr.family, 4);
        assert_memory_equal(v[0].addr.addr, "\x0a\x00\x00\x0b", 4);
        assert_int_equal(v[0].addr.port, 7946);
        assert_memory_equal(v[0].pk, g_pk[0], 32);
        assert_string_equal(v[0].name, "pi-kitchen");
        assert_string_equal(v[0].addr_str, "10.0.0.11:7946");

        assert_string_equal(v[1].name, "pi-garage");
        assert_memory_equal(v[1].pk, g_pk[1], 32);
        assert_string_equal(v[1].addr_str, "10.0.0.12:7946");

        assert_int_equal(v[2].addr.family, 6);
        assert_int_equal(inet_pton(AF_INET6, "fd00::13", v6), 1);
        assert_memory_equal(v[2].addr.addr, v6, 16);
        assert_string_equal(v[2].addr_str, "[fd00::13]:7946");
        assert_string_equal(v[2].name, "pi-attic");

        assert_int_equal(v[3].addr.port, 1);
        assert_string_equal(v[3].name, "127.0.0.1:1"); /* default name */

        assert_string_equal(v[4].addr_str, "[::1]:65535");
        assert_string_equal(v[4].name, "node_4.b-x");

        assert_int_equal(v[5].addr.family, 4); /* IPv4 answer preferred */
        assert_memory_equal(v[5].addr.addr, "\x7f\x00\x00\x01", 4);
        assert_int_equal(v[5].addr.port, 9000);
        assert_memory_equal(v[5].pk, g_pk[5], 32);

        assert_int_equal(node_peers_find_pk(v, n, g_pk[2]), 2);
        assert_int_equal(node_peers_find_pk(v, n, g_pk[7]), -1);
        assert_int_equal(node_peers_find_name(v, n, "pi-garage"), 1);
        assert_int_equal(node_peers_find_name(v, n, "nobody"), -1);
        node_peers_free(v);

        /* empty and comment-only files: zero peers, no error */
        assert_int_equal(parse("# nobody yet\n\n", &v, &n, err, sizeof(err)),
                         0);
        assert_int_equal(n, 0);
        assert_null(v);
}

struct bad_case {
        const char *line; /* %s is replaced by a valid key */
        const char *want; /* substring of the error after "peers.txt:3: " */
};

static const struct bad_case bad_cases[] = {
    {"10.0.0.1:7946", "found 1 of 2-3 fields"},
    {"10.0.0.1:7946 %s name extra", "more than 3 fields"},
    {"10.0.0.1 %s", "bad address '10.0.0.1'"},
    {"10.0.0.1:0 %s", "bad address"},
    {"10.0.0.1:65536 %s", "bad address"},
    {"10.0.0.1:80x %s", "bad address"},
    {"10.0.0.1: %s", "bad address"},
    {"999.0.0.1:7946 %s", "bad address"},
    {"10.0.0:7946 %s", "bad address"},
    {"fd00::1:7946 %s", "bad address"},
    {"[fd00::1]7946 %s", "bad address"},
    {"[fd00::zz]:7946 %s", "bad address"},
    {"[]:7946 %s", "bad address"},
    {"host_name:7946 %s", "bad address"},
    {"10.0.0.1:7946 AAAA", "bad public key (expected 44 base64 chars)"},
    {"10.0.0.1:7946 %s=", "bad public key"},
    {"10.0.0.1:7946 !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!=",
     "bad public key"},
    {"10.0.0.1:7946 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
     "public key is not a valid Ed25519 point"},
    {"10.0.0.1:7946 %s bad/name", "bad name 'bad/name'"},
    {"10.0.0.1:7946 %s "
     "n234567890123456789012345678901234567890123456789012345678901234",
     "bad name"},
};

static void test_each_malformed_kind(void **state)
{
        char line[512], text[2048], err[256], want[300];
        struct node_peer *v;
        size_t n;

        for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
                snprintf(line, sizeof(line), bad_cases[i].line, g_key[6]);
                snprintf(text, sizeof(text),
                         "# header\n10.0.0.9:1 %s ok\n%s\n10.0.0.8:1 %s\n",
                         g_key[0], line, g_key[1]);
                err[0] = '\0';
                v = (void *)1;
                n = 7;
                int rc = parse(text, &v, &n, err, sizeof(err));
                if (rc != -EINVAL || strncmp(err, "peers.txt:3: ", 13) != 0 ||
                    strstr(err, bad_cases[i].want) == NULL)
                        print_error("case %zu '%s': rc %d err '%s'\n", i, line,
                                    rc, err);
                assert_int_equal(rc, -EINVAL);
                snprintf(want, sizeof(want), "peers.txt:3: ");
                assert_memory_equal(err, want, strlen(want));
                assert_non_null(strstr(err, bad_cases[i].want));
                assert_null(v);
                assert_int_equal(n, 0);
        }
}

static void test_exact_message(void **state)
{
        char text[512], err[256];
        struct node_peer *v;
        size_t n;

        snprintf(text, sizeof(text), "\n\n10.0.0.1:7946 abc pi\n");
        assert_int_equal(parse(text, &v, &n, err, sizeof(err)), -EINVAL);
        assert_string_equal(
            err, "peers.txt:3: bad public key (expected 44 base64 chars)");
}

static void test_duplicates(void **state)
{
        char text[2048], err[256];
        struct node_peer *v;
        size_t n;

        snprintf(text, sizeof(text),
                 "10.0.0.1:1 %s a\n# x\n10.0.0.2:1 %s b\n10.0.0.3:1 %s c\n",
                 g_key[0], g_key[1], g_key[0]);
        assert_int_equal(parse(text, &v, &n, err, sizeof(err)), -EINVAL);
        assert_string_equal(
            err, "peers.txt:4: duplicate public key (already on line 1)");

        snprintf(text, sizeof(text), "10.0.0.1:1 %s a\n10.0.0.2:1 %s a\n",
                 g_key[0], g_key[1]);
        assert_int_equal(parse(text, &v, &n, err, sizeof(err)), -EINVAL);
        assert_string_equal(err,
                            "peers.txt:2: duplicate name (already on line 1)");

        snprintf(text, sizeof(text), "10.0.0.1:1 %s a\n10.0.0.1:1 %s b\n",
                 g_key[0], g_key[1]);
        assert_int_equal(parse(text, &v, &n, err, sizeof(err)), -EINVAL);
        assert_string_equal(
            err, "peers.txt:2: duplicate address (already on line 1)");

        /* an explicit name equal to another peer's default name */
        snprintf(text, sizeof(text), "10.0.0.1:1 %s\n10.0.0.2:1 %s 10.0.0.1\n",
                 g_key[0], g_key[1]);
        assert_int_equal(parse(text, &v, &n, err, sizeof(err)), 0);
        node_peers_free(v);
        /* names cannot contain ':', so an explicit name never collides
         * with a default (address) name */
        snprintf(text, sizeof(text), "10.0.0.1:1 %s\n[::1]:2 %s 10.0.0.1:1\n",
                 g_key[0], g_key[1]);
        assert_int_equal(parse(text, &v, &n, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "peers.txt:2: bad name"));

        /* same IP, different port: allowed (several nodes on one host) */
        snprintf(text, sizeof(text), "127.0.0.1:1 %s\n127.0.0.1:2 %s\n",
                 g_key[0], g_key[1]);
        assert_int_equal(parse(text, &v, &n, err, sizeof(err)), 0);
        assert_int_equal(n, 2);
        node_peers_free(v);
}

static void test_limits(void **state)
{
        char *text = malloc(4096), err[256];
        struct node_peer *v;
        size_t n;

        assert_non_null(text);
        memset(text, ' ', 2000);
        text[2000] = '\0';
        assert_int_equal(parse(text, &v, &n, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, "peers.txt:1: line longer than 1024 bytes");
        memcpy(text, "# a\n\0b\n", 8);
        assert_int_equal(
            node_peers_parse(text, 7, "p", &v, &n, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, "p:2: NUL byte in line");
        free(text);
}

static void test_load_file(void **state)
{
        char path[] = "/tmp/gn-test-peers-XXXXXX", err[256];
        struct node_peer *v;
        size_t n;
        int fd = mkstemp(path);
        FILE *f;

        assert_true(fd >= 0);
        f = fdopen(fd, "w");
        fprintf(f, "127.0.0.1:7000 %s one\n127.0.0.1:7001 %s two\n", g_key[0],
                g_key[1]);
        fclose(f);
        assert_int_equal(node_peers_load(path, &v, &n, err, sizeof(err)), 0);
        assert_int_equal(n, 2);
        assert_string_equal(v[1].name, "two");
        assert_int_equal(v[1].addr.port, 7001);
        node_peers_free(v);
        unlink(path);
        assert_int_equal(node_peers_load(path, &v, &n, err, sizeof(err)),
                         -ENOENT);
        assert_non_null(strstr(err, path));
}

static void test_addr_helpers(void **state)
{
        struct gossip_addr a;
        char buf[64];

        assert_int_equal(node_addr_parse("192.168.1.20:7946", &a, 0), 0);
        assert_int_equal(node_addr_format(&a, buf, sizeof(buf)), 17);
        assert_string_equal(buf, "192.168.1.20:7946");
        assert_int_equal(node_addr_parse("[FD00:0::0:1]:80", &a, 0), 0);
        assert_int_equal(a.family, 6);
        assert_int_equal(node_addr_format(&a, buf, sizeof(buf)), 12);
        assert_string_equal(buf, "[fd00::1]:80");
        assert_int_equal(node_addr_format(&a, buf, 10), -ENOSPC);
        assert_string_equal(buf, "");
        a.family = 5;
        assert_int_equal(node_addr_format(&a, buf, sizeof(buf)), -EINVAL);
        /* without resolve, names are refused */
        assert_int_equal(node_addr_parse("localhost:1", &a, 0), -EINVAL);
        assert_int_equal(node_addr_parse("localhost:1", &a, 1), 0);
        assert_int_equal(node_addr_parse("localhost:0", &a, 1), -EINVAL);
        assert_int_equal(node_addr_parse("1.2.3.4:99999", &a, 0), -EINVAL);
        assert_int_equal(node_addr_parse("1.2.3.4", &a, 0), -EINVAL);
}

/* The advertised address (issue 30): --advertise, else the node's own
 * peers-file line, else --listen; never a wildcard. A node bound to
 * 0.0.0.0 that told 0.0.0.0 had every peer send to itself. */
static void test_advertised(void **state)
{
        struct gossip_addr any4, any6, line, lis, opt, out;
        char buf[64];

        (void)state;
        assert_int_equal(node_addr_parse("0.0.0.0:7955", &any4, 0), 0);
        assert_int_equal(node_addr_parse("[::]:7955", &any6, 0), 0);
        assert_int_equal(node_addr_parse("10.0.0.11:7955", &line, 0), 0);
        assert_int_equal(node_addr_parse("127.0.0.1:7001", &lis, 0), 0);
        assert_int_equal(node_addr_parse("192.0.2.7:9000", &opt, 0), 0);
        assert_false(gossip_addr_usable(&any4));
        assert_false(gossip_addr_usable(&any6));
        assert_true(gossip_addr_usable(&line));
        /* the guide's case: listen = 0.0.0.0:7955, the peers line wins */
        assert_int_equal(node_addr_advertised(NULL, &line, &any4, &out),
                         NODE_ADVERTISE_PEERS);
        node_addr_format(&out, buf, sizeof(buf));
        assert_string_equal(buf, "10.0.0.11:7955");
        /* the option wins over both */
        assert_int_equal(node_addr_advertised(&opt, &line, &lis, &out),
                         NODE_ADVERTISE_OPTION);
        node_addr_format(&out, buf, sizeof(buf));
        assert_string_equal(buf, "192.0.2.7:9000");
        /* no line: a concrete --listen is told as before */
        assert_int_equal(node_addr_advertised(NULL, NULL, &lis, &out),
                         NODE_ADVERTISE_LISTEN);
        node_addr_format(&out, buf, sizeof(buf));
        assert_string_equal(buf, "127.0.0.1:7001");
        /* a wildcard line is no better than none */
        assert_int_equal(node_addr_advertised(NULL, &any6, &lis, &out),
                         NODE_ADVERTISE_LISTEN);
        /* nothing usable, or a wildcard asked for: refused */
        assert_int_equal(node_addr_advertised(NULL, NULL, &any4, &out),
                         -EADDRNOTAVAIL);
        assert_int_equal(node_addr_advertised(NULL, &any4, &any6, &out),
                         -EADDRNOTAVAIL);
        assert_int_equal(node_addr_advertised(&any4, &line, &lis, &out),
                         -EINVAL);
        line.port = 0;
        assert_false(gossip_addr_usable(&line));
}

/* Random bytes and random mutations of a good file: the parser returns 0
 * with a consistent list, or -EINVAL with "peers.txt:<line>: " - never a
 * crash (ASan runs this too). */
static void test_garbage(void **state)
{
        /* mutations use no letters, so no host name (and no DNS query)
         * can appear in the address field next to a valid key */
        static const char alphabet[] = "0123456789.:[]# \t\n=+/_-";
        static const char noise[] = "0123456789.:[]# \t\nabAB=+/_-xX";
        char good[512], text[600], err[256];
        struct node_peer *v;
        size_t n, len;
        uint64_t s = g_seed ^ 0x5151;

        snprintf(good, sizeof(good), "10.0.0.1:7946 %s a\n[::1]:2 %s b\n",
                 g_key[0], g_key[1]);
        for (int iter = 0; iter < 3000; iter++) {
                if (iter % 2) {
                        len = strlen(good);
                        memcpy(text, good, len + 1);
                        for (int k = 0; k < 1 + (int)(gn_splitmix64(&s) % 4);
                             k++)
                                text[gn_splitmix64(&s) % len] =
                                    alphabet[gn_splitmix64(&s) %
                                             (sizeof(alphabet) - 1)];
                } else {
                        len = gn_splitmix64(&s) % 200;
                        for (size_t k = 0; k < len; k++)
                                text[k] = noise[gn_splitmix64(&s) %
                                                (sizeof(noise) - 1)];
                        text[len] = '\0';
                }
                err[0] = '\0';
                int rc = node_peers_parse(text, len, "peers.txt", &v, &n, err,
                                          sizeof(err));
                if (rc == 0) {
                        assert_true(n <= 2 * 100);
                        for (size_t i = 0; i < n; i++)
                                assert_true(v[i].name[0] != '\0');
                        node_peers_free(v);
                } else {
                        assert_int_equal(rc, -EINVAL);
                        assert_memory_equal(err, "peers.txt:", 10);
                }
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_good_file),
            cmocka_unit_test(test_each_malformed_kind),
            cmocka_unit_test(test_exact_message),
            cmocka_unit_test(test_duplicates),
            cmocka_unit_test(test_limits),
            cmocka_unit_test(test_load_file),
            cmocka_unit_test(test_addr_helpers),
            cmocka_unit_test(test_advertised),
            cmocka_unit_test(test_garbage),
        };

        if (node_key_init() < 0)
                return 1;
        g_seed = gn_test_seed("test_peers", 0x70656572ULL);
        make_keys();
        return cmocka_run_group_tests(tests, NULL, NULL);
}
