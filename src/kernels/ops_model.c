/* ops_model.c - reference attention of one query head (ops_model.h), and
 * the tier dispatch. */
#include "kernels/ops_model.h"

#include <math.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/quant.h"

void rw_attn_head_avx512(const float *q, const void *k, const void *v, bool f16, int64_t n_pos, int hd_k, int hd_v,
                         float scale, float *scores, float *out);

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

void rw_attn_head_ref(const float *q, const void *k, const void *v, bool f16, int64_t n_pos, int hd_k, int hd_v,
                      float scale, float *scores, float *out) {
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
    for (int i = 0; i < hd_v; i++) out[i] = 0.0f;
    for (int64_t j = 0; j < n_pos; j++) {
        const float p = scores[j] * inv;
        for (int i = 0; i < hd_v; i++) out[i] += p * elem(v, f16, j * hd_v + i);
    }
}

void rw_attn_head(const float *q, const void *k, const void *v, bool f16, int64_t n_pos, int hd_k, int hd_v,
                  float scale, float *scores, float *out) {
    /* The AVX-512 version handles head sizes that are multiples of 16. */
    if (rw_kernel_tier_current() >= RW_TIER_AVX512 && hd_k % 16 == 0 && hd_v % 16 == 0 && hd_k <= 256 && hd_v <= 256)
        rw_attn_head_avx512(q, k, v, f16, n_pos, hd_k, hd_v, scale, scores, out);
    else
        rw_attn_head_ref(q, k, v, f16, n_pos, hd_k, hd_v, scale, scores, out);
}
