/* archs.c - the metadata and layer tensors of gemma3, gpt-oss, nemotron_h,
 * lfm2, qwen35moe, qwen3next and granitehybrid, as llama.cpp's converter
 * writes them (../shared/fixtures/<arch>/README.md: keys, tensor names and
 * shapes; the tiny fixture files show every key llama.cpp's loader reads).
 * synth.c adds the tokenizer, the embeddings, the final norm and the head. */
#include <stdio.h>
#include <string.h>

#include "synth/synth_int.h"

static const char *const handled[] = {"gemma3",    "gpt-oss",   "nemotron_h",   "lfm2",
                                      "qwen35moe", "qwen3next", "granitehybrid"};

bool rw_synth__arch_handles(const char *arch) {
    for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++)
        if (!strcmp(handled[i], arch)) return true;
    return false;
}

static bool is(const rw_synth_preset *ps, const char *arch) { return !strcmp(ps->arch, arch); }

/* The kind of layer il: the preset's letter, or attention for the models
 * without a pattern (whose layers differ only by window or interval). */
static char kind(const rw_synth_preset *ps, uint32_t il) { return ps->layers ? ps->layers[il] : '*'; }

/* A per-layer array key: v where layer il is of kind want, else 0. */
static rw_status per_layer(rw_gguf_writer *w, const char *key, const rw_synth_preset *ps, char want, uint32_t v,
                           rw_error *err) {
    int32_t a[4096];
    if (ps->n_layer > 4096) return rw_errorf(err, RW_ERR_INVALID_ARG, "synth: too many layers");
    for (uint32_t il = 0; il < ps->n_layer; il++) a[il] = kind(ps, il) == want ? (int32_t)v : 0;
    return rw_gguf_writer_add_arr_i32(w, key, a, ps->n_layer, err);
}

rw_status rw_synth__arch_metadata(rw_synth_plan *p, const rw_synth_preset *ps, rw_error *err) {
    rw_gguf_writer *w = rw_synth__writer(p);
    const char *a = ps->arch;
    char key[128], name[96];
#define K(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    const bool gemma = is(ps, "gemma3"), oss = is(ps, "gpt-oss"), nemo = is(ps, "nemotron_h"), lfm = is(ps, "lfm2"),
               granite = is(ps, "granitehybrid"), q35moe = is(ps, "qwen35moe"), next = is(ps, "qwen3next");
    snprintf(name, sizeof name, "rewind-synth-%s", ps->name);
    rw_status s = rw_gguf_writer_add_str(w, "general.architecture", a, err);
    if (!s) s = rw_gguf_writer_add_str(w, "general.type", "model", err);
    if (!s) s = rw_gguf_writer_add_str(w, "general.name", name, err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("context_length"), ps->n_ctx, err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("embedding_length"), ps->n_embd, err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("block_count"), ps->n_layer, err);
    /* nemotron_h: the MLP layers' width, 0 elsewhere; qwen35moe has none */
    if (!s && nemo) s = per_layer(w, K("feed_forward_length"), ps, '-', ps->n_ff, err);
    else if (!s && !q35moe) s = rw_gguf_writer_add_u32(w, K("feed_forward_length"), ps->n_ff, err);
    if (!s) s = rw_gguf_writer_add_u32(w, K("attention.head_count"), ps->n_head, err);
    /* the hybrids: KV heads on the attention layers only */
    if (!s && (nemo || lfm || granite)) s = per_layer(w, K("attention.head_count_kv"), ps, '*', ps->n_head_kv, err);
    else if (!s) s = rw_gguf_writer_add_u32(w, K("attention.head_count_kv"), ps->n_head_kv, err);
    if (!s)
        s = rw_gguf_writer_add_f32(w, K("attention.layer_norm_rms_epsilon"), gemma || q35moe || next ? 1e-6f : 1e-5f,
                                   err);
    if (!s && !lfm) s = rw_gguf_writer_add_u32(w, K("attention.key_length"), ps->head_dim, err);
    if (!s && !lfm) s = rw_gguf_writer_add_u32(w, K("attention.value_length"), ps->head_dim, err);
    if (!s && ps->rope_base > 0) s = rw_gguf_writer_add_f32(w, K("rope.freq_base"), ps->rope_base, err);
    if (!s && (q35moe || next)) s = rw_gguf_writer_add_u32(w, K("rope.dimension_count"), ps->n_rot, err);
    if (!s && q35moe) {
        /* IMROPE sections in rotary pairs, as qwen35's */
        int32_t pairs = (int32_t)ps->n_rot / 2, sec[4] = {0, 0, 0, 0};
        sec[0] = sec[1] = (pairs * 11 + 31) / 32;
        sec[2] = pairs - sec[0] - sec[1];
        s = rw_gguf_writer_add_arr_i32(w, K("rope.dimension_sections"), sec, 4, err);
    }
    if (!s && (q35moe || next)) { /* Gated DeltaNet */
        s = rw_gguf_writer_add_u32(w, K("ssm.conv_kernel"), 4, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.state_size"), ps->ssm_dk, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.group_count"), ps->ssm_nk, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.time_step_rank"), ps->ssm_nv, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.inner_size"), ps->ssm_nv * ps->ssm_dk, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("full_attention_interval"), 4, err);
    }
    if (!s && (nemo || granite)) { /* Mamba2 */
        s = rw_gguf_writer_add_u32(w, K("ssm.conv_kernel"), 4, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.state_size"), ps->ssm_dk, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.group_count"), ps->ssm_nk, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.inner_size"), ps->ssm_nv * ps->ssm_hd, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("ssm.time_step_rank"), ps->ssm_nv, err);
    }
    if (!s && ps->n_expert) {
        s = rw_gguf_writer_add_u32(w, K("expert_count"), ps->n_expert, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("expert_used_count"), ps->n_expert_used, err);
        if (!s) s = rw_gguf_writer_add_u32(w, K("expert_feed_forward_length"), ps->ff_exp, err);
        if (!s && ps->ff_shexp)
            s = rw_gguf_writer_add_u32(w, K("expert_shared_feed_forward_length"), ps->ff_shexp, err);
    }
    if (!s && ps->n_swa) s = rw_gguf_writer_add_u32(w, K("attention.sliding_window"), ps->n_swa, err);
    /* Gemma 3 scales the global layers' positions (linear); gpt-oss uses
     * YaRN. Neither file has a pattern key: llama.cpp's defaults (6, 2). */
    if (!s && ps->rope_scale > 0) {
        s = rw_gguf_writer_add_str(w, K("rope.scaling.type"), gemma ? "linear" : "yarn", err);
        if (!s) s = rw_gguf_writer_add_f32(w, K("rope.scaling.factor"), ps->rope_scale, err);
        if (!s && oss) s = rw_gguf_writer_add_u32(w, K("rope.scaling.original_context_length"), ps->rope_orig_ctx, err);
    }
    if (!s && lfm) s = rw_gguf_writer_add_u32(w, K("shortconv.l_cache"), 3, err);
    if (!s && granite) { /* Granite 4.0-H: no positions (NoPE), and its multipliers */
        s = rw_gguf_writer_add_bool(w, K("rope.scaling.finetuned"), false, err);
        if (!s) s = rw_gguf_writer_add_f32(w, K("embedding_scale"), 12.0f, err);
        if (!s) s = rw_gguf_writer_add_f32(w, K("residual_scale"), 0.22f, err);
        if (!s) s = rw_gguf_writer_add_f32(w, K("logit_scale"), 6.0f, err);
        if (!s) s = rw_gguf_writer_add_f32(w, K("attention.scale"), 0.0078125f, err);
    }
#undef K
    return s;
}

/* Shorthands: a matrix {n_in, n_out} (quantized), a vector (F32). */
#define MAT(what, n_in, n_out) \
    rw_synth__add(p, rw_synth__blk(n, il, what), il, 2, n_in, n_out, 1, FILL_MATRIX, 1, false, seed, err)
#define NORM(what, len) rw_synth__add(p, rw_synth__blk(n, il, what), il, 1, len, 1, 1, FILL_NORM, 1, true, seed, err)
#define BIAS(what, len) rw_synth__add(p, rw_synth__blk(n, il, what), il, 1, len, 1, 1, FILL_MATRIX, 1, true, seed, err)

static rw_status attention(rw_synth_plan *p, const rw_synth_preset *ps, int il, bool gated_q, bool qk_norm,
                           uint64_t seed, rw_error *err) {
    char n[96];
    const uint64_t E = ps->n_embd, D = ps->head_dim, H = ps->n_head, Hkv = ps->n_head_kv;
    rw_status s = MAT("attn_q.weight", E, (gated_q ? 2 : 1) * H * D);
    if (!s) s = MAT("attn_k.weight", E, Hkv * D);
    if (!s) s = MAT("attn_v.weight", E, Hkv * D);
    if (!s) s = MAT("attn_output.weight", H * D, E);
    if (!s && qk_norm) s = NORM("attn_q_norm.weight", D);
    if (!s && qk_norm) s = NORM("attn_k_norm.weight", D);
    return s;
}

static rw_status swiglu(rw_synth_plan *p, const rw_synth_preset *ps, int il, uint64_t seed, rw_error *err) {
    char n[96];
    const uint64_t E = ps->n_embd, F = ps->n_ff;
    rw_status s = MAT("ffn_gate.weight", E, F);
    if (!s) s = MAT("ffn_up.weight", E, F);
    if (!s) s = MAT("ffn_down.weight", F, E);
    return s;
}

/* Routed experts {n_in, n_out, Ne} and, when the preset has one, the shared
 * expert (gated by a vector in the Qwen models). The router stays F32, as
 * llama-quantize keeps it. */
static rw_status experts(rw_synth_plan *p, const rw_synth_preset *ps, int il, bool shared_gate, uint64_t seed,
                         rw_error *err) {
    char n[96];
    const uint64_t E = ps->n_embd, Ne = ps->n_expert, Fe = ps->ff_exp, Fs = ps->ff_shexp;
    rw_status s =
        rw_synth__add(p, rw_synth__blk(n, il, "ffn_gate_inp.weight"), il, 2, E, Ne, 1, FILL_MATRIX, 1, true, seed, err);
    if (!s)
        s = rw_synth__add(p, rw_synth__blk(n, il, "ffn_gate_exps.weight"), il, 3, E, Fe, Ne, FILL_MATRIX, 1, false,
                          seed, err);
    if (!s)
        s = rw_synth__add(p, rw_synth__blk(n, il, "ffn_up_exps.weight"), il, 3, E, Fe, Ne, FILL_MATRIX, 1, false, seed,
                          err);
    if (!s)
        s = rw_synth__add(p, rw_synth__blk(n, il, "ffn_down_exps.weight"), il, 3, Fe, E, Ne, FILL_MATRIX, 1, false,
                          seed, err);
    if (!s && Fs && shared_gate) s = BIAS("ffn_gate_inp_shexp.weight", E);
    if (!s && Fs) s = MAT("ffn_gate_shexp.weight", E, Fs);
    if (!s && Fs) s = MAT("ffn_up_shexp.weight", E, Fs);
    if (!s && Fs) s = MAT("ffn_down_shexp.weight", Fs, E);
    return s;
}

/* Gated DeltaNet (qwen35moe; qwen3next has beta and alpha in one matrix). */
static rw_status deltanet(rw_synth_plan *p, const rw_synth_preset *ps, int il, bool ba, uint64_t seed, rw_error *err) {
    char n[96];
    const uint64_t E = ps->n_embd, nv = ps->ssm_nv, nk = ps->ssm_nk, dk = ps->ssm_dk;
    const uint64_t VD = nv * dk, CD = 2 * nk * dk + VD;
    rw_status s = MAT("attn_qkv.weight", E, CD);
    if (!s) s = MAT("attn_gate.weight", E, VD);
    if (!s)
        s = rw_synth__add(p, rw_synth__blk(n, il, "ssm_conv1d.weight"), il, 2, 4, CD, 1, FILL_MATRIX, 1, true, seed,
                          err);
    if (!s)
        s = rw_synth__add(p, rw_synth__blk(n, il, "ssm_dt.bias"), il, 1, nv, 1, 1, FILL_DT_BIAS, 1, true, seed, err);
    if (!s) s = rw_synth__add(p, rw_synth__blk(n, il, "ssm_a"), il, 1, nv, 1, 1, FILL_SSM_A, 1, true, seed, err);
    if (!s && ba) s = MAT("ssm_ba.weight", E, 2 * nv);
    if (!s && !ba) s = MAT("ssm_beta.weight", E, nv);
    if (!s && !ba) s = MAT("ssm_alpha.weight", E, nv);
    if (!s) s = NORM("ssm_norm.weight", dk);
    if (!s) s = MAT("ssm_out.weight", VD, E);
    return s;
}

/* Mamba2 (nemotron_h, granitehybrid): nv heads of ssm_hd, nk groups, state
 * ssm_dk; ssm_in gives z, x, B, C and dt. */
static rw_status mamba2(rw_synth_plan *p, const rw_synth_preset *ps, int il, uint64_t seed, rw_error *err) {
    char n[96];
    const uint64_t E = ps->n_embd, nv = ps->ssm_nv, G = ps->ssm_nk, N = ps->ssm_dk, inner = nv * ps->ssm_hd;
    const uint64_t C = inner + 2 * G * N;
    rw_status s = MAT("ssm_in.weight", E, inner + C + nv);
    if (!s)
        s = rw_synth__add(p, rw_synth__blk(n, il, "ssm_conv1d.weight"), il, 2, 4, C, 1, FILL_MATRIX, 1, true, seed,
                          err);
    if (!s) s = BIAS("ssm_conv1d.bias", C);
    if (!s)
        s = rw_synth__add(p, rw_synth__blk(n, il, "ssm_dt.bias"), il, 1, nv, 1, 1, FILL_DT_BIAS, 1, true, seed, err);
    if (!s) s = rw_synth__add(p, rw_synth__blk(n, il, "ssm_a"), il, 2, 1, nv, 1, FILL_SSM_A, 1, true, seed, err);
    if (!s) s = rw_synth__add(p, rw_synth__blk(n, il, "ssm_d"), il, 2, 1, nv, 1, FILL_NORM, 1, true, seed, err);
    if (!s)
        s = rw_synth__add(p, rw_synth__blk(n, il, "ssm_norm.weight"), il, 2, inner / G, G, 1, FILL_NORM, 1, true, seed,
                          err);
    if (!s) s = MAT("ssm_out.weight", inner, E);
    return s;
}

/* gpt-oss: attention with biases and per-head sinks, experts with biases. */
static rw_status gpt_oss(rw_synth_plan *p, const rw_synth_preset *ps, int il, uint64_t seed, rw_error *err) {
    char n[96];
    const uint64_t E = ps->n_embd, D = ps->head_dim, H = ps->n_head, Hkv = ps->n_head_kv, Ne = ps->n_expert,
                   Fe = ps->ff_exp;
    rw_status s = attention(p, ps, il, false, false, seed, err);
    if (!s) s = BIAS("attn_q.bias", H * D);
    if (!s) s = BIAS("attn_k.bias", Hkv * D);
    if (!s) s = BIAS("attn_v.bias", Hkv * D);
    if (!s) s = BIAS("attn_output.bias", E);
    if (!s) s = NORM("attn_sinks.weight", H);
    if (!s) s = NORM("post_attention_norm.weight", E);
    if (!s) s = experts(p, ps, il, false, seed, err);
    if (!s) s = BIAS("ffn_gate_inp.bias", Ne);
    if (!s)
        s = rw_synth__add(p, rw_synth__blk(n, il, "ffn_gate_exps.bias"), il, 2, Fe, Ne, 1, FILL_MATRIX, 1, true, seed,
                          err);
    if (!s)
        s = rw_synth__add(p, rw_synth__blk(n, il, "ffn_up_exps.bias"), il, 2, Fe, Ne, 1, FILL_MATRIX, 1, true, seed,
                          err);
    if (!s)
        s = rw_synth__add(p, rw_synth__blk(n, il, "ffn_down_exps.bias"), il, 2, E, Ne, 1, FILL_MATRIX, 1, true, seed,
                          err);
    return s;
}

rw_status rw_synth__arch_layer(rw_synth_plan *p, const rw_synth_preset *ps, int il, uint64_t seed, rw_error *err) {
    char n[96];
    const uint64_t E = ps->n_embd, F = ps->n_ff;
    const char k = kind(ps, (uint32_t)il);
    rw_status s = NORM("attn_norm.weight", E);
    if (s) return s;
    if (is(ps, "gemma3")) { /* norms after each sublayer too, with the 1 already added */
        s = attention(p, ps, il, false, true, seed, err);
        if (!s) s = NORM("post_attention_norm.weight", E);
        if (!s) s = NORM("ffn_norm.weight", E);
        if (!s) s = swiglu(p, ps, il, seed, err);
        if (!s) s = NORM("post_ffw_norm.weight", E);
    } else if (is(ps, "gpt-oss")) {
        s = gpt_oss(p, ps, il, seed, err);
    } else if (is(ps, "nemotron_h")) { /* one mixer per layer; the MLP is ReLU^2, no gate */
        if (k == 'M') s = mamba2(p, ps, il, seed, err);
        else if (k == '*') s = attention(p, ps, il, false, false, seed, err);
        else {
            s = MAT("ffn_up.weight", E, F);
            if (!s) s = MAT("ffn_down.weight", F, E);
        }
    } else if (is(ps, "lfm2")) {
        if (k == 'C') {
            s = rw_synth__add(p, rw_synth__blk(n, il, "shortconv.conv.weight"), il, 2, 3, E, 1, FILL_MATRIX, 1, true,
                              seed, err);
            if (!s) s = MAT("shortconv.in_proj.weight", E, 3 * E);
            if (!s) s = MAT("shortconv.out_proj.weight", E, E);
        } else s = attention(p, ps, il, false, true, seed, err);
        if (!s) s = NORM("ffn_norm.weight", E);
        if (!s) s = swiglu(p, ps, il, seed, err);
    } else if (is(ps, "qwen35moe") || is(ps, "qwen3next")) {
        const bool recurrent = (il + 1) % 4 != 0;
        s = recurrent ? deltanet(p, ps, il, is(ps, "qwen3next"), seed, err)
                      : attention(p, ps, il, true, true, seed, err);
        if (!s) s = NORM("post_attention_norm.weight", E);
        if (!s) s = experts(p, ps, il, true, seed, err);
    } else if (is(ps, "granitehybrid")) {
        s = k == 'M' ? mamba2(p, ps, il, seed, err) : attention(p, ps, il, false, false, seed, err);
        if (!s) s = NORM("ffn_norm.weight", E);
        if (!s) s = ps->n_expert ? experts(p, ps, il, false, seed, err) : swiglu(p, ps, il, seed, err);
    } else s = rw_errorf(err, RW_ERR_INTERNAL, "synth: no layout for %s", ps->arch);
    return s;
}
