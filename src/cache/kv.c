/* kv.c - contiguous per-layer KV cache (see kv.h for the layout). */
#include "cache/kv.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"

#define KV_MIN_CAPACITY 256

/* TEMPORARY until kernels/quant.c (rw_f32_to_f16 / rw_f16_to_f32) is on
 * main: the compiler's _Float16 conversions, which round to nearest even. */
static rw_f16 kv_f32_to_f16(float f) {
    _Float16 x = (_Float16)f;
    rw_f16 h;
    memcpy(&h, &x, sizeof h);
    return h;
}
static float kv_f16_to_f32(rw_f16 h) {
    _Float16 x;
    memcpy(&x, &h, sizeof x);
    return (float)x;
}

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

/* Moves one layer's [n_head][old_cap][dim] buffer to [n_head][new_cap][dim],
 * copying the first n positions of every head. */
static void *regrow(void *old, int n_head, int dim, size_t elem, int64_t old_cap, int64_t new_cap, int64_t n) {
    size_t row = (size_t)dim * elem;
    char *buf = malloc((size_t)n_head * (size_t)new_cap * row);
    if (!buf) return NULL;
    if (old)
        for (int h = 0; h < n_head; h++)
            memcpy(buf + (size_t)h * (size_t)new_cap * row, (char *)old + (size_t)h * (size_t)old_cap * row, (size_t)n * row);
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
        nv[il] = regrow(c->v[il], c->cfg.n_head_kv, c->cfg.head_dim_v, c->elem, c->capacity, cap, c->n);
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

static void store_rows(void *dst_layer, size_t elem, int n_head, int dim, int64_t cap, int64_t pos, int64_t m,
                       const float *src, int64_t stride) {
    for (int64_t t = 0; t < m; t++) {
        const float *row = src + t * stride;
        for (int h = 0; h < n_head; h++) {
            const float *x = row + (size_t)h * (size_t)dim;
            size_t off = ((size_t)h * (size_t)cap + (size_t)(pos + t)) * (size_t)dim;
            if (elem == sizeof(float)) {
                memcpy((float *)dst_layer + off, x, (size_t)dim * sizeof(float));
            } else {
                rw_f16 *d = (rw_f16 *)dst_layer + off;
                for (int i = 0; i < dim; i++) d[i] = kv_f32_to_f16(x[i]);
            }
        }
    }
}

rw_status rw_kv_store(rw_kv_cache *c, int il, int64_t pos, int64_t m, const float *k, int64_t k_stride,
                      const float *v, int64_t v_stride, rw_error *err) {
    if (il < 0 || il >= c->cfg.n_layer || pos < 0 || m < 0 || pos > c->n || pos + m > c->capacity)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "kv cache: store of %lld positions at %lld (layer %d) out of range",
                         (long long)m, (long long)pos, il);
    store_rows(c->k[il], c->elem, c->cfg.n_head_kv, c->cfg.head_dim_k, c->capacity, pos, m, k, k_stride);
    store_rows(c->v[il], c->elem, c->cfg.n_head_kv, c->cfg.head_dim_v, c->capacity, pos, m, v, v_stride);
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

static void read_row(const void *head_base, size_t elem, int dim, int64_t pos, float *dst) {
    if (elem == sizeof(float)) {
        memcpy(dst, (const float *)head_base + (size_t)pos * (size_t)dim, (size_t)dim * sizeof(float));
    } else {
        const rw_f16 *s = (const rw_f16 *)head_base + (size_t)pos * (size_t)dim;
        for (int i = 0; i < dim; i++) dst[i] = kv_f16_to_f32(s[i]);
    }
}

void rw_kv_read_k(const rw_kv_cache *c, int il, int head, int64_t pos, float *dst) {
    read_row(rw_kv_k_head(c, il, head), c->elem, c->cfg.head_dim_k, pos, dst);
}

void rw_kv_read_v(const rw_kv_cache *c, int il, int head, int64_t pos, float *dst) {
    read_row(rw_kv_v_head(c, il, head), c->elem, c->cfg.head_dim_v, pos, dst);
}
