/*
 * test_tmpdir.h - scratch directories for tests that write files: a fresh
 * private directory under /tmp, and a recursive remove for the end.
 * Header-only, POSIX only (no nftw, which needs _XOPEN_SOURCE).
 */
#ifndef GN_TEST_TMPDIR_H
#define GN_TEST_TMPDIR_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Create /tmp/gn-test-<name>-XXXXXX (mode 0700); its path goes in buf.
 * 0, -ENAMETOOLONG if buf is too small, or -errno from mkdtemp(). */
static inline int gn_test_tmpdir(char *buf, size_t len, const char *name)
{
        int n = snprintf(buf, len, "/tmp/gn-test-%s-XXXXXX", name);

        if (n < 0 || (size_t)n >= len)
                return -ENAMETOOLONG;
        return mkdtemp(buf) ? 0 : -errno;
}

/* Remove path and everything below it; symbolic links are removed, never
 * followed. 0, or the -errno of the first thing that could not be removed
 * (the rest is still tried). A path that does not exist is -ENOENT. */
static inline int gn_test_rmtree(const char *path)
{
        char sub[4096];
        struct dirent *de;
        struct stat st;
        DIR *d;
        int rc = 0, r;

        if (lstat(path, &st) != 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return unlink(path) == 0 ? 0 : -errno;
        d = opendir(path);
        if (d == NULL)
                return -errno;
        while ((de = readdir(d)) != NULL) {
                if (strcmp(de->d_name, ".") == 0 ||
                    strcmp(de->d_name, "..") == 0)
                        continue;
                r = snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
                if (r < 0 || (size_t)r >= sizeof(sub))
                        r = -ENAMETOOLONG;
                else
                        r = gn_test_rmtree(sub);
                if (r && !rc)
                        rc = r;
        }
        closedir(d);
        if (rmdir(path) != 0 && !rc)
                rc = -errno;
        return rc;
}

#endif
