/* quantize_k_low_ref.c - f32 to Q2_K and Q3_K (plain C references).
 *
 * Both cut a 256-value super-block into 16 sub-blocks of 16 values and fit
 * each sub-block first, then quantize the 16 sub-block scales to 4 bits
 * (Q2_K, with 4-bit mins) or 6 signed bits (Q3_K) under one F16 super-scale,
 * and finally choose the levels again against the scales actually stored.
 * The sub-block fits follow ggml's reference quantizers: Q2_K searches scale
 * and min minimising the |x|-weighted absolute error, Q3_K starts from the
 * max-magnitude scale and then moves single values to another level while
 * that lowers the x^2-weighted squared error. */
#include <math.h>
#include <string.h>

#include "kernels/quant_int.h"

#define GROUP_MAX_EPS 1e-15f
#define Q3_PASSES 5 /* passes of single-value moves in the Q3_K sub-block fit */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Packs 256 2-bit levels the way Q2_K/Q3_K store them: byte l of each
 * 32-byte group holds values l, l+32, l+64, l+96 of a 128-value half. */
static void pack_2bit(const uint8_t L[RW_QK_K], uint8_t qs[RW_QK_K / 4]) {
    for (int j = 0; j < RW_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

void rw_quantize_q2_K_ref(const float *x, rw_block_q2_K *y, int64_t nb) {
    uint8_t L[RW_QK_K], Laux[16];
    float w[16], scales[16], mins[16];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = rw_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        /* 4-bit sub-block scales (low nibble) and mins (high nibble) */
        memset(y[i].scales, 0, sizeof y[i].scales);
        y[i].d = y[i].dmin = 0;
        if (max_scale > 0) {
            float inv = 15.f / max_scale;
            for (int j = 0; j < 16; j++) y[i].scales[j] = (uint8_t)rw_nearest_int(inv * scales[j]);
            y[i].d = rw_f32_to_f16(max_scale / 15.f);
        }
        if (max_min > 0) {
            float inv = 15.f / max_min;
            for (int j = 0; j < 16; j++) y[i].scales[j] |= (uint8_t)(rw_nearest_int(inv * mins[j]) << 4);
            y[i].dmin = rw_f32_to_f16(max_min / 15.f);
        }
        rw_q2_K_finish(x, &y[i], L);
    }
}

void rw_q2_K_finish(const float *x, rw_block_q2_K *y, uint8_t L[RW_QK_K]) {
    for (int j = 0; j < 16; j++) {
        float d = rw_f16_to_f32(y->d) * (float)(y->scales[j] & 0xf);
        if (!d) continue; /* keeps the levels of the sub-block fit */
        float dm = rw_f16_to_f32(y->dmin) * (float)(y->scales[j] >> 4);
        for (int l = 0; l < 16; l++) L[16 * j + l] = (uint8_t)clampi(rw_nearest_int((x[16 * j + l] + dm) / d), 0, 3);
    }
    pack_2bit(L, y->qs);
}

/* Symmetric fit x ~ scale * l, l in -nmax..nmax-1, for a Q3_K sub-block.
 * Stores l + nmax in L and returns the scale (0 for an all-zero block). */
static float q3_fit(int n, int nmax, const float *x, uint8_t *L) {
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
    int l_of[RW_QK_K / 16];
    for (int i = 0; i < n; i++) {
        int l = clampi(rw_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        l_of[i] = l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    /* Move one value at a time to the level that is best for the scale the
     * others imply, keeping the move if it raises sumlx^2/suml2 (that is,
     * lowers the weighted error of the least-squares scale). */
    for (int pass = 0; pass < Q3_PASSES; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)l_of[i];
            if (slx > 0) {
                float sl2 = suml2 - w * (float)l_of[i] * (float)l_of[i];
                int nl = clampi(rw_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != l_of[i]) {
                    slx += w * x[i] * (float)nl;
                    sl2 += w * (float)nl * (float)nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        l_of[i] = nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (uint8_t)(l_of[i] + nmax);
    return sumlx / suml2;
}

void rw_quantize_q3_K_ref(const float *x, rw_block_q3_K *y, int64_t nb) {
    uint8_t L[RW_QK_K];
    float scales[16];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = q3_fit(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        /* 6-bit signed scales: low nibbles in bytes 0..7, top 2 bits in 8..11 */
        memset(y[i].scales, 0, sizeof y[i].scales);
        y[i].d = 0;
        if (max_scale) {
            float iscale = -32.f / max_scale;
            y[i].d = rw_f32_to_f16(1 / iscale);
            for (int j = 0; j < 16; j++)
                rw_q3_K_set_scale(y[i].scales, j, clampi(rw_nearest_int(iscale * scales[j]), -32, 31) + 32);
        }
        rw_q3_K_finish(x, &y[i], L);
    }
}

/* 6-bit scale j (0..63, 32 = zero): low nibbles in bytes 0..7, top 2 bits
 * in 8..11 (scales zeroed first). */
void rw_q3_K_set_scale(uint8_t scales[12], int j, int l) {
    if (j < 8) scales[j] = (uint8_t)(l & 0xf);
    else scales[j - 8] |= (uint8_t)((l & 0xf) << 4);
    scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
}

void rw_q3_K_finish(const float *x, rw_block_q3_K *y, uint8_t L[RW_QK_K]) {
    for (int j = 0; j < 16; j++) {
        int low = j < 8 ? (y->scales[j] & 0xf) : (y->scales[j - 8] >> 4);
        int sc = (low | ((y->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
        float d = rw_f16_to_f32(y->d) * (float)sc;
        if (!d) continue; /* keeps the levels of the sub-block fit */
        for (int l = 0; l < 16; l++) L[16 * j + l] = (uint8_t)(clampi(rw_nearest_int(x[16 * j + l] / d), -4, 3) + 4);
    }
    /* bit 2 of each level goes to hmask (bit m of byte k holds value
     * 32*m + k), the low 2 bits to qs */
    memset(y->hmask, 0, sizeof y->hmask);
    for (int j = 0; j < RW_QK_K; j++)
        if (L[j] > 3) {
            y->hmask[j % 32] |= (uint8_t)(1u << (j / 32));
            L[j] -= 4;
        }
    pack_2bit(L, y->qs);
}
