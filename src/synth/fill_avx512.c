/* fill_avx512.c - the uniform fill of synth.c's FILL_MATRIX tensors, 16
 * values at a time, bitwise the scalar loop (tests/synth/test_synth.c
 * compares whole files against the reference tier).
 *
 * splitmix64 needs only 64-bit xors, shifts and multiplies (the low half of
 * the product, vpmullq), and the state after k numbers is s + k * step, so
 * 8 lanes run 8 consecutive numbers of the stream. A number's top 24 bits k
 * become k * 2^-23 - 1: the scalar code does this in double and rounds to
 * float, but every step is exact (k < 2^24, and k - 2^23 fits a float's 24
 * bits), so float arithmetic gives the same value. */
#include <immintrin.h>

#include "synth/synth_int.h"

static inline __m512i splitmix8(__m512i z) {
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
                           _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ull));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
                           _mm512_set1_epi64((long long)0x94d049bb133111ebull));
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

void rw_synth__fill_uniform_avx512(uint64_t s, uint64_t step, float a, uint64_t n, float *x) {
    __m512i st =
        _mm512_add_epi64(_mm512_set1_epi64((long long)s), _mm512_mullo_epi64(_mm512_setr_epi64(1, 2, 3, 4, 5, 6, 7, 8),
                                                                             _mm512_set1_epi64((long long)step)));
    const __m512i st8 = _mm512_set1_epi64((long long)(8 * step)), st16 = _mm512_add_epi64(st8, st8);
    const __m512 av = _mm512_set1_ps(a), scale = _mm512_set1_ps(0x1p-23f), one = _mm512_set1_ps(1.0f);
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16, x += 16, st = _mm512_add_epi64(st, st16)) {
        const __m256i lo = _mm512_cvtepi64_epi32(_mm512_srli_epi64(splitmix8(st), 40));
        const __m256i hi = _mm512_cvtepi64_epi32(_mm512_srli_epi64(splitmix8(_mm512_add_epi64(st, st8)), 40));
        const __m512 k = _mm512_cvtepi32_ps(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
        _mm512_storeu_ps(x, _mm512_mul_ps(av, _mm512_sub_ps(_mm512_mul_ps(k, scale), one)));
    }
    /* the tail: the same numbers one at a time */
    for (uint64_t z, t = s + i * step; i < n; i++, x++) {
        z = (t += step);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        *x = a * ((float)(z >> 40) * 0x1p-23f - 1.0f);
    }
}
