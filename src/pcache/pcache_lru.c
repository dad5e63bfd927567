/* pcache_lru.c - what the memory tier holds and what leaves it: byte
 * accounting (shared blocks counted once, pcache_int.h), plain LRU
 * eviction (measured by rewind bench chat), ghosts, the stats and their
 * recount (rw_pcache_check).
 *
 * An entry evicted from memory stays findable when its file is in the
 * folder or being written (its write job then owns the sequences until the
 * file is done); otherwise it becomes a ghost. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pcache/pcache_int.h"

size_t rw_pcache__mem_used(const rw_pcache *c) {
    return c->mem_bytes + c->blocks.bytes_kv + c->blocks.bytes_rec + c->draft_bytes;
}

/* An entry's draft sequence (speculative decoding), counted whole. */
void rw_pcache__draft_set(rw_pcache *c, rw_pcache__entry *e, rw_model_seq *draft) {
    e->draft = draft;
    if (!draft) return;
    rw_model_seq_bytes_by_kind(draft, &e->draft_kv, &e->draft_rec);
    e->draft_bytes = rw_model_seq_bytes(draft);
    c->draft_bytes += e->draft_bytes, c->draft_kv += e->draft_kv, c->draft_rec += e->draft_rec;
}

/* Counts e's sequence (just set) in the cache's bytes; false on out of
 * memory (nothing counted; the caller frees the sequence). */
bool rw_pcache__account_add(rw_pcache *c, rw_pcache__entry *e) {
    if (!rw_pcache__blocks_add(&c->blocks, e->seq)) return false;
    size_t kv, rec, bkv, brec;
    rw_model_seq_bytes_by_kind(e->seq, &kv, &rec);
    rw_pcache__seq_block_bytes(e->seq, &bkv, &brec);
    e->full_bytes = rw_model_seq_bytes(e->seq);
    e->own_kv = kv - bkv, e->own_rec = rec - brec;
    e->mem_bytes = e->full_bytes - bkv - brec;
    c->mem_bytes += e->mem_bytes, c->own_kv += e->own_kv, c->own_rec += e->own_rec, c->full_bytes += e->full_bytes;
    return true;
}

static void account_remove(rw_pcache *c, rw_pcache__entry *e) {
    rw_pcache__blocks_remove(&c->blocks, e->seq);
    c->mem_bytes -= e->mem_bytes, c->own_kv -= e->own_kv, c->own_rec -= e->own_rec, c->full_bytes -= e->full_bytes;
    e->mem_bytes = e->own_kv = e->own_rec = e->full_bytes = 0;
    if (e->draft) c->draft_bytes -= e->draft_bytes, c->draft_kv -= e->draft_kv, c->draft_rec -= e->draft_rec;
    e->draft_bytes = e->draft_kv = e->draft_rec = 0;
}

void rw_pcache__drop_memory(rw_pcache *c, rw_pcache__entry *e, bool keep_write) {
    if (!e->seq) return;
    account_remove(c, e);
    rw_model_seq *s = e->seq, *d = e->draft;
    e->seq = e->draft = NULL;
    e->from_disk = false;
    if (e->write && rw_pcache__disk_release(c, e, keep_write)) return; /* the write job frees them */
    rw_model_seq_free(s);
    rw_model_seq_free(d);
}

void rw_pcache__set_logits(rw_pcache *c, rw_pcache__node *node, const float *l) {
    if (!node->logits && (node->logits = malloc((size_t)c->n_vocab * sizeof(float))))
        c->logits_bytes += (size_t)c->n_vocab * sizeof(float);
    if (node->logits) memcpy(node->logits, l, (size_t)c->n_vocab * sizeof(float));
}

void rw_pcache__forget_entry(rw_pcache *c, rw_pcache__entry *e) {
    for (int i = 0; i < c->n_entries; i++)
        if (c->entries[i] == e) {
            c->entries[i] = c->entries[--c->n_entries];
            break;
        }
}

rw_pcache__entry *rw_pcache__new_entry(rw_pcache *c, rw_pcache__node *node) {
    if (c->n_entries == c->cap_entries) {
        int cap = c->cap_entries ? 2 * c->cap_entries : 16;
        rw_pcache__entry **en = realloc(c->entries, (size_t)cap * sizeof *en);
        if (!en) return NULL;
        c->entries = en, c->cap_entries = cap;
    }
    rw_pcache__entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->node = node;
    node->entry = e;
    c->entries[c->n_entries++] = e;
    if (c->io.on) {
        int32_t *t = malloc((size_t)(node->depth ? node->depth : 1) * sizeof *t);
        if (t) {
            rw_pcache__path_tokens(node, t);
            rw_pcache__name(c, t, node->depth, e->name);
            free(t);
        }
    }
    return e;
}

/* Removes the entry from the tree and the lists (not its file: the folder
 * is the disk tier's, and a file is dropped only for the budget, or when it
 * failed validation, or once a newer file makes it redundant). */
void rw_pcache__remove_entry(rw_pcache *c, rw_pcache__entry *e) {
    rw_pcache__node *n = e->node;
    rw_pcache__drop_memory(c, e, false);
    rw_pcache__disk_detach(c, e);
    rw_pcache__forget_entry(c, e);
    n->entry = NULL;
    free(e->obsolete);
    free(e);
    rw_pcache__prune(c, n);
}

bool rw_pcache__is_ghost(const rw_pcache__entry *e) { return !e->seq && !e->on_disk && !e->write && !e->load; }

static int n_ghosts(const rw_pcache *c) {
    int g = 0;
    for (int i = 0; i < c->n_entries; i++) g += rw_pcache__is_ghost(c->entries[i]);
    return g;
}

/* An entry that is neither in memory nor on disk stays as a ghost (a later
 * miss can then say why); the oldest ghosts go when there are too many. */
void rw_pcache__become_ghost(rw_pcache *c, rw_pcache__entry *e) {
    free(e->obsolete); /* never written: its predecessors' files stay for the disk budget to age out */
    e->obsolete = NULL;
    while (n_ghosts(c) >= PC_MAX_GHOSTS) {
        rw_pcache__entry *old = NULL;
        for (int i = 0; i < c->n_entries; i++) {
            rw_pcache__entry *x = c->entries[i];
            if (x != e && rw_pcache__is_ghost(x) && (!old || x->last_used < old->last_used)) old = x;
        }
        if (!old) break;
        rw_pcache__remove_entry(c, old);
    }
}

static void drop_logits(rw_pcache *c, rw_pcache__node *n) {
    if (!n->logits) return;
    free(n->logits);
    n->logits = NULL;
    c->logits_bytes -= (size_t)c->n_vocab * sizeof(float);
}

void rw_pcache__evict(rw_pcache *c) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const double now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    while (rw_pcache__mem_used(c) + c->logits_bytes > c->cfg.mem_bytes) {
        rw_pcache__entry *old = NULL;
        for (int i = 0; i < c->n_entries; i++) {
            rw_pcache__entry *x = c->entries[i];
            /* one just loaded for a waiting request stays until it served
             * it (or for 5 s, if that request went away) */
            if (x->seq && !(x->from_disk && now - x->loaded_at < 5) && (!old || x->last_used < old->last_used))
                old = x;
        }
        if (!old) break; /* only logits (and loads not yet used) left: they go with their entries */
        c->stats.evictions++;
        /* not in the folder yet: written now (write-through's delay cut
         * short, or the evict mode's one write) by the job, which takes the
         * sequences */
        if (c->io.on && !old->on_disk && !old->write) rw_pcache__disk_queue_write(c, old, 0);
        rw_pcache__drop_memory(c, old, true);
        if (rw_pcache__is_ghost(old)) {
            /* the logits of a ghost are of no use */
            if (old->node->n_child == 0) drop_logits(c, old->node);
            rw_pcache__become_ghost(c, old);
        }
    }
    if (rw_pcache__mem_used(c) + c->logits_bytes > c->cfg.mem_bytes) {
        /* logits kept on nodes whose entry is not in memory (a disk file
         * holds its entry's own) */
        for (int i = 0; i < c->n_entries; i++)
            if (!c->entries[i]->seq) drop_logits(c, c->entries[i]->node);
    }
}

void rw_pcache__io_stats(rw_pcache *c, rw_pcache_stats *st) {
    if (!c->io.on) return;
    pthread_mutex_lock(&c->io.mu);
    st->bytes_disk = c->io.files_bytes + c->io.tmp_bytes;
    st->disk_writes = c->io.writes_ok;
    st->disk_write_errors = c->io.write_errors;
    st->disk_read_errors = c->io.read_errors;
    st->disk_invalid = c->io.invalid;
    st->disk_skipped = c->io.skipped;
    st->disk_evictions = c->io.evicted;
    int pending = c->io.n_busy_writes;
    for (rw_pcache__job *j = c->io.writes; j; j = j->next) pending += j->kind == PC_JOB_WRITE;
    st->disk_pending = (uint64_t)pending;
    pthread_mutex_unlock(&c->io.mu);
}

void rw_pcache__publish_stats(rw_pcache *c) {
    int mem = 0, disk = 0;
    for (int i = 0; i < c->n_entries; i++) mem += c->entries[i]->seq != NULL, disk += c->entries[i]->on_disk;
    c->stats.entries = (uint64_t)mem;
    c->stats.disk_entries = (uint64_t)disk;
    c->stats.bytes_kv_and_state = rw_pcache__mem_used(c);
    c->stats.bytes_kv = c->own_kv + c->blocks.bytes_kv + c->draft_kv;
    c->stats.bytes_recurrent = c->own_rec + c->blocks.bytes_rec + c->draft_rec;
    c->stats.bytes_unshared = c->full_bytes + c->draft_bytes;
    c->stats.bytes_logits = c->logits_bytes;
    pthread_mutex_lock(&c->stats_mu);
    c->pub = c->stats;
    c->pub_too_long = c->n_too_long;
    pthread_mutex_unlock(&c->stats_mu);
}

rw_status rw_pcache_check(rw_pcache *c, rw_error *err) {
    rw_pcache__blocks fresh = {0};
    size_t own = 0, full = 0, drafts = 0;
    for (int i = 0; i < c->n_entries; i++) {
        const rw_model_seq *s = c->entries[i]->seq;
        if (c->entries[i]->draft) drafts += rw_model_seq_bytes(c->entries[i]->draft);
        if (!s) continue;
        if (!rw_pcache__blocks_add(&fresh, s)) {
            rw_pcache__blocks_free(&fresh);
            return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        }
        size_t bkv, brec;
        rw_pcache__seq_block_bytes(s, &bkv, &brec);
        full += rw_model_seq_bytes(s);
        own += rw_model_seq_bytes(s) - bkv - brec;
    }
    bool same = fresh.used == c->blocks.used && fresh.bytes_kv == c->blocks.bytes_kv &&
                fresh.bytes_rec == c->blocks.bytes_rec && own == c->mem_bytes && full == c->full_bytes &&
                drafts == c->draft_bytes;
    for (size_t i = 0; same && i < c->blocks.cap; i++) {
        const rw_pcache__block *b = &c->blocks.slot[i];
        if (!b->id) continue;
        const rw_pcache__block *f = rw_pcache__blocks_find(&fresh, b->id);
        same = f && f->holders == b->holders && f->bytes == b->bytes;
    }
    const size_t used = rw_pcache__mem_used(c), distinct = fresh.bytes_kv + fresh.bytes_rec;
    rw_pcache__blocks_free(&fresh);
    if (!same)
        return rw_errorf(err, RW_ERR_INTERNAL,
                         "prefix cache: block accounting drifted (%zu own + %zu shared bytes counted, %zu + %zu recounted)",
                         c->mem_bytes, c->blocks.bytes_kv + c->blocks.bytes_rec, own, distinct);
    if (used + c->logits_bytes > c->cfg.mem_bytes)
        return rw_errorf(err, RW_ERR_INTERNAL, "prefix cache: %zu bytes held over the budget of %zu",
                         used + c->logits_bytes, c->cfg.mem_bytes);
    return RW_OK;
}
