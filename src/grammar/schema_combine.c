/* schema_combine.c - allOf, not, if/then/else: schemas combined into one.
 *
 * allOf is compiled by merging its schemas into one (keyword by keyword:
 * types intersect, properties and required add up, bounds take the tighter,
 * enums intersect; an anyOf distributes over the rest), not by the schema
 * of what the negated one refuses, where that is a schema of ours (of a
 * type, a const/enum of strings, required names, properties of those), and
 * if/then/else as anyOf [if and then, not-if and else]. What cannot be
 * merged or negated is refused, naming the keyword. The merged schemas are
 * new JSON values, freed after their grammar is written. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_int.h"

static const char *const all_types[] = {"object", "array", "string", "number", "integer", "boolean", "null"};

/* The types a schema's "type" allows as a mask (all when absent); integer
 * is a subset of number. */
static unsigned type_mask(json_t *t) {
    if (!t) return 0x7f;
    unsigned m = 0;
    for (size_t k = 0; k < 7; k++) {
        bool in = json_is_string(t) ? !strcmp(json_string_value(t), all_types[k]) : false;
        size_t i;
        json_t *x;
        json_array_foreach(t, i, x) in |= json_is_string(x) && !strcmp(json_string_value(x), all_types[k]);
        if (in) m |= 1u << k;
    }
    if (m & (1u << 3)) m |= 1u << 4; /* number takes integers */
    return m;
}

static json_t *types_of(unsigned m) {
    if (m & (1u << 3)) m &= ~(1u << 4);
    json_t *a = json_array();
    for (size_t k = 0; k < 7; k++)
        if (m & (1u << k)) json_array_append_new(a, json_string(all_types[k]));
    return a;
}

static bool value_has_type(json_t *v, unsigned m) {
    if (json_is_object(v)) return m & 1;
    if (json_is_array(v)) return m & 2;
    if (json_is_string(v)) return m & 4;
    if (json_is_integer(v)) return m & 0x18;
    if (json_is_real(v)) return (m & 8) || ((m & 0x10) && json_real_value(v) == floor(json_real_value(v)));
    if (json_is_boolean(v)) return m & 0x20;
    return m & 0x40;
}

typedef enum { M_OK, M_EMPTY, M_FAIL } merge_st;

static json_t *merge(sc *c, json_t *a, json_t *b, const char *path, merge_st *st);

/* a schema with its top $ref replaced by what it points at (merged with the rest) */
static json_t *deref(sc *c, json_t *s, const char *path, merge_st *st) {
    json_t *r = json_is_object(s) ? json_object_get(s, "$ref") : NULL;
    if (!r) return json_incref(s);
    if (!json_is_string(r)) {
        rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "$ref must be a string");
        *st = M_FAIL;
        return NULL;
    }
    json_t *t = rw_grammar__schema_resolve(c, json_string_value(r), path);
    if (!t) {
        *st = M_FAIL;
        return NULL;
    }
    if (++c->depth > RW_GRAMMAR_MAX_NESTING) {
        c->depth--;
        rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "subschemas nested deeper than %d",
                                 RW_GRAMMAR_MAX_NESTING);
        *st = M_FAIL;
        return NULL;
    }
    json_t *rest = json_deep_copy(s);
    json_object_del(rest, "$ref");
    json_t *m = merge(c, t, rest, path, st);
    c->depth--;
    json_decref(rest);
    return m;
}

static bool is_min_kw(const char *k) {
    return !strcmp(k, "minimum") || !strcmp(k, "exclusiveMinimum") || !strcmp(k, "minLength") ||
           !strcmp(k, "minItems") || !strcmp(k, "minProperties");
}
static bool is_max_kw(const char *k) {
    return !strcmp(k, "maximum") || !strcmp(k, "exclusiveMaximum") || !strcmp(k, "maxLength") ||
           !strcmp(k, "maxItems") || !strcmp(k, "maxProperties");
}

/* The schema of what both a and b accept; *st M_EMPTY when nothing is
 * (a type or enum intersection), M_FAIL (error set) when it cannot be said. */
static json_t *merge_at(sc *c, json_t *a, json_t *b, const char *path, merge_st *st);

/* merge with the nesting bounded, as gen's: each level is a C stack frame */
static json_t *merge(sc *c, json_t *a, json_t *b, const char *path, merge_st *st) {
    if (c->depth >= RW_GRAMMAR_MAX_NESTING) {
        rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "subschemas nested deeper than %d",
                                 RW_GRAMMAR_MAX_NESTING);
        *st = M_FAIL;
        return NULL;
    }
    if (++c->merges > 20000) {
        rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path,
                                 "allOf/if/not: too many combinations (anyOf inside multiplies them)");
        *st = M_FAIL;
        return NULL;
    }
    c->depth++;
    json_t *r = merge_at(c, a, b, path, st);
    c->depth--;
    return r;
}

static json_t *merge_at(sc *c, json_t *a, json_t *b, const char *path, merge_st *st) {
    *st = M_OK;
    if (json_is_true(a) || (json_is_object(a) && json_object_size(a) == 0)) return json_incref(b);
    if (json_is_true(b) || (json_is_object(b) && json_object_size(b) == 0)) return json_incref(a);
    if (json_is_false(a) || json_is_false(b)) {
        *st = M_EMPTY;
        return NULL;
    }
    if (!json_is_object(a) || !json_is_object(b)) {
        rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "a schema must be an object or a boolean");
        *st = M_FAIL;
        return NULL;
    }
    json_t *da = deref(c, a, path, st), *db = da ? deref(c, b, path, st) : NULL, *out = NULL;
    if (!da || !db) goto done;
    a = da;
    b = db;
    /* allOf inside: folded first; anyOf/oneOf: distributed over the rest */
    static const char *const comb[] = {"allOf", "anyOf", "oneOf"};
    for (int w = 0; w < 2 && *st == M_OK; w++) {
        json_t *x = w ? b : a, *y = w ? a : b;
        for (int k = 0; k < 3; k++) {
            json_t *arr = json_object_get(x, comb[k]);
            if (!arr) continue;
            if (!json_is_array(arr) || !json_array_size(arr)) {
                rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "%s must be a non-empty array", comb[k]);
                *st = M_FAIL;
                goto done;
            }
            json_t *rest = json_deep_copy(x);
            json_object_del(rest, comb[k]);
            if (k == 0) { /* allOf: rest and each, then y */
                json_t *acc = json_incref(rest), *e;
                size_t i;
                json_array_foreach(arr, i, e) {
                    json_t *m = merge(c, acc, e, path, st);
                    json_decref(acc);
                    acc = m;
                    if (*st != M_OK) break;
                }
                if (*st == M_OK) out = merge(c, acc, y, path, st);
                json_decref(acc);
            } else { /* anyOf: each branch with the rest and y; empty branches go */
                json_t *alts = json_array(), *e;
                size_t i;
                json_array_foreach(arr, i, e) {
                    json_t *m1 = merge(c, rest, e, path, st), *m2 = *st == M_OK ? merge(c, m1, y, path, st) : NULL;
                    json_decref(m1);
                    if (*st == M_FAIL) break;
                    if (*st == M_OK) json_array_append_new(alts, m2);
                    *st = M_OK;
                }
                if (*st == M_OK && !json_array_size(alts)) *st = M_EMPTY;
                out = *st == M_OK ? json_pack("{s:o}", "anyOf", alts) : (json_decref(alts), NULL);
            }
            json_decref(rest);
            goto done;
        }
    }
    out = json_deep_copy(a);
    const char *k;
    json_t *v;
    json_object_foreach(b, k, v) {
        json_t *u = json_object_get(out, k);
        if (!u) {
            json_object_set(out, k, v);
            continue;
        }
        if (json_equal(u, v)) continue;
        if (!strcmp(k, "type")) {
            unsigned m = type_mask(u) & type_mask(v);
            if (!m) *st = M_EMPTY;
            else json_object_set_new(out, k, types_of(m));
        } else if (!strcmp(k, "required")) {
            size_t i;
            json_t *x;
            json_array_foreach(v, i, x) {
                bool have = false;
                size_t j;
                json_t *y;
                json_array_foreach(u, j, y) have |= json_equal(x, y);
                if (!have) json_array_append(u, x);
            }
        } else if (!strcmp(k, "properties") && json_is_object(u) && json_is_object(v)) {
            const char *pk;
            json_t *pv;
            json_object_foreach(v, pk, pv) {
                json_t *pu = json_object_get(u, pk);
                if (!pu) {
                    json_object_set(u, pk, pv);
                    continue;
                }
                merge_st ps;
                json_t *m = merge(c, pu, pv, path, &ps);
                if (ps == M_FAIL) {
                    *st = M_FAIL;
                    break;
                }
                json_object_set_new(u, pk, ps == M_EMPTY ? json_false() : m);
            }
        } else if (!strcmp(k, "additionalProperties") || !strcmp(k, "items")) {
            merge_st ps;
            json_t *m = merge(c, u, v, path, &ps);
            if (ps == M_FAIL) *st = M_FAIL;
            else json_object_set_new(out, k, ps == M_EMPTY ? json_false() : m);
        } else if ((is_min_kw(k) || is_max_kw(k)) && json_is_number(u) && json_is_number(v)) {
            bool take_v = is_min_kw(k) ? json_number_value(v) > json_number_value(u)
                                       : json_number_value(v) < json_number_value(u);
            if (take_v) json_object_set(out, k, v);
        } else if (!strcmp(k, "enum") || !strcmp(k, "const") || !strcmp(k, NOT_STRINGS)) {
            /* handled below with enum/const together */
            json_object_set(out, k, u);
        } else if (!strcmp(k, "title") || !strcmp(k, "description") || !strcmp(k, "default") ||
                   !strcmp(k, "examples") || !strcmp(k, "$comment") || !strcmp(k, "$schema") || !strcmp(k, "$id")) {
        } else {
            rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path,
                                     "allOf: the schemas set '%s' differently (not supported)", k);
            *st = M_FAIL;
        }
        if (*st != M_OK) break;
    }
    if (*st != M_OK) goto done;
    /* a property one side names and the other refuses as additional */
    for (int w = 0; w < 2 && *st == M_OK; w++) {
        json_t *x = w ? b : a, *ad = json_object_get(x, "additionalProperties");
        json_t *xp = json_object_get(x, "properties"), *op = json_object_get(out, "properties");
        if (!ad || json_is_true(ad) || !json_is_object(op)) continue;
        const char *pk;
        json_t *pv;
        json_object_foreach(op, pk, pv) {
            if (json_object_get(xp, pk)) continue;
            merge_st ps;
            json_t *m = merge(c, pv, ad, path, &ps);
            if (ps == M_FAIL) {
                *st = M_FAIL;
                break;
            }
            json_object_set_new(op, pk, ps == M_EMPTY ? json_false() : m);
        }
    }
    if (*st != M_OK) goto done;
    { /* a required name whose schema is now false: nothing matches */
        json_t *rq = json_object_get(out, "required"), *op = json_object_get(out, "properties"), *x;
        size_t i;
        json_array_foreach(rq, i, x) if (json_is_string(x) &&
                                         json_is_false(json_object_get(op, json_string_value(x)))) *st = M_EMPTY;
    }
    if (*st != M_OK) goto done;
    /* enum/const: the values in both (and of the type); the strings refused by both */
    json_t *vals = NULL;
    for (int w = 0; w < 2; w++) {
        json_t *x = w ? b : a, *e = json_object_get(x, "enum"), *cst = json_object_get(x, "const");
        json_t *list = cst ? json_pack("[O]", cst) : e ? json_incref(e) : NULL;
        if (!list) continue;
        if (!vals) vals = list;
        else {
            json_t *both = json_array(), *y;
            size_t i;
            json_array_foreach(vals, i, y) {
                size_t j;
                json_t *z;
                bool in = false;
                json_array_foreach(list, j, z) in |= json_equal(y, z);
                if (in) json_array_append(both, y);
            }
            json_decref(vals);
            json_decref(list);
            vals = both;
        }
    }
    json_t *ns = NULL;
    for (int w = 0; w < 2; w++) {
        json_t *x = json_object_get(w ? b : a, NOT_STRINGS);
        if (!x) continue;
        if (!ns) ns = json_deep_copy(x);
        else json_array_extend(ns, x);
    }
    if (ns) json_object_set_new(out, NOT_STRINGS, ns);
    if (vals) {
        unsigned m = type_mask(json_object_get(out, "type"));
        json_t *keep = json_array(), *y;
        size_t i;
        json_array_foreach(vals, i, y) {
            bool out_ns = false;
            size_t j;
            json_t *z;
            json_array_foreach(ns, j, z) out_ns |= json_equal(y, z);
            if (value_has_type(y, m) && !out_ns) json_array_append(keep, y);
        }
        json_decref(vals);
        json_object_del(out, "const");
        json_object_del(out, NOT_STRINGS);
        if (!json_array_size(keep)) *st = M_EMPTY;
        json_object_set_new(out, "enum", keep);
    }
done:
    json_decref(da);
    json_decref(db);
    if (*st != M_OK) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* The schema of what s refuses, or NULL (with the error set) when it is not
 * one of ours. */
static json_t *negate_at(sc *c, json_t *s, const char *kw, const char *path);

static json_t *negate(sc *c, json_t *s, const char *kw, const char *path) {
    if (c->depth >= RW_GRAMMAR_MAX_NESTING)
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "subschemas nested deeper than %d",
                                        RW_GRAMMAR_MAX_NESTING),
               NULL;
    c->depth++;
    json_t *r = negate_at(c, s, kw, path);
    c->depth--;
    return r;
}

static json_t *negate_at(sc *c, json_t *s, const char *kw, const char *path) {
    if (json_is_true(s)) return json_false();
    if (json_is_false(s)) return json_true();
    merge_st st = M_OK;
    json_t *d = deref(c, s, path, &st), *out = NULL;
    if (!d) return NULL;
    const char *k;
    json_t *v;
    int n_kw = 0;
    json_object_foreach(d, k, v) {
        if (strcmp(k, "title") && strcmp(k, "description") && strcmp(k, "$comment")) n_kw++;
    }
    json_t *t = json_object_get(d, "type"), *e = json_object_get(d, "enum"), *cst = json_object_get(d, "const");
    json_t *props = json_object_get(d, "properties"), *req = json_object_get(d, "required");
    if (t && n_kw == 1) { /* not a type: the other types */
        unsigned m = 0x7f & ~type_mask(t);
        /* not integer (numbers with a fraction) is no type of ours: refused below */
        if (!(type_mask(t) & (1u << 4) && !(type_mask(t) & (1u << 3))))
            out = m ? json_pack("{s:o}", "type", types_of(m)) : json_false();
    } else if ((e || cst) && n_kw == 1 + (t != NULL)) {
        json_t *list = cst ? json_pack("[O]", cst) : json_incref(e), *x;
        size_t i;
        bool strings = json_is_array(list);
        json_array_foreach(list, i, x) strings &= json_is_string(x);
        if (strings && (!t || type_mask(t) == 4)) /* a string but none of them, or another type */
            out = json_pack("{s:[{s:s,s:O},{s:o}]}", "anyOf", "type", "string", NOT_STRINGS, list, "type",
                            types_of(0x7f & ~4u));
        json_decref(list);
    } else if ((props || req) && n_kw == (props != NULL) + (req != NULL) + (t != NULL) && (!t || type_mask(t) == 1)) {
        /* an object that lacks a required name, or has a property of the other kind; or not an object */
        json_t *alts = json_array(), *x;
        size_t i;
        json_array_append_new(alts, json_pack("{s:o}", "type", types_of(0x7e)));
        json_array_foreach(req, i, x) {
            if (!json_is_string(x)) continue;
            json_array_append_new(alts,
                                  json_pack("{s:s,s:{s:b}}", "type", "object", "properties", json_string_value(x), 0));
        }
        const char *pk;
        json_t *pv;
        json_object_foreach(props, pk, pv) {
            json_t *np = negate(c, pv, kw, path);
            if (!np) {
                json_decref(alts);
                alts = NULL;
                break;
            }
            json_array_append_new(
                alts, json_pack("{s:s,s:{s:o},s:[s]}", "type", "object", "properties", pk, np, "required", pk));
        }
        if (alts) out = json_pack("{s:o}", "anyOf", alts);
    }
    json_decref(d);
    if (!out && !c->st)
        rw_grammar__schema_failf(
            c, RW_ERR_UNSUPPORTED, path,
            "%s: the negation is supported of a type, a const/enum of strings, required names, and properties of "
            "those only",
            kw);
    return out;
}

/* (schema_int.h) */
json_t *rw_grammar__schema_combine(sc *c, json_t *s, const char *path) {
    json_t *rest = json_deep_copy(s), *out = NULL;
    json_t *all = json_object_get(s, "allOf"), *nt = json_object_get(s, "not"), *ifs = json_object_get(s, "if");
    json_t *th = json_object_get(s, "then"), *el = json_object_get(s, "else");
    merge_st st = M_OK;
    json_object_del(rest, "not");
    json_object_del(rest, "if");
    json_object_del(rest, "then");
    json_object_del(rest, "else");
    if (nt) {
        json_t *n = negate(c, nt, "not", path);
        if (!n) goto fail;
        json_t *m = merge(c, rest, n, path, &st);
        json_decref(n);
        json_decref(rest);
        rest = m;
        if (st != M_OK) goto fail;
    }
    if (ifs) {
        json_t *n = negate(c, ifs, "if", path);
        if (!n) goto fail;
        json_t *yes = merge(c, ifs, th ? th : json_true(), path, &st), *no = NULL, *alts = json_array();
        json_t *b1 = st == M_FAIL ? NULL : st == M_OK ? merge(c, rest, yes, path, &st) : NULL;
        if (st == M_OK) json_array_append_new(alts, b1);
        if (st != M_FAIL) {
            no = merge(c, n, el ? el : json_true(), path, &st);
            json_t *b2 = st == M_OK ? merge(c, rest, no, path, &st) : NULL;
            if (st == M_OK) json_array_append_new(alts, b2);
        }
        json_decref(yes);
        json_decref(no);
        json_decref(n);
        if (st == M_FAIL) {
            json_decref(alts);
            goto fail;
        }
        json_decref(rest);
        rest = json_array_size(alts) ? json_pack("{s:o}", "anyOf", alts) : (json_decref(alts), json_false());
        st = M_OK;
    }
    if (all && !ifs && !nt) {
        json_t *acc = json_deep_copy(rest), *e;
        json_object_del(acc, "allOf");
        size_t i;
        json_array_foreach(all, i, e) {
            json_t *m = merge(c, acc, e, path, &st);
            json_decref(acc);
            acc = m;
            if (st != M_OK) break;
        }
        json_decref(rest);
        rest = acc;
        if (st == M_FAIL) goto fail;
    }
    if (st == M_EMPTY || !rest) {
        rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "no value satisfies all of the schemas");
        goto fail;
    }
    out = rest;
    return out;
fail:
    json_decref(rest);
    if (!c->st) rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "the schemas cannot be combined");
    return NULL;
}
