/* bench_peak.c - the int8 multiply-add peak of one core, so that `rewind
 * bench kernels` can say how far the products are from what the unit can
 * do (a prefill kernel's GOP/s means little without it).
 *
 * Twelve independent 512-bit vpdpbusd (64 multiply-adds each) per loop
 * iteration, their accumulators in registers: enough chains to hide the
 * instruction's latency on every AVX-512 VNNI core measured (Zen 4, Zen 5,
 * Sapphire Rapids), so the loop runs at the unit's throughput. A loop
 * that keeps its accumulators in memory measures the store-to-load
 * latency instead (about half the peak on Zen 4). */
#include <time.h>

#include "cli/cli.h"

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f,avx512vnni"))) static double vnni512_gmacs(long iters) {
    /* distinct starting values, so the compiler cannot merge the chains */
    __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2), a3 = _mm512_set1_epi32(3),
            a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5), a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7),
            a8 = _mm512_set1_epi32(8), a9 = _mm512_set1_epi32(9), a10 = _mm512_set1_epi32(10),
            a11 = _mm512_set1_epi32(11);
    __m512i x = _mm512_set1_epi8(3);
    const __m512i y = _mm512_set1_epi8(5);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < iters; i++) {
#define D(a) a = _mm512_dpbusd_epi32(a, x, y)
        D(a0), D(a1), D(a2), D(a3), D(a4), D(a5), D(a6), D(a7), D(a8), D(a9), D(a10), D(a11);
#undef D
        __asm__ volatile("" : "+v"(x)); /* x unknown to the compiler: the products stay in the loop */
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const __m512i s =
        _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                                          _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7))),
                         _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
    /* handed to an empty asm, not reduced: the sums wrap, and a signed
     * reduction in C would be undefined (UBSan flags it) */
    __asm__ volatile("" : : "v"(s));
    const double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    return sec > 0 ? (double)iters * 12.0 * 64.0 / sec * 1e-9 : 0.0;
}
#endif

double rw_bench_int8_peak_gmacs(void) {
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx512vnni")) return 0.0;
    double best = 0.0;
    for (int rep = 0; rep < 3; rep++) { /* ~15 ms each at 4 GHz; best of 3 */
        const double g = vnni512_gmacs(5000000);
        if (g > best) best = g;
    }
    return best;
#else
    return 0.0;
#endif
}
