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
 *   whom    per peer, the verdicts of its last HISTORY judged
 *           contributions; more than SUSPECT_BAD of them clipped or
 *           refused marks it suspect_model.
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
        GOSSIP_ROBUST_REASONS = 9,
};

/* The factors (two presets below: parameters and gradients). */
struct gossip_robust_cfg {
        float mult;   /* radius = mult x median of accepted distances */
        float refuse; /* refused beyond refuse x radius */
        float floor;  /* radius >= floor x RMS(mine) */
        float cap;    /* radius <= cap x RMS(mine); the warm-up radius */
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
        /* the last SEEN (step, first element) taken from it, a ring */
        uint64_t seen_step[GOSSIP_ROBUST_SEEN], seen_lo[GOSSIP_ROBUST_SEEN];
        uint32_t seen_n, seen_next;
};

struct gossip_robust_peers {
        struct gossip_robust_peer p[GOSSIP_ROBUST_PEERS];
        size_t n;
};

/* "accepted", "clipped", "far", "nonfinite", "not_partner",
 * "out_of_window", "mismatch", "quarantined", "duplicate"; NULL for
 * anything else. */
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

/* Count one outcome; ACCEPTED, CLIPPED, FAR and NONFINITE also enter the
 * history (the last three as bad). */
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

/* 1 if more than SUSPECT_BAD of the last HISTORY verdicts were bad. */
int gossip_robust_peer_suspect(const struct gossip_robust_peer *p);

#endif
