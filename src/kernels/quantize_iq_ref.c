/* quantize_iq_ref.c - f32 to the 4-bit table types: IQ4_NL (blocks of 32
 * values, one f16 scale, and 4-bit indices into a fixed non-uniform table of
 * 16 levels), IQ4_XS (the same blocks, with 6-bit block scales under one f16
 * scale per 256 values) and MXFP4 (see the end of the file).
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
static void fit(const float *x, const float *w, float id, float *sumqx, float *sumq2) {
    float sqx = 0, sq2 = 0;
    for (int j = 0; j < RW_QK; j++) {
        int l = nearest_level(id * x[j]);
        float q = iq4nl_levels[l];
        sqx += w[j] * q * x[j];
        sq2 += w[j] * q * q;
    }
    *sumqx = sqx;
    *sumq2 = sq2;
}

/* The best f32 scale for one block of 32 values weighted by w (0 for an
 * all-zero block). */
static float iq4_block_scale(const float *x, const float *w) {
    float amax = 0, max = 0;
    for (int j = 0; j < RW_QK; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (amax < IQ4_EPS) return 0;
    float d = -max / iq4nl_levels[0], sumqx, sumq2;
    fit(x, w, 1 / d, &sumqx, &sumq2);
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx; /* weighted error reduction of scale d */
    for (int t = -IQ4_NTRY; t <= IQ4_NTRY; t++) {
        fit(x, w, (float)(t + iq4nl_levels[0]) / max, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* The weights of n values of a (super-)block of sbs: x^2 without an
 * importance matrix, else qw * sqrt(sigma2 + x^2) with sigma2 twice the
 * super-block's mean square (ggml's choice). */
static void iq4_weights(const float *x, const float *xs, int sbs, const float *qw, float *w, int n) {
    if (!qw) {
        for (int j = 0; j < n; j++) w[j] = x[j] * x[j];
        return;
    }
    float sigma2 = 0;
    for (int j = 0; j < sbs; j++) sigma2 += xs[j] * xs[j];
    sigma2 *= 2.f / (float)sbs;
    for (int j = 0; j < n; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* Packs 32 indices for scale d into 16 bytes (d == 0 gives index 8, the
 * level nearest 0, everywhere, as ggml). */
static void iq4_pack(const float *x, float d, uint8_t qs[RW_QK / 2]) {
    float id = d ? 1 / d : 0;
    for (int j = 0; j < RW_QK / 2; j++)
        qs[j] = (uint8_t)(nearest_level(id * x[j]) | nearest_level(id * x[j + RW_QK / 2]) << 4);
}

static void iq4_nl(const float *x, rw_block_iq4_nl *y, int64_t nb, const float *qw) {
    float w[RW_QK];
    for (int64_t i = 0; i < nb; i++, x += RW_QK) {
        iq4_weights(x, x, RW_QK, qw ? qw + i * RW_QK : NULL, w, RW_QK);
        float d = iq4_block_scale(x, w);
        y[i].d = rw_f32_to_f16(d);
        iq4_pack(x, d, y[i].qs);
    }
}

void rw_quantize_iq4_nl_ref(const float *x, rw_block_iq4_nl *y, int64_t nb) { iq4_nl(x, y, nb, NULL); }
void rw_quantize_iq4_nl_weighted(const float *x, rw_block_iq4_nl *y, int64_t nb, const float *qw) {
    iq4_nl(x, y, nb, qw);
}

/* IQ4_XS: 8 blocks of 32 per super-block, each block scale stored as a
 * signed 6-bit multiple of one F16 super-scale d = -(block scale of largest
 * magnitude) / 32; indices are chosen for the f32 product d * l. */
static void iq4_xs(const float *x, rw_block_iq4_xs *y, int64_t nb, const float *qw) {
    float scales[RW_QK_K / RW_QK], w[RW_QK];
    for (int64_t i = 0; i < nb; i++, x += RW_QK_K) {
        float max_scale = 0, amax_scale = 0;
        for (int ib = 0; ib < RW_QK_K / RW_QK; ib++) {
            iq4_weights(x + RW_QK * ib, x, RW_QK_K, qw ? qw + i * RW_QK_K + RW_QK * ib : NULL, w, RW_QK);
            scales[ib] = iq4_block_scale(x + RW_QK * ib, w);
            if (fabsf(scales[ib]) > amax_scale) {
                amax_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        float d = -max_scale / 32, id = d ? 1 / d : 0;
        y[i].d = rw_f32_to_f16(d);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof y[i].scales_l);
        for (int ib = 0; ib < RW_QK_K / RW_QK; ib++) {
            int l = rw_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            iq4_pack(x + RW_QK * ib, d * (float)l, y[i].qs + 16 * ib);
            l += 32;
            y[i].scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4 * (ib % 2));
            y[i].scales_h |= (uint16_t)((l >> 4) << 2 * ib);
        }
    }
}

void rw_quantize_iq4_xs_ref(const float *x, rw_block_iq4_xs *y, int64_t nb) { iq4_xs(x, y, nb, NULL); }
void rw_quantize_iq4_xs_weighted(const float *x, rw_block_iq4_xs *y, int64_t nb, const float *qw) {
    iq4_xs(x, y, nb, qw);
}

/* MXFP4: blocks of 32 FP4 (E2M1) values under a power-of-two scale stored as
 * a biased exponent e (E8M0). As ggml, the table holds the E2M1 values doubled
 * (0..12) and the scale used is d = 2^(e-128); with e = floor(log2(amax)) - 2
 * + 127, amax / d lies in [8, 16), so values beyond 12 d clip to 12 d (ggml's
 * choice, kept for identical files). Each value takes the nearest table
 * entry, the first one on a tie. */
static const int8_t mxfp4_levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float e8m0_half(uint8_t e) { /* 2^(e-128), subnormal for e < 2 */
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The first of the 16 levels nearest x (ggml's search). Only the levels of
 * x's sign can be nearer than level 0 (the other side's are further by
 * their size), and -0 (index 8) only ties with it and comes later: so half
 * the search, the same index. */
static int nearest_mxfp4(float x, float d) {
    int best = 0;
    float best_err = fabsf(mxfp4_levels[0] * d - x);
    for (int i = x >= 0 ? 1 : 9, end = x >= 0 ? 8 : 16; i < end; i++) {
        float err = fabsf(mxfp4_levels[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

void rw_quantize_mxfp4_ref(const float *x, rw_block_mxfp4 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += RW_QK) {
        float amax = 0;
        for (int j = 0; j < RW_QK; j++) { /* fmaxf's result (a NaN never wins), without its call */
            const float a = fabsf(x[j]);
            if (a > amax) amax = a;
        }
        /* clamped to 0..254: ggml casts a negative exponent (amax < 2^-125),
         * or that of an infinite value, to uint8_t, which is undefined
         * behaviour in C */
        float e = amax > 0 ? floorf(log2f(amax)) - 2 + 127 : 0;
        y[i].e = (uint8_t)(e > 0 ? (e < 254 ? e : 254) : 0);
        float d = e8m0_half(y[i].e);
        for (int j = 0; j < RW_QK / 2; j++)
            y[i].qs[j] = (uint8_t)(nearest_mxfp4(x[j], d) | nearest_mxfp4(x[j + RW_QK / 2], d) << 4);
    }
}
