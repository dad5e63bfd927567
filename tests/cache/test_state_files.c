/* test_state_files.c - state files are rejected, with a clear error and the
 * live sequence untouched, when they are truncated anywhere, have any bit
 * flipped, or were made for another model; the operations-table check
 * refuses a state kind that leaves an operation out; a save / load round trip
 * continues bitwise like the original. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "kernels/matmul.h"
#include "models/model.h"

static rw_model *open_model(const char *rel, rw_gguf **g) {
    rw_model *m = NULL;
    rw_error err = {0};
    if (rw_gguf_open(rw_test_fixture_path(rel), g, &err) || rw_model_load(*g, &m, &err)) {
        CHECK_MSG(false, "%s: %s", rel, err.msg);
        return NULL;
    }
    return m;
}

/* Logits of tokens appended to a clone of s (s itself unchanged). */
static void continue_logits(const rw_model_seq *s, rw_model *m, const int32_t *t, int64_t n, float *out) {
    rw_model_seq *c = NULL;
    rw_error err = {0};
    CHECK(rw_model_seq_clone(s, &c, &err) == RW_OK);
    rw_forward_args a = {.tokens = t, .n = n, .logits = out, .all_logits = true};
    CHECK(rw_model_forward(m, c, &a, &err) == RW_OK);
    rw_model_seq_free(c);
}

/* A state of n tokens (n > 29): a long one holds a sliding-window layer's
 * ring only, with pages released before it. */
static void corrupt_model(const char *rel, const char *other_rel, int n) {
    rw_gguf *g = NULL, *g2 = NULL;
    rw_model *m = open_model(rel, &g), *m2 = open_model(other_rel, &g2);
    if (!m || !m2) goto out;
    const int64_t V = rw_model_get_hparams(m)->n_vocab;
    rw_error err = {0};
    rw_model_seq *s = NULL, *t = NULL;
    int32_t *tok = malloc((size_t)(n + 6) * sizeof *tok);
    for (int i = 0; i < n + 6; i++) tok[i] = 3 + (i * 37) % (int32_t)(V - 3);
    CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &s, &err) == RW_OK);
    rw_forward_args a = {.tokens = tok, .n = n};
    CHECK(rw_model_forward(m, s, &a, &err) == RW_OK);
    uint8_t *data = NULL;
    size_t len = 0;
    CHECK(rw_model_seq_save_buffer(s, &data, &len, &err) == RW_OK);
    /* the live target: a sequence holding other tokens, which must survive */
    CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &t, &err) == RW_OK);
    rw_forward_args b = {.tokens = tok + 20, .n = 9};
    CHECK(rw_model_forward(m, t, &b, &err) == RW_OK);
    float *want = malloc((size_t)(6 * V) * sizeof(float)), *got = malloc((size_t)(6 * V) * sizeof(float));
    continue_logits(t, m, tok + n, 6, want);
    /* every truncation point (a stride keeps it quick on big files) */
    size_t step = len / (rw_test_sanitized() ? 300 : 2000) + 1, rejected = 0, tried = 0;
    for (size_t cut = 0; cut < len; cut += (cut < 64 || len - cut < 64) ? 1 : step) {
        tried++;
        if (rw_model_seq_load_buffer(t, data, cut, &err) != RW_OK && err.msg[0]) rejected++;
    }
    CHECK_EQ_INT(rejected, tried);
    /* random bit flips */
    uint64_t r = 12345;
    for (int k = 0; k < 300; k++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t at = (size_t)(r >> 33) % len;
        data[at] ^= (uint8_t)(1u << ((r >> 20) & 7));
        err.msg[0] = 0;
        CHECK_MSG(rw_model_seq_load_buffer(t, data, len, &err) != RW_OK && err.msg[0], "flip at %zu accepted", at);
        data[at] ^= (uint8_t)(1u << ((r >> 20) & 7));
    }
    CHECK_EQ_INT(rw_model_seq_length(t), 9);
    continue_logits(t, m, tok + n, 6, got);
    CHECK_MSG(!memcmp(want, got, (size_t)(6 * V) * sizeof(float)), "%s: a rejected load changed the sequence", rel);
    /* another model's sequence refuses the file */
    rw_model_seq *o = NULL;
    CHECK(rw_model_seq_new(m2, RW_KV_F32, 0, &o, &err) == RW_OK);
    CHECK(rw_model_seq_load_buffer(o, data, len, &err) != RW_OK);
    CHECK_MSG(strstr(err.msg, "another model") != NULL, "%s", err.msg);
    rw_model_seq_free(o);
    /* other numerics refuse it too (the state would not go on bit for bit) */
    rw_numerics_set(RW_NUMERICS_GGML);
    CHECK(rw_model_seq_load_buffer(t, data, len, &err) != RW_OK);
    CHECK_MSG(strstr(err.msg, "other kernels") != NULL, "%s", err.msg);
    rw_numerics_set(RW_NUMERICS_AUTO);
    /* an f16 sequence refuses an f32 file */
    CHECK(rw_model_seq_new(m, RW_KV_F16, 0, &o, &err) == RW_OK);
    CHECK(rw_model_seq_load_buffer(o, data, len, &err) != RW_OK);
    rw_model_seq_free(o);
    /* the intact file loads and continues bitwise like the original */
    CHECK_MSG(rw_model_seq_load_buffer(t, data, len, &err) == RW_OK, "%s", err.msg);
    continue_logits(s, m, tok + n, 6, want);
    continue_logits(t, m, tok + n, 6, got);
    CHECK_MSG(!memcmp(want, got, (size_t)(6 * V) * sizeof(float)), "%s: loaded state continues differently", rel);
    /* every kernel tier computes the same bits, so every tier this CPU runs
     * loads the file and continues it bitwise as the saving tier does */
    const rw_kernel_tier saving = rw_kernel_tier_current();
    for (int tier = 0; tier < RW_TIER_COUNT; tier++) {
        if (!rw_kernel_tier_set((rw_kernel_tier)tier)) continue;
        CHECK_MSG(rw_model_seq_load_buffer(t, data, len, &err) == RW_OK, "%s: tier %s refuses the state: %s", rel,
                  rw_kernel_tier_name((rw_kernel_tier)tier), err.msg);
        continue_logits(t, m, tok + n, 6, got);
        CHECK_MSG(!memcmp(want, got, (size_t)(6 * V) * sizeof(float)), "%s: tier %s continues differently", rel,
                  rw_kernel_tier_name((rw_kernel_tier)tier));
    }
    rw_kernel_tier_set(saving);
    /* through a real file, written atomically */
    char path[] = "/tmp/rw-state-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK(rw_model_seq_save(s, path, &err) == RW_OK);
    rw_model_seq_free(t);
    t = NULL;
    CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &t, &err) == RW_OK);
    CHECK(rw_model_seq_load(t, path, &err) == RW_OK);
    continue_logits(t, m, tok + n, 6, got);
    CHECK(!memcmp(want, got, (size_t)(6 * V) * sizeof(float)));
    unlink(path);
    CHECK(rw_model_seq_load(t, path, &err) != RW_OK);
    printf("%-28s file %zu bytes, %zu truncations and 300 bit flips rejected\n", rel, len, tried);
    free(want), free(got), free(data), free(tok);
    rw_model_seq_free(s), rw_model_seq_free(t);
out:
    rw_model_free(m), rw_model_free(m2);
    rw_gguf_close(g), rw_gguf_close(g2);
}

static void ops_check(void) {
    rw_error err = {0};
    rw_layer_state *st = NULL;
    CHECK(rw_kv_state_new(RW_KV_F16, 2, 8, 8, 64, &st, &err) == RW_OK);
    CHECK(rw_state_ops_check(st->ops, &err) == RW_OK);
    /* a kind that leaves out any operation is refused, naming it */
    rw_state_ops holes = *st->ops;
    holes.rewind = NULL;
    CHECK(rw_state_ops_check(&holes, &err) != RW_OK && strstr(err.msg, "rewind"));
    holes = *st->ops;
    holes.save = NULL;
    CHECK(rw_state_ops_check(&holes, &err) != RW_OK && strstr(err.msg, "save"));
    rw_state_free(st);
}

int main(void) {
    ops_check();
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    corrupt_model("qwen35/qwen35-F32.gguf", "qwen3/qwen3-F32.gguf", 34);
    corrupt_model("granitehybrid/granitehybrid-Q8_0.gguf", "qwen35/qwen35-F32.gguf", 34);
    corrupt_model("lfm2/lfm2-Q8_0.gguf", "granitehybrid/granitehybrid-Q8_0.gguf", 34);
    corrupt_model("qwen3/qwen3-F32.gguf", "llama/llama-F32.gguf", 34);
    /* sliding-window layers past their ring: the file holds runs of pages */
    corrupt_model("gemma3/gemma3-F32.gguf", "gpt-oss/gpt-oss-F32.gguf", 700);
    corrupt_model("gpt-oss/gpt-oss-MXFP4_MOE.gguf", "gemma3/gemma3-F32.gguf", 500);
    return rw_test_done();
}
