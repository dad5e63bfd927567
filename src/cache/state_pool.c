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
 * request of its size. Nothing is returned to the system: the memory held
 * is the most the states ever used at once (bounded by the prefix cache's
 * budget and the running sequences). Sanitizer builds use aligned_alloc
 * and free, so that a use after free is still caught.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "cache/cache_int.h"

#if defined(__SANITIZE_ADDRESS__)
#define STATE_POOL 0
#else
#define STATE_POOL 1
#endif

enum { SLAB_BYTES = 64 << 20, HUGE_PAGE = 2 << 20 };

static size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

#if STATE_POOL
typedef struct free_buf {
    struct free_buf *next;
    size_t bytes;
} free_buf;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static free_buf *free_list; /* under pool_mu */
static uint8_t *slab_next;  /* under pool_mu: the unused rest of the newest slab */
static size_t slab_left;

/* bytes (a multiple of HUGE_PAGE) of fresh memory aligned to a huge page
 * and advised for them; NULL if the system has none. */
static void *map_huge(size_t bytes) {
    const size_t len = bytes + HUGE_PAGE;
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)round_up((uintptr_t)p, HUGE_PAGE);
    if (a > p) munmap(p, (size_t)(a - p));
    if (p + len > a + bytes) munmap(a + bytes, (size_t)(p + len - (a + bytes)));
    madvise(a, bytes, MADV_HUGEPAGE); /* advice: without it the memory still works */
    return a;
}
#endif

void *rec_buf_alloc(size_t bytes) {
    bytes = round_up(bytes ? bytes : 1, 64);
#if STATE_POOL
    void *r = NULL;
    pthread_mutex_lock(&pool_mu);
    for (free_buf **p = &free_list; *p; p = &(*p)->next)
        if ((*p)->bytes == bytes) {
            r = *p;
            *p = (*p)->next;
            break;
        }
    if (!r && bytes > SLAB_BYTES / 4) {
        r = map_huge(round_up(bytes, HUGE_PAGE));
    } else if (!r) {
        if (slab_left < bytes) {
            uint8_t *s = map_huge(SLAB_BYTES);
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

void rec_buf_free(void *p, size_t bytes) {
    if (!p) return;
#if STATE_POOL
    free_buf *b = p; /* the buffer is free: its first bytes hold the link */
    b->bytes = round_up(bytes ? bytes : 1, 64);
    pthread_mutex_lock(&pool_mu);
    b->next = free_list;
    free_list = b;
    pthread_mutex_unlock(&pool_mu);
#else
    (void)bytes;
    free(p);
#endif
}
