/*
 * stall.c - the longest step and the slow ones (stall.h).
 *
 * Invariants: n <= NODE_STALL_WINDOW; the ring holds the last n step
 * times (the oldest at next once full) and sorted[0..n) the same times
 * in ascending order, so the median is read, not computed; tokens_milli
 * <= NODE_STALL_EVENT_BURST * 1000.
 */
#include "train/stall.h"

#include <string.h>

void node_stall_init(struct node_stall *s)
{
        memset(s, 0, sizeof(*s));
        s->tokens_milli = (uint64_t)NODE_STALL_EVENT_BURST * 1000;
}

double node_stall_pace_us(const struct node_stall *s)
{
        if (s->n < NODE_STALL_WARMUP)
                return 0;
        if (s->n % 2)
                return s->sorted[s->n / 2];
        return 0.5 * (s->sorted[s->n / 2 - 1] + s->sorted[s->n / 2]);
}

/* Refill the bucket up to now (a thousandth of an event per
 * NODE_STALL_EVENT_REFILL_MS us; the remainder carried, not lost); 1 if
 * an event may go (one token taken). */
static int bucket_take(struct node_stall *s, uint64_t now_us)
{
        const uint64_t cap = (uint64_t)NODE_STALL_EVENT_BURST * 1000;

        if (!s->bucket_started) {
                s->bucket_started = 1;
                s->bucket_at_us = now_us;
        } else if (now_us > s->bucket_at_us) {
                uint64_t add =
                    (now_us - s->bucket_at_us) / NODE_STALL_EVENT_REFILL_MS;

                s->tokens_milli += add;
                s->bucket_at_us += add * NODE_STALL_EVENT_REFILL_MS;
                if (s->tokens_milli >= cap) {
                        s->tokens_milli = cap;
                        s->bucket_at_us = now_us;
                }
        }
        if (s->tokens_milli < 1000)
                return 0;
        s->tokens_milli -= 1000;
        return 1;
}

/* Remove one copy of v from sorted[0..n) (it is there). */
static void sorted_remove(struct node_stall *s, double v)
{
        unsigned i = 0;

        while (i < s->n && s->sorted[i] != v)
                i++;
        if (i == s->n)
                return;
        memmove(&s->sorted[i], &s->sorted[i + 1],
                (s->n - i - 1) * sizeof(s->sorted[0]));
        s->n--;
}

/* Insert v into sorted[0..n), n < NODE_STALL_WINDOW. */
static void sorted_insert(struct node_stall *s, double v)
{
        unsigned i = s->n;

        while (i > 0 && s->sorted[i - 1] > v) {
                s->sorted[i] = s->sorted[i - 1];
                i--;
        }
        s->sorted[i] = v;
        s->n++;
}

/* The window moves on by one step: the oldest time leaves it. */
static void window_add(struct node_stall *s, double us)
{
        if (s->n == NODE_STALL_WINDOW)
                sorted_remove(s, s->ring[s->next]);
        s->ring[s->next] = us;
        s->next = (s->next + 1) % NODE_STALL_WINDOW;
        sorted_insert(s, us);
}

int node_stall_note(struct node_stall *s, uint64_t step, double us,
                    double wait_us, uint64_t now_us,
                    struct node_stall_slow *out)
{
        double pace = node_stall_pace_us(s);
        int slow;

        s->st.steps++;
        if (pace > 0 && us > s->st.max_us) { /* judged steps only */
                s->st.max_us = us;
                s->st.max_step = step;
                s->st.max_wait_us = wait_us;
        }
        if (pace > 0 && us > s->win_max_us)
                s->win_max_us = us;
        window_add(s, us);
        s->st.pace_us = node_stall_pace_us(s);
        slow = pace > 0 && us > NODE_STALL_FACTOR * pace;
        if (!slow)
                return 0;
        s->st.slow++;
        s->st.slow_us += us;
        s->st.slow_wait_us += wait_us;
        s->win_slow++;
        if (!bucket_take(s, now_us)) {
                s->held++;
                if (us > s->held_max_us) {
                        s->held_max_us = us;
                        s->held_max_step = step;
                }
                return 0;
        }
        out->step = step;
        out->us = us;
        out->pace_us = pace;
        out->wait_us = wait_us;
        out->held = s->held;
        out->held_max_us = s->held_max_us;
        out->held_max_step = s->held_max_step;
        s->held = 0;
        s->held_max_us = 0;
        s->held_max_step = 0;
        return 1;
}

void node_stall_window_take(struct node_stall *s, double *max_us,
                            uint64_t *slow)
{
        *max_us = s->win_max_us;
        *slow = s->win_slow;
        s->win_max_us = 0;
        s->win_slow = 0;
}
