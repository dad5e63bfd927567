/* dtype.c - the type table: names and block geometry as in ggml's type traits. */
#include "base/dtype.h"

#include <strings.h>

typedef struct {
    const char *name;  /* NULL for ids that are not a type */
    uint16_t block;    /* elements per block */
    uint16_t bytes;    /* bytes per block */
} dtype_info;

static const dtype_info dtype_table[RW_TYPE_COUNT] = {
    [RW_TYPE_F32] = {"F32", 1, 4},
    [RW_TYPE_F16] = {"F16", 1, 2},
    [RW_TYPE_Q4_0] = {"Q4_0", 32, 18},
    [RW_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [RW_TYPE_Q5_0] = {"Q5_0", 32, 22},
    [RW_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [RW_TYPE_Q8_0] = {"Q8_0", 32, 34},
    [RW_TYPE_Q8_1] = {"Q8_1", 32, 36},
    [RW_TYPE_Q2_K] = {"Q2_K", 256, 84},
    [RW_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [RW_TYPE_Q4_K] = {"Q4_K", 256, 144},
    [RW_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [RW_TYPE_Q6_K] = {"Q6_K", 256, 210},
    [RW_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [RW_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66},
    [RW_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74},
    [RW_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98},
    [RW_TYPE_IQ1_S] = {"IQ1_S", 256, 50},
    [RW_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18},
    [RW_TYPE_IQ3_S] = {"IQ3_S", 256, 110},
    [RW_TYPE_IQ2_S] = {"IQ2_S", 256, 82},
    [RW_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
    [RW_TYPE_I8] = {"I8", 1, 1},
    [RW_TYPE_I16] = {"I16", 1, 2},
    [RW_TYPE_I32] = {"I32", 1, 4},
    [RW_TYPE_I64] = {"I64", 1, 8},
    [RW_TYPE_F64] = {"F64", 1, 8},
    [RW_TYPE_IQ1_M] = {"IQ1_M", 256, 56},
    [RW_TYPE_BF16] = {"BF16", 1, 2},
    [RW_TYPE_TQ1_0] = {"TQ1_0", 256, 54},
    [RW_TYPE_TQ2_0] = {"TQ2_0", 256, 66},
    [RW_TYPE_MXFP4] = {"MXFP4", 32, 17},
};

bool rw_dtype_valid(uint32_t t) { return t < RW_TYPE_COUNT && dtype_table[t].name != NULL; }

const char *rw_dtype_name(rw_dtype t) { return rw_dtype_valid((uint32_t)t) ? dtype_table[t].name : "?"; }

bool rw_dtype_from_name(const char *name, rw_dtype *out) {
    for (uint32_t t = 0; t < RW_TYPE_COUNT; t++) {
        if (dtype_table[t].name && strcasecmp(dtype_table[t].name, name) == 0) {
            *out = (rw_dtype)t;
            return true;
        }
    }
    return false;
}

size_t rw_dtype_block_size(rw_dtype t) { return rw_dtype_valid((uint32_t)t) ? dtype_table[t].block : 0; }

size_t rw_dtype_type_size(rw_dtype t) { return rw_dtype_valid((uint32_t)t) ? dtype_table[t].bytes : 0; }

bool rw_dtype_row_bytes(rw_dtype t, uint64_t n, uint64_t *bytes) {
    if (!rw_dtype_valid((uint32_t)t)) return false;
    uint64_t bs = dtype_table[t].block;
    if (n % bs != 0) return false;
    uint64_t blocks = n / bs;
    if (blocks > UINT64_MAX / dtype_table[t].bytes) return false;
    *bytes = blocks * dtype_table[t].bytes;
    return true;
}

bool rw_dtype_tensor_bytes(rw_dtype t, const uint64_t *ne, int n_dims, uint64_t *bytes) {
    uint64_t row;
    if (!rw_dtype_row_bytes(t, n_dims > 0 ? ne[0] : 1, &row)) return false;
    uint64_t total = row;
    for (int i = 1; i < n_dims; i++) {
        if (ne[i] != 0 && total > UINT64_MAX / ne[i]) return false;
        total *= ne[i];
    }
    *bytes = total;
    return true;
}
