/*
 * gossip_types.h - the seams shared by every part of the protocol core.
 *
 * gossip/ is a pure library: bytes in, bytes out, time as a number. It never
 * touches a socket, a thread or a clock. Everything it needs from the outside
 * comes through struct gossip_env, so tests can run hundreds of nodes in one
 * process on a simulated network in virtual time, and the daemon wires the
 * same calls to libuv.
 *
 * Errors: every call returns 0 or a negative GOSSIP_E* code;
 * gossip_strerror() names it.
 */
#ifndef GOSSIP_TYPES_H
#define GOSSIP_TYPES_H

#include <stddef.h>
#include <stdint.h>

enum gossip_err {
        GOSSIP_OK = 0,
        GOSSIP_EINVAL = -1,      /* bad argument */
        GOSSIP_ENOMEM = -2,      /* allocation failed */
        GOSSIP_ESHORT = -3,      /* frame shorter than its header says */
        GOSSIP_ETOOBIG = -4,     /* frame over the configured bound */
        GOSSIP_EVERSION = -5,    /* unknown protocol version */
        GOSSIP_EKIND = -6,       /* unknown message kind */
        GOSSIP_EUNKNOWNKEY = -7, /* signer not in the trusted set */
        GOSSIP_EBADSIG = -8,     /* Ed25519 signature does not verify */
        GOSSIP_EREPLAY = -9,  /* (incarnation, seq) already seen or too old */
        GOSSIP_EDECODE = -10, /* msgpack body malformed */
        GOSSIP_ENONFINITE = -11, /* NaN or Inf in a gradient/state payload */
        GOSSIP_ESTALE = -12,     /* gradient older than the staleness bound */
        GOSSIP_ENOPEER = -13,    /* no live partner / member */
        GOSSIP_ESEND = -14,      /* env->send failed */
        GOSSIP_EMISMATCH = -15,  /* payload shape does not match the model */
        GOSSIP_ESETTINGS = -16,  /* sender runs other cluster settings */
        GOSSIP_EREVOKED = -17,   /* sender's certificate is revoked */
};

const char *gossip_strerror(int err);

/* The counter label of a refusal with code err (reject slot -err), e.g.
 * "bad_sig"; NULL for GOSSIP_OK and codes that are not errors. */
const char *gossip_reject_name(int err);

/* A transport address. IPv4 or IPv6, network byte order in addr. */
struct gossip_addr {
        uint8_t family; /* 4 or 6 */
        uint8_t addr[16];
        uint16_t port; /* host byte order */
};

/* Channels a message may travel on. */
enum gossip_channel {
        GOSSIP_CH_DGRAM = 0,  /* UDP: membership, probes, small messages */
        GOSSIP_CH_STREAM = 1, /* TCP: gradients and model state, framed */
};

/* Ed25519 public key: a member is its key, not its address. */
#define GOSSIP_KEY_BYTES    32
#define GOSSIP_SECRET_BYTES 64
#define GOSSIP_SIG_BYTES    64

/* A view's digest, a SYNC's key 23: BLAKE2b-128 (protocol.md 3.9). */
#define GOSSIP_VIEW_DIGEST_BYTES 16

struct gossip_env {
        /* Hand one complete frame to the transport. 0 or negative. The
         * buffer is only borrowed for the duration of the call. */
        int (*send)(void *ctx, const struct gossip_addr *to, const void *buf,
                    size_t len, int channel);
        /* Monotonic milliseconds. */
        uint64_t (*now_ms)(void *ctx);
        /* All randomness is derived from this. */
        uint64_t seed;
        void *ctx;
        /* Optional: the wall clock in unix seconds, for judging
         * certificates (gossip/cert.h); NULL, or 0 returned, when the
         * clock is not known yet (a board without an RTC before NTP):
         * then expiry is judged against the revocation list's date only
         * (docs/protocol.md 12.4). */
        uint64_t (*unix_now)(void *ctx);
};

#endif
