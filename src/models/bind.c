/* bind.c - finds the weight tensors of a model and checks their shapes and
 * types against the hyperparameters. Weights stay in the GGUF mapping. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/quant.h"
#include "models/model_int.h"

static rw_status check_dims(const rw_gguf_tensor *t, uint32_t n_dims, const int64_t *ne, rw_error *err) {
    bool ok = t->n_dims == n_dims;
    for (uint32_t d = 0; ok && d < n_dims; d++) ok = t->ne[d] == (uint64_t)ne[d];
    if (ok) return RW_OK;
    char want[64], got[64];
    int w = snprintf(want, sizeof want, "{%lld", (long long)ne[0]);
    for (uint32_t d = 1; d < n_dims; d++) w += snprintf(want + w, sizeof want - (size_t)w, ", %lld", (long long)ne[d]);
    snprintf(want + w, sizeof want - (size_t)w, "}");
    int k = snprintf(got, sizeof got, "{%llu", (unsigned long long)t->ne[0]);
    for (uint32_t d = 1; d < t->n_dims; d++) k += snprintf(got + k, sizeof got - (size_t)k, ", %llu", (unsigned long long)t->ne[d]);
    snprintf(got + k, sizeof got - (size_t)k, "}");
    return rw_errorf(err, RW_ERR_FORMAT, "tensor %s has shape %s, expected %s", t->name, got, want);
}

rw_status rw_models__note_matrix(rw_model *m, rw_matrix *w, const char *name, rw_error *err) {
    if (m->n_mats == m->cap_mats) {
        const int cap = m->cap_mats ? 2 * m->cap_mats : 64;
        rw_matrix **mats = realloc(m->mats, sizeof *mats * (size_t)cap);
        if (mats) m->mats = mats;
        const char **names = mats ? realloc(m->mat_names, sizeof *names * (size_t)cap) : NULL;
        if (!names) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        m->mat_names = names;
        m->cap_mats = cap;
    }
    m->mat_names[m->n_mats] = name;
    m->mats[m->n_mats++] = w;
    return RW_OK;
}

rw_status rw_models__bind_matrix(rw_model *m, const char *name, int64_t n_in, int64_t n_out, bool required,
                          rw_matrix *out, rw_error *err) {
    *out = (rw_matrix){0};
    const rw_gguf_tensor *t = rw_gguf_find_tensor(m->g, name);
    if (!t) return required ? rw_errorf(err, RW_ERR_FORMAT, "missing tensor %s", name) : RW_OK;
    int64_t ne[2] = {n_in, n_out};
    rw_status st = check_dims(t, 2, ne, err);
    if (st) return st;
    if (!rw_matmul_supports(t->type))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "tensor %s has type %s, which has no matmul kernel", name,
                         rw_dtype_name(t->type));
    *out = (rw_matrix){.type = t->type, .data = t->data, .n_in = n_in, .n_out = n_out};
    return rw_models__note_matrix(m, out, t->name, err);
}

rw_status rw_models__bind_vector(const rw_model *m, const char *name, int64_t n, bool required, const float **out,
                          rw_error *err) {
    *out = NULL;
    const rw_gguf_tensor *t = rw_gguf_find_tensor(m->g, name);
    if (!t) return required ? rw_errorf(err, RW_ERR_FORMAT, "missing tensor %s", name) : RW_OK;
    rw_status st = check_dims(t, 1, &n, err);
    if (st) return st;
    /* Norm weights and biases are kept in F32 by every converter. */
    if (t->type != RW_TYPE_F32)
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "tensor %s has type %s, expected F32", name, rw_dtype_name(t->type));
    *out = t->data;
    return RW_OK;
}

rw_status rw_models__bind_common(rw_model *m, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    const rw_gguf_tensor *te = rw_gguf_find_tensor(m->g, "token_embd.weight");
    if (!te) return rw_errorf(err, RW_ERR_FORMAT, "missing tensor token_embd.weight");
    if (te->n_dims != 2 || te->ne[0] != (uint64_t)hp->n_embd || te->ne[1] == 0 || te->ne[1] > (1u << 24))
        return rw_errorf(err, RW_ERR_FORMAT, "tensor token_embd.weight has shape {%llu, %llu}, expected {%d, n_vocab}",
                         (unsigned long long)te->ne[0], (unsigned long long)te->ne[1], hp->n_embd);
    if (!rw_can_dequantize(te->type) || !rw_matmul_supports(te->type))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "tensor token_embd.weight has unsupported type %s", rw_dtype_name(te->type));
    m->tok_embd = te;
    m->hp.n_vocab = (int64_t)te->ne[1];
    const char *norm = m->arch->output_norm ? m->arch->output_norm : "output_norm.weight";
    rw_status st = rw_models__bind_vector(m, norm, hp->n_embd, true, &m->output_norm, err);
    if (st) return st;
    st = rw_models__bind_matrix(m, "output.weight", hp->n_embd, m->hp.n_vocab, false, &m->output, err);
    if (st) return st;
    m->hp.tied_output = m->output.data == NULL;
    if (m->hp.tied_output) {
        m->output = (rw_matrix){.type = te->type, .data = te->data, .n_in = hp->n_embd, .n_out = m->hp.n_vocab};
        if ((st = rw_models__note_matrix(m, &m->output, NULL, err))) return st;
    }
    st = rw_models__bind_vector(m, "rope_freqs.weight", hp->n_rot / 2, false, &m->rope_freqs, err);
    if (st) return st;
    m->hp.has_rope_freqs = m->rope_freqs != NULL;
    if (m->rope_freqs && hp->yarn_ext_factor != 0.0f)
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "rope_freqs.weight with YaRN rope scaling is not supported");
    return RW_OK;
}

rw_status rw_models__bind_dense_layer(rw_model *m, int il, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    rw_models__dense_layer *L = &m->layers[il];
    const int64_t e = hp->n_embd, q = (int64_t)hp->n_head * hp->head_dim_k, k = (int64_t)hp->n_head_kv * hp->head_dim_k,
                  v = (int64_t)hp->n_head_kv * hp->head_dim_v, o = (int64_t)hp->n_head * hp->head_dim_v;
    const bool bias = m->arch->qkv_bias;
    char n[96];
    rw_status st = RW_OK;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if ((st = rw_models__bind_vector(m, NAME("attn_norm.weight"), e, true, &L->attn_norm, err)) ||
        (st = rw_models__bind_matrix(m, NAME("attn_q.weight"), e, q, true, &L->wq, err)) ||
        (st = rw_models__bind_matrix(m, NAME("attn_k.weight"), e, k, true, &L->wk, err)) ||
        (st = rw_models__bind_matrix(m, NAME("attn_v.weight"), e, v, true, &L->wv, err)) ||
        (st = rw_models__bind_matrix(m, NAME("attn_output.weight"), o, e, true, &L->wo, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_q.bias"), q, bias, &L->bq, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_k.bias"), k, bias, &L->bk, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_v.bias"), v, bias, &L->bv, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_output.bias"), e, false, &L->bo, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_q_norm.weight"), hp->head_dim_k, m->arch->qk_norm, &L->q_norm, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_k_norm.weight"), hp->head_dim_k, m->arch->qk_norm, &L->k_norm, err)) ||
        (st = rw_models__bind_vector(m, NAME("ffn_norm.weight"), e, true, &L->ffn_norm, err)) ||
        (st = rw_models__bind_matrix(m, NAME("ffn_gate.weight"), e, hp->n_ff, true, &L->ffn_gate, err)) ||
        (st = rw_models__bind_matrix(m, NAME("ffn_up.weight"), e, hp->n_ff, true, &L->ffn_up, err)) ||
        (st = rw_models__bind_matrix(m, NAME("ffn_down.weight"), hp->n_ff, e, true, &L->ffn_down, err)))
        return st;
#undef NAME
    if (!L->q_norm != !L->k_norm)
        return rw_errorf(err, RW_ERR_FORMAT, "layer %d has only one of attn_q_norm and attn_k_norm", il);
    return RW_OK;
}

rw_status rw_models__bind_dense(rw_model *m, rw_error *err) {
    rw_status st = rw_models__bind_common(m, err);
    if (st) return st;
    m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
    if (!m->layers) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    for (int il = 0; il < m->hp.n_layer && st == RW_OK; il++) st = rw_models__bind_dense_layer(m, il, err);
    return st;
}
