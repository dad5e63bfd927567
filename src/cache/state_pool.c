/* state_pool.c - memory for recurrent state buffers (cache_int.h).
 *
 * Sequences take and drop megabyte buffers all the time (a checkpoint of
 * every recurrent layer every 16 tokens, a live state per new sequence,
 * clone and rewind), and memory the process has not touched yet is
 * expensive: every 4 KiB page is a page fault, on a virtual machine the
 * host's too. Measured here with malloc: about a second per step when 16
 * batched sequences took their checkpoints together, and about a quarter
 * of the time of a short prefill after a long cached prefix (the demo's
 * extended turn). So buffers come from 64 MiB slabs advised for transparent huge
 * pages (one fault per 2 MiB), and a freed buffer waits for the next
 * request of its size. The memory held is the most the states ever used at
 * once (bounded by the prefix cache's budget and the running sequences);
 * rw_state_pool_trim, which a server calls once it has been idle a while,
 * gives the free buffers' pages back to the system (they fault in again
 * when reused). Sanitizer builds use aligned_alloc
 * and free, so that a use after free is still caught.
 *
 * Even one fault per 2 MiB is slow on a virtual machine whose host backs
 * memory on first touch (measured 0.48 GB/s for fresh memory against 37 GB/s
 * rewriting it: about 2 ms a megabyte). A growing prefix cache keeps asking
 * for new slabs (a short turn after a long cached prefix took 60-100 MB of
 * checkpoints, 0.14 s of the demo's extended turn in page faults), so a
 * helper thread, started with the first slab, keeps READY_SLABS slabs
 * faulted in ahead of need, filling them when the states have stopped
 * growing for a moment: the faults then fall outside the request that
 * takes the memory (while requests decode, or while the server waits). The
 * held memory is at most READY_SLABS slabs above the peak. Only where
 * asked (rw_state_pool_set_ready: the engine, which serves many sequences
 * and a prefix cache): a single generation (bench model, generate) holds
 * no slab it does not use, so its peak memory is what its states need
 * (no more than llama.cpp's).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "cache/cache_int.h"

#if defined(__SANITIZE_ADDRESS__)
#define STATE_POOL 0
#else
#define STATE_POOL 1
#endif

enum { SLAB_BYTES = 64 << 20, HUGE_PAGE = 2 << 20, READY_SLABS = 2, QUIET_MS = 100 };

static size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

#if STATE_POOL
typedef struct free_buf {
    struct free_buf *next;
    size_t bytes;
    bool trimmed; /* its pages past this header went back to the system (rw_state_pool_trim) */
} free_buf;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static free_buf *free_list; /* under pool_mu */
static uint8_t *slab_next;  /* under pool_mu: the unused rest of the newest slab */
static size_t slab_left;
static uint8_t *ready[READY_SLABS]; /* under pool_mu: faulted-in slabs, n_ready of them */
static int n_ready;
static int ready_target;    /* under pool_mu: slabs to keep ready, at most READY_SLABS */
static bool refill_started; /* under pool_mu */
static uint64_t slabs_taken;  /* under pool_mu */
static size_t mapped_bytes;   /* under pool_mu: slabs and big buffers mapped (ready slabs aside) */
static size_t free_bytes;     /* under pool_mu: bytes on free_list */
static size_t trimmed_bytes;  /* under pool_mu: of those, given back to the system */
static pthread_cond_t refill_cv = PTHREAD_COND_INITIALIZER;

/* bytes (a multiple of HUGE_PAGE) of fresh memory aligned to a huge page
 * and advised for them; NULL if the system has none. */
static void *map_huge(size_t bytes) {
    const size_t len = bytes + HUGE_PAGE;
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)round_up((uintptr_t)p, HUGE_PAGE);
    if (a > p) munmap(p, (size_t)(a - p));
    if (p + len > a + bytes) munmap(a + bytes, (size_t)(p + len - (a + bytes)));
#if defined(MADV_HUGEPAGE)
    madvise(a, bytes, MADV_HUGEPAGE); /* advice: without it the memory still works */
#endif
    return a;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* The helper: once the ready list is short and no slab has been taken for
 * QUIET_MS (so that it does not take a core from the request that is
 * growing the states right now, typically a prefill), faults in a new slab
 * (outside the lock) for the ready list. Runs for the process's life. */
static void *refill_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&pool_mu);
    for (;;) {
        while (n_ready >= ready_target) pthread_cond_wait(&refill_cv, &pool_mu);
        for (uint64_t seen = ~(uint64_t)0; seen != slabs_taken;) {
            seen = slabs_taken;
            pthread_mutex_unlock(&pool_mu);
            nanosleep(&(struct timespec){.tv_nsec = QUIET_MS * 1000000L}, NULL);
            pthread_mutex_lock(&pool_mu);
        }
        pthread_mutex_unlock(&pool_mu);
        uint8_t *s = map_huge(SLAB_BYTES);
        if (s && madvise(s, SLAB_BYTES, MADV_POPULATE_WRITE)) /* older kernels: touch every page */
            for (size_t i = 0; i < SLAB_BYTES; i += 4096) ((volatile uint8_t *)s)[i] = 0;
        pthread_mutex_lock(&pool_mu);
        if (!s) { /* out of memory: try again when the next slab is taken */
            pthread_cond_wait(&refill_cv, &pool_mu);
            continue;
        }
        ready[n_ready++] = s;
    }
    return NULL;
}

/* Starts the helper the first time, when slabs are to be kept ready.
 * Under pool_mu. */
static void start_refill(void) {
    if (!refill_started && ready_target > 0) {
        pthread_t t;
        pthread_attr_t a;
        if (!pthread_attr_init(&a)) { /* without the helper, slabs are faulted in on use */
            refill_started = !pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED) &&
                             !pthread_create(&t, &a, refill_main, NULL);
            pthread_attr_destroy(&a);
        }
    }
}

/* A slab for slab_next: a ready one, else a fresh one; asks the helper for
 * another. Under pool_mu. */
static uint8_t *take_slab(void) {
    uint8_t *s = n_ready ? ready[--n_ready] : map_huge(SLAB_BYTES);
    slabs_taken++;
    if (s) mapped_bytes += SLAB_BYTES;
    start_refill();
    pthread_cond_signal(&refill_cv);
    return s;
}
#endif

void rw_state_pool_set_ready(int n_slabs) {
#if STATE_POOL
    pthread_mutex_lock(&pool_mu);
    ready_target = n_slabs < 0 ? 0 : n_slabs > READY_SLABS ? READY_SLABS : n_slabs;
    if (slabs_taken) start_refill(); /* else with the first slab taken */
    pthread_cond_signal(&refill_cv);
    pthread_mutex_unlock(&pool_mu);
#else
    (void)n_slabs;
#endif
}

void *rw_cache__rec_buf_alloc(size_t bytes) {
    bytes = round_up(bytes ? bytes : 1, 64);
#if STATE_POOL
    void *r = NULL;
    pthread_mutex_lock(&pool_mu);
    for (free_buf **p = &free_list; *p; p = &(*p)->next)
        if ((*p)->bytes == bytes) {
            r = *p;
            free_bytes -= bytes;
            if ((*p)->trimmed) trimmed_bytes -= bytes;
            *p = (*p)->next;
            break;
        }
    if (!r && bytes > SLAB_BYTES / 4) {
        r = map_huge(round_up(bytes, HUGE_PAGE));
        if (r) mapped_bytes += round_up(bytes, HUGE_PAGE);
    } else if (!r) {
        if (slab_left < bytes) {
            uint8_t *s = take_slab();
            if (s) slab_next = s, slab_left = SLAB_BYTES;
        }
        if (slab_left >= bytes) {
            r = slab_next;
            slab_next += bytes;
            slab_left -= bytes;
        }
    }
    pthread_mutex_unlock(&pool_mu);
    return r;
#else
    return aligned_alloc(64, bytes);
#endif
}

void rw_cache__rec_buf_free(void *p, size_t bytes) {
    if (!p) return;
#if STATE_POOL
    free_buf *b = p; /* the buffer is free: its first bytes hold the link */
    b->bytes = round_up(bytes ? bytes : 1, 64);
    b->trimmed = false;
    pthread_mutex_lock(&pool_mu);
    b->next = free_list;
    free_list = b;
    free_bytes += b->bytes;
    pthread_mutex_unlock(&pool_mu);
#else
    (void)bytes;
    free(p);
#endif
}

/* The whole pages of [p, p + n) back to the system (they read as zeros
 * when next touched). */
#if STATE_POOL
static void give_back(uint8_t *p, size_t n) {
    uint8_t *a = (uint8_t *)round_up((uintptr_t)p, 4096), *b = (uint8_t *)((uintptr_t)(p + n) & ~(uintptr_t)4095);
    if (b > a) madvise(a, (size_t)(b - a), MADV_DONTNEED);
}
#endif

size_t rw_state_pool_trim(void) {
#if STATE_POOL
    size_t before;
    pthread_mutex_lock(&pool_mu);
    before = trimmed_bytes;
    for (free_buf *b = free_list; b; b = b->next)
        if (!b->trimmed) { /* the header stays: it links the list */
            give_back((uint8_t *)b + sizeof *b, b->bytes - sizeof *b);
            b->trimmed = true;
            trimmed_bytes += b->bytes;
        }
    if (slab_left) give_back(slab_next, slab_left); /* the newest slab's unused rest */
    size_t r = trimmed_bytes - before;
    pthread_mutex_unlock(&pool_mu);
    return r;
#else
    return 0;
#endif
}

rw_state_pool_stats rw_state_pool_get_stats(void) {
    rw_state_pool_stats st = {0};
#if STATE_POOL
    pthread_mutex_lock(&pool_mu);
    st.mapped_bytes = mapped_bytes;
    st.ready_bytes = (size_t)n_ready * SLAB_BYTES;
    st.free_bytes = free_bytes;
    st.trimmed_bytes = trimmed_bytes;
    st.unused_bytes = slab_left;
    pthread_mutex_unlock(&pool_mu);
#endif
    return st;
}
