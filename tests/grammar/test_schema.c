/* test_schema.c - JSON schema -> grammar: for every schema in
 * tests/grammar/schemas/, random walks through the grammar over Qwen3's
 * vocabulary (several seeds) give text that a JSON-Schema checker of our own
 * (below, written from the spec's keyword definitions) accepts; schemas we
 * do not support fail with a message naming the place.
 *
 * The checker is also a command for the shell tests:
 *   test_schema --validate SCHEMA.json OUTPUT   exit 0 valid, 1 not (why on stderr) */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>

#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "harness.h"
#include "tokenizer/tokenizer.h"

/* ---- the checker (JSON Schema 2020-12, the keywords the compiler handles) ---- */

static char why[512];

static bool fail_at(const char *path, const char *what) {
    snprintf(why, sizeof why, "%s: %s", *path ? path : "/", what);
    return false;
}

static bool regex_search(const char *pat, const char *s, size_t n) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (!re) return false;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0;
}

static size_t utf8_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* JSON equality as the spec has it: numbers by value */
static bool jeq(json_t *a, json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    if (json_typeof(a) != json_typeof(b)) return false;
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b)) return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!jeq(json_array_get(a, i), json_array_get(b, i))) return false;
        return true;
    }
    if (json_is_object(a)) {
        if (json_object_size(a) != json_object_size(b)) return false;
        const char *k;
        json_t *v;
        json_object_foreach(a, k, v) {
            json_t *w = json_object_get(b, k);
            if (!w || !jeq(v, w)) return false;
        }
        return true;
    }
    return json_equal(a, b);
}

static bool is_type(json_t *v, const char *t) {
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "integer"))
        return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    return false;
}

static json_t *resolve(json_t *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    json_t *cur = root;
    const char *p = ref + 1;
    while (*p == '/' && cur) {
        p++;
        char tok[256];
        size_t k = 0;
        while (*p && *p != '/' && k + 1 < sizeof tok) {
            if (p[0] == '~' && p[1] == '0') tok[k++] = '~', p += 2;
            else if (p[0] == '~' && p[1] == '1') tok[k++] = '/', p += 2;
            else tok[k++] = *p++;
        }
        tok[k] = 0;
        cur = json_is_object(cur) ? json_object_get(cur, tok) : json_array_get(cur, (size_t)atol(tok));
    }
    return cur;
}

static bool valid(json_t *v, json_t *s, json_t *root, const char *path);

/* The calendar behind a date's digits (s starts with YYYY-MM-DD): the day
 * within its month, February 29 in leap years only. */
static bool real_date(const char *s) {
    int y = atoi(s), m = atoi(s + 5), d = atoi(s + 8);
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    return m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1] + (m == 2 && leap);
}

static bool valid_format(const char *f, const char *s, size_t n) {
    static const char *const rx[][2] = {
        {"date", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"},
        {"time", "^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"},
        {"date-time", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
                      "(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"},
        {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
        /* the WHATWG form's rule for an e-mail address */
        {"email", "^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
                  "(?:\\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$"},
        /* RFC 3986's URI: scheme ":" hier-part [ "?" query ] [ "#" fragment ] */
        {"uri", "^[A-Za-z][A-Za-z0-9+.-]*:(//(([A-Za-z0-9._~!$&'()*+,;=:-]|%[0-9A-Fa-f]{2})*@)?"
                "([A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*(:[0-9]*)?)?"
                "(/([A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})*)*"
                "(\\?([A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?"
                "(#([A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?$"}};
    for (size_t i = 0; i < sizeof rx / sizeof *rx; i++)
        if (!strcmp(f, rx[i][0])) return regex_search(rx[i][1], s, n) && (strncmp(f, "date", 4) || real_date(s));
    return true; /* other formats: annotations */
}

static bool valid(json_t *v, json_t *s, json_t *root, const char *path) {
    if (json_is_true(s)) return true;
    if (json_is_false(s)) return fail_at(path, "schema false");
    json_t *k;
    char sub[600];
    if ((k = json_object_get(s, "$ref"))) {
        json_t *t = resolve(root, json_string_value(k));
        if (!t) return fail_at(path, "bad $ref");
        if (!valid(v, t, root, path)) return false;
    }
    if ((k = json_object_get(s, "type"))) {
        bool ok = false;
        if (json_is_string(k)) ok = is_type(v, json_string_value(k));
        else
            for (size_t i = 0; i < json_array_size(k); i++) ok |= is_type(v, json_string_value(json_array_get(k, i)));
        if (!ok) return fail_at(path, "wrong type");
    }
    if ((k = json_object_get(s, "const")) && !jeq(v, k)) return fail_at(path, "not the const");
    if ((k = json_object_get(s, "enum"))) {
        bool ok = false;
        for (size_t i = 0; i < json_array_size(k); i++) ok |= jeq(v, json_array_get(k, i));
        if (!ok) return fail_at(path, "not in the enum");
    }
    if ((k = json_object_get(s, "anyOf"))) {
        bool ok = false;
        for (size_t i = 0; i < json_array_size(k) && !ok; i++) ok = valid(v, json_array_get(k, i), root, path);
        if (!ok) return fail_at(path, "matches no anyOf branch");
    }
    if ((k = json_object_get(s, "oneOf"))) {
        int n = 0;
        for (size_t i = 0; i < json_array_size(k); i++) n += valid(v, json_array_get(k, i), root, path);
        if (n != 1) return fail_at(path, n ? "matches several oneOf branches" : "matches no oneOf branch");
    }
    if ((k = json_object_get(s, "not")) && valid(v, k, root, path)) return fail_at(path, "matches the not");
    if ((k = json_object_get(s, "if"))) {
        json_t *then = json_object_get(s, "then"), *els = json_object_get(s, "else");
        if (valid(v, k, root, path)) {
            if (then && !valid(v, then, root, path)) return false;
        } else if (els && !valid(v, els, root, path)) return false;
    }
    if ((k = json_object_get(s, "allOf")))
        for (size_t i = 0; i < json_array_size(k); i++)
            if (!valid(v, json_array_get(k, i), root, path)) return false;
    if (json_is_number(v)) {
        double x = json_number_value(v);
        json_t *b;
        if ((b = json_object_get(s, "minimum")) && x < json_number_value(b)) return fail_at(path, "below minimum");
        if ((b = json_object_get(s, "maximum")) && x > json_number_value(b)) return fail_at(path, "above maximum");
        if ((b = json_object_get(s, "exclusiveMinimum")) && json_is_number(b) && x <= json_number_value(b))
            return fail_at(path, "not above exclusiveMinimum");
        if ((b = json_object_get(s, "exclusiveMaximum")) && json_is_number(b) && x >= json_number_value(b))
            return fail_at(path, "not below exclusiveMaximum");
    }
    if (json_is_string(v)) {
        const char *str = json_string_value(v);
        size_t n = json_string_length(v), cps = utf8_len(str, n);
        json_t *b;
        if ((b = json_object_get(s, "minLength")) && cps < (size_t)json_integer_value(b))
            return fail_at(path, "too short");
        if ((b = json_object_get(s, "maxLength")) && cps > (size_t)json_integer_value(b))
            return fail_at(path, "too long");
        if ((b = json_object_get(s, "pattern")) && !regex_search(json_string_value(b), str, n))
            return fail_at(path, "does not match the pattern");
        if ((b = json_object_get(s, "format")) && !valid_format(json_string_value(b), str, n))
            return fail_at(path, "wrong format");
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v), np = 0;
        json_t *b;
        if ((b = json_object_get(s, "minItems")) && n < (size_t)json_integer_value(b))
            return fail_at(path, "too few items");
        if ((b = json_object_get(s, "maxItems")) && n > (size_t)json_integer_value(b))
            return fail_at(path, "too many items");
        if ((b = json_object_get(s, "prefixItems"))) {
            np = json_array_size(b);
            for (size_t i = 0; i < np && i < n; i++) {
                snprintf(sub, sizeof sub, "%s/%zu", path, i);
                if (!valid(json_array_get(v, i), json_array_get(b, i), root, sub)) return false;
            }
        }
        if ((b = json_object_get(s, "items")))
            for (size_t i = np; i < n; i++) {
                snprintf(sub, sizeof sub, "%s/%zu", path, i);
                if (!valid(json_array_get(v, i), b, root, sub)) return false;
            }
    }
    if (json_is_object(v)) {
        json_t *b;
        if ((b = json_object_get(s, "minProperties")) && json_object_size(v) < (size_t)json_integer_value(b))
            return fail_at(path, "too few properties");
        if ((b = json_object_get(s, "maxProperties")) && json_object_size(v) > (size_t)json_integer_value(b))
            return fail_at(path, "too many properties");
        json_t *props = json_object_get(s, "properties"), *addl = json_object_get(s, "additionalProperties");
        json_t *req = json_object_get(s, "required");
        for (size_t i = 0; i < json_array_size(req); i++)
            if (!json_object_get(v, json_string_value(json_array_get(req, i))))
                return fail_at(path, "missing required");
        const char *key;
        json_t *val;
        json_object_foreach(v, key, val) {
            snprintf(sub, sizeof sub, "%s/%s", path, key);
            json_t *ps = props ? json_object_get(props, key) : NULL;
            if (ps) {
                if (!valid(val, ps, root, sub)) return false;
            } else if (addl && !valid(val, addl, root, sub)) return false;
        }
    }
    return true;
}

/* 1 valid, 0 not (why says why), -1 not JSON */
static int check_text(const char *schema_text, const char *out, size_t n) {
    json_error_t e;
    json_t *s = json_loads(schema_text, JSON_DECODE_ANY, &e);
    /* duplicate keys: the last wins, as JSON.parse and most parsers do (two
     * additionalProperties keys may be the same string: a grammar cannot
     * rule that out) */
    json_t *v = json_loadb(out, n, JSON_DECODE_ANY, &e);
    int r;
    if (!v) {
        snprintf(why, sizeof why, "not JSON: %s", e.text);
        r = -1;
    } else r = valid(v, s, s, "");
    json_decref(s);
    json_decref(v);
    return r;
}

/* ---- random walks ---- */

typedef struct {
    char **piece;
    size_t *len;
    int32_t n;
} pieces;

/* A walk that tends to close things: with probability 1/3 the first allowed
 * of '"', '}', ']' (single-byte tokens), else a uniformly random allowed token. */
static char *walk(rw_grammar *g, const rw_grammar_vocab *v, const pieces *pc, uint64_t seed, int max_tok, bool *ended,
                  size_t *out_len, int32_t closers[3]) {
    rw_grammar_matcher *m = NULL;
    CHECK(rw_grammar_matcher_new(g, v, &m, NULL) == RW_OK);
    uint32_t *mask = calloc(rw_grammar_mask_words(pc->n), sizeof *mask);
    int32_t *allowed = malloc((size_t)pc->n * sizeof *allowed);
    size_t cap = 4096, len = 0;
    char *out = malloc(cap);
    *ended = false;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 12345;
    for (int step = 0; step < max_tok; step++) {
        rw_grammar_matcher_fill_mask(m, mask, NULL);
        int na = 0;
        for (int32_t w = 0; w < (pc->n + 31) / 32; w++)
            for (uint32_t bits = mask[w]; bits; bits &= bits - 1) allowed[na++] = w * 32 + __builtin_ctz(bits);
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (rw_grammar_matcher_can_end(m) && (na == 0 || x % 2 == 0)) {
            *ended = true;
            break;
        }
        if (na == 0) {
            CHECK_MSG(na > 0, "dead end at step %d", step);
            break;
        }
        int32_t t = -1;
        if (x % 3 == 1)
            for (int i = 0; i < 3 && t < 0; i++)
                if ((mask[closers[i] >> 5] >> (closers[i] & 31)) & 1) t = closers[i];
        if (t < 0) t = allowed[(x >> 11) % (uint64_t)na];
        CHECK(rw_grammar_matcher_accept(m, t, NULL));
        if (len + pc->len[t] + 1 > cap) out = realloc(out, cap = 2 * (cap + pc->len[t]));
        memcpy(out + len, pc->piece[t], pc->len[t]);
        len += pc->len[t];
    }
    out[len] = 0;
    *out_len = len;
    free(mask);
    free(allowed);
    rw_grammar_matcher_free(m);
    return out;
}

static void expect_schema_error(const char *schema, const char *needle) {
    rw_grammar *g = NULL;
    rw_error err = {0};
    rw_status st = rw_grammar_compile_schema(schema, strlen(schema), &g, &err);
    CHECK_MSG(st != RW_OK, "compiled: %s", schema);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "'%s' -> '%s' (wanted '%s')", schema, err.msg, needle);
    rw_grammar_free(g);
}

/* Whether the schema's grammar takes text whole (bytes, no vocabulary). */
static bool takes(const char *schema, const char *text) {
    rw_grammar *g = NULL;
    rw_error err = {0};
    if (rw_grammar_compile_schema(schema, strlen(schema), &g, &err)) {
        CHECK_MSG(0, "%s: %s", schema, err.msg);
        return false;
    }
    rw_grammar_matcher *m = NULL;
    bool ok = rw_grammar_matcher_new(g, NULL, &m, NULL) == RW_OK &&
              rw_grammar_matcher_accept_bytes(m, text, strlen(text), NULL) && rw_grammar_matcher_can_end(m);
    rw_grammar_matcher_free(m);
    rw_grammar_free(g);
    return ok;
}

/* each string: "+text" taken, "-text" refused (and the checker agrees) */
static void expect_strings(const char *schema, const char *const *cases) {
    for (int i = 0; cases[i]; i++) {
        bool want = cases[i][0] == '+';
        const char *t = cases[i] + 1;
        CHECK_MSG(takes(schema, t) == want, "%s: '%s' should be %s", schema, t, want ? "taken" : "refused");
        if (want) CHECK_MSG(check_text(schema, t, strlen(t)) == 1, "%s: '%s' taken but invalid: %s", schema, t, why);
    }
}

static void test_keywords(void) {
    /* number bounds: the decimal range exactly, no leading zeros, no "-0", no exponent */
    const char *n1[] = {"+-0.5", "+-0.25", "+-0.4999", "+0",     "+0.0",       "+1",     "+2",
                        "+2.2",  "+2.25",  "+2.250",   "+-0.50", "+0.125",     "--0.51", "--0.6",
                        "--1",   "-2.26",  "-2.3",     "-3",     "-2.2500001", "--0",    "--0.0",
                        "-01",   "-00.5",  "-.5",      "-1.",    "-1e0",       "-+1",    NULL};
    expect_strings("{\"type\":\"number\",\"minimum\":-0.5,\"maximum\":2.25}", n1);
    const char *n2[] = {"--0.5", "--0.50", "-2.25", "-2.250", "+-0.4999", "+2.2499", "+0", "+-0.1", "+2.24", NULL};
    expect_strings("{\"type\":\"number\",\"exclusiveMinimum\":-0.5,\"exclusiveMaximum\":2.25}", n2);
    const char *n3[] = {"+0.1", "+0.10", "+0.11", "+7", "-0.09999", "-0.0999999999999", "-0", "--1", NULL};
    expect_strings("{\"type\":\"number\",\"minimum\":0.1}", n3);
    const char *n4[] = {"+0.001", "+5", "+123456789012345", "-1234567890123456", "-0", "-0.0", "-0.000", "--0.5",
                        "--0",    NULL};
    expect_strings("{\"type\":\"number\",\"exclusiveMinimum\":0}", n4);
    const char *n5[] = {"+0", "+0.0", "+-3.5", "+-123.456", "-0.1", "--0", "-1", NULL};
    expect_strings("{\"type\":\"number\",\"maximum\":0}", n5);
    const char *n6[] = {"+-1.5", "+-2", "+-1.01", "--1", "--1.0", "--0.5", "-0", NULL};
    expect_strings("{\"type\":\"number\",\"exclusiveMaximum\":-1}", n6);
    const char *n7[] = {"--1", "--1.0001", "+-0.9999",
                        "+3",  "-3.0001",  NULL}; /* draft 4's boolean form, the tighter bound */
    expect_strings("{\"type\":\"number\",\"minimum\":-1,\"exclusiveMinimum\":true,\"maximum\":3}", n7);
    const char *n8[] = {"+10.5", "+10.75", "+11", "+99", "+100", "-10.4", "-100.5", "-100.01", "+12.345", NULL};
    expect_strings("{\"type\":\"number\",\"minimum\":10.5,\"maximum\":100}", n8);
    const char *n9[] = {"+1.5", "+1.25", "+1.75", "-1.24", "-1.76", "-1", "-2", NULL};
    expect_strings("{\"type\":\"number\",\"minimum\":1.25,\"maximum\":1.75}", n9);
    expect_schema_error("{\"type\":\"number\",\"minimum\":2,\"exclusiveMaximum\":2}", "no number lies between");
    expect_schema_error("{\"type\":\"number\",\"minimum\":1e20}", "a minimum over");
    /* integers: exclusive bounds (also fractional ones), no leading zeros */
    const char *i1[] = {"+6", "+9", "-5", "-10", "-06", "-5.5", NULL};
    expect_strings("{\"type\":\"integer\",\"exclusiveMinimum\":5,\"exclusiveMaximum\":10}", i1);
    const char *i2[] = {"+6", "+5", "+-2", "--3", "-7", NULL};
    expect_strings("{\"type\":\"integer\",\"exclusiveMinimum\":-2.5,\"maximum\":6.5}", i2);
    const char *i3[] = {"+0", "+7", "+100", "-007", "-00", "-101", "--0", NULL};
    expect_strings("{\"type\":\"integer\",\"minimum\":0,\"maximum\":100}", i3);
    /* minProperties / maxProperties */
    const char *p1[] = {"+{\"a\":1,\"b\":2}",
                        "+{\"a\":1,\"c\":3}",
                        "+{\"b\":1,\"c\":2}",
                        "-{\"a\":1}",
                        "-{}",
                        "-{\"a\":1,\"b\":2,\"c\":3}",
                        NULL};
    expect_strings("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},"
                   "\"c\":{\"type\":\"integer\"}},\"minProperties\":2,\"maxProperties\":2}",
                   p1);
    const char *p2[] = {"+{\"x\":1}", "+{\"x\":1,\"y\":[]}", "-{}", "-{\"x\":1,\"y\":2,\"z\":3}", NULL};
    expect_strings("{\"type\":\"object\",\"minProperties\":1,\"maxProperties\":2}", p2);
    const char *p3[] = {"+{\"a\":1,\"z\":true}", "+{\"a\":1,\"y\":1,\"z\":2}", "-{\"a\":1}", "-{\"z\":1,\"y\":2}",
                        NULL};
    expect_strings("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],"
                   "\"additionalProperties\":true,\"minProperties\":2}",
                   p3);
    const char *p4[] = {"+{\"b\":1}", "+{}", "-{\"a\":1}", "-{\"a\":1,\"b\":1}", NULL};
    expect_strings("{\"properties\":{\"a\":false,\"b\":{\"type\":\"integer\"}}}", p4);
    expect_schema_error("{\"properties\":{\"a\":{},\"b\":{}},\"required\":[\"a\",\"b\"],\"maxProperties\":1}",
                        "no object satisfies minProperties/maxProperties");
    /* pattern and format with length limits */
    const char *s1[] = {"+\"ab\"", "+\"abcd\"", "-\"a\"", "-\"abcde\"", "-\"aB\"", NULL};
    expect_strings("{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"minLength\":2,\"maxLength\":4}", s1);
    const char *s2[] = {"+\"A\"", "+\"Ab\"", "+\"Abc\"", "-\"Abcd\"", "-\"\"", NULL};
    expect_strings("{\"type\":\"string\",\"pattern\":\"^[A-Z][a-z]*$\",\"maxLength\":3}", s2);
    const char *s3[] = {"+\"2024-01-31\"", "-\"2024-1-31\"", NULL};
    expect_strings("{\"type\":\"string\",\"format\":\"date\",\"minLength\":10,\"maxLength\":10}", s3);
    const char *s4[] = {"+\"ab@cd.ef\"", "+\"abcde@ghij.klm\"", "-\"aaaaaaaaaaaaaa@bb.com\"", NULL};
    expect_strings("{\"type\":\"string\",\"format\":\"email\",\"maxLength\":20}", s4);
    expect_schema_error("{\"type\":\"string\",\"format\":\"date\",\"maxLength\":5}", "no string of this format");
    const char *s5[] = {"+\"a\"", "+\"abb\"", "+\"bbbb\"", "-\"aaaaa\"", NULL}; /* a group of variable width */
    expect_strings("{\"type\":\"string\",\"pattern\":\"^(a|bb)+$\",\"maxLength\":4}", s5);
    expect_schema_error("{\"type\":\"string\",\"pattern\":\"^a+|b$\",\"maxLength\":3}",
                        "pattern with minLength/maxLength: supported when");
    expect_schema_error("{\"type\":\"string\",\"pattern\":\"a\",\"maxLength\":3}", "pattern with minLength/maxLength");
    /* formats */
    const char *f1[] = {"+\"john.doe@example.com\"",
                        "+\"a_b+c@mail.example.org\"",
                        "-\"a@b\"",
                        "-\"@b.com\"",
                        "-\"a b@c.com\"",
                        "-\"a..b@c.com\"",
                        "-\"a@-b.com\"",
                        "-\"a@b.c\"",
                        NULL};
    expect_strings("{\"type\":\"string\",\"format\":\"email\"}", f1);
    const char *f2[] = {"+\"https://example.com/a/b?x=1#f\"",
                        "+\"ftp://host:21\"",
                        "-\"example.com\"",
                        "-\"http://\"",
                        "-\"http://a b\"",
                        NULL};
    expect_strings("{\"type\":\"string\",\"format\":\"uri\"}", f2);
    const char *f3[] = {"+\"12:30:00Z\"", "+\"23:59:59.123+01:00\"", "-\"24:00:00Z\"", "-\"12:30Z\"", NULL};
    expect_strings("{\"type\":\"string\",\"format\":\"time\"}", f3);
    /* dates of the calendar: the month's days, February 29 of leap years */
    const char *f4[] = {"+\"2024-01-31\"", "+\"2023-04-30\"", "+\"2023-02-28\"",
                        "+\"2024-02-29\"", "+\"2000-02-29\"", "+\"1600-02-29\"",
                        "+\"0000-02-29\"", "+\"1996-02-29\"", "+\"2023-12-31\"",
                        "-\"2023-02-29\"", "-\"1900-02-29\"", "-\"2100-02-29\"",
                        "-\"2024-02-30\"", "-\"2023-04-31\"", "-\"2023-06-31\"",
                        "-\"2023-09-31\"", "-\"2023-11-31\"", "-\"2023-00-10\"",
                        "-\"2023-13-01\"", "-\"2023-01-00\"", NULL};
    expect_strings("{\"type\":\"string\",\"format\":\"date\"}", f4);
    const char *f5[] = {"+\"2024-02-29T23:59:59Z\"", "-\"2023-02-29T00:00:00Z\"", "-\"2023-04-31T12:00:00+01:00\"",
                        NULL};
    expect_strings("{\"type\":\"string\",\"format\":\"date-time\"}", f5);
    /* every day of 1999..2001 and of 1900 and 2000 (the century rule), through the grammar and the checker */
    for (int y = 1899; y <= 2101; y++) {
        if (!(y <= 1901 || (y >= 1999 && y <= 2001) || y >= 2099)) continue;
        for (int m = 1; m <= 12; m++)
            for (int d = 1; d <= 31; d++) {
                char t[16];
                snprintf(t, sizeof t, "\"%04d-%02d-%02d\"", y, m, d);
                bool want = real_date(t + 1);
                CHECK_MSG(takes("{\"type\":\"string\",\"format\":\"date\"}", t) == want, "%s should be %s", t,
                          want ? "taken" : "refused");
            }
    }
    /* not, if/then/else, allOf of several */
    const char *c1[] = {"+\"c\"", "+\"ab\"", "+\"\"", "-\"a\"", "-\"b\"", NULL};
    expect_strings("{\"type\":\"string\",\"not\":{\"enum\":[\"a\",\"b\"]}}", c1);
    const char *c2[] = {"+1", "+\"x\"", "+[]", "+{}", "+true", "-null", NULL};
    expect_strings("{\"not\":{\"type\":\"null\"}}", c2);
    const char *c3[] = {"+{\"kind\":\"a\",\"x\":1}", "-{\"kind\":\"a\"}", "+{\"kind\":\"b\"}",
                        "-{\"kind\":\"b\",\"x\":1}", NULL};
    expect_strings(
        "{\"type\":\"object\",\"properties\":{\"kind\":{\"enum\":[\"a\",\"b\"]},\"x\":{\"type\":\"integer\"}},"
        "\"required\":[\"kind\"],\"if\":{\"properties\":{\"kind\":{\"const\":\"a\"}}},\"then\":{\"required\":[\"x\"]},"
        "\"else\":{\"properties\":{\"x\":false}}}",
        c3);
    const char *c4[] = {"+{\"a\":1,\"b\":\"x\"}", "-{\"a\":1}", "-{\"b\":\"x\"}", "-{\"a\":\"1\",\"b\":\"x\"}", NULL};
    expect_strings(
        "{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
        "{\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}]}",
        c4);
    const char *c5[] = {"+3", "+4", "-2", "-5", "-3.5", NULL};
    expect_strings("{\"allOf\":[{\"type\":\"number\",\"minimum\":2.5},{\"type\":\"integer\",\"maximum\":4}]}", c5);
    expect_schema_error("{\"allOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "no value satisfies");
    expect_schema_error("{\"allOf\":[{\"pattern\":\"^a\"},{\"pattern\":\"^b\"}]}",
                        "the schemas set 'pattern' differently");
    expect_schema_error("{\"if\":{\"minimum\":3},\"then\":{\"type\":\"integer\"}}", "if: the negation is supported of");
    { /* anyOf inside allOf multiplies: bounded */
        char big[8192], *p = big;
        p += sprintf(p, "{\"allOf\":[");
        for (int k = 0; k < 12; k++)
            p += sprintf(p,
                         "%s{\"anyOf\":[{\"minimum\":1},{\"maximum\":9},{\"minimum\":2},{\"maximum\":8},"
                         "{\"minimum\":3},{\"maximum\":7}]}",
                         k ? "," : "");
        sprintf(p, "]}");
        expect_schema_error(big, "too many combinations");
    }
    { /* merging and negating nest as deep as generating may, no deeper */
        char *deep = malloc(64 * 1024), *p = deep;
        for (int i = 0; i < 2; i++) {
            p += sprintf(p, "%s", i ? "," : "{\"allOf\":[");
            for (int d = 0; d < 300; d++) p += sprintf(p, "{\"properties\":{\"a\":");
            p += sprintf(p, "{}");
            for (int d = 0; d < 300; d++) p += sprintf(p, "}}");
        }
        sprintf(p, "]}");
        expect_schema_error(deep, "schema at /properties/a/"); /* the path is long: the message is cut */
        p = deep;
        p += sprintf(p, "{\"not\":");
        for (int d = 0; d < 300; d++) p += sprintf(p, "{\"properties\":{\"a\":");
        p += sprintf(p, "{\"type\":\"null\"}");
        for (int d = 0; d < 300; d++) p += sprintf(p, "}}");
        sprintf(p, "}");
        expect_schema_error(deep, "nested deeper than 256");
        free(deep);
    }
}

/* Number bounds against exact decimal arithmetic: every number with an
 * integer part 0..12 and up to 3 fraction digits, both signs, is taken
 * exactly when it lies within the bounds (in thousandths; "-0" never). */
static void test_number_brute(void) {
    static const struct {
        const char *schema;
        long lo, hi; /* thousandths; LONG_MIN / LONG_MAX: none */
        bool lx, hx; /* exclusive */
    } b[] = {
        {"{\"type\":\"number\",\"minimum\":-0.5,\"maximum\":2.25}", -500, 2250, false, false},
        {"{\"type\":\"number\",\"exclusiveMinimum\":0.125,\"exclusiveMaximum\":1}", 125, 1000, true, true},
        {"{\"type\":\"number\",\"minimum\":-3.75,\"exclusiveMaximum\":-3.5}", -3750, -3500, false, true},
        {"{\"type\":\"number\",\"minimum\":0,\"maximum\":0}", 0, 0, false, false},
        {"{\"type\":\"number\",\"exclusiveMinimum\":-1,\"exclusiveMaximum\":0}", -1000, 0, true, true},
        {"{\"type\":\"number\",\"minimum\":9.999,\"maximum\":10.001}", 9999, 10001, false, false},
        {"{\"type\":\"number\",\"minimum\":0.1}", 100, LONG_MAX, false, false},
        {"{\"type\":\"number\",\"exclusiveMaximum\":-0.001}", LONG_MIN, -1, false, true},
        {"{\"type\":\"number\",\"exclusiveMinimum\":-12.5,\"maximum\":-0.01}", -12500, -10, true, false},
    };
    for (size_t k = 0; k < sizeof b / sizeof *b; k++) {
        rw_grammar *g = NULL;
        rw_error err = {0};
        CHECK_MSG(rw_grammar_compile_schema(b[k].schema, strlen(b[k].schema), &g, &err) == RW_OK, "%s", err.msg);
        rw_grammar_matcher *m = NULL;
        if (!g || rw_grammar_matcher_new(g, NULL, &m, NULL)) continue;
        int wrong = 0;
        for (int neg = 0; neg < 2; neg++)
            for (long ip = 0; ip <= 12; ip++)
                for (int nd = 0; nd <= 3; nd++)
                    for (long f = 0; f < (nd ? (long)pow(10, nd) : 1); f++) {
                        char t[32];
                        if (nd) snprintf(t, sizeof t, "%s%ld.%0*ld", neg ? "-" : "", ip, nd, f);
                        else snprintf(t, sizeof t, "%s%ld", neg ? "-" : "", ip);
                        long v = ip * 1000 + f * (nd == 1 ? 100 : nd == 2 ? 10 : 1);
                        if (neg) v = -v;
                        bool want = !(neg && v == 0) &&
                                    (b[k].lo == LONG_MIN || (b[k].lx ? v > b[k].lo : v >= b[k].lo)) &&
                                    (b[k].hi == LONG_MAX || (b[k].hx ? v < b[k].hi : v <= b[k].hi));
                        rw_grammar_matcher_rewind(m, 0);
                        bool got =
                            rw_grammar_matcher_accept_bytes(m, t, strlen(t), NULL) && rw_grammar_matcher_can_end(m);
                        if (got != want && wrong++ < 5)
                            CHECK_MSG(got == want, "%s: %s %s", b[k].schema, t, got ? "taken" : "refused");
                    }
        CHECK_EQ_INT(wrong, 0);
        rw_grammar_matcher_free(m);
        rw_grammar_free(g);
    }
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--validate")) {
        size_t ns = 0, no = 0;
        char *s = rw_test_read_file(argv[2], &ns), *o = rw_test_read_file(argv[3], &no);
        if (!s || !o) {
            fprintf(stderr, "cannot read %s or %s\n", argv[2], argv[3]);
            return 2;
        }
        int r = check_text(s, o, no);
        if (r != 1) fprintf(stderr, "%s: invalid: %s\n", argv[3], why);
        free(s);
        free(o);
        return r == 1 ? 0 : 1;
    }

    /* the checker itself catches what it should */
    CHECK(check_text("{\"type\":\"integer\",\"minimum\":3}", "2", 1) == 0);
    CHECK(check_text("{\"type\":\"string\",\"pattern\":\"^a+$\"}", "\"aab\"", 5) == 0);
    CHECK(check_text("{\"type\":\"object\",\"required\":[\"x\"]}", "{}", 2) == 0);
    CHECK(check_text("{\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"a\":1,\"a\":2.5}", 15) == 0);
    CHECK(check_text("{}", "{\"a\":1,}", 8) == -1);
    CHECK(check_text("{\"type\":\"string\",\"format\":\"date\"}", "\"2024-13-01\"", 12) == 0);
    CHECK(check_text("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "1", 1) == 0);

    test_keywords();
    test_number_brute();
    /* errors name the place */
    expect_schema_error("{\"type\":\"string\",\"pattern\":\"^(?=a)b$\"}", "schema at /: pattern: lookarounds");
    expect_schema_error("{\"properties\":{\"a\":{\"type\":\"array\",\"uniqueItems\":true}}}",
                        "schema at /properties/a: uniqueItems is not supported");
    expect_schema_error("{\"not\":{\"minimum\":3}}", "not: the negation is supported of");
    expect_schema_error("{\"type\":\"number\",\"multipleOf\":0.5}", "multipleOf on a number is not supported");
    expect_schema_error("{\"type\":\"integer\",\"multipleOf\":5}", "multipleOf on an integer is not supported");
    expect_schema_error("{\"$ref\":\"http://x/y.json\"}", "only local references");
    expect_schema_error("{\"$ref\":\"#/$defs/nope\"}", "points at nothing");
    expect_schema_error("{\"type\":\"strin\"}", "unknown type 'strin'");
    expect_schema_error("{\"type\":\"object\"", "schema: not JSON");
    expect_schema_error("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer lies between");
    expect_schema_error("{\"type\":\"string\",\"pattern\":\"a\\\\1\"}", "the escape \\1 is not supported");
    expect_schema_error("false", "the schema false matches nothing");
    /* found by fuzz_schema: this error path leaked (tests/corrupt/schema/) */
    expect_schema_error("{\"type\":\"array\",\"prefixItems\":false}", "prefixItems must be an array");
    {
        char *gb = NULL;
        rw_error err = {0};
        CHECK(rw_grammar_schema_to_gbnf("{}", 2, &(rw_schema_opts){.name = "bad_name"}, &gb, &err) != RW_OK);
        CHECK(strstr(err.msg, "must be [a-zA-Z0-9-]+") != NULL);
        /* composing: the schema's rules under a prefix inside a larger grammar */
        const char *args = "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}},"
                           "\"required\":[\"x\"],\"additionalProperties\":false}";
        CHECK(rw_grammar_schema_to_gbnf(args, strlen(args), &(rw_schema_opts){.name = "args", .max_ws = -1}, &gb,
                                        &err) == RW_OK);
        char text[4096];
        snprintf(text, sizeof text,
                 "root ::= \"<tool_call>{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": \" args \"}\"\n%s", gb ? gb : "");
        free(gb);
        rw_grammar *g = NULL;
        CHECK_MSG(rw_grammar_compile(text, strlen(text), NULL, &g, &err) == RW_OK, "%s", err.msg);
        rw_grammar_matcher *m = NULL;
        const char *call = "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\":-12}}";
        if (g && rw_grammar_matcher_new(g, NULL, &m, NULL) == RW_OK) {
            CHECK(rw_grammar_matcher_accept_bytes(m, call, strlen(call), NULL) && rw_grammar_matcher_must_end(m));
            rw_grammar_matcher_rewind(m, 0);
            CHECK(!rw_grammar_matcher_accept_bytes(m, "<tool_call>{\"name\": \"g\"", 25, NULL));
        }
        rw_grammar_matcher_free(m);
        rw_grammar_free(g);
        /* a literal of awkward bytes matches exactly them */
        const char raw[] = "a\"b\\c\n\x01é\xc3(";
        char *l = NULL, lt[128];
        CHECK(rw_grammar_gbnf_literal(raw, sizeof raw - 1, &l, &err) == RW_OK);
        snprintf(lt, sizeof lt, "root ::= %s\n", l ? l : "");
        free(l);
        g = NULL;
        m = NULL;
        CHECK_MSG(rw_grammar_compile(lt, strlen(lt), NULL, &g, &err) == RW_OK, "%s", err.msg);
        if (g && rw_grammar_matcher_new(g, NULL, &m, NULL) == RW_OK)
            CHECK(rw_grammar_matcher_accept_bytes(m, raw, sizeof raw - 1, NULL) && rw_grammar_matcher_must_end(m));
        rw_grammar_matcher_free(m);
        rw_grammar_free(g);
    }

    const char *fx = rw_test_fixtures();
    if (!fx) rw_test_skip("no fixtures (the walks use Qwen3's vocabulary)");
    rw_gguf *gg = NULL;
    rw_tokenizer *tok = NULL;
    rw_grammar_vocab *qv = NULL;
    rw_error err = {0};
    if (rw_gguf_open(rw_test_fixture_path("tokenizer/ggml-vocab-qwen3.gguf"), &gg, &err) ||
        rw_tokenizer_load(gg, &tok, &err))
        rw_test_skip("no qwen3 vocabulary");
    CHECK(rw_grammar_vocab_from_tokenizer(tok, &qv, &err) == RW_OK);
    pieces pc = {.n = rw_tokenizer_n_vocab(tok)};
    pc.piece = calloc((size_t)pc.n, sizeof *pc.piece);
    pc.len = calloc((size_t)pc.n, sizeof *pc.len);
    for (int32_t i = 0; i < pc.n; i++) {
        char buf[512];
        size_t k = rw_tokenizer_is_control(tok, i) ? 0 : rw_token_to_piece(tok, i, false, buf, sizeof buf);
        if (k > sizeof buf) k = 0;
        pc.piece[i] = malloc(k + 1);
        memcpy(pc.piece[i], buf, k);
        pc.len[i] = k;
    }
    int32_t closers[3];
    const char *cl[3] = {"\"", "}", "]"};
    for (int i = 0; i < 3; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        rw_tokenize(tok, cl[i], 1, false, false, &ids, &n, NULL);
        closers[i] = n == 1 ? ids[0] : 0;
        free(ids);
    }

    DIR *d = opendir("tests/grammar/schemas");
    if (!d) rw_test_skip("run from the repository root");
    char *names[256];
    int nn = 0;
    for (struct dirent *e; (e = readdir(d)) && nn < 256;)
        if (strstr(e->d_name, ".json")) names[nn++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, cmp_str);
    CHECK(nn >= 30);
    int walks = 0, ended_walks = 0;
    for (int i = 0; i < nn; i++) {
        char path[512];
        snprintf(path, sizeof path, "tests/grammar/schemas/%s", names[i]);
        size_t sn = 0;
        char *schema = rw_test_read_file(path, &sn);
        rw_grammar *g = NULL;
        rw_status st = rw_grammar_compile_schema(schema, sn, &g, &err);
        CHECK_MSG(st == RW_OK, "%s: %s", names[i], err.msg);
        for (uint64_t seed = 1; !st && seed <= 8; seed++) {
            bool ended;
            size_t len;
            char *out = walk(g, qv, &pc, seed * 7919 + (uint64_t)i, 400, &ended, &len, closers);
            walks++;
            if (ended) {
                ended_walks++;
                int r = check_text(schema, out, len);
                CHECK_MSG(r == 1, "%s seed %d: %s\n  output: %s", names[i], (int)seed, why, out);
            }
            free(out);
        }
        rw_grammar_free(g);
        free(schema);
        free(names[i]);
    }
    fprintf(stderr, "%d schemas, %d walks, %d ended and checked\n", nn, walks, ended_walks);
    CHECK(ended_walks * 10 >= walks * 8); /* the walks end: most of them do, or the test checks little */
    for (int32_t i = 0; i < pc.n; i++) free(pc.piece[i]);
    free(pc.piece);
    free(pc.len);
    rw_grammar_vocab_free(qv);
    rw_tokenizer_free(tok);
    rw_gguf_close(gg);
    return rw_test_done();
}
