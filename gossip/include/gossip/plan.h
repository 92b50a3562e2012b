/*
 * plan.h - the exchange plan: when a training node may go on, what it does
 * while it may not, and what a received parameter slice is worth.
 *
 * Everything here is a pure function of its arguments: no locks, clocks,
 * threads or sockets. The training thread asks gossip_plan_admit() at two
 * points of every step and obeys; the simulated exchange in tests/sim asks
 * the same function in virtual time. docs/design.md ("The exchange plan")
 * states the rule on one screen.
 *
 * Words used throughout:
 *   step t     the optimizer-step count (after the update that made it)
 *   K          --avg-every: a model-averaging round every K steps
 *   round      t / K; its slice is part (t / K) mod P of the model
 *   R          --avg-lag: rounds of slack between our step and the newest
 *              partner slice we must have before going on
 *   S          --staleness: the stale-synchronous bound for gradients
 *   slot       where our own copy of a round's slice is kept, so a peer's
 *              copy of round s is averaged against ours of round s
 *
 * The admission rule (both bounds in one function, per phase):
 *   GRADIENT phase (our gradient of step t is posted, before the update):
 *     bound = gradients exchanged, >1 member alive, --wait-ms > 0;
 *     satisfied when a peer gradient is pending and t <= slowest + S.
 *   PARAMS phase (after the update that made step t):
 *     bound = t ends a round (K > 0, t mod K = 0), >1 member alive,
 *     --wait-ms > 0, t > R*K;
 *     satisfied when a slice of step >= t - R*K' has arrived, K' the
 *     larger of K and the period the newest slice was sent under (a
 *     partner that averages every K' steps cannot feed us more often).
 *   satisfied, bound off or stopping  -> READY
 *   PARAMS phase, extra < --fill-batches, not the last step
 *                                      -> TRAIN_MORE (one extra batch)
 *   now < deadline (first WAIT + --wait-ms) -> WAIT until the deadline
 *   (times in microseconds: --wait-ms is short, 2 ms by default)
 *   otherwise                          -> READY, timed out
 */
#ifndef GOSSIP_PLAN_H
#define GOSSIP_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* Tunables, with their reasons. */
enum {
        /* Our own slices kept, one per averaging round, so that a peer's
         * copy of round s is averaged against ours of round s: 8 rounds
         * absorb the loop's latency, --avg-lag (at most 6) and a little
         * drift between nodes (memory: 8 slices of the model). */
        GOSSIP_PLAN_RING = 8,
};

enum gossip_plan_phase {
        GOSSIP_PLAN_GRADIENT = 0, /* our gradient posted, before the update */
        GOSSIP_PLAN_PARAMS = 1,   /* after the update, our slice posted */
};

enum gossip_plan_action {
        GOSSIP_PLAN_READY = 0,      /* go on: merge / average now */
        GOSSIP_PLAN_TRAIN_MORE = 1, /* run one extra batch, then ask again */
        GOSSIP_PLAN_WAIT = 2,       /* block until an arrival or deadline */
};

/* What a received parameter slice is used for. */
enum gossip_plan_use {
        GOSSIP_PLAN_STALE = 0, /* refused: too old, or outside the model */
        GOSSIP_PLAN_DELTA = 1, /* against our copy of the same step */
        GOSSIP_PLAN_PLAIN = 2, /* plainly against our current parameters */
        /* not used: a difference measured before our last average of the
         * same slice, which has answered it already (see slice_use) */
        GOSSIP_PLAN_ANSWERED = 3,
};

/* The settings the plan reads (copied from the options at start). */
struct gossip_plan_cfg {
        size_t nparams;        /* model size in floats */
        uint32_t avg_every;    /* K; 0: no model averaging of our own */
        uint32_t avg_lag;      /* R, >= 1 */
        uint32_t parts;        /* P, >= 1 */
        uint32_t staleness;    /* S */
        uint32_t fill_batches; /* extra batches per PARAMS wait */
        uint32_t wait_ms;      /* 0: never wait (nor train extra) */
        int grads;             /* gradients are exchanged */
};

/* What the training thread knows when it asks (a consistent copy taken
 * under the hand-off lock). */
struct gossip_plan_view {
        int phase;               /* enum gossip_plan_phase */
        uint64_t step;           /* t */
        size_t alive;            /* live members, ourselves included */
        uint64_t last_in_step;   /* newest parameter slice that arrived */
        uint32_t last_in_period; /* ... the period it was sent under (0:
                                    not told, taken as our K) */
        uint64_t min_peer_step;  /* slowest live peer; UINT64_MAX: unknown */
        size_t grads_pending;    /* peer gradients waiting to be merged */
        uint64_t now_us;         /* any monotonic clock, in microseconds */
        int stopping;            /* the run is ending: never hold it up */
        int last_step;           /* no step follows: extra batches could
                                    not be folded into one (a wait may) */
};

/* One wait, owned by its asker: start it with gossip_plan_wait_begin()
 * before the first gossip_plan_admit() of a phase. */
struct gossip_plan_wait {
        uint32_t extra;    /* TRAIN_MORE answers given in this wait */
        uint64_t since_us; /* first WAIT answer; UINT64_MAX: none yet */
        int bound;         /* the phase's bound applied (counted a wait) */
};

struct gossip_plan_decision {
        int action;           /* enum gossip_plan_action */
        int timed_out;        /* READY because the deadline passed */
        uint64_t deadline_us; /* WAIT: block at most until then */
        uint64_t want_step;   /* PARAMS: the slice step the bound needs */
};

/* 1 if the configuration is usable (P >= 1, R >= 1, R < RING). */
int gossip_plan_cfg_valid(const struct gossip_plan_cfg *c);

void gossip_plan_wait_begin(struct gossip_plan_wait *w);

/* The admission rule above. Updates w (extra batches handed out, when the
 * blocking part began) and fills d. */
void gossip_plan_admit(const struct gossip_plan_cfg *c,
                       const struct gossip_plan_view *v,
                       struct gossip_plan_wait *w,
                       struct gossip_plan_decision *d);

/* 1 if step t ends an averaging round (K > 0 and t a multiple of K). */
int gossip_plan_due(const struct gossip_plan_cfg *c, uint64_t t);

/* The averaging round of step t (t / K; t when K is 0). */
uint64_t gossip_plan_round(const struct gossip_plan_cfg *c, uint64_t t);

/* The ring slot of step t's round. */
unsigned gossip_plan_slot(const struct gossip_plan_cfg *c, uint64_t t);

/* The slice of the model that step t's round covers: [*lo, *lo + *count)
 * of part (round mod P); returns the part. */
uint32_t gossip_plan_slice(const struct gossip_plan_cfg *c, uint64_t t,
                           size_t *lo, size_t *count);

/* Is [lo, lo + count) exactly one of our P slices? Returns 1 and its
 * part in *part, else 0 (a slice cut by another P). */
int gossip_plan_part_of(const struct gossip_plan_cfg *c, size_t lo,
                        size_t count, uint32_t *part);

/* Floats in the largest slice (the ring's and inbox's slot size). */
size_t gossip_plan_slice_cap(const struct gossip_plan_cfg *c);

/* How old (in steps) a peer's slice may be and still be averaged:
 * (R + 1) * K' + S, K' the larger of our K and the period the sender made
 * the slice under (`period`, from its PARAMS frame; 0: not told, ours).
 * The lag bound lets a node run up to (R + 1) * K' steps ahead of the
 * peer that fed it, so a slice that old is still the exchange working as
 * planned, not a stale one; S on top. Periods differ when two nodes
 * measure their links differently (gossip/adapt.h): with our K alone, a
 * node at K = 16 refused most slices of a partner at K = 64. */
uint64_t gossip_plan_window(const struct gossip_plan_cfg *c, uint32_t period);

/* What a peer's slice of step s covering [lo, lo + count), made under
 * averaging period `period` (0: not told), is worth at our step t, given
 * the step of our own copy in that round's slot (held_step, UINT64_MAX if
 * the slot holds none) and our step when we last averaged anything into
 * this same slice (answered_step, UINT64_MAX: never): refused when older
 * than the window (gossip_plan_window) or outside the model; DELTA when
 * we hold our copy of the same step and slice, except ANSWERED when
 * R >= P and answered_step >= s; PLAIN otherwise (a round ahead of us
 * pulls us forward, a slice of another period or part is averaged
 * plainly).
 *
 * ANSWERED, why: a DELTA moves us by w (theirs_s - mine_s), a difference
 * measured at step s. An average of the same slice applied at or after s
 * (our copy of s is taken before step s's averaging) has already moved
 * us towards a partner by part of that difference, and applying both
 * overshoots. The lag bound admits slices up to (R + 1) K steps old and a
 * part comes back every P K steps, so with R >= P this is routine: with
 * --params-parts 1 --avg-lag 1, 72 % of DELTAs, and the replicas drift
 * apart instead of meeting (tests/sim: a spread of 1e13 against 1e-5;
 * learning.md, "Averaging a difference once"). With R < P (the defaults,
 * P 4 and R 3) only a late slice overlaps (6 % of them), skipping those
 * cost 0.2 points on skewed data, and the rule stays off. The newest
 * slice of a part should be judged first. */
int gossip_plan_slice_use(const struct gossip_plan_cfg *c, uint64_t t,
                          uint64_t s, size_t lo, size_t count,
                          uint64_t held_step, uint32_t period,
                          uint64_t answered_step);

/* ---- the slices that arrived, judged together -----------------------
 *
 * The trainer averages every slice that arrived since its last average at
 * once (node/train/handoff.c; tests/sim/xsim.c runs the same call in virtual
 * time). The rule, at our step t:
 *   - the last to arrive is judged first: of two slices of one part the
 *     fresher is averaged and answers the older (ANSWERED);
 *   - each slice gets gossip_plan_slice_use's verdict, with held_step the
 *     step of our copy in its round's ring slot (held[slot], UINT64_MAX:
 *     the slot holds no valid copy) and answered_step that of its part;
 *   - a slice averaged (DELTA or PLAIN) that is exactly one of our P
 *     slices marks its part answered at t before the next is judged, also
 *     when a later check (the robust merge) refuses its floats.
 * The caller averages and counts in the same order, the last arrival
 * first: the floats of overlapping slices and the health verdict's EWMA
 * depend on it. */
struct gossip_plan_arrival {
        uint64_t step;    /* s: the step the sender made it at */
        size_t lo, count; /* the floats of the model it covers */
        uint32_t period;  /* the sender's K (0: not told) */
};

struct gossip_plan_judged {
        int use;       /* enum gossip_plan_use: how, or why refused */
        unsigned slot; /* its round's ring slot: a DELTA is averaged
                          against our copy there, a PLAIN against our
                          current parameters */
};

/* Judge in[0..n) (oldest arrival first) into out[0..n), same order.
 * answered: per part of our P, our step when we last averaged a slice
 * into it (UINT64_MAX: never), updated as the rule says; NULL: never
 * ANSWERED and nothing noted (averaging a difference twice, as before
 * the rule; tests/sim compares the two). */
void gossip_plan_judge(const struct gossip_plan_cfg *c, uint64_t t,
                       const struct gossip_plan_arrival *in, size_t n,
                       const uint64_t held[GOSSIP_PLAN_RING],
                       uint64_t *answered, struct gossip_plan_judged *out);

/* ---- a starting node: when its load may begin -----------------------
 *
 * A node joins first and loads after (docs/design.md, "Join first"): its
 * data set, model and kernel probe are seconds to minutes of a Pi's CPU,
 * and until they are done the node is no partner anyway. The load waits
 * until the join is through: a member `answered` (its view reached us)
 * and our greetings are out (`queued` stream bytes, the SYNCs that make a
 * certificate-only newcomer known to each member, all written), or until
 * GOSSIP_PLAN_LOAD_HOLD_MS have passed since the cluster opened (no one
 * answers: the first node of a cluster, an unreachable seed), or the run
 * stops. A node with no one to join has `answered` set from the start.
 *
 * Why: on one core share the load and the loop compete. In the fleet lab
 * (16 devices at 6 % of a core), a newcomer that loaded at once took
 * 0.4 s from its first log line to the seed's answer and 0.7 s more until
 * all 16 had its greeting (docs/benchmarks.md, "Cluster authority"). */
enum { GOSSIP_PLAN_LOAD_HOLD_MS = 2000 };

/* 1 if the load may begin (held_ms: since the cluster opened). */
int gossip_plan_may_load(int answered, uint64_t queued, uint64_t held_ms);

/* ---- a starting node: take a peer's state, or only its step? -------
 *
 * A node that starts without its own checkpoint (docs/design.md, "Live
 * join") looks at the live member furthest ahead. When that member is no
 * more than GOSSIP_PLAN_JOIN_ADOPT_STEPS ahead, the two were started
 * together: both began from the same initial model (the model's seed is
 * the cluster's --seed) and the other has trained a few steps more. The
 * starting node then takes the member's step number only (so their
 * rounds line up) and keeps its own model. Further ahead, the member's
 * state is fetched.
 *
 * Why: a state is the whole model and the optimizer's buffers: 4.9 MB
 * for the default MLP with quasi-global momentum, about 4 s of a
 * 10 Mbit/s uplink (3.3 MB since that momentum goes as a velocity). Four nodes
 * started together on such links asked each other for states 5-6 steps ahead of
 * them; one node sent two, its uplink carried nothing else for the whole
 * 1000-step run and 35 % of the slices were averaged (test_slowlink;
 * docs/design.md, "Live join"). */
enum {
        /* Small on purpose. With 100, two nodes of a lab run took the step
         * 34 steps behind the others and the cluster split in two: each
         * pair refused the other's slices as far (robust merge: 300 and
         * 91-128 per node over the run), and one node ended 0.8 points
         * under the rest (history/benchmarks-log.md 5.7). On loopback, leads of
         * 11-61 steps merged without a refusal in four runs of four; 8 steps,
         * two rounds of the default plan, covers the 5-6 steps seen in
         * the lab with a margin of drift that small. */
        GOSSIP_PLAN_JOIN_ADOPT_STEPS = 8,
};

enum gossip_plan_join {
        GOSSIP_PLAN_JOIN_NONE = 0,  /* no one is ahead: start as we are */
        GOSSIP_PLAN_JOIN_ADOPT = 1, /* take the member's step, keep our model */
        GOSSIP_PLAN_JOIN_FETCH = 2, /* ask the member for its state */
};

/* The rule above, for our step `ours` and the furthest live member's
 * step `furthest`. */
int gossip_plan_join(uint64_t ours, uint64_t furthest);

/* ---- whom a fetching node asks: spread over the front -----------------
 *
 * A joiner (and a node far behind, below) fetches from a member near the
 * front of the fleet, not always from the one furthest ahead: every
 * joiner of a storm would ask that one member, whose uplink would carry
 * all their states (100 devices restarting together: 330 MB of the MLP's
 * 3.3 MB states through one 10 Mbit/s uplink, 4.4 minutes, while each
 * joiner gives up after 3 asks of 5 s; design.md, "A fleet of 100 and
 * 1000 devices, on paper") and answer at most NODE_JOIN_PENDING of them.
 * The rule: the candidates are the members within
 * GOSSIP_PLAN_SOURCE_STEPS of the furthest step (a state that many steps
 * older is still inside every plan's window at K = 1: two rounds of the
 * default plan, as GOSSIP_PLAN_JOIN_ADOPT_STEPS); the asker takes
 * candidate `pick` mod their count, pick being its own key's first 8
 * bytes plus the asks it made (uniform over askers, keys being random; a
 * retry goes to the next candidate instead of the one that did not
 * answer). A member still loading (gossip.h, gossip_set_loading: its data,
 * its kernel probe) is no candidate while another is: it answers only once
 * its trainer steps, seconds later, and the asker would wait out a retry;
 * when every member loads (a fleet starting together) they all count. */
enum { GOSSIP_PLAN_SOURCE_STEPS = 8 };

/* Index into steps[0..n) of the member to ask (n >= 1): the pick-th, mod
 * their count, of those within GOSSIP_PLAN_SOURCE_STEPS of the largest
 * step, in index order, among the members with loading[i] == 0 when there
 * is one (every member when loading is NULL). */
size_t gossip_plan_state_source(const uint64_t *steps, const uint8_t *loading,
                                size_t n, uint64_t pick);

/* ---- a node that lags: take the cluster's pace ----------------------
 *
 * The PARAMS bound holds a node back only until *some* recent slice has
 * arrived, so the nodes that are ahead feed each other and never wait for
 * one that is behind. A node that started 190 ms after the others (40
 * steps of the lab's) stayed 40 steps behind for the whole run; its
 * slices arrived older than the window and its partners refused up to
 * 84 of ~180 of them (history/benchmarks-log.md 5.9): its shard hardly reached
 * the consensus. Holding the fast nodes back does not cure it (a
 * stale-synchronous bound was tried: design.md), and on a slow device it
 * would make everyone as slow as it.
 *
 * The rule: at a step t that ends a round, if each of the last
 * m = min(alive - 1, GOSSIP_PLAN_LEADS) slices that arrived was ahead of
 * our step when it arrived (lead = its step - ours) by more than half the
 * window (gossip_plan_window at our K), we are the one behind: skip
 * min(lead) steps, rounded down to a multiple of K and at most the
 * window, keeping our model (as GOSSIP_PLAN_JOIN_ADOPT does at start).
 * Our next slices are then of the partners' steps and are averaged; the
 * steps skipped are training this node does not do (it was behind). One
 * partner ahead is not enough when there are others: the minimum over m
 * arrivals means every recent partner is ahead. A liar's step moves us
 * by at most one window per m of its slices. The caller clears the leads
 * after a skip (they were measured against the old step). */
enum { GOSSIP_PLAN_LEADS = 8 };

struct gossip_plan_leads {
        int64_t lead[GOSSIP_PLAN_LEADS]; /* s - t, a ring; newest at next-1 */
        unsigned n, next;
};

/* A slice of step s arrived while we were at step t. */
void gossip_plan_leads_note(struct gossip_plan_leads *l, uint64_t s,
                            uint64_t t);

/* Steps to skip at step t (0: none), the rule above. */
uint64_t gossip_plan_catch_up(const struct gossip_plan_cfg *c, uint64_t t,
                              size_t alive, const struct gossip_plan_leads *l);

/* ---- a node far behind: take a peer's model --------------------------
 *
 * Skipping closes at most one window per m arrivals while the others move
 * on, so it cannot bring back a node that is many windows behind: one
 * that trained alone because no peer was alive within the join wait, or
 * whose state transfer did not arrive (an emulated arm64 board joining
 * boards 1600 steps ahead, at 1-2 s a step against a window of a few
 * steps, stayed 1600 steps behind for the rest of the run: its slices were
 * refused as too old by every partner and it averaged none of theirs).
 * The rule: at a step t that ends a round, if each of the last m slices
 * was ahead of us by more than GOSSIP_PLAN_FAR_WINDOWS windows, ask for
 * the state of the live member furthest ahead, as a joining node does
 * (gossip_plan_join). Its model replaces ours: ours is that many windows
 * older. The caller clears the leads and rate-limits the asking. One
 * liar cannot trigger it while honest partners' slices reach us near our
 * step (the minimum over m arrivals, as for skipping); once triggered, the
 * state comes from the member membership says is furthest ahead, the same
 * trust a joining node gives (docs/reliability.md, "State transfer"). */
enum { GOSSIP_PLAN_FAR_WINDOWS = 8 };

/* 1 when the rule above says: ask for a peer's state at step t. */
int gossip_plan_far_behind(const struct gossip_plan_cfg *c, uint64_t t,
                           size_t alive, const struct gossip_plan_leads *l);

/* ---- a node that skips: its pace ----------------------------------------
 *
 * The catch-up keeps a slow device in the schedule but trains it on only
 * the steps it has the time for: a device at a quarter of its partners'
 * speed skips about three steps of four, so its data goes into the
 * consensus at a quarter of everyone else's rate. Under label skew that
 * is most of what the cluster knows of its classes: with the 2 classes
 * only one of 4 nodes holds and that node at a quarter speed, the fast
 * nodes ended at 54.6 % on those classes against 94.9 % with all four
 * fast (history/benchmarks-log.md, "Mixed device classes").
 *
 * The pace ratio is steps passed per step trained, over about the last
 * GOSSIP_PLAN_PACE_WINDOW steps passed (both counts halved past twice
 * that), so a device slowed for a while and then freed loses about half
 * its excess over 1 per window (from 4 to 1.1 in 1,561 steps). A node
 * that never skips has 1 exactly. The sample shuffle sends that many
 * times its R samples per step trained, so a slow device's samples reach
 * its partners at the cluster's rate (node/train/shuffle.h).
 *
 * Tried and dropped: weighing the steps it trains (its learning rate
 * times the ratio, the importance weight of data sampled at 1/ratio of
 * the rate). Under the label skew above the fast nodes ended at 5.6 % on
 * the slow node's classes instead of 54.6 % (its steps toward 2 classes,
 * 4 times as long, took its model out of the robust merge's radius), and
 * with the robust merge off its own model diverged. */
enum { GOSSIP_PLAN_PACE_WINDOW = 512 };

struct gossip_plan_pace {
        uint64_t passed;  /* steps of the schedule passed: trained + skipped */
        uint64_t trained; /* of them, trained */
};

/* Passed `passed` steps of the schedule, of which `trained` trained. */
void gossip_plan_pace_note(struct gossip_plan_pace *p, uint64_t passed,
                           uint64_t trained);

/* passed / trained over the window, in [1, cap]; 1 before anything was
 * trained or when cap <= 1. */
double gossip_plan_pace_ratio(const struct gossip_plan_pace *p, double cap);

/* ---- is the exchange working? ---------------------------------------
 *
 * A node that cannot average must say so instead of training alone while
 * it reports success. The verdict is judged from outcomes the box sees:
 * each received slice averaged (USED) or refused as too old (TOO_OLD), and
 * each PARAMS wait met (WAIT_MET) or passed at its deadline
 * (WAIT_TIMEOUT). Shares are smoothed over about GOSSIP_PLAN_HEALTH_N
 * outcomes of each kind (an EWMA with weight 1/N), and the verdict has
 * hysteresis so it does not flap:
 *   degraded (too old)  >= N slices judged and under 50% of them used;
 *   degraded (starved)  >= N waits in a row with no slice arriving, at
 *                       least 90% of waits timing out;
 *   healthy again       the share used is >= 75% (or too few slices were
 *                       judged) and a slice arrived within the last N
 *                       waits.
 * Robust-merge refusals are not counted: a liar is not a slow link.
 */
enum { GOSSIP_PLAN_HEALTH_N = 32 };

enum gossip_plan_outcome {
        GOSSIP_PLAN_USED = 0,
        GOSSIP_PLAN_TOO_OLD = 1,
        GOSSIP_PLAN_WAIT_MET = 2,
        GOSSIP_PLAN_WAIT_TIMEOUT = 3,
};

enum gossip_plan_verdict {
        GOSSIP_PLAN_HEALTHY = 0,
        GOSSIP_PLAN_DEGRADED_TOO_OLD = 1, /* slices arrive, too late */
        GOSSIP_PLAN_DEGRADED_STARVED = 2, /* no slice arrives at all */
};

struct gossip_plan_health {
        float used;         /* smoothed share of judged slices averaged */
        float timeouts;     /* smoothed share of waits timed out */
        uint32_t slices;    /* slices judged (saturates at N) */
        uint32_t waits;     /* waits judged (saturates at N) */
        uint32_t dry_waits; /* waits since the last slice arrived */
        int verdict;        /* enum gossip_plan_verdict */
};

void gossip_plan_health_init(struct gossip_plan_health *h);

/* Note one outcome (enum gossip_plan_outcome). Returns 1 when the verdict
 * changed with it, else 0. */
int gossip_plan_health_note(struct gossip_plan_health *h, int outcome);

/* The verdict in words for logs and gossipctl ("ok", "degraded: 98% of
 * received slices too old", ...); returns buf. */
const char *gossip_plan_health_say(const struct gossip_plan_health *h,
                                   char *buf, size_t len);

#endif
