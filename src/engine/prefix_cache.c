/* prefix_cache.c - the radix tree, lookup, insertion, eviction and disk
 * tier of prefix_cache.h.
 *
 * Tree invariants: the root has depth 0 and no edge; a child's edge is
 * non-empty and its first token differs from its siblings'; depth = parent
 * depth + edge length. An entry sits on the node where its tokens end. A
 * node with no entry below it (in its subtree) is removed, with its logits.
 *
 * Entry states: in memory (seq != NULL), on disk only (path != NULL), or a
 * ghost (neither: evicted for good, kept only so that a later miss can say
 * "evicted"; at most MAX_GHOSTS, oldest first out).
 */
#include "base/hash.h"
#include "engine/prefix_cache.h"
#include "engine/prefix_cache_int.h"
#include "base/log.h"

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_CANDIDATES 32
#define MAX_GHOSTS 256

typedef struct pc_node pc_node;

typedef struct {
    pc_node *node;
    rw_model_seq *seq; /* owned; NULL when not in memory */
    rw_model_seq *draft; /* owned, may be NULL: a draft model's sequence over a prefix of seq's tokens
                            (speculative decoding); memory tier only, freed with seq */
    char *path;        /* owned; the state file when on disk */
    size_t mem_bytes;  /* in memory: bytes of seq outside its shared blocks (counted in the cache's blocks) */
    size_t own_kv, own_rec, full_bytes; /* the same split by kind, and rw_model_seq_bytes (every block counted) */
    size_t draft_bytes, draft_kv, draft_rec; /* draft: rw_model_seq_bytes and its split by kind */
    size_t disk_bytes;
    uint64_t last_used;
} pc_entry;

struct pc_node {
    pc_node *parent;
    pc_node **child; /* owned array of owned nodes */
    int n_child, cap_child;
    int32_t *edge;   /* owned */
    int64_t edge_len, depth;
    pc_entry *entry; /* owned, or NULL */
    float *logits;   /* owned [n_vocab], logits after the prefix ending here, or NULL */
};

struct rw_pcache {
    rw_model *m;
    rw_kv_type kv_type;
    int64_t max_ctx, n_vocab;
    rw_pcache_config cfg;
    char *dir;
    pc_node root;
    pc_entry **entries; /* every entry, owned through their nodes */
    int n_entries, cap_entries;
    uint64_t clock;
    int n_foreign; /* state files of another model found in the folder (left alone) */
    size_t mem_bytes; /* entries' own bytes (pc_entry.mem_bytes) */
    pc_blocks blocks; /* the entries' shared blocks, each counted once (prefix_cache_int.h) */
    size_t own_kv, own_rec, full_bytes; /* sums of the entries' */
    size_t draft_bytes, draft_kv, draft_rec; /* sums of the entries' draft sequences, each counted whole (their
                                                pages are not deduplicated: an over-count, never an under-count) */
    size_t logits_bytes, disk_bytes;
    rw_pcache_stats stats; /* kept by the cache's thread */
    rw_pcache_stats pub;   /* a copy for other threads, under stats_mu */
    pthread_mutex_t stats_mu;
};

const char *rw_pcache_reason_name(rw_pcache_reason r) {
    switch (r) {
    case RW_PC_HIT: return "hit";
    case RW_PC_NO_ENTRY: return "no_entry";
    case RW_PC_CKPT_TOO_FAR: return "checkpoint_too_far";
    case RW_PC_EVICTED: return "evicted";
    case RW_PC_DISK_INVALID: return "disk_invalid";
    case RW_PC_DIFFERENT_MODEL: return "different_model";
    }
    return "?";
}

/* ---- tree ---- */

static pc_node *child_starting(const pc_node *n, int32_t tok) {
    for (int i = 0; i < n->n_child; i++)
        if (n->child[i]->edge[0] == tok) return n->child[i];
    return NULL;
}

static bool add_child(pc_node *p, pc_node *c) {
    if (p->n_child == p->cap_child) {
        int cap = p->cap_child ? 2 * p->cap_child : 4;
        pc_node **ch = realloc(p->child, (size_t)cap * sizeof *ch);
        if (!ch) return false;
        p->child = ch, p->cap_child = cap;
    }
    p->child[p->n_child++] = c;
    c->parent = p;
    return true;
}

static void remove_child(pc_node *p, pc_node *c) {
    for (int i = 0; i < p->n_child; i++)
        if (p->child[i] == c) {
            p->child[i] = p->child[--p->n_child];
            return;
        }
}

static pc_node *new_node(const int32_t *edge, int64_t len, int64_t depth) {
    pc_node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->edge = malloc((size_t)(len ? len : 1) * sizeof *n->edge);
    if (!n->edge) {
        free(n);
        return NULL;
    }
    memcpy(n->edge, edge, (size_t)len * sizeof *edge);
    n->edge_len = len;
    n->depth = depth;
    return n;
}

/* Splits c's edge after k tokens (0 < k < edge_len): a new node takes the
 * first k and becomes c's parent. */
static pc_node *split(pc_node *c, int64_t k) {
    pc_node *mid = new_node(c->edge, k, c->depth - c->edge_len + k);
    if (!mid) return NULL;
    int32_t *rest = malloc((size_t)(c->edge_len - k) * sizeof *rest);
    if (!rest) {
        free(mid->edge), free(mid);
        return NULL;
    }
    memcpy(rest, c->edge + k, (size_t)(c->edge_len - k) * sizeof *rest);
    pc_node *p = c->parent;
    if (!add_child(mid, c)) {
        free(rest), free(mid->edge), free(mid);
        return NULL;
    }
    for (int i = 0; i < p->n_child; i++)
        if (p->child[i] == c) p->child[i] = mid;
    mid->parent = p;
    c->parent = mid;
    free(c->edge);
    c->edge = rest;
    c->edge_len -= k;
    return mid;
}

/* The node ending exactly at depth n along t (created as needed), or NULL
 * on out of memory. */
static pc_node *insert_path(rw_pcache *c, const int32_t *t, int64_t n) {
    pc_node *node = &c->root;
    int64_t d = 0;
    while (d < n) {
        pc_node *ch = child_starting(node, t[d]);
        if (!ch) {
            pc_node *leaf = new_node(t + d, n - d, n);
            if (!leaf || !add_child(node, leaf)) {
                if (leaf) free(leaf->edge), free(leaf);
                return NULL;
            }
            return leaf;
        }
        int64_t k = 0;
        while (k < ch->edge_len && d + k < n && ch->edge[k] == t[d + k]) k++;
        if (k < ch->edge_len) {
            if (!(ch = split(ch, k))) return NULL;
        }
        node = ch;
        d += k;
    }
    return node;
}

/* How far t[0..n) follows the tree: the node whose edge the walk ended in
 * (or at) and the matched length. */
static pc_node *walk(rw_pcache *c, const int32_t *t, int64_t n, int64_t *matched) {
    pc_node *node = &c->root;
    int64_t d = 0;
    for (;;) {
        if (d == n) break;
        pc_node *ch = child_starting(node, t[d]);
        if (!ch) break;
        int64_t k = 0;
        while (k < ch->edge_len && d + k < n && ch->edge[k] == t[d + k]) k++;
        d += k;
        node = ch;
        if (k < ch->edge_len) break;
    }
    *matched = d;
    return node;
}

static bool subtree_has_entry(const pc_node *n) {
    if (n->entry) return true;
    for (int i = 0; i < n->n_child; i++)
        if (subtree_has_entry(n->child[i])) return true;
    return false;
}

static void free_node(rw_pcache *c, pc_node *n) {
    for (int i = 0; i < n->n_child; i++) free_node(c, n->child[i]);
    if (n->logits) c->logits_bytes -= (size_t)c->n_vocab * sizeof(float);
    free(n->child), free(n->edge), free(n->logits);
    if (n != &c->root) free(n);
}

/* Removes nodes on the way up from n that have no entry below them. */
static void prune(rw_pcache *c, pc_node *n) {
    while (n != &c->root && !subtree_has_entry(n)) {
        pc_node *p = n->parent;
        remove_child(p, n);
        free_node(c, n);
        n = p;
    }
}

/* ---- entries ---- */

static void forget_entry(rw_pcache *c, pc_entry *e) {
    for (int i = 0; i < c->n_entries; i++)
        if (c->entries[i] == e) {
            c->entries[i] = c->entries[--c->n_entries];
            break;
        }
}

/* Memory the entries hold: their own bytes plus every shared block once. */
static size_t mem_used(const rw_pcache *c) {
    return c->mem_bytes + c->blocks.bytes_kv + c->blocks.bytes_rec + c->draft_bytes;
}

/* An entry's draft sequence (speculative decoding), counted whole. */
static void draft_set(rw_pcache *c, pc_entry *e, rw_model_seq *draft) {
    e->draft = draft;
    if (!draft) return;
    rw_model_seq_bytes_by_kind(draft, &e->draft_kv, &e->draft_rec);
    e->draft_bytes = rw_model_seq_bytes(draft);
    c->draft_bytes += e->draft_bytes, c->draft_kv += e->draft_kv, c->draft_rec += e->draft_rec;
}

static void draft_drop(rw_pcache *c, pc_entry *e) {
    if (!e->draft) return;
    c->draft_bytes -= e->draft_bytes, c->draft_kv -= e->draft_kv, c->draft_rec -= e->draft_rec;
    rw_model_seq_free(e->draft);
    e->draft = NULL;
    e->draft_bytes = e->draft_kv = e->draft_rec = 0;
}

/* Counts e's sequence (just set) in the cache's bytes; false on out of
 * memory (nothing counted; the caller frees the sequence). */
static bool account_add(rw_pcache *c, pc_entry *e) {
    if (!pc_blocks_add(&c->blocks, e->seq)) return false;
    size_t kv, rec, bkv, brec;
    rw_model_seq_bytes_by_kind(e->seq, &kv, &rec);
    pc_seq_block_bytes(e->seq, &bkv, &brec);
    e->full_bytes = rw_model_seq_bytes(e->seq);
    e->own_kv = kv - bkv, e->own_rec = rec - brec;
    e->mem_bytes = e->full_bytes - bkv - brec;
    c->mem_bytes += e->mem_bytes, c->own_kv += e->own_kv, c->own_rec += e->own_rec, c->full_bytes += e->full_bytes;
    return true;
}

static void account_remove(rw_pcache *c, pc_entry *e) {
    pc_blocks_remove(&c->blocks, e->seq);
    c->mem_bytes -= e->mem_bytes, c->own_kv -= e->own_kv, c->own_rec -= e->own_rec, c->full_bytes -= e->full_bytes;
    e->mem_bytes = e->own_kv = e->own_rec = e->full_bytes = 0;
}

static void drop_memory(rw_pcache *c, pc_entry *e) {
    if (!e->seq) return;
    account_remove(c, e);
    rw_model_seq_free(e->seq);
    e->seq = NULL;
    draft_drop(c, e);
}

/* A file beside an entry's state file NAME.rws: NAME.suffix (its last
 * logits: "logits", its draft's state: "draft"). */
static void side_path(const char *rws, const char *suffix, char *out, size_t cap) {
    snprintf(out, cap, "%.*s.%s", (int)(strlen(rws) - 4), rws, suffix);
}

static void drop_disk(rw_pcache *c, pc_entry *e) {
    if (!e->path) return;
    unlink(e->path);
    char lp[4096];
    side_path(e->path, "logits", lp, sizeof lp);
    unlink(lp);
    side_path(e->path, "draft", lp, sizeof lp);
    unlink(lp);
    free(e->path);
    e->path = NULL;
    c->disk_bytes -= e->disk_bytes;
    e->disk_bytes = 0;
}

/* Removes the entry altogether (and the nodes only it needed). */
static void remove_entry(rw_pcache *c, pc_entry *e) {
    pc_node *n = e->node;
    drop_memory(c, e);
    drop_disk(c, e);
    forget_entry(c, e);
    n->entry = NULL;
    free(e);
    prune(c, n);
}

static int n_ghosts(const rw_pcache *c) {
    int g = 0;
    for (int i = 0; i < c->n_entries; i++) g += !c->entries[i]->seq && !c->entries[i]->path;
    return g;
}

/* An entry that is neither in memory nor on disk stays as a ghost (a later
 * miss can then say why); the oldest ghosts go when there are too many. */
static void become_ghost(rw_pcache *c, pc_entry *e) {
    while (n_ghosts(c) >= MAX_GHOSTS) {
        pc_entry *old = NULL;
        for (int i = 0; i < c->n_entries; i++) {
            pc_entry *x = c->entries[i];
            if (x != e && !x->seq && !x->path && (!old || x->last_used < old->last_used)) old = x;
        }
        if (!old) break;
        remove_entry(c, old);
    }
}

static void hash_name(const int32_t *t, int64_t n, char *out, size_t cap) {
    const uint64_t h = rw_hash_bytes(RW_HASH_INIT, t, (size_t)n * 4);
    snprintf(out, cap, "%016llx-%lld", (unsigned long long)h, (long long)n);
}

static bool write_logits(const char *path, const float *l, int64_t n) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return false;
    bool ok = fwrite(l, sizeof *l, (size_t)n, f) == (size_t)n;
    ok = !fclose(f) && ok;
    if (ok) ok = !rename(tmp, path);
    if (!ok) unlink(tmp);
    return ok;
}

/* Writes an in-memory entry to the disk tier; true on success. */
static bool to_disk(rw_pcache *c, pc_entry *e) {
    if (!c->dir || e->path || !e->seq) return e->path != NULL;
    char name[64], path[4096];
    hash_name(rw_model_seq_tokens(e->seq), rw_model_seq_length(e->seq), name, sizeof name);
    snprintf(path, sizeof path, "%s/%s.rws", c->dir, name);
    rw_error err = {0};
    if (rw_model_seq_save(e->seq, path, &err)) {
        rw_log(RW_LOG_WARN, "prefix cache: cannot write %s: %s", path, err.msg);
        return false;
    }
    if (e->node->logits) {
        char lp[4200];
        side_path(path, "logits", lp, sizeof lp);
        write_logits(lp, e->node->logits, c->n_vocab);
    }
    struct stat sb;
    e->disk_bytes = stat(path, &sb) ? 0 : (size_t)sb.st_size;
    char dp[4200];
    side_path(path, "draft", dp, sizeof dp);
    unlink(dp); /* a stale draft file never goes with a new entry */
    if (e->draft) {
        if (rw_model_seq_save(e->draft, dp, &err))
            rw_log(RW_LOG_WARN, "prefix cache: cannot write %s: %s", dp, err.msg);
        else if (!stat(dp, &sb))
            e->disk_bytes += (size_t)sb.st_size;
    }
    e->path = strdup(path);
    if (!e->path) {
        unlink(path);
        unlink(dp);
        return false;
    }
    c->disk_bytes += e->disk_bytes;
    c->stats.disk_writes++;
    /* the disk budget: oldest files go first */
    while (c->disk_bytes > c->cfg.dir_bytes) {
        pc_entry *old = NULL;
        for (int i = 0; i < c->n_entries; i++) {
            pc_entry *x = c->entries[i];
            if (x->path && (!old || x->last_used < old->last_used)) old = x;
        }
        if (!old) break;
        drop_disk(c, old);
        if (!old->seq) become_ghost(c, old);
    }
    return e->path != NULL;
}

static void evict(rw_pcache *c) {
    while (mem_used(c) + c->logits_bytes > c->cfg.mem_bytes) {
        pc_entry *old = NULL;
        for (int i = 0; i < c->n_entries; i++) {
            pc_entry *x = c->entries[i];
            if (x->seq && (!old || x->last_used < old->last_used)) old = x;
        }
        if (!old) break; /* only logits left: they go with their entries */
        c->stats.evictions++;
        to_disk(c, old);
        drop_memory(c, old);
        if (!old->path) {
            /* the logits of a ghost are of no use */
            if (old->node->logits && old->node->n_child == 0) {
                free(old->node->logits);
                old->node->logits = NULL;
                c->logits_bytes -= (size_t)c->n_vocab * sizeof(float);
            }
            become_ghost(c, old);
        }
    }
    if (mem_used(c) + c->logits_bytes > c->cfg.mem_bytes) {
        /* logits kept on nodes whose entry is gone */
        for (int i = 0; i < c->n_entries; i++) {
            pc_node *n = c->entries[i]->node;
            if (n->logits && !c->entries[i]->seq) {
                free(n->logits);
                n->logits = NULL;
                c->logits_bytes -= (size_t)c->n_vocab * sizeof(float);
            }
        }
    }
}

/* ---- making, scanning, freeing ---- */

static void scan_dir(rw_pcache *c) {
    DIR *d = opendir(c->dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".rws")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", c->dir, de->d_name);
        int32_t *t = NULL;
        int64_t n = 0;
        rw_error err = {0};
        rw_status st = rw_model_state_file_tokens(c->m, path, &t, &n, &err);
        if (st == RW_ERR_INVALID_ARG) { /* another model's: not ours to touch */
            c->n_foreign++;
            continue;
        }
        if (st || n == 0 || n > c->max_ctx) {
            rw_log(RW_LOG_WARN, "prefix cache: removing invalid %s (%s)", path, st ? err.msg : "empty");
            unlink(path);
            c->stats.disk_invalid++;
            free(t);
            continue;
        }
        pc_node *node = insert_path(c, t, n);
        pc_entry *e = node && !node->entry ? calloc(1, sizeof *e) : NULL;
        if (e && c->n_entries == c->cap_entries) {
            int cap = c->cap_entries ? 2 * c->cap_entries : 16;
            pc_entry **en = realloc(c->entries, (size_t)cap * sizeof *en);
            if (en) c->entries = en, c->cap_entries = cap;
        }
        if (e && c->n_entries < c->cap_entries && (e->path = strdup(path))) {
            struct stat sb;
            char dp[4200];
            side_path(path, "draft", dp, sizeof dp);
            e->disk_bytes = (stat(path, &sb) ? 0 : (size_t)sb.st_size) + (stat(dp, &sb) ? 0 : (size_t)sb.st_size);
            e->node = node;
            node->entry = e;
            c->entries[c->n_entries++] = e;
            c->disk_bytes += e->disk_bytes;
        } else {
            free(e);
            if (node) prune(c, node);
        }
        free(t);
    }
    closedir(d);
}

rw_status rw_pcache_new(rw_model *m, rw_kv_type kv_type, int64_t max_ctx, const rw_pcache_config *cfg, rw_pcache **out,
                        rw_error *err) {
    *out = NULL;
    rw_pcache *c = calloc(1, sizeof *c);
    if (!c) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    c->m = m;
    c->kv_type = kv_type;
    c->max_ctx = max_ctx ? max_ctx : rw_model_get_hparams(m)->n_ctx_train;
    c->n_vocab = rw_model_get_hparams(m)->n_vocab;
    c->cfg = *cfg;
    pthread_mutex_init(&c->stats_mu, NULL);
    if (cfg->dir) {
        if (mkdir(cfg->dir, 0777) && errno != EEXIST) {
            rw_status st = rw_errorf(err, RW_ERR_IO, "cannot create the cache folder %s: %s", cfg->dir, strerror(errno));
            rw_pcache_free(c);
            return st;
        }
        c->dir = strdup(cfg->dir);
        if (!c->dir) {
            rw_pcache_free(c);
            return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        }
        c->cfg.dir = c->dir;
        scan_dir(c);
    }
    *out = c;
    return RW_OK;
}

void rw_pcache_free(rw_pcache *c) {
    if (!c) return;
    for (int i = 0; i < c->n_entries; i++) {
        rw_model_seq_free(c->entries[i]->seq);
        rw_model_seq_free(c->entries[i]->draft);
        free(c->entries[i]->path); /* files stay: they are the disk tier */
        free(c->entries[i]);
    }
    free(c->entries);
    pc_blocks_free(&c->blocks);
    free_node(c, &c->root);
    free(c->dir);
    pthread_mutex_destroy(&c->stats_mu);
    free(c);
}

/* ---- insert ---- */

static void collect(pc_node *n, pc_entry **out, int *k, int cap) {
    if (*k >= cap) return;
    if (n->entry) out[(*k)++] = n->entry;
    for (int i = 0; i < n->n_child; i++) collect(n->child[i], out, k, cap);
}

static void publish_stats(rw_pcache *c) {
    pthread_mutex_lock(&c->stats_mu);
    int mem = 0, disk = 0;
    for (int i = 0; i < c->n_entries; i++) mem += c->entries[i]->seq != NULL, disk += c->entries[i]->path != NULL;
    c->stats.entries = (uint64_t)mem;
    c->stats.disk_entries = (uint64_t)disk;
    c->stats.bytes_kv_and_state = mem_used(c);
    c->stats.bytes_kv = c->own_kv + c->blocks.bytes_kv + c->draft_kv;
    c->stats.bytes_recurrent = c->own_rec + c->blocks.bytes_rec + c->draft_rec;
    c->stats.bytes_unshared = c->full_bytes + c->draft_bytes;
    c->stats.bytes_logits = c->logits_bytes;
    c->stats.bytes_disk = c->disk_bytes;
    c->pub = c->stats;
    pthread_mutex_unlock(&c->stats_mu);
}

static void set_logits(rw_pcache *c, pc_node *node, const float *l) {
    if (!node->logits && (node->logits = malloc((size_t)c->n_vocab * sizeof(float))))
        c->logits_bytes += (size_t)c->n_vocab * sizeof(float);
    if (node->logits) memcpy(node->logits, l, (size_t)c->n_vocab * sizeof(float));
}

/* A draft sequence is kept only over a prefix of seq's tokens. */
static rw_model_seq *draft_for(rw_model_seq *seq, rw_model_seq *draft) {
    if (!draft) return NULL;
    const int64_t n = rw_model_seq_length(draft);
    if (n == 0 || n > rw_model_seq_length(seq) ||
        memcmp(rw_model_seq_tokens(draft), rw_model_seq_tokens(seq), (size_t)n * sizeof(int32_t))) {
        rw_model_seq_free(draft);
        return NULL;
    }
    return draft;
}

void rw_pcache_insert(rw_pcache *c, rw_model_seq *seq, const float *last_logits, int64_t at_pos,
                      const float *at_logits) {
    rw_pcache_insert_with_draft(c, seq, NULL, last_logits, at_pos, at_logits);
}

void rw_pcache_insert_with_draft(rw_pcache *c, rw_model_seq *seq, rw_model_seq *draft, const float *last_logits,
                                 int64_t at_pos, const float *at_logits) {
    const int64_t n = rw_model_seq_length(seq);
    if (n == 0 || c->cfg.mem_bytes == 0 || rw_model_seq_model(seq) != c->m || rw_model_seq_kv_type(seq) != c->kv_type) {
        rw_model_seq_free(seq);
        rw_model_seq_free(draft);
        return;
    }
    draft = draft_for(seq, draft);
    const int32_t *t = rw_model_seq_tokens(seq);
    pc_node *node = insert_path(c, t, n);
    if (!node) {
        rw_model_seq_free(seq);
        rw_model_seq_free(draft);
        return;
    }
    if (last_logits) set_logits(c, node, last_logits);
    if (at_logits && at_pos > 0 && at_pos < n) {
        pc_node *mid = insert_path(c, t, at_pos); /* splits the path there: the entry's node stays below */
        if (mid) set_logits(c, mid, at_logits);
    }
    /* a descendant that restores this whole prefix without a matmul makes
     * this one redundant (its logits stay on the node) */
    pc_entry *below[MAX_CANDIDATES];
    int nb = 0;
    for (int i = 0; i < node->n_child; i++) collect(node->child[i], below, &nb, MAX_CANDIDATES);
    for (int i = 0; i < nb; i++) {
        int64_t rec;
        if (below[i]->seq && rw_model_seq_rewind_cost(below[i]->seq, n, NULL, &rec) == RW_OK && rec == 0) {
            below[i]->last_used = ++c->clock;
            rw_model_seq_free(seq);
            rw_model_seq_free(draft);
            evict(c);
            publish_stats(c);
            return;
        }
    }
    pc_entry *e = node->entry;
    if (e) { /* the same tokens again: the newer sequence replaces the old */
        drop_memory(c, e);
        drop_disk(c, e);
    } else {
        e = calloc(1, sizeof *e);
        if (e && c->n_entries == c->cap_entries) {
            int cap = c->cap_entries ? 2 * c->cap_entries : 16;
            pc_entry **en = realloc(c->entries, (size_t)cap * sizeof *en);
            if (en) c->entries = en, c->cap_entries = cap;
        }
        if (!e || c->n_entries == c->cap_entries) {
            free(e);
            rw_model_seq_free(seq);
            rw_model_seq_free(draft);
            prune(c, node);
            return;
        }
        e->node = node;
        node->entry = e;
        c->entries[c->n_entries++] = e;
    }
    e->seq = seq;
    if (!account_add(c, e)) { /* out of memory: the entry stays as it was (gone from memory) */
        e->seq = NULL;
        rw_model_seq_free(seq);
        rw_model_seq_free(draft);
        if (!e->path) remove_entry(c, e);
        publish_stats(c);
        return;
    }
    draft_set(c, e, draft);
    e->last_used = ++c->clock;
    /* ancestors this one restores exactly without a matmul are redundant */
    for (pc_node *a = node->parent; a && a != &c->root; a = a->parent) {
        pc_entry *x = a->entry;
        int64_t rec;
        if (x && x->seq && rw_model_seq_rewind_cost(seq, a->depth, NULL, &rec) == RW_OK && rec == 0) {
            drop_memory(c, x);
            drop_disk(c, x);
            forget_entry(c, x);
            a->entry = NULL;
            free(x);
        }
    }
    evict(c);
    publish_stats(c);
}

/* ---- lookup ---- */

/* The draft state written beside a disk entry just loaded, when the cache
 * knows the draft model: validated as any state file (the model's identity,
 * the format) and kept only over a prefix of the entry's tokens; a file
 * that fails is removed, never trusted. */
/* Removes an entry's draft file that failed validation, and its bytes
 * from the disk tier's count. */
static void drop_draft_file(rw_pcache *c, pc_entry *e, const char *dp, const char *why) {
    rw_log(RW_LOG_WARN, "prefix cache: removing %s: %s", dp, why);
    struct stat sb;
    const size_t bytes = stat(dp, &sb) ? 0 : (size_t)sb.st_size;
    const size_t drop = bytes < e->disk_bytes ? bytes : e->disk_bytes;
    e->disk_bytes -= drop;
    c->disk_bytes -= drop;
    unlink(dp);
    c->stats.disk_invalid++;
}

static void draft_from_disk(rw_pcache *c, pc_entry *e) {
    char dp[4200];
    side_path(e->path, "draft", dp, sizeof dp);
    if (!c->cfg.draft || access(dp, F_OK)) return;
    rw_model_seq *d = NULL;
    rw_error err = {0};
    if (rw_model_seq_new(c->cfg.draft, c->kv_type, c->max_ctx, &d, &err)) return;
    if (rw_model_seq_load(d, dp, &err)) {
        rw_model_seq_free(d);
        drop_draft_file(c, e, dp, err.msg);
        return;
    }
    d = draft_for(e->seq, d);
    if (!d) {
        drop_draft_file(c, e, dp, "its tokens are not a prefix of the entry's");
        return;
    }
    draft_set(c, e, d);
}

/* Loads a disk entry back into memory; false (file removed) if invalid. */
static bool from_disk(rw_pcache *c, pc_entry *e) {
    rw_model_seq *s = NULL;
    rw_error err = {0};
    if (rw_model_seq_new(c->m, c->kv_type, c->max_ctx, &s, &err)) return false;
    if (rw_model_seq_load(s, e->path, &err)) {
        rw_log(RW_LOG_WARN, "prefix cache: removing %s: %s", e->path, err.msg);
        rw_model_seq_free(s);
        drop_disk(c, e);
        c->stats.disk_invalid++;
        return false;
    }
    /* the file must hold exactly the tokens of its place in the tree */
    bool same = rw_model_seq_length(s) == e->node->depth;
    const int32_t *t = rw_model_seq_tokens(s);
    for (const pc_node *a = e->node; same && a != &c->root; a = a->parent)
        same = !memcmp(t + a->depth - a->edge_len, a->edge, (size_t)a->edge_len * sizeof *t);
    if (!same) {
        rw_log(RW_LOG_WARN, "prefix cache: removing %s: its tokens changed", e->path);
        rw_model_seq_free(s);
        drop_disk(c, e);
        c->stats.disk_invalid++;
        return false;
    }
    if (!e->node->logits) { /* its logits, if they were written */
        char lp[4200];
        side_path(e->path, "logits", lp, sizeof lp);
        FILE *f = fopen(lp, "rb");
        float *l = f ? malloc((size_t)c->n_vocab * sizeof *l) : NULL;
        if (l && fread(l, sizeof *l, (size_t)c->n_vocab, f) == (size_t)c->n_vocab) {
            e->node->logits = l;
            c->logits_bytes += (size_t)c->n_vocab * sizeof *l;
        } else {
            free(l);
        }
        if (f) fclose(f);
    }
    e->seq = s;
    if (!account_add(c, e)) {
        e->seq = NULL;
        rw_model_seq_free(s);
        return false;
    }
    draft_from_disk(c, e);
    return true;
}

/* The deepest position <= target that e's sequence restores without a
 * matmul. */
static int64_t restore_point(const pc_entry *e, int64_t target) {
    int64_t rec;
    if (rw_model_seq_rewind_cost(e->seq, target, NULL, &rec)) return 0;
    return target - rec;
}

/* A copy of e's draft sequence cut back to its deepest restore point <= n
 * that needs no matmul, if its tokens are prompt's up to there; else NULL. */
static rw_model_seq *draft_copy(const pc_entry *e, const int32_t *prompt, int64_t n, rw_threadpool *pool) {
    if (!e->draft) return NULL;
    int64_t to = rw_model_seq_length(e->draft), rec;
    if (to > n) to = n;
    if (to <= 0 || memcmp(rw_model_seq_tokens(e->draft), prompt, (size_t)to * sizeof *prompt) ||
        rw_model_seq_rewind_cost(e->draft, to, NULL, &rec) || to - rec <= 0)
        return NULL;
    rw_model_seq *d = NULL;
    rw_error err = {0};
    if (rw_model_seq_clone(e->draft, &d, &err)) return NULL;
    if (rw_model_seq_rewind(d, to - rec, pool, &err)) {
        rw_model_seq_free(d);
        return NULL;
    }
    return d;
}

rw_status rw_pcache_acquire(rw_pcache *c, const int32_t *prompt, int64_t n, rw_threadpool *pool, rw_model_seq **out,
                            int64_t *reused, float *logits, rw_pcache_usage *u, rw_error *err) {
    return rw_pcache_acquire_with_draft(c, prompt, n, pool, out, NULL, reused, logits, u, err);
}

rw_status rw_pcache_acquire_with_draft(rw_pcache *c, const int32_t *prompt, int64_t n, rw_threadpool *pool,
                                       rw_model_seq **out, rw_model_seq **draft_out, int64_t *reused, float *logits,
                                       rw_pcache_usage *u, rw_error *err) {
    *out = NULL;
    if (draft_out) *draft_out = NULL;
    *reused = 0;
    rw_pcache_usage us = {.prompt_tokens = n, .reason = RW_PC_NO_ENTRY};
    int64_t l = 0;
    pc_node *end = n > 0 ? walk(c, prompt, n, &l) : &c->root;
    /* candidates: entries on the matched path (prefixes of the prompt) and
     * below the point the walk reached (they share l tokens) */
    pc_entry *cand[MAX_CANDIDATES];
    int k = 0;
    collect(end, cand, &k, MAX_CANDIDATES);
    for (pc_node *a = end->parent; a && k < MAX_CANDIDATES; a = a->parent)
        if (a->entry) cand[k++] = a->entry;
    /* what a restore may reach: the whole prompt only with its logits */
    const pc_node *exact = l == n && end->depth == n ? end : NULL;
    const bool can_full = exact && exact->logits && logits;
    pc_entry *best = NULL;
    int64_t best_c = 0, shared = 0;
    bool saw_ghost = false, saw_invalid = false, best_from_disk = false;
    for (int pass = 0; pass < 2; pass++) { /* memory first, then disk if it could do better */
        for (int i = 0; i < k; i++) {
            pc_entry *e = cand[i];
            const int64_t sh = e->node->depth < l ? e->node->depth : l;
            if (sh > shared) shared = sh;
            if (!e->seq && !e->path) {
                saw_ghost = true;
                continue;
            }
            const int64_t target = sh == n && !can_full ? n - 1 : sh;
            if (target <= best_c) continue;
            if (!e->seq) {
                if (pass == 0) continue;
                if (!from_disk(c, e)) {
                    saw_invalid = true;
                    become_ghost(c, e);
                    continue;
                }
            } else if (pass == 1) {
                continue;
            }
            const int64_t r = restore_point(e, target);
            if (r > best_c || (r == best_c && best && e->last_used > best->last_used)) {
                best_c = r;
                best = e;
                best_from_disk = pass == 1;
            }
        }
    }
    rw_status st;
    if (best && best_c > 0) {
        if ((st = rw_model_seq_clone(best->seq, out, err))) return st;
        /* best_c is the entry's own restore point: no matmul here */
        if ((st = rw_model_seq_rewind(*out, best_c, pool, err))) {
            rw_model_seq_free(*out);
            *out = NULL;
            return st;
        }
        best->last_used = ++c->clock;
        *reused = best_c;
        if (draft_out) *draft_out = draft_copy(best, prompt, best_c, pool);
        if (best_c == n) memcpy(logits, exact->logits, (size_t)c->n_vocab * sizeof *logits);
    } else if ((st = rw_model_seq_new(c->m, c->kv_type, c->max_ctx, out, err))) {
        return st;
    }
    us.shared = shared;
    if (best_from_disk) us.from_disk = *reused;
    else us.from_memory = *reused;
    us.recomputed = n - *reused;
    /* why more than the new tail is recomputed (the tail: past what any
     * entry shared, and the last token when its logits are not kept) */
    const int64_t tail = n - shared + (shared == n && !can_full ? 1 : 0);
    if (us.recomputed <= tail && shared > 0) us.reason = RW_PC_HIT;
    else if (saw_invalid) us.reason = RW_PC_DISK_INVALID;
    else if (shared > 0 && best_c < shared - (shared == n && !can_full)) us.reason = RW_PC_CKPT_TOO_FAR;
    else if (saw_ghost) us.reason = RW_PC_EVICTED;
    else us.reason = shared > 0 ? RW_PC_HIT : c->n_foreign ? RW_PC_DIFFERENT_MODEL : RW_PC_NO_ENTRY;
    if (saw_ghost && !best) us.reason = RW_PC_EVICTED;
    c->stats.lookups++;
    if (*reused) {
        if (best_from_disk) c->stats.hits_disk++, c->stats.tokens_disk += (uint64_t)*reused;
        else c->stats.hits_memory++, c->stats.tokens_memory += (uint64_t)*reused;
    }
    c->stats.tokens_recomputed += (uint64_t)us.recomputed;
    evict(c);
    publish_stats(c);
    if (u) *u = us;
    return RW_OK;
}

rw_status rw_pcache_check(rw_pcache *c, rw_error *err) {
    pc_blocks fresh = {0};
    size_t own = 0, full = 0, drafts = 0;
    for (int i = 0; i < c->n_entries; i++) {
        const rw_model_seq *s = c->entries[i]->seq;
        if (c->entries[i]->draft) drafts += rw_model_seq_bytes(c->entries[i]->draft);
        if (!s) continue;
        if (!pc_blocks_add(&fresh, s)) {
            pc_blocks_free(&fresh);
            return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        }
        size_t bkv, brec;
        pc_seq_block_bytes(s, &bkv, &brec);
        full += rw_model_seq_bytes(s);
        own += rw_model_seq_bytes(s) - bkv - brec;
    }
    bool same = fresh.used == c->blocks.used && fresh.bytes_kv == c->blocks.bytes_kv &&
                fresh.bytes_rec == c->blocks.bytes_rec && own == c->mem_bytes && full == c->full_bytes &&
                drafts == c->draft_bytes;
    for (size_t i = 0; same && i < c->blocks.cap; i++) {
        const pc_block *b = &c->blocks.slot[i];
        if (!b->id) continue;
        const pc_block *f = pc_blocks_find(&fresh, b->id);
        same = f && f->holders == b->holders && f->bytes == b->bytes;
    }
    const size_t used = mem_used(c), distinct = fresh.bytes_kv + fresh.bytes_rec;
    pc_blocks_free(&fresh);
    if (!same)
        return rw_errorf(err, RW_ERR_INTERNAL,
                         "prefix cache: block accounting drifted (%zu own + %zu shared bytes counted, %zu + %zu recounted)",
                         c->mem_bytes, c->blocks.bytes_kv + c->blocks.bytes_rec, own, distinct);
    if (used + c->logits_bytes > c->cfg.mem_bytes)
        return rw_errorf(err, RW_ERR_INTERNAL, "prefix cache: %zu bytes held over the budget of %zu",
                         used + c->logits_bytes, c->cfg.mem_bytes);
    return RW_OK;
}

void rw_pcache_get_stats(rw_pcache *c, rw_pcache_stats *out) {
    pthread_mutex_lock(&c->stats_mu);
    *out = c->pub;
    pthread_mutex_unlock(&c->stats_mu);
}
