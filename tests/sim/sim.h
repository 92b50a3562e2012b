/*
 * sim.h - a simulated network of gossip nodes in one process, in virtual time.
 *
 * n nodes, each a struct gossip driven only through its public facade
 * (gossip_on_message, gossip_tick, gossip_next_deadline, struct gossip_env).
 * One event heap ordered by (time, sequence) holds deliveries and timers, so
 * a run is a pure function of its seed: same seed, same bytes, same outcome.
 *
 * Faults: per-link loss / delay / jitter on the datagram channel, one-way
 * cuts, partitions into groups, freezing a node (it neither processes nor
 * sends and its timers stop; frames sent to it meanwhile are lost), crash
 * (state destroyed) and restart (same key, new incarnation).
 *
 * The stream channel is reliable and in order per link (a TCP connection):
 * no loss, no jitter, never reordered; on a link with datagram loss p a
 * frame is delayed as TCP would retransmit it (each round in which one of
 * its 1448-byte segments is lost adds an RTO: 200 ms, doubling); a cut or
 * partition breaks it (frames are lost), as would a reset connection.
 *
 * Node i has key pair from (seed, i), address 10.x.y.z:7946 with x.y.z = i,
 * and every node trusts every other node's key (a shared peers file).
 */
#ifndef GN_SIM_H
#define GN_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip.h"

struct sim;

struct sim_opts {
        size_t n;
        uint64_t seed;
        uint32_t delay_ms;  /* one-way base delay on every link */
        uint32_t jitter_ms; /* datagrams get delay + uniform[0, jitter] */
        double loss;        /* datagram loss probability on every link */
        struct gossip_tunables tun; /* zero fields take defaults */
        /* Optional callbacks handed to every node (ctx = the sim); the node
         * index is found with sim_index_of_key(). */
        void (*on_member)(void *ctx, const struct gossip_member_info *m,
                          int old_state);
        void (*on_app)(void *ctx, const struct gossip_member_info *from,
                       const struct gossip_app *msg);
        void (*on_refused)(void *ctx, const struct gossip_member_info *m,
                           const char *name, const char *ours,
                           const char *theirs);
        /* Optional: node i's cluster settings are settings[i] (n entries,
         * kept by the caller for the sim's life); NULL: none told. */
        const struct gossip_settings *settings;
        /* Optional: called for node i before each of its boots with the
         * config it is about to get (peers: every node; n_peers: n), to
         * change it, e.g. trust fewer peers or give it an authority and a
         * certificate (kept by the caller for the sim's life). */
        void (*configure)(struct sim *s, size_t i, struct gossip_config *cfg);
        /* The wall clock every node's env->unix_now reads, in unix
         * seconds at virtual time 0 (advancing with it); 0: none told. */
        uint64_t unix_start_s;
        void *user; /* for the callbacks: sim_user() */
};

/* Build the network and all n nodes (not joined to each other yet). */
int sim_create(const struct sim_opts *o, struct sim **out);
void sim_destroy(struct sim *s);

size_t sim_n(const struct sim *s);
uint64_t sim_now(const struct sim *s);
void *sim_user(const struct sim *s);
/* The node's struct gossip, or NULL when it is crashed. */
struct gossip *sim_node(const struct sim *s, size_t i);
const uint8_t *sim_key(const struct sim *s, size_t i);
void sim_addr(const struct sim *s, size_t i, struct gossip_addr *out);
/* The node whose code is running (for a callback: the node called back),
 * or -1 outside the nodes' code. */
long sim_running(const struct sim *s);
/* Index of the node with this key, or -1. */
long sim_index_of_key(const struct sim *s, const uint8_t *key);

/* Node i joins through node j (gossip_join with j's address). */
int sim_join(struct sim *s, size_t i, size_t j);

/* Run events until virtual time t (inclusive). */
void sim_run_until(struct sim *s, uint64_t t_ms);
/* Run until pred() holds (checked every step_ms of virtual time) or until
 * deadline. Returns true if pred held; sim_now() is then when it first did
 * (to step_ms resolution). */
bool sim_run_until_pred(struct sim *s, uint64_t deadline_ms, uint64_t step_ms,
                        bool (*pred)(struct sim *s, void *arg), void *arg);

/* Faults. from/to are node indexes. */
void sim_set_loss(struct sim *s, size_t from, size_t to, double p);
void sim_set_loss_all(struct sim *s, double p);
void sim_cut(struct sim *s, size_t from, size_t to, bool cut); /* one-way */
/* group[i] names node i's side; nodes in different groups cannot talk.
 * NULL heals. */
void sim_partition(struct sim *s, const int *group);
void sim_freeze(struct sim *s, size_t i, bool frozen);
bool sim_frozen(const struct sim *s, size_t i);
/* Destroy node i's state; frames to it are lost until restart. */
void sim_crash(struct sim *s, size_t i);
/* Recreate node i with the same key and a larger incarnation. */
int sim_restart(struct sim *s, size_t i);
/* Node i says goodbye (gossip_leave); it keeps running until sim_crash. */
int sim_leave(struct sim *s, size_t i);

/* State of member j in node i's view: enum gossip_member_state, or -1 when
 * i does not know j (or i is crashed). i == j gives i's own state. */
int sim_state(const struct sim *s, size_t i, size_t j);

struct sim_counters {
        uint64_t sent[2];      /* frames handed to env->send, per channel */
        uint64_t delivered[2]; /* frames given to gossip_on_message */
        uint64_t bytes[2];     /* bytes sent, per channel */
        uint64_t dropped;      /* lost: loss, cut, partition, frozen, crash */
        uint64_t rejected;     /* gossip_on_message returned < 0 */
        uint64_t ticks;        /* gossip_tick calls */
};
void sim_counters(const struct sim *s, struct sim_counters *out);

#endif
