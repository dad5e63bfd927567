/* spm.c - SentencePiece-style BPE (tokenizer.ggml.model = "llama").
 *
 * The text (spaces already turned into U+2581) is split into characters;
 * adjacent symbols whose concatenation is a token merge, highest token score
 * first, leftmost on ties. A final symbol that is not a token falls back to
 * its bytes' <0xXX> tokens (or the unknown token). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_int.h"

typedef struct {
    int prev, next;
    size_t start, n;
} symbol;

static int try_pair(const rw_tokenizer *t, const char *text, symbol *sym, tok_heap *h, int left, int right) {
    if (left < 0 || right < 0) return 0;
    size_t start = sym[left].start, size = sym[left].n + sym[right].n;
    int32_t id = rw_tok__str_map_get(&t->vocab, text + start, size);
    if (id < 0) return 0;
    return rw_tok__heap_push(h, (tok_pair){t->score ? -t->score[id] : 0.f, left, right, size});
}

rw_status rw_tok__spm(const rw_tokenizer *t, const char *text, size_t len, id_list *out, rw_error *err) {
    symbol *sym = malloc((len ? len : 1) * sizeof *sym);
    tok_heap h = {0};
    int bad = !sym;
    int n = 0;
    for (size_t i = 0; i < len && !bad;) {
        unsigned char c = (unsigned char)text[i];
        /* the sequence length its lead byte announces, by the top four bits
         * as llama.cpp reads it (so invalid bytes group as they do there) */
        static const uint8_t len_of[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
        size_t l = len_of[c >> 4];
        if (l > len - i) l = len - i;
        sym[n] = (symbol){n - 1, -1, i, l};
        if (n > 0) sym[n - 1].next = n;
        n++;
        i += l;
    }
    for (int i = 1; i < n && !bad; i++) bad = try_pair(t, text, sym, &h, i - 1, i);
    while (h.n && !bad) {
        tok_pair b = rw_tok__heap_pop(&h);
        symbol *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->next != b.right || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        bad = try_pair(t, text, sym, &h, l->prev, b.left) || try_pair(t, text, sym, &h, b.left, l->next);
    }
    for (int i = n ? 0 : -1; i >= 0 && !bad; i = sym[i].next) {
        int32_t id = rw_tok__str_map_get(&t->vocab, text + sym[i].start, sym[i].n);
        if (id >= 0) {
            bad = rw_tok__ids_push(out, id);
            continue;
        }
        for (size_t k = 0; k < sym[i].n && !bad; k++) {
            int32_t bt = t->byte_token[(unsigned char)text[sym[i].start + k]];
            bad = rw_tok__ids_push(out, bt >= 0 ? bt : t->unk);
        }
    }
    free(sym);
    free(h.v);
    return bad ? rw_errorf(err, RW_ERR_NOMEM, "out of memory while tokenizing") : RW_OK;
}
