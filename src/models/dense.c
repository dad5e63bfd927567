/* dense.c - one pre-norm transformer block (llama, qwen2, qwen3):
 *   x += attn(rmsnorm(x) * attn_norm)
 *   x += ffn(rmsnorm(x) * ffn_norm) */
#include "kernels/ops_model.h"
#include "models/model_int.h"

void rw_models__norm_rows(const rw_model *m, const float *w, int64_t n) {
    const int e = m->hp.n_embd;
    rw_rmsnorm_groups(m->sc.x, w, 0, (int)n, e, m->hp.rms_eps, m->sc.xn);
}

void rw_models__add_residual(rw_model *m, int64_t n) {
    const int64_t total = n * m->hp.n_embd;
    for (int64_t i = 0; i < total; i++) m->sc.x[i] += m->sc.tmp[i];
}

rw_status rw_models__dense_layer_forward(rw_model *m, int il, const rw_models__batch *b, rw_error *err) {
    const rw_models__dense_layer *L = &m->layers[il];
    rw_models__norm_rows(m, L->attn_norm, b->n);
    rw_status st = rw_models__attention(m, il, L, b, err);
    if (st) return st;
    rw_models__add_residual(m, b->n);
    rw_models__norm_rows(m, L->ffn_norm, b->n);
    if ((st = rw_models__ffn_swiglu(m, L, b, err))) return st;
    rw_models__add_residual(m, b->n);
    return RW_OK;
}
