/* schema_ref.c - what both halves of the JSON Schema compiler use: the
 * error of a schema (the first one, with the place in the schema) and the
 * local $ref resolution (JSON pointers into the document). schema.c and
 * schema_combine.c call these; this file calls neither, so the two stay a
 * tree. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_int.h"

char *rw_grammar__schema_fail(sc *c, rw_status code, const char *path, const char *msg) {
    if (!c->st) c->st = rw_errorf(c->err, code, "schema at %s: %s", *path ? path : "/", msg);
    return NULL;
}

/* rw_grammar__schema_fail with a printf message. */
char *rw_grammar__schema_failf(sc *c, rw_status code, const char *path, const char *fmt, ...) {
    if (c->st) return NULL;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rw_grammar__schema_fail(c, code, path, msg);
}

json_t *rw_grammar__schema_resolve(sc *c, const char *ref, const char *path) {
    if (ref[0] != '#') {
        rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "$ref '%s': only local references (#...) are supported",
                                 ref);
        return NULL;
    }
    json_t *cur = c->doc;
    const char *p = ref + 1;
    if (*p && *p != '/') {
        rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "$ref '%s': anchors are not supported", ref);
        return NULL;
    }
    while (*p == '/') {
        p++;
        char tok[256];
        size_t k = 0;
        while (*p && *p != '/' && k + 1 < sizeof tok) {
            if (p[0] == '~' && p[1] == '0') tok[k++] = '~', p += 2;
            else if (p[0] == '~' && p[1] == '1') tok[k++] = '/', p += 2;
            else tok[k++] = *p++;
        }
        tok[k] = 0;
        if (json_is_object(cur)) cur = json_object_get(cur, tok);
        else if (json_is_array(cur)) {
            char *e;
            long i = strtol(tok, &e, 10);
            cur = *e || i < 0 ? NULL : json_array_get(cur, (size_t)i);
        } else cur = NULL;
        if (!cur) {
            rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "$ref '%s' points at nothing", ref);
            return NULL;
        }
    }
    return cur;
}
