/* test_api.c - the public API (include/rewind.h) used as an embedder uses
 * it: errors with messages, tokenization, rw_generate (and stopping it from
 * its callback), the threaded engine with the prefix cache, the step-driven
 * engine (several requests, cancel), and sequences with exact rewind. Every
 * path must give the tokens rw_generate gives alone. Includes only
 * rewind.h besides the harness. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "rewind.h"

static char *render(rw_model *m, const char *user) {
    char sys[1024] = "You are a test. ";
    for (int i = 0; i < 6; i++) strcat(sys, "Repeat the words you are given and nothing else. ");
    const rw_chat_message msgs[] = {{"system", sys}, {"user", user}};
    char *out = NULL;
    rw_error err;
    CHECK_MSG(!rw_chat_render(m, msgs, 2, true, &out, &err), "%s", err.msg);
    return out;
}

/* Collects the text of one request of a manual engine. */
typedef struct {
    char text[4096];
    size_t len;
    int done;
    rw_gen_result res;
} collected;

static void collect(void *user, const char *text, size_t len, bool done, const rw_gen_result *res) {
    collected *c = user;
    if (len && c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
    }
    if (done) {
        c->done++;
        c->res = *res;
    }
}

/* Reads the engine's statistics when its request's final event comes: the
 * request must already be counted, and its prompt in the cache. */
typedef struct {
    rw_engine *e;
    rw_engine_stats_public at_done;
    int done;
} stats_probe;
static void probe_stats(void *user, const char *text, size_t len, bool done, const rw_gen_result *res) {
    (void)text, (void)len, (void)res;
    stats_probe *p = user;
    if (!done) return;
    rw_engine_stats_get(p->e, &p->at_done);
    p->done++;
}

static int pieces_left;
static bool stop_soon(void *user, const char *text, size_t len) {
    (void)user, (void)text, (void)len;
    return --pieces_left > 0;
}

/* One answer of an engine on m opened with ep (text: rw_free). */
static char *engine_answer(rw_model *m, const rw_engine_params *ep, const char *prompt, const rw_gen_options *opt,
                           rw_engine_stats_public *st) {
    rw_engine *e = NULL;
    rw_error err = {0};
    char *got = NULL;
    CHECK_MSG(!rw_engine_open(m, ep, &e, &err), "%s", err.msg);
    if (!e) return NULL;
    CHECK_MSG(!rw_engine_run(e, prompt, opt, &got, NULL, &err), "%s", err.msg);
    if (st) rw_engine_stats_get(e, st);
    rw_engine_close(e);
    return got;
}

/* Speculative decoding through the public engine: a draft model (the same
 * file opened again, which then has no engine of its own to spare), n-gram
 * drafts, and a file's MTP block give the plain greedy answer ref. */
static void check_speculative(rw_model *m, const char *path, const char *prompt, const rw_gen_options *opt,
                              const char *ref) {
    rw_error err = {0};
    rw_model *d = NULL;
    rw_model_params mp = rw_model_params_default();
    CHECK_MSG(!rw_model_open(path, &mp, &d, &err), "%s", err.msg);
    if (!d) return;
    rw_engine_params ep = rw_engine_params_default();
    ep.run.n_ctx = 1024;
    ep.cache_bytes = 0;
    ep.draft = d;
    ep.draft_max = 3;
    ep.draft_fixed = true; /* as large as the model: the adaptive rule would not draft */
    rw_engine *e = NULL, *e2 = NULL;
    CHECK_MSG(!rw_engine_open(m, &ep, &e, &err), "%s", err.msg);
    rw_engine_params plain = rw_engine_params_default();
    CHECK(rw_engine_open(d, &plain, &e2, &err) == RW_ERR_BUSY); /* the draft belongs to e */
    char *got = NULL;
    CHECK_MSG(e && !rw_engine_run(e, prompt, opt, &got, NULL, &err), "%s", err.msg);
    CHECK_MSG(got && !strcmp(got, ref), "draft model: '%s' vs '%s'", got ? got : "", ref);
    rw_free(got);
    rw_engine_stats_public st;
    rw_engine_stats_get(e, &st);
    /* the model drafting for itself: every greedy draft is accepted */
    CHECK_MSG(st.draft_tokens > 0 && st.accepted_tokens == st.draft_tokens, "drafted %llu accepted %llu",
              (unsigned long long)st.draft_tokens, (unsigned long long)st.accepted_tokens);
    rw_engine_close(e);
    CHECK_MSG(!rw_engine_open(d, &plain, &e2, &err), "%s", err.msg); /* free again */
    rw_engine_close(e2);
    rw_model_close(d);

    ep.draft = NULL;
    ep.spec = RW_SPECULATE_NGRAM;
    got = engine_answer(m, &ep, prompt, opt, NULL);
    CHECK_MSG(got && !strcmp(got, ref), "ngram: '%s' vs '%s'", got ? got : "", ref);
    rw_free(got);
    ep.spec = 8;
    CHECK(rw_engine_open(m, &ep, &e, &err) == RW_ERR_INVALID_ARG);

    /* the MTP block (random weights: what matters is the answer) */
    const char *mtp_path = rw_test_fixture_path("qwen35mtp/qwen35mtp-Q8_0.gguf");
    rw_model *t = NULL;
    if (!mtp_path || rw_model_open(mtp_path, &mp, &t, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        return;
    }
    ep.spec = 0;
    char *want = engine_answer(t, &ep, "alpha beta gamma delta", opt, NULL);
    ep.spec = RW_SPECULATE_MTP | RW_SPECULATE_NGRAM;
    rw_engine_stats_public ms;
    got = engine_answer(t, &ep, "alpha beta gamma delta", opt, &ms);
    CHECK_MSG(want && got && !strcmp(got, want), "mtp: '%s' vs '%s'", got ? got : "", want ? want : "");
    CHECK_MSG(ms.draft_tokens > 0, "mtp drafted %llu", (unsigned long long)ms.draft_tokens);
    rw_free(got);
    rw_free(want);
    rw_model_close(t);
}

int main(void) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", RW_VERSION_MAJOR, RW_VERSION_MINOR, RW_VERSION_PATCH);
    CHECK(!strcmp(rw_version(), want) && !strcmp(RW_VERSION_STRING, want));

    rw_error err;
    rw_model *m = NULL;
    CHECK(rw_model_open("/nonexistent/model.gguf", NULL, &m, &err) != RW_OK && m == NULL);
    CHECK_MSG(strstr(err.msg, "/nonexistent/model.gguf") != NULL, "%s", err.msg);
    CHECK(rw_model_open(NULL, NULL, &m, &err) == RW_ERR_INVALID_ARG);
    rw_model_params bad = rw_model_params_default();
    bad.numerics = "fastest";
    CHECK(rw_model_open("x.gguf", &bad, &m, &err) == RW_ERR_INVALID_ARG && strstr(err.msg, "fastest"));
    CHECK(!strcmp(rw_status_name(RW_ERR_CONTEXT), "ERR_CONTEXT"));

    /* the process-wide settings: names checked, changed only with no model open */
    const char *best = rw_get_kernels();
    CHECK(rw_set_kernels("sse9", &err) == RW_ERR_INVALID_ARG && strstr(err.msg, "sse9"));
    CHECK(rw_set_numerics("fastest", &err) == RW_ERR_INVALID_ARG);
    CHECK(!rw_set_kernels("ref", &err) && !strcmp(rw_get_kernels(), "ref"));
    CHECK(!rw_set_kernels(NULL, &err) && !strcmp(rw_get_kernels(), best));
    CHECK(!rw_set_numerics("ggml", &err) && !strcmp(rw_get_numerics(), "ggml"));
    CHECK(!rw_set_numerics(NULL, &err) && !strcmp(rw_get_numerics(), "auto"));

    const char *path = rw_test_fixture_path("qwen35/qwen35-Q8_0.gguf");
    if (!rw_test_fixtures()) rw_test_skip("no fixtures");
    rw_model_params mp = rw_model_params_default();
    CHECK_MSG(!rw_model_open(path, &mp, &m, &err), "%s", err.msg);
    if (!m) return rw_test_done();
    CHECK(!strcmp(rw_model_arch(m), "qwen35") && rw_model_n_vocab(m) > 0);
    /* the weights are packed for these settings now */
    CHECK(!rw_set_kernels(best, &err) && !rw_set_numerics("auto", &err)); /* unchanged: fine */
    if (strcmp(best, "ref")) CHECK(rw_set_kernels("ref", &err) == RW_ERR_BUSY && !strcmp(rw_get_kernels(), best));
    CHECK(rw_set_numerics("ggml", &err) == RW_ERR_BUSY && !strcmp(rw_get_numerics(), "auto"));

    /* tokenize / detokenize round trip; an id outside the vocabulary is an error */
    int32_t *ids = NULL;
    size_t n = 0;
    const char *hello = "Hello, world: rewind!";
    CHECK(!rw_model_tokenize(m, hello, strlen(hello), false, false, &ids, &n, &err) && n > 0);
    char *back = NULL;
    size_t back_len = 0;
    CHECK(!rw_model_detokenize(m, ids, n, false, &back, &back_len, &err) && back && !strcmp(back, hello) &&
          back_len == strlen(hello));
    rw_free(back);
    int32_t wrong = rw_model_n_vocab(m);
    CHECK(rw_model_detokenize(m, &wrong, 1, false, &back, NULL, &err) == RW_ERR_INVALID_ARG);

    /* rw_generate alone: the reference answer */
    char *prompt = render(m, "alpha beta gamma");
    rw_gen_options opt = rw_gen_options_default();
    opt.max_tokens = 12;
    opt.ignore_eos = true; /* a fixed length, whatever the random weights say */
    char *ref = NULL;
    rw_gen_result res;
    CHECK_MSG(!rw_generate(m, prompt, &opt, NULL, NULL, NULL, &ref, &res, &err), "%s", err.msg);
    CHECK(ref && res.completion_tokens == 12 && res.reason == RW_DONE_LENGTH && res.cached_tokens == 0);

    /* its callback stops it early */
    pieces_left = 3;
    char *part = NULL;
    CHECK(!rw_generate(m, prompt, &opt, NULL, stop_soon, NULL, &part, &res, &err));
    CHECK_MSG(part && res.reason == RW_DONE_STOP && strlen(part) <= strlen(ref) && !strncmp(part, ref, strlen(part)), "reason %d part '%s' ref '%s'", (int)res.reason, part ? part : "", ref);
    rw_free(part);

    /* structured output: a JSON Schema the answer must match */
    rw_gen_options jo = rw_gen_options_default();
    jo.max_tokens = 48;
    jo.json_schema = "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},"
                     "\"required\":[\"ok\"],\"additionalProperties\":false}";
    char *js = NULL;
    CHECK_MSG(!rw_generate(m, prompt, &jo, NULL, NULL, NULL, &js, &res, &err), "%s", err.msg);
    if (js) { /* valid JSON of that schema, whatever whitespace the grammar allowed */
        char packed[256];
        size_t k = 0;
        for (const char *c = js; *c && k + 1 < sizeof packed; c++)
            if (*c != ' ' && *c != '\n' && *c != '\t' && *c != '\r') packed[k++] = *c;
        packed[k] = 0;
        CHECK_MSG(res.reason == RW_DONE_STOP && (!strcmp(packed, "{\"ok\":true}") || !strcmp(packed, "{\"ok\":false}")),
                  "'%s'", js);
    }
    rw_free(js);
    jo.json_schema = "{\"type\":\"object\",\"uniqueItems\":true,";
    CHECK(rw_generate(m, prompt, &jo, NULL, NULL, NULL, NULL, NULL, &err) == RW_ERR_INVALID_ARG);
    CHECK_MSG(strstr(err.msg, "json_schema") != NULL, "%s", err.msg);

    /* the threaded engine: the same answer, then again from the cache */
    rw_engine_params ep = rw_engine_params_default();
    ep.run.n_ctx = 1024;
    rw_engine *e = NULL;
    CHECK_MSG(!rw_engine_open(m, &ep, &e, &err), "%s", err.msg);
    rw_engine *e2 = NULL;
    CHECK(rw_engine_open(m, &ep, &e2, &err) == RW_ERR_BUSY); /* one engine per model */
    for (int pass = 0; pass < 2 && e; pass++) {
        char *got = NULL;
        CHECK_MSG(!rw_engine_run(e, prompt, &opt, &got, &res, &err), "%s", err.msg);
        CHECK_MSG(got && !strcmp(got, ref), "pass %d: '%s' vs '%s'", pass, got ? got : "", ref);
        if (pass == 1) CHECK_MSG(res.cached_tokens > 0, "cached %lld", (long long)res.cached_tokens);
        rw_free(got);
    }
    rw_engine_stats_public st;
    rw_engine_stats_get(e, &st);
    CHECK(st.requests_finished == 2 && st.cached_tokens > 0 && st.cache_entries > 0);
    /* in order: a final event comes after its request is counted and cached */
    char *prompt3 = render(m, "zeta eta theta");
    for (int k = 0; k < 3 && e; k++) {
        stats_probe pr = {.e = e};
        rw_engine_stats_get(e, &st);
        rw_gen_options o3 = opt;
        o3.max_tokens = 1 + k;
        uint64_t id3 = 0;
        CHECK(!rw_engine_submit_text(e, prompt3, &o3, probe_stats, &pr, &id3, &err));
        while (!__atomic_load_n(&pr.done, __ATOMIC_ACQUIRE)) nanosleep(&(struct timespec){0, 1000000}, NULL);
        CHECK_MSG(pr.at_done.requests_finished == st.requests_finished + 1 &&
                      (k ? pr.at_done.cache_entries > 0 : pr.at_done.cache_entries > st.cache_entries),
                  "finished %llu -> %llu, entries %llu -> %llu", (unsigned long long)st.requests_finished,
                  (unsigned long long)pr.at_done.requests_finished, (unsigned long long)st.cache_entries,
                  (unsigned long long)pr.at_done.cache_entries);
    }
    rw_free(prompt3);
    CHECK(rw_engine_step(e, &err) == -1); /* it has its own thread */
    rw_engine_close(e);

    /* step-driven: two requests batched by our own loop, one cancelled */
    ep.manual = true;
    CHECK_MSG(!rw_engine_open(m, &ep, &e, &err), "%s", err.msg);
    char *prompt2 = render(m, "delta epsilon");
    static collected a, b, c;
    uint64_t id_c = 0;
    CHECK(!rw_engine_submit_text(e, prompt, &opt, collect, &a, NULL, &err));
    CHECK(!rw_engine_submit_text(e, prompt2, &opt, collect, &b, NULL, &err));
    CHECK(!rw_engine_submit_text(e, prompt2, &opt, collect, &c, &id_c, &err));
    CHECK(a.done == 0); /* nothing runs until we step */
    int steps = 0, left;
    while ((left = rw_engine_step(e, &err)) > 0 && steps < 1000) {
        if (++steps == 3) rw_engine_cancel(e, id_c);
    }
    CHECK(left == 0);
    CHECK(a.done == 1 && b.done == 1 && c.done == 0);
    CHECK_MSG(a.len == strlen(ref) && !memcmp(a.text, ref, a.len), "'%.*s' vs '%s'", (int)a.len, a.text, ref);
    CHECK(b.res.completion_tokens == 12);
    /* the synchronous call steps a manual engine itself */
    char *got = NULL;
    CHECK(!rw_engine_run(e, prompt, &opt, &got, &res, &err) && got && !strcmp(got, ref));
    rw_free(got);
    /* closed with requests still queued: no callback, nothing leaked (ASan) */
    static collected d;
    CHECK(!rw_engine_submit_text(e, prompt, &opt, collect, &d, NULL, &err));
    CHECK(!rw_engine_submit_text(e, prompt2, &opt, collect, &d, NULL, &err));
    rw_engine_close(e);
    CHECK(d.done == 0 && d.len == 0);

    /* a sequence by hand: rewind is exact, a state file restores it */
    int32_t *pids = NULL;
    size_t pn = 0;
    CHECK(!rw_model_tokenize(m, prompt, strlen(prompt), true, true, &pids, &pn, &err) && pn > 4);
    rw_seq *s = NULL;
    CHECK(!rw_seq_new(m, 1024, false, &s, &err));
    const size_t nv = (size_t)rw_model_n_vocab(m);
    float *l1 = malloc(nv * sizeof *l1), *l2 = malloc(nv * sizeof *l2);
    if (s && l1 && l2) {
        CHECK(!rw_seq_eval(s, pids, (int64_t)pn, l1, &err) && rw_seq_length(s) == (int64_t)pn);
        CHECK(!rw_seq_rewind(s, (int64_t)pn - 3, &err) && rw_seq_length(s) == (int64_t)pn - 3);
        CHECK(!rw_seq_eval(s, pids + pn - 3, 3, l2, &err));
        CHECK(!memcmp(l1, l2, nv * sizeof *l1));
        CHECK(rw_seq_rewind(s, (int64_t)pn + 5, &err) != RW_OK); /* past the end */
    }
    free(l1);
    free(l2);
    rw_seq_free(s);
    check_speculative(m, path, prompt, &opt, ref);
    rw_free(pids);
    rw_free(prompt2);
    rw_free(prompt);
    rw_free(ref);
    rw_free(ids);
    rw_model_close(m);
    return rw_test_done();
}
