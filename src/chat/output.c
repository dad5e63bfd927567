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
 * finish); if it does not parse, that text goes out as content. DeepSeek's
 * list marker is passed over (S_AFTER_CALL also passes its end), so each
 * call in it is a call of its own. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/output_int.h"

enum { S_PASS, S_START, S_REASON_LEAD, S_REASON, S_BODY, S_BARE, S_BARE_NEXT, S_CONTENT, S_CALL, S_AFTER_CALL };

/* The markers that open a call in text, per format; end: the marker that
 * closes it (NULL: the body is one JSON value, closed when balanced);
 * keep: the marker belongs to the body (Qwen3-Coder's bare <function=...>);
 * body: how the body is read. */
enum { B_JSON_XML, B_DEEPSEEK, B_PYTHONIC, B_PYTHON_TAG };
typedef struct {
    const char *open, *end;
    bool keep;
    int body;
} marker;

static const marker M_TOOL_CALL = {"<tool_call>", "</tool_call>", false, B_JSON_XML};
static const marker M_FUNCTION = {"<function=", "</function>", true, B_JSON_XML};
static const marker M_GRANITE = {"<|tool_call|>", NULL, false, B_JSON_XML};
static const marker M_PYTHON = {"<|python_tag|>", NULL, false, B_PYTHON_TAG};
static const marker M_NEMOTRON = {"<TOOLCALL>", "</TOOLCALL>", false, B_JSON_XML};
static const marker M_MISTRAL = {"[TOOL_CALLS]", NULL, false, B_JSON_XML};
static const marker M_DS_CALLS = {RW_CHAT_DS_CALLS_BEGIN, RW_CHAT_DS_CALLS_END, false, B_DEEPSEEK};
static const marker M_DS_CALL = {RW_CHAT_DS_CALL_BEGIN, RW_CHAT_DS_CALL_END, true, B_DEEPSEEK}; /* a call without the list's marker */
static const marker M_LFM2 = {"<|tool_call_start|>", "<|tool_call_end|>", false, B_PYTHONIC};

static int markers_of(rw_tool_format f, const marker **out) {
    int n = 0;
    switch (f) {
    case RW_TOOL_FMT_QWEN_XML: out[n++] = &M_TOOL_CALL; out[n++] = &M_FUNCTION; break;
    case RW_TOOL_FMT_HERMES: out[n++] = &M_TOOL_CALL; break;
    case RW_TOOL_FMT_LLAMA3: out[n++] = &M_PYTHON; break;
    case RW_TOOL_FMT_GRANITE: out[n++] = &M_GRANITE; out[n++] = &M_TOOL_CALL; break;
    case RW_TOOL_FMT_DEEPSEEK:
        out[n++] = &M_DS_CALLS;
        out[n++] = &M_DS_CALL;
        break;
    case RW_TOOL_FMT_NEMOTRON: out[n++] = &M_NEMOTRON; break;
    case RW_TOOL_FMT_LFM2: out[n++] = &M_LFM2; break;
    case RW_TOOL_FMT_MISTRAL: out[n++] = &M_MISTRAL; break;
    case RW_TOOL_FMT_GENERIC:
        out[n++] = &M_TOOL_CALL;
        out[n++] = &M_GRANITE;
        out[n++] = &M_PYTHON;
        out[n++] = &M_NEMOTRON;
        out[n++] = &M_MISTRAL;
        break;
    case RW_TOOL_FMT_NONE:
    case RW_TOOL_FMT_HARMONY: break; /* harmony.c parses it */
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
    bool stream_args;
    /* S_CALL with stream_args, a Qwen XML call sent as it comes: */
    int xs;              /* 0 before <function=...>, 1 in its parameters, 2 after </function> */
    size_t xpos;         /* where the XML is read next (offset in pend) */
    int xparams;         /* parameters sent for the current call */
    int xindex;          /* its index */
    char *xname;         /* its name (owned) */
    bool xml_stream;     /* this call is streamed (its body is XML) */
    bool xml_tried;      /* it broke before its begin: parsed whole instead */
    size_t xsent;        /* xs 3 (a string parameter's text streaming): its text sent up to here */
    bool xfirst;         /* xs 3: its first byte (a newline the template writes) not looked at yet */
    /* S_CALL with stream_args, a Hermes JSON call sent as it comes: */
    bool json_stream;
    int jstate;  /* 0 arguments coming, 1 after them, 2 the next call of a list, 3 the end */
    bool jlist;  /* the calls are a JSON list [{...}, ...] */
    bool jbare;  /* a bare message (no marker): after it, S_BARE_NEXT */
    bool jtried; /* S_BARE: its head was not a call's: parsed whole */
    bool jnaked; /* the arguments are not inside a call object (Mistral's NAME[ARGS]{...}) */
    size_t jat;  /* jstate 2: where the next call's object starts; 3: where the end is looked for */
    rw_chat__jval jv;
    size_t jsent;        /* the arguments' text sent up to here (offset in pend) */
    bool jin_str, jesc;  /* where the sending is, to drop whitespace outside strings */
    rw_chat__jscan js;
    int n_calls;
    bool finished;
    bool cut; /* the token limit cut the output: unfinished calls are dropped at finish */
    bool to_end;         /* S_CALL: a <|python_tag|> body that is not JSON runs to the end of the text */
    bool mnamed;         /* S_CALL: Mistral's [TOOL_CALLS]NAME[ARGS]{...}, the name at pend[mname_b..mname_e) */
    size_t mname_b, mname_e;
    int max_calls;       /* > 0: events after that many calls ended are dropped */
    int n_ended;         /* calls ended (CALL_END sent) */
    rw_chat_event_fn fn; /* the events go through limit() (max_calls) ... */
    void *user;
    rw_chat_event_fn out_fn; /* ... to the caller's callback */
    void *out_user;
    rw_chat__harmony *hm; /* RW_TOOL_FMT_HARMONY: the parser the text goes to instead; owned */
};

const char *rw_tool_format_name(rw_tool_format f) {
    switch (f) {
    case RW_TOOL_FMT_NONE: return "none";
    case RW_TOOL_FMT_GENERIC: return "generic";
    case RW_TOOL_FMT_QWEN_XML: return "qwen-xml";
    case RW_TOOL_FMT_HERMES: return "hermes";
    case RW_TOOL_FMT_LLAMA3: return "llama3";
    case RW_TOOL_FMT_GRANITE: return "granite";
    case RW_TOOL_FMT_HARMONY: return "harmony";
    case RW_TOOL_FMT_DEEPSEEK: return "deepseek";
    case RW_TOOL_FMT_NEMOTRON: return "nemotron";
    case RW_TOOL_FMT_LFM2: return "lfm2";
    case RW_TOOL_FMT_MISTRAL: return "mistral";
    }
    return "?";
}

bool rw_tool_format_parse(const char *name, rw_tool_format *out) {
    for (int f = RW_TOOL_FMT_NONE; f <= RW_TOOL_FMT_LAST; f++)
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
    p->stream_args = o->stream_args;
    p->cut = o->cut;
    p->max_calls = o->max_calls > 0 ? o->max_calls : 0;
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
    if (p->fmt == RW_TOOL_FMT_HARMONY && rw_chat__harmony_new(p->reasoning, p->id_prefix, p->id_seed, &p->hm)) {
        rw_chat_output_free(p);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
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
    free(p->xname);
    rw_chat__harmony_free(p->hm);
    free(p);
}

int rw_chat_output_n_calls(const rw_chat_output *p) {
    int n = p->hm ? rw_chat__harmony_n_calls(p->hm) : p->n_calls;
    return p->max_calls && n > p->max_calls ? p->max_calls : n;
}

bool rw_chat_output_calls_done(const rw_chat_output *p) { return p->max_calls && p->n_ended >= p->max_calls; }

/* Every event passes here: once max_calls calls have ended, nothing more
 * goes out (a later call, the text after the last one). */
static rw_status limit(void *user, const rw_chat_event *ev) {
    rw_chat_output *p = user;
    if (rw_chat_output_calls_done(p)) return RW_OK;
    if (ev->kind == RW_CHAT_EV_CALL_END) p->n_ended++;
    return p->out_fn(p->out_user, ev);
}

bool rw_chat_output_in_reasoning(const rw_chat_output *p) {
    if (p->hm) return rw_chat__harmony_in_reasoning(p->hm);
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

static void make_id(const rw_chat_output *p, int index, char id[128]) { rw_chat__call_id(p->id_prefix, p->id_seed, index, id); }

static rw_status emit_calls(rw_chat_output *p, rw_chat__calls *c) {
    for (int i = 0; i < c->n; i++) {
        int index = p->n_calls++;
        char id[128];
        make_id(p, index, id);
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

/* ---- a Qwen XML call sent as it comes (stream_args) ---- */

static rw_status call_piece(rw_chat_output *p, const char *s, size_t n) {
    rw_chat_event ev = {.kind = RW_CHAT_EV_CALL_ARGS, .index = p->xindex, .text = s, .len = n};
    return p->fn(p->user, &ev);
}

/* Ends the current call: its arguments object closed. */
static rw_status xml_close_call(rw_chat_output *p) {
    rw_status s = call_piece(p, p->xparams ? "}" : "{}", p->xparams ? 1 : 2);
    rw_chat_event ev = {.kind = RW_CHAT_EV_CALL_END, .index = p->xindex};
    if (!s) s = p->fn(p->user, &ev);
    free(p->xname);
    p->xname = NULL;
    p->xs = 2;
    return s;
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

/* One parameter: {"k":v or ,"k":v (key and value as the whole-call dump writes them). */
static rw_status xml_param(rw_chat_output *p, const char *key, size_t kn, const char *v, size_t vn) {
    json_t *kj = json_stringn(key, kn), *vj = rw_chat__xml_value(p->tools, p->xname, key, v, vn);
    char *ks = kj ? json_dumps(kj, JSON_ENCODE_ANY) : NULL, *vs = vj ? json_dumps(vj, RW_CHAT_ARGS_DUMP | JSON_ENCODE_ANY) : NULL;
    json_decref(kj);
    json_decref(vj);
    rw_status st = RW_ERR_NOMEM;
    size_t kl = ks ? strlen(ks) : 0, vl = vs ? strlen(vs) : 0;
    char *piece = ks && vs ? malloc(kl + vl + 3) : NULL;
    if (piece) {
        size_t o = 0;
        piece[o++] = p->xparams ? ',' : '{';
        memcpy(piece + o, ks, kl);
        o += kl;
        piece[o++] = ':';
        memcpy(piece + o, vs, vl);
        o += vl;
        st = call_piece(p, piece, o);
        p->xparams++;
    }
    free(piece);
    free(ks);
    free(vs);
    return st;
}

/* The call's text breaks the XML at xpos: a call already begun is closed
 * and the text from there is content; otherwise the whole call is. */
static rw_status xml_fail(rw_chat_output *p) {
    rw_status s = RW_OK;
    p->xml_stream = false;
    if (p->xs == 0) { /* nothing sent: the call's text is judged whole, as without stream_args */
        p->xml_tried = true;
        return RW_OK;
    }
    if (p->xs == 1) s = xml_close_call(p);
    consume(p, p->finished && p->cut ? p->n : p->xpos); /* cut: the rest is the call's, not content */
    p->state = S_CONTENT;
    return s;
}

/* A parameter name: a call name's rules, and well-formed UTF-8 (a JSON key). */
static bool valid_key(const char *s, size_t n) {
    if (!rw_chat__valid_name(s, n)) return false;
    for (size_t i = 0; i < n;) {
        int l = rw_chat__utf8_len((const unsigned char *)s + i, n - i);
        if (l <= 0) return false;
        i += (size_t)l;
    }
    return true;
}

static rw_status step_xml(rw_chat_output *p, bool *progress) {
    const bool fin = p->finished;
    const char *b = p->pend;
    const size_t n = p->n;
    size_t i = skip_ws(b, n, p->xpos);
    rw_status s = RW_OK;
    if (p->xs == 0) {
        if (!fin && i + 10 > n && prefix_of(b + i, n - i, "<function=")) return RW_OK;
        if (!starts(b + i, n - i, "<function=")) return (*progress = true), xml_fail(p);
        const char *gt = memchr(b + i + 10, '>', n - i - 10);
        if (!gt) return fin ? ((*progress = true), xml_fail(p)) : RW_OK;
        size_t nb = i + 10, ne = (size_t)(gt - b);
        nb = skip_ws(b, ne, nb);
        while (ne > nb && is_ws(b[ne - 1])) ne--;
        if (!rw_chat__valid_name(b + nb, ne - nb)) return (*progress = true), xml_fail(p);
        free(p->xname);
        if (!(p->xname = strndup(b + nb, ne - nb))) return RW_ERR_NOMEM;
        p->xindex = p->n_calls++;
        p->xparams = 0;
        char id[128];
        make_id(p, p->xindex, id);
        rw_chat_event ev = {.kind = RW_CHAT_EV_CALL_BEGIN, .index = p->xindex, .id = id, .name = p->xname};
        s = p->fn(p->user, &ev);
        p->xs = 1;
        p->xpos = (size_t)(gt - b) + 1;
        *progress = true;
        return s;
    }
    if (p->xs == 3) { /* a string parameter's text */
        if (p->xfirst) {
            if (p->xsent == n && !fin) return RW_OK;
            if (p->xsent < n && b[p->xsent] == '\n') p->xsent++; /* the newline the template writes before it */
            p->xfirst = false;
            *progress = true;
        }
        const char *end = memfind(b + p->xsent, n - p->xsent, "</parameter>");
        size_t upto;
        bool last = end || fin;
        if (end) {
            upto = (size_t)(end - b);
            if (upto > p->xsent && b[upto - 1] == '\n') upto--; /* and the one after it */
        } else if (fin) upto = n;
        else {
            const char *m[1] = {"</parameter>"};
            upto = n - held_suffix(b + p->xsent, n - p->xsent, m, 1);
            if (upto > p->xsent && b[upto - 1] == '\n') upto--;
        }
        if (upto > p->xsent) {
            char *esc;
            size_t el, used = rw_chat__json_escape(b + p->xsent, upto - p->xsent, last, &esc, &el);
            if (!esc) return RW_ERR_NOMEM;
            s = el ? call_piece(p, esc, el) : RW_OK;
            free(esc);
            if (used) *progress = true;
            p->xsent += used;
            if (s) return s;
        }
        if (!last) return RW_OK;
        s = call_piece(p, "\"", 1);
        p->xs = 1;
        *progress = true;
        if (end) {
            p->xpos = (size_t)(end - b) + 12;
            return s;
        }
        p->xpos = n; /* cut off inside it: the call ends with what it had */
        return s ? s : xml_fail(p);
    }
    if (p->xs == 1) {
        if (starts(b + i, n - i, "</function>")) {
            p->xpos = i + 11;
            *progress = true;
            return xml_close_call(p);
        }
        if (!starts(b + i, n - i, "<parameter=")) {
            if (!fin && (prefix_of(b + i, n - i, "</function>") || prefix_of(b + i, n - i, "<parameter=")))
                return RW_OK;
            return (*progress = true), xml_fail(p);
        }
        const char *gt = memchr(b + i + 11, '>', n - i - 11);
        size_t kb = skip_ws(b, gt ? (size_t)(gt - b) : n, i + 11), ke = gt ? (size_t)(gt - b) : kb;
        while (ke > kb && is_ws(b[ke - 1])) ke--;
        if (gt && !valid_key(b + kb, ke - kb)) return (*progress = true), xml_fail(p);
        if (gt && ke > kb) { /* a string parameter: its text goes out as it comes */
            char *key = strndup(b + kb, ke - kb);
            if (!key) return RW_ERR_NOMEM;
            bool str = rw_chat__xml_streams_as_string(p->tools, p->xname, key);
            if (str) {
                json_t *kj = json_stringn(key, ke - kb);
                char *ks = kj ? json_dumps(kj, JSON_ENCODE_ANY) : NULL;
                json_decref(kj);
                size_t kl = ks ? strlen(ks) : 0;
                char *piece = ks ? malloc(kl + 3) : NULL;
                if (piece) {
                    piece[0] = p->xparams ? ',' : '{';
                    memcpy(piece + 1, ks, kl);
                    memcpy(piece + 1 + kl, ":\"", 2);
                    s = call_piece(p, piece, kl + 3);
                    p->xparams++;
                } else s = RW_ERR_NOMEM;
                free(piece);
                free(ks);
                free(key);
                p->xs = 3;
                p->xpos = p->xsent = (size_t)(gt - b) + 1;
                p->xfirst = true;
                *progress = true;
                return s;
            }
            free(key);
        }
        const char *end = gt ? memfind(gt + 1, n - (size_t)(gt + 1 - b), "</parameter>") : NULL;
        if (!end) return fin ? ((*progress = true), xml_fail(p)) : RW_OK;
        size_t vb = (size_t)(gt - b) + 1, ve = (size_t)(end - b);
        if (vb < ve && b[vb] == '\n') vb++; /* the newlines the template writes around a value */
        if (ve > vb && b[ve - 1] == '\n') ve--;
        if (ke == kb) return (*progress = true), xml_fail(p);
        char *key = strndup(b + kb, ke - kb);
        if (!key) return RW_ERR_NOMEM;
        s = xml_param(p, key, ke - kb, b + vb, ve - vb);
        free(key);
        p->xpos = (size_t)(end - b) + 12;
        *progress = true;
        return s;
    }
    /* after </function>: another function in the same call, the end marker, or the end */
    const bool keep = p->call->keep;
    if (!keep && starts(b + i, n - i, "<function=")) {
        p->xs = 0;
        p->xpos = i;
        *progress = true;
        return RW_OK;
    }
    const char *endm = keep ? NULL : p->call->end;
    if (endm && starts(b + i, n - i, endm)) {
        consume(p, i + strlen(endm));
    } else if (!fin && i == n) {
        return RW_OK;
    } else if (!fin && endm && prefix_of(b + i, n - i, endm)) {
        return RW_OK;
    } else if (!fin && !keep && prefix_of(b + i, n - i, "<function=")) {
        return RW_OK;
    } else if (fin && p->cut && ((endm && prefix_of(b + i, n - i, endm)) || prefix_of(b + i, n - i, "<function="))) {
        consume(p, n);          /* cut inside a marker: the call's, not content */
    } else consume(p, p->xpos); /* done; what follows is the message's */
    p->state = S_AFTER_CALL;
    p->xml_stream = false;
    *progress = true;
    return RW_OK;
}

/* ---- a Hermes JSON call sent as it comes (stream_args) ---- */

/* Matches ws* '{' ws* "name" ws* ':' ws* "NAME" ws* ',' ws* ("arguments" |
 * "parameters") ws* ':' ws* '{' at s[i..n): 1 (the name's span and where the
 * arguments' '{' is), 0 (a prefix of it: more text needed), -1 (not it). */
static int hermes_head(const char *s, size_t n, size_t i, size_t *nb, size_t *ne, size_t *args) {
    static const char *const parts[] = {"{", "\"name\"", ":", NULL /* the name */, ",", NULL /* the key */, ":"};
    for (int k = 0; k < 7; k++) {
        i = skip_ws(s, n, i);
        if (i >= n) return 0;
        if (k == 3) { /* "NAME": a plain string, no escapes */
            if (s[i] != '"') return -1;
            size_t e = i + 1;
            while (e < n && s[e] != '"' && s[e] != '\\') e++;
            if (e >= n) return 0;
            if (s[e] == '\\' || !rw_chat__valid_name(s + i + 1, e - i - 1)) return -1;
            *nb = i + 1;
            *ne = e;
            i = e + 1;
            continue;
        }
        if (k == 5) {
            static const char *const keys[] = {"\"arguments\"", "\"parameters\""};
            int hit = -1;
            for (int q = 0; q < 2; q++) {
                size_t kl = strlen(keys[q]);
                if (n - i >= kl ? !memcmp(s + i, keys[q], kl) : !memcmp(s + i, keys[q], n - i)) {
                    if (n - i < kl) return 0;
                    hit = q;
                }
            }
            if (hit < 0) return -1;
            i += strlen(keys[hit]);
            continue;
        }
        size_t pl = strlen(parts[k]);
        if (n - i < pl) return memcmp(s + i, parts[k], n - i) ? -1 : 0;
        if (memcmp(s + i, parts[k], pl)) return -1;
        i += pl;
    }
    i = skip_ws(s, n, i);
    if (i >= n) return 0;
    if (s[i] != '{') return -1;
    *args = i;
    return 1;
}

static rw_status json_end_call(rw_chat_output *p) {
    rw_chat_event ev = {.kind = RW_CHAT_EV_CALL_END, .index = p->xindex};
    free(p->xname);
    p->xname = NULL;
    return p->fn(p->user, &ev);
}

/* The call's name is known (the name at pend[nb..ne), its arguments' '{'
 * at args): it begins, its arguments follow as they come. */
static rw_status json_begin_call(rw_chat_output *p, size_t nb, size_t ne, size_t args) {
    free(p->xname);
    if (!(p->xname = strndup(p->pend + nb, ne - nb))) return RW_ERR_NOMEM;
    p->xindex = p->n_calls++;
    char id[128];
    make_id(p, p->xindex, id);
    rw_chat_event ev = {.kind = RW_CHAT_EV_CALL_BEGIN, .index = p->xindex, .id = id, .name = p->xname};
    p->json_stream = true;
    p->jstate = 0;
    p->jv = (rw_chat__jval){.pos = args, .safe = args};
    p->jsent = args;
    p->jin_str = p->jesc = false;
    return p->fn(p->user, &ev);
}

/* After a call object's arguments at s[i..n): the other members it may have
 * (Mistral writes "id" after the arguments), each "key": value, then its
 * '}'. 1: the '}' is at *close; 0: more text needed; -1: not that. */
static int json_call_rest(const char *s, size_t n, size_t i, size_t *close) {
    for (;;) {
        i = skip_ws(s, n, i);
        if (i >= n) return 0;
        if (s[i] == '}') return (*close = i), 1;
        if (s[i] != ',') return -1;
        rw_chat__jval key = {.pos = skip_ws(s, n, i + 1)};
        if (key.pos >= n) return 0;
        if (s[key.pos] != '"') return -1;
        int r = rw_chat__jval_feed(&key, s, n); /* the key as a string value */
        if (r <= 0) return r;
        i = skip_ws(s, n, key.pos);
        if (i >= n) return 0;
        if (s[i] != ':') return -1;
        rw_chat__jval v = {.pos = i + 1};
        if ((r = rw_chat__jval_feed(&v, s, n)) <= 0) return r;
        i = v.pos;
    }
}

/* The calls are over (at pend[from..)): the marker's end, if it has one, is
 * passed; what follows is the message's. */
static rw_status json_done(rw_chat_output *p, int next_state, size_t to, bool *progress) {
    consume(p, to);
    p->json_stream = false;
    p->state = next_state;
    *progress = true;
    return RW_OK;
}

static rw_status step_json(rw_chat_output *p, bool *progress) {
    const bool fin = p->finished;
    rw_status s = RW_OK;
    if (p->jstate == 0) {
        int r = rw_chat__jval_feed(&p->jv, p->pend, p->n);
        if (p->jv.safe > p->jsent) { /* what is certain goes out, compact (as the whole-call dump is) */
            char *buf = malloc(p->jv.safe - p->jsent);
            if (!buf) return RW_ERR_NOMEM;
            size_t k = 0;
            for (size_t i = p->jsent; i < p->jv.safe; i++) {
                char c = p->pend[i];
                if (p->jin_str) {
                    if (p->jesc) p->jesc = false;
                    else if (c == '\\') p->jesc = true;
                    else if (c == '"') p->jin_str = false;
                } else if (is_ws(c)) continue;
                else if (c == '"') p->jin_str = true;
                buf[k++] = c;
            }
            s = k ? call_piece(p, buf, k) : RW_OK;
            free(buf);
            p->jsent = p->jv.safe;
            *progress = true;
            if (s) return s;
        }
        if (r == 0 && !fin) return RW_OK;
        if (r != 1) { /* broken or cut off: closed where it was sure, the rest is text */
            s = call_piece(p, p->jv.safe_close, p->jv.safe_close_len);
            if (!s) s = json_end_call(p);
            consume(p, fin && p->cut ? p->n : p->jsent); /* cut: the rest is the call's, not content */
            p->json_stream = false;
            p->state = S_CONTENT;
            *progress = true;
            return s;
        }
        s = json_end_call(p);
        p->jstate = 1;
        *progress = true;
        return s;
    }
    const char *endm = p->jbare ? NULL : p->call->end;
    const int after = p->jbare ? S_BARE_NEXT : S_AFTER_CALL;
    if (p->jstate == 1 && p->jnaked) { /* no call object around the arguments */
        p->jat = p->jv.pos;
        p->jstate = 3;
        *progress = true;
        return RW_OK;
    }
    if (p->jstate == 1) { /* the call object's other members and its '}' */
        size_t close = 0;
        int r = json_call_rest(p->pend, p->n, p->jv.pos, &close);
        if (r == 0 && !fin) return RW_OK;
        if (r != 1) { /* the call is complete; what follows it is text (cut: the call's) */
            return json_done(p, S_CONTENT, fin && p->cut ? p->n : p->jv.pos, progress);
        }
        p->jat = close + 1;
        p->jstate = p->jlist ? 2 : 3;
        if (p->jlist) { /* ',' and the next call, or ']' */
            size_t e = skip_ws(p->pend, p->n, p->jat);
            if (e == p->n && !fin) return (p->jstate = 1), RW_OK; /* wait, from the '}' again */
            if (e < p->n && p->pend[e] == ',') p->jat = e + 1;
            else if (e < p->n && p->pend[e] == ']') {
                p->jat = e + 1;
                p->jstate = 3;
            } else return json_done(p, S_CONTENT, fin && p->cut ? p->n : p->jat, progress);
        }
        *progress = true;
        return RW_OK;
    }
    if (p->jstate == 2) {
        size_t nb = 0, ne = 0, args = 0;
        int h = hermes_head(p->pend, p->n, p->jat, &nb, &ne, &args);
        if (h == 0 && !fin) return RW_OK;
        if (h == 1) {
            *progress = true;
            return json_begin_call(p, nb, ne, args);
        }
        /* not a call (or cut short): the calls sent stand; the rest is text, a cut call's dropped */
        return json_done(p, S_CONTENT, fin && p->cut ? p->n : p->jat, progress);
    }
    /* jstate 3: the end marker, if the format has one */
    size_t e = skip_ws(p->pend, p->n, p->jat);
    if (!endm) return json_done(p, after, p->jat, progress);
    if (p->call == &M_DS_CALL) { /* R1's fence closes before the marker */
        if (prefix_of(p->pend + e, p->n - e, "```")) {
            if (!fin) return RW_OK;
            if (p->cut) return json_done(p, after, p->n, progress); /* cut in the fence: the call's */
        }
        if (starts(p->pend + e, p->n - e, "```")) e = skip_ws(p->pend, p->n, e + 3);
    }
    if (starts(p->pend + e, p->n - e, endm)) return json_done(p, after, e + strlen(endm), progress);
    if (fin && e == p->n) return json_done(p, after, e, progress);
    if (!fin && (e == p->n || prefix_of(p->pend + e, p->n - e, endm))) return RW_OK;
    if (fin && p->cut && prefix_of(p->pend + e, p->n - e, endm)) return json_done(p, after, p->n, progress);
    return json_done(p, S_CONTENT, p->jat, progress); /* the calls are complete; what follows is text */
}

/* DeepSeek's call head at s[i..n) (its <｜tool▁call▁begin｜> there): R1's
 * "function" SEP NAME "\n" ["```json"] or V3.1's NAME SEP ["```json"], then
 * the arguments' '{': 1 (the name's span, where the '{' is), 0 (more text
 * needed), -1 (not that). */
static int ds_head(const char *s, size_t n, size_t i, size_t *nb, size_t *ne, size_t *args) {
    i += strlen(RW_CHAT_DS_CALL_BEGIN);
    const char *sep = memfind(s + i, n - i, RW_CHAT_DS_SEP);
    if (!sep) return n - i > 300 ? -1 : 0;
    size_t a = skip_ws(s, n, i), ae = (size_t)(sep - s), j = ae + strlen(RW_CHAT_DS_SEP);
    while (ae > a && is_ws(s[ae - 1])) ae--;
    if (ae - a == 8 && !memcmp(s + a, "function", 8)) { /* R1: the name after the separator, to the line's end */
        const char *nl = memchr(s + j, '\n', n - j);
        if (!nl) return n - j > 300 ? -1 : 0;
        *nb = skip_ws(s, n, j);
        *ne = (size_t)(nl - s);
        while (*ne > *nb && is_ws(s[*ne - 1])) (*ne)--;
        j = (size_t)(nl - s);
    } else {
        *nb = a;
        *ne = ae;
    }
    if (!rw_chat__valid_name(s + *nb, *ne - *nb)) return -1;
    j = skip_ws(s, n, j);
    if (j < n && s[j] == '`') { /* a fence: ```json */
        if (n - j < 3) return memcmp(s + j, "```", n - j) ? -1 : 0;
        if (memcmp(s + j, "```", 3)) return -1;
        j += 3;
        while (j < n && s[j] >= 'a' && s[j] <= 'z') j++;
        j = skip_ws(s, n, j);
    }
    if (j >= n) return 0;
    if (s[j] != '{') return -1;
    *args = j;
    return 1;
}

/* Whether a JSON call's head (and list) is looked for at pend[i..): the
 * call markers whose body is JSON. */
static bool json_streams(const marker *m) {
    return m == &M_TOOL_CALL || m == &M_PYTHON || m == &M_MISTRAL || m == &M_NEMOTRON || m == &M_GRANITE;
}

/* Starts streaming JSON calls at pend[i] ('{' or '[' after whitespace):
 * 1 begun, 0 more text needed, -1 not a call's head. */
static int json_try(rw_chat_output *p, size_t i, bool bare) {
    i = skip_ws(p->pend, p->n, i);
    if (i >= p->n) return 0;
    bool list = p->pend[i] == '[';
    size_t nb = 0, ne = 0, args = 0;
    int h = hermes_head(p->pend, p->n, list ? i + 1 : i, &nb, &ne, &args);
    if (h != 1) return h;
    p->jlist = list;
    p->jbare = bare;
    p->jnaked = false;
    return json_begin_call(p, nb, ne, args) ? -2 : 1;
}

/* A bare JSON text that begins as a call: '{' (or '[' '{') then "name", or a
 * prefix of that (whitespace between). */
static bool bare_call_head(const char *s, size_t n) {
    size_t i = skip_ws(s, n, 0);
    if (i < n && s[i] == '[') i = skip_ws(s, n, i + 1);
    if (i == n) return true;
    if (s[i] != '{') return false;
    i = skip_ws(s, n, i + 1);
    return prefix_of(s + i, n - i, "\"name\"") || starts(s + i, n - i, "\"name\"");
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
        bool bare = p->fmt == RW_TOOL_FMT_LLAMA3 || p->fmt == RW_TOOL_FMT_GRANITE || p->fmt == RW_TOOL_FMT_GENERIC ||
                    p->fmt == RW_TOOL_FMT_MISTRAL;
        if (bare && i < p->n && (p->pend[i] == '{' || p->pend[i] == '[')) {
            consume(p, i);
            p->state = S_BARE;
            p->jtried = false;
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
        if (p->json_stream) return step_json(p, progress);
        if (p->stream_args && !p->jtried && (p->fmt == RW_TOOL_FMT_LLAMA3 || p->fmt == RW_TOOL_FMT_MISTRAL)) {
            int h = json_try(p, 0, true);
            if (h == -2) return RW_ERR_NOMEM;
            if (h == 0 && !fin) return RW_OK;
            *progress = true;
            if (h != 1) p->jtried = true; /* not a call's head: judged whole */
            return RW_OK;
        }
        int r = rw_chat__jscan_run(&p->js, p->pend, p->n);
        if (r == 0 && !fin) return RW_OK;
        if (r == 0 && p->cut && bare_call_head(p->pend, p->n)) { /* a call cut short: dropped */
            consume(p, p->n);
            p->state = S_CONTENT;
            *progress = true;
            return RW_OK;
        }
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
            p->jtried = false;
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
            if (which == &M_DS_CALLS) { /* DeepSeek's list: each call in it is read (and sent) on its own */
                consume(p, k + strlen(which->open));
                p->state = S_AFTER_CALL;
                *progress = true;
                return s;
            }
            consume(p, e);
            p->state = S_CALL;
            p->xml_tried = false;
            p->to_end = p->mnamed = false;
            p->call = which;
            p->call_lead = k - e;
            p->scan_from = k - e + (which->keep ? 0 : strlen(which->open));
            p->js = (rw_chat__jscan){.pos = p->scan_from};
            *progress = true;
            return s;
        }
        size_t safe = p->n, whole = p->n;
        size_t held = held_suffix(p->pend, whole, names, nm);
        if (!held) { /* cut inside a character, the text ends in U+FFFD for its bytes, which may be a marker's:
                      * they are held with the marker's start before them (and so is the start of a U+FFFD) */
            size_t w = p->n;
            if (!fin && w >= 2 && !memcmp(p->pend + w - 2, "\xef\xbf", 2)) w -= 2;
            else if (!fin && w >= 1 && p->pend[w - 1] == '\xef') w -= 1;
            while (w >= 3 && !memcmp(p->pend + w - 3, "\xef\xbf\xbd", 3)) w -= 3;
            size_t h = w < p->n ? held_suffix(p->pend, w, names, nm) : 0;
            if (h) {
                whole = w;
                held = h;
            }
        }
        if (!fin || (p->cut && held)) { /* cut: the start of a marker at the end is a call's, dropped */
            safe = whole - held;
            while (safe > 0 && is_ws(p->pend[safe - 1])) safe--;
        }
        s = emit(p, RW_CHAT_EV_CONTENT, p->pend, safe);
        consume(p, fin ? p->n : safe);
        return s;
    }

    case S_CALL: {
        const size_t body = p->call_lead + (p->call->keep ? 0 : strlen(p->call->open));
        if (p->xml_stream) return step_xml(p, progress);
        if (p->json_stream) return step_json(p, progress);
        if (p->call == &M_MISTRAL && !p->mnamed) { /* newer Mistral: [TOOL_CALLS]NAME[ARGS]{...} */
            size_t i = skip_ws(p->pend, p->n, body);
            if (i < p->n && p->pend[i] != '{' && p->pend[i] != '[') {
                const char *a = memfind(p->pend + i, p->n - i, "[ARGS]");
                size_t ne = a ? (size_t)(a - p->pend) : p->n;
                bool name_like = ne - i <= 256;
                for (size_t k = i; k < ne && name_like; k++)
                    name_like = !is_ws(p->pend[k]) && p->pend[k] != '"' && p->pend[k] != '{' && p->pend[k] != '<';
                if (!a && name_like && !fin) return RW_OK; /* the name (or [ARGS]) is still coming */
                if (!a && name_like && p->cut) { /* cut in it: the call's, dropped */
                    consume(p, p->n);
                    p->state = S_CONTENT;
                    *progress = true;
                    return RW_OK;
                }
                if (a && name_like && rw_chat__valid_name(p->pend + i, ne - i)) {
                    p->mnamed = true;
                    p->mname_b = i;
                    p->mname_e = ne;
                    p->js = (rw_chat__jscan){.pos = ne + 6};
                    *progress = true;
                    return RW_OK;
                }
            }
        }
        if (p->call == &M_DS_CALL && p->stream_args && !p->xml_tried) { /* its arguments as they come */
            size_t nb = 0, ne = 0, args = 0;
            int h = ds_head(p->pend, p->n, p->call_lead, &nb, &ne, &args);
            if (h == 0 && !fin) return RW_OK;
            if (h == 1) {
                rw_status st = json_begin_call(p, nb, ne, args);
                p->jlist = p->jbare = false;
                p->jnaked = true;
                *progress = true;
                return st;
            }
            p->xml_tried = true; /* judged whole */
        }
        if (p->mnamed && p->stream_args && !p->xml_tried) {
            size_t i = skip_ws(p->pend, p->n, p->mname_e + 6);
            if (i == p->n && !fin) return RW_OK;
            if (i < p->n && p->pend[i] == '{') {
                rw_status st = json_begin_call(p, p->mname_b, p->mname_e, i);
                p->jlist = p->jbare = false;
                p->jnaked = true;
                *progress = true;
                return st;
            }
            p->xml_tried = true; /* not an object: judged whole */
        }
        if (p->stream_args && !p->xml_tried && json_streams(p->call)) {
            int h = json_try(p, body, false);
            if (h == -2) return RW_ERR_NOMEM;
            if (h == 0 && !fin) return RW_OK;
            if (h == 1) {
                *progress = true;
                return RW_OK;
            }
            size_t first = skip_ws(p->pend, p->n, body);
            if (h < 0 && first < p->n && (p->pend[first] == '{' || p->pend[first] == '[' || p->call != &M_TOOL_CALL))
                p->xml_tried = true; /* JSON of another shape (or not JSON): whole */
        }
        if (p->stream_args && !p->xml_tried && (p->call == &M_TOOL_CALL || p->call == &M_FUNCTION)) {
            size_t i = body;
            while (i < p->n && is_ws(p->pend[i])) i++;
            if (i == p->n && !fin) return RW_OK;
            if (starts(p->pend + i, p->n - i, "<function=") ||
                (!fin && prefix_of(p->pend + i, p->n - i, "<function="))) {
                if (!starts(p->pend + i, p->n - i, "<function=")) return RW_OK; /* not sure yet */
                p->xml_stream = true;
                p->xs = 0;
                p->xpos = i;
                *progress = true;
                return RW_OK;
            }
        }
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
            } else if (r < 0 && p->call->body == B_PYTHON_TAG && !p->js.started) {
                p->to_end = true; /* a built-in tool's call or code: the rest of the text */
                if (fin && !p->cut) {
                    found = true;
                    body_end = end = p->n;
                }
            } else if (r < 0) {
                found = true; /* not JSON: the marker and what came before the bad byte go out as content */
                body_end = end = p->js.pos;
            }
        }
        if (!found && !fin) return RW_OK;
        if (!found && p->cut && p->call->body == B_DEEPSEEK) { /* cut: the calls it completed stand */
            rw_chat__calls calls = {0};
            if (rw_chat__parse_deepseek(p->pend + body, p->n - body, true, &calls)) s = emit_calls(p, &calls);
            rw_chat__calls_free(&calls);
            consume(p, p->n);
            p->state = S_CONTENT;
            *progress = true;
            return s;
        }
        if (!found && p->cut) { /* cut by the token limit: the unfinished call is dropped, never content */
            consume(p, p->n);
            p->state = S_CONTENT;
            *progress = true;
            return RW_OK;
        }
        if (!found) body_end = end = p->n; /* cut off: parse what there is (a missing close tag is forgiven) */
        rw_chat__calls calls = {0};
        const char *bs = p->pend + body;
        const size_t bn = body_end - body;
        bool ok;
        if (p->call->body == B_DEEPSEEK) ok = rw_chat__parse_deepseek(bs, bn, false, &calls);
        else if (p->call->body == B_PYTHONIC)
            ok = rw_chat__parse_py_calls(bs, bn, &calls) || rw_chat__parse_call_body(bs, bn, false, p->tools, &calls);
        else if (p->to_end) ok = rw_chat__parse_builtin_call(bs, bn, p->tools, &calls);
        else if (p->mnamed) {
            json_error_t je;
            json_t *args = json_loadb(p->pend + p->mname_e + 6, body_end - p->mname_e - 6, 0, &je);
            ok = json_is_object(args) && rw_chat__add_call(&calls, p->pend + p->mname_b, p->mname_e - p->mname_b, args);
            json_decref(args);
        }
        else ok = rw_chat__parse_call_body(bs, bn, p->call == &M_FUNCTION, p->tools, &calls);
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
        if (p->fmt == RW_TOOL_FMT_DEEPSEEK) { /* the end of DeepSeek's list of calls is no content */
            const char *e = RW_CHAT_DS_CALLS_END;
            if (starts(p->pend + i, p->n - i, e)) {
                consume(p, i + strlen(e));
                *progress = true;
                return RW_OK;
            }
            if (prefix_of(p->pend + i, p->n - i, e) && (!fin || p->cut)) {
                if (!fin) return RW_OK;
                i = p->n; /* cut inside it */
            }
        }
        consume(p, i);
        p->state = S_CONTENT;
        *progress = p->n > 0 || !fin;
        return RW_OK;
    }
    }
    return RW_OK;
}

static void set_fn(rw_chat_output *p, rw_chat_event_fn fn, void *user) {
    p->out_fn = fn;
    p->out_user = user;
    p->fn = limit;
    p->user = p;
}

static rw_status run(rw_chat_output *p, rw_chat_event_fn fn, void *user, rw_error *err) {
    set_fn(p, fn, user);
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
    if (p->hm) {
        set_fn(p, fn, user);
        rw_status s = rw_chat__harmony_feed(p->hm, text, len, false, limit, p);
        return s ? rw_errorf(err, s, "harmony output: %s", rw_status_name(s)) : RW_OK;
    }
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

void rw_chat_output_set_cut(rw_chat_output *p, bool cut) { p->cut = cut; }

rw_status rw_chat_output_finish(rw_chat_output *p, rw_chat_event_fn fn, void *user, rw_error *err) {
    if (p->hm) {
        set_fn(p, fn, user);
        rw_status s = rw_chat__harmony_feed(p->hm, "", 0, true, limit, p);
        return s ? rw_errorf(err, s, "harmony output: %s", rw_status_name(s)) : RW_OK;
    }
    if (!p->pend) {
        p->pend = malloc(1);
        if (!p->pend) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        p->pend[0] = 0;
        p->cap = 1;
    }
    p->finished = true;
    rw_status s = run(p, fn, user, err);
    if (!s && p->n) { /* whatever a final state left: content */
        set_fn(p, fn, user);
        s = emit(p, RW_CHAT_EV_CONTENT, p->pend, p->n);
        consume(p, p->n);
        if (s) return rw_errorf(err, s, "stopped by the event callback (%s)", rw_status_name(s));
    }
    return s;
}

/* ---- non-streaming ---- */

typedef struct {
    rw_chat_parsed *m;
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
    rw_chat_parsed *m = c->m;
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

rw_status rw_chat_output_parse(const rw_chat_output_opts *o, const char *text, size_t len, rw_chat_parsed *out,
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
    if (s) rw_chat_parsed_free(out);
    return s;
}

void rw_chat_parsed_free(rw_chat_parsed *m) {
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
