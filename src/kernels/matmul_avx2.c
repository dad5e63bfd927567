/* matmul_avx2.c - the AVX2 tier (AVX2 + FMA + F16C), for CPUs without AVX-512.
 *
 * Every output is bitwise what the AVX-512 tier computes (matmul_ref.c
 * writes the arithmetic out): the integer sums are exact whatever the
 * instructions, and the float steps are the AVX-512 tier's, in its order.
 * A 16-lane AVX-512 accumulator is two 8-lane ones here (lanes 0-7 and
 * 8-15), and its final _mm512_reduce_add_ps is reduce16: the high eight
 * lanes onto the low eight, then the upper four onto the lower four, lanes
 * 0+2 and 1+3, then those two.
 *
 * An 8-bit product sum is vpmaddubsw (unsigned x signed bytes, pairs summed
 * into 16 bits) followed by vpmaddwd, which multiplies each 16-bit pair sum
 * by a 16-bit factor (1, or the sub-block scale for the K-quants) and adds
 * neighbours into 32-bit lanes. vpmaddubsw saturates at 2^15, so weights
 * enter it as small unsigned values (Q4_0 +8, Q5_0 +16, Q4_1, Q5_1, the
 * K-quants but IQ4_XS: at most 63, pair sums < 2^15; MXFP4 +16 in its
 * one- and two-row form and panels) and the types with full-range signed
 * weights (Q8_0, IQ4_NL, IQ4_XS, MXFP4's other forms) use the sign trick
 * |w| * (x * sign(w)); where the AVX-512 tier's lanes hold biased sums
 * (IQ4_XS: +128), the bias is added back exactly.
 *
 * Per type (the AVX-512 tier's arithmetic, see matmul_ref.c):
 *  - F32, F16: 32 lanes (four 8-lane accumulators), one fma per element;
 *    BF16: 32 lanes of element pairs, vdpbf16ps as two fmas (odd element
 *    first; the instruction's flushing of subnormals is not reproduced);
 *  - Q4_1, Q5_1: 16 lanes, even blocks in lanes 0-7, odd ones in 8-15, one
 *    fma per lane and block, then the min term onto lane 0 of the block's
 *    half;
 *  - Q8_0, and Q4_0, Q5_0, IQ4_NL, MXFP4 decoded to int8 values
 *    (rw_avx2_wt_q): exact block sums, four accumulators (block b in
 *    (b % 8) / 2); with AVX-VNNI the block sums come from vpdpbusd (the
 *    same integers);
 *  - Q2_K, Q3_K, IQ4_XS: 16 integer lanes per super-block as the AVX-512
 *    tier's vpmaddwd / vpmulld layout gives them, fma then fnmadd of the
 *    min lanes (IQ4_XS in matmul_dot1_avx2.c, one or two activation rows);
 *  - Q4_K, Q5_K, Q6_K: the exact super-block integers and the reference's
 *    scalar step;
 *  - RW_NUMERICS_GGML kernels: ggml's AVX2 order (as every tier).
 * Tiles are up to 2 weight rows x 2 activation rows (F32, F16, BF16 compute
 * one output at a time); with several activation rows Q8_0 (up to 8) and
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (up to 16) prepare each weight block once
 * for all of them, and with one row those K-quants read the block bytes directly. Every
 * element runs the same integer sums (exact) and float steps whatever the
 * tile, so results are batch invariant.
 */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/matmul_avx2_int.h"
#include "kernels/quant_int.h"

#define NW     2
#define NX     2
#define INLINE static inline __attribute__((always_inline))

static float f16_to_f32(rw_f16 h) { return _cvtsh_ss(h); }

INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* _mm512_reduce_add_ps of the 16 lanes [lo | hi] (GCC's tree): hi + lo,
 * then hsum8's tree over the eight sums. */
INLINE float reduce16(__m256 lo, __m256 hi) { return hsum8(_mm256_add_ps(hi, lo)); }

/* ==== float types ======================================================== */

/* Activations: f32 rows (F32), f32 values rounded through f16 (F16: the
 * f16 x f16 products are exact in f32), bf16 (BF16). */
static size_t x_bytes_f32(int64_t n) { return (size_t)n * 4; }
static size_t x_bytes_bf16(int64_t n) { return (size_t)n * 2; }
static void convert_f32(const float *x, void *xq, int64_t n) { memcpy(xq, x, (size_t)n * 4); }
static void convert_f16(const float *x, void *xq, int64_t n) {
    float *o = xq;
    for (int64_t i = 0; i < n; i++) o[i] = f16_to_f32(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}
static void convert_bf16(const float *x, void *xq, int64_t n) {
    rw_bf16 *o = xq;
    for (int64_t i = 0; i < n; i++) o[i] = rw_f32_to_bf16(x[i]);
}

INLINE __m256 load_w_f32(const uint8_t *w, int64_t i) { return _mm256_loadu_ps((const float *)w + i); }
INLINE __m256 load_w_f16(const uint8_t *w, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const rw_f16 *)w + i)));
}
static float scalar_f32(const uint8_t *w, int64_t t) { return ((const float *)w)[t]; }
static float scalar_f16(const uint8_t *w, int64_t t) { return f16_to_f32(((const rw_f16 *)w)[t]); }

/* The AVX-512 tier's F32 / F16 dot: two 16-lane accumulators for the even
 * and odd 16-element pieces of each 32 (here a[0..1] and a[2..3]); the
 * last, partial 32 with zeros past the row (which leave the lanes as they
 * are); reduce16(a0 + a1). */
#define FLOAT_DOT(name, LOADW, SCALAR, ESZ)                                                                 \
    INLINE float name##_dot(int64_t n, const uint8_t *w, const float *x) {                                  \
        __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}; \
        int64_t k = 0;                                                                                      \
        for (; k + 32 <= n; k += 32) {                                                                      \
            rw_mm_prefetch_ahead(w + k * (ESZ), 32 * (ESZ));                                                \
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) a[c] =                                      \
                _mm256_fmadd_ps(LOADW(w, k + 8 * c), _mm256_loadu_ps(x + k + 8 * c), a[c]);                 \
        }                                                                                                   \
        if (k < n) {                                                                                        \
            float wt[32] = {0}, xt[32] = {0};                                                               \
            for (int64_t t = k; t < n; t++) wt[t - k] = SCALAR(w, t), xt[t - k] = x[t];                     \
            for (int c = 0; c < 4; c++)                                                                     \
                a[c] = _mm256_fmadd_ps(_mm256_loadu_ps(wt + 8 * c), _mm256_loadu_ps(xt + 8 * c), a[c]);     \
        }                                                                                                   \
        return reduce16(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));                              \
    }

FLOAT_DOT(f32, load_w_f32, scalar_f32, 4)
FLOAT_DOT(f16, load_w_f16, scalar_f16, 2)

/* 16 bf16 as their even and odd elements in f32 (8 pairs). */
INLINE void bf16_pairs(const rw_bf16 *p, __m256 *even, __m256 *odd) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)));
}

/* The AVX-512 tier's BF16 dot (vdpbf16ps): two 16-lane accumulators of
 * element pairs for the even and odd 32-element pieces of each 64, a lane
 * adding its odd product and then its even one (each exact in f32: an fma
 * rounds once, as the instruction does). */
INLINE float bf16_dot(int64_t n, const uint8_t *wp, const uint8_t *xp) {
    const rw_bf16 *w = (const rw_bf16 *)wp, *x = (const rw_bf16 *)xp;
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t k = 0;
    rw_bf16 wt[64], xt[64];
    while (k < n) {
        const rw_bf16 *ws_ = w + k, *xs_ = x + k;
        rw_mm_prefetch_ahead(wp + 2 * k, 128);
        if (k + 64 > n) { /* zeros past the row */
            memset(wt, 0, sizeof wt);
            memset(xt, 0, sizeof xt);
            memcpy(wt, w + k, (size_t)(n - k) * 2);
            memcpy(xt, x + k, (size_t)(n - k) * 2);
            ws_ = wt, xs_ = xt;
        }
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            __m256 we, wo, xe, xo;
            bf16_pairs(ws_ + 16 * c, &we, &wo);
            bf16_pairs(xs_ + 16 * c, &xe, &xo);
            a[c] = _mm256_fmadd_ps(we, xe, _mm256_fmadd_ps(wo, xo, a[c]));
        }
        k += 64;
    }
    return reduce16(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
}

#define FLOAT_TILE(name, DOT)                                                                                     \
    static void tile_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx, \
                            float *out) {                                                                         \
        for (int j = 0; j < nx; j++)                                                                              \
            for (int i = 0; i < nw; i++) out[j * nw + i] = DOT(n, w + i * ws, (const void *)(xq + j * xs));       \
    }
FLOAT_TILE(f32, f32_dot)
FLOAT_TILE(f16, f16_dot)
FLOAT_TILE(bf16, bf16_dot)

/* ==== 32-element blocks ================================================== */

/* Activation block: quants, per lane -bias*(sum of the lane's 4 quants),
 * the block scale (f16-rounded) and Q8_1's s. */
typedef struct {
    int8_t qs[32];
    int32_t base[8];
    float dx, sx;
    float pad[6];
} x_blk;

static size_t x_bytes_blk(int64_t n) { return (size_t)(n / 32) * sizeof(x_blk); }

static void convert_blocks(const float *x, void *xq, int64_t n, int bias, int with_s) {
    x_blk *o = xq;
    rw_block_q8_0 q0;
    rw_block_q8_1 q1;
    for (int64_t b = 0; b < n / 32; b++) {
        memset(&o[b], 0, sizeof o[b]);
        const int8_t *qs;
        if (with_s) {
            rw_quantize_act_q8_1(x + 32 * b, &q1, 1);
            qs = q1.qs;
            o[b].dx = f16_to_f32(q1.d);
            o[b].sx = f16_to_f32(q1.s);
        } else {
            rw_quantize_act_q8_0(x + 32 * b, &q0, 1);
            qs = q0.qs;
            o[b].dx = f16_to_f32(q0.d);
        }
        memcpy(o[b].qs, qs, 32);
        for (int l = 0; l < 8; l++) o[b].base[l] = -bias * (qs[4 * l] + qs[4 * l + 1] + qs[4 * l + 2] + qs[4 * l + 3]);
    }
}
static void convert_b0(const float *x, void *xq, int64_t n) { convert_blocks(x, xq, n, 0, 0); }
static void convert_b8(const float *x, void *xq, int64_t n) { convert_blocks(x, xq, n, 8, 0); }
static void convert_b16(const float *x, void *xq, int64_t n) { convert_blocks(x, xq, n, 16, 0); }
static void convert_q8_1(const float *x, void *xq, int64_t n) { convert_blocks(x, xq, n, 0, 1); }

/* An unpacked weight block: values (unsigned, or signed with sign_trick),
 * scale and min. */
typedef struct {
    __m256i v;
    float d, m;
} w_blk;

#define nibbles16 rw_avx2_nibbles16
#define q5_high   rw_avx2_q5_high

INLINE w_blk unpack_q8_0(const uint8_t *row, int64_t b) {
    const rw_block_q8_0 *p = (const rw_block_q8_0 *)row + b;
    return (w_blk){_mm256_loadu_si256((const __m256i *)p->qs), f16_to_f32(p->d), 0};
}
INLINE w_blk unpack_q4_0(const uint8_t *row, int64_t b) {
    const rw_block_q4_0 *p = (const rw_block_q4_0 *)row + b;
    return (w_blk){nibbles16(p->qs), f16_to_f32(p->d), 0};
}
INLINE w_blk unpack_q4_1(const uint8_t *row, int64_t b) {
    const rw_block_q4_1 *p = (const rw_block_q4_1 *)row + b;
    return (w_blk){nibbles16(p->qs), f16_to_f32(p->d), f16_to_f32(p->m)};
}
INLINE w_blk unpack_q5_0(const uint8_t *row, int64_t b) {
    const rw_block_q5_0 *p = (const rw_block_q5_0 *)row + b;
    return (w_blk){_mm256_or_si256(nibbles16(p->qs), q5_high(p->qh)), f16_to_f32(p->d), 0};
}
INLINE w_blk unpack_q5_1(const uint8_t *row, int64_t b) {
    const rw_block_q5_1 *p = (const rw_block_q5_1 *)row + b;
    return (w_blk){_mm256_or_si256(nibbles16(p->qs), q5_high(p->qh)), f16_to_f32(p->d), f16_to_f32(p->m)};
}

INLINE w_blk unpack_mxfp4(const uint8_t *row, int64_t b) {
    const rw_block_mxfp4 *p = (const rw_block_mxfp4 *)row + b;
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rw_avx2_mxfp4_values));
    return (w_blk){_mm256_shuffle_epi8(tab, nibbles16(p->qs)), rw_e8m0_half(p->e), 0};
}

/* Pair sums of signed w times x as 16 bits: |w| times x * sign(w). */
INLINE __m256i dot4_s16(__m256i w, __m256i x) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

/* 8 lanes of 4-product sums of w (unsigned, or signed if SIGNED) and x. */
INLINE __m256i dot4(__m256i w, __m256i x, int is_signed) {
    __m256i s16 = is_signed ? dot4_s16(w, x) : _mm256_maddubs_epi16(w, x);
    return _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
}

/* ORDER: B32_OURS (the AVX-512 tier's: 16 lanes, block b in lanes
 * 8 * (b % 2) + l, reduce16), B32_OURS_MIN (and the min term m * s onto
 * lane 0 of the block's half after its lanes), B32_GGML (ggml's AVX2
 * order: 8 lanes, one fma per lane and block, hsum8), B32_GGML_MIN (and
 * m * s onto a float sum of its own, added after the hsum). */
enum { B32_OURS, B32_OURS_MIN, B32_GGML, B32_GGML_MIN };

/* One block's step of one output onto its 8-lane accumulator a (and the
 * separate min sum *summs of B32_GGML_MIN). */
INLINE __m256 b32_step(__m256 a, float *summs, const w_blk *wb, const x_blk *xb, __m256i xv, const int SIGNED,
                       const int ORDER) {
    const __m256i p = _mm256_add_epi32(dot4(wb->v, xv, SIGNED), _mm256_load_si256((const __m256i *)xb->base));
    const __m256 d = _mm256_set1_ps(wb->d * xb->dx);
    if (ORDER == B32_OURS || ORDER == B32_OURS_MIN) {
        a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), d, a);
        if (ORDER == B32_OURS_MIN)
            a = _mm256_fmadd_ps(_mm256_setr_ps(wb->m, 0, 0, 0, 0, 0, 0, 0), _mm256_set1_ps(xb->sx), a);
        return a;
    }
    if (ORDER == B32_GGML_MIN) *summs = fmaf(wb->m, xb->sx, *summs);
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), a);
}

/* Blocks b (onto accumulator half H) for every output of the tile. */
#define B32_BLOCK(b, H, UNPACK, SIGNED, ORDER)                                              \
    do {                                                                                    \
        w_blk wb[NW];                                                                       \
        _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++) wb[i] = UNPACK(w + i * ws, b); \
        _Pragma("GCC unroll 2") for (int j = 0; j < nx; j++) {                              \
            const x_blk *xb = (const x_blk *)(xq + j * xs) + (b);                           \
            const __m256i xv = _mm256_load_si256((const __m256i *)xb->qs);                  \
            _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++) acc[i][j][H] =             \
                b32_step(acc[i][j][H], &summs[i][j], &wb[i], xb, xv, SIGNED, ORDER);        \
        }                                                                                   \
    } while (0)

#define BLOCK32_TILE(name, UNPACK, SIGNED, ORDER)                                                                 \
    INLINE void name##_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs,   \
                            const int nx, float *out) {                                                           \
        __m256 acc[NW][NX][2];                                                                                    \
        float summs[NW][NX];                                                                                      \
        _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++) _Pragma("GCC unroll 2") for (int j = 0; j < nx; j++) \
            acc[i][j][0] = acc[i][j][1] = _mm256_setzero_ps(),                                                    \
            summs[i][j] = 0.0f;                                                                                   \
        const int ours = ORDER == B32_OURS || ORDER == B32_OURS_MIN;                                              \
        const int64_t nb = n / 32;                                                                                \
        int64_t b = 0;                                                                                            \
        for (; b + 2 <= nb; b += 2) { /* ours: even blocks in lanes 0-7, odd ones in 8-15 */                      \
            B32_BLOCK(b, 0, UNPACK, SIGNED, ORDER);                                                               \
            if (ours) B32_BLOCK(b + 1, 1, UNPACK, SIGNED, ORDER);                                                 \
            else B32_BLOCK(b + 1, 0, UNPACK, SIGNED, ORDER);                                                      \
        }                                                                                                         \
        if (b < nb) B32_BLOCK(b, 0, UNPACK, SIGNED, ORDER);                                                       \
        _Pragma("GCC unroll 2") for (int j = 0; j < nx; j++) _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++) \
            out[j * nw + i] = ours                    ? reduce16(acc[i][j][0], acc[i][j][1])                      \
                              : ORDER == B32_GGML_MIN ? hsum8(acc[i][j][0]) + summs[i][j]                         \
                                                      : hsum8(acc[i][j][0]);                                      \
    }

BLOCK32_TILE(q4_1, unpack_q4_1, 0, B32_OURS_MIN)
BLOCK32_TILE(q5_1, unpack_q5_1, 0, B32_OURS_MIN)
BLOCK32_TILE(mxfp4_ggml, unpack_mxfp4, 1, B32_OURS)
BLOCK32_TILE(q8_0_ggml, unpack_q8_0, 1, B32_GGML)
BLOCK32_TILE(q4_0_ggml, unpack_q4_0, 0, B32_GGML)
BLOCK32_TILE(q5_0_ggml, unpack_q5_0, 0, B32_GGML)
BLOCK32_TILE(q4_1_ggml, unpack_q4_1, 0, B32_GGML_MIN)
BLOCK32_TILE(q5_1_ggml, unpack_q5_1, 0, B32_GGML_MIN)

/* Q8_0 (and Q4_0, Q5_0, IQ4_NL, MXFP4, their blocks decoded to int8 values
 * by rw_avx2_wt_q, T a constant where inlined) as the AVX-512 tier computes
 * it (matmul_q8_0_avx512.c): the exact
 * sum of each block, acc[k] = fma((float)isum_b, dw_b * dx_b, acc[k]) for
 * k = (b % 8) / 2, blocks in order; y = (acc[0] + acc[1]) + (acc[2] + acc[3]).
 * Eight blocks at a time: their sums in one vector, then blocks
 * 0 2 4 6 and 1 3 5 7 onto the four lanes. The activation row comes in
 * groups of eight blocks (quants, then the eight scales and the eight
 * -128 * (sum of the block's quants), even blocks first: 0 2 4 6 1 3 5 7;
 * zeros past the last block). A block sum is |w| times x * sign(w)
 * (vpmaddubsw, vpmaddwd), or with AVX-VNNI (w + 128) times x in one
 * vpdpbusd per 4 products, the bias taken off with corr: the same exact
 * integers. */
typedef struct {
    int8_t qs[8][32];
    float dx[8];
    int32_t corr[8];
} x_q8g;

static size_t x_bytes_q8g(int64_t n) { return (size_t)((n / 32 + 7) / 8) * sizeof(x_q8g); }

static void convert_q8g(const float *x, void *xq, int64_t n) {
    x_q8g *g = xq;
    memset(xq, 0, x_bytes_q8g(n));
    for (int64_t b = 0; b < n / 32; b++) {
        rw_f16 d;
        int sum;
        rw_avx2_act_q8_0(x + 32 * b, g[b / 8].qs[b % 8], &d, &sum);
        const int at = (int)((b % 2) * 4 + (b % 8) / 2); /* even blocks, then odd ones */
        g[b / 8].dx[at] = f16_to_f32(d);
        g[b / 8].corr[at] = -128 * sum;
    }
}

/* acc + the products of 4-byte groups of u (unsigned) and x (signed):
 * AVX-VNNI's vpdpbusd (VEX form, spelt in asm: the tier's ISA flags do not
 * include AVX-VNNI). */
INLINE __m256i dpbusd(__m256i acc, __m256i u, __m256i x) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(x));
    return acc;
}

/* The eight block sums [b0 b2 b4 b6], [b1 b3 b5 b7] as floats from the
 * eight-lane sums p[k] of block k (and VNNI's bias, corr). */
INLINE void q8_tree8(const __m256i p[8], const x_q8g *xg, const int VNNI, __m128 *v0, __m128 *v1) {
    /* per 128 bits: [b0 b1 b2 b3] partial sums, then the halves added */
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[2]), _mm256_hadd_epi32(p[4], p[6]));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[1], p[3]), _mm256_hadd_epi32(p[5], p[7]));
    __m128i s0 = _mm_add_epi32(_mm256_castsi256_si128(h0), _mm256_extracti128_si256(h0, 1));
    __m128i s1 = _mm_add_epi32(_mm256_castsi256_si128(h1), _mm256_extracti128_si256(h1, 1));
    if (VNNI) {
        s0 = _mm_add_epi32(s0, _mm_load_si128((const __m128i *)xg->corr));
        s1 = _mm_add_epi32(s1, _mm_load_si128((const __m128i *)(xg->corr + 4)));
    }
    *v0 = _mm_cvtepi32_ps(s0);
    *v1 = _mm_cvtepi32_ps(s1);
}

/* The eight block sums of blocks b0 .. b0 + cnt of row (cnt <= 8; the
 * others 0) against xg, as floats in two vectors [b0 b2 b4 b6], [b1 b3 b5 b7]. */
INLINE void q8_sums8(const uint8_t *row, int64_t b0, const x_q8g *xg, const int cnt, const int VNNI, __m128 *v0,
                     __m128 *v1, const int T) {
    __m256i p[8];
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
        if (k >= cnt) {
            p[k] = _mm256_setzero_si256();
            continue;
        }
        const __m256i w = rw_avx2_wt_q(row, b0 + k, T);
        const __m256i x = _mm256_load_si256((const __m256i *)xg->qs[k]);
        p[k] =
            VNNI ? dpbusd(_mm256_setzero_si256(), _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), x) : dot4(w, x, 1);
    }
    q8_tree8(p, xg, VNNI, v0, v1);
}

/* acc += blocks 0 2 4 6, then 1 3 5 7 (sums v0, v1; scales s in the same
 * order: [0 2 4 6 | 1 3 5 7]). */
INLINE __m128 q8_step8(__m128 acc, __m128 v0, __m128 v1, __m256 s) {
    acc = _mm_fmadd_ps(v0, _mm256_castps256_ps128(s), acc);
    return _mm_fmadd_ps(v1, _mm256_extractf128_ps(s, 1), acc);
}

/* The eight f16 scales of the blocks at p (blocks of size bytes, each
 * starting with its scale: all decoded types but MXFP4) as floats, even
 * blocks first (the f16 bits gathered in general registers: fewer vector
 * instructions). */
INLINE __m256 f16_dw8(const uint8_t *p, const size_t bytes) {
    uint16_t h[8];
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) memcpy(&h[k], p + k * bytes, 2);
    const uint64_t e = (uint64_t)h[0] | (uint64_t)h[2] << 16 | (uint64_t)h[4] << 32 | (uint64_t)h[6] << 48;
    const uint64_t o = (uint64_t)h[1] | (uint64_t)h[3] << 16 | (uint64_t)h[5] << 32 | (uint64_t)h[7] << 48;
    return _mm256_cvtph_ps(_mm_insert_epi64(_mm_cvtsi64_si128((long long)e), (long long)o, 1));
}

/* The same for eight MXFP4 blocks from p (17 bytes each). */
INLINE __m256 e8m0_dw8(const uint8_t *p) {
    return rw_avx2_e8m0_half8(_mm256_setr_epi32(p[0], p[34], p[68], p[102], p[17], p[51], p[85], p[119]));
}

/* The same for blocks b0 .. b0 + cnt of a row of type T (the others 0). */
INLINE __m256 wt_dw8(const uint8_t *row, int64_t b0, const int cnt, const int T) {
    const uint8_t *p = row + b0 * rw_avx2_wt_bytes(T);
    if (cnt == 8) return T == RW_AVX2_WT_MXFP4 ? e8m0_dw8(p) : f16_dw8(p, rw_avx2_wt_bytes(T));
    float d[8];
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) d[(k % 2) * 4 + k / 2] =
        k < cnt ? rw_avx2_wt_d(row, b0 + k, T) : 0.0f;
    return _mm256_loadu_ps(d);
}

enum { Q8_PF_DIST = 4096 }; /* bytes ahead in the row that the one-row dot prefetches */

/* 16 bytes at a and 16 at b as one vector [a | b] (the second a load
 * into the high half, not a shuffle). */
INLINE __m256i load2x16(const void *a, const void *b) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                   _mm_loadu_si128((const __m128i *)b), 1);
}

/* Q5_0's fifth bits for a block pair as two 32-bit masks: elements 0-15
 * of blocks 2j and 2j + 1 (*lo), 16-31 of each (*hi). */
INLINE void q5_pair_bits(const rw_block_q5_0 *a, const rw_block_q5_0 *b, uint32_t *lo, uint32_t *hi) {
    uint32_t ha, hb;
    memcpy(&ha, a->qh, 4);
    memcpy(&hb, b->qh, 4);
    *lo = (ha & 0xFFFFu) | hb << 16;
    *hi = ha >> 16 | (hb & 0xFFFF0000u);
}

/* The eight block sums of a group of Q4_0, Q5_0, IQ4_NL or MXFP4 blocks
 * in q8_tree8's form, with fewer instructions, for NR weight rows at once
 * (the activations loaded once): blocks 2j and 2j + 1 as two vectors of
 * their values as they lie, [elements 0-15 of 2j | of 2j + 1] and
 * [16-31 | 16-31], against the activations' matching halves; each block's
 * sum lies in one 128-bit half, so three hadds give [b0 b2 b4 b6 | b1 b3 b5
 * b7]. Q4_0 and Q5_0 enter unbiased (0..15, 0..31) and their -8 or -16
 * times the sum of the block's quants is corr / 16 or / 8 (corr = -128 *
 * sum); MXFP4 enters as its values + 16 (4..28, through its table) and
 * comes off as Q5_0's; IQ4_NL enters as its values + 128 with VNNI (corr as
 * it is), as |v| times x * sign(v) without: the same exact integers as
 * q8_sums8's. */
INLINE void wt_pair_sums8(const uint8_t *const wr[], const int NR, const x_q8g *const xgs[], const int NC,
                          const int VNNI, __m256 v[], const int T) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi16(1);
    const __m256i tab =
        T == RW_AVX2_WT_MXFP4
            ? _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rw_avx2_mxfp4_values)),
                              _mm256_set1_epi8(16))
            : _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rw_avx2_iq4nl_values)),
                               _mm256_set1_epi8(VNNI ? (char)0x80 : 0));
    /* the nibbles' offset in a block */
    const size_t bytes = rw_avx2_wt_bytes(T), qs = T == RW_AVX2_WT_Q5_0 ? 6 : T == RW_AVX2_WT_MXFP4 ? 1 : 2;
    /* p[o]: output o = r * NC + c */
    __m256i p[2][4];
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        __m256i xlo[2], xhi[2];
        _Pragma("GCC unroll 2") for (int c = 0; c < NC; c++) {
            xlo[c] = load2x16(xgs[c]->qs[2 * j], xgs[c]->qs[2 * j + 1]);
            xhi[c] = load2x16(xgs[c]->qs[2 * j] + 16, xgs[c]->qs[2 * j + 1] + 16);
        }
        _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++) {
            const uint8_t *b0 = wr[r] + 2 * j * bytes, *b1 = b0 + bytes;
            const __m256i q = load2x16(b0 + qs, b1 + qs);
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (T == RW_AVX2_WT_Q5_0) {
                uint32_t bl, bh;
                q5_pair_bits((const rw_block_q5_0 *)b0, (const rw_block_q5_0 *)b1, &bl, &bh);
                lo = _mm256_or_si256(lo, rw_avx2_q5_bits16(bl));
                hi = _mm256_or_si256(hi, rw_avx2_q5_bits16(bh));
            }
            if (T == RW_AVX2_WT_IQ4_NL || T == RW_AVX2_WT_MXFP4) {
                lo = _mm256_shuffle_epi8(tab, lo);
                hi = _mm256_shuffle_epi8(tab, hi);
            }
            _Pragma("GCC unroll 2") for (int c = 0; c < NC; c++) {
                const int o = r * NC + c;
                if (VNNI) p[o][j] = dpbusd(dpbusd(_mm256_setzero_si256(), lo, xlo[c]), hi, xhi[c]);
                else if (T == RW_AVX2_WT_IQ4_NL) /* pair sums up to 2 x 127 x 127: one vpmaddwd each */
                    p[o][j] = _mm256_add_epi32(_mm256_madd_epi16(dot4_s16(lo, xlo[c]), one),
                                               _mm256_madd_epi16(dot4_s16(hi, xhi[c]), one));
                else /* pair sums of 31 x 127 and their sums stay below 2^15 */
                    p[o][j] = _mm256_madd_epi16(
                        _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo[c]), _mm256_maddubs_epi16(hi, xhi[c])), one);
            }
        }
    }
    _Pragma("GCC unroll 2") for (int o = 0; o < NR * NC; o++) {
        const __m256i corr = _mm256_load_si256((const __m256i *)xgs[o % NC]->corr);
        const __m256i c = T == RW_AVX2_WT_Q4_0                            ? _mm256_srai_epi32(corr, 4)
                          : T == RW_AVX2_WT_Q5_0 || T == RW_AVX2_WT_MXFP4 ? _mm256_srai_epi32(corr, 3)
                          : VNNI                                          ? corr
                                                                          : _mm256_setzero_si256();
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[o][0], p[o][1]), _mm256_hadd_epi32(p[o][2], p[o][3]));
        v[o] = _mm256_cvtepi32_ps(_mm256_add_epi32(h, c));
    }
}

/* NR rows of Q4_0, Q5_0 or IQ4_NL against NC activation rows (xq + c *
 * xs; NR x NC <= 2: two weight rows against one, or one against two, each
 * pair of blocks decoded once for both): q8_0_dot's arithmetic per output;
 * output (r, c) goes to out[c * nw + r]. */
INLINE void wt_pair_dot_rows(int64_t n, const uint8_t *w, size_t ws, const int NR, const uint8_t *xq, size_t xs,
                             const int NC, const int VNNI, float *out, int nw, const int T) {
    const x_q8g *xgc[2];
    _Pragma("GCC unroll 2") for (int c = 0; c < NC; c++) xgc[c] = (const x_q8g *)(xq + (size_t)c * xs);
    const int64_t nb = n / 32, ng = nb / 8;
    const size_t bytes = rw_avx2_wt_bytes(T);
    __m128 acc[2];
    _Pragma("GCC unroll 2") for (int o = 0; o < NR * NC; o++) acc[o] = _mm_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *gb[2];
        __m256 v[2];
        _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++) {
            gb[r] = w + r * ws + 8 * g * bytes;
            _Pragma("GCC unroll 3") for (int l = 0; l < (int)(8 * bytes + 63) / 64; l++) /* 144 or 176 bytes a group */
                _mm_prefetch((const char *)gb[r] + Q8_PF_DIST + 64 * l, _MM_HINT_T0);
        }
        const x_q8g *xgs[2];
        _Pragma("GCC unroll 2") for (int c = 0; c < NC; c++) xgs[c] = xgc[c] + g;
        wt_pair_sums8(gb, NR, xgs, NC, VNNI, v, T);
        _Pragma("GCC unroll 2") for (int o = 0; o < NR * NC; o++) {
            const int r = o / NC, c = o % NC;
            acc[o] = q8_step8(acc[o], _mm256_castps256_ps128(v[o]), _mm256_extractf128_ps(v[o], 1),
                              _mm256_mul_ps(wt_dw8(gb[r], 0, 8, T), _mm256_load_ps(xgs[c]->dx)));
        }
    }
    const int cnt = (int)(nb - 8 * ng);
    _Pragma("GCC unroll 2") for (int o = 0; o < NR * NC; o++) {
        const int r = o / NC, c = o % NC;
        if (cnt) {
            __m128 v0, v1;
            q8_sums8(w + r * ws, 8 * ng, xgc[c] + ng, cnt, VNNI, &v0, &v1, T);
            const __m256 dw = wt_dw8(w + r * ws, 8 * ng, cnt, T);
            acc[o] = q8_step8(acc[o], v0, v1, _mm256_mul_ps(dw, _mm256_load_ps(xgc[c][ng].dx)));
        }
        float a[4];
        _mm_storeu_ps(a, acc[o]);
        out[c * nw + r] = (a[0] + a[1]) + (a[2] + a[3]);
    }
}

INLINE float q8_0_dot(int64_t n, const uint8_t *w, const uint8_t *xq, const int VNNI, const int T) {
    const x_q8g *xg = (const x_q8g *)xq;
    const int64_t nb = n / 32, ng = nb / 8;
    const size_t bytes = rw_avx2_wt_bytes(T);
    __m128 acc = _mm_setzero_ps(), v0, v1;
    for (int64_t g = 0; g < ng; g++) {
        _Pragma("GCC unroll 5") for (int l = 0; l < (int)(8 * bytes + 63) / 64; l++) /* Q8_0: 272 bytes a group */
            _mm_prefetch((const char *)w + (8 * g) * bytes + Q8_PF_DIST + 64 * l, _MM_HINT_T0);
        q8_sums8(w, 8 * g, xg + g, 8, VNNI, &v0, &v1, T);
        acc = q8_step8(acc, v0, v1, _mm256_mul_ps(wt_dw8(w, 8 * g, 8, T), _mm256_load_ps(xg[g].dx)));
    }
    const int cnt = (int)(nb - 8 * ng);
    if (cnt) { /* the missing blocks: sums and scales 0, which leave the lanes as they are */
        q8_sums8(w, 8 * ng, xg + ng, cnt, VNNI, &v0, &v1, T);
        acc = q8_step8(acc, v0, v1, _mm256_mul_ps(wt_dw8(w, 8 * ng, cnt, T), _mm256_load_ps(xg[ng].dx)));
    }
    float a[4];
    _mm_storeu_ps(a, acc);
    return (a[0] + a[1]) + (a[2] + a[3]);
}

/* Q8_0 with several activation rows (prefill): per weight row, each group
 * of eight blocks is prepared once (|w| for vpmaddubsw, or w + 128 for
 * vpdpbusd; the eight scales as floats) and used for up to Q8_NX
 * activation rows; every output's sums and float steps are q8_0_dot's. */
enum { Q8_NX = 8 };

typedef struct {
    __m256i aw[8], w[8]; /* |w| and w of each block; VNNI: w + 128 in aw */
    __m256 dw;           /* the eight scales */
} q8_wgroup;

INLINE void q8_prep(const uint8_t *row, int64_t b0, const int cnt, const int VNNI, q8_wgroup *o, const int T) {
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
        const __m256i v = k < cnt ? rw_avx2_wt_q(row, b0 + k, T) : _mm256_setzero_si256();
        o->w[k] = v;
        /* a missing block's w + 128 is 128 times x, but its scale is 0 */
        o->aw[k] = VNNI ? _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80)) : _mm256_sign_epi8(v, v);
    }
    o->dw = wt_dw8(row, b0, cnt, T);
}

/* q8_sums8 with the weight group prepared (blocks past cnt are zeros). */
INLINE void q8_sums8_prep(const q8_wgroup *wg, const x_q8g *xg, const int VNNI, __m128 *v0, __m128 *v1) {
    const __m256i one = _mm256_set1_epi16(1);
    __m256i p[8];
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
        const __m256i xv = _mm256_load_si256((const __m256i *)xg->qs[k]);
        p[k] = VNNI ? dpbusd(_mm256_setzero_si256(), wg->aw[k], xv)
                    : _mm256_madd_epi16(_mm256_maddubs_epi16(wg->aw[k], _mm256_sign_epi8(xv, wg->w[k])), one);
    }
    q8_tree8(p, xg, VNNI, v0, v1);
}

INLINE void q8_0_many(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs, const int nx,
                      float *out, const int VNNI, const int T) {
    const int64_t nb = n / 32, ngr = (nb + 7) / 8;
    for (int i = 0; i < nw; i++) {
        const uint8_t *row = w + i * ws;
        __m128 acc[Q8_NX];
        for (int j = 0; j < nx; j++) acc[j] = _mm_setzero_ps();
        for (int64_t g = 0; g < ngr; g++) {
            q8_wgroup wg;
            q8_prep(row, 8 * g, nb - 8 * g < 8 ? (int)(nb - 8 * g) : 8, VNNI, &wg, T);
            for (int j = 0; j < nx; j++) {
                const x_q8g *xg = (const x_q8g *)(xq + (size_t)j * xs) + g;
                __m128 v0, v1;
                q8_sums8_prep(&wg, xg, VNNI, &v0, &v1);
                acc[j] = q8_step8(acc[j], v0, v1, _mm256_mul_ps(wg.dw, _mm256_load_ps(xg->dx)));
            }
        }
        for (int j = 0; j < nx; j++) {
            float a[4];
            _mm_storeu_ps(a, acc[j]);
            out[j * nw + i] = (a[0] + a[1]) + (a[2] + a[3]);
        }
    }
}

INLINE void q8_0_rows(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx, float *out,
                      const int VNNI, const int T) {
    const int pair = T != RW_AVX2_WT_Q8_0;
    if (nx == 1 && pair) {
        int i = 0;
        for (; i + 2 <= nw; i += 2) wt_pair_dot_rows(n, w + i * ws, ws, 2, xq, xs, 1, VNNI, out + i, nw, T);
        if (i < nw) wt_pair_dot_rows(n, w + i * ws, ws, 1, xq, xs, 1, VNNI, out + i, nw, T);
    } else if (nx == 2 && pair)
        for (int i = 0; i < nw; i++) wt_pair_dot_rows(n, w + i * ws, ws, 1, xq, xs, 2, VNNI, out + i, nw, T);
    else if (nx == 1)
        for (int i = 0; i < nw; i++) out[i] = q8_0_dot(n, w + i * ws, xq, VNNI, T);
    else q8_0_many(n, w, ws, nw, xq, xs, nx, out, VNNI, T);
}

#define WT_TILE(name, T)                                                                                          \
    static void tile_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx, \
                            float *out) {                                                                         \
        if (rw_avx2_vnni()) q8_0_rows(n, w, ws, nw, xq, xs, nx, out, 1, T);                                       \
        else q8_0_rows(n, w, ws, nw, xq, xs, nx, out, 0, T);                                                      \
    }
WT_TILE(q8_0, RW_AVX2_WT_Q8_0)
WT_TILE(q4_0, RW_AVX2_WT_Q4_0)
WT_TILE(q5_0, RW_AVX2_WT_Q5_0)
WT_TILE(iq4_nl, RW_AVX2_WT_IQ4_NL)
WT_TILE(mxfp4, RW_AVX2_WT_MXFP4)

/* ==== K-quants =========================================================== */

/* Activation super-block: Q8_K's quants, bsums and d (the reference quantizer's bytes, in vectors). */
static size_t x_bytes_q8_K(int64_t n) { return (size_t)(n / 256) * sizeof(rw_block_q8_K); }
static void convert_q8_K(const float *x, void *xq, int64_t n) { rw_avx2_quantize_q8_K(x, xq, n); }

/* An unpacked super-block: 8 chunks of 32 values in element order, the
 * 16-bit scale of each pair of elements of each chunk, 16-bit mins per
 * 16-group (with dmin; bias*scale with dmin = d for biased types). */
typedef struct {
    __m256i u[8];
    __m256i s[8];
    __m256i mins;
    float d, dmin;
} w_super;

INLINE void k4_scale_min(const uint8_t s[12], int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* 16-bit lane k of each half of v, in every lane of that half. */
INLINE __m256i bcast16(__m256i v, int k) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(0x0100 + 0x0202 * k)));
}

/* *p in every 32-bit lane, loaded as such (vpbroadcastd from memory, a
 * load alone; spelt in asm, as the compiler would otherwise take a value it
 * has just stored from the register, through two shuffles). */
INLINE __m256i bcast32_mem(const int32_t *p) {
    __m256i r;
    __asm__("vpbroadcastd %1, %0" : "=x"(r) : "m"(*p));
    return r;
}

/* The fields of super-block sb of a Q4_K (five = 0; *qh = NULL) or Q5_K row. */
INLINE void k45_fields(const uint8_t *row, int64_t sb, int five, const uint8_t **scales, const uint8_t **qs,
                       const uint8_t **qh, rw_f16 *d, rw_f16 *dmin) {
    if (five) {
        const rw_block_q5_K *b = (const rw_block_q5_K *)row + sb;
        *scales = b->scales, *qs = b->qs, *qh = b->qh, *d = b->d, *dmin = b->dmin;
    } else {
        const rw_block_q4_K *b = (const rw_block_q4_K *)row + sb;
        *scales = b->scales, *qs = b->qs, *qh = NULL, *d = b->d, *dmin = b->dmin;
    }
}

INLINE void unpack_q4_K(const uint8_t *row, int64_t sb, w_super *o, int five) {
    const uint8_t *scales, *qs, *qh;
    rw_f16 d, dmin;
    k45_fields(row, sb, five, &scales, &qs, &qh, &d, &dmin);
    uint64_t sc, mn;
    k4_scales_mins(scales, &sc, &mn);
    const __m256i scv = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn));
    __m256i hv = five ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
        o->s[j] = bcast16(scv, j);
        __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * (j / 2)));
        if (j % 2) v = _mm256_srli_epi16(v, 4);
        v = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
        if (five) {
            __m256i bit = _mm256_set1_epi8((char)(1 << j));
            v = _mm256_or_si256(
                v, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hv, bit), bit), _mm256_set1_epi8(16)));
        }
        o->u[j] = v;
    }
    o->mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    o->d = f16_to_f32(d);
    o->dmin = f16_to_f32(dmin);
}
INLINE void unpack4_q4_K(const uint8_t *row, int64_t sb, w_super *o) { unpack_q4_K(row, sb, o, 0); }
INLINE void unpack4_q5_K(const uint8_t *row, int64_t sb, w_super *o) { unpack_q4_K(row, sb, o, 1); }

INLINE void unpack4_q6_K(const uint8_t *row, int64_t sb, w_super *o) {
    const rw_block_q6_K *b = (const rw_block_q6_K *)row + sb;
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    for (int h = 0; h < 2; h++) {
        __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        for (int k = 0; k < 4; k++) {
            __m256i lo = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (k % 2)));
            if (k >= 2) lo = _mm256_srli_epi16(lo, 4);
            lo = _mm256_and_si256(lo, _mm256_set1_epi8(0x0F));
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), _mm256_set1_epi8(0x03));
            o->u[4 * h + k] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
            o->s[4 * h + k] =
                _mm256_shuffle_epi8(/* [scale 8h + 2k x16 | 8h + 2k + 1 x16] */
                                    (h ? _mm256_permute4x64_epi64(sc, 0xEE) : _mm256_permute4x64_epi64(sc, 0x44)),
                                    _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * k + 1))),
                                                     _mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * k)))));
        }
    }
    o->mins = _mm256_slli_epi16(sc, 5); /* 32 * scale: the -32 bias */
    o->d = o->dmin = f16_to_f32(b->d);
}

/* The scale pairs of a super-block's eight chunks from its 16 16-bit
 * sub-block scales sc16 (chunk k: scale 2k in the low half, 2k + 1 in the
 * high one): one shuffle each, not a scalar's trip to the vector side. */
/* The scale pair of chunk k of a super-block (scale 2k in the low half,
 * 2k + 1 in the high one) from its 16 16-bit sub-block scales, given as
 * sc_lo = scales 0-7 and sc_hi = scales 8-15 in both halves: one shuffle,
 * not a scalar's trip to the vector side. */
INLINE __m256i chunk_scale(__m256i sc_lo, __m256i sc_hi, int k) {
    return _mm256_shuffle_epi8(k < 4 ? sc_lo : sc_hi,
                               _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * ((2 * k + 1) % 8))),
                                                _mm_set1_epi16((short)(0x0100 + 0x0202 * ((2 * k) % 8)))));
}
INLINE void chunk_scales16(__m256i sc16, __m256i s[8]) {
    const __m256i lo = _mm256_permute4x64_epi64(sc16, 0x44), hi = _mm256_permute4x64_epi64(sc16, 0xEE);
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) s[k] = chunk_scale(lo, hi, k);
}

/* Chunk j = 4h + s of a Q2_K (three = 0) or Q3_K super-block, q its 32
 * bytes of 2-bit quants h, hm (Q3_K) its hmask: bits 2s of q, and for
 * Q3_K bit j of hm as bit 2 (the 16-bit shifts carry bits across bytes
 * only away from bits 0-2). */
INLINE __m256i kl_chunk(__m256i q, __m256i hm, int j, const int three) {
    const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (j % 4)), _mm256_set1_epi8(0x03));
    if (!three) return v;
    const __m256i hb = j < 2 ? _mm256_slli_epi16(hm, 2 - j) : j == 2 ? hm : _mm256_srli_epi16(hm, j - 2);
    return _mm256_or_si256(v, _mm256_and_si256(hb, _mm256_set1_epi8(0x04)));
}

INLINE void unpack4_q2_K(const uint8_t *row, int64_t sb, w_super *o) {
    const rw_block_q2_K *b = (const rw_block_q2_K *)row + sb;
    const __m128i sv = _mm_loadu_si128((const __m128i *)b->scales);
    chunk_scales16(_mm256_cvtepu8_epi16(_mm_and_si128(sv, _mm_set1_epi8(0x0F))), o->s);
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) o->u[j] =
        kl_chunk(_mm256_loadu_si256((const __m256i *)(b->qs + 32 * (j / 4))), _mm256_setzero_si256(), j, 0);
    o->mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sv, 4), _mm_set1_epi8(0x0F)));
    o->d = f16_to_f32(b->d);
    o->dmin = f16_to_f32(b->dmin);
}

/* The 16 signed 6-bit scales of a Q3_K super-block as bytes: the low four
 * bits of scale g from byte g (g < 8, low nibble) or g - 8 (high nibble),
 * the top two from bits 2(g / 4) of byte 8 + g % 4; minus 32. */
INLINE __m128i q3_scales8(const uint8_t s[12]) {
    uint64_t lo8;
    uint32_t hi4;
    memcpy(&lo8, s, 8);
    memcpy(&hi4, s + 8, 4);
    const __m128i l = _mm_cvtsi64_si128((long long)lo8);
    const __m128i lo = _mm_and_si128(_mm_unpacklo_epi64(l, _mm_srli_epi16(l, 4)), _mm_set1_epi8(0x0F));
    const __m128i hi =
        _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)hi4), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(0x03));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

INLINE void unpack4_q3_K(const uint8_t *row, int64_t sb, w_super *o) {
    const rw_block_q3_K *b = (const rw_block_q3_K *)row + sb;
    const __m256i sc16 = _mm256_cvtepi8_epi16(q3_scales8(b->scales));
    chunk_scales16(sc16, o->s);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)b->hmask);
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) o->u[j] =
        kl_chunk(_mm256_loadu_si256((const __m256i *)(b->qs + 32 * (j / 4))), hm, j, 1);
    o->mins = _mm256_slli_epi16(sc16, 2); /* 4 * scale: the -4 bias */
    o->d = o->dmin = f16_to_f32(b->d);
}

/* The eight integer lanes of one super-block: lane l sums elements
 * 32c + 4l .. 32c + 4l + 3 of every chunk c times the chunk's scale pair
 * (maddubs, then madd with the scales); SIGNED weights via the sign trick. */
INLINE __m256i kq_lanes(const w_super *w, const rw_block_q8_K *xb, const int SIGNED) {
    __m256i isum = _mm256_setzero_si256();
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * k)), u = w->u[k];
        const __m256i s16 = SIGNED ? _mm256_maddubs_epi16(_mm256_sign_epi8(u, u), _mm256_sign_epi8(xv, u))
                                   : _mm256_maddubs_epi16(u, xv);
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(s16, w->s[k]));
    }
    return isum;
}

/* The 16 integer lanes [lo | hi] of one Q2_K / Q3_K super-block as the
 * AVX-512 tier holds them (matmul_kquant_avx512.c: vpmaddwd of packed lane
 * sums), t_c being the 8 lanes of chunk c (scale times the sum of products
 * 32c + 4l .. 32c + 4l + 3): lane 4L + m of each half sums lanes 4L + 2m',
 * 4L + 2m' + 1 of two chunks, which is hadd's layout: lo = hadd(t0, t2) +
 * hadd(t4, t6), hi = hadd(t1, t3) + hadd(t5, t7). (IQ4_XS: matmul_dot1_avx2.c.) */
INLINE void kq_lanes16(const w_super *w, const rw_block_q8_K *xb, __m256i *lo, __m256i *hi) {
    /* hadd is linear: hadd(t0, t2) + hadd(t4, t6) = hadd(t0 + t4, t2 + t6) */
    __m256i e[4];
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * k));
        const __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(w->u[k], xv), w->s[k]);
        e[k % 4] = k < 4 ? t : _mm256_add_epi32(e[k % 4], t);
    }
    *lo = _mm256_hadd_epi32(e[0], e[2]);
    *hi = _mm256_hadd_epi32(e[1], e[3]);
}

INLINE int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* The K-quant tiles in our order (the AVX-512 tier's, see the file head):
 *  - KX_MINS (Q4_K, Q5_K), KX_OFFSET (Q6_K): the super-block's exact
 *    integers I (scale . dot) and M (mins or 32 * scale . bsums), then the
 *    reference's scalar step acc + ((d*dx)*I - (dmin*dx)*M), or
 *    acc + (d*dx)*(I - M) (ISO C: not contracted);
 *  - KL_MADD (Q2_K, Q3_K): 16 lanes, acc = fma(lanes,
 *    d*dx, acc), then acc -= msum * (dmin*dx) as one fnmadd on lanes 0-7
 *    (the AVX-512 tier's fnmadd of a zero leaves lanes 8-15 as they are),
 *    reduce16. */
enum { KX_MINS, KX_OFFSET, KL_MADD };
#define KQUANT_TILE(name, UNPACK, KIND)                                                                              \
    INLINE void name##_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs,      \
                            const int nx, float *out) {                                                              \
        __m256 acc[NW][NX][2];                                                                                       \
        float accs[NW][NX];                                                                                          \
        _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++) _Pragma("GCC unroll 2") for (int j = 0; j < nx; j++)    \
            acc[i][j][0] = acc[i][j][1] = _mm256_setzero_ps(),                                                       \
            accs[i][j] = 0.0f;                                                                                       \
        for (int64_t sb = 0; sb < n / 256; sb++) {                                                                   \
            w_super wsb[NW];                                                                                         \
            _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++) UNPACK(w + i * ws, sb, &wsb[i]);                    \
            _Pragma("GCC unroll 2") for (int j = 0; j < nx; j++) {                                                   \
                const rw_block_q8_K *xb = (const rw_block_q8_K *)(xq + j * xs) + sb;                                 \
                const __m256i bs = _mm256_loadu_si256((const __m256i *)xb->bsums);                                   \
                const float dx = xb->d;                                                                              \
                _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++) {                                               \
                    const __m256i msum = _mm256_madd_epi16(wsb[i].mins, bs);                                         \
                    if (KIND == KX_MINS || KIND == KX_OFFSET) {                                                      \
                        const int32_t I = hsum_epi32(kq_lanes(&wsb[i], xb, 0)), M = hsum_epi32(msum);                \
                        accs[i][j] = KIND == KX_MINS                                                                 \
                                         ? accs[i][j] + ((wsb[i].d * dx) * (float)I - (wsb[i].dmin * dx) * (float)M) \
                                         : accs[i][j] + (wsb[i].d * dx) * (float)(I - M);                            \
                        continue;                                                                                    \
                    }                                                                                                \
                    __m256i lo, hi;                                                                                  \
                    kq_lanes16(&wsb[i], xb, &lo, &hi);                                                               \
                    const __m256 dd = _mm256_set1_ps(wsb[i].d * dx), dm = _mm256_set1_ps(wsb[i].dmin * dx);          \
                    acc[i][j][0] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), dm,                                    \
                                                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), dd, acc[i][j][0]));      \
                    acc[i][j][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), dd, acc[i][j][1]);                        \
                }                                                                                                    \
            }                                                                                                        \
        }                                                                                                            \
        _Pragma("GCC unroll 2") for (int j = 0; j < nx; j++) _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++)    \
            out[j * nw + i] =                                                                                        \
                KIND == KX_MINS || KIND == KX_OFFSET ? accs[i][j] : reduce16(acc[i][j][0], acc[i][j][1]);            \
    }

/* The K-quant tile in ggml's order (RW_NUMERICS_GGML and auto; matmul_ref.c).
 * The integer lanes are already ggml's (lane l: elements 32c + 4l .. 32c +
 * 4l + 3 of every chunk c, times the chunk's scale); acc = fma(d * dx,
 * (float)lanes, acc), where for KG_OFFSET (Q6_K) the lanes first lose
 * 32 * scale . bsums of chunk l (the msum lanes); for KG_MINS4 (Q4_K) the
 * min lanes k (msum lanes 2k + 2k+1) go to accm = fma(-dmin * dx, ., accm),
 * for KG_MINS1 (Q5_K) their sum to accm's lane 0. The output hsum8(acc)
 * plus (m0 + m2) + (m1 + m3), or m0. */
enum { KG_OFFSET = 0, KG_MINS4 = 1, KG_MINS1 = 2 };
#define KQUANT_TILE_IN(fn, UNPACK, SIGNED, ORDER)                                                                      \
    INLINE void fn(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs, const int nx,   \
                   float *out) {                                                                                       \
        __m256 acc[NW][NX];                                                                                            \
        __m128 accm[NW][NX];                                                                                           \
        _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++) _Pragma("GCC unroll 2") for (int j = 0; j < nx; j++)      \
            acc[i][j] = _mm256_setzero_ps(),                                                                           \
            accm[i][j] = _mm_setzero_ps();                                                                             \
        for (int64_t sb = 0; sb < n / 256; sb++) {                                                                     \
            w_super wsb[NW];                                                                                           \
            _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++) UNPACK(w + i * ws, sb, &wsb[i]);                      \
            _Pragma("GCC unroll 2") for (int j = 0; j < nx; j++) {                                                     \
                const rw_block_q8_K *xb = (const rw_block_q8_K *)(xq + j * xs) + sb;                                   \
                __m256i bs = _mm256_loadu_si256((const __m256i *)xb->bsums);                                           \
                _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++) {                                                 \
                    __m256i isum = kq_lanes(&wsb[i], xb, SIGNED);                                                      \
                    const __m256i msum = _mm256_madd_epi16(wsb[i].mins, bs);                                           \
                    if (ORDER == KG_OFFSET) isum = _mm256_sub_epi32(isum, msum);                                       \
                    const __m256 dd = _mm256_set1_ps(xb->d * wsb[i].d);                                                \
                    acc[i][j] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum), acc[i][j]);                              \
                    if (ORDER != KG_OFFSET) {                                                                          \
                        __m128i m4 = _mm_hadd_epi32(_mm256_castsi256_si128(msum), _mm256_extracti128_si256(msum, 1));  \
                        if (ORDER == KG_MINS1) m4 = _mm_hadd_epi32(_mm_hadd_epi32(m4, m4), _mm_setzero_si128());       \
                        accm[i][j] = _mm_fmadd_ps(_mm_set1_ps(-xb->d * wsb[i].dmin), _mm_cvtepi32_ps(m4), accm[i][j]); \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        _Pragma("GCC unroll 2") for (int j = 0; j < nx; j++) _Pragma("GCC unroll 2") for (int i = 0; i < nw; i++) {    \
            float m[4];                                                                                                \
            _mm_storeu_ps(m, accm[i][j]);                                                                              \
            const float h = hsum8(acc[i][j]);                                                                          \
            out[j * nw + i] = ORDER == KG_MINS4   ? h + ((m[0] + m[2]) + (m[1] + m[3]))                                \
                              : ORDER == KG_MINS1 ? h + m[0]                                                           \
                                                  : h;                                                                 \
        }                                                                                                              \
    }
#define KQUANT_GGML_TILE(name, UNPACK, ORDER) KQUANT_TILE_IN(name##_ggml_impl, UNPACK, 0, ORDER)

/* Q4_K, Q5_K, Q6_K in our order with one activation row (decode): the
 * super-block straight from its bytes, no unpacked copy; the integers are
 * the unpacked tile's (exact), the scalar step the same. */

/* I and M of the eight lanes isum, msum. */
INLINE void hsum2_epi32(__m256i isum, __m256i msum, int32_t *I, int32_t *M) {
    const __m256i h = _mm256_hadd_epi32(isum, msum); /* [i01 i23 m01 m23 | i45 i67 m45 m67] */
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    s = _mm_hadd_epi32(s, s);
    *I = _mm_cvtsi128_si32(s);
    *M = _mm_extract_epi32(s, 1);
}

/* Prefetches the super-block K1_PF_DIST bytes past super-block sb of a row
 * of blk-byte super-blocks (lines bytes of it): the hardware prefetcher
 * alone does not run far enough ahead of the one-row dots, whose reads
 * then wait on memory between their sums. */
enum { K1_PF_DIST = 2048 };
INLINE void k1_prefetch(const uint8_t *w, int64_t sb, size_t blk, const int lines) {
    const char *pf = (const char *)w + (size_t)sb * blk + K1_PF_DIST;
    _Pragma("GCC unroll 4") for (int l = 0; l < lines; l++) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
}

/* acc + p * s (16-bit pairs multiplied and added into 32-bit lanes):
 * AVX-VNNI's vpdpwssd (VEX form, spelt in asm) where VNNI, else vpmaddwd
 * and vpaddd; both wrap in 32 bits, so the same exact integers. */
INLINE __m256i madd_acc(__m256i acc, __m256i p, __m256i s, const int VNNI) {
    if (!VNNI) return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(p), "x"(s));
    return acc;
}

/* The variants of the Q4_K / Q5_K one-row and few-row forms (the same
 * integers): K_VNNI sums with AVX-VNNI; K_SHUF broadcasts each sub-block's
 * scale pair with a shuffle from a register, else with a load from a small
 * stored table. The load is faster on Intel cores, whose one or two shuffle
 * ports these loops keep busiest (Xeon, Sapphire Rapids class: 8% in cache);
 * the shuffle on AMD's (Zen 3: 11%), where the loads wait on the store. */
enum { K_VNNI = 1, K_SHUF = 2 };
INLINE int k45_mode(void) { return (rw_avx2_vnni() ? K_VNNI : 0) | (rw_matmul_k_scale_shuffle() ? K_SHUF : 0); }

/* The most activation rows of the few-row forms below (k_dot_rows). */
enum { KR_NX = 4 };

/* The integer lanes of super-block sb of a Q4_K / Q5_K row against
 * activation rows xb[0..NR): isum[r] (scale_j * dot_j summed over the
 * sub-blocks j) and msum[r] (min_j * the activation's 16-sums); I and M
 * are their lane sums. Each chunk is decoded once for all the rows; CHAINS
 * (1, 2 or 4) accumulators a row: one row alone is bound by one chain's
 * latency, several rows side by side hide it (fewer instructions). */
INLINE void q45_K_lanes_rows(const uint8_t *w, int64_t sb, const rw_block_q8_K *const *xb, const int NR, const int five,
                             const int MODE, const int CHAINS, __m256i *isum, __m256i *msum) {
    const int VNNI = MODE & K_VNNI, SHUF = MODE & K_SHUF;
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    const uint8_t *scales, *qs, *qh;
    rw_f16 d, dmin;
    k45_fields(w, sb, five, &scales, &qs, &qh, &d, &dmin);
    uint64_t sc, mn;
    k4_scales_mins(scales, &sc, &mn);
    /* each scale as a (scale, scale) pair of 16-bit halves, stored so that
     * each sub-block's broadcast is a load (vpbroadcastd from memory takes
     * no shuffle port: eight shuffles a super-block were the most of any
     * one kind of instruction here) */
    int32_t sp[8] __attribute__((aligned(32)));
    const __m256i s32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc));
    const __m256i scv = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
    if (!SHUF) _mm256_store_si256((__m256i *)sp, _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16)));
    const __m128i m8 = _mm_cvtsi64_si128((long long)mn);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* each min twice */
    const __m256i hv = five ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    __m256i a[KR_NX][4];
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (five) { /* bit j of qh[l]: element 32j + l's fifth bit, shifted to bit 4 (the 16-bit
                     * shifts carry bits across bytes only below bit 4 or above it) */
            const int j = 2 * c;
            const __m256i h0 = j <= 4 ? _mm256_slli_epi16(hv, 4 - j) : _mm256_srli_epi16(hv, j - 4);
            const __m256i h1 = j + 1 <= 4 ? _mm256_slli_epi16(hv, 3 - j) : _mm256_srli_epi16(hv, j - 3);
            lo = _mm256_or_si256(lo, _mm256_and_si256(h0, b4));
            hi = _mm256_or_si256(hi, _mm256_and_si256(h1, b4));
        }
        const __m256i s0 = SHUF ? bcast16(scv, 2 * c) : bcast32_mem(&sp[2 * c]);
        const __m256i s1 = SHUF ? bcast16(scv, 2 * c + 1) : bcast32_mem(&sp[2 * c + 1]);
        const int k = c % CHAINS;
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)(xb[r]->qs + 64 * c));
            const __m256i x1 = _mm256_loadu_si256((const __m256i *)(xb[r]->qs + 64 * c + 32));
            const __m256i p0 = _mm256_maddubs_epi16(lo, x0), p1 = _mm256_maddubs_epi16(hi, x1);
            const __m256i t = c < CHAINS ? _mm256_madd_epi16(p0, s0) : madd_acc(a[r][k], p0, s0, VNNI);
            a[r][k] = madd_acc(t, p1, s1, VNNI);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
        isum[r] = CHAINS == 4 ? _mm256_add_epi32(_mm256_add_epi32(a[r][0], a[r][1]), _mm256_add_epi32(a[r][2], a[r][3]))
                  : CHAINS == 2 ? _mm256_add_epi32(a[r][0], a[r][1])
                                : a[r][0];
        msum[r] = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)xb[r]->bsums));
    }
}

/* The same for one activation row. */
INLINE void q45_K_lanes(const uint8_t *w, int64_t sb, const rw_block_q8_K *xb, const int five, const int MODE,
                        const int CHAINS, __m256i *isum_out, __m256i *msum_out) {
    q45_K_lanes_rows(w, sb, &xb, 1, five, MODE, CHAINS, isum_out, msum_out);
}

/* [I_a M_a I_b M_b]: the lane sums of two super-blocks' isum and msum. */
INLINE __m128i hsum4_epi32(__m256i ia, __m256i ma, __m256i ib, __m256i mb) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(ia, ma), _mm256_hadd_epi32(ib, mb));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* Two super-blocks at a time: their four integers come out of one hadd
 * tree and their products in one 4-lane step; then each super-block's
 * scalar step in order, acc + ((d * dx) * I - (dmin * dx) * M) (the same
 * IEEE operations as one at a time, not contracted). */
INLINE float q45_K_dot1(int64_t n, const uint8_t *w, const uint8_t *xq, const int five, const int MODE) {
    const rw_block_q8_K *x = (const rw_block_q8_K *)xq;
    const size_t blk = five ? sizeof(rw_block_q5_K) : sizeof(rw_block_q4_K);
    const int64_t nsb = n / 256;
    float acc = 0.0f;
    int64_t sb = 0;
    for (; sb + 1 < nsb; sb += 2) {
        k1_prefetch(w, sb, blk, 3);
        k1_prefetch(w, sb + 1, blk, 3);
        __m256i ia, ma, ib, mb;
        q45_K_lanes(w, sb, x + sb, five, MODE, 4, &ia, &ma);
        q45_K_lanes(w, sb + 1, x + sb + 1, five, MODE, 4, &ib, &mb);
        const __m128 im = _mm_cvtepi32_ps(hsum4_epi32(ia, ma, ib, mb));
        /* d, dmin lead both block types: [d_a dmin_a d_b dmin_b] */
        uint32_t ha, hb;
        memcpy(&ha, w + (size_t)sb * blk, 4);
        memcpy(&hb, w + (size_t)(sb + 1) * blk, 4);
        const __m128 dd = _mm_cvtph_ps(_mm_unpacklo_epi32(_mm_cvtsi32_si128((int)ha), _mm_cvtsi32_si128((int)hb)));
        const __m128 dx = _mm_setr_ps(x[sb].d, x[sb].d, x[sb + 1].d, x[sb + 1].d);
        const __m128 p = _mm_mul_ps(_mm_mul_ps(dd, dx), im);
        const __m128 t = _mm_hsub_ps(p, p); /* [p0 - p1, p2 - p3] */
        acc = acc + _mm_cvtss_f32(t);
        acc = acc + _mm_cvtss_f32(_mm_movehdup_ps(t));
    }
    if (sb < nsb) {
        k1_prefetch(w, sb, blk, 3);
        __m256i ia, ma;
        q45_K_lanes(w, sb, x + sb, five, MODE, 4, &ia, &ma);
        const __m128i h = hsum4_epi32(ia, ma, ia, ma);
        const rw_block_q4_K *b = (const rw_block_q4_K *)(w + (size_t)sb * blk); /* d, dmin lead both types */
        const float dx = x[sb].d;
        acc = acc + ((f16_to_f32(b->d) * dx) * (float)_mm_cvtsi128_si32(h) -
                     (f16_to_f32(b->dmin) * dx) * (float)_mm_extract_epi32(h, 1));
    }
    return acc;
}

/* The integer lanes of super-block sb of a Q6_K row against activation
 * rows xb[0..NR): isum[r] (scale * dot, the quants 0..63) and msum[r]
 * (32 * scale . bsums, the -32); two chains a row. */
INLINE void q6_K_lanes_rows(const rw_block_q6_K *b, const rw_block_q8_K *const *xb, const int NR, const int VNNI,
                            __m256i *isum, __m256i *msum) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    __m256i a[KR_NX][2];
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        /* scales 8h .. 8h+7 in both halves: chunk k takes 2k (low half) and 2k + 1 */
        const __m256i sch = (h ? _mm256_permute4x64_epi64(sc16, 0xEE) : _mm256_permute4x64_epi64(sc16, 0x44));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const __m256i ql = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (k % 2)));
            const __m256i lo = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), m4);
            /* bits 2k, 2k + 1 of qh to bits 4, 5 (the 16-bit shifts carry
             * bits across bytes only outside bits 4, 5) */
            const __m256i hi = _mm256_and_si256(k < 2    ? _mm256_slli_epi16(qh, 4 - 2 * k)
                                                : k == 2 ? qh
                                                         : _mm256_srli_epi16(qh, 2),
                                                m2);
            const __m256i s =
                _mm256_shuffle_epi8(sch, _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * k + 1))),
                                                          _mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * k)))));
            const __m256i q = _mm256_or_si256(lo, hi);
            _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xb[r]->qs + 128 * h + 32 * k));
                const __m256i p = _mm256_maddubs_epi16(q, xv);
                a[r][h] = k == 0 ? _mm256_madd_epi16(p, s) : madd_acc(a[r][h], p, s, VNNI);
            }
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
        isum[r] = _mm256_add_epi32(a[r][0], a[r][1]);
        msum[r] = _mm256_madd_epi16(_mm256_slli_epi16(sc16, 5), _mm256_loadu_si256((const __m256i *)xb[r]->bsums));
    }
}

/* The same for one activation row. */
INLINE void q6_K_lanes(const rw_block_q6_K *b, const rw_block_q8_K *xb, const int VNNI, __m256i *isum_out,
                       __m256i *msum_out) {
    q6_K_lanes_rows(b, &xb, 1, VNNI, isum_out, msum_out);
}

/* Two super-blocks at a time as q45_K_dot1: acc + (d * dx) * (float)(I - M)
 * for each in order. */
INLINE float q6_K_dot1(int64_t n, const uint8_t *w, const uint8_t *xq, const int VNNI) {
    const rw_block_q8_K *x = (const rw_block_q8_K *)xq;
    const rw_block_q6_K *b = (const rw_block_q6_K *)w;
    const int64_t nsb = n / 256;
    float acc = 0.0f;
    int64_t sb = 0;
    for (; sb + 1 < nsb; sb += 2) {
        k1_prefetch(w, sb, sizeof(rw_block_q6_K), 4);
        k1_prefetch(w, sb + 1, sizeof(rw_block_q6_K), 4);
        __m256i ia, ma, ib, mb;
        q6_K_lanes(b + sb, x + sb, VNNI, &ia, &ma);
        q6_K_lanes(b + sb + 1, x + sb + 1, VNNI, &ib, &mb);
        const __m128i im = hsum4_epi32(ia, ma, ib, mb);                /* [I_a M_a I_b M_b] */
        const __m128i dim = _mm_sub_epi32(im, _mm_srli_epi64(im, 32)); /* I - M in lanes 0, 2 */
        const __m128 dd = _mm_cvtph_ps(_mm_setr_epi16((short)b[sb].d, 0, (short)b[sb + 1].d, 0, 0, 0, 0, 0));
        const __m128 dx = _mm_setr_ps(x[sb].d, 0.0f, x[sb + 1].d, 0.0f);
        const __m128 p = _mm_mul_ps(_mm_mul_ps(dd, dx), _mm_cvtepi32_ps(dim));
        acc = acc + _mm_cvtss_f32(p);
        acc = acc + _mm_cvtss_f32(_mm_movehl_ps(p, p));
    }
    if (sb < nsb) {
        k1_prefetch(w, sb, sizeof(rw_block_q6_K), 4);
        __m256i ia, ma;
        q6_K_lanes(b + sb, x + sb, VNNI, &ia, &ma);
        const __m128i h = hsum4_epi32(ia, ma, ia, ma);
        acc = acc + (f16_to_f32(b[sb].d) * x[sb].d) * (float)(_mm_cvtsi128_si32(h) - _mm_extract_epi32(h, 1));
    }
    return acc;
}

/* Eight weight rows at a time (one activation row): the integer lanes of
 * each row's super-block as above, the eight rows' I and M folded in one
 * transposition tree (unpack and add: vphaddd is slow on some cores), then
 * the scalar step of all eight rows as one 8-lane step, each lane with the
 * scalar step's operations in its order (not contracted). */

/* [I_a M_a I_b M_b] per 128-bit half (that half's share of the lane sums). */
INLINE __m256i k8_pair(__m256i ia, __m256i ma, __m256i ib, __m256i mb) {
    const __m256i ta = _mm256_add_epi32(_mm256_unpacklo_epi32(ia, ma), _mm256_unpackhi_epi32(ia, ma));
    const __m256i tb = _mm256_add_epi32(_mm256_unpacklo_epi32(ib, mb), _mm256_unpackhi_epi32(ib, mb));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(ta, tb), _mm256_unpackhi_epi64(ta, tb));
}

/* [a.lo + a.hi | b.lo + b.hi]: the two halves' shares added. */
INLINE __m256i k8_halves(__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

/* Prefetches quarter q (0..3) of step sb's share of the next eight rows
 * (pf: their first byte; 8 * blk bytes a step, in address order): eight
 * rows read side by side are eight streams, which the hardware prefetcher
 * and a fixed distance ahead in each row serve badly from memory. A step's
 * 18 (Q6_K: 27) lines asked for at once held up the step's own loads; a
 * quarter before each pair of rows measured 6-14% less time for Q4_K and
 * 13-20% for Q6_K (Zen 3, 2 threads, from memory; halves: 4-6% slower than
 * quarters, eighths much slower). */
INLINE void k8_prefetch(const uint8_t *pf, int64_t sb, size_t blk, int q) {
    const char *p = (const char *)pf + (size_t)sb * 8 * blk;
    const size_t n = (8 * blk + 63) / 64;
    for (size_t l = n * (size_t)q / 4; l < n * (size_t)(q + 1) / 4; l++) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
}

INLINE uint32_t k8_ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Rows r[0..8): out[k] = q45_K_dot1 of row r[k] (the same bits). The lanes
 * of the step are rows 0 1 4 5 | 2 3 6 7. */
INLINE void q45_K_dot8(int64_t n, const uint8_t *const r[8], const uint8_t *pf, const uint8_t *xq, const int five,
                       const int MODE, float out[8]) {
    const rw_block_q8_K *x = (const rw_block_q8_K *)xq;
    const size_t blk = five ? sizeof(rw_block_q5_K) : sizeof(rw_block_q4_K);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < n / 256; sb++) {
        __m256i u[4];
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
            k8_prefetch(pf, sb, blk, q);
            __m256i ia, ma, ib, mb;
            q45_K_lanes(r[2 * q], sb, x + sb, five, MODE, 1, &ia, &ma);
            q45_K_lanes(r[2 * q + 1], sb, x + sb, five, MODE, 1, &ib, &mb);
            u[q] = k8_pair(ia, ma, ib, mb);
        }
        const size_t o = (size_t)sb * blk; /* d, dmin lead both block types */
        const __m256 dx = _mm256_set1_ps(x[sb].d);
        /* [I0 M0 I1 M1 | I2 M2 I3 M3] against [d0 dmin0 d1 dmin1 | ...], rows 4-7 alike */
        const __m256 d0 = _mm256_cvtph_ps(_mm_setr_epi32((int)k8_ld32(r[0] + o), (int)k8_ld32(r[1] + o),
                                                         (int)k8_ld32(r[2] + o), (int)k8_ld32(r[3] + o)));
        const __m256 d1 = _mm256_cvtph_ps(_mm_setr_epi32((int)k8_ld32(r[4] + o), (int)k8_ld32(r[5] + o),
                                                         (int)k8_ld32(r[6] + o), (int)k8_ld32(r[7] + o)));
        const __m256 p0 = _mm256_mul_ps(_mm256_mul_ps(d0, dx), _mm256_cvtepi32_ps(k8_halves(u[0], u[1])));
        const __m256 p1 = _mm256_mul_ps(_mm256_mul_ps(d1, dx), _mm256_cvtepi32_ps(k8_halves(u[2], u[3])));
        acc = _mm256_add_ps(acc, _mm256_sub_ps(_mm256_shuffle_ps(p0, p1, 0x88), _mm256_shuffle_ps(p0, p1, 0xDD)));
    }
    float a[8];
    _mm256_storeu_ps(a, acc);
    out[0] = a[0], out[1] = a[1], out[4] = a[2], out[5] = a[3];
    out[2] = a[4], out[3] = a[5], out[6] = a[6], out[7] = a[7];
}

/* [a0 + a2, b0 + b2, a1 + a3, b1 + b3] per half. */
INLINE __m256i k8_pair1(__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

/* Q6_K rows r[0..8): out[k] = q6_K_dot1 of row r[k] (the same bits); the
 * lanes of the step are rows 0..7 in order. */
INLINE void q6_K_dot8(int64_t n, const uint8_t *const r[8], const uint8_t *pf, const uint8_t *xq, const int VNNI,
                      float out[8]) {
    const rw_block_q8_K *x = (const rw_block_q8_K *)xq;
    const size_t blk = sizeof(rw_block_q6_K);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < n / 256; sb++) {
        __m256i t[4];
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
            k8_prefetch(pf, sb, blk, q);
            __m256i ia, ma, ib, mb;
            q6_K_lanes((const rw_block_q6_K *)r[2 * q] + sb, x + sb, VNNI, &ia, &ma);
            q6_K_lanes((const rw_block_q6_K *)r[2 * q + 1] + sb, x + sb, VNNI, &ib, &mb);
            t[q] = k8_pair1(_mm256_sub_epi32(ia, ma), _mm256_sub_epi32(ib, mb)); /* I - M lanes */
        }
        const __m256i u0 = _mm256_add_epi32(_mm256_unpacklo_epi64(t[0], t[1]), _mm256_unpackhi_epi64(t[0], t[1]));
        const __m256i u1 = _mm256_add_epi32(_mm256_unpacklo_epi64(t[2], t[3]), _mm256_unpackhi_epi64(t[2], t[3]));
        const size_t o = (size_t)sb * blk + offsetof(rw_block_q6_K, d);
        rw_f16 h[8];
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) memcpy(&h[k], r[k] + o, 2);
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
        const __m256 p =
            _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(x[sb].d)), _mm256_cvtepi32_ps(k8_halves(u0, u1)));
        acc = _mm256_add_ps(acc, p);
    }
    _mm256_storeu_ps(out, acc);
}

/* The most activation rows of one tile call of the K-quants in our order:
 * 2 to KR_NX rows go to the few-row forms below (each chunk decoded once
 * for the rows), more in balanced groups of them (measured on Zen 3
 * against an unpack-once tile, which spilled its sums: Q4_K 5 rows 2.5x,
 * Q6_K 5-16 rows 1.2-2x faster); from fly_min_rows up the panel form. */
enum { KX_NX = 16 };

/* Fewest rows that pack the Q4_K and Q6_K panels on the fly: measured on
 * Zen 3 (in-process A/B, 2 threads, matrices of 1024x3584 to 2560x10240),
 * the Q4_K panel form is 0-36% faster than the few-row groups from 5 rows,
 * the Q6_K one (larger panels) 0-19% from 8 and 25-35% from 12; below,
 * the packing costs more than it saves. */
enum { K_FLY_MIN = 5, K6_FLY_MIN = 8 };

KQUANT_TILE(q2_K, unpack4_q2_K, KL_MADD)
KQUANT_TILE(q3_K, unpack4_q3_K, KL_MADD)
KQUANT_TILE(q4_K, unpack4_q4_K, KX_MINS)
KQUANT_TILE(q5_K, unpack4_q5_K, KX_MINS)
KQUANT_TILE(q6_K, unpack4_q6_K, KX_OFFSET)
/* One Q2_K (three = 0) or Q3_K row against one activation row: the tile's
 * KL_MADD steps, each chunk decoded where it is used (an unpacked
 * super-block does not fit the registers beside the sums). */
INLINE float kl_dot1(int64_t n, const uint8_t *w, const uint8_t *xq, const int three) {
    const rw_block_q8_K *x = (const rw_block_q8_K *)xq;
    const size_t blk = three ? sizeof(rw_block_q3_K) : sizeof(rw_block_q2_K);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < n / 256; sb++) {
        k1_prefetch(w, sb, blk, 2);
        __m256i sc16, mins, hm = _mm256_setzero_si256();
        const uint8_t *qs;
        float d, dmin;
        if (three) {
            const rw_block_q3_K *b = (const rw_block_q3_K *)w + sb;
            sc16 = _mm256_cvtepi8_epi16(q3_scales8(b->scales));
            mins = _mm256_slli_epi16(sc16, 2);
            hm = _mm256_loadu_si256((const __m256i *)b->hmask);
            qs = b->qs, d = dmin = f16_to_f32(b->d);
        } else {
            const rw_block_q2_K *b = (const rw_block_q2_K *)w + sb;
            const __m128i sv = _mm_loadu_si128((const __m128i *)b->scales);
            sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sv, _mm_set1_epi8(0x0F)));
            mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sv, 4), _mm_set1_epi8(0x0F)));
            qs = b->qs, d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
        }
        const __m256i sc_lo = _mm256_permute4x64_epi64(sc16, 0x44), sc_hi = _mm256_permute4x64_epi64(sc16, 0xEE);
        const rw_block_q8_K *xb = x + sb;
        __m256i e[4];
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
            _Pragma("GCC unroll 4") for (int s = 0; s < 4; s++) {
                const int k = 4 * h + s;
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * k));
                const __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(kl_chunk(q, hm, k, three), xv),
                                                    chunk_scale(sc_lo, sc_hi, k));
                e[s] = h ? _mm256_add_epi32(e[s], t) : t;
            }
        }
        const __m256i lo = _mm256_hadd_epi32(e[0], e[2]), hi = _mm256_hadd_epi32(e[1], e[3]);
        const __m256i msum = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)xb->bsums));
        const __m256 dd = _mm256_set1_ps(d * xb->d), dm = _mm256_set1_ps(dmin * xb->d);
        acc0 = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), dm, _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), dd, acc0));
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), dd, acc1);
    }
    return reduce16(acc0, acc1);
}

/* Q2_K, Q3_K with several activation rows (prefill): each weight
 * super-block is unpacked once for up to KX_NX activation rows; every
 * output takes the tile's KL_MADD steps above (the same integers, the same
 * fmas in the same order). */
#define KL_MANY_TILE(name, UNPACK)                                                                                    \
    static void name##_many(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs,       \
                            const int nx, float *out) {                                                               \
        __m256 acc[NW][KX_NX][2];                                                                                     \
        for (int i = 0; i < nw; i++)                                                                                  \
            for (int j = 0; j < nx; j++) acc[i][j][0] = acc[i][j][1] = _mm256_setzero_ps();                           \
        for (int64_t sb = 0; sb < n / 256; sb++) {                                                                    \
            for (int i = 0; i < nw; i++) {                                                                            \
                w_super wsb;                                                                                          \
                UNPACK(w + i * ws, sb, &wsb);                                                                         \
                for (int j = 0; j < nx; j++) {                                                                        \
                    const rw_block_q8_K *xb = (const rw_block_q8_K *)(xq + j * xs) + sb;                              \
                    const __m256i msum = _mm256_madd_epi16(wsb.mins, _mm256_loadu_si256((const __m256i *)xb->bsums)); \
                    __m256i lo, hi;                                                                                   \
                    kq_lanes16(&wsb, xb, &lo, &hi);                                                                   \
                    const __m256 dd = _mm256_set1_ps(wsb.d * xb->d), dm = _mm256_set1_ps(wsb.dmin * xb->d);           \
                    acc[i][j][0] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), dm,                                     \
                                                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), dd, acc[i][j][0]));       \
                    acc[i][j][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), dd, acc[i][j][1]);                         \
                }                                                                                                     \
            }                                                                                                         \
        }                                                                                                             \
        for (int j = 0; j < nx; j++)                                                                                  \
            for (int i = 0; i < nw; i++) out[j * nw + i] = reduce16(acc[i][j][0], acc[i][j][1]);                      \
    }
KL_MANY_TILE(q2_K, unpack4_q2_K)
KL_MANY_TILE(q3_K, unpack4_q3_K)
KQUANT_GGML_TILE(q4_K, unpack4_q4_K, KG_MINS4)
KQUANT_GGML_TILE(q5_K, unpack4_q5_K, KG_MINS1)
KQUANT_GGML_TILE(q6_K, unpack4_q6_K, KG_OFFSET)

/* ==== tiles of every shape, and the table ================================ */

#define TILE_DISPATCH(name)                                                                                       \
    static void tile_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx, \
                            float *out) {                                                                         \
        if (nx == 1) /* any number of weight rows, one at a time (see matmul_int.h) */                            \
            for (int i = 0; i < nw; i++) name##_impl(n, w + i * ws, ws, 1, xq, xs, 1, out + i);                   \
        else if (nw == 1) name##_impl(n, w, ws, 1, xq, xs, 2, out);                                               \
        else if (nx == 1) name##_impl(n, w, ws, 2, xq, xs, 1, out);                                               \
        else name##_impl(n, w, ws, 2, xq, xs, 2, out);                                                            \
    }

TILE_DISPATCH(q4_1)
TILE_DISPATCH(q5_1)
TILE_DISPATCH(mxfp4_ggml)
/* Q2_K, Q3_K: the tile up to two activation rows, the many-row form above beyond. */
#define TILE_DISPATCH_KL(name, THREE)                                                                             \
    static void tile_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx, \
                            float *out) {                                                                         \
        if (nx > 2) name##_many(n, w, ws, nw, xq, xs, nx, out);                                                   \
        else if (nx == 1)                                                                                         \
            for (int i = 0; i < nw; i++) out[i] = kl_dot1(n, w + i * ws, xq, THREE);                              \
        else if (nw == 1) name##_impl(n, w, ws, 1, xq, xs, 2, out);                                               \
        else name##_impl(n, w, ws, 2, xq, xs, 2, out);                                                            \
    }
TILE_DISPATCH_KL(q2_K, 0)
TILE_DISPATCH_KL(q3_K, 1)
/* The few-row form's scalar step of one super-block for four rows in
 * lanes [r0 - r1 - | r2 - r3 -]: acc + ((d * dx) * I - (dmin * dx) * M), ddx
 * = [d dx0, dmin dx0, d dx1, ...], im = [I0 M0 I1 M1 | I2 M2 I3 M3]. */
INLINE __m256 k_rows_step(__m256 acc, __m256 ddx, __m256i im) {
    const __m256 p = _mm256_mul_ps(ddx, _mm256_cvtepi32_ps(im));
    return _mm256_add_ps(acc, _mm256_sub_ps(p, _mm256_shuffle_ps(p, p, 0xB1)));
}

/* Q4_K, Q5_K, Q6_K with 2 to KR_NX activation rows (batched decode, short
 * verification passes): the one-row form with each chunk decoded once for
 * all the rows. The
 * integers are exact whatever the instructions; the scalar step per output
 * is q45_K_dot1's / q6_K_dot1's, super-block after super-block.
 *
 * k_dot_rows: one weight row (w; Q4_K, Q5_K or, with six, Q6_K) against NR
 * activation rows xq + r * xs: out[r * nw] = the one-row form's result for
 * row r. */
INLINE void k_dot_rows(int64_t n, const uint8_t *w, const uint8_t *xq, size_t xs, const int NR, const int five,
                       const int six, const int MODE, float *out, int nw) {
    const size_t blk = six ? sizeof(rw_block_q6_K) : five ? sizeof(rw_block_q5_K) : sizeof(rw_block_q4_K);
    /* rows 0..3, the missing ones repeating the last (their lanes dropped) */
    const int r1 = NR > 1 ? 1 : 0, r2 = NR > 2 ? 2 : NR - 1, r3 = NR > 3 ? 3 : NR - 1;
    const rw_block_q8_K *x0 = (const rw_block_q8_K *)xq, *x1 = (const rw_block_q8_K *)(xq + (size_t)r1 * xs),
                        *x2 = (const rw_block_q8_K *)(xq + (size_t)r2 * xs),
                        *x3 = (const rw_block_q8_K *)(xq + (size_t)r3 * xs);
    /* Q4_K / Q5_K: lanes [r0 - r1 - | r2 - r3 -]; Q6_K: [r0 r1 r2 r3]. The
     * Q4_K / Q5_K step of a super-block waits for the next one's integers
     * (pend_*): issued after them, it does not hold the vector scheduler
     * while its inputs are computed (two rows 7-11% faster on Zen 3) */
    __m256 acc = _mm256_setzero_ps();
    __m128 acc6 = _mm_setzero_ps();
    __m256 pend_ddx = _mm256_setzero_ps();
    __m256i pend_im = _mm256_setzero_si256();
    for (int64_t sb = 0; sb < n / 256; sb++) {
        k1_prefetch(w, sb, blk, six ? 4 : 3);
        const rw_block_q8_K *xb[KR_NX] = {x0 + sb, x1 + sb, x2 + sb, x3 + sb};
        __m256i is[KR_NX], ms[KR_NX];
        const __m128 dx = _mm_setr_ps(xb[0]->d, xb[1]->d, xb[2]->d, xb[3]->d);
        /* the lane sums of the four rows' I and M in one transposition tree
         * (as q45_K_dot8 / q6_K_dot8), then the scalar step of the rows in
         * lanes, each with its operations in the scalar order */
        if (six) {
            const rw_block_q6_K *b = (const rw_block_q6_K *)(w + (size_t)sb * blk);
            q6_K_lanes_rows(b, xb, NR, MODE & K_VNNI, is, ms);
            const __m256i t01 = k8_pair1(_mm256_sub_epi32(is[0], ms[0]), _mm256_sub_epi32(is[r1], ms[r1]));
            const __m256i t23 = k8_pair1(_mm256_sub_epi32(is[r2], ms[r2]), _mm256_sub_epi32(is[r3], ms[r3]));
            const __m256i u = _mm256_add_epi32(_mm256_unpacklo_epi64(t01, t23), _mm256_unpackhi_epi64(t01, t23));
            const __m128i im = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
            const __m128 d = _mm_set1_ps(f16_to_f32(b->d));
            acc6 = _mm_add_ps(acc6, _mm_mul_ps(_mm_mul_ps(d, dx), _mm_cvtepi32_ps(im)));
        } else {
            q45_K_lanes_rows(w, sb, xb, NR, five, MODE, NR <= 2 ? 2 : 1, is, ms);
            const __m256i im =
                k8_halves(k8_pair(is[0], ms[0], is[r1], ms[r1]), k8_pair(is[r2], ms[r2], is[r3], ms[r3]));
            /* d, dmin lead both block types: [d dmin d dmin ...] */
            const __m256 dd = _mm256_cvtph_ps(_mm_set1_epi32((int)k8_ld32(w + (size_t)sb * blk)));
            const __m256 dx2 =
                _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dx), _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
            if (sb) acc = k_rows_step(acc, pend_ddx, pend_im); /* the previous super-block's, its integers ready */
            pend_ddx = _mm256_mul_ps(dd, dx2), pend_im = im;
        }
    }
    if (!six && n >= 256) acc = k_rows_step(acc, pend_ddx, pend_im);
    float a[8];
    if (six) _mm_storeu_ps(a, acc6);
    else _mm256_storeu_ps(a, _mm256_permutevar8x32_ps(acc, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
    _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) out[(size_t)r * nw] = a[r];
}

/* nw weight rows one after the other against nx (2..KR_NX) activation
 * rows; NR and VNNI as constants. */
#define K_ROWS_NX(NR, five, six, VNNI) \
    for (int i = 0; i < nw; i++) k_dot_rows(n, w + (size_t)i * ws, xq, xs, NR, five, six, VNNI, out + i, nw)
#define K_ROWS(five, six, VNNI)                    \
    switch (nx) {                                  \
    case 2: K_ROWS_NX(2, five, six, VNNI); break;  \
    case 3: K_ROWS_NX(3, five, six, VNNI); break;  \
    default: K_ROWS_NX(4, five, six, VNNI); break; \
    }
/* CALL(MODE) with the variant mode as a constant. */
#define K45_MODES(mode, CALL)                           \
    switch (mode) {                                     \
    case K_VNNI | K_SHUF: CALL(K_VNNI | K_SHUF); break; \
    case K_VNNI: CALL(K_VNNI); break;                   \
    case K_SHUF: CALL(K_SHUF); break;                   \
    default: CALL(0); break;                            \
    }
#define Q4_K_ROWS(MODE) K_ROWS(0, 0, MODE)
#define Q5_K_ROWS(MODE) K_ROWS(1, 0, MODE)
static void rows_q4_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx,
                      float *out) {
    K45_MODES(k45_mode(), Q4_K_ROWS)
}
static void rows_q5_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx,
                      float *out) {
    K45_MODES(k45_mode(), Q5_K_ROWS)
}
static void rows_q6_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx,
                      float *out) {
    if (rw_avx2_vnni()) K_ROWS(0, 1, 1) else K_ROWS(0, 1, 0)
}

/* Q4_K, Q5_K, Q6_K: one activation row as below, 2 to KR_NX rows in
 * k_dot_rows above, more in groups of those (the same arithmetic per
 * output).
 *
 * Eight rows at a time; a last group of 3..7 rows as eight (the missing
 * rows repeat the last one, their outputs dropped), of 1 or 2 rows one by
 * one: every output the same bits. */
#define DOT1_ROWS(DOT8, DOT1)                                                                  \
    do {                                                                                       \
        int i = 0;                                                                             \
        for (; nw - i >= 3; i += 8) {                                                          \
            const uint8_t *r[8];                                                               \
            float o8[8];                                                                       \
            for (int k = 0; k < 8; k++) r[k] = w + (size_t)(i + k < nw ? i + k : nw - 1) * ws; \
            DOT8;                                                                              \
            for (int k = 0; k < 8 && i + k < nw; k++) out[i + k] = o8[k];                      \
        }                                                                                      \
        for (; i < nw; i++) out[i] = DOT1;                                                     \
    } while (0)
/* The Q4_K (five = 0) / Q5_K one-row form in variant MODE (a constant). */
#define K45_DOT1(five, MODE) \
    DOT1_ROWS(q45_K_dot8(n, r, w + (size_t)(i + 8) * ws, xq, five, MODE, o8), q45_K_dot1(n, w + i * ws, xq, five, MODE))
#define Q4_K_DOT1(MODE) K45_DOT1(0, MODE)
#define Q5_K_DOT1(MODE) K45_DOT1(1, MODE)
static void dot1_q4_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, float *out, const int vnni) {
    K45_MODES((vnni ? K_VNNI : 0) | (k45_mode() & K_SHUF), Q4_K_DOT1)
}
static void dot1_q5_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, float *out, const int vnni) {
    K45_MODES((vnni ? K_VNNI : 0) | (k45_mode() & K_SHUF), Q5_K_DOT1)
}
static void dot1_q6_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, float *out, const int vnni) {
    if (vnni) DOT1_ROWS(q6_K_dot8(n, r, w + (size_t)(i + 8) * ws, xq, 1, o8), q6_K_dot1(n, w + i * ws, xq, 1));
    else DOT1_ROWS(q6_K_dot8(n, r, w + (size_t)(i + 8) * ws, xq, 0, o8), q6_K_dot1(n, w + i * ws, xq, 0));
}
#define TILE_DISPATCH_KX(name)                                                                                    \
    static void tile_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx, \
                            float *out) {                                                                         \
        if (nx == 1) dot1_##name(n, w, ws, nw, xq, out, rw_avx2_vnni());                                          \
        else if (nx <= KR_NX) rows_##name(n, w, ws, nw, xq, xs, nx, out);                                         \
        else                                                                                                      \
            for (int r0 = 0, m = (nx + KR_NX - 1) / KR_NX; r0 < nx; m--) { /* balanced: 5 = 3 + 2 */              \
                const int k = (nx - r0 + m - 1) / m;                                                              \
                rows_##name(n, w, ws, nw, xq + (size_t)r0 * xs, xs, k, out + (size_t)r0 * nw);                    \
                r0 += k;                                                                                          \
            }                                                                                                     \
    }
TILE_DISPATCH_KX(q4_K)
TILE_DISPATCH_KX(q5_K)
TILE_DISPATCH_KX(q6_K)
/* IQ4_XS: matmul_dot1_avx2.c's forms (the same arithmetic). */
static void tile_iq4_xs(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx,
                        float *out) {
    rw_avx2_iq4_xs_rows(n, w, ws, nw, xq, xs, nx, out, rw_avx2_vnni());
}
TILE_DISPATCH(q8_0_ggml)
TILE_DISPATCH(q4_0_ggml)
TILE_DISPATCH(q5_0_ggml)
TILE_DISPATCH(q4_1_ggml)
TILE_DISPATCH(q5_1_ggml)
TILE_DISPATCH(q4_K_ggml)
TILE_DISPATCH(q5_K_ggml)
TILE_DISPATCH(q6_K_ggml)

#define K(name, xb, conv)                       \
    static const rw_mm_kernel kernel_##name = { \
        .x_bytes = xb, .convert_x = conv, .tile = tile_##name, .max_nw = NW, .max_nx = NX};
K(f32, x_bytes_f32, convert_f32)
K(f16, x_bytes_f32, convert_f16)
K(bf16, x_bytes_bf16, convert_bf16)
/* Fewest rows that pack panels on the fly: Q8_0 (its panels a
 * transposition) from 10, the decoded types below from 5 (fewer take the
 * tile). Measured on Zen 3 (in-process A/B, 2 threads): Q8_0 1024x3584
 * 7-30% less time from 10 to 24 rows than the tile (2560x10240: 8-31%
 * from 12), slower below 9; Q4_0, Q5_0, MXFP4 and IQ4_NL 2880x2880 from
 * 5 rows 11-28% less than from 8 and, from 8 rows, 27-52% less than from
 * matmul.c's default 32 (4096x14336 Q4_0 from DRAM: 4 rows 4% slower,
 * 6 rows 17% faster). */
enum { Q8_FLY_MIN = 10, WT_FLY_MIN = 5 };
static const rw_mm_kernel kernel_q8_0 = {.x_bytes = x_bytes_q8g,
                                         .convert_x = convert_q8g,
                                         .tile = tile_q8_0,
                                         .max_nw = NW,
                                         .max_nx = Q8_NX,
                                         .p_bytes = rw_avx2_p_bytes_q8_0,
                                         .convert_p = rw_avx2_convert_q8_0_p,
                                         .tile_p = rw_avx2_tile_p_q8_0,
                                         .pack_p = rw_avx2_pack_q8_0_p,
                                         .p_rows = RW_AVX2_Q8P_ROWS,
                                         .max_np = RW_AVX2_Q8P_MAX_NX,
                                         .fly_min_rows = Q8_FLY_MIN};
/* the decoded types: Q8_0's tiles and activation layout, their own panels */
#define KWT(name, tile_p_fn)                                                        \
    static const rw_mm_kernel kernel_##name = {.x_bytes = x_bytes_q8g,              \
                                               .convert_x = convert_q8g,            \
                                               .tile = tile_##name,                 \
                                               .max_nw = NW,                        \
                                               .max_nx = Q8_NX,                     \
                                               .p_bytes = rw_avx2_p_bytes_q8_0,     \
                                               .convert_p = rw_avx2_convert_q8_0_p, \
                                               .tile_p = tile_p_fn,                 \
                                               .pack_p = rw_avx2_pack_##name##_p,   \
                                               .p_rows = RW_AVX2_Q8P_ROWS,          \
                                               .max_np = RW_AVX2_Q8P_MAX_NX,        \
                                               .p_wbytes = rw_avx2_p_wbytes_wt,     \
                                               .p_min_rows = WT_FLY_MIN,            \
                                               .fly_min_rows = WT_FLY_MIN};
KWT(q4_0, rw_avx2_tile_p_wt_small)
K(q4_1, x_bytes_blk, convert_q8_1)
KWT(q5_0, rw_avx2_tile_p_wt_small)
K(q5_1, x_bytes_blk, convert_q8_1)
KWT(iq4_nl, rw_avx2_tile_p_wt)
KWT(mxfp4, rw_avx2_tile_p_wt_small)
#define KX(name, xb, conv)                      \
    static const rw_mm_kernel kernel_##name = { \
        .x_bytes = xb, .convert_x = conv, .tile = tile_##name, .max_nw = NW, .max_nx = KX_NX};
/* the K-quants with panels (matmul_kpanel_avx2.c; Q5_K's panels are Q4_K's
 * layout, wbytes the panel bytes per row) */
#define KP(name, wbytes, fly_min)                                                   \
    static const rw_mm_kernel kernel_##name = {.x_bytes = x_bytes_q8_K,             \
                                               .convert_x = convert_q8_K,           \
                                               .tile = tile_##name,                 \
                                               .max_nw = NW,                        \
                                               .max_nx = KX_NX,                     \
                                               .p_bytes = x_bytes_q8_K,             \
                                               .convert_p = rw_avx2_convert_q8_K_p, \
                                               .tile_p = rw_avx2_tile_p_##name,     \
                                               .pack_p = rw_avx2_pack_##name##_p,   \
                                               .p_rows = RW_AVX2_KP_ROWS,           \
                                               .max_np = RW_AVX2_KP_MAX_NX,         \
                                               .p_wbytes = wbytes,                  \
                                               .fly_min_rows = fly_min};
KP(q4_K, rw_avx2_p_wbytes_q4_K, K_FLY_MIN)
KP(q5_K, rw_avx2_p_wbytes_q4_K, K_FLY_MIN)
KP(q6_K, rw_avx2_p_wbytes_q6_K, K6_FLY_MIN)
KX(q2_K, x_bytes_q8_K, convert_q8_K)
KX(q3_K, x_bytes_q8_K, convert_q8_K)
K(iq4_xs, x_bytes_q8_K, convert_q8_K)
K(q8_0_ggml, x_bytes_blk, convert_b0)
K(q4_0_ggml, x_bytes_blk, convert_b8)
K(q5_0_ggml, x_bytes_blk, convert_b16)
K(q4_1_ggml, x_bytes_blk, convert_q8_1)
K(q5_1_ggml, x_bytes_blk, convert_q8_1)
K(mxfp4_ggml, x_bytes_blk, convert_b0)
K(q4_K_ggml, x_bytes_q8_K, convert_q8_K)
K(q5_K_ggml, x_bytes_q8_K, convert_q8_K)
K(q6_K_ggml, x_bytes_q8_K, convert_q8_K)

/* RW_NUMERICS_GGML: ggml's AVX2 order (8 lanes of 4 products, one fma per
 * lane and block, hsum8; Q4_1, Q5_1 with their min term on a sum of its
 * own), the same bits as every tier's ggml kernels. */
const rw_mm_kernel *rw_mm_kernel_avx2_ggml(rw_dtype t) {
    switch (t) {
    case RW_TYPE_Q8_0: return &kernel_q8_0_ggml;
    case RW_TYPE_Q4_0: return &kernel_q4_0_ggml;
    case RW_TYPE_Q5_0: return &kernel_q5_0_ggml;
    case RW_TYPE_Q4_1: return &kernel_q4_1_ggml;
    case RW_TYPE_Q5_1: return &kernel_q5_1_ggml;
    case RW_TYPE_MXFP4: return &kernel_mxfp4_ggml;
    case RW_TYPE_Q4_K: return &kernel_q4_K_ggml;
    case RW_TYPE_Q5_K: return &kernel_q5_K_ggml;
    case RW_TYPE_Q6_K: return &kernel_q6_K_ggml;
    default: return NULL;
    }
}

const rw_mm_kernel *rw_mm_kernel_avx2(rw_dtype t) {
    switch (t) {
    case RW_TYPE_F32: return &kernel_f32;
    case RW_TYPE_F16: return &kernel_f16;
    case RW_TYPE_BF16: return &kernel_bf16;
    case RW_TYPE_Q8_0: return &kernel_q8_0;
    case RW_TYPE_Q4_0: return &kernel_q4_0;
    case RW_TYPE_Q4_1: return &kernel_q4_1;
    case RW_TYPE_Q5_0: return &kernel_q5_0;
    case RW_TYPE_Q5_1: return &kernel_q5_1;
    case RW_TYPE_IQ4_NL: return &kernel_iq4_nl;
    case RW_TYPE_MXFP4: return &kernel_mxfp4;
    case RW_TYPE_Q2_K: return &kernel_q2_K;
    case RW_TYPE_Q3_K: return &kernel_q3_K;
    case RW_TYPE_Q4_K: return &kernel_q4_K;
    case RW_TYPE_Q5_K: return &kernel_q5_K;
    case RW_TYPE_Q6_K: return &kernel_q6_K;
    case RW_TYPE_IQ4_XS: return &kernel_iq4_xs;
    default: return NULL;
    }
}

/* rw_stream_read on AVX2: 256 bytes a step in 32-byte aligned loads (p
 * is 64-byte aligned, as rw_stream_read requires). */
uint64_t rw_stream_read_avx2(const void *p, size_t n) {
    const uint8_t *b = p;
    __m256i a[8];
    for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_si256();
    for (size_t i = 0; i + 256 <= n; i += 256)
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) a[k] =
            _mm256_xor_si256(a[k], _mm256_load_si256((const __m256i *)(b + i + 32 * k)));
    for (int k = 1; k < 8; k++) a[0] = _mm256_xor_si256(a[0], a[k]);
    return (uint64_t)_mm256_extract_epi64(a[0], 0) ^ (uint64_t)_mm256_extract_epi64(a[0], 3);
}
