/* presets.c - shapes of real models (sources: ../shared/specs/qwen35.md §10
 * for Qwen3.5, the Qwen3 config for Qwen3-0.6B). */
#include <string.h>

#include "synth/synth_preset.h"

static const rw_synth_preset presets[] = {
    /* name  arch  E  L  H  Hkv  D  F  ctx  rope_base  R  nv  nk  dk  tied  real vocab */
    {"qwen35-0.8b", "qwen35", 1024, 24, 8, 2, 256, 3584, 262144, 1e7f, 64, 16, 16, 128, true, 248320},
    {"qwen35-2b", "qwen35", 2048, 24, 8, 2, 256, 6144, 262144, 1e7f, 64, 16, 16, 128, true, 248320},
    {"qwen35-4b", "qwen35", 2560, 32, 16, 4, 256, 9216, 262144, 1e7f, 64, 32, 16, 128, true, 248320},
    {"qwen35-9b", "qwen35", 4096, 32, 16, 4, 256, 12288, 262144, 1e7f, 64, 32, 16, 128, false, 248320},
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 40960, 1e6f, 128, 0, 0, 0, true, 151936},
    {"qwen3-1.7b", "qwen3", 2048, 28, 16, 8, 128, 6144, 40960, 1e6f, 128, 0, 0, 0, true, 151936},
    {"qwen3-4b", "qwen3", 2560, 36, 32, 8, 128, 9728, 40960, 1e6f, 128, 0, 0, 0, true, 151936},
    {"llama3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 131072, 5e5f, 64, 0, 0, 0, true, 128256},
    /* tiny shapes for tests: every row a multiple of 256 */
    {"qwen3-tiny", "qwen3", 256, 2, 4, 2, 64, 512, 4096, 1e6f, 64, 0, 0, 0, true, 0},
    {"qwen35-tiny", "qwen35", 256, 4, 4, 2, 64, 512, 4096, 1e7f, 16, 4, 2, 64, false, 0},
    {"llama-tiny", "llama", 256, 2, 4, 2, 64, 512, 4096, 5e5f, 64, 0, 0, 0, false, 0},
};

const rw_synth_preset *rw_synth__find_preset(const char *name) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

const char *const *rw_synth_preset_names(void) {
    static const char *names[sizeof presets / sizeof presets[0] + 1];
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) names[i] = presets[i].name;
    return names;
}
