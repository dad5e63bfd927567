/* log.c - the process-wide log hook. The hook and its level are read
 * without a lock on every message; rw_log_set is expected at start-up, and
 * the three fields are published under a mutex so a message never sees a
 * hook with another hook's user pointer. */
#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static rw_log_fn log_fn;
static void *log_user;
static rw_log_level log_max = RW_LOG_INFO;

void rw_log_set(rw_log_fn fn, void *user, rw_log_level max_level) {
    pthread_mutex_lock(&log_mu);
    log_fn = fn;
    log_user = user;
    log_max = max_level;
    pthread_mutex_unlock(&log_mu);
}

bool rw_log_enabled(rw_log_level level) {
    pthread_mutex_lock(&log_mu);
    bool on = log_fn && level <= log_max;
    pthread_mutex_unlock(&log_mu);
    return on;
}

void rw_log(rw_log_level level, const char *fmt, ...) {
    pthread_mutex_lock(&log_mu);
    rw_log_fn fn = log_fn;
    void *user = log_user;
    bool on = fn && level <= log_max;
    pthread_mutex_unlock(&log_mu);
    if (!on) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (char *c = line; *c; c++) /* one line: the hook's contract */
        if (*c == '\n' || *c == '\r') *c = ' ';
    fn(user, level, line);
}
