/* synth.c - lay out a synthesized model: metadata, tensor list, types, and
 * the seeded values each tensor is filled with when the file is written.
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

typedef struct {
    fill_kind kind;
    float scale;
    uint64_t seed;
    float rope_base; /* FILL_ROPE_FREQS */
} fill_spec;

/* Every tensor's fill spec lives here until the file is written (owned by
 * the plan, freed in plan_free). */
struct rw_synth_plan {
    fill_spec *specs;
    size_t n, cap;
    rw_gguf_writer *w;
    rw_dtype base_type;
    bool k_mix;       /* a llama-quantize _M mix */
    uint32_t n_layer; /* for the mix rules */
    bool verbose;
    size_t written;      /* tensors filled so far, for progress */
    rw_threadpool *pool; /* quantizes a tensor's rows in parallel; owned by rw_synth_write */
    bool experts_mxfp4;  /* llama-quantize's MXFP4_MOE: the experts' tensors are MXFP4 */
};
typedef struct rw_synth_plan plan;

/* ---- random numbers: splitmix64, one stream per tensor ---- */

#define SPLITMIX_STEP 0x9e3779b97f4a7c15ull

/* The state advances by a constant per number, so the stream can be
 * entered anywhere: after k numbers it is seed + k * SPLITMIX_STEP. Every
 * fill kind takes one number per element (or none), so row r of a tensor
 * starts at seed + r * n_in * SPLITMIX_STEP, and rows can be made on any
 * thread in any order, bitwise as one thread making them in turn. */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += SPLITMIX_STEP);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float uniform_pm1(uint64_t *s) { return (float)((splitmix(s) >> 40) * (1.0 / (1ull << 23)) - 1.0); }

/* base/hash.h's FNV-1a from a seed of its own (not RW_HASH_INIT: every
 * synthetic file's weights, and the fixtures made from them, stay bitwise
 * the same). */
static uint64_t hash_name(const char *s) { return rw_hash_bytes(1469598103934665603ull, s, strlen(s)); }

static void fill_row(const fill_spec *f, uint64_t *rng, uint64_t n_in, uint64_t row, float *x) {
    switch (f->kind) {
    case FILL_MATRIX: {
        float a = f->scale * sqrtf(3.0f / (float)n_in); /* uniform [-a, a] has std a/sqrt(3) */
        /* the bulk of every file's numbers: 16 at a time where the CPU can */
#if defined(__x86_64__)
        if (rw_kernel_tier_current() == RW_TIER_AVX512) rw_synth__fill_uniform_avx512(*rng, SPLITMIX_STEP, a, n_in, x);
        else
#endif
            for (uint64_t i = 0; i < n_in; i++) x[i] = a * uniform_pm1(rng);
        break;
    }
    case FILL_NORM:
        for (uint64_t i = 0; i < n_in; i++) x[i] = 1.0f + 0.05f * uniform_pm1(rng);
        break;
    case FILL_SSM_A:
        for (uint64_t i = 0; i < n_in; i++) x[i] = -(8.5f + 7.5f * uniform_pm1(rng));
        break;
    case FILL_DT_BIAS:
        for (uint64_t i = 0; i < n_in; i++) {
            float dt = expf(logf(1e-3f) + (logf(1e-1f) - logf(1e-3f)) * 0.5f * (1.0f + uniform_pm1(rng)));
            x[i] = dt + logf(-expm1f(-dt));
        }
        break;
    case FILL_ROPE_FREQS: {
        /* llama3 scaling (factor 32, low 1, high 4, original context 8192):
         * long wavelengths are slowed down by the factor, short ones kept,
         * and the band between is interpolated. */
        const float factor = 32.0f, low = 1.0f, high = 4.0f, orig = 8192.0f;
        for (uint64_t i = 0; i < n_in; i++) {
            float freq = powf(f->rope_base, -2.0f * (float)i / (float)(2 * n_in));
            float wavelen = 2.0f * (float)M_PI / freq;
            float r;
            if (wavelen < orig / high) r = 1.0f;
            else if (wavelen > orig / low) r = factor;
            else {
                float smooth = (orig / wavelen - low) / (high - low);
                r = 1.0f / ((1.0f - smooth) / factor + smooth);
            }
            x[i] = r;
        }
        break;
    }
    }
    (void)row;
}

/* Rows of one tensor, quantized in tasks of FILL_ROWS rows on the pool. */
enum { FILL_ROWS = 16 };

typedef struct {
    const fill_spec *f;
    const rw_gguf_tensor *info;
    uint8_t *dst;
    uint64_t n_in, n_rows, row_bytes;
    float *x;                    /* n_in floats per thread */
    _Atomic rw_status first_err; /* RW_OK until a row fails */
} fill_job;

static void fill_task(void *ctx, int64_t task, int thread) {
    fill_job *j = ctx;
    float *x = j->x + (size_t)thread * j->n_in;
    const uint64_t r0 = (uint64_t)task * FILL_ROWS, r1 = r0 + FILL_ROWS < j->n_rows ? r0 + FILL_ROWS : j->n_rows;
    for (uint64_t r = r0; r < r1; r++) {
        uint64_t rng = j->f->seed + r * j->n_in * SPLITMIX_STEP; /* see splitmix */
        fill_row(j->f, &rng, j->n_in, r, x);
        uint8_t *out = j->dst + r * j->row_bytes;
        if (j->info->type == RW_TYPE_F32) memcpy(out, x, j->n_in * sizeof *x);
        else {
            rw_status s = rw_quantize_row(j->info->type, x, out, (int64_t)j->n_in);
            if (s) {
                rw_status ok = RW_OK;
                atomic_compare_exchange_strong(&j->first_err, &ok, s);
                return;
            }
        }
    }
}

static rw_status fill_tensor(void *ctx, const rw_gguf_tensor *info, void *dst, rw_error *err) {
    plan *p = ((void **)ctx)[0];
    const fill_spec *f = ((void **)ctx)[1];
    fill_job j = {
        .f = f, .info = info, .dst = dst, .n_in = info->ne[0], .n_rows = info->ne[1] * info->ne[2] * info->ne[3]};
    rw_dtype_row_bytes(info->type, j.n_in, &j.row_bytes);
    const int n_threads = rw_threadpool_size(p->pool);
    j.x = malloc(j.n_in * (size_t)n_threads * sizeof *j.x); /* freed below */
    if (!j.x) return rw_errorf(err, RW_ERR_NOMEM, "no memory for a row of %s", info->name);
    atomic_init(&j.first_err, RW_OK);
    rw_threadpool_run(p->pool, fill_task, &j, (int64_t)((j.n_rows + FILL_ROWS - 1) / FILL_ROWS));
    free(j.x);
    rw_status s = atomic_load(&j.first_err);
    if (s) return rw_errorf(err, s, "cannot quantize %s to %s", info->name, rw_dtype_name(info->type));
    p->written++;
    if (p->verbose && (p->written % 16 == 0)) fprintf(stderr, "synth: %zu tensors written\n", p->written);
    return RW_OK;
}

/* llama-quantize's "more bits" rule for _M mixes: the first and last eighth
 * of the layers and every third layer in between. */
static bool more_bits(uint32_t il, uint32_t n) { return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2; }

/* The type a weight gets. is_1d / keep_f32 tensors stay F32 (norms, biases,
 * conv kernels, routers), as llama.cpp's converter and quantizer keep them. */
static rw_dtype weight_type(const plan *p, const char *name, uint64_t n_in, int layer, bool keep_f32) {
    if (keep_f32) return RW_TYPE_F32;
    rw_dtype t = p->base_type;
    if (p->experts_mxfp4 && strstr(name, "_exps.")) return RW_TYPE_MXFP4; /* llama-quantize's MXFP4_MOE */
    if (p->k_mix) {
        bool head = !strcmp(name, "output.weight");
        if (head) t = RW_TYPE_Q6_K;
        /* "ffn_down" as llama-quantize matches it: the experts' and the
         * shared expert's down projections too */
        if (layer >= 0 && (strstr(name, "attn_v.") || strstr(name, "ffn_down") || strstr(name, "attn_qkv.")) &&
            more_bits((uint32_t)layer, p->n_layer))
            t = RW_TYPE_Q6_K;
    }
    /* A row the type's blocks do not divide falls back as llama-quantize
     * does: a K-quant to the legacy type of about its size, then Q8_0, then
     * F16 (rows of 2880 in gpt-oss, 4480 in Nemotron Nano 2). */
    if (n_in % rw_dtype_block_size(t) != 0) {
        switch (t) {
        case RW_TYPE_Q4_K: t = RW_TYPE_Q5_0; break;
        case RW_TYPE_Q5_K: t = RW_TYPE_Q5_1; break;
        case RW_TYPE_Q2_K:
        case RW_TYPE_Q3_K:
        case RW_TYPE_IQ4_XS: t = RW_TYPE_IQ4_NL; break;
        default: t = RW_TYPE_Q8_0; break;
        }
        if (n_in % rw_dtype_block_size(t) != 0) t = RW_TYPE_F16;
    }
    return t;
}

static rw_status add3(plan *p, const char *name, int layer, uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                      fill_kind kind, float scale, bool keep_f32, uint64_t seed, float rope_base, rw_error *err) {
    if (p->n == p->cap) return rw_errorf(err, RW_ERR_INTERNAL, "synth: tensor plan full");
    fill_spec *f = &p->specs[p->n];
    f->kind = kind;
    f->scale = scale;
    f->seed = seed ^ hash_name(name);
    f->rope_base = rope_base;
    /* ctx = {plan, spec}: stored as a pair right after the specs */
    void **ctx = (void **)(p->specs + p->cap) + 2 * p->n;
    ctx[0] = p;
    ctx[1] = f;
    p->n++;
    uint64_t ne[3] = {ne0, ne1, ne2};
    rw_dtype t = weight_type(p, name, ne0, layer, keep_f32 || n_dims == 1);
    return rw_gguf_writer_add_tensor(p->w, name, t, n_dims, ne, NULL, fill_tensor, ctx, err);
}

static rw_status add(plan *p, const char *name, int layer, uint32_t n_dims, uint64_t ne0, uint64_t ne1, fill_kind kind,
                     float scale, bool keep_f32, uint64_t seed, float rope_base, rw_error *err) {
    return add3(p, name, layer, n_dims, ne0, ne1, 1, kind, scale, keep_f32, seed, rope_base, err);
}

rw_status rw_synth__add(rw_synth_plan *p, const char *name, int layer, uint32_t n_dims, uint64_t ne0, uint64_t ne1,
                        uint64_t ne2, rw_synth_fill kind, float scale, bool keep_f32, uint64_t seed, rw_error *err) {
    return add3(p, name, layer, n_dims, ne0, ne1, ne2, kind, scale, keep_f32, seed, 0, err);
}

rw_gguf_writer *rw_synth__writer(rw_synth_plan *p) { return p->w; }

/* Names like "blk.3.attn_q.weight". */
const char *rw_synth__blk(char *buf, int il, const char *what) {
    snprintf(buf, 96, "blk.%d.%s", il, what);
    return buf;
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
