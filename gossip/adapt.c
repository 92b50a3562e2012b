/*
 * adapt.c - the slice codec and averaging period chosen from the measured
 * link (see adapt.h for the rule). Pure.
 */
#include "gossip/adapt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/codec.h"

void gossip_adapt_init(const struct gossip_adapt_in *in,
                       struct gossip_adapt_choice *out)
{
        out->codec = in->codec;
        out->k = in->k0 ? in->k0 : 1;
}

size_t gossip_adapt_slice_bytes(const struct gossip_adapt_in *in, int codec)
{
        uint32_t p = in->parts ? in->parts : 1;
        size_t n = (in->nparams + p - 1) / p, body;

        switch (codec) {
        case GOSSIP_CODEC_FP32:
                body = 4 * n;
                break;
        case GOSSIP_CODEC_INT8:
                body = n + 4 * ((n + GOSSIP_CODEC_INT8_BLOCK_DEFAULT - 1) /
                                GOSSIP_CODEC_INT8_BLOCK_DEFAULT);
                break;
        default:
                body = 2 * n;
        }
        return body + GOSSIP_CODEC_HEADER_BYTES + GOSSIP_ADAPT_FRAME_BYTES;
}

int gossip_adapt_skip(const struct gossip_adapt_in *in,
                      const struct gossip_adapt_choice *cur, uint64_t queued)
{
        uint32_t k0 = in->k0 ? in->k0 : 1;

        if (cur->k > k0 || cur->codec != in->codec)
                return queued > 0;
        return queued > (uint64_t)gossip_adapt_slice_bytes(in, in->codec);
}

/* The smallest K = k0 * 2^j (capped) whose round carries codec's slice
 * within pct % of the goodput. */
static uint32_t need_k(const struct gossip_adapt_in *in, int codec,
                       unsigned pct)
{
        uint32_t k0 = in->k0 ? in->k0 : 1;
        double per_step = in->goodput_Bps * (pct / 100.0) * in->step_us / 1e6;
        double want = (double)gossip_adapt_slice_bytes(in, codec) / per_step;
        uint32_t k = k0;

        while ((double)k < want && k < k0 * GOSSIP_ADAPT_K_FACTOR_MAX)
                k *= 2;
        return k;
}

/* The choice for a link with pct % of its goodput to spend. */
static void choose_at(const struct gossip_adapt_in *in, unsigned pct,
                      struct gossip_adapt_choice *out)
{
        uint32_t k0 = in->k0 ? in->k0 : 1;

        out->codec = in->codec;
        out->k = need_k(in, in->codec, pct);
        if (out->k == k0 || in->codec == GOSSIP_CODEC_INT8)
                return;
        out->codec = GOSSIP_CODEC_INT8;
        out->k = need_k(in, GOSSIP_CODEC_INT8, pct);
}

/* Bytes per step of a choice: smaller is cheaper. */
static double cost(const struct gossip_adapt_in *in,
                   const struct gossip_adapt_choice *c)
{
        return (double)gossip_adapt_slice_bytes(in, c->codec) / c->k;
}

int gossip_adapt_choose(const struct gossip_adapt_in *in,
                        const struct gossip_adapt_choice *cur,
                        struct gossip_adapt_choice *out)
{
        struct gossip_adapt_choice fit, back;

        *out = *cur;
        if (!(in->goodput_Bps > 0) || !(in->step_us > 0) ||
            !isfinite(in->goodput_Bps) || !isfinite(in->step_us))
                return 0;
        choose_at(in, GOSSIP_ADAPT_UTIL_PCT, &fit);
        if (cost(in, &fit) < cost(in, cur)) {
                *out = fit; /* the link shrank: cheaper at once */
        } else if (cost(in, &fit) > cost(in, cur)) {
                /* the link grew: richer only with room to spare */
                choose_at(in, GOSSIP_ADAPT_BACK_PCT, &back);
                if (cost(in, &back) > cost(in, cur))
                        *out = back;
        }
        return out->codec != cur->codec || out->k != cur->k;
}

uint64_t gossip_adapt_need_ttl_ms(const struct gossip_adapt_in *in,
                                  size_t alive, uint32_t k)
{
        double ms = 0;

        if (in->step_us > 0 && isfinite(in->step_us)) {
                double steps = (double)GOSSIP_ADAPT_NEED_TTL_ROUNDS *
                               (double)alive * (double)k;

                if (steps < GOSSIP_ADAPT_NEED_TTL_MIN_STEPS)
                        steps = GOSSIP_ADAPT_NEED_TTL_MIN_STEPS;
                ms = steps * in->step_us / 1e3;
        }
        if (!(ms > GOSSIP_ADAPT_NEED_TTL_MIN_MS))
                return GOSSIP_ADAPT_NEED_TTL_MIN_MS;
        return ms < 1e12 ? (uint64_t)ms : (uint64_t)1e12;
}

uint32_t gossip_adapt_agree(const struct gossip_adapt_in *in, uint32_t own_k,
                            const struct gossip_adapt_need *needs, size_t n,
                            uint64_t now_ms, uint64_t ttl_ms)
{
        uint32_t k0 = in->k0 ? in->k0 : 1;
        uint32_t top = k0 * GOSSIP_ADAPT_K_FACTOR_MAX, k = own_k;

        for (size_t i = 0; i < n; i++) {
                uint32_t want = k0;

                if (needs[i].k == 0 || (now_ms > needs[i].heard_ms &&
                                        now_ms - needs[i].heard_ms > ttl_ms))
                        continue;
                while (want < needs[i].k && want < top)
                        want *= 2;
                k = want > k ? want : k;
        }
        return k;
}

void gossip_adapt_pace_note(struct gossip_adapt_pace *p, double us)
{
        if (!(us > 0) || !isfinite(us))
                return;
        p->us[p->n++ % GOSSIP_ADAPT_PACE_STEPS] = us;
}

static int pace_cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return (x > y) - (x < y);
}

double gossip_adapt_pace_us(const struct gossip_adapt_pace *p)
{
        double v[GOSSIP_ADAPT_PACE_STEPS], sum = 0;
        size_t m = p->n < GOSSIP_ADAPT_PACE_STEPS ? (size_t)p->n
                                                  : GOSSIP_ADAPT_PACE_STEPS;
        size_t keep = m - m / 8;

        if (m == 0)
                return 0;
        memcpy(v, p->us, m * sizeof(v[0]));
        qsort(v, m, sizeof(v[0]), pace_cmp);
        for (size_t i = 0; i < keep; i++)
                sum += v[i];
        return sum / (double)keep;
}

double gossip_adapt_cpu_pct(const struct gossip_adapt_cpu *c)
{
        double all = c->exchange_us + c->compute_us;

        if (!(c->compute_us > 0) || !(c->exchange_us >= 0) || !isfinite(all))
                return -1;
        return 100.0 * c->exchange_us / all;
}

int gossip_adapt_cpu_learn(struct gossip_adapt_cpu_model *m,
                           const struct gossip_adapt_cpu *c)
{
        double e, comp;
        int i;

        if (gossip_adapt_cpu_pct(c) < 0 || c->k == 0 ||
            c->steps < GOSSIP_ADAPT_CPU_MIN_STEPS ||
            c->steps < (uint64_t)GOSSIP_ADAPT_CPU_MIN_ROUNDS * c->k)
                return 0;
        e = c->exchange_us / (double)c->steps;
        comp = c->compute_us / (double)c->steps;
        /* the slot of this period, else the other one's: the two periods
         * measured last; a second window at one period halves its noise */
        i = m->k[0] == c->k ? 0 : m->k[1] == c->k ? 1 : -1;
        if (i >= 0) {
                m->exchange_us[i] = (m->exchange_us[i] + e) / 2;
        } else {
                m->k[1] = m->k[0];
                m->exchange_us[1] = m->exchange_us[0];
                m->k[0] = c->k;
                m->exchange_us[0] = e;
        }
        m->compute_us = m->compute_us > 0 ? (m->compute_us + comp) / 2 : comp;
        m->last_k = c->k;
        m->last_pct = gossip_adapt_cpu_pct(c);
        return 1;
}

/* a and b of e(K) = a + b / K from what m holds. */
static void cpu_fit(const struct gossip_adapt_cpu_model *m, double *a,
                    double *b)
{
        double k0 = m->k[0], k1 = m->k[1], e0 = m->exchange_us[0],
               e1 = m->exchange_us[1];

        *a = 0;
        *b = e0 * k0;
        if (!m->k[1])
                return;
        *b = (e0 - e1) / (1.0 / k0 - 1.0 / k1);
        *a = e0 - *b / k0;
        if (*b < 0) { /* no saving measured: all of it per step */
                *b = 0;
                *a = (e0 + e1) / 2;
        } else if (*a < 0) { /* noise: all of it per round */
                *a = 0;
                *b = e0 * k0;
        }
}

/* The smallest K = k0 * 2^j (capped) whose per-round part b / K is at
 * most pct % of a step's CPU. */
static uint32_t cpu_k(uint32_t k0, double a, double b, double compute,
                      unsigned pct)
{
        uint32_t k = k0;

        while (k < k0 * GOSSIP_ADAPT_CPU_K_FACTOR_MAX &&
               100.0 * (b / k) > pct * (compute + a + b / k))
                k *= 2;
        return k;
}

uint32_t gossip_adapt_cpu_need(const struct gossip_adapt_in *in,
                               const struct gossip_adapt_cpu_model *m,
                               uint32_t cur, double *a_us, double *b_us)
{
        uint32_t k0 = in->k0 ? in->k0 : 1, up, down;
        double a, b;

        if (cur < k0)
                cur = k0;
        if (!m->k[0] || !(m->compute_us > 0))
                return cur;
        cpu_fit(m, &a, &b);
        if (a_us)
                *a_us = a;
        if (b_us)
                *b_us = b;
        up = cpu_k(k0, a, b, m->compute_us, GOSSIP_ADAPT_CPU_PCT);
        down = cpu_k(k0, a, b, m->compute_us, GOSSIP_ADAPT_CPU_BACK_PCT);
        /* one doubling a window: with one period measured a = 0 is a
         * guess that may overshoot, and the way back would need the 5 %;
         * a fit of two short windows can too (one device of 4 read b =
         * 1,035 us where the others read 506-677 and asked 8, and under
         * one period for all the fleet went to 8). The window at the
         * doubled period tells a from b again. */
        if (up > 2 * cur)
                up = 2 * cur;
        if (up > cur)
                return up;
        if (down < cur && m->last_k == cur &&
            m->last_pct <= GOSSIP_ADAPT_CPU_PCT)
                return down;
        return cur;
}

const char *gossip_adapt_say(const struct gossip_adapt_choice *c, char *buf,
                             size_t len)
{
        const char *name = c->codec == GOSSIP_CODEC_FP32   ? "fp32"
                           : c->codec == GOSSIP_CODEC_INT8 ? "int8"
                                                           : "fp16";

        snprintf(buf, len, "%s slices every %u step%s", name, c->k,
                 c->k == 1 ? "" : "s");
        return buf;
}
