/* call_parse.c - one tool call's text to a name and a JSON arguments object:
 * the JSON forms (Hermes, Llama 3, Granite, generic) and Qwen's XML form;
 * and a call's id (output.c and harmony.c both name calls with it). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/output_int.h"

/* splitmix64: the ids' random part from the seed and the call's index. */
static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void rw_chat__call_id(const char *prefix, uint64_t seed, int index, char id[128]) {
    uint64_t a = mix(seed ^ mix((uint64_t)index)), b = mix(a);
    snprintf(id, 128, "%.80s%016llx%08llx", prefix, (unsigned long long)a, (unsigned long long)(b >> 32));
}

void rw_chat__calls_free(rw_chat__calls *c) {
    for (int i = 0; i < c->n; i++) {
        free(c->v[i].name);
        free(c->v[i].args);
    }
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* Takes args (a reference) and name (copied). */
static bool add_call(rw_chat__calls *c, const char *name, size_t name_len, json_t *args) {
    char *a = json_dumps(args, RW_CHAT_ARGS_DUMP);
    char *nm = strndup(name, name_len);
    if (!a || !nm) goto fail;
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 4;
        void *q = realloc(c->v, (size_t)cap * sizeof *c->v);
        if (!q) goto fail;
        c->v = q;
        c->cap = cap;
    }
    c->v[c->n].name = nm;
    c->v[c->n].args = a;
    c->n++;
    return true;
fail:
    free(a);
    free(nm);
    return false;
}

bool rw_chat__add_call(rw_chat__calls *c, const char *name, size_t name_len, json_t *args) {
    return add_call(c, name, name_len, args);
}

bool rw_chat__valid_name(const char *s, size_t n) {
    if (n == 0 || n > 256) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || s[i] == '<' || s[i] == '>' || s[i] == '"') return false;
    return true;
}

/* One call object: {"name", "arguments"|"parameters"} or OpenAI's
 * {"type": "function", "function": {"name", "arguments"}}. */
static bool one_json_call(json_t *o, bool bare, rw_chat__calls *out) {
    if (!json_is_object(o)) return false;
    json_t *fn = json_object_get(o, "function");
    if (json_is_object(fn)) o = fn;
    json_t *name = json_object_get(o, "name");
    if (!json_is_string(name) || !rw_chat__valid_name(json_string_value(name), json_string_length(name))) return false;
    json_t *args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    if (!args) {
        if (bare) return false;
        json_t *empty = json_object();
        bool ok = empty && add_call(out, json_string_value(name), json_string_length(name), empty);
        json_decref(empty);
        return ok;
    }
    /* keys other than these mean it is some other JSON, not a call */
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) if (strcmp(k, "name") && strcmp(k, "arguments") && strcmp(k, "parameters") &&
                                     strcmp(k, "type") && strcmp(k, "id")) return false;
    if (json_is_string(args)) { /* arguments as a JSON text inside a string */
        json_error_t je;
        json_t *inner = json_loadb(json_string_value(args), json_string_length(args), 0, &je);
        bool ok = json_is_object(inner) && add_call(out, json_string_value(name), json_string_length(name), inner);
        json_decref(inner);
        return ok;
    }
    if (!json_is_object(args)) return false;
    return add_call(out, json_string_value(name), json_string_length(name), args);
}

bool rw_chat__parse_json_calls(const char *s, size_t n, bool bare, rw_chat__calls *out) {
    json_error_t je;
    json_t *j = json_loadb(s, n, 0, &je); /* an object or array, nothing after it but whitespace */
    if (!j) return false;
    bool ok = true;
    if (json_is_array(j)) {
        size_t i;
        json_t *x;
        ok = json_array_size(j) > 0;
        json_array_foreach(j, i, x) if (ok) ok = one_json_call(x, bare, out);
    } else ok = one_json_call(j, bare, out);
    json_decref(j);
    if (!ok) rw_chat__calls_free(out);
    return ok;
}

/* ---- Qwen's XML form ---- */

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

static bool at(const char *s, size_t n, size_t i, const char *lit) {
    size_t k = strlen(lit);
    return i + k <= n && !memcmp(s + i, lit, k);
}

static const char *find(const char *s, size_t n, size_t from, const char *lit) {
    size_t k = strlen(lit);
    if (from > n || n - from < k) return NULL;
    return memmem(s + from, n - from, lit, k);
}

/* The JSON schema of parameter key of tool name, or NULL. */
static json_t *param_schema(const json_t *tools, const char *name, const char *key) {
    size_t i;
    json_t *t;
    json_array_foreach((json_t *)tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        if (!fn) fn = t; /* also tolerate tools given as bare function objects */
        const char *nm = json_string_value(json_object_get(fn, "name"));
        if (!nm || strcmp(nm, name)) continue;
        json_t *props = json_object_get(json_object_get(fn, "parameters"), "properties");
        return json_object_get(props, key);
    }
    return NULL;
}

/* ---- UTF-8 and JSON string escaping ---- */

/* The length of the well-formed UTF-8 sequence at s[0..n): 1..4; 0 when the
 * bytes there are invalid; -1 when they are the valid start of a sequence
 * that n cuts short. */
int rw_chat__utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len <= 1) return len;
    if (c == 0xC0 || c == 0xC1 || c > 0xF4) return 0;
    for (int k = 1; k < len; k++) {
        if ((size_t)k >= n) return -1;
        if ((s[k] & 0xC0) != 0x80) return 0;
        if (k == 1 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0) || (c == 0xF0 && s[1] < 0x90) ||
                       (c == 0xF4 && s[1] >= 0x90)))
            return 0; /* overlong, surrogate, beyond U+10FFFF */
    }
    return len;
}

size_t rw_chat__json_escape(const char *in, size_t n, bool final, char **out, size_t *out_len) {
    const unsigned char *s = (const unsigned char *)in;
    char *o = malloc(n * 6 + 1);
    size_t k = 0, i = 0;
    if (!o) {
        *out = NULL;
        *out_len = 0;
        return 0;
    }
    while (i < n) {
        int l = rw_chat__utf8_len(s + i, n - i);
        if (l < 0 && !final) break; /* the rest of this character is still to come */
        if (l <= 0) { /* invalid: U+FFFD, one byte */
            memcpy(o + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
            continue;
        }
        unsigned char c = s[i];
        if (l == 1 && (c < 0x20 || c == '"' || c == '\\')) {
            const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f"
                          : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            if (e) {
                memcpy(o + k, e, 2);
                k += 2;
            } else k += (size_t)sprintf(o + k, "\\u%04X", c);
        } else {
            memcpy(o + k, s + i, (size_t)l);
            k += (size_t)l;
        }
        i += (size_t)l;
    }
    o[k] = 0;
    *out = o;
    *out_len = k;
    return i;
}

/* s as a JSON string, invalid UTF-8 as U+FFFD (as a streamed value has it). */
static json_t *lossy_string(const char *s, size_t n) {
    json_t *v = json_stringn(s, n);
    if (v) return v;
    char *fixed = malloc(n * 3 + 1);
    if (!fixed) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        int l = rw_chat__utf8_len((const unsigned char *)s + i, n - i);
        if (l <= 0) {
            memcpy(fixed + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        } else {
            memcpy(fixed + k, s + i, (size_t)l);
            k += (size_t)l;
            i += (size_t)l;
        }
    }
    v = json_stringn(fixed, k);
    free(fixed);
    return v;
}

static int type_bit(const char *t) { return !strcmp(t, "string") ? 1 : !strcmp(t, "null") ? 2 : 4; }

/* Which JSON types a schema allows: "type" as a string or a list, or the
 * types of anyOf / oneOf members. Bits: 1 string, 2 null, 4 any other. */
static int schema_types(const json_t *sch, int depth) {
    if (!json_is_object(sch) || depth > 8) return 0;
    int bits = 0;
    json_t *ty = json_object_get(sch, "type"), *x;
    size_t i;
    if (json_is_string(ty)) bits |= type_bit(json_string_value(ty));
    json_array_foreach(ty, i, x) if (json_is_string(x)) bits |= type_bit(json_string_value(x));
    const char *alts[] = {"anyOf", "oneOf"};
    for (int a = 0; a < 2; a++) json_array_foreach(json_object_get(sch, alts[a]), i, x) bits |= schema_types(x, depth + 1);
    if (!bits && json_is_array(json_object_get(sch, "enum"))) { /* an enum of strings: a string */
        json_array_foreach(json_object_get(sch, "enum"), i, x) bits |= json_is_string(x) ? 1 : 4;
    }
    return bits;
}

/* A parameter's text as a JSON value: a string where the schema allows a
 * string (or says nothing), otherwise the text parsed as JSON (kept a string
 * if it does not parse). */
static json_t *param_value(const json_t *schema, const char *v, size_t n) {
    int types = schema_types(schema, 0);
    if (types & 2 && n == 4 && !memcmp(v, "null", 4)) return json_null();
    if (types & 4 && (!(types & 1))) {
        json_error_t je;
        json_t *j = json_loadb(v, n, JSON_DECODE_ANY, &je);
        if (j) return j;
    }
    return lossy_string(v, n);
}

bool rw_chat__xml_streams_as_string(const json_t *tools, const char *fn, const char *key) {
    int types = schema_types(tools ? param_schema(tools, fn, key) : NULL, 0);
    return !(types & 2) && (!(types & 4) || (types & 1));
}

json_t *rw_chat__xml_value(const json_t *tools, const char *fn, const char *key, const char *v, size_t n) {
    return param_value(tools ? param_schema(tools, fn, key) : NULL, v, n);
}

static bool parse_xml_calls(const char *s, size_t n, const json_t *tools, rw_chat__calls *out) {
    size_t i = skip_ws(s, n, 0);
    int calls = 0;
    while (i < n) {
        if (!at(s, n, i, "<function=")) return false;
        i += 10;
        const char *gt = memchr(s + i, '>', n - i);
        if (!gt) return false;
        size_t name_b = i, name_e = (size_t)(gt - s);
        while (name_b < name_e && is_ws(s[name_b])) name_b++;
        while (name_e > name_b && is_ws(s[name_e - 1])) name_e--;
        if (!rw_chat__valid_name(s + name_b, name_e - name_b)) return false;
        char *name = strndup(s + name_b, name_e - name_b);
        json_t *args = json_object();
        bool ok = name && args;
        i = (size_t)(gt - s) + 1;
        for (;;) {
            if (!ok) break;
            i = skip_ws(s, n, i);
            if (at(s, n, i, "</function>")) {
                i += 11;
                break;
            }
            if (!at(s, n, i, "<parameter=")) {
                ok = false;
                break;
            }
            i += 11;
            const char *kgt = memchr(s + i, '>', n - i);
            const char *vend = kgt ? find(s, n, (size_t)(kgt - s) + 1, "</parameter>") : NULL;
            if (!vend) {
                ok = false;
                break;
            }
            size_t kb = i, ke = (size_t)(kgt - s);
            while (kb < ke && is_ws(s[kb])) kb++;
            while (ke > kb && is_ws(s[ke - 1])) ke--;
            /* the template writes each value between newlines: one on each side is not the value's */
            size_t vb = (size_t)(kgt - s) + 1, ve = (size_t)(vend - s);
            if (vb < ve && s[vb] == '\n') vb++;
            if (ve > vb && s[ve - 1] == '\n') ve--;
            if (!rw_chat__valid_name(s + kb, ke - kb)) {
                ok = false;
                break;
            }
            char *key = strndup(s + kb, ke - kb);
            json_t *val = key && ke > kb ? param_value(tools ? param_schema(tools, name, key) : NULL, s + vb, ve - vb)
                                         : NULL;
            ok = val && !json_object_set_new(args, key, val);
            free(key);
            i = (size_t)(vend - s) + 12;
        }
        ok = ok && add_call(out, name, strlen(name), args);
        free(name);
        json_decref(args);
        if (!ok) return false;
        calls++;
        i = skip_ws(s, n, i);
    }
    return calls > 0;
}

bool rw_chat__parse_call_body(const char *s, size_t n, bool function, const json_t *tools, rw_chat__calls *out) {
    size_t i = skip_ws(s, n, 0);
    bool ok;
    if (function || at(s, n, i, "<function=")) ok = parse_xml_calls(s, n, tools, out);
    else ok = rw_chat__parse_json_calls(s, n, false, out);
    if (!ok) rw_chat__calls_free(out);
    return ok;
}

/* ---- DeepSeek's form ---- */

/* One call between RW_CHAT_DS_CALL_BEGIN and RW_CHAT_DS_CALL_END: R1's "function" RW_CHAT_DS_SEP NAME "\n```json\n" ARGS "\n```" or
 * V3.1's NAME RW_CHAT_DS_SEP ARGS (the fence optional in both). */
static bool ds_call(const char *s, size_t n, rw_chat__calls *out) {
    const char *sep = find(s, n, 0, RW_CHAT_DS_SEP);
    if (!sep) return false;
    size_t a = skip_ws(s, n, 0), ae = (size_t)(sep - s), b = ae + strlen(RW_CHAT_DS_SEP);
    while (ae > a && is_ws(s[ae - 1])) ae--;
    size_t nb, ne, args;
    if (ae - a == 8 && !memcmp(s + a, "function", 8)) { /* R1: the name after the separator, to the line's end */
        nb = skip_ws(s, n, b);
        ne = nb;
        while (ne < n && s[ne] != '\n' && s[ne] != '`' && s[ne] != '{') ne++;
        args = ne;
        while (ne > nb && is_ws(s[ne - 1])) ne--;
    } else {
        nb = a;
        ne = ae;
        args = b;
    }
    if (!rw_chat__valid_name(s + nb, ne - nb)) return false;
    size_t ab = skip_ws(s, n, args), aend = n;
    if (at(s, n, ab, "```")) { /* a fenced block: ```json ... ``` */
        ab += 3;
        while (ab < n && s[ab] != '\n' && !is_ws(s[ab]) && s[ab] != '{') ab++;
        while (aend > ab && is_ws(s[aend - 1])) aend--;
        if (aend >= ab + 3 && !memcmp(s + aend - 3, "```", 3)) aend -= 3;
    }
    json_error_t je;
    json_t *j = json_loadb(s + ab, aend - ab, JSON_DECODE_ANY, &je);
    if (json_is_string(j)) { /* the template writes string arguments quoted once more */
        json_t *inner = json_loads(json_string_value(j), 0, &je);
        json_decref(j);
        j = inner;
    }
    bool ok = json_is_object(j) && add_call(out, s + nb, ne - nb, j);
    json_decref(j);
    return ok;
}

bool rw_chat__parse_deepseek(const char *s, size_t n, bool partial, rw_chat__calls *out) {
    size_t i = skip_ws(s, n, 0);
    if (at(s, n, i, RW_CHAT_DS_CALLS_BEGIN)) i = skip_ws(s, n, i + strlen(RW_CHAT_DS_CALLS_BEGIN));
    bool ok = true;
    while (ok && i < n && !at(s, n, i, RW_CHAT_DS_CALLS_END)) {
        const char *end = at(s, n, i, RW_CHAT_DS_CALL_BEGIN) ? find(s, n, i, RW_CHAT_DS_CALL_END) : NULL;
        if (!end) {
            ok = partial;
            break; /* cut inside a call: the complete ones stand */
        }
        size_t b = i + strlen(RW_CHAT_DS_CALL_BEGIN);
        ok = ds_call(s + b, (size_t)(end - s) - b, out);
        i = skip_ws(s, n, (size_t)(end - s) + strlen(RW_CHAT_DS_CALL_END));
    }
    if (ok && at(s, n, i, RW_CHAT_DS_CALLS_END)) i = skip_ws(s, n, i + strlen(RW_CHAT_DS_CALLS_END));
    ok = ok && out->n > 0 && (partial || i == n);
    if (!ok) rw_chat__calls_free(out);
    return ok;
}
