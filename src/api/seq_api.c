/* seq_api.c - one sequence driven by hand (include/rewind.h): evaluate,
 * rewind, save and load, over models/model.h's sequences. */
#include <stdlib.h>

#include "api/api_int.h"

struct rw_seq {
    rw_model *m;        /* borrowed: outlives the sequence */
    rw_model_seq *s;    /* owned */
};

/* The model's thread pool, made on first use (one per model: forward passes
 * of a model never run concurrently). */
static rw_status model_pool(rw_api__bundle *b, rw_threadpool **pool, rw_error *err) {
    pthread_mutex_lock(&b->mu);
    rw_status st = RW_OK;
    if (!b->pool) st = rw_threadpool_new(b->pool_threads, &b->pool, err);
    *pool = b->pool;
    pthread_mutex_unlock(&b->mu);
    return st;
}

rw_status rw_seq_new(rw_model *m, int64_t n_ctx, bool kv_f32, rw_seq **out, rw_error *err) {
    if (!out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_seq_new: out is NULL");
    *out = NULL;
    if (!rw_api__bundle_of(m, err)) return RW_ERR_INVALID_ARG;
    rw_seq *q = calloc(1, sizeof *q); /* freed by rw_seq_free */
    if (!q) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    q->m = m;
    rw_status st = rw_model_seq_new(m, kv_f32 ? RW_KV_F32 : RW_KV_F16, n_ctx > 0 ? n_ctx : 4096, &q->s, err);
    if (st) {
        free(q);
        return st;
    }
    *out = q;
    return RW_OK;
}

void rw_seq_free(rw_seq *s) {
    if (!s) return;
    rw_model_seq_free(s->s);
    free(s);
}

rw_status rw_seq_eval(rw_seq *s, const int32_t *ids, int64_t n, float *logits, rw_error *err) {
    if (!s || !ids || n < 1) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_seq_eval: need a sequence and n >= 1 ids");
    rw_threadpool *pool;
    rw_status st = model_pool(rw_model_api_data(s->m), &pool, err);
    if (st) return st;
    const rw_forward_args a = {.tokens = ids, .n = n, .logits = logits, .pool = pool};
    return rw_model_forward(s->m, s->s, &a, err);
}

int64_t rw_seq_length(const rw_seq *s) { return s ? rw_model_seq_length(s->s) : 0; }

rw_status rw_seq_rewind(rw_seq *s, int64_t n, rw_error *err) {
    if (!s) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_seq_rewind: NULL sequence");
    rw_threadpool *pool;
    rw_status st = model_pool(rw_model_api_data(s->m), &pool, err);
    if (st) return st;
    return rw_model_seq_rewind(s->s, n, pool, err);
}

rw_status rw_seq_save(const rw_seq *s, const char *path, rw_error *err) {
    if (!s || !path) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_seq_save: NULL argument");
    return rw_model_seq_save(s->s, path, err);
}

rw_status rw_seq_load(rw_seq *s, const char *path, rw_error *err) {
    if (!s || !path) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_seq_load: NULL argument");
    return rw_model_seq_load(s->s, path, err);
}

rw_status rw_seq_eval_batch(const rw_seq_batch *items, int n_items, rw_error *err) {
    if (!items || n_items < 1 || n_items > RW_SEQ_BATCH_MAX)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_seq_eval_batch: 1 to %d items", RW_SEQ_BATCH_MAX);
    rw_batch_item b[RW_SEQ_BATCH_MAX];
    rw_model *m = items[0].seq ? items[0].seq->m : NULL;
    for (int i = 0; i < n_items; i++) {
        const rw_seq_batch *it = &items[i];
        if (!it->seq || !it->ids || it->n < 1)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_seq_eval_batch: item %d needs a sequence and n >= 1 ids", i);
        if (it->seq->m != m)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_seq_eval_batch: item %d is a sequence of another model", i);
        for (int k = 0; k < i; k++)
            if (items[k].seq == it->seq)
                return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_seq_eval_batch: items %d and %d are one sequence", k, i);
        b[i] = (rw_batch_item){
            .seq = it->seq->s, .tokens = it->ids, .n = it->n, .logits = it->logits, .all_logits = it->all_logits};
    }
    rw_threadpool *pool;
    rw_status st = model_pool(rw_model_api_data(m), &pool, err);
    if (st) return st;
    return rw_model_forward_batch(m, b, n_items, pool, err);
}

size_t rw_model_state_bytes(const rw_model *m, int64_t n_ctx, bool kv_f32, int max_checkpoints) {
    if (!m || !rw_model_api_data(m) || n_ctx < 1) return 0;
    return rw_model_seq_bytes_at(m, kv_f32 ? RW_KV_F32 : RW_KV_F16, n_ctx, max_checkpoints);
}
