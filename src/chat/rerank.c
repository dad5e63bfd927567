/* rerank.c - the prompt a yes/no reranker reads (chat.h).
 *
 * Qwen3-Reranker is a causal model asked, in a chat turn, whether a
 * document meets a query: its relevance is the probability of "yes" against
 * "no" as the next token. Files converted for llama.cpp may carry the
 * prompt as tokenizer.chat_template.rerank with {query} and {document} in
 * its text; without one, the model card's prompt is used, with an
 * instruction. The query and the document are the user's text: their byte
 * ranges come back so that the caller tokenizes them as text (control-token
 * text inside them stays text). */
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "gguf/gguf.h"

/* Qwen3-Reranker's prompt, as its model card gives it. */
static const char QWEN3_PREFIX[] =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n";
static const char QWEN3_SUFFIX[] = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
static const char DEFAULT_INSTRUCTION[] = "Given a web search query, retrieve relevant passages that answer the query";

typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap * 2 : 1024;
        while (c < b->len + n + 1) c *= 2;
        char *p = realloc(b->buf, c);
        if (!p) {
            b->oom = true;
            return;
        }
        b->buf = p, b->cap = c;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = 0;
}

/* Appends the user's text s as one guarded range. */
static void put_text(sbuf *b, const char *s, size_t *plain, size_t *n_ranges) {
    const bool guard = *n_ranges < RW_CHAT_RERANK_RANGES;
    if (guard) plain[2 * *n_ranges] = b->len;
    put(b, s, strlen(s));
    if (guard) plain[2 * (*n_ranges)++ + 1] = b->len;
}

rw_status rw_chat_rerank_prompt(const char *tmpl, const char *instruction, const char *query, const char *document,
                                char **text, size_t *len, size_t *plain, size_t *n_ranges, rw_error *err) {
    *text = NULL;
    *len = *n_ranges = 0;
    if (!query || !document) return rw_errorf(err, RW_ERR_INVALID_ARG, "rerank: no query or document");
    sbuf b = {0};
    if (tmpl) {
        if (!strstr(tmpl, "{query}") || !strstr(tmpl, "{document}"))
            return rw_errorf(err, RW_ERR_INVALID_ARG, "the rerank template needs {query} and {document}");
        const char *t = tmpl;
        while (*t) {
            const char *q = strstr(t, "{query}"), *d = strstr(t, "{document}");
            const char *at = q && (!d || q < d) ? q : d;
            if (!at) {
                put(&b, t, strlen(t));
                break;
            }
            put(&b, t, (size_t)(at - t));
            put_text(&b, at == q ? query : document, plain, n_ranges);
            t = at + (at == q ? strlen("{query}") : strlen("{document}"));
        }
    } else {
        put(&b, QWEN3_PREFIX, strlen(QWEN3_PREFIX));
        put(&b, "<Instruct>: ", strlen("<Instruct>: "));
        put_text(&b, instruction ? instruction : DEFAULT_INSTRUCTION, plain, n_ranges);
        put(&b, "\n<Query>: ", strlen("\n<Query>: "));
        put_text(&b, query, plain, n_ranges);
        put(&b, "\n<Document>: ", strlen("\n<Document>: "));
        put_text(&b, document, plain, n_ranges);
        put(&b, QWEN3_SUFFIX, strlen(QWEN3_SUFFIX));
    }
    if (b.oom || !b.buf) {
        free(b.buf);
        *n_ranges = 0;
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    *text = b.buf;
    *len = b.len;
    return RW_OK;
}

char *rw_chat_rerank_template_from_gguf(const struct rw_gguf *g) {
    const char *key = "tokenizer.chat_template.rerank";
    rw_gguf_str s = {0};
    if (!rw_gguf_get(g, key) || rw_gguf_get_str(g, key, &s, NULL) || !s.len || memchr(s.ptr, 0, s.len)) return NULL;
    return strndup(s.ptr, s.len);
}
