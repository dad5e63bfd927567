/* synth.c - lay out a synthesized model: metadata, tensor list and shapes,
 * and the scale of each tensor's values (the tensors go into the plan of
 * plan.c, which picks their types and fills them when the file is written).
 *
 * Value scales (why the logits stay a few units wide and never NaN): every
 * matrix is uniform with std 1/sqrt(n_in), so each projection keeps the RMS
 * of its input; norm weights are ~1; the LM head has std 3/sqrt(E), so that
 * a unit-RMS hidden state gives logits with a standard deviation near 3. */
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/hash.h"
#include "base/threadpool.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "synth/synth_int.h"
#include "synth/synth_preset.h"

typedef rw_synth_fill fill_kind;
typedef struct rw_synth_plan plan;

static rw_status add(plan *p, const char *name, int layer, uint32_t n_dims, uint64_t ne0, uint64_t ne1, fill_kind kind,
                     float scale, bool keep_f32, uint64_t seed, float rope_base, rw_error *err) {
    return rw_synth__add_tensor(p, name, layer, n_dims, ne0, ne1, 1, kind, scale, keep_f32, seed, rope_base, err);
}

static rw_status add_attention(plan *p, const rw_synth_preset *ps, int il, bool gated_q, bool qk_norm, uint64_t seed,
                               rw_error *err) {
    char n[96];
    uint64_t E = ps->n_embd, D = ps->head_dim, H = ps->n_head, Hkv = ps->n_head_kv;
    rw_status s = add(p, rw_synth__blk(n, il, "attn_q.weight"), il, 2, E, (gated_q ? 2 : 1) * H * D, FILL_MATRIX, 1,
                      false, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "attn_k.weight"), il, 2, E, Hkv * D, FILL_MATRIX, 1, false, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "attn_v.weight"), il, 2, E, Hkv * D, FILL_MATRIX, 1, false, seed, 0, err);
    if (!s)
        s = add(p, rw_synth__blk(n, il, "attn_output.weight"), il, 2, H * D, E, FILL_MATRIX, 1, false, seed, 0, err);
    if (!s && qk_norm)
        s = add(p, rw_synth__blk(n, il, "attn_q_norm.weight"), il, 1, D, 1, FILL_NORM, 1, true, seed, 0, err);
    if (!s && qk_norm)
        s = add(p, rw_synth__blk(n, il, "attn_k_norm.weight"), il, 1, D, 1, FILL_NORM, 1, true, seed, 0, err);
    return s;
}

static rw_status add_ffn(plan *p, const rw_synth_preset *ps, int il, uint64_t seed, rw_error *err) {
    char n[96];
    uint64_t E = ps->n_embd, F = ps->n_ff;
    rw_status s = add(p, rw_synth__blk(n, il, "ffn_gate.weight"), il, 2, E, F, FILL_MATRIX, 1, false, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "ffn_up.weight"), il, 2, E, F, FILL_MATRIX, 1, false, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "ffn_down.weight"), il, 2, F, E, FILL_MATRIX, 1, false, seed, 0, err);
    return s;
}

static rw_status add_deltanet(plan *p, const rw_synth_preset *ps, int il, uint64_t seed, rw_error *err) {
    char n[96];
    uint64_t E = ps->n_embd, nv = ps->ssm_nv, nk = ps->ssm_nk, dk = ps->ssm_dk;
    uint64_t VD = nv * dk, CD = 2 * nk * dk + VD;
    rw_status s = add(p, rw_synth__blk(n, il, "attn_qkv.weight"), il, 2, E, CD, FILL_MATRIX, 1, false, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "attn_gate.weight"), il, 2, E, VD, FILL_MATRIX, 1, false, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "ssm_conv1d.weight"), il, 2, 4, CD, FILL_MATRIX, 1, true, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "ssm_dt.bias"), il, 1, nv, 1, FILL_DT_BIAS, 1, true, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "ssm_a"), il, 1, nv, 1, FILL_SSM_A, 1, true, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "ssm_beta.weight"), il, 2, E, nv, FILL_MATRIX, 1, false, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "ssm_alpha.weight"), il, 2, E, nv, FILL_MATRIX, 1, false, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "ssm_norm.weight"), il, 1, dk, 1, FILL_NORM, 1, true, seed, 0, err);
    if (!s) s = add(p, rw_synth__blk(n, il, "ssm_out.weight"), il, 2, VD, E, FILL_MATRIX, 1, false, seed, 0, err);
    return s;
}

static rw_status add_metadata(plan *p, const rw_synth_preset *ps, const rw_synth_options *o, bool mtp,
                              uint32_t *n_vocab, rw_error *err) {
    rw_gguf_writer *w = p->w;
    const char *a = ps->arch;
    char key[128], name[96];
#define K(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    snprintf(name, sizeof name, "rewind-synth-%s", ps->name);
    rw_status s = rw_gguf_writer_add_str(w, "general.architecture", a, err);
    if (!s) s = rw_gguf_writer_add_str(w, "general.type", "model", err);
    if (!s) s = rw_gguf_writer_add_str(w, "general.name", name, err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("context_length"), ps->n_ctx, err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("embedding_length"), ps->n_embd, err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("block_count"), ps->n_layer + (mtp ? 1 : 0), err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("feed_forward_length"), ps->n_ff, err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("attention.head_count"), ps->n_head, err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("attention.head_count_kv"), ps->n_head_kv, err);
    if (!s) s = rw_gguf_writer_add_f32(w, K("rope.freq_base"), ps->rope_base, err);
    if (!s)
        s = rw_gguf_writer_add_f32(w, K("attention.layer_norm_rms_epsilon"), strcmp(a, "llama") ? 1e-6f : 1e-5f, err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("attention.key_length"), ps->head_dim, err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("attention.value_length"), ps->head_dim, err);
    if (!s && strcmp(a, "qwen3")) s = rw_gguf_writer_add_u32(w, K("rope.dimension_count"), ps->n_rot, err);
    if (!s && !strcmp(a, "qwen35")) {
        /* IMROPE sections in rotary pairs: [11, 11, 10, 0] for R = 64, scaled for other R */
        int32_t pairs = (int32_t)ps->n_rot / 2, sec[4] = {0, 0, 0, 0};
        sec[0] = (pairs * 11 + 31) / 32;
        sec[1] = (pairs * 11 + 31) / 32;
        sec[2] = pairs - sec[0] - sec[1];
        s = rw_gguf_writer_add_arr_i32(w, K("rope.dimension_sections"), sec, 4, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.conv_kernel"), 4, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.state_size"), ps->ssm_dk, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.group_count"), ps->ssm_nk, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.time_step_rank"), ps->ssm_nv, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.inner_size"), ps->ssm_nv * ps->ssm_dk, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("full_attention_interval"), 4, err);
        if (!s && mtp) s = rw_gguf_writer_add_u32(w, K("nextn_predict_layers"), 1, err);
    }
#undef K
    if (!s) {
        const char *pre = !strcmp(a, "qwen35") ? "qwen35" : !strcmp(a, "llama") ? "llama-bpe" : "qwen2";
        s = o->vocab_path ? rw_synth__copy_vocab(w, o->vocab_path, n_vocab, err)
                          : rw_synth__add_builtin_vocab(w, pre, n_vocab, err);
    }
    return s;
}

typedef struct {
    const char *name;
    rw_dtype base;
    bool mix;
    uint32_t file_type; /* llama_ftype */
} type_choice;

static const type_choice type_choices[] = {
    {"f32", RW_TYPE_F32, false, 0},
    {"f16", RW_TYPE_F16, false, 1},
    {"bf16", RW_TYPE_BF16, false, 32},
    {"q8_0", RW_TYPE_Q8_0, false, 7},
    {"q4_0", RW_TYPE_Q4_0, false, 2},
    {"q4_1", RW_TYPE_Q4_1, false, 3},
    {"q5_0", RW_TYPE_Q5_0, false, 8},
    {"q5_1", RW_TYPE_Q5_1, false, 9},
    {"q2_k", RW_TYPE_Q2_K, false, 10},
    {"q3_k", RW_TYPE_Q3_K, false, 12},
    {"q4_k", RW_TYPE_Q4_K, false, 15},
    {"q5_k", RW_TYPE_Q5_K, false, 17},
    {"q6_k", RW_TYPE_Q6_K, false, 18},
    {"iq4_nl", RW_TYPE_IQ4_NL, false, 25},
    {"iq4_xs", RW_TYPE_IQ4_XS, false, 30},
    {"q3_k_m", RW_TYPE_Q3_K, true, 12},
    {"q4_k_m", RW_TYPE_Q4_K, true, 15},
    {"q5_k_m", RW_TYPE_Q5_K, true, 17},
    {"mxfp4_moe", RW_TYPE_Q8_0, false, 38} /* the experts MXFP4, the rest Q8_0 */,
};

rw_status rw_synth_write(const rw_synth_options *o, const char *out_path, rw_error *err) {
    const rw_synth_preset *found = rw_synth__find_preset(o->preset ? o->preset : "");
    if (!found) return rw_errorf(err, RW_ERR_INVALID_ARG, "unknown preset '%s'", o->preset ? o->preset : "");
    rw_synth_preset shallow = *found; /* the preset with o->n_layer layers */
    if (o->n_layer) {
        if (o->n_layer > found->n_layer)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "preset %s has %u layers, not %u", found->name,
                             (unsigned)found->n_layer, (unsigned)o->n_layer);
        shallow.n_layer = o->n_layer;
    }
    const rw_synth_preset *ps = &shallow;
    if (o->arch && strcmp(o->arch, ps->arch))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "preset %s is a %s model, not %s", ps->name, ps->arch, o->arch);
    const type_choice *tc = NULL;
    const char *tname = o->type ? o->type : "q8_0";
    for (size_t i = 0; i < sizeof type_choices / sizeof type_choices[0]; i++)
        if (!strcasecmp(type_choices[i].name, tname)) tc = &type_choices[i];
    if (!tc) return rw_errorf(err, RW_ERR_INVALID_ARG, "unknown type '%s'", tname);
    if (tc->base != RW_TYPE_F32 && !rw_can_quantize(tc->base))
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "quantization to %s is not implemented", rw_dtype_name(tc->base));
    bool mtp = o->mtp && !strcmp(ps->arch, "qwen35");

    plan p = {.base_type = tc->base,
              .k_mix = tc->mix,
              .n_layer = ps->n_layer,
              .verbose = o->verbose,
              .experts_mxfp4 = !strcmp(tc->name, "mxfp4_moe")};
    const bool laid_out = rw_synth__arch_handles(ps->arch); /* by archs.c */
    p.cap = 64 + 32 * (size_t)(ps->n_layer + 1);
    /* specs, then 2 context pointers per spec (see add()) */
    p.specs = calloc(1, p.cap * sizeof *p.specs + 2 * p.cap * sizeof(void *));
    p.w = rw_gguf_writer_new();
    if (!p.specs || !p.w) {
        free(p.specs);
        rw_gguf_writer_free(p.w);
        return rw_errorf(err, RW_ERR_NOMEM, "no memory");
    }
    uint32_t n_vocab = 0;
    rw_status s = laid_out ? rw_synth__arch_metadata(&p, ps, err) : add_metadata(&p, ps, o, mtp, &n_vocab, err);
    if (!s && laid_out)
        s = o->vocab_path ? rw_synth__copy_vocab(p.w, o->vocab_path, &n_vocab, err)
                          : rw_synth__add_builtin_vocab(p.w, "qwen2", &n_vocab, err);
    if (!s && tc->base != RW_TYPE_F32) s = rw_gguf_writer_add_u32(p.w, "general.quantization_version", 2, err);
    if (!s) s = rw_gguf_writer_add_u32(p.w, "general.file_type", tc->file_type, err);

    uint64_t seed = o->seed, E = ps->n_embd;
    float head_scale = 3.0f; /* logits std ~3 for a unit-RMS hidden state */
    if (!s)
        s = add(&p, "token_embd.weight", -1, 2, E, n_vocab, FILL_MATRIX, ps->tied ? head_scale : sqrtf((float)E), false,
                seed, 0, err);
    if (!s && !strcmp(ps->arch, "llama"))
        s = add(&p, "rope_freqs.weight", -1, 1, ps->n_rot / 2, 1, FILL_ROPE_FREQS, 1, true, seed, ps->rope_base, err);
    uint32_t n_blocks = ps->n_layer + (mtp ? 1 : 0);
    for (uint32_t il = 0; il < n_blocks && !s && laid_out; il++) s = rw_synth__arch_layer(&p, ps, (int)il, seed, err);
    for (uint32_t il = 0; il < n_blocks && !s && !laid_out; il++) {
        char n[96];
        int L = (int)il;
        bool qwen35 = !strcmp(ps->arch, "qwen35");
        bool recurrent = qwen35 && il < ps->n_layer && (il + 1) % 4 != 0;
        s = add(&p, rw_synth__blk(n, L, "attn_norm.weight"), L, 1, E, 1, FILL_NORM, 1, true, seed, 0, err);
        if (!s)
            s = recurrent ? add_deltanet(&p, ps, L, seed, err)
                          : add_attention(&p, ps, L, qwen35, strcmp(ps->arch, "llama") != 0, seed, err);
        if (!s)
            s = add(&p, rw_synth__blk(n, L, qwen35 ? "post_attention_norm.weight" : "ffn_norm.weight"), L, 1, E, 1,
                    FILL_NORM, 1, true, seed, 0, err);
        if (!s) s = add_ffn(&p, ps, L, seed, err);
        if (!s && il >= ps->n_layer) { /* the MTP block's own tensors */
            s = add(&p, rw_synth__blk(n, L, "nextn.eh_proj.weight"), L, 2, 2 * E, E, FILL_MATRIX, 1, false, seed, 0,
                    err);
            if (!s)
                s = add(&p, rw_synth__blk(n, L, "nextn.enorm.weight"), L, 1, E, 1, FILL_NORM, 1, true, seed, 0, err);
            if (!s)
                s = add(&p, rw_synth__blk(n, L, "nextn.hnorm.weight"), L, 1, E, 1, FILL_NORM, 1, true, seed, 0, err);
            if (!s)
                s = add(&p, rw_synth__blk(n, L, "nextn.shared_head_norm.weight"), L, 1, E, 1, FILL_NORM, 1, true, seed,
                        0, err);
        }
    }
    /* lfm2's final norm is token_embd_norm */
    const bool lfm2 = !strcmp(ps->arch, "lfm2");
    if (!s)
        s = add(&p, lfm2 ? "token_embd_norm.weight" : "output_norm.weight", -1, 1, E, 1, FILL_NORM, 1, true, seed, 0,
                err);
    if (!s && !ps->tied) s = add(&p, "output.weight", -1, 2, E, n_vocab, FILL_MATRIX, head_scale, false, seed, 0, err);
    if (!s) s = rw_threadpool_new(o->n_threads, &p.pool, err);
    if (!s) s = rw_gguf_writer_write(p.w, out_path, err);
    rw_threadpool_free(p.pool);
    rw_gguf_writer_free(p.w);
    free(p.specs);
    return s;
}
