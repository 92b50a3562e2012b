/*
 * main.c - gossipnode's entry point: parse the command line, initialise the
 * libraries once before any thread starts, run the daemon, map the outcome
 * to an exit status (0 done, 1 runtime error, 2 bad command line, 78
 * (EX_CONFIG) refused by the cluster for other cluster settings).
 *
 * This is the only place that prints errors to the user and decides the
 * exit status; everything below returns codes and messages. The config
 * file (node/config/conffile.h) becomes arguments in front of the command
 * line's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include <sodium.h>

#include <signal.h>
#include <unistd.h>

#include "config/check.h"
#include "config/conffile.h"
#include "service/daemon.h"
#include "service/sdnotify.h"

#include "service/evlog.h"
#include "train/kernel.h"
#include "nn/nn.h"
#include "config/options.h"
#include "config/settings.h"
#include "ident/authority.h"
#include "service/version.h"

/* Chooses BLIS's kernels (before its first call: kernel.h) and starts
 * BLIS; 0, 2 for a bad --blis-arch, 1 otherwise, message in err. With
 * defer, a choice that needs a probe is left to the trainer, which runs
 * it on its thread while the node is already a member (-EAGAIN: 0 here,
 * BLIS not started). */
static int kernel_setup(const struct node_options *o, int defer, char *line,
                        size_t len, char *err, size_t errlen)
{
        struct node_kernel_req req = {
            .spec = o->model,
            .batch = (int)((o->batch + o->threads - 1) / o->threads),
            .override = o->blis_arch,
            .no_probe = defer,
        };
        int rc = node_kernel_setup(&req, line, len, err, errlen);

        if (rc == -EAGAIN && defer)
                return 0;
        return rc == 0 ? 0 : rc == -EINVAL ? 2 : 1;
}

/* Is --check-config on the command line? Then every problem, a bad
 * config line included, exits 1 (as `nginx -t`), not 2. */
static int wants_check(int argc, char **argv)
{
        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], "--check-config") == 0)
                        return 1;
        return 0;
}

/* With --authority and no --seed, the cluster's seed is the authority's
 * (config/settings.h), before anything reads o->seed. A key that cannot
 * be read is left to the loader that reports it (the daemon's start or
 * --check-config). */
static void cluster_seed(struct node_options *o)
{
        uint8_t pk[GOSSIP_KEY_BYTES];

        if (o->authority_path && !o->seed_set && sodium_init() >= 0 &&
            node_authority_pub_load(o->authority_path, pk) == 0)
                node_settings_seed_from_authority(o, pk);
}

/* --check-config: the report on stdout and exit 0, or one line on stderr
 * and exit 1 (node/config/check.h). */
static int check_config(const struct node_options *o)
{
        static char report[8192];
        char err[1024] = "";
        int rc;

        if (sodium_init() < 0 || nn_lib_init() != 0) {
                fprintf(stderr, "gossipnode: cannot initialise libraries\n");
                return 1;
        }
        rc = node_check_config(o, report, sizeof(report), err, sizeof(err));
        nn_lib_finalize();
        fputs(report, stdout);
        if (rc) {
                fflush(stdout);
                fprintf(stderr, "gossipnode: %s\n", err);
                return 1;
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct node_options o;
        struct node_conf_argv ca;
        char err[1024] = "", kline[512];
        int rc;

        rc = node_conf_argv_build(argc, argv, &ca, err, sizeof(err));
        if (rc) {
                fprintf(stderr, "gossipnode: %s\n", err);
                return wants_check(argc, argv) ? 1 : 2;
        }
        /* o's strings point into ca.argv: it lives until we return */
        rc = node_options_parse(ca.argc, ca.argv, &o, err, sizeof(err));
        if (rc == NODE_OPT_HELP) {
                fputs(node_options_help(), stdout);
                printf("\nConfig file:\n"
                       "  --config FILE   read 'key = value' lines (long "
                       "option names) first;\n"
                       "                  default %s if it exists;\n"
                       "                  the command line wins\n"
                       "  --no-config     read no config file\n",
                       NODE_CONF_DEFAULT);
                rc = 0;
                goto out;
        }
        if (rc && rc != NODE_OPT_VERSION) {
                fprintf(stderr, "gossipnode: %s\n", err);
                rc = wants_check(argc, argv) ? 1 : 2;
                goto out;
        }
        if (rc == 0)
                cluster_seed(&o);
        if (rc == 0 && o.check_config) {
                rc = check_config(&o);
                goto out;
        }
        if (sodium_init() < 0) {
                fprintf(stderr, "gossipnode: cannot initialise libsodium\n");
                rc = 1;
                goto out;
        }
        if (rc == NODE_OPT_VERSION) {
                rc =
                    kernel_setup(&o, 0, kline, sizeof(kline), err, sizeof(err));
                printf("gossipnode %s\n%s\n", node_version(), rc ? err : kline);
                if (node_kernel_started())
                        nn_lib_finalize();
                rc = 0;
                goto out;
        }
        /* a probe would keep the node out of the cluster for seconds on a
         * slow device: the trainer runs it after the join */
        rc = kernel_setup(&o, 1, kline, sizeof(kline), err, sizeof(err));
        if (rc) {
                fprintf(stderr, "gossipnode: %s\n", err);
                goto out;
        }
        /* libuv writes with write(2): a peer or gossipctl that hangs up
         * mid-write must be an EPIPE error on that stream, not our death. */
        signal(SIGPIPE, SIG_IGN);
        node_log_setup(stderr, o.name ? o.name : "node", o.log_level);
        node_log_set_journal(node_sd_journal_stream(STDERR_FILENO));
        rc = node_daemon_run(&o, err, sizeof(err));
        if (node_kernel_started()) /* the trainer may have stopped first */
                nn_lib_finalize();
        if (rc) {
                fprintf(stderr, "%sgossipnode: %s\n",
                        node_sd_journal_stream(STDERR_FILENO) ? "<3>" : "",
                        err);
                /* a misconfigured node: the unit does not restart it
                 * (RestartPreventExitStatus=78, docs/operations.md) */
                rc = rc == NODE_DAEMON_REFUSED ? EX_CONFIG : 1;
        }
out:
        node_conf_argv_free(&ca);
        return rc;
}
