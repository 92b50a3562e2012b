/*
 * bench_train.c - full training on Fashion-MNIST (or any directory
 * nn_dataset_load_dir understands) until a target test accuracy or a number
 * of epochs: SGD with momentum, cosine learning rate over the planned
 * epochs, evaluation on the whole test set after every epoch (excluded from
 * the training clock).  The same hyper-parameters go to torch_train.py.
 *
 * Usage: bench_train [--spec 784-512-10|cnn|...] [--data DIR] [--epochs E]
 *        [--batch B] [--lr LR] [--momentum M] [--wd WD] [--threads T]
 *        [--target ACC] [--seed S] [--blis-arch NAME|blis]
 * Prints one line per epoch and a final "result" line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn/data.h"
#include "nn/nn.h"
#include "bench_blis.h"
#include "bench_clock.h"

int main(int argc, char **argv)
{
        const char *spec = "784-512-10", *arch = "blis";
        const char *dir = "/usr/share/datasets/fashion-mnist";
        int epochs = 15, batch = 100, threads = 1, rc = 1;
        float lr = 0.05f, mom = 0.9f, wd = 0.0f, target = 2.0f;
        uint64_t seed = 1;
        struct nn_dataset tr = {0}, te = {0};
        struct nn_batcher bt = {0};
        struct nn_model *m = NULL;
        struct nn_optim *o = NULL;
        float *x = NULL, *xte = NULL;
        uint8_t *y = NULL;
        char err[256];

        for (int i = 1; i + 1 < argc; i += 2) {
                const char *k = argv[i], *v = argv[i + 1];
                if (!strcmp(k, "--spec"))
                        spec = v;
                else if (!strcmp(k, "--data"))
                        dir = v;
                else if (!strcmp(k, "--epochs"))
                        epochs = atoi(v);
                else if (!strcmp(k, "--batch"))
                        batch = atoi(v);
                else if (!strcmp(k, "--lr"))
                        lr = (float)atof(v);
                else if (!strcmp(k, "--momentum"))
                        mom = (float)atof(v);
                else if (!strcmp(k, "--wd"))
                        wd = (float)atof(v);
                else if (!strcmp(k, "--threads"))
                        threads = atoi(v);
                else if (!strcmp(k, "--target"))
                        target = (float)atof(v);
                else if (!strcmp(k, "--seed"))
                        seed = strtoull(v, NULL, 0);
                else if (!strcmp(k, "--blis-arch"))
                        arch = v;
        }
        if (bench_blis_arch(arch))
                return 2;
        nn_lib_init();
        nn_threads_set(threads);
        if (nn_dataset_load_dir(dir, 1, &tr, err, sizeof(err)) ||
            nn_dataset_load_dir(dir, 0, &te, err, sizeof(err))) {
                fprintf(stderr, "bench_train: %s\n", err);
                goto out;
        }
        struct nn_optim_config oc = {.kind = NN_OPTIM_SGD,
                                     .lr = lr,
                                     .momentum = mom,
                                     .weight_decay = wd};
        if (nn_model_create(spec, (int)tr.channels, (int)tr.rows, (int)tr.cols,
                            seed, &m) ||
            nn_optim_create(&oc, nn_model_nparams(m), &o) ||
            nn_model_reserve(m, batch) || nn_batcher_init(&bt, &tr, seed)) {
                fprintf(stderr, "bench_train: cannot set up %s\n", spec);
                goto out;
        }
        size_t ss = nn_dataset_sample_size(&tr);
        uint64_t steps_per_epoch = (tr.n + batch - 1) / batch;
        struct nn_lr_schedule sch = {.kind = NN_LR_COSINE,
                                     .base_lr = lr,
                                     .total_steps = steps_per_epoch * epochs};
        x = malloc(sizeof(float) * ss * batch);
        y = malloc(batch);
        xte = malloc(sizeof(float) * ss * te.n);
        if (!x || !y || !xte)
                goto out;
        nn_images_to_float(te.images, ss * te.n, xte);
        printf("spec=%s params=%zu batch=%d lr=%g momentum=%g wd=%g "
               "threads=%d seed=%llu arch=%s\n",
               nn_model_spec(m), nn_model_nparams(m), batch, lr, mom, wd,
               threads, (unsigned long long)seed, nn_blis_arch_active());
        double train_s = 0, wall0 = now_s();
        float acc = 0, tloss = 0;
        int e;
        for (e = 1; e <= epochs; e++) {
                double t0 = now_s(), sum = 0;
                int nb = 0;
                while (nn_batcher_epoch(&bt) < (uint64_t)e) {
                        int k = nn_batcher_next(&bt, x, y, batch);
                        float loss;
                        if (k < 0)
                                goto out;
                        nn_model_train_batch(m, x, y, k, &loss, NULL);
                        nn_model_step(m, o, nn_lr_at(&sch, nn_optim_steps(o)),
                                      0, 0, NULL);
                        sum += loss;
                        nb++;
                }
                train_s += now_s() - t0;
                nn_model_evaluate(m, xte, te.labels, (int)te.n, &tloss, &acc);
                printf("epoch %d train_loss %.4f test_loss %.4f test_acc "
                       "%.4f train_s %.1f samples_per_s %.0f\n",
                       e, sum / nb, tloss, acc, train_s,
                       (double)tr.n * e / train_s);
                fflush(stdout);
                if (acc >= target)
                        break;
        }
        printf("result impl=gossipnode spec=%s epochs=%d test_acc=%.4f "
               "train_s=%.1f wall_s=%.1f target=%.4f reached=%s\n",
               nn_model_spec(m), e > epochs ? epochs : e, acc, train_s,
               now_s() - wall0, target, acc >= target ? "yes" : "no");
        rc = 0;
out:
        free(x);
        free(y);
        free(xte);
        nn_batcher_free(&bt);
        nn_dataset_free(&tr);
        nn_dataset_free(&te);
        nn_optim_free(o);
        nn_model_free(m);
        nn_lib_finalize();
        return rc;
}
