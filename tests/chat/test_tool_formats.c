/* test_tool_formats.c - the call formats of DeepSeek R1/V3, Nemotron Nano v2,
 * LFM2, Mistral and Llama 3.x's built-in tools (chat/output.h): each
 * detected from its real template, parsed whole and fed a byte at a time
 * (with and without streamed arguments) to the same calls and content, a
 * call cut by the token limit never reaching the content, max_calls
 * (parallel_tool_calls false) keeping only the first call. Cases written
 * from each model's template and card. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/output.h"
#include "harness.h"

typedef struct {
    char content[4096], reasoning[4096];
    int n_calls, n_args_events, open;
    char names[8][64], args[8][1024];
    bool bad;
} seen;

static void cat(char *dst, size_t cap, const char *s, size_t n) {
    size_t l = strlen(dst);
    if (l + n < cap) {
        memcpy(dst + l, s, n);
        dst[l + n] = 0;
    }
}

static rw_status on_ev(void *user, const rw_chat_event *ev) {
    seen *s = user;
    switch (ev->kind) {
    case RW_CHAT_EV_CONTENT: cat(s->content, sizeof s->content, ev->text, ev->len); break;
    case RW_CHAT_EV_REASONING: cat(s->reasoning, sizeof s->reasoning, ev->text, ev->len); break;
    case RW_CHAT_EV_CALL_BEGIN:
        if (s->open != -1 || ev->index != s->n_calls || s->n_calls >= 8) s->bad = true;
        else {
            snprintf(s->names[s->n_calls], 64, "%s", ev->name);
            s->open = s->n_calls++;
        }
        break;
    case RW_CHAT_EV_CALL_ARGS:
        if (s->open != ev->index) s->bad = true;
        else cat(s->args[ev->index], 1024, ev->text, ev->len);
        s->n_args_events++;
        break;
    case RW_CHAT_EV_CALL_END:
        if (s->open != ev->index) s->bad = true;
        s->open = -1;
        break;
    }
    return RW_OK;
}

typedef struct {
    rw_tool_format fmt;
    bool reasoning, in_reasoning, cut;
    int max_calls;
    const char *tools;
} how;

static seen run(const how *h, const char *text, size_t piece, bool stream) {
    rw_chat_output_opts o = {.tool_format = h->fmt,
                             .reasoning = h->reasoning ? RW_REASONING_DEEPSEEK : RW_REASONING_NONE,
                             .in_reasoning = h->in_reasoning,
                             .tools_json = h->tools,
                             .id_seed = 7,
                             .stream_args = stream,
                             .cut = h->cut,
                             .max_calls = h->max_calls};
    seen s = {.open = -1};
    rw_chat_output *p = NULL;
    rw_error err = {0};
    CHECK(rw_chat_output_new(&o, &p, &err) == RW_OK);
    for (size_t i = 0, n = strlen(text); p && i < n; i += piece)
        CHECK(rw_chat_output_feed(p, text + i, n - i < piece ? n - i : piece, on_ev, &s, &err) == RW_OK);
    if (p) CHECK(rw_chat_output_finish(p, on_ev, &s, &err) == RW_OK);
    if (p && h->max_calls) CHECK(rw_chat_output_calls_done(p) == (s.n_calls >= h->max_calls));
    rw_chat_output_free(p);
    if (s.open != -1) s.bad = true;
    return s;
}

static bool same_json(const char *a, const char *b) {
    json_t *x = json_loads(a, 0, NULL), *y = json_loads(b, 0, NULL);
    bool eq = x && y && json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return eq;
}

/* calls: "name|{args}" each, NULL-terminated. Whole, by 1, 3 and 1000
 * bytes, with and without streamed arguments: the same result, whose
 * content never holds markup. */
static void check(const how *h, const char *text, const char *content, const char *const *calls,
                  const char *const *markup) {
    int want = 0;
    while (calls && calls[want]) want++;
    static const size_t pieces[] = {100000, 1, 3, 1000};
    for (int st = 0; st < 2; st++)
        for (int k = 0; k < 4; k++) {
            seen s = run(h, text, pieces[k], st);
            CHECK_MSG(!s.bad, "%s: events out of order", text);
            CHECK_MSG(!strcmp(s.content, content), "%s (%zu, stream %d): content [%s], want [%s]", text, pieces[k], st,
                      s.content, content);
            /* streamed, a call cut after its begin is closed with what it had (its arguments well-formed) */
            CHECK_MSG(s.n_calls == want ||
                          (h->cut && st && s.n_calls == want + 1 && same_json(s.args[want], s.args[want])),
                      "%s (%zu, stream %d): %d calls, want %d", text, pieces[k], st, s.n_calls, want);
            for (int i = 0; i < want && i < s.n_calls; i++) {
                const char *bar = strchr(calls[i], '|');
                CHECK_MSG(strlen(s.names[i]) == (size_t)(bar - calls[i]) &&
                              !strncmp(s.names[i], calls[i], (size_t)(bar - calls[i])) && same_json(s.args[i], bar + 1),
                          "%s (%zu, stream %d): call %d %s(%s), want %s", text, pieces[k], st, i, s.names[i], s.args[i],
                          calls[i]);
            }
            for (int m = 0; markup && markup[m]; m++)
                CHECK_MSG(!strstr(s.content, markup[m]), "%s: markup %s in content", text, markup[m]);
        }
}

/* the markers as DeepSeek's template writes them (not the parser's own macros) */
#define DS_CALLS     "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"
#define DS_CALL      "<｜tool▁call▁begin｜>"
#define DS_END       "<｜tool▁call▁end｜>"
#define DS_SEP       "<｜tool▁sep｜>"

static const char *const DS_MARKUP[] = {"tool▁", "```", NULL};

static void test_deepseek(void) {
    how h = {.fmt = RW_TOOL_FMT_DEEPSEEK, .reasoning = true, .in_reasoning = true};
    /* R1: reasoning (the prompt opened <think>), then two calls as its template writes them */
    const char *r1 = "The user wants weather.\n</think>\n\n" DS_CALLS DS_CALL "function" DS_SEP
                     "get_weather\n```json\n{\"city\": \"Paris\", \"days\": 2}\n```" DS_END "\n" DS_CALL
                     "function" DS_SEP "search\n```json\n{\"q\": \"a \\\"b\\\"\"}\n```" DS_END DS_CALLS_END;
    const char *const two[] = {"get_weather|{\"city\":\"Paris\",\"days\":2}", "search|{\"q\":\"a \\\"b\\\"\"}", NULL};
    check(&h, r1, "", two, DS_MARKUP);
    seen s = run(&h, r1, 1, false);
    CHECK_MSG(!strcmp(s.reasoning, "The user wants weather."), "reasoning [%s]", s.reasoning);
    /* text before; V3.1's form (name before the separator, bare JSON) */
    how plain = {.fmt = RW_TOOL_FMT_DEEPSEEK};
    check(&plain, "Let me look.\n" DS_CALLS DS_CALL "get_time" DS_SEP "{\"tz\":\"UTC\"}" DS_END DS_CALLS_END,
          "Let me look.", (const char *const[]){"get_time|{\"tz\":\"UTC\"}", NULL}, DS_MARKUP);
    /* a call without the list's marker; the list's end missing at the end of the text */
    check(&plain, DS_CALL "function" DS_SEP "f\n```json\n{}\n```" DS_END, "", (const char *const[]){"f|{}", NULL},
          DS_MARKUP);
    check(&plain, DS_CALLS DS_CALL "function" DS_SEP "f\n```json\n{\"a\":[1,2]}\n```" DS_END, "",
          (const char *const[]){"f|{\"a\":[1,2]}", NULL}, DS_MARKUP);
    /* arguments the template quoted once more (a JSON string holding the object) */
    check(&plain, DS_CALLS DS_CALL "function" DS_SEP "f\n```json\n\"{\\\"a\\\": 1}\"\n```" DS_END DS_CALLS_END, "",
          (const char *const[]){"f|{\"a\":1}", NULL}, DS_MARKUP);
    /* not JSON: the text stays content */
    check(&plain, "x " DS_CALL "function" DS_SEP "f\n```json\n[oops]\n```" DS_END,
          "x " DS_CALL "function" DS_SEP "f\n```json\n[oops]\n```" DS_END, NULL, NULL);
    /* cut by the token limit: the complete call stands, the cut one is dropped, nothing reaches content */
    how cut = {.fmt = RW_TOOL_FMT_DEEPSEEK, .cut = true};
    const char *cut_text = "Sure." DS_CALLS DS_CALL "function" DS_SEP "f\n```json\n{\"a\":1}\n```" DS_END "\n" DS_CALL
                           "function" DS_SEP "g\n```json\n{\"b\":";
    check(&cut, cut_text, "Sure.", (const char *const[]){"f|{\"a\":1}", NULL}, DS_MARKUP);
    for (size_t n = 1; n < strlen(cut_text); n++) { /* cut at every byte */
        char *t = strndup(cut_text, n);
        seen c = run(&cut, t, 1, true);
        CHECK_MSG(!strstr(c.content, "<｜") && !strstr(c.content, "```") && strlen(c.content) <= 5,
                  "cut at %zu: content [%s]", n, c.content);
        free(t);
    }
    /* cut inside a marker's character: the engine ends the text with U+FFFD for its bytes */
    check(&cut, "Ok <｜tool▁calls\xef\xbf\xbd", "Ok", NULL, DS_MARKUP);
    check(&cut, "Ok <\xef\xbf\xbd", "Ok", NULL, DS_MARKUP);
    check(&plain, "Ok \xef\xbf\xbd", "Ok \xef\xbf\xbd", NULL, NULL); /* not cut: the text as it is */
    /* each call of the list goes out when its end is seen, not at the list's end */
    {
        rw_chat_output_opts o = {.tool_format = RW_TOOL_FMT_DEEPSEEK, .max_calls = 1};
        rw_chat_output *p = NULL;
        rw_error err = {0};
        seen e = {.open = -1};
        const char *first = DS_CALLS DS_CALL "function" DS_SEP "f\n```json\n{}\n```" DS_END "\n" DS_CALL "func";
        CHECK(!rw_chat_output_new(&o, &p, &err) && !rw_chat_output_feed(p, first, strlen(first), on_ev, &e, &err));
        CHECK_MSG(e.n_calls == 1 && p && rw_chat_output_calls_done(p), "%d calls before the list's end", e.n_calls);
        rw_chat_output_free(p);
    }
    /* max_calls 1: the second call and what follows are dropped */
    how one = {.fmt = RW_TOOL_FMT_DEEPSEEK, .max_calls = 1};
    check(&one, r1 + strlen("The user wants weather.\n</think>\n\n"), "", (const char *const[]){two[0], NULL},
          DS_MARKUP);
}

static void test_nemotron(void) {
    how h = {.fmt = RW_TOOL_FMT_NEMOTRON, .reasoning = true, .in_reasoning = true};
    static const char *const mk[] = {"<TOOLCALL>", "</TOOLCALL>", NULL};
    check(&h,
          "Need the weather.</think>\n<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
          "{\"name\": \"search\", \"arguments\": {\"q\": \"x\", \"n\": 3}}]</TOOLCALL>",
          "", (const char *const[]){"get_weather|{\"city\":\"Oslo\"}", "search|{\"q\":\"x\",\"n\":3}", NULL}, mk);
    how plain = {.fmt = RW_TOOL_FMT_NEMOTRON};
    /* text before, arguments as a JSON string (the template's instructions show them so) */
    check(&plain, "Checking.\n<TOOLCALL>[{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": true}\"}]</TOOLCALL>",
          "Checking.", (const char *const[]){"f|{\"a\":true}", NULL}, mk);
    check(&plain, "No tools needed: 1 < 2.", "No tools needed: 1 < 2.", NULL, mk);
    how cut = {.fmt = RW_TOOL_FMT_NEMOTRON, .cut = true};
    check(&cut, "Hi <TOOLCALL>[{\"name\": \"f\", \"arguments\": {\"a\"", "Hi", NULL, mk);
    check(&cut, "Hi <TOOLC", "Hi", NULL, mk);
}

static void test_lfm2(void) {
    how h = {.fmt = RW_TOOL_FMT_LFM2};
    static const char *const mk[] = {"<|tool_call_start|>", "<|tool_call_end|>", NULL};
    check(&h,
          "<|tool_call_start|>[get_weather(city=\"Paris\", days=3, metric=True, note=None), "
          "search(q='it\\'s', tags=[1, 2.5, \"x\"], opts={'k': False})]<|tool_call_end|>Checking both.",
          "Checking both.",
          (const char *const[]){"get_weather|{\"city\":\"Paris\",\"days\":3,\"metric\":true,\"note\":null}",
                                "search|{\"q\":\"it's\",\"tags\":[1,2.5,\"x\"],\"opts\":{\"k\":false}}", NULL},
          mk);
    check(&h, "Sure.<|tool_call_start|>[ping()]<|tool_call_end|>", "Sure.", (const char *const[]){"ping|{}", NULL}, mk);
    /* the JSON form inside the markers */
    check(&h, "<|tool_call_start|>[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]<|tool_call_end|>", "",
          (const char *const[]){"f|{\"a\":1}", NULL}, mk);
    /* not a call: content as written */
    check(&h, "<|tool_call_start|>[f(a=]<|tool_call_end|>", "<|tool_call_start|>[f(a=]<|tool_call_end|>", NULL, NULL);
    how cut = {.fmt = RW_TOOL_FMT_LFM2, .cut = true};
    check(&cut, "Ok <|tool_call_start|>[f(a=\"x", "Ok", NULL, mk);
    how think = {.fmt = RW_TOOL_FMT_LFM2, .reasoning = true};
    check(&think, "<think>plan</think>\n<|tool_call_start|>[f(a=1)]<|tool_call_end|>", "",
          (const char *const[]){"f|{\"a\":1}", NULL}, mk);
}

static const char *BUILTIN_TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"brave_search\",\"parameters\":{\"type\":\"object\"}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"code_interpreter\",\"parameters\":{\"type\":\"object\"}}}]";

static void test_llama_builtin(void) {
    how h = {.fmt = RW_TOOL_FMT_LLAMA3, .tools = BUILTIN_TOOLS};
    static const char *const mk[] = {"<|python_tag|>", NULL};
    check(&h, "<|python_tag|>brave_search.call(query=\"weather in Menlo Park\")", "",
          (const char *const[]){"brave_search|{\"query\":\"weather in Menlo Park\"}", NULL}, mk);
    check(&h, "<|python_tag|>wolfram_alpha.call(query=\"solve x^2 = 4\")", "",
          (const char *const[]){"wolfram_alpha|{\"query\":\"solve x^2 = 4\"}", NULL}, mk);
    /* code: a call of the code tool the request names */
    check(&h, "<|python_tag|>import math\nprint(math.sqrt(2))\n", "",
          (const char *const[]){"code_interpreter|{\"code\":\"import math\\nprint(math.sqrt(2))\"}", NULL}, mk);
    how no_tools = {.fmt = RW_TOOL_FMT_LLAMA3};
    check(&no_tools, "Here:<|python_tag|>print(1)",
          "Here:", (const char *const[]){"python|{\"code\":\"print(1)\"}", NULL}, mk);
    /* JSON after the tag is still a JSON call */
    check(&h, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}", "",
          (const char *const[]){"f|{\"a\":1}", NULL}, mk);
    how cut = {.fmt = RW_TOOL_FMT_LLAMA3, .cut = true};
    check(&cut, "<|python_tag|>brave_search.call(query=\"wea", "", NULL, mk);
}

static void test_mistral(void) {
    how h = {.fmt = RW_TOOL_FMT_MISTRAL};
    static const char *const mk[] = {"[TOOL_CALLS]", NULL};
    const char *const two[] = {"get_weather|{\"city\":\"Rome\"}", "search|{\"q\":\"x\"}", NULL};
    check(&h,
          "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}, {\"name\": \"search\", "
          "\"arguments\": {\"q\": \"x\"}}]",
          "", two, mk);
    /* the marker is a control token: without it, the list alone */
    check(&h,
          "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}, {\"name\": \"search\", \"arguments\": "
          "{\"q\": \"x\"}}]",
          "", two, mk);
    check(&h, "[1, 2, 3]", "[1, 2, 3]", NULL, NULL);
    /* the newer form: [TOOL_CALLS]NAME[ARGS]{...}, one marker per call */
    check(&h, "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]search[ARGS]{\"q\": \"x\"}", "Sure.",
          two, mk);
    check(&h, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}\nDone.", "Done.", (const char *const[]){two[0], NULL},
          mk);
    check(&h, "[TOOL_CALLS]not a call", "[TOOL_CALLS]not a call", NULL, NULL);
    check(&h, "[TOOL_CALLS]f[ARGS]nope", "[TOOL_CALLS]f[ARGS]nope", NULL, NULL);
    how cut = {.fmt = RW_TOOL_FMT_MISTRAL, .cut = true};
    check(&cut, "Ok[TOOL_CALLS]get_weather[ARGS]{\"ci", "Ok", NULL, mk);
    check(&cut, "Ok[TOOL_CALLS]get_wea", "Ok", NULL, mk);
    how one = {.fmt = RW_TOOL_FMT_MISTRAL, .max_calls = 1};
    check(&one,
          "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}, {\"name\": \"search\", "
          "\"arguments\": {\"q\": \"x\"}}]",
          "", (const char *const[]){two[0], NULL}, mk);
}

/* Llama 3's, Mistral's, Nemotron's and DeepSeek's JSON arguments go out in pieces as they come when streamed. */
static void test_streamed_pieces(void) {
    struct {
        rw_tool_format f;
        const char *text;
    } cases[] = {
        {RW_TOOL_FMT_LLAMA3,
         "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"San Francisco\", \"days\": 12}}"},
        {RW_TOOL_FMT_LLAMA3, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"},
        {RW_TOOL_FMT_MISTRAL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]"},
        {RW_TOOL_FMT_MISTRAL, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\", \"days\": 3}"},
        {RW_TOOL_FMT_DEEPSEEK,
         DS_CALLS DS_CALL "function" DS_SEP "get_weather\n```json\n{\"city\": \"Rome\"}\n```" DS_END DS_CALLS_END},
        {RW_TOOL_FMT_DEEPSEEK, DS_CALL "get_weather" DS_SEP "{\"city\": \"Rome\"}" DS_END},
        {RW_TOOL_FMT_NEMOTRON,
         "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]</TOOLCALL>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        how h = {.fmt = cases[i].f};
        seen s = run(&h, cases[i].text, 1, true);
        CHECK_MSG(s.n_calls == 1 && s.n_args_events > 3, "%s: %d calls, %d argument pieces", cases[i].text, s.n_calls,
                  s.n_args_events);
    }
}

/* max_calls through a whole stream: the second call never begins, the text after the first is dropped. */
static void test_max_calls(void) {
    static const struct {
        rw_tool_format f;
        const char *text;
    } cases[] = {
        {RW_TOOL_FMT_HERMES, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
                             "\"b\", \"arguments\": {}}\n</tool_call>"},
        {RW_TOOL_FMT_QWEN_XML, "<tool_call>\n<function=a>\n</function>\n</tool_call>\n<tool_call>\n<function=b>\n"
                               "</function>\n</tool_call>"},
        {RW_TOOL_FMT_LLAMA3, "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {}}"},
        {RW_TOOL_FMT_NEMOTRON, "<TOOLCALL>[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": "
                               "{}}]</TOOLCALL>"},
        {RW_TOOL_FMT_LFM2, "<|tool_call_start|>[a(), b()]<|tool_call_end|> then text"},
        {RW_TOOL_FMT_MISTRAL, "[TOOL_CALLS]a[ARGS]{}[TOOL_CALLS]b[ARGS]{}"},
        {RW_TOOL_FMT_HARMONY, "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|><|start|>"
                              "assistant<|channel|>commentary to=functions.b <|constrain|>json<|message|>{}<|call|>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        how h = {.fmt = cases[i].f, .max_calls = 1};
        check(&h, cases[i].text, "", (const char *const[]){"a|{}", NULL}, NULL);
        how all = {.fmt = cases[i].f};
        seen s = run(&all, cases[i].text, 1, true);
        CHECK_MSG(s.n_calls == 2, "%s: %d calls without max_calls", cases[i].text, s.n_calls);
    }
}

/* The real templates are detected as their formats. */
static void test_detect(void) {
    static const struct {
        const char *file;
        rw_tool_format f;
    } t[] = {
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", RW_TOOL_FMT_DEEPSEEK},
        {"NVIDIA-Nemotron-Nano-v2.jinja", RW_TOOL_FMT_NEMOTRON},
        {"LFM2.5-Instruct.jinja", RW_TOOL_FMT_LFM2},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", RW_TOOL_FMT_MISTRAL},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", RW_TOOL_FMT_LLAMA3},
        {"Qwen-Qwen3-0.6B.jinja", RW_TOOL_FMT_HERMES},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        char path[256];
        snprintf(path, sizeof path, "chat/templates/%s", t[i].file);
        size_t n = 0;
        char *src = rw_test_read_file(rw_test_fixture_path(path), &n);
        if (!src) continue;
        rw_chat_caps caps;
        rw_chat_detect_caps(src, n, &caps);
        CHECK_MSG(caps.tool_format == t[i].f, "%s: detected %s", t[i].file, rw_tool_format_name(caps.tool_format));
        free(src);
    }
    static const char *const names[] = {"deepseek", "nemotron", "lfm2", "mistral"};
    for (int i = 0; i < 4; i++) {
        rw_tool_format f;
        CHECK(rw_tool_format_parse(names[i], &f) && !strcmp(rw_tool_format_name(f), names[i]));
    }
}

int main(void) {
    test_deepseek();
    test_nemotron();
    test_lfm2();
    test_llama_builtin();
    test_mistral();
    test_streamed_pieces();
    test_max_calls();
    test_detect();
    return rw_test_done();
}
