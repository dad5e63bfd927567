/* test_nesting.c - every grammar compiler refuses input nested past
 * RW_GRAMMAR_MAX_NESTING with a clear error instead of overflowing the C
 * stack, driven to 100,000 levels: GBNF groups, a schema's regex pattern,
 * nested subschemas, chains of $refs; and a chain of 100,000 GBNF rules (no
 * nesting, only length) compiles in linear time: 20,000 of them match, 100,000
 * are refused whole by the parser-stack limit. */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "harness.h"

#define DEEP 100000

/* a malloc'd string: open * n, mid, close * n */
static char *nest(const char *open, const char *mid, const char *close, int n) {
    size_t lo = strlen(open), lm = strlen(mid), lc = strlen(close);
    char *s = malloc((lo + lc) * (size_t)n + lm + 1), *p = s;
    for (int i = 0; i < n; i++) memcpy(p, open, lo), p += lo;
    memcpy(p, mid, lm), p += lm;
    for (int i = 0; i < n; i++) memcpy(p, close, lc), p += lc;
    *p = 0;
    return s;
}

static void expect_refused(rw_status st, const rw_error *err, const char *what) {
    CHECK_MSG(st == RW_ERR_INVALID_ARG, "%s: status %d (%s)", what, (int)st, err->msg);
    CHECK_MSG(strstr(err->msg, "256") != NULL, "%s: the message names the limit: %s", what, err->msg);
}

static void gbnf_groups(int n, bool ok) {
    char *body = nest("(", "\"a\"", ")", n);
    size_t len = strlen(body) + 16;
    char *text = malloc(len);
    snprintf(text, len, "root ::= %s\n", body);
    rw_grammar *g = NULL;
    rw_error err = {0};
    rw_status st = rw_grammar_compile(text, strlen(text), NULL, &g, &err);
    if (ok) CHECK_MSG(st == RW_OK && g, "%d groups: %s", n, err.msg);
    else expect_refused(st, &err, "gbnf groups");
    rw_grammar_free(g);
    free(text);
    free(body);
}

/* root ::= r1 "x" ; r1 ::= r2 "x" ; ... : every rule starts with the next
 * (the left-recursion check walks the whole chain), none nests */
static void gbnf_chain(int n, bool ok) {
    size_t cap = (size_t)n * 40 + 64, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text + len, cap - len, "root ::= r1\n");
    for (int i = 1; i < n; i++) len += (size_t)snprintf(text + len, cap - len, "r%d ::= r%d \"x\"\n", i, i + 1);
    len += (size_t)snprintf(text + len, cap - len, "r%d ::= \"y\"\n", n);
    rw_grammar *g = NULL;
    rw_error err = {0};
    rw_status st = rw_grammar_compile(text, len, NULL, &g, &err);
    if (ok) CHECK_MSG(st == RW_OK && g, "a chain of %d rules: %s", n, err.msg);
    else /* one parser stack a level: past RW_GRAMMAR_MAX_STACKS, refused whole */
        CHECK_MSG(st != RW_OK && strstr(err.msg, "parser stacks"), "a chain of %d rules: %s", n, err.msg);
    if (g) {
        rw_grammar_matcher *m = NULL;
        CHECK(rw_grammar_matcher_new(g, NULL, &m, &err) == RW_OK);
        char *want = malloc((size_t)n + 1);
        want[0] = 'y';
        memset(want + 1, 'x', (size_t)n - 1);
        CHECK(m && rw_grammar_matcher_accept_bytes(m, want, (size_t)n, &err));
        CHECK(m && rw_grammar_matcher_can_end(m));
        free(want);
        rw_grammar_matcher_free(m);
    }
    rw_grammar_free(g);
    /* the same chain closed into a loop is left recursion, found without recursing */
    len = 0;
    for (int i = 1; i < n; i++) len += (size_t)snprintf(text + len, cap - len, "r%d ::= r%d \"x\"\n", i, i + 1);
    len += (size_t)snprintf(text + len, cap - len, "r%d ::= r1 | \"y\"\nroot ::= r1\n", n);
    g = NULL;
    st = rw_grammar_compile(text, len, NULL, &g, &err);
    CHECK_MSG(st == RW_ERR_INVALID_ARG && strstr(err.msg, "left-recursive"), "a loop of %d rules: %s", n, err.msg);
    rw_grammar_free(g);
    free(text);
}

static rw_status schema(const char *text, rw_error *err) {
    char *gbnf = NULL;
    rw_status st = rw_grammar_schema_to_gbnf(text, strlen(text), NULL, &gbnf, err);
    free(gbnf);
    return st;
}

static void pattern_groups(int n, bool ok) {
    char *pat = nest("(", "a", ")", n);
    size_t len = strlen(pat) + 64;
    char *text = malloc(len);
    snprintf(text, len, "{\"type\":\"string\",\"pattern\":\"^%s$\"}", pat);
    rw_error err = {0};
    rw_status st = schema(text, &err);
    if (ok) CHECK_MSG(st == RW_OK, "%d groups: %s", n, err.msg);
    else expect_refused(st, &err, "pattern groups");
    free(text);
    free(pat);
}

static void nested_items(int n, bool ok) {
    char *text = nest("{\"type\":\"array\",\"items\":", "{\"type\":\"integer\"}", "}", n);
    rw_error err = {0};
    rw_status st = schema(text, &err);
    if (ok) CHECK_MSG(st == RW_OK, "%d nested arrays: %s", n, err.msg);
    else CHECK_MSG(st == RW_ERR_INVALID_ARG, "%d nested arrays: %d %s", n, (int)st, err.msg);
    free(text);
}

/* $defs a0 -> a1 -> ... -> a(n-1) -> integer, each an object holding the next */
static void ref_chain(int n, bool ok) {
    size_t cap = (size_t)n * 96 + 128, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text + len, cap - len, "{\"$ref\":\"#/$defs/a0\",\"$defs\":{");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "\"a%d\":{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#/$defs/a%d\"}}},", i,
                                i + 1);
    len += (size_t)snprintf(text + len, cap - len, "\"a%d\":{\"type\":\"integer\"}}}", n);
    rw_error err = {0};
    rw_status st = schema(text, &err);
    if (ok) CHECK_MSG(st == RW_OK, "a chain of %d $refs: %s", n, err.msg);
    else expect_refused(st, &err, "$ref chain");
    free(text);
}

int main(void) {
    gbnf_groups(RW_GRAMMAR_MAX_NESTING, true);
    gbnf_groups(RW_GRAMMAR_MAX_NESTING + 1, false);
    gbnf_groups(DEEP, false);
    gbnf_chain(20000, true);
    gbnf_chain(DEEP, false);
    pattern_groups(RW_GRAMMAR_MAX_NESTING, true);
    pattern_groups(RW_GRAMMAR_MAX_NESTING + 1, false);
    pattern_groups(DEEP, false);
    /* a subschema level is a gen() frame plus the object's or array's own */
    nested_items(RW_GRAMMAR_MAX_NESTING / 2 - 1, true);
    nested_items(RW_GRAMMAR_MAX_NESTING + 1, false);
    nested_items(2000, false); /* under jansson's depth limit: ours refuses it */
    nested_items(DEEP, false); /* past jansson's: not JSON to it */
    ref_chain(RW_GRAMMAR_MAX_NESTING / 4, true);
    ref_chain(DEEP, false);
    return rw_test_done();
}
