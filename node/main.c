/*
 * main.c - gossipnode's entry point: parse the command line, initialise the
 * libraries once before any thread starts, run the daemon, map the outcome
 * to an exit status (0 done, 1 runtime error, 2 bad command line).
 *
 * This is the only place that prints errors to the user and decides the
 * exit status; everything below returns codes and messages.
 */
#include <stdio.h>
#include <stdlib.h>

#include <sodium.h>

#include "daemon.h"
#include <signal.h>

#include "evlog.h"
#include "nn.h"
#include "options.h"
#include "version.h"

int main(int argc, char **argv)
{
        struct node_options o;
        char err[1024] = "";
        int rc;

        rc = node_options_parse(argc, argv, &o, err, sizeof(err));
        if (rc == NODE_OPT_HELP) {
                fputs(node_options_help(), stdout);
                return 0;
        }
        if (rc == NODE_OPT_VERSION) {
                printf("gossipnode %s\n", node_version());
                return 0;
        }
        if (rc) {
                fprintf(stderr, "gossipnode: %s\n", err);
                return 2;
        }
        if (sodium_init() < 0 || nn_lib_init() != 0) {
                fprintf(stderr, "gossipnode: cannot initialise libsodium or "
                                "BLIS\n");
                return 1;
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
