/* kv_state.c - the "kv" layer state: one attention layer's keys and values
 * in cache/kv.h storage. A KV state rewinds to any length by itself, so it
 * keeps no checkpoints and no log. Clones share the pages (cache/kv.h:
 * reference counts, copy-on-write); each_block lists them. */
#include <stdlib.h>
#include <string.h>

#include "cache/state.h"

typedef struct {
    rw_layer_state base;
    rw_kv_cache *kv; /* owned */
} kv_state;

static const rw_state_ops kv_ops;

static kv_state *as_kv(rw_layer_state *st) { return st && st->ops == &kv_ops ? (kv_state *)st : NULL; }
static const kv_state *as_ckv(const rw_layer_state *st) {
    return st && st->ops == &kv_ops ? (const kv_state *)st : NULL;
}

static void kv_free(rw_layer_state *st) {
    kv_state *s = as_kv(st);
    rw_kv_free(s->kv);
    free(s);
}

static int64_t kv_length(const rw_layer_state *st) { return rw_kv_length(as_ckv(st)->kv); }
static size_t kv_bytes(const rw_layer_state *st) { return sizeof(kv_state) + rw_kv_bytes(as_ckv(st)->kv); }

static int64_t kv_restore_point(const rw_layer_state *st, int64_t n, int64_t *replay) {
    (void)st;
    if (replay) *replay = 0;
    return n;
}

static rw_status kv_rewind(rw_layer_state *st, int64_t n, rw_threadpool *pool, rw_error *err) {
    (void)pool;
    kv_state *s = as_kv(st);
    if (n < 0 || n > rw_kv_length(s->kv))
        return rw_errorf(err, RW_ERR_RANGE, "kv state: cannot rewind %lld positions to %lld",
                         (long long)rw_kv_length(s->kv), (long long)n);
    return rw_kv_set_length(s->kv, n, err);
}

static void kv_retain(rw_layer_state *st, const int64_t *keep, int n_keep, int64_t log_from) {
    (void)st, (void)keep, (void)n_keep, (void)log_from;
}
static int kv_checkpoints(const rw_layer_state *st, int64_t *pos, int cap) {
    (void)st, (void)pos, (void)cap;
    return 0;
}

static rw_status kv_make(const rw_kv_config *cfg, kv_state **out, rw_error *err) {
    kv_state *s = calloc(1, sizeof *s);
    if (!s) return rw_errorf(err, RW_ERR_NOMEM, "kv state: out of memory");
    s->base.ops = &kv_ops;
    rw_status st = rw_kv_new(cfg, &s->kv, err);
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    return RW_OK;
}

static size_t elem_of(const rw_kv_config *c) { return c->type == RW_KV_F16 ? 2 : 4; }

/* A snapshot shares the source's pages (cache/kv.h): no rows are copied;
 * whichever side writes into a shared page later copies it first. */
static rw_status kv_copy_from(rw_layer_state *dst, const rw_layer_state *src, rw_error *err) {
    kv_state *d = as_kv(dst);
    const kv_state *s = as_ckv(src);
    if (!d || !s) return rw_errorf(err, RW_ERR_INVALID_ARG, "kv state: copy between different kinds");
    return rw_kv_share(d->kv, s->kv, err);
}

static rw_status kv_clone(const rw_layer_state *st, rw_layer_state **out, rw_error *err) {
    kv_state *c;
    rw_status r = kv_make(rw_kv_get_config(as_ckv(st)->kv), &c, err);
    if (r) return r;
    if ((r = kv_copy_from(&c->base, st, err))) {
        kv_free(&c->base);
        return r;
    }
    *out = &c->base;
    return RW_OK;
}

static void kv_each_block(const rw_layer_state *st, rw_block_fn fn, void *ctx) {
    rw_kv_each_page(as_ckv(st)->kv, fn, ctx);
}

/* Layout: u64 length, then per head the keys [n][head_dim_k] and the
 * transposed values [head_dim_v][n], elements in the cache's type (the
 * pages' pieces written one after the other: the file does not depend on
 * the page size). */
static void kv_save(const rw_layer_state *st, rw_sbuf *b) {
    const rw_kv_cache *kv = as_ckv(st)->kv;
    const rw_kv_config *c = rw_kv_get_config(kv);
    const size_t e = elem_of(c);
    const int64_t n = rw_kv_length(kv);
    rw_sbuf_put_u64(b, (uint64_t)n);
    for (int h = 0; h < c->n_head_kv; h++) {
        for (int64_t p = 0, k; p < n; p += k) {
            const void *rows = rw_kv_k_rows(kv, 0, h, p, &k);
            if (k > n - p) k = n - p;
            rw_sbuf_put(b, rows, (size_t)k * (size_t)c->head_dim_k * e);
        }
        for (int j = 0; j < c->head_dim_v; j++)
            for (int64_t p = 0, k; p < n; p += k) {
                const void *el = rw_kv_v_elems(kv, 0, h, j, p, &k);
                if (k > n - p) k = n - p;
                rw_sbuf_put(b, el, (size_t)k * e);
            }
    }
}

static rw_status kv_load(rw_layer_state *st, rw_sreader *r, rw_error *err) {
    kv_state *s = as_kv(st);
    const rw_kv_config *c = rw_kv_get_config(s->kv);
    const size_t e = elem_of(c);
    uint64_t n;
    if (!rw_sread_u64(r, &n) || n > (uint64_t)c->max_ctx)
        return rw_errorf(err, RW_ERR_FORMAT, "kv state: bad length");
    const size_t need = (size_t)n * (size_t)c->n_head_kv * (size_t)(c->head_dim_k + c->head_dim_v) * e;
    if (need > r->len - r->off) return rw_errorf(err, RW_ERR_FORMAT, "kv state: truncated");
    /* Build into a fresh cache (its pages are its own), swap only on success. */
    rw_kv_cache *kv;
    rw_status rs = rw_kv_new(c, &kv, err);
    if (rs) return rs;
    if (n > 0 && (rs = rw_kv_reserve(kv, (int64_t)n, err))) {
        rw_kv_free(kv);
        return rs;
    }
    const int64_t nn = (int64_t)n;
    for (int h = 0; h < c->n_head_kv; h++) {
        for (int64_t p = 0, k; p < nn; p += k) {
            void *rows = rw_kv_k_rows_mut(kv, 0, h, p, &k);
            if (k > nn - p) k = nn - p;
            rw_sread(r, rows, (size_t)k * (size_t)c->head_dim_k * e);
        }
        for (int j = 0; j < c->head_dim_v; j++)
            for (int64_t p = 0, k; p < nn; p += k) {
                void *el = rw_kv_v_elems_mut(kv, 0, h, j, p, &k);
                if (k > nn - p) k = nn - p;
                rw_sread(r, el, (size_t)k * e);
            }
    }
    rw_kv_set_length(kv, nn, NULL);
    rw_kv_free(s->kv);
    s->kv = kv;
    return RW_OK;
}

static const rw_state_ops kv_ops = {
    .kind = "kv",
    .free = kv_free,
    .length = kv_length,
    .bytes = kv_bytes,
    .restore_point = kv_restore_point,
    .rewind = kv_rewind,
    .retain = kv_retain,
    .checkpoints = kv_checkpoints,
    .clone = kv_clone,
    .copy_from = kv_copy_from,
    .each_block = kv_each_block,
    .save = kv_save,
    .load = kv_load,
};

rw_status rw_kv_state_new(rw_kv_type type, int n_head_kv, int head_dim_k, int head_dim_v, int64_t max_ctx,
                          rw_layer_state **out, rw_error *err) {
    *out = NULL;
    rw_status st = rw_state_ops_check(&kv_ops, err);
    if (st) return st;
    const rw_kv_config cfg = {.type = type, .n_layer = 1, .n_head_kv = n_head_kv, .head_dim_k = head_dim_k,
                              .head_dim_v = head_dim_v, .max_ctx = max_ctx};
    kv_state *s;
    if ((st = kv_make(&cfg, &s, err))) return st;
    *out = &s->base;
    return RW_OK;
}

rw_kv_cache *rw_kv_state_cache(rw_layer_state *st) {
    kv_state *s = as_kv(st);
    return s ? s->kv : NULL;
}

rw_status rw_kv_state_append(rw_layer_state *st, int64_t m, const float *k, int64_t k_stride, const float *v,
                             int64_t v_stride, rw_error *err) {
    kv_state *s = as_kv(st);
    if (!s) return rw_errorf(err, RW_ERR_INVALID_ARG, "not a kv state");
    const int64_t pos = rw_kv_length(s->kv);
    rw_status r;
    if ((r = rw_kv_reserve(s->kv, pos + m, err)) || (r = rw_kv_store(s->kv, 0, pos, m, k, k_stride, v, v_stride, err)))
        return r;
    return rw_kv_set_length(s->kv, pos + m, err);
}

