/* lexer.c - template source to tokens, with Jinja's whitespace control:
 *   {{- {%- {#-  strip all whitespace before the tag;
 *   -}} -%} -#}  strip all whitespace after it;
 *   trim_blocks  the first newline after a %} or #} is removed (+%} keeps it);
 *   lstrip_blocks spaces and tabs from the start of a line up to {% or {#
 *                are removed ({%+ keeps them);
 *   one trailing newline at the end of the source is dropped. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat_int.h"

typedef struct {
    const char *src;
    size_t len, pos;
    int line;
    rw_arena *a;
    token_list *out;
    rw_error *err;
} lexer;

static rw_status push(lexer *lx, token t) {
    token_list *l = lx->out;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        token *v = realloc(l->v, cap * sizeof *v);
        if (!v) return rw_errorf(lx->err, RW_ERR_NOMEM, "template: out of memory");
        l->v = v;
        l->cap = cap;
    }
    t.line = lx->line;
    l->v[l->n++] = t;
    return RW_OK;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static int count_lines(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

/* Decodes a quoted string literal starting at lx->pos (the quote). */
static rw_status lex_string(lexer *lx) {
    char q = lx->src[lx->pos++];
    /* The decoded text is never longer than the quoted source (every escape
     * shrinks or keeps its length), so size the buffer by the raw literal. */
    size_t raw = 0;
    while (lx->pos + raw < lx->len && lx->src[lx->pos + raw] != q) raw += lx->src[lx->pos + raw] == '\\' ? 2 : 1;
    char *buf = rw_arena_alloc(lx->a, raw + 1);
    if (!buf) return rw_errorf(lx->err, RW_ERR_NOMEM, "template: out of memory");
    size_t n = 0;
    while (lx->pos < lx->len && lx->src[lx->pos] != q) {
        char c = lx->src[lx->pos++];
        if (c == '\n') lx->line++;
        if (c != '\\' || lx->pos >= lx->len) {
            buf[n++] = c;
            continue;
        }
        char e = lx->src[lx->pos++];
        switch (e) {
        case 'n': buf[n++] = '\n'; break;
        case 't': buf[n++] = '\t'; break;
        case 'r': buf[n++] = '\r'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'v': buf[n++] = '\v'; break;
        case 'a': buf[n++] = '\a'; break;
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': { /* octal, up to 3 digits */
            unsigned v = (unsigned)(e - '0');
            for (int d = 1; d < 3 && lx->pos < lx->len && lx->src[lx->pos] >= '0' && lx->src[lx->pos] <= '7'; d++)
                v = v * 8 + (unsigned)(lx->src[lx->pos++] - '0');
            if (v < 0x80) buf[n++] = (char)v;
            else { buf[n++] = (char)(0xc0 | v >> 6); buf[n++] = (char)(0x80 | (v & 0x3f)); }
            break;
        }
        case '\\': case '\'': case '"': buf[n++] = e; break;
        case '\n': lx->line++; break; /* line continuation */
        case 'x': case 'u': case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            unsigned cp = 0;
            int d = 0;
            for (; d < digits && lx->pos < lx->len; d++) {
                char h = lx->src[lx->pos];
                unsigned v = h >= '0' && h <= '9' ? (unsigned)(h - '0') : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                           : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10) : 99;
                if (v == 99) break;
                cp = cp * 16 + v;
                lx->pos++;
            }
            if (d != digits || cp > 0x10ffff)
                return rw_errorf(lx->err, RW_ERR_TEMPLATE, "template line %d: bad \\%c escape", lx->line, e);
            if (cp < 0x80) buf[n++] = (char)cp;
            else if (cp < 0x800) { buf[n++] = (char)(0xc0 | cp >> 6); buf[n++] = (char)(0x80 | (cp & 0x3f)); }
            else if (cp < 0x10000) {
                buf[n++] = (char)(0xe0 | cp >> 12); buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                buf[n++] = (char)(0x80 | (cp & 0x3f));
            } else {
                buf[n++] = (char)(0xf0 | cp >> 18); buf[n++] = (char)(0x80 | ((cp >> 12) & 0x3f));
                buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3f)); buf[n++] = (char)(0x80 | (cp & 0x3f));
            }
            break;
        }
        default: buf[n++] = '\\'; buf[n++] = e; break; /* Python keeps unknown escapes */
        }
    }
    if (lx->pos >= lx->len) return rw_errorf(lx->err, RW_ERR_TEMPLATE, "template line %d: unterminated string", lx->line);
    lx->pos++;
    return push(lx, (token){.kind = TK_STRING, .s = buf, .n = n});
}

static rw_status lex_number(lexer *lx) {
    size_t start = lx->pos;
    bool is_float = false;
    while (lx->pos < lx->len && (is_digit(lx->src[lx->pos]) || lx->src[lx->pos] == '_')) lx->pos++;
    if (lx->pos + 1 < lx->len && lx->src[lx->pos] == '.' && is_digit(lx->src[lx->pos + 1])) {
        is_float = true;
        lx->pos++;
        while (lx->pos < lx->len && is_digit(lx->src[lx->pos])) lx->pos++;
    }
    if (lx->pos < lx->len && (lx->src[lx->pos] == 'e' || lx->src[lx->pos] == 'E')) {
        size_t p = lx->pos + 1;
        if (p < lx->len && (lx->src[p] == '+' || lx->src[p] == '-')) p++;
        if (p < lx->len && is_digit(lx->src[p])) {
            is_float = true;
            lx->pos = p;
            while (lx->pos < lx->len && is_digit(lx->src[lx->pos])) lx->pos++;
        }
    }
    char tmp[64];
    size_t n = 0;
    for (size_t i = start; i < lx->pos && n < sizeof tmp - 1; i++)
        if (lx->src[i] != '_') tmp[n++] = lx->src[i];
    tmp[n] = 0;
    token t = {.kind = is_float ? TK_FLOAT : TK_INT};
    if (is_float) t.f = strtod(tmp, NULL);
    else t.i = strtoll(tmp, NULL, 10);
    return push(lx, t);
}

/* Lexes the inside of a {{ }} or {% %} tag up to its end marker. Returns
 * whether the end marker had a '-' (strip after). */
static rw_status lex_tag(lexer *lx, bool block, bool *strip_after, bool *keep_after) {
    const char *end = block ? "%}" : "}}";
    static const char *const ops[] = {"==", "!=", "<=", ">=", "//", "**", "+", "-", "*", "/", "%", "~", "<", ">",
                                      "=", "(", ")", "[", "]", "{", "}", ".", ",", ":", "|"};
    int depth = 0; /* open ( [ {: a '}}' inside braces closes them, not the tag */
    for (;;) {
        while (lx->pos < lx->len && is_ws(lx->src[lx->pos])) {
            if (lx->src[lx->pos] == '\n') lx->line++;
            lx->pos++;
        }
        if (lx->pos >= lx->len) return rw_errorf(lx->err, RW_ERR_TEMPLATE, "template line %d: unclosed tag", lx->line);
        const char *p = lx->src + lx->pos;
        size_t left = lx->len - lx->pos;
        if (depth == 0 && left >= 3 && p[0] == '-' && !memcmp(p + 1, end, 2)) {
            lx->pos += 3;
            *strip_after = true;
            return RW_OK;
        }
        if (depth == 0 && left >= 3 && p[0] == '+' && !memcmp(p + 1, end, 2)) { /* +%}: no trim_blocks */
            lx->pos += 3;
            *strip_after = false;
            *keep_after = true;
            return RW_OK;
        }
        if (depth == 0 && left >= 2 && !memcmp(p, end, 2)) {
            lx->pos += 2;
            *strip_after = false;
            return RW_OK;
        }
        rw_status s;
        if (*p == '\'' || *p == '"') s = lex_string(lx);
        else if (is_digit(*p)) s = lex_number(lx);
        else if (is_name_start(*p)) {
            size_t st = lx->pos;
            while (lx->pos < lx->len && (is_name_start(lx->src[lx->pos]) || is_digit(lx->src[lx->pos]))) lx->pos++;
            s = push(lx, (token){.kind = TK_NAME, .s = lx->src + st, .n = lx->pos - st});
        } else {
            size_t k = 0;
            for (; k < sizeof ops / sizeof ops[0]; k++)
                if (strlen(ops[k]) <= left && !memcmp(p, ops[k], strlen(ops[k]))) break;
            if (k == sizeof ops / sizeof ops[0])
                return rw_errorf(lx->err, RW_ERR_TEMPLATE, "template line %d: unexpected character '%c'", lx->line, *p);
            lx->pos += strlen(ops[k]);
            if (ops[k][0] == '(' || ops[k][0] == '[' || ops[k][0] == '{') depth++;
            else if ((ops[k][0] == ')' || ops[k][0] == ']' || ops[k][0] == '}') && depth > 0) depth--;
            s = push(lx, (token){.kind = TK_OP, .s = ops[k], .n = strlen(ops[k])});
        }
        if (s) return s;
    }
}

/* Skips blanks from pos; returns the new position. */
static size_t skip_ws(const lexer *lx, size_t pos) {
    while (pos < lx->len && is_ws(lx->src[pos])) pos++;
    return pos;
}

/* At lx->pos just inside a "{%": if the tag is `raw`, emits everything up to
 * the matching {% endraw %} as text, with Jinja's whitespace rules ({% raw
 * -%} strips the start of the content, {%- endraw %} its end, lstrip_blocks
 * applies to the endraw tag, trim_blocks after it but not after raw). */
static rw_status lex_raw(lexer *lx, bool *raw, bool *strip_next, bool *trim_next) {
    const char *src = lx->src;
    size_t q = skip_ws(lx, lx->pos);
    *raw = q + 3 <= lx->len && !memcmp(src + q, "raw", 3) &&
           (q + 3 == lx->len || !(is_name_start(src[q + 3]) || is_digit(src[q + 3])));
    if (!*raw) return RW_OK;
    q = skip_ws(lx, q + 3);
    bool strip_content = q < lx->len && src[q] == '-';
    if (q < lx->len && (src[q] == '-' || src[q] == '+')) q++;
    if (q + 2 > lx->len || src[q] != '%' || src[q + 1] != '}')
        return rw_errorf(lx->err, RW_ERR_TEMPLATE, "template line %d: expected '%%}' after raw", lx->line);
    size_t cs = q + 2;
    for (size_t t = cs; t + 1 < lx->len; t++) {
        if (src[t] != '{' || src[t + 1] != '%') continue;
        size_t e = t + 2;
        char mark = e < lx->len && (src[e] == '-' || src[e] == '+') ? src[e] : 0;
        e = skip_ws(lx, e + (mark != 0));
        if (e + 6 > lx->len || memcmp(src + e, "endraw", 6)) continue;
        e = skip_ws(lx, e + 6);
        char end_mark = e < lx->len && (src[e] == '-' || src[e] == '+') ? src[e] : 0;
        e += end_mark != 0;
        if (e + 2 > lx->len || src[e] != '%' || src[e + 1] != '}') continue;
        size_t ts = cs, te = t;
        if (strip_content) ts = skip_ws(lx, ts);
        if (mark == '-') {
            while (te > ts && is_ws(src[te - 1])) te--;
        } else if (mark != '+') {
            size_t ls = te;
            while (ls > ts && (src[ls - 1] == ' ' || src[ls - 1] == '\t')) ls--;
            if (ls > 0 && src[ls - 1] == '\n') te = ls;
        }
        rw_status s = te > ts ? push(lx, (token){.kind = TK_TEXT, .s = src + ts, .n = te - ts}) : RW_OK;
        lx->line += count_lines(src + lx->pos, e + 2 - lx->pos);
        lx->pos = e + 2;
        *strip_next = end_mark == '-';
        *trim_next = !end_mark;
        return s;
    }
    return rw_errorf(lx->err, RW_ERR_TEMPLATE, "template line %d: raw block without {%% endraw %%}", lx->line);
}

rw_status rw_chat__lex(const char *src, size_t len, rw_arena *a, token_list *out, rw_error *err) {
    if (len && src[len - 1] == '\n') len--; /* keep_trailing_newline = False */
    lexer lx = {.src = src, .len = len, .line = 1, .a = a, .out = out, .err = err};
    bool strip_next = false; /* previous tag ended with '-' */
    bool trim_next = false;  /* previous tag was a block or comment (trim_blocks) */
    rw_status s = RW_OK;
    while (lx.pos <= len && !s) {
        /* find the next tag */
        size_t t = lx.pos;
        char kind = 0;
        while (t + 1 < len) {
            if (src[t] == '{' && (src[t + 1] == '{' || src[t + 1] == '%' || src[t + 1] == '#')) {
                kind = src[t + 1];
                break;
            }
            t++;
        }
        size_t text_end = kind ? t : len;
        size_t ts = lx.pos, te = text_end;
        if (strip_next) while (ts < te && is_ws(src[ts])) ts++;
        else if (trim_next && ts < te && src[ts] == '\n') ts++;
        else if (trim_next && ts + 1 < te && src[ts] == '\r' && src[ts + 1] == '\n') ts += 2;
        bool strip_before = kind && t + 2 < len && src[t + 2] == '-';
        bool keep_before = kind && t + 2 < len && src[t + 2] == '+';
        if (strip_before) {
            while (te > ts && is_ws(src[te - 1])) te--;
        } else if (kind && kind != '{' && !keep_before) {
            /* lstrip_blocks: only blanks between the line start and the tag */
            size_t ls = t;
            while (ls > 0 && (src[ls - 1] == ' ' || src[ls - 1] == '\t')) ls--;
            if ((ls == 0 || src[ls - 1] == '\n') && ls >= ts) te = ls;
        }
        if (te > ts) s = push(&lx, (token){.kind = TK_TEXT, .s = src + ts, .n = te - ts});
        lx.line += count_lines(src + lx.pos, text_end - lx.pos);
        if (s || !kind) break;
        lx.pos = t + 2 + (strip_before || keep_before);
        strip_next = trim_next = false;
        if (kind == '#') {
            const char *e = NULL;
            for (size_t k = lx.pos; k + 1 < len; k++)
                if (src[k] == '#' && src[k + 1] == '}') { e = src + k; break; }
            if (!e) return rw_errorf(err, RW_ERR_TEMPLATE, "template line %d: unclosed comment", lx.line);
            size_t epos = (size_t)(e - src);
            strip_next = epos > lx.pos && src[epos - 1] == '-';
            bool keep = epos > lx.pos && src[epos - 1] == '+'; /* +#} keeps the newline */
            lx.line += count_lines(src + lx.pos, epos - lx.pos);
            lx.pos = epos + 2;
            trim_next = !strip_next && !keep;
            continue;
        }
        if (kind == '%') {
            bool raw = false;
            s = lex_raw(&lx, &raw, &strip_next, &trim_next);
            if (s) break;
            if (raw) continue;
        }
        bool block = kind == '%';
        s = push(&lx, (token){.kind = block ? TK_BLOCK_BEGIN : TK_VAR_BEGIN});
        bool strip_after = false, keep_after = false;
        if (!s) s = lex_tag(&lx, block, &strip_after, &keep_after);
        if (!s) s = push(&lx, (token){.kind = block ? TK_BLOCK_END : TK_VAR_END});
        strip_next = strip_after;
        trim_next = block && !strip_after && !keep_after;
    }
    if (!s) s = push(&lx, (token){.kind = TK_EOF});
    return s;
}
