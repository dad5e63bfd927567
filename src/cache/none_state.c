/* none_state.c - the "none" layer state: a layer that keeps nothing per
 * sequence (Nemotron-H's MLP blocks) still holds a state, so that every
 * layer of a sequence answers the same operations table and the sequence
 * code never special-cases it. It holds only its length, which its layer
 * advances with rw_none_state_append; it rewinds to any length by itself
 * and has no checkpoints, no log and no shared blocks. */
#include <stdlib.h>

#include "cache/state.h"

typedef struct {
    rw_layer_state base;
    int64_t len, max_ctx;
} none_state;

static const rw_state_ops none_ops;

static none_state *as_none(rw_layer_state *st) { return st && st->ops == &none_ops ? (none_state *)st : NULL; }
static const none_state *as_cnone(const rw_layer_state *st) {
    return st && st->ops == &none_ops ? (const none_state *)st : NULL;
}

static void none_free(rw_layer_state *st) { free(as_none(st)); }
static int64_t none_length(const rw_layer_state *st) { return as_cnone(st)->len; }
static size_t none_bytes(const rw_layer_state *st) {
    (void)st;
    return sizeof(none_state);
}

static int64_t none_restore_point(const rw_layer_state *st, int64_t n, int64_t *replay) {
    (void)st;
    if (replay) *replay = 0;
    return n;
}

static rw_status none_rewind(rw_layer_state *st, int64_t n, rw_threadpool *pool, rw_error *err) {
    (void)pool;
    none_state *s = as_none(st);
    if (n < 0 || n > s->len)
        return rw_errorf(err, RW_ERR_RANGE, "none state: cannot rewind %lld positions to %lld", (long long)s->len,
                         (long long)n);
    s->len = n;
    return RW_OK;
}

static void none_retain(rw_layer_state *st, const int64_t *keep, int n_keep, int64_t log_from) {
    (void)st, (void)keep, (void)n_keep, (void)log_from;
}
static int none_checkpoints(const rw_layer_state *st, int64_t *pos, int cap) {
    (void)st, (void)pos, (void)cap;
    return 0;
}

static rw_status none_copy_from(rw_layer_state *dst, const rw_layer_state *src, rw_error *err) {
    none_state *d = as_none(dst);
    const none_state *s = as_cnone(src);
    if (!d || !s) return rw_errorf(err, RW_ERR_INVALID_ARG, "none state: copy between different kinds");
    if (s->len > d->max_ctx) return rw_errorf(err, RW_ERR_CONTEXT, "none state: %lld positions exceed the context",
                                              (long long)s->len);
    d->len = s->len;
    return RW_OK;
}

static rw_status none_clone(const rw_layer_state *st, rw_layer_state **out, rw_error *err) {
    const none_state *s = as_cnone(st);
    rw_status r = rw_none_state_new(s->max_ctx, out, err);
    if (r) return r;
    ((none_state *)*out)->len = s->len;
    return RW_OK;
}

static void none_each_block(const rw_layer_state *st, rw_block_fn fn, void *ctx) { (void)st, (void)fn, (void)ctx; }

/* Layout: u64 length. */
static void none_save(const rw_layer_state *st, rw_sbuf *b) { rw_sbuf_put_u64(b, (uint64_t)as_cnone(st)->len); }

static rw_status none_load(rw_layer_state *st, rw_sreader *r, rw_error *err) {
    none_state *s = as_none(st);
    uint64_t n;
    if (!rw_sread_u64(r, &n) || n > (uint64_t)s->max_ctx) return rw_errorf(err, RW_ERR_FORMAT, "none state: bad length");
    s->len = (int64_t)n;
    return RW_OK;
}

static const rw_state_ops none_ops = {
    .kind = "none",
    .free = none_free,
    .length = none_length,
    .bytes = none_bytes,
    .restore_point = none_restore_point,
    .rewind = none_rewind,
    .retain = none_retain,
    .checkpoints = none_checkpoints,
    .clone = none_clone,
    .copy_from = none_copy_from,
    .each_block = none_each_block,
    .save = none_save,
    .load = none_load,
};

rw_status rw_none_state_new(int64_t max_ctx, rw_layer_state **out, rw_error *err) {
    *out = NULL;
    rw_status st = rw_state_ops_check(&none_ops, err);
    if (st) return st;
    if (max_ctx <= 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "none state: context %lld", (long long)max_ctx);
    none_state *s = calloc(1, sizeof *s); /* freed by none_free */
    if (!s) return rw_errorf(err, RW_ERR_NOMEM, "none state: out of memory");
    s->base.ops = &none_ops;
    s->max_ctx = max_ctx;
    *out = &s->base;
    return RW_OK;
}

rw_status rw_none_state_append(rw_layer_state *st, int64_t n, rw_error *err) {
    none_state *s = as_none(st);
    if (!s) return rw_errorf(err, RW_ERR_INVALID_ARG, "not a none state");
    if (n < 0 || n > s->max_ctx - s->len)
        return rw_errorf(err, RW_ERR_CONTEXT, "%lld positions after %lld exceed the context %lld", (long long)n,
                         (long long)s->len, (long long)s->max_ctx);
    s->len += n;
    return RW_OK;
}
