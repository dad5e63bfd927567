/* matmul_kquant_avx512.c - the K-quants (Q2_K .. Q6_K, IQ4_XS) in the
 * AVX-512 tier: Q8_K activations (matmul_avx512_int.h) and the tiles, in
 * our order and in ggml's (the file head of matmul_avx512.c describes the
 * tier; the panel forms are matmul_kpanel_avx512.c's).
 */
#include "kernels/matmul_avx512_int.h"

/* ==== K-quants with Q8_K activations ===================================== */

/* 16 int16 mins [m0 m0 m1 m1 ... m7 m7] from 8 values in the low 8 of v16 (int16). */
INLINE __m256i dup_pairs16(__m256i v16) {
    const __m256i idx = _mm256_set_epi16(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    return _mm256_permutexvar_epi16(idx, v16);
}

/* Q2_K / Q3_K low bits: chunk z = 2h + ss holds 2-bit fields 2*(2ss) and
 * 2*(2ss+1) of qs[32h .. 32h+32). */
INLINE __m512i two_bits(const uint8_t *qs32, int ss) {
    __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qs32));
    __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16((short)(4 * ss)), _mm256_set1_epi16((short)(4 * ss + 2)), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(v, sh), _mm512_set1_epi8(0x03));
}

/* ---- K-quants whose lane sums fit in 16 bits (all but IQ4_XS) ----------
 * Per super-block and pair: p_k = vpdpbusd(u_k, x_k) for the 4 chunks; then
 * isum = madd(packs(p0, p1), s[0]) + madd(packs(p2, p3), s[1]), where
 * packs interleaves 4 lanes of each input per 128 bits and s[] holds the
 * matching 16-bit scales (a lane's 4 products share one scale, so madd's
 * pairwise sums stay within one sub-block). |p| <= 4*63*127 < 2^15. */
typedef struct {
    __m512i u[4];
    __m512i s[2]; /* 16-bit scales in packs order */
    __m256i mins; /* 16-bit min (or bias*scale) per 16-group */
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

/* Q6_K's 256 unsigned quants (0..63) in element order, 64 a register:
 * register 2h + kk holds nibble kk of ql[64h .. 64h+64) with bits 2kk,
 * 2kk+1 (first 32) and 2kk+2, 2kk+3 (next 32) of qh[32h .. 32h+32) moved
 * to bits 4-5 (16-bit shifts: what crosses a byte lands outside 0x30). */
INLINE void q6_K_quants(const rw_block_q6_K *b, __m512i u[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i sl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i sr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        const __m512i ql = _mm512_loadu_si512(b->ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)));
        /* (lo & 0x0F) | hi */
        u[2 * h] = _mm512_ternarylogic_epi32(ql, _mm512_and_si512(_mm512_sllv_epi16(qh, sl), m30), m4, 0xEC);
        u[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4),
                                                 _mm512_and_si512(_mm512_srlv_epi16(qh, sr), m30), m4, 0xEC);
    }
}

/* Q5_K's fifth bits onto nibbles in the permuted order (nibbles_perm):
 * element 32j + l has bit j of qh[l]; register k holds sub-blocks (a | b). */
INLINE void q5_K_high(const uint8_t qh32[32], __m512i u[4]) {
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh32));
    static const int sub[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
        __m512i bit =
            _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << sub[k][0])), _mm256_set1_epi8((char)(1 << sub[k][1])), 1);
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

/* Prefetches the 192 bytes PF_DIST past the super-block after sb of a row
 * of blk-byte super-blocks (both K-quant tiles do it per weight row). */
INLINE void kq_prefetch(const uint8_t *row, int64_t sb, size_t blk) {
    const char *pf = (const char *)row + (size_t)(sb + 1) * blk + PF_DIST;
    _mm_prefetch(pf, _MM_HINT_T0);
    _mm_prefetch(pf + 64, _MM_HINT_T0);
    _mm_prefetch(pf + 128, _MM_HINT_T0);
}

/* The 16 integer lanes of one (weight row, activation row) super-block:
 * p_k = vpdpbusd(u_k, x_k), then isum = madd(packs(p0, p1), s[0]) +
 * madd(packs(p2, p3), s[1]) (the w_superm comment above). */
INLINE __m512i madd_lanes(const w_superm *w, const x_super *x) {
    __m512i p[4];
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) p[k] =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), w->u[k], _mm512_load_si512(x->qs + 64 * k));
    return _mm512_add_epi32(_mm512_madd_epi16(_mm512_packs_epi32(p[0], p[1]), w->s[0]),
                            _mm512_madd_epi16(_mm512_packs_epi32(p[2], p[3]), w->s[1]));
}

#define KQUANT_MADD_TILE(name, UNPACK)                                                                            \
    INLINE void name##_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs,   \
                            const int nx, float *out) {                                                           \
        __m512 acc[NW][NX];                                                                                       \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) \
            acc[i][j] = _mm512_setzero_ps();                                                                      \
        for (int64_t sb = 0; sb < n / 256; sb++) {                                                                \
            w_superm wsb[NW];                                                                                     \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                                \
                kq_prefetch(w + i * ws, sb, sizeof(rw_block_##name));                                             \
                UNPACK(w + i * ws, sb, &wsb[i]);                                                                  \
            }                                                                                                     \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                                \
                const x_super *xsb = (const x_super *)(xq + j * xs) + sb;                                         \
                __m256i bs = _mm256_load_si256((const __m256i *)xsb->bsums);                                      \
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                            \
                    const __m512i isum = madd_lanes(&wsb[i], xsb);                                                \
                    __m512i msum = _mm512_zextsi256_si512(_mm256_madd_epi16(wsb[i].mins, bs));                    \
                    __m512 dd = _mm512_set1_ps(wsb[i].d * xsb->d);                                                \
                    __m512 dm = _mm512_set1_ps(wsb[i].dmin * xsb->d);                                             \
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dd, acc[i][j]);                         \
                    acc[i][j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), dm, acc[i][j]);                        \
                }                                                                                                 \
            }                                                                                                     \
        }                                                                                                         \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) \
            out[j * nw + i] = _mm512_reduce_add_ps(acc[i][j]);                                                    \
    }

/* ---- Q4_K / Q5_K in the reference's order ------------------------------
 * Per (weight row, activation row) super-block the exact integers isum
 * (scale times the sub-block's dot, summed) and msum (min times the
 * sub-block's activation sum), then matmul_ref.c's float step
 *   sum = sum + ((d*dx)*(float)isum - (dmin*dx)*(float)msum)
 * in scalar code (ISO C: no contraction), so the tile is bitwise the
 * reference, and so is the panel form (matmul_kpanel_avx512.c), which
 * gets the same integers another way. Integer sums are exact in any order,
 * so the lanes may hold any split of the products. */
INLINE void kx_hsum2(__m512i isum, __m256i msum, int32_t *I, int32_t *M) {
    const __m256i i8 = _mm256_add_epi32(_mm512_castsi512_si256(isum), _mm512_extracti64x4_epi64(isum, 1));
    const __m256i h = _mm256_hadd_epi32(i8, msum); /* per 128 bits: i i m m */
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q = _mm_hadd_epi32(q, q); /* I M I M */
    *I = _mm_cvtsi128_si32(q);
    *M = _mm_extract_epi32(q, 1);
}

/* Q6_K: isum = I - M (M: 32 * scale . bsums, the -32 of every quant), then
 * the reference's sum = sum + (d*dx)*(float)isum; Q4_K / Q5_K as above. */
#define KX_STEP_MINS(acc, w, dx, I, M)   ((acc) + (((w).d * (dx)) * (float)(I) - ((w).dmin * (dx)) * (float)(M)))
#define KX_STEP_OFFSET(acc, w, dx, I, M) ((acc) + ((w).d * (dx)) * (float)((I) - (M)))

#define KQUANT_EXACT_TILE(name, UNPACK, STEP)                                                                     \
    INLINE void name##_impl1(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs,  \
                             const int nx, float *out) {                                                          \
        float acc[NW][NX];                                                                                        \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) \
            acc[i][j] = 0.0f;                                                                                     \
        for (int64_t sb = 0; sb < n / 256; sb++) {                                                                \
            w_superm wsb[NW];                                                                                     \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                                \
                kq_prefetch(w + i * ws, sb, sizeof(rw_block_##name));                                             \
                UNPACK(w + i * ws, sb, &wsb[i]);                                                                  \
            }                                                                                                     \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                                \
                const x_super *xsb = (const x_super *)(xq + j * xs) + sb;                                         \
                const __m256i bs = _mm256_load_si256((const __m256i *)xsb->bsums);                                \
                const float dx = xsb->d;                                                                          \
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                            \
                    const __m512i isum = madd_lanes(&wsb[i], xsb);                                                \
                    int32_t I, M;                                                                                 \
                    kx_hsum2(isum, _mm256_madd_epi16(wsb[i].mins, bs), &I, &M);                                   \
                    acc[i][j] = STEP(acc[i][j], wsb[i], dx, I, M);                                                \
                }                                                                                                 \
            }                                                                                                     \
        }                                                                                                         \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) \
            out[j * nw + i] = acc[i][j];                                                                          \
    }

/* With several activation rows the pairs' integer sums are folded together
 * and the float step is one vector step for all of them: pair L = 4j + i
 * (weight row i, activation row j) is lane L. kx_fold_pairs adds the lanes
 * of each v[L] in a tree of shuffles: levels 1 and 2 add the 4 lanes of
 * each 128 bits, level 3 adds 128-bit lanes 0 + 1 and 2 + 3, so with v[L]
 * = [isum folded to 8 lanes | msum] it returns I in lanes L of *I and M in
 * *M; with v[L] = the 16 lanes of isum - msum (Q6_K) it adds the two into
 * *I. The integers are the one-pair tile's (exact in any order), and the
 * float step per lane is the same operations in the same order. */
INLINE void kx_fold_pairs(const __m512i v[16], __m512i *I, __m512i *M, const int HALVES) {
    __m512i t[8], u[4], w[2];
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) t[k] =
        _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) u[k] =
        _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * k], t[2 * k + 1]), _mm512_unpackhi_epi64(t[2 * k], t[2 * k + 1]));
    _Pragma("GCC unroll 2") for (int k = 0; k < 2; k++) w[k] =
        _mm512_add_epi32(_mm512_shuffle_i32x4(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_i32x4(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i lo = _mm512_shuffle_i32x4(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i hi = _mm512_shuffle_i32x4(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1));
    if (HALVES) {
        *I = lo;
        *M = hi;
    } else {
        *I = _mm512_add_epi32(lo, hi);
    }
}

/* The tile for 2 to NW weight rows and 2 to NX activation rows: Q6 0 for Q4_K / Q5_K (the
 * reference's sum + ((d*dx)*(float)isum - (dmin*dx)*(float)msum)), 1 for
 * Q6_K (sum + (d*dx)*(float)(isum - msum)). */
#define KQUANT_EXACT_TILE_V(name, UNPACK, Q6)                                                                        \
    INLINE void name##_implv(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs,     \
                             const int nx, float *out) {                                                             \
        __m512 acc = _mm512_setzero_ps();                                                                            \
        for (int64_t sb = 0; sb < n / 256; sb++) {                                                                   \
            w_superm wsb[NW];                                                                                        \
            float d[NW] = {0}, dm[NW] = {0}, dx[NX] = {0};                                                           \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                                   \
                kq_prefetch(w + i * ws, sb, sizeof(rw_block_##name));                                                \
                UNPACK(w + i * ws, sb, &wsb[i]);                                                                     \
            }                                                                                                        \
            __m512i v[16];                                                                                           \
            _Pragma("GCC unroll 4") for (int j = 0; j < NX; j++) {                                                   \
                const x_super *xsb = (const x_super *)(xq + j * xs) + sb;                                            \
                const __m256i bs = j < nx ? _mm256_load_si256((const __m256i *)xsb->bsums) : _mm256_setzero_si256(); \
                _Pragma("GCC unroll 4") for (int i = 0; i < NW; i++) {                                               \
                    if (i >= nw || j >= nx) {                                                                        \
                        v[4 * j + i] = _mm512_setzero_si512();                                                       \
                        continue;                                                                                    \
                    }                                                                                                \
                    const __m512i isum = madd_lanes(&wsb[i], xsb);                                                   \
                    const __m256i msum = _mm256_madd_epi16(wsb[i].mins, bs);                                         \
                    if (Q6) {                                                                                        \
                        v[4 * j + i] = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(msum));                         \
                    } else {                                                                                         \
                        const __m256i i8 =                                                                           \
                            _mm256_add_epi32(_mm512_castsi512_si256(isum), _mm512_extracti64x4_epi64(isum, 1));      \
                        v[4 * j + i] = _mm512_inserti64x4(_mm512_castsi256_si512(i8), msum, 1);                      \
                    }                                                                                                \
                    d[i] = wsb[i].d;                                                                                 \
                    dm[i] = wsb[i].dmin;                                                                             \
                    dx[j] = xsb->d;                                                                                  \
                }                                                                                                    \
            }                                                                                                        \
            __m512i I, M;                                                                                            \
            kx_fold_pairs(v, &I, &M, !Q6);                                                                           \
            /* lane 4j + i: d and dmin of weight row i, dx of activation row j (built in registers) */               \
            const __m512 vdx =                                                                                       \
                _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),             \
                                      _mm512_castps128_ps512(_mm_setr_ps(dx[0], dx[1], dx[2], dx[3])));              \
            const __m512 vd = _mm512_broadcast_f32x4(_mm_setr_ps(d[0], d[1], d[2], d[3]));                           \
            const __m512 vdm = _mm512_broadcast_f32x4(_mm_setr_ps(dm[0], dm[1], dm[2], dm[3]));                      \
            const __m512 t = _mm512_mul_ps(_mm512_mul_ps(vd, vdx), _mm512_cvtepi32_ps(I));                           \
            if (Q6) {                                                                                                \
                acc = _mm512_add_ps(acc, t);                                                                         \
            } else {                                                                                                 \
                const __m512 u = _mm512_mul_ps(_mm512_mul_ps(vdm, vdx), _mm512_cvtepi32_ps(M));                      \
                acc = _mm512_add_ps(acc, _mm512_sub_ps(t, u));                                                       \
            }                                                                                                        \
        }                                                                                                            \
        float l[16];                                                                                                 \
        _mm512_storeu_ps(l, acc);                                                                                    \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)    \
            out[j * nw + i] = l[4 * j + i];                                                                          \
    }                                                                                                                \
    INLINE void name##_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs,      \
                            const int nx, float *out) {                                                              \
        if (nx == 1 || nw == 1) name##_impl1(n, w, ws, nw, xq, xs, nx, out); /* few pairs: the scalar step */        \
        else name##_implv(n, w, ws, nw, xq, xs, nx, out);                                                            \
    }

KQUANT_MADD_TILE(q2_K, unpackm_q2_K)
KQUANT_MADD_TILE(q3_K, unpackm_q3_K)
KQUANT_EXACT_TILE(q4_K, unpackm_q4_K, KX_STEP_MINS)
KQUANT_EXACT_TILE(q5_K, unpackm_q5_K, KX_STEP_MINS)
KQUANT_EXACT_TILE(q6_K, unpackm_q6_K, KX_STEP_OFFSET)
KQUANT_EXACT_TILE_V(q4_K, unpackm_q4_K, 0)
KQUANT_EXACT_TILE_V(q5_K, unpackm_q5_K, 0)
KQUANT_EXACT_TILE_V(q6_K, unpackm_q6_K, 1)

/* ---- One activation row (decode): 16 weight rows a pass -----------------
 * The tile above, given one activation row, does one weight row at a time
 * and ends every super-block with a horizontal sum and a scalar float
 * step: those shuffles and that scalar chain, not the memory, set its
 * speed. Here 16 weight rows go side by side. Per super-block each row's
 * 16 integer lanes (madd_lanes' sums, with the activation super-block held
 * in registers for all 16 rows) go into one kx_fold_pairs tree that leaves
 * row i's I (and M) in lane i, and one vector float step does the 16 rows:
 * per lane the same IEEE operations in the same order as KX_STEP_MINS /
 * KX_STEP_OFFSET (ISO C: no contraction), so every output is bitwise the
 * one-row tile's and the reference's, whatever the row's place in a pass.
 * The scales of 4 rows are unpacked in one register (for Q4_K / Q5_K with
 * d and dmin, which come out of the same loads), and Q4_K / Q5_K's min
 * terms of the 16 rows are summed together (kr_mins16). */
enum { KR_ROWS = 16 };
/* Bytes ahead in each row's stream that a pass prefetches, about 7
 * super-blocks for Q4_K, 10 for Q6_K: measured on Zen 5, one thread
 * streaming from memory, Q4_K and Q5_K were as fast or faster at 1 KiB than
 * at 512 bytes or 2 KiB, Q6_K fastest at 2 KiB. Into L1 on Zen 5 (into L2
 * was slower there); into L2 on Zen 4 (rw_matmul_prefetch_l2), where 16
 * streams prefetched into its 32 KiB L1 ran at 8-10 GB/s and into L2 at
 * 14-18 (one thread; 2 threads 14 against 25 GB/s). */
#define KR_PF_DIST(T) ((T) == 6 ? 2048 : 1024)

/* Q4_K / Q5_K: M of 16 rows (lane r: sum_j m_j * (bs_2j + bs_2j+1) of
 * row r) from their unpacked scales sm[0..3] (kr_scales_mins4): the mins
 * of 16 rows regrouped so that register k holds (m_2k, m_2k+1) of every
 * row as two 16-bit words, times the activation's pair sums, 2 at a time. */
INLINE __m512i kr_mins16(const __m512i sm[4], __m256i bs) {
    /* 128-bit lane l: the 8 mins of rows l, 4 + l (a) and 8 + l, 12 + l (b) */
    const __m512i a = _mm512_unpackhi_epi64(sm[0], sm[1]), b = _mm512_unpackhi_epi64(sm[2], sm[3]);
    /* word j (j < 16) of q01: word 0 of row j's mins; word 16 + j: word 1; q23 words 2, 3 */
    static const int16_t i01[32] = {0, 8, 16, 24, 4, 12, 20, 28, 32, 40, 48, 56, 36, 44, 52, 60,
                                    1, 9, 17, 25, 5, 13, 21, 29, 33, 41, 49, 57, 37, 45, 53, 61};
    const __m512i idx = _mm512_loadu_si512(i01);
    const __m512i q01 = _mm512_permutex2var_epi16(a, idx, b);
    const __m512i q23 = _mm512_permutex2var_epi16(a, _mm512_add_epi16(idx, _mm512_set1_epi16(2)), b);
    /* the activation's pair sums bs_2j + bs_2j+1 (|.| < 2^15) as words, (j = 2k, 2k + 1) in 32-bit lane k */
    const __m256i ps = _mm256_madd_epi16(bs, _mm256_set1_epi16(1));
    const __m512i pw = _mm512_castsi256_si512(_mm256_packs_epi32(ps, ps)); /* lanes 0 1 . . 4 5 . . */
    __m512i m = _mm512_madd_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(q01)),
                                  _mm512_permutexvar_epi32(_mm512_set1_epi32(0), pw));
    m = _mm512_dpwssd_epi32(m, _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(q01, 1)),
                            _mm512_permutexvar_epi32(_mm512_set1_epi32(1), pw));
    m = _mm512_dpwssd_epi32(m, _mm512_cvtepu8_epi16(_mm512_castsi512_si256(q23)),
                            _mm512_permutexvar_epi32(_mm512_set1_epi32(4), pw));
    return _mm512_dpwssd_epi32(m, _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(q23, 1)),
                               _mm512_permutexvar_epi32(_mm512_set1_epi32(5), pw));
}

/* The 16 lanes of a row's super-block against activation quants xv
 * (madd_lanes with the activation in registers). */
INLINE __m512i kr_isum(const __m512i u[4], const __m512i xv[4], __m512i s0, __m512i s1) {
    __m512i p[4];
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) p[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[k], xv[k]);
    return _mm512_add_epi32(_mm512_madd_epi16(_mm512_packs_epi32(p[0], p[1]), s0),
                            _mm512_madd_epi16(_mm512_packs_epi32(p[2], p[3]), s1));
}

/* One pass over rows w .. w + (nr - 1) * ws (nr <= 16) for one activation
 * row x: T is 4, 5 or 6 (Q4_K, Q5_K, Q6_K). */
INLINE void kr_pass1(const int T, int64_t n, const uint8_t *w, size_t ws, const int nr, const int nn, const x_super *x,
                     float *out, const bool l2) {
    const size_t blk = T == 4 ? sizeof(rw_block_q4_K) : T == 5 ? sizeof(rw_block_q5_K) : sizeof(rw_block_q6_K);
    /* scale words of row 2k (+ 0) and 2k + 1 (+ 16) of a pair's 32 words: as svec_per32_perm / svec_per16 */
    static const int16_t i45[32] = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1,
                                    2, 2, 2, 2, 3, 3, 3, 3, 2, 2, 2, 2, 3, 3, 3, 3};
    static const int16_t i6[32] = {0, 0, 0, 0, 4, 4, 4, 4, 1, 1, 1, 1, 5, 5, 5, 5,
                                   2, 2, 2, 2, 6, 6, 6, 6, 3, 3, 3, 3, 7, 7, 7, 7};
    const __m512i is0 = _mm512_loadu_si512(T == 6 ? i6 : i45);
    const __m512i is1 = _mm512_add_epi16(is0, _mm512_set1_epi16(T == 6 ? 8 : 4));
    const __m512i odd = _mm512_set1_epi16(16);
    const __mmask16 live = (__mmask16)((1u << nr) - 1);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < n / 256; sb++, x++) {
        const uint8_t *p = w + (size_t)sb * blk;
        /* each row's stream KR_PF_DIST(T) ahead, going on into the row of the
         * next pass (nn rows: none past the call's rows, which may be
         * another thread's) */
        const size_t pfo = (size_t)(sb + 1) * blk + KR_PF_DIST(T);
        const uint8_t *pf = pfo < ws ? w + pfo : w + KR_ROWS * ws + (pfo - ws);
        const int npf = pfo < ws ? nr : nn;
        __m512i xv[4];
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) xv[k] = _mm512_load_si512(x->qs + 64 * k);
        const __m512i bs2 = _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i *)x->bsums));
        /* per 4 rows: Q6_K's 16 scales; Q4_K / Q5_K's d, dmin and scale bytes, then [sc0..7, m0..7] */
        __m512i h[4];
        _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) h[g] =
            kr_load4(p + (T == 6 ? offsetof(rw_block_q6_K, scales) : 0), ws, 4 * g, nr);
        const __m512i dd = T == 6 ? _mm512_setzero_si512() : kr_lanes(h, 0); /* d | dmin << 16 per row */
        if (T != 6) _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) h[g] = kr_scales_mins4(h[g]);
        const __m512i m16 = T == 6 ? _mm512_setzero_si512() : kr_mins16(h, _mm512_castsi512_si256(bs2));
        __m512i t[8], u4[4], w2[2];
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
            __m512i v[2];
            /* the pair's scales as words: rows 2k (words 0-15) and 2k + 1 (16-31) */
            const __m512i hv = h[k / 2];
            const __m512i sw =
                T == 6 ? _mm512_cvtepi8_epi16(k % 2 ? _mm512_extracti64x4_epi64(hv, 1) : _mm512_castsi512_si256(hv))
                       : _mm512_cvtepu8_epi16(k % 2 ? _mm512_extracti64x4_epi64(hv, 1) : _mm512_castsi512_si256(hv));
            /* Q6_K: lanes 0-7 row 2k's offset terms, 8-15 row 2k + 1's (32 * scale: the -32) */
            const __m512i msum = T == 6 ? _mm512_slli_epi32(_mm512_madd_epi16(sw, bs2), 5) : _mm512_setzero_si512();
            _Pragma("GCC unroll 2") for (int e = 0; e < 2; e++) {
                const int r = 2 * k + e;
                if (r >= nr) {
                    v[e] = _mm512_setzero_si512();
                    continue;
                }
                const uint8_t *b = p + (size_t)r * ws;
                if (r < npf)
                    _Pragma("GCC unroll 4") for (int l = 0; l < (int)(blk + 63) / 64; l++)
                        pf_weights((const char *)pf + (size_t)r * ws + 64 * l, l2);
                __m512i uq[4];
                if (T == 6) {
                    q6_K_quants((const rw_block_q6_K *)b, uq);
                } else {
                    nibbles_perm(b + (T == 4 ? offsetof(rw_block_q4_K, qs) : offsetof(rw_block_q5_K, qs)), uq);
                    if (T == 5) q5_K_high(b + offsetof(rw_block_q5_K, qh), uq);
                }
                const __m512i s0 = _mm512_permutexvar_epi16(e ? _mm512_add_epi16(is0, odd) : is0, sw);
                const __m512i s1 = _mm512_permutexvar_epi16(e ? _mm512_add_epi16(is1, odd) : is1, sw);
                const __m512i isum = kr_isum(uq, xv, s0, s1);
                /* Q6_K: isum - the row's offset lanes */
                v[e] = T == 6 ? _mm512_mask_sub_epi32(isum, e ? 0xFF00 : 0x00FF, isum, msum) : isum;
            }
            /* kx_fold_pairs, level by level as the pairs come */
            t[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
            if (k % 2)
                u4[k / 2] =
                    _mm512_add_epi32(_mm512_unpacklo_epi64(t[k - 1], t[k]), _mm512_unpackhi_epi64(t[k - 1], t[k]));
            if (k % 4 == 3)
                w2[k / 4] = _mm512_add_epi32(_mm512_shuffle_i32x4(u4[k / 2 - 1], u4[k / 2], _MM_SHUFFLE(2, 0, 2, 0)),
                                             _mm512_shuffle_i32x4(u4[k / 2 - 1], u4[k / 2], _MM_SHUFFLE(3, 1, 3, 1)));
        }
        const __m512i lo = _mm512_shuffle_i32x4(w2[0], w2[1], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512i hi = _mm512_shuffle_i32x4(w2[0], w2[1], _MM_SHUFFLE(3, 1, 3, 1));
        const __m512 vdx = _mm512_set1_ps(x->d);
        if (T == 6) {
            __m512i hd[4]; /* scales[2..15] and d */
            _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) hd[g] =
                kr_load4(p + offsetof(rw_block_q6_K, d) - 14, ws, 4 * g, nr);
            const __m512i dg = kr_lanes(hd, 3);
            const __m512 vd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dg, 16)));
            acc =
                _mm512_add_ps(acc, _mm512_mul_ps(_mm512_mul_ps(vd, vdx), _mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi))));
        } else {
            const __m512 vd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
            const __m512 vdm = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
            const __m512 tt = _mm512_mul_ps(_mm512_mul_ps(vd, vdx), _mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi)));
            const __m512 uu = _mm512_mul_ps(_mm512_mul_ps(vdm, vdx), _mm512_cvtepi32_ps(m16));
            acc = _mm512_add_ps(acc, _mm512_sub_ps(tt, uu));
        }
    }
    _mm512_mask_storeu_ps(out, live, acc);
}

/* The same pass for NXR (2 .. KR_NX) activation rows x0, x0 + xs bytes,
 * ...; row j's outputs go to out + j * os. The weights' unpacking (quants,
 * scales, d) is shared by the activation rows; each row then has its own
 * integer sums, fold and float step, kr_pass1's operations in its order, so
 * an output is bitwise the same whatever NXR and its place. (One row keeps
 * kr_pass1: this form with NXR 1 compiled to a slower loop, Q6_K one row in
 * L2 26 against 30 GB/s on Zen 4, Q4_K / Q5_K the same.) */
INLINE void kr_pass(const int T, const int NXR, int64_t n, const uint8_t *w, size_t ws, const int nr, const int nn,
                    const x_super *x0, size_t xs, float *out, size_t os, const bool l2) {
    const size_t blk = T == 4 ? sizeof(rw_block_q4_K) : T == 5 ? sizeof(rw_block_q5_K) : sizeof(rw_block_q6_K);
    /* scale words of row 2k (+ 0) and 2k + 1 (+ 16) of a pair's 32 words: as svec_per32_perm / svec_per16 */
    static const int16_t i45[32] = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1,
                                    2, 2, 2, 2, 3, 3, 3, 3, 2, 2, 2, 2, 3, 3, 3, 3};
    static const int16_t i6[32] = {0, 0, 0, 0, 4, 4, 4, 4, 1, 1, 1, 1, 5, 5, 5, 5,
                                   2, 2, 2, 2, 6, 6, 6, 6, 3, 3, 3, 3, 7, 7, 7, 7};
    const __m512i is0 = _mm512_loadu_si512(T == 6 ? i6 : i45);
    const __m512i is1 = _mm512_add_epi16(is0, _mm512_set1_epi16(T == 6 ? 8 : 4));
    const __m512i odd = _mm512_set1_epi16(16);
    const __mmask16 live = (__mmask16)((1u << nr) - 1);
    __m512 acc[KR_NX];
    _Pragma("GCC unroll 4") for (int j = 0; j < NXR; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < n / 256; sb++) {
        const uint8_t *p = w + (size_t)sb * blk;
        const x_super *x[KR_NX];
        _Pragma("GCC unroll 4") for (int j = 0; j < NXR; j++) x[j] =
            (const x_super *)((const uint8_t *)x0 + (size_t)j * xs) + sb;
        /* each row's stream KR_PF_DIST(T) ahead, going on into the row of the
         * next pass (nn rows: none past the call's rows, which may be
         * another thread's) */
        const size_t pfo = (size_t)(sb + 1) * blk + KR_PF_DIST(T);
        const uint8_t *pf = pfo < ws ? w + pfo : w + KR_ROWS * ws + (pfo - ws);
        const int npf = pfo < ws ? nr : nn;
        __m512i bs2[KR_NX];
        _Pragma("GCC unroll 4") for (int j = 0; j < NXR; j++) bs2[j] =
            _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i *)x[j]->bsums));
        /* per 4 rows: Q6_K's 16 scales; Q4_K / Q5_K's d, dmin and scale bytes, then [sc0..7, m0..7] */
        __m512i h[4];
        _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) h[g] =
            kr_load4(p + (T == 6 ? offsetof(rw_block_q6_K, scales) : 0), ws, 4 * g, nr);
        const __m512i dd = T == 6 ? _mm512_setzero_si512() : kr_lanes(h, 0); /* d | dmin << 16 per row */
        if (T != 6) _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) h[g] = kr_scales_mins4(h[g]);
        __m512i m16[KR_NX];
        _Pragma("GCC unroll 4") for (int j = 0; j < NXR; j++) m16[j] =
            T == 6 ? _mm512_setzero_si512() : kr_mins16(h, _mm512_castsi512_si256(bs2[j]));
        __m512i t[KR_NX][8], u4[KR_NX][4], w2[KR_NX][2];
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
            __m512i v[KR_NX][2];
            /* the pair's scales as words: rows 2k (words 0-15) and 2k + 1 (16-31) */
            const __m512i hv = h[k / 2];
            const __m512i sw =
                T == 6 ? _mm512_cvtepi8_epi16(k % 2 ? _mm512_extracti64x4_epi64(hv, 1) : _mm512_castsi512_si256(hv))
                       : _mm512_cvtepu8_epi16(k % 2 ? _mm512_extracti64x4_epi64(hv, 1) : _mm512_castsi512_si256(hv));
            /* Q6_K: lanes 0-7 row 2k's offset terms, 8-15 row 2k + 1's (32 * scale: the -32) */
            __m512i msum[KR_NX];
            _Pragma("GCC unroll 4") for (int j = 0; j < NXR; j++) msum[j] =
                T == 6 ? _mm512_slli_epi32(_mm512_madd_epi16(sw, bs2[j]), 5) : _mm512_setzero_si512();
            _Pragma("GCC unroll 2") for (int e = 0; e < 2; e++) {
                const int r = 2 * k + e;
                if (r >= nr) {
                    _Pragma("GCC unroll 4") for (int j = 0; j < NXR; j++) v[j][e] = _mm512_setzero_si512();
                    continue;
                }
                const uint8_t *b = p + (size_t)r * ws;
                if (r < npf)
                    _Pragma("GCC unroll 4") for (int l = 0; l < (int)(blk + 63) / 64; l++)
                        pf_weights((const char *)pf + (size_t)r * ws + 64 * l, l2);
                __m512i uq[4];
                if (T == 6) {
                    q6_K_quants((const rw_block_q6_K *)b, uq);
                } else {
                    nibbles_perm(b + (T == 4 ? offsetof(rw_block_q4_K, qs) : offsetof(rw_block_q5_K, qs)), uq);
                    if (T == 5) q5_K_high(b + offsetof(rw_block_q5_K, qh), uq);
                }
                const __m512i s0 = _mm512_permutexvar_epi16(e ? _mm512_add_epi16(is0, odd) : is0, sw);
                const __m512i s1 = _mm512_permutexvar_epi16(e ? _mm512_add_epi16(is1, odd) : is1, sw);
                _Pragma("GCC unroll 4") for (int j = 0; j < NXR; j++) {
                    __m512i xj[4];
                    _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) xj[q] = _mm512_load_si512(x[j]->qs + 64 * q);
                    const __m512i isum = kr_isum(uq, xj, s0, s1);
                    /* Q6_K: isum - the row's offset lanes */
                    v[j][e] = T == 6 ? _mm512_mask_sub_epi32(isum, e ? 0xFF00 : 0x00FF, isum, msum[j]) : isum;
                }
            }
            /* kx_fold_pairs, level by level as the pairs come */
            _Pragma("GCC unroll 4") for (int j = 0; j < NXR; j++) {
                t[j][k] =
                    _mm512_add_epi32(_mm512_unpacklo_epi32(v[j][0], v[j][1]), _mm512_unpackhi_epi32(v[j][0], v[j][1]));
                if (k % 2)
                    u4[j][k / 2] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[j][k - 1], t[j][k]),
                                                    _mm512_unpackhi_epi64(t[j][k - 1], t[j][k]));
                if (k % 4 == 3)
                    w2[j][k / 4] =
                        _mm512_add_epi32(_mm512_shuffle_i32x4(u4[j][k / 2 - 1], u4[j][k / 2], _MM_SHUFFLE(2, 0, 2, 0)),
                                         _mm512_shuffle_i32x4(u4[j][k / 2 - 1], u4[j][k / 2], _MM_SHUFFLE(3, 1, 3, 1)));
            }
        }
        __m512 vd, vdm = _mm512_setzero_ps();
        if (T == 6) {
            __m512i hd[4]; /* scales[2..15] and d */
            _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) hd[g] =
                kr_load4(p + offsetof(rw_block_q6_K, d) - 14, ws, 4 * g, nr);
            const __m512i dg = kr_lanes(hd, 3);
            vd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dg, 16)));
        } else {
            vd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
            vdm = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
        }
        _Pragma("GCC unroll 4") for (int j = 0; j < NXR; j++) {
            const __m512i lo = _mm512_shuffle_i32x4(w2[j][0], w2[j][1], _MM_SHUFFLE(2, 0, 2, 0));
            const __m512i hi = _mm512_shuffle_i32x4(w2[j][0], w2[j][1], _MM_SHUFFLE(3, 1, 3, 1));
            const __m512 vdx = _mm512_set1_ps(x[j]->d);
            const __m512 tt = _mm512_mul_ps(_mm512_mul_ps(vd, vdx), _mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi)));
            if (T == 6) {
                acc[j] = _mm512_add_ps(acc[j], tt);
            } else {
                const __m512 uu = _mm512_mul_ps(_mm512_mul_ps(vdm, vdx), _mm512_cvtepi32_ps(m16[j]));
                acc[j] = _mm512_add_ps(acc[j], _mm512_sub_ps(tt, uu));
            }
        }
    }
    _Pragma("GCC unroll 4") for (int j = 0; j < NXR; j++) _mm512_mask_storeu_ps(out + (size_t)j * os, live, acc[j]);
}

/* All nw rows for nx <= KR_NX activation rows (out[j * nw + i]): passes
 * of 16 weight rows, then the rest. */
INLINE void kr_rows_n(const int T, const int NXR, int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq,
                      size_t xs, float *out) {
    const size_t blk = T == 4 ? sizeof(rw_block_q4_K) : T == 5 ? sizeof(rw_block_q5_K) : sizeof(rw_block_q6_K);
    /* the first pass's first KR_PF_DIST(T) bytes a row, all asked for at once
     * (later passes find theirs asked for by the pass before) */
    const size_t head = KR_PF_DIST(T) + blk < ws ? KR_PF_DIST(T) + blk : ws;
    const bool l2 = rw_matmul_prefetch_l2();
    for (int r = 0; r < nw && r < KR_ROWS; r++)
        for (size_t b = 0; b < head; b += 64) pf_weights((const char *)w + (size_t)r * ws + b, l2);
    for (int i = 0; i < nw; i += KR_ROWS) {
        const int nr = nw - i < KR_ROWS ? nw - i : KR_ROWS, rest = nw - i - nr;
        const int nn = rest < KR_ROWS ? rest : KR_ROWS;
        const uint8_t *wi = w + (size_t)i * ws;
        if (NXR == 1 && nr == KR_ROWS) kr_pass1(T, n, wi, ws, KR_ROWS, nn, (const x_super *)xq, out + i, l2);
        else if (NXR == 1) kr_pass1(T, n, wi, ws, nr, nn, (const x_super *)xq, out + i, l2);
        else if (nr == KR_ROWS)
            kr_pass(T, NXR, n, wi, ws, KR_ROWS, nn, (const x_super *)xq, xs, out + i, (size_t)nw, l2);
        else kr_pass(T, NXR, n, wi, ws, nr, nn, (const x_super *)xq, xs, out + i, (size_t)nw, l2);
    }
}

INLINE void kr_rows(const int T, int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx,
                    float *out) {
    switch (nx) {
    case 1: kr_rows_n(T, 1, n, w, ws, nw, xq, xs, out); break;
    case 2: kr_rows_n(T, 2, n, w, ws, nw, xq, xs, out); break;
    case 3: kr_rows_n(T, 3, n, w, ws, nw, xq, xs, out); break;
    default: kr_rows_n(T, 4, n, w, ws, nw, xq, xs, out); break;
    }
}

/* The tiles of Q4_K, Q5_K and Q6_K: up to KR_NX activation rows against
 * more than NW weight rows (matmul.c's long calls for few rows) by
 * kr_rows, the rest by the tile. */
#define KR_TILE(name, T)                                                                                             \
    TILE_DISPATCH_FN(static, tile_##name##_x, name##_impl)                                                           \
    void rw_avx512_tile_##name(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx, \
                               float *out) {                                                                         \
        if (nx == 1 || (nx <= KR_NX && nw > NW)) kr_rows(T, n, w, ws, nw, xq, xs, nx, out);                          \
        else tile_##name##_x(n, w, ws, nw, xq, xs, nx, out);                                                         \
    }
KR_TILE(q4_K, 4)
KR_TILE(q5_K, 5)
KR_TILE(q6_K, 6)

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
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) o->scl[k] = _mm512_permutexvar_epi32(
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
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) o->scl[k] =
        _mm512_permutexvar_epi32(_mm512_add_epi32(q4, _mm512_set1_epi32(4 * k)), sc32);
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
        acc = _mm512_zextsi256_si512(
            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bs, w->mins), 5)));
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) acc =
        _mm512_dpwssd_epi32(acc, _mm512_dpbusd_epi32(_mm512_setzero_si512(), w->u[k], xv[k]), w->scl[k]);
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

/* Tile shape: KG_NW x KG_NX (matmul_avx512_int.h). */

#define KQUANT_GGML_TILE(name, UNPACK, MINS)                                                                         \
    INLINE void name##_ggml_impl(int64_t n, const uint8_t *w, size_t ws, const int nw, const uint8_t *xq, size_t xs, \
                                 const int nx, float *out) {                                                         \
        __m512 acc[KG_NW][KG_NX];                                                                                    \
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++)    \
            acc[i][j] = _mm512_setzero_ps();                                                                         \
        for (int64_t sb = 0; sb < n / 256; sb++) {                                                                   \
            w_kg wsb[KG_NW];                                                                                         \
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                                   \
                kq_prefetch(w + i * ws, sb, sizeof(rw_block_##name));                                                \
                UNPACK(w + i * ws, sb, &wsb[i]);                                                                     \
            }                                                                                                        \
            _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) {                                                   \
                const x_super *xsb = (const x_super *)(xq + j * xs) + sb;                                            \
                __m512i xv[4];                                                                                       \
                _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) xv[k] = _mm512_load_si512(xsb->qs + 64 * k);     \
                const __m256i bs = _mm256_load_si256((const __m256i *)xsb->bsums);                                   \
                const __m512 xd = _mm512_mask_blend_ps(0x0F00, _mm512_set1_ps(xsb->d), _mm512_set1_ps(-xsb->d));     \
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {                                               \
                    const __m512i v = kg_lanes(&wsb[i], xv, bs, MINS);                                               \
                    acc[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(wsb[i].wd, xd), _mm512_cvtepi32_ps(v), acc[i][j]);     \
                }                                                                                                    \
            }                                                                                                        \
        }                                                                                                            \
        _Pragma("GCC unroll 4") for (int j = 0; j < nx; j++) _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)    \
            out[j * nw + i] = kg_reduce(acc[i][j], MINS);                                                            \
    }

KQUANT_GGML_TILE(q4_K, unpackg_q4_K, 1)
KQUANT_GGML_TILE(q5_K, unpackg_q5_K, 2)
KQUANT_GGML_TILE(q6_K, unpackg_q6_K, 0)

TILE_DISPATCH(q2_K)
TILE_DISPATCH(q3_K)

/* IQ4_XS with up to four activation rows (decode, small batches): NR
 * weight rows against NXR activation rows (NR x NXR <= 4; output (r, c) to
 * out[c * nw + r]), each chunk decoded once for them: the tile's lanes and
 * float steps with fewer operations. Chunk k's 32 bytes (sub-blocks 2k and
 * 2k + 1) as [2k | 2k | 2k+1 | 2k+1] in 128-bit quarters, shifted by 0, 4,
 * 0, 4 bits: the low nibbles of each first quarter and the high ones of
 * each second are lanes 0-7 (2k) and 8-15 (2k + 1) against the activations
 * as they lie. The scale steps run in f32: every partial sum is an integer
 * below 2^24 (a lane's vpdpbusd at most 4 x 241 x 128, times |scale| <= 32,
 * four chunks; 128 x |scale| x |bsum| <= 2^24), so exact, the integers'
 * own values. */
enum { IQ4_PF_DIST = 4096 };
INLINE void iq4_xs_dot_rows(int64_t n, const uint8_t *w, size_t ws, const int NR, const uint8_t *xq, size_t xs,
                            const int NXR, float *out, int nw) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), sh = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    const int NO = NR * NXR; /* outputs: o = r * NXR + c */
    __m512 acc[4];
    _Pragma("GCC unroll 4") for (int o = 0; o < NO; o++) acc[o] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < n / 256; sb++) {
        const x_super *xb[4];
        const rw_block_iq4_xs *b[2];
        __m512 scf[2], lo[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < NXR; c++) xb[c] = (const x_super *)(xq + c * xs) + sb;
        _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++) {
            b[r] = (const rw_block_iq4_xs *)(w + r * ws) + sb;
            _Pragma("GCC unroll 3") for (int l = 0; l < 3; l++) /* 136 bytes a super-block */
                _mm_prefetch((const char *)b[r] + IQ4_PF_DIST + 64 * l, _MM_HINT_T0);
            /* scale j: bits 4j.. of scales_l (4 bits) under bits 2j.. of scales_h, minus 32 */
            uint32_t sl;
            memcpy(&sl, b[r]->scales_l, 4);
            const __m256i shl =
                _mm256_srlv_epi32(_mm256_set1_epi32((int)sl), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
            const __m256i shh =
                _mm256_srlv_epi32(_mm256_set1_epi32(b[r]->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
            const __m256i sc =
                _mm256_sub_epi32(_mm256_or_si256(_mm256_and_si256(shl, _mm256_set1_epi32(0x0F)),
                                                 _mm256_slli_epi32(_mm256_and_si256(shh, _mm256_set1_epi32(3)), 4)),
                                 _mm256_set1_epi32(32));
            scf[r] = _mm512_castps256_ps512(_mm256_cvtepi32_ps(sc));
        }
        _Pragma("GCC unroll 4") for (int o = 0; o < NO; o++) lo[o] = _mm512_setzero_ps();
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi32(2 * k), _mm256_set1_epi32(2 * k + 1), 1);
            __m512i u[2];
            __m512 s[2];
            _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++) {
                const __m512i z = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b[r]->qs + 32 * k)));
                const __m512i q = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(1, 1, 0, 0));
                u[r] = iq4_lookup(_mm512_and_si512(_mm512_srlv_epi64(q, sh), m4)); /* values + 128 */
                s[r] = _mm512_permutexvar_ps(idx, scf[r]);
            }
            _Pragma("GCC unroll 4") for (int o = 0; o < NO; o++) {
                const int r = o / NXR, c = o % NXR;
                const __m512i xk = _mm512_load_si512(xb[c]->qs + 64 * k);
                const __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u[r], xk));
                lo[o] = _mm512_fmadd_ps(p, s[r], lo[o]);
            }
        }
        _Pragma("GCC unroll 4") for (int o = 0; o < NO; o++) {
            const int r = o / NXR, c = o % NXR;
            /* 128 * scale_j . (bsums 2j + 2j + 1) in lanes 0-7, 0 above */
            const __m256 bs = _mm256_cvtepi32_ps(_mm256_slli_epi32(
                _mm256_madd_epi16(_mm256_load_si256((const __m256i *)xb[c]->bsums), _mm256_set1_epi16(1)), 7));
            const __m512 msum =
                _mm512_insertf32x8(_mm512_setzero_ps(), _mm256_mul_ps(_mm512_castps512_ps256(scf[r]), bs), 0);
            const __m512 dd = _mm512_set1_ps(f16_to_f32(b[r]->d) * xb[c]->d);
            acc[o] = _mm512_fnmadd_ps(msum, dd, _mm512_fmadd_ps(lo[o], dd, acc[o]));
        }
    }
    _Pragma("GCC unroll 4") for (int o = 0; o < NO; o++) out[(o % NXR) * nw + o / NXR] = _mm512_reduce_add_ps(acc[o]);
}

static void tile_iq4_xs(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx,
                        float *out) {
    int i = 0;
    switch (nx) {
    case 1:
        for (; i + 2 <= nw; i += 2) iq4_xs_dot_rows(n, w + (size_t)i * ws, ws, 2, xq, xs, 1, out + i, nw);
        if (i < nw) iq4_xs_dot_rows(n, w + (size_t)i * ws, ws, 1, xq, xs, 1, out + i, nw);
        break;
    case 2:
        for (; i + 2 <= nw; i += 2) iq4_xs_dot_rows(n, w + (size_t)i * ws, ws, 2, xq, xs, 2, out + i, nw);
        if (i < nw) iq4_xs_dot_rows(n, w + (size_t)i * ws, ws, 1, xq, xs, 2, out + i, nw);
        break;
    case 3:
        for (; i < nw; i++) iq4_xs_dot_rows(n, w + (size_t)i * ws, ws, 1, xq, xs, 3, out + i, nw);
        break;
    default: /* 4: the tile's most (NX) */
        for (; i < nw; i++) iq4_xs_dot_rows(n, w + (size_t)i * ws, ws, 1, xq, xs, 4, out + i, nw);
        break;
    }
}

/* the tiles of the types that have panels too (their kernels are
 * matmul_kpanel_avx512.c's; Q4_K, Q5_K and Q6_K's in our order are
 * KR_TILE's above); the ggml-order K-quant tiles take up to KG_NW x KG_NX (matmul_avx512_int.h) */
TILE_DISPATCH_KG_FN(, rw_avx512_tile_q4_K_ggml, q4_K_ggml_impl)
TILE_DISPATCH_KG_FN(, rw_avx512_tile_q5_K_ggml, q5_K_ggml_impl)
TILE_DISPATCH_KG_FN(, rw_avx512_tile_q6_K_ggml, q6_K_ggml_impl)

const rw_mm_kernel rw_avx512_kernel_q2_K = {
    .x_bytes = x_bytes_super, .convert_x = convert_q8_K, .tile = tile_q2_K, .max_nw = NW, .max_nx = NX};
const rw_mm_kernel rw_avx512_kernel_q3_K = {
    .x_bytes = x_bytes_super, .convert_x = convert_q8_K, .tile = tile_q3_K, .max_nw = NW, .max_nx = NX};
const rw_mm_kernel rw_avx512_kernel_iq4_xs = {
    .x_bytes = x_bytes_super, .convert_x = convert_q8_K, .tile = tile_iq4_xs, .max_nw = NW, .max_nx = NX};
