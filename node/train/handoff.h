/*
 * handoff.h - the box between the loop thread and the training thread:
 * everything the exchange hands from one to the other, under one mutex.
 *
 * The training thread owns its loop (node/train/trainer.c): at fixed points of
 * a step it posts (our gradient, our parameter slice of an averaging round, a
 * snapshot it was asked for), asks the exchange plan (gossip/plan.h)
 * whether it may go on, trains extra batches or waits when the plan says
 * so, and merges what arrived. The loop thread (node/cluster*.c) takes what
 * was posted, encodes and sends it, and delivers what peers sent. Neither
 * side ever calls into the other: they meet only here.
 *
 * Who owns what:
 *   fixed at create:   cfg, slice_cap
 *   under mu:          every field of struct node_handoff marked "box"
 *                      (see handoff.c), the counters, the ring slots'
 *                      state and step (a slot's slice and K are set with
 *                      them, before the loop may read them)
 *   ring slot floats:  written by the training thread while the slot is
 *                      not POSTED; read by the loop while it is POSTED
 *   training thread:   the spare gradient buffer, the slice being filled,
 *                      the slices it took out of the inbox to average
 *   loop thread:       its gradient buffer and the inbox spare
 * Buffers change hands by pointer swap, so the lock is never held while
 * encoding, decoding, sending, training or averaging parameter slices
 * (node_handoff_average judges under the lock and averages without it);
 * it is held for the merge buffer's O(n) offer and apply of gradients and
 * the robust check of a received gradient, O(its length).
 */
#ifndef NODE_HANDOFF_H
#define NODE_HANDOFF_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/adapt.h"
#include "gossip/gossip.h"
#include "gossip/merge.h"
#include "gossip/plan.h"
#include "gossip/robust.h"

/* Tunables, with their reasons. */
enum {
        /* Received parameter slices held for the trainer's next step; a
         * node receives about one per step, a slow step may see a few. */
        NODE_HANDOFF_INBOX = 4,
        /* Samples of our own model kept, one a round: our progress over
         * GOSSIP_ROBUST_PROGRESS_ROUNDS rounds, with room for rounds that
         * merged nothing. */
        NODE_HANDOFF_PAST_RING = 8,
        /* After start, wait this long for membership before deciding we
         * are alone: a SWIM join round trip on a LAN is milliseconds; on a
         * loaded Pi a second or two. */
        NODE_HANDOFF_JOIN_WAIT_MS = 3000,
        /* How long a joining node waits for a STATE answer before asking
         * another peer (a 3 MB state over TCP takes well under 1 s). */
        NODE_HANDOFF_STATE_WAIT_MS = 5000,
        /* STATE_REQ attempts before training from local weights. */
        NODE_HANDOFF_STATE_TRIES = 3,
};

struct node_handoff;

struct node_handoff_cfg {
        struct gossip_plan_cfg plan;
        float avg_weight; /* partner weight of model averaging */
        int robust;       /* robust merge (gossip/robust.h) */
        /* Any thread, lock not held: the loop has work (uv_async_send). */
        void (*wake_loop)(void *ctx);
        void *ctx;
};

/* Counters, a consistent copy (any thread). */
struct node_handoff_stats {
        struct gossip_merge_stats merge; /* gradients */
        uint64_t params_received;        /* slices delivered by the loop */
        uint64_t params_applied;         /* averaged in */
        uint64_t params_delta;           /* of those, against our copy */
        uint64_t params_stale;           /* refused as too old */
        uint64_t params_dup;             /* refused: a copy (robust merge) */
        uint64_t params_answered;        /* not used: answered by a later one */
        uint64_t params_replaced;        /* pushed out of a full inbox */
        uint64_t params_busy;            /* our slice not posted: slot busy */
        uint64_t catch_ups;     /* times we skipped to the partners' pace */
        uint64_t steps_skipped; /* ... and the steps skipped in all */
        uint64_t waits;         /* PARAMS admissions the bound applied */
        uint64_t wait_timeouts; /* of those, passed at the deadline */
        double wait_s;          /* blocked in node_handoff_wait */
        /* robust merge outcomes, slices and gradients together, indexed
         * by enum gossip_robust_reason (loop-side refusals included) */
        uint64_t robust[GOSSIP_ROBUST_REASONS];
        float radius_params; /* the slice radius now (RMS units); NaN: none */
        /* is the exchange working? (gossip/plan.h; the trainer logs a
         * change of verdict, gossipctl train and /metrics show it) */
        struct gossip_plan_health exchange;
        uint32_t avg_every; /* the averaging period in force (adapted) */
        double step_us;     /* time per step outside admission (waits and
                             * their extra batches), the trimmed mean of
                             * the last 128 (gossip_adapt_pace_us); 0:
                             * unknown */
};

/* 0, or a negative errno (-EINVAL for a plan the ring cannot hold). */
int node_handoff_create(struct node_handoff **out,
                        const struct node_handoff_cfg *cfg);
void node_handoff_free(struct node_handoff *h);
/* The configured plan (--avg-every as given; the K in force, which the
 * adaptation may raise, is in node_handoff_stats). */
const struct gossip_plan_cfg *node_handoff_plan(const struct node_handoff *h);
void node_handoff_stats(struct node_handoff *h, struct node_handoff_stats *st);

/* Any thread: 1 if the exchange's verdict changed since the last call
 * (then log it), else 0; *out gets the verdict either way. */
int node_handoff_exchange_news(struct node_handoff *h,
                               struct gossip_plan_health *out);

/* Any thread: the run is ending; every wait returns, none starts. */
void node_handoff_stop(struct node_handoff *h);

/* ---- training thread ------------------------------------------------- */

/* One admission in progress (owned by the asker). */
struct node_handoff_ask {
        struct gossip_plan_wait w;
        struct gossip_plan_decision d;
        uint64_t gen;      /* box changes seen when the plan answered */
        uint64_t begin_us; /* the first answer's time (0: none yet) */
};

/* Post our gradient of `step` (copied) for the loop to send, if gradients
 * are exchanged and someone is alive. */
void node_handoff_post_gradient(struct node_handoff *h, uint64_t step,
                                const float *g, size_t n);

/* Clear a for a new admission (a wait of its own): call it before the
 * first node_handoff_admit of each phase; the phase and the step are
 * passed to every admit. */
void node_handoff_ask_begin(struct node_handoff_ask *a);

/* Ask the plan (gossip_plan_admit on a copy of the box); returns the
 * action. stopping: the run was asked to stop; last_step: no step follows
 * this one. Counts waits and timeouts of the PARAMS bound. */
int node_handoff_admit(struct node_handoff *h, int phase, uint64_t step,
                       int stopping, int last_step, struct node_handoff_ask *a);

/* After a WAIT answer: block until the box changes (an arrival, a member
 * change, a snapshot request, a stop) or the deadline passes. */
void node_handoff_wait(struct node_handoff *h, struct node_handoff_ask *a);

/* Merge the peer gradients that arrived into grads (n floats). */
void node_handoff_merge_gradient(struct node_handoff *h, uint64_t step,
                                 float *grads, size_t n);

/* Before the optimizer step that makes `step`: the ring slot our slice of
 * that averaging round goes to, for the optimizer to fill as it writes it
 * ([*lo, *lo + *count) of the parameters); NULL when no round is due, we
 * are alone, or the loop still has that slot. */
float *node_handoff_slice_dst(struct node_handoff *h, uint64_t step, size_t *lo,
                              size_t *count);

/* After the optimizer step that made `step`: post our slice of the round
 * (already in the ring if slice_dst handed it out, else copied now). */
void node_handoff_post_params(struct node_handoff *h, uint64_t step,
                              const float *params, size_t n);

/* Training thread, after step's averaging: 1 when we are so far behind
 * every recent partner that only a peer's state brings us back
 * (gossip_plan_far_behind); the leads are then cleared. The caller asks
 * for the state with node_handoff_request_state. */
int node_handoff_far_behind(struct node_handoff *h, uint64_t step);

/* Training thread, after step's averaging: the steps to skip to the
 * partners' pace (gossip_plan_catch_up; 0: none, also when the skip
 * would reach the `left` steps the run has). The caller adds them to its
 * step; the box counts them. */
uint64_t node_handoff_catch_up(struct node_handoff *h, uint64_t step,
                               uint64_t left);

/* Model health rolled our model back: our copies of past rounds belong
 * to the broken model, so none is averaged against again (held slots are
 * freed; a slot the loop still encodes stays its own). */
void node_handoff_forget_own(struct node_handoff *h);

/* Average every slice that arrived into params (n floats) at `step`.
 * Returns the squared L2 norm of what that moved params (the optimizer's
 * quasi-global momentum bounds it: nn_optim_moved). */
double node_handoff_average(struct node_handoff *h, uint64_t step,
                            float *params, size_t n);

/* For a peer that takes the slices apart instead of averaging them
 * (tests/node/hostile_peer.c, which has no trainer): hand every slice in
 * the inbox to cb(arg, from, step, lo, v, count), oldest first, and empty
 * the inbox. No plan, no robust check, nothing counted but the call.
 * cb runs with the box's lock held: it copies what it keeps and never
 * calls into the box. Any thread. */
void node_handoff_drain_params(struct node_handoff *h,
                               void (*cb)(void *arg,
                                          const uint8_t from[GOSSIP_KEY_BYTES],
                                          uint64_t step, size_t lo,
                                          const float *v, size_t count),
                               void *arg);

/* 1 if the loop asked for a snapshot (clears the request). */
int node_handoff_snapshot_wanted(struct node_handoff *h);

/* Hand a snapshot (gn_big_alloc'd, checkpoint byte format) to the loop. */
void node_handoff_post_snapshot(struct node_handoff *h, void *buf, size_t len);

/* Live join, before step 0: wait at most JOIN_WAIT for a live peer;
 * returns the live peers seen (0: alone). */
uint32_t node_handoff_await_peers(struct node_handoff *h);

/* Live join: ask the member furthest ahead of `step` for its state and
 * wait at most STATE_WAIT. 1 with *buf (malloc'd, the caller frees),
 * *len and from set; 0 when no one is ahead of us; 2 when the member is
 * so little ahead that we take only its step, *adopt_step
 * (gossip_plan_join); -ETIMEDOUT when no answer came; -ECANCELED when the
 * run is stopping. */
int node_handoff_request_state(struct node_handoff *h, uint64_t step,
                               void **buf, size_t *len, char *from,
                               size_t fromlen, uint64_t *adopt_step);

/* ---- loop thread ----------------------------------------------------- */

/* What the trainer posted since the last take. */
struct node_handoff_work {
        const float *grad; /* the gradient (loop-owned until next take) */
        uint64_t grad_step;
        int nslices; /* posted slices, oldest first */
        unsigned slot[GOSSIP_PLAN_RING];
        uint64_t slice_step[GOSSIP_PLAN_RING];
        void *state; /* a snapshot for STATE answers; the loop frees
                      * it (gn_big_free) */
        size_t state_len;
        int want_state;    /* join: ask a peer for its state */
        int reset_encoder; /* a peer's state was taken: restart codecs */
        uint64_t local_step;
};

void node_handoff_take(struct node_handoff *h, struct node_handoff_work *w);

/* The floats of a posted slot, and giving it back once encoded. */
const float *node_handoff_slot(struct node_handoff *h, unsigned slot);
/* The slice a posted slot holds: its part, *lo, *count and the period
 * *k it was made under (fixed when it was posted; the K in force may have
 * changed since). */
uint32_t node_handoff_slot_slice(struct node_handoff *h, unsigned slot,
                                 size_t *lo, size_t *count, uint32_t *k);
/* Ask for averaging period k (gossip/adapt.h): the trainer takes it at the
 * next step that ends a round under both the current and the new K. */
void node_handoff_set_k(struct node_handoff *h, uint32_t k);
/* The trainer's wall time per step, smoothed (0: not known yet). */
double node_handoff_step_us(struct node_handoff *h);
/* The CPU window of gossip_adapt_cpu_need (--adapt cpu): CPU time of the
 * exchange and of training since the K in force took effect, in
 * microseconds. The training thread notes each step's (its compute, its
 * own exchange work: the box calls less the extra batches run in them),
 * the loop thread its own CPU time (all of it the exchange's and the
 * membership's) every time it adapts. Taking it empties it; it returns
 * 1 when the window held GOSSIP_ADAPT_CPU_MIN_STEPS steps and
 * GOSSIP_ADAPT_CPU_MIN_ROUNDS rounds, else 0 (nothing taken). A change of
 * K empties it (its figures were of the old period). */
void node_handoff_note_cpu(struct node_handoff *h, double compute_us,
                           double exchange_us);
/* The calling thread's CPU time in microseconds, the clock both threads
 * note the window in (CLOCK_THREAD_CPUTIME_ID; 0 if it fails). */
double node_handoff_thread_cpu_us(void);
void node_handoff_note_loop_cpu(struct node_handoff *h, double us);
int node_handoff_cpu_take(struct node_handoff *h, struct gossip_adapt_cpu *out);
void node_handoff_slot_done(struct node_handoff *h, unsigned slot);

/* A peer gradient (or slice of one) for the merge buffer; 0 or the
 * merge's GOSSIP_E* code; *late set when accepted as late. With robust
 * merge it is first judged against our newest gradient (v may be clipped
 * in place); a refusal returns GOSSIP_EINVAL and is counted by reason. */
int node_handoff_offer_gradient(struct node_handoff *h,
                                const uint8_t key[GOSSIP_KEY_BYTES],
                                uint64_t step, size_t lo, float *v,
                                size_t count, int *late);

/* The loop's spare slice buffer (slice_cap floats): decode a received
 * slice into it, then deliver it (the spare is swapped into the inbox). */
float *node_handoff_inbox_spare(struct node_handoff *h);
size_t node_handoff_slice_cap(const struct node_handoff *h);
/* from: the sender's key (the verdict is charged to it); period: the K
 * the sender made the slice under (0: not told; believed up to K0 times
 * GOSSIP_ADAPT_K_FACTOR_MAX). Returns GOSSIP_ROBUST_ACCEPTED, or
 * GOSSIP_ROBUST_WINDOW when robust merge is on and step is outside
 * [our step - W, our step + RING x W], W = gossip_plan_window() for that
 * period (then nothing is delivered and the plan does not count it as
 * arrived). */
int node_handoff_deliver_params(struct node_handoff *h,
                                const uint8_t from[GOSSIP_KEY_BYTES],
                                uint64_t step, uint32_t period, size_t lo,
                                size_t count);

/* Robust merge, loop side: count a refusal made before the box (not our
 * scheduled sender, NaN/Inf or a shape not ours at decode). */
void node_handoff_robust_note(struct node_handoff *h,
                              const uint8_t key[GOSSIP_KEY_BYTES], int reason);

/* A copy of a peer's robust-merge record; 0, or -ENOENT if none. */
int node_handoff_robust_peer(struct node_handoff *h,
                             const uint8_t key[GOSSIP_KEY_BYTES],
                             struct gossip_robust_peer *out);

/* 1 if robust merge is on (fixed at create). */
int node_handoff_robust(const struct node_handoff *h);

/* Training thread, after a model-health verdict at step now rolled the
 * model back to a snapshot holding the merges up to step since: refuse, for
 * GOSSIP_ROBUST_QUARANTINE_STEPS, the slices and gradients of every peer
 * merged since (gossip_robust_quarantine), counted as QUARANTINED.
 * Returns how many peers; 0 with robust merge off (nothing refused). */
size_t node_handoff_quarantine(struct node_handoff *h, uint64_t since,
                               uint64_t now);

/* Membership as the plan needs it: live members (ourselves included) and
 * the slowest live peer's step (UINT64_MAX: none). */
void node_handoff_set_members(struct node_handoff *h, size_t alive,
                              uint64_t min_peer_step);
size_t node_handoff_alive(struct node_handoff *h);

/* The trainer's step as it last told the box. */
uint64_t node_handoff_local_step(struct node_handoff *h);
/* 1 once the trainer has asked for a step's admission: it has loaded
 * (data, model, kernels, a peer's state) and exchanges from now on. */
int node_handoff_training(struct node_handoff *h);

/* A peer asks for our model: have the trainer make a snapshot. */
void node_handoff_want_snapshot(struct node_handoff *h);

/* Join: a state arrived (copied), or no one has one worth having. 1 if it
 * was taken (the trainer awaited one). */
int node_handoff_deliver_state(struct node_handoff *h, const void *buf,
                               size_t len, const char *from);
/* No state comes: adopt_step is the step the trainer takes instead
 * (gossip_plan_join's ADOPT), 0 when no one is ahead. */
void node_handoff_no_state(struct node_handoff *h, uint64_t adopt_step);

/* ---- the sample shuffle (node/train/shuffle.h) --------------------------- */

struct node_shuffle;
/* Before the training thread starts and before the loop runs: the box
 * takes s (freed with the box). */
void node_handoff_set_shuffle(struct node_handoff *h, struct node_shuffle *s);
/* The shuffle, or NULL when --shuffle-samples is 0 (any thread). */
struct node_shuffle *node_handoff_shuffle(struct node_handoff *h);
/* Any thread: the loop has work (samples were posted). */
void node_handoff_wake_loop(struct node_handoff *h);

/* ---- the cluster-wide stop (gossip/stop.h) ------------------------- */

/* What node_handoff_stop_peer did with a member's LEAVE reason. */
enum {
        NODE_HANDOFF_STOP_IGNORED = 0, /* not honoured, or that member
                                          was counted before */
        NODE_HANDOFF_STOP_NOW = 1,     /* a quorum: every wait returns */
        NODE_HANDOFF_STOP_ASKED = 2,   /* counted; the trainer evaluates
                                          and decides (stop_check) */
};

/* Loop: the member whose key signed the LEAVE (its name: name) left with
 * reason s; our --target-acc in basis points. Counted once per key
 * (gossip_stop_count: a vote when s names the member itself)
 * and decided on the quorum alone (gossip_stop_decide with the box's
 * alive count); *v (may be NULL) says why. */
int node_handoff_stop_peer(struct node_handoff *h,
                           const uint8_t key[GOSSIP_KEY_BYTES],
                           const char *name, const struct gossip_stop *s,
                           uint32_t target_bp, struct gossip_stop_verdict *v);

/* Training thread: 1 if a reason was counted since the last
 * node_handoff_stop_check (evaluate at the end of this step). */
int node_handoff_stop_eval_wanted(struct node_handoff *h);

/* Training thread: 1 if a counted reason still waits and our accuracy
 * is due to be judged again (gossip_stop_recheck_due: since_s of
 * training since our last evaluation, which took eval_s). */
int node_handoff_stop_recheck_due(struct node_handoff *h, double since_s,
                                  double eval_s);

/* Training thread, after an evaluation: decide (gossip_stop_decide) with
 * our accuracy own_bp. A rule other than GOSSIP_STOP_WAIT takes the
 * first counted reason and ends the run as a peer's stop. *news: a
 * reason was counted since the last check (the caller logs a WAIT once
 * per such news); *v (may be NULL) says why. Returns the rule. */
int node_handoff_stop_check(struct node_handoff *h, uint32_t own_bp,
                            uint32_t target_bp, struct gossip_stop_verdict *v,
                            int *news);

/* Training thread: we reached our target; s is the reason our LEAVE
 * will carry (kept unless a peer's came first). */
void node_handoff_stop_own(struct node_handoff *h, const struct gossip_stop *s);

/* Any thread: 0 no reason held, 1 our own, 2 a peer's; *out (may be
 * NULL) gets it. The loop's leave repeats whichever is held. */
int node_handoff_stop_reason(struct node_handoff *h, struct gossip_stop *out);

#endif
