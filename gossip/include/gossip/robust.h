/*
 * robust.h - robust merge: what a contribution from a trusted but possibly
 * wrong peer (a parameter slice or a gradient) may do to our model.
 *
 * A peer whose key is in the peers file passes every signature check; a
 * compromised or buggy device still sends 1e30, a sign-flipped model or
 * noise. Three guards, all pure functions (no locks, clocks, threads):
 *
 *   who     the caller accepts a contribution only from the member the
 *           GossipGraD schedule names as our sender for its step
 *           (node/cluster/exchange.c), and only within the step window
 *           (gossip_plan_slice_use, node/train/handoff.c);
 *   how far d = RMS(theirs - mine), the per-element root mean square of the
 *           difference against our own copy (of the same step when we
 *           hold it). The radius is MULT x the running median of the
 *           distances accepted unclipped recently, kept inside
 *           [FLOOR, CAP] x RMS(mine):
 *             d non-finite (theirs NaN/Inf)  -> refused, NONFINITE
 *             d > REFUSE x radius            -> refused, FAR
 *             d > radius                     -> clipped: theirs is moved
 *                                               to mine + radius/d x
 *                                               (theirs - mine)  (centered
 *                                               clipping, ClippedGossip)
 *             otherwise                      -> accepted, d recorded
 *           Until WARMUP distances are recorded the radius is CAP x
 *           RMS(mine).
 *   how long per peer, its sway: what its merges added up to, kept
 *           within sqrt(SWAY_BOUND) of what moves pointing anywhere add up
 *           to (below; centred clipping with momentum), so a push one
 *           way inside the radius is bounded over time, not only per
 *           round.
 *   whom    per peer, the verdicts of its last HISTORY judged
 *           contributions: more than SUSPECT_BAD of them refused (far,
 *           nonfinite) marks it suspect_model; and its evidence (below):
 *           a peer whose turns pull us back along our own path, or push
 *           one way, more than our other senders' is named: suspect_model
 *           and its slices refused (NAMED) while the evidence holds.
 *   after   when model health rolls us back for a slow divergence
 *           (nn/health.h: worse than chance, parameter norm, accuracy
 *           drop), every peer whose contribution we merged since the
 *           snapshot we return to is refused for QUARANTINE_STEPS of our
 *           steps (QUARANTINED): the model we keep is one none of them
 *           touched, and what they send next is not taken on trust until
 *           the quarantine ends. Honest peers merged in that time are
 *           refused too: the rule cannot tell who pushed (each push was
 *           inside the radius), and training without a peer for a while
 *           costs a few tenths of a point (docs/reliability.md), a liar's
 *           drift several points.
 *
 * Why a median: honest distances shrink as replicas agree and grow when
 * the learning rate is high; a fixed constant is wrong at one end or the
 * other. A median of unclipped distances ignores any minority of outliers,
 * and clipped or refused contributions never enter it, so a liar cannot
 * raise the radius by lying loudly (one that lies just below the radius
 * in more than half of our rounds can: see docs/reliability.md).
 *
 * Why MULT 3: honest distances of one cluster spread over about a factor
 * of two round to round (measured, docs/reliability.md); 3 x the median
 * clips almost none of them. REFUSE 4: a sign-flipped model is 2 x
 * RMS(mine) away, x10 is 9 x, N(0,1) noise dozens of RMS of a trained
 * model - each at least 4 x the radius, which is at most CAP = 0.5 x
 * RMS(mine) for parameters.
 */
#ifndef GOSSIP_ROBUST_H
#define GOSSIP_ROBUST_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip_types.h"

/* Tunables, with their reasons (the factors are in gossip_robust_cfg). */
enum {
        /* Distances in the running median: a few dozen rounds follow the
         * learning-rate schedule yet outvote a burst of outliers. */
        GOSSIP_ROBUST_MEDIAN_LEN = 32,
        /* Recorded distances before the median is trusted. */
        GOSSIP_ROBUST_WARMUP = 4,
        /* Verdicts remembered per peer, and how many of them may be bad
         * (clipped or refused) before the peer is suspect_model: more than
         * half of the last 20. */
        GOSSIP_ROBUST_HISTORY = 20,
        GOSSIP_ROBUST_SUSPECT_BAD = 10,
        /* Peers tracked (a cluster of Pi-class nodes is smaller). */
        GOSSIP_ROBUST_PEERS = 64,
        /* Slices remembered per peer to refuse a copy (gossip_robust_
         * peer_once). An honest node sends each (step, slice) once per
         * partner and the wire refuses replays, so a copy is the sender's
         * own doing: a liar that sent each lie 8 times had each copy
         * averaged in and cost 8 points (history/liar-attacks.md). 16 is
         * four rounds of every part at P = 4; a copy sent later than that
         * is out of the window or answered. */
        GOSSIP_ROBUST_SEEN = 16,

        /* Our steps a peer merged since the snapshot a health verdict
         * returns to is refused: 20 averaging rounds at K = 10, about as
         * long as a liar's drift takes to cost a point (hundreds of
         * steps, docs/history/liar-attacks.md), yet bounded, so an
         * honest peer refused with it is back within a short part of a
         * run (1500 steps in the benchmarks). */
        GOSSIP_ROBUST_QUARANTINE_STEPS = 200,
};

/* A peer's accumulated influence (its "sway"), the memory per peer that
 * per-round clipping lacks (issue 32; centred clipping with momentum,
 * Karimireddy, He, Jaggi 2021). Every contribution merged moves our model
 * by w x d, d = theirs - mine (after the radius clip). Per peer we keep
 *
 *   A = lambda A + alpha d     what its merges added up to, decayed
 *   E = lambda^2 E + |d|^2     what a peer whose moves point anywhere
 *                              would have added up to: E[|A|^2] = E then
 *   c = |A|^2 / E              its consistency
 *
 * lambda = 1 - 1/SWAY_TURNS per turn of that peer. An honest peer's d is
 * the two replicas' disagreement, which each round of averaging halves and
 * fresh batches renew in new directions: its moves nearly cancel and c
 * stays near 1. A liar that pulls the same way turn after turn (a fixed
 * direction, its victim's own older slice sent back, a shrink toward
 * zero, minus the honest update, a shift of the honest mean) adds up
 * linearly: c grows toward (1 + lambda) / (1 - lambda) (63 when every
 * slice is the whole model; with P parts visited in turn, each part's
 * sum decays by lambda^P between its turns: 17 at P = 4). Each turn is
 * scaled by the largest alpha in [0, 1] that keeps c at or below BOUND,
 * so what one peer adds up to stays within sqrt(BOUND) of what a peer of
 * the same size pointing anywhere would: bounded over time, not only per
 * round. The ratio is scale-free, so a peer cannot buy room by sending
 * more (its size is the radius's business) and no distance it sends
 * sets another peer's bound.
 *
 * A and E are kept on a fixed sample of the model's coordinates (every
 * stride-th, at most SWAY_SAMPLES of them: 32 kB a peer); inner products
 * over a few thousand coordinates of a dense difference estimate the
 * whole one's to a few %. */
enum {
        GOSSIP_ROBUST_SWAY_SAMPLES = 8192,
        GOSSIP_ROBUST_SWAY_TURNS = 32,
        /* The bound on c (gossip_robust_params_cfg.sway): honest senders'
         * c measured 1.3-2.0 at the end of 4-node runs on loopback (1 for
         * moves that point anywhere: replicas' disagreements are a little
         * consistent); at 2 they were scaled now and then. */
        GOSSIP_ROBUST_SWAY_BOUND = 3,
};

struct gossip_robust_sway {
        float *a;        /* SWAY_SAMPLES floats, zeroed, the caller's */
        double aa;       /* |A|^2 over the sample */
        double e;        /* E over the sample */
        uint64_t turns;  /* contributions added */
        uint64_t scaled; /* ... of which scaled (alpha < 1) */
};

/* One turn measured against the sway (before it is added) and against
 * our own progress g (both over the sample). */
struct gossip_robust_sway_turn {
        double dd; /* |d|^2 */
        double ad; /* <A, d> */
        double gd; /* <g, d>; 0 without g */
        double gg; /* |g|^2; 0 without g */
};

/* Every stride-th coordinate of a model of nparams floats is sampled:
 * coordinate g is the sample's g / stride. */
size_t gossip_robust_sway_stride(size_t nparams);

/* The first sampled coordinate at or after element lo. */
size_t gossip_robust_sway_first(size_t stride, size_t lo);

/* d = theirs - mine over the slice of count floats that starts at element
 * lo of the model, measured against s and, when prog is not NULL, against
 * our own progress g (prog: SWAY_SAMPLES floats over the sample; the
 * caller's, see GOSSIP_ROBUST_EV_PULL). Nothing changes. */
void gossip_robust_sway_measure(const struct gossip_robust_sway *s,
                                size_t stride, const float *theirs,
                                const float *mine, const float *prog, size_t lo,
                                size_t count,
                                struct gossip_robust_sway_turn *t);

/* The sample of a model of n floats: out[i] = params[i x stride]. */
void gossip_robust_sway_sample(const float *params, size_t n, size_t stride,
                               float *out);

/* The largest alpha in [0, 1] with |lambda A + alpha d|^2 <= bound x
 * (lambda^2 E + |d|^2); when none, the alpha in [0, 1] that leaves
 * |lambda A + alpha d| least (a turn that undoes the peer's own push is
 * taken, one that adds to it is not). 1 for a zero d. */
float gossip_robust_sway_scale(const struct gossip_robust_sway *s,
                               const struct gossip_robust_sway_turn *t,
                               float bound);

/* Add the turn: A = lambda A + alpha d over the sample (theirs, mine as
 * measured), E = lambda^2 E + |d|^2. */
void gossip_robust_sway_add(struct gossip_robust_sway *s, size_t stride,
                            const float *theirs, const float *mine, size_t lo,
                            size_t count,
                            const struct gossip_robust_sway_turn *t,
                            float alpha);

/* c = |A|^2 / E; 0 before any turn. */
float gossip_robust_sway_consistency(const struct gossip_robust_sway *s);

/* Naming the liar (issue 32 item 4): per peer, two figures of every turn
 * judged, kept as count, mean and spread over the whole run:
 *
 *   PULL  -cos(d, g), g what our own training moved our model over the
 *         last PROGRESS_ROUNDS rounds (the change of our model less what
 *         merges moved it: a liar's accepted pushes are not our path, and
 *         an honest peer that pulls us back from them must not look like
 *         a puller): how far the turn takes back our own training. Every
 *         merge takes back some (our own batches' noise is in g, and a
 *         peer's fresh model lacks it); a sender whose models are built
 *         from what it received, not trained (an echo, a stale or shrunk
 *         copy, minus the honest update), lacks all our training since.
 *   PUSH  cos(d, A), A its sway before the turn: how much the turn adds
 *         to what this peer has already pushed. Fresh replicas'
 *         disagreements point anywhere (mean near 0); a fixed direction, a
 *         shift of the honest mean by their spread, a shrink toward zero
 *         add up (0.1-0.2 per turn, measured: docs/reliability.md).
 *
 * A peer is named (suspect_model, and its contributions refused, still
 * measured) when its PULL mean exceeds the mean of each of our other
 * senders by more than a margin, by name_t standard errors (Welch;
 * NAME_TURNS turns on each side), and it stands out more than any
 * other; one at a time, named until that falls below half of name_t.
 * The margin because honest senders differ too, a little but
 * persistently (a device that lags or skips steps): with the exchange
 * every step a peer has ~1000 turns a run, and any persistent
 * difference becomes significant; without it honest devices were named
 * in 4 of 6 fleet-lab runs with no liar (least differences up to 0.089;
 * the pulling liars' 0.17-0.34: docs/benchmarks.md, "Robustness").
 * PUSH is measured and shown but names nobody: a device whose data
 * differs (label skew) pushes one way turn after turn as a lie does,
 * by 0.06-0.26 measured, as much as cliprider's 0.20-0.27; naming by it
 * named such a device. A liar under the margin, or one that pushes, is
 * not named: the radius and the sway bound it. Against each sender, not a pool
 * of them: a liar whose figure is far below everyone's (measured:
 * cliprider's pull) drags a pool down and lifts the honest senders over
 * it, and could name them; the other honest senders keep them in line.
 * Relative, not absolute: what all senders share (every merge takes back
 * some of our training) cancels. What it needs: one liar among a node's
 * senders and at least two honest ones (NAME_OTHERS): beside a single
 * honest sender (3 nodes) nobody is named. What it cannot see:
 * a liar whose turns look like an honest replica's in both (the dissensus
 * attack moves the honest senders as much as itself): the radius and the sway
 * bound it. */
enum {
        GOSSIP_ROBUST_EV_PULL = 0,
        GOSSIP_ROBUST_EV_PUSH = 1,
        GOSSIP_ROBUST_EVS = 2,
        GOSSIP_ROBUST_NAME_TURNS = 30,
        /* Senders a peer is compared with before it can be named: with
         * one (3 nodes: one honest sender and the liar) the comparison is
         * symmetric, the one that differs more is named, and in a 3-node
         * cliprider run it was the honest one, leaving the node with the
         * liar alone. */
        GOSSIP_ROBUST_NAME_OTHERS = 2,
        /* g spans this many of our averaging rounds: a liar's base is its
         * victim's slice of its last turn, 1-7 rounds back at 3-8 nodes */
        GOSSIP_ROBUST_PROGRESS_ROUNDS = 5,
};

struct gossip_robust_evidence {
        uint64_t n[GOSSIP_ROBUST_EVS];
        double mean[GOSSIP_ROBUST_EVS], m2[GOSSIP_ROBUST_EVS];
};

/* The figures of one turn (NaN: not measurable; PULL without a past
 * model, PUSH before the sway has a direction). */
void gossip_robust_evidence_of(const struct gossip_robust_sway *s,
                               const struct gossip_robust_sway_turn *t,
                               float x[GOSSIP_ROBUST_EVS]);

/* Add one turn's figures (NaN ones are skipped). */
void gossip_robust_evidence_add(struct gossip_robust_evidence *e,
                                const float x[GOSSIP_ROBUST_EVS]);

/* Why a contribution was refused, clipped or taken (counters index). */
enum gossip_robust_reason {
        GOSSIP_ROBUST_ACCEPTED = 0,
        GOSSIP_ROBUST_CLIPPED = 1,
        GOSSIP_ROBUST_FAR = 2,         /* beyond REFUSE x radius */
        GOSSIP_ROBUST_NONFINITE = 3,   /* NaN/Inf inside */
        GOSSIP_ROBUST_NOT_PARTNER = 4, /* not our scheduled sender */
        GOSSIP_ROBUST_WINDOW = 5,      /* step outside the window */
        GOSSIP_ROBUST_MISMATCH = 6,    /* shape or codec not ours */
        GOSSIP_ROBUST_QUARANTINED = 7, /* merged before a health verdict */
        GOSSIP_ROBUST_DUPLICATE = 8,   /* that step and slice sent again */
        GOSSIP_ROBUST_SWAYED = 9,      /* scaled: its sway at the bound */
        GOSSIP_ROBUST_NAMED = 10,      /* its evidence names it a liar */
        GOSSIP_ROBUST_REASONS = 11,
};

/* The factors (two presets below: parameters and gradients). */
struct gossip_robust_cfg {
        float mult;   /* radius = mult x median of accepted distances */
        float refuse; /* refused beyond refuse x radius */
        float floor;  /* radius >= floor x RMS(mine) */
        float cap;    /* radius <= cap x RMS(mine); the warm-up radius */
        float sway;   /* a peer's consistency c is held at or below this
                       * (gossip_robust_sway_scale); 0: not bounded */
        float name_t; /* standard errors that name a peer; 0: never */
        /* per figure (GOSSIP_ROBUST_EV_*): the difference of means a
         * peer must exceed each other sender's by, name_t standard errors
         * above it (gossip_robust_name); NaN: the figure is measured and
         * shown (its plain t) but names nobody */
        float name_margin[GOSSIP_ROBUST_EVS];
};

/* Parameters: replicas agree to a few % of their RMS; a slice may move
 * ours by at most half its size. Gradients of one model on different
 * batches differ by about their own size, so the band is wider. */
extern const struct gossip_robust_cfg gossip_robust_params_cfg;
extern const struct gossip_robust_cfg gossip_robust_grads_cfg;

/* Running median of accepted distances (zero it to start). */
struct gossip_robust_stat {
        float d[GOSSIP_ROBUST_MEDIAN_LEN];
        uint32_t n;    /* recorded so far (saturates at WINDOW) */
        uint32_t next; /* ring position */
};

struct gossip_robust_verdict {
        int reason;   /* ACCEPTED, CLIPPED, FAR or NONFINITE */
        float dist;   /* RMS(theirs - mine); NaN when not finite */
        float radius; /* the radius applied */
        float scale;  /* CLIPPED: radius / dist; else 1 */
};

/* Per-peer counters and recent verdicts. */
struct gossip_robust_peer {
        uint8_t key[GOSSIP_KEY_BYTES];
        uint64_t count[GOSSIP_ROBUST_REASONS];
        uint32_t hist;   /* bit i: the i-th newest judged verdict was bad */
        uint32_t nhist;  /* judged verdicts seen (saturates at HISTORY) */
        uint64_t merged; /* our step of its newest merged
                          * contribution, plus 1; 0: none */
        uint64_t refuse_until; /* QUARANTINED while our step is below */
        float sway;            /* its consistency c, last measured */
        struct gossip_robust_evidence ev; /* its turns' figures */
        float ev_t[GOSSIP_ROBUST_EVS];    /* each figure's Welch t against
                                           * the other senders (NaN: too
                                           * few turns) */
        float ev_d[GOSSIP_ROBUST_EVS];    /* each figure's least mean
                                           * difference against the other
                                           * senders (NaN: too few turns) */
        float evidence; /* what names it (gossip_robust_name) */
        int named;      /* named by the evidence (NAMED) */
        /* the last SEEN (step, first element) taken from it, a ring */
        uint64_t seen_step[GOSSIP_ROBUST_SEEN], seen_lo[GOSSIP_ROBUST_SEEN];
        uint32_t seen_n, seen_next;
};

struct gossip_robust_peers {
        struct gossip_robust_peer p[GOSSIP_ROBUST_PEERS];
        size_t n;
};

/* "accepted", "clipped", "far", "nonfinite", "not_partner",
 * "out_of_window", "mismatch", "quarantined", "duplicate", "swayed",
 * "named"; NULL for anything else. */
const char *gossip_robust_reason_name(int reason);

/* Per-element RMS of a (n floats), of a - b (b may be NULL: of a); NaN if
 * a value is not finite; 0 for n == 0. */
float gossip_robust_rms(const float *a, const float *b, size_t n);

/* Both RMS a merge needs, in one pass over the floats: returns RMS(a - b)
 * and sets *rms_b = RMS(b) (b not NULL; NaN and 0 as above). */
float gossip_robust_rms_both(const float *a, const float *b, size_t n,
                             float *rms_b);

/* The median of the recorded distances; NaN when none. */
float gossip_robust_median(const struct gossip_robust_stat *s);

/* The radius for a contribution against mine of RMS ref_rms. */
float gossip_robust_radius(const struct gossip_robust_cfg *c,
                           const struct gossip_robust_stat *s, float ref_rms);

/* Judge theirs (n floats) against mine (n floats; NULL: against zero,
 * with ref_rms then the scale to compare with). Fills v. */
void gossip_robust_judge(const struct gossip_robust_cfg *c,
                         const struct gossip_robust_stat *s,
                         const float *theirs, const float *mine, float ref_rms,
                         size_t n, struct gossip_robust_verdict *v);

/* The same verdict from a distance RMS(theirs - mine) already measured
 * (gossip_robust_rms_both). */
void gossip_robust_judge_dist(const struct gossip_robust_cfg *c,
                              const struct gossip_robust_stat *s, float dist,
                              float ref_rms, struct gossip_robust_verdict *v);

/* Record an ACCEPTED verdict's distance (others are ignored). */
void gossip_robust_note(struct gossip_robust_stat *s,
                        const struct gossip_robust_verdict *v);

/* Centered clipping in place: theirs = mine + scale x (theirs - mine);
 * mine NULL stands for zero. */
void gossip_robust_clip(float *theirs, const float *mine, size_t n,
                        float scale);

/* The peer's record, added when new; NULL when the table is full. */
struct gossip_robust_peer *
gossip_robust_peer_get(struct gossip_robust_peers *t,
                       const uint8_t key[GOSSIP_KEY_BYTES]);

/* The record of key, or NULL (never adds). */
const struct gossip_robust_peer *
gossip_robust_peer_find(const struct gossip_robust_peers *t,
                        const uint8_t key[GOSSIP_KEY_BYTES]);

/* Count one outcome; ACCEPTED, CLIPPED, FAR, NONFINITE and SWAYED also
 * enter the history, FAR and NONFINITE as bad (content no replica of ours
 * holds). CLIPPED and SWAYED are not evidence: an honest peer far behind,
 * just restarted or training on other labels is clipped too, and honest
 * senders touch the sway bound now and then (a liar that pushes them
 * apart makes them consistent); naming a liar that stays inside is the
 * evidence's business (gossip_robust_name). */
void gossip_robust_peer_note(struct gossip_robust_peer *p, int reason);

/* 1 the first time p sends the slice starting at element lo of step
 * (recorded), 0 for a copy of one of its last GOSSIP_ROBUST_SEEN. */
int gossip_robust_peer_once(struct gossip_robust_peer *p, uint64_t step,
                            uint64_t lo);

/* A contribution of p was merged into our model at our step. */
void gossip_robust_peer_merged(struct gossip_robust_peer *p, uint64_t step);

/* A health verdict at our step `now` rolled us back to a snapshot that
 * holds every merge up to step `since`: every peer merged at a step after
 * since is refused until now + steps (a later end is kept). Returns how
 * many peers that is. */
size_t gossip_robust_quarantine(struct gossip_robust_peers *t, uint64_t since,
                                uint64_t now, uint64_t steps);

/* 1 if p's contributions are refused at our step (QUARANTINED). */
int gossip_robust_peer_refused(const struct gossip_robust_peer *p,
                               uint64_t step);

/* Bad verdicts among the last HISTORY. */
uint32_t gossip_robust_peer_bad(const struct gossip_robust_peer *p);

/* 1 if more than SUSPECT_BAD of the last HISTORY verdicts were bad, or
 * the evidence names it. */
int gossip_robust_peer_suspect(const struct gossip_robust_peer *p);

/* The least Welch t of figure `stat` of peer p (a record of t) against
 * each other peer of t with NAME_TURNS turns, of the difference of
 * their means beyond `margin`: (mean_p - mean_q - margin) / standard
 * error. NaN when p has fewer turns or fewer than NAME_OTHERS such peers
 * exist. */
float gossip_robust_evidence_t(const struct gossip_robust_peers *t,
                               const struct gossip_robust_peer *p, int stat,
                               float margin);

/* Recompute every peer's evidence (the larger of its figures' t beyond
 * c->name_margin) and which one is named: the peer of the largest
 * evidence, at evidence >= c->name_t, until it falls below name_t / 2;
 * no other. Returns how many peers are named (0 or 1). */
size_t gossip_robust_name(struct gossip_robust_peers *t,
                          const struct gossip_robust_cfg *c);

#endif
