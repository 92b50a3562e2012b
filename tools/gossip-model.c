/*
 * gossip-model - takes a trained model out of gossipnode's checkpoint.
 *
 *   gossip-model export CKPT OUT.npz
 *       NumPy archive: spec (the canonical model spec string),
 *       input_shape (C, H, W), step, and per layer lNN_dense_w [out, in],
 *       lNN_dense_b [out], lNN_conv_w [filters, k, k, channels],
 *       lNN_conv_b [filters] (NN = the layer's position in the spec; pool
 *       layers have no arrays). docs/operations.md has a NumPy forward
 *       pass that reproduces the node's predictions.
 *   gossip-model infer CKPT [--data DIR | --images F --labels F]
 *                      [--predictions FILE] [--threads N]
 *       classifies an IDX test set (default: DIR's t10k-* files, DIR
 *       defaulting to the Fashion-MNIST gossipnode uses), prints the
 *       accuracy and loss exactly as the node's evaluation computes them,
 *       and the confusion matrix; --predictions writes one label a line.
 *   gossip-model --version
 *
 * The checkpoint is verified (digest, spec, counts) by nn/checkpoint.c
 * before any value is used. Exit status: 0 done, 1 a file or data error
 * (one line on stderr naming the file), 2 a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/checkpoint.h"
#include "nn/data.h"
#include "nn/nn.h"
#include "npz.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

static int usage(void)
{
        fprintf(stderr,
                "usage: gossip-model export CKPT OUT.npz\n"
                "       gossip-model infer CKPT [--data DIR | --images F "
                "--labels F]\n"
                "                          [--predictions FILE] [--threads "
                "N]\n"
                "       gossip-model --version\n");
        return 2;
}

/* Loads path and builds its model with the checkpoint's parameters. */
static int model_load(const char *path, struct nn_checkpoint *ck,
                      struct nn_model **m)
{
        char err[512];
        int rc = nn_checkpoint_load(path, ck, err, sizeof(err));

        if (rc) {
                fprintf(stderr, "gossip-model: %s\n", err);
                return rc;
        }
        rc = nn_model_create(ck->spec, 0, 0, 0, 0, m);
        if (rc) {
                fprintf(stderr, "gossip-model: %s: model spec '%s': %s\n", path,
                        ck->spec, nn_strerror(rc));
                return rc;
        }
        if (nn_model_nparams(*m) != ck->n_params) {
                fprintf(stderr,
                        "gossip-model: %s: %llu parameters, spec '%s' has "
                        "%zu\n",
                        path, (unsigned long long)ck->n_params, ck->spec,
                        nn_model_nparams(*m));
                nn_model_free(*m);
                *m = NULL;
                return NN_EMISMATCH;
        }
        memcpy(nn_model_params(*m), ck->params, ck->n_params * sizeof(float));
        return 0;
}

/* One layer's arrays into the archive. */
static int export_layer(struct npz *z, const struct nn_model *m, const float *p,
                        int i)
{
        struct nn_layer_info l;
        char name[32];
        const char *kind;
        size_t ws[4], bs[1];
        int wd, rc;

        nn_model_layer(m, i, &l);
        if (l.kind == NN_LAYER_POOL)
                return 0;
        if (l.kind == NN_LAYER_DENSE) {
                kind = "dense";
                ws[0] = (size_t)l.out_c;
                ws[1] = (size_t)l.in_c * l.in_h * l.in_w;
                wd = 2;
        } else {
                kind = "conv";
                ws[0] = (size_t)l.out_c;
                ws[1] = ws[2] = (size_t)l.k;
                ws[3] = (size_t)l.in_c;
                wd = 4;
        }
        bs[0] = l.nb;
        snprintf(name, sizeof(name), "l%02d_%s_w", i, kind);
        rc = npz_add_f32(z, name, p + l.w_off, ws, wd);
        snprintf(name, sizeof(name), "l%02d_%s_b", i, kind);
        return rc ? rc : npz_add_f32(z, name, p + l.b_off, bs, 1);
}

static int cmd_export(const char *ckpt, const char *out)
{
        struct nn_checkpoint ck = {0};
        struct nn_model *m = NULL;
        struct npz z;
        struct nn_layer_info first;
        int64_t shape[3], step;
        int rc;

        if (model_load(ckpt, &ck, &m))
                return 1;
        rc = npz_open(&z, out);
        if (rc) {
                fprintf(stderr, "gossip-model: %s: %s\n", out, strerror(-rc));
                goto out;
        }
        nn_model_layer(m, 0, &first);
        shape[0] = first.kind == NN_LAYER_DENSE ? 1 : first.in_c;
        shape[1] = first.kind == NN_LAYER_DENSE ? 1 : first.in_h;
        shape[2] = first.kind == NN_LAYER_DENSE ? first.in_c : first.in_w;
        step = (int64_t)ck.step;
        rc = npz_add_str(&z, "spec", nn_model_spec(m));
        if (!rc)
                rc = npz_add_i64(&z, "input_shape", shape, 3);
        if (!rc)
                rc = npz_add_i64(&z, "step", &step, 1);
        for (int i = 0; i < nn_model_layers(m) && !rc; i++)
                rc = export_layer(&z, m, nn_model_params(m), i);
        if (rc)
                npz_abort(&z);
        else
                rc = npz_close(&z);
        if (rc)
                fprintf(stderr, "gossip-model: %s: %s\n", out, strerror(-rc));
        else
                printf("exported %s (spec %s, step %llu, %zu parameters) to "
                       "%s\n",
                       ckpt, nn_model_spec(m), (unsigned long long)ck.step,
                       nn_model_nparams(m), out);
out:
        nn_model_free(m);
        nn_checkpoint_free(&ck);
        return rc ? 1 : 0;
}

struct infer_args {
        const char *ckpt, *data, *images, *labels, *predictions;
        int threads;
};

static int parse_infer(int argc, char **argv, struct infer_args *a)
{
        memset(a, 0, sizeof(*a));
        a->ckpt = argv[0];
        a->data = DEFAULT_DATA;
        a->threads = 1;
        for (int i = 1; i < argc; i += 2) {
                const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                char *end;

                if (!v)
                        return -1;
                if (strcmp(k, "--data") == 0)
                        a->data = v;
                else if (strcmp(k, "--images") == 0)
                        a->images = v;
                else if (strcmp(k, "--labels") == 0)
                        a->labels = v;
                else if (strcmp(k, "--predictions") == 0)
                        a->predictions = v;
                else if (strcmp(k, "--threads") == 0) {
                        a->threads = (int)strtol(v, &end, 10);
                        if (*end || a->threads < 1 || a->threads > 16)
                                return -1;
                } else
                        return -1;
        }
        return !a->images == !a->labels ? 0 : -1;
}

/* Prints accuracy, loss and the confusion matrix of pred against ds. */
static void report(const struct nn_dataset *ds, const uint8_t *pred,
                   int classes, float loss, float acc)
{
        uint32_t hits = 0;
        uint32_t *cm = calloc((size_t)classes * classes, sizeof(*cm));

        for (uint32_t i = 0; i < ds->n; i++) {
                hits += pred[i] == ds->labels[i];
                if (cm)
                        cm[ds->labels[i] * classes + pred[i]]++;
        }
        printf("accuracy %.2f%% (%u of %u), loss %.5f\n", 100.0 * acc, hits,
               ds->n, loss);
        if (!cm)
                return;
        printf("confusion matrix (rows: true label, columns: predicted):\n"
               "     ");
        for (int c = 0; c < classes; c++)
                printf(" %5d", c);
        printf("\n");
        for (int r = 0; r < classes; r++) {
                printf("%5d", r);
                for (int c = 0; c < classes; c++)
                        printf(" %5u", cm[r * classes + c]);
                printf("\n");
        }
        free(cm);
}

static int write_predictions(const char *path, const uint8_t *pred, uint32_t n)
{
        FILE *f = fopen(path, "w");
        int rc = 0;

        if (!f) {
                fprintf(stderr, "gossip-model: %s: %s\n", path,
                        strerror(errno));
                return -1;
        }
        for (uint32_t i = 0; i < n; i++)
                fprintf(f, "%u\n", pred[i]);
        if (ferror(f) | fclose(f)) {
                fprintf(stderr, "gossip-model: %s: write error\n", path);
                rc = -1;
        }
        return rc;
}

/* The data set, checked against the model's input width and classes. */
static int infer_data(const struct infer_args *a, const struct nn_model *m,
                      struct nn_dataset *ds)
{
        char err[512];
        int rc = a->images
                     ? nn_dataset_load_idx(a->images, a->labels, ds, err,
                                           sizeof(err))
                     : nn_dataset_load_dir(a->data, 0, ds, err, sizeof(err));

        if (rc) {
                fprintf(stderr, "gossip-model: %s\n", err);
                return rc;
        }
        if (nn_dataset_sample_size(ds) != (size_t)nn_model_input_size(m)) {
                fprintf(stderr,
                        "gossip-model: %s: images of %ux%ux%u, but model %s "
                        "takes %d inputs\n",
                        a->images ? a->images : a->data, ds->channels, ds->rows,
                        ds->cols, nn_model_spec(m), nn_model_input_size(m));
                return NN_EMISMATCH;
        }
        for (uint32_t i = 0; i < ds->n; i++)
                if (ds->labels[i] >= nn_model_classes(m)) {
                        fprintf(stderr,
                                "gossip-model: %s: image %u has label %u, "
                                "model has %d classes\n",
                                a->images ? a->labels : a->data, i,
                                ds->labels[i], nn_model_classes(m));
                        return NN_EMISMATCH;
                }
        return 0;
}

static int cmd_infer(int argc, char **argv)
{
        struct infer_args a;
        struct nn_checkpoint ck = {0};
        struct nn_model *m = NULL;
        struct nn_dataset ds = {0};
        float *x = NULL, loss = 0, acc = 0;
        uint8_t *pred = NULL;
        size_t px;
        int rc = 1;

        if (parse_infer(argc, argv, &a))
                return usage();
        nn_threads_set(a.threads);
        if (model_load(a.ckpt, &ck, &m) || infer_data(&a, m, &ds))
                goto out;
        px = (size_t)ds.n * nn_dataset_sample_size(&ds);
        x = malloc(px * sizeof(float));
        pred = malloc(ds.n);
        if (!x || !pred) {
                fprintf(stderr, "gossip-model: out of memory\n");
                goto out;
        }
        nn_data_to_float(ds.images, px, x);
        if (nn_model_evaluate(m, x, ds.labels, (int)ds.n, &loss, &acc) ||
            nn_model_predict(m, x, (int)ds.n, pred)) {
                fprintf(stderr, "gossip-model: evaluation failed\n");
                goto out;
        }
        printf("model %s (step %llu) on %u images of %ux%u\n", ck.spec,
               (unsigned long long)ck.step, ds.n, ds.rows, ds.cols);
        report(&ds, pred, nn_model_classes(m), loss, acc);
        rc = a.predictions ? -write_predictions(a.predictions, pred, ds.n) : 0;
out:
        free(x);
        free(pred);
        nn_dataset_free(&ds);
        nn_model_free(m);
        nn_checkpoint_free(&ck);
        return rc;
}

int main(int argc, char **argv)
{
        int rc;

        if (argc == 2 && strcmp(argv[1], "--version") == 0) {
                printf("gossip-model %s\n", GN_VERSION);
                return 0;
        }
        if (argc < 3)
                return usage();
        if (nn_lib_init()) {
                fprintf(stderr, "gossip-model: BLIS initialisation failed\n");
                return 1;
        }
        if (strcmp(argv[1], "export") == 0 && argc == 4)
                rc = cmd_export(argv[2], argv[3]);
        else if (strcmp(argv[1], "infer") == 0)
                rc = cmd_infer(argc - 2, argv + 2);
        else
                rc = usage();
        nn_lib_finalize();
        return rc;
}
