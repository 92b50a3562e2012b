/*
 * sim.c - the simulated network: an event heap (evheap.h) in virtual
 * milliseconds.
 *
 * Every frame a node sends is copied into a DELIVER event; every node has at
 * most one live TIMER event, at its gossip_next_deadline(). Events are popped
 * in (time, sequence) order; the sequence number breaks ties in insertion
 * order, so runs are deterministic for a seed. Stale timers are recognised
 * by their deadline no longer matching the node's and are skipped.
 *
 * Invariants: a crashed node has g == NULL; a frozen node is never called;
 * the stream channel never reorders frames on a link (each frame is
 * delivered no earlier than the previous one on the same link), and on a
 * lossy link each stream frame waits for TCP-like retransmissions.
 */
#include "base/gn_rng.h"
#include "sim.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "evheap.h"

#define SIM_PORT 7946

enum { EV_DELIVER = 0, EV_TIMER = 1 };

struct sim_ev {
        struct evheap_key k; /* first: the heap orders by it */
        uint64_t deadline;   /* EV_TIMER: the deadline it was armed for */
        uint8_t *buf;
        size_t len;
        uint32_t to, from;
        uint8_t type, channel;
};

struct sim_node {
        struct sim *s;
        size_t idx;
        struct gossip *g;
        uint8_t pk[GOSSIP_KEY_BYTES];
        uint8_t sk[GOSSIP_SECRET_BYTES];
        uint64_t timer_at; /* UINT64_MAX = no timer armed */
        uint64_t boots;
        bool frozen;
};

struct sim {
        struct sim_opts o;
        size_t n;
        uint64_t now, rng;
        struct sim_node *nodes;
        struct gossip_peer *peers;
        float *loss;           /* n*n, [from*n+to] */
        uint16_t *delay;       /* n*n */
        uint16_t *jitter;      /* n*n */
        uint8_t *cut;          /* n*n */
        uint64_t *stream_last; /* n*n: last stream delivery time per link */
        int *group;
        struct evheap heap;
        struct sim_counters c;
        long running; /* the node whose code runs now (callbacks), or -1 */
};

static double sim_unit(struct sim *s)
{
        return (double)(gn_splitmix64(&s->rng) >> 11) *
               (1.0 / 9007199254740992.0);
}

/* ---- event heap ---- */

static int heap_push(struct sim *s, struct sim_ev *ev)
{
        return evheap_push(&s->heap, ev) < 0 ? GOSSIP_ENOMEM : 0;
}

/* ---- addresses ---- */

void sim_addr(const struct sim *s, size_t i, struct gossip_addr *a)
{
        (void)s;
        memset(a, 0, sizeof(*a));
        a->family = 4;
        a->addr[0] = 10;
        a->addr[1] = (uint8_t)(i >> 16);
        a->addr[2] = (uint8_t)(i >> 8);
        a->addr[3] = (uint8_t)i;
        a->port = SIM_PORT;
}

static long addr_index(const struct sim *s, const struct gossip_addr *a)
{
        size_t i;

        if (a->family != 4 || a->addr[0] != 10 || a->port != SIM_PORT)
                return -1;
        i = ((size_t)a->addr[1] << 16) | ((size_t)a->addr[2] << 8) | a->addr[3];
        return i < s->n ? (long)i : -1;
}

/* ---- the env seam ---- */

static void node_rearm(struct sim_node *nd, bool after_tick)
{
        struct sim *s = nd->s;
        struct sim_ev ev = {0};
        uint64_t d;

        if (!nd->g || nd->frozen)
                return;
        d = gossip_next_deadline(nd->g);
        if (d == nd->timer_at)
                return;
        nd->timer_at = d;
        if (d == UINT64_MAX)
                return;
        ev.type = EV_TIMER;
        ev.to = (uint32_t)nd->idx;
        ev.deadline = d;
        /* A tick that leaves work due "now" must not spin the clock. */
        ev.k.t = d > s->now ? d : s->now + (after_tick ? 1 : 0);
        heap_push(s, &ev);
}

/* What TCP adds to a stream frame on a link losing datagrams with
 * probability p: each round in which any of its segments (1448 bytes) is
 * lost costs a retransmission timeout, 200 ms (Linux's minimum RTO) and
 * doubling, up to 6 rounds. The data arrives in the end: the stream is
 * reliable; a cut or partition, not loss, breaks it. */
static uint64_t stream_retransmit_ms(struct sim *s, double p, size_t len)
{
        size_t segs = len / 1448 + 1;
        double any = 1.0, rto = 200;
        uint64_t extra = 0;

        if (p <= 0)
                return 0;
        for (size_t i = 0; i < segs; i++)
                any *= 1.0 - p;
        any = 1.0 - any;
        for (int r = 0; r < 6 && sim_unit(s) < any; r++, rto *= 2)
                extra += (uint64_t)rto;
        return extra;
}

static int env_send(void *ctx, const struct gossip_addr *to, const void *buf,
                    size_t len, int channel)
{
        struct sim_node *nd = ctx;
        struct sim *s = nd->s;
        struct sim_ev ev = {0};
        long t = addr_index(s, to);
        size_t from = nd->idx, k;

        if (channel != GOSSIP_CH_DGRAM && channel != GOSSIP_CH_STREAM)
                return GOSSIP_EINVAL;
        s->c.sent[channel]++;
        s->c.bytes[channel] += len;
        if (t < 0)
                goto drop;
        k = from * s->n + (size_t)t;
        if (s->cut[k] || s->group[from] != s->group[t])
                goto drop;
        ev.k.t = s->now + s->delay[k];
        if (channel == GOSSIP_CH_DGRAM) {
                if (s->loss[k] > 0 && sim_unit(s) < s->loss[k])
                        goto drop;
                if (s->jitter[k])
                        ev.k.t += gn_splitmix64(&s->rng) % (s->jitter[k] + 1u);
        } else {
                ev.k.t += stream_retransmit_ms(s, s->loss[k], len);
                if (ev.k.t < s->stream_last[k])
                        ev.k.t = s->stream_last[k];
                s->stream_last[k] = ev.k.t;
        }
        ev.buf = malloc(len ? len : 1);
        if (!ev.buf)
                return GOSSIP_ENOMEM;
        memcpy(ev.buf, buf, len);
        ev.len = len;
        ev.type = EV_DELIVER;
        ev.to = (uint32_t)t;
        ev.from = (uint32_t)from;
        ev.channel = (uint8_t)channel;
        if (heap_push(s, &ev) < 0) {
                free(ev.buf);
                return GOSSIP_ENOMEM;
        }
        return 0;
drop:
        /* A lost datagram is not an error the sender can see. */
        s->c.dropped++;
        return 0;
}

static uint64_t env_now(void *ctx)
{
        struct sim_node *nd = ctx;
        return nd->s->now;
}

static uint64_t env_unix_now(void *ctx)
{
        struct sim_node *nd = ctx;
        return nd->s->o.unix_start_s + nd->s->now / 1000;
}

static int node_boot(struct sim *s, size_t i)
{
        struct sim_node *nd = &s->nodes[i];
        struct gossip_config cfg = {0};
        struct gossip_env env = {0};
        char name[GOSSIP_NAME_MAX];
        uint64_t x = s->o.seed ^ (0x5157ULL << 48) ^ (i * 0x10001ULL) ^
                     (nd->boots << 40);

        memcpy(cfg.public_key, nd->pk, sizeof(cfg.public_key));
        memcpy(cfg.secret_key, nd->sk, sizeof(cfg.secret_key));
        sim_addr(s, i, &cfg.addr);
        snprintf(name, sizeof(name), "n%zu", i);
        cfg.name = name;
        /* Like the daemon's wall-clock boot incarnation: grows per life. */
        cfg.incarnation = s->now + 1;
        cfg.peers = s->peers;
        cfg.n_peers = s->n;
        cfg.tun = s->o.tun;
        cfg.on_app = s->o.on_app;
        cfg.on_member = s->o.on_member;
        cfg.on_refused = s->o.on_refused;
        if (s->o.settings)
                cfg.settings = &s->o.settings[i];
        cfg.cb_ctx = s;
        if (s->o.configure)
                s->o.configure(s, i, &cfg);
        env.send = env_send;
        env.now_ms = env_now;
        if (s->o.unix_start_s)
                env.unix_now = env_unix_now;
        env.seed = gn_splitmix64(&x);
        env.ctx = nd;
        nd->boots++;
        nd->timer_at = UINT64_MAX;
        nd->frozen = false;
        return gossip_create(&cfg, &env, &nd->g);
}

int sim_create(const struct sim_opts *o, struct sim **out)
{
        struct sim *s;
        size_t n = o->n, i, nn;
        int rc = GOSSIP_ENOMEM;

        *out = NULL;
        if (n == 0 || n > (1u << 24) || sodium_init() < 0)
                return GOSSIP_EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return GOSSIP_ENOMEM;
        s->o = *o;
        s->n = n;
        s->rng = o->seed;
        s->running = -1;
        if (evheap_init(&s->heap, sizeof(struct sim_ev)) < 0)
                goto out;
        nn = n * n;
        s->nodes = calloc(n, sizeof(*s->nodes));
        s->peers = calloc(n, sizeof(*s->peers));
        s->loss = calloc(nn, sizeof(*s->loss));
        s->delay = calloc(nn, sizeof(*s->delay));
        s->jitter = calloc(nn, sizeof(*s->jitter));
        s->cut = calloc(nn, sizeof(*s->cut));
        s->stream_last = calloc(nn, sizeof(*s->stream_last));
        s->group = calloc(n, sizeof(*s->group));
        if (!s->nodes || !s->peers || !s->loss || !s->delay || !s->jitter ||
            !s->cut || !s->stream_last || !s->group)
                goto out;
        for (i = 0; i < nn; i++) {
                s->loss[i] = (float)o->loss;
                s->delay[i] = (uint16_t)o->delay_ms;
                s->jitter[i] = (uint16_t)o->jitter_ms;
        }
        for (i = 0; i < n; i++) {
                struct sim_node *nd = &s->nodes[i];
                uint8_t ks[crypto_sign_SEEDBYTES] = {0};
                uint64_t x = o->seed + i;
                size_t b;

                for (b = 0; b < sizeof(ks); b += 8) {
                        uint64_t r = gn_splitmix64(&x);
                        memcpy(ks + b, &r, 8);
                }
                crypto_sign_seed_keypair(nd->pk, nd->sk, ks);
                nd->s = s;
                nd->idx = i;
                memcpy(s->peers[i].key, nd->pk, GOSSIP_KEY_BYTES);
                sim_addr(s, i, &s->peers[i].addr);
                snprintf(s->peers[i].name, GOSSIP_NAME_MAX, "n%zu", i);
        }
        for (i = 0; i < n; i++) {
                rc = node_boot(s, i);
                if (rc < 0)
                        goto out;
                node_rearm(&s->nodes[i], false);
        }
        *out = s;
        return 0;
out:
        sim_destroy(s);
        return rc;
}

void sim_destroy(struct sim *s)
{
        size_t i;

        if (!s)
                return;
        for (i = 0; i < s->heap.len; i++)
                free(((struct sim_ev *)evheap_at(&s->heap, i))->buf);
        for (i = 0; s->nodes && i < s->n; i++)
                gossip_destroy(s->nodes[i].g);
        evheap_free(&s->heap);
        free(s->nodes);
        free(s->peers);
        free(s->loss);
        free(s->delay);
        free(s->jitter);
        free(s->cut);
        free(s->stream_last);
        free(s->group);
        free(s);
}

/* ---- running ---- */

static void sim_dispatch(struct sim *s, struct sim_ev *ev)
{
        struct sim_node *nd = &s->nodes[ev->to];

        if (ev->type == EV_TIMER) {
                if (!nd->g || nd->frozen || ev->deadline != nd->timer_at)
                        return;
                nd->timer_at = UINT64_MAX;
                s->c.ticks++;
                s->running = (long)ev->to;
                gossip_tick(nd->g);
                s->running = -1;
                node_rearm(nd, true);
                return;
        }
        if (!nd->g || nd->frozen) {
                s->c.dropped++;
        } else {
                struct gossip_addr from;
                sim_addr(s, ev->from, &from);
                s->c.delivered[ev->channel]++;
                s->running = (long)ev->to;
                if (gossip_on_message(nd->g, &from, ev->buf, ev->len,
                                      ev->channel) < 0)
                        s->c.rejected++;
                s->running = -1;
                node_rearm(nd, false);
        }
        free(ev->buf);
}

void sim_run_until(struct sim *s, uint64_t t_ms)
{
        struct sim_ev ev;

        while (evheap_top(&s->heap) && evheap_top(&s->heap)->t <= t_ms) {
                evheap_pop(&s->heap, &ev);
                if (ev.k.t > s->now)
                        s->now = ev.k.t;
                sim_dispatch(s, &ev);
        }
        if (t_ms > s->now)
                s->now = t_ms;
}

bool sim_run_until_pred(struct sim *s, uint64_t deadline_ms, uint64_t step_ms,
                        bool (*pred)(struct sim *s, void *arg), void *arg)
{
        if (step_ms == 0)
                step_ms = 1;
        for (;;) {
                if (pred(s, arg))
                        return true;
                if (s->now >= deadline_ms)
                        return false;
                sim_run_until(s, s->now + step_ms > deadline_ms
                                     ? deadline_ms
                                     : s->now + step_ms);
        }
}

/* ---- accessors ---- */

size_t sim_n(const struct sim *s)
{
        return s->n;
}

uint64_t sim_now(const struct sim *s)
{
        return s->now;
}

void *sim_user(const struct sim *s)
{
        return s->o.user;
}

struct gossip *sim_node(const struct sim *s, size_t i)
{
        return i < s->n ? s->nodes[i].g : NULL;
}

const uint8_t *sim_key(const struct sim *s, size_t i)
{
        return s->nodes[i].pk;
}

long sim_running(const struct sim *s)
{
        return s->running;
}

long sim_index_of_key(const struct sim *s, const uint8_t *key)
{
        size_t i;

        for (i = 0; i < s->n; i++)
                if (memcmp(s->nodes[i].pk, key, GOSSIP_KEY_BYTES) == 0)
                        return (long)i;
        return -1;
}

int sim_join(struct sim *s, size_t i, size_t j)
{
        struct gossip_addr a;
        int rc;

        if (!s->nodes[i].g)
                return GOSSIP_EINVAL;
        sim_addr(s, j, &a);
        s->running = (long)i;
        rc = gossip_join(s->nodes[i].g, &a);
        s->running = -1;
        node_rearm(&s->nodes[i], false);
        return rc;
}

int sim_state(const struct sim *s, size_t i, size_t j)
{
        struct gossip_member_info mi;

        if (!s->nodes[i].g ||
            gossip_member_get(s->nodes[i].g, s->nodes[j].pk, &mi) < 0)
                return -1;
        return mi.state;
}

void sim_counters(const struct sim *s, struct sim_counters *out)
{
        *out = s->c;
}

/* ---- faults ---- */

void sim_set_loss(struct sim *s, size_t from, size_t to, double p)
{
        s->loss[from * s->n + to] = (float)p;
}

void sim_set_loss_all(struct sim *s, double p)
{
        size_t i;

        for (i = 0; i < s->n * s->n; i++)
                s->loss[i] = (float)p;
}

void sim_cut(struct sim *s, size_t from, size_t to, bool cut)
{
        s->cut[from * s->n + to] = cut;
}

void sim_partition(struct sim *s, const int *group)
{
        size_t i;

        for (i = 0; i < s->n; i++)
                s->group[i] = group ? group[i] : 0;
}

void sim_freeze(struct sim *s, size_t i, bool frozen)
{
        struct sim_node *nd = &s->nodes[i];

        nd->frozen = frozen;
        nd->timer_at = UINT64_MAX;
        if (!frozen)
                node_rearm(nd, false);
}

bool sim_frozen(const struct sim *s, size_t i)
{
        return s->nodes[i].frozen;
}

void sim_crash(struct sim *s, size_t i)
{
        struct sim_node *nd = &s->nodes[i];

        gossip_destroy(nd->g);
        nd->g = NULL;
        nd->timer_at = UINT64_MAX;
}

int sim_restart(struct sim *s, size_t i)
{
        int rc;

        sim_crash(s, i);
        rc = node_boot(s, i);
        if (rc == 0)
                node_rearm(&s->nodes[i], false);
        return rc;
}

int sim_leave(struct sim *s, size_t i)
{
        int rc;

        if (!s->nodes[i].g)
                return GOSSIP_EINVAL;
        rc = gossip_leave(s->nodes[i].g);
        node_rearm(&s->nodes[i], false);
        return rc;
}
