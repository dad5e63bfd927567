/* granite.c - Granite-4.0-H style hybrids (granitehybrid): Mamba2 layers
 * and attention layers (attention.head_count_kv is a per-layer array, 0 =
 * Mamba2), no positional encoding, scaled embeddings, residuals and logits.
 *
 *   x = embedding * embedding_scale
 *   block: x += residual_scale * mixer(rmsnorm(x) * attn_norm)
 *          x += residual_scale * ffn(rmsnorm(x) * ffn_norm)
 * ffn: SwiGLU, or with expert_count (Granite-4.0-H-Tiny/Small) a mixture
 * of experts with an ungated shared expert (model_int.h's rw_models__moe).
 *   logits = head(rmsnorm(x) * output_norm) / logit_scale
 *
 * Mamba2: models/mamba2.c (shared with nemotron_h).
 * Attention: q, k, v, output projections, no RoPE, no q/k norm, scale
 * attention.scale, causal GQA over the KV cache.
 *
 * Per-sequence recurrent state, per Mamba2 layer: conv [C][Kc-1] (the
 * layout of kernels/ops.h's conv), then ssm [heads][head_dim][d_state]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model_int.h"

#define A "granitehybrid"

typedef struct {
    rw_models__mamba2_shape dims;
    float residual_scale, attention_scale;
    int n_mamba;
    int *mamba_of;           /* [n_layer]: index among Mamba2 layers, or -1 */
    uint32_t *kv_heads;      /* [n_layer]: attention.head_count_kv, 0 = Mamba2 */
    rw_models__mamba2_layer *mb;          /* [n_layer] (attention layers unused) */
    rw_models__moe *moe;            /* [n_layer] when the file has experts (Granite-4.0-H-Tiny/Small), else NULL */
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

static rw_status gr_hparams(const rw_gguf *g, const rw_models__arch *arch, rw_model_hparams *hp, rw_error *err) {
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
    uint32_t *kv = malloc(layers * sizeof *kv); /* freed below */
    if (!kv) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    st = rw_models__per_layer_u32(g, A, "attention.head_count_kv", (int)layers, true, 0, kv, err);
    int64_t max_kv = 0;
    for (uint32_t il = 0; il < layers && !st; il++) {
        const uint32_t k = kv[il];
        if (k > heads || (k && heads % k))
            st = rw_errorf(err, RW_ERR_FORMAT, A ".attention.head_count_kv is invalid for layer %u", il);
        if (k > max_kv) max_kv = k;
    }
    free(kv);
    if (st) return st;
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
    free(x->kv_heads);
    free(x->mb);
    free(x->moe);
    free(x);
    m->ext = NULL;
}

static rw_status gr_bind(rw_model *m, rw_error *err) {
    rw_model_hparams *hp = &m->hp;
    granite *x = calloc(1, sizeof *x);
    if (!x) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    m->ext = x;
    rw_status st = rw_models__mamba2_dims(m->g, A, &x->dims, err);
    if (st) return st;
    x->residual_scale = key_f32(m->g, "residual_scale", 1.0f);
    x->attention_scale = key_f32(m->g, "attention.scale", 0.0f);
    if (x->attention_scale == 0.0f) x->attention_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    if ((st = rw_models__bind_common(m, err))) return st;
    const int L = hp->n_layer;
    const int64_t E = hp->n_embd, D = hp->head_dim_k, Dv = hp->head_dim_v, H = hp->n_head;
    m->layers = calloc((size_t)L, sizeof *m->layers);
    x->mamba_of = malloc((size_t)L * sizeof *x->mamba_of);
    x->kv_heads = malloc((size_t)L * sizeof *x->kv_heads);
    x->mb = calloc((size_t)L, sizeof *x->mb);
    if (!m->layers || !x->mamba_of || !x->kv_heads || !x->mb) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    if ((st = rw_models__per_layer_u32(m->g, A, "attention.head_count_kv", L, true, 0, x->kv_heads, err))) return st;
    /* experts: softmax routing, renormalised top-k, an ungated shared expert */
    uint32_t ne = 0, nu = 0, fe = (uint32_t)hp->n_ff, fs = 0;
    if (key_u32(m->g, "expert_count", &ne, NULL) == RW_OK && ne > 0) {
        if ((st = key_u32(m->g, "expert_used_count", &nu, err))) return st;
        (void)key_u32(m->g, "expert_feed_forward_length", &fe, NULL);
        (void)key_u32(m->g, "expert_shared_feed_forward_length", &fs, NULL);
        if (ne > 4096 || nu == 0 || nu > ne || fe == 0 || fe > (1u << 20) || fs > (1u << 20))
            return rw_errorf(err, RW_ERR_FORMAT, "invalid MoE metadata (experts %u, used %u, widths %u / %u)", ne, nu,
                             fe, fs);
        if (!(x->moe = calloc((size_t)L, sizeof *x->moe))) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    for (int il = 0; il < L && !st; il++) {
        rw_models__dense_layer *Ld = &m->layers[il];
        const int64_t hkv = x->kv_heads[il];
        x->mamba_of[il] = hkv == 0 ? x->n_mamba++ : -1;
        if ((st = rw_models__bind_vector(m, NAME("attn_norm.weight"), E, true, &Ld->attn_norm, err)) ||
            (st = rw_models__bind_vector(m, NAME("ffn_norm.weight"), E, true, &Ld->ffn_norm, err)))
            break;
        if (x->moe) {
            x->moe[il] = (rw_models__moe){.n_expert = (int)ne, .n_used = (int)nu, .ff_exp = (int)fe, .ff_shexp = (int)fs};
            if ((st = rw_models__bind_moe(m, il, false, &x->moe[il], err))) break;
        } else if ((st = rw_models__bind_matrix(m, NAME("ffn_gate.weight"), E, hp->n_ff, true, &Ld->ffn_gate, err)) ||
                   (st = rw_models__bind_matrix(m, NAME("ffn_up.weight"), E, hp->n_ff, true, &Ld->ffn_up, err)) ||
                   (st = rw_models__bind_matrix(m, NAME("ffn_down.weight"), hp->n_ff, E, true, &Ld->ffn_down, err)))
            break;
        if (hkv == 0) {
            if ((st = rw_models__mamba2_bind(m, il, &x->dims, &x->mb[il], err))) break;
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
    if (!st) m->arch_work_floats = rw_models__mamba2_work_floats(&x->dims); /* the Mamba2 mixer's buffers */
    if (!st && x->moe && rw_models__moe_work_floats(&x->moe[0], E) > m->arch_work_floats)
        m->arch_work_floats = rw_models__moe_work_floats(&x->moe[0], E);
    return st;
}

/* x += residual_scale * tmp (the scale rounded onto tmp first, as ggml_scale then add) */
static void add_scaled_rows(void *ctx, int64_t r0, int64_t r1) {
    rw_model *m = ctx;
    const float rs = ((granite *)m->ext)->residual_scale;
    const int64_t e = m->hp.n_embd;
    for (int64_t i = r0 * e; i < r1 * e; i++) m->sc.x[i] += m->sc.tmp[i] * rs;
}

static void add_scaled(rw_model *m, const rw_models__batch *b) {
    rw_threadpool_rows(b->pool, b->n, 64, add_scaled_rows, m);
}

static rw_status gr_layer_state(const rw_model *m, int il, rw_kv_type kv_type, int64_t max_ctx,
                                rw_layer_state **out, rw_error *err) {
    const granite *x = m->ext;
    if (x->mamba_of[il] >= 0) return rw_mamba2_state_new(&x->mb[il].params, out, err);
    return rw_kv_state_new(kv_type, m->hp.n_head_kv, m->hp.head_dim_k, m->hp.head_dim_v, max_ctx, out, err);
}

static rw_status gr_layer(rw_model *m, int il, const rw_models__batch *b, rw_error *err) {
    const rw_models__dense_layer *L = &m->layers[il];
    const granite *x = m->ext;
    rw_models__norm_rows(m, L->attn_norm, b);
    rw_status st = x->mamba_of[il] >= 0 ? rw_models__mamba2(m, il, &x->mb[il], b, err)
                                        : rw_models__attention_nopos(m, il, L, b, x->attention_scale, err);
    if (st) return st;
    add_scaled(m, b);
    rw_models__norm_rows(m, L->ffn_norm, b);
    st = x->moe ? rw_models__moe_ffn(m, &x->moe[il], b, err) : rw_models__ffn_swiglu(m, L, b, err);
    if (st) return st;
    add_scaled(m, b);
    return RW_OK;
}

const rw_models__arch rw_models__arch_granitehybrid = {
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
