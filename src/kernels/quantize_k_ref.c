/* quantize_k_ref.c - f32 to Q4_K, Q5_K and Q6_K (plain C references; Q2_K
 * and Q3_K are in quantize_k_low_ref.c).
 *
 * Each 256-value super-block is cut into sub-blocks; each sub-block gets the
 * scale (and for Q4_K/Q5_K a min) that minimises its weighted squared error
 * over a small search around the plain min/max fit, then the sub-block scales
 * are themselves quantized to 6 or 8 bits under one F16 super-scale, and the
 * values are re-quantized against the scales actually stored. This is the
 * search ggml's reference quantizers perform, so the error matches theirs. */
#include <math.h>
#include <string.h>

#include "kernels/quant_int.h"

#define GROUP_MAX_EPS 1e-15f

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Weighted error of one value: squared, or absolute (Q2_K's choice). */
/* w * (diff * diff), not (w * diff) * diff: ggml's order, whose rounding
 * decides between two nearly equal fits in a few blocks in a million. */
static float weighted_err(float w, float diff, bool abs_err) { return abs_err ? w * fabsf(diff) : w * (diff * diff); }

/* Fits x ~ scale * L - min_out (L in 0..nmax, min_out >= 0) minimising the
 * w-weighted squared (or absolute) error; tries nstep scales around
 * nmax/(max-min). */
float rw_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *min_out, uint8_t *Laux,
                       float rmin, float rdelta, int nstep, bool abs_err) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *min_out = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(rw_nearest_int(iscale * (x[i] - min)), 0, nmax);
        best += weighted_err(w[i], scale * L[i] + min - x[i], abs_err);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(rw_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                err += weighted_err(w[i], this_scale * Laux[i] + this_min - x[i], abs_err);
            }
            if (err < best) {
                memcpy(L, Laux, (size_t)n);
                best = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *min_out = -min;
    return scale;
}

/* Symmetric fit x ~ scale * (L - nmax), weighted by qw (NULL: x^2), with a
 * search over 18 scales near nmax/max. */
float rw_fit_scale_sym(int n, int nmax, const float *x, const float *qw, uint8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(rw_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (uint8_t)(l + nmax);
        float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(rw_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = qw ? qw[i] : x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (uint8_t)(nmax + clampi(rw_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Shared by Q4_K and Q5_K, step 1: the 8 sub-blocks of 32, each fitted
 * alone (scales, mins, and levels L against the unrounded fit). */
static void k_fit(const float *x, int nmax, float rmin, float rdelta, int nstep, float scales[8], float mins[8],
                  uint8_t L[RW_QK_K]) {
    float weights[32];
    uint8_t Laux[32];
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(xs[l]);
        scales[j] = rw_fit_scale_min(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
    }
}

/* Step 2: the 6-bit scales and mins packed in 12 bytes under the F16 d and
 * dmin. */
void rw_k_pack_scales(const float scales[8], const float mins[8], uint8_t scales_out[12], rw_f16 *d_out,
                      rw_f16 *dmin_out) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales_out, 0, 12);
    for (int j = 0; j < 8; j++) {
        int ls = rw_nearest_int(inv_scale * scales[j]), lm = rw_nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            scales_out[j] = (uint8_t)ls;
            scales_out[j + 4] = (uint8_t)lm;
        } else {
            scales_out[j + 4] = (uint8_t)((ls & 0xf) | (lm & 0xf) << 4);
            /* unsigned: in a degenerate block (63 / max overflowing, e.g.
             * subnormal values) ls or lm can be negative, and shifting a
             * negative int left is undefined; the bits kept are the same */
            scales_out[j - 4] |= (uint8_t)(((unsigned)ls >> 4) << 6);
            scales_out[j] |= (uint8_t)(((unsigned)lm >> 4) << 6);
        }
    }
    *d_out = rw_f32_to_f16(max_scale / 63.f);
    *dmin_out = rw_f32_to_f16(max_min / 63.f);
}

/* Step 3: L re-quantized against the scales actually stored (a sub-block
 * whose stored scale is 0 keeps the levels of its fit). */
void rw_k_requant(const float *x, int nmax, const uint8_t scales[12], rw_f16 d16, rw_f16 dmin16, uint8_t L[RW_QK_K]) {
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        rw_k4_scale_min(j, scales, &sc, &m);
        float d = rw_f16_to_f32(d16) * sc;
        if (!d) continue;
        float dm = rw_f16_to_f32(dmin16) * m;
        for (int ii = 0; ii < 32; ii++) L[32 * j + ii] = (uint8_t)clampi(rw_nearest_int((x[32 * j + ii] + dm) / d), 0, nmax);
    }
}

void rw_q4_K_pack(const uint8_t L[RW_QK_K], rw_block_q4_K *y) {
    uint8_t *q = y->qs;
    for (int j = 0; j < RW_QK_K; j += 64, q += 32)
        for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
}

void rw_quantize_q4_K_fitted(const float *x, rw_block_q4_K *y, const float scales[8], const float mins[8],
                             uint8_t L[RW_QK_K]) {
    rw_k_pack_scales(scales, mins, y->scales, &y->d, &y->dmin);
    rw_k_requant(x, 15, y->scales, y->d, y->dmin, L);
    rw_q4_K_pack(L, y);
}

void rw_quantize_q4_K_ref(const float *x, rw_block_q4_K *y, int64_t nb) {
    uint8_t L[RW_QK_K];
    float scales[8], mins[8];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K) {
        k_fit(x, 15, RW_Q4_K_FIT, scales, mins, L);
        rw_quantize_q4_K_fitted(x, &y[i], scales, mins, L);
    }
}

void rw_quantize_q5_K_fitted(const float *x, rw_block_q5_K *y, const float scales[8], const float mins[8],
                             uint8_t L[RW_QK_K]) {
    rw_k_pack_scales(scales, mins, y->scales, &y->d, &y->dmin);
    rw_k_requant(x, 31, y->scales, y->d, y->dmin, L);
    rw_q5_K_pack(L, y);
}

void rw_q5_K_pack(const uint8_t L[RW_QK_K], rw_block_q5_K *y) {
    memset(y->qh, 0, sizeof y->qh);
    uint8_t *ql = y->qs, m1 = 1, m2 = 2;
    for (int n = 0; n < RW_QK_K; n += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
        for (int j = 0; j < 32; j++) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) {
                l1 -= 16;
                y->qh[j] |= m1;
            }
            if (l2 > 15) {
                l2 -= 16;
                y->qh[j] |= m2;
            }
            ql[j] = (uint8_t)(l1 | l2 << 4);
        }
    }
}

void rw_quantize_q5_K_ref(const float *x, rw_block_q5_K *y, int64_t nb) {
    uint8_t L[RW_QK_K];
    float scales[8], mins[8];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K) {
        k_fit(x, 31, RW_Q5_K_FIT, scales, mins, L);
        rw_quantize_q5_K_fitted(x, &y[i], scales, mins, L);
    }
}

bool rw_q6_K_scales(const float scales[16], rw_block_q6_K *y) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ib++) {
        if (fabsf(scales[ib]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(y, 0, sizeof *y);
        return false;
    }
    float iscale = -128.f / max_scale;
    y->d = rw_f32_to_f16(1 / iscale);
    for (int ib = 0; ib < 16; ib++) {
        int s = rw_nearest_int(iscale * scales[ib]);
        y->scales[ib] = (int8_t)(s < 127 ? s : 127);
    }
    return true;
}

void rw_q6_K_pack(const uint8_t L[RW_QK_K], rw_block_q6_K *y) {
    uint8_t *ql = y->ql, *qh = y->qh;
    for (int j = 0; j < RW_QK_K; j += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            uint8_t q1 = L[j + l] & 0xf, q2 = L[j + l + 32] & 0xf, q3 = L[j + l + 64] & 0xf, q4 = L[j + l + 96] & 0xf;
            ql[l] = (uint8_t)(q1 | q3 << 4);
            ql[l + 32] = (uint8_t)(q2 | q4 << 4);
            qh[l] = (uint8_t)((L[j + l] >> 4) | (L[j + l + 32] >> 4) << 2 | (L[j + l + 64] >> 4) << 4 |
                              (L[j + l + 96] >> 4) << 6);
        }
}

void rw_quantize_q6_K_fitted(const float *x, rw_block_q6_K *y, const float scales[16], uint8_t L[RW_QK_K]) {
    if (!rw_q6_K_scales(scales, y)) return;
    for (int j = 0; j < 16; j++) {
        float d = rw_f16_to_f32(y->d) * y->scales[j];
        if (!d) continue;
        for (int ii = 0; ii < 16; ii++) L[16 * j + ii] = (uint8_t)(clampi(rw_nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
    }
    rw_q6_K_pack(L, y);
}

void rw_quantize_q6_K_ref(const float *x, rw_block_q6_K *y, int64_t nb) {
    uint8_t L[RW_QK_K];
    float scales[16];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K) {
        for (int ib = 0; ib < 16; ib++) scales[ib] = rw_fit_scale_sym(16, 32, x + 16 * ib, NULL, L + 16 * ib);
        rw_quantize_q6_K_fitted(x, &y[i], scales, L);
    }
}
