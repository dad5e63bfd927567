/* nemotron_h.c - NVIDIA Nemotron-H hybrids (nemotron_h): every block holds
 * exactly one mixer, picked per layer from the per-layer arrays
 * feed_forward_length (n_ff) and attention.head_count_kv (n_kv):
 *
 *   n_ff[il] > 0            MLP:       W_down (relu(W_up h))^2   (squared ReLU, no gate)
 *   else n_kv[il] > 0       attention: q, k, v, causal GQA at 1/sqrt(head_dim)
 *                                      (or attention.scale), no positional encoding
 *   else                    Mamba2:    models/mamba2.c (as granitehybrid's)
 *
 *   block:  x += mixer(rmsnorm(x) * attn_norm)    (one norm per block, whatever its kind)
 *   logits = output · rmsnorm(x) * output_norm
 *
 * Biases (attn_*.bias, ffn_up.bias, ffn_down.bias) are optional, as in
 * llama.cpp's loader. Per-sequence state per block: "mamba2" (conv + SSM
 * state), "kv", or "none" for an MLP block, which keeps nothing but its
 * length (cache/none_state.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model_int.h"

#define A "nemotron_h"

typedef enum { NH_MAMBA2, NH_ATTN, NH_MLP } nh_kind;

typedef struct {
    nh_kind kind;
    int64_t ff;                  /* MLP: its feed_forward_length */
    rw_matrix up, down;          /* MLP: n_embd -> ff, ff -> n_embd */
    const float *up_b, *down_b;  /* MLP: optional biases [ff], [n_embd] */
    rw_models__mamba2_layer mb;               /* Mamba2 */
} nh_layer;

typedef struct {
    rw_models__mamba2_shape dims;
    float attention_scale;
    nh_layer *layer; /* [n_layer] */
} nemotron;

static rw_status key_u32(const rw_gguf *g, const char *name, uint32_t *out, rw_error *err) {
    char key[128];
    snprintf(key, sizeof key, A ".%s", name);
    rw_status st = rw_gguf_get_u32(g, key, out, err);
    if (st == RW_ERR_NOT_FOUND) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key %s", key);
    return st;
}

/* The per-layer arrays into ff[], kv[] (n_layer each, caller's), checked. */
static rw_status read_pattern(const rw_gguf *g, int n_layer, uint32_t heads, uint32_t *ff, uint32_t *kv,
                              rw_error *err) {
    rw_status st;
    if ((st = rw_models__per_layer_u32(g, A, "feed_forward_length", n_layer, true, 0, ff, err)) ||
        (st = rw_models__per_layer_u32(g, A, "attention.head_count_kv", n_layer, true, 0, kv, err)))
        return st;
    for (int il = 0; il < n_layer; il++) {
        if (ff[il] > (1u << 20))
            return rw_errorf(err, RW_ERR_FORMAT, A ".feed_forward_length = %u for layer %d is out of range", ff[il], il);
        if (kv[il] > heads || (kv[il] && heads % kv[il]))
            return rw_errorf(err, RW_ERR_FORMAT, A ".attention.head_count_kv = %u for layer %d must divide head_count %u",
                             kv[il], il, heads);
    }
    return RW_OK;
}

static rw_status nh_hparams(const rw_gguf *g, const rw_models__arch *arch, rw_model_hparams *hp, rw_error *err) {
    memset(hp, 0, sizeof *hp);
    snprintf(hp->arch, sizeof hp->arch, "%s", arch->name);
    uint32_t ctx, embd, layers, heads, hdk, hdv;
    rw_status st;
    if ((st = key_u32(g, "context_length", &ctx, err)) || (st = key_u32(g, "embedding_length", &embd, err)) ||
        (st = key_u32(g, "block_count", &layers, err)) || (st = key_u32(g, "attention.head_count", &heads, err)))
        return st;
    if (embd == 0 || embd > (1u << 20) || layers == 0 || layers > 4096 || heads == 0 || heads > embd || ctx == 0)
        return rw_errorf(err, RW_ERR_FORMAT, "invalid " A " metadata (context %u, embedding %u, layers %u, heads %u)",
                         ctx, embd, layers, heads);
    if (key_u32(g, "attention.key_length", &hdk, NULL)) hdk = embd / heads;
    if (key_u32(g, "attention.value_length", &hdv, NULL)) hdv = hdk;
    if (hdk == 0 || hdk > 4096 || hdv == 0 || hdv > 4096)
        return rw_errorf(err, RW_ERR_FORMAT, "invalid " A " head sizes %u / %u", hdk, hdv);
    uint32_t *ff = malloc(2 * (size_t)layers * sizeof *ff); /* ff, then kv; freed below */
    if (!ff) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    uint32_t *kv = ff + layers, max_ff = 0, max_kv = 0;
    st = read_pattern(g, (int)layers, heads, ff, kv, err);
    for (uint32_t il = 0; il < layers && !st; il++) {
        if (ff[il] > max_ff) max_ff = ff[il];
        if (!ff[il] && kv[il] > max_kv) max_kv = kv[il];
    }
    free(ff);
    if (st) return st;
    if ((st = rw_gguf_get_f32(g, A ".attention.layer_norm_rms_epsilon", &hp->rms_eps, err))) {
        if (st == RW_ERR_NOT_FOUND)
            return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key " A ".attention.layer_norm_rms_epsilon");
        return st;
    }
    if (!(hp->rms_eps > 0) || !isfinite(hp->rms_eps))
        return rw_errorf(err, RW_ERR_FORMAT, "invalid " A ".attention.layer_norm_rms_epsilon");
    hp->n_ctx_train = ctx;
    hp->n_embd = (int)embd;
    hp->n_layer = (int)layers;
    hp->n_ff = (int)max_ff; /* the largest MLP: it sizes the FFN scratch */
    hp->n_head = (int)heads;
    hp->n_head_kv = (int)(max_kv ? max_kv : heads); /* the KV cache's head count */
    hp->head_dim_k = (int)hdk;
    hp->head_dim_v = (int)hdv;
    hp->n_rot = 2; /* no RoPE is applied; a minimal rotary cache keeps forward.c generic */
    hp->rope_base = 10000.0f;
    hp->rope_freq_scale = 1.0f;
    hp->rope_kind = RW_ROPE_NEOX;
    return RW_OK;
}

static void nh_free(rw_model *m) {
    nemotron *x = m->ext;
    if (!x) return;
    free(x->layer);
    free(x);
    m->ext = NULL;
}

/* blk.<il>.<s> in the caller's buffer n */
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)

static rw_status bind_attn(rw_model *m, int il, int64_t hkv, rw_models__dense_layer *Ld, rw_error *err) {
    const int64_t E = m->hp.n_embd, D = m->hp.head_dim_k, Dv = m->hp.head_dim_v, H = m->hp.n_head;
    char n[96];
    rw_status st;
    if ((st = rw_models__bind_matrix(m, NAME("attn_q.weight"), E, H * D, true, &Ld->wq, err)) ||
        (st = rw_models__bind_matrix(m, NAME("attn_k.weight"), E, hkv * D, true, &Ld->wk, err)) ||
        (st = rw_models__bind_matrix(m, NAME("attn_v.weight"), E, hkv * Dv, true, &Ld->wv, err)) ||
        (st = rw_models__bind_matrix(m, NAME("attn_output.weight"), H * Dv, E, true, &Ld->wo, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_q.bias"), H * D, false, &Ld->bq, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_k.bias"), hkv * D, false, &Ld->bk, err)) ||
        (st = rw_models__bind_vector(m, NAME("attn_v.bias"), hkv * Dv, false, &Ld->bv, err)))
        return st;
    return rw_models__bind_vector(m, NAME("attn_output.bias"), E, false, &Ld->bo, err);
}

static rw_status bind_mlp(rw_model *m, int il, nh_layer *N, rw_error *err) {
    const int64_t E = m->hp.n_embd;
    char n[96];
    rw_status st;
    if ((st = rw_models__bind_matrix(m, NAME("ffn_up.weight"), E, N->ff, true, &N->up, err)) ||
        (st = rw_models__bind_matrix(m, NAME("ffn_down.weight"), N->ff, E, true, &N->down, err)) ||
        (st = rw_models__bind_vector(m, NAME("ffn_up.bias"), N->ff, false, &N->up_b, err)))
        return st;
    return rw_models__bind_vector(m, NAME("ffn_down.bias"), E, false, &N->down_b, err);
}
#undef NAME

static rw_status nh_bind(rw_model *m, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    nemotron *x = calloc(1, sizeof *x); /* owned by m->ext, freed by nh_free */
    if (!x) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    m->ext = x;
    const int L = hp->n_layer;
    const int64_t E = hp->n_embd, D = hp->head_dim_k, H = hp->n_head;
    m->layers = calloc((size_t)L, sizeof *m->layers);     /* freed by rw_model_free */
    x->layer = calloc((size_t)L, sizeof *x->layer);
    uint32_t *ff = malloc(2 * (size_t)L * sizeof *ff);     /* ff, then kv; freed below */
    if (!m->layers || !x->layer || !ff) {
        free(ff);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    uint32_t *kv = ff + L;
    rw_status st = read_pattern(m->g, L, (uint32_t)H, ff, kv, err);
    bool any_mamba = false;
    for (int il = 0; il < L && !st; il++) {
        nh_layer *N = &x->layer[il];
        N->kind = ff[il] ? NH_MLP : kv[il] ? NH_ATTN : NH_MAMBA2;
        any_mamba |= N->kind == NH_MAMBA2;
        if (N->kind == NH_ATTN && kv[il] != (uint32_t)hp->n_head_kv)
            st = rw_errorf(err, RW_ERR_UNSUPPORTED, "attention layers with different KV head counts are not supported");
    }
    /* the ssm.* keys are needed only when a block is Mamba2 */
    if (!st && any_mamba) st = rw_models__mamba2_dims(m->g, A, &x->dims, err);
    if (!st) {
        float scale = 0.0f;
        if (rw_gguf_get_f32(m->g, A ".attention.scale", &scale, NULL) != RW_OK || !isfinite(scale)) scale = 0.0f;
        x->attention_scale = scale != 0.0f ? scale : 1.0f / sqrtf((float)D);
        st = rw_models__bind_common(m, err);
    }
    for (int il = 0; il < L && !st; il++) {
        nh_layer *N = &x->layer[il];
        char n[96];
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", il);
        if ((st = rw_models__bind_vector(m, n, E, true, &m->layers[il].attn_norm, err))) break;
        switch (N->kind) {
        case NH_MAMBA2: st = rw_models__mamba2_bind(m, il, &x->dims, &N->mb, err); break;
        case NH_ATTN: st = bind_attn(m, il, kv[il], &m->layers[il], err); break;
        case NH_MLP: N->ff = ff[il], st = bind_mlp(m, il, N, err); break;
        }
    }
    free(ff);
    if (!st && any_mamba) m->arch_work_floats = rw_models__mamba2_work_floats(&x->dims); /* the Mamba2 mixer's buffers */
    return st;
}

static void add_bias(float *y, const float *b, int64_t n, int64_t dim) {
    if (!b) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < dim; i++) y[t * dim + i] += b[i];
}

/* The MLP over the rows of b: m->sc.xn -> m->sc.tmp, its hidden rows in
 * sc.gate (the scratch holds n_ff = the largest MLP's floats per row). The
 * square of relu as ggml_relu then ggml_sqr (rw_relu_sq): max(v, 0), then one product,
 * exact whatever the order. The block's "none" state advances with it. */
static rw_status mlp(rw_model *m, int il, const nh_layer *N, const rw_models__batch *b, rw_error *err) {
    rw_models__scratch *sc = &m->sc;
    const int64_t n = b->n, F = N->ff;
    rw_status st = rw_models__matmul(&N->up, sc->xn, n, sc->gate, b->pool, err);
    if (st) return st;
    add_bias(sc->gate, N->up_b, n, F);
    rw_relu_sq(sc->gate, n * F);
    if ((st = rw_models__matmul(&N->down, sc->gate, n, sc->tmp, b->pool, err))) return st;
    add_bias(sc->tmp, N->down_b, n, m->hp.n_embd);
    for (int i = 0; i < b->n_seg; i++)
        if ((st = rw_none_state_append(b->seg[i].s->layer[il], b->seg[i].n, err))) return st;
    return RW_OK;
}

static rw_status nh_layer_state(const rw_model *m, int il, rw_kv_type kv_type, int64_t max_ctx, rw_layer_state **out,
                                rw_error *err) {
    const nh_layer *N = &((const nemotron *)m->ext)->layer[il];
    switch (N->kind) {
    case NH_MAMBA2: return rw_mamba2_state_new(&N->mb.params, out, err);
    case NH_ATTN: return rw_kv_state_new(kv_type, m->hp.n_head_kv, m->hp.head_dim_k, m->hp.head_dim_v, max_ctx, out, err);
    case NH_MLP: break;
    }
    return rw_none_state_new(max_ctx, out, err);
}

static rw_status nh_layer_forward(rw_model *m, int il, const rw_models__batch *b, rw_error *err) {
    const rw_models__dense_layer *L = &m->layers[il];
    const nemotron *x = m->ext;
    const nh_layer *N = &x->layer[il];
    rw_models__norm_rows(m, L->attn_norm, b);
    rw_status st;
    switch (N->kind) {
    case NH_MAMBA2: st = rw_models__mamba2(m, il, &N->mb, b, err); break;
    case NH_ATTN: st = rw_models__attention_nopos(m, il, L, b, x->attention_scale, err); break;
    default: st = mlp(m, il, N, b, err); break;
    }
    if (st) return st;
    rw_models__add_residual(m, b);
    return RW_OK;
}

const rw_models__arch rw_models__arch_nemotron_h = {
    .name = A,
    .rope_kind = RW_ROPE_NEOX,
    .qk_norm = false,
    .qkv_bias = false,
    .read_hparams = nh_hparams,
    .bind = nh_bind,
    .layer = nh_layer_forward,
    .new_layer_state = nh_layer_state,
    .free_ext = nh_free,
};
