/*
 * cluster_crl.c - the authority's revocation list on this node's disk
 * (docs/operations.md, "Revoking a device"). The list lives in one file:
 * --crl, or else authority.crl in --checkpoint-dir (node_options_crl_path,
 * also what --check-config reads). It is read at start
 * (node_authority_load, cluster.c), read again on SIGHUP and offered to
 * the protocol core (gossip_set_crl: taken only when newer, then spread
 * to every live member), and written, atomically, whenever the core
 * takes a newer list from a member (on_crl), so that a restarted node
 * refuses the revoked at once instead of after its first SYNC.
 *
 * Loop thread only. Called by cluster.c (the callback, the
 * reload) and cluster_report.c; calls no other cluster*.c file (the
 * caller re-arms the protocol timer after a reload).
 */
#include "cluster/cluster_private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/evlog.h"

/* 1 if path holds exactly bytes[0..len) (a list re-read on SIGHUP is
 * not written back). */
static int file_holds(const char *path, const void *bytes, size_t len)
{
        uint8_t *cur = malloc(len + 1);
        long n = cur ? node_file_read(path, cur, len + 1) : -ENOMEM;
        int same = n == (long)len && memcmp(cur, bytes, len) == 0;

        free(cur);
        return same;
}

void node_cluster__on_crl(void *ctx, const void *bytes, size_t len,
                          uint64_t seq)
{
        struct node_cluster *c = ctx;
        struct gossip_crl l;
        char path[4096];
        int rc;

        if (gossip_crl_decode(bytes, len, &l, NULL) != GOSSIP_CRL_OK)
                return; /* cannot be: the core verified it */
        node_log(NODE_LOG_INFO,
                 "revocation list sequence %llu taken: %u serial%s, issued "
                 "at %llu (unix)",
                 (unsigned long long)seq, l.n_serials,
                 l.n_serials == 1 ? "" : "s", (unsigned long long)l.issued_at);
        if (c->auth.cert_len && gossip_crl_has(&l, c->auth.c.serial))
                node_log(NODE_LOG_WARN,
                         "this node's certificate (serial %016llx) is in "
                         "it: members that hold the list refuse this node",
                         (unsigned long long)c->auth.c.serial);
        if (node_options_crl_path(c->o, path, sizeof(path)) != 0) {
                node_log(NODE_LOG_WARN,
                         "revocation list not saved: no --crl and no "
                         "--checkpoint-dir (a restart forgets it until a "
                         "member tells it again)");
                return;
        }
        if (file_holds(path, bytes, len))
                return;
        rc = node_file_write_atomic(path, bytes, len, 0644, 1);
        if (rc)
                node_log(NODE_LOG_WARN,
                         "revocation list not saved to %s: %s (kept in "
                         "memory; give --crl a path the node may write)",
                         path, strerror(-rc));
        else
                node_log(NODE_LOG_INFO, "revocation list saved to %s", path);
}

int node_cluster__crl_reload(struct node_cluster *c)
{
        struct gossip_crl held;
        char path[4096];
        uint8_t *buf;
        long n;
        int v;

        if (!c->has_authority ||
            node_options_crl_path(c->o, path, sizeof(path)) != 0)
                return 0;
        if (!(buf = malloc(GOSSIP_CRL_MAX_BYTES)))
                return -ENOMEM;
        n = node_file_read(path, buf, GOSSIP_CRL_MAX_BYTES);
        if (n < 0) {
                if (n != -ENOENT || c->o->crl_path)
                        node_log(NODE_LOG_WARN,
                                 "SIGHUP: revocation list %s: %s", path,
                                 strerror((int)-n));
                free(buf);
                return n == -ENOENT ? 0 : (int)n;
        }
        v = gossip_set_crl(c->g, buf, (size_t)n);
        free(buf);
        if (gossip_crl_get(c->g, &held) != 0)
                held.seq = 0;
        if (v == GOSSIP_CRL_OK)
                node_log(NODE_LOG_INFO,
                         "SIGHUP: revocation list %s: sequence %llu taken and "
                         "sent to every live member",
                         path, (unsigned long long)held.seq);
        else if (v == GOSSIP_CRL_SAME)
                node_log(NODE_LOG_INFO,
                         "SIGHUP: revocation list %s: sequence %llu, already "
                         "held",
                         path, (unsigned long long)held.seq);
        else
                node_log(NODE_LOG_WARN,
                         "SIGHUP: revocation list %s refused (%s); keeping "
                         "sequence %llu",
                         path,
                         v < 0 ? gossip_strerror(v)
                               : gossip_crl_verdict_name(v),
                         (unsigned long long)held.seq);
        return 0;
}

const char *node_cluster__barred_why(const struct node_cluster *c,
                                     const uint8_t *key)
{
        struct gossip_barred_info *b;
        const char *why = NULL;
        size_t n = gossip_barred(c->g, NULL, 0);

        if (!n || !(b = calloc(n, sizeof(*b))))
                return NULL;
        n = gossip_barred(c->g, b, n);
        for (size_t i = 0; i < n && !why; i++)
                if (memcmp(b[i].key, key, GOSSIP_KEY_BYTES) == 0)
                        why = b[i].verdict == GOSSIP_CERT_REVOKED
                                  ? "its certificate is revoked"
                                  : "its certificate expired";
        free(b);
        return why;
}
