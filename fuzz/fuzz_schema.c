/* fuzz_schema.c - libFuzzer harness for the JSON Schema -> GBNF compiler.
 *
 * The input is a schema (JSON text). Properties: the conversion succeeds or
 * fails with a one-line message; what it writes compiles as GBNF or fails
 * with a one-line message (a schema can ask for something that matches
 * nothing, or a pattern that repeats an empty group); under a prefix the
 * rules are all named with it and compose into a larger grammar; never a
 * crash, a hang, undefined behaviour or a leak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    char *gbnf = NULL;
    rw_error err = {0};
    rw_schema_opts o = {.name = "args", .max_ws = size % 3 == 0 ? -1 : 0};
    if (rw_grammar_schema_to_gbnf((const char *)data, size, &o, &gbnf, &err)) {
        if (!err.msg[0] || strchr(err.msg, '\n') || gbnf) __builtin_trap();
        return 0;
    }
    /* every rule is "args" or "args-..." */
    for (const char *l = gbnf; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
        if (strncmp(l, "args", 4)) __builtin_trap();
    size_t n = strlen(gbnf);
    char *text = malloc(n + 64);
    if (!text) __builtin_trap();
    int k = snprintf(text, n + 64, "root ::= \"<call>\" args \"</call>\"\n%s", gbnf);
    rw_grammar *g = NULL;
    if (rw_grammar_compile(text, (size_t)k, NULL, &g, &err)) {
        if (!err.msg[0] || strchr(err.msg, '\n')) __builtin_trap();
    } else {
        rw_grammar_matcher *m = NULL;
        if (rw_grammar_matcher_new(g, NULL, &m, &err)) __builtin_trap();
        if (!rw_grammar_matcher_accept_bytes(m, "<call>", 6, NULL)) __builtin_trap();
        rw_grammar_matcher_free(m);
    }
    rw_grammar_free(g);
    free(text);
    free(gbnf);
    return 0;
}
