/*
 * keys.h - a node's Ed25519 identity and the file that holds it.
 *
 * A node is its public key. The secret key lives in one small text file,
 * created mode 0600 and never silently overwritten, in the manner of
 * minisign and WireGuard:
 *
 *   # gossipnode Ed25519 secret key - keep private (mode 0600)
 *   gossipnode-ed25519-secret-v1 <key id> <base64 of the 64-byte secret key>
 *
 * The algorithm tag names the format and its version; the key id (16 hex
 * digits, the first 8 bytes of BLAKE2b-256 of the public key) lets a reader
 * check the file was not corrupted and lets humans tell keys apart. The
 * 64-byte secret key is libsodium's seed || public key; loading re-derives
 * the public key from the seed and refuses the file if it does not match.
 * '#' lines and blank lines are ignored. Public keys travel as base64
 * (original alphabet, padded: 44 characters for 32 bytes).
 *
 * Invariants: a loaded file is refused if group or others have any
 * permission on it (like ssh), if its tag, key id or length is wrong; every
 * buffer that held secret bytes is wiped with sodium_memzero on every exit
 * path. All calls return 0 or a negative errno; on error the one-line
 * message in err (if given) names the file and what is wrong, and the output
 * keys are zeroed. Call node_key_init() once before any thread starts.
 */
#ifndef NODE_KEYS_H
#define NODE_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip_types.h"

#define NODE_KEY_TAG_SECRET "gossipnode-ed25519-secret-v1"
/* Base64 text of a 32-byte public key: 44 chars, plus one for the NUL. */
#define NODE_KEY_PK_B64_LEN  44
#define NODE_KEY_PK_B64_SIZE (NODE_KEY_PK_B64_LEN + 1)
/* Key id: 16 lowercase hex digits, plus one for the NUL. */
#define NODE_KEY_ID_SIZE 17

/* Initialise libsodium (idempotent). 0, or -EIO if it cannot start. */
int node_key_init(void);

/* Draw a fresh key pair from the system CSPRNG. 0 or negative errno. */
int node_key_generate(uint8_t pk[GOSSIP_KEY_BYTES],
                      uint8_t sk[GOSSIP_SECRET_BYTES]);

/* Write sk to path, mode 0600. Without force an existing file is refused
 * with -EEXIST; with force it is replaced atomically (temp file + rename).
 * 0 or negative errno; on error nothing is left at path that was not there
 * before. */
int node_key_save(const char *path, const uint8_t sk[GOSSIP_SECRET_BYTES],
                  int force, char *err, size_t errlen);

/* Read a key file written by node_key_save into pk and sk. Refused with
 * -EACCES if group/others have any permission, -EINVAL on a wrong tag, key
 * id, length or mismatched halves. 0 or negative errno. */
int node_key_load(const char *path, uint8_t pk[GOSSIP_KEY_BYTES],
                  uint8_t sk[GOSSIP_SECRET_BYTES], char *err, size_t errlen);

/* Write pk as padded base64 (44 chars + NUL) into out. */
void node_key_pk_to_base64(const uint8_t pk[GOSSIP_KEY_BYTES],
                           char out[NODE_KEY_PK_B64_SIZE]);

/* Parse exactly len chars of padded base64 into a 32-byte key. 0, or
 * -EINVAL if it is not exactly 44 valid base64 chars decoding to 32 bytes,
 * or -EDOM if those 32 bytes are not an Ed25519 public key (not a point
 * of the curve, or of small order: such a key can never verify). */
int node_key_pk_from_base64(const char *s, size_t len,
                            uint8_t pk[GOSSIP_KEY_BYTES]);

/* Write pk's key id (16 hex digits + NUL) into out. */
void node_key_id(const uint8_t pk[GOSSIP_KEY_BYTES],
                 char out[NODE_KEY_ID_SIZE]);

#endif
