/* test_ops.c - the stateless kernels of ops.h against double-precision
 * formulas written here, in every available tier: grouped / L2 / gated RMS
 * norms, SiLU, GEGLU, sigmoid, softplus, softmax, multi-section RoPE (against
 * rw_rope_cache per stream, with the section maps spelled out), MoE routing
 * (against a brute-force sort), f16 rows (against the scalar conversion) and
 * the causal conv1d (against a whole-sequence convolution; one token per call
 * and several per call give the same bits). The tiered kernels (gated norm,
 * SiLU, softmax) must give the reference's bits in every tier. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static const char *tier_name;

/* |got - want| <= rel * |want| + abs */
static bool near(double got, double want, double rel, double abs_tol) {
    return fabs(got - want) <= rel * fabs(want) + abs_tol;
}

static void check_norms(void) {
    const int sizes[] = {1, 3, 16, 17, 64, 100, 128, 255};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int gs = sizes[si], ng = 3, n = gs * ng;
        float *x = malloc((size_t)n * 4), *w = malloc((size_t)n * 4), *z = malloc((size_t)n * 4);
        float *y = malloc((size_t)n * 4), *y2 = malloc((size_t)n * 4);
        for (int i = 0; i < n; i++) x[i] = 5.0f * frand(), w[i] = 1.0f + frand(), z[i] = 8.0f * frand();
        for (int shared = 0; shared <= 1; shared++) {
            rw_rmsnorm_groups(x, w, shared ? 0 : gs, ng, gs, 1e-6f, y);
            int bad = 0;
            for (int g = 0; g < ng; g++) {
                double ss = 0;
                for (int i = 0; i < gs; i++) ss += (double)x[g * gs + i] * x[g * gs + i];
                const double r = 1.0 / sqrt(ss / gs + 1e-6);
                for (int i = 0; i < gs; i++) {
                    const double want = x[g * gs + i] * r * w[(shared ? 0 : g * gs) + i];
                    bad += !near(y[g * gs + i], want, 1e-6, 1e-7);
                }
            }
            CHECK_MSG(bad == 0, "rmsnorm_groups gs %d shared %d: %d bad", gs, shared, bad);
            memcpy(y2, x, (size_t)n * 4);
            rw_rmsnorm_groups(y2, w, shared ? 0 : gs, ng, gs, 1e-6f, y2); /* in place */
            CHECK(memcmp(y, y2, (size_t)n * 4) == 0);
            if (shared) { /* one group at a time = rw_rmsnorm, bit for bit */
                for (int g = 0; g < ng; g++) rw_rmsnorm(x + g * gs, w, gs, 1e-6f, y2 + g * gs);
                CHECK(memcmp(y, y2, (size_t)n * 4) == 0);
            }
        }
        /* L2 norm */
        rw_l2norm(x, gs, 1e-6f, y);
        double ss = 0;
        for (int i = 0; i < gs; i++) ss += (double)x[i] * x[i];
        int bad = 0;
        for (int i = 0; i < gs; i++) bad += !near(y[i], x[i] / sqrt(ss), 1e-6, 1e-7);
        CHECK_MSG(bad == 0, "l2norm n %d: %d bad", gs, bad);
        /* gated norm: reference and dispatched tier against double, and
         * the dispatched one bitwise the reference */
        for (int fast = 0; fast <= 1; fast++) {
            (fast ? rw_rmsnorm_gated : rw_rmsnorm_gated_ref)(x, w, z, ng, gs, 1e-6f, fast ? y : y2);
            if (fast)
                CHECK_MSG(!memcmp(y, y2, (size_t)n * 4), "gated norm %s gs %d: not the reference's bits", tier_name, gs);
            else
                memcpy(y, y2, (size_t)n * 4);
            bad = 0;
            for (int g = 0; g < ng; g++) {
                double s2 = 0;
                for (int i = 0; i < gs; i++) s2 += (double)x[g * gs + i] * x[g * gs + i];
                const double r = 1.0 / sqrt(s2 / gs + 1e-6);
                for (int i = 0; i < gs; i++) {
                    const double zz = z[g * gs + i];
                    const double want = x[g * gs + i] * r * w[i] * (zz / (1.0 + exp(-zz)));
                    bad += !near(y[g * gs + i], want, 3e-6, 1e-7);
                }
            }
            CHECK_MSG(bad == 0, "gated norm %s fast %d gs %d: %d bad", tier_name, fast, gs, bad);
        }
        free(x), free(w), free(z), free(y), free(y2);
    }
    /* L2 norm of a vector shorter than eps: divided by eps, not by its norm */
    float t[5] = {1e-8f, -2e-8f, 3e-8f, 0, 1e-9f}, u[5];
    rw_l2norm(t, 5, 1e-6f, u);
    for (int i = 0; i < 5; i++) CHECK(near(u[i], t[i] / 1e-6, 1e-6, 0));
}

static void check_activations(void) {
    const int64_t n = 103;
    float x[103], y[103], y2[103], y_ref[103];
    for (int i = 0; i < n; i++) x[i] = 30.0f * frand();
    x[0] = 0, x[1] = -100, x[2] = 100, x[3] = 20.0f, x[4] = 20.5f, x[5] = -87.0f, x[6] = 1e-3f;
    /* exp(-x) subnormal, rounded to 0, past ggml's cut-off; exp overflowing */
    x[7] = 95.0f, x[8] = 103.3f, x[9] = 120.0f, x[10] = 140.0f, x[11] = -95.0f, x[12] = -0.0f, x[13] = NAN;
    for (int fast = 0; fast <= 1; fast++) {
        (fast ? rw_silu : rw_silu_ref)(x, y, n);
        if (!fast) memcpy(y_ref, y, sizeof y);
        else CHECK_MSG(!memcmp(y, y_ref, sizeof y), "silu %s: not the reference's bits", tier_name);
        int bad = 0;
        for (int i = 0; i < n; i++)
            bad += i != 13 && !near(y[i], x[i] / (1.0 + exp(-(double)x[i])), 2e-6, 1e-30);
        CHECK_MSG(bad == 0 && isnan(y[13]), "silu %s fast %d: %d bad", tier_name, fast, bad);
        memcpy(y2, x, sizeof x);
        (fast ? rw_silu : rw_silu_ref)(y2, y2, n); /* in place */
        CHECK(memcmp(y, y2, sizeof y) == 0);
    }
    x[13] = 0.5f; /* no NaN from here on */
    rw_sigmoid(x, y, n);
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !near(y[i], 1.0 / (1.0 + exp(-(double)x[i])), 2e-6, 1e-30);
    CHECK_MSG(bad == 0, "sigmoid: %d bad", bad);
    rw_softplus(x, y, n);
    bad = 0;
    for (int i = 0; i < n; i++) {
        const double want = x[i] > 20 ? x[i] : log1p(exp((double)x[i]));
        /* 1 + e^x rounded to float: an absolute error of about 6e-8 */
        bad += !near(y[i], want, 2e-6, 1.2e-7);
        bad += y[i] != rw_softplus1(x[i]);
    }
    CHECK_MSG(bad == 0, "softplus: %d bad", bad);
    CHECK(rw_softplus1(20.0f) == logf(1.0f + expf(20.0f)) && rw_softplus1(20.5f) == 20.5f);

    const int64_t lens[] = {1, 2, 7, 15, 16, 17, 33, 64, 257};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t m = lens[li];
        float *a = malloc((size_t)m * 4), *p = malloc((size_t)m * 4), *p2 = malloc((size_t)m * 4);
        for (int64_t i = 0; i < m; i++) a[i] = 12.0f * frand();
        double mx = -INFINITY, sum = 0;
        for (int64_t i = 0; i < m; i++) mx = fmax(mx, a[i]);
        for (int64_t i = 0; i < m; i++) sum += exp(a[i] - mx);
        float *p_ref = malloc((size_t)m * 4);
        for (int fast = 0; fast <= 1; fast++) {
            (fast ? rw_softmax : rw_softmax_ref)(a, p, m);
            if (!fast) memcpy(p_ref, p, (size_t)m * 4);
            else CHECK_MSG(!memcmp(p, p_ref, (size_t)m * 4), "softmax %s n %lld: not the reference's bits", tier_name,
                           (long long)m);
            int nb = 0;
            for (int64_t i = 0; i < m; i++) nb += !near(p[i], exp(a[i] - mx) / sum, 3e-6, 1e-30);
            CHECK_MSG(nb == 0, "softmax %s fast %d n %lld: %d bad", tier_name, fast, (long long)m, nb);
            memcpy(p2, a, (size_t)m * 4);
            (fast ? rw_softmax : rw_softmax_ref)(p2, p2, m);
            CHECK(memcmp(p, p2, (size_t)m * 4) == 0);
        }
        free(a), free(p), free(p2), free(p_ref);
    }
}

/* GEGLU (gemma3's FFN) as llama.cpp's fp16 GELU table: the exact spec at
 * every half input, the clamps at +-10, the tanh GELU within the rounding of
 * two halves, and the same bits in every tier (one implementation: these
 * bits are compared against the first tier's). */
static float geglu_first_tier[4096];
static bool geglu_have_first;

static void check_geglu(void) {
    const float a = 0.044715f, s2pi = 0.79788456080286535587989211986876f;
    int bad = 0;
    /* every finite half in (-10, 10): gelu in float, rounded to a half */
    for (uint32_t h = 0; h < (1u << 16); h++) {
        const float x = rw_f16_to_f32((rw_f16)h);
        if (!(x > -10.0f && x < 10.0f)) continue;
        float g = x, u = 1.0f;
        rw_geglu(&g, &u, 1);
        const float want = rw_f16_to_f32(rw_f32_to_f16(0.5f * x * (1.0f + tanhf(s2pi * x * (1.0f + a * x * x)))));
        bad += memcmp(&g, &want, 4) != 0;
    }
    CHECK_MSG(bad == 0, "geglu %s: %d halves differ from the table's spec", tier_name, bad);
    /* clamps, the gate product, NaN */
    float g[6] = {-10.0f, -1e30f, 10.0f, 12.5f, NAN, 1.0f}, u[6] = {3, 3, 0.5f, -2, 1, 0};
    rw_geglu(g, u, 6);
    CHECK(g[0] == 0.0f && g[1] == 0.0f && g[2] == 5.0f && g[3] == -25.0f && isnan(g[4]) && g[5] == 0.0f);
    /* random inputs: within two half roundings of the exact tanh GELU */
    float x[4096], y[4096], up[4096];
    uint64_t r = 0x1234567887654321ull; /* the same inputs in every tier */
    for (int i = 0; i < 4096; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        x[i] = (float)((double)(r >> 11) / 9007199254740992.0) * 24.0f - 12.0f;
        up[i] = (float)((double)(r & 0xffff) / 65536.0) * 2.0f - 1.0f;
    }
    memcpy(y, x, sizeof x);
    rw_geglu(y, up, 4096);
    bad = 0;
    for (int i = 0; i < 4096; i++) {
        const double xd = x[i], gd = 0.5 * xd * (1.0 + tanh(sqrt(2.0 / M_PI) * (xd + 0.044715 * xd * xd * xd)));
        /* a half's rounding of x moves gelu by up to |gelu'| |x| 2^-11 */
        bad += !near(y[i], gd * up[i], 2e-3, 6e-4 * fabs(xd) * fabs(up[i]) + 1e-6);
    }
    CHECK_MSG(bad == 0, "geglu %s: %d values off the tanh GELU", tier_name, bad);
    /* the tier's fast path against the reference, bitwise: every half's
     * value and its two float neighbours (the rounding ties and the edges of
     * each half's interval), the clamp edges, infinities, NaN in every lane
     * of a block, and lengths that leave tails */
    {
        const int64_t m = 3 * 65536 + 64;
        float *xs = malloc((size_t)m * 4), *us = malloc((size_t)m * 4), *ga = malloc((size_t)m * 4),
              *gb = malloc((size_t)m * 4);
        CHECK(xs && us && ga && gb);
        for (uint32_t h = 0; h < 65536; h++) {
            const float v = rw_f16_to_f32((rw_f16)h);
            xs[3 * h] = v, xs[3 * h + 1] = nextafterf(v, INFINITY), xs[3 * h + 2] = nextafterf(v, -INFINITY);
        }
        const float edge[16] = {-10.0f, 10.0f, nextafterf(-10.0f, 0), nextafterf(10.0f, 0), -INFINITY, INFINITY, 1e30f,
                                -1e30f, 65504.0f, 65520.0f, -0.0f, 1e-40f, -1e-40f, 9.9960938f, -9.9960938f, NAN};
        for (int i = 0; i < 64; i++) xs[3 * 65536 + i] = edge[i % 16];
        for (int64_t i = 0; i < m; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            us[i] = (float)((double)(r >> 11) / 9007199254740992.0) * 4.0f - 2.0f;
        }
        const int64_t lens[3] = {m, m - 5, 13};
        for (int li = 0; li < 3; li++) {
            memcpy(ga, xs, (size_t)m * 4), memcpy(gb, xs, (size_t)m * 4);
            rw_geglu(ga, us, lens[li]);
            rw_geglu_ref(gb, us, lens[li]);
            CHECK_MSG(memcmp(ga, gb, (size_t)lens[li] * 4) == 0, "geglu %s n %lld: not the reference's bits", tier_name,
                      (long long)lens[li]);
        }
        free(xs), free(us), free(ga), free(gb);
    }
    if (!geglu_have_first) memcpy(geglu_first_tier, y, sizeof y), geglu_have_first = true;
    CHECK_MSG(memcmp(geglu_first_tier, y, sizeof y) == 0, "geglu %s: differs from another tier", tier_name);
}

/* Squared ReLU: the tier's bits are the reference's, which are the spec's
 * (r = x > 0 ? x : 0, then r * r): NaN, -0, tiny, huge and infinite values
 * in every lane position, and lengths that leave tails. */
static void check_relu_sq(void) {
    enum { M = 16 * 37 + 5 };
    static const float edge[12] = {-0.0f,  0.0f,    NAN,   -NAN,   INFINITY, -INFINITY,
                                   1e-40f, -1e-40f, 3e20f, -3e20f, 1.5f,     -2.5f};
    float x[M], a[M], b[M];
    uint64_t r = 88172645463325252ull;
    for (int i = 0; i < M; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        x[i] = i % 3 == 0 ? edge[(i / 3) % 12] : (float)((double)(r >> 11) / 9007199254740992.0) * 8.0f - 4.0f;
    }
    const int lens[4] = {M, M - 5, 13, 1};
    for (int li = 0; li < 4; li++) {
        memcpy(a, x, sizeof x), memcpy(b, x, sizeof x);
        rw_relu_sq(a, lens[li]);
        for (int i = 0; i < lens[li]; i++) {
            const float v = x[i] > 0.0f ? x[i] : 0.0f;
            b[i] = v * v;
        }
        CHECK_MSG(memcmp(a, b, sizeof a) == 0, "relu_sq %s n %d: not the spec's bits", tier_name, lens[li]);
        memcpy(b, x, sizeof x);
        rw_relu_sq_ref(b, lens[li]);
        CHECK_MSG(memcmp(a, b, sizeof a) == 0, "relu_sq %s n %d: not the reference's bits", tier_name, lens[li]);
    }
}

/* The stream of pair i, spelled out for a few section sets (t h w e = 0 1 2 3). */
static void check_rope_multi(void) {
    struct {
        int s[4];
        bool inter;
        int n_rot;
        const char *map; /* stream of every pair */
    } cases[] = {
        {{11, 11, 10, 0}, true, 64, "thwthwthwthwthwthwthwthwthwthwth"},
        {{3, 3, 2, 0}, true, 16, "thwthwth"},
        {{2, 2, 1, 0}, true, 20, "thwththwth"},
        {{1, 1, 1, 1}, true, 16, "thwethwe"},
        {{2, 1, 1, 1}, false, 20, "tthwetthwe"},
        {{16, 24, 24, 0}, false, 128, "tttttttttttttttthhhhhhhhhhhhhhhhhhhhhhhhwwwwwwwwwwwwwwwwwwwwwwww"},
    };
    const float ff[64] = {1, 2, 4, 8, 1, 1, 3, 1, 1.5f, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                          1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                          1, 1, 1, 1};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int nr = cases[c].n_rot;
        CHECK_EQ_INT((int)strlen(cases[c].map), nr / 2);
        for (int use_ff = 0; use_ff <= 1; use_ff++)
            for (int p = 0; p < 5000; p += 1237) {
                const float pos[4] = {(float)p, (float)(p + 7), (float)(3 * p + 1), (float)(p / 2)};
                float cs[128], one[128];
                rw_rope_cache_multi(pos, cases[c].s, cases[c].inter, nr, 1e6f, 0.75f, use_ff ? ff : NULL, cs);
                int bad = 0;
                for (int i = 0; i < nr / 2; i++) {
                    const int st = (int)(strchr("thwe", cases[c].map[i]) - "thwe");
                    rw_rope_cache(pos[st], nr, 1e6f, 0.75f, use_ff ? ff : NULL, one);
                    bad += memcmp(cs + 2 * i, one + 2 * i, 8) != 0;
                }
                CHECK_MSG(bad == 0, "rope_multi case %zu p %d ff %d: %d pairs differ", c, p, use_ff, bad);
                /* text positions [p, p, p, 0]: plain RoPE at p when no pair uses the extra stream */
                if (!strchr(cases[c].map, 'e')) {
                    const float tp[4] = {(float)p, (float)p, (float)p, 0};
                    rw_rope_cache_multi(tp, cases[c].s, cases[c].inter, nr, 1e6f, 0.75f, use_ff ? ff : NULL, cs);
                    rw_rope_cache((float)p, nr, 1e6f, 0.75f, use_ff ? ff : NULL, one);
                    CHECK(memcmp(cs, one, (size_t)nr * 4) == 0);
                }
            }
    }
}

static void check_moe(void) {
    const int ne_list[] = {1, 2, 8, 17, 64, 256};
    for (size_t ci = 0; ci < sizeof ne_list / sizeof ne_list[0]; ci++) {
        const int ne = ne_list[ci];
        float *logits = malloc((size_t)ne * 4), *probs = malloc((size_t)ne * 4), w[10];
        int32_t ids[10];
        for (int rep = 0; rep < 4; rep++) {
            for (int e = 0; e < ne; e++) logits[e] = 4.0f * frand();
            if (rep >= 2) /* ties: a few equal values, including the top */
                for (int e = 0; e < ne; e += 3) logits[e] = 3.5f;
            for (int k = 1; k <= 10 && k <= ne; k += 3)
                for (int norm = 0; norm <= 1; norm++) {
                    const float scale = norm ? 1.0f : 2.5f;
                    rw_moe_route(logits, ne, k, norm, scale, ids, w, probs);
                    /* brute force: rank by (prob desc, index asc) */
                    double mx = -INFINITY, sum = 0, ksum = 0;
                    for (int e = 0; e < ne; e++) mx = fmax(mx, logits[e]);
                    for (int e = 0; e < ne; e++) sum += exp(logits[e] - mx);
                    int bad = 0;
                    for (int j = 0; j < k; j++) {
                        int above = 0; /* experts ranked before ids[j] */
                        for (int e = 0; e < ne; e++)
                            above += probs[e] > probs[ids[j]] || (probs[e] == probs[ids[j]] && e < ids[j]);
                        bad += above != j;
                        ksum += exp(logits[ids[j]] - mx) / sum;
                    }
                    for (int j = 0; j < k; j++) {
                        const double p = exp(logits[ids[j]] - mx) / sum;
                        bad += !near(w[j], (norm ? p / ksum : p) * scale, 4e-6, 1e-30);
                    }
                    CHECK_MSG(bad == 0, "moe %s ne %d k %d norm %d rep %d: %d bad", tier_name, ne, k, norm, rep, bad);
                }
        }
        free(logits), free(probs);
    }
    /* all-equal logits: experts 0..k-1 in order, weights 1/k */
    float l[6] = {1, 1, 1, 1, 1, 1}, p[6], w[3];
    int32_t ids[3];
    rw_moe_route(l, 6, 3, true, 1.0f, ids, w, p);
    CHECK(ids[0] == 0 && ids[1] == 1 && ids[2] == 2);
    CHECK(near(w[0], 1.0 / 3, 1e-6, 0));
    /* a NaN among the logits: the choices of k strict-greater scans over the
     * experts not yet taken, as ever (a NaN orders nothing, so the first
     * scan to start on it keeps it) */
    const float q[7] = {1.0f, NAN, 3.0f, 2.0f, NAN, 3.0f, 0.5f};
    int32_t qi[5], want[5];
    float qw[5];
    for (int j = 0; j < 5; j++) {
        int best = -1;
        for (int e = 0; e < 7; e++) {
            bool taken = false;
            for (int m = 0; m < j; m++) taken |= want[m] == e;
            if (!taken && (best < 0 || q[e] > q[best])) best = e;
        }
        want[j] = best;
    }
    rw_moe_route_topk_softmax(q, 7, 5, qi, qw);
    CHECK(!memcmp(qi, want, sizeof want));
}

static void check_f16_rows(void) {
    enum { N = 301 };
    float x[N], back[N], back2[N * 3];
    rw_f16 h[N], hs[N * 3];
    for (int i = 0; i < N; i++) x[i] = ldexpf(frand(), (int)(frand() * 30.0f));
    /* specials: infinities, overflow, subnormal halves, ties to even, zeros */
    const float sp[] = {INFINITY, -INFINITY, 65504.0f, 65520.0f, 1e6f, 5.96e-8f, 2.98e-8f, 3e-5f, -0.0f, 0.0f,
                        1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 6.1e-5f};
    memcpy(x, sp, sizeof sp);
    rw_f32_to_f16_row(x, h, 1, N);
    rw_f32_to_f16_row(x, hs, 3, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += h[i] != rw_f32_to_f16(x[i]) || hs[3 * i] != h[i];
    CHECK_MSG(bad == 0, "f32->f16 %s: %d differ", tier_name, bad);
    rw_f16_to_f32_row(h, 1, back, N);
    rw_f16_to_f32_row(hs, 3, back2, N);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += memcmp(&back[i], &back2[i], 4) != 0 || back[i] != rw_f16_to_f32(h[i]) ||
               (isfinite(back[i]) && !near(back[i], x[i], 1.0 / 1024, 6e-8));
    CHECK_MSG(bad == 0, "f16->f32 %s: %d bad", tier_name, bad);
}

/* rw_conv1d_causal_pool over 2 threads against one call of the serial
 * forms: the same outputs and states, bit for bit (100 channels: six runs of
 * 16 and a tail of 4; 80 tokens, which spread the runs over the threads). */
static void check_conv_pool(void) {
    const int C = 100, T = 80;
    rw_threadpool *pool = NULL;
    rw_error err;
    CHECK(rw_threadpool_new(2, &pool, &err) == RW_OK);
    for (int K = 3; K <= 4; K++)
        for (int opt = 0; opt < 8; opt++) {
            const bool with_bias = opt & 1, silu = opt & 2, fused = opt & 4;
            float *x = malloc((size_t)(T * C) * 4), *w = malloc((size_t)(C * K) * 4), *b = malloc((size_t)C * 4);
            float *y1 = calloc((size_t)(T * C), 4), *y2 = calloc((size_t)(T * C), 4);
            float *s1 = calloc((size_t)(C * K), 4), *s2 = calloc((size_t)(C * K), 4);
            for (int64_t i = 0; i < T * C; i++) x[i] = frand();
            for (int i = 0; i < C * K; i++) w[i] = frand(), s1[i] = s2[i] = frand();
            for (int i = 0; i < C; i++) b[i] = frand();
            (fused ? rw_conv1d_causal_fused : rw_conv1d_causal)(x, C, T, C, K, w, with_bias ? b : NULL, s1, silu, y1,
                                                                C);
            rw_conv1d_causal_pool(x, C, T, C, K, w, with_bias ? b : NULL, s2, silu, fused, y2, C, pool);
            CHECK_MSG(!memcmp(y1, y2, (size_t)(T * C) * 4) && !memcmp(s1, s2, (size_t)(C * (K - 1)) * 4),
                      "conv K %d opt %d: the pooled form differs from one call", K, opt);
            free(x), free(w), free(b), free(y1), free(y2), free(s1), free(s2);
        }
    rw_threadpool_free(pool);
}

/* conv1d, plain and fused (rw_conv1d_causal_fused), against the
 * whole-sequence convolution in double (zero history), and bitwise against
 * the reference tier (the AVX-512 kernel-4 path does 16 channels at a time:
 * 33 and 48 channels take it with and without a scalar tail). */
static void check_conv(void) {
    const int Cs[] = {1, 5, 33, 48}, Ks[] = {1, 2, 3, 4}; /* 3: lfm2's short conv */
    const rw_kernel_tier tier = rw_kernel_tier_current();
    const int T = 23;
    for (size_t ci = 0; ci < sizeof Cs / sizeof Cs[0]; ci++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
            for (int opt = 0; opt < 8; opt++) {
                const int C = Cs[ci], K = Ks[ki];
                const bool with_bias = opt & 1, silu = opt & 2;
                void (*conv)(const float *, int64_t, int64_t, int, int, const float *, const float *, float *, bool,
                             float *, int64_t) = opt & 4 ? rw_conv1d_causal_fused : rw_conv1d_causal;
                const int64_t xs = C + 3; /* rows wider than C: strides are honoured */
                float *x = malloc((size_t)(T * xs) * 4), *w = malloc((size_t)(C * K) * 4), *b = malloc((size_t)C * 4);
                float *y1 = calloc((size_t)(T * C), 4), *y2 = calloc((size_t)(T * C), 4);
                float *s1 = calloc((size_t)(C * K), 4), *s2 = calloc((size_t)(C * K), 4);
                for (int64_t i = 0; i < T * xs; i++) x[i] = frand();
                for (int i = 0; i < C * K; i++) w[i] = frand();
                for (int i = 0; i < C; i++) b[i] = frand();
                /* one token per call, then runs of 1, 2, 3, ... */
                for (int t = 0; t < T; t++)
                    conv(x + t * xs, xs, 1, C, K, w, with_bias ? b : NULL, s1, silu, y1 + t * C, C);
                for (int t = 0, run = 1; t < T; t += run, run++) {
                    const int m = t + run > T ? T - t : run;
                    conv(x + t * xs, xs, m, C, K, w, with_bias ? b : NULL, s2, silu, y2 + t * C, C);
                }
                CHECK(memcmp(y1, y2, (size_t)(T * C) * 4) == 0);
                CHECK(memcmp(s1, s2, (size_t)(C * (K - 1)) * 4) == 0);
                /* the reference tier, one token per call: the same bits (before
                 * the SiLU, whose AVX-512 form follows ggml's vector exp) */
                if (!silu) {
                    float *y3 = calloc((size_t)(T * C), 4), *s3 = calloc((size_t)(C * K), 4);
                    rw_kernel_tier_set(RW_TIER_REF);
                    for (int t = 0; t < T; t++)
                        conv(x + t * xs, xs, 1, C, K, w, with_bias ? b : NULL, s3, false, y3 + t * C, C);
                    rw_kernel_tier_set(tier);
                    CHECK_MSG(memcmp(y1, y3, (size_t)(T * C) * 4) == 0 &&
                                  memcmp(s1, s3, (size_t)(C * (K - 1)) * 4) == 0,
                              "conv C %d K %d opt %d: %s differs from the reference tier", C, K, opt, tier_name);
                    free(y3), free(s3);
                }
                int bad = 0;
                for (int t = 0; t < T; t++)
                    for (int c = 0; c < C; c++) {
                        double acc = with_bias ? b[c] : 0;
                        for (int k = 0; k < K; k++) {
                            const int src = t - (K - 1) + k;
                            if (src >= 0) acc += (double)w[c * K + k] * x[src * xs + c];
                        }
                        if (silu) acc = acc / (1.0 + exp(-acc));
                        bad += !near(y1[t * C + c], acc, 1e-5, 1e-6);
                    }
                /* the state holds the last K-1 inputs, oldest first */
                for (int c = 0; c < C; c++)
                    for (int j = 0; j < K - 1; j++) bad += s1[c * (K - 1) + j] != x[(T - (K - 1) + j) * xs + c];
                CHECK_MSG(bad == 0, "conv C %d K %d opt %d: %d bad", C, K, opt, bad);
                free(x), free(w), free(b), free(y1), free(y2), free(s1), free(s2);
            }
}

int main(void) {
    for (int t = 0; t < RW_TIER_COUNT; t++) {
        if (!rw_kernel_tier_set((rw_kernel_tier)t)) continue;
        tier_name = rw_kernel_tier_name((rw_kernel_tier)t);
        check_norms();
        check_activations();
        check_geglu();
        check_relu_sq();
        check_rope_multi();
        check_moe();
        check_f16_rows();
        check_conv();
        check_conv_pool();
    }
    return rw_test_done();
}
