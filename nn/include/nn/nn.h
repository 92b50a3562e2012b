/*
 * nn.h - the learning engine's public interface: GEMM wrapper, models built
 * from a spec string, training/evaluation on row-major batches, optimizers
 * and learning-rate schedules.
 *
 * Invariants the rest of the system relies on:
 *  - Every parameter of a model lives in ONE contiguous float buffer
 *    (nn_model_params, length nn_model_nparams); gradients mirror that layout
 *    in a second buffer (nn_model_grads).  Optimizer state is k buffers of the
 *    same layout laid end to end (nn_optim_state).  So "the gradient" is one
 *    flat float[nparams]: gossip signs, compresses, sends and averages it.
 *  - The layout depends only on the canonical spec string (nn_model_spec),
 *    never on the seed, thread count or batch size; two models with the same
 *    canonical spec can exchange parameters, gradients and optimizer state.
 *  - Everything random comes from the seed passed in; for a fixed thread
 *    count (nn_threads_set) the same seed and data give bit-identical
 *    results, and n threads agree with one up to float rounding.
 *  - A model or optimizer is not thread-safe: one thread at a time calls
 *    it (a model may use helper threads of its own inside a call).
 *    Different models may be used from different threads.
 *  - Calls return 0 or a negative NN_E* code (nn_err.h); nothing prints.
 *
 * Model spec grammar (tokens separated by '-'):
 *      spec   := [input '-'] layer ('-' layer)* | preset
 *      input  := N              flat input of N features (MLP)
 *              | CxHxW          image input, C channels of H x W
 *      layer  := N              dense layer with N outputs; every dense layer
 *                               but the last is followed by ReLU
 *              | 'c' N 'k' K    conv2d, N filters K x K, stride 1, "same"
 *                               zero padding (K odd), followed by ReLU
 *              | 'p' S          max-pool S x S, stride S (H, W divisible by S)
 *      preset := "cnn"          the default small CNN for 28x28x1 images
 *                               (see NN_PRESET_CNN)
 * A leading bare number is always the input token (so an MLP spec names its
 * input width: "784-512-10").
 * The last layer must be dense; its width is the number of classes (2..256).
 * Dense after conv/pool flattens (in the model's internal channels-last
 * order; a first dense layer on an image input sees it as stored, C,H,W).
 * Image inputs are planar [C][H][W] per sample.  If the spec has no input
 * token, the input shape comes from the in_channels/in_h/in_w arguments; if
 * it has one and the arguments are non-zero, they must agree (C*H*W for a
 * flat input).  The canonical spec always starts with the input token, e.g.
 *      "784-512-10"            "1x28x28-c32k3-p2-c64k3-p2-128-10"
 * and nn_model_create(nn_model_spec(m), 0, 0, 0, ...) rebuilds the layout.
 *
 * Inputs are floats (see nn_images_to_float); labels are uint8 class ids.
 */
#ifndef NN_H
#define NN_H

#include <stddef.h>
#include <stdint.h>

#include "nn/nn_err.h"

/* Longest canonical spec string, including the terminating NUL. */
#define NN_SPEC_MAX 256

/* What the preset name "cnn" expands to (input shape from the arguments). */
#define NN_PRESET_CNN "c32k3-p2-c64k3-p2-128-10"

/* ---- library set-up ---------------------------------------------------- */

/* Initialises BLIS (idempotent); call once before any thread uses nn_*. */
int nn_lib_init(void);

/* Releases BLIS's global state (bli_finalize); no nn_* call may follow. */
void nn_lib_finalize(void);

/* Sets the number of threads every later nn_model_train_batch, _evaluate
 * and _predict computes with (n < 1 counts as 1; at most 16 are used): the
 * batch is cut into n contiguous chunks, one per thread (the caller and
 * n - 1 worker threads each model starts on first use, blocked between
 * calls, joined by nn_model_free), each GEMM on one BLIS thread.  n = 1 is
 * the plain serial path.  Process-wide; safe to call from any thread. */
void nn_threads_set(int n);

/* Returns the thread count last set (1 if never set). */
int nn_threads_get(void);

/* ---- GEMM -------------------------------------------------------------- */

/*
 * C = alpha * op(A) * op(B) + beta * C, all row-major.  op(A) is m x k,
 * op(B) is k x n, C is m x n.  transa != 0 means A is stored k x m (so
 * op(A) = A^T); lda/ldb/ldc are row strides in floats.  beta == 0 ignores
 * the old contents of C (NaN included).  Every GEMM of the engine goes here.
 */
void nn_gemm(int transa, int transb, int m, int n, int k, float alpha,
             const float *a, int lda, const float *b, int ldb, float beta,
             float *c, int ldc);

/* ---- BLIS kernel sets (sub-configurations) ----------------------------
 *
 * A BLIS build carries several kernel sets ("sub-configurations": skx,
 * zen3, haswell, ...) and picks one at its initialisation from CPUID, or
 * from the environment variable BLIS_ARCH_TYPE, which BLIS 0.9 reads once,
 * as a NUMBER (nn_blis_arch_id gives it).  node/train/kernel.c times the
 * candidates in child processes and sets the fastest before nn_lib_init. */

/* Number of sub-configuration ids (0 .. count-1; not all compiled in). */
int nn_blis_arch_count(void);

/* Name of sub-configuration id ("skx", "zen3", ...), or NULL if id is out
 * of range. */
const char *nn_blis_arch_name(int id);

/* The id of name, or NN_EINVAL if this BLIS has no such name. */
int nn_blis_arch_id(const char *name);

/* 0 unless sub-configuration id is compiled into this BLIS build and this
 * CPU has the instructions its kernels need (x86: from CPUID; elsewhere
 * only the first test); else its generation: 3 for FMA-era kernels (and
 * every optimized non-x86 set), 2 for older vector kernels (sandybridge,
 * penryn), 1 for the reference kernels (generic). */
int nn_blis_arch_usable(int id);

/* The sub-configuration BLIS uses in this process (initialises BLIS: call
 * it only after the choice is made). */
const char *nn_blis_arch_active(void);

/* BLIS's version string, e.g. "0.9.0" (does not initialise BLIS). */
const char *nn_blis_version(void);

/* One GEMM of a training step: C[m,n] = op(A)[m,k] op(B)[k,n], transa and
 * transb as for nn_gemm, A, B and C dense (lda etc. = their row length). */
struct nn_gemm_shape {
        int transa, transb, m, n, k;
};

/* ---- data conversion --------------------------------------------------- */

/* Writes dst[i] = src[i] / 255 for i < n: pixels in [0, 1], as PyTorch's
 * ToTensor() does, so hyper-parameters carry over unchanged. */
void nn_images_to_float(const uint8_t *src, size_t n, float *dst);

/* ---- models ------------------------------------------------------------ */

struct nn_model;

/*
 * Builds a model from spec (grammar above) with weights drawn from seed
 * (He-uniform for layers followed by ReLU, Xavier-uniform otherwise, biases
 * zero).  in_channels/in_h/in_w give the input shape when the spec does not
 * (0 otherwise).  On success *out owns the model; on error (NN_EINVAL for a
 * bad spec or shape, NN_ENOMEM) *out is untouched.
 */
int nn_model_create(const char *spec, int in_channels, int in_h, int in_w,
                    uint64_t seed, struct nn_model **out);

/* Frees the model and everything it owns (joining its worker threads);
 * NULL is a no-op. */
void nn_model_free(struct nn_model *m);

/* Writes the canonical form of spec (see above) into out (outlen bytes,
 * NN_SPEC_MAX is always enough); returns 0 or NN_EINVAL. */
int nn_spec_canonical(const char *spec, int in_channels, int in_h, int in_w,
                      char *out, size_t outlen);

/* The number of floats nn_model_create would lay out for the same
 * arguments, without allocating the model's buffers or drawing weights:
 * what a node needs to know before it loads its data (the cluster's
 * settings, the exchange's buffers). 0, or NN_EINVAL / NN_ENOMEM as
 * nn_model_create; *nparams is set only on success. */
int nn_spec_nparams(const char *spec, int in_channels, int in_h, int in_w,
                    size_t *nparams);

/* Number of floats in the parameter (and gradient) buffer. */
size_t nn_model_nparams(const struct nn_model *m);

/* The flat parameter buffer; valid for the model's lifetime, writable. */
float *nn_model_params(struct nn_model *m);

/* The flat gradient buffer, same layout as the parameters. */
float *nn_model_grads(struct nn_model *m);

/* The canonical spec string; valid for the model's lifetime. */
const char *nn_model_spec(const struct nn_model *m);

/* Floats per input sample (C*H*W). */
int nn_model_input_size(const struct nn_model *m);

/* Number of output classes (width of the last dense layer). */
int nn_model_classes(const struct nn_model *m);

/* One layer as the flat buffer holds it, for exporters: weights at
 * params[w_off .. w_off + nw), bias at [b_off .. b_off + nb). Dense
 * weights are [out][in]; conv weights [filters][k][k][in channels]. Shapes
 * are (channels, height, width); a dense layer's are (features, 1, 1).
 * Inside the model images are channels-last, so a dense layer after a
 * conv or pool reads its input flattened in (h, w, c) order, and a first
 * dense layer on an image input reads it as stored, (c, h, w). */
enum nn_layer_kind { NN_LAYER_DENSE = 0, NN_LAYER_CONV = 1, NN_LAYER_POOL = 2 };

struct nn_layer_info {
        enum nn_layer_kind kind;
        int relu;             /* followed by ReLU */
        int in_c, in_h, in_w; /* input shape */
        int out_c, out_h, out_w;
        int k; /* conv kernel side, pool size; 0 for dense */
        size_t w_off, nw, b_off, nb;
};

/* Number of layers (the spec's tokens after the input). */
int nn_model_layers(const struct nn_model *m);

/* Describes layer i (0-based) into *out; NN_EINVAL if i is out of range. */
int nn_model_layer(const struct nn_model *m, int i, struct nn_layer_info *out);

/* Pre-grows the workspaces for batches up to max_batch at the current
 * thread count (starting the model's worker threads if it is > 1), so that
 * later train/evaluate calls with batch <= max_batch never allocate. */
int nn_model_reserve(struct nn_model *m, int max_batch);

/*
 * One forward + backward pass over batch samples (x: batch x input_size,
 * y: batch labels < classes).  Overwrites the gradient buffer with the mean
 * gradient of the cross-entropy loss over the batch (not accumulated).
 * *loss (mean loss) and *correct (argmax hits) are written if non-NULL.
 * Parameters are not changed.  Returns 0, NN_EINVAL (bad label or batch)
 * or NN_ENOMEM (workspace growth failed; nothing written).
 */
int nn_model_train_batch(struct nn_model *m, const float *x, const uint8_t *y,
                         int batch, float *loss, int *correct);

struct nn_optim;

/*
 * The optimizer step on the model's parameters with its gradient buffer:
 * nn_optim_step_copy(o, nn_model_params(m), nn_model_grads(m), lr, lo,
 * count, copy), split over the model's threads when nn_threads_set asked
 * for more than one (see "Threads" in docs/nn.md): each thread updates the
 * ranges of the gradient it wrote in the last training step, which are
 * still in its core's cache.  o must be sized for m.  Same parameters,
 * state and copy as the one-thread call; under quasi-global momentum the
 * step's size is summed per thread and rounds differently in its last
 * bits.
 */
void nn_model_step(struct nn_model *m, struct nn_optim *o, float lr, size_t lo,
                   size_t count, float *copy);

/*
 * Forward passes over n samples (internally batched; gradients untouched).
 * *loss gets the mean loss, *acc the fraction classified right, if non-NULL.
 */
int nn_model_evaluate(struct nn_model *m, const float *x, const uint8_t *y,
                      int n, float *loss, float *acc);

/* Writes the predicted class of each of n samples into pred. */
int nn_model_predict(struct nn_model *m, const float *x, int n, uint8_t *pred);

/* Writes the GEMMs one thread runs in a training step on `batch` samples
 * (forward, weight gradient, input gradient; convolutions as one im2col
 * pass) into out, at most max of them; returns how many there are (may
 * exceed max) or NN_EINVAL. */
int nn_model_gemm_shapes(const struct nn_model *m, int batch,
                         struct nn_gemm_shape *out, int max);

/* nn_model_gemm_shapes of the model nn_model_create would build from the
 * same spec and input shape, without allocating its buffers or drawing
 * its weights (the kernel probe runs before the join, the model only
 * after it: creating one cost a node's start ~10 ms of CPU at lab speed,
 * most of its start). NN_ENOMEM, NN_EINVAL, else as nn_model_gemm_shapes. */
int nn_spec_gemm_shapes(const char *spec, int in_channels, int in_h, int in_w,
                        int batch, struct nn_gemm_shape *out, int max);

/* ---- optimizers -------------------------------------------------------- */

enum nn_optim_kind {
        NN_OPTIM_SGD = 0,  /* SGD with (optional Nesterov) momentum */
        NN_OPTIM_ADAM = 1, /* Adam; weight decay decoupled (AdamW) */
};

struct nn_optim_config {
        enum nn_optim_kind kind;
        float lr;         /* base rate; nn_optim_step takes the actual one */
        float momentum;   /* SGD: 0 = plain SGD (typ. 0.9) */
        int nesterov;     /* SGD: non-zero = Nesterov momentum */
        int quasi_global; /* SGD with momentum: non-zero = quasi-global
                             momentum (QG-DSGDm): the buffer follows the
                             model's own movement between steps, which
                             includes what averaging with peers moved,
                             instead of the local gradients */
        float quasi_global_bound; /* > 0: what the caller moved between two
                                     updates (nn_optim_moved) feeds the
                                     buffer at most this x the last local
                                     step, per unit rate; 0: unbounded */
        float weight_decay; /* SGD: L2 added to the gradient (PyTorch SGD);
                               Adam: decoupled, p -= lr*wd*p (AdamW) */
        float beta1;        /* Adam (typ. 0.9) */
        float beta2;        /* Adam (typ. 0.999) */
        float eps;          /* Adam (typ. 1e-8) */
};

struct nn_optim;

/* Creates an optimizer for nparams parameters with zeroed state; returns 0,
 * NN_EINVAL (bad config) or NN_ENOMEM; *out untouched on error. */
int nn_optim_create(const struct nn_optim_config *cfg, size_t nparams,
                    struct nn_optim **out);

/* Frees the optimizer; NULL is a no-op. */
void nn_optim_free(struct nn_optim *o);

/* Applies one update to params with grads (both nparams long) at rate lr,
 * and counts the step.  SGD (PyTorch semantics): g' = g + wd*p;
 * v = mu*v + g'; p -= lr*(nesterov ? g' + mu*v : v).  Quasi-global SGD
 * (Lin et al., ICML 2021), the paper's movement term in two parts:
 * m += (1-mu)*lambda*(post - p)/lr_prev, the caller's change since the
 * last update per unit rate (none at step 0; lr_prev = lr on the first
 * update after nn_optim_set_steps; lambda from quasi_global_bound, else
 * 1); v = g' + mu*m; u = nesterov ? g' + mu*v : v; p -= lr*u;
 * m = mu*m + (1-mu)*u, the local step's share; post = p.
 * Adam: t = steps+1; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
 * p -= lr*(m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + lr*wd*p. */
void nn_optim_step(struct nn_optim *o, float *params, const float *grads,
                   float lr);

/* Reports that the caller changed the parameters since the last update
 * (e.g. averaged them with a peer's) by a vector of squared L2 norm
 * sumsq; calls add up until the next step.  Quasi-global momentum uses it
 * to bound that change's weight (quasi_global_bound); the others ignore
 * it. */
void nn_optim_moved(struct nn_optim *o, double sumsq);

/* nn_optim_step, and copies the updated params [lo, lo + count) to copy
 * (count floats) as the pass writes them: one pass over the model where
 * nn_optim_step then a memcpy would read that part twice. The result in
 * params and the state are the same as nn_optim_step's. count is clipped
 * to the model; copy NULL or count 0: plain nn_optim_step. */
void nn_optim_step_copy(struct nn_optim *o, float *params, const float *grads,
                        float lr, size_t lo, size_t count, float *copy);

/* One step split over threads (nn_model_step does this): nn_optim_begin
 * on one thread; then nn_optim_range over disjoint ranges [off, off + n)
 * that together cover the model, from any threads at once; then
 * nn_optim_end with the sum of the ranges' returns.  Element by element
 * the arithmetic of nn_optim_step; the sum (quasi-global momentum's size
 * of the local step, which bounds the next step's weight of the caller's
 * change) rounds by the order it is added in.  nn_optim_range writes only
 * params, the state and copy within its range, and copies the updated
 * params of [lo, lo + count) inside it to copy + (i - lo) (copy NULL:
 * none), as nn_optim_step_copy. */
void nn_optim_begin(struct nn_optim *o, float lr);
double nn_optim_range(const struct nn_optim *o, float *params,
                      const float *grads, float lr, size_t off, size_t n,
                      size_t lo, size_t count, float *copy);
void nn_optim_end(struct nn_optim *o, float lr, double usq);

/* The optimizer state, nn_optim_state_len floats (SGD: velocity;
 * quasi-global SGD: m then post, the parameters the last update left;
 * Adam: m
 * then v; each nparams long; plain SGD without momentum: empty, may be
 * NULL).  Writable, so a checkpoint or a peer's state can be loaded. */
float *nn_optim_state(struct nn_optim *o);

/* Length of nn_optim_state in floats. */
size_t nn_optim_state_len(const struct nn_optim *o);

/* What an optimizer state holds (its layout); a saved state says which,
 * since two kinds can have the same length. */
enum nn_optim_state_kind {
        NN_OPTIM_STATE_NONE = 0,         /* plain SGD: no state */
        NN_OPTIM_STATE_VELOCITY = 1,     /* SGD, local momentum: v */
        NN_OPTIM_STATE_QUASI_GLOBAL = 2, /* SGD: m, then last parameters */
        NN_OPTIM_STATE_ADAM = 3,         /* Adam: m, then v */
};

/* The kind of o's state. */
enum nn_optim_state_kind nn_optim_state_kind(const struct nn_optim *o);

/* Loads a saved state of `kind` and len floats (a checkpoint's or a
 * peer's) into o: its own kind, or the other SGD momentum kind, so that a
 * checkpoint or a peer with local momentum serves a quasi-global optimizer
 * and the other way round: a velocity becomes m (both are the step per
 * unit rate) and the last update's parameters are params; m becomes the
 * velocity.  Returns 0, or NN_EMISMATCH (another kind, or len is not that
 * kind's length) and o is unchanged. */
int nn_optim_load_state(struct nn_optim *o, enum nn_optim_state_kind kind,
                        const float *state, size_t len, const float *params);

/* Number of steps taken (Adam's bias correction uses it). */
uint64_t nn_optim_steps(const struct nn_optim *o);

/* Sets the step counter, e.g. after loading state from a checkpoint. */
void nn_optim_set_steps(struct nn_optim *o, uint64_t steps);

/* The configuration the optimizer was created with. */
const struct nn_optim_config *nn_optim_config(const struct nn_optim *o);

/* ---- learning-rate schedules ------------------------------------------- */

enum nn_lr_kind {
        NN_LR_CONST = 0,  /* base_lr */
        NN_LR_STEP = 1,   /* base_lr * gamma^(floor(step / step_every)) */
        NN_LR_COSINE = 2, /* min_lr + (base_lr-min_lr)*(1+cos(pi*t/T))/2 */
};

struct nn_lr_schedule {
        enum nn_lr_kind kind;
        float base_lr;
        float min_lr;          /* cosine floor */
        uint64_t warmup_steps; /* linear ramp base_lr*(s+1)/warmup first */
        uint64_t total_steps;  /* cosine: whole run incl. warm-up; the cosine
                                  spans T = total - warmup steps, t = step -
                                  warmup; past the end it stays at min_lr */
        uint64_t step_every;   /* step decay period in steps (0 = never) */
        float gamma;           /* step decay factor */
};

/* The learning rate at optimizer step `step` (0-based). */
float nn_lr_at(const struct nn_lr_schedule *s, uint64_t step);

#endif
