/*
 * optim.c - optimizers (SGD with momentum/Nesterov and L2 weight decay;
 * quasi-global momentum for decentralized training on skewed data; Adam
 * with decoupled weight decay) and learning-rate schedules.
 *
 * The state is one allocation laid out like the parameters (SGD: velocity;
 * quasi-global SGD: m then the parameters the last update left; Adam: m
 * then v), so an update is one flat loop over nparams and the state can be
 * saved, loaded or shipped to a peer as one array.  The step counter
 * travels with it (Adam's bias correction depends on it).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "layers.h"

/* pi to double precision (M_PI is not in strict C11). */
#define NN_PI 3.14159265358979323846
/* floats per block of nn_optim_step_copy: 16 KB, half of a 32 KB L1 */
#define NN_OPTIM_COPY_BLOCK 4096

struct nn_optim {
        struct nn_optim_config cfg;
        size_t n;       /* parameters */
        size_t len;     /* state floats */
        uint64_t steps; /* updates applied */
        /* quasi-global momentum (sgd_quasi_global) */
        float last_lr;      /* rate of the last update in this process (0:
                               none yet, use the current) */
        float ext;          /* this step's weight of the caller's change */
        double usq;         /* |u|^2 of the last update's local step */
        double moved_sumsq; /* |change|^2 reported since (nn_optim_moved) */
        float *state;
};

/* Returns 0 if the configuration is usable. */
static int config_check(const struct nn_optim_config *c)
{
        if (!(c->lr >= 0.0f) || !(c->weight_decay >= 0.0f))
                return NN_EINVAL;
        if (c->kind == NN_OPTIM_SGD)
                return c->momentum >= 0.0f && c->momentum < 1.0f ? 0
                                                                 : NN_EINVAL;
        if (c->kind == NN_OPTIM_ADAM)
                return c->beta1 >= 0.0f && c->beta1 < 1.0f &&
                               c->beta2 >= 0.0f && c->beta2 < 1.0f &&
                               c->eps > 0.0f
                           ? 0
                           : NN_EINVAL;
        return NN_EINVAL;
}

int nn_optim_create(const struct nn_optim_config *cfg, size_t nparams,
                    struct nn_optim **out)
{
        struct nn_optim *o;
        size_t k;

        if (!cfg || nparams == 0 || config_check(cfg))
                return NN_EINVAL;
        if (cfg->kind == NN_OPTIM_ADAM)
                k = 2;
        else if (cfg->momentum > 0.0f)
                k = cfg->quasi_global ? 2 : 1;
        else
                k = 0;
        o = calloc(1, sizeof(*o));
        if (!o)
                return NN_ENOMEM;
        o->cfg = *cfg;
        o->n = nparams;
        o->len = k * nparams;
        if (o->len) {
                o->state = calloc(o->len, sizeof(float));
                if (!o->state) {
                        free(o);
                        return NN_ENOMEM;
                }
        }
        *out = o;
        return 0;
}

void nn_optim_free(struct nn_optim *o)
{
        if (!o)
                return;
        free(o->state);
        free(o);
}

/* p -= lr * (g + wd p), no momentum. */
NN_HOT static void sgd_plain(float *restrict p, const float *restrict g,
                             size_t n, float lr, float wd)
{
        for (size_t i = 0; i < n; i++)
                p[i] -= lr * (g[i] + wd * p[i]);
}

/* PyTorch SGD: g' = g + wd p; v = mu v + g'; p -= lr (nesterov ? g' + mu v
 * : v).  The first step starts from v = 0, which gives v = g' as PyTorch. */
NN_HOT static void sgd_momentum(float *restrict p, const float *restrict g,
                                float *restrict v, size_t n, float lr, float mu,
                                float wd, int nesterov)
{
        if (nesterov) {
                for (size_t i = 0; i < n; i++) {
                        float gi = g[i] + wd * p[i];
                        v[i] = mu * v[i] + gi;
                        p[i] -= lr * (gi + mu * v[i]);
                }
        } else if (wd != 0.0f) {
                for (size_t i = 0; i < n; i++) {
                        v[i] = mu * v[i] + g[i] + wd * p[i];
                        p[i] -= lr * v[i];
                }
        } else {
                for (size_t i = 0; i < n; i++) {
                        v[i] = mu * v[i] + g[i];
                        p[i] -= lr * v[i];
                }
        }
}

/* Quasi-global momentum (Lin et al., ICML 2021, QG-DSGDm): the buffer m
 * is a moving average of the model's movement between two updates, per
 * unit rate, so what averaging with the peers moved counts as well as the
 * local step; under skewed data the local gradients alone steer each
 * replica towards its own labels.  The movement has two parts, taken in
 * two passes: the local step u, folded in by the pass that makes it, and
 * the change the caller made since (post - p, post being the parameters
 * that pass left), folded in by the next pass at weight ext (lambda /
 * lr_prev; 0 on the first step).  Same arithmetic as the paper's one
 * movement term, with the caller's part boundable (nn_optim_moved).
 * Returns the sum of u^2. */
static inline __attribute__((always_inline)) double
qg_pass(float *restrict p, const float *restrict g, float *restrict m,
        float *restrict post, size_t n, float lr, float ext, float mu, float wd,
        const int nesterov)
{
        /* QG_LANES sums of u^2, so the loop vectorizes without reordering
         * a single sum (which ISO C forbids the compiler to do) */
        enum { QG_LANES = 8 };
        float keep = 1.0f - mu, lane[QG_LANES] = {0};
        double usq = 0.0;
        size_t i = 0;

#define QG_ELEMENT(j, sum)                                                     \
        do {                                                                   \
                float gi = g[j] + wd * p[j];                                   \
                float mm = m[j] + keep * ext * (post[j] - p[j]);               \
                float v = gi + mu * mm;                                        \
                float u = nesterov ? gi + mu * v : v;                          \
                                                                               \
                m[j] = mu * mm + keep * u;                                     \
                p[j] -= lr * u;                                                \
                post[j] = p[j];                                                \
                sum += u * u;                                                  \
        } while (0)
        for (; i + QG_LANES <= n; i += QG_LANES)
                for (size_t k = 0; k < QG_LANES; k++)
                        QG_ELEMENT(i + k, lane[k]);
        for (; i < n; i++)
                QG_ELEMENT(i, usq);
#undef QG_ELEMENT
        for (size_t k = 0; k < QG_LANES; k++)
                usq += (double)lane[k];
        return usq;
}

NN_HOT static double sgd_quasi_global(float *restrict p,
                                      const float *restrict g,
                                      float *restrict m, float *restrict post,
                                      size_t n, float lr, float ext, float mu,
                                      float wd, int nesterov)
{
        return nesterov ? qg_pass(p, g, m, post, n, lr, ext, mu, wd, 1)
                        : qg_pass(p, g, m, post, n, lr, ext, mu, wd, 0);
}

/* Adam with bias correction and decoupled (AdamW) weight decay, over
 * params [off, off + n).  Vectorized only because this file is built with
 * -fno-math-errno (nn/CMakeLists.txt): with errno semantics GCC calls
 * sqrtf one element at a time; the results are the same bits. */
NN_HOT_WIDE static void adam(const struct nn_optim *o, float *restrict p,
                             const float *restrict g, float lr, size_t off,
                             size_t n)
{
        const struct nn_optim_config *c = &o->cfg;
        float *restrict m = o->state + off, *restrict v = o->state + o->n + off;
        double t = (double)(o->steps + 1);
        float bc1 = (float)(1.0 - pow(c->beta1, t));
        float bc2 = (float)(1.0 - pow(c->beta2, t));
        float step = lr / bc1, inv_sqrt_bc2 = 1.0f / sqrtf(bc2);
        float b1 = c->beta1, b2 = c->beta2, decay = lr * c->weight_decay;

        p += off;
        g += off;
        for (size_t i = 0; i < n; i++) {
                m[i] = b1 * m[i] + (1.0f - b1) * g[i];
                v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
                p[i] -= step * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + c->eps) +
                        decay * p[i];
        }
}

/* The weight of the caller's change in this step's buffer: lambda / the
 * rate of the last update; 0 before the first update (post is not yet
 * the parameters); the current rate on the first update after a load
 * (the state's post is known, the rate is not).  lambda bounds the
 * change, per unit rate, to quasi_global_bound x the last local step
 * when the caller reported it (nn_optim_moved); else 1. */
static float qg_ext(const struct nn_optim *o, float lr)
{
        float r = o->last_lr > 0.0f ? o->last_lr : lr;
        float bound = o->cfg.quasi_global_bound;
        double lambda = 1.0;

        if (o->steps == 0 || !(r > 0.0f))
                return 0.0f;
        if (bound > 0.0f && o->moved_sumsq > 0.0) {
                /* |change| / r <= bound x |u|, |u| of the last pass */
                double lim = (double)bound * (double)r * sqrt(o->usq);

                if (lim * lim < o->moved_sumsq)
                        lambda = lim / sqrt(o->moved_sumsq);
        }
        return (float)(lambda / (double)r);
}

/* The update of params [off, off + n).  Reads o, writes only params and
 * the state in that range, so disjoint ranges may run at once
 * (nn_optim_range).  Returns the range's sum of u^2 (quasi-global
 * momentum; 0 otherwise). */
static double update(const struct nn_optim *o, float *params,
                     const float *grads, float lr, size_t off, size_t n)
{
        const struct nn_optim_config *c = &o->cfg;

        if (n == 0)
                return 0.0;
        if (c->kind == NN_OPTIM_ADAM)
                adam(o, params, grads, lr, off, n);
        else if (o->len && c->quasi_global)
                return sgd_quasi_global(params + off, grads + off,
                                        o->state + off, o->state + o->n + off,
                                        n, lr, o->ext, c->momentum,
                                        c->weight_decay, c->nesterov);
        else if (o->len)
                sgd_momentum(params + off, grads + off, o->state + off, n, lr,
                             c->momentum, c->weight_decay, c->nesterov);
        else
                sgd_plain(params + off, grads + off, n, lr, c->weight_decay);
        return 0.0;
}

/* Before a step's passes: the quasi-global weight of the caller's change. */
void nn_optim_begin(struct nn_optim *o, float lr)
{
        if (o->cfg.quasi_global)
                o->ext = qg_ext(o, lr);
}

/* After them: count the step, keep its rate and size, forget the change. */
void nn_optim_end(struct nn_optim *o, float lr, double usq)
{
        o->steps++;
        o->last_lr = lr;
        o->usq = usq;
        o->moved_sumsq = 0.0;
}

double nn_optim_range(const struct nn_optim *o, float *params,
                      const float *grads, float lr, size_t off, size_t n,
                      size_t lo, size_t count, float *copy)
{
        size_t hi = 0, a, b;
        double usq = 0.0;

        if (off >= o->n)
                return 0.0;
        if (n > o->n - off)
                n = o->n - off;
        if (copy && lo < o->n)
                hi = count < o->n - lo ? lo + count : o->n;
        /* the part of [lo, hi) inside [off, off + n): [a, b) */
        a = lo > off ? lo : off;
        b = hi < off + n ? hi : off + n;
        if (!copy || a >= b)
                return update(o, params, grads, lr, off, n);
        usq += update(o, params, grads, lr, off, a - off);
        /* block by block, each copied while it is still in L1 */
        for (size_t i = a; i < b; i += NN_OPTIM_COPY_BLOCK) {
                size_t k =
                    b - i < NN_OPTIM_COPY_BLOCK ? b - i : NN_OPTIM_COPY_BLOCK;

                usq += update(o, params, grads, lr, i, k);
                memcpy(copy + (i - lo), params + i, k * sizeof(float));
        }
        usq += update(o, params, grads, lr, b, off + n - b);
        return usq;
}

void nn_optim_step(struct nn_optim *o, float *params, const float *grads,
                   float lr)
{
        nn_optim_step_copy(o, params, grads, lr, 0, 0, NULL);
}

void nn_optim_moved(struct nn_optim *o, double sumsq)
{
        if (sumsq > 0.0)
                o->moved_sumsq += sumsq;
}

void nn_optim_step_copy(struct nn_optim *o, float *params, const float *grads,
                        float lr, size_t lo, size_t count, float *copy)
{
        if (!copy || lo >= o->n)
                count = 0;
        else if (count > o->n - lo)
                count = o->n - lo;
        nn_optim_begin(o, lr);
        nn_optim_end(o, lr,
                     nn_optim_range(o, params, grads, lr, 0, o->n, lo, count,
                                    count ? copy : NULL));
}

float *nn_optim_state(struct nn_optim *o)
{
        return o->state;
}

size_t nn_optim_state_len(const struct nn_optim *o)
{
        return o->len;
}

enum nn_optim_state_kind nn_optim_state_kind(const struct nn_optim *o)
{
        if (o->cfg.kind == NN_OPTIM_ADAM)
                return NN_OPTIM_STATE_ADAM;
        if (o->len == 0)
                return NN_OPTIM_STATE_NONE;
        return o->cfg.quasi_global ? NN_OPTIM_STATE_QUASI_GLOBAL
                                   : NN_OPTIM_STATE_VELOCITY;
}

/* Floats a state of this kind holds for n parameters. */
static size_t kind_len(enum nn_optim_state_kind kind, size_t n)
{
        switch (kind) {
        case NN_OPTIM_STATE_NONE:
                return 0;
        case NN_OPTIM_STATE_VELOCITY:
                return n;
        case NN_OPTIM_STATE_QUASI_GLOBAL:
        case NN_OPTIM_STATE_ADAM:
                return 2 * n;
        }
        return SIZE_MAX;
}

int nn_optim_load_state(struct nn_optim *o, enum nn_optim_state_kind kind,
                        const float *state, size_t len, const float *params)
{
        enum nn_optim_state_kind mine = nn_optim_state_kind(o);
        size_t n = o->n;

        if (len != kind_len(kind, n))
                return NN_EMISMATCH;
        if (kind == mine) {
                if (len)
                        memcpy(o->state, state, len * sizeof(float));
                return 0;
        }
        if (kind == NN_OPTIM_STATE_VELOCITY &&
            mine == NN_OPTIM_STATE_QUASI_GLOBAL) {
                memcpy(o->state, state, n * sizeof(float));
                memcpy(o->state + n, params, n * sizeof(float));
                return 0;
        }
        if (kind == NN_OPTIM_STATE_QUASI_GLOBAL &&
            mine == NN_OPTIM_STATE_VELOCITY) {
                memcpy(o->state, state, n * sizeof(float)); /* m */
                return 0;
        }
        return NN_EMISMATCH;
}

uint64_t nn_optim_steps(const struct nn_optim *o)
{
        return o->steps;
}

void nn_optim_set_steps(struct nn_optim *o, uint64_t steps)
{
        o->steps = steps;
        o->last_lr = 0.0f; /* a loaded state: its rate and step size are */
        o->usq = 0.0;      /* not known (an unbounded change then) */
        o->moved_sumsq = 0.0;
}

const struct nn_optim_config *nn_optim_config(const struct nn_optim *o)
{
        return &o->cfg;
}

float nn_lr_at(const struct nn_lr_schedule *s, uint64_t step)
{
        if (step < s->warmup_steps)
                return s->base_lr * (float)(step + 1) / (float)s->warmup_steps;
        switch (s->kind) {
        case NN_LR_CONST:
                return s->base_lr;
        case NN_LR_STEP:
                if (s->step_every == 0)
                        return s->base_lr;
                return s->base_lr *
                       powf(s->gamma, (float)(step / s->step_every));
        case NN_LR_COSINE: {
                uint64_t t = step - s->warmup_steps;
                uint64_t T = s->total_steps > s->warmup_steps
                                 ? s->total_steps - s->warmup_steps
                                 : 0;
                double f;

                if (T == 0 || t >= T)
                        return s->min_lr;
                f = 0.5 * (1.0 + cos(NN_PI * (double)t / (double)T));
                return s->min_lr + (s->base_lr - s->min_lr) * (float)f;
        }
        }
        return s->base_lr;
}
