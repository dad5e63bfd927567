/* threadpool.c - persistent workers, a shared task counter, futex sleeps.
 *
 * One run ("generation"):
 *   caller: writes the job, sets pending = workers, bumps `generation`,
 *           wakes sleepers if any, then claims tasks like everyone else and
 *           finally waits until pending == 0.
 *   worker: notices the new generation (spinning, then sleeping on the
 *           futex), claims tasks from `next_task` until none are left, then
 *           decrements `pending` (waking the caller if it went to sleep).
 * Every wait is "spin for SPIN_NS, then futex": decode dispatches are a few
 * microseconds apart, so spinning keeps the wake-up latency near zero, and
 * sleeping keeps an idle process from burning cores.
 *
 * Sleep/wake races are closed with sequentially consistent atomics: a
 * sleeper first registers itself (sleepers++ / caller_waiting = 1), then
 * re-checks the condition, then futex-waits on the word's old value; the
 * waker changes the word first and then looks at the registration.
 * Without futexes (macOS, the BSDs) the wait is a condition variable: the
 * waiter checks the word under one mutex, the waker takes that mutex after
 * changing the word, so no wake-up falls between the check and the sleep.
 */
#include "base/threadpool.h"

#include <errno.h>
#include <limits.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPIN_NS 100000  /* how long an idle thread spins before sleeping */
#define SPIN_PAUSE 2048 /* pause iterations before spinning turns to sched_yield */

struct rw_threadpool {
    int n_threads;       /* caller + workers */
    pthread_t *workers;  /* n_threads - 1 handles, owned */
    pthread_mutex_t run_lock; /* serialises concurrent rw_threadpool_run */

    /* the current job; written by the caller before bumping generation */
    rw_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    _Atomic int64_t next_task;

    _Atomic uint32_t generation;     /* futex word the workers sleep on */
    _Atomic uint32_t sleepers;       /* workers registered to sleep */
    _Atomic uint32_t pending;        /* workers not done with this generation */
    _Atomic uint32_t caller_waiting; /* caller sleeps on `pending` */
    _Atomic bool stop;
};

typedef struct {
    rw_threadpool *pool;
    int index; /* thread index in [1, n_threads) */
} worker_arg;

/* The pool whose task the current thread is running (nested runs go serial). */
static _Thread_local const rw_threadpool *tl_running_in;

#if defined(__linux__)
static void futex_wait(_Atomic uint32_t *word, uint32_t expected) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
#else
/* One mutex and condition for every word of the process (wake-ups that
 * were meant for another word are spurious ones, which callers re-check). */
static pthread_mutex_t futex_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t futex_cv = PTHREAD_COND_INITIALIZER;

static void futex_wait(_Atomic uint32_t *word, uint32_t expected) {
    pthread_mutex_lock(&futex_mu);
    if (atomic_load(word) == expected) pthread_cond_wait(&futex_cv, &futex_mu);
    pthread_mutex_unlock(&futex_mu);
}

static void futex_wake_all(_Atomic uint32_t *word) {
    (void)word;
    pthread_mutex_lock(&futex_mu);
    pthread_cond_broadcast(&futex_cv);
    pthread_mutex_unlock(&futex_mu);
}
#endif

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until *word != value or SPIN_NS pass; returns true if it changed.
 * After a short pure spin it yields the CPU on every round: when the
 * machine has more runnable threads than cores (other processes), the
 * thread we wait for may be waiting for exactly this core. */
static bool spin_until_changed(_Atomic uint32_t *word, uint32_t value) {
    int64_t deadline = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != value) return true;
        if (i < SPIN_PAUSE) cpu_relax();
        else sched_yield();
        if ((i & 255) == 0) {
            int64_t t = now_ns();
            if (!deadline) deadline = t + SPIN_NS;
            else if (t > deadline) return false;
        }
    }
}

static void run_tasks(rw_threadpool *p, int thread) {
    const rw_threadpool *outer = tl_running_in;
    tl_running_in = p;
    for (;;) {
        int64_t t = atomic_fetch_add_explicit(&p->next_task, 1, memory_order_relaxed);
        if (t >= p->n_tasks) break;
        p->fn(p->ctx, t, thread);
    }
    tl_running_in = outer;
}

static void *worker_main(void *argp) {
    worker_arg a = *(worker_arg *)argp;
    free(argp);
    rw_threadpool *p = a.pool;
    uint32_t seen = 0;
    for (;;) {
        /* wait for a new generation */
        uint32_t g;
        while ((g = atomic_load(&p->generation)) == seen) {
            if (spin_until_changed(&p->generation, seen)) continue;
            atomic_fetch_add(&p->sleepers, 1);
            if (atomic_load(&p->generation) == seen) futex_wait(&p->generation, seen);
            atomic_fetch_sub(&p->sleepers, 1);
        }
        seen = g;
        if (atomic_load(&p->stop)) break;
        run_tasks(p, a.index);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_waiting))
            futex_wake_all(&p->pending);
    }
    return NULL;
}

/* Counts distinct (package, core) pairs among the CPUs in our affinity mask. */
int rw_physical_cores(void) {
#if !defined(__linux__) /* no affinity mask or sysfs topology: the online CPUs */
    long n_online = sysconf(_SC_NPROCESSORS_ONLN);
    return n_online > 0 ? (int)n_online : 1;
#else
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (int)n : 1;
    }
    int n_logical = CPU_COUNT(&set);
    enum { MAX_CORES = 1024 };
    long *ids = calloc(MAX_CORES, sizeof *ids); /* package << 20 | core; freed below */
    if (!ids) return n_logical > 0 ? n_logical : 1;
    int n_ids = 0;
    bool ok = true;
    for (int cpu = 0; cpu < CPU_SETSIZE && ok; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        long core = -1, pkg = -1;
        char path[128];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%ld", &core) != 1) core = -1;
            fclose(f);
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%ld", &pkg) != 1) pkg = -1;
            fclose(f);
        }
        if (core < 0 || pkg < 0) {
            ok = false;
            break;
        }
        long id = (pkg << 20) | core;
        bool dup = false;
        for (int i = 0; i < n_ids; i++) dup |= ids[i] == id;
        if (!dup && n_ids < MAX_CORES) ids[n_ids++] = id;
    }
    free(ids);
    int n = ok && n_ids > 0 ? n_ids : n_logical;
    return n > 0 ? n : 1;
#endif
}

rw_status rw_threadpool_new(int n_threads, rw_threadpool **out, rw_error *err) {
    *out = NULL;
    if (n_threads < 0 || n_threads > 4096)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "thread count %d out of range", n_threads);
    if (n_threads == 0) n_threads = rw_physical_cores();
    rw_threadpool *p = calloc(1, sizeof *p); /* freed by rw_threadpool_free */
    if (!p) return rw_errorf(err, RW_ERR_NOMEM, "thread pool: out of memory");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->run_lock, NULL);
    p->workers = calloc((size_t)n_threads, sizeof *p->workers); /* owned by p */
    if (!p->workers) {
        free(p);
        return rw_errorf(err, RW_ERR_NOMEM, "thread pool: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *a = malloc(sizeof *a); /* freed by the worker */
        int rc = a ? 0 : ENOMEM;
        if (a) {
            a->pool = p;
            a->index = i;
            rc = pthread_create(&p->workers[i - 1], NULL, worker_main, a);
            if (rc) free(a);
        }
        if (rc) {
            p->n_threads = i; /* only the workers created so far get joined */
            rw_threadpool_free(p);
            return rw_errorf(err, RW_ERR_NOMEM, "thread pool: cannot start thread %d: %s", i,
                             strerror(rc));
        }
    }
    *out = p;
    return RW_OK;
}

void rw_threadpool_free(rw_threadpool *p) {
    if (!p) return;
    atomic_store(&p->stop, true);
    atomic_fetch_add(&p->generation, 1);
    futex_wake_all(&p->generation);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i - 1], NULL);
    pthread_mutex_destroy(&p->run_lock);
    free(p->workers);
    free(p);
}

int rw_threadpool_size(const rw_threadpool *p) { return p ? p->n_threads : 1; }

typedef struct {
    rw_rows_fn fn;
    void *ctx;
    int64_t n, piece;
} rows_job;

static void rows_task(void *ctx, int64_t task, int thread) {
    (void)thread;
    const rows_job *j = ctx;
    const int64_t r0 = task * j->piece, r1 = r0 + j->piece < j->n ? r0 + j->piece : j->n;
    j->fn(j->ctx, r0, r1);
}

void rw_threadpool_rows(rw_threadpool *p, int64_t n, int64_t min_rows, rw_rows_fn fn, void *ctx) {
    if (n <= 0) return;
    if (min_rows < 1) min_rows = 1;
    const int threads = rw_threadpool_size(p);
    if (threads < 2 || n < 2 * min_rows) {
        fn(ctx, 0, n);
        return;
    }
    /* four pieces a thread: a thread that starts late takes fewer */
    int64_t piece = (n + 4 * (int64_t)threads - 1) / (4 * (int64_t)threads);
    if (piece < min_rows) piece = min_rows;
    rows_job j = {fn, ctx, n, piece};
    rw_threadpool_run(p, rows_task, &j, (n + piece - 1) / piece);
}

void rw_threadpool_run(rw_threadpool *p, rw_task_fn fn, void *ctx, int64_t n_tasks) {
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1 || tl_running_in == p) {
        for (int64_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    pthread_mutex_lock(&p->run_lock);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next_task, 0);
    atomic_store(&p->pending, (uint32_t)(p->n_threads - 1));
    atomic_fetch_add(&p->generation, 1); /* publishes the job (seq_cst) */
    if (atomic_load(&p->sleepers)) futex_wake_all(&p->generation);

    run_tasks(p, 0);

    uint32_t left;
    while ((left = atomic_load(&p->pending)) != 0) {
        if (spin_until_changed(&p->pending, left)) continue;
        atomic_store(&p->caller_waiting, 1);
        if ((left = atomic_load(&p->pending)) != 0) futex_wait(&p->pending, left);
        atomic_store(&p->caller_waiting, 0);
    }
    pthread_mutex_unlock(&p->run_lock);
}
