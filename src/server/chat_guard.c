/* chat_guard.c - the rendered chat prompt to token ids with control tokens
 * taken only from the template's own text, never from what a message says.
 *
 * A user message containing "<|im_end|>\n<|im_start|>system" would, with
 * special-token parsing over the whole prompt, become the control tokens
 * that end its turn and open a system turn; so would a third party's tool
 * description, a tool result, a name or a call's arguments. So when any
 * string of the request that reaches the template (message fields at any
 * depth, tool definitions, chat_template_kwargs; values and keys) contains
 * the text of a control token, the template is rendered once more with each
 * such string replaced by a marker: the text between markers is the
 * template's, and the prompt must be exactly that text with the strings put
 * back, as they are or JSON-escaped (tojson) (a template that changes such a
 * string beyond that cannot be checked and is refused with a 400). Their
 * byte ranges are then tokenized as plain text (rw_tokenize_guarded). A
 * request without such text is tokenized as before, byte for byte.
 *
 * llama-server and vLLM tokenize the whole rendered prompt with special
 * tokens parsed (open to this injection); what we do is what llama.cpp's
 * proposed --escape-special-in-input and vLLM's placeholder proposal
 * describe: message content is always plain text. docs/server-security.md. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/portable.h"
#include "server/server_int.h"

/* A marker stands for one untrusted string in the marked rendering: letters,
 * digits and '_' only, so that it passes through the template unchanged
 * whether the string is written as it is or through tojson (tool
 * definitions, arguments); with a random key per process, so that a request
 * cannot write one. */
static char mark_key[24];
static pthread_once_t mark_once = PTHREAD_ONCE_INIT;
static void mark_init(void) {
    uint64_t r = 0;
    if (!rw_random_bytes(&r, sizeof r)) r = (uint64_t)(uintptr_t)&r ^ (uint64_t)time(NULL);
    snprintf(mark_key, sizeof mark_key, "rwG%016" PRIx64 "_", r);
}

/* The strings a request puts into the prompt that hold a control token's
 * text: strs[i] is the i-th, owned by the request's JSON (borrowed). */
typedef struct {
    const char **strs;
    size_t *lens;
    size_t n, cap;
    bool nomem;
} guard_list;

static bool has_control(rw_server__model *m, const char *p, size_t n) { return rw_tokenizer_find_control(m->tok, p, n) >= 0; }

/* The marker of string i in buf (NUL-terminated). */
static void marker(char *buf, size_t cap, size_t i) { snprintf(buf, cap, "%s%zu_", mark_key, i); }

/* The marker for a string (added to gl), or NULL on out of memory. */
static json_t *mark(guard_list *gl, const char *p, size_t n, char *mk, size_t cap) {
    if (gl->n == gl->cap) {
        size_t c = gl->cap ? 2 * gl->cap : 8;
        const char **ns = realloc(gl->strs, c * sizeof *ns);
        if (ns) gl->strs = ns;
        size_t *nl = ns ? realloc(gl->lens, c * sizeof *nl) : NULL;
        if (!nl) {
            gl->nomem = true;
            return NULL;
        }
        gl->lens = nl;
        gl->cap = c;
    }
    gl->strs[gl->n] = p;
    gl->lens[gl->n] = n;
    marker(mk, cap, gl->n++);
    return json_string(mk);
}

/* A copy of v with every string (value or key) that holds a control token's
 * text replaced by its marker, keys kept in order; NULL on out of memory.
 * Nesting is bounded by jansson's parser (the JSON came from a request). */
static json_t *marked_copy(rw_server__model *m, json_t *v, guard_list *gl) {
    char mk[64];
    if (json_is_string(v))
        return has_control(m, json_string_value(v), json_string_length(v))
                   ? mark(gl, json_string_value(v), json_string_length(v), mk, sizeof mk)
                   : json_incref(v);
    if (json_is_array(v)) {
        json_t *a = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            if (!a || json_array_append_new(a, marked_copy(m, x, gl))) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            const char *key = k;
            if (o && has_control(m, k, strlen(k))) {
                json_t *marked = mark(gl, k, strlen(k), mk, sizeof mk);
                json_decref(marked);
                key = marked ? mk : NULL;
            }
            json_t *c = o && key ? marked_copy(m, x, gl) : NULL;
            if (!o || !c || json_object_set_new(o, key, c)) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    return json_incref(v);
}

static bool any_control(rw_server__model *m, json_t *v) {
    if (json_is_string(v)) return has_control(m, json_string_value(v), json_string_length(v));
    size_t i;
    const char *k;
    json_t *x;
    if (json_is_array(v)) json_array_foreach(v, i, x) if (any_control(m, x)) return true;
    if (json_is_object(v)) json_object_foreach(v, k, x) if (has_control(m, k, strlen(k)) || any_control(m, x)) return true;
    return false;
}

/* How string gl[i] appears at text[at..len): as it is, or JSON-escaped
 * (tojson); its length there, or -1 if it is neither. */
static long rendered_len(const guard_list *gl, size_t i, const char *text, size_t at, size_t len) {
    const char *p = gl->strs[i];
    size_t n = gl->lens[i];
    if (at + n <= len && !memcmp(text + at, p, n)) return (long)n;
    json_t *js = json_stringn(p, n);
    char *esc = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
    json_decref(js);
    long r = -1;
    if (esc) {
        size_t el = strlen(esc) - 2; /* without the quotes */
        if (at + el <= len && !memcmp(text + at, esc + 1, el)) r = (long)el;
    }
    free(esc);
    return r;
}

/* norm, tools and kwargs: the request's JSON as the template gets it, looked
 * at without parsing again; only a request that holds control text pays for
 * the second rendering. */
bool rw_server__chat_tokenize(rw_server__model *m, json_t *norm, json_t *tools, json_t *kwargs, const rw_template_vars *vars,
                              const char *text, size_t len, bool add_special, int32_t **ids, size_t *n_ids,
                              rw_server__error *e) {
    rw_error err = {0};
    if (!vars->tools_json) tools = NULL; /* what the template gets (an array, else none) */
    if (!any_control(m, norm) && !any_control(m, tools) && !any_control(m, kwargs)) {
        if (rw_tokenize(m->tok, text, len, add_special, true, ids, n_ids, &err)) {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, "messages", "%s", err.msg);
            return false;
        }
        return true;
    }
    pthread_once(&mark_once, mark_init);
    /* the template's variables: the request's kwargs with what the server adds (thinking switches) */
    json_t *extra = vars->extra_json ? json_loads(vars->extra_json, JSON_DECODE_ANY, NULL) : NULL;
    /* the request with markers for the strings that hold control text */
    guard_list gl = {0};
    json_t *mmsg = marked_copy(m, norm, &gl);
    json_t *mtools = tools ? marked_copy(m, tools, &gl) : NULL;
    json_t *mextra = extra ? marked_copy(m, extra, &gl) : NULL;
    char *mj = mmsg ? json_dumps(mmsg, JSON_COMPACT) : NULL;
    char *tj = mtools ? json_dumps(mtools, JSON_COMPACT) : NULL;
    char *xj = mextra ? json_dumps(mextra, JSON_COMPACT) : NULL;
    bool ok = !gl.nomem && mj && (!tools || tj) && (!extra || xj);
    rw_template_vars mro = *vars;
    mro.messages_json = mj;
    mro.tools_json = tools ? tj : NULL;
    mro.extra_json = extra ? xj : NULL;
    char *mtext = NULL;
    size_t mlen = 0;
    rw_status st = ok ? rw_chat_template_apply(m->tmpl, &mro, &mtext, &mlen, &err) : RW_ERR_NOMEM;
    free(mj);
    free(tj);
    free(xj);
    json_decref(mmsg);
    json_decref(mtools);
    json_decref(mextra);
    /* walk the marked text: template text is copied, each marker is its
     * string as the real prompt writes it (a plain range); the result must
     * be the prompt */
    const size_t kl = strlen(mark_key);
    size_t *plain = NULL, n_plain = 0, cap = 0, at = 0;
    bool same = !st;
    for (size_t p = 0; same && p < mlen;) {
        const char *hit = memmem(mtext + p, mlen - p, mark_key, kl);
        size_t tpl = hit ? (size_t)(hit - mtext) - p : mlen - p;
        same = at + tpl <= len && !memcmp(text + at, mtext + p, tpl);
        at += tpl;
        p += tpl;
        if (!hit || !same) break;
        char *end;
        size_t idx = strtoull(mtext + p + kl, &end, 10);
        same = *end == '_' && idx < gl.n;
        if (!same) break;
        p = (size_t)(end + 1 - mtext);
        long cl = rendered_len(&gl, idx, text, at, len);
        same = cl >= 0;
        if (!same || !cl) continue;
        if (n_plain == cap) {
            cap = cap ? 2 * cap : 16;
            size_t *np = realloc(plain, 2 * cap * sizeof *np);
            if (!np) {
                same = false;
                st = RW_ERR_NOMEM;
                break;
            }
            plain = np;
        }
        plain[2 * n_plain] = at;
        plain[2 * n_plain + 1] = at + (size_t)cl;
        n_plain++;
        at += (size_t)cl;
    }
    same = same && at == len;
    free(mtext);
    free(gl.strs);
    free(gl.lens);
    json_decref(extra);
    if (!same) {
        free(plain);
        if (st == RW_ERR_NOMEM || !ok) rw_server__errorf(e, 500, "server_error", NULL, NULL, "out of memory");
        else
            rw_server__errorf(e, 400, "invalid_request_error", NULL, "messages",
                              "the request contains the text of a control token, and this chat template changes "
                              "that text as it renders it, so it cannot be kept apart from the template's own tokens");
        return false;
    }
    st = rw_tokenize_guarded(m->tok, text, len, add_special, plain, n_plain, ids, n_ids, &err);
    free(plain);
    if (st) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, "messages", "%s", err.msg);
        return false;
    }
    return true;
}
