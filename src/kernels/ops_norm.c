/* ops_norm.c - grouped RMS norm, L2 norm and the gated RMS norm (ops.h). */
#include <math.h>

#include "kernels/ops.h"
#include "kernels/ops_int.h"

void rw_rmsnorm_groups(const float *x, const float *w, int64_t w_stride, int n_groups, int gs, float eps, float *y) {
    for (int g0 = 0; g0 < n_groups; g0 += RW_SUMSQ_ROWS) {
        const int m = n_groups - g0 < RW_SUMSQ_ROWS ? n_groups - g0 : RW_SUMSQ_ROWS;
        double sums[RW_SUMSQ_ROWS];
        rw_sumsq_rows(x + (int64_t)g0 * gs, gs, m, gs, sums);
        for (int g = g0; g < g0 + m; g++) {
            const float *xg = x + (int64_t)g * gs, *wg = w + g * w_stride;
            float *yg = y + (int64_t)g * gs;
            const float scale = rw_rms_scale_of(sums[g - g0], gs, eps);
            rw_scale_row(xg, scale, wg, gs, yg);
        }
    }
}

void rw_l2norm(const float *x, int n, float eps, float *y) { rw_l2norm_rows(x, n, 1, n, eps, y); }

void rw_l2norm_rows(const float *x, int64_t stride, int64_t n_rows, int n, float eps, float *y) {
    for (int64_t r0 = 0; r0 < n_rows; r0 += RW_SUMSQ_ROWS) {
        const int m = n_rows - r0 < RW_SUMSQ_ROWS ? (int)(n_rows - r0) : RW_SUMSQ_ROWS;
        double sums[RW_SUMSQ_ROWS];
        rw_sumsq_rows(x + r0 * stride, stride, m, n, sums);
        for (int r = 0; r < m; r++) {
            const float *xr = x + (r0 + r) * stride;
            float *yr = y + (r0 + r) * stride;
            const float scale = 1.0f / fmaxf(sqrtf((float)sums[r]), eps);
            rw_scale_row(xr, scale, NULL, n, yr);
        }
    }
}

/* The gated norm's step after the sums: group g scaled by scales[g]. */
static void gated_step_ref(const float *x, const float *w, const float *z, int n_groups, int gs, const float *scales,
                           float *y) {
    for (int g = 0; g < n_groups; g++) {
        const float *xg = x + (int64_t)g * gs, *zg = z + (int64_t)g * gs;
        float *yg = y + (int64_t)g * gs;
        const float scale = scales[g];
        const int nv = gs & ~15; /* the AVX-512 twin's 16-lane part: ggml's vector expf */
        for (int i = 0; i < gs; i++) {
            const float silu = i < nv ? rw_silu_ggml(zg[i]) : zg[i] / (1.0f + expf(-zg[i]));
            yg[i] = ((xg[i] * scale) * w[i]) * silu;
        }
    }
}

static void gated_step(const float *x, const float *w, const float *z, int n_groups, int gs, const float *scales,
                       float *y) {
    if (rw_ops_use_avx512()) rw_rmsnorm_gated_avx512(x, w, z, n_groups, gs, scales, y);
    else if (rw_ops_use_avx2()) rw_rmsnorm_gated_avx2(x, w, z, n_groups, gs, scales, y);
    else if (rw_ops_use_neon()) rw_rmsnorm_gated_neon(x, w, z, n_groups, gs, scales, y);
    else gated_step_ref(x, w, z, n_groups, gs, scales, y);
}

/* Eight groups at a time: their scales from interleaved sums (rw_sumsq_rows),
 * then step; a group's sum is taken before any of the eight is written (y
 * may be x). */
static void gated(const float *x, const float *w, const float *z, int n_groups, int gs, float eps, float *y,
                  void (*step)(const float *, const float *, const float *, int, int, const float *, float *)) {
    for (int g0 = 0; g0 < n_groups; g0 += RW_SUMSQ_ROWS) {
        const int m = n_groups - g0 < RW_SUMSQ_ROWS ? n_groups - g0 : RW_SUMSQ_ROWS;
        double sums[RW_SUMSQ_ROWS];
        float scales[RW_SUMSQ_ROWS];
        rw_sumsq_rows(x + (int64_t)g0 * gs, gs, m, gs, sums);
        for (int r = 0; r < m; r++) scales[r] = rw_rms_scale_of(sums[r], gs, eps);
        step(x + (int64_t)g0 * gs, w, z + (int64_t)g0 * gs, m, gs, scales, y + (int64_t)g0 * gs);
    }
}

void rw_rmsnorm_gated_ref(const float *x, const float *w, const float *z, int n_groups, int gs, float eps, float *y) {
    gated(x, w, z, n_groups, gs, eps, y, gated_step_ref);
}

void rw_rmsnorm_gated(const float *x, const float *w, const float *z, int n_groups, int gs, float eps, float *y) {
    gated(x, w, z, n_groups, gs, eps, y, gated_step);
}
