/* ops_act.c - SiLU, GEGLU, sigmoid, softplus and softmax (ops.h): the
 * dispatch to the tier in use; the references the tiers match are in
 * ops_act_ref.c. */
#include <math.h>

#include "kernels/ops.h"
#include "kernels/ops_int.h"

void rw_relu_sq(float *x, int64_t n) {
    if (rw_ops_use_avx512()) rw_relu_sq_avx512(x, n);
    else if (rw_ops_use_avx2()) rw_relu_sq_avx2(x, n);
    else if (rw_ops_use_neon()) rw_relu_sq_neon(x, n);
    else rw_relu_sq_ref(x, n);
}

void rw_silu(const float *x, float *y, int64_t n) {
    if (rw_ops_use_avx512()) rw_silu_avx512(x, y, n);
    else if (rw_ops_use_avx2()) rw_silu_avx2(x, y, n);
    else if (rw_ops_use_neon()) rw_silu_neon(x, y, n);
    else rw_silu_ref(x, y, n);
}

void rw_geglu(float *g, const float *u, int64_t n) {
    if (rw_ops_use_avx512()) rw_geglu_avx512(g, u, n);
    else if (rw_ops_use_avx2()) rw_geglu_avx2(g, u, n);
    else if (rw_ops_use_neon()) rw_geglu_neon(g, u, n);
    else rw_geglu_ref(g, u, n);
}

void rw_swiglu_oai(float *g, const float *u, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; i++) {
        /* std::min and std::clamp's comparisons, so a NaN input passes as there */
        const float x = limit < g[i] ? limit : g[i];
        const float y = u[i] < -limit ? -limit : limit < u[i] ? limit : u[i];
        g[i] = x / (1.0f + expf(alpha * -x)) * (y + 1.0f);
    }
}

void rw_sigmoid(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
}

void rw_softplus(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = rw_softplus1(x[i]);
}

void rw_softmax(const float *x, float *y, int64_t n) {
    if (rw_ops_use_avx512()) rw_softmax_avx512(x, y, n);
    else if (rw_ops_use_avx2()) rw_softmax_avx2(x, y, n);
    else if (rw_ops_use_neon()) rw_softmax_neon(x, y, n);
    else rw_softmax_ref(x, y, n);
}
