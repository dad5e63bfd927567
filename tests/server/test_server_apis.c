/* test_server_apis.c - the Anthropic Messages and OpenAI Responses APIs of
 * a real server on 127.0.0.1 over the qwen3 fixture with Qwen3's own chat
 * template (it renders tools and tool calls), checked against the
 * chat-completions endpoint they translate into:
 *
 *   - the same conversation sent as Messages, as Responses and as chat
 *     completions renders the same prompt (token counts equal, also
 *     count_tokens) and greedy decoding gives the same text, whole and
 *     streamed; tool_use / tool_result blocks and function_call /
 *     function_call_output items render as the chat tool_calls and tool
 *     messages do;
 *   - stop reasons: max_tokens / incomplete, stop_sequence with the string
 *     that matched;
 *   - streams: every event's name is its data's type, in the documented
 *     order, Responses' sequence numbers count up from 0;
 *   - previous_response_id: the next turn's prompt is that of the whole
 *     conversation in chat form, the prefix cache serves part of it, and
 *     store=false keeps nothing; GET /v1/responses/{id};
 *   - authentication by x-api-key or bearer, errors in each API's shape;
 *   - the output side on a text of our choosing (a think block, text and a
 *     tool call in Qwen3's format, as the engine's events would carry it,
 *     whole and one byte per event): thinking / text / tool_use blocks and
 *     reasoning / message / function_call items, whole and streamed, the
 *     same; the call's id links the next turn's function_call_output; a
 *     malformed call comes back as text. (Random weights do not write tool
 *     calls by themselves.) */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "chat/history.h"
#include "engine/engine.h"
#include "harness.h"
#include "tools/http_client.h"
#include "server/api_int.h"
#include "server/server.h"

#define KEY "secret-key"
#define BEARER "Authorization: Bearer " KEY "\r\n"
#define XKEY "x-api-key: " KEY "\r\n"

static int g_port;
static rw_server *g_srv;
static const rw_tokenizer *g_tok;
static const rw_chat_template *g_tmpl;

static json_t *post(const char *path, const char *headers, const char *body, int *status, char **raw) {
    rw_http_request rq = {.port = g_port, .method = "POST", .path = path, .headers = headers, .body = body,
                          .body_len = strlen(body)};
    rw_http_response r;
    rw_error err = {0};
    rw_status st = rw_http_do(&rq, &r, &err);
    CHECK_MSG(st == RW_OK, "%s: %s", path, err.msg);
    *status = st == RW_OK ? r.status : -1;
    json_t *j = r.body ? json_loads(r.body, JSON_ALLOW_NUL, NULL) : NULL;
    if (raw) *raw = r.body ? strdup(r.body) : NULL;
    rw_http_response_free(&r);
    return j;
}

static int get(const char *path, json_t **out) {
    rw_http_request rq = {.port = g_port, .method = "GET", .path = path, .headers = XKEY};
    rw_http_response r;
    rw_error err = {0};
    CHECK(rw_http_do(&rq, &r, &err) == RW_OK);
    *out = r.body ? json_loads(r.body, JSON_ALLOW_NUL, NULL) : NULL;
    int status = r.status;
    rw_http_response_free(&r);
    return status;
}

static const char *str(json_t *o, const char *path) { /* "a.b.0.c" */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = o;
    for (char *k = strtok(buf, "."); k && v; k = strtok(NULL, "."))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
    return json_string_value(v) ? json_string_value(v) : "";
}

static long long num(json_t *o, const char *path) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = o;
    for (char *k = strtok(buf, "."); k && v; k = strtok(NULL, "."))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* A stream's events: [{"event": NAME, "data": {...}}], from the raw body. */
static json_t *sse_events(const char *raw) {
    json_t *a = json_array();
    const char *p = raw ? raw : "";
    while (*p) {
        const char *end = strstr(p, "\n\n");
        if (!end) end = p + strlen(p);
        json_t *ev = json_object();
        for (const char *l = p; l < end;) {
            const char *nl = memchr(l, '\n', (size_t)(end - l));
            if (!nl) nl = end;
            if (!strncmp(l, "event: ", 7)) json_object_set_new(ev, "event", json_stringn(l + 7, (size_t)(nl - l - 7)));
            if (!strncmp(l, "data: ", 6)) {
                json_t *d = json_loadb(l + 6, (size_t)(nl - l - 6), JSON_ALLOW_NUL, NULL);
                CHECK_MSG(d != NULL, "event data is not JSON: %.*s", (int)(nl - l), l);
                if (d) json_object_set_new(ev, "data", d);
            }
            l = nl + 1;
        }
        if (json_object_size(ev)) json_array_append_new(a, ev);
        else json_decref(ev);
        p = *end ? end + 2 : end;
    }
    return a;
}

static const char *output_text(json_t *resp); /* a response's message text */

/* The chat-completions reference: content, finish reason, usage. */
typedef struct {
    char text[4096];
    char finish[16];
    long long prompt, completion, cached;
} chat_ref;

static void chat(const char *messages, const char *extra, chat_ref *r) {
    char body[8192];
    snprintf(body, sizeof body, "{\"messages\":%s%s%s}", messages, extra[0] ? "," : "", extra);
    int status;
    json_t *j = post("/v1/chat/completions", BEARER, body, &status, NULL);
    CHECK_MSG(status == 200, "chat reference: %d", status);
    snprintf(r->text, sizeof r->text, "%s", str(j, "choices.0.message.content"));
    snprintf(r->finish, sizeof r->finish, "%s", str(j, "choices.0.finish_reason"));
    r->prompt = num(j, "usage.prompt_tokens");
    r->completion = num(j, "usage.completion_tokens");
    r->cached = num(j, "usage.prompt_tokens_details.cached_tokens");
    json_decref(j);
}

static const char *const conv_chat =
    "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hello there\"}]";

/* ---- Messages ---- */

static void test_messages(void) {
    chat_ref ref;
    chat(conv_chat, "\"max_tokens\":12,\"temperature\":0", &ref);
    const char *body = "{\"model\":\"m\",\"max_tokens\":12,\"temperature\":0,\"system\":[{\"type\":\"text\",\"text\":"
                       "\"Be brief.\"}],\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
                       "\"Hello\"},{\"type\":\"text\",\"text\":\" there\"}]}]}";
    int status;
    json_t *j = post("/v1/messages", XKEY, body, &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK(!strcmp(str(j, "type"), "message") && !strcmp(str(j, "role"), "assistant"));
    CHECK(!strncmp(str(j, "id"), "msg_", 4));
    CHECK(!strcmp(str(j, "content.0.type"), "text"));
    CHECK_MSG(!strcmp(str(j, "content.0.text"), ref.text), "messages '%s' vs chat '%s'", str(j, "content.0.text"),
              ref.text);
    const char *want_stop = !strcmp(ref.finish, "length") ? "max_tokens" : "end_turn";
    CHECK_MSG(!strcmp(str(j, "stop_reason"), want_stop), "stop_reason %s, chat finish %s", str(j, "stop_reason"),
              ref.finish);
    CHECK(json_is_null(json_object_get(j, "stop_sequence")));
    CHECK_EQ_INT(num(j, "usage.input_tokens") + num(j, "usage.cache_read_input_tokens"), ref.prompt);
    CHECK_EQ_INT(num(j, "usage.output_tokens"), ref.completion);
    CHECK_EQ_INT(num(j, "usage.cache_creation_input_tokens"), 0);
    json_decref(j);

    /* count_tokens: the same prompt */
    j = post("/v1/messages/count_tokens", XKEY,
             "{\"model\":\"m\",\"system\":\"Be brief.\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello there\"}]}",
             &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK_EQ_INT(num(j, "input_tokens"), ref.prompt);
    json_decref(j);

    /* streamed: the documented order, the same text */
    const char *sbody = "{\"model\":\"m\",\"max_tokens\":12,\"temperature\":0,\"stream\":true,\"system\":\"Be brief.\","
                        "\"messages\":[{\"role\":\"user\",\"content\":\"Hello there\"}]}";
    char *raw = NULL;
    json_decref(post("/v1/messages", BEARER, sbody, &status, &raw));
    CHECK_EQ_INT(status, 200);
    json_t *evs = sse_events(raw);
    free(raw);
    char text[4096] = "";
    size_t n = json_array_size(evs), i;
    CHECK(n >= 5);
    json_t *ev;
    int stage = 0; /* 0 start, 1 ping, 2 block open, 3 block closed, 4 message_delta, 5 message_stop */
    json_array_foreach(evs, i, ev) {
        const char *name = str(ev, "event"), *type = str(ev, "data.type");
        CHECK_MSG(!strcmp(name, type), "event %s carries data of type %s", name, type);
        if (!strcmp(type, "message_start")) {
            CHECK_EQ_INT(stage, 0);
            CHECK_EQ_INT(num(ev, "data.message.usage.input_tokens") + num(ev, "data.message.usage.cache_read_input_tokens"),
                         ref.prompt);
            stage = 1;
        } else if (!strcmp(type, "ping")) CHECK_EQ_INT(stage, 1);
        else if (!strcmp(type, "content_block_start")) {
            CHECK(stage == 1 || stage == 3);
            CHECK(!strcmp(str(ev, "data.content_block.type"), "text"));
            stage = 2;
        } else if (!strcmp(type, "content_block_delta")) {
            CHECK_EQ_INT(stage, 2);
            CHECK(!strcmp(str(ev, "data.delta.type"), "text_delta"));
            strncat(text, str(ev, "data.delta.text"), sizeof text - strlen(text) - 1);
        } else if (!strcmp(type, "content_block_stop")) {
            CHECK_EQ_INT(stage, 2);
            stage = 3;
        } else if (!strcmp(type, "message_delta")) {
            CHECK_EQ_INT(stage, 3);
            CHECK(!strcmp(str(ev, "data.delta.stop_reason"), want_stop));
            CHECK_EQ_INT(num(ev, "data.usage.output_tokens"), ref.completion);
            stage = 4;
        } else if (!strcmp(type, "message_stop")) {
            CHECK_EQ_INT(stage, 4);
            stage = 5;
        } else CHECK_MSG(0, "unexpected event %s", type);
    }
    CHECK_EQ_INT(stage, 5);
    CHECK_MSG(!strcmp(text, ref.text), "streamed '%s' vs chat '%s'", text, ref.text);
    json_decref(evs);
}

/* A stop sequence taken from the greedy text itself: the answer ends before
 * its first occurrence, with stop_reason stop_sequence naming it. */
static void test_stop_sequence(void) {
    chat_ref ref;
    chat(conv_chat, "\"max_tokens\":24,\"temperature\":0", &ref);
    char stop[3] = "";
    for (size_t p = 1; ref.text[p] && ref.text[p + 1] && !stop[0]; p++) {
        unsigned char a = (unsigned char)ref.text[p], b = (unsigned char)ref.text[p + 1];
        if (a > ' ' && a < 0x7f && b > ' ' && b < 0x7f) {
            stop[0] = (char)a;
            stop[1] = (char)b;
        }
    }
    CHECK_MSG(stop[0], "the greedy text has no two printable ASCII characters in a row: '%s'", ref.text);
    if (!stop[0]) return;
    size_t want = (size_t)(strstr(ref.text, stop) - ref.text);
    char body[1024];
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"max_tokens\":24,\"temperature\":0,\"stop_sequences\":[\"zzzz\",\"%s\"],\"system\":"
             "\"Be brief.\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello there\"}]%s}",
             stop, "");
    int status;
    json_t *j = post("/v1/messages", XKEY, body, &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK_MSG(!strcmp(str(j, "stop_reason"), "stop_sequence"), "stop_reason %s", str(j, "stop_reason"));
    CHECK(!strcmp(str(j, "stop_sequence"), stop));
    CHECK_MSG(strlen(str(j, "content.0.text")) == want && !strncmp(str(j, "content.0.text"), ref.text, want),
              "'%s' should be the first %zu bytes of '%s'", str(j, "content.0.text"), want, ref.text);
    json_decref(j);
    /* streamed, the same reason */
    snprintf(body, sizeof body,
             "{\"model\":\"m\",\"max_tokens\":24,\"temperature\":0,\"stream\":true,\"stop_sequences\":[\"%s\"],"
             "\"system\":\"Be brief.\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello there\"}]}",
             stop);
    char *raw = NULL;
    json_decref(post("/v1/messages", XKEY, body, &status, &raw));
    json_t *evs = sse_events(raw);
    free(raw);
    json_t *md = json_array_get(evs, json_array_size(evs) - 2);
    CHECK(!strcmp(str(md, "data.type"), "message_delta"));
    CHECK(!strcmp(str(md, "data.delta.stop_reason"), "stop_sequence"));
    CHECK(!strcmp(str(md, "data.delta.stop_sequence"), stop));
    json_decref(evs);
}

/* tool_use / tool_result blocks render as the chat tool_calls and tool messages. */
static void test_messages_tools(void) {
    const char *chat_msgs =
        "[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\",\"content\":\"Let me "
        "check.\",\"tool_calls\":[{\"id\":\"toolu_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"arguments\":{\"city\":\"Paris\"}}}]},{\"role\":\"tool\",\"tool_call_id\":\"toolu_1\",\"content\":\"sunny\"},"
        "{\"role\":\"user\",\"content\":\"Thanks\"}]";
    const char *chat_tools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
                             "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}},\"description\":"
                             "\"Weather of a city\"}}],\"max_tokens\":6,\"temperature\":0";
    chat_ref ref, bare;
    chat(chat_msgs, chat_tools, &ref);
    chat("[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}]", "\"max_tokens\":1", &bare);
    const char *msgs =
        "\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\",\"content\":[{"
        "\"type\":\"text\",\"text\":\"Let me check.\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":"
        "\"get_weather\",\"input\":{\"city\":\"Paris\"}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
        "\"tool_use_id\":\"toolu_1\",\"content\":[{\"type\":\"text\",\"text\":\"sunny\"}]},{\"type\":\"text\",\"text\":"
        "\"Thanks\"}]}],\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather of a city\",\"input_schema\":{"
        "\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}],\"tool_choice\":{\"type\":\"auto\"}";
    char body[4096];
    snprintf(body, sizeof body, "{\"model\":\"m\",%s}", msgs);
    int status;
    json_t *j = post("/v1/messages/count_tokens", XKEY, body, &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK_EQ_INT(num(j, "input_tokens"), ref.prompt);
    CHECK(ref.prompt > bare.prompt + 20); /* the tools and the calls are in the prompt */
    json_decref(j);
    /* a server tool we cannot run is left out (logged), not refused */
    snprintf(body, sizeof body, "{\"model\":\"m\",%s}", msgs);
    char *at = strstr(body, "\"tools\":[");
    CHECK(at != NULL);
    if (at) {
        char with[4096];
        snprintf(with, sizeof with, "%.*s\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"web_search\"},%s",
                 (int)(at - body), body, at + 9);
        j = post("/v1/messages/count_tokens", XKEY, with, &status, NULL);
        CHECK_EQ_INT(status, 200);
        CHECK_EQ_INT(num(j, "input_tokens"), ref.prompt);
        json_decref(j);
    }
    snprintf(body, sizeof body, "{\"model\":\"m\",\"max_tokens\":6,\"temperature\":0,%s}", msgs);
    j = post("/v1/messages", XKEY, body, &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK(!strcmp(str(j, "content.0.text"), ref.text));
    json_decref(j);
}

/* Messages' thinking and Responses' reasoning.effort reach the template's
 * switch (Qwen3's enable_thinking writes an empty think block into the
 * generation prompt when off). */
static void test_thinking_switch(void) {
    chat_ref on, off;
    chat("[{\"role\":\"user\",\"content\":\"Hi\"}]", "\"max_tokens\":1", &on);
    chat("[{\"role\":\"user\",\"content\":\"Hi\"}]", "\"max_tokens\":1,\"enable_thinking\":false", &off);
    CHECK(off.prompt > on.prompt);
    int status;
    json_t *j = post("/v1/messages/count_tokens", XKEY,
                     "{\"thinking\":{\"type\":\"disabled\"},\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
                     &status, NULL);
    CHECK_EQ_INT(num(j, "input_tokens"), off.prompt);
    json_decref(j);
    j = post("/v1/messages/count_tokens", XKEY,
             "{\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024},\"messages\":[{\"role\":\"user\","
             "\"content\":\"Hi\"}]}",
             &status, NULL);
    CHECK_EQ_INT(num(j, "input_tokens"), on.prompt);
    json_decref(j);
    j = post("/v1/messages", XKEY,
             "{\"max_tokens\":2,\"thinking\":{\"type\":\"sometimes\"},\"messages\":[{\"role\":\"user\","
             "\"content\":\"Hi\"}]}",
             &status, NULL);
    CHECK_EQ_INT(status, 400);
    json_decref(j);
    j = post("/v1/responses", XKEY, "{\"input\":\"Hi\",\"reasoning\":{\"effort\":\"none\"},\"max_output_tokens\":1}",
             &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK_EQ_INT(num(j, "usage.input_tokens"), off.prompt);
    CHECK(!strcmp(str(j, "reasoning.effort"), "none"));
    json_decref(j);
    j = post("/v1/responses", XKEY, "{\"input\":\"Hi\",\"reasoning\":{\"effort\":\"high\"},\"max_output_tokens\":1}",
             &status, NULL);
    CHECK_EQ_INT(num(j, "usage.input_tokens"), on.prompt);
    json_decref(j);
}

/* Forced calls (through the grammar) on random weights: Messages'
 * tool_choice any / tool and Responses' required / named function give a
 * call whose arguments follow the schema, whole and streamed, and the
 * loop goes on with its result. (The city is an enum: a random model's free string may not end
 * within the token limit.) */
#define WEATHER_SCHEMA                                                                                               \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"enum\":[\"Paris\",\"Oslo\"]},\"days\":" \
    "{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":[\"city\",\"days\"]}"

static void check_weather_args(json_t *a, const char *what) {
    json_t *days = json_object_get(a, "days");
    const char *city = json_string_value(json_object_get(a, "city"));
    CHECK_MSG(json_is_object(a) && city && (!strcmp(city, "Paris") || !strcmp(city, "Oslo")) && json_is_integer(days) &&
                  json_integer_value(days) >= 1 && json_integer_value(days) <= 7,
              "%s: arguments do not follow the schema", what);
}

static void test_forced_messages(void) {
    static const char *const choices[] = {"{\"type\":\"any\",\"disable_parallel_tool_use\":true}",
                                          "{\"type\":\"tool\",\"name\":\"get_weather\"}", "{\"type\":\"any\"}"};
    for (int k = 0; k < 3; k++) {
        char body[2048];
        snprintf(body, sizeof body,
                 "{\"model\":\"m\",\"max_tokens\":120,\"temperature\":0,\"tool_choice\":%s,\"tools\":[{\"name\":"
                 "\"get_time\",\"input_schema\":{\"type\":\"object\",\"properties\":{}}},{\"name\":\"get_weather\","
                 "\"input_schema\":" WEATHER_SCHEMA "}],\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}]}",
                 choices[k]);
        int status;
        json_t *m = post("/v1/messages", XKEY, body, &status, NULL);
        CHECK_MSG(status == 200, "%s: %d %s", choices[k], status, str(m, "error.message"));
        /* with parallel calls the limit may cut a further call: max_tokens then, even after complete ones */
        const char *want_stop = num(m, "usage.output_tokens") >= 120 ? "max_tokens" : "tool_use";
        CHECK_MSG(!strcmp(str(m, "stop_reason"), want_stop), "%s: stop_reason %s, want %s", choices[k],
                  str(m, "stop_reason"), want_stop);
        json_t *content = json_object_get(m, "content"), *use = NULL, *b;
        size_t i, n_use = 0;
        json_array_foreach(content, i, b) if (!strcmp(str(b, "type"), "tool_use") && !n_use++) use = b;
        CHECK_MSG(use != NULL, "%s: no tool_use block", choices[k]);
        if (k < 2) CHECK_EQ_INT(n_use, 1); /* one call: no parallel calls, or a named function */
        if (k == 1 || (use && !strcmp(str(use, "name"), "get_weather")))
            check_weather_args(json_object_get(use, "input"), choices[k]);
        if (k == 1) CHECK(use && !strcmp(str(use, "name"), "get_weather"));
        /* streamed: the same call */
        char *sbody = malloc(strlen(body) + 32);
        sprintf(sbody, "{\"stream\":true,%s", body + 1);
        char *raw = NULL;
        json_decref(post("/v1/messages", XKEY, sbody, &status, &raw));
        json_t *evs = sse_events(raw), *ev;
        char args[1024] = "", name[64] = "";
        long long block = -1; /* the first tool_use block's index */
        json_array_foreach(evs, i, ev) {
            if (!strcmp(str(ev, "data.content_block.type"), "tool_use") && block < 0) {
                snprintf(name, sizeof name, "%s", str(ev, "data.content_block.name"));
                block = num(ev, "data.index");
            }
            if (!strcmp(str(ev, "data.delta.type"), "input_json_delta") && num(ev, "data.index") == block)
                strncat(args, str(ev, "data.delta.partial_json"), sizeof args - strlen(args) - 1);
        }
        CHECK_MSG(use && !strcmp(name, str(use, "name")), "%s: streamed call %s", choices[k], name);
        json_t *sa = json_loads(args, 0, NULL);
        CHECK_MSG(use && json_equal(sa, json_object_get(use, "input")), "%s: streamed arguments %s", choices[k], args);
        json_decref(sa);
        json_decref(evs);
        free(raw);
        free(sbody);
        /* the loop goes on: the call and its result */
        if (use) {
            char *in = json_dumps(json_object_get(use, "input"), JSON_COMPACT);
            snprintf(body, sizeof body,
                     "{\"model\":\"m\",\"max_tokens\":4,\"tools\":[{\"name\":\"get_weather\",\"input_schema\":"
                     WEATHER_SCHEMA "}],\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":"
                     "\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"%s\",\"name\":\"%s\",\"input\":%s}]},"
                     "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"%s\",\"content\":"
                     "\"sunny\"}]}]}",
                     str(use, "id"), str(use, "name"), in, str(use, "id"));
            free(in);
            json_t *m2 = post("/v1/messages", XKEY, body, &status, NULL);
            CHECK_EQ_INT(status, 200);
            CHECK(num(m2, "usage.cache_read_input_tokens") > 0);
            json_decref(m2);
        }
        json_decref(m);
    }
}

static void test_forced_responses(void) {
    static const char *const choices[] = {"\"required\",\"parallel_tool_calls\":false",
                                          "{\"type\":\"function\",\"name\":\"get_weather\"}", "\"required\""};
    for (int k = 0; k < 3; k++) {
        char body[2048];
        snprintf(body, sizeof body,
                 "{\"max_output_tokens\":120,\"temperature\":0,\"tool_choice\":%s,\"tools\":[{\"type\":\"function\","
                 "\"name\":\"get_weather\",\"parameters\":" WEATHER_SCHEMA "}],\"input\":\"Weather?\"}",
                 choices[k]);
        int status;
        json_t *r = post("/v1/responses", XKEY, body, &status, NULL);
        CHECK_MSG(status == 200, "%s: %d %s", choices[k], status, str(r, "error.message"));
        json_t *out = json_object_get(r, "output"), *call = NULL, *it;
        size_t i, n_calls = 0;
        json_array_foreach(out, i, it) if (!strcmp(str(it, "type"), "function_call") && !n_calls++) call = it;
        CHECK_MSG(call && !strcmp(str(call, "name"), "get_weather"), "%s: no call", choices[k]);
        if (k < 2) {
            CHECK_EQ_INT(n_calls, 1);
            CHECK(!strcmp(str(r, "status"), "completed"));
        }
        json_t *a = call ? json_loads(str(call, "arguments"), 0, NULL) : NULL;
        check_weather_args(a, choices[k]);
        json_decref(a);
        /* streamed */
        char *sbody = malloc(strlen(body) + 32);
        sprintf(sbody, "{\"stream\":true,%s", body + 1);
        char *raw = NULL;
        json_decref(post("/v1/responses", XKEY, sbody, &status, &raw));
        json_t *evs = sse_events(raw), *ev;
        char args[1024] = "", first[64] = ""; /* the first function_call item's id */
        json_array_foreach(evs, i, ev) {
            if (!first[0] && !strcmp(str(ev, "event"), "response.output_item.added") &&
                !strcmp(str(ev, "data.item.type"), "function_call"))
                snprintf(first, sizeof first, "%s", str(ev, "data.item.id"));
            if (!strcmp(str(ev, "event"), "response.function_call_arguments.delta") &&
                !strcmp(str(ev, "data.item_id"), first))
                strncat(args, str(ev, "data.delta"), sizeof args - strlen(args) - 1);
        }
        CHECK_MSG(call && !strcmp(args, str(call, "arguments")), "%s: streamed %s vs %s", choices[k], args,
                  call ? str(call, "arguments") : "");
        json_decref(evs);
        free(raw);
        free(sbody);
        /* the next turn, by previous_response_id: the call's output */
        if (call) {
            snprintf(body, sizeof body,
                     "{\"previous_response_id\":\"%s\",\"max_output_tokens\":4,\"tools\":[{\"type\":\"function\","
                     "\"name\":\"get_weather\",\"parameters\":" WEATHER_SCHEMA "}],\"input\":[{\"type\":"
                     "\"function_call_output\",\"call_id\":\"%s\",\"output\":\"sunny\"}]}",
                     str(r, "id"), str(call, "call_id"));
            json_t *r2 = post("/v1/responses", XKEY, body, &status, NULL);
            CHECK_EQ_INT(status, 200);
            CHECK(num(r2, "usage.input_tokens_details.cached_tokens") >= num(r, "usage.input_tokens"));
            json_decref(r2);
        }
        json_decref(r);
    }
}

/* text.format json_schema: JSON that follows the schema (the grammar). */
static void test_text_format(void) {
    /* text.format json_schema */
    int status;
    json_t *r = post("/v1/responses", XKEY,
                     "{\"max_output_tokens\":120,\"temperature\":0,\"input\":\"Weather?\",\"text\":{\"format\":{\"type\":"
                     "\"json_schema\",\"name\":\"weather\",\"strict\":true,\"schema\":" WEATHER_SCHEMA "}}}",
                     &status, NULL);
    CHECK_MSG(status == 200, "json_schema: %d %s", status, str(r, "error.message"));
    json_t *a = output_text(r) ? json_loads(output_text(r), 0, NULL) : NULL;
    check_weather_args(a, "text.format json_schema");
    CHECK(!strcmp(str(r, "text.format.type"), "json_schema"));
    json_decref(a);
    json_decref(r);
}

/* A streaming client that hangs up: its request is cancelled, its state
 * freed (ASan), the server serves on. */
static bool hang_up(void *user, const char *data, size_t n) {
    (void)data;
    (void)n;
    return ++*(int *)user < 2;
}

static void test_hang_up(void) {
    static const char *const reqs[][2] = {
        {"/v1/messages", "{\"max_tokens\":400,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}"},
        {"/v1/responses", "{\"max_output_tokens\":400,\"stream\":true,\"input\":\"Hi\"}"},
        {"/v1/messages", "{\"max_tokens\":400,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}"},
    };
    for (int i = 0; i < 3; i++) {
        int calls = 0;
        rw_http_request rq = {.port = g_port, .method = "POST", .path = reqs[i][0], .headers = XKEY,
                              .body = reqs[i][1], .body_len = strlen(reqs[i][1]), .on_data = hang_up, .user = &calls,
                              .timeout_ms = i == 2 ? 300 : 0};
        rw_http_response r;
        rw_error err = {0};
        rw_http_do(&rq, &r, &err); /* a whole response hung up by the read timeout */
        rw_http_response_free(&r);
    }
    int status;
    json_decref(post("/v1/messages", XKEY, "{\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
                     &status, NULL));
    CHECK_EQ_INT(status, 200);
}

static void check_anthropic_error(json_t *j, const char *type) {
    CHECK(!strcmp(str(j, "type"), "error"));
    CHECK_MSG(!strcmp(str(j, "error.type"), type), "error type %s, want %s", str(j, "error.type"), type);
    CHECK(strlen(str(j, "error.message")) > 0);
}

static void test_auth_and_errors(void) {
    const char *ok = "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    int status;
    json_t *j = post("/v1/messages", NULL, ok, &status, NULL);
    CHECK_EQ_INT(status, 401);
    check_anthropic_error(j, "authentication_error");
    json_decref(j);
    j = post("/v1/messages", "x-api-key: wrong\r\n", ok, &status, NULL);
    CHECK_EQ_INT(status, 401);
    json_decref(j);
    j = post("/v1/responses", NULL, "{\"input\":\"hi\"}", &status, NULL);
    CHECK_EQ_INT(status, 401);
    CHECK(!strcmp(str(j, "error.code"), "invalid_api_key")); /* OpenAI's shape there */
    json_decref(j);
    j = post("/v1/chat/completions", XKEY, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1}",
             &status, NULL);
    CHECK_EQ_INT(status, 200); /* x-api-key works everywhere */
    json_decref(j);

    static const char *const bad[] = {
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", /* no max_tokens */
        "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"system\",\"content\":\"hi\"}]}",
        "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[]}",
        "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
        "\"source\":{}}]}]}",
        "{\"model\":\"m\",\"max_tokens\":1,\"temperature\":1.5,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\"}]}]}",
        "{\"model\":\"m\",\"max_tokens\":100000,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        "{\"model\":",
        "[1]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        j = post("/v1/messages", XKEY, bad[i], &status, NULL);
        CHECK_MSG(status == 400, "%s: %d", bad[i], status);
        check_anthropic_error(j, "invalid_request_error");
        json_decref(j);
    }
    static const char *const bad_resp[] = {
        "{\"input\":42}",
        "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\"}]}]}",
        "{\"input\":\"hi\",\"tools\":[{\"name\":\"f\"}]}",
        "{\"input\":[{\"type\":\"function_call\",\"name\":\"f\"}]}",
        "{\"input\":\"hi\",\"previous_response_id\":\"resp_nope\"}",
        "{\"input\":\"hi\",\"temperature\":3}",
        "{\"input\":[]}",
    };
    for (size_t i = 0; i < sizeof bad_resp / sizeof *bad_resp; i++) {
        j = post("/v1/responses", XKEY, bad_resp[i], &status, NULL);
        CHECK_MSG(status == 400, "%s: %d", bad_resp[i], status);
        CHECK(!strcmp(str(j, "error.type"), "invalid_request_error"));
        json_decref(j);
    }
}

/* ---- Responses ---- */

static const char *output_text(json_t *resp) {
    json_t *out = json_object_get(resp, "output"), *it;
    size_t i;
    json_array_foreach(out, i, it) if (!strcmp(str(it, "type"), "message")) return str(it, "content.0.text");
    return NULL;
}

static void test_responses(void) {
    chat_ref ref;
    chat(conv_chat, "\"max_tokens\":12,\"temperature\":0", &ref);
    int status;
    json_t *j = post("/v1/responses", XKEY,
                     "{\"model\":\"m\",\"instructions\":\"Be brief.\",\"input\":[{\"role\":\"user\",\"content\":[{"
                     "\"type\":\"input_text\",\"text\":\"Hello there\"}]}],\"max_output_tokens\":12,\"temperature\":0}",
                     &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK(!strcmp(str(j, "object"), "response") && !strncmp(str(j, "id"), "resp_", 5));
    const char *t = output_text(j);
    CHECK_MSG(t && !strcmp(t, ref.text), "responses '%s' vs chat '%s'", t ? t : "(none)", ref.text);
    const bool length = !strcmp(ref.finish, "length");
    CHECK(!strcmp(str(j, "status"), length ? "incomplete" : "completed"));
    if (length) CHECK(!strcmp(str(j, "incomplete_details.reason"), "max_output_tokens"));
    CHECK_EQ_INT(num(j, "usage.input_tokens"), ref.prompt);
    CHECK_EQ_INT(num(j, "usage.output_tokens"), ref.completion);
    CHECK(!strcmp(str(j, "instructions"), "Be brief."));
    json_decref(j);

    /* streamed */
    char *raw = NULL;
    json_decref(post("/v1/responses", XKEY,
                     "{\"instructions\":\"Be brief.\",\"input\":\"Hello there\",\"max_output_tokens\":12,"
                     "\"temperature\":0,\"stream\":true}",
                     &status, &raw));
    CHECK_EQ_INT(status, 200);
    json_t *evs = sse_events(raw);
    free(raw);
    static const char *const order[] = {"response.created", "response.in_progress", "response.output_item.added",
                                        "response.content_part.added"};
    char text[4096] = "";
    size_t i;
    json_t *ev;
    const size_t n = json_array_size(evs);
    CHECK(n >= 8);
    json_array_foreach(evs, i, ev) {
        const char *name = str(ev, "event"), *type = str(ev, "data.type");
        CHECK_MSG(!strcmp(name, type), "event %s carries data of type %s", name, type);
        CHECK_EQ_INT(num(ev, "data.sequence_number"), (long long)i);
        if (i < 4) CHECK_MSG(!strcmp(type, order[i]), "event %zu is %s, want %s", i, type, order[i]);
        else if (i + 4 < n) CHECK_MSG(!strcmp(type, "response.output_text.delta"), "event %zu: %s", i, type);
        if (!strcmp(type, "response.output_text.delta")) {
            strncat(text, str(ev, "data.delta"), sizeof text - strlen(text) - 1);
            CHECK_EQ_INT(num(ev, "data.output_index"), 0);
        }
    }
    CHECK_MSG(!strcmp(text, ref.text), "streamed '%s' vs chat '%s'", text, ref.text);
    static const char *const tail[] = {"response.output_text.done", "response.content_part.done",
                                       "response.output_item.done"};
    for (int k = 0; k < 3 && n >= 4; k++) CHECK(!strcmp(str(json_array_get(evs, n - 4 + (size_t)k), "event"), tail[k]));
    json_t *last = json_object_get(json_array_get(evs, n - 1), "data");
    CHECK(!strcmp(str(last, "type"), length ? "response.incomplete" : "response.completed"));
    t = output_text(json_object_get(last, "response"));
    CHECK(t && !strcmp(t, ref.text));
    CHECK(!strcmp(str(json_array_get(evs, n - 4), "data.text"), ref.text));
    CHECK(!strcmp(str(json_array_get(evs, 2), "data.item.id"), str(last, "response.output.0.id")));
    json_decref(evs);
}

/* previous_response_id: the next turn renders the whole conversation as
 * chat completions would, and the prefix cache serves part of it. */
static void test_previous_response(void) {
    int status;
    json_t *j1 = post("/v1/responses", XKEY,
                      "{\"instructions\":\"Be brief.\",\"input\":\"Hi\",\"max_output_tokens\":8,"
                      "\"temperature\":0}",
                      &status, NULL);
    CHECK_EQ_INT(status, 200);
    const char *t1 = output_text(j1);
    char id[64], body[4096];
    snprintf(id, sizeof id, "%s", str(j1, "id"));
    snprintf(body, sizeof body,
             "{\"instructions\":\"Be brief.\",\"previous_response_id\":\"%s\",\"input\":\"And now?\","
             "\"max_output_tokens\":8,\"temperature\":0}",
             id);
    json_t *j2 = post("/v1/responses", XKEY, body, &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK(!strcmp(str(j2, "previous_response_id"), id));
    /* The reference: /v1/completions on the prompt the rule gives: turn 1's
     * own tokens (prompt and generated, as stored), then the rest of the
     * whole conversation's text tokenized. Here turn 1's text does begin
     * the conversation's (the template writes its answer back as it came,
     * and the answer is whole UTF-8), so the splice happens. */
    int32_t *prev = NULL, *canon = NULL, *rest = NULL;
    size_t n_prev = 0, n_canon = 0, n_rest = 0, la = 0, lb = 0, len = 0;
    CHECK(rw_server__store_get(g_srv->store, id, NULL, NULL, &prev, &n_prev));
    CHECK_EQ_INT(n_prev, num(j1, "usage.input_tokens") + num(j1, "usage.output_tokens"));
    json_t *msgs = json_pack("[{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s}]", "role", "system", "content", "Be brief.",
                             "role", "user", "content", "Hi", "role", "assistant", "content", t1 ? t1 : "",
                             "role", "user", "content", "And now?");
    rw_chat_caps caps;
    rw_chat_template_caps(g_tmpl, &caps);
    rw_chat_prompt_opts po = {.messages = msgs, .add_generation_prompt = true, .enable_thinking = -1,
                              .bos_token = "<|endoftext|>", .eos_token = "<|im_end|>"};
    char *text = NULL, *a = NULL, *b = NULL;
    rw_error err = {0};
    CHECK(rw_chat_render_messages(g_tmpl, &caps, &po, &text, &len, &err) == RW_OK);
    CHECK(text && rw_tokenize(g_tok, text, len, true, true, &canon, &n_canon, &err) == RW_OK);
    CHECK(rw_detokenize(g_tok, prev, n_prev, true, &a, &la, &err) == RW_OK);
    CHECK(rw_detokenize(g_tok, canon, n_canon, true, &b, &lb, &err) == RW_OK);
    CHECK_MSG(a && b && la < lb && !memcmp(a, b, la), "turn 1's text does not begin turn 2's: '%s' / '%s'", a, b);
    if (a && b && la < lb) CHECK(rw_tokenize(g_tok, b + la, lb - la, false, true, &rest, &n_rest, &err) == RW_OK);
    int32_t *want = malloc((n_prev + n_rest + 1) * sizeof *want);
    if (prev) memcpy(want, prev, n_prev * sizeof *want);
    if (rest) memcpy(want + n_prev, rest, n_rest * sizeof *want);
    size_t cap = (n_prev + n_rest) * 8 + 128, off = 0;
    char *cbody = malloc(cap);
    off += (size_t)snprintf(cbody, cap, "{\"prompt\":[");
    for (size_t i = 0; i < n_prev + n_rest; i++) off += (size_t)snprintf(cbody + off, cap - off, "%s%d", i ? "," : "", want[i]);
    snprintf(cbody + off, cap - off, "],\"max_tokens\":8,\"temperature\":0}");
    json_t *c = post("/v1/completions", XKEY, cbody, &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK_EQ_INT(num(j2, "usage.input_tokens"), (long long)(n_prev + n_rest));
    CHECK_EQ_INT(num(c, "usage.prompt_tokens"), (long long)(n_prev + n_rest));
    const char *t2 = output_text(j2);
    CHECK_MSG(t2 && !strcmp(t2, str(c, "choices.0.text")), "turn 2 '%s' vs completions '%s'", t2 ? t2 : "",
              str(c, "choices.0.text"));
    /* all of turn 1 came from the cache but its last token (sampled, never fed to the model) */
    CHECK_MSG(num(j2, "usage.input_tokens_details.cached_tokens") >= (long long)n_prev - 1,
              "cached %lld of turn 2; turn 1 had %zu tokens", num(j2, "usage.input_tokens_details.cached_tokens"),
              n_prev);
    json_decref(c);
    free(cbody);
    free(want);
    free(a);
    free(b);
    free(text);
    free(prev);
    free(canon);
    free(rest);
    json_decref(msgs);

    /* GET returns the stored response */
    char path[128];
    snprintf(path, sizeof path, "/v1/responses/%s", id);
    json_t *g = NULL;
    CHECK_EQ_INT(get(path, &g), 200);
    CHECK(!strcmp(str(g, "id"), id));
    CHECK(!strcmp(output_text(g) ? output_text(g) : "-", t1 ? t1 : ""));
    json_decref(g);
    CHECK_EQ_INT(get("/v1/responses/resp_unknown", &g), 404);
    json_decref(g);

    /* a chain of three: the second's stored conversation holds the first */
    snprintf(body, sizeof body, "{\"previous_response_id\":\"%s\",\"input\":\"More?\",\"max_output_tokens\":2}",
             str(j2, "id"));
    json_t *j3 = post("/v1/responses", XKEY, body, &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK(num(j3, "usage.input_tokens") > num(j2, "usage.input_tokens"));
    json_decref(j3);

    /* store false: nothing to continue from */
    json_t *j4 = post("/v1/responses", XKEY, "{\"input\":\"x\",\"store\":false,\"max_output_tokens\":1}", &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK(json_is_false(json_object_get(j4, "store")));
    snprintf(body, sizeof body, "{\"previous_response_id\":\"%s\",\"input\":\"y\"}", str(j4, "id"));
    json_t *j5 = post("/v1/responses", XKEY, body, &status, NULL);
    CHECK_EQ_INT(status, 400);
    CHECK(!strcmp(str(j5, "error.param"), "previous_response_id"));
    json_decref(j4);
    json_decref(j5);
    json_decref(j1);
    json_decref(j2);
}

static int32_t *tokens_of(const char *text, size_t *n) {
    int32_t *ids = NULL;
    rw_error err = {0};
    CHECK(rw_tokenize(g_tok, text, strlen(text), false, true, &ids, n, &err) == RW_OK);
    return ids;
}

/* The next turn continues the previous turn's own tokens even where they
 * are not how the tokenizer would write its text: a stored turn whose
 * answer " to to" was sampled one character a token. */
static void test_splice(void) {
    size_t n1 = 0, n_sp = 0, n_t = 0, n_o = 0, n_canon = 0;
    int32_t *p1 = tokens_of("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", &n1);
    int32_t *sp = tokens_of(" ", &n_sp), *t = tokens_of("t", &n_t), *o = tokens_of("o", &n_o);
    int32_t *canon = tokens_of(" to to", &n_canon);
    CHECK(n_sp == 1 && n_t == 1 && n_o == 1 && n_canon < 6); /* else the case shows nothing */
    int32_t prev[256];
    size_t n_prev = 0;
    for (size_t i = 0; i < n1 && n_prev < 200; i++) prev[n_prev++] = p1[i];
    for (int k = 0; k < 2; k++) {
        prev[n_prev++] = sp[0];
        prev[n_prev++] = t[0];
        prev[n_prev++] = o[0];
    }
    json_t *conv = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "user", "content", "Hi", "role", "assistant", "content",
                             " to to");
    json_t *resp = json_pack("{s:s}", "id", "resp_spliced");
    rw_server__store_put(g_srv->store, "resp_spliced", conv, resp, prev, n_prev);
    int status;
    json_t *j = post("/v1/responses", XKEY,
                     "{\"previous_response_id\":\"resp_spliced\",\"input\":\"Next\",\"max_output_tokens\":4,"
                     "\"temperature\":0}",
                     &status, NULL);
    CHECK_EQ_INT(status, 200);
    size_t n_rest = 0;
    int32_t *rest = tokens_of("<|im_end|>\n<|im_start|>user\nNext<|im_end|>\n<|im_start|>assistant\n", &n_rest);
    CHECK_EQ_INT(num(j, "usage.input_tokens"), (long long)(n_prev + n_rest));
    /* the same prompt through /v1/completions gives the same text */
    char body[4096];
    size_t off = (size_t)snprintf(body, sizeof body, "{\"prompt\":[");
    for (size_t i = 0; i < n_prev + n_rest; i++)
        off += (size_t)snprintf(body + off, sizeof body - off, "%s%d", i ? "," : "", i < n_prev ? prev[i] : rest[i - n_prev]);
    snprintf(body + off, sizeof body - off, "],\"max_tokens\":4,\"temperature\":0}");
    json_t *c = post("/v1/completions", XKEY, body, &status, NULL);
    CHECK_EQ_INT(num(c, "usage.prompt_tokens"), (long long)(n_prev + n_rest));
    CHECK(output_text(j) && !strcmp(output_text(j), str(c, "choices.0.text")));
    json_decref(c);
    json_decref(j);
    json_decref(conv);
    json_decref(resp);
    free(p1);
    free(sp);
    free(t);
    free(o);
    free(canon);
    free(rest);
}

/* function_call / function_call_output items render as the chat tool_calls
 * and tool messages do. */
static void test_responses_tools(void) {
    chat_ref ref;
    chat("[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\",\"content\":\"\","
         "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
         "\"arguments\":{\"city\":\"Paris\"}}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny\"}]",
         "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
         "\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}],\"max_tokens\":6,\"temperature\":0",
         &ref);
    int status;
    json_t *j = post("/v1/responses", XKEY,
                     "{\"input\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"type\":\"function_call\","
                     "\"call_id\":\"call_1\",\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"},"
                     "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"sunny\"}],\"tools\":["
                     "{\"type\":\"web_search\"},{"
                     "\"type\":\"function\",\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
                     "\"properties\":{\"city\":{\"type\":\"string\"}}}}],\"tool_choice\":\"auto\","
                     "\"max_output_tokens\":6,\"temperature\":0}",
                     &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK_EQ_INT(num(j, "usage.input_tokens"), ref.prompt);
    const char *t = output_text(j);
    CHECK(t && !strcmp(t, ref.text));
    CHECK(!strcmp(str(j, "tools.1.name"), "get_weather")); /* the request's tools, echoed */
    json_decref(j);

    /* a custom (freeform) tool's call and output, and an item of a tool we do not have (left out) */
    chat("[{\"role\":\"user\",\"content\":\"Patch it\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{"
         "\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"apply_patch\",\"arguments\":{\"input\":"
         "\"*** Begin Patch\"}}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":\"done\"}]",
         "\"max_tokens\":1", &ref);
    j = post("/v1/responses", XKEY,
             "{\"input\":[{\"role\":\"user\",\"content\":\"Patch it\"},{\"type\":\"web_search_call\",\"id\":\"ws_1\","
             "\"status\":\"completed\"},{\"type\":\"custom_tool_call\",\"call_id\":\"call_2\",\"name\":\"apply_patch\","
             "\"input\":\"*** Begin Patch\"},{\"type\":\"custom_tool_call_output\",\"call_id\":\"call_2\",\"output\":"
             "\"done\"}],\"max_output_tokens\":1}",
             &status, NULL);
    CHECK_EQ_INT(status, 200);
    CHECK_EQ_INT(num(j, "usage.input_tokens"), ref.prompt);
    json_decref(j);
}

/* ---- the output side, on a text of our choosing ---- */

static const char *const gen_text = "<think>\nPlan.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": "
                                    "\"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>";

/* Engine events carrying text, piece bytes per event (0: all in one),
 * ending with the end-of-generation token, to job j (set up by a route's
 * finish); with sse, the stream's bytes are collected after every event,
 * as the SSE reader does. */

static void feed(rw_server__job *j, const rw_server__request *r, const char *text, size_t piece, char **sse, size_t *sse_len) {
    const size_t n = strlen(text);
    if (!piece) piece = n;
    int32_t tok = 1;
    for (size_t off = 0;; off += piece) {
        size_t len = off < n ? (n - off < piece ? n - off : piece) : 0;
        bool done = off + len >= n;
        int32_t eos = rw_tokenizer_eos(j->model->tok);
        rw_gen_event ev = {.text = text + (off < n ? off : n), .text_len = len, .tokens = done ? &eos : &tok,
                           .n_tokens = 1, .prompt_tokens = r->n_prompt, .completion_tokens = (int64_t)(off / piece + 1),
                           .done = done, .finish = done ? RW_FINISH_STOP : RW_FINISH_NONE};
        rw_server__job_on_event(&j->choice[0], &ev);
        if (sse) {
            while (j->sse_state != 2 && j->api_fill(j)) {
            }
            *sse = realloc(*sse, *sse_len + j->out_len + 1);
            memcpy(*sse + *sse_len, j->out, j->out_len);
            *sse_len += j->out_len;
            (*sse)[*sse_len] = 0;
            j->out_len = j->out_pos = 0;
        }
        if (done) break;
    }
}

/* The answer of a job set up by a route's finish: its stream's events, or
 * its whole body (api_body); frees the job. */
static json_t *collect(rw_server__job *j, const rw_server__request *r, const char *text, size_t piece, bool stream) {
    json_t *out = NULL;
    if (stream) {
        char *sse = NULL;
        size_t len = 0;
        feed(j, r, text, piece, &sse, &len);
        out = sse_events(sse);
        free(sse);
    } else {
        feed(j, r, text, piece, NULL, NULL);
        int status = 0;
        char *body = j->api_body(j, &status);
        CHECK_EQ_INT(status, 200);
        out = json_loads(body ? body : "", 0, NULL);
        free(body);
    }
    rw_server__job_free(j);
    return out;
}

static const char *const tool_req = "\"tools\":[{\"name\":\"get_weather\",\"input_schema\":{\"type\":\"object\","
                                    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}}}}]";

/* Messages: returns the answer (non-streaming body, or the stream's events). */
static json_t *messages_on(rw_server *s, const char *text, bool stream, size_t piece) {
    char body[2048];
    snprintf(body, sizeof body, "{\"model\":\"m\",\"max_tokens\":100,\"stream\":%s,%s,\"messages\":[{\"role\":"
             "\"user\",\"content\":\"Weather in Paris?\"}]}", stream ? "true" : "false", tool_req);
    json_t *o = json_loads(body, 0, NULL);
    rw_server__error e;
    json_t *chat = rw_server__messages_to_chat(s, o, false, &e);
    CHECK(chat != NULL);
    rw_server__request r;
    CHECK(rw_server__parse_chat_object(&s->models[0], chat, &r, &e));
    rw_server__job *j = rw_server__job_new(&s->models[0], &r);
    rw_server__request rr = {.n_prompt = r.n_prompt};
    rw_server__reply rep = rw_server__messages_finish(s, chat, &r, j);
    CHECK(rep.job == j && rep.sse == stream);
    json_t *out = collect(j, &rr, text, piece, stream);
    json_decref(chat);
    json_decref(o);
    return out;
}

static void check_args(const char *args) {
    json_t *a = json_loads(args, 0, NULL);
    CHECK_MSG(a && !strcmp(str(a, "city"), "Paris") && num(a, "days") == 2, "arguments %s", args);
    json_decref(a);
}

static void test_messages_output(rw_server *s) {
    json_t *m = messages_on(s, gen_text, false, 0);
    CHECK(!strcmp(str(m, "stop_reason"), "tool_use"));
    CHECK(!strcmp(str(m, "content.0.type"), "thinking") && strstr(str(m, "content.0.thinking"), "Plan."));
    CHECK(!strcmp(str(m, "content.1.type"), "text") && strstr(str(m, "content.1.text"), "Let me check."));
    CHECK(!strstr(str(m, "content.1.text"), "tool_call") && !strstr(str(m, "content.1.text"), "think>"));
    CHECK(!strcmp(str(m, "content.2.type"), "tool_use") && !strcmp(str(m, "content.2.name"), "get_weather"));
    CHECK(!strncmp(str(m, "content.2.id"), "toolu_", 6));
    json_t *input = json_object_get(json_array_get(json_object_get(m, "content"), 2), "input");
    CHECK(!strcmp(str(input, "city"), "Paris") && num(input, "days") == 2);
    CHECK_EQ_INT(json_array_size(json_object_get(m, "content")), 3);
    for (size_t piece = 1; piece <= 7; piece += 6) { /* one byte per event, and seven */
        json_t *evs = messages_on(s, gen_text, true, piece);
        char thinking[256] = "", text[256] = "", args[256] = "", types[64] = "";
        long long blocks = 0;
        size_t i;
        json_t *ev;
        json_array_foreach(evs, i, ev) {
            const char *type = str(ev, "data.type");
            CHECK(!strcmp(type, str(ev, "event")));
            if (!strcmp(type, "content_block_start")) {
                CHECK_EQ_INT(num(ev, "data.index"), blocks++);
                strncat(types, str(ev, "data.content_block.type"), sizeof types - strlen(types) - 2);
                strcat(types, ",");
                if (!strcmp(str(ev, "data.content_block.type"), "tool_use")) {
                    CHECK(!strcmp(str(ev, "data.content_block.name"), "get_weather"));
                    CHECK(!strncmp(str(ev, "data.content_block.id"), "toolu_", 6));
                }
            }
            if (!strcmp(str(ev, "data.delta.type"), "thinking_delta"))
                strncat(thinking, str(ev, "data.delta.thinking"), sizeof thinking - strlen(thinking) - 1);
            if (!strcmp(str(ev, "data.delta.type"), "text_delta"))
                strncat(text, str(ev, "data.delta.text"), sizeof text - strlen(text) - 1);
            if (!strcmp(str(ev, "data.delta.type"), "input_json_delta"))
                strncat(args, str(ev, "data.delta.partial_json"), sizeof args - strlen(args) - 1);
            if (!strcmp(type, "message_delta")) CHECK(!strcmp(str(ev, "data.delta.stop_reason"), "tool_use"));
        }
        CHECK_MSG(!strcmp(types, "thinking,text,tool_use,"), "blocks %s", types);
        CHECK_MSG(!strcmp(thinking, str(m, "content.0.thinking")), "'%s' vs '%s'", thinking, str(m, "content.0.thinking"));
        CHECK_MSG(!strcmp(text, str(m, "content.1.text")), "'%s' vs '%s'", text, str(m, "content.1.text"));
        check_args(args);
        CHECK(!strcmp(str(json_array_get(evs, json_array_size(evs) - 1), "event"), "message_stop"));
        json_decref(evs);
    }
    json_decref(m);
    /* a call that does not parse is text, never dropped */
    m = messages_on(s, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {bad}\n</tool_call>", false, 0);
    CHECK(!strcmp(str(m, "stop_reason"), "end_turn"));
    CHECK(strstr(str(m, "content.0.text"), "{bad}") != NULL);
    json_decref(m);
}

/* Responses: the answer (body or events). */
static json_t *responses_on(rw_server *s, const char *text, bool stream, size_t piece) {
    char body[2048];
    snprintf(body, sizeof body, "{\"stream\":%s,\"input\":\"Weather in Paris?\",\"tools\":[{\"type\":\"function\","
             "\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
             "\"string\"},\"days\":{\"type\":\"integer\"}}}}]}", stream ? "true" : "false");
    json_t *o = json_loads(body, 0, NULL), *conv = NULL;
    rw_server__error e;
    int32_t *prev = NULL;
    size_t n_prev = 0;
    json_t *chat = rw_server__responses_to_chat(s, o, &conv, &prev, &n_prev, &e);
    free(prev);
    CHECK(chat != NULL);
    rw_server__request r;
    CHECK(rw_server__parse_chat_object(&s->models[0], chat, &r, &e));
    rw_server__job *j = rw_server__job_new(&s->models[0], &r);
    rw_server__request rr = {.n_prompt = r.n_prompt};
    rw_server__reply rep = rw_server__responses_finish(s, o, chat, conv, &r, j, NULL);
    CHECK(rep.job == j && rep.sse == stream);
    json_t *out = collect(j, &rr, text, piece, stream);
    json_decref(chat);
    json_decref(o);
    return out;
}

static void test_responses_output(rw_server *s) {
    json_t *r = responses_on(s, gen_text, false, 0);
    CHECK(!strcmp(str(r, "status"), "completed"));
    CHECK_EQ_INT(json_array_size(json_object_get(r, "output")), 3);
    CHECK(!strcmp(str(r, "output.0.type"), "reasoning") && strstr(str(r, "output.0.summary.0.text"), "Plan."));
    CHECK(!strcmp(str(r, "output.1.type"), "message") && strstr(str(r, "output.1.content.0.text"), "Let me check."));
    CHECK(!strstr(str(r, "output.1.content.0.text"), "tool_call"));
    CHECK(!strcmp(str(r, "output.2.type"), "function_call") && !strcmp(str(r, "output.2.name"), "get_weather"));
    CHECK(!strncmp(str(r, "output.2.call_id"), "call_", 5) && !strncmp(str(r, "output.2.id"), "fc_", 3));
    check_args(str(r, "output.2.arguments"));

    /* the next turn: the stored conversation holds the call, its output joins it */
    char body[1024];
    snprintf(body, sizeof body, "{\"previous_response_id\":\"%s\",\"input\":[{\"type\":\"function_call_output\","
             "\"call_id\":\"%s\",\"output\":\"sunny\"}]}", str(r, "id"), str(r, "output.2.call_id"));
    json_t *o = json_loads(body, 0, NULL), *conv = NULL;
    rw_server__error e;
    int32_t *prev = NULL;
    size_t n_prev = 0;
    json_t *chat = rw_server__responses_to_chat(s, o, &conv, &prev, &n_prev, &e);
    free(prev);
    CHECK_MSG(chat != NULL, "%s", e.msg);
    json_t *msgs = json_object_get(chat, "messages");
    size_t n = json_array_size(msgs);
    CHECK_EQ_INT(n, 3);
    json_t *a = json_array_get(msgs, 1), *t = json_array_get(msgs, 2);
    CHECK(!strcmp(str(a, "role"), "assistant") && strstr(str(a, "content"), "Let me check."));
    CHECK(strstr(str(a, "reasoning_content"), "Plan.") != NULL);
    CHECK(!strcmp(str(a, "tool_calls.0.id"), str(r, "output.2.call_id")));
    CHECK(!strcmp(str(a, "tool_calls.0.function.name"), "get_weather"));
    CHECK(!strcmp(str(t, "role"), "tool") && !strcmp(str(t, "tool_call_id"), str(r, "output.2.call_id")));
    json_decref(conv);
    json_decref(chat);
    json_decref(o);

    for (size_t piece = 1; piece <= 7; piece += 6) {
        json_t *evs = responses_on(s, gen_text, true, piece);
        char args[256] = "", summary[256] = "", text[256] = "", added[96] = "";
        long long items = 0;
        size_t i;
        json_t *ev;
        json_array_foreach(evs, i, ev) {
            const char *type = str(ev, "data.type");
            CHECK(!strcmp(type, str(ev, "event")));
            CHECK_EQ_INT(num(ev, "data.sequence_number"), (long long)i);
            if (!strcmp(type, "response.output_item.added")) {
                CHECK_EQ_INT(num(ev, "data.output_index"), items++);
                strncat(added, str(ev, "data.item.type"), sizeof added - strlen(added) - 2);
                strcat(added, ",");
            }
            if (!strcmp(type, "response.function_call_arguments.delta"))
                strncat(args, str(ev, "data.delta"), sizeof args - strlen(args) - 1);
            if (!strcmp(type, "response.reasoning_summary_text.delta"))
                strncat(summary, str(ev, "data.delta"), sizeof summary - strlen(summary) - 1);
            if (!strcmp(type, "response.output_text.delta"))
                strncat(text, str(ev, "data.delta"), sizeof text - strlen(text) - 1);
            if (!strcmp(type, "response.function_call_arguments.done")) CHECK(!strcmp(str(ev, "data.arguments"), args));
        }
        CHECK_MSG(!strcmp(added, "reasoning,message,function_call,"), "items %s", added);
        check_args(args);
        CHECK(!strcmp(summary, str(r, "output.0.summary.0.text")));
        CHECK(!strcmp(text, str(r, "output.1.content.0.text")));
        json_t *last = json_array_get(evs, json_array_size(evs) - 1);
        CHECK(!strcmp(str(last, "event"), "response.completed"));
        CHECK(!strcmp(str(last, "data.response.output.2.arguments"), args));
        json_decref(evs);
    }
    json_decref(r);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_error err = {0};
    const char *path = rw_test_fixture_path("qwen3/qwen3-Q8_0.gguf");
    rw_gguf *gg = NULL;
    rw_model *m = NULL;
    rw_tokenizer *tok = NULL;
    rw_chat_template *tmpl = NULL;
    if (rw_gguf_open(path, &gg, &err) || rw_model_load(gg, &m, &err) || rw_tokenizer_load(gg, &tok, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    size_t len = 0;
    char *src = rw_test_read_file(rw_test_fixture_path("chat/templates/Qwen-Qwen3-0.6B.jinja"), &len);
    CHECK(src != NULL);
    CHECK(src && rw_chat_template_parse(src, len, &tmpl, &err) == RW_OK);
    free(src);
    rw_engine *e = NULL;
    rw_server *s = NULL;
    const rw_engine_config ec = {.n_threads = 2, .max_running = 4, .max_queued = 16, .n_ctx = 1024,
                                 .prefill_chunk = 64, .kv_type = RW_KV_F32, .cache_bytes = (size_t)64 << 20};
    CHECK(tmpl && rw_engine_new(m, tok, &ec, &e, &err) == RW_OK);
    const rw_server_config sc = {.model_id = "fixture", .api_key = KEY};
    CHECK(e && rw_server_start(e, tok, tmpl, "<|endoftext|>", "<|im_end|>", &sc, &s, &err) == RW_OK);
    if (s) {
        g_port = rw_server_port(s);
        g_srv = s;
        g_tok = tok;
        g_tmpl = tmpl;
        test_messages();
        test_stop_sequence();
        test_messages_tools();
        test_thinking_switch();
        test_auth_and_errors();
        test_responses();
        test_previous_response();
        test_splice();
        test_responses_tools();
        test_messages_output(s);
        test_responses_output(s);
        test_hang_up();
        test_forced_messages();
        test_forced_responses();
        test_text_format();
    }
    rw_server_stop(s);
    rw_engine_free(e);
    rw_chat_template_free(tmpl);
    rw_tokenizer_free(tok);
    rw_model_free(m);
    rw_gguf_close(gg);
    return rw_test_done();
}
