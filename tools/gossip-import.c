/*
 * gossip-import - turns a user's images into the IDX files gossipnode
 * reads, so a node can train on its own data (--data DIR).
 *
 *   gossip-import --out DIR --train SRC [--test SRC]
 *   gossip-import --version
 *
 * SRC is either a directory with one sub-directory per class (the
 * sub-directories sorted by name are labels 0, 1, ...; each holds .png
 * or .pgm images, all of one size) or a .csv file of lines
 * "label,p1,p2,...,pN" (label 0..255, pixels 0..255, N = rows*cols of a
 * square image unless --shape RxC says otherwise; a first line that does
 * not start with a digit is a header and skipped). DIR receives
 * train-images-idx3-ubyte, train-labels-idx1-ubyte (t10k-* for --test)
 * and, for folders, classes.txt (label and name a line). PNGs are read
 * through libpng and reduced to 8-bit grey (colour through libpng's
 * rgb-to-grey with its default weights, alpha dropped, 16-bit stripped);
 * PGM is P5 or P2, maxval 1..255 (scaled to 0..255) or 65535-free.
 *
 * Every refusal is one line naming the file (and line, for CSV) and what
 * is wrong; nothing is written to DIR unless every input was read.
 * Exit status: 0 done, 1 bad input or I/O error, 2 usage.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <png.h>

#include "base/gn_endian.h"
#include "base/gn_errbuf.h"
#include <setjmp.h>

enum {
        CLASSES_MAX = 256,      /* labels are bytes */
        SIDE_MAX = 4096,        /* rows, cols */
        IMAGES_MAX = 10000000,  /* per part */
        CSV_LINE_MAX = 1 << 20, /* bytes of one CSV line */
        NAME_MAX_LEN = 255,     /* a class directory's name */
};

struct set {
        uint32_t n, cap, rows, cols;
        uint8_t *px, *labels;
        char names[CLASSES_MAX][NAME_MAX_LEN + 1];
        int classes; /* folders: how many; CSV: 0 */
};

static char g_err[PATH_MAX + 512];

/* The one line main() prints on failure (gn_vseterr, base/). */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail(const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        gn_vseterr(g_err, sizeof(g_err), fmt, ap);
        va_end(ap);
        return -1;
}

/* Appends one image of rows x cols; the first image fixes the size. */
static int set_add(struct set *s, const char *what, uint32_t rows,
                   uint32_t cols, const uint8_t *px, int label)
{
        size_t sz = (size_t)rows * cols;

        if (s->n == 0 && !s->rows) {
                s->rows = rows;
                s->cols = cols;
        } else if (rows != s->rows || cols != s->cols) {
                return fail("%s: %u rows x %u columns, but earlier images "
                            "are %u x %u",
                            what, rows, cols, s->rows, s->cols);
        }
        if (s->n >= IMAGES_MAX)
                return fail("%s: more than %d images", what, IMAGES_MAX);
        if (s->n == s->cap) {
                uint32_t nc = s->cap ? s->cap * 2 : 1024;
                uint8_t *p = realloc(s->px, (size_t)nc * sz), *l;

                if (p)
                        s->px = p;
                l = p ? realloc(s->labels, nc) : NULL;
                if (!l)
                        return fail("%s: out of memory", what);
                s->labels = l;
                s->cap = nc;
        }
        memcpy(s->px + (size_t)s->n * sz, px, sz);
        s->labels[s->n++] = (uint8_t)label;
        return 0;
}

/* ---- PNG --------------------------------------------------------------- */

struct png_ctx {
        jmp_buf jb;
        char msg[200];
};

static void png_on_error(png_structp png, png_const_charp msg)
{
        struct png_ctx *c = png_get_error_ptr(png);

        snprintf(c->msg, sizeof(c->msg), "%s", msg);
        longjmp(c->jb, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
        (void)png;
        (void)msg;
}

/* Reads path as 8-bit grey into s. volatile: they live across setjmp. */
static int read_png(struct set *s, const char *path, int label)
{
        struct png_ctx ctx = {.msg = ""};
        png_structp png = NULL;
        png_infop info = NULL;
        uint8_t *volatile px = NULL;
        png_bytep *volatile rows = NULL;
        FILE *volatile f = fopen(path, "rb");
        uint32_t w, h;
        int rc = -1;

        if (!f)
                return fail("%s: cannot open: %s", path, strerror(errno));
        png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ctx, png_on_error,
                                     png_on_warning);
        info = png ? png_create_info_struct(png) : NULL;
        if (!info) {
                fail("%s: out of memory", path);
                goto out;
        }
        if (setjmp(ctx.jb)) {
                fail("%s: not a readable PNG: %s", path, ctx.msg);
                goto out;
        }
        png_init_io(png, f);
        png_read_info(png, info);
        w = png_get_image_width(png, info);
        h = png_get_image_height(png, info);
        if (w > SIDE_MAX || h > SIDE_MAX) {
                fail("%s: %ux%u pixels, more than %d a side", path, w, h,
                     SIDE_MAX);
                goto out;
        }
        png_set_expand(png);   /* palette, low-bit grey -> 8 bit */
        png_set_strip_16(png); /* 16 -> 8 bit */
        png_set_strip_alpha(png);
        if (png_get_color_type(png, info) & PNG_COLOR_MASK_COLOR)
                png_set_rgb_to_gray_fixed(png, 1, -1, -1);
        png_read_update_info(png, info);
        if (png_get_rowbytes(png, info) != w) {
                fail("%s: cannot reduce to one 8-bit channel", path);
                goto out;
        }
        px = malloc((size_t)w * h);
        rows = malloc(sizeof(png_bytep) * h);
        if (!px || !rows) {
                fail("%s: out of memory", path);
                goto out;
        }
        for (uint32_t r = 0; r < h; r++)
                rows[r] = px + (size_t)r * w;
        png_read_image(png, rows);
        png_read_end(png, NULL);
        rc = set_add(s, path, h, w, px, label);
out:
        png_destroy_read_struct(png ? &png : NULL, info ? &info : NULL, NULL);
        free(px);
        free(rows);
        fclose(f);
        return rc;
}

/* ---- PGM --------------------------------------------------------------- */

/* Next header number, skipping white space and # comments; -1 at EOF or
 * on a non-digit. */
static long pgm_num(FILE *f)
{
        long v = -1;
        int ch;

        while ((ch = fgetc(f)) != EOF) {
                if (ch == '#') {
                        while ((ch = fgetc(f)) != EOF && ch != '\n')
                                ;
                } else if (!isspace(ch)) {
                        break;
                }
        }
        if (ch == EOF || !isdigit(ch))
                return -1;
        for (v = 0; ch != EOF && isdigit(ch); ch = fgetc(f)) {
                v = v * 10 + (ch - '0');
                if (v > 1000000)
                        return -1;
        }
        if (ch != EOF && !isspace(ch))
                return -1;
        return v;
}

static int pgm_pixels(FILE *f, const char *path, int ascii, long maxv,
                      uint8_t *px, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                long v = ascii ? pgm_num(f) : (long)fgetc(f);

                if (v < 0 || v == EOF)
                        return fail("%s: pixel %zu of %zu missing or not a "
                                    "number",
                                    path, i, n);
                if (v > maxv)
                        return fail("%s: pixel %zu is %ld, above maxval %ld",
                                    path, i, v, maxv);
                px[i] = (uint8_t)((v * 255 + maxv / 2) / maxv);
        }
        return 0;
}

static int read_pgm(struct set *s, const char *path, int label)
{
        FILE *f = fopen(path, "rb");
        char magic[2];
        long w, h, maxv;
        uint8_t *px = NULL;
        int rc = -1;

        if (!f)
                return fail("%s: cannot open: %s", path, strerror(errno));
        if (fread(magic, 1, 2, f) != 2 || magic[0] != 'P' ||
            (magic[1] != '5' && magic[1] != '2')) {
                fail("%s: not a PGM file (want magic P5 or P2)", path);
                goto out;
        }
        w = pgm_num(f);
        h = pgm_num(f);
        maxv = pgm_num(f);
        if (w < 1 || h < 1 || w > SIDE_MAX || h > SIDE_MAX || maxv < 1 ||
            maxv > 255) {
                fail("%s: bad PGM header (width %ld, height %ld, maxval %ld; "
                     "want 1..%d a side, maxval 1..255)",
                     path, w, h, maxv, SIDE_MAX);
                goto out;
        }
        px = malloc((size_t)w * h);
        if (!px) {
                fail("%s: out of memory", path);
                goto out;
        }
        if (pgm_pixels(f, path, magic[1] == '2', maxv, px, (size_t)w * h))
                goto out;
        rc = set_add(s, path, (uint32_t)h, (uint32_t)w, px, label);
out:
        free(px);
        fclose(f);
        return rc;
}

/* ---- folders ----------------------------------------------------------- */

/* dir/name into buf (PATH_MAX bytes). */
static int join(char *buf, const char *dir, const char *name)
{
        int n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);

        if (n < 0 || n >= PATH_MAX)
                return fail("%s/%s: path too long", dir, name);
        return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
        return strcmp((*a)->d_name, (*b)->d_name);
}

static int visible(const struct dirent *d)
{
        return d->d_name[0] != '.';
}

static int has_ext(const char *name, const char *ext)
{
        size_t n = strlen(name), e = strlen(ext);

        return n > e && strcasecmp(name + n - e, ext) == 0;
}

/* Reads every image of class directory dir as label. */
static int read_class(struct set *s, const char *dir, int label)
{
        struct dirent **ents = NULL;
        char path[PATH_MAX];
        int n = scandir(dir, &ents, visible, by_name), rc = 0;

        if (n < 0)
                return fail("%s: cannot list: %s", dir, strerror(errno));
        if (n == 0)
                rc = fail("%s: no images in this class directory", dir);
        for (int i = 0; i < n && !rc; i++) {
                const char *nm = ents[i]->d_name;

                if (join(path, dir, nm))
                        rc = -1;
                else if (has_ext(nm, ".png"))
                        rc = read_png(s, path, label);
                else if (has_ext(nm, ".pgm"))
                        rc = read_pgm(s, path, label);
                else
                        rc = fail("%s: not a .png or .pgm file", path);
        }
        for (int i = 0; i < n; i++)
                free(ents[i]);
        free(ents);
        return rc;
}

static int is_dir(const char *path)
{
        struct stat st;

        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A folder of class folders. names (if non-NULL, from the training
 * part) must match this folder's class names one for one. */
static int read_folders(struct set *s, const char *src, const struct set *ref)
{
        struct dirent **ents = NULL;
        char path[PATH_MAX];
        int n = scandir(src, &ents, visible, by_name), rc = 0, k = 0;

        if (n < 0)
                return fail("%s: cannot list: %s", src, strerror(errno));
        for (int i = 0; i < n && !rc; i++) {
                if (join(path, src, ents[i]->d_name))
                        rc = -1;
                else if (!is_dir(path))
                        rc = fail("%s: not a class directory (want one "
                                  "sub-directory per class)",
                                  path);
                else if (k == CLASSES_MAX)
                        rc = fail("%s: more than %d classes", src, CLASSES_MAX);
                else if (strlen(ents[i]->d_name) > NAME_MAX_LEN)
                        rc = fail("%s: class name too long", path);
                else if (ref && (k >= ref->classes ||
                                 strcmp(ref->names[k], ents[i]->d_name)))
                        rc = fail("%s: class '%s' is not class %d of the "
                                  "training data ('%s')",
                                  path, ents[i]->d_name, k,
                                  k < ref->classes ? ref->names[k] : "none");
                else {
                        strcpy(s->names[k], ents[i]->d_name);
                        rc = read_class(s, path, k++);
                }
        }
        if (!rc && ref && k != ref->classes)
                rc = fail("%s: %d classes, the training data has %d", src, k,
                          ref->classes);
        if (!rc && k < 2)
                rc = fail("%s: %d class directories, want at least 2", src, k);
        s->classes = k;
        for (int i = 0; i < n; i++)
                free(ents[i]);
        free(ents);
        return rc;
}

/* ---- CSV --------------------------------------------------------------- */

/* One number 0..255 at *p followed by ',' or the end; advances *p. */
static int csv_byte(char **p, long *v)
{
        char *s = *p, *end;

        while (*s == ' ' || *s == '\t')
                s++;
        if (!isdigit((unsigned char)*s))
                return -1;
        errno = 0;
        *v = strtol(s, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\r')
                end++;
        if (errno || *v > 255 || (*end != ',' && *end != '\0'))
                return -1;
        *p = *end == ',' ? end + 1 : end;
        return 0;
}

/* One CSV line into px (want pixels); -1 with the message set. */
static int csv_line(char *line, const char *src, long lineno, uint8_t *px,
                    size_t want, int *label)
{
        char *p = line;
        size_t i = 0;
        long v;

        if (csv_byte(&p, &v))
                return fail("%s:%ld: label is not a number 0..255", src,
                            lineno);
        *label = (int)v;
        for (; *p; i++) {
                if (i == want)
                        return fail("%s:%ld: more than %zu pixels", src, lineno,
                                    want);
                if (csv_byte(&p, &v))
                        return fail("%s:%ld: field %zu is not a pixel value "
                                    "0..255",
                                    src, lineno, i + 2);
                px[i] = (uint8_t)v;
        }
        if (i != want)
                return fail("%s:%ld: %zu pixels, want %zu", src, lineno, i,
                            want);
        return 0;
}

/* Pixels in a line: commas after the label. */
static size_t csv_fields(const char *line)
{
        size_t n = 0;

        for (; *line; line++)
                n += *line == ',';
        return n;
}

static int read_csv(struct set *s, const char *src, uint32_t rows,
                    uint32_t cols)
{
        FILE *f = fopen(src, "r");
        char *line = malloc(CSV_LINE_MAX);
        uint8_t *px = NULL;
        size_t want = 0;
        long lineno = 0;
        int rc = 0, label = 0;

        if (!f || !line) {
                rc = fail("%s: cannot open: %s", src, strerror(errno));
                goto out;
        }
        while (!rc && fgets(line, CSV_LINE_MAX, f)) {
                size_t len = strlen(line);

                lineno++;
                if (len == CSV_LINE_MAX - 1 && line[len - 1] != '\n') {
                        rc = fail("%s:%ld: line longer than %d bytes", src,
                                  lineno, CSV_LINE_MAX);
                        break;
                }
                while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
                        line[--len] = '\0';
                if (len == 0 || (lineno == 1 && !isdigit((unsigned char)*line)))
                        continue; /* blank line or header */
                if (!px) {
                        want = rows ? (size_t)rows * cols : csv_fields(line);
                        if (!rows) {
                                for (cols = 1; (size_t)cols * cols < want;)
                                        cols++;
                                rows = cols;
                        }
                        if (want == 0 || (size_t)rows * cols != want ||
                            rows > SIDE_MAX) {
                                rc = fail("%s:%ld: %zu pixels is not a square "
                                          "image (give --shape RxC)",
                                          src, lineno, want);
                                break;
                        }
                        px = malloc(want);
                        if (!px) {
                                rc = fail("%s: out of memory", src);
                                break;
                        }
                }
                rc = csv_line(line, src, lineno, px, want, &label);
                if (!rc)
                        rc = set_add(s, src, rows, cols, px, label);
        }
        if (!rc && ferror(f))
                rc = fail("%s: read error", src);
        if (!rc && s->n == 0)
                rc = fail("%s: no data lines", src);
out:
        if (f)
                fclose(f);
        free(line);
        free(px);
        return rc;
}

/* ---- IDX out ----------------------------------------------------------- */

static int write_file(const char *dir, const char *name, const uint8_t *h,
                      size_t hl, const uint8_t *body, size_t bl)
{
        char path[PATH_MAX];
        FILE *f;
        int bad;

        if (join(path, dir, name))
                return -1;
        f = fopen(path, "wb");
        if (!f)
                return fail("%s: cannot create: %s", path, strerror(errno));
        bad = fwrite(h, 1, hl, f) != hl || (bl && fwrite(body, 1, bl, f) != bl);
        if (fclose(f) || bad)
                return fail("%s: write error: %s", path, strerror(errno));
        return 0;
}

static int write_idx(const char *dir, const char *prefix, const struct set *s)
{
        uint8_t hi[16], hl[8];
        char name[64];

        gn_be32_put(hi, 0x00000803);
        gn_be32_put(hi + 4, s->n);
        gn_be32_put(hi + 8, s->rows);
        gn_be32_put(hi + 12, s->cols);
        gn_be32_put(hl, 0x00000801);
        gn_be32_put(hl + 4, s->n);
        snprintf(name, sizeof(name), "%s-images-idx3-ubyte", prefix);
        if (write_file(dir, name, hi, 16, s->px,
                       (size_t)s->n * s->rows * s->cols))
                return -1;
        snprintf(name, sizeof(name), "%s-labels-idx1-ubyte", prefix);
        return write_file(dir, name, hl, 8, s->labels, s->n);
}

static int write_classes(const char *dir, const struct set *s)
{
        char path[PATH_MAX];
        FILE *f;
        int bad = 0;

        if (join(path, dir, "classes.txt"))
                return -1;
        f = fopen(path, "w");
        if (!f)
                return fail("%s: cannot create: %s", path, strerror(errno));
        for (int c = 0; c < s->classes; c++)
                bad |= fprintf(f, "%d %s\n", c, s->names[c]) < 0;
        if (fclose(f) || bad)
                return fail("%s: write error", path);
        return 0;
}

/* ---- main -------------------------------------------------------------- */

static int read_source(struct set *s, const char *src, const struct set *ref,
                       uint32_t rows, uint32_t cols)
{
        if (is_dir(src))
                return read_folders(s, src, ref);
        if (has_ext(src, ".csv"))
                return read_csv(s, src, rows, cols);
        return fail("%s: neither a directory of class folders nor a .csv "
                    "file",
                    src);
}

static int usage(void)
{
        fprintf(stderr, "usage: gossip-import --out DIR --train SRC [--test "
                        "SRC] [--shape RxC]\n"
                        "       gossip-import --version\n"
                        "  SRC: a directory with one sub-directory of .png/"
                        ".pgm images per class,\n"
                        "       or a .csv file of lines label,p1,...,pN\n");
        return 2;
}

static void describe(const char *what, const struct set *s)
{
        uint32_t hist[CLASSES_MAX] = {0};
        int top = 0;

        for (uint32_t i = 0; i < s->n; i++) {
                hist[s->labels[i]]++;
                if (s->labels[i] >= top)
                        top = s->labels[i] + 1;
        }
        printf("%s: %u images of %u rows x %u columns; images per label:", what,
               s->n, s->rows, s->cols);
        for (int c = 0; c < top; c++)
                printf(" %u", hist[c]);
        printf("\n");
}

int main(int argc, char **argv)
{
        const char *out = NULL, *train = NULL, *test = NULL;
        static struct set tr, te;
        unsigned rows = 0, cols = 0;
        int rc = 1;

        if (argc == 2 && strcmp(argv[1], "--version") == 0) {
                printf("gossip-import %s\n", GN_VERSION);
                return 0;
        }
        for (int i = 1; i + 1 < argc; i += 2) {
                if (strcmp(argv[i], "--out") == 0)
                        out = argv[i + 1];
                else if (strcmp(argv[i], "--train") == 0)
                        train = argv[i + 1];
                else if (strcmp(argv[i], "--test") == 0)
                        test = argv[i + 1];
                else if (strcmp(argv[i], "--shape") == 0 &&
                         sscanf(argv[i + 1], "%ux%u", &rows, &cols) == 2 &&
                         rows >= 1 && cols >= 1 && rows <= SIDE_MAX &&
                         cols <= SIDE_MAX)
                        continue;
                else
                        return usage();
        }
        if (argc % 2 == 0 || !out || !train)
                return usage();
        if (read_source(&tr, train, NULL, rows, cols) ||
            (test &&
             read_source(&te, test, tr.classes ? &tr : NULL, rows, cols)))
                goto out;
        if (test && (te.rows != tr.rows || te.cols != tr.cols)) {
                fail("%s: images of %ux%u, the training images are %ux%u", test,
                     te.cols, te.rows, tr.cols, tr.rows);
                goto out;
        }
        if (mkdir(out, 0755) && errno != EEXIST) {
                fail("%s: cannot create: %s", out, strerror(errno));
                goto out;
        }
        if (write_idx(out, "train", &tr) ||
            (test && write_idx(out, "t10k", &te)) ||
            (tr.classes && write_classes(out, &tr)))
                goto out;
        describe("train", &tr);
        if (test)
                describe("test", &te);
        rc = 0;
out:
        if (rc)
                fprintf(stderr, "gossip-import: %s\n", g_err);
        free(tr.px);
        free(tr.labels);
        free(te.px);
        free(te.labels);
        return rc;
}
