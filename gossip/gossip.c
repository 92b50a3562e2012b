/*
 * gossip.c - the facade: wire I/O, the trusted set, the application channel
 * and statistics around the membership protocol in swim.c.
 *
 * Every frame in goes through gossip_wire_decode() (bound, signer,
 * signature, replay window, body) before any state changes; a rejected
 * frame is counted (per node, and per claimed sender) and otherwise
 * ignored. With a cluster authority, the one exception to "unknown key,
 * refused" is a JOIN or SYNC whose certificate verifies and whose key
 * signed it (trust.c, gossip__admit_by_cert): the key is trusted first,
 * then the frame goes through the same decode as any other; a frame of a
 * barred key (its certificate revoked) is refused as `revoked`. Every
 * frame out goes through gossip__send(), which stamps our incarnation,
 * sequence number and step, packs what fits of the piggyback queue (or,
 * for JOIN and SYNC, the view, our certificate and the revocation list
 * held), signs and hands the bytes to env->send.
 *
 * Invariants: the secret key lives only in g->sk and is wiped on destroy;
 * sequence numbers are strictly increasing per node life (one counter for
 * both channels; the wire keeps a replay window per channel, gaps are fine).
 */
#include "swim.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "base/gn_bigbuf.h"

_Static_assert(GOSSIP_MSG_KIND_COUNT <= GOSSIP_KIND_SLOTS,
               "gossip_stats kind counters too small");
_Static_assert(GOSSIP_WIRE_REJECT_SLOTS <= GOSSIP_REJECT_SLOTS,
               "gossip_stats reject counters too small");

static void fill_tunables(struct gossip_tunables *t,
                          const struct gossip_tunables *in)
{
        struct gossip_tunables d;

        gossip_tunables_default(&d);
#define TUN(f) t->f = in->f ? in->f : d.f
        TUN(probe_period_ms);
        TUN(probe_timeout_ms);
        TUN(indirect_checks);
        TUN(suspicion_mult);
        TUN(suspicion_max_mult);
        TUN(retransmit_mult);
        TUN(sync_period_ms);
        TUN(awareness_max);
        TUN(gossip_interval_ms);
        TUN(gossip_fanout);
#undef TUN
}

const char *gossip_state_name(int state)
{
        switch (state) {
        case GOSSIP_ALIVE:
                return "alive";
        case GOSSIP_SUSPECT:
                return "suspect";
        case GOSSIP_DEAD:
                return "dead";
        case GOSSIP_LEFT:
                return "left";
        }
        return "?";
}

static void copy_name(char *dst, const char *src)
{
        size_t n = src ? strlen(src) : 0;

        if (n >= GOSSIP_NAME_MAX)
                n = GOSSIP_NAME_MAX - 1;
        memset(dst, 0, GOSSIP_NAME_MAX);
        if (n)
                memcpy(dst, src, n);
}

/* Cut to fit like a name; text the wire would refuse is not told. */
static void copy_version(char *dst, const char *src)
{
        size_t n = src ? strlen(src) : 0;

        if (n >= GOSSIP_VERSION_MAX)
                n = GOSSIP_VERSION_MAX - 1;
        memset(dst, 0, GOSSIP_VERSION_MAX);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)src[i] < 0x20 || src[i] == 0x7f)
                        return;
        if (n)
                memcpy(dst, src, n);
}

int gossip_create(const struct gossip_config *cfg, const struct gossip_env *env,
                  struct gossip **out)
{
        struct gossip *g;
        uint64_t now;
        size_t i;
        int rc = GOSSIP_ENOMEM;

        if (!out)
                return GOSSIP_EINVAL;
        *out = NULL;
        if (!cfg || !env || !env->send || !env->now_ms ||
            (cfg->n_peers && !cfg->peers))
                return GOSSIP_EINVAL;
        if (sodium_init() < 0)
                return GOSSIP_ENOMEM;
        g = calloc(1, sizeof(*g));
        if (!g)
                return GOSSIP_ENOMEM;
        g->env = *env;
        fill_tunables(&g->tun, &cfg->tun);
        memcpy(g->sk, cfg->secret_key, sizeof(g->sk));
        memcpy(g->self.key, cfg->public_key, GOSSIP_KEY_BYTES);
        g->self.key_id = gossip_key_id(cfg->public_key);
        copy_name(g->self.name, cfg->name);
        copy_version(g->self.version, cfg->version);
        g->self.addr = cfg->addr;
        g->self.inc = cfg->incarnation;
        g->self.state = GOSSIP_ALIVE;
        g->self.loading = cfg->loading != 0;
        g->rng = env->seed;
        g->on_app = cfg->on_app;
        g->on_member = cfg->on_member;
        g->on_refused = cfg->on_refused;
        g->on_crl = cfg->on_crl;
        g->cb_ctx = cfg->cb_ctx;
        g->app_ctx = cfg->app_ctx ? cfg->app_ctx : cfg->cb_ctx;
        if (cfg->settings) {
                g->settings = *cfg->settings;
                g->self.settings = g->settings.digest;
        }
        g->n_live = 1;
        g->n_known = 1;
        rc = GOSSIP_EINVAL;
        if (cfg->cert_len > sizeof(g->own_cert) ||
            (cfg->cert_len && !cfg->cert))
                goto out;
        if (cfg->cert_len) {
                struct gossip_cert c;

                if (gossip_cert_decode(cfg->cert, cfg->cert_len, &c, NULL) !=
                    GOSSIP_CERT_OK)
                        goto out;
                memcpy(g->own_cert, cfg->cert, cfg->cert_len);
                g->self.cert_serial = c.serial; /* gossip_members: ours */
                g->self.cert_not_before = c.not_before;
                g->self.cert_not_after = c.not_after;
                g->self.cert_len = (uint16_t)cfg->cert_len;
        }
        g->own_cert_len = cfg->cert_len;
        if (cfg->authority_pk) {
                memcpy(g->authority, cfg->authority_pk, GOSSIP_KEY_BYTES);
                g->authority_id = gossip_key_id(cfg->authority_pk);
                g->has_authority = true;
        }
        if (cfg->crl_len) {
                struct gossip_crl c;

                if (!g->has_authority || !cfg->crl ||
                    cfg->crl_len > GOSSIP_CRL_MAX_BYTES ||
                    gossip_crl_verify(cfg->crl, cfg->crl_len, g->authority,
                                      &c) != GOSSIP_CRL_OK)
                        goto out;
                rc = GOSSIP_ENOMEM;
                if (!(g->crl_buf = malloc(cfg->crl_len)))
                        goto out;
                memcpy(g->crl_buf, cfg->crl, cfg->crl_len);
                gossip_crl_decode(g->crl_buf, cfg->crl_len, &g->crl, NULL);
                g->has_crl = true;
        }
        rc = GOSSIP_ENOMEM;
        g->kr = gossip_keyring_new();
        g->rp = gossip_replay_new();
        g->barred_kr = gossip_keyring_new();
        if (!g->kr || !g->rp || !g->barred_kr)
                goto out;
        /* Pairwise MAC keys for bulk stream frames (wire.h): a barred
         * key's MAC frames must authenticate too (trust.c). */
        rc = gossip_keyring_set_self(g->kr, g->sk);
        if (rc == 0)
                rc = gossip_keyring_set_self(g->barred_kr, g->sk);
        if (rc < 0)
                goto out;
        rc = GOSSIP_ENOMEM;
        /* bq must hold ourselves even with no peers. */
        if (!(g->bq = calloc(1, sizeof(void *))))
                goto out;
        for (i = 0; i < cfg->n_peers; i++) {
                rc = gossip_trust_add(g, &cfg->peers[i]);
                if (rc < 0)
                        goto out;
        }
        now = gossip__now(g);
        /* Stagger first probes and syncs so that nodes started together do
         * not probe in lockstep. */
        g->next_probe_at = now + gossip__rand(g) % g->tun.probe_period_ms;
        g->next_sync_at = now + g->tun.sync_period_ms / 2 +
                          gossip__rand(g) % g->tun.sync_period_ms;
        g->next_gossip_at = now;
        g->next_judge_at = now + SWIM_JUDGE_MS;
        *out = g;
        return 0;
out:
        gossip_destroy(g);
        return rc;
}

void gossip_destroy(struct gossip *g)
{
        size_t i;

        if (!g)
                return;
        for (i = 0; i < g->n_tab; i++)
                free(g->tab[i]);
        free(g->tab);
        free(g->plist);
        free(g->suspects);
        free(g->bq);
        gossip_keyring_free(g->kr);
        gossip_replay_free(g->rp);
        gossip_keyring_free(g->barred_kr);
        free(g->barred);
        free(g->crl_buf);
        sodium_memzero(g->sk, sizeof(g->sk));
        free(g);
}

/* ---- sending ---- */

static bool has_piggyback(int kind)
{
        return kind == GOSSIP_MSG_PING || kind == GOSSIP_MSG_PING_REQ ||
               kind == GOSSIP_MSG_ACK;
}

static int encode_send(struct gossip *g, struct swim_member *to,
                       const struct gossip_addr *addr, struct gossip_msg *m,
                       uint32_t *n_sent)
{
        uint8_t *buf = g->dgram_buf;
        size_t cap = sizeof(g->dgram_buf), len = 0;
        int rc;

        if (m->channel == GOSSIP_CH_STREAM) {
                /* a STATE's frame is megabytes: on huge pages */
                cap = gossip_wire_frame_bound(m);
                if (!(buf = gn_big_alloc(cap)))
                        return GOSSIP_ENOMEM;
        }
        rc = gossip_wire_encode(m, g->sk, buf, cap, &len, n_sent);
        if (rc < 0)
                goto out;
        rc = g->env.send(g->env.ctx, addr, buf, len, m->channel);
        if (rc < 0) {
                rc = GOSSIP_ESEND;
                goto out;
        }
        g->st.msgs_out++;
        g->st.bytes_out += len;
        g->st.kind_out[m->kind]++;
        if (to) {
                to->msgs_out++;
                to->bytes_out += len;
        }
out:
        if (buf != g->dgram_buf)
                gn_big_free(buf);
        return rc;
}

/* The certificates of the members a SYNC lists (key 21): every known
 * member's we hold. 0 and *out (NULL when none, else to be freed). */
static int members_certs(const struct gossip *g, struct gossip_blob **out,
                         uint32_t *n_out)
{
        struct gossip_blob *b;
        uint32_t n = 0;

        *out = NULL;
        *n_out = 0;
        if (!g->n_tab)
                return 0;
        if (!(b = malloc(g->n_tab * sizeof(*b))))
                return GOSSIP_ENOMEM;
        for (size_t i = 0; i < g->n_tab && n < GOSSIP_WIRE_MAX_UPDATES; i++) {
                const struct swim_member *m = g->tab[i];

                if (m->state != SWIM_UNKNOWN && m->cert_len)
                        b[n++] = (struct gossip_blob){m->cert, m->cert_len};
        }
        if (!n)
                free(b);
        else
                *out = b;
        *n_out = n;
        return 0;
}

/* ---- the view digest (protocol.md 3.9) ---- */

int gossip_view_digest(const struct gossip *g,
                       uint8_t out[GOSSIP_VIEW_DIGEST_BYTES])
{
        struct gossip_update *u;
        struct gossip_blob *c;
        size_t n = 1;
        int rc = GOSSIP_ENOMEM;

        u = malloc((g->n_tab + 1) * sizeof(*u));
        c = malloc((g->n_tab + 1) * sizeof(*c));
        if (!u || !c)
                goto out;
        /* our view as gossip__swim_full_view lists it, with the
         * certificate a SYNC's key 20 (ours) or 21 would carry */
        gossip__swim_entry(&g->self, &u[0]);
        c[0] = (struct gossip_blob){g->own_cert, g->own_cert_len};
        for (size_t i = 0; i < g->n_tab; i++) {
                const struct swim_member *m = g->tab[i];

                if (m->state == SWIM_UNKNOWN)
                        continue;
                gossip__swim_entry(m, &u[n]);
                c[n++] = (struct gossip_blob){m->cert, m->cert_len};
        }
        rc = gossip_wire_view_digest(u, c, n, out);
out:
        free(u);
        free(c);
        return rc;
}

/* gossip__send(); lean: a SYNC or JOIN with our own entry only and no
 * key 21 (gossip__send_crl, and a SYNC that gives its view's digest). */
static int send_msg(struct gossip *g, struct swim_member *to,
                    const struct gossip_addr *addr, struct gossip_msg *m,
                    bool lean)
{
        struct swim_member *who[SWIM_DGRAM_UPDATES];
        struct gossip_update *full = NULL;
        struct gossip_blob *certs = NULL;
        uint32_t n_sent = 0;
        size_t n = 0;
        int rc;

        if (!addr || !addr->family)
                return GOSSIP_ENOPEER;
        m->incarnation = g->self.inc;
        m->seq = ++g->seq;
        m->step = g->step;
        if (has_piggyback(m->kind)) {
                n = gossip__swim_piggyback(g, to, g->dgram_upd, who,
                                           SWIM_DGRAM_UPDATES);
                m->updates = g->dgram_upd;
        } else if (m->kind == GOSSIP_MSG_SYNC || m->kind == GOSSIP_MSG_JOIN) {
                full = malloc((g->n_tab + 1) * sizeof(*full));
                if (!full)
                        return GOSSIP_ENOMEM;
                n = gossip__swim_full_view(g, full);
                if (lean)
                        n = 1; /* ourselves come first */
                m->updates = full;
                if (g->settings.digest)
                        m->settings = &g->settings;
                m->cert = g->own_cert_len ? g->own_cert : NULL;
                m->cert_len = g->own_cert_len;
                m->crl = g->has_crl ? g->crl_buf : NULL;
                m->crl_len = g->has_crl ? g->crl.len : 0;
                if (m->kind == GOSSIP_MSG_SYNC && !lean &&
                    (rc = members_certs(g, &certs, &m->n_certs)) < 0) {
                        free(full);
                        return rc;
                }
                m->certs = certs;
        }
        m->n_updates = (uint32_t)n;
        rc = encode_send(g, to, addr, m, &n_sent);
        if (rc == 0 && has_piggyback(m->kind))
                gossip__swim_piggyback_done(g, who, n_sent);
        free(full);
        free(certs);
        return rc;
}

int gossip__send(struct gossip *g, struct swim_member *to,
                 const struct gossip_addr *addr, struct gossip_msg *m)
{
        bool lean = m->kind == GOSSIP_MSG_SYNC && m->u.sync.has_view;
        int rc;

        if (lean && (rc = gossip_view_digest(g, m->u.sync.view)) < 0)
                return rc;
        return send_msg(g, to, addr, m, lean);
}

int gossip__send_crl(struct gossip *g, struct swim_member *m)
{
        struct gossip_msg out = {0};

        out.kind = GOSSIP_MSG_SYNC;
        out.channel = GOSSIP_CH_STREAM;
        return send_msg(g, m, &m->addr, &out, true);
}

/* ---- receiving ---- */

static int app_kind(int msg_kind)
{
        switch (msg_kind) {
        case GOSSIP_MSG_GRADIENT:
                return GOSSIP_APP_GRADIENT;
        case GOSSIP_MSG_STATE_REQ:
                return GOSSIP_APP_STATE_REQ;
        case GOSSIP_MSG_STATE:
                return GOSSIP_APP_STATE;
        case GOSSIP_MSG_PARAMS:
                return GOSSIP_APP_PARAMS;
        case GOSSIP_MSG_SAMPLES:
                return GOSSIP_APP_SAMPLES;
        }
        return 0;
}

static void deliver_app(struct gossip *g, struct swim_member *from,
                        const struct gossip_msg *m, void *frame)
{
        struct gossip_member_info mi;
        struct gossip_app a = {
            .kind = app_kind(m->kind), .step = m->step, .frame = frame};

        if (GOSSIP_WIRE_IS_TENSOR(m->kind)) {
                a.payload = m->u.tensor.payload;
                a.len = m->u.tensor.payload_len;
                a.step = m->u.tensor.step;
                if (m->kind == GOSSIP_MSG_PARAMS) {
                        a.period = m->u.tensor.period;
                        a.need = m->u.tensor.need;
                        a.rx_rate = m->u.tensor.rx_rate;
                        a.rx_span = m->u.tensor.rx_span;
                }
        } else if (m->kind == GOSSIP_MSG_STATE) {
                a.payload = m->u.state.data;
                a.len = m->u.state.len;
                a.step = m->u.state.step;
        }
        if (m->kind == GOSSIP_MSG_STATE_REQ)
                from->state_req_seq = m->seq;
        g->st.app_in++;
        if (!g->on_app)
                return;
        gossip__member_info(g, from, &mi);
        g->on_app(g->app_ctx, &mi, &a);
}

/* A refused frame counts node-wide; it is charged to a member only when it
 * authenticated as that member (m->key_id is set only past the signature
 * check, gossip_wire_decode) and is not a replay, which anyone who saw the
 * frame can send. */
static void count_reject(struct gossip *g, const struct gossip_msg *m, int rc)
{
        struct swim_member *sender;

        if (rc >= 0 || -rc >= GOSSIP_REJECT_SLOTS)
                return;
        g->st.rejects[-rc]++;
        if (!m->key_id || rc == GOSSIP_EREPLAY)
                return;
        sender = gossip__member_find(g, m->key_id);
        if (sender)
                sender->rejects[-rc]++;
}

int gossip_frame_authenticate(const struct gossip *g, const void *buf,
                              size_t len, int channel)
{
        struct gossip_cert c;
        const uint8_t *p;
        size_t n;
        int rc, verdict;

        struct swim_barred *b;

        if (!g)
                return GOSSIP_EINVAL;
        rc = gossip_wire_authenticate(buf, len, channel, NULL, g->kr);
        if (rc == GOSSIP_EUNKNOWNKEY && g->has_authority &&
            gossip__cert_admissible(g, buf, len, channel, &c, &p, &n,
                                    &verdict) == 0)
                return 0;
        if (rc == GOSSIP_EUNKNOWNKEY)
                rc = gossip__barred_code(g, buf, len, channel, &b);
        return rc;
}

int gossip_on_message(struct gossip *g, const struct gossip_addr *from,
                      const void *buf, size_t len, int channel)
{
        return gossip_on_frame(g, from, buf, len, channel, NULL);
}

/* A frame the keyring refused as unknown: a barred key's is refused as
 * its barring says (`revoked`) and charged to it. */
static int refuse_barred(struct gossip *g, const void *buf, size_t len,
                         int channel)
{
        struct swim_barred *b;
        int rc = gossip__barred_code(g, buf, len, channel, &b);

        if (b)
                b->rejects++;
        return rc;
}

/* A JOIN or SYNC's list (key 22), offered to the merge rule. A sender
 * that shows an older list needs nothing more: a JOIN or a SYNC asking
 * for a reply gets ours in the answer, and a SYNC answer came after ours.
 * The sender again, or NULL when the list revoked it (barred now). */
static struct swim_member *take_crl_of(struct gossip *g,
                                       struct swim_member *sender,
                                       const struct gossip_msg *m)
{
        struct swim_barred *b;

        gossip__crl_offer(g, m->crl, m->crl_len, sender);
        sender = gossip__member_find(g, m->key_id);
        if (!sender && (b = gossip__barred_find(g, m->key_id)) != NULL)
                b->rejects++;
        return sender;
}

int gossip_on_frame(struct gossip *g, const struct gossip_addr *from,
                    const void *buf, size_t len, int channel, void *frame)
{
        struct gossip_msg m;
        struct gossip_update *upd = g ? g->dgram_upd : NULL;
        struct gossip_blob *certs = NULL;
        struct swim_member *sender;
        uint32_t cap = SWIM_DGRAM_UPDATES;
        uint64_t id = 0;
        uint8_t kind = 0;
        int rc, full;

        if (!g || !from || !buf)
                return GOSSIP_EINVAL;
        memset(&m, 0, sizeof(m));
        full = gossip_wire_peek_sender(buf, len, &id, &kind) == 0 &&
               (kind == GOSSIP_MSG_SYNC || kind == GOSSIP_MSG_JOIN);
        /* SYNC and JOIN carry the whole view: size the update storage from
         * the frame length (each update is > SWIM_MIN_UPDATE_BYTES); a
         * SYNC's certificates take more than that each. */
        if (channel == GOSSIP_CH_STREAM && full) {
                size_t c = len / SWIM_MIN_UPDATE_BYTES + 1;
                if (c > GOSSIP_WIRE_MAX_UPDATES)
                        c = GOSSIP_WIRE_MAX_UPDATES;
                cap = (uint32_t)c;
                if (!(upd = malloc(c * sizeof(*upd))))
                        return GOSSIP_ENOMEM;
                if (g->has_authority && kind == GOSSIP_MSG_SYNC &&
                    !(certs = malloc(c * sizeof(*certs)))) {
                        free(upd);
                        return GOSSIP_ENOMEM;
                }
                m.certs = certs;
                m.certs_cap = certs ? cap : 0;
        }
        if (full && g->has_authority && !gossip_keyring_find(g->kr, id))
                gossip__admit_by_cert(g, buf, len, channel);
        m.updates = upd;
        m.updates_cap = cap;
        m.settings = &g->rx_settings;
        rc = gossip_wire_decode(buf, len, channel, NULL, g->kr, g->rp, &m,
                                &g->wst);
        if (rc == GOSSIP_EUNKNOWNKEY)
                rc = refuse_barred(g, buf, len, channel);
        if (rc < 0) {
                count_reject(g, &m, rc);
                goto out;
        }
        sender = gossip__member_find(g, m.key_id);
        if (!sender) {
                rc = GOSSIP_EUNKNOWNKEY;
                count_reject(g, &m, rc);
                goto out;
        }
        g->st.msgs_in++;
        g->st.bytes_in += len;
        g->st.kind_in[m.kind]++;
        sender->msgs_in++;
        sender->bytes_in += len;
        sender->last_heard_ms = gossip__now(g);
        sender->step = m.step;
        if (g->has_authority && m.crl_len &&
            (sender = take_crl_of(g, sender, &m)) == NULL) {
                rc = GOSSIP_EREVOKED; /* by the list it carried */
                count_reject(g, &m, rc);
                goto out;
        }
        if (g->has_authority && (m.cert_len || m.n_certs))
                gossip__learn_certs(g, sender, &m);
        rc = gossip__swim_on_msg(g, sender, from, &m);
        if (g->has_authority && m.n_certs)
                gossip__greet_learned(g);
        if (rc < 0) {
                count_reject(g, &m, rc);
                goto out;
        }
        if (app_kind(m.kind))
                deliver_app(g, sender, &m, frame);
out:
        if (upd != g->dgram_upd)
                free(upd);
        free(certs);
        return rc;
}

/* ---- the rest of the facade ---- */

void gossip_tick(struct gossip *g)
{
        uint64_t now = gossip__now(g);

        gossip__swim_tick(g);
        if (g->has_authority && now >= g->next_judge_at) {
                gossip__judge_members(g);
                g->next_judge_at = now + SWIM_JUDGE_MS;
        }
}

uint64_t gossip_next_deadline(const struct gossip *g)
{
        uint64_t d = gossip__swim_deadline(g);

        return g->has_authority && g->next_judge_at < d ? g->next_judge_at : d;
}

int gossip_join(struct gossip *g, const struct gossip_addr *addr)
{
        if (!g || !addr || !addr->family)
                return GOSSIP_EINVAL;
        return gossip__swim_join(g, addr);
}

int gossip_leave(struct gossip *g)
{
        return gossip_leave_with(g, NULL);
}

int gossip_leave_with(struct gossip *g, const struct gossip_stop *why)
{
        if (!g)
                return GOSSIP_EINVAL;
        return gossip__swim_leave(g, why);
}

int gossip_force_leave(struct gossip *g, const uint8_t key[GOSSIP_KEY_BYTES])
{
        struct swim_member *m;

        if (!g || !key)
                return GOSSIP_EINVAL;
        m = gossip__member_find(g, gossip_key_id(key));
        if (!m || m == &g->self)
                return GOSSIP_ENOPEER;
        return gossip__swim_force_leave(g, m);
}

int gossip_trust_add(struct gossip *g, const struct gossip_peer *p)
{
        if (!g || !p)
                return GOSSIP_EINVAL;
        return gossip__trust_add(g, p, false);
}

int gossip__trust_add(struct gossip *g, const struct gossip_peer *p,
                      bool by_cert)
{
        struct swim_member *m;
        uint64_t id;
        int rc;

        if (memcmp(p->key, g->self.key, GOSSIP_KEY_BYTES) == 0)
                return 0; /* ourselves: the peers file lists every node */
        rc = gossip_keyring_add(g->kr, p->key, &id);
        if (rc < 0)
                return rc;
        gossip__unbar(g, id);
        m = gossip__member_find(g, id);
        if (m) {
                if (p->addr.family)
                        m->addr = p->addr;
                if (p->name[0])
                        copy_name(m->name, p->name);
                if (!by_cert)
                        m->by_cert = false; /* the peers file wins */
                return 0;
        }
        rc = gossip__member_add(g, p, id);
        if (rc < 0) {
                gossip_keyring_remove(g->kr, id);
                return rc;
        }
        gossip__member_find(g, id)->by_cert = by_cert;
        return 0;
}

int gossip_trust_remove(struct gossip *g, const uint8_t key[GOSSIP_KEY_BYTES])
{
        struct swim_member *m;
        uint64_t id;

        if (!g || !key)
                return GOSSIP_EINVAL;
        id = gossip_key_id(key);
        m = gossip__member_find(g, id);
        if (!m)
                return GOSSIP_ENOPEER;
        gossip_keyring_remove(g->kr, id);
        gossip_replay_forget(g->rp, id);
        if (m->state != SWIM_UNKNOWN && m->state != GOSSIP_DEAD &&
            g->on_member) {
                struct gossip_member_info mi;
                int old = m->state;
                gossip__member_info(g, m, &mi);
                mi.state = GOSSIP_DEAD;
                g->on_member(g->cb_ctx, &mi, old);
        }
        gossip__member_remove(g, m);
        return 0;
}

void gossip_set_step(struct gossip *g, uint64_t step)
{
        if (g)
                g->step = step;
}

void gossip_set_loading(struct gossip *g, int loading)
{
        if (g)
                gossip__swim_set_loading(g, loading != 0);
}

static void self_info(const struct gossip *g, struct gossip_member_info *o)
{
        gossip__member_info(g, &g->self, o);
        o->step = g->step;
        o->last_heard_ms = gossip__now(g);
        o->msgs_in = g->st.msgs_in;
        o->msgs_out = g->st.msgs_out;
        o->bytes_in = g->st.bytes_in;
        o->bytes_out = g->st.bytes_out;
}

size_t gossip_members(const struct gossip *g, struct gossip_member_info *out,
                      size_t cap)
{
        size_t n = 0, i;

        if (!g)
                return 0;
        if (n < cap)
                self_info(g, &out[n]);
        n++;
        for (i = 0; i < g->n_tab; i++) {
                if (g->tab[i]->state == SWIM_UNKNOWN)
                        continue;
                if (n < cap)
                        gossip__member_info(g, g->tab[i], &out[n]);
                n++;
        }
        return n;
}

int gossip_member_get(const struct gossip *g,
                      const uint8_t key[GOSSIP_KEY_BYTES],
                      struct gossip_member_info *out)
{
        const struct swim_member *m;

        if (!g || !key || !out)
                return GOSSIP_EINVAL;
        if (memcmp(key, g->self.key, GOSSIP_KEY_BYTES) == 0) {
                self_info(g, out);
                return 0;
        }
        m = gossip__member_find(g, gossip_key_id(key));
        if (!m || m->state == SWIM_UNKNOWN ||
            memcmp(m->key, key, GOSSIP_KEY_BYTES) != 0)
                return GOSSIP_ENOPEER;
        gossip__member_info(g, m, out);
        return 0;
}

size_t gossip_alive_count(const struct gossip *g)
{
        return g ? g->n_live : 0;
}

static int key_cmp(const void *a, const void *b)
{
        return memcmp(a, b, GOSSIP_KEY_BYTES);
}

size_t gossip_view(const struct gossip *g, uint8_t (*keys)[GOSSIP_KEY_BYTES],
                   size_t cap)
{
        size_t n = 0, i;

        if (!g)
                return 0;
        if (!keys || cap < g->n_live) {
                return g->n_live; /* a partial view would not be sorted */
        }
        memcpy(keys[n++], g->self.key, GOSSIP_KEY_BYTES);
        for (i = 0; i < g->n_tab; i++) {
                const struct swim_member *m = g->tab[i];
                if (m->state == GOSSIP_ALIVE || m->state == GOSSIP_SUSPECT)
                        memcpy(keys[n++], m->key, GOSSIP_KEY_BYTES);
        }
        qsort(keys, n, GOSSIP_KEY_BYTES, key_cmp);
        return n;
}

void gossip_stats_get(const struct gossip *g, struct gossip_stats *out)
{
        if (!g || !out)
                return;
        *out = g->st;
        out->local_health = g->awareness;
        out->incarnation = g->self.inc;
}

static int send_app(struct gossip *g, const uint8_t key[GOSSIP_KEY_BYTES],
                    int kind, uint64_t step,
                    const struct gossip_params_tell *tell, const void *payload,
                    size_t len)
{
        struct gossip_msg m = {0};
        struct swim_member *to;

        if (!g || !key || (len && !payload))
                return GOSSIP_EINVAL;
        to = gossip__member_find(g, gossip_key_id(key));
        if (!to || memcmp(to->key, key, GOSSIP_KEY_BYTES) != 0 ||
            (to->state != GOSSIP_ALIVE && to->state != GOSSIP_SUSPECT))
                return GOSSIP_ENOPEER;
        m.channel = GOSSIP_CH_STREAM;
        switch (kind) {
        case GOSSIP_APP_GRADIENT:
        case GOSSIP_APP_PARAMS:
        case GOSSIP_APP_SAMPLES:
                m.kind = kind == GOSSIP_APP_GRADIENT ? GOSSIP_MSG_GRADIENT
                         : kind == GOSSIP_APP_PARAMS ? GOSSIP_MSG_PARAMS
                                                     : GOSSIP_MSG_SAMPLES;
                m.u.tensor.step = step;
                m.u.tensor.part_count = 1;
                m.u.tensor.n_elems =
                    kind == GOSSIP_APP_SAMPLES ? len : len / sizeof(float);
                m.u.tensor.payload = payload;
                m.u.tensor.payload_len = len;
                if (kind == GOSSIP_APP_PARAMS && tell) {
                        m.u.tensor.period = tell->period;
                        m.u.tensor.need = tell->need;
                        m.u.tensor.rx_rate = tell->rx_rate;
                        m.u.tensor.rx_span = tell->rx_span;
                }
                break;
        case GOSSIP_APP_STATE_REQ:
                m.kind = GOSSIP_MSG_STATE_REQ;
                break;
        case GOSSIP_APP_STATE:
                m.kind = GOSSIP_MSG_STATE;
                m.u.state.step = step;
                m.u.state.req_seq = to->state_req_seq;
                m.u.state.data = payload;
                m.u.state.len = len;
                break;
        default:
                return GOSSIP_EINVAL;
        }
        if (len > GOSSIP_WIRE_STREAM_MAX - GOSSIP_WIRE_OVERHEAD - 256)
                return GOSSIP_ETOOBIG;
        /* Point to point: GRADIENT, STATE, PARAMS, SAMPLES carry a MAC under
         * our pairwise key instead of a signature (NULL: signed). */
        m.mac_key = gossip_keyring_mac_key(g->kr, to->key_id);
        g->st.app_out++;
        return gossip__send(g, to, &to->addr, &m);
}

int gossip_send_app(struct gossip *g, const uint8_t key[GOSSIP_KEY_BYTES],
                    int kind, uint64_t step, const void *payload, size_t len)
{
        return send_app(g, key, kind, step, NULL, payload, len);
}

int gossip_send_params(struct gossip *g, const uint8_t key[GOSSIP_KEY_BYTES],
                       uint64_t step, const struct gossip_params_tell *tell,
                       const void *payload, size_t len)
{
        return send_app(g, key, GOSSIP_APP_PARAMS, step, tell, payload, len);
}
