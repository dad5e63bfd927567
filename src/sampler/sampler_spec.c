/* sampler_spec.c - the rejection-sampling step of speculative decoding
 * (sampler.h: rw_spec_accept).
 *
 * Why the result is distributed as p: the draft token x comes from q and is
 * kept with probability min(1, p(x)/q(x)), so a given x is produced by
 * acceptance with probability min(q(x), p(x)); the rejection probability is
 * 1 - sum min(p, q) = sum max(0, p - q), and the residual draw hands that mass
 * out in proportion to max(0, p(x) - q(x)). The two add up to p(x). */
#include "sampler/sampler_int.h"

static float nonneg(float x) { return x > 0.0f ? x : 0.0f; } /* NaN -> 0 */

/* The rejection step with the residual built in scratch (which must not be
 * p); q == NULL stands for one-hot at draft. */
static bool spec_step(rw_sampler *s, const float *p, const float *q, int32_t draft, int32_t *token, float *scratch) {
    const int64_t nv = s->n_vocab;
    const bool in_range = draft >= 0 && draft < nv;
    const float pd = in_range ? nonneg(p[draft]) : 0.0f;
    const float qd = !in_range ? 0.0f : q ? nonneg(q[draft]) : 1.0f;
    /* u * q < p is "u < p / q" without the division: q = 0 < p accepts, and
     * p = 0 never does. */
    if (in_range && rw_sampler_uniform(s, RW_STREAM_ACCEPT) * qd < pd) {
        *token = draft;
        return true;
    }
    float *r = scratch;
    if (q)
        for (int64_t i = 0; i < nv; i++) r[i] = nonneg(nonneg(p[i]) - nonneg(q[i]));
    else
        for (int64_t i = 0; i < nv; i++) r[i] = i == draft ? nonneg(nonneg(p[i]) - 1.0f) : nonneg(p[i]);
    const double u = rw_sampler_uniform(s, RW_STREAM_RESIDUAL);
    int64_t t = rw_draw_weights(r, nv, u);
    if (t < 0) t = rw_draw_weights(p, nv, u); /* p <= q everywhere: only rounding gets here */
    *token = t < 0 ? 0 : (int32_t)t;
    return false;
}

bool rw_spec_accept(rw_sampler *s, const float *p, const float *q, int32_t draft, int32_t *token) {
    return spec_step(s, p, q, draft, token, s->prob);
}

rw_status rw_spec_verify(rw_sampler *s, const float *target_logits, const float *q, const int32_t *drafts, int32_t k,
                         int32_t *out, int32_t *n_out, rw_error *err) {
    const int64_t nv = s->n_vocab;
    *n_out = 0;
    for (int32_t i = 0; i < k; i++)
        if (drafts[i] < 0 || drafts[i] >= nv)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "speculative: draft token %d is outside the vocabulary of %lld",
                             (int)drafts[i], (long long)nv);
    const bool greedy = !(s->p.temperature > 0.0f);
    for (int32_t i = 0; i <= k; i++) {
        const float *row = target_logits + (size_t)i * (size_t)nv;
        int32_t tok;
        bool accepted;
        if (greedy || i == k) {
            /* greedy: the target's one-hot p accepts exactly its own token
             * (rw_sampler_sample is that token, bitwise as without a draft);
             * after k acceptances: a plain sample of the last row */
            tok = rw_sampler_sample(s, row);
            accepted = i < k && tok == drafts[i];
        } else {
            /* p in s->prob (rw_sampler_probs uses s->work and s->cand), the
             * residual in s->work */
            rw_sampler_probs(s, row, s->prob);
            accepted = spec_step(s, s->prob, q ? q + (size_t)i * (size_t)nv : NULL, drafts[i], &tok, s->work);
        }
        rw_status st = rw_sampler_accept(s, tok, err);
        if (st) return st;
        out[(*n_out)++] = tok;
        if (!accepted) break;
    }
    return RW_OK;
}
