/*
 * xsim.c - the exchange simulator (see xsim.h): nodes as state machines
 * driven by one event heap (evheap.h) in virtual microseconds.
 *
 * A node is always in one state: computing a batch (COMPUTE), computing an
 * extra batch (EXTRA), blocked in a plan WAIT (WAIT), finished (DONE) or
 * dead. Each node has a generation number bumped whenever it leaves a
 * state, and its COMPUTE and WAKE events carry the generation they were
 * armed in, so an event for a state the node has left is ignored. In WAIT
 * the node asks the plan again on every arrival, view change and wake-up;
 * the plan (not this file) decides whether it goes on.
 *
 * Node i has the i-th smallest key, so a view in index order is a sorted
 * key array, as gossip_sched_init wants. Ownership: the simulator owns
 * every buffer; a slice in flight owns its copy of the floats until it is
 * delivered (or the simulator is destroyed).
 */
#include "xsim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "evheap.h"
#include "gossip/merge.h"
#include "gossip/schedule.h"
#include "base/gn_rng.h"

enum { EV_COMPUTE, EV_WAKE, EV_MSG, EV_DIE, EV_GONE, EV_STEPINFO };
enum { M_GRAD, M_SLICE };
enum { XN_COMPUTE, XN_EXTRA, XN_WAIT, XN_DONE, XN_DEAD };

#define LR 1e-4f /* the model moves, a little, every step */

struct xev {
        struct evheap_key k; /* first: the heap orders by it */
        uint32_t type, node, from, kind;
        uint64_t gen;  /* COMPUTE/WAKE: node generation; MSG: tx end */
        uint64_t step; /* MSG, STEPINFO */
        size_t lo, count;
        uint32_t part;
        uint64_t reach;
        float g;  /* M_GRAD */
        float *v; /* M_SLICE: owned */
};

struct inslice {
        uint64_t step, reach;
        size_t lo, count;
        uint32_t part;
        float *v; /* slice_cap floats */
};

struct xnode {
        size_t idx;
        uint32_t step_us;
        int state, phase;
        uint64_t gen, t, wake_at, wait_since;
        uint64_t died_at;
        int dead;
        float *x, *ring;
        uint64_t ring_step[GOSSIP_PLAN_RING];
        struct inslice *in;
        size_t in_n;
        uint64_t last_in;
        struct gossip_plan_leads leads;
        uint64_t start_us;
        struct gossip_merge merge;
        float g;
        uint32_t acc_n;
        float acc_g;
        struct gossip_plan_wait w;
        struct gossip_plan_health health; /* fed as node/train/handoff.c does */
        int health_changes;
        /* membership view: members not known dead or left, ascending */
        uint8_t *gone;
        size_t *view, vn;
        uint8_t (*vkeys)[GOSSIP_KEY_BYTES];
        struct gossip_sched sched;
        uint64_t *known_step;
        uint64_t *reach;    /* per part */
        uint64_t *answered; /* per part: our step of its last average */
        struct xsim_stats st;
};

struct xlink {
        struct xsim_link l;
        uint64_t busy_until, last_arrival;
};

struct xsim {
        struct xsim_opts o;
        struct gossip_plan_cfg cfg;
        size_t n, cap;
        uint64_t now, rng;
        int started; /* the first batches are armed by the first run */
        uint8_t (*keys)[GOSSIP_KEY_BYTES];
        struct xnode *nodes;
        struct xlink *links; /* n*n, [from*n+to] */
        /* apply_inbox's scratch (inbox_cap each): what arrived, as the
         * plan's rule reads it, and its verdicts */
        struct gossip_plan_arrival *arr;
        struct gossip_plan_judged *judged;
        struct evheap heap;
};

static const struct {
        const char *name;
        struct xsim_link l;
} presets[XSIM_LINK_PRESETS] = {
    [XSIM_LINK_LAN] = {"1 Gbit/s 0.1 ms", {1e9, 100, 0, 0}},
    [XSIM_LINK_10M_40MS] = {"10 Mbit/s 40 ms", {10e6, 40000, 0, 0}},
    [XSIM_LINK_100M_20MS] = {"100 Mbit/s 20 ms", {100e6, 20000, 0, 0}},
    [XSIM_LINK_LOSS_1PCT] = {"100 Mbit/s 20 ms 1% loss",
                             {100e6, 20000, 0.01, 0}},
};

struct xsim_link xsim_link_preset(enum xsim_preset p)
{
        return presets[(unsigned)p < XSIM_LINK_PRESETS ? p : 0].l;
}

const char *xsim_link_preset_name(enum xsim_preset p)
{
        return presets[(unsigned)p < XSIM_LINK_PRESETS ? p : 0].name;
}

static double unit(struct xsim *x)
{
        return (double)(gn_splitmix64(&x->rng) >> 11) *
               (1.0 / 9007199254740992.0);
}

static void push(struct xsim *x, struct xev *ev)
{
        /* the heap grows by doubling: out of memory here is fatal for a
         * test, and a lost event would silently change the run */
        if (evheap_push(&x->heap, ev) < 0)
                abort();
}

static void push_node(struct xsim *x, uint32_t type, struct xnode *nd,
                      uint64_t at)
{
        struct xev ev = {0};

        ev.k.t = at;
        ev.type = type;
        ev.node = (uint32_t)nd->idx;
        ev.gen = nd->gen;
        push(x, &ev);
}

/* ---- links ---- */

/* Queue a message on link from -> to: FIFO behind what the link is still
 * sending, a latency, a timeout per lost packet, in order per link. */
static void link_send(struct xsim *x, struct xev *ev, size_t bytes)
{
        struct xlink *k = &x->links[ev->from * x->n + ev->node];
        struct xnode *src = &x->nodes[ev->from];
        uint64_t tx = 0, start, at;
        size_t pk = (bytes + XSIM_MSS_BYTES - 1) / XSIM_MSS_BYTES;

        if (k->l.drop > 0 && unit(x) < k->l.drop) {
                src->st.msgs_dropped++;
                free(ev->v);
                return;
        }
        if (k->l.bits_per_s > 0)
                tx = (uint64_t)ceil((double)bytes * 8e6 / k->l.bits_per_s);
        start = k->busy_until > x->now ? k->busy_until : x->now;
        k->busy_until = start + tx;
        at = k->busy_until + k->l.latency_us;
        for (size_t i = 0; k->l.loss > 0 && i < pk; i++)
                if (unit(x) < k->l.loss) {
                        src->st.retransmits++;
                        at += XSIM_RTO_US;
                }
        if (at < k->last_arrival)
                at = k->last_arrival;
        k->last_arrival = at;
        if (x->o.on_send)
                x->o.on_send(x, ev->from, ev->node, bytes, k->busy_until, at,
                             x->o.user);
        ev->k.t = at;
        ev->type = EV_MSG;
        ev->gen = k->busy_until; /* when its last byte left the sender */
        push(x, ev);
}

/* ---- views and the schedule ---- */

static void view_rebuild(struct xsim *x, struct xnode *nd)
{
        nd->vn = 0;
        for (size_t j = 0; j < x->n; j++)
                if (!nd->gone[j]) {
                        nd->view[nd->vn] = j;
                        memcpy(nd->vkeys[nd->vn], x->keys[j], GOSSIP_KEY_BYTES);
                        nd->vn++;
                }
        if (gossip_sched_init(&nd->sched,
                              (const uint8_t(*)[GOSSIP_KEY_BYTES])nd->vkeys,
                              nd->vn, x->keys[nd->idx], x->o.seed,
                              GOSSIP_SCHED_DISSEMINATION) < 0)
                abort(); /* our own invariant: the view is sorted */
}

/* Node index of our partner at step, or -1 when alone. */
static long partner(struct xnode *nd, uint64_t step)
{
        size_t p;

        if (nd->vn < 2 ||
            gossip_sched_partner(&nd->sched, step, NULL, NULL, &p) < 0)
                return -1;
        return (long)nd->view[p];
}

static uint64_t min_peer_step(const struct xnode *nd)
{
        uint64_t m = UINT64_MAX;

        for (size_t i = 0; i < nd->vn; i++)
                if (nd->view[i] != nd->idx && nd->known_step[nd->view[i]] < m)
                        m = nd->known_step[nd->view[i]];
        return m;
}

/* ---- the trainer loop ---- */

static void ask(struct xsim *x, struct xnode *nd);

/* A deterministic "gradient" of node i's batch k at step t. */
static float batch_grad(const struct xnode *nd, uint64_t t, uint32_t k)
{
        return 1.0f + 0.01f * (float)nd->idx + 0.001f * (float)((t + k) % 7);
}

static void set_state(struct xsim *x, struct xnode *nd, int state)
{
        if (nd->state == XN_WAIT && state != XN_WAIT)
                nd->st.wait_us += x->now - nd->wait_since;
        if (state == XN_WAIT && nd->state != XN_WAIT)
                nd->wait_since = x->now;
        if (state != nd->state) {
                nd->gen++;
                nd->wake_at = 0;
        }
        nd->state = state;
}

static void begin_batch(struct xsim *x, struct xnode *nd)
{
        set_state(x, nd, XN_COMPUTE);
        push_node(x, EV_COMPUTE, nd, x->now + nd->step_us);
}

static void begin_phase(struct xsim *x, struct xnode *nd, int phase)
{
        nd->phase = phase;
        gossip_plan_wait_begin(&nd->w);
        ask(x, nd);
}

/* a. the batch gradient of step t is done: send it, then the GRADIENT
 * phase. */
static void batch_done(struct xsim *x, struct xnode *nd)
{
        long p = x->cfg.grads ? partner(nd, nd->t) : -1;

        nd->g = batch_grad(nd, nd->t, 0);
        if (p >= 0) {
                struct xev ev = {0};

                ev.node = (uint32_t)p;
                ev.from = (uint32_t)nd->idx;
                ev.kind = M_GRAD;
                ev.step = nd->t;
                ev.g = nd->g;
                nd->st.grads_sent++;
                link_send(x, &ev, x->o.grad_bytes + XSIM_FRAME_BYTES);
        }
        begin_phase(x, nd, GOSSIP_PLAN_GRADIENT);
}

/* Membership news about nd (its step, its goodbye) for every other live
 * node, a link latency later: membership traffic is small and, in this
 * model, never lost. */
static void tell_others(struct xsim *x, struct xnode *nd, uint32_t type)
{
        for (size_t j = 0; j < x->n; j++) {
                struct xev ev = {0};

                if (j == nd->idx || x->nodes[j].dead)
                        continue;
                ev.k.t = x->now + x->links[nd->idx * x->n + j].l.latency_us;
                ev.type = type;
                ev.node = (uint32_t)j;
                ev.from = (uint32_t)nd->idx;
                ev.step = nd->t;
                push(x, &ev);
        }
}

/* c. our slice of the round of step t into its ring slot, and to the
 * partner of step t. */
static void post_slice(struct xsim *x, struct xnode *nd)
{
        unsigned slot = gossip_plan_slot(&x->cfg, nd->t);
        float *mine = nd->ring + (size_t)slot * x->cap;
        struct xev ev = {0};
        long p;

        ev.part = gossip_plan_slice(&x->cfg, nd->t, &ev.lo, &ev.count);
        memcpy(mine, nd->x + ev.lo, ev.count * sizeof(float));
        nd->ring_step[slot] = nd->t;
        p = partner(nd, nd->t);
        if (p < 0)
                return;
        ev.v = malloc((ev.count ? ev.count : 1) * sizeof(float));
        if (!ev.v)
                abort();
        memcpy(ev.v, mine, ev.count * sizeof(float));
        ev.node = (uint32_t)p;
        ev.from = (uint32_t)nd->idx;
        ev.kind = M_SLICE;
        ev.step = nd->t;
        ev.reach = nd->reach[ev.part];
        nd->st.slices_sent++;
        link_send(x, &ev,
                  ev.count * 2 * (x->o.slice_scale ? x->o.slice_scale : 1) +
                      XSIM_FRAME_BYTES); /* fp16 */
}

/* b -> c. merge, fold the extra batches in, step, post, PARAMS phase. */
static void optimizer_step(struct xsim *x, struct xnode *nd)
{
        int merged = gossip_merge_apply(&nd->merge, nd->t, &nd->g, 1);
        float g = nd->g + nd->acc_g;

        nd->st.grads_merged += merged > 0 ? (uint64_t)merged : 0;
        nd->st.extra_folded += nd->acc_n;
        nd->st.steps_with_extra += nd->acc_n > 0;
        nd->acc_n = 0;
        nd->acc_g = 0;
        for (size_t i = 0; i < x->cfg.nparams; i++)
                nd->x[i] -= LR * g;
        nd->t++;
        nd->st.steps++;
        gossip_merge_set_step(&nd->merge, nd->t);
        tell_others(x, nd, EV_STEPINFO);
        if (gossip_plan_due(&x->cfg, nd->t))
                post_slice(x, nd);
        begin_phase(x, nd, GOSSIP_PLAN_PARAMS);
}

/* e. average in what arrived, as the plan judges it (gossip_plan_judge,
 * the call node/train/handoff.c makes): in the rule's order, the last arrival
 * first. */
static void apply_inbox(struct xsim *x, struct xnode *nd)
{
        float w = x->o.avg_weight;

        for (size_t i = 0; i < nd->in_n; i++) {
                x->arr[i].step = nd->in[i].step;
                x->arr[i].lo = nd->in[i].lo;
                x->arr[i].count = nd->in[i].count;
                x->arr[i].period = 0; /* every node runs the configured K */
        }
        gossip_plan_judge(&x->cfg, nd->t, x->arr, nd->in_n, nd->ring_step,
                          x->o.answer_twice ? NULL : nd->answered, x->judged);
        for (size_t i = nd->in_n; i-- > 0;) {
                struct inslice *q = &nd->in[i];
                unsigned slot = x->judged[i].slot;
                uint64_t held = nd->ring_step[slot];
                int use = x->judged[i].use;
                int rc = 0;

                if (use == GOSSIP_PLAN_ANSWERED) {
                        nd->st.slices_answered++;
                        continue;
                }
                if (use == GOSSIP_PLAN_DELTA)
                        rc = gossip_merge_average_delta(
                            nd->x + q->lo, nd->ring + (size_t)slot * x->cap,
                            q->v, q->count, w);
                else if (use == GOSSIP_PLAN_PLAIN)
                        rc = gossip_merge_average_params(nd->x + q->lo, q->v,
                                                         q->count, w);
                if (rc < 0)
                        abort(); /* finite floats and a valid weight */
                if (use != GOSSIP_PLAN_STALE)
                        nd->reach[q->part] |= q->reach;
                nd->st.slices_delta += use == GOSSIP_PLAN_DELTA;
                nd->st.slices_plain += use == GOSSIP_PLAN_PLAIN;
                nd->st.slices_stale += use == GOSSIP_PLAN_STALE;
                nd->health_changes += gossip_plan_health_note(
                    &nd->health, use == GOSSIP_PLAN_STALE ? GOSSIP_PLAN_TOO_OLD
                                                          : GOSSIP_PLAN_USED);
                if (held == q->step && x->cfg.avg_every) {
                        nd->st.held_delta += use == GOSSIP_PLAN_DELTA;
                        nd->st.held_plain += use == GOSSIP_PLAN_PLAIN;
                        nd->st.held_stale += use == GOSSIP_PLAN_STALE;
                        nd->st.late_delta +=
                            use == GOSSIP_PLAN_DELTA && q->step < nd->t;
                }
        }
        nd->in_n = 0;
}

/* d -> e -> a. After the last step we leave: each peer drops us from
 * its view when our goodbye arrives. */
static void params_ready(struct xsim *x, struct xnode *nd)
{
        apply_inbox(x, nd);
        if (!x->o.no_catch_up) {
                /* as node/train/handoff.c: never into the run's last steps */
                uint64_t skip =
                    gossip_plan_catch_up(&x->cfg, nd->t, nd->vn, &nd->leads);

                if (skip && skip < x->o.steps - nd->t) {
                        memset(&nd->leads, 0, sizeof(nd->leads));
                        nd->t += skip;
                        nd->st.catch_ups++;
                        nd->st.steps_skipped += skip;
                        gossip_merge_set_step(&nd->merge, nd->t);
                }
        }
        if (nd->t >= x->o.steps) {
                set_state(x, nd, XN_DONE);
                nd->st.done_us = x->now;
                tell_others(x, nd, EV_GONE);
                return;
        }
        begin_batch(x, nd);
}

static void go_wait(struct xsim *x, struct xnode *nd, uint64_t at)
{
        set_state(x, nd, XN_WAIT);
        if (nd->wake_at == at)
                return; /* already armed for this deadline */
        nd->wake_at = at;
        push_node(x, EV_WAKE, nd, at > x->now ? at : x->now);
}

/* Ask the plan in the node's phase and obey. */
static void ask(struct xsim *x, struct xnode *nd)
{
        struct gossip_plan_view v = {0};
        struct gossip_plan_decision d;

        v.phase = nd->phase;
        v.step = nd->t;
        v.alive = nd->vn;
        v.last_in_step = nd->last_in;
        v.min_peer_step = min_peer_step(nd);
        v.grads_pending = nd->merge.npending;
        v.now_us = x->now;
        /* as the trainer: at the last step the wait for slices stays,
         * extra batches do not (no step would fold them in) */
        v.last_step = nd->phase == GOSSIP_PLAN_PARAMS && nd->t >= x->o.steps;
        x->o.admit(&x->cfg, &v, &nd->w, &d);
        if (x->o.on_ask)
                x->o.on_ask(x, nd->idx, &v, &d, x->o.user);
        if (d.action == GOSSIP_PLAN_WAIT) {
                go_wait(x, nd, d.deadline_us);
                return;
        }
        if (d.action == GOSSIP_PLAN_TRAIN_MORE &&
            nd->phase == GOSSIP_PLAN_PARAMS) {
                set_state(x, nd, XN_EXTRA);
                push_node(x, EV_COMPUTE, nd, x->now + x->o.extra_us);
                return;
        }
        /* READY (a TRAIN_MORE in the GRADIENT phase is counted, and taken
         * as READY: the spec says it never happens) */
        nd->st.more_in_gradient += d.action == GOSSIP_PLAN_TRAIN_MORE;
        if (nd->phase == GOSSIP_PLAN_GRADIENT) {
                nd->st.grad_waits += nd->w.bound;
                nd->st.grad_timeouts += d.timed_out;
                set_state(x, nd, XN_COMPUTE); /* leaves WAIT */
                optimizer_step(x, nd);
        } else {
                nd->st.params_waits += nd->w.bound;
                nd->st.params_timeouts += d.timed_out;
                if (nd->w.bound)
                        nd->health_changes += gossip_plan_health_note(
                            &nd->health, d.timed_out ? GOSSIP_PLAN_WAIT_TIMEOUT
                                                     : GOSSIP_PLAN_WAIT_MET);
                params_ready(x, nd);
        }
}

/* ---- events ---- */

static void on_compute(struct xsim *x, struct xnode *nd)
{
        if (nd->state == XN_EXTRA) {
                float g = batch_grad(nd, nd->t, nd->w.extra);

                nd->st.extra_trained++;
                nd->acc_n++;
                nd->acc_g += g;
                ask(x, nd);
                return;
        }
        batch_done(x, nd);
}

static void inbox_put(struct xsim *x, struct xnode *nd, struct xev *ev)
{
        struct inslice *q;

        nd->st.slices_received++;
        gossip_plan_leads_note(&nd->leads, ev->step, nd->t);
        if (ev->step > nd->last_in)
                nd->last_in = ev->step;
        if (nd->in_n == x->o.inbox_cap) {
                /* full: the oldest goes, its buffer is reused */
                struct inslice old = nd->in[0];

                memmove(&nd->in[0], &nd->in[1],
                        (nd->in_n - 1) * sizeof(nd->in[0]));
                nd->in[--nd->in_n] = old;
                nd->st.slices_replaced++;
        }
        q = &nd->in[nd->in_n++];
        q->step = ev->step;
        q->lo = ev->lo;
        q->count = ev->count;
        q->part = ev->part;
        q->reach = ev->reach;
        memcpy(q->v, ev->v, ev->count * sizeof(float));
}

static void on_msg(struct xsim *x, struct xnode *nd, struct xev *ev)
{
        const struct xnode *src = &x->nodes[ev->from];

        /* what the sender had not finished sending died with it */
        if (nd->dead || (src->dead && src->died_at < ev->gen))
                return;
        if (ev->kind == M_GRAD) {
                nd->st.grads_received++;
                if (gossip_merge_offer(&nd->merge, x->keys[ev->from], ev->step,
                                       &ev->g, 1) < 0)
                        nd->st.grads_refused++;
        } else {
                inbox_put(x, nd, ev);
        }
        if (nd->state == XN_WAIT)
                ask(x, nd);
}

static void on_die(struct xsim *x, struct xnode *nd)
{
        if (nd->dead)
                return;
        set_state(x, nd, XN_DEAD);
        nd->dead = 1;
        nd->died_at = x->now;
        for (size_t j = 0; j < x->n; j++) {
                struct xev ev = {0};
                uint64_t jit = x->o.detect_jitter_us
                                   ? gn_splitmix64(&x->rng) %
                                         (x->o.detect_jitter_us + 1ULL)
                                   : 0;

                if (j == nd->idx || x->nodes[j].dead)
                        continue;
                ev.k.t = x->now + x->o.detect_us + jit;
                ev.type = EV_GONE;
                ev.node = (uint32_t)j;
                ev.from = (uint32_t)nd->idx;
                push(x, &ev);
        }
}

static void dispatch(struct xsim *x, struct xev *ev)
{
        struct xnode *nd = &x->nodes[ev->node];

        switch (ev->type) {
        case EV_COMPUTE:
                if (ev->gen == nd->gen &&
                    (nd->state == XN_COMPUTE || nd->state == XN_EXTRA))
                        on_compute(x, nd);
                break;
        case EV_WAKE:
                if (ev->gen == nd->gen && nd->state == XN_WAIT)
                        ask(x, nd);
                break;
        case EV_MSG:
                on_msg(x, nd, ev);
                break;
        case EV_DIE:
                on_die(x, nd);
                break;
        case EV_GONE:
                if (nd->dead || nd->gone[ev->from])
                        break;
                nd->gone[ev->from] = 1;
                view_rebuild(x, nd);
                if (nd->state == XN_WAIT)
                        ask(x, nd);
                break;
        case EV_STEPINFO:
                if (ev->step > nd->known_step[ev->from])
                        nd->known_step[ev->from] = ev->step;
                if (!nd->dead && nd->state == XN_WAIT)
                        ask(x, nd);
                break;
        }
        free(ev->v);
}

/* ---- setup ---- */

static int key_cmp(const void *a, const void *b)
{
        return memcmp(a, b, GOSSIP_KEY_BYTES);
}

static int node_init(struct xsim *x, struct xnode *nd, size_t i)
{
        size_t n = x->n, parts = x->cfg.parts;

        nd->idx = i;
        nd->step_us = x->o.step_us;
        nd->x = calloc(x->cfg.nparams, sizeof(float));
        nd->ring = calloc(GOSSIP_PLAN_RING * x->cap, sizeof(float));
        nd->in = calloc(x->o.inbox_cap, sizeof(*nd->in));
        nd->gone = calloc(n, 1);
        nd->view = calloc(n, sizeof(*nd->view));
        nd->vkeys = calloc(n, GOSSIP_KEY_BYTES);
        nd->known_step = calloc(n, sizeof(uint64_t));
        nd->reach = calloc(parts, sizeof(uint64_t));
        nd->answered = malloc(parts * sizeof(uint64_t));
        if (!nd->answered)
                return -ENOMEM;
        for (size_t p = 0; p < parts; p++)
                nd->answered[p] = UINT64_MAX;
        if (!nd->x || !nd->ring || !nd->in || !nd->gone || !nd->view ||
            !nd->vkeys || !nd->known_step || !nd->reach)
                return -ENOMEM;
        for (size_t k = 0; k < x->o.inbox_cap; k++)
                if (!(nd->in[k].v = calloc(x->cap ? x->cap : 1, sizeof(float))))
                        return -ENOMEM;
        gossip_plan_health_init(&nd->health);
        if (gossip_merge_init(&nd->merge, 1, x->cfg.staleness) < 0)
                return -ENOMEM;
        nd->x[i % x->cfg.nparams] = 1.0f; /* one-hot: distinct starts */
        for (size_t p = 0; p < parts; p++)
                nd->reach[p] = 1ULL << i;
        for (unsigned s = 0; s < GOSSIP_PLAN_RING; s++)
                nd->ring_step[s] = UINT64_MAX;
        view_rebuild(x, nd);
        return 0;
}

static int opts_check(struct xsim *x, const struct xsim_opts *o)
{
        if (o->n < 2 || o->n > XSIM_MAX_NODES || !o->plan.nparams ||
            !gossip_plan_cfg_valid(&o->plan) || !o->step_us)
                return -EINVAL;
        x->o = *o;
        x->cfg = o->plan;
        x->n = o->n;
        x->cap = gossip_plan_slice_cap(&x->cfg);
        if (!x->o.extra_us)
                x->o.extra_us = o->step_us / 4 ? o->step_us / 4 : 1;
        if (!x->o.inbox_cap)
                x->o.inbox_cap = XSIM_INBOX_DEFAULT;
        if (!x->o.grad_bytes)
                x->o.grad_bytes = (uint32_t)(4 * o->plan.nparams);
        if (!(x->o.avg_weight > 0))
                x->o.avg_weight = 0.5f;
        if (!x->o.admit)
                x->o.admit = gossip_plan_admit;
        x->rng = o->seed ^ 0x7873696dULL;
        return 0;
}

int xsim_create(const struct xsim_opts *o, struct xsim **out)
{
        struct xsim *x = calloc(1, sizeof(*x));
        uint64_t ks = o->seed;
        int rc = -ENOMEM;

        *out = NULL;
        if (!x)
                return -ENOMEM;
        rc = opts_check(x, o);
        if (rc < 0)
                goto out;
        rc = -ENOMEM;
        x->keys = calloc(x->n, GOSSIP_KEY_BYTES);
        x->nodes = calloc(x->n, sizeof(*x->nodes));
        x->links = calloc(x->n * x->n, sizeof(*x->links));
        x->arr = calloc(x->o.inbox_cap, sizeof(*x->arr));
        x->judged = calloc(x->o.inbox_cap, sizeof(*x->judged));
        if (!x->keys || !x->nodes || !x->links || !x->arr || !x->judged ||
            evheap_init(&x->heap, sizeof(struct xev)) < 0)
                goto out;
        for (size_t i = 0; i < x->n; i++)
                for (size_t b = 0; b < GOSSIP_KEY_BYTES; b += 8) {
                        uint64_t r = gn_splitmix64(&ks);
                        memcpy(x->keys[i] + b, &r, 8);
                }
        qsort(x->keys, x->n, GOSSIP_KEY_BYTES, key_cmp);
        for (size_t i = 0; i < x->n * x->n; i++)
                x->links[i].l = o->link;
        for (size_t i = 0; i < x->n; i++)
                if ((rc = node_init(x, &x->nodes[i], i)) < 0)
                        goto out;
        *out = x;
        return 0;
out:
        xsim_destroy(x);
        return rc;
}

void xsim_destroy(struct xsim *x)
{
        if (!x)
                return;
        for (size_t i = 0; i < x->heap.len; i++)
                free(((struct xev *)evheap_at(&x->heap, i))->v);
        evheap_free(&x->heap);
        for (size_t i = 0; x->nodes && i < x->n; i++) {
                struct xnode *nd = &x->nodes[i];

                for (size_t k = 0; nd->in && k < x->o.inbox_cap; k++)
                        free(nd->in[k].v);
                free(nd->in);
                free(nd->x);
                free(nd->ring);
                free(nd->gone);
                free(nd->view);
                free(nd->vkeys);
                free(nd->known_step);
                free(nd->reach);
                free(nd->answered);
                gossip_merge_free(&nd->merge);
        }
        free(x->nodes);
        free(x->links);
        free(x->keys);
        free(x->arr);
        free(x->judged);
        free(x);
}

/* ---- running and reading ---- */

void xsim_set_step_us(struct xsim *x, size_t i, uint32_t us)
{
        x->nodes[i].step_us = us ? us : 1;
}

void xsim_set_start_us(struct xsim *x, size_t i, uint64_t t_us)
{
        x->nodes[i].start_us = t_us;
}

void xsim_set_link(struct xsim *x, size_t from, size_t to,
                   const struct xsim_link *l)
{
        x->links[from * x->n + to].l = *l;
}

int xsim_kill_at(struct xsim *x, size_t i, uint64_t t_us)
{
        struct xev ev = {0};

        if (i >= x->n)
                return -EINVAL;
        ev.k.t = t_us;
        ev.type = EV_DIE;
        ev.node = (uint32_t)i;
        push(x, &ev);
        return 0;
}

static int all_done(const struct xsim *x)
{
        for (size_t i = 0; i < x->n; i++)
                if (!x->nodes[i].dead && x->nodes[i].state != XN_DONE)
                        return 0;
        return 1;
}

int xsim_run(struct xsim *x, uint64_t until_us)
{
        struct xev ev;

        if (!x->started) {
                x->started = 1;
                for (size_t i = 0; i < x->n; i++) {
                        struct xnode *nd = &x->nodes[i];

                        if (nd->dead)
                                continue;
                        set_state(x, nd, XN_COMPUTE);
                        push_node(x, EV_COMPUTE, nd,
                                  nd->start_us + nd->step_us);
                }
        }
        while (!all_done(x)) {
                const struct evheap_key *top = evheap_top(&x->heap);

                if (!top || top->t > until_us)
                        return 0;
                evheap_pop(&x->heap, &ev);
                if (ev.k.t > x->now)
                        x->now = ev.k.t;
                dispatch(x, &ev);
                if (x->o.on_event)
                        x->o.on_event(x, x->o.user);
        }
        return 1;
}

uint64_t xsim_now(const struct xsim *x)
{
        return x->now;
}

size_t xsim_n(const struct xsim *x)
{
        return x->n;
}

const struct xsim_opts *xsim_opts(const struct xsim *x)
{
        return &x->o;
}

uint64_t xsim_step(const struct xsim *x, size_t i)
{
        return x->nodes[i].t;
}

int xsim_dead(const struct xsim *x, size_t i)
{
        return x->nodes[i].dead;
}

int xsim_done(const struct xsim *x, size_t i)
{
        return x->nodes[i].state == XN_DONE;
}

const struct gossip_plan_health *xsim_health(const struct xsim *x, size_t i,
                                             int *changes)
{
        if (changes)
                *changes = x->nodes[i].health_changes;
        return &x->nodes[i].health;
}

const struct xsim_stats *xsim_stats(const struct xsim *x, size_t i)
{
        return &x->nodes[i].st;
}

uint32_t xsim_extra_pending(const struct xsim *x, size_t i)
{
        return x->nodes[i].acc_n;
}

size_t xsim_inbox_len(const struct xsim *x, size_t i)
{
        return x->nodes[i].in_n;
}

uint64_t xsim_reach(const struct xsim *x, size_t i, uint32_t part)
{
        return part < x->cfg.parts ? x->nodes[i].reach[part] : 0;
}

const float *xsim_model(const struct xsim *x, size_t i)
{
        return x->nodes[i].x;
}

size_t xsim_view_size(const struct xsim *x, size_t i)
{
        return x->nodes[i].vn;
}
