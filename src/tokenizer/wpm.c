/* wpm.c - WordPiece (tokenizer.ggml.model = "bert"), as llama.cpp runs it:
 * the text is NFD-normalised (libunistring), split into words at Unicode
 * white space, with every punctuation character, ASCII symbol and CJK
 * ideograph a word of its own; control and format characters and accents
 * (nonspacing marks) are dropped and everything is lowercased. Each word, prefixed with U+2581, is then cut
 * greedily into the longest vocabulary pieces; a word that cannot be cut
 * becomes the unknown token. */
#include <stdlib.h>
#include <string.h>
#include <unicase.h>
#include <unictype.h>
#include <uninorm.h>
#include <unistr.h>

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
            if ((id = rw_tok__str_map_get(&t->vocab, s + i, j - i)) >= 0) break;
        if (id < 0) {
            out->n = mark;
            free(s);
            return t->unk >= 0 ? rw_tok__ids_push(out, t->unk) : 0;
        }
        if (rw_tok__ids_push(out, id)) {
            free(s);
            return -1;
        }
        i = j;
    }
    free(s);
    return 0;
}

static bool is_cjk(ucs4_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F) || (c >= 0x3000 && c <= 0x303F) ||
           (c >= 0xFF00 && c <= 0xFFEF);
}

rw_status rw_tok__wpm(const rw_tokenizer *t, const char *text, size_t len, id_list *out, rw_error *err) {
    size_t nfd_len = 0;
    uint8_t *nfd = u8_normalize(UNINORM_NFD, (const uint8_t *)text, len, NULL, &nfd_len);
    if (!nfd && len) return rw_errorf(err, RW_ERR_NOMEM, "cannot normalise the text");
    char *w = malloc(nfd_len * 4 + 8); /* lowercasing can grow a character */
    if (!w) {
        free(nfd);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    size_t n = 0;
    int bad = 0;
    for (size_t i = 0; i < nfd_len && !bad;) {
        ucs4_t c;
        int l = u8_mbtouc(&c, nfd + i, nfd_len - i); /* invalid bytes come back as U+FFFD */
        i += (size_t)(l > 0 ? l : 1);
        if (uc_is_property_white_space(c)) {
            bad = word(t, w, n, out);
            n = 0;
            continue;
        }
        /* controls, format characters and the accents NFD split off are dropped */
        if (c == 0 || c == 0xFFFD || uc_is_general_category(c, UC_CATEGORY_C) || uc_is_general_category(c, UC_CATEGORY_Mn))
            continue;
        uint8_t lower[8];
        int ll = u8_uctomb(lower, uc_tolower(c), sizeof lower);
        if (ll <= 0) continue;
        if (uc_is_general_category(c, UC_CATEGORY_P) || (c < 0x7F && uc_is_general_category(c, UC_CATEGORY_S)) || is_cjk(c)) {
            bad = word(t, w, n, out);
            n = 0;
            if (!bad) bad = word(t, (const char *)lower, (size_t)ll, out);
        } else {
            memcpy(w + n, lower, (size_t)ll);
            n += (size_t)ll;
        }
    }
    if (!bad) bad = word(t, w, n, out);
    free(w);
    free(nfd);
    return bad ? rw_errorf(err, RW_ERR_NOMEM, "out of memory") : RW_OK;
}
