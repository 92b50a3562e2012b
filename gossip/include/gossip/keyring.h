/*
 * keyring.h - whom we trust and what we have seen: the keyring (trusted
 * Ed25519 public keys by key id, with the pairwise MAC key derived for
 * each) and the replay table (a replay window per sender and channel).
 * gossip_wire_decode() (wire.h) checks
 * every frame against both; the daemon fills the keyring from the peers
 * file. Implemented in keyring.c; its seams for wire.c are in
 * keyring_private.h.
 *
 * Not thread-safe: a keyring and a replay table belong to one thread.
 */
#ifndef GOSSIP_KEYRING_H
#define GOSSIP_KEYRING_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip_types.h"

struct gossip_keyring; /* opaque: trusted public keys by key id */
struct gossip_replay;  /* opaque: replay windows by (sender, channel) */

/* The key id of a public key: the first 8 bytes of BLAKE2b-256(pk), read
 * big-endian. Never 0 for a key the keyring accepts. */
uint64_t gossip_key_id(const uint8_t pk[GOSSIP_KEY_BYTES]);

/* A new empty keyring, or NULL when out of memory (or if libsodium cannot
 * initialise: this calls sodium_init(), which is idempotent). */
struct gossip_keyring *gossip_keyring_new(void);
/* Frees kr, wiping our X25519 secret and the pairwise keys. NULL is a
 * no-op. */
void gossip_keyring_free(struct gossip_keyring *kr);
/* Makes sk (libsodium's 64-byte Ed25519 secret key) our own key: keeps its
 * X25519 form and derives the pairwise MAC key with every key present and
 * every key added later. 0, or GOSSIP_EINVAL (nothing changed). */
int gossip_keyring_set_self(struct gossip_keyring *kr,
                            const uint8_t sk[GOSSIP_SECRET_BYTES]);
/* The pairwise MAC key (GOSSIP_WIRE_MAC_KEY_BYTES) shared with key_id, or
 * NULL if key_id is not trusted, no self key is set, or its key has no
 * X25519 form. Valid until the next add/remove/set_self. */
const uint8_t *gossip_keyring_mac_key(const struct gossip_keyring *kr,
                                      uint64_t key_id);
/* Trusts pk. 0 if added or already present; GOSSIP_EINVAL if its key id is
 * 0 or collides with a different key (nothing changed); GOSSIP_ENOMEM.
 * *key_id (may be NULL) gets the key id. */
int gossip_keyring_add(struct gossip_keyring *kr,
                       const uint8_t pk[GOSSIP_KEY_BYTES], uint64_t *key_id);
/* Stops trusting key_id (its pairwise key is wiped). 0, or
 * GOSSIP_EUNKNOWNKEY if it was not there. */
int gossip_keyring_remove(struct gossip_keyring *kr, uint64_t key_id);
/* The trusted public key with this id, or NULL. Valid until the next
 * add/remove. */
const uint8_t *gossip_keyring_find(const struct gossip_keyring *kr,
                                   uint64_t key_id);
/* Number of trusted keys. */
size_t gossip_keyring_count(const struct gossip_keyring *kr);

/* A new empty replay table, or NULL when out of memory. */
struct gossip_replay *gossip_replay_new(void);
/* Frees rp. NULL is a no-op. */
void gossip_replay_free(struct gossip_replay *rp);
/* Forgets everything seen from key_id (both channels). Only for a removed
 * key: forgetting a live sender re-opens it to replays. */
void gossip_replay_forget(struct gossip_replay *rp, uint64_t key_id);

#endif
