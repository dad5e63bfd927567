/* chat_api.c - a chat request's prompt in the public API (include/rewind.h):
 * the request's JSON texts parsed, then chat/history.c's normalization and
 * adaptation to the template's capabilities; the prepared object is the
 * internal struct itself, handed out behind an opaque type. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/api_int.h"
#include "chat/history.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

void rw_chat_request_init(rw_chat_request *p, size_t size) {
    const rw_chat_request d = {.struct_size = sizeof d, .add_generation_prompt = true, .enable_thinking = -1};
    rw_api__params_out(p, size, &d, sizeof d);
}

#define REQUEST_SIZE_V1 RW_API__END(rw_chat_request, eos_token)

/* Parses one of the request's JSON texts (NULL stays NULL). */
static rw_status parse(const char *what, const char *text, json_t **out, rw_error *err) {
    *out = NULL;
    if (!text) return RW_OK;
    json_error_t je;
    if (!(*out = json_loads(text, JSON_DECODE_ANY, &je)))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "%s: line %d: %s", what, je.line, je.text);
    return RW_OK;
}

rw_status rw_chat_prepare(const rw_chat_caps *caps, const rw_chat_request *req, rw_chat_prepared **out, rw_error *err) {
    if (out) *out = NULL;
    if (!req || !out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_chat_prepare: NULL request or out");
    rw_chat_request r = rw_chat_request_default();
    rw_status st = rw_api__params_in(&r, sizeof r, REQUEST_SIZE_V1, req, "rw_chat_request", err);
    if (st) return st;
    if (!r.messages_json) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_chat_prepare: no messages_json");
    json_t *msgs = NULL, *tools = NULL, *kwargs = NULL;
    if (!(st = parse("messages", r.messages_json, &msgs, err)) && !(st = parse("tools", r.tools_json, &tools, err)))
        st = parse("chat_template_kwargs", r.kwargs_json, &kwargs, err);
    if (!st && tools && !json_is_null(tools) && !json_is_array(tools))
        st = rw_errorf(err, RW_ERR_INVALID_ARG, "tools must be an array");
    rw_chat_prepared *p = NULL;
    if (!st && !(p = calloc(1, sizeof *p))) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    if (!st) {
        const rw_chat_prompt_opts o = {.messages = msgs,
                                       .tools = tools,
                                       .add_generation_prompt = r.add_generation_prompt,
                                       .kwargs = kwargs,
                                       .enable_thinking = r.enable_thinking,
                                       .reasoning_effort = r.reasoning_effort,
                                       .bos_token = r.bos_token,
                                       .eos_token = r.eos_token};
        st = rw_chat_prepare_json(caps, &o, p, err);
    }
    json_decref(msgs);
    json_decref(tools);
    json_decref(kwargs);
    if (!st && ((r.bos_token && !(p->bos_token = strdup(r.bos_token))) ||
                (r.eos_token && !(p->eos_token = strdup(r.eos_token))))) {
        rw_chat_prepared_clear(p);
        st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    if (st) {
        free(p);
        return st;
    }
    /* the variables point into p only: the caller's strings were read during the call */
    p->ro.bos_token = p->vars.bos_token = p->bos_token;
    p->ro.eos_token = p->vars.eos_token = p->eos_token;
    *out = p;
    return RW_OK;
}

void rw_chat_prepared_free(rw_chat_prepared *p) {
    if (!p) return;
    rw_chat_prepared_clear(p);
    free(p);
}

const char *rw_chat_prepared_messages(const rw_chat_prepared *p, size_t *len) {
    if (len) *len = p && p->messages_json ? strlen(p->messages_json) : 0;
    return p ? p->messages_json : NULL;
}

const rw_template_vars *rw_chat_prepared_vars(const rw_chat_prepared *p) { return p ? &p->vars : NULL; }

rw_status rw_chat_render_request(const rw_chat_template *t, const rw_chat_caps *caps, const rw_chat_request *req,
                                 char **out, size_t *out_len, rw_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_chat_render_request: NULL template or out");
    rw_chat_prepared *p = NULL;
    rw_status st = rw_chat_prepare(caps, req, &p, err);
    if (!st) st = rw_chat_template_apply(t, &p->vars, out, out_len, err);
    rw_chat_prepared_free(p);
    return st;
}

rw_status rw_chat_template_load(const char *gguf_path, rw_chat_template **out, char **bos, char **eos,
                                rw_error *err) {
    if (out) *out = NULL;
    if (bos) *bos = NULL;
    if (eos) *eos = NULL;
    if (!gguf_path || !out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_chat_template_load: NULL path or out");
    rw_gguf *g = NULL;
    rw_status st = rw_gguf_open(gguf_path, &g, err);
    if (st) return st;
    char *b = NULL, *e = NULL;
    st = rw_chat_template_from_gguf(g, out, &b, &e, err);
    rw_gguf_close(g);
    if (bos) *bos = b;
    else free(b);
    if (eos) *eos = e;
    else free(e);
    return st;
}

rw_status rw_tokenizer_open(const char *gguf_path, rw_tokenizer **out, rw_error *err) {
    if (out) *out = NULL;
    if (!gguf_path || !out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_tokenizer_open: NULL path or out");
    rw_gguf *g = NULL;
    rw_status st = rw_gguf_open(gguf_path, &g, err);
    if (st) return st;
    st = rw_tokenizer_load(g, out, err); /* the tokenizer copies what it keeps */
    if (st) rw_error_prefix(err, "%s", gguf_path);
    rw_gguf_close(g);
    return st;
}

void rw_tokenizer_close(rw_tokenizer *t) { rw_tokenizer_free(t); }
