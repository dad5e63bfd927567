/* bpe.c - byte-level BPE (tokenizer.ggml.model = "gpt2").
 *
 * Each pre-tokenized word is spelled in GPT-2's byte alphabet, split into
 * one symbol per byte, and merged pair by pair: always the adjacent pair
 * whose merge has the lowest rank, the leftmost such pair on ties. A binary
 * heap holds the candidate pairs; a popped pair whose symbols changed since
 * it was pushed is stale and skipped. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_int.h"

typedef struct {
    int prev, next; /* neighbours in the word, -1 at the ends */
    size_t start;   /* byte offset in the encoded word */
    size_t n;       /* bytes; 0 once merged into its left neighbour */
} symbol;

typedef struct {
    const rw_tokenizer *t;
    const char *word; /* encoded */
    symbol *sym;
    tok_heap h;
    char *key;        /* scratch for "left right" */
    size_t key_cap;
} session;

static int try_pair(session *s, int left, int right) {
    if (left < 0 || right < 0) return 0;
    const symbol *a = &s->sym[left], *b = &s->sym[right];
    size_t need = a->n + b->n + 1;
    if (need > s->key_cap) {
        char *k = realloc(s->key, need * 2);
        if (!k) return -1;
        s->key = k;
        s->key_cap = need * 2;
    }
    memcpy(s->key, s->word + a->start, a->n);
    s->key[a->n] = ' ';
    memcpy(s->key + a->n + 1, s->word + b->start, b->n);
    int32_t rank = str_map_get(&s->t->merges, s->key, need);
    if (rank < 0) return 0;
    return tok_heap_push(&s->h, (tok_pair){(float)rank, left, right, a->n + b->n});
}

/* Emits the ids of one encoded symbol: its token, or one token per byte. */
static int emit(const rw_tokenizer *t, const char *p, size_t n, id_list *out) {
    int32_t id = str_map_get(&t->vocab, p, n);
    if (id >= 0) return ids_push(out, id);
    for (size_t i = 0; i < n;) {
        unsigned cp;
        unsigned char c = (unsigned char)p[i];
        if (c < 0x80) { cp = c; i += 1; }
        else { cp = (unsigned)(c & 0x1f) << 6 | ((unsigned char)p[i + 1] & 0x3f); i += 2; }
        int b = cp < 512 ? t->char_byte[cp] : -1;
        int32_t bt = b >= 0 ? t->byte_token[b] : -1;
        if (bt >= 0 && ids_push(out, bt)) return -1;
    }
    return 0;
}

static int bpe_word(session *s, const char *raw, size_t len, char *enc, id_list *out) {
    const rw_tokenizer *t = s->t;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)raw[i];
        memcpy(enc + n, t->byte_char[b], t->byte_char_len[b]);
        s->sym[i] = (symbol){(int)i - 1, i + 1 < len ? (int)i + 1 : -1, n, t->byte_char_len[b]};
        n += t->byte_char_len[b];
    }
    s->word = enc;
    if (t->ignore_merges) {
        int32_t id = str_map_get(&t->vocab, enc, n);
        if (id >= 0) return ids_push(out, id);
    }
    s->h.n = 0;
    for (size_t i = 0; i + 1 < len; i++)
        if (try_pair(s, (int)i, (int)i + 1)) return -1;
    while (s->h.n) {
        tok_pair bg = tok_heap_pop(&s->h);
        symbol *l = &s->sym[bg.left], *r = &s->sym[bg.right];
        if (l->n == 0 || r->n == 0 || l->next != bg.right || l->n + r->n != bg.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = bg.left;
        if (try_pair(s, l->prev, bg.left) || try_pair(s, bg.left, l->next)) return -1;
    }
    for (int i = 0; i >= 0; i = s->sym[i].next)
        if (emit(t, enc + s->sym[i].start, s->sym[i].n, out)) return -1;
    return 0;
}

rw_status rw_tok__bpe(const rw_tokenizer *t, const char *text, size_t len, id_list *out, rw_error *err) {
    size_t *starts = NULL, *lens = NULL, n = 0;
    rw_status st = rw_tok__pre_split(t, text, len, &starts, &lens, &n, err);
    if (st) return st;
    size_t max_len = 0;
    for (size_t i = 0; i < n; i++)
        if (lens[i] > max_len) max_len = lens[i];
    session s = {.t = t};
    s.sym = malloc((max_len ? max_len : 1) * sizeof *s.sym);
    char *enc = malloc(2 * max_len + 1);
    int bad = !s.sym || !enc;
    for (size_t i = 0; i < n && !bad; i++) bad = bpe_word(&s, text + starts[i], lens[i], enc, out);
    free(s.sym);
    free(s.h.v);
    free(s.key);
    free(enc);
    free(starts);
    free(lens);
    return bad ? rw_errorf(err, RW_ERR_NOMEM, "out of memory while tokenizing") : RW_OK;
}
