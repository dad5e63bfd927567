/* test_spec_mtp.c - speculative decoding with the model's own MTP block and
 * with n-gram drafts (engine/spec.h) on the qwen35mtp fixture (random
 * weights: the block drafts badly, so acceptance comes mostly from n-gram
 * drafts on prompts the greedy model repeats; the block itself is checked
 * against llama.cpp in tests/models/test_mtp_fixtures.c):
 *   - greedy: tokens and the logits of every generated position bitwise the
 *     plain output of the same model without its MTP block, for mtp, ngram
 *     and mtp,ngram, fixed and adaptive, draft lengths 1..5; afterwards the
 *     block's KV the sequence kept is the one computed from scratch (its
 *     next rows equal a fresh sequence's bitwise);
 *   - batched: four sequences with their own sources, draft lengths, prompts
 *     and budgets stepped together, each equal to its solo plain output;
 *   - the engine with the prefix cache: a prompt served twice (the second a
 *     cache hit, its MTP states restored with the sequence) and two at once,
 *     every output the plain greedy one;
 *   - sampled: with mtp and with ngram drafts (one-hot draft distributions)
 *     the distribution of generated tokens matches plain sampling
 *     (two-sample chi-square over many seeds).
 * The sanitizer build runs fewer and shorter cases, and the sampled runs
 * without the statistics. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/spec.h"
#include "harness.h"

static rw_gguf *g_g;
static rw_model *g_m, *g_ref; /* the same file with and without its MTP block */
static rw_tokenizer *g_tok;
static int64_t g_nv;

static int32_t P0[64], P1[64];

static void load_prompts(void) {
    size_t len = 0;
    char *txt = rw_test_read_file(rw_test_fixture_path("qwen35mtp/qwen35mtp.prompt.ids"), &len);
    if (!txt) rw_test_skip("no prompt ids");
    char *p = txt;
    for (int i = 0; i < 64; i++) {
        char *end;
        P0[i] = (int32_t)strtol(p, &end, 10);
        p = end;
    }
    free(txt);
    /* 12 tokens said five times and a bit: n-gram lookups find them */
    for (int i = 0; i < 64; i++) P1[i] = P0[i % 12];
}

static void plain(const int32_t *prompt, int64_t np, const rw_sampler_params *sp, int n_gen, int32_t *toks,
                  float *rows) {
    rw_error err = {0};
    rw_model_seq *s = NULL;
    rw_sampler *smp = NULL;
    CHECK(!rw_model_seq_new(g_ref, RW_KV_F32, np + n_gen, &s, &err));
    CHECK(!rw_sampler_new(sp, g_nv, &smp, &err));
    rw_forward_args fa = {.tokens = prompt, .n = np, .logits = rows};
    CHECK(!rw_model_forward(g_ref, s, &fa, &err));
    for (int k = 0; k < n_gen; k++) {
        float *row = rows + (size_t)k * (size_t)g_nv;
        toks[k] = rw_sampler_sample(smp, row);
        CHECK(!rw_sampler_accept(smp, toks[k], &err));
        if (k + 1 == n_gen) break;
        fa = (rw_forward_args){.tokens = &toks[k], .n = 1, .logits = row + g_nv};
        CHECK(!rw_model_forward(g_ref, s, &fa, &err));
    }
    rw_sampler_free(smp);
    rw_model_seq_free(s);
}

typedef struct {
    rw_model_seq *s;
    rw_sampler *smp;
    rw_spec_seq *spec;
    int32_t *toks;
    float *rows;
    int n_gen, k;
} run;

static void run_begin(run *r, const int32_t *prompt, int64_t np, const rw_sampler_params *sp,
                      const rw_spec_params *pp, int n_gen) {
    rw_error err = {0};
    memset(r, 0, sizeof *r);
    r->n_gen = n_gen;
    r->toks = calloc((size_t)n_gen, sizeof *r->toks);
    r->rows = calloc((size_t)n_gen * (size_t)g_nv, sizeof *r->rows);
    CHECK(!rw_model_seq_new(g_m, RW_KV_F32, np + n_gen, &r->s, &err));
    CHECK(!rw_sampler_new(sp, g_nv, &r->smp, &err));
    CHECK_MSG(!rw_spec_seq_new(NULL, r->s, r->smp, sp, pp, &r->spec, &err), "%s", err.msg);
    rw_forward_args fa = {.tokens = prompt, .n = np, .logits = r->rows};
    CHECK(!rw_model_forward(g_m, r->s, &fa, &err));
    r->toks[0] = rw_sampler_sample(r->smp, r->rows);
    CHECK(!rw_sampler_accept(r->smp, r->toks[0], &err));
    CHECK(!rw_spec_seq_start(r->spec, r->toks[0], &err));
    r->k = 1;
}

static void run_collect(run *r) {
    const int32_t *t;
    const float *l;
    int32_t n = rw_spec_seq_output(r->spec, &t, &l);
    CHECK(n >= 1 && r->k + n <= r->n_gen);
    for (int32_t i = 0; i < n && r->k < r->n_gen; i++, r->k++) {
        r->toks[r->k] = t[i];
        memcpy(r->rows + (size_t)r->k * (size_t)g_nv, l + (size_t)i * (size_t)g_nv, (size_t)g_nv * sizeof(float));
    }
}

static void run_end(run *r) {
    rw_spec_seq_free(r->spec);
    rw_sampler_free(r->smp);
    rw_model_seq_free(r->s);
    free(r->toks);
    free(r->rows);
}

/* The MTP KV a sequence kept is the canonical one: its rows from its MTP
 * length to its length equal those of a fresh sequence fed the same tokens. */
static void check_mtp_canonical(rw_model_seq *s, const char *what) {
    rw_error err = {0};
    const int64_t L = rw_model_seq_length(s), M = rw_model_seq_mtp_length(s);
    CHECK_MSG(M <= L, "%s: MTP length %lld past the sequence's %lld", what, (long long)M, (long long)L);
    if (M >= L) return;
    rw_model_seq *f = NULL;
    float *a = malloc((size_t)L * (size_t)g_nv * sizeof *a), *b = malloc((size_t)L * (size_t)g_nv * sizeof *b);
    CHECK(!rw_model_seq_new(g_m, RW_KV_F32, L, &f, &err));
    rw_forward_args fa = {.tokens = rw_model_seq_tokens(s), .n = L};
    CHECK(!rw_model_forward(g_m, f, &fa, &err));
    rw_mtp_item fi = {.seq = f, .tokens = rw_model_seq_tokens(s), .n = L, .logits = a, .all_logits = true};
    CHECK(!rw_model_mtp_forward(g_m, &fi, 1, NULL, &err));
    rw_mtp_item si = {.seq = s, .tokens = rw_model_seq_tokens(s) + M, .n = L - M, .logits = b, .all_logits = true};
    CHECK_MSG(!rw_model_mtp_forward(g_m, &si, 1, NULL, &err), "%s", err.msg);
    CHECK_MSG(!memcmp(a + M * g_nv, b, (size_t)(L - M) * (size_t)g_nv * sizeof *a),
              "%s: the MTP state kept differs from a fresh one's (rows %lld..%lld)", what, (long long)M, (long long)L);
    rw_model_seq_free(f);
    free(a), free(b);
}

static rw_spec_stats spec_solo(const int32_t *prompt, int64_t np, const rw_sampler_params *sp,
                               const rw_spec_params *pp, int n_gen, int32_t *toks, float *rows, const char *what) {
    run r;
    rw_error err = {0};
    run_begin(&r, prompt, np, sp, pp, n_gen);
    while (r.k < n_gen) {
        const int64_t budget = n_gen - r.k;
        if (rw_spec_step(g_m, NULL, &r.spec, &budget, 1, NULL, &err)) {
            fprintf(stderr, "%s: step: %s\n", what, err.msg);
            rw_test_failures++;
            break;
        }
        run_collect(&r);
    }
    memcpy(toks, r.toks, (size_t)n_gen * sizeof *toks);
    if (rows) memcpy(rows, r.rows, (size_t)n_gen * (size_t)g_nv * sizeof *rows);
    rw_spec_stats st = rw_spec_seq_stats(r.spec);
    if (rows) check_mtp_canonical(r.s, what);
    run_end(&r);
    return st;
}

static void test_greedy(int n_gen, float bias, bool quick) {
    rw_sampler_params sp = rw_sampler_params_default();
    /* a logit bias (the request's, so the drafts' too) that makes one token
     * win often but not always: drafts of both kinds then get accepted and
     * rejected (random weights alone almost never agree) */
    const rw_logit_bias lb = {.token = 15, .bias = bias};
    if (bias > 0) sp.logit_bias = &lb, sp.n_logit_bias = 1;
    int32_t *t0 = calloc((size_t)n_gen, sizeof *t0), *t1 = calloc((size_t)n_gen, sizeof *t1);
    float *r0 = calloc((size_t)n_gen * (size_t)g_nv, sizeof *r0), *r1 = calloc((size_t)n_gen * (size_t)g_nv, sizeof *r1);
    static const unsigned SRC[] = {RW_SPEC_MTP, RW_SPEC_NGRAM, RW_SPEC_MTP | RW_SPEC_NGRAM};
    static const char *const NAME[] = {"mtp", "ngram", "mtp,ngram"};
    int64_t ngram_acc = 0, mtp_drafted = 0, mtp_acc = 0;
    for (int pi = quick ? 1 : 0; pi < 2; pi++) {
        const int32_t *prompt = pi ? P1 : P0;
        plain(prompt, 64, &sp, n_gen, t0, r0);
        for (int si = 0; si < 3; si++)
            for (int v = quick ? 1 : 0; v < 3; v++) {
                rw_spec_params pp = rw_spec_params_default();
                pp.sources = SRC[si];
                pp.k_max = v == 0 ? 1 : v == 1 ? 3 : 5;
                pp.adaptive = v == 2;
                pp.catch_up_cost = 0.01f; /* a block of 5 / the trunk and head: draft after the prompt */
                pp.ngram_n = v == 0 ? 1 : 2;
                char what[64];
                snprintf(what, sizeof what, "prompt %d%s %s k %d%s", pi, bias > 0 ? " bias" : "", NAME[si], pp.k_max,
                         pp.adaptive ? " adaptive" : "");
                rw_spec_stats st = spec_solo(prompt, 64, &sp, &pp, n_gen, t1, r1, what);
                CHECK_MSG(!memcmp(t0, t1, (size_t)n_gen * sizeof *t0), "%s: tokens differ", what);
                CHECK_MSG(!memcmp(r0, r1, (size_t)n_gen * (size_t)g_nv * sizeof *r0), "%s: logits differ", what);
                CHECK(st.emitted == n_gen - 1);
                CHECK(st.ngram_drafted <= st.drafted && st.ngram_accepted <= st.ngram_drafted);
                if (!(SRC[si] & RW_SPEC_NGRAM)) CHECK(st.ngram_drafted == 0);
                if (SRC[si] == RW_SPEC_NGRAM) CHECK(st.ngram_drafted == st.drafted);
                if (SRC[si] & RW_SPEC_MTP && !pp.adaptive) mtp_drafted += st.drafted - st.ngram_drafted;
                mtp_acc += st.accepted - st.ngram_accepted;
                ngram_acc += st.ngram_accepted;
                fprintf(stderr, "%s: %lld passes, %lld drafted (%lld n-gram), %lld accepted (%lld n-gram)\n", what,
                        (long long)st.steps, (long long)st.drafted, (long long)st.ngram_drafted,
                        (long long)st.accepted, (long long)st.ngram_accepted);
            }
    }
    CHECK(mtp_drafted > 0);
    if (bias > 0) CHECK(ngram_acc > 0 && mtp_acc > 0);
    free(t0), free(t1), free(r0), free(r1);
}

/* Four sequences stepped together, each its own sources, draft length,
 * prompt and budget; each equals its solo plain output. */
static void test_batched(int n_gen) {
    rw_sampler_params sp = rw_sampler_params_default();
    const rw_logit_bias lb = {.token = 15, .bias = 8.0f}; /* see test_greedy */
    sp.logit_bias = &lb, sp.n_logit_bias = 1;
    int64_t acc_all = 0;
    enum { N = 4 };
    run r[N];
    rw_spec_seq *seqs[N];
    int64_t budget[N];
    const int32_t *prompt[N] = {P1, P0, P1, P0};
    const int64_t np[N] = {64, 40, 23, 61};
    const unsigned src[N] = {RW_SPEC_MTP | RW_SPEC_NGRAM, RW_SPEC_MTP, RW_SPEC_NGRAM, RW_SPEC_MTP};
    const int32_t kmax[N] = {4, 2, 6, 0};
    const int gen[N] = {n_gen, n_gen / 2, n_gen, n_gen - 3};
    for (int i = 0; i < N; i++) {
        rw_spec_params pp = rw_spec_params_default();
        pp.sources = src[i];
        pp.k_max = kmax[i];
        pp.adaptive = false;
        pp.ngram_n = 2;
        run_begin(&r[i], prompt[i], np[i], &sp, &pp, gen[i]);
    }
    rw_error err = {0};
    for (;;) {
        int m = 0, idx[N];
        for (int i = 0; i < N; i++)
            if (r[i].k < r[i].n_gen) {
                idx[m] = i;
                seqs[m] = r[i].spec;
                budget[m] = r[i].n_gen - r[i].k;
                m++;
            }
        if (!m) break;
        if (rw_spec_step(g_m, NULL, seqs, budget, m, NULL, &err)) {
            fprintf(stderr, "batched step: %s\n", err.msg);
            rw_test_failures++;
            break;
        }
        for (int j = 0; j < m; j++) run_collect(&r[idx[j]]);
    }
    for (int i = 0; i < N; i++) {
        int32_t *t0 = calloc((size_t)gen[i], sizeof *t0);
        float *r0 = calloc((size_t)gen[i] * (size_t)g_nv, sizeof *r0);
        plain(prompt[i], np[i], &sp, gen[i], t0, r0);
        CHECK_MSG(!memcmp(t0, r[i].toks, (size_t)gen[i] * sizeof *t0), "batched seq %d: tokens differ", i);
        CHECK_MSG(!memcmp(r0, r[i].rows, (size_t)gen[i] * (size_t)g_nv * sizeof *r0), "batched seq %d: logits differ",
                  i);
        rw_spec_stats st = rw_spec_seq_stats(r[i].spec);
        CHECK(st.emitted == gen[i] - 1);
        if (kmax[i] == 0) CHECK(st.drafted == 0);
        char what[32];
        snprintf(what, sizeof what, "batched seq %d", i);
        check_mtp_canonical(r[i].s, what);
        fprintf(stderr, "batched seq %d: %lld drafted, %lld accepted\n", i, (long long)st.drafted,
                (long long)st.accepted);
        acc_all += st.accepted;
        free(t0), free(r0);
        run_end(&r[i]);
    }
    CHECK(acc_all > 0);
}

/* A constraint (as a grammar sets one) that bans a token the prompt is full
 * of: n-gram drafts that would carry it are cut there, and the output is
 * plain decoding's with the token banned by a logit bias. */
static bool ban_163(void *ctx, const int32_t *prefix, int n, float *row) {
    (void)ctx, (void)prefix, (void)n;
    row[163] = -INFINITY;
    return true;
}

static void test_constraint(int n_gen) {
    rw_sampler_params sp = rw_sampler_params_default();
    const rw_logit_bias lb[2] = {{.token = 15, .bias = 8.0f}, {.token = 163, .bias = -INFINITY}};
    sp.logit_bias = lb, sp.n_logit_bias = 2;
    int32_t *t0 = calloc((size_t)n_gen, sizeof *t0);
    float *r0 = calloc((size_t)n_gen * (size_t)g_nv, sizeof *r0);
    plain(P1, 64, &sp, n_gen, t0, r0);
    sp.n_logit_bias = 1; /* the constraint bans 163 in the speculative run */
    rw_spec_params pp = rw_spec_params_default();
    pp.sources = RW_SPEC_MTP | RW_SPEC_NGRAM;
    pp.k_max = 4;
    pp.adaptive = false;
    pp.ngram_n = 1;
    run r;
    rw_error err = {0};
    run_begin(&r, P1, 64, &sp, &pp, n_gen);
    CHECK(!rw_spec_seq_set_constraint(r.spec, ban_163, NULL, &err));
    while (r.k < n_gen) {
        const int64_t budget = n_gen - r.k;
        if (rw_spec_step(g_m, NULL, &r.spec, &budget, 1, NULL, &err)) {
            fprintf(stderr, "constraint step: %s\n", err.msg);
            rw_test_failures++;
            break;
        }
        run_collect(&r);
    }
    /* the first token comes from the prompt pass, outside the constraint */
    CHECK_MSG(!memcmp(t0 + 1, r.toks + 1, (size_t)(n_gen - 1) * sizeof *t0), "constrained: tokens differ");
    rw_spec_stats st = rw_spec_seq_stats(r.spec);
    fprintf(stderr, "constrained: %lld drafted (%lld n-gram), %lld accepted\n", (long long)st.drafted,
            (long long)st.ngram_drafted, (long long)st.accepted);
    run_end(&r);
    free(t0), free(r0);
}

/* ---- the engine, with the prefix cache ---- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t toks[256];
    int n_toks;
    bool done;
    int64_t cached;
} sink;

static void on_event(void *user, const rw_gen_event *ev) {
    sink *s = user;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < ev->n_tokens && s->n_toks < 256; i++) s->toks[s->n_toks++] = ev->tokens[i];
    if (ev->error) fprintf(stderr, "event error: %s\n", ev->error);
    if (ev->done) {
        s->done = true;
        s->cached = ev->cached_tokens;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void wait_done(sink *s) {
    pthread_mutex_lock(&s->mu);
    while (!s->done) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void test_engine(int n_gen) {
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    /* the engine enables the block itself: a fresh model with no sequences */
    if (rw_gguf_open(rw_test_fixture_path("qwen35mtp/qwen35mtp-F32.gguf"), &g, &err) || rw_model_load(g, &m, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    const rw_engine_config cfg = {.n_threads = 1, .max_running = 2, .max_queued = 4, .n_ctx = 160,
                                  .prefill_chunk = 16, .kv_type = RW_KV_F32, .cache_bytes = 64 << 20,
                                  .draft_max = 3, .draft_fixed = true,
                                  .spec_sources = RW_SPEC_MTP | RW_SPEC_NGRAM, .ngram_n = 2};
    rw_engine *e = NULL;
    CHECK_MSG(rw_engine_new(m, g_tok, &cfg, &e, &err) == RW_OK, "%s", err.msg);
    if (!e) goto out;
    rw_sampler_params sp = rw_sampler_params_default();
    const rw_logit_bias lb = {.token = 15, .bias = 8.0f}; /* see test_greedy */
    sp.logit_bias = &lb, sp.n_logit_bias = 1;
    int32_t *ref = calloc((size_t)n_gen, sizeof *ref);
    float *rows = calloc((size_t)n_gen * (size_t)g_nv, sizeof *rows);
    const int64_t np[3] = {64, 64, 50};
    const int32_t *pr[3] = {P1, P1, P0};
    sink s[3];
    uint64_t id;
    for (int round = 0; round < 2; round++) {
        /* round 0: P1 alone (fills the cache); round 1: P1 again (a hit) and P0 beside it */
        const int first = round == 0 ? 0 : 1, last = round == 0 ? 1 : 3;
        for (int i = first; i < last; i++) {
            memset(&s[i], 0, sizeof s[i]);
            pthread_mutex_init(&s[i].mu, NULL);
            pthread_cond_init(&s[i].cv, NULL);
            rw_gen_params p = {.sampling = sp, .max_tokens = n_gen, .ignore_eos = true, .n_logprobs = -1};
            CHECK_MSG(rw_engine_submit(e, pr[i], np[i], &p, on_event, &s[i], &id, &err) == RW_OK, "%s", err.msg);
        }
        for (int i = first; i < last; i++) {
            wait_done(&s[i]);
            plain(pr[i], np[i], &sp, n_gen, ref, rows);
            CHECK_EQ_INT(s[i].n_toks, n_gen);
            CHECK_MSG(!memcmp(ref, s[i].toks, (size_t)n_gen * sizeof *ref), "engine request %d: tokens differ", i);
            pthread_mutex_destroy(&s[i].mu);
            pthread_cond_destroy(&s[i].cv);
        }
    }
    CHECK_MSG(s[1].cached > 0, "the repeated prompt was not a cache hit");
    rw_engine_stats st;
    rw_engine_get_stats(e, &st);
    CHECK(st.spec_enabled && st.spec_drafted > 0 && st.spec_accepted > 0);
    fprintf(stderr, "engine: cached %lld, %llu drafted, %llu accepted\n", (long long)s[1].cached,
            (unsigned long long)st.spec_drafted, (unsigned long long)st.spec_accepted);
    free(ref), free(rows);
    rw_engine_free(e);
out:
    rw_model_free(m);
    rw_gguf_close(g);
}

/* ---- sampled ---- */

static double chi2_crit(int dof) {
    const double z = 3.09, h = 2.0 / (9.0 * dof);
    const double c = 1 - h + z * sqrt(h);
    return dof * c * c * c;
}

/* check = false (the sanitizer build, few seeds): the same runs for their
 * memory accesses, without the statistics */
static void test_sampled(unsigned src, int n_seeds, bool check) {
    enum { NG = 4 };
    int *h0 = calloc((size_t)NG * (size_t)g_nv, sizeof *h0), *h1 = calloc((size_t)NG * (size_t)g_nv, sizeof *h1);
    float *rows = calloc((size_t)NG * (size_t)g_nv, sizeof *rows);
    int32_t toks[NG];
    int64_t drafted = 0, accepted = 0;
    for (int seed = 0; seed < n_seeds; seed++) {
        rw_sampler_params sp = rw_sampler_params_default();
        sp.temperature = 1.0f;
        sp.top_k = 4;
        sp.seed = (uint64_t)seed + 1000003u;
        plain(P1, 13, &sp, NG, toks, rows);
        for (int k = 1; k < NG; k++) h0[(size_t)k * (size_t)g_nv + (size_t)toks[k]]++;
        sp.seed = (uint64_t)seed;
        rw_spec_params pp = rw_spec_params_default();
        pp.sources = src;
        pp.k_max = 3;
        pp.adaptive = false;
        pp.ngram_n = 1;
        rw_spec_stats st = spec_solo(P1, 13, &sp, &pp, NG, toks, NULL, "sampled");
        drafted += st.drafted;
        accepted += st.accepted;
        for (int k = 1; k < NG; k++) h1[(size_t)k * (size_t)g_nv + (size_t)toks[k]]++;
    }
    if (check) CHECK(drafted > 0 && accepted < drafted);
    for (int k = 1; k < NG; k++) {
        const int *a = h0 + (size_t)k * (size_t)g_nv, *b = h1 + (size_t)k * (size_t)g_nv;
        double chi = 0;
        int dof = -1, pa = 0, pb = 0;
        for (int64_t v = 0; v < g_nv; v++) {
            if (a[v] + b[v] < 10) {
                pa += a[v], pb += b[v];
                continue;
            }
            chi += (double)(a[v] - b[v]) * (a[v] - b[v]) / (a[v] + b[v]);
            dof++;
        }
        if (pa + pb > 0) {
            chi += (double)(pa - pb) * (pa - pb) / (pa + pb);
            dof++;
        }
        const double crit = chi2_crit(dof > 0 ? dof : 1);
        fprintf(stderr, "sampled %s position %d: chi2 %.2f, dof %d, critical %.2f (p = 0.001)\n",
                src == RW_SPEC_MTP ? "mtp" : "ngram", k, chi, dof, crit);
        if (!check) continue;
        CHECK(dof >= 3);
        CHECK(chi < crit);
    }
    fprintf(stderr, "sampled %s: accepted %lld of %lld drafts\n", src == RW_SPEC_MTP ? "mtp" : "ngram",
            (long long)accepted, (long long)drafted);
    free(h0), free(h1), free(rows);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no fixtures");
    load_prompts();
    rw_error err = {0};
    if (rw_gguf_open(rw_test_fixture_path("qwen35mtp/qwen35mtp-F32.gguf"), &g_g, &err) ||
        rw_model_load(g_g, &g_m, &err) || rw_model_load(g_g, &g_ref, &err) || rw_tokenizer_load(g_g, &g_tok, &err) ||
        rw_model_enable_mtp(g_m, &err)) {
        fprintf(stderr, "qwen35mtp: %s\n", err.msg);
        return 1;
    }
    g_nv = rw_model_get_hparams(g_m)->n_vocab;
    const bool san = rw_test_sanitized();
    /* refused: MTP on a model without it enabled, with a draft model; no source at all */
    {
        rw_model_seq *s = NULL;
        rw_sampler *smp = NULL;
        rw_spec_seq *spec = NULL;
        rw_sampler_params sp = rw_sampler_params_default();
        rw_spec_params pp = rw_spec_params_default();
        CHECK(!rw_model_seq_new(g_ref, RW_KV_F32, 0, &s, &err) && !rw_sampler_new(&sp, g_nv, &smp, &err));
        pp.sources = RW_SPEC_MTP;
        CHECK(rw_spec_seq_new(NULL, s, smp, &sp, &pp, &spec, &err) == RW_ERR_INVALID_ARG);
        CHECK(rw_spec_seq_new(g_ref, s, smp, &sp, &pp, &spec, &err) == RW_ERR_INVALID_ARG);
        pp.sources = 0;
        CHECK(rw_spec_seq_new(NULL, s, smp, &sp, &pp, &spec, &err) == RW_ERR_INVALID_ARG);
        rw_sampler_free(smp);
        rw_model_seq_free(s);
    }
    if (!san) test_greedy(48, 0, false);
    test_greedy(san ? 32 : 48, 8.0f, san);
    test_batched(san ? 12 : 32);
    test_constraint(san ? 12 : 32);
    test_engine(san ? 24 : 40);
    test_sampled(RW_SPEC_MTP, san ? 20 : 400, !san);
    test_sampled(RW_SPEC_NGRAM, san ? 20 : 400, !san);
    rw_model_free(g_m);
    rw_model_free(g_ref);
    rw_tokenizer_free(g_tok);
    rw_gguf_close(g_g);
    return rw_test_done();
}
