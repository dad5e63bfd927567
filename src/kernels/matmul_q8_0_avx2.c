/* matmul_q8_0_avx2.c - Q8_0 on AVX2 over repacked weights: the panel form.
 *
 * With many activation rows (prefill) the one-row dot of matmul_avx2.c
 * spends as much on reducing each block's lanes to one sum as on the
 * products. Here a panel holds 8 weight rows, one per 32-bit lane: for each
 * block, dword s of the 8 rows' quants in one register (s = 0..7), then,
 * after the quants of every block, the 8 rows' f16 scales per block. An
 * activation row's quants are broadcast 4 bytes at a time, so a lane
 * gathers its own row's exact block sum with no reduction across lanes,
 * whatever the number of activation rows, and a panel block is loaded once
 * for all of them. The panels take as many bytes as the rows in the GGUF
 * layout (8 x 34 per block) and are packed on the fly into per-thread
 * scratch by matmul.c (pack_p), or once by rw_matmul_pack.
 *
 * Per output the arithmetic is the other Q8_0 forms' (matmul_ref.c): the
 * block's exact integer sum isum_b, acc[k] = fma(isum_b, dw_b * dx_b,
 * acc[k]) for blocks 8o+2k and 8o+2k+1 of each octet o in order, y =
 * (acc[0] + acc[1]) + (acc[2] + acc[3]). acc[k] depends on no other k, so
 * the blocks are stored k outermost (then octet, then the pair), as in the
 * AVX-512 panel form.
 *
 * The block sum: plain AVX2 multiplies |w| by x * sign(w) with vpmaddubsw
 * (pairs of products into 16 bits, at most 2 * 128 * 127 < 2^15) and adds
 * pairs into 32-bit lanes with vpmaddwd; where the CPU has AVX-VNNI (the
 * 256-bit VEX vpdpbusd of Alder Lake and Zen 5), w + 128 (unsigned) times
 * x is summed in one vpdpbusd per 4 products, and the bias taken off with
 * -128 * the sum of the activation block's quants. The decoded types
 * whose values lie in -16..15 are stored unsigned, value + 16 (small_type
 * below), so both take them as they are, the bias taken off the same way.
 * All are exact, so they give the same bits; rw_matmul_set_avx_vnni(false)
 * (the CLI's RW_AVX_VNNI=0) keeps to plain AVX2, for comparisons and to
 * test both on one machine.
 */
#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/matmul_avx2_int.h"
#include "kernels/quant_int.h"

#define INLINE static inline __attribute__((always_inline))

enum { Q8P_ROWS = RW_AVX2_Q8P_ROWS, Q8P_MAX_NX = RW_AVX2_Q8P_MAX_NX };

/* Bytes per row and block of the decoded types' panels (f32 scales). */
enum { WT_BLK_BYTES = 36 };

/* The decoded types whose values lie in -16..15 (Q4_0, Q5_0, MXFP4) are
 * stored in their panels as value + SMALL_BIAS, 0..31: unsigned, so that
 * vpmaddubsw takes them as they are (no sign trick) and AVX-VNNI's vpdpbusd
 * without the +128; the bias times the activation block's sum is taken off
 * (a block sum starts at -SMALL_BIAS * sum, from corr = -128 * sum). The
 * same exact integers. */
enum { SMALL_BIAS = 16 };
_Static_assert(128 / SMALL_BIAS == 8, "panel_dot shifts the bias correction by 3");
INLINE int small_type(const int T) { return T == RW_AVX2_WT_Q4_0 || T == RW_AVX2_WT_Q5_0 || T == RW_AVX2_WT_MXFP4; }

/* One panel block: dword s of the block of rows 0..7 at q[s][4 * row]. */
typedef struct {
    uint8_t q[8][32];
} wp_blk;

/* One activation row's block: quants, scale (the f16 value), -128 * the
 * sum of the quants (for the VNNI path's bias). */
typedef struct {
    int8_t q[32];
    float d;
    int32_t corr;
} xp_blk;

bool rw_avx2_vnni(void) {
    static _Atomic int has = -1; /* the CPU's answer, asked once */
    int v = atomic_load(&has);
    if (v < 0) {
        v = rw_cpu_has_avx_vnni();
        atomic_store(&has, v);
    }
    return v && rw_matmul_avx_vnni_allowed();
}

/* rw_quantize_act_q8_0 of one block in vectors, the same values: amax is
 * order-free, q = x * (127 / amax) rounded to nearest even (the
 * reference's rw_nearest_int; |q| <= 127), d = amax / 127 rounded to f16.
 * A block holding a NaN or an infinity goes to the reference. */
void rw_avx2_act_q8_0(const float *x, int8_t q[32], rw_f16 *d, int *sum) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int c = 0; c < 4; c++) {
        v[c] = _mm256_loadu_ps(x + 8 * c);
        const __m256 a = _mm256_andnot_ps(sign, v[c]);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, _mm256_set1_ps(3.402823466e38f), _CMP_NLE_UQ));
        m = _mm256_max_ps(m, a);
    }
    if (_mm256_movemask_ps(bad)) {
        rw_block_q8_0 b;
        rw_quantize_act_q8_0(x, &b, 1);
        memcpy(q, b.qs, 32);
        *d = b.d;
        int s = 0;
        for (int i = 0; i < 32; i++) s += b.qs[i];
        *sum = s;
        return;
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h), id = amax != 0.0f ? 127.f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i i[4];
    for (int c = 0; c < 4; c++) i[c] = _mm256_cvtps_epi32(_mm256_mul_ps(v[c], vid));
    const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    const __m256i t = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
    __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    u = _mm_add_epi32(u, _mm_shuffle_epi32(u, _MM_SHUFFLE(1, 0, 3, 2)));
    u = _mm_add_epi32(u, _mm_shuffle_epi32(u, _MM_SHUFFLE(2, 3, 0, 1)));
    *sum = _mm_cvtsi128_si32(u);
    *d = (rw_f16)_cvtss_sh(amax / 127.f, _MM_FROUND_TO_NEAREST_INT);
}

size_t rw_avx2_p_bytes_q8_0(int64_t n) { return (size_t)(n / 32) * sizeof(xp_blk); }

void rw_avx2_convert_q8_0_p(const float *const *rows, int n_rows, void *xp, int64_t n) {
    xp_blk *x = xp;
    if (n_rows < 1) {
        memset(xp, 0, rw_avx2_p_bytes_q8_0(n));
        return;
    }
    for (int64_t b = 0; b < n / 32; b++) {
        rw_f16 d;
        int sum;
        rw_avx2_act_q8_0(rows[0] + 32 * b, x[b].q, &d, &sum);
        x[b].d = _cvtsh_ss(d);
        x[b].corr = -128 * sum;
    }
}

/* pack_block's bytes for the 4-bit types (Q4_0, IQ4_NL, MXFP4) with all 8
 * rows present: the rows' 16 packed bytes transposed as dwords before they
 * are split (row i and i + 4 in one vector's halves, a 4 x 4 transpose per
 * half), so that dword t of the 8 rows holds elements 4t..4t+3 in its low
 * nibbles and 16+4t.. in its high ones: panel dwords t and t + 4, decoded
 * as rw_avx2_wt_q decodes them; the scales as rw_avx2_wt_d, 8 at a time. */
INLINE void pack_block_nibbles(const uint8_t *row0, size_t ws, int64_t b, wp_blk *q, float *df, const int T) {
    const size_t bb = rw_avx2_wt_bytes(T), qo = T == RW_AVX2_WT_MXFP4 ? 1 : 2; /* the quants follow the scale */
    const uint8_t *p[8];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) p[i] = row0 + (size_t)i * ws + (size_t)b * bb;
    __m256i v[4];
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) v[i] =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p[i] + qo))),
                                _mm_loadu_si128((const __m128i *)(p[i + 4] + qo)), 1);
    const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    const __m256i o[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2), _mm256_unpacklo_epi64(t1, t3),
                          _mm256_unpackhi_epi64(t1, t3)};
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i bias = _mm256_set1_epi8(small_type(T) ? SMALL_BIAS : 0);
    const __m256i tab =
        _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128(
                            (const __m128i *)(T == RW_AVX2_WT_IQ4_NL ? rw_avx2_iq4nl_values : rw_avx2_mxfp4_values))),
                        bias);
    _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) {
        const __m256i lo = _mm256_and_si256(o[t], m4), hi = _mm256_and_si256(_mm256_srli_epi16(o[t], 4), m4);
        const __m256i q8 = _mm256_set1_epi8(SMALL_BIAS - 8); /* Q4_0: nibble - 8 + the bias */
        const __m256i dlo = T == RW_AVX2_WT_Q4_0 ? _mm256_add_epi8(lo, q8) : _mm256_shuffle_epi8(tab, lo);
        const __m256i dhi = T == RW_AVX2_WT_Q4_0 ? _mm256_add_epi8(hi, q8) : _mm256_shuffle_epi8(tab, hi);
        _mm256_storeu_si256((__m256i *)q->q[t], dlo);
        _mm256_storeu_si256((__m256i *)q->q[t + 4], dhi);
    }
    if (T == RW_AVX2_WT_MXFP4) {
        _mm256_storeu_ps(df, rw_avx2_e8m0_half8(_mm256_setr_epi32(p[0][0], p[1][0], p[2][0], p[3][0], p[4][0], p[5][0],
                                                                  p[6][0], p[7][0])));
    } else {
        uint16_t h[8];
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) memcpy(&h[i], p[i], 2);
        _mm256_storeu_ps(df, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
    }
}

/* Block b of the 8 weight rows from row0 (ws apart; n_left of them exist)
 * into one panel block and its 8 scales (Q8_0: f16 in d; the decoded
 * types: f32 in df); missing rows get weights and scales 0. An 8 x 8
 * transpose of dwords. */
INLINE void pack_block(const uint8_t *row0, size_t ws, int n_left, int64_t b, wp_blk *q, uint16_t *d, float *df,
                       const int T) {
    if ((T == RW_AVX2_WT_Q4_0 || T == RW_AVX2_WT_IQ4_NL || T == RW_AVX2_WT_MXFP4) && n_left >= 8) {
        pack_block_nibbles(row0, ws, b, q, df, T);
        return;
    }
    __m256i r[8];
    for (int i = 0; i < 8; i++) {
        if (i < n_left) {
            const uint8_t *row = row0 + (size_t)i * ws;
            r[i] = rw_avx2_wt_q(row, b, T);
            if (small_type(T)) r[i] = _mm256_add_epi8(r[i], _mm256_set1_epi8(SMALL_BIAS));
            if (T == RW_AVX2_WT_Q8_0) d[i] = ((const rw_block_q8_0 *)row + b)->d;
            else df[i] = rw_avx2_wt_d(row, b, T);
        } else {
            r[i] = _mm256_setzero_si256();
            if (T == RW_AVX2_WT_Q8_0) d[i] = 0;
            else df[i] = 0.0f;
        }
    }
    __m256i o[8];
    rw_avx2_transpose8_epi32(r, o);
    for (int s = 0; s < 8; s++) _mm256_storeu_si256((__m256i *)q->q[s], o[s]);
}

/* The rows are read in block order (8 sequential streams, prefetched) and
 * each block written to its place in the tile's order: k = (b % 8) / 2
 * outermost, then the octet, then the pair. */
INLINE void pack_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst, const int T) {
    const int64_t nb = n / 32;
    const size_t blk_bytes = T == RW_AVX2_WT_Q8_0 ? sizeof(rw_block_q8_0) : WT_BLK_BYTES;
    int64_t base[4]; /* the place of block (k, octet 0, pair 0): the blocks of every k' < k come first */
    for (int k = 0, at = 0; k < 4; k++) {
        base[k] = at;
        const int64_t rest = nb % 8 - 2 * k;
        at += (int)(2 * (nb / 8) + (rest < 0 ? 0 : rest > 2 ? 2 : rest));
    }
    for (int64_t p0 = 0; p0 < n_out; p0 += Q8P_ROWS) {
        wp_blk *q = (wp_blk *)(dst + (size_t)p0 * (size_t)nb * blk_bytes);
        uint16_t(*d)[8] = (uint16_t(*)[8])(q + nb);
        float(*df)[8] = (float(*)[8])(q + nb);
        const int n_left = (int)(n_out - p0);
        const uint8_t *row0 = w + (size_t)p0 * ws;
        for (int64_t b = 0; b < nb; b++) {
            if (b % 2 == 0)
                for (int i = 0; i < 8 && i < n_left; i++)
                    _mm_prefetch((const char *)(row0 + (size_t)i * ws) + (b + 16) * rw_avx2_wt_bytes(T), _MM_HINT_T0);
            const int64_t at = base[(b % 8) / 2] + 2 * (b / 8) + b % 2;
            pack_block(row0, ws, n_left, b, q + at, d[at], df[at], T);
        }
    }
}

void rw_avx2_pack_q8_0_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    pack_p(w, ws, n, n_out, dst, RW_AVX2_WT_Q8_0);
}
void rw_avx2_pack_q4_0_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    pack_p(w, ws, n, n_out, dst, RW_AVX2_WT_Q4_0);
}
void rw_avx2_pack_q5_0_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    pack_p(w, ws, n, n_out, dst, RW_AVX2_WT_Q5_0);
}
void rw_avx2_pack_iq4_nl_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    pack_p(w, ws, n, n_out, dst, RW_AVX2_WT_IQ4_NL);
}
void rw_avx2_pack_mxfp4_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst) {
    pack_p(w, ws, n, n_out, dst, RW_AVX2_WT_MXFP4);
}
size_t rw_avx2_p_wbytes_wt(int64_t n) { return (size_t)(n / 32) * WT_BLK_BYTES; }

/* vpmaddwd's multipliers that widen pairs of 16-bit sums to 32 bits */
static const int16_t ONES16[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

INLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* One panel (8 outputs) against R activation rows; out[r * os + l] for
 * outputs l < nl. VNNI: the AVX-VNNI block sum (see the file head). */
INLINE void panel_dot(int64_t n, const wp_blk *P, const uint8_t *xp, size_t xps, int nl, float *out, int64_t os,
                      const int R, const int VNNI, const int F32S, const int SMALL) {
    const int64_t nb = n / 32, n_oct = (nb + 7) / 8;
    const uint16_t(*D)[8] = (const uint16_t(*)[8])(P + nb);
    const float(*DF)[8] = (const float(*)[8])(P + nb);
    const __m256i one = _mm256_set1_epi16(1), bias = _mm256_set1_epi8((char)0x80);
    __m256 part[2][Q8P_MAX_NX]; /* (acc[0] + acc[1]) and (acc[2] + acc[3]) */
    for (int k = 0; k < 4; k++) {
        __m256 acc[Q8P_MAX_NX];
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (int64_t o = 0; o < n_oct; o++) _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
                const int64_t b = 8 * o + 2 * k + h;
                if (b >= nb) break;
                __m256i is[Q8P_MAX_NX], p16[Q8P_MAX_NX];
                const xp_blk *xb[Q8P_MAX_NX];
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                    xb[r] = (const xp_blk *)(xp + (size_t)r * xps) + b;
                    /* small: corr / (128 / SMALL_BIAS) = corr / 8 as a shift (corr = -128 * sum: exact) */
                    is[r] = SMALL  ? _mm256_srai_epi32(_mm256_set1_epi32(xb[r]->corr), 3)
                            : VNNI ? _mm256_set1_epi32(xb[r]->corr)
                                   : _mm256_setzero_si256();
                }
                if (SMALL && !VNNI) { /* four rows at a time: their 32- and 16-bit sums in 8 registers */
                    _Pragma("GCC unroll 2") for (int r0 = 0; r0 < R; r0 += 4) {
                        if (r0 + 4 <= R) { /* the asm form (matmul_avx2_int.h), vpmaddwd with ones */
                            const int8_t *const xq[4] = {xb[r0]->q, xb[r0 + 1]->q, xb[r0 + 2]->q, xb[r0 + 3]->q};
                            rw_avx2_sum4(P->q, ONES16, xq, is + r0, 1);
                            continue;
                        }
                        _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
                            const __m256i w = _mm256_loadu_si256((const __m256i *)P->q[s]);
                            /* four pair sums in 16 bits: at most 4 * 2 * 31 * 127 < 2^15 */
                            _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
                                const int r = r0 + q;
                                if (r >= R) break;
                                const __m256i p = _mm256_maddubs_epi16(w, bcast4(xb[r]->q + 4 * s));
                                p16[r] = s % 4 ? _mm256_add_epi16(p16[r], p) : p;
                                if (s % 4 == 3) is[r] = _mm256_add_epi32(is[r], _mm256_madd_epi16(p16[r], one));
                            }
                        }
                    }
                } else {
                    _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
                        const __m256i w = _mm256_loadu_si256((const __m256i *)P->q[s]);
                        if (VNNI) {
                            const __m256i wu = SMALL ? w : _mm256_xor_si256(w, bias); /* unsigned: w + 128 */
                            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                                const __m256i x = bcast4(xb[r]->q + 4 * s);
                                __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(is[r]) : "x"(wu), "x"(x));
                            }
                        } else {
                            const __m256i aw = _mm256_sign_epi8(w, w);
                            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                                const __m256i x = _mm256_sign_epi8(bcast4(xb[r]->q + 4 * s), w);
                                is[r] = _mm256_add_epi32(is[r], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, x), one));
                                /* kept a chain: regrouped into a tree of the eight
                                 * products, the compiler spills them (10% slower) */
                                __asm__("" : "+x"(is[r]));
                            }
                        }
                    }
                }
                const __m256 dw = F32S ? _mm256_loadu_ps(*DF) : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)*D));
                P++, D++, DF++;
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                    const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(xb[r]->d));
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[r]), sc, acc[r]);
                }
            }
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
            if (k % 2 == 0) part[k / 2][r] = acc[r];
            else part[k / 2][r] = _mm256_add_ps(part[k / 2][r], acc[r]);
        }
    }
    const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(nl), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _mm256_maskstore_ps(out + r * os, lanes, _mm256_add_ps(part[0][r], part[1][r]));
}

#define PANEL_CASES(NX, XP, OUT, VNNI, SMALL)                                   \
    switch (NX) { /* a constant row count keeps the sums in registers */        \
    case 1: panel_dot(n, P, XP, xps, nl, OUT, os, 1, VNNI, F32S, SMALL); break; \
    case 2: panel_dot(n, P, XP, xps, nl, OUT, os, 2, VNNI, F32S, SMALL); break; \
    case 3: panel_dot(n, P, XP, xps, nl, OUT, os, 3, VNNI, F32S, SMALL); break; \
    case 4: panel_dot(n, P, XP, xps, nl, OUT, os, 4, VNNI, F32S, SMALL); break; \
    case 5: panel_dot(n, P, XP, xps, nl, OUT, os, 5, VNNI, F32S, SMALL); break; \
    case 6: panel_dot(n, P, XP, xps, nl, OUT, os, 6, VNNI, F32S, SMALL); break; \
    case 7: panel_dot(n, P, XP, xps, nl, OUT, os, 7, VNNI, F32S, SMALL); break; \
    case 8: panel_dot(n, P, XP, xps, nl, OUT, os, 8, VNNI, F32S, SMALL); break; \
    default: break;                                                             \
    }

/* The small types' plain form takes 7 or 8 activation rows in passes of
 * four: with so many, their 32- and 16-bit sums and accumulators outgrow
 * the 16 registers and the compiler spills them; the panel is read again
 * from cache. Measured on Zen 3 (two builds side by side, both orders),
 * 512 rows: Q4_0 9%, Q5_0 6%, MXFP4 12% less time; 5 and 6 rows gain
 * nothing from a split, and Q8_0's one-step sums do not gain, so it keeps
 * 8. */
enum { SMALL_PLAIN_NX = 4, SMALL_PLAIN_SPLIT = 6 };

INLINE void tile_p_plain(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os, const int F32S, const int SMALL) {
    for (int i = 0; i < nw; i += Q8P_ROWS) {
        const wp_blk *P = (const wp_blk *)(w + (size_t)i * ws);
        const int nl = nw - i < Q8P_ROWS ? nw - i : Q8P_ROWS;
        const int step = SMALL && nx > SMALL_PLAIN_SPLIT ? SMALL_PLAIN_NX : Q8P_MAX_NX;
        for (int r0 = 0; r0 < nx; r0 += step)
            PANEL_CASES(nx - r0 < step ? nx - r0 : step, xp + (size_t)r0 * xps, out + r0 * os + i, 0, SMALL)
    }
}

INLINE void tile_p_vnni(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                        float *out, int64_t os, const int F32S, const int SMALL) {
    for (int i = 0; i < nw; i += Q8P_ROWS) {
        const wp_blk *P = (const wp_blk *)(w + (size_t)i * ws);
        const int nl = nw - i < Q8P_ROWS ? nw - i : Q8P_ROWS;
        PANEL_CASES(nx, xp, out + i, 1, SMALL)
    }
}

/* w: the panel of weight row 0 (ws: bytes per row in the GGUF layout, so a
 * panel spans 8 * ws); nw rows from there, nx <= Q8P_MAX_NX activation
 * rows; out[r * os + i]. */
void rw_avx2_tile_p_q8_0(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os) {
    if (rw_avx2_vnni()) tile_p_vnni(n, w, ws, nw, xp, xps, nx, out, os, 0, 0);
    else tile_p_plain(n, w, ws, nw, xp, xps, nx, out, os, 0, 0);
}

void rw_avx2_tile_p_wt(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                       float *out, int64_t os) {
    if (rw_avx2_vnni()) tile_p_vnni(n, w, ws, nw, xp, xps, nx, out, os, 1, 0);
    else tile_p_plain(n, w, ws, nw, xp, xps, nx, out, os, 1, 0);
}

/* The decoded types whose panels hold value + SMALL_BIAS (Q4_0, Q5_0,
 * MXFP4, see small_type): vpmaddubsw of the unsigned weights as they are,
 * four pair sums added in 16 bits and widened with vpmaddwd (the same
 * integers). */
void rw_avx2_tile_p_wt_small(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                             float *out, int64_t os) {
    if (rw_avx2_vnni()) tile_p_vnni(n, w, ws, nw, xp, xps, nx, out, os, 1, 1);
    else tile_p_plain(n, w, ws, nw, xp, xps, nx, out, os, 1, 1);
}
