/* api_native.c - llama-server's native generation routes, which its own
 * clients and code editors' completion plugins call: POST /completion (a
 * prompt as text or token ids) and POST /infill (fill-in-the-middle; also
 * the prompt /v1/completions' suffix makes). Both answer in llama-server's
 * native shape ({"content", "stop", "stop_type", "tokens_cached",
 * "timings", ...}, streamed as "data: {...}" events, the last with "stop":
 * true), cut to the request's response_fields when it names them.
 *
 * /infill's prompt is the file's own FIM tokens around the code
 * (tokenizer.h's rw_tokenizer_fim), laid out as llama-server lays it out,
 * so a model trained for it (Qwen2.5-Coder, StarCoder, CodeLlama...) sees
 * what it expects:
 *
 *   [BOS] [extra] PRE prefix prompt SUF suffix MID
 *
 * where extra is the other files' context (input_extra): with the
 * repository and file-separator tokens (Qwen2.5-Coder's <|repo_name|>,
 * <|file_sep|>) "REP myproject\n", then "SEP name\n text" per chunk and
 * "SEP filename\n" for the file being edited; without them the chunks'
 * texts each after "\n\n--- snippet ---\n\n". The code is tokenized as plain
 * text (a control token's text in it stays text). BOS comes first, also
 * before extra. When it does not fit the context (less what the answer may
 * take), extra loses its oldest tokens first, then the prefix its start and
 * the suffix its end, the prefix keeping at least three quarters of the
 * room; the answer says "truncated".
 *
 * The request (llama-server's fields: prompt, input_prefix, input_suffix,
 * input_extra, n_predict and the sampling fields) becomes a completions
 * request with that prompt, with llama-server's sampling defaults where the
 * request has none; n_probs asks for the tokens' log-probabilities
 * (completion_probabilities); its other fields (cache_prompt, samplers, ...)
 * are ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_int.h"

/* The prompt's layout above: fim.c. */

/* input_extra's chunks as context tokens (the layout above). */
static bool extra_tokens(rw_server__model *m, json_t *chunks, rw_server__tok_list *t, rw_server__error *e) {
    if (!json_array_size(chunks)) return true;
    const int32_t rep = rw_tokenizer_fim(m->tok, RW_FIM_REP), sep = rw_tokenizer_fim(m->tok, RW_FIM_SEP);
    if (rep >= 0) {
        rw_server__tok_push1(t, rep);
        if (!rw_server__tok_push_text(m, t, "myproject\n", 10, e)) return false;
    }
    size_t i;
    json_t *c;
    json_array_foreach(chunks, i, c) {
        json_t *text = json_object_get(c, "text"), *name = json_object_get(c, "filename");
        if (!json_is_object(c) || !json_is_string(text) || (name && !json_is_null(name) && !json_is_string(name))) {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, "input_extra",
                              "input_extra[%zu] must be {\"filename\": string, \"text\": string}", i);
            return false;
        }
        if (sep >= 0) {
            const char *fn = json_is_string(name) ? json_string_value(name) : "tmp";
            size_t fl = json_is_string(name) ? json_string_length(name) : 3;
            rw_server__tok_push1(t, sep);
            if (!rw_server__tok_push_text(m, t, fn, fl, e) || !rw_server__tok_push_text(m, t, "\n", 1, e)) return false;
        } else if (!rw_server__tok_push_text(m, t, "\n\n--- snippet ---\n\n", 19, e)) return false;
        if (!rw_server__tok_push_text(m, t, json_string_value(text), json_string_length(text), e)) return false;
    }
    if (sep >= 0) {
        rw_server__tok_push1(t, sep);
        if (!rw_server__tok_push_text(m, t, "filename\n", 9, e)) return false;
    }
    return true;
}

/* An optional string field ("" when absent or null). */
static bool opt_text(json_t *o, const char *k, const char **v, size_t *n, rw_server__error *e) {
    json_t *x = json_object_get(o, k);
    *v = "";
    *n = 0;
    if (!x || json_is_null(x)) return true;
    if (!json_is_string(x)) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, k, "'%s' must be a string", k);
        return false;
    }
    *v = json_string_value(x);
    *n = json_string_length(x);
    return true;
}

/* The request's sampling fields as a completions request's, with
 * llama-server's defaults; "prompt" set by the caller. */
static json_t *completion_object(json_t *o) {
    static const char *const same[] = {"temperature",
                                       "top_k",
                                       "top_p",
                                       "min_p",
                                       "stop",
                                       "stream",
                                       "presence_penalty",
                                       "frequency_penalty",
                                       "repeat_penalty",
                                       "ignore_eos",
                                       "grammar",
                                       "json_schema",
                                       "return_token_ids",
                                       "logit_bias",
                                       "max_tokens",
                                       "lora",
                                       NULL};
    json_t *c = json_object();
    if (!c) return NULL;
    for (int i = 0; same[i]; i++) {
        json_t *v = json_object_get(o, same[i]);
        if (v && !json_is_null(v) && (strcmp(same[i], "logit_bias") || json_is_object(v)))
            json_object_set(c, same[i], v);
    }
    json_t *probs = json_object_get(o, "n_probs"); /* the top tokens of each one (as many as we give at most) */
    if (json_is_integer(probs) && json_integer_value(probs) > 0 && !json_object_get(c, "logprobs"))
        json_object_set_new(c, "logprobs",
                            json_integer(json_integer_value(probs) < RW_MAX_TOP_LOGPROBS ? json_integer_value(probs)
                                                                                         : RW_MAX_TOP_LOGPROBS));
    json_t *np = json_object_get(o, "n_predict"), *seed = json_object_get(o, "seed");
    if (json_is_integer(np) && json_integer_value(np) > 0 && !json_object_get(c, "max_tokens"))
        json_object_set(c, "max_tokens", np); /* <= 0 (llama-server's -1): as much as the context holds */
    else if (np && !json_is_null(np) && !json_is_integer(np))
        json_object_set(c, "max_tokens", np); /* the parser's message names the type */
    if (seed && !(json_is_integer(seed) && json_integer_value(seed) == -1))
        json_object_set(c, "seed", seed); /* -1: random */
    static const struct {
        const char *k;
        double v;
    } defaults[] = {{"temperature", 0.8}, {"top_p", 0.95}, {"min_p", 0.05}};
    for (size_t i = 0; i < sizeof defaults / sizeof *defaults; i++)
        if (!json_object_get(c, defaults[i].k)) json_object_set_new(c, defaults[i].k, json_real(defaults[i].v));
    if (!json_object_get(c, "top_k")) json_object_set_new(c, "top_k", json_integer(40));
    return c;
}

/* ---- the answer ---- */

typedef struct {
    double t_submit, t_first, t_done; /* monotonic seconds; under the job's lock */
    bool truncated;
    size_t raw_len; /* text given out so far (stream) */
    char **stops;   /* the request's stop strings (owned), for stop_type */
    int n_stops;
    json_t *fields; /* response_fields: the last answer's fields to send (a reference), or NULL: all */
    size_t probs_sent; /* with n_probs: tokens whose completion_probabilities are out (stream) */
} native_state;

static void state_free(void *p) {
    native_state *st = p;
    if (!st) return;
    for (int i = 0; i < st->n_stops; i++) free(st->stops[i]);
    free(st->stops);
    json_decref(st->fields);
    free(st);
}

/* The engine's events, timed on their way to the job. */
static void on_event(void *user, const rw_token_event *ev) {
    rw_server__choice *c = user;
    native_state *st = c->job->api_state;
    const double now = rw_server__now();
    pthread_mutex_lock(&c->job->mu);
    if (!st->t_first) st->t_first = now; /* the first token: the prompt is done */
    if (ev->done) st->t_done = now;
    pthread_mutex_unlock(&c->job->mu);
    rw_server__job_on_event(user, ev);
}

/* The answer's fields the request's response_fields names (llama-server's:
 * a path "a/b" reads o["a"]["b"] and keeps it under the key "a/b"); o itself
 * without them. Takes o. */
static json_t *pick_fields(json_t *o, json_t *fields) {
    if (!o || !json_is_array(fields)) return o;
    json_t *out = json_object();
    size_t i;
    json_t *f;
    json_array_foreach(fields, i, f) {
        const char *path = json_string_value(f);
        json_t *v = o;
        for (const char *p = path; v && p && *p;) {
            const size_t n = strcspn(p, "/");
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)(n < sizeof key ? n : sizeof key - 1), p);
            v = json_object_get(v, key);
            p += n + (p[n] == '/');
        }
        if (path && v && out) json_object_set(out, path, v);
    }
    json_decref(o);
    return out;
}

/* llama-server's completion_probabilities of choice 0's tokens from
 * st->probs_sent on (then all sent): per token its id, text, bytes,
 * logprob and top_logprobs (each with its id). NULL without n_probs. */
static json_t *probs_json(rw_server__job *j) {
    native_state *st = j->api_state;
    rw_server__choice *c = &j->choice[0];
    if (!j->logprobs) return NULL;
    pthread_mutex_lock(&j->mu);
    const size_t from = st->probs_sent, n = c->n_toks - from;
    int32_t *toks = malloc((n ? n : 1) * sizeof *toks);
    rw_server__tok_lp *lps = malloc((n ? n : 1) * sizeof *lps);
    if (toks && lps && n && c->lps) {
        memcpy(toks, c->toks + from, n * sizeof *toks);
        memcpy(lps, c->lps + from, n * sizeof *lps);
    }
    const bool have = toks && lps && (!n || c->lps);
    if (have) st->probs_sent = c->n_toks;
    pthread_mutex_unlock(&j->mu);
    json_t *a = have ? rw_server__token_logprobs(j, toks, lps, n) : NULL;
    for (size_t i = 0; a && i < n; i++) {
        json_t *e = json_array_get(a, i), *top = json_object_get(e, "top_logprobs");
        json_object_set_new(e, "id", json_integer(toks[i]));
        for (int k = 0; k < lps[i].n_top; k++)
            json_object_set_new(json_array_get(top, (size_t)k), "id", json_integer(lps[i].top[k].token));
    }
    free(toks);
    free(lps);
    return a;
}

/* The stats llama-server puts in its last answer (content and, with tokens,
 * the ids given). */
static json_t *final_json(rw_server__job *j, const char *content, size_t len, bool tokens) {
    native_state *st = j->api_state;
    rw_server__choice *c = &j->choice[0];
    pthread_mutex_lock(&j->mu);
    const int64_t prompt = c->prompt_tokens, cached = c->cached_tokens, predicted = c->completion_tokens;
    const double prompt_ms = st->t_first > st->t_submit ? 1e3 * (st->t_first - st->t_submit) : 0;
    const double predicted_ms = st->t_done > st->t_first && st->t_first > 0 ? 1e3 * (st->t_done - st->t_first) : 0;
    pthread_mutex_unlock(&j->mu);
    rw_api_out o = {.raw_len = st->raw_len};
    const char *word = NULL;
    const rw_api_end end = rw_server__end_reason(j, &o, st->stops, st->n_stops, &word);
    const char *stop_type = end == RW_API_END_LENGTH ? "limit" : end == RW_API_END_STOP ? "word" : "eos";
    json_t *ids = json_array();
    for (size_t i = 0; tokens && ids && i < c->n_toks; i++) json_array_append_new(ids, json_integer(c->toks[i]));
    const int64_t prompt_n = prompt - cached;
    json_t *timings = json_pack(
        "{s:I,s:I,s:f,s:f,s:f,s:I,s:f,s:f,s:f}", "cache_n", (json_int_t)cached, "prompt_n", (json_int_t)prompt_n,
        "prompt_ms", prompt_ms, "prompt_per_token_ms", prompt_n > 0 ? prompt_ms / (double)prompt_n : 0.0,
        "prompt_per_second", prompt_ms > 0 ? 1e3 * (double)prompt_n / prompt_ms : 0.0, "predicted_n",
        (json_int_t)predicted, "predicted_ms", predicted_ms, "predicted_per_token_ms",
        predicted > 0 ? predicted_ms / (double)predicted : 0.0, "predicted_per_second",
        predicted_ms > 0 ? 1e3 * (double)predicted / predicted_ms : 0.0);
    json_t *out = json_pack("{s:i,s:o,s:o,s:i,s:b,s:s,s:I,s:I,s:I,s:b,s:b}", "index", 0, "content",
                            rw_server__text_lossy(content, len), "tokens", ids, "id_slot", -1, "stop", 1, "model",
                            j->model->id, "tokens_predicted", (json_int_t)predicted, "tokens_evaluated",
                            (json_int_t)prompt, "tokens_cached", (json_int_t)cached, "truncated", st->truncated,
                            "has_new_line", len && memchr(content, '\n', len) != NULL);
    if (!out || !timings) {
        json_decref(out);
        json_decref(timings);
        return NULL;
    }
    json_object_set_new(out, "stop_type", json_string(stop_type));
    json_object_set_new(out, "stopping_word", json_string(word ? word : ""));
    json_object_set_new(out, "stopped_eos", json_boolean(end != RW_API_END_LENGTH && end != RW_API_END_STOP));
    json_object_set_new(out, "stopped_word", json_boolean(end == RW_API_END_STOP));
    json_object_set_new(out, "stopped_limit", json_boolean(end == RW_API_END_LENGTH));
    json_object_set_new(out, "timings", timings);
    json_t *probs = probs_json(j);
    if (probs) json_object_set_new(out, "completion_probabilities", probs);
    return pick_fields(out, st->fields);
}

static char *native_body(rw_server__job *j, int *status) {
    const char *fail = rw_server__job_error(j);
    if (fail) {
        rw_server__error e;
        rw_server__job_fail_error(&e, fail);
        *status = e.http;
        return rw_server__error_json(&e);
    }
    rw_server__choice *c = &j->choice[0];
    ((native_state *)j->api_state)->raw_len = c->text_len;
    json_t *o = final_json(j, c->text, c->text_len, true);
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    *status = 200;
    return txt;
}

static bool data_event(rw_server__job *j, json_t *o) {
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    bool ok = txt && rw_server__sse_append(j, "data: ", 6) && rw_server__sse_append(j, txt, strlen(txt)) &&
              rw_server__sse_append(j, "\n\n", 2);
    free(txt);
    return ok;
}

/* The stream: a "data:" event per new piece of text, then the last one. */
static bool native_fill(rw_server__job *j) {
    native_state *st = j->api_state;
    rw_api_take t;
    rw_server__take_text(j, &t);
    bool ok = true, wrote = false;
    st->raw_len += t.len;
    if (t.len) {
        json_t *ev = json_pack("{s:i,s:o,s:b,s:i,s:I,s:I}", "index", 0, "content", rw_server__text_lossy(t.text, t.len),
                               "stop", 0, "id_slot", -1, "tokens_predicted", (json_int_t)t.completion_tokens,
                               "tokens_evaluated", (json_int_t)t.prompt_tokens);
        json_t *probs = ev ? probs_json(j) : NULL;
        if (probs) json_object_set_new(ev, "completion_probabilities", probs);
        ok = data_event(j, ev);
        wrote = true;
    }
    if (ok && (t.done || t.oom)) {
        if (t.oom || t.finish == RW_DONE_ERROR)
            ok = data_event(j, json_pack("{s:{s:s,s:s,s:n,s:n}}", "error", "message", t.oom ? "out of memory" : t.error,
                                         "type", "server_error", "param", "code"));
        else ok = data_event(j, final_json(j, "", 0, false));
        j->sse_state = 2;
        wrote = true;
    }
    free(t.text);
    if (!ok) j->sse_state = 2;
    return wrote && ok;
}

/* ---- the route ---- */

static rw_server__reply fail_reply(const rw_server__error *e) {
    return (rw_server__reply){.http = e->http, .body = rw_server__error_json(e)};
}

/* The FIM prompt of an /infill request into *out. */
static bool infill_prompt(rw_server__model *m, json_t *o, rw_server__tok_list *out, bool *truncated, rw_server__error *e) {
    const char *pre_s, *suf_s, *prompt_s;
    size_t pre_n, suf_n, prompt_n;
    json_t *extra = json_object_get(o, "input_extra");
    if (!opt_text(o, "input_prefix", &pre_s, &pre_n, e) || !opt_text(o, "input_suffix", &suf_s, &suf_n, e) ||
        !opt_text(o, "prompt", &prompt_s, &prompt_n, e))
        return false;
    if (extra && !json_is_null(extra) && !json_is_array(extra)) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, "input_extra",
                          "'input_extra' must be an array of {\"filename\", \"text\"}");
        return false;
    }
    rw_server__tok_list x = {0}, pre = {0}, prompt = {0}, suf = {0};
    bool ok = extra_tokens(m, extra, &x, e) && rw_server__tok_push_text(m, &pre, pre_s, pre_n, e) &&
              rw_server__tok_push_text(m, &prompt, prompt_s, prompt_n, e) && rw_server__tok_push_text(m, &suf, suf_s, suf_n, e);
    if (ok) {
        /* room for the code: the context less what the answer may take (n_predict, else a quarter of the
         * context), the four fixed tokens and the prompt */
        const int64_t n_ctx = rw_engine_setting_get(m->engine, RW_ENGINE_N_CTX);
        json_t *np = json_object_get(o, "n_predict"), *mt = json_object_get(o, "max_tokens");
        int64_t answer = json_is_integer(mt) && json_integer_value(mt) > 0   ? json_integer_value(mt)
                         : json_is_integer(np) && json_integer_value(np) > 0 ? json_integer_value(np)
                                                                             : n_ctx / 4;
        int64_t avail = n_ctx - answer - 4 - (int64_t)prompt.n;
        rw_server__fim_assemble(m, &x, &pre, &prompt, &suf, avail > 0 ? avail : 0, out, truncated);
        if (x.oom || pre.oom || prompt.oom || suf.oom || out->oom) {
            rw_server__errorf(e, 500, "server_error", NULL, NULL, "out of memory");
            ok = false;
        }
    }
    free(x.v);
    free(pre.v);
    free(prompt.v);
    free(suf.v);
    return ok;
}

/* The request body as a JSON object, or NULL (*e set). */
static json_t *body_object(const char *body, size_t len, rw_server__error *e) {
    json_error_t jerr;
    json_t *o = json_loadb(body ? body : "", len, 0, &jerr);
    if (json_is_object(o)) return o;
    json_decref(o);
    rw_server__errorf(e, 400, "invalid_request_error", NULL, NULL, "The request body must be a JSON object");
    return NULL;
}

/* Submits request o with the prompt (a completions request's "prompt":
 * text or token ids; taken) and answers in the native shape. Takes o. */
static rw_server__reply native_submit(rw_server__model *m, json_t *o, json_t *prompt, bool truncated) {
    rw_server__error e;
    rw_server__request r = {0};
    bool parsed = false;
    json_t *c = completion_object(o);
    if (!c || !prompt) {
        json_decref(prompt);
        rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
        goto fail;
    }
    json_object_set_new(c, "prompt", prompt);
    if (!(parsed = rw_server__parse_completion_object(m, c, &r, &e))) goto fail;
    if (r.n_more) {
        rw_server__errorf(&e, 400, "invalid_request_error", NULL, "prompt", "%s",
                          "one prompt per request here (/v1/completions takes a list)");
        goto fail;
    }
    r.n = 1;
    rw_server__job *j = rw_server__job_new(m, &r);
    native_state *st = calloc(1, sizeof *st); /* the job's (state_free) */
    if (st && r.n_stop && (st->stops = calloc((size_t)r.n_stop, sizeof *st->stops)))
        for (int i = 0; i < r.n_stop; i++)
            if ((st->stops[st->n_stops] = strdup(r.stop[i]))) st->n_stops++;
    if (!j || !st || st->n_stops != r.n_stop) {
        state_free(st);
        rw_server__job_free(j);
        rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
        goto fail;
    }
    st->truncated = truncated;
    json_t *fields = json_object_get(o, "response_fields");
    if (json_is_array(fields)) st->fields = json_incref(fields);
    st->t_submit = rw_server__now();
    j->api_state = st;
    j->api_free = state_free;
    j->api_body = native_body;
    j->api_fill = native_fill;
    rw_server__choice *ch = &j->choice[0];
    rw_error err = {0};
    if (rw_server__submit(m->engine, r.prompt, r.n_prompt, &r.gp, on_event, ch, &ch->engine_id, &err)) {
        rw_server__job_free(j);
        if (err.code == RW_ERR_BUSY)
            rw_server__errorf(&e, 429, "rate_limit_error", "rate_limit_exceeded", NULL, "%s", err.msg);
        else if (err.code == RW_ERR_CONTEXT || err.code == RW_ERR_INVALID_ARG)
            rw_server__errorf(&e, 400, "invalid_request_error", NULL, NULL, "%s", err.msg);
        else rw_server__errorf(&e, 500, "server_error", NULL, NULL, "%s", err.msg);
        goto fail;
    }
    ch->submitted = true;
    const bool stream = r.stream;
    rw_server__request_free(&r);
    json_decref(c);
    json_decref(o);
    return (rw_server__reply){.job = j, .sse = stream};
fail:
    if (parsed) rw_server__request_free(&r);
    json_decref(c);
    json_decref(o);
    return fail_reply(&e);
}

rw_server__reply rw_server__infill(rw_server__model *m, const char *body, size_t len) {
    rw_server__error e;
    json_t *o = body_object(body, len, &e);
    if (!o) return fail_reply(&e);
    if (!rw_server__fim_has(m)) {
        json_decref(o);
        rw_server__fim_none(&e, NULL);
        return fail_reply(&e);
    }
    rw_server__tok_list ids = {0};
    bool truncated = false;
    if (!infill_prompt(m, o, &ids, &truncated, &e)) {
        json_decref(o);
        free(ids.v);
        return fail_reply(&e);
    }
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < ids.n; i++)
        if (json_array_append_new(arr, json_integer(ids.v[i]))) {
            json_decref(arr);
            arr = NULL;
        }
    free(ids.v);
    return native_submit(m, o, arr, truncated);
}

/* POST /completion: the prompt as /v1/completions reads it (text, with the
 * file's BOS as generate -p; or token ids), one prompt per request. */
rw_server__reply rw_server__completion(rw_server__model *m, const char *body, size_t len) {
    rw_server__error e;
    json_t *o = body_object(body, len, &e);
    if (!o) return fail_reply(&e);
    json_t *prompt = json_object_get(o, "prompt");
    if (!json_is_string(prompt) && !json_is_array(prompt)) {
        json_decref(o);
        rw_server__errorf(&e, 400, "invalid_request_error", NULL, "prompt",
                          "'prompt' must be a string or an array of token ids");
        return fail_reply(&e);
    }
    return native_submit(m, o, json_incref(prompt), false);
}
