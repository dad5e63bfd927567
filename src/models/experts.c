/* experts.c - the mixture-of-experts FFN (model_int.h): the routed
 * experts as grouped matrix products, the slots of a batch gathered per
 * expert so that each expert's weights are read once per call however many
 * tokens chose it, and the shared expert over the whole batch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model_int.h"

/* The experts of t as one matrix, kept in stored panels where they take
 * its bytes (panels.c): a prefill's experts see a few rows each. */
static void pack_experts(rw_model *m, const rw_gguf_tensor *t) {
    uint64_t row_bytes;
    if (!rw_dtype_row_bytes(t->type, t->ne[0], &row_bytes)) return;
    const rw_matrix all = {.type = t->type,
                           .data = t->data,
                           .n_in = (int64_t)t->ne[0],
                           .n_out = (int64_t)(t->ne[1] * t->ne[2]),
                           .row_stride = (size_t)row_bytes};
    rw_models__want_panels(m, &all, (size_t)t->nbytes, NULL); /* it checks the setting */
}

static rw_status bind_experts(rw_model *m, const char *name, uint64_t n_in, uint64_t n_out, uint64_t ne,
                              const rw_gguf_tensor **out, rw_error *err) {
    const rw_gguf_tensor *t = rw_gguf_find_tensor(m->g, name);
    if (!t) return rw_errorf(err, RW_ERR_FORMAT, "missing tensor %s", name);
    if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != ne)
        return rw_errorf(err, RW_ERR_FORMAT, "tensor %s has shape {%llu, %llu, %llu}, expected {%llu, %llu, %llu}",
                         name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                         (unsigned long long)n_in, (unsigned long long)n_out, (unsigned long long)ne);
    if (!rw_matmul_supports(t->type))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "tensor %s has unsupported type %s", name, rw_dtype_name(t->type));
    pack_experts(m, t);
    *out = t;
    return RW_OK;
}

rw_status rw_models__bind_moe(rw_model *m, int il, bool gated, rw_models__moe *M, rw_error *err) {
    const int64_t E = m->hp.n_embd;
    const uint64_t ne = (uint64_t)M->n_expert, fe = (uint64_t)M->ff_exp;
    char n[96];
    rw_status st;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if ((st = rw_models__bind_matrix(m, NAME("ffn_gate_inp.weight"), E, M->n_expert, true, &M->router, err)) ||
        (st = bind_experts(m, NAME("ffn_gate_exps.weight"), (uint64_t)E, fe, ne, &M->gate_exps, err)) ||
        (st = bind_experts(m, NAME("ffn_up_exps.weight"), (uint64_t)E, fe, ne, &M->up_exps, err)) ||
        (st = bind_experts(m, NAME("ffn_down_exps.weight"), fe, (uint64_t)E, ne, &M->down_exps, err)))
        return st;
    if (M->ff_shexp &&
        ((st = rw_models__bind_matrix(m, NAME("ffn_gate_shexp.weight"), E, M->ff_shexp, true, &M->sh_gate, err)) ||
         (st = rw_models__bind_matrix(m, NAME("ffn_up_shexp.weight"), E, M->ff_shexp, true, &M->sh_up, err)) ||
         (st = rw_models__bind_matrix(m, NAME("ffn_down_shexp.weight"), M->ff_shexp, E, true, &M->sh_down, err))))
        return st;
    if (M->ff_shexp && gated) {
        const float *shg;
        if ((st = rw_models__bind_vector(m, NAME("ffn_gate_inp_shexp.weight"), E, true, &shg, err))) return st;
        M->sh_router = (rw_matrix){
            .type = RW_TYPE_F32, .data = shg, .n_in = E, .n_out = 1, .row_stride = (size_t)E * sizeof(float)};
    }
#undef NAME
    return RW_OK;
}

/* The experts of one 3-D tensor {n_in, n_out, n_expert} over the n_slots
 * slots of a pass: slot s = t*k + j (token t's j-th choice, expert sel[s]).
 * One grouped product, a group per expert with its slots in order; the
 * slots' outputs are written in that order (experts ascending), so each
 * expert writes a contiguous block of y in place: row p of y is slot
 * order[p]. Slot order[p] reads row order[p] / k of x when x_by_token,
 * else row p (x in the same order: a previous call's y). With t2 (a second
 * tensor of t's type and shape, e.g. up beside gate) each expert's group
 * of t2 follows its group of t and writes y2 (same y_stride): the two
 * share the conversion of the expert's rows. rows (2 * n_slots) and
 * groups (2 * n_expert) are the caller's scratch; order is rows' first
 * n_slots entries after the call. */
rw_status rw_models__experts_matmul(const rw_model *m, const rw_gguf_tensor *t, const rw_gguf_tensor *t2, int n_expert,
                                    const int32_t *sel, int64_t n_slots, int k, bool x_by_token, const float *x,
                                    int64_t x_stride, float *y, float *y2, int64_t y_stride, int32_t *rows,
                                    rw_matmul_group *groups, rw_threadpool *pool, rw_error *err) {
    if (t2 && (t2->type != t->type || t2->ne[0] != t->ne[0] || t2->ne[1] != t->ne[1])) { /* one call each */
        rw_status st = rw_models__experts_matmul(m, t, NULL, n_expert, sel, n_slots, k, x_by_token, x, x_stride, y,
                                                 NULL, y_stride, rows, groups, pool, err);
        return st ? st
                  : rw_models__experts_matmul(m, t2, NULL, n_expert, sel, n_slots, k, x_by_token, x, x_stride, y2, NULL,
                                              y_stride, rows, groups, pool, err);
    }
    const void *tp = rw_models__panels_of(m, t->data), *t2p = t2 ? rw_models__panels_of(m, t2->data) : NULL;
    uint64_t row_bytes;
    rw_dtype_row_bytes(t->type, t->ne[0], &row_bytes);
    const size_t expert_bytes = (size_t)t->ne[1] * row_bytes;
    /* rows: the slots in expert order (by a counting sort, slots ascending
     * within an expert), then their x rows. start (n_expert + 1 ints) is
     * owned here, freed before returning. */
    int32_t *order = rows, *xr = rows + n_slots;
    int64_t *start = calloc((size_t)n_expert + 1, sizeof *start);
    if (!start) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    for (int64_t s = 0; s < n_slots; s++) start[sel[s] + 1]++;
    for (int e = 0; e < n_expert; e++) start[e + 1] += start[e];
    int64_t ng = 0;
    for (int e = 0; e < n_expert; e++) {
        if (start[e + 1] == start[e]) continue;
        const rw_matmul_group g = {.data = (const char *)t->data + (size_t)e * expert_bytes,
                                   .x_rows = xr + start[e],
                                   .n_rows = start[e + 1] - start[e],
                                   .y_row0 = start[e],
                                   .y = y,
                                   .panels = tp};
        groups[ng++] = g;
        if (t2) { /* the same x_rows and n_rows: the conversion is shared */
            groups[ng] = g;
            groups[ng].data = (const char *)t2->data + (size_t)e * expert_bytes;
            groups[ng].panels = t2p;
            groups[ng++].y = y2;
        }
    }
    for (int64_t s = 0; s < n_slots; s++) { /* start[e]: expert e's next place */
        const int64_t at = start[sel[s]]++;
        order[at] = (int32_t)s;
        xr[at] = (int32_t)(x_by_token ? s / k : at);
    }
    free(start);
    const rw_matrix w = {.type = t->type,
                         .data = t->data,
                         .n_in = (int64_t)t->ne[0],
                         .n_out = (int64_t)t->ne[1],
                         .row_stride = (size_t)row_bytes};
    return rw_matmul_grouped(&w, groups, ng, x, x_stride, y, y_stride, pool, err);
}

void rw_models__experts_positions(const int32_t *order, int64_t n_slots, int32_t *pos) {
    for (int64_t p = 0; p < n_slots; p++) pos[order[p]] = (int32_t)p;
}

/* Eight elements at a time in a GCC vector (-O2 does not vectorize the
 * plain loop): per element the first product, then each next one added
 * (the scalar tail does the same), so the same bits whatever the width; the
 * k rows in one pass, so out is not stored and reloaded between them. */
typedef float v8f __attribute__((vector_size(32)));

void rw_models__weighted_sum(float *restrict out, const float *y, const int32_t *rows, const float *ws, int k,
                             int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f o = {0}, a;
        for (int j = 0; j < k; j++) {
            const v8f w8 = {ws[j], ws[j], ws[j], ws[j], ws[j], ws[j], ws[j], ws[j]};
            memcpy(&a, y + (int64_t)rows[j] * n + i, sizeof a);
            o = j ? o + a * w8 : a * w8;
        }
        memcpy(out + i, &o, sizeof o);
    }
    for (; i < n; i++) {
        float o = 0.0f;
        for (int j = 0; j < k; j++) {
            const float a = y[(int64_t)rows[j] * n + i];
            o = j ? o + a * ws[j] : a * ws[j];
        }
        out[i] = o;
    }
}

/* gate|up of every slot (or the shared expert's, if wider) */
static int64_t gu_floats(const rw_models__moe *M) {
    const int64_t routed = 2 * (int64_t)M->n_used * M->ff_exp, shared = 2 * (int64_t)M->ff_shexp;
    return routed > shared ? routed : shared;
}

int64_t rw_models__moe_work_floats(const rw_models__moe *M, int64_t n_embd) {
    return gu_floats(M) + M->n_used * n_embd;
}

/* The per-row steps of the FFN below, spread over the pool by rows
 * (rw_threadpool_rows): each row's result is its own. */
typedef struct {
    const rw_models__moe *M;
    const float *logits;
    float *probs; /* per piece: n_expert floats at r0 (the caller's [n][n_expert]) */
    int32_t *sel;
    float *w, *gu, *up, *y, *out, *sg;
    const int32_t *pos;
    int64_t width, stride; /* swiglu: the rows' width, the gate's and up's row stride */
    int E;
} moe_rows_job;

static void route_rows(void *ctx, int64_t t0, int64_t t1) {
    const moe_rows_job *j = ctx;
    const int ne = j->M->n_expert, k = j->M->n_used;
    for (int64_t t = t0; t < t1; t++)
        rw_moe_route(j->logits + t * ne, ne, k, true, 1.0f, j->sel + t * k, j->w + t * k, j->probs + t0 * ne);
}

static void swiglu_rows(void *ctx, int64_t r0, int64_t r1) {
    const moe_rows_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) rw_swiglu(j->gu + r * j->stride, j->up + r * j->stride, j->width);
}

static void combine_rows(void *ctx, int64_t t0, int64_t t1) {
    const moe_rows_job *j = ctx;
    const int k = j->M->n_used;
    for (int64_t t = t0; t < t1; t++)
        rw_models__weighted_sum(j->out + t * j->E, j->y, j->pos + t * k, j->w + t * k, k, j->E);
}

/* the shared expert's rows y added to out, gated by sigmoid(sg) where it has a router */
static void shared_add_rows(void *ctx, int64_t t0, int64_t t1) {
    const moe_rows_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) {
        float *out = j->out + t * j->E;
        const float *ys = j->y + t * j->E;
        if (j->sg) {
            rw_sigmoid(j->sg + t, j->sg + t, 1);
            for (int i = 0; i < j->E; i++) out[i] += ys[i] * j->sg[t];
        } else
            for (int i = 0; i < j->E; i++) out[i] += ys[i];
    }
}

rw_status rw_models__moe_ffn(rw_model *m, const rw_models__moe *M, const rw_models__batch *bt, rw_error *err) {
    const int E = m->hp.n_embd, ne = M->n_expert, k = M->n_used, fe = M->ff_exp, fs = M->ff_shexp;
    const int64_t n = bt->n, ns = n * k;
    rw_status st = rw_models__work_ready(m, n, "experts", err);
    if (st) return st;
    /* from the work block (sized by the bind: rw_models__moe_work_floats):
     * gate|up of every slot [ns][2fe], then the slots' outputs [ns][E]; the
     * shared expert reuses both once the routed sums are in sc.tmp. The
     * routing is owned here, freed before returning. */
    float *gu = m->sc.work, *y = gu + n * gu_floats(M);
    float *logits = malloc((size_t)(n * ne) * sizeof *logits), *probs = malloc((size_t)(n * ne) * sizeof *probs);
    float *w = malloc((size_t)ns * sizeof *w), *sg = malloc((size_t)n * sizeof *sg);
    int32_t *sel = malloc((size_t)ns * sizeof *sel), *rows = malloc((size_t)(2 * ns) * sizeof *rows);
    rw_matmul_group *groups = malloc((size_t)(2 * ne) * sizeof *groups);
    if (!logits || !probs || !w || !sg || !sel || !rows || !groups) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    if (!st) st = rw_models__matmul(&M->router, m->sc.xn, n, logits, bt->pool, err);
    moe_rows_job rj = {.M = M, .logits = logits, .probs = probs, .sel = sel, .w = w, .E = E};
    if (!st) rw_threadpool_rows(bt->pool, n, 16, route_rows, &rj);
    /* gate and up of every slot, [ns][2fe]: gate at 0, up at fe */
    if (!st)
        st = rw_models__experts_matmul(m, M->gate_exps, M->up_exps, ne, sel, ns, k, true, m->sc.xn, E, gu, gu + fe,
                                       2 * fe, rows, groups, bt->pool, err);
    rj.gu = gu, rj.up = gu + fe, rj.width = fe, rj.stride = 2 * fe;
    if (!st) rw_threadpool_rows(bt->pool, ns, 16, swiglu_rows, &rj);
    if (!st)
        st = rw_models__experts_matmul(m, M->down_exps, NULL, ne, sel, ns, k, false, gu, 2 * fe, y, NULL, E, rows,
                                       groups, bt->pool, err);
    /* the slots' rows of y are in expert order: pos[s] is slot s's (in rows' second half, free now) */
    int32_t *pos = rows + ns;
    if (!st) rw_models__experts_positions(rows, ns, pos);
    rj.out = m->sc.tmp, rj.y = y, rj.pos = pos;
    if (!st) rw_threadpool_rows(bt->pool, n, 8, combine_rows, &rj);
    /* the shared expert: gate [n][fs] and up [n][fs] in gu, down into y */
    float *g = gu, *u = gu + n * fs;
    if (fs && !st) {
        if (M->sh_router.data) st = rw_models__matmul(&M->sh_router, m->sc.xn, n, sg, bt->pool, err);
        const rw_matrix *ws[2] = {&M->sh_gate, &M->sh_up}; /* the same rows: one conversion, one dispatch */
        float *outs[2] = {g, u};
        const int64_t yst[2] = {fs, fs};
        if (!st) st = rw_matmul_multi(ws, outs, yst, 2, m->sc.xn, E, n, bt->pool, err);
        moe_rows_job sj = {.M = M, .gu = g, .up = u, .width = fs, .stride = fs, .E = E};
        if (!st) rw_threadpool_rows(bt->pool, n, 16, swiglu_rows, &sj);
        if (!st) st = rw_models__matmul(&M->sh_down, g, n, y, bt->pool, err);
        sj.out = m->sc.tmp, sj.y = y, sj.sg = M->sh_router.data ? sg : NULL;
        if (!st) rw_threadpool_rows(bt->pool, n, 8, shared_add_rows, &sj);
    }
    free(logits), free(probs), free(w), free(sg), free(sel), free(rows), free(groups);
    return st;
}
