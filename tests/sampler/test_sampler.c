/* test_sampler.c - each step of the sampler chain against a plain reference
 * on small hand-made rows (ties, -inf, NaN, all equal, filters off),
 * greedy == rw_argmax, penalties with windows and rewinds, logit bias,
 * logprobs, reproducibility by seed, parameter errors. The statistical
 * tests are in test_sampler_stats.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/sampler.h"
#include "harness.h"

#define NV_MAX 64

/* ---- the reference: the chain of sampler.h written as plainly as
 * possible, in double, over index lists ---- */

static bool before(const float *l, int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); }

static double ref_weight(float l, float max, float t) {
    if (isinf(max)) return l == max ? 1.0 : 0.0;
    return expf((l - max) * (1.0f / t)); /* in float, as sampler.h says */
}

static void ref_probs(const float *logits, int n, const rw_sampler_params *sp, const int32_t *hist, int n_hist,
                      double *p) {
    float l[NV_MAX];
    memcpy(l, logits, (size_t)n * sizeof *l);
    for (int i = 0; i < sp->n_logit_bias; i++) l[sp->logit_bias[i].token] += sp->logit_bias[i].bias;
    int count[NV_MAX] = {0};
    int from = sp->penalty_last_n > 0 && n_hist > sp->penalty_last_n ? n_hist - sp->penalty_last_n : 0;
    for (int i = from; i < n_hist; i++) count[hist[i]]++;
    for (int t = 0; t < n; t++) {
        if (!count[t]) continue;
        const float r = sp->repeat_penalty;
        if (r != 1.0f && r != 0.0f) l[t] = l[t] <= 0.0f ? l[t] * r : l[t] / r;
        l[t] -= (float)count[t] * sp->frequency_penalty + sp->presence_penalty;
    }
    for (int t = 0; t < n; t++) p[t] = 0.0;
    if (sp->temperature <= 0.0f) {
        p[rw_argmax(l, n)] = 1.0;
        return;
    }
    for (int t = 0; t < n; t++)
        if (isnan(l[t])) l[t] = -INFINITY;
    int order[NV_MAX];
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) /* insertion sort, best first */
        for (int j = i; j > 0 && before(l, order[j], order[j - 1]); j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    int kept = n;
    const int min_keep = sp->min_keep > 1 ? sp->min_keep : 1;
    if (sp->top_k > 0 && sp->top_k < kept) kept = sp->top_k;
    if (sp->top_p < 1.0f) { /* exact integer units of 2^-32 (sampler_chain.c) */
        uint64_t units[NV_MAX], total = 0, cum = 0;
        for (int i = 0; i < kept; i++) {
            units[i] = (uint64_t)(ref_weight(l[order[i]], l[order[0]], 1.0f) * 4294967296.0 + 0.5);
            total += units[i];
        }
        const uint64_t thr = (uint64_t)ceil((double)sp->top_p * (double)total);
        for (int i = 0; i < kept; i++) {
            cum += units[i];
            if (cum >= thr && i + 1 >= min_keep) {
                kept = i + 1;
                break;
            }
        }
    }
    if (sp->min_p > 0.0f) {
        int k = 0, pass[NV_MAX];
        for (int i = 0; i < kept; i++)
            if ((double)l[order[i]] >= (double)l[order[0]] + log((double)sp->min_p) || l[order[i]] == l[order[0]])
                pass[k++] = order[i];
        if (k >= (min_keep < kept ? min_keep : kept)) {
            memcpy(order, pass, (size_t)k * sizeof *order);
            kept = k;
        } else {
            kept = min_keep; /* the first min_keep in order (fewer than kept) */
        }
    }
    double sum = 0.0;
    for (int i = 0; i < kept; i++) sum += ref_weight(l[order[i]], l[order[0]], sp->temperature);
    for (int i = 0; i < kept; i++) p[order[i]] = ref_weight(l[order[i]], l[order[0]], sp->temperature) / sum;
}

static rw_sampler *new_sampler(const rw_sampler_params *sp, int n) {
    rw_sampler *s = NULL;
    rw_error err = {0};
    if (rw_sampler_new(sp, n, &s, &err) != RW_OK) {
        fprintf(stderr, "rw_sampler_new: %s\n", err.msg);
        exit(1);
    }
    return s;
}

/* rw_sampler_probs after accepting hist equals the reference: same support,
 * values within 1e-6; and sampling agrees with drawing from it. */
static void check_probs(const char *what, const float *logits, int n, const rw_sampler_params *sp, const int32_t *hist,
                        int n_hist) {
    rw_sampler *s = new_sampler(sp, n);
    for (int i = 0; i < n_hist; i++) CHECK(rw_sampler_accept(s, hist[i], NULL) == RW_OK);
    float p[NV_MAX];
    double want[NV_MAX];
    rw_sampler_probs(s, logits, p);
    ref_probs(logits, n, sp, hist, n_hist, want);
    for (int t = 0; t < n; t++) {
        CHECK_MSG((p[t] > 0.0f) == (want[t] > 0.0) && fabs(p[t] - want[t]) < 1e-6, "%s: token %d: %.9g, want %.9g",
                  what, t, (double)p[t], want[t]);
    }
    CHECK_EQ_INT(rw_sampler_sample(s, logits), rw_sampler_draw(s, p));
    rw_sampler_free(s);
}

/* Expected values written out by hand for the edge cases. */
static void check_expect(const char *what, const float *logits, int n, const rw_sampler_params *sp,
                         const double *want) {
    rw_sampler *s = new_sampler(sp, n);
    float p[NV_MAX];
    rw_sampler_probs(s, logits, p);
    for (int t = 0; t < n; t++)
        CHECK_MSG(fabs(p[t] - want[t]) < 1e-6 && ((p[t] > 0.0f) == (want[t] > 0.0)), "%s: token %d: %.9g, want %.9g",
                  what, t, (double)p[t], want[t]);
    rw_sampler_free(s);
}

static rw_sampler_params with_temp(float t) {
    rw_sampler_params sp = rw_sampler_params_default();
    sp.temperature = t;
    return sp;
}

static void test_edges(void) {
    const float L = logf(1.0f);
    rw_sampler_params sp = with_temp(1.0f);
    { /* temperature: T = 2 over {0, log 4} -> weights 1, 2 */
        const float l[] = {0.0f, logf(4.0f)};
        sp = with_temp(2.0f);
        check_expect("temperature 2", l, 2, &sp, (const double[]){1.0 / 3, 2.0 / 3});
    }
    { /* top-k: 0 is off; ties kept by lower id */
        const float l[] = {1.0f, 3.0f, 3.0f, -2.0f, 3.0f};
        sp = with_temp(1.0f);
        check_probs("top-k off", l, 5, &sp, NULL, 0);
        sp.top_k = 2;
        check_expect("top-k 2 ties", l, 5, &sp, (const double[]){0, 0.5, 0.5, 0, 0});
        sp.top_k = 5;
        check_probs("top-k = n", l, 5, &sp, NULL, 0);
        sp.top_k = 99;
        check_probs("top-k > n", l, 5, &sp, NULL, 0);
    }
    { /* top-p: probabilities .5 .3 .2 */
        const float l[] = {logf(0.3f), logf(0.5f), logf(0.2f)};
        sp = with_temp(1.0f);
        sp.top_p = 1.0f;
        check_expect("top-p off", l, 3, &sp, (const double[]){0.3, 0.5, 0.2});
        sp.top_p = 0.75f;
        check_expect("top-p .75", l, 3, &sp, (const double[]){0.375, 0.625, 0});
        sp.top_p = 0.4f;
        check_expect("top-p .4", l, 3, &sp, (const double[]){0, 1, 0});
        sp.top_p = 0.0f;
        check_expect("top-p 0", l, 3, &sp, (const double[]){0, 1, 0});
        sp.top_p = 0.9f;
        check_probs("top-p .9", l, 3, &sp, NULL, 0);
    }
    { /* min_keep: top-p and min-p keep at least that many */
        const float l[] = {logf(0.3f), logf(0.5f), logf(0.2f)};
        sp = with_temp(1.0f);
        sp.top_p = 0.0f;
        sp.min_keep = 2;
        check_expect("top-p 0 min_keep 2", l, 3, &sp, (const double[]){0.375, 0.625, 0});
        sp.top_p = 1.0f;
        sp.min_p = 1.0f;
        sp.min_keep = 2;
        check_expect("min-p 1 min_keep 2", l, 3, &sp, (const double[]){0.375, 0.625, 0});
        sp.min_keep = 5; /* more than there are */
        check_expect("min_keep > n", l, 3, &sp, (const double[]){0.3, 0.5, 0.2});
    }
    { /* min-p: relative probabilities 1 .6 .4 .5, floor .5 */
        const float l[] = {L, logf(0.6f), logf(0.4f), logf(0.5f)};
        sp = with_temp(1.0f);
        check_probs("min-p off", l, 4, &sp, NULL, 0);
        sp.min_p = 0.45f;
        check_expect("min-p .45", l, 4, &sp, (const double[]){1 / 2.1, 0.6 / 2.1, 0, 0.5 / 2.1});
        sp.min_p = 1.0f;
        check_expect("min-p 1", l, 4, &sp, (const double[]){1, 0, 0, 0});
    }
    { /* -inf, NaN, +inf, all equal */
        const float a[] = {-INFINITY, 0.0f, -INFINITY, 0.0f};
        sp = with_temp(0.7f);
        check_expect("-inf", a, 4, &sp, (const double[]){0, 0.5, 0, 0.5});
        const float b[] = {-INFINITY, -INFINITY, -INFINITY};
        check_expect("all -inf", b, 3, &sp, (const double[]){1.0 / 3, 1.0 / 3, 1.0 / 3});
        sp.top_k = 2;
        check_expect("all -inf top-k", b, 3, &sp, (const double[]){0.5, 0.5, 0});
        sp.top_k = 0;
        sp.top_p = 0.5f;
        check_expect("all -inf top-p", b, 3, &sp, (const double[]){0.5, 0.5, 0}); /* cum 1/3, 2/3 */
        sp.top_p = 1.0f;
        const float c[] = {NAN, 1.0f, NAN, 1.0f};
        check_expect("NaN", c, 4, &sp, (const double[]){0, 0.5, 0, 0.5});
        const float d[] = {INFINITY, 5.0f, INFINITY};
        check_expect("+inf", d, 3, &sp, (const double[]){0.5, 0, 0.5});
        const float e[] = {2.0f, 2.0f, 2.0f, 2.0f};
        sp.min_p = 0.9f;
        sp.top_p = 0.6f; /* cum .25 .5 .75 */
        check_expect("all equal", e, 4, &sp, (const double[]){1.0 / 3, 1.0 / 3, 1.0 / 3, 0});
    }
    { /* greedy: one-hot at rw_argmax, filters irrelevant */
        const float l[] = {1.0f, 3.0f, NAN, 3.0f};
        sp = rw_sampler_params_default();
        sp.top_k = 1;
        sp.top_p = 0.1f;
        sp.min_p = 0.5f;
        check_expect("greedy", l, 4, &sp, (const double[]){0, 1, 0, 0});
    }
}

/* rw_argmax as it was first written: the reference. */
static int32_t argmax_ref(const float *l, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (l[i] > l[best] || (l[best] != l[best] && l[i] == l[i])) best = i;
    return (int32_t)best;
}

static void test_greedy_bitwise(void) {
    /* rw_argmax as before, and the sampler at temperature <= 0 is it. */
    const float a[] = {1.0f, 3.0f, 3.0f, -2.0f};
    CHECK_EQ_INT(rw_argmax(a, 4), 1);
    const float b[] = {NAN, -5.0f, NAN, -1.0f};
    CHECK_EQ_INT(rw_argmax(b, 4), 3);
    uint64_t x = 12345;
    float row[NV_MAX];
    for (int iter = 0; iter < 2000; iter++) {
        const int n = 1 + iter % NV_MAX;
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const int r = (int)(x >> 59); /* 0..31: few values, many ties */
            row[i] = r == 0     ? NAN
                     : r == 1   ? -INFINITY
                     : r == 2   ? INFINITY
                     : r == 3   ? -0.0f
                     : iter % 3 ? (float)(r % 7) * 0.5f
                                : -(float)(r % 7);            /* all <= 0: zeros of both signs can win */
            if (iter % 11 == 0) row[i] = NAN;                 /* all NaN */
            if (iter % 13 == 0 && r != 0) row[i] = -INFINITY; /* NaN and -inf only */
        }
        rw_sampler_params sp = rw_sampler_params_default();
        sp.temperature = iter % 2 ? 0.0f : -1.0f;
        sp.top_k = iter % 5;
        sp.seed = (uint64_t)iter;
        rw_sampler *s = new_sampler(&sp, n);
        CHECK_EQ_INT(rw_argmax(row, n), argmax_ref(row, n));
        CHECK_EQ_INT(rw_sampler_sample(s, row), argmax_ref(row, n));
        rw_sampler_free(s);
    }
}

static void test_argmax_long(void) {
    /* long rows: the max in every lane, at the ends, repeated, tail lengths */
    enum { N = 1031 };
    float *row = malloc(N * sizeof *row);
    uint64_t x = 99;
    for (int iter = 0; iter < 300; iter++) {
        const int n = N - iter % 17;
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            row[i] = (float)((int)(x >> 52) - 2048) / 64.0f;
        }
        if (iter % 3 == 0) row[iter % n] = 100.0f;
        if (iter % 5 == 0) row[n - 1] = 100.0f;
        if (iter % 7 == 0) row[(iter * 31) % n] = NAN;
        if (iter % 4 == 0) row[0] = NAN;
        CHECK_EQ_INT(rw_argmax(row, n), argmax_ref(row, n));
    }
    free(row);
}

static void test_penalties(void) {
    const float flat[] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float mixed[] = {1.5f, -0.5f, 2.0f, 0.25f};
    const int32_t hist[] = {1, 1, 2, 3, 1};
    rw_sampler_params sp = with_temp(1.0f);
    sp.presence_penalty = 1.0f;
    sp.frequency_penalty = 0.5f;
    check_probs("presence+frequency", flat, 4, &sp, hist, 3);
    /* by hand: counts 1:2, 2:1 -> logits {0, -2, -1.5, 0} */
    {
        rw_sampler *s = new_sampler(&sp, 4);
        CHECK(rw_sampler_accept(s, 1, NULL) == RW_OK && rw_sampler_accept(s, 1, NULL) == RW_OK &&
              rw_sampler_accept(s, 2, NULL) == RW_OK);
        float p[4];
        rw_sampler_probs(s, flat, p);
        const double z = 2.0 + exp(-2.0) + exp(-1.5);
        CHECK(fabs(p[0] - 1.0 / z) < 1e-6 && fabs(p[1] - exp(-2.0) / z) < 1e-6 && fabs(p[2] - exp(-1.5) / z) < 1e-6);
        rw_sampler_free(s);
    }
    sp.penalty_last_n = 2;
    check_probs("window 2", mixed, 4, &sp, hist, 5);
    sp.repeat_penalty = 1.3f;
    check_probs("repeat", mixed, 4, &sp, hist, 5);
    sp.penalty_last_n = 0;
    check_probs("repeat all", mixed, 4, &sp, hist, 5);
    sp.presence_penalty = -0.75f; /* negative penalties encourage, as OpenAI allows */
    sp.frequency_penalty = 0.0f;
    check_probs("negative presence", mixed, 4, &sp, hist, 4);
    sp.temperature = 0.0f;
    check_probs("greedy penalized", mixed, 4, &sp, hist, 5);

    /* rewind restores the counts exactly, in and out of the window */
    for (int32_t last_n = 0; last_n <= 3; last_n++) {
        sp = with_temp(0.8f);
        sp.frequency_penalty = 0.4f;
        sp.presence_penalty = 0.3f;
        sp.repeat_penalty = 1.1f;
        sp.penalty_last_n = last_n;
        rw_sampler *s = new_sampler(&sp, 4);
        for (int i = 0; i < 5; i++) CHECK(rw_sampler_accept(s, hist[i], NULL) == RW_OK);
        for (int keep = 5; keep >= 0; keep--) {
            rw_sampler_rewind(s, keep);
            CHECK_EQ_INT(rw_sampler_n_accepted(s), keep);
            float p[4];
            double want[4];
            rw_sampler_probs(s, mixed, p);
            ref_probs(mixed, 4, &sp, hist, keep, want);
            for (int t = 0; t < 4; t++)
                CHECK_MSG(fabs(p[t] - want[t]) < 1e-6, "last_n %d keep %d token %d", (int)last_n, keep, t);
        }
        rw_sampler_free(s);
    }
}

static void test_bias(void) {
    const float l[] = {0.0f, 0.0f, 0.0f};
    rw_sampler_params sp = with_temp(1.0f);
    const rw_logit_bias b1[] = {{2, logf(2.0f)}};
    sp.logit_bias = b1;
    sp.n_logit_bias = 1;
    check_expect("bias", l, 3, &sp, (const double[]){0.25, 0.25, 0.5});
    const rw_logit_bias b2[] = {{0, -INFINITY}, {2, 1.0f}, {2, -1.0f}}; /* entries add up */
    sp.logit_bias = b2;
    sp.n_logit_bias = 3;
    check_expect("ban", l, 3, &sp, (const double[]){0, 0.5, 0.5});
    sp.temperature = 0.0f;
    const rw_logit_bias b3[] = {{2, 0.5f}};
    sp.logit_bias = b3;
    sp.n_logit_bias = 1;
    rw_sampler *s = new_sampler(&sp, 3);
    CHECK_EQ_INT(rw_sampler_sample(s, l), 2);
    rw_sampler_free(s);
    /* the copy is the sampler's: the caller's array can go */
    rw_logit_bias tmp[] = {{1, 3.0f}};
    sp.logit_bias = tmp;
    s = new_sampler(&sp, 3);
    tmp[0].token = 0;
    CHECK_EQ_INT(rw_sampler_sample(s, l), 1);
    rw_sampler_free(s);
}

/* A random-ish row of n logits in [-4, 4) with a few ties and a -inf. */
static void fill_row(float *row, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        row[i] = (float)((int)(seed >> 40) % 64) / 8.0f - 4.0f;
    }
    if (n > 3) row[n / 2] = -INFINITY;
}

static void test_combined(void) {
    /* every combination of the chain against the reference on random rows */
    const float temps[] = {0.0f, 0.3f, 1.0f, 1.7f};
    const int32_t ks[] = {0, 1, 3, 40};
    const float ps[] = {1.0f, 0.9f, 0.5f, 0.0f};
    const float mps[] = {0.0f, 0.05f, 0.3f};
    const int32_t hist[] = {3, 7, 3, 11, 3, 20, 7};
    float row[NV_MAX];
    int iter = 0;
    for (int ti = 0; ti < 4; ti++)
        for (int ki = 0; ki < 4; ki++)
            for (int pi = 0; pi < 4; pi++)
                for (int mi = 0; mi < 3; mi++, iter++) {
                    const int n = 24 + iter % 40;
                    fill_row(row, n, (uint64_t)iter);
                    rw_sampler_params sp = rw_sampler_params_default();
                    sp.temperature = temps[ti];
                    sp.top_k = ks[ki];
                    sp.top_p = ps[pi];
                    sp.min_p = mps[mi];
                    sp.presence_penalty = iter % 3 ? 0.2f : 0.0f;
                    sp.frequency_penalty = iter % 2 ? 0.3f : 0.0f;
                    sp.repeat_penalty = iter % 4 ? 1.0f : 1.2f;
                    sp.penalty_last_n = iter % 5;
                    sp.min_keep = iter % 9 == 0 ? 5 : iter % 9 == 1 ? 1 : 0;
                    const rw_logit_bias b[] = {{5, 1.5f}, {6, -INFINITY}};
                    sp.logit_bias = b;
                    sp.n_logit_bias = iter % 7 == 0 ? 2 : 0;
                    char what[64];
                    snprintf(what, sizeof what, "combined %d", iter);
                    check_probs(what, row, n, &sp, hist, iter % 8);
                }
}

typedef struct {
    float l;
    int id;
} lid;

static int cmp_lid(const void *a, const void *b) {
    const lid *x = a, *y = b;
    if (x->l != y->l) return x->l > y->l ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id ? 1 : 0;
}

/* The top-p kept count of sampler.h over a whole row, by a full sort. */
static int ref_top_p_count(const float *row, int n, float top_p, int min_keep) {
    lid *o = malloc((size_t)n * sizeof *o);
    for (int i = 0; i < n; i++) o[i] = (lid){isnan(row[i]) ? -INFINITY : row[i], i};
    qsort(o, (size_t)n, sizeof *o, cmp_lid);
    uint64_t total = 0, cum = 0;
    for (int i = 0; i < n; i++) total += (uint64_t)(ref_weight(o[i].l, o[0].l, 1.0f) * 4294967296.0 + 0.5);
    const uint64_t thr = (uint64_t)ceil((double)top_p * (double)total);
    int kept = n;
    for (int i = 0; i < n; i++) {
        cum += (uint64_t)(ref_weight(o[i].l, o[0].l, 1.0f) * 4294967296.0 + 0.5);
        if (cum >= thr && i + 1 >= min_keep) {
            kept = i + 1;
            break;
        }
    }
    free(o);
    return kept;
}

static void test_large_vocab(void) {
    /* top-p over more than 1024 candidates (the first 256 sorted, or a
     * selection on the cumulative mass) against a full sort, and against
     * the path that sorts everything (top-k first) */
    enum { N = 5000 };
    float *row = malloc(N * sizeof *row), *p = malloc(N * sizeof *p), *p2 = malloc(N * sizeof *p2);
    const float top_ps[] = {0.0f, 0.05f, 0.5f, 0.9f, 0.999f, 0.9999999f};
    uint64_t x = 2024;
    for (int kind = 0; kind < 5; kind++) {
        const int n = kind == 3 ? 1500 : kind == 4 ? 2049 : N;
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const float u = (float)(x >> 40) / 16777216.0f;
            row[i] = kind == 0   ? (float)((i * 7919) % 1000) / 100.0f        /* many ties */
                     : kind == 1 ? 0.6f * u - 0.3f                            /* flat */
                     : kind == 2 ? (i % 97 == 0 ? 6.0f + u : 8.0f * u - 8.0f) /* peaked */
                     : kind == 3 ? (float)(int)(u * 4.0f)                     /* four values */
                                 : (i < n - 1 ? 1.0f : -INFINITY);            /* all equal: top-p .5 ends exactly
                                                                                 at the first pivot (id 1024) */
            if (i % 101 == 7 && kind != 4) row[i] = -INFINITY;                /* -inf: top-k n - 1 below drops one */
        }
        for (int j = 0; j < 6; j++)
            for (int mk = 0; mk < 2; mk++) {
                rw_sampler_params sp = with_temp(0.9f);
                sp.top_p = top_ps[j];
                sp.min_keep = mk ? 300 : 0;
                rw_sampler *s = new_sampler(&sp, n);
                rw_sampler_probs(s, row, p);
                sp.top_k = n - 1; /* top-k sorts everything first: the other path */
                rw_sampler *s2 = new_sampler(&sp, n);
                rw_sampler_probs(s2, row, p2);
                int kept = 0, kept2 = 0;
                double sum = 0.0;
                for (int i = 0; i < n; i++) {
                    kept += p[i] > 0.0f;
                    kept2 += p2[i] > 0.0f;
                    sum += p[i];
                }
                const int want = ref_top_p_count(row, n, top_ps[j], sp.min_keep);
                CHECK_MSG(kept == want, "rows %d top-p %g min_keep %d: kept %d, want %d", kind, (double)top_ps[j],
                          (int)sp.min_keep, kept, want);
                /* the kept set is a prefix of the total order */
                float lo = INFINITY;
                int lo_id = -1;
                for (int i = 0; i < n; i++)
                    if (p[i] > 0.0f && (row[i] < lo || (row[i] == lo && i > lo_id))) lo = row[i], lo_id = i;
                int bad = 0;
                for (int i = 0; i < n; i++)
                    if (p[i] == 0.0f && !(row[i] < lo || (row[i] == lo && i > lo_id)) && !isinf(row[i])) bad++;
                CHECK_MSG(bad == 0, "rows %d top-p %g: %d dropped tokens above the kept ones", kind, (double)top_ps[j],
                          bad);
                CHECK_MSG(fabs(sum - 1.0) < 1e-5, "sum %.9g", sum);
                if (want < n - 1) { /* the same set, the same values up to the sum's order */
                    CHECK_EQ_INT(kept2, kept);
                    for (int i = 0; i < n; i++)
                        CHECK((p[i] > 0.0f) == (p2[i] > 0.0f) && fabsf(p[i] - p2[i]) <= 1e-6f * p[i] + 1e-30f);
                }
                rw_sampler_free(s);
                rw_sampler_free(s2);
            }
    }
    free(row);
    free(p);
    free(p2);
}

static void test_logprobs(void) {
    const float l[] = {1.0f, 3.0f, 3.0f, -2.0f, NAN, 0.5f};
    rw_sampler_params sp = with_temp(0.5f);
    sp.top_k = 3;
    rw_sampler *s = new_sampler(&sp, 6);
    double lse = 0.0;
    for (int i = 0; i < 6; i++)
        if (!isnan(l[i])) lse += exp(l[i]);
    lse = log(lse);
    rw_token_logprob top[RW_MAX_TOP_LOGPROBS];
    float lp = 0.0f;
    int32_t n = rw_sampler_logprobs(s, l, RW_LOGPROBS_RAW, 0, 4, &lp, top);
    CHECK_EQ_INT(n, 4);
    CHECK(fabs(lp - (1.0 - lse)) < 1e-6);
    const int32_t want_ids[] = {1, 2, 0, 5};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(top[i].token, want_ids[i]);
        CHECK(fabs(top[i].logprob - (l[want_ids[i]] - lse)) < 1e-6);
    }
    n = rw_sampler_logprobs(s, l, RW_LOGPROBS_RAW, 4, 100, &lp, top); /* n_top clamps to the vocabulary */
    CHECK_EQ_INT(n, 6);
    CHECK(lp == -INFINITY && top[5].token == 4 && top[5].logprob == -INFINITY);
    /* sampled: top-k 3 keeps 1, 2, 0; T = 0.5 */
    const double z = 2.0 * exp(0.0) + exp((1.0 - 3.0) / 0.5);
    n = rw_sampler_logprobs(s, l, RW_LOGPROBS_SAMPLED, 0, 20, &lp, top);
    CHECK_EQ_INT(n, 3);
    CHECK(fabs(lp - log(exp(-4.0) / z)) < 1e-5);
    CHECK(top[0].token == 1 && top[1].token == 2 && top[2].token == 0);
    CHECK(fabs(top[0].logprob - log(1.0 / z)) < 1e-6);
    n = rw_sampler_logprobs(s, l, RW_LOGPROBS_SAMPLED, 3, 0, &lp, top);
    CHECK(n == 0 && lp == -INFINITY);
    rw_sampler_free(s);
    /* 25 tokens: at most RW_MAX_TOP_LOGPROBS alternatives */
    float row[25];
    fill_row(row, 25, 9);
    sp = rw_sampler_params_default();
    s = new_sampler(&sp, 25);
    CHECK_EQ_INT(rw_sampler_logprobs(s, row, RW_LOGPROBS_RAW, 0, 25, &lp, top), RW_MAX_TOP_LOGPROBS);
    for (int i = 1; i < RW_MAX_TOP_LOGPROBS; i++)
        CHECK(top[i - 1].logprob > top[i].logprob ||
              (top[i - 1].logprob == top[i].logprob && top[i - 1].token < top[i].token));
    CHECK_EQ_INT(rw_sampler_logprobs(s, row, RW_LOGPROBS_SAMPLED, 0, 5, &lp, top), 1); /* greedy: one token */
    CHECK(top[0].token == rw_argmax(row, 25) && top[0].logprob == 0.0f);
    rw_sampler_free(s);
}

static void test_reproducible(void) {
    float row[40];
    fill_row(row, 40, 3);
    rw_sampler_params sp = with_temp(1.3f);
    sp.top_k = 30;
    sp.top_p = 0.95f;
    sp.frequency_penalty = 0.2f;
    sp.seed = 77;
    rw_sampler *a = new_sampler(&sp, 40), *b = new_sampler(&sp, 40);
    int32_t seq[64];
    for (int i = 0; i < 64; i++) {
        seq[i] = rw_sampler_sample(a, row);
        /* sampling again without accepting gives the same token */
        CHECK_EQ_INT(rw_sampler_sample(a, row), seq[i]);
        CHECK(rw_sampler_accept(a, seq[i], NULL) == RW_OK);
        /* b samples other rows in between: no effect */
        float other[40];
        fill_row(other, 40, (uint64_t)i + 100);
        (void)rw_sampler_sample(b, other);
        CHECK_EQ_INT(rw_sampler_sample(b, row), seq[i]);
        CHECK(rw_sampler_accept(b, seq[i], NULL) == RW_OK);
    }
    /* rewind to 10 and regenerate: the same tokens */
    rw_sampler_rewind(a, 10);
    for (int i = 10; i < 64; i++) {
        CHECK_EQ_INT(rw_sampler_sample(a, row), seq[i]);
        CHECK(rw_sampler_accept(a, seq[i], NULL) == RW_OK);
    }
    rw_sampler_free(a);
    rw_sampler_free(b);
    /* another seed gives another sequence */
    sp.seed = 78;
    rw_sampler *c = new_sampler(&sp, 40);
    int same = 0;
    for (int i = 0; i < 64; i++) {
        int32_t t = rw_sampler_sample(c, row);
        same += t == seq[i];
        CHECK(rw_sampler_accept(c, t, NULL) == RW_OK);
    }
    CHECK_MSG(same < 32, "%d of 64 equal across seeds", same);
    rw_sampler_free(c);
}

static void test_errors(void) {
    rw_sampler *s = (rw_sampler *)1;
    rw_error err = {0};
    rw_sampler_params sp = rw_sampler_params_default();
    CHECK(rw_sampler_new(&sp, 0, &s, &err) == RW_ERR_INVALID_ARG && s == NULL);
    sp.top_p = 1.5f;
    CHECK(rw_sampler_new(&sp, 4, &s, &err) == RW_ERR_RANGE);
    sp = rw_sampler_params_default();
    sp.temperature = NAN;
    CHECK(rw_sampler_new(&sp, 4, &s, &err) == RW_ERR_RANGE);
    sp = rw_sampler_params_default();
    sp.min_p = -0.1f;
    CHECK(rw_sampler_new(&sp, 4, &s, &err) == RW_ERR_RANGE);
    sp = rw_sampler_params_default();
    sp.min_keep = -1;
    CHECK(rw_sampler_new(&sp, 4, &s, &err) == RW_ERR_RANGE);
    sp = rw_sampler_params_default();
    sp.frequency_penalty = INFINITY;
    CHECK(rw_sampler_new(&sp, 4, &s, &err) == RW_ERR_RANGE);
    sp = rw_sampler_params_default();
    const rw_logit_bias b[] = {{4, 1.0f}};
    sp.logit_bias = b;
    sp.n_logit_bias = 1;
    CHECK(rw_sampler_new(&sp, 4, &s, &err) == RW_ERR_RANGE);
    CHECK_MSG(strstr(err.msg, "token 4") != NULL, "%s", err.msg);
    sp = rw_sampler_params_default();
    CHECK(rw_sampler_new(&sp, 4, &s, &err) == RW_OK);
    CHECK(rw_sampler_accept(s, 4, &err) == RW_ERR_INVALID_ARG);
    CHECK(rw_sampler_accept(s, -1, &err) == RW_ERR_INVALID_ARG);
    CHECK_EQ_INT(rw_sampler_n_accepted(s), 0);
    for (int i = 0; i < 1000; i++) CHECK(rw_sampler_accept(s, i % 4, NULL) == RW_OK); /* history grows */
    CHECK_EQ_INT(rw_sampler_n_accepted(s), 1000);
    rw_sampler_free(s);
    rw_sampler_free(NULL);
}

int main(void) {
    test_edges();
    test_greedy_bitwise();
    test_argmax_long();
    test_penalties();
    test_bias();
    test_combined();
    test_large_vocab();
    test_logprobs();
    test_reproducible();
    test_errors();
    return rw_test_done();
}
