/*
 * gossipctl - command-line client of a running gossipnode's control socket.
 *
 *   gossipctl [--socket PATH] [--timeout MS] COMMAND [ARGS] [--json]
 *
 * Commands map one to one onto docs/control.md: members, stats, train,
 * version, join ADDR, leave, force-leave NAME|KEY, plus watch (a live view
 * refreshed in place). Text output is aligned tables and "key value" lines;
 * --json prints the response's "data" converted generically to JSON, so
 * scripts see every field the daemon sends, including ones this client does
 * not know.
 *
 * Exit status (the convention of every gossipnode tool): 0 success, 1 error
 * (no daemon, daemon error), 2 bad usage, 3 the command worked but nothing
 * matched (members --status REGEX).
 * Everything that talks to the daemon opens a fresh connection, so watch
 * survives a daemon restart.
 */
#include <errno.h>
#include <math.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "ctlc.h"

#ifndef GN_VERSION
#define GN_VERSION "unknown"
#endif

/* Where the daemon listens when neither --socket nor $GOSSIPNODE_SOCKET is
 * given: the path docs/control.md names as the daemon's default. */
#define CTL_DEFAULT_SOCKET "/run/gossipnode/ctl.sock"
#define WATCH_DEFAULT_S    2.0  /* refresh period of watch */
#define ROWS_MAX           4096 /* table rows shown (members of one cluster) */
#define COLS_MAX           12

/* One convention for every gossipnode tool (gossipnode(1) EXIT STATUS). */
enum { EXIT_OK = 0, EXIT_ERR = 1, EXIT_USAGE = 2, EXIT_NOMATCH = 3 };

struct opts {
        const char *socket;
        const char *cmd;
        const char *arg; /* the one positional argument of join/force-leave */
        const char *status;
        int json;
        int timeout_ms;
        double interval_s;
        long count; /* watch: refreshes before exiting; 0 = until Ctrl-C */
};

static volatile sig_atomic_t g_stop;

static const char usage_text[] =
    "usage: gossipctl [--socket PATH] [--timeout MS] COMMAND [ARGS]\n"
    "Talk to a running gossipnode through its control socket.\n"
    "\n"
    "Commands:\n"
    "  members [--status REGEX] [--json]  cluster members (REGEX is a\n"
    "                          POSIX extended regex matched against the\n"
    "                          whole state: alive|suspect|dead|left)\n"
    "  certs [--json]          certificates held (serial, expiry, status:\n"
    "                          ok, revoked, expired), keys dropped on\n"
    "                          theirs, the revocation list (docs/control.md)\n"
    "  stats [--json]          traffic, gradient and rejection counters\n"
    "  train [--json]          training progress\n"
    "  version [--json]        client and daemon versions\n"
    "  join ADDR               ask the node at ADDR:PORT to let us in\n"
    "  leave                   leave the cluster gracefully and exit\n"
    "  force-leave NAME|KEY    declare a gone member as left\n"
    "  watch [--interval S] [--count N]  live view (Ctrl-C quits)\n"
    "\n"
    "Options:\n"
    "  --socket PATH  control socket (default $GOSSIPNODE_SOCKET, else\n"
    "                 " CTL_DEFAULT_SOCKET ")\n"
    "  --timeout MS   give up on an unresponsive daemon (default 10000)\n"
    "  --json         print the response data as JSON\n"
    "  --version      print gossipctl's version\n"
    "\n"
    "Exit status: 0 ok, 1 error, 2 bad usage, 3 nothing matched.\n";

/* Print a usage complaint (fmt has one %s for what); returns -1. */
static int usage_error(const char *fmt, const char *what)
{
        fprintf(stderr, "gossipctl: ");
        fprintf(stderr, fmt, what);
        fprintf(stderr, "\n(gossipctl --help for usage)\n");
        return -1;
}

/* ---- tables ------------------------------------------------------------ */

struct table {
        int ncols;
        size_t nrows;
        char (*cell)[COLS_MAX][80];
        int width[COLS_MAX];
};

static int table_init(struct table *t, int ncols, size_t rows)
{
        t->ncols = ncols;
        t->nrows = 0;
        memset(t->width, 0, sizeof(t->width));
        t->cell = calloc(rows + 1, sizeof(*t->cell));
        return t->cell ? 0 : -ENOMEM;
}

/* Append a row of ncols strings. */
static void table_row(struct table *t, const char *const *cols)
{
        for (int c = 0; c < t->ncols; c++) {
                snprintf(t->cell[t->nrows][c], sizeof(t->cell[0][0]), "%s",
                         cols[c]);
                int w = (int)strlen(t->cell[t->nrows][c]);
                if (w > t->width[c])
                        t->width[c] = w;
        }
        t->nrows++;
}

static void table_print(struct table *t, FILE *f)
{
        for (size_t r = 0; r < t->nrows; r++) {
                for (int c = 0; c < t->ncols; c++) {
                        if (c == t->ncols - 1)
                                fprintf(f, "%s\n", t->cell[r][c]);
                        else
                                fprintf(f, "%-*s  ", t->width[c],
                                        t->cell[r][c]);
                }
        }
        free(t->cell);
        t->cell = NULL;
}

/* ---- talking to the daemon --------------------------------------------- */

static const char *connect_reason(int err)
{
        switch (err) {
        case -ECONNREFUSED:
                return "connection refused";
        case -ENOENT:
                return "no such socket";
        case -ENOTDIR:
                return "no such directory";
        case -EACCES:
                return "permission denied";
        case -ENOTSOCK:
                return "not a socket";
        default:
                return strerror(-err);
        }
}

/* A connect that failed with err (ENOENT, EACCES): if the socket's
 * directory is missing, say so (the daemon is not running, or runs without
 * --control) rather than "permission denied" or "no such socket". */
static int socket_dir_state(const char *path, int err)
{
        char dir[300];
        const char *slash = strrchr(path, '/');
        struct stat st;

        if (!slash || slash == path || (size_t)(slash - path) >= sizeof(dir))
                return err;
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
        if (stat(dir, &st) != 0 && errno == ENOENT)
                return -ENOTDIR;
        return err;
}

/* One request on a fresh connection. 0 with r filled (r->ok may be 0), or
 * EXIT_ERR after printing why. quiet_into: for watch, the message goes into
 * that buffer instead of stderr. */
static int call(const struct opts *o, const char *cmd, const char *key,
                const char *val, struct ctlc_resp *r, char *quiet_into,
                size_t qlen)
{
        char err[300], msg[600];
        const char *keys[1] = {key}, *vals[1] = {val};
        int fd, rc;

        memset(r, 0, sizeof(*r));
        fd = ctlc_connect(o->socket, o->timeout_ms);
        if (fd == -ENOENT || fd == -EACCES)
                fd = socket_dir_state(o->socket, fd);
        if (fd < 0) {
                snprintf(msg, sizeof(msg), "no gossipnode at %s (%s)",
                         o->socket, connect_reason(fd));
                goto fail;
        }
        rc = ctlc_call(fd, cmd, keys, vals, key ? 1 : 0, r, err, sizeof(err));
        close(fd);
        if (rc < 0) {
                ctlc_resp_free(r);
                snprintf(msg, sizeof(msg), "%s: %s (socket %s)", cmd, err,
                         o->socket);
                goto fail;
        }
        return 0;
fail:
        if (quiet_into)
                snprintf(quiet_into, qlen, "%s", msg);
        else
                fprintf(stderr, "gossipctl: %s\n", msg);
        return EXIT_ERR;
}

/* Print a daemon-side failure and release r. */
static int daemon_error(const char *cmd, struct ctlc_resp *r)
{
        size_t n = strlen(cmd);
        /* the daemon may already name the command ("join: bad address") */
        int named = strncmp(r->error, cmd, n) == 0 && r->error[n] == ':';

        if (named)
                fprintf(stderr, "gossipctl: %s\n", r->error);
        else
                fprintf(stderr, "gossipctl: %s: %s\n", cmd, r->error);
        ctlc_resp_free(r);
        return EXIT_ERR;
}

static int print_json(const msgpack_object *o)
{
        int rc = ctlc_json_write(stdout, o);

        fputc('\n', stdout);
        return rc < 0 ? EXIT_ERR : EXIT_OK;
}

/* ---- members ----------------------------------------------------------- */

static const char *fmt_num(const msgpack_object *o, char *buf, size_t len)
{
        int ok;
        double v = ctlc_num(o, &ok);

        if (!ok)
                snprintf(buf, len, "-");
        else
                snprintf(buf, len, "%.0f", v);
        return buf;
}

/* A goodput in bits per second, as links are quoted ("9.6Mbit/s"); "-"
 * when o is missing or not a number (not measured yet). */
static const char *fmt_rate(const msgpack_object *o, char *buf, size_t len)
{
        int ok;
        double v = ctlc_num(o, &ok) * 8;

        if (!ok || !isfinite(v) || v < 0)
                snprintf(buf, len, "-");
        else if (v >= 1e9)
                snprintf(buf, len, "%.1fGbit/s", v / 1e9);
        else if (v >= 1e6)
                snprintf(buf, len, "%.1fMbit/s", v / 1e6);
        else
                snprintf(buf, len, "%.0fkbit/s", v / 1e3);
        return buf;
}

/* A member refused for other cluster settings shows as "refused:SETTING"
 * (docs/control.md, members' "refused"). */
static void member_refused(const msgpack_object *m, char *state, size_t len)
{
        const msgpack_object *r = ctlc_get(m, "refused");
        char setting[16]; /* GOSSIP_SETTING_NAME_MAX */

        if (!r || r->type != MSGPACK_OBJECT_MAP)
                return;
        ctlc_str(ctlc_get(r, "setting"), setting, sizeof(setting));
        snprintf(state, len, "refused%s%s", setting[0] ? ":" : "", setting);
}

static void member_row(struct table *t, const msgpack_object *m)
{
        char name[64], addr[64], state[32], rtt[16], inc[24], step[24],
            heard[16], rate[24], version[24];
        const msgpack_object *self = ctlc_get(m, "self");
        const msgpack_object *liar = ctlc_get(m, "suspect_model");
        const msgpack_object *loading = ctlc_get(m, "loading");
        int ok;
        double v;

        ctlc_str(ctlc_get(m, "name"), name, sizeof(name));
        ctlc_str(ctlc_get(m, "addr"), addr, sizeof(addr));
        ctlc_str(ctlc_get(m, "state"), state, sizeof(state));
        /* "" from a peer that does not tell it, absent from an older node */
        ctlc_str(ctlc_get(m, "version"), version, sizeof(version));
        if (!version[0])
                snprintf(version, sizeof(version), "-");
        member_refused(m, state, sizeof(state));
        if (loading && loading->type == MSGPACK_OBJECT_BOOLEAN &&
            loading->via.boolean)
                strncat(state, ",loading", sizeof(state) - strlen(state) - 1);
        if (liar && liar->type == MSGPACK_OBJECT_BOOLEAN && liar->via.boolean)
                strncat(state, ",suspect_model",
                        sizeof(state) - strlen(state) - 1);
        v = ctlc_num(ctlc_get(m, "rtt_ms"), &ok);
        ctlc_human_ms(v, ok, rtt, sizeof(rtt));
        fmt_rate(ctlc_get(m, "goodput_Bps"), rate, sizeof(rate));
        fmt_num(ctlc_get(m, "incarnation"), inc, sizeof(inc));
        fmt_num(ctlc_get(m, "step"), step, sizeof(step));
        v = ctlc_num(ctlc_get(m, "last_heard_ms"), &ok);
        ctlc_human_ms(v, ok, heard, sizeof(heard));
        if (self && self->type == MSGPACK_OBJECT_BOOLEAN && self->via.boolean)
                snprintf(heard, sizeof(heard), "self");
        table_row(t, (const char *const[]){name, addr, state, rtt, rate, inc,
                                           step, heard, version});
}

/* Does member m's state match re (NULL: everything matches)? */
static int state_matches(const regex_t *re, const msgpack_object *m)
{
        char state[32];

        if (re == NULL)
                return 1;
        ctlc_str(ctlc_get(m, "state"), state, sizeof(state));
        member_refused(m, state, sizeof(state));
        return regexec(re, state, 0, NULL, 0) == 0;
}

/* Print the members array (filtered by re) as a table or JSON; returns the
 * number of members shown. */
static size_t print_members(const msgpack_object *arr, const regex_t *re,
                            int json, FILE *f)
{
        struct table t;
        size_t shown = 0, n;

        n = arr->via.array.size < ROWS_MAX ? arr->via.array.size : ROWS_MAX;
        if (json) {
                fputc('[', f);
                for (size_t i = 0; i < arr->via.array.size; i++) {
                        if (!state_matches(re, &arr->via.array.ptr[i]))
                                continue;
                        if (shown++)
                                fputc(',', f);
                        ctlc_json_write(f, &arr->via.array.ptr[i]);
                }
                fputs("]\n", f);
                return shown;
        }
        if (table_init(&t, 9, n) < 0)
                return 0;
        table_row(&t, (const char *const[]){"NAME", "ADDR", "STATE", "RTT",
                                            "GOODPUT", "INCARNATION", "STEP",
                                            "LAST HEARD", "VERSION"});
        for (size_t i = 0; i < n; i++) {
                if (!state_matches(re, &arr->via.array.ptr[i]))
                        continue;
                member_row(&t, &arr->via.array.ptr[i]);
                shown++;
        }
        if (shown > 0)
                table_print(&t, f);
        else
                free(t.cell);
        return shown;
}

/* Under the members table: a line when this node's exchange is not
 * working (members alive but no averaging: the table alone looks fine).
 * Quiet when the daemon is too old to say or the call fails. */
static void members_exchange_note(const struct opts *o)
{
        struct ctlc_resp r;
        char ex[160], quiet[600];

        if (call(o, "train", NULL, NULL, &r, quiet, sizeof(quiet)) != 0)
                return;
        if (r.ok && r.data && r.data->type == MSGPACK_OBJECT_MAP &&
            ctlc_str(ctlc_get(r.data, "exchange"), ex, sizeof(ex)) &&
            strncmp(ex, "degraded", 8) == 0)
                printf("exchange %s: this node is training mostly alone "
                       "(gossipctl train)\n",
                       ex);
        ctlc_resp_free(&r);
}

static int cmd_members(const struct opts *o)
{
        struct ctlc_resp r;
        regex_t re;
        char pat[512];
        size_t shown;
        int rc;

        if (o->status) {
                /* anchored: "dead" must not match a future "undead" */
                snprintf(pat, sizeof(pat), "^(%s)$", o->status);
                rc = regcomp(&re, pat, REG_EXTENDED | REG_NOSUB);
                if (rc != 0) {
                        regerror(rc, &re, pat, sizeof(pat));
                        fprintf(stderr, "gossipctl: --status: bad regex: %s\n",
                                pat);
                        return EXIT_ERR;
                }
        }
        rc = call(o, "members", NULL, NULL, &r, NULL, 0);
        if (rc != 0)
                goto out;
        if (!r.ok) {
                rc = daemon_error("members", &r);
                goto out;
        }
        if (r.data == NULL || r.data->type != MSGPACK_OBJECT_ARRAY) {
                fprintf(stderr, "gossipctl: members: malformed response\n");
                rc = EXIT_ERR;
        } else {
                shown = print_members(r.data, o->status ? &re : NULL, o->json,
                                      stdout);
                rc = shown == 0 && o->status ? EXIT_NOMATCH : EXIT_OK;
        }
        ctlc_resp_free(&r);
        if (rc == EXIT_OK && !o->json && !o->status)
                members_exchange_note(o);
out:
        if (o->status)
                regfree(&re);
        return rc;
}

/* ---- stats ------------------------------------------------------------- */

/* "k v, k v, ..." of a map of counters, or "none". */
static void print_counters(FILE *f, const char *label,
                           const msgpack_object *map)
{
        char key[48], num[32];
        int any = 0;

        fprintf(f, "%-10s", label);
        if (map && map->type == MSGPACK_OBJECT_MAP) {
                for (uint32_t i = 0; i < map->via.map.size; i++) {
                        const msgpack_object_kv *kv = &map->via.map.ptr[i];
                        fprintf(f, "%s%s %s", any++ ? ", " : " ",
                                ctlc_str(&kv->key, key, sizeof(key)),
                                fmt_num(&kv->val, num, sizeof(num)));
                }
        }
        fprintf(f, "%s\n", any ? "" : " none");
}

static const char *fmt_pct(const msgpack_object *o, char *buf, size_t len)
{
        int ok;
        double v = ctlc_num(o, &ok);

        if (ok)
                snprintf(buf, len, "%.1f%%", 100.0 * v);
        else
                snprintf(buf, len, "-");
        return buf;
}

static const char *fmt_float(const msgpack_object *o, const char *fmt,
                             char *buf, size_t len)
{
        int ok;
        double v = ctlc_num(o, &ok);

        if (ok)
                snprintf(buf, len, fmt, v);
        else
                snprintf(buf, len, "-");
        return buf;
}

static const char *fmt_bytes(const msgpack_object *o, char *buf, size_t len)
{
        int ok;
        double v = ctlc_num(o, &ok);

        return ok ? ctlc_human_bytes(v, buf, len) : strcpy(buf, "-");
}

static void print_node_stats(FILE *f, const msgpack_object *n)
{
        char a[64], b[64], c[64], d[64];
        const msgpack_object *key = ctlc_get(n, "key"),
                             *crl = ctlc_get(n, "crl");

        fprintf(f, "%-10s %s (key %s)\n", "node",
                ctlc_str(ctlc_get(n, "name"), a, sizeof(a)),
                ctlc_str(key, b, sizeof(b)));
        fprintf(f, "%-10s %s s\n", "uptime",
                fmt_float(ctlc_get(n, "uptime_s"), "%.1f", a, sizeof(a)));
        fprintf(f, "%-10s %s (epoch %s)\n", "step",
                fmt_num(ctlc_get(n, "step"), a, sizeof(a)),
                fmt_num(ctlc_get(n, "epoch"), b, sizeof(b)));
        fprintf(f, "%-10s loss %s, accuracy %s, %s samples/s\n", "training",
                fmt_float(ctlc_get(n, "loss"), "%.4f", a, sizeof(a)),
                fmt_pct(ctlc_get(n, "accuracy"), b, sizeof(b)),
                fmt_float(ctlc_get(n, "samples_per_s"), "%.0f", c, sizeof(c)));
        fprintf(f, "%-10s %s alive, %s suspect\n", "members",
                fmt_num(ctlc_get(n, "members_alive"), a, sizeof(a)),
                fmt_num(ctlc_get(n, "members_suspect"), b, sizeof(b)));
        fprintf(f, "%-10s in %s (%s msgs), out %s (%s msgs)\n", "traffic",
                fmt_bytes(ctlc_get(n, "bytes_in"), a, sizeof(a)),
                fmt_num(ctlc_get(n, "msgs_in"), b, sizeof(b)),
                fmt_bytes(ctlc_get(n, "bytes_out"), c, sizeof(c)),
                fmt_num(ctlc_get(n, "msgs_out"), d, sizeof(d)));
        fprintf(f, "%-10s %s merged, %s late, %s dropped\n", "gradients",
                fmt_num(ctlc_get(n, "grads_merged"), a, sizeof(a)),
                fmt_num(ctlc_get(n, "grads_late"), b, sizeof(b)),
                fmt_num(ctlc_get(n, "grads_dropped"), c, sizeof(c)));
        print_counters(f, "rejects", ctlc_get(n, "rejects"));
        print_counters(f, "certs", ctlc_get(n, "certs"));
        if (crl && crl->type == MSGPACK_OBJECT_MAP)
                fprintf(f, "%-10s sequence %s (%s revoked)\n", "crl",
                        fmt_num(ctlc_get(crl, "seq"), a, sizeof(a)),
                        fmt_num(ctlc_get(crl, "serials"), b, sizeof(b)));
        else
                fprintf(f, "%-10s none\n", "crl");
        print_counters(f, "crls", ctlc_get(n, "crls"));
        print_counters(f, "robust", ctlc_get(n, "robust"));
        print_counters(f, "net", ctlc_get(n, "net"));
}

/* Sum of a map of counters (the per-peer rejects). */
static double sum_counters(const msgpack_object *map)
{
        double s = 0;
        int ok;

        if (map && map->type == MSGPACK_OBJECT_MAP)
                for (uint32_t i = 0; i < map->via.map.size; i++)
                        s += ctlc_num(&map->via.map.ptr[i].val, &ok);
        return s;
}

static void print_peer_stats(FILE *f, const msgpack_object *peers)
{
        static const char *hdr[] = {"NAME",    "STATE",    "IN",     "OUT",
                                    "MSGS IN", "MSGS OUT", "MERGED", "LATE",
                                    "DROPPED", "REJECTED", "QUEUED", "GOODPUT"};
        char c[12][64];
        struct table t;
        size_t n;

        if (peers == NULL || peers->type != MSGPACK_OBJECT_ARRAY ||
            peers->via.array.size == 0)
                return;
        n = peers->via.array.size < ROWS_MAX ? peers->via.array.size : ROWS_MAX;
        if (table_init(&t, 12, n) < 0)
                return;
        table_row(&t, hdr);
        for (size_t i = 0; i < n; i++) {
                const msgpack_object *p = &peers->via.array.ptr[i];
                ctlc_str(ctlc_get(p, "name"), c[0], 64);
                ctlc_str(ctlc_get(p, "state"), c[1], 64);
                fmt_bytes(ctlc_get(p, "bytes_in"), c[2], 64);
                fmt_bytes(ctlc_get(p, "bytes_out"), c[3], 64);
                fmt_num(ctlc_get(p, "msgs_in"), c[4], 64);
                fmt_num(ctlc_get(p, "msgs_out"), c[5], 64);
                fmt_num(ctlc_get(p, "grads_merged"), c[6], 64);
                fmt_num(ctlc_get(p, "grads_late"), c[7], 64);
                fmt_num(ctlc_get(p, "grads_dropped"), c[8], 64);
                snprintf(c[9], 64, "%.0f",
                         sum_counters(ctlc_get(p, "rejects")));
                fmt_bytes(ctlc_get(p, "queued_bytes"), c[10], 64);
                fmt_rate(ctlc_get(p, "goodput_Bps"), c[11], 64);
                table_row(&t, (const char *const[]){c[0], c[1], c[2], c[3],
                                                    c[4], c[5], c[6], c[7],
                                                    c[8], c[9], c[10], c[11]});
        }
        fputc('\n', f);
        table_print(&t, f);
}

/* ---- simple commands --------------------------------------------------- */

/* "steps     pace 41.0 ms, longest 230.5 ms at step 1200 (190.0 ms
 *            waiting), 3 slow (over 2x the pace): 0.6 s, 0.5 s waiting" */
static void print_train_steps(FILE *f, const msgpack_object *d)
{
        char a[4][32];

        if (!ctlc_get(d, "step_max_ms"))
                return; /* an older node */
        fprintf(f,
                "%-10s pace %s ms, longest %s ms at step %s (%s ms "
                "waiting), ",
                "steps",
                fmt_float(ctlc_get(d, "step_pace_ms"), "%.1f", a[0], 32),
                fmt_float(ctlc_get(d, "step_max_ms"), "%.1f", a[1], 32),
                fmt_num(ctlc_get(d, "step_max_at"), a[2], 32),
                fmt_float(ctlc_get(d, "step_max_wait_ms"), "%.1f", a[3], 32));
        fprintf(f, "%s slow (over 2x the pace): %s ms, %s ms waiting\n",
                fmt_num(ctlc_get(d, "steps_slow"), a[0], 32),
                fmt_float(ctlc_get(d, "slow_ms"), "%.0f", a[1], 32),
                fmt_float(ctlc_get(d, "slow_wait_ms"), "%.0f", a[2], 32));
}

static void print_train(FILE *f, const msgpack_object *d)
{
        char a[64];
        const msgpack_object *run = ctlc_get(d, "running");

        fprintf(f, "%-10s %s\n", "state",
                ctlc_str(ctlc_get(d, "state"), a, sizeof(a)));
        fprintf(f, "%-10s %s\n", "model",
                ctlc_str(ctlc_get(d, "model"), a, sizeof(a)));
        fprintf(f, "%-10s %s\n", "step",
                fmt_num(ctlc_get(d, "step"), a, sizeof(a)));
        fprintf(f, "%-10s %s\n", "epoch",
                fmt_num(ctlc_get(d, "epoch"), a, sizeof(a)));
        fprintf(f, "%-10s %s\n", "loss",
                fmt_float(ctlc_get(d, "loss"), "%.4f", a, sizeof(a)));
        fprintf(f, "%-10s %s\n", "train acc",
                fmt_pct(ctlc_get(d, "train_acc"), a, sizeof(a)));
        fprintf(f, "%-10s %s\n", "test acc",
                fmt_pct(ctlc_get(d, "test_acc"), a, sizeof(a)));
        fprintf(f, "%-10s %s\n", "samples/s",
                fmt_float(ctlc_get(d, "samples_per_s"), "%.0f", a, sizeof(a)));
        fprintf(f, "%-10s %s\n", "samples",
                fmt_num(ctlc_get(d, "samples"), a, sizeof(a)));
        fprintf(f, "%-10s %s\n", "extra",
                fmt_num(ctlc_get(d, "extra_batches"), a, sizeof(a)));
        fprintf(f,
                "%-10s %s (peer states taken when far behind: %s; steps "
                "passed per step trained: %s)\n",
                "skipped", fmt_num(ctlc_get(d, "steps_skipped"), a, 21),
                fmt_num(ctlc_get(d, "refetches"), a + 21, 21),
                fmt_float(ctlc_get(d, "pace_ratio"), "%.2f", a + 42, 22));
        print_train_steps(f, d);
        fprintf(f, "%-10s %s\n", "lr",
                fmt_float(ctlc_get(d, "lr"), "%g", a, sizeof(a)));
        fprintf(f, "%-10s %s non-finite, ", "rollbacks",
                fmt_num(ctlc_get(d, "rollbacks_nonfinite"), a, sizeof(a)));
        fprintf(f, "%s loss explosion, ",
                fmt_num(ctlc_get(d, "rollbacks_loss"), a, sizeof(a)));
        fprintf(f, "%s worse than chance, %s parameter norm, ",
                fmt_num(ctlc_get(d, "rollbacks_chance"), a, 32),
                fmt_num(ctlc_get(d, "rollbacks_norm"), a + 32, 32));
        fprintf(f, "%s accuracy drop (last good: step %s)\n",
                fmt_num(ctlc_get(d, "rollbacks_accuracy"), a, 32),
                fmt_num(ctlc_get(d, "health_snapshot_step"), a + 32, 32));
        fprintf(f, "%-10s %s\n", "exchange",
                ctlc_str(ctlc_get(d, "exchange"), a, sizeof(a)));
        fprintf(f, "%-10s %s\n", "running",
                run && run->type == MSGPACK_OBJECT_BOOLEAN
                    ? (run->via.boolean ? "yes" : "no")
                    : "-");
}

/* Run a command whose text output is printer(data); --json prints data. */
static int cmd_simple(const struct opts *o, const char *cmd, const char *key,
                      const char *val,
                      void (*printer)(FILE *, const msgpack_object *))
{
        struct ctlc_resp r;
        int rc = call(o, cmd, key, val, &r, NULL, 0);

        if (rc != 0)
                return rc;
        if (!r.ok)
                return daemon_error(cmd, &r);
        if (o->json)
                rc = print_json(r.data);
        else
                printer(stdout, r.data);
        ctlc_resp_free(&r);
        return rc;
}

static void print_stats(FILE *f, const msgpack_object *d)
{
        print_node_stats(f, ctlc_get(d, "node"));
        print_peer_stats(f, ctlc_get(d, "peers"));
}

/* Unix seconds as "YYYY-MM-DD HH:MM:SS" (UTC), or "-". */
static const char *fmt_utc(const msgpack_object *o, char *buf, size_t len)
{
        int ok;
        time_t t = (time_t)ctlc_num(o, &ok);
        struct tm tm;

        if (!ok || !gmtime_r(&t, &tm) ||
            !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
                snprintf(buf, len, "-");
        return buf;
}

/* `certs`' list line(s): sequence, date, the serials four to a line. */
static void print_crl(FILE *f, const msgpack_object *l)
{
        const msgpack_object *s = ctlc_get(l, "serials");
        char a[32], b[32], serial[24];
        uint32_t n;

        if (!l || l->type != MSGPACK_OBJECT_MAP) {
                fprintf(f, "revocation list: none\n");
                return;
        }
        n = s && s->type == MSGPACK_OBJECT_ARRAY ? s->via.array.size : 0;
        fprintf(f, "revocation list: sequence %s, issued %s UTC, %u serial%s\n",
                fmt_num(ctlc_get(l, "seq"), a, sizeof(a)),
                fmt_utc(ctlc_get(l, "issued_at"), b, sizeof(b)), n,
                n == 1 ? "" : "s");
        for (uint32_t i = 0; i < n; i++)
                fprintf(f, "%s%s%s", i % 4 ? " " : "  ",
                        ctlc_str(&s->via.array.ptr[i], serial, sizeof(serial)),
                        i % 4 == 3 || i + 1 == n ? "\n" : "");
}

/* `certs`: every certificate the node holds (members, ourselves) and
 * every key it dropped on its certificate's word, then the list. */
static void print_certs(FILE *f, const msgpack_object *d)
{
        const msgpack_object *rows = ctlc_get(d, "certs");
        char name[64], serial[24], when[32], status[24], n[24];

        if (rows && rows->type == MSGPACK_OBJECT_ARRAY && rows->via.array.size)
                fprintf(f, "%-24s %-16s %-19s  %-13s %s\n", "NAME", "SERIAL",
                        "NOT AFTER (UTC)", "STATUS", "MEMBER");
        else
                fprintf(f, "no certificate held\n");
        for (uint32_t i = 0; rows && rows->type == MSGPACK_OBJECT_ARRAY &&
                             i < rows->via.array.size;
             i++) {
                const msgpack_object *m = &rows->via.array.ptr[i];
                const msgpack_object *mem = ctlc_get(m, "member");
                int member = mem && mem->type == MSGPACK_OBJECT_BOOLEAN &&
                             mem->via.boolean;

                fprintf(
                    f, "%-24s %-16s %-19s  %-13s ",
                    ctlc_str(ctlc_get(m, "name"), name, sizeof(name)),
                    ctlc_str(ctlc_get(m, "serial"), serial, sizeof(serial)),
                    fmt_utc(ctlc_get(m, "not_after"), when, sizeof(when)),
                    ctlc_str(ctlc_get(m, "status"), status, sizeof(status)));
                if (member)
                        fprintf(f, "yes\n");
                else
                        fprintf(f, "no, dropped (%s frames refused since)\n",
                                fmt_num(ctlc_get(m, "refused"), n, sizeof(n)));
        }
        print_crl(f, ctlc_get(d, "crl"));
}

static void print_version(FILE *f, const msgpack_object *d)
{
        char a[64], b[32];

        fprintf(f, "gossipctl %s, gossipnode %s (control protocol %s)\n",
                GN_VERSION, ctlc_str(ctlc_get(d, "version"), a, sizeof(a)),
                fmt_num(ctlc_get(d, "protocol"), b, sizeof(b)));
}

static void print_join(FILE *f, const msgpack_object *d)
{
        char a[32];
        const msgpack_object *j = ctlc_get(d, "joined");
        int joined = j && j->type == MSGPACK_OBJECT_BOOLEAN && j->via.boolean;

        fprintf(f, "join %s (%s alive)\n", joined ? "sent" : "not sent",
                fmt_num(ctlc_get(d, "alive"), a, sizeof(a)));
}

static void print_leave(FILE *f, const msgpack_object *d)
{
        fprintf(f, "leaving the cluster\n");
}

static void print_force_leave(FILE *f, const msgpack_object *d)
{
        char a[64], b[16];

        fprintf(f, "%s: %s\n", ctlc_str(ctlc_get(d, "name"), a, sizeof(a)),
                ctlc_str(ctlc_get(d, "state"), b, sizeof(b)));
}

/* Is s a padded base64 Ed25519 public key (44 chars -> 32 bytes)? */
static int is_public_key(const char *s)
{
        unsigned char pk[32];
        size_t got = 0, len = strlen(s);
        const char *end = NULL;

        return len == 44 &&
               sodium_base642bin(pk, sizeof(pk), s, len, NULL, &got, &end,
                                 sodium_base64_VARIANT_ORIGINAL) == 0 &&
               got == sizeof(pk) && end == s + len;
}

static int cmd_force_leave(const struct opts *o)
{
        /* a 44-char base64 public key names a member by key */
        int is_key = is_public_key(o->arg);

        return cmd_simple(o, "force-leave", is_key ? "key" : "name", o->arg,
                          print_force_leave);
}

/* ---- watch ------------------------------------------------------------- */

static void on_sigint(int sig)
{
        g_stop = 1;
}

/* One refresh. On a terminal it clears the screen first; into a pipe or
 * a file it writes no screen codes, refreshes separated by a blank line. */
static void watch_once(const struct opts *o, FILE *f, int tty)
{
        struct ctlc_resp r;
        char err[700], ts[32], a[32], b[32], c[32], d[32], e[32], g[32];
        time_t now = time(NULL);

        strftime(ts, sizeof(ts), "%H:%M:%S", localtime(&now));
        fprintf(f, "%sgossipctl watch  %s  %s  (every %gs, Ctrl-C quits)\n\n",
                tty ? "\033[H\033[2J" : "", o->socket, ts, o->interval_s);
        if (call(o, "train", NULL, NULL, &r, err, sizeof(err)) != 0) {
                fprintf(f, "%s\n", err);
                return;
        }
        if (r.ok)
                fprintf(
                    f,
                    "step %s  epoch %s  loss %s  train acc %s  test acc "
                    "%s  %s samples/s\n\n",
                    fmt_num(ctlc_get(r.data, "step"), a, sizeof(a)),
                    fmt_num(ctlc_get(r.data, "epoch"), b, sizeof(b)),
                    fmt_float(ctlc_get(r.data, "loss"), "%.4f", c, sizeof(c)),
                    fmt_pct(ctlc_get(r.data, "train_acc"), d, sizeof(d)),
                    fmt_pct(ctlc_get(r.data, "test_acc"), e, sizeof(e)),
                    fmt_float(ctlc_get(r.data, "samples_per_s"), "%.0f", g,
                              sizeof(g)));
        ctlc_resp_free(&r);
        if (call(o, "members", NULL, NULL, &r, err, sizeof(err)) != 0) {
                fprintf(f, "%s\n", err);
                return;
        }
        if (r.ok && r.data && r.data->type == MSGPACK_OBJECT_ARRAY)
                print_members(r.data, NULL, 0, f);
        ctlc_resp_free(&r);
}

static int cmd_watch(const struct opts *o)
{
        struct sigaction sa;
        struct timespec ts;
        long n = 0;
        int tty = isatty(STDOUT_FILENO);

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_sigint;
        sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: nanosleep returns */
        sigaction(SIGTERM, &sa, NULL);
        while (!g_stop) {
                if (n > 0 && !tty)
                        fputc('\n', stdout);
                watch_once(o, stdout, tty);
                fflush(stdout);
                if (o->count > 0 && ++n >= o->count)
                        break;
                ts.tv_sec = (time_t)o->interval_s;
                ts.tv_nsec = (long)((o->interval_s - (double)ts.tv_sec) * 1e9);
                nanosleep(&ts, NULL);
        }
        return EXIT_OK;
}

/* ---- command line ------------------------------------------------------ */

/* The value of option name at argv[*i] ("--name V" or "--name=V"), or NULL
 * if argv[*i] is not that option. Sets *missing when the value is absent. */
static const char *opt_value(int argc, char **argv, int *i, const char *name,
                             int *missing)
{
        size_t n = strlen(name);
        const char *a = argv[*i];

        if (strncmp(a, name, n) != 0)
                return NULL;
        if (a[n] == '=')
                return a + n + 1;
        if (a[n] != '\0')
                return NULL;
        if (*i + 1 >= argc) {
                *missing = 1;
                return NULL;
        }
        return argv[++*i];
}

static int parse_number(const char *s, double lo, double hi, double *out)
{
        char *end;
        double v = strtod(s, &end);

        if (*s == '\0' || *end != '\0' || !(v >= lo && v <= hi))
                return -1;
        *out = v;
        return 0;
}

/* Handle one option at argv[*i]. 0 ok, 1 --help, 2 --version, -1 error
 * (printed). */
static int parse_option(int argc, char **argv, int *i, struct opts *o,
                        int *seen_status, int *seen_watch)
{
        int missing = 0;
        const char *v;
        double d;

        if (strcmp(argv[*i], "--json") == 0) {
                o->json = 1;
        } else if (strcmp(argv[*i], "--help") == 0 ||
                   strcmp(argv[*i], "-h") == 0) {
                return 1;
        } else if (strcmp(argv[*i], "--version") == 0) {
                return 2;
        } else if ((v = opt_value(argc, argv, i, "--socket", &missing))) {
                o->socket = v;
        } else if ((v = opt_value(argc, argv, i, "--status", &missing))) {
                o->status = v;
                *seen_status = 1;
        } else if ((v = opt_value(argc, argv, i, "--timeout", &missing))) {
                if (parse_number(v, 1, 3600e3, &d) < 0)
                        return usage_error("--timeout: bad value '%s'", v);
                o->timeout_ms = (int)d;
        } else if ((v = opt_value(argc, argv, i, "--interval", &missing))) {
                if (parse_number(v, 0.05, 86400, &d) < 0)
                        return usage_error("--interval: bad value '%s'", v);
                o->interval_s = d;
                *seen_watch = 1;
        } else if ((v = opt_value(argc, argv, i, "--count", &missing))) {
                if (parse_number(v, 1, 1e9, &d) < 0)
                        return usage_error("--count: bad value '%s'", v);
                o->count = (long)d;
                *seen_watch = 1;
        } else {
                return usage_error(missing ? "%s needs a value"
                                           : "unknown option %s",
                                   argv[*i]);
        }
        return 0;
}

/* Parse argv into o. 0 ok, 1 --help, 2 --version, -1 error (printed). */
static int parse_args(int argc, char **argv, struct opts *o)
{
        const char *pos[3] = {NULL, NULL, NULL};
        int npos = 0, seen_status = 0, seen_watch = 0, rc;

        for (int i = 1; i < argc; i++) {
                if (argv[i][0] == '-' && argv[i][1] != '\0') {
                        rc = parse_option(argc, argv, &i, o, &seen_status,
                                          &seen_watch);
                        if (rc != 0)
                                return rc;
                } else if (npos < 3) {
                        pos[npos++] = argv[i];
                } else {
                        return usage_error("too many arguments (at '%s')",
                                           argv[i]);
                }
        }
        if (npos == 0)
                return usage_error("%s", "no command given");
        o->cmd = pos[0];
        o->arg = pos[1];
        int wants_arg =
            strcmp(o->cmd, "join") == 0 || strcmp(o->cmd, "force-leave") == 0;
        if (wants_arg && npos != 2)
                return usage_error("%s needs exactly one argument", o->cmd);
        if (!wants_arg && npos != 1)
                return usage_error("%s takes no arguments", o->cmd);
        if (seen_status && strcmp(o->cmd, "members") != 0)
                return usage_error("--status only applies to members (not %s)",
                                   o->cmd);
        if (o->json && strcmp(o->cmd, "watch") == 0)
                return usage_error("%s", "watch has no --json output");
        if (seen_watch && strcmp(o->cmd, "watch") != 0)
                return usage_error("--interval/--count only apply to watch "
                                   "(not %s)",
                                   o->cmd);
        return 0;
}

int main(int argc, char **argv)
{
        struct opts o = {.timeout_ms = CTLC_TIMEOUT_MS,
                         .interval_s = WATCH_DEFAULT_S};
        int rc;

        o.socket = getenv("GOSSIPNODE_SOCKET");
        if (o.socket == NULL || *o.socket == '\0')
                o.socket = CTL_DEFAULT_SOCKET;
        rc = parse_args(argc, argv, &o);
        if (rc == 2) {
                printf("gossipctl %s\n", GN_VERSION);
                return EXIT_OK;
        }
        if (rc != 0) {
                if (rc > 0)
                        fputs(usage_text, stdout);
                return rc > 0 ? EXIT_OK : EXIT_USAGE;
        }
        if (sodium_init() < 0)
                return EXIT_ERR;
        if (strcmp(o.cmd, "members") == 0)
                return cmd_members(&o);
        if (strcmp(o.cmd, "stats") == 0)
                return cmd_simple(&o, "stats", NULL, NULL, print_stats);
        if (strcmp(o.cmd, "certs") == 0)
                return cmd_simple(&o, "certs", NULL, NULL, print_certs);
        if (strcmp(o.cmd, "train") == 0)
                return cmd_simple(&o, "train", NULL, NULL, print_train);
        if (strcmp(o.cmd, "version") == 0)
                return cmd_simple(&o, "version", NULL, NULL, print_version);
        if (strcmp(o.cmd, "join") == 0)
                return cmd_simple(&o, "join", "addr", o.arg, print_join);
        if (strcmp(o.cmd, "leave") == 0)
                return cmd_simple(&o, "leave", NULL, NULL, print_leave);
        if (strcmp(o.cmd, "force-leave") == 0)
                return cmd_force_leave(&o);
        if (strcmp(o.cmd, "watch") == 0)
                return cmd_watch(&o);
        usage_error("unknown command '%s'", o.cmd);
        return EXIT_USAGE;
}
