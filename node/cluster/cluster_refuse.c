/*
 * cluster_refuse.c - members that run other cluster settings
 * (gossip/settings.h): the protocol core refuses them both ways and
 * tells us through gossip_config.on_refused; here each refusal becomes
 * one error line per member life naming the setting and both values, a
 * counter, the `refused` field of the members reply, and the one-second
 * check that ends a node nobody compatible trains with (exit 78, the
 * daemon decides: node_cluster_on_refused).
 *
 * A room of struct node_cluster (cluster_private.h): called by cluster.c
 * (open, the callback it registers) and read by cluster_report.c and
 * cluster_metrics.c; it calls none of them. Loop thread only.
 */
#include "cluster/cluster_private.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "service/evlog.h" /* node_log */

/* key's entry, or NULL. */
static struct node_refusal *find(struct node_cluster *c, const uint8_t *key)
{
        size_t n = c->nrefused < NODE_CLUSTER_REFUSED_MAX
                       ? c->nrefused
                       : NODE_CLUSTER_REFUSED_MAX;

        for (size_t i = 0; i < n; i++)
                if (!memcmp(c->refused[i].key, key, GOSSIP_KEY_BYTES))
                        return &c->refused[i];
        return NULL;
}

const struct node_refusal *
node_cluster__refusal_at(const struct node_cluster *c, size_t i)
{
        return i < c->nrefused && i < NODE_CLUSTER_REFUSED_MAX ? &c->refused[i]
                                                               : NULL;
}

const struct node_refusal *node_cluster__refusal(const struct node_cluster *c,
                                                 const uint8_t *key)
{
        return find((struct node_cluster *)c, key);
}

/* The entry of m's current life: a new one (the oldest overwritten when
 * the table is full) when m or its life is new, counted once. */
static struct node_refusal *entry(struct node_cluster *c,
                                  const struct gossip_member_info *m)
{
        struct node_refusal *r = find(c, m->key);

        if (r && r->incarnation == m->incarnation)
                return r;
        if (!r)
                r = &c->refused[c->nrefused++ % NODE_CLUSTER_REFUSED_MAX];
        memset(r, 0, sizeof(*r));
        memcpy(r->key, m->key, GOSSIP_KEY_BYTES);
        r->incarnation = m->incarnation;
        c->refusals++;
        return r;
}

/* One second after a refusal: alone with refusing members, we cannot
 * train with anyone, and the daemon is told (once); with a compatible
 * member alive, the refusals were only logged. */
static void on_refuse_timer(uv_timer_t *t)
{
        struct node_cluster *c = t->data;
        const struct node_refusal *r = c->last_named;
        char why[320];

        if (c->leaving || c->closing || c->refused_out ||
            gossip_alive_count(c->g) > 1 || !c->on_refused_out)
                return;
        c->refused_out = 1;
        if (r && r->setting[0])
                snprintf(why, sizeof(why),
                         "refused by the cluster: setting %s is %s here, %s "
                         "there (%s), and no member with our settings is "
                         "alive",
                         r->setting, r->here[0] ? r->here : "unset",
                         r->there[0] ? r->there : "unset", r->member);
        else
                snprintf(why, sizeof(why),
                         "refused by the cluster: members run other cluster "
                         "settings, and no member with ours is alive");
        c->on_refused_out(c->refused_arg, why);
}

void node_cluster__refused(void *ctx, const struct gossip_member_info *m,
                           const char *name, const char *ours,
                           const char *theirs)
{
        struct node_cluster *c = ctx;
        struct node_refusal *r = entry(c, m);
        const char *who = node_view_member_name(m);

        snprintf(r->member, sizeof(r->member), "%s", who);
        if (m->addr.family)
                r->addr = m->addr;
        if (name && !r->logged) {
                r->logged = 1;
                snprintf(r->setting, sizeof(r->setting), "%s", name);
                snprintf(r->here, sizeof(r->here), "%s", ours);
                snprintf(r->there, sizeof(r->there), "%s", theirs);
                c->last_named = r;
                node_log(NODE_LOG_ERROR,
                         "refused %s: setting %s is %s here, %s there "
                         "(cluster settings must match; docs/operations.md)",
                         who, name, ours[0] ? ours : "unset",
                         theirs[0] ? theirs : "unset");
        }
        if (!uv_is_active((uv_handle_t *)&c->refuse_timer))
                uv_timer_start(&c->refuse_timer, on_refuse_timer,
                               NODE_CLUSTER_REFUSED_EXIT_MS, 0);
}

void node_cluster_on_refused(struct node_cluster *c,
                             void (*cb)(void *arg, const char *why), void *arg)
{
        c->on_refused_out = cb;
        c->refused_arg = arg;
}
