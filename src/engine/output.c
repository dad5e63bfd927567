/* output.c - from sampled tokens to events: end-of-generation, stop strings,
 * max_tokens, and the text held back while it may still become a stop
 * string.
 *
 * Invariant: the text already sent never contains a stop string, and no stop
 * string can start inside it: after every token the longest tail of the
 * generated text that is a proper prefix of some stop string stays in
 * r->held. So a stop string, when it completes, lies entirely inside held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

static bool held_append(rw_engine__req *r, const char *s, size_t n) {
    if (n == 0) return true;
    if (r->held_len + n > r->held_cap) {
        size_t cap = r->held_cap ? r->held_cap : 64;
        while (cap < r->held_len + n) cap *= 2;
        char *p = realloc(r->held, cap);
        if (!p) return false;
        r->held = p;
        r->held_cap = cap;
    }
    memcpy(r->held + r->held_len, s, n);
    r->held_len += n;
    return true;
}

/* Feeds held[from..held_len) to the stop automaton: the earliest start (in
 * held) of a stop string completed by these bytes, or -1. Held had no
 * complete stop string before (the invariant above), so every stop string in
 * it ends in the new bytes; and the automaton's state is the longest tail of
 * the whole text that is a prefix of a stop string, which lies in held. */
static long find_stop(rw_engine__req *r, size_t from) {
    if (!r->stopm) return -1;
    return rw_engine__stopm_feed(r->stopm, &r->stop_state, r->held + from, r->held_len - from, from);
}

/* Length of the longest tail of held that is a proper prefix of a stop string. */
static size_t stop_prefix_tail(const rw_engine__req *r) { return rw_engine__stopm_depth(r->stopm, r->stop_state); }

/* Sends an event; a final one waits in r (see rw_engine__req.final_pending) and
 * nothing follows it. */
static void send_event(rw_engine__req *r, size_t text_len, const int32_t *toks, int n_toks, const float *lp,
                       const rw_token_logprob *top, int n_top, rw_finish_reason fin, const char *error) {
    if (r->final_pending || r->finished) return; /* one final event, and nothing after it */
    rw_gen_event ev = {
        .size = sizeof(rw_gen_event),
        .logprobs = lp,
        .top = top,
        .n_top = lp ? n_top : 0,
        .text = r->held,
        .text_len = text_len,
        .tokens = toks,
        .n_tokens = n_toks,
        .done = fin != RW_FINISH_NONE,
        .finish = fin,
        .prompt_tokens = r->n_prompt,
        .cached_tokens = r->n_cached,
        .cached_tokens_disk = r->n_cached_disk,
        .completion_tokens = r->n_generated,
        .error = error,
    };
    rw_engine__plp_event(r, &ev); /* the prompt's logprobs ride on the first event after the prompt */
    if (fin != RW_FINISH_NONE) { /* held stays as it is: nothing is generated after this */
        if (n_toks == 1) {
            r->final_tok = toks[0];
            ev.tokens = &r->final_tok;
        } else ev.n_tokens = 0;
        if (lp) {
            r->final_lp = *lp;
            ev.logprobs = &r->final_lp;
            if (ev.n_top > RW_MAX_TOP_LOGPROBS) ev.n_top = RW_MAX_TOP_LOGPROBS;
            if (ev.n_top > 0) memcpy(r->final_top, top, (size_t)ev.n_top * sizeof *top);
            ev.top = r->final_top;
        }
        if (error) {
            snprintf(r->final_error, sizeof r->final_error, "%s", error);
            ev.error = r->final_error;
        }
        r->final_ev = ev;
        r->final_pending = true;
        return;
    }
    r->cb(r->user, &ev);
    if (text_len) memmove(r->held, r->held + text_len, r->held_len - text_len);
    r->held_len -= text_len;
}

/* The rest of a token's way out, once it is chosen and accepted into the
 * sampler: statistics, text, stop strings, the event. */
static rw_finish_reason emit(rw_engine *e, rw_engine__req *r, int32_t tok, float lp, const rw_token_logprob *top,
                             int n_top) {
    const double now = rw_engine__now();
    pthread_mutex_lock(&e->mu);
    rw_engine__hist_observe(r->n_generated ? &e->stats.itl : &e->stats.ttft, now - (r->n_generated ? r->t_last : r->t_submit));
    e->stats.generated_tokens++;
    pthread_mutex_unlock(&e->mu);
    r->t_last = now;
    r->tokens[r->n_tokens++] = tok;
    r->n_generated++;

    rw_finish_reason fin = RW_FINISH_NONE;
    bool oom = false;
    /* under a grammar, end-of-generation is allowed only where the grammar can end, and ends it */
    bool eog = (!r->p.ignore_eos || r->cons) && rw_tokenizer_is_eog(e->tok, tok);
    if (eog) fin = RW_FINISH_STOP;
    else {
        char buf[256];
        const size_t from = r->held_len;
        size_t n = rw_detok_stream_feed(e->tok, &r->detok, tok, r->p.render_special, buf, sizeof buf);
        if (n <= sizeof buf) oom = !held_append(r, buf, n);
        else {
            char *big = malloc(n);
            oom = !big || rw_detok_stream_feed(e->tok, &r->detok, tok, r->p.render_special, big, n) != n || !held_append(r, big, n);
            free(big);
        }
        long at = oom ? -1 : find_stop(r, from);
        if (at >= 0) {
            r->held_len = (size_t)at;
            fin = RW_FINISH_STOP;
        }
    }
    if (oom) {
        rw_engine__output_error(r, "out of memory");
        return RW_FINISH_ERROR;
    }
    /* a complete grammar that nothing may extend ends the output here */
    const bool gdone = fin == RW_FINISH_NONE && r->cons && rw_constraint_must_end(r->cons);
    if (gdone) fin = RW_FINISH_STOP;
    if (fin == RW_FINISH_NONE && r->n_generated >= r->p.max_tokens) fin = RW_FINISH_LENGTH;
    if (fin == RW_FINISH_LENGTH || eog || gdone) { /* the end of the text: what the stream still holds */
        char tail[64];
        const size_t from = r->held_len;
        size_t n = rw_detok_stream_flush(&r->detok, tail, sizeof tail);
        if (n <= sizeof tail && !held_append(r, tail, n)) {
            rw_engine__output_error(r, "out of memory");
            return RW_FINISH_ERROR;
        }
        long at = find_stop(r, from);
        if (at >= 0) {
            r->held_len = (size_t)at;
            fin = RW_FINISH_STOP;
        }
    }
    size_t send = fin != RW_FINISH_NONE ? r->held_len : r->held_len - stop_prefix_tail(r);
    send_event(r, send, &tok, 1, r->p.n_logprobs >= 0 ? &lp : NULL, top, n_top, fin, NULL);
    if (fin != RW_FINISH_NONE) r->finished = true;
    return fin;
}

rw_finish_reason rw_engine__output_token(rw_engine *e, rw_engine__req *r) {
    const float *row = r->logits;
    rw_error aerr = {0};
    if (r->cons) { /* the grammar's mask first, on a copy: r->logits stay the model's (the prefix cache keeps them) */
        memcpy(r->mlogits, r->logits, (size_t)e->n_vocab * sizeof *r->mlogits);
        if (!rw_constraint_mask(r->cons, NULL, 0, r->mlogits, &aerr)) {
            rw_engine__output_error(r, aerr.code ? aerr.msg : "grammar: no token of the vocabulary can continue the output");
            return RW_FINISH_ERROR;
        }
        row = r->mlogits;
    }
    const int32_t tok = rw_sampler_sample(r->sampler, row);
    float lp = 0.0f;
    rw_token_logprob top[RW_MAX_TOP_LOGPROBS];
    int n_top = 0;
    if (r->p.n_logprobs >= 0) /* before accepting: the penalties depend on the history */
        n_top = rw_sampler_logprobs(r->sampler, row, RW_LOGPROBS_RAW, tok, r->p.n_logprobs, &lp, top);
    if (rw_sampler_accept(r->sampler, tok, &aerr) || (r->cons && rw_constraint_accept(r->cons, tok, &aerr))) {
        rw_engine__output_error(r, aerr.msg);
        return RW_FINISH_ERROR;
    }
    return emit(e, r, tok, lp, top, n_top);
}

rw_finish_reason rw_engine__output_accepted(rw_engine *e, rw_engine__req *r, int32_t tok, const float *row) {
    float lp = 0.0f;
    rw_token_logprob top[RW_MAX_TOP_LOGPROBS];
    int n_top = 0;
    /* the raw distribution does not depend on the sampler's history, so the
     * tokens it accepted after this one change nothing */
    if (r->p.n_logprobs >= 0)
        n_top = rw_sampler_logprobs(r->sampler, row, RW_LOGPROBS_RAW, tok, r->p.n_logprobs, &lp, top);
    rw_error aerr = {0};
    if (r->cons && rw_constraint_accept(r->cons, tok, &aerr)) {
        rw_engine__output_error(r, aerr.msg);
        return RW_FINISH_ERROR;
    }
    return emit(e, r, tok, lp, top, n_top);
}

bool rw_engine__output_stop_pending(const rw_engine__req *r) { return r->p.n_stop > 0 && stop_prefix_tail(r) > 0; }

void rw_engine__output_prompt_only(rw_engine__req *r) {
    send_event(r, 0, NULL, 0, NULL, NULL, 0, RW_FINISH_LENGTH, NULL);
    r->finished = true;
}

void rw_engine__output_error(rw_engine__req *r, const char *msg) {
    if (r->final_pending || r->finished) return; /* its end is told already */
    r->held_len = 0;
    send_event(r, 0, NULL, 0, NULL, NULL, 0, RW_FINISH_ERROR, msg);
    r->finished = true;
}

bool rw_engine__output_drafts_end(void *ctx, const int32_t *drafts, int n) {
    const rw_engine__req *r = ctx;
    if (n < 1) return false;
    if ((!r->p.ignore_eos || r->cons) && rw_tokenizer_is_eog(r->tok, drafts[n - 1])) return true;
    if (!r->stopm) return false;
    /* the text the drafts would add after held, on copies of the stream and
     * of the automaton's state; held holds no complete stop string (the
     * invariant above), so any found now ends inside the drafts */
    rw_detok_stream d = r->detok;
    int32_t state = r->stop_state;
    size_t at = r->held_len; /* offsets from held's start: a stop string may begin in held */
    for (int i = 0; i < n; i++) {
        char text[256];
        size_t k = rw_detok_stream_feed(r->tok, &d, drafts[i], r->p.render_special, text, sizeof text);
        if (k > sizeof text) return false; /* too long to check: draft on */
        if (rw_engine__stopm_feed(r->stopm, &state, text, k, at) >= 0) return true;
        at += k;
    }
    return false;
}
