/*
 * partition.c - the seeded splits of partition.h: IID slices, Dirichlet
 * label skew and K classes per node, as one owner per sample.
 *
 * Everything random comes from one splitmix64 stream started from the
 * partition's seed, consumed in a fixed order (class permutation or
 * Dirichlet draws, then one shuffle per class), so the owner array is a
 * function of (scheme, seed, labels, count) alone. Gamma variates are
 * drawn in log space (Marsaglia-Tsang for shape >= 1, boosted by
 * U^(1/A) below 1) so that A = 0.001 does not underflow every share to
 * zero. Allocations: the per-class index lists (n words) and counters.
 */
#include "nn/partition.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gn_rng.h"

/* Uniform in (0, 1), never 0 or 1 (53 random bits). */
static double unit_open(uint64_t *s)
{
        return ((double)(gn_splitmix64(s) >> 11) + 0.5) * 0x1p-53;
}

/* Standard normal (Box-Muller, one of the pair). */
static double normal(uint64_t *s)
{
        double u = unit_open(s), v = unit_open(s);

        return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* log of a Gamma(a, 1) variate, a >= 1 (Marsaglia and Tsang 2000). */
static double log_gamma_ge1(uint64_t *s, double a)
{
        double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);

        for (;;) {
                double x = normal(s), v = 1.0 + c * x, u;

                if (v <= 0.0)
                        continue;
                v = v * v * v;
                u = unit_open(s);
                if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
                        return log(d) + log(v);
        }
}

/* log of a Gamma(a, 1) variate for any a > 0: Gamma(a) = Gamma(a + 1) *
 * U^(1/a), added in logs. */
static double log_gamma(uint64_t *s, double a)
{
        if (a >= 1.0)
                return log_gamma_ge1(s, a);
        return log_gamma_ge1(s, a + 1.0) + log(unit_open(s)) / a;
}

/* p[0..k) ~ Dirichlet(a, ..., a): normalised exp of log-gamma draws,
 * shifted by their maximum so the largest share is exp(0). */
static void dirichlet(uint64_t *s, double a, double *p, int k)
{
        double max = -HUGE_VAL, sum = 0.0;

        for (int j = 0; j < k; j++) {
                p[j] = log_gamma(s, a);
                if (p[j] > max)
                        max = p[j];
        }
        for (int j = 0; j < k; j++) {
                p[j] = exp(p[j] - max);
                sum += p[j];
        }
        for (int j = 0; j < k; j++)
                p[j] /= sum;
}

/* Fisher-Yates over v[0..n) from the stream. */
static void shuffle(uint64_t *s, uint32_t *v, uint32_t n)
{
        for (uint32_t i = n; i > 1; i--) {
                uint32_t j = (uint32_t)(gn_splitmix64(s) % i), t = v[i - 1];

                v[i - 1] = v[j];
                v[j] = t;
        }
}

/* The samples of each class, grouped: byclass[start[c] .. start[c+1]) are
 * class c's indices in a seeded shuffled order. */
struct groups {
        uint32_t *byclass;
        uint32_t *start; /* classes + 1 entries */
};

static int groups_make(struct groups *g, const uint8_t *labels, uint32_t n,
                       uint32_t classes, uint64_t *s)
{
        uint32_t *fill;

        g->byclass = malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
        g->start = calloc((size_t)classes + 1, sizeof(uint32_t));
        fill = calloc(classes, sizeof(uint32_t));
        if (!g->byclass || !g->start || !fill) {
                free(fill);
                free(g->byclass);
                free(g->start);
                return NN_ENOMEM;
        }
        for (uint32_t i = 0; i < n; i++)
                g->start[labels[i] + 1]++;
        for (uint32_t c = 0; c < classes; c++)
                g->start[c + 1] += g->start[c];
        for (uint32_t i = 0; i < n; i++)
                g->byclass[g->start[labels[i]] + fill[labels[i]]++] = i;
        for (uint32_t c = 0; c < classes; c++)
                shuffle(s, g->byclass + g->start[c],
                        g->start[c + 1] - g->start[c]);
        free(fill);
        return 0;
}

static void groups_free(struct groups *g)
{
        free(g->byclass);
        free(g->start);
}

/* Gives class c's samples to nodes by cumulative shares w[0..count)
 * (summing to 1; w[j] may be 0): node j gets positions
 * [round(n_c * W_j), round(n_c * W_{j+1})) of the class's list. */
static void cut_class(const struct groups *g, uint32_t c, const double *w,
                      int count, int32_t *owner)
{
        uint32_t lo = g->start[c], nc = g->start[c + 1] - lo, a = 0, b;
        double cum = 0.0;

        for (int j = 0; j < count; j++) {
                cum += w[j];
                b = j == count - 1 ? nc : (uint32_t)floor(nc * cum + 0.5);
                if (b > nc)
                        b = nc;
                for (uint32_t i = a; i < b; i++)
                        owner[g->byclass[lo + i]] = j;
                if (b > a)
                        a = b;
        }
}

/* Fewest samples any node holds. */
static uint32_t min_part(const int32_t *owner, uint32_t n, int count,
                         uint32_t *tally)
{
        uint32_t min = UINT32_MAX;

        memset(tally, 0, (size_t)count * sizeof(*tally));
        for (uint32_t i = 0; i < n; i++)
                if (owner[i] >= 0)
                        tally[owner[i]]++;
        for (int j = 0; j < count; j++)
                if (tally[j] < min)
                        min = tally[j];
        return min;
}

static int assign_dirichlet(const struct nn_partition *p, const uint8_t *labels,
                            uint32_t n, uint32_t classes, int count,
                            int32_t *owner)
{
        uint64_t s = p->seed;
        struct groups g = {0};
        double *w = malloc((size_t)count * sizeof(double));
        uint32_t *tally = malloc((size_t)count * sizeof(uint32_t));
        int rc = NN_ENOMEM;

        if (!w || !tally)
                goto out;
        rc = groups_make(&g, labels, n, classes, &s);
        if (rc)
                goto out;
        for (int d = 0; d < NN_PART_MAX_DRAWS; d++) {
                for (uint32_t c = 0; c < classes; c++) {
                        dirichlet(&s, p->alpha, w, count);
                        cut_class(&g, c, w, count, owner);
                }
                if (n < (uint64_t)NN_PART_MIN_SAMPLES * (uint32_t)count ||
                    min_part(owner, n, count, tally) >= NN_PART_MIN_SAMPLES)
                        break;
        }
out:
        groups_free(&g);
        free(w);
        free(tally);
        return rc;
}

/* classes:K. Node j holds the K classes at positions jK, jK+1, ... (mod
 * C) of perm, so it holds c iff (where[c] - jK) mod C < K, where where[]
 * inverts perm. A class held by h nodes gets equal shares 1/h. */
static int assign_classes(const struct nn_partition *p, const uint8_t *labels,
                          uint32_t n, uint32_t classes, int count,
                          int32_t *owner)
{
        uint64_t s = p->seed;
        struct groups g = {0};
        uint32_t *perm = malloc(classes * sizeof(uint32_t));
        uint32_t *where = malloc(classes * sizeof(uint32_t));
        uint32_t *held = calloc(classes, sizeof(uint32_t));
        double *w = malloc((size_t)count * sizeof(double));
        int rc = NN_ENOMEM;

        if (!perm || !where || !held || !w)
                goto out;
        for (uint32_t c = 0; c < classes; c++)
                perm[c] = c;
        shuffle(&s, perm, classes);
        for (uint32_t c = 0; c < classes; c++)
                where[perm[c]] = c;
        rc = groups_make(&g, labels, n, classes, &s);
        if (rc)
                goto out;
        for (uint64_t slot = 0; slot < (uint64_t)count * p->k; slot++)
                held[perm[slot % classes]]++;
        for (uint32_t c = 0; c < classes; c++) {
                if (!held[c])
                        continue;
                for (int j = 0; j < count; j++) {
                        uint64_t first = (uint64_t)j * p->k % classes;
                        uint64_t dist = (where[c] + classes - first) % classes;

                        w[j] = dist < p->k ? 1.0 / held[c] : 0.0;
                }
                cut_class(&g, c, w, count, owner);
        }
out:
        groups_free(&g);
        free(perm);
        free(where);
        free(held);
        free(w);
        return rc;
}

/* shards:K (McMahan et al.'s pathological non-IID): the samples in label
 * order (each class's in a seeded shuffled order) cut into count*K
 * near-equal contiguous shards; node j holds shards perm[jK .. jK+K) of a
 * seeded permutation. Every sample is used; a node holds about K labels
 * (a shard straddles a class boundary at most ceil(C / (count K)) times). */
static int assign_shards(const struct nn_partition *p, const uint8_t *labels,
                         uint32_t n, uint32_t classes, int count,
                         int32_t *owner)
{
        uint64_t s = p->seed, nsh = (uint64_t)count * p->k;
        struct groups g = {0};
        uint32_t *perm = malloc((size_t)nsh * sizeof(uint32_t));
        int rc = NN_ENOMEM;

        if (!perm)
                goto out;
        for (uint32_t i = 0; i < nsh; i++)
                perm[i] = i;
        rc = groups_make(&g, labels, n, classes, &s);
        if (rc)
                goto out;
        shuffle(&s, perm, (uint32_t)nsh);
        for (uint64_t slot = 0; slot < nsh; slot++) {
                uint64_t sh = perm[slot], lo = sh * n / nsh,
                         hi = (sh + 1) * n / nsh;

                for (uint64_t i = lo; i < hi; i++)
                        owner[g.byclass[i]] = (int32_t)(slot / p->k);
        }
out:
        groups_free(&g);
        free(perm);
        return rc;
}

int nn_partition_assign(const struct nn_partition *p, const uint8_t *labels,
                        uint32_t n, uint32_t classes, int count, int32_t *owner)
{
        if (!p || (!labels && n) || (!owner && n) || count < 1 || classes < 1 ||
            classes > 256)
                return NN_EINVAL;
        for (uint32_t i = 0; i < n; i++)
                if (labels[i] >= classes)
                        return NN_EINVAL;
        for (uint32_t i = 0; i < n; i++)
                owner[i] = -1;
        switch (p->kind) {
        case NN_PART_IID:
                for (int j = 0; j < count; j++) {
                        uint64_t lo = (uint64_t)j * n / (uint64_t)count,
                                 hi = (uint64_t)(j + 1) * n / (uint64_t)count;

                        for (uint64_t i = lo; i < hi; i++)
                                owner[i] = j;
                }
                return 0;
        case NN_PART_DIRICHLET:
                if (!(p->alpha >= NN_PART_ALPHA_MIN &&
                      p->alpha <= NN_PART_ALPHA_MAX))
                        return NN_EINVAL;
                return assign_dirichlet(p, labels, n, classes, count, owner);
        case NN_PART_CLASSES:
                if (p->k < 1 || p->k > classes)
                        return NN_EINVAL;
                return assign_classes(p, labels, n, classes, count, owner);
        case NN_PART_SHARDS:
                if (p->k < 1 || (uint64_t)count * p->k > n)
                        return NN_EINVAL;
                return assign_shards(p, labels, n, classes, count, owner);
        }
        return NN_EINVAL;
}

int nn_partition_indices(const struct nn_partition *p, const uint8_t *labels,
                         uint32_t n, uint32_t classes, int index, int count,
                         uint32_t **out, uint32_t *nout)
{
        int32_t *owner;
        uint32_t m = 0;
        int rc;

        *out = NULL;
        *nout = 0;
        if (index < 0 || index >= count)
                return NN_EINVAL;
        owner = malloc((size_t)(n ? n : 1) * sizeof(*owner));
        if (!owner)
                return NN_ENOMEM;
        rc = nn_partition_assign(p, labels, n, classes, count, owner);
        if (rc)
                goto out;
        /* The owner array is n words and only m <= n are ours: reuse it
         * as the output, compacted in place (index i >= m always). */
        for (uint32_t i = 0; i < n; i++)
                if (owner[i] == index)
                        ((uint32_t *)owner)[m++] = i;
        if (m) {
                *out = (uint32_t *)owner;
                *nout = m;
                owner = NULL;
        }
out:
        free(owner);
        return rc;
}

int nn_dataset_partition(struct nn_dataset *all, const struct nn_partition *p,
                         int index, int count, struct nn_dataset *out)
{
        size_t ss;
        uint32_t *idx = NULL, m = 0;
        int rc;

        if (!all || !p || !out)
                return NN_EINVAL;
        if (p->kind == NN_PART_IID)
                return nn_dataset_shard(all, index, count, out);
        if (!all->owns || !all->images || !all->labels)
                return NN_EINVAL;
        rc = nn_partition_indices(p, all->labels, all->n, all->classes, index,
                                  count, &idx, &m);
        if (rc)
                return rc;
        /* idx ascends, so idx[j] >= j: each move reads a sample no
         * earlier move has overwritten. */
        ss = nn_dataset_sample_size(all);
        for (uint32_t j = 0; j < m; j++) {
                if (idx[j] == j)
                        continue;
                memcpy(all->images + (size_t)j * ss,
                       all->images + (size_t)idx[j] * ss, ss);
                all->labels[j] = all->labels[idx[j]];
        }
        free(idx);
        all->n = m;
        *out = *all;
        out->owns = 0;
        return 0;
}

int nn_partition_parse(const char *s, struct nn_partition *out)
{
        struct nn_partition p = {0};
        char *end;

        if (!s || !out)
                return NN_EINVAL;
        if (strcmp(s, "iid") == 0) {
                p.kind = NN_PART_IID;
        } else if (strncmp(s, "dirichlet:", 10) == 0) {
                s += 10;
                if (*s < '0' || *s > '9')
                        return NN_EINVAL; /* no sign, space, "inf" */
                errno = 0;
                p.alpha = strtod(s, &end);
                if (errno || *end ||
                    !(p.alpha >= NN_PART_ALPHA_MIN &&
                      p.alpha <= NN_PART_ALPHA_MAX))
                        return NN_EINVAL;
                p.kind = NN_PART_DIRICHLET;
        } else if (strncmp(s, "classes:", 8) == 0 ||
                   strncmp(s, "shards:", 7) == 0) {
                unsigned long k;

                p.kind = s[0] == 'c' ? NN_PART_CLASSES : NN_PART_SHARDS;
                s += p.kind == NN_PART_CLASSES ? 8 : 7;
                if (*s < '0' || *s > '9')
                        return NN_EINVAL;
                errno = 0;
                k = strtoul(s, &end, 10);
                if (errno || *end || k < 1 || k > NN_PART_K_MAX)
                        return NN_EINVAL;
                p.k = (uint32_t)k;
        } else {
                return NN_EINVAL;
        }
        *out = p;
        return 0;
}

int nn_partition_format(const struct nn_partition *p, char *buf, size_t len)
{
        int n = -1;

        if (!p || !buf)
                return NN_EINVAL;
        if (p->kind == NN_PART_IID)
                n = snprintf(buf, len, "iid");
        else if (p->kind == NN_PART_DIRICHLET)
                n = snprintf(buf, len, "dirichlet:%g", p->alpha);
        else if (p->kind == NN_PART_CLASSES)
                n = snprintf(buf, len, "classes:%u", p->k);
        else if (p->kind == NN_PART_SHARDS)
                n = snprintf(buf, len, "shards:%u", p->k);
        return n < 0 || (size_t)n >= len ? NN_EINVAL : 0;
}
