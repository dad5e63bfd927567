/* ops_f16.c - f32 <-> f16 rows for the KV cache (ops.h). */
#include "kernels/ops.h"
#include "kernels/ops_int.h"

void rw_f32_to_f16_row(const float *src, rw_f16 *dst, int64_t dst_stride, int64_t n) {
    if (dst_stride == 1 && rw_ops_use_avx512()) {
        rw_f32_to_f16_row_avx512(src, dst, n);
        return;
    }
    if (dst_stride == 1 && rw_ops_use_avx2()) {
        rw_f32_to_f16_row_avx2(src, dst, n);
        return;
    }
    if (dst_stride == 1 && rw_ops_use_neon()) {
        rw_f32_to_f16_row_neon(src, dst, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i * dst_stride] = rw_f32_to_f16(src[i]);
}

void rw_f16_to_f32_row(const rw_f16 *src, int64_t src_stride, float *dst, int64_t n) {
    if (src_stride == 1 && rw_ops_use_avx512()) {
        rw_f16_to_f32_row_avx512(src, dst, n);
        return;
    }
    if (src_stride == 1 && rw_ops_use_avx2()) {
        rw_f16_to_f32_row_avx2(src, dst, n);
        return;
    }
    if (src_stride == 1 && rw_ops_use_neon()) {
        rw_f16_to_f32_row_neon(src, dst, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i] = rw_f16_to_f32(src[i * src_stride]);
}
