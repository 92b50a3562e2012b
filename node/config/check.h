/*
 * check.h - gossipnode --check-config: validate a configuration without
 * starting (as `sshd -t`, `nginx -t`).
 *
 * Everything a start would refuse that can be judged without binding a
 * port or training is judged here: the peers file, the key and this
 * node's line (when --key is given), the addresses (--listen,
 * --advertise, --metrics, and what peers will be told), the data set and
 * the shard, the model spec against the data. What the service unit adds
 * on its own command line (--key, --checkpoint-dir, --control) may be
 * missing: the check says what it could not judge without them instead of
 * failing (node_options_parse relaxes those two "needs" rules under
 * --check-config). Directories the unit creates at start (the state
 * directory holding the event log) are noted, not refused.
 *
 * Nothing is printed: the report (one "key  value" line per setting, then
 * "config OK") goes into the caller's buffer; main() prints it.
 */
#ifndef NODE_CHECK_H
#define NODE_CHECK_H

#include <stddef.h>

#include "config/options.h"

/* Validate o. 0 with the report in out (truncated to outlen, always
 * NUL-terminated), or a negative code with one line in err naming the
 * setting and what is wrong (out then holds the lines judged so far).
 * Needs nn_lib_init() done (it builds the model once). */
int node_check_config(const struct node_options *o, char *out, size_t outlen,
                      char *err, size_t errlen);

#endif
