/*
 * settings.c - a node's cluster-wide settings in canonical order, their
 * digest, and the first difference between two lists (settings.h).
 *
 * The digest hashes name NUL value NUL for each setting in order with
 * BLAKE2b-128 and keeps the first 8 bytes, little-endian
 * (docs/protocol.md 3.2, element 7): a third party recomputes it from
 * the list alone.
 */
#include "gossip/settings.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "base/gn_endian.h"
#include "gossip/gossip_types.h"

static int text_ok(const char *t, size_t max)
{
        size_t n = strnlen(t, max);

        if (n == max)
                return 0;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)t[i] < 0x20 || (unsigned char)t[i] == 0x7f)
                        return 0;
        return 1;
}

static int by_name(const void *a, const void *b)
{
        return strcmp(((const struct gossip_setting *)a)->name,
                      ((const struct gossip_setting *)b)->name);
}

int gossip_settings_set(struct gossip_settings *out, const char *const *names,
                        const char *const *values, size_t n)
{
        memset(out, 0, sizeof(*out));
        if (n > GOSSIP_SETTINGS_MAX)
                return GOSSIP_EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (!names[i] || !values[i] || !names[i][0] ||
                    !text_ok(names[i], GOSSIP_SETTING_NAME_MAX) ||
                    !text_ok(values[i], GOSSIP_SETTING_VALUE_MAX))
                        return GOSSIP_EINVAL;
                strcpy(out->s[i].name, names[i]);
                strcpy(out->s[i].value, values[i]);
        }
        qsort(out->s, n, sizeof(out->s[0]), by_name);
        for (size_t i = 1; i < n; i++)
                if (!strcmp(out->s[i - 1].name, out->s[i].name))
                        return GOSSIP_EINVAL;
        out->n = n;
        out->digest = gossip_settings_digest(out->s, n);
        return 0;
}

uint64_t gossip_settings_digest(const struct gossip_setting *s, size_t n)
{
        crypto_generichash_state st;
        uint8_t h[crypto_generichash_BYTES_MIN];
        uint64_t d;

        crypto_generichash_init(&st, NULL, 0, sizeof(h));
        for (size_t i = 0; i < n; i++) {
                crypto_generichash_update(&st, (const uint8_t *)s[i].name,
                                          strlen(s[i].name) + 1);
                crypto_generichash_update(&st, (const uint8_t *)s[i].value,
                                          strlen(s[i].value) + 1);
        }
        crypto_generichash_final(&st, h, sizeof(h));
        d = gn_le64_get(h);
        return d ? d : 1;
}

int gossip_settings_diff(const struct gossip_settings *ours,
                         const struct gossip_settings *theirs,
                         const char **name, const char **our_value,
                         const char **their_value)
{
        size_t i = 0, j = 0;

        while (i < ours->n || j < theirs->n) {
                int c = i == ours->n ? 1
                        : j == theirs->n
                            ? -1
                            : strcmp(ours->s[i].name, theirs->s[j].name);
                if (c == 0 && !strcmp(ours->s[i].value, theirs->s[j].value)) {
                        i++, j++;
                        continue;
                }
                *name = c <= 0 ? ours->s[i].name : theirs->s[j].name;
                *our_value = c <= 0 ? ours->s[i].value : "";
                *their_value = c >= 0 ? theirs->s[j].value : "";
                return 1;
        }
        return 0;
}
