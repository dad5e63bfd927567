/* chat_int.h - private to src/chat: tokens, syntax tree, values.
 *
 * Pipeline: lexer.c turns the source into tokens (text pieces with Jinja's
 * whitespace control already applied, and expression tokens inside tags);
 * parser.c builds a tree of nodes; eval.c walks it, with values from value.c
 * and filters, tests, methods and globals from builtins.c. Every node and
 * value lives in an arena: the template's (nodes, literals) or the render's
 * (values), each freed whole. */
#ifndef RW_CHAT_CHAT_INT_H
#define RW_CHAT_CHAT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "chat/chat.h"

/* ---- tokens ---- */

typedef enum {
    TK_TEXT,        /* raw text between tags */
    TK_VAR_BEGIN,   /* {{ */
    TK_VAR_END,     /* }} */
    TK_BLOCK_BEGIN, /* {% */
    TK_BLOCK_END,   /* %} */
    TK_NAME,
    TK_STRING,      /* escapes already decoded */
    TK_INT,
    TK_FLOAT,
    TK_OP,          /* operator or punctuation, spelled in text */
    TK_EOF
} tk_kind;

typedef struct {
    tk_kind kind;
    const char *s; /* text (arena or source) */
    size_t n;
    int64_t i;
    double f;
    int line;
} token;

typedef struct {
    token *v;
    size_t n, cap;
} token_list;

rw_status rw_chat__lex(const char *src, size_t len, rw_arena *a, token_list *out, rw_error *err);

/* ---- syntax tree ---- */

typedef enum {
    /* statements */
    N_BODY,     /* kids[] in order */
    N_TEXT,     /* s */
    N_OUTPUT,   /* {{ a }} */
    N_IF,       /* a = cond, b = then body, c = else (body or another N_IF) */
    N_FOR,      /* names[], a = iterable, b = body, c = else body, d = filter cond */
    N_SET,      /* names[] (one or more targets), attr (ns.attr form), a = value */
    N_SET_BLOCK,/* names[0], b = body */
    N_MACRO,    /* s = name, names[] = params, kids[] = defaults (NULL entries), b = body */
    N_BREAK,
    N_CONTINUE,
    /* expressions */
    N_LIT,      /* a literal value (lit) */
    N_NAME,     /* s */
    N_LIST,     /* kids[]; neg: a tuple */
    N_DICT,     /* kids[] = key, value, key, value... */
    N_ATTR,     /* a.s */
    N_INDEX,    /* a[b] */
    N_SLICE,    /* a[b:c:d] (any may be NULL) */
    N_CALL,     /* a(kids..., names[i] set for keyword args) */
    N_FILTER,   /* a | s(kids..., names for keywords) */
    N_TEST,     /* a is [not] s(kids...); neg */
    N_UNARY,    /* op a */
    N_BINARY,   /* a op b */
    N_COMPARE,  /* kids[0] names[0] kids[1] names[1] kids[2]...: a chain of comparisons */
    N_AND,
    N_OR,
    N_NOT,
    N_COND      /* b if a else c */
} node_kind;

typedef struct value value;
typedef struct node node;

struct node {
    node_kind kind;
    int line;
    const char *s; /* name / text / operator */
    size_t n;      /* length of s for N_TEXT */
    node *a, *b, *c, *d;
    node **kids;
    const char **names; /* parallel to kids for calls (NULL = positional), or target names */
    size_t n_kids, n_names;
    const char *attr;   /* N_SET: ns.attr target */
    bool neg;           /* N_TEST: is not */
    int builtin;        /* N_FILTER: its rw_chat_filter_id, resolved at parse time */
    struct value *lit;  /* N_LIT */
};

rw_status rw_chat__parse(const token_list *tokens, rw_arena *a, node **root, rw_error *err);

/* ---- values ---- */

typedef enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_MACRO, V_FUNC } vtype;

typedef struct vlist vlist;
typedef struct vdict vdict;

struct value {
    vtype t;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *s;
            size_t n;
        } str;
        vlist *list;
        vdict *dict;    /* V_DICT and V_NS */
        struct {
            const node *node;
            struct scope *env; /* the scope the macro was defined in: it sees that scope's names */
        } macro;
        struct {
            int id;       /* builtin function or method id */
            value *self;  /* bound object for methods, else NULL */
        } fn;
    };
};

struct vlist {
    value *v;
    size_t n, cap;
    bool tuple; /* a Python tuple: same behaviour, printed (a, b), never equal to a list */
    bool gen;   /* a generator (what select, map, items... return in Jinja): always true, no len(), no index */
    uint32_t depth; /* deepest nesting of lists/dicts inside (0: none), bounded by CHAT_MAX_NEST */
};

struct vdict {
    value *keys, *vals;
    size_t n, cap;
    uint32_t depth; /* as vlist's */
};

/* Render state (eval.c). */
typedef struct render render;

value rw_chat__v_undef(void);
value rw_chat__v_none(void);
value rw_chat__v_bool(bool b);
value rw_chat__v_int(int64_t i);
value rw_chat__v_float(double f);
value rw_chat__v_str(render *r, const char *s, size_t n); /* copies */
value rw_chat__v_str_ref(const char *s, size_t n);      /* borrows (arena/static lifetime) */
value rw_chat__v_list(render *r);
value rw_chat__v_dict(render *r);

bool rw_chat__v_truthy(const value *v);
bool rw_chat__v_equal(const value *a, const value *b);
rw_status rw_chat__v_list_push(render *r, vlist *l, value v);
rw_status rw_chat__v_dict_set(render *r, vdict *d, value k, value v);
value *rw_chat__v_dict_get(const vdict *d, const char *key, size_t n);
value *rw_chat__v_dict_get_v(const vdict *d, const value *key);

/* Python str() of v appended to the render's buffer b. */
typedef struct {
    char *p;
    size_t n, cap;
} sbuf;
rw_status rw_chat__sb_put(render *r, sbuf *b, const char *s, size_t n);
rw_status rw_chat__v_to_str(render *r, sbuf *b, const value *v);  /* Python str() */
rw_status rw_chat__v_repr(render *r, sbuf *b, const value *v);    /* Python repr() */
/* json.dumps's settings as transformers' tojson passes them on. */
typedef struct {
    int indent;           /* -1: none (one line) */
    const char *item_sep; /* ", " on one line, "," with an indent, unless separators= says */
    const char *key_sep;  /* ": " */
    bool sort_keys, ensure_ascii;
} json_style;
rw_status rw_chat__v_tojson(render *r, sbuf *b, const value *v, const json_style *js, int level);
value rw_chat__v_from_sbuf(render *r, sbuf *b);                   /* the buffer's text as a value */
bool rw_chat__printable(uint32_t cp); /* Python's str.isprintable() of one code point (unicode_printable.c) */
const char *rw_chat__v_type_name(vtype t);

/* ---- render state and errors ---- */

#define CHAT_MAX_OUTPUT (64u << 20) /* bytes of output */
#define CHAT_MAX_STEPS 10000000     /* evaluated nodes and loop iterations */
#define CHAT_MAX_DEPTH 1000         /* nested statements, expressions and macro calls together */
#define CHAT_MAX_NEST 512           /* lists and dicts inside each other (equality recurses that deep) */
#define CHAT_MAX_MEMORY (512u << 20) /* bytes of values */

struct render {
    rw_arena arena;
    rw_error *err;
    const rw_chat_render_opts *opts;
    uint64_t steps;
    int depth;
    struct scope *scope; /* innermost */
    struct scope *root;
    int loop_ctl;        /* 1 break, 2 continue */
    int line;            /* template line being evaluated, for errors raised without a node */
};

void *rw_chat__r_alloc(render *r, size_t n); /* NULL sets the error (memory limit) */
rw_status rw_chat__r_fail(render *r, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* builtins.c */
#define RW_CHAT_FN_CYCLE 1000 /* loop.cycle: a function whose self is the loop's index0 */
/* The builtin filters (builtins.c), known by an id resolved once from the
 * name at parse time (map(name)'s filter when it is applied), so
 * applying a filter is a switch on that id, not a search of the names. */
#define RW_CHAT_FILTERS(X) \
    X(abs) X(capitalize) X(count) X(d) X(default) X(dictsort) X(e) X(escape) \
    X(first) X(float) X(forceescape) X(indent) X(int) X(items) X(join) X(last) \
    X(length) X(list) X(lower) X(map) X(max) X(min) X(reject) X(rejectattr) \
    X(replace) X(reverse) X(round) X(safe) X(select) X(selectattr) X(sort) X(string) \
    X(sum) X(title) X(tojson) X(trim) X(unique) X(upper) X(wordcount)

typedef enum {
    JF_UNKNOWN = 0, /* no such filter: an error when applied, as in Jinja */
#define RW_CHAT_FILTER_ENUM(name) JF_##name,
    RW_CHAT_FILTERS(RW_CHAT_FILTER_ENUM)
#undef RW_CHAT_FILTER_ENUM
        JF_COUNT
} rw_chat_filter_id;

/* The id of a filter name, JF_UNKNOWN if there is none. */
int rw_chat__filter_id(const char *name);

rw_status rw_chat__filter(render *r, const node *n, value in, value *args, const char **kw, size_t n_args, value *out);
rw_status rw_chat__test(render *r, const node *n, value in, value *args, size_t n_args, bool *out);
rw_status rw_chat__call_func(render *r, const node *n, value fn, value *args, const char **kw, size_t n_args,
                             value *out);
bool rw_chat__global(const char *name, value *out);
bool rw_chat__method(render *r, value self, const char *name, value *out);

#endif
