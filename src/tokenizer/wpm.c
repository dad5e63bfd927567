/* wpm.c - WordPiece (tokenizer.ggml.model = "bert"), as llama.cpp runs it:
 * the text is split on whitespace and around punctuation, lowercased, and
 * each word, prefixed with U+2581, is cut greedily into the longest
 * vocabulary pieces; a word that cannot be cut becomes the unknown token.
 * Limitation (stated, tested): lowercasing and punctuation are recognised
 * for ASCII only; llama.cpp also applies Unicode NFD and case tables. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_int.h"

static int word(const rw_tokenizer *t, const char *w, size_t n, id_list *out) {
    if (!n) return 0;
    char *s = malloc(n + 3);
    if (!s) return -1;
    memcpy(s, "\xe2\x96\x81", 3);
    memcpy(s + 3, w, n);
    size_t len = n + 3, mark = out->n;
    for (size_t i = 0; i < len;) {
        size_t j = len;
        int32_t id = -1;
        for (; j > i; j--)
            if ((id = str_map_get(&t->vocab, s + i, j - i)) >= 0) break;
        if (id < 0) {
            out->n = mark;
            free(s);
            return t->unk >= 0 ? ids_push(out, t->unk) : 0;
        }
        if (ids_push(out, id)) {
            free(s);
            return -1;
        }
        i = j;
    }
    free(s);
    return 0;
}

rw_status rw_tok__wpm(const rw_tokenizer *t, const char *text, size_t len, id_list *out, rw_error *err) {
    char *w = malloc(len + 1);
    if (!w) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    size_t n = 0;
    int bad = 0;
    for (size_t i = 0; i < len && !bad; i++) {
        unsigned char c = (unsigned char)text[i];
        if (isspace(c)) {
            bad = word(t, w, n, out);
            n = 0;
        } else if (c < 0x80 && (ispunct(c))) {
            bad = word(t, w, n, out);
            n = 0;
            char p = (char)c;
            if (!bad) bad = word(t, &p, 1, out);
        } else if (c < 0x20 || c == 0x7f) {
            continue;
        } else {
            w[n++] = (char)tolower(c);
        }
    }
    if (!bad) bad = word(t, w, n, out);
    free(w);
    return bad ? rw_errorf(err, RW_ERR_NOMEM, "out of memory") : RW_OK;
}
