/*
 * gossip.h - the protocol core's one public face, as the daemon sees it.
 *
 * A struct gossip is one node: its identity (Ed25519 key pair), the trusted
 * set (keys allowed to speak, from the peers file), the membership view
 * (SWIM with Lifeguard's refinements, see swim.h) and an application channel
 * that carries signed training messages (gradients, model state) to members.
 *
 * It is a pure state machine. Bytes come in through gossip_on_message(),
 * time is advanced by calling gossip_tick() no later than
 * gossip_next_deadline(), and everything it wants to say leaves through
 * env->send. It never blocks, sleeps, prints, or reads a clock of its own;
 * all randomness comes from env->seed.
 *
 * Invariants:
 *  - a member is its public key; addresses are where it was last seen;
 *  - only keys in the trusted set are ever members or accepted senders;
 *    with an authority configured, a key whose certificate verifies under
 *    it (in its own JOIN or SYNC, or in a trusted member's SYNC) joins
 *    the trusted set, and leaves it again (barred: its frames refused)
 *    once the revocation list held names its serial or, by env->unix_now
 *    or the list's date, the certificate has expired; a key of the peers
 *    file is never judged by its certificate;
 *  - the node holds at most one revocation list, never an older one; a
 *    newer one, from a member's JOIN or SYNC (wire key 22) or from
 *    gossip_set_crl(), is sent at once to every live member;
 *  - callbacks (on_app, on_member, on_refused, on_crl) run synchronously from
 * inside gossip_on_message() / gossip_tick() / gossip_join() / gossip_leave();
 *    they may call gossip_send_app(), gossip_members(), gossip_view() and
 *    gossip_set_step(), but must not destroy the struct gossip.
 *
 * Not thread-safe: one thread (the libuv loop) owns a struct gossip.
 */
#ifndef GOSSIP_H
#define GOSSIP_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/cert.h"
#include "gossip/gossip_types.h"
#include "gossip/settings.h"
#include "gossip/stop.h"

#define GOSSIP_NAME_MAX    32 /* bytes including the NUL; longer names are cut */
#define GOSSIP_VERSION_MAX 16 /* software version, NUL included; cut */
/* Reject counters are indexed by -GOSSIP_E* code (slot 0 unused). */
#define GOSSIP_REJECT_SLOTS 18
/* Per-kind counters are indexed by wire message kind (wire.h; 0 unused). */
#define GOSSIP_KIND_SLOTS 16

/* A member's state, as this node believes it. */
enum gossip_member_state {
        GOSSIP_ALIVE = 0,
        GOSSIP_SUSPECT = 1,
        GOSSIP_DEAD = 2,
        GOSSIP_LEFT = 3, /* said goodbye (graceful leave), not failed */
};

/* What an application message carries (the training layer's vocabulary). */
enum gossip_app_kind {
        GOSSIP_APP_GRADIENT = 1,  /* a gradient (or one partition of it) */
        GOSSIP_APP_STATE_REQ = 2, /* "send me your model" (new node) */
        GOSSIP_APP_STATE = 3,     /* full model + optimizer state answer */
        GOSSIP_APP_PARAMS = 4,    /* parameters for periodic averaging */
        /* training samples for the partner's reservoir (--shuffle-samples;
         * raw data: docs/protocol.md 3.8) */
        GOSSIP_APP_SAMPLES = 5,
};

/* One verified application message, as on_app receives it. */
struct gossip_app {
        int kind;      /* enum gossip_app_kind */
        uint64_t step; /* the step it belongs to */
        /* PARAMS: the averaging period K the sender's round of this slice
         * was made under (docs/protocol.md 3.1, key 15); 0 = not told (an
         * older sender) and for every other kind */
        uint32_t period;
        /* PARAMS: the period the sender's own link needs (key 16); 0 =
         * not told, and for every other kind */
        uint32_t need;
        /* PARAMS: the rate (bytes/s) at which the sender received our
         * stream frames and the microseconds that covers (keys 17-18,
         * gossip/link.h); 0 = not told, and for every other kind */
        uint32_t rx_rate, rx_span;
        const void *payload; /* borrowed for the duration of the call */
        size_t len;
        /* the caller's context for the frame this came in, as given to
         * gossip_on_frame() (NULL from gossip_on_message()): how the
         * transport received it, passed through untouched (the
         * application may write its answer there) */
        void *frame;
};

/* One line of the peers file: who may speak, and where to find them. */
struct gossip_peer {
        uint8_t key[GOSSIP_KEY_BYTES];
        struct gossip_addr addr;
        char name[GOSSIP_NAME_MAX];
};

/*
 * Protocol tunables. gossip_tunables_default() fills memberlist's LAN
 * defaults; see swim.h for the reason behind each one. Any field left 0 in
 * a config takes its default.
 */
struct gossip_tunables {
        uint32_t probe_period_ms;  /* one probe per member per period */
        uint32_t probe_timeout_ms; /* wait for a direct ACK, then go indirect */
        uint32_t indirect_checks;  /* k members asked to PING_REQ */
        uint32_t suspicion_mult;   /* suspicion min = mult*log10(n)*period */
        uint32_t suspicion_max_mult; /* suspicion max = this * min */
        uint32_t retransmit_mult; /* piggyback an update mult*log(n+1) times */
        uint32_t sync_period_ms;  /* push-pull anti-entropy interval */
        uint32_t awareness_max;   /* Lifeguard local-health ceiling */
        uint32_t gossip_interval_ms; /* push queued updates this often */
        uint32_t gossip_fanout;      /* ... to this many random members */
};

struct gossip_member_info;

struct gossip_config {
        uint8_t public_key[GOSSIP_KEY_BYTES];
        uint8_t secret_key[GOSSIP_SECRET_BYTES]; /* copied, wiped on destroy */
        struct gossip_addr addr;                 /* where others reach us */
        const char *name;                        /* may be NULL */
        const char *version; /* our software version, told to members in
                                our ALIVE updates; may be NULL */
        /* Start as a loading member (gossip_set_loading): alive, told
         * to members, but no partner until it says it exchanges. */
        int loading;
        /* Boot incarnation. Must grow across restarts of the same key
         * (the daemon uses wall-clock seconds at start) so that others
         * accept the new life over the old one's "dead". */
        uint64_t incarnation;
        const struct gossip_peer *peers; /* trusted set; copied */
        size_t n_peers;
        struct gossip_tunables tun; /* zero fields take defaults */
        /* A verified application message arrived from member `from`. The
         * payload is only borrowed for the duration of the call. */
        void (*on_app)(void *ctx, const struct gossip_member_info *from,
                       const struct gossip_app *msg);
        /* Member m changed state (m->state is the new one). old_state is -1
         * when the member was not known before. */
        void (*on_member)(void *ctx, const struct gossip_member_info *m,
                          int old_state);
        /* The cluster-wide settings this node trains with (settings.h);
         * copied. NULL: none told, nobody refused (older callers, the
         * simulations). */
        const struct gossip_settings *settings;
        /* Member m runs other cluster settings than ours: refused (never
         * in the view, its frames counted under `settings`). name is the
         * first setting that differs with each side's value, when m's
         * list has arrived (its JOIN or SYNC); NULL when only its digest
         * is known so far. Called on every such JOIN or SYNC. */
        void (*on_refused)(void *ctx, const struct gossip_member_info *m,
                           const char *name, const char *ours,
                           const char *theirs);
        /* The cluster authority's public key (gossip/cert.h), copied;
         * NULL: none, only the peers above are trusted. With it, a JOIN
         * or SYNC from a key we do not trust whose certificate (wire key
         * 20) verifies under the authority, judged by env->unix_now, and
         * whose frame that key signed, is admitted: the key is trusted
         * from then on. So is a key whose certificate a trusted member's
         * SYNC carries (key 21). Refusals are counted by verdict. */
        const uint8_t *authority_pk;
        /* Our own certificate, told in our JOINs and SYNCs (copied; at
         * most GOSSIP_CERT_MAX_BYTES); NULL: none. */
        const void *cert;
        size_t cert_len;
        /* The newest revocation list of the authority we hold (copied;
         * it must verify under authority_pk, else GOSSIP_EINVAL); NULL:
         * none. A newer one replaces it while running (protocol.md
         * 12.7). */
        const void *crl;
        size_t crl_len;
        /* A newer revocation list was taken (from a member, or
         * gossip_set_crl): bytes[0..len) is the whole signed list, seq
         * its sequence; borrowed for the call. For the node to keep it
         * on disk. May be NULL. */
        void (*on_crl)(void *ctx, const void *bytes, size_t len, uint64_t seq);
        void *cb_ctx;
        void *app_ctx; /* on_app's ctx when not NULL (else cb_ctx) */
};

/* What this node knows of one member (or of itself). */
struct gossip_member_info {
        uint8_t key[GOSSIP_KEY_BYTES];
        char name[GOSSIP_NAME_MAX];
        char version[GOSSIP_VERSION_MAX]; /* "" = not told (older peer) */
        /* alive but loading: not yet exchanging, so no partner (its
         * ALIVE updates say so; 0 too when not told: an older peer) */
        int loading;
        struct gossip_addr addr;
        int state; /* enum gossip_member_state */
        uint64_t incarnation;
        uint32_t rtt_ms; /* EWMA of probe round trips; 0 = never probed */
        uint64_t step;   /* last training step heard from it */
        uint64_t last_heard_ms; /* env->now_ms of its last verified message */
        uint64_t msgs_in, msgs_out, bytes_in, bytes_out;
        uint64_t rejects[GOSSIP_REJECT_SLOTS]; /* its frames we refused */
        /* state `left`: the reason its LEAVE gave (reason 0: none heard) */
        struct gossip_stop stop;
        /* its cluster settings differ from ours: refused (on_refused) */
        int refused;
        /* its certificate (gossip/cert.h), when one verified: serial (0:
         * none held), not_after (unix seconds) */
        uint64_t cert_serial, cert_not_after;
        /* what that certificate is worth now (enum gossip_cert_verdict:
         * ok, revoked, not_yet_valid or expired, by the list held and
         * env->unix_now); GOSSIP_CERT_OK when none is held */
        int cert_status;
        /* trusted on its certificate, not by the peers file: judged
         * again as the list and the clock move on */
        int by_cert;
};

/* A key dropped on its certificate's word (barred): its serial is in the
 * list held, or the certificate expired. Its frames are refused (as
 * `revoked`, or `unknown_key` when it expired) until a certificate that
 * verifies, or the peers file, trusts it again. */
struct gossip_barred_info {
        uint8_t key[GOSSIP_KEY_BYTES];
        char name[GOSSIP_NAME_MAX];
        uint64_t serial, not_after;
        int verdict;       /* GOSSIP_CERT_REVOKED or GOSSIP_CERT_EXPIRED */
        uint64_t rejects;  /* its frames refused since (authenticated) */
        uint64_t since_ms; /* env->now_ms when it was dropped */
};

/* Node-wide counters. */
struct gossip_stats {
        uint64_t msgs_in, msgs_out, bytes_in, bytes_out;
        uint64_t rejects[GOSSIP_REJECT_SLOTS]; /* index -GOSSIP_E* */
        uint64_t probes, probe_timeouts, indirect_probes, nacks;
        uint64_t suspects_raised, refutes, deaths_declared;
        /* probes that ended with no ACK at all (each raises or confirms a
         * suspicion of our own); stream-channel fallback PINGs sent */
        uint64_t probe_failures, stream_probes;
        uint64_t syncs_sent, syncs_received;
        /* SYNC requests whose view digest equalled ours: answered with
         * our digest, no view sent (protocol.md 3.9) */
        uint64_t syncs_same;
        /* member addresses told in updates that nobody can send to (a
         * wildcard such as 0.0.0.0, port 0): kept out of the member table */
        uint64_t addrs_refused;
        uint64_t app_in, app_out;
        uint64_t kind_in[GOSSIP_KIND_SLOTS];  /* accepted frames by kind */
        uint64_t kind_out[GOSSIP_KIND_SLOTS]; /* sent frames by kind */
        uint32_t local_health; /* Lifeguard awareness, 0 = healthy */
        uint64_t incarnation;  /* our own, current */
        /* certificates judged (a JOIN's or SYNC's sender, a SYNC's
         * members, and each member dropped when its certificate is
         * judged again), by verdict: "ok" counts each key trusted
         * through one */
        struct gossip_cert_stats certs;
        /* revocation lists offered (wire key 22, gossip_set_crl), by
         * merge verdict: "ok" counts each list taken */
        struct gossip_crl_stats crls;
        uint64_t crl_pushes; /* SYNCs sent to spread a list just taken */
};

struct gossip;

/* Fill t with the defaults (memberlist LAN profile). */
void gossip_tunables_default(struct gossip_tunables *t);

/* Create a node. On error *out is NULL and nothing is sent. cfg and env are
 * copied (env->ctx is kept as a pointer). */
int gossip_create(const struct gossip_config *cfg, const struct gossip_env *env,
                  struct gossip **out);

/* Free the node and wipe its secret key. Sends nothing (call gossip_leave
 * first for a graceful exit). NULL is allowed. */
void gossip_destroy(struct gossip *g);

/* Feed one received frame. Returns 0 when accepted, or the negative reason
 * it was rejected (also counted in the stats); rejection is normal life. */
int gossip_on_message(struct gossip *g, const struct gossip_addr *from,
                      const void *buf, size_t len, int channel);

/* gossip_on_message() that hands frame, untouched, to on_app in
 * gossip_app.frame: the caller's receive information reaches the
 * application message as an argument (the protocol never reads it). */
int gossip_on_frame(struct gossip *g, const struct gossip_addr *from,
                    const void *buf, size_t len, int channel, void *frame);

/* Is buf, received on channel, a frame signed (or MAC'd) by a trusted key
 * for that channel? 0 or the negative reason; changes nothing (no replay
 * window, no counters), so the frame is fed to gossip_on_message() after.
 * For a transport's first-frame check (node_net_config.verify). */
int gossip_frame_authenticate(const struct gossip *g, const void *buf,
                              size_t len, int channel);

/* The digest of our whole view as a full SYNC would list it (protocol.md
 * 3.9): equal digests, nothing for a SYNC to teach either side. 0 or
 * GOSSIP_ENOMEM. */
int gossip_view_digest(const struct gossip *g,
                       uint8_t out[GOSSIP_VIEW_DIGEST_BYTES]);

/* Do whatever is due at env->now_ms (probes, timeouts, sync). */
void gossip_tick(struct gossip *g);

/* The env->now_ms at or after which gossip_tick() must be called next. */
uint64_t gossip_next_deadline(const struct gossip *g);

/* Ask the node at addr to let us in (it answers with its full view). While
 * we know no other live member, the JOIN is re-sent to the last address
 * given every sync round; calling again with another address switches. */
int gossip_join(struct gossip *g, const struct gossip_addr *addr);

/* Can a peer send to a? No for a wildcard (0.0.0.0 or ::, what a node
 * bound to every interface might tell), port 0 or an unknown family:
 * such an address never replaces the one a member is known by. */
int gossip_addr_usable(const struct gossip_addr *a);

/* Announce a graceful leave (state `left`) to the cluster. The caller keeps
 * ticking for a dissemination round (see docs/reliability.md) and then
 * destroys the node. */
int gossip_leave(struct gossip *g);

/* gossip_leave() whose LEAVE frames carry why (NULL or reason 0: none),
 * the cluster-wide stop of gossip/stop.h. Only the direct LEAVE datagram
 * to each live member carries it, not the piggybacked `left` entry. */
int gossip_leave_with(struct gossip *g, const struct gossip_stop *why);

/* Declare another member `left` (an operator's force-leave, for a node
 * that is gone for good) and spread it. A member that is in fact alive
 * refutes it. GOSSIP_ENOPEER if the key is unknown or already left. */
int gossip_force_leave(struct gossip *g, const uint8_t key[GOSSIP_KEY_BYTES]);

/* Add (or update the address/name of) a trusted key. */
int gossip_trust_add(struct gossip *g, const struct gossip_peer *p);

/* Remove a trusted key: its frames are refused from now on and it is
 * dropped from the view (on_member reports it as `dead`). */
int gossip_trust_remove(struct gossip *g, const uint8_t key[GOSSIP_KEY_BYTES]);

/* The operator's revocation list (e.g. re-read on SIGHUP): judged by the
 * merge rule (gossip_crl_merge) against the one held and counted; when
 * newer (GOSSIP_CRL_OK) it is taken, every member it revokes is dropped,
 * on_crl is called and it is sent to every live member at once. Returns
 * the merge verdict (>= 0), or GOSSIP_EINVAL without an authority. */
int gossip_set_crl(struct gossip *g, const void *buf, size_t len);

/* The revocation list held: 0 and *out (a view into the node's copy,
 * valid until the next call into g), or GOSSIP_ENOPEER when none. */
int gossip_crl_get(const struct gossip *g, struct gossip_crl *out);

/* Copy up to cap barred keys (oldest first) into out; returns how many
 * there are. */
size_t gossip_barred(const struct gossip *g, struct gossip_barred_info *out,
                     size_t cap);

/* Set our own training step; it is carried in every message we send. */
void gossip_set_step(struct gossip *g, uint64_t step);

/* Say we are loading (a member, not yet exchanging: members take no
 * partner in us) or exchanging. A change raises our incarnation and is
 * spread like any news of ours (docs/protocol.md 3.2, element 8); the
 * start's value is gossip_config.loading. */
void gossip_set_loading(struct gossip *g, int loading);

/* Copy up to cap members (ourselves first) into out. Returns how many
 * there are in total (may exceed cap). */
size_t gossip_members(const struct gossip *g, struct gossip_member_info *out,
                      size_t cap);

/* Look one member (or ourselves) up by key. 0 or GOSSIP_ENOPEER. */
int gossip_member_get(const struct gossip *g,
                      const uint8_t key[GOSSIP_KEY_BYTES],
                      struct gossip_member_info *out);

/* Number of members (ourselves included) believed alive or suspect. */
size_t gossip_alive_count(const struct gossip *g);

/*
 * The view for the partner schedule: keys of ourselves and every member
 * that is alive or suspect, sorted by key (memcmp order), so nodes with the
 * same membership derive the same permutation. Suspects stay in the view so
 * that a transient suspicion does not reshuffle the schedule; the scheduler
 * skips a suspect partner (see gossip_member_get). Copies up to cap keys,
 * returns the total count.
 */
size_t gossip_view(const struct gossip *g, uint8_t (*keys)[GOSSIP_KEY_BYTES],
                   size_t cap);

/* Node-wide counters. */
void gossip_stats_get(const struct gossip *g, struct gossip_stats *out);

/* Sign payload as an application message of `kind` at `step` and send it on
 * the STREAM channel to the member with this key. GOSSIP_ENOPEER if the key
 * is unknown, dead or left; GOSSIP_ETOOBIG over the wire's bound. */
int gossip_send_app(struct gossip *g, const uint8_t key[GOSSIP_KEY_BYTES],
                    int kind, uint64_t step, const void *payload, size_t len);

/* What a PARAMS frame tells besides its slice (docs/protocol.md keys
 * 15-18); a field of 0 is not told. */
struct gossip_params_tell {
        uint32_t period;  /* the averaging period the slice was made under */
        uint32_t need;    /* the period our own link needs */
        uint32_t rx_rate; /* bytes/s we received the receiver's frames at */
        uint32_t rx_span; /* the microseconds rx_rate covers */
};

/* gossip_send_app() of a PARAMS slice that also tells the receiver what
 * *tell holds. */
int gossip_send_params(struct gossip *g, const uint8_t key[GOSSIP_KEY_BYTES],
                       uint64_t step, const struct gossip_params_tell *tell,
                       const void *payload, size_t len);

/* "alive", "suspect", "dead", "left" (or "?"). */
const char *gossip_state_name(int state);

#endif
