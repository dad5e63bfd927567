/* scratch.c - a model's per-pass buffers (model_int.h's rw_models__scratch):
 * growing them for a pass, checking an architecture's share, freeing them,
 * and the RoPE tables of a pass's rows. forward.c, mtp.c, model.c and the
 * architectures use them; they call none of those, so the model's files
 * stay a tree. */
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/ops_model.h"
#include "models/model_int.h"

void rw_models__scratch_free(rw_models__scratch *sc) {
    free(sc->x);
    free(sc->xn);
    free(sc->tmp);
    free(sc->work);
    free(sc->rope_cs);
    free(sc->scores);
    free(sc->logits);
    memset(sc, 0, sizeof *sc);
}

int64_t rw_models__attn_work_floats(const rw_model_hparams *hp) {
    const int64_t per_head = (int64_t)hp->head_dim_k + hp->head_dim_v;
    return ((int64_t)hp->n_head + hp->n_head_kv) * per_head;
}

rw_status rw_models__work_ready(const rw_model *m, int64_t n, const char *who, rw_error *err) {
    if (m->sc.work && n <= m->sc.n_cap) return RW_OK;
    return rw_errorf(err, RW_ERR_INTERNAL, "%s: scratch holds %lld rows, %lld needed", who, (long long)m->sc.n_cap,
                     (long long)n);
}

/* Grows the per-token buffers to n tokens and the attention scratch to
 * n_ctx positions. Buffers are replaced whole: their contents do not
 * survive between forward calls. */
rw_status rw_models__scratch_reserve(rw_model *m, int64_t n, int64_t n_ctx, int n_threads, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    rw_models__scratch *sc = &m->sc;
    if (n > sc->n_cap) {
        free(sc->x), free(sc->xn), free(sc->tmp), free(sc->work), free(sc->rope_cs);
        const int64_t dq = (int64_t)hp->n_head * hp->head_dim_k, dk = (int64_t)hp->n_head_kv * hp->head_dim_k;
        const int64_t dv = (int64_t)hp->n_head_kv * hp->head_dim_v;
        int64_t work = rw_models__attn_work_floats(hp);
        if (2 * (int64_t)hp->n_ff > work) work = 2 * (int64_t)hp->n_ff;
        if (m->arch_work_floats > work) work = m->arch_work_floats;
        const size_t t = (size_t)n * sizeof(float);
        sc->x = malloc(t * (size_t)hp->n_embd);
        sc->xn = malloc(t * (size_t)hp->n_embd);
        sc->tmp = malloc(t * (size_t)hp->n_embd);
        sc->work = malloc(t * (size_t)work);
        sc->rope_cs = malloc(t * (size_t)hp->n_rot);
        if (!sc->x || !sc->xn || !sc->tmp || !sc->work || !sc->rope_cs) {
            free(sc->x), free(sc->xn), free(sc->tmp), free(sc->work), free(sc->rope_cs);
            sc->x = sc->xn = sc->tmp = sc->work = sc->rope_cs = NULL;
            sc->q = sc->k = sc->v = sc->att = sc->gate = sc->up = NULL;
            sc->n_cap = 0;
            return rw_errorf(err, RW_ERR_NOMEM, "out of memory for the activations of %lld tokens", (long long)n);
        }
        sc->n_cap = n;
        sc->q = sc->work;
        sc->k = sc->q + n * dq;
        sc->v = sc->k + n * dk;
        sc->att = sc->v + n * dv;
        sc->gate = sc->work;
        sc->up = sc->gate + n * (int64_t)hp->n_ff;
    }
    if (n_ctx > sc->ctx_cap || n_threads > sc->threads_cap) {
        free(sc->scores);
        sc->scores = malloc((size_t)rw_attn_scratch_floats(n_threads, hp->n_head, hp->n_head_kv, n_ctx) * sizeof(float));
        sc->ctx_cap = n_ctx;
        sc->threads_cap = n_threads;
        if (!sc->scores) {
            sc->ctx_cap = 0;
            sc->threads_cap = 0;
            return rw_errorf(err, RW_ERR_NOMEM, "out of memory for attention over %lld positions", (long long)n_ctx);
        }
    }
    return RW_OK;
}

void rw_models__rope_rows(rw_model *m, const rw_models__batch *b) {
    const rw_model_hparams *hp = &m->hp;
    for (int i = 0; i < b->n_seg; i++)
        for (int64_t t = 0; t < b->seg[i].n; t++) {
            float *cs = m->sc.rope_cs + (b->seg[i].row0 + t) * hp->n_rot;
            if (hp->yarn_ext_factor != 0.0f)
                rw_rope_cache_yarn((float)(b->seg[i].pos0 + t), hp->n_rot, hp->rope_base, hp->rope_freq_scale,
                                   hp->yarn_ext_factor, hp->yarn_corr, hp->yarn_attn_factor, cs);
            else
                rw_rope_cache((float)(b->seg[i].pos0 + t), hp->n_rot, hp->rope_base, hp->rope_freq_scale, m->rope_freqs,
                              cs);
        }
}
