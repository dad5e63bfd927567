/* matmul_avx2_int.h - what the AVX2 tier's files share (private): the Q8_0
 * panel form of matmul_q8_0_avx2.c, used by matmul_avx2.c's Q8_0 kernel. */
#ifndef RW_KERNELS_MATMUL_AVX2_INT_H
#define RW_KERNELS_MATMUL_AVX2_INT_H

#include <immintrin.h>
#include <string.h>

#include "kernels/matmul_int.h"
#include "kernels/quant_int.h"

/* The weight types summed in Q8_0's order (matmul_ref.c): each block
 * decoded exactly to 32 int8 values and an f32 scale. T is a constant
 * where these are inlined. */
enum { RW_AVX2_WT_Q8_0, RW_AVX2_WT_Q4_0, RW_AVX2_WT_Q5_0, RW_AVX2_WT_IQ4_NL, RW_AVX2_WT_MXFP4 };

static inline __attribute__((always_inline)) size_t rw_avx2_wt_bytes(const int T) {
    return T == RW_AVX2_WT_Q8_0     ? sizeof(rw_block_q8_0)
           : T == RW_AVX2_WT_Q4_0   ? sizeof(rw_block_q4_0)
           : T == RW_AVX2_WT_Q5_0   ? sizeof(rw_block_q5_0)
           : T == RW_AVX2_WT_IQ4_NL ? sizeof(rw_block_iq4_nl)
                                    : sizeof(rw_block_mxfp4);
}

/* IQ4_NL's (and IQ4_XS's) 16 values. */
static const int8_t rw_avx2_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                1,    13,   25,  38,  53,  69,  89,  113};

/* MXFP4's 16 values: its E2M1 values doubled (the block scale halved). */
static const int8_t rw_avx2_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 16 bytes -> [low nibbles | high nibbles] as 32 bytes in element order. */
static inline __attribute__((always_inline)) __m256i rw_avx2_nibbles16(const uint8_t *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)p), m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* 16 in byte e of 32 where bit e of bits is set (Q5's fifth bits). */
static inline __attribute__((always_inline)) __m256i rw_avx2_q5_bits16(uint32_t bits) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf); /* byte e = bits' byte e/8 */
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i hit = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, sel), sel);
    return _mm256_and_si256(hit, _mm256_set1_epi8(16));
}

/* Q5's fifth bits as 16 per set bit of qh (element order). */
static inline __attribute__((always_inline)) __m256i rw_avx2_q5_high(const uint8_t qh[4]) {
    uint32_t bits;
    memcpy(&bits, qh, 4);
    return rw_avx2_q5_bits16(bits);
}

/* Block b of a row of type T as its 32 int8 values. */
static inline __attribute__((always_inline)) __m256i rw_avx2_wt_q(const uint8_t *row, int64_t b, const int T) {
    const uint8_t *p = row + (size_t)b * rw_avx2_wt_bytes(T);
    if (T == RW_AVX2_WT_Q8_0) return _mm256_loadu_si256((const __m256i *)((const rw_block_q8_0 *)p)->qs);
    if (T == RW_AVX2_WT_Q4_0)
        return _mm256_sub_epi8(rw_avx2_nibbles16(((const rw_block_q4_0 *)p)->qs), _mm256_set1_epi8(8));
    if (T == RW_AVX2_WT_Q5_0) {
        const rw_block_q5_0 *q = (const rw_block_q5_0 *)p;
        return _mm256_sub_epi8(_mm256_or_si256(rw_avx2_nibbles16(q->qs), rw_avx2_q5_high(q->qh)), _mm256_set1_epi8(16));
    }
    const int8_t *tab = T == RW_AVX2_WT_IQ4_NL ? rw_avx2_iq4nl_values : rw_avx2_mxfp4_values;
    const uint8_t *qs = T == RW_AVX2_WT_IQ4_NL ? ((const rw_block_iq4_nl *)p)->qs : ((const rw_block_mxfp4 *)p)->qs;
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tab)),
                               rw_avx2_nibbles16(qs));
}

/* The f32 scale of block b of a row of type T (the f16 scales are each
 * block's first field). */
static inline __attribute__((always_inline)) float rw_avx2_wt_d(const uint8_t *row, int64_t b, const int T) {
    const uint8_t *p = row + (size_t)b * rw_avx2_wt_bytes(T);
    if (T == RW_AVX2_WT_MXFP4) return rw_e8m0_half(*p);
    rw_f16 h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* rw_e8m0_half of eight exponents (32-bit lanes 0..255) in vectors, the
 * same bits: 2^(e - 128) as the exponent field e - 1, or for e < 2 the
 * subnormal 2^21 << e. */
static inline __attribute__((always_inline)) __m256 rw_avx2_e8m0_half8(__m256i e) {
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e); /* e >= 2: not taken */
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}

/* An 8 x 8 transpose of dwords: o[s] gets dword s of r[0..8) (dword i of
 * o[s] from r[i]). For packing panels: 8 weight rows, one per lane. */
static inline __attribute__((always_inline)) void rw_avx2_transpose8_epi32(const __m256i r[8], __m256i o[8]) {
    __m256i t[8], u[8];
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) { /* rows 2i, 2i+1: dwords 0 1 4 5 and 2 3 6 7 interleaved */
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) { /* rows 4h..4h+3: u[4h + s] holds dwords s and s + 4 */
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    _Pragma("GCC unroll 4") for (int s = 0; s < 4; s++) {
        o[s] = _mm256_permute2x128_si256(u[s], u[4 + s], 0x20);
        o[s + 4] = _mm256_permute2x128_si256(u[s], u[4 + s], 0x31);
    }
}

/* True when the AVX2 tier sums bytes with AVX-VNNI (the CPU has it and
 * rw_matmul_set_avx_vnni did not turn it off). Same bits either way. */
bool rw_avx2_vnni(void);

/* One block of activations quantized as rw_quantize_act_q8_0 (the same
 * bytes), and the sum of its quants. */
void rw_avx2_act_q8_0(const float *x, int8_t q[32], rw_f16 *d, int *sum);

enum { RW_AVX2_Q8P_ROWS = 8, RW_AVX2_Q8P_MAX_NX = 8 };
size_t rw_avx2_p_bytes_q8_0(int64_t n);
void rw_avx2_convert_q8_0_p(const float *const *rows, int n_rows, void *xp, int64_t n);
void rw_avx2_pack_q8_0_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx2_tile_p_q8_0(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os);
/* The decoded types' panels: Q8_0's layout with f32 scales. */
size_t rw_avx2_p_wbytes_wt(int64_t n);
void rw_avx2_pack_q4_0_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx2_pack_q5_0_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx2_pack_iq4_nl_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx2_pack_mxfp4_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx2_tile_p_wt(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                       float *out, int64_t os);
void rw_avx2_tile_p_wt_small(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                             float *out, int64_t os);

/* n values (a multiple of 256) quantized as rw_quantize_row's Q8_K (the
 * same bytes) into dst (matmul_kpanel_avx2.c). */
void rw_avx2_quantize_q8_K(const float *x, void *dst, int64_t n);

/* The eight 6-bit scales and mins of a Q4_K / Q5_K super-block as bytes:
 * sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scales) and 4-7 (mins);
 * 4-7 as the nibbles of bytes 8-11 with the top two bits of bytes 0-3
 * (scales) and 4-7 (mins) above them. */
static inline void k4_scales_mins(const uint8_t s[12], uint64_t *sc, uint64_t *mn) {
    uint32_t a[3]; /* three loads (one 12-byte memcpy went through the stack) */
    memcpy(&a[0], s, 4);
    memcpy(&a[1], s + 4, 4);
    memcpy(&a[2], s + 8, 4);
    const uint32_t m6 = 0x3F3F3F3Fu, m4 = 0x0F0F0F0Fu, m2 = 0x03030303u;
    *sc = (a[0] & m6) | (uint64_t)((a[2] & m4) | ((a[0] >> 6) & m2) << 4) << 32;
    *mn = (a[1] & m6) | (uint64_t)(((a[2] >> 4) & m4) | ((a[1] >> 6) & m2) << 4) << 32;
}

/* Q4_K, Q5_K and Q6_K over repacked weights (matmul_kpanel_avx2.c; Q5_K's
 * panels are Q4_K's layout). */
enum { RW_AVX2_KP_ROWS = 8, RW_AVX2_KP_MAX_NX = 8 };
size_t rw_avx2_p_wbytes_q4_K(int64_t n);
void rw_avx2_convert_q8_K_p(const float *const *rows, int n_rows, void *xp, int64_t n);
void rw_avx2_pack_q4_K_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx2_tile_p_q4_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os);
void rw_avx2_pack_q5_K_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx2_tile_p_q5_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os);
size_t rw_avx2_p_wbytes_q6_K(int64_t n);
void rw_avx2_pack_q6_K_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx2_tile_p_q6_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os);

/* One or two activation rows (Q8_K, stride xs; nx <= 2) against nw IQ4_XS
 * weight rows of stride ws, out[j * nw + i] (matmul_dot1_avx2.c); vnni:
 * rw_avx2_vnni(). */
void rw_avx2_iq4_xs_rows(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx,
                         float *out, bool vnni);

/* The panels' plain AVX2 step of four activation rows (no VNNI), in asm:
 * for r < 4, is[r] += vpmaddwd(sc, the 16-bit sum over the 8 dwords s of
 * vpmaddubsw(q[s], xq[r]'s dword s broadcast)), or with halves two such
 * sums of 4 dwords each (each a vpmaddwd with sc). q: 8 dwords of 8 panel
 * rows (unsigned, 32 bytes each), xq[r]: 32 signed quants of row r, sc: 16
 * int16 (the lanes' pair multipliers). The caller bounds each 16-bit sum
 * below 2^15. Given this in C, the compiler kept the 8 quant registers
 * across the rows and spilled the rows' sums (with the dwords outermost it
 * reloaded and spilled more); here each quant dword is loaded once (ymm0)
 * for the 4 rows, row r's broadcast goes through ymm(1 + r) and its 16-bit
 * sum gathers in ymm(5 + r) (RW_SUM4_ROW's t and a): 6-12% less time at 512
 * rows on Zen 3. The same integers as the C forms. */
#define RW_SUM4_W(s) "vmovdqu 32*" #s "(%[q]), %%ymm0\n\t"
#define RW_SUM4_ROW0(s, r, t, a)                         \
    "vpbroadcastd 4*" #s "(%[x" #r "]), %%ymm" #t "\n\t" \
    "vpmaddubsw %%ymm" #t ", %%ymm0, %%ymm" #a "\n\t"
#define RW_SUM4_ROW(s, r, t, a)                          \
    "vpbroadcastd 4*" #s "(%[x" #r "]), %%ymm" #t "\n\t" \
    "vpmaddubsw %%ymm" #t ", %%ymm0, %%ymm" #t "\n\t"    \
    "vpaddw %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n\t"
#define RW_SUM4_FIRST(s) \
    RW_SUM4_W(s) RW_SUM4_ROW0(s, 0, 1, 5) RW_SUM4_ROW0(s, 1, 2, 6) RW_SUM4_ROW0(s, 2, 3, 7) RW_SUM4_ROW0(s, 3, 4, 8)
#define RW_SUM4_NEXT(s) \
    RW_SUM4_W(s) RW_SUM4_ROW(s, 0, 1, 5) RW_SUM4_ROW(s, 1, 2, 6) RW_SUM4_ROW(s, 2, 3, 7) RW_SUM4_ROW(s, 3, 4, 8)
#define RW_SUM4_SCALE_ROW(r, a)                      \
    "vpmaddwd (%[sc]), %%ymm" #a ", %%ymm" #a "\n\t" \
    "vpaddd %%ymm" #a ", %[is" #r "], %[is" #r "]\n\t"
#define RW_SUM4_SCALE RW_SUM4_SCALE_ROW(0, 5) RW_SUM4_SCALE_ROW(1, 6) RW_SUM4_SCALE_ROW(2, 7) RW_SUM4_SCALE_ROW(3, 8)
#define RW_SUM4_OPERANDS                                                                           \
    : [is0] "+x"(is[0]), [is1] "+x"(is[1]), [is2] "+x"(is[2]), [is3] "+x"(is[3])                         \
    : [q] "r"(q), [sc] "r"(sc), [x0] "r"(xq[0]), [x1] "r"(xq[1]), [x2] "r"(xq[2]), [x3] "r"(xq[3])        \
    : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "memory"

static inline __attribute__((always_inline)) void
rw_avx2_sum4(const void *q, const int16_t *sc, const int8_t *const xq[4], __m256i is[4], const int halves) {
    if (halves)
        __asm__(RW_SUM4_FIRST(0) RW_SUM4_NEXT(1) RW_SUM4_NEXT(2) RW_SUM4_NEXT(3) RW_SUM4_SCALE RW_SUM4_FIRST(4)
                    RW_SUM4_NEXT(5) RW_SUM4_NEXT(6) RW_SUM4_NEXT(7) RW_SUM4_SCALE RW_SUM4_OPERANDS);
    else
        __asm__(RW_SUM4_FIRST(0) RW_SUM4_NEXT(1) RW_SUM4_NEXT(2) RW_SUM4_NEXT(3) RW_SUM4_NEXT(4) RW_SUM4_NEXT(5)
                    RW_SUM4_NEXT(6) RW_SUM4_NEXT(7) RW_SUM4_SCALE RW_SUM4_OPERANDS);
}

#endif
