/* work.c - the request workers: a few threads that do what takes CPU in a
 * request (parsing its JSON, rendering the chat template, tokenizing,
 * submitting to the engine), so libmicrohttpd's threads only move bytes
 * and /health, /metrics and every other connection are answered at once
 * whatever the requests in flight cost.
 *
 * The handler suspends its connection and queues the request; a worker
 * takes it (FIFO), fills in the answer or the job (work_fn: server.c's
 * rw_server__conn_work) and resumes the connection. */
#include <stdlib.h>

#include "server/server_int.h"

static void *worker_main(void *arg) {
    rw_server *s = arg;
    pthread_mutex_lock(&s->work_mu);
    for (;;) {
        while (!s->work_head && !s->work_stop) pthread_cond_wait(&s->work_cv, &s->work_mu);
        if (s->work_stop) break;
        rw_server__conn *cc = s->work_head;
        s->work_head = cc->work_next;
        if (!s->work_head) s->work_tail = NULL;
        pthread_mutex_unlock(&s->work_mu);
        s->work_fn(s, cc);
        rw_server__sock_wake(s, cc->sock); /* cc belongs to the connection again */
        pthread_mutex_lock(&s->work_mu);
    }
    pthread_mutex_unlock(&s->work_mu);
    return NULL;
}

rw_status rw_server__work_start(rw_server *s, int n, void (*work)(rw_server *, rw_server__conn *),
                                void (*unqueued)(rw_server *, rw_server__conn *), rw_error *err) {
    s->work_fn = work;
    s->unqueued_fn = unqueued;
    if (n < 1) n = 1;
    if (n > (int)(sizeof s->workers / sizeof *s->workers)) n = (int)(sizeof s->workers / sizeof *s->workers);
    for (s->n_workers = 0; s->n_workers < n; s->n_workers++)
        if (pthread_create(&s->workers[s->n_workers], NULL, worker_main, s))
            return rw_errorf(err, RW_ERR_INTERNAL, "cannot start the request worker threads");
    return RW_OK;
}

void rw_server__work_push(rw_server *s, rw_server__conn *cc) {
    pthread_mutex_lock(&s->work_mu);
    cc->work_next = NULL;
    if (s->work_tail) s->work_tail->work_next = cc;
    else s->work_head = cc;
    s->work_tail = cc;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->work_mu);
}

void rw_server__work_stop(rw_server *s) {
    pthread_mutex_lock(&s->work_mu);
    s->work_stop = true;
    pthread_cond_broadcast(&s->work_cv);
    pthread_mutex_unlock(&s->work_mu);
    for (int i = 0; i < s->n_workers; i++) pthread_join(s->workers[i], NULL);
    s->n_workers = 0;
    /* what no worker took: answered "stopping" when its connection resumes */
    pthread_mutex_lock(&s->work_mu);
    rw_server__conn *cc = s->work_head;
    s->work_head = s->work_tail = NULL;
    pthread_mutex_unlock(&s->work_mu);
    while (cc) {
        rw_server__conn *next = cc->work_next;
        s->unqueued_fn(s, cc);
        rw_server__sock_wake(s, cc->sock);
        cc = next;
    }
}
