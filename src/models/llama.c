/* llama.c - Llama (1/2/3) and the many models converted as "llama":
 * RoPE on adjacent pairs, optional rope_freqs (llama3 frequency factors),
 * optional attention biases, output head untied or tied. */
#include "models/model_int.h"

const rw_models__arch rw_models__arch_llama = {
    .name = "llama",
    .rope_kind = RW_ROPE_NORM,
    .qk_norm = false,
    .qkv_bias = false,
    .read_hparams = rw_models__read_dense_hparams,
    .bind = rw_models__bind_dense,
    .layer = rw_models__dense_layer_forward,
};
