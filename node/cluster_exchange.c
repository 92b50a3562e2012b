/*
 * cluster_exchange.c - the exchange, loop side: what the trainer posted in
 * the hand-off box is encoded here and sent to the step's partner; what
 * peers send is decoded here and delivered to the box, where the trainer
 * merges it when the exchange plan (gossip/plan.h) says so.
 *
 * Gradients go through the payload codec with error feedback (the codec
 * keeps what it did not send, so the encoder is loop-owned and stateful);
 * parameter slices are encoded statelessly, slice by slice. The training
 * thread's per-step cost stays one copy: all encoding, decoding and
 * sending happens on the loop, and never under the box's lock.
 *
 * Loop thread only.
 */
#include "cluster_private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evlog.h"
#include "nn/reservoir.h"
#include "shuffle.h"

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

/* The plan's settings from the options. */
static void plan_cfg(const struct node_cluster *c, uint32_t parts,
                     struct gossip_plan_cfg *p)
{
        const struct node_options *o = c->o;

        memset(p, 0, sizeof(*p));
        p->nparams = c->nparams;
        p->avg_every = o->avg_every;
        p->avg_lag = o->avg_lag;
        p->parts = parts;
        p->staleness = o->staleness;
        p->fill_batches = o->fill_batches;
        p->wait_ms = o->wait_ms;
        p->grads = o->codec != NODE_CODEC_NONE;
}

static int open_codecs(struct node_cluster *c, char *err, size_t errlen)
{
        struct gossip_codec_cfg cc = {0}, pc = {0};
        int rc;

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
        if (rc) {
                snprintf(err, errlen, "--params-codec/--params-parts: %s",
                         gossip_strerror(rc));
                return rc;
        }
        /* the adaptation's cheaper encoding, same parts */
        pc.id = GOSSIP_CODEC_INT8;
        rc = gossip_codec_init(&c->penc8, &pc);
        if (rc) {
                snprintf(err, errlen, "int8 slices: %s", gossip_strerror(rc));
                return rc;
        }
        /* parameters are encoded slice by slice, statelessly */
        gossip_codec_free(&c->penc);
        gossip_codec_free(&c->penc8);
        c->grad_cap = gossip_codec_max_size(&c->enc);
        c->params_cap = gossip_codec_max_size(&c->penc);
        if (gossip_codec_max_size(&c->penc8) > c->params_cap)
                c->params_cap = gossip_codec_max_size(&c->penc8);
        return 0;
}

/* The trainer posted something (any thread). */
static void wake_loop(void *async)
{
        uv_async_send(async);
}

int node_cluster__exchange_open(struct node_cluster *c, char *err,
                                size_t errlen)
{
        struct node_handoff_cfg hc = {0};
        int rc;

        rc = open_codecs(c, err, errlen);
        if (rc)
                return rc;
        if (c->o->codec != NODE_CODEC_NONE && c->o->avg_every == 0)
                node_log(NODE_LOG_WARN,
                         "gradients without model averaging (--avg-every 0) "
                         "do not keep the replicas together: measured no "
                         "better than isolated nodes (docs/learning.md, "
                         "\"Gradient mode\"); --avg-every K adds it");
        plan_cfg(c, c->penc.cfg.parts, &hc.plan);
        gossip_adapt_init(&(struct gossip_adapt_in){.k0 = hc.plan.avg_every,
                                                    .codec = c->penc.cfg.id},
                          &c->adapt);
        c->k_force = c->adapt.k;
        hc.avg_weight = c->o->avg_weight;
        hc.robust = c->o->robust;
        hc.wake_loop = wake_loop;
        hc.ctx = &c->async;
        rc = node_handoff_create(&c->h, &hc);
        if (rc) {
                snprintf(err, errlen, "exchange: %s",
                         rc == -EINVAL ? "--avg-lag does not fit the ring"
                                       : "out of memory");
                return rc;
        }
        c->grad_buf = malloc(c->grad_cap);
        c->params_buf = malloc(c->params_cap);
        c->scratch = malloc(c->nparams * sizeof(float));
        c->view_cap = c->npeers + 1;
        c->view = calloc(c->view_cap, GOSSIP_KEY_BYTES);
        if (!c->grad_buf || !c->params_buf || !c->scratch || !c->view) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

void node_cluster__exchange_free(struct node_cluster *c)
{
        gossip_codec_free(&c->enc);
        gossip_codec_free(&c->penc);
        gossip_codec_free(&c->penc8);
        free(c->grad_buf);
        free(c->params_buf);
        free(c->scratch);
}

struct node_cluster_peer_grads *node_cluster__peer_grads(struct node_cluster *c,
                                                         const uint8_t *key)
{
        for (size_t i = 0; i < c->npg; i++)
                if (memcmp(c->pg[i].key, key, GOSSIP_KEY_BYTES) == 0)
                        return &c->pg[i];
        if (c->npg == NODE_CLUSTER_PEER_STATS)
                return NULL;
        memset(&c->pg[c->npg], 0, sizeof(c->pg[0]));
        memset(&c->needs[c->npg], 0, sizeof(c->needs[0]));
        memset(&c->rx[c->npg], 0, sizeof(c->rx[0]));
        memcpy(c->pg[c->npg].key, key, GOSSIP_KEY_BYTES);
        return &c->pg[c->npg++];
}

void node_cluster__publish_members(struct node_cluster *c)
{
        uint64_t min = UINT64_MAX;
        size_t n = 0;
        struct gossip_member_info *mi;

        /* the slowest live peer matters only to the gradient bound */
        if (c->o->wait_ms && c->o->codec != NODE_CODEC_NONE) {
                mi = node_cluster__members(c, &n);
                for (size_t i = 1; mi && i < n; i++) /* [0] is ourselves */
                        if (mi[i].state == GOSSIP_ALIVE && mi[i].step < min)
                                min = mi[i].step;
                free(mi);
        }
        node_handoff_set_members(c->h, gossip_alive_count(c->g), min);
}

/* ---- sending what the trainer posted ------------------------------------- */

static void send_gradient(struct node_cluster *c, const float *g, uint64_t step)
{
        uint8_t key[GOSSIP_KEY_BYTES];
        size_t len = 0;
        int rc;

        if (gossip_codec_encode(&c->enc, step, g, c->nparams, c->grad_buf,
                                c->grad_cap, &len)) {
                c->grads_send_fail++;
                return;
        }
        if (node_cluster__partner(c, step, key)) {
                c->grads_no_partner++;
                return;
        }
        rc = gossip_send_app(c->g, key, GOSSIP_APP_GRADIENT, step, c->grad_buf,
                             len);
        if (rc)
                c->grads_send_fail++;
        else
                c->grads_sent++;
}

/* Our uplink's goodput: the best estimate over the peers we send to.
 * A destination's estimate is confident after a few backlogged samples;
 * since we never queue a slice behind another (send_params), those are
 * mostly the rates our partners report receiving our slices at (PARAMS
 * keys 17-18, hear_rate). A peer that does not report (an older version)
 * leaves only app-limited samples, the kernel's delivery rate of a slice
 * sent on an idle uplink, which only ever raise the estimate: a lower
 * bound, and a low one (docs/design.md, "What sets K now"). */
static double uplink_Bps(struct node_cluster *c)
{
        struct gossip_member_info *mi;
        struct gossip_link_estimate e;
        double best = 0;
        size_t n = 0;

        mi = node_cluster__members(c, &n);
        for (size_t i = 1; mi && i < n; i++)
                if (node_net_peer_link(c->net, &mi[i].addr, &e) == 0 &&
                    (e.confident || e.raised > 0) && e.goodput_Bps > best)
                        best = e.goodput_Bps;
        free(mi);
        return best;
}

/* The adaptation's view of our configuration (the link figures unset). */
static struct gossip_adapt_in adapt_in(struct node_cluster *c)
{
        const struct gossip_plan_cfg *p = node_handoff_plan(c->h);
        struct gossip_adapt_in in = {
            .nparams = c->nparams,
            .parts = p->parts,
            .k0 = p->avg_every,
            .codec = c->penc.cfg.id,
        };

        return in;
}

/* Every 250 ms at most: re-choose the slice codec and the K our link
 * needs (gossip/adapt.h), then the K in force, the largest need heard
 * (one period for all); a new K goes to the box, which the trainer takes
 * at a round end both agree on. */
static void adapt(struct node_cluster *c)
{
        uint64_t now = node_net_now_ms(c->net);
        const struct gossip_plan_cfg *p = node_handoff_plan(c->h);
        struct gossip_adapt_in in = adapt_in(c);
        struct gossip_adapt_choice next;
        char was[64], now_s[64];
        uint32_t k;

        if (!c->o->adapt || !p->avg_every || now < c->adapt_at_ms + 250)
                return;
        c->adapt_at_ms = now;
        in.goodput_Bps = uplink_Bps(c);
        in.step_us = node_handoff_step_us(c->h);
        if (gossip_adapt_choose(&in, &c->adapt, &next)) {
                node_log(NODE_LOG_INFO,
                         "adapting to the link: %s (was %s; uplink ~%.1f "
                         "Mbit/s, %.1f ms per step)",
                         gossip_adapt_say(&next, now_s, sizeof(now_s)),
                         gossip_adapt_say(&c->adapt, was, sizeof(was)),
                         in.goodput_Bps * 8 / 1e6, in.step_us / 1000);
                c->adapt = next;
                c->adapt_changes++;
        }
        k = gossip_adapt_agree(
            &in, c->adapt.k, c->needs, c->npg, now,
            gossip_adapt_need_ttl_ms(&in, c->npg + 1, c->k_force));
        if (k == c->k_force)
                return;
        if (k != c->adapt.k)
                node_log(NODE_LOG_INFO,
                         "averaging every %u steps, as a partner's link "
                         "needs (ours needs %u)",
                         k, c->adapt.k);
        else if (c->k_force != c->adapt.k)
                node_log(NODE_LOG_INFO,
                         "averaging every %u steps, as our link needs (no "
                         "partner needs more now)",
                         k);
        c->k_force = k;
        node_handoff_set_k(c->h, k);
}

/* A partner's need, from its PARAMS (one period for all). */
static void hear_need(struct node_cluster *c, const uint8_t *key, uint32_t need)
{
        struct node_cluster_peer_grads *pg;

        if (!c->o->adapt || !need)
                return;
        pg = node_cluster__peer_grads(c, key);
        if (!pg)
                return;
        c->needs[pg - c->pg].k = need;
        c->needs[pg - c->pg].heard_ms = node_net_now_ms(c->net);
}

/* A partner told us the rate at which it received our frames: a sample
 * for our link estimate toward it. */
static void hear_rate(struct node_cluster *c,
                      const struct gossip_member_info *from, uint32_t rate,
                      uint32_t span_us)
{
        if (rate && span_us &&
            node_net_peer_rate_sample(c->net, &from->addr, rate, span_us) == 0)
                c->rates_heard++;
}

void node_cluster__heard_frame(struct node_cluster *c,
                               const struct gossip_member_info *from)
{
        struct node_cluster_peer_grads *pg;

        if (c->rx_len == 0 || c->rx_now.span_us == 0)
                return;
        pg = node_cluster__peer_grads(c, from->key);
        if (pg)
                gossip_link_rx_frame(&c->rx[pg - c->pg], c->rx_len,
                                     c->rx_now.bytes_after_first,
                                     c->rx_now.span_us);
}

/* What we tell the PARAMS we send to key besides the slice: the period it
 * was made under, our need, and the rate we received key's frames at
 * (each rate sample told once). */
static void params_tell(struct node_cluster *c, const uint8_t *key, uint32_t k,
                        struct gossip_params_tell *t)
{
        struct node_cluster_peer_grads *pg = node_cluster__peer_grads(c, key);

        memset(t, 0, sizeof(*t));
        t->period = k;
        t->need = c->o->adapt ? c->adapt.k : 0;
        if (pg &&
            gossip_link_rx_take(&c->rx[pg - c->pg], &t->rx_rate, &t->rx_span))
                c->rates_told++;
}

/* Bytes accepted by the transport and not yet handed to the kernel, over
 * every destination: our uplink's backlog (TCP_NOTSENT_LOWAT keeps the
 * kernel's share small, so a backlog shows here). */
static uint64_t uplink_queued(struct node_cluster *c)
{
        struct node_net_peer_stats ps[64];
        size_t n = node_net_peer_stats(c->net, ps, 64);
        uint64_t q = 0;

        for (size_t i = 0; i < n && i < 64; i++)
                q += ps[i].queued_bytes;
        return q;
}

/* Is the uplink a backlog this slice would wait behind (gossip/adapt.h)? */
static int link_busy(struct node_cluster *c)
{
        struct gossip_adapt_in in = adapt_in(c);

        return gossip_adapt_skip(&in, &c->adapt, uplink_queued(c));
}

/* Encode our slice of step's round from its ring slot (in the codec the
 * adaptation chose), give the slot back, and send the slice to the
 * round's partner - unless an earlier slice is still waiting for the
 * uplink: queued behind it, this one would arrive too old to use, and
 * the queue would only grow (the adaptation makes such skips rare). */
static void send_params(struct node_cluster *c, uint64_t step, unsigned slot)
{
        const struct gossip_codec *enc =
            c->adapt.codec == GOSSIP_CODEC_INT8 ? &c->penc8 : &c->penc;
        uint8_t key[GOSSIP_KEY_BYTES];
        struct gossip_params_tell tell;
        size_t lo, count, len = 0;
        uint32_t k, part = node_handoff_slot_slice(c->h, slot, &lo, &count, &k);
        int rc;

        if (c->o->adapt && link_busy(c)) {
                node_handoff_slot_done(c->h, slot);
                c->params_skipped_link++;
                return;
        }
        rc = gossip_codec_encode_part(enc, part, node_handoff_slot(c->h, slot),
                                      count, step, c->params_buf, c->params_cap,
                                      &len);
        node_handoff_slot_done(c->h, slot);
        if (rc == 0)
                rc = node_cluster__partner(c, step, key);
        if (rc == 0) {
                params_tell(c, key, k, &tell);
                rc = gossip_send_params(c->g, key, step, &tell, c->params_buf,
                                        len);
        }
        if (rc == 0)
                c->params_sent++;
        node_log(NODE_LOG_DEBUG, "parameters of step %llu sent: %s",
                 (unsigned long long)step, gossip_strerror(rc));
}

/* --shuffle-samples: our posted samples to the step's partner, as one
 * SAMPLES frame (MAC'd on the stream like a gradient). */
static void send_samples(struct node_cluster *c)
{
        struct node_shuffle *s = node_handoff_shuffle(c->h);
        uint8_t key[GOSSIP_KEY_BYTES], *buf;
        size_t cap, len;
        uint64_t step = 0;

        if (!s)
                return;
        cap = nn_samples_packed_len(node_shuffle_per_step(s),
                                    node_shuffle_sample_bytes(s));
        buf = malloc(cap);
        if (!buf)
                return;
        len = node_shuffle_take(s, buf, cap, &step);
        if (len && node_cluster__partner(c, step, key) == 0 &&
            gossip_send_app(c->g, key, GOSSIP_APP_SAMPLES, step, buf, len) == 0)
                node_shuffle_sent(s, len);
        free(buf);
}

void node_cluster__on_samples(struct node_cluster *c,
                              const struct gossip_member_info *from,
                              const void *p, size_t len)
{
        struct node_shuffle *s = node_handoff_shuffle(c->h);

        /* authenticated by the wire (a trusted member's MAC or signature);
         * without --shuffle-samples of our own, refused and counted */
        if (!s || node_shuffle_deliver(s, p, len) != 0) {
                c->decode_errors++;
                node_log(NODE_LOG_DEBUG, "samples from %s refused",
                         node_cluster__member_name(from));
        }
}

void node_cluster__on_async(uv_async_t *a)
{
        struct node_cluster *c = a->data;
        struct node_handoff_work w;

        if (c->closing)
                return;
        node_handoff_take(c->h, &w);
        gossip_set_step(c->g,
                        c->served ? node_cluster__own_step(c) : w.local_step);
        if (w.reset_encoder)
                gossip_codec_reset(&c->enc);
        if (w.grad)
                send_gradient(c, w.grad, w.grad_step);
        for (int i = 0; i < w.nslices; i++)
                send_params(c, w.slice_step[i], w.slot[i]);
        adapt(c);
        send_samples(c);
        if (w.state) {
                node_cluster__send_state(c, w.state, w.state_len, w.local_step);
                free(w.state);
        }
        if (w.want_state)
                node_cluster__request_state(c, w.local_step);
        node_cluster__arm(c);
}

/* ---- receiving ------------------------------------------------------------
 */

/* Robust merge, first guard: only our scheduled sender of that step. */
static int from_partner(struct node_cluster *c,
                        const struct gossip_member_info *from, uint64_t step)
{
        if (!c->o->robust || node_cluster__scheduled_sender(c, step, from->key))
                return 1;
        node_handoff_robust_note(c->h, from->key, GOSSIP_ROBUST_NOT_PARTNER);
        return 0;
}

/* A payload that did not decode, counted under its reason. */
static void decode_refused(struct node_cluster *c,
                           const struct gossip_member_info *from, int rc)
{
        c->decode_errors++;
        node_handoff_robust_note(c->h, from->key,
                                 rc == GOSSIP_ENONFINITE
                                     ? GOSSIP_ROBUST_NONFINITE
                                     : GOSSIP_ROBUST_MISMATCH);
}

void node_cluster__on_gradient(struct node_cluster *c,
                               const struct gossip_member_info *from,
                               uint64_t step, const void *p, size_t len)
{
        struct node_cluster_peer_grads *pg =
            node_cluster__peer_grads(c, from->key);
        struct gossip_codec_info info;
        int rc, late = 0;

        if (!from_partner(c, from, step)) {
                if (pg)
                        pg->dropped++;
                return;
        }
        rc = gossip_codec_decode(p, len, c->nparams, c->scratch, &info);
        if (rc) {
                decode_refused(c, from, rc);
                if (pg)
                        pg->dropped++;
                return;
        }
        rc = node_handoff_offer_gradient(c->h, from->key, step, info.lo,
                                         c->scratch, info.count, &late);
        if (pg) {
                if (rc)
                        pg->dropped++;
                else if (late)
                        pg->late++;
                else
                        pg->merged++;
        }
        if (c->o->wait_ms && c->o->codec != NODE_CODEC_NONE)
                node_cluster__publish_members(c);
}

void node_cluster__on_params(struct node_cluster *c,
                             const struct gossip_member_info *from,
                             const struct gossip_app *msg)
{
        struct gossip_codec_info info = {0};
        size_t cap = node_handoff_slice_cap(c->h);
        uint64_t step = msg->step;
        uint32_t period = msg->period;
        const void *p = msg->payload;
        size_t len = msg->len;
        int rc = 0;

        if (!from_partner(c, from, step))
                return;
        hear_need(c, from->key, msg->need);
        hear_rate(c, from, msg->rx_rate, msg->rx_span);
        /* decoded outside the lock into the loop's spare slice, which the
         * box then swaps into its inbox: the trainer never waits for a
         * decode or a copy */
        if (gossip_codec_peek(p, len, c->nparams, &info) || info.count == 0 ||
            info.id == GOSSIP_CODEC_TOPK || info.count > cap ||
            (rc = gossip_codec_decode(p, len, c->nparams,
                                      node_handoff_inbox_spare(c->h), &info))) {
                if (info.count > cap && !c->warned_parts) {
                        /* a peer with fewer --params-parts than ours */
                        node_log(NODE_LOG_WARN,
                                 "a parameter slice of %zu values is larger "
                                 "than ours (%zu): peers must use the same "
                                 "--params-parts; such slices are dropped",
                                 info.count, cap);
                        c->warned_parts = 1;
                }
                decode_refused(c, from, rc);
                return;
        }
        node_log(NODE_LOG_DEBUG, "parameters of step %llu arrived",
                 (unsigned long long)step);
        if (node_handoff_deliver_params(c->h, from->key, step, period, info.lo,
                                        info.count) == GOSSIP_ROBUST_WINDOW)
                node_log(NODE_LOG_DEBUG,
                         "parameters of step %llu from %s (period %u) out "
                         "of the window: we are at step %llu",
                         (unsigned long long)step,
                         node_cluster__member_name(from), period,
                         (unsigned long long)node_handoff_local_step(c->h));
}
