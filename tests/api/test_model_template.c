/* test_model_template.c - a model file whose chat template does not parse
 * still opens (rw_model_open), as llama.cpp loads such a file: tokens,
 * generation and state work, and the chat calls report the template's parse
 * error (RW_ERR_TEMPLATE) instead; an override (rw_model_params
 * .chat_template) replaces the broken template. The file is a fixture model
 * rewritten with every key and tensor as it was but the template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "harness.h"
#include "rewind.h"

/* src rewritten to dst with tokenizer.chat_template = tmpl. */
static bool rewrite(const char *src, const char *dst, const char *tmpl) {
    rw_gguf *g = NULL;
    rw_error err = {0};
    if (rw_gguf_open(src, &g, &err)) return false;
    rw_gguf_writer *w = rw_gguf_writer_new(); /* freed below */
    bool ok = w != NULL;
    for (size_t i = 0; ok && i < rw_gguf_n_kv(g); i++) {
        const rw_gguf_kv *kv = rw_gguf_kv_at(g, i);
        if (strcmp(kv->key, "tokenizer.chat_template")) ok = !rw_gguf_writer_add_kv(w, kv->key, &kv->value, &err);
    }
    ok = ok && !rw_gguf_writer_add_str(w, "tokenizer.chat_template", tmpl, &err);
    for (size_t i = 0; ok && i < rw_gguf_n_tensors(g); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
        ok = !rw_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, NULL, NULL, &err);
    }
    ok = ok && !rw_gguf_writer_write(w, dst, &err);
    if (!ok) fprintf(stderr, "rewrite: %s\n", err.msg);
    rw_gguf_writer_free(w);
    rw_gguf_close(g);
    return ok;
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    char path[] = "/tmp/rw_tmpl_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return rw_test_done();
    close(fd);
    CHECK(rewrite(rw_test_fixture_path("qwen3/qwen3-F32.gguf"), path, "{% if %}broken"));

    rw_model *m = NULL;
    rw_error err = {0};
    CHECK_MSG(rw_model_open(path, NULL, &m, &err) == RW_OK, "%s", err.msg);
    if (m) {
        CHECK(rw_model_chat_template(m) == NULL);
        char *out = NULL;
        CHECK(rw_chat_render_json(m, "[{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, true, -1, &out, &err) ==
                  RW_ERR_TEMPLATE &&
              !out);
        CHECK_MSG(strstr(err.msg, "chat template") != NULL, "%s", err.msg);
        const rw_chat_message msg = {.role = "user", .content = "Hi"};
        CHECK(rw_chat_render(m, &msg, 1, true, &out, &err) == RW_ERR_TEMPLATE && !out);
        /* everything else works: tokens in and out, a sequence's evaluation */
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(rw_model_tokenize(m, "Hello world", 11, true, false, &ids, &n, &err) == RW_OK && n > 0);
        rw_seq *s = NULL;
        CHECK_MSG(rw_seq_new(m, 0, false, &s, &err) == RW_OK, "%s", err.msg);
        if (s && ids) CHECK_MSG(rw_seq_eval(s, ids, (int64_t)n, NULL, &err) == RW_OK, "%s", err.msg);
        rw_seq_free(s);
        rw_free(ids);
        rw_model_close(m);
    }

    /* an override replaces the broken template */
    rw_model_params mp = rw_model_params_default();
    mp.chat_template = "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}";
    m = NULL;
    CHECK_MSG(rw_model_open(path, &mp, &m, &err) == RW_OK, "%s", err.msg);
    if (m) {
        char *out = NULL;
        CHECK_MSG(rw_chat_render_json(m, "[{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, false, -1, &out, &err) ==
                          RW_OK &&
                      out && !strcmp(out, "[user:Hi]"),
                  "%s", out ? out : err.msg);
        rw_free(out);
        rw_model_close(m);
    }
    unlink(path);
    return rw_test_done();
}
