/* quantize.h - a model file's weights converted to another type, as
 * llama.cpp's llama-quantize converts them.
 *
 * Users download models as F16 / BF16 (or F32) GGUF files and make the
 * quantized file they run. The file written here is the one llama-quantize
 * writes from the same input and type name (and importance matrix), byte
 * for byte where rewind has the type's quantizer: the same type for every
 * tensor (the _S / _M / _L mixes' per-tensor rules, the fallbacks for rows
 * a type's blocks do not divide, the tensors kept as they are), the same
 * reference quantizers, the same tensor order and metadata. Checked against
 * the shared fixtures, whose quantized files llama-quantize made from their
 * F32 files. */
#ifndef RW_QUANTIZE_QUANTIZE_H
#define RW_QUANTIZE_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"

/* A file type: llama-quantize's name (Q4_K_M, ...), general.file_type's
 * value, and the type most weights get. */
typedef struct {
    const char *name;
    uint32_t ftype;
    rw_dtype base;
} rw_quantize_ftype;

/* The file types rewind writes, in llama-quantize's order; NULL past the
 * last. */
const rw_quantize_ftype *rw_quantize_ftype_at(int i);
/* The type named (case-insensitive); NULL if none. */
const rw_quantize_ftype *rw_quantize_ftype_find(const char *name);

typedef struct {
    const char *type;      /* a rw_quantize_ftype name */
    bool pure;             /* every converted weight gets the base type (llama-quantize --pure) */
    bool allow_requantize; /* weights already quantized are converted too (through f32) */
    int n_threads;         /* 0: the physical cores; the file is the same for any */
    /* llama-quantize's --output-tensor-type / --token-embedding-type:
     * RW_TYPE_COUNT for the mix's (a zeroed struct means F32: set both) */
    rw_dtype output_type, token_embd_type;
    const char *imatrix; /* llama-imatrix's file (llama-quantize --imatrix), or NULL */
    /* llama-quantize's --tensor-type overrides: PATTERN=TYPE items separated
     * by white space (a regular expression searched for in each tensor's
     * name, lowercased; the first found gives the type), or NULL */
    const char *tensor_types;
} rw_quantize_options;

/* Writes in_path's model to out_path (atomically, via out_path.tmp) with
 * its weights converted as o says. */
rw_status rw_quantize_write(const char *in_path, const char *out_path, const rw_quantize_options *o, rw_error *err);

#endif
