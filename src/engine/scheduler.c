/* scheduler.c - the scheduler thread: continuous batching.
 *
 * Each step, under the engine lock: drop cancelled requests (freeing their
 * sequences), admit queued requests while fewer than max_running run. Then,
 * without the lock: give new requests their sequence (rw_engine__seq_for_prompt),
 * build one ragged batch of every decoding sequence's last token plus up to
 * prefill_chunk prompt tokens (requests in admission order), run it through
 * rw_model_forward_batch, and sample the next token of every item whose last
 * prompt token or decode token was computed. Finished requests leave at the
 * next lock. Only this thread touches a running request's state (apart from
 * the cancelled flag, under the lock), so its fields need no locking. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cache/state.h"
#include "base/log.h"
#include "engine/engine_int.h"

enum { IDLE_TRIM_SECONDS = 2 };

/* Removes running[i] (order kept: admission order decides who prefills
 * first). Under the lock. */
static void remove_running(rw_engine *e, int i) {
    memmove(e->running + i, e->running + i + 1, (size_t)(e->n_running - i - 1) * sizeof *e->running);
    e->n_running--;
}

/* Gives the request's sequence (and its draft's) to the prefix cache, or
 * frees them. Not under the lock. */
static void release_seq(rw_engine *e, rw_engine__req *r) {
    /* r->logits are those after the sequence's last token once the prompt
     * is done (every step computes the row of its last token) */
    rw_model_seq *draft = r->spec ? rw_spec_seq_take_draft(r->spec) : NULL;
    if (r->seq)
        rw_engine__seq_release(e, r->seq, draft, r->n_in_seq >= r->n_prompt && r->n_in_seq > 0 ? r->logits : NULL,
                        r->n_prompt, r->prompt_logits);
    else rw_model_seq_free(draft);
    r->seq = NULL;
}

/* Frees a request that left running. Not under the lock. */
static void retire(rw_engine *e, rw_engine__req *r) {
    release_seq(e, r);
    rw_engine__req_free(r);
}

/* Under the lock: takes finished and cancelled requests out of running into
 * out[] (to be retired without the lock); when there are none, admits
 * queued ones. */
static int collect_and_admit(rw_engine *e, rw_engine__req **out) {
    int n_out = 0;
    for (int i = 0; i < e->n_running;) {
        rw_engine__req *r = e->running[i];
        if (r->finished || r->cancelled) {
            if (r->cancelled && !r->finished) e->stats.requests_cancelled++;
            out[n_out++] = r;
            rw_engine__slot_leave(e, r); /* its slot now holds what its sequence gave the cache */
            remove_running(e, i);
        } else i++;
    }
    if (n_out) {
        /* admit once these are retired (the caller comes back): until their
         * states are freed they still count as running, and a budget by
         * bytes must not see a new sequence beside a leaving one */
        pthread_cond_broadcast(&e->step_done);
        return n_out;
    }
    bool admitted = false;
    while (e->n_running < e->cfg.max_running && e->queue_head) {
        /* by bytes: under the bound, one at a time (its state shows in
         * kv_bytes after the next step), and always when nothing runs */
        if (e->cfg.max_state_bytes && e->n_running > 0 &&
            (admitted || e->state_stale || e->stats.kv_bytes >= e->cfg.max_state_bytes)) {
            if (!admitted && !e->state_stale) e->stats.held_for_memory++;
            break;
        }
        admitted = true;
        e->state_stale = true; /* until the next step measures it */
        rw_engine__req *r = e->queue_head;
        e->queue_head = r->next;
        if (!e->queue_head) e->queue_tail = NULL;
        r->next = NULL;
        e->n_queued--;
        e->running[e->n_running++] = r;
        rw_engine__slot_take(e, r);
    }
    return n_out;
}

/* The scheduler's scratch: a step's lists, max_running entries each. */
struct rw_engine__scratch {
    rw_engine__req **retired, **batch_req, **step, **spec_req, **pre;
    rw_batch_item *items;
};

void rw_engine__scratch_free(rw_engine__scratch *sc) {
    if (!sc) return;
    free(sc->retired);
    free(sc->batch_req);
    free(sc->items);
    free(sc->step);
    free(sc->spec_req);
    free(sc->pre);
    free(sc);
}

rw_engine__scratch *rw_engine__scratch_new(int cap) {
    rw_engine__scratch *sc = calloc(1, sizeof *sc); /* freed by rw_engine__scratch_free */
    if (!sc) return NULL;
    sc->retired = calloc((size_t)cap, sizeof *sc->retired);
    sc->batch_req = calloc((size_t)cap, sizeof *sc->batch_req);
    sc->items = calloc((size_t)cap, sizeof *sc->items);
    sc->step = calloc((size_t)cap, sizeof *sc->step);
    sc->spec_req = calloc((size_t)cap, sizeof *sc->spec_req);
    sc->pre = calloc((size_t)cap, sizeof *sc->pre);
    if (!sc->retired || !sc->batch_req || !sc->items || !sc->step || !sc->spec_req || !sc->pre) {
        rw_engine__scratch_free(sc);
        return NULL;
    }
    return sc;
}

/* The grammar masks a step's outputs will need, computed while its forward
 * pass runs: a mask depends only on the tokens accepted so far, so it can
 * be computed before the logits exist, and the output then takes it from
 * the grammar (rw_constraint_prefetch) - the same mask, or the same error,
 * as computing it after. A grammar whose masks are dear then costs the
 * other sequences' step a core's share of time, not the mask's time on top
 * of the pass (given a core the pass leaves). Nothing else touches these
 * requests' constraints until the join. */
typedef struct {
    rw_engine__req **reqs;
    int n;
} prefetch_job;

static void *prefetch_main(void *arg) {
    const prefetch_job *job = arg;
    for (int i = 0; i < job->n; i++) rw_constraint_prefetch(job->reqs[i]->cons);
    return NULL;
}

/* The request's first output, from the row after its prompt in r->logits:
 * its first token (then speculative decoding may start), or its end when it
 * asked for none (max_tokens 0: the prompt alone, its logprobs). */
static void first_output(rw_engine *e, rw_engine__req *r) {
    if (r->p.max_tokens == 0) return rw_engine__output_prompt_only(r);
    if (rw_engine__output_token(e, r) != RW_FINISH_NONE) r->finished = true;
    rw_engine__spec_start(r);
}

bool rw_engine__step_locked(rw_engine *e, rw_engine__scratch *sc) {
    rw_engine__req **retired = sc->retired, **batch_req = sc->batch_req, **step = sc->step, **spec_req = sc->spec_req;
    rw_batch_item *items = sc->items;
    for (;;) { /* until nothing more retires; then one step or none */
        if (e->slot_ops) rw_engine__slot_ops_run(e); /* slot saves and restores: between steps */
        int n_ret = collect_and_admit(e, retired);
        if (n_ret) {
            e->n_retiring += n_ret; /* still counted as running by the stats until freed */
            pthread_mutex_unlock(&e->mu);
            for (int i = 0; i < n_ret; i++) retire(e, retired[i]);
            pthread_mutex_lock(&e->mu);
            e->n_retiring -= n_ret;
            continue; /* admit into the freed slots before stepping */
        }
        if (e->stopping) return false;
        if (e->n_running == 0) {
            e->stats.kv_bytes = 0; /* nothing runs: no state (not the last step's figure) */
            e->state_stale = false;
            return false; /* the thread waits for work; rw_engine_step returns */
        }
        int n_step = e->n_running;
        memcpy(step, e->running, (size_t)n_step * sizeof *step);
        pthread_mutex_unlock(&e->mu);

        /* new requests get their sequence, once the prefix cache's disk
         * tier has what they need in memory (its threads load it: no disk
         * I/O here) */
        int n_waiting = 0;
        for (int i = 0; i < n_step; i++) {
            rw_engine__req *r = step[i];
            if (r->seq || r->finished) continue;
            if (e->pcache && !r->plp && !rw_pcache_prepare(e->pcache, r->tokens, r->n_prompt, &r->rw_pcache__wait)) {
                n_waiting++;
                continue;
            }
            rw_error err = {0};
            int64_t n_cached = 0;
            if (rw_engine__seq_for_prompt(e, r, &n_cached, &err)) {
                rw_engine__output_error(r, err.msg);
                continue;
            }
            r->n_cached = r->n_in_seq = n_cached;
            pthread_mutex_lock(&e->mu);
            e->stats.prompt_tokens += (uint64_t)r->n_prompt;
            e->stats.cached_tokens += (uint64_t)n_cached;
            pthread_mutex_unlock(&e->mu);
            /* the whole prompt came from the cache with its logits: the
             * first token needs no forward pass */
            if (n_cached == r->n_prompt && !r->emb) {
                rw_engine__seq_prompt_done(e, r);
                first_output(e, r);
            }
        }

        /* speculative requests draft (batched draft passes) before the target pass */
        int n_spec = 0;
        for (int i = 0; i < n_step; i++)
            if (!step[i]->finished && step[i]->spec_live) spec_req[n_spec++] = step[i];
        rw_engine__spec_draft(e, spec_req, n_spec);

        /* the batch: every decoding sequence's last token, then prompt chunks */
        int n_items = 0;
        int64_t budget = e->cfg.prefill_chunk, n_tok = 0, n_prefill = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (int i = 0; i < n_step; i++) {
                rw_engine__req *r = step[i];
                if (r->finished || !r->seq) continue; /* cancelled ones leave at the next collect; waiting ones
                                                           (disk tier) join later */
                bool decoding = r->n_in_seq >= r->n_prompt;
                if (decoding != (pass == 0)) continue;
                int64_t n = r->n_tokens - r->n_in_seq;
                if (!decoding) {
                    if (budget == 0) continue;
                    if (n > budget) n = budget;
                    if (r->plp && !(n = rw_engine__plp_rows(e, r, n))) { /* its rows' logits buffer */
                        rw_engine__output_error(r, "out of memory");
                        continue;
                    }
                    budget -= n;
                    n_prefill += n;
                }
                if (decoding && r->spec_live) { /* last + drafts, every row */
                    items[n_items] = rw_spec_seq_verify_item(r->spec);
                    batch_req[n_items++] = r;
                    n_tok += items[n_items - 1].n;
                    continue;
                }
                bool last = r->n_in_seq + n == r->n_tokens;
                items[n_items] = (rw_batch_item){.seq = r->seq,
                                                 .tokens = r->tokens + r->n_in_seq,
                                                 .n = n,
                                                 .logits = last ? r->logits : NULL};
                if (r->emb) rw_engine__embed_item(r, &items[n_items]); /* hidden rows instead of sampling */
                if (r->plp && !decoding) rw_engine__plp_item(r, &items[n_items]); /* every row's logits */
                batch_req[n_items++] = r;
                n_tok += n;
            }
        }
        if (n_items > 0) {
            prefetch_job pj = {sc->pre, 0};
            for (int i = 0; i < n_items; i++) {
                rw_engine__req *r = batch_req[i];
                if (r->cons && items[i].logits && !r->emb && !(r->spec_live && r->n_in_seq >= r->n_prompt) &&
                    rw_constraint_mask_pending(r->cons))
                    pj.reqs[pj.n++] = r;
            }
            pthread_t pre_thread; /* without it (cannot start one): the masks come after the pass, as ever */
            const bool pre_started = pj.n > 0 && pthread_create(&pre_thread, NULL, prefetch_main, &pj) == 0;
            rw_error err = {0};
            rw_status st = rw_model_forward_batch(e->m, items, n_items, e->pool, &err);
            if (pre_started) pthread_join(pre_thread, NULL);
            if (st && !e->lost_logged && rw_model_weights_lost(e->m)) { /* said once */
                e->lost_logged = true;
                rw_log(RW_LOG_ERROR, "engine: %s", err.msg);
            }
            size_t kv_bytes = 0;
            for (int i = 0; i < n_items; i++) {
                rw_engine__req *r = batch_req[i];
                if (st) {
                    rw_engine__output_error(r, err.msg);
                    continue;
                }
                if (r->spec_live && r->n_in_seq >= r->n_prompt) {
                    rw_engine__spec_output(e, r);
                    continue;
                }
                const int64_t from = r->n_in_seq;
                r->n_in_seq += items[i].n;
                if (r->plp && from < r->n_prompt) rw_engine__plp_take(e, r, &items[i], from);
                /* the row after the whole prompt: the prefix cache keeps a copy */
                if (r->n_in_seq == r->n_prompt) rw_engine__seq_prompt_done(e, r);
                if (r->emb) { /* pools; ends at the prompt's end */
                    rw_engine__embed_rows(r, &items[i]);
                    continue;
                }
                if (!items[i].logits || r->n_in_seq < r->n_prompt) continue;
                if (from < r->n_prompt) first_output(e, r);
                else if (rw_engine__output_token(e, r) != RW_FINISH_NONE) r->finished = true;
            }
            for (int i = 0; i < n_step; i++)
                if (step[i]->seq) { /* every layer's state, the draft's too */
                    kv_bytes += rw_model_seq_bytes(step[i]->seq);
                    if (step[i]->spec) kv_bytes += rw_spec_seq_bytes(step[i]->spec);
                }
            pthread_mutex_lock(&e->mu);
            e->stats.steps++;
            e->stats.step_tokens += (uint64_t)n_tok;
            e->stats.prefill_tokens += (uint64_t)n_prefill;
            e->stats.kv_bytes = kv_bytes;
            e->state_stale = false;
            rw_engine__hist_observe(&e->stats.batch_size, n_items);
            for (int i = 0; i < n_step; i++) rw_engine__slot_progress(e, step[i]);
        } else {
            pthread_mutex_lock(&e->mu);
            /* nothing to compute: only requests waiting for the disk tier */
            if (n_waiting && !e->io_ready && !e->stopping) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 50 * 1000 * 1000; /* a safety net: io_notify wakes it */
                if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
                pthread_cond_timedwait(&e->wake, &e->mu, &ts);
            }
            e->io_ready = false;
        }
        /* finished requests are counted here, under the lock; then their
         * sequences go to the cache, and only then their final events:
         * whoever reads such an event and then the statistics or the cache
         * finds the request in both. They are still running, so a
         * rw_engine_cancel_id waits for this. */
        int n_fin = 0;
        for (int i = 0; i < n_step; i++)
            if (step[i]->finished) e->stats.requests_finished++, n_fin++;
        if (n_fin) {
            pthread_mutex_unlock(&e->mu);
            for (int i = 0; i < n_step; i++)
                if (step[i]->finished) {
                    release_seq(e, step[i]);
                    rw_engine__req_flush(step[i]);
                }
            pthread_mutex_lock(&e->mu);
        }
        return true;
    }
}

/* Idle memory back to the system: the state pool's free buffers and, with
 * glibc, the heap's free pages (main.c keeps up to 1 GiB of free heap top
 * for speed under load; idle, that is only resident memory). */
void rw_engine__trim_memory(rw_engine *e) {
    size_t pool = rw_state_pool_trim();
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    pthread_mutex_lock(&e->mu);
    e->stats.idle_trims++;
    e->stats.trimmed_bytes += pool;
    pthread_mutex_unlock(&e->mu);
}

void *rw_engine__scheduler_main(void *arg) {
    rw_engine *e = arg;
    rw_engine__scratch *sc = rw_engine__scratch_new(e->cfg.max_running);
    if (!sc) {
        /* cannot run: fail every request as it comes */
        pthread_mutex_lock(&e->mu);
        while (!e->stopping) {
            while (e->queue_head) {
                rw_engine__req *r = e->queue_head;
                e->queue_head = r->next;
                e->n_queued--;
                pthread_mutex_unlock(&e->mu);
                rw_engine__output_error(r, "out of memory in the scheduler");
                rw_engine__req_free(r);
                pthread_mutex_lock(&e->mu);
            }
            e->queue_tail = NULL;
            pthread_cond_wait(&e->wake, &e->mu);
        }
        pthread_mutex_unlock(&e->mu);
        return NULL;
    }
    pthread_mutex_lock(&e->mu);
    bool worked = false; /* steps ran since the last trim */
    for (;;) {
        if (rw_engine__step_locked(e, sc)) {
            worked = true;
            continue;
        }
        if (e->stopping) break;
        if (!worked) {
            pthread_cond_wait(&e->wake, &e->mu);
            continue;
        }
        /* idle after work: once nothing has come for IDLE_TRIM_SECONDS, the
         * memory the load used beyond what is kept (the prefix cache, the
         * weights) goes back to the system */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += IDLE_TRIM_SECONDS;
        if (pthread_cond_timedwait(&e->wake, &e->mu, &ts) != ETIMEDOUT || e->queue_head || e->n_running) continue;
        worked = false;
        pthread_mutex_unlock(&e->mu);
        rw_engine__trim_memory(e);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    rw_engine__scratch_free(sc);
    return NULL;
}
