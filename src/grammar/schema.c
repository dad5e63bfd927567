/* schema.c - JSON Schema -> GBNF text (see docs/structured-outputs.md for
 * the subset and what each keyword becomes).
 *
 * Each schema node becomes a rule "<name>-<n>" (the top one "<name>"); the
 * shared pieces (whitespace, strings, numbers, any value) are rules
 * "<name>-ws", "<name>-string", ... written once at the end, when used.
 * Objects list their properties in the schema's order, each optional one
 * skippable, through two chains of rules (before the first property written,
 * and after it: with a leading comma), so n properties cost 2n rules and no
 * combinations. $ref names are resolved as JSON pointers in the document
 * and get their rule before their body is generated, so recursive schemas
 * become recursive rules.
 *
 * Everything written is bounded where the issue asks it: whitespace
 * ([ \t\n] runs of at most max_ws, or "" | " " | "\n" plus up to 20 indent
 * characters by default), integers of at most 16 digits, fractions of at
 * most 16, exponents of at most 2 (so every number is a finite double).
 *
 * Keywords that constrain the value and are not handled are refused
 * (RW_ERR_UNSUPPORTED naming the keyword and the place), never ignored:
 * an output that does not validate is worse than a clear 400. Annotations
 * (title, description, default, examples, $schema, $id, $comment, ...) and
 * unknown string formats (an annotation in the spec) are ignored. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema_int.h"

#define MAX_DIGITS 16

static void rw_chat__sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { rw_chat__sb_put(b, s, strlen(s)); }
__attribute__((format(printf, 2, 3))) static void sb_fmt(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < (int)sizeof tmp) {
        rw_chat__sb_put(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    rw_chat__sb_put(b, big, (size_t)n);
    free(big);
}

static const char *const prim_name[P_COUNT] = {"ws",     "value",   "object",  "array", "string", "char",
                                               "number", "integer", "boolean", "null",  "kchar"};

static char *prim(sc *c, int p) {
    c->used[p] = true;
    char *s = NULL;
    if (asprintf(&s, "%s-%s", c->name, prim_name[p]) < 0) s = NULL;
    if (!s) c->st = rw_errorf(c->err, RW_ERR_NOMEM, "out of memory");
    return s;
}

static char *new_rule_name(sc *c) {
    char *s = NULL;
    if (asprintf(&s, "%s-%d", c->name, ++c->counter) < 0) s = NULL;
    if (!s) c->st = rw_errorf(c->err, RW_ERR_NOMEM, "out of memory");
    return s;
}

/* A GBNF string literal of n bytes. */
static void lit(sbuf *b, const char *s, size_t n) {
    sb_str(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            char e[3] = {'\\', (char)ch, 0};
            sb_str(b, e);
        } else if (ch < 0x20 || ch == 0x7f) sb_fmt(b, "\\x%02X", ch);
        else rw_chat__sb_put(b, (const char *)&ch, 1);
    }
    sb_str(b, "\"");
}

/* The literal of a JSON value's compact serialization. */
static bool lit_json(sc *c, sbuf *b, json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) {
        c->st = rw_errorf(c->err, RW_ERR_NOMEM, "out of memory");
        return false;
    }
    lit(b, s, strlen(s));
    free(s);
    return true;
}

static void define(sc *c, const char *rule, const char *body) { sb_fmt(&c->out, "%s ::= %s\n", rule, body); }

static char *gen(sc *c, json_t *s, const char *path);
static char *gen_other_key(sc *c, const char **names, int n);

/* ---- integers in a range ---- */

static int ndigits(uint64_t v) {
    int d = 1;
    while (v >= 10) v /= 10, d++;
    return d;
}

/* The numbers whose d digits lie between a and z (same length, as strings). */
static void same_len(sbuf *b, const char *a, const char *z, int d) {
    if (d == 0) return;
    if (a[0] == z[0]) {
        sb_fmt(b, "\"%c\" ", a[0]);
        same_len(b, a + 1, z + 1, d - 1);
        return;
    }
    bool a0 = true, z9 = true;
    for (int i = 1; i < d; i++) a0 &= a[i] == '0', z9 &= z[i] == '9';
    if (a0 && z9) {
        sb_fmt(b, "[%c-%c] ", a[0], z[0]);
        if (d > 1) sb_fmt(b, "[0-9]{%d} ", d - 1);
        return;
    }
    char nines[MAX_DIGITS + 1], zeros[MAX_DIGITS + 1];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    sb_fmt(b, "(\"%c\" ", a[0]);
    same_len(b, a + 1, nines, d - 1);
    if (a[0] + 1 <= z[0] - 1) {
        sb_fmt(b, "| [%c-%c] ", a[0] + 1, z[0] - 1);
        if (d > 1) sb_fmt(b, "[0-9]{%d} ", d - 1);
    }
    sb_fmt(b, "| \"%c\" ", z[0]);
    same_len(b, zeros, z + 1, d - 1);
    sb_str(b, ") ");
}

/* ( the decimal forms of lo..hi, no leading zeros ), 0 <= lo <= hi */
static void nonneg_range(sbuf *b, uint64_t lo, uint64_t hi) {
    sb_str(b, "(");
    bool first = true;
    uint64_t p = 1;
    for (int d = 1; d <= MAX_DIGITS; d++, p *= 10) {
        uint64_t dlo = d == 1 ? 0 : p, dhi = p * 10 - 1;
        uint64_t a = lo > dlo ? lo : dlo, z = hi < dhi ? hi : dhi;
        if (a > z) continue;
        char sa[MAX_DIGITS + 2], sz[MAX_DIGITS + 2];
        snprintf(sa, sizeof sa, "%llu", (unsigned long long)a);
        snprintf(sz, sizeof sz, "%llu", (unsigned long long)z);
        if (!first) sb_str(b, "| ");
        first = false;
        same_len(b, sa, sz, ndigits(a));
    }
    sb_str(b, ")");
}

static char *gen_integer(sc *c, json_t *s, const char *path) {
    json_t *mo = json_object_get(s, "multipleOf");
    if (mo && !(json_is_number(mo) && json_number_value(mo) == 1))
        return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path,
                                        "multipleOf on an integer is not supported (but 1)");
    const int64_t lim = 9999999999999999LL; /* 16 digits */
    int64_t lo = -lim, hi = lim;
    bool bounded = false;
    json_t *v;
    if ((v = json_object_get(s, "minimum")) && json_is_number(v)) {
        double d = ceil(json_number_value(v));
        json_t *ex = json_object_get(s, "exclusiveMinimum");
        if (json_is_true(ex) && d == json_number_value(v)) d += 1;
        lo = d < -lim ? -lim : d > lim ? lim : (int64_t)d;
        bounded = true;
    }
    if ((v = json_object_get(s, "exclusiveMinimum")) && json_is_number(v)) {
        double d = floor(json_number_value(v)) + 1;
        int64_t x = d < -lim ? -lim : d > lim ? lim : (int64_t)d;
        if (x > lo) lo = x;
        bounded = true;
    }
    if ((v = json_object_get(s, "maximum")) && json_is_number(v)) {
        double d = floor(json_number_value(v));
        json_t *ex = json_object_get(s, "exclusiveMaximum");
        if (json_is_true(ex) && d == json_number_value(v)) d -= 1;
        hi = d < -lim ? -lim : d > lim ? lim : (int64_t)d;
        bounded = true;
    }
    if ((v = json_object_get(s, "exclusiveMaximum")) && json_is_number(v)) {
        double d = ceil(json_number_value(v)) - 1;
        int64_t x = d < -lim ? -lim : d > lim ? lim : (int64_t)d;
        if (x < hi) hi = x;
        bounded = true;
    }
    if (!bounded) return prim(c, P_INTEGER);
    if (lo > hi)
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "no integer lies between minimum and maximum");
    sbuf b = {0};
    bool any = false;
    if (lo < 0) { /* negatives: "-" then |x| in [max(1, -hi), -lo] */
        uint64_t a = hi < 0 ? (uint64_t)(-hi) : 1, z = (uint64_t)(-lo);
        sb_str(&b, "\"-\" ");
        nonneg_range(&b, a, z);
        any = true;
    }
    if (hi >= 0) {
        if (any) sb_str(&b, " | ");
        nonneg_range(&b, (uint64_t)(lo > 0 ? lo : 0), (uint64_t)hi);
    }
    char *r = new_rule_name(c);
    if (r && !b.oom) define(c, r, b.p);
    free(b.p);
    return r;
}

/* ---- numbers in a range ---- */

/* A bound as a decimal: ip.fr (fr: fraction digits, no trailing zeros). */
typedef struct {
    uint64_t ip;
    char fr[400];
} dec;

#define NUM_INT_MAX 999999999999999ULL /* 15 digits: a bounded number's integer part */

/* |v| as the shortest decimal that reads back as v (so that a bound given as
 * 0.1 is the decimal 0.1); false when |v| is past NUM_INT_MAX. */
static bool to_dec(double v, dec *d) {
    v = fabs(v);
    if (!(v <= (double)NUM_INT_MAX)) return false;
    char s[64];
    for (int p = 0; p <= 17; p++) {
        snprintf(s, sizeof s, "%.*e", p, v);
        if (strtod(s, NULL) == v) break;
    }
    char digits[40];
    int nd = 0, e = 0;
    for (const char *q = s; *q; q++) {
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
        else if (*q == 'e') {
            e = atoi(q + 1);
            break;
        }
    }
    /* digits[0] stands at 10^e */
    d->ip = 0;
    int k = 0;
    for (int pos = e; pos >= 0; pos--, k++) d->ip = d->ip * 10 + (uint64_t)(k < nd ? digits[k] - '0' : 0);
    int f = 0;
    for (int pos = -1; pos > e; pos--) d->fr[f++] = '0'; /* zeros between the point and the first digit */
    for (; k < nd && f < (int)sizeof d->fr - 1; k++) d->fr[f++] = digits[k];
    while (f > 0 && d->fr[f - 1] == '0') f--;
    d->fr[f] = 0;
    return true;
}

/* Fraction digit strings s (up to `left` digits; at least one when
 * nonempty) with 0.s above A (A NULL: no lower bound; ai: inclusive) and
 * below B (likewise). A and B have no trailing zeros ("" is 0). Written as
 * one group; false (and nothing written) when no string qualifies. */
static bool frac_digits(sbuf *b, const char *A, bool ai, const char *B, bool bi, int left, bool nonempty) {
    if (A && !*A && ai) A = NULL;      /* >= 0: no bound */
    if (B && !*B && !bi) return false; /* < 0: nothing */
    bool empty_ok = !nonempty && !A && (!B || *B || bi);
    if (left == 0) {
        if (empty_ok) sb_str(b, "\"\" ");
        return empty_ok;
    }
    sbuf alts = {0};
    int n = 0;
    int free_lo = -1; /* a run of digits after which anything goes */
    for (int d = 0; d <= 10; d++) {
        const char *na = NULL, *nb = NULL;
        bool ok = d < 10, free_d = false;
        if (ok) {
            int a1 = A ? (*A ? *A - '0' : 0) : -1, b1 = B ? (*B ? *B - '0' : 0) : 10;
            if (d < a1 || d > b1) ok = false;
            else {
                if (A && d == a1) na = *A ? A + 1 : A;
                if (B && d == b1) nb = *B ? B + 1 : B;
                free_d = !na && !nb;
            }
        }
        if (free_d) {
            if (free_lo < 0) free_lo = d;
            continue;
        }
        if (free_lo >= 0) { /* close the run free_lo..d-1 */
            sb_fmt(&alts, "%s[%d-%d] [0-9]{0,%d} ", n++ ? "| " : "", free_lo, d - 1, left - 1);
            free_lo = -1;
        }
        if (!ok) continue;
        sbuf sub = {0};
        if (frac_digits(&sub, na ? na : NULL, ai, nb ? nb : NULL, bi, left - 1, false) && sub.p) {
            sb_fmt(&alts, "%s\"%d\" %s", n++ ? "| " : "", d, sub.p);
        }
        free(sub.p);
    }
    if (empty_ok) sb_fmt(&alts, "%s\"\" ", n++ ? "| " : "");
    if (n) sb_fmt(b, "( %s) ", alts.p);
    free(alts.p);
    return n > 0;
}

/* The fraction after an integer part: "." and digits within the bounds, or
 * none when 0 is within them. Appends one alternative's tail; false when
 * nothing fits. */
static bool frac_part(sbuf *b, const char *A, bool ai, const char *B, bool bi, int cap) {
    bool none_ok = (!A || (!*A && ai)) && (!B || *B || bi);
    sbuf s = {0};
    bool some = cap > 0 && frac_digits(&s, A, ai, B, bi, cap, true);
    if (some && none_ok) sb_fmt(b, "( \".\" %s)? ", s.p);
    else if (some) sb_fmt(b, "\".\" %s", s.p);
    free(s.p);
    return some || none_ok;
}

static int frac_cap(uint64_t ip) { return 15 - ndigits(ip); }

/* Alternatives for the numbers x >= 0 from lo to hi (hi NULL: no bound),
 * no exponent, no leading zeros; at most 15 significant digits in all, so
 * that two different numbers written are two different doubles and an
 * exclusive bound holds after parsing too. Returns how many were written. */
static int nonneg_num(sbuf *b, const dec *lo, bool li, const dec *hi, bool hi_incl, bool first) {
    uint64_t a = lo->ip, z = hi ? hi->ip : NUM_INT_MAX;
    int n = 0;
    if (a > z) return 0;
    sbuf alt = {0};
#define ALT()                                              \
    do {                                                   \
        sb_fmt(b, "%s%s", first && !n ? "" : "| ", alt.p); \
        n++;                                               \
    } while (0)
    if (a == z) {
        sb_fmt(&alt, "\"%llu\" ", (unsigned long long)a);
        if (frac_part(&alt, lo->fr, li, hi ? hi->fr : NULL, hi_incl, frac_cap(a))) ALT();
        free(alt.p);
        return n;
    }
    sb_fmt(&alt, "\"%llu\" ", (unsigned long long)a);
    if (frac_part(&alt, lo->fr, li, NULL, false, frac_cap(a))) ALT();
    alt.n = 0;
    uint64_t p = 1;
    for (int d = 1; d <= 15; d++, p *= 10) { /* a+1 .. z-1 by number of digits: any fraction */
        uint64_t dlo = d == 1 ? 0 : p, dhi = p * 10 - 1;
        uint64_t x = a + 1 > dlo ? a + 1 : dlo, y = z - 1 < dhi ? z - 1 : dhi;
        if (z == 0 || x > y) continue;
        char sx[24], sy[24];
        snprintf(sx, sizeof sx, "%llu", (unsigned long long)x);
        snprintf(sy, sizeof sy, "%llu", (unsigned long long)y);
        alt.n = 0;
        same_len(&alt, sx, sy, d);
        if (15 - d > 0) sb_fmt(&alt, "( \".\" [0-9]{1,%d} )? ", 15 - d);
        ALT();
    }
    alt.n = 0;
    sb_fmt(&alt, "\"%llu\" ", (unsigned long long)z);
    if (frac_part(&alt, NULL, true, hi ? hi->fr : NULL, hi_incl, frac_cap(z))) ALT();
#undef ALT
    free(alt.p);
    return n;
}

/* A bound keyword: its value (a number), and whether it is exclusive
 * (exclusiveMinimum as a number, or draft 4's boolean beside minimum). The
 * tighter of minimum and exclusiveMinimum wins. */
static bool num_bound(json_t *s, bool upper, double *v, bool *excl) {
    json_t *m = json_object_get(s, upper ? "maximum" : "minimum");
    json_t *x = json_object_get(s, upper ? "exclusiveMaximum" : "exclusiveMinimum");
    bool have = false;
    if (json_is_number(m)) {
        *v = json_number_value(m);
        *excl = json_is_true(x);
        have = true;
    }
    if (json_is_number(x)) {
        double e = json_number_value(x);
        if (!have || (upper ? e <= *v : e >= *v)) {
            *v = e;
            *excl = true;
        }
        have = true;
    }
    return have;
}

static char *gen_number(sc *c, json_t *s, const char *path) {
    if (json_object_get(s, "multipleOf"))
        return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "multipleOf on a number is not supported");
    double lv = 0, hv = 0;
    bool lx = false, hx = false;
    bool has_lo = num_bound(s, false, &lv, &lx), has_hi = num_bound(s, true, &hv, &hx);
    if (!has_lo && !has_hi) return prim(c, P_NUMBER);
    if ((has_lo && !isfinite(lv)) || (has_hi && !isfinite(hv)))
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "number bounds must be finite");
    /* past 15 integer digits a bound is no bound (the numbers written stop there) */
    dec lo, hi;
    if (has_lo && !to_dec(lv, &lo)) {
        if (lv > 0)
            return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "a minimum over %llu is not supported",
                                            NUM_INT_MAX);
        has_lo = false;
    }
    if (has_hi && !to_dec(hv, &hi)) {
        if (hv < 0)
            return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "a maximum below -%llu is not supported",
                                            NUM_INT_MAX);
        has_hi = false;
    }
    static const dec zero = {0};
    sbuf b = {0};
    int n = 0;
    /* x < 0: "-" y with y > 0 (never "-0") from max(-hi, 0) to -lo */
    if (!has_lo || lv < 0) {
        sbuf neg = {0};
        bool hneg = has_hi && hv < 0;
        int k = nonneg_num(&neg, hneg ? &hi : &zero, hneg ? !hx : false, has_lo ? &lo : NULL, !lx, true);
        if (k) sb_fmt(&b, "\"-\" ( %s) ", neg.p);
        n += k;
        free(neg.p);
    }
    /* x >= 0 */
    if (!has_hi || hv > 0 || (hv == 0 && !hx)) {
        bool lpos = has_lo && lv >= 0;
        sbuf pos = {0};
        int k = nonneg_num(&pos, lpos ? &lo : &zero, lpos ? !lx : true, has_hi ? &hi : NULL, !hx, true);
        if (k) sb_fmt(&b, "%s( %s) ", n ? "| " : "", pos.p);
        n += k;
        free(pos.p);
    }
    if (!n) {
        free(b.p);
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "no number lies between the bounds");
    }
    char *r = new_rule_name(c);
    if (r && !b.oom) define(c, r, b.p);
    free(b.p);
    return r;
}

/* ---- strings: pattern (a regex subset) ---- */

#define RX_MAX_TOP 64
typedef struct {
    long alo, ahi, qlo, qhi; /* hi < 0: unbounded */
} rx_elem;

typedef struct {
    const char *p, *end, *start;
    sc *c;
    const char *path;
    int depth; /* open groups, at most RW_GRAMMAR_MAX_NESTING */
    bool bad;
    long lo, hi; /* the length (code points) of what was parsed last: lo..hi, hi < 0 unbounded */
    /* the top-level sequence's elements (for length limits): an atom's
     * length, its repetition; with ovr, repetitions replaced by ovr_q */
    int n_top;
    rx_elem top[RX_MAX_TOP];
    bool ovr, top_alt;
    long ovr_q[RX_MAX_TOP][2];
} rx;

static void rx_fail(rx *r, const char *what) {
    if (!r->bad)
        rw_grammar__schema_failf(r->c, RW_ERR_UNSUPPORTED, r->path, "pattern: %s at offset %d", what,
                                 (int)(r->p - r->start));
    r->bad = true;
}

/* GBNF for one code point inside a JSON string (escaped as JSON needs). */
static void json_char(sbuf *b, uint32_t cp) {
    char tmp[16];
    if (cp == '"') sb_str(b, "\"\\\\\\\"\" ");
    else if (cp == '\\') sb_str(b, "\"\\\\\\\\\" ");
    else if (cp == '\n') sb_str(b, "\"\\\\n\" ");
    else if (cp == '\t') sb_str(b, "\"\\\\t\" ");
    else if (cp == '\r') sb_str(b, "\"\\\\r\" ");
    else if (cp < 0x20) {
        snprintf(tmp, sizeof tmp, "\"\\\\u%04X\" ", cp);
        sb_str(b, tmp);
    } else {
        snprintf(tmp, sizeof tmp, "\"\\U%08X\" ", cp);
        sb_str(b, tmp);
    }
}

typedef struct {
    uint32_t lo, hi;
} crange;

static int cmp_cr(const void *a, const void *b) {
    const crange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* A class of code points as GBNF: the JSON-safe part as one class, plus the
 * escaped forms of '"', '\\', \n, \t, \r when included. */
static void emit_class(sbuf *b, crange *r, int n, bool neg) {
    qsort(r, (size_t)n, sizeof *r, cmp_cr);
    crange m[300];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k && r[i].lo <= m[k - 1].hi + 1) {
            if (r[i].hi > m[k - 1].hi) m[k - 1].hi = r[i].hi;
        } else m[k++] = r[i];
    }
    if (neg) {
        crange t[301];
        int j = 0;
        uint32_t next = 0;
        for (int i = 0; i < k; i++) {
            if (m[i].lo > next) t[j++] = (crange){next, m[i].lo - 1};
            next = m[i].hi + 1;
        }
        if (next <= 0x10FFFF) t[j++] = (crange){next, 0x10FFFF};
        memcpy(m, t, (size_t)j * sizeof *m);
        k = j;
    }
    bool has[128] = {0};
    sb_str(b, "( [");
    bool any = false;
    for (int i = 0; i < k; i++) {
        for (uint32_t x = m[i].lo; x <= m[i].hi && x < 128; x++) has[x] = true;
        /* split around the characters JSON escapes */
        uint32_t lo = m[i].lo, hi = m[i].hi;
        for (uint32_t a = lo; a <= hi;) {
            if (a < 0x20) {
                a = 0x20;
                continue;
            }
            uint32_t z = hi;
            if (a <= '"' && z >= '"') z = a == '"' ? a : '"' - 1;
            if (a <= '\\' && z >= '\\') z = a == '\\' ? a : '\\' - 1;
            if (a != '"' && a != '\\') {
                sb_fmt(b, "\\U%08X-\\U%08X", a, z);
                any = true;
            }
            if (z == 0x10FFFF) break;
            a = z + 1;
        }
    }
    sb_str(b, "]");
    /* the characters JSON escapes, in their escaped forms */
    static const struct {
        char c;
        const char *alt;
    } esc[] = {{'"', "\"\\\\\\\"\""}, {'\\', "\"\\\\\\\\\""}, {'\n', "\"\\\\n\""}, {'\t', "\"\\\\t\""}};
    for (int i = 0; i < 4; i++)
        if (has[(int)esc[i].c]) {
            if (any) sb_str(b, " | ");
            else { /* drop the empty class written above */ b->n -= 2;
                b->p[b->n] = 0;
            }
            sb_str(b, esc[i].alt);
            any = true;
        }
    if (!any) sb_str(b, " \"\" [^\\x00-\\U0010FFFF]"); /* nothing allowed: a class that matches no byte sequence */
    sb_str(b, " ) ");
}

static uint32_t rx_utf8(rx *r) {
    const unsigned char *p = (const unsigned char *)r->p;
    uint32_t c = p[0];
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n <= 0 || r->end - r->p <= n) {
        r->p++;
        return c;
    }
    uint32_t v = c & (0x3Fu >> n);
    for (int i = 1; i <= n; i++) v = (v << 6) | (p[i] & 63);
    r->p += n + 1;
    return v;
}

/* A class escape (\d \w \s and negations) into ranges; false if not one. */
static bool class_escape(char e, crange *r, int *n, bool *neg) {
    *neg = e >= 'A' && e <= 'Z';
    switch (e) {
    case 'd':
    case 'D': r[(*n)++] = (crange){'0', '9'}; return true;
    case 'w':
    case 'W':
        r[(*n)++] = (crange){'0', '9'};
        r[(*n)++] = (crange){'A', 'Z'};
        r[(*n)++] = (crange){'a', 'z'};
        r[(*n)++] = (crange){'_', '_'};
        return true;
    case 's':
    case 'S':
        r[(*n)++] = (crange){' ', ' '};
        r[(*n)++] = (crange){'\t', '\n'};
        r[(*n)++] = (crange){'\r', '\r'};
        return true;
    default: return false;
    }
}

static uint32_t rx_escape_char(rx *r, char e) {
    switch (e) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'u': {
        uint32_t v = 0;
        for (int i = 0; i < 4; i++) {
            char h = r->p < r->end ? *r->p : 0;
            int d = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
            if (d < 0) {
                rx_fail(r, "\\u needs 4 hex digits");
                return 0;
            }
            v = v * 16 + (uint32_t)d;
            r->p++;
        }
        return v;
    }
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
            char msg[64];
            snprintf(msg, sizeof msg, "the escape \\%c is not supported", e);
            rx_fail(r, msg);
        }
        return (unsigned char)e;
    }
}

static void rx_alt(rx *r, sbuf *b);

static void rx_atom(rx *r, sbuf *b) {
    char ch = *r->p;
    if (ch == '(') {
        r->p++;
        if (r->p < r->end && *r->p == '?') {
            if (r->end - r->p >= 2 && r->p[1] == ':') r->p += 2;
            else return rx_fail(r, "lookarounds and named groups are not supported");
        }
        if (++r->depth > RW_GRAMMAR_MAX_NESTING) {
            if (!r->bad)
                rw_grammar__schema_failf(r->c, RW_ERR_INVALID_ARG, r->path,
                                         "pattern: groups nested deeper than %d at offset %d", RW_GRAMMAR_MAX_NESTING,
                                         (int)(r->p - r->start));
            r->bad = true;
            return;
        }
        sb_str(b, "( ");
        rx_alt(r, b);
        r->depth--;
        if (r->p >= r->end || *r->p != ')') return rx_fail(r, "unclosed '('");
        r->p++;
        sb_str(b, ") ");
        return; /* r->lo, r->hi: the group's */
    }
    r->lo = r->hi = 1; /* one character */
    if (ch == '[') {
        r->p++;
        crange rg[256];
        int n = 0;
        bool neg = false;
        if (r->p < r->end && *r->p == '^') neg = true, r->p++;
        bool first = true;
        while (r->p < r->end && (*r->p != ']' || first) && !r->bad) {
            first = false;
            uint32_t lo;
            if (n > 250) return rx_fail(r, "character class too long");
            if (*r->p == '\\') {
                r->p++;
                if (r->p >= r->end) return rx_fail(r, "pattern ends after '\\'");
                char e = *r->p++;
                bool eneg;
                int before = n;
                if (class_escape(e, rg, &n, &eneg)) {
                    if (eneg) return rx_fail(r, "negated class escapes inside [] are not supported");
                    (void)before;
                    continue;
                }
                lo = rx_escape_char(r, e);
            } else lo = rx_utf8(r);
            uint32_t hi = lo;
            if (r->end - r->p >= 2 && *r->p == '-' && r->p[1] != ']') {
                r->p++;
                if (*r->p == '\\') {
                    r->p++;
                    if (r->p >= r->end) return rx_fail(r, "pattern ends after '\\'");
                    char e = *r->p++;
                    hi = rx_escape_char(r, e);
                } else hi = rx_utf8(r);
                if (hi < lo) return rx_fail(r, "character range out of order");
            }
            rg[n++] = (crange){lo, hi};
        }
        if (r->p >= r->end) return rx_fail(r, "unterminated character class");
        r->p++;
        if (n == 0) return rx_fail(r, "empty character class");
        emit_class(b, rg, n, neg);
    } else if (ch == '.') {
        r->p++;
        crange rg[1] = {{'\n', '\n'}};
        emit_class(b, rg, 1, true);
    } else if (ch == '\\') {
        r->p++;
        if (r->p >= r->end) return rx_fail(r, "pattern ends after '\\'");
        char e = *r->p++;
        crange rg[8];
        int n = 0;
        bool neg;
        if (class_escape(e, rg, &n, &neg)) emit_class(b, rg, n, neg);
        else json_char(b, rx_escape_char(r, e));
    } else if (ch == '^' || ch == '$') {
        rx_fail(r, "anchors are supported only at the start (^) and the end ($)");
    } else if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
        rx_fail(r, "a quantifier with nothing to repeat");
    } else {
        json_char(b, rx_utf8(r));
    }
}

/* n * m for lengths (hi < 0: unbounded), capped so that it cannot overflow */
static long len_mul(long a, long q) {
    if (a == 0 || q == 0) return 0;
    if (a < 0 || q < 0) return -1;
    return a > 100000000L / q ? -1 : a * q;
}
static long len_add(long a, long b) { return a < 0 || b < 0 || a + b > 100000000L ? -1 : a + b; }

static void rx_seq(rx *r, sbuf *b) {
    sb_str(b, "( ");
    long slo = 0, shi = 0;
    int idx = 0;
    while (r->p < r->end && *r->p != '|' && *r->p != ')' && !r->bad) {
        if (*r->p == '$' && r->p + 1 == r->end) break;
        sbuf atom = {0};
        rx_atom(r, &atom);
        if (r->bad) {
            free(atom.p);
            return;
        }
        long alo = r->lo, ahi = r->hi, qlo = 1, qhi = 1;
        if (r->p < r->end) {
            char q = *r->p;
            if (q == '*' || q == '+' || q == '?') {
                qlo = q == '+';
                qhi = q == '?' ? 1 : -1;
                r->p++;
            } else if (q == '{') {
                const char *st = r->p;
                while (r->p < r->end && *r->p != '}') r->p++;
                if (r->p >= r->end) return free(atom.p), rx_fail(r, "unterminated {m,n}");
                r->p++;
                char *e;
                long lo = strtol(st + 1, &e, 10), hi;
                if (e == st + 1) return free(atom.p), rx_fail(r, "bad {m,n}");
                if (*e == ',') {
                    const char *h = e + 1;
                    if (*h == '}') hi = -1;
                    else {
                        hi = strtol(h, &e, 10);
                        if (e == h || *e != '}' || hi < lo) return free(atom.p), rx_fail(r, "bad {m,n}");
                    }
                } else if (*e == '}') hi = lo;
                else return free(atom.p), rx_fail(r, "bad {m,n}");
                if (lo > MAX_LEN || hi > MAX_LEN) return free(atom.p), rx_fail(r, "repetition count over 4096");
                qlo = lo;
                qhi = hi;
                q = '}';
            }
            if (r->p < r->end && (*r->p == '?')) r->p++; /* lazy: the same language */
            else if (r->p < r->end && *r->p == '+' && (q == '*' || q == '+' || q == '?' || q == '}'))
                return free(atom.p), rx_fail(r, "possessive quantifiers are not supported");
        }
        if (r->depth == 0) { /* an element of the top-level sequence */
            if (idx < RX_MAX_TOP) r->top[idx] = (rx_elem){alo, ahi, qlo, qhi};
            if (r->ovr) {
                if (idx >= RX_MAX_TOP) return free(atom.p), rx_fail(r, "too many parts for minLength/maxLength");
                qlo = r->ovr_q[idx][0];
                qhi = r->ovr_q[idx][1];
            }
            idx++;
            r->n_top = idx;
        }
        if (qhi != 0) {
            sb_fmt(b, "( %s)", atom.p ? atom.p : "");
            if (qlo == 1 && qhi == 1)
                ;
            else if (qlo == 0 && qhi == 1) sb_str(b, "?");
            else if (qlo == 0 && qhi < 0) sb_str(b, "*");
            else if (qlo == 1 && qhi < 0) sb_str(b, "+");
            else if (qhi < 0) sb_fmt(b, "{%ld,}", qlo);
            else sb_fmt(b, "{%ld,%ld}", qlo, qhi);
            sb_str(b, " ");
        }
        free(atom.p);
        slo = len_add(slo, len_mul(alo, qlo));
        if (slo < 0) slo = 100000000L;
        shi = len_add(shi, qhi < 0 && ahi != 0 ? -1 : len_mul(ahi, qhi));
    }
    if (!r->bad) sb_str(b, ") ");
    r->lo = slo;
    r->hi = shi;
}

static void rx_alt(rx *r, sbuf *b) {
    rx_seq(r, b);
    long lo = r->lo, hi = r->hi;
    while (!r->bad && r->p < r->end && *r->p == '|') {
        if (r->depth == 0) r->top_alt = true;
        r->p++;
        sb_str(b, "| ");
        rx_seq(r, b);
        if (r->lo < lo) lo = r->lo;
        if (hi >= 0 && (r->hi < 0 || r->hi > hi)) hi = r->hi;
    }
    r->lo = lo;
    r->hi = hi;
}

/* One pass over the pattern: the GBNF of the string (quotes included) into
 * b; r keeps the lengths and the top-level elements. */
static void rx_pattern(rx *r, sbuf *b, const char *any, bool a0, bool *a1) {
    sb_str(b, "\"\\\"\" ");
    if (!a0) sb_fmt(b, "%s* ", any);
    sb_str(b, "( ");
    rx_alt(r, b);
    sb_str(b, ") ");
    *a1 = r->p < r->end && *r->p == '$';
    if (*a1) r->p++;
    if (!r->bad && r->p < r->end) rx_fail(r, *r->p == ')' ? "unbalanced ')'" : "unexpected character");
    if (!*a1) sb_fmt(b, "%s* ", any);
    sb_str(b, "\"\\\"\"");
}

/* The repetitions that keep every string of an anchored pattern within
 * minLength..maxLength (mx < 0: none): the repeated parts share the room
 * (the one with the most room gives up one repetition until the longest
 * string fits; a part of unbounded width keeps its fewest), and the
 * shortest string is lengthened by the parts that can repeat more. A subset
 * of the pattern's strings, all valid; false when none fits. */
static bool fit_lengths(rx *r, long mn, long mx) {
    int n = r->n_top;
    long cap[RX_MAX_TOP], low[RX_MAX_TOP];
    long total_hi = 0, total_lo = 0;
    for (int j = 0; j < n; j++) {
        const rx_elem *t = &r->top[j];
        low[j] = t->qlo;
        cap[j] = t->qhi;
        if (mx >= 0) {
            if (t->ahi < 0) cap[j] = t->qlo; /* unbounded width: its fewest repetitions */
            else if (t->ahi > 0 && (cap[j] < 0 || cap[j] > mx / t->ahi + 1)) cap[j] = mx / t->ahi + 1;
            else if (t->ahi == 0 && cap[j] < 0) cap[j] = t->qlo;
            if (cap[j] < low[j]) return false;
            long h = len_mul(t->ahi, cap[j]);
            if (h < 0) return false;
            total_hi += h;
        }
        total_lo = len_add(total_lo, len_mul(t->alo, low[j]));
        if (total_lo < 0) return false;
    }
    while (mx >= 0 && total_hi > mx) { /* the part with the most room gives one up */
        int best = -1;
        long room = 0;
        for (int j = 0; j < n; j++) {
            long rm = r->top[j].ahi * (cap[j] - low[j]);
            if (rm > room) best = j, room = rm;
        }
        if (best < 0) return false;
        cap[best]--;
        total_hi -= r->top[best].ahi;
    }
    while (total_lo < mn) { /* the part that can repeat most gives more */
        int best = -1;
        long room = 0;
        for (int j = 0; j < n; j++) {
            if (r->top[j].alo < 1) continue;
            long rm = cap[j] < 0 ? LONG_MAX : cap[j] - low[j];
            if (rm > room) best = j, room = rm;
        }
        if (best < 0) return false;
        long need = (mn - total_lo + r->top[best].alo - 1) / r->top[best].alo;
        if (cap[best] >= 0 && need > cap[best] - low[best]) need = cap[best] - low[best];
        low[best] += need;
        total_lo += need * r->top[best].alo;
    }
    for (int j = 0; j < n; j++) {
        r->ovr_q[j][0] = low[j];
        r->ovr_q[j][1] = cap[j];
    }
    return true;
}

/* A string matching pat, with mn <= length <= mx (code points; mx < 0: no
 * maximum). what names the keyword for errors ("pattern", "format"). */
static char *gen_pattern(sc *c, const char *pat, long mn, long mx, const char *what, const char *path) {
    rx *r = calloc(1, sizeof *r);
    if (!r) return c->st = rw_errorf(c->err, RW_ERR_NOMEM, "out of memory"), NULL;
    *r = (rx){.p = pat, .end = pat + strlen(pat), .start = pat, .c = c, .path = path};
    bool a0 = r->p < r->end && *r->p == '^', a1 = false;
    if (a0) r->p++;
    const char *body = r->p;
    sbuf b = {0};
    char *any = NULL, *rule = NULL;
    if (!a0 || !(r->end > r->start && r->end[-1] == '$' && (r->end - r->start < 2 || r->end[-2] != '\\'))) {
        any = prim(c, P_CHAR);
        if (!any) goto done;
    }
    rx_pattern(r, &b, any, a0, &a1);
    if (!r->bad && !c->st && (mn > 0 || mx >= 0)) {
        long lo = r->lo, hi = a0 && a1 ? r->hi : -1;
        bool within = lo >= mn && (mx < 0 || (hi >= 0 && hi <= mx));
        if (!within && (!a0 || !a1 || r->top_alt || r->n_top > RX_MAX_TOP || !fit_lengths(r, mn, mx))) {
            if ((hi >= 0 && hi < mn) || (mx >= 0 && lo > mx))
                rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path,
                                         "no string of this %s has a length within minLength/maxLength", what);
            else
                rw_grammar__schema_failf(
                    c, RW_ERR_UNSUPPORTED, path,
                    "%s with minLength/maxLength: supported when the %s is anchored (^...$), has no top-level '|', "
                    "and one repeated part of fixed width can take the length limits",
                    what, what);
        } else if (!within) { /* again, with the repetitions that fit */
            r->p = body;
            r->ovr = true;
            r->n_top = 0;
            r->depth = 0;
            free(b.p);
            b = (sbuf){0};
            rx_pattern(r, &b, any, a0, &a1);
        }
    }
    if (!r->bad && !c->st) {
        rule = new_rule_name(c);
        if (rule) define(c, rule, b.p);
    }
done:
    free(b.p);
    free(any);
    free(r);
    return rule;
}

/* A calendar date (RFC 3339 full-date): each month's own number of days,
 * February 29 in leap years only (divisible by 4, centuries by 400), as
 * validators check it (ajv-formats' full mode, Python's date). */
#define DATE_31   "(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
#define DATE_30   "(0[469]|11)-(0[1-9]|[12][0-9]|30)"
#define DATE_LEAP "([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)"
#define DATE_RX   "([0-9]{4}-(" DATE_31 "|" DATE_30 "|02-(0[1-9]|1[0-9]|2[0-8]))|" DATE_LEAP "-02-29)"

/* String formats as patterns of the subset above (a subset of what each
 * format allows: validators accept every string they give). */
static const char *const formats[][2] = {
    {"date", "^" DATE_RX "$"},
    {"time", "^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"},
    {"date-time", "^" DATE_RX "T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
                  "(\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"},
    {"uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
    /* a dot-atom local part, a domain of labels (letters and digits) and a
     * top-level label of letters */
    {"email", "^[A-Za-z0-9_%+-]+(\\.[A-Za-z0-9_%+-]+)*@[A-Za-z0-9]{1,63}(\\.[A-Za-z0-9]{1,63})*\\.[A-Za-z]{2,24}$"},
    /* scheme://host[:port] then path, query, fragment (no % escapes) */
    {"uri", "^[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9._~-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~!$&'()*+,;=:@-]*)*"
            "(\\?[A-Za-z0-9._~!$&'()*+,;=:@/?-]*)?(#[A-Za-z0-9._~!$&'()*+,;=:@/?-]*)?$"},
};

static char *gen_string(sc *c, json_t *s, const char *path) {
    json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
    json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
    if ((mn && (!json_is_integer(mn) || json_integer_value(mn) < 0)) ||
        (mx && (!json_is_integer(mx) || json_integer_value(mx) < 0)))
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path,
                                        "minLength/maxLength must be non-negative integers");
    long lo = mn ? (long)json_integer_value(mn) : 0, hi = mx ? (long)json_integer_value(mx) : -1;
    if (lo > MAX_LEN || hi > MAX_LEN)
        return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "minLength/maxLength over %d", MAX_LEN);
    if (mx && hi < lo) return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "maxLength below minLength");
    const char *f = json_is_string(fmt) ? json_string_value(fmt) : NULL, *fpat = NULL;
    for (size_t i = 0; f && i < sizeof formats / sizeof *formats; i++)
        if (!strcmp(f, formats[i][0])) fpat = formats[i][1];
    if (pat) {
        if (!json_is_string(pat))
            return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "pattern must be a string");
        if (fpat)
            return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path,
                                            "pattern together with format '%s' is not supported", f);
        return gen_pattern(c, json_string_value(pat), lo, hi, "pattern", path);
    }
    if (fpat) return gen_pattern(c, fpat, lo, hi, "format", path);
    json_t *ns = json_object_get(s, NOT_STRINGS);
    if (ns) { /* a string but none of these (not of a const/enum): keys' characters, no escapes */
        if (mn || mx)
            return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "not (a const/enum) with minLength/maxLength");
        const char *names[256];
        int n = 0;
        size_t i;
        json_t *x;
        json_array_foreach(ns, i, x) if (n < 256 && json_is_string(x)) names[n++] = json_string_value(x);
        if (json_array_size(ns) > 256)
            return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "not of more than 256 strings");
        return gen_other_key(c, names, n);
    }
    if (!mn && !mx) return prim(c, P_STRING);
    char *ch = prim(c, P_CHAR), *r = ch ? new_rule_name(c) : NULL;
    if (r) {
        sbuf b = {0};
        if (mx) sb_fmt(&b, "\"\\\"\" %s{%d,%d} \"\\\"\"", ch, (int)lo, (int)hi);
        else sb_fmt(&b, "\"\\\"\" %s{%d,} \"\\\"\"", ch, (int)lo);
        define(c, r, b.p);
        free(b.p);
    }
    free(ch);
    return r;
}

/* ---- arrays ---- */

static char *gen_array(sc *c, json_t *s, const char *path) {
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    json_t *mn = json_object_get(s, "minItems"), *mx = json_object_get(s, "maxItems");
    json_t *uq = json_object_get(s, "uniqueItems");
    if (uq && !json_is_false(uq))
        return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "uniqueItems is not supported");
    if (json_object_get(s, "contains"))
        return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "contains is not supported");
    if ((mn && (!json_is_integer(mn) || json_integer_value(mn) < 0)) ||
        (mx && (!json_is_integer(mx) || json_integer_value(mx) < 0)))
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "minItems/maxItems must be non-negative integers");
    long lo = mn ? (long)json_integer_value(mn) : 0, hi = mx ? (long)json_integer_value(mx) : -1;
    if (lo > MAX_LEN || hi > MAX_LEN)
        return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "minItems/maxItems over %d", MAX_LEN);
    if (mx && hi < lo) return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "maxItems below minItems");
    char *ws = prim(c, P_WS);
    if (!ws) return NULL;
    sbuf b = {0};
    char sub[512];
    sb_fmt(&b, "\"[\" %s ", ws);
    long np = 0;
    if (prefix) {
        if (!json_is_array(prefix)) {
            free(ws);
            free(b.p);
            return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "prefixItems must be an array");
        }
        np = (long)json_array_size(prefix);
        if (mx && hi < np) {
            free(ws);
            free(b.p);
            return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "maxItems below the number of prefixItems");
        }
        for (long i = 0; i < np && !c->st; i++) {
            snprintf(sub, sizeof sub, "%s/prefixItems/%ld", path, i);
            char *it = gen(c, json_array_get(prefix, (size_t)i), sub);
            if (it && i) sb_fmt(&b, "\",\" %s %s %s ", ws, it, ws);
            else if (it) sb_fmt(&b, "%s %s ", it, ws);
            free(it);
        }
    }
    char *it = NULL;
    bool more = !(items && json_is_false(items));
    if (more && !c->st) {
        snprintf(sub, sizeof sub, "%s/items", path);
        it = items ? gen(c, items, sub) : prim(c, P_VALUE);
    }
    if (!c->st && more && it) {
        long rlo = lo > np ? lo - np : 0, rhi = hi < 0 ? -1 : hi - np;
        if (np > 0) { /* each further item comes after a comma */
            if (rhi < 0) sb_fmt(&b, "( \",\" %s %s %s ){%ld,} ", ws, it, ws, rlo);
            else if (rhi > 0) sb_fmt(&b, "( \",\" %s %s %s ){%ld,%ld} ", ws, it, ws, rlo, rhi);
        } else if (rhi != 0) {
            const char *open = rlo == 0 ? "( " : "";
            sb_fmt(&b, "%s%s %s ", open, it, ws);
            long tlo = rlo > 0 ? rlo - 1 : 0;
            if (rhi < 0) sb_fmt(&b, "( \",\" %s %s %s ){%ld,} ", ws, it, ws, tlo);
            else if (rhi > 1) sb_fmt(&b, "( \",\" %s %s %s ){%ld,%ld} ", ws, it, ws, tlo, rhi - 1);
            if (rlo == 0) sb_str(&b, ")? ");
        }
    }
    sb_str(&b, "\"]\"");
    char *r = NULL;
    if (!c->st) {
        r = new_rule_name(c);
        if (r) define(c, r, b.p);
    }
    free(b.p);
    free(it);
    free(ws);
    return r;
}

/* ---- objects ---- */

/* a rule for keys other than names[0..n) (unescaped characters only) */
static char *gen_other_key(sc *c, const char **names, int n) {
    char *kc = prim(c, P_KCHAR);
    if (!kc) return NULL;
    char *top = new_rule_name(c);
    /* one rule per trie node of the names: node = a prefix shared by some names */
    typedef struct {
        const char *pre;
        size_t len;
        char *rule;
    } knode;
    knode *nodes = calloc((size_t)(64 + 1), sizeof *nodes);
    int nn = 0, cap = 64;
    if (!top || !nodes) {
        free(kc);
        free(top);
        free(nodes);
        c->st = rw_errorf(c->err, RW_ERR_NOMEM, "out of memory");
        return NULL;
    }
    nodes[nn++] = (knode){"", 0, new_rule_name(c)};
    for (int i = 0; i < nn && !c->st; i++) {
        knode nd = nodes[i];
        sbuf b = {0};
        /* children: the distinct next code points (bytes here: names are UTF-8, a byte step is fine for ASCII names) */
        unsigned char seen[256] = {0};
        bool is_name = false;
        for (int k = 0; k < n; k++) {
            size_t l = strlen(names[k]);
            if (l < nd.len || memcmp(names[k], nd.pre, nd.len)) continue;
            if (l == nd.len) {
                is_name = true;
                continue;
            }
            seen[(unsigned char)names[k][nd.len]] = 1;
        }
        /* a byte that no name continues with: anything after it */
        sb_str(&b, "[^\"\\\\\\x00-\\x1F");
        for (int ch = 0; ch < 128; ch++)
            if (seen[ch] && ch >= 0x20 && ch != '"' && ch != '\\') {
                if (ch == ']' || ch == '-' || ch == '^') sb_fmt(&b, "\\%c", ch);
                else sb_fmt(&b, "%c", ch);
            }
        bool nonascii = false;
        for (int ch = 128; ch < 256; ch++) nonascii |= seen[ch];
        if (nonascii) sb_str(&b, "\\x80-\\U0010FFFF"); /* names with non-ASCII: such keys are never extra */
        sb_fmt(&b, "] %s*", kc);
        for (int ch = 0x20; ch < 128; ch++) {
            if (!seen[ch] || ch == '"' || ch == '\\') continue;
            if (nn == cap) {
                cap *= 2;
                knode *p = realloc(nodes, (size_t)cap * sizeof *p);
                if (!p) {
                    c->st = rw_errorf(c->err, RW_ERR_NOMEM, "out of memory");
                    break;
                }
                nodes = p;
            }
            /* the prefix of the first name that continues with ch */
            const char *pre = NULL;
            for (int k = 0; k < n && !pre; k++)
                if (strlen(names[k]) > nd.len && !memcmp(names[k], nd.pre, nd.len) &&
                    (unsigned char)names[k][nd.len] == ch)
                    pre = names[k];
            nodes[nn] = (knode){pre, nd.len + 1, new_rule_name(c)};
            char one[2] = {(char)ch, 0};
            sb_str(&b, " | ");
            lit(&b, one, 1);
            sb_fmt(&b, " %s", nodes[nn].rule);
            nn++;
        }
        if (!is_name) sb_str(&b, " | \"\"");
        if (nd.rule) define(c, nd.rule, b.p);
        free(b.p);
    }
    if (!c->st) {
        sbuf b = {0};
        sb_fmt(&b, "\"\\\"\" %s \"\\\"\"", nodes[0].rule);
        define(c, top, b.p);
        free(b.p);
    }
    for (int i = 0; i < nn; i++) free(nodes[i].rule);
    free(nodes);
    free(kc);
    return top;
}

static char *gen_object(sc *c, json_t *s, const char *path) {
    static const char *const unsupported[] = {"patternProperties", "propertyNames", "dependentRequired",
                                              "dependentSchemas",  "dependencies",  "unevaluatedProperties"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (json_object_get(s, unsupported[i]))
            return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "%s is not supported", unsupported[i]);
    json_t *mnj = json_object_get(s, "minProperties"), *mxj = json_object_get(s, "maxProperties");
    if ((mnj && (!json_is_integer(mnj) || json_integer_value(mnj) < 0)) ||
        (mxj && (!json_is_integer(mxj) || json_integer_value(mxj) < 0)))
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path,
                                        "minProperties/maxProperties must be non-negative integers");
    long mnp = mnj ? (long)json_integer_value(mnj) : 0, mxp = mxj ? (long)json_integer_value(mxj) : -1;
    if (mnp > MAX_LEN || mxp > MAX_LEN)
        return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "minProperties/maxProperties over %d", MAX_LEN);
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "properties must be an object");
    if (req && !json_is_array(req))
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "required must be an array");
    /* the named properties: properties in order, then required names without a schema */
    size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0;
    const char **names = calloc(np + nr + 1, sizeof *names);
    json_t **schemas = calloc(np + nr + 1, sizeof *schemas);
    bool *required = calloc(np + nr + 1, sizeof *required);
    char **kv = calloc(np + nr + 1, sizeof *kv);
    char *ws = prim(c, P_WS);
    size_t n = 0;
    if (!names || !schemas || !required || !kv || !ws) {
        if (!c->st) c->st = rw_errorf(c->err, RW_ERR_NOMEM, "out of memory");
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(props, key, val) {
        names[n] = key;
        schemas[n++] = val;
    }
    for (size_t i = 0; i < nr; i++) {
        json_t *r = json_array_get(req, i);
        if (!json_is_string(r)) {
            rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "required must list strings");
            goto out;
        }
        size_t k = 0;
        while (k < n && strcmp(names[k], json_string_value(r))) k++;
        if (k == n) { /* required without a schema: what additionalProperties allows */
            if (json_is_false(addl)) {
                rw_grammar__schema_failf(
                    c, RW_ERR_INVALID_ARG, path,
                    "required '%s' has no schema in properties and additionalProperties is false: nothing matches",
                    json_string_value(r));
                goto out;
            }
            names[n] = json_string_value(r);
            schemas[n++] = addl && !json_is_true(addl) ? addl : NULL; /* NULL: any value */
        }
        required[k] = true;
    }
    /* kv_i ::= "key" ws ":" ws value ws */
    for (size_t i = 0; i < n && !c->st; i++) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s/properties/%s", path, names[i]);
        if (json_is_false(schemas[i])) { /* the key may not appear */
            if (required[i])
                rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, sub, "a required property with the schema false");
            continue;
        }
        char *v = schemas[i] ? gen(c, schemas[i], sub) : prim(c, P_VALUE);
        kv[i] = v ? new_rule_name(c) : NULL;
        if (kv[i]) {
            sbuf b = {0};
            json_t *k = json_string(names[i]);
            if (k) lit_json(c, &b, k);
            json_decref(k);
            sb_fmt(&b, " %s \":\" %s %s %s", ws, ws, v, ws);
            define(c, kv[i], b.p);
            free(b.p);
        }
        free(v);
    }
    if (c->st) goto out;
    /* additional properties: allowed when the schema says true or gives a schema,
     * and when it lists no properties at all ({"type": "object"}: any object) */
    char *extra = NULL;
    bool more = addl ? !json_is_false(addl) : n == 0;
    if (more) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s/additionalProperties", path);
        char *v = addl && !json_is_true(addl) ? gen(c, addl, sub) : prim(c, P_VALUE);
        char *k = v ? (n ? gen_other_key(c, names, (int)n) : prim(c, P_STRING)) : NULL;
        extra = k ? new_rule_name(c) : NULL;
        if (extra) {
            sbuf b = {0};
            sb_fmt(&b, "%s %s \":\" %s %s %s", k, ws, ws, v, ws);
            define(c, extra, b.p);
            free(b.p);
        }
        free(v);
        free(k);
        if (c->st) goto out;
    }
    /* chains G(i, k): at property i with k written (k saturates at S, so
     * that without min/maxProperties only "none yet" and "some" are told
     * apart, commas first in the latter); viable(i, k): the chain can end
     * within the bounds from there */
    size_t S = 1, K = mxp >= 0 && (size_t)mxp > (size_t)mnp ? (size_t)mxp : (size_t)mnp;
    if (K > S) S = K < n ? K : n;
    if (S < 1) S = 1;
    size_t W = S + 1;
    char **G = calloc((n + 1) * W, sizeof *G);
    bool *viable = calloc((n + 1) * W, sizeof *viable);
    if (!G || !viable) {
        free(G);
        free(viable);
        free(extra);
        c->st = rw_errorf(c->err, RW_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = n + 1; i-- > 0;)
        for (size_t k = 0; k <= S && k <= i; k++) {
            bool v = false;
            if (i == n) {
                long lo = mnp > (long)k ? mnp - (long)k : 0, hi = !extra ? 0 : mxp >= 0 ? mxp - (long)k : LONG_MAX;
                v = lo <= hi;
            } else {
                size_t k1 = k + 1 < S ? k + 1 : S;
                if (kv[i] && (mxp < 0 || (long)k < mxp) && viable[(i + 1) * W + k1]) v = true;
                if (!required[i] && viable[(i + 1) * W + k]) v = true;
            }
            viable[i * W + k] = v;
            if (v) G[i * W + k] = new_rule_name(c);
        }
    if (!viable[0]) {
        rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path,
                                 "no object satisfies minProperties/maxProperties with these properties");
    }
    for (size_t i = 0; i <= n && !c->st; i++)
        for (size_t k = 0; k <= S && k <= i && !c->st; k++) {
            if (!G[i * W + k]) continue;
            sbuf f = {0};
            const char *comma = k ? "\",\" " : "";
            if (i == n) {
                long lo = mnp > (long)k ? mnp - (long)k : 0, hi = !extra ? 0 : mxp >= 0 ? mxp - (long)k : -1;
                if (!extra || hi == 0) sb_str(&f, "\"\"");
                else if (k) {
                    if (hi < 0) sb_fmt(&f, "( \",\" %s %s ){%ld,}", ws, extra, lo);
                    else sb_fmt(&f, "( \",\" %s %s ){%ld,%ld}", ws, extra, lo, hi);
                } else {
                    sb_fmt(&f, "%s%s ", lo ? "" : "( ", extra);
                    long tlo = lo > 0 ? lo - 1 : 0;
                    if (hi < 0) sb_fmt(&f, "( \",\" %s %s ){%ld,}", ws, extra, tlo);
                    else if (hi > 1) sb_fmt(&f, "( \",\" %s %s ){%ld,%ld}", ws, extra, tlo, hi - 1);
                    if (!lo) sb_str(&f, " )?");
                }
            } else {
                size_t k1 = k + 1 < S ? k + 1 : S;
                bool alt = false;
                if (kv[i] && (mxp < 0 || (long)k < mxp) && G[(i + 1) * W + k1]) {
                    sb_fmt(&f, "%s%s%s%s %s", comma, k ? ws : "", k ? " " : "", kv[i], G[(i + 1) * W + k1]);
                    alt = true;
                }
                if (!required[i] && G[(i + 1) * W + k]) sb_fmt(&f, "%s%s", alt ? " | " : "", G[(i + 1) * W + k]);
            }
            if (!f.oom) define(c, G[i * W + k], f.p);
            free(f.p);
        }
    char *r = NULL;
    if (!c->st) {
        r = new_rule_name(c);
        if (r) {
            sbuf b = {0};
            sb_fmt(&b, "\"{\" %s %s \"}\"", ws, G[0]);
            define(c, r, b.p);
            free(b.p);
        }
    }
    for (size_t i = 0; i < (n + 1) * W; i++) free(G[i]);
    free(G);
    free(viable);
    free(extra);
    for (size_t i = 0; i < n; i++) free(kv[i]);
    free(names);
    free(schemas);
    free(required);
    free(kv);
    free(ws);
    return r;
out:
    for (size_t i = 0; kv && i < n; i++) free(kv[i]);
    free(names);
    free(schemas);
    free(required);
    free(kv);
    free(ws);
    return NULL;
}

/* ---- references ---- */

static char *gen_ref(sc *c, const char *ref, const char *path) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ptr, ref)) return strdup(c->refs[i].rule);
    json_t *t = rw_grammar__schema_resolve(c, ref, path);
    if (!t) return NULL;
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 8;
        sref *r = realloc(c->refs, (size_t)cap * sizeof *r);
        if (!r) {
            c->st = rw_errorf(c->err, RW_ERR_NOMEM, "out of memory");
            return NULL;
        }
        c->refs = r;
        c->cap_refs = cap;
    }
    char *name = new_rule_name(c);
    char *p = strdup(ref);
    if (!name || !p) {
        free(name);
        free(p);
        c->st = rw_errorf(c->err, RW_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->refs[c->n_refs++] = (sref){p, name};
    char *body = gen(c, t, ref + 1);
    if (body) define(c, name, body);
    free(body);
    return c->st ? NULL : strdup(name);
}

/* ---- any schema ---- */

static char *gen_type(sc *c, json_t *s, const char *type, const char *path) {
    if (!strcmp(type, "object")) return gen_object(c, s, path);
    if (!strcmp(type, "array")) return gen_array(c, s, path);
    if (!strcmp(type, "string")) return gen_string(c, s, path);
    if (!strcmp(type, "integer")) return gen_integer(c, s, path);
    if (!strcmp(type, "number")) return gen_number(c, s, path);
    if (!strcmp(type, "boolean")) return prim(c, P_BOOLEAN);
    if (!strcmp(type, "null")) return prim(c, P_NULL);
    return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "unknown type '%s'", type);
}

/* alternatives of the sub-schemas in arr ("anyOf"/"oneOf") or of types */
static char *gen_alts(sc *c, json_t *s, json_t *arr, const char *kw, const char *path) {
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "%s must be a non-empty array", kw);
    sbuf b = {0};
    for (size_t i = 0; i < json_array_size(arr) && !c->st; i++) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s/%s/%zu", path, kw, i);
        json_t *e = json_array_get(arr, i);
        char *r;
        if (!strcmp(kw, "type")) {
            if (!json_is_string(e))
                return free(b.p), rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "type must be a string");
            r = gen_type(c, s, json_string_value(e), path);
        } else r = gen(c, e, sub);
        if (r) sb_fmt(&b, "%s%s", i ? " | " : "", r);
        free(r);
    }
    char *r = NULL;
    if (!c->st) {
        r = new_rule_name(c);
        if (r) define(c, r, b.p);
    }
    free(b.p);
    return r;
}

static char *gen_schema(sc *c, json_t *s, const char *path);

/* Every subschema and $ref goes through here: the nesting is bounded. */
static char *gen(sc *c, json_t *s, const char *path) {
    if (c->st) return NULL;
    if (c->depth >= RW_GRAMMAR_MAX_NESTING)
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "subschemas nested deeper than %d",
                                        RW_GRAMMAR_MAX_NESTING);
    c->depth++;
    char *r = gen_schema(c, s, path);
    c->depth--;
    return r;
}

static char *gen_schema(sc *c, json_t *s, const char *path) {
    if (json_is_true(s)) return prim(c, P_VALUE);
    if (json_is_false(s))
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "the schema false matches nothing");
    if (!json_is_object(s))
        return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "a schema must be an object or a boolean");
    static const char *const unsupported[] = {"$dynamicRef", "$recursiveRef"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (json_object_get(s, unsupported[i]))
            return rw_grammar__schema_failf(c, RW_ERR_UNSUPPORTED, path, "%s is not supported", unsupported[i]);
    json_t *all = json_object_get(s, "allOf");
    if (json_object_get(s, "not") || json_object_get(s, "if") ||
        (all && (json_array_size(all) != 1 || json_object_size(s) > 1))) {
        json_t *m = rw_grammar__schema_combine(c, s, path);
        if (!m) return NULL;
        char *r = gen(c, m, path);
        json_decref(m);
        return r;
    }
    json_t *v;
    if ((v = json_object_get(s, "$ref"))) {
        if (!json_is_string(v)) return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "$ref must be a string");
        return gen_ref(c, json_string_value(v), path);
    }
    if ((v = json_object_get(s, "const"))) {
        sbuf b = {0};
        lit_json(c, &b, v);
        char *r = c->st ? NULL : new_rule_name(c);
        if (r) define(c, r, b.p);
        free(b.p);
        return r;
    }
    if ((v = json_object_get(s, "enum"))) {
        if (!json_is_array(v) || json_array_size(v) == 0)
            return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "enum must be a non-empty array");
        sbuf b = {0};
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) sb_str(&b, " | ");
            lit_json(c, &b, json_array_get(v, i));
        }
        char *r = c->st ? NULL : new_rule_name(c);
        if (r) define(c, r, b.p);
        free(b.p);
        return r;
    }
    if ((v = json_object_get(s, "anyOf"))) return gen_alts(c, s, v, "anyOf", path);
    if ((v = json_object_get(s, "oneOf"))) return gen_alts(c, s, v, "oneOf", path);
    if ((v = json_object_get(s, "allOf"))) {
        if (!json_is_array(v) || json_array_size(v) != 1)
            return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "allOf must be a non-empty array");
        char sub[512];
        snprintf(sub, sizeof sub, "%s/allOf/0", path);
        return gen(c, json_array_get(v, 0), sub);
    }
    json_t *t = json_object_get(s, "type");
    if (json_is_string(t)) return gen_type(c, s, json_string_value(t), path);
    if (json_is_array(t)) return gen_alts(c, s, t, "type", path);
    if (t) return rw_grammar__schema_failf(c, RW_ERR_INVALID_ARG, path, "type must be a string or an array of strings");
    /* no type: guess from the keywords, else any value */
    if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties") ||
        json_object_get(s, "required"))
        return gen_object(c, s, path);
    if (json_object_get(s, "items") || json_object_get(s, "prefixItems")) return gen_array(c, s, path);
    if (json_object_get(s, "pattern") || json_object_get(s, "minLength") || json_object_get(s, "maxLength") ||
        json_object_get(s, "format"))
        return gen_string(c, s, path);
    return prim(c, P_VALUE);
}

/* ---- the shared rules ---- */

static void write_prims(sc *c) {
    /* what each needs */
    if (c->used[P_VALUE])
        c->used[P_OBJECT] = c->used[P_ARRAY] = c->used[P_STRING] = c->used[P_NUMBER] = c->used[P_BOOLEAN] =
            c->used[P_NULL] = true;
    if (c->used[P_OBJECT] || c->used[P_ARRAY]) c->used[P_VALUE] = c->used[P_WS] = c->used[P_STRING] = true;
    if (c->used[P_VALUE])
        c->used[P_OBJECT] = c->used[P_ARRAY] = c->used[P_NUMBER] = c->used[P_BOOLEAN] = c->used[P_NULL] = true;
    if (c->used[P_STRING]) c->used[P_CHAR] = true;
    const char *n = c->name;
    sbuf *o = &c->out;
    if (c->used[P_WS]) {
        if (c->max_ws == 0) sb_fmt(o, "%s-ws ::= \"\" | \" \" | \"\\n\" [ \\t]{0,20}\n", n);
        else if (c->max_ws < 0) sb_fmt(o, "%s-ws ::= \"\"\n", n);
        else sb_fmt(o, "%s-ws ::= [ \\t\\n]{0,%d}\n", n, c->max_ws);
    }
    if (c->used[P_VALUE])
        sb_fmt(o, "%s-value ::= %s-object | %s-array | %s-string | %s-number | %s-boolean | %s-null\n", n, n, n, n, n,
               n, n);
    if (c->used[P_OBJECT])
        sb_fmt(o,
               "%s-object ::= \"{\" %s-ws ( %s-string %s-ws \":\" %s-ws %s-value %s-ws ( \",\" %s-ws %s-string %s-ws "
               "\":\" %s-ws %s-value %s-ws )* )? \"}\"\n",
               n, n, n, n, n, n, n, n, n, n, n, n, n);
    if (c->used[P_ARRAY])
        sb_fmt(o, "%s-array ::= \"[\" %s-ws ( %s-value %s-ws ( \",\" %s-ws %s-value %s-ws )* )? \"]\"\n", n, n, n, n, n,
               n, n);
    if (c->used[P_STRING]) sb_fmt(o, "%s-string ::= \"\\\"\" %s-char* \"\\\"\"\n", n, n);
    if (c->used[P_CHAR]) /* \u escapes: no surrogates (a lone one is not valid JSON text for strict parsers) */
        sb_fmt(o,
               "%s-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] "
               "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )\n",
               n);
    if (c->used[P_KCHAR]) sb_fmt(o, "%s-kchar ::= [^\"\\\\\\x00-\\x1F]\n", n);
    if (c->used[P_NUMBER])
        sb_fmt(o,
               "%s-number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} "
               ")?\n",
               n);
    if (c->used[P_INTEGER]) sb_fmt(o, "%s-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n", n);
    if (c->used[P_BOOLEAN]) sb_fmt(o, "%s-boolean ::= \"true\" | \"false\"\n", n);
    if (c->used[P_NULL]) sb_fmt(o, "%s-null ::= \"null\"\n", n);
}

static rw_status check_name(const char *name, rw_error *err) {
    if (!*name) return rw_errorf(err, RW_ERR_INVALID_ARG, "schema: empty rule name");
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return rw_errorf(err, RW_ERR_INVALID_ARG, "schema: rule name '%s' must be [a-zA-Z0-9-]+", name);
    return RW_OK;
}

static rw_status finish(sc *c, const char *top, char **gbnf) {
    if (!c->st) {
        write_prims(c);
        if (strcmp(top, c->name)) {
            sbuf head = {0};
            sb_fmt(&head, "%s ::= %s\n", c->name, top);
            sb_str(&head, c->out.p ? c->out.p : "");
            free(c->out.p);
            c->out = head;
        }
        if (c->out.oom) c->st = rw_errorf(c->err, RW_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < c->n_refs; i++) {
        free(c->refs[i].ptr);
        free(c->refs[i].rule);
    }
    free(c->refs);
    if (c->st) {
        free(c->out.p);
        return c->st;
    }
    *gbnf = c->out.p;
    return RW_OK;
}

rw_status rw_grammar_schema_to_gbnf(const char *schema, size_t len, const rw_schema_opts *opts, char **gbnf,
                                    rw_error *err) {
    *gbnf = NULL;
    sc c = {.name = opts && opts->name ? opts->name : "root", .max_ws = opts ? opts->max_ws : 0, .err = err};
    rw_status st = check_name(c.name, err);
    if (st) return st;
    json_error_t je;
    c.doc = json_loadb(schema, len, JSON_DECODE_ANY, &je);
    if (!c.doc)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "schema: not JSON (line %d col %d: %s)", je.line, je.column, je.text);
    char *top = gen(&c, c.doc, "");
    st = finish(&c, top ? top : "", gbnf);
    free(top);
    json_decref(c.doc);
    return st;
}

rw_status rw_grammar_json_object_gbnf(const rw_schema_opts *opts, char **gbnf, rw_error *err) {
    static const char obj[] = "{\"type\":\"object\"}";
    return rw_grammar_schema_to_gbnf(obj, sizeof obj - 1, opts, gbnf, err);
}

rw_status rw_grammar_gbnf_literal(const char *s, size_t n, char **out, rw_error *err) {
    sbuf b = {0};
    lit(&b, s, n);
    if (b.oom) {
        free(b.p);
        *out = NULL;
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    *out = b.p;
    return RW_OK;
}

rw_status rw_grammar_compile_schema(const char *schema, size_t len, rw_grammar **out, rw_error *err) {
    *out = NULL;
    char *gbnf = NULL;
    rw_status st = rw_grammar_schema_to_gbnf(schema, len, NULL, &gbnf, err);
    if (st) return st;
    st = rw_grammar_compile(gbnf, strlen(gbnf), NULL, out, err);
    if (st) rw_error_prefix(err, "schema compiled to a grammar that failed");
    free(gbnf);
    return st;
}
