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
 *
 * The kernel-set table below says which of BLIS's sub-configurations this
 * build carries (its BLIS_CONFIG_* macros) and which of them this CPU can
 * run; choosing among them by measurement is node/train/kernel.c's job (it
 * needs processes and a clock, which nn/ does not use).
 */
#include <stdatomic.h>
#include <string.h>

#include <blis.h>

#include "nn/nn.h"

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

/* ---- kernel sets ------------------------------------------------------- */

#if defined(__x86_64__) || defined(__i386__)
#define HAS(f) (__builtin_cpu_supports(f) != 0)
#else
#define HAS(f) 1
#endif

/* Whether the CPU has what sub-configuration id's kernels execute (BLIS's
 * own CPUID tests, frame/base/bli_cpuid.c, in spirit: the instruction sets,
 * not the model numbers): 0 if not, else the set's generation, 3 for FMA
 * kernels (and every optimized non-x86 set), 2 for older vector ones, 1 for
 * the reference kernels. */
static int arch_cpu_gen(int id)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
#endif
        switch (id) {
        case BLIS_ARCH_SKX:
                return 3 * (HAS("avx512f") && HAS("avx512dq") &&
                            HAS("avx512bw") && HAS("avx512vl"));
        case BLIS_ARCH_KNL:
                return 3 *
                       (HAS("avx512f") && HAS("avx512pf") && HAS("avx512er"));
        case BLIS_ARCH_HASWELL:
        case BLIS_ARCH_ZEN3:
        case BLIS_ARCH_ZEN2:
        case BLIS_ARCH_ZEN:
                return 3 * (HAS("avx2") && HAS("fma"));
        case BLIS_ARCH_EXCAVATOR:
        case BLIS_ARCH_STEAMROLLER:
        case BLIS_ARCH_PILEDRIVER:
        case BLIS_ARCH_BULLDOZER:
                return 3 * (HAS("avx") && HAS("fma4"));
        case BLIS_ARCH_SANDYBRIDGE:
                return 2 * HAS("avx");
        case BLIS_ARCH_PENRYN:
                return 2 * HAS("ssse3");
        case BLIS_ARCH_GENERIC:
                return 1;
        default:
                return 3;
        }
}

/* Whether this BLIS build was configured with sub-configuration id. */
static int arch_compiled(int id)
{
        switch (id) {
#define ARCH(ID, CFG)                                                          \
        case ID:                                                               \
                return CFG;
#ifdef BLIS_CONFIG_SKX
                ARCH(BLIS_ARCH_SKX, 1)
#endif
#ifdef BLIS_CONFIG_KNL
                ARCH(BLIS_ARCH_KNL, 1)
#endif
#ifdef BLIS_CONFIG_HASWELL
                ARCH(BLIS_ARCH_HASWELL, 1)
#endif
#ifdef BLIS_CONFIG_SANDYBRIDGE
                ARCH(BLIS_ARCH_SANDYBRIDGE, 1)
#endif
#ifdef BLIS_CONFIG_PENRYN
                ARCH(BLIS_ARCH_PENRYN, 1)
#endif
#ifdef BLIS_CONFIG_ZEN3
                ARCH(BLIS_ARCH_ZEN3, 1)
#endif
#ifdef BLIS_CONFIG_ZEN2
                ARCH(BLIS_ARCH_ZEN2, 1)
#endif
#ifdef BLIS_CONFIG_ZEN
                ARCH(BLIS_ARCH_ZEN, 1)
#endif
#ifdef BLIS_CONFIG_EXCAVATOR
                ARCH(BLIS_ARCH_EXCAVATOR, 1)
#endif
#ifdef BLIS_CONFIG_STEAMROLLER
                ARCH(BLIS_ARCH_STEAMROLLER, 1)
#endif
#ifdef BLIS_CONFIG_PILEDRIVER
                ARCH(BLIS_ARCH_PILEDRIVER, 1)
#endif
#ifdef BLIS_CONFIG_BULLDOZER
                ARCH(BLIS_ARCH_BULLDOZER, 1)
#endif
#ifdef BLIS_CONFIG_ARMSVE
                ARCH(BLIS_ARCH_ARMSVE, 1)
#endif
#ifdef BLIS_CONFIG_A64FX
                ARCH(BLIS_ARCH_A64FX, 1)
#endif
#ifdef BLIS_CONFIG_FIRESTORM
                ARCH(BLIS_ARCH_FIRESTORM, 1)
#endif
#ifdef BLIS_CONFIG_THUNDERX2
                ARCH(BLIS_ARCH_THUNDERX2, 1)
#endif
#ifdef BLIS_CONFIG_CORTEXA57
                ARCH(BLIS_ARCH_CORTEXA57, 1)
#endif
#ifdef BLIS_CONFIG_CORTEXA53
                ARCH(BLIS_ARCH_CORTEXA53, 1)
#endif
#ifdef BLIS_CONFIG_CORTEXA15
                ARCH(BLIS_ARCH_CORTEXA15, 1)
#endif
#ifdef BLIS_CONFIG_CORTEXA9
                ARCH(BLIS_ARCH_CORTEXA9, 1)
#endif
#undef ARCH
        case BLIS_ARCH_GENERIC:
                return 1; /* the reference kernels are always built */
        default:
                return 0;
        }
}

int nn_blis_arch_count(void)
{
        return BLIS_NUM_ARCHS;
}

const char *nn_blis_arch_name(int id)
{
        if (id < 0 || id >= BLIS_NUM_ARCHS)
                return NULL;
        return bli_arch_string((arch_t)id);
}

int nn_blis_arch_id(const char *name)
{
        for (int id = 0; name && id < BLIS_NUM_ARCHS; id++)
                if (strcmp(name, bli_arch_string((arch_t)id)) == 0)
                        return id;
        return NN_EINVAL;
}

int nn_blis_arch_usable(int id)
{
        if (id < 0 || id >= BLIS_NUM_ARCHS)
                return 0;
        return arch_compiled(id) ? arch_cpu_gen(id) : 0;
}

const char *nn_blis_arch_active(void)
{
        bli_init();
        return bli_arch_string(bli_arch_query_id());
}

const char *nn_blis_version(void)
{
        return bli_info_get_version_str();
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
