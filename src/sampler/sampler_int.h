/* sampler_int.h - the sampler's state and the helpers its files share
 * (private to src/engine). */
#ifndef RW_SAMPLER_SAMPLER_INT_H
#define RW_SAMPLER_SAMPLER_INT_H

#include "sampler/sampler.h"

/* A candidate token: its logit at the current stage of the chain. */
typedef struct {
    float l;
    int32_t id;
} rw_cand;

/* Scratch of the radix sort (rw_cand_select): a second candidate array of
 * n_vocab entries and the counts of its 8-bit digits. */
enum { RW_RADIX_BITS = 8, RW_RADIX = 1 << RW_RADIX_BITS, RW_RADIX_DIGITS = 8 };
typedef struct {
    rw_cand *tmp;
    uint32_t (*count)[RW_RADIX]; /* RW_RADIX_DIGITS rows */
} rw_sort_buf;

/* The generator's independent streams at one position. */
enum { RW_STREAM_SAMPLE = 0, RW_STREAM_ACCEPT = 1, RW_STREAM_RESIDUAL = 2 };

struct rw_sampler {
    rw_sampler_params p; /* p.logit_bias points at bias */
    int64_t n_vocab;
    rw_logit_bias *bias; /* owned copy of the request's logit bias (n_bias) */
    int32_t n_bias;
    /* Accepted tokens, in order (owned, capacity cap_hist, grown by doubling
     * in rw_sampler_accept). n_hist is also the generator's position. */
    int32_t *hist;
    int64_t n_hist, cap_hist;
    /* counts[t] = occurrences of t among the last penalty_last_n accepted
     * tokens (all of them when 0). Owned, n_vocab; NULL when every penalty
     * is off. Invariant: equals a recount over hist after every call. */
    int32_t *counts;
    /* Scratch, owned, n_vocab each, contents meaningless between calls:
     * work = logits after bias and penalties, cand = surviving candidates,
     * sort = rw_cand_select's buffers, prob = a probability vector
     * (rw_sampler_sample, logprobs, residual). */
    float *work;
    rw_cand *cand;
    rw_sort_buf sort;
    float *prob;
};

/* Uniform double in [0, 1) for (seed, stream, current position). */
double rw_sampler_uniform(const rw_sampler *s, uint32_t stream);

/* Index drawn from weights w[0..n) with uniform u (see rw_sampler_draw), or
 * -1 when no weight is positive. */
int64_t rw_draw_weights(const float *w, int64_t n, double u);

/* True when a candidate goes before b: higher logit, ties to the lower id. */
static inline bool rw_cand_before(rw_cand a, rw_cand b) { return a.l > b.l || (a.l == b.l && a.id < b.id); }

/* Reorders c[0..n) so that c[0..m) are the m first candidates in
 * rw_cand_before order, sorted; the rest stay behind in some order. c has no
 * NaN; b's buffers have room for n candidates. */
void rw_cand_select(rw_cand *c, int64_t n, int64_t m, const rw_sort_buf *b);

/* The row after logit bias and penalties: logits itself when both are off,
 * else s->work. */
const float *rw_sampler_adjust(rw_sampler *s, const float *logits);

#endif
