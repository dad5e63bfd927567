/* matmul_kpanel_avx2.c - Q4_K, Q5_K and Q6_K on AVX2 over repacked
 * weights: the panel form (Q5_K in Q4_K's layout, Q6_K's below).
 *
 * As the Q8_0 panel (matmul_q8_0_avx2.c): a panel holds 8 weight rows, one
 * per 32-bit lane, and an activation row's quants are broadcast 4 bytes at
 * a time, so a lane gathers its own row's sums with no reduction across
 * lanes, whatever the number of activation rows. Per super-block of the 8
 * rows the panel holds, unpacked once (matmul.c packs panels on the fly
 * into per-thread scratch, or rw_matmul_pack once):
 *   - q[j][s]: dword s (elements 4s..4s+3) of sub-block j of each row, the
 *     quants as bytes 0..15 (Q5_K: 0..31, its dots summed in 16 bits four
 *     dwords at a time, 8 * 31 * 127 < 2^15);
 *   - sc[j], mn[j]: each row's 6-bit scale and min of sub-block j as two
 *     16-bit copies (the lane's pair for vpmaddwd);
 *   - d, dmin: the rows' f16 scales as floats.
 * 328 bytes per row and super-block (144 in the GGUF layout).
 *
 * Per output the arithmetic is the reference's (matmul_ref.c): per
 * super-block the exact integers isum = sum_j scale_j * dot_j and msum =
 * sum_j min_j * (bsum_2j + bsum_2j+1), then sum += (d * dx) * isum -
 * (dmin * dx) * msum, super-blocks in order. dot_j: vpmaddubsw of the
 * quants (0..15) with the activation's (-128..127) gives pairs of products
 * in 16 bits, and the eight of a sub-block are added in 16 bits (at most
 * 16 * 15 * 128 = 30720 < 2^15), then one vpmaddwd with the scales makes
 * scale_j * dot_j in 32 bits: about 2.3 instructions per 32 products.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/matmul_avx2_int.h"
#include "kernels/quant_int.h"

#define INLINE static inline __attribute__((always_inline))

enum { KP_ROWS = RW_AVX2_KP_ROWS, KP_MAX_NX = RW_AVX2_KP_MAX_NX, KP_GROUP = 4 /* activation rows per pass */ };

/* One super-block of a panel (8 rows). */
typedef struct {
    uint8_t q[8][8][32];
    int16_t sc[8][16], mn[8][16];
    float d[8], dmin[8];
} kp_blk;

_Static_assert(sizeof(kp_blk) == 8 * 328, "Q4_K panel block");

size_t rw_avx2_p_wbytes_q4_K(int64_t n) { return (size_t)(n / 256) * (sizeof(kp_blk) / KP_ROWS); }

/* rw_quantize_row's Q8_K in vectors, the same bytes: amax is order-free
 * and max is the first element of that magnitude (the reference keeps the
 * first on ties); q = rw_nearest_int(iscale * x) as a multiply, then the
 * add of 1.5 * 2^23 and the bit masks, capped at 127 (the quants lie in
 * -127..127, so the saturating packs keep them); d = 1 / iscale. A
 * super-block holding a NaN or an infinity, or whose iscale overflows,
 * goes to the reference. */
void rw_avx2_quantize_q8_K(const float *x, void *dst, int64_t n) {
    rw_block_q8_K *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        __m256 m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
        for (int c = 0; c < 32; c++) {
            const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * c));
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, _mm256_set1_ps(3.402823466e38f), _CMP_NLE_UQ));
            m = _mm256_max_ps(m, a);
        }
        if (_mm256_movemask_ps(bad)) {
            rw_quantize_row(RW_TYPE_Q8_K, x, y + i, 256);
            continue;
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0;
        const __m256 va = _mm256_set1_ps(amax);
        for (int c = 0; c < 32; c++) {
            const int hit =
                _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * c)), va, _CMP_EQ_OQ));
            if (hit) {
                max = x[8 * c + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.f / max;
        if (!(fabsf(iscale) <= 3.402823466e38f)) { /* a tiny max: the reference's quants wrap, the packs would not */
            rw_quantize_row(RW_TYPE_Q8_K, x, y + i, 256);
            continue;
        }
        const __m256 vs = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(12582912.f);
        const __m256i mant = _mm256_set1_epi32(0x007fffff), off = _mm256_set1_epi32(0x00400000),
                      cap = _mm256_set1_epi32(127);
        for (int b = 0; b < 8; b++) { /* 32 quants and two 16-sums at a time */
            __m256i q[4];
            for (int c = 0; c < 4; c++) {
                const __m256 v = _mm256_add_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * b + 8 * c)), magic);
                q[c] = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(v), mant), off), cap);
            }
            const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *)(y[i].qs + 32 * b),
                                _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
            const __m256i g0 = _mm256_add_epi32(q[0], q[1]), g1 = _mm256_add_epi32(q[2], q[3]);
            const __m256i h2 = _mm256_hadd_epi32(_mm256_hadd_epi32(g0, g1), _mm256_setzero_si256());
            const __m128i g = _mm_add_epi32(_mm256_castsi256_si128(h2), _mm256_extracti128_si256(h2, 1));
            y[i].bsums[2 * b] = (int16_t)_mm_cvtsi128_si32(g);
            y[i].bsums[2 * b + 1] = (int16_t)_mm_extract_epi32(g, 1);
        }
        y[i].d = 1 / iscale;
    }
}

void rw_avx2_convert_q8_K_p(const float *const *rows, int n_rows, void *xp, int64_t n) {
    if (n_rows < 1) {
        memset(xp, 0, (size_t)(n / 256) * sizeof(rw_block_q8_K));
        return;
    }
    rw_avx2_quantize_q8_K(rows[0], xp, n);
}

/* Super-block b of the 8 rows from row0 (ws apart; n_left of them exist);
 * missing rows get quants, scales and mins 0. Q4_K (five = 0) or Q5_K: d,
 * dmin and the scales lead both block types;
 * Q5_K's fifth bits (bit j of qh[e] for element e of sub-block j) are
 * transposed as the quants are and put in bit 4. */
INLINE void pack_super_k(const uint8_t *row0, size_t ws, int n_left, int64_t b, kp_blk *p, const int five) {
    const __m256i low = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    const size_t bsz = five ? sizeof(rw_block_q5_K) : sizeof(rw_block_q4_K),
                 qs_at = five ? offsetof(rw_block_q5_K, qs) : offsetof(rw_block_q4_K, qs);
    __m256i th[8];
    if (five) {
        __m256i hv[8];
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) hv[i] =
            i < n_left ? _mm256_loadu_si256((const __m256i *)((const rw_block_q5_K *)(row0 + (size_t)i * ws) + b)->qh)
                       : _mm256_setzero_si256();
        rw_avx2_transpose8_epi32(hv, th);
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) { /* sub-blocks 2c (low nibbles) and 2c + 1 (high) */
        /* the packed bytes transposed once (a dword keeps its bytes), then
         * split into the two sub-blocks' quants */
        __m256i v[8], o[8];
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) v[i] =
            i < n_left ? _mm256_loadu_si256((const __m256i *)(row0 + (size_t)i * ws + (size_t)b * bsz + qs_at + 32 * c))
                       : _mm256_setzero_si256();
        rw_avx2_transpose8_epi32(v, o);
        _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
            __m256i lo = _mm256_and_si256(o[s], low), hi = _mm256_and_si256(_mm256_srli_epi16(o[s], 4), low);
            if (five) { /* bits 2c and 2c + 1 to bit 4 (the 16-bit shifts carry bits across
                         * bytes only below bit 4 or above it) */
                const int j = 2 * c;
                const __m256i h0 = j <= 4 ? _mm256_slli_epi16(th[s], 4 - j) : _mm256_srli_epi16(th[s], j - 4);
                const __m256i h1 = j + 1 <= 4 ? _mm256_slli_epi16(th[s], 3 - j) : _mm256_srli_epi16(th[s], j - 3);
                lo = _mm256_or_si256(lo, _mm256_and_si256(h0, b4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(h1, b4));
            }
            _mm256_storeu_si256((__m256i *)p->q[2 * c][s], lo);
            _mm256_storeu_si256((__m256i *)p->q[2 * c + 1][s], hi);
        }
    }
    /* scales and mins: row i's eight values (each twice, in a 32-bit
     * lane) transposed so that sub-block j's register holds row i in lane i */
    __m256i sv[8], mv[8], o[8];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
        if (i >= n_left) {
            sv[i] = mv[i] = _mm256_setzero_si256();
            p->d[i] = p->dmin[i] = 0.0f;
            continue;
        }
        const rw_block_q4_K *blk = (const rw_block_q4_K *)(row0 + (size_t)i * ws + (size_t)b * bsz);
        uint64_t sc, mn;
        k4_scales_mins(blk->scales, &sc, &mn);
        const __m256i s32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc));
        const __m256i m32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mn));
        sv[i] = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
        mv[i] = _mm256_or_si256(m32, _mm256_slli_epi32(m32, 16));
        p->d[i] = _cvtsh_ss(blk->d);
        p->dmin[i] = _cvtsh_ss(blk->dmin);
    }
    rw_avx2_transpose8_epi32(sv, o);
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) _mm256_storeu_si256((__m256i *)p->sc[j], o[j]);
    rw_avx2_transpose8_epi32(mv, o);
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) _mm256_storeu_si256((__m256i *)p->mn[j], o[j]);
}

static void pack_super(const uint8_t *row0, size_t ws, int n_left, int64_t b, kp_blk *p) {
    pack_super_k(row0, ws, n_left, b, p, 0);
}
static void pack_super5(const uint8_t *row0, size_t ws, int n_left, int64_t b, kp_blk *p) {
    pack_super_k(row0, ws, n_left, b, p, 1);
}

void rw_avx2_pack_q4_K_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    const int64_t nsb = n / 256;
    for (int64_t p0 = 0; p0 < n_out; p0 += KP_ROWS) {
        kp_blk *p = (kp_blk *)(dst + (size_t)p0 * rw_avx2_p_wbytes_q4_K(n));
        for (int64_t b = 0; b < nsb; b++) pack_super(w + (size_t)p0 * ws, ws, (int)(n_out - p0), b, p + b);
    }
}

void rw_avx2_pack_q5_K_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    const int64_t nsb = n / 256;
    for (int64_t p0 = 0; p0 < n_out; p0 += KP_ROWS) {
        kp_blk *p = (kp_blk *)(dst + (size_t)p0 * rw_avx2_p_wbytes_q4_K(n));
        for (int64_t b = 0; b < nsb; b++) pack_super5(w + (size_t)p0 * ws, ws, (int)(n_out - p0), b, p + b);
    }
}

INLINE __m256i bcast4(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* AVX-VNNI (VEX forms, spelt in asm: the tier's ISA flags do not include
 * it): acc + 4-byte products of u (unsigned) and x (signed), and acc +
 * pairs of 16-bit products; exact, so the same integers as vpmaddubsw /
 * vpmaddwd / vpaddd. */
INLINE __m256i dpbusd(__m256i acc, __m256i u, __m256i x) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(x));
    return acc;
}
INLINE __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
    return acc;
}

/* The 16-bit sum of vpmaddubsw over the n dwords from s0 of a sub-block's
 * panel quants q against the activation's bytes xq (the caller bounds it
 * below 2^15): even and odd dwords in two chains, then their sum, the same
 * integers; one chain of eight was about 5% slower on Zen 3 (512 rows). */
INLINE __m256i kp_sum16(const uint8_t (*q)[32], const int8_t *xq, const int s0, const int n) {
    __m256i pa = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)q[s0]), bcast4(xq + 4 * s0));
    __m256i pb = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)q[s0 + 1]), bcast4(xq + 4 * s0 + 4));
    _Pragma("GCC unroll 3") for (int s = s0 + 2; s < s0 + n; s += 2) {
        pa = _mm256_add_epi16(pa, _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)q[s]), bcast4(xq + 4 * s)));
        pb = _mm256_add_epi16(
            pb, _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)q[s + 1]), bcast4(xq + 4 * s + 4)));
    }
    return _mm256_add_epi16(pa, pb);
}

/* One panel (8 outputs) against R activation rows; out[r * os + l] for
 * outputs l < nl. VNNI: each sub-block's dot in 32 bits from vpdpbusd (two
 * chains of four), each chain times its scale with vpdpwssd (below), and the
 * mins with vpdpwssd: the same integers. */
INLINE void kpanel_dot(int64_t n, const kp_blk *P, const uint8_t *xp, size_t xps, int nl, float *out, int64_t os,
                       const int R, const int VNNI, const int FIVE) {
    const int64_t nsb = n / 256;
    __m256 sum[KP_GROUP];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) sum[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nsb; b++, P++) {
        const rw_block_q8_K *xb[KP_GROUP];
        __m256i is[KP_GROUP], ms[KP_GROUP];
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            xb[r] = (const rw_block_q8_K *)(xp + (size_t)r * xps) + b;
            is[r] = ms[r] = _mm256_setzero_si256();
        }
        if (VNNI) {
            for (int j = 0; j < 8; j++) {
                /* each quant register once for the R rows: two chains per row */
                __m256i d0[KP_GROUP], d1[KP_GROUP];
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) d0[r] = d1[r] = _mm256_setzero_si256();
                _Pragma("GCC unroll 4") for (int s = 0; s < 8; s += 2) {
                    const __m256i w0 = _mm256_loadu_si256((const __m256i *)P->q[j][s]);
                    const __m256i w1 = _mm256_loadu_si256((const __m256i *)P->q[j][s + 1]);
                    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                        const int8_t *xq = xb[r]->qs + 32 * j + 4 * s;
                        d0[r] = dpbusd(d0[r], w0, bcast4(xq));
                        d1[r] = dpbusd(d1[r], w1, bcast4(xq + 4));
                    }
                }
                /* each chain holds 16 products (|.| <= 16 * 15 * 128 < 2^15),
                 * so its low 16 bits are its value: vpdpwssd with (scale, 0)
                 * pairs adds scale * chain, one instruction (not vpmulld's two) */
                const __m256i sc = _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)P->sc[j]), 16);
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) is[r] = dpwssd(dpwssd(is[r], d0[r], sc), d1[r], sc);
            }
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)
                ms[r] = dpwssd(ms[r], _mm256_loadu_si256((const __m256i *)P->mn[j]), bcast4(xb[r]->bsums + 2 * j));
        } else {
            if (R == 4)
                for (int j = 0; j < 8; j++) {
                    const int8_t *const xq[4] = {xb[0]->qs + 32 * j, xb[1]->qs + 32 * j, xb[2]->qs + 32 * j,
                                                 xb[3]->qs + 32 * j};
                    rw_avx2_sum4(P->q[j], P->sc[j], xq, is, FIVE);
                }
            else /* fewer rows (the last of a call's rows) */
                for (int j = 0; j < 8; j++) {
                    const __m256i sc = _mm256_loadu_si256((const __m256i *)P->sc[j]);
                    /* row by row, the sub-block's quants read again from L1
                     * for each row (the empty asm hides that the rows read
                     * the same address) */
                    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                        const int8_t *xq = xb[r]->qs + 32 * j;
                        const uint8_t(*q)[32] = P->q[j];
                        __asm__("" : "+r"(q));
                        if (FIVE) /* quants 0..31: two halves of four, at most 8 * 31 * 127 < 2^15 */
                            _Pragma("GCC unroll 2") for (int s0 = 0; s0 < 8; s0 += 4) is[r] =
                                _mm256_add_epi32(is[r], _mm256_madd_epi16(kp_sum16(q, xq, s0, 4), sc));
                        else is[r] = _mm256_add_epi32(is[r], _mm256_madd_epi16(kp_sum16(q, xq, 0, 8), sc));
                    }
                }
            /* min_j * (bsum 2j + bsum 2j+1) two sub-blocks per vpmaddwd
             * (the VNNI form above keeps one per sub-block: its vpdpwssd
             * fuses the add, fewer instructions than these pairs):
             * the panel's (min 2k, min 2k+1) pairs against the activation's
             * sub-block sums as 16-bit pairs (|sum| <= 32 * 127): the same
             * integer */
            __m256i mp[4];
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) mp[k] =
                _mm256_blend_epi16(_mm256_loadu_si256((const __m256i *)P->mn[2 * k]),
                                   _mm256_loadu_si256((const __m256i *)P->mn[2 * k + 1]), 0xAA);
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                const __m256i s8 =
                    _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb[r]->bsums), _mm256_set1_epi16(1));
                const __m256i s16 =
                    _mm256_packs_epi32(s8, s8); /* dwords 0, 1, 4, 5: sub-blocks (0,1) (2,3) (4,5) (6,7) */
                _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) ms[r] = _mm256_add_epi32(
                    ms[r],
                    _mm256_madd_epi16(mp[k], _mm256_permutevar8x32_epi32(s16, _mm256_set1_epi32(k < 2 ? k : k + 2))));
            }
        }
        const __m256 d = _mm256_loadu_ps(P->d), dmin = _mm256_loadu_ps(P->dmin);
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            const __m256 dx = _mm256_set1_ps(xb[r]->d);
            const __m256 t = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(is[r])),
                                           _mm256_mul_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(ms[r])));
            sum[r] = _mm256_add_ps(sum[r], t);
        }
    }
    const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(nl), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) _mm256_maskstore_ps(out + r * os, lanes, sum[r]);
}

/* w: the panel of weight row 0 (ws: panel bytes per row, so a panel spans
 * 8 * ws); nw rows from there, nx <= KP_MAX_NX activation rows;
 * out[r * os + i]. */
INLINE void tile_p_q4_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                        float *out, int64_t os, const int VNNI, const int FIVE) {
    for (int i = 0; i < nw; i += KP_ROWS) {
        const kp_blk *P = (const kp_blk *)(w + (size_t)i * ws);
        const int nl = nw - i < KP_ROWS ? nw - i : KP_ROWS;
        /* up to 4 rows at a time: their 16-bit and 32-bit sums stay in the
         * 16 registers (the panel is read again from the cache for the next 4) */
        for (int r0 = 0; r0 < nx; r0 += 4) {
            const uint8_t *x0 = xp + (size_t)r0 * xps;
            float *o0 = out + r0 * os + i;
            switch (nx - r0 < 4 ? nx - r0 : 4) {
            case 1: kpanel_dot(n, P, x0, xps, nl, o0, os, 1, VNNI, FIVE); break;
            case 2: kpanel_dot(n, P, x0, xps, nl, o0, os, 2, VNNI, FIVE); break;
            case 3: kpanel_dot(n, P, x0, xps, nl, o0, os, 3, VNNI, FIVE); break;
            case 4: kpanel_dot(n, P, x0, xps, nl, o0, os, 4, VNNI, FIVE); break;
            default: break;
            }
        }
    }
}

void rw_avx2_tile_p_q4_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os) {
    if (rw_avx2_vnni()) tile_p_q4_K(n, w, ws, nw, xp, xps, nx, out, os, 1, 0);
    else tile_p_q4_K(n, w, ws, nw, xp, xps, nx, out, os, 0, 0);
}

/* Q5_K: the Q4_K panel with 5-bit quants. The VNNI form's trick (a chain
 * of 16 products read as 16 bits) does not hold for them (16 * 31 * 128 >
 * 2^15), so they take the plain form's instructions on every CPU (exact:
 * the same integers). */
void rw_avx2_tile_p_q5_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os) {
    tile_p_q4_K(n, w, ws, nw, xp, xps, nx, out, os, 0, 1);
}

/* ==== Q6_K ===============================================================
 *
 * The same panel layout with 16 sub-blocks of 16 (4 dwords each) and the
 * rows' signed 8-bit scales, the quants as bytes 0..63 (the -32 not
 * applied). Per sub-block the reference's isum term scale * sum (q - 32) x
 * is scale * dot - 32 * scale * bsum (exact): dot from two vpmaddubsw pairs
 * added in 16 bits (at most 4 * 63 * 128 = 32256 < 2^15) and a vpmaddwd
 * (AVX-VNNI: vpdpwssd) with the scales; the offsets of two sub-blocks at a
 * time from one vpmaddwd of the scale pairs sp with the activation's two
 * 16-sums; then sum += (d * dx) * isum. */
typedef struct {
    uint8_t q[16][4][32];
    int16_t sc[16][16]; /* sub-block j's scale, twice per row */
    int16_t sp[8][16];  /* sub-blocks 2p and 2p + 1's scales per row */
    float d[8];
} kp6_blk;

_Static_assert(sizeof(kp6_blk) == 8 * 356, "Q6_K panel block");

size_t rw_avx2_p_wbytes_q6_K(int64_t n) { return (size_t)(n / 256) * (sizeof(kp6_blk) / KP_ROWS); }

static void pack_super6(const uint8_t *row0, size_t ws, int n_left, int64_t b, kp6_blk *p) {
    const __m256i low = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3);
    const rw_block_q6_K *blk[8];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) blk[i] =
        (const rw_block_q6_K *)(row0 + (size_t)(i < n_left ? i : 0) * ws) + b;
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        /* the two ql registers and the qh register of half h transposed
         * (a dword keeps its bytes), then each 32-element chunk c = 4h + k
         * (sub-blocks 2c and 2c + 1) made from them */
        __m256i l0[8], l1[8], hh[8], t0[8], t1[8], th[8];
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
            const bool in = i < n_left;
            l0[i] = in ? _mm256_loadu_si256((const __m256i *)(blk[i]->ql + 64 * h)) : _mm256_setzero_si256();
            l1[i] = in ? _mm256_loadu_si256((const __m256i *)(blk[i]->ql + 64 * h + 32)) : _mm256_setzero_si256();
            hh[i] = in ? _mm256_loadu_si256((const __m256i *)(blk[i]->qh + 32 * h)) : _mm256_setzero_si256();
        }
        rw_avx2_transpose8_epi32(l0, t0);
        rw_avx2_transpose8_epi32(l1, t1);
        rw_avx2_transpose8_epi32(hh, th);
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
            const int c = 4 * h + k;
            _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
                const __m256i ql = k % 2 ? t1[s] : t0[s];
                const __m256i lo = k < 2 ? _mm256_and_si256(ql, low) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(th[s], 2 * k), three);
                _mm256_storeu_si256((__m256i *)p->q[2 * c + s / 4][s % 4],
                                    _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4))); /* hi < 4: no carry */
            }
        }
    }
    /* the scales: row i's sixteen as 16-bit values; sp's dword q is the
     * pair (2q, 2q + 1) as they lie, sc's dword j is scale j twice; both
     * transposed so that a register holds row i in lane i */
    __m256i sp[8], sa[8], sb[8], o[8];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
        const __m256i s16 = i < n_left ? _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)blk[i]->scales))
                                       : _mm256_setzero_si256();
        const __m256i lo = _mm256_unpacklo_epi16(s16, s16), hi = _mm256_unpackhi_epi16(s16, s16);
        sp[i] = s16;
        sa[i] = _mm256_permute2x128_si256(lo, hi, 0x20); /* scales 0..7 twice */
        sb[i] = _mm256_permute2x128_si256(lo, hi, 0x31); /* scales 8..15 twice */
        p->d[i] = i < n_left ? _cvtsh_ss(blk[i]->d) : 0.0f;
    }
    rw_avx2_transpose8_epi32(sp, o);
    _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) _mm256_storeu_si256((__m256i *)p->sp[q], o[q]);
    rw_avx2_transpose8_epi32(sa, o);
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) _mm256_storeu_si256((__m256i *)p->sc[j], o[j]);
    rw_avx2_transpose8_epi32(sb, o);
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) _mm256_storeu_si256((__m256i *)p->sc[8 + j], o[j]);
}

void rw_avx2_pack_q6_K_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    const int64_t nsb = n / 256;
    for (int64_t p0 = 0; p0 < n_out; p0 += KP_ROWS) {
        kp6_blk *p = (kp6_blk *)(dst + (size_t)p0 * rw_avx2_p_wbytes_q6_K(n));
        for (int64_t b = 0; b < nsb; b++) pack_super6(w + (size_t)p0 * ws, ws, (int)(n_out - p0), b, p + b);
    }
}

INLINE void kpanel6_dot(int64_t n, const kp6_blk *P, const uint8_t *xp, size_t xps, int nl, float *out, int64_t os,
                        const int R, const int VNNI) {
    const int64_t nsb = n / 256;
    __m256 sum[KP_GROUP];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) sum[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nsb; b++, P++) {
        const rw_block_q8_K *xb[KP_GROUP];
        __m256i is[KP_GROUP], ms[KP_GROUP];
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            xb[r] = (const rw_block_q8_K *)(xp + (size_t)r * xps) + b;
            is[r] = ms[r] = _mm256_setzero_si256();
        }
        for (int j = 0; j < 16; j++) {
            const __m256i sc = _mm256_loadu_si256((const __m256i *)P->sc[j]);
            /* the sub-block's 4 quant registers once for the R rows */
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)P->q[j][0]),
                          w1 = _mm256_loadu_si256((const __m256i *)P->q[j][1]),
                          w2 = _mm256_loadu_si256((const __m256i *)P->q[j][2]),
                          w3 = _mm256_loadu_si256((const __m256i *)P->q[j][3]);
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                const int8_t *xq = xb[r]->qs + 16 * j;
                const __m256i a =
                    _mm256_add_epi16(_mm256_maddubs_epi16(w0, bcast4(xq)), _mm256_maddubs_epi16(w1, bcast4(xq + 4)));
                const __m256i c = _mm256_add_epi16(_mm256_maddubs_epi16(w2, bcast4(xq + 8)),
                                                   _mm256_maddubs_epi16(w3, bcast4(xq + 12)));
                if (VNNI) is[r] = dpwssd(dpwssd(is[r], a, sc), c, sc);
                else
                    is[r] =
                        _mm256_add_epi32(is[r], _mm256_add_epi32(_mm256_madd_epi16(a, sc), _mm256_madd_epi16(c, sc)));
            }
        }
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) _Pragma("GCC unroll 8") for (int p = 0; p < 8; p++) {
            const __m256i sp = _mm256_loadu_si256((const __m256i *)P->sp[p]), bs = bcast4(xb[r]->bsums + 2 * p);
            ms[r] = VNNI ? dpwssd(ms[r], sp, bs) : _mm256_add_epi32(ms[r], _mm256_madd_epi16(sp, bs));
        }
        const __m256 d = _mm256_loadu_ps(P->d);
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            const __m256i isum = _mm256_sub_epi32(is[r], _mm256_slli_epi32(ms[r], 5));
            sum[r] = _mm256_add_ps(sum[r],
                                   _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(xb[r]->d)), _mm256_cvtepi32_ps(isum)));
        }
    }
    const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(nl), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) _mm256_maskstore_ps(out + r * os, lanes, sum[r]);
}

INLINE void tile_p_q6_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                        float *out, int64_t os, const int VNNI) {
    for (int i = 0; i < nw; i += KP_ROWS) {
        const kp6_blk *P = (const kp6_blk *)(w + (size_t)i * ws);
        const int nl = nw - i < KP_ROWS ? nw - i : KP_ROWS;
        for (int r0 = 0; r0 < nx; r0 += 4) {
            const uint8_t *x0 = xp + (size_t)r0 * xps;
            float *o0 = out + r0 * os + i;
            switch (nx - r0 < 4 ? nx - r0 : 4) {
            case 1: kpanel6_dot(n, P, x0, xps, nl, o0, os, 1, VNNI); break;
            case 2: kpanel6_dot(n, P, x0, xps, nl, o0, os, 2, VNNI); break;
            case 3: kpanel6_dot(n, P, x0, xps, nl, o0, os, 3, VNNI); break;
            case 4: kpanel6_dot(n, P, x0, xps, nl, o0, os, 4, VNNI); break;
            default: break;
            }
        }
    }
}

void rw_avx2_tile_p_q6_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os) {
    if (rw_avx2_vnni()) tile_p_q6_K(n, w, ws, nw, xp, xps, nx, out, os, 1);
    else tile_p_q6_K(n, w, ws, nw, xp, xps, nx, out, os, 0);
}
