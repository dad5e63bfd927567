/* matmul_avx512.c - the AVX-512 tier (F, BW, VL, DQ, VNNI, BF16).
 *
 * Integer types multiply unsigned 8-bit weights by signed 8-bit activation
 * quants with vpdpbusd (4 products summed into each 32-bit lane). Weights
 * whose values are signed are biased into unsigned range (+8 for Q4_0, +16
 * for Q5_0 in ggml's order, +128 for Q8_0 and the types decoded to its
 * int8 values); the bias times the sum of the 4
 * activation quants of the lane is subtracted exactly, by starting the lane
 * from a precomputed -bias*sum, so integer results are exact.
 *
 * Float accumulation is per lane: each 32-bit lane keeps its own f32 sum
 * over the row, and the 16 lanes are added at the end by one fixed
 * reduction. For Q4_1 and Q5_1 a 64-element chunk holds two blocks
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
 * (matmul_int.h's group form), which keeps prefill bound by vpdpbusd; Q4_0,
 * Q5_0, IQ4_NL and MXFP4 sum as Q8_0 does, their blocks decoded to int8
 * values (the same file).
 *
 * Activation rows are converted (convert_x) into this file's own layouts,
 * described at each `x_*` struct; quantization rounds exactly as the
 * reference's activation quantizers (ggml's x86 rounding for Q8_0/Q8_1,
 * ggml's reference for Q8_K).
 *
 * RW_NUMERICS_GGML (kernels/matmul.h) has its own kernels for Q8_0, Q4_0,
 * Q5_0, Q4_1, Q5_1 and MXFP4 (BLOCK32_TILE_GGML, the ggml panel form, and
 * MXFP4's 16 lanes), which sum exactly as ggml's x86 build does.
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
#define FLOAT_TILE(name, LOADW, ESZ)                                                                               \
    INLINE void name##_step(const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs, const int nx, \
                            int64_t k, __mmask16 m0, __mmask16 m1, bool masked, __m512 a0[NW][NX],                 \
                            __m512 a1[NW][NX]) {                                                                   \
        __m512 x0[NX], x1[NX];                                                                                     \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                                     \
            x0[j] = load_x_f32(xq + j * xs, k, m0, masked);                                                        \
            x1[j] = load_x_f32(xq + j * xs, k + 16, m1, masked);                                                   \
        }                                                                                                          \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                                     \
            __m512 w0 = LOADW(w + i * ws, k, m0, masked), w1 = LOADW(w + i * ws, k + 16, m1, masked);              \
            __asm__("" : "+v"(w0), "+v"(w1)); /* loaded once for the nx products, not folded into each */          \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                                 \
                a0[i][j] = _mm512_fmadd_ps(w0, x0[j], a0[i][j]);                                                   \
                a1[i][j] = _mm512_fmadd_ps(w1, x1[j], a1[i][j]);                                                   \
            }                                                                                                      \
        }                                                                                                          \
    }                                                                                                              \
    INLINE void name##_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs,    \
                            const int nx, float *out) {                                                            \
        __m512 a0[NW][NX], a1[NW][NX];                                                                             \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++)  \
            a0[i][j] = a1[i][j] = _mm512_setzero_ps();                                                             \
        int64_t k = 0;                                                                                             \
        for (; k + 32 <= n; k += 32) {                                                                             \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)                                                   \
                rw_mm_prefetch_ahead(w + i * ws + k * (ESZ), 32 * (ESZ));                                          \
            name##_step(w, ws, nw, xq, xs, nx, k, 0, 0, false, a0, a1);                                            \
        }                                                                                                          \
        if (k < n) {                                                                                               \
            const __mmask16 m0 = n - k >= 16 ? 0xFFFF : (__mmask16)((1u << (n - k)) - 1);                          \
            const __mmask16 m1 = n - k <= 16 ? 0 : (__mmask16)((1u << (n - k - 16)) - 1);                          \
            name##_step(w, ws, nw, xq, xs, nx, k, m0, m1, true, a0, a1);                                           \
        }                                                                                                          \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)  \
            out[j * nw + i] = _mm512_reduce_add_ps(_mm512_add_ps(a0[i][j], a1[i][j]));                             \
    }

FLOAT_TILE(f32, load_w_f32, 4)
FLOAT_TILE(f16, load_w_f16, 2)

TILE_DISPATCH(f32)

/* Many activation rows of F32 weights (a mixture's router over a prefill):
 * tile_f32's 4 x 2 tiles over F32M_K elements at a time, each tile's
 * accumulators kept in acc between the pieces, so that a quad of weight
 * rows' piece stays in L1 while the pairs of activation rows pass (over
 * whole rows of 2048 elements, 4 weight rows and 2 activation rows fill
 * Zen 5's 48 KiB L1, and the weights came from L2 for every pair). Each
 * output's lanes take the same fmas in the same order as tile_f32's, so
 * the same bits. Up to F32M_NW x F32M_NX outputs (out[j * nw + i]); a
 * partial quad or pair goes to tile_f32. */
enum { F32M_K = 1024, F32M_NW = 16, F32M_NX = 32 };
static void tile_many_f32(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx,
                          float *out) {
    const int qw = nw / 4 * 4, px = nx / 2 * 2;
    /* 64 KiB, the tiles' a0, a1 between pieces: per thread, not on a caller's possibly small stack */
    static _Thread_local __m512 acc[F32M_NW / 4][F32M_NX / 2][2][4][2];
    for (int64_t k0 = 0; k0 < n; k0 += F32M_K) {
        const int64_t k1 = k0 + F32M_K < n ? k0 + F32M_K : n;
        for (int iq = 0; iq < qw; iq += 4)
            for (int jp = 0; jp < px; jp += 2) {
                __m512 a0[NW][NX], a1[NW][NX], (*sv)[4][2] = acc[iq / 4][jp / 2];
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
                    _Pragma("GCC unroll 2") for (int j = 0; j < 2; j++) {
                    a0[i][j] = k0 ? sv[0][i][j] : _mm512_setzero_ps();
                    a1[i][j] = k0 ? sv[1][i][j] : _mm512_setzero_ps();
                }
                const uint8_t *wq = w + (size_t)iq * ws, *xp = xq + (size_t)jp * xs;
                int64_t k = k0;
                for (; k + 32 <= k1; k += 32) {
                    if (!jp) /* the first pair brings the quad's piece in */
                        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
                            rw_mm_prefetch_ahead(wq + i * ws + k * 4, 128);
                    f32_step(wq, ws, 4, xp, xs, 2, k, 0, 0, false, a0, a1);
                }
                if (k < k1) { /* the row's last, partial piece (k1 == n) */
                    const __mmask16 m0 = n - k >= 16 ? 0xFFFF : (__mmask16)((1u << (n - k)) - 1);
                    const __mmask16 m1 = n - k <= 16 ? 0 : (__mmask16)((1u << (n - k - 16)) - 1);
                    f32_step(wq, ws, 4, xp, xs, 2, k, m0, m1, true, a0, a1);
                }
                if (k1 < n) {
                    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
                        _Pragma("GCC unroll 2") for (int j = 0; j < 2; j++) {
                        sv[0][i][j] = a0[i][j];
                        sv[1][i][j] = a1[i][j];
                    }
                    continue;
                }
                _Pragma("GCC unroll 2") for (int j = 0; j < 2; j++) _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
                    out[(jp + j) * nw + iq + i] = _mm512_reduce_add_ps(_mm512_add_ps(a0[i][j], a1[i][j]));
            }
    }
    float part[NW * 2];
    for (int jp = 0; jp < nx; jp += 2) { /* the partial quad, and the last row of an odd count */
        const int np = nx - jp < 2 ? 1 : 2, i0 = jp < px ? qw : 0;
        if (i0 == nw) continue;
        for (int i = i0; i < nw; i += 4) {
            const int nq = nw - i < 4 ? nw - i : 4;
            tile_f32(n, w + (size_t)i * ws, ws, nq, xq + (size_t)jp * xs, xs, np, part);
            for (int j = 0; j < np; j++)
                for (int q = 0; q < nq; q++) out[(jp + j) * nw + i + q] = part[j * nq + q];
        }
    }
}

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
    for (; k + 64 <= n; k += 64) {
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) rw_mm_prefetch_ahead(w + i * ws + 2 * k, 128);
        bf16_step(w, ws, nw, xq, xs, nx, k, 0, 0, false, a0, a1);
    }
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

/* MXFP4 (the ggml numerics' per-lane order): its doubled E2M1 values plus
 * 128, the block scales 2^(e - 128) (exact in f32, as the reference's). */
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

BLOCK32_TILE(q4_1, unpack_q4_1, b32_lanes_min, rw_block_q4_1)
BLOCK32_TILE(q5_1, unpack_q5_1, b32_lanes_min, rw_block_q5_1)
BLOCK32_TILE(mxfp4_ggml, unpack_mxfp4, b32_lanes, rw_block_mxfp4)
BLOCK32_TILE_GGML(q4_0_ggml, unpack_q4_0, rw_block_q4_0)
BLOCK32_TILE_GGML(q5_0_ggml, unpack_q5_0, rw_block_q5_0)
BLOCK32_TILE_GEN(q4_1_ggml, unpack_q4_1, rw_block_q4_1, b32_min_acc, ((b32_min_acc){_mm256_setzero_ps(), 0.0f}),
                 b32_ggml_min, b32_min_reduce)
BLOCK32_TILE_GEN(q5_1_ggml, unpack_q5_1, rw_block_q5_1, b32_min_acc, ((b32_min_acc){_mm256_setzero_ps(), 0.0f}),
                 b32_ggml_min, b32_min_reduce)

/* ==== tiles of every shape, and the tables =============================== */

TILE_DISPATCH(f16)
TILE_DISPATCH(bf16)
TILE_DISPATCH(q4_1)
TILE_DISPATCH(q5_1)
TILE_DISPATCH(mxfp4_ggml)
TILE_DISPATCH(q4_0_ggml)
TILE_DISPATCH(q5_0_ggml)
TILE_DISPATCH(q4_1_ggml)
TILE_DISPATCH(q5_1_ggml)

#define K(name, xb, conv) static const rw_mm_kernel kernel_##name = {.x_bytes = xb, .convert_x = conv, .tile = tile_##name, .max_nw = NW, .max_nx = NX};
/* the float tiles keep two accumulators per output: 4 x 2 of them fit the registers */
#define KF(name, xb, conv) static const rw_mm_kernel kernel_##name = {.x_bytes = xb, .convert_x = conv, .tile = tile_##name, .max_nw = NW, .max_nx = 2};
static const rw_mm_kernel kernel_f32 = {.x_bytes = x_bytes_f32,
                                        .convert_x = convert_f32,
                                        .tile = tile_f32,
                                        .max_nw = NW,
                                        .max_nx = 2,
                                        .tile_many = tile_many_f32,
                                        .many_nw = F32M_NW,
                                        .many_nx = F32M_NX,
                                        .many_min_rows = F32M_NX};
KF(f16, x_bytes_f32, convert_f16)
KF(bf16, x_bytes_bf16, convert_bf16)
K(q4_1, x_bytes_chunks, convert_q8_1)
K(q5_1, x_bytes_chunks, convert_q8_1)
K(q4_0_ggml, x_bytes_chunks, convert_q8_0_b8)
K(q5_0_ggml, x_bytes_chunks, convert_q8_0_b16)
K(q4_1_ggml, x_bytes_chunks, convert_q8_1)
K(q5_1_ggml, x_bytes_chunks, convert_q8_1)
K(mxfp4_ggml, x_bytes_chunks, convert_q8_0_b128)

const rw_mm_kernel *rw_mm_kernel_avx512(rw_dtype t) {
    switch (t) {
    case RW_TYPE_F32: return &kernel_f32;
    case RW_TYPE_F16: return &kernel_f16;
    case RW_TYPE_BF16: return &kernel_bf16;
    case RW_TYPE_Q8_0: return &rw_avx512_kernel_q8_0;
    case RW_TYPE_Q4_0: return &rw_avx512_kernel_q4_0;
    case RW_TYPE_Q4_1: return &kernel_q4_1;
    case RW_TYPE_Q5_0: return &rw_avx512_kernel_q5_0;
    case RW_TYPE_Q5_1: return &kernel_q5_1;
    case RW_TYPE_IQ4_NL: return &rw_avx512_kernel_iq4_nl;
    case RW_TYPE_MXFP4: return &rw_avx512_kernel_mxfp4;
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
    case RW_TYPE_MXFP4: return &kernel_mxfp4_ggml;
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
