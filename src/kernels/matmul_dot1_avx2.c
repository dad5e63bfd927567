/* matmul_dot1_avx2.c - one activation row against many weight rows on AVX2
 * (decode), for the types whose one-row form needs more than the tiles of
 * matmul_avx2.c: IQ4_XS.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/matmul_avx2_int.h"
#include "kernels/quant_int.h"

#define INLINE static inline __attribute__((always_inline))

/* Bytes ahead in a row that the one-row dots prefetch (about the memory
 * latency's worth at their speed; 1 KiB was too close). */
enum { PF_DIST = 4096 };

/* IQ4_XS: the AVX-512 tier's 16 integer lanes (values biased by +128, so
 * unsigned: lane l of sub-block j sums (v + 128) * x over elements
 * 32j + 4l .. 32j + 4l + 3 times the sub-block's scale; lanes 0-7 the
 * even sub-blocks, 8-15 the odd ones), exact; then its float steps, fma of
 * each half, the 128 * scale . bsums min term off the low half, reduce16.
 * With AVX-VNNI a lane's sum is vpdpbusd of the biased values (a table
 * lookup); without it vpmaddubsw would saturate on them, so it is
 * |x| times v * sign(x) (pair sums at most 2 x 128 x 127) plus 128 times the
 * lane's sum of x: the same integer. */

INLINE float hsum8_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* vpdpbusd of u (unsigned) and x (signed) from zero (AVX-VNNI, VEX form,
 * spelt in asm: the tier's ISA flags do not include it). */
INLINE __m256i dpbusd(__m256i u, __m256i x) {
    __m256i acc = _mm256_setzero_si256();
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "xm"(x));
    return acc;
}

/* The eight sub-block scales of a super-block (minus 32) as int32 lanes:
 * scale j is bits 4j.. of scales_l (4 bits) under bits 2j.. of scales_h. */
INLINE __m256i iq4_xs_scales(const rw_block_iq4_xs *b) {
    uint32_t sl;
    memcpy(&sl, b->scales_l, 4);
    const __m256i shl = _mm256_srlv_epi32(_mm256_set1_epi32((int)sl), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i shh = _mm256_srlv_epi32(_mm256_set1_epi32(b->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    return _mm256_sub_epi32(_mm256_or_si256(_mm256_and_si256(shl, _mm256_set1_epi32(0x0F)),
                                            _mm256_slli_epi32(_mm256_and_si256(shh, _mm256_set1_epi32(3)), 4)),
                            _mm256_set1_epi32(32));
}

/* NR weight rows against NX activation rows (NR x NX <= 2: two rows of
 * one, or one row of two), each sub-block decoded once for them. Sub-block
 * j's 16 bytes go into both halves of a vector (a load, no shuffle), the
 * low half's low nibbles (elements 0-15) and the high half's high ones
 * (16-31) kept: the vector's eight lanes are the AVX-512 tier's lanes of
 * sub-block j, against its 32 activations as they lie. The scale steps are
 * done in f32: every partial sum is an integer below 2^24 (|scale| <= 32, a
 * lane's vpdpbusd at most 4 x 241 x 128, four sub-blocks a half;
 * 128 x |scale| x |bsum| <= 2^24), so exact, and the same value as the
 * integer lanes. Output (r, c) goes to out[c * nw + r]. */
INLINE void iq4_xs_dot_rows(int64_t n, const uint8_t *w, size_t ws, const int NR, const uint8_t *xq, size_t xs,
                            const int NX, float *out, int nw, const int VNNI) {
    const __m256i tab =
        _mm256_xor_si256(/* VNNI: the values + 128 (flipping the sign bit) */
                         _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)rw_avx2_iq4nl_values)),
                         _mm256_set1_epi8(VNNI ? (char)0x80 : 0));
    const __m256i m4 = _mm256_set1_epi8(0x0F), sh = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    const int NO = NR * NX; /* outputs: o = r * NX + c */
    __m256 acc0[2], acc1[2];
    _Pragma("GCC unroll 2") for (int o = 0; o < NO; o++) acc0[o] = acc1[o] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < n / 256; sb++) {
        const rw_block_q8_K *xb[2];
        const rw_block_iq4_xs *b[2];
        float scf[2][8];
        __m256 lo[2], hi[2];
        _Pragma("GCC unroll 2") for (int c = 0; c < NX; c++) xb[c] = (const rw_block_q8_K *)(xq + c * xs) + sb;
        _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++) {
            b[r] = (const rw_block_iq4_xs *)(w + r * ws) + sb;
            _Pragma("GCC unroll 3") for (int l = 0; l < 3; l++) /* 136 bytes a super-block */
                _mm_prefetch((const char *)b[r] + PF_DIST + 64 * l, _MM_HINT_T0);
            _mm256_storeu_ps(scf[r], _mm256_cvtepi32_ps(iq4_xs_scales(b[r])));
        }
        _Pragma("GCC unroll 2") for (int o = 0; o < NO; o++) lo[o] = hi[o] = _mm256_setzero_ps();
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
            __m256i xj[2], ax[2], xs128[2]; /* without VNNI: |x|, and 128 x each lane's sum of x */
            _Pragma("GCC unroll 2") for (int c = 0; c < NX; c++) {
                xj[c] = _mm256_loadu_si256((const __m256i *)(xb[c]->qs + 32 * j));
                ax[c] = xs128[c] = xj[c];
                if (!VNNI) {
                    ax[c] = _mm256_abs_epi8(xj[c]);
                    xs128[c] = _mm256_slli_epi32(
                        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xj[c]), _mm256_set1_epi16(1)), 7);
                }
            }
            __m256i u[2];
            _Pragma("GCC unroll 2") for (int r = 0; r < NR; r++) {
                const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b[r]->qs + 16 * j)));
                u[r] = _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srlv_epi32(q, sh), m4));
            }
            _Pragma("GCC unroll 2") for (int o = 0; o < NO; o++) {
                const int r = o / NX, c = o % NX;
                const __m256i d =
                    VNNI
                        ? dpbusd(u[r], xj[c])
                        : _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(ax[c], _mm256_sign_epi8(u[r], xj[c])),
                                                             _mm256_set1_epi16(1)),
                                           xs128[c]);
                const __m256 p = _mm256_cvtepi32_ps(d);
                if (j % 2 == 0) lo[o] = _mm256_fmadd_ps(p, _mm256_broadcast_ss(&scf[r][j]), lo[o]);
                else hi[o] = _mm256_fmadd_ps(p, _mm256_broadcast_ss(&scf[r][j]), hi[o]);
            }
        }
        /* 128 * scale_j . (bsums 2j + 2j + 1): the same integer as the
         * pairwise vpmaddwd of the min lanes */
        __m256 bs[2];
        _Pragma("GCC unroll 2") for (int c = 0; c < NX; c++) bs[c] = _mm256_cvtepi32_ps(_mm256_slli_epi32(
            _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb[c]->bsums), _mm256_set1_epi16(1)), 7));
        _Pragma("GCC unroll 2") for (int o = 0; o < NO; o++) {
            const int r = o / NX, c = o % NX;
            const __m256 msum = _mm256_mul_ps(_mm256_loadu_ps(scf[r]), bs[c]);
            const __m256 dd = _mm256_set1_ps(_cvtsh_ss(b[r]->d) * xb[c]->d);
            acc0[o] = _mm256_fnmadd_ps(msum, dd, _mm256_fmadd_ps(lo[o], dd, acc0[o]));
            acc1[o] = _mm256_fmadd_ps(hi[o], dd, acc1[o]);
        }
    }
    _Pragma("GCC unroll 2") for (int o = 0; o < NO; o++) out[(o % NX) * nw + o / NX] =
        hsum8_ps(_mm256_add_ps(acc1[o], acc0[o])); /* reduce16 */
}

/* One or two activation rows against nw weight rows (VNNI a constant). */
INLINE void iq4_xs_rows(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx,
                        float *out, const int VNNI) {
    if (nx == 2) {
        for (int i = 0; i < nw; i++) iq4_xs_dot_rows(n, w + (size_t)i * ws, ws, 1, xq, xs, 2, out + i, nw, VNNI);
        return;
    }
    int i = 0;
    for (; i + 2 <= nw; i += 2) iq4_xs_dot_rows(n, w + (size_t)i * ws, ws, 2, xq, xs, 1, out + i, nw, VNNI);
    if (i < nw) iq4_xs_dot_rows(n, w + (size_t)i * ws, ws, 1, xq, xs, 1, out + i, nw, VNNI);
}

void rw_avx2_iq4_xs_rows(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, size_t xs, int nx,
                         float *out, bool vnni) {
    if (vnni) iq4_xs_rows(n, w, ws, nw, xq, xs, nx, out, 1);
    else iq4_xs_rows(n, w, ws, nw, xq, xs, nx, out, 0);
}
