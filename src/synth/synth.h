/* synth.h - random-weight models with the shapes of real ones.
 *
 * No real weights can be downloaded where rewind is built and tested, so
 * benchmarks and the demo run on files made here: the exact metadata keys,
 * tensor names, shapes and types llama.cpp's converter and llama-quantize
 * produce for the real model, filled with seeded random values whose scales
 * keep activations well-behaved (logits spread a few units). */
#ifndef RW_SYNTH_SYNTH_H
#define RW_SYNTH_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef struct {
    const char *arch;   /* general.architecture, checked against the preset's (NULL: the preset's) */
    const char *preset; /* e.g. "qwen35-0.8b" (see rw_synth_preset_names) */
    const char *type;   /* weight type: f32 f16 bf16 q8_0 q4_0 ... q6_k, or a
                               llama-quantize mix q4_k_m / q5_k_m / q3_k_m, or mxfp4_moe (experts MXFP4, the rest Q8_0); NULL = q8_0 */
    uint64_t seed;
    const char *vocab_path; /* copy tokenizer.* from this GGUF; NULL = built-in vocabulary */
    bool mtp;               /* qwen35: add the MTP block (nextn_predict_layers = 1) */
    /* Layers of the trunk: 0 = the preset's; fewer makes a shallow model
     * whose every tensor (embeddings, output head, the first n_layer blocks)
     * is bitwise the full model's of the same seed (each tensor's values
     * come from seed and name only): a cheap draft for speculative decoding
     * that agrees with the full model more often than chance. */
    uint32_t n_layer;
    bool verbose;  /* progress on stderr */
    int n_threads; /* threads quantizing (0: every core); the file is bitwise the same for any */
} rw_synth_options;

/* Writes the model to out_path (atomically: via out_path.tmp). */
rw_status rw_synth_write(const rw_synth_options *o, const char *out_path, rw_error *err);

/* Preset names, NULL-terminated, for usage messages. */
const char *const *rw_synth_preset_names(void);

#endif
