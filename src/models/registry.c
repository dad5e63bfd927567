/* registry.c - general.architecture -> architecture descriptor. Adding an
 * architecture = one file with its rw_models__arch + one line here. */
#include <string.h>

#include "models/model_int.h"

static const rw_models__arch *const archs[] = {
    &rw_models__arch_llama,
    &rw_models__arch_qwen2,
    &rw_models__arch_qwen3,
    &rw_models__arch_qwen35,
    &rw_models__arch_qwen35moe,
    &rw_models__arch_qwen3next,
    &rw_models__arch_granitehybrid,
    &rw_models__arch_lfm2,
    &rw_models__arch_nemotron_h,
    &rw_models__arch_gemma3,
    &rw_models__arch_gpt_oss,
};

const rw_models__arch *rw_models__arch_find(const char *name) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(archs[i]->name, name)) return archs[i];
    return NULL;
}

const char *rw_models__arch_name(size_t i) { return i < sizeof archs / sizeof archs[0] ? archs[i]->name : NULL; }

bool rw_model_arch_supported(const char *arch) { return rw_models__arch_find(arch) != NULL; }
