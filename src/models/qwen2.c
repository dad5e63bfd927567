/* qwen2.c - Qwen2 / Qwen2.5: llama's block with biases on q, k and v, and
 * NEOX RoPE (pairs i, i + n_rot/2). */
#include "models/model_int.h"

const rw_models__arch rw_models__arch_qwen2 = {
    .name = "qwen2",
    .rope_kind = RW_ROPE_NEOX,
    .qk_norm = false,
    .qkv_bias = true,
    .read_hparams = rw_models__read_dense_hparams,
    .bind = rw_models__bind_dense,
    .layer = rw_models__dense_layer_forward,
};
