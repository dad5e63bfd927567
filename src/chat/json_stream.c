/* json_stream.c - an incremental JSON validator for streaming a call's
 * arguments (output_int.h): fed the text as it comes, it says where the value
 * ends, whether it broke, and the last point up to which the text can be
 * sent with a known way to close it (so a call that breaks later still has
 * well-formed arguments).
 *
 * Strings must be well-formed UTF-8 (jansson's rule). Safe points: right after '{' or '[', after a complete value inside a
 * container, anywhere inside a value string but an escape, and the end. A
 * comma is never a safe point's last byte: it goes out with the next value. */
#include <string.h>

#include "chat/output_int.h"

enum {
    J_VALUE,        /* a value must come */
    J_OBJ_FIRST,    /* after '{': a key or '}' */
    J_OBJ_KEY,      /* after ',' in an object: a key */
    J_COLON,        /* after a key */
    J_ARR_FIRST,    /* after '[': a value or ']' */
    J_AFTER,        /* after a value: ',' or a closer (or the end at depth 0) */
    J_STRING,
    J_ESC,          /* after a backslash */
    J_UHEX,         /* in \uXXXX */
    J_NUMBER,
    J_LITERAL,
    J_DONE,
};

/* Number sub-states: where in -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
enum { N_SIGN, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* The value just ended (a scalar or a container): what may come next. */
static void value_done(rw_chat__jval *v) { v->st = v->depth ? J_AFTER : J_DONE; }

static void mark_safe(rw_chat__jval *v, size_t at) {
    v->safe = at;
    size_t k = 0;
    if (v->st == J_STRING && !v->key) v->safe_close[k++] = '"';
    for (int d = v->depth; d-- > 0;) v->safe_close[k++] = v->stack[d] == '{' ? '}' : ']';
    v->safe_close_len = k;
}

/* A byte that starts a value. */
static int start_value(rw_chat__jval *v, char c) {
    switch (c) {
    case '{':
    case '[':
        if (v->depth == (int)sizeof v->stack) return -1;
        v->stack[v->depth++] = c;
        v->st = c == '{' ? J_OBJ_FIRST : J_ARR_FIRST;
        return 0;
    case '"':
        v->st = J_STRING;
        v->key = false;
        return 0;
    case 't': v->lit = "true"; break;
    case 'f': v->lit = "false"; break;
    case 'n': v->lit = "null"; break;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            v->st = J_NUMBER;
            v->num = c == '-' ? N_SIGN : c == '0' ? N_ZERO : N_INT;
            return 0;
        }
        return -1;
    }
    v->st = J_LITERAL;
    v->litpos = 1;
    return 0;
}

/* A number ends at a byte that cannot continue it: is it complete? */
static bool number_complete(int s) { return s == N_ZERO || s == N_INT || s == N_FRAC || s == N_EXP; }

static int number_byte(rw_chat__jval *v, char c) { /* 1: consumed, 0: the number ended before c, -1: bad */
    bool dig = c >= '0' && c <= '9';
    switch (v->num) {
    case N_SIGN: if (dig) { v->num = c == '0' ? N_ZERO : N_INT; return 1; } return -1;
    case N_ZERO: if (c == '.') { v->num = N_DOT; return 1; } if (c == 'e' || c == 'E') { v->num = N_E; return 1; } return 0;
    case N_INT: if (dig) return 1; if (c == '.') { v->num = N_DOT; return 1; } if (c == 'e' || c == 'E') { v->num = N_E; return 1; } return 0;
    case N_DOT: if (dig) { v->num = N_FRAC; return 1; } return -1;
    case N_FRAC: if (dig) return 1; if (c == 'e' || c == 'E') { v->num = N_E; return 1; } return 0;
    case N_E: if (c == '+' || c == '-') { v->num = N_ESIGN; return 1; } if (dig) { v->num = N_EXP; return 1; } return -1;
    case N_ESIGN: if (dig) { v->num = N_EXP; return 1; } return -1;
    case N_EXP: if (dig) return 1; return 0;
    }
    return -1;
}

int rw_chat__jval_feed(rw_chat__jval *v, const char *p, size_t n) {
    while (v->pos < n) {
        char c = p[v->pos];
        switch (v->st) {
        case J_DONE: return 1;
        case J_VALUE:
            if (is_ws(c)) break;
            if (start_value(v, c)) return -1;
            if (v->st == J_OBJ_FIRST || v->st == J_ARR_FIRST || v->st == J_STRING) {
                v->pos++;
                mark_safe(v, v->pos);
                continue;
            }
            break;
        case J_OBJ_FIRST:
        case J_OBJ_KEY:
            if (is_ws(c)) break;
            if (c == '}' && v->st == J_OBJ_FIRST) {
                v->depth--;
                value_done(v);
                v->pos++;
                mark_safe(v, v->pos);
                if (v->st == J_DONE) return 1;
                continue;
            }
            if (c != '"') return -1;
            v->st = J_STRING;
            v->key = true;
            break;
        case J_COLON:
            if (is_ws(c)) break;
            if (c != ':') return -1;
            v->st = J_VALUE;
            break;
        case J_ARR_FIRST:
            if (is_ws(c)) break;
            if (c == ']') {
                v->depth--;
                value_done(v);
                v->pos++;
                mark_safe(v, v->pos);
                if (v->st == J_DONE) return 1;
                continue;
            }
            v->st = J_VALUE;
            continue; /* the same byte starts the value */
        case J_AFTER:
            if (is_ws(c)) break;
            if (c == ',') {
                v->st = v->stack[v->depth - 1] == '{' ? J_OBJ_KEY : J_VALUE;
                break;
            }
            if ((c == '}' && v->stack[v->depth - 1] == '{') || (c == ']' && v->stack[v->depth - 1] == '[')) {
                v->depth--;
                value_done(v);
                v->pos++;
                mark_safe(v, v->pos);
                if (v->st == J_DONE) return 1;
                continue;
            }
            return -1;
        case J_STRING:
            if (v->hi && c != '\\') return -1; /* a high surrogate's low half must follow */
            if (c == '"') {
                if (v->key) v->st = J_COLON;
                else value_done(v);
                v->pos++;
                if (!v->key || v->st == J_DONE) mark_safe(v, v->pos);
                if (v->st == J_DONE) return 1;
                continue;
            }
            if (c == '\\') {
                v->st = J_ESC;
                break;
            }
            if ((unsigned char)c < 0x20) return -1;
            if ((unsigned char)c >= 0x80) { /* a whole, well-formed character, or wait for the rest of it */
                int l = rw_chat__utf8_len((const unsigned char *)p + v->pos, n - v->pos);
                if (l == 0) return -1;
                if (l < 0) return 0;
                v->pos += (size_t)l;
            } else v->pos++;
            if (!v->key) mark_safe(v, v->pos);
            continue;
        case J_ESC:
            if (c == 'u') {
                v->st = J_UHEX;
                v->ulen = 4;
                v->uval = 0;
                break;
            }
            if (v->hi) return -1;
            if (!strchr("\"\\/bfnrt", c) || !c) return -1;
            v->st = J_STRING;
            v->pos++;
            if (!v->key) mark_safe(v, v->pos);
            continue;
        case J_UHEX:
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return -1;
            v->uval = v->uval * 16 + (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
            if (--v->ulen == 0) { /* as jansson decodes it: surrogates in pairs, no \\u0000 */
                bool low = v->uval >= 0xDC00 && v->uval <= 0xDFFF, high = v->uval >= 0xD800 && v->uval <= 0xDBFF;
                if (v->uval == 0 || low != v->hi || (high && v->hi)) return -1;
                v->hi = high;
                v->st = J_STRING;
                v->pos++;
                if (!v->key && !v->hi) mark_safe(v, v->pos);
                continue;
            }
            break;
        case J_NUMBER: {
            int r = number_byte(v, c);
            if (r < 0) return -1;
            if (r == 1) break;
            if (!number_complete(v->num)) return -1;
            value_done(v);
            mark_safe(v, v->pos);
            if (v->st == J_DONE) return 1;
            continue; /* c is the next state's */
        }
        case J_LITERAL:
            if (c != v->lit[v->litpos]) return -1;
            if (!v->lit[++v->litpos]) {
                value_done(v);
                v->pos++;
                mark_safe(v, v->pos);
                if (v->st == J_DONE) return 1;
                continue;
            }
            break;
        }
        v->pos++;
    }
    return v->st == J_DONE ? 1 : 0;
}
