/* test_quant_fast.c - the fast K-quant quantizers (quantize_k_avx512.c)
 * against their specification, quantize_k_ref.c: every byte of Q4_K, Q5_K
 * and Q6_K for random rows at many scales (down to subnormal, up to the top
 * of the f16 range), odd super-block counts (the tail), and awkward blocks:
 * zeros, constants of either sign, all-positive and all-negative sub-blocks,
 * a lone outlier, subnormals, repeated levels, sub-blocks that are flat
 * among noisy ones. Skipped where the CPU has no AVX-512. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/matmul.h"
#include "kernels/quant_int.h"

#define NB 7 /* super-blocks per row: odd, so the fast versions' tail runs */
#define N  (NB * RW_QK_K)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(void) { /* in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(rng >> 40) / (float)(1u << 23) - 1.0f;
}

typedef struct {
    const char *name;
    size_t block_bytes;
    void (*ref)(const float *, void *, int64_t);
    void (*fast)(const float *, void *, int64_t);
} kq;

static void q4_ref(const float *x, void *y, int64_t nb) { rw_quantize_q4_K_ref(x, y, nb); }
static void q4_fast(const float *x, void *y, int64_t nb) { rw_quantize_q4_K_avx512(x, y, nb); }
static void q5_ref(const float *x, void *y, int64_t nb) { rw_quantize_q5_K_ref(x, y, nb); }
static void q5_fast(const float *x, void *y, int64_t nb) { rw_quantize_q5_K_avx512(x, y, nb); }
static void q6_ref(const float *x, void *y, int64_t nb) { rw_quantize_q6_K_ref(x, y, nb); }
static void q6_fast(const float *x, void *y, int64_t nb) { rw_quantize_q6_K_avx512(x, y, nb); }

static const kq types[] = {
    {"q4_K", sizeof(rw_block_q4_K), q4_ref, q4_fast},
    {"q5_K", sizeof(rw_block_q5_K), q5_ref, q5_fast},
    {"q6_K", sizeof(rw_block_q6_K), q6_ref, q6_fast},
};

static int n_rows;

/* Every type, every super-block count 1..NB: the same bytes. */
static void check_row(const float *x, const char *what) {
    static uint8_t a[NB * 256], b[NB * 256];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int nb = 1; nb <= NB; nb += NB - 1) {
            memset(a, 0xa5, sizeof a);
            memset(b, 0x5a, sizeof b);
            types[t].ref(x, a, nb);
            types[t].fast(x, b, nb);
            size_t n = (size_t)nb * types[t].block_bytes, i = 0;
            while (i < n && a[i] == b[i]) i++;
            CHECK_MSG(i == n, "%s, %s, %d super-blocks: byte %zu (super-block %zu) differs: %02x vs %02x",
                      types[t].name, what, nb, i, i / types[t].block_bytes, a[i], b[i]);
        }
    n_rows++;
}

int main(void) {
    if (!rw_kernel_tier_available(RW_TIER_AVX512)) {
        printf("no AVX-512: skipped\n");
        return rw_test_done();
    }
    static float x[N];
    /* random rows from subnormal to near the f16 maximum, plain and shifted */
    const float scales[] = {1e-42f, 1e-30f, 1e-8f, 1e-3f, 0.02f, 1.0f, 7.5f, 300.0f, 6e4f};
    for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++)
        for (int rep = 0; rep < 8; rep++) {
            for (int i = 0; i < N; i++) x[i] = scales[s] * uniform();
            check_row(x, "uniform");
            for (int i = 0; i < N; i++) x[i] = scales[s] * (uniform() + (rep & 1 ? 0.9f : -0.9f));
            check_row(x, "shifted");
            for (int i = 0; i < N; i++) x[i] = scales[s] * uniform() * uniform() * uniform(); /* peaked */
            check_row(x, "peaked");
        }
    /* awkward sub-blocks (16 and 32 values) mixed with noisy ones */
    for (int rep = 0; rep < 400; rep++) {
        for (int i = 0; i < N; i++) x[i] = uniform();
        for (int sb = 0; sb < N / 16; sb++) {
            float *v = x + 16 * sb, c = uniform();
            switch ((rep + sb * 7) % 11) {
            case 0: memset(v, 0, 16 * sizeof *v); break;
            case 1:
                for (int i = 0; i < 16; i++) v[i] = c;
                break;
            case 2:
                for (int i = 0; i < 16; i++) v[i] = fabsf(v[i]);
                break;
            case 3:
                for (int i = 0; i < 16; i++) v[i] = -fabsf(v[i]);
                break;
            case 4:
                for (int i = 0; i < 16; i++) v[i] = 1e-6f * v[i];
                v[5] = 100.0f * c;
                break;
            case 5:
                for (int i = 0; i < 16; i++) v[i] = (float)(int)(4 * v[i]) / 4;
                break; /* repeated levels */
            case 6:
                for (int i = 0; i < 16; i++) v[i] = 0x1p-140f * (float)(i % 3);
                break; /* subnormal */
            case 7:
                for (int i = 0; i < 16; i++) v[i] = i == sb % 16 ? c : 0;
                break; /* one value */
            case 8:
                for (int i = 0; i < 16; i++) v[i] = c + 1e-7f * v[i];
                break; /* near-constant */
            default: break;
            }
        }
        check_row(x, "awkward");
    }
    /* whole rows of one value */
    const float consts[] = {0.0f, -0.0f, 1.0f, -1.0f, 3e-5f, -6e4f};
    for (size_t c = 0; c < sizeof consts / sizeof consts[0]; c++) {
        for (int i = 0; i < N; i++) x[i] = consts[c];
        check_row(x, "constant");
    }
    printf("%d rows x 3 types bitwise equal\n", n_rows);
    return rw_test_done();
}
