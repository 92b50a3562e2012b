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
 *   seed          the partner schedule's seed (--seed; with an
 *                 authority and no --seed, derived from the authority's
 *                 key, so that no device has to repeat a flag): a
 *                 different seed means a different schedule, and every
 *                 slice is refused as `not_partner`
 *
 * Pure: no clocks, sockets or threads; the caller owns everything.
 */
#ifndef NODE_SETTINGS_H
#define NODE_SETTINGS_H

#include <stddef.h>

#include "config/options.h"
#include "gossip/gossip_types.h"
#include "gossip/settings.h"

/* Fill *out from the options and the model's parameter count. 0, or a
 * GOSSIP_EINVAL from gossip_settings_set (text that cannot be carried:
 * never for options node_options_parse accepted). */
int node_settings_build(const struct node_options *o, size_t nparams,
                        struct gossip_settings *out);

/* The cluster seed of the authority whose public key is pk: the first 8
 * bytes of BLAKE2b-64("gossipnode cluster seed" || pk), little-endian
 * (docs/protocol.md 11.1, with a vector). */
uint64_t node_settings_authority_seed(const uint8_t pk[GOSSIP_KEY_BYTES]);

/* A node with an authority and no --seed takes the authority's seed as
 * its --seed (and, without --partition-seed, as the cut's): every device
 * of a cluster agrees on it without being told. Nothing changes when
 * --seed was given. */
void node_settings_seed_from_authority(struct node_options *o,
                                       const uint8_t pk[GOSSIP_KEY_BYTES]);

#endif
