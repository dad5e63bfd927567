/* cmd_demo_client.c - `rewind demo-client [--host 127.0.0.1] [--port 8080]
 * [--api-key KEY] [--max-tokens N] [--system-tokens N] [--wait SECONDS]`.
 *
 * Plays a scripted multi-turn conversation through a running server's
 * /v1/chat/completions (streaming, greedy) and prints, per turn, the time to
 * first token measured here (request sent -> first SSE chunk carrying a
 * token) and the server's usage: cached / total prompt tokens. The turns:
 *
 *   cold          a system prompt of about --system-tokens (1,950) tokens,
 *                 counted by the server's /tokenize, + question 1
 *   exact repeat  the same request again
 *   shared prefix the same system prompt + a different question
 *   extended      the first exchange (with the model's answer) + a follow-up
 *
 * Cached tokens are what the server reports
 * (usage.prompt_tokens_details.cached_tokens): 0 on a server without a
 * prefix cache. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "tools/http_client.h"

static const char *CMD = "demo-client";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The system prompt: a support assistant's handbook (about 10 KB). */
static char *handbook(void) {
    static const char *const topics[] = {"billing", "shipping", "returns", "accounts", "security", "warranty",
                                         "privacy", "orders", "refunds", "support hours"};
    static const char *const rules[] = {
        "Greet the customer by name when it is known, and keep the first sentence short.",
        "Never promise a delivery date that the order system has not confirmed.",
        "When a question is ambiguous, ask one clarifying question before answering.",
        "Quote prices with their currency and say whether taxes are included.",
        "Do not ask for a full card number, a password or a one-time code under any circumstances.",
        "If the customer is upset, acknowledge the problem before explaining the policy.",
        "Summarise the next steps in a numbered list when there are more than two.",
        "Escalate to a human agent when the customer asks twice or mentions legal action.",
        "Refer to the order by its number, never by the product name alone.",
        "Close with an offer to help further, in one sentence.",
    };
    size_t cap = 16384, off = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    off += (size_t)snprintf(s + off, cap - off,
                            "You are the customer support assistant of Rewind Outfitters, a shop for outdoor "
                            "equipment. Follow this handbook exactly.\n\n");
    for (size_t t = 0; t < sizeof topics / sizeof *topics; t++) {
        off += (size_t)snprintf(s + off, cap - off, "Section %zu: %s.\n", t + 1, topics[t]);
        for (size_t r = 0; r < sizeof rules / sizeof *rules; r++)
            off += (size_t)snprintf(s + off, cap - off, "%zu.%zu For %s questions: %s\n", t + 1, r + 1, topics[t],
                                    rules[(r + t) % (sizeof rules / sizeof *rules)]);
        off += (size_t)snprintf(s + off, cap - off, "\n");
    }
    return s;
}

typedef struct {
    double t0, first;
    char answer[4096];
    size_t answer_len;
    long long prompt, cached, completion;
    bool bad;
} turn;

static bool on_event(void *user, const char *data, size_t n) {
    turn *t = user;
    if (n == 6 && !memcmp(data, "[DONE]", 6)) return true;
    json_t *j = json_loadb(data, n, JSON_ALLOW_NUL, NULL);
    if (!j || json_object_get(j, "error")) {
        t->bad = true;
        json_decref(j);
        return false;
    }
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    if (json_array_size(json_object_get(c, "token_ids")) && t->first == 0) t->first = now_s();
    json_t *txt = json_object_get(json_object_get(c, "delta"), "content");
    if (json_is_string(txt) && t->answer_len + json_string_length(txt) < sizeof t->answer) {
        memcpy(t->answer + t->answer_len, json_string_value(txt), json_string_length(txt));
        t->answer_len += json_string_length(txt);
    }
    json_t *u = json_object_get(j, "usage");
    if (json_is_object(u)) {
        t->prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
        t->completion = json_integer_value(json_object_get(u, "completion_tokens"));
        t->cached = json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    }
    json_decref(j);
    return true;
}

static bool on_data(void *user, const char *d, size_t n) { return rw_sse_feed(user, d, n); }

static int run_turn(const char *host, int port, const char *headers, json_t *messages, int max_tokens, turn *t) {
    json_t *req = json_pack("{s:O,s:i,s:f,s:b,s:b,s:{s:b}}", "messages", messages, "max_tokens", max_tokens,
                            "temperature", 0.0, "return_token_ids", 1, "stream", 1, "stream_options",
                            "include_usage", 1);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body) {
        rw_cli_error(CMD, "out of memory");
        return 1;
    }
    memset(t, 0, sizeof *t);
    rw_sse_parser p = {.on_event = on_event, .user = t};
    rw_http_request rq = {.host = host, .port = port, .method = "POST", .path = "/v1/chat/completions",
                          .headers = headers, .body = body, .body_len = strlen(body), .on_data = on_data,
                          .user = &p, .timeout_ms = 600000};
    rw_http_response r;
    rw_error err = {0};
    t->t0 = now_s();
    rw_status st = rw_http_do(&rq, &r, &err);
    int rc = 0;
    if (st) {
        rw_cli_error(CMD, "%s", err.msg);
        rc = 1;
    } else if (r.status != 200 || t->bad) {
        rw_cli_error(CMD, "the server answered %d: %.300s", r.status, r.body ? r.body : "");
        rc = 1;
    }
    rw_http_response_free(&r);
    rw_sse_free(&p);
    free(body);
    return rc;
}

/* Tokens of text on the server (POST /tokenize), or -1. */
static long count_tokens(const char *host, int port, const char *headers, const char *text, size_t len) {
    json_t *req = json_pack("{s:s%}", "content", text, len);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body) return -1;
    rw_http_request rq = {.host = host, .port = port, .method = "POST", .path = "/tokenize", .headers = headers,
                          .body = body, .body_len = strlen(body)};
    rw_http_response r;
    rw_error err = {0};
    long n = -1;
    if (rw_http_do(&rq, &r, &err) == RW_OK && r.status == 200) {
        json_t *j = json_loads(r.body, 0, NULL);
        if (json_is_array(json_object_get(j, "tokens"))) n = (long)json_array_size(json_object_get(j, "tokens"));
        json_decref(j);
    }
    rw_http_response_free(&r);
    free(body);
    return n;
}

/* The handbook cut at a line so that it is about `target` tokens for the
 * server's vocabulary (whole when the server cannot count). */
static char *system_prompt(const char *host, int port, const char *headers, long target) {
    char *s = handbook();
    if (!s) return NULL;
    size_t len = strlen(s);
    long n = count_tokens(host, port, headers, s, len);
    if (n > target) {
        size_t cut = (size_t)((double)len * (double)target / (double)n);
        while (cut > 0 && s[cut - 1] != '\n') cut--;
        for (int i = 0; i < 8 && cut > 0; i++) { /* a few lines more or less */
            long k = count_tokens(host, port, headers, s, cut);
            if (k < 0) break;
            size_t next = cut;
            if (k < target) {
                while (next < len && s[next] != '\n') next++;
                if (next < len) next++;
                if (count_tokens(host, port, headers, s, next) > target) break;
            } else {
                next--;
                while (next > 0 && s[next - 1] != '\n') next--;
            }
            if (next == cut || next == 0) break;
            cut = next;
        }
        s[cut] = 0;
    }
    return s;
}

static json_t *msg(const char *role, const char *content, size_t len) {
    return json_pack("{s:s,s:s%}", "role", role, "content", content, len);
}

static int usage(void) {
    fprintf(stderr, "usage: rewind demo-client [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--max-tokens N] "
                    "[--system-tokens N] [--wait SECONDS]\n");
    return 2;
}

int rw_cmd_demo_client(int argc, char **argv) {
    const char *host = "127.0.0.1", *key = NULL;
    long port = 8080, max_tokens = 16, wait_s = 0, sys_tokens = 1950;
    const rw_cli_opt opts[] = {
        {"--host", RW_OPT_STR, &host, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--api-key", RW_OPT_STR, &key, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--port", RW_OPT_INT, &port, 1, 65535, 0, 0, NULL, NULL, NULL},
        {"--max-tokens", RW_OPT_INT, &max_tokens, 1, 4096, 0, 0, NULL, NULL, NULL},
        {"--system-tokens", RW_OPT_INT, &sys_tokens, 1, 1 << 20, 0, 0, NULL, NULL, NULL},
        {"--wait", RW_OPT_INT, &wait_s, 0, 3600, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    const int prc = rw_cli_parse_opts(CMD, argc, argv, opts, NULL, 0, NULL);
    if (prc) return prc == RW_CLI_HELP ? 0 : usage();
    char headers[512] = "";
    if (key) snprintf(headers, sizeof headers, "Authorization: Bearer %s\r\n", key);
    /* --wait: until /health answers (a server that is still loading) */
    for (double t_end = now_s() + (double)wait_s;;) {
        rw_http_request rq = {.host = host, .port = (int)port, .method = "GET", .path = "/health", .timeout_ms = 5000};
        rw_http_response r;
        rw_error err = {0};
        rw_status st = rw_http_do(&rq, &r, &err);
        int status = r.status;
        rw_http_response_free(&r);
        if (st == RW_OK && status == 200) break;
        if (now_s() >= t_end) {
            rw_cli_error(CMD, "no server at %s port %ld: %s", host, port, st ? err.msg : "not healthy");
            return 1;
        }
        usleep(200000);
    }
    char *sys = system_prompt(host, (int)port, headers, sys_tokens);
    if (!sys) {
        rw_cli_error(CMD, "out of memory");
        return 1;
    }
    const char *q1 = "My order 10422 says delivered but nothing arrived. What should I do?";
    const char *q2 = "Can I return a tent I bought five weeks ago if it was never used?";
    const char *q3 = "Thanks. And how long does the investigation usually take?";
    const char *names[4] = {"cold", "exact repeat", "shared prefix", "extended conversation"};
    turn t[4];
    int rc = 1;
    json_t *m1 = json_array(), *m2 = json_array(), *m3 = json_array();
    json_array_append_new(m1, msg("system", sys, strlen(sys)));
    json_array_append_new(m1, msg("user", q1, strlen(q1)));
    json_array_append_new(m2, msg("system", sys, strlen(sys)));
    json_array_append_new(m2, msg("user", q2, strlen(q2)));
    if (run_turn(host, (int)port, headers, m1, (int)max_tokens, &t[0]) ||
        run_turn(host, (int)port, headers, m1, (int)max_tokens, &t[1]) ||
        run_turn(host, (int)port, headers, m2, (int)max_tokens, &t[2]))
        goto done;
    json_array_extend(m3, m1);
    json_array_append_new(m3, msg("assistant", t[0].answer, t[0].answer_len));
    json_array_append_new(m3, msg("user", q3, strlen(q3)));
    if (run_turn(host, (int)port, headers, m3, (int)max_tokens, &t[3])) goto done;
    printf("%-24s %10s %24s\n", "turn", "TTFT", "cached / prompt tokens");
    for (int i = 0; i < 4; i++)
        printf("%-24s %8.3f s %13lld / %-10lld\n", names[i], t[i].first > 0 ? t[i].first - t[i].t0 : 0.0, t[i].cached,
               t[i].prompt);
    rc = 0;
done:
    json_decref(m1);
    json_decref(m2);
    json_decref(m3);
    free(sys);
    return rc;
}
