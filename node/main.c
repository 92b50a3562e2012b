/*
 * main.c - gossipnode's entry point: parse the command line, initialise the
 * libraries once before any thread starts, run the daemon, map the outcome
 * to an exit status (0 done, 1 runtime error, 2 bad command line).
 *
 * This is the only place that prints errors to the user and decides the
 * exit status; everything below returns codes and messages.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <sodium.h>

#include "daemon.h"
#include <signal.h>

#include "evlog.h"
#include "kernel.h"
#include "nn.h"
#include "options.h"
#include "version.h"

/* Chooses BLIS's kernels (before its first call: kernel.h) and starts
 * BLIS; 0, or 2 for a bad --blis-arch, 1 otherwise, message in err. */
static int kernel_setup(const struct node_options *o, char *line, size_t len,
                        char *err, size_t errlen)
{
        struct node_kernel k;
        struct node_kernel_req req = {
            .spec = o->model,
            .batch = (int)((o->batch + o->threads - 1) / o->threads),
            .override = o->blis_arch,
        };
        int rc = node_kernel_choose(&req, &k, err, errlen);

        if (rc)
                return rc == -EINVAL ? 2 : 1;
        if (nn_lib_init() != 0) {
                snprintf(err, errlen, "cannot initialise BLIS");
                return 1;
        }
        /* what BLIS really runs, whoever chose it */
        snprintf(k.arch, sizeof(k.arch), "%s", nn_blis_arch_active());
        node_kernel_describe(&k, line, len);
        return 0;
}

int main(int argc, char **argv)
{
        struct node_options o;
        char err[1024] = "", kline[512];
        int rc;

        rc = node_options_parse(argc, argv, &o, err, sizeof(err));
        if (rc == NODE_OPT_HELP) {
                fputs(node_options_help(), stdout);
                return 0;
        }
        if (rc && rc != NODE_OPT_VERSION) {
                fprintf(stderr, "gossipnode: %s\n", err);
                return 2;
        }
        if (sodium_init() < 0) {
                fprintf(stderr, "gossipnode: cannot initialise libsodium\n");
                return 1;
        }
        if (rc == NODE_OPT_VERSION) {
                rc = kernel_setup(&o, kline, sizeof(kline), err, sizeof(err));
                printf("gossipnode %s\n%s\n", node_version(), rc ? err : kline);
                nn_lib_finalize();
                return 0;
        }
        rc = kernel_setup(&o, kline, sizeof(kline), err, sizeof(err));
        if (rc) {
                fprintf(stderr, "gossipnode: %s\n", err);
                return rc;
        }
        /* libuv writes with write(2): a peer or gossipctl that hangs up
         * mid-write must be an EPIPE error on that stream, not our death. */
        signal(SIGPIPE, SIG_IGN);
        node_log_setup(stderr, o.name ? o.name : "node", o.log_level);
        rc = node_daemon_run(&o, err, sizeof(err));
        nn_lib_finalize();
        if (rc) {
                fprintf(stderr, "gossipnode: %s\n", err);
                return 1;
        }
        return 0;
}
