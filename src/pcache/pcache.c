/* pcache.c - entries of the prefix cache (pcache.h): making and freeing
 * the cache, insert, lookup (prepare / acquire), and applying what the
 * disk tier's threads report (pcache_int.h says who owns what). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/log.h"
#include "pcache/pcache_int.h"

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

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

static rw_pcache__entry *entry_named(rw_pcache *c, const char *name) {
    for (int i = 0; i < c->n_entries; i++)
        if (!strcmp(c->entries[i]->name, name)) return c->entries[i];
    return NULL;
}

/* ---- what the disk tier's threads report ---- */

static void apply_found(rw_pcache *c, rw_pcache__job *j) {
    if (j->n_tokens > c->max_ctx) { /* usable by a configuration with a longer context: left alone */
        if (!c->n_too_long++)
            rw_log(RW_LOG_WARN, "prefix cache: leaving %s alone: %lld tokens, longer than the context (%lld)",
                    j->name, (long long)j->n_tokens, (long long)c->max_ctx);
        return;
    }
    rw_pcache__node *node = rw_pcache__insert_path(c, j->tokens, j->n_tokens);
    if (!node) return;
    rw_pcache__entry *e = node->entry ? node->entry : rw_pcache__new_entry(c, node);
    if (!e) {
        rw_pcache__prune(c, node);
        return;
    }
    e->on_disk = true;
    e->invalid = false;
    e->disk_bytes = j->bytes;
}

static void apply_gone(rw_pcache *c, rw_pcache__job *j) {
    rw_pcache__entry *e = entry_named(c, j->name);
    if (!e || !e->on_disk) return;
    e->on_disk = false;
    e->disk_bytes = 0;
    if (rw_pcache__is_ghost(e)) rw_pcache__become_ghost(c, e);
}

static void apply_write(rw_pcache *c, rw_pcache__job *j) {
    rw_pcache__entry *e = j->e;
    if (e) {
        e->write = NULL;
        if (!j->st) {
            e->on_disk = true;
            e->disk_bytes = j->bytes;
        }
        if (rw_pcache__is_ghost(e)) rw_pcache__become_ghost(c, e);
    }
    if (j->owned) { /* the sequences were handed to the job: ours to free, on this thread */
        rw_model_seq_free(j->seq);
        rw_model_seq_free(j->draft);
        j->seq = j->draft = NULL;
    }
}

static void apply_load(rw_pcache *c, rw_pcache__job *j) {
    rw_pcache__entry *e = j->e;
    if (!e) return; /* gone meanwhile: the job frees what it loaded */
    e->load = NULL;
    if (j->st) {
        e->on_disk = false;
        e->disk_bytes = 0;
        e->invalid = j->invalid;
        if (rw_pcache__is_ghost(e)) rw_pcache__become_ghost(c, e);
        return;
    }
    if (e->seq) return; /* back in memory another way (a request left the same tokens) */
    /* the file must hold exactly the tokens of its place in the tree */
    bool same = rw_model_seq_length(j->out_seq) == e->node->depth;
    const int32_t *t = rw_model_seq_tokens(j->out_seq);
    for (const rw_pcache__node *a = e->node; same && a != &c->root; a = a->parent)
        same = !memcmp(t + a->depth - a->edge_len, a->edge, (size_t)a->edge_len * sizeof *t);
    if (!same) return; /* cannot happen: the name is a hash of the tokens and the reader compared them */
    e->seq = j->out_seq;
    j->out_seq = NULL;
    if (!rw_pcache__account_add(c, e)) {
        j->out_seq = e->seq; /* freed with the job */
        e->seq = NULL;
        return;
    }
    if (j->out_draft) rw_pcache__draft_set(c, e, draft_for(e->seq, j->out_draft));
    j->out_draft = NULL;
    if (j->logits && !e->node->logits) {
        e->node->logits = j->logits;
        j->logits = NULL;
        c->logits_bytes += (size_t)c->n_vocab * sizeof(float);
    }
    e->from_disk = true;
    e->loaded_at = now_s();
    e->last_used = ++c->clock;
}

/* Applies every report of the I/O threads (the caller's thread). */
static void apply(rw_pcache *c) {
    if (!c->io.on) return;
    rw_pcache__job *j = rw_pcache__disk_take_done(c);
    while (j) {
        rw_pcache__job *next = j->next;
        switch (j->kind) {
        case PC_JOB_FOUND: apply_found(c, j); break;
        case PC_JOB_GONE: apply_gone(c, j); break;
        case PC_JOB_WRITE: apply_write(c, j); break;
        case PC_JOB_LOAD: apply_load(c, j); break;
        default: break;
        }
        rw_pcache__job_free(j);
        j = next;
    }
    rw_pcache__evict(c); /* loads may have brought the memory tier over its budget */
}

/* ---- making, freeing ---- */

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
        rw_status st = rw_pcache__disk_start(c, err);
        if (st) {
            rw_pcache_free(c);
            return st;
        }
    }
    *out = c;
    return RW_OK;
}

void rw_pcache_flush(rw_pcache *c, bool all, double seconds) {
    if (!c->io.on) return;
    apply(c);
    if (all) { /* every entry in memory that is not in the folder, most recent first */
        for (;;) {
            rw_pcache__entry *best = NULL;
            for (int i = 0; i < c->n_entries; i++) {
                rw_pcache__entry *x = c->entries[i];
                if (x->seq && !x->on_disk && !x->write && (!best || x->last_used > best->last_used)) best = x;
            }
            if (!best) break;
            rw_pcache__disk_queue_write(c, best, 0);
            if (!best->write) break; /* out of memory */
        }
    }
    const double end = now_s() + seconds;
    pthread_mutex_lock(&c->io.mu);
    c->io.flush = true;
    pthread_cond_broadcast(&c->io.wake_writer);
    for (;;) {
        bool pending = c->io.n_busy > 0;
        for (rw_pcache__job *j = c->io.writes; j && !pending; j = j->next) pending = true;
        if (!pending || now_s() >= end) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&c->io.done_cv, &c->io.mu, &ts);
    }
    c->io.flush = false;
    pthread_mutex_unlock(&c->io.mu);
    apply(c);
    rw_pcache__publish_stats(c);
}

void rw_pcache_free(rw_pcache *c) {
    if (!c) return;
    if (c->io.on) {
        rw_pcache_flush(c, true, c->cfg.flush_seconds > 0 ? c->cfg.flush_seconds : 10);
        rw_pcache__disk_stop(c, 0);
        apply(c);
        pthread_cond_destroy(&c->io.done_cv);
        pthread_cond_destroy(&c->io.wake_reader);
        pthread_cond_destroy(&c->io.wake_writer);
        pthread_mutex_destroy(&c->io.scan_mu);
        pthread_mutex_destroy(&c->io.mu);
    }
    for (int i = 0; i < c->n_entries; i++) {
        rw_model_seq_free(c->entries[i]->seq);
        rw_model_seq_free(c->entries[i]->draft);
        free(c->entries[i]->obsolete);
        free(c->entries[i]);
    }
    free(c->entries);
    rw_pcache__blocks_free(&c->blocks);
    rw_pcache__free_node(c, &c->root);
    free(c->dir);
    pthread_mutex_destroy(&c->stats_mu);
    free(c);
}

/* ---- insert ---- */

void rw_pcache_insert(rw_pcache *c, rw_model_seq *seq, const float *last_logits, int64_t at_pos,
                      const float *at_logits) {
    rw_pcache_insert_with_draft(c, seq, NULL, last_logits, at_pos, at_logits);
}

/* Adds name to e's list of files made redundant by it. */
static void add_obsolete(rw_pcache__entry *e, const char *name) {
    const size_t have = e->obsolete ? strlen(e->obsolete) : 0, add = strlen(name);
    char *s = realloc(e->obsolete, have + add + 2);
    if (!s) return; /* the file stays until the disk budget ages it out */
    if (have) s[have] = '\n';
    memcpy(s + (have ? have + 1 : 0), name, add + 1);
    e->obsolete = s;
}

void rw_pcache_insert_with_draft(rw_pcache *c, rw_model_seq *seq, rw_model_seq *draft, const float *last_logits,
                                 int64_t at_pos, const float *at_logits) {
    apply(c);
    const int64_t n = rw_model_seq_length(seq);
    if (n == 0 || c->cfg.mem_bytes == 0 || rw_model_seq_model(seq) != c->m || rw_model_seq_kv_type(seq) != c->kv_type) {
        rw_model_seq_free(seq);
        rw_model_seq_free(draft);
        return;
    }
    draft = draft_for(seq, draft);
    const int32_t *t = rw_model_seq_tokens(seq);
    rw_pcache__node *node = rw_pcache__insert_path(c, t, n);
    if (!node) {
        rw_model_seq_free(seq);
        rw_model_seq_free(draft);
        return;
    }
    if (last_logits) rw_pcache__set_logits(c, node, last_logits);
    if (at_logits && at_pos > 0 && at_pos < n) {
        rw_pcache__node *mid = rw_pcache__insert_path(c, t, at_pos); /* splits the path there: the entry's node stays below */
        if (mid) rw_pcache__set_logits(c, mid, at_logits);
    }
    /* a descendant that restores this whole prefix without a matmul makes
     * this one redundant (its logits stay on the node) */
    rw_pcache__entry *below[PC_MAX_CANDIDATES];
    int nb = 0;
    for (int i = 0; i < node->n_child; i++) rw_pcache__collect(node->child[i], below, &nb, PC_MAX_CANDIDATES);
    for (int i = 0; i < nb; i++) {
        int64_t rec;
        if (below[i]->seq && rw_model_seq_rewind_cost(below[i]->seq, n, NULL, &rec) == RW_OK && rec == 0) {
            below[i]->last_used = ++c->clock;
            rw_model_seq_free(seq);
            rw_model_seq_free(draft);
            rw_pcache__evict(c);
            rw_pcache__publish_stats(c);
            return;
        }
    }
    rw_pcache__entry *e = node->entry;
    if (e) { /* the same tokens again: the newer sequence replaces the old (its file, same tokens, stays valid) */
        rw_pcache__drop_memory(c, e, false);
    } else if (!(e = rw_pcache__new_entry(c, node))) {
        rw_model_seq_free(seq);
        rw_model_seq_free(draft);
        rw_pcache__prune(c, node);
        return;
    }
    e->seq = seq;
    e->invalid = false;
    if (!rw_pcache__account_add(c, e)) { /* out of memory: the entry stays as it was (gone from memory) */
        e->seq = NULL;
        rw_model_seq_free(seq);
        rw_model_seq_free(draft);
        if (rw_pcache__is_ghost(e)) rw_pcache__remove_entry(c, e);
        rw_pcache__publish_stats(c);
        return;
    }
    rw_pcache__draft_set(c, e, draft);
    e->last_used = ++c->clock;
    /* ancestors this one restores exactly without a matmul are redundant;
     * their files go once this entry's is written */
    for (rw_pcache__node *a = node->parent; a && a != &c->root; a = a->parent) {
        rw_pcache__entry *x = a->entry;
        int64_t rec;
        if (x && x->seq && !x->load && rw_model_seq_rewind_cost(seq, a->depth, NULL, &rec) == RW_OK && rec == 0) {
            if (x->on_disk) add_obsolete(e, x->name);
            if (x->obsolete) {
                add_obsolete(e, x->obsolete);
                free(x->obsolete);
                x->obsolete = NULL;
            }
            rw_pcache__drop_memory(c, x, false);
            rw_pcache__disk_detach(c, x);
            rw_pcache__forget_entry(c, x);
            a->entry = NULL;
            free(x);
        }
    }
    if (c->io.on && !e->on_disk && !e->write && c->cfg.write_mode == RW_PCACHE_WRITE_THROUGH)
        rw_pcache__disk_queue_write(c, e, c->cfg.write_delay);
    rw_pcache__evict(c);
    rw_pcache__publish_stats(c);
}

/* ---- lookup ---- */

/* The deepest position <= target that e's sequence restores without a
 * matmul. */
static int64_t restore_point(const rw_pcache__entry *e, int64_t target) {
    int64_t rec;
    if (rw_model_seq_rewind_cost(e->seq, target, NULL, &rec)) return 0;
    return target - rec;
}

/* A copy of e's draft sequence cut back to its deepest restore point <= n
 * that needs no matmul, if its tokens are prompt's up to there; else NULL. */
static rw_model_seq *draft_copy(const rw_pcache__entry *e, const int32_t *prompt, int64_t n, rw_threadpool *pool) {
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

/* The lookup's view of the prompt: candidates (entries on the matched path
 * and below the point the walk reached), how far a restore may go. */
typedef struct {
    rw_pcache__entry *cand[PC_MAX_CANDIDATES];
    int k;
    int64_t l;          /* tokens of the prompt the tree follows */
    const rw_pcache__node *exact; /* the node of the whole prompt, or NULL */
    bool can_full;      /* the whole prompt may be restored (its logits are kept and wanted) */
} lookup;

static void look(rw_pcache *c, const int32_t *prompt, int64_t n, bool want_logits, lookup *lk) {
    lk->k = 0;
    lk->l = 0;
    rw_pcache__node *end = n > 0 ? rw_pcache__walk(c, prompt, n, &lk->l) : &c->root;
    rw_pcache__collect(end, lk->cand, &lk->k, PC_MAX_CANDIDATES);
    for (rw_pcache__node *a = end->parent; a && lk->k < PC_MAX_CANDIDATES; a = a->parent)
        if (a->entry) lk->cand[lk->k++] = a->entry;
    lk->exact = lk->l == n && end->depth == n ? end : NULL;
    lk->can_full = lk->exact && lk->exact->logits && want_logits;
}

/* The target a candidate could reach: what it shares with the prompt (the
 * last token only with its logits). */
static int64_t target_of(const lookup *lk, const rw_pcache__entry *e, int64_t n) {
    const int64_t sh = e->node->depth < lk->l ? e->node->depth : lk->l;
    return sh == n && !lk->can_full ? n - 1 : sh;
}

bool rw_pcache_prepare(rw_pcache *c, const int32_t *prompt, int64_t n, rw_pcache_wait *w) {
    apply(c);
    if (!c->io.on || n <= 0) return true;
    lookup lk;
    look(c, prompt, n, true, &lk);
    int64_t mem_best = 0;
    for (int i = 0; i < lk.k; i++)
        if (lk.cand[i]->seq) {
            const int64_t t = target_of(&lk, lk.cand[i], n);
            const int64_t r = t > mem_best ? restore_point(lk.cand[i], t) : 0;
            if (r > mem_best) mem_best = r;
        }
    if (!w->started) {
        w->started = true;
        /* another process may have written what this prompt needs: check the
         * folder (cheap when it did not change) unless memory serves it all */
        if (mem_best < n - 1) w->scan_gen = rw_pcache__disk_want_scan(c);
    }
    pthread_mutex_lock(&c->io.mu);
    const bool scanned = c->io.scan_done >= w->scan_gen;
    pthread_mutex_unlock(&c->io.mu);
    if (!scanned) return false;
    if (w->scan_gen) { /* the scan's news (on the done list before scan_done moved) */
        apply(c);
        look(c, prompt, n, true, &lk);
    }
    /* the candidate on disk that could serve the most beyond memory */
    rw_pcache__entry *best = NULL;
    int64_t best_t = mem_best;
    for (int i = 0; i < lk.k; i++) {
        rw_pcache__entry *e = lk.cand[i];
        if (e->seq || (!e->on_disk && !e->load)) continue;
        const int64_t t = target_of(&lk, e, n);
        if (t > best_t || (t == best_t && best && e->last_used > best->last_used)) best = e, best_t = t;
    }
    if (!best) return true;
    if (best->load) return false;
    if (w->n_loads >= 4) return true; /* enough tries: serve from what memory has */
    w->n_loads++;
    rw_pcache__disk_queue_load(c, best);
    return !best->load; /* out of memory: go on without it */
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
    if (c->io.on) { /* a caller that did not prepare waits here */
        rw_pcache_wait w = {0};
        while (!rw_pcache_prepare(c, prompt, n, &w)) {
            pthread_mutex_lock(&c->io.mu);
            if (!c->io.done) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 5 * 1000 * 1000;
                if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
                pthread_cond_timedwait(&c->io.done_cv, &c->io.mu, &ts);
            }
            pthread_mutex_unlock(&c->io.mu);
        }
    } else {
        apply(c);
    }
    rw_pcache_usage us = {.prompt_tokens = n, .reason = RW_PC_NO_ENTRY};
    lookup lk;
    look(c, prompt, n, logits != NULL, &lk);
    rw_pcache__entry *best = NULL;
    int64_t best_c = 0, shared = 0;
    bool saw_ghost = false, saw_invalid = false;
    for (int i = 0; i < lk.k; i++) {
        rw_pcache__entry *e = lk.cand[i];
        const int64_t sh = e->node->depth < lk.l ? e->node->depth : lk.l;
        if (sh > shared) shared = sh;
        if (!e->seq) {
            saw_ghost |= rw_pcache__is_ghost(e);
            saw_invalid |= e->invalid;
            continue;
        }
        const int64_t target = target_of(&lk, e, n);
        if (target <= best_c) continue;
        const int64_t r = restore_point(e, target);
        if (r > best_c || (r == best_c && best && e->last_used > best->last_used)) {
            best_c = r;
            best = e;
        }
    }
    rw_status st;
    const bool best_from_disk = best && best_c > 0 && best->from_disk;
    for (int i = 0; i < lk.k; i++) /* loaded for this prompt and not the best: plain memory entries now */
        if (lk.cand[i] != best) lk.cand[i]->from_disk = false;
    if (best && best_c > 0) {
        if ((st = rw_model_seq_clone(best->seq, out, err))) return st;
        /* best_c is the entry's own restore point: no matmul here */
        if ((st = rw_model_seq_rewind(*out, best_c, pool, err))) {
            rw_model_seq_free(*out);
            *out = NULL;
            return st;
        }
        best->last_used = ++c->clock;
        best->from_disk = false;
        if (best->on_disk && !best_from_disk) rw_pcache__disk_queue_touch(c, best->name);
        *reused = best_c;
        if (draft_out) *draft_out = draft_copy(best, prompt, best_c, pool);
        if (best_c == n) memcpy(logits, lk.exact->logits, (size_t)c->n_vocab * sizeof *logits);
    } else if ((st = rw_model_seq_new(c->m, c->kv_type, c->max_ctx, out, err))) {
        return st;
    }
    us.shared = shared;
    if (best_from_disk) us.from_disk = *reused;
    else us.from_memory = *reused;
    us.recomputed = n - *reused;
    /* why more than the new tail is recomputed (the tail: past what any
     * entry shared, and the last token when its logits are not kept) */
    const int64_t tail = n - shared + (shared == n && !lk.can_full ? 1 : 0);
    int n_foreign = 0;
    if (c->io.on) {
        pthread_mutex_lock(&c->io.mu);
        n_foreign = c->io.n_foreign;
        pthread_mutex_unlock(&c->io.mu);
    }
    if (us.recomputed <= tail && shared > 0) us.reason = RW_PC_HIT;
    else if (saw_invalid) us.reason = RW_PC_DISK_INVALID;
    else if (shared > 0 && best_c < shared - (shared == n && !lk.can_full)) us.reason = RW_PC_CKPT_TOO_FAR;
    else if (saw_ghost) us.reason = RW_PC_EVICTED;
    else us.reason = shared > 0 ? RW_PC_HIT : n_foreign ? RW_PC_DIFFERENT_MODEL : RW_PC_NO_ENTRY;
    if (saw_ghost && !best) us.reason = RW_PC_EVICTED;
    if (saw_invalid && !best) us.reason = RW_PC_DISK_INVALID;
    c->stats.lookups++;
    if (*reused) {
        if (best_from_disk) c->stats.hits_disk++, c->stats.tokens_disk += (uint64_t)*reused;
        else c->stats.hits_memory++, c->stats.tokens_memory += (uint64_t)*reused;
    }
    c->stats.tokens_recomputed += (uint64_t)us.recomputed;
    rw_pcache__evict(c);
    rw_pcache__publish_stats(c);
    if (u) *u = us;
    return RW_OK;
}

rw_status rw_pcache_verify(rw_pcache *c, int *n_ok, int *n_invalid, int *n_unreadable, rw_error *err) {
    *n_ok = *n_invalid = *n_unreadable = 0;
    if (!c->io.on) return rw_errorf(err, RW_ERR_INVALID_ARG, "the cache has no disk tier");
    const uint64_t gen = rw_pcache__disk_want_scan(c);
    pthread_mutex_lock(&c->io.mu);
    while (c->io.scan_done < gen) pthread_cond_wait(&c->io.done_cv, &c->io.mu);
    pthread_mutex_unlock(&c->io.mu);
    apply(c);
    for (int i = 0; i < c->n_entries; i++) {
        rw_pcache__entry *e = c->entries[i];
        if (!e->on_disk) continue;
        rw_pcache__job *j = calloc(1, sizeof *j);
        if (!j) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        j->kind = PC_JOB_LOAD;
        snprintf(j->name, sizeof j->name, "%s", e->name);
        rw_pcache__disk_load(c, j);
        if (!j->st) ++*n_ok;
        else if (j->invalid) ++*n_invalid;
        else ++*n_unreadable;
        rw_pcache__job_free(j);
    }
    return RW_OK;
}

void rw_pcache_get_stats(rw_pcache *c, rw_pcache_stats *out) {
    pthread_mutex_lock(&c->stats_mu);
    *out = c->pub;
    const uint64_t too_long = (uint64_t)c->pub_too_long;
    pthread_mutex_unlock(&c->stats_mu);
    /* the disk tier's figures as they are now (its threads keep them), not
     * as of the caller's last call: an idle server's /metrics stays true */
    rw_pcache__io_stats(c, out);
    out->disk_skipped += too_long;
}
