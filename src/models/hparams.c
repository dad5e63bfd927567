/* hparams.c - reads and validates the hyperparameters of a dense
 * transformer ("<arch>.*" keys, as llama.cpp's converter writes them). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/model_int.h"

#define MAX_LAYERS 4096
#define MAX_DIM (1 << 20)

/* Reads "<arch>.<name>" as u32 into *out; when absent, uses def if
 * optional, else fails naming the key. */
static rw_status get_u32(const rw_gguf *g, const char *arch, const char *name, bool required, uint32_t def,
                         uint32_t *out, rw_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    if (!rw_gguf_get(g, key)) {
        if (required) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key %s", key);
        *out = def;
        return RW_OK;
    }
    return rw_gguf_get_u32(g, key, out, err);
}

static rw_status get_f32(const rw_gguf *g, const char *arch, const char *name, bool required, float def,
                         float *out, rw_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    if (!rw_gguf_get(g, key)) {
        if (required) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key %s", key);
        *out = def;
        return RW_OK;
    }
    rw_status st = rw_gguf_get_f32(g, key, out, err);
    if (st == RW_OK && !isfinite(*out)) return rw_errorf(err, RW_ERR_FORMAT, "metadata key %s is not finite", key);
    return st;
}

static rw_status bad(rw_error *err, const char *arch, const char *name, const char *why, long long v) {
    return rw_errorf(err, RW_ERR_FORMAT, "invalid metadata %s.%s = %lld: %s", arch, name, v, why);
}

/* YaRN's correction dimension of a rotation count (ggml_rope_yarn_corr_dim). */
static float yarn_corr_dim(int n_dims, float n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

/* YaRN as llama.cpp sets it up from the file: ext_factor 1, the attention
 * factor get_mscale(factor) with the rope's own (1 + 0.1 ln factor)
 * cancelled (so cos and sin end up times 1 + 0.1 ln factor), the ramp's
 * ends from the original context and beta fast / slow. */
static rw_status read_yarn(const rw_gguf *g, const char *a, float factor, rw_model_hparams *hp, rw_error *err) {
    float n_orig = 0.0f, beta_fast, beta_slow, attn, log_mul;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", a);
    if (rw_gguf_get(g, key)) {
        uint32_t u;
        rw_status st = rw_gguf_get_u32(g, key, &u, err);
        if (st) return st;
        n_orig = (float)u;
    }
    rw_status st;
    if ((st = get_f32(g, a, "rope.scaling.yarn_beta_fast", false, 32.0f, &beta_fast, err)) ||
        (st = get_f32(g, a, "rope.scaling.yarn_beta_slow", false, 1.0f, &beta_slow, err)) ||
        (st = get_f32(g, a, "rope.scaling.attn_factor", false, 1.0f, &attn, err)) ||
        (st = get_f32(g, a, "rope.scaling.yarn_log_multiplier", false, 0.0f, &log_mul, err)))
        return st;
    if (log_mul != 0.0f)
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "%s.rope.scaling.yarn_log_multiplier is not supported", a);
    if (n_orig <= 0.0f) n_orig = (float)hp->n_ctx_train;
    const float get_mscale = 0.1f * logf(factor) + 1.0f; /* factor > 1 here */
    hp->yarn_ext_factor = 1.0f;
    hp->yarn_attn_factor = get_mscale * (1.0f / (1.0f + 0.1f * logf(factor))) * attn;
    const float start = floorf(yarn_corr_dim(hp->n_rot, n_orig, beta_fast, hp->rope_base));
    const float end = ceilf(yarn_corr_dim(hp->n_rot, n_orig, beta_slow, hp->rope_base));
    hp->yarn_corr[0] = start > 0 ? start : 0;
    hp->yarn_corr[1] = end < (float)(hp->n_rot - 1) ? end : (float)(hp->n_rot - 1);
    return RW_OK;
}

/* Rope scaling: none, linear (positions divided by the factor) or YaRN. The
 * others change the rotation otherwise and are not implemented. */
static rw_status read_rope_scaling(const rw_gguf *g, const char *a, rw_model_hparams *hp, rw_error *err) {
    char key[128], type[32] = "none";
    hp->rope_freq_scale = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (rw_gguf_get(g, key)) {
        rw_status st = rw_gguf_get_cstr(g, key, type, sizeof type, err);
        if (st) return st;
    }
    float factor = 0.0f;
    rw_status st = get_f32(g, a, "rope.scaling.factor", false, 0.0f, &factor, err);
    if (st) return st;
    if (!strcmp(type, "none") || factor == 0.0f || factor == 1.0f) return RW_OK;
    if (strcmp(type, "linear") != 0 && strcmp(type, "yarn") != 0)
        return rw_errorf(err, RW_ERR_UNSUPPORTED,
                         "%s.rope.scaling.type = \"%s\" is not supported (only none, linear and yarn)", a, type);
    if (!(factor > 0.0f)) return rw_errorf(err, RW_ERR_FORMAT, "invalid metadata %s.rope.scaling.factor = %g", a, factor);
    hp->rope_freq_scale = 1.0f / factor;
    if (!strcmp(type, "yarn")) {
        if (!(factor > 1.0f))
            return rw_errorf(err, RW_ERR_UNSUPPORTED, "%s.rope.scaling.factor = %g below 1 with yarn", a, factor);
        return read_yarn(g, a, factor, hp, err);
    }
    return RW_OK;
}

rw_status rw_models__read_dense_hparams(const rw_gguf *g, const rw_models__arch *arch, rw_model_hparams *hp, rw_error *err) {
    const char *a = arch->name;
    memset(hp, 0, sizeof *hp);
    snprintf(hp->arch, sizeof hp->arch, "%s", a);
    uint32_t ctx, embd, layers, ff, heads, heads_kv, hdk, hdv, rot;
    rw_status st;
    if ((st = get_u32(g, a, "context_length", true, 0, &ctx, err)) ||
        (st = get_u32(g, a, "embedding_length", true, 0, &embd, err)) ||
        (st = get_u32(g, a, "block_count", true, 0, &layers, err)) ||
        (st = get_u32(g, a, "feed_forward_length", !arch->moe, 0, &ff, err)) ||
        (st = get_u32(g, a, "attention.head_count", true, 0, &heads, err)))
        return st;
    if (ctx == 0) return bad(err, a, "context_length", "must be positive", ctx);
    if (embd == 0 || embd > MAX_DIM) return bad(err, a, "embedding_length", "out of range", embd);
    if (layers == 0 || layers > MAX_LAYERS) return bad(err, a, "block_count", "out of range", layers);
    if ((ff == 0 && !arch->moe) || ff > MAX_DIM) return bad(err, a, "feed_forward_length", "out of range", ff);
    if (heads == 0 || heads > embd) return bad(err, a, "attention.head_count", "out of range", heads);
    if ((st = get_u32(g, a, "attention.head_count_kv", false, heads, &heads_kv, err)) ||
        (st = get_u32(g, a, "attention.key_length", false, embd / heads, &hdk, err)))
        return st;
    if ((st = get_u32(g, a, "attention.value_length", false, hdk, &hdv, err)) ||
        (st = get_u32(g, a, "rope.dimension_count", false, hdk, &rot, err)))
        return st;
    if (heads_kv == 0 || heads % heads_kv != 0)
        return bad(err, a, "attention.head_count_kv", "must divide attention.head_count", heads_kv);
    if (hdk == 0 || hdk > 4096) return bad(err, a, "attention.key_length", "out of range", hdk);
    if (hdv == 0 || hdv > 4096) return bad(err, a, "attention.value_length", "out of range", hdv);
    if (rot == 0 || rot > hdk || rot % 2) return bad(err, a, "rope.dimension_count", "must be even and <= key_length", rot);
    if ((st = get_f32(g, a, "attention.layer_norm_rms_epsilon", true, 0.0f, &hp->rms_eps, err)) ||
        (st = get_f32(g, a, "rope.freq_base", false, 10000.0f, &hp->rope_base, err)))
        return st;
    if (!(hp->rms_eps > 0.0f)) return rw_errorf(err, RW_ERR_FORMAT, "invalid metadata %s.attention.layer_norm_rms_epsilon = %g", a, hp->rms_eps);
    if (!(hp->rope_base > 0.0f)) return rw_errorf(err, RW_ERR_FORMAT, "invalid metadata %s.rope.freq_base = %g", a, hp->rope_base);
    hp->n_ctx_train = ctx;
    hp->n_embd = (int)embd;
    hp->n_layer = (int)layers;
    hp->n_ff = (int)ff;
    hp->n_head = (int)heads;
    hp->n_head_kv = (int)heads_kv;
    hp->head_dim_k = (int)hdk;
    hp->head_dim_v = (int)hdv;
    hp->n_rot = (int)rot;
    hp->rope_kind = arch->rope_kind;
    return read_rope_scaling(g, a, hp, err); /* YaRN needs n_rot and the context */
}

rw_status rw_models__per_layer_u32(const rw_gguf *g, const char *arch, const char *name, int n_layer, bool required,
                                   uint32_t def, uint32_t *out, rw_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    const rw_gguf_value *v = rw_gguf_get(g, key);
    if (!v) {
        if (required) return rw_errorf(err, RW_ERR_FORMAT, "missing metadata key %s", key);
        for (int il = 0; il < n_layer; il++) out[il] = def;
        return RW_OK;
    }
    if (v->type != RW_GGUF_ARRAY) {
        uint32_t u;
        rw_status st = rw_gguf_get_u32(g, key, &u, err);
        if (st) return st;
        for (int il = 0; il < n_layer; il++) out[il] = u;
        return RW_OK;
    }
    if (v->arr.n != (uint64_t)n_layer)
        return rw_errorf(err, RW_ERR_FORMAT, "metadata key %s has %llu entries, block_count is %d", key,
                         (unsigned long long)v->arr.n, n_layer);
    for (int il = 0; il < n_layer; il++) {
        int64_t x;
        if (!rw_gguf_arr_int(v, (uint64_t)il, &x) || x < 0 || x > (int64_t)UINT32_MAX)
            return rw_errorf(err, RW_ERR_FORMAT, "metadata key %s: entry %d is not a non-negative integer", key, il);
        out[il] = (uint32_t)x;
    }
    return RW_OK;
}
