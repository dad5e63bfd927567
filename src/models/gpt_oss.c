/* gpt_oss.c - gpt-oss: alternating sliding-window and full attention with
 * per-head sinks, and a mixture of experts with swiglu-oai on every layer
 * (../shared/fixtures/gpt-oss/README.md has the math as llama.cpp computes it).
 *
 *   x = token_embd[token]
 *   block: h = rmsnorm(x) * attn_norm
 *          q, k, v = Wq h + bq, Wk h + bk, Wv h + bv; RoPE NEOX (rope.freq_base
 *          in both layer kinds)
 *          att = causal softmax(q K^T / sqrt(head_dim), + one sink logit per
 *                head in the denominator) V; layers il % P < P-1 (P =
 *                sliding_window_pattern, 2 when absent: the even layers) see
 *                their last n_swa positions only
 *          x += Wo att + bo
 *          f = rmsnorm(x) * post_attention_norm
 *          l = W_r f + b_r; the top-k experts by l (ties to the lower index),
 *          weights softmax over those k logits only
 *          per expert e: g = W_gate,e f + b, u = W_up,e f + b,
 *                        a = min(g, 7) * sigmoid(1.702 min(g, 7)) * (clamp(u, +-7) + 1)
 *                        y_e = W_down,e a + b
 *          x += sum_j w_j y_j (in selection order)
 *   logits = output(rmsnorm(x) * output_norm)
 *
 * Cache: as gemma3's: a full KV state in the full layers, a sliding-window
 * KV state (its ring and kept windows) in the sliding ones, whose attention
 * masks the keys before the window.
 *
 * RoPE scaling as hparams.c reads it (the released files use YaRN: factor
 * 32 over 4096 positions). Not implemented: a rope.freq_base_swa other than
 * rope.freq_base (refused). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "models/model_int.h"

#define A "gpt-oss"

/* One layer's mixture of experts. */
typedef struct {
    const float *norm;                                     /* post_attention_norm [n_embd] */
    rw_matrix router;                                      /* ffn_gate_inp: n_embd -> n_expert */
    const float *router_b;                                 /* [n_expert] */
    const rw_gguf_tensor *gate_exps, *up_exps, *down_exps; /* {E, F, N}, {E, F, N}, {F, E, N} */
    const float *gate_b, *up_b, *down_b;                   /* [N][F], [N][F], [N][E] */
} oss_moe;

typedef struct {
    int n_expert, n_used, ff; /* experts, used per token, expert FFN width */
    oss_moe *moe;             /* [n_layer], owned */
} oss;

static rw_status get_u32(const rw_gguf *g, const char *name, bool required, uint32_t def, uint32_t *out,
                         rw_error *err) {
    char key[96];
    snprintf(key, sizeof key, A ".%s", name);
    if (!rw_gguf_get(g, key)) {
        if (required) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key %s", key);
        *out = def;
        return RW_OK;
    }
    return rw_gguf_get_u32(g, key, out, err);
}

static rw_status oss_hparams(const rw_gguf *g, const rw_models__arch *arch, rw_model_hparams *hp, rw_error *err) {
    rw_status st = rw_models__read_dense_hparams(g, arch, hp, err);
    if (st) return st;
    uint32_t swa, pattern, ff;
    /* llama.cpp's defaults: pattern 2 (the even layers slide) */
    if ((st = get_u32(g, "attention.sliding_window", false, 0, &swa, err)) ||
        (st = get_u32(g, "attention.sliding_window_pattern", false, 2, &pattern, err)) ||
        (st = get_u32(g, "expert_feed_forward_length", true, 0, &ff, err)))
        return st;
    if (swa > (1u << 30))
        return rw_errorf(err, RW_ERR_FORMAT, "invalid metadata " A ".attention.sliding_window = %u", swa);
    if (pattern > 4096)
        return rw_errorf(err, RW_ERR_FORMAT, "invalid metadata " A ".attention.sliding_window_pattern = %u", pattern);
    if (ff == 0 || ff > (1u << 20))
        return rw_errorf(err, RW_ERR_FORMAT, "invalid metadata " A ".expert_feed_forward_length = %u", ff);
    if (rw_gguf_get(g, A ".rope.freq_base_swa")) {
        float b;
        if ((st = rw_gguf_get_f32(g, A ".rope.freq_base_swa", &b, err))) return st;
        if (b != hp->rope_base)
            return rw_errorf(err, RW_ERR_UNSUPPORTED,
                             A ".rope.freq_base_swa = %g differs from rope.freq_base = %g, "
                               "which is not supported",
                             b, hp->rope_base);
    }
    hp->n_swa = (int)swa;
    hp->swa_pattern = (int)pattern;
    hp->rope_base_swa = hp->rope_base;
    hp->n_ff = (int)ff; /* the experts' width: sizes the FFN scratch */
    return RW_OK;
}

static void oss_free(rw_model *m) {
    oss *x = m->ext;
    if (!x) return;
    free(x->moe);
    free(x);
    m->ext = NULL;
}

/* A 3-D expert tensor {n_in, n_out, n_expert} of a matmul type. */
static rw_status bind_experts(const rw_model *m, const char *name, int64_t n_in, int64_t n_out, int64_t ne,
                              const rw_gguf_tensor **out, rw_error *err) {
    const rw_gguf_tensor *t = rw_gguf_find_tensor(m->g, name);
    if (!t) return rw_errorf(err, RW_ERR_FORMAT, "missing tensor %s", name);
    if (t->n_dims != 3 || t->ne[0] != (uint64_t)n_in || t->ne[1] != (uint64_t)n_out || t->ne[2] != (uint64_t)ne)
        return rw_errorf(err, RW_ERR_FORMAT, "tensor %s has shape {%llu, %llu, %llu}, expected {%lld, %lld, %lld}",
                         name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                         (long long)n_in, (long long)n_out, (long long)ne);
    if (!rw_matmul_supports(t->type))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "tensor %s has unsupported type %s", name, rw_dtype_name(t->type));
    if (n_in % (int64_t)rw_dtype_block_size(t->type))
        return rw_errorf(err, RW_ERR_FORMAT, "tensor %s: rows of %lld are not whole blocks of %s", name,
                         (long long)n_in, rw_dtype_name(t->type));
    *out = t;
    return RW_OK;
}

/* An F32 tensor {n0, n1} (per-expert biases). */
static rw_status bind_f32_2d(const rw_model *m, const char *name, int64_t n0, int64_t n1, const float **out,
                             rw_error *err) {
    const rw_gguf_tensor *t = rw_gguf_find_tensor(m->g, name);
    if (!t) return rw_errorf(err, RW_ERR_FORMAT, "missing tensor %s", name);
    if (t->type != RW_TYPE_F32 || t->n_dims != 2 || t->ne[0] != (uint64_t)n0 || t->ne[1] != (uint64_t)n1)
        return rw_errorf(err, RW_ERR_FORMAT, "tensor %s must be F32 {%lld, %lld}", name, (long long)n0, (long long)n1);
    *out = t->data;
    return RW_OK;
}

static rw_status bind_layer(rw_model *m, int il, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    oss *x = m->ext;
    rw_models__dense_layer *L = &m->layers[il];
    oss_moe *M = &x->moe[il];
    const int64_t e = hp->n_embd, q = (int64_t)hp->n_head * hp->head_dim_k, k = (int64_t)hp->n_head_kv * hp->head_dim_k,
                  v = (int64_t)hp->n_head_kv * hp->head_dim_v, o = (int64_t)hp->n_head * hp->head_dim_v;
    const int64_t N = x->n_expert, F = x->ff;
    char n[96];
    rw_status st;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if ((st = rw_models__bind_vector(m, NAME("attn_norm.weight"), e, true, &L->attn_norm, err)) ||
        (st = rw_models__bind_matrix(m, NAME("attn_q.weight"), e, q, true, &L->wq, err)) ||
        (st = rw_models__bind_matrix(m, NAME("attn_k.weight"), e, k, true, &L->wk, err)) ||
        (st = rw_models__bind_matrix(m, NAME("attn_v.weight"), e, v, true, &L->wv, err)) ||
        (st = rw_models__bind_matrix(m, NAME("attn_output.weight"), o, e, true, &L->wo, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_q.bias"), q, true, &L->bq, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_k.bias"), k, true, &L->bk, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_v.bias"), v, true, &L->bv, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_output.bias"), e, true, &L->bo, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_sinks.weight"), hp->n_head, true, &L->attn_sinks, err)) ||
        (st = rw_models__bind_vector(m, NAME("post_attention_norm.weight"), e, true, &M->norm, err)) ||
        (st = rw_models__bind_matrix(m, NAME("ffn_gate_inp.weight"), e, N, true, &M->router, err)) ||
        (st = rw_models__bind_vector(m, NAME("ffn_gate_inp.bias"), N, true, &M->router_b, err)) ||
        (st = bind_experts(m, NAME("ffn_gate_exps.weight"), e, F, N, &M->gate_exps, err)) ||
        (st = bind_experts(m, NAME("ffn_up_exps.weight"), e, F, N, &M->up_exps, err)) ||
        (st = bind_experts(m, NAME("ffn_down_exps.weight"), F, e, N, &M->down_exps, err)) ||
        (st = bind_f32_2d(m, NAME("ffn_gate_exps.bias"), F, N, &M->gate_b, err)) ||
        (st = bind_f32_2d(m, NAME("ffn_up_exps.bias"), F, N, &M->up_b, err)) ||
        (st = bind_f32_2d(m, NAME("ffn_down_exps.bias"), e, N, &M->down_b, err)))
        return st;
#undef NAME
    return RW_OK;
}

static rw_status oss_bind(rw_model *m, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    oss *x = calloc(1, sizeof *x); /* owned by m, freed by oss_free */
    if (!x) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    m->ext = x;
    uint32_t ne, nu;
    rw_status st;
    if ((st = get_u32(m->g, "expert_count", true, 0, &ne, err)) ||
        (st = get_u32(m->g, "expert_used_count", true, 0, &nu, err)))
        return st;
    if (ne == 0 || ne > 4096 || nu == 0 || nu > ne)
        return rw_errorf(err, RW_ERR_FORMAT, "invalid MoE metadata (experts %u, used %u)", ne, nu);
    x->n_expert = (int)ne, x->n_used = (int)nu, x->ff = hp->n_ff;
    /* the experts' activations of a pass, carved from the scratch's work
     * block (oss_moe_ffn): per token k slots of [gate | up] and of output */
    const int64_t moe_floats = (int64_t)nu * (2 * (int64_t)hp->n_ff + hp->n_embd);
    const int64_t attn_floats = rw_models__attn_work_floats(hp);
    m->arch_work_floats = moe_floats > attn_floats ? moe_floats : attn_floats;
    if ((st = rw_models__bind_common(m, err))) return st;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    x->moe = calloc((size_t)hp->n_layer, sizeof *x->moe);
    if (!m->layers || !x->moe) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    for (int il = 0; il < hp->n_layer; il++)
        if ((st = bind_layer(m, il, err))) return st;
    return RW_OK;
}

/* The per-row steps of the MoE sublayer, spread over the pool by rows
 * (rw_threadpool_rows): each row's result is its own. */
typedef struct {
    const oss_moe *M;
    float *logits, *w, *gu, *y, *out;
    int32_t *sel;
    const int32_t *rows, *pos;
    int E, N, k, F;
} oss_rows_job;

static void oss_route_rows(void *ctx, int64_t t0, int64_t t1) {
    const oss_rows_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) {
        float *l = j->logits + t * j->N;
        for (int e = 0; e < j->N; e++) l[e] += j->M->router_b[e];
        rw_moe_route_topk_softmax(l, j->N, j->k, j->sel + t * j->k, j->w + t * j->k);
    }
}

/* rows p of gate|up (slot rows[p], expert order): the biases, then the activation */
static void oss_act_rows(void *ctx, int64_t p0, int64_t p1) {
    const oss_rows_job *j = ctx;
    const int F = j->F;
    for (int64_t p = p0; p < p1; p++) {
        float *g = j->gu + p * 2 * F, *u = g + F;
        const int64_t e = j->sel[j->rows[p]];
        const float *gb = j->M->gate_b + e * F, *ub = j->M->up_b + e * F;
        for (int i = 0; i < F; i++) g[i] += gb[i], u[i] += ub[i];
        rw_swiglu_oai(g, u, F, 1.702f, 7.0f);
    }
}

/* token t: its slots' rows get the down bias, then their weighted sum */
static void oss_combine_rows(void *ctx, int64_t t0, int64_t t1) {
    const oss_rows_job *j = ctx;
    const int E = j->E, k = j->k;
    for (int64_t t = t0; t < t1; t++) {
        for (int i = 0; i < k; i++) { /* the slots' rows, each used once */
            const int64_t s = t * k + i;
            float *ys = j->y + (int64_t)j->pos[s] * E;
            const float *db = j->M->down_b + (int64_t)j->sel[s] * E;
            for (int c = 0; c < E; c++) ys[c] += db[c];
        }
        rw_models__weighted_sum(j->out + t * E, j->y, j->pos + t * k, j->w + t * k, k, E);
    }
}

/* The MoE sublayer: m->sc.xn -> m->sc.tmp. */
static rw_status oss_moe_ffn(rw_model *m, int il, const rw_models__batch *bt, rw_error *err) {
    const oss *x = m->ext;
    const oss_moe *M = &x->moe[il];
    const int E = m->hp.n_embd, N = x->n_expert, k = x->n_used, F = x->ff;
    const int64_t n = bt->n, ns = n * k;
    rw_status st = rw_models__work_ready(m, n, A " experts", err);
    if (st) return st;
    /* from the work block: gate and up of every slot [ns][2F], the experts'
     * outputs [ns][E] (oss_bind sized it); the routing owned here, freed
     * before returning */
    float *gu = m->sc.work, *y = gu + ns * 2 * F;
    float *logits = malloc((size_t)(n * N) * sizeof *logits), *w = malloc((size_t)ns * sizeof *w);
    int32_t *sel = malloc((size_t)ns * sizeof *sel), *rows = malloc((size_t)(2 * ns) * sizeof *rows);
    rw_matmul_group *groups = malloc((size_t)(2 * N) * sizeof *groups);
    if (!logits || !w || !sel || !rows || !groups) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    if (!st) st = rw_models__matmul(&M->router, m->sc.xn, n, logits, bt->pool, err);
    oss_rows_job rj = {.M = M,
                       .logits = logits,
                       .w = w,
                       .gu = gu,
                       .y = y,
                       .out = m->sc.tmp,
                       .sel = sel,
                       .rows = rows,
                       .E = E,
                       .N = N,
                       .k = k,
                       .F = F};
    if (!st) rw_threadpool_rows(bt->pool, n, 16, oss_route_rows, &rj);
    /* gate and up of every slot, [ns][2F]: gate at 0, up at F */
    if (!st)
        st = rw_models__experts_matmul(m, M->gate_exps, M->up_exps, x->n_expert, sel, ns, k, true, m->sc.xn, E, gu,
                                       gu + F, 2 * F, rows, groups, bt->pool, err);
    if (!st) rw_threadpool_rows(bt->pool, ns, 16, oss_act_rows, &rj);
    if (!st)
        st = rw_models__experts_matmul(m, M->down_exps, NULL, x->n_expert, sel, ns, k, false, gu, 2 * F, y, NULL, E,
                                       rows, groups, bt->pool, err);
    /* the slots' rows of y are in expert order: pos[s] is slot s's (in rows' second half, free now) */
    int32_t *pos = rows + ns;
    if (!st) rw_models__experts_positions(rows, ns, pos);
    rj.pos = pos;
    if (!st) rw_threadpool_rows(bt->pool, n, 8, oss_combine_rows, &rj);
    free(logits), free(w), free(sel), free(rows), free(groups);
    return st;
}

static rw_status oss_layer(rw_model *m, int il, const rw_models__batch *b, rw_error *err) {
    const oss *x = m->ext;
    const rw_models__dense_layer *L = &m->layers[il];
    rw_models__norm_rows(m, L->attn_norm, b);
    rw_status st = rw_models__attention(m, il, L, b, err); /* biases, NEOX RoPE, sinks, the layer's window */
    if (st) return st;
    rw_models__add_residual(m, b);
    rw_models__norm_rows(m, x->moe[il].norm, b);
    if ((st = oss_moe_ffn(m, il, b, err))) return st;
    rw_models__add_residual(m, b);
    return RW_OK;
}

const rw_models__arch rw_models__arch_gpt_oss = {
    .name = A,
    .rope_kind = RW_ROPE_NEOX,
    .qk_norm = false,
    .qkv_bias = true,
    .moe = true,
    .read_hparams = oss_hparams,
    .bind = oss_bind,
    .layer = oss_layer,
    .free_ext = oss_free,
};
