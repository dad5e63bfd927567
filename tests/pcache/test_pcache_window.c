/* test_pcache_window.c - prefix reuse at any token for sliding-window
 * models (gemma3, gpt-oss) and for recurrent ones whose checkpoint grid
 * fits the budget (lfm2's short convolutions, nemotron_h's Mamba2 and
 * qwen35's DeltaNet at the fixtures' sizes): a long entry (1,000 tokens, the windows crossed
 * many times over) is hit at many random points, each prompt diverging
 * there; the cache's own figures (rw_pcache_usage) say at most 64 of the
 * shared tokens are recomputed, and every output is bitwise the output
 * computed from scratch. An exact repeat recomputes nothing. The same from
 * the disk tier, read back by a new cache after a "restart". The requests
 * go back into the cache as a server leaves them, and the running byte
 * figures are rechecked after each (rw_pcache_check).
 *
 * A recurrent model returns exactly only to its checkpoints: every 64
 * positions where that grid costs at most an eighth of the checkpoint
 * budget (models/seq.c), else every 1024 below the last 256 tokens; for
 * comparison (printed, not checked) the hits with a budget of 4
 * checkpoints, where the old grid is every 1024. Seeded (RW_PCW_SEED). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "pcache/pcache.h"

#define LEN  1000 /* the entry */
#define TAIL 9    /* each prompt's own tokens after the shared prefix */

static uint64_t rs;
static int limit; /* checkpoints a sequence keeps (0: the default budget), as the engine's --checkpoints */
static uint64_t rnd(void) {
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int64_t rint_(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

/* Logits of the last of t[0..n) computed from scratch. */
static void reference(rw_model *m, const int32_t *t, int64_t n, rw_threadpool *pool, float *logits) {
    rw_error err = {0};
    rw_model_seq *s = NULL;
    CHECK(rw_model_seq_new(m, RW_KV_F16, 0, &s, &err) == RW_OK);
    rw_forward_args a = {.tokens = t, .n = n, .logits = logits, .pool = pool};
    CHECK_MSG(rw_model_forward(m, s, &a, &err) == RW_OK, "%s", err.msg);
    rw_model_seq_free(s);
}

/* Serves prompt t[0..n) as the server does: a sequence from the cache,
 * the rest computed (logits of the last token), the sequence left in the
 * cache. *u gets the cache's figures. */
static void serve(rw_model *m, rw_pcache *c, const int32_t *t, int64_t n, rw_threadpool *pool, float *logits,
                  rw_pcache_usage *u) {
    rw_error err = {0};
    rw_model_seq *s = NULL;
    int64_t reused = 0;
    CHECK_MSG(rw_pcache_acquire(c, t, n, pool, &s, &reused, logits, u, &err) == RW_OK, "%s", err.msg);
    if (!s) return;
    rw_model_seq_limit_checkpoints(s, limit);
    if (reused < n) {
        rw_forward_args a = {.tokens = t + reused, .n = n - reused, .logits = logits, .pool = pool};
        CHECK_MSG(rw_model_forward(m, s, &a, &err) == RW_OK, "%s", err.msg);
    }
    rw_pcache_insert(c, s, logits, 0, NULL);
    CHECK_MSG(rw_pcache_check(c, &err) == RW_OK, "%s", err.msg);
}

/* Hits at n_hits random points of the entry t[0..LEN) in c: returns the
 * most shared tokens any of them recomputed. check: at most 64 each. */
static int64_t hits(rw_model *m, rw_pcache *c, const int32_t *t, int n_hits, bool check, bool disk, const char *rel,
                    rw_threadpool *pool) {
    const int64_t V = rw_model_get_hparams(m)->n_vocab;
    float *lg = malloc((size_t)V * sizeof *lg), *ref = malloc((size_t)V * sizeof *ref);
    int32_t p[LEN + TAIL];
    int64_t worst = 0;
    for (int i = 0; i < n_hits; i++) {
        const int64_t h = i == 0 ? LEN - 600 : rint_(1, LEN - 1); /* a hit 600 tokens before the end, then anywhere */
        memcpy(p, t, (size_t)h * sizeof *p);
        for (int64_t j = h; j < h + TAIL; j++) p[j] = (int32_t)rint_(1, V - 1);
        p[h] = t[h] % (V - 1) + 1; /* diverges at h */
        rw_pcache_usage u = {0};
        serve(m, c, p, h + TAIL, pool, lg, &u);
        const int64_t over = u.recomputed - (h + TAIL - u.shared); /* recomputed of what the cache shared */
        if (over > worst) worst = over;
        if (check) {
            CHECK_MSG(u.shared >= h && over <= 64, "%s%s: hit at %lld: %lld shared, %lld recomputed of them", rel,
                      disk ? " (disk)" : "", (long long)h, (long long)u.shared, (long long)over);
            if (disk && i == 0) CHECK_MSG(u.from_disk > 0, "%s: the first hit did not come from the disk", rel);
        }
        reference(m, p, h + TAIL, pool, ref);
        CHECK_MSG(!memcmp(lg, ref, (size_t)V * sizeof *lg), "%s%s: hit at %lld: output differs from the reference", rel,
                  disk ? " (disk)" : "", (long long)h);
    }
    /* the exact repeat: nothing recomputed, the entry's own logits */
    rw_pcache_usage u = {0};
    serve(m, c, t, LEN, pool, lg, &u);
    if (check) CHECK_MSG(u.recomputed == 0, "%s: an exact repeat recomputed %lld", rel, (long long)u.recomputed);
    reference(m, t, LEN, pool, ref);
    CHECK_MSG(!memcmp(lg, ref, (size_t)V * sizeof *lg), "%s: the exact repeat differs", rel);
    free(lg), free(ref);
    return worst;
}

static void run(const char *rel, bool check, int max_checkpoints, uint64_t seed) {
    rw_gguf *g = NULL;
    rw_model *m = NULL;
    rw_error err = {0};
    if (rw_gguf_open(rw_test_fixture_path(rel), &g, &err) || rw_model_load(g, &m, &err)) {
        CHECK_MSG(false, "%s: %s", rel, err.msg);
        rw_gguf_close(g);
        return;
    }
    rs = seed;
    const rw_model_hparams *hp = rw_model_get_hparams(m);
    if (hp->n_swa > 0) CHECK_MSG(LEN > 8 * hp->n_swa, "%s: window %lld", rel, (long long)hp->n_swa);
    rw_threadpool *pool = NULL;
    CHECK(rw_threadpool_new(2, &pool, &err) == RW_OK);
    int32_t t[LEN];
    for (int64_t j = 0; j < LEN; j++) t[j] = (int32_t)rint_(1, hp->n_vocab - 1);
    float *lg = malloc((size_t)hp->n_vocab * sizeof *lg);
    const int n_hits = rw_test_sanitized() ? 6 : 24;

    char dir[] = "/tmp/rw_pcw_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    rw_pcache_config cfg = {.mem_bytes = (size_t)1 << 30, .dir = dir, .dir_bytes = (size_t)1 << 30};
    limit = max_checkpoints;
    rw_pcache *c = NULL;
    CHECK(rw_pcache_new(m, RW_KV_F16, 0, &cfg, &c, &err) == RW_OK);
    rw_pcache_usage u = {0};
    serve(m, c, t, LEN, pool, lg, &u); /* the entry */
    rw_pcache_flush(c, true, 30);
    const int64_t worst = hits(m, c, t, n_hits, check, false, rel, pool);
    rw_pcache_stats st;
    rw_pcache_get_stats(c, &st);
    printf("%-28s %s%d hits in a %d-token entry: at most %lld shared tokens recomputed; %llu entries, KV %.2f MiB "
           "(%.2f MiB unshared)\n",
           rel, max_checkpoints ? "4 checkpoints: " : "", n_hits, LEN, (long long)worst, (unsigned long long)st.entries,
           st.bytes_kv / 1048576.0, st.bytes_unshared / 1048576.0);
    rw_pcache_free(c);

    if (check) { /* a new cache over the same folder: hits served from the entry's file */
        cfg.mem_bytes = (size_t)1 << 30;
        CHECK(rw_pcache_new(m, RW_KV_F16, 0, &cfg, &c, &err) == RW_OK);
        hits(m, c, t, n_hits / 2, true, true, rel, pool);
        rw_pcache_free(c);
    }
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    free(lg);
    rw_threadpool_free(pool);
    rw_model_free(m);
    rw_gguf_close(g);
}

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures");
    const char *e = getenv("RW_PCW_SEED");
    const uint64_t seed = e ? strtoull(e, NULL, 10) : 20261129;
    run("gemma3/gemma3-F32.gguf", true, 0, seed);
    run("gpt-oss/gpt-oss-F32.gguf", true, 0, seed + 1);
    run("lfm2/lfm2-F32.gguf", true, 0, seed + 2);
    run("nemotron_h/nemotron_h-F32.gguf", true, 0, seed + 3);
    if (!rw_test_sanitized()) {
        run("qwen35/qwen35-F32.gguf", true, 0, seed + 4);
        run("qwen35/qwen35-F32.gguf", false, 4, seed + 5);
    }
    return rw_test_done();
}
