/* request.c - an OpenAI request body to prompt token ids and generation
 * parameters, with OpenAI's checks: the body must be a JSON object, known
 * fields of their type (null = default), values in range. A field we do not
 * know is ignored and logged once per name, as local servers do (clients
 * such as Open WebUI send extras), unless --strict-api makes it a 400
 * ("Unrecognized request argument supplied: X" as OpenAI says). Features we
 * do not have are refused with a 400 that says so, never ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"
#include "server/api_int.h"

#define MAX_STOP 16

static const char *const completion_fields[] = {
    "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty",
    "frequency_penalty", "stream", "stream_options", "logprobs", "n", "echo", "best_of", "suffix", "user",
    "logit_bias", "ignore_eos", "return_token_ids", "repeat_penalty", "response_format", "grammar", "json_schema",
    NULL};
static const char *const chat_fields[] = {
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "seed",
    "stop", "presence_penalty", "frequency_penalty", "stream", "stream_options", "logprobs", "top_logprobs", "n",
    "user", "logit_bias", "tools", "tool_choice", "parallel_tool_calls", "response_format", "store", "metadata",
    "ignore_eos", "return_token_ids", "repeat_penalty", "chat_template_kwargs", "reasoning_effort", "enable_thinking",
    "reasoning_format", "reasoning_budget", "grammar", "json_schema", NULL};

static bool bad(srv_error *e, const char *param, const char *fmt, const char *a) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a);
    rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "%s", msg);
    return false;
}

/* Optional number field in [lo, hi]; null or absent keeps *out. */
static bool get_number(json_t *o, const char *k, double lo, double hi, float *out, srv_error *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) return bad(e, k, "'%s' must be a number", k);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, k, "'%s' must be in [%g, %g], not %g", k, lo, hi, d);
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
        rw_server__errorf(e, 400, "invalid_request_error", NULL, k, "'%s' must be in [%lld, %lld], not %lld", k, lo, hi, x);
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
        rw_server__errorf(e, 400, "invalid_request_error", NULL, "stop", "at most %d stop strings", MAX_STOP);
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

/* Renders the chat messages with the model's template and tokenizes. */

/* Where each token of the prompt ends in its text (ends[i] = bytes covered
 * by tokens 0..i), when the tokens' pieces are exactly the text (byte-level
 * BPE: a leading BOS aside); NULL otherwise (SentencePiece's added space,
 * stripped white space). malloc'd. */
static size_t *token_ends(srv_model *m, const char *text, size_t len, const int32_t *ids, int64_t n) {
    size_t *ends = malloc((size_t)(n > 0 ? n : 1) * sizeof *ends);
    if (!ends) return NULL;
    size_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        char buf[256];
        size_t k = rw_token_to_piece(m->tok, ids[i], true, buf, sizeof buf);
        if (i == 0 && ids[0] == rw_tokenizer_bos(m->tok) && (k > len || memcmp(text, buf, k))) k = 0; /* added BOS */
        else if (k > sizeof buf || off + k > len || memcmp(text + off, buf, k)) {
            free(ends);
            return NULL;
        }
        off += k;
        ends[i] = off;
    }
    if (off != len) {
        free(ends);
        return NULL;
    }
    return ends;
}

/* The prompt positions where messages end: the rendering of the first k
 * messages (no generation prompt), when its tokens are a prefix of the
 * prompt's. The prefix cache keeps exact restore points there, so a later
 * request that shares the conversation up to a message reuses all of it.
 * At most MAX_MARKS boundaries (the first and the latest ones); best effort:
 * a template that renders a prefix differently just gives fewer marks.
 * One tokenization: where the prompt's tokens map onto its text byte for
 * byte, a boundary is where a prefix's rendering (a byte prefix of the
 * prompt's text) ends on a token end; otherwise each prefix is tokenized
 * and compared. Only called for prompts that fit the context. */
#define MAX_MARKS 16
static void message_marks(srv_model *m, json_t *msgs, const rw_chat_prompt_opts *po, bool add_special,
                          const char *full, size_t full_len, srv_request *r) {
    const size_t n_msg = json_array_size(msgs);
    if (n_msg < 2) return;
    r->marks = malloc(MAX_MARKS * sizeof *r->marks);
    if (!r->marks) return;
    size_t *ends = token_ends(m, full, full_len, r->prompt, r->n_prompt);
    for (size_t k = 1; k < n_msg && r->n_marks < MAX_MARKS; k++) {
        if (k > 1 && n_msg - k >= MAX_MARKS - 1) continue; /* the first, then the latest ones */
        json_t *part = json_array();
        for (size_t i = 0; part && i < k; i++) json_array_append(part, json_array_get(msgs, i));
        if (!part) continue;
        rw_chat_prompt_opts o = *po;
        o.messages = part;
        o.add_generation_prompt = false;
        char *text = NULL;
        size_t len = 0, n = 0;
        int32_t *ids = NULL;
        rw_error err = {0};
        if (rw_chat_render_messages(m->tmpl, &m->caps, &o, &text, &len, &err)) {
        } else if (ends) {
            if (len > 0 && len < full_len && !memcmp(text, full, len)) {
                int64_t lo = 0, hi = r->n_prompt; /* the first token ending at or after len */
                while (lo < hi) {
                    int64_t mid = (lo + hi) / 2;
                    if (ends[mid] < len) lo = mid + 1;
                    else hi = mid;
                }
                if (lo < r->n_prompt - 1 && ends[lo] == len) r->marks[r->n_marks++] = lo + 1;
            }
        } else if (!rw_tokenize(m->tok, text, len, add_special, true, &ids, &n, &err) && n > 0 &&
                   (int64_t)n < r->n_prompt && !memcmp(ids, r->prompt, n * sizeof *ids))
            r->marks[r->n_marks++] = (int64_t)n;
        free(ids);
        free(text);
        json_decref(part);
    }
    free(ends);
    r->gp.marks = r->marks;
    r->gp.n_marks = r->n_marks;
}

/* tools: an array of {"type": "function", "function": {"name", ...}}. */
static bool check_tools(json_t *tools, srv_error *e) {
    if (!json_is_array(tools)) return bad(e, "tools", "%s", "'tools' must be an array");
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        const char *ty = json_string_value(json_object_get(t, "type"));
        if (!json_is_object(t) || (ty && strcmp(ty, "function")) || !json_is_object(fn) ||
            !json_is_string(json_object_get(fn, "name"))) {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, "tools",
                       "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": ...}}",
                       i);
            return false;
        }
    }
    return true;
}

/* Llama 3.1's built-in tools: the request's tools of those names become the
 * template's builtin_tools (its system prompt then lists them, and a past
 * call of one renders as <|python_tag|>NAME.call(...)), unless the request
 * or the server set it. */
static void builtin_tools(json_t *tools, json_t *kwargs) {
    static const char *const names[] = {"brave_search", "wolfram_alpha", "code_interpreter"};
    if (json_object_get(kwargs, "builtin_tools")) return;
    json_t *list = json_array(), *t;
    size_t i;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        const char *nm = json_string_value(json_object_get(fn ? fn : t, "name"));
        for (int k = 0; nm && k < 3; k++)
            if (!strcmp(nm, names[k])) json_array_append_new(list, json_string(nm));
    }
    if (json_array_size(list)) json_object_set(kwargs, "builtin_tools", list);
    json_decref(list);
}

static bool chat_prompt(srv_model *m, json_t *o, srv_request *r, srv_error *e) {
    rw_server *s = m->srv;
    json_t *msgs = json_object_get(o, "messages");
    if (!msgs) return bad(e, "messages", "%s", "Missing required parameter: 'messages'");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return bad(e, "messages", "%s", "'messages' must be a non-empty array");
    json_t *tools = json_object_get(o, "tools");
    if (json_is_null(tools) || (json_is_array(tools) && json_array_size(tools) == 0)) tools = NULL;
    if (tools && !check_tools(tools, e)) return false;
    /* tool_choice "none": the template sees no tools (as llama-server) and nothing is parsed as a call */
    json_t *tc = json_object_get(o, "tool_choice");
    if (json_is_string(tc) && !strcmp(json_string_value(tc), "none")) tools = NULL;
    /* template variables: the server's defaults, then the request's */
    json_t *kw = json_object_get(o, "chat_template_kwargs");
    if (kw && !json_is_null(kw) && !json_is_object(kw))
        return bad(e, "chat_template_kwargs", "'%s' must be an object", "chat_template_kwargs");
    json_t *et = json_object_get(o, "enable_thinking");
    if (et && !json_is_null(et) && !json_is_boolean(et))
        return bad(e, "enable_thinking", "'%s' must be a boolean", "enable_thinking");
    json_t *re = json_object_get(o, "reasoning_effort");
    const char *effort = json_string_value(re);
    if (re && !json_is_null(re) &&
        (!effort || (strcmp(effort, "none") && strcmp(effort, "minimal") && strcmp(effort, "low") &&
                     strcmp(effort, "medium") && strcmp(effort, "high"))))
        return bad(e, "reasoning_effort", "%s", "'reasoning_effort' must be none, minimal, low, medium or high");
    json_t *rf = json_object_get(o, "reasoning_format");
    if (rf && !json_is_null(rf) &&
        !(json_is_string(rf) && (!strcmp(json_string_value(rf), "none") || !strcmp(json_string_value(rf), "deepseek"))))
        return bad(e, "reasoning_format", "%s", "'reasoning_format' must be \"none\" or \"deepseek\"");
    if (r->force && !tools)
        return bad(e, "tool_choice", "%s", "tool_choice \"required\" or a named function needs 'tools'");
    if (r->force && r->grammar)
        return bad(e, "tool_choice", "%s", "a forced tool call cannot be combined with response_format, grammar or json_schema");
    json_t *kwargs = s->kwargs ? json_deep_copy(s->kwargs) : json_object();
    if (json_is_object(kw)) json_object_update(kwargs, kw);
    if (m->tool_fmt == RW_TOOL_FMT_LLAMA3 && tools && kwargs) builtin_tools(tools, kwargs);
    rw_chat_prompt_opts po = {.messages = msgs,
                              .tools = tools,
                              .add_generation_prompt = true,
                              .kwargs = kwargs,
                              .enable_thinking = json_is_boolean(et) ? json_is_true(et) : -1,
                              .reasoning_effort = effort,
                              .bos_token = m->bos,
                              .eos_token = m->eos};
    rw_chat_prepared prep;
    char *text = NULL;
    size_t len = 0, n = 0;
    bool ok = false;
    rw_error err = {0};
    rw_status st = rw_chat_prepare(&m->caps, &po, &prep, &err);
    if (st) {
        json_decref(kwargs);
        if (st == RW_ERR_INVALID_ARG) { /* the messages' shape: the message names the field */
            char param[64] = "messages";
            if (!strncmp(err.msg, "messages.[", 10)) {
                size_t k = strcspn(err.msg, " :");
                snprintf(param, sizeof param, "%.*s", (int)(k < sizeof param ? k : sizeof param - 1), err.msg);
            }
            rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "%s", err.msg);
        } else rw_server__errorf(e, 500, "server_error", NULL, NULL, "%s", err.msg);
        return false;
    }
    /* sizes before any rendering: a token stands for at most max_token_len
     * bytes, so contents beyond n_ctx of them cannot fit (each render and
     * tokenization of a huge conversation costs seconds) */
    const int64_t n_ctx = rw_engine_get_config(m->engine)->n_ctx;
    const size_t max_tok = rw_tokenizer_max_token_len(m->tok);
    size_t content_bytes = 0, i;
    json_t *msg;
    json_array_foreach(prep.messages, i, msg) content_bytes += json_string_length(json_object_get(msg, "content"));
    if (content_bytes / max_tok > (size_t)n_ctx) {
        rw_server__errorf(e, 400, "invalid_request_error", "context_length_exceeded", "messages",
                   "This model's maximum context length is %lld tokens. However, your messages have %zu bytes of "
                   "content, at least %zu tokens. Please reduce the length of the messages.",
                   (long long)n_ctx, content_bytes, content_bytes / max_tok);
        goto done;
    }
    if ((st = rw_chat_template_render(m->tmpl, &prep.ro, &text, &len, &err))) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, "messages", "the chat template failed: %s", err.msg);
        goto done;
    }
    /* how the output is parsed: the tool format only when there are tools;
     * harmony always (its channels part reasoning from the answer), and its
     * markers are control tokens, so the output renders them as text */
    const bool harmony = m->tool_fmt == RW_TOOL_FMT_HARMONY;
    /* Nemotron's <TOOLCALL>, LFM2's <|tool_call_start|>, Mistral's [TOOL_CALLS] and [ARGS] are control tokens too */
    r->gp.render_special = harmony || (tools && (m->tool_fmt == RW_TOOL_FMT_NEMOTRON || m->tool_fmt == RW_TOOL_FMT_LFM2 ||
                                                 m->tool_fmt == RW_TOOL_FMT_MISTRAL));
    r->out = (rw_chat_output_opts){.tool_format = tools || harmony ? m->tool_fmt : RW_TOOL_FMT_NONE,
                                   .reasoning = s->reasoning_fmt,
                                   .think_open = m->caps.think_open,
                                   .think_close = m->caps.think_close,
                                   /* parallel_tool_calls false: one call, then the generation stops */
                                   .max_calls = tools && !r->parallel_calls ? 1 : 0};
    if (json_is_string(rf))
        r->out.reasoning = strcmp(json_string_value(rf), "none") ? RW_REASONING_DEEPSEEK : RW_REASONING_NONE;
    r->out.in_reasoning = r->out.reasoning == RW_REASONING_DEEPSEEK &&
                          rw_chat_prompt_opens_reasoning(text, len, m->caps.think_open, m->caps.think_close);
    if (tools && !(r->tools_json = json_dumps(tools, JSON_COMPACT))) {
        rw_server__errorf(e, 500, "server_error", NULL, NULL, "out of memory");
        goto done;
    }
    r->out.tools_json = r->tools_json;
    if (r->force && harmony) { /* its markers are control tokens, which grammars do not match */
        rw_server__errorf(e, 400, "invalid_request_error", NULL, "tool_choice",
                          "a forced tool call (tool_choice \"required\" or a named function) is not supported with the "
                          "harmony format (gpt-oss) yet; use \"auto\"");
        goto done;
    }
    if (r->force) { /* a forced call: a grammar over the model's own call format */
        rw_error gerr = {0};
        /* a named function is one call (as OpenAI's); "required" is one or, with parallel_tool_calls, more */
        if (rw_server__tool_grammar(m->tool_fmt, r->tools_json, r->force == 2 ? r->force_name : NULL,
                                    r->force == 1 && r->parallel_calls, &r->grammar, &gerr)) {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, r->force == 2 ? "tool_choice" : "tools", "%s",
                       gerr.msg);
            goto done;
        }
        r->gp.grammar = r->grammar;
    }
    /* a thinking model reasons freely (within the reasoning budget); the
     * grammar (response_format, json_schema, grammar, a forced call) holds
     * for the answer after the block's close, as vLLM applies it */
    if (r->gp.grammar && r->out.in_reasoning)
        r->gp.grammar_after = m->caps.think_close[0] ? m->caps.think_close : "</think>";
    /* BOS as the vocabulary asks, unless the template wrote it already */
    bool add_special = !(m->bos && rw_tokenizer_add_bos(m->tok) && !strncmp(text, m->bos, strlen(m->bos)));
    /* control tokens only from the template's own text (chat_guard.c) */
    if (!rw_server__chat_tokenize(m, prep.messages, tools, kwargs, &prep.ro, text, len, add_special, &r->prompt, &n, e)) goto done;
    r->n_prompt = (int64_t)n;
    if (r->n_prompt < n_ctx) message_marks(m, msgs, &po, add_special, text, len, r); /* else refused */
    ok = true;
done:
    free(text);
    rw_chat_prepared_free(&prep);
    json_decref(kwargs);
    return ok;
}

/* The prompt; with a suffix (a string), the fill-in-the-middle prompt
 * around it (api_infill.c); with echo, its text in r->echo. */
static bool completion_prompt(srv_model *m, json_t *o, srv_request *r, bool echo, srv_error *e) {
    json_t *suffix = json_object_get(o, "suffix");
    const bool fim = json_is_string(suffix);
    json_t *p = json_object_get(o, "prompt");
    if (!p) return bad(e, "prompt", "%s", "Missing required parameter: 'prompt'");
    /* a list of one prompt is that prompt; a list of several is a batch */
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        size_t n = 0;
        rw_error err = {0};
        if (rw_tokenize(m->tok, json_string_value(p), json_string_length(p), !fim, true, &r->prompt, &n, &err)) {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, "prompt", "%s", err.msg);
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
        int32_t nv = rw_tokenizer_n_vocab(m->tok);
        json_array_foreach(p, i, v) {
            json_int_t id = json_integer_value(v);
            if (id < 0 || id >= nv) {
                rw_server__errorf(e, 400, "invalid_request_error", NULL, "prompt",
                           "token id %lld at position %zu is not in [0, %d)", (long long)id, i, (int)nv);
                return false;
            }
            r->prompt[i] = (int32_t)id;
        }
        r->n_prompt = (int64_t)n;
    } else return bad(e, "prompt", "%s", "'prompt' must be a string, an array of token ids or a list of one of them");
    if (echo && json_is_string(p)) { /* the prompt as given */
        r->echo_len = json_string_length(p);
        if (!(r->echo = malloc(r->echo_len + 1))) return bad(e, "echo", "%s", "out of memory");
        memcpy(r->echo, json_string_value(p), r->echo_len + 1);
    } else if (echo) { /* token ids as their text */
        rw_error err = {0};
        if (rw_detokenize(m->tok, r->prompt, (size_t)r->n_prompt, true, &r->echo, &r->echo_len, &err))
            return bad(e, "echo", "%s", err.msg);
    }
    if (fim && !rw_server__fim_wrap(m, r, json_string_value(suffix), json_string_length(suffix), e)) return false;
    if (r->n_prompt == 0) return bad(e, "prompt", "%s", "the prompt is empty");
    return true;
}

/* Logs an ignored field the first time its name is seen (at most 256 names). */
static void warn_unknown(rw_server *s, const char *key) {
    pthread_mutex_lock(&s->mu);
    bool seen = s->n_warned >= 256;
    for (size_t i = 0; i < s->n_warned && !seen; i++) seen = !strcmp(s->warned[i], key);
    char **w = seen ? NULL : realloc(s->warned, (s->n_warned + 1) * sizeof *w);
    if (w) {
        s->warned = w;
        if ((w[s->n_warned] = strndup(key, 128))) s->n_warned++;
    }
    pthread_mutex_unlock(&s->mu);
    if (!seen) rw_server__logf(s, "ignoring unknown request field \"%.128s\" (logged once; --strict-api refuses it)", key);
}

/* A schema (JSON value) to GBNF in *out; false with a 400 naming param. */
static bool schema_gbnf(json_t *schema, const char *param, char **out, srv_error *e) {
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    rw_error err = {0};
    rw_status st = text ? rw_grammar_schema_to_gbnf(text, strlen(text), NULL, out, &err)
                        : rw_errorf(&err, RW_ERR_NOMEM, "out of memory");
    free(text);
    if (st) rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "%s: %s", param, err.msg);
    return !st;
}

/* The output constraint: response_format (OpenAI: text, json_object,
 * json_schema {name, schema, strict}) or llama.cpp's grammar (GBNF text) /
 * json_schema (a schema) fields; at most one of them. The grammar is
 * compiled here once so that a bad one is a 400 naming the field (the
 * engine compiles it again at submit). */
static bool parse_constraint(json_t *o, srv_request *r, srv_error *e) {
    json_t *rf = json_object_get(o, "response_format"), *gr = json_object_get(o, "grammar");
    json_t *js = json_object_get(o, "json_schema");
    const char *param = NULL;
    int n = 0;
    if (rf && !json_is_null(rf)) {
        if (!json_is_object(rf)) return bad(e, "response_format", "'%s' must be an object", "response_format");
        json_t *t = json_object_get(rf, "type");
        const char *type = json_is_string(t) ? json_string_value(t) : "";
        if (!strcmp(type, "json_object")) {
            rw_error err = {0};
            if (rw_grammar_json_object_gbnf(NULL, &r->grammar, &err))
                return bad(e, "response_format", "%s", err.msg);
            n++;
            param = "response_format";
        } else if (!strcmp(type, "json_schema")) {
            json_t *j = json_object_get(rf, "json_schema");
            if (!json_is_object(j))
                return bad(e, "response_format", "%s", "response_format json_schema needs a 'json_schema' object");
            json_t *name = json_object_get(j, "name"), *strict = json_object_get(j, "strict");
            if (name && !json_is_string(name))
                return bad(e, "response_format", "%s", "response_format.json_schema.name must be a string");
            if (strict && !json_is_null(strict) && !json_is_boolean(strict))
                return bad(e, "response_format", "%s", "response_format.json_schema.strict must be a boolean");
            json_t *schema = json_object_get(j, "schema");
            /* no schema: any JSON value is the schema {} */
            json_t *any = schema ? NULL : json_object();
            bool ok = schema_gbnf(schema ? schema : any, "response_format", &r->grammar, e);
            json_decref(any);
            if (!ok) return false;
            n++;
            param = "response_format";
        } else if (strcmp(type, "text"))
            return bad(e, "response_format", "%s",
                       "response_format type must be \"text\", \"json_object\" or \"json_schema\"");
    }
    if (js && !json_is_null(js)) {
        if (n++) return bad(e, "json_schema", "%s", "give only one of response_format, grammar and json_schema");
        if (!schema_gbnf(js, "json_schema", &r->grammar, e)) return false;
        param = "json_schema";
    }
    if (gr && !json_is_null(gr)) {
        if (!json_is_string(gr)) return bad(e, "grammar", "'%s' must be a string (GBNF)", "grammar");
        if (n++) return bad(e, "grammar", "%s", "give only one of response_format, grammar and json_schema");
        if (!(r->grammar = strdup(json_string_value(gr)))) return bad(e, "grammar", "%s", "out of memory");
        param = "grammar";
    }
    if (!r->grammar) return true;
    rw_grammar *g = NULL;
    rw_error err = {0};
    if (rw_grammar_compile(r->grammar, strlen(r->grammar), NULL, &g, &err)) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "%s: %s", param, err.msg);
        return false;
    }
    rw_grammar_free(g);
    r->gp.grammar = r->grammar;
    return true;
}

static bool parse_obj(srv_model *m, bool chat, json_t *o, srv_request *r, srv_error *e) {
    rw_server *s = m->srv;
    const char *const *known = chat ? chat_fields : completion_fields;
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        bool ok = false;
        for (int i = 0; known[i] && !ok; i++) ok = !strcmp(key, known[i]);
        if (!ok && s->strict_api) {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, key, "Unrecognized request argument supplied: %s", key);
            return false;
        }
        if (!ok) warn_unknown(s, key);
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
    /* completions: echo (the prompt's text before the output) and suffix
     * (fill-in-the-middle: completion_prompt) */
    json_t *echo = json_object_get(o, "echo");
    if (echo && !json_is_null(echo) && !json_is_boolean(echo)) return bad(e, "echo", "'%s' must be a boolean", "echo");
    if (chat && json_is_true(echo)) return bad(e, "echo", "%s", "echo is not supported");
    json_t *suffix = json_object_get(o, "suffix");
    if (suffix && !json_is_null(suffix) && (chat || !json_is_string(suffix)))
        return bad(e, "suffix", "%s", chat ? "suffix is not supported" : "'suffix' must be a string");
    json_t *lb = json_object_get(o, "logit_bias");
    if (lb && !json_is_null(lb)) {
        if (!json_is_object(lb)) return bad(e, "logit_bias", "'%s' must be an object", "logit_bias");
        size_t nb = json_object_size(lb);
        r->bias = calloc(nb ? nb : 1, sizeof *r->bias);
        if (!r->bias) return bad(e, "logit_bias", "%s", "out of memory");
        const char *tk;
        json_t *bv;
        const int32_t nv = rw_tokenizer_n_vocab(m->tok);
        json_object_foreach(lb, tk, bv) {
            char *end;
            long id = strtol(tk, &end, 10);
            /* canonical decimal only: not " 5", "+5", "05" or "-0" */
            bool canonical = tk[0] >= '0' && tk[0] <= '9' && (tk[0] != '0' || !tk[1]);
            if (!canonical || *end || id < 0 || id >= nv) {
                rw_server__errorf(e, 400, "invalid_request_error", NULL, "logit_bias",
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
    if (!parse_constraint(o, r, e)) return false;
    json_t *tc = json_object_get(o, "tool_choice");
    if (tc && !json_is_null(tc)) {
        const char *tcs = json_string_value(tc);
        json_t *fn = json_object_get(tc, "function");
        const char *fname = json_string_value(json_object_get(json_is_object(fn) ? fn : tc, "name"));
        if (tcs && (!strcmp(tcs, "required") || !strcmp(tcs, "any"))) r->force = 1;
        else if (json_is_object(tc) && fname) {
            r->force = 2;
            if (!(r->force_name = strdup(fname))) return bad(e, "tool_choice", "%s", "out of memory");
        } else if (!tcs || (strcmp(tcs, "auto") && strcmp(tcs, "none")))
            return bad(e, "tool_choice", "%s",
                       "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                       "\"function\": {\"name\": ...}}");
    }
    r->parallel_calls = true;
    if (!get_bool(o, "parallel_tool_calls", &r->parallel_calls, e)) return false;
    json_t *rb = json_object_get(o, "reasoning_budget");
    long long budget = s->reasoning_budget;
    if (rb && !json_is_null(rb) && !get_int(o, "reasoning_budget", -1, INT32_MAX, &budget, NULL, e)) return false;
    r->reasoning_budget = budget < 0 ? -1 : (long)budget;
    json_t *user = json_object_get(o, "user");
    if (user && !json_is_null(user) && !json_is_string(user)) return bad(e, "user", "'%s' must be a string", "user");

    if (!(chat ? chat_prompt(m, o, r, e) : completion_prompt(m, o, r, json_is_true(echo), e))) return false;
    const int64_t n_ctx = rw_engine_get_config(m->engine)->n_ctx;
    if (has_max || has_max2) g->max_tokens = max_tokens;
    else g->max_tokens = n_ctx - r->n_prompt; /* as much as the context holds */
    if (r->n_prompt + (g->max_tokens > 0 ? g->max_tokens : 1) > n_ctx) {
        long long want = (long long)(r->n_prompt + (g->max_tokens > 0 ? g->max_tokens : 1));
        rw_server__errorf(e, 400, "invalid_request_error", "context_length_exceeded", chat ? "messages" : "prompt",
                   "This model's maximum context length is %lld tokens. However, you requested %lld tokens "
                   "(%lld in the %s, %lld for the completion). Please reduce the length of the %s or completion.",
                   (long long)n_ctx, want, (long long)r->n_prompt, chat ? "messages" : "prompt",
                   (long long)(g->max_tokens > 0 ? g->max_tokens : 1), chat ? "messages" : "prompt");
        return false;
    }
    /* a grammar after the reasoning: the answer must come, so reasoning
     * without a budget of its own gets half of max_tokens (then the block
     * is closed and the grammar holds: a forced call is always made) */
    if (g->grammar_after && r->reasoning_budget < 0) r->reasoning_budget = (long)(g->max_tokens / 2);
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

bool rw_server__parse_request(srv_model *m, bool chat, const char *body, size_t len, srv_request *r, srv_error *e) {
    memset(r, 0, sizeof *r);
    r->chat = chat;
    json_error_t jerr;
    json_t *o = json_loadb(body, len, 0, &jerr);
    if (!o) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, NULL,
                   "We could not parse the JSON body of your request: %s (line %d, column %d)", jerr.text, jerr.line,
                   jerr.column);
        return false;
    }
    bool ok = json_is_object(o);
    if (!ok) rw_server__errorf(e, 400, "invalid_request_error", NULL, NULL, "The request body must be a JSON object");
    else ok = parse_obj(m, chat, o, r, e);
    json_decref(o);
    if (!ok) rw_server__request_free(r);
    return ok;
}

bool rw_server__parse_chat_object(srv_model *m, json_t *o, srv_request *r, srv_error *e) {
    memset(r, 0, sizeof *r);
    r->chat = true;
    bool ok = parse_obj(m, true, o, r, e);
    if (!ok) rw_server__request_free(r);
    return ok;
}

bool rw_server__parse_completion_object(srv_model *m, json_t *o, srv_request *r, srv_error *e) {
    memset(r, 0, sizeof *r);
    bool ok = parse_obj(m, false, o, r, e);
    if (!ok) rw_server__request_free(r);
    return ok;
}

void rw_server__request_free(srv_request *r) {
    free(r->echo);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->prompt);
    free(r->bias);
    free(r->marks);
    free(r->tools_json);
    free(r->force_name);
    free(r->grammar);
    memset(r, 0, sizeof *r);
}
