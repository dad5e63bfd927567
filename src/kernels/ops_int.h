/* ops_int.h - private to src/kernels: the AVX-512 twins of the ops.h kernels
 * (defined in ops_avx512.c, compiled with AVX-512 flags) and their AVX2
 * twins (ops_avx2.c, the same bits) that the dispatchers in ops_*.c call
 * when the tier allows. Same contracts as the public
 * functions of the same name without the suffix. */
#ifndef RW_KERNELS_OPS_INT_H
#define RW_KERNELS_OPS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <math.h>

#include "kernels/ops_model.h"
#include "kernels/quant.h"

/* True when the AVX-512 (AVX2) twins may run: the current kernel tier.
 * Off x86-64 the twins are not built: the calls behind these fold away. */
#if defined(__x86_64__)
bool rw_ops_use_avx512(void);
bool rw_ops_use_avx2(void);
#else
#define rw_ops_use_avx512() false
#define rw_ops_use_avx2()   false
#endif
/* The same for the NEON twins (ops_neon.c, AArch64 only). */
#if defined(__aarch64__)
bool rw_ops_use_neon(void);
#else
#define rw_ops_use_neon() false
#endif

/* NEON twins (ops_neon.c): the reference's bits. */
void rw_silu_neon(const float *x, float *y, int64_t n);
void rw_swiglu_neon(float *g, const float *u, int64_t n);
void rw_geglu_neon(float *g, const float *u, int64_t n);
void rw_relu_sq_neon(float *x, int64_t n);
void rw_f32_to_f16_row_neon(const float *src, rw_f16 *dst, int64_t n);
void rw_f16_to_f32_row_neon(const rw_f16 *src, float *dst, int64_t n);
void rw_softmax_neon(const float *x, float *y, int64_t n);
/* The gated norms' step after the sums (ops_norm.c): group g scaled by scales[g]. */
void rw_rmsnorm_gated_neon(const float *x, const float *w, const float *z, int n_groups, int gs, const float *scales,
                           float *y);
void rw_delta_rule_head_neon(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                             int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                             const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                             float *scratch);
void rw_ssm_scan_head_neon(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride, const float *dt,
                           int64_t dt_stride, float dt_bias, float A, const float *B, const float *C, int64_t bc_stride,
                           float D, float *y, int64_t y_stride);
void rw_attn_head_neon(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                       float scale, float *scores, float *out);

/* AVX2 twins (ops_avx2.c): bitwise the AVX-512 twins below. */
void rw_silu_avx2(const float *x, float *y, int64_t n);
void rw_swiglu_avx2(float *g, const float *u, int64_t n);
void rw_geglu_avx2(float *g, const float *u, int64_t n);
void rw_relu_sq_avx2(float *x, int64_t n);
void rw_f32_to_f16_row_avx2(const float *src, rw_f16 *dst, int64_t n);
void rw_f16_to_f32_row_avx2(const rw_f16 *src, float *dst, int64_t n);
void rw_softmax_avx2(const float *x, float *y, int64_t n);
void rw_rmsnorm_gated_avx2(const float *x, const float *w, const float *z, int n_groups, int gs, const float *scales,
                           float *y);
void rw_attn_head_avx2(const float *q, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                       float scale, float *scores, float *out);
/* rw_attn_group_avx512's twin: r query heads sharing one paged KV head, each
 * head bitwise rw_attn_head's, each K and V row read once for up to four
 * heads; for keys of a multiple of 64 and no window (_fits). */
bool rw_attn_group_avx2_fits(const rw_attn_pages *kv, int hd_k);
void rw_attn_group_avx2(const float *q, int r, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                        float scale, float *scores, float *out);
void rw_delta_rule_head_avx2(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride, const float *k,
                             int64_t k_stride, const float *v, int64_t v_stride, const float *g, int64_t g_stride,
                             const float *beta, int64_t beta_stride, float scale, float *o, int64_t o_stride,
                             float *scratch);
void rw_ssm_scan_head_avx2(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride,
                           const float *dt, int64_t dt_stride, float dt_bias, float A, const float *B, const float *C,
                           int64_t bc_stride, float D, float *y, int64_t y_stride);

void rw_silu_avx512(const float *x, float *y, int64_t n);
/* GEGLU with the F16C conversion and a gather from the GELU table
 * (rw_gelu_f16_table, ops_act_ref.c: built on first use, then read-only). */
const float *rw_gelu_f16_table(void);
void rw_geglu_avx512(float *g, const float *u, int64_t n);
void rw_relu_sq_avx512(float *x, int64_t n);
/* Channels [0, the returned count) of rw_conv1d's kernel-4 conv through n_t
 * tokens (no SiLU), each lane conv_k4's operations: the AVX2 tier's. */
int rw_conv_k4_avx2(const float *x, int64_t x_stride, int64_t n_t, int C, const float *w, const float *bias,
                    bool fused, float *state, float *y, int64_t y_stride);
/* The same through n_t tokens for the first 16*floor(C/16) channels
 * (returns that count; the caller does the rest), bitwise the same. */
int rw_conv_k4_avx512(const float *x, int64_t x_stride, int64_t n_t, int C, const float *w, const float *bias,
                      bool fused, float *state, float *y, int64_t y_stride);
void rw_softmax_avx512(const float *x, float *y, int64_t n);
void rw_rmsnorm_gated_avx512(const float *x, const float *w, const float *z, int n_groups, int gs,
                             const float *scales, float *y);
void rw_delta_rule_head_avx512(float *S, int dk, int dv, int64_t n_t, const float *q, int64_t q_stride,
                               const float *k, int64_t k_stride, const float *v, int64_t v_stride, const float *g,
                               int64_t g_stride, const float *beta, int64_t beta_stride, float scale, float *o,
                               int64_t o_stride, float *scratch);
/* The blocked delta-rule forms of the AVX2 and AVX-512 tiers run each block
 * of state rows through a tile of RW_DELTA_TILE tokens, so the tile's k and
 * q stay in L1 while every block runs through it (without tiles each block
 * read every token's k and q from L3 again). Few: the conv output's rows
 * lie a multiple of 4 KiB apart (24 KiB in Qwen3.5-0.8B, 32 KiB in the 4B),
 * so every token's k and q fall in the same L1 sets, and more lines than the
 * cache's ways evict each other (one thread, the 0.8B's 16 heads over 512
 * tokens: 1.40 us per head and token with 8 or 4, 1.6-1.8 with 16, 1.7-1.9
 * with 32, on both tiers). A step prefetches the inputs of the token
 * RW_DELTA_AHEAD ahead, too far apart for the hardware's prefetchers:
 * without it each block's step waited on its v (one line) from L3. The
 * AVX-512 form also copies the tile's k and q together first, out of those
 * sets (about 1.2x on its own, 1.45x with its unrolled reduction; the AVX2
 * form measured slower with the copy). */
enum { RW_DELTA_TILE = 8, RW_DELTA_AHEAD = 4 };

/* Prefetch token t's v (at v + t * v_stride) for a block and, when first
 * (the tile's first block), its dk floats of k and q; nothing past n_t. */
static inline void rw_delta_prefetch(int64_t t, int64_t n_t, bool first, int dk, const float *q, int64_t q_stride,
                                     const float *k, int64_t k_stride, const float *v, int64_t v_stride) {
    if (t >= n_t) return;
    __builtin_prefetch(v + t * v_stride, 0, 3);
    if (!first) return;
    for (int i = 0; i < dk; i += 16) {
        __builtin_prefetch(q + t * q_stride + i, 0, 3);
        __builtin_prefetch(k + t * k_stride + i, 0, 3);
    }
}

void rw_ssm_scan_head_avx512(float *state, int hd, int ds, int64_t n_t, const float *x, int64_t x_stride,
                             const float *dt, int64_t dt_stride, float dt_bias, float A, const float *B,
                             const float *C, int64_t bc_stride, float D, float *y, int64_t y_stride);
/* r query heads (q + h*hd_k) sharing one paged KV head (ops_model.h), outputs out + h*hd_v:
 * per head bitwise what rw_attn_head gives in the AVX-512 tier, with each K
 * and V row read once for every head. scores: r * n_pos floats. */
void rw_attn_group_avx512(const float *q, int r, const rw_attn_pages *kv, bool f16, int64_t n_pos, int hd_k, int hd_v,
                          float scale, float *scores, float *out);
/* The softmax of one head's scores s[b0..n) in place, as rw_attn_head
 * (exp per 16-lane block, block sums in double; s[b0..first) become 0). */
void rw_attn_softmax_avx512(float *s, int64_t first, int64_t b0, int64_t n, const float *sink);
/* n_tok consecutive tokens' r query heads sharing one paged KV head, four
 * queries at a time (ops_attn_block_avx512.c): token t (q + t*q_stride +
 * h*hd_k, out + t*out_stride + h*hd_v) attends to positions
 * [max(0, n_pos0 + t - window), n_pos0 + t) (window 0: all), bitwise what
 * rw_attn_head_paged_ref gives for it. hd_k a multiple of 64, hd_v of 4.
 * scores: 4 rows of scores_stride >= n_pos0 + n_tok - 1 floats. */
void rw_attn_tokens_avx512(const float *q, int64_t q_stride, int n_tok, int r, const rw_attn_pages *kv, bool f16,
                           int64_t n_pos0, int64_t window, int hd_k, int hd_v, float scale, float *scores,
                           int64_t scores_stride, float *out, int64_t out_stride);
void rw_f32_to_f16_row_avx512(const float *src, rw_f16 *dst, int64_t n);
void rw_f16_to_f32_row_avx512(const rw_f16 *src, float *dst, int64_t n);

/* ---- The AVX-512 twins' arithmetic in plain C ---------------------------
 * The *_ref kernels are the specification of every tier and compute the
 * AVX-512 twins' bits: these are their pieces, one lane at a time. */

/* 2^k for k in [-126, 127]. */
static inline float rw_pow2i(int k) {
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)(k + 127) << 23};
    return v.f;
}

/* One lane of rw_exp16 (simd_avx512_int.h: ggml's vector expf). Its
 * vscalefps(poly, n), poly * 2^n rounded once, is poly * 2^(n >> 1) (exact)
 * times 2^(n - (n >> 1)) (rounded once). */
static inline float rw_exp_ggml(float x) {
    const float shift = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, shift);
    const float n = z - shift;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float hi = fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
    const float poly = fmaf(hi, u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (n != n) return poly; /* NaN in, NaN out */
    if (fabsf(n) > 192.0f) return x < 0.0f ? 0.0f : INFINITY;
    const int k = (int)n, k1 = k >> 1;
    return (poly * rw_pow2i(k1)) * rw_pow2i(k - k1);
}

/* One lane of rw_silu16: x / (1 + exp(0 - x)). */
static inline float rw_silu_ggml(float x) { return x / (1.0f + rw_exp_ggml(0.0f - x)); }

/* _mm512_reduce_add_ps's tree over 16 lanes: l + 8 onto l, then l + 4 onto
 * l, then (0 + 2) + (1 + 3). */
static inline float rw_reduce16_ref(const float a[16]) {
    float t[8], u[4];
    for (int i = 0; i < 8; i++) t[i] = a[i + 8] + a[i];
    for (int i = 0; i < 4; i++) u[i] = t[i + 4] + t[i];
    return (u[0] + u[2]) + (u[1] + u[3]);
}

/* rw_reduce4 of four 16-lane accumulators a[16c .. 16c + 16): (a0 + a2) +
 * (a1 + a3) per lane, then rw_reduce16_ref. */
static inline float rw_reduce64_ref(const float a[64]) {
    float t[16];
    for (int l = 0; l < 16; l++) t[l] = (a[l] + a[32 + l]) + (a[16 + l] + a[48 + l]);
    return rw_reduce16_ref(t);
}

/* The RMS scale of one group from its sum of squares (rw_sumsq_rows), as
 * ggml_rms_norm: the mean rounded to float, 1/sqrtf(mean + eps). Shared so
 * that every norm in this folder rounds the same way. */
static inline float rw_rms_scale_of(double sum, int n, float eps) {
    const float mean = (float)(sum / n);
    return 1.0f / sqrtf(mean + eps);
}

/* The sums of squares of m <= RW_SUMSQ_ROWS rows of n values (row r at x +
 * r * stride) into sums[r], each as ggml sums one row (the float squares
 * added one by one in double, in element order): the rows
 * interleaved so that their chains of dependent adds overlap, where one row
 * alone waits on every add (a 1024-value row: about 3000 cycles). */
enum { RW_SUMSQ_ROWS = 8 };
#define RW_SQ(r) ((double)(x[(r) * stride + i] * x[(r) * stride + i]))
static inline void rw_sumsq_rows(const float *x, int64_t stride, int m, int n, double *sums) {
    if (m == RW_SUMSQ_ROWS) { /* eight named sums, so that they stay in registers */
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0, s5 = 0.0, s6 = 0.0, s7 = 0.0;
        for (int i = 0; i < n; i++) {
            s0 += RW_SQ(0), s1 += RW_SQ(1), s2 += RW_SQ(2), s3 += RW_SQ(3);
            s4 += RW_SQ(4), s5 += RW_SQ(5), s6 += RW_SQ(6), s7 += RW_SQ(7);
        }
        sums[0] = s0, sums[1] = s1, sums[2] = s2, sums[3] = s3;
        sums[4] = s4, sums[5] = s5, sums[6] = s6, sums[7] = s7;
        return;
    }
    for (int r = 0; r < m; r++) {
        double s = 0.0;
        for (int i = 0; i < n; i++) s += RW_SQ(r);
        sums[r] = s;
    }
}
#undef RW_SQ

/* y[i] = (x[i] * s) * w[i] (w NULL: x[i] * s) over n values; y may be x.
 * In fours through a buffer, which the compiler turns into vector multiplies
 * (the portable files are built for the baseline ISA at -O2, where a plain
 * loop stays scalar). */
static inline void rw_scale_row(const float *x, float s, const float *w, int n, float *y) {
    int i = 0;
    if (w)
        for (; i + 4 <= n; i += 4) {
            float a[4];
            for (int j = 0; j < 4; j++) a[j] = (x[i + j] * s) * w[i + j];
            for (int j = 0; j < 4; j++) y[i + j] = a[j];
        }
    else
        for (; i + 4 <= n; i += 4) {
            float a[4];
            for (int j = 0; j < 4; j++) a[j] = x[i + j] * s;
            for (int j = 0; j < 4; j++) y[i + j] = a[j];
        }
    for (; i < n; i++) y[i] = w ? (x[i] * s) * w[i] : x[i] * s;
}

#endif
