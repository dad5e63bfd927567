/* matmul_kgroup_avx512.c - the group form of Q4_K, Q5_K and Q6_K in the
 * AVX-512 tier (our order): few activation rows (batched decoding, verify
 * passes) at about one row's cost.
 *
 * The one-row tile (matmul_kquant_avx512.c) spends most of its work per
 * (weight row, activation row) pair on folding 16 lanes into one integer
 * and a scalar float step; with a few rows that repeats for every row, and
 * the panel form (matmul_kpanel_avx512.c) repacks 16 weight rows per call,
 * which only pays off from tens of rows. Here one register lane holds one
 * activation row: a group is 16 rows turned around at conversion, so a
 * weight super-block is unpacked once and each of its 4-byte pieces is
 * broadcast against the 16 rows' matching 4 bytes (one vpdpbusd per 4
 * elements for all rows), and the float step is one vector step for 16
 * rows. The rows' results land in lanes, so nothing is folded.
 *
 * vpdpbusd multiplies unsigned bytes of its register operand by signed
 * bytes of the broadcast one, so the activations are stored plus 128
 * (unsigned) and the weights signed; per super-block the integer sums are
 * the reference's exactly (matmul_ref.c):
 *   Q4_K / Q5_K: isum = sum_j sc_j * dot'_j - 128 * sum_j sc_j * wsum_j,
 *     dot'_j the 32-element sub-block's dot with x + 128 (< 2^18), wsum_j
 *     its quants' sum; msum = sum_j m_j * S_j, S_j the sub-block's
 *     activation sum (bsum_2j + bsum_2j+1, stored at conversion in 16 bits
 *     as pairs (S_2t, S_2t+1), so that one vpdpwssd takes two sub-blocks);
 *     then sum = sum + ((d*dx)*(float)isum - (dmin*dx)*(float)msum);
 *   Q6_K: the weights q - 32 (signed), isum = sum_g sc_g * dot'_g - 128 *
 *     sum_g sc_g * wsum_g over its 16 groups of 16, which is the
 *     reference's isum with its -32 offset; sum = sum + (d*dx)*(float)isum.
 * The offset term -128 * sum sc * wsum is the same for every row of the
 * group: a group with fewer than 16 rows gets it from a padding lane, whose
 * activations are 0 (bytes 128, so that its sum is 128 * sum sc * wsum),
 * subtracted from every lane, instead of computing it per weight
 * super-block (a quarter of the form's time at 16 rows, measured on Zen 4).
 * A call of 17 to 32 rows takes two groups with each weight super-block
 * unpacked (and its offset term computed) once for both: the rows that
 * reach this form (panels not packed on the fly, RW_PANELS=0; the AMX
 * tier's Q5_K and Q6_K below its panel rows), since packing panels from
 * 17 rows measured faster in a MoE prefill (matmul_kpanel_avx512.c).
 * Intermediates stay below 2^31 (Q5_K: 8 * 63 * 32 * 255 * 31), integer
 * sums are exact in any order and the float step is the reference's, so
 * every output is bitwise the tile's and the reference's.
 */
#include "kernels/matmul_avx512_int.h"

/* A group of RW_MM_GROUP activation rows, per super-block. */
typedef struct {
    uint8_t q[64][RW_MM_GROUP][4]; /* elements 4g .. 4g+3 of each row, plus 128 */
    int32_t bs[4][RW_MM_GROUP];    /* sub-blocks 2t (low 16 bits) and 2t+1 (high): their 32 elements' sums */
    float d[RW_MM_GROUP];
} xg_super;

_Static_assert(sizeof(xg_super) % 64 == 0, "super-blocks of a group stay 64-byte aligned");

static size_t g_bytes_k(int64_t n) { return (size_t)(n / 256) * sizeof(xg_super); }

static void convert_g_k(const float *const *rows, int n_rows, void *xg, int64_t n) {
    xg_super *g = xg;
    /* padding rows: activations 0 (bytes 128), so that a padding lane's
     * integer sum is the weights' offset term (kgroup_impl); outputs discarded */
    memset(xg, 0, g_bytes_k(n));
    for (int64_t sb = 0; sb < n / 256; sb++)
        for (int k = 0; k < 64; k++)
            for (int r = n_rows; r < RW_MM_GROUP; r++) memset(g[sb].q[k][r], 0x80, 4);
    for (int r = 0; r < n_rows; r++)
        for (int64_t sb = 0; sb < n / 256; sb++) {
            x_super t;
            convert_q8_K(rows[r] + 256 * sb, &t, 256);
            for (int k = 0; k < 64; k++) {
                uint32_t v;
                memcpy(&v, t.qs + 4 * k, 4);
                v ^= 0x80808080u; /* + 128 per byte */
                memcpy(g[sb].q[k][r], &v, 4);
            }
            for (int j = 0; j < 4; j++) { /* |sum of 32| <= 32 * 127: 16 bits */
                const int16_t a = (int16_t)(t.bsums[4 * j] + t.bsums[4 * j + 1]),
                              b = (int16_t)(t.bsums[4 * j + 2] + t.bsums[4 * j + 3]);
                g[sb].bs[j][r] = (int32_t)((uint32_t)(uint16_t)a | (uint32_t)(uint16_t)b << 16);
            }
            g[sb].d[r] = t.d;
        }
}

/* One unpacked weight super-block: signed quants in element order, the
 * scale of each scale group (Q4_K / Q5_K: 8 sub-blocks of 32, Q6_K: 16
 * groups of 16), the min pairs (m_j, m_j), and corr = -128 * sum_j sc_j *
 * wsum_j. */
typedef struct {
    int8_t q[256] __attribute__((aligned(64)));
    int32_t sc[16];
    int32_t mins[4]; /* (m_2t, m_2t+1) */
    int32_t corr;
    float d, dmin;
} kg_block;

/* -128 * sum over the 32 8-byte pieces p of u[4] of scale(p) * (sum of p's
 * bytes + off), scale(p) lane p % 8 of sc[p / 8] (int64 lanes). */
INLINE int32_t corr_of(const __m512i u[4], const __m512i sc[4], int64_t off) {
    __m512i t = _mm512_setzero_si512();
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
        const __m512i s = _mm512_add_epi64(_mm512_sad_epu8(u[k], _mm512_setzero_si512()), _mm512_set1_epi64(off));
        t = _mm512_add_epi64(t, _mm512_mul_epi32(s, sc[k]));
    }
    return (int32_t)(-128 * _mm512_reduce_add_epi64(t));
}

INLINE void k45_unpack(const uint8_t scales[12], const uint8_t *qs, const uint8_t *qh, rw_f16 d, rw_f16 dmin,
                       kg_block *o, const int CORR) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m512i u[4];
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) { /* elements 64c + l, 64c + 32 + l: qs[32c + l] */
        const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        u[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, m4)),
                                  _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), 1);
    }
    if (qh) { /* bit j of qh[l]: the fifth bit of element 32j + l */
        const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh));
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * c))),
                                                   _mm256_set1_epi8((char)(1 << (2 * c + 1))), 1);
            u[c] = _mm512_mask_add_epi8(u[c], _mm512_test_epi8_mask(h, bit), u[c], _mm512_set1_epi8(16));
        }
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) _mm512_store_si512(o->q + 64 * c, u[c]);
    const __m128i sm = k4_scales_mins(scales);
    const __m512i sm32 = _mm512_cvtepu8_epi32(sm); /* sc0..7, m0..7 */
    _mm256_storeu_si256((__m256i *)o->sc, _mm512_castsi512_si256(sm32));
    const __m256i m = _mm512_extracti64x4_epi64(sm32, 1);
    /* (m_2t, m_2t+1) pairs: m0..7 as 16-bit lanes, 4 pairs */
    _mm_storeu_si128((__m128i *)o->mins, _mm256_cvtepi32_epi16(m));
    /* piece p (8 elements) of register k lies in sub-block 2k + p / 4 */
    const __m512i sc64 = _mm512_cvtepu8_epi64(sm);
    __m512i sc[4];
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) sc[k] = _mm512_permutexvar_epi64(
        _mm512_set_epi64(2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k, 2 * k, 2 * k, 2 * k), sc64);
    o->corr = CORR ? corr_of(u, sc, 0) : 0;
    o->d = f16_to_f32(d);
    o->dmin = f16_to_f32(dmin);
}

INLINE void unpack_q4_K(const uint8_t *blk, kg_block *o, const int CORR) {
    const rw_block_q4_K *b = (const rw_block_q4_K *)blk;
    k45_unpack(b->scales, b->qs, NULL, b->d, b->dmin, o, CORR);
}

INLINE void unpack_q5_K(const uint8_t *blk, kg_block *o, const int CORR) {
    const rw_block_q5_K *b = (const rw_block_q5_K *)blk;
    k45_unpack(b->scales, b->qs, b->qh, b->d, b->dmin, o, CORR);
}

INLINE void unpack_q6_K(const uint8_t *blk, kg_block *o, const int CORR) {
    const rw_block_q6_K *b = (const rw_block_q6_K *)blk;
    /* element 128h + 32k + l: nibble k / 2 of ql[64h + 32(k % 2) + l], bits
     * 2k, 2k+1 of qh[32h + l] above it (0..63) */
    __m512i u[4];
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        __m256i e[4];
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const __m256i ql = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (k % 2)));
            const __m256i lo = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), m4);
            const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m2), 4);
            e[k] = _mm256_or_si256(lo, hi);
        }
        u[2 * h] = _mm512_inserti64x4(_mm512_castsi256_si512(e[0]), e[1], 1);
        u[2 * h + 1] = _mm512_inserti64x4(_mm512_castsi256_si512(e[2]), e[3], 1);
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
        _mm512_store_si512(o->q + 64 * c, _mm512_sub_epi8(u[c], _mm512_set1_epi8(32)));
    const __m128i s8 = _mm_loadu_si128((const __m128i *)b->scales);
    _mm512_storeu_si512(o->sc, _mm512_cvtepi8_epi32(s8));
    /* piece p (8 elements) of register k lies in group 4k + p / 2; its
     * quants' sum is 8 * 32 below the unsigned bytes' */
    const __m512i lo64 = _mm512_cvtepi8_epi64(s8), hi64 = _mm512_cvtepi8_epi64(_mm_srli_si128(s8, 8));
    __m512i sc[4];
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
        const int b0 = 4 * (k % 2);
        sc[k] = _mm512_permutexvar_epi64(_mm512_set_epi64(b0 + 3, b0 + 3, b0 + 2, b0 + 2, b0 + 1, b0 + 1, b0, b0),
                                         k < 2 ? lo64 : hi64);
    }
    o->corr = CORR ? corr_of(u, sc, -8 * 32) : 0;
    o->d = f16_to_f32(b->d);
    o->dmin = o->d;
}

enum { KG_MAX_NW = 4, KG_MAX_NG = 2 };

/* out[r*os + i] = lane r of v[i] for i < nw <= 4, r < m: the four vectors
 * turned around in registers (lane 4L + k of each into 128-bit lane L of
 * t[k]), then a row's (up to) four outputs in one store. Storing each
 * lane alone went through memory, a scalar reload per output (a quarter
 * of the form's time for 2048 x 512 experts). */
INLINE void kg_store(const __m512 *v, const int nw, int m, float *out, int64_t os) {
    const __m512 z = _mm512_setzero_ps(), a = v[0], b = nw > 1 ? v[1] : z, c = nw > 2 ? v[2] : z, d = nw > 3 ? v[3] : z;
    const __m512 ab0 = _mm512_unpacklo_ps(a, b), ab1 = _mm512_unpackhi_ps(a, b);
    const __m512 cd0 = _mm512_unpacklo_ps(c, d), cd1 = _mm512_unpackhi_ps(c, d);
    const __m512 t[4] = {_mm512_shuffle_ps(ab0, cd0, 0x44), _mm512_shuffle_ps(ab0, cd0, 0xEE),
                         _mm512_shuffle_ps(ab1, cd1, 0x44), _mm512_shuffle_ps(ab1, cd1, 0xEE)};
    const __mmask8 keep = (__mmask8)((1u << nw) - 1);
    /* L a literal: the extract's lane is an immediate, unrolled or not (-O1) */
#define KG_STORE_LANE(L)                                                                             \
    for (int k = 0; k < 4 && 4 * (L) + k < m; k++)                                                   \
        _mm_mask_storeu_ps(out + (4 * (L) + k) * os, keep, _mm512_extractf32x4_ps(t[k], (L)));
    KG_STORE_LANE(0)
    KG_STORE_LANE(1)
    KG_STORE_LANE(2)
    KG_STORE_LANE(3)
#undef KG_STORE_LANE
}

/* out[r*os + i] for weight rows i < nw and activation rows r < nx of NG
 * groups (xgs bytes apart; rows past 16 are the second group's): each
 * weight super-block is unpacked once for all the groups. Q6: 16 scale
 * groups of 4 pieces, else 8 of 8. The offset term comes from the weights
 * (CORR) unless SPARE: one group of fewer than 16 rows, whose padding lane
 * holds it. */
INLINE void kgroup_impl(int64_t n, const uint8_t *w, size_t ws, size_t blk,
                        void (*unpack)(const uint8_t *, kg_block *, int), const int nw, const uint8_t *xg, size_t xgs,
                        int nx, float *out, int64_t os, const int Q6, const int NG, const int SPARE) {
    const int n_sc = Q6 ? 16 : 8, per = Q6 ? 4 : 8;
    __m512 acc[KG_MAX_NG][KG_MAX_NW];
    _Pragma("GCC unroll 2") for (int q = 0; q < NG; q++) _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++)
        acc[q][i] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < n / 256; sb++) {
        kg_block wb[KG_MAX_NW];
        _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {
            const uint8_t *p = w + i * ws + (size_t)sb * blk;
            _mm_prefetch((const char *)p + PF_DIST, _MM_HINT_T0);
            _mm_prefetch((const char *)p + PF_DIST + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)p + PF_DIST + 128, _MM_HINT_T0);
            unpack(p, &wb[i], !SPARE);
        }
        _Pragma("GCC unroll 2") for (int q = 0; q < NG; q++) {
            const xg_super *X = (const xg_super *)(xg + (size_t)q * xgs) + sb;
            __m512i is[KG_MAX_NW];
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) is[i] = _mm512_set1_epi32(wb[i].corr);
            for (int s = 0; s < n_sc; s += 2) { /* two scale groups: two chains per weight row */
                __m512i pa[KG_MAX_NW], pb[KG_MAX_NW];
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) pa[i] = pb[i] = _mm512_setzero_si512();
                _Pragma("GCC unroll 8") for (int g = 0; g < per; g++) {
                    const int G = per * s + g;
                    const __m512i xa = _mm512_load_si512(X->q[G]), xb = _mm512_load_si512(X->q[G + per]);
                    _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {
                        DPBUSD_BCST(pa[i], xa, (const i32u *)(wb[i].q + 4 * G));
                        DPBUSD_BCST(pb[i], xb, (const i32u *)(wb[i].q + 4 * (G + per)));
                    }
                }
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) is[i] =
                    _mm512_add_epi32(_mm512_add_epi32(is[i], _mm512_mullo_epi32(pa[i], _mm512_set1_epi32(wb[i].sc[s]))),
                                     _mm512_mullo_epi32(pb[i], _mm512_set1_epi32(wb[i].sc[s + 1])));
            }
            if (SPARE) /* lane 15 (activations 0) holds the offset term: take it off every lane */
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) is[i] =
                    _mm512_sub_epi32(is[i], _mm512_permutexvar_epi32(_mm512_set1_epi32(RW_MM_GROUP - 1), is[i]));
            const __m512 dx = _mm512_load_ps(X->d);
            if (Q6) {
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) acc[q][i] = _mm512_add_ps(
                    acc[q][i], _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(wb[i].d), dx), _mm512_cvtepi32_ps(is[i])));
                continue;
            }
            __m512i ms[KG_MAX_NW];
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) ms[i] = _mm512_setzero_si512();
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
                const __m512i bs = _mm512_load_si512(X->bs[j]);
                _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) ms[i] =
                    _mm512_dpwssd_epi32(ms[i], bs, _mm512_set1_epi32(wb[i].mins[j]));
            }
            _Pragma("GCC unroll 4") for (int i = 0; i < nw; i++) {
                const __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(wb[i].d), dx), _mm512_cvtepi32_ps(is[i]));
                const __m512 u =
                    _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(wb[i].dmin), dx), _mm512_cvtepi32_ps(ms[i]));
                acc[q][i] = _mm512_add_ps(acc[q][i], _mm512_sub_ps(t, u));
            }
        }
    }
    _Pragma("GCC unroll 2") for (int q = 0; q < NG; q++) {
        const int m = nx - RW_MM_GROUP * q < RW_MM_GROUP ? nx - RW_MM_GROUP * q : RW_MM_GROUP;
        kg_store(acc[q], nw, m, out + (int64_t)RW_MM_GROUP * q * os, os);
    }
}

/* Two groups at a time, each weight super-block unpacked once for 32 rows,
 * with the offset term from the weights; a last single group of 16 rows
 * the same way, one of fewer from a padding lane (SPARE 1). */
#define KG_CALL(name, Q6, NW, NG, SPARE) \
    kgroup_impl(n, w, ws, sizeof(rw_block_##name), unpack_##name, NW, xg, xgs, m, out, os, Q6, NG, SPARE)
#define KG_DISPATCH(name, Q6, NG, SPARE)             \
    switch (left) {                                  \
    case 1: KG_CALL(name, Q6, 1, NG, SPARE); break;  \
    case 2: KG_CALL(name, Q6, 2, NG, SPARE); break;  \
    case 3: KG_CALL(name, Q6, 3, NG, SPARE); break;  \
    default: KG_CALL(name, Q6, 4, NG, SPARE); break; \
    }
#define KGROUP_TILE(name, Q6)                                                                                     \
    void rw_avx512_tile_g_##name(int64_t n, const uint8_t *w0, size_t ws, int nw0, const uint8_t *xg, size_t xgs, \
                                 int nx, float *out0, int64_t os) {                                               \
        for (int r0 = 0; r0 < nx;) {                                                                              \
            const int m = nx - r0 < KG_MAX_NG * RW_MM_GROUP ? nx - r0 : KG_MAX_NG * RW_MM_GROUP;                  \
            for (int i0 = 0; i0 < nw0; i0 += KG_MAX_NW) {                                                         \
                const uint8_t *w = w0 + (size_t)i0 * ws;                                                          \
                float *out = out0 + i0;                                                                           \
                const int left = nw0 - i0;                                                                        \
                if (m > RW_MM_GROUP) KG_DISPATCH(name, Q6, 2, 0)                                                  \
                else if (m == RW_MM_GROUP) KG_DISPATCH(name, Q6, 1, 0)                                            \
                else KG_DISPATCH(name, Q6, 1, 1)                                                                  \
            }                                                                                                     \
            const int ng = (m + RW_MM_GROUP - 1) / RW_MM_GROUP;                                                   \
            r0 += m, xg += (size_t)ng * xgs, out0 += (int64_t)m * os;                                             \
        }                                                                                                         \
    }
KGROUP_TILE(q4_K, 0)
KGROUP_TILE(q5_K, 0)
KGROUP_TILE(q6_K, 1)

size_t rw_avx512_g_bytes_k(int64_t n) { return g_bytes_k(n); }
void rw_avx512_convert_g_k(const float *const *rows, int n_rows, void *xg, int64_t n) {
    convert_g_k(rows, n_rows, xg, n);
}
