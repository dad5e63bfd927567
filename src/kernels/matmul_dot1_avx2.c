/* matmul_dot1_avx2.c - one activation row against many weight rows on AVX2
 * (decode), for the types whose one-row form needs more than the tiles of
 * matmul_avx2.c: IQ4_XS with AVX-VNNI.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/matmul_avx2_int.h"
#include "kernels/quant_int.h"

#define INLINE static inline __attribute__((always_inline))

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
