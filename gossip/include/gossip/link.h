/*
 * link.h - the link estimator: per peer, a smoothed goodput (bytes/s) and
 * round-trip time (microseconds) taken from the real traffic, for the
 * exchange to adapt what it sends to the link it has (issue 12).
 *
 * Pure: no sockets, clocks or threads. The caller (node/net/net.c, or a
 * virtual-time test) owns one struct gossip_link per destination and
 * passes every time in as microseconds of one monotonic clock.
 *
 * Where samples come from, and why they are honest on TCP:
 *  - gossip_link_frame_done() at each write completion of a stream frame,
 *    with the bytes still queued behind it. While our queue to the peer
 *    stays non-empty the socket is always fed, so successive completions
 *    pace at the link's rate: the bytes completed between two completions
 *    over the time between them is a goodput sample. The transport keeps
 *    the kernel's unsent queue short (TCP_NOTSENT_LOWAT), so a completion
 *    means the bytes are close to leaving. A span begins at a completion
 *    that leaves the queue non-empty and is sampled once it is at least
 *    GOSSIP_LINK_SPAN_MIN_US long; a span cut short by the queue running
 *    empty is discarded. The completion of a frame written into an idle
 *    socket is never a sample: the kernel absorbs up to a congestion
 *    window plus the unsent low-water mark before it completes, so such a
 *    time over-states the rate (it is not even a lower bound).
 *  - gossip_link_peer_sample() with the rate at which the peer received
 *    our frames, as it measured them and told us (docs/protocol.md, PARAMS
 *    keys 17-18; its side is struct gossip_link_rx below). The receiver
 *    times only the bytes after the read that brought a frame's first
 *    ones, from that read to the frame's last, so the idle time between
 *    frames is never in it: a real sample even when we idle between
 *    slices (averaging period K > 1), counted in samples, and it may
 *    lower the estimate as well as raise it.
 *  - gossip_link_app_sample() for a rate measured while we were not
 *    keeping the link busy: the kernel's ACK-based delivery rate (Linux
 *    tcpi_delivery_rate) when our queue is empty. Such a sample is a
 *    lower bound on what the link carries: it may raise the estimate,
 *    never lower it (tcp_rate.c's and BBR's app-limited rule). It is
 *    biased low for a frame sent into an idle connection (about B /
 *    (B/R + RTT)) and tcp_rate.c keeps its highest app-limited sample, so
 *    it sticks at one value over many frames (docs/design.md, "What sets
 *    K now"). Hence: once a destination has had one peer-reported sample
 *    these are ignored (they would pull the estimate back up to their
 *    stuck maximum after the peer's samples lowered it); a peer that never
 *    reports (an older version) keeps them.
 *  - gossip_link_rtt_sample() with an RTT measured elsewhere (the kernel's
 *    smoothed tcpi_rtt on the connection, or a modelled link's).
 *
 * Smoothing: both values are exponentially weighted moving averages in
 * continuous time, with time constant GOSSIP_LINK_TAU_US: a sample that
 * covers dt microseconds (the time since the previous RTT sample) moves
 * the estimate by a = 1 - exp(-dt / tau) of the way to it. So the weight
 * per second does not depend on how often samples come, and after a step
 * change in the link the estimate has closed 63% of the gap within tau and
 * 95% within 3 tau. For goodput, dt is the time the sample covers, so
 * tau counts time the link was seen busy: an idle link keeps its last
 * estimate (and updated_us says how old it is). The goodput average is
 * bias-corrected (the weights given so far are divided out, as Adam does
 * for its moments), so its first samples are averaged over the time they
 * cover rather than the first one standing for the rest; the RTT's first
 * sample sets it.
 *
 * Confidence: samples counts backlogged goodput samples (our own spans
 * and the peer's reports); the estimate is "confident" from
 * GOSSIP_LINK_CONFIDENT of them on. A link that never backlogs and whose
 * peer never reports has only raise-only samples: its goodput is a lower
 * bound and samples stays 0 (the link was never the bottleneck).
 *
 * The receiver's side (struct gossip_link_rx): per sending peer, the
 * bytes of its stream frames that arrived after each frame's first read
 * and the time from that read to the frame's completion, summed over
 * frames of at least GOSSIP_LINK_APP_FRAME_MIN until the sum covers
 * GOSSIP_LINK_SPAN_MIN_US. Summed, because one int8 slice at 100 Mbit/s
 * arrives in ~8 ms (too short to be a sample alone, for the reasons of
 * GOSSIP_LINK_SPAN_MIN_US), and the sum of busy spans is busy time, as
 * the sender's own spans are. A frame that arrived in one read says
 * nothing of the rate and is skipped.
 */
#ifndef GOSSIP_LINK_H
#define GOSSIP_LINK_H

#include <stdint.h>

/* Tunables, with their reasons. */
enum {
        /* 1 s: a cluster round is one to a few steps (10-200 ms), so the
         * adaptation sees a change within a handful of rounds, while one
         * slow step, a loop stall or a burst of ACKs (samples are 10-160
         * ms) moves the estimate by a few percent only. */
        GOSSIP_LINK_TAU_US = 1000000,
        /* A goodput sample spans at least 10 ms: the loop notices a
         * completion up to ~1 ms late (a decode or a signature in the way)
         * and TCP acknowledges in bursts, both a few percent of 10 ms. At
         * 10 Mbit/s one 200 KB slice is 160 ms, at 100 Mbit/s 16 ms, so
         * large frames give one sample each. */
        GOSSIP_LINK_SPAN_MIN_US = 10000,
        /* Four backlogged samples: the link seen busy for at least 40 ms
         * and over several frames, so one odd completion (a loop stall,
         * a burst of ACKs) cannot make an estimate confident alone. */
        GOSSIP_LINK_CONFIDENT = 4,
        /* The kernel's delivery rate after a frame under 32 KB is no
         * sample: such a frame is a few segments, paced by ACK clocks and
         * slow start, and its rate says little of the link. The join's
         * 1 KB frames gave 0.3 Mbit/s on a 10 Mbit/s lab link; as the
         * first estimate, that made two nodes choose int8 every 64 steps
         * (test_slowlink, once in CI). Slices are 100-800 KB. */
        GOSSIP_LINK_APP_FRAME_MIN = 32 << 10,
};

struct gossip_link_estimate {
        double goodput_Bps;    /* smoothed; 0 before the first sample */
        uint32_t rtt_us;       /* smoothed; 0 before the first sample */
        uint64_t samples;      /* backlogged goodput samples taken */
        uint64_t raised;       /* app-limited samples that raised it */
        uint64_t rtt_samples;  /* RTT samples taken */
        uint64_t peer_samples; /* of samples, reported by the receiver */
        uint64_t updated_us;   /* time of the last goodput sample used */
        int confident;         /* samples >= GOSSIP_LINK_CONFIDENT */
};

/* One destination's estimator; caller-owned, zeroed by init. */
struct gossip_link {
        double goodput_Bps, rtt_us;
        double rate_num, rate_den; /* the bias-corrected EWMA's sums */
        uint64_t samples, raised, rtt_samples, peer_samples;
        uint64_t updated_us, rtt_us_at;
        /* the backlogged span in progress (frame completions) */
        int spanning;
        uint64_t span_start_us, span_bytes;
};

void gossip_link_init(struct gossip_link *l);

/* A goodput sample: bytes delivered over span_us microseconds ending at
 * now_us. app_limited: measured while the sender did not keep the link
 * busy, so only a lower bound; it raises the estimate or is ignored.
 * A span of 0 is ignored. */
void gossip_link_rate_sample(struct gossip_link *l, uint64_t now_us,
                             double bytes, uint64_t span_us, int app_limited);

/* The kernel's delivery rate (bytes/s over span_us ending at now_us)
 * after a stream frame of frame_bytes completed with nothing of ours
 * queued behind it: an app-limited sample, a lower bound. Frames under
 * GOSSIP_LINK_APP_FRAME_MIN are ignored, and so is every such sample
 * once the destination has reported a rate (gossip_link_peer_sample). */
void gossip_link_app_sample(struct gossip_link *l, uint64_t now_us,
                            double rate_Bps, uint64_t span_us,
                            uint64_t frame_bytes);

/* The peer received our frames at rate_Bps over span_us of busy time
 * (its report, taken at now_us): a backlogged sample, which may lower the
 * estimate; from now on the kernel's app-limited samples are ignored. A
 * span over GOSSIP_LINK_TAU_US counts as tau (a report's weight is at
 * most a time constant's); a rate or span of 0 is ignored. */
void gossip_link_peer_sample(struct gossip_link *l, uint64_t now_us,
                             double rate_Bps, uint64_t span_us);

/* A round-trip time sample (0 is ignored). */
void gossip_link_rtt_sample(struct gossip_link *l, uint64_t now_us,
                            uint32_t rtt_us);

/* A stream frame of bytes completed its write at now_us, with
 * queued_after bytes of later frames still accepted and not completed.
 * Takes a backlogged goodput sample when one is due (see above). */
void gossip_link_frame_done(struct gossip_link *l, uint64_t now_us,
                            uint64_t bytes, uint64_t queued_after);

/* The stream was interrupted (a connection lost or replaced, frames
 * dropped): the span in progress is discarded, the estimate kept. */
void gossip_link_break(struct gossip_link *l);

/* The current estimate. */
void gossip_link_get(const struct gossip_link *l,
                     struct gossip_link_estimate *out);

/* The receiver's side, one per sending peer; caller-owned, zeroed. */
struct gossip_link_rx {
        uint64_t bytes;   /* bytes after each frame's first read, summed */
        uint64_t span_us; /* from each first read to its completion */
};

/* A stream frame of frame_bytes from the peer completed; of them,
 * bytes_after_first arrived after the read that brought its first ones,
 * over span_us from that read to the completing one. Frames under
 * GOSSIP_LINK_APP_FRAME_MIN, or with no byte or no time after the first
 * read, are skipped. The sum is capped at GOSSIP_LINK_TAU_US, scaled so
 * the rate is kept (a peer we have not reported to for long). */
void gossip_link_rx_frame(struct gossip_link_rx *rx, uint64_t frame_bytes,
                          uint64_t bytes_after_first, uint64_t span_us);

/* Take the sample to report: 1 with *rate_Bps (1 .. 2^32-1) and *span_us
 * set and rx emptied when the sum covers GOSSIP_LINK_SPAN_MIN_US; 0 and
 * nothing changed before that. */
int gossip_link_rx_take(struct gossip_link_rx *rx, uint32_t *rate_Bps,
                        uint32_t *span_us);

#endif
