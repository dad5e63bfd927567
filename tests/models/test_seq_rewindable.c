/* test_seq_rewindable.c - a sequence made not rewindable
 * (rw_model_seq_set_rewindable(s, false), as bench model's) keeps no
 * recurrent checkpoint and holds less than a rewindable one, computes the
 * same logits, and can still be rewound exactly (recomputing from 0). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models/model.h"

int main(void) {
    const char *path = rw_test_fixture_path("qwen35/qwen35-Q8_0.gguf");
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    rw_error err = {0};
    if (rw_gguf_open(path, &g, &err) || rw_model_load(g, &m, &err)) rw_test_skip("no qwen35 fixture");
    const int64_t V = rw_model_get_hparams(m)->n_vocab, N = 70, R = 37;
    int32_t tok[70];
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 31 + 5) % V);
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    rw_model_seq *keep = NULL, *lean = NULL;
    CHECK(rw_model_seq_new(m, RW_KV_F32, N, &keep, &err) == RW_OK);
    CHECK(rw_model_seq_new(m, RW_KV_F32, N, &lean, &err) == RW_OK);
    if (keep && lean) {
        rw_model_seq_set_rewindable(lean, false);
        rw_forward_args fa = {.tokens = tok, .n = N, .logits = a};
        CHECK(rw_model_forward(m, keep, &fa, &err) == RW_OK);
        fa.logits = b;
        CHECK(rw_model_forward(m, lean, &fa, &err) == RW_OK);
        CHECK(!memcmp(a, b, sizeof(float) * (size_t)V));
        int64_t pos[64];
        CHECK(rw_model_seq_checkpoints(keep, pos, 64) > 0);
        const int n_lean = rw_model_seq_checkpoints(lean, pos, 64);
        CHECK_MSG(n_lean == 0 || (n_lean == 1 && pos[0] == 0), "%d checkpoints kept", n_lean);
        CHECK(rw_model_seq_bytes(lean) < rw_model_seq_bytes(keep));
        /* rewind both to R and run the same tail: same logits */
        CHECK(rw_model_seq_rewind(keep, R, NULL, &err) == RW_OK);
        CHECK(rw_model_seq_rewind(lean, R, NULL, &err) == RW_OK);
        rw_forward_args ta = {.tokens = tok + R + 1, .n = N - R - 1, .logits = a};
        CHECK(rw_model_forward(m, keep, &ta, &err) == RW_OK);
        ta.logits = b;
        CHECK(rw_model_forward(m, lean, &ta, &err) == RW_OK);
        CHECK(!memcmp(a, b, sizeof(float) * (size_t)V));
    }
    rw_model_seq_free(keep);
    rw_model_seq_free(lean);
    free(a), free(b);
    rw_model_free(m);
    rw_gguf_close(g);
    return rw_test_done();
}
