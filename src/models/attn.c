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

#include "kernels/ops_model.h"
#include "models/model_int.h"

/* One task = one (token, query head) pair. */
typedef struct {
    const rw_model *m;
    const rw_kv_cache *kv;
    int il;
    int64_t pos0;
    float scale;
} attend_ctx;

static void attend_task(void *p, int64_t task, int thread) {
    const attend_ctx *c = p;
    const rw_model_hparams *hp = &c->m->hp;
    const mdl_scratch *sc = &c->m->sc;
    const int64_t t = task / hp->n_head;
    const int h = (int)(task % hp->n_head), kvh = h / (hp->n_head / hp->n_head_kv);
    const bool f16 = rw_kv_get_config(c->kv)->type == RW_KV_F16;
    rw_attn_head(sc->q + t * hp->n_head * hp->head_dim_k + (int64_t)h * hp->head_dim_k,
                 rw_kv_k_head(c->kv, c->il, kvh), rw_kv_v_head(c->kv, c->il, kvh), rw_kv_capacity(c->kv), f16,
                 c->pos0 + t + 1,
                 hp->head_dim_k, hp->head_dim_v, c->scale, sc->scores + (int64_t)thread * sc->ctx_cap,
                 sc->att + t * hp->n_head * hp->head_dim_v + (int64_t)h * hp->head_dim_v);
}

static void add_bias(float *y, const float *b, int64_t n, int64_t dim) {
    if (!b) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < dim; i++) y[t * dim + i] += b[i];
}

rw_status mdl_attention(rw_model *m, rw_model_seq *s, int il, const mdl_dense_layer *L, const mdl_batch *b,
                        rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    mdl_scratch *sc = &m->sc;
    const int64_t n = b->n;
    const int hdk = hp->head_dim_k, hdv = hp->head_dim_v;
    const int64_t dq = (int64_t)hp->n_head * hdk, dk = (int64_t)hp->n_head_kv * hdk, dv = (int64_t)hp->n_head_kv * hdv;
    (void)hdv;
    rw_status st;
    if ((st = mdl_matmul(&L->wq, sc->xn, n, sc->q, b->pool, err)) ||
        (st = mdl_matmul(&L->wk, sc->xn, n, sc->k, b->pool, err)) ||
        (st = mdl_matmul(&L->wv, sc->xn, n, sc->v, b->pool, err)))
        return st;
    add_bias(sc->q, L->bq, n, dq);
    add_bias(sc->k, L->bk, n, dk);
    add_bias(sc->v, L->bv, n, dv);
    const bool neox = hp->rope_kind == RW_ROPE_NEOX;
    for (int64_t t = 0; t < n; t++) {
        const float *cs = sc->rope_cs + t * hp->n_rot;
        for (int h = 0; h < hp->n_head; h++) {
            float *x = sc->q + t * dq + (int64_t)h * hdk;
            if (L->q_norm) rw_rmsnorm(x, L->q_norm, hdk, hp->rms_eps, x);
            rw_rope(x, hp->n_rot, neox, cs);
        }
        for (int h = 0; h < hp->n_head_kv; h++) {
            float *x = sc->k + t * dk + (int64_t)h * hdk;
            if (L->k_norm) rw_rmsnorm(x, L->k_norm, hdk, hp->rms_eps, x);
            rw_rope(x, hp->n_rot, neox, cs);
        }
    }
    if ((st = rw_kv_store(s->kv, il, b->pos0, n, sc->k, dk, sc->v, dv, err))) return st;
    attend_ctx ac = {.m = m, .kv = s->kv, .il = il, .pos0 = b->pos0, .scale = 1.0f / sqrtf((float)hdk)};
    rw_threadpool_run(b->pool, attend_task, &ac, n * hp->n_head);
    if ((st = mdl_matmul(&L->wo, sc->att, n, sc->tmp, b->pool, err))) return st;
    add_bias(sc->tmp, L->bo, n, hp->n_embd);
    return RW_OK;
}
