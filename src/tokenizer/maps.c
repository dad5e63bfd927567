/* maps.c - the tokenizer's tables: the string map (token text -> id), the
 * pair map (merge pair -> rank and merged token) and the growing id list.
 * Every other file of the tokenizer uses them; they use none of it. */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "tokenizer/tok_int.h"

/* ---- string map ---- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = rw_hash_bytes(RW_HASH_INIT, s, n);
    return h ^ (h >> 29);
}

int rw_tok__str_map_init(str_map *m, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    m->cap = cap;
    m->keys = calloc(cap, sizeof *m->keys);
    m->lens = calloc(cap, sizeof *m->lens);
    m->vals = calloc(cap, sizeof *m->vals);
    return m->keys && m->lens && m->vals ? 0 : -1;
}

void rw_tok__str_map_free(str_map *m) {
    free(m->keys);
    free(m->lens);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

int32_t rw_tok__str_map_put(str_map *m, const char *k, uint32_t len, int32_t v) {
    size_t i = (size_t)hash_bytes(k, len) & (m->cap - 1);
    while (m->keys[i]) {
        if (m->lens[i] == len && !memcmp(m->keys[i], k, len)) return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = k;
    m->lens[i] = len;
    m->vals[i] = v;
    return -1;
}

int32_t rw_tok__str_map_get(const str_map *m, const char *k, size_t len) {
    if (!m->cap) return -1;
    size_t i = (size_t)hash_bytes(k, len) & (m->cap - 1);
    while (m->keys[i]) {
        if (m->lens[i] == len && !memcmp(m->keys[i], k, len)) return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

/* ---- pair map ---- */

static size_t pair_hash(uint64_t key, size_t cap) { return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1); }

int rw_tok__pair_map_init(pair_map *m, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    m->cap = cap;
    m->v = malloc(cap * sizeof *m->v);
    if (!m->v) return -1;
    for (size_t i = 0; i < cap; i++) m->v[i].rank = -1;
    return 0;
}

void rw_tok__pair_map_free(pair_map *m) {
    free(m->v);
    memset(m, 0, sizeof *m);
}

void rw_tok__pair_map_put(pair_map *m, int32_t left, int32_t right, int32_t rank, int32_t merged) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t i = pair_hash(key, m->cap);
    while (m->v[i].rank >= 0) {
        if (m->v[i].key == key) return;
        i = (i + 1) & (m->cap - 1);
    }
    m->v[i] = (pair_slot){key, rank, merged};
}

const pair_slot *rw_tok__pair_map_get(const pair_map *m, int32_t left, int32_t right) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t i = pair_hash(key, m->cap);
    while (m->v[i].rank >= 0) {
        if (m->v[i].key == key) return &m->v[i];
        i = (i + 1) & (m->cap - 1);
    }
    return NULL;
}

int rw_tok__ids_push(id_list *l, int32_t id) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        int32_t *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = id;
    return 0;
}
