/* ops_avx2.c - AVX2 twins of the ops.h kernels (see ops_int.h), for
 * machines without AVX-512: each computes bit for bit what the AVX-512
 * twin (ops_avx512.c, ops_model_avx512.c) computes. A 16-lane AVX-512
 * vector is two 8-lane halves here (lanes 0-7 and 8-15); element-wise steps
 * are the same instructions on each half, and a horizontal sum
 * (_mm512_reduce_add_ps) is reduce16: the high half onto the low, then the
 * upper four lanes onto the lower four, lanes 0+2 and 1+3, then those two.
 * ggml's vector expf (rw_exp16) scales by 2^n with vscalefps, which AVX2
 * lacks: here two exact-or-once-rounded multiplies by powers of two, which
 * round as vscalefps does (see exp8). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/ops_int.h"
#include "kernels/quant.h"

#define INLINE static inline __attribute__((always_inline))

/* ==== 16-lane arithmetic on 8-lane halves ================================ */

INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* _mm512_reduce_add_ps of [lo | hi]. */
INLINE float reduce16(__m256 lo, __m256 hi) { return hsum8(_mm256_add_ps(hi, lo)); }

/* rw_reduce4 (ggml_vec_dot_f32's final reduction) of four 16-lane
 * accumulators a[c] = [a[2c] | a[2c+1]]: (a0 + a2) + (a1 + a3), then
 * reduce16. */
INLINE float reduce4x16(const __m256 a[8]) {
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
    return reduce16(lo, hi);
}

/* 2^k for integers k in [-126, 127], as floats. */
INLINE __m256 pow2i(__m256i k) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

/* rw_exp16 (simd_avx512_int.h) on 8 lanes, the same operations. Its last
 * step, vscalefps(poly, n) = poly * 2^n rounded once, is poly * 2^(n >> 1)
 * (exact: poly is near 1 and n >> 1 >= -96) times 2^(n - (n >> 1)),
 * rounded once; lanes with |n| > 192 are replaced as there. */
INLINE __m256 exp8(__m256 x) {
    const __m256 shift = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
    const __m256 n = _mm256_sub_ps(z, shift);
    const __m256 b =
        _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 hi =
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f)));
    const __m256 poly =
        _mm256_fmadd_ps(hi, u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    __m256i k = _mm256_cvttps_epi32(n); /* n is an integer; out-of-range lanes are replaced below */
    k = _mm256_min_epi32(_mm256_max_epi32(k, _mm256_set1_epi32(-192)), _mm256_set1_epi32(192));
    const __m256i k1 = _mm256_srai_epi32(k, 1);
    __m256 r = _mm256_mul_ps(_mm256_mul_ps(poly, pow2i(k1)), pow2i(_mm256_sub_epi32(k, k1)));
    const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(absn, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    if (_mm256_movemask_ps(big)) {
        const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
        r = _mm256_blendv_ps(r, _mm256_setzero_ps(), _mm256_and_ps(big, neg));
        r = _mm256_blendv_ps(r, _mm256_set1_ps(INFINITY), _mm256_andnot_ps(neg, big));
    }
    return r;
}

/* rw_silu16 on 8 lanes. */
INLINE __m256 silu8(__m256 x) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* 8 elements at base[i..], f32 or f16 (converted exactly). */
INLINE __m256 load8(const void *base, bool f16, int64_t i) {
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
    return _mm256_loadu_ps((const float *)base + i);
}

/* The same for the n < 8 elements there, zeros past them. */
INLINE __m256 load8_part(const void *base, bool f16, int64_t i, int64_t n) {
    const int64_t m = n < 8 ? n : 8;
    if (f16) { /* the vector conversion (exact) of the pieces, zeros past them */
        uint16_t h[8] = {0};
        memcpy(h, (const uint16_t *)base + i, (size_t)m * 2);
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
    }
    float t[8] = {0};
    memcpy(t, (const float *)base + i, (size_t)m * 4);
    return _mm256_loadu_ps(t);
}

/* rw_dot_ggml (simd_avx512_int.h): four 16-lane accumulators over 64-element
 * steps, rw_reduce4, then the elements past the last multiple of 64 fused
 * onto the float sum (f32) or added in double (f16). */
static float dot_ggml(const void *x, bool f16, const float *y, int64_t n) {
    __m256 a[8];
    for (int c = 0; c < 8; c++) a[c] = _mm256_setzero_ps();
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) a[c] =
            _mm256_fmadd_ps(load8(x, f16, i + 8 * c), _mm256_loadu_ps(y + i + 8 * c), a[c]);
    const float red = reduce4x16(a);
    if (!f16) {
        float sum = red;
        for (int64_t i = np; i < n; i++) sum = fmaf(((const float *)x)[i], y[i], sum);
        return sum;
    }
    double sum = (double)red;
    for (int64_t i = np; i < n; i++) sum += (double)(rw_f16_to_f32(((const uint16_t *)x)[i]) * y[i]);
    return (float)sum;
}

/* ==== activations and norms ============================================== */

void rw_silu_avx2(const float *x, float *y, int64_t n) {
    const int64_t nv = n & ~(int64_t)15; /* the AVX-512 twin's vector part */
    int64_t i = 0;
    for (; i < nv; i += 8) _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

void rw_swiglu_avx2(float *g, const float *u, int64_t n) {
    const int64_t nv = n & ~(int64_t)15;
    int64_t i = 0;
    for (; i < nv; i += 8)
        _mm256_storeu_ps(g + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* rw_relu_sq_ref 8 values at a time (the ordered compare gives 0 for NaN). */
void rw_relu_sq_avx2(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 r = _mm256_and_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ), v);
        _mm256_storeu_ps(x + i, _mm256_mul_ps(r, r));
    }
    if (i < n) rw_relu_sq_ref(x + i, n - i);
}

/* rw_geglu_ref 8 values at a time, as the AVX-512 twin: F16C's conversion
 * rounds to nearest even as rw_f32_to_f16 does, the clamps are ordered
 * compares (false for NaN, as the reference's ifs), the products the same
 * one multiply; a block holding a NaN goes to the reference. */
void rw_geglu_avx2(float *g, const float *u, int64_t n) {
    const float *tab = rw_gelu_f16_table();
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i), uv = _mm256_loadu_ps(u + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
            rw_geglu_ref(g + i, u + i, 8);
            continue;
        }
        const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256 y = _mm256_mul_ps(_mm256_i32gather_ps(tab, h, 4), uv);
        y = _mm256_blendv_ps(y, _mm256_mul_ps(x, uv), _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
        y = _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LE_OQ), y); /* +0, as the reference's 0.0f */
        _mm256_storeu_ps(g + i, y);
    }
    if (i < n) rw_geglu_ref(g + i, u + i, n - i);
}

/* The KV cache's f16 rows, as the AVX-512 twins: F16C's conversions (round
 * to nearest even, as rw_f32_to_f16) 8 at a time, the tail scalar. */
void rw_f32_to_f16_row_avx2(const float *src, rw_f16 *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = rw_f32_to_f16(src[i]);
}

void rw_f16_to_f32_row_avx2(const rw_f16 *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = rw_f16_to_f32(src[i]);
}

void rw_softmax_avx2(const float *x, float *y, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    const __m256 vmx = _mm256_set1_ps(mx);
    double sum = 0.0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 lo = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx));
        const __m256 hi = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vmx));
        _mm256_storeu_ps(y + i, lo);
        _mm256_storeu_ps(y + i + 8, hi);
        sum += (double)reduce16(lo, hi);
    }
    for (; i < n; i++) {
        y[i] = expf(x[i] - mx);
        sum += (double)y[i];
    }
    const __m256 inv = _mm256_set1_ps((float)(1.0 / sum));
    for (i = 0; i + 16 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
    for (; i < n; i++) y[i] *= (float)(1.0 / sum);
}

void rw_rmsnorm_gated_avx2(const float *x, const float *w, const float *z, int n_groups, int gs, const float *scales,
                           float *y) {
    for (int g = 0; g < n_groups; g++) {
        const float *xg = x + (int64_t)g * gs, *zg = z + (int64_t)g * gs;
        float *yg = y + (int64_t)g * gs;
        const float scale = scales[g];
        const __m256 vs = _mm256_set1_ps(scale);
        const int nv = gs & ~15;
        int i = 0;
        for (; i < nv; i += 8) {
            const __m256 nx = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xg + i), vs), _mm256_loadu_ps(w + i));
            _mm256_storeu_ps(yg + i, _mm256_mul_ps(nx, silu8(_mm256_loadu_ps(zg + i))));
        }
        for (; i < gs; i++) yg[i] = ((xg[i] * scale) * w[i]) * (zg[i] / (1.0f + expf(-zg[i])));
    }
}

/* ==== the recurrences ==================================================== */

/* row *= decay, returning dot(row, k) in ggml_vec_dot_f32's order (the
 * AVX-512 twin's: four 16-lane accumulators, the tail fused one by one). */
static inline float scale_dot(float *row, float decay, const float *k, int n) {
    const __m256 vd = _mm256_set1_ps(decay);
    __m256 a[8];
    for (int c = 0; c < 8; c++) a[c] = _mm256_setzero_ps();
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64) _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
            const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(row + i + 8 * c), vd);
            _mm256_storeu_ps(row + i + 8 * c, r);
            a[c] = _mm256_fmadd_ps(r, _mm256_loadu_ps(k + i + 8 * c), a[c]);
        }
    float sum = reduce4x16(a);
    for (int i = np; i < n; i++) {
        row[i] *= decay;
        sum = fmaf(row[i], k[i], sum);
    }
    return sum;
}

/* row += k * d (FMA), returning dot(row, q) in the same order. */
static inline float mad_dot(float *row, const float *k, float d, const float *q, int n) {
    const __m256 vd = _mm256_set1_ps(d);
    __m256 a[8];
    for (int c = 0; c < 8; c++) a[c] = _mm256_setzero_ps();
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64) _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
            const __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 8 * c), vd, _mm256_loadu_ps(row + i + 8 * c));
            _mm256_storeu_ps(row + i + 8 * c, r);
            a[c] = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + i + 8 * c), a[c]);
        }
    float sum = reduce4x16(a);
    for (int i = np; i < n; i++) {
        row[i] = fmaf(k[i], d, row[i]);
        sum = fmaf(row[i], q[i], sum);
    }
    return sum;
}

/* reduce16 of eight rows at once, lane r the sum of row r: v[r] = hi + lo
 * of row r's 16-lane vector, then lane i + lane i+4, + lane i+2, + lane
 * i+1 as hsum8 (the AVX-512 twin's reduce_add16, on half the rows). */
INLINE __m256 reduce8x8(const __m256 v[8]) {
    __m256 z[4], w[2];
    for (int p = 0; p < 4; p++) /* row 2p in lanes 0-3, row 2p+1 in 4-7: lane i + lane i+4 */
        z[p] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x31));
    for (int p = 0; p < 2; p++) /* + lane i+2: rows 4p, 4p+2 in the low half, 4p+1, 4p+3 in the high */
        w[p] = _mm256_add_ps(_mm256_shuffle_ps(z[2 * p], z[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(z[2 * p], z[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* + lane i+1: lanes hold rows 0 2 4 6 | 1 3 5 7 */
    const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One row of a block through one step of the fused delta rule below: with
 * UPD the previous token's update (row += k * d) and dot(row, q), with DEC
 * this token's decay (row *= decay) and dot(row, k), the row loaded and
 * stored once for both. Each dot in the AVX-512 twin's order: its four
 * 16-lane accumulators are the 8-lane partials p[i] = chunk i (+ chunk i+8
 * when DK is 128), summed ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7));
 * the chunks are visited in that order so three partials per dot stay live
 * (16 ymm registers do not hold all eight of each). */
INLINE void delta_row_step(float *row, const int DK, const bool UPD, const bool DEC, __m256 vd, const float *ku,
                           const float *qu, __m256 vdec, const float *kn, __m256 *po, __m256 *pa) {
    static const int order[8] = {0, 4, 2, 6, 1, 5, 3, 7};
    const __m256 z = _mm256_setzero_ps();
    __m256 so[2] = {z, z}, sa[2] = {z, z};
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        __m256 xo = z, xa = z, yo = z, ya = z;
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) {
            __m256 bo = z, ba = z;
            _Pragma("GCC unroll 2") for (int c = order[4 * h + m]; c < DK / 8; c += 8) {
                __m256 u = _mm256_loadu_ps(row + 8 * c);
                if (UPD) {
                    u = _mm256_fmadd_ps(_mm256_loadu_ps(ku + 8 * c), vd, u);
                    bo = _mm256_fmadd_ps(u, _mm256_loadu_ps(qu + 8 * c), bo);
                }
                if (DEC) {
                    u = _mm256_mul_ps(u, vdec);
                    ba = _mm256_fmadd_ps(u, _mm256_loadu_ps(kn + 8 * c), ba);
                }
                _mm256_storeu_ps(row + 8 * c, u);
            }
            if (m == 0) xo = bo, xa = ba;
            else if (m == 1) xo = _mm256_add_ps(xo, bo), xa = _mm256_add_ps(xa, ba);
            else if (m == 2) yo = bo, ya = ba;
            else so[h] = _mm256_add_ps(xo, _mm256_add_ps(yo, bo)), sa[h] = _mm256_add_ps(xa, _mm256_add_ps(ya, ba));
        }
    }
    *po = _mm256_add_ps(so[0], so[1]);
    *pa = _mm256_add_ps(sa[0], sa[1]);
}

/* reduce8x8's arithmetic on four rows, lane r the sum of row r. */
INLINE __m128 reduce4x8(const __m256 v[4]) {
    const __m256 z0 = _mm256_add_ps(_mm256_permute2f128_ps(v[0], v[1], 0x20), _mm256_permute2f128_ps(v[0], v[1], 0x31));
    const __m256 z1 = _mm256_add_ps(_mm256_permute2f128_ps(v[2], v[3], 0x20), _mm256_permute2f128_ps(v[2], v[3], 0x31));
    const __m256 w = _mm256_add_ps(_mm256_shuffle_ps(z0, z1, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(z0, z1, _MM_SHUFFLE(3, 2, 3, 2)));
    /* lanes hold rows 0 2 0 2 | 1 3 1 3 */
    const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(w, w, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(w, w, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm_unpacklo_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
}

/* Step s of a block of 8 rows: token s-1's update (d from din) and output
 * (UPD), token s's decay and d = (v - S^T k) * beta into dout (DEC). The d
 * of rows 0-3 is reduced as soon as those rows are done, so that the next
 * step's first rows need not wait for the last ones. */
INLINE void delta_block_step(float *blk, const int DK, const bool UPD, const bool DEC, int64_t s, int j0,
                             const float *din, float *dout, const float *q, int64_t q_stride, const float *k,
                             int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                             const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride) {
    const float *ku = UPD ? k + (s - 1) * k_stride : NULL, *qu = UPD ? q + (s - 1) * q_stride : NULL;
    const float *kn = DEC ? k + s * k_stride : NULL;
    const __m256 vdec = _mm256_set1_ps(DEC ? expf(g[s * g_stride]) : 1.0f);
    const __m128 vb = _mm_set1_ps(DEC ? beta[s * beta_stride] : 0.0f);
    __m256 po[8], pa[8];
    for (int h = 0; h < 8; h += 4) {
        for (int r = h; r < h + 4; r++)
            delta_row_step(blk + r * DK, DK, UPD, DEC, _mm256_set1_ps(UPD ? din[r] : 0.0f), ku, qu, vdec, kn, &po[r],
                           &pa[r]);
        if (DEC)
            _mm_storeu_ps(dout + h,
                          _mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(v + s * v_stride + j0 + h), reduce4x8(pa + h)), vb));
    }
    if (UPD) _mm256_storeu_ps(o + (s - 1) * o_stride + j0, _mm256_mul_ps(reduce8x8(po), _mm256_set1_ps(scale)));
}

/* The delta rule for dk = DK (64 or 128) and dv a multiple of 8, as the
 * AVX-512 twin's blocked form (the same operations on each element, the
 * same dot orders): a block of 8 rows of S^T (4 KiB at most) runs through a
 * tile of tokens, so it stays in L1, and its rows' dots are reduced
 * together (reduce8x8). Unlike the twin, one pass over a row does token
 * t's update and token t+1's decay: the row is loaded and stored once per
 * token, not twice, with k and q read from L1 as operands. A block's d of
 * the last token of a tile waits in dpend (dv floats) for the next tile. */
INLINE void delta_blocked(float *S, const int DK, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                          int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                          const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                          float *dpend) {
    if (n_t <= 0) return;
    for (int64_t t0 = 0; t0 < n_t; t0 += RW_DELTA_TILE) {
        const int64_t t1 = t0 + RW_DELTA_TILE < n_t ? t0 + RW_DELTA_TILE : n_t;
        for (int j0 = 0; j0 < dv; j0 += 8) {
            float *blk = S + (int64_t)j0 * DK, d[2][8];
            int64_t s = t0;
            if (s == 0)
                delta_block_step(blk, DK, false, true, 0, j0, NULL, d[0], q, q_stride, k, k_stride, v, v_stride, g,
                                 g_stride, beta, beta_stride, scale, o, o_stride),
                    s++;
            else memcpy(d[(s - 1) & 1], dpend + j0, sizeof d[0]);
            for (; s < t1; s++) {
                rw_delta_prefetch(s + RW_DELTA_AHEAD, n_t, j0 == 0, DK, q, q_stride, k, k_stride, v + j0, v_stride);
                delta_block_step(blk, DK, true, true, s, j0, d[(s - 1) & 1], d[s & 1], q, q_stride, k, k_stride, v,
                                 v_stride, g, g_stride, beta, beta_stride, scale, o, o_stride);
            }
            if (t1 < n_t) memcpy(dpend + j0, d[(t1 - 1) & 1], sizeof d[0]);
            else
                delta_block_step(blk, DK, true, false, n_t, j0, d[(n_t - 1) & 1], NULL, q, q_stride, k, k_stride, v,
                                 v_stride, g, g_stride, beta, beta_stride, scale, o, o_stride);
        }
    }
}

void rw_delta_rule_head_avx2(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                             int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                             const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                             float *scratch) {
    if (dk == 128 && dv % 8 == 0) {
        delta_blocked(S, 128, dv, n_t, q, q_stride, k, k_stride, v, v_stride, g, g_stride, beta, beta_stride, scale, o,
                      o_stride, scratch);
        return;
    }
    if (dk == 64 && dv % 8 == 0) {
        delta_blocked(S, 64, dv, n_t, q, q_stride, k, k_stride, v, v_stride, g, g_stride, beta, beta_stride, scale, o,
                      o_stride, scratch);
        return;
    }
    float *d = scratch;
    for (int64_t t = 0; t < n_t; t++) {
        const float *qt = q + t * q_stride, *kt = k + t * k_stride, *vt = v + t * v_stride;
        const float decay = expf(g[t * g_stride]), b = beta[t * beta_stride];
        float *ot = o + t * o_stride;
        /* Row j of S^T needs only its own d[j], so both passes run over a
         * block of 16 rows at a time: the block stays in L1 between them and
         * its rows' reductions are independent, so they overlap. (Running a
         * block through every token first, as the AVX-512 twin does with k
         * and q in registers, was slower here: 16 registers do not hold
         * them, and the token's k and q are read again for every block.) */
        for (int j0 = 0; j0 < dv; j0 += 16) {
            const int j1 = j0 + 16 < dv ? j0 + 16 : dv;
            for (int j = j0; j < j1; j++) d[j] = (vt[j] - scale_dot(S + (int64_t)j * dk, decay, kt, dk)) * b;
            for (int j = j0; j < j1; j++) ot[j] = mad_dot(S + (int64_t)j * dk, kt, d[j], qt, dk) * scale;
        }
    }
}

/* Rows i .. i + R - 1 (R <= 2) of one token's state: each row's operations
 * in the one-row order (ops_ssm.c), its 8 accumulators a[c] (elements 64s +
 * 8c + lane) taken in the pairs reduce4x16 adds first, (a0, a4), (a2, a6),
 * (a1, a5), (a3, a7), so that two rows' chains fit the 16 registers side by
 * side and B and C are loaded once for both. */
INLINE void ssm_rows_avx2(float *state, int ds, int np, const float *xt, const float *Bt, const float *Ct, float dA,
                          float dtp, float D, float *yt, int i, const int R) {
    const __m256 vdA = _mm256_set1_ps(dA);
    __m256 vx[2], half[2][2];
    float xdt[2];
    _Pragma("GCC unroll 2") for (int r = 0; r < R; r++) xdt[r] = xt[i + r] * dtp, vx[r] = _mm256_set1_ps(xdt[r]);
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        __m256 q[2][2];
        _Pragma("GCC unroll 2") for (int k = 0; k < 2; k++) {
            const int c0 = h + 2 * k; /* the pair (c0, c0 + 4) */
            __m256 a[2][2];
            _Pragma("GCC unroll 2") for (int r = 0; r < R; r++) a[r][0] = a[r][1] = _mm256_setzero_ps();
            for (int s = 0; s < np; s += 64) _Pragma("GCC unroll 2") for (int e = 0; e < 2; e++) {
                    const int at = s + 8 * (c0 + 4 * e);
                    const __m256 b = _mm256_loadu_ps(Bt + at), cc = _mm256_loadu_ps(Ct + at);
                    _Pragma("GCC unroll 2") for (int r = 0; r < R; r++) {
                        float *si = state + (int64_t)(i + r) * ds + at;
                        const __m256 st =
                            _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(si), vdA), _mm256_mul_ps(b, vx[r]));
                        a[r][e] = _mm256_fmadd_ps(st, cc, a[r][e]);
                        _mm256_storeu_ps(si, st);
                    }
                }
            _Pragma("GCC unroll 2") for (int r = 0; r < R; r++) q[k][r] = _mm256_add_ps(a[r][0], a[r][1]);
        }
        _Pragma("GCC unroll 2") for (int r = 0; r < R; r++) half[h][r] = _mm256_add_ps(q[0][r], q[1][r]);
    }
    _Pragma("GCC unroll 2") for (int r = 0; r < R; r++) {
        float *si = state + (int64_t)(i + r) * ds;
        float sum = np ? reduce16(half[0][r], half[1][r]) : 0.0f;
        for (int s = np; s < ds; s++) { /* ggml's scalar tail as GCC contracts it (ops_ssm.c) */
            const float v = fmaf(si[s], dA, Bt[s] * xdt[r]);
            sum = fmaf(v, Ct[s], sum);
            si[s] = v;
        }
        yt[i + r] = sum + xt[i + r] * D;
    }
}

void rw_ssm_scan_head_avx2(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride, const float *dt,
                           int64_t dt_stride, float dt_bias, float A, const float *B, const float *C, int64_t bc_stride,
                           float D, float *y, int64_t y_stride) {
    const int np = ds & ~63;
    for (int64_t t = 0; t < n_t; t++) {
        const float *xt = x + t * x_stride, *Bt = B + t * bc_stride, *Ct = C + t * bc_stride;
        float *yt = y + t * y_stride;
        const float dtp = rw_softplus1(dt[t * dt_stride] + dt_bias);
        const float dA = expf(dtp * A);
        int i = 0;
        for (; i + 2 <= hd; i += 2) ssm_rows_avx2(state, ds, np, xt, Bt, Ct, dA, dtp, D, yt, i, 2);
        if (i < hd) ssm_rows_avx2(state, ds, np, xt, Bt, Ct, dA, dtp, D, yt, i, 1);
    }
}

/* ==== attention of one query head ======================================== */

/* The 8 values of a value row's page from position at (< np, the page's
 * last full 64-block passed) times y, fused onto a; zeros past np (which
 * leave the lanes as they are); at >= np: a as it is. */
INLINE __m256 tail8(const void *x, const bool f16, const float *y, int64_t at, int64_t np, int64_t P, __m256 a) {
    if (at >= np) return a;
    if (np - at >= 8) return _mm256_fmadd_ps(load8(x, f16, at), _mm256_loadu_ps(y + at), a);
    if (at + 8 <= P) {
        /* a page of the cache holds P positions (a multiple of 64): the 8
         * values are there to read, those past np masked to 0, the scores
         * read only up to np */
        const __m256i live =
            _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(np - at)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256 xv = _mm256_and_ps(load8(x, f16, at), _mm256_castsi256_ps(live));
        return _mm256_fmadd_ps(xv, _mm256_maskload_ps(y + at, live), a);
    }
    return _mm256_fmadd_ps(load8_part(x, f16, at, np - at), load8_part(y, false, at, np - at), a);
}

/* dot(value row i of a paged head, y) over positions b0..n (b0 a multiple
 * of 64) as the AVX-512 twin's dot_ggml_padded: rw_dot_ggml's four 16-lane
 * accumulators over n rounded up to 64 with zeros (pages hold multiples of
 * 64 positions but the last), no scalar tail. */
INLINE float dot_padded_t(const rw_attn_pages *kv, int i, const bool f16, const float *y, int64_t b0, int64_t n) {
    __m256 a[8];
    for (int c = 0; c < 8; c++) a[c] = _mm256_setzero_ps();
    const int64_t P = kv->page_len;
    for (int64_t pg = b0 / P, p0 = pg * P; p0 < n; p0 += P, pg++) { /* no division per page */
        const void *x = (const char *)kv->v_pages[pg] + (size_t)(kv->v_off + (int64_t)i * kv->v_stride) * (f16 ? 2 : 4);
        const float *yp = y + p0;
        const int64_t np = n - p0 < P ? n - p0 : P;
        const int64_t nfull = np & ~(int64_t)63;
        for (int64_t k = p0 < b0 ? b0 - p0 : 0; k < nfull; k += 64)
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) a[c] =
                _mm256_fmadd_ps(load8(x, f16, k + 8 * c), _mm256_loadu_ps(yp + k + 8 * c), a[c]);
        /* the tail; unrolled: constant indices keep a[] in registers */
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) a[c] = tail8(x, f16, yp, nfull + 8 * c, np, P, a[c]);
    }
    return reduce4x16(a);
}

/* one body per element type */
static float dot_padded(const rw_attn_pages *kv, int i, bool f16, const float *y, int64_t b0, int64_t n) {
    return f16 ? dot_padded_t(kv, i, true, y, b0, n) : dot_padded_t(kv, i, false, y, b0, n);
}

/* The largest of s[j..n) (-inf for none), 8 at a time: as max_from in
 * ops_avx512.c (NaNs skipped as the scalar scan skips them; only a zero
 * maximum's sign may differ, which no later step sees). */
static float max_from(const float *s, int64_t j, int64_t n) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    for (; j + 16 <= n; j += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(s + j), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(s + j + 8), m1);
    }
    m0 = _mm256_max_ps(m0, m1);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m0), _mm256_extractf128_ps(m0, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float mx = _mm_cvtss_f32(h);
    for (; j < n; j++)
        if (s[j] > mx) mx = s[j];
    return mx;
}

/* Softmax of one head's scores in place over positions b0..n_pos (b0 a
 * multiple of 64; those before `first`, a sliding window's start, weigh
 * exactly 0): max, numerators per 16-lane block (zeros past n_pos and
 * before first) summed in float, the blocks in double, times 1/sum; a sink
 * adds its share to the denominator. rw_attn_head_paged_ref's operations. */
static void softmax_window(float *scores, int64_t b0, int64_t first, int64_t n_pos, const float *sink) {
    float mx = max_from(scores, first, n_pos);
    if (sink && sink[0] > mx) mx = sink[0];
    const __m256 vmx = _mm256_set1_ps(mx);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    double sum = 0.0;
    for (int64_t j = b0; j < n_pos; j += 16) {
        const int64_t left = n_pos - j;
        __m256 e[2];
        for (int h = 0; h < 2; h++) {
            const int64_t at = j + 8 * h, cnt = left - 8 * h;
            if (cnt >= 8) {
                e[h] = exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + at), vmx));
                if (at < first) /* lanes before the window: 0 */
                    e[h] = _mm256_and_ps(e[h], _mm256_castsi256_ps(_mm256_cmpgt_epi32(
                                                   _mm256_add_epi32(lane, _mm256_set1_epi32((int)(at - first))),
                                                   _mm256_set1_epi32(-1))));
                _mm256_storeu_ps(scores + at, e[h]);
            } else {
                float t[8] = {0};
                for (int64_t l = 0; l < cnt; l++) t[l] = scores[at + l];
                _mm256_storeu_ps(t, exp8(_mm256_sub_ps(_mm256_loadu_ps(t), vmx)));
                for (int l = cnt > 0 ? (int)cnt : 0; l < 8; l++) t[l] = 0.0f;
                for (int l = 0; l < 8 && at + l < first; l++) t[l] = 0.0f;
                for (int64_t l = 0; l < cnt; l++) scores[at + l] = t[l];
                e[h] = _mm256_loadu_ps(t);
            }
        }
        sum += (double)reduce16(e[0], e[1]);
    }
    if (sink) sum += (double)expf(sink[0] - mx);
    const float inv = (float)(1.0 / sum);
    int64_t j = b0;
    for (; j + 8 <= n_pos; j += 8)
        _mm256_storeu_ps(scores + j, _mm256_mul_ps(_mm256_loadu_ps(scores + j), _mm256_set1_ps(inv)));
    for (; j < n_pos; j++) scores[j] *= inv;
}

static inline __attribute__((always_inline)) void attn_head(const float *q, const rw_attn_pages *kv, const bool f16,
                                                            int64_t n_pos, int hd_k, int hd_v, float scale,
                                                            float *scores, float *out) {
    const int64_t P = kv->page_len;
    /* a sliding window (kv->first > 0): from the 64-block b0 holding
     * `first`, as attn_group below */
    const int64_t first = kv->first > 0 ? kv->first : 0, b0 = first & ~(int64_t)63;
    for (int64_t pg = b0 / P, p0 = pg * P; p0 < n_pos; p0 += P, pg++) { /* scores, page by page */
        const void *k = (const char *)kv->k_pages[pg] + (size_t)kv->k_off * (f16 ? 2 : 4);
        const int64_t np = n_pos - p0 < P ? n_pos - p0 : P;
        for (int64_t j = p0 < b0 ? b0 - p0 : 0; j < np; j++) {
            const void *kj =
                f16 ? (const void *)((const uint16_t *)k + j * hd_k) : (const void *)((const float *)k + j * hd_k);
            scores[p0 + j] = dot_ggml(kj, f16, q, hd_k) * scale;
        }
    }
    softmax_window(scores, b0, first, n_pos, kv->sinks);
    for (int i = 0; i < hd_v; i++) out[i] = dot_padded(kv, i, f16, scores, b0, n_pos);
}

void rw_attn_head_avx2(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                       float scale, float *scores, float *out) {
    if (f16) attn_head(q, kv, true, n_pos, hd_k, hd_v, scale, scores, out);
    else attn_head(q, kv, false, n_pos, hd_k, hd_v, scale, scores, out);
}

/* ==== attention of a GQA group =========================================== */

/* hb <= 4 heads of a group: the scores of key kj (hd_k a multiple of 64),
 * each head's exactly dot_ggml's: its 8 accumulators are chains over the
 * 64-blocks, computed here two chunks at a time for all heads, so each 8
 * elements of the key are loaded (converted) once for the heads. */
INLINE void group_scores(const float *q, int hd_k, const int hb, const void *kj, const bool f16, float scale, float *s,
                         int64_t s_stride) {
    __m256 a[4][8];
    for (int c = 0; c < 8; c += 2) {
        __m256 x0[4], x1[4];
        _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) x0[h] = x1[h] = _mm256_setzero_ps();
        for (int64_t i = 0; i < hd_k; i += 64) {
            const __m256 k0 = load8(kj, f16, i + 8 * c), k1 = load8(kj, f16, i + 8 * c + 8);
            _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) if (h < hb) {
                const float *qh = q + (int64_t)h * hd_k + i + 8 * c;
                x0[h] = _mm256_fmadd_ps(k0, _mm256_loadu_ps(qh), x0[h]);
                x1[h] = _mm256_fmadd_ps(k1, _mm256_loadu_ps(qh + 8), x1[h]);
            }
        }
        _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) {
            a[h][c] = x0[h];
            a[h][c + 1] = x1[h];
        }
    }
    for (int h = 0; h < hb; h++) s[h * s_stride] = reduce4x16(a[h]) * scale;
}

/* The last, partial 64-block of a group's positions, the same for every
 * value dimension: each head's probabilities there, zeros past n, and each
 * 8-lane chunk's live lanes (those below n). */
typedef struct {
    float p[4][64];
    __m256 live[8];
} group_tail;

static void group_tail_make(const float *p, int64_t n, int hb, group_tail *tl) {
    const int64_t nfull = n & ~(int64_t)63;
    for (int h = 0; h < hb; h++)
        for (int l = 0; l < 64; l++) tl->p[h][l] = nfull + l < n ? p[h * n + nfull + l] : 0.0f;
    for (int c = 0; c < 8; c++)
        tl->live[c] = _mm256_castsi256_ps(
            _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - nfull - 8 * c)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

/* out[h * out_stride] = dot_padded(value row i, p + h * n) for hb <= 4
 * heads, the same chains two chunks at a time, the row's values loaded once
 * for the heads. The full 64-blocks run in one loop across pages (a page
 * holds a multiple of 64 positions, so no block straddles two), the
 * accumulators in registers; then the tail, in the last page. */
INLINE void group_values(const rw_attn_pages *kv, int i, const bool f16, const float *p, int64_t b0, int64_t n,
                         const int hb, const group_tail *tl, float *out, int64_t out_stride) {
    const int64_t P = kv->page_len, nfull = n & ~(int64_t)63;
    const size_t esz = f16 ? 2 : 4, row = (size_t)(kv->v_off + (int64_t)i * kv->v_stride) * esz;
    __m256 a[4][8];
    for (int c = 0; c < 8; c += 2) {
        __m256 x0[4], x1[4];
        _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) x0[h] = x1[h] = _mm256_setzero_ps();
        const char *x = NULL;
        /* the page of block k, and k's offset in it (from b0, a window's
         * first 64-block: the blocks before it are not read) */
        int64_t pg = b0 / P, off = P;
        for (int64_t k = b0; k < nfull; k += 64, off += 64) {
            if (off == P) {
                x = (const char *)kv->v_pages[pg] + row, off = k - pg * P, pg++;
                if (c == 0 && P < n) { /* the next dimension's piece of this page, as the AVX-512 twin */
                    const char *next = x + (size_t)kv->v_stride * esz;
                    const int64_t np = n - k < P ? n - k : P;
                    for (size_t b = 0; b < (size_t)np * esz; b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
                }
            }
            const __m256 v0 = load8(x, f16, off + 8 * c), v1 = load8(x, f16, off + 8 * c + 8);
            _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) if (h < hb) {
                const float *ph = p + h * n + k + 8 * c;
                x0[h] = _mm256_fmadd_ps(v0, _mm256_loadu_ps(ph), x0[h]);
                x1[h] = _mm256_fmadd_ps(v1, _mm256_loadu_ps(ph + 8), x1[h]);
            }
        }
        if (nfull < n) { /* the tail, in the last page: tail8's operations, the masks made once per group */
            const int64_t p0 = (n - 1) / P * P, np = n - p0, at = nfull - p0 + 8 * c;
            const void *xl = (const char *)kv->v_pages[(n - 1) / P] + row;
            if (at < np) {
                const __m256 v0 =
                    _mm256_and_ps(at + 8 <= P ? load8(xl, f16, at) : load8_part(xl, f16, at, np - at), tl->live[c]);
                _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) if (h < hb) x0[h] =
                    _mm256_fmadd_ps(v0, _mm256_loadu_ps(tl->p[h] + 8 * c), x0[h]);
            }
            if (at + 8 < np) {
                const __m256 v1 = _mm256_and_ps(
                    at + 16 <= P ? load8(xl, f16, at + 8) : load8_part(xl, f16, at + 8, np - at - 8), tl->live[c + 1]);
                _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) if (h < hb) x1[h] =
                    _mm256_fmadd_ps(v1, _mm256_loadu_ps(tl->p[h] + 8 * c + 8), x1[h]);
            }
        }
        _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) {
            a[h][c] = x0[h];
            a[h][c + 1] = x1[h];
        }
    }
    for (int h = 0; h < hb; h++) out[h * out_stride] = reduce4x16(a[h]);
}

INLINE void attn_group(const float *q, int r, const rw_attn_pages *kv, const bool f16, int64_t n_pos, int hd_k,
                       int hd_v, float scale, float *scores, float *out) {
    const size_t esz = f16 ? 2 : 4;
    const int64_t P = kv->page_len;
    /* a sliding window (kv->first > 0): keys from the 64-block b0 holding
     * `first`, those before it weighing exactly 0, as the reference */
    const int64_t first = kv->first > 0 ? kv->first : 0, b0 = first & ~(int64_t)63;
    for (int h0 = 0; h0 < r; h0 += 4) {
        const int hb = r - h0 < 4 ? r - h0 : 4;
        const float *qb = q + (int64_t)h0 * hd_k;
        float *sb = scores + h0 * n_pos;
        for (int64_t pg = b0 / P, p0 = pg * P; p0 < n_pos; p0 += P, pg++) {
            const char *k = (const char *)kv->k_pages[pg] + (size_t)kv->k_off * esz;
            const int64_t np = n_pos - p0 < P ? n_pos - p0 : P;
            for (int64_t j = p0 < b0 ? b0 - p0 : 0; j < np; j++) {
                const void *kj = k + (size_t)(j * hd_k) * esz;
                switch (hb) { /* the head count a constant in each body */
                case 1: group_scores(qb, hd_k, 1, kj, f16, scale, sb + p0 + j, n_pos); break;
                case 2: group_scores(qb, hd_k, 2, kj, f16, scale, sb + p0 + j, n_pos); break;
                case 3: group_scores(qb, hd_k, 3, kj, f16, scale, sb + p0 + j, n_pos); break;
                default: group_scores(qb, hd_k, 4, kj, f16, scale, sb + p0 + j, n_pos); break;
                }
            }
        }
        for (int h = 0; h < hb; h++)
            softmax_window(sb + h * n_pos, b0, first, n_pos, kv->sinks ? kv->sinks + h0 + h : NULL);
        float *ob = out + (int64_t)h0 * hd_v;
        group_tail tl;
        group_tail_make(sb, n_pos, hb, &tl);
        for (int i = 0; i < hd_v; i++) switch (hb) {
            case 1: group_values(kv, i, f16, sb, b0, n_pos, 1, &tl, ob + i, hd_v); break;
            case 2: group_values(kv, i, f16, sb, b0, n_pos, 2, &tl, ob + i, hd_v); break;
            case 3: group_values(kv, i, f16, sb, b0, n_pos, 3, &tl, ob + i, hd_v); break;
            default: group_values(kv, i, f16, sb, b0, n_pos, 4, &tl, ob + i, hd_v); break;
            }
    }
}

bool rw_attn_group_avx2_fits(const rw_attn_pages *kv, int hd_k) { return hd_k % 64 == 0; }

void rw_attn_group_avx2(const float *q, int r, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                        float scale, float *scores, float *out) {
    if (f16) attn_group(q, r, kv, true, n_pos, hd_k, hd_v, scale, scores, out);
    else attn_group(q, r, kv, false, n_pos, hd_k, hd_v, scale, scores, out);
}

/* ==== the kernel-4 causal conv over a run of tokens ======================= */

int rw_conv_k4_avx2(const float *x, int64_t x_stride, int64_t n_t, int C, const float *w, const float *bias, bool fused,
                    float *state, float *y, int64_t y_stride) {
    const __m256i i4 = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i i3 = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
    int c = 0;
    for (; c + 8 <= C; c += 8) { /* 8 channels through every token: taps and state stay in registers */
        const float *wc = w + (int64_t)c * 4;
        float *st = state + (int64_t)c * 3;
        const __m256 w0 = _mm256_i32gather_ps(wc, i4, 4), w1 = _mm256_i32gather_ps(wc + 1, i4, 4),
                     w2 = _mm256_i32gather_ps(wc + 2, i4, 4), w3 = _mm256_i32gather_ps(wc + 3, i4, 4);
        const __m256 b = bias ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps();
        __m256 s0 = _mm256_i32gather_ps(st, i3, 4), s1 = _mm256_i32gather_ps(st + 1, i3, 4),
               s2 = _mm256_i32gather_ps(st + 2, i3, 4);
        for (int64_t t = 0; t < n_t; t++) {
            const __m256 xc = _mm256_loadu_ps(x + t * x_stride + c); /* read before y (which may be x) is written */
            __m256 sum = _mm256_setzero_ps();
            if (fused) { /* conv_k4's operations, per lane */
                sum = _mm256_fmadd_ps(s0, w0, sum);
                sum = _mm256_fmadd_ps(s1, w1, sum);
                sum = _mm256_fmadd_ps(s2, w2, sum);
                sum = _mm256_fmadd_ps(xc, w3, sum);
            } else {
                sum = _mm256_add_ps(sum, _mm256_mul_ps(s0, w0));
                sum = _mm256_add_ps(sum, _mm256_mul_ps(s1, w1));
                sum = _mm256_add_ps(sum, _mm256_mul_ps(s2, w2));
                sum = _mm256_add_ps(sum, _mm256_mul_ps(xc, w3));
            }
            if (bias) sum = _mm256_add_ps(sum, b);
            _mm256_storeu_ps(y + t * y_stride + c, sum);
            s0 = s1, s1 = s2, s2 = xc;
        }
        float a0[8], a1[8], a2[8];
        _mm256_storeu_ps(a0, s0), _mm256_storeu_ps(a1, s1), _mm256_storeu_ps(a2, s2);
        for (int j = 0; j < 8; j++) st[3 * j] = a0[j], st[3 * j + 1] = a1[j], st[3 * j + 2] = a2[j];
    }
    return c;
}
