/* mapped_file.c - mmap a file read-only; the SIGBUS guard for files that
 * shrink under their mapping.
 *
 * The guard's registry is a fixed table of atomics because the signal
 * handler reads it: no lock, no allocation, only mmap (a system call) on
 * the handler's path. A slot is claimed (1), filled, then published (2);
 * the handler only looks at published slots. A mapping opened when the
 * table is full is simply not guarded. */
#include "base/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GUARD_SLOTS 256

enum { SLOT_FREE, SLOT_CLAIMED, SLOT_LIVE };

typedef struct {
    atomic_int state;
    atomic_uintptr_t base;
    atomic_size_t size;
    atomic_bool faulted;
} guard_slot;

static guard_slot slots[GUARD_SLOTS];
static atomic_uint_fast64_t n_faults;
static struct sigaction previous;
static atomic_bool installed;

static void guard_add(const void *p, size_t size) {
    for (int i = 0; i < GUARD_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&slots[i].state, &expect, SLOT_CLAIMED)) continue;
        atomic_store(&slots[i].base, (uintptr_t)p);
        atomic_store(&slots[i].size, size);
        atomic_store(&slots[i].faulted, false);
        atomic_store(&slots[i].state, SLOT_LIVE);
        return;
    }
}

static guard_slot *guard_find(const void *p) {
    for (int i = 0; i < GUARD_SLOTS; i++)
        if (atomic_load(&slots[i].state) == SLOT_LIVE && atomic_load(&slots[i].base) == (uintptr_t)p) return &slots[i];
    return NULL;
}

/* Runs in the signal handler: async-signal-safe steps only. */
static bool guard_fault_at(uintptr_t addr) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < GUARD_SLOTS; i++) {
        guard_slot *s = &slots[i];
        if (atomic_load(&s->state) != SLOT_LIVE) continue;
        uintptr_t base = atomic_load(&s->base), size = atomic_load(&s->size);
        if (addr < base || addr - base >= size) continue;
        uintptr_t from = addr & ~(page - 1), end = (base + size + page - 1) & ~(page - 1);
        void *p = mmap((void *)from, end - from, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (p == MAP_FAILED) return false;
        atomic_store(&s->faulted, true);
        atomic_fetch_add(&n_faults, 1);
        return true;
    }
    return false;
}

static void on_sigbus(int sig, siginfo_t *info, void *uctx) {
    if (info && guard_fault_at((uintptr_t)info->si_addr)) return; /* the read restarts on zeros */
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) {
            previous.sa_sigaction(sig, info, uctx);
            return;
        }
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* as without the guard: the default action, on return the fault repeats */
    signal(SIGBUS, SIG_DFL);
}

rw_status rw_mapped_file_guard_install(rw_error *err) {
    if (atomic_exchange(&installed, true)) return RW_OK;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &previous) != 0) {
        atomic_store(&installed, false);
        return rw_errorf(err, RW_ERR_IO, "cannot install the SIGBUS guard: %s", strerror(errno));
    }
    return RW_OK;
}

bool rw_mapped_file_faulted(const rw_mapped_file *f) {
    if (!f->data) return false;
    guard_slot *s = guard_find(f->data);
    return s && atomic_load(&s->faulted);
}

uint64_t rw_mapped_file_fault_count(void) { return atomic_load(&n_faults); }

rw_status rw_mapped_file_open(const char *path, rw_mapped_file *out, rw_error *err) {
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return rw_errorf(err, RW_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return rw_errorf(err, RW_ERR_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return rw_errorf(err, RW_ERR_IO, "%s is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return RW_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file open */
    if (p == MAP_FAILED) return rw_errorf(err, RW_ERR_IO, "cannot map %s: %s", path, strerror(e));
#if defined(MADV_HUGEPAGE)
    /* advice: pages read in on a fault come in 2 MiB folios, mapped with
     * huge pages where the mapping is aligned (fewer TLB misses when decode
     * streams the weights); ignored where unsupported */
    madvise(p, (size_t)st.st_size, MADV_HUGEPAGE);
#endif
    out->data = p;
    out->size = (size_t)st.st_size;
    guard_add(p, out->size);
    return RW_OK;
}

void rw_mapped_file_close(rw_mapped_file *f) {
    if (f->data) {
        guard_slot *s = guard_find(f->data);
        if (s) atomic_store(&s->state, SLOT_CLAIMED); /* unpublished before the pages go */
        munmap((void *)f->data, f->size);
        if (s) atomic_store(&s->state, SLOT_FREE);
    }
    f->data = NULL;
    f->size = 0;
}
