/* spec.h - speculative decoding: a small draft model (or the target's own
 * MTP block, or an n-gram lookup in the context: RW_SPEC_MTP, RW_SPEC_NGRAM
 * below; docs/speculative-decoding.md) proposes tokens, the target model
 * checks them all in one forward pass. What follows is said of a draft
 * model; the MTP block drafts the same way from the target's own states,
 * n-gram drafts need no pass at all.
 *
 * One rw_spec_seq drives one generation. The caller owns the target sequence
 * and the target's sampler; the rw_spec_seq owns a draft sequence (same KV
 * type and context as the target's), a draft sampler and its buffers.
 *
 * State between steps: the target sequence has processed L tokens and
 * `last` (the newest generated token) is pending - not yet processed by
 * either model. The draft sequence has processed a prefix of the target's
 * tokens (it catches up lazily, in its first pass of the next step that
 * drafts). One step (rw_spec_step) with k drafts:
 *
 *   1. draft: k passes of the draft model (the first also feeds whatever
 *      target tokens the draft has not seen, then `last`), each proposing
 *      one token d_j - greedily (the draft sampler's greedy token) for a
 *      greedy request, otherwise drawn from the draft sampler's distribution
 *      q_j (a copy of the request's parameters with another seed), which is
 *      kept for the acceptance test;
 *   2. verify: ONE target pass over [last, d_0..d_{k-1}] with every logit
 *      row (k + 1 rows; row i predicts the token after d_{i-1});
 *   3. accept: rw_spec_verify (sampler.h) - greedy requests keep the longest
 *      prefix of drafts equal to the target's greedy tokens, sampled ones use
 *      rejection sampling, which keeps the target's distribution exactly -
 *      giving a accepted drafts and one target token (a + 1 tokens out);
 *   4. rewind: the target back to L + 1 + a (it keeps last, d_0..d_{a-1});
 *      the draft back to at most that (it keeps only accepted tokens: it is
 *      in lockstep with the target). Both are exact rewinds of positions
 *      appended in this step (models/seq.c: no matmul for the target).
 *
 * So a step emits 1..k+1 tokens, and row i of the verify pass is bitwise the
 * logits plain decoding computes for output token i (batch invariance,
 * model.h): greedy output with a draft is bitwise plain greedy output, tokens
 * and logits. k = 0 is plain decoding (one target pass of one token).
 *
 * How many drafts (the adaptive rule, rw_spec_seq_plan): the acceptance rate
 * alpha is estimated per sequence as A / (A + R), where A counts accepted
 * drafts and R the steps that ended in a rejection (the maximum-likelihood
 * estimate for independent acceptances), both decayed by 0.9 per drafting
 * step (prior A = 1.5, R = 0.5: alpha 0.75 with the weight of two steps,
 * so a useless draft is seen within two steps). A step with k drafts is
 * expected to emit
 * E(k) = 1 + alpha + ... + alpha^k tokens and to cost
 * C(k) = 1 + k * (verify_cost + draft_cost) plain decode steps (verify_cost:
 * extra cost of each verified token, as `rewind bench spec` measures it;
 * draft_cost: one draft pass relative to one target pass, e.g. the ratio of
 * the models' weight bytes, since a CPU decode step streams the weights).
 * The plan is the k in 0..k_max (and the budget) with the largest
 * E(k) / C(k), and 0 unless that beats plain decoding by 3%, or when the
 * draft's catch-up (the tokens it has not seen, the prompt at first, as a
 * prefill at a quarter of a decode step per token) would cost more than 2%
 * of the remaining budget. After
 * probe_every consecutive steps without drafting (16 at first), one step
 * drafts 1 token to re-measure (a probe; skipped when no more than
 * probe_every tokens remain to be generated); a probe after which drafting
 * still does not pay has failed and doubles probe_every, a successful one
 * resets it to 16; after 2 failed probes in a row the sequence stops
 * drafting for good. So a useless draft costs at most the draft's catch-up
 * over the tokens before the second failed probe (about 48 tokens of draft
 * passes) plus two 2-token verify passes: a few percent of a long
 * generation. tests/engine/test_spec_rule.c simulates the rule against that
 * cost model (default costs; prompts of 16-2000 tokens, 48-1000 generated,
 * acceptance 0-1): never more than 5% over plain decoding (worst 4.6%, a
 * useless draft on 48 tokens), and 0.48x plain at acceptance 1. With adaptive =
 * false the plan is always k_max (limited by the budget and the context).
 *
 * Threads: a step runs forward passes on both models; the model-level
 * serialisation of model.h applies. */
#ifndef RW_ENGINE_SPEC_H
#define RW_ENGINE_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "sampler/sampler.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

/* Most drafts per step (the target's verify pass is k + 1 <= 16 tokens,
 * the pattern models/seq.c rewinds without a matmul). */
#define RW_SPEC_MAX_K 15

/* Where drafts come from (rw_spec_params.sources; a draft model is a source
 * when rw_spec_seq_new gets one):
 *   RW_SPEC_MTP    the target's own MTP block (models/model.h; the model
 *                  must have it enabled before its sequences were made):
 *                  the first draft from (last, the trunk's hidden row of the
 *                  position before), then chained on its own output row.
 *                  Its KV lags the target and catches up in the first MTP
 *                  pass of a drafting step (the tokens the block has not
 *                  seen, as the draft model does); one draft token costs a
 *                  block and the output head.
 *   RW_SPEC_NGRAM  prompt lookup: the newest earlier occurrence of the last
 *                  ngram_n tokens of the history (prompt, generated tokens,
 *                  last) that occurred at least ngram_min_hits times,
 *                  followed by up to k tokens, is the draft (llama-server's
 *                  ngram-simple / ngram-map-k with min hits). Free; a
 *                  sampled request treats it as a one-hot draft
 *                  distribution (rejection sampling then keeps the target's
 *                  distribution).
 * With NGRAM and a model-based source (MTP or a draft model; not both), a
 * step takes the n-gram draft when it has all the planned k tokens (no draft
 * pass at all), else the model's (k tokens, so the longer). */
enum { RW_SPEC_MTP = 1u, RW_SPEC_NGRAM = 2u };

typedef struct {
    int32_t k_max;     /* 0..RW_SPEC_MAX_K */
    bool adaptive;     /* false: always k_max drafts */
    float draft_cost;  /* one draft pass / one target pass, >= 0 */
    float verify_cost; /* extra cost per verified token / one decode step, >= 0 */
    unsigned sources;  /* RW_SPEC_MTP | RW_SPEC_NGRAM (besides a draft model) */
    int32_t ngram_n;   /* n-gram length looked up, 1..64 (default 3) */
    int32_t ngram_min_hits; /* occurrences the n-gram needs, >= 1 (default 1) */
    /* the cost of one token the draft catches up on (tokens it has not
     * seen: the prompt, idle steps) / one decode step; 0: a quarter of
     * draft_cost (a draft model's prefill) */
    float catch_up_cost;
} rw_spec_params;

/* k_max 4, adaptive, draft_cost 0.1, verify_cost 0.25, no sources, ngram_n
 * 3, ngram_min_hits 1 (what `rewind bench
 * spec` measures on the 0.8B preset with 2 threads since the Q8_0 quad
 * kernels: a pass of k + 1 tokens costs about 1 + 0.25 k decode steps -
 * 1.27x, 1.40x, 2.08x, 2.99x at k = 1, 2, 4, 8). */
rw_spec_params rw_spec_params_default(void);
/* Sets p's adaptive-rule costs for its sources on target m: with
 * RW_SPEC_MTP the block's (models/model.h rw_model_mtp_costs); n-gram drafts
 * alone (draft_model false) cost nothing but their verification; with a
 * draft model its costs stay (the caller's: e.g. the files' size ratio). */
void rw_spec_params_set_costs(rw_spec_params *p, const rw_model *m, bool draft_model);

/* The adaptive rule on its own (what rw_spec_seq_plan and each step's end
 * use; described at the top of this file), so that it can be simulated
 * without models: tests/engine/test_spec_rule.c checks against a cost
 * model that drafting never costs more than 5% over plain decoding. */
typedef struct {
    double acc_a, acc_r; /* decayed accepted drafts / rejections */
    int32_t idle;        /* consecutive steps without drafts */
    int32_t probe_every; /* idle steps before a probe (doubles after a failed one) */
    int32_t failed;      /* consecutive failed probes; 2 stop drafting */
} rw_spec_rule;

void rw_spec_rule_init(rw_spec_rule *r); /* prior: 1.5 accepted, 0.5 rejections (alpha 0.75, weight of 2 steps) */

/* Drafts for the next step: 0..cap (cap > 0: k_max limited by the budget
 * and the context), with `budget` tokens still to generate and the draft
 * `behind` tokens behind the target (it catches up in its first pass; 0
 * when its catch-up would cost over 2% of the remaining budget). */
int32_t rw_spec_rule_plan(const rw_spec_rule *r, const rw_spec_params *p, int64_t cap, int64_t budget,
                          int64_t behind);

/* After a step that drafted k (as planned) and accepted `accepted` of them. */
void rw_spec_rule_update(rw_spec_rule *r, const rw_spec_params *p, int32_t k, int32_t accepted);

/* Checks that a draft can propose for the target: same n_vocab and the same
 * text for every token. RW_ERR_INVALID_ARG naming the first difference. */
rw_status rw_spec_check_vocab(const rw_tokenizer *target, const rw_tokenizer *draft, rw_error *err);

typedef struct rw_spec_seq rw_spec_seq;

/* A speculative decoder for the target sequence `target` (borrowed; must
 * outlive the result) with its sampler (borrowed) made from sp, drafting
 * with draft_model (borrowed; NULL: p->sources only) and p->sources. The
 * draft model's vocabulary must have the target's n_vocab
 * (rw_spec_check_vocab checks the texts); RW_SPEC_MTP needs the target's
 * model with its MTP block enabled, and no draft model. The caller frees
 * *out with rw_spec_seq_free. */
rw_status rw_spec_seq_new(const rw_model *draft_model, rw_model_seq *target, rw_sampler *sampler,
                          const rw_sampler_params *sp, const rw_spec_params *p, rw_spec_seq **out, rw_error *err);
void rw_spec_seq_free(rw_spec_seq *s); /* NULL is fine */

/* Starts generation: the caller ran the prompt through the target, sampled
 * the first token from its logits and accepted it into the sampler; `last`
 * is that token. (The draft processes the prompt in its first pass.) */
rw_status rw_spec_seq_start(rw_spec_seq *s, int32_t last, rw_error *err);

/* Where the output would end inside a draft: fn(ctx, drafts, n) is true
 * when the request ends with drafts[n - 1] (an end-of-generation token, or
 * the text of drafts[0..n-1] completes a stop string), given everything
 * emitted before them. Drafting stops there: the tokens after it could
 * never be sent. Without one (the default) drafts run to the plan's k. */
typedef bool (*rw_spec_end_fn)(void *ctx, const int32_t *drafts, int n);
void rw_spec_seq_set_end(rw_spec_seq *s, rw_spec_end_fn fn, void *ctx);

/* A constraint on the output (a grammar, engine/constraint.h):
 * fn(ctx, prefix, n, row) masks the logit row for the position after
 * everything emitted so far and then prefix[0..n), in place, and returns
 * false (row untouched) when prefix is not allowed or nothing may follow it.
 * With one set, each draft row is masked before its token is chosen (so the
 * drafts never break the constraint; drafting stops where nothing may
 * follow), and each verify row before rw_spec_verify, which then draws from
 * the constrained distribution - the same rows plain decoding masks, so
 * greedy output is still bitwise plain greedy output. rw_spec_seq_output
 * then gives the masked rows, rw_spec_seq_raw_logits the model's. */
typedef bool (*rw_spec_mask_fn)(void *ctx, const int32_t *prefix, int n, float *row);
rw_status rw_spec_seq_set_constraint(rw_spec_seq *s, rw_spec_mask_fn fn, void *ctx, rw_error *err);

/* Drafts the next step would make with at most budget >= 1 tokens out (the
 * adaptive rule above; also limited by the context: the target processes
 * k + 1 tokens). */
int32_t rw_spec_seq_plan(const rw_spec_seq *s, int64_t budget);

/* One step for n sequences of the same target and draft models (draft_model
 * NULL when none drafts with one): each plans
 * with its budget[i] >= 1 (tokens it may still emit), then the drafts of all
 * run batched (rw_model_forward_batch, one pass per draft position) and all
 * targets verify in ONE batched pass. Each sequence keeps what it accepted,
 * whatever the others did. On error the sequences are in a valid but
 * unspecified state (drop them). Equivalent to rw_spec_draft, one
 * rw_model_forward_batch of every rw_spec_seq_verify_item, then
 * rw_spec_seq_accept of each. */
rw_status rw_spec_step(rw_model *target_model, rw_model *draft_model, rw_spec_seq *const *seqs, const int64_t *budget,
                       int n, rw_threadpool *pool, rw_error *err);

/* The phases of a step, for a caller (the engine's scheduler) whose target
 * pass also carries other sequences' rows: rw_spec_draft plans and runs the
 * batched draft passes of n sequences; the caller then puts each sequence's
 * rw_spec_seq_verify_item (k + 1 tokens, every logit row) into one
 * rw_model_forward_batch of the target, with anything else it likes; then
 * rw_spec_seq_accept on each sequence checks the drafts and rewinds both
 * models (it fails if the verify pass did not run). */
rw_status rw_spec_draft(rw_model *draft_model, rw_spec_seq *const *seqs, const int64_t *budget, int n,
                        rw_threadpool *pool, rw_error *err);
rw_batch_item rw_spec_seq_verify_item(rw_spec_seq *s);
rw_status rw_spec_seq_accept(rw_spec_seq *s, rw_threadpool *pool, rw_error *err);

/* The draft sequence: rw_spec_seq_take_draft hands it to the caller (who
 * then owns it; the rw_spec_seq must not step any more), e.g. to keep it in
 * the prefix cache; rw_spec_seq_set_draft replaces it by one the caller
 * gives (taken in all cases; freed on error): it must be of the draft model
 * with the target's KV type, and its tokens a prefix of the target's
 * (RW_ERR_INVALID_ARG otherwise) - the draft catches up on the rest in its
 * next pass, so any such state is correct, a longer one only cheaper. */
rw_model_seq *rw_spec_seq_take_draft(rw_spec_seq *s);
rw_status rw_spec_seq_set_draft(rw_spec_seq *s, rw_model_seq *draft, rw_error *err);

/* The last step's output: returns n_out (1..k+1), *tokens = the tokens in
 * order, *logits = their target logit rows ([n_out][n_vocab], row i the
 * logits token i was chosen from). Valid until the next step. */
int32_t rw_spec_seq_output(const rw_spec_seq *s, const int32_t **tokens, const float **logits);

typedef struct {
    int64_t steps;    /* verify passes */
    int64_t drafted;  /* draft tokens proposed */
    int64_t accepted; /* draft tokens accepted */
    int64_t emitted;  /* tokens output by steps */
    int32_t last_k;   /* drafts of the last step */
    int64_t ngram_drafted, ngram_accepted; /* of those, n-gram drafts */
} rw_spec_stats;

/* The last step's target rows as the model computed them (before any
 * constraint), [n_out][n_vocab]; the same as rw_spec_seq_output's without a
 * constraint. */
const float *rw_spec_seq_raw_logits(const rw_spec_seq *s);

rw_spec_stats rw_spec_seq_stats(const rw_spec_seq *s);

/* Memory the draft sequence holds (0 once taken). */
size_t rw_spec_seq_bytes(const rw_spec_seq *s);

#endif
