/* sampler.c - the sampler's state: parameters, accepted tokens, penalty
 * counts, the counter-based generator, drawing (sampler.h). The chain itself
 * is in sampler_chain.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/sampler_int.h"

rw_sampler_params rw_sampler_params_default(void) {
    return (rw_sampler_params){.temperature = 0.0f, .top_p = 1.0f, .repeat_penalty = 1.0f};
}

static bool penalties_on(const rw_sampler_params *p) {
    return p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f ||
           (p->repeat_penalty != 1.0f && p->repeat_penalty != 0.0f);
}

static rw_status check_params(const rw_sampler_params *p, int64_t n_vocab, rw_error *err) {
    if (n_vocab <= 0 || n_vocab > INT32_MAX)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "sampler: n_vocab %lld", (long long)n_vocab);
    if (!isfinite(p->temperature)) return rw_errorf(err, RW_ERR_RANGE, "sampler: temperature must be a finite number");
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return rw_errorf(err, RW_ERR_RANGE, "sampler: top_p %g is not in [0, 1]", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return rw_errorf(err, RW_ERR_RANGE, "sampler: min_p %g is not in [0, 1]", (double)p->min_p);
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return rw_errorf(err, RW_ERR_RANGE, "sampler: presence and frequency penalties must be finite numbers");
    if (!(p->repeat_penalty >= 0.0f && isfinite(p->repeat_penalty)))
        return rw_errorf(err, RW_ERR_RANGE, "sampler: repeat penalty %g must be a finite number >= 0",
                         (double)p->repeat_penalty);
    if (p->min_keep < 0) return rw_errorf(err, RW_ERR_RANGE, "sampler: min_keep %d is negative", (int)p->min_keep);
    if (p->penalty_last_n < 0)
        return rw_errorf(err, RW_ERR_RANGE, "sampler: penalty_last_n %d is negative", (int)p->penalty_last_n);
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "sampler: %d logit bias entries", (int)p->n_logit_bias);
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const rw_logit_bias b = p->logit_bias[i];
        if (b.token < 0 || b.token >= n_vocab)
            return rw_errorf(err, RW_ERR_RANGE, "sampler: logit bias for token %d, vocabulary has %lld", (int)b.token,
                             (long long)n_vocab);
        if (isnan(b.bias) || b.bias == INFINITY)
            return rw_errorf(err, RW_ERR_RANGE, "sampler: logit bias for token %d is not a number or -inf",
                             (int)b.token);
    }
    return RW_OK;
}

rw_status rw_sampler_new(const rw_sampler_params *params, int64_t n_vocab, rw_sampler **out, rw_error *err) {
    *out = NULL;
    rw_status st = check_params(params, n_vocab, err);
    if (st) return st;
    rw_sampler *s = calloc(1, sizeof *s);
    if (!s) return rw_errorf(err, RW_ERR_NOMEM, "sampler: out of memory");
    s->p = *params;
    s->n_vocab = n_vocab;
    const size_t nv = (size_t)n_vocab;
    s->work = malloc(nv * sizeof *s->work);
    s->cand = malloc(nv * sizeof *s->cand);
    s->sort.tmp = malloc(nv * sizeof *s->sort.tmp);
    s->sort.count = malloc(RW_RADIX_DIGITS * sizeof *s->sort.count);
    s->prob = malloc(nv * sizeof *s->prob);
    bool ok = s->work && s->cand && s->sort.tmp && s->sort.count && s->prob;
    if (ok && params->n_logit_bias > 0) {
        s->n_bias = params->n_logit_bias;
        s->bias = malloc((size_t)s->n_bias * sizeof *s->bias);
        if ((ok = s->bias != NULL)) memcpy(s->bias, params->logit_bias, (size_t)s->n_bias * sizeof *s->bias);
    }
    s->p.logit_bias = s->bias;
    if (ok && penalties_on(params)) ok = (s->counts = calloc(nv, sizeof *s->counts)) != NULL;
    if (!ok) {
        rw_sampler_free(s);
        return rw_errorf(err, RW_ERR_NOMEM, "sampler: out of memory for %lld tokens", (long long)n_vocab);
    }
    *out = s;
    return RW_OK;
}

void rw_sampler_free(rw_sampler *s) {
    if (!s) return;
    free(s->bias);
    free(s->hist);
    free(s->counts);
    free(s->work);
    free(s->cand);
    free(s->sort.tmp);
    free(s->sort.count);
    free(s->prob);
    free(s);
}

rw_status rw_sampler_accept(rw_sampler *s, int32_t token, rw_error *err) {
    if (token < 0 || token >= s->n_vocab)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "sampler: token %d is outside the vocabulary of %lld", (int)token,
                         (long long)s->n_vocab);
    if (s->n_hist == s->cap_hist) {
        const int64_t cap = s->cap_hist ? 2 * s->cap_hist : 256;
        int32_t *h = realloc(s->hist, (size_t)cap * sizeof *h);
        if (!h) return rw_errorf(err, RW_ERR_NOMEM, "sampler: out of memory for %lld tokens", (long long)cap);
        s->hist = h;
        s->cap_hist = cap;
    }
    s->hist[s->n_hist++] = token;
    if (s->counts) {
        s->counts[token]++;
        const int64_t last_n = s->p.penalty_last_n;
        if (last_n > 0 && s->n_hist > last_n) s->counts[s->hist[s->n_hist - 1 - last_n]]--; /* left the window */
    }
    return RW_OK;
}

int64_t rw_sampler_n_accepted(const rw_sampler *s) { return s->n_hist; }

void rw_sampler_rewind(rw_sampler *s, int64_t n_keep) {
    if (n_keep < 0) n_keep = 0;
    const int64_t last_n = s->p.penalty_last_n;
    while (s->n_hist > n_keep) {
        const int64_t i = --s->n_hist;
        if (!s->counts) continue;
        s->counts[s->hist[i]]--;
        if (last_n > 0 && i >= last_n) s->counts[s->hist[i - last_n]]++; /* back in the window */
    }
}

/* splitmix64's output function (Steele, Lea, Flood 2014). */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* splitmix64 is counter-based: its k-th output (from 0) is
 * mix64(seed + (k + 1) * gamma), so position k needs no state. Stream 0 is
 * that sequence itself (the sampler before this one drew it once per token);
 * the other streams start from a mixed seed. */
double rw_sampler_uniform(const rw_sampler *s, uint32_t stream) {
    const uint64_t gamma = 0x9e3779b97f4a7c15ull;
    const uint64_t base = stream ? mix64(s->p.seed ^ ((uint64_t)stream * 0xd1b54a32d192ed03ull)) : s->p.seed;
    const uint64_t x = mix64(base + (uint64_t)(s->n_hist + 1) * gamma);
    return (double)(x >> 11) * 0x1.0p-53;
}

int64_t rw_draw_weights(const float *w, int64_t n, double u) {
    double t4[4] = {0.0, 0.0, 0.0, 0.0}; /* four running sums: not one dependent chain */
    for (int64_t i = 0; i < n; i++) t4[i & 3] += w[i] > 0.0f ? w[i] : 0.0f;
    const double total = (t4[0] + t4[1]) + (t4[2] + t4[3]);
    if (!(total > 0.0)) return -1;
    const double target = u * total;
    double acc = 0.0;
    int64_t last = -1;
    for (int64_t i = 0; i < n; i++) {
        if (!(w[i] > 0.0f)) continue;
        acc += w[i];
        last = i;
        if (target < acc) return i;
    }
    return last; /* rounding: the running sum ended a hair below target */
}

int32_t rw_sampler_draw(rw_sampler *s, const float *p) {
    const int64_t t = rw_draw_weights(p, s->n_vocab, rw_sampler_uniform(s, RW_STREAM_SAMPLE));
    return t < 0 ? 0 : (int32_t)t;
}

int32_t rw_sampler_sample(rw_sampler *s, const float *logits) {
    if (!(s->p.temperature > 0.0f)) return rw_argmax(rw_sampler_adjust(s, logits), s->n_vocab);
    rw_sampler_probs(s, logits, s->prob);
    return rw_sampler_draw(s, s->prob);
}
