/* builtins.c - what templates can call: filters, tests, string/dict methods
 * and the globals transformers provides (raise_exception, strftime_now,
 * namespace, range). Mutating methods (append, update, pop...) are refused,
 * as the immutable sandbox does. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat_int.h"

enum {
    F_RAISE, F_STRFTIME, F_NAMESPACE, F_RANGE, F_DICT,
    /* string methods */
    M_SPLIT, M_STRIP, M_LSTRIP, M_RSTRIP, M_STARTSWITH, M_ENDSWITH, M_REPLACE, M_UPPER, M_LOWER, M_TITLE,
    M_CAPITALIZE, M_FIND, M_COUNT, M_JOIN, M_ISDIGIT, M_ISSPACE, M_ISALPHA, M_ISALNUM, M_ISLOWER, M_ISUPPER, M_RFIND,
    M_LJUST, M_RJUST, M_CENTER, M_SPLITLINES,
    /* dict methods */
    M_ITEMS, M_KEYS, M_VALUES, M_GET,
    M_MUTATING
};

static const struct {
    const char *name;
    int id;
} globals[] = {{"raise_exception", F_RAISE}, {"strftime_now", F_STRFTIME}, {"namespace", F_NAMESPACE},
               {"range", F_RANGE}, {"dict", F_DICT}};

bool rw_chat__global(const char *name, value *out) {
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (!strcmp(globals[i].name, name)) {
            *out = (value){.t = V_FUNC};
            out->fn.id = globals[i].id;
            out->fn.self = NULL;
            return true;
        }
    *out = rw_chat__v_undef();
    return false;
}

bool rw_chat__method(render *r, value self, const char *name, value *out) {
    static const struct {
        vtype t;
        const char *name;
        int id;
    } methods[] = {
        {V_STR, "split", M_SPLIT}, {V_STR, "strip", M_STRIP}, {V_STR, "lstrip", M_LSTRIP}, {V_STR, "rstrip", M_RSTRIP},
        {V_STR, "startswith", M_STARTSWITH}, {V_STR, "endswith", M_ENDSWITH}, {V_STR, "replace", M_REPLACE},
        {V_STR, "upper", M_UPPER}, {V_STR, "lower", M_LOWER}, {V_STR, "title", M_TITLE},
        {V_STR, "capitalize", M_CAPITALIZE}, {V_STR, "find", M_FIND}, {V_STR, "count", M_COUNT},
        {V_STR, "join", M_JOIN}, {V_STR, "isdigit", M_ISDIGIT}, {V_STR, "isspace", M_ISSPACE},
        {V_STR, "isalpha", M_ISALPHA}, {V_STR, "isalnum", M_ISALNUM}, {V_STR, "islower", M_ISLOWER},
        {V_STR, "isupper", M_ISUPPER}, {V_STR, "rfind", M_RFIND}, {V_STR, "ljust", M_LJUST}, {V_STR, "rjust", M_RJUST},
        {V_STR, "center", M_CENTER}, {V_STR, "splitlines", M_SPLITLINES}, {V_STR, "casefold", M_LOWER},
        {V_DICT, "items", M_ITEMS}, {V_DICT, "keys", M_KEYS}, {V_DICT, "values", M_VALUES}, {V_DICT, "get", M_GET},
        {V_LIST, "append", M_MUTATING}, {V_LIST, "pop", M_MUTATING}, {V_LIST, "extend", M_MUTATING},
        {V_LIST, "insert", M_MUTATING}, {V_LIST, "remove", M_MUTATING}, {V_LIST, "sort", M_MUTATING},
        {V_LIST, "reverse", M_MUTATING}, {V_LIST, "clear", M_MUTATING}, {V_DICT, "update", M_MUTATING},
        {V_DICT, "pop", M_MUTATING}, {V_DICT, "setdefault", M_MUTATING}, {V_DICT, "clear", M_MUTATING},
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].t == self.t && !strcmp(methods[i].name, name)) {
            value *s = rw_chat__r_alloc(r, sizeof *s);
            if (!s) return false;
            *s = self;
            *out = (value){.t = V_FUNC};
            out->fn.id = methods[i].id;
            out->fn.self = s;
            return true;
        }
    return false;
}

/* ---- helpers ---- */

static bool is_space_at(const char *s, size_t n, size_t i, size_t *len) {
    unsigned char c = (unsigned char)s[i];
    *len = 1;
    if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) return true;
    /* Python's str.isspace beyond ASCII: U+0085, U+00A0, U+1680, U+2000-200A, U+2028/9, U+202F, U+205F, U+3000 */
    if (c == 0xc2 && i + 1 < n && ((unsigned char)s[i + 1] == 0x85 || (unsigned char)s[i + 1] == 0xa0)) { *len = 2; return true; }
    if (i + 2 < n) {
        unsigned char b = (unsigned char)s[i + 1], d = (unsigned char)s[i + 2];
        *len = 3;
        if (c == 0xe1 && b == 0x9a && d == 0x80) return true;
        if (c == 0xe2 && b == 0x80 && ((d >= 0x80 && d <= 0x8a) || d == 0xa8 || d == 0xa9 || d == 0xaf)) return true;
        if (c == 0xe2 && b == 0x81 && d == 0x9f) return true;
        if (c == 0xe3 && b == 0x80 && d == 0x80) return true;
    }
    *len = 1;
    return false;
}

/* Code point length of the UTF-8 sequence starting at s[i]. */
static size_t cp_len(const char *s, size_t n, size_t i) {
    size_t j = i + 1;
    while (j < n && ((unsigned char)s[j] & 0xc0) == 0x80) j++;
    return j - i;
}

static bool in_set(const char *set, size_t set_n, const char *s, size_t len) {
    for (size_t k = 0; k < set_n;) {
        size_t l = cp_len(set, set_n, k);
        if (l == len && !memcmp(set + k, s, len)) return true;
        k += l;
    }
    return false;
}

/* Python strip/lstrip/rstrip: whitespace, or the characters of chars. */
static value strip(value s, const value *chars, bool left, bool right) {
    size_t a = 0, b = s.str.n;
    bool ws = !chars || chars->t != V_STR;
    while (left && a < b) {
        size_t l;
        if (ws ? !is_space_at(s.str.s, b, a, &l) : !in_set(chars->str.s, chars->str.n, s.str.s + a, l = cp_len(s.str.s, b, a)))
            break;
        a += l;
    }
    while (right && b > a) {
        size_t st = b - 1;
        while (st > a && ((unsigned char)s.str.s[st] & 0xc0) == 0x80) st--;
        size_t l;
        if (ws ? !(is_space_at(s.str.s, b, st, &l) && st + l == b) : !in_set(chars->str.s, chars->str.n, s.str.s + st, b - st))
            break;
        b = st;
    }
    return rw_chat__v_str_ref(s.str.s + a, b - a);
}

static value kwarg(value *args, const char **kw, size_t n, const char *name, size_t pos, bool *found) {
    for (size_t i = 0; i < n; i++)
        if (kw && kw[i] && !strcmp(kw[i], name)) {
            if (found) *found = true;
            return args[i];
        }
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        if (kw && kw[i]) continue;
        if (p++ == pos) {
            if (found) *found = true;
            return args[i];
        }
    }
    if (found) *found = false;
    return rw_chat__v_undef();
}

static rw_status need_str(render *r, const node *n, const value *v, const char *what) {
    if (v->t != V_STR) return rw_chat__r_fail(r, n->line, "%s expects a string, got %s", what, rw_chat__v_type_name(v->t));
    return RW_OK;
}

static rw_status case_map(render *r, value s, int mode, value *out) {
    /* ASCII case mapping; other characters pass through unchanged */
    char *p = rw_chat__r_alloc(r, s.str.n + 1);
    if (!p) return r->err->code;
    bool start = true;
    for (size_t i = 0; i < s.str.n; i++) {
        char c = s.str.s[i];
        bool alpha = isalpha((unsigned char)c);
        if (mode == 0) c = (char)toupper((unsigned char)c);
        else if (mode == 1) c = (char)tolower((unsigned char)c);
        else if (mode == 2) c = (char)(start ? toupper((unsigned char)c) : tolower((unsigned char)c));
        else c = (char)(i == 0 ? toupper((unsigned char)c) : tolower((unsigned char)c));
        start = !alpha;
        p[i] = c;
    }
    *out = rw_chat__v_str_ref(p, s.str.n);
    return RW_OK;
}

static rw_status split(render *r, value s, const value *sep, int64_t maxsplit, value *out) {
    *out = rw_chat__v_list(r);
    if (out->t != V_LIST) return r->err->code;
    rw_status st = RW_OK;
    const char *p = s.str.s, *end = s.str.s + s.str.n;
    if (!sep || sep->t != V_STR) { /* runs of whitespace, no empty pieces */
        size_t i = 0;
        while (i < s.str.n && !st) {
            size_t l;
            while (i < s.str.n && is_space_at(p, s.str.n, i, &l)) i += l;
            if (i >= s.str.n) break;
            size_t j = i;
            if (maxsplit >= 0 && (int64_t)out->list->n >= maxsplit) j = s.str.n;
            else while (j < s.str.n && !is_space_at(p, s.str.n, j, &l)) j += cp_len(p, s.str.n, j);
            st = rw_chat__v_list_push(r, out->list, rw_chat__v_str_ref(p + i, j - i));
            i = j;
        }
        return st;
    }
    if (sep->str.n == 0) return rw_chat__r_fail(r, 0, "empty separator");
    for (;;) {
        const char *hit = maxsplit >= 0 && (int64_t)out->list->n >= maxsplit
                              ? NULL
                              : memmem(p, (size_t)(end - p), sep->str.s, sep->str.n);
        if (!hit) return rw_chat__v_list_push(r, out->list, rw_chat__v_str_ref(p, (size_t)(end - p)));
        st = rw_chat__v_list_push(r, out->list, rw_chat__v_str_ref(p, (size_t)(hit - p)));
        if (st) return st;
        p = hit + sep->str.n;
    }
}

static rw_status replace(render *r, value s, value a, value b, value *out) {
    if (a.str.n == 0) {
        *out = s;
        return RW_OK;
    }
    sbuf sb = {0};
    rw_status st = RW_OK;
    const char *p = s.str.s, *end = s.str.s + s.str.n;
    while (!st) {
        const char *hit = memmem(p, (size_t)(end - p), a.str.s, a.str.n);
        if (!hit) {
            st = rw_chat__sb_put(r, &sb, p, (size_t)(end - p));
            break;
        }
        st = rw_chat__sb_put(r, &sb, p, (size_t)(hit - p));
        if (!st) st = rw_chat__sb_put(r, &sb, b.str.s, b.str.n);
        p = hit + a.str.n;
    }
    *out = rw_chat__v_from_sbuf(r, &sb);
    free(sb.p);
    return st;
}

static rw_status join(render *r, const node *n, value seq, value sep, value *out) {
    sbuf sb = {0};
    rw_status st = RW_OK;
    if (seq.t == V_LIST)
        for (size_t i = 0; i < seq.list->n && !st; i++) {
            if (i && sep.t == V_STR) st = rw_chat__sb_put(r, &sb, sep.str.s, sep.str.n);
            if (!st) st = rw_chat__v_to_str(r, &sb, &seq.list->v[i]);
        }
    *out = rw_chat__v_from_sbuf(r, &sb);
    free(sb.p);
    return st;
}

/* Current time, or the fixed instant of opts->now, for strftime_now. */
static struct tm now_tm(render *r) {
    struct tm tm = {0};
    const char *fixed = r->opts->now;
    if (fixed && strptime(fixed, "%Y-%m-%dT%H:%M:%S", &tm)) {
        time_t t = timegm(&tm); /* normalise (weekday, day of year) */
        gmtime_r(&t, &tm);
        return tm;
    }
    time_t t = time(NULL);
    localtime_r(&t, &tm);
    return tm;
}

static rw_status items_of(render *r, value d, int which, value *out) {
    *out = rw_chat__v_list(r);
    if (out->t != V_LIST) return r->err->code;
    if (d.t != V_DICT && d.t != V_NS) return RW_OK;
    rw_status st = RW_OK;
    for (size_t i = 0; i < d.dict->n && !st; i++) {
        if (which == 0) {
            value pair = rw_chat__v_list(r);
            if (pair.t != V_LIST) return r->err->code;
            pair.list->tuple = true; /* Python's items are (key, value) tuples */
            st = rw_chat__v_list_push(r, pair.list, d.dict->keys[i]);
            if (!st) st = rw_chat__v_list_push(r, pair.list, d.dict->vals[i]);
            if (!st) st = rw_chat__v_list_push(r, out->list, pair);
        } else st = rw_chat__v_list_push(r, out->list, which == 1 ? d.dict->keys[i] : d.dict->vals[i]);
    }
    return st;
}

rw_status rw_chat__call_func(render *r, const node *n, value fn, value *args, const char **kw, size_t n_args,
                             value *out) {
    *out = rw_chat__v_undef();
    value a0 = kwarg(args, kw, n_args, "", 0, NULL), a1 = kwarg(args, kw, n_args, "", 1, NULL);
    value self = fn.fn.self ? *fn.fn.self : rw_chat__v_undef();
    switch (fn.fn.id) {
    case F_RAISE: {
        sbuf sb = {0};
        rw_chat__v_to_str(r, &sb, &a0);
        rw_status st = rw_errorf(r->err, RW_ERR_TEMPLATE, "%s", sb.p ? sb.p : "");
        free(sb.p);
        return st;
    }
    case F_STRFTIME: {
        if (a0.t != V_STR) return rw_chat__r_fail(r, n->line, "strftime_now expects a format string");
        struct tm tm = now_tm(r);
        char fmt[256], buf[512];
        snprintf(fmt, sizeof fmt, "%.*s", (int)a0.str.n, a0.str.s);
        size_t len = strftime(buf, sizeof buf, fmt, &tm);
        *out = rw_chat__v_str(r, buf, len);
        return r->err->code;
    }
    case F_NAMESPACE: case F_DICT: {
        value d = rw_chat__v_dict(r);
        if (d.t != V_DICT) return r->err->code;
        rw_status st = RW_OK;
        for (size_t i = 0; i < n_args && !st; i++) {
            if (kw && kw[i]) st = rw_chat__v_dict_set(r, d.dict, rw_chat__v_str_ref(kw[i], strlen(kw[i])), args[i]);
            else if (args[i].t == V_DICT)
                for (size_t k = 0; k < args[i].dict->n && !st; k++)
                    st = rw_chat__v_dict_set(r, d.dict, args[i].dict->keys[k], args[i].dict->vals[k]);
        }
        if (fn.fn.id == F_NAMESPACE) d.t = V_NS;
        *out = d;
        return st;
    }
    case F_RANGE: {
        int64_t start = 0, stop, stp = 1;
        if (n_args == 1) stop = a0.t == V_INT ? a0.i : 0;
        else {
            start = a0.t == V_INT ? a0.i : 0;
            stop = a1.t == V_INT ? a1.i : 0;
            value a2 = kwarg(args, kw, n_args, "", 2, NULL);
            if (a2.t == V_INT) stp = a2.i;
        }
        if (stp == 0) return rw_chat__r_fail(r, n->line, "range() step must not be zero");
        *out = rw_chat__v_list(r);
        rw_status st = out->t == V_LIST ? RW_OK : r->err->code;
        for (int64_t i = start; (stp > 0 ? i < stop : i > stop) && !st;) {
            if (out->list->n > 10000000) return rw_chat__r_fail(r, n->line, "range too large");
            st = rw_chat__v_list_push(r, out->list, rw_chat__v_int(i));
            if (__builtin_add_overflow(i, stp, &i)) break; /* past INT64 bounds: past stop too */
        }
        return st;
    }
    case M_SPLIT: {
        value ms = kwarg(args, kw, n_args, "maxsplit", 1, NULL);
        value sep = kwarg(args, kw, n_args, "sep", 0, NULL);
        return split(r, self, sep.t == V_STR ? &sep : NULL, ms.t == V_INT ? ms.i : -1, out);
    }
    case M_STRIP: *out = strip(self, n_args ? &a0 : NULL, true, true); return RW_OK;
    case M_LSTRIP: *out = strip(self, n_args ? &a0 : NULL, true, false); return RW_OK;
    case M_RSTRIP: *out = strip(self, n_args ? &a0 : NULL, false, true); return RW_OK;
    case M_STARTSWITH: case M_ENDSWITH: {
        bool res = false;
        value cands = a0;
        size_t nc = cands.t == V_LIST ? cands.list->n : 1;
        for (size_t i = 0; i < nc && !res; i++) {
            value c = cands.t == V_LIST ? cands.list->v[i] : cands;
            if (need_str(r, n, &c, fn.fn.id == M_STARTSWITH ? "startswith" : "endswith")) return r->err->code;
            if (c.str.n <= self.str.n)
                res = !memcmp(fn.fn.id == M_STARTSWITH ? self.str.s : self.str.s + self.str.n - c.str.n, c.str.s, c.str.n);
        }
        *out = rw_chat__v_bool(res);
        return RW_OK;
    }
    case M_REPLACE:
        if (need_str(r, n, &a0, "replace") || need_str(r, n, &a1, "replace")) return r->err->code;
        return replace(r, self, a0, a1, out);
    case M_UPPER: return case_map(r, self, 0, out);
    case M_LOWER: return case_map(r, self, 1, out);
    case M_TITLE: return case_map(r, self, 2, out);
    case M_CAPITALIZE: return case_map(r, self, 3, out);
    case M_FIND: case M_COUNT: {
        if (need_str(r, n, &a0, "find")) return r->err->code;
        int64_t count = 0, pos = -1;
        const char *p = self.str.s, *end = self.str.s + self.str.n;
        while (a0.str.n && p <= end) {
            const char *hit = memmem(p, (size_t)(end - p), a0.str.s, a0.str.n);
            if (!hit) break;
            if (pos < 0) pos = (int64_t)(hit - self.str.s);
            count++;
            p = hit + a0.str.n;
        }
        *out = rw_chat__v_int(fn.fn.id == M_FIND ? pos : count);
        return RW_OK;
    }
    case M_JOIN: return join(r, n, a0, self, out);
    case M_ISDIGIT: case M_ISSPACE: case M_ISALPHA: case M_ISALNUM: { /* ASCII classes, Unicode spaces */
        bool res = self.str.n > 0;
        for (size_t i = 0; i < self.str.n && res;) {
            size_t l = 1;
            unsigned char c = (unsigned char)self.str.s[i];
            int id = fn.fn.id;
            res = id == M_ISDIGIT ? isdigit(c) != 0 : id == M_ISALPHA ? isalpha(c) != 0 : id == M_ISALNUM ? isalnum(c) != 0
                                                                     : is_space_at(self.str.s, self.str.n, i, &l);
            i += l;
        }
        *out = rw_chat__v_bool(res);
        return RW_OK;
    }
    case M_ISLOWER: case M_ISUPPER: {
        bool cased = false, other = false;
        for (size_t i = 0; i < self.str.n; i++) {
            unsigned char c = (unsigned char)self.str.s[i];
            cased |= fn.fn.id == M_ISLOWER ? islower(c) != 0 : isupper(c) != 0;
            other |= fn.fn.id == M_ISLOWER ? isupper(c) != 0 : islower(c) != 0;
        }
        *out = rw_chat__v_bool(cased && !other);
        return RW_OK;
    }
    case M_RFIND: {
        if (need_str(r, n, &a0, "rfind")) return r->err->code;
        int64_t pos = -1;
        for (size_t i = self.str.n + 1; i-- > 0 && pos < 0;)
            if (i + a0.str.n <= self.str.n && !memcmp(self.str.s + i, a0.str.s, a0.str.n)) pos = (int64_t)i;
        *out = rw_chat__v_int(pos); /* a byte offset: equal to Python's for ASCII text */
        return RW_OK;
    }
    case M_LJUST: case M_RJUST: case M_CENTER: { /* width in code points, fill a space or one character */
        int64_t width = a0.t == V_INT ? a0.i : 0, len = 0;
        for (size_t i = 0; i < self.str.n; i++) len += ((unsigned char)self.str.s[i] & 0xc0) != 0x80;
        value fill = a1.t == V_STR && a1.str.n ? a1 : rw_chat__v_str_ref(" ", 1);
        int64_t pad = width > len ? width - len : 0, left = fn.fn.id == M_LJUST ? 0 : fn.fn.id == M_RJUST ? pad
                                                                                  : pad / 2 + (pad & width & 1);
        if (pad > 1000000) return rw_chat__r_fail(r, n->line, "padding too large");
        sbuf sb = {0};
        rw_status st = RW_OK;
        for (int64_t k = 0; k < left && !st; k++) st = rw_chat__sb_put(r, &sb, fill.str.s, fill.str.n);
        if (!st) st = rw_chat__sb_put(r, &sb, self.str.s, self.str.n);
        for (int64_t k = left; k < pad && !st; k++) st = rw_chat__sb_put(r, &sb, fill.str.s, fill.str.n);
        *out = rw_chat__v_from_sbuf(r, &sb);
        free(sb.p);
        return st;
    }
    case M_SPLITLINES: { /* on \n, \r\n and \r; line ends dropped */
        *out = rw_chat__v_list(r);
        rw_status st = r->err->code;
        size_t start = 0;
        for (size_t i = 0; i < self.str.n && !st; i++) {
            char c = self.str.s[i];
            if (c != '\n' && c != '\r') continue;
            st = rw_chat__v_list_push(r, out->list, rw_chat__v_str_ref(self.str.s + start, i - start));
            if (c == '\r' && i + 1 < self.str.n && self.str.s[i + 1] == '\n') i++;
            start = i + 1;
        }
        if (!st && start < self.str.n) st = rw_chat__v_list_push(r, out->list, rw_chat__v_str_ref(self.str.s + start, self.str.n - start));
        return st;
    }
    case M_ITEMS: return items_of(r, self, 0, out);
    case M_KEYS: return items_of(r, self, 1, out);
    case M_VALUES: return items_of(r, self, 2, out);
    case M_GET: {
        value *v = self.t == V_DICT ? rw_chat__v_dict_get_v(self.dict, &a0) : NULL;
        *out = v ? *v : (n_args > 1 ? a1 : rw_chat__v_none());
        return RW_OK;
    }
    case M_MUTATING: return rw_chat__r_fail(r, n->line, "the template tried to modify an immutable value");
    case RW_CHAT_FN_CYCLE:
        if (!n_args) return rw_chat__r_fail(r, n->line, "loop.cycle: no items for cycling given");
        *out = args[(size_t)self.i % n_args];
        return RW_OK;
    }
    return rw_chat__r_fail(r, n->line, "unknown function");
}

/* ---- tests ---- */

static rw_status less_than(render *r, const node *n, value a, value b, bool case_sensitive, bool *out);

rw_status rw_chat__test(render *r, const node *n, value in, value *args, size_t n_args, bool *out) {
    const char *t = n->s;
    value a0 = n_args ? args[0] : rw_chat__v_undef();
    if (!strcmp(t, "defined")) *out = in.t != V_UNDEF;
    else if (!strcmp(t, "undefined")) *out = in.t == V_UNDEF;
    else if (!strcmp(t, "none")) *out = in.t == V_NONE;
    else if (!strcmp(t, "string")) *out = in.t == V_STR;
    else if (!strcmp(t, "number")) *out = in.t == V_INT || in.t == V_FLOAT;
    else if (!strcmp(t, "integer")) *out = in.t == V_INT;
    else if (!strcmp(t, "float")) *out = in.t == V_FLOAT;
    else if (!strcmp(t, "boolean")) *out = in.t == V_BOOL;
    else if (!strcmp(t, "true")) *out = in.t == V_BOOL && in.b;
    else if (!strcmp(t, "false")) *out = in.t == V_BOOL && !in.b;
    else if (!strcmp(t, "mapping")) *out = in.t == V_DICT;
    else if (!strcmp(t, "iterable") || !strcmp(t, "sequence")) /* a generator is iterable, not a sequence */
        *out = in.t == V_STR || in.t == V_DICT || (in.t == V_LIST && (t[0] == 'i' || !in.list->gen));
    else if (!strcmp(t, "callable")) *out = in.t == V_MACRO || in.t == V_FUNC;
    else if (!strcmp(t, "equalto") || !strcmp(t, "eq") || !strcmp(t, "==") || !strcmp(t, "sameas")) *out = rw_chat__v_equal(&in, &a0);
    else if (!strcmp(t, "ne") || !strcmp(t, "!=")) *out = !rw_chat__v_equal(&in, &a0);
    else if (!strcmp(t, "odd") || !strcmp(t, "even") || !strcmp(t, "divisibleby")) {
        int64_t d = t[0] == 'd' ? (a0.t == V_INT ? a0.i : a0.t == V_BOOL ? a0.b : 0) : 2;
        if ((in.t != V_INT && in.t != V_BOOL) || d == 0)
            return rw_chat__r_fail(r, n->line, "test '%s' needs integers", t); /* Python's % raises */
        int64_t x = in.t == V_INT ? in.i : in.b, m = d == -1 ? 0 : x % d;
        *out = t[0] == 'o' ? m != 0 : m == 0;
    } else if (!strcmp(t, "lower") || !strcmp(t, "upper")) {
        /* str(x).islower()/isupper(): some cased character and none of the other case (ASCII) */
        bool cased = false, other = false;
        sbuf sb = {0};
        rw_status st = in.t == V_STR ? RW_OK : rw_chat__v_to_str(r, &sb, &in);
        if (st) return free(sb.p), st;
        if (in.t != V_STR) in = rw_chat__v_from_sbuf(r, &sb);
        if (in.t == V_STR)
            for (size_t i = 0; i < in.str.n; i++) {
                unsigned char c = (unsigned char)in.str.s[i];
                cased |= t[0] == 'l' ? islower(c) != 0 : isupper(c) != 0;
                other |= t[0] == 'l' ? isupper(c) != 0 : islower(c) != 0;
            }
        *out = cased && !other;
    } else if (!strcmp(t, "in")) {
        *out = false;
        if (a0.t == V_LIST)
            for (size_t i = 0; i < a0.list->n && !*out; i++) *out = rw_chat__v_equal(&in, &a0.list->v[i]);
        else if (a0.t == V_DICT) *out = rw_chat__v_dict_get_v(a0.dict, &in) != NULL;
        else if (a0.t == V_STR && in.t == V_STR) *out = memmem(a0.str.s, a0.str.n, in.str.s, in.str.n) != NULL;
    } else if (!strcmp(t, "gt") || !strcmp(t, "lt") || !strcmp(t, "ge") || !strcmp(t, "le") || !strcmp(t, ">") ||
               !strcmp(t, "<") || !strcmp(t, ">=") || !strcmp(t, "<=")) {
        bool gt = t[0] == 'g' || t[0] == '>', strict = t[1] == 't' || t[1] == 0, less;
        rw_status st = gt ? less_than(r, n, a0, in, true, &less) : less_than(r, n, in, a0, true, &less);
        if (st) return st;
        if (!less && !strict) *out = rw_chat__v_equal(&in, &a0);
        else *out = less;
    } else return rw_chat__r_fail(r, n->line, "no test named '%s'", t);
    return RW_OK;
}

/* ---- filters ---- */

/* A filter or test name passed as a value (select('odd'), map('upper')), as
 * a NUL-terminated string: a string value may be a slice of a longer one. */
static const char *name_arg(render *r, value v, const char *dflt) {
    if (v.t != V_STR) return dflt;
    value c = rw_chat__v_str(r, v.str.s, v.str.n);
    return c.t == V_STR ? c.str.s : dflt;
}

static rw_status attr_of(render *r, value item, value name, value *out) {
    *out = rw_chat__v_undef();
    if (item.t == V_DICT && name.t == V_STR) {
        /* dotted paths as Jinja's attribute= */
        const char *p = name.str.s, *end = p + name.str.n;
        value cur = item;
        while (p < end) {
            const char *dot = memchr(p, '.', (size_t)(end - p));
            size_t len = dot ? (size_t)(dot - p) : (size_t)(end - p);
            value *v = cur.t == V_DICT ? rw_chat__v_dict_get(cur.dict, p, len) : NULL;
            if (!v) return RW_OK;
            cur = *v;
            p += len + (dot ? 1 : 0);
        }
        *out = cur;
    }
    return RW_OK;
}

static rw_status select_filter(render *r, const node *n, value in, value *args, size_t n_args, bool by_attr, bool keep,
                               value *out) {
    *out = rw_chat__v_list(r);
    if (out->t != V_LIST) return r->err->code;
    vlist empty = {0};
    vlist *items = in.t == V_LIST ? in.list : &empty;
    size_t first = by_attr ? 1 : 0;
    for (size_t i = 0; i < items->n; i++) {
        value subject = items->v[i];
        if (by_attr) attr_of(r, items->v[i], n_args ? args[0] : rw_chat__v_undef(), &subject);
        bool pass;
        if (n_args > first) {
            node tn = *n;
            tn.s = name_arg(r, args[first], "defined");
            rw_status st = rw_chat__test(r, &tn, subject, args + first + 1, n_args - first - 1, &pass);
            if (st) return st;
        } else pass = rw_chat__v_truthy(&subject);
        if (pass == keep) {
            rw_status st = rw_chat__v_list_push(r, out->list, items->v[i]);
            if (st) return st;
        }
    }
    return RW_OK;
}

/* What Python's iteration yields, as a list: a list itself, a string's
 * characters, a dict's keys, nothing for Undefined. Other types fail, as
 * Python's TypeError does. */
static rw_status as_list(render *r, const node *n, value in, value *out) {
    if (in.t == V_LIST) {
        *out = in;
        return RW_OK;
    }
    if (in.t != V_STR && in.t != V_DICT && in.t != V_UNDEF)
        return rw_chat__r_fail(r, n->line, "filter '%s': '%s' object is not iterable", n->s, rw_chat__v_type_name(in.t));
    *out = rw_chat__v_list(r);
    rw_status st = r->err->code;
    if (in.t == V_STR)
        for (size_t i = 0; i < in.str.n && !st;) {
            size_t l = cp_len(in.str.s, in.str.n, i);
            st = rw_chat__v_list_push(r, out->list, rw_chat__v_str_ref(in.str.s + i, l));
            i += l;
        }
    else if (in.t == V_DICT)
        for (size_t i = 0; i < in.dict->n && !st; i++) st = rw_chat__v_list_push(r, out->list, in.dict->keys[i]);
    return st;
}

/* Python's < for min/max: numbers with numbers, strings with strings
 * (lowercased unless case-sensitive, as Jinja's min/max by default). */
static rw_status less_than(render *r, const node *n, value a, value b, bool case_sensitive, bool *out) {
    bool an = a.t == V_INT || a.t == V_FLOAT || a.t == V_BOOL, bn = b.t == V_INT || b.t == V_FLOAT || b.t == V_BOOL;
    if (an && bn) {
        if (a.t != V_FLOAT && b.t != V_FLOAT) *out = (a.t == V_INT ? a.i : a.b) < (b.t == V_INT ? b.i : b.b);
        else *out = (a.t == V_FLOAT ? a.f : a.t == V_INT ? (double)a.i : a.b) < (b.t == V_FLOAT ? b.f : b.t == V_INT ? (double)b.i : b.b);
        return RW_OK;
    }
    if (a.t != V_STR || b.t != V_STR)
        return rw_chat__r_fail(r, n->line, "'<' not supported between instances of '%s' and '%s'", rw_chat__v_type_name(a.t), rw_chat__v_type_name(b.t));
    size_t m = a.str.n < b.str.n ? a.str.n : b.str.n;
    int c = 0;
    for (size_t i = 0; i < m && !c; i++) {
        int x = (unsigned char)a.str.s[i], y = (unsigned char)b.str.s[i];
        if (!case_sensitive) x = tolower(x), y = tolower(y);
        c = x - y;
    }
    *out = c ? c < 0 : a.str.n < b.str.n;
    return RW_OK;
}

static const char *const filter_names[JF_COUNT] = {
#define RW_CHAT_FILTER_NAME(name) [JF_##name] = #name,
    RW_CHAT_FILTERS(RW_CHAT_FILTER_NAME)
#undef RW_CHAT_FILTER_NAME
};

int rw_chat__filter_id(const char *name) {
    for (int i = 1; i < JF_COUNT; i++)
        if (!strcmp(filter_names[i], name)) return i;
    return JF_UNKNOWN;
}

rw_status rw_chat__filter(render *r, const node *n, value in, value *args, const char **kw, size_t n_args, value *out) {
    const char *f = n->s; /* for messages */
    const int fid = n->builtin;
    value a0 = kwarg(args, kw, n_args, "", 0, NULL);
    *out = rw_chat__v_undef();
    sbuf sb = {0};
    rw_status st = RW_OK;
    /* filters that take any iterable as a list (dict keys, string characters) */
    static const bool over_items[JF_COUNT] = {[JF_join] = 1, [JF_unique] = 1, [JF_select] = 1, [JF_reject] = 1,
                                              [JF_selectattr] = 1, [JF_rejectattr] = 1, [JF_map] = 1, [JF_sum] = 1,
                                              [JF_min] = 1, [JF_max] = 1, [JF_first] = 1, [JF_last] = 1};
    if (fid == JF_last && in.t == V_LIST && in.list->gen)
        return rw_chat__r_fail(r, n->line, "filter 'last': a generator cannot be reversed (add |list)");
    if (over_items[fid]) {
        st = as_list(r, n, in, &in);
        if (st) return st;
    } else if ((fid == JF_length || fid == JF_count || fid == JF_last) && in.t == V_LIST && in.list->gen) {
        return rw_chat__r_fail(r, n->line, "filter '%s': a generator has no len() (add |list)", f);
    } else if ((fid == JF_length || fid == JF_count) && in.t != V_STR && in.t != V_LIST && in.t != V_DICT &&
               in.t != V_UNDEF) {
        return rw_chat__r_fail(r, n->line, "filter '%s': object of type '%s' has no len()", f, rw_chat__v_type_name(in.t));
    } else if ((fid == JF_reverse || fid == JF_list) && in.t != V_STR && in.t != V_LIST && in.t != V_DICT &&
               in.t != V_UNDEF) {
        return rw_chat__r_fail(r, n->line, "filter '%s': '%s' object is not iterable", f, rw_chat__v_type_name(in.t));
    } else if (fid == JF_abs && in.t != V_INT && in.t != V_FLOAT && in.t != V_BOOL) {
        return rw_chat__r_fail(r, n->line, "bad operand type for abs(): '%s'", rw_chat__v_type_name(in.t));
    } else if ((fid == JF_int || fid == JF_float) && in.t == V_UNDEF) {
        return rw_chat__r_fail(r, n->line, "filter '%s' of an undefined value", f);
    }
    if (fid == JF_tojson) { /* json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
        bool has;
        value ind = kwarg(args, kw, n_args, "indent", 1, &has);
        value seps = kwarg(args, kw, n_args, "separators", 2, NULL);
        value sk = kwarg(args, kw, n_args, "sort_keys", 3, NULL), ea = kwarg(args, kw, n_args, "ensure_ascii", 0, NULL);
        /* indent is clamped (the output limit stops anything that large anyway) */
        json_style js = {.indent = has && ind.t == V_INT ? (int)(ind.i < 0 ? -1 : ind.i > 1000 ? 1000 : ind.i) : -1,
                         .key_sep = ": ", .sort_keys = rw_chat__v_truthy(&sk), .ensure_ascii = rw_chat__v_truthy(&ea)};
        js.item_sep = js.indent >= 0 ? "," : ", ";
        if (seps.t == V_LIST && seps.list->n == 2 && seps.list->v[0].t == V_STR && seps.list->v[1].t == V_STR) {
            js.item_sep = name_arg(r, seps.list->v[0], ",");
            js.key_sep = name_arg(r, seps.list->v[1], ":");
        } else if (seps.t != V_UNDEF && seps.t != V_NONE) {
            return rw_chat__r_fail(r, n->line, "tojson: separators must be a pair of strings");
        }
        st = rw_chat__v_tojson(r, &sb, &in, &js, 0);
        *out = rw_chat__v_from_sbuf(r, &sb);
    } else if (fid == JF_length || fid == JF_count) {
        *out = rw_chat__v_int(0);
        if (in.t == V_STR) {
            int64_t k = 0;
            for (size_t i = 0; i < in.str.n; i++) k += ((unsigned char)in.str.s[i] & 0xc0) != 0x80;
            *out = rw_chat__v_int(k);
        } else if (in.t == V_LIST) *out = rw_chat__v_int((int64_t)in.list->n);
        else if (in.t == V_DICT || in.t == V_NS) *out = rw_chat__v_int((int64_t)in.dict->n);
    } else if (fid == JF_trim) {
        if (in.t == V_STR) *out = strip(in, n_args ? &a0 : NULL, true, true);
        else {
            st = rw_chat__v_to_str(r, &sb, &in);
            value s = rw_chat__v_from_sbuf(r, &sb);
            *out = strip(s, NULL, true, true);
        }
    } else if (fid == JF_items) { /* Undefined gives nothing; anything else but a dict is an error */
        if (in.t != V_DICT && in.t != V_UNDEF) st = rw_chat__r_fail(r, n->line, "items: can only get item pairs from a mapping, not %s", rw_chat__v_type_name(in.t));
        else st = items_of(r, in, 0, out);
    } else if (fid == JF_string) {
        st = rw_chat__v_to_str(r, &sb, &in);
        *out = rw_chat__v_from_sbuf(r, &sb);
    } else if (fid == JF_default || fid == JF_d) {
        value b = kwarg(args, kw, n_args, "boolean", 1, NULL);
        bool use_default = in.t == V_UNDEF || (rw_chat__v_truthy(&b) && !rw_chat__v_truthy(&in));
        *out = use_default ? (n_args ? a0 : rw_chat__v_str_ref("", 0)) : in;
    } else if (fid == JF_join) {
        value attr = kwarg(args, kw, n_args, "attribute", 1, NULL);
        if (attr.t == V_STR && in.t == V_LIST) {
            value mapped = rw_chat__v_list(r);
            for (size_t i = 0; mapped.t == V_LIST && i < in.list->n && !st; i++) {
                value x;
                attr_of(r, in.list->v[i], attr, &x);
                st = rw_chat__v_list_push(r, mapped.list, x);
            }
            in = mapped;
        }
        st = st ? st : join(r, n, in, n_args ? a0 : rw_chat__v_str_ref("", 0), out);
    } else if (fid == JF_safe || fid == JF_e || fid == JF_escape || fid == JF_forceescape) {
        if (f[0] == 's') *out = in;
        else { /* HTML escaping */
            st = rw_chat__v_to_str(r, &sb, &in);
            value s = rw_chat__v_from_sbuf(r, &sb);
            for (size_t i = 0; i < s.str.n && !st; i++) {
                char c = s.str.s[i];
                const char *e = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;" : c == '\'' ? "&#39;" : NULL;
                st = e ? rw_chat__sb_put(r, &sb, e, strlen(e)) : rw_chat__sb_put(r, &sb, &c, 1);
            }
            *out = rw_chat__v_from_sbuf(r, &sb);
        }
    } else if (fid == JF_list) {
        if (in.t == V_LIST && !in.list->tuple && !in.list->gen) *out = in;
        else if (in.t == V_LIST) { /* a tuple becomes a list */
            *out = rw_chat__v_list(r);
            for (size_t i = 0; out->t == V_LIST && i < in.list->n && !st; i++) st = rw_chat__v_list_push(r, out->list, in.list->v[i]);
        }
        else if (in.t == V_DICT) st = items_of(r, in, 1, out);
        else if (in.t == V_STR) {
            *out = rw_chat__v_list(r);
            for (size_t i = 0; out->t == V_LIST && i < in.str.n && !st;) {
                size_t l = cp_len(in.str.s, in.str.n, i);
                st = rw_chat__v_list_push(r, out->list, rw_chat__v_str_ref(in.str.s + i, l));
                i += l;
            }
        } else *out = rw_chat__v_list(r);
    } else if (fid == JF_selectattr || fid == JF_rejectattr) {
        st = select_filter(r, n, in, args, n_args, true, f[0] == 's', out);
    } else if (fid == JF_select || fid == JF_reject) {
        st = select_filter(r, n, in, args, n_args, false, f[0] == 's', out);
    } else if (fid == JF_map) {
        value attr = kwarg(args, kw, n_args, "attribute", 99, NULL);
        *out = rw_chat__v_list(r);
        for (size_t i = 0; out->t == V_LIST && in.t == V_LIST && i < in.list->n && !st; i++) {
            value x;
            if (attr.t == V_STR) attr_of(r, in.list->v[i], attr, &x);
            else {
                node fn = *n;
                fn.s = name_arg(r, a0, "string");
                fn.builtin = rw_chat__filter_id(fn.s);
                st = rw_chat__filter(r, &fn, in.list->v[i], args + 1, kw ? kw + 1 : NULL, n_args ? n_args - 1 : 0, &x);
            }
            if (!st) st = rw_chat__v_list_push(r, out->list, x);
        }
    } else if (fid == JF_first || fid == JF_last) {
        if (in.t == V_LIST && in.list->n) *out = in.list->v[f[0] == 'f' ? 0 : in.list->n - 1];
        else if (in.t == V_STR && in.str.n) {
            size_t i = 0;
            if (f[0] == 'l') {
                i = in.str.n - 1;
                while (i > 0 && ((unsigned char)in.str.s[i] & 0xc0) == 0x80) i--;
            }
            *out = rw_chat__v_str_ref(in.str.s + i, cp_len(in.str.s, in.str.n, i));
        }
    } else if (fid == JF_upper || fid == JF_lower || fid == JF_title || fid == JF_capitalize) {
        if (in.t != V_STR) {
            st = rw_chat__v_to_str(r, &sb, &in);
            in = rw_chat__v_from_sbuf(r, &sb);
        }
        st = st ? st : case_map(r, in, f[0] == 'u' ? 0 : f[0] == 'l' ? 1 : f[0] == 't' ? 2 : 3, out);
    } else if (fid == JF_replace) { /* str(value).replace(old, new) */
        value a1 = kwarg(args, kw, n_args, "", 1, NULL);
        if (a0.t != V_STR || a1.t != V_STR) return rw_chat__r_fail(r, n->line, "replace expects strings");
        if (in.t != V_STR) {
            st = rw_chat__v_to_str(r, &sb, &in);
            in = rw_chat__v_from_sbuf(r, &sb);
        }
        if (!st) st = replace(r, in, a0, a1, out);
    } else if (fid == JF_wordcount) { /* words as Jinja counts them: runs of \w (ASCII letters, digits, _, non-ASCII) */
        st = rw_chat__v_to_str(r, &sb, &in);
        int64_t words = 0;
        bool in_word = false;
        for (size_t i = 0; i < sb.n; i++) {
            unsigned char c = (unsigned char)sb.p[i];
            bool w = isalnum(c) || c == '_' || c >= 0x80;
            words += w && !in_word;
            in_word = w;
        }
        *out = rw_chat__v_int(words);
    } else if (fid == JF_sort) { /* sort(reverse=False, case_sensitive=False, attribute=None): stable */
        value rev = kwarg(args, kw, n_args, "reverse", 0, NULL), cs = kwarg(args, kw, n_args, "case_sensitive", 1, NULL);
        value attr = kwarg(args, kw, n_args, "attribute", 2, NULL);
        st = as_list(r, n, in, &in);
        value res = st ? rw_chat__v_undef() : rw_chat__v_list(r);
        for (size_t i = 0; !st && res.t == V_LIST && i < in.list->n; i++) st = rw_chat__v_list_push(r, res.list, in.list->v[i]);
        for (size_t i = 1; !st && res.t == V_LIST && i < res.list->n; i++) /* insertion sort keeps it stable */
            for (size_t k = i; k > 0 && !st; k--) {
                value ka = res.list->v[k - 1], kb = res.list->v[k];
                if (attr.t == V_STR) attr_of(r, res.list->v[k - 1], attr, &ka), attr_of(r, res.list->v[k], attr, &kb);
                bool swap = false;
                st = rw_chat__v_truthy(&rev) ? less_than(r, n, ka, kb, rw_chat__v_truthy(&cs), &swap)
                                    : less_than(r, n, kb, ka, rw_chat__v_truthy(&cs), &swap);
                if (!swap) break;
                value t = res.list->v[k - 1];
                res.list->v[k - 1] = res.list->v[k];
                res.list->v[k] = t;
            }
        *out = res;
    } else if (fid == JF_round) { /* round(precision=0, method='common'): a float, as Jinja */
        value prec = kwarg(args, kw, n_args, "precision", 0, NULL), method = kwarg(args, kw, n_args, "method", 1, NULL);
        if (in.t != V_INT && in.t != V_FLOAT && in.t != V_BOOL) return rw_chat__r_fail(r, n->line, "round needs a number, got %s", rw_chat__v_type_name(in.t));
        double x = in.t == V_FLOAT ? in.f : in.t == V_INT ? (double)in.i : in.b, scale = 1;
        int64_t p = prec.t == V_INT ? prec.i : 0;
        for (int64_t k = 0; k < p && k < 30; k++) scale *= 10;
        for (int64_t k = 0; k > p && k > -30; k--) scale /= 10;
        const char *m = method.t == V_STR ? method.str.s : "common";
        double y = x * scale;
        bool common = strncmp(m, "ceil", 4) && strncmp(m, "floor", 5);
        if (common && in.t != V_FLOAT && p >= 0) *out = rw_chat__v_int(in.t == V_INT ? in.i : in.b); /* Python's round(int) */
        else if (common && in.t != V_FLOAT) {
            double z = nearbyint(y) / scale;
            if (z > -9.2e18 && z < 9.2e18) *out = rw_chat__v_int((int64_t)z);
            else st = rw_chat__r_fail(r, n->line, "round: integer out of range");
        }
        else { /* common is Python's round(): halves to even */
            y = !strncmp(m, "ceil", 4) ? ceil(y) : !strncmp(m, "floor", 5) ? floor(y) : nearbyint(y);
            *out = rw_chat__v_float(y / scale);
        }
    } else if (fid == JF_int) {
        if (in.t == V_INT) *out = in;
        else if (in.t == V_FLOAT && in.f != in.f) *out = n_args ? a0 : rw_chat__v_int(0); /* NaN: the default, as Jinja */
        else if (in.t == V_FLOAT && !(in.f > -9.2e18 && in.f < 9.2e18)) st = rw_chat__r_fail(r, n->line, "int: float out of range");
        else if (in.t == V_FLOAT) *out = rw_chat__v_int((int64_t)in.f);
        else if (in.t == V_BOOL) *out = rw_chat__v_int(in.b);
        else if (in.t == V_STR) {
            char tmp[64];
            snprintf(tmp, sizeof tmp, "%.*s", (int)(in.str.n < 63 ? in.str.n : 63), in.str.s);
            char *e;
            long long x = strtoll(tmp, &e, 10);
            *out = rw_chat__v_int(e != tmp ? x : (n_args ? a0.i : 0));
        } else *out = rw_chat__v_int(0);
    } else if (fid == JF_float) {
        if (in.t == V_FLOAT) *out = in;
        else if (in.t == V_INT) *out = rw_chat__v_float((double)in.i);
        else if (in.t == V_STR) {
            char tmp[64];
            snprintf(tmp, sizeof tmp, "%.*s", (int)(in.str.n < 63 ? in.str.n : 63), in.str.s);
            *out = rw_chat__v_float(strtod(tmp, NULL));
        } else *out = rw_chat__v_float(0);
    } else if (fid == JF_sum) { /* sum(attribute=None, start=0): numbers only, as Python's sum from 0 */
        value attr = kwarg(args, kw, n_args, "attribute", 0, NULL), start = kwarg(args, kw, n_args, "start", 1, NULL);
        bool is_float = start.t == V_FLOAT;
        int64_t si = start.t == V_INT ? start.i : start.t == V_BOOL ? start.b : 0;
        double sf = start.t == V_FLOAT ? start.f : (double)si;
        for (size_t i = 0; i < in.list->n && !st; i++) {
            value x = in.list->v[i];
            if (attr.t == V_STR) attr_of(r, x, attr, &x);
            if (x.t == V_INT || x.t == V_BOOL) {
                int64_t k = x.t == V_INT ? x.i : x.b;
                if (__builtin_add_overflow(si, k, &si)) st = rw_chat__r_fail(r, n->line, "integer overflow in sum");
                sf += (double)k;
            } else if (x.t == V_FLOAT) {
                is_float = true;
                sf += x.f;
            } else st = rw_chat__r_fail(r, n->line, "unsupported operand type(s) for +: 'int' and '%s'", rw_chat__v_type_name(x.t));
        }
        *out = is_float ? rw_chat__v_float(sf) : rw_chat__v_int(si);
    } else if (fid == JF_min || fid == JF_max) { /* min/max(case_sensitive=False, attribute=None) */
        value cs = kwarg(args, kw, n_args, "case_sensitive", 0, NULL), attr = kwarg(args, kw, n_args, "attribute", 1, NULL);
        value best_key = rw_chat__v_undef();
        for (size_t i = 0; i < in.list->n && !st; i++) {
            value x = in.list->v[i], key = x;
            if (attr.t == V_STR) attr_of(r, x, attr, &key);
            bool better = i == 0;
            if (!better) st = f[1] == 'i' ? less_than(r, n, key, best_key, rw_chat__v_truthy(&cs), &better)
                                          : less_than(r, n, best_key, key, rw_chat__v_truthy(&cs), &better);
            if (better) *out = x, best_key = key;
        }
    } else if (fid == JF_abs) {
        if (in.t == V_INT && in.i == INT64_MIN) st = rw_chat__r_fail(r, n->line, "integer overflow in abs");
        else *out = in.t == V_INT ? rw_chat__v_int(in.i < 0 ? -in.i : in.i) : in.t == V_FLOAT ? rw_chat__v_float(in.f < 0 ? -in.f : in.f)
                  : in.t == V_BOOL ? rw_chat__v_int(in.b) : in;
    } else if (fid == JF_unique) {
        *out = rw_chat__v_list(r);
        for (size_t i = 0; out->t == V_LIST && in.t == V_LIST && i < in.list->n && !st; i++) {
            bool seen = false;
            for (size_t k = 0; k < out->list->n && !seen; k++) seen = rw_chat__v_equal(&out->list->v[k], &in.list->v[i]);
            if (!seen) st = rw_chat__v_list_push(r, out->list, in.list->v[i]);
        }
    } else if (fid == JF_reverse) {
        if (in.t == V_LIST) {
            *out = rw_chat__v_list(r);
            for (size_t i = in.list->n; out->t == V_LIST && i-- > 0 && !st;) st = rw_chat__v_list_push(r, out->list, in.list->v[i]);
        } else if (in.t == V_STR) {
            for (size_t i = in.str.n; i > 0 && !st;) {
                size_t s0 = i - 1;
                while (s0 > 0 && ((unsigned char)in.str.s[s0] & 0xc0) == 0x80) s0--;
                st = rw_chat__sb_put(r, &sb, in.str.s + s0, i - s0);
                i = s0;
            }
            *out = rw_chat__v_from_sbuf(r, &sb);
        }
    } else if (fid == JF_indent) { /* indent(width=4, first=False, blank=False), Jinja 3.1 */
        value w = kwarg(args, kw, n_args, "width", 0, NULL), first = kwarg(args, kw, n_args, "first", 1, NULL);
        value blank = kwarg(args, kw, n_args, "blank", 2, NULL);
        value ind = w.t == V_STR ? w : rw_chat__v_str_ref("", 0);
        int64_t width = w.t == V_INT ? w.i : w.t == V_UNDEF ? 4 : 0;
        if (width > 100000) return rw_chat__r_fail(r, n->line, "indent width too large");
        if (w.t != V_STR) {
            for (int64_t k = 0; k < width && !st; k++) st = rw_chat__sb_put(r, &sb, " ", 1);
            ind = rw_chat__v_from_sbuf(r, &sb);
        }
        if (in.t != V_STR) return rw_chat__r_fail(r, n->line, "indent needs a string, got %s", rw_chat__v_type_name(in.t));
        /* the lines of s + "\n" (split as str.splitlines: \n, \r\n, \r), each but the first indented; empty
         * lines only when blank */
        if (!st && rw_chat__v_truthy(&first)) st = rw_chat__sb_put(r, &sb, ind.str.s, ind.str.n);
        size_t start = 0;
        bool first_line = true;
        for (size_t i = 0; i <= in.str.n && !st; i++) {
            char c = i < in.str.n ? in.str.s[i] : '\n';
            if (c != '\n' && c != '\r') continue;
            size_t len = i - start;
            if (!first_line) {
                st = rw_chat__sb_put(r, &sb, "\n", 1);
                if (!st && (len || rw_chat__v_truthy(&blank))) st = rw_chat__sb_put(r, &sb, ind.str.s, ind.str.n);
            }
            if (!st) st = rw_chat__sb_put(r, &sb, in.str.s + start, len);
            if (c == '\r' && i + 1 < in.str.n && in.str.s[i + 1] == '\n') i++;
            start = i + 1;
            first_line = false;
        }
        *out = rw_chat__v_from_sbuf(r, &sb);
    } else if (fid == JF_dictsort && in.t != V_DICT) {
        st = rw_chat__r_fail(r, n->line, "dictsort needs a mapping, got %s", rw_chat__v_type_name(in.t));
    } else if (fid == JF_dictsort) {
        st = items_of(r, in, 0, out);
        /* insertion sort by key string */
        for (size_t i = 1; !st && out->t == V_LIST && i < out->list->n; i++)
            for (size_t k = i; k > 0; k--) {
                value *a = &out->list->v[k - 1].list->v[0], *b = &out->list->v[k].list->v[0];
                if (a->t != V_STR || b->t != V_STR) break;
                size_t m = a->str.n < b->str.n ? a->str.n : b->str.n;
                int c = memcmp(a->str.s, b->str.s, m);
                if (c < 0 || (c == 0 && a->str.n <= b->str.n)) break;
                value t = out->list->v[k - 1];
                out->list->v[k - 1] = out->list->v[k];
                out->list->v[k] = t;
            }
    } else {
        st = rw_chat__r_fail(r, n->line, "no filter named '%s'", f);
    }
    /* Jinja returns generators from these (reversed() of a list is an iterator too): always true, no len() */
    static const bool generators[JF_COUNT] = {[JF_select] = 1, [JF_reject] = 1, [JF_selectattr] = 1,
                                              [JF_rejectattr] = 1, [JF_map] = 1, [JF_items] = 1, [JF_unique] = 1};
    if (!st && out->t == V_LIST && (generators[fid] || (fid == JF_reverse && in.t != V_STR)))
        out->list->gen = true;
    free(sb.p);
    return st ? st : r->err->code;
}
