/* pcache_int.h - private to the prefix cache (src/pcache): its data
 * structures and the functions one of its files gives another.
 *
 * The module is split by concern:
 *   pcache_tree.c    the radix tree over token ids (nodes, edges, walk)
 *   pcache_blocks.c  the multiset of blocks shared between entries
 *   pcache_lru.c     accounting, eviction (memory LRU), ghosts, stats
 *   pcache.c         entries: lookup (prepare / acquire), insert, life cycle
 *   pcache_disk.c    the disk tier: file format, the writer and reader
 *                    threads, folder scans, the disk byte budget
 *
 * Threads. The tree, the entries and every field of rw_pcache outside
 * `io` belong to the caller's thread (the engine's scheduler). The disk
 * tier runs on two threads of its own (a writer: writes, deletes, touches
 * and the disk budget; a reader: folder scans and loads), so no disk I/O
 * happens on the caller's thread. They talk through jobs (rw_pcache__job) under
 * io.mu: the caller queues writes, deletes and loads; the I/O threads put
 * finished jobs and news about the folder (files found, files gone) on the
 * done list, which the caller applies at its next call (rw_pcache__apply).
 *
 * Shared blocks. Entries are sequences that share KV pages and recurrent
 * checkpoints by reference (cache/state.h each_block): two entries cloned
 * from one request hold the same physical pages for their common prefix.
 * The cache's byte budget counts what is in memory, so a block held by
 * several entries is counted once: rw_pcache__blocks is a multiset of block
 * identities (how many entries hold each) with the bytes of the distinct
 * ones. Adding or removing an entry costs O(its blocks).
 *
 * Invariant (checked by rw_pcache_check): for the entries in memory, the
 * multiset holds exactly the blocks their sequences list, each with the
 * number of entries listing it; bytes_kv + bytes_rec = the bytes of the
 * distinct ones. An entry's sequence never changes while it is in the cache
 * (requests work on clones; a clone writing into a shared KV page copies it
 * first), so its blocks stay what they were when it was added - which is
 * also why the writer thread may serialize it while the caller's thread
 * clones it (reference counts are atomic, cache/kv.h).
 */
#ifndef RW_PCACHE_PCACHE_INT_H
#define RW_PCACHE_PCACHE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "models/model.h"
#include "pcache/pcache.h"

/* ---- shared blocks (pcache_blocks.c) ---- */

typedef struct {
    const void *id; /* NULL: empty slot */
    uint32_t holders;
    bool kv;
    size_t bytes;
} rw_pcache__block;

typedef struct {
    rw_pcache__block *slot; /* open addressing, linear probing; owned */
    size_t cap;     /* a power of two, or 0 */
    size_t used;
    size_t bytes_kv, bytes_rec; /* distinct blocks */
} rw_pcache__blocks;

void rw_pcache__blocks_free(rw_pcache__blocks *b);
/* Counts every block of s once more. false on out of memory (b unchanged). */
bool rw_pcache__blocks_add(rw_pcache__blocks *b, const rw_model_seq *s);
/* Undoes rw_pcache__blocks_add(b, s) for the same s. */
void rw_pcache__blocks_remove(rw_pcache__blocks *b, const rw_model_seq *s);
/* The entry for block id, or NULL if no entry holds it. */
const rw_pcache__block *rw_pcache__blocks_find(const rw_pcache__blocks *b, const void *id);
/* Bytes of s's shared blocks by kind (each as often as s lists it). */
void rw_pcache__seq_block_bytes(const rw_model_seq *s, size_t *kv, size_t *rec);

/* ---- entries and the tree ---- */

#define PC_NAME_MAX 64 /* "<key 16 hex>-<token hash 16 hex>-<n>.rwc" */
#define PC_MAX_CANDIDATES 32
#define PC_MAX_GHOSTS 256

typedef struct rw_pcache__node rw_pcache__node;
typedef struct rw_pcache__job rw_pcache__job;

/* Entry states: in memory (seq), in the folder (on_disk), being written
 * (write), being loaded (load), any of them at once; or a ghost (none:
 * evicted for good, kept only so that a later miss can say "evicted"; at
 * most PC_MAX_GHOSTS, oldest first out). */
typedef struct {
    rw_pcache__node *node;
    rw_model_seq *seq;   /* owned; NULL when not in memory */
    rw_model_seq *draft; /* owned, may be NULL: a draft model's sequence over a prefix of seq's tokens */
    size_t mem_bytes;    /* in memory: bytes of seq outside its shared blocks (counted in the cache's blocks) */
    size_t own_kv, own_rec, full_bytes;      /* the same split by kind, and rw_model_seq_bytes */
    size_t draft_bytes, draft_kv, draft_rec; /* draft: rw_model_seq_bytes and its split by kind */
    char name[PC_NAME_MAX]; /* its file's name in the folder (a function of the tokens) */
    bool on_disk;        /* the folder holds its file (as far as the I/O threads last said) */
    size_t disk_bytes;
    rw_pcache__job *write;       /* its queued or running write, or NULL */
    rw_pcache__job *load;        /* its queued or running load, or NULL */
    bool from_disk;      /* seq was loaded from the folder and has served no request yet */
    double loaded_at;    /* when (monotonic seconds): kept from eviction for a while, for the request waiting */
    bool invalid;        /* its file failed validation (a later miss says disk_invalid) */
    char *obsolete;      /* owned, may be NULL: names of files this entry made redundant ('\n'-separated),
                            deleted once its own file is written */
    uint64_t last_used;
} rw_pcache__entry;

struct rw_pcache__node {
    rw_pcache__node *parent;
    rw_pcache__node **child; /* owned array of owned nodes */
    int n_child, cap_child;
    int32_t *edge; /* owned */
    int64_t edge_len, depth;
    rw_pcache__entry *entry; /* owned, or NULL */
    float *logits;   /* owned [n_vocab], logits after the prefix ending here, or NULL */
};

/* ---- the disk tier's jobs ---- */

typedef enum {
    PC_JOB_WRITE,   /* caller -> writer: write an entry's file */
    PC_JOB_DELETE,  /* caller -> writer: remove a file */
    PC_JOB_TOUCH,   /* caller -> writer: mark a file used (its mtime: the LRU clock shared by processes) */
    PC_JOB_LOAD,    /* caller -> reader: read and verify an entry's file */
    PC_JOB_FOUND,   /* I/O -> caller: a file of ours appeared in the folder */
    PC_JOB_GONE,    /* I/O -> caller: a file disappeared (another process, or the budget) */
} rw_pcache__job_kind;

struct rw_pcache__job {
    rw_pcache__job *next;
    rw_pcache__job_kind kind;
    rw_pcache__entry *e; /* the caller's entry (WRITE, LOAD); NULL once it is gone (set under io.mu) */
    char name[PC_NAME_MAX];
    double due;  /* WRITE: monotonic seconds before which it waits */
    bool running;  /* taken by an I/O thread (under io.mu) */
    bool finished; /* on the done list: it no longer reads its sequences (under io.mu) */
    /* WRITE: the entry's sequences, borrowed from it (read only) until
     * owned is set (under io.mu: the entry let go of them); then the job's,
     * freed by the caller's thread when the job comes back */
    rw_model_seq *seq, *draft;
    bool owned;
    float *logits;  /* WRITE: owned copy of the entry's last logits, or NULL; LOAD: the file's, handed over */
    char *obsolete; /* WRITE: owned list of names to delete after the write */
    /* results */
    rw_status st;   /* LOAD / WRITE: RW_OK, or why not */
    bool invalid;   /* LOAD: the file failed validation (removed) */
    char msg[256];
    size_t bytes;   /* WRITE, FOUND: the file's size */
    rw_model_seq *out_seq, *out_draft; /* LOAD: the decoded sequences (owned until applied) */
    int32_t *tokens; /* FOUND: owned token ids */
    int64_t n_tokens;
};

typedef struct {
    char name[PC_NAME_MAX];
    size_t bytes;
    struct timespec mtime;
    bool seen;      /* scan bookkeeping */
    uint64_t added; /* the listing generation during which it was added (a listing never drops newer ones) */
} rw_pcache__file;

typedef struct {
    bool on;
    pthread_t writer, reader;
    bool writer_started, reader_started;
    pthread_mutex_t mu;
    pthread_cond_t wake_writer, wake_reader, done_cv;
    bool stopping;
    bool flush;          /* writes are due now (shutdown, rw_pcache_flush) */
    rw_pcache__job *writes;      /* queued writes, deletes and touches (FIFO) */
    rw_pcache__job *loads;       /* queued loads (FIFO) */
    rw_pcache__job *done;        /* finished jobs and news for the caller (FIFO) */
    int n_busy;          /* jobs taken by an I/O thread and not yet done */
    int n_owned;         /* queued or running writes that own their sequences (bounded: memory) */
    int n_busy_writes;   /* writes taken by the writer and not yet done */
    uint64_t scan_want, scan_taken, scan_done; /* folder checks asked for, started and done (generations) */
    uint64_t list_gen;   /* listings started */
    double listed_wall;  /* wall-clock seconds when the last listing began */
    /* the folder's files with our key, as last seen (under mu) */
    rw_pcache__file *files;
    int n_files, cap_files;
    size_t files_bytes, tmp_bytes;
    struct timespec dir_mtime;
    double scanned_at;   /* monotonic seconds of the last listing, 0 = never */
    int n_foreign;       /* cache files of another model or configuration seen in the folder */
    pthread_mutex_t scan_mu; /* one folder scan at a time (both threads may scan) */
    uint64_t writes_ok, write_errors, read_errors, invalid, skipped, evicted;
    unsigned logged;     /* bit set of the kinds of disk trouble already logged (each said once) */
    char host[64];
} rw_pcache__io;

struct rw_pcache {
    rw_model *m;
    rw_kv_type kv_type;
    int64_t max_ctx, n_vocab;
    rw_pcache_config cfg;
    char *dir;
    char key[17]; /* hex: the model's fingerprint and the KV type; names our files */
    uint8_t fp[16];
    rw_pcache__node root;
    rw_pcache__entry **entries; /* every entry, owned through their nodes */
    int n_entries, cap_entries;
    uint64_t clock;
    size_t mem_bytes;  /* entries' own bytes (rw_pcache__entry.mem_bytes) */
    rw_pcache__blocks blocks;  /* the entries' shared blocks, each counted once */
    size_t own_kv, own_rec, full_bytes;      /* sums of the entries' */
    size_t draft_bytes, draft_kv, draft_rec; /* sums of the entries' draft sequences, each counted whole */
    size_t logits_bytes;
    int n_too_long;    /* files found that this configuration's context cannot hold (left alone) */
    rw_pcache_stats stats; /* kept by the caller's thread */
    rw_pcache_stats pub;   /* a copy for other threads, under stats_mu (the disk tier's own figures are read
                              from io at rw_pcache_get_stats) */
    int pub_too_long;      /* n_too_long, under stats_mu */
    pthread_mutex_t stats_mu;
    rw_pcache__io io;
};

/* pcache_tree.c */
rw_pcache__node *rw_pcache__insert_path(rw_pcache *c, const int32_t *t, int64_t n);
rw_pcache__node *rw_pcache__walk(rw_pcache *c, const int32_t *t, int64_t n, int64_t *matched);
void rw_pcache__prune(rw_pcache *c, rw_pcache__node *n);
void rw_pcache__free_node(rw_pcache *c, rw_pcache__node *n);
void rw_pcache__collect(rw_pcache__node *n, rw_pcache__entry **out, int *k, int cap);
/* The token ids from the root to n (n->depth of them) into t. */
void rw_pcache__path_tokens(const rw_pcache__node *n, int32_t *t);

/* pcache_lru.c */
size_t rw_pcache__mem_used(const rw_pcache *c);
bool rw_pcache__account_add(rw_pcache *c, rw_pcache__entry *e);
void rw_pcache__draft_set(rw_pcache *c, rw_pcache__entry *e, rw_model_seq *draft);
/* Lets go of e's sequences: freed, or handed to its write job when one is
 * queued or running (keep_write: it goes on and then frees them; else it is
 * cancelled if not started). */
void rw_pcache__drop_memory(rw_pcache *c, rw_pcache__entry *e, bool keep_write);
void rw_pcache__set_logits(rw_pcache *c, rw_pcache__node *node, const float *l);
void rw_pcache__remove_entry(rw_pcache *c, rw_pcache__entry *e);
void rw_pcache__forget_entry(rw_pcache *c, rw_pcache__entry *e);
rw_pcache__entry *rw_pcache__new_entry(rw_pcache *c, rw_pcache__node *node);
bool rw_pcache__is_ghost(const rw_pcache__entry *e);
void rw_pcache__become_ghost(rw_pcache *c, rw_pcache__entry *e);
void rw_pcache__evict(rw_pcache *c);
void rw_pcache__publish_stats(rw_pcache *c);
/* Copies the disk tier's counters (kept by its threads, under io.mu) into st. */
void rw_pcache__io_stats(rw_pcache *c, rw_pcache_stats *st);

/* pcache_disk.c: the caller's side */
rw_status rw_pcache__disk_start(rw_pcache *c, rw_error *err);
/* Writes what is queued (and, with all, every entry in memory not on disk,
 * most recently used first) within deadline seconds, then stops the
 * threads. */
void rw_pcache__disk_stop(rw_pcache *c, double seconds);
void rw_pcache__disk_queue_write(rw_pcache *c, rw_pcache__entry *e, double delay);
void rw_pcache__disk_queue_delete(rw_pcache *c, const char *name);
void rw_pcache__disk_queue_touch(rw_pcache *c, const char *name);
void rw_pcache__disk_queue_load(rw_pcache *c, rw_pcache__entry *e);
/* e lets go of its sequences while its write is queued or running: the job
 * takes them (true) when it is running, or when keep and few enough jobs
 * own sequences already; else it is cancelled (false: the caller frees
 * them). */
bool rw_pcache__disk_release(rw_pcache *c, rw_pcache__entry *e, bool keep);
/* e is going away: its jobs forget it. */
void rw_pcache__disk_detach(rw_pcache *c, rw_pcache__entry *e);
/* Asks for a folder check (cheap when the folder did not change); returns
 * the generation to wait for (io.scan_done >= it). */
uint64_t rw_pcache__disk_want_scan(rw_pcache *c);
/* Reads and verifies j's file into j (the reader's work; a file that fails
 * is removed and j->invalid set). */
void rw_pcache__disk_load(rw_pcache *c, rw_pcache__job *j);
/* Takes the done list (the caller applies and frees it). Under no lock. */
rw_pcache__job *rw_pcache__disk_take_done(rw_pcache *c);
void rw_pcache__job_free(rw_pcache__job *j);
void rw_pcache__name(const rw_pcache *c, const int32_t *t, int64_t n, char out[PC_NAME_MAX]);
/* Logs the first of each kind of disk trouble (bit), and counts it. */
void rw_pcache__disk_log(rw_pcache__io *io, unsigned bit, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
