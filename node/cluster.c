/*
 * cluster.c - membership, gradient exchange, model averaging and state
 * transfer for one node; the loop side and the training side of the
 * exchange box.
 *
 * Box protocol (all fields under box.mu):
 *   trainer -> loop: grad_buf/grad_ready (the raw fp32 gradient; a newer
 *     one replaces an unsent one: gradients are replaceable), params_slot[]/
 *     params_ready (ring slots holding our parameter slices of averaging
 *     rounds, all sent; ring_busy[] marks slots the loop still encodes),
 *     state_buf/state_ready (a snapshot asked for by want_snapshot),
 *     want_state (join: "fetch a peer's state for me").
 *   loop -> trainer: merge (offers), inq (received parameter slices),
 *     last_in_step, in_state/in_state_ready or state_none, want_snapshot,
 *     alive.
 * The training thread only copies (the gradient, one parameter slice) and
 * averages what arrived; the loop encodes (codec with error feedback for
 * gradients, stateless for parameters), signs, sends and decodes. Buffers
 * change hands by pointer swap or slot ownership, so no one encodes,
 * decodes or sends under the lock.
 *
 * Model averaging (every --avg-every steps, slice (s / K) mod P of the
 * model): our slice of round s goes to the round's partner and stays in
 * the ring; a peer's slice of round s is averaged in as mine += w *
 * (theirs_s - mine_s), so the steps we took since s are kept. With
 * --wait-ms the trainer waits (bounded) for the previous round's slice:
 * one round of communication overlaps compute, and the replicas stay in
 * step. The trainer wakes the loop with uv_async_send; the loop wakes a
 * waiting trainer with the condition variable.
 */
#include "cluster.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "checkpoint.h"
#include "codec.h"
#include "evlog.h"
#include "gossip.h"
#include "keys.h"
#include "merge.h"
#include "metrics.h"
#include "net.h"
#include "nn.h"
#include "peers.h"
#include "schedule.h"

struct box {
        pthread_mutex_t mu;
        pthread_cond_t cv;
        /* trainer -> loop: raw floats, encoded by the loop */
        float *grad_buf; /* the whole gradient (nparams floats) */
        uint64_t grad_step;
        int grad_ready;
        /* posted slices not yet taken by the loop, oldest first (ring
         * slots and their steps): every round is sent, none replaced,
         * since a partner waits for it */
        int params_slot[NODE_CLUSTER_PARAMS_RING];
        uint64_t params_step[NODE_CLUSTER_PARAMS_RING];
        int params_ready;                        /* how many */
        int ring_busy[NODE_CLUSTER_PARAMS_RING]; /* loop still encodes it */
        void *state_buf;
        size_t state_len;
        int state_ready;
        int want_state;
        uint64_t local_step;
        /* loop -> trainer */
        struct gossip_merge merge;
        /* received parameter slices, oldest first: v[0..count) belong at
         * [lo, lo + count) of the model */
        struct in_slice {
                float *v;
                size_t lo, count;
                uint64_t step;
        } inq[NODE_CLUSTER_PARAMS_QUEUE];
        size_t inq_n;
        uint64_t last_in_step; /* newest received slice's step */
        uint64_t want_in_step; /* trainer waits for a slice this new */
        void *in_state;
        size_t in_state_len;
        int in_state_ready, state_none, awaiting_state;
        char in_state_from[GOSSIP_NAME_MAX];
        int want_snapshot;
        size_t alive;
        uint64_t min_peer_step; /* slowest live peer; UINT64_MAX: none */
        int trainer_done;
};

struct node_cluster {
        uv_loop_t *loop;
        const struct node_options *o;
        struct node_evlog *ev;
        uv_timer_t tick, join_timer, linger;
        uv_async_t async;
        int open_handles;
        struct node_net *net;
        struct gossip *g;
        uint8_t pk[GOSSIP_KEY_BYTES];
        struct node_peer *peers;
        size_t npeers;
        char name[GOSSIP_NAME_MAX];
        int listed; /* our key has a line in the peers file */
        struct gossip_addr listen;
        size_t nparams, nopt;
        char spec[NN_SPEC_MAX];
        uint64_t start_ms;
        /* loop-owned */
        float *scratch;
        float *l_spare;   /* a received slice is decoded here, then swapped
                             into the inbox (praw_cap floats) */
        int warned_parts; /* logged a peer's larger slices once */
        float *l_graw;    /* taken from the box */
        uint8_t *l_grad_buf, *l_params_buf; /* encoded payloads */
        struct gossip_codec enc, penc;      /* loop-owned encoders */
        uint8_t (*view)[GOSSIP_KEY_BYTES];
        size_t view_cap;
        uint8_t pending[NODE_CLUSTER_STATE_PENDING][GOSSIP_KEY_BYTES];
        size_t npending;
        struct node_cluster_peer_grads pg[NODE_CLUSTER_PEER_STATS];
        size_t npg;
        /* trainer-owned */
        float *t_graw;
        /* our own parameter slices as sent, by averaging round: the loop
         * encodes from them, the trainer corrects with them */
        float *ring;
        uint64_t ring_step[NODE_CLUSTER_PARAMS_RING];
        uint64_t t_filled; /* the step whose slice the optimizer wrote */
        size_t grad_cap, params_cap, praw_cap;
        /* leave */
        int leaving, closing;
        void (*leave_done)(void *);
        void *leave_arg;
        /* counters (loop) */
        uint64_t grads_sent, grads_send_fail, grads_no_partner;
        uint64_t params_sent, params_received, params_applied, params_delta;
        uint64_t params_stale, params_replaced, params_busy;
        uint64_t waits, wait_timeouts, fills;
        double wait_s;
        uint64_t states_sent, states_received, state_reqs;
        uint64_t decode_errors;
        struct box box;
};

/* ---- small helpers ------------------------------------------------------ */

static double mono_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t unix_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void deadline_after(struct timespec *ts, uint32_t ms)
{
        clock_gettime(CLOCK_REALTIME, ts);
        ts->tv_sec += ms / 1000;
        ts->tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts->tv_nsec >= 1000000000L) {
                ts->tv_sec++;
                ts->tv_nsec -= 1000000000L;
        }
}

static struct node_cluster_peer_grads *peer_grads(struct node_cluster *c,
                                                  const uint8_t *key)
{
        for (size_t i = 0; i < c->npg; i++)
                if (memcmp(c->pg[i].key, key, GOSSIP_KEY_BYTES) == 0)
                        return &c->pg[i];
        if (c->npg == NODE_CLUSTER_PEER_STATS)
                return NULL;
        memset(&c->pg[c->npg], 0, sizeof(c->pg[0]));
        memcpy(c->pg[c->npg].key, key, GOSSIP_KEY_BYTES);
        return &c->pg[c->npg++];
}

/* Copy a name, cut to fit (peers-file names may be longer than the
 * protocol's GOSSIP_NAME_MAX; the cut is deliberate). */
static void copy_name(char *dst, size_t cap, const char *src)
{
        size_t n = strnlen(src, cap - 1);

        memcpy(dst, src, n);
        dst[n] = '\0';
}

static const char *member_name(const struct gossip_member_info *m)
{
        return m->name[0] ? m->name : "?";
}

const char *node_cluster_name(const struct node_cluster *c)
{
        return c->name;
}

/* ---- the protocol timer ------------------------------------------------- */

static void on_tick(uv_timer_t *t);

static void arm(struct node_cluster *c)
{
        uint64_t now, d;

        if (c->closing)
                return;
        now = uv_now(c->loop);
        d = gossip_next_deadline(c->g);
        uv_timer_start(&c->tick, on_tick, d > now ? d - now : 0, 0);
}

/* Tell the protocol our training step (carried in every message, and how
 * a joining peer finds the member furthest ahead), also while we train
 * alone and post nothing. */
static void sync_step(struct node_cluster *c)
{
        uint64_t step;

        pthread_mutex_lock(&c->box.mu);
        step = c->box.local_step;
        pthread_mutex_unlock(&c->box.mu);
        gossip_set_step(c->g, step);
}

static struct gossip_member_info *members_copy(struct node_cluster *c,
                                               size_t *n);

/* Publish the step of the slowest live peer (for the gradient wait,
 * pred_ready; without gradients the averaging wait bounds drift). */
static void update_min_step(struct node_cluster *c)
{
        size_t n = 0;
        struct gossip_member_info *mi = members_copy(c, &n);
        uint64_t min = UINT64_MAX;

        for (size_t i = 1; mi && i < n; i++)
                if (mi[i].state == GOSSIP_ALIVE && mi[i].step < min)
                        min = mi[i].step;
        free(mi);
        pthread_mutex_lock(&c->box.mu);
        c->box.min_peer_step = min;
        pthread_cond_broadcast(&c->box.cv);
        pthread_mutex_unlock(&c->box.mu);
}

static void on_tick(uv_timer_t *t)
{
        struct node_cluster *c = t->data;

        sync_step(c);
        if (c->o->wait_ms && c->o->codec != NODE_CODEC_NONE)
                update_min_step(c);
        gossip_tick(c->g);
        arm(c);
}

/* ---- partner choice ----------------------------------------------------- */

struct alive_ctx {
        struct node_cluster *c;
        const struct gossip_sched *s;
};

static int partner_alive(void *ctx, size_t member)
{
        struct alive_ctx *a = ctx;
        struct gossip_member_info mi;

        if (gossip_member_get(a->c->g, gossip_sched_key(a->s, member), &mi))
                return 0;
        return mi.state == GOSSIP_ALIVE;
}

/* The step's partner per the GossipGraD schedule over the live view. */
static int choose_partner(struct node_cluster *c, uint64_t step,
                          uint8_t key[GOSSIP_KEY_BYTES])
{
        struct gossip_sched s;
        struct alive_ctx a = {c, &s};
        size_t n, idx;
        int rc;

        n = gossip_view(c->g, c->view, c->view_cap);
        if (n > c->view_cap)
                n = c->view_cap;
        if (n <= 1)
                return GOSSIP_ENOPEER;
        rc =
            gossip_sched_init(&s, (const uint8_t(*)[GOSSIP_KEY_BYTES])c->view,
                              n, c->pk, c->o->seed, GOSSIP_SCHED_DISSEMINATION);
        if (rc)
                return rc;
        rc = gossip_sched_partner(&s, step, partner_alive, &a, &idx);
        if (rc)
                return rc;
        memcpy(key, gossip_sched_key(&s, idx), GOSSIP_KEY_BYTES);
        return 0;
}

/* ---- loop: what the trainer posted --------------------------------------- */

/* Encode (error feedback: the codec keeps what it did not send) and send
 * the gradient the trainer posted. Runs on the loop so that the training
 * thread only copies. */
static void send_gradient(struct node_cluster *c, uint64_t step)
{
        uint8_t key[GOSSIP_KEY_BYTES];
        size_t len = 0;
        int rc;

        if (gossip_codec_encode(&c->enc, step, c->l_graw, c->nparams,
                                c->l_grad_buf, c->grad_cap, &len)) {
                c->grads_send_fail++;
                return;
        }
        if (choose_partner(c, step, key)) {
                c->grads_no_partner++;
                return;
        }
        rc = gossip_send_app(c->g, key, GOSSIP_APP_GRADIENT, step,
                             c->l_grad_buf, len);
        if (rc)
                c->grads_send_fail++;
        else
                c->grads_sent++;
}

/* The slice of the model that the averaging round of `step` covers. */
static uint32_t params_part(const struct node_cluster *c, uint64_t step,
                            size_t *lo, size_t *count)
{
        uint32_t parts = c->penc.cfg.parts;
        uint32_t part = (uint32_t)((step / c->o->avg_every) % parts);

        gossip_codec_partition(c->nparams, part, parts, lo, count);
        return part;
}

/* Encode the parameter slice the trainer posted (ring slot) and send it;
 * then give the slot back. */
static void send_params(struct node_cluster *c, uint64_t step, int slot)
{
        uint8_t key[GOSSIP_KEY_BYTES];
        size_t lo, count, len = 0;
        uint32_t part = params_part(c, step, &lo, &count);
        int rc;

        rc = gossip_codec_encode_part(
            &c->penc, part, c->ring + (size_t)slot * c->praw_cap, count,
            c->l_params_buf, c->params_cap, &len);
        pthread_mutex_lock(&c->box.mu);
        c->box.ring_busy[slot] = 0;
        pthread_mutex_unlock(&c->box.mu);
        if (rc == 0)
                rc = choose_partner(c, step, key);
        if (rc == 0)
                rc = gossip_send_app(c->g, key, GOSSIP_APP_PARAMS, step,
                                     c->l_params_buf, len);
        if (rc == 0)
                c->params_sent++;
        node_log(NODE_LOG_DEBUG, "parameters of step %llu sent: %s",
                 (unsigned long long)step, gossip_strerror(rc));
}

static void send_state(struct node_cluster *c, const void *buf, size_t len,
                       uint64_t step)
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

/* Join: ask the live member furthest ahead of us for its state, or tell
 * the trainer there is none worth having. */
static void request_state(struct node_cluster *c, uint64_t local_step)
{
        size_t n = 0;
        struct gossip_member_info *mi = members_copy(c, &n);
        const struct gossip_member_info *best = NULL;

        for (size_t i = 1; mi && i < n; i++) /* [0] is ourselves */
                if (mi[i].state == GOSSIP_ALIVE &&
                    (!best || mi[i].step > best->step))
                        best = &mi[i];
        if (best && best->step > local_step &&
            gossip_send_app(c->g, best->key, GOSSIP_APP_STATE_REQ, local_step,
                            "", 0) == 0) {
                node_log(NODE_LOG_INFO, "asking %s (step %llu) for the model",
                         member_name(best), (unsigned long long)best->step);
                c->state_reqs++;
                free(mi);
                return;
        }
        free(mi);
        pthread_mutex_lock(&c->box.mu);
        c->box.state_none = 1;
        pthread_cond_broadcast(&c->box.cv);
        pthread_mutex_unlock(&c->box.mu);
}

static void on_async(uv_async_t *a)
{
        struct node_cluster *c = a->data;
        struct box *b = &c->box;
        int grad = 0, params = 0, want_state = 0;
        uint64_t gstep = 0, pstep[NODE_CLUSTER_PARAMS_RING], lstep;
        int pslot[NODE_CLUSTER_PARAMS_RING];
        size_t slen = 0;
        void *state = NULL;
        float *tmp;

        if (c->closing)
                return;
        pthread_mutex_lock(&b->mu);
        if (b->grad_ready) {
                tmp = c->l_graw;
                c->l_graw = b->grad_buf;
                b->grad_buf = tmp;
                gstep = b->grad_step;
                b->grad_ready = 0;
                grad = 1;
        }
        if (b->params_ready) {
                params = b->params_ready;
                memcpy(pslot, b->params_slot, sizeof(pslot));
                memcpy(pstep, b->params_step, sizeof(pstep));
                b->params_ready = 0;
        }
        if (b->state_ready) {
                state = b->state_buf;
                slen = b->state_len;
                b->state_buf = NULL;
                b->state_ready = 0;
        }
        if (b->want_state) {
                want_state = 1;
                b->want_state = 0;
        }
        lstep = b->local_step;
        pthread_mutex_unlock(&b->mu);

        sync_step(c);
        if (grad)
                send_gradient(c, gstep);
        if (params)
                for (int i = 0; i < params; i++)
                        send_params(c, pstep[i], pslot[i]);
        if (state) {
                send_state(c, state, slen, lstep);
                free(state);
        }
        if (want_state)
                request_state(c, lstep);
        arm(c);
}

/* ---- loop: protocol callbacks -------------------------------------------- */

static void on_gradient(struct node_cluster *c,
                        const struct gossip_member_info *from, uint64_t step,
                        const void *p, size_t len)
{
        struct node_cluster_peer_grads *pg = peer_grads(c, from->key);
        struct gossip_codec_info info;
        uint64_t late0;
        int rc;

        rc = gossip_codec_decode(p, len, c->nparams, c->scratch, &info);
        if (rc) {
                c->decode_errors++;
                if (pg)
                        pg->dropped++;
                return;
        }
        pthread_mutex_lock(&c->box.mu);
        late0 = c->box.merge.st.late;
        rc = gossip_merge_offer_range(&c->box.merge, from->key, step, info.lo,
                                      c->scratch, info.count);
        if (pg) {
                if (rc)
                        pg->dropped++;
                else if (c->box.merge.st.late != late0)
                        pg->late++;
                else
                        pg->merged++;
        }
        pthread_cond_broadcast(&c->box.cv);
        pthread_mutex_unlock(&c->box.mu);
        if (c->o->wait_ms && c->o->codec != NODE_CODEC_NONE)
                update_min_step(c);
}

static void on_params(struct node_cluster *c, uint64_t step, const void *p,
                      size_t len)
{
        struct gossip_codec_info info = {0};
        struct in_slice *q, old;
        float *tmp;

        /* decode outside the lock into the spare buffer, then swap it in:
         * the trainer never waits for a decode or a copy */
        if (gossip_codec_peek(p, len, c->nparams, &info) || info.count == 0 ||
            info.id == GOSSIP_CODEC_TOPK || info.count > c->praw_cap ||
            gossip_codec_decode(p, len, c->nparams, c->l_spare, &info)) {
                if (info.count > c->praw_cap && !c->warned_parts) {
                        /* a peer with fewer --params-parts than ours */
                        node_log(NODE_LOG_WARN,
                                 "a parameter slice of %zu values is larger "
                                 "than ours (%zu): peers must use the same "
                                 "--params-parts; such slices are dropped",
                                 info.count, c->praw_cap);
                        c->warned_parts = 1;
                }
                c->decode_errors++;
                return;
        }
        c->params_received++;
        node_log(NODE_LOG_DEBUG, "parameters of step %llu arrived",
                 (unsigned long long)step);
        pthread_mutex_lock(&c->box.mu);
        if (c->box.inq_n == NODE_CLUSTER_PARAMS_QUEUE) {
                /* full: the oldest round goes, its buffer is reused */
                old = c->box.inq[0];
                memmove(&c->box.inq[0], &c->box.inq[1],
                        (NODE_CLUSTER_PARAMS_QUEUE - 1) * sizeof(old));
                c->box.inq[--c->box.inq_n] = old;
                c->params_replaced++;
        }
        q = &c->box.inq[c->box.inq_n++];
        tmp = q->v;
        q->v = c->l_spare;
        c->l_spare = tmp;
        q->lo = info.lo;
        q->count = info.count;
        q->step = step;
        if (step > c->box.last_in_step)
                c->box.last_in_step = step;
        pthread_cond_broadcast(&c->box.cv);
        pthread_mutex_unlock(&c->box.mu);
}

static void on_state_req(struct node_cluster *c,
                         const struct gossip_member_info *from)
{
        for (size_t i = 0; i < c->npending; i++)
                if (memcmp(c->pending[i], from->key, GOSSIP_KEY_BYTES) == 0)
                        return;
        if (c->npending == NODE_CLUSTER_STATE_PENDING)
                return;
        memcpy(c->pending[c->npending++], from->key, GOSSIP_KEY_BYTES);
        node_log(NODE_LOG_INFO, "%s asks for the model", member_name(from));
        pthread_mutex_lock(&c->box.mu);
        c->box.want_snapshot = 1;
        pthread_cond_broadcast(&c->box.cv);
        pthread_mutex_unlock(&c->box.mu);
}

static void on_state(struct node_cluster *c,
                     const struct gossip_member_info *from, const void *p,
                     size_t len)
{
        void *copy;

        pthread_mutex_lock(&c->box.mu);
        if (c->box.awaiting_state && !c->box.in_state_ready &&
            (copy = malloc(len ? len : 1)) != NULL) {
                memcpy(copy, p, len);
                c->box.in_state = copy;
                c->box.in_state_len = len;
                c->box.in_state_ready = 1;
                snprintf(c->box.in_state_from, sizeof(c->box.in_state_from),
                         "%s", member_name(from));
                c->states_received++;
                pthread_cond_broadcast(&c->box.cv);
        }
        pthread_mutex_unlock(&c->box.mu);
}

static void on_app(void *ctx, const struct gossip_member_info *from, int kind,
                   uint64_t step, const void *payload, size_t len)
{
        struct node_cluster *c = ctx;

        switch (kind) {
        case GOSSIP_APP_GRADIENT:
                on_gradient(c, from, step, payload, len);
                break;
        case GOSSIP_APP_PARAMS:
                on_params(c, step, payload, len);
                break;
        case GOSSIP_APP_STATE_REQ:
                on_state_req(c, from);
                break;
        case GOSSIP_APP_STATE:
                on_state(c, from, payload, len);
                break;
        default:
                c->decode_errors++;
        }
}

static void on_member(void *ctx, const struct gossip_member_info *m,
                      int old_state)
{
        struct node_cluster *c = ctx;
        const char *st = gossip_state_name(m->state);
        size_t alive = gossip_alive_count(c->g);

        if (memcmp(m->key, c->pk, GOSSIP_KEY_BYTES) == 0)
                return;
        node_log(
            NODE_LOG_INFO, "member %s %s -> %s (%zu alive)", member_name(m),
            old_state < 0 ? "new" : gossip_state_name(old_state), st, alive);
        node_evlog_member(c->ev, member_name(m), st);
        pthread_mutex_lock(&c->box.mu);
        c->box.alive = alive;
        pthread_cond_broadcast(&c->box.cv);
        pthread_mutex_unlock(&c->box.mu);
        if (c->o->wait_ms && c->o->codec != NODE_CODEC_NONE)
                update_min_step(c);
}

static void on_frame(void *ctx, const struct gossip_addr *from, const void *buf,
                     size_t len, int channel)
{
        struct node_cluster *c = ctx;

        if (c->closing)
                return;
        gossip_on_message(c->g, from, buf, len, channel);
        arm(c);
}

static void join_all(struct node_cluster *c)
{
        for (size_t i = 0; i < c->npeers; i++)
                if (memcmp(c->peers[i].pk, c->pk, GOSSIP_KEY_BYTES) != 0)
                        gossip_join(c->g, &c->peers[i].addr);
        arm(c);
}

static void on_join_timer(uv_timer_t *t)
{
        struct node_cluster *c = t->data;

        if (!c->leaving && gossip_alive_count(c->g) <= 1)
                join_all(c);
}

/* ---- set-up ------------------------------------------------------------- */

static void to_gossip_peer(const struct node_peer *p, struct gossip_peer *g)
{
        memset(g, 0, sizeof(*g));
        memcpy(g->key, p->pk, GOSSIP_KEY_BYTES);
        g->addr = p->addr;
        copy_name(g->name, sizeof(g->name), p->name);
}

static int load_identity(struct node_cluster *c, uint8_t *sk, char *err,
                         size_t errlen)
{
        const struct node_options *o = c->o;
        long self;
        int rc;

        rc = node_key_load(o->key_path, c->pk, sk, err, errlen);
        if (rc)
                return rc;
        rc = node_peers_load(o->peers_path, &c->peers, &c->npeers, err, errlen);
        if (rc)
                return rc;
        self = node_peers_find_pk(c->peers, c->npeers, c->pk);
        c->listed = self >= 0;
        copy_name(c->name, sizeof(c->name),
                  o->name     ? o->name
                  : self >= 0 ? c->peers[self].name
                              : "node");
        if (o->listen) {
                rc = node_addr_parse(o->listen, &c->listen, 1);
                if (rc) {
                        snprintf(err, errlen, "--listen: '%s': %s", o->listen,
                                 rc == -EHOSTUNREACH ? "does not resolve"
                                                     : "not ADDR:PORT");
                        return rc;
                }
        } else if (self >= 0) {
                c->listen = c->peers[self].addr;
        } else {
                snprintf(err, errlen,
                         "--listen: not given, and %s has no line for this "
                         "node's key",
                         o->peers_path);
                return -EINVAL;
        }
        return 0;
}

static int open_net(struct node_cluster *c, char *err, size_t errlen)
{
        struct node_net_config nc = {0};
        char a[NODE_ADDR_STR_SIZE];
        int rc;

        nc.listen = c->listen;
        nc.seed = c->o->seed ^ 0x6e6574ULL;
        nc.on_frame = on_frame;
        nc.ctx = c;
        rc = node_net_open(&c->net, c->loop, &nc);
        if (rc) {
                node_addr_format(&c->listen, a, sizeof(a));
                snprintf(err, errlen, "--listen %s: %s", a, uv_strerror(rc));
        }
        return rc;
}

static int open_gossip(struct node_cluster *c, const uint8_t *sk, char *err,
                       size_t errlen)
{
        struct gossip_config gc;
        struct gossip_env env = {0};
        struct gossip_peer *gp;
        int rc;

        gp = calloc(c->npeers ? c->npeers : 1, sizeof(*gp));
        if (!gp)
                return -ENOMEM;
        for (size_t i = 0; i < c->npeers; i++)
                to_gossip_peer(&c->peers[i], &gp[i]);
        memset(&gc, 0, sizeof(gc));
        memcpy(gc.public_key, c->pk, GOSSIP_KEY_BYTES);
        memcpy(gc.secret_key, sk, GOSSIP_SECRET_BYTES);
        gc.addr = c->listen;
        gc.name = c->name;
        gc.incarnation = unix_ms();
        gc.peers = gp;
        gc.n_peers = c->npeers;
        gc.on_app = on_app;
        gc.on_member = on_member;
        gc.cb_ctx = c;
        node_net_env(c->net, &env);
        /* every node's own stream: the seed mixed with its key */
        env.seed = c->o->seed;
        for (int i = 0; i < 8; i++)
                env.seed = env.seed * 131 + c->pk[i];
        rc = gossip_create(&gc, &env, &c->g);
        sodium_memzero(gc.secret_key, sizeof(gc.secret_key));
        free(gp);
        if (rc)
                snprintf(err, errlen, "gossip: %s", gossip_strerror(rc));
        return rc;
}

static int codec_id(int opt)
{
        switch (opt) {
        case NODE_CODEC_FP16:
                return GOSSIP_CODEC_FP16;
        case NODE_CODEC_INT8:
                return GOSSIP_CODEC_INT8;
        case NODE_CODEC_TOPK:
                return GOSSIP_CODEC_TOPK;
        default:
                return GOSSIP_CODEC_FP32;
        }
}

static int open_exchange(struct node_cluster *c, char *err, size_t errlen)
{
        struct gossip_codec_cfg cc = {0}, pc = {0};
        struct box *b = &c->box;
        int rc, nomem = 0;

        cc.id = codec_id(c->o->codec);
        cc.n = c->nparams;
        cc.parts = c->o->partitions;
        cc.k = c->o->topk;
        /* fp16/int8 rounding error goes back into the next gradient; fp32
         * is exact (top-k and partitions always keep a residual) */
        cc.error_feedback =
            c->o->codec == NODE_CODEC_FP16 || c->o->codec == NODE_CODEC_INT8;
        rc = gossip_codec_init(&c->enc, &cc);
        if (rc) {
                snprintf(err, errlen, "--codec/--partitions: %s",
                         gossip_strerror(rc));
                return rc;
        }
        pc.id = codec_id(c->o->params_codec);
        pc.n = c->nparams;
        pc.parts = c->o->params_parts;
        rc = gossip_codec_init(&c->penc, &pc);
        /* parameters are encoded slice by slice, statelessly */
        if (rc == 0)
                gossip_codec_free(&c->penc);
        if (rc == 0)
                rc = gossip_merge_init(&b->merge, c->nparams, c->o->staleness);
        if (rc) {
                snprintf(err, errlen, "exchange: %s", gossip_strerror(rc));
                return rc;
        }
        c->grad_cap = gossip_codec_max_size(&c->enc);
        c->params_cap = gossip_codec_max_size(&c->penc);
        c->praw_cap = (c->nparams + pc.parts - 1) / pc.parts;
        c->t_graw = malloc(c->nparams * sizeof(float));
        c->l_graw = malloc(c->nparams * sizeof(float));
        b->grad_buf = malloc(c->nparams * sizeof(float));
        c->l_grad_buf = malloc(c->grad_cap);
        c->ring =
            malloc(NODE_CLUSTER_PARAMS_RING * c->praw_cap * sizeof(float));
        for (int i = 0; i < NODE_CLUSTER_PARAMS_RING; i++)
                c->ring_step[i] = UINT64_MAX;
        c->t_filled = UINT64_MAX;

        c->l_params_buf = malloc(c->params_cap);
        c->scratch = malloc(c->nparams * sizeof(float));
        c->l_spare = malloc(c->praw_cap * sizeof(float));
        for (int i = 0; i < NODE_CLUSTER_PARAMS_QUEUE; i++)
                if (!(b->inq[i].v = malloc(c->praw_cap * sizeof(float))))
                        nomem = 1;
        c->view_cap = c->npeers + 1;
        c->view = calloc(c->view_cap, GOSSIP_KEY_BYTES);
        if (!c->t_graw || !c->l_graw || !b->grad_buf || !c->l_grad_buf ||
            !c->ring || !c->l_params_buf || !c->scratch || !c->l_spare ||
            nomem || !c->view) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

static void free_cluster(struct node_cluster *c)
{
        struct box *b = &c->box;

        gossip_codec_free(&c->enc);
        gossip_codec_free(&c->penc);
        gossip_merge_free(&b->merge);
        free(c->t_graw);
        free(c->l_graw);
        free(b->grad_buf);
        free(c->l_grad_buf);
        free(c->ring);

        free(c->l_params_buf);
        free(c->scratch);
        free(c->l_spare);
        for (int i = 0; i < NODE_CLUSTER_PARAMS_QUEUE; i++)
                free(b->inq[i].v);
        free(b->state_buf);
        free(b->in_state);
        free(c->view);
        node_peers_free(c->peers);
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
        free(c);
}

static void on_handle_closed(uv_handle_t *h)
{
        struct node_cluster *c = h->data;

        if (--c->open_handles == 0)
                free_cluster(c);
}

void node_cluster_close(struct node_cluster *c)
{
        uv_handle_t *hs[4];

        if (!c || c->closing)
                return;
        c->closing = 1;
        node_net_close(c->net);
        c->net = NULL;
        gossip_destroy(c->g);
        c->g = NULL;
        hs[0] = (uv_handle_t *)&c->tick;
        hs[1] = (uv_handle_t *)&c->join_timer;
        hs[2] = (uv_handle_t *)&c->linger;
        hs[3] = (uv_handle_t *)&c->async;
        c->open_handles = 4;
        for (int i = 0; i < 4; i++)
                uv_close(hs[i], on_handle_closed);
}

int node_cluster_open(struct node_cluster **out, uv_loop_t *loop,
                      const struct node_options *o, struct node_evlog *ev,
                      size_t nparams, size_t nopt, const char *spec, char *err,
                      size_t errlen)
{
        struct node_cluster *c;
        uint8_t sk[GOSSIP_SECRET_BYTES];
        int rc, handles = 0;

        *out = NULL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->loop = loop;
        c->o = o;
        c->ev = ev;
        c->nparams = nparams;
        c->nopt = nopt;
        snprintf(c->spec, sizeof(c->spec), "%s", spec);
        c->start_ms = unix_ms();
        pthread_mutex_init(&c->box.mu, NULL);
        pthread_cond_init(&c->box.cv, NULL);
        c->box.alive = 1;
        c->box.min_peer_step = UINT64_MAX;
        rc = load_identity(c, sk, err, errlen);
        if (rc == 0)
                rc = open_exchange(c, err, errlen);
        if (rc == 0)
                rc = open_net(c, err, errlen);
        if (rc == 0)
                rc = open_gossip(c, sk, err, errlen);
        sodium_memzero(sk, sizeof(sk));
        if (rc)
                goto out;
        node_log_set_name(c->name);
        uv_timer_init(loop, &c->tick);
        uv_timer_init(loop, &c->join_timer);
        uv_timer_init(loop, &c->linger);
        uv_async_init(loop, &c->async, on_async);
        c->tick.data = c->join_timer.data = c->linger.data = c;
        c->async.data = c;
        handles = 1;
        if (!c->listed)
                node_log(NODE_LOG_WARN,
                         "%s has no line for this node's key: peers that "
                         "use the same file will refuse it",
                         o->peers_path);
        join_all(c);
        uv_timer_start(&c->join_timer, on_join_timer,
                       NODE_CLUSTER_JOIN_RETRY_MS, NODE_CLUSTER_JOIN_RETRY_MS);
        *out = c;
out:
        if (rc) {
                if (c->g)
                        gossip_destroy(c->g);
                if (c->net) {
                        node_net_close(c->net);
                        uv_run(loop, UV_RUN_NOWAIT);
                }
                if (!handles)
                        free_cluster(c);
        }
        return rc;
}

static void on_linger(uv_timer_t *t)
{
        struct node_cluster *c = t->data;

        if (c->leave_done) {
                void (*cb)(void *) = c->leave_done;
                c->leave_done = NULL;
                cb(c->leave_arg);
        }
}

/* One line with the exchange counters (loop thread). */
static void log_summary(struct node_cluster *c)
{
        struct gossip_merge_stats ms;
        uint64_t applied, delta, stale, replaced, busy, waits, timeouts, fills;
        double wait_s;

        pthread_mutex_lock(&c->box.mu);
        gossip_merge_stats_get(&c->box.merge, &ms);
        applied = c->params_applied;
        delta = c->params_delta;
        stale = c->params_stale;
        replaced = c->params_replaced;
        busy = c->params_busy;
        waits = c->waits;
        timeouts = c->wait_timeouts;
        wait_s = c->wait_s;
        fills = c->fills;
        pthread_mutex_unlock(&c->box.mu);
        if (waits)
                node_log(NODE_LOG_INFO,
                         "averaging waits: %llu, %llu timed out, %.3f s in "
                         "all; %llu extra batches trained while waiting",
                         (unsigned long long)waits,
                         (unsigned long long)timeouts, wait_s,
                         (unsigned long long)fills);
        node_log(
            NODE_LOG_INFO,
            "exchange: %llu gradients sent (%llu without a partner, "
            "%llu refused); received %llu: %llu merged (%llu late), "
            "dropped %llu stale, %llu ahead, %llu other; parameters "
            "sent %llu (%llu skipped busy), averaged %llu (%llu against "
            "our copy of the same step) of %llu received (%llu too old, "
            "%llu replaced by a newer one); %llu states sent",
            (unsigned long long)c->grads_sent,
            (unsigned long long)c->grads_no_partner,
            (unsigned long long)c->grads_send_fail,
            (unsigned long long)ms.offers, (unsigned long long)ms.merged,
            (unsigned long long)ms.late, (unsigned long long)ms.dropped_stale,
            (unsigned long long)ms.dropped_future,
            (unsigned long long)(ms.dropped_shape + ms.dropped_nonfinite +
                                 ms.dropped_dup + ms.dropped_full),
            (unsigned long long)c->params_sent, (unsigned long long)busy,
            (unsigned long long)applied, (unsigned long long)delta,
            (unsigned long long)c->params_received, (unsigned long long)stale,
            (unsigned long long)replaced, (unsigned long long)c->states_sent);
}

void node_cluster_leave(struct node_cluster *c, void (*done)(void *arg),
                        void *arg)
{
        if (c->leaving)
                return;
        c->leaving = 1;
        c->leave_done = done;
        c->leave_arg = arg;
        log_summary(c);
        node_log(NODE_LOG_INFO, "leaving the cluster");
        gossip_leave(c->g);
        arm(c);
        uv_timer_start(&c->linger, on_linger, NODE_CLUSTER_LEAVE_LINGER_MS, 0);
}

int node_cluster_reload(struct node_cluster *c, char *err, size_t errlen)
{
        struct node_peer *np = NULL;
        struct gossip_peer gp;
        size_t nn = 0, added = 0, removed = 0;
        int rc;

        rc = node_peers_load(c->o->peers_path, &np, &nn, err, errlen);
        if (rc)
                return rc;
        for (size_t i = 0; i < nn; i++) {
                if (memcmp(np[i].pk, c->pk, GOSSIP_KEY_BYTES) == 0)
                        continue;
                to_gossip_peer(&np[i], &gp);
                if (node_peers_find_pk(c->peers, c->npeers, np[i].pk) < 0)
                        added++;
                gossip_trust_add(c->g, &gp);
        }
        for (size_t i = 0; i < c->npeers; i++)
                if (node_peers_find_pk(np, nn, c->peers[i].pk) < 0 &&
                    memcmp(c->peers[i].pk, c->pk, GOSSIP_KEY_BYTES) != 0) {
                        gossip_trust_remove(c->g, c->peers[i].pk);
                        removed++;
                }
        if (nn + 1 > c->view_cap) {
                void *v = realloc(c->view, (nn + 1) * GOSSIP_KEY_BYTES);
                if (v) {
                        c->view = v;
                        c->view_cap = nn + 1;
                }
        }
        node_peers_free(c->peers);
        c->peers = np;
        c->npeers = nn;
        node_log(NODE_LOG_INFO,
                 "peers reloaded: %zu entries, %zu added, "
                 "%zu removed",
                 nn, added, removed);
        arm(c);
        return 0;
}

/* ---- training side ------------------------------------------------------- */

void node_cluster_trainer_done(struct node_cluster *c)
{
        pthread_mutex_lock(&c->box.mu);
        c->box.trainer_done = 1;
        pthread_cond_broadcast(&c->box.cv);
        pthread_mutex_unlock(&c->box.mu);
}

/* Make and post a snapshot if the loop asked for one (training thread). */
static void serve_snapshot(struct node_cluster *c, struct node_trainer *t)
{
        void *buf = NULL;
        size_t len = 0;
        int want;

        pthread_mutex_lock(&c->box.mu);
        want = c->box.want_snapshot;
        c->box.want_snapshot = 0;
        pthread_mutex_unlock(&c->box.mu);
        if (!want || node_trainer_encode_state(t, &buf, &len))
                return;
        pthread_mutex_lock(&c->box.mu);
        free(c->box.state_buf);
        c->box.state_buf = buf;
        c->box.state_len = len;
        c->box.state_ready = 1;
        pthread_mutex_unlock(&c->box.mu);
        uv_async_send(&c->async);
}

/* Wait on the box (mutex held) until pred or ms passed; serves snapshot
 * requests meanwhile (drops and retakes the lock). 1 if pred holds. */
static int wait_box(struct node_cluster *c, struct node_trainer *t,
                    int (*pred)(struct box *), uint32_t ms)
{
        struct timespec until, slice;
        struct timespec now;

        deadline_after(&until, ms);
        while (!pred(&c->box)) {
                if (node_trainer_stopping(t))
                        return 0;
                if (c->box.want_snapshot) {
                        pthread_mutex_unlock(&c->box.mu);
                        serve_snapshot(c, t);
                        pthread_mutex_lock(&c->box.mu);
                        continue;
                }
                clock_gettime(CLOCK_REALTIME, &now);
                if (now.tv_sec > until.tv_sec || (now.tv_sec == until.tv_sec &&
                                                  now.tv_nsec >= until.tv_nsec))
                        return 0;
                deadline_after(&slice, 50);
                if (slice.tv_sec > until.tv_sec ||
                    (slice.tv_sec == until.tv_sec &&
                     slice.tv_nsec > until.tv_nsec))
                        slice = until;
                pthread_cond_timedwait(&c->box.cv, &c->box.mu, &slice);
        }
        return 1;
}

static int pred_alive(struct box *b)
{
        return b->alive > 1;
}

static int pred_state(struct box *b)
{
        return b->in_state_ready || b->state_none;
}

int node_cluster_initial_state(struct node_cluster *c, struct node_trainer *t,
                               struct nn_checkpoint *ck)
{
        struct node_train_stats st;
        char err[256], from[GOSSIP_NAME_MAX];
        void *buf;
        size_t len;
        int rc, got, none;

        node_trainer_stats(t, &st);
        pthread_mutex_lock(&c->box.mu);
        c->box.local_step = st.step;
        got = wait_box(c, t, pred_alive, NODE_CLUSTER_JOIN_WAIT_MS);
        node_trainer_set_peers(t, (uint32_t)(c->box.alive - 1));
        pthread_mutex_unlock(&c->box.mu);
        if (!got) {
                node_log(NODE_LOG_INFO, "no live peer yet: training alone "
                                        "until one joins");
                return 0;
        }
        for (int tries = 0; tries < NODE_CLUSTER_STATE_TRIES; tries++) {
                pthread_mutex_lock(&c->box.mu);
                c->box.want_state = 1;
                c->box.awaiting_state = 1;
                c->box.state_none = 0;
                pthread_mutex_unlock(&c->box.mu);
                uv_async_send(&c->async);
                pthread_mutex_lock(&c->box.mu);
                wait_box(c, t, pred_state, NODE_CLUSTER_STATE_WAIT_MS);
                buf = c->box.in_state;
                len = c->box.in_state_len;
                got = c->box.in_state_ready;
                none = c->box.state_none;
                snprintf(from, sizeof(from), "%s", c->box.in_state_from);
                c->box.in_state = NULL;
                c->box.in_state_ready = 0;
                if (got || none)
                        c->box.awaiting_state = 0;
                pthread_mutex_unlock(&c->box.mu);
                if (node_trainer_stopping(t)) {
                        free(buf);
                        break;
                }
                if (!got) {
                        if (none)
                                return 0; /* no one is ahead of us */
                        continue;
                }
                rc = nn_checkpoint_decode(buf, len, c->nparams + c->nopt, from,
                                          ck, err, sizeof(err));
                free(buf);
                if (rc) {
                        node_log(NODE_LOG_WARN, "state from %s refused: %s",
                                 from, err);
                        continue;
                }
                node_log(NODE_LOG_INFO, "took the model from %s at step %llu",
                         from, (unsigned long long)ck->step);
                node_evlog_join(c->ev, from, ck->step);
                gossip_codec_reset(&c->enc);
                return 1;
        }
        pthread_mutex_lock(&c->box.mu);
        c->box.awaiting_state = 0;
        pthread_mutex_unlock(&c->box.mu);
        node_log(NODE_LOG_WARN, "no state received: training from local "
                                "weights");
        return 0;
}

/* Bounded wait (--wait-ms): until a peer's gradient is in the buffer and
 * we are not more than S steps ahead of the slowest live peer (a
 * stale-synchronous bound), or the run ends. */
static int pred_ready(struct box *b)
{
        int ahead = b->min_peer_step != UINT64_MAX &&
                    b->local_step > b->min_peer_step + b->merge.staleness;

        return b->trainer_done || (b->merge.npending > 0 && !ahead);
}

/* Model averaging in step with the partners: the previous round's slice
 * has arrived (--wait-ms bounds the wait). */
static int pred_params(struct box *b)
{
        return b->trainer_done || b->last_in_step >= b->want_in_step;
}

void node_cluster_exchange(struct node_cluster *c, struct node_trainer *t,
                           uint64_t step, float *grads, size_t n)
{
        int send = c->o->codec != NODE_CODEC_NONE && n == c->nparams;
        size_t alive;
        float *tmp;

        pthread_mutex_lock(&c->box.mu);
        alive = c->box.alive;
        pthread_mutex_unlock(&c->box.mu);
        send = send && alive > 1;
        /* The only per-step cost here is one copy: the loop encodes. */
        if (send)
                memcpy(c->t_graw, grads, n * sizeof(float));
        pthread_mutex_lock(&c->box.mu);
        c->box.local_step = step;
        if (send) {
                tmp = c->box.grad_buf;
                c->box.grad_buf = c->t_graw;
                c->t_graw = tmp;
                c->box.grad_step = step;
                c->box.grad_ready = 1;
        }
        pthread_mutex_unlock(&c->box.mu);
        if (send)
                uv_async_send(&c->async); /* before any wait: the partner
                                             may be waiting for ours */
        pthread_mutex_lock(&c->box.mu);
        if (c->o->wait_ms && send)
                wait_box(c, t, pred_ready, c->o->wait_ms);
        gossip_merge_apply(&c->box.merge, step, grads, n);
        pthread_mutex_unlock(&c->box.mu);
}

/* Average a received parameter slice into params (box lock held). With
 * our own slice of the same step still in the ring, only the difference
 * of the two copies at that step is averaged in, so the steps we took
 * since are kept; without it, plain averaging with the (older) copy. */
static void apply_slice(struct node_cluster *c, uint64_t step, float *params,
                        size_t n, const struct in_slice *q)
{
        uint64_t window = c->o->avg_every + c->o->staleness;
        uint64_t k = c->o->avg_every ? c->o->avg_every : 1;
        int slot = (int)((q->step / k) % NODE_CLUSTER_PARAMS_RING);
        size_t mlo = 0, mcount = 0;
        int rc;

        if (q->step + window < step || q->lo + q->count > n) {
                c->params_stale++;
                return;
        }
        /* the ring only holds rounds we posted (avg_every > 0) */
        if (c->o->avg_every && c->ring_step[slot] != UINT64_MAX)
                params_part(c, q->step, &mlo, &mcount);
        if (mcount && c->ring_step[slot] == q->step && mlo == q->lo &&
            mcount == q->count) {
                rc = gossip_merge_average_delta(
                    params + q->lo, c->ring + (size_t)slot * c->praw_cap, q->v,
                    q->count, c->o->avg_weight);
                c->params_delta += rc == 0;
        } else {
                rc = gossip_merge_average_params(params + q->lo, q->v, q->count,
                                                 c->o->avg_weight);
        }
        if (rc == 0)
                c->params_applied++;
}

static size_t alive_now(struct node_cluster *c)
{
        size_t alive;

        pthread_mutex_lock(&c->box.mu);
        alive = c->box.alive;
        pthread_mutex_unlock(&c->box.mu);
        return alive;
}

/* The ring slot for our slice of averaging round step, for the optimizer
 * to fill as it writes the slice (trainer.h slice_dst); NULL if the round
 * is not due, we are alone, or the loop still has that slot. */
float *node_cluster_slice_dst(struct node_cluster *c, uint64_t step, size_t *lo,
                              size_t *count)
{
        int slot;
        int busy;

        if (!c->o->avg_every ||
            !gossip_merge_average_due(step, c->o->avg_every) ||
            alive_now(c) <= 1)
                return NULL;
        slot = (int)((step / c->o->avg_every) % NODE_CLUSTER_PARAMS_RING);
        pthread_mutex_lock(&c->box.mu);
        busy = c->box.ring_busy[slot];
        pthread_mutex_unlock(&c->box.mu);
        if (busy)
                return NULL;
        params_part(c, step, lo, count);
        c->ring_step[slot] = UINT64_MAX; /* being overwritten */
        c->t_filled = step;
        return c->ring + (size_t)slot * c->praw_cap;
}

/* Post our slice of this averaging round to the loop (which encodes and
 * sends it): the optimizer already put it in the ring (filled), or it is
 * copied there now. Skipped if the loop is still busy with that slot. */
static void post_params(struct node_cluster *c, uint64_t step,
                        const float *params, int filled)
{
        int slot = (int)((step / c->o->avg_every) % NODE_CLUSTER_PARAMS_RING);
        size_t lo, count;
        int busy;

        params_part(c, step, &lo, &count);
        pthread_mutex_lock(&c->box.mu);
        busy = c->box.ring_busy[slot];
        c->params_busy += busy != 0;
        pthread_mutex_unlock(&c->box.mu);
        if (busy)
                return;
        if (!filled)
                memcpy(c->ring + (size_t)slot * c->praw_cap, params + lo,
                       count * sizeof(float));
        c->ring_step[slot] = step;
        pthread_mutex_lock(&c->box.mu);
        /* a free slot is never among the posted ones, so this fits */
        c->box.ring_busy[slot] = 1;
        c->box.params_slot[c->box.params_ready] = slot;
        c->box.params_step[c->box.params_ready] = step;
        c->box.params_ready++;
        pthread_mutex_unlock(&c->box.mu);
        uv_async_send(&c->async);
}

/* --fill-batches (box lock held): while the slice we wait for is
 * missing, train extra batches into the next step instead of idling. The
 * lock is dropped while one computes. */
static void fill_wait(struct node_cluster *c, struct node_trainer *t)
{
        for (uint32_t k = 0; k < c->o->fill_batches; k++) {
                int rc;

                if (pred_params(&c->box) || node_trainer_stopping(t))
                        return;
                pthread_mutex_unlock(&c->box.mu);
                rc = node_trainer_extra_batch(t);
                serve_snapshot(c, t);
                pthread_mutex_lock(&c->box.mu);
                if (rc)
                        return;
                c->fills++;
        }
}

void node_cluster_after_step(struct node_cluster *c, struct node_trainer *t,
                             uint64_t step, float *params, size_t n)
{
        const uint64_t lag = c->o->avg_lag;
        int filled = c->t_filled == step; /* the optimizer wrote our slice */
        size_t alive;

        c->t_filled = UINT64_MAX;
        serve_snapshot(c, t);
        if (alive_now(c) > 1 && n == c->nparams &&
            gossip_merge_average_due(step, c->o->avg_every))
                post_params(c, step, params, filled);
        else if (filled) /* not sent, but a valid copy of this step */
                c->ring_step[(step / c->o->avg_every) %
                             NODE_CLUSTER_PARAMS_RING] = step;
        pthread_mutex_lock(&c->box.mu);
        alive = c->box.alive;
        c->box.local_step = step;
        /* LAG rounds of slack: communication of round s overlaps the
         * compute of the next LAG rounds */
        if (c->o->wait_ms && alive > 1 && c->o->avg_every &&
            step > lag * c->o->avg_every) {
                double w0;

                c->box.want_in_step = step - lag * c->o->avg_every;
                c->waits++;
                fill_wait(c, t);
                w0 = mono_s();
                c->wait_timeouts += !wait_box(c, t, pred_params, c->o->wait_ms);
                c->wait_s += mono_s() - w0;
        }
        /* everything that arrived is averaged in now: a round we passed
         * against our copy of it, a round still ahead of us plainly (it
         * pulls us forward; holding it until we get there was measured
         * worse, docs/cluster-tuning.md #22) */
        for (size_t i = 0; i < c->box.inq_n; i++)
                apply_slice(c, step, params, n, &c->box.inq[i]);
        c->box.inq_n = 0;
        pthread_mutex_unlock(&c->box.mu);
}

/* ---- control socket and metrics (loop) ----------------------------------- */

static void pack_str(msgpack_packer *pk, const char *s)
{
        size_t n = strlen(s);

        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, s, n);
}

static void pack_kstr(msgpack_packer *pk, const char *k, const char *v)
{
        pack_str(pk, k);
        pack_str(pk, v);
}

static void pack_ku64(msgpack_packer *pk, const char *k, uint64_t v)
{
        pack_str(pk, k);
        msgpack_pack_uint64(pk, v);
}

static void pack_kdbl(msgpack_packer *pk, const char *k, double v)
{
        pack_str(pk, k);
        if (isfinite(v))
                msgpack_pack_double(pk, v);
        else
                msgpack_pack_nil(pk);
}

static const char *reject_names[GOSSIP_REJECT_SLOTS] = {
    NULL,    "invalid",     "nomem",   "short",    "too_big", "version",
    "kind",  "unknown_key", "bad_sig", "replay",   "decode",  "non_finite",
    "stale", "no_peer",     "send",    "mismatch",
};

static void pack_rejects(msgpack_packer *pk, const uint64_t *r)
{
        size_t n = 0;

        for (int i = 1; i < GOSSIP_REJECT_SLOTS; i++)
                n += r[i] != 0;
        pack_str(pk, "rejects");
        msgpack_pack_map(pk, n);
        for (int i = 1; i < GOSSIP_REJECT_SLOTS; i++)
                if (r[i])
                        pack_ku64(pk, reject_names[i], r[i]);
}

static void pack_member(struct node_cluster *c, msgpack_packer *pk,
                        const struct gossip_member_info *m, int self)
{
        char a[NODE_ADDR_STR_SIZE] = "", k[NODE_KEY_PK_B64_SIZE];
        uint64_t now = node_net_now_ms(c->net);

        node_addr_format(&m->addr, a, sizeof(a));
        node_key_pk_to_base64(m->key, k);
        msgpack_pack_map(pk, 9);
        pack_kstr(pk, "name", m->name);
        pack_kstr(pk, "addr", a);
        pack_kstr(pk, "key", k);
        pack_str(pk, "self");
        self ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        pack_kstr(pk, "state", gossip_state_name(m->state));
        pack_ku64(pk, "incarnation", m->incarnation);
        pack_kdbl(pk, "rtt_ms", m->rtt_ms ? (double)m->rtt_ms : NAN);
        pack_ku64(pk, "step", m->step);
        pack_str(pk, "last_heard_ms");
        if (self || !m->last_heard_ms || m->last_heard_ms > now)
                msgpack_pack_nil(pk);
        else
                msgpack_pack_uint64(pk, now - m->last_heard_ms);
}

/* A copy of every member (ours first); *n set; NULL on no memory. */
static struct gossip_member_info *members_copy(struct node_cluster *c,
                                               size_t *n)
{
        size_t cap = c->npeers + 1, total;
        struct gossip_member_info *mi = calloc(cap, sizeof(*mi));

        if (!mi)
                return NULL;
        total = gossip_members(c->g, mi, cap);
        *n = total < cap ? total : cap;
        return mi;
}

static int ctl_members(struct node_cluster *c, msgpack_packer *pk)
{
        size_t n;
        struct gossip_member_info *mi = members_copy(c, &n);

        if (!mi)
                return -ENOMEM;
        msgpack_pack_array(pk, n);
        for (size_t i = 0; i < n; i++)
                pack_member(c, pk, &mi[i], i == 0);
        free(mi);
        return 0;
}

static void pack_peer_stats(struct node_cluster *c, msgpack_packer *pk,
                            const struct gossip_member_info *m)
{
        char a[NODE_ADDR_STR_SIZE] = "", k[NODE_KEY_PK_B64_SIZE];
        struct node_cluster_peer_grads *pg = peer_grads(c, m->key);
        struct node_net_peer_stats ps[64];
        size_t nps = node_net_peer_stats(c->net, ps, 64);
        uint64_t queued = 0, dropped = 0;

        if (nps > 64)
                nps = 64;
        for (size_t i = 0; i < nps; i++)
                if (node_net_addr_equal(&ps[i].addr, &m->addr)) {
                        queued = ps[i].queued_bytes;
                        dropped = ps[i].frames_dropped;
                }
        node_addr_format(&m->addr, a, sizeof(a));
        node_key_pk_to_base64(m->key, k);
        msgpack_pack_map(pk, 14);
        pack_kstr(pk, "name", m->name);
        pack_kstr(pk, "addr", a);
        pack_kstr(pk, "key", k);
        pack_kstr(pk, "state", gossip_state_name(m->state));
        pack_ku64(pk, "bytes_in", m->bytes_in);
        pack_ku64(pk, "bytes_out", m->bytes_out);
        pack_ku64(pk, "msgs_in", m->msgs_in);
        pack_ku64(pk, "msgs_out", m->msgs_out);
        pack_ku64(pk, "grads_merged", pg ? pg->merged : 0);
        pack_ku64(pk, "grads_late", pg ? pg->late : 0);
        pack_ku64(pk, "grads_dropped", pg ? pg->dropped : 0);
        pack_rejects(pk, m->rejects);
        pack_ku64(pk, "queued_bytes", queued);
        pack_ku64(pk, "frames_dropped", dropped);
}

static int ctl_stats(struct node_cluster *c, struct node_trainer *t,
                     msgpack_packer *pk)
{
        struct gossip_stats gs;
        struct node_net_stats ns;
        struct gossip_merge_stats ms;
        struct node_train_stats ts;
        char k[NODE_KEY_PK_B64_SIZE];
        size_t n, alive = 0, suspect = 0;
        struct gossip_member_info *mi = members_copy(c, &n);

        if (!mi)
                return -ENOMEM;
        gossip_stats_get(c->g, &gs);
        node_net_stats(c->net, &ns);
        pthread_mutex_lock(&c->box.mu);
        gossip_merge_stats_get(&c->box.merge, &ms);
        pthread_mutex_unlock(&c->box.mu);
        node_trainer_stats(t, &ts);
        for (size_t i = 0; i < n; i++) {
                alive += mi[i].state == GOSSIP_ALIVE;
                suspect += mi[i].state == GOSSIP_SUSPECT;
        }
        node_key_pk_to_base64(c->pk, k);
        msgpack_pack_map(pk, 2);
        pack_str(pk, "node");
        msgpack_pack_map(pk, 19);
        pack_kstr(pk, "name", c->name);
        pack_kstr(pk, "key", k);
        pack_kdbl(pk, "uptime_s", (double)(unix_ms() - c->start_ms) / 1000.0);
        pack_ku64(pk, "step", ts.step);
        pack_ku64(pk, "epoch", ts.epoch);
        pack_kdbl(pk, "loss", ts.loss);
        pack_kdbl(pk, "accuracy", ts.acc / 100.0);
        pack_kdbl(pk, "samples_per_s", ts.sps);
        pack_ku64(pk, "members_alive", alive);
        pack_ku64(pk, "members_suspect", suspect);
        pack_ku64(pk, "bytes_in", gs.bytes_in);
        pack_ku64(pk, "bytes_out", gs.bytes_out);
        pack_ku64(pk, "msgs_in", gs.msgs_in);
        pack_ku64(pk, "msgs_out", gs.msgs_out);
        pack_ku64(pk, "grads_merged", ms.merged - ms.late);
        pack_ku64(pk, "grads_late", ms.late);
        pack_ku64(pk, "grads_dropped",
                  ms.offers - ms.accepted + (ms.accepted - ms.merged));
        pack_rejects(pk, gs.rejects);
        pack_str(pk, "net");
        msgpack_pack_map(pk, 6);
        pack_ku64(pk, "frames_dropped", ns.frames_dropped);
        pack_ku64(pk, "oversize", ns.oversize);
        pack_ku64(pk, "connects", ns.connects);
        pack_ku64(pk, "connect_failures", ns.connect_failures);
        pack_ku64(pk, "stalls", ns.stalls);
        pack_ku64(pk, "dgram_oversize", ns.dgram_oversize);
        pack_str(pk, "peers");
        msgpack_pack_array(pk, n ? n - 1 : 0);
        for (size_t i = 1; i < n; i++)
                pack_peer_stats(c, pk, &mi[i]);
        free(mi);
        return 0;
}

/* The string value of key in map args, or NULL. */
static const char *arg_str(const msgpack_object *args, const char *key,
                           char *buf, size_t len)
{
        if (!args || args->type != MSGPACK_OBJECT_MAP)
                return NULL;
        for (uint32_t i = 0; i < args->via.map.size; i++) {
                const msgpack_object_kv *kv = &args->via.map.ptr[i];
                if (kv->key.type != MSGPACK_OBJECT_STR ||
                    kv->key.via.str.size != strlen(key) ||
                    memcmp(kv->key.via.str.ptr, key, strlen(key)) != 0)
                        continue;
                if (kv->val.type != MSGPACK_OBJECT_STR ||
                    kv->val.via.str.size >= len)
                        return NULL;
                memcpy(buf, kv->val.via.str.ptr, kv->val.via.str.size);
                buf[kv->val.via.str.size] = '\0';
                return buf;
        }
        return NULL;
}

static int ctl_join(struct node_cluster *c, const msgpack_object *args,
                    msgpack_packer *pk, char *err, size_t errlen)
{
        char buf[256];
        const char *s = arg_str(args, "addr", buf, sizeof(buf));
        struct gossip_addr a;
        int rc;

        if (!s || node_addr_parse(s, &a, 1) != 0) {
                snprintf(err, errlen, "bad address: %s", s ? s : "(none)");
                return -EINVAL;
        }
        rc = gossip_join(c->g, &a);
        arm(c);
        msgpack_pack_map(pk, 2);
        pack_str(pk, "joined");
        rc == 0 ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        pack_ku64(pk, "alive", gossip_alive_count(c->g));
        return 0;
}

/* force-leave {"name": N} or {"key": base64}: declare a gone member left
 * on this node's behalf (docs/control.md). */
static int ctl_force_leave(struct node_cluster *c, const msgpack_object *args,
                           msgpack_packer *pk, char *err, size_t errlen)
{
        char nbuf[GOSSIP_NAME_MAX + 1], kbuf[NODE_KEY_PK_B64_SIZE];
        const char *name = arg_str(args, "name", nbuf, sizeof(nbuf));
        const char *key = arg_str(args, "key", kbuf, sizeof(kbuf));
        struct gossip_member_info *mi, found;
        uint8_t pk_bin[GOSSIP_KEY_BYTES];
        size_t n = 0;
        int hit = 0;

        if (key && node_key_pk_from_base64(key, strlen(key), pk_bin) != 0) {
                snprintf(err, errlen, "bad key: %s", key);
                return -EINVAL;
        }
        if (!name && !key) {
                snprintf(err, errlen, "force-leave needs a name or a key");
                return -EINVAL;
        }
        mi = members_copy(c, &n);
        for (size_t i = 0; mi && i < n && !hit; i++) {
                if (key ? memcmp(mi[i].key, pk_bin, GOSSIP_KEY_BYTES) == 0
                        : strcmp(mi[i].name, name) == 0) {
                        found = mi[i];
                        hit = 1;
                }
        }
        free(mi);
        if (!hit) {
                snprintf(err, errlen, "no such member: %s", key ? key : name);
                return -ENOENT;
        }
        if (memcmp(found.key, c->pk, GOSSIP_KEY_BYTES) == 0) {
                snprintf(err, errlen, "cannot force-leave self");
                return -EINVAL;
        }
        if (gossip_force_leave(c->g, found.key) != 0 &&
            found.state != GOSSIP_LEFT) {
                snprintf(err, errlen, "force-leave %s failed", found.name);
                return -EINVAL;
        }
        arm(c);
        msgpack_pack_map(pk, 2);
        pack_kstr(pk, "name", found.name);
        pack_kstr(pk, "state", "left");
        return 0;
}

int node_cluster_ctl(struct node_cluster *c, struct node_trainer *t,
                     const char *cmd, const msgpack_object *args,
                     msgpack_packer *pk, char *err, size_t errlen)
{
        if (strcmp(cmd, "members") == 0)
                return ctl_members(c, pk);
        if (strcmp(cmd, "stats") == 0)
                return ctl_stats(c, t, pk);
        if (strcmp(cmd, "join") == 0)
                return ctl_join(c, args, pk, err, errlen);
        if (strcmp(cmd, "force-leave") == 0)
                return ctl_force_leave(c, args, pk, err, errlen);
        snprintf(err, errlen, "unknown command: %s", cmd);
        return -ENOTSUP;
}

void node_cluster_metrics(struct node_cluster *c, struct node_trainer *t,
                          struct node_metrics_buf *b)
{
        struct gossip_stats gs;
        struct node_net_stats ns;
        struct gossip_merge_stats ms;

        gossip_stats_get(c->g, &gs);
        node_net_stats(c->net, &ns);
        pthread_mutex_lock(&c->box.mu);
        gossip_merge_stats_get(&c->box.merge, &ms);
        pthread_mutex_unlock(&c->box.mu);
        node_metrics_gauge(b, "members_alive",
                           "Members (ourselves included) alive or suspect",
                           (double)gossip_alive_count(c->g));
        node_metrics_counter(b, "gossip_bytes_in_total",
                             "Bytes of verified protocol messages received",
                             gs.bytes_in);
        node_metrics_counter(b, "gossip_bytes_out_total",
                             "Bytes of protocol messages sent", gs.bytes_out);
        node_metrics_counter(b, "gossip_msgs_in_total",
                             "Protocol messages received", gs.msgs_in);
        node_metrics_counter(b, "gossip_msgs_out_total",
                             "Protocol messages sent", gs.msgs_out);
        node_metrics_counter(b, "gossip_suspects_total", "Suspicions raised",
                             gs.suspects_raised);
        node_metrics_counter(b, "gossip_deaths_total", "Members declared dead",
                             gs.deaths_declared);
        node_metrics_counter(b, "grads_sent_total",
                             "Gradients sent to a partner", c->grads_sent);
        node_metrics_counter(b, "grads_send_failures_total",
                             "Gradients the protocol refused to send",
                             c->grads_send_fail);
        node_metrics_counter(b, "grads_merged_total",
                             "Received gradients merged", ms.merged);
        node_metrics_counter(b, "grads_late_total",
                             "Gradients merged although late (within S)",
                             ms.late);
        node_metrics_counter(b, "grads_stale_total",
                             "Gradients dropped as too stale",
                             ms.dropped_stale + ms.dropped_future);
        node_metrics_counter(b, "params_averaged_total",
                             "Parameter sets averaged in", c->params_applied);
        node_metrics_counter(b, "state_transfers_sent_total",
                             "Model states sent to joining peers",
                             c->states_sent);
        node_metrics_counter(b, "net_frames_dropped_total",
                             "Stream frames dropped by the transport",
                             ns.frames_dropped);
        node_metrics_counter(b, "net_connect_failures_total",
                             "Outgoing TCP connects that failed",
                             ns.connect_failures);
}
