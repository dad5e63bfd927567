/* fuzz_chat_output.c - libFuzzer harness for the model-output parser
 * (chat/output.h) and the history normalizer (chat/history.h).
 *
 * Input: byte 0 picks the tool format, byte 1 the flags (reasoning,
 * in_reasoning, stream_args), byte 2 a split point; the rest is the
 * generated text. Properties: no crash, hang, leak or undefined behaviour;
 * the text fed whole and fed in two pieces (and byte by byte, for short
 * inputs) gives the same content, reasoning and calls; every call has a
 * name and arguments that parse as a JSON object; the non-streaming parse
 * agrees. When the text is JSON, it is also given to the normalizer as
 * messages (success or an error, never a crash). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/history.h"
#include "chat/output.h"

typedef struct {
    char *content, *reasoning, *calls; /* calls: "name\x01args\x02" each */
    size_t nc, nr, nk, cc, cr, ck;
    int open; /* -1: no call open */
} acc;

static void app(char **b, size_t *n, size_t *cap, const char *s, size_t k) {
    if (*n + k + 1 > *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        while (c < *n + k + 1) c *= 2;
        char *q = realloc(*b, c);
        if (!q) __builtin_trap();
        *b = q;
        *cap = c;
    }
    memcpy(*b + *n, s, k);
    *n += k;
    (*b)[*n] = 0;
}

static size_t g_args_start;

static rw_status on_ev(void *user, const rw_chat_event *ev) {
    acc *a = user;
    switch (ev->kind) {
    case RW_CHAT_EV_CONTENT: app(&a->content, &a->nc, &a->cc, ev->text, ev->len); break;
    case RW_CHAT_EV_REASONING: app(&a->reasoning, &a->nr, &a->cr, ev->text, ev->len); break;
    case RW_CHAT_EV_CALL_BEGIN:
        if (a->open != -1 || !ev->name || !ev->name[0] || !ev->id) __builtin_trap();
        a->open = ev->index;
        app(&a->calls, &a->nk, &a->ck, ev->name, strlen(ev->name));
        app(&a->calls, &a->nk, &a->ck, "\x01", 1);
        g_args_start = a->nk;
        break;
    case RW_CHAT_EV_CALL_ARGS:
        if (a->open != ev->index) __builtin_trap();
        app(&a->calls, &a->nk, &a->ck, ev->text, ev->len);
        break;
    case RW_CHAT_EV_CALL_END: {
        if (a->open != ev->index) __builtin_trap();
        json_error_t je;
        json_t *j = json_loadb(a->calls + g_args_start, a->nk - g_args_start, JSON_ALLOW_NUL, &je); /* \u0000 is JSON */
        /* arguments are always a JSON object; a number past jansson's range
         * (a 300-digit integer) is still JSON, which jansson cannot hold */
        if (!json_is_object(j) && !(!j && json_error_code(&je) == json_error_numeric_overflow)) __builtin_trap();
        json_decref(j);
        app(&a->calls, &a->nk, &a->ck, "\x02", 1);
        a->open = -1;
        break;
    }
    }
    return RW_OK;
}

static void run(const rw_chat_output_opts *o, const char *text, size_t len, const size_t *cuts, int n_cuts, acc *a) {
    memset(a, 0, sizeof *a);
    a->open = -1;
    rw_chat_output *p;
    if (rw_chat_output_new(o, &p, NULL)) __builtin_trap();
    size_t at = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;
        if (rw_chat_output_feed(p, text + at, to - at, on_ev, a, NULL)) __builtin_trap();
        at = to;
    }
    if (rw_chat_output_finish(p, on_ev, a, NULL)) __builtin_trap();
    if (a->open != -1) __builtin_trap();
    rw_chat_output_free(p);
}

static bool eq(const char *a, size_t na, const char *b, size_t nb) { return na == nb && (!na || !memcmp(a, b, na)); }

static void same(const acc *a, const acc *b) {
    if (!eq(a->content, a->nc, b->content, b->nc) || !eq(a->reasoning, a->nr, b->reasoning, b->nr) ||
        !eq(a->calls, a->nk, b->calls, b->nk))
        __builtin_trap();
}

static void done(acc *a) {
    free(a->content);
    free(a->reasoning);
    free(a->calls);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (size < 3) return 0;
    const char *text = (const char *)data + 3;
    size_t len = size - 3;
    rw_chat_output_opts o = {
        .tool_format = (rw_tool_format)(data[0] % (RW_TOOL_FMT_LAST + 1)),
        .max_calls = data[1] & 8 ? 1 : 0,
        .reasoning = data[1] & 1 ? RW_REASONING_DEEPSEEK : RW_REASONING_NONE,
        .in_reasoning = (data[1] & 2) != 0,
        .stream_args = (data[1] & 4) != 0,
        .tools_json = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                      "\"properties\":{\"a\":{\"type\":\"integer\"},\"s\":{\"type\":\"string\"}}}}}]",
        .id_seed = 7,
    };
    acc whole, split;
    run(&o, text, len, NULL, 0, &whole);
    size_t cut = len ? data[2] % (len + 1) : 0;
    run(&o, text, len, &cut, 1, &split);
    same(&whole, &split);
    done(&split);
    if (len <= 256) {
        size_t cuts[256];
        for (size_t i = 0; i + 1 < len; i++) cuts[i] = i + 1;
        run(&o, text, len, cuts, len ? (int)len - 1 : 0, &split);
        same(&whole, &split);
        done(&split);
    }
    rw_chat_parsed m;
    if (rw_chat_output_parse(&o, text, len, &m, NULL)) __builtin_trap();
    if (!o.stream_args && !eq(m.content, m.content_len, whole.content, whole.nc)) __builtin_trap();
    rw_chat_parsed_free(&m);
    done(&whole);

    json_t *msgs = json_loadb(text, len, 0, NULL);
    if (msgs) {
        rw_chat_caps caps = {.tool_ids_9 = (data[1] & 8) != 0};
        json_t *out = NULL;
        rw_error err = {0};
        if (rw_chat_normalize_messages(msgs, &caps, &out, &err) == RW_OK && !json_is_array(out)) __builtin_trap();
        json_decref(out);
        json_decref(msgs);
    }
    return 0;
}
