/* bpe.c - byte-level BPE (tokenizer.ggml.model = "gpt2").
 *
 * Each pre-tokenized word is spelled in GPT-2's byte alphabet, split into
 * one symbol per byte, and merged pair by pair: always the adjacent pair
 * whose merge has the lowest rank, the leftmost such pair on ties (llama.cpp's
 * order). Symbols carry their token id, so a merge is one lookup in the
 * (left id, right id) pair map, which also gives the merged token.
 *
 * Short words (almost all of them) keep their symbols in small arrays and
 * rescan for the best pair after each merge; long words use the heap of
 * pair_heap.c so that a pathological 64 KiB word stays O(n log n). Within one
 * call, the ids of each distinct short word are remembered (a word cache):
 * ordinary text repeats its words a lot. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "tokenizer/tok_int.h"

/* Words up to this many bytes take the array path and may be cached. */
#define SHORT_WORD 48

typedef struct {
    int32_t id;     /* token of the symbol's text, -1 if it is not a token */
    uint32_t start; /* byte offset in the encoded word */
    uint32_t n;     /* bytes in the encoded word; 0 once merged into its left neighbour */
    int prev, next; /* heap path only: neighbours, -1 at the ends */
} symbol;

/* ---- the per-call word cache ---- */

typedef struct {
    uint32_t key_off, key_len; /* the raw word in keys */
    uint32_t ids_off, n_ids;   /* its token ids in ids */
} cache_slot;

typedef struct {
    cache_slot *slot; /* owned; key_len == 0 marks an empty slot */
    size_t cap, used;
    char *keys;       /* owned */
    size_t keys_len, keys_cap;
    id_list ids;      /* owned (ids.v) */
} word_cache;

#define CACHE_SLOTS (1u << 15) /* at most half of them filled */

size_t rw_tok__cache_min_words = 64; /* below, setting the cache up costs more than it saves */

static uint64_t word_hash(const char *s, size_t n) {
    uint64_t h = rw_hash_bytes(0x9e3779b97f4a7c15ull ^ n, s, n); /* the length seeds it */
    return h ^ (h >> 32);
}

static cache_slot *cache_find(word_cache *c, const char *w, size_t n, uint64_t h) {
    size_t i = (size_t)h & (c->cap - 1);
    while (c->slot[i].key_len) {
        cache_slot *s = &c->slot[i];
        if (s->key_len == n && !memcmp(c->keys + s->key_off, w, n)) return s;
        i = (i + 1) & (c->cap - 1);
    }
    return &c->slot[i]; /* the empty slot where it would go */
}

/* Remembers the ids out->v[from..out->n) for word w (best effort: a full
 * cache or no memory just stops remembering). */
static void cache_add(word_cache *c, cache_slot *s, const char *w, size_t n, const id_list *out, size_t from) {
    if (2 * (c->used + 1) > c->cap) return;
    if (c->keys_len + n > c->keys_cap) {
        size_t cap = c->keys_cap ? 2 * c->keys_cap : 1u << 16;
        char *k = realloc(c->keys, cap);
        if (!k) return;
        c->keys = k;
        c->keys_cap = cap;
    }
    size_t ids_off = c->ids.n;
    for (size_t i = from; i < out->n; i++)
        if (rw_tok__ids_push(&c->ids, out->v[i])) {
            c->ids.n = ids_off;
            return;
        }
    memcpy(c->keys + c->keys_len, w, n);
    *s = (cache_slot){(uint32_t)c->keys_len, (uint32_t)n, (uint32_t)ids_off, (uint32_t)(out->n - from)};
    c->keys_len += n;
    c->used++;
}

/* ---- merging ---- */

/* Rank of merging symbols a and b (INT_MAX if no merge), and the merged
 * token in *merged. Symbols that are not tokens go through the string map
 * of the merges whose sides are not tokens. */
static int32_t pair_rank(const rw_tokenizer *t, const char *enc, const symbol *a, const symbol *b, int32_t *merged,
                         char *scratch) {
    if (a->id >= 0 && b->id >= 0) {
        const pair_slot *p = rw_tok__pair_map_get(&t->merges, a->id, b->id);
        if (!p) return INT_MAX;
        *merged = p->merged;
        return p->rank;
    }
    if (!t->odd_merges.cap) return INT_MAX;
    memcpy(scratch, enc + a->start, a->n);
    scratch[a->n] = ' ';
    memcpy(scratch + a->n + 1, enc + b->start, b->n);
    int32_t rank = rw_tok__str_map_get(&t->odd_merges, scratch, a->n + 1 + b->n);
    if (rank < 0) return INT_MAX;
    *merged = rw_tok__str_map_get(&t->vocab, enc + a->start, a->n + b->n); /* a and b are adjacent in enc */
    return rank;
}

/* Emits one final symbol: its token, or one byte token per byte of its
 * text when the text is not a token (as llama.cpp). */
static int emit(const rw_tokenizer *t, const char *enc, const symbol *s, id_list *out) {
    if (s->id >= 0) return rw_tok__ids_push(out, s->id);
    const char *p = enc + s->start;
    if (t->raw_utf8) { /* the text is the bytes themselves */
        for (size_t i = 0; i < s->n; i++) {
            int32_t bt = t->byte_token[(unsigned char)p[i]];
            if (bt >= 0 && rw_tok__ids_push(out, bt)) return -1;
        }
        return 0;
    }
    for (size_t i = 0; i < s->n;) {
        unsigned c = (unsigned char)p[i], cp;
        if (c < 0x80 || i + 1 >= s->n) {
            cp = c;
            i += 1;
        } else {
            cp = (c & 0x1f) << 6 | ((unsigned char)p[i + 1] & 0x3f);
            i += 2;
        }
        int b = cp < 512 ? t->char_byte[cp] : -1;
        int32_t bt = b >= 0 ? t->byte_token[b] : -1;
        if (bt >= 0 && rw_tok__ids_push(out, bt)) return -1;
    }
    return 0;
}

/* Short words: symbols in an array, the best pair found by a scan. */
static int merge_short(const rw_tokenizer *t, const char *enc, symbol *sym, int n, id_list *out, char *scratch) {
    int32_t rank[SHORT_WORD], merged[SHORT_WORD];
    for (int i = 0; i + 1 < n; i++) rank[i] = pair_rank(t, enc, &sym[i], &sym[i + 1], &merged[i], scratch);
    while (n > 1) {
        int best = -1;
        int32_t best_rank = INT_MAX;
        for (int i = 0; i + 1 < n; i++)
            if (rank[i] < best_rank) {
                best_rank = rank[i];
                best = i;
            }
        if (best < 0) break;
        sym[best].id = merged[best];
        sym[best].n += sym[best + 1].n;
        memmove(&sym[best + 1], &sym[best + 2], (size_t)(n - best - 2) * sizeof *sym);
        memmove(&rank[best + 1], &rank[best + 2], (size_t)(n - best - 2) * sizeof *rank);
        memmove(&merged[best + 1], &merged[best + 2], (size_t)(n - best - 2) * sizeof *merged);
        n--;
        if (best > 0) rank[best - 1] = pair_rank(t, enc, &sym[best - 1], &sym[best], &merged[best - 1], scratch);
        if (best + 1 < n) rank[best] = pair_rank(t, enc, &sym[best], &sym[best + 1], &merged[best], scratch);
    }
    for (int i = 0; i < n; i++)
        if (emit(t, enc, &sym[i], out)) return -1;
    return 0;
}

/* Long words: linked symbols and a heap of candidate pairs; a popped pair
 * whose symbols changed since it was pushed is stale and skipped. */
static int push_pair(const rw_tokenizer *t, const char *enc, symbol *sym, tok_heap *h, int left, int right,
                     char *scratch) {
    if (left < 0 || right < 0) return 0;
    int32_t merged;
    int32_t rank = pair_rank(t, enc, &sym[left], &sym[right], &merged, scratch);
    if (rank == INT_MAX) return 0;
    return rw_tok__heap_push(h, (tok_pair){(float)rank, left, right, sym[left].n + sym[right].n});
}

static int merge_long(const rw_tokenizer *t, const char *enc, symbol *sym, int n, tok_heap *h, id_list *out,
                      char *scratch) {
    for (int i = 0; i < n; i++) {
        sym[i].prev = i - 1;
        sym[i].next = i + 1 < n ? i + 1 : -1;
    }
    h->n = 0;
    for (int i = 0; i + 1 < n; i++)
        if (push_pair(t, enc, sym, h, i, i + 1, scratch)) return -1;
    while (h->n) {
        tok_pair bg = rw_tok__heap_pop(h);
        symbol *l = &sym[bg.left], *r = &sym[bg.right];
        if (l->n == 0 || r->n == 0 || l->next != bg.right || l->n + r->n != bg.size) continue;
        int32_t merged;
        pair_rank(t, enc, l, r, &merged, scratch);
        l->id = merged;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = bg.left;
        if (push_pair(t, enc, sym, h, l->prev, bg.left, scratch) || push_pair(t, enc, sym, h, bg.left, l->next, scratch))
            return -1;
    }
    for (int i = 0; i >= 0; i = sym[i].next)
        if (emit(t, enc, &sym[i], out)) return -1;
    return 0;
}

typedef struct {
    symbol *sym;   /* one per byte of the longest word */
    char *enc;     /* the word in the byte alphabet (up to 2 bytes per byte) */
    char *scratch; /* "left right" keys: up to 2 * 2 bytes per byte + 1 */
    tok_heap h;
} buffers;

/* Raw UTF-8 BPE (gemma4): one symbol per character, by the length its lead
 * byte announces (as llama.cpp; an invalid lead may take a few bytes with it). */
static int raw_symbols(const rw_tokenizer *t, buffers *b, const char *raw, size_t len) {
    static const uint8_t len_of[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    memcpy(b->enc, raw, len);
    int n = 0;
    for (size_t i = 0; i < len;) {
        size_t l = len_of[(unsigned char)raw[i] >> 4];
        if (l > len - i) l = len - i;
        b->sym[n++] = (symbol){rw_tok__str_map_get(&t->vocab, raw + i, l), (uint32_t)i, (uint32_t)l, 0, 0};
        i += l;
    }
    return n;
}

static int bpe_word(const rw_tokenizer *t, buffers *b, const char *raw, size_t len, id_list *out) {
    size_t n = 0;
    int n_sym = (int)len;
    if (t->raw_utf8) {
        n = len;
        n_sym = raw_symbols(t, b, raw, len);
    } else {
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)raw[i];
            memcpy(b->enc + n, t->byte_char[c], t->byte_char_len[c]);
            b->sym[i] = (symbol){t->byte_token[c], (uint32_t)n, t->byte_char_len[c], 0, 0};
            n += t->byte_char_len[c];
        }
    }
    bool whole = t->ignore_merges; /* llama3 and co: a word that is a token is taken whole */
    if (t->newline_words) {         /* gemma4: so is a run of newlines */
        whole = true;
        for (size_t i = 0; i < len && whole; i++) whole = raw[i] == '\n';
    }
    if (whole) {
        int32_t id = rw_tok__str_map_get(&t->vocab, b->enc, n);
        if (id >= 0) return rw_tok__ids_push(out, id);
    }
    if (n_sym <= SHORT_WORD) return merge_short(t, b->enc, b->sym, n_sym, out, b->scratch);
    return merge_long(t, b->enc, b->sym, n_sym, &b->h, out, b->scratch);
}

rw_status rw_tok__bpe(const rw_tokenizer *t, const char *text, size_t len, id_list *out, rw_error *err) {
    size_t *starts = NULL, *lens = NULL, n = 0;
    rw_status st = rw_tok__pre_split(t, text, len, &starts, &lens, &n, err);
    if (st) return st;
    size_t max_len = 1;
    for (size_t i = 0; i < n; i++)
        if (lens[i] > max_len) max_len = lens[i];
    buffers b = {0};
    b.sym = malloc(max_len * sizeof *b.sym);
    b.enc = malloc(2 * max_len);
    b.scratch = malloc(4 * max_len + 1);
    word_cache c = {0};
    bool use_cache = n >= rw_tok__cache_min_words;
    if (use_cache) {
        c.cap = 64;
        while (c.cap < 2 * n && c.cap < CACHE_SLOTS) c.cap *= 2;
        c.slot = calloc(c.cap, sizeof *c.slot);
        use_cache = c.slot != NULL;
    }
    int bad = !b.sym || !b.enc || !b.scratch;
    for (size_t i = 0; i < n && !bad; i++) {
        const char *w = text + starts[i];
        size_t wl = lens[i];
        if (!use_cache || wl > SHORT_WORD) {
            bad = bpe_word(t, &b, w, wl, out);
            continue;
        }
        cache_slot *s = cache_find(&c, w, wl, word_hash(w, wl));
        if (s->key_len) {
            for (uint32_t k = 0; k < s->n_ids && !bad; k++) bad = rw_tok__ids_push(out, c.ids.v[s->ids_off + k]);
            continue;
        }
        size_t from = out->n;
        bad = bpe_word(t, &b, w, wl, out);
        if (!bad) cache_add(&c, s, w, wl, out, from);
    }
    free(c.slot);
    free(c.keys);
    free(c.ids.v);
    free(b.sym);
    free(b.enc);
    free(b.scratch);
    free(b.h.v);
    free(starts);
    free(lens);
    return bad ? rw_errorf(err, RW_ERR_NOMEM, "out of memory while tokenizing") : RW_OK;
}
