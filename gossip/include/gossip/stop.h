/*
 * stop.h - the cluster-wide stop: why a member left, as its LEAVE says,
 * and whether that ends our run too.
 *
 * When a node reaches --target-acc it leaves the cluster with a reason
 * (struct gossip_stop, carried by the optional `stop` element of its
 * LEAVE frame, docs/protocol.md section 3.7). Every node that hears it
 * asks gossip_stop_take() whether to stop as well; if so it finishes its
 * current step, writes its checkpoint, logs gossip_stop_format()'s line
 * and leaves in turn, repeating the same reason, so a node that missed
 * the first LEAVE hears it from the next one.
 *
 * Pure: no clocks, sockets or threads; the daemon keeps one struct
 * gossip_stop per run (the first reason taken wins).
 */
#ifndef GOSSIP_STOP_H
#define GOSSIP_STOP_H

#include <stddef.h>
#include <stdint.h>

/* Names on the wire and here: 31 bytes + NUL (as GOSSIP_NAME_MAX). */
#define GOSSIP_STOP_NAME_MAX 32

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

/* Whether a member's LEAVE reason s ends our run, given our own
 * --target-acc in basis points (0: we have none): yes for a TARGET
 * reason whose reached accuracy is at least our target. A node without a
 * target of its own trains its own schedule (its operator asked for
 * steps, epochs or time), and a reason this version does not know is
 * not acted on. */
int gossip_stop_honoured(const struct gossip_stop *s, uint32_t target_bp);

/* The decision with memory: if *held has no reason yet and in is
 * honoured, copy in to *held and return 1 (stop now); else 0 (the first
 * reason taken stays, later LEAVEs change nothing). */
int gossip_stop_take(struct gossip_stop *held, const struct gossip_stop *in,
                     uint32_t target_bp);

/* "stopped: NAME reached target 88.0% at step N (test accuracy 88.12%)"
 * into buf (always NUL-terminated when len > 0); returns snprintf's
 * count. An empty origin prints as "a peer". */
int gossip_stop_format(const struct gossip_stop *s, char *buf, size_t len);

#endif
