/*
 * wire.h - the wire format: signed, versioned, bounded frames.
 *
 * Every message on either channel is one frame:
 *
 *   prefix (44 bytes, fixed, big-endian) | body (msgpack map) | sig (64)
 *
 * except bulk frames (GRADIENT, STATE, PARAMS, SAMPLES) on the stream channel
 * to a peer we share a pairwise key with, which end in a 16-byte Poly1305 tag
 * instead of the signature (flag bit 2, MAC):
 *
 *   prefix (44) | body | tag (16)
 *
 * The prefix carries magic, version, kind, flags, the sender's key id,
 * incarnation, sequence number, training step and the body length. The
 * decoder checks the channel bound, exact length, version, kind, signer and
 * Ed25519 signature (or tag), and the replay window, all BEFORE msgpack
 * sees a byte; then it walks the body with its own bounds checker and only
 * then hands it to msgpack-c (whose unpacker trusts declared lengths).
 * docs/protocol.md describes every byte.
 *
 * Invariants:
 *  - a frame is accepted only at exactly prefix + body_len + 64 bytes
 *    (+ 16 instead of + 64 with the MAC flag);
 *  - only keys in the keyring are accepted; a key id (8 bytes of
 *    BLAKE2b-256(public key)) names exactly one key there: a colliding key
 *    is refused by gossip_keyring_add();
 *  - the signature covers prefix and body; for GRADIENT, STATE, PARAMS,
 *    SAMPLES and any body over GOSSIP_WIRE_DIGEST_OVER bytes it covers
 *    their BLAKE2b-256 digest instead (flag bit 0 says which, and must
 *    match that rule);
 *  - a MAC frame is STREAM, of a bulk kind (GRADIENT, STATE, PARAMS,
 *    SAMPLES), DIGEST clear; its tag is XChaCha20-Poly1305's over
 *    prefix and body (empty message) under the pairwise key K(sender,
 *    receiver) that both derive from their Ed25519 keys
 *    (gossip_keyring_set_self), with prefix bytes 8..31 (key id,
 *    incarnation, seq) as the nonce; only the two ends can
 *    make or check it;
 *  - the channel a frame was built for is signed (flag bit 1): a datagram
 *    cannot be replayed on the stream or the other way round, so receivers
 *    keep one replay window per (sender, channel);
 *  - a decoded message's pointers (payload, data) point INTO the input
 *    buffer: the buffer must outlive the decoded message.
 *
 * Not thread-safe: a keyring, a replay table and stats belong to one thread.
 */
#ifndef GOSSIP_WIRE_H
#define GOSSIP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip_types.h"
#include "gossip/settings.h"
#include "gossip/stop.h"
#include "gossip/keyring.h"

/* Tunables and fixed sizes (bytes unless named otherwise). */
enum {
        GOSSIP_WIRE_VERSION = 1,
        GOSSIP_WIRE_PREFIX_BYTES = 44,
        GOSSIP_WIRE_OVERHEAD = GOSSIP_WIRE_PREFIX_BYTES + GOSSIP_SIG_BYTES,
        /* A MAC frame's trailer: a Poly1305 tag. */
        GOSSIP_WIRE_TAG_BYTES = 16,
        /* The smallest frame of all: prefix + tag. */
        GOSSIP_WIRE_MAC_OVERHEAD =
            GOSSIP_WIRE_PREFIX_BYTES + GOSSIP_WIRE_TAG_BYTES,
        /* A pairwise MAC key (BLAKE2b-256 output). */
        GOSSIP_WIRE_MAC_KEY_BYTES = 32,
        /* Default datagram bound: fits a 1500-byte Ethernet MTU after IPv6
         * (40) and UDP (8) headers with room for tunnels. */
        GOSSIP_WIRE_DGRAM_MAX = 1400,
        /* Bodies above this are signed through a digest: signing is linear
         * in length (1.6 MB ~ 5.5 ms), hashing ~4x cheaper. */
        GOSSIP_WIRE_DIGEST_OVER = 1024,
        /* Most membership updates one message may carry (a cluster bigger
         * than this cannot SYNC in one frame). */
        GOSSIP_WIRE_MAX_UPDATES = 4096,
        /* Fewest bytes one encoded update can take (tiny key id, no
         * address, no name): bounds the updates a body of n bytes can
         * carry to n / 5. Real key ids are 64-bit random: ~13 bytes. */
        GOSSIP_WIRE_UPDATE_MIN_BYTES = 5,
        /* Name length limit including the NUL (same as gossip.h). */
        GOSSIP_WIRE_NAME_MAX = 32,
        /* Software version length limit including the NUL (gossip.h). */
        GOSSIP_WIRE_VERSION_MAX = 16,
        /* Replay window width per (sender, channel), in sequence numbers:
         * how far a datagram may be overtaken and still be accepted. */
        GOSSIP_WIRE_REPLAY_WINDOW = 128,
        /* Reject counters are indexed by -GOSSIP_E* code. */
        GOSSIP_WIRE_REJECT_SLOTS = 17,
};
/* Default stream bound: a 784-512-10 model with Adam state is ~5 MB; 64 MiB
 * leaves room for bigger models while bounding what a peer can make us
 * buffer. */
#define GOSSIP_WIRE_STREAM_MAX ((size_t)64 << 20)

/* Message kinds: the prefix's kind byte. 0 is never valid. */
enum gossip_msg_kind {
        GOSSIP_MSG_PING = 1,      /* probe */
        GOSSIP_MSG_PING_REQ = 2,  /* indirect probe of target through us */
        GOSSIP_MSG_ACK = 3,       /* answer to PING / PING_REQ (or NACK) */
        GOSSIP_MSG_SYNC = 4,      /* anti-entropy: full membership list */
        GOSSIP_MSG_JOIN = 5,      /* join request; answered with SYNC */
        GOSSIP_MSG_LEAVE = 6,     /* graceful leave */
        GOSSIP_MSG_GRADIENT = 7,  /* a gradient (partition), opaque payload */
        GOSSIP_MSG_STATE_REQ = 8, /* ask for the current model state */
        GOSSIP_MSG_STATE = 9,     /* model state: step + checkpoint bytes */
        GOSSIP_MSG_PARAMS = 10,   /* parameters for model averaging */
        GOSSIP_MSG_SAMPLES = 11,  /* training samples (--shuffle-samples) */
        GOSSIP_MSG_KIND_COUNT     /* one past the last kind */
};

/* Kinds whose body is a struct gossip_tensor. */
#define GOSSIP_WIRE_IS_TENSOR(kind)                                            \
        ((kind) == GOSSIP_MSG_GRADIENT || (kind) == GOSSIP_MSG_PARAMS ||       \
         (kind) == GOSSIP_MSG_SAMPLES)

/* Member states on the wire: same values as enum gossip_member_state
 * (0 alive, 1 suspect, 2 dead, 3 left). */
#define GOSSIP_WIRE_STATE_MAX 3

/* One piggybacked membership update ("key_id is state at incarnation, to
 * be found at addr"). */
struct gossip_update {
        uint64_t key_id;
        uint64_t incarnation;
        struct gossip_addr addr;         /* family 0: no address known */
        uint8_t state;                   /* 0..GOSSIP_WIRE_STATE_MAX */
        char name[GOSSIP_WIRE_NAME_MAX]; /* NUL-terminated, "" = none */
        /* SUSPECT: key id of the member whose own failed probe raised this
         * suspicion (Lifeguard's confirmations count distinct origins);
         * 0 = not given (an older sender: count the frame's sender). */
        uint64_t origin;
        /* ALIVE: the member's software version, "" = not given (element
         * 6, optional: older senders omit it, older receivers skip it). */
        char version[GOSSIP_WIRE_VERSION_MAX];
        /* ALIVE: the digest of the member's cluster settings
         * (gossip/settings.h), 0 = not given (element 7, optional). */
        uint64_t settings;
        /* ALIVE: 1 = the member is loading (a member but not yet
         * exchanging: not a partner), 0 = exchanging or not given
         * (element 8, optional). */
        uint8_t loading;
};

/* Bytes somewhere else: a decoded certificate points into the frame. */
struct gossip_blob {
        const uint8_t *p;
        size_t len;
};

/* GRADIENT, PARAMS and SAMPLES (whose payload is opaque samples, see
 * docs/protocol.md 3.8; n_elems counts payload bytes). */
struct gossip_tensor {
        uint64_t step;          /* optimizer step this tensor belongs to */
        uint32_t codec;         /* payload codec id (codec.h) */
        uint32_t part_index;    /* partition index, < part_count */
        uint32_t part_count;    /* 1 = whole tensor */
        uint64_t n_elems;       /* elements in this partition */
        const uint8_t *payload; /* decode: points into the input buffer */
        size_t payload_len;
        /* PARAMS only (key 15, optional): the averaging period K the
         * sender's round of this slice was made under, >= 1; 0 = not
         * told (an older sender). Other kinds never write or read it. */
        uint32_t period;
        /* PARAMS only (key 16, optional): the period the sender's own
         * link needs (gossip/adapt.h, one period for all), >= 1; 0 = not
         * told (an older sender, or one that does not adapt). */
        uint32_t need;
        /* PARAMS only (keys 17 and 18, optional): the rate, bytes/s, at
         * which the sender received the frame's receiver's last stream
         * frames, and the microseconds of arrival that covers
         * (gossip/link.h, struct gossip_link_rx), each >= 1; 0 = not
         * told. A receiver takes the sample only when both are set. */
        uint32_t rx_rate;
        uint32_t rx_span;
};

/* STATE. */
struct gossip_state {
        uint64_t step;       /* step of the checkpoint */
        uint64_t req_seq;    /* seq of the STATE_REQ answered (0: unasked) */
        const uint8_t *data; /* checkpoint bytes; decode: into input */
        size_t len;
};

/*
 * A message, decoded or to be encoded.
 *
 * Encode: kind, channel, incarnation, seq, step, mac_key, the kind's union
 * member and (for PING, PING_REQ, ACK, SYNC, JOIN) updates[0..n_updates)
 * are read; key_id is derived from the secret key and ignored.
 * Decode: the caller sets updates / updates_cap (storage for received
 * updates, may be NULL / 0) before the call; everything else is written
 * (mac_key NULL).
 * A message carrying more updates than updates_cap is rejected.
 */
struct gossip_msg {
        uint8_t kind;         /* enum gossip_msg_kind */
        uint8_t channel;      /* enum gossip_channel */
        uint64_t key_id;      /* sender */
        uint64_t incarnation; /* sender's; must grow across restarts */
        uint64_t seq;         /* sender's message counter */
        uint64_t step;        /* sender's training step */
        /* Encode: the pairwise key with the receiver
         * (gossip_keyring_mac_key(), GOSSIP_WIRE_MAC_KEY_BYTES) for a MAC
         * frame; NULL, or a kind/channel that cannot be MAC'd: signed. */
        const uint8_t *mac_key;

        struct gossip_update *updates;
        uint32_t n_updates;
        uint32_t updates_cap;
        /* JOIN and SYNC, key 19 (optional): the sender's cluster settings.
         * Encode: written when non-NULL. Decode: filled when the key is
         * present and this points at storage (else the key is skipped);
         * settings_told says it was. */
        struct gossip_settings *settings;
        uint8_t settings_told;
        /* JOIN and SYNC, key 20 (optional): the sender's certificate
         * (gossip/cert.h, GOSSIP_CERT_MIN_BYTES..GOSSIP_CERT_MAX_BYTES).
         * Encode: written when cert_len. Decode: points into the input. */
        const uint8_t *cert;
        size_t cert_len;
        /* SYNC, key 21 (optional): certificates of members it lists, so
         * that a receiver that trusts the authority learns whom to trust.
         * Encode: certs[0..n_certs) written when n_certs. Decode: the
         * first certs_cap go to certs[] (pointing into the input; the
         * rest are checked and skipped), n_certs says how many. */
        struct gossip_blob *certs;
        uint32_t n_certs, certs_cap;
        /* JOIN and SYNC, key 22 (optional): the revocation list the sender
         * holds (gossip/cert.h, GOSSIP_CRL_MIN_BYTES..GOSSIP_CRL_MAX_BYTES),
         * so that a newer one spreads. Encode: written when crl_len.
         * Decode: points into the input. */
        const uint8_t *crl;
        size_t crl_len;

        union {
                struct {
                        uint64_t target; /* key id probed; 0 = unknown */
                } ping;
                struct {
                        uint64_t target;         /* member to probe for us */
                        struct gossip_addr addr; /* where to find it */
                } ping_req;
                struct {
                        uint64_t ack_seq; /* seq of the PING/PING_REQ */
                        uint64_t target;  /* member vouched for */
                        uint8_t nack;     /* 1: relay got no answer */
                } ack;
                struct {
                        uint8_t reply; /* 1: please answer with your SYNC */
                        /* key 23 (optional): the digest of the
                         * sender's whole view (gossip_view_digest,
                         * protocol.md 3.9); a SYNC that carries it lists
                         * only its sender's own entry. */
                        uint8_t has_view;
                        uint8_t view[GOSSIP_VIEW_DIGEST_BYTES];
                } sync;
                struct gossip_tensor tensor; /* GRADIENT, PARAMS */
                struct gossip_state state;   /* STATE */
                struct gossip_stop leave;    /* LEAVE: reason 0 = none */
        } u;
};

/* Per-channel frame bounds, checked before anything else. */
struct gossip_wire_limits {
        size_t max_dgram;  /* 0: GOSSIP_WIRE_DGRAM_MAX */
        size_t max_stream; /* 0: GOSSIP_WIRE_STREAM_MAX */
};

/* Counters: every reject by reason (index -GOSSIP_E*) and accepts by kind. */
struct gossip_wire_stats {
        uint64_t rejected[GOSSIP_WIRE_REJECT_SLOTS];
        uint64_t accepted[GOSSIP_MSG_KIND_COUNT];
        uint64_t rx_bytes; /* bytes of accepted frames */
};

/* The keyring and the replay table: gossip/keyring.h. */

/*
 * Encodes and signs m into buf[0..cap) (a MAC frame instead when
 * m->mac_key is set, the channel is STREAM and the kind GRADIENT, STATE or
 * PARAMS). On success *out_len is the frame
 * length and *n_sent (may be NULL) how many of m->updates[0..) it carries:
 * updates are taken in order while they fit, so put the most urgent first.
 * GOSSIP_EINVAL for a bad message (unknown kind, state, name, channel ...),
 * GOSSIP_ETOOBIG if even the message without updates does not fit.
 * sk is libsodium's 64-byte Ed25519 secret key (seed || public key).
 */
int gossip_wire_encode(const struct gossip_msg *m,
                       const uint8_t sk[GOSSIP_SECRET_BYTES], void *buf,
                       size_t cap, size_t *out_len, uint32_t *n_sent);

/* An upper bound on the frame length of m with all its updates, for
 * sizing a buffer. */
size_t gossip_wire_frame_bound(const struct gossip_msg *m);

/*
 * Checks and decodes one frame received on channel. 0 and *out filled, or a
 * negative GOSSIP_E* code (ETOOBIG, ESHORT, EVERSION, EKIND, EUNKNOWNKEY,
 * EBADSIG, EREPLAY, EDECODE; EINVAL for bad arguments, ENOMEM if the replay
 * table cannot grow); every reject is counted in st. On an error, out is
 * left as the caller set it if the frame did not authenticate; once the
 * signature or tag checked out, out->key_id names the signer (so a refusal
 * can be charged to it) and the rest of *out is undefined.
 * lim may be NULL (defaults), rp may be NULL (no replay check), st may be
 * NULL. The replay window is advanced only for an accepted frame. out's
 * payload/data pointers point into buf.
 */
int gossip_wire_decode(const void *buf, size_t len, int channel,
                       const struct gossip_wire_limits *lim,
                       const struct gossip_keyring *kr,
                       struct gossip_replay *rp, struct gossip_msg *out,
                       struct gossip_wire_stats *st);

/* Checks 1-12 of docs/protocol.md 2.3 (bounds, layout, a keyring signer,
 * signature or MAC, channel) and nothing after: no replay window, no body.
 * 0 when a trusted key made buf for this channel, else the GOSSIP_E* code
 * gossip_wire_decode() would give. Keeps no state and counts nothing, so
 * the same frame can be decoded afterwards (a transport authenticating a
 * connection's first frame). */
int gossip_wire_authenticate(const void *buf, size_t len, int channel,
                             const struct gossip_wire_limits *lim,
                             const struct gossip_keyring *kr);

/* gossip_wire_authenticate() with the signer's key given instead of
 * looked up: 0 when pk signed buf for channel (GOSSIP_EUNKNOWNKEY when the
 * frame names another key id; a MAC frame is GOSSIP_EBADSIG: only a
 * signature can show a key we have not trusted yet). For a JOIN or SYNC
 * from a key whose certificate has just verified. */
int gossip_wire_authenticate_pk(const void *buf, size_t len, int channel,
                                const struct gossip_wire_limits *lim,
                                const uint8_t pk[GOSSIP_KEY_BYTES]);

/* The digest of a membership view (protocol.md 3.9), a SYNC's key 23:
 * BLAKE2b-128 over each entry's record in ascending key_id, the record
 * being u[i]'s fields and certs[i]'s hash (certs NULL, or certs[i].len 0:
 * no certificate). Two views with the same entries give the same digest
 * whatever their order. 0 or GOSSIP_ENOMEM. */
int gossip_wire_view_digest(const struct gossip_update *u,
                            const struct gossip_blob *certs, size_t n,
                            uint8_t out[GOSSIP_VIEW_DIGEST_BYTES]);

/* The certificate (key 20) of a JOIN or SYNC frame, NOT authenticated:
 * the prefix is checked and the body bounded as the decoder does, then
 * *cert points into buf. 0, GOSSIP_ENOPEER (another kind, or no key 20),
 * or the decoder's code for a malformed frame. Who signed the frame is
 * for the caller to check, with the certificate's key, once the
 * certificate has verified (gossip_wire_authenticate_pk). */
int gossip_wire_peek_cert(const void *buf, size_t len, int channel,
                          const struct gossip_wire_limits *lim,
                          const uint8_t **cert, size_t *cert_len);

/* The claimed (unverified!) sender key id and kind of a frame, for per-peer
 * counters on rejects. 0, or GOSSIP_ESHORT / GOSSIP_EDECODE (bad magic). */
int gossip_wire_peek_sender(const void *buf, size_t len, uint64_t *key_id,
                            uint8_t *kind);

/* Counts err as a reject in st (e.g. GOSSIP_ENONFINITE found later by the
 * payload codec). Non-negative or out-of-range err counts nothing. */
void gossip_wire_stats_count(struct gossip_wire_stats *st, int err);

/* Stream framing: each frame travels as a 4-byte big-endian length, then
 * the frame. Writes the length header. */
void gossip_wire_stream_put_len(uint8_t hdr[4], uint32_t frame_len);
/* Reads a length header: 0 and *frame_len, or GOSSIP_ETOOBIG above the
 * stream bound (lim may be NULL), GOSSIP_ESHORT below the smallest frame
 * (GOSSIP_WIRE_MAC_OVERHEAD). */
int gossip_wire_stream_get_len(const uint8_t hdr[4],
                               const struct gossip_wire_limits *lim,
                               uint32_t *frame_len);

#endif
