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

#include "server/api_int.h"

#define MAX_STOP 16

/* clang-format off */ /* the fields, packed */
static const char *const completion_fields[] = {
    "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty",
    "frequency_penalty", "stream", "stream_options", "logprobs", "n", "echo", "best_of", "suffix", "user",
    "logit_bias", "ignore_eos", "return_token_ids", "repeat_penalty", "response_format", "grammar", "json_schema",
    "prompt_logprobs", "lora", NULL};
static const char *const chat_fields[] = {
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "seed",
    "stop", "presence_penalty", "frequency_penalty", "stream", "stream_options", "logprobs", "top_logprobs", "n",
    "user", "logit_bias", "tools", "tool_choice", "parallel_tool_calls", "response_format", "store", "metadata",
    "ignore_eos", "return_token_ids", "repeat_penalty", "chat_template_kwargs", "reasoning_effort", "enable_thinking",
    "reasoning_format", "reasoning_budget", "grammar", "json_schema", "prompt_logprobs", "lora", NULL};
/* clang-format on */

static bool bad(rw_server__error *e, const char *param, const char *fmt, const char *a) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a);
    rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "%s", msg);
    return false;
}

/* Optional number field in [lo, hi]; null or absent keeps *out. */
static bool get_number(json_t *o, const char *k, double lo, double hi, float *out, rw_server__error *e) {
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
                    rw_server__error *e) {
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

static bool get_bool(json_t *o, const char *k, bool *out, rw_server__error *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return bad(e, k, "'%s' must be a boolean", k);
    *out = json_is_true(v);
    return true;
}

static bool get_stop(json_t *o, rw_server__request *r, rw_server__error *e) {
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
static bool schema_gbnf(json_t *schema, const char *param, char **out, rw_server__error *e) {
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    rw_error err = {0};
    rw_status st = text ? rw_schema_to_gbnf(text, strlen(text), NULL, 0, out, &err)
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
static bool parse_constraint(json_t *o, rw_server__request *r, rw_server__error *e) {
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
            if (rw_json_object_gbnf(NULL, 0, &r->grammar, &err))
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
    rw_error err = {0};
    if (rw_grammar_check(r->grammar, strlen(r->grammar), NULL, &err)) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "%s: %s", param, err.msg);
        return false;
    }
    r->gp.grammar = r->grammar;
    return true;
}

/* llama-server's per-request "lora": [{"id", "scale"}], an adapter left out
 * at scale 0. Here the scales are set at load (they are part of the model's
 * products and of its cached states): a list that asks for them is
 * accepted, any other is refused with a 400 that says so, never ignored. */
static bool check_lora(const rw_server__model *m, json_t *o, rw_server__error *e) {
    json_t *l = json_object_get(o, "lora"), *v;
    if (!l || json_is_null(l)) return true;
    if (!json_is_array(l)) return bad(e, "lora", "'%s' must be an array of {\"id\", \"scale\"}", "lora");
    const int n = m->model ? rw_model_lora_count(m->model) : 0;
    size_t i;
    json_array_foreach(l, i, v) {
        json_t *id = json_object_get(v, "id"), *scale = json_object_get(v, "scale");
        if (!json_is_integer(id) || !json_is_number(scale))
            return bad(e, "lora", "%s", "each entry of 'lora' must be {\"id\": integer, \"scale\": number}");
        if (json_integer_value(id) < 0 || json_integer_value(id) >= n) {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, "lora", "no LoRA adapter %lld: the server has %d",
                              (long long)json_integer_value(id), n);
            return false;
        }
    }
    for (int k = 0; k < n; k++) {
        double want = 0; /* left out: 0, as llama-server */
        json_array_foreach(l, i, v) {
            if (json_integer_value(json_object_get(v, "id")) == k)
                want = json_number_value(json_object_get(v, "scale"));
        }
        float loaded = 0;
        if (rw_model_lora_get(m->model, k, NULL, &loaded, NULL)) continue;
        if ((float)want != loaded) {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, "lora",
                              "per-request LoRA scales are not supported: adapter %d is applied at scale %g, set at "
                              "load (rewind serve --lora-scaled FILE:SCALE), not %g",
                              k, (double)loaded, want);
            return false;
        }
    }
    return true;
}

static bool parse_obj(rw_server__model *m, bool chat, json_t *o, rw_server__request *r, rw_server__error *e) {
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
    if (!check_lora(m, o, e)) return false;
    rw_request_params *g = &r->gp;
    const rw_request_params d = rw_request_params_default(); /* the library's defaults */
    /* the sampling defaults; nothing else set (no stop strings, bias, marks,
     * grammar or logprobs until the request asks) */
    *g = (rw_request_params){.struct_size = d.struct_size,
                             .temperature = d.temperature,
                             .top_k = d.top_k,
                             .top_p = d.top_p,
                             .min_p = d.min_p,
                             .presence_penalty = d.presence_penalty,
                             .frequency_penalty = d.frequency_penalty,
                             .repeat_penalty = d.repeat_penalty,
                             .penalty_last_n = d.penalty_last_n,
                             .min_keep = d.min_keep,
                             .seed = d.seed,
                             .n_logprobs = -1};
    g->temperature = 1.0f; /* OpenAI's default */
    /* completions' max_tokens may be 0: the prompt alone (with echo and logprobs: scoring it) */
    long long top_k = 0, n = 1, seed = 0, max_tokens = 0, best_of = 1;
    bool has_seed = false, has_max = false, has_max2 = false;
    if (!get_number(o, "temperature", 0, 2, &g->temperature, e) || !get_number(o, "top_p", 0, 1, &g->top_p, e) ||
        !get_number(o, "min_p", 0, 1, &g->min_p, e) ||
        !get_number(o, "presence_penalty", -2, 2, &g->presence_penalty, e) ||
        !get_number(o, "frequency_penalty", -2, 2, &g->frequency_penalty, e) ||
        !get_number(o, "repeat_penalty", 0.01, 100, &g->repeat_penalty, e) ||
        !get_int(o, "top_k", -1, 1 << 30, &top_k, NULL, e) || !get_int(o, "n", 1, SRV_MAX_N, &n, NULL, e) ||
        !get_int(o, "seed", INT64_MIN, INT64_MAX, &seed, &has_seed, e) ||
        !get_int(o, "max_tokens", chat ? 1 : 0, INT32_MAX, &max_tokens, &has_max, e) ||
        !get_int(o, "best_of", 1, 128, &best_of, NULL, e) || !get_bool(o, "stream", &r->stream, e) ||
        !get_bool(o, "ignore_eos", &g->ignore_eos, e) || !get_bool(o, "return_token_ids", &r->return_token_ids, e) ||
        !get_stop(o, r, e))
        return false;
    if (chat && !get_int(o, "max_completion_tokens", 1, INT32_MAX, &max_tokens, &has_max2, e)) return false;
    g->top_k = top_k < 0 ? 0 : (int32_t)top_k;
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
     * (fill-in-the-middle: rw_server__completion_prompt) */
    json_t *echo = json_object_get(o, "echo");
    if (echo && !json_is_null(echo) && !json_is_boolean(echo)) return bad(e, "echo", "'%s' must be a boolean", "echo");
    if (chat && json_is_true(echo)) return bad(e, "echo", "%s", "echo is not supported");
    /* the prompt's logprobs: completions' echo with logprobs (scoring a
     * text), and vLLM's prompt_logprobs (alternatives of each prompt
     * token, not streamed, as vLLM's) */
    r->echo_lp = json_is_true(echo) && g->n_logprobs >= 0 ? g->n_logprobs : -1;
    long long plk = -1;
    if (!get_int(o, "prompt_logprobs", 0, RW_MAX_TOP_LOGPROBS, &plk, NULL, e)) return false;
    if (plk >= 0 && r->stream) return bad(e, "prompt_logprobs", "%s", "prompt_logprobs is not available with stream");
    r->vllm_lp = (int)plk;
    if (r->echo_lp >= 0 || r->vllm_lp >= 0) {
        g->prompt_logprobs = true;
        g->n_prompt_top = r->echo_lp > r->vllm_lp ? r->echo_lp : r->vllm_lp;
    }
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
        g->logit_bias = r->bias;
        g->n_logit_bias = (int32_t)r->n_bias;
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

    if (!(chat ? rw_server__chat_prompt(m, o, r, e) : rw_server__completion_prompt(m, o, r, json_is_true(echo), e)))
        return false;
    const int64_t n_ctx = rw_engine_setting_get(m->engine, RW_ENGINE_N_CTX);
    int64_t longest = r->n_prompt; /* of a list of prompts: each must fit, with the same max_tokens */
    for (int k = 0; k < r->n_more; k++)
        if (r->more[k].n > longest) longest = r->more[k].n;
    if (has_max || has_max2) g->max_tokens = max_tokens;
    else g->max_tokens = n_ctx - longest; /* as much as the context holds */
    if (longest + (g->max_tokens > 0 ? g->max_tokens : 1) > n_ctx) {
        long long want = (long long)(longest + (g->max_tokens > 0 ? g->max_tokens : 1));
        rw_server__errorf(
            e, 400, "invalid_request_error", "context_length_exceeded", chat ? "messages" : "prompt",
            "This model's maximum context length is %lld tokens. However, you requested %lld tokens "
            "(%lld in the %s, %lld for the completion). Please reduce the length of the %s or completion.",
            (long long)n_ctx, want, (long long)longest, chat ? "messages" : "prompt",
            (long long)(g->max_tokens > 0 ? g->max_tokens : 1), chat ? "messages" : "prompt");
        return false;
    }
    /* a grammar after the reasoning: the answer must come, so reasoning
     * without a budget of its own gets half of max_tokens (then the block
     * is closed and the grammar holds: a forced call is always made) */
    if ((g->grammar_after || (g->grammar && r->budget_close)) && r->reasoning_budget < 0)
        r->reasoning_budget = (long)(g->max_tokens / 2);
    if (has_seed) g->seed = (uint64_t)seed;
    else { /* a fresh seed per request */
        pthread_mutex_lock(&s->mu);
        g->seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ ++s->seed_counter * 0xbf58476d1ce4e5b9ull;
        pthread_mutex_unlock(&s->mu);
    }
    g->stop = (const char *const *)r->stop;
    g->n_stop = r->n_stop;
    return true;
}

bool rw_server__parse_request(rw_server__model *m, bool chat, const char *body, size_t len, rw_server__request *r, rw_server__error *e) {
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

bool rw_server__parse_chat_object(rw_server__model *m, json_t *o, rw_server__request *r, rw_server__error *e) {
    memset(r, 0, sizeof *r);
    r->chat = true;
    bool ok = parse_obj(m, true, o, r, e);
    if (!ok) rw_server__request_free(r);
    return ok;
}

bool rw_server__parse_completion_object(rw_server__model *m, json_t *o, rw_server__request *r, rw_server__error *e) {
    memset(r, 0, sizeof *r);
    bool ok = parse_obj(m, false, o, r, e);
    if (!ok) rw_server__request_free(r);
    return ok;
}

void rw_server__request_free(rw_server__request *r) {
    for (int k = 0; k < r->n_more; k++) {
        free(r->more[k].ids);
        free(r->more[k].echo);
    }
    free(r->more);
    free(r->echo);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->prompt);
    free(r->bias);
    free(r->marks);
    free(r->tools_json);
    free(r->force_name);
    free(r->grammar);
    free(r->cont_grammar);
    memset(r, 0, sizeof *r);
}

rw_status rw_server__submit(rw_engine *e, const int32_t *ids, int64_t n, const rw_request_params *g,
                            rw_token_event_fn cb, void *user, uint64_t *id, rw_error *err) {
    rw_request_params p = *g;
    p.struct_size = sizeof p; /* this header's struct, whoever filled it */
    return rw_engine_submit_tokens(e, ids, n, &p, cb, user, id, err);
}
