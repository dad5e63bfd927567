/* sampler_chain.c - logits to the probability vector the sampler draws from:
 * bias, penalties, top-k, top-p, min-p, temperature (order and semantics in
 * sampler.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler_int.h"

const float *rw_sampler_adjust(rw_sampler *s, const float *logits) {
    if (s->n_bias == 0 && !s->counts) return logits;
    float *w = s->work;
    memcpy(w, logits, (size_t)s->n_vocab * sizeof *w);
    for (int32_t i = 0; i < s->n_bias; i++) w[s->bias[i].token] += s->bias[i].bias;
    if (s->counts) {
        const float rep = s->p.repeat_penalty, freq = s->p.frequency_penalty, pres = s->p.presence_penalty;
        const bool use_rep = rep != 1.0f && rep != 0.0f;
        /* A scan of the counts costs as much as the copy above, and is
         * bounded by the vocabulary however long the request runs. */
        for (int64_t t = 0; t < s->n_vocab; t++) {
            const int32_t c = s->counts[t];
            if (c <= 0) continue;
            if (use_rep) w[t] = w[t] <= 0.0f ? w[t] * rep : w[t] / rep;
            w[t] -= (float)c * freq + pres; /* as llama.cpp: float(count) * freq + float(count > 0) * present */
        }
    }
    return w;
}

/* Binary heap on c[0..m) with the candidate that goes last at the root. */
static void sift_down(rw_cand *c, int64_t m, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, worst = i;
        if (l < m && rw_cand_before(c[worst], c[l])) worst = l;
        if (r < m && rw_cand_before(c[worst], c[r])) worst = r;
        if (worst == i) return;
        rw_cand t = c[i];
        c[i] = c[worst];
        c[worst] = t;
        i = worst;
    }
}

static int cmp_cand(const void *a, const void *b) {
    const rw_cand *x = a, *y = b;
    return rw_cand_before(*x, *y) ? -1 : rw_cand_before(*y, *x) ? 1 : 0;
}

/* A key whose unsigned order is rw_cand_before's order of logits: the float
 * bits made monotonic, then reversed (higher logit first). -0 and +0 are
 * equal logits, so they get one key. */
static inline uint32_t desc_key(float l) {
    if (l == 0.0f) l = 0.0f;
    uint32_t u;
    memcpy(&u, &l, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ~u;
}

enum { RADIX_BITS = 11, RADIX = 1 << RADIX_BITS };

/* One stable counting pass on the digit (key >> shift) & (RADIX - 1) of the
 * id (by_id) or of desc_key; false (nothing moved) when every candidate has
 * the same digit. */
static bool radix_pass(const rw_cand *src, rw_cand *dst, int64_t n, bool by_id, int shift) {
    _Static_assert(RADIX_BITS * 3 >= 32, "three digits cover a key");
    int64_t count[RADIX] = {0};
#define DIGIT(x) (((by_id ? (uint32_t)(x).id : desc_key((x).l)) >> shift) & (RADIX - 1))
    for (int64_t i = 0; i < n; i++) count[DIGIT(src[i])]++;
    if (count[DIGIT(src[0])] == n) return false;
    int64_t pos = 0;
    for (int d = 0; d < RADIX; d++) {
        const int64_t k = count[d];
        count[d] = pos;
        pos += k;
    }
    for (int64_t i = 0; i < n; i++) dst[count[DIGIT(src[i])]++] = src[i];
#undef DIGIT
    return true;
}

/* LSD radix sort into rw_cand_before order: by id first, then (stably) by
 * logit, so equal logits end up in id order. O(n), where qsort's calls
 * through a comparator cost about ten times more on a 150k vocabulary. */
static void radix_sort(rw_cand *c, rw_cand *tmp, int64_t n) {
    int32_t max_id = 0;
    for (int64_t i = 0; i < n; i++)
        if (c[i].id > max_id) max_id = c[i].id;
    rw_cand *src = c, *dst = tmp;
    for (int by_id = 1; by_id >= 0; by_id--)
        for (int shift = 0; shift < 32 && (!by_id || (max_id >> shift) > 0); shift += RADIX_BITS)
            if (radix_pass(src, dst, n, by_id, shift)) {
                rw_cand *t = src;
                src = dst;
                dst = t;
            }
    if (src != c) memcpy(c, src, (size_t)n * sizeof *c);
}

void rw_cand_select(rw_cand *c, rw_cand *tmp, int64_t n, int64_t m) {
    if (m > n) m = n;
    if (m <= 0) return;
    if (m < n / 8) {
        /* keep the m best in a heap, swapping (not overwriting) so c stays a
         * permutation of the candidates */
        for (int64_t i = m / 2 - 1; i >= 0; i--) sift_down(c, m, i);
        for (int64_t i = m; i < n; i++) {
            if (!rw_cand_before(c[i], c[0])) continue;
            rw_cand t = c[0];
            c[0] = c[i];
            c[i] = t;
            sift_down(c, m, 0);
        }
        n = m;
    }
    if (n > 1024)
        radix_sort(c, tmp, n);
    else
        qsort(c, (size_t)n, sizeof *c, cmp_cand);
}

/* exp((l - max) / t) with the infinite-max rule of sampler.h. */
static inline double weight(float l, float max, double t) {
    if (isinf(max)) return l == max ? 1.0 : 0.0;
    return exp(((double)l - (double)max) / t);
}

static float max_logit(const rw_cand *c, int64_t n, bool sorted) {
    if (sorted) return c[0].l;
    float m = c[0].l;
    for (int64_t i = 1; i < n; i++)
        if (c[i].l > m) m = c[i].l;
    return m;
}

/* top-p over c[0..n): the kept count. Sorts c (partly) on the way. */
static int64_t top_p_keep(rw_cand *c, rw_cand *tmp, int64_t n, bool *sorted, float top_p) {
    const float max = max_logit(c, n, *sorted);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += weight(c[i].l, max, 1.0);
    /* Usually a few hundred tokens reach top_p: sort those first, and all
     * of them only when the mass is spread wider. */
    int64_t m = *sorted ? n : (n > 1024 ? 256 : n);
    if (!*sorted) rw_cand_select(c, tmp, n, m);
    double cum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (i == m) {
            rw_cand_select(c, tmp, n, n);
            m = n;
        }
        cum += weight(c[i].l, max, 1.0) / sum;
        if (cum >= top_p) {
            *sorted = true;
            return i + 1;
        }
    }
    *sorted = m == n;
    return n;
}

void rw_sampler_probs(rw_sampler *s, const float *logits, float *p) {
    const int64_t nv = s->n_vocab;
    const float *row = rw_sampler_adjust(s, logits);
    memset(p, 0, (size_t)nv * sizeof *p);
    if (!(s->p.temperature > 0.0f)) {
        p[rw_argmax(row, nv)] = 1.0f;
        return;
    }
    rw_cand *c = s->cand;
    for (int64_t i = 0; i < nv; i++) c[i] = (rw_cand){.l = isnan(row[i]) ? -INFINITY : row[i], .id = (int32_t)i};
    int64_t n = nv;
    bool sorted = false;
    if (s->p.top_k > 0 && s->p.top_k < n) {
        rw_cand_select(c, c + nv, n, s->p.top_k);
        n = s->p.top_k;
        sorted = true;
    }
    if (s->p.top_p < 1.0f) n = top_p_keep(c, c + nv, n, &sorted, s->p.top_p);
    if (s->p.min_p > 0.0f) {
        const float max = max_logit(c, n, sorted);
        const double floor_l = (double)max + log((double)s->p.min_p);
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++) /* keeps the order, so sorted stays true */
            if ((double)c[i].l >= floor_l || c[i].l == max) c[k++] = c[i];
        n = k;
    }
    const float max = max_logit(c, n, sorted);
    const double t = s->p.temperature;
    /* one exp per candidate: the weight waits in p (as a float) for the sum */
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double w = weight(c[i].l, max, t);
        sum += w;
        p[c[i].id] = (float)w;
    }
    for (int64_t i = 0; i < n; i++) p[c[i].id] = (float)(p[c[i].id] / sum);
}
