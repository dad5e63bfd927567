/* test_engine_budget.c - the running state's budget (max_state_bytes,
 * admission by bytes) and the state figure in the statistics:
 *
 *   - with a budget smaller than one sequence, requests run one at a time
 *     (never two in the batch), all finish, and their tokens are those of
 *     an engine without the budget running them together (batch
 *     invariance); the deferrals are counted;
 *   - kv_bytes is the running sequences' state while they run and 0 once
 *     the engine is idle (it used to keep the last step's figure). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "harness.h"

#define N_REQ 3
#define N_GEN 12

typedef struct {
    pthread_mutex_t mu;
    int32_t toks[64];
    int n;
    bool done;
} sink;

static void on_event(void *user, const rw_gen_event *ev) {
    sink *s = user;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < ev->n_tokens && s->n < 64; i++) s->toks[s->n++] = ev->tokens[i];
    if (ev->done) s->done = true;
    pthread_mutex_unlock(&s->mu);
}

static bool all_done(sink *s) {
    bool d = true;
    for (int i = 0; i < N_REQ; i++) {
        pthread_mutex_lock(&s[i].mu);
        d &= s[i].done;
        pthread_mutex_unlock(&s[i].mu);
    }
    return d;
}

/* Runs N_REQ greedy requests (prompts of 10, 14, 18 ids) on e; the most
 * sequences seen running at once. */
static int run(rw_engine *e, const int32_t *prompt, sink *out) {
    rw_gen_params p = {.sampling = rw_sampler_params_default(), .max_tokens = N_GEN, .ignore_eos = true,
                       .n_logprobs = -1};
    p.sampling.temperature = 0;
    for (int i = 0; i < N_REQ; i++) {
        memset(&out[i], 0, sizeof out[i]);
        pthread_mutex_init(&out[i].mu, NULL);
    }
    rw_error err = {0};
    for (int i = 0; i < N_REQ; i++) {
        uint64_t id;
        CHECK_MSG(rw_engine_submit(e, prompt, 10 + 4 * i, &p, on_event, &out[i], &id, &err) == RW_OK, "%s", err.msg);
    }
    int most = 0;
    for (int k = 0; k < 20000 && !all_done(out); k++) {
        rw_engine_stats st;
        rw_engine_get_stats(e, &st);
        if (st.running > most) most = st.running;
        usleep(200);
    }
    CHECK(all_done(out));
    return most;
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
    int32_t prompt[32];
    for (int i = 0; i < 32; i++) prompt[i] = (7 + 37 * i) % rw_tokenizer_n_vocab(tok);

    rw_engine_config cfg = {.n_threads = 1, .max_running = 4, .max_queued = 8, .n_ctx = 64, .prefill_chunk = 64,
                            .kv_type = RW_KV_F32};
    rw_engine *free_e = NULL, *tight = NULL;
    CHECK(rw_engine_new(m, tok, &cfg, &free_e, &err) == RW_OK);
    static sink a[N_REQ], b[N_REQ];
    int most_free = run(free_e, prompt, a);
    rw_engine_stats st;
    for (int k = 0; k < 500; k++) { /* the scheduler leaves the step, then idles */
        rw_engine_get_stats(free_e, &st);
        if (st.running == 0 && st.kv_bytes == 0) break;
        usleep(2000);
    }
    CHECK_EQ_INT(st.running, 0);
    CHECK_MSG(st.kv_bytes == 0, "idle engine reports %zu bytes of running state", st.kv_bytes);
    rw_engine_free(free_e);

    cfg.max_state_bytes = 1; /* less than any sequence */
    CHECK(rw_engine_new(m, tok, &cfg, &tight, &err) == RW_OK);
    int most_tight = run(tight, prompt, b);
    rw_engine_get_stats(tight, &st);
    CHECK_MSG(most_tight == 1, "with a 1-byte state budget, %d sequences ran at once", most_tight);
    CHECK(st.held_for_memory > 0);
    fprintf(stderr, "at most %d running without a budget, %d with; %llu admissions deferred\n", most_free,
            most_tight, (unsigned long long)st.held_for_memory);
    for (int i = 0; i < N_REQ; i++) {
        CHECK_EQ_INT(a[i].n, N_GEN);
        CHECK_EQ_INT(b[i].n, N_GEN);
        CHECK_MSG(!memcmp(a[i].toks, b[i].toks, sizeof a[i].toks), "request %d: tokens differ under the budget", i);
    }
    rw_engine_free(tight);
    rw_tokenizer_free(tok);
    rw_model_free(m);
    rw_gguf_close(g);
    return rw_test_done();
}
