/* arena.c - chunked bump allocator. Big requests get a chunk of their own. */
#include "base/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_CHUNK (256 * 1024)

struct rw_arena_chunk {
    rw_arena_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char mem[];
};

void *rw_arena_alloc(rw_arena *a, size_t size) {
    size_t need = (size + 15) & ~(size_t)15;
    if (need < size) return NULL;
    rw_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > ARENA_CHUNK ? need : ARENA_CHUNK;
        if (cap > SIZE_MAX - sizeof *c) return NULL;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->cap = cap;
        c->used = 0;
        /* A dedicated big chunk goes behind the head so the head keeps
         * serving small requests. */
        if (cap > ARENA_CHUNK && a->head) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = c->mem + c->used;
    c->used += need;
    a->used_bytes += size;
    memset(p, 0, size);
    return p;
}

void *rw_arena_calloc(rw_arena *a, size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    return rw_arena_alloc(a, n * size);
}

char *rw_arena_strndup(rw_arena *a, const char *s, size_t n) {
    if (n == SIZE_MAX) return NULL;
    char *p = rw_arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void rw_arena_free(rw_arena *a) {
    rw_arena_chunk *c = a->head;
    while (c) {
        rw_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->used_bytes = 0;
}
