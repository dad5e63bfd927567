/* parser.c - tokens to a syntax tree (recursive descent, Jinja2 3.1's grammar
 * and precedence: if-else < or < and < not < comparisons and in (chained as
 * in Python) < + - < ~ < * / // % < ** < unary minus < filters and tests <
 * postfix (. [] ()). Unary minus takes a primary with its postfix only, so
 * -x|abs is (-x)|abs, as in Jinja. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "chat/chat_int.h"

#define MAX_NESTING 200

typedef struct {
    const token_list *tl;
    size_t i;
    rw_arena *a;
    rw_error *err;
    int depth;
    rw_status status;
} parser;

static const token *peek(parser *p) { return &p->tl->v[p->i]; }
static const token *peek_at(parser *p, size_t k) {
    size_t j = p->i + k;
    return &p->tl->v[j < p->tl->n ? j : p->tl->n - 1];
}
static const token *next(parser *p) {
    const token *t = &p->tl->v[p->i];
    if (t->kind != TK_EOF) p->i++;
    return t;
}

static bool tok_is(const token *t, tk_kind k, const char *s) {
    return t->kind == k && (!s || (t->n == strlen(s) && !memcmp(t->s, s, t->n)));
}
static bool is_op(parser *p, const char *s) { return tok_is(peek(p), TK_OP, s); }
static bool is_name(parser *p, const char *s) { return tok_is(peek(p), TK_NAME, s); }

static node *fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static node *fail(parser *p, const char *fmt, ...) {
    if (p->status) return NULL;
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->status = rw_errorf(p->err, RW_ERR_TEMPLATE, "template line %d: %s", peek(p)->line, msg);
    return NULL;
}

static node *mk(parser *p, node_kind k) {
    node *n = rw_arena_alloc(p->a, sizeof *n);
    if (!n) {
        if (!p->status) p->status = rw_errorf(p->err, RW_ERR_NOMEM, "template: out of memory");
        return NULL;
    }
    n->kind = k;
    n->line = peek(p)->line;
    return n;
}

static const char *dup_tok(parser *p, const token *t) {
    char *s = rw_arena_strndup(p->a, t->s, t->n);
    if (!s && !p->status) p->status = rw_errorf(p->err, RW_ERR_NOMEM, "template: out of memory");
    return s;
}

/* Growable child arrays built in a temporary, then copied into the arena. */
typedef struct {
    node *kids[256];
    const char *names[256];
    size_t n;
} kid_buf;

static bool kb_add(parser *p, kid_buf *kb, node *k, const char *name) {
    if (kb->n == 256) {
        fail(p, "too many items");
        return false;
    }
    kb->kids[kb->n] = k;
    kb->names[kb->n] = name;
    kb->n++;
    return true;
}

static void kb_store(parser *p, kid_buf *kb, node *n, bool with_names) {
    n->n_kids = kb->n;
    n->kids = rw_arena_calloc(p->a, kb->n ? kb->n : 1, sizeof *n->kids);
    if (n->kids) memcpy(n->kids, kb->kids, kb->n * sizeof *n->kids);
    if (with_names) {
        n->names = rw_arena_calloc(p->a, kb->n ? kb->n : 1, sizeof *n->names);
        n->n_names = kb->n;
        if (n->names) memcpy(n->names, kb->names, kb->n * sizeof *n->names);
    }
}

static bool expect_op(parser *p, const char *s) {
    if (is_op(p, s)) {
        next(p);
        return true;
    }
    fail(p, "expected '%s'", s);
    return false;
}

static node *parse_expr(parser *p);
static node *parse_or(parser *p);

/* ---- expressions ---- */

static node *lit(parser *p, value v) {
    node *n = mk(p, N_LIT);
    if (!n) return NULL;
    n->lit = rw_arena_alloc(p->a, sizeof *n->lit);
    if (!n->lit) return fail(p, "out of memory");
    *n->lit = v;
    return n;
}

/* Call arguments after '(' up to ')': positional and name=value. */
static bool parse_args(parser *p, node *n) {
    kid_buf *kb = rw_arena_alloc(p->a, sizeof *kb);
    if (!kb) return fail(p, "out of memory"), false;
    while (!is_op(p, ")")) {
        const char *name = NULL;
        if (peek(p)->kind == TK_NAME && tok_is(peek_at(p, 1), TK_OP, "=")) {
            name = dup_tok(p, next(p));
            next(p);
        }
        node *e = parse_expr(p);
        if (!e || !kb_add(p, kb, e, name)) return false;
        if (!is_op(p, ",")) break;
        next(p);
    }
    if (!expect_op(p, ")")) return false;
    kb_store(p, kb, n, true);
    return true;
}

static node *parse_primary(parser *p) {
    const token *t = peek(p);
    if (t->kind == TK_STRING) {
        /* adjacent literals concatenate, as in Python */
        size_t total = 0, j = p->i;
        while (p->tl->v[j].kind == TK_STRING) total += p->tl->v[j++].n;
        char *s = rw_arena_alloc(p->a, total + 1);
        if (!s) return fail(p, "out of memory");
        size_t o = 0;
        while (peek(p)->kind == TK_STRING) {
            const token *u = next(p);
            memcpy(s + o, u->s, u->n);
            o += u->n;
        }
        return lit(p, rw_chat__v_str_ref(s, total));
    }
    if (t->kind == TK_INT) return next(p), lit(p, rw_chat__v_int(t->i));
    if (t->kind == TK_FLOAT) return next(p), lit(p, rw_chat__v_float(t->f));
    if (t->kind == TK_NAME) {
        next(p);
        if (tok_is(t, TK_NAME, "true") || tok_is(t, TK_NAME, "True")) return lit(p, rw_chat__v_bool(true));
        if (tok_is(t, TK_NAME, "false") || tok_is(t, TK_NAME, "False")) return lit(p, rw_chat__v_bool(false));
        if (tok_is(t, TK_NAME, "none") || tok_is(t, TK_NAME, "None")) return lit(p, rw_chat__v_none());
        node *n = mk(p, N_NAME);
        if (n) n->s = dup_tok(p, t);
        return n;
    }
    if (tok_is(t, TK_OP, "(")) {
        next(p);
        if (is_op(p, ")")) { /* () is the empty tuple */
            next(p);
            node *l = mk(p, N_LIST);
            if (!l) return NULL;
            l->neg = true;
            l->kids = rw_arena_calloc(p->a, 1, sizeof *l->kids);
            return l->kids ? l : fail(p, "out of memory");
        }
        node *e = parse_expr(p);
        if (!e) return NULL;
        if (is_op(p, ",")) { /* a tuple: a list that prints with parentheses */
            node *l = mk(p, N_LIST);
            if (l) l->neg = true;
            kid_buf *kb = rw_arena_alloc(p->a, sizeof *kb);
            if (!l || !kb) return fail(p, "out of memory");
            kb_add(p, kb, e, NULL);
            while (is_op(p, ",")) {
                next(p);
                if (is_op(p, ")")) break;
                node *x = parse_expr(p);
                if (!x || !kb_add(p, kb, x, NULL)) return NULL;
            }
            kb_store(p, kb, l, false);
            e = l;
        }
        return expect_op(p, ")") ? e : NULL;
    }
    if (tok_is(t, TK_OP, "[")) {
        next(p);
        node *l = mk(p, N_LIST);
        kid_buf *kb = rw_arena_alloc(p->a, sizeof *kb);
        if (!l || !kb) return fail(p, "out of memory");
        while (!is_op(p, "]")) {
            node *x = parse_expr(p);
            if (!x || !kb_add(p, kb, x, NULL)) return NULL;
            if (!is_op(p, ",")) break;
            next(p);
        }
        if (!expect_op(p, "]")) return NULL;
        kb_store(p, kb, l, false);
        return l;
    }
    if (tok_is(t, TK_OP, "{")) {
        next(p);
        node *d = mk(p, N_DICT);
        kid_buf *kb = rw_arena_alloc(p->a, sizeof *kb);
        if (!d || !kb) return fail(p, "out of memory");
        while (!is_op(p, "}")) {
            node *k = parse_expr(p);
            if (!k || !expect_op(p, ":")) return NULL;
            node *v = parse_expr(p);
            if (!v || !kb_add(p, kb, k, NULL) || !kb_add(p, kb, v, NULL)) return NULL;
            if (!is_op(p, ",")) break;
            next(p);
        }
        if (!expect_op(p, "}")) return NULL;
        kb_store(p, kb, d, false);
        return d;
    }
    return fail(p, "unexpected token in expression");
}

static node *parse_postfix(parser *p, node *e) {
    while (e) {
        if (is_op(p, ".")) {
            next(p);
            if (peek(p)->kind != TK_NAME && peek(p)->kind != TK_INT) return fail(p, "expected attribute name");
            node *n = mk(p, N_ATTR);
            if (!n) return NULL;
            n->a = e;
            if (peek(p)->kind == TK_INT) { /* x.0 is x[0] */
                n->kind = N_INDEX;
                n->b = lit(p, rw_chat__v_int(next(p)->i));
            } else n->s = dup_tok(p, next(p));
            e = n;
        } else if (is_op(p, "[")) {
            next(p);
            node *idx[3] = {NULL, NULL, NULL};
            int part = 0;
            bool slice = false;
            while (!is_op(p, "]")) {
                if (is_op(p, ":")) {
                    slice = true;
                    if (++part > 2) return fail(p, "bad slice");
                    next(p);
                    continue;
                }
                idx[part] = parse_expr(p);
                if (!idx[part]) return NULL;
                if (!is_op(p, ":") && !is_op(p, "]")) return fail(p, "expected ']'");
            }
            next(p);
            node *n = mk(p, slice ? N_SLICE : N_INDEX);
            if (!n) return NULL;
            n->a = e;
            n->b = idx[0];
            n->c = idx[1];
            n->d = idx[2];
            if (!slice && !idx[0]) return fail(p, "empty subscript");
            e = n;
        } else if (is_op(p, "(")) {
            next(p);
            node *n = mk(p, N_CALL);
            if (!n) return NULL;
            n->a = e;
            if (!parse_args(p, n)) return NULL;
            e = n;
        } else break;
    }
    return e;
}

/* Filters ('|' name [args]) and tests ('is' [not] name [args]). */
static node *parse_filters(parser *p, node *e) {
    while (e) {
        if (is_op(p, "|")) {
            next(p);
            if (peek(p)->kind != TK_NAME) return fail(p, "expected filter name");
            node *n = mk(p, N_FILTER);
            if (!n) return NULL;
            n->s = dup_tok(p, next(p));
            if (n->s) n->builtin = rw_chat__filter_id(n->s);
            n->a = e;
            if (is_op(p, "(")) {
                next(p);
                if (!parse_args(p, n)) return NULL;
            }
            e = n;
        } else if (is_name(p, "is")) {
            next(p);
            node *n = mk(p, N_TEST);
            if (!n) return NULL;
            if (is_name(p, "not")) {
                next(p);
                n->neg = true;
            }
            if (peek(p)->kind != TK_NAME) return fail(p, "expected test name");
            n->s = dup_tok(p, next(p));
            n->a = e;
            const token *t = peek(p);
            if (tok_is(t, TK_OP, "(")) {
                next(p);
                if (!parse_args(p, n)) return NULL;
            } else if (t->kind == TK_STRING || t->kind == TK_INT || t->kind == TK_FLOAT || tok_is(t, TK_OP, "[") ||
                       tok_is(t, TK_OP, "{") ||
                       (t->kind == TK_NAME && !tok_is(t, TK_NAME, "and") && !tok_is(t, TK_NAME, "or") &&
                        !tok_is(t, TK_NAME, "else"))) {
                /* one argument without parentheses (`is divisibleby 3`, `is in [..]`), as Jinja reads it */
                if (tok_is(t, TK_NAME, "is")) return fail(p, "cannot chain multiple tests with 'is'");
                node *arg = parse_postfix(p, parse_primary(p));
                if (!arg) return NULL;
                kid_buf *kb = rw_arena_alloc(p->a, sizeof *kb);
                if (!kb) return fail(p, "out of memory");
                kb_add(p, kb, arg, NULL);
                kb_store(p, kb, n, true);
            }
            e = n;
        } else if (is_op(p, "(")) { /* a call on a filter's or test's result */
            next(p);
            node *n = mk(p, N_CALL);
            if (!n) return NULL;
            n->a = e;
            if (!parse_args(p, n)) return NULL;
            e = n;
        } else break;
    }
    return e;
}

static node *parse_unary(parser *p, bool with_filters) {
    if (++p->depth > MAX_NESTING) return fail(p, "expression nested too deeply");
    node *r;
    if (is_op(p, "-") || is_op(p, "+")) {
        const char *op = next(p)->s;
        node *n = mk(p, N_UNARY);
        if (!n) return NULL;
        n->s = op;
        n->a = parse_unary(p, false);
        r = n->a ? n : NULL;
    } else {
        r = parse_primary(p);
    }
    r = parse_postfix(p, r);
    if (with_filters) r = parse_filters(p, r);
    p->depth--;
    return r;
}

static node *binary(parser *p, const char *op, node *a, node *b) {
    if (!a || !b) return NULL;
    node *n = mk(p, N_BINARY);
    if (!n) return NULL;
    n->s = op;
    n->a = a;
    n->b = b;
    return n;
}

static node *parse_pow(parser *p) {
    node *e = parse_unary(p, true);
    while (e && is_op(p, "**")) {
        next(p);
        e = binary(p, "**", e, parse_unary(p, true));
    }
    return e;
}

static node *parse_mul(parser *p) {
    node *e = parse_pow(p);
    while (e && (is_op(p, "*") || is_op(p, "/") || is_op(p, "//") || is_op(p, "%"))) {
        const char *op = next(p)->s;
        e = binary(p, op, e, parse_pow(p));
    }
    return e;
}

static node *parse_concat(parser *p) {
    node *e = parse_mul(p);
    while (e && is_op(p, "~")) {
        next(p);
        e = binary(p, "~", e, parse_mul(p));
    }
    return e;
}

static node *parse_add(parser *p) {
    node *e = parse_concat(p);
    while (e && (is_op(p, "+") || is_op(p, "-"))) {
        const char *op = next(p)->s;
        e = binary(p, op, e, parse_concat(p));
    }
    return e;
}

/* a < b <= c is (a < b) and (b <= c) with b evaluated once: one comparison
 * is an N_BINARY, a chain an N_COMPARE (kids = operands, names = operators). */
static node *parse_compare(parser *p) {
    node *e = parse_add(p);
    if (!e) return NULL;
    node *operands[64];
    const char *ops[63];
    size_t n = 0;
    operands[0] = e;
    for (;;) {
        const char *op = NULL;
        if (is_op(p, "==") || is_op(p, "!=") || is_op(p, "<") || is_op(p, ">") || is_op(p, "<=") || is_op(p, ">="))
            op = next(p)->s;
        else if (is_name(p, "in")) {
            next(p);
            op = "in";
        } else if (is_name(p, "not") && tok_is(peek_at(p, 1), TK_NAME, "in")) {
            next(p);
            next(p);
            op = "not in";
        } else break;
        if (n == 63) return fail(p, "comparison chain too long");
        ops[n] = op;
        operands[++n] = parse_add(p);
        if (!operands[n]) return NULL;
    }
    if (n == 0) return e;
    if (n == 1) return binary(p, ops[0], operands[0], operands[1]);
    node *c = mk(p, N_COMPARE);
    if (!c) return NULL;
    c->kids = rw_arena_calloc(p->a, n + 1, sizeof *c->kids);
    c->names = rw_arena_calloc(p->a, n, sizeof *c->names);
    if (!c->kids || !c->names) return fail(p, "out of memory");
    memcpy(c->kids, operands, (n + 1) * sizeof *operands);
    memcpy(c->names, ops, n * sizeof *ops);
    c->n_kids = n + 1;
    c->n_names = n;
    return c;
}

static node *parse_not(parser *p) {
    if (is_name(p, "not")) {
        next(p);
        if (++p->depth > MAX_NESTING) return fail(p, "expression nested too deeply");
        node *n = mk(p, N_NOT);
        if (!n) return NULL;
        n->a = parse_not(p);
        p->depth--;
        return n->a ? n : NULL;
    }
    return parse_compare(p);
}

static node *parse_and(parser *p) {
    node *e = parse_not(p);
    while (e && is_name(p, "and")) {
        next(p);
        node *n = mk(p, N_AND);
        if (!n) return NULL;
        n->a = e;
        n->b = parse_not(p);
        e = n->b ? n : NULL;
    }
    return e;
}

static node *parse_or(parser *p) {
    node *e = parse_and(p);
    while (e && is_name(p, "or")) {
        next(p);
        node *n = mk(p, N_OR);
        if (!n) return NULL;
        n->a = e;
        n->b = parse_and(p);
        e = n->b ? n : NULL;
    }
    return e;
}

static node *parse_expr(parser *p) {
    if (++p->depth > MAX_NESTING) return fail(p, "expression nested too deeply");
    node *e = parse_or(p);
    while (e && is_name(p, "if")) { /* inline if: e if cond [else other] */
        next(p);
        node *n = mk(p, N_COND);
        if (!n) return NULL;
        n->b = e;
        n->a = parse_or(p);
        if (!n->a) return NULL;
        if (is_name(p, "else")) {
            next(p);
            n->c = parse_expr(p);
            if (!n->c) return NULL;
        }
        e = n;
    }
    p->depth--;
    return e;
}

/* ---- statements ---- */

static bool end_block(parser *p) {
    if (peek(p)->kind == TK_BLOCK_END) {
        next(p);
        return true;
    }
    fail(p, "expected end of tag");
    return false;
}

/* Parses statements until a block tag whose keyword is one of stops (NULL
 * terminated); leaves the parser on that keyword. */
static node *parse_body(parser *p, const char *const *stops, const char **stopped);

/* if / elif... / else / endif: the elif chain is built in a loop (a long
 * chain must not recurse). Each elif is an N_IF in the previous one's c. */
static node *parse_if(parser *p) {
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    static const char *const end[] = {"endif", NULL};
    node *head = NULL, **link = &head;
    for (;;) {
        node *n = mk(p, N_IF);
        if (!n) return NULL;
        n->a = parse_or(p); /* no inline if-else in a condition, as Jinja */
        if (!n->a || !end_block(p)) return NULL;
        const char *stop;
        n->b = parse_body(p, stops, &stop);
        if (!n->b) return NULL;
        *link = n;
        link = &n->c;
        if (!strcmp(stop, "elif")) continue;
        if (!strcmp(stop, "else")) {
            if (!end_block(p)) return NULL;
            *link = parse_body(p, end, &stop);
            if (!*link) return NULL;
        }
        return end_block(p) ? head : NULL;
    }
}

static bool parse_targets(parser *p, node *n) {
    const char *names[16];
    size_t k = 0;
    do {
        if (k && !is_op(p, ",")) break;
        if (k) next(p);
        if (peek(p)->kind != TK_NAME || k == 16) return fail(p, "expected a variable name"), false;
        names[k++] = dup_tok(p, next(p));
    } while (is_op(p, ","));
    n->names = rw_arena_calloc(p->a, k, sizeof *n->names);
    if (!n->names) return fail(p, "out of memory"), false;
    memcpy(n->names, names, k * sizeof *names);
    n->n_names = k;
    return true;
}

static node *parse_for(parser *p) {
    node *n = mk(p, N_FOR);
    if (!n || !parse_targets(p, n)) return NULL;
    if (!is_name(p, "in")) return fail(p, "expected 'in'");
    next(p);
    /* the iterable stops before a loop filter's 'if' */
    n->a = parse_or(p);
    if (!n->a) return NULL;
    if (is_name(p, "if")) {
        next(p);
        n->d = parse_expr(p);
        if (!n->d) return NULL;
    }
    if (is_name(p, "recursive")) return fail(p, "recursive loops are not supported");
    if (!end_block(p)) return NULL;
    static const char *const stops[] = {"else", "endfor", NULL};
    const char *stop;
    n->b = parse_body(p, stops, &stop);
    if (!n->b) return NULL;
    if (!strcmp(stop, "else")) {
        if (!end_block(p)) return NULL;
        static const char *const end[] = {"endfor", NULL};
        n->c = parse_body(p, end, &stop);
        if (!n->c) return NULL;
    }
    return end_block(p) ? n : NULL;
}

static node *parse_set(parser *p) {
    node *n = mk(p, N_SET);
    if (!n) return NULL;
    if (peek(p)->kind == TK_NAME && tok_is(peek_at(p, 1), TK_OP, ".")) {
        n->names = rw_arena_calloc(p->a, 1, sizeof *n->names);
        if (!n->names) return fail(p, "out of memory");
        n->names[0] = dup_tok(p, next(p));
        n->n_names = 1;
        next(p);
        if (peek(p)->kind != TK_NAME) return fail(p, "expected attribute name");
        n->attr = dup_tok(p, next(p));
    } else if (!parse_targets(p, n)) return NULL;
    if (peek(p)->kind == TK_BLOCK_END && n->n_names == 1 && !n->attr) { /* {% set x %}...{% endset %} */
        next(p);
        n->kind = N_SET_BLOCK;
        static const char *const end[] = {"endset", NULL};
        const char *stop;
        n->b = parse_body(p, end, &stop);
        return n->b && end_block(p) ? n : NULL;
    }
    if (!expect_op(p, "=")) return NULL;
    n->a = parse_expr(p);
    if (n->a && is_op(p, ",")) { /* set a, b = x, y */
        node *l = mk(p, N_LIST);
        kid_buf *kb = rw_arena_alloc(p->a, sizeof *kb);
        if (!l || !kb) return fail(p, "out of memory");
        kb_add(p, kb, n->a, NULL);
        while (is_op(p, ",")) {
            next(p);
            node *x = parse_expr(p);
            if (!x || !kb_add(p, kb, x, NULL)) return NULL;
        }
        kb_store(p, kb, l, false);
        n->a = l;
    }
    return n->a && end_block(p) ? n : NULL;
}

static node *parse_macro(parser *p) {
    node *n = mk(p, N_MACRO);
    if (!n) return NULL;
    if (peek(p)->kind != TK_NAME) return fail(p, "expected macro name");
    n->s = dup_tok(p, next(p));
    if (!expect_op(p, "(")) return NULL;
    kid_buf *kb = rw_arena_alloc(p->a, sizeof *kb);
    if (!kb) return fail(p, "out of memory");
    while (!is_op(p, ")")) {
        if (peek(p)->kind != TK_NAME) return fail(p, "expected parameter name");
        const char *name = dup_tok(p, next(p));
        node *def = NULL;
        if (is_op(p, "=")) {
            next(p);
            def = parse_expr(p);
            if (!def) return NULL;
        }
        if (!kb_add(p, kb, def, name)) return NULL;
        if (!is_op(p, ",")) break;
        next(p);
    }
    if (!expect_op(p, ")") || !end_block(p)) return NULL;
    kb_store(p, kb, n, true);
    static const char *const end[] = {"endmacro", NULL};
    const char *stop;
    n->b = parse_body(p, end, &stop);
    return n->b && end_block(p) ? n : NULL;
}

static node *parse_body(parser *p, const char *const *stops, const char **stopped) {
    node *body = mk(p, N_BODY);
    if (!body) return NULL;
    size_t cap = 8, n = 0;
    node **kids = rw_arena_calloc(p->a, cap, sizeof *kids);
    if (!kids) return fail(p, "out of memory");
    if (++p->depth > MAX_NESTING) return fail(p, "blocks nested too deeply");
    for (;;) {
        const token *t = peek(p);
        node *k = NULL;
        if (t->kind == TK_EOF) {
            if (stops) return fail(p, "unexpected end of template (missing {%% %s %%})", stops[0] ? stops[0] : "end");
            break;
        }
        if (t->kind == TK_TEXT) {
            next(p);
            k = mk(p, N_TEXT);
            if (k) {
                k->s = t->s;
                k->n = t->n;
            }
        } else if (t->kind == TK_VAR_BEGIN) {
            next(p);
            k = mk(p, N_OUTPUT);
            if (k) k->a = parse_expr(p);
            if (!k || !k->a) return NULL;
            if (peek(p)->kind != TK_VAR_END) return fail(p, "expected '}}'");
            next(p);
        } else if (t->kind == TK_BLOCK_BEGIN) {
            const token *kw = peek_at(p, 1);
            if (kw->kind != TK_NAME) return fail(p, "expected a statement keyword");
            for (size_t s = 0; stops && stops[s]; s++)
                if (tok_is(kw, TK_NAME, stops[s])) {
                    next(p);
                    next(p);
                    *stopped = stops[s];
                    goto done;
                }
            next(p);
            next(p);
            if (tok_is(kw, TK_NAME, "if")) k = parse_if(p);
            else if (tok_is(kw, TK_NAME, "for")) k = parse_for(p);
            else if (tok_is(kw, TK_NAME, "set")) k = parse_set(p);
            else if (tok_is(kw, TK_NAME, "macro")) k = parse_macro(p);
            else if (tok_is(kw, TK_NAME, "break") || tok_is(kw, TK_NAME, "continue")) {
                k = mk(p, tok_is(kw, TK_NAME, "break") ? N_BREAK : N_CONTINUE);
                if (k && !end_block(p)) return NULL;
            } else if (tok_is(kw, TK_NAME, "generation") || tok_is(kw, TK_NAME, "endgeneration")) {
                /* transformers' AssistantTracker: the body renders unchanged */
                if (!end_block(p)) return NULL;
                continue;
            } else {
                char name[40];
                snprintf(name, sizeof name, "%.*s", (int)kw->n, kw->s);
                return fail(p, "unknown or unexpected tag '%s'", name);
            }
            if (!k) return NULL;
        } else {
            return fail(p, "unexpected token");
        }
        if (!k) return NULL;
        if (n == cap) {
            node **bigger = rw_arena_calloc(p->a, cap * 2, sizeof *kids);
            if (!bigger) return fail(p, "out of memory");
            memcpy(bigger, kids, n * sizeof *kids);
            kids = bigger;
            cap *= 2;
        }
        kids[n++] = k;
    }
done:
    p->depth--;
    body->kids = kids;
    body->n_kids = n;
    return body;
}

rw_status rw_chat__parse(const token_list *tokens, rw_arena *a, node **root, rw_error *err) {
    parser p = {.tl = tokens, .a = a, .err = err};
    *root = parse_body(&p, NULL, NULL);
    if (!*root && !p.status) p.status = rw_errorf(err, RW_ERR_TEMPLATE, "template: parse error");
    return p.status;
}
