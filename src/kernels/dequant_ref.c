/* dequant_ref.c - every block type to f32, the plain C specification.
 *
 * Each formula rounds at most once per value (an F16 scale times a small
 * integer is exact in float; only a final +min/-min rounds), so these give
 * ggml's values bit for bit whatever the evaluation order. */
#include <string.h>

#include "kernels/quant_int.h"

static const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
static const int8_t kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}; /* doubled e2m1 */

static float f16(rw_f16 h) { return rw_f16_to_f32(h); }

static void deq_q4_0(const rw_block_q4_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += RW_QK) {
        float d = f16(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((b[i].qs[j] & 0xf) - 8) * d;
            y[j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void deq_q4_1(const rw_block_q4_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += RW_QK) {
        float d = f16(b[i].d), m = f16(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(b[i].qs[j] & 0xf) * d + m;
            y[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

static void deq_q5_0(const rw_block_q5_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += RW_QK) {
        float d = f16(b[i].d);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int hi0 = (int)((qh >> j) << 4 & 0x10), hi1 = (int)((qh >> (j + 12)) & 0x10);
            y[j] = (float)(((b[i].qs[j] & 0xf) | hi0) - 16) * d;
            y[j + 16] = (float)(((b[i].qs[j] >> 4) | hi1) - 16) * d;
        }
    }
}

static void deq_q5_1(const rw_block_q5_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += RW_QK) {
        float d = f16(b[i].d), m = f16(b[i].m);
        uint32_t qh;
        memcpy(&qh, b[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int hi0 = (int)((qh >> j) << 4 & 0x10), hi1 = (int)((qh >> (j + 12)) & 0x10);
            y[j] = (float)((b[i].qs[j] & 0xf) | hi0) * d + m;
            y[j + 16] = (float)((b[i].qs[j] >> 4) | hi1) * d + m;
        }
    }
}

static void deq_q8_0(const rw_block_q8_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += RW_QK) {
        float d = f16(b[i].d);
        for (int j = 0; j < RW_QK; j++) y[j] = (float)b[i].qs[j] * d;
    }
}

static void deq_q8_1(const rw_block_q8_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += RW_QK) {
        float d = f16(b[i].d);
        for (int j = 0; j < RW_QK; j++) y[j] = (float)b[i].qs[j] * d;
    }
}

static void deq_q2_K(const rw_block_q2_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = f16(b[i].d), dmin = f16(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int n = 0; n < RW_QK_K; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    uint8_t sc = b[i].scales[is++];
                    float dl = d * (float)(sc & 0xf), ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
                }
            }
            q += 32;
        }
    }
}

/* Unpacks Q3_K's 16 6-bit scales (stored in 12 bytes) to signed values. */
static void q3_k_scales(const uint8_t packed[12], int8_t out[16]) {
    for (int j = 0; j < 16; j++) {
        int low = j < 8 ? (packed[j] & 0xf) : (packed[j - 8] >> 4);
        int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (int8_t)((low | high << 4) - 32);
    }
}

static void deq_q3_K(const rw_block_q3_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = f16(b[i].d);
        int8_t sc[16];
        q3_k_scales(b[i].scales, sc);
        const uint8_t *q = b[i].qs, *hm = b[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int n = 0; n < RW_QK_K; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    float dl = d * (float)sc[is++];
                    for (int l = 0; l < 16; l++) {
                        int k = l + 16 * half;
                        *y++ = dl * (float)(((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
                    }
                }
                m <<= 1;
            }
            q += 32;
        }
    }
}

/* The j-th 6-bit scale and min of Q4_K/Q5_K's 12-byte packing. */
static void k4_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

void rw_k4_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m) { k4_scale_min(j, q, d, m); }

static void deq_q4_K(const rw_block_q4_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = f16(b[i].d), dmin = f16(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int j = 0; j < 8; j += 2, q += 32) {
            uint8_t sc, m;
            k4_scale_min(j, b[i].scales, &sc, &m);
            float d1 = d * sc, m1 = dmin * m;
            k4_scale_min(j + 1, b[i].scales, &sc, &m);
            float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xf) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

static void deq_q5_K(const rw_block_q5_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = f16(b[i].d), dmin = f16(b[i].dmin);
        const uint8_t *ql = b[i].qs, *qh = b[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 8; j += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            k4_scale_min(j, b[i].scales, &sc, &m);
            float d1 = d * sc, m1 = dmin * m;
            k4_scale_min(j + 1, b[i].scales, &sc, &m);
            float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

static void deq_q6_K(const rw_block_q6_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = f16(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int n = 0; n < RW_QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
                int q2 = ((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
                int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

static void deq_q8_K(const rw_block_q8_K *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++)
        for (int j = 0; j < RW_QK_K; j++) *y++ = b[i].d * (float)b[i].qs[j];
}

static void deq_iq4_nl(const rw_block_iq4_nl *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += RW_QK) {
        float d = f16(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)kvalues_iq4nl[b[i].qs[j] & 0xf];
            y[j + 16] = d * (float)kvalues_iq4nl[b[i].qs[j] >> 4];
        }
    }
}

static void deq_iq4_xs(const rw_block_iq4_xs *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = f16(b[i].d);
        const uint8_t *qs = b[i].qs;
        for (int ib = 0; ib < RW_QK_K / 32; ib++, y += 32, qs += 16) {
            int ls = ((b[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b[i].scales_h >> 2 * ib) & 3) << 4);
            float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * (float)kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

/* A base-3 digit packed as ggml's TQ1_0 packs it: digit n of byte q. */
static float tq1_digit(uint8_t q, int n, float d) {
    static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
    uint8_t v = (uint8_t)(q * pow3[n]);
    int xi = ((uint16_t)v * 3) >> 8;
    return (float)(xi - 1) * d;
}

static void deq_tq1_0(const rw_block_tq1_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = f16(b[i].d);
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 32; m++) *y++ = tq1_digit(b[i].qs[m], n, d);
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 16; m++) *y++ = tq1_digit(b[i].qs[32 + m], n, d);
        for (int n = 0; n < 4; n++)
            for (int j = 0; j < 4; j++) *y++ = tq1_digit(b[i].qh[j], n, d);
    }
}

static void deq_tq2_0(const rw_block_tq2_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        float d = f16(b[i].d);
        for (int j = 0; j < 64; j += 32)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++) *y++ = (float)(((b[i].qs[j + m] >> (l * 2)) & 3) - 1) * d;
    }
}

/* E8M0 scale halved (the table holds doubled e2m1 values): 2^(e-128). */
static float e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void deq_mxfp4(const rw_block_mxfp4 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += RW_QK) {
        float d = e8m0_half(b[i].e);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)kvalues_mxfp4[b[i].qs[j] & 0xf] * d;
            y[j + 16] = (float)kvalues_mxfp4[b[i].qs[j] >> 4] * d;
        }
    }
}

bool rw_can_dequantize(rw_dtype t) {
    switch (t) {
    case RW_TYPE_F32: case RW_TYPE_F16: case RW_TYPE_BF16: case RW_TYPE_Q4_0: case RW_TYPE_Q4_1: case RW_TYPE_Q5_0:
    case RW_TYPE_Q5_1: case RW_TYPE_Q8_0: case RW_TYPE_Q8_1: case RW_TYPE_Q2_K: case RW_TYPE_Q3_K: case RW_TYPE_Q4_K:
    case RW_TYPE_Q5_K: case RW_TYPE_Q6_K: case RW_TYPE_Q8_K: case RW_TYPE_IQ4_NL: case RW_TYPE_IQ4_XS:
    case RW_TYPE_TQ1_0: case RW_TYPE_TQ2_0: case RW_TYPE_MXFP4:
        return true;
    default: return false;
    }
}

rw_status rw_dequantize_row(rw_dtype t, const void *src, float *dst, int64_t n) {
    if (!rw_can_dequantize(t)) return RW_ERR_UNSUPPORTED;
    int64_t bs = (int64_t)rw_dtype_block_size(t);
    if (n < 0 || n % bs != 0) return RW_ERR_INVALID_ARG;
    int64_t nb = n / bs;
    switch (t) {
    case RW_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case RW_TYPE_F16: {
        const uint8_t *p = src;
        for (int64_t i = 0; i < n; i++) {
            rw_f16 h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = rw_f16_to_f32(h);
        }
        break;
    }
    case RW_TYPE_BF16: {
        const uint8_t *p = src;
        for (int64_t i = 0; i < n; i++) {
            rw_bf16 h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = rw_bf16_to_f32(h);
        }
        break;
    }
    case RW_TYPE_Q4_0: deq_q4_0(src, dst, nb); break;
    case RW_TYPE_Q4_1: deq_q4_1(src, dst, nb); break;
    case RW_TYPE_Q5_0: deq_q5_0(src, dst, nb); break;
    case RW_TYPE_Q5_1: deq_q5_1(src, dst, nb); break;
    case RW_TYPE_Q8_0: deq_q8_0(src, dst, nb); break;
    case RW_TYPE_Q8_1: deq_q8_1(src, dst, nb); break;
    case RW_TYPE_Q2_K: deq_q2_K(src, dst, nb); break;
    case RW_TYPE_Q3_K: deq_q3_K(src, dst, nb); break;
    case RW_TYPE_Q4_K: deq_q4_K(src, dst, nb); break;
    case RW_TYPE_Q5_K: deq_q5_K(src, dst, nb); break;
    case RW_TYPE_Q6_K: deq_q6_K(src, dst, nb); break;
    case RW_TYPE_Q8_K: deq_q8_K(src, dst, nb); break;
    case RW_TYPE_IQ4_NL: deq_iq4_nl(src, dst, nb); break;
    case RW_TYPE_IQ4_XS: deq_iq4_xs(src, dst, nb); break;
    case RW_TYPE_TQ1_0: deq_tq1_0(src, dst, nb); break;
    case RW_TYPE_TQ2_0: deq_tq2_0(src, dst, nb); break;
    case RW_TYPE_MXFP4: deq_mxfp4(src, dst, nb); break;
    default: return RW_ERR_UNSUPPORTED;
    }
    return RW_OK;
}
