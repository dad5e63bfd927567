/* from_gguf.c - a model file's chat template and special-token texts. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "gguf/gguf.h"

/* tokens[id] of the key's id, as a new C string, or NULL. */
static char *token_text(const rw_gguf *g, const char *id_key) {
    uint32_t id;
    if (rw_gguf_get_u32(g, id_key, &id, NULL) != RW_OK) return NULL;
    const rw_gguf_value *tokens = rw_gguf_get(g, "tokenizer.ggml.tokens");
    rw_gguf_str s;
    if (!tokens || !rw_gguf_arr_str(tokens, id, &s)) return NULL;
    return strndup(s.ptr, (size_t)s.len);
}

rw_status rw_chat_template_from_gguf(const rw_gguf *g, rw_chat_template **t, char **bos, char **eos, rw_error *err) {
    *t = NULL;
    *bos = *eos = NULL;
    rw_gguf_str src;
    rw_status s;
    if (rw_gguf_get_str(g, "tokenizer.chat_template", &src, NULL) == RW_OK)
        s = rw_chat_template_parse(src.ptr, (size_t)src.len, t, err);
    else
        s = rw_chat_template_parse(rw_chat_chatml_template, strlen(rw_chat_chatml_template), t, err);
    if (s) return s;
    *bos = token_text(g, "tokenizer.ggml.bos_token_id");
    *eos = token_text(g, "tokenizer.ggml.eos_token_id");
    return RW_OK;
}
