/* pair_heap.c - the candidate merges of BPE and SentencePiece: a binary
 * min-heap on (key, left), so the best pair comes first and, among equal
 * keys, the leftmost (both algorithms' tie rule). BPE keys are merge ranks,
 * SentencePiece keys are negated token scores. */
#include <stdlib.h>

#include "tokenizer/tok_int.h"

static bool before(const tok_pair *a, const tok_pair *b) { return a->key != b->key ? a->key < b->key : a->left < b->left; }

int rw_tok__heap_push(tok_heap *h, tok_pair p) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        tok_pair *v = realloc(h->v, cap * sizeof *v);
        if (!v) return -1;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && before(&p, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = p;
    return 0;
}

tok_pair rw_tok__heap_pop(tok_heap *h) {
    tok_pair top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}
