/* forward.c - the forward pass shared by every architecture: embedding,
 * the architecture's layers, final norm and output head (model_int.h). */
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/ops.h"
#include "kernels/ops_model.h"
#include "models/model_int.h"

/* Most tokens one forward chunk computes at once (llama.cpp's n_ubatch). */
#define MDL_UBATCH 512

void mdl_scratch_free(mdl_scratch *sc) {
    free(sc->x);
    free(sc->xn);
    free(sc->q);
    free(sc->k);
    free(sc->v);
    free(sc->att);
    free(sc->tmp);
    free(sc->gate);
    free(sc->up);
    free(sc->rope_cs);
    free(sc->scores);
    memset(sc, 0, sizeof *sc);
}

/* Grows the per-token buffers to n tokens and the attention scratch to
 * n_ctx positions. Buffers are replaced whole: their contents do not
 * survive between forward calls. */
static rw_status scratch_reserve(rw_model *m, int64_t n, int64_t n_ctx, int n_threads, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    mdl_scratch *sc = &m->sc;
    if (n > sc->n_cap) {
        mdl_scratch old = *sc;
        free(old.x), free(old.xn), free(old.q), free(old.k), free(old.v), free(old.att), free(old.tmp);
        free(old.gate), free(old.up), free(old.rope_cs);
        const size_t t = (size_t)n * sizeof(float);
        sc->x = malloc(t * (size_t)hp->n_embd);
        sc->xn = malloc(t * (size_t)hp->n_embd);
        sc->tmp = malloc(t * (size_t)hp->n_embd);
        sc->q = malloc(t * (size_t)hp->n_head * (size_t)hp->head_dim_k);
        sc->k = malloc(t * (size_t)hp->n_head_kv * (size_t)hp->head_dim_k);
        sc->v = malloc(t * (size_t)hp->n_head_kv * (size_t)hp->head_dim_v);
        sc->att = malloc(t * (size_t)hp->n_head * (size_t)hp->head_dim_v);
        sc->gate = malloc(t * (size_t)hp->n_ff);
        sc->up = malloc(t * (size_t)hp->n_ff);
        sc->rope_cs = malloc(t * (size_t)hp->n_rot);
        sc->n_cap = n;
        if (!sc->x || !sc->xn || !sc->tmp || !sc->q || !sc->k || !sc->v || !sc->att || !sc->gate || !sc->up ||
            !sc->rope_cs) {
            free(sc->x), free(sc->xn), free(sc->q), free(sc->k), free(sc->v), free(sc->att), free(sc->tmp);
            free(sc->gate), free(sc->up), free(sc->rope_cs);
            sc->x = sc->xn = sc->q = sc->k = sc->v = sc->att = sc->tmp = sc->gate = sc->up = sc->rope_cs = NULL;
            sc->n_cap = 0;
            return rw_errorf(err, RW_ERR_NOMEM, "out of memory for the activations of %lld tokens", (long long)n);
        }
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

/* Copies embedding rows, converted to f32 (ggml's get_rows: exact). */
static rw_status embed(rw_model *m, const int32_t *tokens, int64_t n, rw_error *err) {
    const rw_gguf_tensor *te = m->tok_embd;
    const int e = m->hp.n_embd;
    uint64_t row_bytes;
    rw_dtype_row_bytes(te->type, (uint64_t)e, &row_bytes);
    for (int64_t t = 0; t < n; t++) {
        const void *row = (const char *)te->data + (size_t)tokens[t] * row_bytes;
        rw_status st = rw_dequantize_row(te->type, row, m->sc.x + t * e, e);
        if (st) return rw_errorf(err, st, "token_embd.weight: cannot convert type %s", rw_dtype_name(te->type));
        const float es = m->hp.embedding_scale;
        if (es != 0.0f && es != 1.0f)
            for (int i = 0; i < e; i++) m->sc.x[t * e + i] *= es;
    }
    return RW_OK;
}

/* Runs n <= MDL_UBATCH tokens at positions pos0.. (the cache holds pos0
 * positions). logits (if not NULL) receives rows first..n-1 of this chunk;
 * layer_out rows go to layer_out + il * layer_stride. */
static rw_status forward_chunk(rw_model *m, rw_model_seq *s, const int32_t *tokens, int64_t n, int64_t pos0,
                               float *logits, int64_t first, float *layer_out, size_t layer_stride,
                               rw_threadpool *pool, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    rw_status st;
    if ((st = embed(m, tokens, n, err))) return st;
    for (int64_t t = 0; t < n; t++)
        rw_rope_cache((float)(pos0 + t), hp->n_rot, hp->rope_base, hp->rope_freq_scale, m->rope_freqs,
                           m->sc.rope_cs + t * hp->n_rot);
    const mdl_batch b = {.n = n, .pos0 = pos0, .pool = pool};
    for (int il = 0; il < hp->n_layer; il++) {
        if ((st = m->arch->layer(m, s, il, &b, err))) return st;
        if (layer_out)
            memcpy(layer_out + (size_t)il * layer_stride, m->sc.x, (size_t)n * (size_t)hp->n_embd * sizeof(float));
    }
    if (logits && first < n) {
        const int64_t rows = n - first;
        const int e = hp->n_embd;
        for (int64_t t = 0; t < rows; t++)
            rw_rmsnorm(m->sc.x + (first + t) * e, m->output_norm, e, hp->rms_eps, m->sc.xn + t * e);
        if ((st = mdl_matmul(&m->output, m->sc.xn, rows, logits, pool, err))) return st;
        const float ls = hp->logit_scale;
        if (ls != 0.0f && ls != 1.0f) { /* times 1/scale, as ggml_scale(logits, 1/logit_scale) */
            const float inv = 1.0f / ls;
            for (int64_t i = 0; i < rows * hp->n_vocab; i++) logits[i] *= inv;
        }
    }
    return rw_kv_set_length(s->kv, pos0 + n, err);
}

rw_status rw_model_forward(rw_model *m, rw_model_seq *s, const rw_forward_args *a, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    if (!a || !a->tokens || a->n <= 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "forward: no tokens");
    if (s->m != m) return rw_errorf(err, RW_ERR_INVALID_ARG, "forward: sequence belongs to another model");
    for (int64_t t = 0; t < a->n; t++)
        if (a->tokens[t] < 0 || a->tokens[t] >= hp->n_vocab)
            return rw_errorf(err, RW_ERR_RANGE, "token id %d at index %lld is outside the vocabulary (%lld)",
                             (int)a->tokens[t], (long long)t, (long long)hp->n_vocab);
    const int64_t pos0 = rw_kv_length(s->kv), n = a->n;
    const int64_t chunk = n < MDL_UBATCH ? n : MDL_UBATCH;
    rw_status st;
    if ((st = rw_kv_reserve(s->kv, pos0 + n, err))) return st;
    if ((st = scratch_reserve(m, chunk, rw_kv_capacity(s->kv), rw_threadpool_size(a->pool), err))) return st;
    /* Long inputs run in chunks of MDL_UBATCH tokens: the activations stay
     * small, and the result is the same (every token is computed alone). */
    const size_t layer_stride = (size_t)n * (size_t)hp->n_embd;
    for (int64_t c = 0; c < n; c += chunk) {
        const int64_t nc = n - c < chunk ? n - c : chunk;
        float *logits = NULL;
        int64_t first = nc;
        if (a->logits && a->all_logits) logits = a->logits + c * hp->n_vocab, first = 0;
        else if (a->logits && c + nc == n) logits = a->logits, first = nc - 1;
        float *lo = a->layer_out ? a->layer_out + (size_t)c * (size_t)hp->n_embd : NULL;
        st = forward_chunk(m, s, a->tokens + c, nc, pos0 + c, logits, first, lo, layer_stride, a->pool, err);
        if (st) {
            rw_kv_set_length(s->kv, pos0, NULL);
            return st;
        }
    }
    return RW_OK;
}

/* For now the items run one after another; a shared pass replaces this. */
rw_status rw_model_forward_batch(rw_model *m, const rw_batch_item *items, int n_items, rw_threadpool *pool,
                                 rw_error *err) {
    for (int i = 0; i < n_items; i++) {
        const rw_forward_args a = {.tokens = items[i].tokens, .n = items[i].n, .logits = items[i].logits,
                                   .all_logits = items[i].all_logits, .pool = pool};
        rw_status st = rw_model_forward(m, items[i].seq, &a, err);
        if (st) {
            for (int j = 0; j < i; j++)
                rw_model_seq_truncate(items[j].seq, rw_model_seq_length(items[j].seq) - items[j].n, NULL);
            return st;
        }
    }
    return RW_OK;
}
