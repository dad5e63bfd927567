/* engine_slots.c - the slots: the max_running places requests run in, what
 * each holds, and saving or restoring that state to a file (engine.h).
 *
 * What a slot holds lives in the prefix cache: a request that ends gives
 * its sequence to the cache (engine_seq.c), and its slot keeps only the
 * list of tokens. A save therefore asks the cache for those tokens (a copy
 * of the best entry cut back to its exact restore point) and writes that
 * sequence; a restore loads a file into a new sequence and gives it to the
 * cache. The cache is the scheduler's alone, so both run on the scheduler
 * thread between steps: the caller queues an operation and waits for it. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "engine/engine_int.h"

typedef struct rw_engine__slot {
    rw_engine__req *r;    /* the request running in it, or NULL */
    int32_t *held; /* idle: the tokens the last request's sequence held (owned), or NULL */
    int64_t n_held;
    int64_t cap_held; /* held's room: kept from request to request, so a slot in use allocates
                         only when a longer sequence comes (a request's memory is its own) */
    int64_t n_prompt; /* of the request running, or of the last one */
    int64_t progress; /* busy: tokens in its sequence at the last step's end */
} rw_engine__slot;

enum { OP_SAVE, OP_RESTORE, OP_ERASE };
enum { OP_QUEUED, OP_RUNNING, OP_DONE };

/* One operation, on its caller's stack; linked into e->slot_ops until the
 * scheduler takes it. state and the results are under e->mu. */
typedef struct rw_engine__slot_op {
    struct rw_engine__slot_op *next;
    int kind, slot, state;
    const char *path;
    pthread_cond_t done; /* signalled (under e->mu) when state becomes OP_DONE */
    rw_status st;
    rw_error err;
    int64_t n_tokens;
    size_t n_bytes;
} rw_engine__slot_op;

bool rw_engine__slots_new(rw_engine *e) {
    e->slots = calloc((size_t)e->cfg.max_running, sizeof *e->slots); /* freed by rw_engine__slots_free */
    return e->slots != NULL;
}

void rw_engine__slots_free(rw_engine *e) {
    for (int i = 0; e->slots && i < e->cfg.max_running; i++) free(e->slots[i].held);
    free(e->slots);
    e->slots = NULL;
}

void rw_engine__slot_take(rw_engine *e, rw_engine__req *r) {
    for (int i = 0; i < e->cfg.max_running; i++) {
        rw_engine__slot *s = &e->slots[i];
        if (s->r) continue;
        *s = (rw_engine__slot){.r = r, .n_prompt = r->n_prompt, .held = s->held, .cap_held = s->cap_held};
        r->slot = i + 1;
        return;
    }
}

void rw_engine__slot_leave(rw_engine *e, rw_engine__req *r) {
    if (!r->slot) return;
    rw_engine__slot *s = &e->slots[r->slot - 1];
    r->slot = 0;
    s->r = NULL;
    /* what went to the prefix cache: the sequence's tokens (no copy when out
     * of memory: the slot then holds nothing) */
    const int64_t n = r->n_in_seq;
    if (n > s->cap_held) {
        int32_t *p = realloc(s->held, (size_t)n * sizeof *p);
        if (p) s->held = p, s->cap_held = n;
    }
    s->n_held = n <= s->cap_held ? n : 0;
    if (s->n_held) memcpy(s->held, r->tokens, (size_t)n * sizeof *s->held);
    s->progress = 0;
}

void rw_engine__slot_progress(rw_engine *e, rw_engine__req *r) {
    if (r->slot) e->slots[r->slot - 1].progress = r->n_in_seq;
}

int rw_engine_slots(rw_engine *e, rw_engine_slot *out, int32_t *head, int max_head, int64_t *n_head) {
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->cfg.max_running; i++) {
        const rw_engine__slot *s = &e->slots[i];
        out[i] = (rw_engine_slot){.busy = s->r != NULL,
                                  .request = s->r ? s->r->id : 0,
                                  .n_prompt = s->n_prompt,
                                  .n_tokens = s->r ? s->progress : s->n_held};
        if (!head) continue;
        /* a running request's prompt is written before it is queued and
         * never changes: safe to read here */
        const int32_t *t = s->r ? s->r->tokens : s->held;
        int64_t n = s->r ? s->r->n_prompt : s->n_held;
        if (n > max_head) n = max_head;
        if (n > 0) memcpy(head + (size_t)i * (size_t)max_head, t, (size_t)n * sizeof *t);
        n_head[i] = n > 0 ? n : 0;
    }
    pthread_mutex_unlock(&e->mu);
    return e->cfg.max_running;
}

static size_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && sb.st_size > 0 ? (size_t)sb.st_size : 0;
}

/* The scheduler's side of a save. */
static rw_status run_save(rw_engine *e, rw_engine__slot_op *op, const int32_t *held, int64_t n_held, rw_error *err) {
    if (n_held <= 0)
        return rw_errorf(err, RW_ERR_NOT_FOUND, "slot %d holds nothing (no request has ended in it, or it was erased)",
                         op->slot);
    float *logits = malloc((size_t)e->n_vocab * sizeof *logits); /* a whole match restores every token with them */
    if (!logits) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    rw_model_seq *seq = NULL;
    int64_t reused = 0;
    rw_status st = rw_pcache_acquire(e->pcache, held, n_held, e->pool, &seq, &reused, logits, NULL, err);
    free(logits);
    if (!st && reused == 0)
        st = rw_errorf(err, RW_ERR_NOT_FOUND, "the prefix cache no longer holds slot %d's %lld tokens (evicted)",
                       op->slot, (long long)n_held);
    if (!st) st = rw_model_seq_save(seq, op->path, err);
    if (!st) {
        op->n_tokens = rw_model_seq_length(seq);
        op->n_bytes = file_size(op->path);
    }
    rw_model_seq_free(seq);
    return st;
}

/* The scheduler's side of a restore: the slot's new tokens in *held. */
static rw_status run_restore(rw_engine *e, rw_engine__slot_op *op, int32_t **held, int64_t *n_held, rw_error *err) {
    rw_model_seq *seq = NULL;
    rw_status st = rw_model_seq_new(e->m, e->cfg.kv_type, e->cfg.n_ctx, &seq, err);
    if (!st) st = rw_model_seq_load(seq, op->path, err);
    const int64_t n = st ? 0 : rw_model_seq_length(seq);
    if (!st && n == 0) st = rw_errorf(err, RW_ERR_FORMAT, "the state file %s holds no tokens", op->path);
    if (!st && !(*held = malloc((size_t)n * sizeof **held))) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    if (st) {
        rw_model_seq_free(seq);
        return st;
    }
    memcpy(*held, rw_model_seq_tokens(seq), (size_t)n * sizeof **held);
    *n_held = n;
    op->n_tokens = n;
    op->n_bytes = file_size(op->path);
    rw_pcache_insert(e->pcache, seq, NULL, 0, NULL); /* the cache takes it */
    return RW_OK;
}

/* One operation, on the scheduler thread without the lock. */
static void run_op(rw_engine *e, rw_engine__slot_op *op) {
    pthread_mutex_lock(&e->mu);
    rw_engine__slot *s = &e->slots[op->slot];
    const bool busy = s->r != NULL;
    int32_t *held = NULL;
    int64_t n_held = s->n_held;
    if (!busy && op->kind == OP_SAVE && n_held > 0 && !(held = malloc((size_t)n_held * sizeof *held))) n_held = -1;
    if (held) memcpy(held, s->held, (size_t)n_held * sizeof *held);
    pthread_mutex_unlock(&e->mu);
    rw_error err = {0};
    rw_status st = RW_OK;
    int32_t *fresh = NULL;
    int64_t n_fresh = 0;
    if (busy) st = rw_errorf(&err, RW_ERR_BUSY, "slot %d is processing a request", op->slot);
    else if (n_held < 0) st = rw_errorf(&err, RW_ERR_NOMEM, "out of memory");
    else if (op->kind == OP_SAVE) st = run_save(e, op, held, n_held, &err);
    else if (op->kind == OP_RESTORE) st = run_restore(e, op, &fresh, &n_fresh, &err);
    free(held);
    pthread_mutex_lock(&e->mu);
    if (!st && op->kind == OP_ERASE) {
        op->n_tokens = s->n_held;
        free(s->held);
        s->held = NULL;
        s->n_held = s->cap_held = 0;
    } else if (!st && op->kind == OP_RESTORE) {
        free(s->held);
        s->held = fresh;
        s->n_held = s->cap_held = n_fresh;
        s->n_prompt = 0;
    }
    op->st = st;
    op->err = err;
    op->state = OP_DONE;
    pthread_cond_signal(&op->done); /* the caller may free op as soon as the lock is released */
    pthread_mutex_unlock(&e->mu);
}

void rw_engine__slot_ops_run(rw_engine *e) {
    while (e->slot_ops) {
        rw_engine__slot_op *op = e->slot_ops;
        e->slot_ops = op->next;
        op->state = OP_RUNNING;
        pthread_mutex_unlock(&e->mu);
        run_op(e, op);
        pthread_mutex_lock(&e->mu);
    }
}

/* Queues an operation and waits for the scheduler to run it. */
static rw_status slot_op(rw_engine *e, int kind, int slot, const char *path, int64_t *n_tokens, size_t *n_bytes,
                         rw_error *err) {
    if (slot < 0 || slot >= e->cfg.max_running)
        return rw_errorf(err, RW_ERR_RANGE, "there is no slot %d (slots 0 to %d)", slot, e->cfg.max_running - 1);
    if (e->cfg.manual) return rw_errorf(err, RW_ERR_UNSUPPORTED, "slot operations need the scheduler thread");
    if (kind != OP_ERASE && !e->pcache)
        return rw_errorf(err, RW_ERR_UNSUPPORTED,
                         "slots are saved from and restored to the prefix cache, which is off");
    rw_engine__slot_op op = {.kind = kind, .slot = slot, .path = path, .state = OP_QUEUED};
    pthread_cond_init(&op.done, NULL);
    pthread_mutex_lock(&e->mu);
    rw_engine__slot_op **pp = &e->slot_ops;
    while (*pp) pp = &(*pp)->next;
    *pp = &op;
    pthread_cond_signal(&e->wake);
    while (op.state != OP_DONE) {
        if (e->stopping && op.state == OP_QUEUED) { /* the scheduler has left or will not run it */
            for (pp = &e->slot_ops; *pp && *pp != &op;) pp = &(*pp)->next;
            if (*pp) *pp = op.next;
            op.st = rw_errorf(&op.err, RW_ERR_CANCELLED, "the engine is stopping");
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000; /* a look at stopping now and then */
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&op.done, &e->mu, &ts);
    }
    pthread_mutex_unlock(&e->mu);
    pthread_cond_destroy(&op.done);
    if (n_tokens) *n_tokens = op.n_tokens;
    if (n_bytes) *n_bytes = op.n_bytes;
    if (op.st && err) *err = op.err;
    return op.st;
}

rw_status rw_engine_slot_save(rw_engine *e, int slot, const char *path, int64_t *n_saved, size_t *n_bytes,
                              rw_error *err) {
    return slot_op(e, OP_SAVE, slot, path, n_saved, n_bytes, err);
}

rw_status rw_engine_slot_restore(rw_engine *e, int slot, const char *path, int64_t *n_restored, size_t *n_bytes,
                                 rw_error *err) {
    return slot_op(e, OP_RESTORE, slot, path, n_restored, n_bytes, err);
}

rw_status rw_engine_slot_erase(rw_engine *e, int slot, int64_t *n_erased, rw_error *err) {
    return slot_op(e, OP_ERASE, slot, NULL, n_erased, NULL, err);
}
