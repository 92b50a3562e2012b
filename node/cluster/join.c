/*
 * join.c - state transfer for a live join, loop side (join.h), and the
 * step we tell in membership.
 *
 * A joining node's trainer asks the box for a peer's state
 * (node_handoff_request_state); the loop sends STATE_REQ to a live
 * member near the front (gossip_plan_state_source: a storm of joiners
 * spreads over them), tells the box to take only the furthest member's
 * step when it is a few steps ahead (gossip_plan_join: started together),
 * or that no one is ahead.
 * A STATE_REQ from a peer is queued (at most NODE_JOIN_PENDING)
 * and the box asks our trainer for a snapshot; when the snapshot is posted
 * the exchange hands it here and every queued request is answered with it
 * (node_join_send_state). Once training has finished (--after-train
 * serve) there is no training thread to ask: node_cluster_serve hands the
 * finished trainer here (node_join_serve), and the loop encodes the final
 * state itself, at once.
 *
 * The struct is the cluster's; this file calls the protocol core, the box,
 * the trainer and the view (node/cluster/view.h), never back into the cluster
 * or the exchange. Loop thread only.
 */
#include "cluster/join.h"

#include <stdlib.h>
#include <string.h>

#include "base/gn_bigbuf.h"
#include "base/gn_endian.h"

#include "service/evlog.h"
#include "train/handoff.h"
#include "gossip/plan.h"
#include "train/trainer.h"
#include "cluster/view.h"

uint64_t node_join_own_step(const struct node_join *j)
{
        struct node_train_stats st;
        uint64_t step = node_handoff_local_step(j->h);

        /* serving: the model's step, which the box never heard when the
         * node resumed on a checkpoint already at its stop criterion */
        if (j->served) {
                node_trainer_stats(j->served, &st);
                if (st.step > step)
                        step = st.step;
        }
        return step;
}

void node_join_send_state(struct node_join *j, const void *buf, size_t len,
                          uint64_t step)
{
        for (size_t i = 0; i < j->npending; i++) {
                int rc = gossip_send_app(j->g, j->pending[i], GOSSIP_APP_STATE,
                                         step, buf, len);
                if (rc == 0)
                        j->states_sent++;
                else
                        node_log(NODE_LOG_WARN, "state transfer: %s",
                                 gossip_strerror(rc));
        }
        j->npending = 0;
}

/* Answer every queued STATE_REQ with the finished trainer's state. */
static void serve_pending(struct node_join *j)
{
        struct node_train_stats st;
        void *buf = NULL;
        size_t len = 0;
        int rc = node_trainer_encode_state(j->served, &buf, &len);

        if (rc) {
                node_log(NODE_LOG_WARN, "state transfer: %s", nn_strerror(rc));
                j->npending = 0;
                return;
        }
        node_trainer_stats(j->served, &st);
        node_join_send_state(j, buf, len, st.step);
        gn_big_free(buf);
}

/* The live member to fetch from, among those near the front
 * (gossip_plan_state_source: a storm of joiners spreads over them, a
 * retry goes to another, one still loading only when all are); NULL when
 * none is alive. */
static const struct gossip_member_info *
state_source(const struct node_join *j, const struct gossip_member_info *mi,
             size_t n)
{
        uint64_t *steps = n > 1 ? malloc((n - 1) * sizeof(*steps)) : NULL;
        uint8_t *loading = n > 1 ? malloc(n - 1) : NULL;
        size_t *at = n > 1 ? malloc((n - 1) * sizeof(*at)) : NULL;
        const struct gossip_member_info *src = NULL;
        size_t m = 0;

        for (size_t i = 1; steps && loading && at && i < n; i++)
                if (mi[i].state == GOSSIP_ALIVE) { /* [0] is ourselves */
                        steps[m] = mi[i].step;
                        loading[m] = mi[i].loading != 0;
                        at[m++] = i;
                }
        if (m)
                src = &mi[at[gossip_plan_state_source(steps, loading, m,
                                                      gn_le64_get(mi[0].key) +
                                                          j->state_reqs)]];
        free(steps);
        free(loading);
        free(at);
        return src;
}

void node_join_request_state(struct node_join *j, uint64_t local_step)
{
        size_t n = 0;
        struct gossip_member_info *mi = node_view_members(j->view, &n);
        const struct gossip_member_info *best = NULL, *src;
        int join;

        for (size_t i = 1; mi && i < n; i++) /* [0] is ourselves */
                if (mi[i].state == GOSSIP_ALIVE &&
                    (!best || mi[i].step > best->step))
                        best = &mi[i];
        join = best ? gossip_plan_join(local_step, best->step)
                    : GOSSIP_PLAN_JOIN_NONE;
        src = join == GOSSIP_PLAN_JOIN_FETCH ? state_source(j, mi, n) : NULL;
        if (join == GOSSIP_PLAN_JOIN_ADOPT) {
                node_log(NODE_LOG_INFO,
                         "%s is %llu steps ahead (started with us): taking "
                         "its step %llu, not its model",
                         node_view_member_name(best),
                         (unsigned long long)(best->step - local_step),
                         (unsigned long long)best->step);
                node_handoff_no_state(j->h, best->step);
                free(mi);
                return;
        }
        if (src && gossip_send_app(j->g, src->key, GOSSIP_APP_STATE_REQ,
                                   local_step, "", 0) == 0) {
                node_log(NODE_LOG_INFO, "asking %s (step %llu) for the model",
                         node_view_member_name(src),
                         (unsigned long long)src->step);
                j->state_reqs++;
                free(mi);
                return;
        }
        free(mi);
        node_handoff_no_state(j->h, 0);
}

void node_join_on_state_req(struct node_join *j,
                            const struct gossip_member_info *from)
{
        for (size_t i = 0; i < j->npending; i++)
                if (memcmp(j->pending[i], from->key, GOSSIP_KEY_BYTES) == 0)
                        return;
        if (j->npending == NODE_JOIN_PENDING)
                return;
        memcpy(j->pending[j->npending++], from->key, GOSSIP_KEY_BYTES);
        node_log(NODE_LOG_INFO, "%s asks for the model",
                 node_view_member_name(from));
        if (j->served)
                serve_pending(j);
        else
                node_handoff_want_snapshot(j->h);
}

void node_join_serve(struct node_join *j, struct node_trainer *t)
{
        j->served = t;
        gossip_set_step(j->g, node_join_own_step(j));
        if (j->npending)
                serve_pending(j);
}

void node_join_on_state(struct node_join *j,
                        const struct gossip_member_info *from, const void *p,
                        size_t len)
{
        if (node_handoff_deliver_state(j->h, p, len,
                                       node_view_member_name(from)))
                j->states_received++;
}
