/*
 * adapt.h - what a node sends for model averaging, chosen from the link it
 * measures: the codec of its parameter slices and the averaging period K.
 *
 * Pure: the caller passes the measured uplink goodput and its own step
 * time; no clocks, sockets or threads. The loop thread asks
 * gossip_adapt_choose() at most every 250 ms (node/cluster/exchange.c) and
 * the box applies a new K at the next step that ends a round under both
 * the old and the new K (node/train/handoff.c), so every slice keeps the step
 * arithmetic of gossip/plan.h.
 *
 * The rule (docs/design.md, "Adapting to the link"):
 *   bytes(c)   one slice on the wire in codec c: nparams / P elements at
 *              c's size, plus the frame's overhead
 *   need(c)    the smallest K with bytes(c) <= u * goodput * K * step,
 *              u = GOSSIP_ADAPT_UTIL_PCT % of the measured goodput: a round's
 *              transfer fits in the compute of that round with room for
 *              the partner's traffic and the estimate's error
 *   choice     the configured codec at the configured K when it fits;
 *              else int8 (half of fp16, nearly lossless for averaging) at
 *              need(int8), rounded up to K0 * 2^j (so round ends nest and
 *              a change lands on a step both Ks agree on), at most
 *              K0 * GOSSIP_ADAPT_K_FACTOR_MAX
 *   going back to a richer choice needs it to fit at
 *   GOSSIP_ADAPT_BACK_PCT % (hysteresis: a link near a threshold does not
 *   make the node flip every second)
 *   unknown goodput (0) or step time: keep the current choice
 *
 * Adapting nodes agree on one period, the largest need heard (below:
 * gossip_adapt_agree). Disagreement is still tolerated while a need is
 * not heard yet and with peers that do not adapt: slices are
 * self-describing (codec and part in the header), a slice of another codec
 * is decoded, one whose step our ring does not hold is averaged plainly
 * instead of against our copy, and a slice made under a larger period
 * (its PARAMS frame says which) is judged by that period's window and lag
 * bound (gossip_plan_slice_use, gossip_plan_window).
 */
#ifndef GOSSIP_ADAPT_H
#define GOSSIP_ADAPT_H

#include <stddef.h>
#include <stdint.h>

enum {
        /* share of the goodput a round may use: 70 % (50 % measured the
         * same accuracy and share averaged with a third less traffic on
         * the 10 Mbit/s lab link, history/benchmarks-log.md 5.3) */
        GOSSIP_ADAPT_UTIL_PCT = 70,
        GOSSIP_ADAPT_BACK_PCT = 50,     /* ... to go back to a richer one */
        GOSSIP_ADAPT_K_FACTOR_MAX = 64, /* K <= K0 * this */
        /* bytes of a slice's frame besides its elements: the wire's
         * prefix and signature or MAC, the codec header, the stream's
         * length prefix, and the tensor body's keys (rounded up) */
        GOSSIP_ADAPT_FRAME_BYTES = 192,
};

struct gossip_adapt_in {
        size_t nparams;     /* model size in floats */
        uint32_t parts;     /* P */
        uint32_t k0;        /* --avg-every: the richest period, >= 1 */
        int codec;          /* configured slice codec (GOSSIP_CODEC_*) */
        double goodput_Bps; /* measured uplink goodput; 0: unknown */
        double step_us;     /* our smoothed step time; 0: unknown */
};

struct gossip_adapt_choice {
        int codec;  /* GOSSIP_CODEC_FP32, _FP16 or _INT8 */
        uint32_t k; /* averaging period */
};

/* The starting choice: the configured codec at K0. */
void gossip_adapt_init(const struct gossip_adapt_in *in,
                       struct gossip_adapt_choice *out);

/* Bytes of one slice on the wire in codec `codec` (the rule's bytes(c)). */
size_t gossip_adapt_slice_bytes(const struct gossip_adapt_in *in, int codec);

/* The rule above; cur is the choice in force. Returns 1 if *out differs
 * from *cur, else 0. */
int gossip_adapt_choose(const struct gossip_adapt_in *in,
                        const struct gossip_adapt_choice *cur,
                        struct gossip_adapt_choice *out);

/* Skip a new slice rather than queue it behind the uplink? `queued` is
 * the transport's backlog: bytes accepted and not yet completed, over
 * every destination. Once the choice in force is cheaper than the
 * configured codec at K0 the link is the constraint, and any queued byte
 * is a backlog the slice would arrive too old behind. Before that, only
 * more than one slice's frame is (gossip_adapt_slice_bytes, an upper
 * bound): one frame of the richest codec still completing is normal on a
 * fast link or loopback, and counting it as a backlog skipped 38 % of a
 * loopback cluster's slices (history/benchmarks-log.md 3.2c). */
int gossip_adapt_skip(const struct gossip_adapt_in *in,
                      const struct gossip_adapt_choice *cur, uint64_t queued);

/* ---- One period for all: the largest need heard ------------------------
 *
 * Each adapting node tells, in every PARAMS frame, the period its own
 * link needs (its choice above: protocol.md key 16); the period in force
 * is the largest of its own need and every need heard *directly* from a
 * partner within a time to live. Nothing is relayed, so a need dies when
 * its origin stops repeating it (its link recovered, or it left) and the
 * period comes down again; the rotation makes every member a partner of
 * every other within n - 1 rounds, so every need is heard. A need is
 * what a node's link asks for, not the period in force, so two nodes do
 * not hold each other's period up by echoing it. Why: nodes that chose
 * different periods refused each other's slices as too old (a node at
 * K = 16 among partners at 32 refused 43 of 66;
 * history/benchmarks-log.md 5.6, 5.8).
 */
enum {
        /* a need lives this many of the cluster's rounds of all members
         * (n * K steps), at least GOSSIP_ADAPT_NEED_TTL_MIN_STEPS steps
         * and at least GOSSIP_ADAPT_NEED_TTL_MIN_MS */
        GOSSIP_ADAPT_NEED_TTL_ROUNDS = 4,
        GOSSIP_ADAPT_NEED_TTL_MIN_MS = 3000,
        /* a CPU need changes once a window at most (64-128 steps at the
         * periods it asks for); at 6 % of a core 4 devices lost a
         * partner's need of 4 after 3 s unheard (an evaluation and a
         * catch-up) and fell back to 2 for a round trip of windows */
        GOSSIP_ADAPT_NEED_TTL_MIN_STEPS = 256,
};

/* A partner's need as last heard. k == 0: none. */
struct gossip_adapt_need {
        uint32_t k;
        uint64_t heard_ms;
};

/* How long a need lives with `alive` members at period k and our step
 * time in->step_us (unknown: GOSSIP_ADAPT_NEED_TTL_MIN_MS). */
uint64_t gossip_adapt_need_ttl_ms(const struct gossip_adapt_in *in,
                                  size_t alive, uint32_t k);

/* The period in force: the largest of own_k and the needs[0..n) heard
 * within ttl_ms before now_ms (a need from the future counts as heard
 * now). A need is rounded up to K0 * 2^j, so that round ends nest, and
 * capped at K0 * GOSSIP_ADAPT_K_FACTOR_MAX like our own. */
uint32_t gossip_adapt_agree(const struct gossip_adapt_in *in, uint32_t own_k,
                            const struct gossip_adapt_need *needs, size_t n,
                            uint64_t now_ms, uint64_t ttl_ms);

/* ---- The step time a round is budgeted in -----------------------------
 *
 * The caller notes each step's time outside admission (its waits and the
 * extra batches that fill them left out: wall time would feed the link
 * back into its own budget, docs/design.md) and the rule budgets in
 * gossip_adapt_pace_us(): the mean of the last GOSSIP_ADAPT_PACE_STEPS
 * steps with the slowest eighth of them left out.
 *
 * A mean over many steps, because a node that shares its cores steps
 * fast while the others wait and slowly while they run: in the lab (4
 * nodes on 2 cores) the median of 16 steps, the estimate before this one,
 * swung between 1.6 and 8.6 ms within seconds, and K flipped with it, 6
 * to 30 times a run (history/benchmarks-log.md 5.11). The slowest eighth is
 * left out as the median left it out: a step that ran an evaluation or wrote a
 * checkpoint is 20 steps long, every 50 steps in the benches.
 */
enum { GOSSIP_ADAPT_PACE_STEPS = 128 };

struct gossip_adapt_pace {
        double us[GOSSIP_ADAPT_PACE_STEPS]; /* a ring of the last steps */
        uint64_t n;                         /* steps noted in all */
};

/* Note one step's time in microseconds (not finite or <= 0: ignored). */
void gossip_adapt_pace_note(struct gossip_adapt_pace *p, double us);

/* The step time to budget in; 0 before the first step. */
double gossip_adapt_pace_us(const struct gossip_adapt_pace *p);

/* ---- What the exchange costs the CPU (--adapt cpu) ---------------------
 *
 * At Pi-class compute the exchange's own work (encoding, MAC, the
 * stream, decoding, averaging: the loop thread, and the box calls on
 * the training thread) competes with training for the device's CPU: at
 * 6 % of a core, 4 devices stepped in 48-52 ms averaging every step
 * against 30-35 ms averaging every 4 steps or exchanging nothing
 * (docs/benchmarks.md, issue 34). The link rule above never raises K on
 * a fast link. This rule measures CPU time, both threads' (not wall time,
 * which a shared core or a quota stretches alike for compute and
 * exchange), over windows of steps at one K each, and models the
 * exchange's CPU per step at period K as
 *     e(K) = a + b / K
 * b being what a round costs (a slice encoded, sent, received, decoded,
 * averaged) and a what every step costs whatever K is (membership, the
 * box's bookkeeping): a larger K saves only b. Measured on the MLP
 * (2 nodes, x86, in microseconds a step): uncapped e(1) 500-700, e(8)
 * 70-110; at 6 % of a core e(1) 790-865, e(8) 200-290, compute
 * 1,700-2,000. With windows at two periods a and b are solved for (the
 * newest window at each, smoothed); with one, a = 0 (all of it per
 * round). The need goes at most one doubling up a window: the window at
 * that period tells a from b again (a guess that jumped to 8 at once
 * stayed there, the way back needing 5 %, where a and b asked for 4;
 * one device's noisy two-window fit asked 8 where 3 others asked 4).
 *
 * The need: the smallest K = K0 * 2^j whose per-round part b / K is at
 * most GOSSIP_ADAPT_CPU_PCT % of the CPU of a step (compute + a + b / K);
 * a shorter period than the one in force needs GOSSIP_ADAPT_CPU_BACK_PCT %,
 * and the last window, at the period in force, to have spent at most
 * GOSSIP_ADAPT_CPU_PCT % in all on the exchange (a fit of two noisy
 * windows once read a = 397, b = 0 and asked for K0 while the exchange
 * took 16 %);
 * at most K0 * GOSSIP_ADAPT_CPU_K_FACTOR_MAX (a period that long cost
 * 0.3-0.4 points at 4 devices). A window needs GOSSIP_ADAPT_CPU_MIN_STEPS
 * steps and GOSSIP_ADAPT_CPU_MIN_ROUNDS rounds. The period in force is
 * the largest of this need, the link's and the partners'
 * (gossip_adapt_agree). */
enum {
        GOSSIP_ADAPT_CPU_PCT = 10,
        GOSSIP_ADAPT_CPU_BACK_PCT = 5,
        GOSSIP_ADAPT_CPU_K_FACTOR_MAX = 8,
        /* windows of 64 steps and 8 rounds read e(8) anywhere from 200
         * to 400 us on a shared host; 16 rounds halve the swing. At
         * K <= 2 the round's cost dominates the window and 32 steps
         * read it (e(1) 830-850 us at 6 % of a core on 4 devices): 128
         * steps there took the run's first 600 of 1,500 steps to reach
         * K = 4 */
        GOSSIP_ADAPT_CPU_MIN_STEPS = 32,
        GOSSIP_ADAPT_CPU_MIN_ROUNDS = 16,
};

/* CPU time over a window of steps, all at period k. */
struct gossip_adapt_cpu {
        double exchange_us; /* the exchange's, both threads */
        double compute_us;  /* training's: forward, backward, optimizer,
                             * the extra batches */
        uint64_t steps;
        uint32_t k;
};

/* What the windows taught: per step, the exchange's CPU at the two
 * periods measured last (k 0: none) and training's. Zero it to start. */
struct gossip_adapt_cpu_model {
        uint32_t k[2];
        double exchange_us[2];
        double compute_us;
        uint32_t last_k; /* the last window's period */
        double last_pct; /* ... and the exchange's share of its CPU */
};

/* The exchange's share of the window's CPU, %; -1 when unknown. */
double gossip_adapt_cpu_pct(const struct gossip_adapt_cpu *c);

/* Learn window c into m (an unusable window: too few steps or rounds,
 * no compute, k 0, is ignored). Returns 1 if it was used. */
int gossip_adapt_cpu_learn(struct gossip_adapt_cpu_model *m,
                           const struct gossip_adapt_cpu *c);

/* The period the CPU asks for (the rule above) from what m learned;
 * cur is the need in force (0: none yet, taken as K0); nothing learned
 * keeps cur. a_us and b_us, when not NULL, get the model's a and b. */
uint32_t gossip_adapt_cpu_need(const struct gossip_adapt_in *in,
                               const struct gossip_adapt_cpu_model *m,
                               uint32_t cur, double *a_us, double *b_us);

/* "fp16 every 1 step" for logs; returns buf. */
const char *gossip_adapt_say(const struct gossip_adapt_choice *c, char *buf,
                             size_t len);

#endif
