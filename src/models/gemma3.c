/* gemma3.c - Gemma 3: sliding-window and global attention layers
 * (../shared/fixtures/gemma3/README.md has the math as llama.cpp computes it).
 *
 *   x = token_embd[token] * sqrt(n_embd)
 *   block: h = rmsnorm(x) * attn_norm
 *          q, k, v = Wq h, Wk h, Wv h; per-head rmsnorm of q, k (q_norm, k_norm)
 *          RoPE NEOX: global layers rope.freq_base with linear scaling,
 *                     sliding layers rope.freq_base_swa, unscaled
 *          q *= 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for the 62-layer 27B)
 *          att = causal softmax(q K^T) V, a sliding layer's query seeing its
 *                last n_swa positions only
 *          x += rmsnorm(Wo att) * post_attention_norm
 *          x += rmsnorm(Wdown (gelu(Wgate f) * Wup f)) * post_ffw_norm,
 *               f = rmsnorm(x) * ffn_norm
 *   logits = c * tanh(head(rmsnorm(x) * output_norm) / c)  (final_logit_softcapping)
 *
 * Norm weights are used as stored: the converter already added Gemma's 1.
 *
 * Cache: a global layer keeps a full KV state; a sliding layer masks keys
 * older than its window in attention and keeps a sliding-window KV state
 * (models/seq.c, cache/kv_state.c: its ring and the windows of the kept
 * positions; the full KV when the model's context is no longer than the
 * ring). A rewind past what it holds recomputes from the nearest held
 * window, as for a recurrent layer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "models/model_int.h"

#define A "gemma3"

/* What the dense layer struct has no room for. */
typedef struct {
    const float **post_attn_norm; /* [n_layer] of [n_embd] */
    const float **post_ffw_norm;  /* [n_layer] of [n_embd] */
    float q_scale;                /* applied to q after RoPE */
} gemma3;

/* Reads "gemma3.<name>" (u32) into *out, def when absent. */
static rw_status opt_u32(const rw_gguf *g, const char *name, uint32_t def, uint32_t *out, rw_error *err) {
    char key[96];
    snprintf(key, sizeof key, A ".%s", name);
    if (!rw_gguf_get(g, key)) {
        *out = def;
        return RW_OK;
    }
    return rw_gguf_get_u32(g, key, out, err);
}

static rw_status opt_f32(const rw_gguf *g, const char *name, float def, float *out, rw_error *err) {
    char key[96];
    snprintf(key, sizeof key, A ".%s", name);
    if (!rw_gguf_get(g, key)) {
        *out = def;
        return RW_OK;
    }
    rw_status st = rw_gguf_get_f32(g, key, out, err);
    if (st == RW_OK && !isfinite(*out)) return rw_errorf(err, RW_ERR_FORMAT, "metadata key %s is not finite", key);
    return st;
}

static rw_status g3_hparams(const rw_gguf *g, const rw_models__arch *arch, rw_model_hparams *hp, rw_error *err) {
    rw_status st = rw_models__read_dense_hparams(g, arch, hp, err);
    if (st) return st;
    uint32_t swa, pattern;
    float base_swa, cap;
    /* llama.cpp's defaults: pattern 6 and SWA base 10000 when absent */
    if ((st = opt_u32(g, "attention.sliding_window", 0, &swa, err)) ||
        (st = opt_u32(g, "attention.sliding_window_pattern", 6, &pattern, err)) ||
        (st = opt_f32(g, "rope.freq_base_swa", 10000.0f, &base_swa, err)) ||
        (st = opt_f32(g, "final_logit_softcapping", 0.0f, &cap, err)))
        return st;
    if (swa > (1u << 30)) return rw_errorf(err, RW_ERR_FORMAT, "invalid metadata " A ".attention.sliding_window = %u", swa);
    if (pattern > 4096)
        return rw_errorf(err, RW_ERR_FORMAT, "invalid metadata " A ".attention.sliding_window_pattern = %u", pattern);
    if (!(base_swa > 0.0f)) return rw_errorf(err, RW_ERR_FORMAT, "invalid metadata " A ".rope.freq_base_swa = %g", base_swa);
    if (cap < 0.0f) return rw_errorf(err, RW_ERR_FORMAT, "invalid metadata " A ".final_logit_softcapping = %g", cap);
    hp->n_swa = (int)swa;
    hp->swa_pattern = (int)pattern;
    hp->rope_base_swa = base_swa;
    hp->final_logit_softcap = cap;
    hp->embedding_scale = sqrtf((float)hp->n_embd); /* in f32, as ggml_scale by sqrtf(n_embd) */
    return RW_OK;
}

static void g3_free(rw_model *m) {
    gemma3 *x = m->ext;
    if (!x) return;
    free(x->post_attn_norm);
    free(x->post_ffw_norm);
    free(x);
    m->ext = NULL;
}

static rw_status g3_bind(rw_model *m, rw_error *err) {
    rw_status st = rw_models__bind_dense(m, err);
    if (st) return st;
    const rw_model_hparams *hp = &m->hp;
    gemma3 *x = calloc(1, sizeof *x); /* owned by m, freed by g3_free */
    if (!x) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    m->ext = x;
    x->post_attn_norm = calloc((size_t)hp->n_layer, sizeof *x->post_attn_norm);
    x->post_ffw_norm = calloc((size_t)hp->n_layer, sizeof *x->post_ffw_norm);
    if (!x->post_attn_norm || !x->post_ffw_norm) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    char n[96];
    for (int il = 0; il < hp->n_layer; il++) {
        snprintf(n, sizeof n, "blk.%d.post_attention_norm.weight", il);
        if ((st = rw_models__bind_vector(m, n, hp->n_embd, true, &x->post_attn_norm[il], err))) return st;
        snprintf(n, sizeof n, "blk.%d.post_ffw_norm.weight", il);
        if ((st = rw_models__bind_vector(m, n, hp->n_embd, true, &x->post_ffw_norm[il], err))) return st;
    }
    /* llama.cpp scales q by 1/sqrt(n_embd/n_head) (integer division) for the
     * 62-layer 27B model only, by 1/sqrt(head_dim) otherwise */
    x->q_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                   : 1.0f / sqrtf((float)hp->head_dim_k);
    /* the sliding layers' RoPE table, after the dense attention buffers (carve) */
    m->arch_work_floats = rw_models__attn_work_floats(hp) + hp->n_rot;
    return RW_OK;
}

/* The per-token steps, spread over the pool by tokens (rw_threadpool_rows):
 * each token's values are its own. */
typedef struct {
    rw_model *m;
    const rw_models__dense_layer *L;
    const float *cs, *w; /* the RoPE table of the layer; a post norm's weights */
} g3_rows_job;

/* q and k normed and rotated, q scaled */
static void g3_qk_rows(void *ctx, int64_t t0, int64_t t1) {
    const g3_rows_job *j = ctx;
    const gemma3 *x = j->m->ext;
    const rw_model_hparams *hp = &j->m->hp;
    const rw_models__scratch *sc = &j->m->sc;
    const int hd = hp->head_dim_k;
    const int64_t dq = (int64_t)hp->n_head * hd, dk = (int64_t)hp->n_head_kv * hd;
    for (int64_t t = t0; t < t1; t++) {
        const float *c = j->cs + t * hp->n_rot;
        float *qt = sc->q + t * dq, *kt = sc->k + t * dk;
        rw_rmsnorm_groups(qt, j->L->q_norm, 0, hp->n_head, hd, hp->rms_eps, qt);
        rw_rmsnorm_groups(kt, j->L->k_norm, 0, hp->n_head_kv, hd, hp->rms_eps, kt);
        for (int h = 0; h < hp->n_head; h++) {
            float *q = qt + (int64_t)h * hd;
            rw_rope(q, hp->n_rot, true, c);
            for (int i = 0; i < hd; i++) q[i] *= x->q_scale; /* ggml_scale(q) before the attention */
        }
        for (int h = 0; h < hp->n_head_kv; h++) rw_rope(kt + (int64_t)h * hd, hp->n_rot, true, c);
    }
}

/* GELU(gate) * up, token by token (the activation is per value) */
static void g3_geglu_rows(void *ctx, int64_t t0, int64_t t1) {
    const g3_rows_job *j = ctx;
    const int64_t f = j->m->hp.n_ff;
    rw_geglu(j->m->sc.gate + t0 * f, j->m->sc.up + t0 * f, (t1 - t0) * f);
}

/* m->sc.tmp = rmsnorm(m->sc.tmp) * w, in place */
static void g3_post_norm_rows(void *ctx, int64_t t0, int64_t t1) {
    const g3_rows_job *j = ctx;
    const int e = j->m->hp.n_embd;
    float *r = j->m->sc.tmp + t0 * e;
    rw_rmsnorm_groups(r, j->w, 0, (int)(t1 - t0), e, j->m->hp.rms_eps, r);
}

/* The attention sublayer: m->sc.xn -> m->sc.tmp (before the post norm). */
static rw_status g3_attention(rw_model *m, int il, const rw_models__batch *b, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    const rw_models__dense_layer *L = &m->layers[il];
    rw_models__scratch *sc = &m->sc;
    const int64_t n = b->n;
    const int hd = hp->head_dim_k;
    const int64_t dq = (int64_t)hp->n_head * hd, dk = (int64_t)hp->n_head_kv * hd,
                  dv = (int64_t)hp->n_head_kv * hp->head_dim_v;
    rw_status st = rw_models__work_ready(m, n, A " attention", err);
    if (st) return st;
    if ((st = rw_models__matmul(&L->wq, sc->xn, n, sc->q, b->pool, err)) ||
        (st = rw_models__matmul(&L->wk, sc->xn, n, sc->k, b->pool, err)) ||
        (st = rw_models__matmul(&L->wv, sc->xn, n, sc->v, b->pool, err)))
        return st;
    /* Global layers use the pass's table (rope.freq_base, scaled); sliding
     * ones their own, each row at its segment's position. */
    const float *cs = sc->rope_cs;
    if (rw_models__layer_window(m, il) > 0) {
        float *t = sc->work + sc->n_cap * rw_models__attn_work_floats(hp);
        for (int i = 0; i < b->n_seg; i++)
            for (int64_t r = 0; r < b->seg[i].n; r++)
                rw_rope_cache((float)(b->seg[i].pos0 + r), hp->n_rot, hp->rope_base_swa, 1.0f, NULL,
                              t + (b->seg[i].row0 + r) * hp->n_rot);
        cs = t;
    }
    g3_rows_job j = {m, L, cs, NULL};
    rw_threadpool_rows(b->pool, n, 8, g3_qk_rows, &j);
    if ((st = rw_models__attend(m, il, b, sc->q, dq, sc->k, dk, sc->v, dv, 1.0f, sc->att, err))) return st;
    return rw_models__matmul(&L->wo, sc->att, n, sc->tmp, b->pool, err);
}

/* GELU-gated FFN: m->sc.xn -> m->sc.tmp (before the post norm). */
static rw_status g3_ffn(rw_model *m, const rw_models__dense_layer *L, const rw_models__batch *b, rw_error *err) {
    rw_models__scratch *sc = &m->sc;
    const rw_matrix *ws[2] = {&L->ffn_gate, &L->ffn_up};
    float *ys[2] = {sc->gate, sc->up};
    const int64_t yst[2] = {L->ffn_gate.n_out, L->ffn_up.n_out};
    rw_status st = rw_matmul_multi(ws, ys, yst, 2, sc->xn, L->ffn_gate.n_in, b->n, b->pool, err);
    if (st) return st;
    g3_rows_job j = {m, L, NULL, NULL};
    rw_threadpool_rows(b->pool, b->n, 4, g3_geglu_rows, &j);
    return rw_models__matmul(&L->ffn_down, sc->gate, b->n, sc->tmp, b->pool, err);
}

/* m->sc.tmp = rmsnorm(m->sc.tmp) * w over the batch's rows, in place. */
static void post_norm(rw_model *m, const float *w, const rw_models__batch *b) {
    g3_rows_job j = {m, NULL, NULL, w};
    rw_threadpool_rows(b->pool, b->n, 16, g3_post_norm_rows, &j);
}

static rw_status g3_layer(rw_model *m, int il, const rw_models__batch *b, rw_error *err) {
    const gemma3 *x = m->ext;
    const rw_models__dense_layer *L = &m->layers[il];
    rw_models__norm_rows(m, L->attn_norm, b);
    rw_status st = g3_attention(m, il, b, err);
    if (st) return st;
    post_norm(m, x->post_attn_norm[il], b);
    rw_models__add_residual(m, b);
    rw_models__norm_rows(m, L->ffn_norm, b);
    if ((st = g3_ffn(m, L, b, err))) return st;
    post_norm(m, x->post_ffw_norm[il], b);
    rw_models__add_residual(m, b);
    return RW_OK;
}

const rw_models__arch rw_models__arch_gemma3 = {
    .name = A,
    .rope_kind = RW_ROPE_NEOX,
    .qk_norm = true,
    .qkv_bias = false,
    .read_hparams = g3_hparams,
    .bind = g3_bind,
    .layer = g3_layer,
    .free_ext = g3_free,
};
