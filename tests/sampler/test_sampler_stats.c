/* test_sampler_stats.c - the sampler's draws follow its distribution, and the
 * speculative rejection step preserves the target's: chi-square tests over
 * many seeds and positions. Every seed is fixed, so the statistics are fixed
 * numbers (printed); the bounds are the chi-square quantiles at 1 - 1e-4, so
 * a correct sampler passes with room, while in the normal build (200000
 * draws) a token drawn 5% too often at probability .3 alone would add about
 * 150. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/sampler.h"
#include "harness.h"

#define NV 8

/* Upper 1e-4 quantile of chi-square with df degrees of freedom
 * (Wilson-Hilferty; within a few percent for df >= 2). */
static double chi2_bound(int df) {
    const double z = 3.719, a = 2.0 / (9.0 * df);
    return df * pow(1.0 - a + z * sqrt(a), 3.0);
}

/* Pearson's statistic of counts against n * p; tokens with p = 0 must never
 * appear. Returns the statistic; *df = support - 1. */
static double chi2(const long *count, const float *p, int nv, long n, int *df, const char *what) {
    double x = 0.0;
    int support = 0;
    for (int t = 0; t < nv; t++) {
        if (p[t] <= 0.0f) {
            CHECK_MSG(count[t] == 0, "%s: token %d with probability 0 drawn %ld times", what, t, count[t]);
            continue;
        }
        support++;
        const double e = (double)n * p[t];
        x += (count[t] - e) * (count[t] - e) / e;
    }
    *df = support - 1;
    return x;
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

static void check_chi2(const char *what, const long *count, const float *p, long n) {
    int df;
    const double x = chi2(count, p, NV, n, &df, what);
    printf("%-44s chi2 %7.2f  df %d  bound %.2f\n", what, x, df, chi2_bound(df));
    CHECK_MSG(df >= 1 && x < chi2_bound(df), "%s: chi2 %.2f with %d degrees of freedom", what, x, df);
}

/* Draws along positions of one seed (accepting each token moves the
 * generator) and, separately, position 0 over many seeds. */
static void test_sampling(const char *what, const float *logits, rw_sampler_params sp, long n) {
    float p[NV];
    long count[NV] = {0};
    rw_sampler *s = new_sampler(&sp, NV);
    rw_sampler_probs(s, logits, p);
    for (long i = 0; i < n; i++) {
        const int32_t t = rw_sampler_sample(s, logits);
        count[t]++;
        CHECK(rw_sampler_accept(s, t, NULL) == RW_OK);
    }
    rw_sampler_free(s);
    char name[96];
    snprintf(name, sizeof name, "%s, positions", what);
    check_chi2(name, count, p, n);

    memset(count, 0, sizeof count);
    for (long i = 0; i < n / 4; i++) {
        sp.seed = (uint64_t)i;
        s = new_sampler(&sp, NV);
        count[rw_sampler_sample(s, logits)]++;
        rw_sampler_free(s);
    }
    snprintf(name, sizeof name, "%s, seeds", what);
    check_chi2(name, count, p, n / 4);
}

/* Rejection sampling with draft q against target p over many seeds: the
 * tokens follow p, the acceptance rate is sum min(p, q). */
static void test_spec(const char *what, const float *p, const float *q, int n_seeds, int n_steps) {
    long count[NV] = {0}, accepted = 0;
    const long n = (long)n_seeds * n_steps;
    for (int seed = 0; seed < n_seeds; seed++) {
        rw_sampler_params sp = rw_sampler_params_default();
        sp.temperature = 1.0f;
        sp.seed = (uint64_t)seed;
        rw_sampler *target = new_sampler(&sp, NV);
        sp.seed = (uint64_t)seed + 1000003; /* the draft's own generator */
        rw_sampler *draft = new_sampler(&sp, NV);
        for (int k = 0; k < n_steps; k++) {
            const int32_t d = rw_sampler_draw(draft, q);
            int32_t t = -1;
            const bool acc = rw_spec_accept(target, p, q, d, &t);
            CHECK(t >= 0 && t < NV && (!acc || t == d));
            accepted += acc;
            count[t]++;
            CHECK(rw_sampler_accept(target, t, NULL) == RW_OK && rw_sampler_accept(draft, t, NULL) == RW_OK);
        }
        rw_sampler_free(target);
        rw_sampler_free(draft);
    }
    check_chi2(what, count, p, n);
    double want = 0.0;
    for (int t = 0; t < NV; t++) want += fmin(p[t], q[t]);
    want = fmin(want, 1.0); /* the float vectors sum to 1 within rounding */
    const double rate = (double)accepted / n, sd = sqrt(want * (1.0 - want) / n);
    printf("%-44s accepted %.4f, sum min(p, q) %.4f\n", what, rate, want);
    CHECK_MSG(fabs(rate - want) <= 4.5 * sd + 1e-6, "%s: acceptance %.4f, want %.4f", what, rate, want);
}

static void test_spec_greedy(void) {
    /* a one-hot target: accepted exactly when the draft is its token, and
     * otherwise the target's token comes back */
    float p[NV] = {0}, q[NV];
    p[5] = 1.0f;
    for (int t = 0; t < NV; t++) q[t] = 1.0f / NV;
    rw_sampler_params sp = rw_sampler_params_default();
    rw_sampler *s = new_sampler(&sp, NV);
    for (int32_t d = 0; d < NV; d++) {
        int32_t t = -1;
        const bool acc = rw_spec_accept(s, p, q, d, &t);
        CHECK_EQ_INT(acc, d == 5);
        CHECK_EQ_INT(t, 5);
    }
    /* q = p: always accepted */
    int32_t t = -1;
    CHECK(rw_spec_accept(s, p, p, 5, &t) && t == 5);
    /* a draft token outside the vocabulary is rejected */
    CHECK(!rw_spec_accept(s, p, q, NV, &t) && t == 5);
    rw_sampler_free(s);
}

/* p = the distribution of a fresh sampler with sp after accepting hist. */
static void probs_after(const rw_sampler_params *sp, const float *logits, const int32_t *hist, int n_hist, float *p) {
    rw_sampler *s = new_sampler(sp, NV);
    for (int i = 0; i < n_hist; i++) CHECK(rw_sampler_accept(s, hist[i], NULL) == RW_OK);
    rw_sampler_probs(s, logits, p);
    rw_sampler_free(s);
}

/* rw_spec_verify with k = 2 over many seeds, penalties on and a history of
 * three tokens: out[0] follows p0, out[1] (when the first draft was accepted
 * as token x) follows p1 after x, out[2] follows p2 after both drafts. */
static void test_verify_sampled(long trials) {
    rw_sampler_params sp = rw_sampler_params_default();
    sp.temperature = 0.8f;
    sp.top_k = 6;
    sp.presence_penalty = 0.4f;
    sp.frequency_penalty = 0.3f;
    const int32_t hist[] = {3, 3, 1};
    const float rows[3][NV] = {{0.5f, 2.0f, -1.0f, 1.5f, 1.5f, -INFINITY, 0.0f, -3.0f},
                               {1.0f, 0.0f, 1.0f, -0.5f, 2.0f, 0.3f, 0.0f, -1.0f},
                               {0.0f, 0.0f, 3.0f, 1.0f, -2.0f, 0.5f, 0.5f, 0.25f}};
    const float q[2][NV] = {{0.05f, 0.3f, 0.05f, 0.2f, 0.2f, 0.1f, 0.0f, 0.1f},
                            {0.1f, 0.1f, 0.2f, 0.1f, 0.3f, 0.1f, 0.1f, 0.0f}};
    const int32_t x = 1, y = 4; /* the conditioning drafts */
    long c0[NV] = {0}, c1[NV] = {0}, c2[NV] = {0}, n1 = 0, n2 = 0;
    for (long t = 0; t < trials; t++) {
        sp.seed = (uint64_t)t;
        rw_sampler *target = new_sampler(&sp, NV);
        sp.seed = (uint64_t)t + 7777777;
        rw_sampler *draft = new_sampler(&sp, NV);
        for (int i = 0; i < 3; i++) CHECK(rw_sampler_accept(target, hist[i], NULL) == RW_OK);
        int32_t d[2];
        d[0] = rw_sampler_draw(draft, q[0]);
        CHECK(rw_sampler_accept(draft, d[0], NULL) == RW_OK);
        d[1] = rw_sampler_draw(draft, q[1]);
        int32_t out[3], n_out = 0;
        CHECK(rw_spec_verify(target, &rows[0][0], &q[0][0], d, 2, out, &n_out, NULL) == RW_OK);
        CHECK(n_out >= 1 && n_out <= 3 && rw_sampler_n_accepted(target) == 3 + n_out);
        for (int i = 0; i + 1 < n_out; i++) CHECK(out[i] == d[i]);
        c0[out[0]]++;
        if (n_out >= 2 && out[0] == x) {
            c1[out[1]]++;
            n1++;
        }
        if (n_out == 3 && out[0] == x && out[1] == y) {
            c2[out[2]]++;
            n2++;
        }
        rw_sampler_free(target);
        rw_sampler_free(draft);
    }
    float p[NV];
    const int32_t h1[] = {3, 3, 1, x}, h2[] = {3, 3, 1, x, y};
    probs_after(&sp, rows[0], hist, 3, p);
    check_chi2("verify k=2: first token", c0, p, trials);
    probs_after(&sp, rows[1], h1, 4, p);
    check_chi2("verify k=2: second, after draft x accepted", c1, p, n1);
    probs_after(&sp, rows[2], h2, 5, p);
    check_chi2("verify k=2: bonus, after x and y", c2, p, n2);
}

/* Greedy requests: exactly plain greedy decoding over the rows, with or
 * without q, whatever the drafts. */
static void test_verify_greedy(void) {
    float rows[5][NV];
    uint64_t x = 5;
    for (int iter = 0; iter < 400; iter++) {
        for (int i = 0; i < 5; i++)
            for (int t = 0; t < NV; t++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                rows[i][t] = (float)((int)(x >> 61)); /* 0..7: ties */
            }
        rw_sampler_params sp = rw_sampler_params_default();
        sp.presence_penalty = iter % 2 ? 1.5f : 0.0f;
        sp.seed = (uint64_t)iter;
        const int32_t k = iter % 5;
        /* drafts: the greedy tokens for a while, then something else */
        rw_sampler *plain = new_sampler(&sp, NV);
        int32_t want[5], n_want = 0, drafts[4];
        const int agree = iter % 6;
        for (int i = 0; i <= k; i++) {
            const int32_t t = rw_sampler_sample(plain, rows[i]);
            CHECK(rw_sampler_accept(plain, t, NULL) == RW_OK);
            want[n_want++] = t;
            if (i == k) break;
            drafts[i] = i < agree ? t : (t + 1 + iter % 7) % NV;
            if (drafts[i] != t) break;
        }
        for (int i = n_want; i < k; i++) drafts[i] = (int32_t)(i % NV); /* never reached */
        float q[4][NV];
        for (int i = 0; i < 4; i++)
            for (int t = 0; t < NV; t++) q[i][t] = 1.0f / NV;
        for (int use_q = 0; use_q < 2; use_q++) {
            rw_sampler *s = new_sampler(&sp, NV);
            int32_t out[5], n_out = -1;
            CHECK(rw_spec_verify(s, &rows[0][0], use_q ? &q[0][0] : NULL, drafts, k, out, &n_out, NULL) == RW_OK);
            CHECK_EQ_INT(n_out, n_want);
            for (int i = 0; i < n_want && i < n_out; i++) CHECK_EQ_INT(out[i], want[i]);
            CHECK_EQ_INT(rw_sampler_n_accepted(s), n_want);
            rw_sampler_free(s);
        }
        rw_sampler_free(plain);
    }
    /* a bad draft token is an error, and nothing is accepted */
    rw_sampler_params sp = rw_sampler_params_default();
    rw_sampler *s = new_sampler(&sp, NV);
    int32_t out[2], n_out = 5, bad = NV;
    rw_error err = {0};
    CHECK(rw_spec_verify(s, &rows[0][0], NULL, &bad, 1, out, &n_out, &err) == RW_ERR_INVALID_ARG);
    CHECK(n_out == 0 && rw_sampler_n_accepted(s) == 0);
    rw_sampler_free(s);
}

int main(void) {
    const bool san = rw_test_sanitized();
    const long n = san ? 40000 : 200000;
    const float logits[NV] = {0.5f, 2.0f, -1.0f, 1.5f, 1.5f, -INFINITY, 0.0f, -3.0f};

    rw_sampler_params sp = rw_sampler_params_default();
    sp.temperature = 1.0f;
    test_sampling("T 1", logits, sp, n);
    sp.temperature = 0.6f;
    sp.top_k = 5;
    test_sampling("T .6 top-k 5", logits, sp, n);
    sp.temperature = 1.4f;
    sp.top_k = 0;
    sp.top_p = 0.9f;
    sp.min_p = 0.1f;
    sp.seed = 99;
    test_sampling("T 1.4 top-p .9 min-p .1", logits, sp, n);

    /* speculative: q wrong in both directions, zeros on either side */
    const float p[NV] = {0.30f, 0.25f, 0.15f, 0.10f, 0.10f, 0.05f, 0.05f, 0.0f};
    const float q[NV] = {0.10f, 0.40f, 0.0f, 0.10f, 0.20f, 0.05f, 0.05f, 0.10f};
    test_spec("spec: q far from p", p, q, san ? 200 : 1000, 200);
    test_spec("spec: q = p", p, p, san ? 100 : 500, 200);
    const float q1[NV] = {0, 0, 0, 0, 0, 0, 0, 1.0f}; /* a greedy draft, always wrong */
    test_spec("spec: one-hot draft outside p", p, q1, san ? 100 : 500, 200);
    test_spec_greedy();
    test_verify_greedy();
    test_verify_sampled(san ? 20000 : 100000);
    return rw_test_done();
}
