/*
 * hostile_peer.c - a trusted peer that lies: it holds a key from the peers
 * file, joins a real cluster on loopback like any gossipnode, and for the
 * whole run pushes parameter slices that are wrong in every way we know:
 *
 *   huge     every value 1e30 (fp32 payload)
 *   flip     the cluster's trained model, sign-flipped
 *   noise    N(0,1) values
 *   scale10  the trained model x 10
 *   stale    the step-0 model (same --seed as the cluster), labelled step 0
 *   nan      the trained model with NaN and Inf in it
 *
 * It learns "the trained model" by averaging in the slices the honest
 * nodes send it (it is in their schedule like anyone; it never trains).
 * Every PERIOD_MS it sends, to every live peer, the next attack in turn
 * twice: once at a step for which the schedule names it that peer's
 * sender (so only the content guards can stop it) and once at the peer's
 * next step (refused as not_partner when it is not the sender then).
 *
 *   usage: hostile_peer ATTACKS SECONDS [gossipnode options...]
 *   ATTACKS: comma list of the names above and below (NAME or NAME:PARAM),
 *   or "all" (the six crude ones); or "NAME@STEP" for a
 *   one-time poisoning: that attack, sent once to every live peer as soon
 *   as one has reached STEP, then nothing more (the model-health test);
 *   or "stop": a forged cluster-wide stop, sent at once: as soon as two
 *   peers are alive it leaves with a TARGET reason claiming 99% at step
 *   0 in its own name (the strongest lie: a vote, gossip/stop.h), then
 *   sends nothing more
 *
 * The attacks designed for the defence (issue 32, gossip/robust.h): each
 * is sent only as the scheduled sender, once per turn of ours (a round
 * due at step s for which the schedule names us peer m's sender), so
 * only the content guards can stop it; s is our newest such turn at or
 * below the newest step we know (m has posted its own copy of step s,
 * which m then judges and averages our slice against). They answer the
 * slices the honest nodes sent us, taken out of the hand-off box as they
 * come (node_handoff_drain_params, not averaged there) and kept per
 * sender and part: base(m) is
 * m's newest slice of the turn's part, else the newest any honest node
 * sent of it, else our running average. RMS(x) is the per-element root
 * mean square over the slice; u a fixed N(0,1) direction (one seed, the
 * whole run) scaled to RMS 1 on the slice; mu and sigma the per-element
 * mean and population standard deviation of the newest slice of that
 * part from each honest sender.
 *
 *   drift:F       base(m) + F RMS(base) u: a constant direction just inside
 *                 the radius (default F 0.015, the 1-2%, under
 *                 the FLOOR 0.02 of RMS that the radius never goes below)
 *   drift_adapt   the same with F = 0.9 r^, r^ the radius the liar infers:
 *                 3 x the running median (gossip_robust_median, the
 *                 defence's own rule) of the honest replicas'
 *                 disagreement as it can see it: RMS(slice of j -
 *                 newest slice of the part from another sender k)/RMS,
 *                 less (in quadrature) k's movement over the steps
 *                 between them at j's own pace per round (learn_radius);
 *                 within [FLOOR, CAP], FLOOR until WARMUP are recorded
 *   cliprider     the same with F = 2 r^: in the clipped band (radius,
 *                 4 radius), at its geometric middle so a misjudged
 *                 radius still clips rather than refuses: each turn is
 *                 clipped to the radius and moves m the most allowed, in
 *                 one direction
 *   shrink:F      (1 - F) base(m): a slow shrink toward zero (default 0.01)
 *   alie:Z        mu + Z sigma (A Little Is Enough, Baruch et al. 2019:
 *                 the honest mean shifted by Z standard deviations per
 *                 coordinate; default Z 1)
 *   ipm:E         base(m) - E D, D the honest nodes' mean update per
 *                 round: for each sender j with two slices of the part,
 *                 (newest - previous) x K / (their step difference),
 *                 averaged over j (inner-product manipulation, Xie et al.
 *                 2020: -E x the honest mean update, here applied to
 *                 m's own model, so m's averaging undoes its training;
 *                 default E 4: with weight 1/2 one turn takes back two
 *                 rounds of progress)
 *   dissensus:E   base(m) - E (a - base(m)), a the mean of the newest
 *                 slices of the part from the honest senders other than
 *                 m (He, Karimireddy, Jaggi 2022: push each honest node
 *                 away from its neighbours' average; default E 1)
 *   echo          base(m): m's own slice back, unchanged
 *   silent        nothing: a member in the schedule that never sends (the
 *                 cost of its presence alone, to compare the others with)
 *
 * Parameters are fractions or factors (0 < value <= 100); a list may mix
 * these with the crude ones above (one attack per tick, in turn). A
 * designed attack written NAME[:PARAM]*C sends each turn's lie C times
 * (1 <= C <= MAX_COPIES; 1 when not written): a receiver that averages
 * every copy of one step's slice (each against the same copy of its
 * own) takes the lie C times over.
 *
 * Prints what it sent, per attack, on exit (0; 1 on set-up errors); for
 * the designed attacks also the mean RMS(lie - base)/RMS(base), the
 * inferred radius and where the bases came from. Used by
 * tests/node/test_hostile_run.py and tests/node/hostile_bench.py; see
 * docs/reliability.md and docs/history/liar-attacks.md.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "cluster/cluster.h"
#include "gossip/codec.h"
#include "service/evlog.h"
#include "nn/nn.h"
#include "config/options.h"
#include "cluster/view.h"
#include "train/handoff.h"
#include "gossip/robust.h"
#include "gossip/schedule.h"

/* A lie every 25 ms to each peer (a step takes ~20-100 ms here); our
 * turns looked for 16 steps ahead; "stale" labelled 200 steps back. The
 * designed attacks look back LOOKBACK_STEPS for our newest turn (a peer
 * of 8 has us as its sender about once in 7 rounds of K = 10), and keep
 * the slices of at most MAX_PEERS senders. */
enum {
        PERIOD_MS = 25,
        AHEAD_STEPS = 16,
        STALE_STEPS = 200,
        LOOKBACK_STEPS = 160,
        MAX_PEERS = 16,
        MAX_COPIES = 8,
};
enum attack {
        HUGE,
        FLIP,
        NOISE,
        SCALE10,
        STALE,
        NANV,
        NCRUDE, /* the designed ones follow */
        DRIFT = NCRUDE,
        DRIFT_ADAPT,
        CLIPRIDER,
        SHRINK,
        ALIE,
        IPM,
        DISSENSUS,
        ECHO_BACK,
        SILENT,
        NATTACKS,
};
static const char *attack_names[NATTACKS] = {
    "huge", "flip",  "noise",       "scale10",   "stale",
    "nan",  "drift", "drift_adapt", "cliprider", "shrink",
    "alie", "ipm",   "dissensus",   "echo",      "silent"};
/* NAME's parameter when NAME:PARAM does not give one (0: takes none). */
static const double attack_param[NATTACKS] = {[DRIFT] = 0.015,
                                              [SHRINK] = 0.01,
                                              [ALIE] = 1.0,
                                              [IPM] = 4.0,
                                              [DISSENSUS] = 1.0};
/* drift_adapt stays at ADAPT_IN x the inferred radius; cliprider rides at
 * RIDE x it (inside (1, REFUSE)). */
static const double ADAPT_IN = 0.9, RIDE = 2.0;

/* What one honest sender sent us: its newest and previous slice of each
 * part (full-model arrays, a part at its partition's offset). */
struct seen_peer {
        uint8_t key[GOSSIP_KEY_BYTES];
        char name[GOSSIP_NAME_MAX];
        float *last, *prev;
        uint64_t *last_step, *prev_step; /* per part; UINT64_MAX: none */
        uint64_t turn;                   /* our newest turn answered */
        int answered;                    /* turn is set */
        uint64_t turns;                  /* turns answered */
};

/* Where the designed attacks' bases came from, and what they sent. */
enum { BASE_OWN, BASE_OTHER, BASE_AVG, NBASES };
struct designed_stats {
        double offset_sum; /* sum of RMS(lie - base) / RMS(base) */
        uint64_t offset_n;
        uint64_t base[NBASES];
};

struct hostile {
        struct node_cluster *c;
        struct node_options o;
        uv_timer_t tick, end;
        uv_signal_t term;
        struct gossip_codec enc; /* fp32: exact lies */
        float *init, *copy, *lie, *dir;
        size_t n;
        uint8_t *buf;
        size_t cap;
        int on[NATTACKS];
        double param[NATTACKS];
        int copies[NATTACKS]; /* frames per turn (designed attacks) */
        int next;
        int designed;     /* a designed attack is on: slices are drained */
        uint64_t once_at; /* NAME@STEP: fire once at STEP (0: every tick) */
        int fired;
        int exchanging; /* told members we exchange (end_loading) */
        int stop_lie;   /* "stop": leave with a forged TARGET reason */
        uint64_t sent[NATTACKS], sent_partner[NATTACKS];
        struct designed_stats ds[NATTACKS];
        struct seen_peer peers[MAX_PEERS];
        size_t npeers;
        uint64_t newest_rx; /* the newest step of a slice received */
        /* the radius the liar infers: the defence's running median over
         * RMS(received - our average) / RMS(received) */
        struct gossip_robust_stat est;
        uint64_t rng;
};

static uint64_t rnd(uint64_t *s)
{
        uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
}

static float normal(uint64_t *s)
{
        double u1 = ((double)(rnd(s) >> 11) + 1.0) / 9007199254740993.0;
        double u2 = (double)(rnd(s) >> 11) / 9007199254740992.0;

        return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static const struct gossip_plan_cfg *plan_of(struct hostile *h)
{
        return node_handoff_plan(node_cluster_handoff(h->c));
}

/* ---- the crude attacks ------------------------------------------------ */

/* The crude lie of kind a for [lo, lo + count) into h->lie. */
static void make_lie(struct hostile *h, int a, size_t lo, size_t count)
{
        for (size_t i = 0; i < count; i++) {
                float m = h->copy[lo + i];

                switch (a) {
                case HUGE:
                        h->lie[i] = 1e30f;
                        break;
                case FLIP:
                        h->lie[i] = -m;
                        break;
                case NOISE:
                        h->lie[i] = normal(&h->rng);
                        break;
                case SCALE10:
                        h->lie[i] = 10.0f * m;
                        break;
                case STALE:
                        h->lie[i] = h->init[lo + i];
                        break;
                default:
                        h->lie[i] = m;
                }
        }
}

/* Encode h->lie as step's slice (NaN/Inf patched into the fp32 body for
 * "nan", which the encoder itself refuses to write). 0 or a GOSSIP_E*
 * code. */
static int encode_slice(struct hostile *h, int a, uint32_t part, size_t count,
                        uint64_t step, size_t *len)
{
        int rc = gossip_codec_encode_part(&h->enc, part, h->lie, count, step,
                                          h->buf, h->cap, len);

        if (rc == 0 && a == NANV) {
                uint32_t nan = 0x7fc00000u, inf = 0x7f800000u;
                uint8_t *body = h->buf + GOSSIP_CODEC_HEADER_BYTES;

                memcpy(body, &nan, 4);
                memcpy(body + 4 * (count / 2), &inf, 4);
        }
        return rc;
}

static int encode_lie(struct hostile *h, int a, uint64_t step, size_t *len)
{
        size_t lo, count;
        uint32_t part = gossip_plan_slice(plan_of(h), step, &lo, &count);

        make_lie(h, a, lo, count);
        return encode_slice(h, a, part, count, step, len);
}

/* The first step in [from, from + span) at which the schedule names us
 * member m's sender; UINT64_MAX if none. */
static uint64_t our_turn(struct hostile *h, const uint8_t *key, uint64_t from,
                         uint64_t span)
{
        struct node_view *v = node_cluster_view(h->c);

        /* the receiver's own check (node/cluster/view.h), asked for us as
         * sender */
        for (uint64_t t = from; t < from + span; t++)
                if (gossip_plan_due(plan_of(h), t) &&
                    node_view_is_sender(v, t, v->pk, key))
                        return t;
        return UINT64_MAX;
}

static void push(struct hostile *h, const struct gossip_member_info *m, int a)
{
        const struct gossip_plan_cfg *p = plan_of(h);
        uint64_t steps[2], k = p->avg_every ? p->avg_every : 1;
        size_t len;

        /* the next round boundary after the peer's step, and our turn */
        steps[0] = (m->step / k + 1) * k;
        steps[1] = our_turn(h, m->key, steps[0], AHEAD_STEPS);
        if (a == STALE) {
                /* labelled step 0, and at a turn of ours long past */
                steps[0] = 0;
                steps[1] = m->step > STALE_STEPS
                               ? our_turn(h, m->key, m->step - STALE_STEPS,
                                          AHEAD_STEPS * 4)
                               : UINT64_MAX;
        }
        for (int i = 0; i < 2; i++) {
                if (steps[i] == UINT64_MAX)
                        continue;
                if (encode_lie(h, a, steps[i], &len) == 0 &&
                    gossip_send_app(node_cluster_view(h->c)->g, m->key,
                                    GOSSIP_APP_PARAMS, steps[i], h->buf,
                                    len) == 0) {
                        h->sent[a]++;
                        h->sent_partner[a] += i == 1;
                }
        }
}

/* ---- what the honest nodes sent us ------------------------------------ */

static struct seen_peer *peer_get(struct hostile *h, const uint8_t *key)
{
        uint32_t parts = plan_of(h)->parts;
        struct seen_peer *p;

        for (size_t i = 0; i < h->npeers; i++)
                if (memcmp(h->peers[i].key, key, GOSSIP_KEY_BYTES) == 0)
                        return &h->peers[i];
        if (h->npeers == MAX_PEERS)
                return NULL;
        p = &h->peers[h->npeers];
        p->last = malloc(h->n * sizeof(float));
        p->prev = malloc(h->n * sizeof(float));
        p->last_step = malloc(parts * sizeof(uint64_t));
        p->prev_step = malloc(parts * sizeof(uint64_t));
        if (!p->last || !p->prev || !p->last_step || !p->prev_step) {
                free(p->last);
                free(p->prev);
                free(p->last_step);
                free(p->prev_step);
                memset(p, 0, sizeof(*p));
                return NULL;
        }
        for (uint32_t i = 0; i < parts; i++)
                p->last_step[i] = p->prev_step[i] = UINT64_MAX;
        memcpy(p->key, key, GOSSIP_KEY_BYTES);
        h->npeers++;
        return p;
}

/* Learn the radius from v, p's slice of part at step (RMS ref), before
 * it is kept: move = p's own movement per round since its last slice of
 * the part; D = the distance to the newest slice of the part another
 * sender k sent (at step s_k). Honest replicas' disagreement, what the
 * defence's median sees, is D less k's movement over |step - s_k|, the
 * two taken as orthogonal (movement is common to the replicas,
 * disagreement is between them). */
static void learn_radius(struct hostile *h, const struct seen_peer *p,
                         uint32_t part, uint64_t step, size_t lo,
                         const float *v, size_t count, float ref)
{
        struct gossip_robust_verdict verdict = {0};
        const struct seen_peer *k = NULL;
        double K = plan_of(h)->avg_every ? plan_of(h)->avg_every : 1;
        double move, d, gap;

        move = gossip_robust_rms(v, p->last + lo, count) / ref /
               ((double)(step - p->last_step[part]) / K);
        for (size_t j = 0; j < h->npeers; j++)
                if (&h->peers[j] != p &&
                    h->peers[j].last_step[part] != UINT64_MAX &&
                    (!k || h->peers[j].last_step[part] > k->last_step[part]))
                        k = &h->peers[j];
        if (!k)
                return;
        d = gossip_robust_rms(v, k->last + lo, count) / ref;
        gap = move * fabs((double)step - (double)k->last_step[part]) / K;
        verdict.reason = GOSSIP_ROBUST_ACCEPTED;
        verdict.dist = (float)sqrt(d * d > gap * gap ? d * d - gap * gap : 0.0);
        gossip_robust_note(&h->est, &verdict);
}

/* A slice drained from the inbox: average it into our copy (weight 1/2,
 * as node_handoff_average would), learn the radius from it and keep it
 * as its sender's newest of that part. */
static void on_slice(void *arg, const uint8_t from[GOSSIP_KEY_BYTES],
                     uint64_t step, size_t lo, const float *v, size_t count)
{
        struct hostile *h = arg;
        struct seen_peer *p = peer_get(h, from);
        uint32_t part;
        float ref;

        if (!gossip_plan_part_of(plan_of(h), lo, count, &part))
                return;
        for (size_t i = 0; i < count; i++)
                h->copy[lo + i] = 0.5f * (h->copy[lo + i] + v[i]);
        if (step > h->newest_rx)
                h->newest_rx = step;
        if (!p ||
            (p->last_step[part] != UINT64_MAX && step <= p->last_step[part]))
                return;
        ref = gossip_robust_rms(v, NULL, count);
        if (p->last_step[part] != UINT64_MAX && ref > 0.0f)
                learn_radius(h, p, part, step, lo, v, count, ref);
        if (p->last_step[part] != UINT64_MAX) {
                memcpy(p->prev + lo, p->last + lo, count * sizeof(float));
                p->prev_step[part] = p->last_step[part];
        }
        memcpy(p->last + lo, v, count * sizeof(float));
        p->last_step[part] = step;
}

/* The radius the liar infers, in units of RMS(slice). */
static double radius_est(const struct hostile *h)
{
        const struct gossip_robust_cfg *c = &gossip_robust_params_cfg;
        double r;

        if (h->est.n < GOSSIP_ROBUST_WARMUP)
                return c->floor;
        r = c->mult * gossip_robust_median(&h->est);
        return r < c->floor ? c->floor : r > c->cap ? c->cap : r;
}

/* ---- the designed attacks --------------------------------------------- */

/* base(m) for part (see the file's top): m's newest slice of it, else
 * the newest any sender sent, else our average. */
static const float *base_of(struct hostile *h, const struct seen_peer *m,
                            uint32_t part, size_t lo, int *from)
{
        const struct seen_peer *best = NULL;

        if (m && m->last_step[part] != UINT64_MAX) {
                *from = BASE_OWN;
                return m->last + lo;
        }
        for (size_t j = 0; j < h->npeers; j++) {
                const struct seen_peer *q = &h->peers[j];

                if (q->last_step[part] != UINT64_MAX &&
                    (!best || q->last_step[part] > best->last_step[part]))
                        best = q;
        }
        *from = best ? BASE_OTHER : BASE_AVG;
        return best ? best->last + lo : h->copy + lo;
}

/* base + f RMS(base) u into h->lie. */
static void along_dir(struct hostile *h, const float *base, size_t lo,
                      size_t count, double f)
{
        double s = f * gossip_robust_rms(base, NULL, count) /
                   gossip_robust_rms(h->dir + lo, NULL, count);

        for (size_t i = 0; i < count; i++)
                h->lie[i] = base[i] + (float)(s * h->dir[lo + i]);
}

/* ALIE: mu + z sigma over the honest senders' newest slices of part. */
static void alie(struct hostile *h, const float *base, uint32_t part, size_t lo,
                 size_t count, double z)
{
        for (size_t i = 0; i < count; i++) {
                double sum = 0.0, sq = 0.0, mu, var;
                unsigned k = 0;

                for (size_t j = 0; j < h->npeers; j++) {
                        const struct seen_peer *q = &h->peers[j];

                        if (q->last_step[part] == UINT64_MAX)
                                continue;
                        sum += q->last[lo + i];
                        sq += (double)q->last[lo + i] * q->last[lo + i];
                        k++;
                }
                if (!k) {
                        h->lie[i] = base[i];
                        continue;
                }
                mu = sum / k;
                var = sq / k - mu * mu;
                h->lie[i] = (float)(mu + z * sqrt(var > 0.0 ? var : 0.0));
        }
}

/* IPM: base - e D, D the honest mean update per round of part. */
static void ipm(struct hostile *h, const float *base, uint32_t part, size_t lo,
                size_t count, double e)
{
        const struct gossip_plan_cfg *p = plan_of(h);
        double k = p->avg_every ? p->avg_every : 1, w[MAX_PEERS];
        unsigned nj = 0;

        for (size_t j = 0; j < h->npeers; j++) {
                const struct seen_peer *q = &h->peers[j];

                w[j] = 0.0;
                if (q->prev_step[part] == UINT64_MAX)
                        continue;
                w[j] = k / (double)(q->last_step[part] - q->prev_step[part]);
                nj++;
        }
        for (size_t i = 0; i < count; i++) {
                double d = 0.0;

                for (size_t j = 0; nj && j < h->npeers; j++)
                        if (w[j] > 0.0)
                                d += w[j] * (h->peers[j].last[lo + i] -
                                             h->peers[j].prev[lo + i]);
                h->lie[i] = (float)(base[i] - (nj ? e * d / nj : 0.0));
        }
}

/* Dissensus: base - e (a - base), a the mean of the other senders. */
static void dissensus(struct hostile *h, const struct seen_peer *m,
                      const float *base, uint32_t part, size_t lo, size_t count,
                      double e)
{
        for (size_t i = 0; i < count; i++) {
                double a = 0.0;
                unsigned k = 0;

                for (size_t j = 0; j < h->npeers; j++) {
                        const struct seen_peer *q = &h->peers[j];

                        if (q == m || q->last_step[part] == UINT64_MAX)
                                continue;
                        a += q->last[lo + i];
                        k++;
                }
                h->lie[i] =
                    k ? (float)(base[i] - e * (a / k - base[i])) : base[i];
        }
}

/* The designed lie of kind a to m for part [lo, lo + count) into
 * h->lie, its offset from base(m) counted. */
static void make_designed(struct hostile *h, int a, const struct seen_peer *m,
                          uint32_t part, size_t lo, size_t count)
{
        double x = h->param[a], rb;
        int from;
        const float *base = base_of(h, m, part, lo, &from);

        switch (a) {
        case DRIFT:
                along_dir(h, base, lo, count, x);
                break;
        case DRIFT_ADAPT:
                along_dir(h, base, lo, count, ADAPT_IN * radius_est(h));
                break;
        case CLIPRIDER:
                along_dir(h, base, lo, count, RIDE * radius_est(h));
                break;
        case SHRINK:
                for (size_t i = 0; i < count; i++)
                        h->lie[i] = (float)((1.0 - x) * base[i]);
                break;
        case ALIE:
                alie(h, base, part, lo, count, x);
                break;
        case IPM:
                ipm(h, base, part, lo, count, x);
                break;
        case DISSENSUS:
                dissensus(h, m, base, part, lo, count, x);
                break;
        default: /* ECHO_BACK */
                memcpy(h->lie, base, count * sizeof(float));
        }
        h->ds[a].base[from]++;
        rb = gossip_robust_rms(base, NULL, count);
        if (rb > 0.0) {
                h->ds[a].offset_sum +=
                    gossip_robust_rms(h->lie, base, count) / rb;
                h->ds[a].offset_n++;
        }
}

/* Our newest turn as mi's sender at or below upto, within LOOKBACK_STEPS;
 * UINT64_MAX if none. */
static uint64_t last_turn(struct hostile *h, const uint8_t *key, uint64_t upto)
{
        struct node_view *v = node_cluster_view(h->c);

        for (uint64_t t = upto + 1; t-- > 0 && t + LOOKBACK_STEPS > upto;)
                if (gossip_plan_due(plan_of(h), t) &&
                    node_view_is_sender(v, t, v->pk, key))
                        return t;
        return UINT64_MAX;
}

/* A designed attack on member mi: once per turn of ours, the newest one
 * at or below upto (the newest step we know of). */
static void push_designed(struct hostile *h,
                          const struct gossip_member_info *mi, int a,
                          uint64_t upto)
{
        struct seen_peer *m = peer_get(h, mi->key);
        uint64_t t = last_turn(h, mi->key, upto);
        size_t lo, count, len;
        uint32_t part;

        if (!m || t == UINT64_MAX || (m->answered && t <= m->turn))
                return;
        snprintf(m->name, sizeof(m->name), "%s", mi->name);
        m->turn = t;
        m->answered = 1;
        if (a == SILENT) {
                m->turns++;
                return;
        }
        part = gossip_plan_slice(plan_of(h), t, &lo, &count);
        make_designed(h, a, m, part, lo, count);
        if (encode_slice(h, a, part, count, t, &len))
                return;
        m->turns++;
        for (int i = 0; i < h->copies[a]; i++)
                if (gossip_send_app(node_cluster_view(h->c)->g, mi->key,
                                    GOSSIP_APP_PARAMS, t, h->buf, len) == 0) {
                        h->sent[a]++;
                        h->sent_partner[a]++;
                }
}

/* ---- the loop --------------------------------------------------------- */

/* The cluster says we load (protocol.md 3.2: no one's partner) until we
 * say otherwise; we have no trainer to end it. We end it once every
 * other member exchanges: joining the exchange last, we are never a
 * fresh node's only partner while the honest ones load. */
static void end_loading(struct hostile *h, const struct gossip_member_info *mi,
                        size_t n)
{
        size_t alive = 0;

        if (h->exchanging)
                return;
        for (size_t i = 1; i < n; i++) { /* [0] is ourselves */
                if (mi[i].state != GOSSIP_ALIVE)
                        continue;
                if (mi[i].loading)
                        return;
                alive++;
        }
        if (!alive)
                return;
        gossip_set_loading(node_cluster_view(h->c)->g, 0);
        h->exchanging = 1;
}

/* "stop": once two peers are alive, leave claiming that we reached 99%
 * at step 0 (no origin: ourselves), against any target; then nothing
 * more. */
static void lie_stop(struct hostile *h)
{
        struct gossip_stop lie = {0};

        if (h->fired || gossip_alive_count(node_cluster_view(h->c)->g) < 3) {
                node_cluster_rearm(h->c);
                return;
        }
        lie.reason = GOSSIP_STOP_TARGET;
        lie.acc_bp = 9900;
        lie.target_bp = 9900;
        if (gossip_leave_with(node_cluster_view(h->c)->g, &lie) == 0) {
                h->fired = 1;
                h->sent[0]++;
        }
        node_cluster_rearm(h->c);
}

static void on_tick(uv_timer_t *t)
{
        struct hostile *h = t->data;
        struct gossip_member_info *mi;
        uint64_t newest = 0;
        size_t n = 0;
        int a;

        if (h->stop_lie) {
                lie_stop(h);
                return;
        }
        mi = node_view_members(node_cluster_view(h->c), &n);
        if (mi)
                end_loading(h, mi, n);
        for (size_t i = 1; mi && i < n; i++)
                if (mi[i].state == GOSSIP_ALIVE && mi[i].step > newest)
                        newest = mi[i].step;
        /* learn the trained model from what the honest nodes send us */
        if (h->designed)
                node_handoff_drain_params(node_cluster_handoff(h->c), on_slice,
                                          h);
        else
                node_handoff_average(node_cluster_handoff(h->c), newest,
                                     h->copy, h->n);
        if (h->newest_rx > newest)
                newest = h->newest_rx;
        if (h->once_at && (h->fired || newest < h->once_at)) {
                free(mi);
                node_cluster_rearm(h->c);
                return;
        }
        h->fired = 1;
        for (int tries = 0; tries < NATTACKS; tries++) {
                a = h->next;
                h->next = (h->next + 1) % NATTACKS;
                if (h->on[a])
                        break;
        }
        for (size_t i = 1; mi && i < n; i++) {
                if (mi[i].state != GOSSIP_ALIVE)
                        continue;
                if (a >= NCRUDE)
                        push_designed(h, &mi[i], a, newest);
                else
                        push(h, &mi[i], a);
        }
        free(mi);
        node_cluster_rearm(h->c);
}

static void on_end(uv_timer_t *t)
{
        struct hostile *h = t->data;

        uv_timer_stop(&h->tick);
        uv_stop(t->loop);
}

static void on_term(uv_signal_t *s, int signum)
{
        (void)signum;
        uv_stop(s->loop);
}

/* One NAME, NAME:PARAM, NAME*C or NAME:PARAM*C; 0 or -1. */
static int parse_one(struct hostile *h, char *tok)
{
        char *colon = strchr(tok, ':'), *star = strchr(tok, '*'), *end;
        long copies = 1;
        int a = 0;

        if (star) {
                *star++ = '\0';
                copies = strtol(star, &end, 10);
                if (*end || copies < 1 || copies > MAX_COPIES)
                        return -1;
        }
        if (colon)
                *colon++ = '\0';
        while (a < NATTACKS && strcmp(attack_names[a], tok) != 0)
                a++;
        if (a == NATTACKS)
                return -1;
        h->on[a] = 1;
        h->param[a] = attack_param[a];
        h->copies[a] = (int)copies;
        if (star && a < NCRUDE)
                return -1;
        h->designed |= a >= NCRUDE;
        if (!colon)
                return 0;
        if (attack_param[a] == 0.0)
                return -1; /* takes none */
        h->param[a] = strtod(colon, &end);
        return *end || !(h->param[a] > 0.0 && h->param[a] <= 100.0) ? -1 : 0;
}

static int parse_attacks(struct hostile *h, const char *s)
{
        char buf[256], *tok, *save = NULL;

        if (strcmp(s, "all") == 0) {
                for (int a = 0; a < NCRUDE; a++)
                        h->on[a] = 1;
                return 0;
        }
        if (strcmp(s, "stop") == 0) {
                h->stop_lie = 1;
                return 0;
        }
        snprintf(buf, sizeof(buf), "%s", s);
        if ((tok = strchr(buf, '@'))) {
                *tok++ = '\0';
                h->once_at = strtoull(tok, NULL, 10);
                if (!h->once_at || strchr(buf, ','))
                        return -1;
        }
        for (tok = strtok_r(buf, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save))
                if (parse_one(h, tok))
                        return -1;
        /* a one-time poisoning is a crude lie */
        return h->once_at && h->designed ? -1 : 0;
}

static int setup(struct hostile *h, uv_loop_t *loop, int argc, char **argv,
                 char *err, size_t errlen)
{
        struct gossip_codec_cfg cc = {0};
        struct nn_model *model = NULL;
        uint64_t dir_rng = 0xd1f7ull;
        int rc;

        rc = node_options_parse(argc, argv, &h->o, err, errlen);
        if (rc)
                return rc;
        h->o.robust = 0; /* it must take in the honest slices to copy them */
        rc = nn_model_create(h->o.model, 1, 28, 28, h->o.seed, &model);
        if (rc) {
                snprintf(err, errlen, "model: %s", nn_strerror(rc));
                return rc;
        }
        h->n = nn_model_nparams(model);
        h->init = malloc(h->n * sizeof(float));
        h->copy = malloc(h->n * sizeof(float));
        h->lie = malloc(h->n * sizeof(float));
        h->dir = malloc(h->n * sizeof(float));
        if (!h->init || !h->copy || !h->lie || !h->dir) {
                nn_model_free(model);
                return -1;
        }
        memcpy(h->init, nn_model_params(model), h->n * sizeof(float));
        memcpy(h->copy, h->init, h->n * sizeof(float));
        nn_model_free(model);
        /* only the designed attacks use it: the crude ones and "stop"
         * join as soon as before */
        for (size_t i = 0; h->designed && i < h->n; i++)
                h->dir[i] = normal(&dir_rng);
        cc.id = GOSSIP_CODEC_FP32;
        cc.n = h->n;
        cc.parts = h->o.params_parts;
        if (gossip_codec_init(&h->enc, &cc))
                return -1;
        h->cap = gossip_codec_max_size(&h->enc);
        h->buf = malloc(h->cap);
        if (!h->buf)
                return -1;
        return node_cluster_open(&h->c, loop, &h->o, NULL, h->n, err, errlen);
}

/* What a designed attack did: its mean offset from the bases, the radius
 * inferred last, where the bases came from, the turns per peer. */
static void report_designed(const struct hostile *h, int a)
{
        const struct designed_stats *d = &h->ds[a];

        printf("%s: param %g, copies %d, offset %.4f x RMS(base), radius_est "
               "%.4f, "
               "bases own %llu other %llu avg %llu, turns",
               attack_names[a], h->param[a], h->copies[a],
               d->offset_n ? d->offset_sum / (double)d->offset_n : 0.0,
               radius_est(h), (unsigned long long)d->base[BASE_OWN],
               (unsigned long long)d->base[BASE_OTHER],
               (unsigned long long)d->base[BASE_AVG]);
        for (size_t j = 0; j < h->npeers; j++)
                printf(" %s %llu", h->peers[j].name[0] ? h->peers[j].name : "?",
                       (unsigned long long)h->peers[j].turns);
        printf("\n");
}

int main(int argc, char **argv)
{
        static struct hostile h;
        uv_loop_t loop;
        char err[512] = "";
        double secs;

        if (argc < 3 || sodium_init() < 0 || nn_lib_init() != 0) {
                fprintf(stderr, "usage: hostile_peer ATTACKS SECONDS "
                                "[gossipnode options]\n");
                return 1;
        }
        h.rng = 0x4057113ull;
        secs = atof(argv[2]);
        if (parse_attacks(&h, argv[1]) || !(secs > 0)) {
                fprintf(stderr, "hostile_peer: bad attacks or seconds\n");
                return 1;
        }
        node_log_setup(stderr, "hostile", NODE_LOG_WARN);
        uv_loop_init(&loop);
        argv[2] = argv[0];
        if (setup(&h, &loop, argc - 2, argv + 2, err, sizeof(err))) {
                fprintf(stderr, "hostile_peer: %s\n",
                        err[0] ? err : "out of memory");
                return 1;
        }
        uv_timer_init(&loop, &h.tick);
        uv_timer_init(&loop, &h.end);
        h.tick.data = h.end.data = &h;
        uv_timer_start(&h.tick, on_tick, PERIOD_MS, PERIOD_MS);
        uv_timer_start(&h.end, on_end, (uint64_t)(secs * 1000), 0);
        uv_signal_init(&loop, &h.term);
        uv_signal_start(&h.term, on_term, SIGTERM);
        uv_run(&loop, UV_RUN_DEFAULT);
        if (h.stop_lie)
                printf("sent stop %llu\n", (unsigned long long)h.sent[0]);
        for (int a = 0; a < NATTACKS; a++)
                if (h.on[a]) {
                        printf("sent %s %llu (%llu at our scheduled turn)\n",
                               attack_names[a], (unsigned long long)h.sent[a],
                               (unsigned long long)h.sent_partner[a]);
                        if (a >= NCRUDE)
                                report_designed(&h, a);
                }
        fflush(stdout);
        /* the process ends here: the loop's handles die with it */
        _exit(0);
}
