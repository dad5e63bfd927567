/* granite.c - Granite-4.0-H style hybrids (granitehybrid): Mamba2 layers
 * and attention layers (attention.head_count_kv is a per-layer array, 0 =
 * Mamba2), no positional encoding, scaled embeddings, residuals and logits.
 *
 *   x = embedding * embedding_scale
 *   block: x += residual_scale * mixer(rmsnorm(x) * attn_norm)
 *          x += residual_scale * ffn(rmsnorm(x) * ffn_norm)
 *   logits = head(rmsnorm(x) * output_norm) / logit_scale
 *
 * Mamba2 (per token in order; matmuls over the whole call):
 *   [z | xBC | dt] = ssm_in x; xBC = silu(causal conv of xBC, with bias)
 *   x, B, C = xBC split (d_inner, groups*d_state, groups*d_state)
 *   y = ssm scan (head h: dt = softplus(dt + dt_bias), state = state*exp(dt*A)
 *       + dt*x*B^T, y = state C + D x; group of head h = h / (heads/groups))
 *   y = grouped rmsnorm(y * silu(z)) * ssm_norm; out = ssm_out y
 * Attention: q, k, v, output projections, no RoPE, no q/k norm, scale
 * attention.scale, causal GQA over the KV cache.
 *
 * Per-sequence recurrent state, per Mamba2 layer: conv [C][Kc-1] (the
 * layout of kernels/ops.h's conv), then ssm [heads][head_dim][d_state]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/ops_model.h"
#include "models/model_int.h"

#define A "granitehybrid"

typedef struct {
    rw_matrix in, out;
    const float *conv_w, *conv_b; /* [C][Kc], [C] */
    const float *dt_bias, *a, *d; /* [heads] */
    const float *norm;            /* [groups][d_inner/groups] */
    rw_rec_params params;         /* the layer's recurrence, for its per-sequence states */
} gr_mamba;

typedef struct {
    int kc, ds, groups, heads, d_inner, hd;
    int64_t conv_ch, in_w;   /* conv channels (d_inner + 2*groups*ds), ssm_in rows */
    float residual_scale, attention_scale;
    int n_mamba;
    int *mamba_of;           /* [n_layer]: index among Mamba2 layers, or -1 */
    gr_mamba *mb;            /* [n_layer] */
    float *zxbcdt, *y; /* the Mamba2 sublayer's [n][in_w], [n][d_inner], carved from m->sc.work (carve) */
} granite;

static rw_status key_u32(const rw_gguf *g, const char *name, uint32_t *out, rw_error *err) {
    char key[128];
    snprintf(key, sizeof key, A ".%s", name);
    rw_status st = rw_gguf_get_u32(g, key, out, err);
    if (st == RW_ERR_NOT_FOUND) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key %s", key);
    return st;
}

static float key_f32(const rw_gguf *g, const char *name, float def) {
    char key[128];
    float v;
    snprintf(key, sizeof key, A ".%s", name);
    return rw_gguf_get_f32(g, key, &v, NULL) == RW_OK && isfinite(v) ? v : def;
}

/* head_count_kv of layer il: a per-layer array or one value for all. */
static int64_t kv_heads(const rw_gguf *g, int il) {
    const rw_gguf_value *v = rw_gguf_get(g, A ".attention.head_count_kv");
    int64_t x = -1;
    if (!v) return -1;
    if (v->type == RW_GGUF_ARRAY) return rw_gguf_arr_int(v, (uint64_t)il, &x) ? x : -1;
    uint32_t u;
    return rw_gguf_get_u32(g, A ".attention.head_count_kv", &u, NULL) == RW_OK ? (int64_t)u : -1;
}

static rw_status gr_hparams(const rw_gguf *g, const mdl_arch *arch, rw_model_hparams *hp, rw_error *err) {
    memset(hp, 0, sizeof *hp);
    snprintf(hp->arch, sizeof hp->arch, "%s", arch->name);
    uint32_t ctx, embd, layers, ff, heads, hdk, hdv;
    rw_status st;
    if ((st = key_u32(g, "context_length", &ctx, err)) || (st = key_u32(g, "embedding_length", &embd, err)) ||
        (st = key_u32(g, "block_count", &layers, err)) || (st = key_u32(g, "feed_forward_length", &ff, err)) ||
        (st = key_u32(g, "attention.head_count", &heads, err)))
        return st;
    if (embd == 0 || embd > (1u << 20) || layers == 0 || layers > 4096 || ff == 0 || ff > (1u << 20) || heads == 0 ||
        heads > embd || ctx == 0)
        return rw_errorf(err, RW_ERR_FORMAT, "invalid " A " metadata (embedding %u, layers %u, ffn %u, heads %u)", embd,
                         layers, ff, heads);
    if (key_u32(g, "attention.key_length", &hdk, NULL)) hdk = embd / heads;
    if (key_u32(g, "attention.value_length", &hdv, NULL)) hdv = hdk;
    int64_t max_kv = 0;
    for (uint32_t il = 0; il < layers; il++) {
        int64_t k = kv_heads(g, (int)il);
        if (k < 0 || k > heads || (k && heads % k))
            return rw_errorf(err, RW_ERR_FORMAT, A ".attention.head_count_kv is missing or invalid for layer %u", il);
        if (k > max_kv) max_kv = k;
    }
    if (hdk == 0 || hdk > 4096 || hdv == 0 || hdv > 4096)
        return rw_errorf(err, RW_ERR_FORMAT, "invalid " A " head sizes %u / %u", hdk, hdv);
    if (rw_gguf_get_f32(g, A ".attention.layer_norm_rms_epsilon", &hp->rms_eps, err)) return err->code;
    if (!(hp->rms_eps > 0)) return rw_errorf(err, RW_ERR_FORMAT, "invalid " A ".attention.layer_norm_rms_epsilon");
    hp->n_ctx_train = ctx;
    hp->n_embd = (int)embd;
    hp->n_layer = (int)layers;
    hp->n_ff = (int)ff;
    hp->n_head = (int)heads;
    hp->n_head_kv = (int)(max_kv ? max_kv : heads); /* the KV cache's head count */
    hp->head_dim_k = (int)hdk;
    hp->head_dim_v = (int)hdv;
    hp->n_rot = 2; /* no RoPE is applied; a minimal rotary cache keeps forward.c generic */
    hp->rope_base = 10000.0f;
    hp->rope_freq_scale = 1.0f;
    hp->rope_kind = RW_ROPE_NEOX;
    hp->embedding_scale = key_f32(g, "embedding_scale", 1.0f);
    hp->logit_scale = key_f32(g, "logit_scale", 1.0f);
    return RW_OK;
}

static void gr_free(rw_model *m) {
    granite *x = m->ext;
    if (!x) return;
    free(x->mamba_of);
    free(x->mb);
    free(x);
    m->ext = NULL;
}

static rw_status bind_f32(const rw_model *m, const char *name, uint64_t ne0, uint64_t ne1, const float **out, rw_error *err) {
    const rw_gguf_tensor *t = rw_gguf_find_tensor(m->g, name);
    if (!t) return rw_errorf(err, RW_ERR_FORMAT, "missing tensor %s", name);
    if (t->type != RW_TYPE_F32 || t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return rw_errorf(err, RW_ERR_FORMAT, "tensor %s must be F32 {%llu, %llu}", name, (unsigned long long)ne0,
                         (unsigned long long)ne1);
    *out = t->data;
    return RW_OK;
}

static rw_status gr_bind(rw_model *m, rw_error *err) {
    rw_model_hparams *hp = &m->hp;
    granite *x = calloc(1, sizeof *x);
    if (!x) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    m->ext = x;
    uint32_t kc, ds, groups, heads, inner;
    rw_status st;
    if ((st = key_u32(m->g, "ssm.conv_kernel", &kc, err)) || (st = key_u32(m->g, "ssm.state_size", &ds, err)) ||
        (st = key_u32(m->g, "ssm.group_count", &groups, err)) || (st = key_u32(m->g, "ssm.time_step_rank", &heads, err)) ||
        (st = key_u32(m->g, "ssm.inner_size", &inner, err)))
        return st;
    if (kc < 1 || kc > 64 || ds == 0 || ds > 4096 || groups == 0 || heads == 0 || heads % groups || inner == 0 ||
        inner % heads || inner % groups || inner > (1u << 20))
        return rw_errorf(err, RW_ERR_FORMAT, "invalid " A " ssm metadata (conv %u, state %u, groups %u, heads %u, inner %u)",
                         kc, ds, groups, heads, inner);
    x->kc = (int)kc, x->ds = (int)ds, x->groups = (int)groups, x->heads = (int)heads, x->d_inner = (int)inner;
    x->hd = (int)(inner / heads);
    x->conv_ch = (int64_t)inner + 2 * (int64_t)groups * ds;
    x->in_w = (int64_t)inner + x->conv_ch + heads;
    x->residual_scale = key_f32(m->g, "residual_scale", 1.0f);
    x->attention_scale = key_f32(m->g, "attention.scale", 0.0f);
    if (x->attention_scale == 0.0f) x->attention_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    if ((st = rw_models__bind_common(m, err))) return st;
    const int L = hp->n_layer;
    const int64_t E = hp->n_embd, D = hp->head_dim_k, Dv = hp->head_dim_v, H = hp->n_head;
    m->layers = calloc((size_t)L, sizeof *m->layers);
    x->mamba_of = malloc((size_t)L * sizeof *x->mamba_of);
    x->mb = calloc((size_t)L, sizeof *x->mb);
    if (!m->layers || !x->mamba_of || !x->mb) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    for (int il = 0; il < L && !st; il++) {
        mdl_dense_layer *Ld = &m->layers[il];
        const int64_t hkv = kv_heads(m->g, il);
        x->mamba_of[il] = hkv == 0 ? x->n_mamba++ : -1;
        if ((st = rw_models__bind_vector(m, NAME("attn_norm.weight"), E, true, &Ld->attn_norm, err)) ||
            (st = rw_models__bind_vector(m, NAME("ffn_norm.weight"), E, true, &Ld->ffn_norm, err)) ||
            (st = rw_models__bind_matrix(m, NAME("ffn_gate.weight"), E, hp->n_ff, true, &Ld->ffn_gate, err)) ||
            (st = rw_models__bind_matrix(m, NAME("ffn_up.weight"), E, hp->n_ff, true, &Ld->ffn_up, err)) ||
            (st = rw_models__bind_matrix(m, NAME("ffn_down.weight"), hp->n_ff, E, true, &Ld->ffn_down, err)))
            break;
        if (hkv == 0) {
            gr_mamba *M = &x->mb[il];
            if ((st = rw_models__bind_matrix(m, NAME("ssm_in.weight"), E, x->in_w, true, &M->in, err)) ||
                (st = rw_models__bind_matrix(m, NAME("ssm_out.weight"), x->d_inner, E, true, &M->out, err)) ||
                (st = bind_f32(m, NAME("ssm_conv1d.weight"), (uint64_t)x->kc, (uint64_t)x->conv_ch, &M->conv_w, err)) ||
                (st = bind_f32(m, NAME("ssm_conv1d.bias"), (uint64_t)x->conv_ch, 1, &M->conv_b, err)) ||
                (st = bind_f32(m, NAME("ssm_dt.bias"), (uint64_t)x->heads, 1, &M->dt_bias, err)) ||
                (st = bind_f32(m, NAME("ssm_a"), 1, (uint64_t)x->heads, &M->a, err)) ||
                (st = bind_f32(m, NAME("ssm_d"), 1, (uint64_t)x->heads, &M->d, err)) ||
                (st = bind_f32(m, NAME("ssm_norm.weight"), (uint64_t)(x->d_inner / x->groups), (uint64_t)x->groups,
                               &M->norm, err)))
                break;
            M->params = (rw_rec_params){.conv_channels = (int)x->conv_ch, .conv_kernel = x->kc, .conv_w = M->conv_w,
                                        .conv_b = M->conv_b, .eps = hp->rms_eps, .heads = x->heads,
                                        .groups = x->groups, .head_dim = x->hd, .d_state = x->ds,
                                        .dt_bias = M->dt_bias, .a = M->a, .d = M->d};
        } else {
            if (hkv != hp->n_head_kv) {
                st = rw_errorf(err, RW_ERR_UNSUPPORTED, "attention layers with different KV head counts are not supported");
                break;
            }
            if ((st = rw_models__bind_matrix(m, NAME("attn_q.weight"), E, H * D, true, &Ld->wq, err)) ||
                (st = rw_models__bind_matrix(m, NAME("attn_k.weight"), E, hkv * D, true, &Ld->wk, err)) ||
                (st = rw_models__bind_matrix(m, NAME("attn_v.weight"), E, hkv * Dv, true, &Ld->wv, err)) ||
                (st = rw_models__bind_matrix(m, NAME("attn_output.weight"), H * Dv, E, true, &Ld->wo, err)))
                break;
        }
    }
#undef NAME
    if (!st) m->arch_work_floats = x->in_w + x->d_inner; /* the Mamba2 sublayer's buffers (carve) */
    return st;
}

/* Points the Mamba2 buffers into m->sc.work (model_int.h), which
 * rw_models__scratch_reserve sized for n rows of m->arch_work_floats; they
 * overlap the attention and FFN buffers, dead once the sublayer wrote sc.tmp. */
static rw_status carve(rw_model *m, int64_t n, rw_error *err) {
    granite *x = m->ext;
    rw_status st = rw_models__work_ready(m, n, "Mamba2 layer", err);
    if (st) return st;
    x->zxbcdt = m->sc.work;
    x->y = x->zxbcdt + m->sc.n_cap * x->in_w;
    return RW_OK;
}

static rw_status mamba2(rw_model *m, int il, const mdl_batch *bt, rw_error *err) {
    granite *x = m->ext;
    const gr_mamba *M = &x->mb[il];
    const int64_t n = bt->n, W = x->in_w, DI = x->d_inner;
    rw_status st = mdl_matmul(&M->in, m->sc.xn, n, x->zxbcdt, bt->pool, err);
    if (st) return st;
    /* conv and scan run in each sequence's state (cache/mamba2_state.c) on
     * the rows' [xBC | dt] slices */
    if ((st = rw_models__rec_append(bt, il, x->zxbcdt + DI, W, x->y, DI, err))) return st;
    for (int64_t t = 0; t < n; t++) {
        float *z = x->zxbcdt + t * W, *y = x->y + t * DI;
        rw_swiglu(z, y, DI); /* z <- silu(z) * y */
        rw_rmsnorm_groups(z, M->norm, DI / x->groups, x->groups, (int)(DI / x->groups), m->hp.rms_eps, y);
    }
    return mdl_matmul(&M->out, x->y, n, m->sc.tmp, bt->pool, err);
}

static rw_status attention(rw_model *m, int il, const mdl_batch *b, rw_error *err) {
    const granite *x = m->ext;
    const rw_model_hparams *hp = &m->hp;
    const mdl_dense_layer *L = &m->layers[il];
    mdl_scratch *sc = &m->sc;
    const int64_t n = b->n, H = hp->n_head, D = hp->head_dim_k, Dv = hp->head_dim_v;
    rw_status st;
    if ((st = mdl_matmul(&L->wq, sc->xn, n, sc->q, b->pool, err)) ||
        (st = mdl_matmul(&L->wk, sc->xn, n, sc->k, b->pool, err)) ||
        (st = mdl_matmul(&L->wv, sc->xn, n, sc->v, b->pool, err)))
        return st;
    if ((st = rw_models__attend(m, il, b, sc->q, H * D, sc->k, hp->n_head_kv * D, sc->v, hp->n_head_kv * Dv,
                         x->attention_scale, sc->att, err)))
        return st;
    return mdl_matmul(&L->wo, sc->att, n, sc->tmp, b->pool, err);
}

/* x += residual_scale * tmp (the scale rounded onto tmp first, as ggml_scale then add) */
static void add_scaled(rw_model *m, int64_t n) {
    const float rs = ((granite *)m->ext)->residual_scale;
    const int64_t total = n * m->hp.n_embd;
    for (int64_t i = 0; i < total; i++) m->sc.x[i] += m->sc.tmp[i] * rs;
}

static rw_status gr_layer_state(const rw_model *m, int il, rw_kv_type kv_type, int64_t max_ctx,
                                rw_layer_state **out, rw_error *err) {
    const granite *x = m->ext;
    if (x->mamba_of[il] >= 0) return rw_mamba2_state_new(&x->mb[il].params, out, err);
    return rw_kv_state_new(kv_type, m->hp.n_head_kv, m->hp.head_dim_k, m->hp.head_dim_v, max_ctx, out, err);
}

static rw_status gr_layer(rw_model *m, int il, const mdl_batch *b, rw_error *err) {
    const mdl_dense_layer *L = &m->layers[il];
    granite *x = m->ext;
    rw_status st = carve(m, b->n, err);
    if (st) return st;
    rw_models__norm_rows(m, L->attn_norm, b->n);
    st = x->mamba_of[il] >= 0 ? mamba2(m, il, b, err) : attention(m, il, b, err);
    if (st) return st;
    add_scaled(m, b->n);
    rw_models__norm_rows(m, L->ffn_norm, b->n);
    if ((st = rw_models__ffn_swiglu(m, L, b, err))) return st;
    add_scaled(m, b->n);
    return RW_OK;
}

const mdl_arch rw_models__arch_granitehybrid = {
    .name = A,
    .rope_kind = RW_ROPE_NEOX,
    .qk_norm = false,
    .qkv_bias = false,
    .read_hparams = gr_hparams,
    .bind = gr_bind,
    .layer = gr_layer,
    .new_layer_state = gr_layer_state,
    .free_ext = gr_free,
};
