/* llama.c - Llama (1/2/3) and the many models converted as "llama":
 * RoPE on adjacent pairs, optional rope_freqs (llama3 frequency factors),
 * optional attention biases, output head untied or tied. */
#include "models/model_int.h"

const mdl_arch mdl_arch_llama = {
    .name = "llama",
    .rope_kind = RW_ROPE_NORM,
    .qk_norm = false,
    .qkv_bias = false,
    .read_hparams = mdl_read_dense_hparams,
    .bind = mdl_bind_dense,
    .layer = mdl_dense_layer_forward,
};
