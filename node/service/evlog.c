/*
 * evlog.c - human log lines and JSON-lines events.
 *
 * The human log keeps one global sink (the daemon has one stderr) behind a
 * mutex. The event log formats each object into a fixed buffer
 * (EVLOG_LINE_MAX; the longest event is far below it, a longer one is cut
 * at a field boundary and dropped rather than written torn) and hands it to
 * write(2) in one call on an O_APPEND descriptor.
 */
#include "service/evlog.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/options.h"

#define EVLOG_LINE_MAX 1024 /* bytes per event line, newline included */
#define EVLOG_STR_MAX  96   /* longest string field written (cut beyond) */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_out;
static char log_name[NODE_OPT_NAME_MAX] = "node";
static int log_max = NODE_LOG_INFO;
static int log_journal; /* prefix lines with syslog priorities "<N>" */

void node_log_setup(FILE *out, const char *name, int max_level)
{
        pthread_mutex_lock(&log_lock);
        log_out = out;
        log_max = max_level;
        if (name)
                snprintf(log_name, sizeof(log_name), "%s", name);
        pthread_mutex_unlock(&log_lock);
}

void node_log_set_journal(int on)
{
        pthread_mutex_lock(&log_lock);
        log_journal = on;
        pthread_mutex_unlock(&log_lock);
}

void node_log_set_name(const char *name)
{
        pthread_mutex_lock(&log_lock);
        snprintf(log_name, sizeof(log_name), "%s", name);
        pthread_mutex_unlock(&log_lock);
}

void node_log(int level, const char *fmt, ...)
{
        char line[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        pthread_mutex_lock(&log_lock);
        if (log_out && level <= log_max) {
                /* journald reads "<N>" as the line's priority: 3 err,
                 * 4 warning, 6 info, 7 debug (sd-daemon(3)) */
                if (log_journal)
                        fprintf(log_out, "<%d>",
                                level == NODE_LOG_ERROR  ? 3
                                : level == NODE_LOG_WARN ? 4
                                : level == NODE_LOG_INFO ? 6
                                                         : 7);
                fprintf(log_out, "[%s] %s%s\n", log_name,
                        level == NODE_LOG_ERROR  ? "error: "
                        : level == NODE_LOG_WARN ? "warning: "
                                                 : "",
                        line);
                fflush(log_out);
        }
        pthread_mutex_unlock(&log_lock);
}

struct node_evlog {
        int fd;
        char *path;                       /* for node_evlog_reopen() */
        char name[EVLOG_STR_MAX * 6 + 3]; /* already JSON-escaped, quoted */
};

/* Append s as a JSON string (quoted, escaped, cut at EVLOG_STR_MAX input
 * bytes) to buf of size cap at *pos. */
static void json_str(char *buf, size_t cap, size_t *pos, const char *s)
{
        static const char hex[] = "0123456789abcdef";
        size_t p = *pos;

        if (p + 1 < cap)
                buf[p++] = '"';
        for (size_t i = 0; s && s[i] && i < EVLOG_STR_MAX; i++) {
                unsigned char c = (unsigned char)s[i];
                if (p + 7 >= cap)
                        break;
                if (c == '"' || c == '\\') {
                        buf[p++] = '\\';
                        buf[p++] = (char)c;
                } else if (c < 0x20 || c >= 0x7f) {
                        /* bytes, not code points: names are ASCII */
                        memcpy(buf + p, "\\u00", 4);
                        buf[p + 4] = hex[c >> 4];
                        buf[p + 5] = hex[c & 15];
                        p += 6;
                } else {
                        buf[p++] = (char)c;
                }
        }
        if (p + 1 < cap)
                buf[p++] = '"';
        buf[p < cap ? p : cap - 1] = '\0';
        *pos = p;
}

uint64_t node_evlog_now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int node_evlog_open(const char *path, const char *name, struct node_evlog **out)
{
        struct node_evlog *l;
        size_t pos = 0;

        *out = NULL;
        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->path = strdup(path);
        l->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (l->fd < 0 || !l->path) {
                int e = l->fd < 0 ? -errno : -ENOMEM;
                if (l->fd >= 0)
                        close(l->fd);
                free(l->path);
                free(l);
                return e;
        }
        json_str(l->name, sizeof(l->name), &pos, name ? name : "node");
        *out = l;
        return 0;
}

void node_evlog_set_name(struct node_evlog *l, const char *name)
{
        size_t pos = 0;

        if (l)
                json_str(l->name, sizeof(l->name), &pos, name);
}

/* The new file replaces the old descriptor with dup2(), which is atomic:
 * a writer on another thread writes whole lines to one file or the other. */
int node_evlog_reopen(struct node_evlog *l)
{
        int fd, rc = 0;

        if (!l)
                return 0;
        fd = open(l->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        if (dup2(fd, l->fd) < 0)
                rc = -errno;
        else
                fcntl(l->fd, F_SETFD, FD_CLOEXEC); /* dup2 clears it */
        close(fd);
        return rc;
}

void node_evlog_close(struct node_evlog *l)
{
        if (!l)
                return;
        close(l->fd);
        free(l->path);
        free(l);
}

/* Format the common head, then fmt, close the object and write it. fmt
 * carries the event's own fields, starting with a comma. */
static void emit(struct node_evlog *l, const char *ev, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void emit(struct node_evlog *l, const char *ev, const char *fmt, ...)
{
        char line[EVLOG_LINE_MAX];
        va_list ap;
        int n, m;

        n = snprintf(line, sizeof(line),
                     "{\"t_ms\":%llu,\"node\":%s,\"ev\":\"%s\"",
                     (unsigned long long)node_evlog_now_ms(), l->name, ev);
        if (n < 0 || (size_t)n >= sizeof(line))
                return;
        va_start(ap, fmt);
        m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        va_end(ap);
        if (m < 0 || (size_t)(n + m + 2) >= sizeof(line))
                return; /* would be torn: drop it rather than corrupt */
        n += m;
        line[n++] = '}';
        line[n++] = '\n';
        /* one write on O_APPEND: the line lands whole or not at all */
        if (write(l->fd, line, (size_t)n) < 0)
                return;
}

/* A number, or null if it is not finite (JSON has no NaN). */
static const char *num(char *buf, size_t cap, double v, int decimals)
{
        if (!isfinite(v))
                snprintf(buf, cap, "null");
        else
                snprintf(buf, cap, "%.*f", decimals, v);
        return buf;
}

void node_evlog_start(struct node_evlog *l, const char *model, uint64_t params,
                      uint32_t shard_i, uint32_t shard_n, uint64_t seed,
                      uint64_t step, uint32_t peers)
{
        char m[EVLOG_STR_MAX * 6 + 3];
        size_t pos = 0;

        if (!l)
                return;
        json_str(m, sizeof(m), &pos, model);
        emit(l, "start",
             ",\"model\":%s,\"params\":%llu,\"shard\":\"%u/%u\",\"seed\":%llu,"
             "\"step\":%llu,\"peers\":%u",
             m, (unsigned long long)params, shard_i, shard_n,
             (unsigned long long)seed, (unsigned long long)step, peers);
}

void node_evlog_step(struct node_evlog *l, uint64_t step, uint32_t epoch,
                     double loss, double acc, double sps, double lr,
                     double max_ms, uint64_t slow)
{
        char a[32], b[32], c[32], d[32], e[32];

        if (!l)
                return;
        emit(l, "step",
             ",\"step\":%llu,\"epoch\":%u,\"loss\":%s,\"acc\":%s,\"sps\":%s,"
             "\"lr\":%s,\"max_ms\":%s,\"slow\":%llu",
             (unsigned long long)step, epoch, num(a, 32, loss, 5),
             num(b, 32, acc, 3), num(c, 32, sps, 1), num(d, 32, lr, 6),
             num(e, 32, max_ms > 0 ? max_ms : NAN, 1),
             (unsigned long long)slow);
}

void node_evlog_slow_step(struct node_evlog *l, uint64_t step, double ms,
                          double pace_ms, double wait_ms, uint64_t held,
                          double held_max_ms, uint64_t held_max_step)
{
        char a[32], b[32], c[32], d[32];

        if (!l)
                return;
        emit(l, "slow_step",
             ",\"step\":%llu,\"ms\":%s,\"pace_ms\":%s,\"wait_ms\":%s,"
             "\"held\":%llu,\"held_max_ms\":%s,\"held_max_step\":%llu",
             (unsigned long long)step, num(a, 32, ms, 1),
             num(b, 32, pace_ms, 1), num(c, 32, wait_ms, 1),
             (unsigned long long)held,
             num(d, 32, held_max_ms > 0 ? held_max_ms : NAN, 1),
             (unsigned long long)held_max_step);
}

void node_evlog_eval(struct node_evlog *l, uint64_t step, uint32_t epoch,
                     double train_acc, double test_acc, double test_loss,
                     double train_s, double compute_s, uint64_t skipped)
{
        char a[32], b[32], c[32], d[32], e[32];

        if (!l)
                return;
        emit(l, "eval",
             ",\"step\":%llu,\"epoch\":%u,\"train_acc\":%s,\"test_acc\":%s,"
             "\"test_loss\":%s,\"train_s\":%s,\"compute_s\":%s,"
             "\"skipped\":%llu",
             (unsigned long long)step, epoch, num(a, 32, train_acc, 3),
             num(b, 32, test_acc, 3), num(c, 32, test_loss, 5),
             num(d, 32, train_s, 4), num(e, 32, compute_s, 4),
             (unsigned long long)skipped);
}

void node_evlog_catch_up(struct node_evlog *l, uint64_t step, uint64_t skip)
{
        if (!l)
                return;
        emit(l, "catch_up", ",\"step\":%llu,\"skipped\":%llu",
             (unsigned long long)step, (unsigned long long)skip);
}

void node_evlog_member(struct node_evlog *l, const char *peer,
                       const char *state)
{
        char p[EVLOG_STR_MAX * 6 + 3], s[EVLOG_STR_MAX * 6 + 3];
        size_t pp = 0, sp = 0;

        if (!l)
                return;
        json_str(p, sizeof(p), &pp, peer);
        json_str(s, sizeof(s), &sp, state);
        emit(l, "member", ",\"peer\":%s,\"state\":%s", p, s);
}

void node_evlog_join(struct node_evlog *l, const char *peer, uint64_t step)
{
        char p[EVLOG_STR_MAX * 6 + 3];
        size_t pp = 0;

        if (!l)
                return;
        json_str(p, sizeof(p), &pp, peer);
        emit(l, "join", ",\"peer\":%s,\"step\":%llu", p,
             (unsigned long long)step);
}

void node_evlog_stop(struct node_evlog *l, const char *reason, uint64_t step,
                     uint32_t epoch, double test_acc, double max_ms,
                     uint64_t slow)
{
        char r[EVLOG_STR_MAX * 6 + 3], a[32], b[32];
        size_t rp = 0;

        if (!l)
                return;
        json_str(r, sizeof(r), &rp, reason);
        emit(l, "stop",
             ",\"reason\":%s,\"step\":%llu,\"epoch\":%u,\"test_acc\":%s,"
             "\"max_ms\":%s,\"slow\":%llu",
             r, (unsigned long long)step, epoch, num(a, 32, test_acc, 3),
             num(b, 32, max_ms > 0 ? max_ms : NAN, 1),
             (unsigned long long)slow);
}
