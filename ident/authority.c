/*
 * authority.c - a device's authority files: the authority's public key,
 * our certificate and the revocation list (authority.h), read, and
 * written atomically (gossip-keygen's files, the node's newer list).
 * The binary layouts and their checks are gossip/cert.c's; this file
 * only reads and writes files and says which one is wrong and why.
 */
#include "ident/authority.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/gn_errbuf.h"
#include "ident/keys.h"

long node_file_read(const char *path, uint8_t *buf, size_t cap)
{
        FILE *f = fopen(path, "rb");
        size_t n;
        int big;

        if (f == NULL)
                return -errno;
        n = fread(buf, 1, cap, f);
        big = n == cap && fgetc(f) != EOF;
        if (ferror(f)) {
                fclose(f);
                return -EIO;
        }
        fclose(f);
        return big ? -EFBIG : (long)n;
}

int node_authority_pub_load(const char *arg, uint8_t pk[GOSSIP_KEY_BYTES])
{
        uint8_t text[4096];
        long n;
        char *p, *save = NULL;

        if (strlen(arg) == NODE_KEY_PK_B64_LEN &&
            node_key_pk_from_base64(arg, NODE_KEY_PK_B64_LEN, pk) == 0)
                return 0;
        n = node_file_read(arg, text, sizeof(text) - 1);
        if (n < 0)
                return (int)n;
        text[n] = 0;
        for (p = strtok_r((char *)text, " \t\r\n", &save); p;
             p = strtok_r(NULL, " \t\r\n", &save)) {
                if (p[0] == '#') { /* skip the rest of a comment line */
                        if (!strtok_r(NULL, "\n", &save))
                                break;
                        continue;
                }
                if (strlen(p) == NODE_KEY_PK_B64_LEN &&
                    node_key_pk_from_base64(p, NODE_KEY_PK_B64_LEN, pk) == 0)
                        return 0;
        }
        return -ENOKEY;
}

int node_file_write_atomic(const char *path, const void *buf, size_t len,
                           unsigned mode, int replace)
{
        char tmp[4096];
        int fd, rc = 0;

        if (snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path) >=
            (int)sizeof(tmp))
                return -ENAMETOOLONG;
        fd = mkstemp(tmp);
        if (fd < 0)
                return -errno;
        if (fchmod(fd, (mode_t)mode) < 0 ||
            write(fd, buf, len) != (ssize_t)len || fsync(fd) < 0)
                rc = errno ? -errno : -EIO;
        if (close(fd) < 0 && rc == 0)
                rc = -errno;
        if (rc == 0 && replace && rename(tmp, path) < 0)
                rc = -errno;
        if (rc == 0 && !replace && link(tmp, path) < 0)
                rc = -errno;
        if (rc < 0 || !replace)
                unlink(tmp);
        return rc;
}

/* The list at path, if there is one: 0 with a->crl set (or left NULL
 * when the file does not exist yet). */
static int load_crl(struct node_authority *a, const char *path, char *err,
                    size_t errlen)
{
        struct gossip_crl l;
        long n;
        int v;

        if (!(a->crl = malloc(GOSSIP_CRL_MAX_BYTES)))
                return -ENOMEM;
        n = node_file_read(path, a->crl, GOSSIP_CRL_MAX_BYTES);
        if (n == -ENOENT) {
                free(a->crl);
                a->crl = NULL;
                return 0;
        }
        if (n < 0)
                return gn_fail(err, errlen, (int)n, "revocation list %s: %s",
                               path, strerror((int)-n));
        v = gossip_crl_verify(a->crl, (size_t)n, a->pk, &l);
        if (v != GOSSIP_CRL_OK)
                return gn_fail(err, errlen, -EINVAL,
                               "revocation list %s: not a list of this "
                               "authority (%s)",
                               path, gossip_crl_verdict_name(v));
        a->crl_len = (size_t)n;
        return 0;
}

static int verdict_errno(int v)
{
        switch (v) {
        case GOSSIP_CERT_EXPIRED:
        case GOSSIP_CERT_NOT_YET_VALID:
                return -EKEYEXPIRED;
        case GOSSIP_CERT_REVOKED:
                return -EKEYREVOKED;
        case GOSSIP_CERT_MALFORMED:
                return -EINVAL;
        }
        return -EKEYREJECTED;
}

static int load_cert(struct node_authority *a, const char *path,
                     const uint8_t *self_pk, uint64_t now, char *err,
                     size_t errlen)
{
        struct gossip_crl l, *lp = NULL;
        long n;
        int v;

        n = node_file_read(path, a->cert, sizeof(a->cert));
        if (n < 0)
                return gn_fail(err, errlen, (int)n, "--cert %s: %s", path,
                               n == -EFBIG ? "too long for a certificate"
                                           : strerror((int)-n));
        if (a->crl_len &&
            gossip_crl_decode(a->crl, a->crl_len, &l, NULL) == GOSSIP_CRL_OK)
                lp = &l;
        v = gossip_cert_verify(a->cert, (size_t)n, a->pk, now, now != 0, lp,
                               &a->c);
        if (v != GOSSIP_CERT_OK)
                return gn_fail(err, errlen, verdict_errno(v),
                               "--cert %s: refused under --authority: %s", path,
                               gossip_cert_verdict_name(v));
        if (self_pk && memcmp(a->c.pk, self_pk, GOSSIP_KEY_BYTES) != 0) {
                char id[NODE_KEY_ID_SIZE], ours[NODE_KEY_ID_SIZE];

                node_key_id(a->c.pk, id);
                node_key_id(self_pk, ours);
                return gn_fail(err, errlen, -EKEYREJECTED,
                               "--cert %s: issued for key id %s, not this "
                               "node's key (key id %s)",
                               path, id, ours);
        }
        a->cert_len = (size_t)n;
        return 0;
}

int node_authority_load(struct node_authority *a, const char *authority_path,
                        const char *cert_path, const char *crl_path,
                        const uint8_t *self_pk, uint64_t now, char *err,
                        size_t errlen)
{
        int rc;

        memset(a, 0, sizeof(*a));
        rc = node_authority_pub_load(authority_path, a->pk);
        if (rc)
                return gn_fail(
                    err, errlen, rc, "--authority %s: %s", authority_path,
                    rc == -ENOKEY ? "no public key in it" : strerror(-rc));
        if (crl_path && (rc = load_crl(a, crl_path, err, errlen)) != 0)
                goto out;
        if (cert_path)
                rc = load_cert(a, cert_path, self_pk, now, err, errlen);
out:
        if (rc)
                node_authority_free(a);
        return rc;
}

void node_authority_free(struct node_authority *a)
{
        if (!a)
                return;
        free(a->crl);
        a->crl = NULL;
        a->crl_len = 0;
}
