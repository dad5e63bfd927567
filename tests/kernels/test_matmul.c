/* test_matmul.c - rw_matmul for every weight type and tier.
 *
 *   1. the reference against an independent computation: dequantized
 *      weights (rw_dequantize_row) times the exact activations, within the
 *      bound that the activation rounding allows (test_matmul_zoo.c also
 *      checks the block decoding against llama.cpp's dequantized values);
 *   2. every fast tier this CPU runs against the reference (the AVX2 tier
 *      with and without AVX-VNNI), over awkward
 *      row counts and row lengths (and one activation row against 1..65
 *      weight rows), bitwise: every tier computes the same
 *      float operations in the same order (matmul_ref.c), in every numerics
 *      mode;
 *   3. batch invariance, bitwise, in every tier: a row's output alone equals
 *      its output inside batches of 1..300 rows, at any position, gathered,
 *      grouped with another matrix (MoE) or not, with 1, 2 or 3 threads;
 *   4. argument errors.
 * Weights are random bytes with sane scales, so every quant pattern occurs.
 *
 * With RW_AMX_EMULATE=1 on a CPU without AMX (but with AVX-512 VBMI), only
 * 2 and 3 run, for the AMX tier's own types, on emulated tiles
 * (amx_emu.h): tests/kernels/test_matmul_amx_emu.sh.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "amx_emu.h"
#include "harness.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

static const rw_dtype all_types[] = {
    RW_TYPE_F32,  RW_TYPE_F16,  RW_TYPE_BF16, RW_TYPE_Q4_0, RW_TYPE_Q4_1, RW_TYPE_Q5_0,   RW_TYPE_Q5_1,   RW_TYPE_Q8_0,
    RW_TYPE_Q2_K, RW_TYPE_Q3_K, RW_TYPE_Q4_K, RW_TYPE_Q5_K, RW_TYPE_Q6_K, RW_TYPE_IQ4_NL, RW_TYPE_IQ4_XS, RW_TYPE_MXFP4,
};
#define N_TYPES (int)(sizeof all_types / sizeof all_types[0])

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float frand(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; } /* [-1, 1) */
static rw_f16 scale16(float lo, float hi) {
    float v = lo + (hi - lo) * (float)rnd() / 4294967296.0f;
    return rw_f32_to_f16(rnd() & 1 ? -v : v);
}

/* n_out rows of n_in random weights of type t (malloc'd; caller frees). */
static void *make_weights(rw_dtype t, int64_t n_out, int64_t n_in, size_t *row_bytes_out) {
    uint64_t rb;
    if (!rw_dtype_row_bytes(t, (uint64_t)n_in, &rb)) return NULL;
    uint8_t *buf = malloc(rb * (size_t)n_out);
    for (size_t i = 0; i < rb * (size_t)n_out; i++) buf[i] = (uint8_t)rnd();
    int64_t n_blocks = n_out * n_in / (int64_t)rw_dtype_block_size(t);
    for (int64_t b = 0; b < n_blocks; b++) {
        void *p = buf + (size_t)b * rw_dtype_type_size(t);
        switch (t) {
        case RW_TYPE_F32: *(float *)p = frand(); break;
        case RW_TYPE_F16: *(rw_f16 *)p = rw_f32_to_f16(frand()); break;
        case RW_TYPE_BF16: *(rw_bf16 *)p = rw_f32_to_bf16(frand()); break;
        case RW_TYPE_Q4_0: ((rw_block_q4_0 *)p)->d = scale16(0.01f, 0.1f); break;
        case RW_TYPE_Q5_0: ((rw_block_q5_0 *)p)->d = scale16(0.01f, 0.1f); break;
        case RW_TYPE_Q8_0: ((rw_block_q8_0 *)p)->d = scale16(0.001f, 0.01f); break;
        case RW_TYPE_IQ4_NL: ((rw_block_iq4_nl *)p)->d = scale16(0.001f, 0.01f); break;
        case RW_TYPE_MXFP4: ((rw_block_mxfp4 *)p)->e = (uint8_t)(116 + rnd() % 8); break; /* 2^-12 .. 2^-5 */
        case RW_TYPE_Q4_1:
            ((rw_block_q4_1 *)p)->d = scale16(0.01f, 0.1f);
            ((rw_block_q4_1 *)p)->m = scale16(0.1f, 0.5f);
            break;
        case RW_TYPE_Q5_1:
            ((rw_block_q5_1 *)p)->d = scale16(0.01f, 0.1f);
            ((rw_block_q5_1 *)p)->m = scale16(0.1f, 0.5f);
            break;
        case RW_TYPE_Q2_K:
            ((rw_block_q2_K *)p)->d = scale16(0.01f, 0.1f);
            ((rw_block_q2_K *)p)->dmin = scale16(0.01f, 0.1f);
            break;
        case RW_TYPE_Q3_K: ((rw_block_q3_K *)p)->d = scale16(0.001f, 0.01f); break;
        case RW_TYPE_Q4_K:
            ((rw_block_q4_K *)p)->d = scale16(0.001f, 0.01f);
            ((rw_block_q4_K *)p)->dmin = scale16(0.001f, 0.01f);
            break;
        case RW_TYPE_Q5_K:
            ((rw_block_q5_K *)p)->d = scale16(0.001f, 0.01f);
            ((rw_block_q5_K *)p)->dmin = scale16(0.001f, 0.01f);
            break;
        case RW_TYPE_Q6_K: ((rw_block_q6_K *)p)->d = scale16(0.0001f, 0.001f); break;
        case RW_TYPE_IQ4_XS: ((rw_block_iq4_xs *)p)->d = scale16(0.0001f, 0.001f); break;
        default: break;
        }
    }
    *row_bytes_out = (size_t)rb;
    return buf;
}

/* Activations with a few outliers (as real hidden states have). */
static float *make_x(int64_t n_rows, int64_t n_in) {
    float *x = malloc(sizeof(float) * (size_t)(n_rows * n_in));
    for (int64_t i = 0; i < n_rows * n_in; i++) x[i] = frand() * (rnd() % 50 == 0 ? 8.0f : 1.0f);
    return x;
}

static int64_t block_len(rw_dtype t) {
    size_t b = rw_dtype_block_size(rw_matmul_vec_dot_type(t));
    size_t bw = rw_dtype_block_size(t);
    return (int64_t)(b > bw ? b : bw);
}

static bool run_tier(rw_kernel_tier tier, const rw_matrix *w, const float *x, int64_t n_rows, float *y,
                     rw_threadpool *pool) {
    if (!rw_kernel_tier_set(tier)) return false;
    rw_error err;
    rw_status s = rw_matmul(w, x, w->n_in, n_rows, y, w->n_out, pool, &err);
    CHECK_MSG(s == RW_OK, "%s", err.msg);
    return s == RW_OK;
}

/* 1. reference vs dequantized weights: |ref - exact| <= rounding bound of x */
static void check_reference(rw_dtype t, bool small) {
    int64_t n_in = 2 * block_len(t) + (block_len(t) == 32 ? 32 : 0), n_out = small ? 5 : 17, n_rows = 3;
    size_t rb;
    void *wdata = make_weights(t, n_out, n_in, &rb);
    float *x = make_x(n_rows, n_in), *y = malloc(sizeof(float) * (size_t)(n_rows * n_out));
    float *wf = malloc(sizeof(float) * (size_t)n_in);
    rw_matrix w = {t, wdata, n_in, n_out, 0, NULL, NULL};
    run_tier(RW_TIER_REF, &w, x, n_rows, y, NULL);
    int64_t vb = (int64_t)rw_dtype_block_size(rw_matmul_vec_dot_type(t));
    for (int64_t o = 0; o < n_out; o++) {
        CHECK(rw_dequantize_row(t, (uint8_t *)wdata + o * rb, wf, n_in) == RW_OK);
        for (int64_t r = 0; r < n_rows; r++) {
            const float *xr = x + r * n_in;
            double exact = 0, bound = 0;
            for (int64_t b0 = 0; b0 < n_in; b0 += vb) {
                double amax = 0, sw = 0;
                for (int64_t i = b0; i < b0 + vb; i++) {
                    exact += (double)wf[i] * xr[i];
                    sw += fabs(wf[i]);
                    amax = fmax(amax, fabs(xr[i]));
                }
                /* largest rounding of one activation: half a quant step (8-bit
                 * types: amax/127 steps, Q8_0's f16 scale adds 2^-11 relative),
                 * or half an ulp for f16 / bf16 */
                double step;
                switch (t) {
                case RW_TYPE_F32: step = 0; break;
                case RW_TYPE_F16: step = amax * 0x1p-11; break;
                case RW_TYPE_BF16: step = amax * 0x1p-8; break;
                default: step = amax / 127.0 * 0.5 * (1 + 0x1p-10) + amax * 0x1p-10; break;
                }
                bound += sw * step;
            }
            double got = y[r * n_out + o];
            double slack = 1e-5 * fabs(exact) + 1e-4 * bound + 1e-6;
            CHECK_MSG(fabs(got - exact) <= bound + slack, "%s row %lld out %lld: ref %.7g exact %.7g bound %.3g",
                      rw_dtype_name(t), (long long)r, (long long)o, got, exact, bound);
        }
    }
    free(wdata), free(x), free(y), free(wf);
}

/* 2. a fast tier against the reference: bitwise (the relative difference,
 * printed with RW_TEST_VERBOSE, says how far a failing tier is off) */
static void check_fast_vs_ref(rw_kernel_tier tier, rw_dtype t, bool small, rw_threadpool *pool) {
    /* every count 1..17: the one-row tile, the quad, group and panel forms (17 and 24: two groups a call
     * where panels are not packed on the fly, test_matmul_no_panels.sh) */
    static const int64_t rows_list[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10,  11,
                                        12, 13, 14, 15, 16, 17, 24, 31, 33, 255, 257};
    int64_t bl = block_len(t);
    /* one length that is a multiple of 256 and (for 32-blocks and the float
     * types, whose tiles take 32 or 64 elements a step) one that is not */
    int64_t lens[3] = {small ? 256 : 512,
                       bl == 32  ? (small ? 96 : 288)
                       : bl == 1 ? (small ? 113 : 313)
                                 : (small ? 256 : 768),
                       /* the float types: rows longer than two of the many-row F32 tile's pieces (1024), with a
                        * partial step at the end; the 32-blocks: rows the quad form takes in pieces of 32 or 64
                        * blocks (147 blocks: whole pieces, then a partial one ending in a partial octet); the
                        * K-quants: rows whose few-row panels are packed per call in runs of 4 super-blocks, the
                        * sums carried from run to run (9: two whole runs and a partial one; 5 when small) */
                       bl == 1    ? 2500
                       : bl == 32 ? 4704
                                  : (small ? 1280 : 2304)};
    double worst = 0;
    for (int li = 0; li < 3 && lens[li]; li++) {
        /* output counts that leave 1 and 3 rows past a multiple of 4 (the tiles' and group forms' widths) */
        int64_t n_in = lens[li], n_out = small ? 19 : li ? 39 : 37;
        size_t rb;
        void *wdata = make_weights(t, n_out, n_in, &rb);
        rw_matrix w = {t, wdata, n_in, n_out, 0, NULL, NULL};
        for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
            int64_t n_rows = rows_list[ri];
            if (small && n_rows > 33) continue;
            float *x = make_x(n_rows, n_in);
            float *y_ref = malloc(sizeof(float) * (size_t)(n_rows * n_out));
            float *y_fast = malloc(sizeof(float) * (size_t)(n_rows * n_out));
            run_tier(RW_TIER_REF, &w, x, n_rows, y_ref, pool);
            run_tier(tier, &w, x, n_rows, y_fast, pool);
            for (int64_t r = 0; r < n_rows; r++) {
                double ymax = 1e-30;
                for (int64_t o = 0; o < n_out; o++) ymax = fmax(ymax, fabs(y_ref[r * n_out + o]));
                for (int64_t o = 0; o < n_out; o++) {
                    double d = fabs((double)y_fast[r * n_out + o] - y_ref[r * n_out + o]) / ymax;
                    worst = fmax(worst, d);
                    CHECK_MSG(!memcmp(&y_fast[r * n_out + o], &y_ref[r * n_out + o], sizeof(float)),
                              "%s %s rows %lld n_in %lld: row %lld out %lld fast %.8g ref %.8g",
                              rw_kernel_tier_name(tier), rw_dtype_name(t), (long long)n_rows, (long long)n_in,
                              (long long)r, (long long)o, y_fast[r * n_out + o], y_ref[r * n_out + o]);
                }
            }
            free(x), free(y_ref), free(y_fast);
        }
        free(wdata);
    }
    /* one activation row (decode) on one thread: tiles of many weight rows,
     * which the one-row kernels take a few at a time (eight for the AVX2
     * K-quants); with matmul.c's split of today these matrices give tiles
     * of every width 1..17 and 31, 33, 63, 64 weight rows, so every
     * remainder of those groups */
    static const int64_t outs_1x[] = {27, 41, 63, 65, 66, 67, 79, 97, 112, 127, 137, 139, 143, 255, 271, 511};
    for (size_t oi = 0; oi < sizeof outs_1x / sizeof outs_1x[0]; oi++) {
        const int64_t n_out = outs_1x[oi], n_in = lens[1];
        size_t rb;
        void *wdata = make_weights(t, n_out, n_in, &rb);
        rw_matrix w = {t, wdata, n_in, n_out, 0, NULL, NULL};
        float *x = make_x(1, n_in), *y_ref = malloc(sizeof(float) * (size_t)n_out),
              *y_fast = malloc(sizeof(float) * (size_t)n_out);
        run_tier(RW_TIER_REF, &w, x, 1, y_ref, NULL);
        run_tier(tier, &w, x, 1, y_fast, NULL);
        for (int64_t o = 0; o < n_out; o++)
            CHECK_MSG(!memcmp(&y_fast[o], &y_ref[o], sizeof(float)),
                      "%s %s one row, %lld outputs: out %lld fast %.8g ref %.8g", rw_kernel_tier_name(tier),
                      rw_dtype_name(t), (long long)n_out, (long long)o, y_fast[o], y_ref[o]);
        free(x), free(wdata), free(y_ref), free(y_fast);
    }
    if (getenv("RW_TEST_VERBOSE"))
        fprintf(stderr, "%-6s %-7s worst relative difference %.3g\n", rw_kernel_tier_name(tier), rw_dtype_name(t),
                worst);
}

/* 2b. one activation row (decode), bitwise against the reference: on one
 * thread a tile call takes up to 64 weight rows, which the one-row kernels
 * work through in passes of several rows; every count up to a pass and
 * past it, 63..65 around a whole call, rows 256 .. 4096 long, and a row
 * stride wider than a row. */
static void check_one_row(rw_kernel_tier tier, rw_dtype t, bool small) {
    static const int64_t outs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 33, 63, 64, 65};
    static const int64_t lens[] = {256, 512, 1280, 4096};
    const int64_t max_out = 65;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n_in = lens[li];
        if (small && n_in > 1280) continue;
        size_t rb;
        /* room for the wide stride: 2 rows per row */
        uint8_t *wdata = make_weights(t, 2 * max_out, n_in, &rb);
        float *x = make_x(1, n_in), y_ref[65], y_fast[65];
        /* wide stride or not, weights prefetched into L1 or L2 (the same bits) */
        for (int pass = 0; pass < 4; pass++) {
            const int wide = pass & 1;
            rw_matmul_set_prefetch_l2(pass >> 1);
            for (size_t oi = 0; oi < sizeof outs / sizeof outs[0]; oi++) {
                const int64_t n_out = outs[oi];
                if (wide && n_out != 17 && n_out != 65) continue;
                rw_matrix w = {t, wdata, n_in, n_out, wide ? 2 * rb : 0, NULL, NULL};
                run_tier(RW_TIER_REF, &w, x, 1, y_ref, NULL);
                run_tier(tier, &w, x, 1, y_fast, NULL);
                for (int64_t o = 0; o < n_out; o++)
                    CHECK_MSG(!memcmp(&y_fast[o], &y_ref[o], sizeof(float)),
                              "%s %s one row, %lld outputs of %lld%s: out %lld fast %.8g ref %.8g",
                              rw_kernel_tier_name(tier), rw_dtype_name(t), (long long)n_out, (long long)n_in,
                              wide ? " (wide stride)" : "", (long long)o, y_fast[o], y_ref[o]);
            }
        }
        rw_matmul_set_prefetch_l2(-1);
        free(x), free(wdata);
    }
}

/* 3. batch invariance within one tier */
static void check_invariance(rw_kernel_tier tier, rw_dtype t, bool small, rw_threadpool *pools[3]) {
    /* 2..32 rows take the quad form where a kernel has one, or the panel
     * form for a repacked matrix (17: two tile calls), 33 and more the
     * group form; 19 blocks of 32 are two whole
     * octets of the quad form and a partial one, and a whole and a partial
     * span of the ggml-order Q8_0 panel (16 blocks); 3 super-blocks for the
     * 256-element types; 313 elements leave the float tiles two partial pieces */
    static const int64_t rows_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 32, 33, 64, 300};
    int64_t n_in = block_len(t) == 32    ? 608
                   : block_len(t) == 256 ? 768
                                         : 313,
            n_out = small ? 9 : 21, max_rows = small ? 64 : 300;
    if (!rw_kernel_tier_set(tier)) return;
    size_t rb;
    void *wdata = make_weights(t, n_out, n_in, &rb), *wdata2 = make_weights(t, n_out, n_in, &rb);
    rw_matrix w = {t, wdata, n_in, n_out, 0, NULL, NULL}, w2 = {t, wdata2, n_in, n_out, 0, NULL, NULL};
    float *x = make_x(max_rows, n_in);
    float *alone = malloc(sizeof(float) * (size_t)(max_rows * n_out));
    float *alone2 = malloc(sizeof(float) * (size_t)(max_rows * n_out)); /* with the second matrix */
    float *y = malloc(sizeof(float) * (size_t)(2 * max_rows * n_out));
    int32_t *xr = malloc(sizeof(int32_t) * (size_t)max_rows), *yr = malloc(sizeof(int32_t) * (size_t)max_rows);
    rw_error err;
    for (int64_t r = 0; r < max_rows; r++) { /* each row alone, one thread */
        CHECK(rw_matmul(&w, x + r * n_in, n_in, 1, alone + r * n_out, n_out, NULL, &err) == RW_OK);
        CHECK(rw_matmul(&w2, x + r * n_in, n_in, 1, alone2 + r * n_out, n_out, NULL, &err) == RW_OK);
    }
    bool ok = true;
    void *panels = NULL, *panels2 = NULL;
    /* pass 1: with the matrices repacked for the panel form (where the
     * tier has one), which then takes 2..32 rows */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            CHECK(rw_matmul_pack(&w, &panels, &err) == RW_OK && rw_matmul_pack(&w2, &panels2, &err) == RW_OK);
            if (!panels) break;
            w.panels = panels, w2.panels = panels2;
        }
        for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
            int64_t n_rows = rows_list[ri];
            if (n_rows > max_rows) continue;
            for (int th = 0; th < 3; th++) {
                /* a contiguous batch of the last n_rows rows (so row positions shift) */
                int64_t first = max_rows - n_rows;
                CHECK(rw_matmul(&w, x + first * n_in, n_in, n_rows, y, n_out, pools[th], &err) == RW_OK);
                for (int64_t r = 0; r < n_rows; r++)
                    ok &= !memcmp(y + r * n_out, alone + (first + r) * n_out, sizeof(float) * (size_t)n_out);
                /* gathered: rows in reverse order, written to every other y row */
                for (int64_t r = 0; r < n_rows; r++) {
                    xr[r] = (int32_t)(n_rows - 1 - r);
                    yr[r] = (int32_t)(2 * r + 1);
                }
                CHECK(rw_matmul_gather(&w, x, n_in, xr, y, n_out, yr, n_rows, pools[th], &err) == RW_OK);
                for (int64_t r = 0; r < n_rows; r++)
                    ok &= !memcmp(y + (2 * r + 1) * n_out, alone + (n_rows - 1 - r) * n_out,
                                  sizeof(float) * (size_t)n_out);
                /* grouped (MoE-like): even rows through w, an empty group, odd rows through w2 */
                int64_t n_even = (n_rows + 1) / 2;
                for (int64_t r = 0; r < n_rows; r++) {
                    xr[r] = (int32_t)(r < n_even ? 2 * r : 2 * (r - n_even) + 1);
                    yr[r] = xr[r];
                }
                rw_matmul_group groups[3] = {
                    {.data = wdata, .x_rows = xr, .y_rows = yr, .n_rows = n_even},
                    {.data = wdata2},
                    {.data = wdata2, .x_rows = xr + n_even, .y_rows = yr + n_even, .n_rows = n_rows - n_even}};
                CHECK(rw_matmul_grouped(&w, groups, 3, x, n_in, y, n_out, pools[th], &err) == RW_OK);
                for (int64_t r = 0; r < n_rows; r++)
                    ok &= !memcmp(y + r * n_out, (r % 2 ? alone2 : alone) + r * n_out, sizeof(float) * (size_t)n_out);
                /* the same groups written in place, each a block of y from its y_row0 (the experts' order) */
                groups[0].y_rows = groups[2].y_rows = NULL;
                groups[1].y_row0 = n_even, groups[2].y_row0 = n_even;
                CHECK(rw_matmul_grouped(&w, groups, 3, x, n_in, y, n_out, pools[th], &err) == RW_OK);
                for (int64_t p = 0; p < n_rows; p++)
                    ok &= !memcmp(y + p * n_out, (xr[p] % 2 ? alone2 : alone) + xr[p] * n_out,
                                  sizeof(float) * (size_t)n_out);
                /* two groups of the same rows (an expert's gate and up), each into its own y: the
                 * second uses the first one's converted rows */
                float *y2 = y + max_rows * n_out;
                rw_matmul_group pair[2] = {{.data = wdata, .x_rows = xr, .n_rows = n_rows, .y = y},
                                           {.data = wdata2, .x_rows = xr, .n_rows = n_rows, .y = y2}};
                CHECK(rw_matmul_grouped(&w, pair, 2, x, n_in, NULL, n_out, pools[th], &err) == RW_OK);
                for (int64_t p = 0; p < n_rows; p++)
                    ok &= !memcmp(y + p * n_out, alone + xr[p] * n_out, sizeof(float) * (size_t)n_out) &&
                          !memcmp(y2 + p * n_out, alone2 + xr[p] * n_out, sizeof(float) * (size_t)n_out);
                CHECK_MSG(ok, "%s %s%s: rows %lld threads %d differ from the rows alone", rw_kernel_tier_name(tier),
                          rw_dtype_name(t), pass ? " (panels)" : "", (long long)n_rows, th + 1);
                if (!ok) goto done;
            }
        }
    }
done:
    free(panels), free(panels2);
    free(wdata), free(wdata2), free(x), free(alone), free(alone2), free(y), free(xr), free(yr);
}

/* rw_matmul_multi: each output bitwise as its own rw_matmul (shared
 * conversion and dispatch), and the one-call-each fallback for mixed types. */
static void check_multi(rw_dtype t, rw_threadpool *pool) {
    static const int64_t rows_list[] = {1, 7, 64};
    const int64_t n_in = block_len(t) == 32 ? 160 : 256, n_out[3] = {9, 21, 4};
    size_t rb;
    void *wd[3];
    rw_matrix m[3];
    for (int i = 0; i < 3; i++) {
        wd[i] = make_weights(t, n_out[i], n_in, &rb);
        m[i] = (rw_matrix){t, wd[i], n_in, n_out[i], 0, NULL, NULL};
    }
    float *x = make_x(64, n_in), *ya[3], *yb[3];
    for (int i = 0; i < 3; i++) {
        ya[i] = malloc(sizeof(float) * (size_t)(64 * n_out[i]));
        yb[i] = malloc(sizeof(float) * (size_t)(64 * n_out[i]));
    }
    const rw_matrix *ws[3] = {&m[0], &m[1], &m[2]};
    const int64_t ys[3] = {n_out[0], n_out[1], n_out[2]};
    rw_error err;
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
        int64_t n = rows_list[ri];
        for (int i = 0; i < 3; i++) CHECK(rw_matmul(&m[i], x, n_in, n, ya[i], n_out[i], pool, &err) == RW_OK);
        CHECK(rw_matmul_multi(ws, yb, ys, 3, x, n_in, n, pool, &err) == RW_OK);
        for (int i = 0; i < 3; i++)
            CHECK_MSG(!memcmp(ya[i], yb[i], sizeof(float) * (size_t)(n * n_out[i])), "%s multi rows %lld matrix %d",
                      rw_dtype_name(t), (long long)n, i);
    }
    for (int i = 0; i < 3; i++) free(wd[i]), free(ya[i]), free(yb[i]);
    free(x);
}

/* Panels packed under one numerics mode are not used under the other (their
 * layouts differ): results with them attached equal results without. */
static void check_panels_other_mode(rw_threadpool *pool) {
    const int64_t n_in = 1024, n_out = 40, n = 5; /* 32 blocks: the two layouts differ */
    size_t rb;
    void *wd = make_weights(RW_TYPE_Q8_0, n_out, n_in, &rb);
    float *x = make_x(n, n_in), *ya = malloc(sizeof(float) * (size_t)(n * n_out)),
          *yb = malloc(sizeof(float) * (size_t)(n * n_out));
    rw_matrix w = {RW_TYPE_Q8_0, wd, n_in, n_out, 0, NULL, NULL};
    rw_error err;
    for (int mode = 0; mode < 2; mode++) {
        rw_numerics_set(mode ? RW_NUMERICS_GGML : RW_NUMERICS_FAST);
        void *panels = NULL;
        CHECK(rw_matmul_pack(&w, &panels, &err) == RW_OK);
        rw_numerics_set(mode ? RW_NUMERICS_FAST : RW_NUMERICS_GGML);
        w.panels = panels;
        CHECK(rw_matmul(&w, x, n_in, n, ya, n_out, pool, &err) == RW_OK);
        w.panels = NULL;
        CHECK(rw_matmul(&w, x, n_in, n, yb, n_out, pool, &err) == RW_OK);
        CHECK_MSG(!memcmp(ya, yb, sizeof(float) * (size_t)(n * n_out)), "panels packed in mode %d used in the other",
                  mode);
        free(panels);
    }
    rw_numerics_set(RW_NUMERICS_AUTO);
    free(wd), free(x), free(ya), free(yb);
}

/* auto is fast for every type: a Q8_0 and a Q4_K matrix give fast's bits
 * under auto, with and without their panels; ggml's order is another
 * (somewhere in 40 x 1024 outputs on AVX-512). */
/* Extreme K-quant blocks (every quant and scale at its largest) against
 * activations that all quantize to -127 or +127: the integer sums then reach
 * their bounds (a 16-element Q5_K dot passes 2^15), and every form (tile,
 * group, panel) must still give the reference's bits. */
static void check_extremes(rw_threadpool *pool) {
    static const rw_dtype types[] = {RW_TYPE_Q4_K, RW_TYPE_Q5_K, RW_TYPE_Q6_K};
    static const int64_t rows_list[] = {1, 5, 6, 16, 17, 40};
    const int64_t n_in = 512, n_out = 18, max_rows = 40;
    rw_kernel_tier best = rw_kernel_tier_current();
    float *x = malloc(sizeof(float) * (size_t)(max_rows * n_in));
    float *ref = malloc(sizeof(float) * (size_t)(max_rows * n_out)),
          *y = malloc(sizeof(float) * (size_t)(max_rows * n_out));
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint64_t rb;
        CHECK(rw_dtype_row_bytes(types[ti], (uint64_t)n_in, &rb));
        uint8_t *w = malloc((size_t)rb * (size_t)n_out);
        memset(w, 0xFF, (size_t)rb * (size_t)n_out);
        const size_t blk = (size_t)rb / (size_t)(n_in / 256);
        for (int64_t b = 0; b < n_out * (n_in / 256); b++) { /* d = 1 (Q6_K: the last 2 bytes), dmin = 0 */
            uint8_t *p = w + (size_t)b * blk;
            if (types[ti] == RW_TYPE_Q6_K) p[blk - 2] = 0x00, p[blk - 1] = 0x3C;
            else p[0] = 0x00, p[1] = 0x3C, p[2] = 0x00, p[3] = 0x00;
        }
        rw_matrix m = {types[ti], w, n_in, n_out, 0, NULL, NULL};
        for (int sign = 0; sign < 2; sign++) {
            for (int64_t i = 0; i < max_rows * n_in; i++) x[i] = sign ? -1.0f : 1.0f;
            CHECK(rw_kernel_tier_set(RW_TIER_REF));
            CHECK(rw_matmul(&m, x, n_in, 1, ref, n_out, pool, NULL) == RW_OK);
            CHECK(rw_kernel_tier_set(best));
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
                const int64_t n = rows_list[ri];
                CHECK(rw_matmul(&m, x, n_in, n, y, n_out, pool, NULL) == RW_OK);
                bool ok = true;
                for (int64_t r = 0; r < n; r++) ok &= !memcmp(y + r * n_out, ref, sizeof(float) * (size_t)n_out);
                CHECK_MSG(ok, "%s extreme blocks, sign %d, rows %lld: %g against the reference's %g",
                          rw_dtype_name(types[ti]), sign, (long long)n, y[(n - 1) * n_out], ref[0]);
            }
        }
        free(w);
    }
    free(x), free(ref), free(y);
}

/* Rows apart (row_stride past the row's bytes) with 0xFF in the gaps: NaN
 * f16 scales, MXFP4's largest exponent. Kernels may read a short last
 * group past a row where more rows follow (the one-row tiles do); no byte
 * outside a row may change a result. Every type, against the reference on
 * the same strided matrix, 1 to 17 rows, a row length with a short group. */
static void check_row_gaps(rw_threadpool *pool) {
    static const int64_t rows_list[] = {1, 3, 9, 17};
    const int64_t n_out = 11, max_rows = 17;
    const rw_kernel_tier best = rw_kernel_tier_current();
    for (int ti = 0; ti < N_TYPES; ti++) {
        const rw_dtype t = all_types[ti];
        const int64_t n_in = block_len(t) == 256 ? 1280 : 672; /* 5 super-blocks; 21 blocks of 32 */
        size_t rb;
        uint8_t *packed = make_weights(t, n_out, n_in, &rb);
        const size_t stride = rb + 72;
        uint8_t *w = malloc(stride * (size_t)n_out);
        memset(w, 0xFF, stride * (size_t)n_out);
        for (int64_t o = 0; o < n_out; o++) memcpy(w + (size_t)o * stride, packed + (size_t)o * rb, rb);
        float *x = make_x(max_rows, n_in);
        float *ref = malloc(sizeof(float) * (size_t)(max_rows * n_out)),
              *y = malloc(sizeof(float) * (size_t)(max_rows * n_out));
        const rw_matrix m = {t, w, n_in, n_out, stride, NULL, NULL};
        run_tier(RW_TIER_REF, &m, x, max_rows, ref, pool);
        CHECK(rw_kernel_tier_set(best));
        for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
            const int64_t n = rows_list[ri];
            CHECK(rw_matmul(&m, x, n_in, n, y, n_out, pool, NULL) == RW_OK);
            CHECK_MSG(!memcmp(y, ref, sizeof(float) * (size_t)(n * n_out)),
                      "%s rows with 0xFF gaps, %lld rows: not the reference's bits", rw_dtype_name(t), (long long)n);
        }
        free(packed), free(w), free(x), free(ref), free(y);
    }
    rw_kernel_tier_set(best);
}

static void check_auto_is_fast(rw_threadpool *pool) {
    static const rw_dtype types[] = {RW_TYPE_Q8_0, RW_TYPE_Q4_K};
    const int64_t n_in = 1024, n_out = 40, n = 9;
    const size_t ny = sizeof(float) * (size_t)(n * n_out);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        size_t rb;
        void *wd = make_weights(types[t], n_out, n_in, &rb);
        float *x = make_x(n, n_in), *yf = malloc(ny), *ya = malloc(ny), *yp = malloc(ny), *yg = malloc(ny);
        rw_matrix w = {types[t], wd, n_in, n_out, 0, NULL, NULL};
        rw_error err;
        rw_numerics_set(RW_NUMERICS_FAST);
        CHECK(rw_matmul(&w, x, n_in, n, yf, n_out, pool, &err) == RW_OK);
        rw_numerics_set(RW_NUMERICS_GGML);
        CHECK(rw_matmul(&w, x, n_in, n, yg, n_out, pool, &err) == RW_OK);
        rw_numerics_set(RW_NUMERICS_AUTO);
        void *panels = NULL;
        CHECK(rw_matmul_pack(&w, &panels, &err) == RW_OK);
        CHECK(rw_matmul(&w, x, n_in, n, ya, n_out, pool, &err) == RW_OK);
        w.panels = panels;
        CHECK(rw_matmul(&w, x, n_in, n, yp, n_out, pool, &err) == RW_OK);
        CHECK_MSG(!memcmp(ya, yf, ny), "%s: auto differs from fast", rw_dtype_name(types[t]));
        CHECK_MSG(!memcmp(yp, yf, ny), "%s: auto with panels differs from fast", rw_dtype_name(types[t]));
        if (rw_kernel_tier_is_avx512(rw_kernel_tier_current()))
            CHECK_MSG(memcmp(ya, yg, ny) != 0, "%s: auto sums in ggml's order", rw_dtype_name(types[t]));
        free(panels), free(wd), free(x), free(yf), free(ya), free(yp), free(yg);
    }
}

static void check_errors(void) {
    rw_error err;
    float x[64] = {0}, y[4];
    uint8_t wq[4 * 34] = {0};
    rw_matrix w = {RW_TYPE_Q8_K, wq, 32, 1, 0, NULL, NULL};
    CHECK(!rw_matmul_supports(RW_TYPE_Q8_K));
    CHECK(rw_matmul(&w, x, 32, 1, y, 1, NULL, &err) == RW_ERR_UNSUPPORTED);
    w = (rw_matrix){RW_TYPE_Q8_0, wq, 48, 1, 0, NULL, NULL}; /* not a multiple of 32 */
    CHECK(rw_matmul(&w, x, 48, 1, y, 1, NULL, &err) == RW_ERR_INVALID_ARG);
    w = (rw_matrix){RW_TYPE_Q4_K, wq, 32, 1, 0, NULL, NULL}; /* K-quants need 256 */
    CHECK(rw_matmul(&w, x, 32, 1, y, 1, NULL, &err) == RW_ERR_INVALID_ARG);
    w = (rw_matrix){RW_TYPE_Q8_0, wq, 64, 2, 10, NULL, NULL}; /* stride below the row size */
    CHECK(rw_matmul(&w, x, 64, 1, y, 2, NULL, &err) == RW_ERR_INVALID_ARG);
    w = (rw_matrix){RW_TYPE_Q8_0, wq, 64, 2, 0, NULL, NULL};
    CHECK(rw_matmul(&w, x, 64, 0, y, 2, NULL, &err) == RW_OK); /* no rows: nothing to do */
    CHECK(rw_matmul_vec_dot_type(RW_TYPE_Q4_1) == RW_TYPE_Q8_1);
    CHECK(rw_matmul_vec_dot_type(RW_TYPE_IQ4_XS) == RW_TYPE_Q8_K);
}

/* Low-rank updates (LoRA, rw_lowrank): y = W x, then y += (B (A x)) * s for
 * each update in order, equal bitwise to those steps done here (A x by
 * rw_matmul, B's rank products added in order from 0); the same bits in
 * every tier, for every row count, a row alone as in the batch, through
 * rw_matmul_multi too; the grouped form refuses them and a misfit update is
 * an error. */
static void check_lowrank(rw_threadpool *pool) {
    enum { N_IN = 256, N_OUT = 48, R1 = 8, R2 = 3, MAX_ROWS = 40 };
    size_t rb;
    void *wd = make_weights(RW_TYPE_Q4_K, N_OUT, N_IN, &rb), *a1 = make_weights(RW_TYPE_F16, R1, N_IN, &rb),
         *a2 = make_weights(RW_TYPE_F32, R2, N_IN, &rb);
    float *bt1 = make_x(R1, N_OUT), *bt2 = make_x(R2, N_OUT);
    rw_lowrank u2 = {{RW_TYPE_F32, a2, N_IN, R2, 0, NULL, NULL}, bt2, -0.75f, RW_TYPE_F32, NULL};
    rw_lowrank u1 = {{RW_TYPE_F16, a1, N_IN, R1, 0, NULL, NULL}, bt1, 0.375f, RW_TYPE_F16, &u2};
    const rw_matrix plain = {RW_TYPE_Q4_K, wd, N_IN, N_OUT, 0, NULL, NULL};
    rw_matrix w = plain;
    w.lowrank = &u1;
    float *x = make_x(MAX_ROWS, N_IN), *want = malloc(sizeof(float) * MAX_ROWS * N_OUT),
          *got = malloc(sizeof(float) * MAX_ROWS * N_OUT), *ax = malloc(sizeof(float) * MAX_ROWS * R1),
          *other = malloc(sizeof(float) * MAX_ROWS * N_OUT), *first = malloc(sizeof(float) * MAX_ROWS * N_OUT);
    rw_error err;
    const rw_kernel_tier best = rw_kernel_tier_current();
    bool have_first = false;
    const int64_t n = MAX_ROWS;
    for (int tier = RW_TIER_REF; tier < RW_TIER_COUNT; tier++) {
        if (!rw_kernel_tier_available((rw_kernel_tier)tier) || !rw_kernel_tier_set((rw_kernel_tier)tier)) continue;
        CHECK(rw_matmul(&plain, x, N_IN, n, want, N_OUT, pool, &err) == RW_OK);
        for (const rw_lowrank *u = &u1; u; u = u->next) {
            const int64_t r = u->a.n_out;
            CHECK(rw_matmul(&u->a, x, N_IN, n, ax, r, pool, &err) == RW_OK);
            if (u->t_type == RW_TYPE_F16) /* B's input rounded to f16, as ggml's */
                for (int64_t q = 0; q < n * r; q++) ax[q] = rw_f16_to_f32(rw_f32_to_f16(ax[q]));
            for (int64_t i = 0; i < n; i++)
                for (int64_t o = 0; o < N_OUT; o++) {
                    float acc = 0.0f;
                    for (int64_t k = 0; k < r; k++) {
                        const float prod = u->bt[k * N_OUT + o] * ax[i * r + k];
                        acc += prod;
                    }
                    const float scaled = acc * u->scale;
                    want[i * N_OUT + o] += scaled;
                }
        }
        CHECK(rw_matmul(&w, x, N_IN, n, got, N_OUT, pool, &err) == RW_OK);
        CHECK_MSG(!memcmp(got, want, sizeof(float) * (size_t)(n * N_OUT)), "%s lowrank: not the plain steps",
                  rw_kernel_tier_name((rw_kernel_tier)tier));
        if (!have_first) memcpy(first, want, sizeof(float) * (size_t)(n * N_OUT)), have_first = true;
        CHECK_MSG(!memcmp(first, want, sizeof(float) * (size_t)(n * N_OUT)),
                  "%s lowrank: not the reference tier's bits", rw_kernel_tier_name((rw_kernel_tier)tier));
        for (int64_t r = 0; r < n; r += 7) { /* a row alone, and through multi beside a plain matrix */
            CHECK(rw_matmul(&w, x + r * N_IN, N_IN, 1, got, N_OUT, NULL, &err) == RW_OK);
            CHECK_MSG(!memcmp(got, want + r * N_OUT, sizeof(float) * N_OUT), "lowrank row %lld alone", (long long)r);
        }
        const rw_matrix *ws[2] = {&plain, &w};
        float *ys[2] = {other, got};
        const int64_t yst[2] = {N_OUT, N_OUT};
        CHECK(rw_matmul_multi(ws, ys, yst, 2, x, N_IN, n, pool, &err) == RW_OK);
        CHECK_MSG(!memcmp(got, want, sizeof(float) * (size_t)(n * N_OUT)), "lowrank through rw_matmul_multi");
    }
    rw_kernel_tier_set(best);
    rw_matmul_group g = {.data = wd, .n_rows = 2};
    CHECK(rw_matmul_grouped(&w, &g, 1, x, N_IN, got, N_OUT, pool, &err) == RW_ERR_UNSUPPORTED);
    u2.a.n_in = N_IN / 2; /* an update of the wrong shape */
    CHECK(rw_matmul(&w, x, N_IN, 2, got, N_OUT, pool, &err) == RW_ERR_INVALID_ARG);
    free(wd), free(a1), free(a2), free(bt1), free(bt2), free(x), free(want), free(got), free(ax), free(other),
        free(first);
}

int main(void) {
    bool small = rw_test_sanitized();
    rw_kernel_tier best = rw_kernel_tier_current();
    rw_threadpool *pools[3] = {NULL};
    rw_error err;
    for (int i = 0; i < 3; i++) CHECK(rw_threadpool_new(i + 1, &pools[i], &err) == RW_OK);

    /* the AMX tier on emulated tiles (the head), after best is known */
    const bool emulate = getenv("RW_AMX_EMULATE") && !strcmp(getenv("RW_AMX_EMULATE"), "1");
    if (emulate) {
        if (rw_kernel_tier_available(RW_TIER_AMX)) {
            printf("skipped: this CPU has AMX (test_matmul runs the tier on the tiles themselves)\n");
            return 77;
        }
        if (!amx_emu_install()) {
            printf("skipped: no AVX-512 VBMI (or not x86-64 Linux): the AMX tier cannot be emulated here\n");
            return 77;
        }
        printf("test_matmul: the amx tier on emulated tiles (amx_emu.h)\n");
    }
    if (!emulate) check_errors();
    for (int tier = RW_TIER_AVX2; tier < RW_TIER_COUNT; tier++) /* tiers this CPU lacks are skipped: say so */
        if (!rw_kernel_tier_available((rw_kernel_tier)tier))
            printf("test_matmul: no %s tier on this CPU (or OS): skipped\n", rw_kernel_tier_name((rw_kernel_tier)tier));
    /* the default numerics (auto, which is fast: check_auto_is_fast) for
     * every type, then ggml for the types whose order it changes */
    static const rw_dtype ggml_types[] = {RW_TYPE_Q4_0, RW_TYPE_Q5_0, RW_TYPE_Q8_0, RW_TYPE_Q4_1,
                                          RW_TYPE_Q5_1, RW_TYPE_Q4_K, RW_TYPE_Q5_K, RW_TYPE_Q6_K};
    static const rw_numerics modes[] = {RW_NUMERICS_AUTO, RW_NUMERICS_GGML};
    for (int mode = 0; mode < 2; mode++) {
        rw_numerics_set(modes[mode]);
        const rw_dtype *types = mode == 0 ? all_types : ggml_types;
        const int n_types = mode == 0 ? N_TYPES : (int)(sizeof ggml_types / sizeof ggml_types[0]);
        for (int ti = 0; ti < n_types; ti++) {
            rw_dtype t = types[ti];
            CHECK(rw_matmul_supports(t));
            if (!emulate) check_reference(t, small);
            if (!emulate) check_multi(t, pools[1]);
            for (int tier = RW_TIER_REF; tier < RW_TIER_COUNT; tier++) {
                if (!rw_kernel_tier_available((rw_kernel_tier)tier) || (emulate && tier != RW_TIER_AMX)) continue;
                const bool own = rw_kernel_tier_for((rw_kernel_tier)tier, t) == (rw_kernel_tier)tier;
                /* the AVX2 tier with AVX-VNNI (where the CPU has it) and without */
                for (int vnni = 1; vnni >= (tier == RW_TIER_AVX2 ? 0 : 1); vnni--) {
                    rw_matmul_set_avx_vnni(vnni);
                    if (tier != RW_TIER_REF && own) {
                        check_fast_vs_ref((rw_kernel_tier)tier, t, small, pools[1]);
                        check_one_row((rw_kernel_tier)tier, t, small);
                    }
                    if (own) check_invariance((rw_kernel_tier)tier, t, small, pools);
                    /* Q4_K, Q5_K: both ways of broadcasting the scales (the CPU's vendor picks one) */
                    if (tier == RW_TIER_AVX2 && own && (t == RW_TYPE_Q4_K || t == RW_TYPE_Q5_K)) {
                        for (int sh = 0; sh < 2; sh++) {
                            rw_matmul_set_k_scale_shuffle(sh);
                            check_fast_vs_ref((rw_kernel_tier)tier, t, small, pools[1]);
                            check_one_row((rw_kernel_tier)tier, t, small);
                        }
                        rw_matmul_set_k_scale_shuffle(-1);
                    }
                }
                rw_matmul_set_avx_vnni(true);
            }
        }
    }
    rw_numerics_set(RW_NUMERICS_AUTO);
    rw_kernel_tier_set(best);
    if (emulate) {
        printf("test_matmul: %ld tile instructions emulated\n", (long)amx_emu_executed);
        CHECK(amx_emu_executed > 0);
        for (int i = 0; i < 3; i++) rw_threadpool_free(pools[i]);
        return rw_test_done();
    }
    check_panels_other_mode(pools[1]);
    check_auto_is_fast(pools[1]);
    check_extremes(pools[1]);
    check_row_gaps(pools[1]);
    check_lowrank(pools[1]);
    for (int i = 0; i < 3; i++) rw_threadpool_free(pools[i]);
    return rw_test_done();
}
