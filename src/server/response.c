/* response.c - OpenAI response bodies: whole completions, SSE chunks,
 * errors. Built with jansson, so strings are escaped properly. */
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

const char *rw_server__finish_name(rw_done_reason f) {
    switch (f) {
    case RW_DONE_STOP: return "stop";
    case RW_DONE_LENGTH: return "length";
    case RW_DONE_ERROR: return "error";
    default: return NULL;
    }
}

static json_t *finish_json(rw_done_reason f) {
    const char *n = rw_server__finish_name(f);
    return n ? json_string(n) : json_null();
}

/* Choice i's prompt text for echo (NULL: none) and, with return_token_ids,
 * its ids (NULL: not kept). */
static const char *choice_echo(const rw_server__job *j, int i, size_t *len) {
    const int k = i / j->per_prompt;
    *len = k ? j->more[k - 1].echo_len : j->echo_len;
    return k ? j->more[k - 1].echo : j->echo;
}

static const int32_t *choice_prompt_ids(const rw_server__job *j, int i, int64_t *n) {
    const int k = i / j->per_prompt;
    *n = k ? j->more[k - 1].n : j->n_prompt;
    return k ? j->more[k - 1].ids : j->prompt;
}

size_t rw_server__choice_prompt_lps(const rw_server__job *j, int i, const int32_t **ids) {
    const rw_server__choice *c = &j->choice[i];
    int64_t n = 0;
    *ids = choice_prompt_ids(j, i, &n);
    if (!*ids || !c->plps) {
        *ids = NULL;
        return 0;
    }
    return (size_t)(n < c->n_plps ? n : c->n_plps);
}

/* A prompt counts once (as OpenAI counts it for n > 1; a list's prompts
 * each once, from their first choice), completions add up. */
static json_t *usage_json(const rw_server__job *j) {
    int64_t completion = 0, reasoning = 0, prompt = 0, cached = 0, disk = 0;
    for (int i = 0; i < j->n; i++) {
        const rw_server__choice *c = &j->choice[i];
        completion += c->completion_tokens;
        reasoning += c->reasoning_toks;
        if (i % j->per_prompt) continue;
        prompt += c->prompt_tokens;
        cached += c->cached_tokens;
        disk += c->cached_tokens_disk;
    }
    /* cached_tokens_disk (ours, beside OpenAI's field): how many of the
     * cached tokens came from the disk tier (after a restart, or from
     * another replica sharing the folder) */
    return json_pack("{s:I,s:I,s:I,s:{s:I,s:I},s:{s:I}}", "prompt_tokens", (json_int_t)prompt, "completion_tokens",
                     (json_int_t)completion, "total_tokens", (json_int_t)(prompt + completion), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)cached, "cached_tokens_disk", (json_int_t)disk,
                     "completion_tokens_details", "reasoning_tokens", (json_int_t)reasoning);
}

static json_t *ids_json(const int32_t *t, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(t[i]));
    return a;
}


/* Well-formed UTF-8 with every invalid byte as U+FFFD (a token's bytes may
 * be part of a character). */
json_t *rw_server__text_lossy(const char *s, size_t n) {
    char *out = s ? malloc(3 * n + 1) : NULL;
    if (!out) return json_string("");
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (ok && len > 1) { /* overlong, surrogate, beyond U+10FFFF */
            unsigned char d = (unsigned char)s[i + 1];
            ok = !(c == 0xC0 || c == 0xC1 || (c == 0xE0 && d < 0xA0) || (c == 0xED && d >= 0xA0) ||
                   (c == 0xF0 && d < 0x90) || (c == 0xF4 && d >= 0x90) || c > 0xF4);
        }
        if (ok) {
            memcpy(out + o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    json_t *v = json_stringn_nocheck(out, o);
    free(out);
    return v;
}

#define piece_json rw_server__text_lossy

/* json_stringn fails on invalid UTF-8; the engine sends valid UTF-8 only,
 * but never let a response fail on it, nor lose the valid part. */
static json_t *text_json(const char *s, size_t n) {
    json_t *v = json_stringn(s ? s : "", s ? n : 0);
    return v ? v : rw_server__text_lossy(s, n);
}

json_t *rw_server__text_json(const char *s, size_t n) { return text_json(s, n); }

/* length wins over tool_calls: a limit that cut the output (even after a
 * complete call) is what the client must know */
const char *rw_server__choice_finish(const rw_server__choice *c) {
    if (c->n_calls > 0 && c->finish == RW_DONE_STOP) return "tool_calls";
    return rw_server__finish_name(c->finish);
}

/* A chat choice's message: the output parsed into content, reasoning and
 * tool calls (chat/output.h); sets c's n_calls. */
static json_t *message_json(const rw_server__job *j, rw_server__choice *c) {
    rw_chat_output_params o = j->parse;
    rw_chat_parsed m;
    rw_error err = {0};
    json_t *msg;
    o.id_seed = 0;
    /* fresh randomness for the ids */
    for (size_t i = 0; i < sizeof j->id && j->id[i]; i++) o.id_seed = o.id_seed * 131 + (unsigned char)j->id[i];
    o.id_seed ^= (uint64_t)c->index * 0x9e3779b97f4a7c15ull;
    o.cut = c->finish == RW_DONE_LENGTH;
    if (rw_server__output_parse(&o, c->text ? c->text : "", c->text_len, &m, &err)) /* out of memory: the raw text */
        return json_pack("{s:s,s:o}", "role", "assistant", "content", text_json(c->text, c->text_len));
    c->n_calls = m.n_calls;
    msg = json_pack("{s:s,s:o}", "role", "assistant", "content",
                    m.n_calls && !m.content_len ? json_null() : text_json(m.content, m.content_len));
    if (msg && m.reasoning) json_object_set_new(msg, "reasoning_content", text_json(m.reasoning, m.reasoning_len));
    if (msg && m.n_calls) {
        json_t *calls = json_array();
        for (int i = 0; i < m.n_calls; i++)
            json_array_append_new(calls, json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", m.calls[i].id, "type", "function",
                                                   "function", "name", m.calls[i].name, "arguments",
                                                   m.calls[i].arguments));
        json_object_set_new(msg, "tool_calls", calls);
    }
    rw_chat_parsed_free(&m);
    return msg;
}

static double finite_lp(float lp) { return lp == lp && lp > -9999.0f ? lp : -9999.0; /* OpenAI's -inf */ }

static size_t token_piece(const rw_server__job *j, int32_t id, char *buf, size_t cap) {
    size_t n = rw_token_to_piece(j->model->tok, id, true, buf, cap);
    return n <= cap ? n : 0;
}

static json_t *bytes_json(const char *p, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer((unsigned char)p[i]));
    return a;
}

/* The chat form of n tokens' logprobs: [{token, logprob, bytes,
 * top_logprobs: [{token, logprob, bytes}]}] (the Responses API's too). */
json_t *rw_server__token_logprobs(const rw_server__job *j, const int32_t *toks, const rw_server__tok_lp *lps, size_t n) {
    char buf[256];
    json_t *content = json_array();
    for (size_t i = 0; i < n; i++) {
        size_t len = token_piece(j, toks[i], buf, sizeof buf);
        json_t *top = json_array();
        for (int k = 0; k < lps[i].n_top; k++) {
            char b2[256];
            size_t l2 = token_piece(j, lps[i].top[k].token, b2, sizeof b2);
            json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token", piece_json(b2, l2), "logprob",
                                                 finite_lp(lps[i].top[k].logprob), "bytes", bytes_json(b2, l2)));
        }
        json_array_append_new(content,
                              json_pack("{s:o,s:f,s:o,s:o}", "token", piece_json(buf, len), "logprob",
                                        finite_lp(lps[i].lp), "bytes", bytes_json(buf, len), "top_logprobs", top));
    }
    return content;
}

/* The completions form's four arrays, n tokens appended from text offset
 * *at (moved past them); an entry whose n_top is -1 (a prompt's first
 * token: nothing precedes it) has null logprob and alternatives. */
static void append_completion_lps(const rw_server__job *j, json_t *tokens, json_t *tlp, json_t *tops, json_t *offs,
                                  const int32_t *toks, const rw_server__tok_lp *lps, size_t n, int max_top,
                                  size_t *at) {
    char buf[256];
    for (size_t i = 0; i < n; i++) {
        size_t len = token_piece(j, toks[i], buf, sizeof buf);
        json_array_append_new(tokens, piece_json(buf, len));
        json_array_append_new(offs, json_integer((json_int_t)*at));
        *at += len;
        if (lps[i].n_top < 0) {
            json_array_append_new(tlp, json_null());
            json_array_append_new(tops, json_null());
            continue;
        }
        json_array_append_new(tlp, json_real(finite_lp(lps[i].lp)));
        json_t *top = json_object();
        for (int k = 0; k < lps[i].n_top && k < max_top; k++) {
            char b2[256];
            size_t l2 = token_piece(j, lps[i].top[k].token, b2, sizeof b2);
            json_t *key = piece_json(b2, l2);
            json_object_set_new(top, json_string_value(key), json_real(finite_lp(lps[i].top[k].logprob)));
            json_decref(key);
        }
        json_array_append_new(tops, top);
    }
}

/* OpenAI's logprobs object of a choice: completions, the n_p prompt
 * tokens' first (echo with logprobs; their text offsets from 0), then the
 * n generated ones' (offsets from text_offset); chat, the generated ones'. */
static json_t *logprobs_json(const rw_server__job *j, const int32_t *ptoks, const rw_server__tok_lp *plps, size_t n_p,
                             const int32_t *toks, const rw_server__tok_lp *lps, size_t n, size_t text_offset) {
    if (j->chat) return json_pack("{s:o,s:n}", "content", rw_server__token_logprobs(j, toks, lps, n), "refusal");
    json_t *tokens = json_array(), *tlp = json_array(), *tops = json_array(), *offs = json_array();
    size_t at = 0;
    append_completion_lps(j, tokens, tlp, tops, offs, ptoks, plps, n_p, j->echo_lp, &at);
    at = text_offset;
    append_completion_lps(j, tokens, tlp, tops, offs, toks, lps, n, RW_MAX_TOP_LOGPROBS, &at);
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", tlp, "top_logprobs", tops,
                     "text_offset", offs);
}

/* vLLM's prompt_logprobs of n prompt tokens: null for the first, then for
 * each {"<id>": {logprob, rank, decoded_token}} of the token itself and of
 * its j->vllm_lp most likely alternatives (an alternative's rank: 1 + those
 * before it that are more likely). */
static json_t *vllm_prompt_logprobs(const rw_server__job *j, const int32_t *ids, const rw_server__tok_lp *lps,
                                    size_t n) {
    json_t *a = json_array();
    char buf[256], key[16];
    for (size_t i = 0; i < n; i++) {
        if (lps[i].n_top < 0) {
            json_array_append_new(a, json_null());
            continue;
        }
        json_t *o = json_object();
        size_t len = token_piece(j, ids[i], buf, sizeof buf);
        snprintf(key, sizeof key, "%d", (int)ids[i]);
        json_object_set_new(o, key,
                            json_pack("{s:f,s:i,s:o}", "logprob", finite_lp(lps[i].lp), "rank", (int)lps[i].rank,
                                      "decoded_token", piece_json(buf, len)));
        int rank = 1;
        for (int k = 0; k < lps[i].n_top && k < j->vllm_lp; k++) {
            const rw_token_logprob *t = &lps[i].top[k];
            if (k > 0 && t->logprob < lps[i].top[k - 1].logprob) rank = k + 1;
            if (t->token == ids[i]) continue;
            len = token_piece(j, t->token, buf, sizeof buf);
            snprintf(key, sizeof key, "%d", (int)t->token);
            json_object_set_new(o, key,
                                json_pack("{s:f,s:i,s:o}", "logprob", finite_lp(t->logprob), "rank", rank,
                                          "decoded_token", piece_json(buf, len)));
        }
        json_array_append_new(a, o);
    }
    return a;
}

/* Choice i's prompt logprobs in vLLM's form, or NULL when not asked or not there. */
static json_t *choice_vllm_plp(const rw_server__job *j, int i) {
    const int32_t *ids = NULL;
    const size_t n = j->vllm_lp >= 0 ? rw_server__choice_prompt_lps(j, i, &ids) : 0;
    return n ? vllm_prompt_logprobs(j, ids, j->choice[i].plps, n) : NULL;
}

/* Choice i's text: with echo, its prompt's text first. */
static json_t *completion_text(const rw_server__job *j, int i) {
    const rw_server__choice *c = &j->choice[i];
    size_t echo_len;
    const char *echo = choice_echo(j, i, &echo_len);
    if (!echo) return text_json(c->text, c->text_len);
    char *all = malloc(echo_len + c->text_len + 1);
    if (!all) return NULL;
    memcpy(all, echo, echo_len);
    if (c->text_len) memcpy(all + echo_len, c->text, c->text_len);
    json_t *v = text_json(all, echo_len + c->text_len);
    free(all);
    return v;
}

static json_t *envelope(const rw_server__job *j, const char *model, const char *object, json_t *choices) {
    return json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", j->id, "object", object, "created", (json_int_t)j->created,
                     "model", model, "choices", choices);
}

char *rw_server__response_json(const rw_server__job *j) {
    json_t *choices = json_array();
    for (int i = 0; i < j->n; i++) {
        rw_server__choice *c = (rw_server__choice *)&j->choice[i]; /* its n_calls is set here */
        json_t *choice;
        if (j->chat) {
            json_t *msg = message_json(j, c);
            const char *fin = rw_server__choice_finish(c);
            choice = msg ? json_pack("{s:i,s:o,s:n,s:o}", "index", i, "message", msg, "logprobs", "finish_reason",
                                     fin ? json_string(fin) : json_null())
                         : NULL;
        } else
            choice = json_pack("{s:i,s:o,s:n,s:o}", "index", i, "text", completion_text(j, i), "logprobs",
                               "finish_reason", finish_json(c->finish));
        if (!choice) {
            json_decref(choices);
            return NULL;
        }
        if (j->return_token_ids) json_object_set_new(choice, "token_ids", ids_json(c->toks, c->n_toks));
        int64_t n_pids = 0;
        const int32_t *pids = choice_prompt_ids(j, i, &n_pids);
        if (j->return_token_ids && j->n_more && pids) /* a list of prompts: each choice's own */
            json_object_set_new(choice, "prompt_token_ids", ids_json(pids, (size_t)n_pids));
        size_t echo_len = 0;
        choice_echo(j, i, &echo_len);
        /* the generated tokens' (with echo, their offsets count the prompt's
         * text), after the prompt's when echo asked for them */
        const int32_t *plids = NULL;
        const size_t n_p = j->echo_lp >= 0 ? rw_server__choice_prompt_lps(j, i, &plids) : 0;
        json_t *vp = j->chat ? NULL : choice_vllm_plp(j, i);
        if (vp) json_object_set_new(choice, "prompt_logprobs", vp);
        if (j->logprobs)
            json_object_set_new(choice, "logprobs",
                                logprobs_json(j, plids, c->plps, n_p, c->toks, c->lps, c->n_toks, echo_len));
        json_array_append_new(choices, choice);
    }
    json_t *o = envelope(j, j->model->id, j->chat ? "chat.completion" : "text_completion", choices);
    if (!o) return NULL;
    json_object_set_new(o, "usage", usage_json(j));
    json_t *vp = j->chat ? choice_vllm_plp(j, 0) : NULL; /* chat: the response's (vLLM's place) */
    if (vp) json_object_set_new(o, "prompt_logprobs", vp);
    if (j->return_token_ids && j->prompt && !j->n_more)
        json_object_set_new(o, "prompt_token_ids", ids_json(j->prompt, (size_t)j->n_prompt));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

bool rw_server__sse_append(rw_server__job *j, const char *s, size_t n) {
    char *p = realloc(j->out, j->out_len + n);
    if (!p) return false;
    j->out = p;
    memcpy(j->out + j->out_len, s, n);
    j->out_len += n;
    return true;
}

static bool append_event(rw_server__job *j, json_t *o) {
    if (!o) return false;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return false;
    bool ok = rw_server__sse_append(j, "data: ", 6) && rw_server__sse_append(j, s, strlen(s)) && rw_server__sse_append(j, "\n\n", 2);
    free(s);
    return ok;
}

static bool chunk_event(rw_server__job *j, json_t *choice, const int32_t *toks, const rw_server__tok_lp *lps, size_t n_toks) {
    if (!choice) return false;
    if (j->return_token_ids && n_toks) json_object_set_new(choice, "token_ids", ids_json(toks, n_toks));
    if (lps && n_toks) json_object_set_new(choice, "logprobs", logprobs_json(j, NULL, NULL, 0, toks, lps, n_toks, 0));
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_t *o = envelope(j, j->model->id, j->chat ? "chat.completion.chunk" : "text_completion", choices);
    if (o && j->include_usage) json_object_set_new(o, "usage", json_null());
    return append_event(j, o);
}

bool rw_server__sse_delta(rw_server__job *j, int index, json_t *delta, const int32_t *toks, const rw_server__tok_lp *lps, size_t n_toks,
                   const char *finish) {
    if (!delta) return false;
    json_t *choice = json_pack("{s:i,s:o,s:n,s:o}", "index", index, "delta", delta, "logprobs", "finish_reason",
                               finish ? json_string(finish) : json_null());
    return chunk_event(j, choice, toks, lps, n_toks);
}

bool rw_server__sse_chunk(rw_server__job *j, int index, const char *text, size_t text_len, const int32_t *toks,
                   const rw_server__tok_lp *lps, size_t n_toks, bool first, rw_done_reason finish) {
    if (j->chat) {
        json_t *delta = json_object();
        if (first) {
            json_object_set_new(delta, "role", json_string("assistant"));
            json_object_set_new(delta, "content", json_string(""));
        } else if (text_len) json_object_set_new(delta, "content", text_json(text, text_len));
        return rw_server__sse_delta(j, index, delta, toks, lps, n_toks, rw_server__finish_name(finish));
    }
    size_t echo_len;
    const char *echo = choice_echo(j, index, &echo_len);
    if (first && !echo) return true; /* completions have no role chunk */
    /* echo: the prompt's text comes first, with its tokens' logprobs when
     * given (toks and lps are then the prompt's) */
    if (first) {
        json_t *choice = json_pack("{s:i,s:o,s:n,s:n}", "index", index, "text", text_json(echo, echo_len), "logprobs",
                                   "finish_reason");
        if (choice && lps && n_toks)
            json_object_set_new(choice, "logprobs", logprobs_json(j, toks, lps, n_toks, NULL, NULL, 0, 0));
        return chunk_event(j, choice, NULL, NULL, 0);
    }
    return chunk_event(j,
                       json_pack("{s:i,s:o,s:n,s:o}", "index", index, "text", text_json(text, text_len), "logprobs",
                                 "finish_reason", finish_json(finish)),
                       toks, lps, n_toks);
}

bool rw_server__sse_usage(rw_server__job *j) {
    json_t *o = envelope(j, j->model->id, j->chat ? "chat.completion.chunk" : "text_completion", json_array());
    if (o) json_object_set_new(o, "usage", usage_json(j));
    return append_event(j, o);
}

bool rw_server__sse_error(rw_server__job *j, const char *msg) {
    return append_event(j, json_pack("{s:{s:s,s:s,s:n,s:n}}", "error", "message", msg, "type", "server_error",
                                     "param", "code"));
}

char *rw_server__error_json(const rw_server__error *e) {
    json_t *o = json_pack("{s:{s:o,s:s,s:o,s:o}}", "error", "message", text_json(e->msg, strlen(e->msg)), "type",
                          e->type, "param",
                          e->param[0] ? json_string(e->param) : json_null(), "code",
                          e->code ? json_string(e->code) : json_null());
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}
