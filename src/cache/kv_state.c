/* kv_state.c - the "kv" layer state: one attention layer's keys and values
 * in cache/kv.h storage. Clones share the pages (cache/kv.h: reference
 * counts, copy-on-write); each_block lists them.
 *
 * A full layer rewinds to any length by itself and keeps everything.
 * A sliding-window layer (window W > 0) is a state like a recurrent one:
 * after n tokens, the next token attends to positions n+1-W..n only, so
 * the pages wholly before n+1-W are released (cache/kv.h holes). Its
 * checkpoints are windows: retain keeps the pages of the window of every
 * kept position (those of positions near the length overlap the live
 * window: together they form a ring of about W + the recent span), and
 * the state returns by itself to any position whose window's pages are all
 * held (restore_point), without replay: a page holds the same rows in every
 * holder, as a token's keys and values depend only on the tokens before
 * it. Further back the caller recomputes from such a position, as for a
 * recurrent layer. */
#include <stdlib.h>
#include <string.h>

#include "cache/state.h"

#define P RW_KV_PAGE

typedef struct {
    rw_layer_state base;
    rw_kv_cache *kv; /* owned */
    int64_t window;  /* > 0: sliding window of that many positions; 0: full */
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

/* The first position the token after a length of n attends to. */
static int64_t win_lo(const kv_state *s, int64_t n) {
    return s->window > 0 && n + 1 > s->window ? n + 1 - s->window : 0;
}

/* Whether the pages of positions win_lo(n)..n-1 are all held (n <= the
 * length); if not, *missing gets the highest page that is not. */
static bool window_held(const kv_state *s, int64_t n, int64_t *missing) {
    for (int64_t p = n - 1 >= 0 ? (n - 1) / P : -1; n > 0 && p >= win_lo(s, n) / P; p--)
        if (!rw_kv_has_page(s->kv, p)) {
            if (missing) *missing = p;
            return false;
        }
    return true;
}

static int64_t kv_restore_point(const rw_layer_state *st, int64_t n, int64_t *replay) {
    const kv_state *s = as_ckv(st);
    if (replay) *replay = 0;
    /* a window that misses page q: every position whose window reaches
     * into q misses it too, so the next candidate ends below q */
    for (int64_t q; s->window > 0 && n > 0 && !window_held(s, n, &q);) n = q * P;
    return n;
}

static rw_status kv_rewind(rw_layer_state *st, int64_t n, rw_threadpool *pool, rw_error *err) {
    (void)pool;
    kv_state *s = as_kv(st);
    if (n < 0 || n > rw_kv_length(s->kv) || !window_held(s, n, NULL))
        return rw_errorf(err, RW_ERR_RANGE, "kv state: cannot rewind %lld positions to %lld",
                         (long long)rw_kv_length(s->kv), (long long)n);
    return rw_kv_set_length(s->kv, n, err);
}

/* Marks the pages of n's window in need (n <= the length). */
static void mark_window(const kv_state *s, int64_t n, bool *need) {
    for (int64_t p = win_lo(s, n) / P; n > 0 && p <= (n - 1) / P; p++) need[p] = true;
}

/* A window layer keeps the pages of the live window, of the windows of
 * the kept positions it can still form (all their pages held) and of every
 * position from `from` on (a dense span: every page from from's window's
 * start to the length, so that each of those positions returns by itself);
 * the rest go. Out of memory for the marks: keeps everything (never
 * fails). */
static void kv_retain(rw_layer_state *st, const int64_t *keep, int n_keep, int64_t from) {
    kv_state *s = as_kv(st);
    const int64_t L = rw_kv_length(s->kv), np = (L + P - 1) / P;
    if (s->window <= 0 || np == 0) return;
    bool *need = calloc((size_t)np, sizeof *need);
    if (!need) return;
    mark_window(s, L, need);
    for (int64_t p = win_lo(s, from > 0 ? from : 0) / P; from < L && p < np; p++) need[p] = true;
    for (int i = 0; i < n_keep; i++)
        if (keep[i] > 0 && keep[i] < L && window_held(s, keep[i], NULL)) mark_window(s, keep[i], need);
    for (int64_t p = 0; p < np; p++)
        if (!need[p]) rw_kv_release_page(s->kv, p);
    free(need);
}
static int kv_checkpoints(const rw_layer_state *st, int64_t *pos, int cap) {
    (void)st, (void)pos, (void)cap;
    return 0;
}

static rw_status kv_make(const rw_kv_config *cfg, int64_t window, kv_state **out, rw_error *err) {
    kv_state *s = calloc(1, sizeof *s);
    if (!s) return rw_errorf(err, RW_ERR_NOMEM, "kv state: out of memory");
    s->base.ops = &kv_ops;
    s->window = window;
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
    if (!d || !s || d->window != s->window)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "kv state: copy between different kinds");
    return rw_kv_share(d->kv, s->kv, err);
}

static rw_status kv_clone(const rw_layer_state *st, rw_layer_state **out, rw_error *err) {
    kv_state *c;
    rw_status r = kv_make(rw_kv_get_config(as_ckv(st)->kv), as_ckv(st)->window, &c, err);
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

/* The rows of positions a..b-1 (held pages): per head the keys
 * [b-a][head_dim_k], then the transposed values [head_dim_v][b-a], in the
 * cache's element type (the pages' pieces one after the other: the bytes
 * do not depend on the page size). put: save; otherwise load (the cache's
 * pages its own). */
static void run_rows(rw_kv_cache *kv, int64_t a, int64_t b, bool put, rw_sbuf *sb, rw_sreader *r) {
    const rw_kv_config *c = rw_kv_get_config(kv);
    const size_t e = elem_of(c);
    for (int h = 0; h < c->n_head_kv; h++) {
        for (int64_t p = a, k; p < b; p += k) {
            void *rows = rw_kv_k_rows_mut(kv, 0, h, p, &k);
            if (k > b - p) k = b - p;
            if (put) rw_sbuf_put(sb, rows, (size_t)k * (size_t)c->head_dim_k * e);
            else rw_sread(r, rows, (size_t)k * (size_t)c->head_dim_k * e);
        }
        for (int j = 0; j < c->head_dim_v; j++)
            for (int64_t p = a, k; p < b; p += k) {
                void *el = rw_kv_v_elems_mut(kv, 0, h, j, p, &k);
                if (k > b - p) k = b - p;
                if (put) rw_sbuf_put(sb, el, (size_t)k * e);
                else rw_sread(r, el, (size_t)k * e);
            }
    }
}

/* The next run of held pages at or after page *p, as positions [*a, *b)
 * below n; false when there is none. */
static bool next_run(const rw_kv_cache *kv, int64_t n, int64_t *p, int64_t *a, int64_t *b) {
    const int64_t np = (n + P - 1) / P;
    while (*p < np && !rw_kv_has_page(kv, *p)) (*p)++;
    if (*p >= np) return false;
    *a = *p * P;
    while (*p < np && rw_kv_has_page(kv, *p)) (*p)++;
    *b = *p * P < n ? *p * P : n;
    return true;
}

/* Layout: u64 length n; a window layer then u32 runs and per run u64 a, b
 * (the held positions a..b-1: whole pages, ascending); then the rows of
 * 0..n-1 (full) or of each run in turn (run_rows). */
static void kv_save(const rw_layer_state *st, rw_sbuf *b) {
    const kv_state *s = as_ckv(st);
    rw_kv_cache *kv = s->kv; /* only read: run_rows with put */
    const int64_t n = rw_kv_length(kv);
    rw_sbuf_put_u64(b, (uint64_t)n);
    if (s->window <= 0) {
        run_rows(kv, 0, n, true, b, NULL);
        return;
    }
    uint32_t runs = 0;
    int64_t p = 0, x, y;
    while (next_run(kv, n, &p, &x, &y)) runs++;
    rw_sbuf_put_u32(b, runs);
    for (p = 0; next_run(kv, n, &p, &x, &y);) rw_sbuf_put_u64(b, (uint64_t)x), rw_sbuf_put_u64(b, (uint64_t)y);
    for (p = 0; next_run(kv, n, &p, &x, &y);) run_rows(kv, x, y, true, b, NULL);
}

static rw_status kv_load(rw_layer_state *st, rw_sreader *r, rw_error *err) {
    kv_state *s = as_kv(st);
    const rw_kv_config *c = rw_kv_get_config(s->kv);
    const size_t row = (size_t)c->n_head_kv * (size_t)(c->head_dim_k + c->head_dim_v) * elem_of(c);
    uint64_t n;
    if (!rw_sread_u64(r, &n) || n > (uint64_t)c->max_ctx) return rw_errorf(err, RW_ERR_FORMAT, "kv state: bad length");
    const int64_t nn = (int64_t)n, np = (nn + P - 1) / P;
    /* which pages the file holds: all (full) or its runs (window) */
    bool *held = calloc((size_t)(np ? np : 1), sizeof *held);
    if (!held) return rw_errorf(err, RW_ERR_NOMEM, "kv state: out of memory");
    uint64_t positions = n;
    const size_t runs_at = r->off;
    uint32_t runs = 0;
    rw_status rs = RW_OK;
    if (s->window <= 0) {
        for (int64_t p = 0; p < np; p++) held[p] = true;
    } else if (!rw_sread_u32(r, &runs) || runs > (uint64_t)np) {
        rs = rw_errorf(err, RW_ERR_FORMAT, "kv state: bad runs");
    } else {
        positions = 0;
        int64_t end = 0;
        for (uint32_t i = 0; i < runs && !rs; i++) {
            uint64_t a, b;
            if (!rw_sread_u64(r, &a) || !rw_sread_u64(r, &b) || a % P || (int64_t)a < end || a >= b || b > n ||
                (b % P && b != n))
                rs = rw_errorf(err, RW_ERR_FORMAT, "kv state: bad run");
            else
                for (int64_t p = (int64_t)a / P; p < ((int64_t)b + P - 1) / P; p++) held[p] = true;
            if (!rs) positions += b - a, end = (int64_t)b;
        }
    }
    if (!rs && positions * row > r->len - r->off) rs = rw_errorf(err, RW_ERR_FORMAT, "kv state: truncated");
    /* Build into a fresh cache (its pages are its own), swap only on success. */
    rw_kv_cache *kv = NULL;
    if (!rs) rs = rw_kv_new(c, &kv, err);
    /* page by page, each one not in the file released at once: memory
     * for the held pages only */
    for (int64_t p = 0; p < np && !rs; p++)
        if (!(rs = rw_kv_reserve(kv, (p + 1) * P < nn ? (p + 1) * P : nn, err)) && !held[p]) rw_kv_release_page(kv, p);
    if (!rs) {
        rw_kv_set_length(kv, nn, NULL);
        const kv_state probe = {.kv = kv, .window = s->window};
        if (!window_held(&probe, nn, NULL)) rs = rw_errorf(err, RW_ERR_FORMAT, "kv state: the window is not held");
    }
    if (!rs) {
        if (s->window <= 0) {
            run_rows(kv, 0, nn, false, NULL, r);
        } else {
            rw_sreader ranges = *r;
            ranges.off = runs_at + 4;
            for (uint32_t i = 0; i < runs; i++) {
                uint64_t a, b;
                rw_sread_u64(&ranges, &a), rw_sread_u64(&ranges, &b);
                run_rows(kv, (int64_t)a, (int64_t)b, false, NULL, r);
            }
        }
    }
    free(held);
    if (rs) {
        rw_kv_free(kv);
        return rs;
    }
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
    const rw_kv_config cfg = {.type = type,
                              .n_layer = 1,
                              .n_head_kv = n_head_kv,
                              .head_dim_k = head_dim_k,
                              .head_dim_v = head_dim_v,
                              .max_ctx = max_ctx};
    kv_state *s;
    if ((st = kv_make(&cfg, 0, &s, err))) return st;
    *out = &s->base;
    return RW_OK;
}

rw_status rw_kv_state_new_window(rw_kv_type type, int n_head_kv, int head_dim_k, int head_dim_v, int64_t window,
                                 int64_t max_ctx, rw_layer_state **out, rw_error *err) {
    *out = NULL;
    if (window <= 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "kv state: window %lld", (long long)window);
    rw_layer_state *st;
    rw_status r = rw_kv_state_new(type, n_head_kv, head_dim_k, head_dim_v, max_ctx, &st, err);
    if (r) return r;
    as_kv(st)->window = window;
    *out = st;
    return RW_OK;
}

size_t rw_kv_state_window_bytes(const rw_layer_state *st) {
    const kv_state *s = as_ckv(st);
    if (!s || s->window <= 0) return 0;
    /* W positions span at most ceil((W - 1) / P) + 1 pages */
    return (size_t)((s->window - 1 + P - 1) / P + 1) * rw_kv_page_bytes(s->kv);
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
