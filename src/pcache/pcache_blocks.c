/* pcache_blocks.c - the multiset of shared blocks of pcache_int.h:
 * an open-addressing hash table keyed by block identity, deletion by
 * backward shift (no tombstones), load factor at most 1/2. */
#include <stdlib.h>

#include "pcache/pcache_int.h"

static size_t hash_of(const void *id, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)id;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static rw_pcache__block *find(const rw_pcache__blocks *b, const void *id) {
    if (!b->cap) return NULL;
    for (size_t i = hash_of(id, b->cap);; i = (i + 1) & (b->cap - 1)) {
        if (!b->slot[i].id) return NULL;
        if (b->slot[i].id == id) return &b->slot[i];
    }
}

/* Puts a block known to be absent into a table with room. */
static void place(rw_pcache__block *slot, size_t cap, rw_pcache__block blk) {
    size_t i = hash_of(blk.id, cap);
    while (slot[i].id) i = (i + 1) & (cap - 1);
    slot[i] = blk;
}

static bool reserve(rw_pcache__blocks *b, size_t n) {
    if (2 * n <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (2 * n > cap) cap *= 2;
    rw_pcache__block *slot = calloc(cap, sizeof *slot);
    if (!slot) return false;
    for (size_t i = 0; i < b->cap; i++)
        if (b->slot[i].id) place(slot, cap, b->slot[i]);
    free(b->slot);
    b->slot = slot;
    b->cap = cap;
    return true;
}

const rw_pcache__block *rw_pcache__blocks_find(const rw_pcache__blocks *b, const void *id) { return find(b, id); }

void rw_pcache__blocks_free(rw_pcache__blocks *b) {
    free(b->slot);
    *b = (rw_pcache__blocks){0};
}

static void count_one(void *ctx, const void *block, size_t bytes, bool kv) {
    (void)block, (void)bytes, (void)kv;
    (*(size_t *)ctx)++;
}

static void add_one(void *ctx, const void *block, size_t bytes, bool kv) {
    rw_pcache__blocks *b = ctx;
    rw_pcache__block *x = find(b, block);
    if (x) {
        x->holders++;
        return;
    }
    place(b->slot, b->cap, (rw_pcache__block){.id = block, .holders = 1, .kv = kv, .bytes = bytes});
    b->used++;
    *(kv ? &b->bytes_kv : &b->bytes_rec) += bytes;
}

bool rw_pcache__blocks_add(rw_pcache__blocks *b, const rw_model_seq *s) {
    size_t n = 0;
    rw_model_seq_each_block(s, count_one, &n);
    if (!reserve(b, b->used + n)) return false; /* room for all: nothing below can fail */
    rw_model_seq_each_block(s, add_one, b);
    return true;
}

/* Empties slot i and moves later members of its probe run back into the
 * hole, so that every member stays reachable from its home slot. */
static void delete_at(rw_pcache__blocks *b, size_t i) {
    const size_t mask = b->cap - 1;
    size_t hole = i;
    for (size_t j = (i + 1) & mask; b->slot[j].id; j = (j + 1) & mask) {
        const size_t home = hash_of(b->slot[j].id, b->cap);
        /* j may move to the hole if its home is not in (hole, j] cyclically */
        const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            b->slot[hole] = b->slot[j];
            hole = j;
        }
    }
    b->slot[hole] = (rw_pcache__block){0};
}

static void remove_one(void *ctx, const void *block, size_t bytes, bool kv) {
    (void)bytes, (void)kv;
    rw_pcache__blocks *b = ctx;
    rw_pcache__block *x = find(b, block);
    if (!x) return; /* not counted: cannot happen for a sequence that was added */
    if (--x->holders > 0) return;
    *(x->kv ? &b->bytes_kv : &b->bytes_rec) -= x->bytes;
    b->used--;
    delete_at(b, (size_t)(x - b->slot));
}

void rw_pcache__blocks_remove(rw_pcache__blocks *b, const rw_model_seq *s) { rw_model_seq_each_block(s, remove_one, b); }

typedef struct {
    size_t kv, rec;
} by_kind;

static void sum_one(void *ctx, const void *block, size_t bytes, bool kv) {
    (void)block;
    by_kind *k = ctx;
    *(kv ? &k->kv : &k->rec) += bytes;
}

void rw_pcache__seq_block_bytes(const rw_model_seq *s, size_t *kv, size_t *rec) {
    by_kind k = {0};
    rw_model_seq_each_block(s, sum_one, &k);
    *kv = k.kv, *rec = k.rec;
}
