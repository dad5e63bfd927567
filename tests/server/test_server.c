/* test_server.c - a real server on 127.0.0.1 (any free port) over the
 * qwen35 fixture, driven by concurrent C clients over sockets:
 *
 *   - greedy completions equal the generate loop (prefill in one pass, then
 *     argmax one token at a time, as `rewind generate` does), alone and with
 *     several clients at once, streaming or not, prompts chunked;
 *   - a seeded sampled request gives the same tokens alone and under load;
 *   - chat (template + tokenizer), SSE format, include_usage, stop strings
 *     (also split across tokens, in streams);
 *   - a client that hangs up (streaming, and while waiting for a whole
 *     response) cancels its request; the server keeps serving;
 *   - malformed requests get OpenAI-style JSON errors with the right status
 *     (400, 401, 404, 405, 413, 429);
 *   - the ASan build checks every request's state is freed. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "chat/chat.h"
#include "engine/engine.h"
#include "harness.h"
#include "tools/http_client.h"
#include "server/server.h"

#define N_CTX 256
#define MAX_BODY (64 * 1024)

static rw_gguf *g_gguf;
static rw_model *g_model;
static rw_model *g_ref_model; /* the reference's own instance: forward passes are not reentrant */
static rw_tokenizer *g_tok;
static rw_chat_template *g_tmpl;
static char *g_bos, *g_eos;
static int32_t g_prompt[128];
static int64_t g_n_prompt;

/* ---- the reference: what `rewind generate --print-ids` computes ---- */

static void ref_greedy(const int32_t *ids, int64_t n, int n_gen, rw_kv_type kv, int32_t *out) {
    const int64_t nv = rw_model_get_hparams(g_model)->n_vocab;
    float *logits = malloc((size_t)nv * sizeof *logits);
    rw_model_seq *s = NULL;
    rw_error err = {0};
    CHECK(rw_model_seq_new(g_ref_model, kv, 0, &s, &err) == RW_OK);
    rw_forward_args fa = {.tokens = ids, .n = n, .logits = logits};
    CHECK(rw_model_forward(g_ref_model, s, &fa, &err) == RW_OK);
    for (int k = 0; k < n_gen; k++) {
        out[k] = rw_argmax(logits, nv);
        if (k + 1 == n_gen) break;
        fa = (rw_forward_args){.tokens = &out[k], .n = 1, .logits = logits};
        CHECK(rw_model_forward(g_ref_model, s, &fa, &err) == RW_OK);
    }
    rw_model_seq_free(s);
    free(logits);
}

/* ---- client helpers ---- */

typedef struct {
    int port;
    const char *auth; /* extra header lines */
} target;

static int request(const target *t, const char *method, const char *path, const char *body, size_t len, char **resp) {
    rw_http_request rq = {.port = t->port, .method = method, .path = path, .headers = t->auth, .body = body,
                          .body_len = body ? len : 0};
    rw_http_response r;
    rw_error err = {0};
    rw_status st = rw_http_do(&rq, &r, &err);
    CHECK_MSG(st == RW_OK, "%s %s: %s", method, path, err.msg);
    int status = st == RW_OK ? r.status : -1;
    if (resp) *resp = r.body ? strdup(r.body) : NULL;
    rw_http_response_free(&r);
    return status;
}

static json_t *post_json(const target *t, const char *path, const char *body, int *status) {
    char *resp = NULL;
    *status = request(t, "POST", path, body, strlen(body), &resp);
    json_t *j = resp ? json_loads(resp, JSON_ALLOW_NUL, NULL) : NULL;
    CHECK_MSG(j != NULL, "response is not JSON: %.200s", resp ? resp : "(none)");
    free(resp);
    return j;
}

/* token_ids of choice 0 into out; returns their number */
static int get_ids(json_t *choice, int32_t *out, int cap) {
    json_t *a = json_object_get(choice, "token_ids");
    int n = 0;
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (n < cap) out[n++] = (int32_t)json_integer_value(v);
    return n;
}

/* A streaming request's events, accumulated. */
typedef struct {
    bool chat;
    char text[8192];
    size_t text_len;
    int32_t ids[512];
    int n_ids;
    int n_events;
    bool first_is_role, done;
    char finish[16];
    long long usage_prompt, usage_completion, usage_cached;
    int hang_up_after; /* events; 0 = never */
    bool bad_json;
} stream_acc;

static bool on_event(void *user, const char *data, size_t n) {
    stream_acc *a = user;
    if (a->done) a->bad_json = true; /* nothing may follow [DONE] */
    if (n == 6 && !memcmp(data, "[DONE]", 6)) {
        a->done = true;
        return true;
    }
    json_t *j = json_loadb(data, n, JSON_ALLOW_NUL, NULL);
    if (!j) {
        fprintf(stderr, "bad event: %.*s\n", (int)n, data);
        a->bad_json = true;
        return false;
    }
    a->n_events++;
    json_t *choices = json_object_get(j, "choices");
    json_t *c = json_array_get(choices, 0);
    if (c) {
        json_t *txt = a->chat ? json_object_get(json_object_get(c, "delta"), "content")
                              : json_object_get(c, "text");
        if (a->n_events == 1) a->first_is_role = a->chat && json_is_string(json_object_get(json_object_get(c, "delta"), "role"));
        if (json_is_string(txt) && a->text_len + json_string_length(txt) < sizeof a->text) {
            memcpy(a->text + a->text_len, json_string_value(txt), json_string_length(txt));
            a->text_len += json_string_length(txt);
        }
        a->n_ids += get_ids(c, a->ids + a->n_ids, (int)(sizeof a->ids / sizeof *a->ids) - a->n_ids);
        json_t *fin = json_object_get(c, "finish_reason");
        if (json_is_string(fin)) snprintf(a->finish, sizeof a->finish, "%s", json_string_value(fin));
    }
    json_t *u = json_object_get(j, "usage");
    if (json_is_object(u)) {
        a->usage_prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
        a->usage_completion = json_integer_value(json_object_get(u, "completion_tokens"));
        a->usage_cached = json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    }
    json_decref(j);
    return !(a->hang_up_after && a->n_events >= a->hang_up_after);
}

static bool on_data(void *user, const char *d, size_t n) { return rw_sse_feed(user, d, n); }

/* POSTs body to path and feeds the SSE answer's events to on_ev(user, ...):
 * the status (-1 when the request failed, a failed check). */
static int sse_post(const target *t, const char *path, const char *body, bool (*on_ev)(void *, const char *, size_t),
                    void *user) {
    rw_sse_parser p = {.on_event = on_ev, .user = user};
    rw_http_request rq = {.port = t->port, .method = "POST", .path = path, .headers = t->auth, .body = body,
                          .body_len = strlen(body), .on_data = on_data, .user = &p};
    rw_http_response r;
    rw_error err = {0};
    rw_status st = rw_http_do(&rq, &r, &err);
    CHECK_MSG(st == RW_OK, "stream: %s", err.msg);
    int status = st == RW_OK ? r.status : -1;
    rw_http_response_free(&r);
    rw_sse_free(&p);
    return status;
}

static int stream(const target *t, const char *path, const char *body, stream_acc *a) {
    a->chat = strstr(path, "chat") != NULL;
    int status = sse_post(t, path, body, on_event, a);
    CHECK(!a->bad_json);
    return status;
}

static char *ids_body(const int32_t *ids, int64_t n, const char *extra) {
    size_t cap = (size_t)n * 8 + strlen(extra) + 64;
    char *b = malloc(cap);
    size_t off = (size_t)snprintf(b, cap, "{\"prompt\":[");
    for (int64_t i = 0; i < n; i++) off += (size_t)snprintf(b + off, cap - off, "%s%d", i ? "," : "", (int)ids[i]);
    snprintf(b + off, cap - off, "],%s}", extra);
    return b;
}

/* ---- greedy equality, alone and concurrent ---- */

typedef struct {
    const target *t;
    int64_t n_prompt;
    int n_gen;
    bool streamed;
    int32_t got[256];
    int n_got;
    int status;
    char finish[16];
} greedy_job;

static void *greedy_client(void *arg) {
    greedy_job *g = arg;
    char extra[160];
    snprintf(extra, sizeof extra, "\"max_tokens\":%d,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true%s",
             g->n_gen, g->streamed ? ",\"stream\":true" : "");
    char *body = ids_body(g_prompt, g->n_prompt, extra);
    if (g->streamed) {
        stream_acc *a = calloc(1, sizeof *a);
        g->status = stream(g->t, "/v1/completions", body, a);
        memcpy(g->got, a->ids, (size_t)a->n_ids * sizeof *a->ids);
        g->n_got = a->n_ids;
        snprintf(g->finish, sizeof g->finish, "%s", a->finish);
        CHECK(a->done);
        free(a);
    } else {
        json_t *j = post_json(g->t, "/v1/completions", body, &g->status);
        json_t *c = json_array_get(json_object_get(j, "choices"), 0);
        g->n_got = get_ids(c, g->got, 256);
        snprintf(g->finish, sizeof g->finish, "%s", json_string_value(json_object_get(c, "finish_reason")) ?: "");
        json_decref(j);
    }
    free(body);
    return NULL;
}

static void check_greedy(greedy_job *g, int n) {
    for (int i = 0; i < n; i++) {
        int32_t ref[256];
        ref_greedy(g_prompt, g[i].n_prompt, g[i].n_gen, RW_KV_F32, ref);
        CHECK_EQ_INT(g[i].status, 200);
        CHECK_EQ_INT(g[i].n_got, g[i].n_gen);
        CHECK_MSG(g[i].n_got == g[i].n_gen && !memcmp(ref, g[i].got, (size_t)g[i].n_gen * sizeof *ref),
                  "client %d (prompt %lld, %d tokens, %s) differs from the generate loop", i,
                  (long long)g[i].n_prompt, g[i].n_gen, g[i].streamed ? "streamed" : "whole");
        CHECK(!strcmp(g[i].finish, "length"));
    }
}

static void run_clients(greedy_job *g, int n) {
    pthread_t th[16];
    for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, greedy_client, &g[i]);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

static void test_greedy(const target *t) {
    greedy_job one = {.t = t, .n_prompt = 40, .n_gen = 24};
    run_clients(&one, 1);
    check_greedy(&one, 1);
    /* more clients than batch slots (4), prompts longer than the prefill chunk */
    greedy_job many[8];
    for (int i = 0; i < 8; i++)
        many[i] = (greedy_job){.t = t, .n_prompt = 8 + 15 * i, .n_gen = 12 + 5 * i, .streamed = i % 2 == 1};
    run_clients(many, 8);
    check_greedy(many, 8);
}

/* llama-server's paths without /v1 answer as the /v1 routes */
static void test_aliases(const target *t) {
    char *body =
        ids_body(g_prompt, 20, "\"max_tokens\":6,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true");
    int s1 = 0, s2 = 0;
    json_t *a = post_json(t, "/v1/completions", body, &s1), *b = post_json(t, "/completions", body, &s2);
    int32_t ia[8], ib[8];
    int na = get_ids(json_array_get(json_object_get(a, "choices"), 0), ia, 8);
    int nb = get_ids(json_array_get(json_object_get(b, "choices"), 0), ib, 8);
    CHECK_MSG(s1 == 200 && s2 == 200 && na == 6 && nb == 6 && !memcmp(ia, ib, sizeof ia[0] * 6),
              "/completions: %d, %d tokens; /v1/completions: %d, %d tokens", s2, nb, s1, na);
    json_decref(a);
    json_decref(b);
    free(body);
    const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4,\"temperature\":0}";
    json_t *c = post_json(t, "/chat/completions", chat, &s1);
    json_t *m = json_object_get(json_array_get(json_object_get(c, "choices"), 0), "message");
    CHECK_MSG(s1 == 200 && json_is_string(json_object_get(m, "content")), "/chat/completions: %d", s1);
    json_decref(c);
    char *resp = NULL;
    CHECK_EQ_INT(request(t, "GET", "/models", NULL, 0, &resp), 200);
    CHECK_MSG(resp && strstr(resp, "\"fixture\""), "/models: %s", resp ? resp : "");
    free(resp);
    CHECK_EQ_INT(request(t, "GET", "/v1/health", NULL, 0, NULL), 200);
    CHECK_EQ_INT(request(t, "GET", "/completions", NULL, 0, NULL), 405);
}

/* ---- seeded sampling is the same alone and under load ---- */

static void *sampled_client(void *arg) {
    greedy_job *g = arg;
    char *body = ids_body(g_prompt, g->n_prompt,
                          "\"max_tokens\":20,\"temperature\":0.9,\"seed\":1234,\"top_k\":50,\"top_p\":0.95,"
                          "\"min_p\":0.01,\"frequency_penalty\":0.5,\"ignore_eos\":true,\"return_token_ids\":true");
    json_t *j = post_json(g->t, "/v1/completions", body, &g->status);
    g->n_got = get_ids(json_array_get(json_object_get(j, "choices"), 0), g->got, 256);
    json_decref(j);
    free(body);
    return NULL;
}

static void test_seeded(const target *t) {
    greedy_job alone = {.t = t, .n_prompt = 30};
    sampled_client(&alone);
    CHECK_EQ_INT(alone.n_got, 20);
    greedy_job load[4], same = {.t = t, .n_prompt = 30};
    pthread_t th[5];
    for (int i = 0; i < 4; i++) {
        load[i] = (greedy_job){.t = t, .n_prompt = 20 + 20 * i, .n_gen = 30, .streamed = i % 2};
        pthread_create(&th[i], NULL, greedy_client, &load[i]);
    }
    pthread_create(&th[4], NULL, sampled_client, &same);
    for (int i = 0; i < 5; i++) pthread_join(th[i], NULL);
    CHECK_EQ_INT(same.n_got, 20);
    CHECK_MSG(!memcmp(alone.got, same.got, 20 * sizeof *same.got), "seeded sampling depends on the load");
    check_greedy(load, 4);
}

/* ---- chat, streaming, stop strings ---- */

static void test_chat_and_stream(const target *t) {
    const char *msgs = "\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
                       "[{\"type\":\"text\",\"text\":\"Hello\"},{\"type\":\"text\",\"text\":\" there\"}]}]";
    char body[1024];
    snprintf(body, sizeof body, "{%s,\"max_tokens\":16,\"temperature\":0,\"ignore_eos\":true}", msgs);
    int status;
    json_t *j = post_json(t, "/v1/chat/completions", body, &status);
    CHECK_EQ_INT(status, 200);
    CHECK(!strcmp(json_string_value(json_object_get(j, "object")) ?: "", "chat.completion"));
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *msg = json_object_get(c, "message");
    CHECK(!strcmp(json_string_value(json_object_get(msg, "role")) ?: "", "assistant"));
    const char *content = json_string_value(json_object_get(msg, "content"));
    CHECK(content != NULL);
    json_t *u = json_object_get(j, "usage");
    CHECK_EQ_INT(json_integer_value(json_object_get(u, "completion_tokens")), 16);
    CHECK(json_is_integer(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens")));

    /* the prompt is the template's rendering, tokenized with special tokens */
    rw_chat_render_opts ro = {.messages_json = "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\","
                                               "\"content\":\"Hello there\"}]",
                              .add_generation_prompt = true,
                              .enable_thinking = -1,
                              .bos_token = g_bos,
                              .eos_token = g_eos};
    char *text = NULL;
    size_t len = 0, n_ids = 0;
    int32_t *ids = NULL;
    rw_error err = {0};
    CHECK(rw_chat_template_render(g_tmpl, &ro, &text, &len, &err) == RW_OK);
    CHECK(rw_tokenize(g_tok, text, len, true, true, &ids, &n_ids, &err) == RW_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(u, "prompt_tokens")), (long long)n_ids);

    /* streamed: the same text, role first, usage last, then [DONE] */
    snprintf(body, sizeof body,
             "{%s,\"max_tokens\":16,\"temperature\":0,\"ignore_eos\":true,\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true}}",
             msgs);
    stream_acc *a = calloc(1, sizeof *a);
    CHECK_EQ_INT(stream(t, "/v1/chat/completions", body, a), 200);
    CHECK(a->first_is_role);
    CHECK(a->done);
    CHECK(!strcmp(a->finish, "length"));
    CHECK(content && a->text_len == strlen(content) && !memcmp(a->text, content, a->text_len));
    CHECK_EQ_INT(a->usage_completion, 16);
    CHECK_EQ_INT(a->usage_prompt, (long long)n_ids);
    CHECK_EQ_INT(a->usage_cached, 0);

    /* a stop string from the middle of the greedy text: the text ends before it */
    size_t clen = content ? strlen(content) : 0;
    size_t k = clen / 2;
    while (k > 0 && ((unsigned char)content[k] & 0xC0) == 0x80) k--;
    size_t sl = 0;
    while (k + sl < clen && sl < 3) sl++;
    while (k + sl < clen && ((unsigned char)content[k + sl] & 0xC0) == 0x80) sl++;
    if (sl > 0) {
        char stop[32];
        snprintf(stop, sizeof stop, "%.*s", (int)sl, content + k);
        json_t *sj = json_string(stop);
        char *stop_json = json_dumps(sj, JSON_ENCODE_ANY);
        size_t want = (size_t)(strstr(content, stop) - content);
        for (int streamed = 0; streamed < 2; streamed++) {
            snprintf(body, sizeof body, "{%s,\"max_tokens\":16,\"temperature\":0,\"ignore_eos\":true,\"stop\":[%s]%s}",
                     msgs, stop_json, streamed ? ",\"stream\":true" : "");
            const char *got;
            size_t got_len;
            const char *fin;
            json_t *r = NULL;
            stream_acc *b = calloc(1, sizeof *b);
            if (streamed) {
                CHECK_EQ_INT(stream(t, "/v1/chat/completions", body, b), 200);
                got = b->text;
                got_len = b->text_len;
                fin = b->finish;
            } else {
                r = post_json(t, "/v1/chat/completions", body, &status);
                json_t *rc = json_array_get(json_object_get(r, "choices"), 0);
                got = json_string_value(json_object_get(json_object_get(rc, "message"), "content")) ?: "";
                got_len = strlen(got);
                fin = json_string_value(json_object_get(rc, "finish_reason")) ?: "";
            }
            CHECK_MSG(got_len == want && !memcmp(got, content, want), "stop \"%s\" (%s): got %zu bytes, want %zu",
                      stop, streamed ? "streamed" : "whole", got_len, want);
            CHECK(!strcmp(fin, "stop"));
            json_decref(r);
            free(b);
        }
        free(stop_json);
        json_decref(sj);
    }
    free(a);
    free(text);
    free(ids);
    json_decref(j);
}

/* ---- logprobs and logit bias ---- */

static void test_logprobs(const target *t) {
    int status;
    json_t *j = post_json(t, "/v1/chat/completions",
                          "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":5,\"temperature\":0,"
                          "\"ignore_eos\":true,\"logprobs\":true,\"top_logprobs\":3}",
                          &status);
    CHECK_EQ_INT(status, 200);
    json_t *content = json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs"),
                                      "content");
    CHECK_EQ_INT(json_array_size(content), 5);
    size_t i;
    json_t *ent;
    json_array_foreach(content, i, ent) {
        json_t *top = json_object_get(ent, "top_logprobs");
        CHECK_EQ_INT(json_array_size(top), 3);
        double lp = json_number_value(json_object_get(ent, "logprob"));
        double lp0 = json_number_value(json_object_get(json_array_get(top, 0), "logprob"));
        double lp1 = json_number_value(json_object_get(json_array_get(top, 1), "logprob"));
        CHECK_MSG(lp <= 0 && lp == lp0 && lp0 >= lp1, "greedy token %zu: logprob %g, top %g %g", i, lp, lp0, lp1);
        CHECK(json_is_array(json_object_get(ent, "bytes")));
    }
    json_decref(j);

    j = post_json(t, "/v1/completions",
                  "{\"prompt\":[1,2,3],\"max_tokens\":4,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":2}", &status);
    CHECK_EQ_INT(status, 200);
    json_t *lp = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs");
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "tokens")), 4);
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "token_logprobs")), 4);
    CHECK_EQ_INT(json_object_size(json_array_get(json_object_get(lp, "top_logprobs"), 0)) >= 1, 1);
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "text_offset")), 4);
    json_decref(j);

    /* streamed logprobs come with the chunks */
    stream_acc *a = calloc(1, sizeof *a);
    CHECK_EQ_INT(stream(t, "/v1/completions",
                        "{\"prompt\":[1,2,3],\"max_tokens\":4,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":1,"
                        "\"stream\":true}",
                        a),
                 200);
    CHECK(a->done);
    free(a);

    /* a +100 bias on one token makes greedy pick it every time */
    j = post_json(t, "/v1/completions",
                  "{\"prompt\":[1,2,3],\"max_tokens\":6,\"temperature\":0,\"ignore_eos\":true,"
                  "\"logit_bias\":{\"77\":100},\"return_token_ids\":true}",
                  &status);
    CHECK_EQ_INT(status, 200);
    int32_t ids[16];
    int n = get_ids(json_array_get(json_object_get(j, "choices"), 0), ids, 16);
    CHECK_EQ_INT(n, 6);
    for (int k = 0; k < n; k++) CHECK_EQ_INT(ids[k], 77);
    json_decref(j);
}

/* ---- echo with logprobs: the prompt's tokens scored ---- */

/* A stream's events, each parsed, in an array (owned by the caller). */
static bool on_raw_event(void *user, const char *data, size_t n) {
    if (n == 6 && !memcmp(data, "[DONE]", 6)) return true;
    json_t *j = json_loadb(data, n, JSON_ALLOW_NUL, NULL);
    CHECK_MSG(j != NULL, "bad event: %.*s", (int)n, data);
    if (j) json_array_append_new(user, j);
    return true;
}

static json_t *choice_logprobs(json_t *j, size_t i) {
    return json_object_get(json_array_get(json_object_get(j, "choices"), i), "logprobs");
}

/* Entries from..from+n of a's logprobs arrays equal b's from 0 (bitwise:
 * the same doubles, the same alternatives). */
static bool same_entries(json_t *a, size_t from, json_t *b, size_t n) {
    const char *keys[3] = {"tokens", "token_logprobs", "top_logprobs"};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_array_get(json_object_get(a, keys[k]), from + i);
            json_t *y = json_array_get(json_object_get(b, keys[k]), i);
            if (!x || !y || !json_equal(x, y)) return false;
        }
    return true;
}

static void test_echo_logprobs(const target *t) {
    /* generated: 6 greedy tokens after 12 prompt ids, with their logprobs */
    enum { NP = 12, NG = 6 };
    char *body = ids_body(g_prompt, NP,
                          "\"max_tokens\":6,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":2,"
                          "\"return_token_ids\":true");
    int status = 0;
    json_t *gen = post_json(t, "/v1/completions", body, &status);
    free(body);
    CHECK_EQ_INT(status, 200);
    int32_t ids[NP + NG];
    memcpy(ids, g_prompt, sizeof ids[0] * NP);
    CHECK_EQ_INT(get_ids(json_array_get(json_object_get(gen, "choices"), 0), ids + NP, NG), NG);

    /* scored: the same tokens as a prompt get the same logprobs, nothing generated */
    body = ids_body(ids, NP + NG, "\"max_tokens\":0,\"echo\":true,\"logprobs\":2");
    json_t *sc = post_json(t, "/v1/completions", body, &status);
    free(body);
    CHECK_EQ_INT(status, 200);
    json_t *lp = choice_logprobs(sc, 0);
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "token_logprobs")), NP + NG);
    CHECK(json_is_null(json_array_get(json_object_get(lp, "token_logprobs"), 0)) &&
          json_is_null(json_array_get(json_object_get(lp, "top_logprobs"), 0)));
    CHECK_MSG(same_entries(lp, NP, choice_logprobs(gen, 0), NG), "%s", "scored tokens differ from generated ones");
    for (size_t i = 1; i < NP + NG; i++) {
        json_t *top = json_array_get(json_object_get(lp, "top_logprobs"), i);
        CHECK(json_object_size(top) >= 1 && json_object_size(top) <= 2 &&
              json_number_value(json_array_get(json_object_get(lp, "token_logprobs"), i)) <= 0);
    }
    json_t *c0 = json_array_get(json_object_get(sc, "choices"), 0);
    CHECK(!strcmp(json_string_value(json_object_get(c0, "finish_reason")), "length"));
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(sc, "usage"), "completion_tokens")), 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(sc, "usage"), "prompt_tokens")), NP + NG);
    json_t *offs = json_object_get(lp, "text_offset");
    CHECK(json_integer_value(json_array_get(offs, 0)) == 0 &&
          json_integer_value(json_array_get(offs, NP + NG - 1)) <
              (json_int_t)strlen(json_string_value(json_object_get(c0, "text"))));

    /* streamed, one token generated: the echo chunk carries the same prompt logprobs */
    body = ids_body(ids, NP + NG, "\"max_tokens\":1,\"echo\":true,\"logprobs\":2,\"stream\":true");
    json_t *events = json_array();
    CHECK(sse_post(t, "/v1/completions", body, on_raw_event, events) == 200);
    free(body);
    json_t *head = json_array_get(events, 0);
    CHECK(json_equal(json_object_get(json_array_get(json_object_get(head, "choices"), 0), "text"),
                     json_object_get(c0, "text")));
    CHECK_MSG(json_equal(choice_logprobs(head, 0), lp), "%s",
              "the echo chunk's logprobs differ from the whole answer's");
    CHECK(json_array_size(events) >= 3); /* echo, the token, the finish */
    json_decref(events);

    /* a list: each choice scores its own prompt */
    char *b1 = ids_body(ids, NP + NG, ""), *b2 = ids_body(ids, NP, "");
    char *open1 = strchr(b1, '['), *open2 = strchr(b2, '[');
    *strrchr(b1, ']') = 0, *strrchr(b2, ']') = 0;
    char list[4096];
    snprintf(list, sizeof list, "{\"prompt\":[%s],%s]],\"max_tokens\":0,\"echo\":true,\"logprobs\":2}", open1, open2);
    free(b1), free(b2);
    json_t *two = post_json(t, "/v1/completions", list, &status);
    CHECK_EQ_INT(status, 200);
    CHECK_MSG(json_equal(choice_logprobs(two, 0), lp), "%s", "list choice 0 differs from its prompt alone");
    CHECK_EQ_INT(json_array_size(json_object_get(choice_logprobs(two, 1), "tokens")), NP);
    CHECK(same_entries(choice_logprobs(two, 1), 0, lp, NP));
    json_decref(two);

    /* vLLM's prompt_logprobs: the same values by token id, with ranks (the
     * greedy tokens' 1), per choice; chat's at the response's top level;
     * not with stream */
    body = ids_body(ids, NP + NG, "\"max_tokens\":1,\"prompt_logprobs\":2");
    json_t *vl = post_json(t, "/v1/completions", body, &status);
    free(body);
    CHECK_EQ_INT(status, 200);
    json_t *vc = json_array_get(json_object_get(vl, "choices"), 0);
    json_t *pl = json_object_get(vc, "prompt_logprobs");
    CHECK(json_is_null(json_object_get(vc, "logprobs")));
    CHECK_EQ_INT(json_array_size(pl), NP + NG);
    CHECK(json_is_null(json_array_get(pl, 0)));
    for (size_t i = 1; i < NP + NG; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", (int)ids[i]);
        json_t *ent = json_object_get(json_array_get(pl, i), key);
        json_t *want = json_array_get(json_object_get(lp, "token_logprobs"), i);
        long long rank = json_integer_value(json_object_get(ent, "rank"));
        CHECK_MSG(ent && json_equal(json_object_get(ent, "logprob"), want) && rank >= 1 && (i < NP || rank == 1) &&
                      json_object_size(json_array_get(pl, i)) <= 3 &&
                      json_is_string(json_object_get(ent, "decoded_token")),
                  "prompt_logprobs[%zu]", i);
    }
    json_decref(vl);
    json_t *ch = post_json(t, "/v1/chat/completions",
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2,"
                           "\"prompt_logprobs\":0}",
                           &status);
    CHECK_EQ_INT(status, 200);
    json_t *cpl = json_object_get(ch, "prompt_logprobs");
    CHECK(json_array_size(cpl) > 1 &&
          (long long)json_array_size(cpl) ==
              json_integer_value(json_object_get(json_object_get(ch, "usage"), "prompt_tokens")) &&
          json_is_null(json_array_get(cpl, 0)) && json_object_size(json_array_get(cpl, 1)) == 1);
    json_decref(ch);
    const char *refused[] = {"{\"prompt\":[1,2],\"max_tokens\":1,\"prompt_logprobs\":1,\"stream\":true}",
                             "{\"prompt\":[1,2],\"max_tokens\":1,\"prompt_logprobs\":21}",
                             "{\"prompt\":[1,2],\"max_tokens\":1,\"prompt_logprobs\":true}"};
    for (int k = 0; k < 3; k++) {
        json_t *x = post_json(t, "/v1/completions", refused[k], &status);
        CHECK_MSG(status == 400, "%s: %d", refused[k], status);
        json_decref(x);
    }

    /* max_tokens 0 without echo: an empty completion; chat keeps max_tokens >= 1 */
    json_t *z = post_json(t, "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":0}", &status);
    CHECK_EQ_INT(status, 200);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(json_object_get(z, "choices"), 0), "text")), ""));
    json_decref(z);
    z = post_json(t, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}",
                  &status);
    CHECK_EQ_INT(status, 400);
    json_decref(z);
    json_decref(sc);
    json_decref(gen);
}

/* ---- n > 1: choice i samples with seed + i ---- */

/* A stream's events by choice (up to 6): completions' texts pieced
 * together, finishes, [DONE]s, the usage; a completions chunk without a
 * text counts in no_text. */
typedef struct {
    char text[6][512];
    int finishes[6], done, no_text;
    long long prompt, completion;
    bool bad;
} choices_acc;

static bool on_choices_event(void *user, const char *data, size_t n) {
    choices_acc *a = user;
    if (n == 6 && !memcmp(data, "[DONE]", 6)) {
        a->done++;
        return true;
    }
    json_t *j = json_loadb(data, n, JSON_ALLOW_NUL, NULL);
    if (!j) a->bad = true;
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_int_t idx = json_integer_value(json_object_get(c, "index"));
    if (c && (idx < 0 || idx >= 6)) a->bad = true;
    else if (c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        size_t have = strlen(a->text[idx]);
        if (text) snprintf(a->text[idx] + have, sizeof a->text[idx] - have, "%s", text);
        else a->no_text++;
        if (json_is_string(json_object_get(c, "finish_reason"))) a->finishes[idx]++;
    }
    json_t *u = json_object_get(j, "usage");
    if (json_is_object(u)) {
        a->prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
        a->completion = json_integer_value(json_object_get(u, "completion_tokens"));
    }
    json_decref(j);
    return true;
}

static void test_n(const target *t) {
    int status;
    json_t *j = post_json(t, "/v1/completions",
                          "{\"prompt\":[5,6,7,8],\"max_tokens\":6,\"temperature\":1,\"seed\":40,\"n\":3,"
                          "\"ignore_eos\":true,\"return_token_ids\":true}",
                          &status);
    CHECK_EQ_INT(status, 200);
    json_t *choices = json_object_get(j, "choices");
    CHECK_EQ_INT(json_array_size(choices), 3);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens")), 18);
    for (int i = 0; i < 3; i++) {
        json_t *c = json_array_get(choices, (size_t)i);
        CHECK_EQ_INT(json_integer_value(json_object_get(c, "index")), i);
        int32_t got[8], one[8];
        int ng = get_ids(c, got, 8);
        char body[256];
        snprintf(body, sizeof body,
                 "{\"prompt\":[5,6,7,8],\"max_tokens\":6,\"temperature\":1,\"seed\":%d,\"ignore_eos\":true,"
                 "\"return_token_ids\":true}",
                 40 + i);
        json_t *r = post_json(t, "/v1/completions", body, &status);
        int no = get_ids(json_array_get(json_object_get(r, "choices"), 0), one, 8);
        CHECK_MSG(ng == 6 && no == 6 && !memcmp(got, one, sizeof got[0] * 6), "choice %d is not seed %d's tokens", i,
                  40 + i);
        json_decref(r);
    }
    json_decref(j);

    choices_acc a = {0};
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":5,\"n\":2,"
                       "\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    CHECK(sse_post(t, "/v1/chat/completions", body, on_choices_event, &a) == 200);
    CHECK(!a.bad);
    CHECK_EQ_INT(a.finishes[0], 1);
    CHECK_EQ_INT(a.finishes[1], 1);
    CHECK_EQ_INT(a.done, 1);
    CHECK_EQ_INT(a.completion, 10);
}

/* ---- a list of prompts: each choice as its prompt alone ---- */

static void test_prompt_list(const target *t) {
    /* three prompts (ids, ids, text), two sampled choices each */
    char p0[256], p1[512];
    int o0 = snprintf(p0, sizeof p0, "["), o1 = snprintf(p1, sizeof p1, "[");
    for (int i = 0; i < 10; i++) o0 += snprintf(p0 + o0, sizeof p0 - (size_t)o0, "%s%d", i ? "," : "", g_prompt[i]);
    for (int i = 10; i < 40; i++)
        o1 += snprintf(p1 + o1, sizeof p1 - (size_t)o1, "%s%d", i > 10 ? "," : "", g_prompt[i]);
    snprintf(p0 + o0, sizeof p0 - (size_t)o0, "]");
    snprintf(p1 + o1, sizeof p1 - (size_t)o1, "]");
    const char *prompts[3] = {p0, p1, "\"Hello world\""};
    const char *opts =
        "\"max_tokens\":5,\"n\":2,\"temperature\":1,\"seed\":7,\"ignore_eos\":true,\"return_token_ids\":true";
    int32_t alone[6][8];
    char alone_text[6][256];
    int n_alone[6];
    long long prompt_sum = 0;
    for (int k = 0; k < 3; k++) {
        char body[1024];
        snprintf(body, sizeof body, "{\"prompt\":%s,%s}", prompts[k], opts);
        int status = 0;
        json_t *j = post_json(t, "/v1/completions", body, &status);
        CHECK_EQ_INT(status, 200);
        prompt_sum += json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens"));
        for (int s2 = 0; s2 < 2; s2++) {
            json_t *c = json_array_get(json_object_get(j, "choices"), (size_t)s2);
            n_alone[2 * k + s2] = get_ids(c, alone[2 * k + s2], 8);
            snprintf(alone_text[2 * k + s2], sizeof alone_text[0], "%s", json_string_value(json_object_get(c, "text")));
        }
        json_decref(j);
    }
    char list[2048];
    snprintf(list, sizeof list, "{\"prompt\":[%s,%s,%s],%s,\"echo\":true}", p0, p1, prompts[2], opts);
    int status = 0;
    json_t *j = post_json(t, "/v1/completions", list, &status);
    CHECK_EQ_INT(status, 200);
    json_t *choices = json_object_get(j, "choices");
    CHECK_EQ_INT(json_array_size(choices), 6);
    for (int i = 0; i < 6; i++) {
        json_t *c = json_array_get(choices, (size_t)i);
        int32_t got[8];
        int ng = get_ids(c, got, 8);
        CHECK_MSG(json_integer_value(json_object_get(c, "index")) == i && ng == 5 && n_alone[i] == 5 &&
                      !memcmp(got, alone[i], sizeof got[0] * 5),
                  "choice %d of the list differs from its prompt alone", i);
        const char *text = json_string_value(json_object_get(c, "text"));
        size_t tl = text ? strlen(text) : 0, al = strlen(alone_text[i]);
        CHECK_MSG(text && tl >= al && !strcmp(text + tl - al, alone_text[i]), "choice %d: echo + text [%s]", i,
                  text ? text : "");
        CHECK_MSG(i < 4 || (text && !strncmp(text, "Hello world", 11)), "choice %d: its prompt's echo [%s]", i,
                  text ? text : "");
        json_t *pids = json_object_get(c, "prompt_token_ids");
        CHECK_EQ_INT((int)json_array_size(pids), i < 2 ? 10 : i < 4 ? 30 : (int)json_array_size(pids));
        CHECK_MSG(i < 4 || json_array_size(pids) > 0, "choice %d: no prompt_token_ids", i);
    }
    json_t *u = json_object_get(j, "usage");
    CHECK_EQ_INT(json_integer_value(json_object_get(u, "prompt_tokens")), prompt_sum);
    CHECK_EQ_INT(json_integer_value(json_object_get(u, "completion_tokens")), 30);
    json_decref(j);

    /* streamed: each choice's pieces add up to its text alone, every chunk has a text */
    snprintf(list, sizeof list,
             "{\"prompt\":[%s,%s,%s],%s,\"stream\":true,\"stream_options\":{\"include_usage\":true}}", p0, p1,
             prompts[2], opts);
    choices_acc *a = calloc(1, sizeof *a);
    CHECK(sse_post(t, "/v1/completions", list, on_choices_event, a) == 200);
    CHECK(!a->bad);
    CHECK_EQ_INT(a->no_text, 0); /* every completions chunk has a text */
    CHECK_EQ_INT(a->done, 1);
    CHECK_EQ_INT(a->prompt, prompt_sum);
    CHECK_EQ_INT(a->completion, 30);
    for (int i = 0; i < 6; i++) {
        CHECK_EQ_INT(a->finishes[i], 1);
        CHECK_MSG(!strcmp(a->text[i], alone_text[i]), "streamed choice %d [%s] vs alone [%s]", i, a->text[i],
                  alone_text[i]);
    }
    free(a);
}

/* ---- cancellation ---- */

static bool wait_idle(rw_engine *e, uint64_t cancelled_at_least) {
    for (int i = 0; i < 500; i++) {
        rw_engine_stats st;
        rw_engine_get_stats(e, &st);
        if (st.running == 0 && st.queued == 0 && st.requests_cancelled >= cancelled_at_least) return true;
        usleep(10000);
    }
    return false;
}

static void test_cancel(const target *t, rw_engine *e) {
    rw_engine_stats st0;
    rw_engine_get_stats(e, &st0);
    /* streaming: hang up after two events of a long generation */
    char *body = ids_body(g_prompt, 16, "\"max_tokens\":200,\"temperature\":0,\"ignore_eos\":true,\"stream\":true");
    stream_acc *a = calloc(1, sizeof *a);
    a->hang_up_after = 2;
    stream(t, "/v1/completions", body, a);
    CHECK_MSG(wait_idle(e, st0.requests_cancelled + 1), "a streaming client hung up; its request kept running");
    free(body);
    free(a);

    /* whole response: send the request, then close before the answer. The
     * watcher looks for hang-ups every 50 ms and this fixture makes 230
     * tokens in about 70, so one choice could finish first; 16 choices on 4
     * running slots take over a second. */
    body = ids_body(g_prompt, 16, "\"max_tokens\":230,\"n\":16,\"temperature\":0,\"ignore_eos\":true");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)t->port)};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    char head[256];
    int hn = snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: %zu\r\n\r\n",
                      t->auth ? t->auth : "", strlen(body));
    CHECK(send(fd, head, (size_t)hn, MSG_NOSIGNAL) == hn);
    CHECK(send(fd, body, strlen(body), MSG_NOSIGNAL) == (ssize_t)strlen(body));
    for (int i = 0; i < 200; i++) { /* until it runs */
        rw_engine_stats st;
        rw_engine_get_stats(e, &st);
        if (st.running > 0) break;
        usleep(5000);
    }
    close(fd);
    CHECK_MSG(wait_idle(e, st0.requests_cancelled + 2), "a client hung up while waiting; its request kept running");
    free(body);

    /* and the server still answers */
    greedy_job one = {.t = t, .n_prompt = 12, .n_gen = 6};
    run_clients(&one, 1);
    check_greedy(&one, 1);
}

/* ---- malformed requests ---- */

typedef struct {
    const char *method, *path, *body;
    int status;
} bad_case;

static void check_error_body(const char *resp, int status, const char *what) {
    json_t *j = resp ? json_loads(resp, JSON_ALLOW_NUL, NULL) : NULL;
    json_t *e = json_object_get(j, "error");
    CHECK_MSG(json_is_string(json_object_get(e, "message")) && json_is_string(json_object_get(e, "type")) &&
                  json_object_get(e, "param") && json_object_get(e, "code"),
              "%s (%d): not an OpenAI error body: %.200s", what, status, resp ? resp : "(none)");
    json_decref(j);
}

static void test_malformed(const target *t) {
    static const bad_case cases[] = {
        {"POST", "/v1/completions", "{", 400},
        {"POST", "/v1/completions", "", 400},
        {"POST", "/v1/completions", "[]", 400},
        {"POST", "/v1/completions", "null", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\"} trailing", 400},
        {"POST", "/v1/completions", "{\"prompt\":5}", 400},
        {"POST", "/v1/completions", "{\"prompt\":[]}", 400},
        {"POST", "/v1/completions", "{}", 400},
        {"POST", "/v1/completions", "{\"prompt\":[1,2,99999]}", 400},
        {"POST", "/v1/completions", "{\"prompt\":[1,-2]}", 400},
        {"POST", "/v1/completions", "{\"prompt\":[1,2.5]}", 400},
        {"POST", "/v1/completions", "{\"prompt\":[\"a\",5]}", 400},
        {"POST", "/v1/completions", "{\"prompt\":[\"a\",[]]}", 400},
        {"POST", "/v1/completions", "{\"prompt\":[[1],[2,99999]]}", 400},
        {"POST", "/v1/completions", "{\"prompt\":[\"a\",\"b\"],\"n\":9}", 400},
        {"POST", "/v1/completions", "{\"prompt\":[\"a\",\"b\"],\"suffix\":\"c\"}", 400},
        {"POST", "/completion", "{\"prompt\":[\"a\",\"b\"]}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":\"5\"}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":-1}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":1.5}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"temperature\":\"hot\"}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"temperature\":-1}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"unknown_field\":1}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"n\":17}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"best_of\":2}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"stop\":[1]}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"stop\":\"\"}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"stream\":\"yes\"}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"stream_options\":{\"include_usage\":true}}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"seed\":\"x\"}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"echo\":\"yes\"}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"suffix\":3}", 400},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"echo\":true}", 400},
        {"POST", "/infill", "{", 400},
        {"POST", "/infill", "[]", 400},
        {"POST", "/completion", "{", 400},
        {"POST", "/completion", "{\"prompt\":[1,-2]}", 400},
        {"POST", "/completion", "{\"prompt\":[1,2,99999]}", 400},
        {"POST", "/completion", "{\"prompt\":{}}", 400},
        {"POST", "/completion", "{\"prompt\":\"a\",\"n_predict\":300}", 400},
        {"POST", "/slots/0?action=save", "{\"filename\":\"a.bin\"}", 501},
        {"POST", "/slots/0?action=nope", "{}", 400},
        {"GET", "/slots/0", NULL, 405},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":300}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"\xff\xfe\"}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"prompt\":\"b\",\"model\":7}", 400},
        {"POST", "/v1/chat/completions", "{\"messages\":\"hi\"}", 400},
        {"POST", "/v1/chat/completions", "{\"messages\":[]}", 400},
        {"POST", "/v1/chat/completions", "{\"messages\":[1]}", 400},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\"}]}", 400},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":7}]}", 400},
        {"POST", "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]}", 400},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}", 400},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}",
         400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"logprobs\":21}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"logit_bias\":{\"abc\":1}}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"logit_bias\":{\"5\":500}}", 400},
        {"POST", "/v1/completions", "{\"prompt\":\"a\",\"top_p\":2}", 400},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":0}", 400},
        {"POST", "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"yaml\"}}", 400},
        {"GET", "/v1/nothing", NULL, 404},
        {"GET", "/v1/models/nope", NULL, 404},
        {"POST", "/v1/models/fixture", "{}", 405},
        {"POST", "/", "{}", 404},
        {"GET", "/v1/completions", NULL, 405},
        {"DELETE", "/v1/chat/completions", NULL, 405},
        {"POST", "/health", "{}", 405},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *resp = NULL;
        const bad_case *c = &cases[i];
        int status = request(t, c->method, c->path, c->body, c->body ? strlen(c->body) : 0, &resp);
        CHECK_MSG(status == c->status, "%s %s %s: status %d, want %d (%.200s)", c->method, c->path,
                  c->body ? c->body : "", status, c->status, resp ? resp : "");
        check_error_body(resp, status, c->body ? c->body : c->path);
        free(resp);
    }
    /* deep nesting, a long prompt over the context (the numbers are in the message), a huge body */
    size_t deep = 20000;
    char *b = malloc(2 * deep + 64);
    size_t off = (size_t)sprintf(b, "{\"prompt\":");
    for (size_t i = 0; i < deep; i++) b[off++] = '[';  /* deep < MAX_BODY / 2 */
    for (size_t i = 0; i < deep; i++) b[off++] = ']';
    b[off++] = '}';
    char *resp = NULL;
    int status = request(t, "POST", "/v1/completions", b, off, &resp);
    CHECK_EQ_INT(status, 400);
    check_error_body(resp, status, "deep nesting");
    free(resp);
    free(b);

    int32_t ids[300];
    for (int i = 0; i < 300; i++) ids[i] = g_prompt[i % g_n_prompt];
    b = ids_body(ids, 300, "\"max_tokens\":4");
    status = request(t, "POST", "/v1/completions", b, strlen(b), &resp);
    CHECK_EQ_INT(status, 400);
    CHECK_MSG(resp && strstr(resp, "256") && strstr(resp, "300") && strstr(resp, "context_length_exceeded"),
              "context error without the numbers: %s", resp ? resp : "");
    free(resp);
    free(b);

    size_t huge = MAX_BODY + 1000;
    b = malloc(huge);
    memset(b, ' ', huge);
    status = request(t, "POST", "/v1/completions", b, huge, &resp);
    CHECK_EQ_INT(status, 413);
    check_error_body(resp, status, "huge body");
    free(resp);
    free(b);
}

/* 429: one slot and no queue; a second request while the first runs. */
static void test_busy(void) {
    rw_engine *e = NULL;
    rw_server *s = NULL;
    rw_error err = {0};
    const rw_engine_config ec = {.n_threads = 1, .max_running = 1, .max_queued = 0, .n_ctx = N_CTX,
                                 .prefill_chunk = 64, .kv_type = RW_KV_F32};
    CHECK(rw_engine_new(g_model, g_tok, &ec, &e, &err) == RW_OK);
    const rw_server_config sc = {.model_id = "fixture", .api_key = "sekrit"};
    CHECK(rw_server_start(e, g_tok, g_tmpl, g_bos, g_eos, &sc, &s, &err) == RW_OK);
    if (!s) return;
    target t = {.port = rw_server_port(s), .auth = "Authorization: Bearer sekrit\r\n"};
    target noauth = {.port = t.port}, wrong = {.port = t.port, .auth = "Authorization: Bearer sekriT\r\n"};

    char *resp = NULL;
    CHECK_EQ_INT(request(&noauth, "GET", "/health", NULL, 0, NULL), 200);
    CHECK_EQ_INT(request(&noauth, "GET", "/v1/health", NULL, 0, NULL), 200);
    CHECK_EQ_INT(request(&noauth, "GET", "/models", NULL, 0, NULL), 401);
    CHECK_EQ_INT(request(&noauth, "GET", "/v1/models", NULL, 0, &resp), 401);
    check_error_body(resp, 401, "no key");
    free(resp);
    CHECK_EQ_INT(request(&wrong, "POST", "/v1/completions", "{\"prompt\":\"a\"}", 14, &resp), 401);
    check_error_body(resp, 401, "wrong key");
    free(resp);
    CHECK_EQ_INT(request(&t, "GET", "/v1/models", NULL, 0, NULL), 200);
    /* no replica_id: HOSTNAME:PORT */
    CHECK_EQ_INT(request(&t, "GET", "/metrics", NULL, 0, &resp), 200);
    char want[64];
    snprintf(want, sizeof want, ":%d\"} 1", t.port);
    const char *info = resp ? strstr(resp, "\nrewind_replica_info{replica=\"") : NULL;
    const char *end = info ? strchr(info + 1, '\n') : NULL, *at = info ? strstr(info, want) : NULL;
    CHECK_MSG(at && end && at + strlen(want) == end, "/metrics: default replica name");
    free(resp);

    /* the one slot: a long stream in another thread, and a request meanwhile */
    greedy_job hog = {.t = &t, .n_prompt = 8, .n_gen = 240, .streamed = true};
    pthread_t th;
    pthread_create(&th, NULL, greedy_client, &hog);
    for (int i = 0; i < 500; i++) {
        rw_engine_stats st;
        rw_engine_get_stats(e, &st);
        if (st.running > 0) break;
        usleep(2000);
    }
    CHECK_EQ_INT(request(&t, "POST", "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":2}", 29, &resp), 429);
    check_error_body(resp, 429, "busy");
    free(resp);
    pthread_join(th, NULL);
    check_greedy(&hog, 1);
    CHECK_EQ_INT(request(&t, "POST", "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":2}", 29, NULL), 200);
    rw_server_stop(s);
    rw_engine_free(e);
}

static void test_metrics(const target *t) {
    char *resp = NULL;
    CHECK_EQ_INT(request(t, "GET", "/metrics", NULL, 0, &resp), 200);
    static const char *const want[] = {"rewind_requests_total{status=\"200\"}", "rewind_requests_total{status=\"400\"}",
                                       "rewind_requests_total{status=\"413\"}", "rewind_generated_tokens_total",
                                       "rewind_prompt_tokens_cached_total{tier=",
                                       "rewind_time_to_first_token_seconds_bucket{le=\"+Inf\"}",
                                       "rewind_inter_token_latency_seconds_count", "rewind_batch_size_bucket",
                                       "rewind_queue_depth", "rewind_cache_bytes{kind="};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        CHECK_MSG(resp && strstr(resp, want[i]), "/metrics lacks %s", want[i]);
    /* the replica's name (main's config: r"1\x), escaped as a label value */
    CHECK_MSG(resp && strstr(resp, "\nrewind_replica_info{replica=\"r\\\"1\\\\x\"} 1\n"), "/metrics: replica info");
    free(resp);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_error err = {0};
    const char *path = rw_test_fixture_path("qwen35/qwen35-Q8_0.gguf");
    if (rw_gguf_open(path, &g_gguf, &err) || rw_model_load(g_gguf, &g_model, &err) ||
        rw_tokenizer_load(g_gguf, &g_tok, &err) || rw_chat_template_from_gguf(g_gguf, &g_tmpl, &g_bos, &g_eos, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    size_t n = 0;
    char *ids_txt = rw_test_read_file(rw_test_fixture_path("qwen35/qwen35.prompt.ids"), &n);
    CHECK(ids_txt != NULL);
    for (char *p = ids_txt, *end; p && g_n_prompt < 128; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        g_prompt[g_n_prompt++] = (int32_t)v;
    }
    free(ids_txt);
    CHECK_EQ_INT(g_n_prompt, 128);

    CHECK(rw_model_load(g_gguf, &g_ref_model, &err) == RW_OK);
    rw_engine *e = NULL;
    rw_server *s = NULL;
    const rw_engine_config ec = {.n_threads = 2, .max_running = 4, .max_queued = 16, .n_ctx = N_CTX,
                                 .prefill_chunk = 16, .kv_type = RW_KV_F32};
    CHECK(rw_engine_new(g_model, g_tok, &ec, &e, &err) == RW_OK);
    /* --strict-api: the unknown-field cases below are 400s only in that mode
     * (by default they are ignored: tests/server/test_server_agent.c) */
    const rw_server_config sc = {.model_id = "fixture", .max_body_bytes = MAX_BODY, .replica_id = "r\"1\\x",
                                 .strict_api = true};
    CHECK(rw_server_start(e, g_tok, g_tmpl, g_bos, g_eos, &sc, &s, &err) == RW_OK);
    if (!s) return rw_test_done();
    target t = {.port = rw_server_port(s)};
    CHECK_EQ_INT(request(&t, "GET", "/health", NULL, 0, NULL), 200);
    char *models = NULL;
    CHECK_EQ_INT(request(&t, "GET", "/v1/models", NULL, 0, &models), 200);
    CHECK(models && strstr(models, "\"fixture\""));
    free(models);
    CHECK_EQ_INT(request(&t, "GET", "/v1/models/fixture", NULL, 0, NULL), 200);

    test_greedy(&t);
    test_aliases(&t);
    test_seeded(&t);
    test_chat_and_stream(&t);
    test_logprobs(&t);
    test_n(&t);
    test_prompt_list(&t);
    test_echo_logprobs(&t);
    test_cancel(&t, e);
    test_malformed(&t);
    test_metrics(&t);
    rw_server_stop(s);
    rw_engine_free(e);
    test_busy();

    rw_chat_template_free(g_tmpl);
    free(g_bos);
    free(g_eos);
    rw_tokenizer_free(g_tok);
    rw_model_free(g_model);
    rw_model_free(g_ref_model);
    rw_gguf_close(g_gguf);
    return rw_test_done();
}
