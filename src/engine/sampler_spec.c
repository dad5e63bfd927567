/* sampler_spec.c - the rejection-sampling step of speculative decoding
 * (sampler.h: rw_spec_accept).
 *
 * Why the result is distributed as p: the draft token x comes from q and is
 * kept with probability min(1, p(x)/q(x)), so a given x is produced by
 * acceptance with probability min(q(x), p(x)); the rejection probability is
 * 1 - sum min(p, q) = sum max(0, p - q), and the residual draw hands that mass
 * out in proportion to max(0, p(x) - q(x)). The two add up to p(x). */
#include "engine/sampler_int.h"

static float nonneg(float x) { return x > 0.0f ? x : 0.0f; } /* NaN -> 0 */

bool rw_spec_accept(rw_sampler *s, const float *p, const float *q, int32_t draft, int32_t *token) {
    const int64_t nv = s->n_vocab;
    const bool in_range = draft >= 0 && draft < nv;
    const float pd = in_range ? nonneg(p[draft]) : 0.0f, qd = in_range ? nonneg(q[draft]) : 0.0f;
    /* u * q < p is "u < p / q" without the division: q = 0 < p accepts, and
     * p = 0 never does. */
    if (in_range && rw_sampler_uniform(s, RW_STREAM_ACCEPT) * qd < pd) {
        *token = draft;
        return true;
    }
    float *r = s->prob;
    for (int64_t i = 0; i < nv; i++) r[i] = nonneg(nonneg(p[i]) - nonneg(q[i]));
    const double u = rw_sampler_uniform(s, RW_STREAM_RESIDUAL);
    int64_t t = rw_draw_weights(r, nv, u);
    if (t < 0) t = rw_draw_weights(p, nv, u); /* p <= q everywhere: only rounding gets here */
    *token = t < 0 ? 0 : (int32_t)t;
    return false;
}
