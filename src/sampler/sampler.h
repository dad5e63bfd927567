/* sampler.h - picks the next token from a row of logits, one sampler per
 * request.
 *
 * The chain, in llama.cpp's default order (common/sampling.cpp; the samplers
 * llama.cpp has and we do not - DRY, top-n-sigma, typical, XTC, mirostat -
 * are absent):
 *
 *   logit bias -> penalties -> top-k -> top-p -> min-p -> temperature -> draw
 *
 *   bias         l[t] += bias for each (t, bias) entry (entries add up; -INFINITY bans).
 *   penalties    for each token t with count c > 0 among the accepted tokens
 *                of the window: first the repetition penalty (l /= r when
 *                l > 0, else l *= r), then OpenAI's
 *                l -= c * frequency_penalty + presence_penalty.
 *   top-k        keep the k highest logits (k <= 0: off).
 *   top-p        softmax over what is left; keep the smallest prefix, in
 *                decreasing order, whose probabilities sum to >= top_p and
 *                that has at least min_keep tokens (top_p >= 1: off; top_p =
 *                0 keeps max(1, min_keep) tokens). The sums are exact: each
 *                weight counts round(w * 2^32) units (w <= 1 relative to the
 *                top token), the prefix must reach ceil(top_p * all units).
 *   min-p        keep l >= max l + log(min_p), or the min_keep first when
 *                fewer pass (min_p <= 0: off).
 *   temperature  p = softmax(l / T) over what is left.
 *
 * Top-k/top-p/min-p see the logits before temperature, as in llama.cpp.
 * "Decreasing order" is a total order: higher logit first, ties to the lower
 * id, so what is kept never depends on a sort's whims. Softmax weights are
 * expf((l - max) * (1 / T)) in float (T = 1 for top-p), summed in double; NaN
 * logits count as -inf; when the largest logit is infinite, the tokens equal
 * to it share the mass equally (all -inf is uniform over what is left).
 *
 * Greedy (temperature <= 0): the highest logit after bias and penalties, ties
 * to the lowest id, exactly rw_argmax of those logits (rw_argmax of the raw
 * row when bias and penalties are off). The filters never remove the top
 * token, so they do not matter there.
 *
 * Reproducibility: the uniform number behind the token at position k (k =
 * tokens accepted so far) is a pure function of (seed, k): splitmix64 of
 * seed + (k + 1) * golden gamma, so a request's tokens depend only on its
 * seed, its parameters and its logits - not on other requests, threads, or
 * how often rw_sampler_sample was called - and rewinding the sampler rewinds
 * its generator too. There is no global state. (Across machines, libm's expf
 * may pick another code path - FMA or not - and could in principle differ in
 * a last bit; on one machine and build the tokens are fixed.)
 *
 * A sampler is used by one thread at a time (it has a scratch buffer). */
#ifndef RW_SAMPLER_SAMPLER_H
#define RW_SAMPLER_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

/* Index of the largest of n values (the lowest index among equal ones; NaN
 * never wins). n > 0. */
int32_t rw_argmax(const float *logits, int64_t n);

/* rw_logit_bias is public (include/rewind.h). */

/* Start from rw_sampler_params_default(): a zeroed struct means top_p = 0,
 * which keeps one token (as in llama.cpp and OpenAI). */
typedef struct {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off; in [0, 1] */
    float min_p;             /* <= 0: off; in [0, 1] */
    float presence_penalty;  /* 0: off; OpenAI's range is [-2, 2] */
    float frequency_penalty; /* 0: off */
    float repeat_penalty;    /* 1 or 0: off; llama.cpp's repeat penalty, > 0 */
    /* Which accepted tokens the penalties count: 0 = all of them (OpenAI:
     * the tokens generated so far in this request), n > 0 = the last n
     * (llama.cpp's repeat_last_n; llama-server also feeds it the prompt -
     * call rw_sampler_accept on the prompt tokens to get that). */
    int32_t penalty_last_n;
    int32_t min_keep; /* top-p and min-p keep at least this many (llama.cpp's min_keep; 0 or 1: one) */
    uint64_t seed;
    const rw_logit_bias *logit_bias; /* copied by rw_sampler_new; may be NULL */
    int32_t n_logit_bias;
} rw_sampler_params;

/* Greedy, every transformation off, seed 0. */
rw_sampler_params rw_sampler_params_default(void);

typedef struct rw_sampler rw_sampler;

/* A sampler for rows of n_vocab logits. Checks the parameters (finite
 * numbers in range, bias tokens < n_vocab). Allocates its scratch (24 bytes
 * per vocabulary entry, 28 with penalties: 4 MiB for a 151936-token
 * vocabulary) here, so sampling allocates nothing; accepting tokens grows the
 * token history geometrically. The caller frees *out with
 * rw_sampler_free. */
rw_status rw_sampler_new(const rw_sampler_params *params, int64_t n_vocab, rw_sampler **out, rw_error *err);
void rw_sampler_free(rw_sampler *s); /* NULL is fine */

/* The next token for a row of n_vocab logits. Does not change the sampler:
 * the same row gives the same token until a token is accepted. */
int32_t rw_sampler_sample(rw_sampler *s, const float *logits);

/* Records token as the next one of the request (penalty counts, and the
 * generator moves to the next position). ERR_INVALID_ARG for a token out of
 * range, ERR_NOMEM if the history cannot grow. */
rw_status rw_sampler_accept(rw_sampler *s, int32_t token, rw_error *err);

/* Tokens accepted so far. */
int64_t rw_sampler_n_accepted(const rw_sampler *s);

/* Forgets the accepted tokens after the first n_keep (n_keep <= accepted),
 * restoring the penalty counts and the generator position exactly. */
void rw_sampler_rewind(rw_sampler *s, int64_t n_keep);

/* ---- probabilities (speculative decoding builds on these) ---- */

/* p[n_vocab] = the distribution rw_sampler_sample draws from for this row,
 * after every transformation: 0 for removed tokens, the rest sums to 1
 * (within float rounding). Greedy: one-hot at the greedy token.
 * rw_sampler_sample(s, l) == rw_sampler_draw(s, p) bitwise. p must not
 * overlap logits. */
void rw_sampler_probs(rw_sampler *s, const float *logits, float *p);

/* A token drawn from the weights p[n_vocab] (>= 0, need not sum to 1;
 * negative and NaN weights count as 0) with the generator at the current
 * position: walks ids upward until the running double sum exceeds u * total.
 * All-zero weights give token 0. */
int32_t rw_sampler_draw(rw_sampler *s, const float *p);

/* One step of speculative rejection sampling (Leviathan et al. / Chen et
 * al.): the draft proposed token `draft` from its distribution q; the target
 * distribution is p (both n_vocab, e.g. from rw_sampler_probs). Accepts with
 * probability min(1, p[draft] / q[draft]) - u * q[draft] < p[draft] with u
 * from the generator's accept stream at the current position - and then
 * *token = draft; otherwise *token is drawn from norm(max(0, p - q)) with the
 * residual stream (from p if that is all zero). The resulting token is
 * distributed exactly as p. Returns whether the draft was accepted. Does not
 * accept the token into the sampler: call rw_sampler_accept, which also
 * moves the generator on. With a greedy target (p one-hot) this accepts
 * exactly when the draft equals the greedy token, and otherwise gives it. */
bool rw_spec_accept(rw_sampler *s, const float *p, const float *q, int32_t draft, int32_t *token);

/* Verifies k >= 0 drafted tokens with rejection sampling, keeping the
 * sampler's state right along the way (the penalties of position i count
 * drafts[0..i)). target_logits: k + 1 rows of n_vocab; row i is the target's
 * logits for the position after drafts[0..i) (what one verify pass gives).
 * q: k rows of n_vocab, the distribution each draft token was drawn from, or
 * NULL for a greedy draft (q one-hot at drafts[i]). Writes out[0..*n_out):
 * the accepted drafts, then one token of the target's - the residual draw at
 * the first rejection, or a sample of row k when all k were accepted - so
 * 1 <= *n_out <= k + 1, and accepts them all into s. For a greedy request
 * the tokens are exactly those of plain greedy decoding over the same rows;
 * for a sampled one, each token is distributed exactly as the target's
 * distribution at its position. ERR_INVALID_ARG for a draft token outside
 * the vocabulary; ERR_NOMEM from rw_sampler_accept (then s has accepted
 * out[0..*n_out) so far). */
rw_status rw_spec_verify(rw_sampler *s, const float *target_logits, const float *q, const int32_t *drafts, int32_t k,
                         int32_t *out, int32_t *n_out, rw_error *err);

/* ---- log-probabilities (OpenAI logprobs / top_logprobs) ---- */

/* RW_MAX_TOP_LOGPROBS and rw_token_logprob are public (include/rewind.h). */

typedef enum {
    /* llama-server's default (post_sampling_probs = false): log-softmax of the
     * model's raw logits, before bias, penalties, filters and temperature. */
    RW_LOGPROBS_RAW,
    /* llama-server's post_sampling_probs = true: log of rw_sampler_probs, the
     * distribution actually sampled from (-inf for removed tokens; removed
     * tokens are never listed among the alternatives). */
    RW_LOGPROBS_SAMPLED,
} rw_logprobs_mode;


/* *token_logprob = log-probability of token under the mode's distribution;
 * top[0..ret) = the min(n_top, RW_MAX_TOP_LOGPROBS) most likely tokens,
 * most likely first, ties to the lower id (fewer when fewer have nonzero
 * probability in SAMPLED mode). Call it before accepting the token (the
 * penalties depend on the history). */
int32_t rw_sampler_logprobs(rw_sampler *s, const float *logits, rw_logprobs_mode mode, int32_t token, int32_t n_top,
                            float *token_logprob, rw_token_logprob *top);

#endif
