/* simd_avx512_int.h - private to src/kernels, included only by *_avx512.c
 * files: 16-lane helpers that reproduce ggml's CPU vector arithmetic, so that
 * kernels built on them round as llama.cpp's do. */
#ifndef RW_KERNELS_SIMD_AVX512_INT_H
#define RW_KERNELS_SIMD_AVX512_INT_H

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* exp(x), 16 lanes, with the vector expf algorithm of Arm's
 * optimized-routines that ggml's CPU backend uses (ggml_v_expf): n =
 * round(x / ln 2) by the 1.5 * 2^23 shift, b = x - n ln 2 with ln 2 split in
 * two, exp(b) by a degree-5 polynomial in the pairwise order below, scaled
 * by 2^n. Lanes with |n| > 192 give 0 (x < 0) or +inf. About 1 ulp. */
static inline __m512 rw_exp16(__m512 x) {
    const __m512 shift = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift);
    const __m512 n = _mm512_sub_ps(z, shift);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 hi = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)),
                                      u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f)));
    const __m512 poly = _mm512_fmadd_ps(hi, u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    __m512 r = _mm512_scalef_ps(poly, n);
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    if (big) {
        const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
        r = _mm512_mask_mov_ps(r, big & neg, _mm512_setzero_ps());
        r = _mm512_mask_mov_ps(r, big & ~neg, _mm512_set1_ps(INFINITY));
    }
    return r;
}

/* silu(x) = x / (1 + exp(-x)) as ggml_v_silu. */
static inline __m512 rw_silu16(__m512 x) {
    const __m512 e = rw_exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

/* The final reduction of ggml_vec_dot_f32's four accumulators:
 * (a0 + a2) + (a1 + a3), then across the lanes. */
static inline float rw_reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3)));
}

/* The lanes l >= d of 16 (all for d <= 0, none for d >= 16): a block's
 * lanes at or past a sliding window's first position, d = first - block. */
static inline __mmask16 rw_lanes_from(int64_t d) {
    if (d <= 0) return (__mmask16)0xFFFF;
    if (d >= 16) return 0;
    return (__mmask16)(0xFFFFu << d);
}

/* 16 elements at base[i..i+16), f32 or f16 (converted exactly). */
static inline __m512 rw_load16(const void *base, bool f16, int64_t i) {
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i)));
    return _mm512_loadu_ps((const float *)base + i);
}

/* The same, lanes outside m zero. */
static inline __m512 rw_load16m(const void *base, bool f16, int64_t i, __mmask16 m) {
    if (f16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)base + i));
    return _mm512_maskz_loadu_ps(m, (const float *)base + i);
}

/* dot(x, y) over n elements as ggml_vec_dot_f32 / _f16: four accumulators
 * take elements 64s + 16c + lane, reduced by rw_reduce4; the elements past
 * the last multiple of 64 are added one by one: fused onto the float sum
 * (f32: ggml_vec_dot_f32 keeps its sum in float, and GCC contracts its
 * `sumf += x[i]*y[i]`), in double (f16: ggml_vec_dot_f16's sum is double).
 * x f32 or f16. */
static inline float rw_dot_ggml(const void *x, bool f16, const float *y, int64_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64) {
        a0 = _mm512_fmadd_ps(rw_load16(x, f16, i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(rw_load16(x, f16, i + 16), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(rw_load16(x, f16, i + 32), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(rw_load16(x, f16, i + 48), _mm512_loadu_ps(y + i + 48), a3);
    }
    const float red = rw_reduce4(a0, a1, a2, a3);
    if (!f16) {
        float sum = red;
        for (int64_t i = np; i < n; i++) sum = fmaf(((const float *)x)[i], y[i], sum);
        return sum;
    }
    double sum = (double)red;
    for (int64_t i = np; i < n; i++) sum += (double)(_cvtsh_ss(((const uint16_t *)x)[i]) * y[i]);
    return (float)sum;
}

#endif
