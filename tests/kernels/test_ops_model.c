/* test_ops_model.c - the dense transformer ops against double-precision
 * formulas computed here: RMS norm, RoPE (normal and NEOX pairing, frequency
 * factors, partial rotation), SwiGLU, and the attention of one query head
 * (at awkward sizes, f32 and f16); every tier this CPU runs must give the
 * reference's bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/matmul.h"
#include "kernels/ops_model.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static uint16_t f2h(float f) {
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static float h2f(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

static void check_rmsnorm(void) {
    float x[1000], w[1000], y[1000];
    for (int n = 1; n <= 1000; n += 333) {
        double ss = 0;
        for (int i = 0; i < n; i++) {
            x[i] = 4.0f * frand();
            w[i] = 1.0f + frand();
            ss += (double)x[i] * x[i];
        }
        rw_rmsnorm(x, w, n, 1e-6f, y);
        double r = 1.0 / sqrt(ss / n + 1e-6), err = 0;
        for (int i = 0; i < n; i++) err = fmax(err, fabs(y[i] - x[i] * r * w[i]) / (fabs(x[i] * r * w[i]) + 1e-6));
        CHECK_MSG(err < 1e-6, "rmsnorm n %d: relative error %g", n, err);
        rw_rmsnorm(x, w, n, 1e-6f, x); /* in place */
        CHECK(memcmp(x, y, (size_t)n * sizeof(float)) == 0);
    }
}

static void check_rope(void) {
    const int hd = 64;
    const float ff[32] = {1, 2, 4, 8, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int neox = 0; neox <= 1; neox++)
        for (int rot = 16; rot <= hd; rot += 48)
            for (int pos = 0; pos < 300; pos += 37) {
                float x[64], y[64], cs[64];
                for (int i = 0; i < hd; i++) x[i] = y[i] = frand();
                const float *f = rot == hd ? ff : NULL;
                rw_rope_cache((float)pos, rot, 10000.0f, 0.5f, f, cs);
                rw_rope(y, rot, neox, cs);
                double err = 0;
                for (int i = 0; i < rot / 2; i++) {
                    const double th = 0.5 * pos * pow(10000.0, -2.0 * i / rot) / (f ? f[i] : 1.0);
                    const int a = neox ? i : 2 * i, b = neox ? i + rot / 2 : 2 * i + 1;
                    err = fmax(err, fabs(y[a] - (x[a] * cos(th) - x[b] * sin(th))));
                    err = fmax(err, fabs(y[b] - (x[a] * sin(th) + x[b] * cos(th))));
                }
                for (int i = rot; i < hd; i++) err = fmax(err, fabs(y[i] - x[i]));
                CHECK_MSG(err < 1e-4, "rope neox %d rot %d pos %d: error %g", neox, rot, pos, err);
            }
}

/* YaRN (gpt-oss's 32x over 4096 positions, base 150000: the ramp from pair
 * 8 to 18) against its definition in double: pair i's angle
 * theta_i * ((1 - r_i) / 32 + r_i), r_i = 1 - clamp((i - 8) / 10, 0, 1),
 * cos and sin times attn * (1 + 0.1 ln 32); with ext_factor 0 it is
 * rw_rope_cache's table bit for bit. */
static void check_rope_yarn(void) {
    const int rot = 64;
    const float corr[2] = {8.0f, 18.0f}, fs = 1.0f / 32.0f;
    const int poss[] = {0, 1, 7, 100, 1000, 4095};
    for (size_t k = 0; k < sizeof poss / sizeof poss[0]; k++) {
        const int pos = poss[k];
        float cs[64], plain[64];
        rw_rope_cache_yarn((float)pos, rot, 150000.0f, fs, 1.0f, corr, 0.9f, cs);
        double err = 0;
        for (int i = 0; i < rot / 2; i++) {
            const double th = pos * pow(150000.0, -2.0 * i / rot);
            const double y = (i - 8.0) / 10.0, r = 1.0 - fmin(1.0, fmax(0.0, y));
            const double t = th * ((1.0 - r) / 32.0 + r), ms = 0.9 * (1.0 + 0.1 * log(32.0));
            /* relative to the angle: the running float product of the powers rounds once per pair */
            const double tol = 1e-5 + 1e-6 * (i + 1) * t;
            err = fmax(err, fabs(cs[2 * i] - cos(t) * ms) / tol);
            err = fmax(err, fabs(cs[2 * i + 1] - sin(t) * ms) / tol);
        }
        CHECK_MSG(err <= 1.0, "yarn pos %d: error %g of the tolerance", pos, err);
        rw_rope_cache_yarn((float)pos, rot, 150000.0f, fs, 0.0f, corr, 1.0f, cs);
        rw_rope_cache((float)pos, rot, 150000.0f, fs, NULL, plain);
        CHECK_MSG(!memcmp(cs, plain, sizeof cs), "yarn without extrapolation pos %d: not rw_rope_cache's table", pos);
    }
}

static void check_swiglu(void) {
    float g[77], u[77], a[77], b[77];
    for (int i = 0; i < 77; i++) g[i] = 20.0f * frand(), u[i] = frand();
    g[5] = -200.0f, g[6] = 200.0f;
    memcpy(a, g, sizeof g);
    memcpy(b, g, sizeof g);
    rw_swiglu_ref(a, u, 77);
    rw_swiglu(b, u, 77);
    CHECK_MSG(!memcmp(a, b, sizeof a), "swiglu %s: the reference's bits", rw_kernel_tier_name(rw_kernel_tier_current()));
    for (int i = 0; i < 77; i++) {
        const double want = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
        CHECK_MSG(fabs(a[i] - want) <= 1e-6 * (fabs(want) + 1e-3) && fabs(b[i] - want) <= 1e-6 * (fabs(want) + 1e-3),
                  "swiglu %d: x %g ref %g fast %g want %g", i, g[i], a[i], b[i], want);
    }
}

static void check_attn(void) {
    const int64_t sizes[] = {1, 2, 3, 5, 15, 16, 17, 31, 33, 100, 513};
    const int dims[][2] = {{64, 64}, {128, 128}, {16, 48}, {40, 24}};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const int hk = dims[di][0], hv = dims[di][1];
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            const int64_t n = sizes[si];
            float *q = malloc((size_t)hk * 4), *k = malloc((size_t)(n * hk) * 4), *v = malloc((size_t)(n * hv) * 4);
            uint16_t *kh = malloc((size_t)(n * hk) * 2), *vh = malloc((size_t)(n * hv) * 2);
            float *sc = malloc((size_t)n * 4), *o_ref = malloc((size_t)hv * 4), *o_fast = malloc((size_t)hv * 4);
            double *want = calloc((size_t)hv, sizeof(double)), *w = malloc((size_t)n * sizeof(double));
            for (int i = 0; i < hk; i++) q[i] = 3.0f * frand();
            for (int64_t i = 0; i < n * hk; i++) kh[i] = f2h(k[i] = frand());
            /* v is stored transposed: hv rows of n positions */
            for (int64_t i = 0; i < n * hv; i++) vh[i] = f2h(v[i] = frand());
            for (int f16 = 0; f16 <= 1; f16++) {
                const void *K = f16 ? (const void *)kh : k, *V = f16 ? (const void *)vh : v;
                const float scale = 1.0f / sqrtf((float)hk);
                /* double-precision softmax of the same (rounded) inputs */
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < n; j++) {
                    double s = 0;
                    for (int i = 0; i < hk; i++) s += (double)q[i] * (f16 ? h2f(kh[j * hk + i]) : k[j * hk + i]);
                    w[j] = s * scale;
                    if (w[j] > mx) mx = w[j];
                }
                for (int64_t j = 0; j < n; j++) sum += (w[j] = exp(w[j] - mx));
                for (int i = 0; i < hv; i++) {
                    want[i] = 0;
                    for (int64_t j = 0; j < n; j++) want[i] += w[j] / sum * (f16 ? h2f(vh[i * n + j]) : v[i * n + j]);
                }
                rw_attn_head_ref(q, K, V, n, f16, n, hk, hv, scale, sc, o_ref);
                rw_attn_head(q, K, V, n, f16, n, hk, hv, scale, sc, o_fast);
                double e_ref = 0, e_fast = 0;
                for (int i = 0; i < hv; i++) {
                    e_ref = fmax(e_ref, fabs(o_ref[i] - want[i]));
                    e_fast = fmax(e_fast, fabs(o_fast[i] - want[i]));
                }
                CHECK_MSG(e_ref < 1e-5 && e_fast < 1e-5, "hk %d hv %d n %lld f16 %d: ref err %g fast err %g", hk, hv,
                          (long long)n, f16, e_ref, e_fast);
                CHECK_MSG(!memcmp(o_ref, o_fast, (size_t)hv * 4), "%s hk %d hv %d n %lld f16 %d: not the reference's bits",
                          rw_kernel_tier_name(rw_kernel_tier_current()), hk, hv, (long long)n, f16);
                /* same call, same bits */
                float *again = malloc((size_t)hv * 4);
                rw_attn_head(q, K, V, n, f16, n, hk, hv, scale, sc, again);
                CHECK(memcmp(again, o_fast, (size_t)hv * 4) == 0);
                free(again);
            }
            free(q), free(k), free(v), free(kh), free(vh), free(sc), free(o_ref), free(o_fast), free(want), free(w);
        }
    }
}

/* Paged keys and values (pages of 64 positions, the last one partial) with
 * and without a sliding window: the dispatched kernel gives the
 * reference's bits. */
static void check_attn_paged(void) {
    enum { P = 64, N = 300, HK = 64, HV = 40, NP = (N + P - 1) / P };
    const int64_t firsts[] = {0, 1, 63, 70, 130, 299};
    float *q = malloc(HK * 4), *sc = malloc(N * 4), a[HV], b[HV];
    float *kf[NP], *vf[NP];
    uint16_t *kh[NP], *vh[NP];
    for (int i = 0; i < HK; i++) q[i] = 3.0f * frand();
    for (int p = 0; p < NP; p++) {
        kf[p] = malloc(P * HK * 4), vf[p] = malloc(HV * P * 4);
        kh[p] = malloc(P * HK * 2), vh[p] = malloc(HV * P * 2);
        for (int i = 0; i < P * HK; i++) kh[p][i] = f2h(kf[p][i] = frand());
        for (int i = 0; i < HV * P; i++) vh[p][i] = f2h(vf[p][i] = frand()); /* row i of page p: positions of the page */
    }
    for (int f16 = 0; f16 <= 1; f16++)
        for (size_t fi = 0; fi < sizeof firsts / sizeof firsts[0]; fi++) {
            const void *kp[NP], *vp[NP];
            for (int p = 0; p < NP; p++) {
                kp[p] = f16 ? (const void *)kh[p] : kf[p];
                vp[p] = f16 ? (const void *)vh[p] : vf[p];
            }
            const rw_attn_pages pages = {.k_pages = kp, .v_pages = vp, .page_len = P, .v_stride = P, .first = firsts[fi]};
            rw_attn_head_paged_ref(q, &pages, f16, N, HK, HV, 0.125f, sc, a);
            rw_attn_head_paged(q, &pages, f16, N, HK, HV, 0.125f, sc, b);
            CHECK_MSG(!memcmp(a, b, sizeof a), "%s paged f16 %d first %lld: not the reference's bits",
                      rw_kernel_tier_name(rw_kernel_tier_current()), f16, (long long)firsts[fi]);
        }
    for (int p = 0; p < NP; p++) free(kf[p]), free(vf[p]), free(kh[p]), free(vh[p]);
    free(q), free(sc);
}

/* every tier this CPU runs computes the reference's bits */
int main(void) {
    check_rmsnorm();
    check_rope();
    check_rope_yarn();
    for (int t = 0; t < RW_TIER_COUNT; t++) {
        if (!rw_kernel_tier_set((rw_kernel_tier)t)) continue;
        check_swiglu();
        check_attn();
        check_attn_paged();
    }
    return rw_test_done();
}
