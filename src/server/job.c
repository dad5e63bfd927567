/* job.c - one generation request (n choices, one engine request each)
 * between the engine and a connection.
 *
 * The engine's callback (scheduler thread) appends a choice's text and
 * tokens under the job's lock and signals; the connection thread waits with
 * a short timeout and polls its socket in between, so a client that hangs up
 * is noticed within WAIT_MS even while no token comes (a long prompt's
 * prefill), and its requests are cancelled. */
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
    j->n = r->n < 1 ? 1 : r->n > SRV_MAX_N ? SRV_MAX_N : r->n;
    for (int i = 0; i < j->n; i++) {
        j->choice[i].job = j;
        j->choice[i].index = i;
    }
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

rw_status srv_job_submit(srv_job *j, const srv_request *r, rw_error *err) {
    for (int i = 0; i < j->n; i++) {
        rw_gen_params gp = r->gp;
        gp.sampling.seed += (uint64_t)i; /* choice i: its own draws */
        srv_choice *c = &j->choice[i];
        rw_status st = rw_engine_submit(j->srv->engine, r->prompt, r->n_prompt, &gp, srv_job_on_event, c,
                                        &c->engine_id, err);
        if (st) return st; /* srv_job_free cancels the ones already in */
        c->submitted = true;
    }
    return RW_OK;
}

void srv_job_free(srv_job *j) {
    if (!j) return;
    for (int i = 0; i < j->n; i++) {
        srv_choice *c = &j->choice[i];
        pthread_mutex_lock(&j->mu);
        bool running = c->submitted && !c->done;
        pthread_mutex_unlock(&j->mu);
        if (running) rw_engine_cancel(j->srv->engine, c->engine_id); /* no callback after this returns */
        free(c->text);
        free(c->toks);
        free(c->lps);
    }
    if (j->api_free) j->api_free(j->api_state);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j->out);
    free(j);
}

void srv_job_on_event(void *user, const rw_gen_event *ev) {
    srv_choice *c = user;
    srv_job *j = c->job;
    pthread_mutex_lock(&j->mu);
    if (ev->text_len) {
        if (c->text_len + ev->text_len + 1 > c->text_cap) {
            size_t cap = c->text_cap ? c->text_cap : 256;
            while (cap < c->text_len + ev->text_len + 1) cap *= 2;
            char *p = realloc(c->text, cap);
            if (p) {
                c->text = p;
                c->text_cap = cap;
            } else c->oom = true;
        }
        if (!c->oom) {
            memcpy(c->text + c->text_len, ev->text, ev->text_len);
            c->text_len += ev->text_len;
            c->text[c->text_len] = 0;
        }
    }
    if (ev->n_tokens) {
        if (c->n_toks + (size_t)ev->n_tokens > c->toks_cap) {
            size_t cap = c->toks_cap ? c->toks_cap * 2 : 64;
            while (cap < c->n_toks + (size_t)ev->n_tokens) cap *= 2;
            int32_t *p = realloc(c->toks, cap * sizeof *p);
            if (p) c->toks = p;
            srv_tok_lp *q = j->logprobs ? realloc(c->lps, cap * sizeof *q) : NULL;
            if (q) c->lps = q;
            if (p && (q || !j->logprobs)) c->toks_cap = cap;
            else c->oom = true;
        }
        if (!c->oom) {
            for (int i = 0; i < ev->n_tokens; i++) {
                c->toks[c->n_toks] = ev->tokens[i];
                if (j->logprobs) {
                    srv_tok_lp *l = &c->lps[c->n_toks];
                    l->lp = ev->logprobs ? ev->logprobs[i] : 0.0f;
                    l->n_top = ev->logprobs ? ev->n_top : 0;
                    if (l->n_top)
                        memcpy(l->top, ev->top + (size_t)i * (size_t)ev->n_top, (size_t)l->n_top * sizeof *l->top);
                }
                c->n_toks++;
            }
        }
    }
    c->prompt_tokens = ev->prompt_tokens;
    c->cached_tokens = ev->cached_tokens;
    c->completion_tokens = ev->completion_tokens;
    if (ev->done) {
        c->done = true;
        c->finish = ev->finish;
        if (ev->error) snprintf(c->error, sizeof c->error, "%s", ev->error);
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

static bool all_done(const srv_job *j) { /* under j->mu */
    for (int i = 0; i < j->n; i++)
        if (!j->choice[i].done) return false;
    return true;
}

bool srv_job_wait(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    while (!all_done(j)) {
        wait_a_little(j);
        if (all_done(j)) break;
        pthread_mutex_unlock(&j->mu);
        if (give_up(j)) return false;
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return true;
}

const char *srv_job_error(const srv_job *j) {
    for (int i = 0; i < j->n; i++) {
        if (j->choice[i].oom) return "out of memory";
        if (j->choice[i].finish == RW_FINISH_ERROR) return j->choice[i].error;
    }
    return NULL;
}

/* What one choice has produced since the last take (copied under the lock). */
typedef struct {
    char *text;
    size_t text_len;
    int32_t *toks;
    srv_tok_lp *lps;
    size_t n_toks;
    bool done, oom;
    rw_finish_reason finish;
} taken;

static void take(srv_job *j, srv_choice *c, taken *t) { /* under j->mu */
    memset(t, 0, sizeof *t);
    t->text = c->text;
    t->text_len = c->text_len;
    c->text = NULL;
    c->text_len = c->text_cap = 0;
    size_t n = c->n_toks - c->toks_taken;
    t->toks = n ? malloc(n * sizeof *t->toks) : NULL;
    t->lps = n && j->logprobs ? malloc(n * sizeof *t->lps) : NULL;
    if (t->toks && (t->lps || !j->logprobs)) {
        memcpy(t->toks, c->toks + c->toks_taken, n * sizeof *t->toks);
        if (t->lps) memcpy(t->lps, c->lps + c->toks_taken, n * sizeof *t->lps);
        t->n_toks = n;
    }
    c->toks_taken += n;
    t->done = c->done;
    t->oom = c->oom || (n && !t->n_toks);
    t->finish = c->finish;
}

/* Formats what the engine has produced since the last call into j->out.
 * Returns false when there is nothing new (and the stream is not over). */
static bool fill(srv_job *j) {
    taken t[SRV_MAX_N];
    pthread_mutex_lock(&j->mu);
    for (int i = 0; i < j->n; i++) take(j, &j->choice[i], &t[i]);
    pthread_mutex_unlock(&j->mu);

    bool wrote = false, ok = true, all = true;
    const char *error = NULL;
    if (j->sse_state == 0) { /* the first chunk of each choice: the role (chat) */
        for (int i = 0; ok && i < j->n; i++) ok = srv_sse_chunk(j, i, NULL, 0, NULL, NULL, 0, true, RW_FINISH_NONE);
        j->sse_state = 1;
        wrote = true;
    }
    for (int i = 0; ok && i < j->n; i++) {
        srv_choice *c = &j->choice[i];
        if (t[i].text_len || (t[i].n_toks && (j->return_token_ids || j->logprobs))) {
            ok = srv_sse_chunk(j, i, t[i].text, t[i].text_len, t[i].toks, t[i].lps, t[i].n_toks, false,
                               RW_FINISH_NONE);
            wrote = true;
        }
        if (t[i].oom) error = "out of memory";
        else if (t[i].done && t[i].finish == RW_FINISH_ERROR) error = c->error;
        else if (ok && t[i].done && !c->finish_sent) {
            ok = srv_sse_chunk(j, i, NULL, 0, NULL, NULL, 0, false, t[i].finish);
            c->finish_sent = true;
            wrote = true;
        }
        all &= t[i].done;
    }
    if (ok && (error || all)) {
        if (error) ok = srv_sse_error(j, error);
        else if (j->include_usage) ok = srv_sse_usage(j);
        if (ok) ok = srv_sse_append(j, "data: [DONE]\n\n", 14);
        j->sse_state = 2;
        wrote = true;
    }
    for (int i = 0; i < j->n; i++) {
        free(t[i].text);
        free(t[i].toks);
        free(t[i].lps);
    }
    if (!ok) j->sse_state = 2; /* out of memory formatting: end the stream */
    return wrote && ok;
}

static bool nothing_new(const srv_job *j) { /* under j->mu */
    for (int i = 0; i < j->n; i++) {
        const srv_choice *c = &j->choice[i];
        if ((c->done && !c->finish_sent) || c->text_len || c->n_toks != c->toks_taken) return false;
    }
    return true;
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
        if (j->api_fill ? j->api_fill(j) : fill(j)) continue;
        if (j->out_len) continue; /* partial output before a failure: send it */
        if (j->sse_state == 2) return MHD_CONTENT_READER_END_WITH_ERROR; /* formatting failed */
        pthread_mutex_lock(&j->mu);
        if (nothing_new(j)) wait_a_little(j);
        pthread_mutex_unlock(&j->mu);
        if (give_up(j)) return MHD_CONTENT_READER_END_WITH_ERROR; /* closes: the free callback cancels */
    }
}

void srv_job_sse_free(void *cls) { srv_job_free(cls); }
