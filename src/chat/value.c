/* value.c - template values with Python semantics: truthiness, equality,
 * str() / repr() spellings, and transformers' tojson (json.dumps with
 * ensure_ascii=False, insertion-ordered keys, ", " and ": " separators). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_int.h"

value rw_chat__v_undef(void) { return (value){.t = V_UNDEF}; }
value rw_chat__v_none(void) { return (value){.t = V_NONE}; }
value rw_chat__v_bool(bool b) { return (value){.t = V_BOOL, .b = b}; }
value rw_chat__v_int(int64_t i) { return (value){.t = V_INT, .i = i}; }
value rw_chat__v_float(double f) { return (value){.t = V_FLOAT, .f = f}; }
value rw_chat__v_str_ref(const char *s, size_t n) {
    value v = {.t = V_STR};
    v.str.s = s;
    v.str.n = n;
    return v;
}

void *rw_chat__r_alloc(render *r, size_t n) {
    if (r->arena.used_bytes + n > CHAT_MAX_MEMORY) {
        rw_chat__r_fail(r, 0, "template used more than %u MiB of memory", CHAT_MAX_MEMORY >> 20);
        return NULL;
    }
    void *p = rw_arena_alloc(&r->arena, n);
    if (!p) rw_chat__r_fail(r, 0, "out of memory");
    return p;
}

rw_status rw_chat__r_fail(render *r, int line, const char *fmt, ...) {
    if (r->err->code != RW_OK) return r->err->code; /* keep the first error */
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* one line: a value quoted into the message (a name, a type) may hold control characters */
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20) *c = ' ';
    if (line <= 0) line = r->line;
    if (line > 0) return rw_errorf(r->err, RW_ERR_TEMPLATE, "template line %d: %s", line, msg);
    return rw_errorf(r->err, RW_ERR_TEMPLATE, "%s", msg);
}

value rw_chat__v_str(render *r, const char *s, size_t n) {
    char *p = rw_chat__r_alloc(r, n + 1);
    if (!p) return rw_chat__v_undef();
    memcpy(p, s, n);
    p[n] = 0;
    return rw_chat__v_str_ref(p, n);
}

value rw_chat__v_list(render *r) {
    value v = {.t = V_LIST};
    v.list = rw_chat__r_alloc(r, sizeof *v.list);
    return v.list ? v : rw_chat__v_undef();
}

value rw_chat__v_dict(render *r) {
    value v = {.t = V_DICT};
    v.dict = rw_chat__r_alloc(r, sizeof *v.dict);
    return v.dict ? v : rw_chat__v_undef();
}

const char *rw_chat__v_type_name(vtype t) {
    static const char *const names[] = {"undefined", "NoneType", "bool", "int", "float", "str", "list", "dict",
                                        "Namespace", "macro", "function"};
    return names[t];
}

bool rw_chat__v_truthy(const value *v) {
    switch (v->t) {
    case V_UNDEF: case V_NONE: return false;
    case V_BOOL: return v->b;
    case V_INT: return v->i != 0;
    case V_FLOAT: return v->f != 0.0;
    case V_STR: return v->str.n != 0;
    case V_LIST: return v->list->gen || v->list->n != 0; /* a generator object is always true */
    case V_DICT: return v->dict->n != 0;
    default: return true;
    }
}

static bool is_num(const value *v) { return v->t == V_INT || v->t == V_FLOAT || v->t == V_BOOL; }
static double num(const value *v) { return v->t == V_FLOAT ? v->f : v->t == V_INT ? (double)v->i : (double)v->b; }

bool rw_chat__v_equal(const value *a, const value *b) {
    if (is_num(a) && is_num(b)) {
        if (a->t != V_FLOAT && b->t != V_FLOAT) return (a->t == V_INT ? a->i : a->b) == (b->t == V_INT ? b->i : b->b);
        return num(a) == num(b);
    }
    if (a->t != b->t) return false;
    switch (a->t) {
    case V_UNDEF: case V_NONE: return true;
    case V_STR: return a->str.n == b->str.n && !memcmp(a->str.s, b->str.s, a->str.n);
    case V_LIST:
        if (a->list->gen || b->list->gen) return a->list == b->list; /* generators compare by identity */
        if (a->list->n != b->list->n || a->list->tuple != b->list->tuple) return false;
        for (size_t i = 0; i < a->list->n; i++)
            if (!rw_chat__v_equal(&a->list->v[i], &b->list->v[i])) return false;
        return true;
    case V_DICT:
        if (a->dict->n != b->dict->n) return false;
        for (size_t i = 0; i < a->dict->n; i++) {
            value *o = rw_chat__v_dict_get_v(b->dict, &a->dict->keys[i]);
            if (!o || !rw_chat__v_equal(&a->dict->vals[i], o)) return false;
        }
        return true;
    case V_NS: return a->dict == b->dict;
    case V_MACRO: return a->macro.node == b->macro.node && a->macro.env == b->macro.env;
    case V_FUNC: return a->fn.id == b->fn.id && a->fn.self == b->fn.self;
    default: return false;
    }
}

static bool grow(render *r, void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap * 2 : 4;
    while (c < need) c *= 2;
    void *q = rw_chat__r_alloc(r, c * elem);
    if (!q) return false;
    if (*cap) memcpy(q, *p, *cap * elem);
    *p = q;
    *cap = c;
    return true;
}

/* How deep v's lists and dicts go (a namespace counts as a leaf: it is
 * mutable, and compared by identity, so nothing recurses through it). */
static uint32_t nest_of(const value *v) {
    return v->t == V_LIST ? v->list->depth + 1 : v->t == V_DICT ? v->dict->depth + 1 : 0;
}

/* Keeps every container's nesting bounded, so equality, repr and tojson
 * never recurse past CHAT_MAX_NEST levels. */
static rw_status note_nest(render *r, uint32_t *depth, const value *v) {
    uint32_t d = nest_of(v);
    if (d > CHAT_MAX_NEST) return rw_chat__r_fail(r, 0, "value nested too deeply (more than %d levels)", CHAT_MAX_NEST);
    if (d > *depth) *depth = d;
    return RW_OK;
}

rw_status rw_chat__v_list_push(render *r, vlist *l, value v) {
    if (note_nest(r, &l->depth, &v)) return r->err->code;
    if (!grow(r, (void **)&l->v, &l->cap, l->n + 1, sizeof *l->v)) return r->err->code;
    l->v[l->n++] = v;
    return RW_OK;
}

value *rw_chat__v_dict_get(const vdict *d, const char *key, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].t == V_STR && d->keys[i].str.n == n && !memcmp(d->keys[i].str.s, key, n)) return &d->vals[i];
    return NULL;
}

value *rw_chat__v_dict_get_v(const vdict *d, const value *key) {
    for (size_t i = 0; i < d->n; i++)
        if (rw_chat__v_equal(&d->keys[i], key)) return &d->vals[i];
    return NULL;
}

rw_status rw_chat__v_dict_set(render *r, vdict *d, value k, value v) {
    if (note_nest(r, &d->depth, &k) || note_nest(r, &d->depth, &v)) return r->err->code;
    value *old = rw_chat__v_dict_get_v(d, &k);
    if (old) {
        *old = v;
        return RW_OK;
    }
    size_t cap = d->cap;
    if (!grow(r, (void **)&d->keys, &cap, d->n + 1, sizeof *d->keys)) return r->err->code;
    cap = d->cap;
    if (!grow(r, (void **)&d->vals, &cap, d->n + 1, sizeof *d->vals)) return r->err->code;
    d->cap = cap;
    d->keys[d->n] = k;
    d->vals[d->n] = v;
    d->n++;
    return RW_OK;
}

/* ---- text ---- */

rw_status rw_chat__sb_put(render *r, sbuf *b, const char *s, size_t n) {
    if (b->n + n > CHAT_MAX_OUTPUT) return rw_chat__r_fail(r, 0, "template output exceeds %u MiB", CHAT_MAX_OUTPUT >> 20);
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *q = realloc(b->p, c);
        if (!q) return rw_chat__r_fail(r, 0, "out of memory");
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return RW_OK;
}

static rw_status sb_cstr(render *r, sbuf *b, const char *s) { return rw_chat__sb_put(r, b, s, strlen(s)); }

value rw_chat__v_from_sbuf(render *r, sbuf *b) {
    value v = rw_chat__v_str(r, b->p ? b->p : "", b->n);
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    return v;
}

/* Python's repr() of a float: the shortest digits that round-trip, in
 * positional notation for exponents in [-4, 16), with ".0" when integral. */
static void float_repr(double f, char *out, size_t cap) {
    if (isnan(f)) { snprintf(out, cap, "nan"); return; }
    if (isinf(f)) { snprintf(out, cap, f < 0 ? "-inf" : "inf"); return; }
    char e[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e is d.ddde[+-]XX with prec significant digits */
    char digits[32];
    size_t nd = 0;
    const char *q = e;
    bool neg = *q == '-';
    if (neg) q++;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    int exp = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            o += (size_t)snprintf(out + o, cap - o, "0.");
            for (int i = -1; i > exp; i--) out[o++] = '0';
            o += (size_t)snprintf(out + o, cap - o, "%s", digits);
        } else {
            for (int i = 0; i <= exp || i < (int)nd; i++) {
                if (i == exp + 1) out[o++] = '.';
                out[o++] = i < (int)nd ? digits[i] : '0';
            }
            if ((int)nd <= exp + 1) {
                out[o++] = '.';
                out[o++] = '0';
            }
        }
        out[o] = 0;
    } else {
        o += (size_t)snprintf(out + o, cap - o, "%c", digits[0]);
        if (nd > 1) o += (size_t)snprintf(out + o, cap - o, ".%s", digits + 1);
        snprintf(out + o, cap - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

/* Decodes the UTF-8 sequence at s[i] (i < n): returns its length and sets
 * *cp, or returns 0 for a malformed byte. */
static size_t utf8_decode(const unsigned char *s, size_t n, size_t i, uint32_t *cp) {
    unsigned c = s[i];
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || i + len > n) return 0;
    uint32_t v = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; k < len; k++) {
        if ((s[i + k] & 0xc0) != 0x80) return 0;
        v = v << 6 | (s[i + k] & 0x3f);
    }
    *cp = v;
    return len;
}

/* Python repr() of a str: single quotes unless the text has ' and no ";
 * control and other non-printable characters as \xNN, \uNNNN, \UNNNNNNNN. */
static rw_status str_repr(render *r, sbuf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    rw_status st = rw_chat__sb_put(r, b, &q, 1);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n && !st;) {
        uint32_t cp;
        size_t len = utf8_decode(u, n, i, &cp);
        char esc[16];
        if (!len) { /* not UTF-8 (only a template literal can hold such bytes): as is */
            st = rw_chat__sb_put(r, b, s + i, 1);
            i++;
            continue;
        }
        if (cp == (unsigned char)q || cp == '\\') { esc[0] = '\\'; esc[1] = (char)cp; st = rw_chat__sb_put(r, b, esc, 2); }
        else if (cp == '\n') st = sb_cstr(r, b, "\\n");
        else if (cp == '\r') st = sb_cstr(r, b, "\\r");
        else if (cp == '\t') st = sb_cstr(r, b, "\\t");
        else if (rw_chat__printable(cp)) st = rw_chat__sb_put(r, b, s + i, len);
        else {
            snprintf(esc, sizeof esc, cp <= 0xff ? "\\x%02x" : cp <= 0xffff ? "\\u%04x" : "\\U%08x", (unsigned)cp);
            st = sb_cstr(r, b, esc);
        }
        i += len;
    }
    if (!st) st = rw_chat__sb_put(r, b, &q, 1);
    return st;
}

static rw_status scalar_str(render *r, sbuf *b, const value *v) {
    char tmp[64];
    switch (v->t) {
    case V_UNDEF: return RW_OK;
    case V_NONE: return sb_cstr(r, b, "None");
    case V_BOOL: return sb_cstr(r, b, v->b ? "True" : "False");
    case V_INT: snprintf(tmp, sizeof tmp, "%" PRId64, v->i); return sb_cstr(r, b, tmp);
    case V_FLOAT: float_repr(v->f, tmp, sizeof tmp); return sb_cstr(r, b, tmp);
    case V_MACRO: return sb_cstr(r, b, "<macro>");
    case V_FUNC: return sb_cstr(r, b, "<function>");
    case V_NS: return sb_cstr(r, b, "<Namespace>");
    default: return RW_OK;
    }
}

rw_status rw_chat__v_repr(render *r, sbuf *b, const value *v) {
    if (++r->depth > CHAT_MAX_DEPTH) return rw_chat__r_fail(r, 0, "value nested too deeply");
    rw_status st = RW_OK;
    if (v->t == V_STR) st = str_repr(r, b, v->str.s, v->str.n);
    else if (v->t == V_LIST && v->list->gen) st = sb_cstr(r, b, "<generator object>");
    else if (v->t == V_LIST) {
        bool tuple = v->list->tuple;
        st = sb_cstr(r, b, tuple ? "(" : "[");
        for (size_t i = 0; i < v->list->n && !st; i++) {
            if (i) st = sb_cstr(r, b, ", ");
            if (!st) st = rw_chat__v_repr(r, b, &v->list->v[i]);
        }
        if (!st && tuple && v->list->n == 1) st = sb_cstr(r, b, ",");
        if (!st) st = sb_cstr(r, b, tuple ? ")" : "]");
    } else if (v->t == V_DICT) {
        st = sb_cstr(r, b, "{");
        for (size_t i = 0; i < v->dict->n && !st; i++) {
            if (i) st = sb_cstr(r, b, ", ");
            if (!st) st = rw_chat__v_repr(r, b, &v->dict->keys[i]);
            if (!st) st = sb_cstr(r, b, ": ");
            if (!st) st = rw_chat__v_repr(r, b, &v->dict->vals[i]);
        }
        if (!st) st = sb_cstr(r, b, "}");
    } else if (v->t == V_UNDEF) st = sb_cstr(r, b, "Undefined"); /* Jinja's repr of an Undefined */
    else if (v->t == V_NS) { /* Jinja's Namespace repr */
        value d = *v;
        d.t = V_DICT;
        st = sb_cstr(r, b, "<Namespace ");
        if (!st) st = rw_chat__v_repr(r, b, &d);
        if (!st) st = sb_cstr(r, b, ">");
    } else st = scalar_str(r, b, v);
    r->depth--;
    return st;
}

rw_status rw_chat__v_to_str(render *r, sbuf *b, const value *v) {
    if (v->t == V_STR) return rw_chat__sb_put(r, b, v->str.s, v->str.n);
    if (v->t == V_LIST || v->t == V_DICT || v->t == V_NS) return rw_chat__v_repr(r, b, v);
    return scalar_str(r, b, v);
}

static rw_status json_str(render *r, sbuf *b, const char *s, size_t n, bool ensure_ascii) {
    rw_status st = sb_cstr(r, b, "\"");
    size_t run = 0; /* bytes copied in bulk */
    for (size_t i = 0; i < n && !st; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        size_t skip = 1;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) { snprintf(tmp, sizeof tmp, "\\u%04x", c); esc = tmp; }
        else if (c >= 0x80 && ensure_ascii) { /* \uXXXX, a surrogate pair above U+FFFF */
            uint32_t cp;
            skip = utf8_decode((const unsigned char *)s, n, i, &cp);
            if (!skip) skip = 1, cp = 0xfffd;
            if (cp >= 0x10000)
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff));
            else snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            esc = tmp;
        }
        if (esc) {
            st = rw_chat__sb_put(r, b, s + run, i - run);
            if (!st) st = sb_cstr(r, b, esc);
            i += skip - 1;
            run = i + 1;
        }
    }
    if (!st) st = rw_chat__sb_put(r, b, s + run, n - run);
    if (!st) st = sb_cstr(r, b, "\"");
    return st;
}

static rw_status json_newline(render *r, sbuf *b, int indent, int level) {
    rw_status st = sb_cstr(r, b, "\n");
    for (int64_t i = 0; i < (int64_t)indent * level && !st; i++) st = sb_cstr(r, b, " ");
    return st;
}

/* A dict key as json.dumps writes it: strings as they are, true/false/null,
 * numbers in their JSON spelling. */
static rw_status json_key(render *r, sbuf *b, const value *k, const json_style *js) {
    if (k->t == V_STR) return json_str(r, b, k->str.s, k->str.n, js->ensure_ascii);
    if (k->t == V_BOOL || k->t == V_NONE || k->t == V_INT || k->t == V_FLOAT) {
        sbuf kb = {0};
        rw_status st = k->t == V_BOOL ? sb_cstr(r, &kb, k->b ? "true" : "false") : k->t == V_NONE ? sb_cstr(r, &kb, "null")
                                                                                          : rw_chat__v_to_str(r, &kb, k);
        if (!st) st = json_str(r, b, kb.p ? kb.p : "", kb.n, js->ensure_ascii);
        free(kb.p);
        return st;
    }
    return rw_chat__r_fail(r, 0, "keys must be str, int, float, bool or None, not %s", rw_chat__v_type_name(k->t));
}

static bool key_less(const value *a, const value *b) { /* sort_keys: string keys by code point */
    if (a->t != V_STR || b->t != V_STR) return false;
    size_t m = a->str.n < b->str.n ? a->str.n : b->str.n;
    int c = memcmp(a->str.s, b->str.s, m);
    return c ? c < 0 : a->str.n < b->str.n;
}

rw_status rw_chat__v_tojson(render *r, sbuf *b, const value *v, const json_style *js, int level) {
    if (++r->depth > CHAT_MAX_DEPTH) return rw_chat__r_fail(r, 0, "value nested too deeply");
    rw_status st = RW_OK;
    int indent = js->indent;
    switch (v->t) {
    case V_NONE: st = sb_cstr(r, b, "null"); break;
    case V_BOOL: st = sb_cstr(r, b, v->b ? "true" : "false"); break;
    case V_INT: case V_FLOAT: {
        char tmp[64];
        if (v->t == V_FLOAT && isnan(v->f)) snprintf(tmp, sizeof tmp, "NaN");
        else if (v->t == V_FLOAT && isinf(v->f)) snprintf(tmp, sizeof tmp, v->f < 0 ? "-Infinity" : "Infinity");
        else if (v->t == V_FLOAT) float_repr(v->f, tmp, sizeof tmp);
        else snprintf(tmp, sizeof tmp, "%" PRId64, v->i);
        st = sb_cstr(r, b, tmp);
        break;
    }
    case V_STR: st = json_str(r, b, v->str.s, v->str.n, js->ensure_ascii); break;
    case V_LIST:
        if (v->list->gen) {
            st = rw_chat__r_fail(r, 0, "Object of type generator is not JSON serializable");
            break;
        }
        st = sb_cstr(r, b, "[");
        for (size_t i = 0; i < v->list->n && !st; i++) {
            if (i) st = sb_cstr(r, b, js->item_sep);
            if (!st && indent >= 0) st = json_newline(r, b, indent, level + 1);
            if (!st) st = rw_chat__v_tojson(r, b, &v->list->v[i], js, level + 1);
        }
        if (!st && indent >= 0 && v->list->n) st = json_newline(r, b, indent, level);
        if (!st) st = sb_cstr(r, b, "]");
        break;
    case V_DICT: {
        size_t n = v->dict->n, *order = n ? rw_chat__r_alloc(r, n * sizeof *order) : NULL;
        if (n && !order) {
            st = r->err->code;
            break;
        }
        for (size_t i = 0; i < n; i++) order[i] = i;
        if (js->sort_keys) /* insertion sort: stable, dicts are small */
            for (size_t i = 1; i < n; i++)
                for (size_t k = i; k > 0 && key_less(&v->dict->keys[order[k]], &v->dict->keys[order[k - 1]]); k--) {
                    size_t t = order[k];
                    order[k] = order[k - 1];
                    order[k - 1] = t;
                }
        st = sb_cstr(r, b, "{");
        for (size_t i = 0; i < n && !st; i++) {
            if (i) st = sb_cstr(r, b, js->item_sep);
            if (!st && indent >= 0) st = json_newline(r, b, indent, level + 1);
            if (!st) st = json_key(r, b, &v->dict->keys[order[i]], js);
            if (!st) st = sb_cstr(r, b, js->key_sep);
            if (!st) st = rw_chat__v_tojson(r, b, &v->dict->vals[order[i]], js, level + 1);
        }
        if (!st && indent >= 0 && n) st = json_newline(r, b, indent, level);
        if (!st) st = sb_cstr(r, b, "}");
        break;
    }
    default: st = rw_chat__r_fail(r, 0, "Object of type %s is not JSON serializable", rw_chat__v_type_name(v->t)); break;
    }
    r->depth--;
    return st;
}
