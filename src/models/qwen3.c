/* qwen3.c - Qwen3 (dense): per-head RMS norm of q and k before NEOX RoPE,
 * no biases, head_dim from attention.key_length (q width may differ from
 * n_embd), usually tied embeddings. */
#include "models/model_int.h"

const rw_models__arch rw_models__arch_qwen3 = {
    .name = "qwen3",
    .rope_kind = RW_ROPE_NEOX,
    .qk_norm = true,
    .qkv_bias = false,
    .read_hparams = rw_models__read_dense_hparams,
    .bind = rw_models__bind_dense,
    .layer = rw_models__dense_layer_forward,
};
