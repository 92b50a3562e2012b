/*
 * sdnotify.c - systemd's notify, watchdog and journal-stream conventions.
 *
 * The notify protocol is a datagram of "KEY=VALUE" lines to the AF_UNIX
 * socket named by $NOTIFY_SOCKET (a path, or an abstract name written with
 * a leading '@'). The watchdog and journal conventions are environment
 * variables. This file owns nothing between calls.
 */
#define _DEFAULT_SOURCE 1 /* struct sockaddr_un, SOCK_CLOEXEC */
#include "service/sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Fill sa from $NOTIFY_SOCKET; its length in *len. 0, 1 if unset, or
 * -EINVAL for a name that does not fit or is not a path or '@'. */
static int notify_addr(struct sockaddr_un *sa, socklen_t *len)
{
        const char *e = getenv("NOTIFY_SOCKET");
        size_t n;

        if (!e || !*e)
                return 1;
        n = strlen(e);
        if ((e[0] != '/' && e[0] != '@') || n >= sizeof(sa->sun_path))
                return -EINVAL;
        memset(sa, 0, sizeof(*sa));
        sa->sun_family = AF_UNIX;
        memcpy(sa->sun_path, e, n);
        if (e[0] == '@')
                sa->sun_path[0] = '\0'; /* abstract namespace */
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
                           (e[0] == '/'));
        return 0;
}

int node_sd_notify(const char *msg)
{
        struct sockaddr_un sa;
        socklen_t len;
        ssize_t w;
        int fd, rc;

        rc = notify_addr(&sa, &len);
        if (rc)
                return rc > 0 ? 0 : rc;
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        w = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
                   len);
        rc = w < 0 ? -errno : 1;
        close(fd);
        return rc;
}

uint64_t node_sd_watchdog_usec(void)
{
        const char *u = getenv("WATCHDOG_USEC"), *p = getenv("WATCHDOG_PID");
        unsigned long long v;
        char *end;

        if (!u || !*u)
                return 0;
        if (p && *p && strtoll(p, NULL, 10) != (long long)getpid())
                return 0; /* meant for another process (a wrapper's) */
        errno = 0;
        v = strtoull(u, &end, 10);
        return errno || *end ? 0 : (uint64_t)v;
}

int node_sd_healthy(int ready, int running, uint64_t now_ms, uint64_t moved_ms,
                    uint64_t wd_ms)
{
        if (!ready || !wd_ms)
                return 0;
        return !running || now_ms - moved_ms < wd_ms;
}

int node_sd_journal_stream(int fd)
{
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return 0;
        if (fstat(fd, &st))
                return 0;
        return (unsigned long long)st.st_dev == dev &&
               (unsigned long long)st.st_ino == ino;
}
