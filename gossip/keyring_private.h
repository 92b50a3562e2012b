/*
 * keyring_private.h - seams between wire.c and keyring.c, not for other
 * users.
 *
 * The replay check is split in two so that a frame whose body turns out to
 * be malformed never advances its sender's window: check before decoding
 * the body, commit after everything else passed.
 */
#ifndef GOSSIP_KEYRING_PRIVATE_H
#define GOSSIP_KEYRING_PRIVATE_H

#include "gossip/keyring.h"

/* 0 if (inc, seq) from key_id on channel would be new, else
 * GOSSIP_EREPLAY. Changes nothing. */
int gossip__replay_check(const struct gossip_replay *rp, uint64_t key_id,
                         int channel, uint64_t inc, uint64_t seq);
/* Records (inc, seq) as seen. 0 or GOSSIP_ENOMEM (nothing changed). */
int gossip__replay_commit(struct gossip_replay *rp, uint64_t key_id,
                          int channel, uint64_t inc, uint64_t seq);

/* gossip_keyring_add() with the key id given: lets tests make collisions,
 * which BLAKE2b will not make for them. */
int gossip__keyring_add_id(struct gossip_keyring *kr,
                           const uint8_t pk[GOSSIP_KEY_BYTES], uint64_t id);

#endif
