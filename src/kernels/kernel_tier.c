/* kernel_tier.c - the process-wide kernel settings every kernel reads: the
 * tier in use (matmul.h's rw_kernel_tier_*), the numerics (rw_numerics_*),
 * whether the AVX2 tier may use AVX-VNNI, and the ops' tier tests
 * (ops_int.h's rw_ops_use_*).
 *
 * A leaf: the dispatchers (matmul.c, ops_*.c) and the tiers' own files
 * (quantizers, matmul kernels) all read these, and it calls none of them,
 * only the CPU probes (cpu_features.c). */
#include <stdatomic.h>
#include <string.h>

#include "kernels/matmul_int.h"
#include "kernels/ops_int.h"

/* ---- tiers ----------------------------------------------------------- */

static const char *const tier_names[RW_TIER_COUNT] = {"ref", "avx2", "avx512", "neon", "amx"};

const char *rw_kernel_tier_name(rw_kernel_tier t) { return (unsigned)t < RW_TIER_COUNT ? tier_names[t] : "?"; }

bool rw_kernel_tier_available(rw_kernel_tier t) {
    switch (t) {
    case RW_TIER_REF: return true;
    case RW_TIER_AVX2: return rw_cpu_has_avx2();
    case RW_TIER_AVX512: return rw_cpu_has_avx512();
    case RW_TIER_NEON: return rw_cpu_has_neon_dot();
    case RW_TIER_AMX: return rw_cpu_has_avx512() && rw_cpu_has_amx();
    default: return false;
    }
}

static _Atomic int current_tier = -1; /* -1 until first use */

rw_kernel_tier rw_kernel_tier_current(void) {
    int t = atomic_load(&current_tier);
    if (t >= 0) return (rw_kernel_tier)t;
    t = RW_TIER_REF;
    for (int i = RW_TIER_COUNT - 1; i > 0; i--)
        if (rw_kernel_tier_available((rw_kernel_tier)i)) {
            t = i;
            break;
        }
    atomic_store(&current_tier, t);
    return (rw_kernel_tier)t;
}

bool rw_kernel_tier_set(rw_kernel_tier t) {
    if ((unsigned)t >= RW_TIER_COUNT || !rw_kernel_tier_available(t)) return false;
    atomic_store(&current_tier, (int)t);
    return true;
}

bool rw_kernel_tier_is_avx512(rw_kernel_tier t) { return t == RW_TIER_AVX512 || t == RW_TIER_AMX; }

#if defined(__x86_64__)
bool rw_ops_use_avx512(void) { return rw_kernel_tier_is_avx512(rw_kernel_tier_current()); }
bool rw_ops_use_avx2(void) { return rw_kernel_tier_current() == RW_TIER_AVX2; }
#endif
#if defined(__aarch64__)
bool rw_ops_use_neon(void) { return rw_kernel_tier_current() == RW_TIER_NEON; }
#endif

static _Atomic bool avx_vnni_off; /* rw_matmul_set_avx_vnni(false) */

void rw_matmul_set_avx_vnni(bool on) { atomic_store(&avx_vnni_off, !on); }

bool rw_matmul_avx_vnni_allowed(void) { return !atomic_load(&avx_vnni_off); }

static _Atomic int k_scale_shuffle = -1; /* rw_matmul_set_k_scale_shuffle; -1: by the CPU's vendor */

void rw_matmul_set_k_scale_shuffle(int mode) { atomic_store(&k_scale_shuffle, mode < 0 ? -1 : mode > 0); }

bool rw_matmul_k_scale_shuffle(void) {
    int m = atomic_load(&k_scale_shuffle);
    return m < 0 ? rw_cpu_is_amd() : m;
}

static _Atomic int prefetch_l2 = -1; /* rw_matmul_set_prefetch_l2; -1: by the CPU */

void rw_matmul_set_prefetch_l2(int mode) { atomic_store(&prefetch_l2, mode < 0 ? -1 : mode > 0); }

bool rw_matmul_prefetch_l2(void) {
    int m = atomic_load(&prefetch_l2);
    return m < 0 ? rw_cpu_is_amd_family19h() : m;
}

/* ---- numerics -------------------------------------------------------- */

static _Atomic int current_numerics = -1; /* -1 until first use */

bool rw_numerics_parse(const char *s, rw_numerics *out) {
    if (!strcmp(s, "auto")) *out = RW_NUMERICS_AUTO;
    else if (!strcmp(s, "fast")) *out = RW_NUMERICS_FAST;
    else if (!strcmp(s, "ggml")) *out = RW_NUMERICS_GGML;
    else return false;
    return true;
}

const char *rw_numerics_name(rw_numerics m) {
    return m == RW_NUMERICS_GGML ? "ggml" : m == RW_NUMERICS_FAST ? "fast" : "auto";
}

rw_numerics rw_numerics_current(void) {
    int m = atomic_load(&current_numerics);
    if (m >= 0) return (rw_numerics)m;
    atomic_store(&current_numerics, (int)RW_NUMERICS_AUTO);
    return RW_NUMERICS_AUTO;
}

void rw_numerics_set(rw_numerics m) { atomic_store(&current_numerics, (int)m); }
