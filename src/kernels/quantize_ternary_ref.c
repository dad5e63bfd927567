/* quantize_ternary_ref.c - f32 to the ternary types TQ1_0 and TQ2_0: every
 * value becomes -1, 0 or +1 times one f16 scale per 256 values, the block's
 * largest magnitude (as ggml's reference quantizers; lroundf, so a value
 * exactly halfway goes away from zero).
 *
 * TQ2_0 stores each trit + 1 in 2 bits, value m + 32*n of a 128-value half in
 * bits 2n of byte m. TQ1_0 packs 5 trits per byte as a base-3 fraction: the
 * number t (first trit most significant, 0..242) is stored as
 * ceil(t * 256 / 243), so that multiplying by 3^k and keeping the top bits of
 * the byte times 3 decodes trit k. Bytes 0..31 hold values m + 32*n of the
 * first 160, bytes 32..47 values m + 16*n of the next 80, and the 4 qh bytes
 * 4 trits each (values j + 4*m of the last 16), shifted up one trit. */
#include <math.h>

#include "kernels/quant_int.h"

/* The trit of x for inverse scale id, as 0, 1 or 2. */
static int trit(float x, float id) { return (int)lroundf(x * id) + 1; }

static float absmax(const float *x, int n) {
    float amax = 0;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    return amax;
}

/* Packs n_trits trits (the first most significant) of x[0], x[stride], ...
 * into one byte as ceil(t * 256 / 243) with t padded to 5 trits. */
static uint8_t pack_trits(const float *x, int stride, int n_trits, float id) {
    unsigned t = 0;
    for (int k = 0; k < n_trits; k++) t = t * 3 + (unsigned)trit(x[k * stride], id);
    for (int k = n_trits; k < 5; k++) t *= 3;
    return (uint8_t)((t * 256 + 242) / 243);
}

void rw_quantize_tq1_0_ref(const float *x, rw_block_tq1_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K) {
        float d = absmax(x, RW_QK_K), id = d ? 1.0f / d : 0.0f;
        y[i].d = rw_f32_to_f16(d);
        for (int m = 0; m < 32; m++) y[i].qs[m] = pack_trits(x + m, 32, 5, id);
        for (int m = 0; m < 16; m++) y[i].qs[32 + m] = pack_trits(x + 160 + m, 16, 5, id);
        for (int j = 0; j < 4; j++) y[i].qh[j] = pack_trits(x + 240 + j, 4, 4, id);
    }
}

void rw_quantize_tq2_0_ref(const float *x, rw_block_tq2_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K) {
        float d = absmax(x, RW_QK_K), id = d ? 1.0f / d : 0.0f;
        y[i].d = rw_f32_to_f16(d);
        for (int half = 0; half < 2; half++)
            for (int m = 0; m < 32; m++) {
                unsigned q = 0;
                for (int n = 0; n < 4; n++) q |= (unsigned)(trit(x[128 * half + m + 32 * n], id) & 3) << (2 * n);
                y[i].qs[32 * half + m] = (uint8_t)q;
            }
    }
}
