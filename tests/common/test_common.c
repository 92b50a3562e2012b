/*
 * test_common.c - the shared test helpers are themselves tested, since
 * every other test leans on them: the seed comes from GN_SEED (hex or
 * decimal, empty means the default); a scratch directory is created 0700
 * and removed with everything in it; a child's stdout, stderr and exit code
 * are captured (also when it writes more than a pipe holds, or dies by a
 * signal); a loop with a handle left open is reported, and a client thread
 * runs to its end while the loop turns.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "test_proc.h"
#include "test_seed.h"
#include "test_tmpdir.h"
#include "test_uv.h"

static void test_seed(void **state)
{
        assert_int_equal(setenv("GN_SEED", "0x10", 1), 0);
        assert_int_equal(gn_test_seed("test_common", 5), 16);
        assert_int_equal(setenv("GN_SEED", "123", 1), 0);
        assert_int_equal(gn_test_seed(NULL, 5), 123);
        assert_int_equal(setenv("GN_SEED", "", 1), 0);
        assert_int_equal(gn_test_seed(NULL, 5), 5);
        assert_int_equal(unsetenv("GN_SEED"), 0);
        assert_int_equal(gn_test_seed(NULL, 7), 7);
}

static void write_file(const char *path)
{
        FILE *f = fopen(path, "w");

        assert_non_null(f);
        fputs("x\n", f);
        fclose(f);
}

static void test_tmpdir(void **state)
{
        char dir[64], p[128], name[80];
        struct stat st;

        memset(name, 'n', sizeof(name) - 1);
        name[sizeof(name) - 1] = '\0';
        assert_int_equal(gn_test_tmpdir(dir, sizeof(dir), name), -ENAMETOOLONG);
        assert_int_equal(gn_test_tmpdir(dir, sizeof(dir), "common"), 0);
        assert_non_null(strstr(dir, "/tmp/gn-test-common-"));
        assert_int_equal(lstat(dir, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0700);

        snprintf(p, sizeof(p), "%s/a", dir);
        write_file(p);
        snprintf(p, sizeof(p), "%s/sub", dir);
        assert_int_equal(mkdir(p, 0700), 0);
        snprintf(p, sizeof(p), "%s/sub/deeper", dir);
        assert_int_equal(mkdir(p, 0700), 0);
        snprintf(p, sizeof(p), "%s/sub/deeper/b", dir);
        write_file(p);
        /* a link to outside: removed, its target left alone */
        snprintf(p, sizeof(p), "%s/sub/link", dir);
        assert_int_equal(symlink("/etc", p), 0);

        assert_int_equal(gn_test_rmtree(dir), 0);
        assert_int_equal(lstat(dir, &st), -1);
        assert_int_equal(errno, ENOENT);
        assert_int_equal(lstat("/etc", &st), 0);
        assert_int_equal(gn_test_rmtree(dir), -ENOENT);
}

static void test_proc(void **state)
{
        static struct gn_test_proc r;
        const char *say[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3",
                             NULL};
        /* 200 KiB on each stream: more than a pipe holds and than r keeps */
        const char *flood[] = {"/bin/sh", "-c",
                               "head -c 204800 /dev/zero | tr '\\0' o; "
                               "head -c 204800 /dev/zero | tr '\\0' e >&2",
                               NULL};
        const char *killed[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
        const char *missing[] = {"/nonexistent/gn-test-bin", NULL};

        assert_int_equal(gn_test_proc_run(say, &r), 0);
        assert_int_equal(r.status, 3);
        assert_string_equal(r.out, "out\n");
        assert_string_equal(r.err, "err\n");

        assert_int_equal(gn_test_proc_run(flood, &r), 0);
        assert_int_equal(r.status, 0);
        assert_int_equal(strlen(r.out), sizeof(r.out) - 1);
        assert_int_equal(strlen(r.err), sizeof(r.err) - 1);
        assert_int_equal(strspn(r.out, "o"), sizeof(r.out) - 1);

        assert_int_equal(gn_test_proc_run(killed, &r), -ECHILD);
        assert_int_equal(gn_test_proc_run(missing, &r), 0);
        assert_int_equal(r.status, 127);
}

static void client(void *arg)
{
        *(int *)arg += 1;
}

static void test_loop(void **state)
{
        uv_loop_t loop;
        uv_timer_t t1, t2;
        int calls = 0;

        /* a clean loop closes with 0 */
        assert_int_equal(uv_loop_init(&loop), 0);
        assert_int_equal(gn_test_loop_run_thread(&loop, client, &calls), 0);
        assert_int_equal(gn_test_loop_run_thread(&loop, client, &calls), 0);
        assert_int_equal(calls, 2);
        assert_int_equal(gn_test_loop_close(&loop), 0);

        /* two handles left open (inactive, so the run returns): reported */
        assert_int_equal(uv_loop_init(&loop), 0);
        uv_timer_init(&loop, &t1);
        uv_timer_init(&loop, &t2);
        assert_int_equal(gn_test_loop_close(&loop), 2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_seed),
            cmocka_unit_test(test_tmpdir),
            cmocka_unit_test(test_proc),
            cmocka_unit_test(test_loop),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
