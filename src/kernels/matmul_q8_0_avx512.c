/* matmul_q8_0_avx512.c - Q8_0 (and Q4_0, Q5_0, IQ4_NL, MXFP4 in its order,
 * their blocks decoded to int8 values) in the AVX-512 tier: the one-row tile, the
 * group form (many rows), the quad form (few rows), the panel form over
 * repacked weights, and in ggml's order the one-row tile and the panel form
 * (the file head of matmul_avx512.c describes the tier;
 * matmul_avx512_int.h the split).
 */
#include <stddef.h>

#include "kernels/matmul_avx512_int.h"
#include "kernels/quant_int.h"

/* ==== Q8_0: exact block sums, four float accumulators ===================
 *
 * Q8_0 does not use Q4_1's and Q5_1's per-lane scheme (matmul_avx512.c): each output is
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
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) t[i] =
        _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * i], p[2 * i + 1]), _mm512_unpackhi_epi32(p[2 * i], p[2 * i + 1]));
    _Pragma("GCC unroll 2") for (int i = 0; i < 2; i++) u[i] =
        _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]), _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

#ifndef Q8_PF_DIST
#define Q8_PF_DIST 4096 /* bytes ahead that the Q8_0 one-row, quad and panel forms prefetch */
#endif

/* ---- the weight types in Q8_0's order ------------------------------------
 *
 * Q4_0, Q5_0, IQ4_NL and MXFP4 sum as Q8_0 does (matmul_ref.c): each block
 * is decoded exactly to 32 int8 values (Q4_0: nibble - 8; Q5_0: the 5-bit
 * value - 16; IQ4_NL: its table; MXFP4: its doubled table) and an f32 scale
 * (f16, or MXFP4's 2^(e - 128)), and every form below takes the blocks
 * through these loaders, T being a constant where they are inlined. */
enum { WT_Q8_0, WT_Q4_0, WT_Q5_0, WT_IQ4_NL, WT_MXFP4 };

/* Bytes of a block of type T. */
INLINE int wt_bytes(const int T) {
    return T == WT_Q8_0     ? (int)sizeof(rw_block_q8_0)
           : T == WT_Q4_0   ? (int)sizeof(rw_block_q4_0)
           : T == WT_Q5_0   ? (int)sizeof(rw_block_q5_0)
           : T == WT_IQ4_NL ? (int)sizeof(rw_block_iq4_nl)
                            : (int)sizeof(rw_block_mxfp4);
}

/* 16 bytes -> 32 nibbles in element order (low nibbles are elements 0-15). */
INLINE __m256i nibbles32(const uint8_t *p) {
    const __m128i v = _mm_loadu_si128((const __m128i *)p), m = _mm_set1_epi8(0x0F);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, m)), _mm_and_si128(_mm_srli_epi16(v, 4), m),
                                   1);
}

/* Block b of a row as its 32 int8 values. */
INLINE __m256i wt_q(const uint8_t *row, int64_t b, const int T) {
    static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    static const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const uint8_t *p = row + b * wt_bytes(T);
    if (T == WT_Q8_0) return _mm256_loadu_si256((const __m256i *)((const rw_block_q8_0 *)p)->qs);
    if (T == WT_Q4_0) return _mm256_sub_epi8(nibbles32(((const rw_block_q4_0 *)p)->qs), _mm256_set1_epi8(8));
    if (T == WT_Q5_0) { /* the nibble, minus 16 where the fifth bit is clear */
        uint32_t hb;
        memcpy(&hb, ((const rw_block_q5_0 *)p)->qh, 4);
        const __m256i v = nibbles32(((const rw_block_q5_0 *)p)->qs);
        return _mm256_mask_sub_epi8(v, (__mmask32)~hb, v, _mm256_set1_epi8(16));
    }
    const int8_t *tab = T == WT_IQ4_NL ? iq4nl_values : mxfp4_values;
    const uint8_t *qs = T == WT_IQ4_NL ? ((const rw_block_iq4_nl *)p)->qs : ((const rw_block_mxfp4 *)p)->qs;
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tab)), nibbles32(qs));
}

/* The nibbles of 16 bytes at pa and pb as [lo(A), hi(A), lo(B), hi(B)]
 * (element order of the two blocks), with no shuffle: two broadcast loads
 * blended, the high 128-bit lane of each pair shifted right by 4. */
INLINE __m512i nibbles2_bcast(const uint8_t *pa, const uint8_t *pb, int two) {
    const __m512i a = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)pa));
    const __m512i v = two ? _mm512_mask_broadcast_i32x4(a, 0xFF00, _mm_loadu_si128((const __m128i *)pb)) : a;
    return _mm512_and_si512(_mm512_srlv_epi64(v, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0F));
}

/* Blocks ba (bytes 0-31) and bb (32-63; absent unless two: any values, as
 * the activation's quants are 0 there) of a row as their values plus 128,
 * vpdpbusd's unsigned operand: the two blocks decoded in one register. */
INLINE __m512i wt_u2(const uint8_t *row, int64_t ba, int64_t bb, int two, const int T) {
    static const uint8_t mxfp4_plus128[16] = {128, 129, 130, 131, 132, 134, 136, 140,
                                              128, 127, 126, 125, 124, 122, 120, 116};
    const int bytes = wt_bytes(T);
    const uint8_t *pa = row + ba * bytes, *pb = row + bb * bytes;
    if (T == WT_Q8_0) {
        const __m256i lo = _mm256_loadu_si256((const __m256i *)((const rw_block_q8_0 *)pa)->qs);
        const __m256i hi =
            two ? _mm256_loadu_si256((const __m256i *)((const rw_block_q8_0 *)pb)->qs) : _mm256_setzero_si256();
        return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8((char)0x80));
    }
    const int qoff = T == WT_Q4_0     ? (int)offsetof(rw_block_q4_0, qs)
                     : T == WT_Q5_0   ? (int)offsetof(rw_block_q5_0, qs)
                     : T == WT_IQ4_NL ? (int)offsetof(rw_block_iq4_nl, qs)
                                      : (int)offsetof(rw_block_mxfp4, qs);
    const __m512i nib = nibbles2_bcast(pa + qoff, pb + qoff, two);
    if (T == WT_Q4_0) return _mm512_add_epi8(nib, _mm512_set1_epi8(120)); /* nibble - 8 + 128 */
    if (T == WT_Q5_0) { /* the nibble, + 16 where the fifth bit is set, - 16 + 128 */
        uint32_t ha, hb = 0;
        memcpy(&ha, ((const rw_block_q5_0 *)pa)->qh, 4);
        if (two) memcpy(&hb, ((const rw_block_q5_0 *)pb)->qh, 4);
        const __m512i u = _mm512_add_epi8(nib, _mm512_set1_epi8(112));
        return _mm512_mask_add_epi8(u, (__mmask64)ha | (__mmask64)hb << 32, u, _mm512_set1_epi8(16));
    }
    if (T == WT_IQ4_NL) return iq4_lookup(nib);
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mxfp4_plus128)), nib);
}

/* The f32 scale of block b of a row. */
INLINE float wt_d(const uint8_t *row, int64_t b, const int T) {
    const uint8_t *p = row + b * wt_bytes(T);
    if (T == WT_MXFP4) return rw_e8m0_half(*p);
    rw_f16 h;
    memcpy(&h, p, 2); /* every f16 scale is the block's first field */
    return f16_to_f32(h);
}

/* Block indices 0..15 in V order, and 0..7. */
#define WT_VORDER  _mm512_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15)
#define WT_NATURAL _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0)

/* The scales of blocks blk[idx[l]] (blk: a row's block, idx: block
 * indices times wt_bytes(T)) for the lanes of valid, 0 elsewhere; exact
 * (MXFP4's 2^(e - 128) built from its bits as rw_e8m0_half). */
INLINE __m512 wt_d16_of(__m512i v, __mmask16 valid, const int T) {
    if (T != WT_MXFP4) return _mm512_maskz_cvtph_ps(valid, _mm512_cvtepi32_epi16(v));
    const __m512i e = _mm512_and_si512(v, _mm512_set1_epi32(0xFF));
    const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    const __m512i bits =
        _mm512_mask_blend_epi32(small, _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23),
                                _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e));
    return _mm512_maskz_mov_ps(valid, _mm512_castsi512_ps(bits));
}

INLINE __m512 wt_d16(const uint8_t *blk, __m512i off, __mmask16 valid, const int T) {
    return wt_d16_of(_mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, off, blk, 1), valid, T);
}

/* The f32 scales of 8 whole blocks from blk (lanes 0-7; 8-15 zero) of the
 * f16-scaled types, as wt_d16 but from 8 scalar loads: a masked 8-lane
 * gather held a fifth of the quad form's time on Zen 5. (MXFP4 keeps the
 * gather: its exponent bytes built this way measured slower.) */
INLINE __m512 wt_d8_full(const uint8_t *blk, const int T) {
    const int bytes = wt_bytes(T);
    uint16_t h[8];
    for (int i = 0; i < 8; i++) memcpy(&h[i], blk + i * bytes, 2);
    const __m128i v = _mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], (short)h[4], (short)h[5],
                                     (short)h[6], (short)h[7]);
    return _mm512_zextps256_ps512(_mm256_cvtph_ps(v));
}

/* The scales of a full group of 16 blocks without a gather (a 16-lane
 * gather took a third of MXFP4's one-row time on Zen 5): the scale fields
 * (each block's first 2 bytes, MXFP4's first byte) of 16 blocks lie in at
 * most 4 windows of 128 bytes inside the group; one two-register word
 * permute per window puts each block's scale word into the low word of its
 * lane (V order), as the gather's 32-bit loads left it, and MXFP4's odd
 * byte offsets are shifted down. A plan is made once per tile call. */
typedef struct {
    __m512i idx[4];    /* word permutes per window */
    __mmask32 keep[4]; /* the low word of each lane the window serves */
    int start[4];      /* the window's first byte in the group */
    int n;             /* windows */
    __m512i shift;     /* MXFP4: 8 where the scale byte is a word's high byte */
} wt_scale_plan;

static wt_scale_plan wt_plan(const int T) {
    wt_scale_plan pl = {.n = 0};
    const int bytes = wt_bytes(T), size = T == WT_MXFP4 ? 1 : 2, group = 16 * bytes;
    int16_t idx[32];
    int32_t shift[16] = {0};
    for (int j = 0; j < 16;) {
        int start = (j * bytes) & ~1;
        if (start > group - 128) start = group - 128;
        memset(idx, 0, sizeof idx);
        __mmask32 keep = 0;
        for (; j < 16 && j * bytes + size - 1 - start <= 127; j++) {
            const int b = j * bytes - start, lane = vpos(j);
            idx[2 * lane] = (int16_t)(b / 2);
            keep |= (__mmask32)1u << (2 * lane);
            shift[lane] = (b & 1) * 8;
        }
        pl.idx[pl.n] = _mm512_loadu_si512(idx);
        pl.keep[pl.n] = keep;
        pl.start[pl.n++] = start;
    }
    pl.shift = _mm512_loadu_si512(shift);
    return pl;
}

/* The raw scale fields of blocks 0..15 at blk (lane vpos(j): block j's
 * first 4 bytes' low 16 bits, the rest 0): wt_d16's gather for a full group. */
INLINE __m512i wt_fields16(const uint8_t *blk, const wt_scale_plan *pl, const int T) {
    __m512i r = _mm512_setzero_si512();
    _Pragma("GCC unroll 4") for (int k = 0; k < pl->n; k++) {
        const __m512i lo = _mm512_loadu_si512(blk + pl->start[k]), hi = _mm512_loadu_si512(blk + pl->start[k] + 64);
        r = _mm512_mask_mov_epi16(r, pl->keep[k], _mm512_permutex2var_epi16(lo, pl->idx[k], hi));
    }
    return T == WT_MXFP4 ? _mm512_srlv_epi32(r, pl->shift) : r;
}

/* A row's last group when it has fewer than 16 blocks (left): where the
 * tile's later rows follow (over: the bytes a full group reads past the
 * row), it takes a full group's code, the junk blocks' quants meeting
 * zero activation quants and their scales masked (valid); the tile's last
 * rows read only their own bytes (masked loads: a row may end where the
 * mapping does). The plan is made once per tile call (rows of one length). */
typedef struct {
    __mmask64 win[4][2]; /* per scale window, its two 64-byte halves */
    int left;            /* blocks in the partial group (0: the row has none) */
    __mmask16 valid;     /* their lanes (V order) */
    int64_t over;        /* bytes a full group's code reads past the row */
} wt_tail;

static wt_tail wt_tail_plan(int64_t n, int bytes, const wt_scale_plan *pl) {
    wt_tail t = {.left = (int)(n / 32 % 16), .valid = 0};
    t.over = (int64_t)(16 - t.left) * bytes;
    for (int j = 0; j < t.left; j++) t.valid |= (__mmask16)(1u << vpos(j));
    for (int k = 0; k < pl->n; k++)
        for (int h = 0; h < 2; h++) {
            const int lim = t.left * bytes - pl->start[k] - 64 * h; /* the group's bytes from there */
            t.win[k][h] = lim >= 64 ? ~0ull : lim <= 0 ? 0 : (1ull << lim) - 1;
        }
    return t;
}

/* wt_fields16 for the partial group; lanes of missing blocks 0. */
INLINE __m512i wt_fields_tail(const uint8_t *blk, const wt_scale_plan *pl, const wt_tail *t, const int T) {
    __m512i r = _mm512_setzero_si512();
    _Pragma("GCC unroll 4") for (int k = 0; k < pl->n; k++) {
        const __m512i lo = _mm512_maskz_loadu_epi8(t->win[k][0], blk + pl->start[k]);
        const __m512i hi = _mm512_maskz_loadu_epi8(t->win[k][1], blk + pl->start[k] + 64);
        r = _mm512_mask_mov_epi16(r, pl->keep[k], _mm512_permutex2var_epi16(lo, pl->idx[k], hi));
    }
    r = _mm512_maskz_mov_epi32(t->valid, r);
    return T == WT_MXFP4 ? _mm512_srlv_epi32(r, pl->shift) : r;
}

/* Q8_0's one-row float step on a group's sums (V order). */
INLINE __m128 q8_0_group_fma(__m128 acc, __m512i sums, __m512 dw, const float *dx) {
    const __m512 v = _mm512_cvtepi32_ps(sums), s = _mm512_mul_ps(dw, _mm512_load_ps(dx));
    acc = _mm_fmadd_ps(_mm512_castps512_ps128(v), _mm512_castps512_ps128(s), acc);
    acc = _mm_fmadd_ps(_mm512_extractf32x4_ps(v, 1), _mm512_extractf32x4_ps(s, 1), acc);
    acc = _mm_fmadd_ps(_mm512_extractf32x4_ps(v, 2), _mm512_extractf32x4_ps(s, 2), acc);
    return _mm_fmadd_ps(_mm512_extractf32x4_ps(v, 3), _mm512_extractf32x4_ps(s, 3), acc);
}

/* The one-row dot's end: (acc[0] + acc[1]) + (acc[2] + acc[3]). */
INLINE float q8_0_acc_sum(__m128 acc) {
    float a[4];
    _mm_storeu_ps(a, acc);
    return (a[0] + a[1]) + (a[2] + a[3]);
}

/* The exact sums of a group's first `left` blocks (0 past them: their
 * activation quants and base are 0), one lane a block in V order. */
INLINE __m512i q8_0_group_sums(const uint8_t *blk, const x_q8g *xg, int left, const int T) {
    __m512i p[8];
    if (left == 16) {
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) p[c] = _mm512_dpbusd_epi32(
            _mm512_load_si512(xg->ch[c].base), wt_u2(blk, 2 * c, 2 * c + 1, 1, T), _mm512_load_si512(xg->ch[c].qs));
    } else {
        for (int c = 0; c < 8; c++)
            p[c] = _mm512_dpbusd_epi32(_mm512_load_si512(xg->ch[c].base),
                                       2 * c < left ? wt_u2(blk, 2 * c, 2 * c + 1, 2 * c + 1 < left, T)
                                                    : _mm512_setzero_si512(),
                                       _mm512_load_si512(xg->ch[c].qs));
    }
    return block_sums16(p);
}

/* ---- the 4-bit types' one-row tile: four blocks a register --------------
 *
 * Q4_0, IQ4_NL and MXFP4 hold a block's 32 quants as 16 bytes (element i
 * the low nibble of byte i, element 16 + i its high nibble). The tile above
 * decodes two blocks a register and sums each block's 8 lanes with 14
 * shuffles per 16 blocks. Here
 * register m holds the bytes of four blocks, one a 128-bit quarter (blocks
 * 2m, 2m + 1, 8 + 2m, 9 + 2m: quarter q is V-order lane 4q + m), so its low
 * and high nibbles take two vpdpbusd into one accumulator whose quarters
 * each hold one block, and three unpack steps leave one lane a block in V
 * order. The activation is laid out to match (x_q8t). The integer sums are
 * exact, so they equal the tile above's, and the float step is the same. */
typedef struct {
    struct {
        int8_t lo[64], hi[64]; /* quarter q: block vord(4q + m)'s elements 0-15, 16-31 */
    } r[4];
    int32_t base[16]; /* -128 * the block's quant sum (the +128 of the weights' bytes), V order */
    float dx[16];     /* V order, 0 past the last block */
} x_q8t;

static size_t x_bytes_q8t(int64_t n) { return (size_t)((n / 32 + 15) / 16) * sizeof(x_q8t); }

static void convert_q8_0_t(const float *x, void *xq, int64_t n) {
    x_q8t *g = xq;
    memset(xq, 0, x_bytes_q8t(n)); /* missing blocks: quants, base and scale 0 */
    for (int64_t b = 0; b < n / 32; b++) {
        x_q8t *gg = &g[b / 16];
        const int l = vpos((int)(b % 16)), m = l % 4, q = l / 4;
        int8_t qs[32];
        int sum;
        float d, d_raw;
        quantize_block32(x + b * 32, qs, &d, &d_raw, &sum);
        memcpy(gg->r[m].lo + 16 * q, qs, 16);
        memcpy(gg->r[m].hi + 16 * q, qs + 16, 16);
        gg->base[l] = -128 * sum;
        gg->dx[l] = d;
    }
}

/* Quant bytes of blocks 2m, 2m + 1, 8 + 2m, 9 + 2m of a full group in the
 * quarters of one register. */
INLINE __m512i wt_quarters(const uint8_t *blk, int m, const int T) {
    const int bytes = wt_bytes(T);
    const uint8_t *p = blk + 2 * m * bytes + (T == WT_MXFP4 ? 1 : 2); /* qs follow the scale */
    __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p));
    v = _mm512_mask_broadcast_i32x4(v, 0x00F0, _mm_loadu_si128((const __m128i *)(p + bytes)));
    v = _mm512_mask_broadcast_i32x4(v, 0x0F00, _mm_loadu_si128((const __m128i *)(p + 8 * bytes)));
    return _mm512_mask_broadcast_i32x4(v, 0xF000, _mm_loadu_si128((const __m128i *)(p + 9 * bytes)));
}

/* wt_quarters for a partial group: blocks at or past left read as 0. */
INLINE __m512i wt_quarters_tail(const uint8_t *blk, int m, int left, const int T) {
    const int bytes = wt_bytes(T), b[4] = {2 * m, 2 * m + 1, 8 + 2 * m, 9 + 2 * m};
    const uint8_t *p = blk + (T == WT_MXFP4 ? 1 : 2);
    __m128i q[4];
    for (int i = 0; i < 4; i++) q[i] = _mm_maskz_loadu_epi8(b[i] < left ? 0xFFFF : 0, p + b[i] * bytes);
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(q[1], q[0])), _mm256_set_m128i(q[3], q[2]), 1);
}

/* 4-bit codes -> the values plus 128 (vpdpbusd's unsigned operand). */
INLINE __m512i wt_lut(__m512i nib, const int T) {
    static const uint8_t mxfp4_plus128[16] = {128, 129, 130, 131, 132, 134, 136, 140,
                                              128, 127, 126, 125, 124, 122, 120, 116};
    if (T == WT_Q4_0) return _mm512_add_epi8(nib, _mm512_set1_epi8(120)); /* nibble - 8 + 128 */
    if (T == WT_IQ4_NL) return iq4_lookup(nib);
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mxfp4_plus128)), nib);
}

/* The exact sums of a group's first `left` blocks (0 past them), one lane a
 * block in V order. */
INLINE __m512i q4_group_sums(const uint8_t *blk, const x_q8t *xg, int left, const int T) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i p[4];
    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) {
        const __m512i v = left == 16 ? wt_quarters(blk, m, T) : wt_quarters_tail(blk, m, left, T);
        const __m512i lo = wt_lut(_mm512_and_si512(v, m4), T);
        const __m512i hi = wt_lut(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), T);
        p[m] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_load_si512(xg->r[m].lo)), hi,
                                   _mm512_load_si512(xg->r[m].hi));
    }
    /* lane 4q + m <- the sum of p[m]'s quarter q */
    const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
    const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
    return _mm512_add_epi32(_mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1)),
                            _mm512_load_si512(xg->base));
}

/* The one-row dot of a weight row with an activation row, in either
 * layout: x_q8g (FOUR 0: q8_0_group_sums) or x_q8t (FOUR 1: q4_group_sums),
 * one struct per group of 16 blocks; the same float step on their sums. */
INLINE float wt_row_dot(int64_t n, const uint8_t *w, const uint8_t *x, const wt_scale_plan *pl, const wt_tail *tail,
                        int64_t after, const int T, const int FOUR) {
    const int64_t full = n / 32 / 16;
    const int bytes = wt_bytes(T);
    const size_t xsize = FOUR ? sizeof(x_q8t) : sizeof(x_q8g);
#define WT_SUMS(blk, xg, left) \
    (FOUR ? q4_group_sums(blk, (const x_q8t *)(xg), left, T) : q8_0_group_sums(blk, (const x_q8g *)(xg), left, T))
#define WT_DX(xg) (FOUR ? ((const x_q8t *)(xg))->dx : ((const x_q8g *)(xg))->dx)
    __m128 acc = _mm_setzero_ps();
    for (int64_t g = 0; g < full; g++, x += xsize) {
        const uint8_t *blk = w + g * 16 * bytes;
        /* the hardware prefetcher alone left one row at 36 GB/s, with this 44 (Zen 5) */
        _Pragma("GCC unroll 9") for (int l = 0; l < (16 * bytes + 63) / 64; l++)
            _mm_prefetch((const char *)blk + Q8_PF_DIST + 64 * l, _MM_HINT_T0);
        acc = q8_0_group_fma(acc, WT_SUMS(blk, x, 16), wt_d16_of(wt_fields16(blk, pl, T), 0xFFFF, T), WT_DX(x));
    }
    if (tail->left) {
        const uint8_t *blk = w + full * 16 * bytes;
        if (after >= tail->over) /* the full group's code: junk blocks past the row meet zero quants */
            acc =
                q8_0_group_fma(acc, WT_SUMS(blk, x, 16), wt_d16_of(wt_fields16(blk, pl, T), tail->valid, T), WT_DX(x));
        else
            acc = q8_0_group_fma(acc, WT_SUMS(blk, x, tail->left),
                                 wt_d16_of(wt_fields_tail(blk, pl, tail, T), tail->valid, T), WT_DX(x));
    }
#undef WT_SUMS
#undef WT_DX
    return q8_0_acc_sum(acc);
}

/* A one-row tile over wt_row_dot: every row of the call has the same
 * length, so the scale and short-group plans are made once per call. */
#define WT_ROW_TILE(fn, T, FOUR)                                                                                       \
    static void fn(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx, float *out) { \
        const wt_scale_plan pl = wt_plan(T);                                                                           \
        const wt_tail tail = wt_tail_plan(n, wt_bytes(T), &pl);                                                        \
        for (int j = 0; j < nx; j++)                                                                                   \
            for (int i = 0; i < nw; i++)                                                                               \
                out[j * nw + i] =                                                                                      \
                    wt_row_dot(n, w + i * ws, xq + j * xs, &pl, &tail, (int64_t)(nw - 1 - i) * (int64_t)ws, T, FOUR);  \
    }
WT_ROW_TILE(tile_q8_0, WT_Q8_0, 0)
WT_ROW_TILE(tile_q5_0, WT_Q5_0, 0)
WT_ROW_TILE(tile4_q4_0, WT_Q4_0, 1)
WT_ROW_TILE(tile4_iq4_nl, WT_IQ4_NL, 1)
WT_ROW_TILE(tile4_mxfp4, WT_MXFP4, 1)

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

/* Up to 8 weight rows x 4 groups per call; the accumulators of the current
 * k only live in registers (blocks 2k, 2k+1 of each 8 share acc[k]). */
enum { Q8G_NW = 8, Q8G_MAX_NG = 4 };

INLINE void q8_0_group(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xg, size_t xgs, int nx,
                       float *out, int64_t os, const int T) {
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
        /* the decoded blocks (Q8_0: the row's own) */
        _Alignas(32) int8_t wdec[T == WT_Q8_0 ? 1 : Q8G_NW][8][32];
        const int8_t *wqp[Q8G_NW][8];
        for (int i = 0; i < nw; i++)
            for (int bb = 0; bb < nbb; bb++) {
                const __m256i q = wt_q(w + i * ws, b0 + bb, T);
                if (T == WT_Q8_0) wqp[i][bb] = ((const rw_block_q8_0 *)(w + i * ws) + b0 + bb)->qs;
                else {
                    _mm256_store_si256((__m256i *)wdec[T == WT_Q8_0 ? 0 : i][bb], q);
                    wqp[i][bb] = wdec[T == WT_Q8_0 ? 0 : i][bb];
                }
                __m256i v = _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80));
                __m256i s4 = _mm256_sad_epu8(v, _mm256_setzero_si256());
                __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
                int64_t sum = _mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1) - 32 * 128;
                corr[i][bb] = (int32_t)(-128 * sum);
                dw[i][bb] = wt_d(w + i * ws, b0 + bb, T);
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
                        const i32u *wq = (const i32u *)wqp[i][bb];
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

#define WT_TILE_G(name, T)                                                                                           \
    static void tile_g_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xg, size_t xgs, int nx, \
                              float *out, int64_t os) {                                                              \
        q8_0_group(n, w, ws, nw, xg, xgs, nx, out, os, T);                                                           \
    }
WT_TILE_G(q8_0, WT_Q8_0)
WT_TILE_G(q4_0, WT_Q4_0)
WT_TILE_G(q5_0, WT_Q5_0)
WT_TILE_G(iq4_nl, WT_IQ4_NL)
WT_TILE_G(mxfp4, WT_MXFP4)

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

/* Quads 0..NQ-1 against blocks [b_lo, b_hi) of one weight row (b_lo a
 * multiple of 8), continuing the float sums in acc[0..NQ). */
INLINE void q8_0_quad_part(int64_t n, const uint8_t *w, int64_t b_lo, int64_t b_hi, const uint8_t *xq, size_t xqs,
                           __m512 *accp, const int NQ, const int T) {
    const int64_t nb = n / 32;
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    /* lane 4j + r takes dword j*8 + s of the pair of loaded registers */
    const __m512i lane_j = _mm512_setr_epi32(0, 0, 0, 0, 8, 8, 8, 8, 16, 16, 16, 16, 24, 24, 24, 24);
    /* the scales, converted once per octet: lane 4j + r of the even (odd) vector takes block 2j (2j+1) */
    const __m512i even_idx = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
    const __m512i odd_idx = _mm512_add_epi32(even_idx, _mm512_set1_epi32(1));
    const int bytes = wt_bytes(T);
    const __m512i doff = _mm512_mullo_epi32(WT_NATURAL, _mm512_set1_epi32(bytes));
    __m512 acc[Q8Q_MAX_NQ];
    _Pragma("GCC unroll 4") for (int qd = 0; qd < NQ; qd++) acc[qd] = accp[qd];
    for (int64_t b0 = b_lo; b0 < b_hi; b0 += 8) {
        const uint8_t *blk = w + b0 * bytes;
        const int left = nb - b0 < 8 ? (int)(nb - b0) : 8;
        _Pragma("GCC unroll 5") for (int l = 0; l < (8 * bytes + 63) / 64; l++)
            _mm_prefetch((const char *)blk + Q8_PF_DIST + 64 * l, _MM_HINT_T0);
        /* even blocks 0,2 | 4,6 and odd blocks 1,3 | 5,7, biased to unsigned
         * (missing blocks: any values, their activation quants are 0) */
        __m512i ev0, ev1, od0, od1;
        if (left == 8) {
            ev0 = wt_u2(blk, 0, 2, 1, T), ev1 = wt_u2(blk, 4, 6, 1, T);
            od0 = wt_u2(blk, 1, 3, 1, T), od1 = wt_u2(blk, 5, 7, 1, T);
        } else {
            ev0 = wt_u2(blk, 0, 2, left > 2, T);
            ev1 = left > 4 ? wt_u2(blk, 4, 6, left > 6, T) : bias;
            od0 = left > 1 ? wt_u2(blk, 1, 3, left > 3, T) : bias;
            od1 = left > 5 ? wt_u2(blk, 5, 7, left > 7, T) : bias;
        }
        const __mmask8 valid = (__mmask8)((1u << left) - 1);
        __m512 d8 = left == 8 && T != WT_MXFP4 ? wt_d8_full(blk, T) : wt_d16(blk, doff, valid, T);
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
            acc[qd] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(ie[qd]), _mm512_mul_ps(dw_e, _mm512_load_ps(xo->dx[0])), acc[qd]);
            acc[qd] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(io[qd]), _mm512_mul_ps(dw_o, _mm512_load_ps(xo->dx[1])), acc[qd]);
        }
    }
    _Pragma("GCC unroll 4") for (int qd = 0; qd < NQ; qd++) accp[qd] = acc[qd];
}

/* The end of a row's sums: out[(4q + r) * os] for rows < nx. */
static void q8_0_quad_out(const __m512 *acc, int NQ, int nx, float *out, int64_t os) {
    for (int qd = 0; qd < NQ; qd++) {
        __m128 y = _mm_add_ps(_mm_add_ps(_mm512_castps512_ps128(acc[qd]), _mm512_extractf32x4_ps(acc[qd], 1)),
                              _mm_add_ps(_mm512_extractf32x4_ps(acc[qd], 2), _mm512_extractf32x4_ps(acc[qd], 3)));
        float v[4];
        _mm_storeu_ps(v, y);
        for (int r = 0; r < Q8Q_ROWS && qd * Q8Q_ROWS + r < nx; r++) out[(qd * Q8Q_ROWS + r) * os] = v[r];
    }
}

/* The weight rows one after another against all quads, over pieces of
 * 32 blocks (3-4 quads) or 64 (2 quads): each piece's converted rows (1,280
 * bytes a quad and 8 blocks: 10-20 KiB a piece) stay in L1 across the
 * weight rows, where a long row's whole activations would not (16 rows of
 * 4,096 elements: 80 KiB; 12-16 rows then cost 7-10x one row instead of
 * 3-4x; 8 rows of 8,192 about 4-5x instead of 2.5x). The sums of each
 * weight row carry over from piece to piece in order: the same operations.
 * Shorter rows go whole (a piece's start costs a little, and splits each
 * weight row's stream). */
INLINE void q8_0_quad_rows(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xqs, int nx,
                           float *out, int64_t os, const int NQ, const int T) {
    /* one quad's rows are read whole (its pieces measured slower: each
     * splits the weight rows' streams), two quads' longer than 4,096 elements */
    const int64_t nb = n / 32, piece = NQ >= 3 ? 32 : 64;
    if (NQ == 1 || nb <= (NQ == 2 ? 128 : 64)) { /* the whole row at once */
        for (int i = 0; i < nw; i++) {
            __m512 a[Q8Q_MAX_NQ];
            for (int qd = 0; qd < NQ; qd++) a[qd] = _mm512_setzero_ps();
            q8_0_quad_part(n, w + (size_t)i * ws, 0, nb, xq, xqs, a, NQ, T);
            q8_0_quad_out(a, NQ, nx, out + i, os);
        }
        return;
    }
    __m512 acc[Q8G_NW][Q8Q_MAX_NQ];
    for (int i0 = 0; i0 < nw; i0 += Q8G_NW) {
        const int m = nw - i0 < Q8G_NW ? nw - i0 : Q8G_NW;
        for (int i = 0; i < m; i++)
            for (int qd = 0; qd < NQ; qd++) acc[i][qd] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b += piece)
            for (int i = 0; i < m; i++)
                q8_0_quad_part(n, w + (size_t)(i0 + i) * ws, b, b + piece < nb ? b + piece : nb, xq, xqs, acc[i], NQ,
                               T);
        for (int i = 0; i < m; i++) q8_0_quad_out(acc[i], NQ, nx, out + i0 + i, os);
    }
}

INLINE void q8_0_quad(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xqs, int nx, float *out,
                      int64_t os, const int T) {
    /* a constant quad count per call keeps every sum in a register */
    switch ((nx + Q8Q_ROWS - 1) / Q8Q_ROWS) {
    case 1: q8_0_quad_rows(n, w, ws, nw, xq, xqs, nx, out, os, 1, T); break;
    case 2: q8_0_quad_rows(n, w, ws, nw, xq, xqs, nx, out, os, 2, T); break;
    case 3: q8_0_quad_rows(n, w, ws, nw, xq, xqs, nx, out, os, 3, T); break;
    default: q8_0_quad_rows(n, w, ws, nw, xq, xqs, nx, out, os, 4, T); break;
    }
}

#define WT_TILE_Q(name, T)                                                                                           \
    static void tile_q_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xqs, int nx, \
                              float *out, int64_t os) {                                                              \
        q8_0_quad(n, w, ws, nw, xq, xqs, nx, out, os, T);                                                            \
    }
WT_TILE_Q(q8_0, WT_Q8_0)
WT_TILE_Q(q4_0, WT_Q4_0)
WT_TILE_Q(q5_0, WT_Q5_0)
WT_TILE_Q(iq4_nl, WT_IQ4_NL)
WT_TILE_Q(mxfp4, WT_MXFP4)

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
/* One panel block: dword s of the block of 16 weight rows at q[s][4 * row],
 * biased +128 to unsigned. */
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
 * and the rows' f16 scales; missing rows get weights and scales 0. The
 * ggml-order panel form's packer (pack_q8_0_p has its own, faster). */
static void pack_q8_0_block(const uint8_t *row0, size_t ws, int n_left, int64_t b, uint8_t bias, uint8_t q[8][64],
                            uint16_t d[16]) {
    /* a transpose of dwords: gather dword s of the 16 rows' blocks (panels
     * are also packed on the fly for every prefill, so this runs often);
     * rows past n_left are masked to 0, i.e. weight 0 after the bias */
    const __mmask16 live = n_left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n_left) - 1);
    const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32((int)ws));
    const uint8_t *blk0 = row0 + (size_t)b * sizeof(rw_block_q8_0);
    const __m512i vbias = _mm512_set1_epi8((char)bias);
    for (int s = 0; s < 8; s++) {
        const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rows,
                                                      blk0 + offsetof(rw_block_q8_0, qs) + 4 * s, 1);
        _mm512_storeu_si512(q[s], _mm512_xor_si512(v, vbias));
    }
    const __m512i dv = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rows, blk0, 1);
    _mm256_storeu_si256((__m256i *)d, _mm512_cvtepi32_epi16(dv)); /* the low half: the f16 scale */
}

/* The decoded types' panels: Q8_0's layout (the decoded values biased +128)
 * but f32 scales, as MXFP4's do not fit an f16: 16 x 36 bytes a block. */
enum { WTP_BLK = 16 * 36 };

static size_t wtp_wbytes(int64_t n) { return (size_t)(n / 32) * WTP_BLK / Q8P_ROWS; }

/* The panels of the types in Q8_0's order, blocks in the order of
 * pack_q8_0_block's callers (k, then o, then the pair): the pair 8o+2k,
 * 8o+2k+1 of each row decoded into one register (dwords 0-7, 8-15), so one
 * 16 x 16 transpose gives both panel blocks (a lone last block pairs with
 * zeros), biased +128. Missing rows are zeros. F16D (Q8_0): the rows' f16
 * scales as they are, 16 x 34 bytes a block, the same bytes as
 * pack_q8_0_block's gathers of single dwords in a third of their time on
 * Zen 5; else f32 scales (WTP_BLK). */
INLINE void pack_wt_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst, const int T,
                      const int F16D) {
    const int64_t nb = n / 32, n_oct = (nb + 7) / 8;
    const size_t blk_bytes = F16D ? Q8P_ROWS * sizeof(rw_block_q8_0) : WTP_BLK;
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int64_t p0 = 0; p0 < n_out; p0 += Q8P_ROWS) {
        wp_q8_blk *q = (wp_q8_blk *)(dst + (size_t)(p0 / Q8P_ROWS) * (size_t)nb * blk_bytes);
        uint16_t(*dh)[16] = (uint16_t(*)[16])(q + nb); /* F16D */
        float(*df)[16] = (float(*)[16])(q + nb);       /* else */
        const int nl = n_out - p0 < Q8P_ROWS ? (int)(n_out - p0) : Q8P_ROWS;
        const uint8_t *row0 = w + (size_t)p0 * ws;
        for (int k = 0; k < 4; k++)
            for (int64_t o = 0; o < n_oct; o++) {
                const int64_t b = 8 * o + 2 * k;
                if (b >= nb) continue;
                const int two = b + 1 < nb;
                __m512i r[16];
                _Pragma("GCC unroll 16") for (int l = 0; l < Q8P_ROWS; l++) {
                    if (l < nl) {
                        const uint8_t *row = row0 + (size_t)l * ws;
                        const __m256i lo = wt_q(row, b, T);
                        r[l] = _mm512_inserti64x4(_mm512_castsi256_si512(lo),
                                                  two ? wt_q(row, b + 1, T) : _mm256_setzero_si256(), 1);
                        for (int h = 0; h <= two; h++) {
                            if (F16D) memcpy(&dh[h][l], row + (b + h) * wt_bytes(T), sizeof(uint16_t));
                            else df[h][l] = wt_d(row, b + h, T);
                        }
                    } else {
                        r[l] = _mm512_setzero_si512();
                        for (int h = 0; h <= two; h++) {
                            if (F16D) dh[h][l] = 0;
                            else df[h][l] = 0.0f;
                        }
                    }
                }
                transpose16x16(r);
                _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++)
                    _mm512_storeu_si512(q[0].q[s], _mm512_xor_si512(r[s], bias));
                if (two)
                    _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++)
                        _mm512_storeu_si512(q[1].q[s], _mm512_xor_si512(r[8 + s], bias));
                q += 1 + two, dh += 1 + two, df += 1 + two;
            }
    }
}

static void pack_q8_0_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    pack_wt_p(w, ws, n, n_out, dst, WT_Q8_0, 1);
}

/* One panel (16 outputs) against R activation rows; out[r * os + l] for
 * outputs l < nl. F32S: the decoded types' panels (f32 scales). */
INLINE void q8_0_panel_dot(int64_t n, const wp_q8_blk *P, const uint8_t *xp, size_t xps, int nl, float *out, int64_t os,
                           const int R, const int F32S) {
    const int64_t nb = n / 32, n_oct = (nb + 7) / 8;
    const uint16_t(*D)[16] = (const uint16_t(*)[16])(P + nb);
    const float(*DF)[16] = (const float(*)[16])(P + nb);
    __m512 part[2][Q8P_MAX_NX]; /* (acc[0] + acc[1]) and (acc[2] + acc[3]) */
    for (int k = 0; k < 4; k++) {
        __m512 acc[Q8P_MAX_NX];
        _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
        for (int64_t o = 0; o < n_oct; o++) _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const int64_t b = 8 * o + 2 * k + h;
                if (b >= nb) break;
                __m512i W[8];
                _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
                    _mm_prefetch((const char *)P->q[s] + Q8_PF_DIST, _MM_HINT_T0);
                    W[s] = _mm512_loadu_si512(P->q[s]);
                }
                const __m512 dw =
                    F32S ? _mm512_loadu_ps(*DF) : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)*D));
                P++, D++, DF++;
                _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) {
                    const xp_q8_blk *xb = (const xp_q8_blk *)(xp + (size_t)r * xps) + b;
                    const i32u *xq = (const i32u *)xb->q;
                    /* two chains of four (exact integer sums: the same
                     * value as one chain), so that fewer rows in flight
                     * keep the multiply-adds busy */
                    __m512i ia = _mm512_set1_epi32(xb->corr), ib = _mm512_setzero_si512();
                    _Pragma("GCC unroll 4") for (int s = 0; s < 4; s++) {
                        DPBUSD_BCST(ia, W[s], xq + s);
                        DPBUSD_BCST(ib, W[4 + s], xq + 4 + s);
                    }
                    ia = _mm512_add_epi32(ia, ib);
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
INLINE void q8_0_panel(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                       float *out, int64_t os, const int F32S) {
    for (int i = 0; i < nw; i += Q8P_ROWS) {
        const wp_q8_blk *P = (const wp_q8_blk *)(w + (size_t)i * ws);
        const int nl = nw - i < Q8P_ROWS ? nw - i : Q8P_ROWS;
        switch (nx) { /* a constant row count keeps every accumulator in a register */
#define PANEL_CASE(R) \
    case R: q8_0_panel_dot(n, P, xp, xps, nl, out + i, os, R, F32S); break;
            // clang-format off
            PANEL_CASE(1) PANEL_CASE(2) PANEL_CASE(3) PANEL_CASE(4) PANEL_CASE(5) PANEL_CASE(6) PANEL_CASE(7)
            PANEL_CASE(8) PANEL_CASE(9) PANEL_CASE(10) PANEL_CASE(11) PANEL_CASE(12) PANEL_CASE(13) PANEL_CASE(14)
            PANEL_CASE(15) PANEL_CASE(16)
#undef PANEL_CASE
        default: break;
            // clang-format on
        }
    }
}

static void tile_p_q8_0(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                        float *out, int64_t os) {
    q8_0_panel(n, w, ws, nw, xp, xps, nx, out, os, 0);
}
static void tile_p_wt(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx, float *out,
                      int64_t os) {
    q8_0_panel(n, w, ws, nw, xp, xps, nx, out, os, 1);
}
#define WT_PACK(name, T)                                                                             \
    static void pack_p_##name(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) { \
        pack_wt_p(w, ws, n, n_out, dst, T, 0);                                                       \
    }
WT_PACK(q4_0, WT_Q4_0)
WT_PACK(q5_0, WT_Q5_0)
WT_PACK(iq4_nl, WT_IQ4_NL)
WT_PACK(mxfp4, WT_MXFP4)

/* ==== Q8_0 in ggml's order: the one-row tile ============================
 *
 * For one activation row (and the shapes up to NW x NX) the 32-block tile
 * of the other types in ggml's order (BLOCK32_TILE_GGML, matmul_avx512_int.h),
 * over the x_chunk activation layout, with the weights biased to unsigned. */

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

BLOCK32_TILE_GGML(q8_0_ggml, unpack_q8_0, rw_block_q8_0)
TILE_DISPATCH(q8_0_ggml)

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
    _Pragma("GCC unroll 3") for (int r = 0; r < R; r++) _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) a[r][s] =
        acc[r][s];
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
    _Pragma("GCC unroll 3") for (int r = 0; r < R; r++) _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) acc[r][s] =
        a[r][s];
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

/* The decoded types: Q8_0's forms and activation layouts, their own
 * panels (from 8 rows: fewer take the quad form rather than decode a
 * panel's 16 rows on the fly). */
#define WT_KERNEL(name, XB, CONV, TILE)                                        \
    const rw_mm_kernel rw_avx512_kernel_##name = {.x_bytes = XB,               \
                                                  .convert_x = CONV,           \
                                                  .tile = TILE,                \
                                                  .max_nw = Q8G_NW,            \
                                                  .max_nx = 1,                 \
                                                  .g_bytes = g_bytes_q8,       \
                                                  .convert_g = convert_q8_0_g, \
                                                  .tile_g = tile_g_##name,     \
                                                  .max_ng = Q8G_MAX_NG,        \
                                                  .q_bytes = q_bytes_q8,       \
                                                  .convert_q = convert_q8_0_q, \
                                                  .tile_q = tile_q_##name,     \
                                                  .max_nq = Q8Q_MAX_NQ,        \
                                                  .p_bytes = p_bytes_q8,       \
                                                  .convert_p = convert_q8_0_p, \
                                                  .tile_p = tile_p_wt,         \
                                                  .pack_p = pack_p_##name,     \
                                                  .p_rows = Q8P_ROWS,          \
                                                  .max_np = Q8P_MAX_NX,        \
                                                  .p_wbytes = wtp_wbytes,      \
                                                  .p_min_rows = 8};
WT_KERNEL(q4_0, x_bytes_q8t, convert_q8_0_t, tile4_q4_0)
WT_KERNEL(q5_0, x_bytes_q8g, convert_q8_0_row, tile_q5_0)
WT_KERNEL(iq4_nl, x_bytes_q8t, convert_q8_0_t, tile4_iq4_nl)
WT_KERNEL(mxfp4, x_bytes_q8t, convert_q8_0_t, tile4_mxfp4)

const rw_mm_kernel rw_avx512_kernel_q8_0 = {.x_bytes = x_bytes_q8g,
                                            .convert_x = convert_q8_0_row,
                                            .tile = tile_q8_0,
                                            .max_nw = Q8G_NW,
                                            .max_nx = 1,
                                            .g_bytes = g_bytes_q8,
                                            .convert_g = convert_q8_0_g,
                                            .tile_g = tile_g_q8_0,
                                            .max_ng = Q8G_MAX_NG,
                                            .q_bytes = q_bytes_q8,
                                            .convert_q = convert_q8_0_q,
                                            .tile_q = tile_q_q8_0,
                                            .max_nq = Q8Q_MAX_NQ,
                                            .p_bytes = p_bytes_q8,
                                            .convert_p = convert_q8_0_p,
                                            .tile_p = tile_p_q8_0,
                                            .pack_p = pack_q8_0_p,
                                            .p_rows = Q8P_ROWS,
                                            .max_np = Q8P_MAX_NX};

const rw_mm_kernel rw_avx512_kernel_q8_0_ggml = {.x_bytes = x_bytes_chunks,
                                                 .convert_x = convert_q8_0_b128,
                                                 .tile = tile_q8_0_ggml,
                                                 .max_nw = NW,
                                                 .max_nx = NX,
                                                 .p_bytes = pg_bytes_q8,
                                                 .convert_p = convert_q8_0_gp,
                                                 .tile_p = tile_gp_q8_0,
                                                 .pack_p = pack_q8_0_gp,
                                                 .p_rows = Q8GP_ROWS,
                                                 .max_np = Q8GP_MAX_NX};
