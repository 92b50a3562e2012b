/*
 * kernel.h - choosing BLIS's kernel set (sub-configuration) by measurement.
 *
 * BLIS picks its kernels once, at its initialisation, from CPUID or from
 * BLIS_ARCH_TYPE (a number in BLIS 0.9).  Its CPUID guess is not always the
 * fastest for our shapes (on an AVX-512 host it may take AVX2 kernels; on a
 * CPU newer than the BLIS release it takes the slow reference ones), and
 * Debian's libblis.so cannot switch sets inside one process.  So
 * node_kernel_choose() times the model's own GEMM shapes under each
 * candidate in a child process of its own (fork, BLIS_ARCH_TYPE set, BLIS
 * initialised there, result through a pipe), keeps the fastest, caches the
 * choice in a small text file keyed by CPU, BLIS version and shapes, and
 * sets BLIS_ARCH_TYPE in this process.  It must run before BLIS's first
 * call (nn_lib_init).  main() chooses before any thread starts when no
 * probe is needed (an override, the environment, a cache hit: cheap);
 * a probe, which takes seconds on a slow device, runs on the training
 * thread while the loop already answers membership (docs/design.md,
 * "Join first").  Then the loop thread runs beside the forks and the
 * setenv: each child execs nothing, resets the loop's signal handlers to
 * the defaults (a stop that reaches the cgroup ends it) and only starts
 * BLIS and times GEMMs; this process sets BLIS_ARCH_TYPE once, the one
 * variable it adds to its environment after start, which glibc does
 * without freeing the array a concurrent getenv() reads.  A child that crashes
 * (missing instruction, BLIS abort) is dropped; one that overruns its
 * deadline is tried again with a longer one (a slow CPU) until the
 * probe's cap, NODE_KERNEL_PROBE_MAX_MS.  If no candidate finished, BLIS
 * makes its own choice and the description says so: never no kernel set.
 *
 * Cache file: $XDG_CACHE_HOME/gossipnode/blis-arch, else
 * $HOME/.cache/gossipnode/blis-arch: the answer belongs to the machine, not
 * to one node's checkpoint (several nodes on one host share it).  One line
 * per key, written to a temporary file and renamed; unreadable, foreign
 * (other CPU or BLIS) or unusable lines are ignored, never trusted.
 */
#ifndef NODE_KERNEL_H
#define NODE_KERNEL_H

#include <stddef.h>

enum {
        /* Candidates BLIS may offer on one architecture family (x86: 13). */
        NODE_KERNEL_CAND_MAX = 32,
        /* Default measuring time per candidate in ms (two rounds of half):
         * about 15 repetitions of the MLP's GEMMs at good speed; 7 usable
         * sets on an AVX-512 x86 then cost ~0.35 s in all. */
        NODE_KERNEL_BUDGET_MS = 40,
        /* The whole probe's wall-clock cap in ms. A candidate that has not
         * answered by its deadline (0.5 s + 6 budgets) is tried again with
         * 8x the wait while this allows: a slow CPU (a Pi under a cgroup
         * quota, qemu-user) needs seconds for the three repetitions a
         * child always runs. Past it BLIS's own choice is used. */
        NODE_KERNEL_PROBE_MAX_MS = 30000,
};

struct node_kernel_req {
        const char *spec;       /* model spec as the user gave it */
        int batch;              /* samples per thread per step */
        const char *override;   /* NULL: cache or probe; "blis": BLIS's own
                                   choice; "probe": measure again; else a
                                   kernel set's name */
        const char *cache_path; /* NULL: the default path; "": no cache */
        int budget_ms;          /* per candidate; 0: NODE_KERNEL_BUDGET_MS */
        int probe_max_ms;       /* 0: NODE_KERNEL_PROBE_MAX_MS */
        int child_delay_ms;     /* tests: each child first sleeps this
                                   long, as on a slow CPU; 0 otherwise */
        int no_probe;           /* 1: where a probe would run, choose
                                   nothing and return -EAGAIN (the
                                   caller probes later, on a thread) */
};

struct node_kernel_cand {
        char name[24];
        double ms; /* the shapes' summed best times; < 0: failed */
};

struct node_kernel {
        char arch[24];   /* the set chosen; "" when BLIS decides */
        const char *how; /* "probed", "cached", "--blis-arch",
                            "BLIS_ARCH_TYPE" (environment), "blis" */
        double probe_s;  /* wall time of the probe; 0 if none ran */
        int ncand;       /* candidates probed */
        struct node_kernel_cand cand[NODE_KERNEL_CAND_MAX];
        char cache_note[96]; /* why the cache was not used/written, or "" */
};

/* Chooses the kernel set as req says and sets BLIS_ARCH_TYPE accordingly
 * (or leaves BLIS to decide).  Returns 0, -EAGAIN (req->no_probe and a
 * probe is due: nothing set), or -EINVAL (unknown or unusable
 * --blis-arch name; message in err); a bad spec or a failing cache
 * is not an error (noted in k->cache_note). */
int node_kernel_choose(const struct node_kernel_req *req, struct node_kernel *k,
                       char *err, size_t errlen);

/* node_kernel_choose, then BLIS's start (nn_lib_init), and one line in
 * `line` saying what BLIS really runs (node_kernel_describe).  0,
 * -EAGAIN (req->no_probe: nothing done, call again without it), -EINVAL
 * (a bad --blis-arch) or -EIO (BLIS did not start), message in err.
 * Once it has succeeded, BLIS is started (node_kernel_started) and
 * nn_lib_finalize is the caller's at exit. */
int node_kernel_setup(const struct node_kernel_req *req, char *line, size_t len,
                      char *err, size_t errlen);

/* 1 once node_kernel_setup has started BLIS (any thread). */
int node_kernel_started(void);

/* 1 while the last node_kernel_setup left its probe for later (no_probe,
 * -EAGAIN): the trainer then runs it (any thread). */
int node_kernel_pending(void);

/* Writes one line describing k ("zen3 (probed in 0.31 s: skx 2.10 ms,
 * zen3 1.87 ms, ...)") into buf. */
void node_kernel_describe(const struct node_kernel *k, char *buf, size_t len);

/* The text of the last node_kernel_describe() call ("" before any): the
 * daemon logs it at start when main() chose, else the trainer when it
 * has probed. */
const char *node_kernel_summary(void);

/* The CPU's identity as the cache keys it: vendor, family, model, stepping,
 * model name and a hash of the feature flags (x86), or implementer, part,
 * variant, revision and features (ARM), from /proc/cpuinfo.  0 or -errno. */
int node_kernel_cpu_key(char *buf, size_t len);

/* The default cache path into buf; -ENOENT if neither $XDG_CACHE_HOME nor
 * $HOME is set. */
int node_kernel_cache_path(char *buf, size_t len);

#endif
