/* cpu_features.c - which instruction-set tiers this CPU and OS can run.
 *
 * A feature is usable only if cpuid reports it AND the OS saves the
 * registers it needs (XCR0, read with xgetbv): YMM state for AVX2, opmask +
 * ZMM state for AVX-512.
 */
#include <stdbool.h>

#include "kernels/matmul_int.h"

#if defined(__x86_64__)
#include <cpuid.h>

static unsigned long long xcr0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

typedef struct {
    bool osxsave, avx, fma, f16c, avx2;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16;
} features;

static features probe(void) {
    features f = {0};
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    f.fma = c & (1u << 12);
    f.osxsave = c & (1u << 27);
    f.avx = c & (1u << 28);
    f.f16c = c & (1u << 29);
    if (__get_cpuid_max(0, NULL) < 7) return f;
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = b & (1u << 5);
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vnni = c & (1u << 11);
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512bf16 = a & (1u << 5);
    return f;
}

bool rw_cpu_has_avx2(void) {
    features f = probe();
    if (!f.osxsave || !f.avx) return false;
    if ((xcr0() & 0x6) != 0x6) return false; /* XMM and YMM state */
    return f.avx2 && f.fma && f.f16c;
}

bool rw_cpu_has_avx512(void) {
    if (!rw_cpu_has_avx2()) return false;
    features f = probe();
    if ((xcr0() & 0xE6) != 0xE6) return false; /* + opmask, ZMM_Hi256, Hi16_ZMM */
    return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.avx512bf16;
}
#else
bool rw_cpu_has_avx2(void) { return false; }
bool rw_cpu_has_avx512(void) { return false; }
#endif
