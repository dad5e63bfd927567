/* prompt.c - a request's prompt, assembled in one place: the chat
 * messages rendered with the model's template (tools and their kwargs,
 * reasoning switches), the forced-call grammar over the model's own call
 * format (tool_grammar.c), the tokenization that lets control tokens come
 * only from the template's own text (chat_guard.c), the output parser's
 * settings and the message boundaries the prefix cache keeps; or a plain
 * completion prompt (text or token ids, echo, fill-in-the-middle). The
 * Responses and Messages APIs reach it through their chat-shaped request.
 * request.c checks the other fields and calls it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_int.h"

static bool bad(rw_server__error *e, const char *param, const char *fmt, const char *a) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a);
    rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "%s", msg);
    return false;
}

/* Where each token of the prompt ends in its text (ends[i] = bytes covered
 * by tokens 0..i), when the tokens' pieces are exactly the text (byte-level
 * BPE: a leading BOS aside); NULL otherwise (SentencePiece's added space,
 * stripped white space). malloc'd. */
static size_t *token_ends(rw_server__model *m, const char *text, size_t len, const int32_t *ids, int64_t n) {
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
static void message_marks(rw_server__model *m, json_t *msgs, const rw_chat_request *rq, bool add_special, const char *full,
                          size_t full_len, rw_server__request *r) {
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
        char *part_json = json_dumps(part, JSON_COMPACT);
        rw_chat_request o = *rq;
        o.messages_json = part_json;
        o.add_generation_prompt = false;
        char *text = NULL;
        size_t len = 0, n = 0;
        int32_t *ids = NULL;
        rw_error err = {0};
        if (!part_json || rw_chat_render_request(m->tmpl, &m->caps, &o, &text, &len, &err)) {
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
        free(part_json);
        json_decref(part);
    }
    free(ends);
    r->gp.marks = r->marks;
    r->gp.n_marks = r->n_marks;
}

/* tools: an array of {"type": "function", "function": {"name", ...}}. */
static bool check_tools(json_t *tools, rw_server__error *e) {
    if (!json_is_array(tools)) return bad(e, "tools", "%s", "'tools' must be an array");
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        const char *ty = json_string_value(json_object_get(t, "type"));
        if (!json_is_object(t) || (ty && strcmp(ty, "function")) || !json_is_object(fn) ||
            !json_is_string(json_object_get(fn, "name"))) {
            rw_server__errorf(
                e, 400, "invalid_request_error", NULL, "tools",
                "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": ...}}", i);
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

/* The parser's settings as the library takes them: o sized for this
 * header's struct, whoever filled it. */
static rw_chat_output_params output_params(const rw_chat_output_params *o) {
    rw_chat_output_params p = *o;
    p.struct_size = sizeof p;
    return p;
}

rw_status rw_server__output_open(const rw_chat_output_params *o, rw_chat_output **out, rw_error *err) {
    const rw_chat_output_params p = output_params(o);
    return rw_chat_output_open(&p, out, err);
}

rw_status rw_server__output_parse(const rw_chat_output_params *o, const char *text, size_t len, rw_chat_parsed *out,
                                  rw_error *err) {
    const rw_chat_output_params p = output_params(o);
    return rw_chat_output_parse_all(&p, text, len, out, err);
}

bool rw_server__chat_prompt(rw_server__model *m, json_t *o, rw_server__request *r, rw_server__error *e) {
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
        return bad(e, "tool_choice", "%s",
                   "a forced tool call cannot be combined with response_format, grammar or json_schema");
    json_t *kwargs = s->kwargs ? json_deep_copy(s->kwargs) : json_object();
    if (json_is_object(kw)) json_object_update(kwargs, kw);
    if (m->tool_fmt == RW_TOOL_FMT_LLAMA3 && tools && kwargs) builtin_tools(tools, kwargs);
    /* the request's parts as JSON texts for the public rw_chat_prepare */
    char *msgs_json = json_dumps(msgs, JSON_COMPACT), *tools_json = tools ? json_dumps(tools, JSON_COMPACT) : NULL;
    char *kwargs_json = kwargs ? json_dumps(kwargs, JSON_COMPACT) : NULL;
    rw_chat_request rq = rw_chat_request_default();
    rq.messages_json = msgs_json;
    rq.tools_json = tools_json;
    rq.add_generation_prompt = true;
    rq.kwargs_json = kwargs_json;
    rq.enable_thinking = json_is_boolean(et) ? json_is_true(et) : -1;
    rq.reasoning_effort = effort;
    rq.bos_token = m->bos;
    rq.eos_token = m->eos;
    rw_chat_prepared *prep = NULL;
    json_t *norm = NULL; /* the prepared messages, for the size check and the control-token guard */
    char *text = NULL;
    size_t len = 0, n = 0;
    bool ok = false;
    rw_error err = {0};
    rw_status st = !msgs_json || (tools && !tools_json) || (kwargs && !kwargs_json)
                       ? rw_errorf(&err, RW_ERR_NOMEM, "out of memory")
                       : rw_chat_prepare(&m->caps, &rq, &prep, &err);
    if (!st && !(norm = json_loads(rw_chat_prepared_messages(prep, NULL), 0, NULL)))
        st = rw_errorf(&err, RW_ERR_NOMEM, "out of memory");
    if (st) {
        rw_chat_prepared_free(prep);
        free(msgs_json);
        free(tools_json);
        free(kwargs_json);
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
    const int64_t n_ctx = rw_engine_setting_get(m->engine, RW_ENGINE_N_CTX);
    const size_t max_tok = rw_tokenizer_max_token_len(m->tok);
    size_t content_bytes = 0, i;
    json_t *msg;
    json_array_foreach(norm, i, msg) content_bytes += json_string_length(json_object_get(msg, "content"));
    if (content_bytes / max_tok > (size_t)n_ctx) {
        rw_server__errorf(
            e, 400, "invalid_request_error", "context_length_exceeded", "messages",
            "This model's maximum context length is %lld tokens. However, your messages have %zu bytes of "
            "content, at least %zu tokens. Please reduce the length of the messages.",
            (long long)n_ctx, content_bytes, content_bytes / max_tok);
        goto done;
    }
    const rw_template_vars *vars = rw_chat_prepared_vars(prep);
    if ((st = rw_chat_template_apply(m->tmpl, vars, &text, &len, &err))) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, "messages", "the chat template failed: %s", err.msg);
        goto done;
    }
    /* how the output is parsed: the tool format only when there are tools;
     * harmony always (its channels part reasoning from the answer), and its
     * markers are control tokens, so the output renders them as text */
    const bool harmony = m->tool_fmt == RW_TOOL_FMT_HARMONY;
    /* Nemotron's <TOOLCALL>, LFM2's <|tool_call_start|>, Mistral's [TOOL_CALLS] and [ARGS] are control tokens too */
    r->gp.render_special =
        harmony || (tools && (m->tool_fmt == RW_TOOL_FMT_NEMOTRON || m->tool_fmt == RW_TOOL_FMT_LFM2 ||
                              m->tool_fmt == RW_TOOL_FMT_MISTRAL));
    r->out = (rw_chat_output_params){.struct_size = sizeof(rw_chat_output_params),
                                     .tool_format = tools || harmony ? m->tool_fmt : RW_TOOL_FMT_NONE,
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
    if (r->force) { /* a forced call: a grammar over the model's own call format */
        rw_error gerr = {0};
        /* a named function is one call (as OpenAI's); "required" is one or, with parallel_tool_calls, more */
        if (rw_server__tool_grammar(m->tool_fmt, r->tools_json, r->force == 2 ? r->force_name : NULL,
                                    r->force == 1 && r->parallel_calls, true, &r->grammar, &gerr) ||
            (harmony && rw_server__tool_grammar(m->tool_fmt, r->tools_json, r->force == 2 ? r->force_name : NULL,
                                                false, false, &r->cont_grammar, &gerr))) {
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
    /* harmony: a forced call's grammar spells the channels itself; a
     * response format (or grammar) holds for the final channel's body, after
     * the model may reason in the analysis channel: the request's grammar
     * wrapped in that markup (the reasoning is any text without a marker;
     * once its budget closes it, the request's grammar alone) */
    if (r->gp.grammar && harmony && !r->force) {
        static const char wrap[] =
            "\nharmony-answer ::= ( \"<|channel|>analysis<|message|>\" harmony-reasoning \"<|end|><|start|>assistant\" "
            ")? \"<|channel|>final<|message|>\" root\nharmony-reasoning ::= ( [^<] | \"<\" [^|] )*\n";
        const size_t gl = strlen(r->grammar);
        char *g = malloc(gl + sizeof wrap);
        if (!g) {
            rw_server__errorf(e, 500, "server_error", NULL, NULL, "out of memory");
            goto done;
        }
        memcpy(g, r->grammar, gl);
        memcpy(g + gl, wrap, sizeof wrap);
        r->cont_grammar = r->grammar;
        r->grammar = g;
        r->gp.grammar = g;
        r->gp.grammar_root = "harmony-answer";
        r->gp.grammar_after = NULL;
    }
    if (harmony) { /* the analysis channel is the reasoning: its budget closes it, then the answer's channel */
        r->think_open = "<|channel|>analysis<|message|>";
        r->think_close = "<|end|>";
        r->budget_close = r->force ? "<|end|><|start|>assistant" : "<|end|><|start|>assistant<|channel|>final<|message|>";
    }
    /* BOS as the vocabulary asks, unless the template wrote it already */
    bool add_special = !(m->bos && rw_tokenizer_add_bos(m->tok) && !strncmp(text, m->bos, strlen(m->bos)));
    /* control tokens only from the template's own text (chat_guard.c) */
    if (!rw_server__chat_tokenize(m, norm, tools, kwargs, vars, text, len, add_special, &r->prompt, &n, e))
        goto done;
    r->n_prompt = (int64_t)n;
    if (r->n_prompt < n_ctx) message_marks(m, msgs, &rq, add_special, text, len, r); /* else refused */
    ok = true;
done:
    free(text);
    json_decref(norm);
    rw_chat_prepared_free(prep);
    free(msgs_json);
    free(tools_json);
    free(kwargs_json);
    json_decref(kwargs);
    return ok;
}

/* One prompt p (text, or token ids) into *ids / *n (malloc'd) and, with
 * echo, its text into *echo / *echo_len (malloc'd); where names it in
 * messages ("prompt" or "prompt[k]"). */
static bool one_prompt(rw_server__model *m, json_t *p, bool fim, bool echo, const char *where, int32_t **ids,
                       int64_t *n, char **echo_s, size_t *echo_len, rw_server__error *e) {
    const bool bos = !fim; /* a fill-in-the-middle prompt gets its BOS from the wrap */
    if (json_is_string(p)) {
        size_t k = 0;
        rw_error err = {0};
        if (rw_tokenize(m->tok, json_string_value(p), json_string_length(p), bos, true, ids, &k, &err)) {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, "prompt", "%s: %s", where, err.msg);
            return false;
        }
        *n = (int64_t)k;
    } else if (json_is_array(p)) {
        size_t k = json_array_size(p), i;
        json_t *v;
        json_array_foreach(p, i, v) if (!json_is_integer(v)) return bad(
            e, "prompt", "%s",
            "'prompt' must be a string, an array of token ids, or a list of strings or of arrays of token ids");
        if (!(*ids = malloc((k ? k : 1) * sizeof **ids))) return bad(e, "prompt", "%s", "out of memory");
        int32_t nv = rw_tokenizer_n_vocab(m->tok);
        json_array_foreach(p, i, v) {
            json_int_t id = json_integer_value(v);
            if (id < 0 || id >= nv) {
                rw_server__errorf(e, 400, "invalid_request_error", NULL, "prompt",
                                  "%s: token id %lld at position %zu is not in [0, %d)", where, (long long)id, i,
                                  (int)nv);
                return false;
            }
            (*ids)[i] = (int32_t)id;
        }
        *n = (int64_t)k;
    } else
        return bad(e, "prompt", "%s",
                   "'prompt' must be a string, an array of token ids, or a list of strings or of arrays of token ids");
    if (*n == 0 && !fim) { /* (a fill-in-the-middle prompt has its tokens around it) */
        rw_server__errorf(e, 400, "invalid_request_error", NULL, "prompt", "%s is empty", where);
        return false;
    }
    if (echo && json_is_string(p)) { /* the prompt as given */
        *echo_len = json_string_length(p);
        if (!(*echo_s = malloc(*echo_len + 1))) return bad(e, "echo", "%s", "out of memory");
        memcpy(*echo_s, json_string_value(p), *echo_len + 1);
    } else if (echo) { /* token ids as their text */
        rw_error err = {0};
        if (rw_detokenize(m->tok, *ids, (size_t)*n, true, echo_s, echo_len, &err)) return bad(e, "echo", "%s", err.msg);
    }
    return true;
}

/* The prompt; with a suffix (a string), the fill-in-the-middle prompt
 * around it (api_native.c); with echo, its text in r->echo. A list of
 * prompts (strings, or arrays of token ids, as OpenAI's API takes them) is
 * a batch: the first in r->prompt, the others in r->more. */
bool rw_server__completion_prompt(rw_server__model *m, json_t *o, rw_server__request *r, bool echo,
                                  rw_server__error *e) {
    json_t *suffix = json_object_get(o, "suffix");
    const bool fim = json_is_string(suffix);
    json_t *p = json_object_get(o, "prompt");
    if (!p) return bad(e, "prompt", "%s", "Missing required parameter: 'prompt'");
    json_t *first = json_array_get(p, 0);
    if (json_is_array(p) && (json_is_string(first) || json_is_array(first))) { /* a list of prompts */
        const size_t np = json_array_size(p);
        if ((size_t)r->n * np > SRV_MAX_N) {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, "prompt",
                              "at most %d choices in all: %zu prompts times n = %d", SRV_MAX_N, np, r->n);
            return false;
        }
        if (np > 1 && fim) return bad(e, "suffix", "%s", "suffix takes one prompt");
        if (np > 1 && !(r->more = calloc(np - 1, sizeof *r->more))) return bad(e, "prompt", "%s", "out of memory");
        for (size_t k = 1; k < np; k++) {
            char where[32];
            snprintf(where, sizeof where, "prompt[%zu]", k);
            rw_server__more_prompt *q = &r->more[k - 1];
            r->n_more++;
            if (!one_prompt(m, json_array_get(p, k), false, echo, where, &q->ids, &q->n, &q->echo, &q->echo_len, e))
                return false;
        }
        p = first;
    }
    if (!one_prompt(m, p, fim, echo, r->n_more ? "prompt[0]" : "the prompt", &r->prompt, &r->n_prompt, &r->echo,
                    &r->echo_len, e))
        return false;
    return !fim || rw_server__fim_wrap(m, r, json_string_value(suffix), json_string_length(suffix), e);
}
