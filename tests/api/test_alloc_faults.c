/* test_alloc_faults.c - allocation failures injected, SQLite-style: the
 * process's malloc family is replaced (glibc's documented interposition) by
 * one that fails the Nth allocation after it is armed, for N = 1, 2, ...
 * through each phase of an embedder's work on the qwen35 fixture:
 *
 *   open    rw_model_open (GGUF, weights, tokenizer, template)
 *   seq     a sequence: eval, rewind, save a state file, load it back
 *   engine  a step-driven engine with the prefix cache: two requests
 *           batched, then a third served from the cache
 *
 * Each phase runs until an N passes every allocation it makes. Every failed
 * run must end in an error or a success (never a crash), hold no more
 * allocations afterwards than before (a leak check by count: the
 * replacement counts live blocks), and the same phase run right after
 * without faults must give what it gave before any fault (the same text,
 * the same logits). The loop is exhaustive up to PHASE_MAX_EXHAUSTIVE
 * allocations, then strided so that a phase stays within seconds.
 *
 * The sanitizer build skips it: ASan's allocator replaces malloc itself. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "rewind.h"

#include "alloc_faults.h"

#if FAULTS
/* ---- the phases: each returns 0 on success, else the rw_status; out
 * (may be NULL) gets what the phase produced, to compare ---- */

static const char *g_path;
static rw_model *g_model; /* opened without faults, for the phases after open */
static char g_state[256];

static int phase_open(result *out) {
    rw_model *m = NULL;
    rw_error err = {0};
    rw_model_params mp = rw_model_params_default();
    rw_status st = rw_model_open(g_path, &mp, &m, &err);
    if (!st) {
        int32_t nv = rw_model_n_vocab(m);
        put(out, &nv, sizeof nv);
    }
    rw_model_close(m);
    return st;
}

static int phase_seq(result *out) {
    rw_seq *s = NULL, *t = NULL;
    rw_error err = {0};
    const int32_t ids[24] = {11, 22, 33, 44, 55, 66, 77, 88, 99, 110, 121, 132,
                             143, 154, 165, 176, 187, 198, 209, 220, 231, 242, 253, 264};
    const int32_t nv = rw_model_n_vocab(g_model);
    float *logits = __libc_malloc((size_t)nv * sizeof *logits); /* the test's own: never failed */
    rw_status st = rw_seq_new(g_model, 64, true, &s, &err);
    if (!st) st = rw_seq_eval(s, ids, 20, logits, &err);
    if (!st) st = rw_seq_rewind(s, 12, &err);
    if (!st) st = rw_seq_eval(s, ids + 12, 12, logits, &err);
    if (!st) put(out, logits, (size_t)nv * sizeof *logits);
    if (!st) st = rw_seq_save(s, g_state, &err);
    if (!st) st = rw_seq_new(g_model, 64, true, &t, &err);
    if (!st) st = rw_seq_load(t, g_state, &err);
    if (!st) st = rw_seq_eval(t, ids, 1, logits, &err);
    if (!st) put(out, logits, (size_t)nv * sizeof *logits);
    rw_seq_free(t);
    rw_seq_free(s);
    __libc_free(logits);
    return st;
}

typedef struct {
    char text[512];
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

static int phase_engine(result *out) {
    rw_engine *e = NULL;
    rw_error err = {0};
    rw_engine_params ep = rw_engine_params_default();
    ep.manual = true;
    ep.run.n_threads = 1;
    ep.run.n_ctx = 256;
    ep.run.kv_f32 = true;
    ep.cache_bytes = 16 << 20;
    ep.prefill_chunk = 32;
    rw_status st = rw_engine_open(g_model, &ep, &e, &err);
    if (st) return st;
    rw_gen_options o = rw_gen_options_default();
    o.max_tokens = 6;
    static const char *const prompts[3] = {
        "The quick brown fox jumps over the lazy dog and then the fox runs away. One",
        "The quick brown fox jumps over the lazy dog and then the fox runs away. Two",
        "The quick brown fox jumps over the lazy dog and then the fox runs away. One"};
    collected c[3];
    memset(c, 0, sizeof c);
    int submitted = 0;
    for (int i = 0; i < 2 && !st; i++) {
        st = rw_engine_submit_text(e, prompts[i], &o, collect, &c[i], NULL, &err);
        if (!st) submitted++;
    }
    /* steps until the submitted ones are done (a failed step fails its requests) */
    for (int k = 0; k < 200 && rw_engine_step(e, &err) > 0; k++) {}
    if (!st) {
        st = rw_engine_submit_text(e, prompts[2], &o, collect, &c[2], NULL, &err);
        if (!st) submitted++;
        for (int k = 0; k < 200 && rw_engine_step(e, &err) > 0; k++) {}
    }
    for (int i = 0; i < submitted; i++) {
        CHECK_MSG(c[i].done == 1, "request %d: %d final events", i, c[i].done);
        if (c[i].res.reason == RW_DONE_ERROR && !st) st = RW_ERR_NOMEM;
    }
    if (!st)
        for (int i = 0; i < 3; i++) put(out, c[i].text, c[i].len);
    rw_engine_close(e);
    return st;
}

#endif

int main(void) {
#if !FAULTS
    rw_test_skip("ASan's allocator replaces malloc: no fault injection in the sanitizer build");
#else
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    g_path = rw_test_fixture_path("qwen35/qwen35-Q8_0.gguf");
    snprintf(g_state, sizeof g_state, "/tmp/rw-alloc-faults-%d.state", (int)getpid());
    rw_error err = {0};
    rw_model_params mp = rw_model_params_default();
    if (rw_model_open(g_path, &mp, &g_model, &err)) {
        fprintf(stderr, "%s: %s\n", g_path, err.msg);
        return 1;
    }
    static const phase phases[] = {{"open", phase_open}, {"seq", phase_seq}, {"engine", phase_engine}};
    for (size_t i = 0; i < sizeof phases / sizeof *phases; i++) fault_loop(&phases[i]);
    rw_model_close(g_model);
    unlink(g_state);
    return rw_test_done();
#endif
}
