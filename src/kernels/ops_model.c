/* ops_model.c - reference attention of one query head (ops_model.h), and
 * the tier dispatch. */
#include "kernels/ops_model.h"

#include <math.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/quant.h"

void rw_swiglu_avx512(float *g, const float *u, int64_t n);
void rw_attn_head_avx512(const float *q, const void *k, const void *vt, int64_t v_stride, bool f16, int64_t n_pos,
                         int hd_k, int hd_v, float scale, float *scores, float *out);

/* TEMPORARY until kernels/quant.c is on main: the compiler's exact
 * half -> float conversion. */
static float h2f(uint16_t h) {
    _Float16 x;
    memcpy(&x, &h, sizeof x);
    return (float)x;
}

static float elem(const void *base, bool f16, int64_t i) {
    return f16 ? h2f(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

void rw_attn_head_ref(const float *q, const void *k, const void *vt, int64_t v_stride, bool f16, int64_t n_pos,
                      int hd_k, int hd_v, float scale, float *scores, float *out) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_pos; j++) {
        float s = 0.0f;
        for (int i = 0; i < hd_k; i++) s += q[i] * elem(k, f16, j * hd_k + i);
        scores[j] = s * scale;
        if (scores[j] > mx) mx = scores[j];
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n_pos; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += (double)scores[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < n_pos; j++) scores[j] *= inv;
    for (int i = 0; i < hd_v; i++) {
        float o = 0.0f;
        for (int64_t j = 0; j < n_pos; j++) o += scores[j] * elem(vt, f16, i * v_stride + j);
        out[i] = o;
    }
}

void rw_attn_head(const float *q, const void *k, const void *vt, int64_t v_stride, bool f16, int64_t n_pos, int hd_k,
                  int hd_v, float scale, float *scores, float *out) {
    /* The AVX-512 version handles key head sizes that are multiples of 16. */
    if (rw_kernel_tier_current() >= RW_TIER_AVX512 && hd_k % 16 == 0 && hd_k <= 256)
        rw_attn_head_avx512(q, k, vt, v_stride, f16, n_pos, hd_k, hd_v, scale, scores, out);
    else
        rw_attn_head_ref(q, k, vt, v_stride, f16, n_pos, hd_k, hd_v, scale, scores, out);
}

void rw_swiglu_ref(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void rw_swiglu(float *g, const float *u, int64_t n) {
    if (rw_kernel_tier_current() >= RW_TIER_AVX512) rw_swiglu_avx512(g, u, n);
    else rw_swiglu_ref(g, u, n);
}
