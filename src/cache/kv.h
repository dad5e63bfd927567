/* kv.h - a per-sequence attention KV cache: contiguous K and V per layer.
 *
 * For every attention layer the cache holds, per KV head, the keys and values
 * of positions 0..n-1 of one sequence. Keys are head-major rows, values are
 * stored transposed (one row per value dimension, positions contiguous), so
 * that attention computes q·K as dot products over head_dim and p·V as dot
 * products over positions, both on contiguous memory (llama.cpp without
 * flash attention does the same):
 *
 *   k[layer] : [n_head_kv][capacity][head_dim_k]   (element type f32 or f16)
 *   v[layer] : [n_head_kv][head_dim_v][capacity]
 *
 *
 * Rows are written for positions pos..pos+m-1 (rw_kv_store, one layer at a
 * time, as a forward pass computes them) and become part of the sequence only
 * when the length is advanced (rw_kv_set_length). Truncating to n forgets
 * every position >= n; the storage is kept. Capacity grows on demand up to
 * max_ctx (a store beyond it is RW_ERR_CONTEXT).
 *
 * F16 storage (the default, as llama.cpp's) rounds each value to nearest
 * even; reads convert back to f32 exactly.
 */
#ifndef RW_CACHE_KV_H
#define RW_CACHE_KV_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef enum {
    RW_KV_F32 = 0,
    RW_KV_F16 = 1,
} rw_kv_type;

typedef struct {
    rw_kv_type type;
    int n_layer;     /* layers with attention (index space 0..n_layer-1) */
    int n_head_kv;
    int head_dim_k;
    int head_dim_v;
    int64_t max_ctx; /* hard limit on positions; capacity grows up to it */
} rw_kv_config;

typedef struct rw_kv_cache rw_kv_cache;

/* Creates an empty cache. The caller owns *out and frees it with rw_kv_free.
 * No storage is allocated until the first reserve. */
rw_status rw_kv_new(const rw_kv_config *cfg, rw_kv_cache **out, rw_error *err);
void rw_kv_free(rw_kv_cache *c); /* no-op on NULL */

const rw_kv_config *rw_kv_get_config(const rw_kv_cache *c);
int64_t rw_kv_length(const rw_kv_cache *c);
int64_t rw_kv_capacity(const rw_kv_cache *c);
size_t rw_kv_bytes(const rw_kv_cache *c); /* bytes of storage allocated */

/* Makes room for positions up to n_total-1 (keeps the stored rows).
 * RW_ERR_CONTEXT if n_total > max_ctx, RW_ERR_NOMEM on allocation failure. */
rw_status rw_kv_reserve(rw_kv_cache *c, int64_t n_total, rw_error *err);

/* Stores m positions pos..pos+m-1 of layer il. k row t is at k + t*k_stride
 * and holds n_head_kv * head_dim_k floats (head-major), likewise v. The
 * positions must be reserved and pos <= length (no gaps). */
rw_status rw_kv_store(rw_kv_cache *c, int il, int64_t pos, int64_t m, const float *k, int64_t k_stride,
                      const float *v, int64_t v_stride, rw_error *err);

/* Sets the length (positions 0..n-1 valid). n may not exceed the capacity;
 * lowering it is a truncation. */
rw_status rw_kv_set_length(rw_kv_cache *c, int64_t n, rw_error *err);

/* Raw storage of one head of one layer, elements of the cache's type: keys
 * [capacity][head_dim_k], values [head_dim_v][capacity] (row stride =
 * rw_kv_capacity). Valid until the next reserve that grows the cache. */
const void *rw_kv_k_head(const rw_kv_cache *c, int il, int head);
const void *rw_kv_v_head(const rw_kv_cache *c, int il, int head);

/* Reads one stored row (position pos of head `head`) as f32 into dst. */
void rw_kv_read_k(const rw_kv_cache *c, int il, int head, int64_t pos, float *dst);
void rw_kv_read_v(const rw_kv_cache *c, int il, int head, int64_t pos, float *dst);

#endif
