/* lfm2.c - Liquid LFM2: gated short-convolution layers and GQA attention
 * layers (attention.head_count_kv is a per-layer array, 0 = short conv),
 * SwiGLU FFN on every layer, tied embeddings.
 *
 *   x = embedding
 *   block: x += op(rmsnorm(x) * attn_norm)
 *          x += ffn(rmsnorm(x) * ffn_norm)
 *   logits = token_embd · (rmsnorm(x) * token_embd_norm)
 *
 * The final norm is stored as token_embd_norm.weight (there is no
 * output_norm; llama.cpp reads it as the output norm).
 *
 * Short conv (L = shortconv.l_cache taps):
 *   [B | C | u] = in_proj h            (n_embd rows each, in that order)
 *   v = B * u ; c = causal depthwise conv of v over the last L values (no
 *   bias, no activation) ; out = out_proj (C * c)
 * Attention: q, k, v projections, per-head RMS norm of q and k, RoPE NEOX
 * over the whole head, causal GQA over the KV cache, output projection
 * (the dense attention sublayer, attn.c).
 *
 * Per-sequence state, per short-conv layer: the last L-1 values of v per
 * channel, a "shortconv" recurrent state (cache/shortconv_state.c), so that
 * rewind, snapshots, state files and batching go through the same
 * checkpoints and replay log as the other recurrent layers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model_int.h"

#define A "lfm2"

typedef struct {
    rw_matrix in, out;    /* n_embd -> 3 n_embd, n_embd -> n_embd */
    const float *conv_w;  /* [n_embd][L] */
    rw_rec_params params; /* the layer's recurrence, for its per-sequence states */
} lf_conv;

typedef struct {
    int l_cache;        /* conv taps L */
    bool *is_conv;      /* [n_layer] owned: head_count_kv of the layer is 0 */
    lf_conv *cv;        /* [n_layer] owned; only the conv layers' entries are set */
    float *bcx, *y;     /* the conv sublayer's [n][3 n_embd], [n][n_embd], carved from m->sc.work (carve) */
} lfm2;

static rw_status key_u32(const rw_gguf *g, const char *name, uint32_t *out, rw_error *err) {
    char key[128];
    snprintf(key, sizeof key, A ".%s", name);
    rw_status st = rw_gguf_get_u32(g, key, out, err);
    if (st == RW_ERR_NOT_FOUND) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key %s", key);
    return st;
}

/* head_count_kv of every layer into kv[n_layer]: a per-layer array of
 * exactly n_layer entries, or one value for all layers. */
static rw_status read_kv_heads(const rw_gguf *g, uint32_t n_layer, uint32_t n_head, int64_t *kv, rw_error *err) {
    const char *key = A ".attention.head_count_kv";
    const rw_gguf_value *v = rw_gguf_get(g, key);
    if (!v) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key %s", key);
    if (v->type == RW_GGUF_ARRAY) {
        if (v->arr.n != n_layer)
            return rw_errorf(err, RW_ERR_FORMAT, "%s has %llu entries, block_count is %u", key,
                             (unsigned long long)v->arr.n, n_layer);
        for (uint32_t il = 0; il < n_layer; il++)
            if (!rw_gguf_arr_int(v, il, &kv[il]))
                return rw_errorf(err, RW_ERR_FORMAT, "%s: entry %u is not an integer", key, il);
    } else {
        uint32_t u;
        rw_status st = rw_gguf_get_u32(g, key, &u, err);
        if (st) return st;
        for (uint32_t il = 0; il < n_layer; il++) kv[il] = u;
    }
    for (uint32_t il = 0; il < n_layer; il++)
        if (kv[il] < 0 || kv[il] > n_head || (kv[il] && n_head % kv[il]))
            return rw_errorf(err, RW_ERR_FORMAT, "%s[%u] = %lld must be 0 (short conv) or divide attention.head_count %u",
                             key, il, (long long)kv[il], n_head);
    return RW_OK;
}

static rw_status lf_hparams(const rw_gguf *g, const rw_models__arch *arch, rw_model_hparams *hp, rw_error *err) {
    memset(hp, 0, sizeof *hp);
    snprintf(hp->arch, sizeof hp->arch, "%s", arch->name);
    uint32_t ctx, embd, layers, ff, heads, hd;
    rw_status st;
    if ((st = key_u32(g, "context_length", &ctx, err)) || (st = key_u32(g, "embedding_length", &embd, err)) ||
        (st = key_u32(g, "block_count", &layers, err)) || (st = key_u32(g, "feed_forward_length", &ff, err)) ||
        (st = key_u32(g, "attention.head_count", &heads, err)))
        return st;
    if (embd == 0 || embd > (1u << 20) || layers == 0 || layers > 4096 || ff == 0 || ff > (1u << 20) || heads == 0 ||
        heads > embd || ctx == 0)
        return rw_errorf(err, RW_ERR_FORMAT, "invalid " A " metadata (context %u, embedding %u, layers %u, ffn %u, heads %u)",
                         ctx, embd, layers, ff, heads);
    /* q is projected to n_embd and split into n_head heads */
    hd = embd / heads;
    if (rw_gguf_get(g, A ".attention.key_length") && (st = key_u32(g, "attention.key_length", &hd, err))) return st;
    if (hd == 0 || hd % 2 || (uint64_t)hd * heads != embd)
        return rw_errorf(err, RW_ERR_FORMAT, "invalid " A " head size %u: heads x head size must equal embedding_length %u",
                         hd, embd);
    int64_t *kv = malloc((size_t)layers * sizeof *kv); /* freed below */
    if (!kv) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    int64_t n_kv = 0;
    st = read_kv_heads(g, layers, heads, kv, err);
    for (uint32_t il = 0; !st && il < layers; il++) {
        if (kv[il] && n_kv && kv[il] != n_kv)
            st = rw_errorf(err, RW_ERR_UNSUPPORTED, A ": attention layers with different KV head counts are not supported");
        if (kv[il]) n_kv = kv[il];
    }
    free(kv);
    if (st) return st;
    if ((st = rw_gguf_get_f32(g, A ".attention.layer_norm_rms_epsilon", &hp->rms_eps, err)))
        return st == RW_ERR_NOT_FOUND
                   ? rw_errorf(err, RW_ERR_FORMAT, "missing metadata key " A ".attention.layer_norm_rms_epsilon")
                   : st;
    if (!(hp->rms_eps > 0)) return rw_errorf(err, RW_ERR_FORMAT, "invalid " A ".attention.layer_norm_rms_epsilon");
    hp->rope_base = 10000.0f;
    if (rw_gguf_get(g, A ".rope.freq_base") && (st = rw_gguf_get_f32(g, A ".rope.freq_base", &hp->rope_base, err)))
        return st;
    if (!(hp->rope_base > 0.0f) || hp->rope_base > 1e30f) return rw_errorf(err, RW_ERR_FORMAT, "invalid " A ".rope.freq_base");
    /* LFM2 has no RoPE scaling; a file asking for one is refused, not misread */
    float factor = 1.0f;
    if (rw_gguf_get_f32(g, A ".rope.scaling.factor", &factor, NULL) == RW_OK && factor != 0.0f && factor != 1.0f)
        return rw_errorf(err, RW_ERR_UNSUPPORTED, A ".rope.scaling.factor = %g is not supported", factor);
    hp->n_ctx_train = ctx;
    hp->n_embd = (int)embd;
    hp->n_layer = (int)layers;
    hp->n_ff = (int)ff;
    hp->n_head = (int)heads;
    hp->n_head_kv = (int)(n_kv ? n_kv : heads); /* the KV cache's head count (no attention layer: unused) */
    hp->head_dim_k = hp->head_dim_v = (int)hd;
    hp->n_rot = (int)hd;
    hp->rope_freq_scale = 1.0f;
    hp->rope_kind = RW_ROPE_NEOX;
    return RW_OK;
}

static void lf_free(rw_model *m) {
    lfm2 *x = m->ext;
    if (!x) return;
    free(x->is_conv);
    free(x->cv);
    free(x);
    m->ext = NULL;
}

static rw_status bind_conv_w(const rw_model *m, const char *name, uint64_t L, uint64_t C, const float **out,
                             rw_error *err) {
    const rw_gguf_tensor *t = rw_gguf_find_tensor(m->g, name);
    if (!t) return rw_errorf(err, RW_ERR_FORMAT, "missing tensor %s", name);
    if (t->type != RW_TYPE_F32 || t->n_dims != 2 || t->ne[0] != L || t->ne[1] != C)
        return rw_errorf(err, RW_ERR_FORMAT, "tensor %s must be F32 {%llu, %llu}", name, (unsigned long long)L,
                         (unsigned long long)C);
    *out = t->data;
    return RW_OK;
}

static rw_status lf_bind(rw_model *m, rw_error *err) {
    const rw_model_hparams *hp = &m->hp;
    lfm2 *x = calloc(1, sizeof *x);
    if (!x) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    m->ext = x; /* owned by m from here: lf_free */
    uint32_t lc;
    rw_status st;
    if ((st = key_u32(m->g, "shortconv.l_cache", &lc, err))) return st;
    if (lc < 2 || lc > 64) return rw_errorf(err, RW_ERR_FORMAT, "invalid " A ".shortconv.l_cache = %u (2..64)", lc);
    x->l_cache = (int)lc;
    if ((st = rw_models__bind_common(m, err))) return st;
    const int L = hp->n_layer;
    const int64_t E = hp->n_embd, H = hp->n_head, D = hp->head_dim_k;
    int64_t *kv = malloc((size_t)L * sizeof *kv); /* freed below */
    m->layers = calloc((size_t)L, sizeof *m->layers);
    x->is_conv = calloc((size_t)L, sizeof *x->is_conv);
    x->cv = calloc((size_t)L, sizeof *x->cv);
    if (!kv || !m->layers || !x->is_conv || !x->cv) {
        free(kv);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    if ((st = read_kv_heads(m->g, (uint32_t)L, (uint32_t)H, kv, err))) {
        free(kv);
        return st;
    }
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    for (int il = 0; il < L && !st; il++) {
        rw_models__dense_layer *Ld = &m->layers[il];
        x->is_conv[il] = kv[il] == 0;
        if ((st = rw_models__bind_vector(m, NAME("attn_norm.weight"), E, true, &Ld->attn_norm, err)) ||
            (st = rw_models__bind_vector(m, NAME("ffn_norm.weight"), E, true, &Ld->ffn_norm, err)) ||
            (st = rw_models__bind_matrix(m, NAME("ffn_gate.weight"), E, hp->n_ff, true, &Ld->ffn_gate, err)) ||
            (st = rw_models__bind_matrix(m, NAME("ffn_up.weight"), E, hp->n_ff, true, &Ld->ffn_up, err)) ||
            (st = rw_models__bind_matrix(m, NAME("ffn_down.weight"), hp->n_ff, E, true, &Ld->ffn_down, err)))
            break;
        if (x->is_conv[il]) {
            lf_conv *c = &x->cv[il];
            if ((st = rw_models__bind_matrix(m, NAME("shortconv.in_proj.weight"), E, 3 * E, true, &c->in, err)) ||
                (st = rw_models__bind_matrix(m, NAME("shortconv.out_proj.weight"), E, E, true, &c->out, err)) ||
                (st = bind_conv_w(m, NAME("shortconv.conv.weight"), (uint64_t)x->l_cache, (uint64_t)E, &c->conv_w, err)))
                break;
            c->params = (rw_rec_params){.conv_channels = (int)E, .conv_kernel = x->l_cache, .conv_w = c->conv_w};
        } else {
            if ((st = rw_models__bind_matrix(m, NAME("attn_q.weight"), E, H * D, true, &Ld->wq, err)) ||
                (st = rw_models__bind_matrix(m, NAME("attn_k.weight"), E, kv[il] * D, true, &Ld->wk, err)) ||
                (st = rw_models__bind_matrix(m, NAME("attn_v.weight"), E, kv[il] * D, true, &Ld->wv, err)) ||
                (st = rw_models__bind_matrix(m, NAME("attn_output.weight"), H * D, E, true, &Ld->wo, err)) ||
                (st = rw_models__bind_vector(m, NAME("attn_q_norm.weight"), D, true, &Ld->q_norm, err)) ||
                (st = rw_models__bind_vector(m, NAME("attn_k_norm.weight"), D, true, &Ld->k_norm, err)))
                break;
        }
    }
#undef NAME
    free(kv);
    if (!st) m->arch_work_floats = 4 * E; /* the conv sublayer's buffers (carve) */
    return st;
}

/* Points the conv buffers into m->sc.work (model_int.h), which
 * rw_models__scratch_reserve sized for n rows of m->arch_work_floats; they
 * overlap the attention and FFN buffers, dead once the sublayer wrote sc.tmp. */
static rw_status carve(rw_model *m, int64_t n, rw_error *err) {
    lfm2 *x = m->ext;
    rw_status st = rw_models__work_ready(m, n, "short conv layer", err);
    if (st) return st;
    x->bcx = m->sc.work;
    x->y = x->bcx + m->sc.n_cap * 3 * m->hp.n_embd;
    return RW_OK;
}

static rw_status short_conv(rw_model *m, int il, const rw_models__batch *bt, rw_error *err) {
    lfm2 *x = m->ext;
    const lf_conv *c = &x->cv[il];
    const int64_t n = bt->n, E = m->hp.n_embd, W = 3 * E;
    rw_status st = rw_models__matmul(&c->in, m->sc.xn, n, x->bcx, bt->pool, err);
    if (st) return st;
    /* v = B * u, written over B: the conv's input, logged by the state */
    for (int64_t t = 0; t < n; t++) {
        float *b = x->bcx + t * W;
        const float *u = b + 2 * E;
        for (int64_t i = 0; i < E; i++) b[i] *= u[i];
    }
    /* the conv runs in each sequence's state (cache/shortconv_state.c) */
    if ((st = rw_models__rec_append(bt, il, x->bcx, W, x->y, E, err))) return st;
    for (int64_t t = 0; t < n; t++) {
        const float *cg = x->bcx + t * W + E;
        float *y = x->y + t * E;
        for (int64_t i = 0; i < E; i++) y[i] = cg[i] * y[i];
    }
    return rw_models__matmul(&c->out, x->y, n, m->sc.tmp, bt->pool, err);
}

static rw_status lf_layer_state(const rw_model *m, int il, rw_kv_type kv_type, int64_t max_ctx,
                                rw_layer_state **out, rw_error *err) {
    const lfm2 *x = m->ext;
    if (x->is_conv[il]) return rw_shortconv_state_new(&x->cv[il].params, out, err);
    return rw_kv_state_new(kv_type, m->hp.n_head_kv, m->hp.head_dim_k, m->hp.head_dim_v, max_ctx, out, err);
}

static rw_status lf_layer(rw_model *m, int il, const rw_models__batch *b, rw_error *err) {
    const rw_models__dense_layer *L = &m->layers[il];
    const lfm2 *x = m->ext;
    rw_status st = carve(m, b->n, err);
    if (st) return st;
    rw_models__norm_rows(m, L->attn_norm, b);
    st = x->is_conv[il] ? short_conv(m, il, b, err) : rw_models__attention(m, il, L, b, err);
    if (st) return st;
    rw_models__add_residual(m, b);
    rw_models__norm_rows(m, L->ffn_norm, b);
    if ((st = rw_models__ffn_swiglu(m, L, b, err))) return st;
    rw_models__add_residual(m, b);
    return RW_OK;
}

const rw_models__arch rw_models__arch_lfm2 = {
    .name = A,
    .rope_kind = RW_ROPE_NEOX,
    .qk_norm = true,
    .qkv_bias = false,
    .output_norm = "token_embd_norm.weight",
    .read_hparams = lf_hparams,
    .bind = lf_bind,
    .layer = lf_layer,
    .new_layer_state = lf_layer_state,
    .free_ext = lf_free,
};
