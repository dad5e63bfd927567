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
    return t == RW_TYPE_F32 || t == RW_TYPE_F16 || t == RW_TYPE_BF16 || t == RW_TYPE_Q8_0 || t == RW_TYPE_Q6_K;
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
    default: return RW_ERR_UNSUPPORTED;
    }
}
