/* test_chat_output.c - the output parser (chat/output.h): tool calls in
 * each format (single, parallel, text before, nested arguments, malformed),
 * reasoning, and streaming: the text fed split at every byte (and one byte
 * at a time) gives the same content, reasoning and calls as at once, and no
 * content event ever carries call or think markup. Cases written from each
 * format's documentation (Qwen's, Hermes', Meta's, IBM's model cards). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "chat/output.h"
#include "harness.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},\"metric\":{\"type\":"
    "\"boolean\"},\"opts\":{\"type\":\"object\"},\"tags\":{\"type\":\"array\"},\"zip\":{\"type\":\"string\"},"
    "\"note\":{\"type\":[\"string\",\"null\"]}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"search\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"q\":{\"type\":\"string\"},\"n\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}}}}}]";

/* What the events of one parse add up to. */
typedef struct {
    char content[8192], reasoning[8192];
    size_t nc, nr;
    int n_calls;
    char names[8][64], ids[8][64], args[8][2048];
    int open_call; /* -1 none */
    int n_args_events;
    bool bad;      /* an event out of order, or markup in content */
} result;

static void app(char *buf, size_t *n, size_t cap, const char *s, size_t k) {
    if (*n + k >= cap) return;
    memcpy(buf + *n, s, k);
    *n += k;
    buf[*n] = 0;
}

static const char *const MARKUP[] = {"<tool_call>", "</tool_call>", "<function=", "<parameter=", "<think>",
                                     "</think>", "<|tool_call|>", NULL};

static rw_status on_ev(void *user, const rw_chat_event *ev) {
    result *r = user;
    switch (ev->kind) {
    case RW_CHAT_EV_CONTENT: app(r->content, &r->nc, sizeof r->content, ev->text, ev->len); break;
    case RW_CHAT_EV_REASONING: app(r->reasoning, &r->nr, sizeof r->reasoning, ev->text, ev->len); break;
    case RW_CHAT_EV_CALL_BEGIN:
        if (r->open_call != -1 || ev->index != r->n_calls || r->n_calls >= 8) r->bad = true;
        else {
            snprintf(r->names[r->n_calls], 64, "%s", ev->name);
            snprintf(r->ids[r->n_calls], 64, "%s", ev->id);
            r->args[r->n_calls][0] = 0;
            r->open_call = r->n_calls++;
        }
        break;
    case RW_CHAT_EV_CALL_ARGS:
        r->n_args_events++;
        if (r->open_call != ev->index) r->bad = true;
        else {
            size_t l = strlen(r->args[ev->index]);
            app(r->args[ev->index], &l, 2048, ev->text, ev->len);
        }
        break;
    case RW_CHAT_EV_CALL_END:
        if (r->open_call != ev->index) r->bad = true;
        r->open_call = -1;
        break;
    }
    return RW_OK;
}

/* Feeds text cut at the given points (cuts[] ascending, within len). */
static void run_split(const rw_chat_output_opts *o, const char *text, const size_t *cuts, int n_cuts, result *r) {
    memset(r, 0, sizeof *r);
    r->open_call = -1;
    rw_chat_output *p;
    rw_error err = {0};
    CHECK(!rw_chat_output_new(o, &p, &err));
    size_t len = strlen(text), at = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;
        CHECK(!rw_chat_output_feed(p, text + at, to - at, on_ev, r, &err));
        at = to;
    }
    CHECK(!rw_chat_output_finish(p, on_ev, r, &err));
    if (r->open_call != -1) r->bad = true;
    rw_chat_output_free(p);
}

static bool same(const result *a, const result *b) {
    if (strcmp(a->content, b->content) || strcmp(a->reasoning, b->reasoning) || a->n_calls != b->n_calls) return false;
    for (int i = 0; i < a->n_calls; i++)
        if (strcmp(a->names[i], b->names[i]) || strcmp(a->args[i], b->args[i]) || strcmp(a->ids[i], b->ids[i]))
            return false;
    return true;
}

/* The same, with arguments compared as JSON values (streamed JSON keeps the
 * model's own spelling of numbers and escapes). */
static bool same_json(const result *a, const result *b) {
    if (strcmp(a->content, b->content) || strcmp(a->reasoning, b->reasoning) || a->n_calls != b->n_calls) return false;
    for (int i = 0; i < a->n_calls; i++) {
        json_t *x = json_loads(a->args[i], 0, NULL), *y = json_loads(b->args[i], 0, NULL);
        bool eq = x && y && json_equal(x, y);
        json_decref(x);
        json_decref(y);
        if (strcmp(a->names[i], b->names[i]) || !eq || strcmp(a->ids[i], b->ids[i])) return false;
    }
    return true;
}

static bool has_markup(const char *s) {
    for (int i = 0; MARKUP[i]; i++)
        if (strstr(s, MARKUP[i])) return true;
    return false;
}

/* Parses text at once, then split at every single byte and fed byte by
 * byte, and checks each gives the same; returns the at-once result. */
static void parse_all_ways(const rw_chat_output_opts *o, const char *text, result *whole) {
    run_split(o, text, NULL, 0, whole);
    CHECK_MSG(!whole->bad, "events out of order for %s", text);
    size_t len = strlen(text);
    result r;
    for (size_t c = 1; c < len; c++) {
        run_split(o, text, &c, 1, &r);
        CHECK_MSG(same(whole, &r) && !r.bad, "split at %zu differs: content [%s] vs [%s]", c, r.content,
                  whole->content);
    }
    size_t *cuts = malloc(len * sizeof *cuts);
    for (size_t i = 0; i + 1 < len; i++) cuts[i] = i + 1;
    run_split(o, text, cuts, len ? (int)len - 1 : 0, &r);
    free(cuts);
    CHECK_MSG(same(whole, &r) && !r.bad, "byte by byte differs for %s", text);
    /* the non-streaming API is the same thing */
    rw_chat_parsed m;
    rw_error err = {0};
    CHECK(!rw_chat_output_parse(o, text, len, &m, &err));
    CHECK(!strcmp(m.content, whole->content));
    CHECK(m.reasoning ? !strcmp(m.reasoning, whole->reasoning) : whole->nr == 0);
    CHECK_EQ_INT(m.n_calls, whole->n_calls);
    for (int i = 0; i < m.n_calls && i < whole->n_calls; i++)
        CHECK(!strcmp(m.calls[i].name, whole->names[i]) && !strcmp(m.calls[i].arguments, whole->args[i]) &&
              !strcmp(m.calls[i].id, whole->ids[i]));
    rw_chat_parsed_free(&m);
}

static rw_chat_output_opts opts(rw_tool_format f) {
    return (rw_chat_output_opts){.tool_format = f, .reasoning = RW_REASONING_DEEPSEEK, .tools_json = TOOLS,
                                 .id_seed = 42};
}

/* One case: expected content and reasoning, then name/args pairs. */
static void expect(rw_chat_output_opts o, const char *text, const char *content, const char *reasoning, int n,
                   const char *const *calls, bool markup_free) {
    result r;
    parse_all_ways(&o, text, &r);
    if (markup_free) { /* well-formed: streaming the arguments gives the same texts */
        rw_chat_output_opts so = o;
        so.stream_args = true;
        result sr;
        parse_all_ways(&so, text, &sr);
        CHECK_MSG(same_json(&r, &sr), "stream_args differs for %s: content [%s], args [%s] vs [%s]", text, sr.content,
                  sr.args[0], r.args[0]);
    }
    CHECK_MSG(!strcmp(r.content, content), "content [%s], want [%s] (text %s)", r.content, content, text);
    CHECK_MSG(!strcmp(r.reasoning, reasoning), "reasoning [%s], want [%s]", r.reasoning, reasoning);
    CHECK_MSG(r.n_calls == n, "%d calls, want %d (text %s)", r.n_calls, n, text);
    for (int i = 0; i < n && i < r.n_calls; i++) {
        CHECK_MSG(!strcmp(r.names[i], calls[2 * i]), "name %s, want %s", r.names[i], calls[2 * i]);
        CHECK_MSG(!strcmp(r.args[i], calls[2 * i + 1]), "args %s, want %s", r.args[i], calls[2 * i + 1]);
        CHECK(!strncmp(r.ids[i], "call_", 5) && strlen(r.ids[i]) == 5 + 24);
        for (int k = 0; k < i; k++) CHECK(strcmp(r.ids[i], r.ids[k]));
    }
    if (markup_free) CHECK_MSG(!has_markup(r.content), "markup in content [%s]", r.content);
}

static void test_qwen_xml(void) {
    rw_chat_output_opts o = opts(RW_TOOL_FMT_QWEN_XML);
    const char *one[] = {"get_weather", "{\"city\":\"Paris\",\"days\":3}"};
    expect(o,
           "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
           "</parameter>\n</function>\n</tool_call>",
           "", "", 1, one, true);
    /* text before, thinking (prompt opened <think>), then two calls */
    rw_chat_output_opts o2 = o;
    o2.in_reasoning = true;
    const char *two[] = {"get_weather", "{\"city\":\"New York\",\"metric\":true,\"zip\":\"01234\"}", "search",
                         "{\"q\":\"a < b && \\\"c\\\"\",\"n\":null}"};
    expect(o2,
           "The user wants weather.\nAlso a search.\n</think>\n\nLet me look.\n\n<tool_call>\n<function=get_weather>\n"
           "<parameter=city>\nNew York\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n<parameter=zip>\n"
           "01234\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=search>\n<parameter=q>\n"
           "a < b && \"c\"\n</parameter>\n<parameter=n>\nnull\n</parameter>\n</function>\n</tool_call>",
           "Let me look.", "The user wants weather.\nAlso a search.", 2, two, true);
    /* nested JSON values (object, array), a multi-line string */
    const char *nested[] = {"get_weather",
                            "{\"opts\":{\"a\":[1,{\"b\":null}],\"c\":\"x\"},\"tags\":[\"x\",\"y\"],\"note\":\"line1\\n"
                            "line2\"}"};
    expect(o,
           "<tool_call>\n<function=get_weather>\n<parameter=opts>\n{\"a\": [1, {\"b\": null}], \"c\": \"x\"}\n"
           "</parameter>\n<parameter=tags>\n[\"x\", \"y\"]\n</parameter>\n<parameter=note>\nline1\nline2\n"
           "</parameter>\n</function>\n</tool_call>",
           "", "", 1, nested, true);
    /* Qwen3-Coder's bare <function=...> without <tool_call> */
    const char *bare[] = {"search", "{\"q\":\"rewind\"}"};
    expect(o, "Sure.\n<function=search>\n<parameter=q>\nrewind\n</parameter>\n</function>", "Sure.", "", 1, bare,
           true);
    /* a value that does not parse as its type stays a string */
    const char *loose[] = {"get_weather", "{\"days\":\"three\"}"};
    expect(o,
           "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",
           "", "", 1, loose, true);
    /* malformed: no </function>, a stray tag: returned as text, never dropped */
    const char *bad1 = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</tool_call>";
    expect(o, bad1, bad1, "", 0, NULL, false);
    const char *bad2 = "ok <tool_call>\n<func=x>\n</tool_call> done";
    expect(o, bad2, "ok <tool_call>\n<func=x>\n</tool_call> done", "", 0, NULL, false);
    /* cut off by the token limit inside a call: text */
    const char *cut = "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=ci";
    expect(o, cut, cut, "", 0, NULL, false);
    /* a missing </tool_call> at the very end is forgiven */
    const char *noclose[] = {"search", "{\"q\":\"x\"}"};
    expect(o, "<tool_call>\n<function=search>\n<parameter=q>\nx\n</parameter>\n</function>\n", "", "", 1, noclose,
           true);
    /* JSON inside <tool_call> for an XML model: parsed too */
    const char *js[] = {"search", "{\"q\":\"x\"}"};
    expect(o, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>", "", "", 1, js,
           true);
}

static void test_hermes(void) {
    rw_chat_output_opts o = opts(RW_TOOL_FMT_HERMES);
    const char *one[] = {"get_weather", "{\"city\":\"Paris\"}"};
    expect(o, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", "",
           1, one, true);
    const char *two[] = {"get_weather", "{\"city\":\"Paris\",\"opts\":{\"x\":[1,2.5,{\"y\":\"}\"}]}}", "search",
                         "{\"q\":\"</tool\"}"};
    expect(o,
           "<think>\nLet me think.\n</think>\n\nI'll check both.\n<tool_call>\n{\"name\": \"get_weather\", "
           "\"arguments\": {\"city\": \"Paris\", \"opts\": {\"x\": [1, 2.5, {\"y\": \"}\"}]}}}\n</tool_call>\n"
           "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"</tool\"}}\n</tool_call>",
           "I'll check both.", "Let me think.", 2, two, true);
    /* arguments given as a JSON string; "parameters" as the key */
    const char *str[] = {"search", "{\"q\":\"x\"}", "search", "{\"q\":\"y\"}"};
    expect(o,
           "<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"q\\\": \\\"x\\\"}\"}</tool_call>"
           "<tool_call>{\"name\": \"search\", \"parameters\": {\"q\": \"y\"}}</tool_call>",
           "", "", 2, str, true);
    /* malformed JSON: text */
    const char *bad = "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": }\n</tool_call>";
    expect(o, bad, bad, "", 0, NULL, false);
    const char *noname = "<tool_call>{\"arguments\": {}}</tool_call>";
    expect(o, noname, noname, "", 0, NULL, false);
    /* text after a call stays content */
    const char *after[] = {"search", "{}"};
    expect(o, "<tool_call>{\"name\": \"search\"}</tool_call>\nDone.", "Done.", "", 1, after, true);
    /* leading and trailing whitespace of plain content is kept */
    expect(o, "\n  Hi there.\n", "\n  Hi there.\n", "", 0, NULL, true);
    /* plain text with a '<' and no calls passes untouched */
    expect(o, "a <b> c < d <tool", "a <b> c < d <tool", "", 0, NULL, false);
}

static void test_llama3(void) {
    rw_chat_output_opts o = opts(RW_TOOL_FMT_LLAMA3);
    const char *one[] = {"get_weather", "{\"city\":\"Paris\"}"};
    expect(o, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", "", 1, one, true);
    expect(o, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", "", 1, one,
           true);
    const char *two[] = {"get_weather", "{\"city\":\"Paris\",\"opts\":{\"a\":{\"b\":[]}}}", "search",
                         "{\"q\":\"x\"}"};
    expect(o,
           "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"opts\": {\"a\": {\"b\": []}}}}; "
           "{\"name\": \"search\", \"parameters\": {\"q\": \"x\"}}",
           "", "", 2, two, true);
    /* a JSON answer that is not a call, and text with braces: content */
    const char *notcall = "{\"name\": \"Alice\", \"age\": 3}";
    expect(o, notcall, notcall, "", 0, NULL, false);
    expect(o, "The set {1, 2} has two elements.", "The set {1, 2} has two elements.", "", 0, NULL, false);
    const char *bad = "{\"name\": \"search\", \"parameters\": {\"q\": ";
    expect(o, bad, bad, "", 0, NULL, false);
}

static void test_granite(void) {
    rw_chat_output_opts o = opts(RW_TOOL_FMT_GRANITE);
    const char *two[] = {"get_weather", "{\"city\":\"Paris\"}", "search", "{\"q\":\"x\"}"};
    expect(o,
           "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"search\", "
           "\"arguments\": {\"q\": \"x\"}}]",
           "", "", 2, two, true);
    /* the special token hidden by the detokenizer: a bare list */
    expect(o,
           "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"search\", "
           "\"arguments\": {\"q\": \"x\"}}]",
           "", "", 2, two, true);
    const char *one[] = {"search", "{\"q\":\"x\"}"};
    expect(o, "Let me search.<|tool_call|>[{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}]", "Let me search.",
           "", 1, one, true);
    /* a marker followed by something that is not JSON: the marker is text, what follows is read on */
    const char *notjson[] = {"search", "{\"q\":\"x\"}"};
    expect(o, "<|tool_call|>\"x <|tool_call|>[{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}]",
           "<|tool_call|>\"x", "", 1, notjson, false);
    const char *bad = "<|tool_call|>[{\"name\": \"search\", \"arguments\": 5}]";
    expect(o, bad, bad, "", 0, NULL, false);
}

static void test_generic_and_none(void) {
    rw_chat_output_opts o = opts(RW_TOOL_FMT_GENERIC);
    const char *one[] = {"search", "{\"q\":\"x\"}"};
    expect(o, "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}</tool_call>", "", "", 1, one, true);
    expect(o, "{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}", "", "", 1, one, true);
    expect(o, "<TOOLCALL>[{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}]</TOOLCALL>", "", "", 1, one, true);
    /* NONE: everything is content, markup and all */
    rw_chat_output_opts n = opts(RW_TOOL_FMT_NONE);
    n.reasoning = RW_REASONING_NONE;
    const char *t = "<think>a</think><tool_call>{\"name\": \"search\"}</tool_call>";
    expect(n, t, t, "", 0, NULL, false);
}

static void test_reasoning(void) {
    rw_chat_output_opts o = opts(RW_TOOL_FMT_HERMES);
    expect(o, "<think>\nstep 1\n\nstep 2\n</think>\n\nThe answer is 4.", "The answer is 4.", "step 1\n\nstep 2", 0,
           NULL, true);
    /* the prompt opened the block */
    o.in_reasoning = true;
    expect(o, "hmm\n</think>\n\n4", "4", "hmm", 0, NULL, true);
    /* cut off while thinking: all reasoning */
    expect(o, "still thinking <th", "", "still thinking <th", 0, NULL, true);
    o.in_reasoning = false;
    /* a <think> after content is content */
    expect(o, "Answer: <think>x</think>", "Answer: <think>x</think>", "", 0, NULL, false);
    /* reasoning format none keeps it in the content */
    o.reasoning = RW_REASONING_NONE;
    expect(o, "<think>\nx\n</think>\n\ny", "<think>\nx\n</think>\n\ny", "", 0, NULL, false);
    /* other markers */
    rw_chat_output_opts m = opts(RW_TOOL_FMT_GENERIC);
    m.think_open = "<|begin_of_thought|>";
    m.think_close = "<|end_of_thought|>";
    expect(m, "<|begin_of_thought|>r<|end_of_thought|>c", "c", "r", 0, NULL, true);
}

/* stream_args: a Qwen XML call's begin and each parameter go out as they
 * close, before the call ends; a call that breaks keeps what it had. */
static void test_stream_args(void) {
    rw_chat_output_opts o = opts(RW_TOOL_FMT_QWEN_XML);
    o.stream_args = true;
    const char *head = "Let me see.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                       "<parameter=days>\n";
    const char *rest = "3\n</parameter>\n</function>\n</tool_call>";
    result r;
    memset(&r, 0, sizeof r);
    r.open_call = -1;
    rw_chat_output *p;
    rw_error err = {0};
    CHECK(!rw_chat_output_new(&o, &p, &err));
    CHECK(!rw_chat_output_feed(p, head, strlen(head), on_ev, &r, &err));
    CHECK(r.n_calls == 1 && r.open_call == 0 && !strcmp(r.names[0], "get_weather"));
    CHECK_MSG(!strcmp(r.args[0], "{\"city\":\"Paris\""), "args so far [%s]", r.args[0]);
    CHECK(!strcmp(r.content, "Let me see."));
    CHECK(!rw_chat_output_feed(p, rest, strlen(rest), on_ev, &r, &err));
    CHECK(!rw_chat_output_finish(p, on_ev, &r, &err));
    CHECK(r.open_call == -1 && !strcmp(r.args[0], "{\"city\":\"Paris\",\"days\":3}") && r.n_args_events >= 3);
    rw_chat_output_free(p);
    /* a string parameter streams inside its text (a file's content does not wait for its end) */
    memset(&r, 0, sizeof r);
    r.open_call = -1;
    CHECK(!rw_chat_output_new(&o, &p, &err));
    const char *mid = "<tool_call>\n<function=get_weather>\n<parameter=city>\nline \"1\"\nline 2</param";
    CHECK(!rw_chat_output_feed(p, mid, strlen(mid), on_ev, &r, &err));
    CHECK_MSG(!strcmp(r.args[0], "{\"city\":\"line \\\"1\\\"\\nline 2"), "args so far [%s]", r.args[0]);
    const char *midr = "eter>\n</function>\n</tool_call>";
    CHECK(!rw_chat_output_feed(p, midr, strlen(midr), on_ev, &r, &err));
    CHECK(!rw_chat_output_finish(p, on_ev, &r, &err));
    CHECK_MSG(!strcmp(r.args[0], "{\"city\":\"line \\\"1\\\"\\nline 2\"}") && r.open_call == -1, "args [%s]", r.args[0]);
    rw_chat_output_free(p);
    /* cut off inside a parameter: the call keeps the parameters it had, the rest is text */
    result w;
    const char *cut = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=da";
    parse_all_ways(&o, cut, &w);
    CHECK(w.n_calls == 1 && !strcmp(w.args[0], "{\"city\":\"Paris\"}"));
    CHECK_MSG(!strcmp(w.content, "\n<parameter=da"), "content [%s]", w.content);
    /* cut off inside a string value: the call keeps what it had */
    parse_all_ways(&o, "<tool_call>\n<function=get_weather>\n<parameter=city>\nPa", &w);
    CHECK_MSG(w.n_calls == 1 && !strcmp(w.args[0], "{\"city\":\"Pa\"}") && !w.content[0], "args [%s] content [%s]",
              w.args[0], w.content);
    /* broken before the begin: the whole text, as without stream_args */
    const char *bad = "<tool_call>\n<function=>\n</function>\n</tool_call> ok";
    parse_all_ways(&o, bad, &w);
    CHECK(w.n_calls == 0 && !strcmp(w.content, bad));
    /* Hermes JSON: the begin at the name, the arguments as they come (compact) */
    rw_chat_output_opts h = opts(RW_TOOL_FMT_HERMES);
    h.stream_args = true;
    memset(&r, 0, sizeof r);
    r.open_call = -1;
    CHECK(!rw_chat_output_new(&h, &p, &err));
    const char *jh = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    CHECK(!rw_chat_output_feed(p, jh, strlen(jh), on_ev, &r, &err));
    CHECK(r.n_calls == 1 && r.open_call == 0 && !strcmp(r.names[0], "get_weather"));
    CHECK_MSG(!strcmp(r.args[0], "{\"city\":\"Par"), "args so far [%s]", r.args[0]);
    const char *jt = "is\", \"days\": 3}}\n</tool_call>";
    CHECK(!rw_chat_output_feed(p, jt, strlen(jt), on_ev, &r, &err));
    CHECK(!rw_chat_output_finish(p, on_ev, &r, &err));
    CHECK(r.open_call == -1 && !strcmp(r.args[0], "{\"city\":\"Paris\",\"days\":3}") && !r.content[0]);
    rw_chat_output_free(p);
    /* broken inside: closed where it was sure, the rest is text */
    parse_all_ways(&h, "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"x\", \"n\": tru}}</tool_call>", &w);
    CHECK_MSG(w.n_calls == 1 && !strcmp(w.args[0], "{\"q\":\"x\"}"), "args [%s]", w.args[0]);
    CHECK_MSG(!strcmp(w.content, ", \"n\": tru}}</tool_call>"), "content [%s]", w.content);
    /* cut off inside a string: the string is closed */
    parse_all_ways(&h, "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"a long te", &w);
    CHECK_MSG(w.n_calls == 1 && !strcmp(w.args[0], "{\"q\":\"a long te\"}"), "args [%s]", w.args[0]);
    /* arguments before the name: judged whole */
    parse_all_ways(&h, "<tool_call>{\"arguments\": {\"q\": 1}, \"name\": \"search\"}</tool_call>", &w);
    CHECK(w.n_calls == 1 && !strcmp(w.args[0], "{\"q\":1}") && !w.content[0]);
    /* two functions in one <tool_call> */
    const char *two = "<tool_call>\n<function=search>\n<parameter=q>\nx\n</parameter>\n</function>\n<function=search>\n"
                      "</function>\n</tool_call>";
    parse_all_ways(&o, two, &w);
    CHECK(w.n_calls == 2 && !strcmp(w.args[0], "{\"q\":\"x\"}") && !strcmp(w.args[1], "{}") && !w.content[0]);
}

static rw_status stop_at_call(void *user, const rw_chat_event *ev) {
    (void)user;
    return ev->kind == RW_CHAT_EV_CALL_BEGIN ? RW_ERR_CANCELLED : RW_OK;
}

static void test_misc(void) {
    rw_tool_format f;
    CHECK(rw_tool_format_parse("qwen-xml", &f) && f == RW_TOOL_FMT_QWEN_XML);
    CHECK(rw_tool_format_parse("granite", &f) && f == RW_TOOL_FMT_GRANITE);
    CHECK(!rw_tool_format_parse("xml", &f));
    CHECK(rw_chat_prompt_opens_reasoning("a<think>\n", 9, NULL, NULL));
    CHECK(!rw_chat_prompt_opens_reasoning("<think>x</think>\n", 17, NULL, NULL));
    CHECK(!rw_chat_prompt_opens_reasoning("hello", 5, NULL, NULL));
    /* the callback's status stops the parser */
    rw_chat_output_opts o = opts(RW_TOOL_FMT_HERMES);
    rw_chat_output *p;
    rw_error err = {0};
    CHECK(!rw_chat_output_new(&o, &p, &err));
    const char *t = "<tool_call>{\"name\": \"search\"}</tool_call>";
    CHECK(rw_chat_output_feed(p, t, strlen(t), stop_at_call, NULL, &err) == RW_ERR_CANCELLED);
    rw_chat_output_free(p);
    /* ids: the seed decides them */
    rw_chat_parsed a, b;
    CHECK(!rw_chat_output_parse(&o, t, strlen(t), &a, &err));
    o.id_seed = 43;
    o.id_prefix = "toolu_";
    CHECK(!rw_chat_output_parse(&o, t, strlen(t), &b, &err));
    CHECK(a.n_calls == 1 && b.n_calls == 1 && strcmp(a.calls[0].id + 5, b.calls[0].id + 6));
    CHECK(!strncmp(b.calls[0].id, "toolu_", 6));
    rw_chat_parsed_free(&a);
    rw_chat_parsed_free(&b);
}

/* Cut by the token limit (rw_chat_output_set_cut): at every cut point of
 * well-formed outputs, no markup and no piece of a marker reaches the
 * content (the text before the calls is the content's), whole and streamed;
 * calls complete before the cut are kept. */
static void test_cut(void) {
    static const struct {
        rw_tool_format f;
        const char *text, *content;
        size_t first_end; /* where the first call is complete */
    } cases[] = {
        {RW_TOOL_FMT_HERMES,
         "I'll check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
         "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>",
         "I'll check.\n", 92},
        {RW_TOOL_FMT_QWEN_XML,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n"
         "<tool_call>\n<function=search>\n<parameter=q>\nx\n</parameter>\n</function>\n</tool_call>",
         "", 95},
        {RW_TOOL_FMT_LLAMA3, "{\"name\": \"search\", \"parameters\": {\"q\": \"x\"}}", "", 44},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        size_t len = strlen(cases[k].text), cl = strlen(cases[k].content);
        for (size_t n = 0; n <= len; n++) {
            for (int streamed = 0; streamed < 2; streamed++) {
                rw_chat_output_opts o = opts(cases[k].f);
                o.stream_args = streamed;
                rw_chat_output *p;
                rw_error err = {0};
                result r;
                memset(&r, 0, sizeof r);
                r.open_call = -1;
                CHECK(!rw_chat_output_new(&o, &p, &err));
                CHECK(!rw_chat_output_feed(p, cases[k].text, n, on_ev, &r, &err));
                rw_chat_output_set_cut(p, true);
                CHECK(!rw_chat_output_finish(p, on_ev, &r, &err));
                rw_chat_output_free(p);
                CHECK_MSG(!r.bad && r.open_call == -1, "case %zu cut at %zu: events out of order", k, n);
                /* the content is a prefix of the text before the calls (with its newline when cut there) */
                CHECK_MSG(r.nc <= cl && !memcmp(r.content, cases[k].content, r.nc),
                          "case %zu cut at %zu%s: content [%s]", k, n, streamed ? " (streamed)" : "", r.content);
                if (n >= cases[k].first_end)
                    CHECK_MSG(r.n_calls >= 1 &&
                                  !strcmp(r.names[0], cases[k].f == RW_TOOL_FMT_LLAMA3 ? "search" : "get_weather"),
                              "case %zu cut at %zu: the complete call is lost", k, n);
            }
            /* the non-streaming API with the cut in its options */
            rw_chat_output_opts o = opts(cases[k].f);
            o.cut = true;
            rw_chat_parsed m;
            rw_error err = {0};
            CHECK(!rw_chat_output_parse(&o, cases[k].text, n, &m, &err));
            CHECK_MSG(m.content_len <= cl && !memcmp(m.content, cases[k].content, m.content_len),
                      "case %zu parse cut at %zu: content [%s]", k, n, m.content);
            rw_chat_parsed_free(&m);
        }
    }
    /* without the cut, an unfinished call is content (the model wrote it as text) */
    rw_chat_parsed m;
    rw_error err = {0};
    rw_chat_output_opts o = opts(RW_TOOL_FMT_HERMES);
    CHECK(!rw_chat_output_parse(&o, "<tool_call>\n{\"na", 16, &m, &err));
    CHECK(!strcmp(m.content, "<tool_call>\n{\"na"));
    rw_chat_parsed_free(&m);
}

int main(void) {
    test_qwen_xml();
    test_hermes();
    test_llama3();
    test_granite();
    test_generic_and_none();
    test_reasoning();
    test_stream_args();
    test_misc();
    test_cut();
    return rw_test_done();
}
