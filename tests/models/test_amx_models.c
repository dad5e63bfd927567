/* test_amx_models.c - whole models on the AMX tier give the AVX-512 tier's
 * logits, bit for bit: synthesized models of the dense, hybrid and MoE
 * architectures in the types the AMX tier has kernels for (Q8_0, Q4_K,
 * Q5_K, Q6_K), over a 200-token pass (the panel forms), the same tokens in
 * passes of 20 (the group forms) and the first tokens one at a time (one
 * row), each against the AVX-512 tier's single pass.
 *
 * Runs on the tiles where the CPU has AMX; elsewhere on emulated tiles
 * (kernels/amx_emu.h) where the CPU has AVX-512 VBMI; skipped otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "kernels/amx_emu.h"
#include "kernels/matmul.h"
#include "models/model_int.h"
#include "synth/synth.h"

enum { N = 200, CHUNK = 20, STEPS = 6 };

/* The logits of every token of ids[0..n), run in passes of `chunk` tokens
 * on tier t (the model loaded on it: its panels are the tier's); malloc'd,
 * the caller frees; NULL if the model did not load or run. *V: n_vocab. */
static float *run_on(rw_kernel_tier t, rw_gguf *g, const int32_t *ids, int64_t n, int64_t chunk, int64_t *V) {
    CHECK(rw_kernel_tier_set(t));
    rw_error err = {0};
    rw_model *m = NULL;
    rw_model_seq *s = NULL;
    float *out = NULL;
    bool ok = rw_model_load(g, &m, &err) == RW_OK && rw_model_seq_new(m, RW_KV_F32, 0, &s, &err) == RW_OK;
    if (ok) {
        *V = rw_model_get_hparams(m)->n_vocab;
        ok = (out = malloc((size_t)(n * *V) * sizeof *out)) != NULL;
    }
    for (int64_t i = 0; ok && i < n; i += chunk) {
        rw_forward_args fa = {
            .tokens = ids + i, .n = i + chunk <= n ? chunk : n - i, .logits = out + i * *V, .all_logits = true};
        ok = rw_model_forward(m, s, &fa, &err) == RW_OK;
    }
    CHECK_MSG(ok, "%s: %s", rw_kernel_tier_name(t), err.msg);
    rw_model_seq_free(s);
    rw_model_free(m);
    if (!ok) free(out);
    return ok ? out : NULL;
}

static void check_model(const char *preset, const char *type) {
    char path[] = "/tmp/rw_amx_model_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    rw_synth_options o = {.preset = preset, .type = type, .seed = 3};
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_status st = rw_synth_write(&o, path, &err);
    if (!st) st = rw_gguf_open(path, &g, &err);
    CHECK_MSG(st == RW_OK, "%s %s: %s", preset, type, err.msg);
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 211 + 17) % 400) + 1; /* the tiny vocabularies have 407 */
    int64_t V = 0;
    float *want = st ? NULL : run_on(RW_TIER_AVX512, g, ids, N, N, &V);
    float *one = want ? run_on(RW_TIER_AMX, g, ids, N, N, &V) : NULL;
    float *chunks = want ? run_on(RW_TIER_AMX, g, ids, N, CHUNK, &V) : NULL;
    float *steps = want ? run_on(RW_TIER_AMX, g, ids, STEPS, 1, &V) : NULL;
    if (want && one && chunks && steps) {
        const size_t bytes = (size_t)(N * V) * sizeof(float);
        CHECK_MSG(!memcmp(want, one, bytes), "%s %s: amx's %d-token pass is not avx512's", preset, type, N);
        CHECK_MSG(!memcmp(want, chunks, bytes), "%s %s: amx's passes of %d are not avx512's", preset, type, CHUNK);
        CHECK_MSG(!memcmp(want, steps, (size_t)(STEPS * V) * sizeof(float)),
                  "%s %s: amx's tokens one at a time are not avx512's", preset, type);
        printf("%-18s %-6s amx logits bitwise avx512's (%d in one pass, in passes of %d, %d one at a time; %ld tile "
               "instructions emulated so far)\n",
               preset, type, N, CHUNK, STEPS, (long)amx_emu_executed);
    }
    free(want), free(one), free(chunks), free(steps);
    rw_gguf_close(g);
    unlink(path);
}

int main(void) {
    const char *forced = getenv("RW_KERNELS");
    if (forced && *forced) { /* the suite's run of the AVX2 tier: nothing here for it */
        printf("skipped: RW_KERNELS=%s (this test sets the tiers itself)\n", forced);
        return 77;
    }
    const rw_kernel_tier best = rw_kernel_tier_current();
    if (!rw_kernel_tier_available(RW_TIER_AMX)) {
        if (!amx_emu_install()) {
            printf("skipped: no AMX, and no AVX-512 VBMI to emulate it with (or not x86-64 Linux)\n");
            return 77;
        }
        printf("test_amx_models: the amx tier on emulated tiles (kernels/amx_emu.h)\n");
    }
    /* every AMX type, dense, hybrid and MoE (experts grouped by rows);
     * the sanitizer build (about ten times slower) the first */
    static const char *const cases[][2] = {
        {"qwen35moe-tiny", "q4_k_m"},  {"qwen35-tiny", "q4_k_m"},   {"qwen35-tiny", "q8_0"},
        {"qwen35-tiny", "q5_k_m"},     {"granitehybrid-tiny", "q6_k"}, {"qwen3next-tiny", "q5_k_m"},
        {"nemotron_h-tiny", "q4_k_m"},
    };
    const size_t n_cases = rw_test_sanitized() ? 1 : sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n_cases; i++) check_model(cases[i][0], cases[i][1]);
    rw_kernel_tier_set(best);
    return rw_test_done();
}
