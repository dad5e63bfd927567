/* quantize_weighted_ref.c - the quantizers with an importance matrix (the
 * mean square of each input column's activations over a calibration text,
 * llama-imatrix's output): the error each fit minimises weighs value j by
 * qw[j] * sqrt(sigma2 + x[j]^2), sigma2 a multiple of the block's (or the
 * row's) mean square, so the columns the model leans on are kept best.
 *
 * These are ggml's searches with weights, so a file quantized here with the
 * same matrix is llama-quantize's byte for byte: the sub-block fits of the
 * references, and for the K-quants a weighted fit of the sub-block scales
 * themselves (fit_scale_pos) where the references scale by the largest.
 * Q8_0, the ternary types, MXFP4, F16 and BF16 have no weighted form
 * (ggml's ignore the matrix too). */
#include <math.h>
#include <string.h>

#include "kernels/quant_int.h"

#define GROUP_MAX_EPS 1e-15f
#define WFIT_SEARCH   -0.9f, 0.05f, 36 /* rmin, rdelta, nstep of the asymmetric sub-block fits */

/* Fits non-negative x ~ scale * L (L in 0..nmax) minimising the w-weighted
 * squared error: the best of 9 scales near nmax/max, then up to 5 rounds
 * moving single levels while that raises sum(wxl)^2 / sum(wl^2). L holds
 * the levels as bytes (what a negative x rounds to wraps, as in ggml). */
static float fit_scale_pos(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)rw_nearest_int(iscale * x[i]);
    float scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        float diff = x[i] - scale * L[i];
        best += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        float iscale_is = (0.1f * (float)is + (float)nmax) / max, scale_is = 1 / iscale_is, err = 0;
        for (int i = 0; i < n; i++) {
            int l = rw_nearest_int(iscale_is * x[i]);
            l = l < nmax ? l : nmax;
            float diff = x[i] - scale_is * (float)l;
            err += w[i] * diff * diff;
        }
        if (err < best) {
            best = err;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = rw_nearest_int(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * L[i], sl2 = suml2 - w[i] * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int l = rw_nearest_int(x[i] * sl2 / slx);
                l = l < nmax ? l : nmax;
                if (l != L[i]) {
                    slx += w[i] * x[i] * (float)l;
                    sl2 += w[i] * (float)l * (float)l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* w[j] = qw[j] * sqrt(sigma2 + x[j]^2) for n values. */
static void importance(const float *x, const float *qw, float sigma2, float *w, int n) {
    for (int j = 0; j < n; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

static float sum_squares(const float *x, int64_t n) {
    float s = 0;
    for (int64_t j = 0; j < n; j++) s += x[j] * x[j];
    return s;
}

static float sum(const float *x, int n) {
    float s = 0;
    for (int j = 0; j < n; j++) s += x[j];
    return s;
}

/* ---- the 32-value types: sigma2 is the row's mean square ---- */

/* 32 levels in nibbles (value j low, j + 16 high), and their fifth bits in
 * qh (bit j of the little-endian word for value j). */
static void pack4(const uint8_t L[RW_QK], uint8_t qs[RW_QK / 2]) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((L[j] & 0xf) | (L[j + 16] & 0xf) << 4);
}

static void pack5(const uint8_t L[RW_QK], uint8_t qs[RW_QK / 2], uint8_t qh_out[4]) {
    uint32_t qh = 0;
    pack4(L, qs);
    for (int j = 0; j < 16; j++)
        qh |= (uint32_t)((L[j] & 0x10u) >> 4) << j | (uint32_t)((L[j + 16] & 0x10u) >> 4) << (j + 16);
    memcpy(qh_out, &qh, 4);
}

static void q4_0(const float *x, rw_block_q4_0 *y, int64_t n, const float *qw) {
    const float sigma2 = sum_squares(x, n) / (float)n;
    float w[RW_QK];
    uint8_t L[RW_QK];
    for (int64_t i = 0; i < n / RW_QK; i++, x += RW_QK, qw += RW_QK) {
        importance(x, qw, sigma2, w, RW_QK);
        y[i].d = rw_f32_to_f16(rw_fit_scale_sym(RW_QK, 8, x, w, L));
        pack4(L, y[i].qs);
    }
}

static void q5_0(const float *x, rw_block_q5_0 *y, int64_t n, const float *qw) {
    const float sigma2 = sum_squares(x, n) / (float)n;
    float w[RW_QK];
    uint8_t L[RW_QK];
    for (int64_t i = 0; i < n / RW_QK; i++, x += RW_QK, qw += RW_QK) {
        importance(x, qw, sigma2, w, RW_QK);
        y[i].d = rw_f32_to_f16(rw_fit_scale_sym(RW_QK, 16, x, w, L));
        pack5(L, y[i].qs, y[i].qh);
    }
}

/* Q4_1 / Q5_1: x ~ d * L + m, m <= 0 (nmax 15 / 31). */
static void q4_1(const float *x, rw_block_q4_1 *y, int64_t n, const float *qw) {
    const float sigma2 = sum_squares(x, n) / (float)n;
    float w[RW_QK], min;
    uint8_t L[RW_QK], Laux[RW_QK];
    for (int64_t i = 0; i < n / RW_QK; i++, x += RW_QK, qw += RW_QK) {
        importance(x, qw, sigma2, w, RW_QK);
        y[i].d = rw_f32_to_f16(rw_fit_scale_min(RW_QK, 15, x, w, L, &min, Laux, WFIT_SEARCH, false));
        y[i].m = rw_f32_to_f16(-min);
        pack4(L, y[i].qs);
    }
}

static void q5_1(const float *x, rw_block_q5_1 *y, int64_t n, const float *qw) {
    const float sigma2 = sum_squares(x, n) / (float)n;
    float w[RW_QK], min;
    uint8_t L[RW_QK], Laux[RW_QK];
    for (int64_t i = 0; i < n / RW_QK; i++, x += RW_QK, qw += RW_QK) {
        importance(x, qw, sigma2, w, RW_QK);
        y[i].d = rw_f32_to_f16(rw_fit_scale_min(RW_QK, 31, x, w, L, &min, Laux, WFIT_SEARCH, false));
        y[i].m = rw_f32_to_f16(-min);
        pack5(L, y[i].qs, y[i].qh);
    }
}

/* ---- the K-quants: sigma2 per super-block of 256 ---- */

static void q2_K(const float *x, rw_block_q2_K *y, int64_t nb, const float *qw) {
    uint8_t L[RW_QK_K], Laux[16], Ls[16], Lm[16];
    float w[16], sw[16], scales[16], mins[16];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K, qw += RW_QK_K) {
        const float sigma2 = sum_squares(x, RW_QK_K) / RW_QK_K;
        for (int j = 0; j < 16; j++) {
            importance(x + 16 * j, qw + 16 * j, sigma2, w, 16);
            sw[j] = sum(w, 16);
            scales[j] = rw_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, WFIT_SEARCH, false);
        }
        float dm = fit_scale_pos(16, 15, scales, Ls, sw), mm = fit_scale_pos(16, 15, mins, Lm, sw);
        y[i].d = rw_f32_to_f16(dm);
        y[i].dmin = rw_f32_to_f16(mm);
        for (int j = 0; j < 16; j++) y[i].scales[j] = (uint8_t)(Ls[j] | Lm[j] << 4);
        rw_q2_K_finish(x, &y[i], L);
    }
}

static void q3_K(const float *x, rw_block_q3_K *y, int64_t nb, const float *qw) {
    uint8_t L[RW_QK_K], Ls[16];
    float w[16], sw[16], scales[16];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K, qw += RW_QK_K) {
        const float sigma2 = 2 * sum_squares(x, RW_QK_K) / RW_QK_K;
        for (int j = 0; j < 16; j++) {
            importance(x + 16 * j, qw + 16 * j, sigma2, w, 16);
            sw[j] = sum(w, 16);
            scales[j] = rw_fit_scale_sym(16, 4, x + 16 * j, w, L + 16 * j);
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        const float d = rw_fit_scale_sym(16, 32, scales, sw, Ls);
        for (int j = 0; j < 16; j++) rw_q3_K_set_scale(y[i].scales, j, Ls[j]);
        y[i].d = rw_f32_to_f16(d);
        rw_q3_K_finish(x, &y[i], L);
    }
}

/* Q4_K and Q5_K: 8 sub-blocks of 32, their scales and mins fitted as
 * 6-bit levels (clamped to 63 for Q5_K, ggml's) and packed in 12 bytes. */
static void k_fit_weighted(const float *x, const float *qw, int nmax, bool clamp, uint8_t scales_out[12], rw_f16 *d,
                           rw_f16 *dmin, uint8_t L[RW_QK_K]) {
    uint8_t Laux[32], Ls[8], Lm[8];
    float w[32], sw[8], scales[8], mins[8];
    const float sigma2 = 2 * sum_squares(x, RW_QK_K) / RW_QK_K;
    for (int j = 0; j < 8; j++) {
        importance(x + 32 * j, qw + 32 * j, sigma2, w, 32);
        sw[j] = sum(w, 32);
        scales[j] = rw_fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, WFIT_SEARCH, false);
    }
    const float d_block = fit_scale_pos(8, 63, scales, Ls, sw), m_block = fit_scale_pos(8, 63, mins, Lm, sw);
    for (int j = 0; j < 8; j++) {
        int ls = Ls[j], lm = Lm[j];
        if (clamp) ls = ls < 63 ? ls : 63, lm = lm < 63 ? lm : 63;
        if (j < 4) {
            scales_out[j] = (uint8_t)ls;
            scales_out[j + 4] = (uint8_t)lm;
        } else {
            scales_out[j + 4] = (uint8_t)((ls & 0xf) | (lm & 0xf) << 4);
            scales_out[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales_out[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d = rw_f32_to_f16(d_block);
    *dmin = rw_f32_to_f16(m_block);
    rw_k_requant(x, nmax, scales_out, *d, *dmin, L);
}

static void q4_K(const float *x, rw_block_q4_K *y, int64_t nb, const float *qw) {
    uint8_t L[RW_QK_K];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K, qw += RW_QK_K) {
        k_fit_weighted(x, qw, 15, false, y[i].scales, &y[i].d, &y[i].dmin, L);
        rw_q4_K_pack(L, &y[i]);
    }
}

static void q5_K(const float *x, rw_block_q5_K *y, int64_t nb, const float *qw) {
    uint8_t L[RW_QK_K];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K, qw += RW_QK_K) {
        k_fit_weighted(x, qw, 31, true, y[i].scales, &y[i].d, &y[i].dmin, L);
        rw_q5_K_pack(L, &y[i]);
    }
}

/* Q6_K weighs each value by the matrix alone (ggml's choice). */
static void q6_K(const float *x, rw_block_q6_K *y, int64_t nb, const float *qw) {
    uint8_t L[RW_QK_K];
    float scales[16];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K, qw += RW_QK_K) {
        for (int ib = 0; ib < 16; ib++) scales[ib] = rw_fit_scale_sym(16, 32, x + 16 * ib, qw + 16 * ib, L + 16 * ib);
        rw_quantize_q6_K_fitted(x, &y[i], scales, L);
    }
}

rw_status rw_quantize_row_weighted(rw_dtype t, const float *x, void *dst, int64_t n, const float *qw) {
    if (!qw) return rw_quantize_row(t, x, dst, n);
    const int64_t bs = (int64_t)rw_dtype_block_size(t);
    if (n <= 0 || !bs || n % bs) return RW_ERR_INVALID_ARG;
    switch (t) {
    case RW_TYPE_Q4_0: q4_0(x, dst, n, qw); return RW_OK;
    case RW_TYPE_Q4_1: q4_1(x, dst, n, qw); return RW_OK;
    case RW_TYPE_Q5_0: q5_0(x, dst, n, qw); return RW_OK;
    case RW_TYPE_Q5_1: q5_1(x, dst, n, qw); return RW_OK;
    case RW_TYPE_Q2_K: q2_K(x, dst, n / RW_QK_K, qw); return RW_OK;
    case RW_TYPE_Q3_K: q3_K(x, dst, n / RW_QK_K, qw); return RW_OK;
    case RW_TYPE_Q4_K: q4_K(x, dst, n / RW_QK_K, qw); return RW_OK;
    case RW_TYPE_Q5_K: q5_K(x, dst, n / RW_QK_K, qw); return RW_OK;
    case RW_TYPE_Q6_K: q6_K(x, dst, n / RW_QK_K, qw); return RW_OK;
    case RW_TYPE_IQ4_NL: rw_quantize_iq4_nl_weighted(x, dst, n / RW_QK, qw); return RW_OK;
    case RW_TYPE_IQ4_XS: rw_quantize_iq4_xs_weighted(x, dst, n / RW_QK_K, qw); return RW_OK;
    default: return rw_quantize_row(t, x, dst, n); /* no weighted form */
    }
}
