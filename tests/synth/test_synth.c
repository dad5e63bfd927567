/* test_synth.c - `rewind synth` files follow llama.cpp's conventions (keys,
 * names, shapes, types), hold well-scaled values, and are reproducible. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "harness.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "synth/synth.h"

static char dir[] = "/tmp/rw_synth_XXXXXX";

static rw_gguf *make(const char *preset, const char *type, uint64_t seed, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rw_synth_options o = {.preset = preset, .type = type, .seed = seed};
    rw_error err = {0};
    rw_status s = rw_synth_write(&o, path, &err);
    CHECK_MSG(s == RW_OK, "synth %s %s: %s", preset, type, err.msg);
    rw_gguf *g = NULL;
    if (!s) {
        s = rw_gguf_open(path, &g, &err);
        CHECK_MSG(s == RW_OK, "reopen %s: %s", path, err.msg);
    }
    return g;
}

/* FNV-1a of a tensor's bytes. */
static uint64_t tensor_hash(const rw_gguf *g, const char *name) {
    const rw_gguf_tensor *t = rw_gguf_find_tensor(g, name);
    if (!t) return 0;
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < t->nbytes; i++) h = (h ^ ((const uint8_t *)t->data)[i]) * 1099511628211ull;
    return h;
}

/* Quantizing on several threads writes the same file as on one, and the
 * tensors are those the single-threaded writer made before it went
 * parallel (hashes of its output, seed 7): each row's random
 * stream is entered at its own offset, which must be where one stream
 * through the tensor would be. */
static void check_threads(const char *preset, const char *type, const char *const *names, const uint64_t *hashes,
                          int n_names) {
    char path[3][256];
    rw_gguf *g[3] = {NULL, NULL, NULL};
    for (int t = 0; t < 3; t++) {
        snprintf(path[t], sizeof path[t], "%s/%s-%s-t%d.gguf", dir, preset, type, t + 1);
        rw_synth_options o = {.preset = preset, .type = type, .seed = 7, .n_threads = t + 1};
        rw_error err = {0};
        CHECK_MSG(rw_synth_write(&o, path[t], &err) == RW_OK, "synth %s %s threads %d: %s", preset, type, t + 1,
                  err.msg);
        CHECK(rw_gguf_open(path[t], &g[t], &err) == RW_OK);
    }
    if (g[0] && g[1] && g[2]) {
        for (int t = 1; t < 3; t++)
            CHECK_MSG(rw_gguf_file_size(g[t]) == rw_gguf_file_size(g[0]) &&
                          !memcmp(rw_gguf_file_data(g[t]), rw_gguf_file_data(g[0]), rw_gguf_file_size(g[0])),
                      "%s %s: %d threads write another file than 1", preset, type, t + 1);
        for (int i = 0; i < n_names; i++)
            CHECK_MSG(tensor_hash(g[1], names[i]) == hashes[i], "%s %s: tensor %s is not the one it was", preset,
                      type, names[i]);
    }
    for (int t = 0; t < 3; t++) rw_gguf_close(g[t]);
}

/* The fast tier (the K-quants' AVX-512 search, the 16-lane random fill)
 * writes the file that the reference tier writes, on 2 threads. */
static void check_tiers(const char *preset, const char *type) {
    const rw_kernel_tier best = rw_kernel_tier_current();
    char path[2][256];
    rw_gguf *g[2] = {NULL, NULL};
    for (int r = 0; r < 2; r++) {
        CHECK(rw_kernel_tier_set(r ? RW_TIER_REF : best));
        snprintf(path[r], sizeof path[r], "%s/%s-%s-%s.gguf", dir, preset, type, r ? "ref" : "fast");
        rw_synth_options o = {.preset = preset, .type = type, .seed = 11, .n_threads = 2};
        rw_error err = {0};
        CHECK_MSG(rw_synth_write(&o, path[r], &err) == RW_OK, "synth %s %s: %s", preset, type, err.msg);
        CHECK(rw_gguf_open(path[r], &g[r], &err) == RW_OK);
    }
    CHECK(rw_kernel_tier_set(best));
    if (g[0] && g[1])
        CHECK_MSG(rw_gguf_file_size(g[0]) == rw_gguf_file_size(g[1]) &&
                      !memcmp(rw_gguf_file_data(g[0]), rw_gguf_file_data(g[1]), rw_gguf_file_size(g[0])),
                  "%s %s: the %s tier writes another file than the reference", preset, type, rw_kernel_tier_name(best));
    for (int r = 0; r < 2; r++) rw_gguf_close(g[r]);
}

static void expect_tensor(const rw_gguf *g, const char *name, rw_dtype type, uint64_t ne0, uint64_t ne1) {
    const rw_gguf_tensor *t = rw_gguf_find_tensor(g, name);
    CHECK_MSG(t != NULL, "missing %s", name);
    if (!t) return;
    CHECK_MSG(t->type == type, "%s: type %s, expected %s", name, rw_dtype_name(t->type), rw_dtype_name(type));
    CHECK_MSG(t->ne[0] == ne0 && t->ne[1] == ne1, "%s: ne {%llu, %llu}", name, (unsigned long long)t->ne[0],
              (unsigned long long)t->ne[1]);
}

/* Standard deviation of a tensor's dequantized values. */
static double tensor_std(const rw_gguf *g, const char *name) {
    const rw_gguf_tensor *t = rw_gguf_find_tensor(g, name);
    if (!t) return -1;
    uint64_t n = t->ne[0] * t->ne[1], row_bytes;
    rw_dtype_row_bytes(t->type, t->ne[0], &row_bytes);
    float *x = malloc(n * sizeof *x);
    for (uint64_t r = 0; r < t->ne[1]; r++)
        CHECK(rw_dequantize_row(t->type, (const char *)t->data + r * row_bytes, x + r * t->ne[0], (int64_t)t->ne[0]) == RW_OK);
    double s = 0, s2 = 0;
    for (uint64_t i = 0; i < n; i++) {
        CHECK(isfinite(x[i]));
        s += x[i];
        s2 += (double)x[i] * x[i];
    }
    free(x);
    double m = s / (double)n;
    return sqrt(s2 / (double)n - m * m);
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);

    /* qwen3: tied head, q/k norms, F32 */
    rw_gguf *g = make("qwen3-tiny", "f32", 1, "q3.gguf");
    if (g) {
        char arch[32];
        CHECK(rw_gguf_get_cstr(g, "general.architecture", arch, sizeof arch, NULL) == RW_OK && !strcmp(arch, "qwen3"));
        uint32_t v;
        CHECK(rw_gguf_get_u32(g, "qwen3.block_count", &v, NULL) == RW_OK && v == 2);
        CHECK(rw_gguf_get_u32(g, "qwen3.attention.key_length", &v, NULL) == RW_OK && v == 64);
        uint32_t n_vocab = (uint32_t)rw_gguf_get(g, "tokenizer.ggml.tokens")->arr.n;
        CHECK(n_vocab > 300);
        expect_tensor(g, "token_embd.weight", RW_TYPE_F32, 256, n_vocab);
        CHECK(rw_gguf_find_tensor(g, "output.weight") == NULL);
        expect_tensor(g, "blk.1.attn_q.weight", RW_TYPE_F32, 256, 4 * 64);
        expect_tensor(g, "blk.1.attn_k_norm.weight", RW_TYPE_F32, 64, 1);
        expect_tensor(g, "blk.0.ffn_down.weight", RW_TYPE_F32, 512, 256);
        expect_tensor(g, "blk.0.ffn_norm.weight", RW_TYPE_F32, 256, 1);
        double sd = tensor_std(g, "blk.0.ffn_down.weight");
        CHECK_MSG(fabs(sd - 1 / sqrt(512.0)) < 0.1 / sqrt(512.0), "ffn_down std %g", sd);
        rw_gguf_close(g);
    }

    /* qwen35: the hybrid layer schedule and the Q4_K_M mix */
    g = make("qwen35-tiny", "q4_k_m", 7, "q35.gguf");
    if (g) {
        expect_tensor(g, "blk.0.attn_qkv.weight", RW_TYPE_Q4_K, 256, 2 * 2 * 64 + 4 * 64);
        expect_tensor(g, "blk.3.attn_v.weight", RW_TYPE_Q6_K, 256, 2 * 64); /* last layer: more bits */
        expect_tensor(g, "blk.1.attn_gate.weight", RW_TYPE_Q4_K, 256, 4 * 64);
        expect_tensor(g, "blk.0.ssm_conv1d.weight", RW_TYPE_F32, 4, 2 * 2 * 64 + 4 * 64);
        expect_tensor(g, "blk.0.ssm_a", RW_TYPE_F32, 4, 1);
        expect_tensor(g, "blk.3.attn_q.weight", RW_TYPE_Q4_K, 256, 2 * 4 * 64);
        expect_tensor(g, "blk.3.attn_q_norm.weight", RW_TYPE_F32, 64, 1);
        expect_tensor(g, "blk.3.post_attention_norm.weight", RW_TYPE_F32, 256, 1);
        CHECK(rw_gguf_find_tensor(g, "blk.3.attn_qkv.weight") == NULL);
        expect_tensor(g, "output.weight", RW_TYPE_Q6_K, 256, (uint64_t)rw_gguf_get(g, "tokenizer.ggml.tokens")->arr.n);
        const rw_gguf_value *sec = rw_gguf_get(g, "qwen35.rope.dimension_sections");
        CHECK(sec && sec->type == RW_GGUF_ARRAY && sec->arr.n == 4);
        const rw_gguf_tensor *a = rw_gguf_find_tensor(g, "blk.0.ssm_a");
        for (int i = 0; a && i < 4; i++) CHECK(((const float *)a->data)[i] <= -1.0f);
        rw_gguf_close(g);
    }

    /* llama: rope_freqs, untied head, Q8_0; reproducible and seed-dependent */
    rw_gguf *g1 = make("llama-tiny", "q8_0", 3, "l1.gguf");
    rw_gguf *g2 = make("llama-tiny", "q8_0", 3, "l2.gguf");
    rw_gguf *g3 = make("llama-tiny", "q8_0", 4, "l3.gguf");
    if (g1 && g2 && g3) {
        expect_tensor(g1, "rope_freqs.weight", RW_TYPE_F32, 32, 1);
        expect_tensor(g1, "blk.0.attn_v.weight", RW_TYPE_Q8_0, 256, 128);
        CHECK(rw_gguf_file_size(g1) == rw_gguf_file_size(g2));
        CHECK(memcmp(rw_gguf_file_data(g1), rw_gguf_file_data(g2), rw_gguf_file_size(g1)) == 0);
        const rw_gguf_tensor *a = rw_gguf_find_tensor(g1, "blk.0.attn_v.weight"), *b = rw_gguf_find_tensor(g3, "blk.0.attn_v.weight");
        CHECK(a && b && memcmp(a->data, b->data, a->nbytes) != 0);
    }
    rw_gguf_close(g1);
    rw_gguf_close(g2);
    rw_gguf_close(g3);

    static const char *const q35_names[] = {"token_embd.weight", "blk.0.ffn_down.weight", "blk.0.ssm_a",
                                            "blk.3.attn_q.weight", "output.weight"};
    static const uint64_t q35_hashes[] = {0x6fbdc04dd7ce1b07ull, 0xffd8de18efbfa823ull, 0x175a314d1cc59f81ull,
                                          0xa1c6266facd0d973ull, 0xfb0aea3195f3a64dull};
    check_threads("qwen35-tiny", "q4_k_m", q35_names, q35_hashes, 5);
    static const char *const llama_names[] = {"rope_freqs.weight", "blk.1.ffn_gate.weight"};
    static const uint64_t llama_hashes[] = {0xe378da5eacd74690ull, 0x34705881693f3fdeull};
    check_threads("llama-tiny", "q3_k_m", llama_names, llama_hashes, 2);
    check_tiers("qwen35-tiny", "q4_k_m");
    check_tiers("qwen35-tiny", "q5_k_m");
    check_tiers("qwen3-tiny", "q6_k");
    check_tiers("llama-tiny", "q8_0");

    rw_error err;
    rw_synth_options bad = {.preset = "qwen3-tiny", .type = "q9_9"};
    CHECK(rw_synth_write(&bad, "/tmp/never.gguf", &err) == RW_ERR_INVALID_ARG);
    bad = (rw_synth_options){.preset = "no-such"};
    CHECK(rw_synth_write(&bad, "/tmp/never.gguf", &err) == RW_ERR_INVALID_ARG);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return rw_test_done();
}
