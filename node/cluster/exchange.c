/*
 * exchange.c - the exchange as one object, loop side (exchange.h): what
 * the trainer posted in the hand-off box is encoded here and sent to the
 * step's partner; what peers send is decoded here and delivered to the
 * box, where the trainer merges it when the exchange plan (gossip/plan.h)
 * says so.
 *
 * Gradients go through the payload codec with error feedback (the codec
 * keeps what it did not send, so the encoder is loop-owned and stateful);
 * parameter slices are encoded statelessly, slice by slice. The training
 * thread's per-step cost stays one copy: all encoding, decoding and
 * sending happens on the loop, and never under the box's lock.
 *
 * The struct below is this file's alone; the cluster owns the object and
 * calls its entries, the rest read node_exchange_stats(). Nothing here
 * calls the cluster: what it needs comes bound (the protocol core, the
 * transport, the view, the join) or as an argument (the receive info).
 *
 * Loop thread only.
 */
#include "cluster/exchange.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gn_bigbuf.h"
#include "gossip/codec.h"
#include "service/evlog.h"
#include "train/handoff.h"
#include "cluster/join.h"
#include "gossip/link.h"
#include "config/options.h"
#include "gossip/plan.h"
#include "nn/reservoir.h"
#include "gossip/robust.h"
#include "train/shuffle.h"
#include "cluster/view.h"

struct node_exchange {
        /* fixed at open and bind */
        const struct node_options *o;
        size_t nparams;
        uv_async_t *wake;
        struct gossip *g;
        struct node_net *net;
        struct node_view *view;
        struct node_join *join;
        struct node_handoff *h; /* the box, ours; shared with the trainer */
        struct gossip_codec enc, penc; /* gradients (error feedback),
                                          parameter slices (stateless) */
        struct gossip_codec penc8;     /* slices in int8, when adapted */
        uint64_t adapt_at_ms; /* last re-choice; every 250 ms at most */
        double loop_cpu_us;   /* the loop thread's CPU time then */
        /* what the CPU windows taught (gossip_adapt_cpu_need), and how
         * many were taken (the first, with the start's work, is not
         * learned from) */
        struct gossip_adapt_cpu_model cpu;
        uint64_t cpu_windows;
        /* one period for all (gossip_adapt_agree): needs[i] is the need
         * pg[i] told us, rx[i] the receiver's side of pg[i]'s link
         * (gossip/link.h), how its frames arrived here, summed until we
         * tell it (PARAMS keys 17-18) */
        struct gossip_adapt_need needs[NODE_EXCHANGE_PEERS];
        struct gossip_link_rx rx[NODE_EXCHANGE_PEERS];
        struct node_exchange_peer pg[NODE_EXCHANGE_PEERS];
        size_t npg;
        uint8_t *grad_buf, *params_buf; /* encoded payloads */
        size_t grad_cap, params_cap;
        float *scratch; /* a received gradient, decoded */
        int warned_parts;
        struct node_exchange_stats st; /* adapt and k_force included */
};

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
static void plan_cfg(const struct node_exchange *ex, uint32_t parts,
                     struct gossip_plan_cfg *p)
{
        const struct node_options *o = ex->o;

        memset(p, 0, sizeof(*p));
        p->nparams = ex->nparams;
        p->avg_every = o->avg_every;
        p->avg_lag = o->avg_lag;
        p->parts = parts;
        p->staleness = o->staleness;
        p->fill_batches = o->fill_batches;
        p->wait_ms = o->wait_ms;
        p->grads = o->codec != NODE_CODEC_NONE;
}

static int open_codecs(struct node_exchange *ex, char *err, size_t errlen)
{
        struct gossip_codec_cfg cc = {0}, pc = {0};
        int rc;

        cc.id = codec_id(ex->o->codec);
        cc.n = ex->nparams;
        cc.parts = ex->o->partitions;
        cc.k = ex->o->topk;
        /* fp16/int8 rounding error goes back into the next gradient; fp32
         * is exact (top-k and partitions always keep a residual) */
        cc.error_feedback =
            ex->o->codec == NODE_CODEC_FP16 || ex->o->codec == NODE_CODEC_INT8;
        rc = gossip_codec_init(&ex->enc, &cc);
        if (rc) {
                snprintf(err, errlen, "--codec/--partitions: %s",
                         gossip_strerror(rc));
                return rc;
        }
        pc.id = codec_id(ex->o->params_codec);
        pc.n = ex->nparams;
        pc.parts = ex->o->params_parts;
        rc = gossip_codec_init(&ex->penc, &pc);
        if (rc) {
                snprintf(err, errlen, "--params-codec/--params-parts: %s",
                         gossip_strerror(rc));
                return rc;
        }
        /* the adaptation's cheaper encoding, same parts */
        pc.id = GOSSIP_CODEC_INT8;
        rc = gossip_codec_init(&ex->penc8, &pc);
        if (rc) {
                snprintf(err, errlen, "int8 slices: %s", gossip_strerror(rc));
                return rc;
        }
        /* parameters are encoded slice by slice, statelessly */
        gossip_codec_free(&ex->penc);
        gossip_codec_free(&ex->penc8);
        ex->grad_cap = gossip_codec_max_size(&ex->enc);
        ex->params_cap = gossip_codec_max_size(&ex->penc);
        if (gossip_codec_max_size(&ex->penc8) > ex->params_cap)
                ex->params_cap = gossip_codec_max_size(&ex->penc8);
        return 0;
}

/* The trainer posted something (any thread). */
static void wake_loop(void *async)
{
        uv_async_send(async);
}

static int open_box(struct node_exchange *ex, char *err, size_t errlen)
{
        struct node_handoff_cfg hc = {0};
        int rc;

        plan_cfg(ex, ex->penc.cfg.parts, &hc.plan);
        gossip_adapt_init(&(struct gossip_adapt_in){.k0 = hc.plan.avg_every,
                                                    .codec = ex->penc.cfg.id},
                          &ex->st.adapt);
        ex->st.k_force = ex->st.adapt.k;
        ex->st.cpu_pct = -1;
        hc.avg_weight = ex->o->avg_weight;
        hc.robust = ex->o->robust;
        hc.wake_loop = wake_loop;
        hc.ctx = ex->wake;
        rc = node_handoff_create(&ex->h, &hc);
        if (rc)
                snprintf(err, errlen, "exchange: %s",
                         rc == -EINVAL ? "--avg-lag does not fit the ring"
                                       : "out of memory");
        return rc;
}

int node_exchange_open(struct node_exchange **out,
                       const struct node_exchange_cfg *cfg, char *err,
                       size_t errlen)
{
        struct node_exchange *ex = calloc(1, sizeof(*ex));
        int rc;

        *out = NULL;
        if (!ex)
                return -ENOMEM;
        ex->o = cfg->o;
        ex->nparams = cfg->nparams;
        ex->wake = cfg->wake;
        rc = open_codecs(ex, err, errlen);
        if (rc)
                goto out;
        if (ex->o->codec != NODE_CODEC_NONE && ex->o->avg_every == 0)
                node_log(NODE_LOG_WARN,
                         "gradients without model averaging (--avg-every 0) "
                         "do not keep the replicas together: measured no "
                         "better than isolated nodes (docs/learning.md, "
                         "\"Gradient mode\"); --avg-every K adds it");
        rc = open_box(ex, err, errlen);
        if (rc)
                goto out;
        ex->grad_buf = malloc(ex->grad_cap);
        ex->params_buf = malloc(ex->params_cap);
        ex->scratch = malloc(ex->nparams * sizeof(float));
        if (!ex->grad_buf || !ex->params_buf || !ex->scratch) {
                snprintf(err, errlen, "out of memory");
                rc = -ENOMEM;
        }
out:
        if (rc)
                node_exchange_free(ex);
        else
                *out = ex;
        return rc;
}

void node_exchange_bind(struct node_exchange *ex, struct gossip *g,
                        struct node_net *net, struct node_view *view,
                        struct node_join *join)
{
        ex->g = g;
        ex->net = net;
        ex->view = view;
        ex->join = join;
}

void node_exchange_free(struct node_exchange *ex)
{
        if (!ex)
                return;
        gossip_codec_free(&ex->enc);
        gossip_codec_free(&ex->penc);
        gossip_codec_free(&ex->penc8);
        node_handoff_free(ex->h);
        free(ex->grad_buf);
        free(ex->params_buf);
        free(ex->scratch);
        free(ex);
}

struct node_handoff *node_exchange_box(struct node_exchange *ex)
{
        return ex->h;
}

const struct node_exchange_stats *
node_exchange_stats(const struct node_exchange *ex)
{
        return &ex->st;
}

static long peer_index(const struct node_exchange *ex, const uint8_t *key)
{
        for (size_t i = 0; i < ex->npg; i++)
                if (memcmp(ex->pg[i].key, key, GOSSIP_KEY_BYTES) == 0)
                        return (long)i;
        return -1;
}

int node_exchange_peer(const struct node_exchange *ex, const uint8_t *key,
                       struct node_exchange_peer *out)
{
        long i = peer_index(ex, key);

        if (i < 0)
                return -ENOENT;
        *out = ex->pg[i];
        return 0;
}

/* key's entry in the per-peer table, added if new; NULL when full. */
static struct node_exchange_peer *peer_find(struct node_exchange *ex,
                                            const uint8_t *key)
{
        long i = peer_index(ex, key);

        if (i >= 0)
                return &ex->pg[i];
        if (ex->npg == NODE_EXCHANGE_PEERS)
                return NULL;
        memset(&ex->pg[ex->npg], 0, sizeof(ex->pg[0]));
        memset(&ex->needs[ex->npg], 0, sizeof(ex->needs[0]));
        memset(&ex->rx[ex->npg], 0, sizeof(ex->rx[0]));
        memcpy(ex->pg[ex->npg].key, key, GOSSIP_KEY_BYTES);
        return &ex->pg[ex->npg++];
}

void node_exchange_on_members(struct node_exchange *ex)
{
        uint64_t min = UINT64_MAX;
        size_t n = 0;
        struct gossip_member_info *mi;

        /* the slowest live peer matters only to the gradient bound */
        if (ex->o->wait_ms && ex->o->codec != NODE_CODEC_NONE) {
                mi = node_view_members(ex->view, &n);
                for (size_t i = 1; mi && i < n; i++) /* [0] is ourselves */
                        if (mi[i].state == GOSSIP_ALIVE && mi[i].step < min)
                                min = mi[i].step;
                free(mi);
        }
        node_handoff_set_members(ex->h, gossip_alive_count(ex->g), min);
}

/* ---- sending what the trainer posted ------------------------------------- */

static void send_gradient(struct node_exchange *ex, const float *g,
                          uint64_t step)
{
        uint8_t key[GOSSIP_KEY_BYTES];
        size_t len = 0;
        int rc;

        if (gossip_codec_encode(&ex->enc, step, g, ex->nparams, ex->grad_buf,
                                ex->grad_cap, &len)) {
                ex->st.grads_send_fail++;
                return;
        }
        if (node_view_partner(ex->view, step, key)) {
                ex->st.grads_no_partner++;
                return;
        }
        rc = gossip_send_app(ex->g, key, GOSSIP_APP_GRADIENT, step,
                             ex->grad_buf, len);
        if (rc)
                ex->st.grads_send_fail++;
        else
                ex->st.grads_sent++;
}

/* Our uplink's goodput: the best estimate over the peers we send to.
 * A destination's estimate is confident after a few backlogged samples;
 * since we never queue a slice behind another (send_params), those are
 * mostly the rates our partners report receiving our slices at (PARAMS
 * keys 17-18, hear_rate). A peer that does not report (an older version)
 * leaves only app-limited samples, the kernel's delivery rate of a slice
 * sent on an idle uplink, which only ever raise the estimate: a lower
 * bound, and a low one (docs/design.md, "What sets K now"). */
static double uplink_Bps(struct node_exchange *ex)
{
        struct gossip_member_info *mi;
        struct gossip_link_estimate e;
        double best = 0;
        size_t n = 0;

        mi = node_view_members(ex->view, &n);
        for (size_t i = 1; mi && i < n; i++)
                if (node_net_peer_link(ex->net, &mi[i].addr, &e) == 0 &&
                    (e.confident || e.raised > 0) && e.goodput_Bps > best)
                        best = e.goodput_Bps;
        free(mi);
        return best;
}

/* The adaptation's view of our configuration (the link figures unset). */
static struct gossip_adapt_in adapt_in(struct node_exchange *ex)
{
        const struct gossip_plan_cfg *p = node_handoff_plan(ex->h);
        struct gossip_adapt_in in = {
            .nparams = ex->nparams,
            .parts = p->parts,
            .k0 = p->avg_every,
            .codec = ex->penc.cfg.id,
        };

        return in;
}

/* The CPU window (the box's, with the loop's CPU time since the last
 * call added): the exchange's share, and with --adapt cpu the K it
 * needs (gossip_adapt_cpu_need). */
static void adapt_cpu(struct node_exchange *ex,
                      const struct gossip_adapt_in *in)
{
        struct gossip_adapt_cpu c;
        double now = node_handoff_thread_cpu_us(), a = 0, b = 0;
        uint32_t need;

        if (ex->loop_cpu_us > 0)
                node_handoff_note_loop_cpu(ex->h, now - ex->loop_cpu_us);
        ex->loop_cpu_us = now;
        if (!node_handoff_cpu_take(ex->h, &c))
                return;
        ex->st.cpu_pct = gossip_adapt_cpu_pct(&c);
        /* the first window holds the start: the join, the first
         * states and the membership's burst, several times a round */
        if (ex->cpu_windows++ == 0 || ex->o->adapt != NODE_ADAPT_CPU ||
            !gossip_adapt_cpu_learn(&ex->cpu, &c))
                return;
        need = gossip_adapt_cpu_need(in, &ex->cpu, ex->st.k_cpu, &a, &b);
        if (need != (ex->st.k_cpu ? ex->st.k_cpu : in->k0))
                node_log(NODE_LOG_INFO,
                         "adapting to the CPU: the exchange took %.1f%% of "
                         "it averaging every %u step%s (%.0f us a step and "
                         "%.0f a round, training %.0f a step); our CPU "
                         "needs every %u",
                         ex->st.cpu_pct, c.k, c.k == 1 ? "" : "s", a, b,
                         ex->cpu.compute_us, need);
        ex->st.k_cpu = need;
}

/* Our own need: the largest of the link's and the CPU's. */
static uint32_t own_need(const struct node_exchange *ex)
{
        return ex->st.k_cpu > ex->st.adapt.k ? ex->st.k_cpu : ex->st.adapt.k;
}

/* Every 250 ms at most: re-choose the slice codec and the K our link
 * needs (gossip/adapt.h), and the K our CPU needs, then the K in force,
 * the largest need heard (one period for all); a new K goes to the box,
 * which the trainer takes at a round end both agree on. */
static void adapt(struct node_exchange *ex)
{
        uint64_t now = node_net_now_ms(ex->net);
        const struct gossip_plan_cfg *p = node_handoff_plan(ex->h);
        struct gossip_adapt_in in = adapt_in(ex);
        struct gossip_adapt_choice next;
        char was[64], now_s[64];
        uint32_t k, own;

        if (!ex->o->adapt || !p->avg_every || now < ex->adapt_at_ms + 250)
                return;
        ex->adapt_at_ms = now;
        adapt_cpu(ex, &in);
        in.goodput_Bps = uplink_Bps(ex);
        in.step_us = node_handoff_step_us(ex->h);
        if (gossip_adapt_choose(&in, &ex->st.adapt, &next)) {
                node_log(NODE_LOG_INFO,
                         "adapting to the link: %s (was %s; uplink ~%.1f "
                         "Mbit/s, %.1f ms per step)",
                         gossip_adapt_say(&next, now_s, sizeof(now_s)),
                         gossip_adapt_say(&ex->st.adapt, was, sizeof(was)),
                         in.goodput_Bps * 8 / 1e6, in.step_us / 1000);
                ex->st.adapt = next;
                ex->st.adapt_changes++;
        }
        own = own_need(ex);
        k = gossip_adapt_agree(
            &in, own, ex->needs, ex->npg, now,
            gossip_adapt_need_ttl_ms(&in, ex->npg + 1, ex->st.k_force));
        if (k == ex->st.k_force)
                return;
        if (k != own)
                node_log(NODE_LOG_INFO,
                         "averaging every %u steps, as a partner's link or "
                         "CPU needs (ours needs %u)",
                         k, own);
        else if (ex->st.k_force != own)
                node_log(NODE_LOG_INFO,
                         "averaging every %u steps, as our %s needs (no "
                         "partner needs more now)",
                         k, own == ex->st.adapt.k ? "link" : "CPU");
        ex->st.k_force = k;
        node_handoff_set_k(ex->h, k);
}

/* A partner's need, from its PARAMS (one period for all). */
static void hear_need(struct node_exchange *ex, const uint8_t *key,
                      uint32_t need, uint64_t now_ms)
{
        struct node_exchange_peer *pg;

        if (!ex->o->adapt || !need)
                return;
        pg = peer_find(ex, key);
        if (!pg)
                return;
        ex->needs[pg - ex->pg].k = need;
        ex->needs[pg - ex->pg].heard_ms = now_ms;
}

/* A partner told us the rate at which it received our frames: a sample
 * for our link estimate toward it, handed back with the frame (rx->net's
 * report) for the transport to take once the delivery returns. */
static void hear_rate(struct node_exchange *ex,
                      const struct gossip_member_info *from, uint32_t rate,
                      uint32_t span_us, struct node_exchange_rx *rx)
{
        if (!rate || !span_us || !rx)
                return;
        rx->net.report.to = from->addr;
        rx->net.report.rate_Bps = rate;
        rx->net.report.span_us = span_us;
        ex->st.rates_heard++;
}

/* How a stream frame from `from` arrived goes into the rate we tell it
 * from next (gossip_link_rx_frame). */
static void heard_frame(struct node_exchange *ex,
                        const struct gossip_member_info *from,
                        const struct node_exchange_rx *rx)
{
        struct node_exchange_peer *pg;

        if (!rx || rx->len == 0 || rx->net.span_us == 0)
                return;
        pg = peer_find(ex, from->key);
        if (pg)
                gossip_link_rx_frame(&ex->rx[pg - ex->pg], rx->len,
                                     rx->net.bytes_after_first,
                                     rx->net.span_us);
}

/* What we tell the PARAMS we send to key besides the slice: the period it
 * was made under, our need, and the rate we received key's frames at
 * (each rate sample told once). */
static void params_tell(struct node_exchange *ex, const uint8_t *key,
                        uint32_t k, struct gossip_params_tell *t)
{
        struct node_exchange_peer *pg = peer_find(ex, key);

        memset(t, 0, sizeof(*t));
        t->period = k;
        t->need = ex->o->adapt ? own_need(ex) : 0;
        if (pg &&
            gossip_link_rx_take(&ex->rx[pg - ex->pg], &t->rx_rate, &t->rx_span))
                ex->st.rates_told++;
}

/* Bytes accepted by the transport and not yet handed to the kernel, over
 * every destination: our uplink's backlog (TCP_NOTSENT_LOWAT keeps the
 * kernel's share small, so a backlog shows here). */
static uint64_t uplink_queued(struct node_exchange *ex)
{
        struct node_net_peer_stats ps[64];
        size_t n = node_net_peer_stats(ex->net, ps, 64);
        uint64_t q = 0;

        for (size_t i = 0; i < n && i < 64; i++)
                q += ps[i].queued_bytes;
        return q;
}

/* Is the uplink a backlog this slice would wait behind (gossip/adapt.h)? */
static int link_busy(struct node_exchange *ex)
{
        struct gossip_adapt_in in = adapt_in(ex);

        return gossip_adapt_skip(&in, &ex->st.adapt, uplink_queued(ex));
}

/* Encode our slice of step's round from its ring slot (in the codec the
 * adaptation chose), give the slot back, and send the slice to the
 * round's partner - unless an earlier slice is still waiting for the
 * uplink: queued behind it, this one would arrive too old to use, and
 * the queue would only grow (the adaptation makes such skips rare). */
static void send_params(struct node_exchange *ex, uint64_t step, unsigned slot)
{
        const struct gossip_codec *enc =
            ex->st.adapt.codec == GOSSIP_CODEC_INT8 ? &ex->penc8 : &ex->penc;
        uint8_t key[GOSSIP_KEY_BYTES];
        struct gossip_params_tell tell;
        size_t lo, count, len = 0;
        uint32_t k,
            part = node_handoff_slot_slice(ex->h, slot, &lo, &count, &k);
        int rc;

        if (ex->o->adapt && link_busy(ex)) {
                node_handoff_slot_done(ex->h, slot);
                ex->st.params_skipped_link++;
                return;
        }
        rc = gossip_codec_encode_part(enc, part, node_handoff_slot(ex->h, slot),
                                      count, step, ex->params_buf,
                                      ex->params_cap, &len);
        node_handoff_slot_done(ex->h, slot);
        if (rc == 0)
                rc = node_view_partner(ex->view, step, key);
        if (rc == 0) {
                params_tell(ex, key, k, &tell);
                rc = gossip_send_params(ex->g, key, step, &tell, ex->params_buf,
                                        len);
        }
        if (rc == 0)
                ex->st.params_sent++;
        node_log(NODE_LOG_DEBUG, "parameters of step %llu sent: %s",
                 (unsigned long long)step, gossip_strerror(rc));
}

/* --shuffle-samples: our posted samples to the step's partner, as one
 * SAMPLES frame (MAC'd on the stream like a gradient). */
static void send_samples(struct node_exchange *ex)
{
        struct node_shuffle *s = node_handoff_shuffle(ex->h);
        uint8_t key[GOSSIP_KEY_BYTES], *buf;
        size_t cap, len;
        uint64_t step = 0;

        if (!s)
                return;
        cap = nn_samples_packed_len(
            node_shuffle_max_count(node_shuffle_per_step(s)),
            node_shuffle_sample_bytes(s));
        buf = malloc(cap);
        if (!buf)
                return;
        len = node_shuffle_take(s, buf, cap, &step);
        if (len && node_view_partner(ex->view, step, key) == 0 &&
            gossip_send_app(ex->g, key, GOSSIP_APP_SAMPLES, step, buf, len) ==
                0)
                node_shuffle_sent(s, len);
        free(buf);
}

/* --shuffle-samples: a SAMPLES payload into the reservoir (refused and
 * counted when we have no shuffle or it does not fit our data). */
static void on_samples(struct node_exchange *ex,
                       const struct gossip_member_info *from, const void *p,
                       size_t len)
{
        struct node_shuffle *s = node_handoff_shuffle(ex->h);

        /* authenticated by the wire (a trusted member's MAC or signature);
         * without --shuffle-samples of our own, refused and counted */
        if (!s || node_shuffle_deliver(s, p, len) != 0) {
                ex->st.decode_errors++;
                ex->st.samples_refused++;
                node_log(NODE_LOG_DEBUG, "samples from %s refused",
                         node_view_member_name(from));
        }
}

void node_exchange_on_post(struct node_exchange *ex)
{
        struct node_handoff_work w;

        node_handoff_take(ex->h, &w);
        gossip_set_step(ex->g, ex->join->served ? node_join_own_step(ex->join)
                                                : w.local_step);
        if (w.reset_encoder)
                gossip_codec_reset(&ex->enc);
        if (w.grad)
                send_gradient(ex, w.grad, w.grad_step);
        for (int i = 0; i < w.nslices; i++)
                send_params(ex, w.slice_step[i], w.slot[i]);
        adapt(ex);
        send_samples(ex);
        if (w.state) {
                node_join_send_state(ex->join, w.state, w.state_len,
                                     w.local_step);
                gn_big_free(w.state);
        }
        if (w.want_state)
                node_join_request_state(ex->join, w.local_step);
}

/* ---- receiving ------------------------------------------------------------
 */

/* Robust merge, first guard: only our scheduled sender of that step. */
static int from_partner(struct node_exchange *ex,
                        const struct gossip_member_info *from, uint64_t step)
{
        if (!ex->o->robust ||
            node_view_is_sender(ex->view, step, from->key, ex->view->pk))
                return 1;
        node_handoff_robust_note(ex->h, from->key, GOSSIP_ROBUST_NOT_PARTNER);
        return 0;
}

/* A payload that did not decode, counted under its reason. */
static void decode_refused(struct node_exchange *ex,
                           const struct gossip_member_info *from, int rc)
{
        ex->st.decode_errors++;
        node_handoff_robust_note(ex->h, from->key,
                                 rc == GOSSIP_ENONFINITE
                                     ? GOSSIP_ROBUST_NONFINITE
                                     : GOSSIP_ROBUST_MISMATCH);
}

static void on_gradient(struct node_exchange *ex,
                        const struct gossip_member_info *from, uint64_t step,
                        const void *p, size_t len)
{
        struct node_exchange_peer *pg = peer_find(ex, from->key);
        struct gossip_codec_info info;
        int rc, late = 0;

        if (!from_partner(ex, from, step)) {
                if (pg)
                        pg->dropped++;
                return;
        }
        rc = gossip_codec_decode(p, len, ex->nparams, ex->scratch, &info);
        if (rc) {
                decode_refused(ex, from, rc);
                if (pg)
                        pg->dropped++;
                return;
        }
        rc = node_handoff_offer_gradient(ex->h, from->key, step, info.lo,
                                         ex->scratch, info.count, &late);
        if (pg) {
                if (rc)
                        pg->dropped++;
                else if (late)
                        pg->late++;
                else
                        pg->merged++;
        }
        if (ex->o->wait_ms && ex->o->codec != NODE_CODEC_NONE)
                node_exchange_on_members(ex);
}

/* A PARAMS slice and what its frame tells (msg: period, need, rx_rate,
 * rx_span; 0 = not told). */
static void on_params(struct node_exchange *ex,
                      const struct gossip_member_info *from,
                      const struct gossip_app *msg, struct node_exchange_rx *rx)
{
        uint64_t now_ms = rx ? rx->now_ms : node_net_now_ms(ex->net);
        struct gossip_codec_info info = {0};
        size_t cap = node_handoff_slice_cap(ex->h);
        uint64_t step = msg->step;
        uint32_t period = msg->period;
        const void *p = msg->payload;
        size_t len = msg->len;
        int rc = 0;

        if (!from_partner(ex, from, step))
                return;
        hear_need(ex, from->key, msg->need, now_ms);
        hear_rate(ex, from, msg->rx_rate, msg->rx_span, rx);
        /* decoded outside the lock into the loop's spare slice, which the
         * box then swaps into its inbox: the trainer never waits for a
         * decode or a copy */
        if (gossip_codec_peek(p, len, ex->nparams, &info) || info.count == 0 ||
            info.id == GOSSIP_CODEC_TOPK || info.count > cap ||
            (rc =
                 gossip_codec_decode(p, len, ex->nparams,
                                     node_handoff_inbox_spare(ex->h), &info))) {
                if (info.count > cap && !ex->warned_parts) {
                        /* a peer with fewer --params-parts than ours */
                        node_log(NODE_LOG_WARN,
                                 "a parameter slice of %zu values is larger "
                                 "than ours (%zu): peers must use the same "
                                 "--params-parts; such slices are dropped",
                                 info.count, cap);
                        ex->warned_parts = 1;
                }
                decode_refused(ex, from, rc);
                return;
        }
        node_log(NODE_LOG_DEBUG, "parameters of step %llu arrived",
                 (unsigned long long)step);
        if (node_handoff_deliver_params(ex->h, from->key, step, period, info.lo,
                                        info.count) == GOSSIP_ROBUST_WINDOW)
                node_log(NODE_LOG_DEBUG,
                         "parameters of step %llu from %s (period %u) out "
                         "of the window: we are at step %llu",
                         (unsigned long long)step, node_view_member_name(from),
                         period,
                         (unsigned long long)node_handoff_local_step(ex->h));
}

void node_exchange_on_app(struct node_exchange *ex,
                          const struct gossip_member_info *from,
                          const struct gossip_app *msg,
                          struct node_exchange_rx *rx)
{
        const void *payload = msg->payload;
        uint64_t step = msg->step;
        size_t len = msg->len;

        heard_frame(ex, from, rx);
        switch (msg->kind) {
        case GOSSIP_APP_GRADIENT:
                on_gradient(ex, from, step, payload, len);
                break;
        case GOSSIP_APP_PARAMS:
                on_params(ex, from, msg, rx);
                break;
        case GOSSIP_APP_STATE_REQ:
                node_join_on_state_req(ex->join, from);
                break;
        case GOSSIP_APP_STATE:
                node_join_on_state(ex->join, from, payload, len);
                break;
        case GOSSIP_APP_SAMPLES:
                on_samples(ex, from, payload, len);
                break;
        default:
                ex->st.decode_errors++;
        }
}

void node_exchange_gossip_app(void *ex, const struct gossip_member_info *from,
                              const struct gossip_app *msg)
{
        node_exchange_on_app(ex, from, msg, msg->frame);
}

/* ---- the summary at leave ------------------------------------------------ */

/* One line per peer robust merge has a record of (names, not keys). */
static void log_robust(struct node_exchange *ex,
                       const struct node_handoff_stats *hs)
{
        struct gossip_member_info *mi;
        struct gossip_robust_peer rp;
        const uint64_t *r = hs->robust;
        size_t n = 0;

        node_log(NODE_LOG_INFO,
                 "robust merge %s: %llu accepted, %llu clipped, refused "
                 "%llu far, %llu nonfinite, %llu not_partner, %llu "
                 "out_of_window, %llu mismatch, %llu quarantined, %llu "
                 "duplicate; %llu swayed, %llu named",
                 ex->o->robust ? "on" : "off",
                 (unsigned long long)r[GOSSIP_ROBUST_ACCEPTED],
                 (unsigned long long)r[GOSSIP_ROBUST_CLIPPED],
                 (unsigned long long)r[GOSSIP_ROBUST_FAR],
                 (unsigned long long)r[GOSSIP_ROBUST_NONFINITE],
                 (unsigned long long)r[GOSSIP_ROBUST_NOT_PARTNER],
                 (unsigned long long)r[GOSSIP_ROBUST_WINDOW],
                 (unsigned long long)r[GOSSIP_ROBUST_MISMATCH],
                 (unsigned long long)r[GOSSIP_ROBUST_QUARANTINED],
                 (unsigned long long)r[GOSSIP_ROBUST_DUPLICATE],
                 (unsigned long long)r[GOSSIP_ROBUST_SWAYED],
                 (unsigned long long)r[GOSSIP_ROBUST_NAMED]);
        mi = node_view_members(ex->view, &n);
        for (size_t i = 1; mi && i < n; i++) {
                if (node_handoff_robust_peer(ex->h, mi[i].key, &rp))
                        continue;
                node_log(
                    NODE_LOG_INFO,
                    "robust merge peer %s%s: %llu accepted, %llu "
                    "clipped, %llu far, %llu nonfinite, %llu "
                    "not_partner, %llu out_of_window, %llu mismatch, "
                    "%llu quarantined, %llu duplicate, %llu swayed, "
                    "%llu named; sway %.2f; evidence %.1f (pull %.1f, "
                    "push %.1f); differences pull %+.3f, push %+.3f; %u "
                    "bad of the last %u",
                    node_view_member_name(&mi[i]),
                    gossip_robust_peer_suspect(&rp) ? " suspect_model" : "",
                    (unsigned long long)rp.count[0],
                    (unsigned long long)rp.count[1],
                    (unsigned long long)rp.count[2],
                    (unsigned long long)rp.count[3],
                    (unsigned long long)rp.count[4],
                    (unsigned long long)rp.count[5],
                    (unsigned long long)rp.count[6],
                    (unsigned long long)rp.count[7],
                    (unsigned long long)rp.count[8],
                    (unsigned long long)rp.count[9],
                    (unsigned long long)rp.count[10], (double)rp.sway,
                    (double)rp.evidence, (double)rp.ev_t[GOSSIP_ROBUST_EV_PULL],
                    (double)rp.ev_t[GOSSIP_ROBUST_EV_PUSH],
                    (double)rp.ev_d[GOSSIP_ROBUST_EV_PULL],
                    (double)rp.ev_d[GOSSIP_ROBUST_EV_PUSH],
                    gossip_robust_peer_bad(&rp), rp.nhist);
        }
        free(mi);
}

void node_exchange_log_summary(struct node_exchange *ex)
{
        struct node_handoff_stats hs;
        const struct gossip_merge_stats *ms = &hs.merge;

        node_handoff_stats(ex->h, &hs);
        log_robust(ex, &hs);
        if (ex->o->adapt) {
                char say[64], why[128], cpu[96] = "";

                if (ex->st.cpu_pct >= 0)
                        snprintf(cpu, sizeof(cpu),
                                 "; the exchange %.1f%% of our CPU%s",
                                 ex->st.cpu_pct,
                                 ex->o->adapt == NODE_ADAPT_CPU
                                     ? ", which needs every "
                                     : "");
                if (ex->o->adapt == NODE_ADAPT_CPU && ex->st.cpu_pct >= 0)
                        snprintf(
                            cpu + strlen(cpu), sizeof(cpu) - strlen(cpu), "%u",
                            ex->st.k_cpu ? ex->st.k_cpu
                                         : node_handoff_plan(ex->h)->avg_every);
                node_log(
                    NODE_LOG_INFO,
                    "adaptation: %llu changes, ending with %s (our link "
                    "needs every %u%s); exchange %s",
                    (unsigned long long)ex->st.adapt_changes,
                    gossip_adapt_say(
                        &(struct gossip_adapt_choice){ex->st.adapt.codec,
                                                      ex->st.k_force},
                        say, sizeof(say)),
                    ex->st.adapt.k, cpu,
                    gossip_plan_health_say(&hs.exchange, why, sizeof(why)));
        }
        if (ex->st.rates_told || ex->st.rates_heard)
                node_log(NODE_LOG_INFO,
                         "link rate reports: %llu told to partners, %llu "
                         "heard from them",
                         (unsigned long long)ex->st.rates_told,
                         (unsigned long long)ex->st.rates_heard);
        if (hs.waits)
                node_log(NODE_LOG_INFO,
                         "averaging waits: %llu, %llu timed out, %.3f s "
                         "blocked in all",
                         (unsigned long long)hs.waits,
                         (unsigned long long)hs.wait_timeouts, hs.wait_s);
        node_log(
            NODE_LOG_INFO,
            "exchange: %llu gradients sent (%llu without a partner, "
            "%llu refused); received %llu: %llu merged (%llu late), "
            "dropped %llu stale, %llu ahead, %llu other; parameters "
            "sent %llu (%llu skipped busy, %llu skipped: uplink still busy), "
            "averaged %llu (%llu against "
            "our copy of the same step) of %llu received (%llu too old, "
            "%llu copies, %llu answered already, %llu replaced by a newer "
            "one); %llu "
            "states sent",
            (unsigned long long)ex->st.grads_sent,
            (unsigned long long)ex->st.grads_no_partner,
            (unsigned long long)ex->st.grads_send_fail,
            (unsigned long long)ms->offers, (unsigned long long)ms->merged,
            (unsigned long long)ms->late, (unsigned long long)ms->dropped_stale,
            (unsigned long long)ms->dropped_future,
            (unsigned long long)(ms->dropped_shape + ms->dropped_nonfinite +
                                 ms->dropped_dup + ms->dropped_full),
            (unsigned long long)ex->st.params_sent,
            (unsigned long long)hs.params_busy,
            (unsigned long long)ex->st.params_skipped_link,
            (unsigned long long)hs.params_applied,
            (unsigned long long)hs.params_delta,
            (unsigned long long)hs.params_received,
            (unsigned long long)hs.params_stale,
            (unsigned long long)hs.params_dup,
            (unsigned long long)hs.params_answered,
            (unsigned long long)hs.params_replaced,
            (unsigned long long)ex->join->states_sent);
        if (hs.catch_ups)
                node_log(NODE_LOG_INFO,
                         "behind every recent partner %llu times: %llu "
                         "steps skipped to their pace",
                         (unsigned long long)hs.catch_ups,
                         (unsigned long long)hs.steps_skipped);
        if (node_handoff_shuffle(ex->h)) {
                struct node_shuffle_stats ss;

                node_shuffle_stats(node_handoff_shuffle(ex->h), &ss);
                node_log(NODE_LOG_INFO,
                         "sample shuffle: sent %llu samples in %llu frames, "
                         "received %llu (%llu kept, %llu frames refused), "
                         "trained %llu from the reservoir",
                         (unsigned long long)ss.samples_sent,
                         (unsigned long long)ss.frames_sent,
                         (unsigned long long)ss.samples_received,
                         (unsigned long long)ss.samples_kept,
                         (unsigned long long)ss.frames_refused,
                         (unsigned long long)ss.samples_trained);
        }
}
