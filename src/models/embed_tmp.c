/* embed_tmp.c - TEMPORARY row conversion for the embedding lookup until
 * kernels/quant.c (rw_dequantize_row) is on main; then embed() calls that
 * and this file goes away. Exact conversions (each value rounds once). */
#include <string.h>

#include "kernels/quant.h"
#include "models/model_int.h"

static float half(rw_f16 h) {
    _Float16 x;
    memcpy(&x, &h, sizeof x);
    return (float)x;
}

bool mdl_tmp_can_embed(rw_dtype t) {
    return t == RW_TYPE_F32 || t == RW_TYPE_F16 || t == RW_TYPE_BF16 || t == RW_TYPE_Q8_0 || t == RW_TYPE_Q6_K ||
           t == RW_TYPE_Q4_0 || t == RW_TYPE_Q5_0 || t == RW_TYPE_Q4_K || t == RW_TYPE_Q5_K;
}

/* The 6-bit scale and min of 32-value group j (0..7) of a Q4_K/Q5_K block:
 * groups 0-3 in the low 6 bits of bytes j and j+4, groups 4-7 from the
 * nibbles of bytes j+4 plus the top two bits of bytes j-4 and j. */
static void k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_K (qh NULL) and Q5_K: per 64 values, two groups of 32 with their own
 * scale and min; value = d*scale*q - dmin*min, q the low or high nibble of
 * qs (plus 16 if the group's bit in qh is set, Q5_K). */
static void dequant_k45(float d, float dmin, const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, float *y) {
    for (int c = 0; c < 4; c++) {
        uint8_t s0, m0, s1, m1;
        k_scale_min(2 * c, scales, &s0, &m0);
        k_scale_min(2 * c + 1, scales, &s1, &m1);
        const float d0 = d * s0, n0 = dmin * m0, d1 = d * s1, n1 = dmin * m1;
        const uint8_t u0 = (uint8_t)(1u << (2 * c)), u1 = (uint8_t)(2u << (2 * c));
        for (int l = 0; l < 32; l++) {
            const int lo = (qs[32 * c + l] & 0xF) + (qh && (qh[l] & u0) ? 16 : 0);
            const int hi = (qs[32 * c + l] >> 4) + (qh && (qh[l] & u1) ? 16 : 0);
            y[64 * c + l] = d0 * (float)lo - n0;
            y[64 * c + 32 + l] = d1 * (float)hi - n1;
        }
    }
}

rw_status mdl_tmp_embed_row(rw_dtype t, const void *src, float *dst, int64_t n) {
    switch (t) {
    case RW_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return RW_OK;
    case RW_TYPE_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = half(((const rw_f16 *)src)[i]);
        return RW_OK;
    case RW_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)((const rw_bf16 *)src)[i] << 16;
            memcpy(dst + i, &u, sizeof u);
        }
        return RW_OK;
    case RW_TYPE_Q8_0: {
        const rw_block_q8_0 *b = src;
        for (int64_t i = 0; i < n; i++) dst[i] = half(b[i / RW_QK].d) * (float)b[i / RW_QK].qs[i % RW_QK];
        return RW_OK;
    }
    case RW_TYPE_Q6_K: {
        /* Per 128 values: 4 groups of 32; value l of group g takes 4 low bits
         * from ql (low nibble for g = 0, 1, high nibble for g = 2, 3; byte
         * l or l + 32), 2 high bits from qh[l] bits 2g..2g+1, minus 32, times
         * d and the 8-bit scale of its 16-value group. */
        const rw_block_q6_K *b = src;
        for (int64_t ib = 0; ib < n / RW_QK_K; ib++, b++) {
            const float d = half(b->d);
            for (int half_i = 0; half_i < 2; half_i++) {
                const uint8_t *ql = b->ql + 64 * half_i, *qh = b->qh + 32 * half_i;
                const int8_t *sc = b->scales + 8 * half_i;
                float *y = dst + ib * RW_QK_K + 128 * half_i;
                for (int l = 0; l < 32; l++) {
                    const int g16 = l / 16;
                    const int q0 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    const int q1 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    const int q2 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    const int q3 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    y[l] = d * (float)(sc[g16] * q0);
                    y[l + 32] = d * (float)(sc[g16 + 2] * q1);
                    y[l + 64] = d * (float)(sc[g16 + 4] * q2);
                    y[l + 96] = d * (float)(sc[g16 + 6] * q3);
                }
            }
        }
        return RW_OK;
    }
    case RW_TYPE_Q4_0: {
        /* value j < 16: low nibble of qs[j]; j >= 16: high nibble of qs[j-16]; minus 8 */
        const rw_block_q4_0 *b = src;
        for (int64_t ib = 0; ib < n / RW_QK; ib++) {
            const float d = half(b[ib].d);
            for (int j = 0; j < 16; j++) {
                dst[ib * RW_QK + j] = (float)((b[ib].qs[j] & 0xF) - 8) * d;
                dst[ib * RW_QK + j + 16] = (float)((b[ib].qs[j] >> 4) - 8) * d;
            }
        }
        return RW_OK;
    }
    case RW_TYPE_Q5_0: {
        /* as Q4_0 with a fifth bit from qh (bit j for value j), minus 16 */
        const rw_block_q5_0 *b = src;
        for (int64_t ib = 0; ib < n / RW_QK; ib++) {
            const float d = half(b[ib].d);
            uint32_t qh;
            memcpy(&qh, b[ib].qh, sizeof qh);
            for (int j = 0; j < 16; j++) {
                const int x0 = (int)((b[ib].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16;
                const int x1 = (int)((b[ib].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
                dst[ib * RW_QK + j] = (float)x0 * d;
                dst[ib * RW_QK + j + 16] = (float)x1 * d;
            }
        }
        return RW_OK;
    }
    case RW_TYPE_Q4_K: {
        const rw_block_q4_K *b = src;
        for (int64_t ib = 0; ib < n / RW_QK_K; ib++)
            dequant_k45(half(b[ib].d), half(b[ib].dmin), b[ib].scales, b[ib].qs, NULL, dst + ib * RW_QK_K);
        return RW_OK;
    }
    case RW_TYPE_Q5_K: {
        const rw_block_q5_K *b = src;
        for (int64_t ib = 0; ib < n / RW_QK_K; ib++)
            dequant_k45(half(b[ib].d), half(b[ib].dmin), b[ib].scales, b[ib].qs, b[ib].qh, dst + ib * RW_QK_K);
        return RW_OK;
    }
    default: return RW_ERR_UNSUPPORTED;
    }
}
