/* test_server_agent.c - the chat API as agents use it (docs/agent-api.md),
 * end to end through the server on a random-weight fixture model:
 *   - every fixture chat template (as --chat-template-file) answers a
 *     two-turn tool loop shaped as the openai client sends it (content null,
 *     arguments as a JSON string, tool results), whole and streamed, and the
 *     prefix cache serves the follow-up turn;
 *   - reasoning: with Qwen3.5's template (its generation prompt opens
 *     <think>) the output goes to reasoning_content, whole and streamed, as
 *     the parser splits the raw text (reasoning_format "none"); with
 *     enable_thinking false (top level, chat_template_kwargs, reasoning_effort
 *     "none", --chat-template-kwargs) the prompt closes the block and the
 *     output is content;
 *   - tool_choice "none" renders no tools; unknown fields are ignored and
 *     logged once per name, a 400 with --strict-api; GET /props.
 * A random model never writes a tool call by itself: the call parsing is
 * tested on text in tests/chat/test_chat_output.c. */
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "chat/chat.h"
#include "chat/output.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "harness.h"
#include "models/model.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"
#include "tools/http_client.h"

static rw_model *g_model;
static rw_tokenizer *g_tok;
static rw_engine *g_engine;
static char *g_bos, *g_eos;

/* ---- log hook ---- */

static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_log[8192];
static void log_hook(void *user, rw_log_level level, const char *line) {
    (void)user;
    (void)level;
    pthread_mutex_lock(&g_log_mu);
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s\n", line);
    pthread_mutex_unlock(&g_log_mu);
}

static int count_in_log(const char *what) {
    int k = 0;
    pthread_mutex_lock(&g_log_mu);
    for (const char *p = g_log; (p = strstr(p, what)); p++) k++;
    pthread_mutex_unlock(&g_log_mu);
    return k;
}

/* ---- servers and requests ---- */

typedef struct {
    rw_chat_template *tmpl;
    rw_server *srv;
    int port;
    char *src;
    size_t src_len;
} served;

static bool serve(const char *template_file, const rw_server_config *extra, served *out) {
    memset(out, 0, sizeof *out);
    out->src = rw_test_read_file(template_file, &out->src_len);
    rw_error err = {0};
    CHECK_MSG(out->src && !rw_chat_template_parse(out->src, out->src_len, &out->tmpl, &err), "%s: %s", template_file,
              err.msg);
    if (!out->tmpl) return false;
    rw_server_config sc = extra ? *extra : (rw_server_config){0};
    sc.model_id = "fixture";
    CHECK_MSG(!rw_server_start(g_engine, g_tok, out->tmpl, g_bos, g_eos, &sc, &out->srv, &err), "%s", err.msg);
    if (!out->srv) return false;
    out->port = rw_server_port(out->srv);
    return true;
}

static void unserve(served *s) {
    rw_server_stop(s->srv);
    rw_chat_template_free(s->tmpl);
    free(s->src);
}

static json_t *post(int port, const char *path, const char *body, int *status) {
    rw_http_request rq = {.port = port, .method = "POST", .path = path, .body = body, .body_len = strlen(body)};
    rw_http_response r;
    rw_error err = {0};
    rw_status st = rw_http_do(&rq, &r, &err);
    CHECK_MSG(!st, "%s: %s", path, err.msg);
    *status = st ? -1 : r.status;
    json_t *j = r.body ? json_loads(r.body, JSON_ALLOW_NUL, NULL) : NULL;
    CHECK_MSG(j, "not JSON: %.300s", r.body ? r.body : "");
    if (*status != 200) fprintf(stderr, "status %d: %.400s\n", *status, r.body ? r.body : "");
    rw_http_response_free(&r);
    return j;
}

/* A stream's deltas, accumulated. */
typedef struct {
    char content[8192], reasoning[8192];
    size_t nc, nr;
    int n_tool_deltas;
    char finish[16];
    bool done, bad;
    long long prompt_tokens;
} acc;

static void app(char *b, size_t *n, size_t cap, json_t *s) {
    size_t k = json_string_length(s);
    if (*n + k < cap) {
        memcpy(b + *n, json_string_value(s), k);
        *n += k;
        b[*n] = 0;
    }
}

static bool on_event(void *user, const char *data, size_t n) {
    acc *a = user;
    if (n == 6 && !memcmp(data, "[DONE]", 6)) {
        a->done = true;
        return true;
    }
    json_t *j = json_loadb(data, n, JSON_ALLOW_NUL, NULL);
    if (!j) {
        a->bad = true;
        return false;
    }
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *d = json_object_get(c, "delta");
    if (json_is_string(json_object_get(d, "content"))) app(a->content, &a->nc, sizeof a->content, json_object_get(d, "content"));
    if (json_is_string(json_object_get(d, "reasoning_content")))
        app(a->reasoning, &a->nr, sizeof a->reasoning, json_object_get(d, "reasoning_content"));
    if (json_object_get(d, "tool_calls")) a->n_tool_deltas++;
    if (json_is_string(json_object_get(c, "finish_reason")))
        snprintf(a->finish, sizeof a->finish, "%s", json_string_value(json_object_get(c, "finish_reason")));
    json_t *u = json_object_get(j, "usage");
    if (json_is_object(u)) a->prompt_tokens = json_integer_value(json_object_get(u, "prompt_tokens"));
    json_decref(j);
    return true;
}

static bool on_data(void *user, const char *d, size_t n) { return rw_sse_feed(user, d, n); }

static int stream(int port, const char *body, acc *a) {
    memset(a, 0, sizeof *a);
    rw_sse_parser p = {.on_event = on_event, .user = a};
    rw_http_request rq = {.port = port, .method = "POST", .path = "/v1/chat/completions", .body = body,
                          .body_len = strlen(body), .on_data = on_data, .user = &p};
    rw_http_response r;
    rw_error err = {0};
    rw_status st = rw_http_do(&rq, &r, &err);
    CHECK_MSG(!st, "stream: %s", err.msg);
    int status = st ? -1 : r.status;
    rw_http_response_free(&r);
    rw_sse_free(&p);
    CHECK(!a->bad && a->done);
    return status;
}

static const char *msg_str(json_t *resp, const char *key) {
    return json_string_value(json_object_get(json_object_get(json_array_get(json_object_get(resp, "choices"), 0),
                                                             "message"),
                                             key));
}

static long long usage(json_t *resp, const char *key) {
    json_t *u = json_object_get(resp, "usage");
    if (!strcmp(key, "cached_tokens")) u = json_object_get(u, "prompt_tokens_details");
    return json_integer_value(json_object_get(u, key));
}

/* ---- the tool loop on every template ---- */

#define TOOLS                                                                                                       \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather of a city\"," \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]"

/* The openai client's second turn: the first turn, the call it answered
 * (content null, arguments a JSON string), the result. */
#define TURN1 "{\"role\":\"system\",\"content\":\"You are terse.\"},{\"role\":\"user\",\"content\":\"Weather in Paris?\"}"
#define TURN2                                                                                                      \
    TURN1 ",{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_4f1c2a9e\",\"type\":"         \
          "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"   \
          "{\"role\":\"tool\",\"tool_call_id\":\"call_4f1c2a9e\",\"content\":\"{\\\"temp_c\\\":21}\"}"

static void tool_loop(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    served s;
    if (!serve(path, NULL, &s)) return;
    char body[4096];
    int status;
    snprintf(body, sizeof body, "{\"messages\":[" TURN1 "]," TOOLS ",\"max_tokens\":3,\"temperature\":0}");
    json_t *r1 = post(s.port, "/v1/chat/completions", body, &status);
    CHECK_MSG(status == 200, "%s: turn 1: %d", name, status);
    snprintf(body, sizeof body, "{\"messages\":[" TURN2 "]," TOOLS ",\"max_tokens\":3,\"temperature\":0}");
    json_t *r2 = post(s.port, "/v1/chat/completions", body, &status);
    CHECK_MSG(status == 200, "%s: turn 2: %d", name, status);
    /* the follow-up turn's prompt starts with the first turn's: the prefix cache serves it */
    CHECK_MSG(usage(r2, "cached_tokens") > 0, "%s: turn 2 cached %lld of %lld", name, usage(r2, "cached_tokens"),
              usage(r2, "prompt_tokens"));
    snprintf(body, sizeof body,
             "{\"messages\":[" TURN2 "]," TOOLS ",\"max_tokens\":3,\"temperature\":0,\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true}}");
    acc a;
    CHECK_MSG(stream(s.port, body, &a) == 200, "%s: turn 2 streamed", name);
    CHECK_EQ_INT(a.prompt_tokens, usage(r2, "prompt_tokens"));
    /* whole and streamed give the same split */
    const char *c2 = msg_str(r2, "content"), *re2 = msg_str(r2, "reasoning_content");
    CHECK_MSG(!strcmp(c2 ? c2 : "", a.content) && !strcmp(re2 ? re2 : "", a.reasoning), "%s: [%s|%s] vs [%s|%s]",
              name, c2 ? c2 : "", re2 ? re2 : "", a.content, a.reasoning);
    json_decref(r1);
    json_decref(r2);
    unserve(&s);
}

static void test_templates(void) {
    const char *dir = rw_test_fixture_path("chat/templates");
    DIR *d = opendir(dir);
    CHECK(d);
    if (!d) return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".jinja")) {
            tool_loop(dir, e->d_name);
            n++;
        }
    closedir(d);
    CHECK(n >= 15);
}

/* ---- reasoning ---- */

static void test_reasoning(void) {
    served s;
    if (!serve(rw_test_fixture_path("chat/templates/Qwen3.5-4B.jinja"), NULL, &s)) return;
    const char *q = "\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],\"max_tokens\":12,"
                    "\"temperature\":0,\"ignore_eos\":true";
    char body[1024];
    int status;
    snprintf(body, sizeof body, "{%s,\"reasoning_format\":\"none\"}", q);
    json_t *raw = post(s.port, "/v1/chat/completions", body, &status);
    CHECK_EQ_INT(status, 200);
    const char *text = msg_str(raw, "content");
    CHECK(text && !msg_str(raw, "reasoning_content"));
    /* what the parser makes of that text when the prompt opened <think> */
    rw_chat_output_opts o = {.reasoning = RW_REASONING_DEEPSEEK, .in_reasoning = true};
    rw_chat_parsed want;
    rw_error err = {0};
    CHECK(!rw_chat_output_parse(&o, text ? text : "", text ? strlen(text) : 0, &want, &err));
    CHECK(want.reasoning && want.reasoning_len > 0);
    snprintf(body, sizeof body, "{%s}", q);
    json_t *split = post(s.port, "/v1/chat/completions", body, &status);
    CHECK_EQ_INT(status, 200);
    const char *rc = msg_str(split, "reasoning_content"), *c = msg_str(split, "content");
    CHECK_MSG(rc && want.reasoning && !strcmp(rc, want.reasoning), "reasoning [%s], want [%s]", rc ? rc : "(none)",
              want.reasoning ? want.reasoning : "");
    CHECK(c && !strcmp(c, want.content));
    /* usage: the think block's tokens (all of them when it never closed), none without the split */
    json_t *details = json_object_get(json_object_get(split, "usage"), "completion_tokens_details");
    long long rt = json_integer_value(json_object_get(details, "reasoning_tokens"));
    CHECK_MSG(want.content_len ? rt > 0 && rt < usage(split, "completion_tokens")
                               : rt == usage(split, "completion_tokens"),
              "reasoning_tokens %lld of %lld", rt, usage(split, "completion_tokens"));
    details = json_object_get(json_object_get(raw, "usage"), "completion_tokens_details");
    CHECK(json_integer_value(json_object_get(details, "reasoning_tokens")) == 0 &&
          json_is_integer(json_object_get(details, "reasoning_tokens")));
    /* the Responses API counts the same */
    json_t *resp = post(s.port, "/v1/responses",
                        "{\"input\":\"What is 2+2?\",\"max_output_tokens\":12,\"temperature\":0}", &status);
    json_t *ru = json_object_get(resp, "usage");
    CHECK_MSG(
        json_integer_value(json_object_get(ru, "output_tokens")) != 12 ||
            json_integer_value(json_object_get(json_object_get(ru, "output_tokens_details"), "reasoning_tokens")) == rt,
        "responses reasoning_tokens %lld, chat %lld",
        json_integer_value(json_object_get(json_object_get(ru, "output_tokens_details"), "reasoning_tokens")), rt);
    json_decref(resp);
    /* Responses logprobs: thinking off, every output token of the text with its 2 alternatives */
    resp = post(s.port, "/v1/responses",
                "{\"input\":\"What is 2+2?\",\"max_output_tokens\":6,\"temperature\":0,\"reasoning\":{\"effort\":"
                "\"none\"},\"include\":[\"message.output_text.logprobs\"],\"top_logprobs\":2}",
                &status);
    CHECK_EQ_INT(status, 200);
    json_t *item = json_array_get(json_object_get(resp, "output"), 0);
    json_t *lps = json_object_get(json_array_get(json_object_get(item, "content"), 0), "logprobs");
    long long out_toks = json_integer_value(json_object_get(json_object_get(resp, "usage"), "output_tokens"));
    CHECK_MSG(json_array_size(lps) > 0 && (long long)json_array_size(lps) <= out_toks, "%zu logprobs for %lld tokens",
              json_array_size(lps), out_toks);
    size_t li;
    json_t *lp;
    json_array_foreach(lps, li, lp) {
        CHECK(json_is_string(json_object_get(lp, "token")) && json_is_number(json_object_get(lp, "logprob")) &&
              json_number_value(json_object_get(lp, "logprob")) <= 0);
        CHECK_EQ_INT((int)json_array_size(json_object_get(lp, "top_logprobs")), 2);
    }
    json_decref(resp);
    snprintf(body, sizeof body, "{%s,\"stream\":true}", q);
    acc a;
    CHECK_EQ_INT(stream(s.port, body, &a), 200);
    CHECK_MSG(want.reasoning && !strcmp(a.reasoning, want.reasoning), "streamed reasoning [%s]", a.reasoning);
    CHECK(!strcmp(a.content, want.content));
    rw_chat_parsed_free(&want);

    /* thinking off, four ways: the template closes the block, the output is content */
    static const char *const off[] = {"\"enable_thinking\":false", "\"chat_template_kwargs\":{\"enable_thinking\":false}",
                                      "\"reasoning_effort\":\"none\""};
    long long p_off = -1;
    for (int i = 0; i < 3; i++) {
        snprintf(body, sizeof body, "{%s,%s}", q, off[i]);
        json_t *r = post(s.port, "/v1/chat/completions", body, &status);
        CHECK_MSG(status == 200, "%s", off[i]);
        CHECK_MSG(!msg_str(r, "reasoning_content") && msg_str(r, "content"), "%s: reasoning split", off[i]);
        if (p_off < 0) p_off = usage(r, "prompt_tokens");
        CHECK_MSG(usage(r, "prompt_tokens") == p_off, "%s: prompt %lld, want %lld", off[i], usage(r, "prompt_tokens"),
                  p_off);
        json_decref(r);
    }
    CHECK(p_off != usage(split, "prompt_tokens"));
    unserve(&s);
    rw_server_config kw = {.chat_template_kwargs = "{\"enable_thinking\": false}"};
    if (!serve(rw_test_fixture_path("chat/templates/Qwen3.5-4B.jinja"), &kw, &s)) return;
    snprintf(body, sizeof body, "{%s}", q);
    json_t *r = post(s.port, "/v1/chat/completions", body, &status);
    CHECK_EQ_INT(usage(r, "prompt_tokens"), p_off);
    CHECK(!msg_str(r, "reasoning_content"));
    json_decref(r);
    /* a request's kwargs override the server's */
    snprintf(body, sizeof body, "{%s,\"chat_template_kwargs\":{\"enable_thinking\":true}}", q);
    r = post(s.port, "/v1/chat/completions", body, &status);
    CHECK_EQ_INT(usage(r, "prompt_tokens"), usage(split, "prompt_tokens"));
    json_decref(r);
    unserve(&s);
    json_decref(raw);
    json_decref(split);
}

/* ---- llama-server's helper routes ---- */

/* /tokenize with_pieces gives each token's text (concatenated: the
 * content); /apply-template gives the rendered prompt, whose tokens are the
 * chat completion's prompt_token_ids for the same request. */
static void test_helper_routes(void) {
    served s;
    if (!serve(rw_test_fixture_path("chat/templates/Qwen3.5-4B.jinja"), NULL, &s)) return;
    int status;
    json_t *tk = post(s.port, "/tokenize", "{\"content\":\"Hello world, hello!\",\"with_pieces\":true}", &status);
    CHECK_EQ_INT(status, 200);
    char joined[256] = "";
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(tk, "tokens"), i, v) {
        CHECK(json_is_integer(json_object_get(v, "id")));
        const char *piece = json_string_value(json_object_get(v, "piece"));
        CHECK(piece != NULL);
        if (piece && strlen(joined) + strlen(piece) < sizeof joined) strcat(joined, piece);
    }
    CHECK_MSG(!strcmp(joined, "Hello world, hello!"), "pieces joined: '%s'", joined);
    json_decref(tk);
    const char *msgs = "\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\","
                       "\"content\":\"Hi there\"}]";
    char body[1024];
    snprintf(body, sizeof body, "{%s}", msgs);
    json_t *at = post(s.port, "/apply-template", body, &status);
    CHECK_EQ_INT(status, 200);
    const char *prompt = json_string_value(json_object_get(at, "prompt"));
    CHECK_MSG(prompt && strstr(prompt, "Hi there") && strstr(prompt, "Be brief.") && strstr(prompt, "<|im_start|>"),
              "apply-template: %s", prompt ? prompt : "(none)");
    snprintf(body, sizeof body, "{%s,\"max_tokens\":1,\"return_token_ids\":true}", msgs);
    json_t *cc = post(s.port, "/v1/chat/completions", body, &status);
    CHECK_EQ_INT(status, 200);
    json_t *want = json_object_get(cc, "prompt_token_ids");
    json_t *tb = json_pack("{s:s,s:b}", "content", prompt ? prompt : "", "parse_special", 1);
    char *tbs = json_dumps(tb, JSON_COMPACT);
    json_t *got = post(s.port, "/tokenize", tbs, &status);
    CHECK_MSG(want && json_equal(json_object_get(got, "tokens"), want), "apply-template's prompt tokenizes otherwise");
    free(tbs);
    json_decref(tb);
    json_decref(got);
    json_decref(cc);
    json_decref(at);
    json_t *bad = post(s.port, "/apply-template", "{\"messages\":3}", &status);
    CHECK_EQ_INT(status, 400);
    json_decref(bad);
    unserve(&s);
}

/* ---- the thinking budget ---- */

static int ids_of(json_t *resp, int32_t *out, int cap) {
    json_t *a = json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "token_ids"), *v;
    size_t i;
    int n = 0;
    json_array_foreach(a, i, v) if (n < cap) out[n++] = (int32_t)json_integer_value(v);
    return n;
}

static void test_budget(void) {
    served s;
    if (!serve(rw_test_fixture_path("chat/templates/Qwen3.5-4B.jinja"), NULL, &s)) return;
    const char *q = "\"messages\":[{\"role\":\"user\",\"content\":\"Think, then answer.\"}],\"max_tokens\":24,"
                    "\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true";
    char body[1024];
    int status;
    snprintf(body, sizeof body, "{%s}", q);
    json_t *full = post(s.port, "/v1/chat/completions", body, &status);
    CHECK_EQ_INT(status, 200);
    int32_t want[64], got[64], close[16];
    int n_want = ids_of(full, want, 64);
    /* the close marker's tokens */
    json_t *tk = post(s.port, "/tokenize", "{\"content\":\"\\n</think>\\n\\n\",\"parse_special\":true}", &status);
    int n_close = 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(tk, "tokens"), i, v) if (n_close < 16) close[n_close++] = (int32_t)json_integer_value(v);
    CHECK(n_close > 0);
    json_decref(tk);
    for (int budget = 0; budget <= 6; budget += 6) {
        snprintf(body, sizeof body, "{%s,\"reasoning_budget\":%d}", q, budget);
        json_t *r = post(s.port, "/v1/chat/completions", body, &status);
        CHECK_EQ_INT(status, 200);
        int n_got = ids_of(r, got, 64);
        /* budget tokens of thinking as without a budget, the close, then the answer up to max_tokens */
        CHECK_EQ_INT(n_got, 24);
        CHECK_EQ_INT(usage(r, "completion_tokens"), 24);
        CHECK_EQ_INT(usage(r, "prompt_tokens"), usage(full, "prompt_tokens"));
        CHECK(n_want >= budget && !memcmp(got, want, (size_t)budget * sizeof *got));
        CHECK_MSG(n_got >= budget + n_close && !memcmp(got + budget, close, (size_t)n_close * sizeof *got),
                  "budget %d: no close marker after the budget", budget);
        const char *rc = msg_str(r, "reasoning_content"), *frc = msg_str(full, "reasoning_content");
        if (budget == 0) CHECK(!rc);
        else CHECK_MSG(rc && frc && !strncmp(frc, rc, strlen(rc)), "budget %d: reasoning [%s] vs [%s]", budget,
                       rc ? rc : "", frc ? frc : "");
        CHECK(msg_str(r, "content") && strlen(msg_str(r, "content")) > 0);
        /* streamed: the same split */
        snprintf(body, sizeof body, "{%s,\"reasoning_budget\":%d,\"stream\":true}", q, budget);
        acc a;
        CHECK_EQ_INT(stream(s.port, body, &a), 200);
        CHECK(!strcmp(a.reasoning, rc ? rc : "") && !strcmp(a.content, msg_str(r, "content") ?: ""));
        json_decref(r);
    }
    unserve(&s);
    /* --reasoning-budget: the server's default */
    rw_server_config b = {.has_reasoning_budget = true, .reasoning_budget = 6};
    if (!serve(rw_test_fixture_path("chat/templates/Qwen3.5-4B.jinja"), &b, &s)) return;
    snprintf(body, sizeof body, "{%s}", q);
    json_t *r = post(s.port, "/v1/chat/completions", body, &status);
    int n_got = ids_of(r, got, 64);
    CHECK(n_got >= 6 + n_close && !memcmp(got + 6, close, (size_t)n_close * sizeof *got));
    json_decref(r);
    unserve(&s);
    json_decref(full);
}

/* ---- forced calls ---- */

#define WTOOLS                                                                                                     \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","     \
    "\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12},\"days\":{\"type\":\"integer\",\"minimum\":1,"    \
    "\"maximum\":7}},\"required\":[\"city\",\"days\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"get_time\","   \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"zone\":{\"enum\":[\"UTC\",\"CET\"]}},\"required\":"         \
    "[\"zone\"]}}}]"

/* arguments that validate against WTOOLS' schema of name */
static bool args_valid(const char *name, const char *args) {
    json_t *a = args ? json_loads(args, 0, NULL) : NULL;
    bool ok = json_is_object(a);
    if (ok && !strcmp(name, "get_weather")) {
        json_t *c = json_object_get(a, "city"), *d = json_object_get(a, "days");
        ok = json_object_size(a) == 2 && json_is_string(c) && json_string_length(c) <= 12 && json_is_integer(d) &&
             json_integer_value(d) >= 1 && json_integer_value(d) <= 7;
    } else if (ok && !strcmp(name, "get_time")) {
        const char *z = json_string_value(json_object_get(a, "zone"));
        ok = json_object_size(a) == 1 && z && (!strcmp(z, "UTC") || !strcmp(z, "CET"));
    } else ok = false;
    json_decref(a);
    return ok;
}

/* A stream's tool call deltas, put together as the openai client does. */
typedef struct {
    int n;
    char name[4][64], args[4][512];
    bool name_first; /* every call's first delta had its id and name */
    int arg_deltas;
    char finish[16];
} calls_acc;

static bool on_call_event(void *user, const char *data, size_t n) {
    calls_acc *a = user;
    if (n == 6 && !memcmp(data, "[DONE]", 6)) return true;
    json_t *j = json_loadb(data, n, JSON_ALLOW_NUL, NULL);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0), *tc = json_object_get(json_object_get(c, "delta"), "tool_calls"), *x;
    size_t i;
    json_array_foreach(tc, i, x) {
        int k = (int)json_integer_value(json_object_get(x, "index"));
        json_t *fn = json_object_get(x, "function");
        if (k == a->n && k < 4) { /* a new call: its first delta */
            a->name_first &= json_is_string(json_object_get(x, "id")) && json_is_string(json_object_get(fn, "name"));
            snprintf(a->name[k], 64, "%s", json_string_value(json_object_get(fn, "name")) ?: "");
            a->n++;
        }
        const char *piece = json_string_value(json_object_get(fn, "arguments"));
        if (k < a->n && piece && *piece) {
            strncat(a->args[k], piece, sizeof a->args[k] - strlen(a->args[k]) - 1);
            a->arg_deltas++;
        }
    }
    if (json_is_string(json_object_get(c, "finish_reason")))
        snprintf(a->finish, sizeof a->finish, "%s", json_string_value(json_object_get(c, "finish_reason")));
    json_decref(j);
    return true;
}

static void forced(const char *tmpl, const char *tool_format) {
    served s;
    rw_server_config cfg = {.tool_format = tool_format};
    char path[512];
    snprintf(path, sizeof path, "chat/templates/%s.jinja", tmpl);
    if (!serve(rw_test_fixture_path(path), &cfg, &s)) return;
    static const char *const choices[] = {"\"required\"", "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}",
                                          "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}"};
    for (int k = 0; k < 3; k++) {
        char body[4096];
        int status;
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}]," WTOOLS ",\"tool_choice\":%s,"
                 "\"parallel_tool_calls\":false,\"max_tokens\":400,\"temperature\":0}",
                 choices[k]);
        json_t *r = post(s.port, "/v1/chat/completions", body, &status);
        CHECK_MSG(status == 200, "%s %s: %d", tmpl, choices[k], status);
        json_t *c = json_array_get(json_object_get(r, "choices"), 0), *m = json_object_get(c, "message");
        json_t *call = json_array_get(json_object_get(m, "tool_calls"), 0), *fn = json_object_get(call, "function");
        const char *name = json_string_value(json_object_get(fn, "name")) ?: "";
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        CHECK_MSG(json_array_size(json_object_get(m, "tool_calls")) == 1 && args_valid(name, args),
                  "%s %s: %s(%s), content [%s]", tmpl, choices[k], name, args ? args : "",
                  json_string_value(json_object_get(m, "content")) ?: "");
        CHECK(!strcmp(json_string_value(json_object_get(c, "finish_reason")) ?: "", "tool_calls"));
        CHECK(!strcmp(json_string_value(json_object_get(call, "type")) ?: "", "function"));
        if (k) CHECK(!strcmp(name, k == 1 ? "get_time" : "get_weather"));
        if (k == 1) {
            json_decref(r);
            continue;
        }
        if (k == 2) goto next_turn;
        /* streamed: the name first, the arguments in pieces, the same call */
        calls_acc a = {.name_first = true};
        size_t bl = strlen(body);
        snprintf(body + bl - 1, sizeof body - bl + 1, ",\"stream\":true}");
        rw_sse_parser sp = {.on_event = on_call_event, .user = &a};
        rw_http_request rq = {.port = s.port, .method = "POST", .path = "/v1/chat/completions", .body = body,
                              .body_len = strlen(body), .on_data = on_data, .user = &sp};
        rw_http_response resp;
        rw_error err = {0};
        CHECK(!rw_http_do(&rq, &resp, &err) && resp.status == 200);
        rw_http_response_free(&resp);
        rw_sse_free(&sp);
        CHECK_MSG(a.n == 1 && a.name_first && !strcmp(a.name[0], name) && !strcmp(a.args[0], args ? args : ""),
                  "%s %s streamed: %d calls, %s(%s)", tmpl, choices[k], a.n, a.name[0], a.args[0]);
        CHECK(!strcmp(a.finish, "tool_calls"));
        json_decref(r);
        continue;
    next_turn:; /* the next turn: the call as returned, its result */
        char *mj = json_dumps(m, JSON_COMPACT);
        char *body2 = malloc(strlen(mj) + 2048);
        sprintf(body2,
                "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},%s,{\"role\":\"tool\",\"tool_call_id\":\"%s\","
                "\"content\":\"sunny\"}]," WTOOLS ",\"max_tokens\":4,\"temperature\":0}",
                mj, json_string_value(json_object_get(call, "id")) ?: "");
        json_t *r2 = post(s.port, "/v1/chat/completions", body2, &status);
        CHECK_MSG(status == 200, "%s: the turn after a forced call: %d", tmpl, status);
        CHECK(usage(r2, "cached_tokens") > 0);
        json_decref(r2);
        free(body2);
        free(mj);
        json_decref(r);
    }
    /* refusals */
    int status;
    json_t *bad = post(s.port, "/v1/chat/completions",
                       "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," WTOOLS
                       ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}",
                       &status);
    CHECK_EQ_INT(status, 400);
    json_decref(bad);
    bad = post(s.port, "/v1/chat/completions",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", &status);
    CHECK_EQ_INT(status, 400);
    json_decref(bad);
    unserve(&s);
}

/* Structured output on a thinking template: the reasoning is free, the
 * schema holds for the answer after it (content is the JSON, not ""), the
 * reasoning within its budget (half of max_tokens when the request sets
 * none, so that the answer comes); streamed the same. */
static void test_after_reasoning(void) {
    served s;
    if (!serve(rw_test_fixture_path("chat/templates/Qwen3.5-4B.jinja"), NULL, &s)) return;
    static const char *const fmt[] = {
        "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":"
        "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"],"
        "\"additionalProperties\":false}}}",
        "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":"
        "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"maximum\":99}},\"required\":[\"n\"],"
        "\"additionalProperties\":false}}},\"reasoning_budget\":8"};
    for (int k = 0; k < 2; k++) {
        char body[2048];
        int status;
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Give n.\"}],\"max_tokens\":160,"
                 "\"temperature\":0,%s}",
                 fmt[k]);
        json_t *r = post(s.port, "/v1/chat/completions", body, &status);
        CHECK_MSG(status == 200, "%d", status);
        const char *c = msg_str(r, "content"), *rc = msg_str(r, "reasoning_content");
        json_t *j = c ? json_loads(c, 0, NULL) : NULL;
        CHECK_MSG(json_is_integer(json_object_get(j, "n")), "content [%s]", c ? c : "");
        CHECK_MSG(rc && *rc, "no reasoning before the answer");
        if (k) CHECK_MSG(usage(r, "completion_tokens") > 8, "budget 8: %lld tokens", usage(r, "completion_tokens"));
        json_decref(j);
        char sbody[2100];
        snprintf(sbody, sizeof sbody, "%.*s,\"stream\":true}", (int)strlen(body) - 1, body);
        acc a;
        CHECK_EQ_INT(stream(s.port, sbody, &a), 200);
        CHECK_MSG(c && !strcmp(a.content, c), "streamed content [%s], want [%s]", a.content, c ? c : "");
        CHECK_MSG(rc && !strcmp(a.reasoning, rc), "streamed reasoning differs");
        json_decref(r);
    }
    unserve(&s);
}

/* A raw POST: the status and the whole body (SSE streams too); the caller frees *body. */
static int post_raw(int port, const char *path, const char *body, char **out) {
    rw_http_request rq = {.port = port, .method = "POST", .path = path, .body = body, .body_len = strlen(body)};
    rw_http_response r;
    rw_error err = {0};
    rw_status st = rw_http_do(&rq, &r, &err);
    CHECK_MSG(!st, "%s: %s", path, err.msg);
    *out = st || !r.body ? strdup("") : strdup(r.body);
    int status = st ? -1 : r.status;
    rw_http_response_free(&r);
    return status;
}

/* Cut by max_tokens inside a (forced) tool call: no call markup in any
 * API's text, and the end says the limit cut it: chat finish_reason
 * "length", Responses status "incomplete" (max_output_tokens), Messages
 * stop_reason "max_tokens"; whole and streamed. Then calls cut after a
 * complete call (tool_choice required, parallel calls): still "length". */
static void test_cut_calls(void) {
    served s;
    if (!serve(rw_test_fixture_path("chat/templates/Qwen-Qwen3-0.6B.jinja"), NULL, &s)) return;
    static const char *const forced_fn = "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}";
    for (int max = 3; max <= 12; max += 3) {
        char body[4096], *raw = NULL;
        int status;
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}]," WTOOLS ",\"tool_choice\":%s,"
                 "\"max_tokens\":%d,\"temperature\":0}",
                 forced_fn, max);
        json_t *r = post(s.port, "/v1/chat/completions", body, &status);
        json_t *c = json_array_get(json_object_get(r, "choices"), 0);
        const char *content = msg_str(r, "content");
        CHECK_MSG(status == 200 && !strcmp(json_string_value(json_object_get(c, "finish_reason")) ?: "", "length"),
                  "max_tokens %d: finish %s", max, json_string_value(json_object_get(c, "finish_reason")));
        CHECK_MSG(!content || !strchr(content, '<'), "max_tokens %d: markup in content [%s]", max, content);
        CHECK(json_array_size(json_object_get(json_object_get(c, "message"), "tool_calls")) == 0);
        json_decref(r);
        acc a;
        snprintf(body + strlen(body) - 1, sizeof body - strlen(body) + 1, ",\"stream\":true}");
        CHECK_EQ_INT(stream(s.port, body, &a), 200);
        CHECK_MSG(!strcmp(a.finish, "length") && !strchr(a.content, '<'), "streamed, max_tokens %d: %s [%s]", max,
                  a.finish, a.content);
        /* Responses */
        for (int st = 0; st < 2; st++) {
            snprintf(
                body, sizeof body,
                "{\"input\":\"Weather?\",\"tools\":[{\"type\":\"function\",\"name\":\"get_weather\",\"parameters\":"
                "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}],"
                "\"tool_choice\":{\"type\":\"function\",\"name\":\"get_weather\"},\"max_output_tokens\":%d,"
                "\"temperature\":0,\"stream\":%s}",
                max, st ? "true" : "false");
            status = post_raw(s.port, "/v1/responses", body, &raw);
            CHECK_MSG(status == 200 && strstr(raw, "\"incomplete\"") && strstr(raw, "\"max_output_tokens\"") &&
                          !strstr(raw, "<tool") && !strstr(raw, "\\u003c"),
                      "responses%s, max %d: %d %.600s", st ? " streamed" : "", max, status, raw);
            free(raw);
            /* Messages */
            snprintf(
                body, sizeof body,
                "{\"model\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"tools\":[{\"name\":"
                "\"get_weather\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                "\"string\"}},\"required\":[\"city\"]}}],\"tool_choice\":{\"type\":\"tool\",\"name\":"
                "\"get_weather\"},\"max_tokens\":%d,\"temperature\":0,\"stream\":%s}",
                max, st ? "true" : "false");
            status = post_raw(s.port, "/v1/messages", body, &raw);
            CHECK_MSG(status == 200 && strstr(raw, "\"stop_reason\":\"max_tokens\"") && !strstr(raw, "<tool") &&
                          !strstr(raw, "\\u003c"),
                      "messages%s, max %d: %d %.600s", st ? " streamed" : "", max, status, raw);
            free(raw);
        }
    }
    /* several calls allowed: wherever the limit cuts, "length", calls whole, no markup */
    int cut = 0;
    for (int max = 20; max <= 120; max += 20) {
        char body[4096];
        int status;
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}]," WTOOLS ",\"tool_choice\":\"required\","
                 "\"parallel_tool_calls\":true,\"max_tokens\":%d,\"temperature\":0}",
                 max);
        json_t *r = post(s.port, "/v1/chat/completions", body, &status);
        json_t *c = json_array_get(json_object_get(r, "choices"), 0), *m = json_object_get(c, "message");
        const char *fin = json_string_value(json_object_get(c, "finish_reason")) ?: "";
        const char *content = msg_str(r, "content");
        bool was_cut = usage(r, "completion_tokens") >= max;
        cut += was_cut;
        CHECK_MSG(!strcmp(fin, was_cut ? "length" : "tool_calls"), "max %d: %s", max, fin);
        CHECK_MSG(!content || !strchr(content, '<'), "max %d: markup in content [%s]", max, content);
        json_t *call;
        size_t i;
        json_array_foreach(json_object_get(m, "tool_calls"), i, call) {
            json_t *fn = json_object_get(call, "function");
            CHECK(args_valid(json_string_value(json_object_get(fn, "name")) ?: "",
                             json_string_value(json_object_get(fn, "arguments"))));
        }
        json_decref(r);
    }
    CHECK(cut > 0);
    unserve(&s);
    /* the other formats' markup, cut at every few tokens (thinking off, so the cut falls in the call) */
    static const char *const tmpls[] = {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "NVIDIA-Nemotron-Nano-v2",
                                        "LFM2.5-Instruct", "mistralai-Mistral-Nemo-Instruct-2407"};
    for (int t = 0; t < 4; t++) {
        char path[256];
        snprintf(path, sizeof path, "chat/templates/%s.jinja", tmpls[t]);
        if (!serve(rw_test_fixture_path(path), NULL, &s)) return;
        for (int max = 2; max <= 26; max += 4) {
            char body[4096];
            int status;
            snprintf(body, sizeof body,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}]," WTOOLS ",\"tool_choice\":%s,"
                     "\"enable_thinking\":false,\"max_tokens\":%d,\"temperature\":0}",
                     forced_fn, max);
            json_t *r = post(s.port, "/v1/chat/completions", body, &status);
            json_t *c = json_array_get(json_object_get(r, "choices"), 0);
            const char *content = msg_str(r, "content"), *fin = json_string_value(json_object_get(c, "finish_reason"));
            bool was_cut = usage(r, "completion_tokens") >= max;
            CHECK_MSG(status == 200 && !strcmp(fin ?: "", was_cut ? "length" : "tool_calls"), "%s max %d: finish %s",
                      tmpls[t], max, fin);
            CHECK_MSG(!content || (!strchr(content, '<') && !strchr(content, '[') && !strchr(content, '{')),
                      "%s max %d: markup in content [%s]", tmpls[t], max, content);
            json_decref(r);
            acc a;
            snprintf(body + strlen(body) - 1, sizeof body - strlen(body) + 1, ",\"stream\":true}");
            CHECK_EQ_INT(stream(s.port, body, &a), 200);
            CHECK_MSG(!strcmp(a.finish, was_cut ? "length" : "tool_calls") && !strchr(a.content, '<') &&
                          !strchr(a.content, '[') && !strchr(a.content, '{'),
                      "%s streamed, max_tokens %d: %s [%s]", tmpls[t], max, a.finish, a.content);
        }
        unserve(&s);
    }
}

/* JSON Schema keywords through the server: number bounds, formats with
 * length limits, minProperties; sampled answers that end validate; a schema
 * we cannot compile is a 400 naming the keyword. */
static void test_schema_keywords(void) {
    served s;
    if (!serve(rw_test_fixture_path("chat/templates/Qwen-Qwen3-0.6B.jinja"), NULL, &s)) return;
    const char *schema =
        "{\"type\":\"object\",\"properties\":{\"ratio\":{\"type\":\"number\",\"minimum\":-0.5,\"maximum\":2.25},"
        "\"n\":{\"type\":\"integer\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":10},\"mail\":{\"type\":\"string\","
        "\"format\":\"email\",\"maxLength\":16}},\"required\":[\"ratio\",\"n\",\"mail\"],\"additionalProperties\":"
        "false,"
        "\"minProperties\":3}";
    int ended = 0;
    for (int seed = 1; seed <= 6; seed++) {
        char body[4096];
        int status;
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Fill it.\"}],\"max_tokens\":120,\"temperature\":1,"
                 "\"seed\":%d,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":"
                 "%s}}}",
                 seed, schema);
        json_t *r = post(s.port, "/v1/chat/completions", body, &status);
        CHECK_EQ_INT(status, 200);
        json_t *c = json_array_get(json_object_get(r, "choices"), 0);
        if (!strcmp(json_string_value(json_object_get(c, "finish_reason")) ?: "", "stop")) {
            ended++;
            const char *content = msg_str(r, "content");
            json_t *v = content ? json_loads(content, 0, NULL) : NULL;
            json_t *ratio = json_object_get(v, "ratio"), *n = json_object_get(v, "n");
            const char *mail = json_string_value(json_object_get(v, "mail"));
            CHECK_MSG(json_is_number(ratio) && json_number_value(ratio) >= -0.5 && json_number_value(ratio) <= 2.25 &&
                          json_is_integer(n) && json_integer_value(n) > 0 && json_integer_value(n) < 10 && mail &&
                          strchr(mail, '@') && strlen(mail) <= 16 && json_object_size(v) == 3,
                      "invalid: %s", content ? content : "");
            json_decref(v);
        }
        json_decref(r);
    }
    CHECK_MSG(ended > 0, "no answer ended");
    int status;
    json_t *bad =
        post(s.port, "/v1/chat/completions",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
             "\"json_schema\":{\"name\":\"x\",\"schema\":{\"type\":\"number\",\"not\":{\"minimum\":3}}}}}",
             &status);
    CHECK_EQ_INT(status, 400);
    CHECK(strstr(json_string_value(json_object_get(json_object_get(bad, "error"), "message")) ?: "",
                 "not: the negation"));
    json_decref(bad);
    unserve(&s);
}

/* Llama 3.1's built-in tools: a request's brave_search tool is listed as
 * one in the system prompt, and a past call of it renders in its own form. */
static void test_builtin_tools(void) {
    served s;
    if (!serve(rw_test_fixture_path("chat/templates/meta-llama-Llama-3.1-8B-Instruct.jinja"), NULL, &s)) return;
    int status;
    json_t *r =
        post(s.port, "/apply-template",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"News?\"},{\"role\":\"assistant\",\"content\":null,"
             "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"brave_search\","
             "\"arguments\":\"{\\\"query\\\":\\\"news\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
             "\"content\":\"none\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"brave_search\","
             "\"parameters\":{\"type\":\"object\",\"properties\":{\"query\":{\"type\":\"string\"}}}}}]}",
             &status);
    const char *prompt = json_string_value(json_object_get(r, "prompt"));
    CHECK_MSG(status == 200 && prompt && strstr(prompt, "Tools: brave_search\n") &&
                  strstr(prompt, "<|python_tag|>brave_search.call(query=\"news\")"),
              "%d: %s", status, prompt ? prompt : "");
    json_decref(r);
    unserve(&s);
}

static void test_forced(void) {
    forced("Qwen3.5-4B", NULL);                       /* XML; its prompt opens <think>: reasons, then calls */
    forced("Qwen-Qwen3-0.6B", NULL);                  /* Hermes */
    forced("meta-llama-Llama-3.1-8B-Instruct", NULL); /* Llama 3 JSON */
    forced("ibm-granite-granite-4.0", "granite");     /* Granite's list */
    forced("microsoft-Phi-3.5-mini-instruct", NULL);  /* generic */
    forced("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", NULL); /* DeepSeek's markers; its prompt opens <think> */
    forced("NVIDIA-Nemotron-Nano-v2", NULL);                  /* <TOOLCALL>[...]; opens <think> */
    forced("LFM2.5-Instruct", NULL);                          /* pythonic calls */
    forced("mistralai-Mistral-Nemo-Instruct-2407", NULL);     /* Mistral's list */
}

/* gpt-oss's harmony format (its real template; the fixture's vocabulary has
 * no harmony tokens, so the markers are text here, which the same grammars
 * and parser handle): a forced call (required, named) is made in the
 * commentary channel after the model reasons in the analysis channel, whose
 * budget closes it; a response format holds for the final channel's body.
 * Streamed and whole answers agree. tests/grammar/test_grammar_controls.c
 * checks that control-token markers are written by the control tokens. */
#define HTOOLS                                                                                                     \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\","          \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12,"            \
    "\"description\":\"city\"},\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7,\"description\":\"days\"}}," \
    "\"required\":[\"city\",\"days\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"description\":"  \
    "\"Time\",\"parameters\":{\"type\":\"object\",\"properties\":{\"zone\":{\"enum\":[\"UTC\",\"CET\"],"              \
    "\"description\":\"zone\"}},\"required\":[\"zone\"]}}}]"
static void test_harmony(void) {
    served s;
    if (!serve(rw_test_fixture_path("chat/templates/openai-gpt-oss-120b.jinja"), NULL, &s)) return;
    static const char *const choices[] = {"\"required\"", "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}",
                                          "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}"};
    for (int k = 0; k < 3; k++) {
        char body[4096];
        int status;
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}]," HTOOLS ",\"tool_choice\":%s,"
                 "\"max_tokens\":400,\"temperature\":0}",
                 choices[k]);
        json_t *r = post(s.port, "/v1/chat/completions", body, &status);
        CHECK_MSG(status == 200, "harmony %s: %d", choices[k], status);
        json_t *c = json_array_get(json_object_get(r, "choices"), 0), *m = json_object_get(c, "message");
        json_t *call = json_array_get(json_object_get(m, "tool_calls"), 0), *fn = json_object_get(call, "function");
        const char *name = json_string_value(json_object_get(fn, "name")) ?: "";
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        CHECK_MSG(json_array_size(json_object_get(m, "tool_calls")) == 1 && args_valid(name, args),
                  "harmony %s: %s(%s), content [%s]", choices[k], name, args ? args : "",
                  json_string_value(json_object_get(m, "content")) ?: "");
        CHECK(!strcmp(json_string_value(json_object_get(c, "finish_reason")) ?: "", "tool_calls"));
        if (k) CHECK(!strcmp(name, k == 1 ? "get_time" : "get_weather"));
        const char *rc = json_string_value(json_object_get(m, "reasoning_content"));
        CHECK_MSG(rc && *rc, "harmony %s: no reasoning before the call", choices[k]);
        json_decref(r);
    }
    /* a response format: the final channel's body, after the analysis */
    const char *fmt = "{\"messages\":[{\"role\":\"user\",\"content\":\"Give n.\"}],\"max_tokens\":400,\"temperature\":0,"
                      "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":"
                      "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"maximum\":99}},"
                      "\"required\":[\"n\"],\"additionalProperties\":false}}}}";
    int status;
    json_t *r = post(s.port, "/v1/chat/completions", fmt, &status);
    CHECK_MSG(status == 200, "harmony response_format: %d", status);
    const char *c = msg_str(r, "content"), *rc = msg_str(r, "reasoning_content");
    json_t *j = c ? json_loads(c, 0, NULL) : NULL;
    CHECK_MSG(json_is_integer(json_object_get(j, "n")), "harmony content [%s]", c ? c : "");
    CHECK_MSG(rc && *rc, "harmony: no reasoning before the answer");
    json_decref(j);
    char sbody[2048];
    snprintf(sbody, sizeof sbody, "%.*s,\"stream\":true}", (int)strlen(fmt) - 1, fmt);
    acc a;
    CHECK_EQ_INT(stream(s.port, sbody, &a), 200);
    CHECK_MSG(c && !strcmp(a.content, c), "harmony streamed content [%s], want [%s]", a.content, c ? c : "");
    CHECK_MSG(rc && !strcmp(a.reasoning, rc), "harmony streamed reasoning differs");
    json_decref(r);
    unserve(&s);
}

/* parallel_tool_calls false in auto mode: a grammar makes the model write
 * two calls and text after them; the answer is the first call alone and the
 * generation stops after it (fewer tokens than the whole), whole and
 * streamed; with parallel calls, both. */
static void test_one_call_auto(void) {
    served s;
    if (!serve(rw_test_fixture_path("chat/templates/Qwen-Qwen3-0.6B.jinja"), NULL, &s)) return;
    const char *grammar =
        "root ::= \"<tool_call>\\n{\\\"name\\\": \\\"get_time\\\", \\\"arguments\\\": {\\\"zone\\\": "
        "\\\"UTC\\\"}}\\n</tool_call>\\n<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": "
        "{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": 2}}\\n</tool_call>\\nAnd some text after the calls.\"";
    json_t *gj = json_string(grammar);
    char *gq = json_dumps(gj, JSON_ENCODE_ANY); /* the GBNF as a JSON string */
    json_decref(gj);
    long long toks[2] = {0, 0};
    for (int par = 0; par < 2 && gq; par++) {
        char body[4096];
        int status;
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Time?\"}]," WTOOLS ",\"tool_choice\":\"auto\","
                 "\"parallel_tool_calls\":%s,\"max_tokens\":300,\"temperature\":0,\"grammar\":%s}",
                 par ? "true" : "false", gq);
        json_t *r = post(s.port, "/v1/chat/completions", body, &status);
        json_t *c = json_array_get(json_object_get(r, "choices"), 0), *m = json_object_get(c, "message");
        json_t *calls = json_object_get(m, "tool_calls");
        const char *content = msg_str(r, "content");
        CHECK_MSG(status == 200 && json_array_size(calls) == (par ? 2u : 1u),
                  "parallel %d: %d, %zu calls, content [%s]", par, status, json_array_size(calls), content ?: "");
        CHECK_MSG(!content || !*content || par, "parallel false: content after the call [%s]", content);
        CHECK(!strcmp(json_string_value(json_object_get(c, "finish_reason")) ?: "", "tool_calls"));
        CHECK(!strcmp(json_string_value(json_object_get(json_object_get(json_array_get(calls, 0), "function"), "name"))
                          ?: "",
                      "get_time"));
        toks[par] = usage(r, "completion_tokens");
        json_decref(r);
        /* streamed: the same, one call's deltas */
        calls_acc a = {.name_first = true};
        size_t bl = strlen(body);
        snprintf(body + bl - 1, sizeof body - bl + 1, ",\"stream\":true}");
        rw_sse_parser sp = {.on_event = on_call_event, .user = &a};
        rw_http_request rq = {.port = s.port,
                              .method = "POST",
                              .path = "/v1/chat/completions",
                              .body = body,
                              .body_len = strlen(body),
                              .on_data = on_data,
                              .user = &sp};
        rw_http_response resp;
        rw_error err = {0};
        CHECK(!rw_http_do(&rq, &resp, &err) && resp.status == 200);
        rw_http_response_free(&resp);
        rw_sse_free(&sp);
        CHECK_MSG(a.n == (par ? 2 : 1) && !strcmp(a.name[0], "get_time") && !strcmp(a.finish, "tool_calls"),
                  "parallel %d streamed: %d calls, %s, %s", par, a.n, a.name[0], a.finish);
    }
    CHECK_MSG(toks[0] > 0 && toks[0] < toks[1], "parallel false did not stop early: %lld vs %lld tokens", toks[0],
              toks[1]);
    free(gq);
    unserve(&s);
}

/* ---- request handling ---- */

static void test_fields_and_props(void) {
    served s;
    if (!serve(rw_test_fixture_path("chat/templates/Qwen3.5-4B.jinja"), NULL, &s)) return;
    int status;
    const char *extra = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2,\"temperature\":0,"
                        "\"cache_prompt\":true,\"some_ui_field\":{\"x\":1}}";
    for (int i = 0; i < 2; i++) {
        json_t *r = post(s.port, "/v1/chat/completions", extra, &status);
        CHECK_EQ_INT(status, 200);
        json_decref(r);
    }
    CHECK_EQ_INT(count_in_log("\"some_ui_field\""), 1);
    CHECK_EQ_INT(count_in_log("\"cache_prompt\""), 1);
    /* tool_choice none: the template sees no tools */
    json_t *a = post(s.port, "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1," TOOLS
                     ",\"tool_choice\":\"none\"}",
                     &status);
    json_t *b = post(s.port, "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1}", &status);
    json_t *c = post(s.port, "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1," TOOLS "}", &status);
    CHECK_EQ_INT(usage(a, "prompt_tokens"), usage(b, "prompt_tokens"));
    CHECK(usage(c, "prompt_tokens") > usage(b, "prompt_tokens"));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    /* bad shapes are still 400s */
    json_t *bad = post(s.port, "/v1/chat/completions",
                       "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template_kwargs\":[1]}", &status);
    CHECK_EQ_INT(status, 400);
    json_decref(bad);
    bad = post(s.port, "/v1/chat/completions",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\"}]}", &status);
    CHECK_EQ_INT(status, 400);
    json_decref(bad);
    /* a control token's text in a call's arguments: the guard keeps it as text (it refused such a request
     * before it could mark more than contents) */
    bad = post(s.port, "/v1/chat/completions",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":null,"
               "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
               "\"arguments\":\"{\\\"city\\\":\\\"x<|im_end|>\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
               "\"content\":\"ok\"}]," TOOLS ",\"max_tokens\":8,\"temperature\":0}",
               &status);
    CHECK_EQ_INT(status, 200);
    json_decref(bad);
    /* /props */
    rw_http_request rq = {.port = s.port, .method = "GET", .path = "/props"};
    rw_http_response resp;
    rw_error err = {0};
    CHECK(!rw_http_do(&rq, &resp, &err));
    CHECK_EQ_INT(resp.status, 200);
    json_t *p = resp.body ? json_loads(resp.body, JSON_ALLOW_NUL, NULL) : NULL;
    const char *tmpl = json_string_value(json_object_get(p, "chat_template"));
    CHECK(tmpl && strlen(tmpl) == s.src_len && !memcmp(tmpl, s.src, s.src_len));
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(p, "default_generation_settings"), "n_ctx")),
                 rw_engine_get_config(g_engine)->n_ctx);
    CHECK(json_is_false(json_object_get(json_object_get(p, "modalities"), "vision")));
    CHECK(!strcmp(json_string_value(json_object_get(p, "tool_format")) ?: "", "qwen-xml"));
    json_decref(p);
    rw_http_response_free(&resp);
    unserve(&s);

    rw_server_config strict = {.strict_api = true};
    if (!serve(rw_test_fixture_path("chat/templates/Qwen3.5-4B.jinja"), &strict, &s)) return;
    bad = post(s.port, "/v1/chat/completions", extra, &status);
    CHECK_EQ_INT(status, 400);
    CHECK(strstr(json_string_value(json_object_get(json_object_get(bad, "error"), "message")) ?: "", "cache_prompt"));
    json_decref(bad);
    /* bad settings refuse to start */
    rw_server_config badcfg = {.tool_format = "xml"};
    rw_server *srv = NULL;
    CHECK(rw_server_start(g_engine, g_tok, s.tmpl, g_bos, g_eos, &badcfg, &srv, &err) == RW_ERR_INVALID_ARG);
    badcfg = (rw_server_config){.chat_template_kwargs = "[1]"};
    CHECK(rw_server_start(g_engine, g_tok, s.tmpl, g_bos, g_eos, &badcfg, &srv, &err) == RW_ERR_INVALID_ARG);
    unserve(&s);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_chat_template *t = NULL;
    const char *path = rw_test_fixture_path("qwen3/qwen3-Q8_0.gguf");
    if (rw_gguf_open(path, &g, &err) || rw_model_load(g, &g_model, &err) || rw_tokenizer_load(g, &g_tok, &err) ||
        rw_chat_template_from_gguf(g, &t, &g_bos, &g_eos, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    rw_chat_template_free(t);
    rw_log_set(log_hook, NULL, RW_LOG_INFO);
    const rw_engine_config ec = {.n_threads = 2, .max_running = 2, .max_queued = 16, .n_ctx = 2048,
                                 .prefill_chunk = 256, .kv_type = RW_KV_F32, .cache_bytes = 64 << 20};
    CHECK(rw_engine_new(g_model, g_tok, &ec, &g_engine, &err) == RW_OK);
    if (!g_engine) return rw_test_done();
    test_fields_and_props();
    test_reasoning();
    test_budget();
    test_helper_routes();
    test_forced();
    test_harmony();
    test_one_call_auto();
    test_builtin_tools();
    test_cut_calls();
    test_schema_keywords();
    test_after_reasoning();
    test_templates();
    rw_engine_free(g_engine);
    free(g_bos);
    free(g_eos);
    rw_tokenizer_free(g_tok);
    rw_model_free(g_model);
    rw_gguf_close(g);
    return rw_test_done();
}
