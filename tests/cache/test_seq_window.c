/* test_seq_window.c - sliding-window layers (gemma3, gpt-oss) hold their
 * ring, a dense span below it as far as the sequence's budget pays (every
 * position in it restores by itself) and the windows of their kept
 * positions, and stay exact:
 * a prompt fed in random chunk sizes, rewinds to points around every
 * window's start (before, at, inside, after it; in the ring, past it, at
 * a kept old window, at zero) then continued in random chunks, several
 * rewound sequences continued in one batch, and states saved and loaded
 * (then rewound again into the windows they hold) all give logits bitwise
 * equal to one plain pass. The memory held is checked against the ring's
 * bound and the budget's span; with the default budget (which holds these
 * small models' whole KV) every position restores by itself. Seeded
 * (RW_WIN_SEED). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models/model.h"

static uint64_t rs;
static uint64_t rnd(void) {
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int64_t rint_(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

/* the retention's spans (models/seq.c): the ring reaches RING below the
 * length; multiples of OLD are kept further back */
#define RING 319
#define OLD  1024

static int64_t V, N;
static int32_t *tok;
static float *ref, *out;
static rw_model *m;
static rw_threadpool *pool;

/* Feeds tokens len..to-1 in random chunks, checking every row. */
static bool extend(rw_model_seq *s, int64_t to, int64_t max_chunk, const char *what) {
    rw_error err = {0};
    for (int64_t at = rw_model_seq_length(s); at < to;) {
        const int64_t k = rint_(1, to - at < max_chunk ? to - at : max_chunk);
        rw_forward_args a = {.tokens = tok + at, .n = k, .logits = out, .all_logits = true, .pool = pool};
        if (rw_model_forward(m, s, &a, &err) != RW_OK) {
            CHECK_MSG(false, "%s: %s", what, err.msg);
            return false;
        }
        if (memcmp(out, ref + at * V, (size_t)(k * V) * sizeof(float))) {
            CHECK_MSG(false, "%s: %lld rows at %lld differ", what, (long long)k, (long long)at);
            return false;
        }
        at += k;
    }
    return true;
}

static void count_block(void *ctx, const void *block, size_t bytes, bool kv) {
    (void)block, (void)kv, (void)bytes;
    ++*(size_t *)ctx;
}

/* Pages of the dense span below the ring the tests buy, and a mark
 * outside span and ring (its window is kept first). */
#define SPAN_PAGES 3
#define MARK       300

/* A target around one of the interesting points of a sequence of length L
 * with window W. */
static int64_t pick(int64_t L, int64_t W) {
    int64_t n;
    switch (rint_(0, 9)) {
    case 0: n = L - rint_(1, W); break;              /* inside the live window */
    case 1: n = L - W + rint_(-1, 1); break;         /* at the window's start */
    case 2: n = L - W - rint_(2, 64); break;         /* just before it, in the ring */
    case 3: n = L - RING - W + rint_(-2, 2); break;  /* the ring's end */
    case 4: n = L - RING - W - rint_(3, 200); break; /* past the ring */
    case 5:
        n = OLD + rint_(-1, 1) + (rint_(0, 1) ? W : 0); /* a kept old window */
        break;
    case 6: n = rint_(0, W + 1); break; /* the first window */
    case 7: n = 0; break;
    default: n = rint_(0, L); break;
    }
    return n < 0 ? 0 : n > L ? L : n;
}

static void run_model(const char *rel, uint64_t seed) {
    rw_gguf *g = NULL;
    rw_error err = {0};
    m = NULL;
    if (rw_gguf_open(rw_test_fixture_path(rel), &g, &err) || rw_model_load(g, &m, &err)) {
        CHECK_MSG(false, "%s: %s", rel, err.msg);
        rw_gguf_close(g);
        return;
    }
    const rw_model_hparams *hp = rw_model_get_hparams(m);
    V = hp->n_vocab;
    const int64_t W = hp->n_swa;
    CHECK_MSG(W > 0 && W < 64, "%s: the fixture's window (%lld) is expected small", rel, (long long)W);
    CHECK(rw_threadpool_new(2, &pool, &err) == RW_OK);
    rs = seed;
    N = rw_test_sanitized() ? 1100 : 1400; /* past the first old window at 1024 */
    tok = malloc((size_t)N * sizeof *tok);
    for (int64_t i = 0; i < N; i++) tok[i] = (int32_t)rint_(1, V - 1);
    ref = malloc((size_t)(N * V) * sizeof *ref);
    out = malloc((size_t)(N * V) * sizeof *out);
    rw_model_seq *s = NULL;
    rw_forward_args a = {.tokens = tok, .n = N, .logits = ref, .all_logits = true, .pool = pool};
    CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &s, &err) == RW_OK && rw_model_forward(m, s, &a, &err) == RW_OK);
    rw_model_seq_free(s);
    const int fails = rw_test_failures;

    int n_slide = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        const int P = hp->swa_pattern;
        n_slide += P == 0 || il % P < P - 1;
    }
    const int n_full = hp->n_layer - n_slide;
    const int64_t pages_full = (N + 63) / 64;

    /* the default budget: every page held, every position restores by itself */
    CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &s, &err) == RW_OK);
    extend(s, N, 600, "chunked prefill, default budget");
    {
        size_t held = 0;
        rw_model_seq_each_block(s, count_block, &held);
        CHECK_MSG(held == (size_t)(hp->n_layer * pages_full),
                  "%s: %zu pages held with the default budget, full KV %lld", rel, held,
                  (long long)(hp->n_layer * pages_full));
        for (int64_t n = 0; n <= N; n++) {
            int64_t rep, rec;
            CHECK(rw_model_seq_rewind_cost(s, n, &rep, &rec) == RW_OK);
            if (rec) {
                CHECK_MSG(false, "%s: default budget: a rewind to %lld recomputes %lld", rel, (long long)n,
                          (long long)rec);
                break;
            }
        }
        for (int trial = 0; trial < (rw_test_sanitized() ? 3 : 8) && rw_test_failures == fails; trial++) {
            rw_model_seq *c = NULL;
            CHECK(rw_model_seq_clone(s, &c, &err) == RW_OK);
            CHECK(rw_model_seq_rewind(c, rint_(0, N), pool, &err) == RW_OK);
            extend(c, N, rint_(1, 3) == 1 ? 1 : 300, "default budget: rewound, continued");
            rw_model_seq_free(c);
        }
    }
    rw_model_seq_free(s);

    /* a budget of one mark's window and SPAN_PAGES pages of every sliding
     * layer: the ring, the mark's window and a span of SPAN_PAGES pages
     * below the ring; the old window at 1024 lies in the span */
    CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &s, &err) == RW_OK);
    CHECK(rw_model_seq_mark(s, MARK, &err) == RW_OK);
    const size_t page_bytes = rw_model_seq_checkpoint_bytes(s) / (size_t)(n_slide * ((W - 1 + 63) / 64 + 1));
    rw_model_seq_set_checkpoint_budget(s, rw_model_seq_checkpoint_bytes(s) + (size_t)SPAN_PAGES * n_slide * page_bytes);
    extend(s, N, 600, "chunked prefill");
    {
        /* ring: W + RING positions (pages straddling both ends), the span, the mark's window */
        const int64_t pages_slide = (W + RING + 63) / 64 + 1 + SPAN_PAGES + (W + 63) / 64 + 1;
        size_t held = 0;
        rw_model_seq_each_block(s, count_block, &held);
        const size_t bound = (size_t)(n_full * pages_full + n_slide * pages_slide);
        const size_t full = (size_t)(hp->n_layer * pages_full);
        CHECK_MSG(held <= bound && held < full, "%s: %zu pages held, ring and span bound %zu, full KV %zu", rel, held,
                  bound, full);
        printf("%-28s %lld tokens: %zu KV pages (full KV: %zu)\n", rel, (long long)N, held, full);
        int64_t rep, rec;
        CHECK(rw_model_seq_rewind_cost(s, OLD, &rep, &rec) == RW_OK);
        CHECK_MSG(rec == 0, "%s: the kept window at %d costs %lld to restore", rel, OLD, (long long)rec);
        CHECK(rw_model_seq_rewind_cost(s, MARK, &rep, &rec) == RW_OK);
        CHECK_MSG(rec == 0, "%s: the mark at %d costs %lld to restore", rel, MARK, (long long)rec);
        /* every position whose window starts in the span or the ring */
        const int64_t lo = (N - RING + 1 - W) / 64 - SPAN_PAGES, from = lo * 64 + W - 1;
        for (int64_t n = from; n <= N; n++) {
            CHECK(rw_model_seq_rewind_cost(s, n, &rep, &rec) == RW_OK);
            if (rec) {
                CHECK_MSG(false, "%s: a rewind to %lld (span from %lld) recomputes %lld", rel, (long long)n,
                          (long long)from, (long long)rec);
                break;
            }
        }
        CHECK(rw_model_seq_rewind_cost(s, from - 64, &rep, &rec) == RW_OK);
        CHECK_MSG(rec > 0, "%s: below the span (%lld) nothing recomputed", rel, (long long)from - 64);
    }

    /* rewinds around every window's start, then continued; chained (fewer
     * under the sanitizers, where the release build has run them all) */
    int n_rec = 0, n_free = 0;
    const int n_trials = rw_test_sanitized() ? 12 : 40;
    for (int trial = 0; trial < n_trials && rw_test_failures == fails; trial++) {
        rw_model_seq *c = NULL;
        CHECK(rw_model_seq_clone(s, &c, &err) == RW_OK);
        for (int hop = 0; hop < 3 && rw_test_failures == fails; hop++) {
            const int64_t L = rw_model_seq_length(c), n = pick(L, W);
            int64_t rep, rec;
            CHECK(rw_model_seq_rewind_cost(c, n, &rep, &rec) == RW_OK);
            if (L - n <= 256 && L == N)
                CHECK_MSG(rec < 64, "%s: rewind %lld -> %lld recomputes %lld", rel, (long long)L, (long long)n,
                          (long long)rec);
            n_rec += rec > 0, n_free += rec == 0;
            CHECK_MSG(rw_model_seq_rewind(c, n, pool, &err) == RW_OK, "%s", err.msg);
            CHECK_EQ_INT(rw_model_seq_length(c), n);
            const int64_t r = rint_(1, 500), to = n + r < N ? n + r : N;
            char what[96];
            snprintf(what, sizeof what, "%s trial %d: rewind %lld -> %lld, continued", rel, trial, (long long)L,
                     (long long)n);
            extend(c, to, rint_(1, 3) == 1 ? 1 : 300, what);
        }
        rw_model_seq_free(c);
    }
    printf("%-28s rewinds: %d free, %d with recompute\n", rel, n_free, n_rec);
    CHECK_MSG(n_rec > 0 && n_free > 0, "%s: the rewinds did not cross windows both ways", rel);

    /* rewound sequences continued together in one batch */
    for (int trial = 0; trial < 6 && rw_test_failures == fails; trial++) {
        rw_model_seq *c[3] = {NULL, NULL, NULL};
        rw_batch_item it[3];
        float *o[3];
        for (int i = 0; i < 3; i++) {
            if (i < 2) {
                CHECK(rw_model_seq_clone(s, &c[i], &err) == RW_OK);
                CHECK(rw_model_seq_rewind(c[i], pick(N, W), pool, &err) == RW_OK);
            } else {
                CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &c[i], &err) == RW_OK);
            }
            const int64_t l = rw_model_seq_length(c[i]), k = l + 80 < N ? 80 : N - l;
            o[i] = malloc((size_t)((k ? k : 1) * V) * sizeof(float));
            it[i] = (rw_batch_item){.seq = c[i], .tokens = tok + l, .n = k, .logits = o[i], .all_logits = true};
        }
        int k = 0;
        for (int i = 0; i < 3; i++)
            if (it[i].n) it[k++] = it[i];
        CHECK_MSG(rw_model_forward_batch(m, it, k, pool, &err) == RW_OK, "%s", err.msg);
        for (int i = 0; i < k; i++) {
            const int64_t at = rw_model_seq_length(it[i].seq) - it[i].n;
            CHECK_MSG(!memcmp(it[i].logits, ref + at * V, (size_t)(it[i].n * V) * sizeof(float)),
                      "%s batch %d: sequence %d at %lld differs", rel, trial, i, (long long)at);
        }
        for (int i = 0; i < 3; i++) rw_model_seq_free(c[i]), free(o[i]);
    }

    /* saved and loaded (after a rewind), continued, rewound into the loaded windows */
    for (int trial = 0; trial < 6 && rw_test_failures == fails; trial++) {
        rw_model_seq *c = NULL, *t = NULL;
        CHECK(rw_model_seq_clone(s, &c, &err) == RW_OK);
        if (trial) CHECK(rw_model_seq_rewind(c, pick(N, W), pool, &err) == RW_OK);
        uint8_t *data = NULL;
        size_t len = 0;
        CHECK(rw_model_seq_save_buffer(c, &data, &len, &err) == RW_OK);
        CHECK(rw_model_seq_new(m, RW_KV_F32, 0, &t, &err) == RW_OK);
        CHECK_MSG(rw_model_seq_load_buffer(t, data, len, &err) == RW_OK, "%s", err.msg);
        const int64_t L = rw_model_seq_length(c);
        CHECK_EQ_INT(rw_model_seq_length(t), L);
        for (int64_t n = 0; n <= L; n += 1 + n / 8) { /* the loaded state returns where the saved one did */
            int64_t r1, r2, c1, c2;
            CHECK(rw_model_seq_rewind_cost(c, n, &r1, &c1) == RW_OK &&
                  rw_model_seq_rewind_cost(t, n, &r2, &c2) == RW_OK);
            if (c1 != c2) {
                CHECK_MSG(false, "%s: rewind to %lld costs %lld saved, %lld loaded", rel, (long long)n, (long long)c1,
                          (long long)c2);
                break;
            }
        }
        extend(t, L + 40 < N ? L + 40 : N, 17, "loaded, continued");
        CHECK(rw_model_seq_rewind(t, pick(rw_model_seq_length(t), W), pool, &err) == RW_OK);
        extend(t, N, 300, "loaded, rewound, continued");
        free(data);
        rw_model_seq_free(c);
        rw_model_seq_free(t);
    }
    rw_model_seq_free(s);
    free(tok), free(ref), free(out);
    rw_threadpool_free(pool);
    rw_model_free(m);
    rw_gguf_close(g);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    const char *e = getenv("RW_WIN_SEED");
    const uint64_t seed = e ? strtoull(e, NULL, 10) : 20261129;
    static const char *models[] = {"gemma3/gemma3-F32.gguf", "gpt-oss/gpt-oss-F32.gguf",
                                   "gpt-oss/gpt-oss-MXFP4_MOE.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        if (!rw_test_sanitized() || i < 2) run_model(models[i], seed + i);
    return rw_test_done();
}
