/* threadpool.h - persistent worker threads running parallel-for loops.
 *
 * A pool of n threads is the calling thread plus n-1 workers created once by
 * rw_threadpool_new and kept until rw_threadpool_free. rw_threadpool_run(fn,
 * ctx, n_tasks) calls fn(ctx, task, thread) once for every task index in
 * [0, n_tasks), spread over the threads, and returns when all have finished.
 * Tasks are handed out in increasing order from a shared counter, so a slow
 * thread simply takes fewer of them; which thread runs which task is not
 * fixed, so a task must never depend on it except to pick per-thread scratch
 * space (thread is in [0, n)). Results are deterministic as long as each task
 * writes only its own outputs.
 *
 * Dispatch is cheap (decode runs hundreds of them per token): idle workers
 * spin for a short while on a generation counter before sleeping on a futex,
 * and the caller does its share of the tasks itself.
 *
 * A NULL pool runs every task on the calling thread. A run started from
 * inside a task of the same pool also runs serially on the calling thread.
 * Two threads may call run on one pool at the same time; the runs are
 * serialised.
 */
#ifndef RW_BASE_THREADPOOL_H
#define RW_BASE_THREADPOOL_H

#include <stdint.h>

#include "base/status.h"

typedef struct rw_threadpool rw_threadpool;

/* One task of a parallel-for: task in [0, n_tasks), thread in [0, size). */
typedef void (*rw_task_fn)(void *ctx, int64_t task, int thread);

/* Creates a pool of n_threads threads (the caller counts as one, so 1 creates
 * no worker); n_threads = 0 means the number of physical cores this process
 * may run on. The caller owns *out and frees it with rw_threadpool_free. */
rw_status rw_threadpool_new(int n_threads, rw_threadpool **out, rw_error *err);

/* Stops and joins the workers and frees the pool; no-op on NULL. No run may
 * be in progress. */
void rw_threadpool_free(rw_threadpool *pool);

/* Number of threads (1 for a NULL pool). */
int rw_threadpool_size(const rw_threadpool *pool);

/* Runs fn for every task in [0, n_tasks) and waits for all of them. */
void rw_threadpool_run(rw_threadpool *pool, rw_task_fn fn, void *ctx, int64_t n_tasks);

/* One piece of a parallel loop over rows: rows [r0, r1). */
typedef void (*rw_rows_fn)(void *ctx, int64_t r0, int64_t r1);

/* Runs fn over [0, n) in pieces of at least min_rows rows, a few pieces a
 * thread, and waits; fewer than 2 * min_rows rows run in one piece on the
 * calling thread. For per-row work whose result does not depend on the
 * piece (each row written by one call). */
void rw_threadpool_rows(rw_threadpool *pool, int64_t n, int64_t min_rows, rw_rows_fn fn, void *ctx);

/* Physical cores available to this process (at least 1). */
int rw_physical_cores(void);

#endif
