/*
 * model.c - models built from a spec string: parsing and canonical form,
 * the flat parameter/gradient buffers with per-layer offsets into them,
 * seeded initialisation, and the forward/backward drivers.
 *
 * Invariants: params and grads are each ONE allocation of nparams floats,
 * laid out layer by layer (weights then bias); the layout is a function of
 * the canonical spec alone.  Workspaces (activations, two ping-pong
 * gradient buffers, one im2col buffer of bounded size) are sized for `cap`
 * samples and only grow, so a training loop with a fixed batch allocates
 * nothing after its first step (or after nn_model_reserve).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"
#include "nn_layers.h"

/* Tunables. */
enum {
        /* Bound on any number in a spec: no layer here is wider. */
        SPEC_NUM_MAX = 1 << 16,
        /* Most layers in a spec; a Pi-class model has a handful. */
        LAYERS_MAX = 32,
        /* im2col workspace in floats (16 MB): big enough for GEMMs with
         * thousands of rows (BLIS is efficient there), small enough that a
         * CNN's memory does not scale with batch size through it. */
        COL_BUDGET = 1 << 22,
        /* Samples per forward pass in evaluate when the model holds
         * workspaces for fewer: GEMMs of ~100 rows are already efficient. */
        EVAL_BATCH = 100,
        /* Largest batch accepted (keeps size_t products far from overflow). */
        BATCH_MAX = 1 << 20,
        /* Largest activation of one sample, in floats (256 MB). */
        ACT_MAX = 1 << 26,
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
        float *out;   /* [cap, out_size] */
        int32_t *idx; /* pool: [cap, out_size] winners */
};

struct nn_model {
        char spec[NN_SPEC_MAX];
        int in_c, in_h, in_w, in_size, classes;
        int nlayers;
        struct layer layers[LAYERS_MAX];
        size_t nparams;
        float *params, *grads;
        int cap;        /* workspace capacity in samples */
        size_t dmax;    /* largest per-sample activation */
        float *d0, *d1; /* [cap, dmax] ping-pong gradients */
        float *col;     /* im2col workspace */
        size_t col_len;
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
        init_params(m, seed);
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
                if (cl > m->col_len)
                        m->col_len = cl;
        }
        if (m->col_len) {
                /* One sample at least; as many as fit in the budget. */
                size_t per = m->col_len;
                size_t n = COL_BUDGET / per ? COL_BUDGET / per : 1;
                m->col_len = per * n;
                m->col = malloc(sizeof(float) * m->col_len);
                if (!m->col)
                        goto out;
        }
        *out = m;
        return 0;
out:
        nn_model_free(m);
        return rc;
}

/* Samples one im2col pass of this conv layer may take at once. */
static int conv_chunk(const struct nn_model *m, const struct layer *l)
{
        size_t per = nn__conv_col_len(&l->conv, 1);

        return (int)(m->col_len / per);
}

static void free_workspaces(struct nn_model *m)
{
        for (int i = 0; i < m->nlayers; i++) {
                free(m->layers[i].out);
                free(m->layers[i].idx);
                m->layers[i].out = NULL;
                m->layers[i].idx = NULL;
        }
        free(m->d0);
        free(m->d1);
        m->d0 = m->d1 = NULL;
        m->cap = 0;
}

void nn_model_free(struct nn_model *m)
{
        if (!m)
                return;
        free_workspaces(m);
        free(m->col);
        free(m->params);
        free(m->grads);
        free(m);
}

int nn_model_reserve(struct nn_model *m, int max_batch)
{
        size_t n;

        if (max_batch < 1 || max_batch > BATCH_MAX)
                return NN_EINVAL;
        if (max_batch <= m->cap)
                return 0;
        /* Kernels index rows of a batch with int. */
        if ((size_t)max_batch * m->dmax > INT_MAX)
                return NN_EINVAL;
        free_workspaces(m);
        n = (size_t)max_batch;
        for (int i = 0; i < m->nlayers; i++) {
                struct layer *l = &m->layers[i];

                l->out = malloc(sizeof(float) * n * l->out_size);
                if (!l->out)
                        goto fail;
                if (l->kind == L_POOL) {
                        l->idx = malloc(sizeof(int32_t) * n * l->out_size);
                        if (!l->idx)
                                goto fail;
                }
        }
        m->d0 = malloc(sizeof(float) * n * m->dmax);
        m->d1 = malloc(sizeof(float) * n * m->dmax);
        if (!m->d0 || !m->d1)
                goto fail;
        m->cap = max_batch;
        return 0;
fail:
        free_workspaces(m);
        return NN_ENOMEM;
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

/* ---- forward / backward ------------------------------------------------ */

/* Runs every layer on batch samples of x; returns the logits [B, classes]. */
static const float *forward(struct nn_model *m, const float *x, int batch)
{
        const float *in = x;
        const float *p = m->params;

        for (int i = 0; i < m->nlayers; i++) {
                struct layer *l = &m->layers[i];

                switch (l->kind) {
                case L_DENSE:
                        nn__dense_forward(l->out, in, p + l->w_off,
                                          p + l->b_off, batch, l->in_size,
                                          l->oc, l->relu);
                        break;
                case L_CONV:
                        nn__conv_forward(l->out, in, p + l->w_off, p + l->b_off,
                                         &l->conv, batch, m->col,
                                         conv_chunk(m, l), l->relu);
                        break;
                case L_POOL:
                        nn__maxpool_forward(l->out, l->idx, in, batch, l->h,
                                            l->w, l->c, l->k);
                        break;
                }
                in = l->out;
        }
        return in;
}

/* Back-propagates dz (gradient of the logits, in m->d0) to every layer,
 * writing the parameter gradients.  The input gradient is never needed. */
static void backward(struct nn_model *m, const float *x, int batch)
{
        float *d = m->d0, *other = m->d1, *t;
        const float *p = m->params;
        float *g = m->grads;

        for (int i = m->nlayers - 1; i >= 0; i--) {
                struct layer *l = &m->layers[i];
                const float *in = i ? m->layers[i - 1].out : x;
                float *dx = i ? other : NULL;
                const float *ry = l->relu ? l->out : NULL;

                switch (l->kind) {
                case L_DENSE:
                        nn__dense_backward(dx, g + l->w_off, g + l->b_off, d,
                                           ry, in, p + l->w_off, batch,
                                           l->in_size, l->oc);
                        break;
                case L_CONV:
                        nn__conv_backward(dx, g + l->w_off, g + l->b_off, d, ry,
                                          in, p + l->w_off, &l->conv, batch,
                                          m->col, conv_chunk(m, l));
                        break;
                case L_POOL:
                        if (dx)
                                nn__maxpool_backward(dx, d, l->idx, batch, l->h,
                                                     l->w, l->c, l->k);
                        break;
                }
                t = d;
                d = other;
                other = t;
        }
}

/* Checks labels and batch size and grows workspaces if needed. */
static int prepare(struct nn_model *m, const uint8_t *y, int batch)
{
        if (batch < 1 || batch > BATCH_MAX)
                return NN_EINVAL;
        if (y)
                for (int i = 0; i < batch; i++)
                        if (y[i] >= m->classes)
                                return NN_EINVAL;
        return nn_model_reserve(m, batch);
}

int nn_model_train_batch(struct nn_model *m, const float *x, const uint8_t *y,
                         int batch, float *loss, int *correct)
{
        const float *logits;
        int hits = 0, rc;
        double l;

        rc = prepare(m, y, batch);
        if (rc)
                return rc;
        logits = forward(m, x, batch);
        l = nn__softmax_ce(m->d0, logits, y, batch, m->classes, &hits);
        backward(m, x, batch);
        if (loss)
                *loss = (float)l;
        if (correct)
                *correct = hits;
        return 0;
}

int nn_model_evaluate(struct nn_model *m, const float *x, const uint8_t *y,
                      int n, float *loss, float *acc)
{
        int chunk = m->cap > EVAL_BATCH ? m->cap : EVAL_BATCH;
        double total = 0.0;
        int hits = 0;

        if (n < 1)
                return NN_EINVAL;
        for (int i = 0; i < n; i++)
                if (y[i] >= m->classes)
                        return NN_EINVAL;
        for (int i = 0; i < n; i += chunk) {
                int b = n - i < chunk ? n - i : chunk;
                const float *logits;
                int rc = prepare(m, NULL, b);

                if (rc)
                        return rc;
                logits = forward(m, x + (size_t)i * m->in_size, b);
                total += b * nn__softmax_ce(NULL, logits, y + i, b, m->classes,
                                            &hits);
        }
        if (loss)
                *loss = (float)(total / n);
        if (acc)
                *acc = (float)hits / (float)n;
        return 0;
}

int nn_model_predict(struct nn_model *m, const float *x, int n, uint8_t *pred)
{
        int chunk = m->cap > EVAL_BATCH ? m->cap : EVAL_BATCH;

        if (n < 1)
                return NN_EINVAL;
        for (int i = 0; i < n; i += chunk) {
                int b = n - i < chunk ? n - i : chunk;
                const float *logits;
                int rc = prepare(m, NULL, b);

                if (rc)
                        return rc;
                logits = forward(m, x + (size_t)i * m->in_size, b);
                for (int s = 0; s < b; s++) {
                        const float *z = logits + (size_t)s * m->classes;
                        int arg = 0;
                        for (int j = 1; j < m->classes; j++)
                                if (z[j] > z[arg])
                                        arg = j;
                        pred[i + s] = (uint8_t)arg;
                }
        }
        return 0;
}
