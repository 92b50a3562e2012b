/*
 * net_echo.c - a small program around node/net/net.c for the network-namespace
 * test (netns_net.sh): one process per namespace, real addresses, real
 * veth links, iptables drops and tbf rate caps.
 *
 *   net_echo serve  LISTEN PEER               echo server, until SIGTERM
 *   net_echo client LISTEN PEER ping N        N datagram + N stream pings
 *   net_echo client LISTEN PEER blackout SECS ping every 200 ms, report gaps
 *   net_echo client LISTEN PEER big BYTES     one stream frame, throughput
 *
 * LISTEN and PEER are A.B.C.D:PORT. The server sends every reply to PEER
 * (a TCP frame's source is an ephemeral port, so replies go to the peer's
 * listen address, as the daemon does with member addresses). Frames: a
 * type byte, then
 *   'P' ping  u32 seq, padding      -> 'E' echo (same bytes, type changed)
 *   'B' big   payload               -> 'A' u64 length, u32 FNV-1a hash
 * Environment: GN_STALL_MS, GN_CONNECT_MS, GN_BACKOFF_MAX_MS (transport
 * tunables), GN_SEED (payload bytes and backoff jitter).
 * Output: one "key=value ..." line per result for the script to check.
 * Exit 0 on success (for blackout: always, unless the transport failed),
 * 1 on failure, 2 on usage errors.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_uv.h"
#include "test_seed.h"
#include "base/gn_endian.h"
#include "net/net.h"

enum {
        PING_PAD = 1024,        /* bytes of a ping frame */
        BLACKOUT_TICK_MS = 200, /* one ping pair per tick */
        PING_TIMEOUT_MS = 15000,
        BIG_TIMEOUT_MS = 120000,
        MAX_PINGS = 4096,
};

struct app {
        uv_loop_t loop;
        struct node_net *net;
        struct gossip_addr peer;
        int serve;
        /* client state */
        const char *mode;
        long arg;
        uint64_t start, deadline, last_stream;
        struct node_net_stats st; /* taken just before closing */
        uint8_t dgram_seen[MAX_PINGS], stream_seen[MAX_PINGS];
        long dgram_echoes, stream_echoes, sent;
        uint64_t last_echo, max_gap, last3_from;
        long last3;
        uint8_t *big;
        uint64_t big_sent_at, big_acked_at;
        uint64_t acked_len;
        uint32_t acked_hash;
        int done;
        uv_timer_t tick;
        uv_signal_t sigterm, sigint;
};

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
        uint32_t h = 2166136261u;
        for (size_t i = 0; i < n; i++)
                h = (h ^ p[i]) * 16777619u;
        return h;
}

static int parse_addr(const char *s, struct gossip_addr *a)
{
        char host[64];
        const char *colon = strrchr(s, ':');
        if (!colon || (size_t)(colon - s) >= sizeof(host))
                return -1;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = 0;
        memset(a, 0, sizeof(*a));
        a->family = 4;
        a->port = (uint16_t)atoi(colon + 1);
        return inet_pton(AF_INET, host, a->addr) == 1 && a->port ? 0 : -1;
}

static uint32_t env_u32(const char *name)
{
        const char *v = getenv(name);
        return v ? (uint32_t)strtoul(v, NULL, 10) : 0;
}

static void stop(struct app *a)
{
        if (a->done)
                return;
        a->done = 1;
        node_net_stats(a->net, &a->st);
        node_net_close(a->net);
        uv_close((uv_handle_t *)&a->tick, NULL);
        uv_close((uv_handle_t *)&a->sigterm, NULL);
        uv_close((uv_handle_t *)&a->sigint, NULL);
}

static void on_signal(uv_signal_t *s, int signum)
{
        stop(s->data);
}

static void serve_frame(struct app *a, const uint8_t *p, size_t len, int ch)
{
        if (len >= 5 && p[0] == 'P') {
                uint8_t *e = malloc(len);
                memcpy(e, p, len);
                e[0] = 'E';
                node_net_send(a->net, &a->peer, e, len, ch);
                free(e);
        } else if (len >= 1 && p[0] == 'B') {
                uint8_t ack[13] = {'A'};
                uint64_t n = len - 1;
                gn_be32_put(ack + 1, (uint32_t)(n >> 32));
                gn_be32_put(ack + 5, (uint32_t)n);
                gn_be32_put(ack + 9, fnv1a(p + 1, len - 1));
                node_net_send(a->net, &a->peer, ack, sizeof(ack),
                              GOSSIP_CH_STREAM);
        }
}

static void client_frame(struct app *a, const uint8_t *p, size_t len, int ch)
{
        uint64_t now = uv_now(&a->loop);
        if (len >= 5 && p[0] == 'E') {
                uint32_t seq = gn_be32_get(p + 1);
                if (seq >= MAX_PINGS)
                        return;
                uint8_t *seen =
                    ch == GOSSIP_CH_DGRAM ? a->dgram_seen : a->stream_seen;
                if (!seen[seq]) {
                        seen[seq] = 1;
                        if (ch == GOSSIP_CH_DGRAM)
                                a->dgram_echoes++;
                        else
                                a->stream_echoes++;
                }
                if (a->last_echo && now - a->last_echo > a->max_gap)
                        a->max_gap = now - a->last_echo;
                a->last_echo = now;
                if (now >= a->last3_from)
                        a->last3++;
        } else if (len == 13 && p[0] == 'A') {
                a->acked_len =
                    (uint64_t)gn_be32_get(p + 1) << 32 | gn_be32_get(p + 5);
                a->acked_hash = gn_be32_get(p + 9);
                a->big_acked_at = now;
                stop(a);
        }
}

static void on_frame(void *ctx, const struct gossip_addr *from, const void *buf,
                     size_t len, int ch, struct node_net_rx *rx)
{
        struct app *a = ctx;
        if (a->serve)
                serve_frame(a, buf, len, ch);
        else
                client_frame(a, buf, len, ch);
}

static void send_ping(struct app *a, uint32_t seq, int ch)
{
        uint8_t p[PING_PAD] = {'P'};
        gn_be32_put(p + 1, seq);
        node_net_send(a->net, &a->peer, p, sizeof(p), ch);
}

static void tick_ping(uv_timer_t *t)
{
        struct app *a = t->data;
        uint64_t now = uv_now(&a->loop);
        long n = a->arg, done = 0;
        /* datagrams are resent every tick until echoed (the first ones
         * may race the server's start); stream pings every 3 s (a connect
         * refused before the server was up dropped them) */
        int stream_due = a->sent == 0 || now - a->last_stream >= 3000;
        for (long i = 0; i < n; i++) {
                if (!a->dgram_seen[i])
                        send_ping(a, (uint32_t)i, GOSSIP_CH_DGRAM);
                if (!a->stream_seen[i] && stream_due)
                        send_ping(a, (uint32_t)i, GOSSIP_CH_STREAM);
                done += a->dgram_seen[i] && a->stream_seen[i];
        }
        if (stream_due)
                a->last_stream = now;
        a->sent = n;
        if (done == n || now >= a->deadline)
                stop(a);
}

static void tick_blackout(uv_timer_t *t)
{
        struct app *a = t->data;
        uint64_t now = uv_now(&a->loop);
        if (now >= a->deadline) {
                stop(a);
                return;
        }
        send_ping(a, (uint32_t)(a->sent % MAX_PINGS), GOSSIP_CH_DGRAM);
        send_ping(a, (uint32_t)(a->sent % MAX_PINGS), GOSSIP_CH_STREAM);
        a->sent++;
}

static void tick_big(uv_timer_t *t)
{
        struct app *a = t->data;
        uint64_t now = uv_now(&a->loop);
        if (now >= a->deadline) {
                stop(a);
                return;
        }
        if (a->big_sent_at)
                return;
        if (!a->dgram_echoes && !a->stream_echoes) {
                /* a round trip first: our connection to the server is up,
                 * and so is the server's to us (an earlier client's exit
                 * may have left it in backoff), so the single ack cannot
                 * be dropped and the timing covers only the transfer */
                uint8_t p[8] = {'P'};
                node_net_send(a->net, &a->peer, p, sizeof(p), GOSSIP_CH_STREAM);
                return;
        }
        a->big[0] = 'B';
        uv_update_time(&a->loop);
        if (node_net_send(a->net, &a->peer, a->big, (size_t)a->arg + 1,
                          GOSSIP_CH_STREAM) == 0)
                a->big_sent_at = uv_now(&a->loop);
}

static int report(struct app *a)
{
        const struct node_net_stats st = a->st;
        if (strcmp(a->mode, "ping") == 0) {
                printf("ping n=%ld dgram_echoes=%ld stream_echoes=%ld\n",
                       a->arg, a->dgram_echoes, a->stream_echoes);
                return a->dgram_echoes == a->arg && a->stream_echoes == a->arg
                           ? 0
                           : 1;
        }
        if (strcmp(a->mode, "blackout") == 0) {
                printf("blackout sent=%ld dgram_echoes=%ld stream_echoes=%ld "
                       "max_gap_ms=%llu last3=%ld connects=%llu "
                       "connect_failures=%llu stalls=%llu dropped=%llu\n",
                       a->sent, a->dgram_echoes, a->stream_echoes,
                       (unsigned long long)a->max_gap, a->last3,
                       (unsigned long long)st.connects,
                       (unsigned long long)st.connect_failures,
                       (unsigned long long)st.stalls,
                       (unsigned long long)st.frames_dropped);
                return 0;
        }
        uint32_t want = fnv1a(a->big + 1, (size_t)a->arg);
        double secs = (double)(a->big_acked_at - a->big_sent_at) / 1000.0;
        int ok = a->big_acked_at && a->acked_len == (uint64_t)a->arg &&
                 a->acked_hash == want;
        printf("big bytes=%ld ok=%d secs=%.3f connects=%llu stalls=%llu "
               "dropped=%llu mbit_per_s=%.3f\n",
               a->arg, ok, secs, (unsigned long long)st.connects,
               (unsigned long long)st.stalls,
               (unsigned long long)st.frames_dropped,
               ok && secs > 0 ? (double)a->arg * 8 / secs / 1e6 : 0.0);
        return ok ? 0 : 1;
}

static int usage(void)
{
        fprintf(stderr, "usage: net_echo serve LISTEN PEER\n"
                        "       net_echo client LISTEN PEER "
                        "ping N|blackout SECS|big BYTES\n");
        return 2;
}

int main(int argc, char **argv)
{
        static struct app a;
        struct node_net_config cfg = {0};
        int err, rc = 0;
        signal(SIGPIPE, SIG_IGN); /* see net.h */
        if (argc < 4)
                return usage();
        a.serve = strcmp(argv[1], "serve") == 0;
        if (!a.serve && (strcmp(argv[1], "client") != 0 || argc != 6))
                return usage();
        if (parse_addr(argv[2], &cfg.listen) || parse_addr(argv[3], &a.peer))
                return usage();
        cfg.stream_min = 1; /* its acks and pings are not wire frames */
        if (!a.serve) {
                a.mode = argv[4];
                a.arg = strtol(argv[5], NULL, 10);
                if (a.arg <= 0 ||
                    (strcmp(a.mode, "ping") == 0 && a.arg > MAX_PINGS))
                        return usage();
        }
        cfg.seed = gn_test_seed("net_echo", 1);
        cfg.stall_timeout_ms = env_u32("GN_STALL_MS");
        cfg.connect_timeout_ms = env_u32("GN_CONNECT_MS");
        cfg.backoff_max_ms = env_u32("GN_BACKOFF_MAX_MS");
        cfg.on_frame = on_frame;
        cfg.ctx = &a;
        uv_loop_init(&a.loop);
        err = node_net_open(&a.net, &a.loop, &cfg);
        if (err) {
                fprintf(stderr, "net_echo: %s: %s\n", argv[2],
                        uv_strerror(err));
                return 1;
        }
        uv_timer_init(&a.loop, &a.tick);
        a.tick.data = &a;
        uv_signal_init(&a.loop, &a.sigterm);
        uv_signal_init(&a.loop, &a.sigint);
        a.sigterm.data = a.sigint.data = &a;
        uv_signal_start(&a.sigterm, on_signal, SIGTERM);
        uv_signal_start(&a.sigint, on_signal, SIGINT);
        a.start = uv_now(&a.loop);
        if (a.serve) {
                printf("serve listen=%s peer=%s\n", argv[2], argv[3]);
                fflush(stdout);
        } else if (strcmp(a.mode, "ping") == 0) {
                a.deadline = a.start + PING_TIMEOUT_MS;
                uv_timer_start(&a.tick, tick_ping, 0, 500);
        } else if (strcmp(a.mode, "blackout") == 0) {
                a.deadline = a.start + (uint64_t)a.arg * 1000;
                a.last3_from = a.deadline - 3000;
                uv_timer_start(&a.tick, tick_blackout, 0, BLACKOUT_TICK_MS);
        } else if (strcmp(a.mode, "big") == 0) {
                uint64_t s = cfg.seed;
                a.big = malloc((size_t)a.arg + 1);
                for (long i = 1; i <= a.arg; i++) {
                        s = s * 6364136223846793005ull + 1442695040888963407ull;
                        a.big[i] = (uint8_t)(s >> 56);
                }
                a.deadline = a.start + BIG_TIMEOUT_MS;
                uv_timer_start(&a.tick, tick_big, 0, 100);
        } else {
                return usage();
        }
        uv_run(&a.loop, UV_RUN_DEFAULT);
        if (!a.serve)
                rc = report(&a);
        free(a.big);
        if (gn_test_loop_close(&a.loop) != 0) {
                fprintf(stderr, "net_echo: loop did not close cleanly\n");
                return 1;
        }
        return rc;
}
