/*
 * link.c - the link estimator (contract, sources of samples and the
 * smoothing rule in link.h). Pure: times are numbers the caller passes.
 * Each struct gossip_link belongs to one caller (the transport keeps one
 * per destination on the loop thread).
 */
#include "gossip/link.h"

#include <math.h>
#include <string.h>

/* The EWMA weight of a sample that covers dt microseconds. */
static double sample_weight(uint64_t dt_us)
{
        return 1.0 - exp(-(double)dt_us / (double)GOSSIP_LINK_TAU_US);
}

void gossip_link_init(struct gossip_link *l)
{
        memset(l, 0, sizeof(*l));
}

void gossip_link_rate_sample(struct gossip_link *l, uint64_t now_us,
                             double bytes, uint64_t span_us, int app_limited)
{
        double rate, a;
        if (span_us == 0 || !(bytes >= 0))
                return;
        rate = bytes * 1e6 / (double)span_us;
        if (app_limited) {
                if (rate <= l->goodput_Bps)
                        return; /* a lower bound below what we know */
                l->raised++;
        } else {
                l->samples++;
        }
        /* bias-corrected: the weights given so far sum to den, so the
         * first samples average (bytes over time) instead of the first
         * one standing for all of them */
        a = sample_weight(span_us);
        l->rate_num = l->rate_num * (1 - a) + a * rate;
        l->rate_den = l->rate_den * (1 - a) + a;
        l->goodput_Bps = l->rate_num / l->rate_den;
        l->updated_us = now_us;
}

void gossip_link_app_sample(struct gossip_link *l, uint64_t now_us,
                            double rate_Bps, uint64_t span_us,
                            uint64_t frame_bytes)
{
        if (frame_bytes < GOSSIP_LINK_APP_FRAME_MIN || l->peer_samples > 0)
                return; /* too short, or the peer's own reports rule */
        gossip_link_rate_sample(l, now_us, rate_Bps * (double)span_us / 1e6,
                                span_us, 1);
}

void gossip_link_peer_sample(struct gossip_link *l, uint64_t now_us,
                             double rate_Bps, uint64_t span_us)
{
        if (!(rate_Bps > 0) || span_us == 0)
                return;
        if (span_us > GOSSIP_LINK_TAU_US)
                span_us = GOSSIP_LINK_TAU_US;
        l->peer_samples++;
        gossip_link_rate_sample(l, now_us, rate_Bps * (double)span_us / 1e6,
                                span_us, 0);
}

void gossip_link_rtt_sample(struct gossip_link *l, uint64_t now_us,
                            uint32_t rtt_us)
{
        if (rtt_us == 0)
                return;
        if (l->rtt_samples == 0 || now_us < l->rtt_us_at)
                l->rtt_us = rtt_us;
        else
                l->rtt_us += sample_weight(now_us - l->rtt_us_at) *
                             ((double)rtt_us - l->rtt_us);
        l->rtt_samples++;
        l->rtt_us_at = now_us;
}

void gossip_link_frame_done(struct gossip_link *l, uint64_t now_us,
                            uint64_t bytes, uint64_t queued_after)
{
        if (l->spanning && now_us >= l->span_start_us) {
                /* this frame was queued before the span began: the socket
                 * was fed all along */
                l->span_bytes += bytes;
                if (now_us - l->span_start_us >= GOSSIP_LINK_SPAN_MIN_US) {
                        gossip_link_rate_sample(l, now_us,
                                                (double)l->span_bytes,
                                                now_us - l->span_start_us, 0);
                        l->span_start_us = now_us;
                        l->span_bytes = 0;
                }
        }
        if (queued_after == 0) {
                l->spanning = 0; /* a short tail is not a full sample */
        } else if (!l->spanning || now_us < l->span_start_us) {
                l->spanning = 1;
                l->span_start_us = now_us;
                l->span_bytes = 0;
        }
}

void gossip_link_break(struct gossip_link *l)
{
        l->spanning = 0;
}

void gossip_link_get(const struct gossip_link *l,
                     struct gossip_link_estimate *out)
{
        out->goodput_Bps = l->goodput_Bps;
        out->rtt_us = (uint32_t)(l->rtt_us + 0.5);
        out->samples = l->samples;
        out->raised = l->raised;
        out->rtt_samples = l->rtt_samples;
        out->peer_samples = l->peer_samples;
        out->updated_us = l->updated_us;
        out->confident = l->samples >= GOSSIP_LINK_CONFIDENT;
}

void gossip_link_rx_frame(struct gossip_link_rx *rx, uint64_t frame_bytes,
                          uint64_t bytes_after_first, uint64_t span_us)
{
        if (frame_bytes < GOSSIP_LINK_APP_FRAME_MIN || bytes_after_first == 0 ||
            span_us == 0)
                return;
        rx->bytes += bytes_after_first;
        rx->span_us += span_us;
        if (rx->span_us > GOSSIP_LINK_TAU_US) {
                rx->bytes = (uint64_t)((double)rx->bytes * GOSSIP_LINK_TAU_US /
                                       (double)rx->span_us);
                rx->span_us = GOSSIP_LINK_TAU_US;
        }
}

int gossip_link_rx_take(struct gossip_link_rx *rx, uint32_t *rate_Bps,
                        uint32_t *span_us)
{
        double rate;
        if (rx->span_us < GOSSIP_LINK_SPAN_MIN_US)
                return 0;
        rate = (double)rx->bytes * 1e6 / (double)rx->span_us;
        *rate_Bps = rate < 1            ? 1
                    : rate > UINT32_MAX ? UINT32_MAX
                                        : (uint32_t)(rate + 0.5);
        *span_us = (uint32_t)rx->span_us;
        rx->bytes = rx->span_us = 0;
        return 1;
}
