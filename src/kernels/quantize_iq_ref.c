/* quantize_iq_ref.c - f32 to IQ4_NL: blocks of 32 values, one f16 scale, and
 * 4-bit indices into a fixed non-uniform table of 16 levels.
 *
 * As ggml's reference (without an importance matrix), each value is weighted
 * by x^2 so large values are kept best. A first scale maps the block's value
 * of largest magnitude onto the table's most negative level; then 15 other
 * inverse scales around it are tried, and each gives, for its indices, the
 * weighted least-squares scale sum(w q x) / sum(w q^2). The one that lowers
 * the weighted error most is kept, and the indices are chosen again for the
 * f32 scale finally retained, so that the file matches llama-quantize (an
 * all-zero block too: scale 0 and every index 8, the level nearest 0). */
#include <math.h>
#include <string.h>

#include "kernels/quant_int.h"

#define IQ4_NTRY 7
#define IQ4_EPS 1e-15f

static const int8_t iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* Index of the level closest to v; exactly between two levels, the upper. */
static int nearest_level(float v) {
    if (v <= iq4nl_levels[0]) return 0;
    if (v >= iq4nl_levels[15]) return 15;
    int lo = 0, hi = 15; /* levels[lo] <= v < levels[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < iq4nl_levels[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - iq4nl_levels[lo] < iq4nl_levels[hi] - v ? lo : hi;
}

/* Weighted sums for the indices that inverse scale id gives. */
static void fit(const float *x, const float *w, float id, uint8_t *idx, float *sumqx, float *sumq2) {
    float sqx = 0, sq2 = 0;
    for (int j = 0; j < RW_QK; j++) {
        int l = nearest_level(id * x[j]);
        if (idx) idx[j] = (uint8_t)l;
        float q = iq4nl_levels[l];
        sqx += w[j] * q * x[j];
        sq2 += w[j] * q * q;
    }
    *sumqx = sqx;
    *sumq2 = sq2;
}

static void iq4_nl_block(const float *x, rw_block_iq4_nl *y) {
    float w[RW_QK], amax = 0, max = 0;
    for (int j = 0; j < RW_QK; j++) {
        w[j] = x[j] * x[j];
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    float d = 0, sumqx, sumq2;
    if (amax >= IQ4_EPS) { /* else scale 0: the block comes back as zeros */
        d = -max / iq4nl_levels[0];
        fit(x, w, 1 / d, NULL, &sumqx, &sumq2);
        d = sumqx / sumq2;
        float best = d * sumqx; /* weighted error reduction of scale d */
        for (int t = -IQ4_NTRY; t <= IQ4_NTRY; t++) {
            fit(x, w, (float)(t + iq4nl_levels[0]) / max, NULL, &sumqx, &sumq2);
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
    }
    y->d = rw_f32_to_f16(d);
    uint8_t idx[RW_QK];
    fit(x, w, d ? 1 / d : 0, idx, &sumqx, &sumq2);
    for (int j = 0; j < RW_QK / 2; j++) y->qs[j] = (uint8_t)(idx[j] | idx[j + RW_QK / 2] << 4);
}

void rw_quantize_iq4_nl_ref(const float *x, rw_block_iq4_nl *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) iq4_nl_block(x + i * RW_QK, &y[i]);
}
