/* kv.c - contiguous per-layer KV cache (see kv.h for the layout). */
#include "cache/kv.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/quant.h"

#define KV_MIN_CAPACITY 256

struct rw_kv_cache {
    rw_kv_config cfg;
    size_t elem;      /* bytes per element: 4 (f32) or 2 (f16) */
    int64_t capacity; /* positions allocated per head */
    int64_t n;        /* valid positions */
    void **k;         /* n_layer buffers, owned; NULL before the first reserve */
    void **v;
};

rw_status rw_kv_new(const rw_kv_config *cfg, rw_kv_cache **out, rw_error *err) {
    *out = NULL;
    if (!cfg || (cfg->type != RW_KV_F32 && cfg->type != RW_KV_F16) || cfg->n_layer < 0 || cfg->n_head_kv <= 0 ||
        cfg->head_dim_k <= 0 || cfg->head_dim_v <= 0 || cfg->max_ctx <= 0)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "kv cache: invalid configuration");
    rw_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return rw_errorf(err, RW_ERR_NOMEM, "kv cache: out of memory");
    c->cfg = *cfg;
    c->elem = cfg->type == RW_KV_F32 ? sizeof(float) : sizeof(rw_f16);
    c->k = calloc((size_t)(cfg->n_layer ? cfg->n_layer : 1), sizeof(void *));
    c->v = calloc((size_t)(cfg->n_layer ? cfg->n_layer : 1), sizeof(void *));
    if (!c->k || !c->v) {
        rw_kv_free(c);
        return rw_errorf(err, RW_ERR_NOMEM, "kv cache: out of memory");
    }
    *out = c;
    return RW_OK;
}

void rw_kv_free(rw_kv_cache *c) {
    if (!c) return;
    for (int il = 0; il < c->cfg.n_layer; il++) {
        if (c->k) free(c->k[il]);
        if (c->v) free(c->v[il]);
    }
    free(c->k);
    free(c->v);
    free(c);
}

const rw_kv_config *rw_kv_get_config(const rw_kv_cache *c) { return &c->cfg; }
int64_t rw_kv_length(const rw_kv_cache *c) { return c->n; }
int64_t rw_kv_capacity(const rw_kv_cache *c) { return c->capacity; }

size_t rw_kv_bytes(const rw_kv_cache *c) {
    size_t per_pos = (size_t)c->cfg.n_head_kv * (size_t)(c->cfg.head_dim_k + c->cfg.head_dim_v) * c->elem;
    return per_pos * (size_t)c->capacity * (size_t)c->cfg.n_layer;
}

/* Moves a buffer of n_rows rows of old_cap slots (slot = slot_elems
 * elements) to rows of new_cap slots, keeping the first n slots of every row
 * and zeroing the rest. Keys: rows = heads, slot = one position's head_dim
 * values; transposed values: rows = heads x dims, slot = one element. */
static void *regrow(void *old, int64_t n_rows, int64_t slot_elems, size_t elem, int64_t old_cap, int64_t new_cap,
                    int64_t n) {
    const size_t slot = (size_t)slot_elems * elem;
    char *buf = calloc((size_t)n_rows * (size_t)new_cap, slot);
    if (!buf) return NULL;
    if (old)
        for (int64_t r = 0; r < n_rows; r++)
            memcpy(buf + (size_t)r * (size_t)new_cap * slot, (char *)old + (size_t)r * (size_t)old_cap * slot,
                   (size_t)n * slot);
    return buf;
}

rw_status rw_kv_reserve(rw_kv_cache *c, int64_t n_total, rw_error *err) {
    if (n_total <= c->capacity) return RW_OK;
    if (n_total > c->cfg.max_ctx)
        return rw_errorf(err, RW_ERR_CONTEXT, "kv cache: %lld positions exceed the context size %lld",
                         (long long)n_total, (long long)c->cfg.max_ctx);
    int64_t cap = c->capacity * 2;
    if (cap < KV_MIN_CAPACITY) cap = KV_MIN_CAPACITY;
    if (cap < n_total) cap = n_total;
    if (cap > c->cfg.max_ctx) cap = c->cfg.max_ctx;
    /* Grow every layer; on failure the layers already moved keep the new
     * capacity's layout, so allocate all first and swap only on success. */
    int nl = c->cfg.n_layer;
    void **nk = calloc((size_t)(nl ? nl : 1), sizeof(void *));
    void **nv = calloc((size_t)(nl ? nl : 1), sizeof(void *));
    bool ok = nk && nv;
    for (int il = 0; ok && il < nl; il++) {
        nk[il] = regrow(c->k[il], c->cfg.n_head_kv, c->cfg.head_dim_k, c->elem, c->capacity, cap, c->n);
        nv[il] = regrow(c->v[il], (int64_t)c->cfg.n_head_kv * c->cfg.head_dim_v, 1, c->elem, c->capacity, cap, c->n);
        ok = nk[il] && nv[il];
    }
    if (!ok) {
        for (int il = 0; nk && nv && il < nl; il++) {
            free(nk[il]);
            free(nv[il]);
        }
        free(nk);
        free(nv);
        return rw_errorf(err, RW_ERR_NOMEM, "kv cache: out of memory growing to %lld positions", (long long)cap);
    }
    for (int il = 0; il < nl; il++) {
        free(c->k[il]);
        free(c->v[il]);
    }
    free(c->k);
    free(c->v);
    c->k = nk;
    c->v = nv;
    c->capacity = cap;
    return RW_OK;
}

/* Element j of row t goes to dst[base(t) + j * jstride]. */
static void put(void *dst, size_t elem, size_t off, size_t jstride, const float *x, int n) {
    if (elem == sizeof(float)) {
        float *d = (float *)dst + off;
        for (int j = 0; j < n; j++) d[(size_t)j * jstride] = x[j];
    } else {
        rw_f32_to_f16_row(x, (rw_f16 *)dst + off, (int64_t)jstride, n);
    }
}

static void store_k(void *dst_layer, size_t elem, int n_head, int dim, int64_t cap, int64_t pos, int64_t m,
                    const float *src, int64_t stride) {
    for (int64_t t = 0; t < m; t++)
        for (int h = 0; h < n_head; h++)
            put(dst_layer, elem, ((size_t)h * (size_t)cap + (size_t)(pos + t)) * (size_t)dim, 1,
                src + t * stride + (size_t)h * (size_t)dim, dim);
}

static void store_v(void *dst_layer, size_t elem, int n_head, int dim, int64_t cap, int64_t pos, int64_t m,
                    const float *src, int64_t stride) {
    for (int64_t t = 0; t < m; t++)
        for (int h = 0; h < n_head; h++)
            put(dst_layer, elem, (size_t)h * (size_t)dim * (size_t)cap + (size_t)(pos + t), (size_t)cap,
                src + t * stride + (size_t)h * (size_t)dim, dim);
}

rw_status rw_kv_store(rw_kv_cache *c, int il, int64_t pos, int64_t m, const float *k, int64_t k_stride,
                      const float *v, int64_t v_stride, rw_error *err) {
    if (il < 0 || il >= c->cfg.n_layer || pos < 0 || m < 0 || pos > c->n || pos + m > c->capacity)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "kv cache: store of %lld positions at %lld (layer %d) out of range",
                         (long long)m, (long long)pos, il);
    store_k(c->k[il], c->elem, c->cfg.n_head_kv, c->cfg.head_dim_k, c->capacity, pos, m, k, k_stride);
    store_v(c->v[il], c->elem, c->cfg.n_head_kv, c->cfg.head_dim_v, c->capacity, pos, m, v, v_stride);
    return RW_OK;
}

rw_status rw_kv_set_length(rw_kv_cache *c, int64_t n, rw_error *err) {
    if (n < 0 || n > c->capacity)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "kv cache: length %lld out of range (capacity %lld)", (long long)n,
                         (long long)c->capacity);
    c->n = n;
    return RW_OK;
}

const void *rw_kv_k_head(const rw_kv_cache *c, int il, int head) {
    return (const char *)c->k[il] + (size_t)head * (size_t)c->capacity * (size_t)c->cfg.head_dim_k * c->elem;
}

const void *rw_kv_v_head(const rw_kv_cache *c, int il, int head) {
    return (const char *)c->v[il] + (size_t)head * (size_t)c->capacity * (size_t)c->cfg.head_dim_v * c->elem;
}

static void get(const void *src, size_t elem, size_t off, size_t jstride, float *dst, int n) {
    for (int j = 0; j < n; j++)
        dst[j] = elem == sizeof(float) ? ((const float *)src)[off + (size_t)j * jstride]
                                       : rw_f16_to_f32(((const rw_f16 *)src)[off + (size_t)j * jstride]);
}

void rw_kv_read_k(const rw_kv_cache *c, int il, int head, int64_t pos, float *dst) {
    get(rw_kv_k_head(c, il, head), c->elem, (size_t)pos * (size_t)c->cfg.head_dim_k, 1, dst, c->cfg.head_dim_k);
}

void rw_kv_read_v(const rw_kv_cache *c, int il, int head, int64_t pos, float *dst) {
    get(rw_kv_v_head(c, il, head), c->elem, (size_t)pos, (size_t)c->capacity, dst, c->cfg.head_dim_v);
}
