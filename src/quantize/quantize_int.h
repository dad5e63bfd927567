/* quantize_int.h - inside src/quantize: the per-tensor type rules (mix.c)
 * the writer (quantize.c) asks tensor by tensor. */
#ifndef RW_QUANTIZE_QUANTIZE_INT_H
#define RW_QUANTIZE_QUANTIZE_INT_H

#include <regex.h>

#include "gguf/gguf.h"
#include "quantize/quantize.h"

/* What the rules need to know of the model, and the counters they keep
 * while the tensors are visited in the output's order. */
/* One --tensor-type override: the first pattern found in a tensor's name
 * gives its type. */
typedef struct {
    regex_t re;
    rw_dtype type;
} rw_quantize_override;

typedef struct {
    const rw_quantize_ftype *ft;
    bool pure;
    rw_dtype output_type, token_embd_type; /* overrides; RW_TYPE_COUNT: none */
    bool falcon;    /* llama-quantize has rules of its own for Falcon */
    bool is_70b;    /* a llama of 80 layers with grouped KV heads (llama.cpp's 70B type) */
    bool tied;      /* no output.weight: the token embedding is the output head too */
    bool has_imatrix; /* an importance matrix is given (two rules change) */
    rw_quantize_override *overrides; /* n_overrides, owned (rw_quantize__mix_free) */
    int n_overrides;
    int n_layer;    /* block_count */
    int n_expert;   /* expert_count, at least 1 */
    int n_gqa;      /* query heads per KV head of the first layer (0 if it has none) */
    int n_attn_v;   /* tensors of the attention-V kind (attn_v, attn_qkv, attn_kv_b) */
    int i_attn_v;   /* of those, visited so far */
    int i_ffn_down; /* ffn_down tensors visited so far */
} rw_quantize_mix;

/* Reads the model's facts from g and compiles o->tensor_types; the
 * counters start at zero. Fails on a file without general.architecture or
 * on a bad override. Free with rw_quantize__mix_free (also after a failure). */
rw_status rw_quantize__mix_init(rw_quantize_mix *m, const rw_gguf *g, const rw_quantize_ftype *ft,
                                const rw_quantize_options *o, rw_error *err);
void rw_quantize__mix_free(rw_quantize_mix *m);

/* Whether llama-quantize converts tensor t at all (2-D or 3-D weights, not
 * norms, routers, convolution kernels, ...). */
bool rw_quantize__converts(const rw_gguf_tensor *t);

/* The type tensor t gets; call once per tensor in the output's order (the
 * counters advance). t must be one rw_quantize__converts accepts. An
 * override is taken as given: its blocks may not divide t's rows (the
 * caller checks). */
rw_dtype rw_quantize__tensor_type(rw_quantize_mix *m, const rw_gguf_tensor *t);

/* An importance matrix (imatrix.c): per weight name, the mean square of
 * the activations each input column saw, ne[0] values per expert. */
typedef struct {
    char *name;    /* the weight's tensor name (owned) */
    float *values; /* n (owned) */
    uint64_t n;
} rw_imatrix_entry;

typedef struct {
    rw_imatrix_entry *entries; /* n_entries (owned) */
    size_t n_entries;
    char *dataset;       /* the first calibration text the file names (owned), or NULL */
    int64_t chunk_count; /* chunks of text it was computed on (0: not said) */
} rw_imatrix;

/* Reads llama-imatrix's file (GGUF or the legacy .dat) as llama-quantize
 * reads it; a non-finite value is an error. Free with rw_imatrix_free. */
rw_status rw_imatrix_load(const char *path, rw_imatrix **out, rw_error *err);
const rw_imatrix_entry *rw_imatrix_find(const rw_imatrix *im, const char *name); /* NULL if absent */
void rw_imatrix_free(rw_imatrix *im);                                            /* no-op on NULL */

#endif
