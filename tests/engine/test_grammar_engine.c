/* test_grammar_engine.c - grammar-constrained requests in the engine, on
 * the qwen3 fixture (random weights: whatever the output looks like, the
 * grammar made it): the output matches the grammar; and the constrained
 * tokens are bitwise those of a solo greedy run when the request runs
 * batched beside others (constrained and not), when its prompt comes from
 * the prefix cache, and with speculative decoding (the model drafting for
 * itself: drafts accepted; and a Q4_0 draft: drafts rejected too). Sampled
 * requests: the same tokens solo and batched, and a matching output with a
 * draft. max_tokens cuts with finish
 * length; the prefix cache keeps the model's logits, not the masked ones (an
 * unconstrained request after a constrained one with the same prompt gets
 * its own solo tokens). A grammar that does not compile is refused. A
 * grammar that holds only after a text (grammar_after, the close of a
 * reasoning block) leaves the tokens before it free and is exact in every
 * mode too. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "grammar/grammar.h"
#include "harness.h"

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t toks[4096];
    int n_toks;
    char text[65536];
    size_t text_len;
    bool done;
    rw_finish_reason finish;
    int64_t cached;
} sink;

static void on_event(void *user, const rw_gen_event *ev) {
    sink *s = user;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < ev->n_tokens && s->n_toks < 4096; i++) s->toks[s->n_toks++] = ev->tokens[i];
    if (ev->text_len && s->text_len + ev->text_len < sizeof s->text) {
        memcpy(s->text + s->text_len, ev->text, ev->text_len);
        s->text_len += ev->text_len;
    }
    if (ev->error) fprintf(stderr, "event error: %s\n", ev->error);
    if (ev->done) {
        s->done = true;
        s->finish = ev->finish;
        s->cached = ev->cached_tokens;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static sink *sink_new(void) {
    sink *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    return s;
}
static void sink_wait_free(sink *s) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
static void wait_done(sink *s) {
    pthread_mutex_lock(&s->mu);
    while (!s->done) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

typedef struct {
    const int32_t *prompt;
    int n_prompt;
    rw_gen_params p;
} job;

/* Runs jobs[0..n) together on e; out[i] gets each sink. */
static void run(rw_engine *e, const job *jobs, int n, sink **out) {
    rw_error err = {0};
    for (int i = 0; i < n; i++) {
        out[i] = sink_new();
        CHECK_MSG(rw_engine_submit(e, jobs[i].prompt, jobs[i].n_prompt, &jobs[i].p, on_event, out[i], NULL, &err) ==
                      RW_OK,
                  "%s", err.msg);
    }
    for (int i = 0; i < n; i++) wait_done(out[i]);
}

static bool same(const sink *a, const sink *b) {
    return a->n_toks == b->n_toks && !memcmp(a->toks, b->toks, (size_t)a->n_toks * sizeof *a->toks);
}

static bool grammar_matches(const char *gbnf, const char *text, size_t n) {
    rw_grammar *g = NULL;
    rw_grammar_matcher *m = NULL;
    bool ok = rw_grammar_compile(gbnf, strlen(gbnf), NULL, &g, NULL) == RW_OK &&
              rw_grammar_matcher_new(g, NULL, &m, NULL) == RW_OK && rw_grammar_matcher_accept_bytes(m, text, n, NULL) &&
              rw_grammar_matcher_can_end(m);
    rw_grammar_matcher_free(m);
    rw_grammar_free(g);
    return ok;
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_error err = {0};
    rw_gguf *gg = NULL, *gq4 = NULL;
    rw_model *model = NULL, *self_draft = NULL, *q4 = NULL;
    rw_tokenizer *tok = NULL;
    if (rw_gguf_open(rw_test_fixture_path("qwen3/qwen3-Q8_0.gguf"), &gg, &err) ||
        rw_model_load(gg, &model, &err) || rw_model_load(gg, &self_draft, &err) ||
        rw_tokenizer_load(gg, &tok, &err) || rw_gguf_open(rw_test_fixture_path("qwen3/qwen3-Q4_0.gguf"), &gq4, &err) ||
        rw_model_load(gq4, &q4, &err)) {
        fprintf(stderr, "fixtures: %s\n", err.msg);
        return 1;
    }
    /* a schema with bounded strings (so greedy random-weight output ends), and any JSON */
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":6},"
                         "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"bc\",\"def\"]},\"maxItems\":3},"
                         "\"n\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":999}},"
                         "\"required\":[\"name\",\"tags\",\"n\"],\"additionalProperties\":false}";
    char *g_schema = NULL, *g_json = NULL;
    CHECK(rw_grammar_schema_to_gbnf(schema, strlen(schema), NULL, &g_schema, &err) == RW_OK);
    CHECK(rw_grammar_json_object_gbnf(NULL, &g_json, &err) == RW_OK);
    int32_t prompt[3][24];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 24; i++) prompt[k][i] = (int32_t)((i * (31 + 6 * k) + 7 * k + 3) % 500);
    const rw_engine_config solo_cfg = {.n_threads = 1, .max_running = 1, .max_queued = 8, .n_ctx = 512,
                                       .prefill_chunk = 16, .kv_type = RW_KV_F32};
    rw_gen_params base = {.sampling = rw_sampler_params_default(), .max_tokens = 300, .n_logprobs = -1};

    /* the jobs: 0 schema greedy, 1 json_object greedy, 2 unconstrained, 3 schema sampled */
    job jobs[4];
    for (int i = 0; i < 4; i++) jobs[i] = (job){prompt[i % 3], 24, base};
    jobs[0].p.grammar = g_schema;
    jobs[1].p.grammar = g_json;
    jobs[1].p.max_tokens = 120;
    jobs[2].p.max_tokens = 40;
    jobs[2].p.ignore_eos = true;
    jobs[3].p.grammar = g_schema;
    jobs[3].p.sampling.temperature = 0.9f;
    jobs[3].p.sampling.top_k = 50;
    jobs[3].p.sampling.seed = 1234;

    /* solo */
    sink *solo[4];
    rw_engine *e = NULL;
    CHECK(rw_engine_new(model, tok, &solo_cfg, &e, &err) == RW_OK);
    for (int i = 0; i < 4; i++) run(e, &jobs[i], 1, &solo[i]);
    /* a grammar that does not compile */
    rw_gen_params badp = base;
    badp.grammar = "root ::= \"a\" undefined-rule\n";
    CHECK(rw_engine_submit(e, prompt[0], 24, &badp, on_event, NULL, NULL, &err) == RW_ERR_INVALID_ARG);
    CHECK_MSG(strstr(err.msg, "rule 'undefined-rule' is not defined") != NULL, "%s", err.msg);
    /* max_tokens cuts a constrained output: length */
    job cut = jobs[0];
    cut.p.max_tokens = 3;
    sink *sc;
    run(e, &cut, 1, &sc);
    CHECK_EQ_INT(sc->finish, RW_FINISH_LENGTH);
    CHECK_EQ_INT(sc->n_toks, 3);
    CHECK(sc->n_toks == 3 && !memcmp(sc->toks, solo[0]->toks, 3 * sizeof(int32_t)));
    sink_wait_free(sc);
    rw_engine_free(e);

    /* job 1 (any JSON object, unbounded strings) may well run to max_tokens with random weights */
    CHECK(solo[1]->finish == RW_FINISH_STOP || solo[1]->finish == RW_FINISH_LENGTH);
    for (int i = 0; i < 4; i++) {
        if (i == 2 || (i == 1 && solo[1]->finish == RW_FINISH_LENGTH)) continue;
        CHECK_MSG(solo[i]->finish == RW_FINISH_STOP, "job %d finish %d after %d tokens", i, solo[i]->finish,
                  solo[i]->n_toks);
        CHECK_MSG(grammar_matches(jobs[i].p.grammar, solo[i]->text, solo[i]->text_len), "job %d: %.*s", i,
                  (int)solo[i]->text_len, solo[i]->text);
        json_t *j = json_loadb(solo[i]->text, solo[i]->text_len, 0, NULL);
        CHECK_MSG(json_is_object(j), "job %d not a JSON object: %.*s", i, (int)solo[i]->text_len, solo[i]->text);
        json_decref(j);
    }
    fprintf(stderr, "schema, greedy: %.*s\n", (int)solo[0]->text_len, solo[0]->text);

    /* batched: all four at once, twice over (8 requests on 4 slots) */
    {
        rw_engine_config c = solo_cfg;
        c.max_running = 4;
        c.prefill_chunk = 7;
        CHECK(rw_engine_new(model, tok, &c, &e, &err) == RW_OK);
        job all[8];
        for (int i = 0; i < 8; i++) all[i] = jobs[i % 4];
        sink *b[8];
        run(e, all, 8, b);
        for (int i = 0; i < 8; i++) {
            CHECK_MSG(same(b[i], solo[i % 4]), "batched job %d differs from solo", i);
            sink_wait_free(b[i]);
        }
        rw_engine_free(e);
    }

    /* prefix cache: the same requests again hit it; an unconstrained request
     * with the constrained one's prompt gets its solo tokens */
    {
        rw_engine_config c = solo_cfg;
        c.cache_bytes = 64u << 20;
        CHECK(rw_engine_new(model, tok, &c, &e, &err) == RW_OK);
        for (int round = 0; round < 2; round++) {
            sink *b;
            run(e, &jobs[0], 1, &b);
            CHECK_MSG(same(b, solo[0]), "cache round %d differs", round);
            if (round == 1) CHECK(b->cached > 0);
            sink_wait_free(b);
        }
        job plain = jobs[2];
        plain.prompt = prompt[0];
        sink *ref, *b;
        rw_engine *e1 = NULL;
        CHECK(rw_engine_new(model, tok, &solo_cfg, &e1, &err) == RW_OK);
        run(e1, &plain, 1, &ref);
        rw_engine_free(e1);
        run(e, &plain, 1, &b);
        CHECK(b->cached > 0);
        CHECK_MSG(same(b, ref), "an unconstrained request after a cached constrained one differs");
        sink_wait_free(b);
        sink_wait_free(ref);
        rw_engine_free(e);
    }

    /* speculative decoding: self-draft (accepts) and Q4_0 draft (rejects too), fixed 4 drafts */
    for (int d = 0; d < 2; d++) {
        rw_engine_config c = solo_cfg;
        c.max_running = 2;
        c.draft = d ? q4 : self_draft;
        c.draft_tok = tok;
        c.draft_max = 4;
        c.draft_fixed = true;
        CHECK(rw_engine_new(model, tok, &c, &e, &err) == RW_OK);
        sink *b[4];
        run(e, jobs, 4, b);
        rw_engine_stats st;
        rw_engine_get_stats(e, &st);
        for (int i = 0; i < 4; i++) { /* sampled (job 3): rejection sampling, same distribution, not the same draws */
            if (i != 3)
                CHECK_MSG(same(b[i], solo[i]), "speculative (%s draft) job %d differs from solo", d ? "Q4_0" : "self",
                          i);
            else
                CHECK_MSG(b[i]->finish == RW_FINISH_STOP && grammar_matches(g_schema, b[i]->text, b[i]->text_len),
                          "speculative sampled output does not match: %.*s", (int)b[i]->text_len, b[i]->text);
            sink_wait_free(b[i]);
        }
        fprintf(stderr, "%s draft: drafted %llu accepted %llu\n", d ? "Q4_0" : "self",
                (unsigned long long)st.spec_drafted, (unsigned long long)st.spec_accepted);
        CHECK(st.spec_drafted > 0);
        rw_engine_free(e);
    }

    /* the grammar after a text (a reasoning block's close): until the output
     * has written it the tokens are free (job 2's greedy ones, which write it
     * here), then the schema holds; the same tokens solo, batched beside the
     * others, from the prefix cache and with a self-draft crossing the point */
    {
        /* the trigger: 3 bytes from a quarter into job 2's text, where they first occur */
        char piece[256], text[4096];
        size_t len = 0;
        size_t cum[64] = {0};
        int nt = solo[2]->n_toks < 40 ? solo[2]->n_toks : 40;
        for (int i = 0; i < nt; i++) {
            size_t n = rw_token_to_piece(tok, solo[2]->toks[i], false, piece, sizeof piece);
            if (n > sizeof piece || len + n > sizeof text) break;
            memcpy(text + len, piece, n);
            len += n;
            cum[i] = len;
        }
        char trig[4] = {0};
        size_t at = len / 4;
        memcpy(trig, text + at, 3);
        const char *first = memmem(text, len, trig, 3);
        size_t end = first ? (size_t)(first - text) + 3 : 0;
        int m = 0; /* tokens until the trigger is written */
        while (m < nt && cum[m] < end) m++;
        m++;
        bool eog_before = false;
        for (int i = 0; i < m && i < nt; i++) eog_before |= rw_tokenizer_is_eog(tok, solo[2]->toks[i]);
        job after = {prompt[2], 24, base};
        after.p.grammar = g_schema;
        after.p.grammar_after = trig;
        sink *a1, *a2[3], *a3;
        CHECK(rw_engine_new(model, tok, &solo_cfg, &e, &err) == RW_OK);
        run(e, &after, 1, &a1);
        rw_engine_free(e);
        if (!eog_before && m <= nt) {
            CHECK_MSG(a1->n_toks > m && !memcmp(a1->toks, solo[2]->toks, (size_t)m * sizeof(int32_t)),
                      "before the trigger: not the free tokens");
            size_t tl = 0;
            for (int i = m; i < a1->n_toks && !rw_tokenizer_is_eog(tok, a1->toks[i]); i++) {
                size_t n = rw_token_to_piece(tok, a1->toks[i], false, piece, sizeof piece);
                if (n <= sizeof piece && tl + n <= sizeof text) memcpy(text + tl, piece, n), tl += n;
            }
            CHECK_MSG(a1->finish == RW_FINISH_STOP && grammar_matches(g_schema, text, tl),
                      "after the trigger: %.*s", (int)tl, text);
            fprintf(stderr, "grammar after %d free tokens: %.*s\n", m, (int)tl, text);
        }
        rw_engine_config c = solo_cfg;
        c.max_running = 3;
        c.prefill_chunk = 5;
        c.cache_bytes = 64u << 20;
        CHECK(rw_engine_new(model, tok, &c, &e, &err) == RW_OK);
        job trio[3] = {jobs[0], after, jobs[3]};
        run(e, trio, 3, a2);
        CHECK_MSG(same(a2[1], a1), "grammar after a text: batched differs from solo");
        run(e, &after, 1, &a3);
        CHECK_MSG(a3->cached > 0 && same(a3, a1), "grammar after a text: from the cache differs from solo");
        for (int i = 0; i < 3; i++) sink_wait_free(a2[i]);
        sink_wait_free(a3);
        rw_engine_free(e);
        c = solo_cfg;
        c.draft = self_draft;
        c.draft_tok = tok;
        c.draft_max = 4;
        c.draft_fixed = true;
        CHECK(rw_engine_new(model, tok, &c, &e, &err) == RW_OK);
        run(e, &after, 1, &a3);
        CHECK_MSG(same(a3, a1), "grammar after a text: speculative differs from solo");
        sink_wait_free(a3);
        rw_engine_free(e);
        sink_wait_free(a1);
    }

    for (int i = 0; i < 4; i++) sink_wait_free(solo[i]);
    free(g_schema);
    free(g_json);
    rw_model_free(model);
    rw_model_free(self_draft);
    rw_model_free(q4);
    rw_tokenizer_free(tok);
    rw_gguf_close(gg);
    rw_gguf_close(gq4);
    return rw_test_done();
}
