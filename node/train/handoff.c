/*
 * handoff.c - the box between the loop thread and the training thread.
 *
 * Why it exists: the trainer must never wait on the network and the loop
 * must never wait on a training step, yet each produces what the other
 * consumes (our gradient and slices out, peers' gradients and slices in,
 * snapshots and a joining node's state). Here they meet under one mutex
 * and nowhere else. This file locks, swaps buffers by pointer and
 * merges; the policy is pure functions in gossip/: whether the trainer
 * may go on (gossip_plan_admit), what the slices that arrived are worth
 * (gossip_plan_judge), when a lagging node skips ahead
 * (gossip_plan_catch_up), whether the exchange works (gossip_plan_health)
 * and whether a peer's numbers are believable (gossip/robust.h). Small
 * rules still written here, each beside its code: a full inbox drops its
 * oldest slice, a new K takes effect at a step that ends a round under
 * both, a catch-up never skips into the run's last steps, and with robust
 * merge a slice far outside our window is refused at delivery.
 *
 * Who owns what (handoff.h has the same table for callers): cfg and
 * slice_cap are fixed at create; the fields under "box" in struct
 * node_handoff, the counters and every ring slot's state and step are
 * under mu; the fields under "training thread" and "loop thread" belong
 * to that thread alone and cross only by a swap made under mu. The
 * trainer blocks here only in node_handoff_wait and the live join's waits,
 * each with a deadline, each ended early by a change it waits for or by
 * node_handoff_stop.
 *
 * Ring slots (one per averaging round, GOSSIP_PLAN_RING of them) hold our
 * own slice of a round so a peer's copy of step s is averaged against ours
 * of step s. A slot's state says who may touch its floats:
 *   FREE     no valid copy; the trainer may write it
 *   FILLING  the optimizer is writing it (slice_dst handed it out)
 *   POSTED   a valid copy the loop is encoding; nobody writes it
 *   HELD     a valid copy, the loop done with it; the trainer may
 *            overwrite it for a later round
 */
#include "train/handoff.h"
#include "base/gn_bigbuf.h"
#include "gossip/adapt.h"
#include "train/shuffle.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SLOT_FREE, SLOT_FILLING, SLOT_POSTED, SLOT_HELD };

struct slot {
        float *v;      /* slice_cap floats */
        uint64_t step; /* the step of the copy (POSTED, HELD) */
        int state;
        size_t lo, count; /* the slice it holds, its part and the K it  */
        uint32_t part, k; /* was made under (POSTED, HELD): K may change
                             between rounds */
};

struct in_slice {
        float *v; /* slice_cap floats */
        size_t lo, count;
        uint64_t step;
        uint32_t period;                /* the sender's K (0: not told) */
        uint8_t from[GOSSIP_KEY_BYTES]; /* the sender */
};

struct node_handoff {
        struct node_handoff_cfg cfg; /* fixed */
        size_t slice_cap;            /* fixed */
        pthread_mutex_t mu;
        pthread_cond_t cv; /* CLOCK_MONOTONIC; the trainer waits on it */
        /* box (under mu) */
        uint64_t gen; /* bumped at every change the trainer may wait for */
        float *grad_buf;
        uint64_t grad_step;
        int grad_ready;
        struct slot ring[GOSSIP_PLAN_RING];
        unsigned posted[GOSSIP_PLAN_RING]; /* slots posted, oldest first */
        uint64_t posted_step[GOSSIP_PLAN_RING];
        int nposted;
        struct in_slice inbox[NODE_HANDOFF_INBOX]; /* oldest first */
        size_t ninbox;
        /* each slice's step less ours when it arrived (the trainer
         * catches up when every recent partner is far ahead) */
        struct gossip_plan_leads leads;
        uint64_t last_in_step;   /* newest slice delivered, */
        uint32_t last_in_period; /* ... and its sender's K (0: not told) */
        struct gossip_merge merge;
        size_t alive;
        uint64_t min_peer_step;
        uint64_t local_step;
        int admitted; /* the trainer asked for its first step's admission */
        int stopped;
        void *snap;
        size_t snap_len;
        int want_snapshot, want_state, awaiting_state, reset_encoder;
        void *in_state;
        size_t in_state_len;
        int in_state_ready, state_none;
        uint64_t state_adopt; /* no state: take this step (0: none) */
        char in_state_from[GOSSIP_NAME_MAX];
        struct node_handoff_stats st;
        /* the cluster-wide stop (gossip/stop.h): the reason our leave
         * carries, ours (reached the target) or a peer's (stop_from_peer);
         * the peers' reasons counted, and whether one came since the
         * trainer's last check (it evaluates then) */
        struct gossip_stop stop;
        int stop_from_peer;
        struct gossip_stop_tally stop_tally;
        int stop_news;
        struct node_shuffle *shuffle; /* set before the threads run; owned */
        /* robust merge: running medians of accepted distances (slices,
         * gradients) and every peer's record; rs_params is touched only
         * by the training thread (reset here under mu, used without it
         * in node_handoff_average) */
        struct gossip_robust_stat rs_params, rs_grads;
        struct gossip_robust_peers peers;
        /* is the exchange working (gossip_plan_health)? */
        struct gossip_plan_health health;
        int health_news; /* the verdict changed; not yet taken */
        /* the averaging period in force (the loop's adaptation asks for
         * k_next; the trainer switches at a step that ends a round under
         * both) and the trainer's times per step outside admission
         * (gossip_adapt_pace; stall_us: admission time of the step under
         * way) */
        uint32_t k_now, k_next;
        struct gossip_adapt_pace pace;
        struct gossip_adapt_cpu cpu; /* the CPU window at k_now */
        uint64_t step_at_us, step_seen, stall_us;
        /* training thread */
        float *t_grad;
        float *t_in[NODE_HANDOFF_INBOX]; /* slices taken out of the inbox */
        /* each peer's sway (gossip/robust.h), by its index in peers (an
         * entry never moves); the samples allocated at its first merge */
        struct gossip_robust_sway t_sway[GOSSIP_ROBUST_PEERS];
        size_t t_sway_stride;
        /* our own training's progress over the sample (progress()):
         * t_merged sums what merges moved each sampled coordinate; once a
         * round our model's sample and that sum are kept */
        float *t_past[NODE_HANDOFF_PAST_RING],
            *t_past_m[NODE_HANDOFF_PAST_RING];
        uint64_t t_past_step[NODE_HANDOFF_PAST_RING], t_past_last;
        int t_past_n, t_past_next;
        float *t_merged, *t_before, *t_prog;
        /* per part of our P: our step when we last averaged a slice into
         * it (UINT64_MAX: never), the record gossip_plan_judge keeps */
        uint64_t *t_answered;
        /* loop thread */
        float *l_grad, *l_spare;
        int l_grad_valid; /* l_grad holds a gradient we sent */
};

static uint64_t mono_us(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static struct timespec ts_of_us(uint64_t us)
{
        struct timespec ts = {.tv_sec = (time_t)(us / 1000000u),
                              .tv_nsec = (long)(us % 1000000u) * 1000L};

        return ts;
}

static void wake_loop(struct node_handoff *h)
{
        if (h->cfg.wake_loop)
                h->cfg.wake_loop(h->cfg.ctx);
}

/* A change the trainer may be waiting for (mu held). */
static void changed(struct node_handoff *h)
{
        h->gen++;
        pthread_cond_broadcast(&h->cv);
}

/* ---- life ---------------------------------------------------------------- */

static int alloc_buffers(struct node_handoff *h)
{
        size_t n = h->cfg.plan.nparams, sc = h->slice_cap;
        int ok = 1;

        h->grad_buf = malloc(n * sizeof(float));
        h->t_grad = malloc(n * sizeof(float));
        h->l_grad = malloc(n * sizeof(float));
        h->l_spare = malloc(sc * sizeof(float));
        ok = h->grad_buf && h->t_grad && h->l_grad && h->l_spare;
        for (int i = 0; i < GOSSIP_PLAN_RING; i++)
                ok &= (h->ring[i].v = malloc(sc * sizeof(float))) != NULL;
        for (int i = 0; i < NODE_HANDOFF_INBOX; i++) {
                ok &= (h->inbox[i].v = malloc(sc * sizeof(float))) != NULL;
                ok &= (h->t_in[i] = malloc(sc * sizeof(float))) != NULL;
        }
        h->t_answered = malloc(h->cfg.plan.parts * sizeof(uint64_t));
        ok &= h->t_answered != NULL;
        h->t_sway_stride = gossip_robust_sway_stride(n);
        for (int i = 0; ok && h->cfg.robust && i < NODE_HANDOFF_PAST_RING;
             i++) {
                ok &= (h->t_past[i] = malloc(GOSSIP_ROBUST_SWAY_SAMPLES *
                                             sizeof(float))) != NULL;
                ok &= (h->t_past_m[i] = malloc(GOSSIP_ROBUST_SWAY_SAMPLES *
                                               sizeof(float))) != NULL;
        }
        if (ok && h->cfg.robust) {
                h->t_merged = calloc(GOSSIP_ROBUST_SWAY_SAMPLES, sizeof(float));
                h->t_before =
                    malloc(GOSSIP_ROBUST_SWAY_SAMPLES * sizeof(float));
                h->t_prog = malloc(GOSSIP_ROBUST_SWAY_SAMPLES * sizeof(float));
                ok = h->t_merged && h->t_before && h->t_prog;
        }
        for (uint32_t p = 0; ok && p < h->cfg.plan.parts; p++)
                h->t_answered[p] = UINT64_MAX;
        return ok ? 0 : -ENOMEM;
}

int node_handoff_create(struct node_handoff **out,
                        const struct node_handoff_cfg *cfg)
{
        struct node_handoff *h;
        pthread_condattr_t ca;
        int rc;

        *out = NULL;
        if (!gossip_plan_cfg_valid(&cfg->plan) || cfg->plan.nparams == 0)
                return -EINVAL;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->cfg = *cfg;
        h->slice_cap = gossip_plan_slice_cap(&cfg->plan);
        h->alive = 1;
        h->min_peer_step = UINT64_MAX;
        h->st.radius_params = NAN;
        gossip_plan_health_init(&h->health);
        h->k_now = h->k_next = cfg->plan.avg_every;
        pthread_mutex_init(&h->mu, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&h->cv, &ca);
        pthread_condattr_destroy(&ca);
        rc = alloc_buffers(h);
        if (rc == 0 && gossip_merge_init(&h->merge, cfg->plan.nparams,
                                         cfg->plan.staleness) != 0)
                rc = -ENOMEM;
        if (rc) {
                node_handoff_free(h);
                return rc;
        }
        *out = h;
        return 0;
}

void node_handoff_free(struct node_handoff *h)
{
        if (!h)
                return;
        gossip_merge_free(&h->merge);
        free(h->grad_buf);
        free(h->t_grad);
        free(h->l_grad);
        free(h->l_spare);
        for (int i = 0; i < GOSSIP_PLAN_RING; i++)
                free(h->ring[i].v);
        for (int i = 0; i < NODE_HANDOFF_INBOX; i++) {
                free(h->inbox[i].v);
                free(h->t_in[i]);
        }
        free(h->t_answered);
        for (int i = 0; i < GOSSIP_ROBUST_PEERS; i++)
                free(h->t_sway[i].a);
        for (int i = 0; i < NODE_HANDOFF_PAST_RING; i++) {
                free(h->t_past[i]);
                free(h->t_past_m[i]);
        }
        free(h->t_merged);
        free(h->t_before);
        free(h->t_prog);
        gn_big_free(h->snap);
        free(h->in_state);
        node_shuffle_free(h->shuffle);
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
        free(h);
}

const struct gossip_plan_cfg *node_handoff_plan(const struct node_handoff *h)
{
        return &h->cfg.plan;
}

/* The plan with the K in force. k_now is written by the training thread
 * under the lock: the trainer reads it freely, the loop under the lock. */
static struct gossip_plan_cfg plan_now(const struct node_handoff *h)
{
        struct gossip_plan_cfg c = h->cfg.plan;

        c.avg_every = h->k_now;
        return c;
}

/* Under the lock, training thread: the time of a step less the time it
 * stood in admission (waits, and the extra batches that fill them), noted
 * for the step time the adaptation budgets a round's transfer in
 * (gossip_adapt_pace_us: a trimmed mean of the last 128). Wall time would
 * feed the link back into its own budget: a K too small for the link
 * makes steps wait, the longer steps make that K fit, and the choice
 * flipped between K and 2K every 250 ms (lab, 100 Mbit/s: 27 changes in
 * one run; docs/design.md). */
static void note_step(struct node_handoff *h, uint64_t step, uint64_t now)
{
        if (step == h->step_seen)
                return;
        if (h->step_seen && step == h->step_seen + 1 &&
            now > h->step_at_us + h->stall_us)
                gossip_adapt_pace_note(
                    &h->pace, (double)(now - h->step_at_us - h->stall_us));
        h->step_seen = step;
        h->step_at_us = now;
        h->stall_us = 0;
}

void node_handoff_set_k(struct node_handoff *h, uint32_t k)
{
        pthread_mutex_lock(&h->mu);
        if (k >= 1)
                h->k_next = k;
        pthread_mutex_unlock(&h->mu);
}

double node_handoff_step_us(struct node_handoff *h)
{
        double v;

        pthread_mutex_lock(&h->mu);
        v = gossip_adapt_pace_us(&h->pace);
        pthread_mutex_unlock(&h->mu);
        return v;
}

double node_handoff_thread_cpu_us(void)
{
        struct timespec ts;

        if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
                return 0;
        return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

void node_handoff_note_cpu(struct node_handoff *h, double compute_us,
                           double exchange_us)
{
        pthread_mutex_lock(&h->mu);
        h->cpu.compute_us += compute_us > 0 ? compute_us : 0;
        h->cpu.exchange_us += exchange_us > 0 ? exchange_us : 0;
        h->cpu.steps++;
        pthread_mutex_unlock(&h->mu);
}

void node_handoff_note_loop_cpu(struct node_handoff *h, double us)
{
        pthread_mutex_lock(&h->mu);
        /* not before a step of this window: the loop's work while the
         * data loaded, or before a new K took effect, is no round's */
        if (h->cpu.steps)
                h->cpu.exchange_us += us > 0 ? us : 0;
        pthread_mutex_unlock(&h->mu);
}

int node_handoff_cpu_take(struct node_handoff *h, struct gossip_adapt_cpu *out)
{
        int full;

        pthread_mutex_lock(&h->mu);
        h->cpu.k = h->k_now;
        full = h->cpu.steps >= GOSSIP_ADAPT_CPU_MIN_STEPS &&
               h->cpu.steps >= (uint64_t)GOSSIP_ADAPT_CPU_MIN_ROUNDS * h->k_now;
        if (full) {
                *out = h->cpu;
                memset(&h->cpu, 0, sizeof(h->cpu));
        }
        pthread_mutex_unlock(&h->mu);
        return full;
}

uint32_t node_handoff_slot_slice(struct node_handoff *h, unsigned slot,
                                 size_t *lo, size_t *count, uint32_t *k)
{
        const struct slot *s = &h->ring[slot % GOSSIP_PLAN_RING];

        *lo = s->lo;
        *count = s->count;
        *k = s->k;
        return s->part;
}

size_t node_handoff_slice_cap(const struct node_handoff *h)
{
        return h->slice_cap;
}

void node_handoff_stats(struct node_handoff *h, struct node_handoff_stats *st)
{
        pthread_mutex_lock(&h->mu);
        *st = h->st;
        gossip_merge_stats_get(&h->merge, &st->merge);
        st->exchange = h->health;
        st->avg_every = h->k_now;
        st->step_us = gossip_adapt_pace_us(&h->pace);
        pthread_mutex_unlock(&h->mu);
}

void node_handoff_stop(struct node_handoff *h)
{
        pthread_mutex_lock(&h->mu);
        h->stopped = 1;
        changed(h);
        pthread_mutex_unlock(&h->mu);
}

/* Under the lock: one outcome for the exchange's verdict. */
static void note_health(struct node_handoff *h, int outcome)
{
        if (gossip_plan_health_note(&h->health, outcome))
                h->health_news = 1;
}

int node_handoff_exchange_news(struct node_handoff *h,
                               struct gossip_plan_health *out)
{
        int news;

        pthread_mutex_lock(&h->mu);
        news = h->health_news;
        h->health_news = 0;
        *out = h->health;
        pthread_mutex_unlock(&h->mu);
        return news;
}

/* ---- training thread: gradients ------------------------------------------ */

void node_handoff_post_gradient(struct node_handoff *h, uint64_t step,
                                const float *g, size_t n)
{
        float *tmp;
        int send;

        pthread_mutex_lock(&h->mu);
        h->local_step = step;
        send = h->cfg.plan.grads && h->alive > 1 && n == h->cfg.plan.nparams;
        pthread_mutex_unlock(&h->mu);
        if (!send)
                return;
        /* the training thread's only per-step cost here: one copy */
        memcpy(h->t_grad, g, n * sizeof(float));
        pthread_mutex_lock(&h->mu);
        tmp = h->grad_buf;
        h->grad_buf = h->t_grad;
        h->t_grad = tmp;
        h->grad_step = step;
        h->grad_ready = 1;
        pthread_mutex_unlock(&h->mu);
        wake_loop(h); /* before any wait: the partner may wait for ours */
}

void node_handoff_merge_gradient(struct node_handoff *h, uint64_t step,
                                 float *grads, size_t n)
{
        pthread_mutex_lock(&h->mu);
        gossip_merge_apply(&h->merge, step, grads, n);
        pthread_mutex_unlock(&h->mu);
}

/* ---- training thread: admission ------------------------------------------ */

void node_handoff_ask_begin(struct node_handoff_ask *a)
{
        memset(a, 0, sizeof(*a));
        gossip_plan_wait_begin(&a->w);
}

int node_handoff_admit(struct node_handoff *h, int phase, uint64_t step,
                       int stopping, int last_step, struct node_handoff_ask *a)
{
        struct gossip_plan_view v = {0};
        struct gossip_plan_cfg plan;
        int bound_before = a->w.bound;

        pthread_mutex_lock(&h->mu);
        h->local_step = step;
        h->admitted = 1;
        v.phase = phase;
        v.step = step;
        v.alive = h->alive;
        v.last_in_step = h->last_in_step;
        v.last_in_period = h->last_in_period;
        v.min_peer_step = h->min_peer_step;
        v.grads_pending = h->merge.npending;
        v.now_us = mono_us();
        v.stopping = stopping || h->stopped;
        v.last_step = last_step;
        plan = plan_now(h);
        if (phase == GOSSIP_PLAN_PARAMS)
                note_step(h, step, v.now_us);
        if (!a->begin_us)
                a->begin_us = v.now_us;
        gossip_plan_admit(&plan, &v, &a->w, &a->d);
        a->gen = h->gen;
        if (a->d.action == GOSSIP_PLAN_READY)
                h->stall_us += v.now_us - a->begin_us;
        if (phase == GOSSIP_PLAN_PARAMS) {
                h->st.waits += a->w.bound && !bound_before;
                h->st.wait_timeouts += a->d.timed_out;
                if (a->w.bound && a->d.action == GOSSIP_PLAN_READY &&
                    !v.stopping)
                        note_health(h, a->d.timed_out ? GOSSIP_PLAN_WAIT_TIMEOUT
                                                      : GOSSIP_PLAN_WAIT_MET);
        }
        pthread_mutex_unlock(&h->mu);
        return a->d.action;
}

void node_handoff_wait(struct node_handoff *h, struct node_handoff_ask *a)
{
        uint64_t t0 = mono_us(), now = t0;
        struct timespec until = ts_of_us(a->d.deadline_us);

        pthread_mutex_lock(&h->mu);
        while (h->gen == a->gen && !h->stopped && !h->want_snapshot &&
               now < a->d.deadline_us) {
                pthread_cond_timedwait(&h->cv, &h->mu, &until);
                now = mono_us();
        }
        h->st.wait_s += (double)(now - t0) / 1e6;
        pthread_mutex_unlock(&h->mu);
}

/* ---- training thread: parameter slices ------------------------------------
 */

float *node_handoff_slice_dst(struct node_handoff *h, uint64_t step, size_t *lo,
                              size_t *count)
{
        struct gossip_plan_cfg c;
        struct slot *s;
        float *dst = NULL;

        pthread_mutex_lock(&h->mu);
        /* a new K takes effect at a step that ends a round under both the
         * old and the new one (K0 * 2^j: the larger is a multiple) */
        if (h->k_next != h->k_now &&
            step % (h->k_next > h->k_now ? h->k_next : h->k_now) == 0) {
                h->k_now = h->k_next;
                memset(&h->cpu, 0, sizeof(h->cpu));
                /* honest distances between replicas grow with the period
                 * (they drift K steps apart): the median of the old one
                 * would clip or refuse every honest slice. Start it again
                 * (a warm-up of GOSSIP_ROBUST_WARMUP slices at the cap).
                 * Only our own link measurement changes K, never a peer. */
                memset(&h->rs_params, 0, sizeof(h->rs_params));
        }
        c = plan_now(h);
        s = &h->ring[gossip_plan_slot(&c, step)];
        if (gossip_plan_due(&c, step) && h->alive > 1 &&
            s->state != SLOT_POSTED) {
                s->state = SLOT_FILLING;
                dst = s->v;
        }
        pthread_mutex_unlock(&h->mu);
        if (dst)
                gossip_plan_slice(&c, step, lo, count);
        return dst;
}

void node_handoff_post_params(struct node_handoff *h, uint64_t step,
                              const float *params, size_t n)
{
        struct gossip_plan_cfg plan = plan_now(h);
        const struct gossip_plan_cfg *c = &plan;
        struct slot *s = &h->ring[gossip_plan_slot(c, step)];
        size_t lo, count;
        uint32_t part;
        int post;

        if (!gossip_plan_due(c, step))
                return;
        part = gossip_plan_slice(c, step, &lo, &count);
        pthread_mutex_lock(&h->mu);
        h->local_step = step;
        post = h->alive > 1 && n == c->nparams;
        if (s->state == SLOT_POSTED) {
                h->st.params_busy += post;
                post = 0;
        } else if (s->state != SLOT_FILLING) {
                /* not written by the optimizer: copy it now (the loop
                 * never touches a slot that is not POSTED) */
                pthread_mutex_unlock(&h->mu);
                memcpy(s->v, params + lo, count * sizeof(float));
                pthread_mutex_lock(&h->mu);
        }
        if (s->state != SLOT_POSTED) {
                /* not sent (alone), but a valid copy of this step */
                s->step = step;
                s->lo = lo;
                s->count = count;
                s->part = part;
                s->k = c->avg_every;
                s->state = post ? SLOT_POSTED : SLOT_HELD;
        }
        if (post) {
                /* a POSTED slot is never posted twice, so this fits */
                h->posted[h->nposted] = (unsigned)(s - h->ring);
                h->posted_step[h->nposted++] = step;
        }
        pthread_mutex_unlock(&h->mu);
        if (post)
                wake_loop(h);
}

int node_handoff_far_behind(struct node_handoff *h, uint64_t step)
{
        struct gossip_plan_cfg c;
        int far;

        pthread_mutex_lock(&h->mu);
        c = plan_now(h);
        far = gossip_plan_far_behind(&c, step, h->alive, &h->leads);
        if (far)
                memset(&h->leads, 0, sizeof(h->leads));
        pthread_mutex_unlock(&h->mu);
        return far;
}

uint64_t node_handoff_catch_up(struct node_handoff *h, uint64_t step,
                               uint64_t left)
{
        struct gossip_plan_cfg c;
        uint64_t skip;

        pthread_mutex_lock(&h->mu);
        c = plan_now(h);
        skip = gossip_plan_catch_up(&c, step, h->alive, &h->leads);
        if (skip >= left)
                skip = 0; /* the run's end is near: finish our steps */
        if (skip) {
                /* measured against the step we leave */
                memset(&h->leads, 0, sizeof(h->leads));
                h->local_step = step + skip;
                h->st.catch_ups++;
                h->st.steps_skipped += skip;
        }
        pthread_mutex_unlock(&h->mu);
        return skip;
}

void node_handoff_forget_own(struct node_handoff *h)
{
        pthread_mutex_lock(&h->mu);
        for (int i = 0; i < GOSSIP_PLAN_RING; i++)
                if (h->ring[i].state == SLOT_HELD)
                        h->ring[i].state = SLOT_FREE;
        pthread_mutex_unlock(&h->mu);
}

/* Count one robust-merge outcome for a peer (mu held). */
static void robust_count(struct node_handoff *h, const uint8_t *key, int reason)
{
        struct gossip_robust_peer *p = gossip_robust_peer_get(&h->peers, key);

        h->st.robust[reason]++;
        if (p)
                gossip_robust_peer_note(p, reason);
}

/* The index of key's record in peers, added when new (mu held); -1 when
 * the table is full. */
static long sender_index(struct node_handoff *h, const uint8_t *key)
{
        struct gossip_robust_peer *p = gossip_robust_peer_get(&h->peers, key);

        return p ? (long)(p - h->peers.p) : -1;
}

/* Is the sender of a contribution in quarantine at our step (mu held)?
 * The quarantine is model health's answer, with or without the robust
 * merge: it uses the merge's peer table, not its judgement. */
static int robust_refused(struct node_handoff *h, const uint8_t *key,
                          uint64_t step)
{
        const struct gossip_robust_peer *p =
            gossip_robust_peer_find(&h->peers, key);

        return p && gossip_robust_peer_refused(p, step);
}

/* A contribution of key was merged at our step (mu held). */
static void robust_merged(struct node_handoff *h, const uint8_t *key,
                          uint64_t step)
{
        struct gossip_robust_peer *p;

        if ((p = gossip_robust_peer_get(&h->peers, key)))
                gossip_robust_peer_merged(p, step);
}

/* Drop the inbox's slices from peers in quarantine, counted, before the
 * plan sees them (mu held): they must not answer a part either. The
 * entries keep their buffers (each entry owns one), order unchanged. */
static void drop_quarantined(struct node_handoff *h, uint64_t step)
{
        struct in_slice keep[NODE_HANDOFF_INBOX], out[NODE_HANDOFF_INBOX];
        size_t nk = 0, no = 0;

        for (size_t i = 0; i < h->ninbox; i++) {
                if (robust_refused(h, h->inbox[i].from, step)) {
                        robust_count(h, h->inbox[i].from,
                                     GOSSIP_ROBUST_QUARANTINED);
                        out[no++] = h->inbox[i];
                } else {
                        keep[nk++] = h->inbox[i];
                }
        }
        if (!no)
                return;
        memcpy(h->inbox, keep, nk * sizeof(keep[0]));
        memcpy(h->inbox + nk, out, no * sizeof(out[0]));
        h->ninbox = nk;
}

size_t node_handoff_quarantine(struct node_handoff *h, uint64_t since,
                               uint64_t now)
{
        size_t k = 0;

        pthread_mutex_lock(&h->mu);
        k = gossip_robust_quarantine(&h->peers, since, now,
                                     GOSSIP_ROBUST_QUARANTINE_STEPS);
        pthread_mutex_unlock(&h->mu);
        return k;
}

/* The sway record of the peer at index pi of peers, its samples allocated
 * at first use (training thread); NULL without one. */
static struct gossip_robust_sway *sway_of(struct node_handoff *h, long pi)
{
        struct gossip_robust_sway *s;

        if (pi < 0 || pi >= GOSSIP_ROBUST_PEERS)
                return NULL;
        s = &h->t_sway[pi];
        if (!s->a)
                s->a = calloc(GOSSIP_ROBUST_SWAY_SAMPLES, sizeof(float));
        return s->a ? s : NULL;
}

/* What robust_slice measured of one turn, for the record under mu. */
struct turn_out {
        float radius; /* the radius applied / RMS(mine); NaN: none */
        float dist;   /* RMS of what the merge takes of theirs - mine */
        float sway;   /* the sender's consistency after it; NaN: none */
        float ev[GOSSIP_ROBUST_EVS]; /* its figures; NaN: none */
};

/* Robust merge of one slice against mine (our copy it is averaged with),
 * on the training thread with mu released: rs_params, the sways and the
 * progress are the trainer's. The radius first; what it lets through
 * is measured against the sender's sway (sw, NULL: none kept) and our
 * own training's progress (prog, NULL: none yet) for the evidence; a named
 * sender's slice stops there (NAMED, not merged); else the sway bound. Returns
 * the verdict; theirs is scaled in place when it says so. */
static int robust_slice(struct node_handoff *h, struct in_slice *q,
                        const float *mine, struct gossip_robust_sway *sw,
                        const float *prog, int named, struct turn_out *o)
{
        const struct gossip_robust_cfg *c = &gossip_robust_params_cfg;
        struct gossip_robust_verdict v;
        struct gossip_robust_sway_turn t;
        float ref, d = gossip_robust_rms_both(q->v, mine, q->count, &ref);
        float alpha = 1.0f;

        gossip_robust_judge_dist(c, &h->rs_params, d, ref, &v);
        o->radius = ref > 0 ? v.radius / ref : NAN;
        o->dist = v.reason == GOSSIP_ROBUST_CLIPPED ? v.dist * v.scale : v.dist;
        o->sway = NAN;
        for (int k = 0; k < GOSSIP_ROBUST_EVS; k++)
                o->ev[k] = NAN;
        if (v.reason == GOSSIP_ROBUST_CLIPPED)
                gossip_robust_clip(q->v, mine, q->count, v.scale);
        if (!named)
                gossip_robust_note(&h->rs_params, &v);
        if (v.reason != GOSSIP_ROBUST_ACCEPTED &&
            v.reason != GOSSIP_ROBUST_CLIPPED)
                return v.reason;
        if (!sw)
                return named ? GOSSIP_ROBUST_NAMED : v.reason;
        gossip_robust_sway_measure(sw, h->t_sway_stride, q->v, mine, prog,
                                   q->lo, q->count, &t);
        gossip_robust_evidence_of(sw, &t, o->ev);
        if (named)
                return GOSSIP_ROBUST_NAMED;
        if (c->sway > 0.0f)
                alpha = gossip_robust_sway_scale(sw, &t, c->sway);
        gossip_robust_sway_add(sw, h->t_sway_stride, q->v, mine, q->lo,
                               q->count, &t, alpha);
        o->sway = gossip_robust_sway_consistency(sw);
        if (alpha >= 1.0f)
                return v.reason;
        gossip_robust_clip(q->v, mine, q->count, alpha);
        o->dist *= alpha;
        return GOSSIP_ROBUST_SWAYED;
}

/* What our own training moved the sampled coordinates over the last
 * PROGRESS_ROUNDS rounds (training thread): our model's change less what
 * merges moved it, from the samples kept once per round (period k) for
 * the last PAST_RING rounds. Returns t_prog, or NULL before a sample that
 * old exists or when not wanted (nothing to judge: only the round's
 * sample is kept). */
static const float *progress(struct node_handoff *h, const float *params,
                             size_t n, uint64_t step, uint32_t k, int want)
{
        uint64_t span = (uint64_t)GOSSIP_ROBUST_PROGRESS_ROUNDS * k;
        size_t st = h->t_sway_stride;
        int best = -1;

        if (!h->t_prog)
                return NULL;
        if (h->t_past_n == 0 || step >= h->t_past_last + k ||
            step < h->t_past_last) {
                int i = h->t_past_next;

                gossip_robust_sway_sample(params, n, st, h->t_past[i]);
                memcpy(h->t_past_m[i], h->t_merged,
                       GOSSIP_ROBUST_SWAY_SAMPLES * sizeof(float));
                h->t_past_step[i] = step;
                h->t_past_last = step;
                h->t_past_next = (i + 1) % NODE_HANDOFF_PAST_RING;
                if (h->t_past_n < NODE_HANDOFF_PAST_RING)
                        h->t_past_n++;
        }
        if (!want)
                return NULL;
        for (int i = 0; i < h->t_past_n; i++)
                if (h->t_past_step[i] + span <= step &&
                    (best < 0 || h->t_past_step[i] > h->t_past_step[best]))
                        best = i;
        if (best < 0)
                return NULL;
        for (size_t g = 0; g < n; g += st)
                h->t_prog[g / st] =
                    (params[g] - h->t_past[best][g / st]) -
                    (h->t_merged[g / st] - h->t_past_m[best][g / st]);
        return h->t_prog;
}

/* Around a merge into params[lo, lo + count) (training thread): the
 * sampled coordinates before it, then what it moved them, added to
 * t_merged (progress() takes it out of our path). */
static void merge_before(struct node_handoff *h, const float *params, size_t lo,
                         size_t count)
{
        size_t st = h->t_sway_stride;

        for (size_t g = gossip_robust_sway_first(st, lo);
             h->t_before && g < lo + count; g += st)
                h->t_before[g / st] = params[g];
}

static void merge_after(struct node_handoff *h, const float *params, size_t lo,
                        size_t count)
{
        size_t st = h->t_sway_stride;

        for (size_t g = gossip_robust_sway_first(st, lo);
             h->t_merged && g < lo + count; g += st)
                h->t_merged[g / st] += params[g] - h->t_before[g / st];
}

/* The plan's verdict on every slice in the inbox (mu held), judged
 * against our copies that are valid (POSTED or HELD; a FREE or FILLING
 * slot holds none). A params buffer that is not the model's takes none. */
static void judge_inbox(struct node_handoff *h, const struct gossip_plan_cfg *c,
                        uint64_t step, size_t n, struct gossip_plan_judged *jd)
{
        struct gossip_plan_arrival in[NODE_HANDOFF_INBOX];
        uint64_t held[GOSSIP_PLAN_RING];

        for (int i = 0; i < GOSSIP_PLAN_RING; i++)
                held[i] = h->ring[i].state == SLOT_POSTED ||
                                  h->ring[i].state == SLOT_HELD
                              ? h->ring[i].step
                              : UINT64_MAX;
        for (size_t i = 0; i < h->ninbox; i++) {
                in[i].step = h->inbox[i].step;
                in[i].lo = h->inbox[i].lo;
                in[i].count = h->inbox[i].count;
                in[i].period = h->inbox[i].period;
                jd[i].use = GOSSIP_PLAN_STALE;
        }
        if (n == c->nparams)
                gossip_plan_judge(c, step, in, h->ninbox, held, h->t_answered,
                                  jd);
}

/* Average the slices in the inbox into params. Three phases, so the loop
 * is never kept waiting on mu for a pass over the floats (a training
 * thread preempted while holding it stalled the loop's reads for a whole
 * scheduler slice on a busy core): under mu the plan judges each slice
 * and the usable ones move to the trainer's buffers; without mu the
 * robust check and the merge run over them; under mu again the outcome
 * is counted. The ring slot a delta is taken against is only ever written
 * by this thread, so reading it without mu is safe. */
double node_handoff_average(struct node_handoff *h, uint64_t step,
                            float *params, size_t n)
{
        struct gossip_plan_cfg plan = plan_now(h);
        const struct gossip_plan_cfg *c = &plan;
        float w = h->cfg.avg_weight;
        struct in_slice work[NODE_HANDOFF_INBOX];
        struct gossip_plan_judged jd[NODE_HANDOFF_INBOX];
        const float *against[NODE_HANDOFF_INBOX];
        int use[NODE_HANDOFF_INBOX], reason[NODE_HANDOFF_INBOX],
            rc[NODE_HANDOFF_INBOX];
        struct turn_out out[NODE_HANDOFF_INBOX];
        long pi[NODE_HANDOFF_INBOX]; /* the sender's index in peers */
        int named[NODE_HANDOFF_INBOX];
        const float *prog = NULL;
        double moved = 0.0; /* |what the merges moved params|^2 */
        size_t nw = 0;

        pthread_mutex_lock(&h->mu);
        drop_quarantined(h, step);
        judge_inbox(h, c, step, n, jd);
        /* the order of the rule, the last arrival first */
        for (size_t i = h->ninbox; i-- > 0;) {
                struct in_slice *q = &h->inbox[i];
                int u = jd[i].use;

                if (u == GOSSIP_PLAN_STALE) {
                        h->st.params_stale++;
                        note_health(h, GOSSIP_PLAN_TOO_OLD);
                        if (h->cfg.robust)
                                robust_count(h, q->from, GOSSIP_ROBUST_WINDOW);
                        continue;
                }
                if (u == GOSSIP_PLAN_ANSWERED) {
                        h->st.params_answered++;
                        continue;
                }
                use[nw] = u;
                against[nw] = u == GOSSIP_PLAN_DELTA ? h->ring[jd[i].slot].v
                                                     : params + q->lo;
                work[nw] = *q;
                pi[nw] = sender_index(h, q->from);
                named[nw] = pi[nw] >= 0 && h->peers.p[pi[nw]].named;
                q->v = h->t_in[nw]; /* the inbox keeps a buffer per entry */
                h->t_in[nw] = work[nw].v;
                nw++;
        }
        h->ninbox = 0;
        pthread_mutex_unlock(&h->mu);

        if (h->cfg.robust && n == c->nparams)
                prog = progress(h, params, n, step, c->avg_every, nw > 0);
        for (size_t j = 0; j < nw; j++) {
                struct in_slice *q = &work[j];
                float dist;

                rc[j] = -1;
                if (h->cfg.robust) {
                        reason[j] =
                            robust_slice(h, q, against[j], sway_of(h, pi[j]),
                                         prog, named[j], &out[j]);
                        dist = out[j].dist;
                } else {
                        reason[j] = GOSSIP_ROBUST_ACCEPTED;
                        dist = gossip_robust_rms(q->v, against[j], q->count);
                }
                if (reason[j] == GOSSIP_ROBUST_FAR ||
                    reason[j] == GOSSIP_ROBUST_NONFINITE ||
                    reason[j] == GOSSIP_ROBUST_NAMED)
                        continue;
                merge_before(h, params, q->lo, q->count);
                if (use[j] == GOSSIP_PLAN_DELTA)
                        rc[j] = gossip_merge_average_delta(
                            params + q->lo, against[j], q->v, q->count, w);
                else
                        rc[j] = gossip_merge_average_params(params + q->lo,
                                                            q->v, q->count, w);
                merge_after(h, params, q->lo, q->count);
                /* the merge moved q->count floats by w x (theirs - mine),
                 * of RMS dist */
                if (rc[j] == 0 && isfinite(dist))
                        moved += (double)w * w * dist * dist * (double)q->count;
        }

        if (nw == 0)
                return 0.0;
        pthread_mutex_lock(&h->mu);
        for (size_t j = 0; j < nw; j++) {
                if (h->cfg.robust) {
                        robust_count(h, work[j].from, reason[j]);
                        if (pi[j] >= 0 && !isnan(out[j].sway))
                                h->peers.p[pi[j]].sway = out[j].sway;
                        if (pi[j] >= 0)
                                gossip_robust_evidence_add(
                                    &h->peers.p[pi[j]].ev, out[j].ev);
                        if (reason[j] != GOSSIP_ROBUST_FAR &&
                            reason[j] != GOSSIP_ROBUST_NONFINITE)
                                h->st.radius_params = out[j].radius;
                }
                if (rc[j] == 0)
                        robust_merged(h, work[j].from, step);
                if (use[j] == GOSSIP_PLAN_DELTA)
                        h->st.params_delta += rc[j] == 0;
                h->st.params_applied += rc[j] == 0;
                if (rc[j] == 0)
                        note_health(h, GOSSIP_PLAN_USED);
        }
        if (h->cfg.robust)
                gossip_robust_name(&h->peers, &gossip_robust_params_cfg);
        pthread_mutex_unlock(&h->mu);
        return moved;
}

void node_handoff_drain_params(struct node_handoff *h,
                               void (*cb)(void *arg,
                                          const uint8_t from[GOSSIP_KEY_BYTES],
                                          uint64_t step, size_t lo,
                                          const float *v, size_t count),
                               void *arg)
{
        pthread_mutex_lock(&h->mu);
        for (size_t i = 0; i < h->ninbox; i++)
                cb(arg, h->inbox[i].from, h->inbox[i].step, h->inbox[i].lo,
                   h->inbox[i].v, h->inbox[i].count);
        h->ninbox = 0;
        pthread_mutex_unlock(&h->mu);
}

/* ---- training thread: snapshots and the live join ------------------------ */

int node_handoff_snapshot_wanted(struct node_handoff *h)
{
        int want;

        pthread_mutex_lock(&h->mu);
        want = h->want_snapshot;
        h->want_snapshot = 0;
        pthread_mutex_unlock(&h->mu);
        return want;
}

void node_handoff_post_snapshot(struct node_handoff *h, void *buf, size_t len)
{
        pthread_mutex_lock(&h->mu);
        gn_big_free(h->snap);
        h->snap = buf;
        h->snap_len = len;
        pthread_mutex_unlock(&h->mu);
        wake_loop(h);
}

/* Wait (mu held) until pred holds, the run stops or ms pass. */
static int wait_for(struct node_handoff *h, int (*pred)(struct node_handoff *),
                    uint32_t ms)
{
        uint64_t end = mono_us() + (uint64_t)ms * 1000u;
        struct timespec until = ts_of_us(end);

        while (!pred(h) && !h->stopped && mono_us() < end)
                pthread_cond_timedwait(&h->cv, &h->mu, &until);
        return pred(h);
}

static int pred_alive(struct node_handoff *h)
{
        return h->alive > 1;
}

static int pred_state(struct node_handoff *h)
{
        return h->in_state_ready || h->state_none;
}

uint32_t node_handoff_await_peers(struct node_handoff *h)
{
        uint32_t peers;

        pthread_mutex_lock(&h->mu);
        wait_for(h, pred_alive, NODE_HANDOFF_JOIN_WAIT_MS);
        peers = (uint32_t)(h->alive - 1);
        pthread_mutex_unlock(&h->mu);
        return peers;
}

int node_handoff_request_state(struct node_handoff *h, uint64_t step,
                               void **buf, size_t *len, char *from,
                               size_t fromlen, uint64_t *adopt_step)
{
        int got, none, stopped;

        pthread_mutex_lock(&h->mu);
        h->local_step = step;
        h->want_state = 1;
        h->awaiting_state = 1;
        h->state_none = 0;
        h->state_adopt = 0;
        pthread_mutex_unlock(&h->mu);
        wake_loop(h);
        pthread_mutex_lock(&h->mu);
        wait_for(h, pred_state, NODE_HANDOFF_STATE_WAIT_MS);
        got = h->in_state_ready;
        none = h->state_none;
        *adopt_step = h->state_adopt;
        stopped = h->stopped;
        *buf = h->in_state;
        *len = h->in_state_len;
        snprintf(from, fromlen, "%s", h->in_state_from);
        h->in_state = NULL;
        h->in_state_ready = 0;
        h->awaiting_state = 0;
        /* the codecs' error feedback belongs to the model we leave */
        h->reset_encoder |= got;
        pthread_mutex_unlock(&h->mu);
        if (got) {
                if (stopped) {
                        free(*buf);
                        *buf = NULL;
                        return -ECANCELED;
                }
                wake_loop(h);
                return 1;
        }
        if (stopped)
                return -ECANCELED;
        if (none)
                return *adopt_step ? 2 : 0;
        return -ETIMEDOUT;
}

/* ---- loop thread ----------------------------------------------------------
 */

void node_handoff_take(struct node_handoff *h, struct node_handoff_work *w)
{
        float *tmp;

        memset(w, 0, sizeof(*w));
        pthread_mutex_lock(&h->mu);
        if (h->grad_ready) {
                tmp = h->l_grad;
                h->l_grad = h->grad_buf;
                h->grad_buf = tmp;
                w->grad = h->l_grad;
                w->grad_step = h->grad_step;
                h->l_grad_valid = 1;
                h->grad_ready = 0;
        }
        w->nslices = h->nposted;
        memcpy(w->slot, h->posted, sizeof(w->slot));
        memcpy(w->slice_step, h->posted_step, sizeof(w->slice_step));
        h->nposted = 0;
        w->state = h->snap;
        w->state_len = h->snap_len;
        h->snap = NULL;
        w->want_state = h->want_state;
        h->want_state = 0;
        w->reset_encoder = h->reset_encoder;
        h->reset_encoder = 0;
        w->local_step = h->local_step;
        pthread_mutex_unlock(&h->mu);
}

const float *node_handoff_slot(struct node_handoff *h, unsigned slot)
{
        return h->ring[slot % GOSSIP_PLAN_RING].v;
}

void node_handoff_slot_done(struct node_handoff *h, unsigned slot)
{
        pthread_mutex_lock(&h->mu);
        h->ring[slot % GOSSIP_PLAN_RING].state = SLOT_HELD;
        pthread_mutex_unlock(&h->mu);
}

/* Robust merge of a gradient (slice [lo, lo + count)) against our newest
 * (loop-owned l_grad): 0 to go on, -1 refused (mu held). Before we sent
 * any gradient there is nothing to compare with: taken as it is. */
static int robust_gradient(struct node_handoff *h, const uint8_t *key,
                           size_t lo, float *v, size_t count)
{
        struct gossip_robust_verdict vd;
        const float *mine = h->l_grad + lo;
        float ref;

        if (!h->l_grad_valid)
                return 0;
        ref = gossip_robust_rms(mine, NULL, count);
        gossip_robust_judge(&gossip_robust_grads_cfg, &h->rs_grads, v, mine,
                            ref, count, &vd);
        robust_count(h, key, vd.reason);
        if (vd.reason == GOSSIP_ROBUST_FAR ||
            vd.reason == GOSSIP_ROBUST_NONFINITE)
                return -1;
        if (vd.reason == GOSSIP_ROBUST_CLIPPED)
                gossip_robust_clip(v, mine, count, vd.scale);
        gossip_robust_note(&h->rs_grads, &vd);
        return 0;
}

int node_handoff_offer_gradient(struct node_handoff *h,
                                const uint8_t key[GOSSIP_KEY_BYTES],
                                uint64_t step, size_t lo, float *v,
                                size_t count, int *late)
{
        uint64_t late0;
        int rc;

        *late = 0;
        pthread_mutex_lock(&h->mu);
        if (robust_refused(h, key, h->local_step)) {
                robust_count(h, key, GOSSIP_ROBUST_QUARANTINED);
                pthread_mutex_unlock(&h->mu);
                return GOSSIP_EINVAL;
        }
        if (h->cfg.robust && lo <= h->cfg.plan.nparams &&
            count <= h->cfg.plan.nparams - lo &&
            robust_gradient(h, key, lo, v, count)) {
                pthread_mutex_unlock(&h->mu);
                return GOSSIP_EINVAL;
        }
        late0 = h->merge.st.late;
        rc = gossip_merge_offer_range(&h->merge, key, step, lo, v, count);
        if (rc == 0)
                robust_merged(h, key, h->local_step);
        *late = h->merge.st.late != late0;
        changed(h);
        pthread_mutex_unlock(&h->mu);
        return rc;
}

float *node_handoff_inbox_spare(struct node_handoff *h)
{
        return h->l_spare;
}

/* The largest sender's period believed (fixed: K0 is the configured K). */
static uint32_t period_cap(const struct node_handoff *h)
{
        uint32_t k0 = h->cfg.plan.avg_every ? h->cfg.plan.avg_every : 1;

        return k0 * (uint32_t)GOSSIP_ADAPT_K_FACTOR_MAX;
}

/* The plan's window for a slice made under `period`, with the K in force
 * (mu held). */
static uint64_t w_now(const struct node_handoff *h, uint32_t period)
{
        struct gossip_plan_cfg c = plan_now(h);

        return gossip_plan_window(&c, period);
}

/* Robust merge: is step inside the window around our step (mu held)? */
static int in_window(const struct node_handoff *h, uint64_t step,
                     uint32_t period)
{
        uint64_t w = w_now(h, period);

        return step + w >= h->local_step &&
               step <= h->local_step + (uint64_t)GOSSIP_PLAN_RING * w;
}

int node_handoff_deliver_params(struct node_handoff *h,
                                const uint8_t from[GOSSIP_KEY_BYTES],
                                uint64_t step, uint32_t period, size_t lo,
                                size_t count)
{
        struct in_slice *q, old;
        float *tmp;

        /* a sender's period counts up to the largest an honest node
         * chooses (K0 * GOSSIP_ADAPT_K_FACTOR_MAX): a claim of 2^32 - 1
         * must not open the window to any old slice */
        if (period > period_cap(h))
                period = period_cap(h);
        pthread_mutex_lock(&h->mu);
        h->st.params_received++;
        /* every arrival's lead counts, also one beyond the window that
         * the robust merge refuses below: the catch-up rules take the
         * minimum over the last m arrivals and skip at most a window, so
         * a far step moves us no further than an in-window one, and a
         * node far behind everyone must see that it is
         * (gossip_plan_far_behind; the simulator notes every arrival
         * too) */
        gossip_plan_leads_note(&h->leads, step, h->local_step);
        if (h->cfg.robust && !in_window(h, step, period)) {
                /* never let a step of 10^9 satisfy the plan's bound */
                h->st.params_stale++;
                if (step + w_now(h, period) < h->local_step)
                        note_health(h, GOSSIP_PLAN_TOO_OLD);
                robust_count(h, from, GOSSIP_ROBUST_WINDOW);
                pthread_mutex_unlock(&h->mu);
                return GOSSIP_ROBUST_WINDOW;
        }
        if (h->cfg.robust) {
                /* one contribution per sender, step and slice: a copy
                 * would be averaged in once more */
                struct gossip_robust_peer *p =
                    gossip_robust_peer_get(&h->peers, from);

                if (p && !gossip_robust_peer_once(p, step, lo)) {
                        h->st.params_dup++;
                        robust_count(h, from, GOSSIP_ROBUST_DUPLICATE);
                        pthread_mutex_unlock(&h->mu);
                        return GOSSIP_ROBUST_DUPLICATE;
                }
        }
        if (h->ninbox == NODE_HANDOFF_INBOX) {
                /* full: the oldest round goes, its buffer is reused */
                old = h->inbox[0];
                memmove(&h->inbox[0], &h->inbox[1],
                        (NODE_HANDOFF_INBOX - 1) * sizeof(old));
                h->inbox[--h->ninbox] = old;
                h->st.params_replaced++;
        }
        q = &h->inbox[h->ninbox++];
        tmp = q->v;
        q->v = h->l_spare;
        h->l_spare = tmp;
        q->lo = lo;
        q->count = count;
        q->step = step;
        q->period = period;
        memcpy(q->from, from, GOSSIP_KEY_BYTES);
        if (step > h->last_in_step) {
                h->last_in_step = step;
                h->last_in_period = period;
        }
        changed(h);
        pthread_mutex_unlock(&h->mu);
        return GOSSIP_ROBUST_ACCEPTED;
}

void node_handoff_robust_note(struct node_handoff *h,
                              const uint8_t key[GOSSIP_KEY_BYTES], int reason)
{
        if (reason < 0 || reason >= GOSSIP_ROBUST_REASONS)
                return;
        pthread_mutex_lock(&h->mu);
        robust_count(h, key, reason);
        pthread_mutex_unlock(&h->mu);
}

int node_handoff_robust_peer(struct node_handoff *h,
                             const uint8_t key[GOSSIP_KEY_BYTES],
                             struct gossip_robust_peer *out)
{
        const struct gossip_robust_peer *p;

        pthread_mutex_lock(&h->mu);
        p = gossip_robust_peer_find(&h->peers, key);
        if (p)
                *out = *p;
        pthread_mutex_unlock(&h->mu);
        return p ? 0 : -ENOENT;
}

int node_handoff_robust(const struct node_handoff *h)
{
        return h->cfg.robust;
}

void node_handoff_set_members(struct node_handoff *h, size_t alive,
                              uint64_t min_peer_step)
{
        pthread_mutex_lock(&h->mu);
        h->alive = alive;
        h->min_peer_step = min_peer_step;
        changed(h);
        pthread_mutex_unlock(&h->mu);
}

size_t node_handoff_alive(struct node_handoff *h)
{
        size_t alive;

        pthread_mutex_lock(&h->mu);
        alive = h->alive;
        pthread_mutex_unlock(&h->mu);
        return alive;
}

int node_handoff_training(struct node_handoff *h)
{
        int admitted;

        pthread_mutex_lock(&h->mu);
        admitted = h->admitted;
        pthread_mutex_unlock(&h->mu);
        return admitted;
}

uint64_t node_handoff_local_step(struct node_handoff *h)
{
        uint64_t step;

        pthread_mutex_lock(&h->mu);
        step = h->local_step;
        pthread_mutex_unlock(&h->mu);
        return step;
}

void node_handoff_want_snapshot(struct node_handoff *h)
{
        pthread_mutex_lock(&h->mu);
        h->want_snapshot = 1;
        changed(h);
        pthread_mutex_unlock(&h->mu);
}

int node_handoff_deliver_state(struct node_handoff *h, const void *buf,
                               size_t len, const char *from)
{
        void *copy;
        int taken = 0;

        pthread_mutex_lock(&h->mu);
        if (h->awaiting_state && !h->in_state_ready &&
            (copy = malloc(len ? len : 1)) != NULL) {
                memcpy(copy, buf, len);
                h->in_state = copy;
                h->in_state_len = len;
                h->in_state_ready = 1;
                snprintf(h->in_state_from, sizeof(h->in_state_from), "%s",
                         from);
                taken = 1;
                changed(h);
        }
        pthread_mutex_unlock(&h->mu);
        return taken;
}

void node_handoff_no_state(struct node_handoff *h, uint64_t adopt_step)
{
        pthread_mutex_lock(&h->mu);
        h->state_none = 1;
        h->state_adopt = adopt_step;
        changed(h);
        pthread_mutex_unlock(&h->mu);
}

/* ---- the cluster-wide stop (gossip/stop.h) --------------------------------
 */

/* Under mu: a peer's reason ends our run. */
static void stop_take_peer(struct node_handoff *h)
{
        if (h->stop.reason == GOSSIP_STOP_NONE) {
                h->stop = h->stop_tally.first;
                h->stop_from_peer = 1;
        }
        h->stopped = 1;
        changed(h);
}

int node_handoff_stop_peer(struct node_handoff *h,
                           const uint8_t key[GOSSIP_KEY_BYTES],
                           const char *name, const struct gossip_stop *s,
                           uint32_t target_bp, struct gossip_stop_verdict *v)
{
        int rc = NODE_HANDOFF_STOP_IGNORED;

        pthread_mutex_lock(&h->mu);
        if (gossip_stop_count(&h->stop_tally, key, name, s, target_bp)) {
                rc = NODE_HANDOFF_STOP_ASKED;
                if (gossip_stop_decide(&h->stop_tally, h->alive,
                                       GOSSIP_STOP_NO_EVAL, target_bp,
                                       v) != GOSSIP_STOP_WAIT) {
                        stop_take_peer(h);
                        rc = NODE_HANDOFF_STOP_NOW;
                } else {
                        h->stop_news = 1;
                        changed(h);
                }
        }
        pthread_mutex_unlock(&h->mu);
        return rc;
}

int node_handoff_stop_eval_wanted(struct node_handoff *h)
{
        int news;

        pthread_mutex_lock(&h->mu);
        news = h->stop_news;
        pthread_mutex_unlock(&h->mu);
        return news;
}

int node_handoff_stop_recheck_due(struct node_handoff *h, double since_s,
                                  double eval_s)
{
        int due;

        pthread_mutex_lock(&h->mu);
        due = gossip_stop_recheck_due(&h->stop_tally, since_s, eval_s);
        pthread_mutex_unlock(&h->mu);
        return due;
}

int node_handoff_stop_check(struct node_handoff *h, uint32_t own_bp,
                            uint32_t target_bp, struct gossip_stop_verdict *v,
                            int *news)
{
        int rule;

        pthread_mutex_lock(&h->mu);
        *news = h->stop_news;
        h->stop_news = 0;
        rule =
            gossip_stop_decide(&h->stop_tally, h->alive, own_bp, target_bp, v);
        if (rule != GOSSIP_STOP_WAIT)
                stop_take_peer(h);
        pthread_mutex_unlock(&h->mu);
        return rule;
}

void node_handoff_stop_own(struct node_handoff *h, const struct gossip_stop *s)
{
        pthread_mutex_lock(&h->mu);
        if (h->stop.reason == GOSSIP_STOP_NONE)
                h->stop = *s;
        pthread_mutex_unlock(&h->mu);
}

int node_handoff_stop_reason(struct node_handoff *h, struct gossip_stop *out)
{
        int rc;

        pthread_mutex_lock(&h->mu);
        rc = h->stop.reason == GOSSIP_STOP_NONE ? 0 : h->stop_from_peer ? 2 : 1;
        if (out)
                *out = h->stop;
        pthread_mutex_unlock(&h->mu);
        return rc;
}

/* ---- the sample shuffle (node/train/shuffle.h)
 * ----------------------------------
 */

void node_handoff_set_shuffle(struct node_handoff *h, struct node_shuffle *s)
{
        h->shuffle = s;
}

struct node_shuffle *node_handoff_shuffle(struct node_handoff *h)
{
        return h->shuffle;
}

void node_handoff_wake_loop(struct node_handoff *h)
{
        wake_loop(h);
}
