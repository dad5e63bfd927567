/* matmul_avx512_int.h - what the AVX-512 tier's matmul files share (only
 * *_avx512.c files include it: every function here needs AVX-512).
 *
 * The tier is split by weight family: matmul_avx512.c (float types, the
 * 32-element blocks other than Q8_0's own forms, and the kernel tables),
 * matmul_q8_0_avx512.c (Q8_0's one-row, group, quad and panel forms, both
 * orders), matmul_kquant_avx512.c (Q8_K activations and the K-quant tiles),
 * matmul_kpanel_avx512.c (the K-quant panel forms) and
 * matmul_kgroup_avx512.c (the K-quant group form, for a few rows). The activation
 * layouts and quantizers that several of them use live here, with the
 * 32-block tile's template, the tile-shape dispatchers and the kernels one
 * file defines for another; matmul_avx512.c, which holds the tier's table,
 * calls into the other files and none of them calls back.
 */
#ifndef RW_KERNELS_MATMUL_AVX512_INT_H
#define RW_KERNELS_MATMUL_AVX512_INT_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/matmul_int.h"
#include "kernels/quant.h"

#include "kernels/quant.h"

#define NW    4 /* weight rows per tile */
#define NX    4 /* activation rows per tile */
/* Q4_K / Q5_K / Q6_K: most activation rows of a long (up to RW_MM_ROWS_1X weight rows) tile call */
#define KR_NX 4

/* Software prefetch distance in a weight row for the K-quant tiles: with
 * their heavier unpacking, one core leaves the hardware prefetcher behind
 * (measured +10% one-row speed at 2 KiB on Zen 4). On Zen 5 the 32-block
 * tiles, the one-row Q8_0 dot and the Q8_0 panels gain from it too (4 KiB
 * ahead: B32_PF_DIST, Q8_PF_DIST). */
#define PF_DIST 2048
#define INLINE  static inline __attribute__((always_inline))

static inline float f16_to_f32(rw_f16 h) { return _cvtsh_ss(h); }

/* ==== 32-element blocks: activation layout and quantizer ================= */

/* Activation row of nb = n/32 blocks, in nc = ceil(nb/2) chunks of 64
 * elements (a missing last block is zero):
 *   int8  qs[64]     the quants, element order
 *   int32 base[16]   per lane: -bias * (sum of the lane's 4 quants)
 *   float dx[16]     per lane: the block's scale (f16-rounded)
 *   float sx[16]     Q8_1 only: lane 0 / 8: the block's s = d*sum(qs) (f16-rounded), others 0
 */
typedef struct {
    int8_t qs[64];
    int32_t base[16];
    float dx[16];
    float sx[16];
} x_chunk;

static inline size_t x_bytes_chunks(int64_t n) { return (size_t)((n / 32 + 1) / 2) * sizeof(x_chunk); }

/* Quantizes 32 values as ggml's x86 build quantizes activations (see
 * rw_quantize_act_q8_0): d = amax/127, q = nearest-even(x * (127/amax));
 * returns d rounded to f16 (the block's scale) and d itself (for Q8_1's s). */
static inline void quantize_block32(const float *x, int8_t *q, float *d_out, float *d_raw, int *sum) {
    __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
    float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    __m512 vid = _mm512_set1_ps(id);
    __m512i qa = _mm512_cvt_roundps_epi32(_mm512_mul_ps(a, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i qb = _mm512_cvt_roundps_epi32(_mm512_mul_ps(b, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128((__m128i *)q, _mm512_cvtsepi32_epi8(qa));
    _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtsepi32_epi8(qb));
    *d_out = f16_to_f32(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    *d_raw = d;
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
}

/* Shared by all 32-block kernels; bias is the unsigned offset of the weight
 * quants (see the head of matmul_avx512.c), with_s adds Q8_1's s. */
static inline void convert_chunks(const float *x, void *xq, int64_t n, int bias, int with_s) {
    x_chunk *c = xq;
    int64_t nb = n / 32;
    memset(xq, 0, x_bytes_chunks(n));
    for (int64_t b = 0; b < nb; b++) {
        x_chunk *ch = &c[b / 2];
        int half = (int)(b % 2), sum;
        float d, d_raw;
        quantize_block32(x + b * 32, ch->qs + 32 * half, &d, &d_raw, &sum);
        for (int l = 0; l < 8; l++) {
            const int8_t *q4 = ch->qs + 32 * half + 4 * l;
            ch->base[8 * half + l] = -bias * (q4[0] + q4[1] + q4[2] + q4[3]);
            ch->dx[8 * half + l] = d;
        }
        if (with_s) ch->sx[8 * half] = f16_to_f32(_cvtss_sh((float)sum * d_raw, _MM_FROUND_TO_NEAREST_INT));
    }
}

static inline void convert_q8_0_b128(const float *x, void *xq, int64_t n) { convert_chunks(x, xq, n, 128, 0); }
static inline void convert_q8_0_b8(const float *x, void *xq, int64_t n) { convert_chunks(x, xq, n, 8, 0); }
static inline void convert_q8_0_b16(const float *x, void *xq, int64_t n) { convert_chunks(x, xq, n, 16, 0); }
static inline void convert_q8_1(const float *x, void *xq, int64_t n) { convert_chunks(x, xq, n, 0, 1); }

/* Low and high nibbles of 16 bytes of each of two blocks, in element order:
 * [lo(A), hi(A), lo(B), hi(B)] with A at pa and B at pb. */
INLINE __m512i nibbles_2x16(const uint8_t *pa, const uint8_t *pb, int two) {
    __m128i a = _mm_loadu_si128((const __m128i *)pa);
    __m128i b = two ? _mm_loadu_si128((const __m128i *)pb) : _mm_setzero_si128();
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
    __m256i lo = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); /* lo(A) lo(B) hi(A) hi(B) */
    return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
}

/* IQ4_NL's 16 values plus 128 (so unsigned), looked up with vpshufb. */
INLINE __m512i iq4_lookup(__m512i nib) {
    static const int8_t iq4nl_plus128[16] = {
        1,   24,  45,          63,          79,          93,          106,         118,
        129, 141, (int8_t)153, (int8_t)166, (int8_t)181, (int8_t)197, (int8_t)217, (int8_t)241};
    __m512i tab = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4nl_plus128));
    return _mm512_shuffle_epi8(tab, nib);
}

/* ggml's hsum_float_8: upper four lanes onto the lower four, then lanes
 * 0+2 and 1+3, then those two. */
INLINE float hsum8_ggml(__m256 a) {
    __m128 t = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

/* 4 weight bytes at any address (the quants of a block sit 2 bytes in). */
typedef int32_t i32u __attribute__((aligned(1), may_alias));

/* A prefetch of weight bytes at p into L2 (l2: rw_matmul_prefetch_l2(),
 * read once per tile call: Zen 4, where a weight stream prefetched into
 * its 32 KiB L1 ran slower) or L1 (Zen 5, the Xeons). */
INLINE void pf_weights(const void *p, const bool l2) {
    if (l2) _mm_prefetch((const char *)p, _MM_HINT_T1);
    else _mm_prefetch((const char *)p, _MM_HINT_T0);
}

/* acc += dpbusd(w, the 4 bytes at p broadcast): GCC does not fold the
 * broadcast into the instruction's memory operand by itself, and the
 * separate broadcasts cost as many instructions as the products. */
#define DPBUSD_BCST(acc, w, p) __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(p)))

/* ==== K-quants: the Q8_K activation layout and quantizers ================ */

/* Q4_K / Q5_K scales (the K-quant tiles, group forms and the AMX tier's
 * unpacking): 16 bytes [sc0..7, m0..7] from the packed 12, as 32-bit lanes
 * a0 a1 a2 of the 12 bytes: sc0-3 = a0 & 63, m0-3 = a1 & 63,
 * sc4-7 = (a2 & 15) | (a0 >> 6) << 4, m4-7 = (a2 >> 4) | (a1 >> 6) << 4
 * (per byte). Reads 16 bytes: the 4 after the scales are still in the block. */
INLINE __m128i k4_scales_mins(const uint8_t s[12]) {
    __m128i v = _mm_loadu_si128((const __m128i *)s);
    __m128i a = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)); /* a0 a2 a1 a2 */
    __m128i b = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)); /* a0 a0 a1 a1 */
    __m128i lo = _mm_and_si128(_mm_srlv_epi32(a, _mm_set_epi32(4, 0, 0, 0)),
                               _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    __m128i hi = _mm_and_si128(_mm_srli_epi32(b, 2), _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    return _mm_or_si128(lo, hi); /* sc0-3, sc4-7, m0-3, m4-7 */
}

/* ---- 16 K-quant rows side by side (one-row tile, panel packing) -------- */

/* The 16 bytes at p + r * ws of rows r0 .. r0 + 3, row r0 + k in 128-bit
 * lane k; rows >= nr are zero. */
INLINE __m512i kr_load4(const uint8_t *p, size_t ws, const int r0, const int nr) {
    /* the lane is an immediate: spelled out, so that builds without
     * unrolling (-O1, the sanitizer build) compile too */
#define KR_LANE(k) \
    if (r0 + (k) < nr) z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + (size_t)(r0 + (k)) * ws)), k)
    __m512i z = _mm512_setzero_si512();
    KR_LANE(0);
    KR_LANE(1);
    KR_LANE(2);
    KR_LANE(3);
#undef KR_LANE
    return z;
}

/* Q4_K / Q5_K: k4_scales_mins for 4 rows at once; each 128-bit lane holds
 * a block's first 16 bytes (d, dmin, then the 12 scale bytes as 32-bit
 * lanes a0 a1 a2) and becomes [sc0..7, m0..7]. */
INLINE __m512i kr_scales_mins4(__m512i h) {
    const __m512i a = _mm512_shuffle_epi32(h, _MM_SHUFFLE(3, 2, 3, 1)); /* a0 a2 a1 a2 */
    const __m512i b = _mm512_shuffle_epi32(h, _MM_SHUFFLE(2, 2, 1, 1)); /* a0 a0 a1 a1 */
    const __m512i lo = _mm512_and_si512(_mm512_srlv_epi32(a, _mm512_set4_epi32(4, 0, 0, 0)),
                                        _mm512_set4_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(b, 2), _mm512_set4_epi32(0x30303030, 0, 0x30303030, 0));
    return _mm512_or_si512(lo, hi);
}

/* The 32-bit lane L of each 128-bit lane of h[0..3] (4 bytes of each of
 * 16 rows) in row order. */
INLINE __m512i kr_lanes(const __m512i h[4], const int L) {
    const __m512i idx =
        _mm512_add_epi32(_mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0), _mm512_set1_epi32(L));
    const __m512i a = _mm512_permutex2var_epi32(h[0], idx, h[1]), b = _mm512_permutex2var_epi32(h[2], idx, h[3]);
    return _mm512_inserti64x4(a, _mm512_castsi512_si256(b), 1);
}

/* Activation super-block: d as in Q8_K (1/iscale), quants, and the sums of
 * each 16 quants (int16) for the min / bias terms. */
typedef struct {
    int8_t qs[256];
    int16_t bsums[16];
    float d;
    float pad[7];
} x_super;

static inline size_t x_bytes_super(int64_t n) { return (size_t)(n / 256) * sizeof(x_super); }

/* Q8_K as the reference: the element of largest magnitude (first one on
 * ties) maps to -127, iscale = -127/that value, q = nearest-even(iscale*x)
 * capped at 127, d = 1/iscale. */
static inline void convert_q8_K(const float *x, void *xq, int64_t n) {
    x_super *s = xq;
    for (int64_t b = 0; b < n / 256; b++, x += 256) {
        __m512 amax_v = _mm512_setzero_ps();
        for (int k = 0; k < 256; k += 16) amax_v = _mm512_max_ps(amax_v, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
        float amax = _mm512_reduce_max_ps(amax_v);
        memset(&s[b], 0, sizeof s[b]);
        if (amax == 0.0f) continue;
        float maxv = 0;
        for (int k = 0; k < 256; k += 16) {
            __mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (m) {
                maxv = x[k + __builtin_ctz(m)];
                break;
            }
        }
        float iscale = -127.0f / maxv;
        __m512 vs = _mm512_set1_ps(iscale);
        for (int k = 0; k < 256; k += 16) {
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + k)));
            q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(s[b].qs + k), _mm512_cvtsepi32_epi8(q));
            s[b].bsums[k / 16] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        s[b].d = 1.0f / iscale;
    }
}

/* Q8_K with the quants of each 128 reordered [0-31, 64-95, 32-63, 96-127]
 * (bsums stay in element order): the order in which Q4_K / Q5_K weights
 * unpack from 64-byte loads (low nibbles of two 32-byte pieces, then high). */
static inline void convert_q8_K_perm(const float *x, void *xq, int64_t n) {
    convert_q8_K(x, xq, n);
    x_super *s = xq;
    for (int64_t b = 0; b < n / 256; b++)
        for (int h = 0; h < 256; h += 128) {
            int8_t tmp[32];
            memcpy(tmp, s[b].qs + h + 32, 32);
            memcpy(s[b].qs + h + 32, s[b].qs + h + 64, 32);
            memcpy(s[b].qs + h + 64, tmp, 32);
        }
}

/* ==== tile shapes ========================================================= */

/* Instantiates name##_impl for every (nw, nx) so loops have constant
 * bounds; the per-element code is the same in all of them. */
#define TILE_DISPATCH(name) TILE_DISPATCH_FN(static, tile_##name, name##_impl)
#define TILE_DISPATCH_FN(STORAGE, FN, IMPL)                                                               \
    STORAGE void FN(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx, \
                    float *out) {                                                                         \
        if (nx == 1) { /* any number of weight rows, one at a time (see matmul_int.h) */                  \
            for (int i = 0; i < nw; i++) IMPL(n, w + i * ws, ws, 1, xq, xs, 1, out + i);                  \
            return;                                                                                       \
        }                                                                                                 \
        switch ((nw - 1) * NX + (nx - 1)) {                                                               \
        case 0: IMPL(n, w, ws, 1, xq, xs, 1, out); break;                                                 \
        case 1: IMPL(n, w, ws, 1, xq, xs, 2, out); break;                                                 \
        case 2: IMPL(n, w, ws, 1, xq, xs, 3, out); break;                                                 \
        case 3: IMPL(n, w, ws, 1, xq, xs, 4, out); break;                                                 \
        case 4: IMPL(n, w, ws, 2, xq, xs, 1, out); break;                                                 \
        case 5: IMPL(n, w, ws, 2, xq, xs, 2, out); break;                                                 \
        case 6: IMPL(n, w, ws, 2, xq, xs, 3, out); break;                                                 \
        case 7: IMPL(n, w, ws, 2, xq, xs, 4, out); break;                                                 \
        case 8: IMPL(n, w, ws, 3, xq, xs, 1, out); break;                                                 \
        case 9: IMPL(n, w, ws, 3, xq, xs, 2, out); break;                                                 \
        case 10: IMPL(n, w, ws, 3, xq, xs, 3, out); break;                                                \
        case 11: IMPL(n, w, ws, 3, xq, xs, 4, out); break;                                                \
        case 12: IMPL(n, w, ws, 4, xq, xs, 1, out); break;                                                \
        case 13: IMPL(n, w, ws, 4, xq, xs, 2, out); break;                                                \
        case 14: IMPL(n, w, ws, 4, xq, xs, 3, out); break;                                                \
        default: IMPL(n, w, ws, 4, xq, xs, 4, out); break;                                                \
        }                                                                                                 \
    }

/* The ggml-order K-quant tiles take up to KG_NW x KG_NX (below). */
#define TILE_DISPATCH_KG(name) TILE_DISPATCH_KG_FN(static, tile_##name, name##_impl)
#define TILE_DISPATCH_KG_FN(STORAGE, FN, IMPL)                                                            \
    STORAGE void FN(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx, \
                    float *out) {                                                                         \
        if (nx == 1) {                                                                                    \
            for (int i = 0; i < nw; i++) IMPL(n, w + i * ws, ws, 1, xq, xs, 1, out + i);                  \
            return;                                                                                       \
        }                                                                                                 \
        if (nw == 1) {                                                                                    \
            switch (nx) {                                                                                 \
            case 2: IMPL(n, w, ws, 1, xq, xs, 2, out); break;                                             \
            case 3: IMPL(n, w, ws, 1, xq, xs, 3, out); break;                                             \
            case 4: IMPL(n, w, ws, 1, xq, xs, 4, out); break;                                             \
            case 5: IMPL(n, w, ws, 1, xq, xs, 5, out); break;                                             \
            case 6: IMPL(n, w, ws, 1, xq, xs, 6, out); break;                                             \
            case 7: IMPL(n, w, ws, 1, xq, xs, 7, out); break;                                             \
            default: IMPL(n, w, ws, 1, xq, xs, 8, out); break;                                            \
            }                                                                                             \
            return;                                                                                       \
        }                                                                                                 \
        switch (nx) {                                                                                     \
        case 2: IMPL(n, w, ws, 2, xq, xs, 2, out); break;                                                 \
        case 3: IMPL(n, w, ws, 2, xq, xs, 3, out); break;                                                 \
        case 4: IMPL(n, w, ws, 2, xq, xs, 4, out); break;                                                 \
        case 5: IMPL(n, w, ws, 2, xq, xs, 5, out); break;                                                 \
        case 6: IMPL(n, w, ws, 2, xq, xs, 6, out); break;                                                 \
        case 7: IMPL(n, w, ws, 2, xq, xs, 7, out); break;                                                 \
        default: IMPL(n, w, ws, 2, xq, xs, 8, out); break;                                                \
        }                                                                                                 \
    }

/* The ggml-order K-quant tile's shape: 2 weight rows (fewer unpacked rows
 * than 4 to keep in registers, measured faster) by up to 8 activation rows
 * (a verify pass of K = 4, 5 rows, unpacks each weight super-block once). */
#define KG_NW 2
#define KG_NX 8

/* ==== 32-element block tiles ============================================== */

/* The one-row tile of the 32-element types over the x_chunk layout, made
 * by BLOCK32_TILE_GEN: matmul_avx512.c instantiates it for its types, and
 * matmul_q8_0_avx512.c for Q8_0 in ggml's order (BLOCK32_TILE_GGML). */

/* One unpacked 64-element weight chunk: unsigned quants, per-lane scale
 * (and per-lane min for Q4_1/Q5_1: lane 0 and 8 only, matching sx). */
typedef struct {
    __m512i u;
    __m512 dw;
    __m512 mw;
} w_chunk;

/* [d0 x8, d1 x8] from two f16 block scales (d1 = 0 if there is no second
 * block): one conversion and one permute. */
INLINE __m512 lane_scales16(rw_f16 d0, rw_f16 d1) {
    __m128 d = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)d0 | (uint32_t)d1 << 16)));
    const __m512i idx = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(d));
}

#define B32_PF_DIST 4096 /* bytes ahead in a row that the 32-block tiles prefetch (one line per two blocks) */

/* RW_NUMERICS_GGML: Q8_0, Q4_0 and Q5_0 accumulate in the order of ggml's
 * x86 vec-dots (ggml_vec_dot_q8_0_q8_0 and llamafile's tinyBLAS for Q8_0
 * alike), so that our results equal llama.cpp's bit for bit: 8 lanes per
 * output, lane l taking the exact sum of the 4 products 4l..4l+3 of each
 * block, acc_l = fma(dw_b * dx_b, (float)sum_bl, acc_l) for b = 0, 1, ...
 * in order, and y = hsum8_ggml(acc). A chunk's two blocks sit in the low
 * and high halves of the 16 lanes, so the high half's fma follows the low
 * half's. */
INLINE __m256 b32_ggml(__m256 acc, __m512 p, __m512 s, const w_chunk *wc, const x_chunk *xc, int two) {
    acc = _mm256_fmadd_ps(_mm512_castps512_ps256(s), _mm512_castps512_ps256(p), acc);
    return two ? _mm256_fmadd_ps(_mm512_extractf32x8_ps(s, 1), _mm512_extractf32x8_ps(p, 1), acc) : acc;
}

/* A 32-block tile: ACC_T accumulators per output, started at ZERO, updated
 * by STEP per chunk and reduced by REDUCE. */
#define BLOCK32_TILE_GEN(name, UNPACK, BLK, ACC_T, ZERO, STEP, REDUCE)                                             \
    INLINE void name##_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs,    \
                            const int nx, float *out) {                                                            \
        ACC_T acc[NW][NX];                                                                                         \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++)  \
            acc[i][j] = ZERO;                                                                                      \
        int64_t nb = n / 32, nc = (nb + 1) / 2;                                                                    \
        for (int64_t c = 0; c < nc; c++) {                                                                         \
            int two = 2 * c + 1 < nb;                                                                              \
            w_chunk wc[NW];                                                                                        \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                                 \
                _mm_prefetch((const char *)(w + i * ws) + 2 * c * sizeof(BLK) + B32_PF_DIST, _MM_HINT_T0);         \
                wc[i] = UNPACK(w + i * ws, c, two);                                                                \
            }                                                                                                      \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                                 \
                const x_chunk *xc = (const x_chunk *)(xq + j * xs) + c;                                            \
                __m512i xqv = _mm512_load_si512(xc->qs);                                                           \
                __m512 dx = _mm512_load_ps(xc->dx);                                                                \
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                             \
                    __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_load_si512(xc->base), wc[i].u, xqv)); \
                    acc[i][j] = STEP(acc[i][j], p, _mm512_mul_ps(wc[i].dw, dx), &wc[i], xc, two);                  \
                }                                                                                                  \
            }                                                                                                      \
        }                                                                                                          \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)  \
            out[j * nw + i] = REDUCE(acc[i][j]);                                                                   \
    }
#define BLOCK32_TILE_GGML(name, UNPACK, BLK) \
    BLOCK32_TILE_GEN(name, UNPACK, BLK, __m256, _mm256_setzero_ps(), b32_ggml, hsum8_ggml)

/* The 16 x 16 transpose of 32-bit lanes: on return r[k] lane l holds
 * lane k of row l. Unpacks of 32 and 64 bits leave, in 128-bit lane j of
 * t[4i + m], column 4j + m of rows 4i..4i+3; two rounds of 128-bit
 * shuffles then gather each column's four pieces. */
INLINE void transpose16x16(__m512i r[16]) {
    __m512i t[16];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) {
        const __m512i ul = _mm512_shuffle_i32x4(r[m], r[4 + m], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512i uh = _mm512_shuffle_i32x4(r[m], r[4 + m], _MM_SHUFFLE(3, 1, 3, 1));
        const __m512i vl = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512i vh = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], _MM_SHUFFLE(3, 1, 3, 1));
        t[m] = _mm512_shuffle_i32x4(ul, vl, _MM_SHUFFLE(2, 0, 2, 0));     /* column m */
        t[4 + m] = _mm512_shuffle_i32x4(uh, vh, _MM_SHUFFLE(2, 0, 2, 0)); /* column 4 + m */
        t[8 + m] = _mm512_shuffle_i32x4(ul, vl, _MM_SHUFFLE(3, 1, 3, 1)); /* column 8 + m */
        t[12 + m] = _mm512_shuffle_i32x4(uh, vh, _MM_SHUFFLE(3, 1, 3, 1));
    }
    _Pragma("GCC unroll 16") for (int k = 0; k < 16; k++) r[k] = t[k];
}

/* ==== kernels and tiles one file defines for another ===================== */

/* matmul_q8_0_avx512.c */
extern const rw_mm_kernel rw_avx512_kernel_q8_0, rw_avx512_kernel_q8_0_ggml;
/* ... and the 32-block types summed in Q8_0's order */
extern const rw_mm_kernel rw_avx512_kernel_q4_0, rw_avx512_kernel_q5_0, rw_avx512_kernel_iq4_nl, rw_avx512_kernel_mxfp4;
/* matmul_kquant_avx512.c: the tiles of the types that also have panels */
extern const rw_mm_kernel rw_avx512_kernel_q2_K, rw_avx512_kernel_q3_K, rw_avx512_kernel_iq4_xs;
#define KQ_TILE_DECL(name)                                                                                           \
    void rw_avx512_tile_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx, \
                               float *out);
KQ_TILE_DECL(q4_K)
KQ_TILE_DECL(q5_K)
KQ_TILE_DECL(q6_K)
KQ_TILE_DECL(q4_K_ggml)
KQ_TILE_DECL(q5_K_ggml)
KQ_TILE_DECL(q6_K_ggml)
#undef KQ_TILE_DECL
/* matmul_kgroup_avx512.c: the group form (few rows) of Q4_K, Q5_K and Q6_K */
size_t rw_avx512_g_bytes_k(int64_t n);
void rw_avx512_convert_g_k(const float *const *rows, int n_rows, void *xg, int64_t n);
#define KG_TILE_DECL(name)                                                                                      \
    void rw_avx512_tile_g_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xg, size_t xgs, \
                                 int nx, float *out, int64_t os);
KG_TILE_DECL(q4_K)
KG_TILE_DECL(q5_K)
KG_TILE_DECL(q6_K)
#undef KG_TILE_DECL
/* matmul_kpanel_avx512.c: the AMX tier's K-quant panels (matmul_amx.c has
 * the layout), their bytes per weight row, and the panel form's activation
 * rows (x_super in element order) */
enum { RW_AMX_K_SB_BYTES = 8192 + 512 + 128 };
size_t rw_avx512_amx_k_wbytes(int64_t n);
void rw_avx512_amx_pack_q4_K(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx512_amx_pack_q5_K(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx512_amx_pack_q6_K(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx512_convert_q8_K_p(const float *const *rows, int n_rows, void *xp, int64_t n);
/* ... and with the 8 sub-blocks' sums (int16) in each x_super's padding (the Q4_K and Q5_K panels of
 * both tiers) */
void rw_avx512_convert_q8_K_sums(const float *const *rows, int n_rows, void *xp, int64_t n);
/* matmul_kpanel_avx512.c */
extern const rw_mm_kernel rw_avx512_kernel_q4_K, rw_avx512_kernel_q5_K, rw_avx512_kernel_q6_K;
extern const rw_mm_kernel rw_avx512_kernel_q4_K_ggml, rw_avx512_kernel_q5_K_ggml, rw_avx512_kernel_q6_K_ggml;

#endif
