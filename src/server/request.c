/* request.c - an OpenAI request body to prompt token ids and generation
 * parameters, with OpenAI's checks: the body must be a JSON object, every
 * field must be known ("Unrecognized request argument supplied: X" as
 * OpenAI says) and of its type (null = default), values in range. Features
 * we do not have are refused with a 400 that says so, never ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/api_int.h"

#define MAX_STOP 16

static const char *const completion_fields[] = {
    "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty",
    "frequency_penalty", "stream", "stream_options", "logprobs", "n", "echo", "best_of", "suffix", "user",
    "logit_bias", "ignore_eos", "return_token_ids", "repeat_penalty", NULL};
static const char *const chat_fields[] = {
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "seed",
    "stop", "presence_penalty", "frequency_penalty", "stream", "stream_options", "logprobs", "top_logprobs", "n",
    "user", "logit_bias", "tools", "tool_choice", "parallel_tool_calls", "response_format", "store", "metadata",
    "ignore_eos", "return_token_ids", "repeat_penalty", NULL};

static bool bad(srv_error *e, const char *param, const char *fmt, const char *a) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a);
    srv_errorf(e, 400, "invalid_request_error", NULL, param, "%s", msg);
    return false;
}

/* Optional number field in [lo, hi]; null or absent keeps *out. */
static bool get_number(json_t *o, const char *k, double lo, double hi, float *out, srv_error *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) return bad(e, k, "'%s' must be a number", k);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) {
        srv_errorf(e, 400, "invalid_request_error", NULL, k, "'%s' must be in [%g, %g], not %g", k, lo, hi, d);
        return false;
    }
    *out = (float)d;
    return true;
}

static bool get_int(json_t *o, const char *k, long long lo, long long hi, long long *out, bool *present,
                    srv_error *e) {
    json_t *v = json_object_get(o, k);
    if (present) *present = false;
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v)) return bad(e, k, "'%s' must be an integer", k);
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        srv_errorf(e, 400, "invalid_request_error", NULL, k, "'%s' must be in [%lld, %lld], not %lld", k, lo, hi, x);
        return false;
    }
    *out = x;
    if (present) *present = true;
    return true;
}

static bool get_bool(json_t *o, const char *k, bool *out, srv_error *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return bad(e, k, "'%s' must be a boolean", k);
    *out = json_is_true(v);
    return true;
}

static bool get_stop(json_t *o, srv_request *r, srv_error *e) {
    json_t *v = json_object_get(o, "stop");
    if (!v || json_is_null(v)) return true;
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v)) return bad(e, "stop", "'%s' must be a string or an array of strings", "stop");
    if (n > MAX_STOP) {
        srv_errorf(e, 400, "invalid_request_error", NULL, "stop", "at most %d stop strings", MAX_STOP);
        return false;
    }
    r->stop = calloc(n ? n : 1, sizeof *r->stop);
    if (!r->stop) return bad(e, "stop", "%s", "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s)) return bad(e, "stop", "'%s' must be a string or an array of strings", "stop");
        if (json_string_length(s) == 0) return bad(e, "stop", "%s", "stop strings may not be empty");
        if (!(r->stop[r->n_stop++] = strdup(json_string_value(s)))) return bad(e, "stop", "%s", "out of memory");
    }
    return true;
}

/* Text of a message's content: a string, or an array of {"type":"text"} parts. */
static json_t *content_text(json_t *c, int idx, srv_error *e) {
    char param[64];
    snprintf(param, sizeof param, "messages.[%d].content", idx);
    if (json_is_string(c)) return json_incref(c);
    if (json_is_null(c)) return json_null();
    if (!json_is_array(c)) {
        bad(e, param, "'%s' must be a string or an array of content parts", param);
        return NULL;
    }
    size_t len = 0, i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *t = json_object_get(part, "type"), *x = json_object_get(part, "text");
        if (!json_is_string(t) || strcmp(json_string_value(t), "text") || !json_is_string(x)) {
            bad(e, param, "%s: only text content parts ({\"type\": \"text\", \"text\": ...}) are supported", param);
            return NULL;
        }
        len += json_string_length(x);
    }
    char *buf = malloc(len + 1);
    if (!buf) return NULL;
    size_t off = 0;
    json_array_foreach(c, i, part) {
        json_t *x = json_object_get(part, "text");
        memcpy(buf + off, json_string_value(x), json_string_length(x));
        off += json_string_length(x);
    }
    json_t *s = json_stringn_nocheck(buf, off);
    free(buf);
    return s;
}

/* Renders the chat messages with the model's template and tokenizes. */
/* The prompt positions where messages end: the rendering of the first k
 * messages (no generation prompt), when its tokens are a prefix of the
 * prompt's. The prefix cache keeps exact restore points there, so a later
 * request that shares the conversation up to a message reuses all of it.
 * At most MAX_MARKS boundaries (the first and the latest ones); best effort:
 * a template that renders a prefix differently just gives fewer marks. */
#define MAX_MARKS 16
static void message_marks(rw_server *s, json_t *norm, const char *tools_json, bool add_special, srv_request *r) {
    const size_t n_msg = json_array_size(norm);
    if (n_msg < 2) return;
    r->marks = malloc(MAX_MARKS * sizeof *r->marks);
    if (!r->marks) return;
    for (size_t k = 1; k < n_msg && r->n_marks < MAX_MARKS; k++) {
        if (k > 1 && n_msg - k >= MAX_MARKS - 1) continue; /* the first, then the latest ones */
        json_t *part = json_array();
        for (size_t i = 0; part && i < k; i++) json_array_append(part, json_array_get(norm, i));
        char *pj = part ? json_dumps(part, JSON_COMPACT) : NULL;
        json_decref(part);
        if (!pj) continue;
        rw_chat_render_opts ro = {.messages_json = pj,
                                  .tools_json = tools_json,
                                  .add_generation_prompt = false,
                                  .enable_thinking = -1,
                                  .bos_token = s->bos,
                                  .eos_token = s->eos};
        char *text = NULL;
        size_t len = 0, n = 0;
        int32_t *ids = NULL;
        rw_error err = {0};
        if (!rw_chat_template_render(s->tmpl, &ro, &text, &len, &err) &&
            !rw_tokenize(s->tok, text, len, add_special, true, &ids, &n, &err) && n > 0 && (int64_t)n < r->n_prompt &&
            !memcmp(ids, r->prompt, n * sizeof *ids))
            r->marks[r->n_marks++] = (int64_t)n;
        free(ids);
        free(text);
        free(pj);
    }
    r->gp.marks = r->marks;
    r->gp.n_marks = r->n_marks;
}

static bool chat_prompt(rw_server *s, json_t *o, srv_request *r, srv_error *e) {
    json_t *msgs = json_object_get(o, "messages");
    if (!msgs) return bad(e, "messages", "%s", "Missing required parameter: 'messages'");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return bad(e, "messages", "%s", "'messages' must be a non-empty array");
    json_t *norm = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char param[64];
        snprintf(param, sizeof param, "messages.[%zu]", i);
        json_t *role = json_object_get(m, "role");
        const char *rs = json_string_value(role);
        if (!json_is_object(m) || !rs) {
            json_decref(norm);
            return bad(e, param, "'%s' must be an object with a string 'role'", param);
        }
        if (strcmp(rs, "system") && strcmp(rs, "developer") && strcmp(rs, "user") && strcmp(rs, "assistant") &&
            strcmp(rs, "tool")) {
            json_decref(norm);
            srv_errorf(e, 400, "invalid_request_error", NULL, param,
                       "Invalid value '%s' for %s.role: use system, developer, user, assistant or tool", rs, param);
            return false;
        }
        json_t *c = json_object_get(m, "content");
        if (!c && strcmp(rs, "assistant")) {
            json_decref(norm);
            return bad(e, param, "Missing required parameter: '%s.content'", param);
        }
        json_t *txt = c ? content_text(c, (int)i, e) : json_null();
        if (!txt) {
            json_decref(norm);
            return false;
        }
        json_t *copy = json_copy(m);
        /* templates know "system"; OpenAI's "developer" is its newer name */
        json_object_set_new(copy, "role", json_string(strcmp(rs, "developer") ? rs : "system"));
        json_object_set_new(copy, "content", txt);
        json_array_append_new(norm, copy);
    }
    char *msgs_json = json_dumps(norm, JSON_COMPACT);
    json_t *tools = json_object_get(o, "tools");
    char *tools_json = tools && !json_is_null(tools) ? json_dumps(tools, JSON_COMPACT) : NULL;
    if (tools && !json_is_null(tools) && !json_is_array(tools)) {
        json_decref(norm);
        free(msgs_json);
        free(tools_json);
        return bad(e, "tools", "%s", "'tools' must be an array");
    }
    rw_chat_render_opts ro = {.messages_json = msgs_json,
                              .tools_json = tools_json,
                              .add_generation_prompt = true,
                              .enable_thinking = -1,
                              .bos_token = s->bos,
                              .eos_token = s->eos};
    char *text = NULL;
    size_t len = 0;
    rw_error err = {0};
    rw_status st = msgs_json ? rw_chat_template_render(s->tmpl, &ro, &text, &len, &err) : RW_ERR_NOMEM;
    free(msgs_json);
    if (st) {
        json_decref(norm);
        free(tools_json);
        srv_errorf(e, 400, "invalid_request_error", NULL, "messages", "the chat template failed: %s", err.msg);
        return false;
    }
    /* BOS as the vocabulary asks, unless the template wrote it already */
    bool add_special = !(s->bos && rw_tokenizer_add_bos(s->tok) && !strncmp(text, s->bos, strlen(s->bos)));
    size_t n = 0;
    st = rw_tokenize(s->tok, text, len, add_special, true, &r->prompt, &n, &err);
    free(text);
    if (st) {
        json_decref(norm);
        free(tools_json);
        srv_errorf(e, 400, "invalid_request_error", NULL, "messages", "%s", err.msg);
        return false;
    }
    r->n_prompt = (int64_t)n;
    message_marks(s, norm, tools_json, add_special, r);
    json_decref(norm);
    free(tools_json);
    return true;
}

static bool completion_prompt(rw_server *s, json_t *o, srv_request *r, srv_error *e) {
    json_t *p = json_object_get(o, "prompt");
    if (!p) return bad(e, "prompt", "%s", "Missing required parameter: 'prompt'");
    /* a list of one prompt is that prompt; a list of several is a batch */
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        size_t n = 0;
        rw_error err = {0};
        if (rw_tokenize(s->tok, json_string_value(p), json_string_length(p), true, true, &r->prompt, &n, &err)) {
            srv_errorf(e, 400, "invalid_request_error", NULL, "prompt", "%s", err.msg);
            return false;
        }
        r->n_prompt = (int64_t)n;
    } else if (json_is_array(p)) {
        size_t n = json_array_size(p), i;
        json_t *v;
        json_array_foreach(p, i, v) if (!json_is_integer(v)) {
            if (json_is_string(v) || json_is_array(v))
                return bad(e, "prompt", "%s", "several prompts in one request are not supported; send one each");
            return bad(e, "prompt", "%s", "'prompt' must be a string, an array of token ids or a list of one of them");
        }
        r->prompt = malloc((n ? n : 1) * sizeof *r->prompt);
        if (!r->prompt) return bad(e, "prompt", "%s", "out of memory");
        int32_t nv = rw_tokenizer_n_vocab(s->tok);
        json_array_foreach(p, i, v) {
            json_int_t id = json_integer_value(v);
            if (id < 0 || id >= nv) {
                srv_errorf(e, 400, "invalid_request_error", NULL, "prompt",
                           "token id %lld at position %zu is not in [0, %d)", (long long)id, i, (int)nv);
                return false;
            }
            r->prompt[i] = (int32_t)id;
        }
        r->n_prompt = (int64_t)n;
    } else return bad(e, "prompt", "%s", "'prompt' must be a string, an array of token ids or a list of one of them");
    if (r->n_prompt == 0) return bad(e, "prompt", "%s", "the prompt is empty");
    return true;
}

static bool parse_obj(rw_server *s, bool chat, json_t *o, srv_request *r, srv_error *e) {
    const char *const *known = chat ? chat_fields : completion_fields;
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        bool ok = false;
        for (int i = 0; known[i] && !ok; i++) ok = !strcmp(key, known[i]);
        if (!ok) {
            srv_errorf(e, 400, "invalid_request_error", NULL, key, "Unrecognized request argument supplied: %s", key);
            return false;
        }
    }
    json_t *model = json_object_get(o, "model");
    if (model && !json_is_string(model)) return bad(e, "model", "'%s' must be a string", "model");
    rw_gen_params *g = &r->gp;
    *g = (rw_gen_params){.sampling = rw_sampler_params_default(), .n_logprobs = -1};
    rw_sampler_params *sp = &g->sampling;
    sp->temperature = 1.0f; /* OpenAI's default */
    long long top_k = 0, n = 1, seed = 0, max_tokens = 0, best_of = 1;
    bool has_seed = false, has_max = false, has_max2 = false;
    if (!get_number(o, "temperature", 0, 2, &sp->temperature, e) || !get_number(o, "top_p", 0, 1, &sp->top_p, e) ||
        !get_number(o, "min_p", 0, 1, &sp->min_p, e) ||
        !get_number(o, "presence_penalty", -2, 2, &sp->presence_penalty, e) ||
        !get_number(o, "frequency_penalty", -2, 2, &sp->frequency_penalty, e) ||
        !get_number(o, "repeat_penalty", 0.01, 100, &sp->repeat_penalty, e) ||
        !get_int(o, "top_k", -1, 1 << 30, &top_k, NULL, e) || !get_int(o, "n", 1, SRV_MAX_N, &n, NULL, e) ||
        !get_int(o, "seed", INT64_MIN, INT64_MAX, &seed, &has_seed, e) ||
        !get_int(o, "max_tokens", 1, INT32_MAX, &max_tokens, &has_max, e) ||
        !get_int(o, "best_of", 1, 128, &best_of, NULL, e) || !get_bool(o, "stream", &r->stream, e) ||
        !get_bool(o, "ignore_eos", &g->ignore_eos, e) || !get_bool(o, "return_token_ids", &r->return_token_ids, e) ||
        !get_stop(o, r, e))
        return false;
    if (chat && !get_int(o, "max_completion_tokens", 1, INT32_MAX, &max_tokens, &has_max2, e)) return false;
    sp->top_k = top_k < 0 ? 0 : (int32_t)top_k;
    if (best_of != 1) return bad(e, "best_of", "%s", "best_of is not supported (use n)");
    r->n = (int)n;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return bad(e, "stream_options", "'%s' must be an object", "stream_options");
        if (!r->stream)
            return bad(e, "stream_options", "%s", "'stream_options' is only allowed when 'stream' is true");
        if (!get_bool(so, "include_usage", &r->include_usage, e)) return false;
    }
    /* chat: logprobs true + top_logprobs k; completions: logprobs k */
    json_t *lp = json_object_get(o, "logprobs");
    if (lp && !json_is_null(lp)) {
        if (chat) {
            if (!json_is_boolean(lp)) return bad(e, "logprobs", "'%s' must be a boolean", "logprobs");
            if (json_is_true(lp)) g->n_logprobs = 0;
        } else {
            long long k = 0;
            if (!get_int(o, "logprobs", 0, RW_MAX_TOP_LOGPROBS, &k, NULL, e)) return false;
            g->n_logprobs = (int)k;
        }
    }
    json_t *tl = json_object_get(o, "top_logprobs");
    if (chat && tl && !json_is_null(tl)) {
        long long k = 0;
        if (!get_int(o, "top_logprobs", 0, RW_MAX_TOP_LOGPROBS, &k, NULL, e)) return false;
        if (g->n_logprobs < 0 && k > 0)
            return bad(e, "top_logprobs", "%s", "'top_logprobs' needs 'logprobs' set to true");
        if (g->n_logprobs >= 0) g->n_logprobs = (int)k;
    }
    json_t *echo = json_object_get(o, "echo");
    if (echo && !json_is_null(echo) && !json_is_false(echo))
        return bad(e, "echo", "%s", json_is_true(echo) ? "echo is not supported" : "'echo' must be a boolean");
    json_t *suffix = json_object_get(o, "suffix");
    if (suffix && !json_is_null(suffix)) return bad(e, "suffix", "%s", "suffix is not supported");
    json_t *lb = json_object_get(o, "logit_bias");
    if (lb && !json_is_null(lb)) {
        if (!json_is_object(lb)) return bad(e, "logit_bias", "'%s' must be an object", "logit_bias");
        size_t nb = json_object_size(lb);
        r->bias = calloc(nb ? nb : 1, sizeof *r->bias);
        if (!r->bias) return bad(e, "logit_bias", "%s", "out of memory");
        const char *tk;
        json_t *bv;
        const int32_t nv = rw_tokenizer_n_vocab(s->tok);
        json_object_foreach(lb, tk, bv) {
            char *end;
            long id = strtol(tk, &end, 10);
            if (!*tk || *end || id < 0 || id >= nv) {
                srv_errorf(e, 400, "invalid_request_error", NULL, "logit_bias",
                           "logit_bias keys must be token ids in [0, %d), not \"%.40s\"", (int)nv, tk);
                return false;
            }
            if (!json_is_number(bv) || !(json_number_value(bv) >= -100 && json_number_value(bv) <= 100))
                return bad(e, "logit_bias", "%s", "logit_bias values must be numbers in [-100, 100]");
            r->bias[r->n_bias++] = (rw_logit_bias){.token = (int32_t)id, .bias = (float)json_number_value(bv)};
        }
        sp->logit_bias = r->bias;
        sp->n_logit_bias = (int32_t)r->n_bias;
    }
    json_t *rf = json_object_get(o, "response_format");
    if (rf && !json_is_null(rf)) {
        json_t *t = json_object_get(rf, "type");
        if (!json_is_string(t) || strcmp(json_string_value(t), "text"))
            return bad(e, "response_format", "%s", "only response_format {\"type\": \"text\"} is supported");
    }
    json_t *tc = json_object_get(o, "tool_choice");
    if (tc && !json_is_null(tc) &&
        !(json_is_string(tc) && (!strcmp(json_string_value(tc), "auto") || !strcmp(json_string_value(tc), "none"))))
        return bad(e, "tool_choice", "%s", "tool_choice may only be \"auto\" or \"none\" (no forced tool calls)");
    json_t *user = json_object_get(o, "user");
    if (user && !json_is_null(user) && !json_is_string(user)) return bad(e, "user", "'%s' must be a string", "user");

    if (!(chat ? chat_prompt(s, o, r, e) : completion_prompt(s, o, r, e))) return false;
    const int64_t n_ctx = rw_engine_get_config(s->engine)->n_ctx;
    if (has_max || has_max2) g->max_tokens = max_tokens;
    else g->max_tokens = n_ctx - r->n_prompt; /* as much as the context holds */
    if (r->n_prompt + (g->max_tokens > 0 ? g->max_tokens : 1) > n_ctx) {
        long long want = (long long)(r->n_prompt + (g->max_tokens > 0 ? g->max_tokens : 1));
        srv_errorf(e, 400, "invalid_request_error", "context_length_exceeded", chat ? "messages" : "prompt",
                   "This model's maximum context length is %lld tokens. However, you requested %lld tokens "
                   "(%lld in the %s, %lld for the completion). Please reduce the length of the %s or completion.",
                   (long long)n_ctx, want, (long long)r->n_prompt, chat ? "messages" : "prompt",
                   (long long)(g->max_tokens > 0 ? g->max_tokens : 1), chat ? "messages" : "prompt");
        return false;
    }
    if (has_seed) sp->seed = (uint64_t)seed;
    else { /* a fresh seed per request */
        pthread_mutex_lock(&s->mu);
        sp->seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ ++s->seed_counter * 0xbf58476d1ce4e5b9ull;
        pthread_mutex_unlock(&s->mu);
    }
    g->stop = (const char *const *)r->stop;
    g->n_stop = r->n_stop;
    return true;
}

bool srv_parse_request(rw_server *s, bool chat, const char *body, size_t len, srv_request *r, srv_error *e) {
    memset(r, 0, sizeof *r);
    r->chat = chat;
    json_error_t jerr;
    json_t *o = json_loadb(body, len, 0, &jerr);
    if (!o) {
        srv_errorf(e, 400, "invalid_request_error", NULL, NULL,
                   "We could not parse the JSON body of your request: %s (line %d, column %d)", jerr.text, jerr.line,
                   jerr.column);
        return false;
    }
    bool ok = json_is_object(o);
    if (!ok) srv_errorf(e, 400, "invalid_request_error", NULL, NULL, "The request body must be a JSON object");
    else ok = parse_obj(s, chat, o, r, e);
    json_decref(o);
    if (!ok) srv_request_free(r);
    return ok;
}

bool rw_server__parse_chat_object(rw_server *s, json_t *o, srv_request *r, srv_error *e) {
    memset(r, 0, sizeof *r);
    r->chat = true;
    bool ok = parse_obj(s, true, o, r, e);
    if (!ok) srv_request_free(r);
    return ok;
}

void srv_request_free(srv_request *r) {
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->prompt);
    free(r->bias);
    free(r->marks);
    memset(r, 0, sizeof *r);
}
