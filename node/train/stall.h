/*
 * stall.h - how long the training stood still: the node's longest step
 * and its slow steps, measured against its own pace.
 *
 * The issue-34 target reads "no stall longer than 2 steps' time on any
 * survivor" (a partner stopped or killed, the others go on). A step's
 * time is the wall time of one training step as the trainer runs it:
 * the local work, the exchange's waits for partners' slices, a catch-up
 * or a refetch; evaluations and checkpoints run between steps and are
 * not in it (a scheduled evaluation is not a stall). The pace is the
 * median of the last NODE_STALL_WINDOW such times; a step is slow when
 * it took longer than NODE_STALL_FACTOR times the median of the steps
 * before it. A median, not a mean: the slow steps it should flag must
 * not raise the bar they are judged against.
 *
 * Each slow step may be told in the event log, but not every one: a node
 * that is slow at every step (its partners gone, its CPU taken) would
 * write one line per step. A token bucket allows NODE_STALL_EVENT_BURST
 * events at once and one more per NODE_STALL_EVENT_REFILL_MS; the slow
 * steps held back are counted and the longest of them rides on the next
 * event told.
 *
 * Pure: no clock, no lock, no I/O; times are numbers the caller passes
 * (microseconds). One struct per trainer, touched by its thread only.
 */
#ifndef NODE_STALL_H
#define NODE_STALL_H

#include <stdint.h>

enum {
        /* steps the pace is the median of: 128, as the hand-off box's
         * pace (gossip_adapt_pace), some 4-6 s on a Pi-class device */
        NODE_STALL_WINDOW = 128,
        /* steps timed before any is judged: the first steps (kernels
         * warming, the first slices) have no pace to be judged by */
        NODE_STALL_WARMUP = 16,
        /* slow: longer than this many times the pace (the target's
         * "2 steps' time") */
        NODE_STALL_FACTOR = 2,
        /* events: at most this many at once ... */
        NODE_STALL_EVENT_BURST = 8,
        /* ... and one more every this many ms (a node slow at every step
         * writes one line per 5 s, not one per step) */
        NODE_STALL_EVENT_REFILL_MS = 5000,
};

/* Counters of a run (the stats, gossipctl train, /metrics, the stop
 * line). Times in microseconds. */
struct node_stall_stats {
        uint64_t steps;      /* steps timed */
        uint64_t slow;       /* of the judged ones, slower than 2 x pace */
        double max_us;       /* longest judged step (0: none yet) */
        uint64_t max_step;   /* the step it made */
        double max_wait_us;  /* of it, waiting for partners */
        double slow_us;      /* the slow steps' time, in all */
        double slow_wait_us; /* of it, waiting for partners */
        double pace_us;      /* the median now (0: under the warm-up) */
};

/* One slow step to tell (node_stall_note). */
struct node_stall_slow {
        uint64_t step;          /* the step it made */
        double us, pace_us;     /* its time; the median it was judged by */
        double wait_us;         /* of its time, waiting for partners */
        uint64_t held;          /* slow steps not told since the last event */
        double held_max_us;     /* the longest of them (0: none) */
        uint64_t held_max_step; /* the step it made */
};

struct node_stall {
        double ring[NODE_STALL_WINDOW];   /* in order of arrival */
        double sorted[NODE_STALL_WINDOW]; /* the same, ascending */
        unsigned n, next;
        struct node_stall_stats st;
        /* since the last node_stall_window_take */
        double win_max_us;
        uint64_t win_slow;
        /* event bucket, in thousandths of an event */
        uint64_t tokens_milli, bucket_at_us;
        int bucket_started;
        uint64_t held;
        double held_max_us;
        uint64_t held_max_step;
};

/* Empty s: no step timed, a full bucket. */
void node_stall_init(struct node_stall *s);

/* Note one step: it made `step`, took us, of which wait_us waiting for
 * partners, and ended at now_us (any monotonic clock, for the bucket).
 * Returns 1 when the step was slow and an event is due (*out filled),
 * else 0 (a slow step held back is counted for the next event). */
int node_stall_note(struct node_stall *s, uint64_t step, double us,
                    double wait_us, uint64_t now_us,
                    struct node_stall_slow *out);

/* The longest step and the slow ones since the last call (the progress
 * window), then start a new window. */
void node_stall_window_take(struct node_stall *s, double *max_us,
                            uint64_t *slow);

/* The median of the last window's steps (0 under NODE_STALL_WARMUP). */
double node_stall_pace_us(const struct node_stall *s);

#endif
