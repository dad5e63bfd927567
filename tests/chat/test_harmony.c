/* test_harmony.c - gpt-oss's harmony output (chat/harmony.c) to content,
 * reasoning and tool calls: whole and fed a byte at a time give the same
 * events; a call cut short never reaches the content; the gpt-oss template
 * is detected as harmony. */
#include <stdlib.h>
#include <string.h>

#include "chat/output.h"
#include "harness.h"

typedef struct {
    char content[512], reasoning[512], args[512], name[64];
    int n_calls;
} seen;

static rw_status on_event(void *user, const rw_chat_event *ev) {
    seen *s = user;
    char *dst = ev->kind == RW_CHAT_EV_CONTENT ? s->content : ev->kind == RW_CHAT_EV_REASONING ? s->reasoning
              : ev->kind == RW_CHAT_EV_CALL_ARGS                                               ? s->args
                                                                                               : NULL;
    if (ev->kind == RW_CHAT_EV_CALL_BEGIN) {
        s->n_calls++;
        snprintf(s->name, sizeof s->name, "%s", ev->name);
    }
    if (dst && strlen(dst) + ev->len < 511) strncat(dst, ev->text, ev->len);
    return RW_OK;
}

static seen run(const char *text, size_t piece) {
    rw_chat_output_opts o = {.tool_format = RW_TOOL_FMT_HARMONY, .reasoning = RW_REASONING_DEEPSEEK, .id_seed = 1};
    rw_chat_output *p = NULL;
    rw_error err = {0};
    seen s = {0};
    CHECK(rw_chat_output_new(&o, &p, &err) == RW_OK);
    for (size_t i = 0, n = strlen(text); p && i < n; i += piece)
        CHECK(rw_chat_output_feed(p, text + i, n - i < piece ? n - i : piece, on_event, &s, &err) == RW_OK);
    if (p) CHECK(rw_chat_output_finish(p, on_event, &s, &err) == RW_OK);
    rw_chat_output_free(p);
    return s;
}

static void check_case(const char *text, const char *content, const char *reasoning, const char *name,
                       const char *args) {
    for (size_t piece = 1; piece <= 1000; piece = piece == 1 ? 7 : piece == 7 ? 1000 : 1001) {
        seen s = run(text, piece);
        CHECK_MSG(!strcmp(s.content, content), "%s (pieces of %zu): content '%s'", text, piece, s.content);
        CHECK_MSG(!strcmp(s.reasoning, reasoning), "%s (pieces of %zu): reasoning '%s'", text, piece, s.reasoning);
        CHECK_MSG(s.n_calls == (name != NULL), "%s: %d calls", text, s.n_calls);
        if (name) CHECK_MSG(!strcmp(s.name, name) && !strcmp(s.args, args), "%s: %s %s", text, s.name, s.args);
    }
}

int main(void) {
    /* reasoning, then the answer */
    check_case("<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>final<|message|>"
               "Hello there!<|return|>",
               "Hello there!", "The user greets.", NULL, NULL);
    /* the answer alone, ended by the end of the text (<|return|> is end-of-generation: not in the text) */
    check_case("<|channel|>final<|message|>Just this.", "Just this.", "", NULL, NULL);
    /* a tool call after reasoning: recipient after the channel, constrain */
    check_case("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
               "", "Need weather.", "get_weather", "{\"city\":\"Paris\"}");
    /* the recipient before the channel */
    check_case("<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{\"q\":1}",
               "", "", "lookup", "{\"q\":1}");
    /* a call cut short by max_tokens: neither a call nor content */
    check_case("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Pa", "", "",
               NULL, NULL);
    /* a header cut short after a message: dropped, never content */
    check_case("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=func", "",
               "Need weather.", NULL, NULL);
    check_case("<|channel|>analysis<|message|>Hm.<|end|><|start|>assist", "", "Hm.", NULL, NULL);
    check_case("<|channel|>fin", "", "", NULL, NULL);
    /* text with < that is no marker passes */
    check_case("<|channel|>final<|message|>a < b and <|x", "a < b and <|x", "", NULL, NULL);
    /* no header at all: plain content */
    check_case("Plain answer without channels.", "Plain answer without channels.", "", NULL, NULL);

    /* the real gpt-oss template is detected as harmony */
    size_t n = 0;
    char *src = rw_test_read_file(rw_test_fixture_path("chat/templates/openai-gpt-oss-120b.jinja"), &n);
    if (src) {
        rw_chat_caps caps;
        rw_chat_detect_caps(src, n, &caps);
        CHECK_EQ_INT(caps.tool_format, RW_TOOL_FMT_HARMONY);
        free(src);
    }
    rw_tool_format f;
    CHECK(rw_tool_format_parse("harmony", &f) && f == RW_TOOL_FMT_HARMONY);
    return rw_test_done();
}
