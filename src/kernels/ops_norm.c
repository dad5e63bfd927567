/* ops_norm.c - grouped RMS norm, L2 norm and the gated RMS norm (ops.h). */
#include <math.h>

#include "kernels/ops.h"
#include "kernels/ops_int.h"

void rw_rmsnorm_groups(const float *x, const float *w, int64_t w_stride, int n_groups, int gs, float eps, float *y) {
    for (int g = 0; g < n_groups; g++) {
        const float *xg = x + (int64_t)g * gs, *wg = w + g * w_stride;
        float *yg = y + (int64_t)g * gs;
        const float scale = rw_rms_scale(xg, gs, eps);
        for (int i = 0; i < gs; i++) yg[i] = (xg[i] * scale) * wg[i];
    }
}

void rw_l2norm(const float *x, int n, float eps, float *y) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * scale;
}

void rw_rmsnorm_gated_ref(const float *x, const float *w, const float *z, int n_groups, int gs, float eps, float *y) {
    for (int g = 0; g < n_groups; g++) {
        const float *xg = x + (int64_t)g * gs, *zg = z + (int64_t)g * gs;
        float *yg = y + (int64_t)g * gs;
        const float scale = rw_rms_scale(xg, gs, eps);
        const int nv = gs & ~15; /* the AVX-512 twin's 16-lane part: ggml's vector expf */
        for (int i = 0; i < gs; i++) {
            const float silu = i < nv ? rw_silu_ggml(zg[i]) : zg[i] / (1.0f + expf(-zg[i]));
            yg[i] = ((xg[i] * scale) * w[i]) * silu;
        }
    }
}

void rw_rmsnorm_gated(const float *x, const float *w, const float *z, int n_groups, int gs, float eps, float *y) {
    if (rw_ops_use_avx512()) rw_rmsnorm_gated_avx512(x, w, z, n_groups, gs, eps, y);
    else if (rw_ops_use_avx2()) rw_rmsnorm_gated_avx2(x, w, z, n_groups, gs, eps, y);
    else if (rw_ops_use_neon()) rw_rmsnorm_gated_neon(x, w, z, n_groups, gs, eps, y);
    else rw_rmsnorm_gated_ref(x, w, z, n_groups, gs, eps, y);
}
