/* matmul_ref.c - the plain C matmul: the specification of every tier.
 *
 * One function per weight type computes dot(W row, activation row), where
 * the activation row was converted to the type's vec-dot type by the
 * activation quantizer (rw_quantize_act_q8_0/q8_1: ggml's x86 rounding;
 * Q8_K: rw_quantize_row, ggml's reference). Inside a block the sums are
 * exact integers; the float steps are those of the AVX-512 tier, which
 * every tier computes bit for bit (tests/kernels/test_matmul.c checks it):
 * float lanes, each one a sum of its own, added at the end by reduce16
 * (the tree of _mm512_reduce_add_ps: lanes l + 8 onto l, then l + 4 onto
 * l, then (0 + 2) + (1 + 3)). Per type:
 *
 *   F32 F16    32 lanes: element i goes to lane i % 32, lane = fma(w, x,
 *              lane); y = reduce16(lane[l] + lane[l + 16])
 *   BF16       32 lanes of element pairs: pair p = i / 2 to lane p % 32,
 *              lane = fma(w_odd, x_odd, lane), then the even element
 *              (vdpbf16ps; its flushing of subnormals is not modelled)
 *   Q4_1 Q5_1  16 lanes: lane 8 * (b % 2) + l takes the exact sum of
 *              products 4l .. 4l + 3 of block b, lane = fma(lsum, dw*dx,
 *              lane), then lane 8 * (b % 2) = fma(mw, sx, .); y = reduce16
 *   Q8_0       acc[k] = fma(isum_b, dw*dx, acc[k]), k = (b % 8) / 2, isum_b
 *              the exact sum of block b; y = (acc0 + acc1) + (acc2 + acc3)
 *   Q4_0 Q5_0 IQ4_NL MXFP4  Q8_0's order, each block decoded exactly to
 *              32 int8 values (Q4_0: nibble - 8; Q5_0: 5-bit value - 16;
 *              IQ4_NL: its table; MXFP4: its E2M1 table doubled) and an f32
 *              scale dw (f16; MXFP4: 2^(e - 128), E8M0 halved)
 *   Q2_K Q3_K IQ4_XS  16 integer lanes per super-block (the AVX-512
 *              tier's layout, see kq16_lane), lane = fma(lane_sum, d*dx,
 *              lane), then lanes 0-7 lane = fma(-msum_l, dmin*dx, lane);
 *              y = reduce16
 *   Q4_K Q5_K  sum = sum + ((d*dx) * isum - (dmin*dx) * msum)
 *   Q6_K       sum = sum + (d*dx) * isum
 *     where isum = sum over sub-blocks of scale * (integer dot of the
 *     sub-block) and msum = sum over sub-blocks of min * (sum of the
 *     activation quants of the sub-block, from Q8_K's bsums).
 *   RW_NUMERICS_GGML (Q4_0 Q5_0 Q8_0 Q4_1 Q5_1 Q4_K Q5_K Q6_K MXFP4, bottom of the file):
 *              ggml's x86 order, 8 lanes, lane l the exact sum of products
 *              4l..4l+3 of each 32 elements, acc_l = fma(dw*dx, lsum_l,
 *              acc_l) block after block, y = ((acc4+acc0) + (acc6+acc2)) +
 *              ((acc5+acc1) + (acc7+acc3)); K-quants with their min/offset
 *              terms as written there; MXFP4 the 16 lanes of Q4_1 without
 *              the min term (ggml's for an even number of blocks)
 * All float expressions are evaluated exactly as written (ISO C mode: no
 * FMA contraction; fmaf where the tiers fuse).
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul_int.h"
#include "kernels/quant.h"
#include "kernels/quant_int.h"

static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

/* MXFP4's table: the E2M1 values doubled (its scale is halved to match) */
static const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float f16(rw_f16 h) { return rw_f16_to_f32(h); }

/* ---- activation conversions ------------------------------------------ */

static size_t x_bytes_f32(int64_t n) { return (size_t)n * sizeof(float); }
static size_t x_bytes_16(int64_t n) { return (size_t)n * 2; }
static size_t x_bytes_q8_0(int64_t n) { return (size_t)(n / RW_QK) * sizeof(rw_block_q8_0); }
static size_t x_bytes_q8_1(int64_t n) { return (size_t)(n / RW_QK) * sizeof(rw_block_q8_1); }
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
/* n is a multiple of the block size (checked by matmul.c): these cannot fail. */
static void convert_q8_0(const float *x, void *xq, int64_t n) { rw_quantize_act_q8_0(x, xq, n / RW_QK); }
static void convert_q8_1(const float *x, void *xq, int64_t n) { rw_quantize_act_q8_1(x, xq, n / RW_QK); }
static void convert_q8_K(const float *x, void *xq, int64_t n) { rw_quantize_row(RW_TYPE_Q8_K, x, xq, n); }

/* ---- float types ----------------------------------------------------- */

/* _mm512_reduce_add_ps's tree over 16 lanes. */
static float reduce16(const float a[16]) {
    float t[8], u[4];
    for (int i = 0; i < 8; i++) t[i] = a[i + 8] + a[i];
    for (int i = 0; i < 4; i++) u[i] = t[i + 4] + t[i];
    return (u[0] + u[2]) + (u[1] + u[3]);
}

/* 32 lanes (two 16-lane accumulators) added pairwise, then reduce16. */
static float reduce32(const float acc[32]) {
    float a[16];
    for (int l = 0; l < 16; l++) a[l] = acc[l] + acc[l + 16];
    return reduce16(a);
}

static float dot_f32(int64_t n, const void *wp, const void *xp) {
    const float *w = wp, *x = xp;
    float acc[32] = {0};
    for (int64_t i = 0; i < n; i++) acc[i % 32] = fmaf(w[i], x[i], acc[i % 32]);
    return reduce32(acc);
}

static float dot_f16(int64_t n, const void *wp, const void *xp) {
    const rw_f16 *w = wp, *x = xp;
    float acc[32] = {0};
    for (int64_t i = 0; i < n; i++) acc[i % 32] = fmaf(rw_f16_to_f32(w[i]), rw_f16_to_f32(x[i]), acc[i % 32]);
    return reduce32(acc);
}

static float dot_bf16(int64_t n, const void *wp, const void *xp) {
    const rw_bf16 *w = wp, *x = xp;
    float acc[32] = {0};
    for (int64_t p = 0; 2 * p < n; p++) {
        float *a = &acc[p % 32];
        if (2 * p + 1 < n) *a = fmaf(rw_bf16_to_f32(w[2 * p + 1]), rw_bf16_to_f32(x[2 * p + 1]), *a);
        *a = fmaf(rw_bf16_to_f32(w[2 * p]), rw_bf16_to_f32(x[2 * p]), *a);
    }
    return reduce32(acc);
}

/* ---- 32-element blocks ----------------------------------------------- */

/* The 5th bit of element j of a Q5 block (qh is a little-endian bit field). */
static int q5_high(const uint8_t qh[4], int j) { return (qh[j / 8] >> (j % 8)) & 1; }

/* Element j of a block: low nibbles are elements 0-15, high ones 16-31. */
static int q4_0_value(const rw_block_q4_0 *b, int j) {
    return (j < RW_QK / 2 ? b->qs[j] & 0x0F : b->qs[j - RW_QK / 2] >> 4) - 8;
}
static int q5_0_value(const rw_block_q5_0 *b, int j) {
    const int nib = j < RW_QK / 2 ? b->qs[j] & 0x0F : b->qs[j - RW_QK / 2] >> 4;
    return (nib | q5_high(b->qh, j) << 4) - 16;
}
static int q8_0_value(const rw_block_q8_0 *b, int j) { return b->qs[j]; }
static int q4_1_value(const rw_block_q4_1 *b, int j) { return j < RW_QK / 2 ? b->qs[j] & 0x0F : b->qs[j - RW_QK / 2] >> 4; }
static int q5_1_value(const rw_block_q5_1 *b, int j) {
    const int nib = j < RW_QK / 2 ? b->qs[j] & 0x0F : b->qs[j - RW_QK / 2] >> 4;
    return nib | q5_high(b->qh, j) << 4;
}

static int iq4_nl_value(const rw_block_iq4_nl *b, int j) {
    return iq4nl_values[j < RW_QK / 2 ? b->qs[j] & 0x0F : b->qs[j - RW_QK / 2] >> 4];
}

static int mxfp4_value(const rw_block_mxfp4 *b, int j) {
    return mxfp4_values[j < RW_QK / 2 ? b->qs[j] & 0x0F : b->qs[j - RW_QK / 2] >> 4];
}

/* Q4_1 / Q5_1 against Q8_1 activations: 16 lanes, block b in lanes
 * 8 * (b % 2) + l, each the exact sum of products 4l .. 4l + 3, one fma
 * per lane and block, then the block's min term onto lane 8 * (b % 2). */
#define DOT32_MIN_LANES(W_T, VALUE)                                                       \
    const W_T *w = wp;                                                                    \
    const rw_block_q8_1 *x = xp;                                                          \
    float acc[16] = {0};                                                                  \
    for (int64_t b = 0; b < n / RW_QK; b++) {                                             \
        float *lanes = acc + 8 * (b % 2);                                                 \
        const float d = f16(w[b].d) * f16(x[b].d);                                        \
        for (int l = 0; l < 8; l++) {                                                     \
            int32_t lsum = 0;                                                             \
            for (int j = 4 * l; j < 4 * l + 4; j++) lsum += VALUE(&w[b], j) * x[b].qs[j]; \
            lanes[l] = fmaf((float)lsum, d, lanes[l]);                                    \
        }                                                                                 \
        lanes[0] = fmaf(f16(w[b].m), f16(x[b].s), lanes[0]);                              \
    }                                                                                     \
    return reduce16(acc);

static float dot_q4_1(int64_t n, const void *wp, const void *xp) { DOT32_MIN_LANES(rw_block_q4_1, q4_1_value) }
static float dot_q5_1(int64_t n, const void *wp, const void *xp) { DOT32_MIN_LANES(rw_block_q5_1, q5_1_value) }

/* A 32-block type without a min term in Q8_0's order: CH blocks at a
 * time decoded exactly to int8 values and their f32 scales WD (an
 * expression of b0 + b), then dot_q8_0's arithmetic on them, its four
 * accumulators carried over. */
#define DOT32_AS_Q8_0(W_T, VALUE, WD)                                                         \
    const W_T *w = wp;                                                                        \
    const rw_block_q8_0 *x = xp;                                                              \
    enum { CH = 64 }; /* blocks decoded at a time: a multiple of 8 keeps acc[(b % 8) / 2] */  \
    int8_t q[CH][RW_QK];                                                                      \
    float dw[CH], acc[4] = {0};                                                               \
    for (int64_t b0 = 0; b0 < n / RW_QK; b0 += CH) {                                          \
        const int64_t nb = n / RW_QK - b0 < CH ? n / RW_QK - b0 : CH;                         \
        for (int64_t b = 0; b < nb; b++) {                                                    \
            for (int j = 0; j < RW_QK; j++) q[b][j] = (int8_t)VALUE(&w[b0 + b], j);           \
            dw[b] = (WD);                                                                     \
        }                                                                                     \
        for (int64_t b = 0; b < nb; b++) {                                                    \
            int32_t isum = 0;                                                                 \
            for (int j = 0; j < RW_QK; j++) isum += q[b][j] * x[b0 + b].qs[j];                \
            acc[(b % 8) / 2] = fmaf((float)isum, dw[b] * f16(x[b0 + b].d), acc[(b % 8) / 2]); \
        }                                                                                     \
    }                                                                                         \
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);

static float dot_q4_0(int64_t n, const void *wp, const void *xp) {
    DOT32_AS_Q8_0(rw_block_q4_0, q4_0_value, f16(w[b0 + b].d))
}
static float dot_q5_0(int64_t n, const void *wp, const void *xp) {
    DOT32_AS_Q8_0(rw_block_q5_0, q5_0_value, f16(w[b0 + b].d))
}
static float dot_iq4_nl(int64_t n, const void *wp, const void *xp) {
    DOT32_AS_Q8_0(rw_block_iq4_nl, iq4_nl_value, f16(w[b0 + b].d))
}

/* MXFP4: its doubled E2M1 values and the scale d = 2^(e - 128) (E8M0
 * halved), exact in f32. The ggml numerics keep ggml's x86 MXFP4 order
 * instead (dot_mxfp4_ggml). */
static float dot_mxfp4(int64_t n, const void *wp, const void *xp) {
    DOT32_AS_Q8_0(rw_block_mxfp4, mxfp4_value, rw_e8m0_half(w[b0 + b].e))
}

/* Q8_0: its blocks are the int8 values already. */
static float dot_q8_0(int64_t n, const void *wp, const void *xp) {
    const rw_block_q8_0 *w = wp;
    const rw_block_q8_0 *x = xp;
    float acc[4] = {0};
    for (int64_t b = 0; b < n / RW_QK; b++) {
        int32_t isum = 0;
        for (int j = 0; j < RW_QK; j++) isum += w[b].qs[j] * x[b].qs[j];
        acc[(b % 8) / 2] = fmaf((float)isum, f16(w[b].d) * f16(x[b].d), acc[(b % 8) / 2]);
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* ---- K-quants (256-element super-blocks, Q8_K activations) ------------ */

/* Sum of the activation quants of sub-block [16*g, 16*g + 16). */
static int32_t bsum16(const rw_block_q8_K *x, int g) { return x->bsums[g]; }

/* The 16 float lanes of Q2_K, Q3_K and IQ4_XS (the AVX-512 tier's
 * layout). s4[G] is the exact sum of products 4G .. 4G + 3 of a
 * super-block times their scale; lane p of 64-element chunk k (G = 16k + p)
 * goes to lane p for IQ4_XS (one vpmulld per chunk, lanes added), and for
 * Q2_K / Q3_K (sums packed to 16 bits and vpmaddwd'ed with the scales, two
 * chunks at a time) to lane 4 (p / 4) + 2 (k % 2) + (p % 4) / 2. Then
 * lane = fma(sum, d*dx, lane) and, for lanes 0-7, lane = fma(-msum, dm,
 * lane) with msum[l] = min . bsums of 16-groups 2l and 2l + 1. */
static void kq16_step(float acc[16], const int32_t s4[64], bool iq4, const int32_t msum[8], float dd, float dm) {
    int32_t lane[16] = {0};
    for (int G = 0; G < 64; G++) {
        const int k = G / 16, p = G % 16;
        lane[iq4 ? p : 4 * (p / 4) + 2 * (k % 2) + (p % 4) / 2] += s4[G];
    }
    for (int l = 0; l < 16; l++) acc[l] = fmaf((float)lane[l], dd, acc[l]);
    for (int l = 0; l < 8; l++) acc[l] = fmaf(-(float)msum[l], dm, acc[l]);
}

/* msum[l] of kq16_step from the mins of the 16 groups. */
static void kq16_msum(const int32_t mins[16], const rw_block_q8_K *x, int32_t msum[8]) {
    for (int l = 0; l < 8; l++) msum[l] = mins[2 * l] * bsum16(x, 2 * l) + mins[2 * l + 1] * bsum16(x, 2 * l + 1);
}

static float dot_q2_K(int64_t n, const void *wp, const void *xp) {
    const rw_block_q2_K *w = wp;
    const rw_block_q8_K *x = xp;
    float acc[16] = {0};
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        /* element e = 128*h + 32*s + l holds bits 2s..2s+1 of qs[32*h + l];
         * its 16-group g = e / 16 has scale scales[g] & 15, min scales[g] >> 4 */
        int32_t s4[64], mins[16], msum[8];
        for (int G = 0; G < 64; G++) {
            int32_t dot = 0;
            for (int e = 4 * G; e < 4 * G + 4; e++) {
                const int h = e / 128, sh = (e % 128) / 32, l = e % 32;
                dot += ((w[b].qs[32 * h + l] >> (2 * sh)) & 3) * x[b].qs[e];
            }
            s4[G] = (w[b].scales[G / 4] & 0x0F) * dot;
        }
        for (int g = 0; g < 16; g++) mins[g] = w[b].scales[g] >> 4;
        kq16_msum(mins, &x[b], msum);
        kq16_step(acc, s4, false, msum, f16(w[b].d) * x[b].d, f16(w[b].dmin) * x[b].d);
    }
    return reduce16(acc);
}

/* Q3_K's 16 signed 6-bit scales packed in 12 bytes. */
static int q3_scale(const uint8_t s[12], int g) {
    int lo = g < 8 ? s[g] & 0x0F : s[g - 8] >> 4;
    int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
    return (lo | hi << 4) - 32;
}

static float dot_q3_K(int64_t n, const void *wp, const void *xp) {
    const rw_block_q3_K *w = wp;
    const rw_block_q8_K *x = xp;
    float acc[16] = {0};
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        /* element e = 128*h + 32*s + l: low bits 2s..2s+1 of qs[32*h + l], high
         * bit (4*h + s) of hmask[l]; values taken unsigned (0..7), the -4 of a
         * clear high bit coming off as the min term 4 * scale . bsums */
        int32_t s4[64], mins[16], msum[8];
        for (int G = 0; G < 64; G++) {
            int32_t dot = 0;
            for (int e = 4 * G; e < 4 * G + 4; e++) {
                const int h = e / 128, sh = (e % 128) / 32, l = e % 32;
                const int q = ((w[b].qs[32 * h + l] >> (2 * sh)) & 3) | ((w[b].hmask[l] >> (4 * h + sh)) & 1) << 2;
                dot += q * x[b].qs[e];
            }
            s4[G] = q3_scale(w[b].scales, G / 4) * dot;
        }
        for (int g = 0; g < 16; g++) mins[g] = 4 * q3_scale(w[b].scales, g);
        kq16_msum(mins, &x[b], msum);
        const float dd = f16(w[b].d) * x[b].d;
        kq16_step(acc, s4, false, msum, dd, dd);
    }
    return reduce16(acc);
}

/* Scale and min of sub-block j (of 8) of Q4_K / Q5_K: 6 bits each in 12 bytes. */
static void k4_scale_min(const uint8_t s[12], int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* The integer sums of one Q4_K or Q5_K super-block: isum = sum over
 * sub-blocks j of scale_j * (dot of the sub-block's quants with x's) and
 * msum = sum of min_j * (sum of x's quants of sub-block j). Sub-block
 * j = 2c + hi holds the low (hi = 0) or high nibbles of qs[32c .. 32c+32);
 * with qh (Q5_K), bit j of qh[l] is the 5th bit of element 32j + l. */
/* Element e of a Q4_K (qh NULL) or Q5_K super-block, unsigned: sub-block
 * j = e / 32 is the low (j even) or high nibbles of qs[32(j/2) .. +32);
 * with qh, bit j of qh[e % 32] is its fifth bit. */
static int q45_value(const uint8_t *qs, const uint8_t *qh, int e) {
    const int c = e / 64, hi = (e / 32) % 2, l = e % 32;
    int q = (qs[32 * c + l] >> (4 * hi)) & 0x0F;
    if (qh) q |= ((qh[l] >> (e / 32)) & 1) << 4;
    return q;
}

/* Element e = 128h + 32k + l (k < 4, l < 32) of a Q6_K super-block, 0..63
 * (the -32 not applied): low nibble of ql[64h + 32k + l] (k < 2) or high
 * nibble of ql[64h + 32(k-2) + l], high 2 bits (qh[32h + l] >> 2k) & 3. */
static int q6_value(const rw_block_q6_K *b, int e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const int lo = k < 2 ? b->ql[64 * h + 32 * k + l] & 0x0F : b->ql[64 * h + 32 * (k - 2) + l] >> 4;
    return lo | ((b->qh[32 * h + l] >> (2 * k)) & 3) << 4;
}

static void k45_sums(const uint8_t scales[12], const uint8_t qs[128], const uint8_t *qh, const rw_block_q8_K *x,
                     int32_t *isum, int32_t *msum) {
    *isum = *msum = 0;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k4_scale_min(scales, j, &sc, &m);
        int32_t dot = 0;
        for (int e = 32 * j; e < 32 * j + 32; e++) dot += q45_value(qs, qh, e) * x->qs[e];
        *isum += sc * dot;
        *msum += m * (bsum16(x, 2 * j) + bsum16(x, 2 * j + 1));
    }
}

static float dot_q4_K(int64_t n, const void *wp, const void *xp) {
    const rw_block_q4_K *w = wp;
    const rw_block_q8_K *x = xp;
    float sum = 0;
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        int32_t isum, msum;
        k45_sums(w[b].scales, w[b].qs, NULL, &x[b], &isum, &msum);
        float dx = x[b].d;
        sum += (f16(w[b].d) * dx) * (float)isum - (f16(w[b].dmin) * dx) * (float)msum;
    }
    return sum;
}

static float dot_q5_K(int64_t n, const void *wp, const void *xp) {
    const rw_block_q5_K *w = wp;
    const rw_block_q8_K *x = xp;
    float sum = 0;
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        int32_t isum, msum;
        k45_sums(w[b].scales, w[b].qs, w[b].qh, &x[b], &isum, &msum);
        float dx = x[b].d;
        sum += (f16(w[b].d) * dx) * (float)isum - (f16(w[b].dmin) * dx) * (float)msum;
    }
    return sum;
}

static float dot_q6_K(int64_t n, const void *wp, const void *xp) {
    const rw_block_q6_K *w = wp;
    const rw_block_q8_K *x = xp;
    float sum = 0;
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        int32_t isum = 0;
        for (int g = 0; g < 16; g++) { /* 16-group g, signed scale scales[g], values q - 32 */
            int32_t dot = 0;
            for (int e = 16 * g; e < 16 * g + 16; e++) dot += (q6_value(&w[b], e) - 32) * x[b].qs[e];
            isum += w[b].scales[g] * dot;
        }
        sum += (f16(w[b].d) * x[b].d) * (float)isum;
    }
    return sum;
}

static float dot_iq4_xs(int64_t n, const void *wp, const void *xp) {
    const rw_block_iq4_xs *w = wp;
    const rw_block_q8_K *x = xp;
    float acc[16] = {0};
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        /* sub-block j: qs[16j .. 16j+16), low nibbles first; 6-bit scale minus
         * 32; values biased by +128 (the AVX-512 tier's unsigned quants), the
         * bias coming off as the min term 128 * scale . bsums */
        int sc[8];
        int32_t s4[64], mins[16], msum[8];
        for (int j = 0; j < 8; j++)
            sc[j] = (((w[b].scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | ((w[b].scales_h >> (2 * j)) & 3) << 4) - 32;
        for (int G = 0; G < 64; G++) {
            int32_t dot = 0;
            for (int e = 4 * G; e < 4 * G + 4; e++) {
                const int j = e / 32, l = e % 32;
                const int v = iq4nl_values[l < 16 ? w[b].qs[16 * j + l] & 0x0F : w[b].qs[16 * j + l - 16] >> 4];
                dot += (v + 128) * x[b].qs[e];
            }
            s4[G] = sc[G / 8] * dot;
        }
        for (int g = 0; g < 16; g++) mins[g] = 128 * sc[g / 2];
        kq16_msum(mins, &x[b], msum);
        const float dd = f16(w[b].d) * x[b].d;
        kq16_step(acc, s4, true, msum, dd, dd);
    }
    return reduce16(acc);
}

/* ---- tiles and the table --------------------------------------------- */

#define REF_KERNEL(name, xb, conv)                                                                  \
    static void tile_##name(int64_t n_in, const uint8_t *w, size_t w_stride, int nw, const uint8_t *xq, \
                            size_t xq_stride, int nx, float *out) {                                 \
        for (int j = 0; j < nx; j++)                                                                \
            for (int i = 0; i < nw; i++)                                                            \
                out[j * nw + i] = dot_##name(n_in, w + i * w_stride, xq + j * xq_stride);           \
    }                                                                                               \
    static const rw_mm_kernel kernel_##name = {.x_bytes = xb, .convert_x = conv, .tile = tile_##name, .max_nw = 1, .max_nx = 1};

REF_KERNEL(f32, x_bytes_f32, convert_f32)
REF_KERNEL(f16, x_bytes_16, convert_f16)
REF_KERNEL(bf16, x_bytes_16, convert_bf16)
REF_KERNEL(q4_0, x_bytes_q8_0, convert_q8_0)
REF_KERNEL(q4_1, x_bytes_q8_1, convert_q8_1)
REF_KERNEL(q5_0, x_bytes_q8_0, convert_q8_0)
REF_KERNEL(q5_1, x_bytes_q8_1, convert_q8_1)
REF_KERNEL(q8_0, x_bytes_q8_0, convert_q8_0)
REF_KERNEL(iq4_nl, x_bytes_q8_0, convert_q8_0)
REF_KERNEL(mxfp4, x_bytes_q8_0, convert_q8_0)
REF_KERNEL(q2_K, x_bytes_q8_K, convert_q8_K)
REF_KERNEL(q3_K, x_bytes_q8_K, convert_q8_K)
REF_KERNEL(q4_K, x_bytes_q8_K, convert_q8_K)
REF_KERNEL(q5_K, x_bytes_q8_K, convert_q8_K)
REF_KERNEL(q6_K, x_bytes_q8_K, convert_q8_K)
REF_KERNEL(iq4_xs, x_bytes_q8_K, convert_q8_K)

const rw_mm_kernel *rw_mm_kernel_ref(rw_dtype t) {
    switch (t) {
    case RW_TYPE_F32: return &kernel_f32;
    case RW_TYPE_F16: return &kernel_f16;
    case RW_TYPE_BF16: return &kernel_bf16;
    case RW_TYPE_Q4_0: return &kernel_q4_0;
    case RW_TYPE_Q4_1: return &kernel_q4_1;
    case RW_TYPE_Q5_0: return &kernel_q5_0;
    case RW_TYPE_Q5_1: return &kernel_q5_1;
    case RW_TYPE_Q8_0: return &kernel_q8_0;
    case RW_TYPE_IQ4_NL: return &kernel_iq4_nl;
    case RW_TYPE_MXFP4: return &kernel_mxfp4;
    case RW_TYPE_Q2_K: return &kernel_q2_K;
    case RW_TYPE_Q3_K: return &kernel_q3_K;
    case RW_TYPE_Q4_K: return &kernel_q4_K;
    case RW_TYPE_Q5_K: return &kernel_q5_K;
    case RW_TYPE_Q6_K: return &kernel_q6_K;
    case RW_TYPE_IQ4_XS: return &kernel_iq4_xs;
    default: return NULL;
    }
}

/* ---- RW_NUMERICS_GGML ------------------------------------------------- */

/* ggml's horizontal sum of eight lanes (hsum_float_8): the upper four
 * added to the lower four, then lanes 0+2 and 1+3, then those two. */
static float hsum8(const float a[8]) {
    const float t0 = a[4] + a[0], t1 = a[5] + a[1], t2 = a[6] + a[2], t3 = a[7] + a[3];
    return (t0 + t2) + (t1 + t3);
}

/* The ggml-order dot of a 32-block type against Q8_0 (X_T) or Q8_1
 * activations: VALUE(block, j) is element j of a weight block; 8 lanes of
 * the exact sums of 4 products, one fma per lane and block, ggml's hsum;
 * MIN_STEP(b) adds block b's min term, RESULT is what is returned. */
#define DOT32_GGML_GEN(W_T, X_T, VALUE, MIN_STEP, RESULT)                                               \
    const W_T *w = wp;                                                                                 \
    const X_T *x = xp;                                                                                 \
    float acc[8] = {0}, summs = 0;                                                                     \
    (void)summs;                                                                                       \
    for (int64_t b = 0; b < n / RW_QK; b++) {                                                          \
        const float d = f16(w[b].d) * f16(x[b].d);                                                     \
        MIN_STEP(b)                                                                                    \
        for (int l = 0; l < 8; l++) {                                                                  \
            int32_t lsum = 0;                                                                          \
            for (int j = 4 * l; j < 4 * l + 4; j++) lsum += VALUE(&w[b], j) * x[b].qs[j];               \
            acc[l] = fmaf(d, (float)lsum, acc[l]);                                                     \
        }                                                                                              \
    }                                                                                                  \
    return RESULT;
#define DOT32_NO_MIN(b)
#define DOT32_GGML(W_T, VALUE) DOT32_GGML_GEN(W_T, rw_block_q8_0, VALUE, DOT32_NO_MIN, hsum8(acc))

/* Q4_1 / Q5_1 against Q8_1: the 8 lanes as DOT32_GGML (unsigned quants),
 * and the min term m * s (an exact product) added block after block to its
 * own float sum, which comes after the lanes' hsum. */
#define DOT32_ADD_MIN(b) summs += f16(w[b].m) * f16(x[b].s);
#define DOT32_MIN_GGML(W_T, VALUE) DOT32_GGML_GEN(W_T, rw_block_q8_1, VALUE, DOT32_ADD_MIN, hsum8(acc) + summs)

/* MXFP4 in 16 lanes, block b in lanes 8 * (b % 2) + l, each the exact sum
 * of products 4l .. 4l + 3, one fma per lane and block, then reduce16:
 * for an even number of blocks this is ggml's x86 MXFP4 order (even and odd
 * blocks in two 8-lane accumulators, added, then hsum); ggml adds an odd
 * last block after the hsum instead. */
static float dot_mxfp4_ggml(int64_t n, const void *wp, const void *xp) {
    const rw_block_mxfp4 *w = wp;
    const rw_block_q8_0 *x = xp;
    float acc[16] = {0};
    for (int64_t b = 0; b < n / RW_QK; b++) {
        float *lanes = acc + 8 * (b % 2);
        const float d = rw_e8m0_half(w[b].e) * f16(x[b].d);
        for (int l = 0; l < 8; l++) {
            int32_t lsum = 0;
            for (int j = 4 * l; j < 4 * l + 4; j++) lsum += mxfp4_value(&w[b], j) * x[b].qs[j];
            lanes[l] = fmaf((float)lsum, d, lanes[l]);
        }
    }
    return reduce16(acc);
}

static float dot_q4_0_ggml(int64_t n, const void *wp, const void *xp) { DOT32_GGML(rw_block_q4_0, q4_0_value) }
static float dot_q5_0_ggml(int64_t n, const void *wp, const void *xp) { DOT32_GGML(rw_block_q5_0, q5_0_value) }
static float dot_q8_0_ggml(int64_t n, const void *wp, const void *xp) { DOT32_GGML(rw_block_q8_0, q8_0_value) }
static float dot_q4_1_ggml(int64_t n, const void *wp, const void *xp) { DOT32_MIN_GGML(rw_block_q4_1, q4_1_value) }
static float dot_q5_1_ggml(int64_t n, const void *wp, const void *xp){DOT32_MIN_GGML(rw_block_q5_1, q5_1_value)}

REF_KERNEL(q4_0_ggml, x_bytes_q8_0, convert_q8_0) REF_KERNEL(q5_0_ggml, x_bytes_q8_0, convert_q8_0)
    REF_KERNEL(q8_0_ggml, x_bytes_q8_0, convert_q8_0) REF_KERNEL(q4_1_ggml, x_bytes_q8_1, convert_q8_1)
        REF_KERNEL(q5_1_ggml, x_bytes_q8_1, convert_q8_1) REF_KERNEL(mxfp4_ggml, x_bytes_q8_0, convert_q8_0)

    /* K-quants in the order of ggml's AVX2 vec-dots (the ones llama.cpp runs on
 * x86 without weight repacking). Per super-block, eight exact integer
 * lanes: lane l holds the scaled products of elements 32c + 4l .. 32c + 4l + 3
 * of every 32-element chunk c, then acc_l = fma(dx*d, lane_l, acc_l); the
 * result is hsum8(acc) plus the min term.
 *   Q4_K: the mins in four lanes (sub-blocks 2k and 2k+1 in lane k),
 *         accm_k = fma(-dx*dmin, mlane_k, accm_k), summed (0+2) + (1+3).
 *   Q5_K: the mins as one integer, summs = fma(-dx*dmin, msum, summs).
 *   Q6_K: quants taken unsigned (0..63) in the lanes above, and the -32
 *         offset subtracted per 32-element chunk: 32 * sum of scale * x of
 *         chunk c comes off lane c (ggml since its 2026 AVX2 Q6_K rewrite,
 *         which takes it from Q8_K's bsums). */
    static void k45_lanes(const uint8_t scales[12], const uint8_t *qs, const uint8_t *qh, const rw_block_q8_K *x,
                          int32_t lane[8], int32_t mlane[4]) {
    int sc[8], mn[8];
    for (int j = 0; j < 8; j++) k4_scale_min(scales, j, &sc[j], &mn[j]);
    for (int l = 0; l < 8; l++) {
        lane[l] = 0;
        for (int j = 0; j < 8; j++) {
            int32_t s = 0;
            for (int e = 32 * j + 4 * l; e < 32 * j + 4 * l + 4; e++) s += q45_value(qs, qh, e) * x->qs[e];
            lane[l] += sc[j] * s;
        }
    }
    for (int k = 0; k < 4; k++)
        mlane[k] = mn[2 * k] * (bsum16(x, 4 * k) + bsum16(x, 4 * k + 1)) +
                   mn[2 * k + 1] * (bsum16(x, 4 * k + 2) + bsum16(x, 4 * k + 3));
}

static float dot_q4_K_ggml(int64_t n, const void *wp, const void *xp) {
    const rw_block_q4_K *w = wp;
    const rw_block_q8_K *x = xp;
    float acc[8] = {0}, accm[4] = {0};
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        const float d = x[b].d * f16(w[b].d), dmin = -x[b].d * f16(w[b].dmin);
        int32_t lane[8], mlane[4];
        k45_lanes(w[b].scales, w[b].qs, NULL, &x[b], lane, mlane);
        for (int k = 0; k < 4; k++) accm[k] = fmaf(dmin, (float)mlane[k], accm[k]);
        for (int l = 0; l < 8; l++) acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    const float m = (accm[0] + accm[2]) + (accm[1] + accm[3]);
    return hsum8(acc) + m;
}

static float dot_q5_K_ggml(int64_t n, const void *wp, const void *xp) {
    const rw_block_q5_K *w = wp;
    const rw_block_q8_K *x = xp;
    float acc[8] = {0}, summs = 0;
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        const float d = x[b].d * f16(w[b].d), dmin = -x[b].d * f16(w[b].dmin);
        int32_t lane[8], mlane[4];
        k45_lanes(w[b].scales, w[b].qs, w[b].qh, &x[b], lane, mlane);
        const int32_t ms = (mlane[0] + mlane[1]) + (mlane[2] + mlane[3]);
        summs = fmaf(dmin, (float)ms, summs); /* ggml's scalar `summs += dmin * ms`, contracted by GCC */
        for (int l = 0; l < 8; l++) acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    return hsum8(acc) + summs;
}

static float dot_q6_K_ggml(int64_t n, const void *wp, const void *xp) {
    const rw_block_q6_K *w = wp;
    const rw_block_q8_K *x = xp;
    float acc[8] = {0};
    for (int64_t b = 0; b < n / RW_QK_K; b++) {
        const float d = x[b].d * f16(w[b].d);
        int32_t lane[8] = {0};
        for (int e = 0; e < RW_QK_K; e++) {
            lane[(e % 32) / 4] += w[b].scales[e / 16] * (q6_value(&w[b], e) * x[b].qs[e]);
            lane[e / 32] -= 32 * w[b].scales[e / 16] * x[b].qs[e];
        }
        for (int l = 0; l < 8; l++) acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    return hsum8(acc);
}

REF_KERNEL(q4_K_ggml, x_bytes_q8_K, convert_q8_K)
REF_KERNEL(q5_K_ggml, x_bytes_q8_K, convert_q8_K)
REF_KERNEL(q6_K_ggml, x_bytes_q8_K, convert_q8_K)

const rw_mm_kernel *rw_mm_kernel_ref_ggml(rw_dtype t) {
    switch (t) {
    case RW_TYPE_Q4_0: return &kernel_q4_0_ggml;
    case RW_TYPE_Q5_0: return &kernel_q5_0_ggml;
    case RW_TYPE_Q8_0: return &kernel_q8_0_ggml;
    case RW_TYPE_Q4_1: return &kernel_q4_1_ggml;
    case RW_TYPE_Q5_1: return &kernel_q5_1_ggml;
    case RW_TYPE_MXFP4: return &kernel_mxfp4_ggml;
    case RW_TYPE_Q4_K: return &kernel_q4_K_ggml;
    case RW_TYPE_Q5_K: return &kernel_q5_K_ggml;
    case RW_TYPE_Q6_K: return &kernel_q6_K_ggml;
    default: return NULL;
    }
}
