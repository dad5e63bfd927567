/* render.c - the public API: parse a template once, render it with the
 * variables transformers' apply_chat_template passes. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_int.h"

struct rw_chat_template {
    rw_arena arena; /* nodes and literals */
    node *root;
    const char *src; /* the source as lexed (arena) */
    size_t src_len;
};

typedef struct scope scope;
rw_status rw_chat__exec_root(render *r, const node *root, scope *globals, sbuf *out);
scope *rw_chat__new_scope(render *r);
rw_status rw_chat__set_global(render *r, scope *s, const char *name, value v);

const char rw_chat_chatml_template[] =
    "{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' -}}{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

rw_status rw_chat_template_parse(const char *src, size_t len, rw_chat_template **out, rw_error *err) {
    *out = NULL;
    rw_chat_template *t = calloc(1, sizeof *t);
    if (!t) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    /* Text tokens point into the source, so the template keeps its own copy:
     * the caller may free src (or close the GGUF it came from) right away. */
    char *own = rw_arena_strndup(&t->arena, src, len);
    if (!own) {
        rw_chat_template_free(t);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    /* Jinja turns every \r\n and lone \r of the source into \n (text and
     * string literals alike) before lexing. */
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (own[i] == '\r') {
            own[n++] = '\n';
            if (i + 1 < len && own[i + 1] == '\n') i++;
        } else own[n++] = own[i];
    }
    len = n;
    own[len] = 0;
    t->src = own;
    t->src_len = len;
    token_list tl = {0};
    rw_status s = rw_chat__lex(own, len, &t->arena, &tl, err);
    if (!s) s = rw_chat__parse(&tl, &t->arena, &t->root, err);
    free(tl.v);
    if (s) {
        rw_chat_template_free(t);
        return s;
    }
    *out = t;
    return RW_OK;
}

const char *rw_chat_template_source(const rw_chat_template *t, size_t *len) {
    if (len) *len = t->src_len;
    return t->src;
}

void rw_chat_template_free(rw_chat_template *t) {
    if (!t) return;
    rw_arena_free(&t->arena);
    free(t);
}

/* JSON (jansson) to template values, keeping object key order. */
static rw_status from_json(render *r, json_t *j, value *out, int depth) {
    if (depth > 64) return rw_chat__r_fail(r, 0, "JSON nested too deeply");
    switch (json_typeof(j)) {
    case JSON_NULL: *out = rw_chat__v_none(); return RW_OK;
    case JSON_TRUE: *out = rw_chat__v_bool(true); return RW_OK;
    case JSON_FALSE: *out = rw_chat__v_bool(false); return RW_OK;
    case JSON_INTEGER: *out = rw_chat__v_int(json_integer_value(j)); return RW_OK;
    case JSON_REAL: *out = rw_chat__v_float(json_real_value(j)); return RW_OK;
    case JSON_STRING: *out = rw_chat__v_str(r, json_string_value(j), json_string_length(j)); return r->err->code;
    case JSON_ARRAY: {
        *out = rw_chat__v_list(r);
        size_t i;
        json_t *x;
        json_array_foreach(j, i, x) {
            value v;
            rw_status s = from_json(r, x, &v, depth + 1);
            if (!s) s = rw_chat__v_list_push(r, out->list, v);
            if (s) return s;
        }
        return r->err->code;
    }
    case JSON_OBJECT: {
        *out = rw_chat__v_dict(r);
        const char *k;
        json_t *x;
        json_object_foreach(j, k, x) {
            value v;
            rw_status s = from_json(r, x, &v, depth + 1);
            if (!s) s = rw_chat__v_dict_set(r, out->dict, rw_chat__v_str(r, k, strlen(k)), v);
            if (s) return s;
        }
        return r->err->code;
    }
    }
    return rw_chat__r_fail(r, 0, "unsupported JSON value");
}

static rw_status parse_json_arg(render *r, const char *text, const char *what, value *out) {
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!j) return rw_errorf(r->err, RW_ERR_INVALID_ARG, "%s: invalid JSON at line %d: %s", what, je.line, je.text);
    rw_status s = from_json(r, j, out, 0);
    json_decref(j);
    return s;
}

rw_status rw_chat_template_render(const rw_chat_template *t, const rw_chat_render_opts *o, char **out,
                                  size_t *out_len, rw_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    rw_error local = {0};
    if (!err) err = &local;
    err->code = RW_OK;
    err->msg[0] = 0;
    render r = {.err = err, .opts = o};
    sbuf sb = {0};
    value messages, tools = rw_chat__v_none();
    rw_status s = parse_json_arg(&r, o->messages_json ? o->messages_json : "[]", "messages", &messages);
    if (!s && o->tools_json) s = parse_json_arg(&r, o->tools_json, "tools", &tools);
    scope *g = s ? NULL : rw_chat__new_scope(&r);
    if (!s && !g) s = err->code;
    if (!s) s = rw_chat__set_global(&r, g, "messages", messages);
    if (!s) s = rw_chat__set_global(&r, g, "tools", tools);
    if (!s) s = rw_chat__set_global(&r, g, "documents", rw_chat__v_none());
    if (!s) s = rw_chat__set_global(&r, g, "add_generation_prompt", rw_chat__v_bool(o->add_generation_prompt));
    if (!s && o->enable_thinking >= 0) s = rw_chat__set_global(&r, g, "enable_thinking", rw_chat__v_bool(o->enable_thinking != 0));
    if (!s && o->bos_token) s = rw_chat__set_global(&r, g, "bos_token", rw_chat__v_str(&r, o->bos_token, strlen(o->bos_token)));
    if (!s && o->eos_token) s = rw_chat__set_global(&r, g, "eos_token", rw_chat__v_str(&r, o->eos_token, strlen(o->eos_token)));
    if (!s && o->extra_json) {
        value extra;
        s = parse_json_arg(&r, o->extra_json, "chat_template_kwargs", &extra);
        if (!s && extra.t != V_DICT) s = rw_errorf(err, RW_ERR_INVALID_ARG, "chat_template_kwargs must be an object");
        for (size_t i = 0; !s && i < extra.dict->n; i++) {
            const value *k = &extra.dict->keys[i];
            if ((k->str.n == 8 && !memcmp(k->str.s, "messages", 8)) || (k->str.n == 5 && !memcmp(k->str.s, "tools", 5)))
                continue;
            char *name = rw_chat__r_alloc(&r, k->str.n + 1);
            if (!name) s = err->code;
            else {
                memcpy(name, k->str.s, k->str.n);
                name[k->str.n] = 0;
                s = rw_chat__set_global(&r, g, name, extra.dict->vals[i]);
            }
        }
    }
    if (!s) s = rw_chat__exec_root(&r, t->root, g, &sb);
    rw_arena_free(&r.arena);
    if (s) {
        free(sb.p);
        return s;
    }
    if (!sb.p) {
        sb.p = calloc(1, 1);
        if (!sb.p) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    *out = sb.p;
    if (out_len) *out_len = sb.n;
    return RW_OK;
}
