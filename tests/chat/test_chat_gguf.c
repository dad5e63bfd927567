/* test_chat_gguf.c - a model file's template and special tokens: the
 * template stored as tokenizer.chat_template, BOS/EOS texts looked up as
 * tokenizer.ggml.tokens[bos_token_id / eos_token_id], ChatML when the file
 * carries no template, and no dependence on the file staying open. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/chat.h"
#include "gguf/gguf.h"
#include "harness.h"

static const char *const tokens[] = {"<unk>", "<|bos|>", "<|eos|>", "hello"};

/* Writes a GGUF with the given template (NULL: none) and BOS/EOS ids (-1:
 * absent) to path. */
static bool write_model(const char *path, const char *tmpl, int bos, int eos) {
    rw_error err = {0};
    rw_gguf_writer *w = rw_gguf_writer_new();
    bool ok = w && rw_gguf_writer_add_str(w, "general.architecture", "llama", &err) == RW_OK &&
              rw_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", tokens, 4, &err) == RW_OK;
    if (ok && tmpl) ok = rw_gguf_writer_add_str(w, "tokenizer.chat_template", tmpl, &err) == RW_OK;
    if (ok && bos >= 0) ok = rw_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos, &err) == RW_OK;
    if (ok && eos >= 0) ok = rw_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos, &err) == RW_OK;
    if (ok) ok = rw_gguf_writer_write(w, path, &err) == RW_OK;
    if (!ok) fprintf(stderr, "write_model: %s\n", err.msg);
    rw_gguf_writer_free(w);
    return ok;
}

/* Loads path's template and tokens, closes the file, renders one user turn.
 * Returns the output (caller frees) or NULL. */
static char *render_model(const char *path, char **bos, char **eos) {
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_chat_template *t = NULL;
    *bos = *eos = NULL;
    if (rw_gguf_open(path, &g, &err) != RW_OK) return fprintf(stderr, "%s\n", err.msg), NULL;
    rw_status s = rw_chat_template_from_gguf(g, &t, bos, eos, &err);
    rw_gguf_close(g); /* the template must not point into the file */
    if (s) return fprintf(stderr, "%s\n", err.msg), NULL;
    rw_chat_render_opts o = {.messages_json = "[{\"role\":\"user\",\"content\":\"Hi\"}]",
                             .add_generation_prompt = true,
                             .enable_thinking = -1,
                             .bos_token = *bos,
                             .eos_token = *eos};
    char *out = NULL;
    size_t len;
    s = rw_chat_template_render(t, &o, &out, &len, &err);
    if (s) fprintf(stderr, "%s\n", err.msg);
    rw_chat_template_free(t);
    return s ? NULL : out;
}

int main(void) {
    char path[] = "/tmp/rw_chat_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return rw_test_done();
    close(fd);
    char *bos, *eos, *out;

    CHECK(write_model(path, "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{{ eos_token }}", 1, 2));
    out = render_model(path, &bos, &eos);
    CHECK_MSG(out && !strcmp(out, "<|bos|>[user:Hi]<|eos|>"), "got [%s]", out ? out : "(null)");
    CHECK(bos && !strcmp(bos, "<|bos|>") && eos && !strcmp(eos, "<|eos|>"));
    free(out), free(bos), free(eos);

    /* no template: ChatML; ids absent or out of range: the tokens stay undefined */
    CHECK(write_model(path, NULL, -1, 99));
    out = render_model(path, &bos, &eos);
    CHECK_MSG(out && !strcmp(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), "got [%s]", out ? out : "(null)");
    CHECK(!bos && !eos);
    free(out), free(bos), free(eos);

    /* a broken template in the file is a template error, not a crash */
    CHECK(write_model(path, "{% if %}", 1, 2));
    rw_gguf *g = NULL;
    rw_chat_template *t = NULL;
    rw_error err = {0};
    CHECK(rw_gguf_open(path, &g, &err) == RW_OK);
    if (g) {
        CHECK(rw_chat_template_from_gguf(g, &t, &bos, &eos, &err) == RW_ERR_TEMPLATE);
        CHECK(!t && !bos && !eos && err.msg[0]);
        rw_gguf_close(g);
    }
    unlink(path);
    return rw_test_done();
}
