/*
 * model.c - models built from a spec string: parsing and canonical form,
 * the flat parameter/gradient buffers with per-layer offsets into them,
 * seeded initialisation, and the forward/backward drivers, serial or split
 * over threads by samples.
 *
 * Invariants: params and grads are each ONE allocation of nparams floats,
 * laid out layer by layer (weights then bias); the layout is a function of
 * the canonical spec alone.  Workspaces (activations, two ping-pong
 * gradient buffers, one im2col buffer of bounded size) are sized for `cap`
 * samples and only grow, so a training loop with a fixed batch allocates
 * nothing after its first step (or after nn_model_reserve).
 *
 * Threads (nn_threads_set(n), n > 1): a batch is cut into n contiguous
 * chunks; thread t (the caller is t = 0, workers are 1..n-1) runs forward
 * and backward on chunk t with its own workspace ws[t] and its own gradient
 * buffer (ws[0]'s is the model's), each with serial BLIS.  Each chunk's
 * logit gradient is divided by the whole batch size (its rows are those of
 * the serial pass, bit for bit), so after a barrier the threads sum the
 * buffers into the model's, each over its own range of parameters, always
 * in the order ws[0] + ws[1] + ... : results are deterministic for a fixed
 * n, and equal to the serial ones up to float rounding.  A dense first
 * layer (an MLP's biggest block) is not reduced: after the barrier each
 * thread computes its rows of that weight gradient over the whole batch
 * from every chunk's output gradient, gathered in m->dy0.  nn_model_step
 * runs the optimizer as a job of its own: each thread updates the ranges
 * whose gradient it wrote (step_part), still in its core's cache.  With one
 * thread (or a batch of one sample) the serial code path runs unchanged.
 * Workers are started on first use, block on a condition variable between
 * jobs (never spin: the host is often oversubscribed) and are joined in
 * nn_model_free.  All job fields are written under the pool mutex before
 * the workers are woken, and results are read after they report back under
 * it, so every hand-over is ordered by the mutex.
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "layers.h"

/* Tunables. */
enum {
        /* Bound on any number in a spec: no layer here is wider. */
        SPEC_NUM_MAX = 1 << 16,
        /* Most layers in a spec; a Pi-class model has a handful. */
        LAYERS_MAX = 32,
        /* im2col workspace in floats (1 MB): a pass of a few samples
         * (the CNN's second conv: 4 samples, 784 rows of 288) keeps the
         * column matrix in L2 while BLIS packs and multiplies it.  With
         * 16 MB passes (14504 rows) the same GEMMs ran at 13-42 GFLOP/s
         * instead of 114-150 (skx kernels, docs/nn.md). */
        COL_BUDGET = 1 << 18,
        /* Samples per forward pass in evaluate when the model holds
         * workspaces for fewer: GEMMs of ~100 rows are already efficient. */
        EVAL_BATCH = 100,
        /* Largest batch accepted (keeps size_t products far from overflow). */
        BATCH_MAX = 1 << 20,
        /* Largest activation of one sample, in floats (256 MB). */
        ACT_MAX = 1 << 26,
        /* Most threads one model computes with: a Pi has 4 cores; beyond
         * the core count chunks only get smaller. */
        THREADS_MAX = 16,
        /* Reduction ranges start on multiples of this many floats (64
         * bytes), so two threads never write the same cache line. */
        REDUCE_ALIGN = 16,
};

/* Bound on parameters: 1 GiB of floats is far beyond a Pi. */
#define NPARAMS_MAX ((size_t)1 << 28)

enum layer_kind { L_DENSE, L_CONV, L_POOL };

struct layer {
        enum layer_kind kind;
        int relu;
        int h, w, c;    /* input shape (dense: 1 x 1 x in_size) */
        int oh, ow, oc; /* output shape (dense: 1 x 1 x width) */
        int k;          /* conv kernel side / pool size */
        int in_size, out_size;
        struct nn__conv conv;
        size_t w_off, b_off, nw, nb;
};

/* One thread's workspaces, for `cap` samples. */
struct ws {
        int cap;
        float *out[LAYERS_MAX];   /* [cap, out_size] per layer */
        int32_t *idx[LAYERS_MAX]; /* pool layers: [cap, out_size] winners */
        float *d0, *d1;           /* [cap, dmax] ping-pong gradients */
        float *col;               /* im2col workspace */
        size_t col_len;
        float *grads; /* where backward writes: ws[0] the model's, others
                         their own nparams floats (allocated on first use) */
};

struct pool;

struct nn_model {
        char spec[NN_SPEC_MAX];
        int in_c, in_h, in_w, in_size, classes;
        int nlayers;
        struct layer layers[LAYERS_MAX];
        size_t nparams;
        float *params, *grads;
        size_t dmax;    /* largest per-sample activation */
        size_t col_per; /* im2col floats of one sample (largest conv) */
        size_t col_n;   /* samples the im2col budget holds (>= 1) */
        struct ws ws[THREADS_MAX];
        struct pool *pool; /* NULL until threads are first used */
        float *dy0;        /* threads, dense first layer: [dy0_cap, width]
                              gradient at its output, all chunks */
        int dy0_cap;
};

/* ---- spec parsing ------------------------------------------------------ */

/* Reads a decimal number in [1, SPEC_NUM_MAX] at *p; advances *p. */
static int parse_num(const char **p, int *out)
{
        long v = 0;
        const char *s = *p;

        if (*s < '0' || *s > '9')
                return NN_EINVAL;
        while (*s >= '0' && *s <= '9') {
                v = v * 10 + (*s - '0');
                if (v > SPEC_NUM_MAX)
                        return NN_EINVAL;
                s++;
        }
        if (v < 1)
                return NN_EINVAL;
        *p = s;
        *out = (int)v;
        return 0;
}

/* Appends one "-"-separated token to the canonical spec. */
static int spec_append(char *out, size_t outlen, size_t *pos, const char *tok)
{
        int n =
            snprintf(out + *pos, outlen - *pos, "%s%s", *pos ? "-" : "", tok);

        if (n < 0 || (size_t)n >= outlen - *pos)
                return NN_EINVAL;
        *pos += (size_t)n;
        return 0;
}

/* Parses one layer token at *p into l, given the current shape (h, w, c;
 * h == 0 means a flat vector of c features).  Advances *p past the token
 * and updates the shape to the layer's output. */
static int parse_layer(const char **p, struct layer *l, int *h, int *w, int *c)
{
        const char *s = *p;
        int a, b;

        memset(l, 0, sizeof(*l));
        if (*s == 'c') {
                s++;
                if (parse_num(&s, &a) || *s++ != 'k' || parse_num(&s, &b))
                        return NN_EINVAL;
                if (*h == 0 || b % 2 == 0 || b > 15)
                        return NN_EINVAL;
                l->kind = L_CONV;
                l->relu = 1;
                l->k = b;
                l->h = l->oh = *h;
                l->w = l->ow = *w;
                l->c = *c;
                l->oc = a;
        } else if (*s == 'p') {
                s++;
                if (parse_num(&s, &a) || *h == 0 || *h % a || *w % a)
                        return NN_EINVAL;
                l->kind = L_POOL;
                l->k = a;
                l->h = *h;
                l->w = *w;
                l->c = l->oc = *c;
                l->oh = *h / a;
                l->ow = *w / a;
        } else {
                if (parse_num(&s, &a))
                        return NN_EINVAL;
                l->kind = L_DENSE;
                l->relu = 1;
                l->h = l->w = 1;
                l->c = *h ? *h * *w * *c : *c;
                l->oh = l->ow = 1;
                l->oc = a;
        }
        if (*s != '\0' && *s != '-')
                return NN_EINVAL;
        l->in_size = l->h * l->w * l->c;
        l->out_size = l->oh * l->ow * l->oc;
        if (l->kind == L_DENSE) {
                *h = *w = 0;
        } else {
                *h = l->oh;
                *w = l->ow;
        }
        *c = l->oc;
        *p = s;
        return 0;
}

/* Canonical token of a parsed layer. */
static void layer_token(const struct layer *l, char *buf, size_t len)
{
        if (l->kind == L_CONV)
                snprintf(buf, len, "c%dk%d", l->oc, l->k);
        else if (l->kind == L_POOL)
                snprintf(buf, len, "p%d", l->k);
        else
                snprintf(buf, len, "%d", l->oc);
}

/* Reads the optional input token into (c, h, w) (h = w = 0: flat) and
 * reconciles it with the caller's shape arguments. */
static int parse_input(const char **p, int in_c, int in_h, int in_w, int *c,
                       int *h, int *w)
{
        const char *s = *p;
        int given = in_c > 0 && in_h > 0 && in_w > 0;

        if ((in_c || in_h || in_w) && !given)
                return NN_EINVAL;
        if (*s < '0' || *s > '9') {
                /* No input token: the arguments must give the shape. */
                if (!given)
                        return NN_EINVAL;
                *c = in_c;
                *h = in_h;
                *w = in_w;
                return 0;
        }
        if (parse_num(&s, c))
                return NN_EINVAL;
        *h = *w = 0;
        if (*s == 'x') {
                s++;
                if (parse_num(&s, h) || *s++ != 'x' || parse_num(&s, w))
                        return NN_EINVAL;
                if (given && (*c != in_c || *h != in_h || *w != in_w))
                        return NN_EINVAL;
        } else if (given && (long)*c != (long)in_c * in_h * in_w) {
                return NN_EINVAL;
        }
        if (*s++ != '-')
                return NN_EINVAL; /* at least one layer must follow */
        *p = s;
        return 0;
}

/* Parses spec into m's shape fields and layers and writes its canonical
 * form into canon; nothing is allocated. */
static int parse_spec(const char *spec, int in_c, int in_h, int in_w,
                      struct nn_model *m, char *canon, size_t canonlen)
{
        const char *p = spec;
        char tok[48];
        size_t pos = 0;
        int c, h, w;

        if (!spec)
                return NN_EINVAL;
        if (strcmp(spec, "cnn") == 0)
                p = NN_PRESET_CNN;
        if (parse_input(&p, in_c, in_h, in_w, &c, &h, &w))
                return NN_EINVAL;
        if (h)
                snprintf(tok, sizeof(tok), "%dx%dx%d", c, h, w);
        else
                snprintf(tok, sizeof(tok), "%d", c);
        if (spec_append(canon, canonlen, &pos, tok))
                return NN_EINVAL;
        m->in_c = h ? c : 1;
        m->in_h = h ? h : 1;
        m->in_w = h ? w : c;
        m->in_size = h ? c * h * w : c;
        if ((long)m->in_size != (long)m->in_c * m->in_h * m->in_w ||
            (long)c * (h ? h : 1) * (w ? w : 1) > ACT_MAX)
                return NN_EINVAL;
        m->nlayers = 0;
        for (;;) {
                struct layer *l;

                if (m->nlayers == LAYERS_MAX)
                        return NN_EINVAL;
                l = &m->layers[m->nlayers];
                if (parse_layer(&p, l, &h, &w, &c))
                        return NN_EINVAL;
                if ((long)l->oh * l->ow * l->oc > ACT_MAX)
                        return NN_EINVAL;
                /* A first pool on planar multi-channel input would mix up
                 * the layout; nobody needs it. */
                if (m->nlayers == 0 && l->kind == L_POOL && l->c > 1)
                        return NN_EINVAL;
                m->nlayers++;
                layer_token(l, tok, sizeof(tok));
                if (spec_append(canon, canonlen, &pos, tok))
                        return NN_EINVAL;
                if (*p == '\0')
                        break;
                p++; /* '-' */
        }
        m->layers[m->nlayers - 1].relu = 0;
        m->classes = m->layers[m->nlayers - 1].oc;
        if (m->layers[m->nlayers - 1].kind != L_DENSE || m->classes < 2 ||
            m->classes > 256)
                return NN_EINVAL;
        return 0;
}

int nn_spec_canonical(const char *spec, int in_channels, int in_h, int in_w,
                      char *out, size_t outlen)
{
        struct nn_model *m = calloc(1, sizeof(*m));
        int rc;

        if (!m)
                return NN_ENOMEM;
        rc = parse_spec(spec, in_channels, in_h, in_w, m, m->spec,
                        sizeof(m->spec));
        if (rc == 0 && strlen(m->spec) >= outlen)
                rc = NN_EINVAL;
        if (rc == 0)
                memcpy(out, m->spec, strlen(m->spec) + 1);
        free(m);
        return rc;
}

/* ---- layout and initialisation ----------------------------------------- */

/* Assigns each layer its slice of the flat buffers; returns nparams or 0
 * if the model is too big. */
static size_t layout(struct nn_model *m)
{
        size_t off = 0;

        for (int i = 0; i < m->nlayers; i++) {
                struct layer *l = &m->layers[i];

                if (l->kind == L_DENSE) {
                        l->nw = (size_t)l->oc * l->in_size;
                } else if (l->kind == L_CONV) {
                        l->nw = (size_t)l->oc * l->k * l->k * l->c;
                        l->conv = (struct nn__conv){
                            .c = l->c,
                            .h = l->h,
                            .w = l->w,
                            .f = l->oc,
                            .k = l->k,
                            .in_planar = i == 0 && l->c > 1,
                        };
                }
                l->nb = l->kind == L_POOL ? 0 : (size_t)l->oc;
                l->w_off = off;
                l->b_off = off + l->nw;
                off += l->nw + l->nb;
                if (off > NPARAMS_MAX)
                        return 0;
        }
        return off;
}

int nn_spec_nparams(const char *spec, int in_channels, int in_h, int in_w,
                    size_t *nparams)
{
        struct nn_model *m = calloc(1, sizeof(*m));
        size_t n = 0;

        if (!m)
                return NN_ENOMEM;
        if (parse_spec(spec, in_channels, in_h, in_w, m, m->spec,
                       sizeof(m->spec)) == 0)
                n = layout(m);
        free(m);
        if (n == 0)
                return NN_EINVAL;
        *nparams = n;
        return 0;
}

/* He-uniform for layers followed by ReLU (bound sqrt(6/fan_in)), Xavier-
 * uniform otherwise (bound sqrt(6/(fan_in+fan_out))), biases zero.  Only
 * exact float arithmetic and sqrt: identical on every IEEE machine. */
static void init_params(struct nn_model *m, uint64_t seed)
{
        uint64_t st = seed;

        memset(m->params, 0, sizeof(float) * m->nparams);
        for (int i = 0; i < m->nlayers; i++) {
                struct layer *l = &m->layers[i];
                float fan_in, fan_out, bound;

                if (l->kind == L_POOL)
                        continue;
                fan_in = (float)(l->nw / (size_t)l->oc);
                fan_out = l->kind == L_CONV ? (float)(l->oc * l->k * l->k)
                                            : (float)l->oc;
                bound = l->relu ? sqrtf(6.0f / fan_in)
                                : sqrtf(6.0f / (fan_in + fan_out));
                for (size_t j = 0; j < l->nw; j++)
                        m->params[l->w_off + j] =
                            nn__rand_uniform(&st, -bound, bound);
        }
}

/* The activation and im2col sizes of a laid-out model: dmax, col_per
 * and col_n (what nn_model_gemm_shapes reads besides the layers). */
static void plan_sizes(struct nn_model *m)
{
        for (int i = 0; i < m->nlayers; i++) {
                struct layer *l = &m->layers[i];
                size_t cl;

                if ((size_t)l->out_size > m->dmax)
                        m->dmax = (size_t)l->out_size;
                if ((size_t)l->in_size > m->dmax)
                        m->dmax = (size_t)l->in_size;
                if (l->kind != L_CONV)
                        continue;
                cl = nn__conv_col_len(&l->conv, 1);
                if (cl > m->col_per)
                        m->col_per = cl;
        }
        /* One sample at least; as many as fit in the budget. */
        if (m->col_per)
                m->col_n =
                    COL_BUDGET / m->col_per ? COL_BUDGET / m->col_per : 1;
}

int nn_model_create(const char *spec, int in_channels, int in_h, int in_w,
                    uint64_t seed, struct nn_model **out)
{
        struct nn_model *m = calloc(1, sizeof(*m));
        int rc = NN_EINVAL;

        if (!m)
                return NN_ENOMEM;
        if (parse_spec(spec, in_channels, in_h, in_w, m, m->spec,
                       sizeof(m->spec)))
                goto out;
        m->nparams = layout(m);
        if (m->nparams == 0)
                goto out;
        rc = NN_ENOMEM;
        m->params = malloc(sizeof(float) * m->nparams);
        m->grads = calloc(m->nparams, sizeof(float));
        if (!m->params || !m->grads)
                goto out;
        m->ws[0].grads = m->grads;
        init_params(m, seed);
        plan_sizes(m);
        if (m->col_per) {
                m->ws[0].col_len = m->col_per * m->col_n;
                m->ws[0].col = malloc(sizeof(float) * m->ws[0].col_len);
                if (!m->ws[0].col)
                        goto out;
        }
        *out = m;
        return 0;
out:
        nn_model_free(m);
        return rc;
}

/* Samples one im2col pass of this conv layer may take at once in w.  Every
 * workspace's buffer holds min(cap, col_n) samples of the largest conv, so
 * for a chunk of b <= cap samples the pass size min(b, this) does not
 * depend on cap: results do not depend on the workspace's history. */
static int conv_chunk(const struct ws *w, const struct layer *l)
{
        size_t per = nn__conv_col_len(&l->conv, 1);

        return (int)(w->col_len / per);
}

/* Frees w's per-sample buffers (not col or grads) and sets cap to 0. */
static void ws_free_acts(struct nn_model *m, struct ws *w)
{
        for (int i = 0; i < m->nlayers; i++) {
                free(w->out[i]);
                free(w->idx[i]);
                w->out[i] = NULL;
                w->idx[i] = NULL;
        }
        free(w->d0);
        free(w->d1);
        w->d0 = w->d1 = NULL;
        w->cap = 0;
}

/* Whether layer i (a direct conv with ReLU, a max-pool after it) runs
 * fused with that pool (nn__conv_pool_forward): w->out[i] is not even
 * allocated (ws_reserve), 10 MB per workspace at batch 100 for the CNN.
 * Nothing reads it: backward() processes layer i only with the pool above
 * it, which then folds the conv's ReLU mask (pool_mask) and reads its own
 * output instead. */
static int fuse_pool(const struct nn_model *m, int i)
{
        const struct layer *l = &m->layers[i];

        return l->kind == L_CONV && l->relu && nn__conv_direct(&l->conv) &&
               i + 1 < m->nlayers && m->layers[i + 1].kind == L_POOL;
}

/* Grows w's activation buffers to n samples (n <= cap: nothing to do).
 * Worker workspaces (w != ws[0]) also get their own gradient buffer and an
 * im2col buffer for min(n, col_n) samples.  On NN_ENOMEM w holds no
 * activations (cap 0) and nothing else changed. */
static int ws_reserve(struct nn_model *m, struct ws *w, int n)
{
        size_t sn = (size_t)n;

        if (n <= w->cap)
                return 0;
        /* Kernels index rows of a batch with int. */
        if (sn * m->dmax > INT_MAX)
                return NN_EINVAL;
        ws_free_acts(m, w);
        if (w != &m->ws[0] && !w->grads) {
                w->grads = malloc(sizeof(float) * m->nparams);
                if (!w->grads)
                        return NN_ENOMEM;
        }
        if (w != &m->ws[0] && m->col_per) {
                size_t len = m->col_per * (sn < m->col_n ? sn : m->col_n);

                free(w->col);
                w->col = malloc(sizeof(float) * len);
                w->col_len = w->col ? len : 0;
                if (!w->col)
                        return NN_ENOMEM;
        }
        for (int i = 0; i < m->nlayers; i++) {
                struct layer *l = &m->layers[i];

                if (fuse_pool(m, i))
                        continue; /* its output is never written */
                w->out[i] = malloc(sizeof(float) * sn * l->out_size);
                if (!w->out[i])
                        goto fail;
                if (l->kind == L_POOL) {
                        w->idx[i] = malloc(sizeof(int32_t) * sn * l->out_size);
                        if (!w->idx[i])
                                goto fail;
                }
        }
        w->d0 = malloc(sizeof(float) * sn * m->dmax);
        w->d1 = malloc(sizeof(float) * sn * m->dmax);
        if (!w->d0 || !w->d1)
                goto fail;
        w->cap = n;
        return 0;
fail:
        ws_free_acts(m, w);
        return NN_ENOMEM;
}

static void pool_stop(struct nn_model *m);
static int pool_start(struct nn_model *m, int n);
static int dy0_reserve(struct nn_model *m, int n);

void nn_model_free(struct nn_model *m)
{
        if (!m)
                return;
        pool_stop(m);
        for (int t = 0; t < THREADS_MAX; t++) {
                ws_free_acts(m, &m->ws[t]);
                free(m->ws[t].col);
                if (t > 0)
                        free(m->ws[t].grads);
        }
        free(m->dy0);
        free(m->params);
        free(m->grads);
        free(m);
}

/* Threads a call on m should use: nn_threads_get() capped by THREADS_MAX. */
static int threads_wanted(void)
{
        int n = nn_threads_get();

        return n < THREADS_MAX ? n : THREADS_MAX;
}

int nn_model_reserve(struct nn_model *m, int max_batch)
{
        int n, per, rc;

        if (max_batch < 1 || max_batch > BATCH_MAX)
                return NN_EINVAL;
        n = threads_wanted();
        if (n > 1)
                n = pool_start(m, n);
        if (n == 1)
                return ws_reserve(m, &m->ws[0], max_batch);
        /* Chunks of a batch <= max_batch hold at most per samples. */
        per = (max_batch + n - 1) / n;
        for (int t = 0; t < n; t++) {
                rc = ws_reserve(m, &m->ws[t], per);
                if (rc)
                        return rc;
        }
        return dy0_reserve(m, max_batch);
}

size_t nn_model_nparams(const struct nn_model *m)
{
        return m->nparams;
}

float *nn_model_params(struct nn_model *m)
{
        return m->params;
}

float *nn_model_grads(struct nn_model *m)
{
        return m->grads;
}

const char *nn_model_spec(const struct nn_model *m)
{
        return m->spec;
}

int nn_model_input_size(const struct nn_model *m)
{
        return m->in_size;
}

int nn_model_classes(const struct nn_model *m)
{
        return m->classes;
}

int nn_model_layers(const struct nn_model *m)
{
        return m->nlayers;
}

int nn_model_layer(const struct nn_model *m, int i, struct nn_layer_info *out)
{
        const struct layer *l;
        static const enum nn_layer_kind kinds[] = {
            [L_DENSE] = NN_LAYER_DENSE,
            [L_CONV] = NN_LAYER_CONV,
            [L_POOL] = NN_LAYER_POOL,
        };

        if (i < 0 || i >= m->nlayers)
                return NN_EINVAL;
        l = &m->layers[i];
        *out = (struct nn_layer_info){
            .kind = kinds[l->kind],
            .relu = l->relu,
            .in_c = l->kind == L_DENSE ? l->in_size : l->c,
            .in_h = l->kind == L_DENSE ? 1 : l->h,
            .in_w = l->kind == L_DENSE ? 1 : l->w,
            .out_c = l->oc,
            .out_h = l->oh,
            .out_w = l->ow,
            .k = l->kind == L_DENSE ? 0 : l->k,
            .w_off = l->w_off,
            .nw = l->nw,
            .b_off = l->b_off,
            .nb = l->nb,
        };
        return 0;
}

/* ---- forward / backward ------------------------------------------------ */

/* Runs every layer on batch samples of x in w; returns the logits
 * [B, classes]. */
static const float *forward(struct nn_model *m, struct ws *w, const float *x,
                            int batch)
{
        const float *in = x;
        const float *p = m->params;

        for (int i = 0; i < m->nlayers; i++) {
                struct layer *l = &m->layers[i];

                switch (l->kind) {
                case L_DENSE:
                        nn__dense_forward(w->out[i], in, p + l->w_off,
                                          p + l->b_off, batch, l->in_size,
                                          l->oc, l->relu);
                        break;
                case L_CONV:
                        if (fuse_pool(m, i)) {
                                i++; /* the pool, done here */
                                nn__conv_pool_forward(w->out[i], w->idx[i], in,
                                                      p + l->w_off,
                                                      p + l->b_off, &l->conv,
                                                      batch, m->layers[i].k);
                                break;
                        }
                        nn__conv_forward(w->out[i], in, p + l->w_off,
                                         p + l->b_off, &l->conv, batch, w->col,
                                         conv_chunk(w, l), l->relu);
                        break;
                case L_POOL:
                        nn__maxpool_forward(w->out[i], w->idx[i], in, batch,
                                            l->h, l->w, l->c, l->k);
                        break;
                }
                in = w->out[i];
        }
        return in;
}

/* Back-propagates dz (gradient of the logits, in w->d0) through layers
 * nlayers-1 down to `last`, writing their parameter gradients into
 * w->grads; returns the gradient at the output of layer last-1 (unmasked;
 * meaningless for last = 0: the input gradient is never needed). */
static float *backward(struct nn_model *m, struct ws *w, const float *x,
                       int batch, int last)
{
        float *d = w->d0, *other = w->d1, *t;
        const float *p = m->params;
        float *g = w->grads;
        int masked = 0; /* d already carries layer i's ReLU mask */

        for (int i = m->nlayers - 1; i >= last; i--) {
                struct layer *l = &m->layers[i];
                const float *in = i ? w->out[i - 1] : x;
                float *dx = i ? other : NULL;
                const float *ry = l->relu && !masked ? w->out[i] : NULL;
                /* a pool applies the ReLU mask of the layer below it (from
                 * its own output: the windows' maxima of that layer's)
                 * when that layer's backward runs in this call */
                const float *pool_mask =
                    l->kind == L_POOL && i > last && m->layers[i - 1].relu
                        ? w->out[i]
                        : NULL;

                switch (l->kind) {
                case L_DENSE:
                        nn__dense_backward(dx, g + l->w_off, g + l->b_off, d,
                                           ry, in, p + l->w_off, batch,
                                           l->in_size, l->oc);
                        break;
                case L_CONV:
                        nn__conv_backward(dx, g + l->w_off, g + l->b_off, d, ry,
                                          in, p + l->w_off, &l->conv, batch,
                                          w->col, conv_chunk(w, l));
                        break;
                case L_POOL:
                        if (dx)
                                nn__maxpool_backward(dx, d, w->idx[i],
                                                     pool_mask, batch, l->h,
                                                     l->w, l->c, l->k);
                        break;
                }
                masked = dx && pool_mask;
                t = d;
                d = other;
                other = t;
        }
        return d;
}

/* Checks labels (if y) and batch size. */
static int check_batch(const struct nn_model *m, const uint8_t *y, int batch)
{
        if (batch < 1 || batch > BATCH_MAX)
                return NN_EINVAL;
        if (y)
                for (int i = 0; i < batch; i++)
                        if (y[i] >= m->classes)
                                return NN_EINVAL;
        return 0;
}

/* Checks labels and batch size and grows the serial workspace if needed. */
static int prepare(struct nn_model *m, const uint8_t *y, int batch)
{
        int rc = check_batch(m, y, batch);

        return rc ? rc : ws_reserve(m, &m->ws[0], batch);
}

/* Index of the largest of n values (first one on ties). */
static int argmax(const float *z, int n)
{
        int arg = 0;

        for (int j = 1; j < n; j++)
                if (z[j] > z[arg])
                        arg = j;
        return arg;
}

/* ---- threads ----------------------------------------------------------- */

enum job_kind { JOB_TRAIN, JOB_EVAL, JOB_PREDICT, JOB_STEP };

struct worker_ref {
        struct nn_model *m;
        int id;        /* workspace index, 1..THREADS_MAX-1 */
        uint64_t seen; /* last job generation run (set before start) */
};

struct pool {
        pthread_mutex_t mu;
        pthread_cond_t go;   /* workers: a new job (or quit) */
        pthread_cond_t done; /* caller: all workers of the job finished */
        pthread_cond_t bar;  /* barrier between chunk work and reduction */
        pthread_t tid[THREADS_MAX];
        struct worker_ref ref[THREADS_MAX];
        int nworkers; /* running workers have ids 1..nworkers */
        int quit;
        uint64_t gen; /* job counter */
        int pending;  /* workers of the current job not yet finished */
        int arrived;  /* threads waiting at the barrier */
        uint64_t bar_gen;
        /* The job: set by the caller before gen++, read-only during it. */
        enum job_kind kind;
        int nt;                   /* threads taking part: ids 0..nt-1 */
        int off[THREADS_MAX + 1]; /* chunk t = samples [off[t], off[t+1]) */
        int batch;
        const float *x;
        const uint8_t *y;
        uint8_t *pred;
        /* JOB_STEP: the optimizer step (nn_model_step) */
        const struct nn_optim *optim;
        float lr;
        size_t copy_lo, copy_n;
        float *copy;
        /* Results, one slot per thread: chunk loss sum and argmax hits;
         * JOB_STEP: the thread's sum of nn_optim_range's returns. */
        double loss[THREADS_MAX];
        int hits[THREADS_MAX];
        double usq[THREADS_MAX];
};

/* Waits until all nt threads of the job have arrived. */
static void pool_barrier(struct pool *p)
{
        uint64_t g;

        pthread_mutex_lock(&p->mu);
        g = p->bar_gen;
        if (++p->arrived == p->nt) {
                p->arrived = 0;
                p->bar_gen++;
                pthread_cond_broadcast(&p->bar);
        } else {
                while (g == p->bar_gen)
                        pthread_cond_wait(&p->bar, &p->mu);
        }
        pthread_mutex_unlock(&p->mu);
}

/* First parameter of thread t's reduction range (t = nt: the end). */
static size_t reduce_start(const struct nn_model *m, int t, int nt)
{
        if (t >= nt)
                return m->nparams;
        return (m->nparams * (size_t)t / (size_t)nt) &
               ~(size_t)(REDUCE_ALIGN - 1);
}

/* grads[lo, hi) = ws[0] + ws[1] + ... + ws[nt-1], in that order. */
NN_HOT static void reduce_range(struct nn_model *m, int nt, size_t lo,
                                size_t hi)
{
        float *restrict g = m->grads;

        for (int u = 1; u < nt; u++) {
                const float *restrict gu = m->ws[u].grads;

                for (size_t j = lo; j < hi; j++)
                        g[j] += gu[j];
        }
}

/* Whether a threaded training step computes the first layer's weight
 * gradient from all chunks at once (dense first layer) instead of per
 * chunk plus reduction: its weights are the biggest block of an MLP, and
 * this way each thread writes only its rows of it, once. */
static int split_first(const struct nn_model *m)
{
        return m->layers[0].kind == L_DENSE;
}

/* Thread t's rows [*r0, *r1) of layer 0's weight gradient (split_first). */
static void first_rows(const struct nn_model *m, int t, int nt, int *r0,
                       int *r1)
{
        *r0 = (int)((long)m->layers[0].oc * t / nt);
        *r1 = (int)((long)m->layers[0].oc * (t + 1) / nt);
}

/* Thread t's part of a training step, after the chunk's forward pass and
 * loss: backward into its own buffer (with split_first, layer 0 only up
 * to its bias gradient, its masked output gradient going to m->dy0);
 * barrier; then its rows of layer 0's weight gradient over the whole
 * batch, and its range of the reduction of everything else. */
static void train_part(struct nn_model *m, int t, const float *x, int b)
{
        struct pool *p = m->pool;
        struct ws *w = &m->ws[t];
        struct layer *l0 = &m->layers[0];
        size_t lo = reduce_start(m, t, p->nt),
               hi = reduce_start(m, t + 1, p->nt);
        size_t skip_lo = 0, skip_hi = 0;

        if (!split_first(m)) {
                backward(m, w, x, b, 0);
        } else {
                float *d = backward(m, w, x, b, 1);
                float *dy = m->dy0 + (size_t)p->off[t] * l0->oc;

                memcpy(dy, d, sizeof(float) * (size_t)b * l0->oc);
                nn__dense_backward_bias(w->grads + l0->b_off, dy,
                                        l0->relu ? w->out[0] : NULL, b, l0->oc);
                skip_lo = l0->w_off;
                skip_hi = l0->w_off + l0->nw;
        }
        pool_barrier(p);
        if (skip_hi) {
                int r0, r1;

                first_rows(m, t, p->nt, &r0, &r1);
                /* dw[r0:r1, K] = dy0[B, r0:r1]^T x[B, K] */
                nn_gemm(1, 0, r1 - r0, l0->in_size, p->batch, 1.0f, m->dy0 + r0,
                        l0->oc, p->x, l0->in_size, 0.0f,
                        m->grads + l0->w_off + (size_t)r0 * l0->in_size,
                        l0->in_size);
        }
        /* [lo, hi) minus [skip_lo, skip_hi) */
        reduce_range(m, p->nt, lo, hi < skip_lo ? hi : skip_lo);
        reduce_range(m, p->nt, lo > skip_hi ? lo : skip_hi, hi);
}

/* Thread t's share of an optimizer step: the parameters whose gradient
 * it wrote in a training step of nt threads (train_part), so that the
 * update reads them from its own core's cache: its rows of layer 0's
 * weights (split_first) and its reduction range less those weights. */
static void step_part(struct nn_model *m, int t)
{
        struct pool *p = m->pool;
        size_t lo = reduce_start(m, t, p->nt),
               hi = reduce_start(m, t + 1, p->nt);
        size_t r[3][2] = {{lo, hi}, {0, 0}, {0, 0}};
        double usq = 0.0;

        if (split_first(m)) {
                const struct layer *l0 = &m->layers[0];
                size_t skip_lo = l0->w_off, skip_hi = l0->w_off + l0->nw;
                int r0, r1;

                first_rows(m, t, p->nt, &r0, &r1);
                r[0][0] = skip_lo + (size_t)r0 * l0->in_size;
                r[0][1] = skip_lo + (size_t)r1 * l0->in_size;
                r[1][0] = lo;
                r[1][1] = hi < skip_lo ? hi : skip_lo;
                r[2][0] = lo > skip_hi ? lo : skip_hi;
                r[2][1] = hi;
        }
        for (int i = 0; i < 3; i++)
                if (r[i][1] > r[i][0])
                        usq += nn_optim_range(p->optim, m->params, m->grads,
                                              p->lr, r[i][0], r[i][1] - r[i][0],
                                              p->copy_lo, p->copy_n, p->copy);
        p->usq[t] = usq;
}

/* Thread t's share of the job: its chunk, and for training its share of
 * the first layer's weight gradient and of the reduction; or its share
 * of an optimizer step. */
static void job_part(struct nn_model *m, int t)
{
        struct pool *p = m->pool;
        struct ws *w = &m->ws[t];
        int lo = p->off[t], b = p->off[t + 1] - lo, hits = 0;
        const float *x, *z;

        if (p->kind == JOB_STEP) {
                step_part(m, t);
                return;
        }
        x = p->x + (size_t)lo * m->in_size;
        z = forward(m, w, x, b);

        switch (p->kind) {
        case JOB_TRAIN:
                /* dz rows scaled by 1/batch, as the serial pass has them. */
                p->loss[t] = nn__softmax_ce_rows(w->d0, z, p->y + lo, b,
                                                 m->classes, &hits, p->batch);
                break;
        case JOB_EVAL:
                p->loss[t] = nn__softmax_ce_rows(NULL, z, p->y + lo, b,
                                                 m->classes, &hits, b);
                break;
        case JOB_PREDICT:
                for (int s = 0; s < b; s++)
                        p->pred[lo + s] = (uint8_t)argmax(
                            z + (size_t)s * m->classes, m->classes);
                break;
        case JOB_STEP: /* above */
                break;
        }
        p->hits[t] = hits;
        if (p->kind == JOB_TRAIN)
                train_part(m, t, x, b);
}

static void *worker_main(void *arg)
{
        struct worker_ref *r = arg;
        struct pool *p = r->m->pool;

        pthread_mutex_lock(&p->mu);
        for (;;) {
                while (!p->quit && p->gen == r->seen)
                        pthread_cond_wait(&p->go, &p->mu);
                if (p->quit)
                        break;
                r->seen = p->gen;
                if (r->id >= p->nt)
                        continue;
                pthread_mutex_unlock(&p->mu);
                job_part(r->m, r->id);
                pthread_mutex_lock(&p->mu);
                if (--p->pending == 0)
                        pthread_cond_signal(&p->done);
        }
        pthread_mutex_unlock(&p->mu);
        return NULL;
}

/* Makes sure workers 1..n-1 run; returns how many threads (caller
 * included) are available, between 1 and n.  Fewer than n only if a
 * thread could not be created: the model then computes with fewer. */
static int pool_start(struct nn_model *m, int n)
{
        struct pool *p = m->pool;
        sigset_t all, old;

        if (!p) {
                p = calloc(1, sizeof(*p));
                if (!p)
                        return 1;
                if (pthread_mutex_init(&p->mu, NULL)) {
                        free(p);
                        return 1;
                }
                pthread_cond_init(&p->go, NULL);
                pthread_cond_init(&p->done, NULL);
                pthread_cond_init(&p->bar, NULL);
                m->pool = p;
        }
        if (p->nworkers + 1 >= n)
                return n;
        /* Workers take no signals: those belong to the application's
         * threads (the daemon's event loop). */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        while (p->nworkers + 1 < n) {
                struct worker_ref *r = &p->ref[p->nworkers + 1];

                /* No job runs now: gen is stable, the worker starts idle. */
                *r = (struct worker_ref){
                    .m = m, .id = p->nworkers + 1, .seen = p->gen};
                if (pthread_create(&p->tid[r->id], NULL, worker_main, r))
                        break;
                p->nworkers++;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return p->nworkers + 1 < n ? p->nworkers + 1 : n;
}

/* Stops and joins the workers and frees the pool; no job may be running. */
static void pool_stop(struct nn_model *m)
{
        struct pool *p = m->pool;

        if (!p)
                return;
        pthread_mutex_lock(&p->mu);
        p->quit = 1;
        pthread_cond_broadcast(&p->go);
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i <= p->nworkers; i++)
                pthread_join(p->tid[i], NULL);
        pthread_cond_destroy(&p->go);
        pthread_cond_destroy(&p->done);
        pthread_cond_destroy(&p->bar);
        pthread_mutex_destroy(&p->mu);
        free(p);
        m->pool = NULL;
}

/* Grows m->dy0 to n samples when a threaded step needs it (split_first). */
static int dy0_reserve(struct nn_model *m, int n)
{
        if (!split_first(m) || n <= m->dy0_cap)
                return 0;
        free(m->dy0);
        m->dy0 = malloc(sizeof(float) * (size_t)n * m->layers[0].oc);
        m->dy0_cap = m->dy0 ? n : 0;
        return m->dy0 ? 0 : NN_ENOMEM;
}

/*
 * Sets up a job over batch samples with up to n threads (n <= the threads
 * pool_start granted): cuts the batch into nt = min(n, batch) contiguous
 * chunks (the first batch % nt one sample longer) and grows the workspaces
 * of the threads taking part.  Returns nt, or a negative code (workspace
 * growth failed; nothing else changed).
 */
static int job_setup(struct nn_model *m, enum job_kind kind, int n,
                     const float *x, const uint8_t *y, uint8_t *pred, int batch)
{
        struct pool *p = m->pool;
        int nt = n < batch ? n : batch, base = batch / nt, extra = batch % nt;
        int rc;

        for (int t = 0; t < nt; t++) {
                rc = ws_reserve(m, &m->ws[t], base + (extra > 0));
                if (rc)
                        return rc;
        }
        rc = kind == JOB_TRAIN ? dy0_reserve(m, batch) : 0;
        if (rc)
                return rc;
        p->kind = kind;
        p->nt = nt;
        p->batch = batch;
        p->x = x;
        p->y = y;
        p->pred = pred;
        p->off[0] = 0;
        for (int t = 0; t < nt; t++)
                p->off[t + 1] = p->off[t] + base + (t < extra);
        return nt;
}

/* Runs the job set up by job_setup on its nt threads; returns when all
 * are done (their results then visible to the caller). */
static void job_run(struct nn_model *m)
{
        struct pool *p = m->pool;

        pthread_mutex_lock(&p->mu);
        p->pending = p->nt - 1;
        p->arrived = 0;
        p->gen++;
        pthread_cond_broadcast(&p->go);
        pthread_mutex_unlock(&p->mu);
        job_part(m, 0);
        pthread_mutex_lock(&p->mu);
        while (p->pending > 0)
                pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
}

/* Sum of the job's per-sample losses (chunk sums added in order). */
static double job_loss_sum(const struct pool *p)
{
        double s = 0.0;

        for (int t = 0; t < p->nt; t++)
                s += p->loss[t];
        return s;
}

/* Sum of the job's argmax hits. */
static int job_hits(const struct pool *p)
{
        int h = 0;

        for (int t = 0; t < p->nt; t++)
                h += p->hits[t];
        return h;
}

/* Threads for a call on a batch of `batch` samples: 1 means the serial
 * path; otherwise workers are running and the call may split. */
static int threads_for(struct nn_model *m, int batch)
{
        int n = threads_wanted();

        if (n < 2 || batch < 2)
                return 1;
        return pool_start(m, n);
}

/* ---- train / evaluate / predict ---------------------------------------- */

/* nn_model_train_batch with n > 1 threads (labels already checked). */
static int train_par(struct nn_model *m, const float *x, const uint8_t *y,
                     int batch, int n, float *loss, int *correct)
{
        int nt = job_setup(m, JOB_TRAIN, n, x, y, NULL, batch);

        if (nt < 0)
                return nt;
        job_run(m);
        if (loss)
                *loss = (float)(job_loss_sum(m->pool) / batch);
        if (correct)
                *correct = job_hits(m->pool);
        return 0;
}

int nn_model_train_batch(struct nn_model *m, const float *x, const uint8_t *y,
                         int batch, float *loss, int *correct)
{
        const float *logits;
        int hits = 0, rc, n;
        double l;

        rc = check_batch(m, y, batch);
        if (rc)
                return rc;
        n = threads_for(m, batch);
        if (n > 1)
                return train_par(m, x, y, batch, n, loss, correct);
        rc = prepare(m, y, batch);
        if (rc)
                return rc;
        logits = forward(m, &m->ws[0], x, batch);
        l = nn__softmax_ce(m->ws[0].d0, logits, y, batch, m->classes, &hits);
        backward(m, &m->ws[0], x, batch, 0);
        if (loss)
                *loss = (float)l;
        if (correct)
                *correct = hits;
        return 0;
}

void nn_model_step(struct nn_model *m, struct nn_optim *o, float lr, size_t lo,
                   size_t count, float *copy)
{
        struct pool *p;
        double usq = 0.0;
        int n = threads_for(m, INT_MAX);

        /* the copy's range is clipped by nn_optim_range */
        if (n < 2) {
                nn_optim_step_copy(o, m->params, m->grads, lr, lo, count, copy);
                return;
        }
        p = m->pool;
        p->kind = JOB_STEP;
        p->nt = n;
        p->optim = o;
        p->lr = lr;
        p->copy_lo = lo;
        p->copy_n = count;
        p->copy = copy;
        nn_optim_begin(o, lr);
        job_run(m);
        for (int t = 0; t < n; t++)
                usq += p->usq[t];
        nn_optim_end(o, lr, usq);
}

/* Evaluate or predict with n > 1 threads: blocks of n times the per-thread
 * capacity (at least EVAL_BATCH samples), each split over the threads. */
static int eval_par(struct nn_model *m, enum job_kind kind, const float *x,
                    const uint8_t *y, uint8_t *pred, int total, int n,
                    double *loss_sum, int *hits)
{
        int cap = m->ws[0].cap, block;

        /* The smallest workspace sets the block, so that nothing grows
         * after nn_model_reserve. */
        for (int t = 1; t < n; t++)
                if (m->ws[t].cap < cap)
                        cap = m->ws[t].cap;
        block = cap > 0 && cap <= INT_MAX / n ? cap * n : 0;
        if (block < EVAL_BATCH)
                block = EVAL_BATCH;
        for (int i = 0; i < total; i += block) {
                int b = total - i < block ? total - i : block;
                int nt = job_setup(m, kind, n, x + (size_t)i * m->in_size,
                                   y ? y + i : NULL, pred ? pred + i : NULL, b);

                if (nt < 0)
                        return nt;
                job_run(m);
                *loss_sum += job_loss_sum(m->pool);
                *hits += job_hits(m->pool);
        }
        return 0;
}

int nn_model_evaluate(struct nn_model *m, const float *x, const uint8_t *y,
                      int n, float *loss, float *acc)
{
        int chunk = m->ws[0].cap > EVAL_BATCH ? m->ws[0].cap : EVAL_BATCH;
        double total = 0.0;
        int hits = 0, nt, rc;

        if (n < 1)
                return NN_EINVAL;
        for (int i = 0; i < n; i++)
                if (y[i] >= m->classes)
                        return NN_EINVAL;
        nt = threads_for(m, n);
        if (nt > 1) {
                rc = eval_par(m, JOB_EVAL, x, y, NULL, n, nt, &total, &hits);
                if (rc)
                        return rc;
                goto out;
        }
        for (int i = 0; i < n; i += chunk) {
                int b = n - i < chunk ? n - i : chunk;
                const float *logits;

                rc = prepare(m, NULL, b);
                if (rc)
                        return rc;
                logits = forward(m, &m->ws[0], x + (size_t)i * m->in_size, b);
                total += b * nn__softmax_ce(NULL, logits, y + i, b, m->classes,
                                            &hits);
        }
out:
        if (loss)
                *loss = (float)(total / n);
        if (acc)
                *acc = (float)hits / (float)n;
        return 0;
}

int nn_model_predict(struct nn_model *m, const float *x, int n, uint8_t *pred)
{
        int chunk = m->ws[0].cap > EVAL_BATCH ? m->ws[0].cap : EVAL_BATCH;
        int nt, hits = 0;
        double unused = 0.0;

        if (n < 1)
                return NN_EINVAL;
        nt = threads_for(m, n);
        if (nt > 1)
                return eval_par(m, JOB_PREDICT, x, NULL, pred, n, nt, &unused,
                                &hits);
        for (int i = 0; i < n; i += chunk) {
                int b = n - i < chunk ? n - i : chunk;
                const float *logits;
                int rc = prepare(m, NULL, b);

                if (rc)
                        return rc;
                logits = forward(m, &m->ws[0], x + (size_t)i * m->in_size, b);
                for (int s = 0; s < b; s++)
                        pred[i + s] = (uint8_t)argmax(
                            logits + (size_t)s * m->classes, m->classes);
        }
        return 0;
}

/* ---- the GEMMs of one step, for the kernel probe ----------------------- */

/* Appends one shape to out if there is room; counts it either way. */
static void shape_add(struct nn_gemm_shape *out, int max, int *n, int ta,
                      int tb, int rows, int cols, int inner)
{
        if (*n < max)
                out[*n] = (struct nn_gemm_shape){ta, tb, rows, cols, inner};
        (*n)++;
}

int nn_model_gemm_shapes(const struct nn_model *m, int batch,
                         struct nn_gemm_shape *out, int max)
{
        int n = 0;

        if (batch < 1 || batch > BATCH_MAX || max < 0)
                return NN_EINVAL;
        for (int i = 0; i < m->nlayers; i++) {
                const struct layer *l = &m->layers[i];
                int kkc = l->k * l->k * l->c, hw = l->h * l->w;
                int rows = batch;

                if (l->kind == L_POOL)
                        continue;
                if (l->kind == L_DENSE) {
                        shape_add(out, max, &n, 0, 1, batch, l->oc, l->in_size);
                        shape_add(out, max, &n, 1, 0, l->oc, l->in_size, batch);
                        if (i)
                                shape_add(out, max, &n, 0, 0, batch, l->in_size,
                                          l->oc);
                        continue;
                }
                /* conv: the im2col pass of min(batch, budget) samples */
                if ((size_t)rows > m->col_n)
                        rows = (int)m->col_n;
                rows *= hw;
                shape_add(out, max, &n, 0, 1, rows, l->oc, kkc);
                shape_add(out, max, &n, 1, 0, l->oc, kkc, rows);
                if (i)
                        shape_add(out, max, &n, 0, 0, rows, kkc, l->oc);
        }
        return n;
}

int nn_spec_gemm_shapes(const char *spec, int in_channels, int in_h, int in_w,
                        int batch, struct nn_gemm_shape *out, int max)
{
        struct nn_model *m = calloc(1, sizeof(*m));
        int n = NN_EINVAL;

        if (!m)
                return NN_ENOMEM;
        if (parse_spec(spec, in_channels, in_h, in_w, m, m->spec,
                       sizeof(m->spec)) == 0 &&
            layout(m) != 0) {
                plan_sizes(m);
                n = nn_model_gemm_shapes(m, batch, out, max);
        }
        free(m);
        return n;
}
