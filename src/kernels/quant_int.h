/* quant_int.h - private to src/kernels: pieces shared by the quantizers. */
#ifndef RW_KERNELS_QUANT_INT_H
#define RW_KERNELS_QUANT_INT_H

#include "kernels/quant.h"

int rw_nearest_int(float x); /* round half to even, as ggml's nearest_int */
void rw_k4_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m);

/* nb super-blocks of 256 values each */
void rw_quantize_q4_K_ref(const float *x, rw_block_q4_K *y, int64_t nb);
void rw_quantize_q5_K_ref(const float *x, rw_block_q5_K *y, int64_t nb);
void rw_quantize_q6_K_ref(const float *x, rw_block_q6_K *y, int64_t nb);
/* nb blocks of 32 values each */
void rw_quantize_iq4_nl_ref(const float *x, rw_block_iq4_nl *y, int64_t nb);

#endif
