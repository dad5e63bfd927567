/* test_models_errors.c - a model file with a missing or invalid key, a
 * missing tensor, or a tensor of the wrong shape or type is rejected with an
 * error naming it. The bad files are the qwen3 (and gemma3) F32 fixtures
 * rewritten with one change, in memory. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models/model.h"

typedef struct {
    const char *drop_key;    /* metadata key left out */
    const char *bad_key;     /* u32 key replaced by bad_val */
    uint32_t bad_val;
    const char *drop_tensor; /* tensor left out */
    const char *reshape;     /* tensor whose ne[0] is halved (and data cut) */
    const char *retype;      /* F32 vector written as F16 */
    rw_status want;
    const char *want_msg;    /* substring of the error */
} edit;

static void *build(const rw_gguf *src, const edit *e, size_t *size) {
    rw_error err = {0};
    rw_gguf_writer *w = rw_gguf_writer_new();
    for (size_t i = 0; i < rw_gguf_n_kv(src); i++) {
        const rw_gguf_kv *kv = rw_gguf_kv_at(src, i);
        if (e->drop_key && !strcmp(kv->key, e->drop_key)) continue;
        if (e->bad_key && !strcmp(kv->key, e->bad_key)) rw_gguf_writer_add_u32(w, kv->key, e->bad_val, &err);
        else rw_gguf_writer_add_kv(w, kv->key, &kv->value, &err);
    }
    for (size_t i = 0; i < rw_gguf_n_tensors(src); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(src, i);
        if (e->drop_tensor && !strcmp(t->name, e->drop_tensor)) continue;
        uint64_t ne[4];
        memcpy(ne, t->ne, sizeof ne);
        rw_dtype type = t->type;
        if (e->reshape && !strcmp(t->name, e->reshape)) ne[0] /= 2;
        if (e->retype && !strcmp(t->name, e->retype)) type = RW_TYPE_F16;
        rw_gguf_writer_add_tensor(w, t->name, type, t->n_dims, ne, t->data, NULL, NULL, &err);
    }
    char *buf = NULL;
    FILE *f = open_memstream(&buf, size);
    rw_status st = rw_gguf_writer_write_stream(w, f, &err);
    fclose(f);
    rw_gguf_writer_free(w);
    CHECK_MSG(st == RW_OK, "%s", err.msg);
    return buf;
}

/* Every edit of the fixture file rel loads (or fails) as it says. */
static void check_edits(const char *rel, const edit *edits, size_t n_edits) {
    rw_error err = {0};
    rw_gguf *src = NULL;
    if (rw_gguf_open(rw_test_fixture_path(rel), &src, &err)) {
        CHECK_MSG(false, "%s: %s", rel, err.msg);
        return;
    }
    for (size_t i = 0; i < n_edits; i++) {
        size_t size = 0;
        void *buf = build(src, &edits[i], &size);
        rw_gguf *g = NULL;
        rw_model *m = NULL;
        err = (rw_error){0};
        rw_status st = rw_gguf_open_memory(buf, size, &g, &err);
        CHECK_MSG(st == RW_OK, "%s edit %zu: %s", rel, i, err.msg);
        if (st == RW_OK) {
            st = rw_model_load(g, &m, &err);
            CHECK_MSG(st == edits[i].want, "%s edit %zu: status %s (%s)", rel, i, rw_status_name(st), err.msg);
            if (edits[i].want_msg)
                CHECK_MSG(strstr(err.msg, edits[i].want_msg) != NULL, "%s edit %zu: message \"%s\"", rel, i, err.msg);
            CHECK((st == RW_OK) == (m != NULL));
        }
        rw_model_free(m);
        rw_gguf_close(g);
        free(buf);
    }
    rw_gguf_close(src);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    const edit edits[] = {
        {.want = RW_OK},
        {.drop_key = "general.architecture", .want = RW_ERR_FORMAT, .want_msg = "general.architecture"},
        {.drop_key = "qwen3.block_count", .want = RW_ERR_FORMAT, .want_msg = "missing metadata key qwen3.block_count"},
        {.drop_key = "qwen3.attention.layer_norm_rms_epsilon", .want = RW_ERR_FORMAT, .want_msg = "layer_norm_rms_epsilon"},
        {.bad_key = "qwen3.attention.head_count_kv", .bad_val = 3, .want = RW_ERR_FORMAT, .want_msg = "head_count_kv"},
        {.bad_key = "qwen3.embedding_length", .bad_val = 0, .want = RW_ERR_FORMAT, .want_msg = "embedding_length"},
        {.bad_key = "qwen3.block_count", .bad_val = 3, .want = RW_ERR_FORMAT, .want_msg = "missing tensor blk.2.attn_norm.weight"},
        {.drop_tensor = "blk.1.ffn_up.weight", .want = RW_ERR_FORMAT, .want_msg = "missing tensor blk.1.ffn_up.weight"},
        {.drop_tensor = "blk.0.attn_q_norm.weight", .want = RW_ERR_FORMAT, .want_msg = "attn_q_norm"},
        {.drop_tensor = "output_norm.weight", .want = RW_ERR_FORMAT, .want_msg = "output_norm.weight"},
        {.reshape = "blk.0.attn_k.weight", .want = RW_ERR_FORMAT, .want_msg = "blk.0.attn_k.weight has shape {128, 128}, expected {256, 128}"},
        {.reshape = "blk.1.ffn_norm.weight", .want = RW_ERR_FORMAT, .want_msg = "blk.1.ffn_norm.weight has shape"},
        {.retype = "blk.0.attn_norm.weight", .want = RW_ERR_UNSUPPORTED, .want_msg = "blk.0.attn_norm.weight has type F16"},
    };
    check_edits("qwen3/qwen3-F32.gguf", edits, sizeof edits / sizeof edits[0]);
    /* gemma3: its own tensors and keys (a window of 0 or no pattern key is
     * valid: every layer global, llama.cpp's pattern 6) */
    const edit g3[] = {
        {.want = RW_OK},
        {.drop_tensor = "blk.3.post_ffw_norm.weight", .want = RW_ERR_FORMAT,
         .want_msg = "missing tensor blk.3.post_ffw_norm.weight"},
        {.drop_tensor = "blk.0.post_attention_norm.weight", .want = RW_ERR_FORMAT,
         .want_msg = "missing tensor blk.0.post_attention_norm.weight"},
        {.drop_tensor = "blk.2.attn_k_norm.weight", .want = RW_ERR_FORMAT, .want_msg = "attn_k_norm"},
        {.reshape = "blk.5.post_attention_norm.weight", .want = RW_ERR_FORMAT,
         .want_msg = "blk.5.post_attention_norm.weight has shape"},
        {.bad_key = "gemma3.attention.sliding_window_pattern", .bad_val = 5000, .want = RW_ERR_FORMAT,
         .want_msg = "sliding_window_pattern"},
        {.bad_key = "gemma3.attention.sliding_window", .bad_val = 0, .want = RW_OK},
        {.drop_key = "gemma3.attention.sliding_window_pattern", .want = RW_OK},
        {.bad_key = "gemma3.rope.freq_base_swa", .bad_val = 0, .want = RW_ERR_FORMAT, .want_msg = "freq_base_swa"},
    };
    check_edits("gemma3/gemma3-F32.gguf", g3, sizeof g3 / sizeof g3[0]);
    return rw_test_done();
}
