/* ops_model_avx512.c - attention of one query head with AVX-512
 * (ops_model.h): 16-wide FMA dot products and V accumulation, f16 rows
 * converted with vcvtph2ps. Same result whatever the batch: every score
 * and every output element is computed by the same instruction sequence. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/ops_model.h"
#include "kernels/simd_avx512_int.h"

void rw_attn_head_avx512(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                         float scale, float *scores, float *out);
void rw_swiglu_avx512(float *g, const float *u, int64_t n);

/* dot_ggml_padded (below) for value rows i0..i0+3 of a paged head against y
 * (n elements), into out[0..3]. The accumulators run on across pages: a page
 * holds a multiple of 64 positions (or is the only one), so every FMA meets
 * the same elements in the same order as over one contiguous row. Elements
 * below b0 (a multiple of 64: a sliding window's first block) are zero in y
 * and skipped, which leaves every sum as it is. */
static inline __attribute__((always_inline)) void dot4_ggml_padded(const rw_attn_pages *kv, int i0, bool f16,
                                                                    const float *y, int64_t b0, int64_t n,
                                                                    float *out) {
    __m512 a[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) a[r][c] = _mm512_setzero_ps();
    const int64_t P = kv->page_len, v_stride = kv->v_stride;
    for (int64_t p0 = b0 - b0 % P, pg = b0 / P; p0 < n; p0 += P, pg++) {
        const void *vt = (const char *)kv->v_pages[pg] + (size_t)kv->v_off * (f16 ? 2 : 4);
        const float *yp = y + p0;
        const int64_t np = n - p0 < P ? n - p0 : P;
        const int64_t nfull = np & ~(int64_t)63;
        for (int64_t i = p0 < b0 ? b0 - p0 : 0; i < nfull; i += 64)
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m512 yc = _mm512_loadu_ps(yp + i + 16 * c);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    a[r][c] = _mm512_fmadd_ps(rw_load16(vt, f16, (int64_t)(i0 + r) * v_stride + i + 16 * c), yc,
                                              a[r][c]);
            }
        if (nfull < np) /* only in the last page */
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const int64_t at = nfull + 16 * c;
                if (at >= np) break;
                const __mmask16 m = np - at >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (np - at)) - 1);
                const __m512 yc = _mm512_maskz_loadu_ps(m, yp + at);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    a[r][c] = _mm512_fmadd_ps(rw_load16m(vt, f16, (int64_t)(i0 + r) * v_stride + at, m), yc, a[r][c]);
            }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        const __m512 s0 = _mm512_add_ps(a[r][0], a[r][2]), s1 = _mm512_add_ps(a[r][1], a[r][3]);
        out[r] = (float)(double)_mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    }
}

/* dot(value row i of a paged head, y) where y (n elements) is zero past n:
 * as rw_dot_ggml over n rounded up to 64 with zero padding (what llama.cpp
 * computes over its padded, masked KV length). */
static inline __attribute__((always_inline)) float dot_ggml_padded(const rw_attn_pages *kv, int i, bool f16,
                                                                          const float *y, int64_t b0, int64_t n) {
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const int64_t P = kv->page_len;
    for (int64_t p0 = b0 - b0 % P, pg = b0 / P; p0 < n; p0 += P, pg++) {
        const void *x = (const char *)kv->v_pages[pg] + (size_t)(kv->v_off + (int64_t)i * kv->v_stride) * (f16 ? 2 : 4);
        const float *yp = y + p0;
        const int64_t np = n - p0 < P ? n - p0 : P;
        for (int64_t k = p0 < b0 ? b0 - p0 : 0; k < np; k += 64)
            for (int c = 0; c < 4; c++) {
                const int64_t at = k + 16 * c;
                if (at >= np) break;
                const __mmask16 m = np - at >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (np - at)) - 1);
                a[c] = _mm512_fmadd_ps(rw_load16m(x, f16, at, m), _mm512_maskz_loadu_ps(m, yp + at), a[c]);
            }
    }
    a[0] = _mm512_add_ps(a[0], a[2]);
    a[1] = _mm512_add_ps(a[1], a[3]);
    return (float)(double)_mm512_reduce_add_ps(_mm512_add_ps(a[0], a[1]));
}

static inline __attribute__((always_inline)) void attn_head(const float *q, const rw_attn_pages *kv, const bool f16,
                                                             int64_t n_pos, int hd_k, int hd_v, float scale,
                                                             float *scores, float *out) {
    float mx = -INFINITY;
    const int64_t P = kv->page_len;
    /* a sliding window: scores from the 64-block holding `first` on, the
     * positions before `first` get weight 0 (ops_model.h) */
    const int64_t first = kv->first > 0 ? kv->first : 0, b0 = first & ~(int64_t)63;
    for (int64_t p0 = b0 - b0 % P, pg = b0 / P; p0 < n_pos; p0 += P, pg++) { /* scores, page by page: each key's dot is independent */
        const void *k = (const char *)kv->k_pages[pg] + (size_t)kv->k_off * (f16 ? 2 : 4);
        float *sc = scores + p0;
        const int64_t np = n_pos - p0 < P ? n_pos - p0 : P;
        int64_t j = p0 < b0 ? b0 - p0 : 0;
        if (hd_k % 64 == 0) /* four keys at a time, each exactly as rw_dot_ggml */
            for (; j + 4 <= np; j += 4) {
                __m512 a[4][4];
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
                    for (int c = 0; c < 4; c++) a[r][c] = _mm512_setzero_ps();
                for (int i = 0; i < hd_k; i += 64)
#pragma GCC unroll 4
                    for (int c = 0; c < 4; c++) {
                        const __m512 qc = _mm512_loadu_ps(q + i + 16 * c);
#pragma GCC unroll 4
                        for (int r = 0; r < 4; r++)
                            a[r][c] = _mm512_fmadd_ps(rw_load16(k, f16, (j + r) * hd_k + i + 16 * c), qc, a[r][c]);
                    }
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    const __m512 s0 = _mm512_add_ps(a[r][0], a[r][2]), s1 = _mm512_add_ps(a[r][1], a[r][3]);
                    sc[j + r] = (float)(double)_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) * scale;
                }
            }
        for (; j < np; j++) {
            const void *kj = f16 ? (const void *)((const uint16_t *)k + j * hd_k) : (const void *)((const float *)k + j * hd_k);
            sc[j] = rw_dot_ggml(kj, f16, q, hd_k) * scale;
        }
    }
    int64_t j;
    for (j = first; j < n_pos; j++)
        if (scores[j] > mx) mx = scores[j];
    if (kv->sinks && kv->sinks[0] > mx) mx = kv->sinks[0];
    /* softmax numerators; each 16-lane block summed in float, blocks in double */
    const __m512 vmx = _mm512_set1_ps(mx);
    double sum = 0.0;
    for (j = b0; j < n_pos; j += 16) {
        const __mmask16 m = n_pos - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n_pos - j)) - 1);
        const __mmask16 live = m & rw_lanes_from(first - j); /* masked positions: weight 0 */
        __m512 e = _mm512_maskz_mov_ps(live, rw_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + j), vmx)));
        _mm512_mask_storeu_ps(scores + j, m, e);
        sum += (double)_mm512_reduce_add_ps(e);
    }
    if (kv->sinks) sum += (double)expf(kv->sinks[0] - mx);
    const float inv = (float)(1.0 / sum);
    for (j = b0; j < n_pos; j++) scores[j] *= inv;
    int i = 0;
    for (; i + 4 <= hd_v; i += 4) /* four value dims at a time, each exactly as dot_ggml_padded */
        dot4_ggml_padded(kv, i, f16, scores, b0, n_pos, out + i);
    for (; i < hd_v; i++) out[i] = dot_ggml_padded(kv, i, f16, scores, b0, n_pos);
}

/* One copy of the kernel per cache type, so the f16 test is not in the loops. */
void rw_attn_head_avx512(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                         float scale, float *scores, float *out) {
    if (f16) attn_head(q, kv, true, n_pos, hd_k, hd_v, scale, scores, out);
    else attn_head(q, kv, false, n_pos, hd_k, hd_v, scale, scores, out);
}

void rw_swiglu_avx512(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i);
        _mm512_storeu_ps(g + i, _mm512_mul_ps(rw_silu16(x), _mm512_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
