/* arena.h - a bump allocator released whole.
 *
 * Used for structures built once and freed together (a parsed GGUF directory,
 * a render's values). Allocations are 16-byte aligned and zeroed. */
#ifndef RW_BASE_ARENA_H
#define RW_BASE_ARENA_H

#include <stddef.h>

typedef struct rw_arena_chunk rw_arena_chunk;

typedef struct {
    rw_arena_chunk *head; /* newest chunk first; owned */
    size_t used_bytes;    /* total requested, for accounting */
} rw_arena;

/* A zero-initialised rw_arena is empty and ready. */
void *rw_arena_alloc(rw_arena *a, size_t size); /* NULL on out of memory or overflow */
void *rw_arena_calloc(rw_arena *a, size_t n, size_t size);
char *rw_arena_strndup(rw_arena *a, const char *s, size_t n);
void rw_arena_free(rw_arena *a); /* frees every chunk; the arena is empty again */

#endif
