/* portable.h - the few calls whose spelling differs between Linux and the
 * BSDs / macOS, each with its portable path (header only: nothing here is
 * exported).
 *   rw_qsort_r        qsort_r with glibc's argument order (macOS's takes
 *                     the context first, in both the call and the callback)
 *   rw_random_bytes   n <= 256 random bytes from the OS: getrandom on Linux,
 *                     getentropy elsewhere; false if the OS gave none
 *   RW_SOCK_CLOEXEC   SOCK_CLOEXEC for socket() where it exists, else 0
 *                     (then rw_cloexec sets the flag after the call)
 *   RW_MSG_NOSIGNAL   MSG_NOSIGNAL for send() where it exists, else 0 (then
 *                     rw_nosigpipe sets SO_NOSIGPIPE on the socket)
 */
#ifndef RW_BASE_PORTABLE_H
#define RW_BASE_PORTABLE_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/random.h> /* getrandom on Linux, getentropy on macOS (unistd.h on the other BSDs) */

typedef int (*rw_cmp_r)(const void *a, const void *b, void *arg);

#if defined(__APPLE__)
typedef struct {
    rw_cmp_r cmp;
    void *arg;
} rw__qsort_ctx;
static inline int rw__qsort_thunk(void *ctx, const void *a, const void *b) {
    const rw__qsort_ctx *c = ctx;
    return c->cmp(a, b, c->arg);
}
static inline void rw_qsort_r(void *base, size_t n, size_t size, rw_cmp_r cmp, void *arg) {
    rw__qsort_ctx c = {cmp, arg};
    qsort_r(base, n, size, &c, rw__qsort_thunk);
}
#else
static inline void rw_qsort_r(void *base, size_t n, size_t size, rw_cmp_r cmp, void *arg) {
    qsort_r(base, n, size, cmp, arg);
}
#endif

static inline bool rw_random_bytes(void *p, size_t n) {
#if defined(__linux__)
    return getrandom(p, n, 0) == (ssize_t)n;
#else
    return n <= 256 && getentropy(p, n) == 0;
#endif
}

#if defined(SOCK_CLOEXEC)
#define RW_SOCK_CLOEXEC SOCK_CLOEXEC
#else
#define RW_SOCK_CLOEXEC 0
#endif
/* fd gets FD_CLOEXEC where socket() could not set it. */
static inline void rw_cloexec(int fd) {
    if (RW_SOCK_CLOEXEC == 0 && fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

#if defined(MSG_NOSIGNAL)
#define RW_MSG_NOSIGNAL MSG_NOSIGNAL
#else
#define RW_MSG_NOSIGNAL 0
#endif
/* A write to fd after the peer left returns EPIPE instead of raising
 * SIGPIPE where send() has no MSG_NOSIGNAL. */
static inline void rw_nosigpipe(int fd) {
#if !defined(MSG_NOSIGNAL) && defined(SO_NOSIGPIPE)
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#else
    (void)fd;
#endif
}

#endif
