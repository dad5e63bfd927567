/* rec_state.c - what every recurrent state kind shares: the live state, its
 * checkpoints, the log of recent recurrence inputs, and the operations table
 * built on them (state.h). A kind supplies only how to run its recurrence
 * (cache_int.h).
 *
 * Invariants:
 *   - live holds the state after tokens 0..len-1; a state is conv
 *     [(Kc-1)*C] followed by mat [mat_floats];
 *   - ck[0..n_ck) are copies of the state at positions 0 < pos <= len,
 *     strictly ascending; position 0 is the zero state and is never stored;
 *     their buffers are immutable and may be shared with clones (ck_buf);
 *   - when log_n > 0 the log holds the inputs of positions
 *     log_start..len-1 (log_start + log_n == len).
 */
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_int.h"

/* Checkpoint buffers never change once taken, so copies of a state share
 * them (a clone costs the live state and the log, not every checkpoint): a
 * reference count sits in front of the data. */
typedef struct {
    atomic_int refs;
    alignas(64) float data[];
} ck_buf;

/* Every state buffer, live states included, is a ck_buf from
 * rw_cache__rec_buf_alloc (state_pool.c: fresh memory is expensive, and sequences
 * take and drop these all the time). */
static float *ck_alloc(size_t bytes) {
    ck_buf *b = rw_cache__rec_buf_alloc(sizeof(ck_buf) + bytes);
    if (!b) return NULL;
    atomic_init(&b->refs, 1);
    return b->data;
}
static ck_buf *ck_of(float *data) { return (ck_buf *)((char *)data - offsetof(ck_buf, data)); }
static float *ck_ref(float *data) {
    atomic_fetch_add(&ck_of(data)->refs, 1);
    return data;
}
/* bytes: the buffer's data size (every buffer of a state has its
 * state_bytes) */
static void ck_unref(float *data, size_t bytes) {
    if (data && atomic_fetch_sub(&ck_of(data)->refs, 1) == 1) rw_cache__rec_buf_free(ck_of(data), sizeof(ck_buf) + bytes);
}

typedef struct {
    int64_t pos;
    float *data; /* owned: state_floats */
} rec_ckpt;

typedef struct {
    rw_layer_state base;
    const rec_kind *kind;
    rw_rec_params p;
    int64_t conv_floats, state_floats;
    int64_t len;
    float *live;    /* owned, from ck_alloc (never shared) */
    rec_ckpt *ck;   /* owned array, each data owned */
    int n_ck, cap_ck;
    float *log;     /* owned: log_cap entries of p.log_floats */
    int64_t log_start, log_n, log_cap;
} rec_state;

static void rec_free(rw_layer_state *st);
static const rw_state_ops *ops_of(const rec_kind *k);

/* Every recurrent kind has its own table (its own kind name), all built from
 * the functions below; a state is recurrent iff its table frees with rec_free. */
static rec_state *as_rec(rw_layer_state *st) { return st && st->ops->free == rec_free ? (rec_state *)st : NULL; }
static const rec_state *as_crec(const rw_layer_state *st) {
    return st && st->ops->free == rec_free ? (const rec_state *)st : NULL;
}

static size_t state_bytes(const rec_state *s) { return (size_t)s->state_floats * sizeof(float); }

static void rec_free(rw_layer_state *st) {
    rec_state *s = as_rec(st);
    for (int i = 0; i < s->n_ck; i++) ck_unref(s->ck[i].data, state_bytes(s));
    free(s->ck);
    ck_unref(s->live, state_bytes(s));
    free(s->log);
    free(s);
}

static int64_t rec_length(const rw_layer_state *st) { return as_crec(st)->len; }

static size_t rec_bytes(const rw_layer_state *st) {
    const rec_state *s = as_crec(st);
    return sizeof *s + (size_t)(1 + s->n_ck) * state_bytes(s) + (size_t)s->cap_ck * sizeof(rec_ckpt) +
           (size_t)s->log_cap * (size_t)s->p.log_floats * sizeof(float);
}

/* Index of the last checkpoint at pos <= n, or -1 (the zero state). */
static int ck_at_or_before(const rec_state *s, int64_t n) {
    int i = s->n_ck - 1;
    while (i >= 0 && s->ck[i].pos > n) i--;
    return i;
}

static bool log_covers(const rec_state *s, int64_t from, int64_t to) {
    if (from == to) return true;
    return s->log_n > 0 && s->log_start <= from && to <= s->len;
}

static int64_t rec_restore_point(const rw_layer_state *st, int64_t n, int64_t *replay) {
    const rec_state *s = as_crec(st);
    if (replay) *replay = 0;
    if (n >= s->len) return s->len;
    const int i = ck_at_or_before(s, n);
    const int64_t c = i < 0 ? 0 : s->ck[i].pos;
    if (log_covers(s, c, n)) {
        if (replay) *replay = n - c;
        return n;
    }
    return c;
}

static rw_status rec_rewind(rw_layer_state *st, int64_t n, rw_threadpool *pool, rw_error *err) {
    rec_state *s = as_rec(st);
    if (n < 0 || n > s->len)
        return rw_errorf(err, RW_ERR_RANGE, "%s state: cannot rewind %lld tokens to %lld", s->kind->name,
                         (long long)s->len, (long long)n);
    if (n == s->len) return RW_OK;
    int64_t replay;
    if (rec_restore_point(st, n, &replay) != n)
        return rw_errorf(err, RW_ERR_RANGE, "%s state: position %lld is not restorable without recompute",
                         s->kind->name, (long long)n);
    const int i = ck_at_or_before(s, n);
    const int64_t c = i < 0 ? 0 : s->ck[i].pos;
    /* Rebuild in a temporary; the live state changes only on success. */
    const int nt = rw_threadpool_size(pool);
    float *tmp = ck_alloc(state_bytes(s));
    float *scr = replay ? malloc((size_t)s->kind->scratch_floats(&s->p, replay, nt) * sizeof(float)) : NULL;
    float *out = replay ? malloc((size_t)replay * (size_t)s->p.out_floats * sizeof(float)) : NULL;
    if (!tmp || (replay && (!scr || !out))) {
        ck_unref(tmp, state_bytes(s));
        free(scr), free(out);
        return rw_errorf(err, RW_ERR_NOMEM, "%s state: out of memory rewinding", s->kind->name);
    }
    if (i < 0) memset(tmp, 0, state_bytes(s));
    else memcpy(tmp, s->ck[i].data, state_bytes(s));
    if (replay) {
        const float *in = s->log + (size_t)(c - s->log_start) * (size_t)s->p.log_floats;
        s->kind->run(&s->p, tmp, tmp + s->conv_floats, replay, in, s->p.log_floats, out, s->p.out_floats, scr, pool);
    }
    free(scr), free(out);
    ck_unref(s->live, state_bytes(s));
    s->live = tmp;
    s->len = n;
    while (s->n_ck > 0 && s->ck[s->n_ck - 1].pos > n) ck_unref(s->ck[--s->n_ck].data, state_bytes(s));
    if (s->log_n > 0) {
        s->log_n = n - s->log_start;
        if (s->log_n <= 0) s->log_n = 0, s->log_start = n;
    }
    return RW_OK;
}

static void rec_retain(rw_layer_state *st, const int64_t *keep, int n_keep, int64_t log_from) {
    rec_state *s = as_rec(st);
    int w = 0, k = 0;
    for (int i = 0; i < s->n_ck; i++) {
        while (k < n_keep && keep[k] < s->ck[i].pos) k++;
        if (k < n_keep && keep[k] == s->ck[i].pos) s->ck[w++] = s->ck[i];
        else ck_unref(s->ck[i].data, state_bytes(s));
    }
    s->n_ck = w;
    if (s->log_n > 0 && log_from > s->log_start) {
        const int64_t drop = log_from >= s->len ? s->log_n : log_from - s->log_start;
        memmove(s->log, s->log + (size_t)drop * (size_t)s->p.log_floats,
                (size_t)(s->log_n - drop) * (size_t)s->p.log_floats * sizeof(float));
        s->log_n -= drop;
        s->log_start += drop;
    }
}

static int rec_checkpoints(const rw_layer_state *st, int64_t *pos, int cap) {
    const rec_state *s = as_crec(st);
    for (int i = 0; i < s->n_ck && i < cap; i++) pos[i] = s->ck[i].pos;
    return s->n_ck;
}

static rw_status rec_make(const rec_kind *kind, const rw_rec_params *p, rec_state **out, rw_error *err) {
    rec_state *s = calloc(1, sizeof *s);
    if (!s) return rw_errorf(err, RW_ERR_NOMEM, "recurrent state: out of memory");
    s->base.ops = ops_of(kind);
    s->kind = kind;
    s->p = *p;
    s->conv_floats = (int64_t)(p->conv_kernel - 1) * p->conv_channels;
    s->state_floats = s->conv_floats + p->mat_floats;
    s->live = ck_alloc(state_bytes(s));
    if (!s->live) {
        free(s);
        return rw_errorf(err, RW_ERR_NOMEM, "recurrent state: out of memory");
    }
    memset(s->live, 0, state_bytes(s));
    *out = s;
    return RW_OK;
}

rw_status rw_cache__rec_state_new(const rec_kind *kind, const rw_rec_params *p, rw_layer_state **out, rw_error *err) {
    *out = NULL;
    rw_status st = rw_state_ops_check(ops_of(kind), err);
    if (st) return st;
    rec_state *s;
    if ((st = rec_make(kind, p, &s, err))) return st;
    *out = &s->base;
    return RW_OK;
}

/* Replaces d's content by a copy of s's (same kind and shape). */
static rw_status rec_copy_from(rw_layer_state *dst, const rw_layer_state *src, rw_error *err) {
    rec_state *d = as_rec(dst);
    const rec_state *s = as_crec(src);
    if (!d || !s || d->kind != s->kind || d->state_floats != s->state_floats || d->p.log_floats != s->p.log_floats)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "recurrent state: copy between different shapes");
    if (d == s) return RW_OK;
    rec_ckpt *ck = s->n_ck ? calloc((size_t)s->n_ck, sizeof *ck) : NULL;
    float *log = s->log_n ? malloc((size_t)s->log_n * (size_t)s->p.log_floats * sizeof(float)) : NULL;
    bool ok = (!s->n_ck || ck) && (!s->log_n || log);
    if (!ok) {
        free(ck), free(log);
        return rw_errorf(err, RW_ERR_NOMEM, "recurrent state: out of memory copying");
    }
    for (int i = 0; i < s->n_ck; i++) ck[i] = (rec_ckpt){.pos = s->ck[i].pos, .data = ck_ref(s->ck[i].data)};
    if (log) memcpy(log, s->log, (size_t)s->log_n * (size_t)s->p.log_floats * sizeof(float));
    for (int i = 0; i < d->n_ck; i++) ck_unref(d->ck[i].data, state_bytes(d));
    free(d->ck), free(d->log);
    memcpy(d->live, s->live, state_bytes(s));
    d->len = s->len;
    d->ck = ck, d->n_ck = d->cap_ck = s->n_ck;
    d->log = log, d->log_start = s->log_start, d->log_n = d->log_cap = s->log_n;
    return RW_OK;
}

static rw_status rec_clone(const rw_layer_state *st, rw_layer_state **out, rw_error *err) {
    const rec_state *s = as_crec(st);
    rec_state *c;
    rw_status r = rec_make(s->kind, &s->p, &c, err);
    if (r) return r;
    if ((r = rec_copy_from(&c->base, st, err))) {
        rec_free(&c->base);
        return r;
    }
    *out = &c->base;
    return RW_OK;
}

static void rec_each_block(const rw_layer_state *st, rw_block_fn fn, void *ctx) {
    const rec_state *s = as_crec(st);
    for (int i = 0; i < s->n_ck; i++) fn(ctx, ck_of(s->ck[i].data), state_bytes(s)); /* as bytes() counts it */
}

/* Layout: u64 len, live state, u32 n_ck, n_ck x (u64 pos, state), u64
 * log_start, u64 log_n, log_n x log_floats. */
static void rec_save(const rw_layer_state *st, rw_sbuf *b) {
    const rec_state *s = as_crec(st);
    rw_sbuf_put_u64(b, (uint64_t)s->len);
    rw_sbuf_put(b, s->live, state_bytes(s));
    rw_sbuf_put_u32(b, (uint32_t)s->n_ck);
    for (int i = 0; i < s->n_ck; i++) {
        rw_sbuf_put_u64(b, (uint64_t)s->ck[i].pos);
        rw_sbuf_put(b, s->ck[i].data, state_bytes(s));
    }
    rw_sbuf_put_u64(b, (uint64_t)s->log_start);
    rw_sbuf_put_u64(b, (uint64_t)s->log_n);
    rw_sbuf_put(b, s->log, (size_t)s->log_n * (size_t)s->p.log_floats * sizeof(float));
}

static rw_status rec_load(rw_layer_state *st, rw_sreader *r, rw_error *err) {
    rec_state *s = as_rec(st);
    rec_state *t;
    rw_status rs = rec_make(s->kind, &s->p, &t, err);
    if (rs) return rs;
    uint64_t len, log_start, log_n;
    uint32_t n_ck;
    const char *why = NULL;
    if (!rw_sread_u64(r, &len) || len > (1ull << 40) || !rw_sread(r, t->live, state_bytes(t)) ||
        !rw_sread_u32(r, &n_ck))
        why = "truncated header";
    else if ((uint64_t)n_ck * state_bytes(t) > r->len - r->off)
        why = "checkpoint count exceeds the data";
    if (!why && n_ck) {
        t->ck = calloc(n_ck, sizeof *t->ck);
        if (!t->ck) why = "out of memory";
        t->cap_ck = (int)n_ck;
    }
    for (uint32_t i = 0; !why && i < n_ck; i++) {
        uint64_t pos;
        if (!rw_sread_u64(r, &pos) || pos == 0 || pos > len || (i && pos <= (uint64_t)t->ck[i - 1].pos)) {
            why = "bad checkpoint position";
            break;
        }
        t->ck[i].pos = (int64_t)pos;
        if (!(t->ck[i].data = ck_alloc(state_bytes(t)))) why = "out of memory";
        else if (!rw_sread(r, t->ck[i].data, state_bytes(t))) why = "truncated checkpoint";
        t->n_ck = (int)i + 1;
    }
    if (!why && (!rw_sread_u64(r, &log_start) || !rw_sread_u64(r, &log_n))) why = "truncated log header";
    if (!why && (log_n > len || (log_n && log_start + log_n != len) ||
                 log_n * (uint64_t)t->p.log_floats * sizeof(float) > r->len - r->off))
        why = "bad log extent";
    if (!why && log_n) {
        if (!(t->log = malloc((size_t)log_n * (size_t)t->p.log_floats * sizeof(float)))) why = "out of memory";
        else rw_sread(r, t->log, (size_t)log_n * (size_t)t->p.log_floats * sizeof(float));
        t->log_cap = (int64_t)log_n;
    }
    if (why) {
        rec_free(&t->base);
        return rw_errorf(err, RW_ERR_FORMAT, "%s state: %s", s->kind->name, why);
    }
    t->len = (int64_t)len;
    t->log_start = log_n ? (int64_t)log_start : (int64_t)len;
    t->log_n = (int64_t)log_n;
    /* Move t's content into s (s keeps its identity for its owner). */
    rec_state keep = *s;
    *s = *t;
    *t = keep;
    rec_free(&t->base);
    return RW_OK;
}

#define REC_OPS(kind_name)                                                                                          \
    {                                                                                                                  \
        .kind = kind_name, .free = rec_free, .length = rec_length, .bytes = rec_bytes,                                 \
        .restore_point = rec_restore_point, .rewind = rec_rewind, .retain = rec_retain,                                \
        .checkpoints = rec_checkpoints, .clone = rec_clone, .copy_from = rec_copy_from,                               \
        .each_block = rec_each_block, .save = rec_save,                                                                \
        .load = rec_load,                                                                                              \
    }
static const rw_state_ops deltanet_ops = REC_OPS("deltanet"), mamba2_ops = REC_OPS("mamba2"),
                          shortconv_ops = REC_OPS("shortconv");
static const rw_state_ops *ops_of(const rec_kind *k) {
    if (!strcmp(k->name, "mamba2")) return &mamba2_ops;
    if (!strcmp(k->name, "shortconv")) return &shortconv_ops;
    return &deltanet_ops;
}

/* ---- appending ---- */

rw_status rw_rec_state_append(rw_layer_state *st, const float *in, int64_t in_stride, int64_t n, const int64_t *cuts,
                              int n_cuts, int64_t log_from, float *out, int64_t out_stride, rw_threadpool *pool,
                              rw_error *err) {
    rec_state *s = as_rec(st);
    if (!s) return rw_errorf(err, RW_ERR_INVALID_ARG, "not a recurrent state");
    if (n <= 0) return RW_OK;
    const int64_t len = s->len, LF = s->p.log_floats;
    /* Which cuts need a new checkpoint: inside [len, len+n], above the last. */
    int first = 0;
    while (first < n_cuts && (cuts[first] < len || (s->n_ck && cuts[first] <= s->ck[s->n_ck - 1].pos) ||
                              cuts[first] == 0))
        first++;
    int n_new = 0;
    while (first + n_new < n_cuts && cuts[first + n_new] <= len + n) n_new++;
    /* The log after this call: a suffix ending at len+n, from new_start. */
    int64_t new_start = s->log_n ? s->log_start : len;
    if (log_from > new_start) new_start = log_from;
    if (new_start > len + n) new_start = len + n;
    const int64_t keep_old = new_start < len ? len - new_start : 0; /* old entries kept */
    const int64_t new_n = len + n - new_start;
    /* Allocate everything first so that nothing can fail after a change. */
    const int nt = rw_threadpool_size(pool);
    float *scr = malloc((size_t)s->kind->scratch_floats(&s->p, n, nt) * sizeof(float));
    float **bufs = n_new ? calloc((size_t)n_new, sizeof *bufs) : NULL;
    bool ok = scr && (!n_new || bufs);
    for (int i = 0; ok && i < n_new; i++) ok = (bufs[i] = ck_alloc(state_bytes(s))) != NULL;
    if (ok && s->n_ck + n_new > s->cap_ck) {
        rec_ckpt *ck = realloc(s->ck, (size_t)(s->n_ck + n_new) * sizeof *ck);
        if ((ok = ck != NULL)) s->ck = ck, s->cap_ck = s->n_ck + n_new;
    }
    if (ok && new_n > s->log_cap) {
        int64_t cap = s->log_cap ? s->log_cap : 16;
        while (cap < new_n) cap *= 2;
        float *log = malloc((size_t)cap * (size_t)LF * sizeof(float));
        if ((ok = log != NULL)) {
            if (keep_old) memcpy(log, s->log + (size_t)(s->log_n - keep_old) * (size_t)LF, (size_t)keep_old * (size_t)LF * sizeof(float));
            free(s->log);
            s->log = log, s->log_cap = cap;
            s->log_n = keep_old, s->log_start = len - keep_old;
        }
    }
    if (!ok) {
        for (int i = 0; bufs && i < n_new; i++) ck_unref(bufs[i], state_bytes(s));
        free(bufs), free(scr);
        return rw_errorf(err, RW_ERR_NOMEM, "%s state: out of memory appending %lld tokens", s->kind->name,
                         (long long)n);
    }
    /* Drop log entries before new_start (in place). */
    if (s->log_n > keep_old) {
        memmove(s->log, s->log + (size_t)(s->log_n - keep_old) * (size_t)LF, (size_t)keep_old * (size_t)LF * sizeof(float));
        s->log_n = keep_old;
        s->log_start = len - keep_old;
    }
    if (!keep_old) s->log_n = 0, s->log_start = new_start;
    /* Run between cuts, snapshotting at each. */
    int64_t done = 0;
    for (int i = 0; i <= n_new; i++) {
        const int64_t upto = i < n_new ? cuts[first + i] - len : n;
        if (upto > done)
            s->kind->run(&s->p, s->live, s->live + s->conv_floats, upto - done, in + done * in_stride, in_stride,
                         out + done * out_stride, out_stride, scr, pool);
        done = upto;
        if (i < n_new) {
            memcpy(bufs[i], s->live, state_bytes(s));
            s->ck[s->n_ck].pos = cuts[first + i];
            s->ck[s->n_ck++].data = bufs[i];
        }
    }
    /* Log positions >= new_start of this call. */
    for (int64_t t = new_start > len ? new_start - len : 0; t < n; t++)
        memcpy(s->log + (size_t)(s->log_n++) * (size_t)LF, in + t * in_stride, (size_t)LF * sizeof(float));
    s->len = len + n;
    if (s->log_n == 0) s->log_start = s->len;
    free(bufs), free(scr);
    return RW_OK;
}

size_t rw_rec_state_checkpoint_bytes(const rw_layer_state *st) {
    const rec_state *s = as_crec(st);
    return s ? state_bytes(s) : 0;
}

size_t rw_rec_state_log_bytes_per_token(const rw_layer_state *st) {
    const rec_state *s = as_crec(st);
    return s ? (size_t)s->p.log_floats * sizeof(float) : 0;
}
