/* output.c - generated text to content, reasoning and tool call events
 * (output.h).
 *
 * The parser keeps the text it cannot decide yet in `pend` and moves
 * through states as markers show up:
 *
 *   START -> (think open) -> REASON_LEAD -> REASON -> (think close) -> BODY
 *   START -> BODY                       (no think block)
 *   BODY  -> BARE (a '{' or '[' opens the message: a bare JSON call, llama3 /
 *            granite / generic) or CONTENT
 *   CONTENT -> (call marker) -> CALL -> (end marker) -> AFTER_CALL -> CONTENT
 *
 * In CONTENT and REASON, text is let out up to the longest suffix that could
 * still begin a marker (and trailing whitespace, which a following call or
 * the close of the block swallows); so a marker split over pieces never
 * leaks. A call's text is held whole and parsed when its end is seen (or at
 * finish); if it does not parse, that text goes out as content. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/output_int.h"

enum { S_PASS, S_START, S_REASON_LEAD, S_REASON, S_BODY, S_BARE, S_BARE_NEXT, S_CONTENT, S_CALL, S_AFTER_CALL };

/* The markers that open a call in text, per format; end: the marker that
 * closes it (NULL: the body is one JSON value, closed when balanced);
 * keep: the marker belongs to the body (Qwen3-Coder's bare <function=...>). */
typedef struct {
    const char *open, *end;
    bool keep;
} marker;

static const marker M_TOOL_CALL = {"<tool_call>", "</tool_call>", false};
static const marker M_FUNCTION = {"<function=", "</function>", true};
static const marker M_GRANITE = {"<|tool_call|>", NULL, false};
static const marker M_PYTHON = {"<|python_tag|>", NULL, false};
static const marker M_NEMOTRON = {"<TOOLCALL>", "</TOOLCALL>", false};
static const marker M_MISTRAL = {"[TOOL_CALLS]", NULL, false};

static int markers_of(rw_tool_format f, const marker **out) {
    int n = 0;
    switch (f) {
    case RW_TOOL_FMT_QWEN_XML: out[n++] = &M_TOOL_CALL; out[n++] = &M_FUNCTION; break;
    case RW_TOOL_FMT_HERMES: out[n++] = &M_TOOL_CALL; break;
    case RW_TOOL_FMT_LLAMA3: out[n++] = &M_PYTHON; break;
    case RW_TOOL_FMT_GRANITE: out[n++] = &M_GRANITE; out[n++] = &M_TOOL_CALL; break;
    case RW_TOOL_FMT_GENERIC:
        out[n++] = &M_TOOL_CALL;
        out[n++] = &M_GRANITE;
        out[n++] = &M_PYTHON;
        out[n++] = &M_NEMOTRON;
        out[n++] = &M_MISTRAL;
        break;
    case RW_TOOL_FMT_NONE: break;
    }
    return n;
}

struct rw_chat_output {
    rw_tool_format fmt;
    bool reasoning;
    char *open, *close, *id_prefix; /* owned */
    json_t *tools;                  /* owned, or NULL */
    uint64_t id_seed;
    int state;
    char *pend; /* undecided text; pend[n] = 0 */
    size_t n, cap;
    const marker *call;  /* S_CALL: the marker that opened it */
    size_t call_lead;    /* S_CALL: whitespace before the marker at pend's head */
    size_t scan_from;    /* S_CALL / S_BARE: resume point of the end search */
    bool after_think;    /* a think block was taken out: the whitespace after it is not content */
    rw_chat__jscan js;
    int n_calls;
    bool finished;
    rw_chat_event_fn fn;
    void *user;
};

const char *rw_tool_format_name(rw_tool_format f) {
    switch (f) {
    case RW_TOOL_FMT_NONE: return "none";
    case RW_TOOL_FMT_GENERIC: return "generic";
    case RW_TOOL_FMT_QWEN_XML: return "qwen-xml";
    case RW_TOOL_FMT_HERMES: return "hermes";
    case RW_TOOL_FMT_LLAMA3: return "llama3";
    case RW_TOOL_FMT_GRANITE: return "granite";
    }
    return "?";
}

bool rw_tool_format_parse(const char *name, rw_tool_format *out) {
    for (int f = RW_TOOL_FMT_NONE; f <= RW_TOOL_FMT_GRANITE; f++)
        if (!strcmp(name, rw_tool_format_name((rw_tool_format)f))) {
            *out = (rw_tool_format)f;
            return true;
        }
    return false;
}

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

int rw_chat__jscan_run(rw_chat__jscan *s, const char *p, size_t n) {
    for (; s->pos < n; s->pos++) {
        char c = p[s->pos];
        if (!s->started) {
            if (is_ws(c)) continue;
            if (c != '{' && c != '[') return -1;
            s->started = true;
            s->depth = 1;
            continue;
        }
        if (s->in_str) {
            if (s->esc) s->esc = false;
            else if (c == '\\') s->esc = true;
            else if (c == '"') s->in_str = false;
            continue;
        }
        if (c == '"') s->in_str = true;
        else if (c == '{' || c == '[') {
            if (++s->depth > 512) return -1;
        } else if (c == '}' || c == ']') {
            if (--s->depth == 0) {
                s->pos++;
                return 1;
            }
        }
    }
    return 0;
}

rw_status rw_chat_output_new(const rw_chat_output_opts *o, rw_chat_output **out, rw_error *err) {
    *out = NULL;
    rw_chat_output *p = calloc(1, sizeof *p);
    if (!p) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    p->fmt = o->tool_format;
    p->reasoning = o->reasoning == RW_REASONING_DEEPSEEK;
    p->open = strdup(o->think_open && *o->think_open ? o->think_open : "<think>");
    p->close = strdup(o->think_close && *o->think_close ? o->think_close : "</think>");
    p->id_prefix = strdup(o->id_prefix ? o->id_prefix : "call_");
    p->id_seed = o->id_seed;
    if (!p->open || !p->close || !p->id_prefix) {
        rw_chat_output_free(p);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    if (o->tools_json) {
        json_error_t je;
        p->tools = json_loads(o->tools_json, 0, &je); /* not an array: no schemas, values typed by their text */
        if (p->tools && !json_is_array(p->tools)) {
            json_decref(p->tools);
            p->tools = NULL;
        }
    }
    if (p->fmt == RW_TOOL_FMT_NONE && !p->reasoning) p->state = S_PASS;
    else if (p->reasoning && o->in_reasoning) p->state = S_REASON_LEAD;
    else p->state = S_START;
    *out = p;
    return RW_OK;
}

void rw_chat_output_free(rw_chat_output *p) {
    if (!p) return;
    free(p->open);
    free(p->close);
    free(p->id_prefix);
    json_decref(p->tools);
    free(p->pend);
    free(p);
}

int rw_chat_output_n_calls(const rw_chat_output *p) { return p->n_calls; }

bool rw_chat_output_in_reasoning(const rw_chat_output *p) {
    return p->state == S_REASON || p->state == S_REASON_LEAD;
}

/* ---- emitting ---- */

static rw_status emit(rw_chat_output *p, rw_chat_event_kind k, const char *s, size_t n) {
    if (!n) return RW_OK;
    rw_chat_event ev = {.kind = k, .text = s, .len = n};
    return p->fn(p->user, &ev);
}

static void consume(rw_chat_output *p, size_t k) {
    memmove(p->pend, p->pend + k, p->n - k);
    p->n -= k;
    p->pend[p->n] = 0;
}

/* splitmix64: the ids' random part from the seed and the call's index. */
static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static rw_status emit_calls(rw_chat_output *p, rw_chat__calls *c) {
    for (int i = 0; i < c->n; i++) {
        int index = p->n_calls++;
        uint64_t a = mix(p->id_seed ^ mix((uint64_t)index)), b = mix(a);
        char id[128];
        snprintf(id, sizeof id, "%.80s%016llx%08llx", p->id_prefix, (unsigned long long)a,
                 (unsigned long long)(b >> 32));
        rw_chat_event ev = {.kind = RW_CHAT_EV_CALL_BEGIN, .index = index, .id = id, .name = c->v[i].name};
        rw_status s = p->fn(p->user, &ev);
        if (s) return s;
        ev = (rw_chat_event){.kind = RW_CHAT_EV_CALL_ARGS, .index = index, .text = c->v[i].args,
                             .len = strlen(c->v[i].args)};
        if ((s = p->fn(p->user, &ev))) return s;
        ev = (rw_chat_event){.kind = RW_CHAT_EV_CALL_END, .index = index};
        if ((s = p->fn(p->user, &ev))) return s;
    }
    return RW_OK;
}

/* ---- scanning helpers ---- */

static bool starts(const char *s, size_t n, const char *m) {
    size_t k = strlen(m);
    return n >= k && !memcmp(s, m, k);
}

/* s[0..n) is a proper prefix of m (more text could complete it). */
static bool prefix_of(const char *s, size_t n, const char *m) {
    size_t k = strlen(m);
    return n < k && !memcmp(s, m, n);
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of one of
 * the markers (text that must wait for the next piece). */
static size_t held_suffix(const char *s, size_t n, const char *const *m, int nm) {
    size_t best = 0;
    for (int i = 0; i < nm; i++) {
        size_t k = strlen(m[i]);
        for (size_t l = k - 1 < n ? k - 1 : n; l > best; l--)
            if (!memcmp(s + n - l, m[i], l)) {
                best = l;
                break;
            }
    }
    return best;
}

static const char *memfind(const char *h, size_t n, const char *needle) {
    size_t k = strlen(needle);
    if (k > n) return NULL;
    return memmem(h, n, needle, k);
}

/* ---- the state machine ---- */

/* One step; *progress is set when the state or pend changed. */
static rw_status step(rw_chat_output *p, bool *progress) {
    const bool fin = p->finished;
    rw_status s = RW_OK;
    *progress = false;
    switch (p->state) {
    case S_PASS:
        s = emit(p, RW_CHAT_EV_CONTENT, p->pend, p->n);
        consume(p, p->n);
        return s;

    case S_START: {
        size_t i = 0;
        while (i < p->n && is_ws(p->pend[i])) i++;
        if (i == p->n && !fin) return RW_OK;
        if (p->reasoning) {
            if (starts(p->pend + i, p->n - i, p->open)) {
                consume(p, i + strlen(p->open));
                p->state = S_REASON_LEAD;
                *progress = true;
                return RW_OK;
            }
            if (!fin && prefix_of(p->pend + i, p->n - i, p->open)) return RW_OK;
        }
        p->state = S_BODY;
        *progress = true;
        return RW_OK;
    }

    case S_REASON_LEAD: {
        size_t i = 0;
        while (i < p->n && is_ws(p->pend[i])) i++;
        consume(p, i);
        if (p->n == 0 && !fin) return RW_OK;
        p->state = S_REASON;
        *progress = true;
        return RW_OK;
    }

    case S_REASON: {
        const char *c = memfind(p->pend, p->n, p->close);
        if (c) {
            size_t k = (size_t)(c - p->pend), e = k;
            while (e > 0 && is_ws(p->pend[e - 1])) e--;
            s = emit(p, RW_CHAT_EV_REASONING, p->pend, e);
            consume(p, k + strlen(p->close));
            p->state = S_BODY;
            p->after_think = true;
            *progress = true;
            return s;
        }
        size_t safe = p->n;
        if (!fin) {
            const char *m[1] = {p->close};
            safe -= held_suffix(p->pend, p->n, m, 1);
            while (safe > 0 && is_ws(p->pend[safe - 1])) safe--;
        } else {
            while (safe > 0 && is_ws(p->pend[safe - 1])) safe--; /* an unclosed block stays reasoning */
            s = emit(p, RW_CHAT_EV_REASONING, p->pend, safe);
            consume(p, p->n);
            return s;
        }
        s = emit(p, RW_CHAT_EV_REASONING, p->pend, safe);
        consume(p, safe);
        return s;
    }

    case S_BODY: {
        size_t i = 0;
        while (i < p->n && is_ws(p->pend[i])) i++;
        if (i == p->n && !fin) return RW_OK;
        bool bare = p->fmt == RW_TOOL_FMT_LLAMA3 || p->fmt == RW_TOOL_FMT_GRANITE || p->fmt == RW_TOOL_FMT_GENERIC;
        if (bare && i < p->n && (p->pend[i] == '{' || p->pend[i] == '[')) {
            consume(p, i);
            p->state = S_BARE;
            p->js = (rw_chat__jscan){0};
        } else {
            /* leading whitespace is the content's own, unless it follows a think block */
            if (p->after_think) consume(p, i);
            p->state = S_CONTENT;
        }
        *progress = true;
        return RW_OK;
    }

    case S_BARE: {
        int r = rw_chat__jscan_run(&p->js, p->pend, p->n);
        if (r == 0 && !fin) return RW_OK;
        if (r == 1) {
            rw_chat__calls calls = {0};
            if (rw_chat__parse_json_calls(p->pend, p->js.pos, true, &calls)) {
                s = emit_calls(p, &calls);
                rw_chat__calls_free(&calls);
                consume(p, p->js.pos);
                p->state = S_BARE_NEXT;
                *progress = true;
                return s;
            }
            rw_chat__calls_free(&calls);
        }
        p->state = S_CONTENT; /* not a call: the text is content */
        *progress = true;
        return RW_OK;
    }

    case S_BARE_NEXT: {
        size_t i = 0;
        while (i < p->n && (is_ws(p->pend[i]) || p->pend[i] == ';')) i++;
        if (i == p->n && !fin) return RW_OK;
        consume(p, i);
        if (p->n && (p->pend[0] == '{' || p->pend[0] == '[')) {
            p->state = S_BARE;
            p->js = (rw_chat__jscan){0};
        } else p->state = S_CONTENT;
        *progress = true;
        return RW_OK;
    }

    case S_CONTENT: {
        const marker *ms[8];
        const char *names[8];
        int nm = markers_of(p->fmt, ms);
        for (int i = 0; i < nm; i++) names[i] = ms[i]->open;
        const char *first = NULL;
        const marker *which = NULL;
        for (int i = 0; i < nm; i++) {
            const char *f = memfind(p->pend, p->n, ms[i]->open);
            if (f && (!first || f < first)) {
                first = f;
                which = ms[i];
            }
        }
        if (first) {
            size_t k = (size_t)(first - p->pend), e = k;
            while (e > 0 && is_ws(p->pend[e - 1])) e--;
            s = emit(p, RW_CHAT_EV_CONTENT, p->pend, e);
            consume(p, e);
            p->state = S_CALL;
            p->call = which;
            p->call_lead = k - e;
            p->scan_from = k - e + (which->keep ? 0 : strlen(which->open));
            p->js = (rw_chat__jscan){.pos = p->scan_from};
            *progress = true;
            return s;
        }
        size_t safe = p->n;
        if (!fin) {
            safe -= held_suffix(p->pend, p->n, names, nm);
            while (safe > 0 && is_ws(p->pend[safe - 1])) safe--;
        }
        s = emit(p, RW_CHAT_EV_CONTENT, p->pend, safe);
        consume(p, safe);
        return s;
    }

    case S_CALL: {
        const size_t body = p->call_lead + (p->call->keep ? 0 : strlen(p->call->open));
        size_t body_end = 0, end = 0; /* body_end: where the body stops; end: where the call's text stops */
        bool found = false;
        if (p->call->end) {
            size_t el = strlen(p->call->end);
            const char *f = memfind(p->pend + p->scan_from, p->n - p->scan_from, p->call->end);
            if (f) {
                found = true;
                body_end = (size_t)(f - p->pend) + (p->call->keep ? el : 0);
                end = (size_t)(f - p->pend) + el;
            } else if (p->n + 1 > el && p->n + 1 - el > p->scan_from) p->scan_from = p->n + 1 - el; /* resume there */
        } else {
            int r = rw_chat__jscan_run(&p->js, p->pend, p->n);
            if (r == 1) {
                found = true;
                body_end = end = p->js.pos;
            } else if (r < 0) {
                found = true; /* not JSON: fails to parse below, goes out as content */
                body_end = end = p->n;
            }
        }
        if (!found && !fin) return RW_OK;
        if (!found) body_end = end = p->n; /* cut off: parse what there is (a missing close tag is forgiven) */
        rw_chat__calls calls = {0};
        bool ok = rw_chat__parse_call_body(p->pend + body, body_end - body, p->call == &M_FUNCTION, p->tools,
                                           &calls);
        if (ok) s = emit_calls(p, &calls);
        else s = emit(p, RW_CHAT_EV_CONTENT, p->pend, end);
        rw_chat__calls_free(&calls);
        consume(p, end);
        p->state = ok ? S_AFTER_CALL : S_CONTENT;
        *progress = true;
        return s;
    }

    case S_AFTER_CALL: {
        size_t i = 0;
        while (i < p->n && is_ws(p->pend[i])) i++;
        if (i == p->n && !fin) return RW_OK;
        consume(p, i);
        p->state = S_CONTENT;
        *progress = p->n > 0 || !fin;
        return RW_OK;
    }
    }
    return RW_OK;
}

static rw_status run(rw_chat_output *p, rw_chat_event_fn fn, void *user, rw_error *err) {
    p->fn = fn;
    p->user = user;
    for (;;) {
        bool progress;
        rw_status s = step(p, &progress);
        if (s) return rw_errorf(err, s, "stopped by the event callback (%s)", rw_status_name(s));
        if (!progress) break;
    }
    return RW_OK;
}

rw_status rw_chat_output_feed(rw_chat_output *p, const char *text, size_t len, rw_chat_event_fn fn, void *user,
                              rw_error *err) {
    if (p->n + len + 1 > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->n + len + 1) cap *= 2;
        char *q = realloc(p->pend, cap);
        if (!q) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        p->pend = q;
        p->cap = cap;
    }
    memcpy(p->pend + p->n, text, len);
    p->n += len;
    p->pend[p->n] = 0;
    return run(p, fn, user, err);
}

rw_status rw_chat_output_finish(rw_chat_output *p, rw_chat_event_fn fn, void *user, rw_error *err) {
    if (!p->pend) {
        p->pend = malloc(1);
        if (!p->pend) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        p->pend[0] = 0;
        p->cap = 1;
    }
    p->finished = true;
    rw_status s = run(p, fn, user, err);
    if (!s && p->n) { /* whatever a final state left: content */
        p->fn = fn;
        p->user = user;
        s = emit(p, RW_CHAT_EV_CONTENT, p->pend, p->n);
        consume(p, p->n);
        if (s) return rw_errorf(err, s, "stopped by the event callback (%s)", rw_status_name(s));
    }
    return s;
}

/* ---- non-streaming ---- */

typedef struct {
    rw_chat_message *m;
    size_t content_cap, reasoning_cap;
    int calls_cap;
    size_t args_len, args_cap; /* of the last call's arguments */
} collect;

static bool append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 64;
        while (c < *len + n + 1) c *= 2;
        char *q = realloc(*buf, c);
        if (!q) return false;
        *buf = q;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return true;
}

static rw_status on_collect(void *user, const rw_chat_event *ev) {
    collect *c = user;
    rw_chat_message *m = c->m;
    switch (ev->kind) {
    case RW_CHAT_EV_CONTENT:
        return append(&m->content, &m->content_len, &c->content_cap, ev->text, ev->len) ? RW_OK : RW_ERR_NOMEM;
    case RW_CHAT_EV_REASONING:
        return append(&m->reasoning, &m->reasoning_len, &c->reasoning_cap, ev->text, ev->len) ? RW_OK : RW_ERR_NOMEM;
    case RW_CHAT_EV_CALL_BEGIN: {
        if (m->n_calls == c->calls_cap) {
            int cap = c->calls_cap ? c->calls_cap * 2 : 4;
            rw_chat_tool_call *q = realloc(m->calls, (size_t)cap * sizeof *q);
            if (!q) return RW_ERR_NOMEM;
            m->calls = q;
            c->calls_cap = cap;
        }
        rw_chat_tool_call *t = &m->calls[m->n_calls++];
        t->id = strdup(ev->id);
        t->name = strdup(ev->name);
        t->arguments = NULL;
        c->args_len = c->args_cap = 0;
        return t->id && t->name ? RW_OK : RW_ERR_NOMEM;
    }
    case RW_CHAT_EV_CALL_ARGS: {
        rw_chat_tool_call *t = &m->calls[m->n_calls - 1];
        return append(&t->arguments, &c->args_len, &c->args_cap, ev->text, ev->len) ? RW_OK : RW_ERR_NOMEM;
    }
    case RW_CHAT_EV_CALL_END: {
        rw_chat_tool_call *t = &m->calls[m->n_calls - 1];
        if (!t->arguments && !(t->arguments = strdup("{}"))) return RW_ERR_NOMEM;
        return RW_OK;
    }
    }
    return RW_OK;
}

rw_status rw_chat_output_parse(const rw_chat_output_opts *o, const char *text, size_t len, rw_chat_message *out,
                               rw_error *err) {
    memset(out, 0, sizeof *out);
    rw_chat_output *p;
    rw_status s = rw_chat_output_new(o, &p, err);
    if (s) return s;
    collect c = {.m = out};
    s = rw_chat_output_feed(p, text, len, on_collect, &c, err);
    if (!s) s = rw_chat_output_finish(p, on_collect, &c, err);
    rw_chat_output_free(p);
    if (!s && !out->content && !(out->content = calloc(1, 1))) s = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    if (s) rw_chat_message_free(out);
    return s;
}

void rw_chat_message_free(rw_chat_message *m) {
    if (!m) return;
    free(m->content);
    free(m->reasoning);
    for (int i = 0; i < m->n_calls; i++) {
        free(m->calls[i].id);
        free(m->calls[i].name);
        free(m->calls[i].arguments);
    }
    free(m->calls);
    memset(m, 0, sizeof *m);
}
