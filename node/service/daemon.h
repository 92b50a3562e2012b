/*
 * daemon.h - the gossipnode process: one libuv loop on the main thread,
 * the trainer on its own thread, and the cluster between them.
 *
 * The loop thread owns the transport (node/net/net.h), the protocol core
 * (gossip/gossip.h), the control socket and metrics; the training thread
 * owns the model. They meet in a small exchange box under a mutex: the
 * trainer posts its encoded gradient and wakes the loop with uv_async_send;
 * the loop sends it to the step's partner and drops received gradients into
 * the box, which the trainer merges at its next step without waiting
 * (unless --wait-ms). See docs/design.md of the project and the comments in
 * daemon.c for the protocol of the box.
 *
 * Without --peers the daemon runs the loop only for signals: the node
 * trains alone.
 */
#ifndef NODE_DAEMON_H
#define NODE_DAEMON_H

#include <stddef.h>

#include "config/options.h"

/* node_daemon_run's outcome when the cluster refused us: members run
 * other cluster settings and none with ours was alive (main exits 78,
 * EX_CONFIG). */
enum { NODE_DAEMON_REFUSED = 1 };

/* Run the node described by o until training stops or a signal asks it
 * to. 0 on a clean finish (including SIGTERM/SIGINT), NODE_DAEMON_REFUSED
 * with one line in err naming the setting, or a negative code with one
 * line in err (set-up failure such as a missing data set, a bad key or
 * peers file, a port in use, a corrupt checkpoint; or a training error).
 * The caller must have called sodium_init/nn_lib_init first. */
int node_daemon_run(const struct node_options *o, char *err, size_t errlen);

#endif
