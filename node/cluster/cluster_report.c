/*
 * cluster_report.c - what the cluster tells people on the control socket:
 * the replies to members, stats, certs, join and force-leave
 * (docs/control.md).
 * The Prometheus families are in cluster_metrics.c, the exchange's
 * summary line at leave in exchange.c (node_exchange_log_summary).
 *
 * Loop thread only. Counters come from their owners: the protocol core,
 * the transport, the exchange (node_exchange_stats), the hand-off box (a
 * consistent copy under its lock) and the trainer (node_trainer_stats,
 * thread-safe). It may call cluster.c (the timer after a join), never the
 * other way.
 */
#include "cluster/cluster_private.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gn_endian.h"
#include "service/ctl.h"
#include "service/evlog.h"
#include "ident/keys.h"
#include "train/shuffle.h"

static void pack_rejects(msgpack_packer *pk, const uint64_t *r)
{
        size_t n = 0;

        for (int i = 1; i < GOSSIP_REJECT_SLOTS; i++)
                n += r[i] != 0 && gossip_reject_name(-i);
        node_ctl_pack_str(pk, "rejects");
        msgpack_pack_map(pk, n);
        for (int i = 1; i < GOSSIP_REJECT_SLOTS; i++)
                if (r[i] && gossip_reject_name(-i))
                        node_ctl_pack_ku64(pk, gossip_reject_name(-i), r[i]);
}

/* A serial as gossip-keygen prints it: 16 hex digits. */
static void pack_kserial(msgpack_packer *pk, const char *k, uint64_t serial)
{
        char s[17];

        snprintf(s, sizeof(s), "%016llx", (unsigned long long)serial);
        node_ctl_pack_kstr(pk, k, s);
}

/* A member trusted by certificate: "cert": {serial, not_after (unix
 * seconds), status (what it is worth now: a verdict name)}. */
static void pack_cert(msgpack_packer *pk, const struct gossip_member_info *m)
{
        node_ctl_pack_str(pk, "cert");
        msgpack_pack_map(pk, 3);
        pack_kserial(pk, "serial", m->cert_serial);
        node_ctl_pack_ku64(pk, "not_after", m->cert_not_after);
        node_ctl_pack_kstr(pk, "status",
                           gossip_cert_verdict_name(m->cert_status));
}

/* "crl": nil, or the list held: {seq, issued_at (unix seconds),
 * serials: the count, or (all) the serials themselves}. */
static void pack_crl(struct node_cluster *c, msgpack_packer *pk, int all)
{
        struct gossip_crl l;

        node_ctl_pack_str(pk, "crl");
        if (gossip_crl_get(c->g, &l) != 0) {
                msgpack_pack_nil(pk);
                return;
        }
        msgpack_pack_map(pk, 3);
        node_ctl_pack_ku64(pk, "seq", l.seq);
        node_ctl_pack_ku64(pk, "issued_at", l.issued_at);
        if (!all) {
                node_ctl_pack_ku64(pk, "serials", l.n_serials);
                return;
        }
        node_ctl_pack_str(pk, "serials");
        msgpack_pack_array(pk, l.n_serials);
        for (uint32_t i = 0; i < l.n_serials; i++) {
                char s[17];

                snprintf(s, sizeof(s), "%016llx",
                         (unsigned long long)gn_be_get(l.serials + 8 * i, 8));
                node_ctl_pack_str(pk, s);
        }
}

/* The revocation lists offered, by merge verdict, those counted. */
static void pack_crl_verdicts(msgpack_packer *pk,
                              const struct gossip_crl_stats *st)
{
        size_t n = 0;

        for (int i = 0; i < GOSSIP_CRL_VERDICT_COUNT; i++)
                n += st->n[i] != 0;
        node_ctl_pack_str(pk, "crls");
        msgpack_pack_map(pk, n);
        for (int i = 0; i < GOSSIP_CRL_VERDICT_COUNT; i++)
                if (st->n[i])
                        node_ctl_pack_ku64(pk, gossip_crl_verdict_name(i),
                                           st->n[i]);
}

/* The certificates judged, by verdict (gossip/cert.h), those counted. */
static void pack_cert_verdicts(msgpack_packer *pk,
                               const struct gossip_cert_stats *st)
{
        size_t n = 0;

        for (int i = 0; i < GOSSIP_CERT_VERDICT_COUNT; i++)
                n += st->n[i] != 0;
        node_ctl_pack_str(pk, "certs");
        msgpack_pack_map(pk, n);
        for (int i = 0; i < GOSSIP_CERT_VERDICT_COUNT; i++)
                if (st->n[i])
                        node_ctl_pack_ku64(pk, gossip_cert_verdict_name(i),
                                           st->n[i]);
}

/* Robust merge marked this peer: more than half of its last verdicts
 * clipped or refused (gossip/robust.h). */
static int suspect_model(struct node_cluster *c, const uint8_t *key)
{
        struct gossip_robust_peer rp;

        return node_handoff_robust_peer(c->h, key, &rp) == 0 &&
               gossip_robust_peer_suspect(&rp);
}

/* {reason: count} of robust-merge outcomes (refusals and clips; the
 * accepted count too). */
static void pack_robust(msgpack_packer *pk, const char *k, const uint64_t *r)
{
        size_t n = 0;

        for (int i = 0; i < GOSSIP_ROBUST_REASONS; i++)
                n += r[i] != 0;
        node_ctl_pack_str(pk, k);
        msgpack_pack_map(pk, n);
        for (int i = 0; i < GOSSIP_ROBUST_REASONS; i++)
                if (r[i])
                        node_ctl_pack_ku64(pk, gossip_robust_reason_name(i),
                                           r[i]);
}

/* The link estimate toward addr (issue 12, gossip/link.h): 2 keys, or 4
 * with the sample counts; NaN while nothing was measured. */
static void pack_link(struct node_cluster *c, msgpack_packer *pk,
                      const struct gossip_addr *addr, int samples)
{
        struct gossip_link_estimate e = {0};
        int have = node_net_peer_link(c->net, addr, &e) == 0;

        node_ctl_pack_kdbl(pk, "goodput_Bps",
                           have && e.goodput_Bps > 0 ? e.goodput_Bps : NAN);
        node_ctl_pack_kdbl(pk, "link_rtt_ms",
                           have && e.rtt_us ? e.rtt_us / 1000.0 : NAN);
        if (samples) {
                node_ctl_pack_ku64(pk, "link_samples", e.samples);
                node_ctl_pack_ku64(pk, "link_peer_samples", e.peer_samples);
        }
}

/* "refused": nil, or what the member's refusal named ("" before its
 * list arrived). */
static void pack_refused(struct node_cluster *c, msgpack_packer *pk,
                         const struct gossip_member_info *m)
{
        const struct node_refusal *r = node_cluster__refusal(c, m->key);

        node_ctl_pack_str(pk, "refused");
        if (!m->refused) {
                msgpack_pack_nil(pk);
                return;
        }
        msgpack_pack_map(pk, 3);
        node_ctl_pack_kstr(pk, "setting", r ? r->setting : "");
        node_ctl_pack_kstr(pk, "here", r ? r->here : "");
        node_ctl_pack_kstr(pk, "there", r ? r->there : "");
}

static void pack_member(struct node_cluster *c, msgpack_packer *pk,
                        const struct gossip_member_info *m, int self)
{
        char a[NODE_ADDR_STR_SIZE] = "", k[NODE_KEY_PK_B64_SIZE];
        uint64_t now = node_net_now_ms(c->net);

        node_addr_format(&m->addr, a, sizeof(a));
        node_key_pk_to_base64(m->key, k);
        msgpack_pack_map(pk, 15 + (m->cert_serial != 0));
        node_ctl_pack_kstr(pk, "name", m->name);
        node_ctl_pack_kstr(pk, "version", m->version); /* "": not told */
        node_ctl_pack_kstr(pk, "addr", a);
        node_ctl_pack_kstr(pk, "key", k);
        node_ctl_pack_kbool(pk, "self", self);
        /* refused for other settings: never in the view, whatever its
         * state (docs/control.md) */
        node_ctl_pack_kstr(
            pk, "state", m->refused ? "refused" : gossip_state_name(m->state));
        /* alive, not yet exchanging: no partner (protocol.md 3.2) */
        node_ctl_pack_kbool(pk, "loading", m->loading);
        node_ctl_pack_ku64(pk, "incarnation", m->incarnation);
        node_ctl_pack_kdbl(pk, "rtt_ms", m->rtt_ms ? (double)m->rtt_ms : NAN);
        node_ctl_pack_ku64(pk, "step", m->step);
        node_ctl_pack_str(pk, "last_heard_ms");
        if (self || !m->last_heard_ms || m->last_heard_ms > now)
                msgpack_pack_nil(pk);
        else
                msgpack_pack_uint64(pk, now - m->last_heard_ms);
        node_ctl_pack_str(pk, "suspect_model");
        suspect_model(c, m->key) ? msgpack_pack_true(pk)
                                 : msgpack_pack_false(pk);
        pack_refused(c, pk, m);
        pack_link(c, pk, &m->addr, 0);
        if (m->cert_serial)
                pack_cert(pk, m);
}

/* A refused member gossip does not list (refused at its first contact,
 * so never a member): *out from what its refusal kept; 0 if it is listed
 * in mi[0..n) already. */
static int refused_only(const struct node_refusal *r,
                        const struct gossip_member_info *mi, size_t n,
                        struct gossip_member_info *out)
{
        for (size_t i = 0; i < n; i++)
                if (!memcmp(mi[i].key, r->key, GOSSIP_KEY_BYTES))
                        return 0;
        memset(out, 0, sizeof(*out));
        memcpy(out->key, r->key, GOSSIP_KEY_BYTES);
        snprintf(out->name, sizeof(out->name), "%s", r->member);
        out->addr = r->addr;
        out->incarnation = r->incarnation;
        out->state = GOSSIP_DEAD;
        out->refused = 1;
        return 1;
}

static int ctl_members(struct node_cluster *c, msgpack_packer *pk)
{
        size_t n, extra = 0;
        struct gossip_member_info *mi = node_view_members(&c->view, &n), x;
        const struct node_refusal *r;

        if (!mi)
                return -ENOMEM;
        for (size_t i = 0; (r = node_cluster__refusal_at(c, i)); i++)
                extra += refused_only(r, mi, n, &x);
        msgpack_pack_array(pk, n + extra);
        for (size_t i = 0; i < n; i++)
                pack_member(c, pk, &mi[i], i == 0);
        for (size_t i = 0; (r = node_cluster__refusal_at(c, i)); i++)
                if (refused_only(r, mi, n, &x))
                        pack_member(c, pk, &x, 0);
        free(mi);
        return 0;
}

static void pack_peer_stats(struct node_cluster *c, msgpack_packer *pk,
                            const struct gossip_member_info *m)
{
        char a[NODE_ADDR_STR_SIZE] = "", k[NODE_KEY_PK_B64_SIZE];
        struct node_exchange_peer pgs,
            *pg = node_exchange_peer(c->ex, m->key, &pgs) == 0 ? &pgs : NULL;
        struct node_net_peer_stats ps[64];
        size_t nps = node_net_peer_stats(c->net, ps, 64);
        uint64_t queued = 0, dropped = 0, none[GOSSIP_ROBUST_REASONS] = {0};
        struct gossip_robust_peer rp;
        int have_rp = node_handoff_robust_peer(c->h, m->key, &rp) == 0;

        if (nps > 64)
                nps = 64;
        for (size_t i = 0; i < nps; i++)
                if (node_net_addr_equal(&ps[i].addr, &m->addr)) {
                        queued = ps[i].queued_bytes;
                        dropped = ps[i].frames_dropped;
                }
        node_addr_format(&m->addr, a, sizeof(a));
        node_key_pk_to_base64(m->key, k);
        msgpack_pack_map(pk, 22);
        node_ctl_pack_kstr(pk, "name", m->name);
        node_ctl_pack_kstr(pk, "addr", a);
        node_ctl_pack_kstr(pk, "key", k);
        node_ctl_pack_kstr(pk, "state", gossip_state_name(m->state));
        node_ctl_pack_ku64(pk, "bytes_in", m->bytes_in);
        node_ctl_pack_ku64(pk, "bytes_out", m->bytes_out);
        node_ctl_pack_ku64(pk, "msgs_in", m->msgs_in);
        node_ctl_pack_ku64(pk, "msgs_out", m->msgs_out);
        node_ctl_pack_ku64(pk, "grads_merged", pg ? pg->merged : 0);
        node_ctl_pack_ku64(pk, "grads_late", pg ? pg->late : 0);
        node_ctl_pack_ku64(pk, "grads_dropped", pg ? pg->dropped : 0);
        pack_rejects(pk, m->rejects);
        node_ctl_pack_ku64(pk, "queued_bytes", queued);
        node_ctl_pack_ku64(pk, "frames_dropped", dropped);
        pack_robust(pk, "robust", have_rp ? rp.count : none);
        node_ctl_pack_str(pk, "suspect_model");
        have_rp &&gossip_robust_peer_suspect(&rp) ? msgpack_pack_true(pk)
                                                  : msgpack_pack_false(pk);
        node_ctl_pack_str(pk, "sway");
        msgpack_pack_double(pk, have_rp ? (double)rp.sway : 0.0);
        node_ctl_pack_str(pk, "evidence");
        msgpack_pack_double(pk, have_rp ? (double)rp.evidence : NAN);
        pack_link(c, pk, &m->addr, 1);
}

/* The transport's counters: connections made and lost, and every refusal
 * by the same names as rejects_total{layer="transport"}. */
static void pack_net(msgpack_packer *pk, const struct node_net_stats *ns)
{
        size_t n = 0;
        uint64_t v;

        while (node_cluster__net_reject(n, ns, &v))
                n++;
        node_ctl_pack_str(pk, "net");
        msgpack_pack_map(pk, 4 + n);
        node_ctl_pack_ku64(pk, "frames_dropped", ns->frames_dropped);
        node_ctl_pack_ku64(pk, "connects", ns->connects);
        node_ctl_pack_ku64(pk, "connect_failures", ns->connect_failures);
        node_ctl_pack_ku64(pk, "stalls", ns->stalls);
        for (size_t i = 0; i < n; i++) {
                const char *name = node_cluster__net_reject(i, ns, &v);

                node_ctl_pack_ku64(pk, name, v);
        }
}

static int ctl_stats(struct node_cluster *c, struct node_trainer *t,
                     msgpack_packer *pk)
{
        struct gossip_stats gs;
        struct node_net_stats ns;
        struct gossip_merge_stats ms;
        struct node_handoff_stats hs;
        struct node_train_stats ts;
        const struct node_exchange_stats *xs = node_exchange_stats(c->ex);
        char k[NODE_KEY_PK_B64_SIZE], say[64];
        size_t n, alive = 0, suspect = 0;
        struct gossip_member_info *mi = node_view_members(&c->view, &n);

        if (!mi)
                return -ENOMEM;
        gossip_stats_get(c->g, &gs);
        node_net_stats(c->net, &ns);
        node_handoff_stats(c->h, &hs);
        ms = hs.merge;
        node_trainer_stats(t, &ts);
        for (size_t i = 0; i < n; i++) {
                alive += mi[i].state == GOSSIP_ALIVE;
                suspect += mi[i].state == GOSSIP_SUSPECT;
        }
        node_key_pk_to_base64(c->pk, k);
        msgpack_pack_map(pk, 2 + (node_handoff_shuffle(c->h) != NULL));
        if (node_handoff_shuffle(c->h)) /* --shuffle-samples */
                node_shuffle_pack_stats(node_handoff_shuffle(c->h), pk);
        node_ctl_pack_str(pk, "node");
        msgpack_pack_map(pk, 29);
        node_ctl_pack_kstr(pk, "name", c->name);
        node_ctl_pack_kstr(
            pk, "sending",
            gossip_adapt_say(
                &(struct gossip_adapt_choice){xs->adapt.codec, xs->k_force},
                say, sizeof(say)));
        node_ctl_pack_ku64(pk, "avg_every", hs.avg_every);
        /* the exchange's share of our CPU (NaN: not measured yet) and
         * the period it needs with --adapt cpu (0: not asked) */
        node_ctl_pack_kdbl(pk, "exchange_cpu_pct",
                           xs->cpu_pct >= 0 ? xs->cpu_pct : NAN);
        node_ctl_pack_ku64(pk, "cpu_needs_every", xs->k_cpu);
        node_ctl_pack_kstr(pk, "key", k);
        node_ctl_pack_kdbl(pk, "uptime_s",
                           (double)(node_cluster__unix_ms() - c->start_ms) /
                               1000.0);
        node_ctl_pack_ku64(pk, "step", ts.step);
        node_ctl_pack_ku64(pk, "epoch", ts.epoch);
        node_ctl_pack_kdbl(pk, "loss", ts.loss);
        node_ctl_pack_kdbl(pk, "accuracy", ts.acc / 100.0);
        node_ctl_pack_kdbl(pk, "samples_per_s", ts.sps);
        node_ctl_pack_ku64(pk, "members_alive", alive);
        node_ctl_pack_ku64(pk, "members_suspect", suspect);
        node_ctl_pack_ku64(pk, "bytes_in", gs.bytes_in);
        node_ctl_pack_ku64(pk, "bytes_out", gs.bytes_out);
        node_ctl_pack_ku64(pk, "msgs_in", gs.msgs_in);
        node_ctl_pack_ku64(pk, "msgs_out", gs.msgs_out);
        node_ctl_pack_ku64(pk, "addrs_refused", gs.addrs_refused);
        node_ctl_pack_ku64(pk, "samples_refused", xs->samples_refused);
        node_ctl_pack_ku64(pk, "grads_merged", ms.merged - ms.late);
        node_ctl_pack_ku64(pk, "grads_late", ms.late);
        node_ctl_pack_ku64(pk, "grads_dropped",
                           ms.offers - ms.accepted + (ms.accepted - ms.merged));
        pack_rejects(pk, gs.rejects);
        pack_cert_verdicts(pk, &gs.certs);
        pack_crl(c, pk, 0);
        pack_crl_verdicts(pk, &gs.crls);
        pack_robust(pk, "robust", hs.robust);
        pack_net(pk, &ns);
        node_ctl_pack_str(pk, "peers");
        msgpack_pack_array(pk, n ? n - 1 : 0);
        for (size_t i = 1; i < n; i++)
                pack_peer_stats(c, pk, &mi[i]);
        free(mi);
        return 0;
}

/* One row of `certs`. */
static void pack_cert_row(msgpack_packer *pk, const uint8_t *key,
                          const char *name, uint64_t serial, uint64_t not_after,
                          int status, int member, uint64_t refused)
{
        char k[NODE_KEY_PK_B64_SIZE];

        node_key_pk_to_base64(key, k);
        msgpack_pack_map(pk, 7);
        node_ctl_pack_kstr(pk, "name", name);
        node_ctl_pack_kstr(pk, "key", k);
        pack_kserial(pk, "serial", serial);
        node_ctl_pack_ku64(pk, "not_after", not_after);
        node_ctl_pack_kstr(pk, "status", gossip_cert_verdict_name(status));
        node_ctl_pack_kbool(pk, "member", member);
        node_ctl_pack_ku64(pk, "refused", refused);
}

/* certs: every certificate held (ourselves first, then members) and
 * every key dropped on its certificate's word, and the list held. */
static int ctl_certs(struct node_cluster *c, msgpack_packer *pk)
{
        size_t n, nb = gossip_barred(c->g, NULL, 0), rows = 0;
        struct gossip_member_info *mi = node_view_members(&c->view, &n);
        struct gossip_barred_info *b = calloc(nb ? nb : 1, sizeof(*b));

        if (!mi || !b) {
                free(mi);
                free(b);
                return -ENOMEM;
        }
        nb = gossip_barred(c->g, b, nb);
        for (size_t i = 0; i < n; i++)
                rows += mi[i].cert_serial != 0;
        msgpack_pack_map(pk, 2);
        pack_crl(c, pk, 1);
        node_ctl_pack_str(pk, "certs");
        msgpack_pack_array(pk, rows + nb);
        for (size_t i = 0; i < n; i++)
                if (mi[i].cert_serial)
                        pack_cert_row(pk, mi[i].key, mi[i].name,
                                      mi[i].cert_serial, mi[i].cert_not_after,
                                      mi[i].cert_status, 1, 0);
        for (size_t i = 0; i < nb; i++)
                pack_cert_row(pk, b[i].key, b[i].name, b[i].serial,
                              b[i].not_after, b[i].verdict, 0, b[i].rejects);
        free(mi);
        free(b);
        return 0;
}

/* The string value of key in map args, or NULL. */
static const char *arg_str(const msgpack_object *args, const char *key,
                           char *buf, size_t len)
{
        if (!args || args->type != MSGPACK_OBJECT_MAP)
                return NULL;
        for (uint32_t i = 0; i < args->via.map.size; i++) {
                const msgpack_object_kv *kv = &args->via.map.ptr[i];
                if (kv->key.type != MSGPACK_OBJECT_STR ||
                    kv->key.via.str.size != strlen(key) ||
                    memcmp(kv->key.via.str.ptr, key, strlen(key)) != 0)
                        continue;
                if (kv->val.type != MSGPACK_OBJECT_STR ||
                    kv->val.via.str.size >= len)
                        return NULL;
                memcpy(buf, kv->val.via.str.ptr, kv->val.via.str.size);
                buf[kv->val.via.str.size] = '\0';
                return buf;
        }
        return NULL;
}

static int ctl_join(struct node_cluster *c, const msgpack_object *args,
                    msgpack_packer *pk, char *err, size_t errlen)
{
        char buf[256];
        const char *s = arg_str(args, "addr", buf, sizeof(buf));
        struct gossip_addr a;
        int rc;

        if (!s || node_addr_parse(s, &a, 1) != 0) {
                snprintf(err, errlen, "bad address: %s", s ? s : "(none)");
                return -EINVAL;
        }
        rc = gossip_join(c->g, &a);
        node_cluster__arm(c);
        msgpack_pack_map(pk, 2);
        node_ctl_pack_str(pk, "joined");
        rc == 0 ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        node_ctl_pack_ku64(pk, "alive", gossip_alive_count(c->g));
        return 0;
}

/* force-leave {"name": N} or {"key": base64}: declare a gone member left
 * on this node's behalf (docs/control.md). */
static int ctl_force_leave(struct node_cluster *c, const msgpack_object *args,
                           msgpack_packer *pk, char *err, size_t errlen)
{
        char nbuf[GOSSIP_NAME_MAX + 1], kbuf[NODE_KEY_PK_B64_SIZE];
        const char *name = arg_str(args, "name", nbuf, sizeof(nbuf));
        const char *key = arg_str(args, "key", kbuf, sizeof(kbuf));
        struct gossip_member_info *mi, found;
        uint8_t pk_bin[GOSSIP_KEY_BYTES];
        size_t n = 0;
        int hit = 0;

        if (key && node_key_pk_from_base64(key, strlen(key), pk_bin) != 0) {
                snprintf(err, errlen, "bad key: %s", key);
                return -EINVAL;
        }
        if (!name && !key) {
                snprintf(err, errlen, "force-leave needs a name or a key");
                return -EINVAL;
        }
        mi = node_view_members(&c->view, &n);
        for (size_t i = 0; mi && i < n && !hit; i++) {
                if (key ? memcmp(mi[i].key, pk_bin, GOSSIP_KEY_BYTES) == 0
                        : strcmp(mi[i].name, name) == 0) {
                        found = mi[i];
                        hit = 1;
                }
        }
        free(mi);
        if (!hit) {
                snprintf(err, errlen, "no such member: %s", key ? key : name);
                return -ENOENT;
        }
        if (memcmp(found.key, c->pk, GOSSIP_KEY_BYTES) == 0) {
                snprintf(err, errlen, "cannot force-leave self");
                return -EINVAL;
        }
        if (gossip_force_leave(c->g, found.key) != 0 &&
            found.state != GOSSIP_LEFT) {
                snprintf(err, errlen, "force-leave %s failed", found.name);
                return -EINVAL;
        }
        node_cluster__arm(c);
        msgpack_pack_map(pk, 2);
        node_ctl_pack_kstr(pk, "name", found.name);
        node_ctl_pack_kstr(pk, "state", "left");
        return 0;
}

int node_cluster_ctl(struct node_cluster *c, struct node_trainer *t,
                     const char *cmd, const msgpack_object *args,
                     msgpack_packer *pk, char *err, size_t errlen)
{
        if (strcmp(cmd, "members") == 0)
                return ctl_members(c, pk);
        if (strcmp(cmd, "stats") == 0)
                return ctl_stats(c, t, pk);
        if (strcmp(cmd, "certs") == 0)
                return ctl_certs(c, pk);
        if (strcmp(cmd, "join") == 0)
                return ctl_join(c, args, pk, err, errlen);
        if (strcmp(cmd, "force-leave") == 0)
                return ctl_force_leave(c, args, pk, err, errlen);
        snprintf(err, errlen, "unknown command: %s", cmd);
        return -ENOTSUP;
}
