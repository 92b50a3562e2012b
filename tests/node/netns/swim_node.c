/*
 * swim_node.c - one membership-only node for the network-namespace
 * partition test (netns_swim.sh): the protocol core (gossip/) on the real
 * transport (node/net/net.c), nothing else.
 *
 * Usage: swim_node SELF ADDR0 ADDR1 ... (ADDR = A.B.C.D:PORT)
 * Node i's key comes from the seed byte i + 1 (every node derives every
 * key, as if from a shared peers file); node SELF listens on ADDR[SELF]
 * and joins all the others. The transport checks each inbound
 * connection's first frame with gossip_frame_authenticate() - the seam
 * the daemon uses. Every membership transition is printed as
 *   T_MS SELF sees J: OLD -> NEW
 * with T_MS the wall clock in ms (the script compares it with the heal
 * time); on SIGTERM the final view is printed as "final SELF J=STATE ..."
 * and it exits 0.
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>
#include <uv.h>

#include "gossip/gossip.h"
#include "net/net.h"
#include "gossip/wire.h"

#define MAXN 16

struct app {
        uv_loop_t loop;
        uv_timer_t tick;
        uv_signal_t term;
        struct node_net *net;
        struct gossip *g;
        size_t n, self;
        uint8_t pk[MAXN][GOSSIP_KEY_BYTES];
};

static uint64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static long index_of(const struct app *a, const uint8_t *key)
{
        for (size_t i = 0; i < a->n; i++)
                if (memcmp(a->pk[i], key, GOSSIP_KEY_BYTES) == 0)
                        return (long)i;
        return -1;
}

static const char *name_of(int state)
{
        return state < 0 ? "unknown" : gossip_state_name(state);
}

static void on_member(void *ctx, const struct gossip_member_info *m, int old)
{
        struct app *a = ctx;
        printf("%llu %zu sees %ld: %s -> %s\n", (unsigned long long)wall_ms(),
               a->self, index_of(a, m->key), name_of(old), name_of(m->state));
        fflush(stdout);
}

static void on_frame(void *ctx, const struct gossip_addr *from, const void *buf,
                     size_t len, int channel, struct node_net_rx *rx)
{
        struct app *a = ctx;
        if (a->g)
                gossip_on_message(a->g, from, buf, len, channel);
}

static int verify(void *ctx, const void *buf, size_t len)
{
        struct app *a = ctx;
        return a->g
                   ? gossip_frame_authenticate(a->g, buf, len, GOSSIP_CH_STREAM)
                   : -1;
}

static void on_tick(uv_timer_t *t)
{
        struct app *a = t->data;
        gossip_tick(a->g);
}

static void on_term(uv_signal_t *s, int sig)
{
        struct app *a = s->data;
        struct gossip_member_info mi;
        (void)sig;
        printf("final %zu", a->self);
        for (size_t j = 0; j < a->n; j++)
                if (j != a->self && gossip_member_get(a->g, a->pk[j], &mi) == 0)
                        printf(" %zu=%s", j, name_of(mi.state));
        printf("\n");
        fflush(stdout);
        uv_timer_stop(&a->tick);
        uv_close((uv_handle_t *)&a->tick, NULL);
        uv_close((uv_handle_t *)&a->term, NULL);
        node_net_close(a->net);
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

int main(int argc, char **argv)
{
        static struct app a;
        struct gossip_peer peers[MAXN];
        uint8_t sk[GOSSIP_SECRET_BYTES], seed[32] = {0};
        struct gossip_config gc = {0};
        struct gossip_env env = {0};
        struct node_net_config nc = {0};

        if (argc < 4 || sodium_init() < 0)
                return 2;
        a.self = (size_t)atoi(argv[1]);
        a.n = (size_t)(argc - 2);
        if (a.n > MAXN || a.self >= a.n)
                return 2;
        signal(SIGPIPE, SIG_IGN);
        for (size_t i = 0; i < a.n; i++) {
                uint8_t s[GOSSIP_SECRET_BYTES];
                seed[0] = (uint8_t)(i + 1);
                crypto_sign_seed_keypair(a.pk[i], s, seed);
                if (i == a.self)
                        memcpy(sk, s, sizeof(sk));
                memset(&peers[i], 0, sizeof(peers[i]));
                memcpy(peers[i].key, a.pk[i], GOSSIP_KEY_BYTES);
                if (parse_addr(argv[2 + i], &peers[i].addr))
                        return 2;
                snprintf(peers[i].name, sizeof(peers[i].name), "n%zu", i);
        }
        uv_loop_init(&a.loop);
        nc.listen = peers[a.self].addr;
        nc.on_frame = on_frame;
        nc.ctx = &a;
        nc.verify = verify;
        nc.verify_ctx = &a;
        nc.seed = a.self + 1;
        if (node_net_open(&a.net, &a.loop, &nc) != 0)
                return 1;
        memcpy(gc.public_key, a.pk[a.self], GOSSIP_KEY_BYTES);
        memcpy(gc.secret_key, sk, GOSSIP_SECRET_BYTES);
        gc.addr = peers[a.self].addr;
        gc.incarnation = wall_ms() / 1000;
        gc.peers = peers;
        gc.n_peers = a.n;
        gc.on_member = on_member;
        gc.cb_ctx = &a;
        node_net_env(a.net, &env);
        env.seed = 1000 + a.self;
        if (gossip_create(&gc, &env, &a.g) != 0)
                return 1;
        sodium_memzero(sk, sizeof(sk));
        for (size_t i = 0; i < a.n; i++)
                if (i != a.self)
                        gossip_join(a.g, &peers[i].addr);
        uv_timer_init(&a.loop, &a.tick);
        a.tick.data = &a;
        uv_timer_start(&a.tick, on_tick, 10, 10);
        uv_signal_init(&a.loop, &a.term);
        a.term.data = &a;
        uv_signal_start(&a.term, on_term, SIGTERM);
        uv_run(&a.loop, UV_RUN_DEFAULT);
        gossip_destroy(a.g);
        uv_loop_close(&a.loop);
        return 0;
}
