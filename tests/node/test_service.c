/*
 * test_service.c - what gossipnode does as a system service: the config
 * file (node/config/conffile.c: values, the command line winning, every kind of
 * bad line named by its number), systemd's notify datagrams and watchdog
 * policy (node/service/sdnotify.c, against a real AF_UNIX socket), journald
 * priority prefixes, and the event log reopened after logrotate moved it.
 */
#define _DEFAULT_SOURCE 1 /* mkdtemp, struct sockaddr_un */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/conffile.h"
#include "service/evlog.h"
#include "config/options.h"
#include "service/sdnotify.h"

static char g_dir[64];
/* every file the tests make in g_dir, removed at the end */
static const char *g_files[] = {"g.conf", "notify", "log.txt", "ev.jsonl",
                                "ev.1"};

static const char *tmp_path(const char *name)
{
        static char p[4][128];
        static int i;

        i = (i + 1) % 4;
        snprintf(p[i], sizeof(p[i]), "%s/%s", g_dir, name);
        return p[i];
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");

        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

/* Build from a file's text plus the command line (NULL-terminated), then
 * parse the result into o. Returns the build's or the parse's code. The
 * strings tests look at are mapped to static ones before ca is freed. */
static int conf_run(const char *text, struct node_options *o, char *err,
                    size_t errlen, ...)
{
        struct node_conf_argv ca;
        char *argv[32] = {"gossipnode", "--config", (char *)tmp_path("g.conf")};
        int argc = 3, rc;
        va_list ap;
        char *a;

        write_file(argv[2], text);
        va_start(ap, errlen);
        while ((a = va_arg(ap, char *)) != NULL && argc < 31)
                argv[argc++] = a;
        va_end(ap);
        err[0] = '\0';
        rc = node_conf_argv_build(argc, argv, &ca, err, errlen);
        if (rc)
                return rc;
        rc = node_options_parse(ca.argc, ca.argv, o, err, errlen);
        if (rc == 0 && strcmp(o->data_dir, "/d i r#x") == 0)
                o->data_dir = "quoted-ok";
        if (rc == 0 && o->peers_path)
                o->peers_path =
                    strcmp(o->peers_path, "/cli/peers") == 0 ? "cli" : "file";
        node_conf_argv_free(&ca);
        return rc;
}

static void test_conf_values(void **state)
{
        struct node_options o;
        char err[512];

        assert_int_equal(conf_run("# a comment\n\n  batch = 50\n"
                                  "lr=0.25   # trailing comment\r\n"
                                  "fresh = yes\n"
                                  "data = \"/d i r#x\"\n"
                                  "log-level = debug",
                                  &o, err, sizeof(err), NULL),
                         0);
        assert_int_equal(o.batch, 50);
        assert_true(o.lr > 0.2499f && o.lr < 0.2501f);
        assert_int_equal(o.fresh, 1);
        assert_string_equal(o.data_dir, "quoted-ok");
        assert_int_equal(o.log_level, NODE_LOG_DEBUG);
        /* a flag set to no is left out */
        assert_int_equal(conf_run("fresh = no\n", &o, err, sizeof(err), NULL),
                         0);
        assert_int_equal(o.fresh, 0);
}

static void test_conf_cli_wins(void **state)
{
        struct node_options o;
        char err[512];

        assert_int_equal(conf_run("batch = 50\npeers = /file/peers\n"
                                  "key = /k\n",
                                  &o, err, sizeof(err), "--batch", "70",
                                  "--peers=/cli/peers", NULL),
                         0);
        assert_int_equal(o.batch, 70);
        assert_string_equal(o.peers_path, "cli");
        /* the file's value stands where the command line is silent */
        assert_int_equal(conf_run("batch = 50\npeers = /file/peers\n"
                                  "key = /k\n",
                                  &o, err, sizeof(err), "--lr", "0.1", NULL),
                         0);
        assert_int_equal(o.batch, 50);
        assert_string_equal(o.peers_path, "file");
}

static void test_conf_bad_lines(void **state)
{
        static const struct {
                const char *text, *err;
        } c[] = {
            {"batch = 5\nbtch = 3\n", "g.conf:2: unknown key 'btch'"},
            {"\n\nbatch = abc\n", "g.conf:3: --batch: 'abc' is not"},
            {"batch 5\n", "g.conf:1: expected 'key = value'"},
            {"Batch = 5\n", "g.conf:1: expected 'key = value'"},
            {"# x\nbatch =\n", "g.conf:2: no value"},
            {"data = \"/x\n", "g.conf:1: unterminated quote"},
            {"data = \"/x\" y\n", "g.conf:1: text after the quoted value"},
            {"config = /etc/x\n", "g.conf:1: 'config' cannot be set"},
            {"help = yes\n", "g.conf:1: 'help' cannot be set"},
            {"fresh = maybe\n", "g.conf:1: unknown key 'fresh'"},
        };
        struct node_options o;
        char err[512], big[NODE_CONF_LINE_MAX + 16];

        for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
                assert_int_equal(
                    conf_run(c[i].text, &o, err, sizeof(err), NULL), -EINVAL);
                if (!strstr(err, c[i].err))
                        fail_msg("case %zu: '%s' lacks '%s'", i, err, c[i].err);
        }
        memset(big, 'a', sizeof(big) - 2);
        memcpy(big, "data = ", 7);
        big[sizeof(big) - 2] = '\n';
        big[sizeof(big) - 1] = '\0';
        assert_int_equal(conf_run(big, &o, err, sizeof(err), NULL), -EINVAL);
        assert_non_null(strstr(err, "g.conf:1: line longer than 1023"));
}

static void test_conf_which_file(void **state)
{
        struct node_conf_argv ca;
        char err[512];
        char *missing[] = {"gossipnode", "--config=/nonexistent/x.conf"};
        char *none[] = {"gossipnode", "--no-config", "--batch", "7"};
        char *dangling[] = {"gossipnode", "--config"};

        assert_int_equal(
            node_conf_argv_build(2, missing, &ca, err, sizeof(err)), -ENOENT);
        assert_string_equal(err,
                            "/nonexistent/x.conf: No such file or directory");
        assert_int_equal(node_conf_argv_build(4, none, &ca, err, sizeof(err)),
                         0);
        assert_int_equal(ca.argc, 3); /* --no-config removed, nothing read */
        assert_string_equal(ca.argv[1], "--batch");
        assert_string_equal(ca.argv[2], "7");
        assert_null(ca.argv[3]);
        node_conf_argv_free(&ca);
        assert_int_equal(
            node_conf_argv_build(2, dangling, &ca, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, "--config: needs a value");
}

/* A datagram socket standing in for systemd's notify socket. */
static int notify_listen(const char *name, int abstract)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        socklen_t len;
        int fd = socket(AF_UNIX, SOCK_DGRAM, 0);

        assert_true(fd >= 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s%s", abstract ? "@" : "",
                 name);
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                          strlen(sa.sun_path) + !abstract);
        setenv("NOTIFY_SOCKET", sa.sun_path, 1);
        if (abstract)
                sa.sun_path[0] = '\0';
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
        return fd;
}

static void expect_datagram(int fd, const char *want)
{
        char buf[256];
        ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

        assert_true(n >= 0);
        buf[n] = '\0';
        assert_string_equal(buf, want);
}

static void test_sd_notify(void **state)
{
        char abs_name[64];
        int fd;

        unsetenv("NOTIFY_SOCKET");
        assert_int_equal(node_sd_notify("READY=1"), 0); /* not a service */
        fd = notify_listen(tmp_path("notify"), 0);
        assert_int_equal(node_sd_notify("READY=1\nSTATUS=training"), 1);
        expect_datagram(fd, "READY=1\nSTATUS=training");
        close(fd);
        unlink(tmp_path("notify"));
        snprintf(abs_name, sizeof(abs_name), "gn-test-%ld", (long)getpid());
        fd = notify_listen(abs_name, 1);
        assert_int_equal(node_sd_notify("WATCHDOG=1"), 1);
        expect_datagram(fd, "WATCHDOG=1");
        close(fd);
        setenv("NOTIFY_SOCKET", "relative/path", 1);
        assert_int_equal(node_sd_notify("READY=1"), -EINVAL);
        setenv("NOTIFY_SOCKET", tmp_path("nobody-listens"), 1);
        assert_true(node_sd_notify("READY=1") < 0);
        unsetenv("NOTIFY_SOCKET");
}

static void test_sd_watchdog(void **state)
{
        char pid[32];

        unsetenv("WATCHDOG_USEC");
        unsetenv("WATCHDOG_PID");
        assert_int_equal(node_sd_watchdog_usec(), 0);
        setenv("WATCHDOG_USEC", "60000000", 1);
        assert_int_equal(node_sd_watchdog_usec(), 60000000);
        snprintf(pid, sizeof(pid), "%ld", (long)getpid());
        setenv("WATCHDOG_PID", pid, 1);
        assert_int_equal(node_sd_watchdog_usec(), 60000000);
        snprintf(pid, sizeof(pid), "%ld", (long)getpid() + 1);
        setenv("WATCHDOG_PID", pid, 1);
        assert_int_equal(node_sd_watchdog_usec(), 0); /* someone else's */
        unsetenv("WATCHDOG_PID");
        setenv("WATCHDOG_USEC", "12x", 1);
        assert_int_equal(node_sd_watchdog_usec(), 0);
        unsetenv("WATCHDOG_USEC");

        /* policy: period 60 s; progress last seen at t = 1000 ms */
        assert_int_equal(node_sd_healthy(0, 1, 1000, 1000, 60000), 0);
        assert_int_equal(node_sd_healthy(1, 1, 1000, 1000, 0), 0);
        assert_int_equal(node_sd_healthy(1, 1, 60999, 1000, 60000), 1);
        assert_int_equal(node_sd_healthy(1, 1, 61000, 1000, 60000), 0);
        assert_int_equal(node_sd_healthy(1, 0, 500000, 1000, 60000), 1);
}

static void test_journal_prefix(void **state)
{
        static const char *want[] = {"<3>[n1] error: e\n",
                                     "<4>[n1] warning: w\n", "<6>[n1] i\n",
                                     "<7>[n1] d\n", "[n1] plain\n"};
        char env[64], line[256];
        struct stat st;
        FILE *f = fopen(tmp_path("log.txt"), "w+");

        assert_non_null(f);
        assert_int_equal(fstat(fileno(f), &st), 0);
        unsetenv("JOURNAL_STREAM");
        assert_int_equal(node_sd_journal_stream(fileno(f)), 0);
        snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
        setenv("JOURNAL_STREAM", env, 1);
        assert_int_equal(node_sd_journal_stream(fileno(f)), 1);
        assert_int_equal(node_sd_journal_stream(STDIN_FILENO), 0);
        unsetenv("JOURNAL_STREAM");

        node_log_setup(f, "n1", NODE_LOG_DEBUG);
        node_log_set_journal(1);
        node_log(NODE_LOG_ERROR, "e");
        node_log(NODE_LOG_WARN, "w");
        node_log(NODE_LOG_INFO, "i");
        node_log(NODE_LOG_DEBUG, "d");
        node_log_set_journal(0);
        node_log(NODE_LOG_INFO, "plain");
        node_log_setup(NULL, NULL, NODE_LOG_INFO);
        rewind(f);
        for (size_t i = 0; i < 5; i++) {
                assert_non_null(fgets(line, sizeof(line), f));
                assert_string_equal(line, want[i]);
        }
        fclose(f);
}

static size_t count_lines(const char *path)
{
        FILE *f = fopen(path, "r");
        size_t n = 0;
        int c;

        assert_non_null(f);
        while ((c = fgetc(f)) != EOF)
                n += c == '\n';
        fclose(f);
        return n;
}

static void test_evlog_reopen(void **state)
{
        struct node_evlog *l;
        const char *path = tmp_path("ev.jsonl"), *moved = tmp_path("ev.1");

        assert_int_equal(node_evlog_open(path, "n1", &l), 0);
        node_evlog_start(l, "784-512-10", 10, 0, 1, 1, 0, 0);
        assert_int_equal(rename(path, moved), 0); /* logrotate */
        node_evlog_start(l, "784-512-10", 10, 0, 1, 1, 0, 0);
        assert_int_equal(node_evlog_reopen(l), 0);
        node_evlog_start(l, "784-512-10", 10, 0, 1, 1, 0, 0);
        node_evlog_close(l);
        assert_int_equal(count_lines(moved), 2); /* before the reopen */
        assert_int_equal(count_lines(path), 1);  /* after it */
        assert_int_equal(node_evlog_reopen(NULL), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_conf_values),
            cmocka_unit_test(test_conf_cli_wins),
            cmocka_unit_test(test_conf_bad_lines),
            cmocka_unit_test(test_conf_which_file),
            cmocka_unit_test(test_sd_notify),
            cmocka_unit_test(test_sd_watchdog),
            cmocka_unit_test(test_journal_prefix),
            cmocka_unit_test(test_evlog_reopen),
        };
        int rc;

        snprintf(g_dir, sizeof(g_dir), "/tmp/gn-service-XXXXXX");
        if (!mkdtemp(g_dir))
                return 1;
        rc = cmocka_run_group_tests(tests, NULL, NULL);
        for (size_t i = 0; i < sizeof(g_files) / sizeof(g_files[0]); i++)
                unlink(tmp_path(g_files[i]));
        if (rmdir(g_dir))
                fprintf(stderr, "test_service: rmdir %s: %s\n", g_dir,
                        strerror(errno));
        return rc;
}
