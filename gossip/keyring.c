/*
 * keyring.c - trusted signers by key id with their pairwise MAC keys, and
 * per-sender replay windows.
 *
 * Both tables are arrays sorted by key id and searched by bisection: they
 * hold one entry per trusted peer (tens to a few thousand), change rarely
 * (peers file reload, a sender's first accepted frame) and are read for
 * every frame.
 *
 * Invariants:
 *  - a keyring never holds two keys with the same id, nor key id 0: a key
 *    whose id collides with a different trusted key is refused, so an id
 *    names exactly one key;
 *  - once our own key is set, every entry whose key has an X25519 form
 *    holds K(self, key) (docs/protocol.md 2.2.1) and has_mac says so;
 *  - secrets (our X25519 scalar, pairwise keys) never reach freed memory
 *    unwiped: the key array grows by copy-wipe-free, not realloc, and a
 *    removed entry's old slot is wiped;
 *  - a replay entry exists only for a sender that had a frame accepted, so
 *    the replay table is bounded by the keys ever trusted;
 *  - window bit i of a channel says whether seq (top - i) was accepted at
 *    the window's incarnation; seqs at or below top - WINDOW are refused.
 */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "base/gn_endian.h"
#include "gossip/wire.h"
#include "keyring_private.h"

_Static_assert(GOSSIP_WIRE_REPLAY_WINDOW == 128,
               "the window is two 64-bit words");

struct key_entry {
        uint64_t id;
        uint8_t pk[GOSSIP_KEY_BYTES];
        uint8_t mac[GOSSIP_WIRE_MAC_KEY_BYTES]; /* K(self, pk) */
        uint8_t has_mac;
};

struct gossip_keyring {
        struct key_entry *v;
        size_t n, cap;
        uint8_t self_pk[GOSSIP_KEY_BYTES];
        uint8_t self_x[crypto_scalarmult_SCALARBYTES]; /* X25519 secret */
        uint8_t has_self;
};

/* Domain separation of the pairwise key derivation (23 bytes, no NUL). */
static const char mac_label[] = "gossipnode v1 frame mac";
_Static_assert(sizeof(mac_label) - 1 == 23, "label length");
_Static_assert(GOSSIP_WIRE_MAC_KEY_BYTES == crypto_generichash_BYTES,
               "K is an unkeyed BLAKE2b-256");

struct window {
        uint64_t inc;
        uint64_t top;     /* highest seq accepted at inc */
        uint64_t bits[2]; /* bit i: seq top - i accepted */
        uint8_t have;     /* 0 until the first accepted frame */
};

struct replay_entry {
        uint64_t id;
        struct window w[2]; /* indexed by enum gossip_channel */
};

struct gossip_replay {
        struct replay_entry *v;
        size_t n, cap;
};

uint64_t gossip_key_id(const uint8_t pk[GOSSIP_KEY_BYTES])
{
        uint8_t h[crypto_generichash_BYTES];

        crypto_generichash(h, sizeof(h), pk, GOSSIP_KEY_BYTES, NULL, 0);
        return gn_be_get(h, 8);
}

/* Index of the first entry with id >= key in a sorted array of structs
 * whose first member is a uint64_t id. */
static size_t lower_bound(const void *base, size_t n, size_t size, uint64_t key)
{
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                uint64_t id;

                memcpy(&id, (const char *)base + mid * size, sizeof(id));
                if (id < key)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/* Makes room for one more element of size bytes; 0 or GOSSIP_ENOMEM. */
static int grow(void **v, size_t n, size_t *cap, size_t size)
{
        void *nv;
        size_t ncap;

        if (n < *cap)
                return 0;
        ncap = *cap ? *cap * 2 : 16;
        nv = realloc(*v, ncap * size);
        if (!nv)
                return GOSSIP_ENOMEM;
        *v = nv;
        *cap = ncap;
        return 0;
}

struct gossip_keyring *gossip_keyring_new(void)
{
        /* Idempotent and thread-safe; picks libsodium's fastest code. */
        if (sodium_init() < 0)
                return NULL;
        return calloc(1, sizeof(struct gossip_keyring));
}

void gossip_keyring_free(struct gossip_keyring *kr)
{
        if (!kr)
                return;
        if (kr->v)
                sodium_memzero(kr->v, kr->cap * sizeof(*kr->v));
        free(kr->v);
        sodium_memzero(kr, sizeof(*kr));
        free(kr);
}

/* Room for one more key; like grow() but the old block is wiped before it
 * is freed (it holds pairwise keys). 0 or GOSSIP_ENOMEM. */
static int keys_grow(struct gossip_keyring *kr)
{
        struct key_entry *nv;
        size_t ncap;

        if (kr->n < kr->cap)
                return 0;
        ncap = kr->cap ? kr->cap * 2 : 16;
        nv = calloc(ncap, sizeof(*nv));
        if (!nv)
                return GOSSIP_ENOMEM;
        if (kr->v) {
                memcpy(nv, kr->v, kr->n * sizeof(*nv));
                sodium_memzero(kr->v, kr->cap * sizeof(*kr->v));
                free(kr->v);
        }
        kr->v = nv;
        kr->cap = ncap;
        return 0;
}

/* K = BLAKE2b-256(label || X25519(self_x, curve(pk)) || pk_lo || pk_hi)
 * into e->mac, or has_mac = 0 if pk has no X25519 form (or the shared
 * point is the identity). */
static void pair_key(const struct gossip_keyring *kr, struct key_entry *e)
{
        uint8_t xpk[crypto_scalarmult_BYTES], shared[crypto_scalarmult_BYTES];
        crypto_generichash_state st;
        const uint8_t *lo = kr->self_pk, *hi = e->pk;

        e->has_mac = 0;
        sodium_memzero(e->mac, sizeof(e->mac));
        if (crypto_sign_ed25519_pk_to_curve25519(xpk, e->pk) != 0 ||
            crypto_scalarmult(shared, kr->self_x, xpk) != 0)
                goto out;
        if (memcmp(lo, hi, GOSSIP_KEY_BYTES) > 0) {
                lo = e->pk;
                hi = kr->self_pk;
        }
        crypto_generichash_init(&st, NULL, 0, sizeof(e->mac));
        crypto_generichash_update(&st, (const uint8_t *)mac_label,
                                  sizeof(mac_label) - 1);
        crypto_generichash_update(&st, shared, sizeof(shared));
        crypto_generichash_update(&st, lo, GOSSIP_KEY_BYTES);
        crypto_generichash_update(&st, hi, GOSSIP_KEY_BYTES);
        crypto_generichash_final(&st, e->mac, sizeof(e->mac));
        e->has_mac = 1;
out:
        sodium_memzero(shared, sizeof(shared));
        sodium_memzero(&st, sizeof(st));
}

int gossip_keyring_set_self(struct gossip_keyring *kr,
                            const uint8_t sk[GOSSIP_SECRET_BYTES])
{
        uint8_t x[sizeof(kr->self_x)];

        if (!kr || !sk)
                return GOSSIP_EINVAL;
        if (crypto_sign_ed25519_sk_to_curve25519(x, sk) != 0) {
                sodium_memzero(x, sizeof(x));
                return GOSSIP_EINVAL;
        }
        memcpy(kr->self_x, x, sizeof(x));
        sodium_memzero(x, sizeof(x));
        /* libsodium's secret key is seed || public key. */
        memcpy(kr->self_pk, sk + 32, GOSSIP_KEY_BYTES);
        kr->has_self = 1;
        for (size_t i = 0; i < kr->n; i++)
                pair_key(kr, &kr->v[i]);
        return 0;
}

const uint8_t *gossip_keyring_mac_key(const struct gossip_keyring *kr,
                                      uint64_t key_id)
{
        size_t i;

        if (!kr || key_id == 0)
                return NULL;
        i = lower_bound(kr->v, kr->n, sizeof(*kr->v), key_id);
        if (i == kr->n || kr->v[i].id != key_id || !kr->v[i].has_mac)
                return NULL;
        return kr->v[i].mac;
}

int gossip__keyring_add_id(struct gossip_keyring *kr,
                           const uint8_t pk[GOSSIP_KEY_BYTES], uint64_t id)
{
        size_t i;
        int err;

        if (!kr || !pk || id == 0)
                return GOSSIP_EINVAL;
        i = lower_bound(kr->v, kr->n, sizeof(*kr->v), id);
        if (i < kr->n && kr->v[i].id == id)
                return memcmp(kr->v[i].pk, pk, GOSSIP_KEY_BYTES) ? GOSSIP_EINVAL
                                                                 : 0;
        err = keys_grow(kr);
        if (err)
                return err;
        memmove(&kr->v[i + 1], &kr->v[i], (kr->n - i) * sizeof(*kr->v));
        memset(&kr->v[i], 0, sizeof(kr->v[i]));
        kr->v[i].id = id;
        memcpy(kr->v[i].pk, pk, GOSSIP_KEY_BYTES);
        if (kr->has_self)
                pair_key(kr, &kr->v[i]);
        kr->n++;
        return 0;
}

int gossip_keyring_add(struct gossip_keyring *kr,
                       const uint8_t pk[GOSSIP_KEY_BYTES], uint64_t *key_id)
{
        uint64_t id;

        if (!kr || !pk)
                return GOSSIP_EINVAL;
        id = gossip_key_id(pk);
        if (key_id)
                *key_id = id;
        return gossip__keyring_add_id(kr, pk, id);
}

int gossip_keyring_remove(struct gossip_keyring *kr, uint64_t key_id)
{
        size_t i;

        if (!kr)
                return GOSSIP_EINVAL;
        i = lower_bound(kr->v, kr->n, sizeof(*kr->v), key_id);
        if (i == kr->n || kr->v[i].id != key_id)
                return GOSSIP_EUNKNOWNKEY;
        memmove(&kr->v[i], &kr->v[i + 1], (kr->n - i - 1) * sizeof(*kr->v));
        kr->n--;
        /* The last slot now duplicates its neighbour or is the removed key. */
        sodium_memzero(&kr->v[kr->n], sizeof(kr->v[kr->n]));
        return 0;
}

const uint8_t *gossip_keyring_find(const struct gossip_keyring *kr,
                                   uint64_t key_id)
{
        size_t i;

        if (!kr || key_id == 0)
                return NULL;
        i = lower_bound(kr->v, kr->n, sizeof(*kr->v), key_id);
        if (i == kr->n || kr->v[i].id != key_id)
                return NULL;
        return kr->v[i].pk;
}

size_t gossip_keyring_count(const struct gossip_keyring *kr)
{
        return kr ? kr->n : 0;
}

struct gossip_replay *gossip_replay_new(void)
{
        return calloc(1, sizeof(struct gossip_replay));
}

void gossip_replay_free(struct gossip_replay *rp)
{
        if (!rp)
                return;
        free(rp->v);
        free(rp);
}

static struct replay_entry *replay_find(const struct gossip_replay *rp,
                                        uint64_t key_id)
{
        size_t i = lower_bound(rp->v, rp->n, sizeof(*rp->v), key_id);

        if (i == rp->n || rp->v[i].id != key_id)
                return NULL;
        return &rp->v[i];
}

void gossip_replay_forget(struct gossip_replay *rp, uint64_t key_id)
{
        struct replay_entry *e;
        size_t i;

        if (!rp || !(e = replay_find(rp, key_id)))
                return;
        i = (size_t)(e - rp->v);
        memmove(&rp->v[i], &rp->v[i + 1], (rp->n - i - 1) * sizeof(*rp->v));
        rp->n--;
}

static int window_check(const struct window *w, uint64_t inc, uint64_t seq)
{
        uint64_t back;

        if (!w->have || inc > w->inc)
                return 0;
        if (inc < w->inc)
                return GOSSIP_EREPLAY;
        if (seq > w->top)
                return 0;
        back = w->top - seq;
        if (back >= GOSSIP_WIRE_REPLAY_WINDOW)
                return GOSSIP_EREPLAY;
        return (w->bits[back / 64] >> (back % 64)) & 1 ? GOSSIP_EREPLAY : 0;
}

/* Slides the window so that top becomes top + d. */
static void window_shift(struct window *w, uint64_t d)
{
        if (d >= 128) {
                w->bits[0] = w->bits[1] = 0;
        } else if (d >= 64) {
                w->bits[1] = d == 64 ? w->bits[0] : w->bits[0] << (d - 64);
                w->bits[0] = 0;
        } else if (d > 0) {
                w->bits[1] = w->bits[1] << d | w->bits[0] >> (64 - d);
                w->bits[0] <<= d;
        }
}

static void window_commit(struct window *w, uint64_t inc, uint64_t seq)
{
        uint64_t back;

        if (!w->have || inc > w->inc) {
                w->have = 1;
                w->inc = inc;
                w->top = seq;
                w->bits[0] = 1;
                w->bits[1] = 0;
                return;
        }
        if (seq > w->top) {
                window_shift(w, seq - w->top);
                w->top = seq;
        }
        back = w->top - seq;
        w->bits[back / 64] |= (uint64_t)1 << (back % 64);
}

int gossip__replay_check(const struct gossip_replay *rp, uint64_t key_id,
                         int channel, uint64_t inc, uint64_t seq)
{
        const struct replay_entry *e = replay_find(rp, key_id);

        return e ? window_check(&e->w[channel], inc, seq) : 0;
}

int gossip__replay_commit(struct gossip_replay *rp, uint64_t key_id,
                          int channel, uint64_t inc, uint64_t seq)
{
        struct replay_entry *e = replay_find(rp, key_id);
        size_t i;
        int err;

        if (!e) {
                err = grow((void **)&rp->v, rp->n, &rp->cap, sizeof(*rp->v));
                if (err)
                        return err;
                i = lower_bound(rp->v, rp->n, sizeof(*rp->v), key_id);
                memmove(&rp->v[i + 1], &rp->v[i], (rp->n - i) * sizeof(*rp->v));
                memset(&rp->v[i], 0, sizeof(rp->v[i]));
                rp->v[i].id = key_id;
                rp->n++;
                e = &rp->v[i];
        }
        window_commit(&e->w[channel], inc, seq);
        return 0;
}
