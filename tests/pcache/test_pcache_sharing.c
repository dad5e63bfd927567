/* test_pcache_sharing.c - prefix-cache entries share KV pages and recurrent
 * checkpoints, and the budget counts them once.
 *
 * N requests share a long prefix (532 tokens: 8 full KV pages and part of a
 * ninth) and differ in a short tail, served as the server does (the prefix
 * end marked as a message boundary, each request started from the cache and
 * left in it). Then:
 *   - the entries together hold about one prefix's KV (8 shared pages plus
 *     one page of their own each), not N, and far fewer recurrent bytes
 *     than N separate sequences;
 *   - a budget that fits the shared figure but not N separate copies keeps
 *     all N entries (nothing evicted), and the running figures match a
 *     recount from scratch (rw_pcache_check) after every step;
 *   - copy-on-write keeps entries immutable: a request that extends an
 *     entry (writing into its last, shared page) and then rewinds into the
 *     shared prefix and writes there leaves every entry's saved state byte
 *     for byte what it was, and every output (the request's, and each
 *     entry's continued) is bitwise the output computed from scratch.
 * On a dense model (KV only) and a hybrid one (KV and DeltaNet). */
#include <stdlib.h>
#include <string.h>

#include "pcache/pcache.h"
#include "harness.h"

#define P 532  /* shared prefix */
#define S 12   /* each request's own tail */
#define N 8    /* requests (4 under the sanitizers) */
#define MORE 5 /* tokens generated when an entry is continued */

static uint64_t rs = 12345;
static int32_t rtok(int64_t V) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)(1 + (rs >> 33) % (uint64_t)(V - 1));
}

/* Logits of the last of tokens[0..n) computed from scratch. */
static void reference(rw_model *m, const int32_t *t, int64_t n, rw_threadpool *pool, float *logits) {
    rw_error err = {0};
    rw_model_seq *s = NULL;
    CHECK(rw_model_seq_new(m, RW_KV_F16, 0, &s, &err) == RW_OK);
    rw_forward_args a = {.tokens = t, .n = n, .logits = logits, .pool = pool};
    CHECK_MSG(rw_model_forward(m, s, &a, &err) == RW_OK, "%s", err.msg);
    rw_model_seq_free(s);
}

/* Serves prompt t[0..n) through the cache: a sequence from it (the prefix
 * end marked), the rest computed, the sequence left in the cache. Returns
 * the tokens the cache supplied. */
static int64_t serve(rw_model *m, rw_pcache *c, const int32_t *t, int64_t n, rw_threadpool *pool, float *logits) {
    rw_error err = {0};
    rw_model_seq *s = NULL;
    int64_t reused = 0;
    CHECK_MSG(rw_pcache_acquire(c, t, n, pool, &s, &reused, logits, NULL, &err) == RW_OK, "%s", err.msg);
    if (!s) return 0;
    CHECK(rw_model_seq_mark(s, P, &err) == RW_OK);
    if (reused < n) {
        rw_forward_args a = {.tokens = t + reused, .n = n - reused, .logits = logits, .pool = pool};
        CHECK_MSG(rw_model_forward(m, s, &a, &err) == RW_OK, "%s", err.msg);
    }
    rw_pcache_insert(c, s, logits, 0, NULL);
    CHECK_MSG(rw_pcache_check(c, &err) == RW_OK, "%s", err.msg);
    return reused;
}

/* The saved state of entry t[0..n) (a full-length copy from the cache). */
static uint8_t *entry_state(rw_pcache *c, const int32_t *t, int64_t n, rw_threadpool *pool, float *logits,
                            size_t *len, rw_model_seq **out) {
    rw_error err = {0};
    rw_model_seq *s = NULL;
    int64_t reused = 0;
    CHECK(rw_pcache_acquire(c, t, n, pool, &s, &reused, logits, NULL, &err) == RW_OK);
    CHECK_EQ_INT(reused, n);
    uint8_t *buf = NULL;
    CHECK(rw_model_seq_save_buffer(s, &buf, len, &err) == RW_OK);
    *out = s;
    return buf;
}

static void run(const char *rel, int n) {
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    rw_error err = {0};
    if (rw_gguf_open(rw_test_fixture_path(rel), &g, &err) || rw_model_load(g, &m, &err)) {
        CHECK_MSG(false, "%s: %s", rel, err.msg);
        rw_gguf_close(g);
        return;
    }
    const int64_t V = rw_model_get_hparams(m)->n_vocab;
    rw_threadpool *pool = NULL;
    CHECK(rw_threadpool_new(2, &pool, &err) == RW_OK);
    int32_t t[N][P + S + MORE];
    for (int64_t j = 0; j < P; j++) t[0][j] = rtok(V);
    for (int i = 0; i < n; i++) {
        memcpy(t[i], t[0], P * sizeof(int32_t));
        for (int64_t j = P; j < P + S + MORE; j++) t[i][j] = rtok(V);
    }
    float *lg = malloc((size_t)V * sizeof *lg), *ref = malloc((size_t)V * sizeof *ref);

    /* one request alone: what a single entry holds */
    size_t kv_one, rec_one;
    {
        rw_model_seq *s = NULL;
        CHECK(rw_model_seq_new(m, RW_KV_F16, 0, &s, &err) == RW_OK);
        CHECK(rw_model_seq_mark(s, P, &err) == RW_OK);
        rw_forward_args a = {.tokens = t[0], .n = P + S, .logits = lg, .pool = pool};
        CHECK(rw_model_forward(m, s, &a, &err) == RW_OK);
        rw_model_seq_bytes_by_kind(s, &kv_one, &rec_one);
        rw_model_seq_free(s);
    }

    rw_pcache_config cfg = {.mem_bytes = (size_t)1 << 30};
    rw_pcache *c = NULL;
    CHECK(rw_pcache_new(m, RW_KV_F16, 0, &cfg, &c, &err) == RW_OK);
    for (int i = 0; i < n; i++) {
        const int64_t reused = serve(m, c, t[i], P + S, pool, lg);
        CHECK_EQ_INT(reused, i ? P : 0); /* the shared prefix, exactly */
        reference(m, t[i], P + S, pool, ref);
        CHECK_MSG(!memcmp(lg, ref, (size_t)V * sizeof *lg), "%s request %d: output differs from the reference", rel, i);
    }
    rw_pcache_stats st;
    rw_pcache_get_stats(c, &st);
    printf("%-28s %d entries of %d tokens: KV %.2f MiB (one alone %.2f), recurrent %.2f MiB (one alone %.2f), "
           "%.2f MiB in all, %.2f MiB unshared\n",
           rel, n, P + S, st.bytes_kv / 1048576.0, kv_one / 1048576.0, st.bytes_recurrent / 1048576.0,
           rec_one / 1048576.0, st.bytes_kv_and_state / 1048576.0, st.bytes_unshared / 1048576.0);
    CHECK_EQ_INT((int64_t)st.entries, n);
    /* KV: 8 pages shared by all, the 9th (prefix end + tail) each its own:
     * (8 + n) / 9 of one entry's, plus tables */
    CHECK_MSG(st.bytes_kv <= kv_one * (size_t)(8 + n) / 9 + kv_one / 20, "%s: KV %llu bytes, want about %zu", rel,
              (unsigned long long)st.bytes_kv, kv_one * (size_t)(8 + n) / 9);
    CHECK(st.bytes_kv >= kv_one);
    if (rec_one) /* the checkpoints up to the prefix end are shared; live state and log are not */
        CHECK_MSG(st.bytes_recurrent < rec_one * (size_t)n / 2, "%s: recurrent %llu bytes for %d entries of %zu", rel,
                  (unsigned long long)st.bytes_recurrent, n, rec_one);
    CHECK(st.bytes_unshared >= (uint64_t)n * (kv_one + rec_one));
    const uint64_t shared_total = st.bytes_kv_and_state + st.bytes_logits;

    /* copy-on-write: entries stay what they were */
    uint8_t *before[N];
    size_t blen[N];
    for (int i = 0; i < n; i++) {
        rw_model_seq *s;
        before[i] = entry_state(c, t[i], P + S, pool, lg, &blen[i], &s);
        rw_model_seq_free(s);
    }
    {
        /* extend entry 0 (its last page is shared with the entry) ... */
        int32_t x[P + S + 40];
        memcpy(x, t[0], (P + S) * sizeof(int32_t));
        for (int j = P + S; j < P + S + 40; j++) x[j] = rtok(V);
        rw_model_seq *r = NULL;
        int64_t reused = 0;
        CHECK(rw_pcache_acquire(c, x, P + S + 40, pool, &r, &reused, lg, NULL, &err) == RW_OK);
        CHECK_EQ_INT(reused, P + S);
        rw_forward_args a = {.tokens = x + P + S, .n = 40, .logits = lg, .pool = pool};
        CHECK(rw_model_forward(m, r, &a, &err) == RW_OK);
        reference(m, x, P + S + 40, pool, ref);
        CHECK_MSG(!memcmp(lg, ref, (size_t)V * sizeof *lg), "%s: extended request differs", rel);
        /* ... then rewind into page 1, shared by every entry, and write there */
        CHECK(rw_model_seq_rewind(r, 100, pool, &err) == RW_OK);
        for (int j = 100; j < 130; j++) x[j] = rtok(V);
        rw_forward_args b = {.tokens = x + 100, .n = 30, .logits = lg, .pool = pool};
        CHECK(rw_model_forward(m, r, &b, &err) == RW_OK);
        reference(m, x, 130, pool, ref);
        CHECK_MSG(!memcmp(lg, ref, (size_t)V * sizeof *lg), "%s: rewound request differs", rel);
        rw_pcache_insert(c, r, lg, 0, NULL);
        CHECK_MSG(rw_pcache_check(c, &err) == RW_OK, "%s", err.msg);
    }
    for (int i = 0; i < n; i++) {
        rw_model_seq *s;
        size_t len;
        uint8_t *after = entry_state(c, t[i], P + S, pool, lg, &len, &s);
        CHECK_MSG(len == blen[i] && !memcmp(after, before[i], len), "%s: entry %d changed", rel, i);
        /* and it continues as a sequence computed from scratch */
        rw_forward_args a = {.tokens = t[i] + P + S, .n = MORE, .logits = lg, .pool = pool};
        CHECK(rw_model_forward(m, s, &a, &err) == RW_OK);
        reference(m, t[i], P + S + MORE, pool, ref);
        CHECK_MSG(!memcmp(lg, ref, (size_t)V * sizeof *lg), "%s: entry %d continued differs", rel, i);
        rw_model_seq_free(s);
        free(after), free(before[i]);
    }
    rw_pcache_free(c);

    /* a budget that holds the shared figure, not N separate copies */
    cfg.mem_bytes = shared_total + shared_total / 16;
    CHECK(cfg.mem_bytes < st.bytes_unshared);
    CHECK(rw_pcache_new(m, RW_KV_F16, 0, &cfg, &c, &err) == RW_OK);
    for (int i = 0; i < n; i++) serve(m, c, t[i], P + S, pool, lg);
    rw_pcache_get_stats(c, &st);
    CHECK_MSG(st.evictions == 0 && st.entries == (uint64_t)n, "%s: %llu evictions, %llu entries under a budget of %zu", rel,
              (unsigned long long)st.evictions, (unsigned long long)st.entries, cfg.mem_bytes);
    rw_pcache_free(c);

    free(lg), free(ref);
    rw_threadpool_free(pool);
    rw_model_free(m);
    rw_gguf_close(g);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    /* under the sanitizers (about ten times slower) the hybrid alone, fewer entries */
    const bool san = rw_test_sanitized();
    if (!san) run("llama/llama-F32.gguf", N);
    run("qwen35/qwen35-F32.gguf", san ? 4 : N);
    return rw_test_done();
}
