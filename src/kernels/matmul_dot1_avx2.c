/* matmul_dot1_avx2.c - one activation row against many weight rows on AVX2
 * (decode): Q4_K, Q5_K, Q6_K.
 *
 * With one activation row the products stream the weights once, and the
 * work per weight byte decides whether a core keeps up with memory. A
 * super-block's exact integers (I, and M: the mins or the -32 offset
 * against the activation's bsums) reduce from eight 32-bit lanes to one
 * number each, and the float step acc + ((d*dx)*I - (dmin*dx)*M) (Q4_K,
 * Q5_K) or acc + (d*dx)*(I - M) (Q6_K) of matmul_ref.c follows. Done one
 * weight row at a time, the reduction and the scalar step cost as much as
 * a fifth of the products; here four weight rows go together: one hadd
 * tree reduces the eight vectors of four rows to [I0..I3] and [M0..M3],
 * and the float step runs as one 4-lane step, lane r computing row r's
 * IEEE operations in the reference's order (ISO C: not contracted), so
 * every output is bitwise the one-row tile's whatever the row count. The
 * activation's quants are loaded once for the four rows.
 *
 * The sums of products: vpmaddubsw (weights 0..63 unsigned times the
 * activation's signed bytes, pairs into 16 bits, below 2^15) then
 * vpmaddwd with the sub-block scale; where the CPU has AVX-VNNI (and
 * rw_matmul_set_avx_vnni did not turn it off), vpdpwssd does the vpmaddwd
 * and the add in one instruction. Both are exact: the same bits.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/matmul_avx2_int.h"
#include "kernels/quant_int.h"

#define INLINE static inline __attribute__((always_inline))

/* acc + (pairs . s) in 32-bit lanes: vpmaddwd and vpaddd, or AVX-VNNI's
 * vpdpwssd (VEX form, spelt in asm: the ISA flags of the tier's files do
 * not include AVX-VNNI). */
INLINE __m256i madd_acc(__m256i acc, __m256i pairs, __m256i s, const int VNNI) {
    if (!VNNI) return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, s));
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(pairs), "x"(s));
    return acc;
}

/* 16-bit lane k of each half of v, in every lane of that half. */
INLINE __m256i bcast16(__m256i v, int k) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(0x0100 + 0x0202 * k)));
}

/* [I0 I1 I2 I3] and [M0 M1 M2 M3] from the eight-lane sums of four rows:
 * hadd(is, ms) per row, then two rows per hadd, the halves added. */
INLINE void reduce4(const __m256i is[4], const __m256i ms[4], __m128i *I, __m128i *M) {
    __m256i a[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) a[r] = _mm256_hadd_epi32(is[r], ms[r]);
    const __m256i c01 = _mm256_hadd_epi32(a[0], a[1]), c23 = _mm256_hadd_epi32(a[2], a[3]);
    const __m128 im01 = _mm_castsi128_ps(_mm_add_epi32(_mm256_castsi256_si128(c01), _mm256_extracti128_si256(c01, 1)));
    const __m128 im23 = _mm_castsi128_ps(_mm_add_epi32(_mm256_castsi256_si128(c23), _mm256_extracti128_si256(c23, 1)));
    *I = _mm_castps_si128(_mm_shuffle_ps(im01, im23, _MM_SHUFFLE(2, 0, 2, 0)));
    *M = _mm_castps_si128(_mm_shuffle_ps(im01, im23, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* The eight 6-bit scales and mins of a Q4_K / Q5_K super-block as bytes
 * (sub-blocks 0-3: the low 6 bits of scale bytes 0-3 and 4-7; 4-7: the
 * nibbles of bytes 8-11 under the top two bits of bytes 0-3 and 4-7). */
INLINE void k4_scales_mins(const uint8_t s[12], uint64_t *sc, uint64_t *mn) {
    uint32_t a0, a1, a2;
    memcpy(&a0, s, 4);
    memcpy(&a1, s + 4, 4);
    memcpy(&a2, s + 8, 4);
    const uint32_t m6 = 0x3F3F3F3Fu, m4 = 0x0F0F0F0Fu, m2 = 0x03030303u;
    *sc = (a0 & m6) | (uint64_t)((a2 & m4) | ((a0 >> 6) & m2) << 4) << 32;
    *mn = (a1 & m6) | (uint64_t)(((a2 >> 4) & m4) | ((a1 >> 6) & m2) << 4) << 32;
}

/* The integer lanes of super-block b (a Q4_K or, with FIVE, a Q5_K block:
 * the same fields, Q5_K's qh between scales and qs) against the activation
 * quants xq: isum
 * (scale . products) and msum (mins . bsums). */
INLINE void k45_lanes(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, const int8_t *xq,
                      const __m256i bsums, const int FIVE, const int VNNI, __m256i *is, __m256i *ms) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    uint64_t sc, mn;
    k4_scales_mins(scales, &sc, &mn);
    const __m256i scv = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn));
    const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    const __m256i hv = FIVE ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    __m256i isum = _mm256_setzero_si256();
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (FIVE) { /* bit j of qh[l]: element 32j + l's fifth bit */
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 2 * c), one), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 2 * c + 1), one), 4));
        }
        isum = madd_acc(isum, _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(xq + 64 * c))),
                        bcast16(scv, 2 * c), VNNI);
        isum = madd_acc(isum, _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(xq + 64 * c + 32))),
                        bcast16(scv, 2 * c + 1), VNNI);
    }
    *is = isum;
    *ms = _mm256_madd_epi16(mins, bsums);
}

/* R (1..4) rows from w (stride ws) against the activation row x; out[r]. */
INLINE void k45_rows(int64_t n, const uint8_t *w, size_t ws, const rw_block_q8_K *x, float *out, const int R,
                     const int FIVE, const int VNNI) {
    const size_t bs = FIVE ? sizeof(rw_block_q5_K) : sizeof(rw_block_q4_K);
    __m128 acc = _mm_setzero_ps();
    for (int64_t sb = 0; sb < n / 256; sb++) {
        const rw_block_q8_K *xb = x + sb;
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)xb->bsums);
        __m256i is[4], ms[4];
        uint32_t dd[4]; /* d and dmin of each row, as f16 pairs */
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            if (r >= R) {
                is[r] = ms[r] = _mm256_setzero_si256();
                dd[r] = 0;
                continue;
            }
            const uint8_t *b = w + (size_t)r * ws + (size_t)sb * bs;
            if (FIVE) {
                const rw_block_q5_K *q = (const rw_block_q5_K *)b;
                k45_lanes(q->scales, q->qs, q->qh, xb->qs, bsums, 1, VNNI, &is[r], &ms[r]);
            } else {
                const rw_block_q4_K *q = (const rw_block_q4_K *)b;
                k45_lanes(q->scales, q->qs, NULL, xb->qs, bsums, 0, VNNI, &is[r], &ms[r]);
            }
            memcpy(&dd[r], b, 4); /* d, dmin: the block's first two f16 */
        }
        __m128i I, M;
        reduce4(is, ms, &I, &M);
        const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dd)); /* [d0 m0 d1 m1 | d2 m2 d3 m3] */
        const __m128 lo = _mm256_castps256_ps128(dm), hi = _mm256_extractf128_ps(dm, 1);
        const __m128 d = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)),
                     dmin = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
        const __m128 dx = _mm_set1_ps(xb->d);
        acc = _mm_add_ps(acc, _mm_sub_ps(_mm_mul_ps(_mm_mul_ps(d, dx), _mm_cvtepi32_ps(I)),
                                         _mm_mul_ps(_mm_mul_ps(dmin, dx), _mm_cvtepi32_ps(M))));
    }
    float a[4];
    _mm_storeu_ps(a, acc);
    for (int r = 0; r < R; r++) out[r] = a[r];
}

/* The integer lanes of a Q6_K super-block: isum (scale . products of the
 * unsigned 0..63 values) and msum (32 * scale . bsums: the -32). */
INLINE void k6_lanes(const rw_block_q6_K *b, const int8_t *xq, const __m256i bsums, const int VNNI, __m256i *is,
                     __m256i *ms) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}; /* two chains: the sums are exact */
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        /* scales 8h .. 8h+7 in both halves: chunk k takes 2k (low half) and 2k + 1 */
        const __m256i sch = h ? _mm256_permute4x64_epi64(sc16, 0xEE) : _mm256_permute4x64_epi64(sc16, 0x44);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const __m256i ql = k % 2 ? ql1 : ql0;
            const __m256i lo = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), m4);
            /* bits 2k, 2k + 1 of each qh byte as bits 4, 5 (16-bit shifts: the
             * bits that cross into a byte are masked off) */
            const __m256i hq = k == 0   ? _mm256_slli_epi16(qh, 4)
                               : k == 1 ? _mm256_slli_epi16(qh, 2)
                               : k == 2 ? qh
                                        : _mm256_srli_epi16(qh, 2);
            const __m256i s =
                _mm256_shuffle_epi8(sch, _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * k + 1))),
                                                          _mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * k)))));
            const __m256i x = _mm256_loadu_si256((const __m256i *)(xq + 128 * h + 32 * k));
            isum[k % 2] =
                madd_acc(isum[k % 2], _mm256_maddubs_epi16(_mm256_or_si256(lo, _mm256_and_si256(hq, m2)), x), s, VNNI);
        }
    }
    *is = _mm256_add_epi32(isum[0], isum[1]);
    *ms = _mm256_madd_epi16(_mm256_slli_epi16(sc16, 5), bsums);
}

INLINE void k6_rows(int64_t n, const uint8_t *w, size_t ws, const rw_block_q8_K *x, float *out, const int R,
                    const int VNNI) {
    __m128 acc = _mm_setzero_ps();
    for (int64_t sb = 0; sb < n / 256; sb++) {
        const rw_block_q8_K *xb = x + sb;
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)xb->bsums);
        __m256i is[4], ms[4];
        uint16_t dh[8] = {0};
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            if (r >= R) {
                is[r] = ms[r] = _mm256_setzero_si256();
                continue;
            }
            const rw_block_q6_K *b = (const rw_block_q6_K *)(w + (size_t)r * ws) + sb;
            k6_lanes(b, xb->qs, bsums, VNNI, &is[r], &ms[r]);
            dh[r] = b->d;
        }
        __m128i I, M;
        reduce4(is, ms, &I, &M);
        const __m128 d = _mm_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
        acc = _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(d, _mm_set1_ps(xb->d)), _mm_cvtepi32_ps(_mm_sub_epi32(I, M))));
    }
    float a[4];
    _mm_storeu_ps(a, acc);
    for (int r = 0; r < R; r++) out[r] = a[r];
}

/* nw rows, four at a time, the last one to three as their own call (the
 * same arithmetic per lane). */
#define ROWS_DISPATCH(CALL)                  \
    do {                                     \
        int i = 0;                           \
        for (; i + 4 <= nw; i += 4) CALL(4); \
        switch (nw - i) {                    \
        case 3: CALL(3); break;              \
        case 2: CALL(2); break;              \
        case 1: CALL(1); break;              \
        default: break;                      \
        }                                    \
    } while (0)

static void dot1_q4_K_plain(int64_t n, const uint8_t *w, size_t ws, int nw, const rw_block_q8_K *x, float *out) {
#define C(R) k45_rows(n, w + (size_t)i * ws, ws, x, out + i, R, 0, 0)
    ROWS_DISPATCH(C);
#undef C
}
static void dot1_q4_K_vnni(int64_t n, const uint8_t *w, size_t ws, int nw, const rw_block_q8_K *x, float *out) {
#define C(R) k45_rows(n, w + (size_t)i * ws, ws, x, out + i, R, 0, 1)
    ROWS_DISPATCH(C);
#undef C
}
static void dot1_q5_K_plain(int64_t n, const uint8_t *w, size_t ws, int nw, const rw_block_q8_K *x, float *out) {
#define C(R) k45_rows(n, w + (size_t)i * ws, ws, x, out + i, R, 1, 0)
    ROWS_DISPATCH(C);
#undef C
}
static void dot1_q5_K_vnni(int64_t n, const uint8_t *w, size_t ws, int nw, const rw_block_q8_K *x, float *out) {
#define C(R) k45_rows(n, w + (size_t)i * ws, ws, x, out + i, R, 1, 1)
    ROWS_DISPATCH(C);
#undef C
}
static void dot1_q6_K_plain(int64_t n, const uint8_t *w, size_t ws, int nw, const rw_block_q8_K *x, float *out) {
#define C(R) k6_rows(n, w + (size_t)i * ws, ws, x, out + i, R, 0)
    ROWS_DISPATCH(C);
#undef C
}
static void dot1_q6_K_vnni(int64_t n, const uint8_t *w, size_t ws, int nw, const rw_block_q8_K *x, float *out) {
#define C(R) k6_rows(n, w + (size_t)i * ws, ws, x, out + i, R, 1)
    ROWS_DISPATCH(C);
#undef C
}

void rw_avx2_dot1_q4_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, float *out) {
    if (rw_avx2_vnni()) dot1_q4_K_vnni(n, w, ws, nw, (const rw_block_q8_K *)xq, out);
    else dot1_q4_K_plain(n, w, ws, nw, (const rw_block_q8_K *)xq, out);
}
void rw_avx2_dot1_q5_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, float *out) {
    if (rw_avx2_vnni()) dot1_q5_K_vnni(n, w, ws, nw, (const rw_block_q8_K *)xq, out);
    else dot1_q5_K_plain(n, w, ws, nw, (const rw_block_q8_K *)xq, out);
}
void rw_avx2_dot1_q6_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, float *out) {
    if (rw_avx2_vnni()) dot1_q6_K_vnni(n, w, ws, nw, (const rw_block_q8_K *)xq, out);
    else dot1_q6_K_plain(n, w, ws, nw, (const rw_block_q8_K *)xq, out);
}

/* IQ4_XS with AVX-VNNI: the AVX-512 tier's 16 integer lanes (values
 * biased by +128, so unsigned: lane l of chunk k sums (v + 128) * x over
 * elements 32k + 4l .. 32k + 4l + 3 times the chunk's scale; lanes 0-7 the
 * even chunks, 8-15 the odd ones) as vpdpbusd of the biased values (a
 * table lookup) times the scale (vpmulld), exact; then its float steps,
 * fma of each half, the 128 * scale . bsums min term off the low half,
 * reduce16. Without AVX-VNNI matmul_avx2.c's tile serves (vpmaddubsw
 * would saturate on the biased values). */
static const uint8_t iq4_biased[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};

INLINE float hsum8_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE __m256i dpbusd0(__m256i u, const int8_t *x) {
    __m256i acc = _mm256_setzero_si256();
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "m"(*(const __m256i *)x));
    return acc;
}

static float iq4_xs_dot_vnni(int64_t n, const uint8_t *w, const rw_block_q8_K *x) {
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4_biased));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < n / 256; sb++) {
        const rw_block_iq4_xs *b = (const rw_block_iq4_xs *)w + sb;
        const rw_block_q8_K *xb = x + sb;
        /* scale j: bits 4j.. of scales_l (4 bits) under bits 2j.. of scales_h (2 bits), minus 32 */
        uint32_t sl;
        memcpy(&sl, b->scales_l, 4);
        const __m256i shl =
            _mm256_srlv_epi32(_mm256_set1_epi32((int)sl), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
        const __m256i shh =
            _mm256_srlv_epi32(_mm256_set1_epi32(b->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
        const __m256i sc =
            _mm256_sub_epi32(_mm256_or_si256(_mm256_and_si256(shl, _mm256_set1_epi32(0x0F)),
                                             _mm256_slli_epi32(_mm256_and_si256(shh, _mm256_set1_epi32(3)), 4)),
                             _mm256_set1_epi32(32));
        __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            /* sub-blocks 2c, 2c + 1: 16 bytes each, low nibbles first */
            const __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
            const __m256i l4 = _mm256_and_si256(v, m4), h4 = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            const __m256i u0 = _mm256_shuffle_epi8(tab, _mm256_permute2x128_si256(l4, h4, 0x20));
            const __m256i u1 = _mm256_shuffle_epi8(tab, _mm256_permute2x128_si256(l4, h4, 0x31));
            lo = _mm256_add_epi32(lo, _mm256_mullo_epi32(dpbusd0(u0, xb->qs + 64 * c),
                                                         _mm256_permutevar8x32_epi32(sc, _mm256_set1_epi32(2 * c))));
            hi =
                _mm256_add_epi32(hi, _mm256_mullo_epi32(dpbusd0(u1, xb->qs + 64 * c + 32),
                                                        _mm256_permutevar8x32_epi32(sc, _mm256_set1_epi32(2 * c + 1))));
        }
        /* 128 * scale_j . (bsums 2j + 2j + 1): the same integer as the
         * pairwise vpmaddwd of the min lanes */
        const __m256i msum =
            _mm256_mullo_epi32(_mm256_slli_epi32(sc, 7),
                               _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsums), _mm256_set1_epi16(1)));
        const __m256 dd = _mm256_set1_ps(_cvtsh_ss(b->d) * xb->d);
        acc0 = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), dd, _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), dd, acc0));
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), dd, acc1);
    }
    return hsum8_ps(_mm256_add_ps(acc1, acc0)); /* reduce16 */
}

void rw_avx2_dot1_iq4_xs_vnni(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, float *out) {
    for (int i = 0; i < nw; i++) out[i] = iq4_xs_dot_vnni(n, w + (size_t)i * ws, (const rw_block_q8_K *)xq);
}
