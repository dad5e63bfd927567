/* synth_int.h - private to src/synth. */
#ifndef RW_SYNTH_SYNTH_INT_H
#define RW_SYNTH_SYNTH_INT_H

#include "base/threadpool.h"
#include "gguf/gguf.h"
#include "synth/synth.h"
#include "synth/synth_preset.h"

/* How a tensor's values are made (plan.c's fill_row). */
typedef enum {
    FILL_MATRIX,     /* uniform, std = scale / sqrt(n_in) */
    FILL_NORM,       /* 1 + small noise */
    FILL_SSM_A,      /* -A, A uniform in [1, 16] (ssm_a stores -exp(A_log)) */
    FILL_DT_BIAS,    /* inverse softplus of dt, dt log-uniform in [1e-3, 1e-1] */
    FILL_ROPE_FREQS, /* llama3 rope frequency factors */
} rw_synth_fill;

typedef struct {
    rw_synth_fill kind;
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

typedef struct rw_synth_plan rw_synth_plan;

/* plan.c: adds tensor name {ne0, ne1, ne2} to the plan as rw_synth__add,
 * with the rope base of a FILL_ROPE_FREQS tensor. */
rw_status rw_synth__add_tensor(rw_synth_plan *p, const char *name, int layer, uint32_t n_dims, uint64_t ne0,
                               uint64_t ne1, uint64_t ne2, rw_synth_fill kind, float scale, bool keep_f32,
                               uint64_t seed, float rope_base, rw_error *err);

/* Adds tensor name {ne0, ne1, ne2} (n_dims of them) to the plan, filled as
 * kind says; layer (-1 outside the trunk) and keep_f32 pick its type as
 * llama-quantize would (plan.c's weight_type). */
rw_status rw_synth__add(rw_synth_plan *p, const char *name, int layer, uint32_t n_dims, uint64_t ne0, uint64_t ne1,
                        uint64_t ne2, rw_synth_fill kind, float scale, bool keep_f32, uint64_t seed, rw_error *err);

/* The writer the plan fills. */
rw_gguf_writer *rw_synth__writer(rw_synth_plan *p);

/* Names like "blk.3.attn_q.weight" in buf (96 bytes). */
const char *rw_synth__blk(char *buf, int il, const char *what);

/* The metadata (every key but the tokenizer's) and the trunk's tensors of
 * the architectures archs.c lays out: gemma3, gpt-oss, nemotron_h, lfm2,
 * qwen35moe, qwen3next, granitehybrid. rw_synth__arch_handles says which. */
bool rw_synth__arch_handles(const char *arch);
rw_status rw_synth__arch_metadata(rw_synth_plan *p, const rw_synth_preset *ps, rw_error *err);
rw_status rw_synth__arch_layer(rw_synth_plan *p, const rw_synth_preset *ps, int il, uint64_t seed, rw_error *err);

/* Adds the tokenizer.* keys of the built-in byte-level BPE vocabulary (256
 * byte tokens, merges learned from a small built-in text, a few ChatML
 * special tokens). pre is tokenizer.ggml.pre. *n_vocab gets the size. */
rw_status rw_synth__add_builtin_vocab(rw_gguf_writer *w, const char *pre, uint32_t *n_vocab, rw_error *err);

/* Copies every tokenizer.* key of the GGUF at path. */
rw_status rw_synth__copy_vocab(rw_gguf_writer *w, const char *path, uint32_t *n_vocab, rw_error *err);

/* x[i] = a * (uniform in [-1, 1) from the splitmix64 number i + 1 after
 * state s, whose state advances by step per number), i < n: synth.c's
 * FILL_MATRIX loop, bitwise, in AVX-512 (fill_avx512.c; the caller checks
 * the CPU). */
void rw_synth__fill_uniform_avx512(uint64_t s, uint64_t step, float a, uint64_t n, float *x);

#endif
