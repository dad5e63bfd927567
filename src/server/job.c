/* job.c - one generation request (n choices, one engine request each)
 * between the engine and a connection.
 *
 * The engine's callback (scheduler thread) appends a choice's text and
 * tokens under the job's lock and wakes the connection (conn.c): a stream at
 * every event, a whole answer when a choice ends. The connection's handler
 * or content reader, on libmicrohttpd's thread, takes what is there or
 * suspends the connection again; nothing blocks. A client that hangs up is
 * seen by the watcher (conn.c), its connection ends and rw_server__job_free
 * cancels the requests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/portable.h"
#include "server/server_int.h"

static void watch_calls(rw_server__job *j, rw_server__choice *c, const char *text, size_t len);
static void put(rw_server__job *j, rw_server__choice *c, const char *text, size_t text_len, const int32_t *toks, int n,
                const float *lp, const rw_token_logprob *top, int n_top);

/* ---- the thinking budget ---- */

/* Copies what a continuation needs: the prompt, the parameters (stop
 * strings and bias owned here), the close marker's text and tokens. */
static bool budget_setup(rw_server__job *j, const rw_server__request *r) {
    const char *close = j->model->caps.think_close[0] ? j->model->caps.think_close : "</think>";
    if (r->budget_close) close = r->budget_close;
    size_t cl = strlen(close);
    j->close_text = malloc(cl + 4);
    j->prompt = malloc((size_t)(r->n_prompt ? r->n_prompt : 1) * sizeof *j->prompt);
    j->stop = calloc((size_t)(r->n_stop ? r->n_stop : 1), sizeof *j->stop);
    j->bias = calloc(r->n_bias ? r->n_bias : 1, sizeof *j->bias);
    if (!j->close_text || !j->prompt || !j->stop || !j->bias) return false;
    j->close_len = (size_t)snprintf(j->close_text, cl + 4, r->budget_close ? "%s" : "\n%s\n\n", close);
    memcpy(j->prompt, r->prompt, (size_t)r->n_prompt * sizeof *j->prompt);
    j->n_prompt = r->n_prompt;
    j->gp = r->gp;
    for (int i = 0; i < r->n_stop; i++)
        if (!(j->stop[i] = strdup(r->stop[i]))) return false;
    j->gp.stop = (const char *const *)j->stop;
    if (r->n_bias) memcpy(j->bias, r->bias, r->n_bias * sizeof *j->bias);
    j->gp.logit_bias = r->n_bias ? j->bias : NULL;
    j->gp.marks = NULL;
    j->gp.n_marks = 0;
    /* the continuation's prompt ends with the block's close: its grammar holds from the start */
    const char *cont = r->cont_grammar ? r->cont_grammar : r->gp.grammar;
    if (cont && !(j->grammar = strdup(cont))) return false;
    j->gp.grammar = j->grammar;
    j->gp.grammar_after = NULL;
    if (r->cont_grammar) j->gp.grammar_root = NULL; /* the grammar after the close starts at root */
    rw_error err = {0};
    if (rw_tokenize(j->model->tok, j->close_text, j->close_len, false, true, &j->close_ids, &j->n_close, &err))
        return false;
    for (int i = 0; i < j->n; i++) j->choice[i].think = r->out.in_reasoning ? 1 : 0;
    return true;
}

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* Follows the think block through a new piece of output (under j->mu):
 * whether the output opens with it, and where it closes. */
static void track_think(const rw_server__job *j, rw_server__choice *c, const char *text, size_t len, int n_tokens) {
    const char *open = j->think_open               ? j->think_open
                       : j->model->caps.think_open[0] ? j->model->caps.think_open
                                                      : "<think>";
    const char *close = j->think_close               ? j->think_close
                        : j->model->caps.think_close[0] ? j->model->caps.think_close
                                                        : "</think>";
    const size_t ol = strlen(open), cl = strlen(close);
    size_t skip = 0; /* bytes of text already read by the open check */
    if (c->think == 0) {
        size_t k = len < sizeof c->head - c->head_len ? len : sizeof c->head - c->head_len;
        if (k) memcpy(c->head + c->head_len, text, k); /* text is NULL for an empty piece */
        c->head_len += k;
        size_t i = 0;
        while (i < c->head_len && is_ws(c->head[i])) i++;
        size_t rest = c->head_len - i;
        if (rest >= ol && !memcmp(c->head + i, open, ol)) {
            c->think = 1;
            c->reasoning_toks += n_tokens;
            skip = len; /* the rest of this piece: looked at below through head */
            c->tail_len = rest - ol < sizeof c->tail ? rest - ol : sizeof c->tail;
            memcpy(c->tail, c->head + i + ol + (rest - ol - c->tail_len), c->tail_len);
            if (memmem(c->head + i + ol, rest - ol, close, cl)) c->think = 2;
            return;
        }
        if ((rest && memcmp(c->head + i, open, rest < ol ? rest : ol)) || c->head_len == sizeof c->head) c->think = 2;
        return;
    }
    if (c->think != 1) return;
    c->think_toks += n_tokens;
    c->reasoning_toks += n_tokens;
    /* the close marker, maybe across the previous piece's end */
    char buf[sizeof c->tail * 2];
    for (size_t at = skip; at < len;) {
        size_t k = len - at < sizeof c->tail ? len - at : sizeof c->tail;
        memcpy(buf, c->tail, c->tail_len);
        memcpy(buf + c->tail_len, text + at, k);
        size_t n = c->tail_len + k;
        if (memmem(buf, n, close, cl)) {
            c->think = 2;
            return;
        }
        size_t keep = n < cl ? n : cl;
        memcpy(c->tail, buf + n - keep, keep);
        c->tail_len = keep;
        at += k;
    }
}

rw_server__job *rw_server__job_new(rw_server__model *m, const rw_server__request *r) {
    rw_server__job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->srv = m->srv;
    j->model = m;
    rw_server__model_ref(m);
    pthread_mutex_init(&j->mu, NULL);
    j->per_prompt = r->n < 1 ? 1 : r->n > SRV_MAX_N ? SRV_MAX_N : r->n;
    j->n = j->per_prompt * (1 + r->n_more) <= SRV_MAX_N ? j->per_prompt * (1 + r->n_more) : j->per_prompt;
    for (int i = 0; i < j->n; i++) {
        j->choice[i].job = j;
        j->choice[i].index = i;
    }
    j->chat = r->chat;
    j->include_usage = r->include_usage;
    j->return_token_ids = r->return_token_ids;
    j->logprobs = r->gp.n_logprobs >= 0;
    j->prompt_lp = r->gp.prompt_logprobs;
    /* set by the completions and chat parser whenever it asks for them */
    j->echo_lp = j->prompt_lp ? r->echo_lp : -1;
    j->vllm_lp = j->prompt_lp ? r->vllm_lp : -1;
    j->parse = r->out;
    if (r->tools_json && !(j->tools_json = strdup(r->tools_json))) {
        rw_server__job_free(j);
        return NULL;
    }
    j->parse.tools_json = j->tools_json;
    j->budget = r->chat ? r->reasoning_budget : -1;
    j->think_open = r->think_open;
    j->think_close = r->think_close;
    j->track_think = r->chat && r->out.reasoning != RW_REASONING_NONE;
    for (int i = 0; i < j->n; i++) j->choice[i].think = r->out.in_reasoning ? 1 : 0;
    if (j->budget >= 0 && !budget_setup(j, r)) {
        rw_server__job_free(j);
        return NULL;
    }
    /* the prompt's ids go back too (vLLM's prompt_token_ids), or name its tokens' logprobs */
    if ((j->return_token_ids || j->prompt_lp) && !j->prompt) {
        j->prompt = malloc((size_t)(r->n_prompt ? r->n_prompt : 1) * sizeof *j->prompt);
        if (!j->prompt) {
            rw_server__job_free(j);
            return NULL;
        }
        memcpy(j->prompt, r->prompt, (size_t)r->n_prompt * sizeof *j->prompt);
        j->n_prompt = r->n_prompt;
    }
    if (r->echo) { /* completions' echo: the prompt's text before each choice's */
        if (!(j->echo = malloc(r->echo_len + 1))) {
            rw_server__job_free(j);
            return NULL;
        }
        memcpy(j->echo, r->echo, r->echo_len + 1);
        j->echo_len = r->echo_len;
    }
    if (j->n > j->per_prompt) { /* a list of prompts: what the answer repeats of the others */
        if (!(j->more = calloc((size_t)r->n_more, sizeof *j->more))) {
            rw_server__job_free(j);
            return NULL;
        }
        j->n_more = r->n_more;
        for (int k = 0; k < r->n_more; k++) {
            rw_server__more_prompt *q = &j->more[k];
            const rw_server__more_prompt *from = &r->more[k];
            if (j->return_token_ids || j->prompt_lp) {
                q->n = from->n;
                if (!(q->ids = malloc((size_t)(from->n ? from->n : 1) * sizeof *q->ids))) {
                    rw_server__job_free(j);
                    return NULL;
                }
                memcpy(q->ids, from->ids, (size_t)from->n * sizeof *q->ids);
            }
            if (from->echo) {
                q->echo_len = from->echo_len;
                if (!(q->echo = malloc(from->echo_len + 1))) {
                    rw_server__job_free(j);
                    return NULL;
                }
                memcpy(q->echo, from->echo, from->echo_len + 1);
            }
        }
    }
    j->created = (int64_t)time(NULL);
    j->stream = r->stream;
    unsigned char rnd[12];
    if (!rw_random_bytes(rnd, sizeof rnd)) memset(rnd, 0, sizeof rnd);
    int off = snprintf(j->id, sizeof j->id, "%s", r->chat ? "chatcmpl-" : "cmpl-");
    for (size_t i = 0; i < sizeof rnd; i++) off += snprintf(j->id + off, sizeof j->id - (size_t)off, "%02x", rnd[i]);
    return j;
}

void rw_server__job_attach(rw_server__job *j, rw_server__sock *k) {
    rw_server__sock_ref(j->srv, k);
    pthread_mutex_lock(&j->mu);
    j->sock = k;
    pthread_mutex_unlock(&j->mu);
}

rw_status rw_server__job_submit(rw_server__job *j, const rw_server__request *r, rw_error *err) {
    for (int i = 0; i < j->n; i++) {
        rw_request_params gp = r->gp;
        const int k = i / j->per_prompt;          /* its prompt */
        gp.seed += (uint64_t)(i % j->per_prompt); /* choice i: its own draws (a prompt of a list: as if alone) */
        rw_server__choice *c = &j->choice[i];
        const int32_t *prompt = k ? r->more[k - 1].ids : r->prompt;
        int64_t n_prompt = k ? r->more[k - 1].n : r->n_prompt;
        int32_t *closed = NULL;
        if (j->budget == 0 && c->think == 1) { /* no thinking at all: the block is closed before the first token */
            closed = malloc((size_t)(n_prompt + (int64_t)j->n_close) * sizeof *closed);
            if (!closed) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
            memcpy(closed, prompt, (size_t)n_prompt * sizeof *closed);
            memcpy(closed + n_prompt, j->close_ids, j->n_close * sizeof *closed);
            prompt = closed;
            n_prompt += (int64_t)j->n_close;
            put(j, c, j->close_text, j->close_len, j->close_ids, (int)j->n_close, NULL, NULL, 0);
            if (j->chat && j->parse.max_calls) watch_calls(j, c, j->close_text, j->close_len);
            c->think = 2;
            c->done_toks = c->prompt_extra = (int64_t)c->n_toks;
            gp.max_tokens -= c->done_toks;
            if (gp.max_tokens < 1) gp.max_tokens = 1;
            gp.grammar_after = NULL; /* the prompt ends with the close: the grammar holds at once */
        }
        rw_status st =
            rw_server__submit(j->model->engine, prompt, n_prompt, &gp, rw_server__job_on_event, c, &c->engine_id, err);
        free(closed);
        if (st) return st; /* rw_server__job_free cancels the ones already in */
        c->submitted = true;
    }
    return RW_OK;
}

void rw_server__job_free(rw_server__job *j) {
    if (!j) return;
    for (int i = 0; i < j->n; i++) {
        rw_server__choice *c = &j->choice[i];
        pthread_mutex_lock(&j->mu);
        bool running = c->submitted && !c->done;
        pthread_mutex_unlock(&j->mu);
        if (running) rw_engine_cancel(j->model->engine, c->engine_id); /* no callback after this returns */
        free(c->text);
        free(c->toks);
        free(c->lps);
        free(c->plps);
        rw_chat_output_free(c->parser);
        rw_chat_output_free(c->watch);
    }
    if (j->api_free) j->api_free(j->api_state);
    for (int k = 0; k < j->n_more; k++) {
        free(j->more[k].ids);
        free(j->more[k].echo);
    }
    free(j->more);
    free(j->tools_json);
    free(j->prompt);
    for (int i = 0; j->stop && i < j->gp.n_stop; i++) free(j->stop[i]);
    free(j->stop);
    free(j->bias);
    free(j->close_ids);
    free(j->close_text);
    free(j->grammar);
    free(j->echo);
    rw_server__sock_unref(j->srv, j->sock);
    rw_server__model_release(j->model); /* nothing of the job runs on its engine any more */
    pthread_mutex_destroy(&j->mu);
    free(j->out);
    free(j);
}

rw_status rw_server__job_parser_new(const rw_server__job *j, const char *id_prefix, bool stream, rw_chat_output **out,
                             rw_error *err) {
    rw_chat_output_params o = j->parse;
    o.id_prefix = id_prefix;
    o.stream_args = stream;
    if (!rw_random_bytes(&o.id_seed, sizeof o.id_seed)) o.id_seed = (uint64_t)time(NULL);
    return rw_server__output_open(&o, out, err);
}

/* Appends text and tokens (with logprobs, or zeros when lp is NULL) to a
 * choice, under j->mu. */
static void put(rw_server__job *j, rw_server__choice *c, const char *text, size_t text_len, const int32_t *toks, int n,
                const float *lp, const rw_token_logprob *top, int n_top) {
    if (text_len) {
        if (c->text_len + text_len + 1 > c->text_cap) {
            size_t cap = c->text_cap ? c->text_cap : 256;
            while (cap < c->text_len + text_len + 1) cap *= 2;
            char *p = realloc(c->text, cap);
            if (p) {
                c->text = p;
                c->text_cap = cap;
            } else c->oom = true;
        }
        if (!c->oom) {
            memcpy(c->text + c->text_len, text, text_len);
            c->text_len += text_len;
            c->text[c->text_len] = 0;
        }
    }
    if (n) {
        if (c->n_toks + (size_t)n > c->toks_cap) {
            size_t cap = c->toks_cap ? c->toks_cap * 2 : 64;
            while (cap < c->n_toks + (size_t)n) cap *= 2;
            int32_t *p = realloc(c->toks, cap * sizeof *p);
            if (p) c->toks = p;
            rw_server__tok_lp *q = j->logprobs ? realloc(c->lps, cap * sizeof *q) : NULL;
            if (q) c->lps = q;
            if (p && (q || !j->logprobs)) c->toks_cap = cap;
            else c->oom = true;
        }
        if (!c->oom) {
            for (int i = 0; i < n; i++) {
                c->toks[c->n_toks] = toks[i];
                if (j->logprobs) {
                    rw_server__tok_lp *l = &c->lps[c->n_toks];
                    l->lp = lp ? lp[i] : 0.0f;
                    l->n_top = lp ? n_top : 0;
                    if (l->n_top) memcpy(l->top, top + (size_t)i * (size_t)n_top, (size_t)l->n_top * sizeof *l->top);
                }
                c->n_toks++;
            }
        }
    }
}

/* Keeps the prompt tokens' logprobs of the event (once, under j->mu);
 * out of memory: the choice fails. */
static void put_prompt(rw_server__choice *c, const rw_token_event *ev) {
    const int64_t n = ev->prompt_tokens;
    if (n < 1 || !(c->plps = malloc((size_t)n * sizeof *c->plps))) {
        c->oom = true;
        return;
    }
    c->n_plps = n;
    const int k = ev->n_prompt_top < RW_MAX_TOP_LOGPROBS ? ev->n_prompt_top : RW_MAX_TOP_LOGPROBS;
    c->plps[0] = (rw_server__tok_lp){.n_top = -1};
    for (int64_t i = 1; i < n; i++) {
        rw_server__tok_lp *l = &c->plps[i];
        l->lp = ev->prompt_logprobs[i];
        l->rank = ev->prompt_ranks ? ev->prompt_ranks[i] : 0;
        l->n_top = k;
        if (k) memcpy(l->top, ev->prompt_top + (size_t)i * (size_t)ev->n_prompt_top, (size_t)k * sizeof *l->top);
    }
}

static rw_status ignore_event(void *user, const rw_chat_event *ev) {
    (void)user;
    (void)ev;
    return RW_OK;
}

/* Feeds the output to the choice's watch parser; once the allowed calls
 * are complete, the request is to stop (under j->mu). Out of memory: no
 * watching (the answer is still parsed whole, only the stop is lost). */
static void watch_calls(rw_server__job *j, rw_server__choice *c, const char *text, size_t len) {
    rw_error err = {0};
    if (c->calls_stop || !len) return;
    if (!c->watch) {
        rw_chat_output_params o = j->parse;
        o.stream_args = false;
        if (rw_server__output_open(&o, &c->watch, &err)) return;
    }
    if (rw_chat_output_feed(c->watch, text, len, ignore_event, NULL, &err)) return;
    c->calls_stop = rw_chat_output_calls_done(c->watch);
}

void rw_server__job_on_event(void *user, const rw_token_event *ev) {
    rw_server__choice *c = user;
    rw_server__job *j = c->job;
    pthread_mutex_lock(&j->mu);
    if (c->over_budget) { /* being replaced by its continuation: what it makes now is not kept */
        pthread_mutex_unlock(&j->mu);
        return;
    }
    if (ev->prompt_logprobs && !c->plps) put_prompt(c, ev);
    put(j, c, ev->text, ev->text_len, ev->tokens, ev->n_tokens, ev->logprobs, ev->top, ev->n_top);
    if (j->chat && j->parse.max_calls && !ev->done) watch_calls(j, c, ev->text, ev->text_len);
    if (j->budget >= 0 || j->track_think) {
        track_think(j, c, ev->text, ev->text_len, ev->n_tokens);
        if (j->budget >= 0 && c->think == 1 && c->think_toks >= j->budget && !ev->done) c->over_budget = true;
    }
    if (!c->prompt_tokens && ev->prompt_tokens) { /* a continuation keeps the first request's prompt counts */
        c->prompt_tokens = ev->prompt_tokens - c->prompt_extra;
        c->cached_tokens = ev->cached_tokens < c->prompt_tokens ? ev->cached_tokens : c->prompt_tokens;
        c->cached_tokens_disk = ev->cached_tokens_disk < c->cached_tokens ? ev->cached_tokens_disk : c->cached_tokens;
    }
    c->completion_tokens = ev->completion_tokens + c->done_toks;
    if (ev->done) {
        c->done = true;
        c->finish = ev->finish;
        if (ev->error) {
            snprintf(c->error, sizeof c->error, "%s", ev->error);
            rw_server__utf8_cut(c->error, sizeof c->error);
        }
    }
    /* a choice over its budget wakes the connection too: its thread continues it */
    if (j->sock && (j->stream || ev->done || c->over_budget || c->calls_stop))
        rw_server__sock_wake(j->srv, j->sock); /* under mu: conn.c */
    pthread_mutex_unlock(&j->mu);
}

/* Replaces a choice's request that spent its thinking budget: cancels it,
 * adds the close marker to its output and submits prompt + output + close,
 * with what is left of max_tokens (connection thread). */
static void continue_choice(rw_server__job *j, rw_server__choice *c) {
    if (c->submitted) rw_engine_cancel(j->model->engine, c->engine_id); /* no callback after this */
    pthread_mutex_lock(&j->mu);
    put(j, c, j->close_text, j->close_len, j->close_ids, (int)j->n_close, NULL, NULL, 0);
    if (j->chat && j->parse.max_calls) watch_calls(j, c, j->close_text, j->close_len);
    c->think = 2;
    c->over_budget = false;
    c->done_toks = (int64_t)c->n_toks;
    c->completion_tokens = c->done_toks;
    int64_t n = j->n_prompt + (int64_t)c->n_toks;
    int32_t *prompt = c->oom ? NULL : malloc((size_t)n * sizeof *prompt);
    if (prompt) {
        memcpy(prompt, j->prompt, (size_t)j->n_prompt * sizeof *prompt);
        memcpy(prompt + j->n_prompt, c->toks, c->n_toks * sizeof *prompt);
    }
    rw_request_params gp = j->gp;
    gp.max_tokens = j->gp.max_tokens - (int64_t)c->n_toks;
    gp.seed += (uint64_t)c->index + 0x9e3779b97f4a7c15ull; /* the continuation's own draws */
    gp.prompt_logprobs = false; /* the first request's prompt gave them; this one may use the cache */
    pthread_mutex_unlock(&j->mu);
    rw_error err = {0};
    rw_status st = RW_OK;
    if (!prompt) st = rw_errorf(&err, RW_ERR_NOMEM, "out of memory");
    else if (gp.max_tokens > 0)
        st = rw_server__submit(j->model->engine, prompt, n, &gp, rw_server__job_on_event, c, &c->engine_id, &err);
    free(prompt);
    pthread_mutex_lock(&j->mu);
    if (st || gp.max_tokens <= 0) { /* no room left (or it failed): the choice ends here */
        c->done = true;
        c->finish = st ? RW_DONE_ERROR : RW_DONE_LENGTH;
        if (st) snprintf(c->error, sizeof c->error, "%s", err.msg);
    }
    c->submitted = !st && gp.max_tokens > 0;
    if (j->sock) rw_server__sock_wake(j->srv, j->sock); /* under mu: see conn.c */
    pthread_mutex_unlock(&j->mu);
}

static bool any_over_budget(const rw_server__job *j) { /* under j->mu */
    for (int i = 0; i < j->n; i++)
        if (j->choice[i].over_budget) return true;
    return false;
}

/* Continues every choice over its budget (connection thread). */
static void continue_over_budget(rw_server__job *j) {
    if (j->budget < 0) return;
    for (int i = 0; i < j->n; i++) {
        rw_server__choice *c = &j->choice[i];
        pthread_mutex_lock(&j->mu);
        bool over = c->over_budget;
        pthread_mutex_unlock(&j->mu);
        if (over) continue_choice(j, c);
    }
}

/* Ends every choice whose allowed calls are complete: its engine request
 * cancelled, its finish "stop" (connection thread). */
static void stop_after_calls(rw_server__job *j) {
    for (int i = 0; i < j->n; i++) {
        rw_server__choice *c = &j->choice[i];
        pthread_mutex_lock(&j->mu);
        bool stop = c->calls_stop && !c->done && !c->over_budget;
        pthread_mutex_unlock(&j->mu);
        if (!stop) continue;
        if (c->submitted) rw_engine_cancel(j->model->engine, c->engine_id); /* no callback after this */
        pthread_mutex_lock(&j->mu);
        c->done = true;
        c->finish = RW_DONE_STOP;
        pthread_mutex_unlock(&j->mu);
    }
}

static bool all_done(const rw_server__job *j) { /* under j->mu */
    for (int i = 0; i < j->n; i++)
        if (!j->choice[i].done) return false;
    return true;
}

bool rw_server__job_ready(rw_server__job *j, bool *over) {
    *over = false;
    if (rw_server__stopping(j->srv) || rw_server__sock_gone(j->srv, j->sock)) {
        *over = true;
        return false;
    }
    for (;;) {
        continue_over_budget(j);
        stop_after_calls(j);
        pthread_mutex_lock(&j->mu);
        bool done = all_done(j), again = !done && any_over_budget(j);
        if (!done && !again && !rw_server__sock_sleep(j->srv, j->sock, true)) *over = true;
        pthread_mutex_unlock(&j->mu);
        if (!again) return done;
    }
}

const char *rw_server__job_error(const rw_server__job *j) {
    for (int i = 0; i < j->n; i++) {
        if (j->choice[i].oom) return "out of memory";
        if (j->choice[i].finish == RW_DONE_ERROR) return j->choice[i].error;
    }
    return NULL;
}

void rw_server__job_fail_error(rw_server__error *e, const char *fail) {
    if (!strncmp(fail, "grammar: ", 9)) rw_server__errorf(e, 400, "invalid_request_error", NULL, NULL, "%s", fail);
    else rw_server__errorf(e, 500, "server_error", NULL, NULL, "%s", fail);
}

/* What one choice has produced since the last take (copied under the lock). */
typedef struct {
    char *text;
    size_t text_len;
    int32_t *toks;
    rw_server__tok_lp *lps;
    size_t n_toks;
    bool done, oom;
    bool plp; /* the prompt's logprobs are in the choice (set once, read without the lock after) */
    rw_done_reason finish;
} taken;

static void take(rw_server__job *j, rw_server__choice *c, taken *t) { /* under j->mu */
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
    t->plp = c->plps != NULL;
    t->oom = c->oom || (n && !t->n_toks);
    t->finish = c->finish;
}

/* A chat choice's stream: the parser's events as delta chunks. */
typedef struct {
    rw_server__job *j;
    rw_server__choice *c;
    const taken *t;
    bool toks_sent; /* the taken tokens (ids, logprobs) ride on the first chunk */
    int n;          /* chunks written */
} stream_ctx;

static rw_status on_stream_event(void *user, const rw_chat_event *ev) {
    stream_ctx *x = user;
    json_t *delta = NULL;
    switch (ev->kind) {
    case RW_CHAT_EV_CONTENT: delta = json_pack("{s:s%}", "content", ev->text, ev->len); break;
    case RW_CHAT_EV_REASONING: delta = json_pack("{s:s%}", "reasoning_content", ev->text, ev->len); break;
    case RW_CHAT_EV_CALL_BEGIN:
        x->c->n_calls = ev->index + 1;
        delta = json_pack("{s:[{s:i,s:s,s:s,s:{s:s,s:s}}]}", "tool_calls", "index", ev->index, "id", ev->id, "type",
                          "function", "function", "name", ev->name, "arguments", "");
        break;
    case RW_CHAT_EV_CALL_ARGS:
        delta = json_pack("{s:[{s:i,s:{s:s%}}]}", "tool_calls", "index", ev->index, "function", "arguments", ev->text,
                          ev->len);
        break;
    case RW_CHAT_EV_CALL_END: return RW_OK;
    }
    if (!delta) { /* invalid UTF-8 in a piece: json_pack refuses it; send it repaired */
        json_t *txt = rw_server__text_json(ev->text, ev->len);
        delta = json_object();
        if (!txt || !delta) {
            json_decref(txt);
            json_decref(delta);
            return RW_ERR_NOMEM;
        }
        json_object_set_new(delta, ev->kind == RW_CHAT_EV_REASONING ? "reasoning_content" : "content", txt);
    }
    bool with_toks = !x->toks_sent;
    x->toks_sent = true;
    x->n++;
    return rw_server__sse_delta(x->j, x->c->index, delta, with_toks ? x->t->toks : NULL, with_toks ? x->t->lps : NULL,
                         with_toks ? x->t->n_toks : 0, NULL)
               ? RW_OK
               : RW_ERR_NOMEM;
}

/* Feeds what a chat choice produced to its parser (made on first use) and
 * writes the events as chunks; at the end, the held-back text too. */
static bool stream_parsed(rw_server__job *j, rw_server__choice *c, const taken *t, int *wrote) {
    rw_error err = {0};
    if (!c->parser && rw_server__job_parser_new(j, NULL, true, &c->parser, &err)) return false;
    stream_ctx x = {.j = j, .c = c, .t = t};
    rw_status st = RW_OK;
    if (t->text_len) st = rw_chat_output_feed(c->parser, t->text, t->text_len, on_stream_event, &x, &err);
    if (!st && t->done) {
        rw_chat_output_set_cut(c->parser, t->finish == RW_DONE_LENGTH);
        st = rw_chat_output_finish(c->parser, on_stream_event, &x, &err);
    }
    if (!st && !x.toks_sent && t->n_toks && (j->return_token_ids || j->logprobs)) {
        x.n++;
        if (!rw_server__sse_delta(j, c->index, json_object(), t->toks, t->lps, t->n_toks, NULL)) st = RW_ERR_NOMEM;
    }
    *wrote = x.n;
    return st == RW_OK;
}

/* Formats what the engine has produced since the last call into j->out.
 * Returns false when there is nothing new (and the stream is not over). */
static bool fill(rw_server__job *j) {
    taken t[SRV_MAX_N];
    pthread_mutex_lock(&j->mu);
    for (int i = 0; i < j->n; i++) take(j, &j->choice[i], &t[i]);
    pthread_mutex_unlock(&j->mu);

    bool wrote = false, ok = true, all = true;
    const char *error = NULL;
    /* the first chunk of each choice: the role (chat), the echo
     * (completions), which waits for the prompt's logprobs when they are
     * asked for (they come with the choice's first event) */
    for (int i = 0; ok && i < j->n; i++) {
        rw_server__choice *c = &j->choice[i];
        if (c->head_sent || (j->echo_lp >= 0 && !t[i].plp && !t[i].done)) continue;
        const int32_t *ids = NULL;
        const size_t n_ids = t[i].plp && j->echo_lp >= 0 ? rw_server__choice_prompt_lps(j, i, &ids) : 0;
        ok = rw_server__sse_chunk(j, i, NULL, 0, ids, n_ids ? c->plps : NULL, n_ids, true, RW_DONE_NONE);
        c->head_sent = wrote = true;
    }
    if (j->sse_state == 0) j->sse_state = 1;
    for (int i = 0; ok && i < j->n; i++) {
        rw_server__choice *c = &j->choice[i];
        if (j->chat) { /* through the output parser: content, reasoning and tool call deltas */
            int wrote_n = 0;
            ok = stream_parsed(j, c, &t[i], &wrote_n);
            wrote |= wrote_n > 0;
        } else if (t[i].text_len || (t[i].n_toks && (j->return_token_ids || j->logprobs))) {
            ok = rw_server__sse_chunk(j, i, t[i].text, t[i].text_len, t[i].toks, t[i].lps, t[i].n_toks, false,
                               RW_DONE_NONE);
            wrote = true;
        }
        if (t[i].oom) error = "out of memory";
        else if (t[i].done && t[i].finish == RW_DONE_ERROR) error = c->error;
        else if (ok && t[i].done && !c->finish_sent) {
            /* chat: an empty delta; completions: an empty text, as OpenAI's chunks */
            ok = j->chat ? rw_server__sse_delta(j, i, json_object(), NULL, NULL, 0, rw_server__choice_finish(c))
                         : rw_server__sse_chunk(j, i, "", 0, NULL, NULL, 0, false, c->finish);
            c->finish_sent = true;
            wrote = true;
        }
        all &= t[i].done;
    }
    if (ok && (error || all)) {
        if (error) ok = rw_server__sse_error(j, error);
        else if (j->include_usage) ok = rw_server__sse_usage(j);
        if (ok) ok = rw_server__sse_append(j, "data: [DONE]\n\n", 14);
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

static bool nothing_new(const rw_server__job *j) { /* under j->mu */
    for (int i = 0; i < j->n; i++) {
        const rw_server__choice *c = &j->choice[i];
        if ((c->done && !c->finish_sent) || c->text_len || c->n_toks != c->toks_taken || c->over_budget ||
            (c->calls_stop && !c->done) || (c->plps && !c->head_sent))
            return false;
    }
    return true;
}

ssize_t rw_server__job_sse_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    rw_server__job *j = cls;
    for (;;) {
        if (j->out_pos < j->out_len) {
            size_t n = j->out_len - j->out_pos < max ? j->out_len - j->out_pos : max;
            memcpy(buf, j->out + j->out_pos, n);
            j->out_pos += n;
            return (ssize_t)n;
        }
        j->out_len = j->out_pos = 0;
        if (j->sse_state == 2) return MHD_CONTENT_READER_END_OF_STREAM;
        if (rw_server__stopping(j->srv) || rw_server__sock_gone(j->srv, j->sock))
            return MHD_CONTENT_READER_END_WITH_ERROR; /* closes: the free callback cancels */
        continue_over_budget(j);
        stop_after_calls(j);
        if (j->api_fill ? j->api_fill(j) : fill(j)) continue;
        if (j->out_len) continue; /* partial output before a failure: send it */
        if (j->sse_state == 2) return MHD_CONTENT_READER_END_WITH_ERROR; /* formatting failed */
        pthread_mutex_lock(&j->mu);
        bool slept = nothing_new(j) && rw_server__sock_sleep(j->srv, j->sock, true);
        bool again = !slept && !nothing_new(j);
        pthread_mutex_unlock(&j->mu);
        if (slept) return 0; /* called again when the connection resumes */
        if (!again) return MHD_CONTENT_READER_END_WITH_ERROR; /* stopping or gone */
    }
}

void rw_server__job_sse_free(void *cls) { rw_server__job_free(cls); }
