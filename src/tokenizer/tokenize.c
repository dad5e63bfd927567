/* tokenize.c - the tokenize entry point: special tokens are cut out of the
 * text first (longest first; white space beside them too where the token's
 * strip attributes say so), then each remaining fragment goes to the
 * vocabulary's algorithm; BOS/EOS as the vocabulary asks. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_int.h"

typedef struct {
    int32_t id; /* -1 for raw text */
    size_t start, len;
} fragment;

typedef struct {
    fragment *v;
    size_t n, cap;
} frag_list;

static int frag_push(frag_list *l, fragment f) {
    if (f.id < 0 && f.len == 0) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        fragment *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = f;
    return 0;
}

/* C's isspace in the C locale, as llama.cpp strips around special tokens. */
static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Does [h, h + n) overlap one of the sorted, disjoint ranges plain[2i]..plain[2i+1]? */
static bool in_plain(const size_t *plain, size_t n_plain, size_t h, size_t n) {
    size_t lo = 0, hi = n_plain; /* the first range ending after h */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (plain[2 * mid + 1] <= h) lo = mid + 1;
        else hi = mid;
    }
    return lo < n_plain && plain[2 * lo] < h + n;
}

/* Splits every raw fragment around the occurrences of each special token;
 * control and unknown tokens only with parse_special, and never inside the
 * plain ranges. */
static int partition(const rw_tokenizer *t, const char *text, size_t len, bool parse_special, const size_t *plain,
                     size_t n_plain, frag_list *out) {
    frag_list cur = {0}, next = {0};
    int bad = frag_push(&cur, (fragment){-1, 0, len});
    for (int32_t s = 0; s < t->n_special && !bad; s++) {
        int32_t id = t->special[s];
        if (!parse_special && (t->type[id] == TT_CONTROL || t->type[id] == TT_UNKNOWN)) continue;
        const char *tok = t->text[id];
        size_t tl = t->len[id];
        const bool guarded = n_plain && (t->type[id] == TT_CONTROL || t->type[id] == TT_UNKNOWN);
        next.n = 0;
        for (size_t f = 0; f < cur.n && !bad; f++) {
            fragment fr = cur.v[f];
            if (fr.id >= 0 || fr.len < tl) {
                bad = frag_push(&next, fr);
                continue;
            }
            size_t pos = fr.start, end = fr.start + fr.len, from = pos;
            while (!bad) {
                const char *hit = memmem(text + from, end - from, tok, tl);
                if (!hit) break;
                size_t h = (size_t)(hit - text), left_end = h;
                if (guarded && in_plain(plain, n_plain, h, tl)) { /* a message's own text: stays text */
                    from = h + 1;
                    continue;
                }
                if (t->strip[id] & STRIP_LEFT)
                    while (left_end > pos && is_space(text[left_end - 1])) left_end--;
                bad = frag_push(&next, (fragment){-1, pos, left_end - pos}) || frag_push(&next, (fragment){id, h, tl});
                pos = h + tl;
                if (t->strip[id] & STRIP_RIGHT)
                    while (pos < end && is_space(text[pos])) pos++;
                from = pos;
            }
            if (!bad) bad = frag_push(&next, (fragment){-1, pos, end - pos});
        }
        frag_list tmp = cur;
        cur = next;
        next = tmp;
    }
    free(next.v);
    *out = cur;
    return bad;
}

/* Writes s[0..n) to *buf (grown as needed) with each space as U+2581, after
 * one more U+2581 if prefix; *len gets the length. -1 on out of memory. */
static int escape_spaces(const char *s, size_t n, bool prefix, char **buf, size_t *cap, size_t *len) {
    size_t need = 3 * (n + 1);
    if (need > *cap) {
        char *b = realloc(*buf, need);
        if (!b) return -1;
        *buf = b;
        *cap = need;
    }
    size_t o = 0;
    if (prefix) {
        memcpy(*buf, "\xe2\x96\x81", 3);
        o = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(*buf + o, "\xe2\x96\x81", 3);
            o += 3;
        } else {
            (*buf)[o++] = s[i];
        }
    }
    *len = o;
    return 0;
}

size_t rw_tokenizer_max_token_len(const rw_tokenizer *t) {
    size_t m = 1;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->len[id] > m) m = t->len[id];
    return m;
}

long rw_tokenizer_find_control(const rw_tokenizer *t, const char *s, size_t n) {
    long best = -1;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        if (t->type[id] != TT_CONTROL && t->type[id] != TT_UNKNOWN) continue;
        const char *hit = t->len[id] ? memmem(s, n, t->text[id], t->len[id]) : NULL;
        if (hit && (best < 0 || hit - s < best)) best = hit - s;
    }
    return best;
}

static rw_status tokenize(const rw_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                          const size_t *plain, size_t n_plain, int32_t **ids, size_t *n_ids, rw_error *err) {
    *ids = NULL;
    *n_ids = 0;
    frag_list frags;
    if (partition(t, text, len, parse_special, plain, n_plain, &frags))
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    id_list out = {0};
    rw_status st = RW_OK;
    int bad = 0;
    if (add_special && t->add_bos && t->bos >= 0) bad = rw_tok__ids_push(&out, t->bos);
    bool prev_special = true; /* SentencePiece: a space before the first word and after special tokens */
    char *buf = NULL;
    size_t buf_cap = 0;
    for (size_t f = 0; f < frags.n && !bad && !st; f++) {
        fragment fr = frags.v[f];
        if (fr.id >= 0) {
            bad = rw_tok__ids_push(&out, fr.id);
            prev_special = true;
            continue;
        }
        if (t->kind == TOK_SPM || t->escape_spaces) {
            /* SentencePiece writes spaces as U+2581, and so do gemma4's BPE
             * tokens; only SentencePiece adds one before the first word */
            bool prefix = t->kind == TOK_SPM && t->add_space_prefix && prev_special;
            size_t o;
            if (escape_spaces(text + fr.start, fr.len, prefix, &buf, &buf_cap, &o)) {
                bad = 1;
                break;
            }
            st = t->kind == TOK_SPM ? rw_tok__spm(t, buf, o, &out, err) : rw_tok__bpe(t, buf, o, &out, err);
        } else if (t->kind == TOK_BPE) {
            st = rw_tok__bpe(t, text + fr.start, fr.len, &out, err);
        } else {
            st = rw_tok__wpm(t, text + fr.start, fr.len, &out, err);
        }
        prev_special = false;
    }
    if (!bad && !st && add_special && t->add_eos && t->eos >= 0) bad = rw_tok__ids_push(&out, t->eos);
    free(buf);
    free(frags.v);
    if (bad && !st) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    if (st) {
        free(out.v);
        return st;
    }
    if (!out.v) out.v = malloc(sizeof *out.v); /* a valid pointer even for no tokens */
    if (!out.v) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    *ids = out.v;
    *n_ids = out.n;
    return RW_OK;
}

rw_status rw_tokenize(const rw_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                      int32_t **ids, size_t *n_ids, rw_error *err) {
    return tokenize(t, text, len, add_special, parse_special, NULL, 0, ids, n_ids, err);
}

rw_status rw_tokenize_guarded(const rw_tokenizer *t, const char *text, size_t len, bool add_special,
                              const size_t *plain, size_t n_plain, int32_t **ids, size_t *n_ids, rw_error *err) {
    return tokenize(t, text, len, add_special, true, plain, n_plain, ids, n_ids, err);
}
