/*
 * settings.h - the cluster-wide settings this node joins with, built in
 * one place from its options (gossip/settings.h carries and compares
 * them; docs/design.md, "Settings agreed at join", says why each one is
 * in or deliberately out).
 *
 * In: what every member must share for the exchange to work at all:
 *   avg_every     K0, the base averaging period: rounds (step / K) name
 *                 the slice and its ring slot; the K in force above K0
 *                 is agreed at run time (gossip_adapt_agree) only
 *                 between nodes that start from the same K0
 *   adapt         "on" / "off": whether the period follows the links
 *                 (a fixed node does not follow an agreed K)
 *   model         the model spec (canonical when it names its input)
 *   params        the parameter count (the layout slices index into;
 *                 also tells input shapes apart when the spec does not)
 *   params_parts  P, the slices a model is cut into (slice layout)
 *   seed          the partner schedule's seed (--seed): a different
 *                 seed means a different schedule, and every slice is
 *                 refused as `not_partner`
 *
 * Pure: no clocks, sockets or threads; the caller owns everything.
 */
#ifndef NODE_SETTINGS_H
#define NODE_SETTINGS_H

#include <stddef.h>

#include "config/options.h"
#include "gossip/settings.h"

/* Fill *out from the options and the model's parameter count. 0, or a
 * GOSSIP_EINVAL from gossip_settings_set (text that cannot be carried:
 * never for options node_options_parse accepted). */
int node_settings_build(const struct node_options *o, size_t nparams,
                        struct gossip_settings *out);

#endif
