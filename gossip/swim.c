/*
 * swim.c - membership and failure detection: SWIM with Lifeguard.
 *
 * The protocol itself (see swim.h for its outline): probe scheduling,
 * indirect probes and relays, suspicion with Lifeguard's shrinking timeout,
 * refutation, the piggyback queue, gossip rounds, push-pull anti-entropy,
 * join and leave. Bytes never appear here: messages are struct gossip_msg
 * and leave through gossip__send() (gossip.c), which encodes and signs.
 *
 * Invariants:
 *  - a member's incarnation never decreases; ours only grows;
 *  - m->in_bq <=> m is in g->bq <=> m->tx_left > 0;
 *  - m->in_suspects <=> m is in g->suspects <=> m->state == SUSPECT;
 *  - at most one probe in flight; the next one starts a (scaled) probe
 *    period after the previous one started.
 *
 * Confirmations (Lifeguard): a suspect update carries its origin, the
 * member whose own failed probe raised it; a confirmation is a suspect
 * update for the same incarnation from a distinct origin, so forwarders
 * of one rumour count once. A node whose own probe fails on a member it
 * already suspects confirms it and re-spreads the entry with itself as
 * origin. An update without an origin (an older sender) counts its
 * sender, as before; an origin we do not know is not believed either.
 */
#include "swim.h"
#include "base/gn_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(GOSSIP_WIRE_VERSION_MAX == GOSSIP_VERSION_MAX,
               "a version fits the member table and the wire alike");

/*
 * Defaults: memberlist's LAN profile, which Lifeguard was evaluated with.
 *  probe period 1000 ms: one probe per member per second, constant load;
 *  probe timeout 500 ms: several LAN RTTs even on a loaded Pi;
 *  indirect checks 3: P(all three relays lose a datagram) is small;
 *  suspicion mult 4: min suspicion 4*log10(n) periods (n >= 10);
 *  suspicion max mult 6: Lifeguard's ceiling when nobody confirms;
 *  retransmit mult 4: an update rides ~4*log10(n+1) messages;
 *  sync 5000 ms (x log2 scale above 32 members, as memberlist scales
 *    push-pull): "every few seconds", each SYNC is O(n) bytes;
 *  awareness max 8: probes slow down at most 8x on an overloaded node;
 *  gossip 200 ms to 3 members: spreads an update in ~log_3(n) rounds.
 */
void gossip_tunables_default(struct gossip_tunables *t)
{
        t->probe_period_ms = 1000;
        t->probe_timeout_ms = 500;
        t->indirect_checks = 3;
        t->suspicion_mult = 4;
        t->suspicion_max_mult = 6;
        t->retransmit_mult = 4;
        t->sync_period_ms = 5000;
        t->awareness_max = 8;
        t->gossip_interval_ms = 200;
        t->gossip_fanout = 3;
}

uint64_t gossip__now(const struct gossip *g)
{
        return g->env.now_ms(g->env.ctx);
}

uint64_t gossip__rand(struct gossip *g)
{
        return gn_splitmix64(&g->rng);
}

static bool is_live(int state)
{
        return state == GOSSIP_ALIVE || state == GOSSIP_SUSPECT;
}

/* ---- the member table (sorted by key id) ---- */

static size_t tab_lower(const struct gossip *g, uint64_t key_id)
{
        size_t lo = 0, hi = g->n_tab;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (g->tab[mid]->key_id < key_id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

struct swim_member *gossip__member_find(const struct gossip *g, uint64_t key_id)
{
        size_t i = tab_lower(g, key_id);

        if (i < g->n_tab && g->tab[i]->key_id == key_id)
                return g->tab[i];
        return NULL;
}

static int grow(void *pp, size_t *cap, size_t need)
{
        void **p = pp;
        size_t c = *cap ? *cap : 16;
        void *np;

        if (need <= *cap)
                return 0;
        while (c < need)
                c *= 2;
        np = realloc(*p, c * sizeof(void *));
        if (!np)
                return GOSSIP_ENOMEM;
        *p = np;
        *cap = c;
        return 0;
}

int gossip__member_add(struct gossip *g, const struct gossip_peer *p,
                       uint64_t key_id)
{
        struct swim_member *m;
        size_t i, cap;
        int rc;

        rc = grow(&g->tab, &g->cap_tab, g->n_tab + 1);
        if (rc < 0)
                return rc;
        /* plist, suspects and bq hold each member at most once. */
        cap = g->cap_tab;
        if (!(m = calloc(1, sizeof(*m))))
                return GOSSIP_ENOMEM;
        {
                void *a = realloc(g->plist, cap * sizeof(void *));
                if (a)
                        g->plist = a;
                void *b = realloc(g->suspects, cap * sizeof(void *));
                if (b)
                        g->suspects = b;
                void *c = realloc(g->bq, (cap + 1) * sizeof(void *));
                if (c)
                        g->bq = c;
                if (!a || !b || !c) {
                        free(m);
                        return GOSSIP_ENOMEM;
                }
        }
        m->key_id = key_id;
        memcpy(m->key, p->key, GOSSIP_KEY_BYTES);
        memcpy(m->name, p->name, GOSSIP_NAME_MAX);
        m->name[GOSSIP_NAME_MAX - 1] = 0;
        m->addr = p->addr;
        m->state = SWIM_UNKNOWN;
        i = tab_lower(g, key_id);
        memmove(&g->tab[i + 1], &g->tab[i], (g->n_tab - i) * sizeof(void *));
        g->tab[i] = m;
        g->n_tab++;
        return 0;
}

static void list_del(struct swim_member **l, size_t *n,
                     const struct swim_member *m)
{
        size_t i;

        for (i = 0; i < *n; i++) {
                if (l[i] == m) {
                        memmove(&l[i], &l[i + 1], (*n - i - 1) * sizeof(*l));
                        (*n)--;
                        return;
                }
        }
}

void gossip__member_remove(struct gossip *g, struct swim_member *m)
{
        size_t i = tab_lower(g, m->key_id);
        size_t j;

        if (is_live(m->state))
                g->n_live--;
        if (m->state != SWIM_UNKNOWN)
                g->n_known--;
        if (m->in_suspects)
                list_del(g->suspects, &g->n_suspects, m);
        if (m->in_bq)
                list_del(g->bq, &g->n_bq, m);
        for (j = 0; j < g->n_plist; j++) {
                if (g->plist[j] == m) {
                        memmove(&g->plist[j], &g->plist[j + 1],
                                (g->n_plist - j - 1) * sizeof(void *));
                        g->n_plist--;
                        if (g->i_plist > j)
                                g->i_plist--;
                        break;
                }
        }
        if (g->probe.m == m)
                g->probe.m = NULL;
        memmove(&g->tab[i], &g->tab[i + 1],
                (g->n_tab - i - 1) * sizeof(void *));
        g->n_tab--;
        free(m);
}

void gossip__member_info(const struct gossip *g, const struct swim_member *m,
                         struct gossip_member_info *o)
{
        memset(o, 0, sizeof(*o));
        memcpy(o->key, m->key, GOSSIP_KEY_BYTES);
        memcpy(o->name, m->name, GOSSIP_NAME_MAX);
        memcpy(o->version, m->version, GOSSIP_VERSION_MAX);
        o->loading = m->loading;
        o->addr = m->addr;
        o->state = m->state;
        o->incarnation = m->inc;
        o->rtt_ms = m->rtt_ms;
        o->step = m->step;
        o->last_heard_ms = m->last_heard_ms;
        o->msgs_in = m->msgs_in;
        o->msgs_out = m->msgs_out;
        o->bytes_in = m->bytes_in;
        o->bytes_out = m->bytes_out;
        memcpy(o->rejects, m->rejects, sizeof(o->rejects));
        o->stop = m->stop;
        o->refused = m->refused;
        o->cert_serial = m->cert_len ? m->cert_serial : 0;
        o->cert_not_after = m->cert_len ? m->cert_not_after : 0;
        o->cert_status = gossip__cert_status(g, m);
        o->by_cert = m->by_cert;
}

/* ---- timing ---- */

static uint64_t scaled(const struct gossip *g, uint32_t ms)
{
        return (uint64_t)ms * (g->awareness + 1);
}

static void awareness_add(struct gossip *g, int delta)
{
        long a = (long)g->awareness + delta;

        if (a < 0)
                a = 0;
        if (a > (long)g->tun.awareness_max - 1)
                a = (long)g->tun.awareness_max - 1;
        g->awareness = (uint32_t)a;
}

/* Lifeguard: timeout(c) = max - (max - min) * log(c+1) / log(k+1), at
 * least min, where c is the number of independent confirmations and k the
 * number expected. min = suspicion_mult * max(1, log10 n) * period.
 *
 * n counts the members we know (heard of, in any state, ourselves
 * included), as memberlist does, not the live ones: a node cut off from
 * the rest sees them go suspect and dead, and must not take that as the
 * cluster shrinking. k = suspicion_mult - 2, but at most n - 2 (the others
 * besides us and the suspect that could confirm). memberlist drops k to 0
 * (timeout min) when n - 2 < suspicion_mult - 2; we keep k = n - 2, so in
 * a 3-member cluster a lone suspecter waits max (no one can corroborate
 * it), while two who agree reach min with one confirmation. Only with 2
 * members (k = 0, nobody could confirm) does the timeout start at min. */
static uint64_t suspicion_timeout(const struct gossip *g, uint32_t c)
{
        double n = (double)(g->n_known ? g->n_known : 1);
        double lg = n > 10 ? log10(n) : 1.0;
        double mn = g->tun.suspicion_mult * lg * g->tun.probe_period_ms;
        double mx = mn * g->tun.suspicion_max_mult;
        long k = (long)g->tun.suspicion_mult - 2;
        double t;

        if (k > (long)g->n_known - 2)
                k = (long)g->n_known - 2;
        if (k < 1)
                return (uint64_t)mn;
        if (c > (uint32_t)k)
                c = (uint32_t)k;
        t = mx - (mx - mn) * log((double)c + 1) / log((double)k + 1);
        return (uint64_t)(t < mn ? mn : t);
}

static uint32_t retransmit_limit(const struct gossip *g)
{
        double r = ceil(log10((double)g->n_live + 1.0));

        return g->tun.retransmit_mult * (uint32_t)(r < 1 ? 1 : r);
}

/* ---- dissemination queue ---- */

static void bq_push(struct gossip *g, struct swim_member *m)
{
        m->tx_left = retransmit_limit(g);
        if (!m->in_bq) {
                g->bq[g->n_bq++] = m;
                m->in_bq = true;
        }
}

void gossip__swim_entry(const struct swim_member *m, struct gossip_update *u)
{
        memset(u, 0, sizeof(*u));
        u->key_id = m->key_id;
        u->incarnation = m->inc;
        u->addr = m->addr;
        u->state = (uint8_t)m->state;
        if (m->state == GOSSIP_SUSPECT)
                u->origin = m->origin;
        memcpy(u->name, m->name, GOSSIP_WIRE_NAME_MAX);
        u->name[GOSSIP_WIRE_NAME_MAX - 1] = 0;
        if (m->state == GOSSIP_ALIVE) {
                memcpy(u->version, m->version, GOSSIP_WIRE_VERSION_MAX);
                u->settings = m->settings;
                u->loading = m->loading;
        }
}

static int bq_cmp(const void *a, const void *b)
{
        const struct swim_member *x = *(struct swim_member *const *)a;
        const struct swim_member *y = *(struct swim_member *const *)b;

        if (x->tx_left != y->tx_left)
                return x->tx_left > y->tx_left ? -1 : 1;
        return x->key_id < y->key_id ? -1 : x->key_id > y->key_id;
}

size_t gossip__swim_piggyback(struct gossip *g, struct swim_member *to,
                              struct gossip_update *upd,
                              struct swim_member **who, size_t cap)
{
        size_t n = 0, i;

        if (to && (to->state == GOSSIP_SUSPECT || to->state == GOSSIP_DEAD) &&
            n < cap) {
                gossip__swim_entry(to, &upd[n]);
                who[n++] = NULL; /* not a queue entry */
                to->told_ms = gossip__now(g);
        }
        qsort(g->bq, g->n_bq, sizeof(*g->bq), bq_cmp);
        for (i = 0; i < g->n_bq && n < cap; i++) {
                if (g->bq[i] == to && n > 0 && who[0] == NULL)
                        continue;
                gossip__swim_entry(g->bq[i], &upd[n]);
                who[n++] = g->bq[i];
        }
        return n;
}

void gossip__swim_piggyback_done(struct gossip *g, struct swim_member **who,
                                 size_t n_sent)
{
        size_t i, j;

        for (i = 0; i < n_sent; i++)
                if (who[i] && who[i]->tx_left)
                        who[i]->tx_left--;
        for (i = j = 0; i < g->n_bq; i++) {
                if (g->bq[i]->tx_left)
                        g->bq[j++] = g->bq[i];
                else
                        g->bq[i]->in_bq = false;
        }
        g->n_bq = j;
}

size_t gossip__swim_full_view(const struct gossip *g, struct gossip_update *upd)
{
        size_t n = 0, i;

        gossip__swim_entry(&g->self, &upd[n++]);
        for (i = 0; i < g->n_tab; i++)
                if (g->tab[i]->state != SWIM_UNKNOWN)
                        gossip__swim_entry(g->tab[i], &upd[n++]);
        return n;
}

/* ---- state changes ---- */

static void set_state(struct gossip *g, struct swim_member *m, int state,
                      uint64_t inc)
{
        int old = m->state;

        m->inc = inc;
        if (old == state)
                return;
        if (is_live(old))
                g->n_live--;
        if (is_live(state))
                g->n_live++;
        if (old == GOSSIP_SUSPECT) {
                list_del(g->suspects, &g->n_suspects, m);
                m->in_suspects = false;
        }
        if (state == GOSSIP_SUSPECT) {
                g->suspects[g->n_suspects++] = m;
                m->in_suspects = true;
        }
        if (old == SWIM_UNKNOWN) {
                g->n_learned++;
                g->n_known++;
        }
        if (is_live(state)) /* a new life: its old LEAVE's reason is gone */
                m->stop.reason = GOSSIP_STOP_NONE;
        m->state = state;
        m->state_ms = gossip__now(g);
        if (g->on_member) {
                struct gossip_member_info mi;
                gossip__member_info(g, m, &mi);
                g->on_member(g->cb_ctx, &mi, old);
        }
}

static void send_tell(struct gossip *g, struct swim_member *m)
{
        struct gossip_msg msg = {0};

        msg.kind = GOSSIP_MSG_ACK; /* ack_seq 0: an update carrier */
        msg.channel = GOSSIP_CH_DGRAM;
        gossip__send(g, m, &m->addr, &msg);
}

/* Tell m (rate-limited) that we think it suspect or dead. */
static void tell(struct gossip *g, struct swim_member *m)
{
        uint64_t now = gossip__now(g);

        if (m->told_ms && now - m->told_ms < g->tun.probe_period_ms)
                return;
        send_tell(g, m);
}

static void suspect(struct gossip *g, struct swim_member *m, uint64_t inc,
                    uint64_t from)
{
        m->suspect_start_ms = gossip__now(g);
        m->n_confirm = 0;
        m->confirmers[0] = from;
        m->origin = from;
        set_state(g, m, GOSSIP_SUSPECT, inc);
        m->suspect_deadline_ms = m->suspect_start_ms + suspicion_timeout(g, 0);
        bq_push(g, m);
        g->st.suspects_raised++;
        tell(g, m);
}

/* An independent confirmation of m's suspicion by `from` (an origin).
 * true if it counted (a confirmer not seen before). */
static bool confirm(struct gossip *g, struct swim_member *m, uint64_t from)
{
        uint32_t i, have = m->n_confirm + 1;

        if (have >= SWIM_MAX_CONFIRM)
                return false;
        for (i = 0; i < have; i++)
                if (m->confirmers[i] == from)
                        return false;
        m->confirmers[have] = from;
        m->n_confirm++;
        m->suspect_deadline_ms =
            m->suspect_start_ms + suspicion_timeout(g, m->n_confirm);
        return true;
}

static void refute(struct gossip *g, uint64_t inc)
{
        if (inc >= g->self.inc)
                g->self.inc = inc + 1;
        g->st.refutes++;
        awareness_add(g, 1);
        bq_push(g, &g->self);
}

void gossip__swim_set_loading(struct gossip *g, bool loading)
{
        if (g->self.loading == loading || g->self.state == GOSSIP_LEFT)
                return;
        g->self.loading = loading;
        /* a newer incarnation, so that every member takes the change
         * over what it holds of this life (apply_alive) */
        g->self.inc++;
        bq_push(g, &g->self);
}

/* An update about ourselves, from the member with key id `from`. */
static void apply_self(struct gossip *g, const struct gossip_update *u,
                       uint64_t from)
{
        struct swim_member *m;

        if (g->self.state == GOSSIP_LEFT)
                return;
        if (u->state == GOSSIP_ALIVE ? u->incarnation > g->self.inc
                                     : u->incarnation >= g->self.inc) {
                refute(g, u->incarnation);
                return;
        }
        if (u->state == GOSSIP_ALIVE)
                return;
        /* The sender still suspects an older life of ours: the refutation
         * has not reached it. Answer it directly (rate-limited), with our
         * entry at the head of the queue. */
        m = gossip__member_find(g, from);
        if (!m || (m->told_ms &&
                   gossip__now(g) - m->told_ms < g->tun.probe_period_ms))
                return;
        bq_push(g, &g->self);
        m->told_ms = gossip__now(g);
        send_tell(g, m);
}

int gossip_addr_usable(const struct gossip_addr *a)
{
        size_t n = a->family == 4 ? 4 : a->family == 6 ? 16 : 0;

        if (!n || !a->port)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (a->addr[i])
                        return 1;
        return 0;
}

/* ---- cluster settings (settings.h) ---- */

/* A member telling digest d cannot train with us. Nobody is refused when
 * we have no settings, or it told none (an older node). */
static bool settings_differ(const struct gossip *g, uint64_t d)
{
        return d && g->settings.digest && d != g->settings.digest;
}

/* m runs other settings: out of the live states (without spreading it:
 * others judge by the digest themselves), and the daemon told, at the
 * first refusal and whenever the differing setting can be named. */
static void refuse(struct gossip *g, struct swim_member *m, const char *name,
                   const char *ours, const char *theirs)
{
        bool first = !m->refused;

        m->refused = true;
        if (is_live(m->state))
                set_state(g, m, GOSSIP_DEAD, m->inc);
        if ((first || name) && g->on_refused) {
                struct gossip_member_info mi;

                gossip__member_info(g, m, &mi);
                g->on_refused(g->cb_ctx, &mi, name, ours, theirs);
        }
}

/* The digest an update about m tells, if it is news of m's current life
 * or a newer one (a newer life that tells none is an older node: no
 * digest). 1 if m is refused after it. */
static bool take_digest(struct gossip *g, struct swim_member *m, uint64_t inc,
                        uint64_t digest)
{
        if (m->state == SWIM_UNKNOWN || inc > m->inc)
                m->settings = digest;
        else if (inc == m->inc && digest)
                m->settings = digest;
        if (settings_differ(g, m->settings)) {
                refuse(g, m, NULL, NULL, NULL);
                return true;
        }
        m->refused = false;
        return false;
}

static void apply_alive(struct gossip *g, struct swim_member *m,
                        const struct gossip_update *u)
{
        if (take_digest(g, m, u->incarnation, u->settings))
                return;
        /* a version belongs to a life (a restart raises the incarnation):
         * take it also from news of the life we know, which may have come
         * first without one (we marked it alive on hearing from it) */
        if (u->version[0] && u->incarnation == m->inc)
                memcpy(m->version, u->version, GOSSIP_VERSION_MAX);
        /* loading, likewise; its end comes with a newer incarnation
         * (gossip_set_loading), so news of the same life only sets it (a
         * forwarder that predates element 8 drops it) */
        if (u->loading && u->incarnation == m->inc)
                m->loading = true;
        if (m->state != SWIM_UNKNOWN && u->incarnation <= m->inc)
                return;
        m->loading = u->loading;
        /* a wildcard told by a node bound to 0.0.0.0 would have us send
         * to ourselves: keep the address we know it by (its peers line) */
        if (gossip_addr_usable(&u->addr))
                m->addr = u->addr;
        else if (u->addr.family)
                g->st.addrs_refused++;
        /* a member trusted on its certificate is named by it: the
         * authority signed that name, an update is anyone's word */
        if (u->name[0] && !m->by_cert)
                memcpy(m->name, u->name, GOSSIP_NAME_MAX);
        if (u->version[0])
                memcpy(m->version, u->version, GOSSIP_VERSION_MAX);
        set_state(g, m, GOSSIP_ALIVE, u->incarnation);
        bq_push(g, m);
}

static void apply_suspect(struct gossip *g, struct swim_member *m, uint64_t inc,
                          uint64_t from)
{
        if (m->state == SWIM_UNKNOWN || inc < m->inc)
                return;
        if (m->state == GOSSIP_SUSPECT && inc == m->inc) {
                confirm(g, m, from);
                return;
        }
        if (inc == m->inc && m->state != GOSSIP_ALIVE)
                return; /* dead or left already */
        suspect(g, m, inc, from);
}

static void apply_gone(struct gossip *g, struct swim_member *m, uint64_t inc,
                       int state)
{
        if (m->state != SWIM_UNKNOWN && inc < m->inc)
                return;
        if (m->state == GOSSIP_LEFT)
                return;
        if (m->state == GOSSIP_DEAD && state == GOSSIP_DEAD) {
                m->inc = inc;
                return;
        }
        set_state(g, m, state, inc);
        bq_push(g, m);
}

/* Who raised the suspicion u spreads: its origin when given and believable
 * (a member we know, not the subject itself), else its sender `from`. */
static uint64_t suspect_origin(const struct gossip *g,
                               const struct gossip_update *u, uint64_t from)
{
        if (!u->origin || u->origin == u->key_id)
                return from;
        if (u->origin != g->self.key_id && !gossip__member_find(g, u->origin))
                return from;
        return u->origin;
}

/* Does a remote "dead" about m only count as a suspicion? Yes when we see m
 * alive (our view is at least as fresh as the rumour: let m refute it),
 * and when we suspect m but heard from it directly since, or suspect it
 * for less than the suspicion minimum (m has not yet had the time to
 * refute to us that the rumour's author gave it); always in a SYNC (a whole
 * view, possibly stale) about a member we know. */
static bool dead_as_suspect(const struct gossip *g, const struct swim_member *m,
                            bool is_sync)
{
        uint64_t now = gossip__now(g);

        if (m->state == SWIM_UNKNOWN)
                return false;
        if (is_sync || m->state == GOSSIP_ALIVE)
                return true;
        if (m->state != GOSSIP_SUSPECT)
                return false;
        return m->last_heard_ms >= m->suspect_start_ms ||
               now - m->suspect_start_ms <
                   suspicion_timeout(g, SWIM_MAX_CONFIRM);
}

/* Merge one update from `from` (a key id). A remote "dead" about a member
 * we see alive (or in a SYNC) only starts a suspicion: the sender's view may
 * be stale (a healed partition), and a suspicion is refutable; only our
 * own suspicion timeout turns a member we saw alive into dead. */
static void apply_update(struct gossip *g, const struct gossip_update *u,
                         uint64_t from, bool is_sync)
{
        struct swim_member *m;

        if (u->key_id == g->self.key_id) {
                apply_self(g, u, from);
                return;
        }
        m = gossip__member_find(g, u->key_id);
        if (!m)
                return; /* not trusted: ignore, never add */
        switch (u->state) {
        case GOSSIP_ALIVE:
                apply_alive(g, m, u);
                break;
        case GOSSIP_SUSPECT:
                apply_suspect(g, m, u->incarnation, suspect_origin(g, u, from));
                break;
        case GOSSIP_DEAD:
                if (dead_as_suspect(g, m, is_sync))
                        apply_suspect(g, m, u->incarnation, from);
                else
                        apply_gone(g, m, u->incarnation, GOSSIP_DEAD);
                break;
        case GOSSIP_LEFT:
                apply_gone(g, m, u->incarnation, GOSSIP_LEFT);
                break;
        }
}

/* m's own LEAVE at incarnation inc: it left, for the reason it gives.
 * The reason is kept before the state changes, so on_member sees it; if
 * the piggybacked `left` came first, on_member is told again (old state
 * left) once the reason is known. */
static void leave_heard(struct gossip *g, struct swim_member *m, uint64_t inc,
                        const struct gossip_stop *why)
{
        int known = why->reason != GOSSIP_STOP_NONE &&
                    m->stop.reason == GOSSIP_STOP_NONE &&
                    (m->state == SWIM_UNKNOWN || inc >= m->inc);

        if (known)
                m->stop = *why;
        if (m->state == GOSSIP_LEFT && known && g->on_member) {
                struct gossip_member_info mi;

                gossip__member_info(g, m, &mi);
                g->on_member(g->cb_ctx, &mi, GOSSIP_LEFT);
                return;
        }
        apply_gone(g, m, inc, GOSSIP_LEFT);
}

/* A verified message from m proves it is running at incarnation inc. */
static void direct_evidence(struct gossip *g, struct swim_member *m,
                            const struct gossip_addr *from_addr,
                            const struct gossip_msg *msg)
{
        uint64_t inc = msg->incarnation;

        if (msg->kind == GOSSIP_MSG_LEAVE) {
                leave_heard(g, m, inc, &msg->u.leave);
                return;
        }
        if (m->state == SWIM_UNKNOWN || inc > m->inc) {
                if (!m->addr.family && msg->channel == GOSSIP_CH_DGRAM)
                        m->addr = *from_addr;
                /* a newer incarnation is how a member ends its loading,
                 * and the frame does not say: exchanging until its news
                 * of this incarnation says loading (apply_alive) */
                m->loading = false;
                set_state(g, m, GOSSIP_ALIVE, inc);
                bq_push(g, m);
        } else if (m->state == GOSSIP_SUSPECT || m->state == GOSSIP_DEAD) {
                tell(g, m);
        }
}

/* ---- probes ---- */

/* A random member in state alive (or suspect too, if allow_suspect), other
 * than `not`; NULL if none. */
static struct swim_member *
pick_live(struct gossip *g, const struct swim_member * not, bool allow_suspect)
{
        size_t i, start, tries;

        if (!g->n_tab)
                return NULL;
        for (tries = 0; tries < 8; tries++) {
                struct swim_member *m = g->tab[gossip__rand(g) % g->n_tab];
                if (m != not &&(m->state == GOSSIP_ALIVE ||
                                (allow_suspect && m->state == GOSSIP_SUSPECT)))
                        return m;
        }
        start = gossip__rand(g) % g->n_tab;
        for (i = 0; i < g->n_tab; i++) {
                struct swim_member *m = g->tab[(start + i) % g->n_tab];
                if (m != not &&(m->state == GOSSIP_ALIVE ||
                                (allow_suspect && m->state == GOSSIP_SUSPECT)))
                        return m;
        }
        return NULL;
}

static void plist_rebuild(struct gossip *g)
{
        size_t i, n = 0;

        for (i = 0; i < g->n_tab; i++)
                if (is_live(g->tab[i]->state))
                        g->plist[n++] = g->tab[i];
        for (i = n; i > 1; i--) { /* Fisher-Yates */
                size_t j = gossip__rand(g) % i;
                struct swim_member *t = g->plist[i - 1];
                g->plist[i - 1] = g->plist[j];
                g->plist[j] = t;
        }
        g->n_plist = n;
        g->i_plist = 0;
}

static struct swim_member *next_target(struct gossip *g)
{
        int pass;

        for (pass = 0; pass < 2; pass++) {
                while (g->i_plist < g->n_plist) {
                        struct swim_member *m = g->plist[g->i_plist++];
                        if (is_live(m->state))
                                return m;
                }
                plist_rebuild(g);
        }
        return NULL;
}

static void probe_start(struct gossip *g, uint64_t now)
{
        struct swim_member *m = next_target(g);
        struct gossip_msg msg = {0};

        g->next_probe_at = now + scaled(g, g->tun.probe_period_ms);
        if (!m)
                return;
        memset(&g->probe, 0, sizeof(g->probe));
        g->probe.m = m;
        g->probe.sent_ms = now;
        g->probe.timeout_at = now + scaled(g, g->tun.probe_timeout_ms);
        g->probe.end_at = g->next_probe_at;
        msg.kind = GOSSIP_MSG_PING;
        msg.channel = GOSSIP_CH_DGRAM;
        msg.u.ping.target = m->key_id;
        gossip__send(g, m, &m->addr, &msg);
        g->probe.seq = msg.seq;
        g->st.probes++;
}

static void probe_indirect(struct gossip *g)
{
        struct swim_probe *p = &g->probe;
        struct swim_member *used[SWIM_MAX_INDIRECT];
        struct gossip_msg sp = {0};
        uint32_t k = g->tun.indirect_checks, n = 0, tries, i;

        if (k > SWIM_MAX_INDIRECT)
                k = SWIM_MAX_INDIRECT;
        p->indirect = true;
        g->st.probe_timeouts++;
        for (tries = 0; n < k && tries < 4 * k; tries++) {
                struct swim_member *h = pick_live(g, p->m, false);
                struct gossip_msg msg = {0};
                if (!h)
                        break;
                for (i = 0; i < n && used[i] != h; i++)
                        ;
                if (i < n)
                        continue;
                used[n++] = h;
                msg.kind = GOSSIP_MSG_PING_REQ;
                msg.channel = GOSSIP_CH_DGRAM;
                msg.u.ping_req.target = p->m->key_id;
                msg.u.ping_req.addr = p->m->addr;
                gossip__send(g, h, &h->addr, &msg);
                if (!p->req_lo)
                        p->req_lo = msg.seq;
                p->req_hi = msg.seq;
                g->st.indirect_probes++;
        }
        p->expected_nacks = n;
        /* memberlist's TCP fallback: the stream retransmits what datagram
         * loss ate; answered on the stream, within the same period */
        sp.kind = GOSSIP_MSG_PING;
        sp.channel = GOSSIP_CH_STREAM;
        sp.u.ping.target = p->m->key_id;
        if (gossip__send(g, p->m, &p->m->addr, &sp) == 0) {
                p->stream_seq = sp.seq;
                g->st.stream_probes++;
        }
}

static void probe_fail(struct gossip *g)
{
        struct swim_probe *p = &g->probe;
        struct swim_member *m = p->m;

        /* Lifeguard: a relay that did not even NACK hints that we are the
         * slow one; without relays, blame ourselves once. */
        if (p->expected_nacks)
                awareness_add(g, (int)(p->expected_nacks - p->nacks));
        else
                awareness_add(g, 1);
        p->m = NULL;
        g->st.probe_failures++;
        if (m->state == GOSSIP_ALIVE) {
                suspect(g, m, m->inc, g->self.key_id);
        } else if (m->state == GOSSIP_SUSPECT &&
                   confirm(g, m, g->self.key_id)) {
                /* our own, independent suspicion: spread it as such */
                m->origin = g->self.key_id;
                bq_push(g, m);
        }
}

static void on_ack(struct gossip *g, struct swim_member *from,
                   const struct gossip_msg *msg)
{
        struct swim_probe *p = &g->probe;
        uint64_t s = msg->u.ack.ack_seq;
        size_t i;

        if (s == 0)
                return; /* an update carrier */
        if (p->m && p->indirect && s >= p->req_lo && s <= p->req_hi) {
                if (msg->u.ack.nack) {
                        p->nacks++;
                        g->st.nacks++;
                } else if (msg->u.ack.target == p->m->key_id) {
                        p->m = NULL;
                        awareness_add(g, -1);
                }
                return;
        }
        if (p->m && from == p->m && !msg->u.ack.nack &&
            (s == p->seq || (p->stream_seq && s == p->stream_seq))) {
                uint32_t rtt = (uint32_t)(gossip__now(g) - p->sent_ms);
                from->rtt_ms = from->rtt_ms ? (7 * from->rtt_ms + rtt) / 8
                                            : (rtt ? rtt : 1);
                p->m = NULL;
                awareness_add(g, -1);
                return;
        }
        for (i = 0; i < SWIM_RELAYS; i++) {
                struct swim_relay *r = &g->relays[i];
                struct swim_member *req;
                struct gossip_msg out = {0};
                if (!r->used || r->our_seq != s || r->target != from->key_id)
                        continue;
                r->used = false;
                req = gossip__member_find(g, r->requester);
                if (!req)
                        return;
                out.kind = GOSSIP_MSG_ACK;
                out.channel = GOSSIP_CH_DGRAM;
                out.u.ack.ack_seq = r->req_seq;
                out.u.ack.target = r->target;
                gossip__send(g, req, &req->addr, &out);
                return;
        }
}

static void on_ping_req(struct gossip *g, struct swim_member *from,
                        const struct gossip_msg *msg)
{
        struct swim_member *t = gossip__member_find(g, msg->u.ping_req.target);
        struct gossip_msg out = {0};
        uint64_t now = gossip__now(g);
        size_t i;

        if (!t || !msg->u.ping_req.addr.family)
                return; /* only trusted targets are relayed to */
        for (i = 0; i < SWIM_RELAYS && g->relays[i].used; i++)
                ;
        if (i == SWIM_RELAYS)
                return; /* busy: the requester counts a missing NACK */
        out.kind = GOSSIP_MSG_PING;
        out.channel = GOSSIP_CH_DGRAM;
        out.u.ping.target = t->key_id;
        gossip__send(g, t, &msg->u.ping_req.addr, &out);
        g->relays[i] = (struct swim_relay){
            .used = true,
            .our_seq = out.seq,
            .req_seq = msg->seq,
            .requester = from->key_id,
            .target = t->key_id,
            .nack_at = now + g->tun.probe_timeout_ms * 4 / 5,
            .expire_at = now + g->tun.probe_period_ms,
        };
}

static void relays_tick(struct gossip *g, uint64_t now)
{
        size_t i;

        for (i = 0; i < SWIM_RELAYS; i++) {
                struct swim_relay *r = &g->relays[i];
                struct swim_member *req;
                struct gossip_msg out = {0};
                if (r->used && now >= r->expire_at)
                        r->used = false;
                /* NACK early, but keep forwarding a late ACK until the
                 * requester's probe period is over. */
                if (!r->used || r->nacked || now < r->nack_at)
                        continue;
                r->nacked = true;
                req = gossip__member_find(g, r->requester);
                if (!req)
                        continue;
                out.kind = GOSSIP_MSG_ACK;
                out.channel = GOSSIP_CH_DGRAM;
                out.u.ack.ack_seq = r->req_seq;
                out.u.ack.target = r->target;
                out.u.ack.nack = 1;
                gossip__send(g, req, &req->addr, &out);
        }
}

/* ---- sync, gossip, join, leave ---- */

/* A SYNC to `to`: our whole view, or (digest) our own entry and our
 * view's digest, which the receiver compares with its own (see
 * on_sync). */
static void send_sync(struct gossip *g, struct swim_member *to, bool reply,
                      bool digest)
{
        struct gossip_msg msg = {0};

        msg.kind = GOSSIP_MSG_SYNC;
        msg.channel = GOSSIP_CH_STREAM;
        msg.u.sync.reply = reply;
        msg.u.sync.has_view = digest;
        if (gossip__send(g, to, &to->addr, &msg) == 0)
                g->st.syncs_sent++;
}

static struct swim_member *pick_unwell(struct gossip *g)
{
        size_t i, start, cnt = 0;

        for (i = 0; i < g->n_tab; i++)
                cnt += g->tab[i]->state == GOSSIP_DEAD ||
                       g->tab[i]->state == GOSSIP_SUSPECT;
        if (!cnt)
                return NULL;
        start = gossip__rand(g) % cnt;
        for (i = 0; i < g->n_tab; i++) {
                struct swim_member *m = g->tab[i];
                if (m->state != GOSSIP_DEAD && m->state != GOSSIP_SUSPECT)
                        continue;
                if (start-- == 0)
                        return m;
        }
        return NULL;
}

/* memberlist's push-pull scale: above 32 members, the interval grows with
 * log2(n / 32) + 1, keeping total SYNC bytes per second near O(n log n). */
static uint64_t sync_interval(const struct gossip *g)
{
        double n = (double)g->n_live;
        double mult = n > 32 ? ceil(log2(n) - 5.0) + 1.0 : 1.0;

        return (uint64_t)(g->tun.sync_period_ms * mult);
}

static void sync_round(struct gossip *g)
{
        struct swim_member *m = NULL;

        g->n_syncs++;
        if (g->n_live <= 1 && g->have_join_addr) {
                gossip__swim_join(g, &g->join_addr);
                return;
        }
        if (g->n_syncs % 2 == 1 && !g->joining)
                m = pick_unwell(g);
        if (!m)
                m = pick_live(g, NULL, false);
        /* Asking with our view's digest: in a settled cluster the answer
         * is a digest too, and anti-entropy costs O(1) bytes, not O(n). A
         * joiner's view is known to lack members: it asks with all of it. */
        if (m)
                send_sync(g, m, true, !g->joining);
}

static void gossip_round(struct gossip *g)
{
        uint32_t i;

        for (i = 0; i < g->tun.gossip_fanout && g->n_bq; i++) {
                struct swim_member *m = pick_live(g, NULL, true);
                if (!m)
                        return;
                send_tell(g, m);
        }
}

int gossip__swim_join(struct gossip *g, const struct gossip_addr *addr)
{
        struct gossip_msg msg = {0};

        g->join_addr = *addr;
        g->have_join_addr = true;
        /* Pull a full view again once the join storm has settled: members
         * that joined after us are not in the answer to our JOIN, and
         * gossip misses a few of them (each update reaches a given node
         * ~retransmit_mult*log10(n) times, so ~e^-8 per pair at n = 64).
         * While a pull still teaches us new members, pull again 2 T later
         * (see on_sync_answer). */
        g->joining = true;
        g->next_sync_at = gossip__now(g) + 2 * (uint64_t)g->tun.probe_period_ms;
        msg.kind = GOSSIP_MSG_JOIN;
        msg.channel = GOSSIP_CH_STREAM;
        return gossip__send(g, NULL, addr, &msg);
}

int gossip__swim_force_leave(struct gossip *g, struct swim_member *m)
{
        if (m->state == SWIM_UNKNOWN || m->state == GOSSIP_LEFT)
                return GOSSIP_ENOPEER;
        /* Spread "left" at its current incarnation: a member that is in
         * fact alive refutes it with a higher one, as with any rumour. */
        apply_gone(g, m, m->inc, GOSSIP_LEFT);
        return 0;
}

int gossip__swim_leave(struct gossip *g, const struct gossip_stop *why)
{
        size_t i;

        if (g->self.state == GOSSIP_LEFT)
                return 0;
        g->self.state = GOSSIP_LEFT;
        bq_push(g, &g->self);
        for (i = 0; i < g->n_tab; i++) {
                struct swim_member *m = g->tab[i];
                struct gossip_msg msg = {0};
                if (!is_live(m->state))
                        continue;
                msg.kind = GOSSIP_MSG_LEAVE;
                msg.channel = GOSSIP_CH_DGRAM;
                if (why)
                        msg.u.leave = *why;
                gossip__send(g, m, &m->addr, &msg);
        }
        return 0;
}

/* ---- entry points ---- */

/* An answer to our SYNC or JOIN was merged. While joining, keep pulling
 * every 2 T as long as each pull still brings members we did not know. */
static void on_sync_answer(struct gossip *g, uint64_t learned_before)
{
        uint64_t at = gossip__now(g) + 2 * (uint64_t)g->tun.probe_period_ms;

        if (!g->joining)
                return;
        if (g->n_learned == learned_before) {
                g->joining = false;
                return;
        }
        if (at < g->next_sync_at)
                g->next_sync_at = at;
}

/* A SYNC, its updates taken. A request with the sender's view's digest
 * (key 23) is answered with ours when the two are equal (nothing to
 * teach either way), else with our whole view asking for theirs back
 * (reply 1): a request that came with a whole view gets ours, as
 * push-pull has it. Answers end the exchange. */
static void on_sync(struct gossip *g, struct swim_member *from,
                    const struct gossip_msg *m, uint64_t learned_before)
{
        uint8_t mine[GOSSIP_VIEW_DIGEST_BYTES];

        if (!m->u.sync.reply) {
                on_sync_answer(g, learned_before);
                return;
        }
        if (!m->u.sync.has_view) {
                send_sync(g, from, false, false);
                return;
        }
        if (gossip_view_digest(g, mine) == 0 &&
            memcmp(mine, m->u.sync.view, sizeof(mine)) == 0) {
                g->st.syncs_same++;
                send_sync(g, from, false, true);
                return;
        }
        send_sync(g, from, true, false);
}

/* A frame from a member that may run other settings: its JOIN or SYNC's
 * list (or else its own entry) is judged before anything it says is
 * taken. 1 if it is refused: the frame goes no further, a JOIN is
 * answered (rate-limited) so that the joiner learns why. */
static bool refused_sender(struct gossip *g, struct swim_member *from,
                           const struct gossip_msg *m)
{
        const char *name = NULL, *ours = NULL, *theirs = NULL;
        const struct gossip_addr *to = &from->addr;
        uint64_t now = gossip__now(g);

        if (!g->settings.digest)
                return false;
        if (m->settings_told) {
                if (!take_digest(g, from, m->incarnation, m->settings->digest))
                        return false;
                if (gossip_settings_diff(&g->settings, m->settings, &name,
                                         &ours, &theirs))
                        refuse(g, from, name, ours, theirs);
        } else {
                for (uint32_t i = 0; i < m->n_updates; i++)
                        if (m->updates[i].key_id == from->key_id &&
                            m->updates[i].state == GOSSIP_ALIVE)
                                take_digest(g, from, m->updates[i].incarnation,
                                            m->updates[i].settings);
                if (!from->refused)
                        return false;
        }
        /* a joiner we never knew the address of tells it in its entry */
        for (uint32_t i = 0; !to->family && i < m->n_updates; i++)
                if (m->updates[i].key_id == from->key_id &&
                    gossip_addr_usable(&m->updates[i].addr))
                        to = &m->updates[i].addr;
        if (m->kind == GOSSIP_MSG_JOIN &&
            (!from->told_ms || now - from->told_ms >= g->tun.probe_period_ms)) {
                struct gossip_msg out = {0};

                from->told_ms = now;
                out.kind = GOSSIP_MSG_SYNC;
                out.channel = GOSSIP_CH_STREAM;
                gossip__send(g, from, to, &out);
        }
        return true;
}

int gossip__swim_on_msg(struct gossip *g, struct swim_member *from,
                        const struct gossip_addr *from_addr,
                        const struct gossip_msg *m)
{
        uint32_t i;
        bool sync = m->kind == GOSSIP_MSG_SYNC || m->kind == GOSSIP_MSG_JOIN;
        uint64_t learned_before = g->n_learned;

        if (refused_sender(g, from, m))
                return GOSSIP_ESETTINGS;

        /* Updates first: a JOIN's own entry brings the joiner's address,
         * which the header alone does not. */
        for (i = 0; i < m->n_updates; i++)
                apply_update(g, &m->updates[i], from->key_id, sync);
        direct_evidence(g, from, from_addr, m);
        if (g->self.state == GOSSIP_LEFT)
                return 0; /* leaving: take news, answer nothing */
        switch (m->kind) {
        case GOSSIP_MSG_PING: {
                struct gossip_msg out = {0};
                if (m->u.ping.target && m->u.ping.target != g->self.key_id)
                        return 0; /* meant for a previous owner */
                out.kind = GOSSIP_MSG_ACK;
                out.channel = m->channel; /* a stream PING: a stream ACK */
                out.u.ack.ack_seq = m->seq;
                out.u.ack.target = g->self.key_id;
                /* a stream frame's from_addr is the sender's ephemeral
                 * port: answer its listening address */
                gossip__send(g, from,
                             m->channel == GOSSIP_CH_STREAM && from->addr.family
                                 ? &from->addr
                                 : from_addr,
                             &out);
                break;
        }
        case GOSSIP_MSG_PING_REQ:
                on_ping_req(g, from, m);
                break;
        case GOSSIP_MSG_ACK:
                on_ack(g, from, m);
                break;
        case GOSSIP_MSG_SYNC:
                g->st.syncs_received++;
                on_sync(g, from, m, learned_before);
                break;
        case GOSSIP_MSG_JOIN:
                g->st.syncs_received++;
                send_sync(g, from, false, false);
                break;
        default:
                break;
        }
        return 0;
}

void gossip__swim_tick(struct gossip *g)
{
        uint64_t now = gossip__now(g);
        size_t i;

        if (g->self.state != GOSSIP_LEFT) {
                if (g->probe.m && !g->probe.indirect &&
                    now >= g->probe.timeout_at)
                        probe_indirect(g);
                if (g->probe.m && now >= g->probe.end_at)
                        probe_fail(g);
                if (now >= g->next_probe_at)
                        probe_start(g, now);
                relays_tick(g, now);
                for (i = 0; i < g->n_suspects;) {
                        struct swim_member *m = g->suspects[i];
                        if (now < m->suspect_deadline_ms) {
                                /* Lifeguard's buddy system, repeated: keep
                                 * telling the suspect until it refutes. */
                                tell(g, m);
                                i++;
                                continue;
                        }
                        set_state(g, m, GOSSIP_DEAD, m->inc);
                        bq_push(g, m);
                        g->st.deaths_declared++;
                }
                if (now >= g->next_sync_at) {
                        /* Jitter 3/4 .. 5/4 of the interval: nodes that
                         * joined together must not sync in lockstep. */
                        uint64_t iv = sync_interval(g);
                        sync_round(g);
                        g->next_sync_at =
                            now + iv * 3 / 4 + gossip__rand(g) % (iv / 2 + 1);
                }
        }
        if (g->n_bq && now >= g->next_gossip_at) {
                gossip_round(g);
                g->next_gossip_at = now + g->tun.gossip_interval_ms;
        }
}

static uint64_t min64(uint64_t a, uint64_t b)
{
        return a < b ? a : b;
}

uint64_t gossip__swim_deadline(const struct gossip *g)
{
        uint64_t d = UINT64_MAX;
        size_t i;

        if (g->n_bq)
                d = g->next_gossip_at;
        if (g->self.state == GOSSIP_LEFT)
                return d;
        d = min64(d, g->next_probe_at);
        d = min64(d, g->next_sync_at);
        if (g->probe.m)
                d = min64(d, g->probe.indirect ? g->probe.end_at
                                               : g->probe.timeout_at);
        for (i = 0; i < SWIM_RELAYS; i++)
                if (g->relays[i].used)
                        d = min64(d, g->relays[i].nacked
                                         ? g->relays[i].expire_at
                                         : g->relays[i].nack_at);
        for (i = 0; i < g->n_suspects; i++)
                d = min64(d, g->suspects[i]->suspect_deadline_ms);
        return d;
}
