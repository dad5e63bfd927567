/* output_int.h - private to src/chat's output parser: the JSON balance
 * scanner and the parsers of one call's text (call_parse.c). */
#ifndef RW_CHAT_OUTPUT_INT_H
#define RW_CHAT_OUTPUT_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "chat/output.h"

/* Finds where a JSON object or array that starts after optional whitespace
 * ends, string-aware, without validating more than brackets and strings. */
typedef struct {
    size_t pos; /* next byte to look at */
    int depth;
    bool started, in_str, esc;
} rw_chat__jscan;

/* 1: the value ends at s->pos; 0: needs more text; -1: not an object/array. */
int rw_chat__jscan_run(rw_chat__jscan *s, const char *p, size_t n);

/* Calls parsed from one piece of text: names and arguments (compact JSON
 * object text), malloc'd. */
typedef struct {
    struct {
        char *name, *args;
    } *v;
    int n, cap;
} rw_chat__calls;

void rw_chat__calls_free(rw_chat__calls *c);

/* A JSON object {"name", "arguments" | "parameters"} or an array of them
 * (strict: every element must be a call). bare: the text was not inside a
 * call marker (a bare message), so a call also needs its arguments key, lest
 * an ordinary JSON answer with a "name" be taken for a call. */
bool rw_chat__parse_json_calls(const char *s, size_t n, bool bare, rw_chat__calls *out);

/* The body of a <tool_call> (or a bare <function=...>...</function> when
 * function): Qwen's XML form (values typed by the tools' schemas) or JSON. */
bool rw_chat__parse_call_body(const char *s, size_t n, bool function, const json_t *tools, rw_chat__calls *out);

#endif
