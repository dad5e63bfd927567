/* ops_model_avx512.c - attention of one query head with AVX-512
 * (ops_model.h): 16-wide FMA dot products and V accumulation, f16 rows
 * converted with vcvtph2ps. Same result whatever the batch: every score
 * and every output element is computed by the same instruction sequence. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/ops_model.h"

void rw_attn_head_avx512(const float *q, const void *k, const void *v, bool f16, int64_t n_pos, int hd_k, int hd_v,
                         float scale, float *scores, float *out);

static inline __m512 load16(const void *base, bool f16, int64_t i) {
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i)));
    return _mm512_loadu_ps((const float *)base + i);
}

/* exp(x) for x <= 0, 16 lanes: 2^(x log2 e) split into integer and fraction,
 * a degree-6 polynomial for 2^f (relative error ~2e-7, below f32 rounding
 * of the softmax sum's effect). */
static inline __m512 exp16(__m512 x) {
    const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 t = _mm512_mul_ps(x, log2e);
    __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(t, n); /* [0, 1) */
    __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

void rw_attn_head_avx512(const float *q, const void *k, const void *v, bool f16, int64_t n_pos, int hd_k, int hd_v,
                         float scale, float *scores, float *out) {
    const int nk = hd_k / 16, nv = hd_v / 16;
    __m512 qv[16];
    for (int c = 0; c < nk; c++) qv[c] = _mm512_loadu_ps(q + 16 * c);
    /* scores, 4 keys at a time, each key's sum in the same order */
    float mx = -INFINITY;
    int64_t j = 0;
    for (; j + 4 <= n_pos; j += 4) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int c = 0; c < nk; c++) {
            a0 = _mm512_fmadd_ps(qv[c], load16(k, f16, (j + 0) * hd_k + 16 * c), a0);
            a1 = _mm512_fmadd_ps(qv[c], load16(k, f16, (j + 1) * hd_k + 16 * c), a1);
            a2 = _mm512_fmadd_ps(qv[c], load16(k, f16, (j + 2) * hd_k + 16 * c), a2);
            a3 = _mm512_fmadd_ps(qv[c], load16(k, f16, (j + 3) * hd_k + 16 * c), a3);
        }
        scores[j + 0] = _mm512_reduce_add_ps(a0) * scale;
        scores[j + 1] = _mm512_reduce_add_ps(a1) * scale;
        scores[j + 2] = _mm512_reduce_add_ps(a2) * scale;
        scores[j + 3] = _mm512_reduce_add_ps(a3) * scale;
    }
    for (; j < n_pos; j++) {
        __m512 a0 = _mm512_setzero_ps();
        for (int c = 0; c < nk; c++) a0 = _mm512_fmadd_ps(qv[c], load16(k, f16, j * hd_k + 16 * c), a0);
        scores[j] = _mm512_reduce_add_ps(a0) * scale;
    }
    for (j = 0; j < n_pos; j++)
        if (scores[j] > mx) mx = scores[j];
    /* softmax numerators, summed in double in increasing j */
    const __m512 vmx = _mm512_set1_ps(mx);
    double sum = 0.0;
    for (j = 0; j + 16 <= n_pos; j += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(scores + j), vmx));
        _mm512_storeu_ps(scores + j, e);
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(e));
        __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
        sum += _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
    }
    if (j < n_pos) {
        const __mmask16 m = (__mmask16)((1u << (n_pos - j)) - 1);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + j), vmx));
        e = _mm512_maskz_mov_ps(m, e);
        _mm512_mask_storeu_ps(scores + j, m, e);
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(e));
        __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
        sum += _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
    }
    const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    __m512 acc[16];
    for (int c = 0; c < nv; c++) acc[c] = _mm512_setzero_ps();
    for (j = 0; j < n_pos; j++) {
        const __m512 p = _mm512_mul_ps(_mm512_set1_ps(scores[j]), inv);
        for (int c = 0; c < nv; c++) acc[c] = _mm512_fmadd_ps(p, load16(v, f16, j * hd_v + 16 * c), acc[c]);
    }
    for (int c = 0; c < nv; c++) _mm512_storeu_ps(out + 16 * c, acc[c]);
}
