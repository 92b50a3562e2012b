/*
 * checkpoint.c - encode, decode, save and load model checkpoints.
 *
 * One format for disk and wire (docs/formats.md). The decoder trusts
 * nothing: it checks the fixed header, recomputes the total length from
 * the field sizes with overflow checks, requires it to equal the bytes
 * it was given, and verifies the BLAKE2b-256 trailer before it copies
 * anything out, so every allocation is bounded by the input's own size.
 * Non-finite floats are refused at both ends: a NaN model is worth
 * nothing and must not spread to a joining peer. Saving goes through
 * path.tmp.<pid> + fsync + rename + directory fsync, so a crash leaves
 * either the old file or the new one, never a torn one. Two threads of
 * one process must not save to the same path at once.
 */
#include "nn/checkpoint.h"
#include "base/gn_endian.h"
#include "base/gn_errbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

/* "GNCK" read as a little-endian u32. */
#define CKPT_MAGIC 0x4B434E47u
/* Bound on n_params and n_opt each, so that sizes cannot overflow;
 * 2^40 floats is 4 TiB, far beyond any model this runs. */
#define CKPT_MAX_FLOATS (1ull << 40)

_Static_assert(NN_CKPT_DIGEST_SIZE >= crypto_generichash_BYTES_MIN &&
                   NN_CKPT_DIGEST_SIZE <= crypto_generichash_BYTES_MAX,
               "digest size must be a valid BLAKE2b output length");
_Static_assert(sizeof(float) == 4, "fp32 floats are assumed");

/* Floats as little-endian fp32, whatever the host order. */
static void put_floats(uint8_t *p, const float *f, uint64_t n)
{
        uint64_t i;
        uint32_t u;

        for (i = 0; i < n; i++) {
                memcpy(&u, &f[i], 4);
                gn_le32_put(p + 4 * i, u);
        }
}

static void get_floats(float *f, const uint8_t *p, uint64_t n)
{
        uint64_t i;
        uint32_t u;

        for (i = 0; i < n; i++) {
                u = gn_le32_get(p + 4 * i);
                memcpy(&f[i], &u, 4);
        }
}

/* Index of the first non-finite float, or n if all are finite. */
static uint64_t first_nonfinite(const float *f, uint64_t n)
{
        uint64_t i;

        for (i = 0; i < n; i++)
                if (!isfinite(f[i]))
                        return i;
        return n;
}

/* Total encoded size for these field sizes, or 0 if one breaks a
 * bound (so the sum cannot overflow). */
static uint64_t total_size(uint64_t spec_len, uint64_t meta_len,
                           uint64_t n_params, uint64_t n_opt)
{
        if (spec_len == 0 || spec_len > NN_CKPT_SPEC_MAX ||
            meta_len > NN_CKPT_META_MAX || n_params > CKPT_MAX_FLOATS ||
            n_opt > CKPT_MAX_FLOATS)
                return 0;
        return NN_CKPT_HEADER_SIZE + spec_len + meta_len +
               4 * (n_params + n_opt) + NN_CKPT_DIGEST_SIZE;
}

static int digest(uint8_t out[NN_CKPT_DIGEST_SIZE], const uint8_t *buf,
                  size_t len)
{
        if (sodium_init() < 0)
                return NN_EIO;
        return crypto_generichash(out, NN_CKPT_DIGEST_SIZE, buf, len, NULL,
                                  0) == 0
                   ? 0
                   : NN_EIO;
}

/* A seal keeps BLAKE2b's state as bytes (any alignment: the struct may
 * live anywhere); each piece works on an aligned copy. */
_Static_assert(sizeof(crypto_generichash_state) ==
                   sizeof(((struct nn_ckpt_seal *)0)->hash),
               "nn_ckpt_seal holds BLAKE2b's state");

size_t nn_checkpoint_encoded_size(const struct nn_checkpoint *ck)
{
        uint64_t t;

        if (ck == NULL || ck->spec == NULL ||
            (ck->n_params && ck->params == NULL) ||
            (ck->n_opt && ck->opt == NULL) ||
            (ck->meta_len && ck->meta == NULL))
                return 0;
        t = total_size(strlen(ck->spec), ck->meta_len, ck->n_params, ck->n_opt);
        return t > SIZE_MAX ? 0 : (size_t)t;
}

int nn_checkpoint_encode_open(const struct nn_checkpoint *ck, void *buf,
                              size_t cap, size_t *len, struct nn_ckpt_seal *s)
{
        size_t total = nn_checkpoint_encoded_size(ck), sl;
        crypto_generichash_state h;
        uint8_t *p = buf;

        if (total == 0 || buf == NULL || s == NULL || cap < total ||
            first_nonfinite(ck->params, ck->n_params) != ck->n_params ||
            first_nonfinite(ck->opt, ck->n_opt) != ck->n_opt)
                return NN_EINVAL;
        if (sodium_init() < 0 ||
            crypto_generichash_init(&h, NULL, 0, NN_CKPT_DIGEST_SIZE) != 0)
                return NN_EIO;
        memcpy(s->hash, &h, sizeof(h));
        sl = strlen(ck->spec);
        gn_le32_put(p, CKPT_MAGIC);
        gn_le32_put(p + 4, NN_CKPT_VERSION);
        gn_le64_put(p + 8, total);
        gn_le64_put(p + 16, ck->step);
        gn_le64_put(p + 24, ck->epoch);
        gn_le64_put(p + 32, ck->seed);
        gn_le32_put(p + 40, (uint32_t)sl);
        gn_le32_put(p + 44, ck->meta_len);
        gn_le64_put(p + 48, ck->n_params);
        gn_le64_put(p + 56, ck->n_opt);
        p += NN_CKPT_HEADER_SIZE;
        memcpy(p, ck->spec, sl);
        p += sl;
        if (ck->meta_len)
                memcpy(p, ck->meta, ck->meta_len);
        p += ck->meta_len;
        put_floats(p, ck->params, ck->n_params);
        p += 4 * ck->n_params;
        put_floats(p, ck->opt, ck->n_opt);
        s->buf = buf;
        s->done = 0;
        s->body = total - NN_CKPT_DIGEST_SIZE;
        *len = total;
        return 0;
}

int nn_checkpoint_seal_some(struct nn_ckpt_seal *s, size_t max)
{
        crypto_generichash_state h;
        size_t n = s->body - s->done;

        if (n > max)
                n = max;
        memcpy(&h, s->hash, sizeof(h));
        if (crypto_generichash_update(&h, s->buf + s->done, n) != 0)
                return NN_EIO;
        s->done += n;
        if (s->done < s->body) {
                memcpy(s->hash, &h, sizeof(h));
                return 0;
        }
        return crypto_generichash_final(&h, s->buf + s->body,
                                        NN_CKPT_DIGEST_SIZE) == 0
                   ? 1
                   : NN_EIO;
}

int nn_checkpoint_encode(const struct nn_checkpoint *ck, void *buf, size_t cap,
                         size_t *len)
{
        struct nn_ckpt_seal s;
        int rc = nn_checkpoint_encode_open(ck, buf, cap, len, &s);

        if (rc == 0)
                rc = nn_checkpoint_seal_some(&s, SIZE_MAX);
        return rc < 0 ? rc : 0;
}

/* Checks the fixed header; sets *total. Messages are prefixed by name. */
static int check_header(const uint8_t *p, size_t len, const char *name,
                        uint64_t *total, char *err, size_t errlen)
{
        uint64_t want;

        if (len < NN_CKPT_HEADER_SIZE) {
                gn_seterr(err, errlen,
                          "%s: truncated: %zu bytes, the header alone is %d",
                          name, len, NN_CKPT_HEADER_SIZE);
                return NN_EFORMAT;
        }
        if (gn_le32_get(p) != CKPT_MAGIC) {
                gn_seterr(err, errlen,
                          "%s: not a gossipnode checkpoint (magic %02x %02x "
                          "%02x %02x, want \"GNCK\")",
                          name, p[0], p[1], p[2], p[3]);
                return NN_EFORMAT;
        }
        if (gn_le32_get(p + 4) != NN_CKPT_VERSION) {
                gn_seterr(err, errlen,
                          "%s: checkpoint format version %u, this build reads "
                          "version %d",
                          name, gn_le32_get(p + 4), NN_CKPT_VERSION);
                return NN_EFORMAT;
        }
        want = total_size(gn_le32_get(p + 40), gn_le32_get(p + 44),
                          gn_le64_get(p + 48), gn_le64_get(p + 56));
        if (want == 0 || want != gn_le64_get(p + 8)) {
                gn_seterr(err, errlen,
                          "%s: corrupt header: sizes (spec %u, meta %u, %llu + "
                          "%llu floats) do not add up to the stated %llu bytes",
                          name, gn_le32_get(p + 40), gn_le32_get(p + 44),
                          (unsigned long long)gn_le64_get(p + 48),
                          (unsigned long long)gn_le64_get(p + 56),
                          (unsigned long long)gn_le64_get(p + 8));
                return NN_EFORMAT;
        }
        *total = want;
        return 0;
}

int nn_checkpoint_peek_size(const void *buf, size_t len, uint64_t *total)
{
        if (buf == NULL || total == NULL)
                return NN_EINVAL;
        return check_header(buf, len, "checkpoint", total, NULL, 0);
}

/* Copies the verified body of p into freshly allocated arrays. */
static int copy_out(const uint8_t *p, struct nn_checkpoint *ck,
                    const char *name, char *err, size_t errlen)
{
        uint32_t sl = gn_le32_get(p + 40);
        const uint8_t *q = p + NN_CKPT_HEADER_SIZE;
        uint64_t bad;

        ck->step = gn_le64_get(p + 16);
        ck->epoch = gn_le64_get(p + 24);
        ck->seed = gn_le64_get(p + 32);
        ck->meta_len = gn_le32_get(p + 44);
        ck->n_params = gn_le64_get(p + 48);
        ck->n_opt = gn_le64_get(p + 56);
        if (memchr(q, 0, sl) != NULL) {
                gn_seterr(err, errlen, "%s: model spec holds a NUL byte", name);
                return NN_EFORMAT;
        }
        ck->spec = malloc(sl + 1);
        ck->meta = malloc(ck->meta_len ? ck->meta_len : 1);
        ck->params = malloc(ck->n_params ? 4 * ck->n_params : 1);
        ck->opt = malloc(ck->n_opt ? 4 * ck->n_opt : 1);
        if (!ck->spec || !ck->meta || !ck->params || !ck->opt) {
                gn_seterr(err, errlen, "%s: out of memory", name);
                return NN_ENOMEM;
        }
        memcpy(ck->spec, q, sl);
        ck->spec[sl] = '\0';
        q += sl;
        memcpy(ck->meta, q, ck->meta_len);
        q += ck->meta_len;
        get_floats(ck->params, q, ck->n_params);
        q += 4 * ck->n_params;
        get_floats(ck->opt, q, ck->n_opt);
        bad = first_nonfinite(ck->params, ck->n_params);
        if (bad != ck->n_params) {
                gn_seterr(err, errlen, "%s: parameter %llu is not finite", name,
                          (unsigned long long)bad);
                return NN_EFORMAT;
        }
        bad = first_nonfinite(ck->opt, ck->n_opt);
        if (bad != ck->n_opt) {
                gn_seterr(err, errlen, "%s: optimizer state %llu is not finite",
                          name, (unsigned long long)bad);
                return NN_EFORMAT;
        }
        return 0;
}

int nn_checkpoint_decode(const void *buf, size_t len, uint64_t max_floats,
                         const char *name, struct nn_checkpoint *out, char *err,
                         size_t errlen)
{
        uint8_t d[NN_CKPT_DIGEST_SIZE];
        const uint8_t *p = buf;
        uint64_t total, nf;
        int rc;

        memset(out, 0, sizeof(*out));
        if (name == NULL)
                name = "checkpoint";
        if (buf == NULL && len > 0)
                return NN_EINVAL;
        rc = check_header(p, len, name, &total, err, errlen);
        if (rc != 0)
                return rc;
        if (len != total) {
                gn_seterr(err, errlen,
                          len < total
                              ? "%s: truncated: header says %llu bytes, "
                                "have %zu"
                              : "%s: header says %llu bytes, have %zu "
                                "(trailing garbage)",
                          name, (unsigned long long)total, len);
                return NN_EFORMAT;
        }
        nf = gn_le64_get(p + 48) + gn_le64_get(p + 56);
        if (max_floats != 0 && nf > max_floats) {
                gn_seterr(err, errlen,
                          "%s: %llu floats, more than the limit of %llu", name,
                          (unsigned long long)nf,
                          (unsigned long long)max_floats);
                return NN_EFORMAT;
        }
        if (digest(d, p, len - NN_CKPT_DIGEST_SIZE) != 0) {
                gn_seterr(err, errlen, "%s: cannot compute BLAKE2b", name);
                return NN_EIO;
        }
        if (sodium_memcmp(d, p + len - NN_CKPT_DIGEST_SIZE,
                          NN_CKPT_DIGEST_SIZE) != 0) {
                gn_seterr(err, errlen,
                          "%s: checksum mismatch: the file is corrupt", name);
                return NN_ECHECKSUM;
        }
        rc = copy_out(p, out, name, err, errlen);
        if (rc != 0)
                nn_checkpoint_free(out);
        return rc;
}

int nn_checkpoint_check(const struct nn_checkpoint *ck, const char *spec,
                        uint64_t n_params, uint64_t n_opt, const char *name,
                        char *err, size_t errlen)
{
        if (name == NULL)
                name = "checkpoint";
        if (spec != NULL && strcmp(spec, ck->spec) != 0) {
                gn_seterr(err, errlen,
                          "%s: checkpoint is for model '%s', not '%s'", name,
                          ck->spec, spec);
                return NN_EMISMATCH;
        }
        if (n_params != UINT64_MAX && n_params != ck->n_params) {
                gn_seterr(err, errlen,
                          "%s: checkpoint has %llu parameters, the model %llu",
                          name, (unsigned long long)ck->n_params,
                          (unsigned long long)n_params);
                return NN_EMISMATCH;
        }
        if (n_opt != UINT64_MAX && n_opt != ck->n_opt) {
                gn_seterr(err, errlen,
                          "%s: checkpoint has %llu optimizer floats, the "
                          "optimizer %llu",
                          name, (unsigned long long)ck->n_opt,
                          (unsigned long long)n_opt);
                return NN_EMISMATCH;
        }
        return 0;
}

/* fsyncs the directory holding path, so the rename itself is durable. */
static int sync_dir(const char *path)
{
        char dir[PATH_MAX];
        const char *slash = strrchr(path, '/');
        int fd, rc;

        if (slash == NULL) {
                strcpy(dir, ".");
        } else if (slash == path) {
                strcpy(dir, "/");
        } else {
                if ((size_t)(slash - path) >= sizeof(dir))
                        return -ENAMETOOLONG;
                memcpy(dir, path, (size_t)(slash - path));
                dir[slash - path] = '\0';
        }
        fd = open(dir, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return -errno;
        rc = fsync(fd) == 0 ? 0 : -errno;
        close(fd);
        return rc;
}

/* Writes len bytes to a new file tmp and makes them durable. */
static int write_tmp(const char *tmp, const uint8_t *buf, size_t len, char *err,
                     size_t errlen)
{
        FILE *f = fopen(tmp, "wb");
        int rc = 0;

        if (f == NULL) {
                gn_seterr(err, errlen, "%s: cannot create: %s", tmp,
                          strerror(errno));
                return NN_EIO;
        }
        if (fwrite(buf, 1, len, f) != len || fflush(f) != 0 ||
            fsync(fileno(f)) != 0) {
                gn_seterr(err, errlen, "%s: cannot write: %s", tmp,
                          strerror(errno));
                rc = NN_EIO;
        }
        if (fclose(f) != 0 && rc == 0) {
                gn_seterr(err, errlen, "%s: cannot close: %s", tmp,
                          strerror(errno));
                rc = NN_EIO;
        }
        return rc;
}

/* The pid of a "<base>.tmp.<pid>" name, or 0 if name is not one. */
static long tmp_pid(const char *name, const char *base)
{
        size_t n = strlen(base);
        char *end;
        long pid;

        if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0)
                return 0;
        name += n + 5;
        if (*name < '0' || *name > '9')
                return 0;
        errno = 0;
        pid = strtol(name, &end, 10);
        return *end || errno || pid <= 0 ? 0 : pid;
}

int nn_checkpoint_clean_tmp(const char *path)
{
        char dir[PATH_MAX], victim[PATH_MAX];
        const char *slash = path ? strrchr(path, '/') : NULL;
        const char *base = slash ? slash + 1 : path;
        struct dirent *e;
        DIR *d;
        int removed = 0;

        if (path == NULL || !*base)
                return NN_EINVAL;
        if (!slash)
                snprintf(dir, sizeof(dir), ".");
        else if (slash == path)
                snprintf(dir, sizeof(dir), "/");
        else if ((size_t)(slash - path) < sizeof(dir))
                snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
        else
                return NN_EINVAL;
        d = opendir(dir);
        if (!d)
                return NN_EIO;
        while ((e = readdir(d)) != NULL) {
                long pid = tmp_pid(e->d_name, base);
                if (pid == 0 || pid == (long)getpid())
                        continue;
                /* a writer that is still running keeps its file */
                if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
                        continue;
                if (snprintf(victim, sizeof(victim), "%s/%s", dir, e->d_name) <
                        (int)sizeof(victim) &&
                    unlink(victim) == 0)
                        removed++;
        }
        closedir(d);
        return removed;
}

int nn_checkpoint_save(const char *path, const struct nn_checkpoint *ck,
                       char *err, size_t errlen)
{
        char tmp[PATH_MAX];
        size_t total, len = 0;
        uint8_t *buf = NULL;
        int n, rc, made = 0;

        if (path == NULL || ck == NULL) {
                gn_seterr(err, errlen, "nn_checkpoint_save: no path");
                return NN_EINVAL;
        }
        total = nn_checkpoint_encoded_size(ck);
        n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
        if (total == 0 || n < 0 || (size_t)n >= sizeof(tmp)) {
                gn_seterr(err, errlen,
                          "%s: refusing to save: spec, metadata or path out of "
                          "bounds",
                          path);
                return NN_EINVAL;
        }
        buf = malloc(total);
        if (buf == NULL) {
                gn_seterr(err, errlen, "%s: out of memory for %zu bytes", path,
                          total);
                return NN_ENOMEM;
        }
        rc = nn_checkpoint_encode(ck, buf, total, &len);
        if (rc != 0) {
                gn_seterr(err, errlen,
                          "%s: refusing to save: a parameter or optimizer "
                          "float is not finite",
                          path);
                goto out;
        }
        made = 1;
        rc = write_tmp(tmp, buf, len, err, errlen);
        if (rc != 0)
                goto out;
        if (rename(tmp, path) != 0) {
                gn_seterr(err, errlen, "%s: cannot rename %s over it: %s", path,
                          tmp, strerror(errno));
                rc = NN_EIO;
                goto out;
        }
        made = 0;
        n = sync_dir(path);
        if (n != 0) {
                gn_seterr(err, errlen,
                          "%s: saved, but fsync of its directory failed: %s",
                          path, strerror(-n));
                rc = NN_EIO;
        }
out:
        if (made)
                unlink(tmp);
        free(buf);
        return rc;
}

/* Reads the whole of an open file whose header promises total bytes. */
static int read_file(FILE *f, const char *path, uint8_t **out, size_t *len,
                     char *err, size_t errlen)
{
        uint8_t h[NN_CKPT_HEADER_SIZE];
        struct stat st;
        uint64_t total;
        size_t got;
        int rc;

        *out = NULL;
        if (fstat(fileno(f), &st) != 0) {
                gn_seterr(err, errlen, "%s: cannot stat: %s", path,
                          strerror(errno));
                return NN_EIO;
        }
        got = fread(h, 1, sizeof(h), f);
        rc = check_header(h, got, path, &total, err, errlen);
        if (rc != 0)
                return rc;
        if ((uint64_t)st.st_size != total) {
                gn_seterr(err, errlen,
                          (uint64_t)st.st_size < total
                              ? "%s: truncated: header says %llu bytes, "
                                "file holds %lld"
                              : "%s: header says %llu bytes, file holds "
                                "%lld (trailing garbage)",
                          path, (unsigned long long)total,
                          (long long)st.st_size);
                return NN_EFORMAT;
        }
        *out = malloc((size_t)total);
        if (*out == NULL) {
                gn_seterr(err, errlen, "%s: out of memory", path);
                return NN_ENOMEM;
        }
        memcpy(*out, h, sizeof(h));
        got += fread(*out + sizeof(h), 1, (size_t)total - sizeof(h), f);
        *len = got;
        if (ferror(f)) {
                gn_seterr(err, errlen, "%s: read error: %s", path,
                          strerror(errno));
                return NN_EIO;
        }
        return 0;
}

int nn_checkpoint_load(const char *path, struct nn_checkpoint *out, char *err,
                       size_t errlen)
{
        uint8_t *buf = NULL;
        size_t len = 0;
        FILE *f;
        int rc;

        memset(out, 0, sizeof(*out));
        if (path == NULL) {
                gn_seterr(err, errlen, "nn_checkpoint_load: no path");
                return NN_EINVAL;
        }
        f = fopen(path, "rb");
        if (f == NULL) {
                gn_seterr(err, errlen, "%s: cannot open: %s", path,
                          strerror(errno));
                return NN_EIO;
        }
        rc = read_file(f, path, &buf, &len, err, errlen);
        fclose(f);
        if (rc == 0)
                rc = nn_checkpoint_decode(buf, len, 0, path, out, err, errlen);
        free(buf);
        return rc;
}

int nn_checkpoint_load_expect(const char *path, const char *spec,
                              uint64_t n_params, uint64_t n_opt,
                              struct nn_checkpoint *out, char *err,
                              size_t errlen)
{
        int rc = nn_checkpoint_load(path, out, err, errlen);

        if (rc == 0) {
                rc = nn_checkpoint_check(out, spec, n_params, n_opt, path, err,
                                         errlen);
                if (rc != 0)
                        nn_checkpoint_free(out);
        }
        return rc;
}

void nn_checkpoint_free(struct nn_checkpoint *ck)
{
        if (ck == NULL)
                return;
        free(ck->spec);
        free(ck->params);
        free(ck->opt);
        free(ck->meta);
        memset(ck, 0, sizeof(*ck));
}
