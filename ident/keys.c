/*
 * keys.c - Ed25519 key generation and the 0600 key file (see keys.h).
 *
 * The file is tiny and read in one go into a fixed buffer; every buffer that
 * ever holds secret bytes (file text, decoded key, base64 text) is a local
 * that is wiped with sodium_memzero before the function returns, on success
 * and failure alike. Writing never follows the "open, truncate, write"
 * pattern: a new file is created with O_EXCL, a forced replacement goes
 * through a mkstemp() temp file and rename(), so a crash never leaves a
 * half-written key where a good one was.
 */
#include "base/gn_errbuf.h"
#include "ident/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

/* A key file is three short lines; anything larger is not ours. */
#define KEY_FILE_MAX 4096
/* Base64 of the 64-byte secret key: 88 chars (+ NUL). */
#define SK_B64_LEN  88
#define SK_B64_SIZE (SK_B64_LEN + 1)

_Static_assert(sodium_base64_ENCODED_LEN(GOSSIP_KEY_BYTES,
                                         sodium_base64_VARIANT_ORIGINAL) ==
                   NODE_KEY_PK_B64_SIZE,
               "public key base64 size");
_Static_assert(sodium_base64_ENCODED_LEN(GOSSIP_SECRET_BYTES,
                                         sodium_base64_VARIANT_ORIGINAL) ==
                   SK_B64_SIZE,
               "secret key base64 size");
_Static_assert(crypto_sign_PUBLICKEYBYTES == GOSSIP_KEY_BYTES, "pk size");
_Static_assert(crypto_sign_SECRETKEYBYTES == GOSSIP_SECRET_BYTES, "sk size");

int node_key_init(void)
{
        return sodium_init() < 0 ? -EIO : 0;
}

int node_key_generate(uint8_t pk[GOSSIP_KEY_BYTES],
                      uint8_t sk[GOSSIP_SECRET_BYTES])
{
        if (node_key_init() < 0)
                return -EIO;
        return crypto_sign_keypair(pk, sk) == 0 ? 0 : -EIO;
}

void node_key_pk_to_base64(const uint8_t pk[GOSSIP_KEY_BYTES],
                           char out[NODE_KEY_PK_B64_SIZE])
{
        sodium_bin2base64(out, NODE_KEY_PK_B64_SIZE, pk, GOSSIP_KEY_BYTES,
                          sodium_base64_VARIANT_ORIGINAL);
}

int node_key_pk_from_base64(const char *s, size_t len,
                            uint8_t pk[GOSSIP_KEY_BYTES])
{
        size_t got = 0;
        const char *end = NULL;

        if (s == NULL || len != NODE_KEY_PK_B64_LEN)
                return -EINVAL;
        if (sodium_base642bin(pk, GOSSIP_KEY_BYTES, s, len, NULL, &got, &end,
                              sodium_base64_VARIANT_ORIGINAL) != 0 ||
            got != GOSSIP_KEY_BYTES || end != s + len) {
                memset(pk, 0, GOSSIP_KEY_BYTES);
                return -EINVAL;
        }
        /* the all-zero key and other non-points can never verify */
        if (!crypto_core_ed25519_is_valid_point(pk)) {
                memset(pk, 0, GOSSIP_KEY_BYTES);
                return -EDOM;
        }
        return 0;
}

void node_key_id(const uint8_t pk[GOSSIP_KEY_BYTES], char out[NODE_KEY_ID_SIZE])
{
        uint8_t h[crypto_generichash_BYTES];

        crypto_generichash(h, sizeof(h), pk, GOSSIP_KEY_BYTES, NULL, 0);
        sodium_bin2hex(out, NODE_KEY_ID_SIZE, h, (NODE_KEY_ID_SIZE - 1) / 2);
}

/* Write all of buf to fd, retrying on EINTR and short writes. */
static int write_all(int fd, const char *buf, size_t len)
{
        while (len > 0) {
                ssize_t w = write(fd, buf, len);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                buf += w;
                len -= (size_t)w;
        }
        return 0;
}

/* Render the key file text for sk into text (size KEY_FILE_MAX). */
static int render(const uint8_t sk[GOSSIP_SECRET_BYTES], char *text)
{
        char b64[SK_B64_SIZE];
        char id[NODE_KEY_ID_SIZE];
        int n;

        node_key_id(sk + 32, id);
        sodium_bin2base64(b64, sizeof(b64), sk, GOSSIP_SECRET_BYTES,
                          sodium_base64_VARIANT_ORIGINAL);
        n = snprintf(text, KEY_FILE_MAX,
                     "# gossipnode Ed25519 secret key - keep private "
                     "(mode 0600)\n%s %s %s\n",
                     NODE_KEY_TAG_SECRET, id, b64);
        sodium_memzero(b64, sizeof(b64));
        return n;
}

/* Create path (or a temp file beside it when force) and write text. */
static int write_new(const char *path, const char *text, size_t len, int force,
                     char *err, size_t errlen)
{
        char tmp[4096];
        int fd = -1, rc = 0;

        if (force) {
                if (snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path) >=
                    (int)sizeof(tmp))
                        return -ENAMETOOLONG;
                fd = mkstemp(tmp); /* 0600, O_EXCL */
        } else {
                fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        }
        if (fd < 0) {
                rc = -errno;
                if (rc == -EEXIST)
                        gn_seterr(err, errlen,
                                  "%s: already exists (refusing to overwrite "
                                  "a key; use --force)",
                                  path);
                else
                        gn_seterr(err, errlen, "%s: %s", path, strerror(-rc));
                return rc;
        }
        /* umask may have narrowed the mode; make it exactly 0600. */
        if (fchmod(fd, 0600) < 0 || (rc = write_all(fd, text, len)) < 0 ||
            fsync(fd) < 0) {
                rc = rc < 0 ? rc : -errno;
                goto out;
        }
        if (close(fd) < 0) {
                fd = -1;
                rc = -errno;
                goto out;
        }
        fd = -1;
        if (force && rename(tmp, path) < 0)
                rc = -errno;
out:
        if (fd >= 0)
                close(fd);
        if (rc < 0) {
                unlink(force ? tmp : path);
                gn_seterr(err, errlen, "%s: cannot write: %s", path,
                          strerror(-rc));
        }
        return rc;
}

int node_key_save(const char *path, const uint8_t sk[GOSSIP_SECRET_BYTES],
                  int force, char *err, size_t errlen)
{
        char text[KEY_FILE_MAX];
        int n, rc;

        if (path == NULL || sk == NULL)
                return -EINVAL;
        n = render(sk, text);
        if (n < 0 || n >= KEY_FILE_MAX) {
                rc = -EINVAL;
                goto out;
        }
        rc = write_new(path, text, (size_t)n, force, err, errlen);
out:
        sodium_memzero(text, sizeof(text));
        return rc;
}

/* Read the whole file at path into text (NUL-terminated), checking its
 * permissions first. Returns the length or negative errno. */
static int read_private(const char *path, char *text, char *err, size_t errlen)
{
        struct stat st;
        ssize_t got;
        size_t len = 0;
        int fd, rc = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                rc = -errno;
                gn_seterr(err, errlen, "%s: %s", path, strerror(-rc));
                return rc;
        }
        if (fstat(fd, &st) < 0) {
                rc = -errno;
                gn_seterr(err, errlen, "%s: %s", path, strerror(-rc));
                goto out;
        }
        if (!S_ISREG(st.st_mode)) {
                rc = -EINVAL;
                gn_seterr(err, errlen, "%s: not a regular file", path);
                goto out;
        }
        if (st.st_mode & 0077) {
                rc = -EACCES;
                gn_seterr(err, errlen,
                          "%s: permissions %04o are too open (the key must not "
                          "be accessible by group or others; chmod 600 %s)",
                          path, (unsigned)(st.st_mode & 07777), path);
                goto out;
        }
        for (;;) {
                got = read(fd, text + len, KEY_FILE_MAX - 1 - len);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got < 0) {
                        rc = -errno;
                        gn_seterr(err, errlen, "%s: %s", path, strerror(-rc));
                        goto out;
                }
                if (got == 0)
                        break;
                len += (size_t)got;
                if (len == KEY_FILE_MAX - 1) {
                        rc = -EINVAL;
                        gn_seterr(err, errlen, "%s: too large for a key file",
                                  path);
                        goto out;
                }
        }
        text[len] = '\0';
        rc = (int)len;
out:
        close(fd);
        return rc;
}

/* Find the key line in text: the first line that is neither blank nor a
 * comment. Splits it in place into tag, id and b64 (NUL-terminated). */
static int split_key_line(char *text, char **tag, char **id, char **b64)
{
        char *save = NULL, *line, *extra;

        for (line = strtok_r(text, "\n", &save); line != NULL;
             line = strtok_r(NULL, "\n", &save)) {
                line[strcspn(line, "\r")] = '\0';
                line += strspn(line, " \t");
                if (*line != '\0' && *line != '#')
                        break;
        }
        if (line == NULL)
                return -1;
        *tag = strtok_r(line, " \t", &save);
        *id = strtok_r(NULL, " \t", &save);
        *b64 = strtok_r(NULL, " \t", &save);
        extra = strtok_r(NULL, " \t", &save);
        return (*tag && *id && *b64 && !extra) ? 0 : -1;
}

/* Decode the key line fields into sk and check that its halves and key id
 * agree; pk gets the public half. */
static int decode_key(const char *path, const char *id, const char *b64,
                      uint8_t pk[GOSSIP_KEY_BYTES],
                      uint8_t sk[GOSSIP_SECRET_BYTES], char *err, size_t errlen)
{
        uint8_t seed_pk[GOSSIP_KEY_BYTES];
        uint8_t chk_sk[GOSSIP_SECRET_BYTES];
        char want_id[NODE_KEY_ID_SIZE];
        size_t got = 0, len = strlen(b64);
        const char *end = NULL;
        int rc = -EINVAL;

        if (len != SK_B64_LEN ||
            sodium_base642bin(sk, GOSSIP_SECRET_BYTES, b64, len, NULL, &got,
                              &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
            got != GOSSIP_SECRET_BYTES || end != b64 + len) {
                gn_seterr(err, errlen,
                          "%s: bad secret key (expected %d base64 chars of a "
                          "%d-byte key)",
                          path, SK_B64_LEN, GOSSIP_SECRET_BYTES);
                goto out;
        }
        crypto_sign_seed_keypair(seed_pk, chk_sk, sk);
        if (sodium_memcmp(seed_pk, sk + 32, GOSSIP_KEY_BYTES) != 0) {
                gn_seterr(err, errlen,
                          "%s: corrupt key (public half does not match the "
                          "secret seed)",
                          path);
                goto out;
        }
        node_key_id(seed_pk, want_id);
        if (strcmp(id, want_id) != 0) {
                gn_seterr(err, errlen,
                          "%s: key id %s does not match the key (expected %s)",
                          path, id, want_id);
                goto out;
        }
        memcpy(pk, seed_pk, GOSSIP_KEY_BYTES);
        rc = 0;
out:
        sodium_memzero(chk_sk, sizeof(chk_sk));
        return rc;
}

int node_key_load(const char *path, uint8_t pk[GOSSIP_KEY_BYTES],
                  uint8_t sk[GOSSIP_SECRET_BYTES], char *err, size_t errlen)
{
        char text[KEY_FILE_MAX];
        char *tag, *id, *b64;
        int rc;

        memset(pk, 0, GOSSIP_KEY_BYTES);
        memset(sk, 0, GOSSIP_SECRET_BYTES);
        if (node_key_init() < 0) {
                gn_seterr(err, errlen, "%s: libsodium failed to start", path);
                return -EIO;
        }
        rc = read_private(path, text, err, errlen);
        if (rc < 0)
                goto out;
        rc = -EINVAL;
        if (split_key_line(text, &tag, &id, &b64) < 0) {
                gn_seterr(err, errlen,
                          "%s: no key line (expected '%s <key id> <base64>')",
                          path, NODE_KEY_TAG_SECRET);
                goto out;
        }
        if (strcmp(tag, NODE_KEY_TAG_SECRET) != 0) {
                gn_seterr(err, errlen,
                          "%s: unknown key type '%.40s' (expected '%s')", path,
                          tag, NODE_KEY_TAG_SECRET);
                goto out;
        }
        rc = decode_key(path, id, b64, pk, sk, err, errlen);
out:
        if (rc < 0) {
                sodium_memzero(sk, GOSSIP_SECRET_BYTES);
                memset(pk, 0, GOSSIP_KEY_BYTES);
        }
        sodium_memzero(text, sizeof(text));
        return rc < 0 ? rc : 0;
}
