/* quant_int.h - private to src/kernels: pieces shared by the quantizers. */
#ifndef RW_KERNELS_QUANT_INT_H
#define RW_KERNELS_QUANT_INT_H

#include <string.h>

#include "kernels/quant.h"

/* Round to nearest, ties to even, as ggml's nearest_int (|x| < 2^22).
 * Inline: the quantizers call it for every value and every search step. */
static inline int rw_nearest_int(float x) {
    float v = x + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}
/* MXFP4's block scale 2^(e - 128) (E8M0 halved, as its table holds the
 * E2M1 values doubled): e < 2 gives an f32 subnormal. Exact. */
static inline float rw_e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Activation rows for the Q8_0 / Q8_1 vec-dots, rounded as ggml's x86
 * build rounds them (quantize_ref.c); nb blocks of 32. */
void rw_quantize_act_q8_0(const float *x, rw_block_q8_0 *y, int64_t nb);
void rw_quantize_act_q8_1(const float *x, rw_block_q8_1 *y, int64_t nb);
void rw_k4_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m);
/* Asymmetric sub-block fit of the K-quants (quantize_k_ref.c): x ~ scale*L - *min_out */
float rw_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *min_out, uint8_t *Laux,
                       float rmin, float rdelta, int nstep, bool abs_err);

/* The sub-block search of Q4_K and Q5_K (rmin, rdelta, nstep of
 * rw_fit_scale_min), shared by the reference and the fast quantizers. */
#define RW_Q4_K_FIT -1.f, 0.1f, 20
#define RW_Q5_K_FIT -0.5f, 0.1f, 15

/* nb super-blocks of 256 values each */
void rw_quantize_q4_K_ref(const float *x, rw_block_q4_K *y, int64_t nb);
void rw_quantize_q5_K_ref(const float *x, rw_block_q5_K *y, int64_t nb);
void rw_quantize_q6_K_ref(const float *x, rw_block_q6_K *y, int64_t nb);
void rw_quantize_q2_K_ref(const float *x, rw_block_q2_K *y, int64_t nb);
void rw_quantize_q3_K_ref(const float *x, rw_block_q3_K *y, int64_t nb);
/* One super-block from its sub-block fits (what the reference's search
 * gives: scales, mins and levels L, which these overwrite): the stored
 * scales, the re-quantized levels and the packing (quantize_k_ref.c). A
 * faster search that gives the same fits then gives the same bytes. */
void rw_quantize_q4_K_fitted(const float *x, rw_block_q4_K *y, const float scales[8], const float mins[8],
                             uint8_t L[RW_QK_K]);
void rw_quantize_q5_K_fitted(const float *x, rw_block_q5_K *y, const float scales[8], const float mins[8],
                             uint8_t L[RW_QK_K]);
void rw_quantize_q6_K_fitted(const float *x, rw_block_q6_K *y, const float scales[16], uint8_t L[RW_QK_K]);
/* The steps the importance-weighted quantizers share with the references
 * (quantize_weighted_ref.c): the symmetric sub-block fit x ~ scale*(L-nmax)
 * weighted by qw (NULL: x^2); Q4_K/Q5_K's levels re-quantized against the
 * stored scales and their packing; Q2_K's and Q3_K's from the stored
 * scales on (re-quantized levels, packing) and Q3_K's 6-bit scale j. */
float rw_fit_scale_sym(int n, int nmax, const float *x, const float *qw, uint8_t *L);
void rw_k_requant(const float *x, int nmax, const uint8_t scales[12], rw_f16 d16, rw_f16 dmin16, uint8_t L[RW_QK_K]);
void rw_q4_K_pack(const uint8_t L[RW_QK_K], rw_block_q4_K *y);
void rw_q5_K_pack(const uint8_t L[RW_QK_K], rw_block_q5_K *y);
void rw_q2_K_finish(const float *x, rw_block_q2_K *y, uint8_t L[RW_QK_K]);
void rw_q3_K_finish(const float *x, rw_block_q3_K *y, uint8_t L[RW_QK_K]);
void rw_q3_K_set_scale(uint8_t scales[12], int j, int l);
/* IQ4_NL / IQ4_XS with importance weights qw (quantize_iq_ref.c): nb
 * blocks of 32 / super-blocks of 256, qw as many values as x. */
void rw_quantize_iq4_nl_weighted(const float *x, rw_block_iq4_nl *y, int64_t nb, const float *qw);
void rw_quantize_iq4_xs_weighted(const float *x, rw_block_iq4_xs *y, int64_t nb, const float *qw);
/* Their steps, for fast versions that re-quantize in vectors: Q4_K/Q5_K's
 * stored scales, mins, d and dmin; Q6_K's d and scales (false: a block of
 * zeros, y cleared); Q6_K's packing of the levels. */
void rw_k_pack_scales(const float scales[8], const float mins[8], uint8_t scales_out[12], rw_f16 *d_out,
                      rw_f16 *dmin_out);
bool rw_q6_K_scales(const float scales[16], rw_block_q6_K *y);
void rw_q6_K_pack(const uint8_t L[RW_QK_K], rw_block_q6_K *y);
/* AVX-512 (quantize_k_avx512.c): bitwise the _ref functions, the sub-block
 * searches run 16 sub-blocks at a time, one per lane. Callers check that the
 * CPU has AVX-512 (rw_kernel_tier_current). */
void rw_quantize_q4_K_avx512(const float *x, rw_block_q4_K *y, int64_t nb);
void rw_quantize_q5_K_avx512(const float *x, rw_block_q5_K *y, int64_t nb);
void rw_quantize_q6_K_avx512(const float *x, rw_block_q6_K *y, int64_t nb);
/* nb blocks of 32 values each */
void rw_quantize_iq4_nl_ref(const float *x, rw_block_iq4_nl *y, int64_t nb);
void rw_quantize_iq4_xs_ref(const float *x, rw_block_iq4_xs *y, int64_t nb); /* nb super-blocks of 256 */
void rw_quantize_mxfp4_ref(const float *x, rw_block_mxfp4 *y, int64_t nb);   /* nb blocks of 32 */
void rw_quantize_tq1_0_ref(const float *x, rw_block_tq1_0 *y, int64_t nb);   /* nb blocks of 256 */
void rw_quantize_tq2_0_ref(const float *x, rw_block_tq2_0 *y, int64_t nb);

#endif
