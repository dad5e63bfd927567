/* test_ops_seq.c - the kernels that walk a sequence, in every available tier:
 * causal GQA attention over a KV cache (f32 and f16), the gated delta rule
 * and the Mamba2 scan. Each against a double-precision implementation written
 * here; and the invariances the engine relies on: one token per call equals
 * many per call bit for bit (outputs and carried state), and the thread count
 * of the parallel drivers changes no bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static const char *tier_name;
static rw_threadpool *pool3;
static bool small; /* sanitizer build: fewer and shorter cases */

static float *randv(int64_t n, float amp) {
    float *p = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = amp * frand();
    return p;
}

static void l2n(float *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)x[i] * x[i];
    for (int i = 0; i < n; i++) x[i] = (float)(x[i] / sqrt(s));
}

/* ==== attention ========================================================= */

/* With sinks (gpt-oss), each query head has one extra logit in its softmax
 * (rw_attn_pages.sinks). */
static bool with_sinks;

/* window > 0: sliding-window attention (each query sees its last window
 * positions), else causal over all. */
static void check_attention(int n_head, int n_head_kv, int hd_k, int hd_v, int64_t n_ctx, bool f16, int64_t window) {
    const int64_t cap = n_ctx + 5;
    const int64_t kn = (int64_t)n_head_kv * cap * hd_k, vn = (int64_t)n_head_kv * hd_v * cap;
    float *k = randv(kn, 1.0f), *v = randv(vn, 1.0f);
    rw_f16 *kh = malloc((size_t)kn * 2), *vh = malloc((size_t)vn * 2);
    rw_f32_to_f16_row(k, kh, 1, kn);
    rw_f32_to_f16_row(v, vh, 1, vn);
    if (f16) { /* the reference sees exactly the stored values */
        rw_f16_to_f32_row(kh, 1, k, kn);
        rw_f16_to_f32_row(vh, 1, v, vn);
    }
    const void *kp[1] = {f16 ? (const void *)kh : k}, *vp[1] = {f16 ? (const void *)vh : v};
    float *sinks = with_sinks ? randv(n_head, 3.0f) : NULL;
    const rw_attn_kv kv = {.k_pages = kp, .v_pages = vp, .page_len = cap, .k_head_stride = cap * hd_k,
                           .v_head_stride = hd_v * cap, .v_stride = cap, .f16 = f16, .window = window, .sinks = sinks};
    const int64_t qs = (int64_t)n_head * hd_k + 3, os = (int64_t)n_head * hd_v + 1;
    float *q = randv(n_ctx * qs, 2.0f);
    float *o_all = calloc((size_t)(n_ctx * os), 4), *o_one = calloc((size_t)(n_ctx * os), 4);
    float *o_par = calloc((size_t)(n_ctx * os), 4);
    float *scratch = malloc((size_t)rw_attn_scratch_floats(3, n_head, n_head_kv, n_ctx) * 4);
    const float scale = 1.0f / sqrtf((float)hd_k);
    rw_attn_causal(&kv, q, qs, 0, n_ctx, n_head, n_head_kv, hd_k, hd_v, scale, o_all, os, scratch, NULL);
    for (int64_t t = 0; t < n_ctx; t++) /* decode: one token at a time at position t */
        rw_attn_causal(&kv, q + t * qs, qs, t, 1, n_head, n_head_kv, hd_k, hd_v, scale, o_one + t * os, os, scratch,
                       NULL);
    /* a chunk in the middle, on three threads */
    const int64_t p0 = n_ctx / 3;
    memcpy(o_par, o_all, (size_t)(p0 * os) * 4);
    rw_attn_causal(&kv, q + p0 * qs, qs, p0, n_ctx - p0, n_head, n_head_kv, hd_k, hd_v, scale, o_par + p0 * os, os,
                   scratch, pool3);
    CHECK_MSG(memcmp(o_all, o_one, (size_t)(n_ctx * os) * 4) == 0, "attention %s window %lld: batch != one by one",
              tier_name, (long long)window);
    CHECK_MSG(memcmp(o_all, o_par, (size_t)(n_ctx * os) * 4) == 0, "attention %s window %lld: threads change bits",
              tier_name, (long long)window);
    /* every head as rw_attn_head computes it alone */
    int differ = 0;
    for (int64_t t = 0; t < n_ctx; t++)
        for (int h = 0; h < n_head; h++) {
            const int g = h / (n_head / n_head_kv);
            const size_t esz = f16 ? 2 : 4;
            float one[512];
            const void *kh0 = (const char *)kp[0] + (size_t)(g * kv.k_head_stride) * esz;
            const void *vh0 = (const char *)vp[0] + (size_t)(g * kv.v_head_stride) * esz;
            if (window > 0 || sinks) { /* one page with the query's window */
                const rw_attn_pages one_pg = {.k_pages = &kh0, .v_pages = &vh0, .page_len = cap, .v_stride = cap,
                                              .first = window > 0 && t + 1 > window ? t + 1 - window : 0,
                                              .sinks = sinks ? sinks + h : NULL};
                rw_attn_head_paged(q + t * qs + h * hd_k, &one_pg, f16, t + 1, hd_k, hd_v, scale, scratch, one);
                if (sinks) { /* every tier computes the reference's bits */
                    float r[512];
                    rw_attn_head_paged_ref(q + t * qs + h * hd_k, &one_pg, f16, t + 1, hd_k, hd_v, scale, scratch, r);
                    differ += memcmp(one, r, (size_t)hd_v * 4) != 0;
                }
            } else {
                rw_attn_head(q + t * qs + h * hd_k, kh0, vh0, cap, f16, t + 1, hd_k, hd_v, scale, scratch, one);
            }
            differ += memcmp(one, o_all + t * os + h * hd_v, (size_t)hd_v * 4) != 0;
        }
    CHECK_MSG(differ == 0, "attention %s f16 %d window %lld: %d heads differ from rw_attn_head", tier_name, f16,
              (long long)window, differ);
    /* the same cache in pages of 64 positions (cache/kv.h's layout): the
     * same bits as the contiguous one */
    {
        const int64_t PL = 64, np = (n_ctx + PL - 1) / PL;
        const size_t esz = f16 ? 2 : 4, kb = (size_t)n_head_kv * PL * hd_k * esz;
        const size_t pb = kb + (size_t)n_head_kv * hd_v * PL * esz;
        char *pages = malloc((size_t)np * pb);
        memset(pages, 0xFF, (size_t)np * pb); /* NaN in every slot no position fills: kernels must not read them */
        const void **pk = malloc((size_t)np * sizeof *pk), **pv = malloc((size_t)np * sizeof *pv);
        const char *K = kp[0], *Vt = vp[0];
        for (int64_t p = 0; p < np; p++) {
            char *pg = pages + (size_t)p * pb;
            pk[p] = pg, pv[p] = pg + kb;
            for (int64_t r = 0; r < PL && p * PL + r < n_ctx; r++)
                for (int g = 0; g < n_head_kv; g++) {
                    memcpy(pg + ((size_t)g * PL + r) * hd_k * esz, K + ((size_t)g * cap + p * PL + r) * hd_k * esz,
                           (size_t)hd_k * esz);
                    for (int i = 0; i < hd_v; i++)
                        memcpy(pg + kb + (((size_t)g * hd_v + i) * PL + r) * esz,
                               Vt + (((size_t)g * hd_v + i) * cap + p * PL + r) * esz, esz);
                }
        }
        const rw_attn_kv pkv = {.k_pages = pk, .v_pages = pv, .page_len = PL, .k_head_stride = PL * hd_k,
                                .v_head_stride = hd_v * PL, .v_stride = PL, .f16 = f16, .window = window, .sinks = sinks};
        float *o_pg = calloc((size_t)(n_ctx * os), 4);
        rw_attn_causal(&pkv, q, qs, 0, n_ctx, n_head, n_head_kv, hd_k, hd_v, scale, o_pg, os, scratch, pool3);
        CHECK_MSG(memcmp(o_all, o_pg, (size_t)(n_ctx * os) * 4) == 0, "attention %s f16 %d window %lld: paged != contiguous",
                  tier_name, f16, (long long)window);
        /* and one head through rw_attn_head_paged_ref against the contiguous reference */
        const int64_t first = window > 0 && n_ctx > window ? n_ctx - window : 0;
        const rw_attn_pages hp = {.k_pages = pk, .v_pages = pv, .page_len = PL, .v_stride = PL, .first = first, .sinks = sinks};
        const void *K0 = K, *V0 = Vt;
        const rw_attn_pages cp = {.k_pages = &K0, .v_pages = &V0, .page_len = cap, .v_stride = cap, .first = first,
                                  .sinks = sinks};
        float a[512], b[512];
        rw_attn_head_paged_ref(q + (n_ctx - 1) * qs, &hp, f16, n_ctx, hd_k, hd_v, scale, scratch, a);
        rw_attn_head_paged_ref(q + (n_ctx - 1) * qs, &cp, f16, n_ctx, hd_k, hd_v, scale, scratch, b);
        CHECK_MSG(memcmp(a, b, (size_t)hd_v * 4) == 0, "attention ref f16 %d: paged != contiguous", f16);
        free(o_pg), free(pages), free(pk), free(pv);
    }
    double err = 0;
    double *w = malloc((size_t)n_ctx * sizeof(double));
    for (int64_t t = 0; t < n_ctx; t++)
        for (int h = 0; h < n_head; h++) {
            const int g = h / (n_head / n_head_kv);
            const float *qh = q + t * qs + h * hd_k;
            double mx = -INFINITY, sum = 0;
            const int64_t lo = window > 0 && t + 1 > window ? t + 1 - window : 0; /* the window's first */
            for (int64_t j = lo; j <= t; j++) {
                double s = 0;
                for (int i = 0; i < hd_k; i++) s += (double)qh[i] * k[g * cap * hd_k + j * hd_k + i];
                w[j] = s * scale;
                mx = fmax(mx, w[j]);
            }
            if (sinks) mx = fmax(mx, sinks[h]);
            for (int64_t j = lo; j <= t; j++) sum += (w[j] = exp(w[j] - mx));
            if (sinks) sum += exp(sinks[h] - mx); /* no value: the weights sum to less than 1 */
            for (int i = 0; i < hd_v; i++) {
                double o = 0;
                for (int64_t j = lo; j <= t; j++) o += w[j] / sum * v[g * hd_v * cap + i * cap + j];
                err = fmax(err, fabs(o - o_all[t * os + h * hd_v + i]));
            }
        }
    CHECK_MSG(err < 2e-5, "attention %s heads %d/%d hd %d/%d n %lld f16 %d window %lld: error %g", tier_name, n_head,
              n_head_kv, hd_k, hd_v, (long long)n_ctx, f16, (long long)window, err);
    free(k), free(v), free(kh), free(vh), free(q), free(o_all), free(o_one), free(o_par), free(scratch), free(w);
    free(sinks);
}

/* ==== gated delta rule ================================================== */

typedef struct {
    int nv, nk, dk, dv;
    int64_t T;
    float *q, *k, *v, *g, *beta; /* q, k: [T][nk][dk]; v: [T][nv][dv]; g, beta: [T][nv] */
} delta_case;

static delta_case delta_make(int nv, int nk, int dk, int dv, int64_t T) {
    delta_case c = {nv, nk, dk, dv, T, randv(T * nk * dk, 1), randv(T * nk * dk, 1), randv(T * nv * dv, 1.5f),
                    randv(T * nv, 1), randv(T * nv, 1)};
    for (int64_t i = 0; i < T * nk; i++) l2n(c.q + i * dk, dk), l2n(c.k + i * dk, dk);
    for (int64_t i = 0; i < T * nv; i++) {
        c.g[i] = -0.05f - 0.6f * (c.g[i] + 1.0f);   /* log-decay in (-1.25, -0.05] */
        c.beta[i] = 1.0f / (1.0f + expf(-3.0f * c.beta[i]));
    }
    return c;
}

static void delta_free(delta_case *c) { free(c->q), free(c->k), free(c->v), free(c->g), free(c->beta); }

/* Key head of value head h. */
static int key_head(const delta_case *c, int h, bool tiled) { return tiled ? h % c->nk : h / (c->nv / c->nk); }

/* One value head in double, from a zero state; state out as S[i][j] at [j*dk + i]. */
static void delta_naive(const delta_case *c, int h, bool tiled, float scale, double *S, double *o /* [T][dv] */) {
    const int dk = c->dk, dv = c->dv, kh = key_head(c, h, tiled);
    double *d = malloc((size_t)dv * sizeof(double));
    memset(S, 0, (size_t)dk * dv * sizeof(double));
    for (int64_t t = 0; t < c->T; t++) {
        const float *q = c->q + (t * c->nk + kh) * dk, *k = c->k + (t * c->nk + kh) * dk;
        const float *v = c->v + (t * c->nv + h) * dv;
        const double decay = exp(c->g[t * c->nv + h]), b = c->beta[t * c->nv + h];
        for (int e = 0; e < dk * dv; e++) S[e] *= decay;
        for (int j = 0; j < dv; j++) {
            double kv = 0;
            for (int i = 0; i < dk; i++) kv += S[j * dk + i] * k[i];
            d[j] = b * (v[j] - kv);
        }
        for (int j = 0; j < dv; j++)
            for (int i = 0; i < dk; i++) S[j * dk + i] += k[i] * d[j];
        for (int j = 0; j < dv; j++) {
            double acc = 0;
            for (int i = 0; i < dk; i++) acc += S[j * dk + i] * q[i];
            o[t * dv + j] = acc * scale;
        }
    }
    free(d);
}

static void check_delta(int nv, int nk, int dk, int dv, int64_t T) {
    delta_case c = delta_make(nv, nk, dk, dv, T);
    const float scale = 1.0f / sqrtf((float)dv);
    const int64_t sn = (int64_t)nv * dk * dv, on = T * nv * dv;
    float *S1 = calloc((size_t)sn, 4), *S2 = calloc((size_t)sn, 4), *S3 = calloc((size_t)sn, 4);
    float *o1 = calloc((size_t)on, 4), *o2 = calloc((size_t)on, 4), *o3 = calloc((size_t)on, 4);
    float *scratch = malloc((size_t)(3 * dv) * 4);
    double *Sd = malloc((size_t)dk * dv * sizeof(double)), *od = malloc((size_t)(T * dv) * sizeof(double));
    for (int tiled = 0; tiled <= 1; tiled++) {
        memset(S1, 0, (size_t)sn * 4), memset(S2, 0, (size_t)sn * 4), memset(S3, 0, (size_t)sn * 4);
        /* whole run, serial */
        rw_delta_rule(S1, nv, nk, tiled, dk, dv, T, c.q, c.k, (int64_t)nk * dk, c.v, (int64_t)nv * dv, c.g, c.beta,
                      scale, o1, (int64_t)nv * dv, scratch, NULL);
        /* one token per call on three threads */
        for (int64_t t = 0; t < T; t++)
            rw_delta_rule(S2, nv, nk, tiled, dk, dv, 1, c.q + t * nk * dk, c.k + t * nk * dk, (int64_t)nk * dk,
                          c.v + t * nv * dv, (int64_t)nv * dv, c.g + t * nv, c.beta + t * nv, scale,
                          o2 + t * nv * dv, (int64_t)nv * dv, scratch, pool3);
        /* growing chunks 1, 2, 3, ... */
        for (int64_t t = 0, run = 1; t < T; t += run, run++) {
            const int64_t m = t + run > T ? T - t : run;
            rw_delta_rule(S3, nv, nk, tiled, dk, dv, m, c.q + t * nk * dk, c.k + t * nk * dk, (int64_t)nk * dk,
                          c.v + t * nv * dv, (int64_t)nv * dv, c.g + t * nv, c.beta + t * nv, scale,
                          o3 + t * nv * dv, (int64_t)nv * dv, scratch, pool3);
        }
        CHECK_MSG(memcmp(S1, S2, (size_t)sn * 4) == 0 && memcmp(o1, o2, (size_t)on * 4) == 0,
                  "delta %s: one token per call differs", tier_name);
        CHECK_MSG(memcmp(S1, S3, (size_t)sn * 4) == 0 && memcmp(o1, o3, (size_t)on * 4) == 0,
                  "delta %s: chunked calls differ", tier_name);
        double es = 0, eo = 0, mo = 0;
        for (int h = 0; h < nv; h++) {
            delta_naive(&c, h, tiled, scale, Sd, od);
            for (int e = 0; e < dk * dv; e++) es = fmax(es, fabs(Sd[e] - S1[(int64_t)h * dk * dv + e]));
            for (int64_t t = 0; t < T; t++)
                for (int j = 0; j < dv; j++) {
                    eo = fmax(eo, fabs(od[t * dv + j] - o1[(t * nv + h) * dv + j]));
                    mo = fmax(mo, fabs(od[t * dv + j]));
                }
        }
        if (getenv("RW_VERBOSE")) fprintf(stderr, "delta %s %d %d %d %d: es %g eo %g mo %g\n", tier_name, nv, nk, dk, dv, es, eo, mo);
        CHECK_MSG(es < 5e-7 && eo < 2e-6 * mo + 1e-8, "delta %s nv %d nk %d dk %d dv %d T %lld tiled %d: state err %g, out err %g",
                  tier_name, nv, nk, dk, dv, (long long)T, tiled, es, eo);
    }
    /* the reference tier function against the dispatched one, one head */
    memset(S1, 0, (size_t)dk * dv * 4), memset(S2, 0, (size_t)dk * dv * 4);
    rw_delta_rule_head_ref(S1, dk, dv, T, c.q, (int64_t)nk * dk, c.k, (int64_t)nk * dk, c.v, (int64_t)nv * dv, c.g,
                           nv, c.beta, nv, scale, o1, dv, scratch);
    rw_delta_rule_head(S2, dk, dv, T, c.q, (int64_t)nk * dk, c.k, (int64_t)nk * dk, c.v, (int64_t)nv * dv, c.g, nv,
                       c.beta, nv, scale, o2, dv, scratch);
    /* every tier computes the reference's bits */
    double e = 0;
    for (int64_t i = 0; i < (int64_t)dk * dv; i++) e = fmax(e, fabs(S1[i] - S2[i]));
    for (int64_t i = 0; i < T * dv; i++) e = fmax(e, fabs(o1[i] - o2[i]));
    CHECK_MSG(!memcmp(S1, S2, (size_t)dk * dv * 4) && !memcmp(o1, o2, (size_t)(T * dv) * 4),
              "delta %s dk %d dv %d: ref vs dispatched differ (by %g)", tier_name, dk, dv, e);
    free(S1), free(S2), free(S3), free(o1), free(o2), free(o3), free(scratch), free(Sd), free(od);
    delta_free(&c);
}

/* ==== Mamba2 scan ======================================================= */

static void check_ssm(int n_head, int n_group, int hd, int ds, int64_t T) {
    const int64_t xs = (int64_t)n_head * hd + 2, bcs = 2 * (int64_t)n_group * ds + 1, ys = (int64_t)n_head * hd;
    float *x = randv(T * xs, 1.0f), *dt = randv(T * n_head, 2.0f), *bc = randv(T * bcs, 1.0f);
    float *dtb = randv(n_head, 1.0f), *A = randv(n_head, 1.0f), *D = randv(n_head, 1.0f);
    for (int h = 0; h < n_head; h++) A[h] = -expf(2.0f * A[h]);
    dt[0] = 30.0f; /* the softplus x > 20 branch */
    const float *B = bc, *C = bc + (int64_t)n_group * ds;
    const int64_t sn = (int64_t)n_head * hd * ds;
    float *s1 = calloc((size_t)sn, 4), *s2 = calloc((size_t)sn, 4), *s3 = calloc((size_t)sn, 4);
    float *y1 = calloc((size_t)(T * ys), 4), *y2 = calloc((size_t)(T * ys), 4), *y3 = calloc((size_t)(T * ys), 4);
    rw_ssm_scan(s1, n_head, n_group, hd, ds, T, x, xs, dt, n_head, dtb, A, B, C, bcs, D, y1, ys, NULL);
    for (int64_t t = 0; t < T; t++)
        rw_ssm_scan(s2, n_head, n_group, hd, ds, 1, x + t * xs, xs, dt + t * n_head, n_head, dtb, A, B + t * bcs,
                    C + t * bcs, bcs, D, y2 + t * ys, ys, pool3);
    for (int64_t t = 0, run = 1; t < T; t += run, run++) {
        const int64_t m = t + run > T ? T - t : run;
        rw_ssm_scan(s3, n_head, n_group, hd, ds, m, x + t * xs, xs, dt + t * n_head, n_head, dtb, A, B + t * bcs,
                    C + t * bcs, bcs, D, y3 + t * ys, ys, pool3);
    }
    CHECK_MSG(memcmp(s1, s2, (size_t)sn * 4) == 0 && memcmp(y1, y2, (size_t)(T * ys) * 4) == 0,
              "ssm %s: one token per call differs", tier_name);
    CHECK_MSG(memcmp(s1, s3, (size_t)sn * 4) == 0 && memcmp(y1, y3, (size_t)(T * ys) * 4) == 0,
              "ssm %s: chunked calls differ", tier_name);
    double es = 0, ey = 0;
    double *st = malloc((size_t)hd * ds * sizeof(double));
    for (int h = 0; h < n_head; h++) {
        const int g = h / (n_head / n_group);
        memset(st, 0, (size_t)hd * ds * sizeof(double));
        for (int64_t t = 0; t < T; t++) {
            const double a = (double)dt[t * n_head + h] + dtb[h];
            const double dtp = a > 20 ? a : log1p(exp(a)), dA = exp(dtp * A[h]);
            for (int i = 0; i < hd; i++) {
                const double xv = x[t * xs + h * hd + i];
                double y = 0;
                for (int s = 0; s < ds; s++) {
                    double *v = &st[i * ds + s];
                    *v = *v * dA + B[t * bcs + g * ds + s] * xv * dtp;
                    y += *v * C[t * bcs + g * ds + s];
                }
                y += xv * D[h];
                ey = fmax(ey, fabs(y - y1[t * ys + h * hd + i]) / (1 + fabs(y)));
            }
        }
        for (int64_t e = 0; e < (int64_t)hd * ds; e++)
            es = fmax(es, fabs(st[e] - s1[(int64_t)h * hd * ds + e]) / (1 + fabs(st[e])));
    }
    if (getenv("RW_VERBOSE")) fprintf(stderr, "ssm %s %d %d %d %d: es %g ey %g\n", tier_name, n_head, n_group, hd, ds, es, ey);
    CHECK_MSG(es < 2e-6 && ey < 1e-5, "ssm %s heads %d groups %d hd %d ds %d T %lld: state err %g, y err %g",
              tier_name, n_head, n_group, hd, ds, (long long)T, es, ey);
    /* reference against dispatched, one head */
    memset(s1, 0, (size_t)hd * ds * 4), memset(s2, 0, (size_t)hd * ds * 4);
    rw_ssm_scan_head_ref(s1, hd, ds, T, x, xs, dt, n_head, dtb[0], A[0], B, C, bcs, D[0], y1, hd);
    rw_ssm_scan_head(s2, hd, ds, T, x, xs, dt, n_head, dtb[0], A[0], B, C, bcs, D[0], y2, hd);
    double e = 0;
    for (int64_t i = 0; i < (int64_t)hd * ds; i++) e = fmax(e, fabs(s1[i] - s2[i]) / (1 + fabs(s1[i])));
    for (int64_t i = 0; i < T * hd; i++) e = fmax(e, fabs(y1[i] - y2[i]) / (1 + fabs(y1[i])));
    CHECK_MSG(!memcmp(s1, s2, (size_t)hd * ds * 4) && !memcmp(y1, y2, (size_t)(T * hd) * 4),
              "ssm %s hd %d ds %d: ref vs dispatched differ (by %g)", tier_name, hd, ds, e);
    free(x), free(dt), free(bc), free(dtb), free(A), free(D), free(s1), free(s2), free(s3), free(y1), free(y2),
        free(y3), free(st);
}

int main(void) {
    small = rw_test_sanitized();
    rw_error err;
    CHECK(rw_threadpool_new(3, &pool3, &err) == RW_OK);
    for (int t = 0; t < RW_TIER_COUNT; t++) {
        if (!rw_kernel_tier_set((rw_kernel_tier)t)) continue;
        tier_name = rw_kernel_tier_name((rw_kernel_tier)t);
        for (int f16 = 0; f16 <= 1; f16++) {
            check_attention(4, 2, 64, 64, small ? 20 : 70, f16, 0);
            check_attention(3, 1, 17, 33, small ? 9 : 40, f16, 0);
            check_attention(2, 2, 128, 96, small ? 5 : 33, f16, 0);
            check_attention(8, 2, 256, 256, small ? 9 : 67, f16, 0); /* Qwen3.5 heads */
            check_attention(6, 1, 64, 64, small ? 7 : 21, f16, 0);   /* a group of 4 + 2 */
            check_attention(5, 1, 40, 24, small ? 7 : 19, f16, 0);
            check_attention(4, 2, 64, 48, small ? 70 : 150, f16, 0); /* several pages */
            /* sliding windows (gemma3): the gemma3 fixture's heads and
             * window, windows across 64-blocks and pages, a window of one,
             * odd sizes */
            check_attention(4, 1, 128, 128, small ? 40 : 150, f16, 16);
            check_attention(4, 2, 64, 48, small ? 90 : 200, f16, 70);
            check_attention(3, 1, 17, 33, small ? 9 : 40, f16, 1);
            check_attention(6, 1, 40, 24, small ? 70 : 140, f16, 65);
            /* prefill's blocks of four queries (head sizes of 64s): groups
             * of 3 (four tokens a block) across windows and pages, of 1 */
            check_attention(3, 1, 128, 128, small ? 40 : 130, f16, 70);
            check_attention(2, 2, 64, 64, small ? 70 : 131, f16, 0);
            /* attention sinks (gpt-oss: 8 heads on 2, window 8 on alternate
             * layers), with and without a window, groups of 4 + 2 */
            with_sinks = true;
            check_attention(8, 2, 64, 64, small ? 20 : 100, f16, 8);
            check_attention(8, 2, 64, 64, small ? 20 : 100, f16, 0);
            check_attention(6, 1, 40, 24, small ? 70 : 140, f16, 65);
            check_attention(10, 2, 64, 64, small ? 30 : 90, f16, 65); /* groups of 5 */
            with_sinks = false;
        }
        /* qwen35-like (dk 64, 2 key heads, 4 value heads), qwen3next-like
         * (32), the 0.8B head size (128), and sizes off every vector step */
        check_delta(4, 2, 64, 64, small ? 6 : 40);
        check_delta(4, 2, 32, 32, small ? 6 : 40);
        check_delta(2, 1, 7, 5, small ? 6 : 30);
        check_delta(3, 3, 100, 70, small ? 4 : 17);
        if (!small) check_delta(2, 2, 128, 128, 70); /* two tiles of the blocked forms and a part */
        check_delta(2, 1, 128, 24, small ? 5 : 37); /* blocked forms' dv off 16 */
        check_delta(2, 2, 64, 8, small ? 5 : 20);
        check_ssm(8, 2, 64, 32, small ? 5 : 30);   /* granitehybrid fixture shape */
        check_ssm(4, 1, 16, 128, small ? 5 : 20);  /* Granite-4.0-H d_state */
        check_ssm(3, 3, 5, 70, small ? 4 : 13);
        check_ssm(2, 1, 64, 128, small ? 4 : 12); /* Granite-4.0-H's heads: four pieces of 16 rows */
        check_ssm(2, 2, 20, 64, small ? 4 : 12);  /* a piece of 16 rows and one of 4 */
    }
    rw_threadpool_free(pool3);
    return rw_test_done();
}
