/* ops_act_ref.c - the plain-C activations (ops.h): SiLU, GEGLU and softmax
 * as every tier must compute them (their *_ref), and the scalar pieces the
 * tiers' twins share: softplus of one value and GELU's half-precision
 * table. The dispatch (ops_act.c) and the twins (ops_avx2.c, ops_avx512.c,
 * ops_neon.c) call here; this file calls none of them. */
#include <math.h>
#include <pthread.h>

#include "kernels/ops.h"
#include "kernels/ops_int.h"

/* The first 16 * floor(n / 16) elements with ggml's vector expf, the rest
 * with expf (the AVX-512 twin's 16-lane part and its scalar tail). */
void rw_silu_ref(const float *x, float *y, int64_t n) {
    const int64_t nv = n & ~(int64_t)15;
    for (int64_t i = 0; i < n; i++) y[i] = i < nv ? rw_silu_ggml(x[i]) : x[i] / (1.0f + expf(-x[i]));
}

/* GELU of every half, as ggml's table: gelu_tanh of the half's value in
 * float, rounded to a half, kept as the float it is. Built once, by the same
 * scalar code on every tier; every tier looks its values up in it. */
static float gelu_f16_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void) {
    const float a = 0.044715f, s2pi = 0.79788456080286535587989211986876f;
    for (uint32_t i = 0; i < (1u << 16); i++) {
        const float x = rw_f16_to_f32((rw_f16)i);
        const float y = 0.5f * x * (1.0f + tanhf(s2pi * x * (1.0f + a * x * x)));
        gelu_f16_table[i] = rw_f16_to_f32(rw_f32_to_f16(y));
    }
}

const float *rw_gelu_f16_table(void) {
    pthread_once(&gelu_once, gelu_table_init);
    return gelu_f16_table;
}

void rw_relu_sq_ref(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float r = x[i] > 0.0f ? x[i] : 0.0f;
        x[i] = r * r;
    }
}

void rw_geglu_ref(float *g, const float *u, int64_t n) {
    const float *tab = rw_gelu_f16_table();
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        if (x <= -10.0f) g[i] = 0.0f;
        else if (x >= 10.0f) g[i] = x * u[i];
        else g[i] = tab[rw_f32_to_f16(x)] * u[i]; /* NaN: the table's NaN */
    }
}

/* ggml's formula: log(1 + e^x), not log1p, so small results round as there. */
float rw_softplus1(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

void rw_softmax_ref(const float *x, float *y, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    /* 16-element blocks with ggml's vector expf, each summed in float
     * (rw_reduce16_ref), then the rest with expf; all added in double */
    double sum = 0.0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float e[16];
        for (int l = 0; l < 16; l++) y[i + l] = e[l] = rw_exp_ggml(x[i + l] - mx);
        sum += (double)rw_reduce16_ref(e);
    }
    for (; i < n; i++) {
        y[i] = expf(x[i] - mx);
        sum += (double)y[i];
    }
    const float inv = (float)(1.0 / sum);
    for (i = 0; i < n; i++) y[i] *= inv;
}
