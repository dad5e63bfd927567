/* engine_int.h - the engine's private state and what its files share.
 *
 * The files call one another downwards only (scripts/check_layers.sh
 * checks it on the objects): engine.c (life cycle, cancel, statistics) ->
 * scheduler.c (the steps) -> engine_seq.c (a request's sequence) ->
 * engine_spec.c (speculative decoding) -> output.c (tokens to events) ->
 * request.c (clock, final event, free) -> embed.c (an embedding request's
 * state), prompt_lp.c (a request's prompt logprobs); submit.c makes
 * requests (-> request.c, embed.c, prompt_lp.c). Below them all:
 * engine_slots.c, histogram.c, stop_match.c, constraint.c, spec.c. */
#ifndef RW_ENGINE_ENGINE_INT_H
#define RW_ENGINE_ENGINE_INT_H

#include <pthread.h>

#include "base/threadpool.h"
#include "engine/constraint.h"
#include "engine/engine.h"
#include "engine/spec.h"

/* stop_match.c: a request's stop strings as one automaton (Aho-Corasick). */
typedef struct rw_engine__stopm rw_engine__stopm;
/* NULL when out of memory. The strings must be non-empty. */
rw_engine__stopm *rw_engine__stopm_new(const char *const *stops, int n);
void rw_engine__stopm_free(rw_engine__stopm *m);
/* Feeds n bytes of text from *state (0 = nothing fed yet) and updates it.
 * Returns the earliest start (base + offset in text) of a stop string that
 * ends inside these bytes, or -1. A stop string may start before text, up
 * to rw_engine__stopm_depth(*state) bytes: base must be at least that. Amortized
 * O(n). */
long rw_engine__stopm_feed(const rw_engine__stopm *m, int32_t *state, const char *text, size_t n, size_t base);
/* Length of the longest tail of the text fed that is a prefix of a stop
 * string (a whole one only right after a match). 0 for m == NULL. */
size_t rw_engine__stopm_depth(const rw_engine__stopm *m, int32_t state);

/* One request. Owned by the engine from rw_engine_submit until it is freed
 * by the scheduler (finished or cancelled while running), by rw_engine_cancel_id
 * (cancelled while queued) or by rw_engine_free. */
typedef struct rw_engine__req {
    uint64_t id;
    struct rw_engine__req *next; /* queue link */
    rw_gen_params p;      /* p.stop points to stop[] below */
    char **stop;          /* owned copies of the stop strings */
    rw_engine__stopm *stopm;     /* the stop strings' automaton; owned; NULL without stop strings */
    int32_t stop_state;   /* its state after the generated text */
    int64_t *marks;       /* owned copy of p.marks */
    rw_gen_callback cb;
    void *user;
    struct rw_engine__embed *emb; /* an embedding request's own state (embed.c); owned; NULL for generation */
    struct rw_engine__plp *plp;   /* its prompt logprobs (prompt_lp.c); owned; NULL unless asked */
    int slot;              /* its slot + 1 while running (engine_slots.c), 0 before admission */

    int32_t *tokens;   /* prompt then generated tokens; owned */
    int64_t n_prompt;
    int64_t n_tokens;
    int64_t cap;
    rw_model_seq *seq; /* NULL until admitted; owned (see rw_engine__seq_release) */
    int64_t n_cached;  /* prompt tokens already in seq when it was obtained */
    int64_t n_cached_disk; /* of those, from the prefix cache's disk tier */
    int64_t n_in_seq;  /* tokens of tokens[] the sequence holds (its length) */
    float *logits;     /* [n_vocab], the last computed row; owned */
    float *prompt_logits; /* [n_vocab], the row after the prompt once computed (for the prefix cache); owned */

    rw_sampler *sampler; /* owned */
    rw_constraint *cons; /* owned; NULL without a grammar */
    float *mlogits;      /* [n_vocab] the row masked by cons, sampled from; owned (with cons) */
    rw_spec_seq *spec;   /* owned; NULL without a draft. Borrows seq and sampler */
    int64_t spec_ngram_seen[2]; /* spec's n-gram drafted and accepted counts already in the engine's stats */
    bool spec_live;      /* spec started: the request decodes speculatively */
    const rw_tokenizer *tok; /* the engine's (rw_engine__output_drafts_end reads it) */
    rw_detok_stream detok;
    char *held; /* generated text not yet sent (a possible stop-string start); owned */
    size_t held_len, held_cap;

    double t_submit, t_last; /* monotonic seconds */
    int64_t n_generated;
    rw_pcache_wait rw_pcache__wait; /* the prefix cache's disk tier getting ready for this prompt (scheduler only) */
    bool cancelled; /* set under the engine lock by rw_engine_cancel_id */
    bool finished;  /* final event made (scheduler thread only) */
    /* The final event waits here until the step's end: the request is
     * counted and its sequence is in the prefix cache before whoever reads
     * that event can look at either (rw_engine__req_flush). */
    bool final_pending;
    rw_gen_event final_ev; /* its pointers lead to the fields below and to held */
    int32_t final_tok;
    float final_lp;
    rw_token_logprob final_top[RW_MAX_TOP_LOGPROBS];
    char final_error[256];
} rw_engine__req;

struct rw_engine {
    rw_model *m;
    const rw_tokenizer *tok;
    rw_engine_config cfg;
    int64_t n_vocab;
    rw_threadpool *pool;
    rw_pcache *pcache; /* owned; NULL when the prefix cache is off */
    rw_spec_params spec; /* with cfg.draft */
    /* the vocabulary trie for grammars, built at the first request with one
     * (gvocab_mu guards the building; read-only afterwards); owned */
    rw_grammar_vocab *gvocab;
    pthread_mutex_t gvocab_mu;
    /* for outputs that render control tokens (render_special): the tries
     * that also hold the control tokens a grammar names (harmony's markers),
     * one per set, built when first asked for and kept until rw_engine_free
     * (constraints borrow them); at most ENG_CTL_VOCABS sets, beyond that
     * the plain trie. All under gvocab_mu. */
#define ENG_CTL_VOCABS 8
    struct rw_engine__ctl_vocab {
        int32_t ids[16];
        int n;
        rw_grammar_vocab *v; /* owned */
    } ctl_vocab[ENG_CTL_VOCABS];
    int n_ctl_vocab;
    int32_t *ctl_ids; /* the vocabulary's control tokens that do not end a generation (owned) */
    int n_ctl_ids;    /* -1 before they are listed */
    char (*ctl_text)[64]; /* their texts, NUL-terminated ("" when longer), listed with them; owned */

    pthread_t thread;         /* not started with cfg.manual */
    struct rw_engine__scratch *manual_sc; /* cfg.manual: rw_engine_step's scratch, owned */
    pthread_mutex_t mu;
    pthread_cond_t wake;      /* the scheduler waits for work on it */
    pthread_cond_t step_done; /* rw_engine_cancel_id waits on it for a running request to leave */
    bool stopping;
    bool io_ready; /* under mu: the prefix cache's disk tier finished something a request may wait for */

    /* under mu */
    rw_engine__req *queue_head, *queue_tail;
    int n_queued;
    rw_engine__req **running; /* [max_running]; only the scheduler adds and removes */
    int n_running;
    int n_retiring;   /* left running, still being freed outside the lock (scheduler.c's retire) */
    bool state_stale; /* a request was admitted since stats.kv_bytes was measured */
    bool lost_logged; /* the model file's truncation was logged (scheduler thread) */
    struct rw_engine__slot *slots;       /* [max_running] (engine_slots.c); owned */
    struct rw_engine__slot_op *slot_ops; /* slot saves and restores waiting for the scheduler */
    uint64_t next_id;
    rw_engine_stats stats;
};

/* request.c: what every stage does with a request. */
double rw_engine__now(void); /* monotonic seconds */
/* Sends the final event made earlier, if any (once). Scheduler thread, or
 * whoever frees the request. */
void rw_engine__req_flush(rw_engine__req *r);
/* Sends a final event still waiting (rw_engine__req_flush), then frees r
 * and all it owns. NULL is fine. */
void rw_engine__req_free(rw_engine__req *r);

void *rw_engine__scheduler_main(void *arg);
/* Gives idle memory back to the system (scheduler.c). Without the lock. */
void rw_engine__trim_memory(rw_engine *e);

/* A step's scratch lists (scheduler.c); rw_engine__scratch_new(max_running). */
typedef struct rw_engine__scratch rw_engine__scratch;
rw_engine__scratch *rw_engine__scratch_new(int cap);
void rw_engine__scratch_free(rw_engine__scratch *sc); /* NULL is fine */
/* With e->mu held (released and taken again inside): retires finished and
 * cancelled requests, admits queued ones and, unless the engine is stopping
 * or nothing runs, runs one step. True when it stepped. The scheduler
 * thread's loop, and rw_engine_step's one iteration (cfg.manual). */
bool rw_engine__step_locked(rw_engine *e, rw_engine__scratch *sc);

/* engine_seq.c: the one place that gives a request its sequence, and takes
 * it back. rw_engine__seq_for_prompt returns a sequence whose first *n_cached
 * tokens are prompt[0..n_cached-1] (0 <= n_cached <= n; n_cached == n only
 * when the whole prompt was cached with its last logits, copied to logits,
 * so the first token can be sampled at once) and whose checkpoints will be
 * kept at marks; with a draft model it also makes the request's rw_spec_seq
 * (r->spec), its draft state from the same cache entry when there is one.
 * rw_engine__seq_release gets the sequence back (last_logits, may be NULL, are
 * those after its last token) with the request's draft sequence (may be
 * NULL) and keeps them in the prefix cache or frees them. */
rw_status rw_engine__seq_for_prompt(rw_engine *e, rw_engine__req *r, int64_t *n_cached, rw_error *err);
/* Called when r->logits first hold the row after the whole prompt: keeps a
 * copy for the prefix cache (the same prompt again then computes nothing). */
void rw_engine__seq_prompt_done(rw_engine *e, rw_engine__req *r);
void rw_engine__seq_release(rw_engine *e, rw_model_seq *seq, rw_model_seq *draft, const float *last_logits,
                     int64_t prompt_len, const float *prompt_logits);

/* output.c: samples the next token from r->logits, turns it into text and
 * an event (r->cb). Returns the finish reason (RW_FINISH_NONE to continue). */
rw_finish_reason rw_engine__output_token(rw_engine *e, rw_engine__req *r);
/* Same for a token already chosen and accepted into r->sampler (a
 * speculative step's output) from the logit row `row`. */
rw_finish_reason rw_engine__output_accepted(rw_engine *e, rw_engine__req *r, int32_t tok, const float *row);
/* True when the text held back may be the start of a stop string (the next
 * token could end the generation). */
bool rw_engine__output_stop_pending(const rw_engine__req *r);
/* spec.h's end check (rw_spec_end_fn) for request ctx: true when it would
 * end with drafts[n - 1] (end of generation, or a stop string completed),
 * computed on copies of its text state. */
bool rw_engine__output_drafts_end(void *ctx, const int32_t *drafts, int n);
/* The end of a request of max_tokens 0 once its prompt is computed: a
 * final event (length) without tokens. */
void rw_engine__output_prompt_only(rw_engine__req *r);
/* Makes the final event of a request that failed (sent by
 * rw_engine__req_flush). */
void rw_engine__output_error(rw_engine__req *r, const char *msg);

/* engine_spec.c: speculative decoding in the scheduler (engine.h). */
rw_status rw_engine__spec_new(rw_engine *e, rw_engine__req *r, rw_error *err); /* by rw_engine__seq_for_prompt; no-op without a draft */
void rw_engine__spec_start(rw_engine__req *r);                                 /* after the first token, if not finished */
/* Drafts for the decoding requests reqs[0..n) with spec_live (batched draft
 * passes); a request whose drafting failed gets its final error event. */
void rw_engine__spec_draft(rw_engine *e, rw_engine__req **reqs, int n);
/* After the verify pass: accepts, emits the tokens, fixes the request's
 * sequence position. */
void rw_engine__spec_output(rw_engine *e, rw_engine__req *r);

/* engine_slots.c: the slots (engine.h). Under the lock: a request admitted
 * takes a slot, one leaving gives it back with what its sequence held (the
 * scheduler's thread); progress after a step. Without the lock, on the
 * scheduler's thread: runs the slot operations waiting (takes the lock to
 * pick them up and to report them done). */
bool rw_engine__slots_new(rw_engine *e);
void rw_engine__slots_free(rw_engine *e);
void rw_engine__slot_take(rw_engine *e, rw_engine__req *r);
void rw_engine__slot_leave(rw_engine *e, rw_engine__req *r);
void rw_engine__slot_progress(rw_engine *e, rw_engine__req *r);
void rw_engine__slot_ops_run(rw_engine *e);

/* embed.c: an embedding request's state (engine.h). */
/* For a request of n_prompt tokens fed in chunks of at most chunk rows of
 * n_embd: p's pooling and logit ids (copied), the callback its one event
 * goes to. NULL when out of memory; freed by rw_engine__embed_free. */
struct rw_engine__embed *rw_engine__embed_new(const rw_embed_params *p, int n_embd, int64_t n_prompt,
                                             int64_t chunk, rw_embed_callback cb, void *user);
/* The request may start from a cached prefix: its pooling needs only the last token's hidden state. */
bool rw_engine__embed_uses_cache(const rw_engine__req *r);
/* Where the pass over item (the request's next n tokens) writes hidden rows. */
void rw_engine__embed_item(rw_engine__req *r, rw_batch_item *item);
/* After the pass: pools the rows of item (r->n_in_seq already counts them);
 * once the prompt is done, makes the final event (sent by
 * rw_engine__req_flush) and marks r finished. */
void rw_engine__embed_rows(rw_engine__req *r, const rw_batch_item *item);
/* Sends the final event made earlier (its result or r->final_ev's error). */
void rw_engine__embed_send(rw_engine__req *r);
void rw_engine__embed_free(struct rw_engine__embed *m);

/* prompt_lp.c: a request's prompt logprobs (rw_gen_params.prompt_logprobs). */
/* For n_prompt tokens with n_top alternatives each; NULL when out of
 * memory. Freed by rw_engine__plp_free. */
struct rw_engine__plp *rw_engine__plp_new(int64_t n_prompt, int n_top);
void rw_engine__plp_free(struct rw_engine__plp *p);
/* The prompt tokens of the next pass, at most n: as many rows as its
 * logits buffer holds (made on first use: up to 64 MiB, a scheduler
 * chunk, the prompt's rest; 0 when out of memory). */
int64_t rw_engine__plp_rows(rw_engine *e, rw_engine__req *r, int64_t n);
/* Where the pass over item (rows from the request's position) writes every row's logits. */
void rw_engine__plp_item(rw_engine__req *r, rw_batch_item *item);
/* After the pass over item, which started at prompt position `from`: each
 * row's next prompt token's logprob and alternatives; the row after the
 * prompt's last token into r->logits (and the rows buffer freed). */
void rw_engine__plp_take(rw_engine *e, rw_engine__req *r, const rw_batch_item *item, int64_t from);
/* Once the prompt is computed, the event fields (the first caller only:
 * false afterwards, and before). */
bool rw_engine__plp_event(rw_engine__req *r, rw_gen_event *ev);

/* histogram.c */
void rw_engine__hist_init(rw_histogram *h, const double *bounds, int n);
void rw_engine__hist_observe(rw_histogram *h, double v);

#endif
