/*
 * test_gossipctl.c - gossipctl against a fake control server, and the
 * msgpack -> JSON writer on hostile input.
 *
 * The fake server is a thread in this process that speaks docs/control.md
 * (4-byte big-endian length + one msgpack map) and answers each command
 * with canned data; it records the last request so tests can check what
 * gossipctl sent. gossipctl itself runs as a real child process (its path
 * is argv[1]), and its stdout, stderr and exit status are checked exactly:
 * text tables, --json output, exit 2 when --status matches nothing, exit 1
 * with the documented message when no daemon listens.
 *
 * GN_SEED (printed) drives the random strings of the JSON escaping test.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <msgpack.h>

#include "test_proc.h"
#include "test_tmpdir.h"
#include "test_seed.h"
#include "base/gn_endian.h"
#include "ctlc.h"

static const char *g_ctl_bin;
static uint64_t g_seed;
static char g_dir[64];
static char g_sock[100];

/* ---- the fake daemon --------------------------------------------------- */

struct fake {
        int lfd;
        pthread_t th;
        pthread_mutex_t mu;
        char last_cmd[64];
        char last_args[256]; /* "k=v;" pairs of string args */
        int bad_reply;       /* answer with a non-map */
        unsigned requests;
};

static struct fake g_fake;

static void pk_str(msgpack_packer *pk, const char *s)
{
        msgpack_pack_str(pk, strlen(s));
        msgpack_pack_str_body(pk, s, strlen(s));
}

static void pk_kv_str(msgpack_packer *pk, const char *k, const char *v)
{
        pk_str(pk, k);
        pk_str(pk, v);
}

static void pk_kv_u(msgpack_packer *pk, const char *k, uint64_t v)
{
        pk_str(pk, k);
        msgpack_pack_uint64(pk, v);
}

static void pk_kv_f(msgpack_packer *pk, const char *k, double v)
{
        pk_str(pk, k);
        msgpack_pack_double(pk, v);
}

static void pk_kv_nil(msgpack_packer *pk, const char *k)
{
        pk_str(pk, k);
        msgpack_pack_nil(pk);
}

#define KEY_A "u3mN8hJ0M1Tq2l0cE3l6nQp0ZrZy6n9y8gqfS3mJr0E="
#define KEY_B "9fQeA1d0u0c5Z3lT1N3jB8x4QKk2m7xq0aR6YbQk3s4="

static void pack_member(msgpack_packer *pk, const char *name, const char *addr,
                        int self, const char *state, uint64_t inc, double rtt,
                        uint64_t step, double heard, const char *version)
{
        msgpack_pack_map(pk, version ? 10 : 9); /* NULL: an older daemon */
        pk_kv_str(pk, "name", name);
        pk_kv_str(pk, "addr", addr);
        pk_kv_str(pk, "key", self ? KEY_A : KEY_B);
        pk_str(pk, "self");
        self ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        pk_kv_str(pk, "state", state);
        pk_kv_u(pk, "incarnation", inc);
        if (rtt < 0)
                pk_kv_nil(pk, "rtt_ms");
        else
                pk_kv_f(pk, "rtt_ms", rtt);
        pk_kv_u(pk, "step", step);
        if (heard < 0)
                pk_kv_nil(pk, "last_heard_ms");
        else
                pk_kv_u(pk, "last_heard_ms", (uint64_t)heard);
        if (version)
                pk_kv_str(pk, "version", version);
}

static void pack_members(msgpack_packer *pk)
{
        msgpack_pack_array(pk, 4);
        pack_member(pk, "pi-kitchen", "10.0.0.11:7946", 1, "alive", 7, -1, 120,
                    -1, "0.2.0");
        pack_member(pk, "pi-garage", "10.0.0.12:7946", 0, "alive", 3, 1.25, 121,
                    200, "0.1.0");
        pack_member(pk, "pi-attic", "[fd00::13]:7946", 0, "suspect", 1, -1, 97,
                    4800, ""); /* a peer that did not tell its version */
        pack_member(pk, "pi-cellar", "10.0.0.14:7946", 0, "dead", 12, 40.5, 5,
                    125000, NULL);
}

static void pack_stats(msgpack_packer *pk)
{
        msgpack_pack_map(pk, 2);
        pk_str(pk, "node");
        msgpack_pack_map(pk, 8);
        pk_kv_str(pk, "name", "pi-kitchen");
        pk_kv_u(pk, "step", 120);
        pk_kv_f(pk, "loss", 0.48);
        pk_kv_f(pk, "accuracy", 0.861);
        pk_kv_u(pk, "bytes_in", 1536);
        pk_kv_u(pk, "grads_merged", 100);
        pk_str(pk, "rejects");
        msgpack_pack_map(pk, 2);
        pk_kv_u(pk, "bad_sig", 2);
        pk_kv_u(pk, "replay", 1);
        pk_kv_str(pk, "note", "q\"b\\s\n\x01\xc3\xa9\xff");
        pk_str(pk, "peers");
        msgpack_pack_array(pk, 1);
        msgpack_pack_map(pk, 5);
        pk_kv_str(pk, "name", "pi-garage");
        pk_kv_str(pk, "state", "alive");
        pk_kv_u(pk, "bytes_out", 3 << 20);
        pk_str(pk, "rejects");
        msgpack_pack_map(pk, 1);
        pk_kv_u(pk, "replay", 4);
        pk_str(pk, "goodput_Bps");
        msgpack_pack_double(pk, 1.2e6);
}

static void pack_train(msgpack_packer *pk)
{
        msgpack_pack_map(pk, 29);
        pk_kv_str(pk, "state", "training");
        pk_kv_u(pk, "step", 120);
        pk_kv_u(pk, "epoch", 1);
        pk_kv_u(pk, "samples", 12250);
        pk_kv_u(pk, "extra_batches", 10);
        pk_kv_u(pk, "steps_skipped", 16);
        pk_kv_u(pk, "refetches", 1);
        pk_kv_f(pk, "pace_ratio", 4.25);
        pk_kv_f(pk, "step_pace_ms", 41.0);
        pk_kv_f(pk, "step_max_ms", 230.5);
        pk_kv_u(pk, "step_max_at", 1200);
        pk_kv_f(pk, "step_max_wait_ms", 190.0);
        pk_kv_u(pk, "steps_slow", 3);
        pk_kv_f(pk, "slow_ms", 612.0);
        pk_kv_f(pk, "slow_wait_ms", 480.0);
        pk_kv_u(pk, "rollbacks_nonfinite", 2);
        pk_kv_u(pk, "rollbacks_loss", 1);
        pk_kv_u(pk, "rollbacks_chance", 3);
        pk_kv_u(pk, "rollbacks_norm", 4);
        pk_kv_u(pk, "rollbacks_accuracy", 5);
        pk_kv_u(pk, "health_snapshot_step", 100);
        pk_kv_f(pk, "loss", 0.5);
        pk_kv_f(pk, "train_acc", 0.875);
        pk_kv_nil(pk, "test_acc");
        pk_kv_f(pk, "samples_per_s", 1900.4);
        pk_str(pk, "lr");
        msgpack_pack_float(pk, 0.05f);
        pk_kv_str(pk, "model", "784-512-10");
        pk_kv_str(pk, "exchange", "degraded: 98% of received slices too old");
        pk_str(pk, "running");
        msgpack_pack_true(pk);
}

/* One row of `certs`. */
static void pack_cert_row(msgpack_packer *pk, const char *name,
                          const char *serial, uint64_t not_after,
                          const char *status, int member, uint64_t refused)
{
        msgpack_pack_map(pk, 7);
        pk_kv_str(pk, "name", name);
        pk_kv_str(pk, "key", KEY_B);
        pk_kv_str(pk, "serial", serial);
        pk_kv_u(pk, "not_after", not_after);
        pk_kv_str(pk, "status", status);
        pk_str(pk, "member");
        member ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        pk_kv_u(pk, "refused", refused);
}

/* certs: ours, a member's, a member kept by the peers file although its
 * certificate is revoked, one dropped; a list of five serials. */
static void pack_certs(msgpack_packer *pk)
{
        static const char *serials[5] = {"00000000000000c3", "00000000000000c4",
                                         "00000000000000c5", "00000000000000c6",
                                         "00000000000000c7"};

        msgpack_pack_map(pk, 2);
        pk_str(pk, "crl");
        msgpack_pack_map(pk, 3);
        pk_kv_u(pk, "seq", 2);
        pk_kv_u(pk, "issued_at", 1800000000);
        pk_str(pk, "serials");
        msgpack_pack_array(pk, 5);
        for (int i = 0; i < 5; i++)
                pk_str(pk, serials[i]);
        pk_str(pk, "certs");
        msgpack_pack_array(pk, 4);
        pack_cert_row(pk, "pi-kitchen", "00000000000000c1", 1830297600, "ok", 1,
                      0);
        pack_cert_row(pk, "pi-garage", "00000000000000c2", 1830297600, "ok", 1,
                      0);
        pack_cert_row(pk, "pi-shed", "00000000000000c4", 1830297600, "revoked",
                      1, 0);
        pack_cert_row(pk, "pi-attic", "00000000000000c3", 1830297600, "revoked",
                      0, 12);
}

/* The string value of key in a request's args, or NULL. */
static const char *arg_of(const msgpack_object *args, const char *key,
                          char *buf, size_t len)
{
        const msgpack_object *v = ctlc_get(args, key);

        if (v == NULL || v->type != MSGPACK_OBJECT_STR)
                return NULL;
        return ctlc_str(v, buf, len);
}

/* Pack the response to cmd/args. */
static void respond(msgpack_packer *pk, const char *cmd,
                    const msgpack_object *args)
{
        char a[128];

        if (g_fake.bad_reply) {
                msgpack_pack_array(pk, 0);
                return;
        }
        if (strcmp(cmd, "force-leave") == 0 &&
            arg_of(args, "name", a, sizeof(a)) && strcmp(a, "nosuch") == 0) {
                msgpack_pack_map(pk, 2);
                pk_str(pk, "ok");
                msgpack_pack_false(pk);
                pk_kv_str(pk, "error", "no such member: nosuch");
                return;
        }
        if (strcmp(cmd, "join") == 0 && arg_of(args, "addr", a, sizeof(a)) &&
            strcmp(a, "bad") == 0) {
                msgpack_pack_map(pk, 2);
                pk_str(pk, "ok");
                msgpack_pack_false(pk);
                pk_kv_str(pk, "error", "join: bad address: bad");
                return;
        }
        msgpack_pack_map(pk, 2);
        pk_str(pk, "ok");
        msgpack_pack_true(pk);
        pk_str(pk, "data");
        if (strcmp(cmd, "members") == 0) {
                pack_members(pk);
        } else if (strcmp(cmd, "stats") == 0) {
                pack_stats(pk);
        } else if (strcmp(cmd, "train") == 0) {
                pack_train(pk);
        } else if (strcmp(cmd, "certs") == 0) {
                pack_certs(pk);
        } else if (strcmp(cmd, "join") == 0) {
                msgpack_pack_map(pk, 2);
                pk_str(pk, "joined");
                msgpack_pack_true(pk);
                pk_kv_u(pk, "alive", 3);
        } else if (strcmp(cmd, "leave") == 0) {
                msgpack_pack_map(pk, 1);
                pk_str(pk, "leaving");
                msgpack_pack_true(pk);
        } else if (strcmp(cmd, "force-leave") == 0) {
                msgpack_pack_map(pk, 2);
                pk_kv_str(pk, "name",
                          arg_of(args, "name", a, sizeof(a)) ? a : "by-key");
                pk_kv_str(pk, "state", "left");
        } else {
                msgpack_pack_nil(pk);
        }
}

static int read_n(int fd, void *p, size_t n)
{
        char *c = p;

        while (n > 0) {
                ssize_t r = read(fd, c, n);
                if (r <= 0)
                        return -1;
                c += r;
                n -= (size_t)r;
        }
        return 0;
}

/* Serve one request on fd; -1 when the client is gone. */
static int serve_one(int fd)
{
        uint8_t hdr[4];
        char buf[4096], cmd[64] = "", args_s[256] = "";
        msgpack_unpacked u;
        msgpack_sbuffer sb;
        msgpack_packer pk;
        size_t off = 0;
        uint32_t len;

        if (read_n(fd, hdr, 4) < 0)
                return -1;
        len = gn_be32_get(hdr);
        if (len == 0 || len > sizeof(buf) || read_n(fd, buf, len) < 0)
                return -1;
        msgpack_unpacked_init(&u);
        if (msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS) {
                msgpack_unpacked_destroy(&u);
                return -1;
        }
        ctlc_str(ctlc_get(&u.data, "cmd"), cmd, sizeof(cmd));
        const msgpack_object *args = ctlc_get(&u.data, "args");
        for (uint32_t i = 0;
             args && args->type == MSGPACK_OBJECT_MAP && i < args->via.map.size;
             i++) {
                char k[64], v[128];
                size_t l = strlen(args_s);
                snprintf(args_s + l, sizeof(args_s) - l, "%s=%s;",
                         ctlc_str(&args->via.map.ptr[i].key, k, sizeof(k)),
                         ctlc_str(&args->via.map.ptr[i].val, v, sizeof(v)));
        }
        pthread_mutex_lock(&g_fake.mu);
        snprintf(g_fake.last_cmd, sizeof(g_fake.last_cmd), "%s", cmd);
        snprintf(g_fake.last_args, sizeof(g_fake.last_args), "%s", args_s);
        g_fake.requests++;
        pthread_mutex_unlock(&g_fake.mu);
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        respond(&pk, cmd, args);
        msgpack_unpacked_destroy(&u);
        gn_be32_put(hdr, (uint32_t)sb.size);
        int rc = (write(fd, hdr, 4) == 4 &&
                  write(fd, sb.data, sb.size) == (ssize_t)sb.size)
                     ? 0
                     : -1;
        msgpack_sbuffer_destroy(&sb);
        return rc;
}

static void *fake_main(void *arg)
{
        for (;;) {
                int fd = accept(g_fake.lfd, NULL, NULL);
                if (fd < 0)
                        return NULL; /* listener closed: test over */
                while (serve_one(fd) == 0)
                        ;
                close(fd);
        }
}

static int fake_start(void)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        snprintf(g_sock, sizeof(g_sock), "%s/ctl.sock", g_dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", g_sock);
        g_fake.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (g_fake.lfd < 0 ||
            bind(g_fake.lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            listen(g_fake.lfd, 8) < 0)
                return -1;
        pthread_mutex_init(&g_fake.mu, NULL);
        return pthread_create(&g_fake.th, NULL, fake_main, NULL);
}

static void fake_stop(void)
{
        shutdown(g_fake.lfd, SHUT_RDWR);
        close(g_fake.lfd);
        pthread_join(g_fake.th, NULL);
        unlink(g_sock);
}

/* ---- running gossipctl ------------------------------------------------- */

/* Run gossipctl with the NULL-terminated argument list (socket first). */
static void ctl(struct gn_test_proc *r, const char *sock, ...)
{
        const char *argv[24] = {g_ctl_bin, "--socket", sock};
        int argc = 3;
        va_list ap;

        va_start(ap, sock);
        while (argc < 23 && (argv[argc] = va_arg(ap, const char *)) != NULL)
                argc++;
        va_end(ap);
        argv[argc] = NULL;
        assert_int_equal(gn_test_proc_run(argv, r), 0);
}

static void last_request(char *cmd, size_t cl, char *args, size_t al)
{
        pthread_mutex_lock(&g_fake.mu);
        snprintf(cmd, cl, "%s", g_fake.last_cmd);
        snprintf(args, al, "%s", g_fake.last_args);
        pthread_mutex_unlock(&g_fake.mu);
}

/* ---- tests ------------------------------------------------------------- */

static void test_members_text(void **state)
{
        struct gn_test_proc r;

        ctl(&r, g_sock, "members", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        assert_string_equal(
            r.out, "NAME        ADDR             STATE    RTT    GOODPUT  "
                   "INCARNATION  STEP  LAST HEARD  VERSION\n"
                   "pi-kitchen  10.0.0.11:7946   alive    -      -        "
                   "7            120   self        0.2.0\n"
                   "pi-garage   10.0.0.12:7946   alive    1.2ms  -        "
                   "3            121   200ms       0.1.0\n"
                   "pi-attic    [fd00::13]:7946  suspect  -      -        "
                   "1            97    4.8s        -\n"
                   "pi-cellar   10.0.0.14:7946   dead     40ms   -        "
                   "12           5     2m          -\n"
                   /* the daemon's train reply says degraded: the table
                    * alone would look healthy */
                   "exchange degraded: 98% of received slices too old: "
                   "this node is training mostly alone (gossipctl train)\n");
}

static void test_members_json(void **state)
{
        struct gn_test_proc r;

        ctl(&r, g_sock, "members", "--json", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(
            r.out, "[{\"name\":\"pi-kitchen\",\"addr\":\"10.0.0.11:7946\","
                   "\"key\":\"" KEY_A "\",\"self\":true,\"state\":\"alive\","
                   "\"incarnation\":7,\"rtt_ms\":null,\"step\":120,"
                   "\"last_heard_ms\":null,\"version\":\"0.2.0\"},"
                   "{\"name\":\"pi-garage\",\"addr\":\"10.0.0.12:7946\","
                   "\"key\":\"" KEY_B "\",\"self\":false,\"state\":\"alive\","
                   "\"incarnation\":3,\"rtt_ms\":1.25,\"step\":121,"
                   "\"last_heard_ms\":200,\"version\":\"0.1.0\"},"
                   "{\"name\":\"pi-attic\",\"addr\":\"[fd00::13]:7946\","
                   "\"key\":\"" KEY_B "\",\"self\":false,\"state\":\"suspect\","
                   "\"incarnation\":1,\"rtt_ms\":null,\"step\":97,"
                   "\"last_heard_ms\":4800,\"version\":\"\"},"
                   "{\"name\":\"pi-cellar\",\"addr\":\"10.0.0.14:7946\","
                   "\"key\":\"" KEY_B "\",\"self\":false,\"state\":\"dead\","
                   "\"incarnation\":12,\"rtt_ms\":40.5,\"step\":5,"
                   "\"last_heard_ms\":125000}]\n");
}

static int count_lines(const char *s)
{
        int n = 0;

        for (; *s; s++)
                n += *s == '\n';
        return n;
}

static void test_members_status(void **state)
{
        struct gn_test_proc r;

        ctl(&r, g_sock, "members", "--status", "dead", NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "pi-cellar"));
        assert_null(strstr(r.out, "pi-garage"));
        assert_int_equal(count_lines(r.out), 2); /* header + one row */

        ctl(&r, g_sock, "members", "--status=alive|suspect", "--json", NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "pi-attic"));
        assert_non_null(strstr(r.out, "pi-kitchen"));
        assert_null(strstr(r.out, "pi-cellar"));

        /* anchored: "ali" is not a state */
        ctl(&r, g_sock, "members", "--status", "ali", NULL);
        assert_int_equal(r.status, 3);
        assert_string_equal(r.out, "");

        ctl(&r, g_sock, "members", "--status", "nosuch", NULL);
        assert_int_equal(r.status, 3);
        assert_string_equal(r.out, "");
        ctl(&r, g_sock, "members", "--status", "nosuch", "--json", NULL);
        assert_int_equal(r.status, 3);
        assert_string_equal(r.out, "[]\n");

        ctl(&r, g_sock, "members", "--status", "(", NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "bad regex"));
}

static void test_no_daemon(void **state)
{
        struct gn_test_proc r;
        char path[100], want[400];
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd;

        snprintf(path, sizeof(path), "%s/none.sock", g_dir);
        ctl(&r, path, "members", NULL);
        assert_int_equal(r.status, 1);
        snprintf(want, sizeof(want),
                 "gossipctl: no gossipnode at %s (no such socket)\n", path);
        assert_string_equal(r.err, want);
        assert_string_equal(r.out, "");

        /* a missing directory is named as such */
        snprintf(path, sizeof(path), "%s/nodir/ctl.sock", g_dir);
        ctl(&r, path, "members", NULL);
        assert_int_equal(r.status, 1);
        snprintf(want, sizeof(want),
                 "gossipctl: no gossipnode at %s (no such directory)\n", path);
        assert_string_equal(r.err, want);

        /* a stale socket file: bound, never listening */
        snprintf(path, sizeof(path), "%s/stale.sock", g_dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        close(fd);
        ctl(&r, path, "stats", "--json", NULL);
        assert_int_equal(r.status, 1);
        snprintf(want, sizeof(want),
                 "gossipctl: no gossipnode at %s (connection refused)\n", path);
        assert_string_equal(r.err, want);
        unlink(path);
}

static void test_stats(void **state)
{
        struct gn_test_proc r;

        ctl(&r, g_sock, "stats", NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "node       pi-kitchen (key -)\n"));
        assert_non_null(strstr(r.out, "step       120 (epoch -)\n"));
        assert_non_null(strstr(
            r.out, "training   loss 0.4800, accuracy 86.1%, - samples/s\n"));
        assert_non_null(
            strstr(r.out, "traffic    in 1.5K (- msgs), out - (- msgs)\n"));
        assert_non_null(strstr(r.out, "rejects    bad_sig 2, replay 1\n"));
        assert_non_null(strstr(r.out, "net        none\n"));
        assert_non_null(strstr(r.out, "NAME       STATE  IN  OUT   MSGS IN"));
        assert_non_null(strstr(r.out, "pi-garage  alive  -   3.0M  -"));
        assert_non_null(strstr(r.out, "QUEUED  GOODPUT\n"));
        assert_non_null(strstr(r.out, "  -       9.6Mbit/s\n"));

        ctl(&r, g_sock, "stats", "--json", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(
            r.out, "{\"node\":{\"name\":\"pi-kitchen\",\"step\":120,"
                   "\"loss\":0.48,\"accuracy\":0.861,\"bytes_in\":1536,"
                   "\"grads_merged\":100,\"rejects\":{\"bad_sig\":2,"
                   "\"replay\":1},\"note\":\"q\\\"b\\\\s\\n\\u0001\xc3\xa9"
                   "\\ufffd\"},\"peers\":[{\"name\":\"pi-garage\","
                   "\"state\":\"alive\",\"bytes_out\":3145728,"
                   "\"rejects\":{\"replay\":4},\"goodput_Bps\":1200000.0}]}\n");
}

static void test_certs(void **state)
{
        struct gn_test_proc r;
        char cmd[64], args[256];

        ctl(&r, g_sock, "certs", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        last_request(cmd, sizeof(cmd), args, sizeof(args));
        assert_string_equal(cmd, "certs");
        assert_string_equal(
            r.out,
            "NAME                     SERIAL           NOT AFTER (UTC)      "
            "STATUS        MEMBER\n"
            "pi-kitchen               00000000000000c1 2028-01-01 00:00:00  "
            "ok            yes\n"
            "pi-garage                00000000000000c2 2028-01-01 00:00:00  "
            "ok            yes\n"
            "pi-shed                  00000000000000c4 2028-01-01 00:00:00  "
            "revoked       yes\n"
            "pi-attic                 00000000000000c3 2028-01-01 00:00:00  "
            "revoked       no, dropped (12 frames refused since)\n"
            "revocation list: sequence 2, issued 2027-01-15 08:00:00 UTC, 5 "
            "serials\n"
            "  00000000000000c3 00000000000000c4 00000000000000c5 "
            "00000000000000c6\n"
            "  00000000000000c7\n");
        ctl(&r, g_sock, "certs", "--json", NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "{\"crl\":{\"seq\":2,\"issued_at\":"
                                      "1800000000,\"serials\":["
                                      "\"00000000000000c3\","));
        assert_non_null(strstr(r.out, "\"status\":\"revoked\",\"member\":"
                                      "false,\"refused\":12}]}\n"));
}

static void test_train(void **state)
{
        struct gn_test_proc r;

        ctl(&r, g_sock, "train", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, "state      training\n"
                                   "model      784-512-10\n"
                                   "step       120\n"
                                   "epoch      1\n"
                                   "loss       0.5000\n"
                                   "train acc  87.5%\n"
                                   "test acc   -\n"
                                   "samples/s  1900\n"
                                   "samples    12250\n"
                                   "extra      10\n"
                                   "skipped    16 (peer states taken when "
                                   "far behind: 1; steps passed per step "
                                   "trained: 4.25)\n"
                                   "steps      pace 41.0 ms, longest 230.5 "
                                   "ms at step 1200 (190.0 ms waiting), 3 "
                                   "slow (over 2x the pace): 612 ms, 480 "
                                   "ms waiting\n"
                                   "lr         0.05\n"
                                   "rollbacks  2 non-finite, 1 loss "
                                   "explosion, 3 worse than chance, 4 "
                                   "parameter norm, 5 accuracy drop (last "
                                   "good: step 100)\n"
                                   "exchange   degraded: 98% of received "
                                   "slices too old\n"
                                   "running    yes\n");
        ctl(&r, g_sock, "train", "--json", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out,
                            "{\"state\":\"training\",\"step\":120,"
                            "\"epoch\":1,\"samples\":12250,"
                            "\"extra_batches\":10,\"steps_skipped\":16,"
                            "\"refetches\":1,\"pace_ratio\":4.25,"
                            "\"step_pace_ms\":41.0,"
                            "\"step_max_ms\":230.5,\"step_max_at\":1200,"
                            "\"step_max_wait_ms\":190.0,\"steps_slow\":3,"
                            "\"slow_ms\":612.0,\"slow_wait_ms\":480.0,"
                            "\"rollbacks_nonfinite\":2,"
                            "\"rollbacks_loss\":1,\"rollbacks_chance\":3,"
                            "\"rollbacks_norm\":4,\"rollbacks_accuracy\":5,"
                            "\"health_snapshot_step\":100,"
                            "\"loss\":0.5,"
                            "\"train_acc\":0.875,\"test_acc\":null,"
                            "\"samples_per_s\":1900.4,\"lr\":0.05,"
                            "\"model\":\"784-512-10\",\"exchange\":"
                            "\"degraded: 98% of received slices too old\","
                            "\"running\":true}\n");
}

static void test_join_leave_force(void **state)
{
        struct gn_test_proc r;
        char cmd[64], args[256];

        ctl(&r, g_sock, "join", "10.0.0.12:7946", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, "join sent (3 alive)\n");
        last_request(cmd, sizeof(cmd), args, sizeof(args));
        assert_string_equal(cmd, "join");
        assert_string_equal(args, "addr=10.0.0.12:7946;");

        /* an error that already names the command is not prefixed twice */
        ctl(&r, g_sock, "join", "bad", NULL);
        assert_int_equal(r.status, 1);
        assert_string_equal(r.err, "gossipctl: join: bad address: bad\n");

        ctl(&r, g_sock, "leave", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, "leaving the cluster\n");
        last_request(cmd, sizeof(cmd), args, sizeof(args));
        assert_string_equal(cmd, "leave");
        assert_string_equal(args, "");

        ctl(&r, g_sock, "force-leave", "pi-attic", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, "pi-attic: left\n");
        last_request(cmd, sizeof(cmd), args, sizeof(args));
        assert_string_equal(args, "name=pi-attic;");

        ctl(&r, g_sock, "force-leave", KEY_B, "--json", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out,
                            "{\"name\":\"by-key\",\"state\":\"left\"}\n");
        last_request(cmd, sizeof(cmd), args, sizeof(args));
        assert_string_equal(args, "key=" KEY_B ";");

        ctl(&r, g_sock, "force-leave", "nosuch", NULL);
        assert_int_equal(r.status, 1);
        assert_string_equal(r.out, "");
        assert_string_equal(r.err,
                            "gossipctl: force-leave: no such member: nosuch\n");
}

static void test_usage_errors(void **state)
{
        struct gn_test_proc r;

        ctl(&r, g_sock, "join", NULL);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "join needs exactly one argument"));
        ctl(&r, g_sock, "stats", "--status", "dead", NULL);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "--status only applies to members"));
        ctl(&r, g_sock, "frobnicate", NULL);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "unknown command 'frobnicate'"));
        ctl(&r, g_sock, "--version", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, "gossipctl " GN_VERSION "\n");
        ctl(&r, g_sock, "--help", NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "usage: gossipctl"));
}

static void test_watch(void **state)
{
        struct gn_test_proc r;
        unsigned before = g_fake.requests;
        const char *p;
        int headers = 0;

        ctl(&r, g_sock, "watch", "--interval", "0.05", "--count", "3", NULL);
        assert_int_equal(r.status, 0);
        /* stdout is a pipe: no screen codes, one header per refresh */
        assert_null(strchr(r.out, '\033'));
        for (p = r.out; (p = strstr(p, "gossipctl watch ")) != NULL; p++)
                headers++;
        assert_int_equal(headers, 3);
        assert_non_null(strstr(r.out, "step 120  epoch 1  loss 0.5000  "
                                      "train acc 87.5%  test acc -  1900 "
                                      "samples/s"));
        assert_non_null(strstr(r.out, "pi-cellar   10.0.0.14:7946"));
        pthread_mutex_lock(&g_fake.mu);
        assert_int_equal(g_fake.requests - before, 6); /* train + members */
        pthread_mutex_unlock(&g_fake.mu);
}

static void test_malformed_reply(void **state)
{
        struct gn_test_proc r;

        g_fake.bad_reply = 1;
        ctl(&r, g_sock, "train", NULL);
        g_fake.bad_reply = 0;
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "malformed response"));
}

/* ---- the JSON writer directly ------------------------------------------ */

static char *to_json(const msgpack_sbuffer *sb)
{
        msgpack_unpacked u;
        size_t off = 0, len = 0;
        char *text = NULL;
        FILE *f = open_memstream(&text, &len);

        msgpack_unpacked_init(&u);
        assert_int_equal(msgpack_unpack_next(&u, sb->data, sb->size, &off),
                         MSGPACK_UNPACK_SUCCESS);
        assert_int_equal(ctlc_json_write(f, &u.data), 0);
        fclose(f);
        msgpack_unpacked_destroy(&u);
        return text;
}

static void test_json_values(void **state)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;
        char *j;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_array(&pk, 18);
        msgpack_pack_float(&pk, 0.1f);
        msgpack_pack_double(&pk, 0.1);
        msgpack_pack_double(&pk, 1e300);
        msgpack_pack_double(&pk, 40.0);
        msgpack_pack_double(&pk, 1e-5);
        msgpack_pack_double(&pk, -0.0);
        msgpack_pack_double(&pk, NAN);
        msgpack_pack_double(&pk, -INFINITY);
        msgpack_pack_uint64(&pk, UINT64_MAX);
        msgpack_pack_int64(&pk, INT64_MIN);
        msgpack_pack_bin(&pk, 3);
        msgpack_pack_bin_body(&pk, "\x00\xff\x10", 3);
        msgpack_pack_ext(&pk, 2, 5);
        msgpack_pack_ext_body(&pk, "ab", 2);
        msgpack_pack_map(&pk, 3);
        msgpack_pack_int(&pk, -3);
        msgpack_pack_nil(&pk);
        msgpack_pack_true(&pk);
        msgpack_pack_false(&pk);
        pk_str(&pk, "k\"");
        msgpack_pack_array(&pk, 0);
        /* surrogate (ED A0 80), overlong (C0 AF), 4-byte U+1F600, truncated */
        msgpack_pack_str(&pk, 13);
        msgpack_pack_str_body(&pk,
                              "\xed\xa0\x80\xc0\xaf\xf0\x9f\x98\x80"
                              "a\xe2\x82",
                              12);
        msgpack_pack_str_body(&pk, "\x7f", 1);
        pk_str(&pk, "\b\f\r\t/");
        msgpack_pack_str(&pk, 3);
        msgpack_pack_str_body(&pk, "a\0b", 3);
        msgpack_pack_nil(&pk);
        msgpack_pack_map(&pk, 0);
        j = to_json(&sb);
        assert_string_equal(
            j, "[0.1,0.1,1e+300,40.0,1e-05,-0.0,null,null,18446744073709551615,"
               "-9223372036854775808,\"AP8Q\",{\"ext\":5,\"data\":"
               "\"YWI=\"},{\"-3\":null,\"true\":false,\"k\\\"\":[]},"
               "\"\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\xf0\x9f\x98\x80"
               "a\\ufffd\\ufffd\x7f\",\"\\u0008\\u000c\\r\\t/\","
               "\"a\\u0000b\",null,{}]");
        free(j);
        msgpack_sbuffer_destroy(&sb);
}

/* Random byte strings: the output is a quoted string with no raw control
 * byte and no unescaped quote (a JSON parser would accept it). */
static void test_json_random_strings(void **state)
{
        uint64_t s = g_seed;
        char raw[64];

        for (int iter = 0; iter < 2000; iter++) {
                msgpack_sbuffer sb;
                msgpack_packer pk;
                size_t n;
                char *j;

                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                n = (size_t)(s >> 58);
                for (size_t i = 0; i < n; i++) {
                        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                        raw[i] = (char)(s >> 56);
                }
                msgpack_sbuffer_init(&sb);
                msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
                msgpack_pack_str(&pk, n);
                msgpack_pack_str_body(&pk, raw, n);
                j = to_json(&sb);
                size_t len = strlen(j);
                assert_true(len >= 2 && j[0] == '"' && j[len - 1] == '"');
                for (size_t i = 1; i + 1 < len; i++) {
                        assert_true((unsigned char)j[i] >= 0x20);
                        if (j[i] == '\\') {
                                assert_non_null(strchr("\"\\nrtu", j[i + 1]));
                                i++;
                        } else {
                                assert_true(j[i] != '"');
                        }
                }
                free(j);
                msgpack_sbuffer_destroy(&sb);
        }
}

static void test_human(void **state)
{
        char b[32];

        assert_string_equal(ctlc_human_bytes(0, b, sizeof(b)), "0B");
        assert_string_equal(ctlc_human_bytes(1023, b, sizeof(b)), "1023B");
        assert_string_equal(ctlc_human_bytes(1536, b, sizeof(b)), "1.5K");
        assert_string_equal(ctlc_human_bytes(3 << 20, b, sizeof(b)), "3.0M");
        assert_string_equal(ctlc_human_ms(0.25, 1, b, sizeof(b)), "0.2ms");
        assert_string_equal(ctlc_human_ms(999, 1, b, sizeof(b)), "999ms");
        assert_string_equal(ctlc_human_ms(4800, 1, b, sizeof(b)), "4.8s");
        assert_string_equal(ctlc_human_ms(7200e3, 1, b, sizeof(b)), "2h");
        assert_string_equal(ctlc_human_ms(5, 0, b, sizeof(b)), "-");
}

static int setup(void **state)
{
        if (gn_test_tmpdir(g_dir, sizeof(g_dir), "ctl") != 0)
                return -1;
        return fake_start();
}

static int teardown(void **state)
{
        fake_stop();
        return rmdir(g_dir);
}

int main(int argc, char **argv)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_members_text),
            cmocka_unit_test(test_members_json),
            cmocka_unit_test(test_members_status),
            cmocka_unit_test(test_no_daemon),
            cmocka_unit_test(test_stats),
            cmocka_unit_test(test_certs),
            cmocka_unit_test(test_train),
            cmocka_unit_test(test_join_leave_force),
            cmocka_unit_test(test_usage_errors),
            cmocka_unit_test(test_watch),
            cmocka_unit_test(test_malformed_reply),
            cmocka_unit_test(test_json_values),
            cmocka_unit_test(test_json_random_strings),
            cmocka_unit_test(test_human),
        };

        if (argc < 2) {
                fprintf(stderr, "usage: %s PATH-TO-gossipctl\n", argv[0]);
                return 1;
        }
        g_ctl_bin = argv[1];
        g_seed = gn_test_seed("test_gossipctl", 0x63746cULL);
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, setup, teardown);
}
