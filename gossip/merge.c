/*
 * merge.c - gradient merge buffer and parameter averaging (see merge.h).
 *
 * Invariants: sum[i] is the sum of the accepted values at element i since
 * the last apply and cnt[i] how many there were (<= npending <=
 * GOSSIP_MERGE_MAX_PENDING, so a uint16_t cannot overflow); an offer is
 * checked completely (shape, step, finiteness, duplicate) before it touches
 * the buffer, so a rejected offer changes nothing but a counter.
 */
#include <stdlib.h>
#include <string.h>

#include "gossip/merge.h"

#include "base/gn_finite.h"
#include "base/gn_hot.h"

int gossip_merge_init(struct gossip_merge *m, size_t n, uint64_t staleness)
{
        if (!m || n == 0)
                return GOSSIP_EINVAL;
        memset(m, 0, sizeof(*m));
        m->sum = calloc(n, sizeof(*m->sum));
        m->cnt = calloc(n, sizeof(*m->cnt));
        if (!m->sum || !m->cnt) {
                gossip_merge_free(m);
                return GOSSIP_ENOMEM;
        }
        m->n = n;
        m->staleness = staleness;
        return 0;
}

void gossip_merge_free(struct gossip_merge *m)
{
        if (!m)
                return;
        free(m->sum);
        free(m->cnt);
        m->sum = NULL;
        m->cnt = NULL;
        m->n = 0;
        m->npending = 0;
}

void gossip_merge_set_step(struct gossip_merge *m, uint64_t step)
{
        m->current = step;
}

/* Decide whether an offer may enter; counts the reason when not. */
static int offer_check(struct gossip_merge *m, const uint8_t *from,
                       uint64_t step, size_t lo, const float *g, size_t count)
{
        if (!g || !from || lo > m->n || count > m->n - lo || count == 0) {
                m->st.dropped_shape++;
                return GOSSIP_EMISMATCH;
        }
        if (step < m->current && m->current - step > m->staleness) {
                m->st.dropped_stale++;
                return GOSSIP_ESTALE;
        }
        if (step > m->current && step - m->current > m->staleness) {
                m->st.dropped_future++;
                return GOSSIP_ESTALE;
        }
        for (size_t i = 0; i < m->npending; i++) {
                if (m->pending[i].step == step &&
                    memcmp(m->pending[i].from, from, GOSSIP_KEY_BYTES) == 0) {
                        m->st.dropped_dup++;
                        return GOSSIP_EREPLAY;
                }
        }
        if (m->npending == GOSSIP_MERGE_MAX_PENDING) {
                m->st.dropped_full++;
                return GOSSIP_ETOOBIG;
        }
        if (!gn_all_finite(g, count)) {
                m->st.dropped_nonfinite++;
                return GOSSIP_ENONFINITE;
        }
        return 0;
}

int gossip_merge_offer_range(struct gossip_merge *m,
                             const uint8_t from[GOSSIP_KEY_BYTES],
                             uint64_t step, size_t lo, const float *g,
                             size_t count)
{
        struct gossip_merge_pending *p;
        int rc;

        if (!m || !m->sum)
                return GOSSIP_EINVAL;
        m->st.offers++;
        rc = offer_check(m, from, step, lo, g, count);
        if (rc)
                return rc;
        for (size_t i = 0; i < count; i++) {
                m->sum[lo + i] += g[i];
                m->cnt[lo + i]++;
        }
        p = &m->pending[m->npending++];
        memcpy(p->from, from, GOSSIP_KEY_BYTES);
        p->step = step;
        m->st.accepted++;
        if (step < m->current)
                m->st.late++;
        return 0;
}

int gossip_merge_offer(struct gossip_merge *m,
                       const uint8_t from[GOSSIP_KEY_BYTES], uint64_t step,
                       const float *g, size_t n)
{
        if (m && m->sum && n != m->n) {
                m->st.offers++;
                m->st.dropped_shape++;
                return GOSSIP_EMISMATCH;
        }
        return gossip_merge_offer_range(m, from, step, 0, g, n);
}

int gossip_merge_apply(struct gossip_merge *m, uint64_t current_step,
                       float *own, size_t n)
{
        int merged;

        if (!m || !m->sum || !own)
                return GOSSIP_EINVAL;
        if (n != m->n)
                return GOSSIP_EMISMATCH;
        m->st.applies++;
        merged = (int)m->npending;
        if (merged) {
                for (size_t i = 0; i < n; i++) {
                        if (m->cnt[i] == 0)
                                continue;
                        own[i] = (own[i] + m->sum[i]) / (float)(1 + m->cnt[i]);
                        m->sum[i] = 0.0f;
                        m->cnt[i] = 0;
                }
        }
        m->st.merged += (uint64_t)merged;
        m->npending = 0;
        m->current = current_step;
        return merged;
}

void gossip_merge_stats_get(const struct gossip_merge *m,
                            struct gossip_merge_stats *out)
{
        *out = m->st;
}

GN_HOT int gossip_merge_average_params(float *mine, const float *theirs,
                                       size_t n, float weight)
{
        if (!(weight >= 0.0f && weight <= 1.0f) || (n && (!mine || !theirs)))
                return GOSSIP_EINVAL;
        if (!gn_all_finite(theirs, n))
                return GOSSIP_ENONFINITE;
        /* This form is exact at weight 0 and 1, and at 0.5 it rounds once,
         * like (a + b) / 2, without overflowing near FLT_MAX. */
        for (size_t i = 0; i < n; i++)
                mine[i] = (1.0f - weight) * mine[i] + weight * theirs[i];
        return 0;
}

GN_HOT int gossip_merge_average_delta(float *mine, const float *mine_then,
                                      const float *theirs, size_t n,
                                      float weight)
{
        if (!(weight >= 0.0f && weight <= 1.0f) ||
            (n && (!mine || !mine_then || !theirs)))
                return GOSSIP_EINVAL;
        for (size_t i = 0; i < n; i++)
                mine[i] += weight * (theirs[i] - mine_then[i]);
        return 0;
}

int gossip_merge_average_due(uint64_t step, uint64_t every)
{
        return every != 0 && step != 0 && step % every == 0;
}
