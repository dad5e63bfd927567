/* prefix_cache_int.h - private to the prefix cache: counting blocks shared
 * between entries once.
 *
 * Entries are sequences that share KV pages and recurrent checkpoints by
 * reference (cache/state.h each_block): two entries cloned from one request
 * hold the same physical pages for their common prefix. The cache's byte
 * budget counts what is in memory, so a block held by several entries is
 * counted once: pc_blocks is a multiset of block identities (how many
 * entries hold each) with the bytes of the distinct ones. Adding or
 * removing an entry costs O(its blocks).
 *
 * Invariant (checked by rw_pcache_check): for the entries in memory, the
 * multiset holds exactly the blocks their sequences list, each with the
 * number of entries listing it; bytes_kv + bytes_rec = the bytes of the
 * distinct ones. An entry's sequence never changes while it is in the cache
 * (requests work on clones; a clone writing into a shared KV page copies it
 * first), so its blocks stay what they were when it was added.
 */
#ifndef RW_ENGINE_PREFIX_CACHE_INT_H
#define RW_ENGINE_PREFIX_CACHE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "models/model.h"

typedef struct {
    const void *id; /* NULL: empty slot */
    uint32_t holders;
    bool kv;
    size_t bytes;
} pc_block;

typedef struct {
    pc_block *slot; /* open addressing, linear probing; owned */
    size_t cap;     /* a power of two, or 0 */
    size_t used;
    size_t bytes_kv, bytes_rec; /* distinct blocks */
} pc_blocks;

void pc_blocks_free(pc_blocks *b);
/* Counts every block of s once more. false on out of memory (b unchanged). */
bool pc_blocks_add(pc_blocks *b, const rw_model_seq *s);
/* Undoes pc_blocks_add(b, s) for the same s. */
void pc_blocks_remove(pc_blocks *b, const rw_model_seq *s);
/* The entry for block id, or NULL if no entry holds it. */
const pc_block *pc_blocks_find(const pc_blocks *b, const void *id);
/* Bytes of s's shared blocks by kind (each as often as s lists it). */
void pc_seq_block_bytes(const rw_model_seq *s, size_t *kv, size_t *rec);

#endif
