/* matmul_avx2_int.h - what the AVX2 tier's files share (private): the Q8_0
 * panel form of matmul_q8_0_avx2.c, used by matmul_avx2.c's Q8_0 kernel. */
#ifndef RW_KERNELS_MATMUL_AVX2_INT_H
#define RW_KERNELS_MATMUL_AVX2_INT_H

#include "kernels/matmul_int.h"

/* True when the AVX2 tier sums bytes with AVX-VNNI (the CPU has it and
 * RW_AVX_VNNI is not 0; read once). Same bits either way. */
bool rw_avx2_vnni(void);

/* One block of activations quantized as rw_quantize_act_q8_0 (the same
 * bytes), and the sum of its quants. */
void rw_avx2_act_q8_0(const float *x, int8_t q[32], rw_f16 *d, int *sum);

enum { RW_AVX2_Q8P_ROWS = 8, RW_AVX2_Q8P_MAX_NX = 8 };
size_t rw_avx2_p_bytes_q8_0(int64_t n);
void rw_avx2_convert_q8_0_p(const float *const *rows, int n_rows, void *xp, int64_t n);
void rw_avx2_pack_q8_0_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx2_tile_p_q8_0(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os);

#endif
