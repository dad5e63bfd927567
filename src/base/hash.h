/* hash.h - the one hash function of rewind: 64-bit FNV-1a over bytes.
 * Used for hash-table keys (GGUF tensor names, vocabulary strings, BPE
 * word cache, the grammar's state sets) and for names and fingerprints
 * (prefix-cache files, state files, chat tool-call ids, synth's tensor
 * seeds). Not for anything an attacker must not predict. */
#ifndef RW_BASE_HASH_H
#define RW_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define RW_HASH_INIT 0xcbf29ce484222325ull /* FNV-1a's offset basis */

/* Continues hash h over n bytes at p (start with RW_HASH_INIT; chain calls
 * to hash several pieces as one). */
static inline uint64_t rw_hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

/* The hash of a NUL-terminated string. */
static inline uint64_t rw_hash_str(const char *s) {
    uint64_t h = RW_HASH_INIT;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

#endif
