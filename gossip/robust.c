/*
 * robust.c - robust merge decisions (see robust.h): distances, the running
 * median, the verdict, centered clipping and the per-peer record. Pure.
 */
#include "gossip/robust.h"

#include <math.h>
#include <string.h>

#include "base/gn_hot.h"

const struct gossip_robust_cfg gossip_robust_params_cfg = {
    .mult = 3.0f,
    .refuse = 4.0f,
    .floor = 0.02f,
    .cap = 0.5f,
    .sway = GOSSIP_ROBUST_SWAY_BOUND,
    .name_t = 3.5f,
    .name_margin = {
        [GOSSIP_ROBUST_EV_PULL] = 0.1f, [GOSSIP_ROBUST_EV_PUSH] = NAN}};
const struct gossip_robust_cfg gossip_robust_grads_cfg = {
    .mult = 3.0f, .refuse = 4.0f, .floor = 0.5f, .cap = 4.0f};

const char *gossip_robust_reason_name(int reason)
{
        static const char *names[GOSSIP_ROBUST_REASONS] = {
            "accepted",    "clipped",       "far",      "nonfinite",
            "not_partner", "out_of_window", "mismatch", "quarantined",
            "duplicate",   "swayed",        "named"};

        if (reason < 0 || reason >= GOSSIP_ROBUST_REASONS)
                return NULL;
        return names[reason];
}

/* Sums of squares in GOSSIP_ROBUST_LANES independent double lanes, so
 * the pass vectorizes without reordering one sum (ISO C forbids the
 * compiler to): *sab of (a - b)^2 (b NULL: of a^2) and, when sb is not
 * NULL, *sb of b^2. Double: 1e30 squared stays finite, so only NaN and
 * Inf inputs give a non-finite sum. */
enum { GOSSIP_ROBUST_LANES = 8 };

static inline __attribute__((always_inline)) void
sumsq(const float *restrict a, const float *restrict b, size_t n,
      double *restrict sab, double *restrict sb, const int want_b)
{
        double lab[GOSSIP_ROBUST_LANES] = {0}, lb[GOSSIP_ROBUST_LANES] = {0};
        size_t i = 0;

#define RMS_ELEMENT(j, k)                                                      \
        do {                                                                   \
                double bj = b ? (double)b[j] : 0.0;                            \
                double d = (double)a[j] - bj;                                  \
                                                                               \
                lab[k] += d * d;                                               \
                if (want_b)                                                    \
                        lb[k] += bj * bj;                                      \
        } while (0)
        for (; i + GOSSIP_ROBUST_LANES <= n; i += GOSSIP_ROBUST_LANES)
                for (size_t k = 0; k < GOSSIP_ROBUST_LANES; k++)
                        RMS_ELEMENT(i + k, k);
        for (size_t k = 0; i < n; i++, k++)
                RMS_ELEMENT(i, k);
#undef RMS_ELEMENT
        *sab = 0.0;
        *sb = 0.0;
        for (size_t k = 0; k < GOSSIP_ROBUST_LANES; k++) {
                *sab += lab[k];
                *sb += lb[k];
        }
}

static float rms_of(double sum, size_t n)
{
        if (!isfinite(sum))
                return NAN;
        return (float)sqrt(sum / (double)n);
}

GN_HOT float gossip_robust_rms(const float *a, const float *b, size_t n)
{
        double sab, sb;

        if (n == 0)
                return 0.0f;
        if (b)
                sumsq(a, b, n, &sab, &sb, 0);
        else
                sumsq(a, NULL, n, &sab, &sb, 0);
        return rms_of(sab, n);
}

GN_HOT float gossip_robust_rms_both(const float *a, const float *b, size_t n,
                                    float *rms_b)
{
        double sab, sb;

        if (n == 0) {
                *rms_b = 0.0f;
                return 0.0f;
        }
        sumsq(a, b, n, &sab, &sb, 1);
        *rms_b = rms_of(sb, n);
        return rms_of(sab, n);
}

float gossip_robust_median(const struct gossip_robust_stat *s)
{
        float v[GOSSIP_ROBUST_MEDIAN_LEN];
        uint32_t n =
            s->n < GOSSIP_ROBUST_MEDIAN_LEN ? s->n : GOSSIP_ROBUST_MEDIAN_LEN;

        if (n == 0)
                return NAN;
        memcpy(v, s->d, n * sizeof(float));
        for (uint32_t i = 1; i < n; i++) { /* insertion sort: n <= 32 */
                float x = v[i];
                uint32_t j = i;

                for (; j > 0 && v[j - 1] > x; j--)
                        v[j] = v[j - 1];
                v[j] = x;
        }
        return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

float gossip_robust_radius(const struct gossip_robust_cfg *c,
                           const struct gossip_robust_stat *s, float ref_rms)
{
        float lo = c->floor * ref_rms, hi = c->cap * ref_rms, r;

        if (!(ref_rms > 0.0f) || !isfinite(ref_rms))
                return INFINITY; /* nothing to compare with */
        if (s->n < GOSSIP_ROBUST_WARMUP)
                return hi;
        r = c->mult * gossip_robust_median(s);
        return r < lo ? lo : r > hi ? hi : r;
}

void gossip_robust_judge(const struct gossip_robust_cfg *c,
                         const struct gossip_robust_stat *s,
                         const float *theirs, const float *mine, float ref_rms,
                         size_t n, struct gossip_robust_verdict *v)
{
        gossip_robust_judge_dist(c, s, gossip_robust_rms(theirs, mine, n),
                                 ref_rms, v);
}

void gossip_robust_judge_dist(const struct gossip_robust_cfg *c,
                              const struct gossip_robust_stat *s, float dist,
                              float ref_rms, struct gossip_robust_verdict *v)
{
        v->dist = dist;
        v->radius = gossip_robust_radius(c, s, ref_rms);
        v->scale = 1.0f;
        if (!isfinite(v->dist)) {
                /* mine is finite (the trainer's health check), so theirs
                 * is not */
                v->reason = GOSSIP_ROBUST_NONFINITE;
        } else if (v->dist > c->refuse * v->radius) {
                v->reason = GOSSIP_ROBUST_FAR;
        } else if (v->dist > v->radius) {
                v->reason = GOSSIP_ROBUST_CLIPPED;
                v->scale = v->radius / v->dist;
        } else {
                v->reason = GOSSIP_ROBUST_ACCEPTED;
        }
}

void gossip_robust_note(struct gossip_robust_stat *s,
                        const struct gossip_robust_verdict *v)
{
        if (v->reason != GOSSIP_ROBUST_ACCEPTED || !isfinite(v->dist))
                return;
        s->d[s->next] = v->dist;
        s->next = (s->next + 1) % GOSSIP_ROBUST_MEDIAN_LEN;
        if (s->n < GOSSIP_ROBUST_MEDIAN_LEN)
                s->n++;
}

GN_HOT void gossip_robust_clip(float *theirs, const float *mine, size_t n,
                               float scale)
{
        for (size_t i = 0; i < n; i++) {
                float m = mine ? mine[i] : 0.0f;

                theirs[i] = m + scale * (theirs[i] - m);
        }
}

const struct gossip_robust_peer *
gossip_robust_peer_find(const struct gossip_robust_peers *t,
                        const uint8_t key[GOSSIP_KEY_BYTES])
{
        for (size_t i = 0; i < t->n; i++)
                if (memcmp(t->p[i].key, key, GOSSIP_KEY_BYTES) == 0)
                        return &t->p[i];
        return NULL;
}

struct gossip_robust_peer *
gossip_robust_peer_get(struct gossip_robust_peers *t,
                       const uint8_t key[GOSSIP_KEY_BYTES])
{
        struct gossip_robust_peer *p;

        for (size_t i = 0; i < t->n; i++)
                if (memcmp(t->p[i].key, key, GOSSIP_KEY_BYTES) == 0)
                        return &t->p[i];
        if (t->n == GOSSIP_ROBUST_PEERS)
                return NULL;
        p = &t->p[t->n++];
        memset(p, 0, sizeof(*p));
        memcpy(p->key, key, GOSSIP_KEY_BYTES);
        return p;
}

void gossip_robust_peer_note(struct gossip_robust_peer *p, int reason)
{
        const uint32_t mask = (1u << GOSSIP_ROBUST_HISTORY) - 1u;
        int bad =
            reason == GOSSIP_ROBUST_FAR || reason == GOSSIP_ROBUST_NONFINITE;

        if (reason < 0 || reason >= GOSSIP_ROBUST_REASONS)
                return;

        p->count[reason]++;
        if (reason > GOSSIP_ROBUST_NONFINITE && reason != GOSSIP_ROBUST_SWAYED)
                return; /* who and when, not what: not judged */
        p->hist = ((p->hist << 1) | (uint32_t)bad) & mask;
        if (p->nhist < GOSSIP_ROBUST_HISTORY)
                p->nhist++;
}

int gossip_robust_peer_once(struct gossip_robust_peer *p, uint64_t step,
                            uint64_t lo)
{
        for (uint32_t i = 0; i < p->seen_n; i++)
                if (p->seen_step[i] == step && p->seen_lo[i] == lo)
                        return 0;
        p->seen_step[p->seen_next] = step;
        p->seen_lo[p->seen_next] = lo;
        p->seen_next = (p->seen_next + 1) % GOSSIP_ROBUST_SEEN;
        if (p->seen_n < GOSSIP_ROBUST_SEEN)
                p->seen_n++;
        return 1;
}

void gossip_robust_peer_merged(struct gossip_robust_peer *p, uint64_t step)
{
        if (step + 1 > p->merged)
                p->merged = step + 1;
}

size_t gossip_robust_quarantine(struct gossip_robust_peers *t, uint64_t since,
                                uint64_t now, uint64_t steps)
{
        uint64_t until = now + steps < now ? UINT64_MAX : now + steps;
        size_t k = 0;

        for (size_t i = 0; i < t->n; i++) {
                struct gossip_robust_peer *p = &t->p[i];

                if (!p->merged || p->merged - 1 <= since)
                        continue;
                if (until > p->refuse_until)
                        p->refuse_until = until;
                k++;
        }
        return k;
}

int gossip_robust_peer_refused(const struct gossip_robust_peer *p,
                               uint64_t step)
{
        return step < p->refuse_until;
}

uint32_t gossip_robust_peer_bad(const struct gossip_robust_peer *p)
{
        return (uint32_t)__builtin_popcount(p->hist);
}

int gossip_robust_peer_suspect(const struct gossip_robust_peer *p)
{
        return gossip_robust_peer_bad(p) > GOSSIP_ROBUST_SUSPECT_BAD ||
               p->named;
}

/* ---- a peer's accumulated influence (sway) ------------------------------ */

static const double sway_lambda = 1.0 - 1.0 / GOSSIP_ROBUST_SWAY_TURNS;

size_t gossip_robust_sway_stride(size_t nparams)
{
        size_t s = (nparams + GOSSIP_ROBUST_SWAY_SAMPLES - 1) /
                   GOSSIP_ROBUST_SWAY_SAMPLES;

        return s ? s : 1;
}

size_t gossip_robust_sway_first(size_t stride, size_t lo)
{
        return (lo + stride - 1) / stride * stride;
}

void gossip_robust_sway_measure(const struct gossip_robust_sway *s,
                                size_t stride, const float *theirs,
                                const float *mine, const float *prog, size_t lo,
                                size_t count, struct gossip_robust_sway_turn *t)
{
        double dd = 0.0, ad = 0.0, gd = 0.0, gg = 0.0;

        for (size_t g = gossip_robust_sway_first(stride, lo); g < lo + count;
             g += stride) {
                double d = (double)theirs[g - lo] - (double)mine[g - lo];

                dd += d * d;
                ad += (double)s->a[g / stride] * d;
                if (prog) {
                        double p = prog[g / stride];

                        gd += p * d;
                        gg += p * p;
                }
        }
        t->dd = dd;
        t->ad = ad;
        t->gd = gd;
        t->gg = gg;
}

void gossip_robust_sway_sample(const float *params, size_t n, size_t stride,
                               float *out)
{
        for (size_t g = 0; g < n; g += stride)
                out[g / stride] = params[g];
}

float gossip_robust_sway_scale(const struct gossip_robust_sway *s,
                               const struct gossip_robust_sway_turn *t,
                               float bound)
{
        const double l = sway_lambda;
        /* q(alpha) = k2 alpha^2 + k1 alpha + k0: |l A + alpha d|^2 less
         * the bound's allowance */
        double k2 = t->dd, k1 = 2.0 * l * t->ad,
               k0 = l * l * s->aa - bound * (l * l * s->e + t->dd);
        double disc, hi, least;

        if (!(k2 > 0.0) || !isfinite(k2) || !isfinite(k1))
                return 1.0f;
        if (k2 + k1 + k0 <= 0.0)
                return 1.0f;
        disc = k1 * k1 - 4.0 * k2 * k0;
        if (disc >= 0.0) {
                hi = (-k1 + sqrt(disc)) / (2.0 * k2);
                if (hi >= 0.0 && hi < 1.0)
                        return (float)hi;
        }
        least = -k1 / (2.0 * k2);
        return (float)(least < 0.0 ? 0.0 : least > 1.0 ? 1.0 : least);
}

void gossip_robust_sway_add(struct gossip_robust_sway *s, size_t stride,
                            const float *theirs, const float *mine, size_t lo,
                            size_t count,
                            const struct gossip_robust_sway_turn *t,
                            float alpha)
{
        const float l = (float)sway_lambda;
        double aa = 0.0;

        for (size_t i = 0; i < GOSSIP_ROBUST_SWAY_SAMPLES; i++)
                s->a[i] *= l;
        for (size_t g = gossip_robust_sway_first(stride, lo); g < lo + count;
             g += stride)
                s->a[g / stride] += alpha * (theirs[g - lo] - mine[g - lo]);
        for (size_t i = 0; i < GOSSIP_ROBUST_SWAY_SAMPLES; i++)
                aa += (double)s->a[i] * s->a[i];
        s->aa = aa;
        s->e = sway_lambda * sway_lambda * s->e + t->dd;
        s->turns++;
        s->scaled += alpha < 1.0f;
}

float gossip_robust_sway_consistency(const struct gossip_robust_sway *s)
{
        return s->e > 0.0 ? (float)(s->aa / s->e) : 0.0f;
}

/* ---- naming the liar: the evidence --------------------------------------- */

void gossip_robust_evidence_of(const struct gossip_robust_sway *s,
                               const struct gossip_robust_sway_turn *t,
                               float x[GOSSIP_ROBUST_EVS])
{
        x[GOSSIP_ROBUST_EV_PULL] = t->gg > 0.0 && t->dd > 0.0
                                       ? (float)(-t->gd / sqrt(t->gg * t->dd))
                                       : NAN;
        x[GOSSIP_ROBUST_EV_PUSH] = s->aa > 0.0 && t->dd > 0.0
                                       ? (float)(t->ad / sqrt(s->aa * t->dd))
                                       : NAN;
}

void gossip_robust_evidence_add(struct gossip_robust_evidence *e,
                                const float x[GOSSIP_ROBUST_EVS])
{
        for (int k = 0; k < GOSSIP_ROBUST_EVS; k++) {
                double d;

                if (!isfinite(x[k]))
                        continue;
                e->n[k]++;
                d = x[k] - e->mean[k];
                e->mean[k] += d / (double)e->n[k];
                e->m2[k] += d * (x[k] - e->mean[k]);
        }
}

/* Welch t of figure k of a against b; NaN with fewer than NAME_TURNS
 * turns on either side. */
static float welch(const struct gossip_robust_evidence *a,
                   const struct gossip_robust_evidence *b, int k, float margin)
{
        double na = (double)a->n[k], nb = (double)b->n[k], se;

        if (na < GOSSIP_ROBUST_NAME_TURNS || nb < GOSSIP_ROBUST_NAME_TURNS)
                return NAN;
        se = a->m2[k] / (na - 1.0) / na + b->m2[k] / (nb - 1.0) / nb;
        if (!(se > 0.0))
                return NAN;
        return (float)((a->mean[k] - b->mean[k] - margin) / sqrt(se));
}

float gossip_robust_evidence_t(const struct gossip_robust_peers *t,
                               const struct gossip_robust_peer *p, int stat,
                               float margin)
{
        float least = NAN;
        int others = 0;

        if (stat < 0 || stat >= GOSSIP_ROBUST_EVS)
                return NAN;
        for (size_t i = 0; i < t->n; i++) {
                float x;

                if (&t->p[i] == p)
                        continue;
                x = welch(&p->ev, &t->p[i].ev, stat, margin);
                if (!isfinite(x))
                        continue;
                others++;
                if (!(x >= least))
                        least = x;
        }
        return others >= GOSSIP_ROBUST_NAME_OTHERS ? least : NAN;
}

/* The least difference of figure k's mean, p's less each other
 * sender's with NAME_TURNS turns on both sides; NaN when none has. */
static float least_difference(const struct gossip_robust_peers *t,
                              const struct gossip_robust_peer *p, int k)
{
        float least = NAN;

        if (p->ev.n[k] < GOSSIP_ROBUST_NAME_TURNS)
                return NAN;
        for (size_t i = 0; i < t->n; i++) {
                float x;

                if (&t->p[i] == p || t->p[i].ev.n[k] < GOSSIP_ROBUST_NAME_TURNS)
                        continue;
                x = (float)(p->ev.mean[k] - t->p[i].ev.mean[k]);
                if (!(x >= least))
                        least = x;
        }
        return least;
}

size_t gossip_robust_name(struct gossip_robust_peers *t,
                          const struct gossip_robust_cfg *c)
{
        const float name_t = c->name_t;
        struct gossip_robust_peer *top = NULL;

        for (size_t i = 0; i < t->n; i++) {
                struct gossip_robust_peer *p = &t->p[i];

                p->evidence = NAN;
                for (int k = 0; k < GOSSIP_ROBUST_EVS; k++) {
                        int names = !isnan(c->name_margin[k]);

                        /* a figure that does not name is shown plain */
                        p->ev_t[k] = gossip_robust_evidence_t(
                            t, p, k, names ? c->name_margin[k] : 0.0f);
                        p->ev_d[k] = least_difference(t, p, k);
                        if (names && isfinite(p->ev_t[k]) &&
                            !(p->ev_t[k] <= p->evidence))
                                p->evidence = p->ev_t[k];
                }
                if (isfinite(p->evidence) &&
                    (!top || p->evidence > top->evidence))
                        top = p;
        }
        /* one named at a time: the one that stands out most */
        for (size_t i = 0; i < t->n; i++) {
                struct gossip_robust_peer *p = &t->p[i];

                if (p != top || !(name_t > 0.0f))
                        p->named = 0;
                else if (p->evidence >= name_t)
                        p->named = 1;
                else if (p->evidence < 0.5f * name_t)
                        p->named = 0;
        }
        return top && top->named ? 1 : 0;
}
