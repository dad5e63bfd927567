/* synth_preset.h - private to src/synth: one real model's shapes. */
#ifndef RW_SYNTH_SYNTH_PRESET_H
#define RW_SYNTH_SYNTH_PRESET_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    const char *name;
    const char *arch;
    uint32_t n_embd;    /* E */
    uint32_t n_layer;   /* L (trunk) */
    uint32_t n_head;    /* H */
    uint32_t n_head_kv; /* Hkv */
    uint32_t head_dim;  /* D */
    uint32_t n_ff;      /* F */
    uint32_t n_ctx;     /* context_length */
    float rope_base;
    uint32_t n_rot;      /* rope.dimension_count */
    uint32_t ssm_nv;     /* qwen35: linear-attention value heads */
    uint32_t ssm_nk;     /* qwen35: linear-attention key heads */
    uint32_t ssm_dk;     /* qwen35: key/value head dim (state size) */
    bool tied;           /* no output.weight: the head is token_embd */
    uint32_t real_vocab; /* the real model's vocabulary, for size reports (0 = n/a) */
    /* The fields below are set by name (the dense presets above leave them 0). */
    uint32_t ssm_hd; /* mamba2: head dim (ssm_nv heads, ssm_nk groups, state ssm_dk) */
    /* Hybrids: one letter per layer of the full trunk, "M" Mamba2, "*"
     * attention, "-" MLP (nemotron_h: each layer one of them), "C" short
     * convolution (lfm2; with "*", each followed by an MLP). */
    const char *layers;
    uint32_t n_expert, n_expert_used, ff_exp, ff_shexp; /* MoE */
    uint32_t n_swa;                                     /* sliding window (gemma3, gpt-oss) */
    float rope_scale;       /* rope.scaling.factor (linear for gemma3, YaRN for gpt-oss), 0 = none */
    uint32_t rope_orig_ctx; /* YaRN original context */
} rw_synth_preset;

const rw_synth_preset *rw_synth__find_preset(const char *name);

#endif
