/* matmul_avx512.c - the AVX-512 tier (F, BW, VL, DQ, VNNI, BF16).
 *
 * Integer types multiply unsigned 8-bit weights by signed 8-bit activation
 * quants with vpdpbusd (4 products summed into each 32-bit lane). Weights
 * whose values are signed are biased into unsigned range (+8 for Q4_0, +16
 * for Q5_0, +128 for Q8_0, IQ4_NL and MXFP4); the bias times the sum of the 4
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
 * Q8_0 differs (matmul_q8_0_avx512.c): one float step per block on the exact
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
 *
 * The tier spans four files (matmul_avx512_int.h says which holds what);
 * this one has the float types, the 32-element blocks and the tables.
 */
#include "kernels/matmul_avx512_int.h"
#include "kernels/quant_int.h"

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

INLINE w_chunk unpack_iq4_nl(const uint8_t *row, int64_t c, int two) {
    const rw_block_iq4_nl *b = (const rw_block_iq4_nl *)row + 2 * c;
    __m512i nib = nibbles_2x16(b[0].qs, two ? b[1].qs : NULL, two);
    w_chunk w = {iq4_lookup(nib), lane_scales16(b[0].d, two ? b[1].d : 0),
                 _mm512_setzero_ps()};
    return w;
}

/* MXFP4: its doubled E2M1 values plus 128, the block scales 2^(e - 128)
 * (exact in f32, as the reference's). */
INLINE w_chunk unpack_mxfp4(const uint8_t *row, int64_t c, int two) {
    static const uint8_t mxfp4_plus128[16] = {128, 129, 130, 131, 132, 134, 136, 140,
                                              128, 127, 126, 125, 124, 122, 120, 116};
    const rw_block_mxfp4 *b = (const rw_block_mxfp4 *)row + 2 * c;
    __m512i nib = nibbles_2x16(b[0].qs, two ? b[1].qs : NULL, two);
    const __m512i tab = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mxfp4_plus128));
    const __m512 d =
        _mm512_insertf32x8(_mm512_set1_ps(rw_e8m0_half(b[0].e)), _mm256_set1_ps(two ? rw_e8m0_half(b[1].e) : 0.0f), 1);
    w_chunk w = {_mm512_shuffle_epi8(tab, nib), d, _mm512_setzero_ps()};
    return w;
}

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

#define BLOCK32_TILE(name, UNPACK, STEP, BLK)                                                          \
    BLOCK32_TILE_GEN(name, UNPACK, BLK, __m512, _mm512_setzero_ps(), STEP, _mm512_reduce_add_ps)

BLOCK32_TILE(q4_0, unpack_q4_0, b32_lanes, rw_block_q4_0)
BLOCK32_TILE(q4_1, unpack_q4_1, b32_lanes_min, rw_block_q4_1)
BLOCK32_TILE(q5_0, unpack_q5_0, b32_lanes, rw_block_q5_0)
BLOCK32_TILE(q5_1, unpack_q5_1, b32_lanes_min, rw_block_q5_1)
BLOCK32_TILE(iq4_nl, unpack_iq4_nl, b32_lanes, rw_block_iq4_nl)
BLOCK32_TILE(mxfp4, unpack_mxfp4, b32_lanes, rw_block_mxfp4)
BLOCK32_TILE_GGML(q4_0_ggml, unpack_q4_0, rw_block_q4_0)
BLOCK32_TILE_GGML(q5_0_ggml, unpack_q5_0, rw_block_q5_0)
BLOCK32_TILE_GEN(q4_1_ggml, unpack_q4_1, rw_block_q4_1, b32_min_acc, ((b32_min_acc){_mm256_setzero_ps(), 0.0f}),
                 b32_ggml_min, b32_min_reduce)
BLOCK32_TILE_GEN(q5_1_ggml, unpack_q5_1, rw_block_q5_1, b32_min_acc, ((b32_min_acc){_mm256_setzero_ps(), 0.0f}),
                 b32_ggml_min, b32_min_reduce)

/* ==== 32-element blocks: the panel form =================================== */

/* A panel holds 16 weight rows of a 32-block type, one per lane, repacked
 * per call into per-thread scratch (kernels/matmul.c): per 64-element chunk,
 * 16 vectors W[k] (lane l: the 4 unsigned quants of row l's group k, i.e.
 * the chunk's elements 4k..4k+3, as the tile's UNPACK gives them) and 2
 * vectors of scales (lane l: row l's scale of the chunk's first, second
 * block). Every output gets the tile's arithmetic: the same exact sum per
 * group (vpdpbusd from the activation's base), the same s = dw*dx and fma
 * per chunk into its own accumulator for each of the 16 groups, and
 * _mm512_reduce_add_ps's tree over those 16 accumulators spelt out (GCC's:
 * l + l+8, then + l+4, then 0+2 and 1+3, then those two). The tile's work
 * per output and chunk is the same; what the panel saves is unpacking each
 * weight chunk again for every 4 activation rows. */
enum { BP_ROWS = 16, BP_MAX_NX = 16, BP_PASS = 2, BP_CHUNK = 16 * 64 + 2 * 64, BP_MIN_ROWS = 8 };

static size_t bp_wbytes(int64_t n) { return (size_t)((n / 32 + 1) / 2) * BP_CHUNK / BP_ROWS; }

/* The panel's activation chunk: x_chunk less what the panel does not read
 * (Q8_1's sx, and dx once per block instead of per lane), so that the
 * activation rows of a task, read once per panel, take a little over half
 * the cache. */
typedef struct {
    int8_t qs[64];
    int32_t base[16];
    float dx[2];
} xp_chunk;
static size_t p_bytes_b32(int64_t n) { return (size_t)((n / 32 + 1) / 2) * sizeof(xp_chunk); }

static void convert_p_chunks(const float *const *rows, int n_rows, void *xp, int64_t n, int bias) {
    memset(xp, 0, p_bytes_b32(n));
    if (n_rows < 1) return;
    xp_chunk *c = xp;
    for (int64_t b = 0; b < n / 32; b++) {
        xp_chunk *ch = &c[b / 2];
        const int half = (int)(b % 2);
        int sum;
        float d_raw;
        quantize_block32(rows[0] + b * 32, ch->qs + 32 * half, &ch->dx[half], &d_raw, &sum);
        for (int l = 0; l < 8; l++) {
            const int8_t *q4 = ch->qs + 32 * half + 4 * l;
            ch->base[8 * half + l] = -bias * (q4[0] + q4[1] + q4[2] + q4[3]);
        }
    }
}
static void convert_p_b8(const float *const *rows, int n_rows, void *xp, int64_t n) {
    convert_p_chunks(rows, n_rows, xp, n, 8);
}
static void convert_p_b16(const float *const *rows, int n_rows, void *xp, int64_t n) {
    convert_p_chunks(rows, n_rows, xp, n, 16);
}
static void convert_p_b128(const float *const *rows, int n_rows, void *xp, int64_t n) {
    convert_p_chunks(rows, n_rows, xp, n, 128);
}

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

#define B32_PACK_PF 512 /* bytes ahead in each of a panel's rows that packing prefetches */
/* Rows past n_out are zeros (their outputs are not stored). The 16 rows of
 * a panel are read as 16 streams a chunk at a time, each prefetched
 * B32_PACK_PF bytes ahead (the hardware prefetcher does not follow 16
 * streams this short), and the chunk is transposed in registers. */
#define B32_PACK(name, UNPACK, block)                                                                            \
    static void pack_p_##name(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {           \
        const int64_t nb = n / 32, nc = (nb + 1) / 2;                                                          \
        for (int64_t i0 = 0; i0 < n_out; i0 += BP_ROWS) {                                                      \
            uint8_t *P = dst + (size_t)(i0 / BP_ROWS) * (size_t)nc * BP_CHUNK;                                 \
            const int nl = n_out - i0 < BP_ROWS ? (int)(n_out - i0) : BP_ROWS;                                 \
            for (int64_t c = 0; c < nc; c++) {                                                                 \
                const int two = 2 * c + 1 < nb;                                                                \
                __m512i u[BP_ROWS];                                                                            \
                uint32_t *W = (uint32_t *)(P + (size_t)c * BP_CHUNK);                                          \
                float *S = (float *)(W + 256);                                                                 \
                _Pragma("GCC unroll 16") for (int l = 0; l < BP_ROWS; l++) {                                   \
                    if (l < nl) {                                                                              \
                        const uint8_t *row = w + (size_t)(i0 + l) * ws;                                        \
                        _mm_prefetch((const char *)(row + (size_t)(2 * c) * sizeof(block)) + B32_PACK_PF,      \
                                     _MM_HINT_T0);                                                             \
                        const w_chunk wc = UNPACK(row, c, two);                                                \
                        u[l] = wc.u;                                                                           \
                        S[l] = _mm512_cvtss_f32(wc.dw);                                                        \
                        S[16 + l] = _mm_cvtss_f32(_mm512_extractf32x4_ps(wc.dw, 2));                           \
                    } else {                                                                                   \
                        u[l] = _mm512_setzero_si512();                                                         \
                        S[l] = S[16 + l] = 0.0f;                                                               \
                    }                                                                                          \
                }                                                                                              \
                transpose16x16(u);                                                                             \
                _Pragma("GCC unroll 16") for (int k = 0; k < 16; k++)                                          \
                    _mm512_store_si512(W + 16 * k, u[k]);                                                      \
            }                                                                                                  \
        }                                                                                                      \
    }

INLINE void bp_half(int64_t nc, const uint8_t *P, const uint8_t *xp, size_t xps, __m512 part[BP_PASS][16],
                    const int H, const int R) {
    __m512 acc[BP_PASS][8];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) acc[r][g] = _mm512_setzero_ps();
    const xp_chunk *x0 = (const xp_chunk *)xp, *x1 = (const xp_chunk *)(xp + (R > 1 ? xps : 0));
    for (int64_t c = 0; c < nc; c++) {
        const uint8_t *B = P + (size_t)c * BP_CHUNK + 512 * H;
        _mm_prefetch((const char *)B + 4 * BP_CHUNK, _MM_HINT_T0);
        const __m512 dw = _mm512_load_ps(P + (size_t)c * BP_CHUNK + 1024 + 64 * H);
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            const xp_chunk *xc = (r ? x1 : x0) + c;
            const __m512 sv = _mm512_mul_ps(dw, _mm512_set1_ps(xc->dx[H]));
            _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) {
                __m512i is = _mm512_set1_epi32(xc->base[8 * H + g]);
                DPBUSD_BCST(is, _mm512_load_si512(B + 64 * g), (const i32u *)(xc->qs + 4 * (8 * H + g)));
                acc[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), sv, acc[r][g]);
            }
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) part[r][8 * H + g] = acc[r][g];
}

/* The 16 outputs of one panel (nl kept) against R <= BP_PASS activation
 * rows: one pass per block of the chunk (groups 8h..8h+7), 8 accumulators
 * per row, the first pass's kept in memory until the reduction. */
INLINE void bp_pass(int64_t nc, const uint8_t *P, const uint8_t *xp, size_t xps, int nl, float *out, int64_t os,
                    const int R) {
    __m512 part[BP_PASS][16];
    bp_half(nc, P, xp, xps, part, 0, R);
    bp_half(nc, P, xp, xps, part, 1, R);
    const __mmask16 keep = (__mmask16)((1u << nl) - 1);
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
        __m512 t3[8], t6[4];
        _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) t3[l] = _mm512_add_ps(part[r][l + 8], part[r][l]);
        _Pragma("GCC unroll 4") for (int l = 0; l < 4; l++) t6[l] = _mm512_add_ps(t3[l + 4], t3[l]);
        const __m512 y = _mm512_add_ps(_mm512_add_ps(t6[0], t6[2]), _mm512_add_ps(t6[1], t6[3]));
        _mm512_mask_storeu_ps(out + r * os, keep, y);
    }
}

static void tile_p_b32(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                       float *out, int64_t os) {
    const int64_t nc = (n / 32 + 1) / 2;
    for (int i = 0; i < nw; i += BP_ROWS) {
        const uint8_t *P = w + (size_t)i * ws;
        const int nl = nw - i < BP_ROWS ? nw - i : BP_ROWS;
        int r0 = 0;
        for (; r0 + 2 <= nx; r0 += 2) bp_pass(nc, P, xp + (size_t)r0 * xps, xps, nl, out + i + r0 * os, os, 2);
        if (r0 < nx) bp_pass(nc, P, xp + (size_t)r0 * xps, xps, nl, out + i + r0 * os, os, 1);
    }
}

B32_PACK(q4_0, unpack_q4_0, rw_block_q4_0)
B32_PACK(q5_0, unpack_q5_0, rw_block_q5_0)
B32_PACK(iq4_nl, unpack_iq4_nl, rw_block_iq4_nl)
B32_PACK(mxfp4, unpack_mxfp4, rw_block_mxfp4)

/* ==== tiles of every shape, and the tables =============================== */

TILE_DISPATCH(f32)
TILE_DISPATCH(f16)
TILE_DISPATCH(bf16)
TILE_DISPATCH(q4_0)
TILE_DISPATCH(q4_1)
TILE_DISPATCH(q5_0)
TILE_DISPATCH(q5_1)
TILE_DISPATCH(iq4_nl)
TILE_DISPATCH(mxfp4)
TILE_DISPATCH(q4_0_ggml)
TILE_DISPATCH(q5_0_ggml)
TILE_DISPATCH(q4_1_ggml)
TILE_DISPATCH(q5_1_ggml)

#define K(name, xb, conv) static const rw_mm_kernel kernel_##name = {.x_bytes = xb, .convert_x = conv, .tile = tile_##name, .max_nw = NW, .max_nx = NX};
/* the float tiles keep two accumulators per output: 4 x 2 of them fit the registers */
#define KF(name, xb, conv) static const rw_mm_kernel kernel_##name = {.x_bytes = xb, .convert_x = conv, .tile = tile_##name, .max_nw = NW, .max_nx = 2};
KF(f32, x_bytes_f32, convert_f32)
KF(f16, x_bytes_f32, convert_f16)
KF(bf16, x_bytes_bf16, convert_bf16)
/* the 32-block types without a min term also have the panel form */
#define KP(name, xb, conv, convp)                                                                                   \
    static const rw_mm_kernel kernel_##name = {.x_bytes = xb, .convert_x = conv, .tile = tile_##name, .max_nw = NW,  \
                                               .max_nx = NX, .p_bytes = p_bytes_b32, .convert_p = convp,             \
                                               .tile_p = tile_p_b32, .pack_p = pack_p_##name, .p_rows = BP_ROWS,     \
                                               .max_np = BP_MAX_NX, .p_wbytes = bp_wbytes, .p_min_rows = BP_MIN_ROWS};
KP(q4_0, x_bytes_chunks, convert_q8_0_b8, convert_p_b8)
K(q4_1, x_bytes_chunks, convert_q8_1)
KP(q5_0, x_bytes_chunks, convert_q8_0_b16, convert_p_b16)
K(q5_1, x_bytes_chunks, convert_q8_1)
KP(iq4_nl, x_bytes_chunks, convert_q8_0_b128, convert_p_b128)
KP(mxfp4, x_bytes_chunks, convert_q8_0_b128, convert_p_b128)
K(q4_0_ggml, x_bytes_chunks, convert_q8_0_b8)
K(q5_0_ggml, x_bytes_chunks, convert_q8_0_b16)
K(q4_1_ggml, x_bytes_chunks, convert_q8_1)
K(q5_1_ggml, x_bytes_chunks, convert_q8_1)

const rw_mm_kernel *rw_mm_kernel_avx512(rw_dtype t) {
    switch (t) {
    case RW_TYPE_F32: return &kernel_f32;
    case RW_TYPE_F16: return &kernel_f16;
    case RW_TYPE_BF16: return &kernel_bf16;
    case RW_TYPE_Q8_0: return &rw_avx512_kernel_q8_0;
    case RW_TYPE_Q4_0: return &kernel_q4_0;
    case RW_TYPE_Q4_1: return &kernel_q4_1;
    case RW_TYPE_Q5_0: return &kernel_q5_0;
    case RW_TYPE_Q5_1: return &kernel_q5_1;
    case RW_TYPE_IQ4_NL: return &kernel_iq4_nl;
    case RW_TYPE_MXFP4: return &kernel_mxfp4;
    case RW_TYPE_Q2_K: return &rw_avx512_kernel_q2_K;
    case RW_TYPE_Q3_K: return &rw_avx512_kernel_q3_K;
    case RW_TYPE_Q4_K: return &rw_avx512_kernel_q4_K;
    case RW_TYPE_Q5_K: return &rw_avx512_kernel_q5_K;
    case RW_TYPE_Q6_K: return &rw_avx512_kernel_q6_K;
    case RW_TYPE_IQ4_XS: return &rw_avx512_kernel_iq4_xs;
    default: return NULL;
    }
}

const rw_mm_kernel *rw_mm_kernel_avx512_ggml(rw_dtype t) {
    switch (t) {
    case RW_TYPE_Q8_0: return &rw_avx512_kernel_q8_0_ggml;
    case RW_TYPE_Q4_0: return &kernel_q4_0_ggml;
    case RW_TYPE_Q5_0: return &kernel_q5_0_ggml;
    case RW_TYPE_Q4_1: return &kernel_q4_1_ggml;
    case RW_TYPE_Q5_1: return &kernel_q5_1_ggml;
    case RW_TYPE_Q4_K: return &rw_avx512_kernel_q4_K_ggml;
    case RW_TYPE_Q5_K: return &rw_avx512_kernel_q5_K_ggml;
    case RW_TYPE_Q6_K: return &rw_avx512_kernel_q6_K_ggml;
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
