/*
 * test_proc.h - run a program as a user would and capture what it says:
 * fork, exec, collect stdout and stderr, wait for the exit code. For the
 * tests of the command-line tools (gossipctl, gossip-keygen).
 * Header-only, POSIX only.
 */
#ifndef GN_TEST_PROC_H
#define GN_TEST_PROC_H

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

struct gn_test_proc {
        int status;     /* exit code (valid when gn_test_proc_run gave 0) */
        char out[8192]; /* stdout, NUL-terminated, cut to fit */
        char err[4096]; /* stderr, likewise */
};

/* Read what is there from fd into buf (len bytes so far, room for cap - 1
 * and the NUL); bytes beyond the buffer are read and dropped, so a chatty
 * child never blocks on a full pipe. 1 while open, 0 at EOF. */
static inline int gn_test_proc_read(int fd, char *buf, size_t cap, size_t *len)
{
        char spill[512];
        char *p = *len + 1 < cap ? buf + *len : spill;
        size_t room = *len + 1 < cap ? cap - 1 - *len : sizeof(spill);
        ssize_t r = read(fd, p, room);

        if (r < 0 && (errno == EINTR || errno == EAGAIN))
                return 1;
        if (r <= 0)
                return 0;
        if (p != spill)
                *len += (size_t)r;
        buf[*len] = '\0';
        return 1;
}

/* Run argv[0] (a path) with the NULL-terminated argv; stdin is inherited,
 * stdout and stderr are captured into p. 0 when the child exited normally
 * (p->status = its exit code; 127 = could not exec), -ECHILD when a signal
 * ended it, or -errno of pipe/fork/waitpid. */
static inline int gn_test_proc_run(const char *const argv[],
                                   struct gn_test_proc *p)
{
        struct pollfd fds[2];
        size_t nout = 0, nerr = 0;
        int po[2], pe[2], st, open_n = 2;
        pid_t pid;

        p->out[0] = p->err[0] = '\0';
        p->status = -1;
        if (pipe(po) != 0)
                return -errno;
        if (pipe(pe) != 0) {
                close(po[0]);
                close(po[1]);
                return -errno;
        }
        pid = fork();
        if (pid < 0) {
                int rc = -errno;
                close(po[0]);
                close(po[1]);
                close(pe[0]);
                close(pe[1]);
                return rc;
        }
        if (pid == 0) {
                dup2(po[1], 1);
                dup2(pe[1], 2);
                close(po[0]);
                close(pe[0]);
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        close(po[1]);
        close(pe[1]);
        fds[0] = (struct pollfd){.fd = po[0], .events = POLLIN};
        fds[1] = (struct pollfd){.fd = pe[0], .events = POLLIN};
        while (open_n > 0) {
                if (poll(fds, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (fds[0].fd >= 0 && fds[0].revents &&
                    !gn_test_proc_read(po[0], p->out, sizeof(p->out), &nout)) {
                        fds[0].fd = -1;
                        open_n--;
                }
                if (fds[1].fd >= 0 && fds[1].revents &&
                    !gn_test_proc_read(pe[0], p->err, sizeof(p->err), &nerr)) {
                        fds[1].fd = -1;
                        open_n--;
                }
        }
        close(po[0]);
        close(pe[0]);
        while (waitpid(pid, &st, 0) != pid)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(st))
                return -ECHILD;
        p->status = WEXITSTATUS(st);
        return 0;
}

#endif
