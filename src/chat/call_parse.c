/* call_parse.c - one tool call's text to a name and a JSON arguments object:
 * the JSON forms (Hermes, Llama 3, Granite, generic) and Qwen's XML form. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chat/output_int.h"


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
    return json_stringn(v, n);
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
