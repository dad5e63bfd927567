/* schema_int.h - the JSON Schema compiler's state, shared by its files
 * (private to src/grammar): schema.c writes the GBNF, schema_combine.c
 * turns allOf, not and if/then/else into schemas schema.c writes,
 * schema_ref.c holds what both use (the error, $ref resolution). */
#ifndef RW_GRAMMAR_SCHEMA_INT_H
#define RW_GRAMMAR_SCHEMA_INT_H

#include <jansson.h>

#include "grammar/grammar_int.h"

#define MAX_LEN 4096 /* minLength / maxLength / minItems / maxItems / min/maxProperties we write out */

/* ours, made by not of strings: a string but none of these (an array) */
#define NOT_STRINGS "x-rw-not-strings"

/* a growing text; oom set (and the text frozen) when an allocation failed */
typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

/* the shared rules, written at the end when used */
enum { P_WS, P_VALUE, P_OBJECT, P_ARRAY, P_STRING, P_CHAR, P_NUMBER, P_INTEGER, P_BOOLEAN, P_NULL, P_KCHAR, P_COUNT };

typedef struct {
    char *ptr, *rule;
} sref;

typedef struct {
    sbuf out;
    const char *name;
    int max_ws;
    int counter;
    json_t *doc;
    sref *refs;
    int n_refs, cap_refs;
    bool used[P_COUNT];
    int depth;   /* gen() frames open, at most RW_GRAMMAR_MAX_NESTING */
    long merges; /* allOf merges so far: anyOf distributes, so they can multiply; bounded */
    rw_error *err;
    rw_status st;
} sc;

/* schema_ref.c: sets the error "schema at PATH: msg" (the first one only)
 * and returns NULL. */
char *rw_grammar__schema_fail(sc *c, rw_status code, const char *path, const char *msg);
__attribute__((format(printf, 4, 5))) char *rw_grammar__schema_failf(sc *c, rw_status code, const char *path,
                                                                     const char *fmt, ...);
/* The subschema a local $ref points at (within c->doc), or NULL (error set). */
json_t *rw_grammar__schema_resolve(sc *c, const char *ref, const char *path);
/* s with allOf, not, if/then/else compiled away: a new schema (the caller
 * decrefs it), or NULL (error set). */
json_t *rw_grammar__schema_combine(sc *c, json_t *s, const char *path);

#endif
