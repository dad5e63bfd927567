/* pcache.h - the prefix cache: sequences kept across requests, found again by shared
 * token prefix, reused exactly.
 *
 * Entries are finished sequences (models/model.h: tokens, every layer's
 * state, the recurrent layers' checkpoints and log) in a radix tree over
 * their token ids, with the logits of their last position. A lookup walks
 * the tree along the new prompt as far as it matches, then among the
 * entries below that point picks the one that restores the longest prefix
 * exactly without any matmul (the cache layer tells the restore point and
 * its cost before anything is done: rw_model_seq_rewind_cost). The request
 * starts from a copy of that entry cut back to the restore point and
 * computes only the rest. Exactness follows from the cache layer: a
 * sequence restored to n is bitwise the sequence that only ever saw n
 * tokens. A prompt equal to an entry's tokens recomputes nothing (the
 * entry's last logits come with it).
 *
 * Memory: one byte budget over every entry (KV, checkpoints, logs, logits);
 * the least recently used entries leave first (plain LRU, measured by
 * rewind bench chat). Entries share KV pages and recurrent checkpoints by
 * reference with the requests started from them, and so with the entries
 * those requests leave: a common prefix's pages are held once (cache/kv.h),
 * and the budget counts each shared block once (pcache_int.h). An entry whose tokens are a prefix of a newer one is
 * dropped when the newer one restores its whole length without a matmul
 * (its logits stay with the tree node), so an extended conversation is kept
 * once. Sequences of running requests are never the cache's: a lookup
 * hands out a copy (sharing the entry's pages until it writes into one).
 *
 * Disk tier (optional; pcache_disk.c, docs/persistence.md): entries are
 * written to the folder as one file each (<key>-<hash>-<n>.rwc: the
 * sequence in models/seq_file.c's format, its last logits and its draft's
 * state, every part checksummed, written atomically), by a writer thread:
 * soon after they are inserted (write-through, after write_delay seconds)
 * or when the memory tier evicts them (evict mode). A reader thread scans
 * the folder and loads files back before a request is served from them
 * (rw_pcache_prepare), so the caller's thread does no disk I/O. The folder
 * holds at most dir_bytes of our files (temporary ones included); the
 * least recently used go first, by their modification time, which is also
 * how several processes sharing one folder agree on what is old. A file
 * that fails validation is removed and counted, never trusted; files of
 * other models or configurations (the key: the model's fingerprint and the
 * KV type) and files this configuration cannot use (longer than its
 * context) are left alone. Several caches (processes) may share a folder:
 * a miss checks whether the folder changed and reads only new files.
 *
 * Thread safety: one thread at a time (the engine's scheduler); the stats
 * may be read from any thread (they are copied under a lock).
 */
#ifndef RW_PCACHE_PCACHE_H
#define RW_PCACHE_PCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "models/model.h"

typedef struct rw_pcache rw_pcache;

typedef enum {
    RW_PCACHE_WRITE_THROUGH = 0, /* every entry reaches the folder write_delay seconds after its insert */
    RW_PCACHE_WRITE_EVICT,       /* an entry is written only when the memory tier evicts it (and at shutdown) */
} rw_pcache_write_mode;

typedef struct {
    size_t mem_bytes;   /* budget of the memory tier; 0 = no memory tier (every lookup misses) */
    const char *dir;    /* disk tier folder (created if missing), or NULL */
    size_t dir_bytes;   /* budget of the disk tier */
    const rw_model *draft; /* speculative decoding's draft model, or NULL: the disk tier then keeps no draft state */
    rw_pcache_write_mode write_mode;
    double write_delay; /* seconds between an insert and its write-through (0 = at once) */
    double flush_seconds; /* rw_pcache_free writes what is pending for at most this long (0 = 10) */
    void (*notify)(void *ctx); /* may be NULL: called from an I/O thread when something the caller may wait
                                  for is done (a load, a folder check); must be quick */
    void *notify_ctx;
} rw_pcache_config;

/* rw_pcache_reason and rw_pcache_reason_name are public (include/rewind.h,
 * the engine's statistics). */

/* Per request. */
typedef struct {
    int64_t prompt_tokens;
    int64_t from_memory;   /* prompt tokens restored from a memory entry */
    int64_t from_disk;     /* from a disk entry */
    int64_t recomputed;    /* prompt tokens the request computes */
    int64_t shared;        /* longest prefix some entry shared with the prompt */
    rw_pcache_reason reason; /* why recomputed > prompt_tokens - shared, or why nothing was reused */
} rw_pcache_usage;

/* Process-wide counters: rw_pcache_stats, public (include/rewind.h). */

/* m outlives the cache; sequences it makes use kv_type and max_ctx (which
 * must match the sequences given to insert). The caller owns *out. */
rw_status rw_pcache_new(rw_model *m, rw_kv_type kv_type, int64_t max_ctx, const rw_pcache_config *cfg, rw_pcache **out,
                        rw_error *err);
/* Writes what is pending and every entry in memory not yet in the folder
 * (at most cfg.flush_seconds), then frees. No-op on NULL. */
void rw_pcache_free(rw_pcache *c);

/* Gets the disk tier ready for a lookup of prompt[0..n) without blocking:
 * a folder check, and the load of the file that would serve more of the
 * prompt than memory does. false: not yet, call again (the config's notify
 * says when something finished); true: rw_pcache_acquire will do no disk
 * I/O. *w is the request's (zero it before the first call). Always true
 * without a disk tier. */
typedef struct {
    uint64_t scan_gen;
    int n_loads;
    bool started;
} rw_pcache_wait;
bool rw_pcache_prepare(rw_pcache *c, const int32_t *prompt, int64_t n, rw_pcache_wait *w);

/* Writes every queued write now and waits for them (at most seconds);
 * with all, also every entry in memory not in the folder. For tests and
 * shutdown. */
void rw_pcache_flush(rw_pcache *c, bool all, double seconds);

/* A sequence for prompt[0..n): a copy of the best entry cut back to its
 * exact restore point, or a fresh empty one. *reused = its length. When the
 * whole prompt was an entry's tokens, *reused = n and logits (n_vocab floats,
 * may be NULL, then that case restores n-1 tokens instead) get its last
 * logits. The caller owns *out. u may be NULL. With a disk tier it first
 * waits for rw_pcache_prepare (the engine calls prepare until it is ready,
 * so that it never waits here). */
rw_status rw_pcache_acquire(rw_pcache *c, const int32_t *prompt, int64_t n, rw_threadpool *pool, rw_model_seq **out,
                            int64_t *reused, float *logits, rw_pcache_usage *u, rw_error *err);

/* Keeps seq (the cache takes it; it may free it at once) with the logits of
 * its last position (n_vocab floats, copied; may be NULL) and, optionally,
 * those after its first at_pos tokens (at_logits; the end of a request's
 * prompt, so that the same prompt again recomputes nothing). Evicts as
 * needed. */
void rw_pcache_insert(rw_pcache *c, rw_model_seq *seq, const float *last_logits, int64_t at_pos,
                      const float *at_logits);

/* Speculative decoding (engine.h): an entry may also keep the draft
 * model's sequence of the request that left it, so that a hit restores the
 * draft's state too. It is counted in the same byte budget and evicted
 * with its entry; the disk tier writes it in the entry's file and reads it
 * back when the cache was made with the draft model
 * (rw_pcache_config.draft), also after a restart (a cache without the
 * draft model ignores it). A file whose draft part fails validation is
 * invalid as a whole (removed, never trusted).
 * It is kept only when its
 * tokens are a prefix of the entry's and is handed out only cut back to an
 * exact restore point (no matmul) within what the prompt and the entry
 * share: *draft_out (may be NULL; the caller owns it) is that copy, or NULL
 * when the chosen entry has none. The draft state need not reach as far as
 * the target's (a speculative decoder catches the draft up: spec.h). */
rw_status rw_pcache_acquire_with_draft(rw_pcache *c, const int32_t *prompt, int64_t n, rw_threadpool *pool,
                                       rw_model_seq **out, rw_model_seq **draft_out, int64_t *reused, float *logits,
                                       rw_pcache_usage *u, rw_error *err);
/* rw_pcache_insert with the draft's sequence (taken; may be NULL; freed
 * unless its tokens are a non-empty prefix of seq's). */
void rw_pcache_insert_with_draft(rw_pcache *c, rw_model_seq *seq, rw_model_seq *draft, const float *last_logits,
                                 int64_t at_pos, const float *at_logits);

void rw_pcache_get_stats(rw_pcache *c, rw_pcache_stats *out);

/* For tools and tests (rewind cache-verify): reads and fully verifies every
 * file of this model and configuration in the folder, on the caller's
 * thread; files that fail are removed. *n_ok, *n_invalid: how many;
 * *n_unreadable: files that could not be read (kept). */
rw_status rw_pcache_verify(rw_pcache *c, int *n_ok, int *n_invalid, int *n_unreadable, rw_error *err);

/* For tests: recounts the memory tier from scratch (every entry's blocks)
 * and compares with the running figures; RW_ERR_INTERNAL if they differ or
 * the memory tier is over its budget. */
rw_status rw_pcache_check(rw_pcache *c, rw_error *err);

#endif
