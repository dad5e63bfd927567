/* dense.c - one pre-norm transformer block (llama, qwen2, qwen3):
 *   x += attn(rmsnorm(x) * attn_norm)
 *   x += ffn(rmsnorm(x) * ffn_norm) */
#include "kernels/ops_model.h"
#include "models/model_int.h"

/* Rows [r0, r1) of the norm (each row's sum its own: any split gives the same bits). */
typedef struct {
    const rw_model *m;
    const float *w;
} norm_job;

static void norm_rows(void *ctx, int64_t r0, int64_t r1) {
    const norm_job *j = ctx;
    const int e = j->m->hp.n_embd;
    rw_rmsnorm_groups(j->m->sc.x + r0 * e, j->w, 0, (int)(r1 - r0), e, j->m->hp.rms_eps, j->m->sc.xn + r0 * e);
}

void rw_models__norm_rows(const rw_model *m, const float *w, const rw_models__batch *b) {
    norm_job j = {m, w};
    rw_threadpool_rows(b->pool, b->n, 16, norm_rows, &j);
}

static void residual_rows(void *ctx, int64_t r0, int64_t r1) {
    rw_model *m = ctx;
    const int64_t e = m->hp.n_embd;
    for (int64_t i = r0 * e; i < r1 * e; i++) m->sc.x[i] += m->sc.tmp[i];
}

void rw_models__add_residual(rw_model *m, const rw_models__batch *b) {
    rw_threadpool_rows(b->pool, b->n, 64, residual_rows, m);
}

rw_status rw_models__dense_layer_forward(rw_model *m, int il, const rw_models__batch *b, rw_error *err) {
    const rw_models__dense_layer *L = &m->layers[il];
    rw_models__norm_rows(m, L->attn_norm, b);
    rw_status st = rw_models__attention(m, il, L, b, err);
    if (st) return st;
    rw_models__add_residual(m, b);
    rw_models__norm_rows(m, L->ffn_norm, b);
    if ((st = rw_models__ffn_swiglu(m, L, b, err))) return st;
    rw_models__add_residual(m, b);
    return RW_OK;
}
