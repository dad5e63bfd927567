/* cpu_features.c - which instruction-set tiers this CPU and OS can run.
 *
 * x86-64: a feature is usable only if cpuid reports it AND the OS saves the
 * registers it needs (XCR0, read with xgetbv): YMM state for AVX2, opmask +
 * ZMM state for AVX-512.
 * AArch64: NEON is always there; the dot-product (asimddp) and 8-bit matrix
 * multiply (i8mm) extensions are read from the kernel's hardware
 * capabilities on Linux (getauxval) and from sysctl on macOS (every Apple
 * Silicon CPU has the dot product; i8mm from the M2 on).
 */
#include <stdatomic.h>
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
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avx_vnni;
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
    f.avx_vnni = a & (1u << 4);
    return f;
}

static bool probe_avx2(void) {
    features f = probe();
    if (!f.osxsave || !f.avx) return false;
    if ((xcr0() & 0x6) != 0x6) return false; /* XMM and YMM state */
    return f.avx2 && f.fma && f.f16c;
}

/* Asked once: cpuid is a VM exit under a hypervisor (microseconds), and
 * these are asked on hot paths (the LoRA update of every product). */
bool rw_cpu_has_avx2(void) {
    static _Atomic int has = -1;
    int v = atomic_load(&has);
    if (v < 0) atomic_store(&has, v = probe_avx2());
    return v;
}

bool rw_cpu_has_avx512(void) {
    static _Atomic int has = -1;
    int v = atomic_load(&has);
    if (v < 0) {
        features f = probe();
        v = rw_cpu_has_avx2() && (xcr0() & 0xE6) == 0xE6 && /* + opmask, ZMM_Hi256, Hi16_ZMM */
            f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.avx512bf16;
        atomic_store(&has, v);
    }
    return v;
}

bool rw_cpu_has_avx_vnni(void) { return rw_cpu_has_avx2() && probe().avx_vnni; }

bool rw_cpu_is_amd(void) {
    static _Atomic int amd = -1; /* cpuid's vendor, asked once */
    int v = atomic_load(&amd);
    if (v < 0) {
        unsigned a = 0, b = 0, c = 0, d = 0; /* "AuthenticAMD" in ebx, edx, ecx */
        v = __get_cpuid(0, &a, &b, &c, &d) && b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
        atomic_store(&amd, v);
    }
    return v;
}

bool rw_cpu_is_amd_family19h(void) {
    static _Atomic int fam19 = -1; /* asked once */
    int v = atomic_load(&fam19);
    if (v < 0) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        /* family = base family (bits 8-11) + extended family (bits 20-27) when the base is 0xF */
        v = rw_cpu_is_amd() && __get_cpuid(1, &a, &b, &c, &d) && ((a >> 8) & 0xF) == 0xF &&
            ((a >> 8) & 0xF) + ((a >> 20) & 0xFF) == 0x19;
        atomic_store(&fam19, v);
    }
    return v;
}

#if defined(__linux__)
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };

/* AMX needs cpuid's AMX-TILE and AMX-INT8 (and AVX512-VBMI, which every
 * CPU with them has: the tier's code uses it), the OS enabling the tile state
 * in XCR0 (bits 17 and 18), and, on Linux, the process asking for the tile
 * data once (arch_prctl): the kernel grows the signal and context-switch
 * state for it only on request. Refused or absent: false, and the AVX-512
 * tier serves. Asked once per process; the answer is kept. */
static bool amx_probe(void) {
    if (!rw_cpu_has_avx2() || __get_cpuid_max(0, NULL) < 7) return false;
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    if (!(d & (1u << 24)) || !(d & (1u << 25))) return false; /* AMX-TILE, AMX-INT8 */
    if (!(c & (1u << 1))) return false;                          /* AVX512-VBMI (the tier's byte permutes) */
    if ((xcr0() & (3ull << 17)) != (3ull << 17)) return false;  /* XTILECFG, XTILEDATA */
    unsigned long perm = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &perm) == 0 && (perm & (1ul << XFEATURE_XTILEDATA)))
        return true;
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) return false;
    return syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &perm) == 0 && (perm & (1ul << XFEATURE_XTILEDATA));
}

static _Atomic int amx_known = -1; /* -1 until asked; then 0 or 1 */

bool rw_cpu_has_amx(void) {
    int v = atomic_load(&amx_known);
    if (v < 0) {
        v = amx_probe();
        atomic_store(&amx_known, v);
    }
    return v;
}

void rw_cpu__assume_amx(void) { atomic_store(&amx_known, 1); }
#else
bool rw_cpu_has_amx(void) { return false; }
void rw_cpu__assume_amx(void) {}
#endif
#else
bool rw_cpu_has_avx2(void) { return false; }
bool rw_cpu_has_avx512(void) { return false; }
bool rw_cpu_has_avx_vnni(void) { return false; }
bool rw_cpu_is_amd(void) { return false; }
bool rw_cpu_is_amd_family19h(void) { return false; }
bool rw_cpu_has_amx(void) { return false; }
void rw_cpu__assume_amx(void) {}
#endif

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif

bool rw_cpu_has_neon_dot(void) { return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0; }
bool rw_cpu_has_neon_i8mm(void) { return (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0; }
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>

static bool sysctl_flag(const char *name) {
    int v = 0;
    size_t len = sizeof v;
    return sysctlbyname(name, &v, &len, NULL, 0) == 0 && v != 0;
}

bool rw_cpu_has_neon_dot(void) { return sysctl_flag("hw.optional.arm.FEAT_DotProd"); }
bool rw_cpu_has_neon_i8mm(void) { return sysctl_flag("hw.optional.arm.FEAT_I8MM"); }
#elif defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
/* another OS: what the compiler was told the target has */
bool rw_cpu_has_neon_dot(void) { return true; }
bool rw_cpu_has_neon_i8mm(void) { return false; }
#else
bool rw_cpu_has_neon_dot(void) { return false; }
bool rw_cpu_has_neon_i8mm(void) { return false; }
#endif
