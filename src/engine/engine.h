/* engine.h - a thread-safe generation engine with continuous batching.
 *
 * The engine owns a scheduler thread that runs every forward pass of one
 * model. Requests (prompt token ids + sampling parameters) are submitted from
 * any thread; each gets its results through a callback. Every scheduler step
 * gathers the next token of every running sequence plus a chunk of pending
 * prompt tokens (at most prefill_chunk in all) and runs them through
 * rw_model_forward_batch in one call. New requests join between steps;
 * finished or cancelled ones leave at once and their sequence is freed.
 *
 * Reproducibility: each request samples with its own generator seeded from
 * its own seed, and a token's logits do not depend on the batch it was
 * computed in (model.h), so a request with a given seed produces the same
 * tokens whatever else the engine is doing; greedy (temperature 0) output is
 * bitwise that of `rewind generate` with the same KV type.
 *
 * Threads: the callback runs on the scheduler thread, never while an engine
 * lock is held; it must be quick and must not call back into the engine.
 * After rw_engine_cancel_id returns, the callback of that request is never
 * called again. Every request that is not cancelled gets exactly one final
 * event (done = true).
 */
#ifndef RW_ENGINE_ENGINE_H
#define RW_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "cache/kv.h"
#include "pcache/pcache.h"
#include "sampler/sampler.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

typedef struct rw_engine rw_engine;

typedef struct {
    int n_threads;        /* threads of the forward pass (0 = physical cores) */
    int max_running;      /* sequences generating at the same time (--parallel), >= 1 */
    int max_queued;       /* requests waiting for a slot beyond max_running; more are refused (RW_ERR_BUSY) */
    int64_t n_ctx;        /* positions per sequence (prompt + generated), >= 1 */
    int64_t prefill_chunk; /* prompt tokens per scheduler step, over all sequences, >= 1 */
    rw_kv_type kv_type;
    /* The prefix cache (pcache/pcache.h): cache_bytes = 0 turns it
     * off; cache_dir (may be NULL) adds the disk tier, cache_dir_bytes big. */
    size_t cache_bytes;
    const char *cache_dir;
    size_t cache_dir_bytes;
    rw_pcache_write_mode cache_dir_write; /* through (default): entries reach the folder cache_write_delay seconds
                                             after their request ends; evict: when evicted from memory */
    double cache_write_delay;
    double cache_flush_seconds; /* rw_engine_free writes pending entries for at most this long (0 = 10) */
    /* Admission by bytes: a queued request is admitted only while the
     * running sequences' state (KV, recurrent, draft) is under
     * max_state_bytes, one at a time (its state is measured before the
     * next), and always when nothing runs. A threshold, not a hard cap: the
     * requests admitted grow by their own length. 0 = no bound. */
    size_t max_state_bytes;
    /* Grammar work budgets (grammar/grammar.h's work units) of a request
     * with a grammar: per token mask and over the whole request. A grammar
     * whose masks near its start do not fit is refused by rw_engine_submit
     * (RW_ERR_INVALID_ARG); a mask that does not fit later ends the output
     * with RW_FINISH_ERROR naming the budget. 0 = the defaults
     * (RW_GRAMMAR_MASK_BUDGET, RW_GRAMMAR_REQUEST_BUDGET), < 0 = no bound. */
    int64_t grammar_mask_budget, grammar_request_budget;
    /* Recurrent-state checkpoints each sequence keeps (hybrid models; a
     * checkpoint holds every recurrent layer's state, 19 MiB at
     * Qwen3.5-0.8B, 48 MiB at 4B), as a count: the two newest (speculative
     * decoding and short rewinds need them) first, then message marks and
     * the prompt's end, newest first, then the others
     * (models/model.h). 0 = the library's default retention (up to 256 MiB
     * a sequence: every 64th position over the last 256 and every 1024th
     * besides), the default: a count bounds the memory, but a later prompt
     * that diverges away from a mark (the same document with another
     * question in one message, a completion prompt) then recomputes from far
     * back (docs/prefix-cache.md has the measurement). */
    int max_checkpoints;
#define RW_ENGINE_CHECKPOINTS 0 /* rewind serve's and the public API's default */
    /* Keep one 64 MiB slab of state memory faulted in ahead of need
     * (cache/state.h), so that a growing prefix cache's page faults fall
     * outside requests. Off by default: it costs 64 MiB more resident, and
     * pays only on machines where fresh memory is slow (a virtual machine
     * measured 0.48 GB/s for first touch, about a quarter of the time of a
     * short turn after a long cached prefix; another 2-10 GB/s, where it
     * made no measurable difference). */
    bool prefault_states;
    /* Speculative decoding (engine/spec.h); draft = NULL turns it off. The
     * draft model (must outlive the engine, which runs all its forward
     * passes) proposes up to draft_max tokens per decoding sequence and step
     * (the draft passes batched across sequences), and the step's one target
     * pass verifies them with every other sequence's rows. Greedy output is
     * bitwise what it is without a draft, sampled output identically
     * distributed. draft_tok is the draft's vocabulary, required with a
     * draft and only read by rw_engine_new, which refuses one that differs
     * from tok's (rw_spec_check_vocab). */
    rw_model *draft;
    const rw_tokenizer *draft_tok;
    int draft_max;     /* 1..RW_SPEC_MAX_K; 0 = 4 */
    bool draft_fixed;  /* always draft_max (within the budget): no adaptive rule */
    float draft_cost;  /* one draft pass / one target pass, for the adaptive rule (e.g. the ratio of the
                          files' sizes); <= 0: 0.1 */
    /* No scheduler thread: the embedder runs every step on its own thread
     * with rw_engine_step (callbacks then run inside that call), and
     * rw_engine_cancel_id of a running request returns at once (it leaves
     * at the next step without another event). */
    bool manual;
    /* Draft sources besides (or instead of) a draft model (engine/spec.h):
     * RW_SPEC_MTP (the model's MTP block; rw_engine_new enables it, so no
     * sequence of m may exist yet; not with a draft model), RW_SPEC_NGRAM
     * (prompt lookup, ngram_n / ngram_min_hits, 0 = defaults); 0 = none.
     * catch_up_cost: one token the MTP block catches up on / a decode step
     * (<= 0: a quarter of draft_cost). */
    unsigned spec_sources;
    int ngram_n, ngram_min_hits;
    float catch_up_cost;
} rw_engine_config;

/* The stop strings of one request together, in bytes (each request builds an
 * automaton of them: about 21 bytes of memory per byte). */
#define RW_MAX_STOP_BYTES 65536

/* Sampling and stopping. Strings and the logit bias are copied by
 * rw_engine_submit. */
typedef struct {
    rw_sampler_params sampling; /* sampler.h; start from rw_sampler_params_default() */
    int64_t max_tokens;         /* >= 0 (0: the prompt is computed, nothing generated: its prompt logprobs,
                                   the prefix cache); prompt + max_tokens <= n_ctx */
    const char *const *stop;    /* n_stop stop strings (non-empty), or NULL */
    int n_stop;
    bool ignore_eos;            /* do not stop at end-of-generation tokens */
    const int64_t *marks;       /* n_marks prompt positions to keep exact restore points at (chat message
                                   boundaries: the prefix cache can then reuse a conversation up to any of them) */
    int n_marks;
    int n_logprobs;             /* -1: none; 0..RW_MAX_TOP_LOGPROBS: each token's logprob and that many
                                   alternatives (RW_LOGPROBS_RAW: the model's distribution; under a grammar,
                                   the model's renormalised over the tokens the grammar allows) */
    /* GBNF text (grammar/grammar.h) the output must match, or NULL: compiled by rw_engine_submit
     * (RW_ERR_INVALID_ARG with the compiler's message when it does not compile). The mask comes
     * before the sampler chain; end-of-generation tokens are allowed exactly when the grammar can
     * end and then end the request even with ignore_eos; the request ends (stop) when nothing may
     * follow; max_tokens still cuts it (finish length). engine/constraint.h has the details. */
    const char *grammar;
    /* With grammar: the rule it starts from, NULL: "root" (a format that
     * wraps a request's grammar in its own markup adds a rule that ends in
     * the request's root). */
    const char *grammar_root;
    /* With grammar: the text after which it holds (a reasoning block's close,
     * e.g. "</think>"), or NULL for the whole output. Until the output has
     * written it, anything but end-of-generation may come (constraint.h). */
    const char *grammar_after;
    /* The output's text holds control tokens as their text (a format whose
     * markers are control tokens, as harmony's <|channel|>), else they are
     * dropped from it. */
    bool render_special;
    /* Each prompt token's log-probability given the tokens before it (and
     * n_prompt_top alternatives, 0..RW_MAX_TOP_LOGPROBS), from the model's
     * raw distribution, in the first event after the prompt is computed
     * (rw_token_event's prompt_logprobs): what scoring a text needs (the
     * completions API's echo with logprobs). Such a request computes its
     * whole prompt (the prefix cache holds no logits for a prefix it would
     * restore), in chunks that keep every row's logits; the results are
     * bitwise those the same tokens get when generated. */
    bool prompt_logprobs;
    int n_prompt_top;
} rw_gen_params;

/* How a request ended: the public rw_done_reason (include/rewind.h), under
 * the engine's names. */
typedef rw_done_reason rw_finish_reason;
#define RW_FINISH_NONE RW_DONE_NONE     /* not finished */
#define RW_FINISH_STOP RW_DONE_STOP     /* end-of-generation token or stop string */
#define RW_FINISH_LENGTH RW_DONE_LENGTH /* max_tokens or the context reached */
#define RW_FINISH_ERROR RW_DONE_ERROR   /* the forward pass failed: error says why */

/* One event of a request: the public rw_token_event (include/rewind.h), so
 * rw_engine_submit_tokens hands the embedder's callback to the engine as
 * it is. The engine sets its size. */
typedef rw_token_event rw_gen_event;

typedef void (*rw_gen_callback)(void *user, const rw_gen_event *ev);

/* Creates the engine and starts its scheduler thread. m and tok must outlive
 * it; the engine runs every forward pass of m from now on (no one else may).
 * The caller owns *out and frees it with rw_engine_free. */
rw_status rw_engine_new(rw_model *m, const rw_tokenizer *tok, const rw_engine_config *cfg, rw_engine **out,
                        rw_error *err);
/* Stops the scheduler; requests still queued or running are dropped without
 * a final event. Then the prefix cache writes what its disk tier has
 * pending (at most cache_flush_seconds). No-op on NULL. */
void rw_engine_free(rw_engine *e);

const rw_engine_config *rw_engine_get_config(const rw_engine *e);
rw_model *rw_engine_get_model(const rw_engine *e); /* the model it runs */

/* cfg.manual only: retires finished requests, admits queued ones and runs
 * one scheduler step (a forward pass over every running sequence and the
 * next prompt chunk). Returns the requests still running or queued (0:
 * idle), or -1 (err set) without cfg.manual. Not concurrently with itself. */
int rw_engine_step(rw_engine *e, rw_error *err);

/* Queues a request. The prompt is copied. *id identifies it for
 * rw_engine_cancel_id. Errors: RW_ERR_CONTEXT (prompt + max_tokens > n_ctx, the
 * message has the numbers), RW_ERR_INVALID_ARG (bad ids or parameters),
 * RW_ERR_BUSY (max_running + max_queued requests already in). */
rw_status rw_engine_submit(rw_engine *e, const int32_t *prompt, int64_t n_prompt, const rw_gen_params *p,
                           rw_gen_callback cb, void *user, uint64_t *id, rw_error *err);

/* ---- embeddings (submit.c, embed.c) ----
 *
 * An embedding request runs its prompt through the model like a generation
 * request (in the same batches, with the same chunking and prefix cache) and
 * ends when the last prompt token is computed: instead of sampling, it
 * returns the final-norm hidden state (output_norm applied, before the
 * output head) pooled over the prompt, and optionally a few logits of the
 * last position (a yes/no reranker's). A token's hidden state does not
 * depend on the batch or the split, so neither does the result: the same
 * prompt embedded alone, batched or after a cached prefix is bitwise equal.
 * Only last-token pooling reuses cached prefixes (the others need every
 * token's hidden state, which the cache does not keep); every embedding
 * request leaves its sequence to the cache as a generation does. */

/* The numbering of GGUF's <arch>.pooling_type. */
typedef enum {
    RW_POOL_NONE = 0, /* no pooling: every token's hidden state */
    RW_POOL_MEAN = 1, /* the mean over the prompt's tokens */
    RW_POOL_CLS = 2,  /* the first token's */
    RW_POOL_LAST = 3, /* the last token's */
} rw_pool_kind;

typedef struct {
    rw_pool_kind pooling;
    const int32_t *logit_ids; /* n_logit_ids token ids whose logits after the last position come back (copied) */
    int n_logit_ids;
} rw_embed_params;

/* The one event of an embedding request: the public rw_embed_event
 * (include/rewind.h); the engine sets its size. */

typedef void (*rw_embed_callback)(void *user, const rw_embed_event *ev);

/* Queues an embedding request; as rw_engine_submit otherwise (the same
 * callback rules and cancelling by *id). Every request not cancelled gets
 * exactly one event. Errors: RW_ERR_CONTEXT (prompt > n_ctx),
 * RW_ERR_INVALID_ARG (bad ids or parameters), RW_ERR_BUSY. */
rw_status rw_engine_submit_embed(rw_engine *e, const int32_t *prompt, int64_t n_prompt, const rw_embed_params *p,
                                 rw_embed_callback cb, void *user, uint64_t *id, rw_error *err);

/* Cancels a request; frees its sequence at the latest at the end of the
 * current step and returns only then. No-op for an unknown or finished id. */
void rw_engine_cancel_id(rw_engine *e, uint64_t id);

/* ---- slots (engine_slots.c) ----
 *
 * A slot is one of the max_running places a request runs in (llama-server's
 * slots): a request admitted takes the lowest free one, and when it ends its
 * sequence goes to the prefix cache, which the slot then "holds": the
 * tokens of that sequence (so /slots can tell what a later request sharing
 * them will reuse). Saving a slot writes the prefix cache's exact state for
 * those tokens to a state file (models/seq_file.c's format, the one
 * rw_seq_save writes); restoring one loads such a file into the prefix
 * cache, so the next request whose prompt shares its tokens starts from it,
 * with the output bitwise what it is without it. */

/* rw_engine_slot is public (include/rewind.h). */

/* A snapshot of the slots: out[i] for slot i < max_running (returned);
 * head (may be NULL) gets the first max_head tokens each slot holds (a busy
 * one: its prompt's), n_head[i] how many. */
int rw_engine_slots(rw_engine *e, rw_engine_slot *out, int32_t *head, int max_head, int64_t *n_head);

/* Writes the state slot holds to path: the longest prefix of its tokens the
 * prefix cache restores exactly. *n_saved: tokens written, *n_bytes: the
 * file's size. Runs on the scheduler between steps; the caller waits.
 * Errors: RW_ERR_RANGE (no such slot), RW_ERR_BUSY (a request runs in it),
 * RW_ERR_NOT_FOUND (it holds nothing the cache still has), RW_ERR_IO,
 * RW_ERR_UNSUPPORTED (a manual engine, or no prefix cache). */
rw_status rw_engine_slot_save(rw_engine *e, int slot, const char *path, int64_t *n_saved, size_t *n_bytes,
                              rw_error *err);
/* Loads a state file (of this model and KV type, fully checked: a corrupt
 * file or one longer than n_ctx is RW_ERR_FORMAT, another model's or KV
 * type's RW_ERR_INVALID_ARG, a missing one RW_ERR_IO; any of them changes
 * nothing) into the prefix cache; the slot then holds its tokens.
 * *n_restored: its tokens, *n_bytes: the file's size. Other errors as
 * rw_engine_slot_save's. */
rw_status rw_engine_slot_restore(rw_engine *e, int slot, const char *path, int64_t *n_restored, size_t *n_bytes,
                                 rw_error *err);
/* The slot forgets what it holds (*n_erased tokens); the prefix cache's
 * entries, shared by every slot, leave by its own eviction. */
rw_status rw_engine_slot_erase(rw_engine *e, int slot, int64_t *n_erased, rw_error *err);

/* rw_histogram and rw_engine_stats (the full statistics) are public
 * (include/rewind.h); rw_engine_stats_full is their sized public form. */

void rw_engine_get_stats(rw_engine *e, rw_engine_stats *out);

#endif
