/* chat.h - chat templates: the Jinja subset real chat templates use, rendered
 * as Hugging Face transformers' apply_chat_template renders them (Jinja2's
 * ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, Python
 * semantics for values, transformers' tojson).
 *
 * Rendering is bounded (output size, work steps, recursion depth): a
 * template that exceeds a limit, or calls raise_exception(msg), fails with
 * RW_ERR_TEMPLATE and a one-line message (for raise_exception: exactly msg). */
#ifndef RW_CHAT_CHAT_H
#define RW_CHAT_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

typedef struct rw_chat_template rw_chat_template;

/* rw_chat_template_parse (a template source, UTF-8, need not be
 * NUL-terminated) and rw_chat_template_free are public (include/rewind.h). */

/* The template's source as parsed (line ends made \n); valid while t lives. */
const char *rw_chat_template_source(const rw_chat_template *t, size_t *len);

typedef struct {
    const char *messages_json;  /* a JSON array of message objects (required) */
    const char *tools_json;     /* a JSON array, or NULL: `tools` is then none */
    bool add_generation_prompt;
    int enable_thinking;        /* 0 or 1, or -1 to leave the variable undefined */
    const char *bos_token;      /* NULL: undefined */
    const char *eos_token;      /* NULL: undefined */
    const char *now;            /* "YYYY-MM-DDTHH:MM:SS" seen by strftime_now; NULL = current local time */
    const char *extra_json;     /* NULL, or a JSON object: each key becomes a template variable, set after the
                                   ones above (so it may override enable_thinking); messages and tools are
                                   not overridden (chat_template_kwargs) */
} rw_chat_render_opts;

/* Renders the template. On success *out is a malloc'd NUL-terminated string
 * (the caller frees it) of *out_len bytes. */
rw_status rw_chat_template_render(const rw_chat_template *t, const rw_chat_render_opts *o, char **out,
                                  size_t *out_len, rw_error *err);

/* The template a model file carries (tokenizer.chat_template), or ChatML if
 * it has none, with the model's BOS/EOS token texts (tokens[bos_token_id],
 * tokens[eos_token_id]; NULL when the file does not name them). The caller
 * frees *t with rw_chat_template_free and *bos, *eos with free(). */
struct rw_gguf;
rw_status rw_chat_template_from_gguf(const struct rw_gguf *g, rw_chat_template **t, char **bos, char **eos,
                                     rw_error *err);

/* The prompt a yes/no reranker reads for one document (rerank.c): the
 * file's rerank template tmpl ({query} and {document} replaced), or NULL
 * for Qwen3-Reranker's own with instruction (NULL: its default). *text is
 * malloc'd (the caller frees it), *len bytes; plain[2i], plain[2i+1] are
 * the byte ranges of the user's texts in it (*n_ranges of them, sorted, at
 * most RW_CHAT_RERANK_RANGES) to tokenize as text. */
rw_status rw_chat_rerank_prompt(const char *tmpl, const char *instruction, const char *query, const char *document,
                                char **text, size_t *len, size_t *plain, size_t *n_ranges, rw_error *err);
/* The file's tokenizer.chat_template.rerank (malloc'd), or NULL. */
char *rw_chat_rerank_template_from_gguf(const struct rw_gguf *g);

/* A plain ChatML template, the fallback for models that carry none. */
extern const char rw_chat_chatml_template[];

#endif
