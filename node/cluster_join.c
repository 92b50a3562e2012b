/*
 * cluster_join.c - state transfer for a live join, loop side.
 *
 * A joining node's trainer asks the box for a peer's state
 * (node_handoff_request_state); the loop sends STATE_REQ to the live
 * member furthest ahead of it, tells the box to take only that member's
 * step when it is a few steps ahead (gossip_plan_join: started together),
 * or that no one is ahead.
 * A STATE_REQ from a peer is queued (at most NODE_CLUSTER_STATE_PENDING)
 * and the box asks our trainer for a snapshot; when the snapshot is posted
 * the loop answers every queued request with it (node_cluster__on_async).
 * Once training has finished (--after-train serve) there is no training
 * thread to ask: node_cluster_serve hands the loop the finished trainer,
 * and the loop encodes the final state itself, at once.
 *
 * Loop thread only.
 */
#include "cluster_private.h"

#include <stdlib.h>
#include <string.h>

#include "evlog.h"

void node_cluster__send_state(struct node_cluster *c, const void *buf,
                              size_t len, uint64_t step)
{
        for (size_t i = 0; i < c->npending; i++) {
                int rc = gossip_send_app(c->g, c->pending[i], GOSSIP_APP_STATE,
                                         step, buf, len);
                if (rc == 0)
                        c->states_sent++;
                else
                        node_log(NODE_LOG_WARN, "state transfer: %s",
                                 gossip_strerror(rc));
        }
        c->npending = 0;
}

/* Answer every queued STATE_REQ with the finished trainer's state. */
static void serve_pending(struct node_cluster *c)
{
        struct node_train_stats st;
        void *buf = NULL;
        size_t len = 0;
        int rc = node_trainer_encode_state(c->served, &buf, &len);

        if (rc) {
                node_log(NODE_LOG_WARN, "state transfer: %s", nn_strerror(rc));
                c->npending = 0;
                return;
        }
        node_trainer_stats(c->served, &st);
        node_cluster__send_state(c, buf, len, st.step);
        free(buf);
}

void node_cluster__request_state(struct node_cluster *c, uint64_t local_step)
{
        size_t n = 0;
        struct gossip_member_info *mi = node_cluster__members(c, &n);
        const struct gossip_member_info *best = NULL;
        int join;

        for (size_t i = 1; mi && i < n; i++) /* [0] is ourselves */
                if (mi[i].state == GOSSIP_ALIVE &&
                    (!best || mi[i].step > best->step))
                        best = &mi[i];
        join = best ? gossip_plan_join(local_step, best->step)
                    : GOSSIP_PLAN_JOIN_NONE;
        if (join == GOSSIP_PLAN_JOIN_ADOPT) {
                node_log(NODE_LOG_INFO,
                         "%s is %llu steps ahead (started with us): taking "
                         "its step %llu, not its model",
                         node_cluster__member_name(best),
                         (unsigned long long)(best->step - local_step),
                         (unsigned long long)best->step);
                node_handoff_no_state(c->h, best->step);
                free(mi);
                return;
        }
        if (join == GOSSIP_PLAN_JOIN_FETCH &&
            gossip_send_app(c->g, best->key, GOSSIP_APP_STATE_REQ, local_step,
                            "", 0) == 0) {
                node_log(NODE_LOG_INFO, "asking %s (step %llu) for the model",
                         node_cluster__member_name(best),
                         (unsigned long long)best->step);
                c->state_reqs++;
                free(mi);
                return;
        }
        free(mi);
        node_handoff_no_state(c->h, 0);
}

void node_cluster__on_state_req(struct node_cluster *c,
                                const struct gossip_member_info *from)
{
        for (size_t i = 0; i < c->npending; i++)
                if (memcmp(c->pending[i], from->key, GOSSIP_KEY_BYTES) == 0)
                        return;
        if (c->npending == NODE_CLUSTER_STATE_PENDING)
                return;
        memcpy(c->pending[c->npending++], from->key, GOSSIP_KEY_BYTES);
        node_log(NODE_LOG_INFO, "%s asks for the model",
                 node_cluster__member_name(from));
        if (c->served)
                serve_pending(c);
        else
                node_handoff_want_snapshot(c->h);
}

void node_cluster_serve(struct node_cluster *c, struct node_trainer *t)
{
        c->served = t;
        gossip_set_step(c->g, node_cluster__own_step(c));
        if (c->npending)
                serve_pending(c);
}

void node_cluster__on_state(struct node_cluster *c,
                            const struct gossip_member_info *from,
                            const void *p, size_t len)
{
        if (node_handoff_deliver_state(c->h, p, len,
                                       node_cluster__member_name(from)))
                c->states_received++;
}
