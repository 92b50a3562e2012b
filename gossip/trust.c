/*
 * trust.c - trust by certificate (docs/protocol.md 12.6, 12.7): keys
 * admitted on the authority's word, the revocation list held, and keys
 * dropped again (barred) when that word is withdrawn or runs out.
 *
 * A JOIN or SYNC from a key we do not trust is admitted when its
 * certificate (wire key 20) verifies and that key signed the frame; a
 * trusted member's SYNC teaches the certificates of its members (key 21).
 * Such members are `by_cert`: their certificate is judged again whenever
 * a newer list is taken and at most once a second against env->unix_now
 * (SWIM_JUDGE_MS), and a member whose certificate is revoked or expired
 * is dropped as gossip_trust_remove() drops one, counted under the
 * certificate's verdict, and barred. Keys of the peers file are never
 * judged: the operator's file outranks the authority.
 *
 * Barred keys keep a keyring of their own, so that a frame one still
 * sends authenticates (signature or MAC) and is refused as `revoked`,
 * charged to it, instead of vanishing among frames of unknown keys. A key
 * is unbarred when a certificate that verifies (a new serial) or the
 * peers file trusts it again.
 *
 * The list spreads by flooding once (design.md, "A new revocation list
 * spreads by flooding once"): a node that takes a newer list sends it at
 * once to every live member but the one it came from, in a SYNC with only
 * its own entry (gossip__send_crl); every JOIN and SYNC carries the list
 * held (key 22), so a node that missed the flood takes it at its next
 * anti-entropy round. The merge rule never lets a list roll back.
 *
 * Pure like the rest of gossip/: the time is env->unix_now (NULL or 0:
 * the clock is not known, protocol.md 12.4). Invariants: a key is in at
 * most one of the keyring and the barred keyring; crl is a view into
 * crl_buf whenever has_crl.
 */
#include "swim.h"

#include <stdlib.h>
#include <string.h>

/* unix seconds by env->unix_now, 0 when the clock is not known */
static uint64_t unix_now(const struct gossip *g)
{
        return g->env.unix_now ? g->env.unix_now(g->env.ctx) : 0;
}

static const struct gossip_crl *held(const struct gossip *g)
{
        return g->has_crl ? &g->crl : NULL;
}

/* ---- admission ---- */

/* A certificate judged under our authority, our list and our clock. */
static enum gossip_cert_verdict judge_cert(const struct gossip *g,
                                           const uint8_t *p, size_t n,
                                           struct gossip_cert *c)
{
        uint64_t now = unix_now(g);

        return gossip_cert_verify(p, n, g->authority, now, now != 0, held(g),
                                  c);
}

static void keep_cert(struct swim_member *m, const uint8_t *p, size_t n,
                      const struct gossip_cert *c)
{
        memcpy(m->cert, p, n);
        m->cert_len = (uint16_t)n;
        m->cert_serial = c->serial;
        m->cert_not_before = c->not_before;
        m->cert_not_after = c->not_after;
}

/* Trusts the key of a certificate that verified, named and placed as it
 * says, and keeps the certificate with the member. 0 or negative. */
static int trust_cert(struct gossip *g, const struct gossip_cert *c,
                      const uint8_t *p, size_t n)
{
        struct gossip_peer peer;
        struct swim_member *m;
        int rc;

        memset(&peer, 0, sizeof(peer));
        memcpy(peer.key, c->pk, GOSSIP_KEY_BYTES);
        peer.addr = c->addr;
        memcpy(peer.name, c->name, strnlen(c->name, GOSSIP_NAME_MAX - 1));
        rc = gossip__trust_add(g, &peer, true);
        if (rc < 0)
                return rc;
        m = gossip__member_find(g, gossip_key_id(c->pk));
        if (m)
                keep_cert(m, p, n, c);
        return 0;
}

int gossip__cert_admissible(const struct gossip *g, const void *buf, size_t len,
                            int channel, struct gossip_cert *c,
                            const uint8_t **cp, size_t *cn, int *verdict)
{
        *verdict = -1;
        if (!g->has_authority ||
            gossip_wire_peek_cert(buf, len, channel, NULL, cp, cn) != 0)
                return GOSSIP_EUNKNOWNKEY;
        *verdict = judge_cert(g, *cp, *cn, c);
        if (*verdict != GOSSIP_CERT_OK)
                return GOSSIP_EUNKNOWNKEY;
        return gossip_wire_authenticate_pk(buf, len, channel, NULL, c->pk);
}

void gossip__admit_by_cert(struct gossip *g, const void *buf, size_t len,
                           int channel)
{
        struct gossip_cert c;
        const uint8_t *p;
        size_t n;
        int verdict;

        if (gossip__cert_admissible(g, buf, len, channel, &c, &p, &n,
                                    &verdict) == 0)
                trust_cert(g, &c, p, n);
        if (verdict >= 0)
                gossip_cert_stats_count(&g->st.certs, verdict);
}

/* A trusted sender's own certificate (kept the first time it verifies)
 * and the certificates its SYNC carries for its members: each key we do
 * not trust yet whose certificate verifies is trusted. */
void gossip__learn_certs(struct gossip *g, struct swim_member *sender,
                         const struct gossip_msg *m)
{
        struct gossip_cert c;

        if (m->cert_len && !sender->cert_len) {
                int v = judge_cert(g, m->cert, m->cert_len, &c);

                gossip_cert_stats_count(&g->st.certs, v);
                if (v == GOSSIP_CERT_OK &&
                    memcmp(c.pk, sender->key, GOSSIP_KEY_BYTES) == 0)
                        keep_cert(sender, m->cert, m->cert_len, &c);
        }
        for (uint32_t i = 0; i < m->n_certs; i++) {
                const struct gossip_blob *b = &m->certs[i];
                struct swim_member *mem;
                int v;

                if (gossip_cert_decode(b->p, b->len, &c, NULL) !=
                    GOSSIP_CERT_OK) {
                        gossip_cert_stats_count(&g->st.certs,
                                                GOSSIP_CERT_MALFORMED);
                        continue;
                }
                mem = gossip__member_find(g, gossip_key_id(c.pk));
                if (memcmp(c.pk, g->self.key, GOSSIP_KEY_BYTES) == 0 ||
                    (mem && mem->cert_len))
                        continue; /* ourselves, or one we hold */
                v = judge_cert(g, b->p, b->len, &c);
                gossip_cert_stats_count(&g->st.certs, v);
                if (v != GOSSIP_CERT_OK)
                        continue;
                if (mem) {
                        keep_cert(mem, b->p, b->len, &c);
                } else if (trust_cert(g, &c, b->p, b->len) == 0 &&
                           (mem = gossip__member_find(g, gossip_key_id(c.pk))))
                        mem->greet = g->own_cert_len != 0;
        }
}

/* Members trusted through another's SYNC do not know our key unless they
 * were told it the same way: our SYNC, with our certificate, tells them
 * at once instead of at their next anti-entropy round with someone who
 * holds it. Sent once, when the member's address is known. */
void gossip__greet_learned(struct gossip *g)
{
        for (size_t i = 0; i < g->n_tab; i++) {
                struct swim_member *m = g->tab[i];
                struct gossip_msg out = {0};

                if (!m->greet || !gossip_addr_usable(&m->addr))
                        continue;
                m->greet = false;
                out.kind = GOSSIP_MSG_SYNC;
                out.channel = GOSSIP_CH_STREAM;
                if (gossip__send(g, m, &m->addr, &out) == 0)
                        g->st.syncs_sent++;
        }
}

/* ---- judging again, barring ---- */

int gossip__cert_status(const struct gossip *g, const struct swim_member *m)
{
        struct gossip_cert c = {0};
        uint64_t now;

        if (!m->cert_len || !g->has_authority)
                return GOSSIP_CERT_OK;
        now = unix_now(g);
        c.authority_id = g->authority_id; /* it verified under ours */
        c.serial = m->cert_serial;
        c.not_before = m->cert_not_before;
        c.not_after = m->cert_not_after;
        return gossip_cert_judge(&c, now, now != 0, held(g));
}

struct swim_barred *gossip__barred_find(const struct gossip *g, uint64_t id)
{
        for (size_t i = 0; i < g->n_barred; i++)
                if (g->barred[i].key_id == id)
                        return &g->barred[i];
        return NULL;
}

/* Remembers m as barred (when there is room). */
static void bar_record(struct gossip *g, const struct swim_member *m,
                       int verdict)
{
        struct swim_barred *b;

        if (g->n_barred == g->cap_barred) {
                size_t cap = g->cap_barred ? 2 * g->cap_barred : 8;

                if (cap > SWIM_BARRED_MAX ||
                    !(b = realloc(g->barred, cap * sizeof(*b))))
                        return;
                g->barred = b;
                g->cap_barred = cap;
        }
        if (gossip_keyring_add(g->barred_kr, m->key, NULL) < 0)
                return;
        b = &g->barred[g->n_barred++];
        memset(b, 0, sizeof(*b));
        b->key_id = m->key_id;
        memcpy(b->key, m->key, GOSSIP_KEY_BYTES);
        memcpy(b->name, m->name, GOSSIP_NAME_MAX);
        b->serial = m->cert_serial;
        b->not_after = m->cert_not_after;
        b->verdict = verdict;
        b->since_ms = gossip__now(g);
}

void gossip__unbar(struct gossip *g, uint64_t key_id)
{
        struct swim_barred *b = gossip__barred_find(g, key_id);
        size_t i;

        if (!b)
                return;
        gossip_keyring_remove(g->barred_kr, key_id);
        i = (size_t)(b - g->barred);
        memmove(b, b + 1, (g->n_barred - i - 1) * sizeof(*b));
        g->n_barred--;
}

/* The first member trusted by certificate that its certificate no
 * longer admits, and *v why; NULL when none. */
static struct swim_member *first_unfit(const struct gossip *g, int *v)
{
        for (size_t i = 0; i < g->n_tab; i++) {
                struct swim_member *m = g->tab[i];

                if (!m->by_cert || !m->cert_len)
                        continue;
                *v = gossip__cert_status(g, m);
                /* a clock stepped back makes no member not yet valid:
                 * it was valid when admitted */
                if (*v == GOSSIP_CERT_REVOKED || *v == GOSSIP_CERT_EXPIRED)
                        return m;
        }
        return NULL;
}

void gossip__judge_members(struct gossip *g)
{
        struct swim_member *m;
        int v;

        /* from the start each time: on_member (from the removal) may
         * change the table */
        while ((m = first_unfit(g, &v)) != NULL) {
                gossip_cert_stats_count(&g->st.certs, v);
                bar_record(g, m, v);
                gossip_trust_remove(g, m->key);
        }
}

int gossip__barred_code(const struct gossip *g, const void *buf, size_t len,
                        int channel, struct swim_barred **b)
{
        uint64_t id;
        uint8_t kind;

        *b = NULL;
        if (!g->n_barred || gossip_wire_peek_sender(buf, len, &id, &kind) ||
            !(*b = gossip__barred_find(g, id)))
                return GOSSIP_EUNKNOWNKEY;
        if (gossip_wire_authenticate(buf, len, channel, NULL, g->barred_kr)) {
                *b = NULL; /* not made by it: anyone can name its key id */
                return GOSSIP_EUNKNOWNKEY;
        }
        return (*b)->verdict == GOSSIP_CERT_REVOKED ? GOSSIP_EREVOKED
                                                    : GOSSIP_EUNKNOWNKEY;
}

/* ---- the list ---- */

/* Takes a copy of a list that merged as newer. 0 or GOSSIP_ENOMEM. */
static int take_crl(struct gossip *g, const void *buf, size_t len)
{
        uint8_t *copy = malloc(len);

        if (!copy)
                return GOSSIP_ENOMEM;
        memcpy(copy, buf, len);
        free(g->crl_buf);
        g->crl_buf = copy;
        gossip_crl_decode(copy, len, &g->crl, NULL);
        g->has_crl = true;
        return 0;
}

int gossip__crl_offer(struct gossip *g, const void *buf, size_t len,
                      const struct swim_member *from)
{
        uint64_t from_id = from ? from->key_id : 0;
        int v, rc;

        v = gossip_crl_merge(held(g), buf, len, g->authority, NULL);
        gossip_crl_stats_count(&g->st.crls, v);
        if (v != GOSSIP_CRL_OK)
                return v;
        if ((rc = take_crl(g, buf, len)) < 0)
                return rc;
        if (g->on_crl)
                g->on_crl(g->cb_ctx, g->crl_buf, g->crl.len, g->crl.seq);
        gossip__judge_members(g);
        /* flood once: every live member but the sender (which may be
         * gone now: barred by the very list it carried) */
        for (size_t i = 0; i < g->n_tab; i++) {
                struct swim_member *m = g->tab[i];

                if (m->key_id == from_id ||
                    (m->state != GOSSIP_ALIVE && m->state != GOSSIP_SUSPECT))
                        continue;
                if (gossip__send_crl(g, m) == 0)
                        g->st.crl_pushes++;
        }
        return GOSSIP_CRL_OK;
}

/* ---- the public calls ---- */

int gossip_set_crl(struct gossip *g, const void *buf, size_t len)
{
        if (!g || !buf || !g->has_authority)
                return GOSSIP_EINVAL;
        return gossip__crl_offer(g, buf, len, NULL);
}

int gossip_crl_get(const struct gossip *g, struct gossip_crl *out)
{
        if (!g || !out)
                return GOSSIP_EINVAL;
        if (!g->has_crl)
                return GOSSIP_ENOPEER;
        *out = g->crl;
        return 0;
}

size_t gossip_barred(const struct gossip *g, struct gossip_barred_info *out,
                     size_t cap)
{
        if (!g)
                return 0;
        for (size_t i = 0; i < g->n_barred && i < cap; i++) {
                const struct swim_barred *b = &g->barred[i];

                memset(&out[i], 0, sizeof(out[i]));
                memcpy(out[i].key, b->key, GOSSIP_KEY_BYTES);
                memcpy(out[i].name, b->name, GOSSIP_NAME_MAX);
                out[i].serial = b->serial;
                out[i].not_after = b->not_after;
                out[i].verdict = b->verdict;
                out[i].rejects = b->rejects;
                out[i].since_ms = b->since_ms;
        }
        return g->n_barred;
}
