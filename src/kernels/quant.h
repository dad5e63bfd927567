/* quant.h - quantized block layouts (exactly ggml's) and row conversions.
 *
 * Each quantized type stores a row as consecutive blocks; the structs below
 * are the on-disk layout, little-endian, with F16 scales kept as raw uint16_t
 * bits (rw_f16). Their sizes are pinned by static_assert, since a GGUF file's
 * tensor data is read through them in place.
 *
 * Dequantization is exact: every formula rounds at most once, so the results
 * equal ggml's bit for bit (except the sign of zero).
 */
#ifndef RW_KERNELS_QUANT_H
#define RW_KERNELS_QUANT_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"

typedef uint16_t rw_f16;  /* IEEE half, raw bits */
typedef uint16_t rw_bf16; /* bfloat16, raw bits */

#define RW_QK 32   /* elements per block of the 32-block types */
#define RW_QK_K 256 /* elements per super-block of the K-quants */
#define RW_K_SCALE_SIZE 12

typedef struct { rw_f16 d; uint8_t qs[RW_QK / 2]; } rw_block_q4_0;
typedef struct { rw_f16 d, m; uint8_t qs[RW_QK / 2]; } rw_block_q4_1;
typedef struct { rw_f16 d; uint8_t qh[4]; uint8_t qs[RW_QK / 2]; } rw_block_q5_0;
typedef struct { rw_f16 d, m; uint8_t qh[4]; uint8_t qs[RW_QK / 2]; } rw_block_q5_1;
typedef struct { rw_f16 d; int8_t qs[RW_QK]; } rw_block_q8_0;
typedef struct { rw_f16 d, s; int8_t qs[RW_QK]; } rw_block_q8_1;
typedef struct {
    uint8_t scales[RW_QK_K / 16]; /* 4-bit scale | 4-bit min per 16 values */
    uint8_t qs[RW_QK_K / 4];      /* 2-bit quants */
    rw_f16 d, dmin;
} rw_block_q2_K;
typedef struct {
    uint8_t hmask[RW_QK_K / 8]; /* high bit of each quant */
    uint8_t qs[RW_QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];         /* 16 6-bit scales */
    rw_f16 d;
} rw_block_q3_K;
typedef struct {
    rw_f16 d, dmin;
    uint8_t scales[RW_K_SCALE_SIZE]; /* 8 6-bit scales and mins */
    uint8_t qs[RW_QK_K / 2];
} rw_block_q4_K;
typedef struct {
    rw_f16 d, dmin;
    uint8_t scales[RW_K_SCALE_SIZE];
    uint8_t qh[RW_QK_K / 8];
    uint8_t qs[RW_QK_K / 2];
} rw_block_q5_K;
typedef struct {
    uint8_t ql[RW_QK_K / 2];     /* low 4 bits */
    uint8_t qh[RW_QK_K / 4];     /* high 2 bits */
    int8_t scales[RW_QK_K / 16]; /* 8-bit scales */
    rw_f16 d;
} rw_block_q6_K;
typedef struct {
    float d;
    int8_t qs[RW_QK_K];
    int16_t bsums[RW_QK_K / 16]; /* sum of each group of 16 quants */
} rw_block_q8_K;
typedef struct { rw_f16 d; uint8_t qs[RW_QK / 2]; } rw_block_iq4_nl;
typedef struct {
    rw_f16 d;
    uint16_t scales_h;
    uint8_t scales_l[RW_QK_K / 64];
    uint8_t qs[RW_QK_K / 2];
} rw_block_iq4_xs;
typedef struct { uint8_t qs[(RW_QK_K - 4 * RW_QK_K / 64) / 5]; uint8_t qh[RW_QK_K / 64]; rw_f16 d; } rw_block_tq1_0;
typedef struct { uint8_t qs[RW_QK_K / 4]; rw_f16 d; } rw_block_tq2_0;
typedef struct { uint8_t e; uint8_t qs[RW_QK / 2]; } rw_block_mxfp4;

static_assert(sizeof(rw_block_q4_0) == 18, "q4_0 layout");
static_assert(sizeof(rw_block_q4_1) == 20, "q4_1 layout");
static_assert(sizeof(rw_block_q5_0) == 22, "q5_0 layout");
static_assert(sizeof(rw_block_q5_1) == 24, "q5_1 layout");
static_assert(sizeof(rw_block_q8_0) == 34, "q8_0 layout");
static_assert(sizeof(rw_block_q8_1) == 36, "q8_1 layout");
static_assert(sizeof(rw_block_q2_K) == 84, "q2_K layout");
static_assert(sizeof(rw_block_q3_K) == 110, "q3_K layout");
static_assert(sizeof(rw_block_q4_K) == 144, "q4_K layout");
static_assert(sizeof(rw_block_q5_K) == 176, "q5_K layout");
static_assert(sizeof(rw_block_q6_K) == 210, "q6_K layout");
static_assert(sizeof(rw_block_q8_K) == 292, "q8_K layout");
static_assert(sizeof(rw_block_iq4_nl) == 18, "iq4_nl layout");
static_assert(sizeof(rw_block_iq4_xs) == 136, "iq4_xs layout");
static_assert(sizeof(rw_block_tq1_0) == 54, "tq1_0 layout");
static_assert(sizeof(rw_block_tq2_0) == 66, "tq2_0 layout");
static_assert(sizeof(rw_block_mxfp4) == 17, "mxfp4 layout");

/* Half and bfloat16 conversions, exact for subnormals; f32->f16/bf16 round to
 * nearest even (as ggml's reference conversion). */
float rw_f16_to_f32(rw_f16 h);
rw_f16 rw_f32_to_f16(float f);
float rw_bf16_to_f32(rw_bf16 h);
rw_bf16 rw_f32_to_bf16(float f);

/* True if rows of type t can be converted to f32 by rw_dequantize_row. */
bool rw_can_dequantize(rw_dtype t);

/* Converts n elements of type t at src (n a multiple of the block size) to f32.
 * src needs no alignment beyond what the block layout gives. Returns
 * RW_ERR_UNSUPPORTED for a type without a dequantizer, RW_ERR_INVALID_ARG for
 * a bad n. */
rw_status rw_dequantize_row(rw_dtype t, const void *src, float *dst, int64_t n);

/* True if rw_quantize_row supports type t. */
bool rw_can_quantize(rw_dtype t);

/* Quantizes n f32 values (n a multiple of the block size) to type t at dst,
 * with the plain C reference quantizer. */
rw_status rw_quantize_row(rw_dtype t, const float *src, void *dst, int64_t n);

/* The same with an importance matrix: qw holds n weights, one per value
 * (the mean square of the activations each column of the row's matrix
 * saw); llama-quantize's quantizers with --imatrix, byte for byte
 * (quantize_weighted_ref.c). qw NULL, or a type with no weighted form
 * (Q8_0, TQ1_0, TQ2_0, MXFP4, F16, BF16), is rw_quantize_row. */
rw_status rw_quantize_row_weighted(rw_dtype t, const float *src, void *dst, int64_t n, const float *qw);

#endif
