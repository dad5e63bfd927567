/* test_models_errors.c - a model file with a missing or invalid key, a
 * missing tensor, or a tensor of the wrong shape or type is rejected with an
 * error naming it. The bad files are the qwen3, lfm2, nemotron_h and gemma3
 * F32 fixtures rewritten with one change, in memory. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models/model.h"

typedef struct {
    const char *drop_key;    /* metadata key left out */
    const char *bad_key;     /* u32 key replaced by bad_val (or by the array arr, if set) */
    uint32_t bad_val;
    const int32_t *arr;      /* n_arr i32 values */
    uint64_t n_arr;
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
        if (e->bad_key && !strcmp(kv->key, e->bad_key) && e->arr) rw_gguf_writer_add_arr_i32(w, kv->key, e->arr, e->n_arr, &err);
        else if (e->bad_key && !strcmp(kv->key, e->bad_key)) rw_gguf_writer_add_u32(w, kv->key, e->bad_val, &err);
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

/* Loads src rewritten by each edit and checks the status and message. */
static void check_edits(const rw_gguf *src, const edit *edits, size_t n_edits) {
    rw_error err = {0};
    for (size_t i = 0; i < n_edits; i++) {
        size_t size = 0;
        void *buf = build(src, &edits[i], &size);
        rw_gguf *g = NULL;
        rw_model *m = NULL;
        err = (rw_error){0};
        rw_status st = rw_gguf_open_memory(buf, size, &g, &err);
        CHECK_MSG(st == RW_OK, "edit %zu: %s", i, err.msg);
        if (st == RW_OK) {
            st = rw_model_load(g, &m, &err);
            CHECK_MSG(st == edits[i].want, "edit %zu: status %s (%s)", i, rw_status_name(st), err.msg);
            if (edits[i].want_msg)
                CHECK_MSG(strstr(err.msg, edits[i].want_msg) != NULL, "edit %zu: message \"%s\"", i, err.msg);
            CHECK((st == RW_OK) == (m != NULL));
        }
        rw_model_free(m);
        rw_gguf_close(g);
        free(buf);
    }
}

/* lfm2: the per-layer head_count_kv array, the short-conv tensors and the
 * final norm stored as token_embd_norm. */
static void check_lfm2(void) {
    rw_error err = {0};
    rw_gguf *src = NULL;
    if (rw_gguf_open(rw_test_fixture_path("lfm2/lfm2-F32.gguf"), &src, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        return;
    }
    static const int32_t short5[] = {0, 0, 2, 0, 2}, odd[] = {0, 0, 3, 0, 2, 0}, mixed[] = {0, 0, 2, 0, 1, 0},
                         neg[] = {0, 0, 2, 0, -2, 0};
    const char *kv = "lfm2.attention.head_count_kv";
    const edit edits[] = {
        {.want = RW_OK},
        {.bad_key = kv, .arr = short5, .n_arr = 5, .want = RW_ERR_FORMAT,
         .want_msg = "lfm2.attention.head_count_kv has 5 entries, block_count is 6"},
        {.bad_key = kv, .arr = odd, .n_arr = 6, .want = RW_ERR_FORMAT, .want_msg = "head_count_kv[2] = 3"},
        {.bad_key = kv, .arr = neg, .n_arr = 6, .want = RW_ERR_FORMAT, .want_msg = "head_count_kv[4] = -2"},
        {.bad_key = kv, .arr = mixed, .n_arr = 6, .want = RW_ERR_UNSUPPORTED, .want_msg = "different KV head counts"},
        /* one value for every layer: all short conv, and layer 2 has none of its tensors */
        {.bad_key = kv, .bad_val = 0, .want = RW_ERR_FORMAT, .want_msg = "missing tensor blk.2.shortconv.in_proj.weight"},
        {.drop_key = kv, .want = RW_ERR_FORMAT, .want_msg = "missing metadata key lfm2.attention.head_count_kv"},
        {.drop_key = "lfm2.shortconv.l_cache", .want = RW_ERR_FORMAT, .want_msg = "lfm2.shortconv.l_cache"},
        {.bad_key = "lfm2.shortconv.l_cache", .bad_val = 1, .want = RW_ERR_FORMAT, .want_msg = "l_cache = 1"},
        {.bad_key = "lfm2.attention.head_count", .bad_val = 3, .want = RW_ERR_FORMAT, .want_msg = "head size"},
        {.drop_tensor = "token_embd_norm.weight", .want = RW_ERR_FORMAT, .want_msg = "missing tensor token_embd_norm.weight"},
        {.drop_tensor = "blk.3.shortconv.conv.weight", .want = RW_ERR_FORMAT, .want_msg = "blk.3.shortconv.conv.weight"},
        {.reshape = "blk.0.shortconv.conv.weight", .want = RW_ERR_FORMAT, .want_msg = "blk.0.shortconv.conv.weight must be F32 {3, 256}"},
        {.reshape = "blk.1.shortconv.in_proj.weight", .want = RW_ERR_FORMAT, .want_msg = "blk.1.shortconv.in_proj.weight has shape"},
        {.drop_tensor = "blk.4.attn_k_norm.weight", .want = RW_ERR_FORMAT, .want_msg = "missing tensor blk.4.attn_k_norm.weight"},
    };
    check_edits(src, edits, sizeof edits / sizeof edits[0]);
    rw_gguf_close(src);
}

/* nemotron_h: its per-layer arrays (n_ff = [0,512,0,0,0,512], n_kv =
 * [0,0,0,2,0,0] decide each block's kind), the ssm keys and the tensors of
 * each kind of block. */
static void check_nemotron_h(void) {
    rw_error err = {0};
    rw_gguf *src = NULL;
    if (rw_gguf_open(rw_test_fixture_path("nemotron_h/nemotron_h-F32.gguf"), &src, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        return;
    }
    static const int32_t ff5[] = {0, 512, 0, 0, 0}, kv7[] = {0, 0, 0, 2, 0, 0, 0}, kv3[] = {0, 0, 0, 3, 0, 0},
                         neg[] = {0, 512, 0, 0, -1, 512};
    const char *ff = "nemotron_h.feed_forward_length", *kv = "nemotron_h.attention.head_count_kv";
    const edit edits[] = {
        {.want = RW_OK},
        {.bad_key = ff, .arr = ff5, .n_arr = 5, .want = RW_ERR_FORMAT,
         .want_msg = "nemotron_h.feed_forward_length has 5 entries, block_count is 6"},
        {.bad_key = kv, .arr = kv7, .n_arr = 7, .want = RW_ERR_FORMAT,
         .want_msg = "nemotron_h.attention.head_count_kv has 7 entries, block_count is 6"},
        {.bad_key = kv, .arr = kv3, .n_arr = 6, .want = RW_ERR_FORMAT,
         .want_msg = "head_count_kv = 3 for layer 3 must divide head_count 4"},
        {.bad_key = ff, .arr = neg, .n_arr = 6, .want = RW_ERR_FORMAT,
         .want_msg = "feed_forward_length: entry 4 is not a non-negative integer"},
        {.drop_key = ff, .want = RW_ERR_FORMAT, .want_msg = "missing metadata key nemotron_h.feed_forward_length"},
        {.drop_key = "nemotron_h.ssm.state_size", .want = RW_ERR_FORMAT,
         .want_msg = "missing metadata key nemotron_h.ssm.state_size"},
        /* one value for every layer: all MLP blocks, and block 0 has no MLP */
        {.bad_key = ff, .bad_val = 512, .want = RW_ERR_FORMAT, .want_msg = "missing tensor blk.0.ffn_up.weight"},
        {.drop_tensor = "blk.5.ffn_down.weight", .want = RW_ERR_FORMAT, .want_msg = "missing tensor blk.5.ffn_down.weight"},
        {.drop_tensor = "blk.2.ssm_d", .want = RW_ERR_FORMAT, .want_msg = "missing tensor blk.2.ssm_d"},
        {.drop_tensor = "output.weight", .want = RW_OK}, /* tied: token_embd is the head */
        {.reshape = "blk.3.attn_k.weight", .want = RW_ERR_FORMAT, .want_msg = "blk.3.attn_k.weight has shape"},
        {.retype = "blk.4.ssm_norm.weight", .want = RW_ERR_FORMAT, .want_msg = "blk.4.ssm_norm.weight must be F32"},
    };
    check_edits(src, edits, sizeof edits / sizeof edits[0]);
    rw_gguf_close(src);
}

/* gemma3: its own tensors and keys (a window of 0 or no pattern key is
 * valid: every layer global, llama.cpp's pattern 6). */
static void check_gemma3(void) {
    rw_error err = {0};
    rw_gguf *src = NULL;
    if (rw_gguf_open(rw_test_fixture_path("gemma3/gemma3-F32.gguf"), &src, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        return;
    }
    const edit edits[] = {
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
    check_edits(src, edits, sizeof edits / sizeof edits[0]);
    rw_gguf_close(src);
}

/* gpt-oss: its sinks, biases and expert tensors, and its keys (no window:
 * every layer sees everything). */
static void check_gpt_oss(void) {
    rw_error err = {0};
    rw_gguf *src = NULL;
    if (rw_gguf_open(rw_test_fixture_path("gpt-oss/gpt-oss-F32.gguf"), &src, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        return;
    }
    const edit edits[] = {
        {.want = RW_OK},
        {.drop_tensor = "blk.1.attn_sinks.weight", .want = RW_ERR_FORMAT, .want_msg = "missing tensor blk.1.attn_sinks.weight"},
        {.drop_tensor = "blk.0.attn_output.bias", .want = RW_ERR_FORMAT, .want_msg = "missing tensor blk.0.attn_output.bias"},
        {.drop_tensor = "blk.3.ffn_down_exps.bias", .want = RW_ERR_FORMAT,
         .want_msg = "missing tensor blk.3.ffn_down_exps.bias"},
        {.drop_tensor = "blk.2.ffn_gate_inp.bias", .want = RW_ERR_FORMAT, .want_msg = "missing tensor blk.2.ffn_gate_inp.bias"},
        {.reshape = "blk.0.ffn_up_exps.weight", .want = RW_ERR_FORMAT, .want_msg = "blk.0.ffn_up_exps.weight has shape"},
        {.reshape = "blk.1.attn_sinks.weight", .want = RW_ERR_FORMAT, .want_msg = "blk.1.attn_sinks.weight has shape"},
        {.bad_key = "gpt-oss.expert_used_count", .bad_val = 9, .want = RW_ERR_FORMAT, .want_msg = "invalid MoE metadata"},
        {.drop_key = "gpt-oss.expert_feed_forward_length", .want = RW_ERR_FORMAT,
         .want_msg = "missing metadata key gpt-oss.expert_feed_forward_length"},
        {.bad_key = "gpt-oss.attention.sliding_window", .bad_val = 0, .want = RW_OK},
        {.drop_key = "gpt-oss.attention.sliding_window", .want = RW_OK},
        {.bad_key = "gpt-oss.attention.sliding_window", .bad_val = (1u << 31), .want = RW_ERR_FORMAT,
         .want_msg = "sliding_window"},
    };
    check_edits(src, edits, sizeof edits / sizeof edits[0]);
    rw_gguf_close(src);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_error err = {0};
    rw_gguf *src = NULL;
    if (rw_gguf_open(rw_test_fixture_path("qwen3/qwen3-F32.gguf"), &src, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
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
    check_edits(src, edits, sizeof edits / sizeof edits[0]);
    rw_gguf_close(src);
    check_lfm2();
    check_nemotron_h();
    check_gemma3();
    check_gpt_oss();
    return rw_test_done();
}
