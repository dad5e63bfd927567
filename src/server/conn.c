/* conn.c - the server's sockets: the registry of open connections, their
 * suspension while a request waits (for a worker, for tokens), and the
 * watcher thread.
 *
 * libmicrohttpd runs event-driven (epoll, a small pool of threads), so no
 * thread waits on a connection: a handler that has nothing to send suspends
 * its connection and whoever produces something resumes it. While suspended
 * libmicrohttpd does not look at the socket, so the watcher polls the
 * sockets of running jobs for a hang-up every WATCH_MS and resumes them
 * (the handler then ends the connection and the job is cancelled).
 *
 * The watcher also bounds how long a client may take: a connection that
 * has not sent complete headers header_timeout seconds after it opened (or
 * after its previous answer), or its body body_timeout seconds after the
 * headers, is shut down, however steadily it trickles bytes (slowloris).
 * libmicrohttpd's own timeout only counts idle time.
 *
 * Locking: a job's lock, then conn_mu, then libmicrohttpd's own. conn_mu is
 * held while suspending and resuming, so a wake-up cannot slip between a
 * handler's check and its suspension (the handler checks and suspends under
 * the job's lock, the engine's callback wakes under it). The CLOSED
 * notification comes before libmicrohttpd closes the socket, so an fd in the
 * registry is never a reused one. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/server_int.h"

#define WATCH_MS 50

double rw_server__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool rw_server__stopping(const rw_server *s) { return __atomic_load_n(&s->stopping, __ATOMIC_SEQ_CST) != 0; }

rw_server__sock *rw_server__sock_open(rw_server *s, struct MHD_Connection *c) {
    rw_server__sock *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    k->conn = c;
    k->fd = ci ? ci->connect_fd : -1;
    k->phase = SOCK_IDLE;
    k->since = rw_server__now();
    k->refs = 1;
    pthread_mutex_lock(&s->conn_mu);
    k->next = s->socks;
    if (s->socks) s->socks->prev = k;
    s->socks = k;
    s->n_socks++;
    pthread_mutex_unlock(&s->conn_mu);
    return k;
}

static void unref_locked(rw_server *s, rw_server__sock *k) {
    if (--k->refs == 0) free(k);
    (void)s;
}

void rw_server__sock_closed(rw_server *s, rw_server__sock *k) {
    if (!k) return;
    pthread_mutex_lock(&s->conn_mu);
    if (k->prev) k->prev->next = k->next;
    else s->socks = k->next;
    if (k->next) k->next->prev = k->prev;
    s->n_socks--;
    k->conn = NULL;
    k->suspended = false;
    k->fd = -1;
    unref_locked(s, k);
    pthread_mutex_unlock(&s->conn_mu);
}

void rw_server__sock_ref(rw_server *s, rw_server__sock *k) {
    pthread_mutex_lock(&s->conn_mu);
    k->refs++;
    pthread_mutex_unlock(&s->conn_mu);
}

void rw_server__sock_unref(rw_server *s, rw_server__sock *k) {
    if (!k) return;
    pthread_mutex_lock(&s->conn_mu);
    unref_locked(s, k);
    pthread_mutex_unlock(&s->conn_mu);
}

void rw_server__sock_phase(rw_server *s, rw_server__sock *k, int phase) {
    if (!k) return;
    pthread_mutex_lock(&s->conn_mu);
    if (k->phase != phase) {
        k->phase = phase;
        k->since = rw_server__now();
    }
    pthread_mutex_unlock(&s->conn_mu);
}

bool rw_server__sock_sleep(rw_server *s, rw_server__sock *k, bool watch) {
    pthread_mutex_lock(&s->conn_mu);
    bool ok = !rw_server__stopping(s) && k->conn && !k->gone && !k->suspended;
    if (ok) {
        k->suspended = true;
        k->watch = watch;
        MHD_suspend_connection(k->conn);
    }
    pthread_mutex_unlock(&s->conn_mu);
    return ok;
}

static void wake_locked(rw_server__sock *k) {
    if (k->suspended && k->conn) {
        k->suspended = false;
        k->watch = false;
        MHD_resume_connection(k->conn);
    }
}

void rw_server__sock_wake(rw_server *s, rw_server__sock *k) {
    if (!k) return;
    pthread_mutex_lock(&s->conn_mu);
    wake_locked(k);
    pthread_mutex_unlock(&s->conn_mu);
}

bool rw_server__sock_gone(rw_server *s, rw_server__sock *k) {
    pthread_mutex_lock(&s->conn_mu);
    bool gone = k->gone;
    pthread_mutex_unlock(&s->conn_mu);
    return gone;
}

/* One pass over the sockets (under conn_mu): hang-ups of suspended ones,
 * clients too slow to send their request. */
static void watch_pass(rw_server *s) {
    const double now = rw_server__now();
    struct pollfd pf[256];
    rw_server__sock *ks[256];
    int n = 0;
    uint64_t timeouts = 0, hangups = 0;
    for (rw_server__sock *k = s->socks; k; k = k->next) {
        if (k->suspended) {
            if (k->watch && k->fd >= 0 && n < 256) { /* the rest on the next pass */
                pf[n] = (struct pollfd){.fd = k->fd, .events = POLLRDHUP};
                ks[n++] = k;
            }
            continue;
        }
        double limit = k->phase == SOCK_IDLE ? s->header_timeout : k->phase == SOCK_BODY ? s->body_timeout : 0;
        if (limit > 0 && !k->killed && k->fd >= 0 && now - k->since > limit) {
            shutdown(k->fd, SHUT_RDWR); /* libmicrohttpd sees the end and closes it */
            k->killed = true;
            timeouts++;
        }
    }
    if (n && poll(pf, (nfds_t)n, 0) > 0)
        for (int i = 0; i < n; i++)
            if (pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
                ks[i]->gone = true;
                wake_locked(ks[i]);
                hangups++;
            }
    if (timeouts || hangups) {
        pthread_mutex_lock(&s->mu);
        s->timeouts += timeouts;
        s->hangups += hangups;
        pthread_mutex_unlock(&s->mu);
    }
}

static void *watcher_main(void *arg) {
    rw_server *s = arg;
    pthread_mutex_lock(&s->conn_mu);
    while (!s->watcher_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WATCH_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->watcher_cv, &s->conn_mu, &ts);
        if (!s->watcher_stop) watch_pass(s);
    }
    pthread_mutex_unlock(&s->conn_mu);
    return NULL;
}

rw_status rw_server__conns_start(rw_server *s, rw_error *err) {
    if (pthread_create(&s->watcher, NULL, watcher_main, s))
        return rw_errorf(err, RW_ERR_INTERNAL, "cannot start the connection watcher thread");
    s->watcher_started = true;
    return RW_OK;
}

void rw_server__conns_stop(rw_server *s) {
    pthread_mutex_lock(&s->conn_mu);
    for (rw_server__sock *k = s->socks; k; k = k->next) wake_locked(k); /* libmicrohttpd may not stop with any suspended */
    s->watcher_stop = true;
    pthread_cond_signal(&s->watcher_cv);
    pthread_mutex_unlock(&s->conn_mu);
    if (s->watcher_started) pthread_join(s->watcher, NULL);
    s->watcher_started = false;
}
