/*
 * replay_main.c - a plain-C driver for libFuzzer targets, so that every
 * fuzz target also runs in ordinary ctest without clang: its seed corpus
 * (built-in gn_fuzz_seeds() plus files in the directories named on the
 * command line), then a fixed number of random and mutated inputs from a
 * fixed seed. There is no coverage feedback: this is a smoke test that the
 * target's oracles hold on inputs near valid ones, replayable by seed; the
 * real fuzzing is the libFuzzer build (GN_FUZZ=ON).
 *
 *   replay_fuzz_x [-n ITER] [DIR|FILE ...]   run (GN_SEED picks the seed)
 *   replay_fuzz_x --write-corpus DIR         write the built-in seeds
 *
 * Every input is copied into an exact-size heap block, as libFuzzer does,
 * so that ASan catches reads past its end.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/gn_rng.h"
#include "test_seed.h"
#include "fuzz.h"

#pragma weak gn_fuzz_seeds

enum {
        DEFAULT_ITERATIONS = 3000,
        MAX_INPUT = 1 << 16, /* bytes, for random and mutated inputs */
        MAX_MUTATIONS = 8,   /* per mutated input */
        MAX_FILE = 64 << 20, /* corpus files above this are skipped */
};

struct input {
        uint8_t *p;
        size_t n;
};

struct corpus {
        struct input *v;
        size_t n, cap;
};

static uint64_t rng;

static uint64_t rnd(void)
{
        return gn_splitmix64(&rng);
}

static size_t below(size_t n)
{
        return n ? (size_t)(rnd() % n) : 0;
}

static void corpus_add(void *ctx, const uint8_t *data, size_t len)
{
        struct corpus *c = ctx;

        if (c->n == c->cap) {
                size_t cap = c->cap ? 2 * c->cap : 64;
                struct input *v = realloc(c->v, cap * sizeof(*v));

                if (!v)
                        abort();
                c->v = v;
                c->cap = cap;
        }
        c->v[c->n].p = malloc(len ? len : 1);
        if (!c->v[c->n].p)
                abort();
        memcpy(c->v[c->n].p, data, len);
        c->v[c->n].n = len;
        c->n++;
}

static void add_file(struct corpus *c, const char *path)
{
        FILE *fp = fopen(path, "rb");
        uint8_t *b = NULL;
        long n;

        if (!fp)
                return;
        if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 &&
            n <= MAX_FILE && fseek(fp, 0, SEEK_SET) == 0 &&
            (b = malloc((size_t)n + 1)) &&
            fread(b, 1, (size_t)n, fp) == (size_t)n)
                corpus_add(c, b, (size_t)n);
        free(b);
        fclose(fp);
}

static void add_path(struct corpus *c, const char *path)
{
        struct stat sb;
        struct dirent *e;
        DIR *d;

        if (stat(path, &sb) != 0)
                return;
        if (!S_ISDIR(sb.st_mode)) {
                add_file(c, path);
                return;
        }
        if (!(d = opendir(path)))
                return;
        while ((e = readdir(d))) {
                char full[4096];

                if (e->d_name[0] == '.')
                        continue;
                snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
                add_file(c, full);
        }
        closedir(d);
}

static void run_one(const uint8_t *data, size_t n)
{
        uint8_t *b = malloc(n ? n : 1);

        if (!b)
                abort();
        memcpy(b, data, n);
        LLVMFuzzerTestOneInput(b, n);
        free(b);
}

static const uint8_t interesting[] = {0x00, 0x01, 0x7f, 0x80, 0xff,
                                      0xc0, 0xc1, 0xdd, 0xdf, 0xc6};

/* Applies one random mutation to b[0..*n) (capacity MAX_INPUT). */
static void mutate(uint8_t *b, size_t *n, const struct corpus *c)
{
        size_t i = below(*n), k;

        switch (rnd() % 8) {
        case 0: /* flip a bit */
                if (*n)
                        b[i] ^= (uint8_t)(1u << below(8));
                break;
        case 1: /* random byte */
                if (*n)
                        b[i] = (uint8_t)rnd();
                break;
        case 2: /* interesting byte */
                if (*n)
                        b[i] = interesting[below(sizeof(interesting))];
                break;
        case 3: /* truncate */
                *n = below(*n + 1);
                break;
        case 4: /* insert random bytes */
                k = 1 + below(16);
                if (*n + k <= MAX_INPUT) {
                        memmove(b + i + k, b + i, *n - i);
                        for (size_t j = 0; j < k; j++)
                                b[i + j] = (uint8_t)rnd();
                        *n += k;
                }
                break;
        case 5: /* delete a range */
                k = below(*n - i + 1);
                memmove(b + i, b + i + k, *n - i - k);
                *n -= k;
                break;
        case 6: /* big-endian 32-bit interesting value (lengths, counts) */
                if (*n >= 4) {
                        static const uint32_t v[] = {0, 1, 0x7fffffff,
                                                     0xffffffff, 0x10000};
                        i = below(*n - 3);
                        uint32_t x = v[below(sizeof(v) / sizeof(v[0]))];
                        for (int j = 0; j < 4; j++)
                                b[i + j] = (uint8_t)(x >> (24 - 8 * j));
                }
                break;
        default: /* splice the tail of another input */
                if (c->n) {
                        const struct input *o = &c->v[below(c->n)];
                        size_t from = below(o->n + 1);
                        k = o->n - from;
                        if (i + k > MAX_INPUT)
                                k = MAX_INPUT - i;
                        memcpy(b + i, o->p + from, k);
                        *n = i + k;
                }
                break;
        }
}

static int write_corpus(const struct corpus *c, const char *dir)
{
        for (size_t i = 0; i < c->n; i++) {
                char path[4096];
                FILE *fp;

                snprintf(path, sizeof(path), "%s/seed-%03zu", dir, i);
                fp = fopen(path, "wb");
                if (!fp || fwrite(c->v[i].p, 1, c->v[i].n, fp) != c->v[i].n) {
                        perror(path);
                        if (fp)
                                fclose(fp);
                        return 1;
                }
                fclose(fp);
        }
        printf("wrote %zu seeds to %s\n", c->n, dir);
        return 0;
}

int main(int argc, char **argv)
{
        struct corpus c = {0};
        uint64_t seed;
        long iters = DEFAULT_ITERATIONS;
        uint8_t *b = malloc(MAX_INPUT);
        size_t n_seeds;
        int rc = 1;

        if (!b)
                goto out;
        if (gn_fuzz_seeds)
                gn_fuzz_seeds(corpus_add, &c);
        if (argc == 3 && !strcmp(argv[1], "--write-corpus")) {
                rc = write_corpus(&c, argv[2]);
                goto out;
        }
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "-n") && i + 1 < argc)
                        iters = strtol(argv[++i], NULL, 10);
                else
                        add_path(&c, argv[i]);
        }
        n_seeds = c.n;
        seed = gn_test_seed(argv[0], 1);
        fprintf(stderr, "%s: %zu corpus inputs, %ld more\n", argv[0], n_seeds,
                iters);
        rng = seed;
        for (size_t i = 0; i < n_seeds; i++)
                run_one(c.v[i].p, c.v[i].n);
        for (long it = 0; it < iters; it++) {
                size_t n;

                if (!n_seeds || rnd() % 8 == 0) {
                        n = below(rnd() % 4 ? 256 : MAX_INPUT);
                        for (size_t j = 0; j < n; j++)
                                b[j] = (uint8_t)rnd();
                } else {
                        const struct input *in = &c.v[below(n_seeds)];
                        n = in->n < MAX_INPUT ? in->n : MAX_INPUT;
                        memcpy(b, in->p, n);
                        for (size_t k = 1 + below(MAX_MUTATIONS); k; k--)
                                mutate(b, &n, &c);
                }
                run_one(b, n);
        }
        fprintf(stderr, "%s: ok\n", argv[0]);
        rc = 0;
out:
        for (size_t i = 0; i < c.n; i++)
                free(c.v[i].p);
        free(c.v);
        free(b);
        return rc;
}
