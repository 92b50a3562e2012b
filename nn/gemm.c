/*
 * gemm.c - the one door to BLIS, plus library set-up and byte-to-float
 * conversion.
 *
 * Every matrix product of the engine goes through nn_gemm(), a row-major
 * wrapper over BLIS's typed API (bli_sgemm with explicit row/column strides).
 * A transposed operand is passed as the same memory with its strides swapped
 * (row stride 1, column stride ld), so BLIS sees every case as a general-
 * stride matrix and packs it itself; there is no copy on our side.
 *
 * BLIS keeps process-wide state (kernel choice, thread count, memory pools):
 * nn_lib_init() creates it before any thread computes, nn_lib_finalize()
 * releases it so that leak checkers stay quiet.  BLIS always runs one
 * thread per call; concurrent calls from the model's threads are safe (the
 * Debian builds, serial included, have BLIS_ENABLE_SYSTEM: real mutexes
 * around the shared memory pools).
 */
#include <stdatomic.h>

#include <blis.h>

#include "nn.h"

/* Threads a model computes with (model.c splits batches by samples).  Atomic
 * because a daemon may set it on one thread while a trainer reads it. */
static atomic_int nn_threads = 1;

int nn_lib_init(void)
{
        bli_init();
        /* Every GEMM runs on one BLIS thread: parallelism is ours, by
         * samples (model.c), so a threaded BLIS build must not add its own
         * spinning threads on top. */
        bli_thread_set_num_threads(1);
        return 0;
}

void nn_lib_finalize(void)
{
        bli_finalize();
}

void nn_threads_set(int n)
{
        if (n < 1)
                n = 1;
        atomic_store(&nn_threads, n);
}

int nn_threads_get(void)
{
        return atomic_load(&nn_threads);
}

void nn_gemm(int transa, int transb, int m, int n, int k, float alpha,
             const float *a, int lda, const float *b, int ldb, float beta,
             float *c, int ldc)
{
        /* op(A) is m x k: untransposed it is rows of stride lda, transposed
         * it is the k x m storage read column-wise. */
        inc_t rsa = transa ? 1 : lda, csa = transa ? lda : 1;
        inc_t rsb = transb ? 1 : ldb, csb = transb ? ldb : 1;

        if (m <= 0 || n <= 0)
                return;
        if (k <= 0) {
                /* BLIS would scale C by beta; make beta == 0 mean "set". */
                for (int i = 0; i < m; i++)
                        for (int j = 0; j < n; j++)
                                c[(size_t)i * ldc + j] =
                                    beta == 0.0f
                                        ? 0.0f
                                        : beta * c[(size_t)i * ldc + j];
                return;
        }
        bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha,
                  (float *)a, rsa, csa, (float *)b, rsb, csb, &beta, c, ldc, 1);
}

void nn_images_to_float(const uint8_t *src, size_t n, float *dst)
{
        for (size_t i = 0; i < n; i++)
                dst[i] = (float)src[i] / 255.0f;
}
