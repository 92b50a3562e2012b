/*
 * link_probe.c - the transport's link estimate on a real link (issue 12):
 * one process per lab host, node/net/net.c on both ends.
 *
 *   link_probe recv LISTEN SECS
 *   link_probe send LISTEN PEER SECS FRAME_BYTES DEPTH
 *
 * send keeps DEPTH frames of FRAME_BYTES queued toward PEER (topped up
 * every 2 ms: the queue stays backlogged, as a slow link makes it), each
 * stamped with the monotonic time it was queued; once a second it prints
 * the estimate ("t=... goodput_Bps=... rtt_us=... samples=..." on
 * stderr), at the end one JSON line on stdout: the estimate and what was
 * written. recv prints one JSON line after SECS: the goodput it received
 * (bytes over time, from its 2nd second on) and the delay from queueing
 * to arrival (median, 90th percentile), which works across namespaces
 * because they share CLOCK_MONOTONIC.
 * Environment: GN_NOTSENT_LOWAT = bytes, or "off" for the kernel's default
 * (node_net_config.notsent_lowat; measuring what the bound does).
 * Exit 0, 1 on a transport error, 2 on usage errors.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gn_endian.h"
#include "net/net.h"

enum { TICK_MS = 2, WARMUP_US = 2000000, MAX_DELAYS = 1 << 16 };

struct app {
        uv_loop_t loop;
        struct node_net *net;
        struct gossip_addr peer;
        uv_timer_t tick;
        int sender;
        size_t frame, depth;
        uint8_t *buf;
        uint64_t start_us, end_us, last_print_us;
        /* receiver */
        uint64_t first_us, last_us, bytes, nd;
        double *delay_ms;
};

static uint64_t now_us(void)
{
        return uv_hrtime() / 1000;
}

static int parse_addr(const char *s, struct gossip_addr *a)
{
        char host[64];
        const char *colon = strrchr(s, ':');
        memset(a, 0, sizeof(*a));
        if (!colon || (size_t)(colon - s) >= sizeof(host))
                return -EINVAL;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = 0;
        a->family = 4;
        a->port = (uint16_t)atoi(colon + 1);
        return inet_pton(AF_INET, host, a->addr) == 1 ? 0 : -EINVAL;
}

static void on_frame(void *ctx, const struct gossip_addr *from, const void *buf,
                     size_t len, int channel, struct node_net_rx *rx)
{
        struct app *app = ctx;
        const uint8_t *p = buf;
        uint64_t t = now_us();
        (void)from;
        if (channel != GOSSIP_CH_STREAM || len < 9 || p[0] != 'L')
                return;
        if (!app->first_us)
                app->first_us = t;
        if (t - app->first_us < WARMUP_US)
                return;
        if (!app->last_us)
                app->bytes = 0, app->last_us = t; /* measuring from here */
        app->bytes += len + 4;
        app->last_us = t;
        if (app->nd < MAX_DELAYS)
                app->delay_ms[app->nd++] =
                    (double)(t - gn_be_get(p + 1, 8)) / 1e3;
}

static size_t peer_queued(struct app *app, struct node_net_peer_stats *out)
{
        struct node_net_peer_stats ps[4];
        size_t n = node_net_peer_stats(app->net, ps, 4);
        for (size_t i = 0; i < n && i < 4; i++)
                if (node_net_addr_equal(&ps[i].addr, &app->peer)) {
                        *out = ps[i];
                        return ps[i].queued_bytes;
                }
        memset(out, 0, sizeof(*out));
        return 0;
}

static int cmp_dbl(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

static void finish(struct app *app)
{
        struct gossip_link_estimate e = {0};
        struct node_net_peer_stats ps;
        if (app->sender) {
                node_net_peer_link(app->net, &app->peer, &e);
                peer_queued(app, &ps);
                printf("{\"goodput_Bps\": %.0f, \"rtt_us\": %u, \"samples\": "
                       "%" PRIu64 ", \"raised\": %" PRIu64
                       ", \"bytes_out\": %" PRIu64 ", \"secs\": %.2f}\n",
                       e.goodput_Bps, e.rtt_us, e.samples, e.raised,
                       ps.bytes_out, (double)(now_us() - app->start_us) / 1e6);
        } else {
                double span = (double)(app->last_us - app->first_us) / 1e6 -
                              WARMUP_US / 1e6;
                qsort(app->delay_ms, app->nd, sizeof(double), cmp_dbl);
                printf("{\"goodput_Bps\": %.0f, \"frames\": %" PRIu64
                       ", \"delay_ms_p50\": %.1f, \"delay_ms_p90\": %.1f}\n",
                       span > 0 ? (double)app->bytes / span : 0, app->nd,
                       app->nd ? app->delay_ms[app->nd / 2] : -1,
                       app->nd ? app->delay_ms[app->nd * 9 / 10] : -1);
        }
        fflush(stdout);
        uv_timer_stop(&app->tick);
        uv_close((uv_handle_t *)&app->tick, NULL);
        node_net_close(app->net);
}

static void on_tick(uv_timer_t *t)
{
        struct app *app = t->data;
        struct node_net_peer_stats ps;
        uint64_t now = now_us();
        if (now >= app->end_us) {
                finish(app);
                return;
        }
        if (!app->sender)
                return;
        for (size_t q = peer_queued(app, &ps);
             q < app->depth * (app->frame + 4); q += app->frame + 4) {
                app->buf[0] = 'L';
                gn_be_put(app->buf + 1, now_us(), 8);
                if (node_net_send(app->net, &app->peer, app->buf, app->frame,
                                  GOSSIP_CH_STREAM) != 0)
                        break;
        }
        if (now - app->last_print_us >= 1000000) {
                app->last_print_us = now;
                fprintf(stderr,
                        "t=%.1f goodput_Bps=%.0f rtt_us=%u samples=%" PRIu64
                        "\n",
                        (double)(now - app->start_us) / 1e6, ps.goodput_Bps,
                        ps.link_rtt_us, ps.link_samples);
        }
}

int main(int argc, char **argv)
{
        static struct app app;
        struct node_net_config cfg = {0};
        const char *lowat = getenv("GN_NOTSENT_LOWAT");
        int send = argc == 7 && strcmp(argv[1], "send") == 0, err;
        if (!send && !(argc == 4 && strcmp(argv[1], "recv") == 0)) {
                fprintf(stderr, "usage: link_probe recv LISTEN SECS | send "
                                "LISTEN PEER SECS FRAME_BYTES DEPTH\n");
                return 2;
        }
        if (parse_addr(argv[2], &cfg.listen) ||
            (send && parse_addr(argv[3], &app.peer)))
                return 2;
        app.sender = send;
        app.start_us = app.last_print_us = now_us();
        app.end_us = app.start_us + (uint64_t)(atof(argv[send ? 4 : 3]) * 1e6);
        app.frame = send ? (size_t)atol(argv[5]) : 0;
        app.depth = send ? (size_t)atol(argv[6]) : 0;
        app.buf = calloc(1, app.frame + 16);
        app.delay_ms = calloc(MAX_DELAYS, sizeof(double));
        if (!app.buf || !app.delay_ms || (send && app.frame < 64))
                return 2;
        if (lowat)
                cfg.notsent_lowat = strcmp(lowat, "off") == 0
                                        ? UINT32_MAX
                                        : (uint32_t)atol(lowat);
        cfg.on_frame = on_frame;
        cfg.ctx = &app;
        uv_loop_init(&app.loop);
        if ((err = node_net_open(&app.net, &app.loop, &cfg)) != 0) {
                fprintf(stderr, "link_probe: %s\n", uv_strerror(err));
                return 1;
        }
        if (!send)
                fprintf(stderr, "listening\n");
        uv_timer_init(&app.loop, &app.tick);
        app.tick.data = &app;
        uv_timer_start(&app.tick, on_tick, TICK_MS, TICK_MS);
        uv_run(&app.loop, UV_RUN_DEFAULT);
        uv_loop_close(&app.loop);
        free(app.buf);
        free(app.delay_ms);
        return 0;
}
