/*
 * stop.h - the cluster-wide stop: why a member left, as its LEAVE says,
 * and whether that ends our run too.
 *
 * When a node reaches --target-acc it leaves the cluster with a reason
 * (struct gossip_stop, carried by the optional `stop` element of its
 * LEAVE frame, docs/protocol.md section 3.7). Any trusted member can
 * write any reason, so one reason is a hint, never an order (issue 33,
 * docs/reliability.md "A stop one device cannot force"): a node with a
 * --target-acc of its own counts each member that left with a TARGET
 * reason at least its target once, by the key that signed the LEAVE
 * (gossip_stop_count; the `origin` name inside is anyone's to write),
 * and stops (gossip_stop_decide) when
 *   (a) its own evaluation, made after the reason arrived, is within
 *       GOSSIP_STOP_MARGIN_BP of its target (a liar cannot fake our test
 *       accuracy), or
 *   (b) a quorum of distinct members left saying they reached the
 *       target themselves (origin = the signer's own name):
 *       gossip_stop_quorum(), at least 2 whatever the cluster's size, so
 *       a single liar is never enough.
 * A node that stops on others' word finishes its current step, writes its
 * checkpoint, logs gossip_stop_format()'s line and leaves in turn,
 * repeating the reason: a repeated reason asks its receivers to evaluate
 * (rule a) but is not a vote (rule b), or a liar plus one honest node
 * within the margin would make a quorum for the rest.
 *
 * Pure: no clocks, sockets or threads; the daemon keeps one struct
 * gossip_stop_tally per run, under its own lock.
 */
#ifndef GOSSIP_STOP_H
#define GOSSIP_STOP_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip_types.h"

/* Names on the wire and here: 31 bytes + NUL (as GOSSIP_NAME_MAX). */
#define GOSSIP_STOP_NAME_MAX 32

enum {
        /* Rule (a): our own accuracy may be this far below our target
         * (basis points: 1 point). The honest models of one cluster are
         * averaged every round, so when one reaches the target the others
         * are within a fraction of a point of it (measured in
         * docs/reliability.md); a lone liar can therefore end a run at
         * most this far short of its target, and only once it is there. */
        GOSSIP_STOP_MARGIN_BP = 100,
        /* Distinct members counted; beyond it reasons are not counted
         * (the quorum of a cluster over 2x this many is then out of
         * reach, and rule (a) alone applies). */
        GOSSIP_STOP_ORIGINS_MAX = 256,
        /* Rule (a) again while a counted reason waits: our accuracy
         * moves as we train on, so we evaluate again once the training
         * since our last evaluation took this many times that
         * evaluation's time (evaluating then costs at most a sixth of the
         * time). Without it a node that evaluates rarely trained on to
         * its --steps (CI: both others of 3, at 72 % when the first
         * reached 75 % at step 40, ran 180 s on). */
        GOSSIP_STOP_RECHECK_TIMES = 5,
};

enum gossip_stop_reason {
        GOSSIP_STOP_NONE = 0,   /* a plain leave: no element on the wire */
        GOSSIP_STOP_TARGET = 1, /* `origin` reached its target accuracy */
        /* values above are ignored by this version (a later reason an
         * older node must not act on) */
};

/* Accuracies in basis points of a percent-scale accuracy: 8812 = 88.12%
 * (integers on the wire; a hundredth of a point is below an evaluation's
 * resolution of 1 sample in 10000). */
struct gossip_stop {
        uint8_t reason;     /* enum gossip_stop_reason */
        uint64_t step;      /* the origin's step when it reached it */
        uint32_t acc_bp;    /* the test accuracy it reached */
        uint32_t target_bp; /* the origin's own --target-acc */
        char origin[GOSSIP_STOP_NAME_MAX]; /* the node that reached it */
};

/* Percent (88.0) to basis points (8800), rounded, clamped to [0, 10000];
 * NaN and values <= 0 give 0. */
uint32_t gossip_stop_bp(double percent);

/* Whether a member's LEAVE reason s counts toward ending our run, given
 * our own --target-acc in basis points (0: we have none): yes for a
 * TARGET reason whose reached accuracy is at least our target. A node
 * without a target of its own trains its own schedule (its operator
 * asked for steps, epochs or time), and a reason this version does not
 * know is not acted on. */
int gossip_stop_honoured(const struct gossip_stop *s, uint32_t target_bp);

/* The reasons heard in one run (zeroed: none). */
struct gossip_stop_tally {
        struct gossip_stop first; /* the first one counted */
        size_t n;                 /* distinct members counted */
        size_t votes;             /* ... of which firsthand (rule b) */
        uint8_t keys[GOSSIP_STOP_ORIGINS_MAX][GOSSIP_KEY_BYTES];
};

/* Count the LEAVE reason s of the member whose key signed it and whose
 * name is `name` (the member's own, not the reason's): 1 if it is
 * honoured (gossip_stop_honoured) and that key was not counted before
 * (then the first such reason is kept in t->first, an empty origin
 * replaced by `name`; an origin that is empty or `name` is firsthand, a
 * vote), else 0 and t is unchanged. */
int gossip_stop_count(struct gossip_stop_tally *t,
                      const uint8_t key[GOSSIP_KEY_BYTES], const char *name,
                      const struct gossip_stop *s, uint32_t target_bp);

/* Distinct members needed for rule (b) in a cluster of `members`
 * (counting us): max(2, ceil(members / 2)). */
size_t gossip_stop_quorum(size_t members);

/* No evaluation of our own to judge by (own_bp of gossip_stop_decide). */
#define GOSSIP_STOP_NO_EVAL UINT32_MAX

enum gossip_stop_rule {
        GOSSIP_STOP_WAIT = 0,      /* not (yet): train on */
        GOSSIP_STOP_BY_OWN = 1,    /* rule (a): our accuracy is near */
        GOSSIP_STOP_BY_QUORUM = 2, /* rule (b): enough members reached */
};

/* What gossip_stop_decide weighed, for the log line. */
struct gossip_stop_verdict {
        int rule;           /* enum gossip_stop_rule */
        size_t have, need;  /* members counted, quorum */
        uint32_t own_bp;    /* our evaluation, or GOSSIP_STOP_NO_EVAL */
        uint32_t floor_bp;  /* what rule (a) asks of it: */
        uint32_t target_bp; /* our target less GOSSIP_STOP_MARGIN_BP */
};

/* Whether the reasons in t end our run. alive: members alive or suspect,
 * us included (the members counted in t have left, so the quorum is of
 * alive + t->n, and t->votes must reach it); own_bp: our test accuracy from an
 * evaluation made after a reason was counted, or GOSSIP_STOP_NO_EVAL (then only
 * the quorum can decide). Nothing counted, or no target of ours: WAIT. The
 * verdict (may be NULL) says why; returns its rule. */
int gossip_stop_decide(const struct gossip_stop_tally *t, size_t alive,
                       uint32_t own_bp, uint32_t target_bp,
                       struct gossip_stop_verdict *v);

/* Whether to evaluate again for rule (a): a reason is counted (t->n > 0)
 * and the training since our last evaluation (since_s) took at least
 * GOSSIP_STOP_RECHECK_TIMES that evaluation's time (eval_s; <= 0:
 * unknown, then due). */
int gossip_stop_recheck_due(const struct gossip_stop_tally *t, double since_s,
                            double eval_s);

/* Why a WAIT verdict did not stop us: "1 of 2 votes needed, our
 * accuracy 71.20% < 87.00% (target 88.00% less 1.00 points)" (the accuracy
 * part only when own_bp was given) into buf, always NUL-terminated when
 * len > 0; returns snprintf's count. */
int gossip_stop_format_wait(const struct gossip_stop_verdict *v, char *buf,
                            size_t len);

/* "stopped: NAME reached target 88.0% at step N (test accuracy 88.12%)"
 * into buf (always NUL-terminated when len > 0); returns snprintf's
 * count. An empty origin prints as "a peer". */
int gossip_stop_format(const struct gossip_stop *s, char *buf, size_t len);

#endif
