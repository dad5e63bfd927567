/* dtype.h - tensor element types with ggml's numeric ids and block geometry.
 *
 * GGUF files name tensor types by ggml's enum values, so these ids are a file
 * format fact and must never be renumbered. A quantized type stores a row in
 * blocks of `block_size` elements taking `type_size` bytes each; a row's
 * length must be a multiple of block_size.
 */
#ifndef RW_BASE_DTYPE_H
#define RW_BASE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    RW_TYPE_F32 = 0,
    RW_TYPE_F16 = 1,
    RW_TYPE_Q4_0 = 2,
    RW_TYPE_Q4_1 = 3,
    RW_TYPE_Q5_0 = 6,
    RW_TYPE_Q5_1 = 7,
    RW_TYPE_Q8_0 = 8,
    RW_TYPE_Q8_1 = 9,
    RW_TYPE_Q2_K = 10,
    RW_TYPE_Q3_K = 11,
    RW_TYPE_Q4_K = 12,
    RW_TYPE_Q5_K = 13,
    RW_TYPE_Q6_K = 14,
    RW_TYPE_Q8_K = 15,
    RW_TYPE_IQ2_XXS = 16,
    RW_TYPE_IQ2_XS = 17,
    RW_TYPE_IQ3_XXS = 18,
    RW_TYPE_IQ1_S = 19,
    RW_TYPE_IQ4_NL = 20,
    RW_TYPE_IQ3_S = 21,
    RW_TYPE_IQ2_S = 22,
    RW_TYPE_IQ4_XS = 23,
    RW_TYPE_I8 = 24,
    RW_TYPE_I16 = 25,
    RW_TYPE_I32 = 26,
    RW_TYPE_I64 = 27,
    RW_TYPE_F64 = 28,
    RW_TYPE_IQ1_M = 29,
    RW_TYPE_BF16 = 30,
    RW_TYPE_TQ1_0 = 34,
    RW_TYPE_TQ2_0 = 35,
    RW_TYPE_MXFP4 = 39,
    RW_TYPE_COUNT = 40 /* one past the largest id; not every id below is valid */
} rw_dtype;

/* True if t is an id that names a type (ids 4, 5, 31-33 and 36-38 were
 * removed from ggml and are rejected). */
bool rw_dtype_valid(uint32_t t);

/* ggml's name ("Q4_K"), or "?" for an invalid id. */
const char *rw_dtype_name(rw_dtype t);

/* Looks a type up by ggml name, case-insensitive; returns false if unknown. */
bool rw_dtype_from_name(const char *name, rw_dtype *out);

size_t rw_dtype_block_size(rw_dtype t); /* elements per block (1 for plain types) */
size_t rw_dtype_type_size(rw_dtype t);  /* bytes per block */

/* Bytes of a row of n elements; returns false if n is not a multiple of the
 * block size or the result would overflow. */
bool rw_dtype_row_bytes(rw_dtype t, uint64_t n, uint64_t *bytes);

/* Bytes of a tensor with ne[0..n_dims-1]; false on bad row length or overflow. */
bool rw_dtype_tensor_bytes(rw_dtype t, const uint64_t *ne, int n_dims, uint64_t *bytes);

#endif
