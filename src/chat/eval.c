/* eval.c - walk the syntax tree: scopes, expressions, statements, macros.
 *
 * Scoping as Jinja's: a for-loop body gets a fresh scope per iteration (its
 * `set`s vanish after the loop; templates use namespace() to carry values
 * out), `if` bodies share the enclosing scope, and a macro call runs in a
 * scope whose parent is the scope the macro was defined in (the top level,
 * or a loop body whose names it then sees, as Jinja's closures). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_int.h"

typedef struct scope {
    struct scope *parent;
    vdict vars;
} scope;

static rw_status exec_body(render *r, const node *body, sbuf *out);
rw_status rw_chat__eval(render *r, const node *n, value *out);

static scope *push_scope(render *r, scope *parent) {
    scope *s = rw_chat__r_alloc(r, sizeof *s);
    if (s) s->parent = parent;
    return s;
}

static rw_status set_var(render *r, scope *s, const char *name, value v) {
    return rw_chat__v_dict_set(r, &s->vars, rw_chat__v_str_ref(name, strlen(name)), v);
}

static bool lookup(render *r, const char *name, value *out) {
    size_t n = strlen(name);
    for (scope *s = r->scope; s; s = s->parent) {
        value *v = rw_chat__v_dict_get(&s->vars, name, n);
        if (v) {
            *out = *v;
            return true;
        }
    }
    return rw_chat__global(name, out);
}

static rw_status step(render *r, const node *n) {
    r->line = n->line;
    if (++r->steps > CHAT_MAX_STEPS) return rw_chat__r_fail(r, n->line, "template exceeded %d evaluation steps", CHAT_MAX_STEPS);
    return RW_OK;
}

/* ---- UTF-8 helpers for string indexing and slicing ---- */

static size_t utf8_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

/* Byte offset of code point index cp (cp <= count). */
static size_t utf8_offset(const char *s, size_t n, size_t cp) {
    size_t k = 0, i = 0;
    for (; i < n; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (k == cp) return i;
            k++;
        }
    }
    return n;
}

/* ---- attribute, index, slice ---- */

static rw_status get_attr(render *r, const node *n, value obj, const char *name, value *out) {
    *out = rw_chat__v_undef();
    if (obj.t == V_DICT || obj.t == V_NS) {
        value *v = rw_chat__v_dict_get(obj.dict, name, strlen(name));
        if (obj.t == V_DICT && rw_chat__method(r, obj, name, out)) return r->err->code;
        if (v) *out = *v;
        return RW_OK;
    }
    if (obj.t == V_STR || obj.t == V_LIST) rw_chat__method(r, obj, name, out);
    return r->err->code;
}

static rw_status get_index(render *r, const node *n, value obj, value key, value *out) {
    *out = rw_chat__v_undef();
    if (obj.t == V_DICT || obj.t == V_NS) {
        value *v = rw_chat__v_dict_get_v(obj.dict, &key);
        if (v) *out = *v;
        else if (key.t == V_STR && obj.t == V_DICT) return get_attr(r, n, obj, key.str.s, out);
        return RW_OK;
    }
    if (key.t != V_INT && key.t != V_BOOL) {
        if (key.t == V_STR) return get_attr(r, n, obj, key.str.s, out);
        return RW_OK;
    }
    int64_t i = key.t == V_INT ? key.i : key.b;
    if (obj.t == V_LIST && obj.list->gen) return RW_OK; /* a generator has no items by index: Undefined */
    if (obj.t == V_LIST) {
        int64_t len = (int64_t)obj.list->n;
        if (i < 0) i += len;
        if (i >= 0 && i < len) *out = obj.list->v[i];
    } else if (obj.t == V_STR) {
        int64_t len = (int64_t)utf8_count(obj.str.s, obj.str.n);
        if (i < 0) i += len;
        if (i >= 0 && i < len) {
            size_t a = utf8_offset(obj.str.s, obj.str.n, (size_t)i), b = utf8_offset(obj.str.s, obj.str.n, (size_t)i + 1);
            *out = rw_chat__v_str_ref(obj.str.s + a, b - a);
        }
    }
    return RW_OK;
}

/* Python slice semantics: clamp, negative indices, any non-zero step. */
static rw_status get_slice(render *r, const node *n, value obj, value *bounds, value *out) {
    int64_t len;
    if (obj.t == V_LIST && obj.list->gen) return rw_chat__r_fail(r, n->line, "'generator' object is not subscriptable");
    if (obj.t == V_LIST) len = (int64_t)obj.list->n;
    else if (obj.t == V_STR) len = (int64_t)utf8_count(obj.str.s, obj.str.n);
    else return rw_chat__r_fail(r, n->line, "'%s' object cannot be sliced", rw_chat__v_type_name(obj.t)); /* Python's TypeError */
    int64_t stepv = bounds[2].t == V_INT ? bounds[2].i : 1;
    if (stepv == 0) return rw_chat__r_fail(r, n->line, "slice step cannot be zero");
    int64_t start, stop;
    for (int k = 0; k < 2; k++) {
        int64_t *dst = k ? &stop : &start;
        if (bounds[k].t != V_INT) {
            *dst = stepv > 0 ? (k ? len : 0) : (k ? -1 - len : len - 1);
        } else {
            int64_t x = bounds[k].i;
            if (x < 0) x += len;
            if (stepv > 0) x = x < 0 ? 0 : x > len ? len : x;
            else x = x < -1 ? -1 : x > len - 1 ? len - 1 : x;
            *dst = x;
        }
    }
    if (stepv < 0 && bounds[1].t != V_INT) stop = -1;
    value res = obj.t == V_LIST ? rw_chat__v_list(r) : rw_chat__v_undef();
    if (res.t == V_LIST) res.list->tuple = obj.list->tuple;
    sbuf sb = {0};
    rw_status st = RW_OK;
    for (int64_t i = start; (stepv > 0 ? i < stop : i > stop) && !st;) {
        if (obj.t == V_LIST) st = rw_chat__v_list_push(r, res.list, obj.list->v[i]);
        else {
            size_t a = utf8_offset(obj.str.s, obj.str.n, (size_t)i), b = utf8_offset(obj.str.s, obj.str.n, (size_t)i + 1);
            st = rw_chat__sb_put(r, &sb, obj.str.s + a, b - a);
        }
        if (__builtin_add_overflow(i, stepv, &i)) break; /* a huge step: past the end */
    }
    if (obj.t == V_STR) res = rw_chat__v_from_sbuf(r, &sb);
    free(sb.p);
    *out = res;
    return st ? st : r->err->code;
}

/* ---- operators ---- */

static bool is_number(const value *v) { return v->t == V_INT || v->t == V_FLOAT || v->t == V_BOOL; }
static double as_double(const value *v) { return v->t == V_FLOAT ? v->f : v->t == V_INT ? (double)v->i : (double)v->b; }
static int64_t as_int(const value *v) { return v->t == V_INT ? v->i : v->t == V_BOOL ? (int64_t)v->b : 0; }

static rw_status contains(render *r, const node *n, value needle, value hay, bool *out) {
    *out = false;
    if (hay.t == V_STR) {
        if (needle.t != V_STR) return rw_chat__r_fail(r, n->line, "'in <string>' requires string as left operand");
        if (needle.str.n == 0) *out = true;
        else if (needle.str.n <= hay.str.n)
            *out = memmem(hay.str.s, hay.str.n, needle.str.s, needle.str.n) != NULL;
    } else if (hay.t == V_LIST) {
        for (size_t i = 0; i < hay.list->n && !*out; i++) *out = rw_chat__v_equal(&needle, &hay.list->v[i]);
    } else if (hay.t == V_DICT || hay.t == V_NS) {
        *out = rw_chat__v_dict_get_v(hay.dict, &needle) != NULL;
    } else if (hay.t != V_UNDEF) {
        return rw_chat__r_fail(r, n->line, "argument of type '%s' is not iterable", rw_chat__v_type_name(hay.t));
    }
    return RW_OK;
}

static int compare_order(render *r, const node *n, value a, value b, rw_status *st) {
    if (is_number(&a) && is_number(&b)) {
        double x = as_double(&a), y = as_double(&b);
        return x < y ? -1 : x > y;
    }
    if (a.t == V_STR && b.t == V_STR) {
        size_t m = a.str.n < b.str.n ? a.str.n : b.str.n;
        int c = memcmp(a.str.s, b.str.s, m);
        return c ? (c < 0 ? -1 : 1) : (a.str.n < b.str.n ? -1 : a.str.n > b.str.n);
    }
    *st = rw_chat__r_fail(r, n->line, "'%s' not supported between instances of '%s' and '%s'", n->s, rw_chat__v_type_name(a.t),
                 rw_chat__v_type_name(b.t));
    return 0;
}

static rw_status binary(render *r, const node *n, value a, value b, value *out) {
    const char *op = n->s;
    if (!strcmp(op, "~")) {
        sbuf sb = {0};
        rw_status st = rw_chat__v_to_str(r, &sb, &a);
        if (!st) st = rw_chat__v_to_str(r, &sb, &b);
        *out = rw_chat__v_from_sbuf(r, &sb);
        free(sb.p);
        return st;
    }
    if (!strcmp(op, "==") || !strcmp(op, "!=")) {
        bool eq = rw_chat__v_equal(&a, &b);
        *out = rw_chat__v_bool(op[0] == '=' ? eq : !eq);
        return RW_OK;
    }
    if (!strcmp(op, "in") || !strcmp(op, "not in")) {
        bool c;
        rw_status st = contains(r, n, a, b, &c);
        *out = rw_chat__v_bool(op[0] == 'i' ? c : !c);
        return st;
    }
    if (!strcmp(op, "<") || !strcmp(op, ">") || !strcmp(op, "<=") || !strcmp(op, ">=")) {
        rw_status st = RW_OK;
        int c = compare_order(r, n, a, b, &st);
        bool res = op[0] == '<' ? (op[1] ? c <= 0 : c < 0) : (op[1] ? c >= 0 : c > 0);
        *out = rw_chat__v_bool(res);
        return st;
    }
    if (!strcmp(op, "+")) {
        if (a.t == V_STR && b.t == V_STR) {
            sbuf sb = {0};
            rw_status st = rw_chat__sb_put(r, &sb, a.str.s, a.str.n);
            if (!st) st = rw_chat__sb_put(r, &sb, b.str.s, b.str.n);
            *out = rw_chat__v_from_sbuf(r, &sb);
            free(sb.p);
            return st;
        }
        if (a.t == V_LIST && b.t == V_LIST) {
            if (a.list->gen || b.list->gen) return rw_chat__r_fail(r, n->line, "unsupported operand type(s) for +: generator");
            if (a.list->tuple != b.list->tuple)
                return rw_chat__r_fail(r, n->line, "can only concatenate a list to a list and a tuple to a tuple");
            *out = rw_chat__v_list(r);
            rw_status st = r->err->code;
            if (!st) out->list->tuple = a.list->tuple;
            for (size_t i = 0; i < a.list->n && !st; i++) st = rw_chat__v_list_push(r, out->list, a.list->v[i]);
            for (size_t i = 0; i < b.list->n && !st; i++) st = rw_chat__v_list_push(r, out->list, b.list->v[i]);
            return st;
        }
    }
    if (!strcmp(op, "*") && ((a.t == V_STR && b.t == V_INT) || (a.t == V_INT && b.t == V_STR))) {
        value s = a.t == V_STR ? a : b;
        int64_t k = a.t == V_INT ? a.i : b.i;
        sbuf sb = {0};
        rw_status st = RW_OK;
        for (int64_t i = 0; i < k && !st; i++) st = rw_chat__sb_put(r, &sb, s.str.s, s.str.n);
        *out = rw_chat__v_from_sbuf(r, &sb);
        free(sb.p);
        return st;
    }
    if (!is_number(&a) || !is_number(&b))
        return rw_chat__r_fail(r, n->line, "unsupported operand type(s) for %s: '%s' and '%s'", op, rw_chat__v_type_name(a.t),
                      rw_chat__v_type_name(b.t));
    bool ints = a.t != V_FLOAT && b.t != V_FLOAT;
    double x = as_double(&a), y = as_double(&b);
    int64_t i = as_int(&a), j = as_int(&b);
    /* Python's integers are unbounded; ours are 64-bit and overflow is an error */
    int64_t res = 0;
    bool ovf = false;
    switch (op[0]) {
    case '+':
        if (!ints) *out = rw_chat__v_float(x + y);
        else if (!(ovf = __builtin_add_overflow(i, j, &res))) *out = rw_chat__v_int(res);
        break;
    case '-':
        if (!ints) *out = rw_chat__v_float(x - y);
        else if (!(ovf = __builtin_sub_overflow(i, j, &res))) *out = rw_chat__v_int(res);
        break;
    case '*':
        if (op[1] == '*') { /* power */
            if (ints && j >= 0) {
                res = 1;
                for (int64_t k = 0; k < j && !ovf && res != 0 && !(res == 1 && (i == 1 || i == 0)); k++)
                    ovf = __builtin_mul_overflow(res, i, &res);
                if (i == 0 && j > 0) res = 0;
                if (i == -1) res = j % 2 ? -1 : 1;
                if (!ovf) *out = rw_chat__v_int(res);
            } else *out = rw_chat__v_float(__builtin_pow(x, y));
            break;
        }
        if (!ints) *out = rw_chat__v_float(x * y);
        else if (!(ovf = __builtin_mul_overflow(i, j, &res))) *out = rw_chat__v_int(res);
        break;
    case '/':
        if (y == 0) return rw_chat__r_fail(r, n->line, "division by zero");
        if (ints && i == INT64_MIN && j == -1) return rw_chat__r_fail(r, n->line, "integer overflow in %s", op);
        if (op[1] == '/') {
            if (ints) {
                int64_t q = i / j;
                if ((i % j != 0) && ((i < 0) != (j < 0))) q--;
                *out = rw_chat__v_int(q);
            } else *out = rw_chat__v_float(__builtin_floor(x / y));
            return RW_OK;
        }
        *out = rw_chat__v_float(x / y);
        return RW_OK;
    case '%':
        if (y == 0) return rw_chat__r_fail(r, n->line, "modulo by zero");
        if (ints && j == -1) {
            *out = rw_chat__v_int(0);
        } else if (ints) {
            int64_t m = i % j;
            if (m != 0 && ((m < 0) != (j < 0))) m += j;
            *out = rw_chat__v_int(m);
        } else {
            double m = __builtin_fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            *out = rw_chat__v_float(m);
        }
        return RW_OK;
    default: return rw_chat__r_fail(r, n->line, "unknown operator %s", op);
    }
    return ovf ? rw_chat__r_fail(r, n->line, "integer overflow in %s (numbers beyond 64 bits are not supported)", op) : RW_OK;
}

/* ---- calls ---- */

static rw_status eval_args(render *r, const node *n, value **args) {
    *args = NULL;
    if (!n->n_kids) return RW_OK;
    *args = rw_chat__r_alloc(r, n->n_kids * sizeof **args);
    if (!*args) return r->err->code;
    for (size_t i = 0; i < n->n_kids; i++) {
        rw_status st = rw_chat__eval(r, n->kids[i], &(*args)[i]);
        if (st) return st;
    }
    return RW_OK;
}

static rw_status call_macro(render *r, const node *call, const node *m, scope *env, value *args, const char **kw, size_t n_args,
                            value *out) {
    if (++r->depth > CHAT_MAX_DEPTH) return rw_chat__r_fail(r, call->line, "macro calls nested too deeply");
    scope *s = push_scope(r, env ? env : r->root);
    if (!s) return r->err->code;
    rw_status st = RW_OK;
    size_t pos = 0;
    for (size_t i = 0; i < m->n_names && !st; i++) {
        value v = rw_chat__v_undef();
        bool found = false;
        for (size_t k = 0; k < n_args; k++)
            if (kw && kw[k] && !strcmp(kw[k], m->names[i])) {
                v = args[k];
                found = true;
            }
        if (!found) {
            while (pos < n_args && kw && kw[pos]) pos++;
            if (pos < n_args) {
                v = args[pos++];
                found = true;
            }
        }
        if (!found && m->kids[i]) {
            scope *saved = r->scope;
            r->scope = s;
            st = rw_chat__eval(r, m->kids[i], &v);
            r->scope = saved;
        }
        if (!st) st = set_var(r, s, m->names[i], v);
    }
    scope *saved = r->scope;
    r->scope = s;
    sbuf sb = {0};
    if (!st) st = exec_body(r, m->b, &sb);
    r->scope = saved;
    *out = rw_chat__v_from_sbuf(r, &sb);
    free(sb.p);
    r->depth--;
    return st ? st : r->err->code;
}

/* Jinja's default Undefined fails on attribute and item access: `x.y` with
 * x undefined (a missing variable, key or index) is an error, not another
 * Undefined. The message names what was undefined where it can. */
static rw_status undefined_access(render *r, const node *n) {
    const node *obj = n->a;
    if (obj->kind == N_NAME) return rw_chat__r_fail(r, n->line, "'%s' is undefined", obj->s);
    if (obj->kind == N_ATTR) return rw_chat__r_fail(r, n->line, "'%s' is undefined (no such attribute or key)", obj->s);
    return rw_chat__r_fail(r, n->line, "attribute or item of an undefined value");
}

/* ---- expressions ---- */

rw_status rw_chat__eval(render *r, const node *n, value *out) {
    rw_status st = step(r, n);
    if (st) return st;
    if (++r->depth > CHAT_MAX_DEPTH) return rw_chat__r_fail(r, n->line, "expression nested too deeply");
    *out = rw_chat__v_undef();
    value a, b;
    switch (n->kind) {
    case N_LIT: *out = *n->lit; break;
    case N_NAME: lookup(r, n->s, out); break;
    case N_LIST:
        *out = rw_chat__v_list(r);
        if (out->t == V_LIST) out->list->tuple = n->neg;
        for (size_t i = 0; i < n->n_kids && !st && out->t == V_LIST; i++) {
            st = rw_chat__eval(r, n->kids[i], &a);
            if (!st) st = rw_chat__v_list_push(r, out->list, a);
        }
        break;
    case N_DICT:
        *out = rw_chat__v_dict(r);
        for (size_t i = 0; i + 1 < n->n_kids && !st && out->t == V_DICT; i += 2) {
            st = rw_chat__eval(r, n->kids[i], &a);
            if (!st) st = rw_chat__eval(r, n->kids[i + 1], &b);
            if (!st) st = rw_chat__v_dict_set(r, out->dict, a, b);
        }
        break;
    case N_ATTR:
        st = rw_chat__eval(r, n->a, &a);
        if (!st && a.t == V_UNDEF) st = undefined_access(r, n);
        if (!st) st = get_attr(r, n, a, n->s, out);
        break;
    case N_INDEX:
        st = rw_chat__eval(r, n->a, &a);
        if (!st && a.t == V_UNDEF) st = undefined_access(r, n);
        if (!st) st = rw_chat__eval(r, n->b, &b);
        if (!st) st = get_index(r, n, a, b, out);
        break;
    case N_SLICE: {
        value bounds[3] = {rw_chat__v_undef(), rw_chat__v_undef(), rw_chat__v_undef()};
        st = rw_chat__eval(r, n->a, &a);
        if (!st && a.t == V_UNDEF) st = undefined_access(r, n);
        const node *parts[3] = {n->b, n->c, n->d};
        for (int k = 0; k < 3 && !st; k++)
            if (parts[k]) st = rw_chat__eval(r, parts[k], &bounds[k]);
        if (!st) st = get_slice(r, n, a, bounds, out);
        break;
    }
    case N_CALL: {
        value *args;
        st = rw_chat__eval(r, n->a, &a);
        if (!st) st = eval_args(r, n, &args);
        if (st) break;
        if (a.t == V_MACRO) st = call_macro(r, n, a.macro.node, a.macro.env, args, n->names, n->n_kids, out);
        else if (a.t == V_FUNC) st = rw_chat__call_func(r, n, a, args, n->names, n->n_kids, out);
        else if (a.t == V_UNDEF && n->a->kind == N_ATTR) st = rw_chat__r_fail(r, n->line, "no method or attribute '%s' to call", n->a->s);
        else if (a.t == V_UNDEF) st = rw_chat__r_fail(r, n->line, "'%s' is undefined", n->a->kind == N_NAME ? n->a->s : "callee");
        else st = rw_chat__r_fail(r, n->line, "'%s' object is not callable", rw_chat__v_type_name(a.t));
        break;
    }
    case N_FILTER: {
        value *args;
        st = rw_chat__eval(r, n->a, &a);
        if (!st) st = eval_args(r, n, &args);
        if (!st) st = rw_chat__filter(r, n, a, args, n->names, n->n_kids, out);
        break;
    }
    case N_TEST: {
        value *args;
        bool res = false;
        st = rw_chat__eval(r, n->a, &a);
        if (!st) st = eval_args(r, n, &args);
        if (!st) st = rw_chat__test(r, n, a, args, n->n_kids, &res);
        *out = rw_chat__v_bool(n->neg ? !res : res);
        break;
    }
    case N_UNARY:
        st = rw_chat__eval(r, n->a, &a);
        if (st) break;
        if (!is_number(&a)) {
            st = rw_chat__r_fail(r, n->line, "bad operand type for unary %s: '%s'", n->s, rw_chat__v_type_name(a.t));
            break;
        }
        if (n->s[0] == '-' && a.t != V_FLOAT && as_int(&a) == INT64_MIN) st = rw_chat__r_fail(r, n->line, "integer overflow in unary -");
        else if (n->s[0] == '-') *out = a.t == V_FLOAT ? rw_chat__v_float(-a.f) : rw_chat__v_int(-as_int(&a));
        else *out = a.t == V_BOOL ? rw_chat__v_int(a.b) : a;
        break;
    case N_BINARY:
        st = rw_chat__eval(r, n->a, &a);
        if (!st) st = rw_chat__eval(r, n->b, &b);
        if (!st) st = binary(r, n, a, b, out);
        break;
    case N_COMPARE: { /* a < b < c: each operand evaluated once, stops at the first false */
        st = rw_chat__eval(r, n->kids[0], &a);
        for (size_t i = 0; i < n->n_names && !st; i++) {
            st = rw_chat__eval(r, n->kids[i + 1], &b);
            node op = *n;
            op.s = n->names[i];
            if (!st) st = binary(r, &op, a, b, out);
            if (st || !rw_chat__v_truthy(out)) break;
            a = b;
        }
        break;
    }
    case N_AND: /* returns an operand, as Python */
        st = rw_chat__eval(r, n->a, &a);
        if (!st) {
            if (!rw_chat__v_truthy(&a)) *out = a;
            else st = rw_chat__eval(r, n->b, out);
        }
        break;
    case N_OR:
        st = rw_chat__eval(r, n->a, &a);
        if (!st) {
            if (rw_chat__v_truthy(&a)) *out = a;
            else st = rw_chat__eval(r, n->b, out);
        }
        break;
    case N_NOT:
        st = rw_chat__eval(r, n->a, &a);
        *out = rw_chat__v_bool(!rw_chat__v_truthy(&a));
        break;
    case N_COND:
        st = rw_chat__eval(r, n->a, &a);
        if (!st) {
            if (rw_chat__v_truthy(&a)) st = rw_chat__eval(r, n->b, out);
            else if (n->c) st = rw_chat__eval(r, n->c, out);
        }
        break;
    default: st = rw_chat__r_fail(r, n->line, "not an expression");
    }
    r->depth--;
    return st ? st : r->err->code;
}

/* ---- statements ---- */

static rw_status exec(render *r, const node *n, sbuf *out);

static rw_status exec_body(render *r, const node *body, sbuf *out) {
    for (size_t i = 0; i < body->n_kids; i++) {
        rw_status st = exec(r, body->kids[i], out);
        if (st) return st;
        if (r->loop_ctl) break;
    }
    return RW_OK;
}

/* The items a for loop walks: list items, dict keys, string characters. */
static rw_status iter_items(render *r, const node *n, value seq, vlist **items) {
    static vlist empty;
    *items = &empty;
    if (seq.t == V_LIST) *items = seq.list;
    else if (seq.t == V_DICT || seq.t == V_NS) {
        value l = rw_chat__v_list(r);
        if (l.t != V_LIST) return r->err->code;
        for (size_t i = 0; i < seq.dict->n; i++) rw_chat__v_list_push(r, l.list, seq.dict->keys[i]);
        *items = l.list;
    } else if (seq.t == V_STR) {
        value l = rw_chat__v_list(r);
        if (l.t != V_LIST) return r->err->code;
        for (size_t i = 0; i < seq.str.n;) {
            size_t j = i + 1;
            while (j < seq.str.n && ((unsigned char)seq.str.s[j] & 0xc0) == 0x80) j++;
            rw_chat__v_list_push(r, l.list, rw_chat__v_str_ref(seq.str.s + i, j - i));
            i = j;
        }
        *items = l.list;
    } else if (seq.t != V_UNDEF) {
        return rw_chat__r_fail(r, n->line, "'%s' object is not iterable", rw_chat__v_type_name(seq.t));
    }
    return r->err->code;
}

static rw_status bind_targets(render *r, const node *n, scope *s, value item) {
    if (n->n_names == 1) return set_var(r, s, n->names[0], item);
    if (item.t != V_LIST || item.list->n != n->n_names)
        return rw_chat__r_fail(r, n->line, "cannot unpack %s into %zu names", rw_chat__v_type_name(item.t), n->n_names);
    for (size_t k = 0; k < n->n_names; k++) {
        rw_status st = set_var(r, s, n->names[k], item.list->v[k]);
        if (st) return st;
    }
    return RW_OK;
}

static rw_status exec_for(render *r, const node *n, sbuf *out) {
    value seq;
    vlist *all;
    rw_status st = rw_chat__eval(r, n->a, &seq);
    if (!st) st = iter_items(r, n, seq, &all);
    if (st) return st;
    vlist *items = all;
    if (n->d) { /* loop filter: the loop sees only the items that pass */
        value l = rw_chat__v_list(r);
        if (l.t != V_LIST) return r->err->code;
        for (size_t i = 0; i < all->n && !st; i++) {
            scope *s = push_scope(r, r->scope);
            if (!s) return r->err->code;
            st = bind_targets(r, n, s, all->v[i]);
            scope *saved = r->scope;
            r->scope = s;
            value c;
            if (!st) st = rw_chat__eval(r, n->d, &c);
            r->scope = saved;
            if (!st && rw_chat__v_truthy(&c)) st = rw_chat__v_list_push(r, l.list, all->v[i]);
        }
        if (st) return st;
        items = l.list;
    }
    if (items->n == 0) return n->c ? exec_body(r, n->c, out) : RW_OK;
    int64_t len = (int64_t)items->n;
    static const char *const keys[] = {"index", "index0",   "revindex", "revindex0", "first", "last",
                                       "length", "previtem", "nextitem", "depth",     "depth0", "cycle"};
    enum { N_LOOP_KEYS = sizeof keys / sizeof keys[0] };
    /* One scope and one loop object serve every iteration: the scope is
     * emptied at the start of each, so a `set` in the body still lasts one
     * iteration, and a long loop does not allocate per step. */
    scope *s = push_scope(r, r->scope);
    value loop = rw_chat__v_dict(r);
    value *index0 = rw_chat__r_alloc(r, sizeof *index0); /* what loop.cycle(...) reads */
    if (!s || loop.t != V_DICT || !index0) return r->err->code;
    value cycle = {.t = V_FUNC};
    cycle.fn.id = RW_CHAT_FN_CYCLE;
    cycle.fn.self = index0;
    for (int64_t i = 0; i < len && !st; i++) {
        s->vars.n = 0;
        *index0 = rw_chat__v_int(i);
        value vals[N_LOOP_KEYS] = {rw_chat__v_int(i + 1), rw_chat__v_int(i), rw_chat__v_int(len - i), rw_chat__v_int(len - i - 1), rw_chat__v_bool(i == 0),
                                   rw_chat__v_bool(i == len - 1), rw_chat__v_int(len), i > 0 ? items->v[i - 1] : rw_chat__v_undef(),
                                   i + 1 < len ? items->v[i + 1] : rw_chat__v_undef(), rw_chat__v_int(1), rw_chat__v_int(0), cycle};
        if (i == 0)
            for (int k = 0; k < N_LOOP_KEYS && !st; k++)
                st = rw_chat__v_dict_set(r, loop.dict, rw_chat__v_str_ref(keys[k], strlen(keys[k])), vals[k]);
        else
            memcpy(loop.dict->vals, vals, sizeof vals); /* same keys, same order */
        loop.dict->n = N_LOOP_KEYS;
        if (!st) st = step(r, n);
        if (!st) st = set_var(r, s, "loop", loop);
        if (!st) st = bind_targets(r, n, s, items->v[i]);
        if (st) return st;
        scope *saved = r->scope;
        r->scope = s;
        st = exec_body(r, n->b, out);
        r->scope = saved;
        int ctl = r->loop_ctl;
        r->loop_ctl = 0;
        if (ctl == 1) break;
    }
    return st;
}

static rw_status exec_stmt(render *r, const node *n, sbuf *out);

/* Every statement level counts toward the depth limit with expressions and
 * macro calls, so the C stack stays bounded whatever nests in what. */
static rw_status exec(render *r, const node *n, sbuf *out) {
    if (++r->depth > CHAT_MAX_DEPTH) return rw_chat__r_fail(r, n->line, "template nested too deeply");
    rw_status st = exec_stmt(r, n, out);
    r->depth--;
    return st;
}

static rw_status exec_stmt(render *r, const node *n, sbuf *out) {
    rw_status st = step(r, n);
    if (st) return st;
    value v;
    switch (n->kind) {
    case N_TEXT: return rw_chat__sb_put(r, out, n->s, n->n);
    case N_OUTPUT:
        st = rw_chat__eval(r, n->a, &v);
        return st ? st : rw_chat__v_to_str(r, out, &v);
    case N_IF: /* an elif chain is walked in a loop, however long */
        for (;;) {
            st = rw_chat__eval(r, n->a, &v);
            if (st) return st;
            if (rw_chat__v_truthy(&v)) return exec_body(r, n->b, out);
            if (!n->c) return RW_OK;
            if (n->c->kind != N_IF) return exec_body(r, n->c, out);
            n = n->c;
            if ((st = step(r, n))) return st;
        }
    case N_FOR: return exec_for(r, n, out);
    case N_SET:
        st = rw_chat__eval(r, n->a, &v);
        if (st) return st;
        if (n->attr) {
            value ns;
            if (!lookup(r, n->names[0], &ns) || ns.t != V_NS)
                return rw_chat__r_fail(r, n->line, "cannot assign attribute on non-namespace object '%s'", n->names[0]);
            return rw_chat__v_dict_set(r, ns.dict, rw_chat__v_str_ref(n->attr, strlen(n->attr)), v);
        }
        return bind_targets(r, n, r->scope, v);
    case N_SET_BLOCK: {
        sbuf sb = {0};
        st = exec_body(r, n->b, &sb);
        v = rw_chat__v_from_sbuf(r, &sb);
        free(sb.p);
        return st ? st : set_var(r, r->scope, n->names[0], v);
    }
    case N_MACRO:
        v.t = V_MACRO;
        v.macro.node = n;
        v.macro.env = r->scope;
        return set_var(r, r->scope, n->s, v);
    case N_BREAK: r->loop_ctl = 1; return RW_OK;
    case N_CONTINUE: r->loop_ctl = 2; return RW_OK;
    case N_BODY: return exec_body(r, n, out);
    default: return rw_chat__r_fail(r, n->line, "not a statement");
    }
}

rw_status rw_chat__exec_root(render *r, const node *root, scope *globals, sbuf *out);
rw_status rw_chat__exec_root(render *r, const node *root, scope *globals, sbuf *out) {
    r->root = globals;
    r->scope = globals;
    rw_status st = exec_body(r, root, out);
    return st ? st : r->err->code;
}

scope *rw_chat__new_scope(render *r);
scope *rw_chat__new_scope(render *r) { return push_scope(r, NULL); }

rw_status rw_chat__set_global(render *r, scope *s, const char *name, value v);
rw_status rw_chat__set_global(render *r, scope *s, const char *name, value v) { return set_var(r, s, name, v); }
