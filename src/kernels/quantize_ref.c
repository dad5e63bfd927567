/* quantize_ref.c - f32 to the 32-block types, F16/BF16 and the activation
 * formats Q8_0/Q8_1/Q8_K: plain C references following ggml's reference
 * quantizers value for value (the zoo test checks that they give the same
 * bytes as llama-quantize). The K-quants are in quantize_k_ref.c. */
#include <math.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/quant_int.h"

static void q8_0(const float *x, rw_block_q8_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK) {
        float amax = 0;
        for (int j = 0; j < RW_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.f, id = d ? 1.0f / d : 0.0f;
        y[i].d = rw_f32_to_f16(d);
        for (int j = 0; j < RW_QK; j++) y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

static void q8_1(const float *x, rw_block_q8_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK) {
        float amax = 0;
        for (int j = 0; j < RW_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.f, id = d ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < RW_QK; j++) {
            y[i].qs[j] = (int8_t)roundf(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].d = rw_f32_to_f16(d);
        y[i].s = rw_f32_to_f16((float)sum * d);
    }
}

static void q8_K(const float *x, rw_block_q8_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < RW_QK_K; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -127.f / max;
        for (int j = 0; j < RW_QK_K; j++) {
            int v = rw_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < RW_QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += y[i].qs[16 * g + j];
            y[i].bsums[g] = (int16_t)s;
        }
        y[i].d = 1 / iscale;
    }
}

/* Activation rows as ggml's x86 build quantizes them for its vec-dots
 * (quantize_row_q8_0 / q8_1 in its AVX2 code, which its AVX-512 builds use
 * too): the inverse scale is 127/amax (not 1/d) and products round to
 * nearest even. It differs from the reference quantizer above (used for
 * weights, as llama-quantize) in the last bit of some quants; every matmul
 * tier quantizes activations this way, so that they equal llama.cpp's. */
/* One block: the quants into qs, the f32 scale d returned, the sum of the
 * quants in *sum. */
static float act_block(const float *x, int8_t qs[RW_QK], int *sum) {
    float amax = 0;
    for (int j = 0; j < RW_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    *sum = 0;
    for (int j = 0; j < RW_QK; j++) {
        qs[j] = (int8_t)rw_nearest_int(x[j] * id);
        *sum += qs[j];
    }
    return amax / 127.f;
}

void rw_quantize_act_q8_0(const float *x, rw_block_q8_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK) {
        int sum;
        y[i].d = rw_f32_to_f16(act_block(x, y[i].qs, &sum));
    }
}

void rw_quantize_act_q8_1(const float *x, rw_block_q8_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK) {
        int sum;
        const float d = act_block(x, y[i].qs, &sum);
        y[i].d = rw_f32_to_f16(d);
        y[i].s = rw_f32_to_f16(d * (float)sum);
    }
}

/* The value of largest magnitude, with its sign. */
static float signed_absmax(const float *x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void q4_0(const float *x, rw_block_q4_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK) {
        float d = signed_absmax(x, RW_QK) / -8, id = d ? 1.0f / d : 0.0f;
        y[i].d = rw_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            int a = (int8_t)(x[j] * id + 8.5f), b = (int8_t)(x[j + 16] * id + 8.5f);
            a = a < 15 ? a : 15;
            b = b < 15 ? b : 15;
            y[i].qs[j] = (uint8_t)(a | b << 4);
        }
    }
}

static void q4_1(const float *x, rw_block_q4_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK) {
        float min = INFINITY, max = -INFINITY;
        for (int j = 0; j < RW_QK; j++) {
            min = fminf(min, x[j]);
            max = fmaxf(max, x[j]);
        }
        float d = (max - min) / 15, id = d ? 1.0f / d : 0.0f;
        y[i].d = rw_f32_to_f16(d);
        y[i].m = rw_f32_to_f16(min);
        for (int j = 0; j < 16; j++) {
            int a = (int8_t)((x[j] - min) * id + 0.5f), b = (int8_t)((x[j + 16] - min) * id + 0.5f);
            a = a < 15 ? a : 15;
            b = b < 15 ? b : 15;
            y[i].qs[j] = (uint8_t)(a | b << 4);
        }
    }
}

static void q5_0(const float *x, rw_block_q5_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK) {
        float d = signed_absmax(x, RW_QK) / -16, id = d ? 1.0f / d : 0.0f;
        y[i].d = rw_f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int a = (int8_t)(x[j] * id + 16.5f), b = (int8_t)(x[j + 16] * id + 16.5f);
            a = a < 31 ? a : 31;
            b = b < 31 ? b : 31;
            y[i].qs[j] = (uint8_t)((a & 0xf) | (b & 0xf) << 4);
            qh |= (uint32_t)((a & 0x10) >> 4) << j;
            qh |= (uint32_t)((b & 0x10) >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

static void q5_1(const float *x, rw_block_q5_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK) {
        float min = INFINITY, max = -INFINITY;
        for (int j = 0; j < RW_QK; j++) {
            min = fminf(min, x[j]);
            max = fmaxf(max, x[j]);
        }
        float d = (max - min) / 31, id = d ? 1.0f / d : 0.0f;
        y[i].d = rw_f32_to_f16(d);
        y[i].m = rw_f32_to_f16(min);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int a = (uint8_t)((x[j] - min) * id + 0.5f), b = (uint8_t)((x[j + 16] - min) * id + 0.5f);
            y[i].qs[j] = (uint8_t)((a & 0xf) | (b & 0xf) << 4);
            qh |= (uint32_t)((a & 0x10) >> 4) << j;
            qh |= (uint32_t)((b & 0x10) >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

bool rw_can_quantize(rw_dtype t) {
    switch (t) {
    case RW_TYPE_F32: case RW_TYPE_F16: case RW_TYPE_BF16: case RW_TYPE_Q8_0: case RW_TYPE_Q8_1: case RW_TYPE_Q8_K:
    case RW_TYPE_Q4_0: case RW_TYPE_Q4_1: case RW_TYPE_Q5_0: case RW_TYPE_Q5_1: case RW_TYPE_Q4_K: case RW_TYPE_Q5_K:
    case RW_TYPE_Q6_K: case RW_TYPE_Q2_K: case RW_TYPE_Q3_K: case RW_TYPE_IQ4_NL: case RW_TYPE_IQ4_XS:
    case RW_TYPE_TQ1_0: case RW_TYPE_TQ2_0: case RW_TYPE_MXFP4:
        return true;
    default: return false;
    }
}

rw_status rw_quantize_row(rw_dtype t, const float *src, void *dst, int64_t n) {
    if (!rw_can_quantize(t)) return RW_ERR_UNSUPPORTED;
    int64_t bs = (int64_t)rw_dtype_block_size(t);
    if (n < 0 || n % bs != 0) return RW_ERR_INVALID_ARG;
    int64_t nb = n / bs;
    /* The K-quants' AVX-512 versions give the same bytes, in a fraction of
     * the time (their search dominates writing a K-quant file). */
#if defined(__x86_64__)
    const bool avx512 = rw_kernel_tier_is_avx512(rw_kernel_tier_current());
#else /* not built off x86-64 */
#define rw_quantize_q4_K_avx512 rw_quantize_q4_K_ref
#define rw_quantize_q5_K_avx512 rw_quantize_q5_K_ref
#define rw_quantize_q6_K_avx512 rw_quantize_q6_K_ref
    const bool avx512 = false;
#endif
    switch (t) {
    case RW_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case RW_TYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            rw_f16 h = rw_f32_to_f16(src[i]);
            memcpy((uint8_t *)dst + 2 * i, &h, 2);
        }
        break;
    case RW_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            rw_bf16 h = rw_f32_to_bf16(src[i]);
            memcpy((uint8_t *)dst + 2 * i, &h, 2);
        }
        break;
    case RW_TYPE_Q8_0: q8_0(src, dst, nb); break;
    case RW_TYPE_Q8_1: q8_1(src, dst, nb); break;
    case RW_TYPE_Q8_K: q8_K(src, dst, nb); break;
    case RW_TYPE_Q4_0: q4_0(src, dst, nb); break;
    case RW_TYPE_Q4_1: q4_1(src, dst, nb); break;
    case RW_TYPE_Q5_0: q5_0(src, dst, nb); break;
    case RW_TYPE_Q5_1: q5_1(src, dst, nb); break;
    case RW_TYPE_Q4_K: (avx512 ? rw_quantize_q4_K_avx512 : rw_quantize_q4_K_ref)(src, dst, nb); break;
    case RW_TYPE_Q5_K: (avx512 ? rw_quantize_q5_K_avx512 : rw_quantize_q5_K_ref)(src, dst, nb); break;
    case RW_TYPE_Q6_K: (avx512 ? rw_quantize_q6_K_avx512 : rw_quantize_q6_K_ref)(src, dst, nb); break;
    case RW_TYPE_Q2_K: rw_quantize_q2_K_ref(src, dst, nb); break;
    case RW_TYPE_Q3_K: rw_quantize_q3_K_ref(src, dst, nb); break;
    case RW_TYPE_IQ4_NL: rw_quantize_iq4_nl_ref(src, dst, nb); break;
    case RW_TYPE_IQ4_XS: rw_quantize_iq4_xs_ref(src, dst, nb); break;
    case RW_TYPE_TQ1_0: rw_quantize_tq1_0_ref(src, dst, nb); break;
    case RW_TYPE_TQ2_0: rw_quantize_tq2_0_ref(src, dst, nb); break;
    case RW_TYPE_MXFP4: rw_quantize_mxfp4_ref(src, dst, nb); break;
    default: return RW_ERR_UNSUPPORTED;
    }
    return RW_OK;
}
