/* qwen2.c - Qwen2 / Qwen2.5: llama's block with biases on q, k and v, and
 * NEOX RoPE (pairs i, i + n_rot/2). */
#include "models/model_int.h"

const mdl_arch mdl_arch_qwen2 = {
    .name = "qwen2",
    .rope_kind = RW_ROPE_NEOX,
    .qk_norm = false,
    .qkv_bias = true,
    .read_hparams = mdl_read_dense_hparams,
    .bind = mdl_bind_dense,
    .layer = mdl_dense_layer_forward,
};
