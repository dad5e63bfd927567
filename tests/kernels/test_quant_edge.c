/* test_quant_edge.c - quantize -> dequantize round trips on awkward inputs,
 * for every type rw_quantize_row supports: values at scales from tiny to the
 * top of the f16 range, a lone outlier in a block of tiny values, values whose
 * scale underflows f16 (must give zeros, never NaN), and row lengths that are
 * not a multiple of the block size. Needs no fixtures. */
#include <math.h>
#include <stdio.h>
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

/* A Q4_K super-block (BF16 values of a synthesized qwen35-0.8b's
 * blk.1.ffn_up.weight) where the fit's error sum decides between two nearly
 * equal candidates: the bytes are ggml's quantize_row_q4_K_ref's (llama.cpp's
 * llama-quantize wrote them), which it gets only with the weighted error in
 * ggml's order, w * (diff * diff). */
static const uint16_t Q4_K_TIE_BF16[256] = {
    0x3d27, 0x39bc, 0xbb27, 0x3d56, 0xbc53, 0x3bf2, 0x3cad, 0x3a12, 0xbb3c, 0x3b98, 0x3c48, 0xbd07, 0xbd2a, 0xbd5b,
    0x3d4d, 0x3cc6, 0x3cec, 0x3c5e, 0xbd3d, 0x3cdf, 0x3d45, 0x3b63, 0x3c19, 0x3d02, 0xbd58, 0xbc69, 0xbc6a, 0xbbf0,
    0xbd45, 0xbce9, 0xbd0f, 0x3d15, 0x3cfd, 0xbd0e, 0xbbe3, 0x3ca4, 0x3cd1, 0x3aa5, 0xbc8b, 0x3d42, 0x3d21, 0x3d48,
    0xbaa9, 0xbd13, 0x3d5b, 0xbc81, 0xbd0a, 0x3d5a, 0xbcb8, 0xbd21, 0xbd16, 0xbcd5, 0x3c68, 0xbc88, 0xbc85, 0xbc1c,
    0xbd27, 0x3d2a, 0xbb1a, 0xbc1c, 0xbcf2, 0x3d46, 0x3cc6, 0xbc88, 0x3ce1, 0x3d40, 0x3b15, 0x3cfc, 0xbc75, 0x3d58,
    0x3b94, 0xbd40, 0xbc8a, 0x3d2d, 0xbca6, 0x3d0d, 0xbd11, 0xbd41, 0x3d02, 0x3d51, 0xbd0e, 0x3d01, 0xbc59, 0x3c83,
    0x3d2a, 0xbd2c, 0x3cb5, 0x3d41, 0xbd35, 0xbd57, 0x3d1d, 0xbd1f, 0xbcd7, 0x3b8f, 0xbb3b, 0xbd45, 0xbc85, 0xbd2b,
    0x3c9d, 0x3c3d, 0xbd04, 0xbd33, 0xbd0b, 0xbc59, 0x3cc2, 0x3bc9, 0x3b8a, 0x3c60, 0x3b0c, 0xbd13, 0xbb3b, 0xbc25,
    0x3cb9, 0x3d52, 0x3d26, 0xbc86, 0xbd59, 0x3d31, 0x3cdb, 0xbc98, 0xbc0c, 0x3d05, 0xbcec, 0xbd4a, 0xbcd0, 0x3d16,
    0xbcdb, 0xbb0f, 0x3c48, 0x3d3a, 0x3d03, 0x3d1e, 0x3d2b, 0xbd55, 0x3d52, 0xbd0a, 0xbd5b, 0xbd21, 0x3d4e, 0xbd2a,
    0x3cd0, 0x3ca0, 0xbd1d, 0xbc9a, 0x3cd4, 0x3ab0, 0xbd17, 0xbac0, 0xbca8, 0xbc5e, 0x3ce1, 0x3d15, 0x3d4a, 0xbb88,
    0xbaa7, 0xbce3, 0xbcf1, 0xbd5d, 0xbcbc, 0x3caf, 0x3d56, 0x3ce8, 0xbc86, 0x3c86, 0xbd39, 0xbd54, 0xbc18, 0xbd1e,
    0xbd4f, 0x3be3, 0xbbfe, 0x3c3b, 0x3cca, 0xbd19, 0xbd54, 0x3d3f, 0x3d14, 0x3d41, 0xb9f5, 0x3c66, 0x3d0d, 0xbd1f,
    0x3d25, 0xbd14, 0x3ce3, 0xbd40, 0x3b2d, 0x3b6f, 0xbd2f, 0x3c17, 0xbc27, 0x3ce0, 0x3c2e, 0xbd36, 0xbcaa, 0xbd37,
    0x3c31, 0x3c6d, 0x3cff, 0xbbb1, 0x3d16, 0xbba4, 0x3c8b, 0x3d09, 0x3b76, 0x3ca9, 0xbd52, 0xb8c2, 0xbc0e, 0xbd35,
    0xbc76, 0xbd3f, 0x3baf, 0x3ced, 0xbd3b, 0x3c45, 0xbc4f, 0xbd05, 0x3d44, 0xbd3e, 0x3c1b, 0x3c8a, 0xbd4f, 0xbc9a,
    0x3ce8, 0xbd4f, 0xbc7e, 0x3d3a, 0x3bdc, 0xbc90, 0xbcf9, 0xbc8d, 0xbbf8, 0xbd4e, 0x3c89, 0x3ca8, 0x3c71, 0x3d5c,
    0x3d3f, 0x3d2d, 0xbcc3, 0xbd01, 0xbbf3, 0xbd2b, 0x3d4f, 0xbc5f, 0x3c30, 0xbd23, 0x3c0c, 0x3b47, 0xbcd7, 0xbcdb,
    0xbd4b, 0x3d36, 0x3cbf, 0x3d42,
};
static const char Q4_K_TIE_GGML[] =
    "5b073b13fef8fffefdeffdffcebfb98dce1857afb6794be8d7e86913f2401ffb3c0a112c9f48495c00d6665721e4a34d6b2eb8ac352f3861b5"
    "9e95ac83318c7fb3fce66a0de2cb5e71d04d1244d84781f9be5cad1e006f2300826f92bb2a02e5cbe87297c526dc2dbf178784139064bbba01"
    "55e18a5a3d576e07abad99fbe0d847316611f95d911a86833f310aebb0e5";

static void check_q4_K_tie(void) {
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = rw_bf16_to_f32(Q4_K_TIE_BF16[i]);
    uint8_t y[144];
    CHECK(rw_quantize_row(RW_TYPE_Q4_K, x, y, 256) == RW_OK);
    char hex[2 * 144 + 1];
    for (int i = 0; i < 144; i++) snprintf(hex + 2 * i, 3, "%02x", y[i]);
    CHECK_MSG(!strcmp(hex, Q4_K_TIE_GGML), "Q4_K block differs from ggml's:\n  %s\n  %s", hex, Q4_K_TIE_GGML);
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
    check_q4_K_tie();
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
