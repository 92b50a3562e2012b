/*
 * peers.h - the peers file: who may join, and where to find them.
 *
 * One peer per line:
 *
 *   ADDR:PORT   PUBKEY_BASE64   [NAME]
 *
 * ADDR is a dotted IPv4 address, a bracketed IPv6 address ([fd00::1]:7946)
 * or a host name (resolved once with getaddrinfo at load time; the first
 * IPv4 answer wins, else the first IPv6 one). PUBKEY_BASE64 is the 32-byte
 * Ed25519 public key in padded base64 (44 chars). NAME is optional, 1..63
 * chars of [A-Za-z0-9._-]; when it is missing the peer's name is its
 * addr_str (which has a ':', so it never equals an explicit name). Fields are
 * separated by spaces or tabs; '#' starts a comment (anywhere on a line); blank
 * lines are ignored.
 *
 * Invariants: every entry of a successfully loaded list has a unique key,
 * a unique name and a unique address. Any malformed line rejects the whole
 * file with a one-line message "FILE:LINE: what is wrong" in err - the
 * daemon never runs with half a peers file. All calls return 0 or a negative
 * errno (-EINVAL for bad content, -ENOENT/-EACCES/... from the file system,
 * -ENOMEM).
 */
#ifndef NODE_PEERS_H
#define NODE_PEERS_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gossip_types.h"

/* Bounds: a peers file is written by hand for a few dozen devices; these
 * leave ample room and keep a hostile file from exhausting memory. */
#define NODE_PEERS_MAX      4096      /* entries */
#define NODE_PEERS_FILE_MAX (1 << 20) /* bytes */
#define NODE_PEER_NAME_SIZE 64
#define NODE_ADDR_STR_SIZE  64 /* "[v6]:port" fits in 48; room to spare */

struct node_peer {
        struct gossip_addr addr;
        uint8_t pk[GOSSIP_KEY_BYTES];
        char name[NODE_PEER_NAME_SIZE];    /* NAME, or addr_str if absent */
        char addr_str[NODE_ADDR_STR_SIZE]; /* canonical form of addr */
};

/* Read and parse the peers file at path into a new array (*out, *n), which
 * the caller frees with node_peers_free(). An empty file gives *n == 0 and
 * *out == NULL. On error *out is NULL, *n is 0 and err says why. */
int node_peers_load(const char *path, struct node_peer **out, size_t *n,
                    char *err, size_t errlen);

/* Same as node_peers_load on text already in memory (len bytes, need not be
 * NUL-terminated); fname is used only in messages. */
int node_peers_parse(const char *text, size_t len, const char *fname,
                     struct node_peer **out, size_t *n, char *err,
                     size_t errlen);

/* Free an array returned by node_peers_load/parse (NULL is fine). */
void node_peers_free(struct node_peer *peers);

/* Index of the entry with public key pk, or -1 if none. */
long node_peers_find_pk(const struct node_peer *peers, size_t n,
                        const uint8_t pk[GOSSIP_KEY_BYTES]);

/* Index of the entry named name, or -1 if none. */
long node_peers_find_name(const struct node_peer *peers, size_t n,
                          const char *name);

/* Parse "A.B.C.D:PORT" or "[v6]:PORT" (and, when resolve is set, also
 * "hostname:PORT" through getaddrinfo, blocking) into out. Port 1..65535.
 * 0, -EINVAL on bad syntax, -EHOSTUNREACH if the name does not resolve. */
int node_addr_parse(const char *s, struct gossip_addr *out, int resolve);

/* Format a as "A.B.C.D:PORT" or "[v6]:PORT" into buf (always
 * NUL-terminated). Returns the length written, or -ENOSPC if it did not
 * fit, -EINVAL if the family is neither 4 nor 6. */
int node_addr_format(const struct gossip_addr *a, char *buf, size_t len);

/* Where the advertised address came from (node_addr_advertised). */
enum node_advertise_from {
        NODE_ADVERTISE_OPTION = 0, /* --advertise */
        NODE_ADVERTISE_PEERS = 1,  /* the node's own peers-file line */
        NODE_ADVERTISE_LISTEN = 2, /* --listen, not a wildcard */
};

/* The address a node tells its peers in membership, which they send to:
 * option (--advertise) if given, else peers_line (the node's own line in
 * the peers file) if given and usable, else listen if usable. Any of the
 * three may be NULL. Never a wildcard (gossip_addr_usable): a node bound
 * to 0.0.0.0 that told 0.0.0.0 would have every peer send to itself.
 * Returns the source (enum node_advertise_from) with *out set, -EINVAL
 * if option is given but not usable, or -EADDRNOTAVAIL if no source
 * gives a usable address. */
int node_addr_advertised(const struct gossip_addr *option,
                         const struct gossip_addr *peers_line,
                         const struct gossip_addr *listen,
                         struct gossip_addr *out);

#endif
