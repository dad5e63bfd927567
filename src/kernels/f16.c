/* f16.c - IEEE half and bfloat16 conversions, bit-exact and portable.
 *
 * f16 -> f32 is exact (subnormal halves become normal floats); f32 -> f16
 * and f32 -> bf16 round to nearest even, as ggml's reference conversions,
 * with overflow to infinity and NaN kept a (quiet) NaN. */
#include <string.h>

#include "kernels/quant.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float rw_f16_to_f32(rw_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / NaN */
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in float */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

rw_f16 rw_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return (rw_f16)(sign | 0x7e00); /* NaN */
    if (abs >= 0x477ff000u) return (rw_f16)(sign | 0x7c00); /* rounds to >= 65520: infinity */
    if (abs < 0x38800000u) {
        /* result is subnormal or zero: value / 2^-24, rounded to nearest even */
        if (abs < 0x33000000u) return (rw_f16)sign; /* below half the smallest subnormal */
        uint32_t e = abs >> 23, m = (abs & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (rw_f16)(sign | q);
    }
    /* normal: rebias the exponent, round the 13 dropped bits to nearest even */
    uint32_t r = abs - 0x38000000u;
    uint32_t q = r >> 13, rem = r & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
    return (rw_f16)(sign | q);
}

float rw_bf16_to_f32(rw_bf16 h) { return bits_f32((uint32_t)h << 16); }

rw_bf16 rw_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (rw_bf16)((u >> 16) | 64); /* quiet NaN */
    return (rw_bf16)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}
