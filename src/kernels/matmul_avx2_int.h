/* matmul_avx2_int.h - what the AVX2 tier's files share (private): the Q8_0
 * panel form of matmul_q8_0_avx2.c, used by matmul_avx2.c's Q8_0 kernel. */
#ifndef RW_KERNELS_MATMUL_AVX2_INT_H
#define RW_KERNELS_MATMUL_AVX2_INT_H

#include <immintrin.h>

#include "kernels/matmul_int.h"

/* An 8 x 8 transpose of dwords: o[s] gets dword s of r[0..8) (dword i of
 * o[s] from r[i]). For packing panels: 8 weight rows, one per lane. */
static inline void rw_avx2_transpose8_epi32(const __m256i r[8], __m256i o[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) { /* rows 2i, 2i+1: dwords 0 1 4 5 and 2 3 6 7 interleaved */
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* rows 4h..4h+3: u[4h + s] holds dwords s and s + 4 */
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    for (int s = 0; s < 4; s++) {
        o[s] = _mm256_permute2x128_si256(u[s], u[4 + s], 0x20);
        o[s + 4] = _mm256_permute2x128_si256(u[s], u[4 + s], 0x31);
    }
}

/* True when the AVX2 tier sums bytes with AVX-VNNI (the CPU has it and
 * rw_matmul_set_avx_vnni did not turn it off). Same bits either way. */
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

/* n values (a multiple of 256) quantized as rw_quantize_row's Q8_K (the
 * same bytes) into dst (matmul_kpanel_avx2.c). */
void rw_avx2_quantize_q8_K(const float *x, void *dst, int64_t n);

/* Q4_K and Q6_K over repacked weights (matmul_kpanel_avx2.c). */
enum { RW_AVX2_KP_ROWS = 8, RW_AVX2_KP_MAX_NX = 8 };
size_t rw_avx2_p_wbytes_q4_K(int64_t n);
void rw_avx2_convert_q8_K_p(const float *const *rows, int n_rows, void *xp, int64_t n);
void rw_avx2_pack_q4_K_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx2_tile_p_q4_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os);
size_t rw_avx2_p_wbytes_q6_K(int64_t n);
void rw_avx2_pack_q6_K_p(const uint8_t *w, size_t ws, int64_t n, int64_t n_out, uint8_t *dst);
void rw_avx2_tile_p_q6_K(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xp, size_t xps, int nx,
                         float *out, int64_t os);

/* One activation row (Q8_K) against nw IQ4_XS weight rows of stride ws,
 * out[i] (matmul_dot1_avx2.c), for CPUs with AVX-VNNI only (rw_avx2_vnni()). */
void rw_avx2_dot1_iq4_xs_vnni(int64_t n, const uint8_t *w, size_t ws, int nw, const uint8_t *xq, float *out);

#endif
