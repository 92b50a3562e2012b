/* gossip_types.c - names for the protocol core's error codes: a sentence
 * for logs (gossip_strerror) and a label for counters (gossip_reject_name). */
#include "gossip/gossip_types.h"

const char *gossip_strerror(int err)
{
        switch (err) {
        case GOSSIP_OK:
                return "success";
        case GOSSIP_EINVAL:
                return "invalid argument";
        case GOSSIP_ENOMEM:
                return "out of memory";
        case GOSSIP_ESHORT:
                return "frame truncated";
        case GOSSIP_ETOOBIG:
                return "frame too big";
        case GOSSIP_EVERSION:
                return "unsupported protocol version";
        case GOSSIP_EKIND:
                return "unknown message kind";
        case GOSSIP_EUNKNOWNKEY:
                return "signer not trusted";
        case GOSSIP_EBADSIG:
                return "bad signature";
        case GOSSIP_EREPLAY:
                return "replayed message";
        case GOSSIP_EDECODE:
                return "malformed message body";
        case GOSSIP_ENONFINITE:
                return "NaN or Inf in payload";
        case GOSSIP_ESTALE:
                return "gradient too stale";
        case GOSSIP_ENOPEER:
                return "no live peer";
        case GOSSIP_ESEND:
                return "send failed";
        case GOSSIP_EMISMATCH:
                return "payload does not match the model";
        case GOSSIP_ESETTINGS:
                return "sender runs other cluster settings";
        case GOSSIP_EREVOKED:
                return "sender's certificate is revoked";
        }
        return "unknown error";
}

const char *gossip_reject_name(int err)
{
        switch (err) {
        case GOSSIP_EINVAL:
                return "invalid";
        case GOSSIP_ENOMEM:
                return "nomem";
        case GOSSIP_ESHORT:
                return "short";
        case GOSSIP_ETOOBIG:
                return "too_big";
        case GOSSIP_EVERSION:
                return "version";
        case GOSSIP_EKIND:
                return "kind";
        case GOSSIP_EUNKNOWNKEY:
                return "unknown_key";
        case GOSSIP_EBADSIG:
                return "bad_sig";
        case GOSSIP_EREPLAY:
                return "replay";
        case GOSSIP_EDECODE:
                return "decode";
        case GOSSIP_ENONFINITE:
                return "non_finite";
        case GOSSIP_ESTALE:
                return "stale";
        case GOSSIP_ENOPEER:
                return "no_peer";
        case GOSSIP_ESEND:
                return "send";
        case GOSSIP_EMISMATCH:
                return "mismatch";
        case GOSSIP_ESETTINGS:
                return "settings";
        case GOSSIP_EREVOKED:
                return "revoked";
        }
        return NULL;
}
