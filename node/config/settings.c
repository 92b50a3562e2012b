/*
 * settings.c - the node's cluster-wide settings from its options
 * (settings.h): one (name, value) text pair per setting, handed to
 * gossip_settings_set, which sorts them and computes the digest.
 *
 * With an authority, the seed is the authority's unless --seed says
 * otherwise (node_settings_seed_from_authority, called by main before
 * anything uses the options).
 *
 * A model spec may be longer than a setting value (63 bytes): it is then
 * cut to its first NODE_SETTINGS_SPEC_KEEP bytes and followed by '~' and
 * 16 hex digits of its BLAKE2b-64, so that two long specs that differ
 * past the cut still differ here and an operator still recognises them.
 */
#include "config/settings.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "base/gn_endian.h"
#include "nn/nn.h"

enum {
        /* bytes of a long spec kept before "~" and 16 hex digits: 44 + 17
         * = 61, below GOSSIP_SETTING_VALUE_MAX - 1 */
        NODE_SETTINGS_SPEC_KEEP = 44,
};

/* The spec as every node writes it: canonical when it names its input
 * (a preset or a spec without input token is kept as given: its shape
 * comes from the data, and `params` tells shapes apart), cut when long. */
static void model_value(const char *model, char *out, size_t outlen)
{
        char canon[NN_SPEC_MAX];
        uint8_t h[8];
        const char *s = model;

        if (nn_spec_canonical(model, 0, 0, 0, canon, sizeof(canon)) == 0)
                s = canon;
        if (strlen(s) < outlen) {
                snprintf(out, outlen, "%s", s);
                return;
        }
        crypto_generichash(h, sizeof(h), (const uint8_t *)s, strlen(s), NULL,
                           0);
        snprintf(out, outlen, "%.*s~%016" PRIx64, NODE_SETTINGS_SPEC_KEEP, s,
                 gn_le64_get(h));
}

int node_settings_build(const struct node_options *o, size_t nparams,
                        struct gossip_settings *out)
{
        char k0[24], params[24], parts[24], seed[24];
        char model[GOSSIP_SETTING_VALUE_MAX];
        const char *names[] = {"avg_every", "adapt",        "model",
                               "params",    "params_parts", "seed"};
        /* adapt: whether the node follows the agreed period; "on" for
         * --adapt cpu too (it follows it, and only adds a need) */
        const char *values[] = {
            k0, o->adapt ? "on" : "off", model, params, parts, seed};

        snprintf(k0, sizeof(k0), "%" PRIu32, o->avg_every);
        model_value(o->model, model, sizeof(model));
        snprintf(params, sizeof(params), "%zu", nparams);
        snprintf(parts, sizeof(parts), "%" PRIu32, o->params_parts);
        snprintf(seed, sizeof(seed), "%" PRIu64, o->seed);
        return gossip_settings_set(out, names, values,
                                   sizeof(names) / sizeof(names[0]));
}

uint64_t node_settings_authority_seed(const uint8_t pk[GOSSIP_KEY_BYTES])
{
        static const char tag[] = "gossipnode cluster seed";
        crypto_generichash_state st;
        uint8_t h[8];

        crypto_generichash_init(&st, NULL, 0, sizeof(h));
        crypto_generichash_update(&st, (const uint8_t *)tag, sizeof(tag) - 1);
        crypto_generichash_update(&st, pk, GOSSIP_KEY_BYTES);
        crypto_generichash_final(&st, h, sizeof(h));
        return gn_le64_get(h);
}

void node_settings_seed_from_authority(struct node_options *o,
                                       const uint8_t pk[GOSSIP_KEY_BYTES])
{
        if (o->seed_set)
                return;
        o->seed = node_settings_authority_seed(pk);
        if (!o->partition_seed_set)
                o->partition.seed = o->seed;
}
