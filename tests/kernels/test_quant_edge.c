/* test_quant_edge.c - quantize -> dequantize round trips on awkward inputs,
 * for every type rw_quantize_row supports: values at scales from tiny to the
 * top of the f16 range, a lone outlier in a block of tiny values, values whose
 * scale underflows f16 (must give zeros, never NaN), and row lengths that are
 * not a multiple of the block size. Needs no fixtures. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/quant.h"

#define N 512

/* Largest allowed |y - x|_rms / |x|_rms for values uniform in [-s, s]. */
static double rel_bound(rw_dtype t) {
    switch (t) {
    case RW_TYPE_F32: return 0;
    case RW_TYPE_F16: return 1e-3;
    case RW_TYPE_BF16: return 5e-3;
    case RW_TYPE_Q8_0: case RW_TYPE_Q8_1: case RW_TYPE_Q8_K: case RW_TYPE_Q6_K: return 0.03;
    case RW_TYPE_Q5_0: case RW_TYPE_Q5_1: case RW_TYPE_Q5_K: return 0.06;
    case RW_TYPE_Q4_0: case RW_TYPE_Q4_1: case RW_TYPE_Q4_K: case RW_TYPE_IQ4_NL: case RW_TYPE_IQ4_XS: return 0.12;
    case RW_TYPE_Q3_K: case RW_TYPE_MXFP4: return 0.25;
    case RW_TYPE_Q2_K: return 0.5;
    case RW_TYPE_TQ1_0: case RW_TYPE_TQ2_0: return 0.6; /* 3 levels for uniform values */
    default: return 0.5;
    }
}

static uint32_t rng = 12345;
static float uniform(void) { /* in [-1, 1) */
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 23) - 1.0f;
}

static double round_trip(rw_dtype t, const float *x, float *y, bool *finite) {
    static uint8_t buf[N * 4 + 1024];
    CHECK(rw_quantize_row(t, x, buf, N) == RW_OK);
    CHECK(rw_dequantize_row(t, buf, y, N) == RW_OK);
    double se = 0, ss = 0;
    *finite = true;
    for (int i = 0; i < N; i++) {
        if (!isfinite(y[i])) *finite = false;
        se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        ss += (double)x[i] * x[i];
    }
    return ss > 0 ? sqrt(se / ss) : sqrt(se);
}

static void check_type(rw_dtype t) {
    const char *name = rw_dtype_name(t);
    float x[N], y[N];
    bool finite;
    /* f16 keeps ~3e-5 .. 6.5e4 with full precision: block scales of every
     * type with f16 scales stay normal for these value ranges */
    const float scales[] = {1e-2f, 1.0f, 100.0f, 3e4f};
    for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
        for (int i = 0; i < N; i++) x[i] = scales[s] * uniform();
        double rel = round_trip(t, x, y, &finite);
        CHECK_MSG(finite && rel <= rel_bound(t), "%s: values of scale %g: relative RMSE %g (bound %g), finite %d", name,
                  scales[s], rel, rel_bound(t), finite);
    }
    /* a lone outlier: the other values of its block may vanish, but the
     * outlier itself must come back within the type's step */
    for (int i = 0; i < N; i++) x[i] = 1e-3f * uniform();
    x[77] = 1000.0f;
    x[300] = -1000.0f;
    round_trip(t, x, y, &finite);
    CHECK_MSG(finite, "%s: outlier row has a non-finite value", name);
    CHECK_MSG(fabsf(y[77] - 1000.0f) <= 1000.0f * rel_bound(t) * 2 && fabsf(y[300] + 1000.0f) <= 1000.0f * rel_bound(t) * 2,
              "%s: outliers come back as %g and %g", name, y[77], y[300]);
    /* values so small that an f16 scale underflows: zeros (or the values, for
     * types that keep them), never NaN or Inf, never larger than the input */
    for (int i = 0; i < N; i++) x[i] = 1e-30f * uniform();
    round_trip(t, x, y, &finite);
    CHECK_MSG(finite, "%s: tiny values give a non-finite value", name);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += !(fabsf(y[i]) <= 2e-30f);
    CHECK_MSG(bad == 0, "%s: %d tiny values come back larger", name, bad);
    /* negative constant and all-zero rows */
    /* MXFP4's power-of-two scale puts -2.5 exactly between -2 and -3 */
    float const_tol = t == RW_TYPE_MXFP4 ? 0.5f : 0.1f;
    for (int i = 0; i < N; i++) x[i] = -2.5f;
    round_trip(t, x, y, &finite);
    bad = 0;
    for (int i = 0; i < N; i++) bad += !(fabsf(y[i] + 2.5f) <= const_tol);
    CHECK_MSG(bad == 0, "%s: constant -2.5 comes back as %g (%d values off)", name, y[0], bad);
    memset(x, 0, sizeof x);
    round_trip(t, x, y, &finite);
    bad = 0;
    for (int i = 0; i < N; i++) bad += y[i] != 0;
    CHECK_MSG(bad == 0, "%s: zeros come back as %g (%d values off)", name, y[0], bad);
    /* lengths that are not a multiple of the block size */
    size_t bs = rw_dtype_block_size(t);
    if (bs > 1) {
        CHECK(rw_quantize_row(t, x, y, (int64_t)bs + 1) == RW_ERR_INVALID_ARG);
        CHECK(rw_quantize_row(t, x, y, (int64_t)bs - 1) == RW_ERR_INVALID_ARG);
        CHECK(rw_dequantize_row(t, y, x, (int64_t)bs / 2) == RW_ERR_INVALID_ARG);
    }
    CHECK(rw_quantize_row(t, x, y, -(int64_t)bs) == RW_ERR_INVALID_ARG);
    CHECK(rw_dequantize_row(t, y, x, -(int64_t)bs) == RW_ERR_INVALID_ARG);
    CHECK(rw_quantize_row(t, x, y, 0) == RW_OK);
}

int main(void) {
    int n = 0;
    for (uint32_t id = 0; id < RW_TYPE_COUNT; id++) {
        if (!rw_dtype_valid(id) || !rw_can_quantize((rw_dtype)id)) continue;
        CHECK_MSG(rw_can_dequantize((rw_dtype)id), "%s quantizes but does not dequantize", rw_dtype_name((rw_dtype)id));
        check_type((rw_dtype)id);
        n++;
    }
    printf("%d types checked\n", n);
    CHECK(n >= 20);
    /* f16/bf16 conversion edges */
    CHECK(rw_f16_to_f32(0x0001) == 0x1p-24f && rw_f16_to_f32(0x03ff) == 0x3ffp-24f);
    CHECK(rw_f32_to_f16(0x1p-24f) == 0x0001 && rw_f32_to_f16(-0x1p-24f) == 0x8001);
    CHECK(rw_f32_to_f16(0x1p-14f) == 0x0400 && rw_f32_to_f16(0x3ffp-24f) == 0x03ff);
    CHECK(rw_f32_to_f16(65520.f) == 0x7c00 && rw_f32_to_f16(65519.f) == 0x7bff); /* 65520 is the tie to Inf */
    CHECK(rw_f32_to_f16(INFINITY) == 0x7c00 && rw_f32_to_f16(-INFINITY) == 0xfc00);
    CHECK(rw_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00 && rw_f32_to_f16(1.0f + 0x3p-11f) == 0x3c02); /* ties to even */
    CHECK(rw_f32_to_bf16(0x1p-130f) == 0x0008 && rw_bf16_to_f32(0x0001) == 0x1p-133f);
    CHECK(rw_f32_to_bf16(3.0e38f) == 0x7f62 && rw_f32_to_bf16(INFINITY) == 0x7f80);
    CHECK(rw_f32_to_bf16(0x1.01p0f) == 0x3f80 && rw_f32_to_bf16(0x1.03p0f) == 0x3f82); /* ties to even */
    uint32_t snan_bits = 0x7f800001u; /* a NaN whose payload is only in the low bits stays NaN */
    float snan;
    memcpy(&snan, &snan_bits, 4);
    CHECK(isnan(rw_bf16_to_f32(rw_f32_to_bf16(snan))) && isnan(rw_f16_to_f32(rw_f32_to_f16(snan))));
    return rw_test_done();
}
