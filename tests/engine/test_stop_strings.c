/* test_stop_strings.c - the engine's stop strings (output.c with its
 * automaton, stop_match.c), fed tokens directly through
 * rw_engine__output_accepted on a hand-made request:
 *
 *   - the events (text sent and when, finish) equal a plain restatement of
 *     the rule on the whole text, for thousands of random token sequences
 *     and stop sets built from the same pieces (overlapping, nested,
 *     repeated, matches spanning tokens, several matches in one token);
 *   - the cost per token does not grow with the text held back: 16 stop
 *     strings (64 KiB, the limit) of which one keeps matching 48 KiB of
 *     output; the earlier scan (n_stop x held length per token) took about
 *     a minute here, the automaton milliseconds. The bound (5 s) has a wide
 *     margin both ways.
 *   - the engine refuses stop strings over RW_MAX_STOP_BYTES. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine_int.h"
#include "harness.h"

static rw_tokenizer *g_tok;
static rw_engine *g_eng;

/* ---- what a request produced ---- */

typedef struct {
    char text[1 << 17];
    size_t len;
    int events_with_text;
    char sent_after[512][64]; /* the text sent at each token (truncated), for the comparison */
    size_t sent_len_after[512];
    int n_events;
    rw_finish_reason finish;
} sink;

static void on_event(void *user, const rw_gen_event *ev) {
    sink *s = user;
    if (ev->text_len && s->len + ev->text_len <= sizeof s->text) {
        memcpy(s->text + s->len, ev->text, ev->text_len);
        s->len += ev->text_len;
    }
    if (s->n_events < 512) s->sent_len_after[s->n_events] = s->len;
    s->n_events++;
    if (ev->done) s->finish = ev->finish;
}

static rw_engine__req *new_req(const char *const *stops, int n_stop, int64_t max_tokens, sink *out) {
    rw_engine__req *r = calloc(1, sizeof *r);
    r->p.max_tokens = max_tokens;
    r->p.ignore_eos = true;
    r->p.n_logprobs = -1;
    r->p.stop = stops;
    r->p.n_stop = n_stop;
    r->cap = max_tokens + 1;
    r->tokens = calloc((size_t)r->cap, sizeof *r->tokens);
    r->tok = g_tok;
    r->cb = on_event;
    r->user = out;
    r->stopm = n_stop ? rw_engine__stopm_new(stops, n_stop) : NULL;
    CHECK(!n_stop || r->stopm);
    return r;
}

static void free_req(rw_engine__req *r) {
    rw_engine__req_flush(r); /* the final event, as the scheduler sends it at the step's end */
    free(r->tokens);
    free(r->held);
    rw_engine__stopm_free(r->stopm);
    free(r);
}

/* ---- the rule, stated on the whole text ---- */

/* Earliest start in t[from..n) of a stop string, or -1. */
static long naive_find(const char *t, size_t from, size_t n, const char *const *stops, int n_stop) {
    long best = -1;
    for (int i = 0; i < n_stop; i++) {
        size_t k = strlen(stops[i]);
        for (size_t p = from; p + k <= n; p++)
            if (!memcmp(t + p, stops[i], k)) {
                if (best < 0 || (long)p < best) best = (long)p;
                break;
            }
    }
    return best;
}

/* Longest tail of t[from..n) that is a proper prefix of a stop string. */
static size_t naive_tail(const char *t, size_t from, size_t n, const char *const *stops, int n_stop) {
    size_t keep = 0;
    for (int i = 0; i < n_stop; i++) {
        size_t k = strlen(stops[i]) - 1;
        if (k > n - from) k = n - from;
        for (; k > keep; k--)
            if (!memcmp(t + n - k, stops[i], k)) {
                keep = k;
                break;
            }
    }
    return keep;
}

/* ---- random sequences against the rule ---- */

static uint64_t rng = 0x1234567;
static uint32_t rnd(uint32_t n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33) % n;
}

static void test_equivalence(void) {
    /* token ids whose pieces are short plain ASCII */
    int32_t ids[12];
    char pieces[12][8];
    size_t plen[12];
    int n_ids = 0;
    const int32_t nv = rw_tokenizer_n_vocab(g_tok);
    for (int32_t id = 0; id < nv && n_ids < 12; id++) {
        char buf[16];
        size_t n = rw_token_to_piece(g_tok, id, false, buf, sizeof buf);
        if (n < 1 || n > 3 || rw_tokenizer_is_eog(g_tok, id)) continue;
        bool ascii = true;
        for (size_t i = 0; i < n; i++) ascii &= buf[i] > 32 && buf[i] < 127;
        if (!ascii) continue;
        bool dup = false; /* distinct first bytes keep the alphabet small but varied */
        for (int k = 0; k < n_ids; k++) dup |= pieces[k][0] == buf[0];
        if (dup) continue;
        memcpy(pieces[n_ids], buf, n);
        pieces[n_ids][n] = 0;
        plen[n_ids] = n;
        ids[n_ids++] = id;
    }
    CHECK_EQ_INT(n_ids, 12);
    static sink s;
    static char text[4096];
    int mismatches = 0, n_stopped = 0, n_length = 0;
    for (int iter = 0; iter < 3000 && mismatches < 5; iter++) {
        const int alpha = 2 + (int)rnd(4); /* few distinct tokens: many partial and complete matches */
        const int n_tok = 1 + (int)rnd(40);
        int32_t seq[40];
        size_t len = 0;
        for (int i = 0; i < n_tok; i++) {
            int k = (int)rnd((uint32_t)alpha);
            seq[i] = ids[k];
            memcpy(text + len, pieces[k], plen[k]);
            len += plen[k];
        }
        /* stop strings: substrings of the text (some cross tokens), pieces joined, or a text prefix plus one byte */
        const int n_stop = 1 + (int)rnd(5);
        char stop_buf[5][64];
        const char *stops[5];
        for (int i = 0; i < n_stop; i++) {
            int kind = (int)rnd(3);
            size_t n = 0;
            if (kind == 0 && len > 0) {
                size_t a = rnd((uint32_t)len), b = a + 1 + rnd((uint32_t)(len - a < 12 ? len - a : 12));
                n = b - a;
                memcpy(stop_buf[i], text + a, n);
            } else if (kind == 1) {
                int m = 1 + (int)rnd(4);
                for (int j = 0; j < m; j++) {
                    int k = (int)rnd((uint32_t)alpha);
                    memcpy(stop_buf[i] + n, pieces[k], plen[k]);
                    n += plen[k];
                }
            } else {
                n = 1 + rnd((uint32_t)(len < 20 ? len : 20));
                memcpy(stop_buf[i], text, n);
                stop_buf[i][n++] = pieces[rnd((uint32_t)alpha)][0];
            }
            stop_buf[i][n] = 0;
            stops[i] = stop_buf[i];
        }
        memset(&s, 0, sizeof s);
        rw_engine__req *r = new_req(stops, n_stop, n_tok, &s);
        rw_finish_reason fin = RW_FINISH_NONE;
        int used = 0;
        for (int i = 0; i < n_tok && fin == RW_FINISH_NONE; i++, used++)
            fin = rw_engine__output_accepted(g_eng, r, seq[i], NULL);
        free_req(r);

        /* the rule: after token i the text sent is everything but the possible stop start */
        size_t all = 0, sent = 0;
        rw_finish_reason want = RW_FINISH_NONE;
        bool ok = true;
        for (int i = 0; i < used && ok; i++) {
            size_t held_from = sent;
            int k = 0;
            while (ids[k] != seq[i]) k++;
            memcpy(text + all, pieces[k], plen[k]); /* the same bytes again (text is regenerated in place) */
            all += plen[k];
            long at = naive_find(text, held_from, all, stops, n_stop);
            if (at >= 0) {
                sent = (size_t)at;
                want = RW_FINISH_STOP;
            } else if (i + 1 == n_tok) {
                sent = all;
                want = RW_FINISH_LENGTH;
            } else sent = all - naive_tail(text, held_from, all, stops, n_stop);
            ok = i < 512 && s.sent_len_after[i] == sent;
        }
        ok = ok && s.len == sent && !memcmp(s.text, text, sent) && s.finish == want && used == s.n_events;
        n_stopped += want == RW_FINISH_STOP;
        n_length += want == RW_FINISH_LENGTH;
        if (!ok) {
            mismatches++;
            fprintf(stderr, "case %d: %d tokens, %d stops (first \"%s\"): sent %zu want %zu, finish %d want %d\n",
                    iter, n_tok, n_stop, stops[0], s.len, sent, (int)s.finish, (int)want);
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_MSG(n_stopped > 1000 && n_length > 300, "the cases exercise too little: %d stopped, %d ran to the length",
              n_stopped, n_length);
}

/* ---- the cost does not grow with the text held back ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_cost(void) {
    /* a token whose piece is one plain byte, repeated: the output keeps
     * matching the first stop string (its piece 48 Ki times, then a byte
     * that never comes) */
    int32_t id = -1;
    char c = 0;
    for (int32_t i = 0; i < rw_tokenizer_n_vocab(g_tok) && id < 0; i++) {
        char buf[8];
        if (rw_token_to_piece(g_tok, i, false, buf, sizeof buf) == 1 && buf[0] >= 'a' && buf[0] <= 'z') {
            id = i;
            c = buf[0];
        }
    }
    CHECK(id >= 0);
    if (id < 0) return;
    const size_t held_max = 48 * 1024;
    static char big[48 * 1024 + 2];
    memset(big, c, held_max);
    big[held_max] = c == 'z' ? 'y' : 'z';
    big[held_max + 1] = 0;
    /* 15 others of 1 KiB that share the byte but never match a tail long:
     * the old scan compared each against every tail length of held */
    static char others[15][1024];
    const char *stops[16];
    stops[15] = big;
    for (int i = 0; i < 15; i++) {
        memset(others[i], c, sizeof others[i] - 1);
        others[i][i + 1] = c == 'z' ? 'y' : 'z'; /* differs after i + 1 bytes */
        others[i][sizeof others[i] - 1] = 0;
        stops[i] = others[i];
    }
    size_t total = 0;
    for (int i = 0; i < 16; i++) total += strlen(stops[i]);
    CHECK(total <= RW_MAX_STOP_BYTES);
    static sink s;
    memset(&s, 0, sizeof s);
    const int n_tok = (int)held_max;
    double t0 = now_s();
    rw_engine__req *r = new_req(stops, 16, n_tok, &s);
    rw_finish_reason fin = RW_FINISH_NONE;
    int i = 0;
    for (; i < n_tok && fin == RW_FINISH_NONE; i++) fin = rw_engine__output_accepted(g_eng, r, id, NULL);
    rw_engine__req_flush(r);
    double dt = now_s() - t0;
    CHECK_EQ_INT(i, n_tok);
    CHECK_EQ_INT(fin, RW_FINISH_LENGTH);
    CHECK_EQ_INT(s.len, held_max); /* everything held back to the end, then sent at once */
    CHECK_EQ_INT(s.sent_len_after[100], 0);
    free_req(r);
    fprintf(stderr, "%d tokens with 48 KiB held back under 16 stop strings: %.3f s\n", n_tok, dt);
    CHECK_MSG(dt < 5.0, "stop strings cost %.1f s for %d tokens: the work grows with the text held back", dt, n_tok);
}

static void noop_cb(void *user, const rw_gen_event *ev) {
    (void)user;
    (void)ev;
}

static void test_limit(const rw_model *m) {
    (void)m;
    char *big = malloc(RW_MAX_STOP_BYTES + 2);
    memset(big, 'a', RW_MAX_STOP_BYTES + 1);
    big[RW_MAX_STOP_BYTES + 1] = 0;
    const char *stops[1] = {big};
    rw_gen_params p = {.sampling = rw_sampler_params_default(), .max_tokens = 2, .stop = stops, .n_stop = 1,
                       .n_logprobs = -1};
    int32_t prompt[1] = {1};
    uint64_t rid = 0;
    rw_error err = {0};
    CHECK_EQ_INT(rw_engine_submit(g_eng, prompt, 1, &p, noop_cb, NULL, &rid, &err), RW_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "limit") != NULL);
    free(big);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    rw_error err = {0};
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    const char *path = rw_test_fixture_path("qwen35/qwen35-Q8_0.gguf");
    if (rw_gguf_open(path, &g, &err) || rw_model_load(g, &m, &err) || rw_tokenizer_load(g, &g_tok, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    const rw_engine_config ec = {.n_threads = 1, .max_running = 1, .max_queued = 4, .n_ctx = 64, .prefill_chunk = 16,
                                 .kv_type = RW_KV_F32};
    CHECK(rw_engine_new(m, g_tok, &ec, &g_eng, &err) == RW_OK);
    test_equivalence();
    test_cost();
    test_limit(m);
    rw_engine_free(g_eng);
    rw_tokenizer_free(g_tok);
    rw_model_free(m);
    rw_gguf_close(g);
    return rw_test_done();
}
