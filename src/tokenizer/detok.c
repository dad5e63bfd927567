/* detok.c - token ids back to text, whole or streamed. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_int.h"

static size_t put(char *buf, size_t cap, size_t at, const char *s, size_t n) {
    if (at < cap) memcpy(buf + at, s, at + n <= cap ? n : cap - at);
    return at + n;
}

/* The bytes token id stands for, ignoring render_special: control and unused
 * tokens as their text, user-defined ones too; BPE tokens spelled back from
 * the byte alphabet; SentencePiece, WordPiece and raw UTF-8 BPE (gemma4)
 * U+2581 as a space, <0xXX> as the byte, the unknown token as U+2585 (as
 * llama.cpp). Run once per token at load time; rw_token_to_piece copies the
 * result. */
size_t rw_tok__decode_token(const rw_tokenizer *t, int32_t id, char *buf, size_t cap) {
    const char *s = t->text[id];
    size_t n = t->len[id], o = 0;
    int type = t->type[id];
    if (type == TT_CONTROL || type == TT_UNUSED || type == TT_USER_DEFINED) return put(buf, cap, 0, s, n);
    if (t->kind == TOK_BPE && !t->raw_utf8) {
        for (size_t i = 0; i < n;) {
            unsigned char c = (unsigned char)s[i];
            size_t l = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
            if (l > n - i) l = n - i;
            unsigned cp = l == 1 ? c : l == 2 ? ((unsigned)(c & 0x1f) << 6 | ((unsigned char)s[i + 1] & 0x3f)) : 0xffff;
            int b = cp < 512 ? t->char_byte[cp] : -1;
            if (b >= 0) {
                char byte = (char)b;
                o = put(buf, cap, o, &byte, 1);
            } else {
                o = put(buf, cap, o, s + i, l); /* not in the byte alphabet: as written */
            }
            i += l;
        }
        return o;
    }
    if (type == TT_BYTE && n == 6 && !memcmp(s, "<0x", 3)) {
        char byte = (char)strtol(s + 3, NULL, 16);
        return put(buf, cap, 0, &byte, 1);
    }
    if (type == TT_UNKNOWN) return t->kind == TOK_SPM ? put(buf, cap, 0, "\xe2\x96\x85", 3) : put(buf, cap, 0, s, n);
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
            o = put(buf, cap, o, " ", 1);
            i += 3;
        } else {
            o = put(buf, cap, o, s + i, 1);
            i++;
        }
    }
    return o;
}

size_t rw_token_to_piece(const rw_tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap) {
    if (id < 0 || id >= t->n_vocab) return 0;
    int type = t->type[id];
    if ((type == TT_CONTROL || type == TT_UNUSED) && !render_special) return 0;
    return put(buf, cap, 0, t->piece_pool + t->piece_off[id], t->piece_off[id + 1] - t->piece_off[id]);
}

/* SentencePiece and WordPiece add a space before the first word. */
static bool strips_leading_space(const rw_tokenizer *t) { return t->kind == TOK_WPM || (t->kind == TOK_SPM && t->add_space_prefix); }

rw_status rw_detokenize(const rw_tokenizer *t, const int32_t *ids, size_t n, bool render_special, char **out,
                        size_t *out_len, rw_error *err) {
    size_t cap = 64, len = 0;
    char *buf = malloc(cap);
    if (!buf) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    bool first_text = true;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            free(buf);
            return rw_errorf(err, RW_ERR_INVALID_ARG, "token id %d is outside the vocabulary of %d", ids[i], t->n_vocab);
        }
        size_t need = rw_token_to_piece(t, ids[i], render_special, NULL, 0);
        if (len + need + 1 > cap) {
            while (len + need + 1 > cap) cap *= 2;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
            }
            buf = b;
        }
        size_t got = rw_token_to_piece(t, ids[i], render_special, buf + len, cap - len);
        bool had_text = got > 0;
        if (first_text && got && strips_leading_space(t) && buf[len] == ' ') {
            memmove(buf + len, buf + len + 1, got - 1);
            got--;
        }
        if (had_text) first_text = false;
        len += got;
    }
    buf[len] = 0;
    *out = buf;
    if (out_len) *out_len = len;
    return RW_OK;
}

/* Bytes at the end of s[0..n) that start a UTF-8 sequence still incomplete. */
static size_t incomplete_tail(const unsigned char *s, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = s[n - back];
        if ((c & 0xc0) == 0x80) continue; /* continuation byte: look further back */
        size_t want = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 1;
        if (c < 0x80 || want == 1) return 0;
        return want > back ? back : 0;
    }
    return 0;
}

/* Copies s to out with invalid sequences replaced by U+FFFD. */
static size_t copy_valid(const unsigned char *s, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t l = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 && c >= 0xc2 ? 2 : (c & 0xf0) == 0xe0 ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        bool ok = l && l <= n - i;
        for (size_t k = 1; ok && k < l; k++) ok = (s[i + k] & 0xc0) == 0x80;
        if (ok && l == 3) {
            unsigned cp = (unsigned)(c & 0x0f) << 12 | (unsigned)(s[i + 1] & 0x3f) << 6 | (s[i + 2] & 0x3f);
            ok = cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff);
        }
        if (ok && l == 4) {
            unsigned cp = (unsigned)(c & 0x07) << 18 | (unsigned)(s[i + 1] & 0x3f) << 12 | (unsigned)(s[i + 2] & 0x3f) << 6 | (s[i + 3] & 0x3f);
            ok = cp >= 0x10000 && cp <= 0x10ffff;
        }
        if (ok) {
            o = put(out, cap, o, (const char *)s + i, l);
            i += l;
        } else {
            o = put(out, cap, o, "\xef\xbf\xbd", 3);
            i++;
        }
    }
    return o;
}

size_t rw_detok_stream_feed(const rw_tokenizer *t, rw_detok_stream *s, int32_t id, bool render_special, char *out,
                            size_t cap) {
    size_t n = rw_token_to_piece(t, id, render_special, NULL, 0);
    unsigned char stackbuf[256], *buf = n + s->n_pending <= sizeof stackbuf ? stackbuf : malloc(n + s->n_pending);
    if (!buf) return 0;
    memcpy(buf, s->pending, s->n_pending);
    size_t total = s->n_pending + rw_token_to_piece(t, id, render_special, (char *)buf + s->n_pending, n);
    size_t skip = 0;
    if (!s->started && total && strips_leading_space(t) && buf[0] == ' ') skip = 1;
    size_t tail = incomplete_tail(buf + skip, total - skip);
    size_t need = copy_valid(buf + skip, total - skip - tail, NULL, 0);
    if (need > cap) {
        if (buf != stackbuf) free(buf);
        return need; /* nothing consumed */
    }
    copy_valid(buf + skip, total - skip - tail, out, cap);
    memcpy(s->pending, buf + total - tail, tail);
    s->n_pending = tail;
    if (total) s->started = true;
    if (buf != stackbuf) free(buf);
    return need;
}

size_t rw_detok_stream_flush(rw_detok_stream *s, char *out, size_t cap) {
    size_t need = copy_valid((const unsigned char *)s->pending, s->n_pending, NULL, 0);
    if (need > cap) return need;
    copy_valid((const unsigned char *)s->pending, s->n_pending, out, cap);
    s->n_pending = 0;
    return need;
}
