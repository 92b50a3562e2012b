/*
 * swim.h - membership and failure detection (SWIM + Lifeguard), internal.
 *
 * Not a public header: the daemon uses gossip.h. This file defines the node
 * state shared by gossip.c (the facade: wire I/O, trust, the application
 * channel, statistics) and swim.c (the protocol: probes, suspicion,
 * dissemination, anti-entropy).
 *
 * The protocol, per node:
 *  - every probe period, PING the next member of a shuffled round-robin
 *    list; no ACK within the probe timeout: PING_REQ through k others, who
 *    ping the target for us and answer ACK, or NACK when they hear nothing
 *    (Lifeguard: a missing NACK means *we* are slow, not the target), and
 *    at the same time one PING on the stream channel (memberlist's TCP
 *    fallback: datagram loss alone does not make a member suspect);
 *  - no ACK by the end of the period: the target becomes SUSPECT; after the
 *    suspicion timeout (Lifeguard: starts at max, shrinks towards min as
 *    independent confirmations arrive) it is DEAD;
 *  - a member that hears itself suspected or dead refutes with a higher
 *    incarnation; every message to a suspect/dead member carries its own
 *    entry first, so it learns quickly ("buddy system");
 *  - updates are piggybacked on every datagram, each retransmitted about
 *    retransmit_mult * log10(n+1) times, fewest-sent first, and pushed to
 *    gossip_fanout random members every gossip interval while any are due;
 *  - every sync period a full push-pull SYNC over the stream channel with a
 *    random member (alternately a live one and a dead/suspect one, which is
 *    how partitions heal); a remote "dead" merges as "suspect" there, so a
 *    stale view can only start a suspicion, which its subject refutes;
 *  - JOIN carries our state to one known peer, which answers with SYNC;
 *    the joiner pulls again every 2 periods while pulls still teach it new
 *    members, and re-sends JOIN each sync round while it knows nobody.
 *
 * Local health (Lifeguard "awareness", 0 = healthy .. awareness_max-1)
 * scales the probe period and timeout: +1 per failed probe or missing NACK
 * and per refutation, -1 per successful probe.
 *
 * Invariants: members are the trusted keys (struct swim_member exists for
 * each; state SWIM_UNKNOWN until first heard of); a member's incarnation
 * never decreases; n_live counts members (ourselves included) that are
 * alive or suspect; n_known those not SWIM_UNKNOWN (ourselves included).
 */
#ifndef GOSSIP_SWIM_H
#define GOSSIP_SWIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip.h"
#include "gossip/wire.h"

/* Fixed sizes. The reasons for the protocol tunables' defaults live with
 * gossip_tunables_default() in swim.c. */
enum {
        SWIM_UNKNOWN = -1,     /* trusted, not heard of yet */
        SWIM_MAX_CONFIRM = 8,  /* distinct suspicion confirmations kept */
        SWIM_MAX_INDIRECT = 8, /* ceiling on indirect_checks */
        SWIM_RELAYS = 32,      /* PING_REQs we relay at once */
        /* A datagram cannot carry more updates than this: each encoded
         * update is well over 8 bytes. */
        SWIM_DGRAM_UPDATES = GOSSIP_WIRE_DGRAM_MAX / 8,
        /* Smallest bytes per update on the wire, to size stream decodes. */
        SWIM_MIN_UPDATE_BYTES = 8,
        /* Held certificates are judged again at most this often (ms):
         * validity is in whole seconds and judged with 300 s of skew, so
         * a second late is nothing, and a judgement is a compare and a
         * binary search per member trusted by certificate. */
        SWIM_JUDGE_MS = 1000,
        /* Barred keys remembered (so that their frames count as
         * `revoked`): as many as a list can revoke; past it a dropped key
         * is still dropped, its frames then count as `unknown_key`. */
        SWIM_BARRED_MAX = GOSSIP_CRL_MAX_SERIALS,
};

struct swim_member {
        uint64_t key_id;
        uint8_t key[GOSSIP_KEY_BYTES];
        char name[GOSSIP_NAME_MAX];
        char version[GOSSIP_VERSION_MAX]; /* from its ALIVE updates */
        /* loading (a member, not yet exchanging: no partner), from its
         * ALIVE updates; it tells the end with a newer incarnation */
        bool loading;
        struct gossip_addr addr;
        int state; /* enum gossip_member_state or SWIM_UNKNOWN */
        uint64_t inc;
        uint64_t state_ms; /* when it entered its state */
        /* suspicion (state SUSPECT) */
        uint64_t suspect_start_ms, suspect_deadline_ms;
        uint32_t n_confirm;
        uint64_t confirmers[SWIM_MAX_CONFIRM]; /* [0]: who raised it */
        uint64_t origin; /* the origin our suspect entry carries */
        /* dissemination of this member's entry */
        uint32_t tx_left;
        bool in_bq, in_suspects;
        uint64_t told_ms; /* last "you are suspect/dead" sent to it */
        /* statistics */
        uint32_t rtt_ms;
        uint64_t step, last_heard_ms;
        uint64_t msgs_in, msgs_out, bytes_in, bytes_out;
        uint64_t rejects[GOSSIP_REJECT_SLOTS];
        uint64_t state_req_seq;  /* seq of its last STATE_REQ: our STATE's
                                    req_seq (docs/protocol.md) */
        struct gossip_stop stop; /* its LEAVE's reason (0: none heard) */
        /* the digest of its cluster settings, from its alive updates (0:
         * not told); refused: it differs from ours, so it is kept out of
         * the live states until a newer life tells a matching one */
        uint64_t settings;
        bool refused;
        /* its certificate, once one verified (cert_len 0: none held):
         * told in our SYNCs (key 21) so that others learn to trust it */
        uint8_t cert[GOSSIP_CERT_MAX_BYTES];
        uint16_t cert_len;
        uint64_t cert_serial, cert_not_before, cert_not_after;
        /* trusted on that certificate, not by the peers file: judged
         * again as the list held and the clock move on (trust.c) */
        bool by_cert;
        /* trusted through another member's SYNC: it may not know us
         * yet, so we send it our SYNC (our certificate) once its address
         * is known */
        bool greet;
};

/* A key dropped on its certificate's word (gossip_barred_info). */
struct swim_barred {
        uint64_t key_id;
        uint8_t key[GOSSIP_KEY_BYTES];
        char name[GOSSIP_NAME_MAX];
        uint64_t serial, not_after;
        int verdict; /* GOSSIP_CERT_REVOKED or GOSSIP_CERT_EXPIRED */
        uint64_t rejects, since_ms;
};

struct swim_probe {
        struct swim_member *m;   /* NULL: no probe in flight */
        uint64_t seq;            /* our PING's seq */
        uint64_t req_lo, req_hi; /* our PING_REQs' seqs */
        uint64_t stream_seq;     /* our fallback PING on the stream, or 0 */
        uint64_t sent_ms, timeout_at, end_at;
        uint32_t expected_nacks, nacks;
        bool indirect, acked;
};

struct swim_relay {
        bool used, nacked;
        uint64_t our_seq;   /* seq of our PING to the target */
        uint64_t req_seq;   /* seq of the requester's PING_REQ */
        uint64_t requester; /* key id */
        uint64_t target;    /* key id */
        uint64_t nack_at, expire_at;
};

struct gossip {
        struct gossip_env env;
        struct gossip_tunables tun;
        uint8_t sk[GOSSIP_SECRET_BYTES];
        struct swim_member self;
        uint64_t seq, step;
        uint64_t rng;
        void (*on_app)(void *, const struct gossip_member_info *,
                       const struct gossip_app *);
        void (*on_member)(void *, const struct gossip_member_info *, int);
        void (*on_refused)(void *, const struct gossip_member_info *,
                           const char *, const char *, const char *);
        void (*on_crl)(void *, const void *, size_t, uint64_t);
        void *cb_ctx;
        void *app_ctx; /* on_app's ctx */
        /* ours (n 0, digest 0: none, nobody is refused) */
        struct gossip_settings settings;
        struct gossip_settings rx_settings; /* a JOIN's or SYNC's, decoded */

        /* the cluster authority (has_authority), our certificate, and
         * the revocation list held (crl a view into crl_buf) */
        bool has_authority, has_crl;
        uint8_t authority[GOSSIP_KEY_BYTES];
        uint64_t authority_id;
        uint8_t own_cert[GOSSIP_CERT_MAX_BYTES];
        size_t own_cert_len;
        uint8_t *crl_buf;
        struct gossip_crl crl;
        /* keys dropped on their certificate's word, oldest first, and
         * their keys in a keyring of their own: their frames still
         * authenticate (signature or MAC), so a refusal can say
         * `revoked` and be charged to them (trust.c) */
        struct swim_barred *barred;
        size_t n_barred, cap_barred;
        struct gossip_keyring *barred_kr;
        uint64_t next_judge_at; /* held certificates judged again */

        struct gossip_keyring *kr;
        struct gossip_replay *rp;
        struct gossip_wire_stats wst;

        /* members, sorted by key_id */
        struct swim_member **tab;
        size_t n_tab, cap_tab;
        size_t n_live;  /* alive + suspect, ourselves included */
        size_t n_known; /* heard of (any state), ourselves included */

        /* round-robin probe order */
        struct swim_member **plist;
        size_t n_plist, i_plist;
        struct swim_probe probe;
        uint64_t next_probe_at;
        uint32_t awareness;

        struct swim_relay relays[SWIM_RELAYS];

        struct swim_member **suspects;
        size_t n_suspects;

        struct swim_member **bq; /* entries with tx_left > 0 */
        size_t n_bq;
        uint64_t next_gossip_at;

        uint64_t next_sync_at;
        uint64_t n_syncs;
        struct gossip_addr join_addr;
        bool have_join_addr;
        bool joining;       /* pulling full views until one teaches nothing */
        uint64_t n_learned; /* members that went from unknown to known */

        struct gossip_update dgram_upd[SWIM_DGRAM_UPDATES];
        uint8_t dgram_buf[GOSSIP_WIRE_DGRAM_MAX];
        struct gossip_stats st;
};

/* swim.c: membership. */
uint64_t gossip__now(const struct gossip *g);
uint64_t gossip__rand(struct gossip *g);
struct swim_member *gossip__member_find(const struct gossip *g,
                                        uint64_t key_id);
/* Insert a trusted key (state SWIM_UNKNOWN). 0 or GOSSIP_ENOMEM. */
int gossip__member_add(struct gossip *g, const struct gossip_peer *p,
                       uint64_t key_id);
/* Drop a member from the table (and every list). */
void gossip__member_remove(struct gossip *g, struct swim_member *m);
void gossip__member_info(const struct gossip *g, const struct swim_member *m,
                         struct gossip_member_info *out);
/* Handle one verified message's membership part (updates, probes, syncs,
 * joins). 0, or GOSSIP_ESETTINGS: the sender runs other cluster settings
 * and nothing of the frame was taken (settings.h). */
int gossip__swim_on_msg(struct gossip *g, struct swim_member *from,
                        const struct gossip_addr *from_addr,
                        const struct gossip_msg *m);
void gossip__swim_tick(struct gossip *g);
/* Fill upd[0..cap) with what a datagram to `to` (may be NULL) should carry:
 * to's own entry if we think it suspect or dead, then queued updates,
 * fewest-sent first. who[i] is the member behind upd[i]. Returns count. */
size_t gossip__swim_piggyback(struct gossip *g, struct swim_member *to,
                              struct gossip_update *upd,
                              struct swim_member **who, size_t cap);
/* The first n_sent of who[] went out: count one transmission each. */
void gossip__swim_piggyback_done(struct gossip *g, struct swim_member **who,
                                 size_t n_sent);
/* m's entry as a SYNC or a piggyback lists it. */
void gossip__swim_entry(const struct swim_member *m, struct gossip_update *u);
/* Tell members we are loading, or exchanging now (gossip_set_loading). */
void gossip__swim_set_loading(struct gossip *g, bool loading);
/* Fill upd (room for n_tab + 1) with our whole view, ourselves first. */
size_t gossip__swim_full_view(const struct gossip *g,
                              struct gossip_update *upd);
uint64_t gossip__swim_deadline(const struct gossip *g);
int gossip__swim_join(struct gossip *g, const struct gossip_addr *addr);
int gossip__swim_leave(struct gossip *g, const struct gossip_stop *why);
int gossip__swim_force_leave(struct gossip *g, struct swim_member *m);

/* gossip.c: the transport side. Fills header fields, encodes, signs, sends
 * and counts. For piggyback kinds, `to` (may be NULL) gets its own entry
 * first when we think it suspect or dead, then queued updates; for SYNC and
 * JOIN, the full view, our certificate and the list held. */
int gossip__send(struct gossip *g, struct swim_member *to,
                 const struct gossip_addr *addr, struct gossip_msg *m);
/* A SYNC (reply 0, stream) to m with our own entry only, our certificate
 * and the list held: how a new list spreads (protocol.md 12.7). */
int gossip__send_crl(struct gossip *g, struct swim_member *m);
/* gossip_trust_add() saying how the key is trusted: by_cert, on a
 * certificate that verified (a key already trusted stays as it was);
 * else by the peers file (which wins: never judged again). Either way the
 * key is no longer barred. */
int gossip__trust_add(struct gossip *g, const struct gossip_peer *p,
                      bool by_cert);

/* trust.c: trust by certificate, the revocation list held, barred keys. */
/* Is buf a JOIN or SYNC whose certificate (key 20) verifies and whose
 * frame that certificate's key signed? 0 and *c, *cp, *cn; else the code
 * the frame is refused with; *verdict the certificate's (-1: none). */
int gossip__cert_admissible(const struct gossip *g, const void *buf, size_t len,
                            int channel, struct gossip_cert *c,
                            const uint8_t **cp, size_t *cn, int *verdict);
/* A JOIN or SYNC from a key we do not trust: trusted when admissible; the
 * certificate's verdict is counted either way. */
void gossip__admit_by_cert(struct gossip *g, const void *buf, size_t len,
                           int channel);
/* The certificates a trusted sender's JOIN or SYNC carries (keys 20, 21). */
void gossip__learn_certs(struct gossip *g, struct swim_member *sender,
                         const struct gossip_msg *m);
/* Send our SYNC to the members trusted through another's SYNC. */
void gossip__greet_learned(struct gossip *g);
/* A list offered by `from` (NULL: the operator): merged, counted, and
 * when newer taken (on_crl), applied (members it revokes barred) and sent
 * to every live member but `from`. The merge verdict, or GOSSIP_ENOMEM
 * (nothing changed). */
int gossip__crl_offer(struct gossip *g, const void *buf, size_t len,
                      const struct swim_member *from);
/* Judge again the certificate of every member trusted by one; bar those
 * revoked or expired. */
void gossip__judge_members(struct gossip *g);
/* What m's held certificate is worth now (GOSSIP_CERT_OK when none). */
int gossip__cert_status(const struct gossip *g, const struct swim_member *m);
/* A frame the keyring refused as unknown: when a barred key made it for
 * this channel, its code (GOSSIP_EREVOKED, or GOSSIP_EUNKNOWNKEY for an
 * expired certificate) and *b; else GOSSIP_EUNKNOWNKEY, *b NULL. */
int gossip__barred_code(const struct gossip *g, const void *buf, size_t len,
                        int channel, struct swim_barred **b);
/* The barred key with this id, or NULL. */
struct swim_barred *gossip__barred_find(const struct gossip *g,
                                        uint64_t key_id);
/* key_id is trusted again: forget it was barred. */
void gossip__unbar(struct gossip *g, uint64_t key_id);

#endif
