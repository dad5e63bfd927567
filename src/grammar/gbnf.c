/* gbnf.c - GBNF text -> the byte-level grammar of grammar_int.h.
 *
 * A recursive-descent parser that writes rules as it reads: a group
 * "( ... )" becomes a rule of its own, a repetition becomes rules too
 *
 *   x*      r ::= x r |            (right recursion: a tail call, no stack growth)
 *   x+      x x*
 *   x?      r ::= x |
 *   x{m,n}  m copies of x, then n - m nested optionals (r_k ::= x r_(k-1) |)
 *
 * and a character class becomes the UTF-8 byte sequences of its code point
 * ranges (ASCII-only classes are one terminal; others a rule whose
 * alternatives are byte-range sequences). Generated rules are named
 * "<rule>/<n>" (a name no GBNF text can write). After parsing: every
 * referenced rule must be defined, and no rule may reach itself without
 * reading a byte (left recursion), which the matcher could not expand. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"

#define MAX_REPEAT 4096       /* x{m,n} bounds */
#define MAX_ELEMS (1 << 22)   /* elements of a compiled grammar */

typedef struct {
    rw_gelem *e;
    int32_t n, cap;
} gseq;

typedef struct {
    char *name;
    gseq *alts;
    int32_t n_alts, cap_alts;
    bool defined;
    const char *ref_at; /* first reference, in the source (for "not defined": line and column then) */
    int32_t origin;            /* generated from a repetition in this user rule, else -1 */
} grule;

typedef struct {
    const char *src, *end, *p;
    grule *rules;
    int32_t n_rules, cap_rules;
    int32_t *name_hash; /* open addressing: rule ids by name, -1 = empty; cap_hash a power of 2 */
    int32_t cap_hash;
    rw_gbytes *bytes;
    int32_t n_bytes, cap_bytes;
    int64_t n_elems; /* running total, for MAX_ELEMS */
    int32_t cur;     /* the user rule being parsed */
    int32_t n_gen;   /* generated rules so far */
    int depth;       /* parentheses */
    rw_error *err;
    rw_status st;
} gparser;

/* ---- errors ---- */

static void where(const gparser *ps, const char *at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (const char *q = ps->src; q < at && q < ps->end; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 1;
        } else (*col)++;
    }
}

__attribute__((format(printf, 3, 4))) static bool fail(gparser *ps, const char *at, const char *fmt, ...) {
    if (ps->st) return false;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    where(ps, at, &line, &col);
    ps->st = rw_errorf(ps->err, RW_ERR_INVALID_ARG, "gbnf line %d col %d: %s", line, col, msg);
    return false;
}

static bool nomem(gparser *ps) {
    if (!ps->st) ps->st = rw_errorf(ps->err, RW_ERR_NOMEM, "out of memory compiling a grammar");
    return false;
}

/* ---- building ---- */

static bool seq_push(gparser *ps, gseq *s, int32_t type, int32_t v) {
    if (++ps->n_elems > MAX_ELEMS) return fail(ps, ps->p, "grammar too large (over %d elements)", MAX_ELEMS);
    if (s->n == s->cap) {
        int32_t cap = s->cap ? s->cap * 2 : 8;
        rw_gelem *e = realloc(s->e, (size_t)cap * sizeof *e);
        if (!e) return nomem(ps);
        s->e = e;
        s->cap = cap;
    }
    s->e[s->n++] = (rw_gelem){type, v};
    return true;
}

static int32_t add_bytes(gparser *ps, const rw_gbytes *b) {
    for (int32_t i = ps->n_bytes - 1; i >= 0 && i >= ps->n_bytes - 64; i--) /* recent duplicates */
        if (!memcmp(&ps->bytes[i], b, sizeof *b)) return i;
    if (ps->n_bytes == ps->cap_bytes) {
        int32_t cap = ps->cap_bytes ? ps->cap_bytes * 2 : 64;
        rw_gbytes *n = realloc(ps->bytes, (size_t)cap * sizeof *n);
        if (!n) return nomem(ps), -1;
        ps->bytes = n;
        ps->cap_bytes = cap;
    }
    ps->bytes[ps->n_bytes] = *b;
    return ps->n_bytes++;
}

static bool push_byte(gparser *ps, gseq *s, unsigned lo, unsigned hi) {
    rw_gbytes b = {{0}};
    for (unsigned c = lo; c <= hi; c++) rw_gbytes_add(&b, c);
    int32_t i = add_bytes(ps, &b);
    return i >= 0 && seq_push(ps, s, RW_GEL_TERM, i);
}

static uint32_t name_hash(const char *name, size_t len) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)name[i]) * 16777619u;
    return h;
}

/* The slot of name in ps->name_hash: its rule's, or the empty one where it goes. */
static int32_t *name_slot(gparser *ps, const char *name, size_t len) {
    const uint32_t mask = (uint32_t)ps->cap_hash - 1;
    for (uint32_t k = name_hash(name, len) & mask;; k = (k + 1) & mask) {
        int32_t i = ps->name_hash[k];
        if (i < 0 || (strlen(ps->rules[i].name) == len && !memcmp(ps->rules[i].name, name, len)))
            return &ps->name_hash[k];
    }
}

/* Keeps the name table at most half full (a lookup is then O(1): a grammar
 * of 100,000 rules compiles in linear time). */
static bool grow_names(gparser *ps) {
    if (2 * (int64_t)(ps->n_rules + 1) <= ps->cap_hash) return true;
    int32_t cap = ps->cap_hash ? ps->cap_hash * 2 : 64;
    int32_t *h = malloc((size_t)cap * sizeof *h);
    if (!h) return nomem(ps);
    free(ps->name_hash);
    ps->name_hash = h;
    ps->cap_hash = cap;
    for (int32_t k = 0; k < cap; k++) h[k] = -1;
    for (int32_t i = 0; i < ps->n_rules; i++) {
        const char *nm = ps->rules[i].name;
        *name_slot(ps, nm, strlen(nm)) = i;
    }
    return true;
}

static int32_t new_rule(gparser *ps, const char *name, size_t len) {
    if (!grow_names(ps)) return -1;
    if (ps->n_rules == ps->cap_rules) {
        int32_t cap = ps->cap_rules ? ps->cap_rules * 2 : 32;
        grule *r = realloc(ps->rules, (size_t)cap * sizeof *r);
        if (!r) return nomem(ps), -1;
        ps->rules = r;
        ps->cap_rules = cap;
    }
    grule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    r->origin = -1;
    r->name = strndup(name, len);
    if (!r->name) return nomem(ps), -1;
    *name_slot(ps, r->name, strlen(r->name)) = ps->n_rules;
    return ps->n_rules++;
}

static int32_t find_rule(gparser *ps, const char *name, size_t len) {
    if (!ps->cap_hash) return -1;
    return *name_slot(ps, name, len);
}

/* A generated rule "<current rule>/<n>". */
static int32_t gen_rule(gparser *ps) {
    char name[300];
    int n = snprintf(name, sizeof name, "%s/%d", ps->rules[ps->cur].name, ++ps->n_gen);
    int32_t r = new_rule(ps, name, (size_t)(n < (int)sizeof name ? n : (int)sizeof name - 1));
    if (r >= 0) {
        ps->rules[r].defined = true;
        ps->rules[r].origin = ps->cur;
    }
    return r;
}

static gseq *new_alt(gparser *ps, int32_t rule) {
    grule *r = &ps->rules[rule];
    if (r->n_alts == r->cap_alts) {
        int32_t cap = r->cap_alts ? r->cap_alts * 2 : 4;
        gseq *a = realloc(r->alts, (size_t)cap * sizeof *a);
        if (!a) return nomem(ps), NULL;
        r->alts = a;
        r->cap_alts = cap;
    }
    gseq *s = &r->alts[r->n_alts++];
    memset(s, 0, sizeof *s);
    return s;
}

/* ---- UTF-8 ---- */

static int utf8_encode(uint32_t c, uint8_t *o) {
    if (c < 0x80) return o[0] = (uint8_t)c, 1;
    if (c < 0x800) return o[0] = (uint8_t)(0xC0 | (c >> 6)), o[1] = (uint8_t)(0x80 | (c & 63)), 2;
    if (c < 0x10000)
        return o[0] = (uint8_t)(0xE0 | (c >> 12)), o[1] = (uint8_t)(0x80 | ((c >> 6) & 63)),
               o[2] = (uint8_t)(0x80 | (c & 63)), 3;
    o[0] = (uint8_t)(0xF0 | (c >> 18));
    o[1] = (uint8_t)(0x80 | ((c >> 12) & 63));
    o[2] = (uint8_t)(0x80 | ((c >> 6) & 63));
    o[3] = (uint8_t)(0x80 | (c & 63));
    return 4;
}

/* Decodes one code point at *pp (advancing it); invalid bytes decode as themselves. */
static uint32_t utf8_decode(const char **pp, const char *end) {
    const uint8_t *p = (const uint8_t *)*pp;
    uint32_t c = p[0];
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n <= 0 || end - *pp <= n) { /* ASCII, a stray byte, or a sequence cut by the end: one byte */
        *pp += 1;
        return c;
    }
    uint32_t v = c & (0x3F >> n);
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            *pp += 1;
            return c;
        }
        v = (v << 6) | (p[i] & 63);
    }
    *pp += n + 1;
    return v;
}

/* ---- character classes ---- */

typedef struct {
    uint32_t lo, hi;
} cprange;

/* Alternatives for the code points lo..hi, all with the same UTF-8 length
 * n: split until each piece is a product of byte ranges. */
static bool utf8_ranges(gparser *ps, int32_t rule, uint32_t lo, uint32_t hi, int n) {
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0)
                return utf8_ranges(ps, rule, lo, lo | m, n) && utf8_ranges(ps, rule, (lo | m) + 1, hi, n);
            if ((hi & m) != m)
                return utf8_ranges(ps, rule, lo, (hi & ~m) - 1, n) && utf8_ranges(ps, rule, hi & ~m, hi, n);
        }
    }
    uint8_t a[4], b[4];
    utf8_encode(lo, a);
    utf8_encode(hi, b);
    gseq *s = new_alt(ps, rule);
    if (!s) return false;
    for (int i = 0; i < n; i++)
        if (!push_byte(ps, s, a[i], b[i])) return false;
    return seq_push(ps, s, RW_GEL_END, 0);
}

/* Appends to seq the element(s) matching one code point in the (sorted,
 * merged) ranges. */
static bool emit_class(gparser *ps, gseq *seq, const cprange *r, int nr) {
    rw_gbytes ascii = {{0}};
    bool any_ascii = false, multi = false;
    for (int i = 0; i < nr; i++) {
        for (uint32_t c = r[i].lo; c <= r[i].hi && c < 0x80; c++) rw_gbytes_add(&ascii, c), any_ascii = true;
        if (r[i].hi >= 0x80) multi = true;
    }
    if (!multi) {
        if (!any_ascii) return fail(ps, ps->p, "empty character class");
        int32_t i = add_bytes(ps, &ascii);
        return i >= 0 && seq_push(ps, seq, RW_GEL_TERM, i);
    }
    int32_t rule = gen_rule(ps);
    if (rule < 0) return false;
    if (any_ascii) {
        gseq *s = new_alt(ps, rule);
        int32_t i = s ? add_bytes(ps, &ascii) : -1;
        if (i < 0 || !seq_push(ps, s, RW_GEL_TERM, i) || !seq_push(ps, s, RW_GEL_END, 0)) return false;
    }
    static const uint32_t bounds[4][2] = {{0x80, 0x7FF}, {0x800, 0xFFFF}, {0x10000, 0x10FFFF}, {0, 0}};
    for (int i = 0; i < nr; i++)
        for (int k = 0; k < 3; k++) {
            uint32_t lo = r[i].lo > bounds[k][0] ? r[i].lo : bounds[k][0];
            uint32_t hi = r[i].hi < bounds[k][1] ? r[i].hi : bounds[k][1];
            if (lo > hi) continue;
            /* no surrogates */
            if (k == 1 && lo <= 0xDFFF && hi >= 0xD800) {
                if (lo < 0xD800 && !utf8_ranges(ps, rule, lo, 0xD7FF, 3)) return false;
                if (hi > 0xDFFF && !utf8_ranges(ps, rule, 0xE000, hi, 3)) return false;
                continue;
            }
            if (!utf8_ranges(ps, rule, lo, hi, k + 2)) return false;
        }
    if (ps->rules[rule].n_alts == 0) return fail(ps, ps->p, "empty character class");
    return seq_push(ps, seq, RW_GEL_REF, rule);
}

static int cmp_range(const void *a, const void *b) {
    const cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges; with negate, the complement over 0..0x10FFFF. Returns the count. */
static int normalize_ranges(cprange *r, int n, bool negate) {
    qsort(r, (size_t)n, sizeof *r, cmp_range);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else r[m++] = r[i];
    }
    if (!negate) return m;
    cprange tmp[m + 1];
    int k = 0;
    uint32_t next = 0;
    for (int i = 0; i < m; i++) {
        if (r[i].lo > next) tmp[k++] = (cprange){next, r[i].lo - 1};
        next = r[i].hi + 1;
    }
    if (next <= 0x10FFFF) tmp[k++] = (cprange){next, 0x10FFFF};
    memcpy(r, tmp, (size_t)k * sizeof *r);
    return k;
}

/* ---- lexing ---- */

static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skips spaces and comments; newlines only when nl (inside parentheses, after "::=" and "|"). */
static void skip_space(gparser *ps, bool nl) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\r') ps->p++;
        else if (c == '\n' && nl) ps->p++;
        else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n') ps->p++;
        } else break;
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One (possibly escaped) code point of a literal or class. */
static bool read_char(gparser *ps, uint32_t *out) {
    if (ps->p >= ps->end) return fail(ps, ps->p, "unexpected end of input");
    if (*ps->p != '\\') {
        *out = utf8_decode(&ps->p, ps->end);
        return true;
    }
    const char *at = ps->p++;
    if (ps->p >= ps->end) return fail(ps, at, "unexpected end of input after '\\'");
    char c = *ps->p++;
    int nhex = 0;
    switch (c) {
    case 'n': *out = '\n'; return true;
    case 'r': *out = '\r'; return true;
    case 't': *out = '\t'; return true;
    case '0': *out = 0; return true;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': case '/': *out = (uint8_t)c; return true;
    case 'x': nhex = 2; break;
    case 'u': nhex = 4; break;
    case 'U': nhex = 8; break;
    default: return fail(ps, at, "unknown escape '\\%c'", c);
    }
    uint32_t v = 0;
    for (int i = 0; i < nhex; i++) {
        int h = ps->p < ps->end ? hexval(*ps->p) : -1;
        if (h < 0) return fail(ps, at, "'\\%c' needs %d hex digits", c, nhex);
        v = v * 16 + (uint32_t)h;
        ps->p++;
    }
    if (v > 0x10FFFF) return fail(ps, at, "code point U+%X is out of range", v);
    *out = v;
    return true;
}

/* ---- parsing ---- */

static bool parse_alternates(gparser *ps, int32_t rule);

/* Wraps seq[from..n) into one element (a rule of its own when it is more
 * than one element), removed from seq; *el gets it. */
static bool take_unit(gparser *ps, gseq *seq, int32_t from, rw_gelem *el) {
    if (seq->n - from == 1) {
        *el = seq->e[from];
        seq->n = from;
        return true;
    }
    int32_t r = gen_rule(ps);
    gseq *a = r >= 0 ? new_alt(ps, r) : NULL;
    if (!a) return false;
    for (int32_t i = from; i < seq->n; i++)
        if (!seq_push(ps, a, seq->e[i].type, seq->e[i].v)) return false;
    seq->n = from;
    *el = (rw_gelem){RW_GEL_REF, r};
    return seq_push(ps, a, RW_GEL_END, 0);
}

/* r ::= x r | (when star) or r ::= x | (optional); returns r. */
static int32_t loop_rule(gparser *ps, rw_gelem x, int32_t tail) {
    int32_t r = gen_rule(ps);
    gseq *a = r >= 0 ? new_alt(ps, r) : NULL;
    if (!a || !seq_push(ps, a, x.type, x.v)) return -1;
    if (tail == -2 && !seq_push(ps, a, RW_GEL_REF, r)) return -1; /* star: itself */
    if (tail >= 0 && !seq_push(ps, a, RW_GEL_REF, tail)) return -1;
    if (!seq_push(ps, a, RW_GEL_END, 0)) return -1;
    a = new_alt(ps, r);
    if (!a || !seq_push(ps, a, RW_GEL_END, 0)) return -1;
    return r;
}

/* Applies x{min,max} (max < 0: unbounded) to seq[from..n). */
static bool repeat(gparser *ps, gseq *seq, int32_t from, long min, long max) {
    rw_gelem x;
    if (!take_unit(ps, seq, from, &x)) return false;
    for (long i = 0; i < min; i++)
        if (!seq_push(ps, seq, x.type, x.v)) return false;
    if (max < 0) {
        int32_t r = loop_rule(ps, x, -2);
        return r >= 0 && seq_push(ps, seq, RW_GEL_REF, r);
    }
    int32_t tail = -1;
    for (long i = min; i < max; i++) { /* innermost first */
        tail = loop_rule(ps, x, tail);
        if (tail < 0) return false;
    }
    return tail < 0 || seq_push(ps, seq, RW_GEL_REF, tail);
}

static bool parse_count(gparser *ps, long *v) {
    const char *at = ps->p;
    long x = 0;
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, at, "expected a number in {}");
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        x = x * 10 + (*ps->p++ - '0');
        if (x > MAX_REPEAT) return fail(ps, at, "repetition count over %d", MAX_REPEAT);
    }
    *v = x;
    return true;
}

static bool parse_sequence(gparser *ps, gseq *seq) {
    int32_t last = -1; /* where the last symbol starts in seq */
    const bool nl = ps->depth > 0;
    while (ps->p < ps->end && !ps->st) {
        const char *at = ps->p;
        char c = *ps->p;
        if (c == '"') {
            ps->p++;
            last = seq->n;
            while (ps->p < ps->end && *ps->p != '"') {
                if (*ps->p == '\n') return fail(ps, ps->p, "newline inside a string literal");
                if ((unsigned char)*ps->p >= 0x80) { /* a byte that is not valid UTF-8 stands for itself */
                    const char *q = ps->p;
                    utf8_decode(&q, ps->end);
                    if (q - ps->p == 1) {
                        unsigned b = (unsigned char)*ps->p++;
                        if (!push_byte(ps, seq, b, b)) return false;
                        continue;
                    }
                }
                uint32_t cp;
                if (!read_char(ps, &cp)) return false;
                uint8_t u[4];
                int n = utf8_encode(cp, u);
                for (int i = 0; i < n; i++)
                    if (!push_byte(ps, seq, u[i], u[i])) return false;
            }
            if (ps->p >= ps->end) return fail(ps, at, "unterminated string literal");
            ps->p++;
            if (seq->n == last) last = -1; /* "" matches nothing: nothing to repeat */
        } else if (c == '[' || c == '.') {
            cprange r[256];
            int nr = 0;
            bool neg = false;
            if (c == '.') {
                r[nr++] = (cprange){0, 0x10FFFF};
                ps->p++;
            } else {
                ps->p++;
                if (ps->p < ps->end && *ps->p == '^') neg = true, ps->p++;
                while (ps->p < ps->end && *ps->p != ']') {
                    uint32_t lo, hi;
                    if (!read_char(ps, &lo)) return false;
                    hi = lo;
                    if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
                        ps->p++;
                        if (!read_char(ps, &hi)) return false;
                        if (hi < lo) return fail(ps, at, "character range out of order");
                    }
                    if (nr == (int)(sizeof r / sizeof *r)) return fail(ps, at, "character class too long");
                    r[nr++] = (cprange){lo, hi};
                }
                if (ps->p >= ps->end) return fail(ps, at, "unterminated character class");
                ps->p++;
            }
            nr = normalize_ranges(r, nr, neg);
            last = seq->n;
            if (!emit_class(ps, seq, r, nr)) return false;
        } else if (is_word(c)) {
            const char *s = ps->p;
            while (ps->p < ps->end && is_word(*ps->p)) ps->p++;
            /* "name ::=" on this line starts the next rule: the sequence ends here */
            const char *q = ps->p;
            while (q < ps->end && (*q == ' ' || *q == '\t')) q++;
            if (q + 2 < ps->end && !memcmp(q, "::=", 3)) {
                ps->p = s;
                return true;
            }
            int32_t r = find_rule(ps, s, (size_t)(ps->p - s));
            if (r < 0) {
                r = new_rule(ps, s, (size_t)(ps->p - s));
                if (r < 0) return false;
                ps->rules[r].ref_at = s;
            }
            last = seq->n;
            if (!seq_push(ps, seq, RW_GEL_REF, r)) return false;
        } else if (c == '(') {
            ps->p++;
            if (++ps->depth > RW_GRAMMAR_MAX_NESTING)
                return fail(ps, at, "groups nested deeper than %d", RW_GRAMMAR_MAX_NESTING);
            int32_t r = gen_rule(ps);
            if (r < 0) return false;
            skip_space(ps, true);
            if (!parse_alternates(ps, r)) return false;
            skip_space(ps, true);
            if (ps->p >= ps->end || *ps->p != ')') return fail(ps, at, "unclosed '('");
            ps->p++;
            ps->depth--;
            last = seq->n;
            if (!seq_push(ps, seq, RW_GEL_REF, r)) return false;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0) return fail(ps, at, "'%c' with nothing before it to repeat", c);
            ps->p++;
            long min = 0, max = -1;
            if (c == '+') min = 1;
            else if (c == '?') max = 1;
            else if (c == '{') {
                skip_space(ps, false);
                if (!parse_count(ps, &min)) return false;
                skip_space(ps, false);
                if (ps->p < ps->end && *ps->p == ',') {
                    ps->p++;
                    skip_space(ps, false);
                    if (ps->p < ps->end && *ps->p != '}') {
                        if (!parse_count(ps, &max)) return false;
                        if (max < min) return fail(ps, at, "repetition {%ld,%ld}: max below min", min, max);
                    }
                } else max = min;
                skip_space(ps, false);
                if (ps->p >= ps->end || *ps->p != '}') return fail(ps, at, "expected '}'");
                ps->p++;
            }
            if (!repeat(ps, seq, last, min, max)) return false;
            last = -1;
        } else break;
        skip_space(ps, nl);
    }
    return !ps->st;
}

static bool parse_alternates(gparser *ps, int32_t rule) {
    for (;;) {
        gseq *s = new_alt(ps, rule);
        if (!s) return false;
        /* the sequence is built in a local copy: nested rules may move rules[] */
        gseq tmp = {0};
        bool ok = parse_sequence(ps, &tmp) && seq_push(ps, &tmp, RW_GEL_END, 0);
        grule *r = &ps->rules[rule];
        r->alts[r->n_alts - 1] = tmp;
        if (!ok) return false;
        if (ps->p < ps->end && *ps->p == '|') {
            ps->p++;
            skip_space(ps, true);
            continue;
        }
        return true;
    }
}

static bool parse_rule(gparser *ps) {
    const char *s = ps->p;
    while (ps->p < ps->end && is_word(*ps->p)) ps->p++;
    if (ps->p == s) return fail(ps, s, "expected a rule name, found '%c'", *s);
    size_t len = (size_t)(ps->p - s);
    skip_space(ps, false);
    if (ps->end - ps->p < 3 || memcmp(ps->p, "::=", 3)) return fail(ps, ps->p, "expected '::=' after rule name");
    ps->p += 3;
    int32_t r = find_rule(ps, s, len);
    if (r < 0 && (r = new_rule(ps, s, len)) < 0) return false;
    ps->rules[r].defined = true;
    ps->cur = r;
    skip_space(ps, true);
    if (!parse_alternates(ps, r)) return false;
    skip_space(ps, false);
    if (ps->p < ps->end && *ps->p != '\n') {
        if (*ps->p == ')') return fail(ps, ps->p, "unbalanced ')'");
        return fail(ps, ps->p, "unexpected '%c'", *ps->p);
    }
    return true;
}

/* ---- checks and layout ---- */

/* nullable[r]: rule r can match the empty string. */
static void compute_nullable(const gparser *ps, bool *nullable) {
    memset(nullable, 0, (size_t)ps->n_rules);
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < ps->n_rules; r++) {
            if (nullable[r]) continue;
            for (int32_t a = 0; a < ps->rules[r].n_alts && !nullable[r]; a++) {
                const gseq *s = &ps->rules[r].alts[a];
                bool all = true;
                for (int32_t i = 0; i < s->n && all; i++)
                    if (s->e[i].type == RW_GEL_TERM || (s->e[i].type == RW_GEL_REF && !nullable[s->e[i].v])) all = false;
                if (all) nullable[r] = changed = true;
            }
        }
    }
}

/* Depth-first search for a cycle of "starts with" edges from r0. color: 0
 * new, 1 on path, 2 done. Iterative (a chain of 100,000 rules, each starting
 * with the next, is valid GBNF and must not take 100,000 C frames): stack
 * holds the path, each frame at its next (alternative, element) to try;
 * stack has room for every rule, since a rule is on the path at most once.
 * -1: no cycle, else a rule on the cycle. */
typedef struct {
    int32_t rule, alt, elem;
} lc_frame;

static int32_t left_cycle(const gparser *ps, const bool *nullable, uint8_t *color, lc_frame *stack, int32_t r0) {
    int32_t n = 0;
    stack[n++] = (lc_frame){r0, 0, 0};
    color[r0] = 1;
    while (n > 0) {
        lc_frame *f = &stack[n - 1];
        const grule *r = &ps->rules[f->rule];
        if (f->alt >= r->n_alts) { /* every edge followed: done */
            color[f->rule] = 2;
            n--;
            continue;
        }
        const gseq *s = &r->alts[f->alt];
        if (f->elem >= s->n || s->e[f->elem].type != RW_GEL_REF) { /* this alternative's edges end */
            f->alt++;
            f->elem = 0;
            continue;
        }
        const int32_t t = s->e[f->elem].v;
        /* after t, the next element starts the rule too only if t can match nothing */
        if (nullable[t]) f->elem++;
        else f->elem = s->n;
        if (color[t] == 1) return t;
        if (color[t] == 0) {
            color[t] = 1;
            stack[n++] = (lc_frame){t, 0, 0};
        }
    }
    return -1;
}

static bool check_and_layout(gparser *ps, const char *root, rw_grammar *g) {
    for (int32_t r = 0; r < ps->n_rules; r++)
        if (!ps->rules[r].defined) {
            int line, col;
            where(ps, ps->rules[r].ref_at, &line, &col);
            ps->st = rw_errorf(ps->err, RW_ERR_INVALID_ARG, "gbnf line %d col %d: rule '%s' is not defined", line,
                               col, ps->rules[r].name);
            return false;
        }
    int32_t rt = find_rule(ps, root, strlen(root));
    if (rt < 0) {
        ps->st = rw_errorf(ps->err, RW_ERR_INVALID_ARG, "gbnf: no rule named '%s' (the start rule)", root);
        return false;
    }
    bool *nullable = malloc((size_t)ps->n_rules + 1);
    uint8_t *color = calloc((size_t)ps->n_rules + 1, 1);
    lc_frame *stack = malloc(((size_t)ps->n_rules + 1) * sizeof *stack);
    if (!nullable || !color || !stack) {
        free(nullable);
        free(color);
        free(stack);
        return nomem(ps);
    }
    compute_nullable(ps, nullable);
    int32_t bad = -1;
    for (int32_t r = 0; r < ps->n_rules && bad < 0; r++)
        if (!color[r]) bad = left_cycle(ps, nullable, color, stack, r);
    free(nullable);
    free(color);
    free(stack);
    if (bad >= 0) {
        const grule *b = &ps->rules[bad];
        if (b->origin >= 0)
            ps->st = rw_errorf(ps->err, RW_ERR_INVALID_ARG,
                               "gbnf: in rule '%s': a repetition or group that can match nothing is repeated "
                               "without end (left recursion through '%s')",
                               ps->rules[b->origin].name, b->name);
        else
            ps->st = rw_errorf(ps->err, RW_ERR_INVALID_ARG,
                               "gbnf: rule '%s' is left-recursive (it can reach itself without reading a byte)",
                               b->name);
        return false;
    }
    /* layout: every alternative of every rule, END-terminated, in one array */
    int64_t ne = 0, na = 0;
    for (int32_t r = 0; r < ps->n_rules; r++) {
        na += ps->rules[r].n_alts;
        for (int32_t a = 0; a < ps->rules[r].n_alts; a++) ne += ps->rules[r].alts[a].n;
    }
    g->elems = malloc((size_t)(ne + 1) * sizeof *g->elems);
    g->alts = malloc((size_t)(na + 1) * sizeof *g->alts);
    g->alt_off = malloc((size_t)(ps->n_rules + 1) * sizeof *g->alt_off);
    g->rule_names = calloc((size_t)ps->n_rules, sizeof *g->rule_names);
    if (!g->elems || !g->alts || !g->alt_off || !g->rule_names) return nomem(ps);
    int32_t e = 0, k = 0;
    for (int32_t r = 0; r < ps->n_rules; r++) {
        g->alt_off[r] = k;
        for (int32_t a = 0; a < ps->rules[r].n_alts; a++) {
            g->alts[k++] = e;
            memcpy(g->elems + e, ps->rules[r].alts[a].e, (size_t)ps->rules[r].alts[a].n * sizeof *g->elems);
            e += ps->rules[r].alts[a].n;
        }
        g->rule_names[r] = ps->rules[r].name;
        ps->rules[r].name = NULL;
    }
    g->alt_off[ps->n_rules] = k;
    g->n_elems = e;
    g->n_rules = ps->n_rules;
    g->root = rt;
    g->bytes = ps->bytes;
    g->n_bytes = ps->n_bytes;
    ps->bytes = NULL;
    return true;
}

static void parser_free(gparser *ps) {
    for (int32_t r = 0; r < ps->n_rules; r++) {
        for (int32_t a = 0; a < ps->rules[r].n_alts; a++) free(ps->rules[r].alts[a].e);
        free(ps->rules[r].alts);
        free(ps->rules[r].name);
    }
    free(ps->rules);
    free(ps->name_hash);
    free(ps->bytes);
}

rw_status rw_grammar_compile(const char *gbnf, size_t len, const char *root, rw_grammar **out, rw_error *err) {
    *out = NULL;
    gparser ps = {.src = gbnf, .end = gbnf + len, .p = gbnf, .err = err};
    skip_space(&ps, true);
    while (ps.p < ps.end && !ps.st) {
        if (!parse_rule(&ps)) break;
        skip_space(&ps, true);
    }
    if (!ps.st && ps.n_rules == 0) ps.st = rw_errorf(err, RW_ERR_INVALID_ARG, "gbnf: the grammar has no rules");
    rw_grammar *g = NULL;
    if (!ps.st) {
        g = calloc(1, sizeof *g);
        if (!g) nomem(&ps);
        else if (check_and_layout(&ps, root ? root : "root", g)) {
            ps.st = rw_grammar__init_runtime(g, err);
            if (!ps.st) ps.st = rw_grammar__probe(g, err);
        }
    }
    parser_free(&ps);
    if (ps.st) {
        rw_grammar_free(g);
        return ps.st;
    }
    *out = g;
    return RW_OK;
}

void rw_grammar_free(rw_grammar *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->n_sets; i++) {
        free(g->sets[i].trans);
        free(g->sets[i].mask);
    }
    if (g->rule_names)
        for (int32_t r = 0; r < g->n_rules; r++) free(g->rule_names[r]);
    free(g->rule_names);
    free(g->elems);
    free(g->bytes);
    free(g->alt_off);
    free(g->alts);
    free(g->st_pos);
    free(g->st_par);
    free(g->st_hash);
    free(g->stamp);
    free(g->sets);
    free(g->set_pool);
    free(g->set_hash);
    free(g->work);
    free(g->out);
    free(g);
}
