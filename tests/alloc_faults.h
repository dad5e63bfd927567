/* alloc_faults.h - the malloc family replaced (glibc's documented
 * interposition) by one that fails the Nth allocation after arm(N), and
 * counts live blocks for a leak check, for the fault-injection tests
 * (tests/api/test_alloc_faults.c, tests/server/test_server_alloc_faults.c).
 * It defines malloc, so exactly one file of a test program includes it.
 * FAULTS is 0 in sanitizer builds (ASan's allocator replaces malloc). */
#ifndef RW_TESTS_ALLOC_FAULTS_H
#define RW_TESTS_ALLOC_FAULTS_H

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#if defined(__SANITIZE_ADDRESS__)
#define FAULTS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FAULTS 0
#endif
#endif
#ifndef FAULTS
#define FAULTS 1
#endif

#if FAULTS
/* glibc's own allocator, which the replacements below call */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

/* Exported from the program (it is built with hidden visibility), so that
 * the shared libraries' allocations (libc's strdup, jansson's) come here
 * too: a block one of them allocates may be freed by our code. */
#define RW_INTERPOSE __attribute__((visibility("default")))

static atomic_long live;       /* blocks allocated and not freed */
static atomic_long countdown;  /* > 0: armed; the allocation that takes it to 0 fails */
static atomic_long n_allocs;   /* allocations while armed (failed one included) */
static atomic_bool failed_one; /* the armed failure happened */

static atomic_long spared; /* failures moved past an allocation of jansson's (below) */

/* jansson's lexer corrupts the heap when one of its own allocations fails
 * (its lex_save drops the error: akheron/jansson#362, the fix unmerged), so
 * such a failure moves on to the next allocation that is not jansson's. */
static bool in_jansson(void *ra) {
    Dl_info info;
    return ra && dladdr(ra, &info) && info.dli_fname && strstr(info.dli_fname, "libjansson");
}

static bool fail_now(void *ra) {
    if (atomic_load_explicit(&countdown, memory_order_relaxed) <= 0) return false;
    atomic_fetch_add(&n_allocs, 1);
    long left = atomic_fetch_sub(&countdown, 1);
    if (left != 1) return false;
    if (in_jansson(ra)) {
        atomic_fetch_add(&countdown, 1);
        atomic_fetch_add(&spared, 1);
        return false;
    }
    atomic_store(&failed_one, true);
    return true;
}

RW_INTERPOSE void *malloc(size_t n) {
    if (fail_now(__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __libc_malloc(n);
    if (p) atomic_fetch_add(&live, 1);
    return p;
}

RW_INTERPOSE void *calloc(size_t a, size_t b) {
    if (fail_now(__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __libc_calloc(a, b);
    if (p) atomic_fetch_add(&live, 1);
    return p;
}

RW_INTERPOSE void *realloc(void *q, size_t n) {
    if (q && n == 0) {
        atomic_fetch_sub(&live, 1);
        return __libc_realloc(q, 0);
    }
    if (fail_now(__builtin_return_address(0))) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __libc_realloc(q, n);
    if (p && !q) atomic_fetch_add(&live, 1);
    return p;
}

RW_INTERPOSE void free(void *p) {
    if (!p) return;
    atomic_fetch_sub(&live, 1);
    __libc_free(p);
}

static void *memalign_from(size_t al, size_t n, void *ra) {
    if (fail_now(ra)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = __libc_memalign(al, n);
    if (p) atomic_fetch_add(&live, 1);
    return p;
}

RW_INTERPOSE void *memalign(size_t al, size_t n) { return memalign_from(al, n, __builtin_return_address(0)); }
RW_INTERPOSE void *aligned_alloc(size_t al, size_t n) { return memalign_from(al, n, __builtin_return_address(0)); }

RW_INTERPOSE int posix_memalign(void **out, size_t al, size_t n) {
    void *p = memalign_from(al, n, __builtin_return_address(0));
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

static void arm(long n) {
    atomic_store(&n_allocs, 0);
    atomic_store(&failed_one, false);
    atomic_store(&countdown, n);
}
static void disarm(void) { atomic_store(&countdown, 0); }

/* What a phase produced, to compare a run after a fault with the first. */
#define MAX_OUT 8192
typedef struct {
    unsigned char b[MAX_OUT];
    size_t n;
} result;

static void put(result *r, const void *p, size_t n) {
    if (!r) return;
    if (n > MAX_OUT - r->n) n = MAX_OUT - r->n;
    memcpy(r->b + r->n, p, n);
    r->n += n;
}

/* One unit of work that returns 0 or an error status, and writes what it
 * produced to out (may be NULL). */
typedef struct {
    const char *name;
    int (*run)(result *out);
} phase;

#define PHASE_MAX_EXHAUSTIVE 600
#define PHASE_MAX_RUNS 400

static void fault_loop(const phase *ph) {
    static result ref, again;
    memset(&ref, 0, sizeof ref);
    /* twice without faults: the first warms what the process keeps for its
     * life (stdio, locale, thread caches); the second is the reference */
    CHECK_MSG(ph->run(NULL) == 0, "%s: fails without faults", ph->name);
    const long base = atomic_load(&live);
    arm(1L << 40); /* counts without failing */
    CHECK_MSG(ph->run(&ref) == 0, "%s: fails without faults", ph->name);
    const long total = atomic_load(&n_allocs);
    disarm();
    CHECK_MSG(atomic_load(&live) == base, "%s: %ld blocks leaked without faults", ph->name,
              atomic_load(&live) - base);
    long stride = total <= PHASE_MAX_EXHAUSTIVE ? 1 : (total + PHASE_MAX_RUNS - 1) / PHASE_MAX_RUNS;
    int runs = 0, errors = 0;
    for (long n = 1;; n += n < 64 ? 1 : stride) { /* the first allocations always, one by one */
        arm(n);
        int st = ph->run(NULL);
        bool hit = atomic_load(&failed_one);
        disarm();
        if (!hit) break; /* every allocation passed */
        runs++;
        errors += st != 0;
        long leaked = atomic_load(&live) - base;
        CHECK_MSG(leaked == 0, "%s: allocation %ld failed: %ld blocks leaked (status %d)", ph->name, n, leaked, st);
        if (leaked) atomic_store(&live, base); /* report each leak once */
        memset(&again, 0, sizeof again);
        CHECK_MSG(ph->run(&again) == 0 && again.n == ref.n && !memcmp(again.b, ref.b, ref.n),
                  "%s: allocation %ld failed: the next run differs", ph->name, n);
        if (rw_test_failures > 20) break;
    }
    fprintf(stderr,
            "%s: %ld allocations, %d runs with one failing (stride %ld), %d ended in an error, %ld failures moved "
            "past jansson's\n",
            ph->name, total, runs, stride, errors, atomic_load(&spared));
}

#endif
#endif
