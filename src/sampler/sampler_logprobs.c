/* sampler_logprobs.c - OpenAI logprobs: the chosen token's log-probability
 * and the most likely alternatives, under the raw or the sampled
 * distribution (sampler.h says which is which). */
#include <math.h>

#include "sampler/sampler_int.h"

/* log-softmax of the raw row: the chosen token and the top-n list. */
static int32_t raw_logprobs(rw_sampler *s, const float *logits, int32_t token, int32_t n_top, float *token_lp,
                            rw_token_logprob *top) {
    const int64_t nv = s->n_vocab;
    rw_cand *c = s->cand;
    float max = -INFINITY;
    for (int64_t i = 0; i < nv; i++) {
        c[i] = (rw_cand){.l = isnan(logits[i]) ? -INFINITY : logits[i], .id = (int32_t)i};
        if (c[i].l > max) max = c[i].l;
    }
    /* log p = l - max - log(sum exp(l - max)), the exps in float as in the
     * chain (a relative error near 1e-7 in the sum), the rest in double;
     * when max is infinite the tokens equal to it share the mass. */
    double lse;
    if (isinf(max)) {
        int64_t n_max = 0;
        for (int64_t i = 0; i < nv; i++) n_max += c[i].l == max;
        lse = log((double)n_max);
    } else {
        double sum4[4] = {0.0, 0.0, 0.0, 0.0};
        for (int64_t i = 0; i < nv; i++) sum4[i & 3] += expf(c[i].l - max);
        lse = log((sum4[0] + sum4[1]) + (sum4[2] + sum4[3]));
    }
#define LOGPROB(l) (isinf(max) ? ((l) == max ? (float)-lse : -INFINITY) : (float)((double)(l) - (double)max - lse))
    if (token >= 0 && token < nv) *token_lp = LOGPROB(c[token].l);
    rw_cand_select(c, nv, n_top, &s->sort);
    for (int32_t i = 0; i < n_top; i++) top[i] = (rw_token_logprob){.token = c[i].id, .logprob = LOGPROB(c[i].l)};
#undef LOGPROB
    return n_top;
}

/* log of the sampled distribution; the alternatives are the tokens it keeps. */
static int32_t sampled_logprobs(rw_sampler *s, const float *logits, int32_t token, int32_t n_top, float *token_lp,
                                rw_token_logprob *top) {
    const int64_t nv = s->n_vocab;
    float *p = s->prob;
    rw_sampler_probs(s, logits, p);
    if (token >= 0 && token < nv) *token_lp = p[token] > 0.0f ? (float)log((double)p[token]) : -INFINITY;
    rw_cand *c = s->cand;
    int64_t n = 0;
    for (int64_t i = 0; i < nv; i++)
        if (p[i] > 0.0f) c[n++] = (rw_cand){.l = p[i], .id = (int32_t)i};
    if (n_top > n) n_top = (int32_t)n;
    rw_cand_select(c, n, n_top, &s->sort);
    for (int32_t i = 0; i < n_top; i++)
        top[i] = (rw_token_logprob){.token = c[i].id, .logprob = (float)log((double)c[i].l)};
    return n_top;
}

int32_t rw_sampler_logprobs(rw_sampler *s, const float *logits, rw_logprobs_mode mode, int32_t token, int32_t n_top,
                            float *token_logprob, rw_token_logprob *top) {
    if (n_top < 0) n_top = 0;
    if (n_top > RW_MAX_TOP_LOGPROBS) n_top = RW_MAX_TOP_LOGPROBS;
    if (n_top > s->n_vocab) n_top = (int32_t)s->n_vocab;
    *token_logprob = -INFINITY; /* a token outside the vocabulary */
    if (mode == RW_LOGPROBS_SAMPLED) return sampled_logprobs(s, logits, token, n_top, token_logprob, top);
    return raw_logprobs(s, logits, token, n_top, token_logprob, top);
}
