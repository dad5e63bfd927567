/* test_threadpool.c - every task runs exactly once, for many quick runs,
 * nested runs, concurrent callers and pools of every small size. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "harness.h"

typedef struct {
    _Atomic int *hits;
    int n_threads;
    _Atomic int bad_thread;
} count_ctx;

static void count_task(void *ctx, int64_t task, int thread) {
    count_ctx *c = ctx;
    atomic_fetch_add(&c->hits[task], 1);
    if (thread < 0 || thread >= c->n_threads) atomic_store(&c->bad_thread, 1);
}

static bool run_and_count(rw_threadpool *pool, int64_t n_tasks) {
    _Atomic int *hits = calloc((size_t)n_tasks + 1, sizeof *hits);
    count_ctx c = {.hits = hits, .n_threads = rw_threadpool_size(pool)};
    rw_threadpool_run(pool, count_task, &c, n_tasks);
    bool ok = !atomic_load(&c.bad_thread);
    for (int64_t i = 0; i < n_tasks; i++) ok &= atomic_load(&hits[i]) == 1;
    free(hits);
    return ok;
}

/* A task that itself runs a parallel-for on the same pool (must go serial). */
typedef struct {
    rw_threadpool *pool;
    _Atomic int total;
} nested_ctx;

static void inner_task(void *ctx, int64_t task, int thread) {
    (void)task;
    (void)thread;
    atomic_fetch_add(&((nested_ctx *)ctx)->total, 1);
}

static void outer_task(void *ctx, int64_t task, int thread) {
    (void)task;
    (void)thread;
    nested_ctx *n = ctx;
    rw_threadpool_run(n->pool, inner_task, n, 5);
}

static void *concurrent_caller(void *arg) {
    rw_threadpool *pool = arg;
    bool ok = true;
    for (int i = 0; i < 200; i++) ok &= run_and_count(pool, 1 + i % 37);
    return ok ? arg : NULL;
}

int main(void) {
    CHECK(rw_physical_cores() >= 1);
    CHECK(run_and_count(NULL, 10));
    CHECK_EQ_INT(rw_threadpool_size(NULL), 1);

    rw_error err;
    rw_threadpool *bad = NULL;
    CHECK(rw_threadpool_new(-1, &bad, &err) == RW_ERR_INVALID_ARG && !bad);

    int runs = rw_test_sanitized() ? 300 : 3000;
    for (int n = 0; n <= 4; n++) {
        rw_threadpool *pool = NULL;
        CHECK(rw_threadpool_new(n, &pool, &err) == RW_OK);
        if (!pool) continue;
        CHECK(rw_threadpool_size(pool) == (n ? n : rw_physical_cores()));
        bool ok = true;
        for (int i = 0; i < runs; i++) ok &= run_and_count(pool, i % 9); /* includes 0 and 1 task */
        CHECK_MSG(ok, "pool of %d: a task ran twice, never, or on a bad thread index", n);
        CHECK(run_and_count(pool, 100000));

        nested_ctx nc = {.pool = pool};
        rw_threadpool_run(pool, outer_task, &nc, 7);
        CHECK_EQ_INT(atomic_load(&nc.total), 35);

        /* two threads sharing the pool: runs are serialised, none is lost */
        pthread_t th;
        CHECK(pthread_create(&th, NULL, concurrent_caller, pool) == 0);
        void *res1 = concurrent_caller(pool), *res2 = NULL;
        pthread_join(th, &res2);
        CHECK(res1 == pool && res2 == pool);
        rw_threadpool_free(pool);
    }
    rw_threadpool_free(NULL);
    return rw_test_done();
}
