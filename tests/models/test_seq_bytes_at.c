/* test_seq_bytes_at.c - rw_model_seq_bytes_at, the estimate the server's
 * default running-state budget is made of: a sequence filled to n_ctx
 * positions (in passes of uneven sizes, with the default retention and with
 * a checkpoint count) holds at most the estimate, and the estimate is not
 * far above it (a dense, a hybrid DeltaNet, a short-conv and two
 * sliding-window models). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models/model.h"

static void check_model(const char *rel, rw_kv_type kv, int64_t n_ctx, int max_ckpt) {
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    rw_error err = {0};
    if (rw_gguf_open(rw_test_fixture_path(rel), &g, &err) || rw_model_load(g, &m, &err)) {
        CHECK_MSG(false, "%s: %s", rel, err.msg);
        rw_gguf_close(g);
        return;
    }
    const int64_t V = rw_model_get_hparams(m)->n_vocab;
    int32_t *tok = malloc(sizeof *tok * (size_t)n_ctx); /* freed below */
    for (int64_t i = 0; i < n_ctx; i++) tok[i] = (int32_t)((i * 37 + 11) % V);
    rw_model_seq *s = NULL;
    CHECK(rw_model_seq_new(m, kv, n_ctx, &s, &err) == RW_OK);
    if (s && max_ckpt > 0) rw_model_seq_limit_checkpoints(s, max_ckpt);
    size_t peak = 0;
    static const int64_t chunks[] = {7, 1, 64, 33, 128};
    for (int64_t t = 0, k = 0; s && t < n_ctx; k++) {
        int64_t c = chunks[k % 5];
        if (c > n_ctx - t) c = n_ctx - t;
        rw_forward_args fa = {.tokens = tok + t, .n = c};
        CHECK(rw_model_forward(m, s, &fa, &err) == RW_OK);
        t += c;
        const size_t b = rw_model_seq_bytes(s);
        if (b > peak) peak = b;
    }
    const size_t est = rw_model_seq_bytes_at(m, kv, n_ctx, max_ckpt);
    printf("%-28s ctx %lld ckpt %d: held at most %zu, estimate %zu\n", rel, (long long)n_ctx, max_ckpt, peak, est);
    CHECK_MSG(peak <= est, "%s: a sequence held %zu bytes, more than the estimate %zu", rel, peak, est);
    CHECK_MSG(est <= 2 * peak + ((size_t)1 << 20), "%s: estimate %zu far above the %zu held", rel, est, peak);
    CHECK(rw_model_seq_bytes_at(m, kv, 0, 0) == 0);
    rw_model_seq_free(s);
    free(tok);
    rw_model_free(m);
    rw_gguf_close(g);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    const int64_t n = rw_test_sanitized() ? 200 : 1100;
    check_model("qwen3/qwen3-Q8_0.gguf", RW_KV_F16, n, 0);
    check_model("qwen35/qwen35-Q8_0.gguf", RW_KV_F16, n, 0);
    check_model("qwen35/qwen35-Q8_0.gguf", RW_KV_F32, n, 3);
    check_model("lfm2/lfm2-Q8_0.gguf", RW_KV_F16, n, 0);
    /* sliding windows: the whole span by default, the ring and a bounded span with a count */
    check_model("gemma3/gemma3-Q8_0.gguf", RW_KV_F16, n, 0);
    check_model("gemma3/gemma3-Q8_0.gguf", RW_KV_F16, n, 2);
    check_model("gpt-oss/gpt-oss-MXFP4_MOE.gguf", RW_KV_F32, n, 3);
    return rw_test_done();
}
