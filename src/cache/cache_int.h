/* cache_int.h - private to src/cache: what a recurrent state kind supplies
 * to the shared recurrent machinery (rec_state.c). */
#ifndef RW_CACHE_CACHE_INT_H
#define RW_CACHE_CACHE_INT_H

#include "cache/state.h"

typedef struct {
    const char *name;
    /* Floats of scratch run needs for n tokens on a pool of n_threads. */
    int64_t (*scratch_floats)(const rw_rec_params *p, int64_t n, int n_threads);
    /* Runs the recurrence over n tokens from the state (conv, mat): token t's
     * logged inputs at in + t*in_stride, its outputs to out + t*out_stride.
     * Cannot fail: every buffer it needs is given. The same inputs from the
     * same state give bitwise the same state and outputs however the tokens
     * are split into runs. */
    void (*run)(const rw_rec_params *p, float *conv, float *mat, int64_t n, const float *in, int64_t in_stride,
                float *out, int64_t out_stride, float *scratch, rw_threadpool *pool);
} rec_kind;

/* state_pool.c: 64-byte aligned buffers for recurrent states and their
 * checkpoints, bytes each; rw_cache__rec_buf_free gets the same size back (NULL is
 * fine). NULL when out of memory. */
void *rw_cache__rec_buf_alloc(size_t bytes);
void rw_cache__rec_buf_free(void *p, size_t bytes);

rw_status rw_cache__rec_state_new(const rec_kind *kind, const rw_rec_params *p, rw_layer_state **out, rw_error *err);

#endif
