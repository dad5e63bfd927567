/* matmul_neon.c - the NEON tier (AArch64 with the dot-product extension).
 *
 * Every output is bitwise what the reference (matmul_ref.c) computes: the
 * integer sums are exact whatever the instructions, and the float steps are
 * the reference's, in its order. A 16-lane accumulator of the reference is
 * four 4-lane registers here (lanes 4c .. 4c + 3 in register c), and its
 * final reduce16 is written out with the same pairs: the high eight lanes
 * onto the low eight, the upper four onto the lower four, then lanes
 * (0 + 2) + (1 + 3).
 *
 * SDOT (vdotq_s32) sums the products of four consecutive signed bytes into
 * one 32-bit lane: exactly the reference's "lane l takes the products
 * 4l .. 4l + 3" of a 16-byte piece, so the lanes need no reshuffling. The
 * weights enter it as signed bytes (Q8_0 as they are, Q4_0, Q5_0, IQ4_NL and
 * MXFP4 decoded to their int8 values, the K-quants unsigned 0..63).
 *
 * Types (see matmul_ref.c for each one's arithmetic):
 *  - F32, F16, BF16: 32 float lanes, one fma per element (BF16: per pair,
 *    odd element first);
 *  - Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4: block sums, four accumulators
 *    (block b onto (b % 8) / 2);
 *  - Q4_K, Q5_K, Q6_K: exact integer sums per super-block (SDOT), the
 *    reference's one scalar float step per super-block;
 *  - RW_NUMERICS_GGML order: Q8_0, Q4_0, Q4_K, Q6_K, eight lanes and
 *    ggml's hsum.
 * Every other type and order (Q4_1, Q5_1, Q2_K, Q3_K, IQ4_XS, ggml's Q5_K
 * and MXFP4) is served by the reference tier.
 * Activations are converted as the reference converts them. A tile computes
 * one output at a time, the same code for every element, so results are
 * batch invariant.
 */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels/matmul_int.h"
#include "kernels/quant_int.h"

#define INLINE static inline __attribute__((always_inline))

static float f16(rw_f16 h) { return rw_f16_to_f32(h); }

/* reduce16 of the 16 lanes [a0 | a1 | a2 | a3]: t = (a2, a3) + (a0, a1),
 * u = t_hi + t_lo, then (u0 + u2) + (u1 + u3). */
INLINE float reduce16(float32x4_t a0, float32x4_t a1, float32x4_t a2, float32x4_t a3) {
    const float32x4_t u = vaddq_f32(vaddq_f32(a3, a1), vaddq_f32(a2, a0));
    return (vgetq_lane_f32(u, 0) + vgetq_lane_f32(u, 2)) + (vgetq_lane_f32(u, 1) + vgetq_lane_f32(u, 3));
}

/* ggml's hsum of eight lanes [lo | hi]: t = hi + lo, then (t0 + t2) + (t1 + t3). */
INLINE float hsum8(float32x4_t lo, float32x4_t hi) {
    const float32x4_t t = vaddq_f32(hi, lo);
    return (vgetq_lane_f32(t, 0) + vgetq_lane_f32(t, 2)) + (vgetq_lane_f32(t, 1) + vgetq_lane_f32(t, 3));
}

/* ==== activations ========================================================= */

static size_t x_bytes_f32(int64_t n) { return (size_t)n * sizeof(float); }
static size_t x_bytes_16(int64_t n) { return (size_t)n * 2; }
static size_t x_bytes_q8_0(int64_t n) { return (size_t)(n / RW_QK) * sizeof(rw_block_q8_0); }
static size_t x_bytes_q8_K(int64_t n) { return (size_t)(n / RW_QK_K) * sizeof(rw_block_q8_K); }

static void convert_f32(const float *x, void *xq, int64_t n) { memcpy(xq, x, (size_t)n * sizeof(float)); }
static void convert_f16(const float *x, void *xq, int64_t n) {
    rw_f16 *q = xq;
    for (int64_t i = 0; i < n; i++) q[i] = rw_f32_to_f16(x[i]);
}
static void convert_bf16(const float *x, void *xq, int64_t n) {
    rw_bf16 *q = xq;
    for (int64_t i = 0; i < n; i++) q[i] = rw_f32_to_bf16(x[i]);
}
static void convert_q8_0(const float *x, void *xq, int64_t n) { rw_quantize_act_q8_0(x, xq, n / RW_QK); }
static void convert_q8_K(const float *x, void *xq, int64_t n) { rw_quantize_row(RW_TYPE_Q8_K, x, xq, n); }

/* ==== float types ========================================================= */

/* 32 lanes in eight registers (lanes 4c .. 4c + 3 in a[c]); the reference's
 * reduce32 adds lane l + 16 onto lane l, then reduce16. */
INLINE float reduce32(const float32x4_t a[8]) {
    return reduce16(vaddq_f32(a[0], a[4]), vaddq_f32(a[1], a[5]), vaddq_f32(a[2], a[6]), vaddq_f32(a[3], a[7]));
}

/* The tail past the last whole 32 (64 for BF16), one lane at a time as the
 * reference does it (lanes it does not reach stay as they are). */
INLINE void spill(float32x4_t a[8], float lanes[32]) {
    for (int c = 0; c < 8; c++) vst1q_f32(lanes + 4 * c, a[c]);
}
INLINE void fill(float32x4_t a[8], const float lanes[32]) {
    for (int c = 0; c < 8; c++) a[c] = vld1q_f32(lanes + 4 * c);
}

static float dot_f32(int64_t n, const uint8_t *wp, const uint8_t *xp) {
    const float *w = (const float *)wp, *x = (const float *)xp;
    float32x4_t a[8];
    for (int c = 0; c < 8; c++) a[c] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int c = 0; c < 8; c++) a[c] = vfmaq_f32(a[c], vld1q_f32(w + i + 4 * c), vld1q_f32(x + i + 4 * c));
    if (i < n) {
        float lanes[32];
        spill(a, lanes);
        for (int64_t k = i; k < n; k++) lanes[k - i] = fmaf(w[k], x[k], lanes[k - i]);
        fill(a, lanes);
    }
    return reduce32(a);
}

static float dot_f16(int64_t n, const uint8_t *wp, const uint8_t *xp) {
    const float16_t *w = (const float16_t *)wp, *x = (const float16_t *)xp;
    float32x4_t a[8];
    for (int c = 0; c < 8; c++) a[c] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int c = 0; c < 8; c++)
            a[c] = vfmaq_f32(a[c], vcvt_f32_f16(vld1_f16(w + i + 4 * c)), vcvt_f32_f16(vld1_f16(x + i + 4 * c)));
    if (i < n) {
        const rw_f16 *wh = (const rw_f16 *)wp, *xh = (const rw_f16 *)xp;
        float lanes[32];
        spill(a, lanes);
        for (int64_t k = i; k < n; k++) lanes[k - i] = fmaf(f16(wh[k]), f16(xh[k]), lanes[k - i]);
        fill(a, lanes);
    }
    return reduce32(a);
}

/* 8 bf16 (4 pairs) as their even and odd elements in f32. */
INLINE void bf16_pairs(const rw_bf16 *p, float32x4_t *even, float32x4_t *odd) {
    const uint32x4_t v = vreinterpretq_u32_u16(vld1q_u16((const uint16_t *)p));
    *even = vreinterpretq_f32_u32(vshlq_n_u32(v, 16));
    *odd = vreinterpretq_f32_u32(vandq_u32(v, vdupq_n_u32(0xFFFF0000u)));
}

static float dot_bf16(int64_t n, const uint8_t *wp, const uint8_t *xp) {
    const rw_bf16 *w = (const rw_bf16 *)wp, *x = (const rw_bf16 *)xp;
    float32x4_t a[8];
    for (int c = 0; c < 8; c++) a[c] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int c = 0; c < 8; c++) {
            float32x4_t we, wo, xe, xo;
            bf16_pairs(w + i + 8 * c, &we, &wo);
            bf16_pairs(x + i + 8 * c, &xe, &xo);
            a[c] = vfmaq_f32(vfmaq_f32(a[c], wo, xo), we, xe);
        }
    if (i < n) {
        float lanes[32];
        spill(a, lanes);
        for (int64_t p = i / 2; 2 * p < n; p++) {
            float *l = &lanes[p % 32];
            if (2 * p + 1 < n) *l = fmaf(rw_bf16_to_f32(w[2 * p + 1]), rw_bf16_to_f32(x[2 * p + 1]), *l);
            *l = fmaf(rw_bf16_to_f32(w[2 * p]), rw_bf16_to_f32(x[2 * p]), *l);
        }
        fill(a, lanes);
    }
    return reduce32(a);
}

/* ==== 32-element blocks =================================================== */

/* The products 4l .. 4l + 3 of 32 weight bytes (lo: elements 0-15, hi:
 * 16-31) and an activation block, lanes l = 0-3 and 4-7. */
INLINE void block_lanes(int8x16_t lo, int8x16_t hi, const int8_t *x, int32x4_t *s_lo, int32x4_t *s_hi) {
    *s_lo = vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(x));
    *s_hi = vdotq_s32(vdupq_n_s32(0), hi, vld1q_s8(x + 16));
}

/* Q4_0's 32 values minus 8: low nibbles are elements 0-15, high ones 16-31. */
INLINE void q4_0_values(const rw_block_q4_0 *b, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t q = vld1q_u8(b->qs);
    *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
    *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
}

/* The types summed in Q8_0's order (matmul_ref.c): Q8_0, and Q4_0, Q5_0,
 * IQ4_NL, MXFP4 with each block decoded exactly to 32 int8 values and an
 * f32 scale. T is a constant where these are inlined. */
enum { WT_Q8_0, WT_Q4_0, WT_Q5_0, WT_IQ4_NL, WT_MXFP4 };

INLINE size_t wt_bytes(const int T) {
    return T == WT_Q8_0     ? sizeof(rw_block_q8_0)
           : T == WT_Q4_0   ? sizeof(rw_block_q4_0)
           : T == WT_Q5_0   ? sizeof(rw_block_q5_0)
           : T == WT_IQ4_NL ? sizeof(rw_block_iq4_nl)
                            : sizeof(rw_block_mxfp4);
}

/* Block b of a row of type T as its 32 int8 values (lo: elements 0-15). */
INLINE void wt_values(const uint8_t *row, int64_t b, const int T, int8x16_t *lo, int8x16_t *hi) {
    static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    static const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const uint8_t *p = row + (size_t)b * wt_bytes(T);
    if (T == WT_Q8_0) {
        const rw_block_q8_0 *q = (const rw_block_q8_0 *)p;
        *lo = vld1q_s8(q->qs), *hi = vld1q_s8(q->qs + 16);
        return;
    }
    if (T == WT_Q4_0) {
        q4_0_values((const rw_block_q4_0 *)p, lo, hi);
        return;
    }
    const uint8_t *qs = T == WT_Q5_0     ? ((const rw_block_q5_0 *)p)->qs
                        : T == WT_IQ4_NL ? ((const rw_block_iq4_nl *)p)->qs
                                         : ((const rw_block_mxfp4 *)p)->qs;
    const uint8x16_t q = vld1q_u8(qs), nlo = vandq_u8(q, vdupq_n_u8(0x0F)), nhi = vshrq_n_u8(q, 4);
    if (T == WT_Q5_0) { /* the nibble plus 16 where the fifth bit is set, minus 16 */
        uint32_t hb;
        memcpy(&hb, ((const rw_block_q5_0 *)p)->qh, 4);
        static const uint8_t ilo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
        static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
        const uint8x16_t bytes = vreinterpretq_u8_u32(vdupq_n_u32(hb)), sel = vld1q_u8(bit);
        const uint8x16_t i0 = vld1q_u8(ilo), i1 = vaddq_u8(i0, vdupq_n_u8(2));
        const uint8x16_t h0 = vandq_u8(vtstq_u8(vqtbl1q_u8(bytes, i0), sel), vdupq_n_u8(16));
        const uint8x16_t h1 = vandq_u8(vtstq_u8(vqtbl1q_u8(bytes, i1), sel), vdupq_n_u8(16));
        *lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(nlo, h0)), vdupq_n_s8(16));
        *hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(nhi, h1)), vdupq_n_s8(16));
        return;
    }
    const int8x16_t tab = vld1q_s8(T == WT_IQ4_NL ? iq4nl_values : mxfp4_values);
    *lo = vqtbl1q_s8(tab, nlo), *hi = vqtbl1q_s8(tab, nhi);
}

/* The f32 scale of block b (the f16 scales are each block's first field). */
INLINE float wt_d(const uint8_t *row, int64_t b, const int T) {
    const uint8_t *p = row + (size_t)b * wt_bytes(T);
    if (T == WT_MXFP4) return rw_e8m0_half(*p);
    rw_f16 h;
    memcpy(&h, p, 2);
    return f16(h);
}

/* Q8_0's order: block b's exact sum onto acc[(b % 8) / 2]. Eight blocks at
 * a time: blocks 0, 2, 4, 6 are one fma on the four accumulators, then 1,
 * 3, 5, 7 (each accumulator sees its blocks in the reference's order). */
INLINE float dot_wt(int64_t n, const uint8_t *wp, const uint8_t *xp, const int T) {
    const rw_block_q8_0 *x = (const rw_block_q8_0 *)xp;
    const int64_t nb = n / RW_QK;
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8)
        for (int odd = 0; odd < 2; odd++) {
            int32x4_t s[4];
            float d[4];
            for (int k = 0; k < 4; k++) {
                const int64_t bb = b + 2 * k + odd;
                int8x16_t wl, wh;
                int32x4_t lo, hi;
                wt_values(wp, bb, T, &wl, &wh);
                block_lanes(wl, wh, x[bb].qs, &lo, &hi);
                s[k] = vaddq_s32(lo, hi);
                d[k] = wt_d(wp, bb, T) * f16(x[bb].d);
            }
            const int32x4_t isum = vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
            acc = vfmaq_f32(acc, vcvtq_f32_s32(isum), vld1q_f32(d));
        }
    float a[4];
    vst1q_f32(a, acc);
    for (; b < nb; b++) {
        int8x16_t wl, wh;
        int32x4_t lo, hi;
        wt_values(wp, b, T, &wl, &wh);
        block_lanes(wl, wh, x[b].qs, &lo, &hi);
        const int32_t isum = vaddvq_s32(vaddq_s32(lo, hi));
        a[(b % 8) / 2] = fmaf((float)isum, wt_d(wp, b, T) * f16(x[b].d), a[(b % 8) / 2]);
    }
    return (a[0] + a[1]) + (a[2] + a[3]);
}

static float dot_q8_0(int64_t n, const uint8_t *wp, const uint8_t *xp) { return dot_wt(n, wp, xp, WT_Q8_0); }
static float dot_q4_0(int64_t n, const uint8_t *wp, const uint8_t *xp) { return dot_wt(n, wp, xp, WT_Q4_0); }
static float dot_q5_0(int64_t n, const uint8_t *wp, const uint8_t *xp) { return dot_wt(n, wp, xp, WT_Q5_0); }
static float dot_iq4_nl(int64_t n, const uint8_t *wp, const uint8_t *xp) { return dot_wt(n, wp, xp, WT_IQ4_NL); }
static float dot_mxfp4(int64_t n, const uint8_t *wp, const uint8_t *xp) { return dot_wt(n, wp, xp, WT_MXFP4); }

/* The ggml order of a 32-block type: eight lanes, acc_l = fma(d, lsum_l,
 * acc_l) block after block, hsum8. */
static float dot_q8_0_ggml(int64_t n, const uint8_t *wp, const uint8_t *xp) {
    const rw_block_q8_0 *w = (const rw_block_q8_0 *)wp, *x = (const rw_block_q8_0 *)xp;
    float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < n / RW_QK; b++) {
        int32x4_t s_lo, s_hi;
        block_lanes(vld1q_s8(w[b].qs), vld1q_s8(w[b].qs + 16), x[b].qs, &s_lo, &s_hi);
        const float d = f16(w[b].d) * f16(x[b].d);
        lo = vfmaq_n_f32(lo, vcvtq_f32_s32(s_lo), d);
        hi = vfmaq_n_f32(hi, vcvtq_f32_s32(s_hi), d);
    }
    return hsum8(lo, hi);
}

static float dot_q4_0_ggml(int64_t n, const uint8_t *wp, const uint8_t *xp) {
    const rw_block_q4_0 *w = (const rw_block_q4_0 *)wp;
    const rw_block_q8_0 *x = (const rw_block_q8_0 *)xp;
    float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < n / RW_QK; b++) {
        int8x16_t ql, qh;
        int32x4_t s_lo, s_hi;
        q4_0_values(&w[b], &ql, &qh);
        block_lanes(ql, qh, x[b].qs, &s_lo, &s_hi);
        const float d = f16(w[b].d) * f16(x[b].d);
        lo = vfmaq_n_f32(lo, vcvtq_f32_s32(s_lo), d);
        hi = vfmaq_n_f32(hi, vcvtq_f32_s32(s_hi), d);
    }
    return hsum8(lo, hi);
}

/* ==== K-quants in ggml's order ============================================ */

/* Scale and min of sub-block j of Q4_K (6 bits each in 12 bytes). */
static void k4_scale_min(const uint8_t s[12], int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Q4_K: lane l = sum over sub-blocks j of scale_j * (products 32j + 4l ..
 * 32j + 4l + 3), exact; the mins in four lanes from Q8_K's bsums; then
 * acc_l = fma(dx*d, lane_l, acc_l), accm_k = fma(-dx*dmin, mlane_k, accm_k);
 * hsum8(acc) + ((accm0 + accm2) + (accm1 + accm3)). */
static float dot_q4_K_ggml(int64_t n, const uint8_t *wp, const uint8_t *xp) {
    const rw_block_q4_K *w = (const rw_block_q4_K *)wp;
    const rw_block_q8_K *x = (const rw_block_q8_K *)xp;
    float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f), accm = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++) k4_scale_min(w[b].scales, j, &sc[j], &mn[j]);
        int32x4_t l_lo = vdupq_n_s32(0), l_hi = vdupq_n_s32(0);
        for (int c = 0; c < 4; c++) { /* sub-blocks 2c (low nibbles) and 2c + 1 (high) of qs[32c .. 32c + 32) */
            const uint8x16_t q0 = vld1q_u8(w[b].qs + 32 * c), q1 = vld1q_u8(w[b].qs + 32 * c + 16);
            const int8_t *xq = x[b].qs + 64 * c;
            int32x4_t s_lo, s_hi;
            block_lanes(vreinterpretq_s8_u8(vandq_u8(q0, vdupq_n_u8(0x0F))),
                        vreinterpretq_s8_u8(vandq_u8(q1, vdupq_n_u8(0x0F))), xq, &s_lo, &s_hi);
            l_lo = vmlaq_n_s32(l_lo, s_lo, sc[2 * c]);
            l_hi = vmlaq_n_s32(l_hi, s_hi, sc[2 * c]);
            block_lanes(vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), xq + 32, &s_lo,
                        &s_hi);
            l_lo = vmlaq_n_s32(l_lo, s_lo, sc[2 * c + 1]);
            l_hi = vmlaq_n_s32(l_hi, s_hi, sc[2 * c + 1]);
        }
        const int16_t *bs = x[b].bsums;
        int32_t mlane[4];
        for (int k = 0; k < 4; k++)
            mlane[k] = mn[2 * k] * (bs[4 * k] + bs[4 * k + 1]) + mn[2 * k + 1] * (bs[4 * k + 2] + bs[4 * k + 3]);
        const float d = x[b].d * f16(w[b].d), dmin = -x[b].d * f16(w[b].dmin);
        accm = vfmaq_n_f32(accm, vcvtq_f32_s32(vld1q_s32(mlane)), dmin);
        lo = vfmaq_n_f32(lo, vcvtq_f32_s32(l_lo), d);
        hi = vfmaq_n_f32(hi, vcvtq_f32_s32(l_hi), d);
    }
    const float m =
        (vgetq_lane_f32(accm, 0) + vgetq_lane_f32(accm, 2)) + (vgetq_lane_f32(accm, 1) + vgetq_lane_f32(accm, 3));
    return hsum8(lo, hi) + m;
}

/* Q6_K's unsigned quants (0..63) of elements 16 half .. 16 half + 15 of the
 * four 32-chunks of a 128-element half of a super-block (ql, qh: that half's
 * bytes): v[k] is chunk k's. */
INLINE void q6_quants(const uint8_t *ql, const uint8_t *qh, int half, uint8x16_t v[4]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(3);
    const uint8x16_t a = vld1q_u8(ql + 16 * half), a2 = vld1q_u8(ql + 32 + 16 * half), hb = vld1q_u8(qh + 16 * half);
    v[0] = vorrq_u8(vandq_u8(a, m4), vshlq_n_u8(vandq_u8(hb, m3), 4));
    v[1] = vorrq_u8(vandq_u8(a2, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4));
    v[2] = vorrq_u8(vshrq_n_u8(a, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4));
    v[3] = vorrq_u8(vshrq_n_u8(a2, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4));
}

/* Q6_K: quants unsigned (0..63), lane l = sum over 16-groups of scale *
 * (products of elements 32c + 4l .. + 3), minus 32 * (scale . x) of
 * 32-chunk c on lane c; acc_l = fma(dx*d, lane_l, acc_l); hsum8. */
static float dot_q6_K_ggml(int64_t n, const uint8_t *wp, const uint8_t *xp) {
    const rw_block_q6_K *w = (const rw_block_q6_K *)wp;
    const rw_block_q8_K *x = (const rw_block_q8_K *)xp;
    float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        const int8_t *sc = w[b].scales;
        int32x4_t l_lo = vdupq_n_s32(0), l_hi = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[b].ql + 64 * h, *qh = w[b].qh + 32 * h;
            for (int half = 0; half < 2; half++) { /* elements l = 16 half .. 16 half + 15 of each 32-chunk */
                uint8x16_t v[4];
                q6_quants(ql, qh, half, v);
                for (int k = 0; k < 4; k++) { /* chunk 4h + k, its 16-group 8h + 2k + half */
                    const int g = 8 * h + 2 * k + half;
                    const int32x4_t s =
                        vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(v[k]), vld1q_s8(x[b].qs + 16 * g));
                    if (half == 0) l_lo = vmlaq_n_s32(l_lo, s, sc[g]);
                    else l_hi = vmlaq_n_s32(l_hi, s, sc[g]);
                }
            }
        }
        int32_t off[8];
        for (int c = 0; c < 8; c++)
            off[c] = 32 * (sc[2 * c] * x[b].bsums[2 * c] + sc[2 * c + 1] * x[b].bsums[2 * c + 1]);
        l_lo = vsubq_s32(l_lo, vld1q_s32(off));
        l_hi = vsubq_s32(l_hi, vld1q_s32(off + 4));
        const float d = x[b].d * f16(w[b].d);
        lo = vfmaq_n_f32(lo, vcvtq_f32_s32(l_lo), d);
        hi = vfmaq_n_f32(hi, vcvtq_f32_s32(l_hi), d);
    }
    return hsum8(lo, hi);
}

/* ==== K-quants in our order ================================================ */

/* The reference's arithmetic (matmul_ref.c): per super-block the exact
 * integer sums isum (and, for Q4_K / Q5_K, msum), then one scalar float
 * step, sum += (d*dx) * isum - (dmin*dx) * msum. The integer sums may be
 * formed in any order (they are exact), so SDOT's lanes are simply added. */

/* Scale and min of the eight sub-blocks of a Q4_K / Q5_K super-block. */
INLINE void k4_scales_mins(const uint8_t s[12], int sc[8], int mn[8]) {
    for (int j = 0; j < 8; j++) k4_scale_min(s, j, &sc[j], &mn[j]);
}

/* msum: the mins times the activation sums of their sub-blocks (two 16-sums each). */
INLINE int32_t k4_msum(const int mn[8], const int16_t bs[16]) {
    int32_t m = 0;
    for (int j = 0; j < 8; j++) m += mn[j] * (bs[2 * j] + bs[2 * j + 1]);
    return m;
}

/* Q4_K / Q5_K's isum: sub-block j = 2c + hi is the low (hi = 0) or high
 * nibbles of qs[32c .. 32c + 32); with qh (Q5_K), bit j of qh[l] is the
 * fifth bit of its element l. */
INLINE int32_t k45_isum(const uint8_t *qs, const uint8_t *qh, const int8_t *x, const int sc[8]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), b4 = vdupq_n_u8(0x10);
    uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
    if (qh) h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
    int32x4_t acc = vdupq_n_s32(0);
    for (int c = 0; c < 4; c++) {
        const uint8x16_t q0 = vld1q_u8(qs + 32 * c), q1 = vld1q_u8(qs + 32 * c + 16);
        for (int hi = 0; hi < 2; hi++) {
            const int j = 2 * c + hi;
            uint8x16_t v0 = hi ? vshrq_n_u8(q0, 4) : vandq_u8(q0, m4);
            uint8x16_t v1 = hi ? vshrq_n_u8(q1, 4) : vandq_u8(q1, m4);
            if (qh) {
                const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << j));
                v0 = vorrq_u8(v0, vandq_u8(vtstq_u8(h0, bit), b4));
                v1 = vorrq_u8(v1, vandq_u8(vtstq_u8(h1, bit), b4));
            }
            int32x4_t s = vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(v0), vld1q_s8(x + 32 * j));
            s = vdotq_s32(s, vreinterpretq_s8_u8(v1), vld1q_s8(x + 32 * j + 16));
            acc = vmlaq_n_s32(acc, s, sc[j]);
        }
    }
    return vaddvq_s32(acc);
}

/* One Q4_K / Q5_K super-block's term (qh NULL for Q4_K): the reference's float step. */
INLINE float k45_term(rw_f16 d, rw_f16 dmin, const uint8_t scales[12], const uint8_t *qs, const uint8_t *qh,
                      const rw_block_q8_K *x) {
    int sc[8], mn[8];
    k4_scales_mins(scales, sc, mn);
    const int32_t isum = k45_isum(qs, qh, x->qs, sc), msum = k4_msum(mn, x->bsums);
    const float dx = x->d;
    return (f16(d) * dx) * (float)isum - (f16(dmin) * dx) * (float)msum;
}

static float dot_q4_K(int64_t n, const uint8_t *wp, const uint8_t *xp) {
    const rw_block_q4_K *w = (const rw_block_q4_K *)wp;
    const rw_block_q8_K *x = (const rw_block_q8_K *)xp;
    float sum = 0;
    for (int64_t b = 0; b < n / RW_QK_K; b++) sum += k45_term(w[b].d, w[b].dmin, w[b].scales, w[b].qs, NULL, &x[b]);
    return sum;
}

static float dot_q5_K(int64_t n, const uint8_t *wp, const uint8_t *xp) {
    const rw_block_q5_K *w = (const rw_block_q5_K *)wp;
    const rw_block_q8_K *x = (const rw_block_q8_K *)xp;
    float sum = 0;
    for (int64_t b = 0; b < n / RW_QK_K; b++) sum += k45_term(w[b].d, w[b].dmin, w[b].scales, w[b].qs, w[b].qh, &x[b]);
    return sum;
}

/* Q6_K: isum = sum over 16-groups g of scale_g * (products of the unsigned
 * quants - 32 * the group's activation sum, Q8_K's bsums[g]). */
static float dot_q6_K(int64_t n, const uint8_t *wp, const uint8_t *xp) {
    const rw_block_q6_K *w = (const rw_block_q6_K *)wp;
    const rw_block_q8_K *x = (const rw_block_q8_K *)xp;
    float sum = 0;
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        const int8_t *sc = w[b].scales;
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[b].ql + 64 * h, *qh = w[b].qh + 32 * h;
            for (int half = 0; half < 2; half++) { /* elements l = 16 half .. 16 half + 15 of each 32-chunk */
                uint8x16_t v[4];
                q6_quants(ql, qh, half, v);
                for (int k = 0; k < 4; k++) { /* chunk 4h + k, its 16-group 8h + 2k + half */
                    const int g = 8 * h + 2 * k + half;
                    const int32x4_t s =
                        vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(v[k]), vld1q_s8(x[b].qs + 16 * g));
                    acc = vmlaq_n_s32(acc, s, sc[g]);
                }
            }
        }
        int32_t off = 0;
        for (int g = 0; g < 16; g++) off += sc[g] * x[b].bsums[g];
        const int32_t isum = vaddvq_s32(acc) - 32 * off;
        sum += (f16(w[b].d) * x[b].d) * (float)isum;
    }
    return sum;
}

/* ==== tiles and the tables ================================================ */

#define NEON_KERNEL(name, xb, conv)                                                                                \
    static void tile_##name(int64_t n_in, const uint8_t *w, size_t w_stride, int nw, const uint8_t *xq,            \
                            size_t xq_stride, int nx, float *out) {                                                \
        for (int j = 0; j < nx; j++)                                                                               \
            for (int i = 0; i < nw; i++) out[j * nw + i] = dot_##name(n_in, w + i * w_stride, xq + j * xq_stride); \
    }                                                                                                              \
    static const rw_mm_kernel kernel_##name = {                                                                    \
        .x_bytes = xb, .convert_x = conv, .tile = tile_##name, .max_nw = 1, .max_nx = 1};

NEON_KERNEL(f32, x_bytes_f32, convert_f32)
NEON_KERNEL(f16, x_bytes_16, convert_f16)
NEON_KERNEL(bf16, x_bytes_16, convert_bf16)
NEON_KERNEL(q8_0, x_bytes_q8_0, convert_q8_0)
NEON_KERNEL(q4_0, x_bytes_q8_0, convert_q8_0)
NEON_KERNEL(q5_0, x_bytes_q8_0, convert_q8_0)
NEON_KERNEL(iq4_nl, x_bytes_q8_0, convert_q8_0)
NEON_KERNEL(mxfp4, x_bytes_q8_0, convert_q8_0)
NEON_KERNEL(q4_K, x_bytes_q8_K, convert_q8_K)
NEON_KERNEL(q5_K, x_bytes_q8_K, convert_q8_K)
NEON_KERNEL(q6_K, x_bytes_q8_K, convert_q8_K)
NEON_KERNEL(q8_0_ggml, x_bytes_q8_0, convert_q8_0)
NEON_KERNEL(q4_0_ggml, x_bytes_q8_0, convert_q8_0)
NEON_KERNEL(q4_K_ggml, x_bytes_q8_K, convert_q8_K)
NEON_KERNEL(q6_K_ggml, x_bytes_q8_K, convert_q8_K)

const rw_mm_kernel *rw_mm_kernel_neon(rw_dtype t) {
    switch (t) {
    case RW_TYPE_F32: return &kernel_f32;
    case RW_TYPE_F16: return &kernel_f16;
    case RW_TYPE_BF16: return &kernel_bf16;
    case RW_TYPE_Q8_0: return &kernel_q8_0;
    case RW_TYPE_Q4_0: return &kernel_q4_0;
    case RW_TYPE_Q5_0: return &kernel_q5_0;
    case RW_TYPE_IQ4_NL: return &kernel_iq4_nl;
    case RW_TYPE_MXFP4: return &kernel_mxfp4;
    case RW_TYPE_Q4_K: return &kernel_q4_K;
    case RW_TYPE_Q5_K: return &kernel_q5_K;
    case RW_TYPE_Q6_K: return &kernel_q6_K;
    default: return NULL;
    }
}

const rw_mm_kernel *rw_mm_kernel_neon_ggml(rw_dtype t) {
    switch (t) {
    case RW_TYPE_Q8_0: return &kernel_q8_0_ggml;
    case RW_TYPE_Q4_0: return &kernel_q4_0_ggml;
    case RW_TYPE_Q4_K: return &kernel_q4_K_ggml;
    case RW_TYPE_Q6_K: return &kernel_q6_K_ggml;
    default: return NULL;
    }
}

/* rw_stream_read on AArch64: 256 bytes a step in 16-byte loads. */
uint64_t rw_stream_read_neon(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64x2_t a[8];
    for (int k = 0; k < 8; k++) a[k] = vdupq_n_u64(0);
    for (size_t i = 0; i + 256 <= n; i += 256)
        for (int k = 0; k < 8; k++) {
            a[k] = veorq_u64(a[k], vld1q_u64((const uint64_t *)(b + i + 32 * k)));
            a[k] = veorq_u64(a[k], vld1q_u64((const uint64_t *)(b + i + 32 * k + 16)));
        }
    for (int k = 1; k < 8; k++) a[0] = veorq_u64(a[0], a[k]);
    return vgetq_lane_u64(a[0], 0) ^ vgetq_lane_u64(a[0], 1);
}
