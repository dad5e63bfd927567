/* test_chat_history.c - every fixture chat template renders a multi-turn
 * tool conversation shaped exactly as the openai client sends it (assistant
 * content null, arguments as a JSON string, tool results, developer role,
 * content parts), through rw_chat_render_messages; the normalized messages
 * are what templates expect; chat_template_kwargs and reasoning_effort reach
 * the template. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "chat/history.h"
#include "harness.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather of a city\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]";

/* As the openai npm client sends a two-turn tool loop (plus a developer
 * message and content parts, which it also sends). */
static const char *CONV =
    "[{\"role\":\"developer\",\"content\":\"You are terse.\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Weather in Paris \"},{\"type\":\"text\","
    "\"text\":\"and Rome?\"}]},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_Ab3xYz01qq\",\"type\":\"function\","
    "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},{\"id\":"
    "\"call_Zz9\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
    "\"{\\\"city\\\":\\\"Rome\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_Ab3xYz01qq\",\"content\":\"{\\\"temp_c\\\":21}\"},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_Zz9\",\"content\":\"{\\\"temp_c\\\":25}\"},"
    "{\"role\":\"assistant\",\"content\":\"Paris 21 C, Rome 25 C.\"},"
    "{\"role\":\"user\",\"content\":\"And London?\"}]";

/* Templates that render no tool calls in their output at all: they still
 * must not fail, but are not required to show the arguments. */
static bool shows_calls(const char *name) {
    return !strstr(name, "gemma") && !strstr(name, "Phi-3.5") && !strstr(name, "LFM2") && !strstr(name, "SmolLM3");
}

static void render_one(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n;
    char *src = rw_test_read_file(path, &n);
    CHECK(src);
    if (!src) return;
    rw_chat_template *t = NULL;
    rw_error err = {0};
    CHECK_MSG(!rw_chat_template_parse(src, n, &t, &err), "%s: %s", name, err.msg);
    if (!t) {
        free(src);
        return;
    }
    rw_chat_caps caps;
    rw_chat_template_caps(t, &caps);
    json_error_t je;
    json_t *msgs = json_loads(CONV, 0, &je), *tools = json_loads(TOOLS, 0, &je);
    CHECK(msgs && tools);
    for (int gen = 0; gen < 2; gen++) {
        rw_chat_prompt_opts o = {.messages = msgs,
                                 .tools = tools,
                                 .add_generation_prompt = gen,
                                 .enable_thinking = -1,
                                 .bos_token = "<s>",
                                 .eos_token = "</s>"};
        char *out = NULL;
        size_t len = 0;
        rw_status st = rw_chat_render_messages(t, &caps, &o, &out, &len, &err);
        CHECK_MSG(!st, "%s: %s", name, err.msg);
        if (!st) {
            CHECK_MSG(strstr(out, "And London?") && strstr(out, "Paris 21 C") && strstr(out, "and Rome?"),
                      "%s: a turn is missing", name);
            CHECK_MSG(strstr(out, "temp_c") && strstr(out, "25"), "%s: tool results missing", name);
            CHECK_MSG(strstr(out, "You are terse."), "%s: the developer message is missing", name);
            if (shows_calls(name))
                CHECK_MSG(strstr(out, "Rome") && strstr(out, "get_weather") && !strstr(out, "{\\\"city"),
                          "%s: calls missing or arguments double-encoded:\n%s", name, out);
            CHECK_MSG(!strstr(out, "None"), "%s: a null rendered as None:\n%s", name, out);
        }
        free(out);
    }
    json_decref(msgs);
    json_decref(tools);
    rw_chat_template_free(t);
    free(src);
}

static void test_all_templates(void) {
    const char *dir = rw_test_fixture_path("chat/templates");
    DIR *d = opendir(dir);
    if (!d) rw_test_skip("no chat template fixtures");
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".jinja")) continue;
        render_one(dir, e->d_name);
        count++;
    }
    closedir(d);
    CHECK(count >= 15);
}

static void test_normalize(void) {
    json_error_t je;
    json_t *msgs = json_loads(CONV, 0, &je), *out = NULL;
    rw_error err = {0};
    CHECK(!rw_chat_normalize_messages(msgs, NULL, &out, &err));
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(out, 0), "role")), "system"));
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(out, 1), "content")), "Weather in Paris and Rome?"));
    json_t *a = json_array_get(out, 2);
    CHECK(!strcmp(json_string_value(json_object_get(a, "content")), ""));
    json_t *c0 = json_array_get(json_object_get(a, "tool_calls"), 0);
    json_t *args = json_object_get(json_object_get(c0, "function"), "arguments");
    CHECK(json_is_object(args) && !strcmp(json_string_value(json_object_get(args, "city")), "Paris"));
    CHECK(json_is_object(json_object_get(c0, "arguments")));
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(out, 4), "name")), "get_weather"));
    json_decref(out);
    /* Mistral's ids: 9 alphanumerics, a call and its result mapped alike */
    rw_chat_caps caps = {.tool_ids_9 = true};
    CHECK(!rw_chat_normalize_messages(msgs, &caps, &out, &err));
    const char *id = json_string_value(json_object_get(
        json_array_get(json_object_get(json_array_get(out, 2), "tool_calls"), 1), "id"));
    CHECK(id && strlen(id) == 9);
    CHECK(id && !strcmp(id, json_string_value(json_object_get(json_array_get(out, 4), "tool_call_id"))));
    json_decref(out);
    json_decref(msgs);
    /* refusals name the field */
    json_t *badm = json_loads("[{\"role\":\"wizard\",\"content\":\"x\"}]", 0, &je);
    CHECK(rw_chat_normalize_messages(badm, NULL, &out, &err) == RW_ERR_INVALID_ARG && strstr(err.msg, "messages.[0]"));
    json_decref(badm);
    badm = json_loads("[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]", 0, &je);
    CHECK(rw_chat_normalize_messages(badm, NULL, &out, &err) == RW_ERR_INVALID_ARG);
    json_decref(badm);
    /* reasoning sent back as "reasoning" reaches Qwen3's reasoning_content */
    json_t *rm = json_loads("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"a\","
                            "\"reasoning\":\"because\"}]",
                            0, &je);
    CHECK(!rw_chat_normalize_messages(rm, NULL, &out, &err));
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(out, 1), "reasoning_content")), "because"));
    json_decref(out);
    json_decref(rm);
}

/* kwargs and reasoning_effort reach the template as variables. */
static void test_kwargs(void) {
    const char *src = "{{ messages[0].content }}|{{ enable_thinking }}|{{ custom }}|{{ reasoning_effort }}";
    rw_chat_template *t;
    rw_error err = {0};
    CHECK(!rw_chat_template_parse(src, strlen(src), &t, &err));
    rw_chat_caps caps;
    rw_chat_detect_caps(src, strlen(src), &caps);
    CHECK(caps.reads_enable_thinking && caps.reads_reasoning_effort);
    json_error_t je;
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"hi\"}]", 0, &je);
    json_t *kw = json_loads("{\"custom\":\"yes\",\"enable_thinking\":false}", 0, &je);
    rw_chat_prompt_opts o = {.messages = msgs, .kwargs = kw, .enable_thinking = 1, .reasoning_effort = "high"};
    char *out;
    size_t len;
    CHECK(!rw_chat_render_messages(t, &caps, &o, &out, &len, &err));
    CHECK_MSG(!strcmp(out, "hi|False|yes|high"), "%s", out);
    free(out);
    o = (rw_chat_prompt_opts){.messages = msgs, .enable_thinking = -1, .reasoning_effort = "none"};
    CHECK(!rw_chat_render_messages(t, &caps, &o, &out, &len, &err));
    CHECK_MSG(!strcmp(out, "hi|False||none"), "%s", out);
    free(out);
    json_t *notobj = json_loads("[1]", 0, &je);
    o.kwargs = notobj;
    CHECK(rw_chat_render_messages(t, &caps, &o, &out, &len, &err) == RW_ERR_INVALID_ARG);
    json_decref(notobj);
    json_decref(kw);
    json_decref(msgs);
    rw_chat_template_free(t);
}

int main(void) {
    test_normalize();
    test_kwargs();
    test_all_templates();
    return rw_test_done();
}
