/*
 * bench_mlp.c - training throughput of an nn model (default MLP 784-512-10,
 * batch 100, SGD momentum 0.9) on synthetic data: the step loop the daemon
 * runs (train_batch + optimizer step), timed after a warm-up.
 * Usage: bench_mlp [--spec S] [--batch B] [--threads T] [--steps N]
 *                  [--blis-arch NAME|blis] [--optimizer sgd|adam]
 * Prints one line: spec batch threads steps seconds samples_per_s loss,
 * and the mean milliseconds per step in train_batch and in the optimizer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn/nn.h"
#include "bench_blis.h"
#include "bench_clock.h"

int main(int argc, char **argv)
{
        const char *spec = "784-512-10", *arch = "blis";
        int batch = 100, threads = 1, steps = 2000, warm = 50, rc = 1;
        struct nn_model *m = NULL;
        struct nn_optim *o = NULL;
        struct nn_optim_config oc = {
            .kind = NN_OPTIM_SGD, .lr = 0.01f, .momentum = 0.9f};
        float *x = NULL, loss = 0;
        uint8_t *y = NULL;
        int pool = 20, in, correct;
        double t0 = 0, t, tb, t_train = 0, t_opt = 0;

        for (int i = 1; i + 1 < argc; i += 2) {
                if (!strcmp(argv[i], "--spec"))
                        spec = argv[i + 1];
                else if (!strcmp(argv[i], "--batch"))
                        batch = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--threads"))
                        threads = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--steps"))
                        steps = atoi(argv[i + 1]);
                else if (!strcmp(argv[i], "--blis-arch"))
                        arch = argv[i + 1];
                else if (!strcmp(argv[i], "--optimizer") &&
                         !strcmp(argv[i + 1], "adam"))
                        oc = (struct nn_optim_config){.kind = NN_OPTIM_ADAM,
                                                      .lr = 0.001f,
                                                      .beta1 = 0.9f,
                                                      .beta2 = 0.999f,
                                                      .eps = 1e-8f};
        }
        if (bench_blis_arch(arch))
                return 2;
        nn_lib_init();
        nn_threads_set(threads);
        if (nn_model_create(spec, 1, 28, 28, 1, &m) ||
            nn_optim_create(&oc, nn_model_nparams(m), &o) ||
            nn_model_reserve(m, batch)) {
                fprintf(stderr, "bench_mlp: cannot create %s\n", spec);
                goto out;
        }
        in = nn_model_input_size(m);
        /* A pool of distinct synthetic batches, cycled. */
        x = malloc(sizeof(float) * (size_t)pool * batch * in);
        y = malloc((size_t)pool * batch);
        if (!x || !y)
                goto out;
        srand(1);
        for (size_t i = 0; i < (size_t)pool * batch * in; i++)
                x[i] = (float)(rand() % 256) / 255.0f;
        for (int i = 0; i < pool * batch; i++)
                y[i] = (uint8_t)(rand() % nn_model_classes(m));
        for (int s = 0; s < warm + steps; s++) {
                int b = s % pool;
                double ta;
                if (s == warm)
                        t0 = now_s();
                ta = now_s();
                nn_model_train_batch(m, x + (size_t)b * batch * in,
                                     y + (size_t)b * batch, batch, &loss,
                                     &correct);
                tb = now_s();
                nn_model_step(m, o, 0.01f, 0, 0, NULL);
                if (s >= warm) {
                        t_train += tb - ta;
                        t_opt += now_s() - tb;
                }
        }
        t = now_s() - t0;
        printf("spec=%s batch=%d threads=%d arch=%s steps=%d seconds=%.3f "
               "samples_per_s=%.0f loss=%.4f train_ms=%.3f optim_ms=%.3f\n",
               nn_model_spec(m), batch, threads, nn_blis_arch_active(), steps,
               t, (double)steps * batch / t, loss, 1e3 * t_train / steps,
               1e3 * t_opt / steps);
        rc = 0;
out:
        free(x);
        free(y);
        nn_optim_free(o);
        nn_model_free(m);
        nn_lib_finalize();
        return rc;
}
