/* matmul_avx512.c - the AVX-512 tier (F, BW, VL, DQ, VNNI, BF16).
 *
 * Integer types multiply unsigned 8-bit weights by signed 8-bit activation
 * quants with vpdpbusd (4 products summed into each 32-bit lane). Weights
 * whose values are signed are biased into unsigned range (+8 for Q4_0, +16
 * for Q5_0, +128 for Q8_0 and IQ4_NL); the bias times the sum of the 4
 * activation quants of the lane is subtracted exactly, by starting the lane
 * from a precomputed -bias*sum, so integer results are exact.
 *
 * Float accumulation is per lane: each 32-bit lane keeps its own f32 sum
 * over the row, and the 16 lanes are added at the end by one fixed
 * reduction. For the 32-element types a 64-element chunk holds two blocks
 * (lanes 0-7 and 8-15), and each lane adds (float)lane_sum * (dw*dx) of its
 * block. For the K-quants each lane first sums its exact integer products
 * times the sub-block scales over the super-block (vpmaddwd of the packed
 * lane sums with 16-bit scales; vpmulld for IQ4_XS, whose sums need 32
 * bits), then adds (float)isum_lane * (d*dx) - (float)msum_lane * (dmin*dx),
 * where msum holds the min (or bias) terms from the activation's bsums.
 *
 * Tiles are up to 4 weight rows x 4 activation rows; every element of a
 * tile goes through the same instruction sequence whatever the tile's size,
 * so the one-row (decode) and many-row (prefill) paths agree bitwise.
 *
 * Q8_0 differs (see its section): one float step per block on the exact
 * block sum, computed for many rows with one activation row per lane
 * (matmul_int.h's group form), which keeps prefill bound by vpdpbusd.
 *
 * Activation rows are converted (convert_x) into this file's own layouts,
 * described at each `x_*` struct; quantization rounds exactly as the
 * reference's activation quantizers (ggml's x86 rounding for Q8_0/Q8_1,
 * ggml's reference for Q8_K).
 *
 * RW_NUMERICS_GGML (kernels/matmul.h) has its own kernels for Q8_0, Q4_0
 * and Q5_0 (BLOCK32_TILE_GGML and the ggml panel form), which sum exactly
 * as ggml's x86 build does.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/matmul_int.h"
#include "kernels/quant.h"

#define NW 4 /* weight rows per tile */
#define NX 4 /* activation rows per tile */

/* Software prefetch distance in a weight row for the K-quant tiles: with
 * their heavier unpacking, one core leaves the hardware prefetcher behind
 * (measured +10% one-row speed at 2 KiB on Zen 4). On Zen 5 the 32-block
 * tiles, the one-row Q8_0 dot and the Q8_0 panels gain from it too (4 KiB
 * ahead: B32_PF_DIST, Q8_PF_DIST). */
#define PF_DIST 2048
#define INLINE static inline __attribute__((always_inline))

static float f16_to_f32(rw_f16 h) { return _cvtsh_ss(h); }

/* ==== Float types ======================================================== */

/* Activation rows: f32 (F32 weights), f32 values rounded through f16 (F16
 * weights: the f16 x f16 products are exact in f32), or bf16 pairs (BF16
 * weights, for vdpbf16ps). Tails shorter than 16 (32 for bf16) use masks. */
static size_t x_bytes_f32(int64_t n) { return (size_t)n * 4; }
static size_t x_bytes_bf16(int64_t n) { return (size_t)n * 2; }

static void convert_f32(const float *x, void *xq, int64_t n) { memcpy(xq, x, (size_t)n * 4); }

static void convert_f16(const float *x, void *xq, int64_t n) {
    float *o = xq;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(o + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) o[i] = f16_to_f32(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

static void convert_bf16(const float *x, void *xq, int64_t n) {
    rw_bf16 *o = xq;
    for (int64_t i = 0; i < n; i++) o[i] = rw_f32_to_bf16(x[i]);
}

/* Loaders of 16 f32 values at element i: activations (f32), weights (f32
 * or f16), masked to m (zeros elsewhere) when masked, else whole (plain
 * loads: masked ones are slower on AMD); masked is a constant where inlined. */
INLINE __m512 load_x_f32(const uint8_t *x, int64_t i, __mmask16 m, bool masked) {
    return masked ? _mm512_maskz_loadu_ps(m, (const float *)x + i) : _mm512_loadu_ps((const float *)x + i);
}
INLINE __m512 load_w_f16(const uint8_t *w, int64_t i, __mmask16 m, bool masked) {
    const rw_f16 *p = (const rw_f16 *)w + i;
    return _mm512_cvtph_ps(masked ? _mm256_maskz_loadu_epi16(m, p) : _mm256_loadu_si256((const __m256i *)p));
}
#define load_w_f32 load_x_f32

/* Two accumulators per output, for the even and odd 16-element pieces of
 * the row: one chain of dependent fmas per output made the one-row (decode)
 * case latency-bound. A step takes the 32 elements from k (masks m0, m1
 * for the last, partial one). */
#define FLOAT_TILE(name, LOADW)                                                                        \
    INLINE void name##_step(const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs,   \
                            const int nx, int64_t k, __mmask16 m0, __mmask16 m1, bool masked,         \
                            __m512 a0[NW][NX], __m512 a1[NW][NX]) {                                    \
        __m512 x0[NX], x1[NX];                                                                         \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                         \
            x0[j] = load_x_f32(xq + j * xs, k, m0, masked);                                            \
            x1[j] = load_x_f32(xq + j * xs, k + 16, m1, masked);                                       \
        }                                                                                              \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                         \
            const __m512 w0 = LOADW(w + i * ws, k, m0, masked), w1 = LOADW(w + i * ws, k + 16, m1, masked); \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                     \
                a0[i][j] = _mm512_fmadd_ps(w0, x0[j], a0[i][j]);                                       \
                a1[i][j] = _mm512_fmadd_ps(w1, x1[j], a1[i][j]);                                       \
            }                                                                                          \
        }                                                                                              \
    }                                                                                                  \
    INLINE void name##_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq,  \
                            size_t xs, const int nx, float *out) {                                     \
        __m512 a0[NW][NX], a1[NW][NX];                                                                 \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)                                           \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) a0[i][j] = a1[i][j] = _mm512_setzero_ps(); \
        int64_t k = 0;                                                                                 \
        for (; k + 32 <= n; k += 32) name##_step(w, ws, nw, xq, xs, nx, k, 0, 0, false, a0, a1);       \
        if (k < n) {                                                                                   \
            const __mmask16 m0 = n - k >= 16 ? 0xFFFF : (__mmask16)((1u << (n - k)) - 1);              \
            const __mmask16 m1 = n - k <= 16 ? 0 : (__mmask16)((1u << (n - k - 16)) - 1);              \
            name##_step(w, ws, nw, xq, xs, nx, k, m0, m1, true, a0, a1);                               \
        }                                                                                              \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++)                                           \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)                                       \
                out[j * nw + i] = _mm512_reduce_add_ps(_mm512_add_ps(a0[i][j], a1[i][j]));             \
    }

FLOAT_TILE(f32, load_w_f32)
FLOAT_TILE(f16, load_w_f16)

/* As FLOAT_TILE: two accumulators (even and odd 32-element pieces), plain
 * loads for whole pieces. */
INLINE void bf16_step(const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs, const int nx,
                      int64_t k, __mmask32 m0, __mmask32 m1, bool masked, __m512 a0[NW][NX], __m512 a1[NW][NX]) {
    __m512bh x0[NX], x1[NX];
    _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {
        const rw_bf16 *xr = (const rw_bf16 *)(xq + j * xs) + k;
        x0[j] = (__m512bh)(masked ? _mm512_maskz_loadu_epi16(m0, xr) : _mm512_loadu_si512(xr));
        x1[j] = (__m512bh)(masked ? _mm512_maskz_loadu_epi16(m1, xr + 32) : _mm512_loadu_si512(xr + 32));
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {
        const rw_bf16 *wr = (const rw_bf16 *)(w + i * ws) + k;
        const __m512bh w0 = (__m512bh)(masked ? _mm512_maskz_loadu_epi16(m0, wr) : _mm512_loadu_si512(wr));
        const __m512bh w1 = (__m512bh)(masked ? _mm512_maskz_loadu_epi16(m1, wr + 32) : _mm512_loadu_si512(wr + 32));
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {
            a0[i][j] = _mm512_dpbf16_ps(a0[i][j], w0, x0[j]);
            a1[i][j] = _mm512_dpbf16_ps(a1[i][j], w1, x1[j]);
        }
    }
}

INLINE void bf16_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs,
                      const int nx, float *out) {
    __m512 a0[NW][NX], a1[NW][NX];
    _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) a0[i][j] = a1[i][j] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 64 <= n; k += 64) bf16_step(w, ws, nw, xq, xs, nx, k, 0, 0, false, a0, a1);
    if (k < n) {
        const __mmask32 m0 = n - k >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << (n - k)) - 1);
        const __mmask32 m1 = n - k <= 32 ? 0 : (__mmask32)((1u << (n - k - 32)) - 1);
        bf16_step(w, ws, nw, xq, xs, nx, k, m0, m1, true, a0, a1);
    }
    _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++)
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)
            out[j * nw + i] = _mm512_reduce_add_ps(_mm512_add_ps(a0[i][j], a1[i][j]));
}

/* ==== 32-element blocks with Q8_0 / Q8_1 activations ===================== */

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

static size_t x_bytes_chunks(int64_t n) { return (size_t)((n / 32 + 1) / 2) * sizeof(x_chunk); }

/* Quantizes 32 values as ggml's x86 build quantizes activations (see
 * rw_quantize_act_q8_0): d = amax/127, q = nearest-even(x * (127/amax));
 * returns d rounded to f16 (the block's scale) and d itself (for Q8_1's s). */
static void quantize_block32(const float *x, int8_t *q, float *d_out, float *d_raw, int *sum) {
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
 * quants (see the file head), with_s adds Q8_1's s. */
static void convert_chunks(const float *x, void *xq, int64_t n, int bias, int with_s) {
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

static void convert_q8_0_b128(const float *x, void *xq, int64_t n) { convert_chunks(x, xq, n, 128, 0); }
static void convert_q8_0_b8(const float *x, void *xq, int64_t n) { convert_chunks(x, xq, n, 8, 0); }
static void convert_q8_0_b16(const float *x, void *xq, int64_t n) { convert_chunks(x, xq, n, 16, 0); }
static void convert_q8_1(const float *x, void *xq, int64_t n) { convert_chunks(x, xq, n, 0, 1); }

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

/* The 32 fifth bits of a Q5 block as a 32-bit mask (little-endian qh). */
INLINE uint32_t q5_bits(const uint8_t qh[4]) {
    uint32_t v;
    memcpy(&v, qh, 4);
    return v;
}

INLINE w_chunk unpack_q4_0(const uint8_t *row, int64_t c, int two) {
    const rw_block_q4_0 *b = (const rw_block_q4_0 *)row + 2 * c;
    w_chunk w = {nibbles_2x16(b[0].qs, two ? b[1].qs : NULL, two),
                 lane_scales16(b[0].d, two ? b[1].d : 0), _mm512_setzero_ps()};
    return w;
}

INLINE w_chunk unpack_q4_1(const uint8_t *row, int64_t c, int two) {
    const rw_block_q4_1 *b = (const rw_block_q4_1 *)row + 2 * c;
    w_chunk w = {nibbles_2x16(b[0].qs, two ? b[1].qs : NULL, two),
                 lane_scales16(b[0].d, two ? b[1].d : 0),
                 lane_scales16(b[0].m, two ? b[1].m : 0)};
    return w;
}

INLINE __m512i add_q5_bits(__m512i u, const uint8_t *qh0, const uint8_t *qh1, int two) {
    __mmask64 hb = (__mmask64)q5_bits(qh0) | (two ? (__mmask64)q5_bits(qh1) << 32 : 0);
    return _mm512_mask_add_epi8(u, hb, u, _mm512_set1_epi8(16));
}

INLINE w_chunk unpack_q5_0(const uint8_t *row, int64_t c, int two) {
    const rw_block_q5_0 *b = (const rw_block_q5_0 *)row + 2 * c;
    __m512i u = nibbles_2x16(b[0].qs, two ? b[1].qs : NULL, two);
    w_chunk w = {add_q5_bits(u, b[0].qh, two ? b[1].qh : NULL, two),
                 lane_scales16(b[0].d, two ? b[1].d : 0), _mm512_setzero_ps()};
    return w;
}

INLINE w_chunk unpack_q5_1(const uint8_t *row, int64_t c, int two) {
    const rw_block_q5_1 *b = (const rw_block_q5_1 *)row + 2 * c;
    __m512i u = nibbles_2x16(b[0].qs, two ? b[1].qs : NULL, two);
    w_chunk w = {add_q5_bits(u, b[0].qh, two ? b[1].qh : NULL, two),
                 lane_scales16(b[0].d, two ? b[1].d : 0),
                 lane_scales16(b[0].m, two ? b[1].m : 0)};
    return w;
}

/* IQ4_NL's 16 values plus 128 (so unsigned), for vpshufb. */
static const int8_t iq4nl_plus128[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, (int8_t)153, (int8_t)166,
                                         (int8_t)181, (int8_t)197, (int8_t)217, (int8_t)241};

INLINE __m512i iq4_lookup(__m512i nib) {
    __m512i tab = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4nl_plus128));
    return _mm512_shuffle_epi8(tab, nib);
}

INLINE w_chunk unpack_iq4_nl(const uint8_t *row, int64_t c, int two) {
    const rw_block_iq4_nl *b = (const rw_block_iq4_nl *)row + 2 * c;
    __m512i nib = nibbles_2x16(b[0].qs, two ? b[1].qs : NULL, two);
    w_chunk w = {iq4_lookup(nib), lane_scales16(b[0].d, two ? b[1].d : 0),
                 _mm512_setzero_ps()};
    return w;
}

/* Q8_0 weights biased to unsigned (the activation's base removes 128 *
 * the lane's quant sum exactly). */
INLINE w_chunk unpack_q8_0(const uint8_t *row, int64_t c, int two) {
    const rw_block_q8_0 *b = (const rw_block_q8_0 *)row + 2 * c;
    __m256i lo = _mm256_loadu_si256((const __m256i *)b[0].qs);
    __m256i hi = two ? _mm256_loadu_si256((const __m256i *)b[1].qs) : _mm256_set1_epi8((char)0x80);
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    w_chunk w = {_mm512_xor_si512(v, _mm512_set1_epi8((char)0x80)), lane_scales16(b[0].d, two ? b[1].d : 0),
                 _mm512_setzero_ps()};
    return w;
}

#define B32_PF_DIST 4096 /* bytes ahead in a row that the 32-block tiles prefetch (one line per two blocks) */
/* The float step of a 32-block tile for one output and one 64-element
 * chunk, p the chunk's 16 exact lane sums (as floats), s their scales
 * dw*dx: per lane (each lane adds its own block's products; the min term
 * for Q4_1/Q5_1), reduced at the end by _mm512_reduce_add_ps. */
INLINE __m512 b32_lanes(__m512 acc, __m512 p, __m512 s, const w_chunk *wc, const x_chunk *xc, int two) {
    return _mm512_fmadd_ps(p, s, acc);
}
INLINE __m512 b32_lanes_min(__m512 acc, __m512 p, __m512 s, const w_chunk *wc, const x_chunk *xc, int two) {
    return _mm512_fmadd_ps(wc->mw, _mm512_load_ps(xc->sx), _mm512_fmadd_ps(p, s, acc));
}

/* ggml's hsum_float_8: upper four lanes onto the lower four, then lanes
 * 0+2 and 1+3, then those two. */
INLINE float hsum8_ggml(__m256 a) {
    __m128 t = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

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

/* Q4_1 / Q5_1 in ggml's order: the lanes as b32_ggml, and the min term
 * m * s of each block (an exact product) onto its own float sum, added
 * after the lanes' hsum. */
typedef struct {
    __m256 a;
    float s;
} b32_min_acc;
INLINE b32_min_acc b32_ggml_min(b32_min_acc acc, __m512 p, __m512 s, const w_chunk *wc, const x_chunk *xc, int two) {
    acc.a = b32_ggml(acc.a, p, s, wc, xc, two);
    acc.s = fmaf(_mm512_cvtss_f32(wc->mw), xc->sx[0], acc.s);
    if (two) acc.s = fmaf(_mm_cvtss_f32(_mm512_extractf32x4_ps(wc->mw, 2)), xc->sx[8], acc.s);
    return acc;
}
INLINE float b32_min_reduce(b32_min_acc acc) { return hsum8_ggml(acc.a) + acc.s; }

/* A 32-block tile: ACC_T accumulators per output, started at ZERO, updated
 * by STEP per chunk and reduced by REDUCE. */
#define BLOCK32_TILE_GEN(name, UNPACK, BLK, ACC_T, ZERO, STEP, REDUCE)                                 \
    INLINE void name##_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq,   \
                            size_t xs, const int nx, float *out) {                                      \
        ACC_T acc[NW][NX];                                                                              \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)                                           \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) acc[i][j] = ZERO;                     \
        int64_t nb = n / 32, nc = (nb + 1) / 2;                                                         \
        for (int64_t c = 0; c < nc; c++) {                                                              \
            int two = 2 * c + 1 < nb;                                                                   \
            w_chunk wc[NW];                                                                             \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                     \
                _mm_prefetch((const char *)(w + i * ws) + 2 * c * sizeof(BLK) + B32_PF_DIST, _MM_HINT_T0); \
                wc[i] = UNPACK(w + i * ws, c, two);                                                     \
            }                                                                                           \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                     \
                const x_chunk *xc = (const x_chunk *)(xq + j * xs) + c;                                 \
                __m512i xqv = _mm512_load_si512(xc->qs);                                                \
                __m512 dx = _mm512_load_ps(xc->dx);                                                     \
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                 \
                    __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_load_si512(xc->base), wc[i].u, xqv)); \
                    acc[i][j] = STEP(acc[i][j], p, _mm512_mul_ps(wc[i].dw, dx), &wc[i], xc, two);       \
                }                                                                                       \
            }                                                                                           \
        }                                                                                               \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++)                                           \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) out[j * nw + i] = REDUCE(acc[i][j]);  \
    }
#define BLOCK32_TILE(name, UNPACK, STEP, BLK)                                                          \
    BLOCK32_TILE_GEN(name, UNPACK, BLK, __m512, _mm512_setzero_ps(), STEP, _mm512_reduce_add_ps)
#define BLOCK32_TILE_GGML(name, UNPACK, BLK)                                                           \
    BLOCK32_TILE_GEN(name, UNPACK, BLK, __m256, _mm256_setzero_ps(), b32_ggml, hsum8_ggml)

BLOCK32_TILE(q4_0, unpack_q4_0, b32_lanes, rw_block_q4_0)
BLOCK32_TILE(q4_1, unpack_q4_1, b32_lanes_min, rw_block_q4_1)
BLOCK32_TILE(q5_0, unpack_q5_0, b32_lanes, rw_block_q5_0)
BLOCK32_TILE(q5_1, unpack_q5_1, b32_lanes_min, rw_block_q5_1)
BLOCK32_TILE(iq4_nl, unpack_iq4_nl, b32_lanes, rw_block_iq4_nl)
BLOCK32_TILE_GGML(q8_0_ggml, unpack_q8_0, rw_block_q8_0)
BLOCK32_TILE_GGML(q4_0_ggml, unpack_q4_0, rw_block_q4_0)
BLOCK32_TILE_GGML(q5_0_ggml, unpack_q5_0, rw_block_q5_0)
BLOCK32_TILE_GEN(q4_1_ggml, unpack_q4_1, rw_block_q4_1, b32_min_acc, ((b32_min_acc){_mm256_setzero_ps(), 0.0f}),
                 b32_ggml_min, b32_min_reduce)
BLOCK32_TILE_GEN(q5_1_ggml, unpack_q5_1, rw_block_q5_1, b32_min_acc, ((b32_min_acc){_mm256_setzero_ps(), 0.0f}),
                 b32_ggml_min, b32_min_reduce)

/* ==== Q8_0: exact block sums, four float accumulators ===================
 *
 * Q8_0 does not use the per-lane scheme above: each output is
 *   acc[k] = fma((float)isum_b, dw_b * dx_b, acc[k])   for b = 0, 1, ... in order,
 *   k = (b % 8) / 2, acc[] starting at +0;   y = (acc[0] + acc[1]) + (acc[2] + acc[3])
 * with isum_b the exact integer dot product of block b. Only one float step
 * per block keeps many-row work bound by vpdpbusd, and both forms below do
 * exactly this arithmetic per output:
 *   - one row (tile): 16 blocks at a time in the lane layout (8 vpdpbusd),
 *     their lanes summed exactly to one lane per block by a fixed tree that
 *     leaves the blocks in "V order" [0 2 4 6 | 1 3 5 7 | 8 10 12 14 | 9 11 13 15];
 *     the four 128-bit quarters then update the 4-lane accumulator in turn,
 *     which is acc[k] in lane k, blocks in increasing order;
 *   - many rows (tile_g): one activation row per lane; a block's 32 weights
 *     are broadcast 4 bytes at a time against 16 rows' quants (biased +128
 *     to unsigned, the bias removed exactly with -128 * sum of the block's
 *     weights), giving isum_b for 16 rows in one register.
 * Float accumulation differs from the reference only in order. */

/* V order: lane l of a 16-block group holds block vord(l); block j sits in
 * lane vpos(j). */
static inline int vpos(int j) { return (j & 8) + ((j & 1) << 2) + ((j & 7) >> 1); }

/* One-row activation: per 16 blocks, 8 lane-layout chunks (quants, -128 *
 * lane sums) and the 16 block scales in V order (0 past the last block). */
typedef struct {
    struct {
        int8_t qs[64];
        int32_t base[16];
    } ch[8];
    float dx[16];
} x_q8g;

static size_t x_bytes_q8g(int64_t n) { return (size_t)((n / 32 + 15) / 16) * sizeof(x_q8g); }

static void convert_q8_0_row(const float *x, void *xq, int64_t n) {
    x_q8g *g = xq;
    int64_t nb = n / 32;
    memset(xq, 0, x_bytes_q8g(n));
    for (int64_t b = 0; b < nb; b++) {
        x_q8g *gg = &g[b / 16];
        int j = (int)(b % 16), c = j / 2, half = j % 2, sum;
        float d, d_raw;
        quantize_block32(x + b * 32, gg->ch[c].qs + 32 * half, &d, &d_raw, &sum);
        for (int l = 0; l < 8; l++) {
            const int8_t *q4 = gg->ch[c].qs + 32 * half + 4 * l;
            gg->ch[c].base[8 * half + l] = -128 * (q4[0] + q4[1] + q4[2] + q4[3]);
        }
        gg->dx[vpos(j)] = d;
    }
}

/* Sums the 8 lanes of each block of p[0..7] (block 2c in lanes 0-7 of p[c],
 * 2c+1 in lanes 8-15) into one lane per block, in V order. Exact. */
INLINE __m512i block_sums16(const __m512i p[8]) {
    __m512i t[4], u[2];
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
        t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * i], p[2 * i + 1]),
                                _mm512_unpackhi_epi32(p[2 * i], p[2 * i + 1]));
    _Pragma("GCC unroll 2") for (int i = 0; i < 2; i++)
        u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
                                _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

#ifndef Q8_PF_DIST
#define Q8_PF_DIST 4096 /* bytes ahead that the Q8_0 one-row, quad and panel forms prefetch */
#endif
/* Byte offset of block j of a weight row (for the scale gathers). */
#define Q8_VOFF(j) ((j) * (int)sizeof(rw_block_q8_0))

INLINE float q8_0_row_dot(int64_t n, const uint8_t *w, const x_q8g *xg) {
    const int64_t nb = n / 32;
    const __m512i voff = _mm512_setr_epi32(Q8_VOFF(0), Q8_VOFF(2), Q8_VOFF(4), Q8_VOFF(6), Q8_VOFF(1), Q8_VOFF(3),
                                           Q8_VOFF(5), Q8_VOFF(7), Q8_VOFF(8), Q8_VOFF(10), Q8_VOFF(12),
                                           Q8_VOFF(14), Q8_VOFF(9), Q8_VOFF(11), Q8_VOFF(13), Q8_VOFF(15));
    __m128 acc = _mm_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 16, xg++) {
        const rw_block_q8_0 *blk = (const rw_block_q8_0 *)w + b0;
        const int left = nb - b0 < 16 ? (int)(nb - b0) : 16;
        /* the hardware prefetcher alone left one row at 36 GB/s, with this 44 (Zen 5) */
        _Pragma("GCC unroll 9") for (int l = 0; l < 9; l++)
            _mm_prefetch((const char *)blk + Q8_PF_DIST + 64 * l, _MM_HINT_T0);
        __m512i p[8];
        __mmask16 valid;
        if (left == 16) {
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
                __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)blk[2 * c].qs)),
                                               _mm256_loadu_si256((const __m256i *)blk[2 * c + 1].qs), 1);
                p[c] = _mm512_dpbusd_epi32(_mm512_load_si512(xg->ch[c].base),
                                           _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80)),
                                           _mm512_load_si512(xg->ch[c].qs));
            }
            valid = 0xFFFF;
        } else {
            /* missing blocks: zero quants and base, so their sums are 0 */
            for (int c = 0; c < 8; c++) {
                __m256i lo = 2 * c < left ? _mm256_loadu_si256((const __m256i *)blk[2 * c].qs)
                                          : _mm256_set1_epi8((char)0x80);
                __m256i hi = 2 * c + 1 < left ? _mm256_loadu_si256((const __m256i *)blk[2 * c + 1].qs)
                                              : _mm256_set1_epi8((char)0x80);
                __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                p[c] = _mm512_dpbusd_epi32(_mm512_load_si512(xg->ch[c].base),
                                           _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80)),
                                           _mm512_load_si512(xg->ch[c].qs));
            }
            valid = 0;
            for (int j = 0; j < left; j++) valid |= (__mmask16)(1u << vpos(j));
        }
        __m512 v = _mm512_cvtepi32_ps(block_sums16(p));
        __m512i dw16 = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, voff, blk, 1);
        __m512 s = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(dw16)), _mm512_load_ps(xg->dx));
        acc = _mm_fmadd_ps(_mm512_castps512_ps128(v), _mm512_castps512_ps128(s), acc);
        acc = _mm_fmadd_ps(_mm512_extractf32x4_ps(v, 1), _mm512_extractf32x4_ps(s, 1), acc);
        acc = _mm_fmadd_ps(_mm512_extractf32x4_ps(v, 2), _mm512_extractf32x4_ps(s, 2), acc);
        acc = _mm_fmadd_ps(_mm512_extractf32x4_ps(v, 3), _mm512_extractf32x4_ps(s, 3), acc);
    }
    float a[4];
    _mm_storeu_ps(a, acc);
    return (a[0] + a[1]) + (a[2] + a[3]);
}

static void tile_q8_0(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx,
                      float *out) {
    for (int j = 0; j < nx; j++)
        for (int i = 0; i < nw; i++) out[j * nw + i] = q8_0_row_dot(n, w + i * ws, (const x_q8g *)(xq + j * xs));
}

/* Group of 16 activation rows: per block, 8 x 64 bytes (4-byte piece s of
 * the block for rows 0..15: quant + 128) and the rows' block scales. */
typedef struct {
    uint8_t q[8][64];
    float dx[16];
} xg_q8_blk;

static size_t g_bytes_q8(int64_t n) { return (size_t)(n / 32) * sizeof(xg_q8_blk); }

static void convert_q8_0_g(const float *const *rows, int n_rows, void *xg, int64_t n) {
    xg_q8_blk *g = xg;
    int64_t nb = n / 32;
    memset(xg, 0x80, g_bytes_q8(n)); /* padding rows: quants 0 */
    for (int64_t b = 0; b < nb; b++) memset(g[b].dx, 0, sizeof g[b].dx);
    for (int r = 0; r < n_rows; r++)
        for (int64_t b = 0; b < nb; b++) {
            int8_t q[32];
            float d, d_raw;
            int sum;
            quantize_block32(rows[r] + b * 32, q, &d, &d_raw, &sum);
            for (int s = 0; s < 8; s++)
                for (int t = 0; t < 4; t++) g[b].q[s][4 * r + t] = (uint8_t)(q[4 * s + t] + 128);
            g[b].dx[r] = d;
        }
}

/* 4 weight bytes at any address (the quants of a block sit 2 bytes in). */
typedef int32_t i32u __attribute__((aligned(1), may_alias));

/* Up to 8 weight rows x 4 groups per call; the accumulators of the current
 * k only live in registers (blocks 2k, 2k+1 of each 8 share acc[k]). */
enum { Q8G_NW = 8, Q8G_MAX_NG = 4 };

static void tile_g_q8_0(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xg, size_t xgs, int nx,
                        float *out, int64_t os) {
    const int64_t nb = n / 32;
    const int ng = (nx + 15) / 16;
    __m512 accs[Q8G_MAX_NG][4][Q8G_NW];
    for (int g = 0; g < ng; g++)
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < Q8G_NW; i++) accs[g][k][i] = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        const int nbb = nb - b0 < 8 ? (int)(nb - b0) : 8;
        /* per weight row and block of this chunk: -128 * sum of the quants, and the scale */
        int32_t corr[Q8G_NW][8];
        float dw[Q8G_NW][8];
        for (int i = 0; i < nw; i++)
            for (int bb = 0; bb < nbb; bb++) {
                const rw_block_q8_0 *blk = (const rw_block_q8_0 *)(w + i * ws) + b0 + bb;
                __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)blk->qs), _mm256_set1_epi8((char)0x80));
                __m256i s4 = _mm256_sad_epu8(v, _mm256_setzero_si256());
                __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
                int64_t sum = _mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1) - 32 * 128;
                corr[i][bb] = (int32_t)(-128 * sum);
                dw[i][bb] = f16_to_f32(blk->d);
            }
        for (int g = 0; g < ng; g++) {
            const xg_q8_blk *xb = (const xg_q8_blk *)(xg + (size_t)g * xgs) + b0;
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                if (2 * k >= nbb) break;
                __m512 acc[Q8G_NW];
                _Pragma("GCC unroll 8") for (int i = 0; i < Q8G_NW; i++) acc[i] = accs[g][k][i];
                _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                    const int bb = 2 * k + h;
                    if (bb >= nbb) break;
                    __m512i X[8];
                    _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) X[s] = _mm512_load_si512(xb[bb].q[s]);
                    const __m512 dx = _mm512_load_ps(xb[bb].dx);
                    _Pragma("GCC unroll 8") for (int i = 0; i < Q8G_NW; i++) {
                        if (i >= nw) break;
                        const i32u *wq = (const i32u *)((const rw_block_q8_0 *)(w + i * ws) + b0 + bb)->qs;
                        __m512i ia = _mm512_set1_epi32(corr[i][bb]), ib = _mm512_setzero_si512();
                        _Pragma("GCC unroll 4") for (int s = 0; s < 8; s += 2) {
                            ia = _mm512_dpbusd_epi32(ia, X[s], _mm512_set1_epi32(wq[s]));
                            ib = _mm512_dpbusd_epi32(ib, X[s + 1], _mm512_set1_epi32(wq[s + 1]));
                        }
                        __m512 sc = _mm512_mul_ps(_mm512_set1_ps(dw[i][bb]), dx);
                        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(ia, ib)), sc, acc[i]);
                    }
                }
                _Pragma("GCC unroll 8") for (int i = 0; i < Q8G_NW; i++) accs[g][k][i] = acc[i];
            }
        }
    }
    for (int g = 0; g < ng; g++)
        for (int i = 0; i < nw; i++) {
            float y[16];
            _mm512_storeu_ps(y, _mm512_add_ps(_mm512_add_ps(accs[g][0][i], accs[g][1][i]),
                                              _mm512_add_ps(accs[g][2][i], accs[g][3][i])));
            for (int l = 0; l < 16 && g * 16 + l < nx; l++) out[(g * 16 + l) * os + i] = y[l];
        }
}

/* ---- few rows: the quad form -------------------------------------------
 *
 * For 2..8 activation rows (speculative verify passes, small decode
 * batches) the lane form would redo its block-sum tree for every row and
 * the 16-lane group form would pad to 16 rows. The quad form packs 4 rows:
 * lane (j, r) = 4j + r of a register holds row r's accumulator k = j, and
 * the blocks of each octet (8 blocks) are taken as "even" blocks 0,2,4,6
 * (lane j: block 2j) and then "odd" blocks 1,3,5,7. So every lane sums
 * one whole block of one row by 8 vpdpbusd (no reduction tree) and the
 * float steps are exactly the lane form's: acc[k] = fma(isum_b, dw_b * dx_b,
 * acc[k]) with block 2k before 2k+1 and octets in order, y = (acc[0] +
 * acc[1]) + (acc[2] + acc[3]). The weights are biased to unsigned after an
 * exact permute (dword s of block 2j into lanes 4j..4j+3), the activations
 * stay signed, and -128 * (sum of the block's quants) starts each sum. */

/* One octet of a quad: [even/odd][s][lane * 4 + t] = quant 4s + t of the
 * lane's block and row; per lane the bias and the block's scale. Missing
 * rows and blocks are all zero. */
typedef struct {
    int8_t q[2][8][64];
    int32_t base[2][16];
    float dx[2][16];
} xq_q8_oct;

enum { Q8Q_ROWS = 4, Q8Q_MAX_NQ = 4 };

static size_t q_bytes_q8(int64_t n) { return (size_t)((n / 32 + 7) / 8) * sizeof(xq_q8_oct); }

static void convert_q8_0_q(const float *const *rows, int n_rows, void *xq, int64_t n) {
    xq_q8_oct *o = xq;
    int64_t nb = n / 32;
    memset(xq, 0, q_bytes_q8(n));
    for (int r = 0; r < n_rows; r++)
        for (int64_t b = 0; b < nb; b++) {
            int8_t q[32];
            float d, d_raw;
            int sum;
            quantize_block32(rows[r] + b * 32, q, &d, &d_raw, &sum);
            xq_q8_oct *oc = &o[b / 8];
            const int e = (int)(b % 8), eo = e % 2, lane = (e / 2) * 4 + r;
            for (int s = 0; s < 8; s++) memcpy(&oc->q[eo][s][lane * 4], q + 4 * s, 4);
            oc->base[eo][lane] = -128 * sum;
            oc->dx[eo][lane] = d;
        }
}

/* Quads 0..NQ-1 against one weight row; out[(4q + r) * os] for rows < nx. */
INLINE void q8_0_quad_dot(int64_t n, const uint8_t *w, const uint8_t *xq, size_t xqs, int nx, float *out,
                          int64_t os, const int NQ) {
    const int64_t nb = n / 32;
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    /* lane 4j + r takes dword j*8 + s of the pair of loaded registers */
    const __m512i lane_j = _mm512_setr_epi32(0, 0, 0, 0, 8, 8, 8, 8, 16, 16, 16, 16, 24, 24, 24, 24);
    /* the scales, converted once per octet: lane 4j + r of the even (odd) vector takes block 2j (2j+1) */
    const __m512i even_idx = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
    const __m512i odd_idx = _mm512_add_epi32(even_idx, _mm512_set1_epi32(1));
    const __m256i doff = _mm256_setr_epi32(Q8_VOFF(0), Q8_VOFF(1), Q8_VOFF(2), Q8_VOFF(3), Q8_VOFF(4), Q8_VOFF(5),
                                           Q8_VOFF(6), Q8_VOFF(7));
    __m512 acc[Q8Q_MAX_NQ];
    _Pragma("GCC unroll 4") for (int qd = 0; qd < NQ; qd++) acc[qd] = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        const rw_block_q8_0 *blk = (const rw_block_q8_0 *)w + b0;
        const int left = nb - b0 < 8 ? (int)(nb - b0) : 8;
        _Pragma("GCC unroll 5") for (int l = 0; l < 5; l++)
            _mm_prefetch((const char *)blk + Q8_PF_DIST + 64 * l, _MM_HINT_T0);
        __m256i qs[8];
        _Pragma("GCC unroll 8") for (int e = 0; e < 8; e++)
            qs[e] = e < left ? _mm256_loadu_si256((const __m256i *)blk[e].qs) : _mm256_set1_epi8((char)0x80);
        /* even blocks 0,2 | 4,6 and odd blocks 1,3 | 5,7, biased to unsigned */
        __m512i ev0 = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(qs[0]), qs[2], 1), bias);
        __m512i ev1 = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(qs[4]), qs[6], 1), bias);
        __m512i od0 = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(qs[1]), qs[3], 1), bias);
        __m512i od1 = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(qs[5]), qs[7], 1), bias);
        const __mmask8 valid = (__mmask8)((1u << left) - 1);
        __m256i d32 = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), valid, doff, blk, 1);
        __m512 d8 = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(d32)));
        __m512 dw_e = _mm512_permutexvar_ps(even_idx, d8), dw_o = _mm512_permutexvar_ps(odd_idx, d8);
        __m512i ie[Q8Q_MAX_NQ], io[Q8Q_MAX_NQ];
        _Pragma("GCC unroll 4") for (int qd = 0; qd < NQ; qd++) {
            const xq_q8_oct *xo = (const xq_q8_oct *)(xq + (size_t)qd * xqs) + b0 / 8;
            ie[qd] = _mm512_load_si512(xo->base[0]);
            io[qd] = _mm512_load_si512(xo->base[1]);
        }
        /* one index register stepped per s, and a short unroll: with 4 quads
         * every sum must stay in a register (spills cost 2x) */
        __m512i idx = lane_j;
        _Pragma("GCC unroll 2") for (int s = 0; s < 8; s++, idx = _mm512_add_epi32(idx, _mm512_set1_epi32(1))) {
            const __m512i we = _mm512_permutex2var_epi32(ev0, idx, ev1);
            const __m512i wo = _mm512_permutex2var_epi32(od0, idx, od1);
            _Pragma("GCC unroll 4") for (int qd = 0; qd < NQ; qd++) {
                const xq_q8_oct *xo = (const xq_q8_oct *)(xq + (size_t)qd * xqs) + b0 / 8;
                ie[qd] = _mm512_dpbusd_epi32(ie[qd], we, _mm512_load_si512(xo->q[0][s]));
                io[qd] = _mm512_dpbusd_epi32(io[qd], wo, _mm512_load_si512(xo->q[1][s]));
            }
        }
        _Pragma("GCC unroll 4") for (int qd = 0; qd < NQ; qd++) {
            const xq_q8_oct *xo = (const xq_q8_oct *)(xq + (size_t)qd * xqs) + b0 / 8;
            acc[qd] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ie[qd]), _mm512_mul_ps(dw_e, _mm512_load_ps(xo->dx[0])),
                                      acc[qd]);
            acc[qd] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(io[qd]), _mm512_mul_ps(dw_o, _mm512_load_ps(xo->dx[1])),
                                      acc[qd]);
        }
    }
    _Pragma("GCC unroll 4") for (int qd = 0; qd < NQ; qd++) {
        __m128 y = _mm_add_ps(_mm_add_ps(_mm512_castps512_ps128(acc[qd]), _mm512_extractf32x4_ps(acc[qd], 1)),
                              _mm_add_ps(_mm512_extractf32x4_ps(acc[qd], 2), _mm512_extractf32x4_ps(acc[qd], 3)));
        float v[4];
        _mm_storeu_ps(v, y);
        for (int r = 0; r < Q8Q_ROWS && qd * Q8Q_ROWS + r < nx; r++) out[(qd * Q8Q_ROWS + r) * os] = v[r];
    }
}

static void tile_q_q8_0(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xqs, int nx,
                        float *out, int64_t os) {
    /* a constant quad count per call keeps every sum in a register */
    switch ((nx + Q8Q_ROWS - 1) / Q8Q_ROWS) {
    case 1: for (int i = 0; i < nw; i++) q8_0_quad_dot(n, w + i * ws, xq, xqs, nx, out + i, os, 1); break;
    case 2: for (int i = 0; i < nw; i++) q8_0_quad_dot(n, w + i * ws, xq, xqs, nx, out + i, os, 2); break;
    case 3: for (int i = 0; i < nw; i++) q8_0_quad_dot(n, w + i * ws, xq, xqs, nx, out + i, os, 3); break;
    default: for (int i = 0; i < nw; i++) q8_0_quad_dot(n, w + i * ws, xq, xqs, nx, out + i, os, 4); break;
    }
}

/* ---- two rows and more, repacked weights: the panel form ----------------
 *
 * rw_matmul_pack lays a Q8_0 matrix out in panels of 16 weight rows: per
 * block, 8 x 64 bytes (dword s of the block for rows 0..15, biased +128 to
 * unsigned), then, after the quants of every block, per block the 16 rows'
 * f16 scales: 544 bytes a block, as many as the 16 rows take in the GGUF
 * layout, and the quants stay 64-byte aligned when the panel is. Blocks are
 * stored in the order the tile takes them: accumulator k = 0..3 outermost,
 * then octet o, then blocks 8o+2k and 8o+2k+1. One register holds one activation row's
 * accumulator k for 16 outputs and the activation's quants are broadcast 4
 * bytes at a time, so every lane works whatever the number of rows, and a
 * panel block is loaded once for all of them. Per output this is the lane
 * form's arithmetic: acc[k] = fma(isum_b, dw_b * dx_b, acc[k]) over blocks
 * 2k, 2k+1 of each octet in order (acc[k] depends on no other k, so k may
 * come first), y = (acc[0] + acc[1]) + (acc[2] + acc[3]); isum is exact
 * (the weights' bias removed with -128 * the sum of the activation's
 * quants). */
typedef struct {
    uint8_t q[8][64];
} wp_q8_blk;

enum { Q8P_ROWS = 16, Q8P_MAX_NX = 16 };

/* One activation row's block: quants, scale, -128 * sum of the quants. */
typedef struct {
    int8_t q[32];
    float d;
    int32_t corr;
} xp_q8_blk;

static size_t p_bytes_q8(int64_t n) { return (size_t)(n / 32) * sizeof(xp_q8_blk); }

static void convert_q8_0_p(const float *const *rows, int n_rows, void *xp, int64_t n) {
    xp_q8_blk *x = xp;
    memset(xp, 0, p_bytes_q8(n));
    if (n_rows < 1) return;
    for (int64_t b = 0; b < n / 32; b++) {
        float d_raw;
        int sum;
        quantize_block32(rows[0] + b * 32, x[b].q, &x[b].d, &d_raw, &sum);
        x[b].corr = -128 * sum;
    }
}

/* Block b of the 16 weight rows from row0 (ws apart; n_left of them
 * exist) into one panel block: dword s of each row at [s][4 * row], each
 * byte XORed with bias (0x80: biased +128 to unsigned; 0: left signed),
 * and the rows' f16 scales; missing rows get weights and scales 0. Shared
 * by both Q8_0 panel forms. */
static void pack_q8_0_block(const uint8_t *row0, size_t ws, int n_left, int64_t b, uint8_t bias, uint8_t q[8][64],
                            uint16_t d[16]) {
    memset(q, bias, 8 * 64);
    memset(d, 0, 16 * sizeof *d);
    for (int l = 0; l < 16 && l < n_left; l++) {
        const rw_block_q8_0 *blk = (const rw_block_q8_0 *)(row0 + (size_t)l * ws) + b;
        for (int s = 0; s < 8; s++)
            for (int t = 0; t < 4; t++) q[s][4 * l + t] = (uint8_t)(blk->qs[4 * s + t] ^ bias);
        d[l] = blk->d;
    }
}

static void pack_q8_0_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    const int64_t nb = n / 32, n_oct = (nb + 7) / 8;
    for (int64_t p0 = 0; p0 < n_out; p0 += Q8P_ROWS) {
        wp_q8_blk *q = (wp_q8_blk *)(dst + (size_t)p0 * (size_t)nb * sizeof(rw_block_q8_0));
        uint16_t(*d)[16] = (uint16_t(*)[16])(q + nb);
        for (int k = 0; k < 4; k++)
            for (int64_t o = 0; o < n_oct; o++)
                for (int h = 0; h < 2; h++) {
                    const int64_t b = 8 * o + 2 * k + h;
                    if (b >= nb) continue;
                    pack_q8_0_block(w + (size_t)p0 * ws, ws, (int)(n_out - p0), b, 0x80, q->q, *d);
                    q++, d++;
                }
    }
}

/* acc += dpbusd(w, the 4 bytes at p broadcast): GCC does not fold the
 * broadcast into the instruction's memory operand by itself, and the
 * separate broadcasts cost as many instructions as the products. */
#define DPBUSD_BCST(acc, w, p) __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(p)))

/* One panel (16 outputs) against R activation rows; out[r * os + l] for
 * outputs l < nl. */
INLINE void q8_0_panel_dot(int64_t n, const wp_q8_blk *P, const uint8_t *xp, size_t xps, int nl, float *out,
                           int64_t os, const int R) {
    const int64_t nb = n / 32, n_oct = (nb + 7) / 8;
    const uint16_t(*D)[16] = (const uint16_t(*)[16])(P + nb);
    __m512 part[2][Q8P_MAX_NX]; /* (acc[0] + acc[1]) and (acc[2] + acc[3]) */
    for (int k = 0; k < 4; k++) {
        __m512 acc[Q8P_MAX_NX];
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
        for (int64_t o = 0; o < n_oct; o++)
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const int64_t b = 8 * o + 2 * k + h;
                if (b >= nb) break;
                __m512i W[8];
                _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
                    _mm_prefetch((const char *)P->q[s] + Q8_PF_DIST, _MM_HINT_T0);
                    W[s] = _mm512_loadu_si512(P->q[s]);
                }
                const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)*D));
                P++, D++;
                _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) {
                    const xp_q8_blk *xb = (const xp_q8_blk *)(xp + (size_t)r * xps) + b;
                    const i32u *xq = (const i32u *)xb->q;
                    __m512i ia = _mm512_set1_epi32(xb->corr);
                    _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) DPBUSD_BCST(ia, W[s], xq + s);
                    const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xb->d));
                    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), sc, acc[r]);
                }
            }
        /* acc[0] + acc[1] and acc[2] + acc[3] as soon as both are done */
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) {
            if (k % 2 == 0) part[k / 2][r] = acc[r];
            else part[k / 2][r] = _mm512_add_ps(part[k / 2][r], acc[r]);
        }
    }
    const __mmask16 lanes = (__mmask16)((1u << nl) - 1);
    _Pragma("GCC unroll 16") for (int r = 0; r < R; r++)
        _mm512_mask_storeu_ps(out + r * os, lanes, _mm512_add_ps(part[0][r], part[1][r]));
}

/* w: the panel of weight row 0 (ws: bytes per row in the GGUF layout, so a
 * panel spans 16 * ws); nw rows from there, nx <= Q8P_MAX_NX activation
 * rows; out[r * os + i]. */
static void tile_p_q8_0(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                        float *out, int64_t os) {
    for (int i = 0; i < nw; i += Q8P_ROWS) {
        const wp_q8_blk *P = (const wp_q8_blk *)(w + (size_t)i * ws);
        const int nl = nw - i < Q8P_ROWS ? nw - i : Q8P_ROWS;
        switch (nx) { /* a constant row count keeps every accumulator in a register */
#define PANEL_CASE(R)                                                                                                \
    case R: q8_0_panel_dot(n, P, xp, xps, nl, out + i, os, R); break;
            PANEL_CASE(1) PANEL_CASE(2) PANEL_CASE(3) PANEL_CASE(4) PANEL_CASE(5) PANEL_CASE(6) PANEL_CASE(7)
            PANEL_CASE(8) PANEL_CASE(9) PANEL_CASE(10) PANEL_CASE(11) PANEL_CASE(12) PANEL_CASE(13) PANEL_CASE(14)
            PANEL_CASE(15) PANEL_CASE(16)
#undef PANEL_CASE
        default: break;
        }
    }
}

/* ==== Q8_0 in ggml's order over repacked weights: the panel form =======
 *
 * RW_NUMERICS_GGML, for 2 activation rows and more. The panels have the
 * fast form's layout (pack_q8_0_block) with the blocks in their natural
 * order and the weights left signed; the activations' quants are the ones
 * biased, +128 to unsigned, for vpdpbusd.
 *
 * Register s of an activation row holds ggml's lane s (products 4s..4s+3
 * of each block) for 16 outputs: per output the arithmetic is exactly
 * BLOCK32_TILE_GGML's (acc_s = fma(dw_b * dx_b, lsum_bs, acc_s) block after
 * block, then hsum8_ggml over the eight lanes), laid out across registers
 * instead of lanes, so every lane works whatever the number of rows. The
 * activation's bias comes off exactly: each lane sum starts from -128 *
 * (sum of the output's 4 weights), computed once per weight register for
 * all the activation rows of a pass.
 *
 * Why this shape (measured on Zen 5, where vector loads issue 2 a cycle,
 * prefetches 1, and vpdpbusd and fma share two pipes): a pass takes up to
 * 3 activation rows (their 24 accumulators fill the register file with a
 * weight register and the correction), so each weight register and its
 * correction serve 3 rows; the passes take turns over spans of
 * Q8GP_CHUNK blocks, so the weights stream from memory once and the later
 * passes find them in L1; the first pass alone prefetches, one span
 * ahead, so the next span arrives while the later passes compute. The
 * previous form (pairs of rows, a per-row correction broadcast for every
 * product, prefetches in every pass) took 1.25x the time for 16 rows and
 * 1.3x for 512 (bench kernels, 2 threads). */
enum { Q8GP_ROWS = 16, Q8GP_MAX_NX = 16, Q8GP_CHUNK = 16, Q8GP_MAX_R = 3 };

/* One activation row's block: quants + 128, scale. */
typedef struct {
    uint8_t u[32];
    float d;
} xpg_q8_blk;

static size_t pg_bytes_q8(int64_t n) { return (size_t)(n / 32) * sizeof(xpg_q8_blk); }

static void convert_q8_0_gp(const float *const *rows, int n_rows, void *xp, int64_t n) {
    xpg_q8_blk *x = xp;
    memset(xp, 0, pg_bytes_q8(n));
    if (n_rows < 1) return;
    for (int64_t b = 0; b < n / 32; b++) {
        float d_raw;
        int sum;
        int8_t q[32];
        quantize_block32(rows[0] + b * 32, q, &x[b].d, &d_raw, &sum);
        for (int i = 0; i < 32; i++) x[b].u[i] = (uint8_t)(q[i] ^ 0x80);
    }
}

static void pack_q8_0_gp(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    const int64_t nb = n / 32;
    for (int64_t p0 = 0; p0 < n_out; p0 += Q8GP_ROWS) {
        wp_q8_blk *q = (wp_q8_blk *)(dst + (size_t)p0 * (size_t)nb * sizeof(rw_block_q8_0));
        uint16_t(*d)[16] = (uint16_t(*)[16])(q + nb);
        for (int64_t b = 0; b < nb; b++)
            pack_q8_0_block(w + (size_t)p0 * ws, ws, (int)(n_out - p0), b, 0x00, q[b].q, d[b]);
    }
}

/* Blocks [b0, b1) of one panel for activation rows x[0..R), their ggml
 * lanes in acc[r][s]; pf: prefetch the panel ahead (the first pass over a
 * span). */
INLINE void q8_0_gpanel_span(const wp_q8_blk *P, const uint16_t (*D)[16], int64_t b0, int64_t b1,
                            const xpg_q8_blk *const *x, __m512 (*acc)[8], const int R, const int pf) {
    __m512 a[Q8GP_MAX_R][8];
    _Pragma("GCC unroll 3") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) a[r][s] = acc[r][s];
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int64_t b = b0; b < b1; b++) {
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)D[b]));
        __m512 sc[Q8GP_MAX_R];
        _Pragma("GCC unroll 3") for (int r = 0; r < R; r++) sc[r] = _mm512_mul_ps(dw, _mm512_set1_ps(x[r][b].d));
        if (pf) {
            _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++)
                _mm_prefetch((const char *)P[b].q[s] + Q8GP_CHUNK * sizeof(wp_q8_blk), _MM_HINT_T0);
        }
        _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
            const __m512i W = _mm512_loadu_si512(P[b].q[s]);
            const __m512i corr =
                _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, W));
            _Pragma("GCC unroll 3") for (int r = 0; r < R; r++) {
                /* the unsigned operand (the activation) must be the register one */
                const __m512i ia = _mm512_dpbusd_epi32(corr, _mm512_set1_epi32(((const i32u *)x[r][b].u)[s]), W);
                a[r][s] = _mm512_fmadd_ps(sc[r], _mm512_cvtepi32_ps(ia), a[r][s]);
            }
        }
    }
    _Pragma("GCC unroll 3") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) acc[r][s] = a[r][s];
}

/* w: the panel of weight row 0 (ws: bytes per row in the GGUF layout, so a
 * panel spans 16 * ws); nw rows from there, nx <= Q8GP_MAX_NX activation
 * rows; out[r * os + i]. The rows go in passes of 3, then 2 (never a lone
 * row after 3s: 4 = 2 + 2); which pass a row is in changes nothing in its
 * arithmetic. */
static void tile_gp_q8_0(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                        float *out, int64_t os) {
    const int64_t nb = n / 32;
    const xpg_q8_blk *x[Q8GP_MAX_NX];
    for (int r = 0; r < nx; r++) x[r] = (const xpg_q8_blk *)(xp + (size_t)r * xps);
    int pass_row[Q8GP_MAX_NX], pass_n[Q8GP_MAX_NX], n_pass = 0;
    for (int r = 0; r < nx; n_pass++) {
        const int left = nx - r, R = left >= 3 && left != 4 ? 3 : left >= 2 ? 2 : 1;
        pass_row[n_pass] = r, pass_n[n_pass] = R;
        r += R;
    }
    for (int i = 0; i < nw; i += Q8GP_ROWS) {
        const wp_q8_blk *P = (const wp_q8_blk *)(w + (size_t)i * ws);
        const uint16_t(*D)[16] = (const uint16_t(*)[16])(P + nb);
        const int nl = nw - i < Q8GP_ROWS ? nw - i : Q8GP_ROWS;
        __m512 acc[Q8GP_MAX_NX][8];
        memset(acc, 0, sizeof acc);
        for (int64_t b0 = 0; b0 < nb; b0 += Q8GP_CHUNK) {
            const int64_t b1 = nb - b0 < Q8GP_CHUNK ? nb : b0 + Q8GP_CHUNK;
            for (int p = 0; p < n_pass; p++) {
                const xpg_q8_blk *const *xr = x + pass_row[p];
                __m512(*ar)[8] = acc + pass_row[p];
                switch (pass_n[p] * 2 + (p == 0)) { /* constant R and pf: accumulators in registers */
                case 7: q8_0_gpanel_span(P, D, b0, b1, xr, ar, 3, 1); break;
                case 6: q8_0_gpanel_span(P, D, b0, b1, xr, ar, 3, 0); break;
                case 5: q8_0_gpanel_span(P, D, b0, b1, xr, ar, 2, 1); break;
                case 4: q8_0_gpanel_span(P, D, b0, b1, xr, ar, 2, 0); break;
                case 3: q8_0_gpanel_span(P, D, b0, b1, xr, ar, 1, 1); break;
                default: q8_0_gpanel_span(P, D, b0, b1, xr, ar, 1, 0); break;
                }
            }
        }
        const __mmask16 lanes = (__mmask16)((1u << nl) - 1);
        for (int r = 0; r < nx; r++) {
            const __m512 *a = acc[r];
            const __m512 t0 = _mm512_add_ps(a[4], a[0]), t1 = _mm512_add_ps(a[5], a[1]);
            const __m512 t2 = _mm512_add_ps(a[6], a[2]), t3 = _mm512_add_ps(a[7], a[3]);
            _mm512_mask_storeu_ps(out + (int64_t)r * os + i, lanes,
                                  _mm512_add_ps(_mm512_add_ps(t0, t2), _mm512_add_ps(t1, t3)));
        }
    }
}

/* ==== K-quants with Q8_K activations ===================================== */

/* Activation super-block: d as in Q8_K (1/iscale), quants, and the sums of
 * each 16 quants (int16) for the min / bias terms. */
typedef struct {
    int8_t qs[256];
    int16_t bsums[16];
    float d;
    float pad[7];
} x_super;

static size_t x_bytes_super(int64_t n) { return (size_t)(n / 256) * sizeof(x_super); }

/* Q8_K as the reference: the element of largest magnitude (first one on
 * ties) maps to -127, iscale = -127/that value, q = nearest-even(iscale*x)
 * capped at 127, d = 1/iscale. */
static void convert_q8_K(const float *x, void *xq, int64_t n) {
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
static void convert_q8_K_perm(const float *x, void *xq, int64_t n) {
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

/* One unpacked weight super-block: 4 chunks of 64 unsigned quants in
 * element order, the 32-bit scale of each lane of each chunk, the 16-bit
 * "min" of each 16-group (multiplied with the activation's bsums and by
 * dmin; for types whose quants were biased, bias*scale with dmin = d). */
typedef struct {
    __m512i u[4];
    __m512i scl[4];
    __m256i mins;
    float d, dmin;
} w_super;

/* scl[k] from 8 sub-block scales (32-element sub-blocks) as 8 int32 in sc8. */
INLINE void scales_per32(__m512i sc16x32, __m512i scl[4]) {
    /* sc16x32 holds 16 int32; the first 8 are the sub-block scales */
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
        __m512i idx = _mm512_inserti64x4(_mm512_set1_epi32(2 * k), _mm256_set1_epi32(2 * k + 1), 1);
        scl[k] = _mm512_permutexvar_epi32(idx, sc16x32);
    }
}


/* 16 int16 mins [m0 m0 m1 m1 ... m7 m7] from 8 values in the low 8 of v16 (int16). */
INLINE __m256i dup_pairs16(__m256i v16) {
    const __m256i idx = _mm256_set_epi16(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    return _mm256_permutexvar_epi16(idx, v16);
}

/* Q4_K / Q5_K scales: 16 bytes [sc0..7, m0..7] from the packed 12, as 32-bit
 * lanes a0 a1 a2 of the 12 bytes: sc0-3 = a0 & 63, m0-3 = a1 & 63,
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





/* Q2_K / Q3_K low bits: chunk z = 2h + ss holds 2-bit fields 2*(2ss) and
 * 2*(2ss+1) of qs[32h .. 32h+32). */
INLINE __m512i two_bits(const uint8_t *qs32, int ss) {
    __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qs32));
    __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16((short)(4 * ss)), _mm256_set1_epi16((short)(4 * ss + 2)), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(v, sh), _mm512_set1_epi8(0x03));
}



INLINE void unpack_iq4_xs(const uint8_t *row, int64_t sb, w_super *o) {
    const rw_block_iq4_xs *b = (const rw_block_iq4_xs *)row + sb;
    /* scale j = (nibble j of scales_l | bits 2j..2j+1 of scales_h << 4) - 32 in byte j, bytes 8-15 zero:
     * in registers (built in a byte array and reloaded, the store forwarding stalled every super-block) */
    int32_t l4;
    memcpy(&l4, b->scales_l, 4);
    const __m128i sl = _mm_cvtsi32_si128(l4), m4 = _mm_set1_epi8(0x0F);
    const __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(sl, m4), _mm_and_si128(_mm_srli_epi16(sl, 4), m4));
    const __m128i h2 = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16((short)b->scales_h),
                                                    _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
                                     _mm_set1_epi16(3));
    const __m128i hb = _mm_packus_epi16(h2, _mm_setzero_si128());
    const __m128i sc = _mm_move_epi64(_mm_sub_epi8(_mm_or_si128(nib, _mm_slli_epi16(hb, 4)), _mm_set1_epi8(32)));
    scales_per32(_mm512_cvtepi8_epi32(sc), o->scl);
    o->mins = dup_pairs16(_mm256_slli_epi16(_mm256_cvtepi8_epi16(sc), 7)); /* 128 * scale */
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
        o->u[k] = iq4_lookup(nibbles_2x16(b->qs + 32 * k, b->qs + 32 * k + 16, 1));
    o->d = f16_to_f32(b->d);
    o->dmin = o->d;
}


/* ---- K-quants whose lane sums fit in 16 bits (all but IQ4_XS) ----------
 * Per super-block and pair: p_k = vpdpbusd(u_k, x_k) for the 4 chunks; then
 * isum = madd(packs(p0, p1), s[0]) + madd(packs(p2, p3), s[1]), where
 * packs interleaves 4 lanes of each input per 128 bits and s[] holds the
 * matching 16-bit scales (a lane's 4 products share one scale, so madd's
 * pairwise sums stay within one sub-block). |p| <= 4*63*127 < 2^15. */
typedef struct {
    __m512i u[4];
    __m512i s[2];  /* 16-bit scales in packs order */
    __m256i mins;  /* 16-bit min (or bias*scale) per 16-group */
    float d, dmin;
} w_superm;

/* 16-bit scale vectors for 16-element groups in element order (sc16: the
 * 16 group scales as int16): packs(p0,p1) 128-bit lane L holds groups L and
 * 4+L, packs(p2,p3) groups 8+L and 12+L. */
INLINE void svec_per16(__m256i sc16, __m512i s[2]) {
    static const int16_t idx0[32] = {0, 0, 0, 0, 4, 4, 4, 4, 1, 1, 1, 1, 5, 5, 5, 5,
                                     2, 2, 2, 2, 6, 6, 6, 6, 3, 3, 3, 3, 7, 7, 7, 7};
    __m512i i0 = _mm512_loadu_si512(idx0), z = _mm512_castsi256_si512(sc16);
    s[0] = _mm512_permutexvar_epi16(i0, z);
    s[1] = _mm512_permutexvar_epi16(_mm512_add_epi16(i0, _mm512_set1_epi16(8)), z);
}

/* Same for Q4_K / Q5_K's 8 sub-block scales (sc8: int16 in the low 8) with
 * the permuted chunks U0 = (0|2), U1 = (1|3), U2 = (4|6), U3 = (5|7):
 * packs(p0,p1) lanes 0-1 hold sub-blocks 0 and 1, lanes 2-3 hold 2 and 3. */
INLINE void svec_per32_perm(__m256i sc8, __m512i s[2]) {
    static const int16_t idx0[32] = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1,
                                     2, 2, 2, 2, 3, 3, 3, 3, 2, 2, 2, 2, 3, 3, 3, 3};
    __m512i i0 = _mm512_loadu_si512(idx0), z = _mm512_castsi256_si512(sc8);
    s[0] = _mm512_permutexvar_epi16(i0, z);
    s[1] = _mm512_permutexvar_epi16(_mm512_add_epi16(i0, _mm512_set1_epi16(4)), z);
}

/* Q4_K nibbles from two 64-byte loads, in the permuted order. */
INLINE void nibbles_perm(const uint8_t *qs, __m512i u[4]) {
    __m512i v0 = _mm512_loadu_si512(qs), v1 = _mm512_loadu_si512(qs + 64), m = _mm512_set1_epi8(0x0F);
    u[0] = _mm512_and_si512(v0, m);
    u[1] = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m);
    u[2] = _mm512_and_si512(v1, m);
    u[3] = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m);
}

/* Q6_K's 256 unsigned quants (0..63) in element order, 64 a register. */
INLINE void q6_K_quants(const rw_block_q6_K *b, __m512i u[4]) {
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        __m512i ql = _mm512_loadu_si512(b->ql + 64 * h);
        __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)));
        _Pragma("GCC unroll 2") for (int kk = 0; kk < 2; kk++) {
            __m512i lo = _mm512_and_si512(kk ? _mm512_srli_epi16(ql, 4) : ql, _mm512_set1_epi8(0x0F));
            __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16((short)(4 * kk)),
                                            _mm256_set1_epi16((short)(4 * kk + 2)), 1);
            __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(qh, sh), _mm512_set1_epi8(0x03));
            u[2 * h + kk] = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
        }
    }
}

/* Q5_K's fifth bits onto nibbles in the permuted order (nibbles_perm):
 * element 32j + l has bit j of qh[l]; register k holds sub-blocks (a | b). */
INLINE void q5_K_high(const uint8_t qh32[32], __m512i u[4]) {
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh32));
    static const int sub[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
        __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << sub[k][0])),
                                         _mm256_set1_epi8((char)(1 << sub[k][1])), 1);
        u[k] = _mm512_mask_add_epi8(u[k], _mm512_test_epi8_mask(qh, bit), u[k], _mm512_set1_epi8(16));
    }
}

INLINE void unpackm_q4_K(const uint8_t *row, int64_t sb, w_superm *o) {
    const rw_block_q4_K *b = (const rw_block_q4_K *)row + sb;
    __m256i sm = _mm256_cvtepu8_epi16(k4_scales_mins(b->scales)); /* sc0..7, m0..7 */
    svec_per32_perm(sm, o->s);
    o->mins = dup_pairs16(_mm256_permute4x64_epi64(sm, _MM_SHUFFLE(1, 0, 3, 2)));
    nibbles_perm(b->qs, o->u);
    o->d = f16_to_f32(b->d);
    o->dmin = f16_to_f32(b->dmin);
}

INLINE void unpackm_q5_K(const uint8_t *row, int64_t sb, w_superm *o) {
    const rw_block_q5_K *b = (const rw_block_q5_K *)row + sb;
    __m256i sm = _mm256_cvtepu8_epi16(k4_scales_mins(b->scales));
    svec_per32_perm(sm, o->s);
    o->mins = dup_pairs16(_mm256_permute4x64_epi64(sm, _MM_SHUFFLE(1, 0, 3, 2)));
    nibbles_perm(b->qs, o->u);
    q5_K_high(b->qh, o->u);
    o->d = f16_to_f32(b->d);
    o->dmin = f16_to_f32(b->dmin);
}

INLINE void unpackm_q6_K(const uint8_t *row, int64_t sb, w_superm *o) {
    const rw_block_q6_K *b = (const rw_block_q6_K *)row + sb;
    __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    svec_per16(sc, o->s);
    o->mins = _mm256_slli_epi16(sc, 5); /* 32 * scale: the -32 bias */
    q6_K_quants(b, o->u);
    o->d = f16_to_f32(b->d);
    o->dmin = o->d;
}

INLINE void unpackm_q2_K(const uint8_t *row, int64_t sb, w_superm *o) {
    const rw_block_q2_K *b = (const rw_block_q2_K *)row + sb;
    __m128i sv = _mm_loadu_si128((const __m128i *)b->scales);
    svec_per16(_mm256_cvtepu8_epi16(_mm_and_si128(sv, _mm_set1_epi8(0x0F))), o->s);
    o->mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sv, 4), _mm_set1_epi8(0x0F)));
    _Pragma("GCC unroll 4") for (int z = 0; z < 4; z++) o->u[z] = two_bits(b->qs + 32 * (z / 2), z % 2);
    o->d = f16_to_f32(b->d);
    o->dmin = f16_to_f32(b->dmin);
}

INLINE void unpackm_q3_K(const uint8_t *row, int64_t sb, w_superm *o) {
    const rw_block_q3_K *b = (const rw_block_q3_K *)row + sb;
    uint32_t a[4];
    memcpy(a, b->scales, 12);
    uint32_t t = a[2];
    a[2] = ((a[0] >> 4) & 0x0f0f0f0fu) | ((t >> 4) & 0x03030303u) << 4;
    a[3] = ((a[1] >> 4) & 0x0f0f0f0fu) | ((t >> 6) & 0x03030303u) << 4;
    a[0] = (a[0] & 0x0f0f0f0fu) | (t & 0x03030303u) << 4;
    a[1] = (a[1] & 0x0f0f0f0fu) | ((t >> 2) & 0x03030303u) << 4;
    /* from registers: a vector load of a[] just stored would stall on store forwarding */
    const __m128i a16 = _mm_setr_epi32((int)a[0], (int)a[1], (int)a[2], (int)a[3]);
    __m256i sc = _mm256_cvtepi8_epi16(_mm_sub_epi8(a16, _mm_set1_epi8(32)));
    svec_per16(sc, o->s);
    o->mins = _mm256_slli_epi16(sc, 2); /* 4 * scale: the -4 bias */
    __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)b->hmask));
    _Pragma("GCC unroll 4") for (int z = 0; z < 4; z++) {
        int h = z / 2, ss = z % 2;
        __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h + 2 * ss))),
                                         _mm256_set1_epi8((char)(1 << (4 * h + 2 * ss + 1))), 1);
        __m512i q = two_bits(b->qs + 32 * h, ss);
        o->u[z] = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hm, bit), q, _mm512_set1_epi8(4));
    }
    o->d = f16_to_f32(b->d);
    o->dmin = o->d;
}

#define KQUANT_MADD_TILE(name, UNPACK)                                                                 \
    INLINE void name##_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq,  \
                            size_t xs, const int nx, float *out) {                                     \
        __m512 acc[NW][NX];                                                                            \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)                                           \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) acc[i][j] = _mm512_setzero_ps();      \
        for (int64_t sb = 0; sb < n / 256; sb++) {                                                     \
            w_superm wsb[NW];                                                                          \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                     \
                const char *pf = (const char *)(w + i * ws) + (sb + 1) * sizeof(rw_block_##name) + PF_DIST; \
                _mm_prefetch(pf, _MM_HINT_T0);                                                         \
                _mm_prefetch(pf + 64, _MM_HINT_T0);                                                    \
                _mm_prefetch(pf + 128, _MM_HINT_T0);                                                   \
                UNPACK(w + i * ws, sb, &wsb[i]);                                                       \
            }                                                                                          \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                     \
                const x_super *xsb = (const x_super *)(xq + j * xs) + sb;                              \
                __m256i bs = _mm256_load_si256((const __m256i *)xsb->bsums);                           \
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                 \
                    __m512i p[4];                                                                      \
                    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)                                \
                        p[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wsb[i].u[k],                \
                                                   _mm512_load_si512(xsb->qs + 64 * k));               \
                    __m512i isum = _mm512_add_epi32(                                                   \
                        _mm512_madd_epi16(_mm512_packs_epi32(p[0], p[1]), wsb[i].s[0]),                \
                        _mm512_madd_epi16(_mm512_packs_epi32(p[2], p[3]), wsb[i].s[1]));               \
                    __m512i msum = _mm512_zextsi256_si512(_mm256_madd_epi16(wsb[i].mins, bs));         \
                    __m512 dd = _mm512_set1_ps(wsb[i].d * xsb->d);                                     \
                    __m512 dm = _mm512_set1_ps(wsb[i].dmin * xsb->d);                                  \
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dd, acc[i][j]);             \
                    acc[i][j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), dm, acc[i][j]);            \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++)                                           \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) out[j * nw + i] = _mm512_reduce_add_ps(acc[i][j]); \
    }

#define KQUANT_TILE(name, UNPACK)                                                                      \
    INLINE void name##_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq,  \
                            size_t xs, const int nx, float *out) {                                     \
        __m512 acc[NW][NX];                                                                            \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)                                                                   \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) acc[i][j] = _mm512_setzero_ps();                             \
        for (int64_t sb = 0; sb < n / 256; sb++) {                                                     \
            w_super ws_[NW];                                                                           \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) UNPACK(w + i * ws, sb, &ws_[i]);                              \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                                             \
                const x_super *xsb = (const x_super *)(xq + j * xs) + sb;                              \
                __m512i xv[4];                                                                         \
                _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) xv[k] = _mm512_load_si512(xsb->qs + 64 * k);              \
                __m256i bs = _mm256_load_si256((const __m256i *)xsb->bsums);                           \
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                                         \
                    __m512i isum = _mm512_setzero_si512();                                             \
                    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {                                                      \
                        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ws_[i].u[k], xv[k]);   \
                        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, ws_[i].scl[k]));           \
                    }                                                                                  \
                    __m512i msum = _mm512_castsi256_si512(_mm256_madd_epi16(ws_[i].mins, bs));         \
                    msum = _mm512_inserti64x4(msum, _mm256_setzero_si256(), 1);                        \
                    __m512 dd = _mm512_set1_ps(ws_[i].d * xsb->d);                                     \
                    __m512 dm = _mm512_set1_ps(ws_[i].dmin * xsb->d);                                  \
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dd, acc[i][j]);             \
                    acc[i][j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), dm, acc[i][j]);            \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++)                                                                   \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) out[j * nw + i] = _mm512_reduce_add_ps(acc[i][j]);           \
    }

KQUANT_MADD_TILE(q2_K, unpackm_q2_K)
KQUANT_MADD_TILE(q3_K, unpackm_q3_K)
KQUANT_MADD_TILE(q4_K, unpackm_q4_K)
KQUANT_MADD_TILE(q5_K, unpackm_q5_K)
KQUANT_MADD_TILE(q6_K, unpackm_q6_K)
KQUANT_TILE(iq4_xs, unpack_iq4_xs)

/* ---- K-quants in ggml's order (RW_NUMERICS_GGML; matmul_ref.c) ---------
 * Per super-block and pair: p_k = vpdpbusd(u_k, x_k) (16 lanes of 4
 * products), isum = sum_k vpdpwssd(p_k, scl_k) with the lane's scale in the
 * low 16 bits of scl_k (|p| < 2^15, so p's low half is p), then the two
 * 256-bit halves added: lane l (< 8) holds elements 32c + 4l .. 32c + 4l + 3
 * of every chunk c, as ggml's AVX2 lanes. Lanes 8-11 carry the min term
 * (Q4_K: four sub-block pairs; Q5_K: lane 8, all of it) so one fma per
 * super-block does both: acc = fma(wd * xd, (float)lane, acc) with
 * wd = [d x8 | dmin x4 | 0 x4] and xd = [dx x8 | -dx x4 | 0]. The output is
 * ggml's hsum of lanes 0-7 plus (8 + 10) + (9 + 11). */
typedef struct {
    __m512i u[4];
    __m512i scl[4]; /* int32: scale in the low 16 bits */
    __m256i mins;   /* Q4_K / Q5_K: [m0 m0 m1 m1 .. m7 m7]; Q6_K: the 16 scales */
    __m512 wd;
} w_kg;

/* Q4_K / Q5_K: scales and mins of sub-blocks a, b for chunk pair k of the
 * permuted order ((0|2), (1|3), (4|6), (5|7)). */
/* min_lanes: the lanes that take dmin (Q4_K 0x0F00, Q5_K 0x0100). */
INLINE void kg_scales_q45(const uint8_t scales[12], float d, float dmin, __mmask16 min_lanes, w_kg *o) {
    const __m256i sm = _mm256_cvtepu8_epi16(k4_scales_mins(scales)); /* sc0..7, m0..7 */
    const __m512i sc32 = _mm512_cvtepu16_epi32(sm);
    static const int sub[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
        o->scl[k] = _mm512_permutexvar_epi32(
            _mm512_inserti64x4(_mm512_set1_epi32(sub[k][0]), _mm256_set1_epi32(sub[k][1]), 1), sc32);
    o->mins = dup_pairs16(_mm256_permute4x64_epi64(sm, _MM_SHUFFLE(1, 0, 3, 2)));
    o->wd = _mm512_mask_blend_ps(min_lanes, _mm512_maskz_mov_ps(0x00FF, _mm512_set1_ps(d)), _mm512_set1_ps(dmin));
}

INLINE void unpackg_q4_K(const uint8_t *row, int64_t sb, w_kg *o) {
    const rw_block_q4_K *b = (const rw_block_q4_K *)row + sb;
    kg_scales_q45(b->scales, f16_to_f32(b->d), f16_to_f32(b->dmin), 0x0F00, o);
    nibbles_perm(b->qs, o->u);
}

INLINE void unpackg_q5_K(const uint8_t *row, int64_t sb, w_kg *o) {
    const rw_block_q5_K *b = (const rw_block_q5_K *)row + sb;
    kg_scales_q45(b->scales, f16_to_f32(b->d), f16_to_f32(b->dmin), 0x0100, o);
    nibbles_perm(b->qs, o->u);
    q5_K_high(b->qh, o->u);
}

/* Q6_K: chunk pair k holds elements 64k .. 64k+63 in order; lane m of it
 * has 16-group scale 4k + m/4. */
INLINE void unpackg_q6_K(const uint8_t *row, int64_t sb, w_kg *o) {
    const rw_block_q6_K *b = (const rw_block_q6_K *)row + sb;
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    const __m512i sc32 = _mm512_and_si512(_mm512_cvtepi16_epi32(sc), _mm512_set1_epi32(0xFFFF));
    const __m512i q4 = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
        o->scl[k] = _mm512_permutexvar_epi32(_mm512_add_epi32(q4, _mm512_set1_epi32(4 * k)), sc32);
    o->mins = sc;
    q6_K_quants(b, o->u);
    o->wd = _mm512_maskz_mov_ps(0x00FF, _mm512_set1_ps(f16_to_f32(b->d)));
}

/* The integer lanes of one (weight row, activation row) super-block:
 * MINS 1 (Q4_K) four min lanes, 2 (Q5_K) one, 0 (Q6_K) the -32 offset of
 * each chunk (32 * scale . bsums) off lanes 0-7 instead. */
INLINE __m512i kg_lanes(const w_kg *w, const __m512i xv[4], __m256i bs, const int MINS) {
    __m512i acc = _mm512_setzero_si512();
    if (MINS == 0) /* lane c -= 32 * (bs_2c * sc_2c + bs_2c+1 * sc_2c+1) */
        acc = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(),
                                                      _mm256_slli_epi32(_mm256_madd_epi16(bs, w->mins), 5)));
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
        acc = _mm512_dpwssd_epi32(acc, _mm512_dpbusd_epi32(_mm512_setzero_si512(), w->u[k], xv[k]), w->scl[k]);
    if (MINS == 0) { /* the halves of the same lanes; the offset sat in the low half */
        return _mm512_maskz_add_epi32(0x00FF, acc, _mm512_shuffle_i64x2(acc, acc, _MM_SHUFFLE(1, 0, 3, 2)));
    }
    const __m256i m8 = _mm256_madd_epi16(w->mins, bs); /* lane j: m_j * (bs_2j + bs_2j+1) */
    __m128i m4 = _mm_hadd_epi32(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
    if (MINS == 2) m4 = _mm_hadd_epi32(_mm_hadd_epi32(m4, m4), _mm_setzero_si128()); /* all in lane 0 */
    return _mm512_mask_add_epi32(_mm512_broadcast_i32x4(m4), 0x00FF, acc,
                                 _mm512_shuffle_i64x2(acc, acc, _MM_SHUFFLE(1, 0, 3, 2)));
}

INLINE float kg_reduce(__m512 a, const int MINS) {
    float l[16];
    _mm512_storeu_ps(l, a);
    const float t0 = l[4] + l[0], t1 = l[5] + l[1], t2 = l[6] + l[2], t3 = l[7] + l[3];
    const float h = (t0 + t2) + (t1 + t3);
    return MINS == 1 ? h + ((l[8] + l[10]) + (l[9] + l[11])) : MINS == 2 ? h + l[8] : h;
}

/* Tile shape: 2 weight rows (fewer unpacked rows than 4 to keep in
 * registers, measured faster) by up to 8 activation rows (a verify pass of
 * K = 4, 5 rows, unpacks each weight super-block once). */
#define KG_NW 2
#define KG_NX 8

#define KQUANT_GGML_TILE(name, UNPACK, MINS)                                                          \
    INLINE void name##_ggml_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, \
                                 size_t xs, const int nx, float *out) {                                \
        __m512 acc[KG_NW][KG_NX];                                                                      \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)                                           \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) acc[i][j] = _mm512_setzero_ps();      \
        for (int64_t sb = 0; sb < n / 256; sb++) {                                                     \
            w_kg wsb[KG_NW];                                                                           \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                     \
                const char *pf = (const char *)(w + i * ws) + (sb + 1) * sizeof(rw_block_##name) + PF_DIST; \
                _mm_prefetch(pf, _MM_HINT_T0);                                                         \
                _mm_prefetch(pf + 64, _MM_HINT_T0);                                                    \
                _mm_prefetch(pf + 128, _MM_HINT_T0);                                                   \
                UNPACK(w + i * ws, sb, &wsb[i]);                                                       \
            }                                                                                          \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                     \
                const x_super *xsb = (const x_super *)(xq + j * xs) + sb;                              \
                __m512i xv[4];                                                                         \
                _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) xv[k] = _mm512_load_si512(xsb->qs + 64 * k); \
                const __m256i bs = _mm256_load_si256((const __m256i *)xsb->bsums);                     \
                const __m512 xd = _mm512_mask_blend_ps(0x0F00, _mm512_set1_ps(xsb->d), _mm512_set1_ps(-xsb->d)); \
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                 \
                    const __m512i v = kg_lanes(&wsb[i], xv, bs, MINS);                                 \
                    acc[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(wsb[i].wd, xd), _mm512_cvtepi32_ps(v), acc[i][j]); \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++)                                           \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) out[j * nw + i] = kg_reduce(acc[i][j], MINS); \
    }

KQUANT_GGML_TILE(q4_K, unpackg_q4_K, 1)
KQUANT_GGML_TILE(q5_K, unpackg_q5_K, 2)
KQUANT_GGML_TILE(q6_K, unpackg_q6_K, 0)

/* ---- K-quants, two rows and more, repacked weights: the panel form ------
 *
 * The K-quant tiles above keep 16 float lanes per output: lane l sums, per
 * super-block, fma((float)isum_l, d*dx) then, for l < 8, fnmadd((float)msum_l,
 * dmin*dx); the output is _mm512_reduce_add_ps of the 16 lanes (lane i + i+8,
 * then + i+4, + i+2, + i+1). isum_l is exact: with L = l/4, c = (l%4)/2,
 * r = l%2, it is sc_A * (the 8 products from element eA(l)) + sc_B * (the 8
 * from eB = eA + 128), and msum_l = mins pair (l) . bsums pair (l) (vpmaddwd).
 * The panel form computes the same thing with the lanes turned around: one
 * register holds lane l of 16 outputs (one panel of 16 weight rows), the 16
 * lanes are 16 registers, and the final reduction adds those registers in the
 * same pairs. Per output every float operation and its order are the tile's,
 * so results are bitwise equal to it for any number of rows.
 *
 * A panel (rw_matmul_pack) of 16 weight rows and nsb super-blocks holds
 *   quants  [16 lanes][nsb][4 dwords: eA, eA+4, eB, eB+4][16 rows][4 bytes],
 *           unsigned, one byte per weight: a lane's pass over the row reads
 *           one contiguous stream;
 *   then per super-block (kp_meta_bytes):
 *     scales  [n_sc][16 rows] int32 (sub-block or 16-group scales);
 *     mins    [8 lanes][16 rows] int16 pairs, the tile's mins vector;
 *     d, dmin [16 rows] f32 each.
 * The panels take about 2.3x the rows' GGUF bytes.
 *
 * Per 256 products this is ~13 instructions against the tile's ~17 plus
 * unpacking. Measured on Zen 5, 2 threads, 1024x3584 matrices: cache-resident,
 * 1.2-1.3x (Q4_K) and 1.4x (Q6_K) faster than the tile at 512 rows, 1.3-1.7x
 * from 4 to 96 rows; streamed from memory (80 matrices), 1.2-1.3x (Q4_K) and
 * 1.35x (Q6_K) from 16 to 128 rows, while with 2 and 4 rows the panels' extra
 * bytes make it up to 2x slower (Q4_K breaks even at 8 rows), hence
 * KP_MIN_ROWS. */
enum { KP_ROWS = 16, KP_MAX_NX = 16, KP_MIN_ROWS = 8 };

/* One unpacked weight super-block in element order. */
typedef struct {
    uint8_t u[256];
    int32_t sc[16];
    int16_t mins[8][2];
    float d, dmin;
} kp_block;

typedef struct {
    int n_sc;                   /* scales per super-block */
    int sc_div;                 /* elements per scale */
    int e_a[16];                /* first element of each lane's A run */
    void (*unpack)(const uint8_t *blk, kp_block *o);
} kp_type;

static size_t kp_meta_bytes(const kp_type *t) { return (size_t)t->n_sc * 64 + 8 * 64 + 2 * 64; }
static size_t kp_sb_bytes(const kp_type *t) { return 4096 + kp_meta_bytes(t); }

/* Q4_K chunk c (c < 2) byte b (< 64) holds element 32c + b, or 32c + b + 32
 * past the first 32 (the permuted activation order of the tile). */
#define Q4K_EA(l) (32 * (((l) % 4) / 2) + (16 * ((l) / 4) + 8 * ((l) % 2) < 32 ? 0 : 32) + 16 * ((l) / 4) + 8 * ((l) % 2))
/* Q6_K chunk c byte b holds element 64c + b. */
#define Q6K_EA(l) (64 * (((l) % 4) / 2) + 16 * ((l) / 4) + 8 * ((l) % 2))

/* Q4_K / Q5_K: 8 sub-block scales and mins, 6 bits each in 12 bytes. */
static void kp_scales_k4(const uint8_t s[12], rw_f16 d, rw_f16 dmin, kp_block *o) {
    for (int j = 0; j < 8; j++) {
        int sc, m;
        if (j < 4) sc = s[j] & 63, m = s[j + 4] & 63;
        else sc = (s[j + 4] & 0x0F) | (s[j - 4] >> 6) << 4, m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
        o->sc[j] = sc;
        o->mins[j][0] = o->mins[j][1] = (int16_t)m;
    }
    o->d = f16_to_f32(d);
    o->dmin = f16_to_f32(dmin);
}

/* Element 32j + l of a Q4_K / Q5_K block: low (j even) or high nibble of qs[32(j/2) + l]. */
static int k4_nibble(const uint8_t *qs, int e) { return (qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0x0F; }

static void kp_unpack_q4_K(const uint8_t *blk, kp_block *o) {
    const rw_block_q4_K *b = (const rw_block_q4_K *)blk;
    kp_scales_k4(b->scales, b->d, b->dmin, o);
    for (int e = 0; e < 256; e++) o->u[e] = (uint8_t)k4_nibble(b->qs, e);
}

static void kp_unpack_q5_K(const uint8_t *blk, kp_block *o) {
    const rw_block_q5_K *b = (const rw_block_q5_K *)blk;
    kp_scales_k4(b->scales, b->d, b->dmin, o);
    for (int e = 0; e < 256; e++) /* bit j of qh[l] is element 32j + l's fifth bit */
        o->u[e] = (uint8_t)(k4_nibble(b->qs, e) | ((b->qh[e % 32] >> (e / 32)) & 1) << 4);
}

static void kp_unpack_q6_K(const uint8_t *blk, kp_block *o) {
    const rw_block_q6_K *b = (const rw_block_q6_K *)blk;
    for (int e = 0; e < 256; e++) { /* as the reference, without the -32 (the mins carry it) */
        int h = e / 128, k = (e % 128) / 32, l = e % 32;
        int lo = k < 2 ? b->ql[64 * h + 32 * k + l] & 0x0F : b->ql[64 * h + 32 * (k - 2) + l] >> 4;
        o->u[e] = (uint8_t)(lo | ((b->qh[32 * h + l] >> (2 * k)) & 3) << 4);
    }
    for (int g = 0; g < 16; g++) o->sc[g] = b->scales[g];
    for (int t = 0; t < 8; t++) {
        o->mins[t][0] = (int16_t)(32 * b->scales[2 * t]);
        o->mins[t][1] = (int16_t)(32 * b->scales[2 * t + 1]);
    }
    o->d = f16_to_f32(b->d);
    o->dmin = o->d;
}

#define KP_LANES(EA) {EA(0), EA(1), EA(2), EA(3), EA(4), EA(5), EA(6), EA(7), EA(8), EA(9), EA(10), EA(11), EA(12), EA(13), EA(14), EA(15)}
static const kp_type kp_q4_K = {8, 32, KP_LANES(Q4K_EA), kp_unpack_q4_K};
static const kp_type kp_q5_K = {8, 32, KP_LANES(Q4K_EA), kp_unpack_q5_K}; /* Q4_K's lanes */
static const kp_type kp_q6_K = {16, 16, KP_LANES(Q6K_EA), kp_unpack_q6_K};

static void kp_pack(const kp_type *t, size_t blk_bytes, const uint8_t *w, size_t ws, int64_t n, int64_t n_out,
                    uint8_t *dst) {
    const int64_t nsb = n / 256;
    const size_t mb = kp_meta_bytes(t);
    for (int64_t p0 = 0; p0 < n_out; p0 += KP_ROWS) {
        uint8_t *panel = dst + (size_t)(p0 / KP_ROWS * nsb) * kp_sb_bytes(t);
        memset(panel, 0, (size_t)nsb * kp_sb_bytes(t)); /* rows past n_out: weights, scales and d 0 */
        for (int64_t sb = 0; sb < nsb; sb++) {
            uint8_t *M = panel + (size_t)nsb * 4096 + (size_t)sb * mb;
            int32_t(*sc)[KP_ROWS] = (int32_t(*)[KP_ROWS])M;
            int16_t(*mins)[KP_ROWS][2] = (int16_t(*)[KP_ROWS][2])(M + t->n_sc * 64);
            float *d = (float *)(M + t->n_sc * 64 + 512), *dmin = d + KP_ROWS;
            for (int o = 0; o < KP_ROWS && p0 + o < n_out; o++) {
                kp_block b;
                t->unpack(w + (size_t)(p0 + o) * ws + (size_t)sb * blk_bytes, &b);
                for (int l = 0; l < 16; l++)
                    for (int s = 0; s < 4; s++) {
                        const int e = t->e_a[l] + (s / 2) * 128 + (s % 2) * 4;
                        memcpy(panel + (size_t)(l * nsb + sb) * 256 + (size_t)(s * KP_ROWS + o) * 4, b.u + e, 4);
                    }
                for (int i = 0; i < t->n_sc; i++) sc[i][o] = b.sc[i];
                for (int l = 0; l < 8; l++) mins[l][o][0] = b.mins[l][0], mins[l][o][1] = b.mins[l][1];
                d[o] = b.d, dmin[o] = b.dmin;
            }
        }
    }
}

/* A K-quant panel family's per-type entry points: the panel bytes per
 * weight row (FAM_wbytes_TYPE) and the packer (pack_TYPE_SUFFIX). */
#define KPANEL_FNS(FAM, SUFFIX, name)                                                                   \
    static size_t FAM##_wbytes_##name(int64_t n) {                                                      \
        return (size_t)(n / 256) * FAM##_sb_bytes(&FAM##_##name) / KP_ROWS;                             \
    }                                                                                                   \
    static void pack_##name##_##SUFFIX(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) { \
        FAM##_pack(&FAM##_##name, sizeof(rw_block_##name), w, ws, n, n_out, dst);                       \
    }
KPANEL_FNS(kp, p, q4_K)
KPANEL_FNS(kp, p, q5_K)
KPANEL_FNS(kp, p, q6_K)

/* The activation: one Q8_K row in element order (x_super). */
static void convert_q8_K_p(const float *const *rows, int n_rows, void *xp, int64_t n) {
    if (n_rows < 1) memset(xp, 0, x_bytes_super(n));
    else convert_q8_K(rows[0], xp, n);
}

/* Lane l of 16 outputs against R activation rows over all super-blocks:
 * acc[r] as the tile's lane l. */
INLINE void kp_lane(const kp_type *t, int64_t nsb, const uint8_t *P, int l, const uint8_t *xp, size_t xps,
                    __m512 *acc, const int R, const bool with_min) {
    const size_t mb = kp_meta_bytes(t);
    const int ea = t->e_a[l], ia = ea / t->sc_div, ib = (ea + 128) / t->sc_div;
    const __m512i *q = (const __m512i *)(P + (size_t)l * nsb * 256);
    const uint8_t *M = P + (size_t)nsb * 4096;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    /* the next panel, read meanwhile: a lane's quants and 2 lines of the
     * scales a step (from memory the panels stream 3x slower without) */
    const size_t next = (size_t)nsb * kp_sb_bytes(t);
    const char *pf_meta = (const char *)(P + next + (size_t)nsb * 4096), *pf_end = pf_meta + (size_t)nsb * mb;
    pf_meta += (size_t)l * nsb * 128;
    for (int64_t sb = 0; sb < nsb; sb++, q += 4, M += mb, pf_meta += 128) {
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) _mm_prefetch((const char *)(q + c) + next, _MM_HINT_T0);
        if (pf_meta < pf_end) _mm_prefetch(pf_meta, _MM_HINT_T0), _mm_prefetch(pf_meta + 64, _MM_HINT_T0);
        const __m512i w0 = _mm512_load_si512(q), w1 = _mm512_load_si512(q + 1), w2 = _mm512_load_si512(q + 2),
                      w3 = _mm512_load_si512(q + 3);
        const __m512i *sc = (const __m512i *)M;
        const __m512i sa = _mm512_load_si512(sc + ia), sb_ = _mm512_load_si512(sc + ib);
        const __m512i mv = _mm512_load_si512((const __m512i *)(M + t->n_sc * 64) + (with_min ? l : 0));
        const __m512 dw = _mm512_load_ps(M + t->n_sc * 64 + 512), dm = _mm512_load_ps(M + t->n_sc * 64 + 576);
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) {
            const x_super *xs = (const x_super *)(xp + (size_t)r * xps) + sb;
            const i32u *xa = (const i32u *)(xs->qs + ea), *xb = (const i32u *)(xs->qs + ea + 128);
            __m512i da = _mm512_setzero_si512(), db = _mm512_setzero_si512();
            DPBUSD_BCST(da, w0, xa);
            DPBUSD_BCST(da, w1, xa + 1);
            DPBUSD_BCST(db, w2, xb);
            DPBUSD_BCST(db, w3, xb + 1);
            const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(da, sa), _mm512_mullo_epi32(db, sb_));
            const __m512 dx = _mm512_set1_ps(xs->d);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, dx), acc[r]);
            if (with_min) {
                const __m512i ms = _mm512_madd_epi16(mv, _mm512_set1_epi32(*(const i32u *)(xs->bsums + 2 * l)));
                acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dm, dx), acc[r]);
            }
        }
    }
}

INLINE void kp_panel_dot(const kp_type *t, int64_t n, const uint8_t *P, const uint8_t *xp, size_t xps, int nl,
                         float *out, int64_t os, const int R) {
    const int64_t nsb = n / 256;
    __m512 lane[16][KP_MAX_NX];
    for (int l = 0; l < 8; l++) kp_lane(t, nsb, P, l, xp, xps, lane[l], R, true);
    for (int l = 8; l < 16; l++) kp_lane(t, nsb, P, l, xp, xps, lane[l], R, false);
    const __mmask16 keep = (__mmask16)((1u << nl) - 1);
    _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) { /* _mm512_reduce_add_ps's pairs */
        __m512 s1[8], s2[4];
        for (int i = 0; i < 8; i++) s1[i] = _mm512_add_ps(lane[i][r], lane[i + 8][r]);
        for (int i = 0; i < 4; i++) s2[i] = _mm512_add_ps(s1[i], s1[i + 4]);
        const __m512 s3a = _mm512_add_ps(s2[0], s2[2]), s3b = _mm512_add_ps(s2[1], s2[3]);
        _mm512_mask_storeu_ps(out + r * os, keep, _mm512_add_ps(s3a, s3b));
    }
}

#define KP_TILE(name, T)                                                                                           \
    static void tile_p_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps,       \
                              int nx, float *out, int64_t os) {                                                     \
        for (int i = 0; i < nw; i += KP_ROWS) {                                                                     \
            const uint8_t *P = w + (size_t)i * ws;                                                                  \
            const int nl = nw - i < KP_ROWS ? nw - i : KP_ROWS;                                                     \
            switch (nx) {                                                                                           \
            case 1: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 1); break;                                    \
            case 2: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 2); break;                                    \
            case 3: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 3); break;                                    \
            case 4: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 4); break;                                    \
            case 5: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 5); break;                                    \
            case 6: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 6); break;                                    \
            case 7: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 7); break;                                    \
            case 8: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 8); break;                                    \
            case 9: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 9); break;                                    \
            case 10: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 10); break;                                  \
            case 11: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 11); break;                                  \
            case 12: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 12); break;                                  \
            case 13: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 13); break;                                  \
            case 14: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 14); break;                                  \
            case 15: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 15); break;                                  \
            case 16: kp_panel_dot(&T, n, P, xp, xps, nl, out + i, os, 16); break;                                  \
            default: break;                                                                                         \
            }                                                                                                       \
        }                                                                                                           \
    }
KP_TILE(q4_K, kp_q4_K)
KP_TILE(q5_K, kp_q5_K)
KP_TILE(q6_K, kp_q6_K)

/* ---- K-quants in ggml's order, the panel form ---------------------------
 *
 * The ggml-order K-quant tile (above) with its lanes turned around, as the
 * panel form above does for ours: one register holds ggml lane l (< 8) of
 * 16 outputs. Per super-block, lane l is the integer
 *   sum over chunks c of scale(c, l) * dot4(q[32c+4l ..], x[32c+4l ..])
 * (vpdpbusd of 16 rows' 4 quants against the broadcast 4 activations, then
 * vpdpwssd with the 16 rows' scales), started, for Q6_K, at
 * -32 * (sc_2l * bs_2l + sc_2l+1 * bs_2l+1) (vpmaddwd), then
 * acc_l = fma(d * dx, (float)lane, acc_l). Q4_K's four min lanes k hold
 * m_2k * (bs_4k + bs_4k+1) + m_2k+1 * (bs_4k+2 + bs_4k+3) and Q5_K's one
 * min lane all eight such terms, with fma(dmin * -dx, ...). Integer sums are
 * exact in any order and every float operation is the tile's, so the result
 * is bitwise the tile's (and the reference's).
 *
 * A panel of 16 weight rows and nsb super-blocks holds
 *   quants [8 lanes][nsb][8 chunks][16 rows][4 bytes], unsigned;
 *   then per super-block (kgp_meta_bytes):
 *     scales [n_sc][8 chunks][16 rows] int32 (n_sc 2 for Q6_K: lanes 0-3
 *            and 4-7 of a chunk lie in different 16-groups);
 *     pairs  [8][16 rows] int16 pairs: Q4_K / Q5_K (m_j, m_j); Q6_K
 *            (-32 sc_2j, -32 sc_2j+1);
 *     d, dmin [16 rows] f32 each. */
enum { KGP_MINS_Q4K = 1, KGP_MINS_Q5K = 2, KGP_OFFSET_Q6K = 0 };

typedef struct {
    int n_sc;
    void (*unpack)(const uint8_t *blk, kp_block *o); /* the panel form's unpackers, element order */
} kgp_type;

static size_t kgp_meta_bytes(const kgp_type *t) { return (size_t)t->n_sc * 8 * 64 + 8 * 64 + 2 * 64; }
static size_t kgp_sb_bytes(const kgp_type *t) { return 4096 + kgp_meta_bytes(t); }

static const kgp_type kgp_q4_K = {1, kp_unpack_q4_K};
static const kgp_type kgp_q5_K = {1, kp_unpack_q5_K};
static const kgp_type kgp_q6_K = {2, kp_unpack_q6_K};

static void kgp_pack(const kgp_type *t, size_t blk_bytes, const uint8_t *w, size_t ws, int64_t n, int64_t n_out,
                     uint8_t *dst) {
    const int64_t nsb = n / 256;
    const size_t mb = kgp_meta_bytes(t);
    for (int64_t p0 = 0; p0 < n_out; p0 += KP_ROWS) {
        uint8_t *panel = dst + (size_t)(p0 / KP_ROWS * nsb) * kgp_sb_bytes(t);
        memset(panel, 0, (size_t)nsb * kgp_sb_bytes(t)); /* rows past n_out: weights, scales and d 0 */
        for (int64_t sb = 0; sb < nsb; sb++) {
            uint8_t *M = panel + (size_t)nsb * 4096 + (size_t)sb * mb;
            int32_t(*sc)[8][KP_ROWS] = (int32_t(*)[8][KP_ROWS])M;
            int16_t(*pairs)[KP_ROWS][2] = (int16_t(*)[KP_ROWS][2])(M + t->n_sc * 512);
            float *d = (float *)(M + t->n_sc * 512 + 512), *dmin = d + KP_ROWS;
            for (int o = 0; o < KP_ROWS && p0 + o < n_out; o++) {
                kp_block b;
                t->unpack(w + (size_t)(p0 + o) * ws + (size_t)sb * blk_bytes, &b);
                for (int l = 0; l < 8; l++)
                    for (int c = 0; c < 8; c++)
                        memcpy(panel + (size_t)(l * nsb + sb) * 512 + (size_t)(c * KP_ROWS + o) * 4,
                               b.u + 32 * c + 4 * l, 4);
                for (int c = 0; c < 8; c++) { /* the scale in the low 16 bits, the high ones 0 (vpdpwssd) */
                    if (t->n_sc == 1) sc[0][c][o] = b.sc[c] & 0xFFFF;
                    else sc[0][c][o] = b.sc[2 * c] & 0xFFFF, sc[1][c][o] = b.sc[2 * c + 1] & 0xFFFF;
                }
                for (int j = 0; j < 8; j++)
                    if (t->n_sc == 1) pairs[j][o][0] = pairs[j][o][1] = b.mins[j][0];
                    else pairs[j][o][0] = (int16_t)-b.mins[j][0], pairs[j][o][1] = (int16_t)-b.mins[j][1];
                d[o] = b.d, dmin[o] = b.dmin;
            }
        }
    }
}

KPANEL_FNS(kgp, gp, q4_K)
KPANEL_FNS(kgp, gp, q5_K)
KPANEL_FNS(kgp, gp, q6_K)

/* Lane l (< 8) of 16 outputs against R activation rows over all
 * super-blocks; MINS as kg_lanes. */
INLINE void kgp_lane(const kgp_type *t, int64_t nsb, const uint8_t *P, int l, const uint8_t *xp, size_t xps,
                     __m512 *acc, const int R, const int MINS) {
    const size_t mb = kgp_meta_bytes(t);
    const __m512i *q = (const __m512i *)(P + (size_t)l * nsb * 512);
    const uint8_t *M = P + (size_t)nsb * 4096;
    const int half = t->n_sc == 2 && l >= 4;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    const size_t next = (size_t)nsb * kgp_sb_bytes(t);
    for (int64_t sb = 0; sb < nsb; sb++, q += 8, M += mb) {
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) _mm_prefetch((const char *)(q + c) + next, _MM_HINT_T0);
        __m512i W[8];
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) W[c] = _mm512_load_si512(q + c);
        const __m512i *sc = (const __m512i *)M + 8 * half;
        __m512i S[8];
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) S[c] = _mm512_load_si512(sc + c);
        const __m512i off = _mm512_load_si512((const __m512i *)(M + t->n_sc * 512) + l);
        const __m512 dw = _mm512_load_ps(M + t->n_sc * 512 + 512);
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) {
            const x_super *xs = (const x_super *)(xp + (size_t)r * xps) + sb;
            __m512i isum = MINS == KGP_OFFSET_Q6K
                               ? _mm512_madd_epi16(off, _mm512_set1_epi32(*(const i32u *)(xs->bsums + 2 * l)))
                               : _mm512_setzero_si512();
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
                __m512i p = _mm512_setzero_si512();
                DPBUSD_BCST(p, W[c], (const i32u *)(xs->qs + 32 * c + 4 * l));
                isum = _mm512_dpwssd_epi32(isum, p, S[c]);
            }
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(xs->d)), _mm512_cvtepi32_ps(isum), acc[r]);
        }
    }
}

/* The min lanes (Q4_K: four, Q5_K: one) of 16 outputs against R rows. */
INLINE void kgp_min_lanes(const kgp_type *t, int64_t nsb, const uint8_t *P, const uint8_t *xp, size_t xps,
                          __m512 acc[4][KP_MAX_NX], const int R, const int MINS) {
    const size_t mb = kgp_meta_bytes(t);
    const uint8_t *M = P + (size_t)nsb * 4096;
    const int nk = MINS == KGP_MINS_Q4K ? 4 : 1;
    for (int k = 0; k < nk; k++) _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) acc[k][r] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++, M += mb) {
        const __m512i *pairs = (const __m512i *)(M + t->n_sc * 512);
        const __m512 dm = _mm512_load_ps(M + t->n_sc * 512 + 576);
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) {
            const x_super *xs = (const x_super *)(xp + (size_t)r * xps) + sb;
            const __m512 f = _mm512_mul_ps(dm, _mm512_set1_ps(-xs->d));
            __m512i m = _mm512_setzero_si512();
            for (int j = 0; j < 8; j++) {
                m = _mm512_dpwssd_epi32(m, _mm512_load_si512(pairs + j),
                                        _mm512_set1_epi32(*(const i32u *)(xs->bsums + 2 * j)));
                if (MINS == KGP_MINS_Q4K && j % 2 == 1) {
                    acc[j / 2][r] = _mm512_fmadd_ps(f, _mm512_cvtepi32_ps(m), acc[j / 2][r]);
                    m = _mm512_setzero_si512();
                }
            }
            if (MINS == KGP_MINS_Q5K) acc[0][r] = _mm512_fmadd_ps(f, _mm512_cvtepi32_ps(m), acc[0][r]);
        }
    }
}

INLINE void kgp_panel_dot(const kgp_type *t, int64_t n, const uint8_t *P, const uint8_t *xp, size_t xps, int nl,
                          float *out, int64_t os, const int R, const int MINS) {
    const int64_t nsb = n / 256;
    __m512 lane[8][KP_MAX_NX], mn[4][KP_MAX_NX];
    /* at most 8 rows a pass: their accumulators, a lane's 8 weight and 8
     * scale registers fill the register file */
    for (int l = 0; l < 8; l++) {
        kgp_lane(t, nsb, P, l, xp, xps, lane[l], R < 8 ? R : 8, MINS);
        if (R > 8) kgp_lane(t, nsb, P, l, xp + 8 * xps, xps, lane[l] + 8, R - 8, MINS);
    }
    if (MINS != KGP_OFFSET_Q6K) kgp_min_lanes(t, nsb, P, xp, xps, mn, R, MINS);
    const __mmask16 keep = (__mmask16)((1u << nl) - 1);
    _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) { /* ggml's hsum, then the min term */
        const __m512 t0 = _mm512_add_ps(lane[4][r], lane[0][r]), t1 = _mm512_add_ps(lane[5][r], lane[1][r]);
        const __m512 t2 = _mm512_add_ps(lane[6][r], lane[2][r]), t3 = _mm512_add_ps(lane[7][r], lane[3][r]);
        __m512 y = _mm512_add_ps(_mm512_add_ps(t0, t2), _mm512_add_ps(t1, t3));
        if (MINS == KGP_MINS_Q4K)
            y = _mm512_add_ps(y, _mm512_add_ps(_mm512_add_ps(mn[0][r], mn[2][r]), _mm512_add_ps(mn[1][r], mn[3][r])));
        else if (MINS == KGP_MINS_Q5K) y = _mm512_add_ps(y, mn[0][r]);
        _mm512_mask_storeu_ps(out + r * os, keep, y);
    }
}

#define KGP_CASE(R) \
    case R: kgp_panel_dot(tp, n, P, xp, xps, nl, out + i, os, R, mins); break;
#define KGP_TILE(name, T, MINS)                                                                                    \
    static void tile_gp_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps,      \
                               int nx, float *out, int64_t os) {                                                    \
        const kgp_type *tp = &T;                                                                                    \
        const int mins = MINS;                                                                                      \
        for (int i = 0; i < nw; i += KP_ROWS) {                                                                     \
            const uint8_t *P = w + (size_t)i * ws;                                                                  \
            const int nl = nw - i < KP_ROWS ? nw - i : KP_ROWS;                                                     \
            switch (nx) {                                                                                           \
                KGP_CASE(1) KGP_CASE(2) KGP_CASE(3) KGP_CASE(4) KGP_CASE(5) KGP_CASE(6) KGP_CASE(7) KGP_CASE(8)     \
                KGP_CASE(9) KGP_CASE(10) KGP_CASE(11) KGP_CASE(12) KGP_CASE(13) KGP_CASE(14) KGP_CASE(15)           \
                KGP_CASE(16) default : break;                                                                       \
            }                                                                                                       \
        }                                                                                                           \
    }
KGP_TILE(q4_K, kgp_q4_K, KGP_MINS_Q4K)
KGP_TILE(q5_K, kgp_q5_K, KGP_MINS_Q5K)
KGP_TILE(q6_K, kgp_q6_K, KGP_OFFSET_Q6K)

/* ==== tiles of every shape, and the table ================================ */

/* Instantiates name##_impl for every (nw, nx) so loops have constant
 * bounds; the per-element code is the same in all of them. */
#define TILE_DISPATCH(name)                                                                            \
    static void tile_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, \
                            int nx, float *out) {                                                      \
        if (nx == 1) { /* any number of weight rows, one at a time (see matmul_int.h) */               \
            for (int i = 0; i < nw; i++) name##_impl(n, w + i * ws, ws, 1, xq, xs, 1, out + i);        \
            return;                                                                                    \
        }                                                                                              \
        switch ((nw - 1) * NX + (nx - 1)) {                                                            \
        case 0: name##_impl(n, w, ws, 1, xq, xs, 1, out); break;                                       \
        case 1: name##_impl(n, w, ws, 1, xq, xs, 2, out); break;                                       \
        case 2: name##_impl(n, w, ws, 1, xq, xs, 3, out); break;                                       \
        case 3: name##_impl(n, w, ws, 1, xq, xs, 4, out); break;                                       \
        case 4: name##_impl(n, w, ws, 2, xq, xs, 1, out); break;                                       \
        case 5: name##_impl(n, w, ws, 2, xq, xs, 2, out); break;                                       \
        case 6: name##_impl(n, w, ws, 2, xq, xs, 3, out); break;                                       \
        case 7: name##_impl(n, w, ws, 2, xq, xs, 4, out); break;                                       \
        case 8: name##_impl(n, w, ws, 3, xq, xs, 1, out); break;                                       \
        case 9: name##_impl(n, w, ws, 3, xq, xs, 2, out); break;                                       \
        case 10: name##_impl(n, w, ws, 3, xq, xs, 3, out); break;                                      \
        case 11: name##_impl(n, w, ws, 3, xq, xs, 4, out); break;                                      \
        case 12: name##_impl(n, w, ws, 4, xq, xs, 1, out); break;                                      \
        case 13: name##_impl(n, w, ws, 4, xq, xs, 2, out); break;                                      \
        case 14: name##_impl(n, w, ws, 4, xq, xs, 3, out); break;                                      \
        default: name##_impl(n, w, ws, 4, xq, xs, 4, out); break;                                      \
        }                                                                                              \
    }

TILE_DISPATCH(f32)
TILE_DISPATCH(f16)
TILE_DISPATCH(bf16)
TILE_DISPATCH(q4_0)
TILE_DISPATCH(q4_1)
TILE_DISPATCH(q5_0)
TILE_DISPATCH(q5_1)
TILE_DISPATCH(iq4_nl)
TILE_DISPATCH(q8_0_ggml)
TILE_DISPATCH(q4_0_ggml)
TILE_DISPATCH(q5_0_ggml)
TILE_DISPATCH(q4_1_ggml)
TILE_DISPATCH(q5_1_ggml)
/* The ggml-order K-quant tiles take up to KG_NW x KG_NX (see there). */
#define TILE_DISPATCH_KG(name)                                                                         \
    static void tile_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, \
                            int nx, float *out) {                                                      \
        if (nx == 1) {                                                                                 \
            for (int i = 0; i < nw; i++) name##_impl(n, w + i * ws, ws, 1, xq, xs, 1, out + i);        \
            return;                                                                                    \
        }                                                                                              \
        if (nw == 1) {                                                                                 \
            switch (nx) {                                                                              \
            case 2: name##_impl(n, w, ws, 1, xq, xs, 2, out); break;                                   \
            case 3: name##_impl(n, w, ws, 1, xq, xs, 3, out); break;                                   \
            case 4: name##_impl(n, w, ws, 1, xq, xs, 4, out); break;                                   \
            case 5: name##_impl(n, w, ws, 1, xq, xs, 5, out); break;                                   \
            case 6: name##_impl(n, w, ws, 1, xq, xs, 6, out); break;                                   \
            case 7: name##_impl(n, w, ws, 1, xq, xs, 7, out); break;                                   \
            default: name##_impl(n, w, ws, 1, xq, xs, 8, out); break;                                  \
            }                                                                                          \
            return;                                                                                    \
        }                                                                                              \
        switch (nx) {                                                                                  \
        case 2: name##_impl(n, w, ws, 2, xq, xs, 2, out); break;                                       \
        case 3: name##_impl(n, w, ws, 2, xq, xs, 3, out); break;                                       \
        case 4: name##_impl(n, w, ws, 2, xq, xs, 4, out); break;                                       \
        case 5: name##_impl(n, w, ws, 2, xq, xs, 5, out); break;                                       \
        case 6: name##_impl(n, w, ws, 2, xq, xs, 6, out); break;                                       \
        case 7: name##_impl(n, w, ws, 2, xq, xs, 7, out); break;                                       \
        default: name##_impl(n, w, ws, 2, xq, xs, 8, out); break;                                      \
        }                                                                                              \
    }
TILE_DISPATCH_KG(q4_K_ggml)
TILE_DISPATCH_KG(q5_K_ggml)
TILE_DISPATCH_KG(q6_K_ggml)
TILE_DISPATCH(q2_K)
TILE_DISPATCH(q3_K)
TILE_DISPATCH(q4_K)
TILE_DISPATCH(q5_K)
TILE_DISPATCH(q6_K)
TILE_DISPATCH(iq4_xs)

#define K(name, xb, conv) static const rw_mm_kernel kernel_##name = {.x_bytes = xb, .convert_x = conv, .tile = tile_##name, .max_nw = NW, .max_nx = NX};
/* the float tiles keep two accumulators per output: 4 x 2 of them fit the registers */
#define KF(name, xb, conv) static const rw_mm_kernel kernel_##name = {.x_bytes = xb, .convert_x = conv, .tile = tile_##name, .max_nw = NW, .max_nx = 2};
KF(f32, x_bytes_f32, convert_f32)
KF(f16, x_bytes_f32, convert_f16)
KF(bf16, x_bytes_bf16, convert_bf16)
static const rw_mm_kernel kernel_q8_0 = {x_bytes_q8g, convert_q8_0_row, tile_q8_0, Q8G_NW, 1,
                                          g_bytes_q8, convert_q8_0_g, tile_g_q8_0, Q8G_MAX_NG,
                                          q_bytes_q8, convert_q8_0_q, tile_q_q8_0, Q8Q_MAX_NQ,
                                          p_bytes_q8, convert_q8_0_p, tile_p_q8_0, pack_q8_0_p, Q8P_ROWS, Q8P_MAX_NX, NULL, 0};
K(q4_0, x_bytes_chunks, convert_q8_0_b8)
K(q4_1, x_bytes_chunks, convert_q8_1)
K(q5_0, x_bytes_chunks, convert_q8_0_b16)
K(q5_1, x_bytes_chunks, convert_q8_1)
K(iq4_nl, x_bytes_chunks, convert_q8_0_b128)
K(q2_K, x_bytes_super, convert_q8_K)
K(q3_K, x_bytes_super, convert_q8_K)
static const rw_mm_kernel kernel_q4_K = {.x_bytes = x_bytes_super, .convert_x = convert_q8_K_perm, .tile = tile_q4_K,
                                          .max_nw = NW, .max_nx = NX, .p_bytes = x_bytes_super,
                                          .convert_p = convert_q8_K_p, .tile_p = tile_p_q4_K, .pack_p = pack_q4_K_p,
                                          .p_rows = KP_ROWS, .max_np = KP_MAX_NX, .p_wbytes = kp_wbytes_q4_K,
                                          .p_min_rows = KP_MIN_ROWS};
static const rw_mm_kernel kernel_q5_K = {.x_bytes = x_bytes_super, .convert_x = convert_q8_K_perm, .tile = tile_q5_K,
                                          .max_nw = NW, .max_nx = NX, .p_bytes = x_bytes_super,
                                          .convert_p = convert_q8_K_p, .tile_p = tile_p_q5_K, .pack_p = pack_q5_K_p,
                                          .p_rows = KP_ROWS, .max_np = KP_MAX_NX, .p_wbytes = kp_wbytes_q5_K,
                                          .p_min_rows = KP_MIN_ROWS};
static const rw_mm_kernel kernel_q6_K = {.x_bytes = x_bytes_super, .convert_x = convert_q8_K, .tile = tile_q6_K,
                                          .max_nw = NW, .max_nx = NX, .p_bytes = x_bytes_super,
                                          .convert_p = convert_q8_K_p, .tile_p = tile_p_q6_K, .pack_p = pack_q6_K_p,
                                          .p_rows = KP_ROWS, .max_np = KP_MAX_NX, .p_wbytes = kp_wbytes_q6_K,
                                          .p_min_rows = KP_MIN_ROWS};
K(iq4_xs, x_bytes_super, convert_q8_K)

const rw_mm_kernel *rw_mm_kernel_avx512(rw_dtype t) {
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
    case RW_TYPE_Q2_K: return &kernel_q2_K;
    case RW_TYPE_Q3_K: return &kernel_q3_K;
    case RW_TYPE_Q4_K: return &kernel_q4_K;
    case RW_TYPE_Q5_K: return &kernel_q5_K;
    case RW_TYPE_Q6_K: return &kernel_q6_K;
    case RW_TYPE_IQ4_XS: return &kernel_iq4_xs;
    default: return NULL;
    }
}

static const rw_mm_kernel kernel_q8_0_ggml = {.x_bytes = x_bytes_chunks, .convert_x = convert_q8_0_b128,
                                               .tile = tile_q8_0_ggml, .max_nw = NW, .max_nx = NX,
                                               .p_bytes = pg_bytes_q8, .convert_p = convert_q8_0_gp,
                                               .tile_p = tile_gp_q8_0, .pack_p = pack_q8_0_gp, .p_rows = Q8GP_ROWS,
                                               .max_np = Q8GP_MAX_NX};
K(q4_0_ggml, x_bytes_chunks, convert_q8_0_b8)
K(q5_0_ggml, x_bytes_chunks, convert_q8_0_b16)
K(q4_1_ggml, x_bytes_chunks, convert_q8_1)
K(q5_1_ggml, x_bytes_chunks, convert_q8_1)
#define KG(name, conv)                                                                                       \
    static const rw_mm_kernel kernel_##name##_ggml = {                                                        \
        .x_bytes = x_bytes_super, .convert_x = conv, .tile = tile_##name##_ggml, .max_nw = KG_NW, .max_nx = KG_NX, \
        .p_bytes = x_bytes_super, .convert_p = convert_q8_K_p, .tile_p = tile_gp_##name, .pack_p = pack_##name##_gp, \
        .p_rows = KP_ROWS, .max_np = KP_MAX_NX, .p_wbytes = kgp_wbytes_##name, .p_min_rows = KP_MIN_ROWS};
KG(q4_K, convert_q8_K_perm)
KG(q5_K, convert_q8_K_perm)
KG(q6_K, convert_q8_K)

const rw_mm_kernel *rw_mm_kernel_avx512_ggml(rw_dtype t) {
    switch (t) {
    case RW_TYPE_Q8_0: return &kernel_q8_0_ggml;
    case RW_TYPE_Q4_0: return &kernel_q4_0_ggml;
    case RW_TYPE_Q5_0: return &kernel_q5_0_ggml;
    case RW_TYPE_Q4_1: return &kernel_q4_1_ggml;
    case RW_TYPE_Q5_1: return &kernel_q5_1_ggml;
    case RW_TYPE_Q4_K: return &kernel_q4_K_ggml;
    case RW_TYPE_Q5_K: return &kernel_q5_K_ggml;
    case RW_TYPE_Q6_K: return &kernel_q6_K_ggml;
    default: return NULL;
    }
}

uint64_t rw_stream_read_avx512(const void *p, size_t n) {
    const uint8_t *b = p;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 256 <= n; i += 256) {
        a0 = _mm512_xor_si512(a0, _mm512_load_si512(b + i));
        a1 = _mm512_xor_si512(a1, _mm512_load_si512(b + i + 64));
        a2 = _mm512_xor_si512(a2, _mm512_load_si512(b + i + 128));
        a3 = _mm512_xor_si512(a3, _mm512_load_si512(b + i + 192));
    }
    __m512i x = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    return (uint64_t)_mm512_reduce_or_epi64(x);
}
