/*
 * plan.c - the exchange plan (see plan.h): the admission rule, the
 * round, slot and slice arithmetic that every user of the ring shares, and
 * what the slices that arrived are worth (gossip_plan_judge, called by the
 * node's box and the exchange simulator alike).
 *
 * Pure: the caller passes the clock in view->now_us and owns the wait.
 */
#include "gossip/plan.h"

#include <stdio.h>

#include "gossip/codec.h"

int gossip_plan_cfg_valid(const struct gossip_plan_cfg *c)
{
        return c && c->parts >= 1 && c->avg_lag >= 1 &&
               c->avg_lag < GOSSIP_PLAN_RING;
}

void gossip_plan_wait_begin(struct gossip_plan_wait *w)
{
        w->extra = 0;
        w->since_us = UINT64_MAX;
        w->bound = 0;
}

/* Does the phase's bound apply at all, and is it satisfied? */
/* The larger of our K and a sender's period (0: not told). */
static uint64_t period_max(const struct gossip_plan_cfg *c, uint32_t period)
{
        return period > c->avg_every ? period : c->avg_every;
}

static int bound_applies(const struct gossip_plan_cfg *c,
                         const struct gossip_plan_view *v, uint64_t *want)
{
        uint64_t lag_steps =
            (uint64_t)c->avg_lag * period_max(c, v->last_in_period);

        *want = 0;
        if (!c->wait_ms || v->alive <= 1)
                return 0;
        if (v->phase == GOSSIP_PLAN_GRADIENT)
                return c->grads;
        /* only a step that ends a round averages, so only it may wait */
        if (!gossip_plan_due(c, v->step) || v->step <= lag_steps)
                return 0;
        *want = v->step - lag_steps;
        return 1;
}

static int bound_holds(const struct gossip_plan_cfg *c,
                       const struct gossip_plan_view *v, uint64_t want)
{
        int ahead;

        if (v->phase == GOSSIP_PLAN_PARAMS)
                return v->last_in_step >= want;
        /* stale-synchronous: a gradient to merge, and not more than S
         * steps ahead of the slowest live peer */
        ahead = v->min_peer_step != UINT64_MAX &&
                v->step > v->min_peer_step + c->staleness;
        return v->grads_pending > 0 && !ahead;
}

void gossip_plan_admit(const struct gossip_plan_cfg *c,
                       const struct gossip_plan_view *v,
                       struct gossip_plan_wait *w,
                       struct gossip_plan_decision *d)
{
        d->action = GOSSIP_PLAN_READY;
        d->timed_out = 0;
        d->deadline_us = 0;
        if (!bound_applies(c, v, &d->want_step))
                return;
        w->bound = 1;
        if (v->stopping || bound_holds(c, v, d->want_step))
                return;
        /* extra batches first, and only while averaging is what we wait
         * for: they cost nothing of the --wait-ms budget, which starts
         * when the node would otherwise idle */
        if (v->phase == GOSSIP_PLAN_PARAMS && !v->last_step &&
            w->extra < c->fill_batches && w->since_us == UINT64_MAX) {
                w->extra++;
                d->action = GOSSIP_PLAN_TRAIN_MORE;
                return;
        }
        if (w->since_us == UINT64_MAX)
                w->since_us = v->now_us;
        d->deadline_us = w->since_us + (uint64_t)c->wait_ms * 1000u;
        if (v->now_us < d->deadline_us) {
                d->action = GOSSIP_PLAN_WAIT;
                return;
        }
        d->timed_out = 1;
}

int gossip_plan_due(const struct gossip_plan_cfg *c, uint64_t t)
{
        return c->avg_every != 0 && t != 0 && t % c->avg_every == 0;
}

uint64_t gossip_plan_round(const struct gossip_plan_cfg *c, uint64_t t)
{
        return c->avg_every ? t / c->avg_every : t;
}

unsigned gossip_plan_slot(const struct gossip_plan_cfg *c, uint64_t t)
{
        return (unsigned)(gossip_plan_round(c, t) % GOSSIP_PLAN_RING);
}

uint32_t gossip_plan_slice(const struct gossip_plan_cfg *c, uint64_t t,
                           size_t *lo, size_t *count)
{
        uint32_t part = (uint32_t)(gossip_plan_round(c, t) % c->parts);

        gossip_codec_partition(c->nparams, part, c->parts, lo, count);
        return part;
}

uint64_t gossip_plan_window(const struct gossip_plan_cfg *c, uint32_t period)
{
        return ((uint64_t)c->avg_lag + 1) * period_max(c, period) +
               c->staleness;
}

int gossip_plan_may_load(int answered, uint64_t queued, uint64_t held_ms)
{
        return (answered && queued == 0) || held_ms >= GOSSIP_PLAN_LOAD_HOLD_MS;
}

int gossip_plan_join(uint64_t ours, uint64_t furthest)
{
        if (furthest <= ours)
                return GOSSIP_PLAN_JOIN_NONE;
        if (furthest - ours <= GOSSIP_PLAN_JOIN_ADOPT_STEPS)
                return GOSSIP_PLAN_JOIN_ADOPT;
        return GOSSIP_PLAN_JOIN_FETCH;
}

/* A member gossip_plan_state_source may ask: any when none is ready. */
static int source_candidate(const uint8_t *loading, int some_ready, size_t i)
{
        return !some_ready || !loading[i];
}

size_t gossip_plan_state_source(const uint64_t *steps, const uint8_t *loading,
                                size_t n, uint64_t pick)
{
        uint64_t top = 0, floor;
        size_t count = 0, want;
        int some_ready = 0;

        for (size_t i = 0; loading && i < n; i++)
                some_ready |= !loading[i];
        for (size_t i = 0; i < n; i++)
                if (source_candidate(loading, some_ready, i))
                        top = steps[i] > top ? steps[i] : top;
        floor =
            top > GOSSIP_PLAN_SOURCE_STEPS ? top - GOSSIP_PLAN_SOURCE_STEPS : 0;
        for (size_t i = 0; i < n; i++)
                count += source_candidate(loading, some_ready, i) &&
                         steps[i] >= floor;
        if (count == 0) /* n == 0 */
                return 0;
        want = (size_t)(pick % count);
        for (size_t i = 0; i < n; i++)
                if (source_candidate(loading, some_ready, i) &&
                    steps[i] >= floor && want-- == 0)
                        return i;
        return 0;
}

void gossip_plan_leads_note(struct gossip_plan_leads *l, uint64_t s, uint64_t t)
{
        int64_t d = s >= t ? (int64_t)(s - t > INT64_MAX ? INT64_MAX : s - t)
                           : -(int64_t)(t - s > INT64_MAX ? INT64_MAX : t - s);

        l->lead[l->next] = d;
        l->next = (l->next + 1) % GOSSIP_PLAN_LEADS;
        if (l->n < GOSSIP_PLAN_LEADS)
                l->n++;
}

/* The smallest of the last m leads, m = min(alive - 1, GOSSIP_PLAN_LEADS);
 * 0 when there are fewer than m or no peer. */
static int64_t least_recent_lead(size_t alive,
                                 const struct gossip_plan_leads *l)
{
        size_t m = alive > 1 ? alive - 1 : 0;
        int64_t lo = INT64_MAX;

        if (m > GOSSIP_PLAN_LEADS)
                m = GOSSIP_PLAN_LEADS;
        if (!m || l->n < m)
                return 0;
        for (size_t i = 1; i <= m; i++) {
                int64_t d = l->lead[(l->next + GOSSIP_PLAN_LEADS - i) %
                                    GOSSIP_PLAN_LEADS];
                if (d < lo)
                        lo = d;
        }
        return lo;
}

uint64_t gossip_plan_catch_up(const struct gossip_plan_cfg *c, uint64_t t,
                              size_t alive, const struct gossip_plan_leads *l)
{
        uint64_t window = gossip_plan_window(c, 0), skip;
        int64_t lo;

        if (!gossip_plan_due(c, t))
                return 0;
        lo = least_recent_lead(alive, l);
        if (lo <= 0 || (uint64_t)lo <= window / 2)
                return 0;
        skip = (uint64_t)lo < window ? (uint64_t)lo : window;
        return skip / c->avg_every * c->avg_every;
}

int gossip_plan_far_behind(const struct gossip_plan_cfg *c, uint64_t t,
                           size_t alive, const struct gossip_plan_leads *l)
{
        int64_t lo;

        if (!gossip_plan_due(c, t))
                return 0;
        lo = least_recent_lead(alive, l);
        return lo > 0 && (uint64_t)lo >
                             GOSSIP_PLAN_FAR_WINDOWS * gossip_plan_window(c, 0);
}

void gossip_plan_pace_note(struct gossip_plan_pace *p, uint64_t passed,
                           uint64_t trained)
{
        if (trained > passed)
                trained = passed; /* a trained step is a step passed */
        p->passed += passed;
        p->trained += trained;
        while (p->passed > 2 * (uint64_t)GOSSIP_PLAN_PACE_WINDOW) {
                p->passed /= 2;
                p->trained /= 2;
        }
}

double gossip_plan_pace_ratio(const struct gossip_plan_pace *p, double cap)
{
        double w;

        if (!(cap > 1.0) || !p->trained)
                return 1.0;
        w = (double)p->passed / (double)p->trained;
        return w < 1.0 ? 1.0 : w > cap ? cap : w;
}

int gossip_plan_part_of(const struct gossip_plan_cfg *c, size_t lo,
                        size_t count, uint32_t *part)
{
        size_t plo, pcount;
        uint64_t p;

        if (!c->nparams || !c->parts || lo >= c->nparams)
                return 0;
        /* partition p starts at floor(n p / P): the first p with a start
         * at or past lo is ceil(lo P / n) */
        p = ((uint64_t)lo * c->parts + c->nparams - 1) / c->nparams;
        if (p >= c->parts)
                return 0;
        gossip_codec_partition(c->nparams, (uint32_t)p, c->parts, &plo,
                               &pcount);
        if (plo != lo || pcount != count)
                return 0;
        *part = (uint32_t)p;
        return 1;
}

size_t gossip_plan_slice_cap(const struct gossip_plan_cfg *c)
{
        return (c->nparams + c->parts - 1) / c->parts;
}

int gossip_plan_slice_use(const struct gossip_plan_cfg *c, uint64_t t,
                          uint64_t s, size_t lo, size_t count,
                          uint64_t held_step, uint32_t period,
                          uint64_t answered_step)
{
        uint64_t window = gossip_plan_window(c, period);
        size_t mlo, mcount;

        if (s + window < t || lo > c->nparams || count > c->nparams - lo)
                return GOSSIP_PLAN_STALE;
        if (!c->avg_every || held_step != s)
                return GOSSIP_PLAN_PLAIN;
        gossip_plan_slice(c, s, &mlo, &mcount);
        if (mlo != lo || mcount != count)
                return GOSSIP_PLAN_PLAIN;
        /* only where the plan makes it routine: the lag bound admits
         * slices up to (R + 1) K old, later than the part's next round
         * P K when R >= P */
        return c->avg_lag >= c->parts && answered_step != UINT64_MAX &&
                       answered_step >= s
                   ? GOSSIP_PLAN_ANSWERED
                   : GOSSIP_PLAN_DELTA;
}

void gossip_plan_judge(const struct gossip_plan_cfg *c, uint64_t t,
                       const struct gossip_plan_arrival *in, size_t n,
                       const uint64_t held[GOSSIP_PLAN_RING],
                       uint64_t *answered, struct gossip_plan_judged *out)
{
        for (size_t i = n; i-- > 0;) {
                const struct gossip_plan_arrival *a = &in[i];
                unsigned slot = gossip_plan_slot(c, a->step);
                uint32_t part;
                uint64_t *ans =
                    answered && gossip_plan_part_of(c, a->lo, a->count, &part)
                        ? &answered[part]
                        : NULL;
                int use = gossip_plan_slice_use(c, t, a->step, a->lo, a->count,
                                                held[slot], a->period,
                                                ans ? *ans : UINT64_MAX);

                if (ans &&
                    (use == GOSSIP_PLAN_DELTA || use == GOSSIP_PLAN_PLAIN))
                        *ans = t;
                out[i].use = use;
                out[i].slot = slot;
        }
}

/* ---- is the exchange working? ---- */

void gossip_plan_health_init(struct gossip_plan_health *h)
{
        h->used = 1.0f;
        h->timeouts = 0.0f;
        h->slices = h->waits = h->dry_waits = 0;
        h->verdict = GOSSIP_PLAN_HEALTHY;
}

static void ewma(float *x, uint32_t *n, float v)
{
        const float a = 1.0f / GOSSIP_PLAN_HEALTH_N;

        /* the first samples count fully, so the mean is of what was seen */
        if (*n < GOSSIP_PLAN_HEALTH_N)
                (*n)++;
        *x += (v - *x) * (*n < GOSSIP_PLAN_HEALTH_N ? 1.0f / (float)*n : a);
}

static int judge(const struct gossip_plan_health *h)
{
        int judged = h->slices >= GOSSIP_PLAN_HEALTH_N;

        switch (h->verdict) {
        case GOSSIP_PLAN_HEALTHY:
                if (judged && h->used < 0.5f)
                        return GOSSIP_PLAN_DEGRADED_TOO_OLD;
                if (h->dry_waits >= GOSSIP_PLAN_HEALTH_N &&
                    h->waits >= GOSSIP_PLAN_HEALTH_N && h->timeouts >= 0.9f)
                        return GOSSIP_PLAN_DEGRADED_STARVED;
                return GOSSIP_PLAN_HEALTHY;
        default:
                if ((!judged || h->used >= 0.75f) &&
                    h->dry_waits < GOSSIP_PLAN_HEALTH_N)
                        return GOSSIP_PLAN_HEALTHY;
                if (judged && h->used < 0.5f)
                        return GOSSIP_PLAN_DEGRADED_TOO_OLD;
                return h->verdict;
        }
}

int gossip_plan_health_note(struct gossip_plan_health *h, int outcome)
{
        int before = h->verdict;

        switch (outcome) {
        case GOSSIP_PLAN_USED:
        case GOSSIP_PLAN_TOO_OLD:
                ewma(&h->used, &h->slices, outcome == GOSSIP_PLAN_USED);
                h->dry_waits = 0;
                break;
        case GOSSIP_PLAN_WAIT_MET:
        case GOSSIP_PLAN_WAIT_TIMEOUT:
                ewma(&h->timeouts, &h->waits,
                     outcome == GOSSIP_PLAN_WAIT_TIMEOUT);
                if (h->dry_waits < UINT32_MAX)
                        h->dry_waits++;
                break;
        default:
                return 0;
        }
        h->verdict = judge(h);
        return h->verdict != before;
}

const char *gossip_plan_health_say(const struct gossip_plan_health *h,
                                   char *buf, size_t len)
{
        switch (h->verdict) {
        case GOSSIP_PLAN_DEGRADED_TOO_OLD:
                snprintf(buf, len,
                         "degraded: %.0f%% of received slices too old to "
                         "average",
                         100.0 * (1.0 - h->used));
                break;
        case GOSSIP_PLAN_DEGRADED_STARVED:
                snprintf(buf, len,
                         "degraded: no slice arrived in the last %u "
                         "averaging rounds (%.0f%% of waits timed out)",
                         h->dry_waits, 100.0 * h->timeouts);
                break;
        default:
                snprintf(buf, len, "ok");
        }
        return buf;
}
