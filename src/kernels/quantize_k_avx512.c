/* quantize_k_avx512.c - Q4_K, Q5_K and Q6_K quantizers bitwise equal to
 * quantize_k_ref.c (the specification; tests/kernels/test_quant_fast.c
 * checks every byte).
 *
 * Almost all of a K-quant's time is the per-sub-block search for a scale
 * (rw_fit_scale_min: 22 passes over 32 values; fit_scale_sym: 19 over 16),
 * whose sums are sequential, so a vector inside one sub-block would change
 * their order. Here each of the 16 lanes is one sub-block instead: lane k
 * of vector i holds value i of sub-block k, and every lane runs the
 * reference's float operations in the reference's order (no reassociation,
 * no fused multiply-add: each product and sum is its own intrinsic), so its
 * fits are the reference's bit for bit. Lanes take the reference's branches
 * through masks. The stored scales are the reference's own code
 * (rw_k_pack_scales, rw_q6_K_scales); the re-quantization against them is
 * elementwise, so it is the same in vectors. */
#include <immintrin.h>
#include <string.h>

#include "kernels/quant_int.h"

#define GROUP_MAX_EPS 1e-15f /* as quantize_k_ref.c */

/* rw_nearest_int in 16 lanes: the same add of 1.5 * 2^23 and bit arithmetic. */
static inline __m512i nearest16(__m512 x) {
    __m512i i = _mm512_castps_si512(_mm512_add_ps(x, _mm512_set1_ps(12582912.f)));
    return _mm512_sub_epi32(_mm512_and_si512(i, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x00400000));
}

/* clampi(v, lo, hi) for lo <= hi */
static inline __m512i clamp16(__m512i v, int lo, int hi) {
    return _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi));
}

static inline __m512 neg16(__m512 x) { /* -x, signs of zeros included */
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)));
}

/* Lane k of t[i] = x[k * stride + i], i < n. */
static void transpose_in(const float *x, int stride, int n, __m512 *t) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(stride));
    for (int i = 0; i < n; i++) t[i] = _mm512_i32gather_ps(idx, x + i, 4);
}

/* L[k * stride + i] = lane k of l[i] (values 0..255), i < n. */
static void transpose_out(const __m512i *l, int stride, int n, uint8_t *L) {
    int32_t v[16];
    for (int i = 0; i < n; i++) {
        _mm512_storeu_si512(v, l[i]);
        for (int k = 0; k < 16; k++) L[k * stride + i] = (uint8_t)v[k];
    }
}

/* rw_fit_scale_min(32, nmax, x, w, L, &min_out, Laux, rmin, rdelta, nstep,
 * false) for 16 sub-blocks, one per lane. */
static void fit_scale_min16(const __m512 x[32], const __m512 w[32], int nmax, float rmin, float rdelta, int nstep,
                            __m512i L[32], __m512 *scale_out, __m512 *min_out) {
    const __m512 zero = _mm512_setzero_ps();
    __m512 min = x[0], max = x[0], sum_w = w[0], sum_x = _mm512_mul_ps(sum_w, x[0]);
    for (int i = 1; i < 32; i++) {
        min = _mm512_min_ps(x[i], min); /* x < min ? x : min */
        max = _mm512_max_ps(x[i], max); /* x > max ? x : max */
        sum_w = _mm512_add_ps(sum_w, w[i]);
        sum_x = _mm512_add_ps(sum_x, _mm512_mul_ps(w[i], x[i]));
    }
    min = _mm512_mask_mov_ps(min, _mm512_cmp_ps_mask(min, zero, _CMP_GT_OQ), zero);
    const __mmask16 flat = _mm512_cmp_ps_mask(max, min, _CMP_EQ_OQ);
    __m512 iscale = _mm512_div_ps(_mm512_set1_ps((float)nmax), _mm512_sub_ps(max, min));
    __m512 scale = _mm512_div_ps(_mm512_set1_ps(1.f), iscale), best = zero;
    __m512 Lf[32], Laux[32];
    for (int i = 0; i < 32; i++) {
        Lf[i] = _mm512_cvtepi32_ps(clamp16(nearest16(_mm512_mul_ps(iscale, _mm512_sub_ps(x[i], min))), 0, nmax));
        __m512 diff = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(scale, Lf[i]), min), x[i]);
        best = _mm512_add_ps(best, _mm512_mul_ps(w[i], _mm512_mul_ps(diff, diff))); /* ggml's order */
    }
    /* As in the reference, min is the best fit's so far: a better fit moves
     * the grid of the steps after it. */
    for (int is = 0; is <= nstep; is++) {
        const __m512 num = _mm512_add_ps(
            _mm512_add_ps(_mm512_set1_ps(rmin), _mm512_mul_ps(_mm512_set1_ps(rdelta), _mm512_set1_ps((float)is))),
            _mm512_set1_ps((float)nmax));
        iscale = _mm512_div_ps(num, _mm512_sub_ps(max, min));
        __m512 sum_l = zero, sum_l2 = zero, sum_xl = zero;
        for (int i = 0; i < 32; i++) {
            const __m512 l =
                _mm512_cvtepi32_ps(clamp16(nearest16(_mm512_mul_ps(iscale, _mm512_sub_ps(x[i], min))), 0, nmax));
            Laux[i] = l;
            const __m512 wl = _mm512_mul_ps(w[i], l);
            sum_l = _mm512_add_ps(sum_l, wl);
            sum_l2 = _mm512_add_ps(sum_l2, _mm512_mul_ps(wl, l));
            sum_xl = _mm512_add_ps(sum_xl, _mm512_mul_ps(wl, x[i]));
        }
        const __m512 D = _mm512_sub_ps(_mm512_mul_ps(sum_w, sum_l2), _mm512_mul_ps(sum_l, sum_l));
        const __mmask16 dpos = _mm512_cmp_ps_mask(D, zero, _CMP_GT_OQ);
        if (!dpos) continue;
        __m512 this_scale = _mm512_div_ps(_mm512_sub_ps(_mm512_mul_ps(sum_w, sum_xl), _mm512_mul_ps(sum_x, sum_l)), D);
        __m512 this_min = _mm512_div_ps(_mm512_sub_ps(_mm512_mul_ps(sum_l2, sum_x), _mm512_mul_ps(sum_l, sum_xl)), D);
        const __mmask16 mpos = _mm512_cmp_ps_mask(this_min, zero, _CMP_GT_OQ);
        this_min = _mm512_mask_mov_ps(this_min, mpos, zero);
        this_scale = _mm512_mask_div_ps(this_scale, mpos, sum_xl, sum_l2);
        __m512 err = zero;
        for (int i = 0; i < 32; i++) {
            __m512 diff = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(this_scale, Laux[i]), this_min), x[i]);
            err = _mm512_add_ps(err, _mm512_mul_ps(w[i], _mm512_mul_ps(diff, diff)));
        }
        const __mmask16 upd = dpos & _mm512_cmp_ps_mask(err, best, _CMP_LT_OQ);
        if (!upd) continue;
        for (int i = 0; i < 32; i++) Lf[i] = _mm512_mask_mov_ps(Lf[i], upd, Laux[i]);
        best = _mm512_mask_mov_ps(best, upd, err);
        scale = _mm512_mask_mov_ps(scale, upd, this_scale);
        min = _mm512_mask_mov_ps(min, upd, this_min);
    }
    /* a flat sub-block: levels 0, scale 0, min_out = -min */
    for (int i = 0; i < 32; i++) L[i] = _mm512_maskz_cvtps_epi32((__mmask16)~flat, Lf[i]);
    *scale_out = _mm512_maskz_mov_ps((__mmask16)~flat, scale);
    *min_out = neg16(min);
}

/* The search of k_fit (quantize_k_ref.c) for two super-blocks at x: 16
 * sub-blocks of 32, weights av_x + |x|. */
static void k_fit16(const float *x, int nmax, float rmin, float rdelta, int nstep, float scales[16], float mins[16],
                    uint8_t L[2 * RW_QK_K]) {
    __m512 xt[32], w[32], sc, mn;
    __m512i l[32];
    transpose_in(x, 32, 32, xt);
    __m512 sum_x2 = _mm512_setzero_ps();
    for (int i = 0; i < 32; i++) sum_x2 = _mm512_add_ps(sum_x2, _mm512_mul_ps(xt[i], xt[i]));
    const __m512 av_x = _mm512_sqrt_ps(_mm512_div_ps(sum_x2, _mm512_set1_ps(32.f)));
    for (int i = 0; i < 32; i++) w[i] = _mm512_add_ps(av_x, _mm512_abs_ps(xt[i]));
    fit_scale_min16(xt, w, nmax, rmin, rdelta, nstep, l, &sc, &mn);
    _mm512_storeu_ps(scales, sc);
    _mm512_storeu_ps(mins, mn);
    transpose_out(l, 32, 32, L);
}

/* rw_quantize_q4_K_fitted with the re-quantization (one division per value,
 * elementwise, so the same in any width) and the packing in vectors. */
static void q4_K_finish(const float *x, rw_block_q4_K *y, const float scales[8], const float mins[8],
                        uint8_t L[RW_QK_K]) {
    rw_k_pack_scales(scales, mins, y->scales, &y->d, &y->dmin);
    const float d0 = rw_f16_to_f32(y->d), m0 = rw_f16_to_f32(y->dmin);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        rw_k4_scale_min(j, y->scales, &sc, &m);
        const float d = d0 * sc;
        if (!d) continue; /* keeps the fit's levels */
        const __m512 dm = _mm512_set1_ps(m0 * m), dv = _mm512_set1_ps(d);
        for (int h = 0; h < 32; h += 16) {
            const __m512 q = _mm512_div_ps(_mm512_add_ps(_mm512_loadu_ps(x + 32 * j + h), dm), dv);
            _mm_storeu_si128((__m128i *)(L + 32 * j + h), _mm512_cvtepi32_epi8(clamp16(nearest16(q), 0, 15)));
        }
    }
    /* q[l] = L[j + l] | L[j + l + 32] << 4: levels are at most 15, so a
     * 16-bit shift moves no bit into the next byte */
    for (int j = 0; j < RW_QK_K; j += 64) {
        const __m256i lo = _mm256_loadu_si256((const __m256i *)(L + j));
        const __m256i hi = _mm256_loadu_si256((const __m256i *)(L + j + 32));
        _mm256_storeu_si256((__m256i *)(y->qs + j / 2), _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
    }
}

void rw_quantize_q4_K_avx512(const float *x, rw_block_q4_K *y, int64_t nb) {
    uint8_t L[2 * RW_QK_K];
    float scales[16], mins[16];
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2, x += 2 * RW_QK_K) {
        k_fit16(x, 15, RW_Q4_K_FIT, scales, mins, L);
        q4_K_finish(x, &y[i], scales, mins, L);
        q4_K_finish(x + RW_QK_K, &y[i + 1], scales + 8, mins + 8, L + RW_QK_K);
    }
    if (i < nb) rw_quantize_q4_K_ref(x, &y[i], 1);
}

void rw_quantize_q5_K_avx512(const float *x, rw_block_q5_K *y, int64_t nb) {
    uint8_t L[2 * RW_QK_K];
    float scales[16], mins[16];
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2, x += 2 * RW_QK_K) {
        k_fit16(x, 31, RW_Q5_K_FIT, scales, mins, L);
        rw_quantize_q5_K_fitted(x, &y[i], scales, mins, L);
        rw_quantize_q5_K_fitted(x + RW_QK_K, &y[i + 1], scales + 8, mins + 8, L + RW_QK_K);
    }
    if (i < nb) rw_quantize_q5_K_ref(x, &y[i], 1);
}

/* fit_scale_sym(16, 32, x + 16 * k, L + 16 * k) (quantize_k_ref.c) for the
 * 16 sub-blocks of one super-block, one per lane. */
static void fit_scale_sym16(const float *xs, float scales[16], uint8_t L[RW_QK_K]) {
    enum { nmax = 32 };
    const __m512 zero = _mm512_setzero_ps();
    __m512 x[16], l_best[16];
    transpose_in(xs, 16, 16, x);
    __m512 amax = zero, max = zero;
    for (int i = 0; i < 16; i++) {
        const __m512 a = _mm512_abs_ps(x[i]);
        const __mmask16 m = _mm512_cmp_ps_mask(a, amax, _CMP_GT_OQ);
        amax = _mm512_mask_mov_ps(amax, m, a);
        max = _mm512_mask_mov_ps(max, m, x[i]);
    }
    const __mmask16 tiny = _mm512_cmp_ps_mask(amax, _mm512_set1_ps(GROUP_MAX_EPS), _CMP_LT_OQ);
    __m512 iscale = _mm512_div_ps(_mm512_set1_ps((float)-nmax), max);
    __m512 sumlx = zero, suml2 = zero;
    for (int i = 0; i < 16; i++) {
        const __m512 l = _mm512_cvtepi32_ps(clamp16(nearest16(_mm512_mul_ps(iscale, x[i])), -nmax, nmax - 1));
        l_best[i] = l;
        const __m512 w = _mm512_mul_ps(x[i], x[i]);
        sumlx = _mm512_add_ps(sumlx, _mm512_mul_ps(_mm512_mul_ps(w, x[i]), l));
        suml2 = _mm512_add_ps(suml2, _mm512_mul_ps(_mm512_mul_ps(w, l), l));
    }
    /* suml2 ? sumlx / suml2 : 0 */
    __m512 scale = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(suml2, zero, _CMP_NEQ_UQ), sumlx, suml2);
    __m512 best = _mm512_mul_ps(scale, sumlx);
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        const __m512 num = neg16(
            _mm512_add_ps(_mm512_set1_ps((float)nmax), _mm512_mul_ps(_mm512_set1_ps(0.1f), _mm512_set1_ps((float)is))));
        iscale = _mm512_div_ps(num, max);
        __m512 laux[16];
        sumlx = suml2 = zero;
        for (int i = 0; i < 16; i++) {
            const __m512 l = _mm512_cvtepi32_ps(clamp16(nearest16(_mm512_mul_ps(iscale, x[i])), -nmax, nmax - 1));
            laux[i] = l;
            const __m512 w = _mm512_mul_ps(x[i], x[i]);
            sumlx = _mm512_add_ps(sumlx, _mm512_mul_ps(_mm512_mul_ps(w, x[i]), l));
            suml2 = _mm512_add_ps(suml2, _mm512_mul_ps(_mm512_mul_ps(w, l), l));
        }
        const __mmask16 upd = _mm512_cmp_ps_mask(suml2, zero, _CMP_GT_OQ) &
                              _mm512_cmp_ps_mask(_mm512_mul_ps(sumlx, sumlx), _mm512_mul_ps(best, suml2), _CMP_GT_OQ);
        if (!upd) continue;
        for (int i = 0; i < 16; i++) l_best[i] = _mm512_mask_mov_ps(l_best[i], upd, laux[i]);
        scale = _mm512_mask_div_ps(scale, upd, sumlx, suml2);
        best = _mm512_mask_mul_ps(best, upd, scale, sumlx);
    }
    /* levels stored as l + nmax; a tiny sub-block: levels 0, scale 0 */
    __m512i l[16];
    for (int i = 0; i < 16; i++)
        l[i] = _mm512_maskz_add_epi32((__mmask16)~tiny, _mm512_cvtps_epi32(l_best[i]), _mm512_set1_epi32(nmax));
    _mm512_storeu_ps(scales, _mm512_maskz_mov_ps((__mmask16)~tiny, scale));
    transpose_out(l, 16, 16, L);
}

/* rw_quantize_q6_K_fitted with the re-quantization in vectors. */
static void q6_K_finish(const float *x, rw_block_q6_K *y, const float scales[16], uint8_t L[RW_QK_K]) {
    if (!rw_q6_K_scales(scales, y)) return;
    const float d0 = rw_f16_to_f32(y->d);
    for (int j = 0; j < 16; j++) {
        const float d = d0 * y->scales[j];
        if (!d) continue;
        const __m512 q = _mm512_div_ps(_mm512_loadu_ps(x + 16 * j), _mm512_set1_ps(d));
        const __m512i l = _mm512_add_epi32(clamp16(nearest16(q), -32, 31), _mm512_set1_epi32(32));
        _mm_storeu_si128((__m128i *)(L + 16 * j), _mm512_cvtepi32_epi8(l));
    }
    rw_q6_K_pack(L, y);
}

void rw_quantize_q6_K_avx512(const float *x, rw_block_q6_K *y, int64_t nb) {
    uint8_t L[RW_QK_K];
    float scales[16];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K) {
        fit_scale_sym16(x, scales, L);
        q6_K_finish(x, &y[i], scales, L);
    }
}
