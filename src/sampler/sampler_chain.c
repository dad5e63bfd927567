/* sampler_chain.c - logits to the probability vector the sampler draws from:
 * bias, penalties, top-k, top-p, min-p, temperature (order and semantics in
 * sampler.h); and the greedy pick (argmax), which sampler.c uses too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/sampler_int.h"

/* Two passes: the largest non-NaN value (eight independent running maxima,
 * so the loop is not one long chain of dependent compares; max is exact, so
 * their order does not matter), then the first index holding it. Same answer
 * as the one-pass loop "replace best when greater, or when best is NaN"
 * (tests/sampler/test_sampler.c keeps that loop as the reference): -0 and +0
 * are equal, so either finds the first zero. */
int32_t rw_argmax(const float *logits, int64_t n) {
    float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) m[j] = logits[i + j] > m[j] ? logits[i + j] : m[j];
    for (; i < n; i++) m[0] = logits[i] > m[0] ? logits[i] : m[0];
    float best = m[0];
    for (int j = 1; j < 8; j++) best = m[j] > best ? m[j] : best;
    for (i = 0; i < n; i++)
        if (logits[i] == best) return (int32_t)i;
    return 0; /* every value is NaN */
}

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

/* The inverse of desc_key. */
static inline float key_logit(uint32_t k) {
    uint32_t u = ~k;
    u = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
    float l;
    memcpy(&l, &u, sizeof l);
    return l;
}

/* LSD radix sort into rw_cand_before order, O(n): each candidate becomes
 * the 64-bit key desc_key(l) << 32 | id, whose unsigned order is that order
 * exactly (ids are unique), and the keys are sorted 8 bits at a time -
 * the id's digits up to its highest set bit, then the logit's four - with
 * one pass over the keys for all the digit counts. tmp (n entries) and c
 * hold the keys in turn (their memory is only reinterpreted through memcpy
 * on the way in and out). */
static void radix_sort(rw_cand *c, int64_t n, const rw_sort_buf *b) {
    rw_cand *tmp = b->tmp;
    _Static_assert(sizeof(rw_cand) == sizeof(uint64_t), "a candidate and a key have one size");
    uint32_t max_id = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint64_t k = (uint64_t)desc_key(c[i].l) << 32 | (uint32_t)c[i].id;
        memcpy(&tmp[i], &k, sizeof k);
        if ((uint32_t)c[i].id > max_id) max_id = (uint32_t)c[i].id;
    }
    uint64_t *src = (uint64_t *)(void *)tmp, *dst = (uint64_t *)(void *)c;
    /* n unique ids up to n - 1 are all of 0..n-1 (the whole vocabulary, as
     * top-p sees it without top-k): one pass puts them in id order. */
    const bool all_ids = max_id == (uint64_t)n - 1;
    if (all_ids) {
        for (int64_t i = 0; i < n; i++) dst[(uint32_t)src[i]] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    int shifts[RW_RADIX_DIGITS], nd = 0;
    for (int sh = 0; !all_ids && sh < 32 && (max_id >> sh) > 0; sh += RW_RADIX_BITS) shifts[nd++] = sh;
    for (int sh = 32; sh < 64; sh += RW_RADIX_BITS) shifts[nd++] = sh;
    uint32_t(*cnt)[RW_RADIX] = b->count;
    memset(cnt, 0, (size_t)nd * sizeof *cnt);
    for (int64_t i = 0; i < n; i++)
        for (int d = 0; d < nd; d++) cnt[d][(src[i] >> shifts[d]) & (RW_RADIX - 1)]++;
    for (int d = 0; d < nd; d++) {
        const int sh = shifts[d];
        if (cnt[d][(src[0] >> sh) & (RW_RADIX - 1)] == (uint32_t)n) continue; /* one digit value: nothing moves */
        uint32_t pos = 0;
        for (int v = 0; v < RW_RADIX; v++) {
            const uint32_t k = cnt[d][v];
            cnt[d][v] = pos;
            pos += k;
        }
        for (int64_t i = 0; i < n; i++) dst[cnt[d][(src[i] >> sh) & (RW_RADIX - 1)]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    for (int64_t i = 0; i < n; i++) {
        uint64_t k;
        memcpy(&k, &src[i], sizeof k);
        const rw_cand x = {.l = key_logit((uint32_t)(k >> 32)), .id = (int32_t)(uint32_t)k};
        memcpy(&c[i], &x, sizeof x);
    }
}

void rw_cand_select(rw_cand *c, int64_t n, int64_t m, const rw_sort_buf *b) {
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
        radix_sort(c, n, b);
    else
        qsort(c, (size_t)n, sizeof *c, cmp_cand);
}

/* expf((l - max) * (1 / t)) in float, with the infinite-max rule of
 * sampler.h.
 * Float, not double: the weights end up as floats anyway, and expf takes
 * about half of exp's time, which is most of a temperature-only draw over a
 * large vocabulary. */
static inline float weight(float l, float max, float inv_t) {
    if (isinf(max)) return l == max ? 1.0f : 0.0f;
    return expf((l - max) * inv_t);
}

static float max_logit(const rw_cand *c, int64_t n, bool sorted) {
    if (sorted) return c[0].l;
    float m = c[0].l;
    for (int64_t i = 1; i < n; i++)
        if (c[i].l > m) m = c[i].l;
    return m;
}

/* Top-p counts mass in exact integers: a weight w (float, at most 1) is
 * round(w * 2^32) units, so a running sum does not depend on the order it
 * is added in (and n_vocab < 2^31 keeps every sum below 2^63). Tokens under
 * 2^-33 of the top weight count 0 - with 151936 of them, at most 2e-5 of
 * it. */
static inline uint64_t top_p_units(float w) { return (uint64_t)((double)w * 4294967296.0 + 0.5); }

static inline void swap_cand(rw_cand *a, rw_cand *b) {
    rw_cand t = *a;
    *a = *b;
    *b = t;
}

/* The kept count of top-p over c[0..n) in sorted order: walks the units. */
static int64_t top_p_walk(const rw_cand *c, int64_t n, const float *w, uint64_t thr, int64_t min_keep) {
    uint64_t cum = 0;
    for (int64_t i = 0; i < n; i++) {
        cum += top_p_units(w[c[i].id]);
        if (cum >= thr && i + 1 >= min_keep) return i + 1;
    }
    return n;
}

/* The kept count of top-p over c[0..n) in any order, with the kept tokens
 * moved to the front (unsorted): a quickselect on the cumulative units (the
 * answer is unique, so the pivots only change the time). thr > 0. Returns
 * -1 after too many partitions (inputs that defeat median-of-three). */
static int64_t top_p_select(rw_cand *c, int64_t n, const float *w, uint64_t thr) {
    int64_t lo = 0, hi = n, rounds = 0;
    uint64_t acc = 0; /* units before lo; always < thr */
    while (hi - lo > 16) {
        if (++rounds > 96) return -1;
        const int64_t mid = lo + (hi - lo) / 2;
        if (rw_cand_before(c[mid], c[lo])) swap_cand(&c[mid], &c[lo]);
        if (rw_cand_before(c[hi - 1], c[lo])) swap_cand(&c[hi - 1], &c[lo]);
        if (rw_cand_before(c[hi - 1], c[mid])) swap_cand(&c[hi - 1], &c[mid]);
        swap_cand(&c[mid], &c[hi - 1]); /* the median is the pivot, at the end */
        const rw_cand pivot = c[hi - 1];
        int64_t k = lo;
        uint64_t before = 0;
        for (int64_t j = lo; j < hi - 1; j++)
            if (rw_cand_before(c[j], pivot)) {
                before += top_p_units(w[c[j].id]);
                swap_cand(&c[k++], &c[j]);
            }
        swap_cand(&c[k], &c[hi - 1]);
        if (acc + before >= thr)
            hi = k;
        else if (acc + before + top_p_units(w[c[k].id]) >= thr)
            return k + 1;
        else {
            acc += before + top_p_units(w[c[k].id]);
            lo = k + 1;
        }
    }
    for (int64_t i = lo + 1; i < hi; i++) /* insertion sort of the last few */
        for (int64_t j = i; j > lo && rw_cand_before(c[j], c[j - 1]); j--) swap_cand(&c[j], &c[j - 1]);
    for (int64_t i = lo; i < hi; i++) {
        acc += top_p_units(w[c[i].id]);
        if (acc >= thr) return i + 1;
    }
    return hi; /* not reached: the units of [lo, hi) reach thr */
}

/* top-p over c[0..n): the kept count, the kept tokens first (sorted when
 * *sorted comes back true). The float weights exp(l - max) are kept by id in
 * w (n_vocab entries of scratch), so each costs one exp. */
static int64_t top_p_keep(rw_cand *c, const rw_sort_buf *b, int64_t n, bool *sorted, float top_p, int64_t min_keep,
                          float *w) {
    const float max = max_logit(c, n, *sorted);
    uint64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        w[c[i].id] = weight(c[i].l, max, 1.0f);
        total += top_p_units(w[c[i].id]);
    }
    const uint64_t thr = (uint64_t)ceil((double)top_p * (double)total); /* <= total */
    if (thr == 0) {                                                     /* top_p = 0: the first token (or min_keep) */
        const int64_t keep = min_keep < n ? min_keep : n;
        if (!*sorted) rw_cand_select(c, n, keep, b);
        *sorted = true;
        return keep;
    }
    if (!*sorted && n > 1024) {
        /* A large unsorted set. Usually a few hundred tokens reach top_p:
         * sort those and walk. Each weight is at most 2^32 units, so at
         * least thr / 2^32 tokens are needed; when that is many (a flat
         * row) or the few hundred fall short, select instead of sorting it
         * all. */
        if ((double)thr < 64.0 * 4294967296.0) {
            rw_cand_select(c, n, 256, b);
            uint64_t cum = 0;
            for (int64_t i = 0; i < 256; i++) {
                cum += top_p_units(w[c[i].id]);
                if (cum >= thr && i + 1 >= min_keep) {
                    *sorted = true;
                    return i + 1;
                }
            }
        }
        int64_t k = top_p_select(c, n, w, thr);
        if (k >= 0 && k >= min_keep) return k;
        if (k >= 0) { /* fewer than min_keep: the min_keep first */
            rw_cand_select(c, n, min_keep < n ? min_keep : n, b);
            *sorted = true;
            return min_keep < n ? min_keep : n;
        }
    }
    if (!*sorted) rw_cand_select(c, n, n, b);
    *sorted = true;
    return top_p_walk(c, n, w, thr, min_keep);
}

void rw_sampler_probs(rw_sampler *s, const float *logits, float *p) {
    const int64_t nv = s->n_vocab;
    const float *row = rw_sampler_adjust(s, logits);
    if (!(s->p.temperature > 0.0f)) {
        memset(p, 0, (size_t)nv * sizeof *p);
        p[rw_argmax(row, nv)] = 1.0f;
        return;
    }
    rw_cand *c = s->cand;
    for (int64_t i = 0; i < nv; i++) c[i] = (rw_cand){.l = isnan(row[i]) ? -INFINITY : row[i], .id = (int32_t)i};
    int64_t n = nv;
    bool sorted = false;
    if (s->p.top_k > 0 && s->p.top_k < n) {
        rw_cand_select(c, n, s->p.top_k, &s->sort);
        n = s->p.top_k;
        sorted = true;
    }
    const int64_t min_keep = s->p.min_keep > 0 ? s->p.min_keep : 1;
    if (s->p.top_p < 1.0f) n = top_p_keep(c, &s->sort, n, &sorted, s->p.top_p, min_keep, p); /* p as scratch */
    if (s->p.min_p > 0.0f) {
        const float max = max_logit(c, n, sorted);
        const double floor_l = (double)max + log((double)s->p.min_p);
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++) k += (double)c[i].l >= floor_l || c[i].l == max;
        const int64_t keep = min_keep < n ? min_keep : n;
        if (k >= keep) {
            k = 0;
            for (int64_t i = 0; i < n; i++) /* keeps the order, so sorted stays true */
                if ((double)c[i].l >= floor_l || c[i].l == max) c[k++] = c[i];
            n = k;
        } else { /* too few pass: the min_keep first instead */
            if (!sorted) rw_cand_select(c, n, keep, &s->sort);
            n = keep;
            sorted = true;
        }
    }
    const float max = max_logit(c, n, sorted);
    const float inv_t = 1.0f / s->p.temperature;
    /* one exp per candidate: the weight waits in p for the sum (four running
     * sums, so the adds are not one dependent chain) */
    memset(p, 0, (size_t)nv * sizeof *p);
    double sum4[4] = {0.0, 0.0, 0.0, 0.0};
    for (int64_t i = 0; i < n; i++) {
        const float w = weight(c[i].l, max, inv_t);
        sum4[i & 3] += w;
        p[c[i].id] = w;
    }
    const double inv_sum = 1.0 / ((sum4[0] + sum4[1]) + (sum4[2] + sum4[3]));
    for (int64_t i = 0; i < n; i++) p[c[i].id] = (float)(p[c[i].id] * inv_sum);
}
