/* test_chat_nesting.c - the chat parsers of untrusted input driven to
 * 100,000 levels of nesting: a chat template's expressions, blocks and
 * macro recursion (parse and render), messages nested that deep (JSON past
 * jansson's depth limit, and under it), and model output whose tool call's
 * arguments nest that deep, whole and streamed. Each ends in a clear error
 * (or, for output, in text that is not a call), never a stack overflow. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "chat/output.h"
#include "harness.h"

#define DEEP 100000

static char *rep3(const char *a, const char *mid, const char *b, int n) {
    size_t la = strlen(a), lm = strlen(mid), lb = strlen(b);
    char *s = malloc((la + lb) * (size_t)n + lm + 1), *p = s;
    for (int i = 0; i < n; i++) memcpy(p, a, la), p += la;
    memcpy(p, mid, lm), p += lm;
    for (int i = 0; i < n; i++) memcpy(p, b, lb), p += lb;
    *p = 0;
    return s;
}

/* parses src and renders it over msgs: returns the status of the first step that fails */
static rw_status template_run(const char *src, const char *msgs, rw_error *err) {
    rw_chat_template *t = NULL;
    rw_status st = rw_chat_template_parse(src, strlen(src), &t, err);
    if (st) return st;
    rw_chat_render_opts o = {.messages_json = msgs, .add_generation_prompt = true, .enable_thinking = -1};
    char *out = NULL;
    size_t len = 0;
    st = rw_chat_template_render(t, &o, &out, &len, err);
    free(out);
    rw_chat_template_free(t);
    return st;
}

static void refused(const char *what, const char *src, const char *msgs, const char *needle) {
    rw_error err = {0};
    rw_status st = template_run(src, msgs, &err);
    CHECK_MSG(st != RW_OK && strstr(err.msg, needle), "%s: status %d: %s", what, (int)st, err.msg);
}

int main(void) {
    static const char msgs[] = "[{\"role\":\"user\",\"content\":\"hi\"}]";
    char *s = rep3("(", "1", ")", DEEP);
    size_t n = strlen(s) + 16;
    char *src = malloc(n);
    snprintf(src, n, "{{ %s }}", s);
    refused("parentheses", src, msgs, "nested too deeply");
    free(src);
    free(s);
    s = rep3("-", "1", "", DEEP);
    n = strlen(s) + 16;
    src = malloc(n);
    snprintf(src, n, "{{ %s }}", s);
    refused("unary operators", src, msgs, "nested too deeply");
    free(src);
    free(s);
    s = rep3("not ", "true", "", DEEP);
    n = strlen(s) + 16;
    src = malloc(n);
    snprintf(src, n, "{{ %s }}", s);
    refused("not", src, msgs, "nested too deeply");
    free(src);
    free(s);
    s = rep3("[", "1", "]", DEEP);
    n = strlen(s) + 16;
    src = malloc(n);
    snprintf(src, n, "{{ %s }}", s);
    refused("list literals", src, msgs, "nested too deeply");
    free(src);
    free(s);
    src = rep3("{% if true %}", "x", "{% endif %}", DEEP);
    refused("blocks", src, msgs, "nested too deeply");
    free(src);
    refused("macro recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", msgs, "too deeply");
    /* messages nested past jansson's limit, and 1,500 deep under it through tojson */
    s = rep3("[", "", "]", DEEP);
    n = strlen(s) + 64;
    char *m = malloc(n);
    snprintf(m, n, "[{\"role\":\"user\",\"content\":%s}]", s);
    refused("messages 100,000 deep", "{{ messages | tojson }}", m, "JSON");
    free(m);
    free(s);
    s = rep3("[", "", "]", 1500);
    n = strlen(s) + 64;
    m = malloc(n);
    snprintf(m, n, "[{\"role\":\"user\",\"content\":%s}]", s);
    {
        rw_error err = {0};
        rw_status st = template_run("{{ messages | tojson }}", m, &err);
        CHECK_MSG(st == RW_OK || strstr(err.msg, "deep"), "messages 1,500 deep: %s", err.msg);
    }
    free(m);
    free(s);

    /* model output: a tool call whose arguments nest 100,000 deep, whole and streamed */
    s = rep3("[", "1", "]", DEEP);
    n = strlen(s) + 128;
    char *out = malloc(n);
    snprintf(out, n, "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"x\":%s}}\n</tool_call>", s);
    for (int fmt = RW_TOOL_FMT_GENERIC; fmt <= RW_TOOL_FMT_GRANITE; fmt++) {
        rw_chat_output_opts o = {.tool_format = (rw_tool_format)fmt, .reasoning = RW_REASONING_DEEPSEEK};
        rw_chat_parsed p;
        rw_error err = {0};
        rw_status st = rw_chat_output_parse(&o, out, strlen(out), &p, &err);
        CHECK_MSG(st == RW_OK || st == RW_ERR_INVALID_ARG, "format %d: %d %s", fmt, (int)st, err.msg);
        if (st == RW_OK) {
            for (int i = 0; i < p.n_calls; i++) CHECK_MSG(strlen(p.calls[i].arguments) < 1000, "a call of 100,000 levels");
            rw_chat_parsed_free(&p);
        }
    }
    free(out);
    free(s);
    return rw_test_done();
}
