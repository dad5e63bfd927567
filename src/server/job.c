/* job.c - one generation request between the engine and a connection.
 *
 * The engine's callback (scheduler thread) appends text and tokens under the
 * job's lock and signals; the connection thread waits with a short timeout
 * and polls its socket in between, so a client that hangs up is noticed
 * within WAIT_MS even while no token comes (a long prompt's prefill), and its
 * request is cancelled. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "server/server_int.h"

#define WAIT_MS 50

bool srv_peer_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

srv_job *srv_job_new(rw_server *s, const srv_request *r, int fd) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->srv = s;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->chat = r->chat;
    j->include_usage = r->include_usage;
    j->return_token_ids = r->return_token_ids;
    j->logprobs = r->gp.n_logprobs >= 0;
    j->created = (int64_t)time(NULL);
    j->fd = fd;
    unsigned char rnd[12];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) memset(rnd, 0, sizeof rnd);
    int off = snprintf(j->id, sizeof j->id, "%s", r->chat ? "chatcmpl-" : "cmpl-");
    for (size_t i = 0; i < sizeof rnd; i++) off += snprintf(j->id + off, sizeof j->id - (size_t)off, "%02x", rnd[i]);
    return j;
}

void srv_job_free(srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    bool running = j->submitted && !j->done;
    pthread_mutex_unlock(&j->mu);
    if (running) rw_engine_cancel(j->srv->engine, j->engine_id); /* no callback after this returns */
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j->text);
    free(j->toks);
    free(j->lps);
    free(j->out);
    free(j);
}

void srv_job_on_event(void *user, const rw_gen_event *ev) {
    srv_job *j = user;
    pthread_mutex_lock(&j->mu);
    if (ev->text_len) {
        if (j->text_len + ev->text_len + 1 > j->text_cap) {
            size_t cap = j->text_cap ? j->text_cap : 256;
            while (cap < j->text_len + ev->text_len + 1) cap *= 2;
            char *p = realloc(j->text, cap);
            if (p) {
                j->text = p;
                j->text_cap = cap;
            } else j->oom = true;
        }
        if (!j->oom) {
            memcpy(j->text + j->text_len, ev->text, ev->text_len);
            j->text_len += ev->text_len;
            j->text[j->text_len] = 0;
        }
    }
    if (ev->n_tokens) {
        if (j->n_toks + (size_t)ev->n_tokens > j->toks_cap) {
            size_t cap = j->toks_cap ? j->toks_cap * 2 : 64;
            while (cap < j->n_toks + (size_t)ev->n_tokens) cap *= 2;
            int32_t *p = realloc(j->toks, cap * sizeof *p);
            if (p) j->toks = p;
            srv_tok_lp *q = j->logprobs ? realloc(j->lps, cap * sizeof *q) : NULL;
            if (q) j->lps = q;
            if (p && (q || !j->logprobs)) j->toks_cap = cap;
            else j->oom = true;
        }
        if (!j->oom) {
            for (int i = 0; i < ev->n_tokens; i++) {
                j->toks[j->n_toks] = ev->tokens[i];
                if (j->logprobs) {
                    srv_tok_lp *l = &j->lps[j->n_toks];
                    l->lp = ev->logprobs ? ev->logprobs[i] : 0.0f;
                    l->n_top = ev->logprobs ? ev->n_top : 0;
                    if (l->n_top) memcpy(l->top, ev->top + (size_t)i * (size_t)ev->n_top, (size_t)l->n_top * sizeof *l->top);
                }
                j->n_toks++;
            }
        }
    }
    j->prompt_tokens = ev->prompt_tokens;
    j->cached_tokens = ev->cached_tokens;
    j->completion_tokens = ev->completion_tokens;
    if (ev->done) {
        j->done = true;
        j->finish = ev->finish;
        if (ev->error) snprintf(j->error, sizeof j->error, "%s", ev->error);
    }
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void wait_a_little(srv_job *j) { /* under j->mu */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += WAIT_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
}

static bool give_up(srv_job *j) {
    return __atomic_load_n(&j->srv->stopping, __ATOMIC_SEQ_CST) || srv_peer_gone(j->fd);
}

bool srv_job_wait(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        wait_a_little(j);
        if (j->done) break;
        pthread_mutex_unlock(&j->mu);
        if (give_up(j)) return false;
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return true;
}

/* Formats what the engine has produced since the last call into j->out.
 * Returns false when there is nothing new (and the stream is not over). */
static bool fill(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    char *text = j->text;
    size_t text_len = j->text_len;
    j->text = NULL; /* take the new text */
    j->text_len = j->text_cap = 0;
    size_t n_toks = j->n_toks - j->toks_taken;
    int32_t *toks = n_toks ? malloc(n_toks * sizeof *toks) : NULL;
    srv_tok_lp *lps = n_toks && j->logprobs ? malloc(n_toks * sizeof *lps) : NULL;
    if (toks && (lps || !j->logprobs)) {
        memcpy(toks, j->toks + j->toks_taken, n_toks * sizeof *toks);
        if (lps) memcpy(lps, j->lps + j->toks_taken, n_toks * sizeof *lps);
    } else n_toks = 0;
    j->toks_taken += n_toks;
    bool done = j->done, oom = j->oom;
    rw_finish_reason fin = j->finish;
    pthread_mutex_unlock(&j->mu);

    bool wrote = false, ok = true;
    if (j->sse_state == 0) { /* the first chunk: the role (chat) */
        ok = srv_sse_chunk(j, NULL, 0, NULL, NULL, 0, true, RW_FINISH_NONE);
        j->sse_state = 1;
        wrote = true;
    }
    if (ok && (text_len || (n_toks && (j->return_token_ids || j->logprobs)))) {
        ok = srv_sse_chunk(j, text, text_len, toks, lps, n_toks, false, RW_FINISH_NONE);
        wrote = true;
    }
    if (ok && done) {
        if (fin == RW_FINISH_ERROR || oom) ok = srv_sse_error(j, oom ? "out of memory" : j->error);
        else {
            ok = srv_sse_chunk(j, NULL, 0, NULL, NULL, 0, false, fin);
            if (ok && j->include_usage) ok = srv_sse_usage(j);
        }
        if (ok) ok = srv_sse_append(j, "data: [DONE]\n\n", 14);
        j->sse_state = 2;
        wrote = true;
    }
    free(text);
    free(toks);
    free(lps);
    return wrote && ok;
}

ssize_t srv_job_sse_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    srv_job *j = cls;
    for (;;) {
        if (j->out_pos < j->out_len) {
            size_t n = j->out_len - j->out_pos < max ? j->out_len - j->out_pos : max;
            memcpy(buf, j->out + j->out_pos, n);
            j->out_pos += n;
            return (ssize_t)n;
        }
        j->out_len = j->out_pos = 0;
        if (j->sse_state == 2) return MHD_CONTENT_READER_END_OF_STREAM;
        if (fill(j)) continue;
        if (j->out_len) continue; /* partial output before a failure: send it */
        if (j->sse_state == 2) return MHD_CONTENT_READER_END_WITH_ERROR; /* formatting failed */
        pthread_mutex_lock(&j->mu);
        if (!j->done && !j->text_len && j->n_toks == j->toks_taken) wait_a_little(j);
        pthread_mutex_unlock(&j->mu);
        if (give_up(j)) return MHD_CONTENT_READER_END_WITH_ERROR; /* closes: the free callback cancels */
    }
}

void srv_job_sse_free(void *cls) { srv_job_free(cls); }
