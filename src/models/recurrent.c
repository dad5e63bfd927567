/* recurrent.c - a recurrent layer's conv and scan over every segment of a
 * pass (model_int.h: rw_models__rec_append), in each sequence's own state.
 *
 * One segment at a time, each with the whole pool (its heads in parallel),
 * suits long segments (prefill). A decode or verify step has many short
 * segments instead, and then the per-segment work left on one thread (conv,
 * norms, the state's bookkeeping) and the pool's start and finish per
 * segment and layer, 16 sequences x 18 layers a step for a 16-client
 * server, leave the other threads waiting: so short segments are handed
 * out whole, one per task, each run on one thread (a run started inside a
 * task is serial, see threadpool.h). A segment's results are the same
 * either way: its heads are independent and each is computed alike. */
#include <stdbool.h>
#include <stdlib.h>

#include "cache/state.h"
#include "models/model_int.h"

enum { SHORT_SEGMENT = 16 }; /* rows up to which segments are run whole, one per task */

typedef struct {
    int il;
    const rw_models__batch *bt;
    const float *in;
    int64_t in_stride;
    float *out;
    int64_t out_stride;
    rw_status *st; /* per segment */
    rw_error *errs; /* per segment */
} rec_job;

static rw_status append_one(const rec_job *j, int i, rw_threadpool *pool, rw_error *err) {
    const rw_models__seg *g = &j->bt->seg[i];
    return rw_rec_state_append(g->s->layer[j->il], j->in + g->row0 * j->in_stride, j->in_stride, g->n, g->s->cuts,
                               g->s->n_cuts, g->s->log_from, j->out + g->row0 * j->out_stride, j->out_stride, pool,
                               err);
}

static void append_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    const rec_job *j = ctx;
    j->st[task] = append_one(j, (int)task, j->bt->pool, &j->errs[task]);
}

rw_status rw_models__rec_append(const rw_models__batch *bt, int il, const float *in, int64_t in_stride, float *out,
                         int64_t out_stride, rw_error *err) {
    rec_job j = {.il = il, .bt = bt, .in = in, .in_stride = in_stride, .out = out, .out_stride = out_stride};
    bool whole = bt->n_seg >= 2 && rw_threadpool_size(bt->pool) > 1;
    for (int i = 0; whole && i < bt->n_seg; i++) whole = bt->seg[i].n <= SHORT_SEGMENT;
    if (whole) {
        j.st = calloc((size_t)bt->n_seg, sizeof *j.st);        /* freed below */
        j.errs = calloc((size_t)bt->n_seg, sizeof *j.errs);    /* freed below */
        whole = j.st && j.errs;
        if (!whole) free(j.st), free(j.errs);
    }
    if (!whole) { /* long segments, or no memory for the statuses: one at a time */
        for (int i = 0; i < bt->n_seg; i++) {
            rw_status st = append_one(&j, i, bt->pool, err);
            if (st) return st;
        }
        return RW_OK;
    }
    rw_threadpool_run(bt->pool, append_task, &j, bt->n_seg);
    rw_status st = RW_OK;
    for (int i = 0; i < bt->n_seg && !st; i++)
        if ((st = j.st[i]) && err) *err = j.errs[i];
    free(j.st), free(j.errs);
    return st;
}
