/* registry.c - general.architecture -> architecture descriptor. Adding an
 * architecture = one file with its mdl_arch + one line here. */
#include <string.h>

#include "models/model_int.h"

static const mdl_arch *const archs[] = {
    &mdl_arch_llama,
    &mdl_arch_qwen2,
    &mdl_arch_qwen3,
    &mdl_arch_qwen35,
    &mdl_arch_qwen35moe,
    &mdl_arch_qwen3next,
    &mdl_arch_granitehybrid,
};

const mdl_arch *mdl_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(archs[i]->name, name)) return archs[i];
    return NULL;
}

bool rw_model_arch_supported(const char *arch) { return mdl_arch_find(arch) != NULL; }
