/* test_matmul_conv.c - the scalar conversions and activation quantizers the
 * reference matmul uses (matmul_int.h):
 *   - f16 -> f32 for all 65536 halves and f32 -> f16 for edge values and 2^20
 *     random bit patterns, against the CPU's F16C instructions (round to
 *     nearest even) when it has them;
 *   - bf16 rounding on hand-picked cases;
 *   - Q8_0 / Q8_1 / Q8_K on hand-computed blocks. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "kernels/matmul_int.h"

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("f16c"))) static float hw_f16_to_f32(rw_f16 h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) static rw_f16 hw_f32_to_f16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
static bool have_f16c(void) { return __builtin_cpu_supports("f16c"); }
#else
static float hw_f16_to_f32(rw_f16 h) { return rw_mm_f16_to_f32(h); }
static rw_f16 hw_f32_to_f16(float f) { return rw_mm_f32_to_f16(f); }
static bool have_f16c(void) { return false; }
#endif

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void check_f16(void) {
    /* hand-picked values that need no F16C */
    CHECK(rw_mm_f32_to_f16(1.0f) == 0x3C00 && rw_mm_f16_to_f32(0x3C00) == 1.0f);
    CHECK(rw_mm_f32_to_f16(65504.0f) == 0x7BFF && rw_mm_f32_to_f16(65520.0f) == 0x7C00);
    CHECK(rw_mm_f32_to_f16(0x1p-24f) == 0x0001 && rw_mm_f32_to_f16(0x1p-25f) == 0x0000); /* tie -> even */
    CHECK(rw_mm_f32_to_f16(1.0f + 0x1p-11f) == 0x3C00 && rw_mm_f32_to_f16(1.0f + 0x3p-11f) == 0x3C02);
    CHECK(rw_mm_f16_to_f32(0x8001) == -0x1p-24f && isnan(rw_mm_f16_to_f32(0x7E00)));
    if (!have_f16c()) return;
    int bad = 0;
    for (uint32_t h = 0; h < 65536 && bad < 5; h++) {
        float a = rw_mm_f16_to_f32((rw_f16)h), b = hw_f16_to_f32((rw_f16)h);
        if (!(bits(a) == bits(b) || (isnan(a) && isnan(b)))) {
            bad++;
            CHECK_MSG(0, "f16 %04x -> %08x, F16C %08x", (unsigned)h, (unsigned)bits(a), (unsigned)bits(b));
        }
    }
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < (1 << 20) + 64 && bad < 5; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t u = i < 64 ? 0x38800000u + (uint32_t)(i - 32) * 0x1000u : (uint32_t)s; /* around 2^-14, then random */
        float f = from_bits(u);
        rw_f16 a = rw_mm_f32_to_f16(f), b = hw_f32_to_f16(f);
        bool nan = isnan(f) && (a & 0x7C00) == 0x7C00 && (a & 0x3FF) && (b & 0x7C00) == 0x7C00 && (b & 0x3FF);
        if (a != b && !nan) {
            bad++;
            CHECK_MSG(0, "f32 %08x -> %04x, F16C %04x", (unsigned)u, a, b);
        }
    }
}

static void check_bf16(void) {
    CHECK(rw_mm_f32_to_bf16(1.0f) == 0x3F80 && rw_mm_bf16_to_f32(0x3F80) == 1.0f);
    CHECK(rw_mm_f32_to_bf16(from_bits(0x3F808000u)) == 0x3F80); /* tie -> even */
    CHECK(rw_mm_f32_to_bf16(from_bits(0x3F818000u)) == 0x3F82); /* tie -> even (up) */
    CHECK(rw_mm_f32_to_bf16(from_bits(0x3F808001u)) == 0x3F81);
    CHECK((rw_mm_f32_to_bf16(from_bits(0x7F800001u)) & 0x7FC0) == 0x7FC0); /* NaN stays NaN */
}

static void check_q8(void) {
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = (float)(i % 32) - 12.7f; /* block amax 19.3 (or 12.7) */
    x[5] = -25.4f;                                                /* amax of block 0: d = 0.2 */
    rw_block_q8_0 q0[8];
    rw_mm_quantize_q8_0(x, q0, 256);
    CHECK(q0[0].d == rw_mm_f32_to_f16(25.4f / 127.0f));
    CHECK(q0[0].qs[5] == -127 && q0[0].qs[0] == (int8_t)roundf(-12.7f * (127.0f / 25.4f)));
    CHECK(q0[1].qs[31] == 127); /* the block's largest value */
    rw_block_q8_1 q1[8];
    rw_mm_quantize_q8_1(x, q1, 256);
    int sum = 0;
    for (int j = 0; j < 32; j++) {
        sum += q1[0].qs[j];
        CHECK(q1[0].qs[j] == q0[0].qs[j]);
    }
    CHECK(q1[0].s == rw_mm_f32_to_f16((float)sum * (25.4f / 127.0f)));
    rw_block_q8_K qk;
    rw_mm_quantize_q8_K(x, &qk, 256);
    CHECK(qk.qs[5] == -127); /* the largest magnitude maps to -127 */
    CHECK(qk.d == 1.0f / (-127.0f / -25.4f));
    int g0 = 0;
    for (int j = 0; j < 16; j++) g0 += qk.qs[j];
    CHECK(qk.bsums[0] == g0);
    memset(x, 0, sizeof x);
    rw_mm_quantize_q8_K(x, &qk, 256);
    CHECK(qk.d == 0.0f && qk.qs[0] == 0 && qk.bsums[3] == 0);
}

int main(void) {
    check_f16();
    check_bf16();
    check_q8();
    return rw_test_done();
}
