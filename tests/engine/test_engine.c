/* test_engine.c - the batching engine through its own API (engine.h), on the
 * qwen3 fixture: greedy output equal to the generate loop with more requests
 * than batch slots, RW_ERR_CONTEXT / INVALID_ARG / BUSY, cancelling a queued
 * and a running request (no event after rw_engine_cancel_id returns), a stop
 * string that spans two tokens (also with speculative decoding, which must
 * not draft past it), end-of-generation stops, statistics. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "harness.h"

static rw_gguf *g_gguf;
static rw_model *g_model, *g_ref;
static rw_tokenizer *g_tok;
static int32_t g_prompt[128];

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t toks[256];
    int n_toks, n_events;
    char text[4096];
    size_t text_len;
    bool done;
    rw_finish_reason finish;
    int64_t prompt_tokens, completion_tokens;
    /* hold: the callback blocks until released (keeps the scheduler busy) */
    bool hold, holding;
} sink;

static void sink_init(sink *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
}

static void sink_free(sink *s) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

static void on_event(void *user, const rw_gen_event *ev) {
    sink *s = user;
    pthread_mutex_lock(&s->mu);
    s->n_events++;
    for (int i = 0; i < ev->n_tokens && s->n_toks < 256; i++) s->toks[s->n_toks++] = ev->tokens[i];
    if (ev->text_len && s->text_len + ev->text_len < sizeof s->text) {
        memcpy(s->text + s->text_len, ev->text, ev->text_len);
        s->text_len += ev->text_len;
    }
    if (ev->error) fprintf(stderr, "event error: %s\n", ev->error);
    if (ev->done) {
        s->done = true;
        s->finish = ev->finish;
        s->prompt_tokens = ev->prompt_tokens;
        s->completion_tokens = ev->completion_tokens;
    }
    pthread_cond_broadcast(&s->cv);
    while (s->hold) {
        s->holding = true;
        pthread_cond_broadcast(&s->cv);
        pthread_cond_wait(&s->cv, &s->mu);
    }
    s->holding = false;
    pthread_mutex_unlock(&s->mu);
}

static void wait_done(sink *s) {
    pthread_mutex_lock(&s->mu);
    while (!s->done) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void ref_greedy(const int32_t *ids, int64_t n, int n_gen, int32_t *out) {
    const int64_t nv = rw_model_get_hparams(g_ref)->n_vocab;
    float *logits = malloc((size_t)nv * sizeof *logits);
    rw_model_seq *s = NULL;
    CHECK(rw_model_seq_new(g_ref, RW_KV_F32, 0, &s, NULL) == RW_OK);
    rw_forward_args fa = {.tokens = ids, .n = n, .logits = logits};
    CHECK(rw_model_forward(g_ref, s, &fa, NULL) == RW_OK);
    for (int k = 0; k < n_gen; k++) {
        out[k] = rw_argmax(logits, nv);
        if (k + 1 == n_gen) break;
        fa = (rw_forward_args){.tokens = &out[k], .n = 1, .logits = logits};
        CHECK(rw_model_forward(g_ref, s, &fa, NULL) == RW_OK);
    }
    rw_model_seq_free(s);
    free(logits);
}

static rw_gen_params greedy(int64_t max_tokens) {
    return (rw_gen_params){.sampling = rw_sampler_params_default(), .max_tokens = max_tokens, .ignore_eos = true,
                           .n_logprobs = -1};
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_error err = {0};
    const char *path = rw_test_fixture_path("qwen3/qwen3-Q8_0.gguf");
    if (rw_gguf_open(path, &g_gguf, &err) || rw_model_load(g_gguf, &g_model, &err) ||
        rw_model_load(g_gguf, &g_ref, &err) || rw_tokenizer_load(g_gguf, &g_tok, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    for (int i = 0; i < 128; i++) g_prompt[i] = (int32_t)((i * 37 + 11) % 509);

    rw_engine *e = NULL;
    const rw_engine_config cfg = {.n_threads = 1, .max_running = 2, .max_queued = 1, .n_ctx = 128,
                                  .prefill_chunk = 8, .kv_type = RW_KV_F32};
    CHECK(rw_engine_new(g_model, g_tok, &cfg, &e, &err) == RW_OK);
    sink s[4];
    uint64_t id[4];
    rw_gen_params p = greedy(60);

    /* bad requests */
    CHECK(rw_engine_submit(e, g_prompt, 100, &p, on_event, &s[0], &id[0], &err) == RW_ERR_CONTEXT);
    CHECK_MSG(strstr(err.msg, "128") && strstr(err.msg, "160"), "context error without the numbers: %s", err.msg);
    int32_t bad = 600;
    CHECK(rw_engine_submit(e, &bad, 1, &p, on_event, &s[0], &id[0], &err) == RW_ERR_INVALID_ARG);
    CHECK(rw_engine_submit(e, g_prompt, 0, &p, on_event, &s[0], &id[0], &err) == RW_ERR_INVALID_ARG);

    /* three requests on two slots (one waits), prompts chunked by 8: each equals the generate loop */
    for (int i = 0; i < 3; i++) {
        sink_init(&s[i]);
        rw_gen_params pi = greedy(20 + 10 * i);
        CHECK(rw_engine_submit(e, g_prompt, 9 + 13 * i, &pi, on_event, &s[i], &id[i], &err) == RW_OK);
    }
    for (int i = 0; i < 3; i++) {
        wait_done(&s[i]);
        int32_t ref[64];
        ref_greedy(g_prompt, 9 + 13 * i, 20 + 10 * i, ref);
        CHECK_EQ_INT(s[i].n_toks, 20 + 10 * i);
        CHECK_MSG(!memcmp(ref, s[i].toks, (size_t)(20 + 10 * i) * sizeof *ref), "request %d differs from the loop", i);
        CHECK_EQ_INT(s[i].finish, RW_FINISH_LENGTH);
        CHECK_EQ_INT(s[i].prompt_tokens, 9 + 13 * i);
        CHECK_EQ_INT(s[i].completion_tokens, 20 + 10 * i);
        sink_free(&s[i]);
    }

    /* busy: the first request's callback holds the scheduler; two slots + one queue place are taken */
    for (int i = 0; i < 4; i++) sink_init(&s[i]);
    s[0].hold = true;
    CHECK(rw_engine_submit(e, g_prompt, 5, &p, on_event, &s[0], &id[0], &err) == RW_OK);
    pthread_mutex_lock(&s[0].mu);
    while (!s[0].holding) pthread_cond_wait(&s[0].cv, &s[0].mu);
    pthread_mutex_unlock(&s[0].mu);
    /* s[1] is cancelled while it runs: as long a request as the context holds,
     * so that it is still running when the cancel comes */
    rw_gen_params p_long = greedy(120);
    CHECK(rw_engine_submit(e, g_prompt, 5, &p_long, on_event, &s[1], &id[1], &err) == RW_OK);
    CHECK(rw_engine_submit(e, g_prompt, 5, &p, on_event, &s[2], &id[2], &err) == RW_OK);
    CHECK(rw_engine_submit(e, g_prompt, 5, &p, on_event, &s[3], &id[3], &err) == RW_ERR_BUSY);
    rw_engine_stats st;
    rw_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.running + st.queued, 3);
    /* cancel a queued one (s[2] waits: s[1] may have been admitted only at the next step) */
    uint64_t cancelled0 = st.requests_cancelled;
    rw_engine_cancel_id(e, id[2]);
    pthread_mutex_lock(&s[0].mu);
    s[0].hold = false;
    pthread_cond_broadcast(&s[0].cv);
    pthread_mutex_unlock(&s[0].mu);
    /* cancel a running one after its first event: nothing comes after cancel returns */
    pthread_mutex_lock(&s[1].mu);
    while (s[1].n_events == 0) pthread_cond_wait(&s[1].cv, &s[1].mu);
    pthread_mutex_unlock(&s[1].mu);
    rw_engine_cancel_id(e, id[1]);
    pthread_mutex_lock(&s[1].mu);
    int events_at_cancel = s[1].n_events;
    /* on a loaded machine the request may have run to its end between its
     * first event and the cancel: then the cancel was a no-op */
    const bool finished_first = s[1].done;
    pthread_mutex_unlock(&s[1].mu);
    wait_done(&s[0]);
    usleep(20000);
    CHECK_EQ_INT(s[1].n_events, events_at_cancel);
    CHECK(finished_first || !s[1].done);
    CHECK_EQ_INT(s[2].n_events, 0);
    rw_engine_get_stats(e, &st);
    CHECK_EQ_INT(st.requests_cancelled, cancelled0 + (finished_first ? 1 : 2));
    rw_engine_cancel_id(e, id[0]); /* finished: a no-op */
    for (int i = 0; i < 4; i++) sink_free(&s[i]);

    /* a stop string across a token boundary: the text ends just before it */
    char spec_stop[8] = "";
    int spec_k = -1; /* the generated token that completes spec_stop, when one fits the test below */
    size_t spec_want = 0;
    sink full;
    sink_init(&full);
    CHECK(rw_engine_submit(e, g_prompt + 40, 20, &p, on_event, &full, &id[0], &err) == RW_OK);
    wait_done(&full);
    /* where each token's text ends in the stream (the streaming detokenizer, as the engine runs it) */
    size_t ends[64], n_ends = 0, tl = 0;
    rw_detok_stream ds = {0};
    for (int k = 0; k < full.n_toks && k < 64; k++) {
        char buf[256];
        size_t n = rw_detok_stream_feed(g_tok, &ds, full.toks[k], false, buf, sizeof buf);
        tl += n <= sizeof buf ? n : 0;
        ends[n_ends++] = tl;
    }
    CHECK_EQ_INT(tl, full.text_len);
    /* a boundary with two bytes of different tokens on each side, on character boundaries, no NUL */
    int k_cut = -1;
    size_t at = 0;
    for (size_t k = 1; k + 1 < n_ends && k_cut < 0; k++) {
        size_t b0 = ends[k - 1], b = ends[k], b1 = ends[k + 1];
        if (b - b0 < 2 || b1 - b < 2) continue;
        bool ok = true;
        for (size_t i = b - 2; i < b + 2; i++) ok &= full.text[i] != 0;
        ok &= ((unsigned char)full.text[b - 2] & 0xC0) != 0x80 && (b + 2 >= full.text_len ||
                                                                  ((unsigned char)full.text[b + 2] & 0xC0) != 0x80);
        if (ok) {
            k_cut = (int)k;
            at = b - 2;
        }
    }
    if (k_cut >= 0) {
        char stop[8];
        memcpy(stop, full.text + at, 4);
        stop[4] = 0;
        const char *stops[] = {"\x01never", stop};
        rw_gen_params ps = greedy(60);
        ps.stop = stops;
        ps.n_stop = 2;
        sink cut;
        sink_init(&cut);
        CHECK(rw_engine_submit(e, g_prompt + 40, 20, &ps, on_event, &cut, &id[0], &err) == RW_OK);
        wait_done(&cut);
        const char *hit = memmem(full.text, full.text_len, stop, strlen(stop));
        size_t want = hit ? (size_t)(hit - full.text) : 0;
        CHECK(hit != NULL && want <= at);
        CHECK_MSG(cut.text_len == want && !memcmp(cut.text, full.text, want), "stop \"%s\": %zu bytes, want %zu", stop,
                  cut.text_len, want);
        CHECK_EQ_INT(cut.finish, RW_FINISH_STOP);
        sink_free(&cut);
        /* for the speculative run below: a boundary between tokens k and
         * k + 1 (which completes the stop string) that are drafts of one
         * step (4 drafts and a bonus token per step after the first token:
         * token k is the step's 1st-3rd draft), so that without the cut the
         * step would draft on past token k + 1 */
        for (size_t k = 1; k + 1 < n_ends && spec_k < 0; k++) {
            size_t b0 = ends[k - 1], b = ends[k], b1 = ends[k + 1];
            if (b - b0 < 2 || b1 - b < 2 || k % 5 == 0 || k % 5 == 4) continue;
            memcpy(spec_stop, full.text + b - 2, 4);
            spec_stop[4] = 0;
            const char *h = memmem(full.text, full.text_len, spec_stop, 4);
            if (!h || (size_t)(h - full.text) != b - 2 || memchr(spec_stop, 0, 4)) continue;
            spec_k = (int)k + 1;
            spec_want = b - 2;
        }
    } else {
        fprintf(stderr, "no token boundary with two bytes each side in the output\n");
        CHECK(k_cut >= 0);
    }
    sink_free(&full);

    /* without ignore_eos: a logit bias makes <|im_end|> (511, end of generation) the greedy choice */
    rw_logit_bias lb = {.token = 511, .bias = 1000.0f};
    rw_gen_params pe = greedy(10);
    pe.ignore_eos = false;
    pe.sampling.logit_bias = &lb;
    pe.sampling.n_logit_bias = 1;
    sink eog;
    sink_init(&eog);
    CHECK(rw_tokenizer_is_eog(g_tok, 511));
    CHECK(rw_engine_submit(e, g_prompt, 10, &pe, on_event, &eog, &id[0], &err) == RW_OK);
    wait_done(&eog);
    CHECK_EQ_INT(eog.finish, RW_FINISH_STOP);
    CHECK_EQ_INT(eog.completion_tokens, 1);
    CHECK_EQ_INT(eog.text_len, 0);
    sink_free(&eog);

    for (int i = 0; i < 200; i++) { /* finished requests leave at the scheduler's next lock */
        rw_engine_get_stats(e, &st);
        if (st.running == 0) break;
        usleep(1000);
    }
    CHECK_EQ_INT(st.running, 0);
    CHECK(st.generated_tokens > 0 && st.steps > 0 && st.ttft.count > 0 && st.batch_size.count == st.steps);
    rw_engine_free(e);

    /* speculative decoding, the model drafting for itself (every draft
     * accepted), always 4 drafts: the same text up to the stop string, and
     * no draft past the token that completes it (tokens 1..spec_k may be
     * drafts; without the cut a step would draft on to its 4th) */
    if (spec_k >= 0) {
        rw_model *dm = NULL;
        CHECK(rw_model_load(g_gguf, &dm, &err) == RW_OK);
        rw_engine_config dc = cfg;
        dc.draft = dm, dc.draft_tok = g_tok, dc.draft_max = 4, dc.draft_fixed = true;
        rw_engine *de = NULL;
        CHECK_MSG(rw_engine_new(g_model, g_tok, &dc, &de, &err) == RW_OK, "%s", err.msg);
        const char *stops[] = {spec_stop};
        rw_gen_params ps = greedy(60);
        ps.stop = stops;
        ps.n_stop = 1;
        sink sp;
        sink_init(&sp);
        CHECK(rw_engine_submit(de, g_prompt + 40, 20, &ps, on_event, &sp, &id[0], &err) == RW_OK);
        wait_done(&sp);
        rw_engine_stats dst;
        for (int i = 0; i < 200; i++) { /* the step's statistics are counted after its events */
            rw_engine_get_stats(de, &dst);
            if (dst.running == 0) break;
            usleep(1000);
        }
        CHECK_EQ_INT(sp.finish, RW_FINISH_STOP);
        CHECK_MSG(sp.text_len == spec_want, "speculative stop: %zu bytes, want %zu", sp.text_len, spec_want);
        CHECK(dst.spec_verify > 0);
        CHECK_MSG(dst.spec_drafted <= (uint64_t)spec_k, "drafted %llu tokens, the stop completes at token %d",
                  (unsigned long long)dst.spec_drafted, spec_k);
        sink_free(&sp);
        rw_engine_free(de);
        rw_model_free(dm);
    } else {
        fprintf(stderr, "no stop string for the speculative run\n");
        CHECK(spec_k >= 0);
    }
    rw_tokenizer_free(g_tok);
    rw_model_free(g_ref);
    rw_model_free(g_model);
    rw_gguf_close(g_gguf);
    return rw_test_done();
}
