/* test_spec.c - speculative decoding (engine/spec.h) end to end on the
 * fixture models, which share one vocabulary:
 *   - greedy output with a draft is bitwise plain greedy output, tokens and
 *     the logits of every generated position, for every fixture
 *     architecture as target, with another fixture as draft and with the
 *     target drafting for itself (then every draft is accepted);
 *   - batched: several sequences stepped together (one verify pass), each
 *     with its own prompt, draft length and budget, each equal to its solo
 *     plain output (the draft is the target's F32 original, which agrees
 *     often but not always, so acceptance differs per sequence; unrelated
 *     fixtures almost never agree);
 *   - sampled: the distribution of generated tokens with a draft matches the
 *     one without (two-sample chi-square over many seeds). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/spec.h"
#include "harness.h"

static const char *ARCHS[] = {"llama", "qwen3", "qwen35", "qwen35moe", "qwen3next", "granitehybrid", "lfm2", "nemotron_h",
                              "gemma3", "gpt-oss"};
#define N_ARCH 10

typedef struct {
    rw_gguf *g;
    rw_model *m;
} model;

/* arch "qwen3" opens qwen3/qwen3-Q8_0.gguf, "qwen3-F32" qwen3/qwen3-F32.gguf
 * (a type starts with a capital: "gpt-oss" is an architecture) */
static void open_model(const char *arch, model *out) {
    char rel[128], dir[64];
    snprintf(dir, sizeof dir, "%s", arch);
    char *dash = strrchr(dir, '-');
    if (dash && !(dash[1] >= 'A' && dash[1] <= 'Z')) dash = NULL;
    if (dash) *dash = 0;
    snprintf(rel, sizeof rel, dash ? "%s/%s.gguf" : "%s/%s-Q8_0.gguf", dir, arch);
    rw_error err = {0};
    out->g = NULL;
    out->m = NULL;
    if (rw_gguf_open(rw_test_fixture_path(rel), &out->g, &err) || rw_model_load(out->g, &out->m, &err)) {
        fprintf(stderr, "%s: %s\n", rel, err.msg);
        rw_test_failures++;
    }
}

static void close_model(model *x) {
    rw_model_free(x->m);
    rw_gguf_close(x->g);
}

static int32_t prompt[64];
static int64_t n_prompt;

static void load_prompt(void) {
    size_t len = 0;
    char *txt = rw_test_read_file(rw_test_fixture_path("qwen3/qwen3.prompt.ids"), &len);
    if (!txt) rw_test_skip("no prompt ids");
    char *p = txt;
    n_prompt = 0;
    while (n_prompt < 64) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        prompt[n_prompt++] = (int32_t)v;
        p = end;
    }
    free(txt);
}

/* Plain decoding: n_gen tokens from the prompt prefix of length np; tokens
 * and the logits each was chosen from. */
static void plain(rw_model *m, const rw_sampler_params *sp, int64_t np, int n_gen, int32_t *toks, float *rows) {
    const int64_t nv = rw_model_get_hparams(m)->n_vocab;
    rw_error err = {0};
    rw_model_seq *s = NULL;
    rw_sampler *smp = NULL;
    CHECK(!rw_model_seq_new(m, RW_KV_F32, np + n_gen, &s, &err));
    CHECK(!rw_sampler_new(sp, nv, &smp, &err));
    rw_forward_args fa = {.tokens = prompt, .n = np, .logits = rows};
    CHECK(!rw_model_forward(m, s, &fa, &err));
    for (int k = 0; k < n_gen; k++) {
        float *row = rows + (size_t)k * (size_t)nv;
        toks[k] = rw_sampler_sample(smp, row);
        CHECK(!rw_sampler_accept(smp, toks[k], &err));
        if (k + 1 == n_gen) break;
        fa = (rw_forward_args){.tokens = &toks[k], .n = 1, .logits = row + nv};
        CHECK(!rw_model_forward(m, s, &fa, &err));
    }
    rw_sampler_free(smp);
    rw_model_seq_free(s);
}

/* One speculative generation in progress. */
typedef struct {
    rw_model_seq *s;
    rw_sampler *smp;
    rw_spec_seq *spec;
    int32_t *toks;
    float *rows;
    int n_gen, k;
} run;

static void run_begin(run *r, rw_model *m, rw_model *dm, const rw_sampler_params *sp, const rw_spec_params *pp,
                      int64_t np, int n_gen) {
    const int64_t nv = rw_model_get_hparams(m)->n_vocab;
    rw_error err = {0};
    memset(r, 0, sizeof *r);
    r->n_gen = n_gen;
    r->toks = calloc((size_t)n_gen, sizeof *r->toks);
    r->rows = calloc((size_t)n_gen * (size_t)nv, sizeof *r->rows);
    CHECK(!rw_model_seq_new(m, RW_KV_F32, np + n_gen, &r->s, &err));
    CHECK(!rw_sampler_new(sp, nv, &r->smp, &err));
    CHECK(!rw_spec_seq_new(dm, r->s, r->smp, sp, pp, &r->spec, &err));
    rw_forward_args fa = {.tokens = prompt, .n = np, .logits = r->rows};
    CHECK(!rw_model_forward(m, r->s, &fa, &err));
    r->toks[0] = rw_sampler_sample(r->smp, r->rows);
    CHECK(!rw_sampler_accept(r->smp, r->toks[0], &err));
    CHECK(!rw_spec_seq_start(r->spec, r->toks[0], &err));
    r->k = 1;
}

/* Copies the last step's output. */
static void run_collect(run *r, int64_t nv) {
    const int32_t *t;
    const float *l;
    int32_t n = rw_spec_seq_output(r->spec, &t, &l);
    CHECK(n >= 1 && r->k + n <= r->n_gen);
    for (int32_t i = 0; i < n && r->k < r->n_gen; i++, r->k++) {
        r->toks[r->k] = t[i];
        memcpy(r->rows + (size_t)r->k * (size_t)nv, l + (size_t)i * (size_t)nv, (size_t)nv * sizeof(float));
    }
}

static void run_end(run *r) {
    rw_spec_seq_free(r->spec);
    rw_sampler_free(r->smp);
    rw_model_seq_free(r->s);
    free(r->toks);
    free(r->rows);
}

static void spec_solo(rw_model *m, rw_model *dm, const rw_sampler_params *sp, const rw_spec_params *pp, int64_t np,
                      int n_gen, int32_t *toks, float *rows, rw_spec_stats *st) {
    const int64_t nv = rw_model_get_hparams(m)->n_vocab;
    run r;
    rw_error err = {0};
    run_begin(&r, m, dm, sp, pp, np, n_gen);
    while (r.k < n_gen) {
        const int64_t budget = n_gen - r.k;
        if (rw_spec_step(m, dm, &r.spec, &budget, 1, NULL, &err)) {
            fprintf(stderr, "step: %s\n", err.msg);
            rw_test_failures++;
            break;
        }
        run_collect(&r, nv);
    }
    memcpy(toks, r.toks, (size_t)n_gen * sizeof *toks);
    if (rows) memcpy(rows, r.rows, (size_t)n_gen * (size_t)nv * sizeof *rows);
    if (st) *st = rw_spec_seq_stats(r.spec);
    run_end(&r);
}

static void test_greedy(int n_gen) {
    model ms[N_ARCH];
    for (int a = 0; a < N_ARCH; a++) {
        open_model(ARCHS[a], &ms[a]);
        if (!ms[a].m) return;
    }
    rw_sampler_params sp = rw_sampler_params_default();
    for (int a = 0; a < N_ARCH; a++) {
        rw_model *m = ms[a].m;
        const int64_t nv = rw_model_get_hparams(m)->n_vocab;
        int32_t *t0 = calloc((size_t)n_gen, sizeof *t0), *t1 = calloc((size_t)n_gen, sizeof *t1);
        float *r0 = calloc((size_t)n_gen * (size_t)nv, sizeof *r0),
              *r1 = calloc((size_t)n_gen * (size_t)nv, sizeof *r1);
        plain(m, &sp, n_prompt, n_gen, t0, r0);
        for (int d = 0; d < 3; d++) {
            /* d = 0: itself (k 3); 1: the next fixture (k 4); 2: another, adaptive (k
             * 6) */
            rw_model *dm = d == 0 ? m : ms[(a + d * 2 - 1) % N_ARCH].m;
            rw_spec_params pp = rw_spec_params_default();
            pp.k_max = d == 0 ? 3 : d == 1 ? 4 : 6;
            pp.adaptive = d == 2;
            rw_spec_stats st;
            spec_solo(m, dm, &sp, &pp, n_prompt, n_gen, t1, r1, &st);
            CHECK_MSG(!memcmp(t0, t1, (size_t)n_gen * sizeof *t0), "%s draft %d: tokens differ", ARCHS[a], d);
            CHECK_MSG(!memcmp(r0, r1, (size_t)n_gen * (size_t)nv * sizeof *r0), "%s draft %d: logits differ", ARCHS[a],
                      d);
            CHECK(st.emitted == n_gen - 1);
            if (d == 0) {
                CHECK_MSG(st.accepted == st.drafted && st.drafted > 0, "%s self-draft accepted %lld of %lld", ARCHS[a],
                          (long long)st.accepted, (long long)st.drafted);
                /* k 3 of 4 tokens a step: the budget limits the last */
                CHECK(st.steps == (n_gen - 1 + 3) / 4);
            }
        }
        free(t0);
        free(t1);
        free(r0);
        free(r1);
    }
    for (int a = 0; a < N_ARCH; a++)
        close_model(&ms[a]);
}

/* Four sequences of one target stepped together, each its own prompt
 * length, draft length and budget; each equals its solo plain output. */
static void test_batched(const char *arch, const char *draft_arch, int n_gen) {
    model t, d;
    open_model(arch, &t);
    open_model(draft_arch, &d);
    if (!t.m || !d.m) return;
    const int64_t nv = rw_model_get_hparams(t.m)->n_vocab;
    rw_sampler_params sp = rw_sampler_params_default();
    enum { N = 4 };
    run r[N];
    rw_spec_seq *seqs[N];
    int64_t budget[N];
    const int64_t np[N] = {n_prompt, n_prompt - 5, 7, n_prompt - 11};
    const int32_t kmax[N] = {4, 1, 7, 0};
    const int gen[N] = {n_gen, n_gen / 2, n_gen, n_gen - 3};
    for (int i = 0; i < N; i++) {
        rw_spec_params pp = rw_spec_params_default();
        pp.k_max = kmax[i];
        pp.adaptive = false;
        run_begin(&r[i], t.m, d.m, &sp, &pp, np[i], gen[i]);
    }
    rw_error err = {0};
    for (;;) {
        int m = 0;
        int idx[N];
        for (int i = 0; i < N; i++)
            if (r[i].k < r[i].n_gen) {
                idx[m] = i;
                seqs[m] = r[i].spec;
                budget[m] = r[i].n_gen - r[i].k;
                m++;
            }
        if (!m) break;
        if (rw_spec_step(t.m, d.m, seqs, budget, m, NULL, &err)) {
            fprintf(stderr, "batched step: %s\n", err.msg);
            rw_test_failures++;
            break;
        }
        for (int j = 0; j < m; j++)
            run_collect(&r[idx[j]], nv);
    }
    int64_t acc[N];
    for (int i = 0; i < N; i++) {
        int32_t *t0 = calloc((size_t)gen[i], sizeof *t0);
        float *r0 = calloc((size_t)gen[i] * (size_t)nv, sizeof *r0);
        plain(t.m, &sp, np[i], gen[i], t0, r0);
        CHECK_MSG(!memcmp(t0, r[i].toks, (size_t)gen[i] * sizeof *t0), "%s batched seq %d: tokens differ", arch, i);
        CHECK_MSG(!memcmp(r0, r[i].rows, (size_t)gen[i] * (size_t)nv * sizeof *r0), "%s batched seq %d: logits differ",
                  arch, i);
        rw_spec_stats st = rw_spec_seq_stats(r[i].spec);
        acc[i] = st.accepted;
        CHECK(st.emitted == gen[i] - 1);
        free(t0);
        free(r0);
        run_end(&r[i]);
    }
    CHECK(acc[3] == 0); /* k_max 0: plain decoding inside the batch */
    CHECK(acc[0] > 0 && (acc[0] != acc[1] || acc[1] != acc[2]));
    fprintf(stderr, "%s batched (draft %s): accepted %lld %lld %lld %lld\n", arch, draft_arch, (long long)acc[0],
            (long long)acc[1], (long long)acc[2], (long long)acc[3]);
    close_model(&t);
    close_model(&d);
}

/* Chi-square critical value at p = 0.001 (Wilson-Hilferty). */
static double chi2_crit(int dof) {
    const double z = 3.09, h = 2.0 / (9.0 * dof);
    const double c = 1 - h + z * sqrt(h);
    return dof * c * c * c;
}

/* Two-sample chi-square on the tokens at positions 1..n_gen-1 (position 0
 * comes from the prompt pass, the same with or without a draft) of sampled
 * generations with seeds 0..n_seeds-1, with and without a draft. Top-k 6
 * keeps the support small enough for the counts. */
static void test_sampled(const char *arch, const char *draft_arch, int n_seeds, bool expect_accepts) {
    model t, d;
    open_model(arch, &t);
    open_model(draft_arch, &d);
    if (!t.m || !d.m) return;
    enum { NG = 4 };
    const int64_t nv = rw_model_get_hparams(t.m)->n_vocab;
    int *h0 = calloc((size_t)NG * (size_t)nv, sizeof *h0), *h1 = calloc((size_t)NG * (size_t)nv, sizeof *h1);
    float *rows = calloc((size_t)NG * (size_t)nv, sizeof *rows);
    int32_t toks[NG];
    int64_t drafted = 0, accepted = 0;
    for (int seed = 0; seed < n_seeds; seed++) {
        rw_sampler_params sp = rw_sampler_params_default();
        sp.temperature = 1.0f;
        sp.top_k = 6;
        sp.seed = (uint64_t)seed;
        /* the plain run with another seed than the draft run's, so the two
         * samples are independent */
        sp.seed = (uint64_t)seed + 1000003u;
        plain(t.m, &sp, 9, NG, toks, rows);
        for (int k = 1; k < NG; k++)
            h0[(size_t)k * (size_t)nv + (size_t)toks[k]]++;
        sp.seed = (uint64_t)seed;
        rw_spec_params pp = rw_spec_params_default();
        pp.k_max = 3;
        pp.adaptive = false;
        rw_spec_stats st;
        spec_solo(t.m, d.m, &sp, &pp, 9, NG, toks, NULL, &st);
        drafted += st.drafted;
        accepted += st.accepted;
        for (int k = 1; k < NG; k++)
            h1[(size_t)k * (size_t)nv + (size_t)toks[k]]++;
    }
    CHECK(accepted < drafted); /* rejections: residual draws ran */
    if (expect_accepts) CHECK(accepted > 0);
    for (int k = 1; k < NG; k++) {
        const int *a = h0 + (size_t)k * (size_t)nv, *b = h1 + (size_t)k * (size_t)nv;
        /* bins with fewer than 10 in all are pooled into one */
        double chi = 0;
        int dof = -1, pa = 0, pb = 0;
        for (int64_t v = 0; v < nv; v++) {
            if (a[v] + b[v] < 10) {
                pa += a[v];
                pb += b[v];
                continue;
            }
            chi += (double)(a[v] - b[v]) * (a[v] - b[v]) / (a[v] + b[v]);
            dof++;
        }
        if (pa + pb > 0) {
            chi += (double)(pa - pb) * (pa - pb) / (pa + pb);
            dof++;
        }
        CHECK(dof >= 3);
        const double crit = chi2_crit(dof > 0 ? dof : 1);
        fprintf(stderr,
                "%s sampled position %d: chi2 %.2f, dof %d, critical %.2f (p = "
                "0.001)\n",
                arch, k, chi, dof, crit);
        CHECK(chi < crit);
    }
    fprintf(stderr, "%s sampled (draft %s): accepted %lld of %lld drafts\n", arch, draft_arch, (long long)accepted,
            (long long)drafted);
    free(h0);
    free(h1);
    free(rows);
    close_model(&t);
    close_model(&d);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no fixtures");
    load_prompt();
    const bool san = rw_test_sanitized();
    test_greedy(san ? 10 : 20);
    test_batched("qwen35", "qwen35-F32", san ? 12 : 24);
    test_batched("granitehybrid", "granitehybrid-F32", san ? 12 : 24);
    test_batched("lfm2", "lfm2-F32", san ? 12 : 24);
    test_batched("nemotron_h", "nemotron_h-F32", san ? 12 : 24);
    /* a close draft (accepts nearly always) and an unrelated one (every
     * token a residual draw) */
    test_sampled("qwen3", "qwen3-F32", san ? 200 : 800, true);
    test_sampled("qwen3", "llama", san ? 200 : 800, false);
    return rw_test_done();
}
