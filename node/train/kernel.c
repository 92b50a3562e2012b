/*
 * kernel.c - BLIS's kernel set chosen by measurement (see kernel.h).
 *
 * Order of business in node_kernel_choose: an explicit --blis-arch wins,
 * then BLIS_ARCH_TYPE from the environment (the user's own override), then
 * a cache line with this CPU's, this BLIS's and these shapes' key, then a
 * probe.  The probe forks one child per candidate and round (before
 * BLIS's first call; on the training thread while the loop runs: kernel.h
 * says why that is safe), and
 * each child initialises BLIS with its own BLIS_ARCH_TYPE, times every
 * shape repeatedly for its share of the budget and writes the sum of the
 * shapes' best times to a pipe.  The shapes are the model's own (nn/) at
 * the per-thread batch, scaled down so that one repetition stays near
 * PROBE_FLOPS: kernel speed is settled well before that size.
 */
#include "train/kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nn/nn.h"

enum {
        /* GEMMs of one step a model may have (3 per layer). */
        SHAPES_MAX = 96,
        /* Longest cache line we read; longer ones are not ours. */
        LINE_MAX_ = 512,
        /* Lines kept in the cache file (one per CPU/BLIS/shapes). */
        CACHE_LINES_MAX = 32,
        /* Rounds over the candidates: a burst of load from elsewhere then
         * has to hit the same candidate twice to change the answer. */
        ROUNDS = 2,
};

/* Floating-point work of one repetition: the MLP 784-512-10 at batch 100
 * (~165 MFLOP, ~2 ms on AVX2) fits; a CNN's im2col GEMMs get fewer samples. */
#define PROBE_FLOPS 2.0e8
/* Rounds after the first measure again only the sets within this factor
 * of the fastest so far: on this host the lead's margin over the next set
 * was 1.43-1.57x at full speed and at 6 % of a core (skx against zen3). */
#define REMEASURE_MARGIN 1.25
/* A child gets this multiple of its budget (plus start-up) before it is
 * killed: the reference kernels on a big shape would not finish in time,
 * and they are never the fastest where anything else runs. */
#define DEADLINE_FACTOR 6

static double clock_s(clockid_t id)
{
        struct timespec ts;

        clock_gettime(id, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void)
{
        return clock_s(CLOCK_MONOTONIC);
}

/* The CPU time a child's GEMM took: unlike the wall clock, not inflated
 * when a CPU quota (a Pi-class device in the fleet lab, a container)
 * throttles the child mid-measure, nor by other load; the process's, so
 * that a threaded BLIS counts every thread's work. */
static double cpu_s(void)
{
        return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

/* ---- the CPU's key ----------------------------------------------------- */

/* FNV-1a, 32 bits: names a long flags line in a short key. */
static uint32_t fnv1a(const char *s)
{
        uint32_t h = 2166136261u;

        for (; *s; s++)
                h = (h ^ (uint8_t)*s) * 16777619u;
        return h;
}

/* Appends "field=value;" for the cpuinfo fields that identify a CPU. */
static void key_field(char *buf, size_t len, const char *name, const char *v)
{
        static const char *ids[] = {
            "vendor_id",        "cpu family",  "model",
            "stepping",         "model name",  "CPU implementer",
            "CPU architecture", "CPU variant", "CPU part",
            "CPU revision",
        };
        size_t used = strlen(buf);

        if (strcmp(name, "flags") == 0 || strcmp(name, "Features") == 0) {
                snprintf(buf + used, len - used, "%s#%08x;", name, fnv1a(v));
                return;
        }
        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
                if (strcmp(name, ids[i]) == 0) {
                        snprintf(buf + used, len - used, "%s=%s;", name, v);
                        return;
                }
}

int node_kernel_cpu_key(char *buf, size_t len)
{
        FILE *f = fopen("/proc/cpuinfo", "r");
        char line[4096];

        if (!f)
                return -errno;
        buf[0] = '\0';
        while (fgets(line, sizeof(line), f)) {
                char *colon = strchr(line, ':'), *end;

                if (line[0] == '\n' && buf[0])
                        break; /* the first processor's block is enough */
                if (!colon)
                        continue;
                for (end = colon;
                     end > line && (end[-1] == ' ' || end[-1] == '\t');)
                        end--;
                *end = '\0';
                colon++;
                colon += strspn(colon, " \t");
                colon[strcspn(colon, "\n")] = '\0';
                key_field(buf, len, line, colon);
        }
        fclose(f);
        for (char *p = buf; *p; p++)
                if (*p == '\t')
                        *p = ' ';
        return buf[0] ? 0 : -ENOENT;
}

int node_kernel_cache_path(char *buf, size_t len)
{
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        int n;

        if (xdg && xdg[0] == '/')
                n = snprintf(buf, len, "%s/gossipnode/blis-arch", xdg);
        else if (home && home[0] == '/')
                n = snprintf(buf, len, "%s/.cache/gossipnode/blis-arch", home);
        else
                return -ENOENT;
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- the cache file ---------------------------------------------------- */

/* The key of a cache line: "v1\tCPU\tBLIS\tSHAPES". */
static int cache_key(char *buf, size_t len, const char *shapes)
{
        char cpu[320];
        int rc = node_kernel_cpu_key(cpu, sizeof(cpu)), n;

        if (rc)
                return rc;
        n = snprintf(buf, len, "v1\t%s\t%s\t%s", cpu, nn_blis_version(),
                     shapes);
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The usable set named by the cache line for key, or -ENOENT. */
static int cache_lookup(const char *path, const char *key)
{
        FILE *f = fopen(path, "r");
        char line[LINE_MAX_];
        size_t kl = strlen(key);
        int id = -ENOENT;

        if (!f)
                return -ENOENT;
        while (fgets(line, sizeof(line), f)) {
                char *name = line + kl + 1;

                if (strncmp(line, key, kl) || line[kl] != '\t')
                        continue;
                name[strcspn(name, "\t\n")] = '\0';
                id = nn_blis_arch_id(name);
                if (id >= 0 && !nn_blis_arch_usable(id))
                        id = -ENOENT;
                id = id < 0 ? -ENOENT : id;
        }
        fclose(f);
        return id;
}

/* mkdir -p of path's directory (the last two levels at most: the cache
 * root may not exist yet on a fresh account). */
static void cache_mkdir(const char *path)
{
        char dir[LINE_MAX_];
        char *slash;

        snprintf(dir, sizeof(dir), "%s", path);
        slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return;
        *slash = '\0';
        if (mkdir(dir, 0755) == 0 || errno == EEXIST)
                return;
        slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return;
        *slash = '\0';
        mkdir(dir, 0755);
        *slash = '/';
        mkdir(dir, 0755);
}

/* Copies the lines of `in` whose key is not `key` (at most the newest
 * CACHE_LINES_MAX - 1) to out. */
static void cache_copy_others(FILE *in, FILE *out, const char *key)
{
        char lines[CACHE_LINES_MAX - 1][LINE_MAX_];
        size_t kl = strlen(key);
        int n = 0;
        char line[LINE_MAX_];

        while (fgets(line, sizeof(line), in)) {
                if (strncmp(line, "v1\t", 3) || !strchr(line, '\n'))
                        continue;
                if (strncmp(line, key, kl) == 0 && line[kl] == '\t')
                        continue;
                if (n == CACHE_LINES_MAX - 1) {
                        memmove(lines[0], lines[1],
                                sizeof(lines[0]) * (size_t)(n - 1));
                        n--;
                }
                memcpy(lines[n++], line, sizeof(line));
        }
        for (int i = 0; i < n; i++)
                fputs(lines[i], out);
}

/* Writes key -> name (and its time) into the cache file atomically. */
static int cache_store(const char *path, const char *key, const char *name,
                       double ms)
{
        char tmp[LINE_MAX_ + 32];
        FILE *in, *out;
        int rc = 0;

        cache_mkdir(path);
        snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
        out = fopen(tmp, "w");
        if (!out)
                return -errno;
        in = fopen(path, "r");
        if (in) {
                cache_copy_others(in, out, key);
                fclose(in);
        }
        fprintf(out, "%s\t%s\t%.4f\n", key, name, ms);
        if (fflush(out) || fsync(fileno(out)))
                rc = -errno;
        if (fclose(out) && !rc)
                rc = -errno;
        if (!rc && rename(tmp, path))
                rc = -errno;
        if (rc)
                unlink(tmp);
        return rc;
}

/* ---- the probe --------------------------------------------------------- */

static double shapes_flops(const struct nn_gemm_shape *s, int n)
{
        double f = 0;

        for (int i = 0; i < n; i++)
                f += 2.0 * s[i].m * s[i].n * s[i].k;
        return f;
}

/* Times the shapes under the BLIS this process has; returns the sum of
 * each shape's best time in ms, or -1 without memory. */
static double child_measure(const struct nn_gemm_shape *s, int n,
                            double budget_s)
{
        size_t na = 0, nb = 0, nc = 0;
        double best[SHAPES_MAX], sum = 0, end;
        float *a, *b, *c;

        for (int i = 0; i < n; i++) {
                size_t ea = (size_t)s[i].m * s[i].k,
                       eb = (size_t)s[i].k * s[i].n;
                size_t ec = (size_t)s[i].m * s[i].n;
                na = ea > na ? ea : na;
                nb = eb > nb ? eb : nb;
                nc = ec > nc ? ec : nc;
                best[i] = INFINITY;
        }
        a = malloc(na * sizeof(float));
        b = malloc(nb * sizeof(float));
        c = malloc(nc * sizeof(float));
        if (!a || !b || !c)
                return -1;
        for (size_t i = 0; i < na; i++)
                a[i] = (float)(i % 13) * 0.01f;
        for (size_t i = 0; i < nb; i++)
                b[i] = (float)(i % 7) * 0.01f;
        nn_lib_init();
        end = INFINITY;
        /* repetition 0 warms caches and BLIS's pools (its first GEMM took
         * 7-24 ms); then at least two timed ones, until the budget ends */
        for (int rep = 0; rep < 3 || now_s() < end; rep++) {
                if (rep == 1)
                        end = now_s() + budget_s;
                for (int i = 0; i < n; i++) {
                        const struct nn_gemm_shape *g = &s[i];
                        double t0 = cpu_s(), dt;

                        nn_gemm(g->transa, g->transb, g->m, g->n, g->k, 1.0f, a,
                                g->transa ? g->m : g->k, b,
                                g->transb ? g->k : g->n, 0.0f, c, g->n);
                        dt = cpu_s() - t0;
                        if (rep > 0 && dt < best[i])
                                best[i] = dt;
                }
        }
        for (int i = 0; i < n; i++)
                sum += best[i] * 1e3;
        return sum;
}

/* What one probe of a candidate needs besides the shapes. */
struct probe_ctx {
        double budget_s; /* measuring time per child */
        double wait_s;   /* how long the parent waits for a child; grows */
        double end;      /* monotonic time the whole probe must end by */
        int child_delay_ms;
};

/* Runs child_measure in a child with BLIS_ARCH_TYPE = id; its result,
 * -1 if the child failed, or -2 if it overran the wait (capped by the
 * probe's end). */
static double probe_one(int id, const struct nn_gemm_shape *s, int n,
                        const struct probe_ctx *p)
{
        double r = -1, deadline = now_s() + p->wait_s;
        int fd[2], status, late = 0;
        pid_t pid;

        if (pipe(fd))
                return -1;
        pid = fork();
        if (pid == 0) {
                char v[16];

                close(fd[0]);
                /* the loop's handlers (libuv's) would keep a child that
                 * systemd's stop reaches alive until its deadline */
                signal(SIGTERM, SIG_DFL);
                signal(SIGINT, SIG_DFL);
                signal(SIGHUP, SIG_DFL);
                snprintf(v, sizeof(v), "%d", id);
                setenv("BLIS_ARCH_TYPE", v, 1);
                unsetenv("BLIS_ARCH_DEBUG");
                if (p->child_delay_ms)
                        nanosleep(
                            &(struct timespec){p->child_delay_ms / 1000,
                                               (p->child_delay_ms % 1000) *
                                                   1000000L},
                            NULL);
                r = child_measure(s, n, p->budget_s);
                if (write(fd[1], &r, sizeof(r)) != sizeof(r))
                        _exit(1);
                _exit(0);
        }
        close(fd[1]);
        if (deadline > p->end)
                deadline = p->end;
        if (pid > 0) {
                struct pollfd pf = {.fd = fd[0], .events = POLLIN};
                double left;
                int ready;

                /* a signal must not cut the wait short (poll is never
                 * restarted after a handler) */
                do {
                        left = deadline - now_s();
                        ready =
                            left > 0 ? poll(&pf, 1, (int)(left * 1e3) + 1) : 0;
                } while (ready < 0 && errno == EINTR);
                late = ready == 0;
                if (ready == 1 && read(fd[0], &r, sizeof(r)) != sizeof(r))
                        r = -1;
                if (r < 0 || !isfinite(r))
                        kill(pid, SIGKILL);
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                        ;
        }
        close(fd[0]);
        if (isfinite(r) && r > 0)
                return r;
        return late ? -2 : -1;
}

/* One candidate: a child that overran its wait is tried again with 8x
 * the wait (kept for the candidates after it: the CPU is slow) while
 * the probe's end allows; its time or < 0. */
static double probe_patient(int id, const struct nn_gemm_shape *s, int n,
                            struct probe_ctx *p)
{
        double ms = probe_one(id, s, n, p);

        while (ms == -2 && now_s() < p->end) {
                p->wait_s *= 8;
                ms = probe_one(id, s, n, p);
        }
        return ms;
}

/* Times every usable set; fills k->cand and returns the fastest's id, or
 * -ENOENT if none ran. */
static int probe_all(struct node_kernel *k, const struct nn_gemm_shape *s,
                     int n, struct probe_ctx *p)
{
        int ids[NODE_KERNEL_CAND_MAX], best = -ENOENT;
        double t0 = now_s();
        int gen = 0;

        /* Only the newest generation the CPU runs: the reference kernels
         * and the pre-FMA sets took 2-6x the time of every FMA set on our
         * shapes (docs/nn.md), and each candidate costs ~40 ms. */
        for (int id = 0; id < nn_blis_arch_count(); id++)
                if (nn_blis_arch_usable(id) > gen)
                        gen = nn_blis_arch_usable(id);
        k->ncand = 0;
        for (int id = 0; id < nn_blis_arch_count(); id++)
                if (nn_blis_arch_usable(id) == gen &&
                    k->ncand < NODE_KERNEL_CAND_MAX) {
                        snprintf(k->cand[k->ncand].name,
                                 sizeof(k->cand[0].name), "%s",
                                 nn_blis_arch_name(id));
                        k->cand[k->ncand].ms = -1;
                        ids[k->ncand++] = id;
                }
        for (int r = 0; r < ROUNDS; r++) {
                double lead = INFINITY; /* the best time so far */

                for (int i = 0; i < k->ncand; i++)
                        if (k->cand[i].ms > 0 && k->cand[i].ms < lead)
                                lead = k->cand[i].ms;
                for (int i = 0; i < k->ncand; i++) {
                        double *have = &k->cand[i].ms, ms;

                        /* Later rounds only for the contenders: a set
                         * REMEASURE_MARGIN slower than the lead would need
                         * a burst of load in its first round that large
                         * to have lost, and each child costs a Pi-class
                         * device ~0.5 s (docs/design.md, "Join first"). */
                        if (r > 0 && *have > 0 &&
                            *have > lead * REMEASURE_MARGIN)
                                continue;
                        ms = now_s() < p->end ? probe_patient(ids[i], s, n, p)
                                              : -1;
                        if (ms > 0 && (*have < 0 || ms < *have))
                                *have = ms;
                }
        }
        for (int i = 0; i < k->ncand; i++)
                if (k->cand[i].ms > 0 &&
                    (best < 0 || k->cand[i].ms < k->cand[best].ms))
                        best = i;
        k->probe_s = now_s() - t0;
        return best < 0 ? -ENOENT : ids[best];
}

/* The probe's shapes for the spec at batch (scaled down to PROBE_FLOPS),
 * and their key "SPEC/bB" into key. */
static int probe_shapes(const char *spec, int batch, struct nn_gemm_shape *s,
                        char *key, size_t keylen)
{
        char canon[NN_SPEC_MAX];
        int n;

        /* A spec without an input token (the "cnn" preset) gets the
         * default data set's shape: close enough to rank kernels. */
        if (nn_spec_canonical(spec, 0, 0, 0, canon, sizeof(canon)) &&
            nn_spec_canonical(spec, 1, 28, 28, canon, sizeof(canon)))
                return -EINVAL;
        /* the shapes without the model: no weights drawn before the join */
        n = nn_spec_gemm_shapes(canon, 0, 0, 0, batch, s, SHAPES_MAX);
        for (int i = 0; i < 8 && n > 0 && batch > 1; i++) {
                double f = shapes_flops(s, n < SHAPES_MAX ? n : SHAPES_MAX);

                if (f <= PROBE_FLOPS)
                        break;
                batch = (int)(batch * PROBE_FLOPS / f);
                batch = batch < 1 ? 1 : batch;
                n = nn_spec_gemm_shapes(canon, 0, 0, 0, batch, s, SHAPES_MAX);
        }
        if (n == NN_ENOMEM)
                return -ENOMEM;
        snprintf(key, keylen, "%s/b%d", canon, batch);
        return n < 0 ? -EINVAL : (n < SHAPES_MAX ? n : SHAPES_MAX);
}

/* ---- the choice -------------------------------------------------------- */

/* Makes set id BLIS's choice in this process (before its first call). */
static void arch_set(struct node_kernel *k, int id, const char *how)
{
        char v[16];

        snprintf(v, sizeof(v), "%d", id);
        setenv("BLIS_ARCH_TYPE", v, 1);
        snprintf(k->arch, sizeof(k->arch), "%s", nn_blis_arch_name(id));
        k->how = how;
}

/* --blis-arch NAME (not "blis" or "probe"). */
static int choose_named(const char *name, struct node_kernel *k, char *err,
                        size_t errlen)
{
        int id = nn_blis_arch_id(name);
        char list[256] = "";

        if (id >= 0 && nn_blis_arch_usable(id)) {
                arch_set(k, id, "--blis-arch");
                return 0;
        }
        for (int i = 0; i < nn_blis_arch_count(); i++)
                if (nn_blis_arch_usable(i)) {
                        size_t used = strlen(list);
                        snprintf(list + used, sizeof(list) - used, " %s",
                                 nn_blis_arch_name(i));
                }
        snprintf(err, errlen,
                 "--blis-arch: '%s' is not a kernel set this BLIS and CPU "
                 "can run (blis, probe or one of:%s)",
                 name, list);
        return -EINVAL;
}

/* Probes, sets and caches the fastest set. */
static int choose_probe(const struct node_kernel_req *req, const char *path,
                        struct node_kernel *k, char *err, size_t errlen)
{
        struct nn_gemm_shape s[SHAPES_MAX];
        char skey[NN_SPEC_MAX + 16], key[LINE_MAX_ - 64];
        double budget =
            (req->budget_ms > 0 ? req->budget_ms : NODE_KERNEL_BUDGET_MS) *
            1e-3;
        double cap = (req->probe_max_ms > 0 ? req->probe_max_ms
                                            : NODE_KERNEL_PROBE_MAX_MS) *
                     1e-3;
        struct probe_ctx p = {
            .budget_s = budget / ROUNDS,
            .wait_s = 0.5 + DEADLINE_FACTOR * budget / ROUNDS,
            .end = now_s() + cap,
            .child_delay_ms = req->child_delay_ms,
        };
        int n = probe_shapes(req->spec, req->batch, s, skey, sizeof(skey));
        int id, rc;

        if (n < 0) {
                /* the trainer reports a bad spec in its own words */
                snprintf(k->cache_note, sizeof(k->cache_note),
                         "no probe: model '%.40s' not understood", req->spec);
                return 0;
        }
        id = probe_all(k, s, n, &p);
        if (id < 0) {
                /* BLIS's own choice for this CPU: never no kernel set */
                k->how = "blis";
                snprintf(k->cache_note, sizeof(k->cache_note),
                         "no candidate finished in the probe's %.3g s "
                         "(a slow CPU?): BLIS's own choice",
                         cap);
                return 0;
        }
        arch_set(k, id, "probed");
        if (!path)
                return 0;
        rc = cache_key(key, sizeof(key), skey);
        if (!rc)
                for (int i = 0; i < k->ncand; i++)
                        if (strcmp(k->cand[i].name, k->arch) == 0)
                                rc = cache_store(path, key, k->arch,
                                                 k->cand[i].ms);
        if (rc)
                snprintf(k->cache_note, sizeof(k->cache_note), "not cached: %s",
                         strerror(-rc));
        return 0;
}

int node_kernel_choose(const struct node_kernel_req *req, struct node_kernel *k,
                       char *err, size_t errlen)
{
        const char *ov = req->override, *env = getenv("BLIS_ARCH_TYPE");
        char path[LINE_MAX_ - 64], skey[NN_SPEC_MAX + 16], key[LINE_MAX_ - 64];
        struct nn_gemm_shape s[SHAPES_MAX];
        int id;

        memset(k, 0, sizeof(*k));
        k->how = "blis";
        if (ov && strcmp(ov, "blis") == 0) {
                unsetenv("BLIS_ARCH_TYPE");
                return 0;
        }
        if (ov && strcmp(ov, "probe") != 0)
                return choose_named(ov, k, err, errlen);
        if (!ov && env && *env) {
                /* the user's own override, as BLIS would read it */
                const char *name = nn_blis_arch_name(atoi(env));

                snprintf(k->arch, sizeof(k->arch), "%s", name ? name : env);
                k->how = "BLIS_ARCH_TYPE";
                return 0;
        }
        if (req->cache_path)
                snprintf(path, sizeof(path), "%s", req->cache_path);
        else if (node_kernel_cache_path(path, sizeof(path)))
                path[0] = '\0';
        if (!ov && path[0] &&
            probe_shapes(req->spec, req->batch, s, skey, sizeof(skey)) > 0 &&
            cache_key(key, sizeof(key), skey) == 0 &&
            (id = cache_lookup(path, key)) >= 0) {
                arch_set(k, id, "cached");
                return 0;
        }
        if (req->no_probe)
                return -EAGAIN;
        return choose_probe(req, path[0] ? path : NULL, k, err, errlen);
}

/* Set once BLIS has started (node_kernel_setup), and while a choice
 * left to later (no_probe) waits for it. */
static atomic_int started, pending;

int node_kernel_setup(const struct node_kernel_req *req, char *line, size_t len,
                      char *err, size_t errlen)
{
        struct node_kernel k;
        int rc = node_kernel_choose(req, &k, err, errlen);

        atomic_store(&pending, rc == -EAGAIN);
        if (rc)
                return rc;
        if (nn_lib_init() != 0) {
                snprintf(err, errlen, "cannot initialise BLIS");
                return -EIO;
        }
        atomic_store(&started, 1);
        /* what BLIS really runs, whoever chose it */
        snprintf(k.arch, sizeof(k.arch), "%s", nn_blis_arch_active());
        node_kernel_describe(&k, line, len);
        return 0;
}

int node_kernel_started(void)
{
        return atomic_load(&started);
}

int node_kernel_pending(void)
{
        return atomic_load(&pending);
}

/* The last description made, for the daemon's or the trainer's log. */
static char summary[512];

const char *node_kernel_summary(void)
{
        return summary;
}

void node_kernel_describe(const struct node_kernel *k, char *buf, size_t len)
{
        size_t used;

        snprintf(buf, len, "BLIS %s, kernels %s (%s", nn_blis_version(),
                 k->arch[0] ? k->arch : "BLIS's own choice", k->how);
        used = strlen(buf);
        if (k->ncand && used < len)
                snprintf(buf + used, len - used, " in %.2f s:", k->probe_s);
        for (int i = 0; i < k->ncand && (used = strlen(buf)) < len; i++) {
                if (k->cand[i].ms > 0)
                        snprintf(buf + used, len - used, " %s %.2f ms",
                                 k->cand[i].name, k->cand[i].ms);
                else
                        snprintf(buf + used, len - used, " %s failed",
                                 k->cand[i].name);
        }
        used = strlen(buf);
        if (used < len)
                snprintf(buf + used, len - used, "%s%s)",
                         k->cache_note[0] ? "; " : "", k->cache_note);
        snprintf(summary, sizeof(summary), "%s", buf);
}
