/* pythonic.c - tool calls written as Python calls (output_int.h): LFM2's
 * list [name(key=value, ...), ...] and Llama 3.x's built-in tools
 * (brave_search.call(query="...")). Values are Python literals (strings in
 * either quote, numbers, True/False/None, lists, tuples, dicts), read into
 * JSON; JSON's true/false/null are taken too, so a JSON value is a value. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/output_int.h"

typedef struct {
    const char *s;
    size_t n, i;
    int depth;
} rd;

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
static void ws(rd *r) {
    while (r->i < r->n && is_ws(r->s[r->i])) r->i++;
}
static bool ident_char(char c, bool first) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && (c >= '0' && c <= '9')) ||
           (!first && c == '-');
}
static bool eat(rd *r, char c) {
    ws(r);
    if (r->i < r->n && r->s[r->i] == c) {
        r->i++;
        return true;
    }
    return false;
}
/* An identifier at r->i: its length (0: none). */
static size_t ident(rd *r) {
    size_t k = 0;
    while (r->i + k < r->n && ident_char(r->s[r->i + k], k == 0)) k++;
    return k;
}

static int hexv(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Appends code point cp as UTF-8. */
static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) return (o[0] = (char)cp), 1;
    if (cp < 0x800) return (o[0] = (char)(0xC0 | cp >> 6)), (o[1] = (char)(0x80 | (cp & 63))), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63));
    o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* A quoted string ('...' or "...", Python's escapes). New reference or NULL. */
static json_t *py_string(rd *r) {
    char q = r->s[r->i++];
    char *o = malloc(r->n - r->i + 1); /* the decoded text is never longer */
    if (!o) return NULL;
    size_t k = 0;
    while (r->i < r->n && r->s[r->i] != q) {
        char c = r->s[r->i++];
        if (c == '\n') goto fail; /* a single-quoted string ends on its line */
        if (c != '\\') {
            o[k++] = c;
            continue;
        }
        if (r->i >= r->n) goto fail;
        c = r->s[r->i++];
        switch (c) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case '0': o[k++] = '\0'; break;
        case '\n': break; /* a line continuation */
        case 'x':
        case 'u': {
            int len = c == 'x' ? 2 : 4;
            unsigned cp = 0;
            for (int d = 0; d < len; d++) {
                int h = r->i < r->n ? hexv(r->s[r->i++]) : -1;
                if (h < 0) goto fail;
                cp = cp * 16 + (unsigned)h;
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) goto fail;
            k += put_utf8(o + k, cp);
            break;
        }
        default: o[k++] = c; /* \\ \' \" and unknown escapes keep the character */
        }
    }
    if (r->i >= r->n) goto fail;
    r->i++;
    json_t *v = json_stringn(o, k); /* NULL for invalid UTF-8 or a NUL: not a value we take */
    free(o);
    return v;
fail:
    free(o);
    return NULL;
}

static json_t *py_value(rd *r);

/* Items up to close (']' or ')' or '}'), as an array or (dict) an object. */
static json_t *py_container(rd *r, char close, bool dict) {
    json_t *c = dict ? json_object() : json_array();
    if (!c || ++r->depth > 64) goto fail;
    for (;;) {
        if (eat(r, close)) break;
        json_t *k = NULL;
        if (dict) {
            ws(r);
            if (!(k = py_value(r)) || !json_is_string(k) || !eat(r, ':')) {
                json_decref(k);
                goto fail;
            }
        }
        ws(r);
        json_t *v = py_value(r);
        bool ok = v && (dict ? !json_object_set_new(c, json_string_value(k), v) : !json_array_append_new(c, v));
        json_decref(k);
        if (!ok) goto fail;
        if (!eat(r, ',') && !(ws(r), r->i < r->n && r->s[r->i] == close)) goto fail;
    }
    r->depth--;
    return c;
fail:
    json_decref(c);
    return NULL;
}

static json_t *py_number(rd *r) {
    size_t b = r->i;
    bool real = false;
    if (r->i < r->n && (r->s[r->i] == '-' || r->s[r->i] == '+')) r->i++;
    while (r->i < r->n) {
        char c = r->s[r->i];
        if (c >= '0' && c <= '9') r->i++;
        else if (c == '.' || c == 'e' || c == 'E' || ((c == '-' || c == '+') && (r->s[r->i - 1] | 0x20) == 'e')) {
            real = true;
            r->i++;
        } else break;
    }
    char tmp[64];
    size_t len = r->i - b;
    if (!len || len >= sizeof tmp) return NULL;
    memcpy(tmp, r->s + b, len);
    tmp[len] = 0;
    char *end;
    if (!real) {
        long long v = strtoll(tmp, &end, 10);
        if (*end) return NULL;
        return json_integer(v);
    }
    double d = strtod(tmp, &end);
    return *end ? NULL : json_real(d);
}

static json_t *py_value(rd *r) {
    ws(r);
    if (r->i >= r->n) return NULL;
    char c = r->s[r->i];
    if (c == '"' || c == '\'') return py_string(r);
    if (c == '[') return r->i++, py_container(r, ']', false);
    if (c == '(') return r->i++, py_container(r, ')', false);
    if (c == '{') return r->i++, py_container(r, '}', true);
    if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) return py_number(r);
    static const struct {
        const char *w;
        int kind;
    } words[] = {{"True", 1}, {"true", 1}, {"False", 0}, {"false", 0}, {"None", 2}, {"null", 2}};
    size_t k = ident(r);
    for (size_t w = 0; w < sizeof words / sizeof *words; w++)
        if (k == strlen(words[w].w) && !memcmp(r->s + r->i, words[w].w, k)) {
            r->i += k;
            return words[w].kind == 2 ? json_null() : json_boolean(words[w].kind);
        }
    return NULL;
}

/* name(key=value, ...) at r->i; name may be dotted. *name_len set. New
 * object of the arguments or NULL. */
static json_t *py_call(rd *r, size_t *name_b, size_t *name_len) {
    ws(r);
    size_t b = r->i;
    for (;;) {
        size_t k = ident(r);
        if (!k) return NULL;
        r->i += k;
        if (r->i < r->n && r->s[r->i] == '.') r->i++;
        else break;
    }
    *name_b = b;
    *name_len = r->i - b;
    if (!eat(r, '(')) return NULL;
    json_t *args = json_object();
    if (!args) return NULL;
    for (;;) {
        if (eat(r, ')')) return args;
        ws(r);
        size_t k = ident(r);
        if (!k) break;
        char key[257];
        if (k >= sizeof key) break;
        memcpy(key, r->s + r->i, k);
        key[k] = 0;
        r->i += k;
        if (!eat(r, '=')) break;
        json_t *v = py_value(r);
        if (!v || json_object_set_new(args, key, v)) break;
        if (!eat(r, ',') && !(ws(r), r->i < r->n && r->s[r->i] == ')')) break;
    }
    json_decref(args);
    return NULL;
}

static bool add(rw_chat__calls *out, const char *name, size_t len, json_t *args) {
    char *a = json_dumps(args, RW_CHAT_ARGS_DUMP), *nm = strndup(name, len);
    bool ok = a && nm && rw_chat__valid_name(name, len);
    if (ok && out->n == out->cap) {
        int cap = out->cap ? out->cap * 2 : 4;
        void *q = realloc(out->v, (size_t)cap * sizeof *out->v);
        if (q) {
            out->v = q;
            out->cap = cap;
        } else ok = false;
    }
    if (ok) {
        out->v[out->n].name = nm;
        out->v[out->n].args = a;
        out->n++;
    } else {
        free(a);
        free(nm);
    }
    return ok;
}

bool rw_chat__parse_py_calls(const char *s, size_t n, rw_chat__calls *out) {
    rd r = {.s = s, .n = n};
    ws(&r);
    bool list = eat(&r, '[');
    bool ok = true;
    while (ok) {
        size_t nb, nl;
        json_t *args = py_call(&r, &nb, &nl);
        ok = args && add(out, s + nb, nl, args);
        json_decref(args);
        if (!ok || !list || !eat(&r, ',')) break;
    }
    if (ok && list) ok = eat(&r, ']');
    ws(&r);
    ok = ok && r.i == n && out->n > 0;
    if (!ok) rw_chat__calls_free(out);
    return ok;
}

bool rw_chat__parse_builtin_call(const char *s, size_t n, const json_t *tools, rw_chat__calls *out) {
    rd r = {.s = s, .n = n};
    size_t nb, nl;
    json_t *args = py_call(&r, &nb, &nl);
    ws(&r);
    bool ok;
    if (args && r.i == n && nl > 5 && !memcmp(s + nb + nl - 5, ".call", 5)) ok = add(out, s + nb, nl - 5, args);
    else { /* code: a call of the code tool, named as the request's tools name it */ size_t b = 0, e = n;
        while (b < e && is_ws(s[b])) b++;
        while (e > b && is_ws(s[e - 1])) e--;
        const char *name = "python";
        static const char *const code_tools[] = {"python", "ipython", "code_interpreter"};
        for (int t = 2; t >= 0; t--) {
            size_t i;
            json_t *x;
            json_array_foreach((json_t *)tools, i, x) {
                json_t *fn = json_object_get(x, "function");
                const char *nm = json_string_value(json_object_get(fn ? fn : x, "name"));
                if (nm && !strcmp(nm, code_tools[t])) name = code_tools[t];
            }
        }
        json_t *code = e > b ? json_pack("{s:s%}", "code", s + b, e - b) : NULL;
        ok = code && add(out, name, strlen(name), code);
        json_decref(code);
    }
    json_decref(args);
    if (!ok) rw_chat__calls_free(out);
    return ok;
}
