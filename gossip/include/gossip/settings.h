/*
 * settings.h - the cluster-wide settings a node joins with, and the rule
 * that says whether two nodes can train together.
 *
 * Some settings must be equal on every member or the exchange quietly
 * fails: the schedule's seed (each node would compute a different
 * partner schedule and refuse the others' slices as `not_partner`), the
 * model and its parameter count, the slice layout, the wire version. The
 * daemon lists them as (name, value) text pairs; gossip carries the list
 * in JOIN and SYNC (docs/protocol.md 3.1, key 19) and a 64-bit digest of
 * it in each member's alive update (3.2, element 7). A member whose
 * digest differs from ours is refused: never in our view, never a
 * partner, its frames counted under `settings`; when its full list
 * arrives, the first differing setting is named with both values.
 *
 * Pure: no clocks, sockets or threads. The caller owns the arrays it
 * passes; gossip_settings_set copies what it is given.
 */
#ifndef GOSSIP_SETTINGS_H
#define GOSSIP_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

/* Bounds on the wire (docs/protocol.md 3.1, key 19): a handful of
 * settings, each a short name and a value that fits a model spec. */
#define GOSSIP_SETTINGS_MAX      16
#define GOSSIP_SETTING_NAME_MAX  16 /* bytes, with the NUL */
#define GOSSIP_SETTING_VALUE_MAX 64 /* bytes, with the NUL */

struct gossip_setting {
        char name[GOSSIP_SETTING_NAME_MAX];
        char value[GOSSIP_SETTING_VALUE_MAX];
};

/* A node's list, in canonical order (names strictly ascending), and its
 * digest (never 0: 0 on the wire means "not told"). */
struct gossip_settings {
        struct gossip_setting s[GOSSIP_SETTINGS_MAX];
        size_t n;
        uint64_t digest;
};

/* Fill *out from n (name, value) pairs in any order: names are sorted,
 * and the digest computed. GOSSIP_EINVAL for more than
 * GOSSIP_SETTINGS_MAX pairs, an empty or repeated name, text too long or
 * with a byte below 0x20 or 0x7f. */
int gossip_settings_set(struct gossip_settings *out, const char *const *names,
                        const char *const *values, size_t n);

/* The digest of a canonical list (BLAKE2b, first 8 bytes little-endian,
 * 0 mapped to 1): what gossip_settings_set stores in ->digest. */
uint64_t gossip_settings_digest(const struct gossip_setting *s, size_t n);

/* The first setting on which ours and theirs differ, walking the union
 * of names in order: its name, and each side's value ("" for a side that
 * does not have it). 1 when one was found, 0 when the lists are equal. */
int gossip_settings_diff(const struct gossip_settings *ours,
                         const struct gossip_settings *theirs,
                         const char **name, const char **our_value,
                         const char **their_value);

#endif
