/* attn.c - the causal self-attention sublayer of a dense transformer:
 *
 *   q, k, v = Wq xn (+bq), Wk xn (+bk), Wv xn (+bv)
 *   q, k    = per-head RMS norm (qwen3), then RoPE at the token's position
 *   cache  <- k, v at positions pos0..pos0+n-1
 *   att     = per query head h: softmax(q·K^T / sqrt(hd_k)) V of KV head
 *             h / (n_head / n_head_kv), over positions 0..p (causal)
 *   out     = Wo att (+bo)
 */
#include <math.h>

#include "kernels/ops.h"
#include "models/model_int.h"

static void add_bias(float *y, const float *b, int64_t n, int64_t dim) {
    if (!b) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < dim; i++) y[t * dim + i] += b[i];
}

rw_status rw_models__attend(rw_model *m, int il, const rw_models__batch *b, const float *q, int64_t dq, const float *k, int64_t dk,
                     const float *v, int64_t dv, float scale, float *att, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    const int hdk = hp->head_dim_k, hdv = hp->head_dim_v;
    const int64_t da = (int64_t)hp->n_head * hdv;
    for (int i = 0; i < b->n_seg; i++) {
        const rw_models__seg *g = &b->seg[i];
        rw_layer_state *st = g->s->layer[il];
        rw_status r = rw_kv_state_append(st, g->n, k + g->row0 * dk, dk, v + g->row0 * dv, dv, err);
        if (r) return r;
        /* The cache's pages as attention reads them (cache/kv.h). */
        rw_attn_kv kv;
        rw_kv_attn_view(rw_kv_state_cache(st), 0, &kv);
        kv.window = rw_models__layer_window(m, il);
        kv.sinks = m->layers ? m->layers[il].attn_sinks : NULL;
        rw_attn_causal(&kv, q + g->row0 * dq, dq, g->pos0, g->n, hp->n_head, hp->n_head_kv, hdk, hdv, scale,
                       att + g->row0 * da, da, m->sc.scores, b->pool);
    }
    return RW_OK;
}

/* Per token: the per-head q/k norms where bound, RoPE if rope. */
typedef struct {
    const rw_model *m;
    const rw_models__dense_layer *L;
    bool rope;
} qk_job;

static void qk_rows(void *ctx, int64_t t0, int64_t t1) {
    const qk_job *j = ctx;
    const rw_model_hparams *hp = &j->m->hp;
    const rw_models__scratch *sc = &j->m->sc;
    const rw_models__dense_layer *L = j->L;
    const int hdk = hp->head_dim_k;
    const int64_t dq = (int64_t)hp->n_head * hdk, dk = (int64_t)hp->n_head_kv * hdk;
    const bool neox = hp->rope_kind == RW_ROPE_NEOX;
    for (int64_t t = t0; t < t1; t++) {
        const float *cs = sc->rope_cs + t * hp->n_rot;
        float *qt = sc->q + t * dq, *kt = sc->k + t * dk;
        if (L->q_norm) rw_rmsnorm_groups(qt, L->q_norm, 0, hp->n_head, hdk, hp->rms_eps, qt);
        if (L->k_norm) rw_rmsnorm_groups(kt, L->k_norm, 0, hp->n_head_kv, hdk, hp->rms_eps, kt);
        for (int h = 0; j->rope && h < hp->n_head; h++) rw_rope(qt + (int64_t)h * hdk, hp->n_rot, neox, cs);
        for (int h = 0; j->rope && h < hp->n_head_kv; h++) rw_rope(kt + (int64_t)h * hdk, hp->n_rot, neox, cs);
    }
}

/* The sublayer; RoPE only if rope (the per-head q/k norms whenever bound). */
static rw_status attention(rw_model *m, int il, const rw_models__dense_layer *L, const rw_models__batch *b, bool rope, float scale,
                           rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    rw_models__scratch *sc = &m->sc;
    const int64_t n = b->n;
    const int hdk = hp->head_dim_k, hdv = hp->head_dim_v;
    const int64_t dq = (int64_t)hp->n_head * hdk, dk = (int64_t)hp->n_head_kv * hdk, dv = (int64_t)hp->n_head_kv * hdv;
    rw_status st;
    if ((st = rw_models__matmul(&L->wq, sc->xn, n, sc->q, b->pool, err)) ||
        (st = rw_models__matmul(&L->wk, sc->xn, n, sc->k, b->pool, err)) ||
        (st = rw_models__matmul(&L->wv, sc->xn, n, sc->v, b->pool, err)))
        return st;
    add_bias(sc->q, L->bq, n, dq);
    add_bias(sc->k, L->bk, n, dk);
    add_bias(sc->v, L->bv, n, dv);
    qk_job qj = {m, L, rope};
    if (rope || L->q_norm || L->k_norm) rw_threadpool_rows(b->pool, n, 8, qk_rows, &qj);
    if ((st = rw_models__attend(m, il, b, sc->q, dq, sc->k, dk, sc->v, dv, scale, sc->att, err))) return st;
    if ((st = rw_models__matmul(&L->wo, sc->att, n, sc->tmp, b->pool, err))) return st;
    add_bias(sc->tmp, L->bo, n, hp->n_embd);
    return RW_OK;
}

rw_status rw_models__attention(rw_model *m, int il, const rw_models__dense_layer *L, const rw_models__batch *b, rw_error *err) {
    return attention(m, il, L, b, true, 1.0f / sqrtf((float)m->hp.head_dim_k), err);
}

rw_status rw_models__attention_nopos(rw_model *m, int il, const rw_models__dense_layer *L, const rw_models__batch *b, float scale,
                                     rw_error *err) {
    return attention(m, il, L, b, false, scale, err);
}
