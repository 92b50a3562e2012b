/*
 * cluster.c - membership and lifecycle of one node in the cluster: the key
 * and peers files, the transport, the protocol core and its timer, joins
 * and join retries, the graceful leave, SIGHUP reloads (peers file,
 * revocation list) and member changes.
 * It creates and owns the exchange (exchange.c), the live join's state
 * transfer (join.c) and the view (view.c: members, partner choice), and
 * hands each event to its owner: a frame from the transport to the
 * protocol core (whose application messages go straight to the exchange,
 * registered as on_app), the trainer's post to the exchange. The control
 * replies are in cluster_report.c, the Prometheus families in
 * cluster_metrics.c (the rooms and the shared struct: cluster_private.h).
 *
 * Loop thread only. The protocol core runs from one timer armed at
 * gossip_next_deadline() and from arriving frames and posts; after any of
 * them, node_cluster__arm() sets the timer again.
 */
#include "cluster/cluster_private.h"
#include "service/version.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "base/gn_errbuf.h"
#include "service/evlog.h"
#include "config/settings.h"
#include "ident/keys.h"
#include "gossip/plan.h"
#include "gossip/schedule.h"
#include "train/trainer.h"

/* ---- small helpers ------------------------------------------------------ */

uint64_t node_cluster__unix_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Copy a name, cut to fit (peers-file names may be longer than the
 * protocol's GOSSIP_NAME_MAX; the cut is deliberate). */
static void copy_name(char *dst, size_t cap, const char *src)
{
        size_t n = strnlen(src, cap - 1);

        memcpy(dst, src, n);
        dst[n] = '\0';
}

const char *node_cluster_name(const struct node_cluster *c)
{
        return c->name;
}
struct node_handoff *node_cluster_handoff(struct node_cluster *c)
{
        return c->h;
}

struct node_view *node_cluster_view(struct node_cluster *c)
{
        return &c->view;
}

void node_cluster_rearm(struct node_cluster *c)
{
        node_cluster__arm(c);
}

/* ---- the protocol timer ------------------------------------------------- */

static void on_tick(uv_timer_t *t);

void node_cluster__arm(struct node_cluster *c)
{
        uint64_t now, d;

        if (c->closing)
                return;
        now = uv_now(c->loop);
        d = gossip_next_deadline(c->g);
        uv_timer_start(&c->tick, on_tick, d > now ? d - now : 0, 0);
}

/* Members take no partner in us while we load (gossip_set_loading):
 * what they would send we could not use. We tell them once the trainer
 * asks for its first step, or serves a finished model. */
static void tell_loaded(struct node_cluster *c)
{
        if (c->loading && node_handoff_training(c->h)) {
                c->loading = 0;
                gossip_set_loading(c->g, 0);
        }
}

static void on_tick(uv_timer_t *t)
{
        struct node_cluster *c = t->data;

        tell_loaded(c);
        /* our training step, carried in every message (how a joining peer
         * finds the member furthest ahead), also while we train alone */
        gossip_set_step(c->g, node_join_own_step(&c->join));
        if (c->o->wait_ms && c->o->codec != NODE_CODEC_NONE)
                node_exchange_on_members(c->ex);
        gossip_tick(c->g);
        node_cluster__arm(c);
}

/* ---- protocol callbacks ------------------------------------------------- */

/* The cluster-wide stop (gossip/stop.h): a member left with a reason.
 * The box counts it once per signing key; a quorum of members that
 * reached the target themselves ends our run at once
 * (the trainer finishes its step, saves, and our own leave repeats the
 * reason), else the trainer evaluates and judges by its own accuracy.
 * One line per member counted. */
static void cluster_stop_heard(struct node_cluster *c,
                               const struct gossip_member_info *m)
{
        struct gossip_stop s = m->stop;
        struct gossip_stop_verdict v;
        char why[160];
        int rc;

        if (s.reason == GOSSIP_STOP_NONE)
                return;
        if (!s.origin[0]) /* an unnamed origin: the leaver's name */
                snprintf(s.origin, sizeof(s.origin), "%s",
                         node_view_member_name(m));
        rc = node_handoff_stop_peer(c->h, m->key, node_view_member_name(m), &s,
                                    gossip_stop_bp(c->o->target_acc), &v);
        if (rc == NODE_HANDOFF_STOP_IGNORED)
                return;
        if (rc == NODE_HANDOFF_STOP_NOW) {
                node_log(NODE_LOG_INFO,
                         "%s left saying %.31s reached the target (%.2f%% "
                         "at step %llu); %zu of %zu votes, stopping after "
                         "this step",
                         node_view_member_name(m), s.origin, s.acc_bp / 100.0,
                         (unsigned long long)s.step, v.have, v.need);
                return;
        }
        gossip_stop_format_wait(&v, why, sizeof(why));
        node_log(NODE_LOG_INFO,
                 "%s left saying %.31s reached the target (%.2f%% at step "
                 "%llu); not honoured yet (%s): evaluating our own model",
                 node_view_member_name(m), s.origin, s.acc_bp / 100.0,
                 (unsigned long long)s.step, why);
}

static void on_member(void *ctx, const struct gossip_member_info *m,
                      int old_state)
{
        struct node_cluster *c = ctx;
        const char *st = gossip_state_name(m->state), *why;

        if (memcmp(m->key, c->pk, GOSSIP_KEY_BYTES) == 0)
                return;
        why = m->state == GOSSIP_DEAD && c->has_authority
                  ? node_cluster__barred_why(c, m->key)
                  : NULL;
        node_log(why ? NODE_LOG_WARN : NODE_LOG_INFO,
                 "member %s %s -> %s (%zu alive)%s%s", node_view_member_name(m),
                 old_state < 0 ? "new" : gossip_state_name(old_state), st,
                 gossip_alive_count(c->g), why ? ": dropped, " : "",
                 why ? why : "");
        node_evlog_member(c->ev, node_view_member_name(m), st);
        /* members trusted by certificate are not in the peers file the
         * view was sized by: room for all we know (no memory: cut) */
        if (gossip_members(c->g, NULL, 0) > c->view.npeers + 1)
                node_view_reserve(&c->view, gossip_members(c->g, NULL, 0) - 1);
        node_exchange_on_members(c->ex);
        if (m->state == GOSSIP_LEFT)
                cluster_stop_heard(c, m);
}

/* A frame from the transport: to the protocol core, with how it arrived
 * as the frame's context, which an application message in it carries to
 * the exchange (node_exchange_gossip_app). */
static void on_frame(void *ctx, const struct gossip_addr *from, const void *buf,
                     size_t len, int channel, struct node_net_rx *rx)
{
        struct node_cluster *c = ctx;
        struct node_exchange_rx xrx = {*rx, len, uv_now(c->loop)};

        if (c->closing)
                return;
        gossip_on_frame(c->g, from, buf, len, channel, &xrx);
        rx->report = xrx.net.report; /* the exchange's answer, for net.c */
        node_cluster__arm(c);
}

/* The trainer posted something in the box: to the exchange. */
static void on_post(uv_async_t *a)
{
        struct node_cluster *c = a->data;

        if (c->closing)
                return;
        tell_loaded(c);
        node_exchange_on_post(c->ex);
        node_cluster__arm(c);
}

static void join_all(struct node_cluster *c)
{
        for (size_t i = 0; i < c->npeers; i++)
                if (memcmp(c->peers[i].pk, c->pk, GOSSIP_KEY_BYTES) != 0)
                        gossip_join(c->g, &c->peers[i].addr);
        if (c->has_seed) /* last: the address the core keeps re-trying */
                gossip_join(c->g, &c->seed_addr);
        node_cluster__arm(c);
}

int node_cluster_may_load(struct node_cluster *c)
{
        int answered = gossip_alive_count(c->g) > 1 ||
                       (!c->has_seed && c->npeers <= (c->listed ? 1u : 0u));

        return gossip_plan_may_load(answered, node_net_queued_bytes(c->net),
                                    uv_now(c->loop) - c->opened_ms);
}

/* Alone for NODE_CLUSTER_ALONE_WARN_MS with somewhere to join: one
 * warning that names what to check. */
static void say_alone(struct node_cluster *c)
{
        char where[NODE_ADDR_STR_SIZE + 64] = "", auth[160] = "";
        char seed[NODE_ADDR_STR_SIZE], id[NODE_KEY_ID_SIZE];
        size_t others = c->npeers - (c->listed ? 1 : 0);

        if (c->has_seed) {
                node_addr_format(&c->seed_addr, seed, sizeof(seed));
                snprintf(where, sizeof(where), "seed %s%s", seed,
                         others ? ", " : "");
        }
        if (others)
                snprintf(where + strlen(where), sizeof(where) - strlen(where),
                         "%zu in the peers file", others);
        if (c->has_authority) {
                node_key_id(c->auth.pk, id);
                snprintf(auth, sizeof(auth),
                         "; is it of authority %s (a member refuses another "
                         "authority's certificate and only counts it: "
                         "gossipctl stats, certs wrong_authority)",
                         id);
        }
        node_log(NODE_LOG_WARN,
                 "no member has answered in %d s (%s): is one up and "
                 "reachable%s? Training alone meanwhile",
                 NODE_CLUSTER_ALONE_WARN_MS / 1000, where, auth);
}

static void on_join_timer(uv_timer_t *t)
{
        struct node_cluster *c = t->data;
        uint64_t now = uv_now(c->loop);

        if (c->leaving || gossip_alive_count(c->g) > 1) {
                c->alone_since = 0;
                c->alone_said = 0;
                return;
        }
        if (!c->alone_since)
                c->alone_since = now;
        else if (!c->alone_said &&
                 now - c->alone_since >= NODE_CLUSTER_ALONE_WARN_MS &&
                 (c->has_seed || c->npeers > (c->listed ? 1u : 0u))) {
                c->alone_said = 1;
                say_alone(c);
        }
        join_all(c);
}

/* ---- set-up ------------------------------------------------------------- */

static void to_gossip_peer(const struct node_peer *p, struct gossip_peer *g)
{
        memset(g, 0, sizeof(*g));
        memcpy(g->key, p->pk, GOSSIP_KEY_BYTES);
        g->addr = p->addr;
        copy_name(g->name, sizeof(g->name), p->name);
}

/* The address we tell in membership (node_addr_advertised): --advertise,
 * else our peers-file line, else --listen unless it is a wildcard. */
static int choose_advertised(struct node_cluster *c,
                             const struct gossip_addr *line, char *err,
                             size_t errlen)
{
        const char *opt = c->o->advertise;
        struct gossip_addr a;
        char l[NODE_ADDR_STR_SIZE];
        int rc = 0;

        if (opt)
                rc = node_addr_parse(opt, &a, 1);
        if (rc) {
                snprintf(err, errlen, "--advertise: '%s': %s", opt,
                         rc == -EHOSTUNREACH ? "does not resolve"
                                             : "not ADDR:PORT");
                return rc;
        }
        rc = node_addr_advertised(opt ? &a : NULL, line, &c->listen,
                                  &c->advertised);
        if (rc == -EINVAL)
                snprintf(err, errlen,
                         "--advertise: '%s' is a wildcard: give the address "
                         "peers reach this node at",
                         opt);
        if (rc == -EADDRNOTAVAIL) {
                node_addr_format(&c->listen, l, sizeof(l));
                snprintf(err, errlen,
                         "--listen %s is a wildcard and %s has no line for "
                         "this node's key: give --advertise ADDR:PORT (the "
                         "address peers reach this node at) or add its line",
                         l, c->o->peers_path);
        }
        return rc < 0 ? rc : 0;
}

/* --authority, --cert (which must be ours, and valid now), --crl and
 * --seed-addr. */
static int load_authority(struct node_cluster *c, char *err, size_t errlen)
{
        const struct node_options *o = c->o;
        char crl[4096];
        int rc, have_crl;

        if (o->seed_addr) {
                rc = node_addr_parse(o->seed_addr, &c->seed_addr, 1);
                if (rc)
                        return gn_fail(err, errlen, rc, "--seed-addr: '%s': %s",
                                       o->seed_addr,
                                       rc == -EHOSTUNREACH ? "does not resolve"
                                                           : "not ADDR:PORT");
                c->has_seed = 1;
        }
        if (!o->authority_path)
                return 0;
        /* --crl, else the list a member told us last run, if any */
        have_crl = node_options_crl_path(o, crl, sizeof(crl)) == 0;
        rc = node_authority_load(&c->auth, o->authority_path, o->cert_path,
                                 have_crl ? crl : NULL, c->pk,
                                 node_cluster__unix_ms() / 1000, err, errlen);
        c->has_authority = rc == 0;
        return rc;
}

static int load_identity(struct node_cluster *c, uint8_t *sk, char *err,
                         size_t errlen)
{
        const struct node_options *o = c->o;
        long self;
        int rc;

        rc = node_key_load(o->key_path, c->pk, sk, err, errlen);
        if (rc)
                return rc;
        if (o->peers_path)
                rc = node_peers_load(o->peers_path, &c->peers, &c->npeers, err,
                                     errlen);
        if (rc == 0)
                rc = load_authority(c, err, errlen);
        if (rc)
                return rc;
        self = node_peers_find_pk(c->peers, c->npeers, c->pk);
        c->listed = self >= 0;
        copy_name(c->name, sizeof(c->name),
                  o->name                 ? o->name
                  : self >= 0             ? c->peers[self].name
                  : c->auth.cert_len != 0 ? c->auth.c.name
                                          : "node");
        if (o->listen) {
                rc = node_addr_parse(o->listen, &c->listen, 1);
                if (rc) {
                        snprintf(err, errlen, "--listen: '%s': %s", o->listen,
                                 rc == -EHOSTUNREACH ? "does not resolve"
                                                     : "not ADDR:PORT");
                        return rc;
                }
        } else if (self >= 0) {
                c->listen = c->peers[self].addr;
        } else {
                snprintf(err, errlen,
                         "--listen: not given, and %s has no line for this "
                         "node's key",
                         o->peers_path ? o->peers_path : "there is no --peers");
                return -EINVAL;
        }
        return choose_advertised(c, self >= 0 ? &c->peers[self].addr : NULL,
                                 err, errlen);
}

/* The transport's first-frame check on an inbound connection: a frame
 * signed or MAC'd by a trusted key, or the connection is closed. */
static int verify_first(void *ctx, const void *buf, size_t len)
{
        struct node_cluster *c = ctx;
        int rc;

        if (!c->g)
                return -1;
        rc = gossip_frame_authenticate(c->g, buf, len, GOSSIP_CH_STREAM);
        /* refused here, it never reaches the core: fed to it all the
         * same so that it is counted (its reason, a certificate's
         * verdict) like any refused frame; it is refused there too */
        if (rc)
                gossip_on_message(c->g, &c->listen, buf, len, GOSSIP_CH_STREAM);
        return rc;
}

static uint64_t unix_now(void *ctx)
{
        (void)ctx;
        return node_cluster__unix_ms() / 1000;
}

static int open_net(struct node_cluster *c, char *err, size_t errlen)
{
        struct node_net_config nc = {0};
        char a[NODE_ADDR_STR_SIZE];
        int rc;

        nc.listen = c->listen;
        nc.seed = c->o->seed ^ 0x6e6574ULL;
        nc.on_frame = on_frame;
        nc.ctx = c;
        nc.verify = verify_first;
        nc.verify_ctx = c;
        rc = node_net_open(&c->net, c->loop, &nc);
        if (rc) {
                node_addr_format(&c->listen, a, sizeof(a));
                snprintf(err, errlen, "--listen %s: %s", a, uv_strerror(rc));
        }
        return rc;
}

static int open_gossip(struct node_cluster *c, const uint8_t *sk, char *err,
                       size_t errlen)
{
        struct gossip_config gc;
        struct gossip_env env = {0};
        struct gossip_peer *gp;
        int rc;

        gp = calloc(c->npeers ? c->npeers : 1, sizeof(*gp));
        if (!gp)
                return -ENOMEM;
        for (size_t i = 0; i < c->npeers; i++)
                to_gossip_peer(&c->peers[i], &gp[i]);
        memset(&gc, 0, sizeof(gc));
        memcpy(gc.public_key, c->pk, GOSSIP_KEY_BYTES);
        memcpy(gc.secret_key, sk, GOSSIP_SECRET_BYTES);
        gc.addr = c->advertised; /* never the wildcard we may bind to */
        gc.name = c->name;
        gc.version = node_version(); /* `gossipctl members` on every peer */
        gc.incarnation = node_cluster__unix_ms();
        gc.loading = c->loading = 1; /* until the trainer's first step */
        gc.peers = gp;
        gc.n_peers = c->npeers;
        /* application messages straight to the exchange */
        gc.on_app = node_exchange_gossip_app;
        gc.app_ctx = c->ex;
        gc.on_member = on_member;
        gc.cb_ctx = c;
        /* what must match for the exchange to work (cluster_refuse.c) */
        rc = node_settings_build(c->o, c->nparams, &c->settings);
        gc.settings = rc ? NULL : &c->settings;
        gc.on_refused = node_cluster__refused;
        if (c->has_authority) {
                gc.authority_pk = c->auth.pk;
                gc.cert = c->auth.cert_len ? c->auth.cert : NULL;
                gc.cert_len = c->auth.cert_len;
                gc.crl = c->auth.crl;
                gc.crl_len = c->auth.crl_len;
                gc.on_crl = node_cluster__on_crl; /* ctx: cb_ctx */
        }
        node_net_env(c->net, &env);
        env.unix_now = unix_now;
        /* every node's own stream: the seed mixed with its key */
        env.seed = c->o->seed;
        for (int i = 0; i < 8; i++)
                env.seed = env.seed * 131 + c->pk[i];
        if (rc)
                node_log(NODE_LOG_WARN,
                         "cluster settings: %s: not agreed "
                         "at join",
                         gossip_strerror(rc));
        rc = gossip_create(&gc, &env, &c->g);
        sodium_memzero(gc.secret_key, sizeof(gc.secret_key));
        free(gp);
        if (rc)
                snprintf(err, errlen, "gossip: %s", gossip_strerror(rc));
        return rc;
}

/* The exchange (and its box) and the view's scratch. */
static int open_exchange(struct node_cluster *c, char *err, size_t errlen)
{
        struct node_exchange_cfg xc = {c->o, c->nparams, &c->async};
        int rc = node_exchange_open(&c->ex, &xc, err, errlen);

        if (rc)
                return rc;
        c->h = node_exchange_box(c->ex);
        memcpy(c->view.pk, c->pk, GOSSIP_KEY_BYTES);
        c->view.seed = c->o->seed;
        if (node_view_reserve(&c->view, c->npeers)) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

static void free_cluster(struct node_cluster *c)
{
        node_exchange_free(c->ex);
        node_view_free(&c->view);
        node_peers_free(c->peers);
        node_authority_free(&c->auth);
        free(c);
}

static void on_handle_closed(uv_handle_t *h)
{
        struct node_cluster *c = h->data;

        if (--c->open_handles == 0)
                free_cluster(c);
}

void node_cluster_close(struct node_cluster *c)
{
        uv_handle_t *hs[5];

        if (!c || c->closing)
                return;
        c->closing = 1;
        node_net_close(c->net);
        c->net = NULL;
        gossip_destroy(c->g);
        c->g = NULL;
        hs[0] = (uv_handle_t *)&c->tick;
        hs[1] = (uv_handle_t *)&c->join_timer;
        hs[2] = (uv_handle_t *)&c->linger;
        hs[3] = (uv_handle_t *)&c->async;
        hs[4] = (uv_handle_t *)&c->refuse_timer;
        c->open_handles = 5;
        for (int i = 0; i < 5; i++)
                uv_close(hs[i], on_handle_closed);
}

/* Say where peers are told to send when that is not where we bind (a
 * wildcard --listen, or --advertise behind a port forward). */
static void log_addresses(const struct node_cluster *c)
{
        char l[NODE_ADDR_STR_SIZE], a[NODE_ADDR_STR_SIZE];

        if (node_net_addr_equal(&c->listen, &c->advertised))
                return;
        node_addr_format(&c->listen, l, sizeof(l));
        node_addr_format(&c->advertised, a, sizeof(a));
        node_log(NODE_LOG_INFO, "listening on %s; peers are told %s", l, a);
}

int node_cluster_open(struct node_cluster **out, uv_loop_t *loop,
                      const struct node_options *o, struct node_evlog *ev,
                      size_t nparams, char *err, size_t errlen)
{
        struct node_cluster *c;
        uint8_t sk[GOSSIP_SECRET_BYTES];
        int rc, handles = 0;

        *out = NULL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->loop = loop;
        c->o = o;
        c->ev = ev;
        c->nparams = nparams;
        c->start_ms = node_cluster__unix_ms();
        rc = load_identity(c, sk, err, errlen);
        if (rc == 0)
                rc = open_exchange(c, err, errlen);
        if (rc == 0)
                rc = open_net(c, err, errlen);
        if (rc == 0)
                rc = open_gossip(c, sk, err, errlen);
        sodium_memzero(sk, sizeof(sk));
        if (rc)
                goto out;
        c->view.g = c->g;
        c->join = (struct node_join){.g = c->g, .h = c->h, .view = &c->view};
        node_exchange_bind(c->ex, c->g, c->net, &c->view, &c->join);
        node_log_set_name(c->name);
        uv_timer_init(loop, &c->tick);
        uv_timer_init(loop, &c->join_timer);
        uv_timer_init(loop, &c->linger);
        uv_timer_init(loop, &c->refuse_timer);
        c->refuse_timer.data = c;
        uv_async_init(loop, &c->async, on_post);
        c->tick.data = c->join_timer.data = c->linger.data = c;
        c->async.data = c;
        handles = 1;
        log_addresses(c);
        if (!c->listed && o->peers_path && !c->auth.cert_len)
                node_log(NODE_LOG_WARN,
                         "%s has no line for this node's key: peers that "
                         "use the same file will refuse it",
                         o->peers_path);
        c->opened_ms = uv_now(loop);
        join_all(c);
        uv_timer_start(&c->join_timer, on_join_timer,
                       NODE_CLUSTER_JOIN_RETRY_MS, NODE_CLUSTER_JOIN_RETRY_MS);
        *out = c;
out:
        if (rc) {
                if (c->g)
                        gossip_destroy(c->g);
                if (c->net) {
                        node_net_close(c->net);
                        uv_run(loop, UV_RUN_NOWAIT);
                }
                if (!handles)
                        free_cluster(c);
        }
        return rc;
}

static void on_linger(uv_timer_t *t)
{
        struct node_cluster *c = t->data;

        if (c->leave_done) {
                void (*cb)(void *) = c->leave_done;
                c->leave_done = NULL;
                cb(c->leave_arg);
        }
}

/* The reason our LEAVE carries: the cluster-wide stop held in the box
 * (ours, named after us, or a peer's, repeated), or NULL. */
static const struct gossip_stop *cluster_stop_why(struct node_cluster *c,
                                                  struct gossip_stop *why)
{
        if (!node_handoff_stop_reason(c->h, why))
                return NULL;
        if (!why->origin[0])
                snprintf(why->origin, sizeof(why->origin), "%s",
                         node_cluster_name(c));
        return why;
}

void node_cluster_leave(struct node_cluster *c, void (*done)(void *arg),
                        void *arg)
{
        struct gossip_stop why;

        if (c->leaving)
                return;
        c->leaving = 1;
        c->leave_done = done;
        c->leave_arg = arg;
        node_exchange_log_summary(c->ex);
        node_log(NODE_LOG_INFO, "leaving the cluster");
        gossip_leave_with(c->g, cluster_stop_why(c, &why));
        node_cluster__arm(c);
        uv_timer_start(&c->linger, on_linger, NODE_CLUSTER_LEAVE_LINGER_MS, 0);
}

int node_cluster_reload(struct node_cluster *c, char *err, size_t errlen)
{
        struct node_peer *np = NULL;
        struct gossip_peer gp;
        size_t nn = 0, added = 0, removed = 0;
        int rc;

        if (!c->o->peers_path) {
                node_log(NODE_LOG_INFO, "no --peers file to reload");
                return 0;
        }
        rc = node_peers_load(c->o->peers_path, &np, &nn, err, errlen);
        if (rc)
                return rc;
        for (size_t i = 0; i < nn; i++) {
                if (memcmp(np[i].pk, c->pk, GOSSIP_KEY_BYTES) == 0)
                        continue;
                to_gossip_peer(&np[i], &gp);
                if (node_peers_find_pk(c->peers, c->npeers, np[i].pk) < 0)
                        added++;
                gossip_trust_add(c->g, &gp);
        }
        for (size_t i = 0; i < c->npeers; i++)
                if (node_peers_find_pk(np, nn, c->peers[i].pk) < 0 &&
                    memcmp(c->peers[i].pk, c->pk, GOSSIP_KEY_BYTES) != 0) {
                        gossip_trust_remove(c->g, c->peers[i].pk);
                        removed++;
                }
        node_view_reserve(&c->view, nn); /* no memory: the view is cut */
        node_peers_free(c->peers);
        c->peers = np;
        c->npeers = nn;
        node_log(NODE_LOG_INFO,
                 "peers reloaded: %zu entries, %zu added, "
                 "%zu removed",
                 nn, added, removed);
        node_cluster__arm(c);
        return 0;
}

void node_cluster_reload_crl(struct node_cluster *c)
{
        node_cluster__crl_reload(c);
        node_cluster__arm(c);
}

void node_cluster_serve(struct node_cluster *c, struct node_trainer *t)
{
        if (c->loading) { /* resumed finished: it never stepped */
                c->loading = 0;
                gossip_set_loading(c->g, 0);
        }
        node_join_serve(&c->join, t);
}
