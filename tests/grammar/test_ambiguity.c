/* test_ambiguity.c - the admission probe (grammar/match.c): a schema whose
 * parser stacks explode is refused when it is compiled (a 400 before any
 * token, never a failure mid-generation), also when the explosion sits
 * behind a required key, deeper than the output's first bytes; one just
 * under the limits compiles and runs. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "harness.h"

/* anyOf n x n one-key objects, at the top or as the value of a required key */
static char *wide_schema(int n, bool behind_key) {
    json_t *outer = json_array();
    for (int i = 0; i < n; i++) {
        json_t *inner = json_array();
        for (int j = 0; j < n; j++) {
            char key[32];
            snprintf(key, sizeof key, "k%d_%d", i, j);
            json_array_append_new(inner, json_pack("{s:s,s:{s:{s:s}},s:[s]}", "type", "object", "properties", key,
                                                   "type", "integer", "required", key));
        }
        json_array_append_new(outer, json_pack("{s:o}", "anyOf", inner));
    }
    json_t *any = json_pack("{s:o}", "anyOf", outer);
    json_t *root = behind_key ? json_pack("{s:s,s:{s:o},s:[s]}", "type", "object", "properties", "xxxxxxxxxxxx", any,
                                          "required", "xxxxxxxxxxxx")
                              : any;
    char *text = json_dumps(root, JSON_COMPACT); /* the caller frees */
    json_decref(root);
    return text;
}

static void check(int n, bool behind_key, bool admitted) {
    char *text = wide_schema(n, behind_key);
    rw_grammar *g = NULL;
    rw_error err = {0};
    const rw_status st = rw_grammar_compile_schema(text, strlen(text), &g, &err);
    printf("anyOf %d x %d%s: %s\n", n, n, behind_key ? " behind a key" : "", st ? err.msg : "admitted");
    if (admitted) CHECK_MSG(st == RW_OK, "anyOf %d x %d refused: %s", n, n, err.msg);
    else
        CHECK_MSG(st == RW_ERR_INVALID_ARG && strstr(err.msg, "too ambiguous"), "anyOf %d x %d%s: %d %s", n, n,
                  behind_key ? " behind a key" : "", (int)st, err.msg);
    if (g) { /* an admitted one matches its own outputs */
        rw_grammar_matcher *m = NULL;
        CHECK(rw_grammar_matcher_new(g, NULL, &m, &err) == RW_OK);
        char out[64];
        snprintf(out, sizeof out, "%s{\"k%d_%d\": 7}%s", behind_key ? "{\"xxxxxxxxxxxx\": " : "", n - 1, n / 2,
                 behind_key ? "}" : "");
        CHECK_MSG(m && rw_grammar_matcher_accept_bytes(m, out, strlen(out), &err), "%s: %s", out, err.msg);
        CHECK(m && rw_grammar_matcher_can_end(m));
        rw_grammar_matcher_free(m);
    }
    rw_grammar_free(g);
    free(text);
}

int main(void) {
    check(20, false, true);
    check(30, true, true);
    check(50, false, false);
    check(50, true, false);
    return rw_test_done();
}
