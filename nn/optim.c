/*
 * optim.c - optimizers (SGD with momentum/Nesterov and L2 weight decay;
 * Adam with decoupled weight decay) and learning-rate schedules.
 *
 * The state is one allocation laid out like the parameters (SGD: velocity;
 * Adam: m then v), so an update is one flat loop over nparams and the state
 * can be saved, loaded or shipped to a peer as one array.  The step counter
 * travels with it (Adam's bias correction depends on it).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"
#include "nn_layers.h"

/* pi to double precision (M_PI is not in strict C11). */
#define NN_PI 3.14159265358979323846
/* floats per block of nn_optim_step_copy: 16 KB, half of a 32 KB L1 */
#define NN_OPTIM_COPY_BLOCK 4096

struct nn_optim {
        struct nn_optim_config cfg;
        size_t n;       /* parameters */
        size_t len;     /* state floats */
        uint64_t steps; /* updates applied */
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
        else
                k = cfg->momentum > 0.0f ? 1 : 0;
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

/* Adam with bias correction and decoupled (AdamW) weight decay, over
 * params [off, off + n).  Vectorized only because this file is built with
 * -fno-math-errno (nn/CMakeLists.txt): with errno semantics GCC calls
 * sqrtf one element at a time; the results are the same bits. */
NN_HOT_WIDE static void adam(struct nn_optim *o, float *restrict p,
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

/* The update of params [off, off + n). */
static void update(struct nn_optim *o, float *params, const float *grads,
                   float lr, size_t off, size_t n)
{
        const struct nn_optim_config *c = &o->cfg;

        if (n == 0)
                return;
        if (c->kind == NN_OPTIM_ADAM)
                adam(o, params, grads, lr, off, n);
        else if (o->len)
                sgd_momentum(params + off, grads + off, o->state + off, n, lr,
                             c->momentum, c->weight_decay, c->nesterov);
        else
                sgd_plain(params + off, grads + off, n, lr, c->weight_decay);
}

void nn_optim_step(struct nn_optim *o, float *params, const float *grads,
                   float lr)
{
        update(o, params, grads, lr, 0, o->n);
        o->steps++;
}

void nn_optim_step_copy(struct nn_optim *o, float *params, const float *grads,
                        float lr, size_t lo, size_t count, float *copy)
{
        size_t hi;

        if (!copy || lo >= o->n)
                count = 0;
        else if (count > o->n - lo)
                count = o->n - lo;
        hi = lo + count;
        if (count == 0) {
                nn_optim_step(o, params, grads, lr);
                return;
        }
        update(o, params, grads, lr, 0, lo);
        /* block by block, each copied while it is still in L1 */
        for (size_t b = lo; b < hi; b += NN_OPTIM_COPY_BLOCK) {
                size_t k =
                    hi - b < NN_OPTIM_COPY_BLOCK ? hi - b : NN_OPTIM_COPY_BLOCK;

                update(o, params, grads, lr, b, k);
                memcpy(copy + (b - lo), params + b, k * sizeof(float));
        }
        update(o, params, grads, lr, hi, o->n - hi);
        o->steps++;
}

float *nn_optim_state(struct nn_optim *o)
{
        return o->state;
}

size_t nn_optim_state_len(const struct nn_optim *o)
{
        return o->len;
}

uint64_t nn_optim_steps(const struct nn_optim *o)
{
        return o->steps;
}

void nn_optim_set_steps(struct nn_optim *o, uint64_t steps)
{
        o->steps = steps;
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
