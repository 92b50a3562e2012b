/*
 * view.c - the membership as the node's rooms read it (view.h): member
 * copies and names, and partner choice, the one call into the schedule
 * (gossip_sched_view_partner / gossip_sched_view_is_sender) over the live
 * view as gossip_view() gives it.
 *
 * Suspects stay in the view (a transient suspicion must not reshuffle the
 * schedule) and are skipped as partners, as are members that say they are
 * still loading: only an ALIVE member that exchanges is sent to.
 * Loop thread only; the struct is the cluster's.
 */
#include "cluster/view.h"

#include <errno.h>
#include <stdlib.h>

#include "gossip/schedule.h"

int node_view_reserve(struct node_view *v, size_t npeers)
{
        void *k, *a;

        v->npeers = npeers;
        if (npeers + 1 <= v->cap)
                return 0;
        k = realloc(v->keys, (npeers + 1) * GOSSIP_KEY_BYTES);
        if (k)
                v->keys = k;
        a = realloc(v->alive, npeers + 1);
        if (a)
                v->alive = a;
        if (!k || !a)
                return -ENOMEM;
        v->cap = npeers + 1;
        return 0;
}

void node_view_free(struct node_view *v)
{
        free(v->keys);
        free(v->alive);
        v->keys = NULL;
        v->alive = NULL;
        v->cap = 0;
}

const char *node_view_member_name(const struct gossip_member_info *m)
{
        return m->name[0] ? m->name : "?";
}

struct gossip_member_info *node_view_members(const struct node_view *v,
                                             size_t *n)
{
        size_t cap = v->npeers + 1, total;
        struct gossip_member_info *mi = calloc(cap, sizeof(*mi));

        if (!mi)
                return NULL;
        total = gossip_members(v->g, mi, cap);
        *n = total < cap ? total : cap;
        return mi;
}

/* The live view as the schedule takes it, in v->keys, and who in it is
 * ALIVE (not suspect) and not loading in v->alive: asked before the
 * schedule runs, so that it never calls back into this file
 * (gossip_sched_alive_flags). */
static struct gossip_sched_view sched_view(struct node_view *v)
{
        size_t n = gossip_view(v->g, v->keys, v->cap);
        struct gossip_member_info mi;

        if (n > v->cap)
                n = v->cap;
        for (size_t i = 0; i < n; i++)
                v->alive[i] = gossip_member_get(v->g, v->keys[i], &mi) == 0 &&
                              mi.state == GOSSIP_ALIVE && !mi.loading;
        return (struct gossip_sched_view){
            (const uint8_t(*)[GOSSIP_KEY_BYTES])v->keys, n, v->seed,
            GOSSIP_SCHED_DISSEMINATION};
}

int node_view_partner(struct node_view *v, uint64_t step,
                      uint8_t key[GOSSIP_KEY_BYTES])
{
        struct gossip_sched_view sv = sched_view(v);

        return gossip_sched_view_partner(
            &sv, v->pk, step, gossip_sched_alive_flags, v->alive, key);
}

/* The step is in the message, so the round is exact; a sender outside our
 * view never is one. */
int node_view_is_sender(struct node_view *v, uint64_t step,
                        const uint8_t from[GOSSIP_KEY_BYTES],
                        const uint8_t to[GOSSIP_KEY_BYTES])
{
        struct gossip_sched_view sv = sched_view(v);

        return gossip_sched_view_is_sender(&sv, from, to, step,
                                           gossip_sched_alive_flags, v->alive);
}
