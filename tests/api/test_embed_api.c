/* test_embed_api.c - embeddings and reranking through the public API
 * (include/rewind.h), on the qwen3 F32 fixture: a threaded engine with the
 * prefix cache and a step-driven one without give bitwise the same vectors
 * (after a cached prefix too, reported in cached_tokens); normalization and
 * dimensions; mean and CLS pooling; the rerank score equals softmax(yes,
 * no) of the last logits rw_seq_eval computes for the same prompt. Includes
 * only rewind.h besides the harness. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rewind.h"

enum { D = 256 };

static double norm(const float *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)v[i] * v[i];
    return sqrt(s);
}

int main(void) {
    const char *ids_path = rw_test_fixture_path("qwen3/qwen3.prompt.ids"); /* a static buffer: read it first */
    if (!rw_test_fixtures()) rw_test_skip("no fixtures");
    size_t sz = 0;
    char *txt = rw_test_read_file(ids_path, &sz);
    CHECK(txt != NULL);
    int32_t ids[256];
    int n = 0;
    for (char *p = txt; n < 256;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n++] = (int32_t)v;
        p = end;
    }
    free(txt);
    CHECK(n == 128);
    const char *path = rw_test_fixture_path("qwen3/qwen3-F32.gguf");
    if (!path) rw_test_skip("no fixtures");

    rw_error err;
    rw_model *m = NULL;
    CHECK_MSG(!rw_model_open(path, NULL, &m, &err), "%s", err.msg);
    if (!m) return rw_test_done();
    CHECK(rw_model_n_embd(m) == D);
    CHECK(rw_model_pooling(m) == RW_POOLING_FILE); /* the fixture declares none: the last token */

    rw_engine_params ep = rw_engine_params_default();
    ep.run.n_threads = 1;
    ep.run.kv_f32 = true; /* as the by-hand sequence below */
    rw_engine *e = NULL;
    CHECK_MSG(!rw_engine_open(m, &ep, &e, &err), "%s", err.msg);
    static float a100[D], a128[D], raw[D], cut[16], b100[D], b128[D], meanv[D], clsv[D];
    int64_t cached = -1;
    rw_embed_options o = rw_embed_options_default();
    CHECK_MSG(!rw_engine_embed(e, ids, 100, &o, a100, &cached, &err), "%s", err.msg);
    CHECK(cached == 0 && fabs(norm(a100, D) - 1) < 1e-5);
    CHECK_MSG(!rw_engine_embed(e, ids, 128, &o, a128, &cached, &err), "%s", err.msg);
    CHECK_MSG(cached >= 99, "cached %lld", (long long)cached); /* the first 100 tokens' state was reused */
    o.normalize = false;
    CHECK(!rw_engine_embed(e, ids, 128, &o, raw, NULL, &err));
    o.normalize = true;
    o.dimensions = 16;
    CHECK(!rw_engine_embed(e, ids, 128, &o, cut, NULL, &err));
    double n16 = norm(raw, 16), nall = norm(raw, D);
    for (int i = 0; i < 16; i++) CHECK(fabs(cut[i] - raw[i] / n16) < 1e-6);
    for (int i = 0; i < D; i++) CHECK(fabs(a128[i] - raw[i] / nall) < 1e-6);
    o.dimensions = D + 1;
    CHECK(rw_engine_embed(e, ids, 128, &o, cut, NULL, &err) == RW_ERR_INVALID_ARG);
    o = rw_embed_options_default();
    CHECK(rw_engine_embed(e, ids, 0, &o, a100, NULL, &err) == RW_ERR_INVALID_ARG);
    o.pooling = RW_POOLING_MEAN;
    CHECK(!rw_engine_embed(e, ids, 128, &o, meanv, NULL, &err) && fabs(norm(meanv, D) - 1) < 1e-5);
    o.pooling = RW_POOLING_CLS;
    CHECK(!rw_engine_embed(e, ids, 128, &o, clsv, NULL, &err) && fabs(norm(clsv, D) - 1) < 1e-5);
    CHECK(memcmp(meanv, a128, sizeof meanv) && memcmp(clsv, a128, sizeof clsv));

    /* rerank: the score is softmax(yes, no) of the last logits of the same prompt */
    double score = -1;
    const char *q = "what is a fox", *doc = "a fox is an animal";
    CHECK_MSG(!rw_engine_rerank(e, q, doc, NULL, &score, &err), "%s", err.msg);
    CHECK(score > 0 && score < 1);
    rw_engine_close(e);

    /* a step-driven engine without a cache: the same bits */
    ep.manual = true;
    ep.cache_bytes = 0;
    CHECK_MSG(!rw_engine_open(m, &ep, &e, &err), "%s", err.msg);
    o = rw_embed_options_default();
    CHECK(!rw_engine_embed(e, ids, 100, &o, b100, &cached, &err) && cached == 0);
    CHECK(!rw_engine_embed(e, ids, 128, &o, b128, &cached, &err) && cached == 0);
    CHECK(!memcmp(a100, b100, sizeof a100) && !memcmp(a128, b128, sizeof a128));
    double score2 = -1;
    CHECK(!rw_engine_rerank(e, q, doc, NULL, &score2, &err) && score2 == score);
    rw_engine_close(e);

    /* the same prompt by hand: the yes/no logits after it */
    char prompt[1024];
    snprintf(prompt, sizeof prompt,
             "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
             "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n"
             "<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: %s\n"
             "<Document>: %s<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
             q, doc);
    int32_t *a = NULL, *y = NULL, *no = NULL;
    size_t na = 0, ny = 0, nn = 0;
    CHECK(!rw_model_tokenize(m, prompt, strlen(prompt), false, true, &a, &na, &err));
    CHECK(!rw_model_tokenize(m, "yes", 3, false, false, &y, &ny, &err) && ny >= 1);
    CHECK(!rw_model_tokenize(m, "no", 2, false, false, &no, &nn, &err) && nn >= 1);
    rw_seq *s = NULL;
    CHECK(!rw_seq_new(m, 1024, true, &s, &err));
    float *lg = malloc((size_t)rw_model_n_vocab(m) * sizeof *lg);
    CHECK(lg && !rw_seq_eval(s, a, (int64_t)na, lg, &err));
    double want = 1.0 / (1.0 + exp((double)lg[no[0]] - (double)lg[y[0]]));
    CHECK_MSG(fabs(want - score) < 1e-6, "rerank %.9f, by hand %.9f", score, want);
    rw_seq_free(s);
    free(lg);
    rw_free(a), rw_free(y), rw_free(no);
    rw_model_close(m);
    return rw_test_done();
}
