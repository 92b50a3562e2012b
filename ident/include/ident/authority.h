/*
 * authority.h - a device's cluster-authority files (docs/protocol.md
 * section 12, docs/operations.md "Adding a device with the authority"):
 * the authority's public key (ca.pub: a comment line and the key's
 * base64), this device's certificate and the revocation list (.cert and
 * .crl files: the raw section 12 bytes), as gossip-keygen writes them.
 *
 * node_authority_load() reads all three and refuses, with one line naming
 * the file and the reason, a certificate that is not this node's key's,
 * is not the authority's, or is revoked or expired by our clock: a device
 * that would be refused by every member should not start. The gossip
 * core (gossip/cert.h) judges the certificates of others.
 *
 * All calls return 0 or a negative errno and write nothing but their
 * outputs (node_file_write_atomic: its file); err (if given) gets the
 * message.
 */
#ifndef NODE_AUTHORITY_H
#define NODE_AUTHORITY_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/cert.h"

/* Reads the whole of path (at most cap bytes) into buf. Returns the length
 * or a negative errno (-EFBIG if longer than cap). */
long node_file_read(const char *path, uint8_t *buf, size_t cap);

/* Writes buf to path with mode through a temp file beside it (mkstemp,
 * fsync): rename() when replace, else link() so that an existing path is
 * never clobbered (-EEXIST). 0 or a negative errno; on error path is as
 * it was. A crash leaves the old file or the new one, never a part. */
int node_file_write_atomic(const char *path, const void *buf, size_t len,
                           unsigned mode, int replace);

/* A public key given as base64 (arg itself), or in the file arg: its
 * first 44-character word that is a key, '#' comment lines skipped (a
 * .pub file's peers line, a ca.pub file). 0, -ENOKEY, or the read's
 * errno. */
int node_authority_pub_load(const char *arg, uint8_t pk[GOSSIP_KEY_BYTES]);

/* What a device holds of its authority. crl_len 0: no list. */
struct node_authority {
        uint8_t pk[GOSSIP_KEY_BYTES];
        uint8_t cert[GOSSIP_CERT_MAX_BYTES];
        size_t cert_len;
        struct gossip_cert c; /* cert, decoded (cert_len != 0) */
        uint8_t *crl;         /* malloc'd; node_authority_free */
        size_t crl_len;
};

/* Loads the authority's key from authority_path, our certificate from
 * cert_path (may be NULL: trust certificates, present none) and the list
 * from crl_path (may be NULL; a missing file is no list). The
 * certificate must be for self_pk (NULL: not checked) and verify under
 * the authority at unix time now (0: the clock is not known, expiry is
 * judged by the list's date only). 0, or -EINVAL / -EKEYREJECTED /
 * -EKEYEXPIRED / -EKEYREVOKED / a read's errno, with err. */
int node_authority_load(struct node_authority *a, const char *authority_path,
                        const char *cert_path, const char *crl_path,
                        const uint8_t *self_pk, uint64_t now, char *err,
                        size_t errlen);

/* Frees what node_authority_load allocated (not a itself). */
void node_authority_free(struct node_authority *a);

#endif
