/*
 * cluster_metrics.c - the cluster's Prometheus families (docs/operations.md
 * lists them): members by state, every refusal by layer and reason, the
 * per-peer series (labelled by the peer's name), and the exchange counters.
 *
 * Loop thread only, called once per scrape. Counters come from their
 * owners: the protocol core (gossip_stats_get, per-member info), the
 * transport (node_net_stats), the hand-off box (a consistent copy under its
 * lock), the exchange (node_exchange_stats) and the join's count of states
 * sent. It may call cluster.c, never the other way.
 *
 * One refusal family, three layers: "transport" (connections the transport
 * closed or refused before a frame reached the protocol), "protocol"
 * (frames the wire or membership refused; gossip_reject_name) and "merge"
 * (slices and gradients robust merge clipped or refused;
 * gossip_robust_reason_name). Per-peer refusals are only those of frames
 * that authenticated as that peer (gossip.c charges nothing else to a
 * member), so a forger cannot blame someone else.
 */
#include "cluster/cluster_private.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "gossip/codec.h"
#include "service/metrics.h"
#include "train/shuffle.h"

/* Transport refusals: the label and where its count lives. */
struct net_reject {
        const char *reason;
        size_t off; /* offsetof(struct node_net_stats, ...) */
};

#define NET_REJECT(name, field)                                                \
        {                                                                      \
                name, offsetof(struct node_net_stats, field)                   \
        }
static const struct net_reject net_rejects[] = {
    NET_REJECT("oversize", oversize),
    NET_REJECT("undersize", undersize),
    NET_REJECT("over_budget", rx_over_budget),
    NET_REJECT("auth_failed", auth_failures),
    NET_REJECT("hello_timeout", hello_timeouts),
    NET_REJECT("per_address_cap", addr_rejects),
    NET_REJECT("evicted", evictions),
    NET_REJECT("full", accept_rejects),
    NET_REJECT("rx_stall", rx_stalls),
    NET_REJECT("idle_timeout", idle_timeouts),
    NET_REJECT("dgram_oversize", dgram_oversize),
};
#undef NET_REJECT

const char *node_cluster__net_reject(size_t i, const struct node_net_stats *ns,
                                     uint64_t *count)
{
        if (i >= sizeof(net_rejects) / sizeof(net_rejects[0]))
                return NULL;
        *count = *(const uint64_t *)((const char *)ns + net_rejects[i].off);
        return net_rejects[i].reason;
}

static void sample3(struct node_metrics_buf *b, const char *fam,
                    const char *peer, const char *layer, const char *reason,
                    double v)
{
        struct node_metrics_label l[3] = {
            {"peer", peer}, {"layer", layer}, {"reason", reason}};

        if (peer)
                node_metrics_sample(b, fam, l, 3, v);
        else
                node_metrics_sample(b, fam, l + 1, 2, v);
}

/* Protocol refusals (only the slots that have a name) and merge
 * refusals/clips (every reason but "accepted"); peer NULL: node-wide. */
static void sample_rejects(struct node_metrics_buf *b, const char *fam,
                           const char *peer, const uint64_t *proto,
                           const uint64_t *merge)
{
        for (int i = 1; i < GOSSIP_REJECT_SLOTS; i++)
                if (gossip_reject_name(-i))
                        sample3(b, fam, peer, "protocol",
                                gossip_reject_name(-i), (double)proto[i]);
        for (int i = 0; i < GOSSIP_ROBUST_REASONS; i++)
                if (i != GOSSIP_ROBUST_ACCEPTED)
                        sample3(b, fam, peer, "merge",
                                gossip_robust_reason_name(i), (double)merge[i]);
}

static void reject_metrics(struct node_metrics_buf *b,
                           const struct gossip_stats *gs,
                           const struct node_net_stats *ns,
                           const struct node_handoff_stats *hs)
{
        const char *reason;
        uint64_t v;

        node_metrics_family(b, "rejects_total", NODE_METRICS_COUNTER,
                            "Refused (and, for merge, clipped) input by "
                            "layer and reason");
        for (size_t i = 0; (reason = node_cluster__net_reject(i, ns, &v)); i++)
                sample3(b, "rejects_total", NULL, "transport", reason,
                        (double)v);
        sample_rejects(b, "rejects_total", NULL, gs->rejects, hs->robust);
        node_metrics_family(b, "robust_total", NODE_METRICS_COUNTER,
                            "Received slices and gradients by robust-merge "
                            "outcome (accepted included)");
        for (int i = 0; i < GOSSIP_ROBUST_REASONS; i++) {
                struct node_metrics_label l = {"reason",
                                               gossip_robust_reason_name(i)};

                node_metrics_sample(b, "robust_total", &l, 1,
                                    (double)hs->robust[i]);
        }
}

/* members{state}: ourselves included (always alive). */
static void member_metrics(struct node_metrics_buf *b,
                           const struct gossip_member_info *mi, size_t n)
{
        node_metrics_family(b, "members", NODE_METRICS_GAUGE,
                            "Members in each state, ourselves included");
        for (int s = GOSSIP_ALIVE; s <= GOSSIP_LEFT; s++) {
                struct node_metrics_label l = {"state", gossip_state_name(s)};
                size_t k = 0;

                for (size_t i = 0; i < n; i++)
                        k += mi[i].state == s;
                node_metrics_sample(b, "members", &l, 1, (double)k);
        }
}

/* One value of a member for a per-peer family. */
typedef double (*peer_value_fn)(struct node_cluster *c,
                                const struct gossip_member_info *m);

static double v_rtt(struct node_cluster *c, const struct gossip_member_info *m)
{
        (void)c;
        return m->rtt_ms ? m->rtt_ms / 1000.0 : NAN;
}

/* The link estimate (issue 12, gossip/link.h); NaN while the transport has
 * measured nothing toward the peer. */
static double v_goodput(struct node_cluster *c,
                        const struct gossip_member_info *m)
{
        struct gossip_link_estimate e;

        return node_net_peer_link(c->net, &m->addr, &e) == 0 &&
                       e.goodput_Bps > 0
                   ? e.goodput_Bps
                   : NAN;
}

static double v_link_rtt(struct node_cluster *c,
                         const struct gossip_member_info *m)
{
        struct gossip_link_estimate e;

        return node_net_peer_link(c->net, &m->addr, &e) == 0 && e.rtt_us
                   ? e.rtt_us / 1e6
                   : NAN;
}

static double v_bytes_in(struct node_cluster *c,
                         const struct gossip_member_info *m)
{
        (void)c;
        return (double)m->bytes_in;
}

static double v_bytes_out(struct node_cluster *c,
                          const struct gossip_member_info *m)
{
        (void)c;
        return (double)m->bytes_out;
}

static double v_suspect(struct node_cluster *c,
                        const struct gossip_member_info *m)
{
        struct gossip_robust_peer rp;

        return node_handoff_robust_peer(c->h, m->key, &rp) == 0 &&
               gossip_robust_peer_suspect(&rp);
}

static const struct {
        const char *name;
        enum node_metrics_type type;
        const char *help;
        peer_value_fn value;
} peer_families[] = {
    {"peer_rtt_seconds", NODE_METRICS_GAUGE,
     "Smoothed probe round trip (NaN: not probed yet)", v_rtt},
    {"peer_goodput_bytes_per_second", NODE_METRICS_GAUGE,
     "Smoothed goodput of stream frames to the peer (NaN: not measured yet)",
     v_goodput},
    {"peer_link_rtt_seconds", NODE_METRICS_GAUGE,
     "Smoothed TCP round trip to the peer (NaN: not measured yet)", v_link_rtt},
    {"peer_bytes_in_total", NODE_METRICS_COUNTER,
     "Bytes of verified messages from the peer", v_bytes_in},
    {"peer_bytes_out_total", NODE_METRICS_COUNTER,
     "Bytes of messages sent to the peer", v_bytes_out},
    {"peer_suspect_model", NODE_METRICS_GAUGE,
     "1 if more than half of the peer's last 20 contributions were clipped "
     "or refused",
     v_suspect},
};

/* The per-peer series, one family at a time (Prometheus wants a family's
 * samples together). mi[0] is ourselves and is skipped. */
static void peer_metrics(struct node_cluster *c, struct node_metrics_buf *b,
                         const struct gossip_member_info *mi, size_t n)
{
        static const uint64_t none[GOSSIP_ROBUST_REASONS];
        struct gossip_robust_peer rp;

        node_metrics_family(b, "peer_state", NODE_METRICS_GAUGE,
                            "1 for the peer's current membership state");
        for (size_t i = 1; i < n; i++)
                for (int s = GOSSIP_ALIVE; s <= GOSSIP_LEFT; s++) {
                        struct node_metrics_label l[2] = {
                            {"peer", node_view_member_name(&mi[i])},
                            {"state", gossip_state_name(s)}};

                        node_metrics_sample(b, "peer_state", l, 2,
                                            mi[i].state == s);
                }
        for (size_t f = 0; f < sizeof(peer_families) / sizeof(peer_families[0]);
             f++) {
                node_metrics_family(b, peer_families[f].name,
                                    peer_families[f].type,
                                    peer_families[f].help);
                for (size_t i = 1; i < n; i++) {
                        struct node_metrics_label l = {
                            "peer", node_view_member_name(&mi[i])};

                        node_metrics_sample(b, peer_families[f].name, &l, 1,
                                            peer_families[f].value(c, &mi[i]));
                }
        }
        node_metrics_family(b, "peer_rejects_total", NODE_METRICS_COUNTER,
                            "Refused or clipped input that authenticated as "
                            "the peer, by layer and reason");
        for (size_t i = 1; i < n; i++) {
                int have = node_handoff_robust_peer(c->h, mi[i].key, &rp) == 0;

                sample_rejects(b, "peer_rejects_total",
                               node_view_member_name(&mi[i]), mi[i].rejects,
                               have ? rp.count : none);
        }
}

static void exchange_metrics(struct node_cluster *c, struct node_metrics_buf *b,
                             const struct gossip_stats *gs,
                             const struct node_handoff_stats *hs)
{
        const struct gossip_merge_stats *ms = &hs->merge;
        const struct node_exchange_stats *xs = node_exchange_stats(c->ex);
        struct gossip_crl crl;

        node_metrics_counter(b, "gossip_bytes_in_total",
                             "Bytes of verified protocol messages received",
                             gs->bytes_in);
        node_metrics_counter(b, "gossip_bytes_out_total",
                             "Bytes of protocol messages sent", gs->bytes_out);
        node_metrics_counter(b, "gossip_msgs_in_total",
                             "Protocol messages received", gs->msgs_in);
        node_metrics_counter(b, "gossip_msgs_out_total",
                             "Protocol messages sent", gs->msgs_out);
        node_metrics_counter(b, "gossip_syncs_received_total",
                             "Anti-entropy SYNCs and JOINs received",
                             gs->syncs_received);
        node_metrics_counter(b, "gossip_syncs_same_total",
                             "SYNC requests whose view digest equalled ours "
                             "(answered without a view)",
                             gs->syncs_same);
        node_metrics_counter(b, "gossip_suspects_total", "Suspicions raised",
                             gs->suspects_raised);
        node_metrics_counter(b, "gossip_deaths_total", "Members declared dead",
                             gs->deaths_declared);
        node_metrics_counter(b, "settings_refusals_total",
                             "Member lives refused for other cluster "
                             "settings (each logged once)",
                             c->refusals);
        node_metrics_gauge(b, "crl_sequence",
                           "Sequence of the authority's revocation list "
                           "held (0: none); equal on every member once a "
                           "new list has spread",
                           gossip_crl_get(c->g, &crl) == 0 ? (double)crl.seq
                                                           : 0);
        node_metrics_counter(b, "grads_sent_total",
                             "Gradients sent to a partner", xs->grads_sent);
        node_metrics_counter(b, "grads_send_failures_total",
                             "Gradients the protocol refused to send",
                             xs->grads_send_fail);
        node_metrics_counter(b, "grads_merged_total",
                             "Received gradients merged", ms->merged);
        node_metrics_counter(b, "grads_late_total",
                             "Gradients merged although late (within S)",
                             ms->late);
        node_metrics_counter(b, "grads_stale_total",
                             "Gradients dropped as too stale",
                             ms->dropped_stale + ms->dropped_future);
        node_metrics_counter(b, "params_averaged_total",
                             "Parameter sets averaged in", hs->params_applied);
        node_metrics_gauge(b, "exchange_degraded",
                           "1 when the node cannot average (slices too old "
                           "or none arriving; see gossipctl train)",
                           hs->exchange.verdict != GOSSIP_PLAN_HEALTHY);
        node_metrics_gauge(b, "exchange_used_ratio",
                           "Smoothed share of received slices averaged",
                           hs->exchange.slices ? hs->exchange.used : NAN);
        node_metrics_gauge(b, "exchange_wait_timeout_ratio",
                           "Smoothed share of averaging waits timed out",
                           hs->exchange.waits ? hs->exchange.timeouts : NAN);
        node_metrics_gauge(b, "exchange_avg_every",
                           "Averaging period in force, steps (--adapt)",
                           hs->avg_every);
        node_metrics_gauge(b, "exchange_slice_bytes_per_element",
                           "Bytes per element of the slices we send now: "
                           "4 fp32, 2 fp16, 1 int8 (--adapt)",
                           xs->adapt.codec == GOSSIP_CODEC_INT8   ? 1
                           : xs->adapt.codec == GOSSIP_CODEC_FP32 ? 4
                                                                  : 2);
        node_metrics_gauge(b, "exchange_cpu_ratio",
                           "The exchange's share of our CPU time in the "
                           "last window measured (both threads; --adapt)",
                           xs->cpu_pct >= 0 ? xs->cpu_pct / 100.0 : NAN);
        node_metrics_counter(b, "exchange_catch_ups_total",
                             "Times every recent partner was far ahead and "
                             "we skipped steps to their pace",
                             hs->catch_ups);
        node_metrics_counter(b, "exchange_adaptations_total",
                             "Changes of slice codec or period (--adapt)",
                             xs->adapt_changes);
        node_metrics_counter(b, "samples_refused_total",
                             "SAMPLES frames refused: wrong length or label, "
                             "or no --shuffle-samples here",
                             xs->samples_refused);
        node_metrics_counter(b, "state_transfers_sent_total",
                             "Model states sent to joining peers",
                             c->join.states_sent);
}

void node_cluster_metrics(struct node_cluster *c, struct node_trainer *t,
                          struct node_metrics_buf *b)
{
        struct gossip_stats gs;
        struct node_net_stats ns;
        struct node_handoff_stats hs;
        struct gossip_member_info *mi;
        size_t n = 0;

        (void)t;
        gossip_stats_get(c->g, &gs);
        node_net_stats(c->net, &ns);
        node_handoff_stats(c->h, &hs);
        mi = node_view_members(&c->view, &n);
        if (mi) {
                member_metrics(b, mi, n);
                peer_metrics(c, b, mi, n);
        }
        free(mi);
        exchange_metrics(c, b, &gs, &hs);
        if (node_handoff_shuffle(c->h)) /* --shuffle-samples */
                node_shuffle_metrics(node_handoff_shuffle(c->h), b);
        reject_metrics(b, &gs, &ns, &hs);
        node_metrics_counter(b, "net_frames_dropped_total",
                             "Stream frames dropped by the transport",
                             ns.frames_dropped);
        node_metrics_counter(b, "net_connect_failures_total",
                             "Outgoing TCP connects that failed",
                             ns.connect_failures);
}
