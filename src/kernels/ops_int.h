/* ops_int.h - private to src/kernels: the AVX-512 twins of the ops.h kernels
 * (defined in ops_avx512.c, compiled with AVX-512 flags) and their AVX2
 * twins (ops_avx2.c, the same bits) that the dispatchers in ops_*.c call
 * when the tier allows. Same contracts as the public
 * functions of the same name without the suffix. */
#ifndef RW_KERNELS_OPS_INT_H
#define RW_KERNELS_OPS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <math.h>

#include "kernels/ops_model.h"
#include "kernels/quant.h"

/* True when the AVX-512 (AVX2) twins may run: the current kernel tier. */
bool rw_ops_use_avx512(void);
bool rw_ops_use_avx2(void);

/* AVX2 twins (ops_avx2.c): bitwise the AVX-512 twins below. */
void rw_silu_avx2(const float *x, float *y, int64_t n);
void rw_swiglu_avx2(float *g, const float *u, int64_t n);
void rw_softmax_avx2(const float *x, float *y, int64_t n);
void rw_rmsnorm_gated_avx2(const float *x, const float *w, const float *z, int n_groups, int gs, float eps, float *y);
void rw_attn_head_avx2(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                       float scale, float *scores, float *out);
void rw_delta_rule_head_avx2(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                             int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                             const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                             float *scratch);
void rw_ssm_scan_head_avx2(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride,
                           const float *dt, int64_t dt_stride, float dt_bias, float A, const float *B, const float *C,
                           int64_t bc_stride, float D, float *y, int64_t y_stride);

void rw_silu_avx512(const float *x, float *y, int64_t n);
/* ops_conv.c's kernel-4 conv step for the first 16*floor(C/16) channels
 * (returns that count; the caller does the rest), bitwise the same. */
int rw_conv_k4_avx512(const float *xt, int C, const float *w, const float *bias, float *state, float *yt);
void rw_softmax_avx512(const float *x, float *y, int64_t n);
void rw_rmsnorm_gated_avx512(const float *x, const float *w, const float *z, int n_groups, int gs, float eps,
                             float *y);
void rw_delta_rule_head_avx512(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride,
                               const float *k, int64_t k_stride, const float *v, int64_t v_stride, const float *g,
                               int64_t g_stride, const float *beta, int64_t beta_stride, float scale, float *o,
                               int64_t o_stride, float *scratch);
void rw_ssm_scan_head_avx512(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride,
                             const float *dt, int64_t dt_stride, float dt_bias, float A, const float *B,
                             const float *C, int64_t bc_stride, float D, float *y, int64_t y_stride);
/* r query heads (q + h*hd_k) sharing one paged KV head (ops_model.h), outputs out + h*hd_v:
 * per head bitwise what rw_attn_head gives in the AVX-512 tier, with each K
 * and V row read once for every head. scores: r * n_pos floats. */
void rw_attn_group_avx512(const float *q, int r, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                          float scale, float *scores, float *out);
void rw_f32_to_f16_row_avx512(const float *src, rw_f16 *dst, int64_t n);
void rw_f16_to_f32_row_avx512(const rw_f16 *src, float *dst, int64_t n);

/* The RMS scale of one group, as ggml_rms_norm: sum of squares in double,
 * mean rounded to float, 1/sqrtf(mean + eps). Shared so that every norm in
 * this folder rounds the same way. */
static inline float rw_rms_scale(const float *x, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    return 1.0f / sqrtf(mean + eps);
}

#endif
