/* test_prompt_logprobs.c - a request's prompt logprobs
 * (rw_gen_params.prompt_logprobs) on the hybrid qwen35 fixture, with the
 * prefix cache on and prompts fed in chunks of 5:
 *
 *   - a greedy request's generated tokens, sent back as the prompt of a
 *     second request, get bitwise the logprobs and alternatives they had as
 *     generated tokens (decode rows and prefill rows agree);
 *   - the same scoring request again, now that the cache holds its prompt,
 *     restores nothing (cached_tokens 0) and gets the same bits, alone or
 *     batched with another request; the first prompt token's value is NaN;
 *   - each prompt token's rank agrees with its alternatives (greedy ones 1);
 *   - max_tokens 0 ends after the prompt (length, no token), with or
 *     without prompt logprobs, and from a whole cached prompt too;
 *   - out-of-range alternatives are refused. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "harness.h"

#define N_PROMPT 19
#define N_GEN    12
#define K        3

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t toks[64];
    float lp[64];
    rw_token_logprob top[64][K];
    int n;
    float plp[64];
    rw_token_logprob ptop[64][K];
    int32_t rank[64];
    int n_plp_events;
    int64_t prompt_tokens, cached, completion;
    bool done;
    rw_done_reason finish;
} sink;

static void sink_init(sink *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
}

static void on_event(void *user, const rw_gen_event *ev) {
    sink *s = user;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < ev->n_tokens && s->n < 64; i++) {
        s->toks[s->n] = ev->tokens[i];
        if (ev->logprobs) {
            s->lp[s->n] = ev->logprobs[i];
            for (int k = 0; k < ev->n_top && k < K; k++) s->top[s->n][k] = ev->top[i * ev->n_top + k];
        }
        s->n++;
    }
    if (ev->prompt_logprobs) {
        s->n_plp_events++;
        for (int64_t i = 0; i < ev->prompt_tokens && i < 64; i++) {
            s->plp[i] = ev->prompt_logprobs[i];
            s->rank[i] = ev->prompt_ranks[i];
            for (int k = 0; i > 0 && k < ev->n_prompt_top && k < K; k++)
                s->ptop[i][k] = ev->prompt_top[i * ev->n_prompt_top + k];
        }
    }
    if (ev->done) {
        s->done = true;
        s->finish = ev->finish;
        s->prompt_tokens = ev->prompt_tokens;
        s->cached = ev->cached_tokens;
        s->completion = ev->completion_tokens;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

static void wait_done(sink *s) {
    pthread_mutex_lock(&s->mu);
    while (!s->done) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static rw_gen_params params(int64_t max_tokens) {
    return (rw_gen_params){
        .sampling = rw_sampler_params_default(), .max_tokens = max_tokens, .ignore_eos = true, .n_logprobs = -1};
}

static bool same_bits(float a, float b) { return !memcmp(&a, &b, sizeof a); }

/* s scored prompt ids[0..n): its values from position `at` on are gen's generated tokens'. */
static void check_scores(const sink *s, const sink *gen, int at) {
    CHECK(s->n_plp_events == 1);
    CHECK(isnan(s->plp[0]));
    for (int i = 0; i < gen->n; i++) {
        CHECK_MSG(same_bits(s->plp[at + i], gen->lp[i]), "token %d: %.9g scored, %.9g generated", i, s->plp[at + i],
                  gen->lp[i]);
        for (int k = 0; k < K; k++)
            CHECK(s->ptop[at + i][k].token == gen->top[i][k].token &&
                  same_bits(s->ptop[at + i][k].logprob, gen->top[i][k].logprob));
    }
    for (int i = 1; i < at; i++) CHECK(s->plp[i] <= 0.0f && s->ptop[i][0].logprob >= s->plp[i]);
    /* a rank is 1 + the tokens above: as many of the K alternatives as it
     * counts lie above the token (up to K), and greedy tokens rank 1 */
    CHECK(s->rank[0] == 0);
    for (int i = 1; i < at + gen->n; i++) {
        int above = 0;
        for (int k = 0; k < K; k++) above += s->ptop[i][k].logprob > s->plp[i];
        CHECK_MSG(s->rank[i] >= 1 && above == (s->rank[i] - 1 < K ? s->rank[i] - 1 : K), "token %d: rank %d, %d above",
                  i, s->rank[i], above);
    }
    for (int i = 0; i < gen->n; i++) CHECK(s->rank[at + i] == 1); /* greedy */
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    rw_tokenizer *tok = NULL;
    const char *path = rw_test_fixture_path("qwen35/qwen35-Q8_0.gguf");
    if (rw_gguf_open(path, &g, &err) || rw_model_load(g, &m, &err) || rw_tokenizer_load(g, &tok, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    int32_t ids[N_PROMPT + N_GEN];
    for (int i = 0; i < N_PROMPT; i++) ids[i] = (int32_t)((i * 53 + 7) % 500);

    rw_engine *e = NULL;
    const rw_engine_config cfg = {.n_threads = 2,
                                  .max_running = 2,
                                  .max_queued = 4,
                                  .n_ctx = 128,
                                  .prefill_chunk = 5,
                                  .kv_type = RW_KV_F32,
                                  .cache_bytes = 64 << 20};
    CHECK(rw_engine_new(m, tok, &cfg, &e, &err) == RW_OK);

    /* generated: the tokens, their logprobs and alternatives */
    sink gen;
    sink_init(&gen);
    rw_gen_params p = params(N_GEN);
    p.n_logprobs = K;
    CHECK_MSG(rw_engine_submit(e, ids, N_PROMPT, &p, on_event, &gen, NULL, &err) == RW_OK, "%s", err.msg);
    wait_done(&gen);
    CHECK(gen.n == N_GEN && gen.n_plp_events == 0);
    memcpy(ids + N_PROMPT, gen.toks, sizeof gen.toks[0] * N_GEN);

    /* scored: prompt + generated, nothing generated now */
    sink sc;
    sink_init(&sc);
    p = params(0);
    p.prompt_logprobs = true;
    p.n_prompt_top = K;
    CHECK_MSG(rw_engine_submit(e, ids, N_PROMPT + N_GEN, &p, on_event, &sc, NULL, &err) == RW_OK, "%s", err.msg);
    wait_done(&sc);
    CHECK(sc.finish == RW_DONE_LENGTH && sc.n == 0 && sc.completion == 0 && sc.prompt_tokens == N_PROMPT + N_GEN);
    check_scores(&sc, &gen, N_PROMPT);

    /* again, the cache now holding that prompt, with one token generated,
     * batched with a plain request for the same prompt (which takes the
     * cache's entry) */
    sink again, plain;
    sink_init(&again);
    sink_init(&plain);
    p.max_tokens = 1;
    rw_gen_params q = params(4);
    CHECK(rw_engine_submit(e, ids, N_PROMPT + N_GEN, &p, on_event, &again, NULL, &err) == RW_OK);
    CHECK(rw_engine_submit(e, ids, N_PROMPT + N_GEN, &q, on_event, &plain, NULL, &err) == RW_OK);
    wait_done(&again);
    wait_done(&plain);
    CHECK(again.cached == 0 && again.n == 1 && again.finish == RW_DONE_LENGTH);
    CHECK(plain.cached > 0 && plain.n_plp_events == 0);
    check_scores(&again, &gen, N_PROMPT);
    CHECK(plain.toks[0] == again.toks[0]);

    /* one token: nothing to score but the NaN */
    sink one;
    sink_init(&one);
    CHECK(rw_engine_submit(e, ids, 1, &p, on_event, &one, NULL, &err) == RW_OK);
    wait_done(&one);
    CHECK(one.n_plp_events == 1 && isnan(one.plp[0]) && one.n == 1);

    /* max_tokens 0 alone: the prompt computed (then cached), nothing generated; then from the cache */
    for (int round = 0; round < 2; round++) {
        sink z;
        sink_init(&z);
        rw_gen_params zp = params(0);
        CHECK(rw_engine_submit(e, ids, 7, &zp, on_event, &z, NULL, &err) == RW_OK);
        wait_done(&z);
        CHECK(z.finish == RW_DONE_LENGTH && z.n == 0 && z.n_plp_events == 0);
        if (round) CHECK(z.cached == 7);
    }

    /* bad: too many alternatives, a negative max_tokens */
    p.n_prompt_top = RW_MAX_TOP_LOGPROBS + 1;
    CHECK(rw_engine_submit(e, ids, 4, &p, on_event, &one, NULL, &err) == RW_ERR_INVALID_ARG);
    p = params(-1);
    CHECK(rw_engine_submit(e, ids, 4, &p, on_event, &one, NULL, &err) == RW_ERR_INVALID_ARG);

    rw_engine_free(e);
    rw_tokenizer_free(tok);
    rw_model_free(m);
    rw_gguf_close(g);
    return rw_test_done();
}
